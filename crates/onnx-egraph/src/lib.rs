//! onnx-egraph: ONNX graphs in an e-graph (egg).
//!
//! - [`lang`]: the language (one operator e-node kind keyed by an interned op description;
//!   attribute, input, constant, `None`, `Out` and `Root` nodes).
//! - [`analysis`]: types, constants and names per class; constant folding with the reference
//!   interpreter's kernels (`fold`).
//! - [`lift`]: IR graph -> e-graph. [`extract`]: DAG-aware greedy extraction under a cost model.
//!   [`emit`]: selection -> IR graph. [`saturate`]: rule phases with limits.
//! - [`rules`]: rules of the DSL in the e-graph, and rules whose left side is text and whose
//!   guard and right side are Rust closures ([`RuleSet::add_rust_rule`]).
//! - [`optimize_model`]: the whole path for a model.

pub mod analysis;
pub mod build;
pub mod convert;
pub mod cost;
mod egraph;
pub mod emit;
mod explain;
pub mod extract;
mod fold;
pub mod lang;
pub mod lift;
mod pipeline;
pub mod rules;
pub mod saturate;
pub mod tables;
pub mod types;
mod value;

pub use analysis::{
    ClassData, FoldOptions, MergeCause, OnnxAnalysis, OnnxEGraph, Refusal, TypeConflict,
};
pub use build::{AttrArg, OpBuilder, Roles};
pub use explain::{explain_rule, SiteReport, SiteVerdict};
pub use extract::{extract_dag, legal_at, AtOpset, CostModel, Latency, NodeCount, Selection};
pub use lang::{AttrId, ConstId, NodeKind, ONode, OpId};
pub use pipeline::{optimize_model, CostKind, GraphReport, OptimizeOptions, OptimizeReport};
pub use rules::{
    GuardCtx, GuardRegistry, RuleSet, RustApplier, RustGuard, RustMatch, RustOp, RustRhs, Val,
};
pub use saturate::{Phase, PhaseReport, PhaseStop};

/// Errors of the e-graph layer.
#[derive(Debug, thiserror::Error)]
pub enum EGraphError {
    #[error("node '{node}' ({op}): no opset import for domain '{domain}'")]
    NoOpset {
        node: String,
        op: String,
        domain: String,
    },
    #[error("{0}")]
    Ir(String),
    #[error("building {op}: {message}")]
    Build { op: String, message: String },
    #[error("extraction found no finite-cost graph (every candidate was forbidden or cyclic)")]
    NoExtraction,
    #[error("cannot express {} node(s) at opset {target} (no rule gives an equivalent there):\n  {}", nodes.len(), nodes.join("\n  "))]
    NotExpressible {
        target: i64,
        /// `name (Op, bound to since_version V)` per node.
        nodes: Vec<String>,
    },
    #[error("phase '{phase}': {cause} merged values of different types ({left} vs {right}): the rule is unsound")]
    UnsoundMerge {
        phase: String,
        cause: String,
        left: String,
        right: String,
    },
    #[error("the optimized graph fails the checker: {0}")]
    Check(String),
    #[error("no rule named '{0}'")]
    UnknownRule(String),
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A rule given to `RuleSet::add_rust_rule` that cannot take a Rust right side.
    #[error("rust rule '{rule}': {message}")]
    RustRule { rule: String, message: String },
    #[error("internal error: {0}")]
    Internal(String),
}
