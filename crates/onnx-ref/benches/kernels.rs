//! Criterion benches of single kernels on the shapes of the development models: Conv 3x3
//! (resnet-like), depthwise Conv (mobilenet-like), MatMul and Gemm (bert-like), Softmax,
//! LayerNormalization and a broadcasting Add.
//!
//! `cargo bench -p onnx-ref --bench kernels [-- FILTER]`. Every kernel runs through
//! `onnx_ref::eval_node`, the entry point constant folding uses, on seeded random inputs.
//! Sample counts are small (criterion's minimum of 10) so that the whole file finishes in
//! about a minute on two cores; compare medians across runs, not single figures.

use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, Criterion, SamplingMode, Throughput,
};
use onnx_proto::{attribute_proto::AttributeType, AttributeProto, NodeProto};
use onnx_ref::{eval_node, random_tensor, DType, Value};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The opset the benches bind to (LayerNormalization needs 17).
const OPSET: i64 = 17;

/// An attribute of the node under test.
enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
}

fn node(op: &str, inputs: usize, attrs: Vec<(&str, Attr)>) -> NodeProto {
    NodeProto {
        op_type: Some(op.to_string()),
        name: Some(format!("bench_{op}")),
        input: (0..inputs).map(|i| format!("x{i}")).collect(),
        output: vec!["y".to_string()],
        attribute: attrs
            .into_iter()
            .map(|(name, a)| {
                let mut p = AttributeProto {
                    name: Some(name.to_string()),
                    ..AttributeProto::default()
                };
                match a {
                    Attr::Int(v) => {
                        p.r#type = Some(AttributeType::Int as i32);
                        p.i = Some(v);
                    }
                    Attr::Ints(v) => {
                        p.r#type = Some(AttributeType::Ints as i32);
                        p.ints = v;
                    }
                    Attr::Float(v) => {
                        p.r#type = Some(AttributeType::Float as i32);
                        p.f = Some(v);
                    }
                }
                p
            })
            .collect(),
        ..NodeProto::default()
    }
}

/// Seeded random float inputs of the given shapes.
fn inputs(shapes: &[&[usize]]) -> Vec<Option<Value>> {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    shapes
        .iter()
        .map(|s| {
            let t = random_tensor(&mut rng, DType::Float, s)
                .unwrap_or_else(|e| panic!("bench input {s:?}: {e}"));
            Some(Value::Tensor(t))
        })
        .collect()
}

/// Registers one bench case: checks once that the kernel runs, then times `eval_node`.
fn bench_node(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: &str,
    node: &NodeProto,
    inputs: &[Option<Value>],
) {
    if let Err(e) = eval_node(node, OPSET, inputs) {
        panic!("{id}: the kernel fails on the bench inputs: {e}");
    }
    group.bench_function(id, |b| {
        b.iter(|| eval_node(std::hint::black_box(node), OPSET, inputs))
    });
}

fn configure(group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
}

/// Number of multiply-adds of a convolution, as "elements" so criterion prints a rate.
fn conv_macs(n: usize, c_out: usize, hw_out: usize, c_in_per_group: usize, k: usize) -> u64 {
    (n * c_out * hw_out * c_in_per_group * k * k) as u64
}

fn conv(c: &mut Criterion) {
    let mut group = c.benchmark_group("conv3x3");
    configure(&mut group);
    // resnet18 layer1: 64 -> 64 channels at 56x56, and layer3: 256 -> 256 at 14x14.
    for (ch, hw) in [(64usize, 56usize), (256, 14)] {
        let n = node(
            "Conv",
            3,
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        );
        let x = inputs(&[&[1, ch, hw, hw], &[ch, ch, 3, 3], &[ch]]);
        group.throughput(Throughput::Elements(conv_macs(1, ch, hw * hw, ch, 3)));
        bench_node(&mut group, &format!("{ch}x{hw}x{hw}"), &n, &x);
    }
    group.finish();

    let mut group = c.benchmark_group("conv_depthwise3x3");
    configure(&mut group);
    // mobilenet_v2: 144 channels at 56x56 stride 1, 96 -> stride 2 at 112x112, 960 at 7x7.
    for (ch, hw, stride) in [(144usize, 56usize, 1usize), (96, 112, 2), (960, 7, 1)] {
        let n = node(
            "Conv",
            3,
            vec![
                ("group", Attr::Int(ch as i64)),
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ("strides", Attr::Ints(vec![stride as i64; 2])),
            ],
        );
        let x = inputs(&[&[1, ch, hw, hw], &[ch, 1, 3, 3], &[ch]]);
        let out = hw.div_ceil(stride);
        group.throughput(Throughput::Elements(conv_macs(1, ch, out * out, 1, 3)));
        bench_node(&mut group, &format!("{ch}x{hw}x{hw}_s{stride}"), &n, &x);
    }
    group.finish();
}

