//! Criterion benches of whole-model inference: `Session::run` on resnet18, mobilenet_v2 and
//! bert-tiny (opset 13) from `../shared/models` (or `$ONNX_OPT_SHARED/models`), fed with their
//! `test_data_set_0` inputs. Without the shared data the bench says so and times nothing.
//!
//! `cargo bench -p onnx-ref --bench models [-- FILTER]`. The session is planned once per model
//! (load, external data, planning are outside the timing); only `run` is timed. Before timing,
//! one run's outputs are compared with the stored `output_i.pb`, so a bench never times a
//! kernel that computes the wrong thing. Flat sampling, 10 samples: about 20 s in all.

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use onnx_proto::TensorProto;
use onnx_ref::{Session, Tensor, Value};

const MODELS: [&str; 3] = [
    "resnet18-opset13",
    "mobilenet_v2-opset13",
    "bert-tiny-opset13",
];

/// The numbered `prefix_i.pb` files of a test-data directory, in order.
fn numbered_tensors(dir: &Path, prefix: &str) -> Vec<TensorProto> {
    (0..)
        .map(|i| dir.join(format!("{prefix}_{i}.pb")))
        .take_while(|p| p.is_file())
        .map(|p| {
            onnx_proto::decode_file::<TensorProto>(&p)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

/// A planned model with its inputs (by graph-input name) and expected outputs.
struct ModelCase {
    session: Session,
    inputs: Vec<(String, Value)>,
    expected: Vec<Tensor>,
}

fn load_case(dir: &Path) -> ModelCase {
    let path = dir.join("model.onnx");
    let loaded = onnx_proto::load_model(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut model = loaded.model;
    onnx_proto::inline_external_data(&mut model, &loaded.dir, &loaded.path)
        .unwrap_or_else(|e| panic!("{e}"));
    let session = Session::new(&model).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let data = dir.join("test_data_set_0");
    let required: Vec<String> = session
        .required_inputs()
        .into_iter()
        .map(str::to_string)
        .collect();
    let protos = numbered_tensors(&data, "input");
    assert_eq!(
        protos.len(),
        required.len(),
        "{}: {} input files for inputs {required:?}",
        data.display(),
        protos.len()
    );
    // Test-data files name their input; fall back to the order of the graph inputs.
    let inputs = protos
        .iter()
        .zip(&required)
        .map(|(p, fallback)| {
            let name = p.name.clone().filter(|n| required.contains(n));
            let t = Tensor::from_proto(p).unwrap_or_else(|e| panic!("{}: {e}", data.display()));
            (name.unwrap_or_else(|| fallback.clone()), Value::Tensor(t))
        })
        .collect();
    let expected = numbered_tensors(&data, "output")
        .iter()
        .map(|p| Tensor::from_proto(p).unwrap_or_else(|e| panic!("{}: {e}", data.display())))
        .collect();
    ModelCase {
        session,
        inputs,
        expected,
    }
}

/// Panics unless the outputs match the stored ones (relative 1e-3, absolute 1e-4).
fn check_outputs(name: &str, case: &ModelCase) {
    let outputs = case
        .session
        .run(case.inputs.clone())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(outputs.len(), case.expected.len(), "{name}: output count");
    for ((out_name, got), want) in outputs.iter().zip(&case.expected) {
        let Value::Tensor(got) = got else {
            panic!("{name}: output {out_name} is not a tensor");
        };
        assert_eq!(got.shape(), want.shape(), "{name}: output {out_name} shape");
        let (g, w) = match (got.to_f64_vec(), want.to_f64_vec()) {
            (Ok(g), Ok(w)) => (g, w),
            _ => panic!("{name}: output {out_name} is not numeric"),
        };
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 + 1e-3 * b.abs(),
                "{name}: output {out_name}[{i}] = {a}, expected {b}"
            );
        }
    }
}

fn models(c: &mut Criterion) {
    let Some(shared) = onnx_testdata::shared_dir_for("onnx-ref bench models") else {
        return;
    };
    let root = shared.join("models");
    let mut group = c.benchmark_group("session_run");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for name in MODELS {
        let case = load_case(&root.join(name));
        check_outputs(name, &case);
        group.bench_function(name, |b| {
            b.iter(|| case.session.run(case.inputs.clone()));
        });
    }
    group.finish();
}

criterion_group!(benches, models);
criterion_main!(benches);
