//! The broken-model corpus: every `tests/broken/NAME.onnx` (built from `NAME.txt` by
//! `tests/broken/gen_broken.py`) is rejected with exactly the messages of the insta snapshot
//! `tests/snapshots/broken__NAME.snap`. `INSTA_UPDATE=always cargo test -p onnx-ir --test broken`
//! rewrites the snapshots.

use std::path::{Path, PathBuf};

use onnx_ir::{check_model, Model};

/// Cases the corpus must hold (the brief's list); more may be added freely.
const REQUIRED_CASES: [&str; 14] = [
    "cycle",
    "output_defined_twice",
    "undefined_input",
    "missing_opset_import",
    "ir3_initializer_not_input",
    "duplicate_attribute",
    "unknown_op_default_domain",
    "too_many_inputs",
    "missing_required_attribute",
    "wrong_attribute_type",
    "type_constraint_graph_input",
    "raw_data_length_mismatch",
    "negative_dim",
    "subgraph_reads_later_name",
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/broken")
}

/// The case names (file stems of `*.txt`), sorted.
fn cases() -> Vec<String> {
    let dir = corpus_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

/// The checker's messages for a case, one per line; `Err` describes a harness problem.
fn render(case: &str) -> Result<String, String> {
    let path = corpus_dir().join(format!("{case}.onnx"));
    let loaded = onnx_proto::load_model(&path)
        .map_err(|e| format!("{e} (run tests/broken/gen_broken.py)"))?;
    let model = Model::from_proto(loaded.model).map_err(|e| format!("conversion failed: {e}"))?;
    match check_model(&model) {
        Ok(()) => Err("the checker accepts it".to_string()),
        Err(errors) => Ok(errors.iter().map(|e| format!("{e}\n")).collect()),
    }
}

#[test]
fn every_broken_model_is_rejected_with_its_snapshot_message() {
    let names = cases();
    for required in REQUIRED_CASES {
        assert!(
            names.iter().any(|n| n == required),
            "the corpus lacks the case {required}"
        );
    }
    let mut failures = Vec::new();
    for case in &names {
        match render(case) {
            Ok(messages) => insta::with_settings!({
                input_file => corpus_dir().join(format!("{case}.txt")),
                omit_expression => true,
            }, {
                insta::assert_snapshot!(case.as_str(), messages);
            }),
            Err(problem) => failures.push(format!("{case}: {problem}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

/// The case names of the files in `dir` named `{prefix}NAME{suffix}` that are not cases.
fn orphans(dir: &Path, prefix: &str, suffix: &str, names: &[String]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|file| {
            file.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
                .is_some_and(|name| !names.iter().any(|n| n == name))
        })
        .map(|file| dir.join(file).display().to_string())
        .collect()
}

#[test]
fn every_snapshot_and_model_file_belongs_to_a_case() {
    let names = cases();
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut found = orphans(&corpus_dir(), "", ".onnx", &names);
    found.extend(orphans(&snapshots, "broken__", ".snap", &names));
    assert!(found.is_empty(), "files without a NAME.txt: {found:?}");
}
