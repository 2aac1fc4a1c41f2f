//! onnx-opt: optimize ONNX models with equality saturation.
//!
//! The library facade: re-exports the workspace crates and holds the passes and pipelines that
//! the `onnx-opt` binary drives.

pub mod info;

pub use onnx_proto as proto;
