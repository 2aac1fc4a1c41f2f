//! The error type of type and shape inference ([`InferError`]): inputs or attributes that no
//! valid node can have (MatMul of 3x4 by 5x6, an axis out of range, a required input missing).
//!
//! Unknown information is never an error: it gives unknown output dims or types. Every variant
//! names the operator schema (`ai.onnx:MatMul-13`); [`InferError::Node`] adds the node when
//! [`infer_graph`](super::infer_graph) reports it.

use crate::error::SchemaId;

/// Why a node's output types cannot be inferred: its inputs or attributes are inconsistent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferError {
    /// Input shapes, values or attributes contradict the operator's rules; `reason` names the
    /// inputs and the shapes involved.
    #[error("{op}: {reason}")]
    Inconsistent {
        /// The operator schema.
        op: Box<SchemaId>,
        /// What does not fit, e.g. "input A [3, 4] and input B [5, 6]: inner dims 4 and 5 differ".
        reason: String,
    },
    /// A required input is absent.
    #[error("{op}: required input {index} ('{name}') is absent")]
    MissingInput {
        /// The operator schema.
        op: Box<SchemaId>,
        /// Position of the input.
        index: usize,
        /// The formal parameter's name.
        name: String,
    },
    /// An attribute is missing, has the wrong type or an invalid value.
    #[error("{op}: attribute '{name}': {reason}")]
    BadAttribute {
        /// The operator schema.
        op: Box<SchemaId>,
        /// The attribute's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Two inputs bound to one type parameter have different element types, or an input's type
    /// is not allowed by the schema.
    #[error("{op}: input {index} ('{name}') has type {found}, expected {expected}")]
    TypeMismatch {
        /// The operator schema.
        op: Box<SchemaId>,
        /// Position of the offending input.
        index: usize,
        /// The formal parameter's name.
        name: String,
        /// The type the input has.
        found: String,
        /// What the schema or the other inputs require.
        expected: String,
    },
    /// A node of a graph failed; wraps the node-level error with the node's name and op type.
    #[error("node '{node}' ({op_type}): {source}")]
    Node {
        /// The node's name, or its first output's name when it has none.
        node: String,
        /// The node's domain-qualified op type.
        op_type: String,
        /// The node-level error.
        #[source]
        source: Box<InferError>,
    },
}
