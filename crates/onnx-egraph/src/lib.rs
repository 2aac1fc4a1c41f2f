//! onnx-egraph: ONNX graphs in an e-graph (egg).
//!
//! [`rewrite_model`] is the whole path for one model: each graph (subgraphs first) is lifted
//! into an e-graph whose analysis types every class and folds constants with the reference
//! interpreter's kernels, saturated by the [`Phase`]s of rules, rebound to a target opset when
//! one is given, extracted under a cost model ([`CostKind`]) and emitted back as an IR graph;
//! the result passes the checker or the call is an error.
//!
//! The surface, by what a caller does with it:
//! - rewrite a model: [`rewrite_model`], [`RewriteOptions`], [`RewriteReport`], [`Phase`],
//!   [`FoldOptions`], [`CostKind`];
//! - hold rules: [`RuleSet`] (rules of the DSL, and rules whose left side is text and whose
//!   guard and right side are Rust: [`RuleSet::add_rust_rule`], [`RustMatch`], [`RustRhs`]),
//!   [`GuardRegistry`] for guards written in Rust; [`explain_rule`] says why a rule did or did
//!   not fire at each site;
//! - drive the steps one by one (the prover does): [`lift_graph`], [`saturate`],
//!   [`extract_dag`] with a [`CostModel`], [`emit_graph`], over an [`OnnxEGraph`] of
//!   [`ONode`]s.
//!
//! Layers, bottom up: `lang` and `tables` (the language and its interned tables), `egraph`
//! (the analysis data), `types`, `value`, `fold`, `build` (the one op builder), `analysis`,
//! `lift`, `rules`, `saturate`, `convert` (version rebinding), `cost`, `extract`, `emit`,
//! `explain`, `rewrite` (the driver).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use onnx_egraph::{rewrite_model, Phase, RewriteOptions, RuleSet};
//!
//! let model = onnx_ir::Model::from_proto(
//!     onnx_text::parse_model(
//!         r#"<ir_version: 8, opset_import: ["" : 17]>
//!         g (float[2,3] x) => (float[2,3] y) {
//!             a = Transpose <perm = [1, 0]> (x)
//!             b = Transpose <perm = [1, 0]> (a)
//!             y = Relu(b)
//!         }"#,
//!     )
//!     .unwrap(),
//! )
//! .unwrap();
//! // A file header, then two rules, each with its identity on a `#` line above it.
//! let text = [
//!     "# transposes",
//!     "",
//!     "# Transpose(Transpose(x, q), p) == Transpose(x, compose(q, p))",
//!     "rule tt [exact]:",
//!     "  Transpose<perm: p>(Transpose<perm: q>(x)) => Transpose<perm: compose(q, p)>(x)",
//!     "",
//!     "# Transpose(x, identity) == x",
//!     "rule ti [exact]:",
//!     "  Transpose<perm: p>(x) => x",
//!     "  where is_identity(p)",
//! ]
//! .join("\n");
//! let mut rules = RuleSet::new();
//! rules.add_file(onnx_rules::parse_rules("t.rules", &text, &Default::default()).unwrap());
//! let options = RewriteOptions {
//!     phases: vec![Phase::new("transposes", Arc::new(rules))],
//!     ..Default::default()
//! };
//! let (out, report) = rewrite_model(&model, options).unwrap();
//! let ops: Vec<String> = out.graph.nodes_in_order().map(|(_, n)| n.op_type.to_string()).collect();
//! assert_eq!(ops, ["Relu"]);
//! assert_eq!(report.main.nodes_before, 3);
//! assert!(report.main.phases[0].firings.contains_key("tt"));
//! ```

mod analysis;
mod build;
mod convert;
mod cost;
mod egraph;
mod emit;
mod explain;
mod extract;
mod fold;
mod lang;
mod lift;
mod rewrite;
mod rules;
mod saturate;
mod tables;
mod types;
mod value;

