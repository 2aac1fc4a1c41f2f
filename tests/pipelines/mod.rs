//! Snapshot-tested pipelines: every built-in pipeline on every model of
//! `tests/pipelines/models/` (small models in the ONNX text syntax, each aimed at one behaviour;
//! their README says which). The snapshot holds the report (node counts, op histogram, rules
//! fired per phase, refusals, the check) and the optimized model, so a change to any rule shows
//! up as a reviewed diff. Update with `INSTA_UPDATE=always`.

use std::path::{Path, PathBuf};

use onnx_opt::testing::{snapshot, snapshot_name};
use onnx_opt::{Optimizer, Pipeline};

fn models() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pipelines/models");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnxtxt"))
        .collect();
    out.sort();
    assert!(
        out.len() >= 6,
        "expected the pipeline models in {}",
        dir.display()
    );
    out
}

fn check_pipeline(name: &str) {
    let optimizer = Optimizer::new().pipeline(Pipeline::builtin(name).unwrap());
    for model in models() {
        let text =
            snapshot(&optimizer, &model).unwrap_or_else(|e| panic!("{}: {e:#}", model.display()));
        insta::assert_snapshot!(format!("{name}__{}", snapshot_name(&model)), text);
    }
}

#[test]
fn default_pipeline() {
    check_pipeline("default");
}

#[test]
fn fast_pipeline() {
    check_pipeline("fast");
}

#[test]
fn aggressive_pipeline() {
    check_pipeline("aggressive");
}

/// The README's first command optimizes this model; it must keep working.
#[test]
fn example_model() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/mlp.onnxtxt");
    let text = snapshot(&Optimizer::new(), &model).unwrap();
    insta::assert_snapshot!("default__example_mlp", text);
}

/// A Conv shared by a BatchNormalization and another consumer is not emitted twice (with two
/// weight copies) just because the BatchNormalization folds into a Conv of its own.
#[test]
fn a_shared_conv_is_not_duplicated() {
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pipelines/models/shared_conv_bn.onnxtxt");
    for pipeline in ["default", "aggressive"] {
        let optimizer = Optimizer::new().pipeline(Pipeline::builtin(pipeline).unwrap());
        let out = optimizer
            .optimize(&onnx_opt::load(&model).unwrap())
            .unwrap();
        assert_eq!(out.report.ops_after.get("Conv"), Some(&1), "{pipeline}");
        assert_eq!(
            out.report
                .egraph
                .main
                .phases
                .iter()
                .map(|p| p.firings.get("fold_bn_into_conv").copied().unwrap_or(0))
                .sum::<usize>(),
            1,
            "{pipeline}: the rule fired, extraction declined it"
        );
    }
}
