//! The error type of onnx-prove ([`Error`]): the interpreter failing on a model (or panicking),
//! and graph inputs of a fuzz case that cannot be drawn.

use onnx_ref::{DType, RefError};

/// Errors of the prover and the fuzzer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The interpreter cannot plan or run a model, or cannot draw its random inputs.
    #[error(transparent)]
    Interpreter(#[from] RefError),
    /// The interpreter panicked while planning a model (a bug in the interpreter).
    #[error("the interpreter panicked while planning")]
    PlanPanicked,
    /// The interpreter panicked while running a model (a bug in the interpreter).
    #[error("the interpreter panicked")]
    RunPanicked,
    /// A tensor input's element type is absent or not one the interpreter knows.
    #[error("an unknown element type")]
    UnknownElemType {
        /// The `elem_type` code, when there is one.
        code: Option<i32>,
    },
    /// A sequence or optional input type without its element type.
    #[error("a sequence or optional type without its element type")]
    NoElemType,
    /// The random data generator has no values of this element type.
    #[error("cannot draw a {} tensor", dtype.name())]
    CannotDraw {
        /// The element type.
        dtype: DType,
        /// The tensor's shape.
        shape: Vec<usize>,
    },
    /// A graph input that is neither a tensor, a sequence nor an optional (a map, ...).
    #[error("only tensor, sequence and optional inputs can be generated")]
    UnsupportedInputType,
}