pub use analysis::{
    ClassData, FoldOptions, MergeCause, OnnxAnalysis, OnnxEGraph, Refusal, TypeConflict,
};
pub use build::RANDOM_OPS;
pub use emit::{emit_graph, EmitOptions};
pub use explain::{explain_rule, SiteReport, SiteVerdict};
pub use extract::{
    extract_dag, extract_dag_keeping, legal_at, AtOpset, CostModel, Latency, NodeCount, Selection,
};
pub use lang::{AttrId, ConstId, NodeKind, ONode, OpId};
pub use lift::{lift_graph, opset_map, Lifted, Origin};
pub use rewrite::{
    import_used_domains, rewrite_model, CostKind, GraphReport, RewriteOptions, RewriteReport,
};
pub use rules::{
    GuardCtx, GuardRegistry, RuleSet, RustApplier, RustGuard, RustMatch, RustOp, RustRhs, Val,
};
pub use saturate::{saturate, Phase, PhaseReport, PhaseStop};
pub use tables::{AttrTable, AttrValue, ConstEntry, ConstStore, OpInfo, OpTable};

/// Why a rule's right side could not be built at one site. The union is not made and the run
/// goes on: the message becomes the site's refusal reason (`rules explain` shows it).
#[derive(Debug, thiserror::Error)]
pub enum RhsError {
    #[error("an attribute expression has no known value")]
    NoKnownValue,
    #[error("a literal needs an input slot to take its type from")]
    LiteralWithoutSlot,
    #[error("literal in a slot the op does not have")]
    LiteralSlot,
    #[error("cannot tell the element type of a literal input of {op}")]
    LiteralType { op: String },
    #[error("literal {value} does not fit its type")]
    LiteralDoesNotFit { value: String },
    #[error("not a let variable")]
    NotALet,
    #[error("attribute value not usable as input")]
    AttributeNotInput,
    #[error("variable '{var}' is not a value")]
    NotAValue { var: String },
    #[error("spliced variable is not a list")]
    NotAList,
    #[error("op variable not bound")]
    UnboundOp,
    #[error("a projection of something that is not an op")]
    ProjectionOfNonOp,
    #[error("not an op")]
    NotAnOp,
    #[error("{op} has no version {pin}")]
    NoVersion { op: String, pin: i64 },
    #[error("no opset import for domain '{domain}'")]
    NoOpset { domain: String },
    #[error("the model imports no opset of domain '{domain}'")]
    NoImport { domain: String },
    #[error("{op} has no schema at opset {opset}")]
    NoSchema { op: String, opset: i64 },
    #[error("no schema of {op} at opset {opset}")]
    NoSchemaOf { op: String, opset: i64 },
    #[error("right-side op without a schema")]
    RhsWithoutSchema,
    #[error("{op}-{since} is outside the rule's range")]
    OutsideRange { op: String, since: i64 },
    #[error("{op} has no attribute '{attr}'")]
    NoAttribute { op: String, attr: String },
    #[error("{op}-{since} has no attribute '{attr}'")]
    NoAttributeAt {
        op: String,
        since: i64,
        attr: String,
    },
    #[error("attribute '{attr}' of {op}: wrong value {value}")]
    WrongValue {
        op: String,
        attr: String,
        value: String,
    },
    #[error("attribute '{attr}' ({ty}): wrong value {value}")]
    WrongValueOfType {
        attr: String,
        ty: String,
        value: String,
    },
    #[error("attribute '{attr}' is not a tensor")]
    NotATensor { attr: String },
    #[error("attribute '{attr}': no attribute value {value}")]
    NoAttributeValue { attr: String, value: String },
    #[error("output {index} of a single-output {op}")]
    OutputOfSingleOutput { op: String, index: usize },
    #[error("{n} outputs of a single-output op")]
    OutputsOfSingleOutput { n: usize },
    #[error("{value} is not a scalar of element type {dtype}")]
    NotAScalar { value: f64, dtype: i32 },
    #[error("the element type of the class is not known")]
    UnknownElementType,
    #[error("building {op}: no output")]
    NoOutput { op: String },
    /// An error building an op of a Rust rule's right side.
    #[error("building {op}: {source}")]
    Building { op: String, source: Box<RhsError> },
    #[error(transparent)]
    Build(#[from] EGraphError),
    /// What a Rust rule's own code says (`Err("...".into())`).
    #[error("{0}")]
    Rule(String),
}

impl From<&str> for RhsError {
    fn from(message: &str) -> RhsError {
        RhsError::Rule(message.to_string())
    }
}

impl From<String> for RhsError {
    fn from(message: String) -> RhsError {
        RhsError::Rule(message)
    }
}

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
