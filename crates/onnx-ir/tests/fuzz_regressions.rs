//! Inputs that once crashed (or were written to probe) the `load_check` fuzz target
//! (`fuzz/fuzz_targets/load_check.rs`): each file under `tests/fuzz-regressions/` goes through
//! the same pipeline (decode, IR conversion, checker, sorting, IR -> proto) and must end in `Ok`
//! or a clear error, never a panic, and the IR -> proto conversion must stay lossless.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use onnx_ir::{check_model, Model};
use prost::Message;

fn regression_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions")
}

/// How far an input got: the stage and the message it stopped with, or the checker's verdict.
fn run_pipeline(data: &[u8]) -> Result<String, String> {
    let bytes = bytes::Bytes::copy_from_slice(data);
    let loaded = match onnx_proto::load_model_bytes(bytes, Path::new("input"), PathBuf::from(".")) {
        Ok(loaded) => loaded,
        Err(e) => return Ok(format!("decode error: {e}")),
    };
    let encoded = loaded.model.encode_to_vec();
    let model = match Model::from_proto(loaded.model) {
        Ok(model) => model,
        Err(e) => return Ok(format!("conversion error: {e}")),
    };
    let verdict = match check_model(&model) {
        Ok(()) => "checker: ok".to_string(),
        Err(errors) => {
            let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
            if messages.is_empty() || messages.iter().any(|m| m.trim().is_empty()) {
                return Err(format!(
                    "the checker failed without a clear message: {messages:?}"
                ));
            }
            format!("checker: {}", messages.join("; "))
        }
    };
    if model.to_proto().encode_to_vec() != encoded {
        return Err("IR -> proto is not lossless".to_string());
    }
    let mut sorted = model.clone();
    if sorted.graph.sort_topologically().is_ok() {
        let _ = check_model(&sorted);
    }
    Ok(verdict)
}

#[test]
fn fuzz_regressions_end_in_ok_or_a_clear_error() {
    let dir = regression_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|x| x != "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    let mut failures = Vec::new();
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let start = std::time::Instant::now();
        match catch_unwind(AssertUnwindSafe(|| run_pipeline(&data))) {
            Ok(Ok(verdict)) => println!("{}: {:?} {verdict}", path.display(), start.elapsed()),
            Ok(Err(problem)) => failures.push(format!("{}: {problem}", path.display())),
            Err(_) => failures.push(format!("{}: panicked", path.display())),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
