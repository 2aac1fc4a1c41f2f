//! Dims a model's interface leaves unrelated stay unrelated. ONNX's dimension variables are not
//! scoped: one name is one value across the whole graph, outputs included (IR.md, "Static tensor
//! shapes"). Optimum names an attention mask's length `past_sequence_length +
//! sequence_length` and declares its present keys and values with the same name, so a mask
//! longer than the past and new tokens is no input of those models; the check keeps to the
//! declared output dims (`verify/inputs.rs`, `output_dims_broken`), and GPT-OSS, whose lowering
//! reads the key count from the mask's length, is optimized and checked. A name is only a name,
//! though: with the presents declared under another name, the mask's length is unrelated to the
//! key count, a longer mask is a valid input, and the optimized models (fused at opset 23, and
//! lowered for onnxruntime) must agree with the originals on it. The check draws the sum on
//! half its trials and a searched length on the others.

use std::collections::BTreeMap;

use onnx_opt::{compare_models, Tolerance};
use onnx_proto::tensor_shape_proto::dimension::Value as Dim;

const SUM: &str = "past_sequence_length + sequence_length";

fn dims(batch: i64, seq: i64, past: i64, mask: i64) -> BTreeMap<String, i64> {
    [
        ("batch_size", batch),
        ("sequence_length", seq),
        ("past_sequence_length", past),
        (SUM, mask),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The Optimum export `name`, its outputs' dims named `SUM` renamed `present_length`.
fn with_presents_unrelated(name: &str) -> onnx_proto::ModelProto {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/optimum")
        .join(name)
        .join("model.onnx");
    let mut proto = onnx_opt::load_ir(&path).unwrap().proto.model;
    let mut renamed = 0;
    for o in proto.graph.iter_mut().flat_map(|g| g.output.iter_mut()) {
        let Some(onnx_proto::type_proto::Value::TensorType(t)) =
            o.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
            if matches!(&d.value, Some(Dim::DimParam(p)) if p == SUM) {
                d.value = Some(Dim::DimParam("present_length".into()));
                renamed += 1;
            }
        }
    }
    assert!(renamed > 0, "{name}: no output dim named {SUM}");
    proto
}

#[test]
fn decoders_agree_when_the_mask_length_is_unrelated_to_the_keys() {
    for name in [
        "gemma2_optimum",
        "gemma3_optimum",
        "llama_optimum",
        "gpt_oss_optimum",
    ] {
        let proto = with_presents_unrelated(name);
        let model = onnx_opt::Model::from_proto(proto.clone()).unwrap();
        for (what, optimizer) in [
            ("opset 23", onnx_opt::Optimizer::new().target_opset(23)),
            (
                "onnxruntime",
                onnx_opt::Optimizer::new()
                    .pipeline(onnx_opt::Pipeline::builtin("onnxruntime").unwrap())
                    .target_opset(23),
            ),
        ] {
            let out = optimizer
                .unsafe_rules(true)
                .check(4)
                .optimize(&model)
                .unwrap_or_else(|e| panic!("{name} ({what}): {e:#}"));
            // The check's trials: the sum on half, a searched mask length on the rest.
            assert_eq!(
                out.report.check_realistic_dims.get(SUM),
                Some(&2),
                "{name} ({what}): {:?} / {:?}",
                out.report.check_realistic_dims,
                out.report.check_dims
            );
            let optimized = out.model.to_proto();
            // The mask as long as the past and new tokens, and longer (a shorter one makes the
            // original itself fail: Gemma-2 gathers past its end). Several new tokens after a
            // past in one sequence, one new token in a batch: GroupQueryAttention refuses
            // several after a past in a batch above 1 (a runtime limit, rules/README.md).
            for (batch, seq, past, mask) in
                [(1, 3, 4, 7), (1, 3, 4, 11), (2, 1, 6, 7), (2, 1, 6, 12)]
            {
                let d = dims(batch, seq, past, mask);
                match compare_models(&proto, &optimized, 2, &d, Tolerance::default()) {
                    Ok(None) => {}
                    Ok(Some(m)) => panic!("{name} ({what}) at {d:?}: {m:?}"),
                    Err(e) => panic!("{name} ({what}) at {d:?}: {e:#}"),
                }
            }
        }
    }
}

/// With the presents declared as Optimum declares them, a mask longer than the past and new
/// tokens breaks the model's interface: the check does not draw it, and says so when told to.
#[test]
fn the_check_keeps_to_the_declared_output_dims() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/optimum/gpt_oss_optimum/model.onnx");
    let proto = onnx_opt::load_ir(&path).unwrap().proto.model;
    // Told to use a mask of 11 for 4 + 3 keys, the check finds no input of the model.
    let err = compare_models(&proto, &proto, 1, &dims(1, 3, 4, 11), Tolerance::default())
        .expect_err("a mask of 11 for 7 keys breaks the presents' declared dims");
    let text = format!("{err:#}");
    assert!(
        text.contains("declared dim 'past_sequence_length + sequence_length' is 11"),
        "{text}"
    );
    // At the sum it runs.
    assert!(matches!(
        compare_models(&proto, &proto, 1, &dims(1, 3, 4, 7), Tolerance::default()),
        Ok(None)
    ));
}
