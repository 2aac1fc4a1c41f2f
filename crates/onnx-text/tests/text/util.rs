//! Helpers shared by the integration tests: finding the shared test data and comparing
//! protos bit-exactly.

use std::path::{Path, PathBuf};

use onnx_proto::{Message, ModelProto};

/// The shared test-data directory (`$ONNX_OPT_SHARED` or `../shared` from the repository).
pub fn shared_dir() -> PathBuf {
    let dir = std::env::var_os("ONNX_OPT_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared")));
    assert!(
        dir.join("onnx-backend").is_dir(),
        "shared test data not found at {} (set ONNX_OPT_SHARED)",
        dir.display()
    );
    dir
}

/// Every `model.onnx` of the backend test suites, sorted.
pub fn backend_models() -> Vec<PathBuf> {
    let shared = shared_dir();
    let mut models = Vec::new();
    for suite in ["node", "simple", "pytorch-converted", "pytorch-operator"] {
        collect(&shared.join("onnx-backend").join(suite), &mut models);
    }
    models.sort();
    models
}

/// Every `model.onnx` of the development models (`shared/models`), sorted.
pub fn development_models() -> Vec<PathBuf> {
    let mut models = Vec::new();
    collect(&shared_dir().join("models"), &mut models);
    models.sort();
    models
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let model = entry.path().join("model.onnx");
        if model.is_file() {
            out.push(model);
        }
    }
}

/// Bit-exact equality (NaN payloads included): the encodings match.
pub fn same_model(a: &ModelProto, b: &ModelProto) -> bool {
    a.encode_to_vec() == b.encode_to_vec()
}
