//! Integration tests of onnx-opt: one binary, one module per area.

mod cli;
mod fuzz;
mod pipeline;
mod pipelines;
mod rules;

use std::path::PathBuf;

/// The shared test data (`../shared`, or `ONNX_OPT_SHARED`).
pub fn shared() -> PathBuf {
    let dir = std::env::var_os("ONNX_OPT_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")));
    assert!(
        dir.join("models").is_dir(),
        "test data not found at {}: set ONNX_OPT_SHARED",
        dir.display()
    );
    dir
}
