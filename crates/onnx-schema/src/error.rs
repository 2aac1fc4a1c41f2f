//! The error type of onnx-schema: what can go wrong when reading a schema table from JSON.
//!
//! The embedded table is generated and tested, so these errors only show up for a hand-edited or
//! foreign file passed to [`SchemaRegistry::from_json`](crate::SchemaRegistry::from_json). Every
//! variant past JSON syntax names the schema (`domain:Op-since_version`) and the field it concerns.

use std::fmt;

/// Identifies one schema version in error messages: `ai.onnx:Softmax-13`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SchemaId {
    /// Operator domain as stored ("" for the default ONNX domain).
    pub domain: String,
    /// Operator type, e.g. "Softmax".
    pub name: String,
    /// The opset version that introduced this schema version.
    pub since_version: i64,
}

impl fmt::Display for SchemaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let domain = if self.domain.is_empty() {
            "ai.onnx"
        } else {
            &self.domain
        };
        write!(f, "{domain}:{}-{}", self.name, self.since_version)
    }
}

/// Errors from parsing a schema table.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not valid JSON or does not have the expected structure.
    #[error("schema table is not valid JSON of the expected shape: {source}")]
    Json {
        #[source]
        source: serde_json::Error,
    },
    /// The table was written by a generator with another format version.
    #[error("schema table has format_version {found}; this crate reads format_version {expected}")]
    FormatVersion { found: i64, expected: i64 },
    /// A field holds a value outside its enumeration (option, support level, attribute type, ...).
    #[error("{schema}: {field}: unknown value '{value}'")]
    UnknownValue {
        schema: SchemaId,
        field: String,
        value: String,
    },
    /// A field holds a number outside its range (a negative arity, a version below 1, ...).
    #[error("{schema}: {field}: value {value} is out of range")]
    OutOfRange {
        schema: SchemaId,
        field: String,
        value: i64,
    },
    /// A base64 field does not decode.
    #[error("{schema}: {field}: invalid base64: {source}")]
    Base64 {
        schema: SchemaId,
        field: String,
        #[source]
        source: base64::DecodeError,
    },
    /// A base64 field decodes to bytes that are not the expected protobuf message.
    #[error("{schema}: {field}: not a valid {message}: {source}")]
    Decode {
        schema: SchemaId,
        field: String,
        message: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    /// Two entries share (domain, name, since_version), or a list that must be sorted is not.
    #[error("{schema}: {reason}")]
    Inconsistent { schema: SchemaId, reason: String },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
