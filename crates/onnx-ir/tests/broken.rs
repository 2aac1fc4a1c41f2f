//! The broken-model corpus: every `tests/broken/NAME.onnx` (built from `NAME.txt` by
//! `tests/broken/gen_broken.py`) is rejected with exactly the messages in `NAME.expected`.
//! `ONNX_OPT_UPDATE_SNAPSHOTS=1 cargo test -p onnx-ir --test broken` rewrites the snapshots.

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
    let update = std::env::var_os("ONNX_OPT_UPDATE_SNAPSHOTS").is_some_and(|v| v == "1");
    let names = cases();
    for required in REQUIRED_CASES {
        assert!(
            names.iter().any(|n| n == required),
            "the corpus lacks the case {required}"
        );
    }
    let mut failures = Vec::new();
    for case in &names {
        let actual = match render(case) {
            Ok(text) => text,
            Err(problem) => {
                failures.push(format!("{case}: {problem}"));
                continue;
            }
        };
        let snapshot = corpus_dir().join(format!("{case}.expected"));
        if update {
            std::fs::write(&snapshot, &actual)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", snapshot.display()));
            continue;
        }
        match std::fs::read_to_string(&snapshot) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!(
                "{case}: messages differ\n--- expected\n{expected}--- actual\n{actual}"
            )),
            Err(e) => failures.push(format!(
                "{case}: no snapshot {} ({e}); set ONNX_OPT_UPDATE_SNAPSHOTS=1 to write it\n--- actual\n{actual}",
                snapshot.display()
            )),
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

#[test]
fn every_snapshot_and_model_file_belongs_to_a_case() {
    let names = cases();
    let dir = corpus_dir();
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("corpus dir").flatten() {
        let path = entry.path();
        let is_case_file = path
            .extension()
            .is_some_and(|x| x == "onnx" || x == "expected");
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if is_case_file && !names.contains(&stem) {
            orphans.push(path.display().to_string());
        }
    }
    assert!(orphans.is_empty(), "files without a NAME.txt: {orphans:?}");
}
