//! Models with onnxruntime's contrib ops and a custom-domain op (`tests/models/contrib`, made by
//! `scripts/make_contrib_models.py`): each optimizes with the default check, which runs (never
//! skipped), and the optimized model reproduces onnxruntime's stored outputs in the interpreter.

use std::path::{Path, PathBuf};

use onnx_opt::Optimizer;
use onnx_opt::{compare_values, Tolerance};
use onnx_ref::{Session, Value};

fn contrib_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/contrib")
}

/// One stored set: inputs by name, outputs in order.
type DataSet = (Vec<(String, Value)>, Vec<Value>);

/// The stored sets of a model directory.
fn data_sets(dir: &Path, model: &onnx_proto::ModelProto) -> Vec<DataSet> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    let graph = model.graph.as_ref().unwrap();
    sets.iter()
        .map(|set| {
            let inputs = onnx_opt::read_data_sets(model, set).unwrap().remove(0);
            let mut outputs = Vec::new();
            for (i, vi) in graph.output.iter().enumerate() {
                let p = set.join(format!("output_{i}.pb"));
                outputs.push(onnx_opt::read_value(&p, vi.r#type.as_ref()).unwrap());
            }
            (inputs, outputs)
        })
        .collect()
}

/// Optimizes one model with the default check; asserts the check ran and the result
/// reproduces onnxruntime's outputs.
fn check_model(name: &str, tol: Tolerance) -> onnx_opt::Report {
    let dir = contrib_dir().join(name);
    let model = onnx_opt::load(dir.join("model.onnx")).unwrap();
    let out = Optimizer::new()
        .optimize(&model)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let r = &out.report;
    assert_eq!(r.check_skipped, None, "{name}");
    assert_eq!(r.check_trials, 3, "{name}: {:?}", r.check_random_skipped);
    let optimized = out.model.to_proto();
    let session = Session::new(&optimized).unwrap_or_else(|e| panic!("{name}: {e}"));
    let sets = data_sets(&dir, &model.to_proto());
    for (k, (inputs, expected)) in sets.into_iter().enumerate() {
        let got = session
            .run(inputs)
            .unwrap_or_else(|e| panic!("{name} set {k}: {e}"));
        assert_eq!(got.len(), expected.len(), "{name}");
        for ((out, g), e) in got.iter().zip(&expected) {
            if let Some(d) = compare_values(g, e, tol) {
                panic!("{name} set {k}, output {out}: {d} (vs onnxruntime)");
            }
        }
    }
    out.report
}

const TOL: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-4,
};

#[test]
fn bert_fused_by_onnxruntime_is_checked() {
    check_model("bert_ort_fused", TOL);
    check_model("bert_export", TOL);
}

#[test]
fn gpt2_fused_at_opset_13_is_checked() {
    check_model("gpt2_ort_fused_opset13", TOL);
    check_model("gpt2_export_opset13", TOL);
}

#[test]
fn matmulnbits_models_are_checked() {
    check_model("bert_matmulnbits_int4", TOL);
    check_model("bert_matmulnbits_int4_asym", TOL);
}

#[test]
fn genai_shaped_decoder_is_checked() {
    check_model("genai_decoder", TOL);
}

/// The custom-domain op has no kernel: the check runs around it (its output fed, its input
/// compared) and says so; the standard ops around it are optimized.
#[test]
fn custom_domain_op_is_checked_around() {
    let model = onnx_opt::load(contrib_dir().join("custom_domain_op/model.onnx")).unwrap();
    let out = Optimizer::new().optimize(&model).unwrap();
    let r = &out.report;
    assert_eq!(r.check_skipped, None);
    assert_eq!(r.check_trials, 3);
    assert_eq!(r.check_opaque, vec!["com.company::MyGelu".to_string()]);
    assert!(
        r.nodes_after < r.nodes_before,
        "{} -> {}",
        r.nodes_before,
        r.nodes_after
    );
    assert_eq!(r.ops_after.get("com.company.MyGelu"), Some(&1));
}
