//! The whole pipeline on the development models: optimize, then the reference interpreter
//! agrees with the original on the model's test data and on random inputs.

use std::collections::BTreeMap;

use onnx_opt::optimize::{load_ir, OptimizeConfig};
use onnx_opt::verify::{compare_models, Tolerance};

use crate::shared;

fn dev_models() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(shared().join("models"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("model.onnx"))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// Every development model: optimized (default folding, and folding without budget), the
/// result passes the checker and computes the same outputs as the original on random inputs.
#[test]
fn optimized_dev_models_compute_the_same() {
    let mut failures = Vec::new();
    let dims: BTreeMap<String, i64> = [("batch".to_string(), 1), ("sequence".to_string(), 16)].into();
    for path in dev_models() {
        for unbounded in [false, true] {
            let loaded = load_ir(&path).unwrap();
            let options = onnx_egraph::OptimizeOptions {
                fold: onnx_egraph::FoldOptions {
                    enabled: true,
                    budget_floor: if unbounded { None } else { Some(1024) },
                },
                ..Default::default()
            };
            let _ = OptimizeConfig::default();
            let (optimized, report) = match onnx_egraph::optimize_model(&loaded.model, options) {
                Ok(r) => r,
                Err(e) => {
                    failures.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            assert!(report.main.nodes_after <= report.main.nodes_before, "{}", path.display());
            let proto = optimized.to_proto();
            match compare_models(&loaded.proto.model, &proto, 1, &dims, Tolerance::default()) {
                Ok(None) => {}
                Ok(Some(m)) => failures.push(format!("{} (unbounded {unbounded}): {m:?}", path.display())),
                Err(e) => failures.push(format!("{} (unbounded {unbounded}): {e:#}", path.display())),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