fn matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("matmul");
    configure(&mut group);
    // bert-tiny (hidden 128, ffn 512) and bert-base (hidden 768) projections, sequence 128;
    // and the batched attention product Q @ K^T of bert-base (12 heads of 64).
    let cases: [(&str, &[usize], &[usize]); 3] = [
        ("1x128x128_128x512", &[1, 128, 128], &[128, 512]),
        ("1x128x768_768x768", &[1, 128, 768], &[768, 768]),
        ("12x128x64_12x64x128", &[1, 12, 128, 64], &[1, 12, 64, 128]),
    ];
    for (id, a, b) in cases {
        let n = node("MatMul", 2, vec![]);
        let x = inputs(&[a, b]);
        let m: usize = a.iter().product::<usize>() / a.last().copied().unwrap_or(1);
        let macs = m * a.last().copied().unwrap_or(1) * b.last().copied().unwrap_or(1);
        group.throughput(Throughput::Elements(macs as u64));
        bench_node(&mut group, id, &n, &x);
    }
    group.finish();

    let mut group = c.benchmark_group("gemm");
    configure(&mut group);
    // A [128, 768] @ B^T ([3072, 768] stored as exported by PyTorch) + bias [3072].
    for (m, k, n) in [(128usize, 128usize, 512usize), (128, 768, 3072)] {
        let gemm = node(
            "Gemm",
            3,
            vec![("transB", Attr::Int(1)), ("alpha", Attr::Float(1.0))],
        );
        let x = inputs(&[&[m, k], &[n, k], &[n]]);
        group.throughput(Throughput::Elements((m * k * n) as u64));
        bench_node(&mut group, &format!("{m}x{k}_{n}x{k}T"), &gemm, &x);
    }
    group.finish();
}

fn softmax(c: &mut Criterion) {
    let mut group = c.benchmark_group("softmax");
    configure(&mut group);
    // Attention scores: bert-tiny (2 heads) and bert-base (12 heads), sequence 128; and the
    // classifier of an ImageNet model.
    let cases: [(&str, &[usize]); 3] = [
        ("1x2x128x128", &[1, 2, 128, 128]),
        ("1x12x128x128", &[1, 12, 128, 128]),
        ("1x1000", &[1, 1000]),
    ];
    for (id, shape) in cases {
        let n = node("Softmax", 1, vec![("axis", Attr::Int(-1))]);
        let x = inputs(&[shape]);
        group.throughput(Throughput::Elements(shape.iter().product::<usize>() as u64));
        bench_node(&mut group, id, &n, &x);
    }
    group.finish();
}

fn layer_norm(c: &mut Criterion) {
    let mut group = c.benchmark_group("layer_normalization");
    configure(&mut group);
    for hidden in [128usize, 768] {
        let n = node(
            "LayerNormalization",
            3,
            vec![("axis", Attr::Int(-1)), ("epsilon", Attr::Float(1e-12))],
        );
        let x = inputs(&[&[1, 128, hidden], &[hidden], &[hidden]]);
        group.throughput(Throughput::Elements((128 * hidden) as u64));
        bench_node(&mut group, &format!("1x128x{hidden}"), &n, &x);
    }
    group.finish();
}

/// Number of elements of the multidirectional broadcast of two shapes (numpy rules).
fn broadcast_len(a: &[usize], b: &[usize]) -> usize {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        (i + s.len())
            .checked_sub(rank)
            .and_then(|j| s.get(j))
            .copied()
            .unwrap_or(1)
    };
    (0..rank).map(|i| dim(a, i).max(dim(b, i))).product()
}

fn add_broadcast(c: &mut Criterion) {
    let mut group = c.benchmark_group("add_broadcast");
    configure(&mut group);
    // Same shape; a per-channel bias over NCHW; a bias over the last axis (bert); a row
    // against a column (both sides broadcast).
    let cases: [(&str, &[usize], &[usize]); 4] = [
        ("1x64x56x56+1x64x56x56", &[1, 64, 56, 56], &[1, 64, 56, 56]),
        ("1x64x56x56+1x64x1x1", &[1, 64, 56, 56], &[1, 64, 1, 1]),
        ("1x128x768+768", &[1, 128, 768], &[768]),
        ("512x1+1x512", &[512, 1], &[1, 512]),
    ];
    for (id, a, b) in cases {
        let n = node("Add", 2, vec![]);
        let x = inputs(&[a, b]);
        let out = broadcast_len(a, b);
        group.throughput(Throughput::Elements(out as u64));
        bench_node(&mut group, id, &n, &x);
    }
    group.finish();
}

criterion_group!(kernels, conv, matmul, softmax, layer_norm, add_broadcast);
criterion_main!(kernels);
