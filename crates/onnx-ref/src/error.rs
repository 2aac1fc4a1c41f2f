//! The error type of onnx-ref: every variant says which tensor, node, graph input or value it
//! concerns.

use crate::dtype::DType;

/// Which node an error comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    /// Position in its graph's node list, when known (`eval_node` on a lone node has none).
    pub index: Option<usize>,
    /// The node's name (may be empty).
    pub name: String,
    /// The node's domain ("" for the default ONNX domain).
    pub domain: String,
    /// The node's op_type.
    pub op: String,
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(i) = self.index {
            write!(f, "node {i} ")?;
        } else {
            f.write_str("node ")?;
        }
        write!(f, "'{}' (", self.name)?;
        if !self.domain.is_empty() {
            write!(f, "{}::", self.domain)?;
        }
        write!(f, "{})", self.op)
    }
}

/// Errors from converting tensors, building sessions and running kernels.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    /// A `TensorProto` (or sequence/optional/map message) is malformed.
    #[error("tensor '{tensor}': {reason}")]
    InvalidTensor { tensor: String, reason: String },
    /// A tensor's data lives in an external file that was not loaded.
    #[error("tensor '{tensor}': data is stored externally; inline it first (onnx_proto::inline_external_data)")]
    ExternalData { tensor: String },
    /// A data type code the interpreter does not know.
    #[error("tensor '{tensor}': unknown data type code {code}")]
    UnknownDType { tensor: String, code: i32 },
    /// A tensor would be larger than the interpreter's allocation limit.
    #[error(
        "tensor '{tensor}': shape {shape:?} has {elements} elements, above the limit of {limit}"
    )]
    TooLarge {
        tensor: String,
        shape: Vec<i64>,
        elements: u128,
        limit: u64,
    },
    /// No kernel is registered for a node's (domain, op, opset version).
    #[error("{node}: no kernel for opset version {version}")]
    MissingKernel { node: NodeRef, version: i64 },
    /// A kernel rejected its inputs or attributes.
    #[error("{node}: {reason}")]
    Kernel { node: NodeRef, reason: String },
    /// A kernel helper failed before the node context was attached (see `RefError::in_node`).
    #[error("{reason}")]
    Op { reason: String },
    /// A graph input fed to `Session::run` does not match the model.
    #[error("graph input '{input}': {reason}")]
    Input { input: String, reason: String },
    /// The graph itself is malformed (cycle, undefined value, missing opset import...).
    #[error("graph '{graph}': {reason}")]
    Graph { graph: String, reason: String },
    /// An error inside a subgraph or function body, with the node that owns it: displays as
    /// "node 3 'loop' (Loop) > body node 2 'add' (Add): reason".
    #[error("{node} > {part} {inner}")]
    Nested {
        /// The node whose subgraph or function body failed (boxed to keep the error small).
        node: Box<NodeRef>,
        /// Which part of it: "body", "then_branch", "function local::F", ...
        part: String,
        /// The error inside.
        inner: Box<RefError>,
    },
    /// A value has a type the operation cannot take.
    #[error("{context}: unsupported data type {dtype}")]
    UnsupportedDType { context: String, dtype: DType },
}

impl RefError {
    /// An error from inside a kernel helper; the node is attached by the executor.
    pub fn op(reason: impl Into<String>) -> Self {
        RefError::Op {
            reason: reason.into(),
        }
    }

    /// Wraps an error from inside `part` (a subgraph attribute or a function body) of `node`.
    pub fn nested(node: &NodeRef, part: impl Into<String>, inner: RefError) -> Self {
        RefError::Nested {
            node: Box::new(node.clone()),
            part: part.into(),
            inner: Box::new(inner),
        }
    }

    /// Attaches a node to a context-free error (`Op`, `UnsupportedDType`).
    pub fn in_node(self, node: &NodeRef) -> Self {
        match self {
            RefError::Op { reason } => RefError::Kernel {
                node: node.clone(),
                reason,
            },
            RefError::UnsupportedDType { context, dtype } => RefError::Kernel {
                node: node.clone(),
                reason: format!("{context}: unsupported data type {dtype}"),
            },
            RefError::InvalidTensor { tensor, reason } => RefError::Kernel {
                node: node.clone(),
                reason: format!("tensor '{tensor}': {reason}"),
            },
            RefError::TooLarge {
                tensor,
                shape,
                elements,
                limit,
            } => RefError::Kernel {
                node: node.clone(),
                reason: format!(
                    "result '{tensor}' of shape {shape:?} has {elements} elements, above the limit of {limit}"
                ),
            },
            other => other,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = RefError> = std::result::Result<T, E>;
