//! onnx-opt: optimize ONNX models with equality saturation.
//!
//! The library facade: re-exports the workspace crates and holds the passes and pipelines that
//! the `onnx-opt` binary drives.

pub mod info;

pub use onnx_proto as proto;
pub mod optimize;
pub mod prove;
pub mod rules;
pub mod run;
pub mod verify;

/// Errors of the onnx-opt library facade; each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Proto(#[from] onnx_proto::Error),
    #[error("{path}: cannot represent the model")]
    Ir {
        path: std::path::PathBuf,
        #[source]
        source: onnx_ir::IrError,
    },
    #[error("{path}: the model fails the checker:\n  {}", errors.join("\n  "))]
    Check {
        path: std::path::PathBuf,
        errors: Vec<String>,
    },
    #[error("{path}: optimization failed")]
    Optimize {
        path: std::path::PathBuf,
        #[source]
        source: onnx_egraph::EGraphError,
    },
    #[error("check failed, nothing written: trial {}, output '{}': {}", .0.trial, .0.output, .0.detail)]
    Mismatch(Box<verify::Mismatch>),
    #[error("{path}: {message}")]
    Run {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("{path}: cannot read the rule file")]
    RuleFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Rule files with errors: the rendering of every error of every file.
    #[error("{0}")]
    Rules(String),
    #[error("check could not run")]
    Verify(#[source] Box<verify::VerifyError>),
}
