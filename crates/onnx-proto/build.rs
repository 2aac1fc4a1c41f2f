//! Compiles the bundled ONNX proto2 schema with protox (no system `protoc`) and prost-build.
//! Every `bytes` field is generated as `bytes::Bytes` so that decoding a buffer that is
//! itself `Bytes` (a memory-mapped file) slices instead of copying tensor data.
//!
//! `onnx-data.proto` imports `onnx/onnx-ml.proto`; the bundled `onnx.proto` is identical to the
//! ONNX-ML variant, so it is staged under that name in `OUT_DIR` and only `onnx-data.proto` is
//! compiled (which pulls in both files, each defined once).

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    for f in ["onnx.proto", "onnx-data.proto"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let staged = PathBuf::from(std::env::var("OUT_DIR")?).join("proto-include");
    std::fs::create_dir_all(staged.join("onnx"))?;
    std::fs::copy(root.join("onnx.proto"), staged.join("onnx/onnx-ml.proto"))?;
    std::fs::copy(root.join("onnx-data.proto"), staged.join("onnx-data.proto"))?;
    let fds = protox::compile(["onnx-data.proto"], [&staged])?;
    let mut config = prost_build::Config::new();
    config.bytes(["."]);
    config.compile_fds(fds)?;
    Ok(())
}
