//! Helpers shared by the integration tests: listing the models of the shared test data (the
//! tests find it with `onnx_testdata::require_shared!`) and comparing protos bit-exactly.

use std::path::{Path, PathBuf};

use onnx_proto::{Message, ModelProto};

/// Every `model.onnx` of the backend test suites under `shared`, sorted.
pub fn backend_models(shared: &Path) -> Vec<PathBuf> {
    let mut models = Vec::new();
    for suite in ["node", "simple", "pytorch-converted", "pytorch-operator"] {
        collect(&shared.join("onnx-backend").join(suite), &mut models);
    }
    models.sort();
    models
}

/// Every `model.onnx` of the development models (`shared/models`), sorted.
pub fn development_models(shared: &Path) -> Vec<PathBuf> {
    let mut models = Vec::new();
    collect(&shared.join("models"), &mut models);
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
