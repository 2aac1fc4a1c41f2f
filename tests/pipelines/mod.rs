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

/// `--target onnxruntime`: the `onnxruntime` pipeline, each model converted to opset 23 first
/// (the opset its lowering starts from) where it is below.
#[test]
fn onnxruntime_target() {
    let optimizer = Optimizer::new().target(onnx_opt::Target::OnnxRuntime);
    for model in models() {
        let text =
            snapshot(&optimizer, &model).unwrap_or_else(|e| panic!("{}: {e:#}", model.display()));
        insta::assert_snapshot!(format!("onnxruntime__{}", snapshot_name(&model)), text);
    }
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

/// A pipeline's `[[pass]]` list is what runs: a pass it leaves out does not run, and the report
/// has one entry per declared pass.
#[test]
fn the_declared_passes_are_what_runs() {
    let text =
        "[[pass]]\nname = \"saturate\"\n\n[[phase]]\nname = \"rules\"\nrules = [\"builtin\"]\n";
    let pipeline = Pipeline::parse(text, "only-saturate.toml").unwrap();
    let model = onnx_opt::parse_text(
        r#"<ir_version: 8, opset_import: ["" : 13]>
           g (float[2, 3] x) => (float[2, 3] y) { t = Identity(x)  y = Relu(t) }"#,
    )
    .unwrap();
    let out = Optimizer::new()
        .pipeline(pipeline)
        .optimize(&model)
        .unwrap();
    let names: Vec<&str> = out.report.passes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["saturate"]);
    assert_eq!(out.report.nodes_after, 1);
}

/// A pass list naming an unknown pass, or making a pass wait on a later one, is refused with
/// the pipeline's name.
#[test]
fn a_bad_pass_list_is_an_error_naming_the_pipeline() {
    let unknown = "[[pass]]\nname = \"fold-everything\"\n";
    let err = Pipeline::parse(unknown, "mine.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("pipeline mine.toml: no pass named 'fold-everything'"),
        "{err}"
    );
    let later = "[[pass]]\nname = \"splice-constant-ifs\"\nif_changed = \"expand-bodies\"\n\n[[pass]]\nname = \"expand-bodies\"\n";
    let err = Pipeline::parse(later, "mine.toml").unwrap_err().to_string();
    assert!(
        err.contains("if_changed names 'expand-bodies', which is not an earlier pass"),
        "{err}"
    );
}
