//! Inference of onnxruntime's own ops (com.microsoft contrib ops and its default-domain
//! LayerNormalization-1 / SimplifiedLayerNormalization-1) on hand-built nodes: output element
//! types and shapes, symbolic dims included, as onnxruntime's ContribOperators.md describes them.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::{AttributeProto, TensorProto, TypeProto};
use onnx_schema::infer::{infer_node, InferError, InputInfo, SymDim};
use onnx_schema::registry;

use crate::support::{attr_int, attr_ints, float, render_all, typed};

const F16: i32 = DataType::Float16 as i32;
const U8: i32 = DataType::Uint8 as i32;
const I8: i32 = DataType::Int8 as i32;
const I32: i32 = DataType::Int32 as i32;
const I64: i32 = DataType::Int64 as i32;

/// Infers onnxruntime's `domain:op` (opset 1 for com.microsoft, 13 for the default domain).
fn infer(
    domain: &str,
    op: &str,
    attrs: &[AttributeProto],
    inputs: &[Option<InputInfo<'_>>],
    n_outputs: usize,
) -> Result<Vec<String>, InferError> {
    let opset = if domain.is_empty() { 13 } else { 1 };
    let schema = registry()
        .lookup(domain, op, opset)
        .or_else(|| onnx_schema::onnxruntime_extensions().lookup(domain, op, opset))
        .unwrap_or_else(|| panic!("{domain}:{op} has no schema at opset {opset}"));
    assert!(schema.is_onnxruntime(), "{domain}:{op} is onnxruntime's");
    Ok(render_all(&infer_node(
        schema, opset, attrs, inputs, n_outputs,
    )?))
}

/// Infers com.microsoft `op` and compares the rendered outputs with `expect`.
fn check(op: &str, attrs: &[AttributeProto], inputs: &[Option<&TypeProto>], expect: &[&str]) {
    let infos: Vec<Option<InputInfo<'_>>> =
        inputs.iter().map(|t| t.map(InputInfo::typed)).collect();
    let got = infer("com.microsoft", op, attrs, &infos, expect.len())
        .unwrap_or_else(|e| panic!("{op}: unexpected error: {e}"));
    assert_eq!(got, expect, "{op}");
}

/// Infers com.microsoft `op`, which must fail; returns the message.
fn check_err(op: &str, attrs: &[AttributeProto], inputs: &[Option<&TypeProto>]) -> String {
    let infos: Vec<Option<InputInfo<'_>>> =
        inputs.iter().map(|t| t.map(InputInfo::typed)).collect();
    match infer("com.microsoft", op, attrs, &infos, 1) {
        Ok(outs) => panic!("{op}: expected an error, got {outs:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn onnxruntimes_layer_normalizations_in_the_default_domain() {
    let x = float(&["batch", "seq", "768"]);
    let scale = float(&["768"]);
    let ins = [Some(InputInfo::typed(&x)), Some(InputInfo::typed(&scale))];
    let ln = infer("", "LayerNormalization", &[], &ins, 3).expect("LayerNormalization-1");
    assert_eq!(
        ln,
        [
            "float[batch, seq, 768]",
            "float[batch, seq, 1]",
            "float[batch, seq, 1]"
        ]
    );
    let half = typed(F16, &["batch", "seq", "768"]);
    let half_scale = typed(F16, &["768"]);
    let ins = [
        Some(InputInfo::typed(&half)),
        Some(InputInfo::typed(&half_scale)),
    ];
    let simplified = infer(
        "",
        "SimplifiedLayerNormalization",
        &[attr_int("axis", -1)],
        &ins,
        2,
    )
    .expect("SimplifiedLayerNormalization-1");
    assert_eq!(
        simplified,
        ["float16[batch, seq, 768]", "float[batch, seq, 1]"]
    );
}

#[test]
fn skip_layer_normalizations() {
    let x = typed(F16, &["batch", "seq", "768"]);
    let g = typed(F16, &["768"]);
    let expect = [
        "float16[batch, seq, 768]",
        "float[batch, seq, 1]",
        "float[batch, seq, 1]",
        "float16[batch, seq, 768]",
    ];
    check(
        "SkipLayerNormalization",
        &[],
        &[Some(&x), Some(&x), Some(&g), Some(&g), Some(&g)],
        &expect,
    );
    check(
        "SkipSimplifiedLayerNormalization",
        &[],
        &[Some(&x), Some(&x), Some(&g)],
        &expect,
    );
    let wrong = typed(F16, &["512"]);
    let message = check_err(
        "SkipLayerNormalization",
        &[],
        &[Some(&x), Some(&x), Some(&wrong)],
    );
    assert!(message.contains("gamma"), "{message}");
}

#[test]
fn embed_layer_normalization() {
    let ids = typed(I32, &["batch", "seq"]);
    let word = float(&["30522", "768"]);
    let pos = float(&["512", "768"]);
    let seg = float(&["2", "768"]);
    let g = float(&["768"]);
    check(
        "EmbedLayerNormalization",
        &[],
        &[
            Some(&ids),
            Some(&ids),
            Some(&word),
            Some(&pos),
            Some(&seg),
            Some(&g),
            Some(&g),
            Some(&ids),
        ],
        &[
            "float[batch, seq, 768]",
            "int32[batch]",
            "float[batch, seq, 768]",
        ],
    );
}

#[test]
fn attention_gives_output_and_present() {
    let input = float(&["batch", "seq", "768"]);
    let weights = float(&["768", "2304"]);
    let bias = float(&["2304"]);
    let mask = typed(I32, &["batch"]);
    let heads = [attr_int("num_heads", 12)];
    check(
        "Attention",
        &heads,
        &[Some(&input), Some(&weights), Some(&bias), Some(&mask)],
        &["float[batch, seq, 768]", "float[2, batch, 12, seq, 64]"],
    );
    // With a past: its length plus seq (unknown as a sum of params; known when both are).
    let past = float(&["2", "batch", "12", "past", "64"]);
    check(
        "Attention",
        &heads,
        &[Some(&input), Some(&weights), Some(&bias), None, Some(&past)],
        &[
            "float[batch, seq, 768]",
            "float[2, batch, 12, past+seq, 64]",
        ],
    );
    let one = float(&["1", "1", "768"]);
    let past7 = float(&["2", "1", "12", "7", "64"]);
    check(
        "Attention",
        &heads,
        &[Some(&one), Some(&weights), Some(&bias), None, Some(&past7)],
        &["float[1, 1, 768]", "float[2, 1, 12, 8, 64]"],
    );
    // qkv_hidden_sizes sets V's width.
    let weights2 = float(&["768", "1280"]);
    check(
        "Attention",
        &[
            attr_int("num_heads", 8),
            attr_ints("qkv_hidden_sizes", &[512, 512, 256]),
        ],
        &[Some(&input), Some(&weights2)],
        &["float[batch, seq, 256]"],
    );
    let bad = float(&["512", "2304"]);
    let message = check_err("Attention", &heads, &[Some(&input), Some(&bad)]);
    assert!(
        message.contains("hidden sizes 768 and 512 differ"),
        "{message}"
    );
}

#[test]
fn multi_head_attention_gives_output_and_present_kv() {
    let q = typed(F16, &["batch", "seq", "768"]);
    let kv = typed(F16, &["batch", "kv_seq", "768"]);
    check(
        "MultiHeadAttention",
        &[attr_int("num_heads", 12)],
        &[Some(&q), Some(&kv), Some(&kv)],
        &[
            "float16[batch, seq, 768]",
            "float16[batch, 12, kv_seq, 64]",
            "float16[batch, 12, kv_seq, 64]",
        ],
    );
    // Packed QKV [batch, seq, heads, 3, head].
    let packed = typed(F16, &["batch", "seq", "12", "3", "64"]);
    check(
        "MultiHeadAttention",
        &[attr_int("num_heads", 12)],
        &[Some(&packed)],
        &["float16[batch, seq, 768]"],
    );
}

#[test]
fn group_query_attention_gives_output_and_present_kv() {
    let q = typed(F16, &["batch", "seq", "4096"]);
    let kv = typed(F16, &["batch", "seq", "1024"]);
    let past = typed(F16, &["batch", "8", "past", "128"]);
    let seqlens = typed(I32, &["batch"]);
    let total_ty = typed(I32, &[]);
    let total = [SymDim::from("total")];
    let attrs = [attr_int("num_heads", 32), attr_int("kv_num_heads", 8)];
    let ins = [
        Some(InputInfo::typed(&q)),
        Some(InputInfo::typed(&kv)),
        Some(InputInfo::typed(&kv)),
        Some(InputInfo::typed(&past)),
        Some(InputInfo::typed(&past)),
        Some(InputInfo::typed(&seqlens)),
        Some(InputInfo::symbolic(Some(&total_ty), &total)),
    ];
    let got = infer("com.microsoft", "GroupQueryAttention", &attrs, &ins, 3).expect("GQA");
    assert_eq!(
        got,
        [
            "float16[batch, seq, 4096]",
            "float16[batch, 8, total, 128]",
            "float16[batch, 8, total, 128]"
        ]
    );
    // Packed QKV (no key, value): (32 + 2 * 8) heads of 128; a known past buffer longer than
    // the total length is shared: present keeps its length.
    let packed = typed(F16, &["1", "1", "6144"]);
    let past_buffer = typed(F16, &["1", "8", "4096", "128"]);
    let total_value = TensorProto {
        data_type: Some(I32),
        int32_data: vec![100],
        ..Default::default()
    };
    let ins = [
        Some(InputInfo::typed(&packed)),
        None,
        None,
        Some(InputInfo::typed(&past_buffer)),
        Some(InputInfo::typed(&past_buffer)),
        Some(InputInfo::typed(&seqlens)),
        Some(InputInfo::constant(Some(&total_ty), &total_value)),
    ];
    let got = infer("com.microsoft", "GroupQueryAttention", &attrs, &ins, 3).expect("packed GQA");
    assert_eq!(
        got,
        [
            "float16[1, 1, 4096]",
            "float16[1, 8, 4096, 128]",
            "float16[1, 8, 4096, 128]"
        ]
    );
    let wrong_kv = typed(F16, &["batch", "seq", "512"]);
    let message = check_err(
        "GroupQueryAttention",
        &attrs,
        &[
            Some(&q),
            Some(&wrong_kv),
            Some(&wrong_kv),
            None,
            None,
            Some(&seqlens),
            Some(&total_ty),
        ],
    );
    assert!(message.contains("kv_num_heads=8"), "{message}");
}

#[test]
fn rotary_embedding_and_gelus_keep_the_shape() {
    let x = typed(F16, &["batch", "seq", "4096"]);
    let pos = typed(I64, &["batch", "seq"]);
    let cache = typed(F16, &["max_pos", "64"]);
    check(
        "RotaryEmbedding",
        &[],
        &[Some(&x), Some(&pos), Some(&cache), Some(&cache)],
        &["float16[batch, seq, 4096]"],
    );
    for op in ["Gelu", "QuickGelu"] {
        check(op, &[], &[Some(&x)], &["float16[batch, seq, 4096]"]);
    }
    let bias = typed(F16, &["4096"]);
    check(
        "FastGelu",
        &[],
        &[Some(&x), Some(&bias)],
        &["float16[batch, seq, 4096]"],
    );
    check(
        "BiasGelu",
        &[],
        &[Some(&x), Some(&bias)],
        &["float16[batch, seq, 4096]"],
    );
    check(
        "BiasAdd",
        &[],
        &[Some(&x), Some(&bias), Some(&x)],
        &["float16[batch, seq, 4096]"],
    );
}

#[test]
fn fused_and_quantized_matmuls() {
    let a = float(&["batch", "seq", "64"]);
    let b = float(&["32", "64"]);
    check(
        "FusedMatMul",
        &[attr_int("transB", 1)],
        &[Some(&a), Some(&b)],
        &["float[batch, seq, 32]"],
    );
    let message = check_err("FusedMatMul", &[], &[Some(&a), Some(&b)]);
    assert!(message.contains("inner dims 64 and 32 differ"), "{message}");

    let qb = typed(I8, &["64", "32"]);
    let scale = float(&[]);
    check(
        "DynamicQuantizeMatMul",
        &[],
        &[Some(&a), Some(&qb), Some(&scale)],
        &["float[batch, seq, 32]"],
    );
    let qa = typed(U8, &["batch", "seq", "64"]);
    let half_scale = typed(F16, &[]);
    check(
        "MatMulIntegerToFloat",
        &[],
        &[Some(&qa), Some(&qb), Some(&half_scale), Some(&half_scale)],
        &["float16[batch, seq, 32]"],
    );

    // MatMulNBits: K=64 by N=32, 4 bits in blocks of 32: B [N, K/32, 32/2].
    let packed = typed(U8, &["32", "2", "16"]);
    let scales = float(&["64"]);
    let nbits = [
        attr_int("K", 64),
        attr_int("N", 32),
        attr_int("bits", 4),
        attr_int("block_size", 32),
    ];
    check(
        "MatMulNBits",
        &nbits,
        &[Some(&a), Some(&packed), Some(&scales)],
        &["float[batch, seq, 32]"],
    );
    let a48 = float(&["batch", "seq", "48"]);
    let message = check_err(
        "MatMulNBits",
        &nbits,
        &[Some(&a48), Some(&packed), Some(&scales)],
    );
    assert!(message.contains("K=64"), "{message}");
}

#[test]
fn gather_block_quantized_unpacks_uint8() {
    // A 4-bit embedding table stored as uint8 [vocab, hidden / 2], scales per 32-block.
    let data = typed(U8, &["32000", "2048"]);
    let ids = typed(I64, &["batch", "seq"]);
    let scales = typed(F16, &["32000", "128"]);
    check(
        "GatherBlockQuantized",
        &[attr_int("block_size", 32), attr_int("quantize_axis", 1)],
        &[Some(&data), Some(&ids), Some(&scales)],
        &["float16[batch, seq, 4096]"],
    );
    // 8-bit uint8 data is not packed.
    check(
        "GatherBlockQuantized",
        &[attr_int("bits", 8), attr_int("block_size", 32)],
        &[Some(&data), Some(&ids), Some(&scales)],
        &["float16[batch, seq, 2048]"],
    );
}

#[test]
fn microsoft_quantize_and_dequantize_linear() {
    let x = typed(F16, &["batch", "16"]);
    let scale = typed(F16, &[]);
    let zp = typed(I8, &[]);
    check(
        "QuantizeLinear",
        &[],
        &[Some(&x), Some(&scale), Some(&zp)],
        &["int8[batch, 16]"],
    );
    check(
        "QuantizeLinear",
        &[],
        &[Some(&x), Some(&scale)],
        &["uint8[batch, 16]"],
    );
    let q = typed(I8, &["batch", "16"]);
    check(
        "DequantizeLinear",
        &[],
        &[Some(&q), Some(&scale), Some(&zp)],
        &["float16[batch, 16]"],
    );
}
