//! A dim named `past_sequence_length + sequence_length` is a name like any other: ONNX gives it
//! no arithmetic, so an attention mask longer (or shorter) than the past and new tokens is a
//! valid input wherever the original runs on it. Optimum's decoders with sliding windows
//! (Gemma-2, Gemma-3) and without (Llama) are optimized, fused and lowered, then run against the
//! original in the interpreter on inputs whose mask length is the sum and longer; the
//! check itself draws the sum on half its trials and a searched length on the others.

use std::collections::BTreeMap;

use onnx_opt::{compare_models, Tolerance};

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

#[test]
fn decoders_agree_when_the_mask_length_is_not_past_plus_new() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/optimum");
    for name in ["gemma2_optimum", "gemma3_optimum", "llama_optimum"] {
        let path = root.join(name).join("model.onnx");
        let original = onnx_opt::load_ir(&path).unwrap();
        let proto = original.proto.model.clone();
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
                .optimize(&original.model)
                .unwrap_or_else(|e| panic!("{name} ({what}): {e:#}"));
            // The check's trials: the sum on half, a searched mask length on the rest.
            assert_eq!(
                out.report.check_realistic_dims.get(SUM),
                Some(&2),
                "{name} ({what}): {:?}",
                out.report.check_realistic_dims
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
