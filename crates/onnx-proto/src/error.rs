//! The error type of onnx-proto: every variant names the file it concerns.

use std::path::PathBuf;

/// Errors from reading and writing ONNX protobuf files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened, read, mapped or written.
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid protobuf encoding of the expected message.
    #[error("{path}: not a valid ONNX {message} (malformed or truncated protobuf)")]
    Decode {
        path: PathBuf,
        message: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    /// A tensor's external-data entry is missing a key, has a bad value, or is out of range.
    #[error("{path}: tensor '{tensor}': external data: {reason}")]
    ExternalData {
        path: PathBuf,
        tensor: String,
        reason: String,
    },
    /// An external-data `location` is absolute or resolves outside the model's directory.
    #[error("{path}: tensor '{tensor}': external data location '{location}' escapes the model directory")]
    PathEscape {
        path: PathBuf,
        tensor: String,
        location: String,
    },
    /// The file is empty: no protobuf message of this kind can be empty and still be a model.
    #[error("{path}: empty file, not an ONNX model")]
    Empty { path: PathBuf },
    /// Reusing external data: a tensor's data file is not inside the output model's directory,
    /// so the output could not refer to it (a location may not leave the model's directory).
    #[error("{path}: cannot reuse external data file '{}': it is not inside the output's directory (save the output in the input's directory, or without reusing its external data)", file.display())]
    ReuseOutside { path: PathBuf, file: PathBuf },
    /// Reusing external data: the output model would replace the input model, whose external
    /// data file it refers to and must leave as it is.
    #[error("{path}: the output would replace the input model, whose external data it reuses; save it to another path")]
    ReuseInPlace { path: PathBuf },
    /// The save would write a file (the new data file, or the model itself) over one that the
    /// output's tensors still refer to.
    #[error("{path}: saving would replace '{location}', which the output's tensors still refer to as their external data; save under another name")]
    DataFileInUse { path: PathBuf, location: String },
    /// The model would exceed protobuf's 2 GiB limit and externalizing was disabled.
    #[error("{path}: serialized model is {size} bytes, above protobuf's 2 GiB limit; save with external data")]
    TooLarge { path: PathBuf, size: u64 },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}
