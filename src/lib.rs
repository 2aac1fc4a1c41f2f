//! onnx-opt: optimize ONNX models with equality saturation, and prove each result correct.
//!
//! This crate is the one dependency an embedder adds. It loads models (binary or the ONNX text
//! syntax), optimizes them with the built-in rules, rules written as text or in Rust, and named
//! pipelines, checks the result against the original in its own reference interpreter, and
//! saves them. The workspace crates it builds on are re-exported ([`ir`], [`proto`],
//! [`egraph`], [`rule_lang`], [`interp`], and [`egg`] for raw rewrites), so their versions
//! never have to be matched by hand.
//!
//! ```
//! use onnx_opt::{Optimizer, Pipeline};
//!
//! // A model in the ONNX text syntax (`onnx_opt::load` reads files in either form).
//! let model = onnx_opt::parse_text(
//!     r#"<ir_version: 8, opset_import: ["" : 13]>
//!        g (float[4, 8] x, float[4, 8] z) => (float[4, 2] y) <float[8, 2] w = {1., 2., 3., 4., 5.,
//!        6., 7., 8., 1., 2., 3., 4., 5., 6., 7., 8.}, float[2] b = {0.5, -0.5}> {
//!            d = Sub(x, z)
//!            n = Neg(d)
//!            m = MatMul(n, w)
//!            y = Add(m, b)
//!        }"#,
//! )?;
//!
//! // A rule of our own, as text; it is checked against the operator schemas when the
//! // optimizer runs, and proven on random instances by `onnx-opt rules check`.
//! let optimizer = Optimizer::new()
//!     .pipeline(Pipeline::builtin("default")?)
//!     .rules_text(
//!         "my.rules",
//!         "# My rules.\n\n# -(a - b) == b - a\nrule neg_sub: Neg(Sub(a, b)) => Sub(b, a)\n",
//!     );
//! let out = optimizer.optimize(&model)?; // checked on 3 random inputs by default
//!
//! // -(x - z) became z - x (our rule), MatMul + Add one Gemm (a built-in rule).
//! assert_eq!(out.report.nodes_before, 4);
//! assert_eq!(out.report.ops_after.get("Gemm"), Some(&1));
//! assert_eq!(out.report.nodes_after, 2);
//! assert_eq!(out.report.egraph.main.phases[0].firings.get("neg_sub"), Some(&1));
//! println!("{}", onnx_opt::to_text(&out.model));
//! # Ok::<(), onnx_opt::Error>(())
//! ```

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

mod assume;
mod files;
mod info;
mod input_shapes;
mod model;
mod optimizer;
mod passes;
mod pipeline;
mod rules;
mod run;
mod rust_rule;
pub mod testing;
mod verify;

pub use assume::Assumption;
pub use files::{
    check_ir, checker_warnings, optimize_file, render_table, sort_nodes, Outcome, OutputOptions,
};
pub use info::{elem_type_name, type_to_string, ModelInfo};
pub use model::{is_text_model, load_ir, load_ir_bytes, load_proto, save_proto, Loaded};
/// What a Rust rule's guard and right side see and build with.
pub use onnx_egraph::{RhsError, RustMatch, RustOp, RustRhs, Val};
pub use optimizer::{MismatchReport, Optimized, Optimizer, Report, Target, DEFAULT_CHECK_TRIALS};
pub use passes::{pass_names, pass_table, PassRun, PassRuns, PassSpec};
pub use pipeline::{PhaseSpec, Pipeline, BUILTIN_PIPELINES};
pub use rules::{
    load_rule_files, load_rule_set, read_rule_file, rule_phases, RuleSelection, BUILTIN_RULE_FILES,
    TARGET_RULE_FILES, VERSION_RULE_FILES,
};
pub use run::{
    npy, read_data_sets, read_value, render_profile, run_file, OutputSummary, RunConfig, RunOutcome,
};
pub use rust_rule::RustRule;
pub use verify::{
    compare_models, compare_models_on, compare_values, BoundaryError, Checked, InputSet, Mismatch,
    Tolerance, VerifyError,
};

/// The e-graph library, for raw rewrites (the escape hatch below the rule language).
pub use egg;
/// The e-graph layer: cost models, fold options, rule sets, the op builder.
pub use onnx_egraph as egraph;
/// The extraction cost model.
pub use onnx_egraph::{CostKind, FoldOptions};
/// The IR: model, graphs, nodes, attributes, the checker.
pub use onnx_ir as ir;
/// The in-memory model (arenas of nodes and values, opset imports, subgraphs, functions).
pub use onnx_ir::Model;
/// The protobuf types and file I/O (external data, atomic writes).
pub use onnx_proto as proto;
/// The reference interpreter: sessions, tensors, values.
pub use onnx_ref as interp;
/// The rule language: parsing and checking rule text.
pub use onnx_rules as rule_lang;

fn render_check_errors(errors: &[onnx_ir::CheckError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("\n  ")
}

/// Errors of the onnx-opt library; each names the file, rule or pipeline it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading, decoding or writing a protobuf file.
    #[error(transparent)]
    Proto(#[from] onnx_proto::Error),
    /// A text model that does not parse.
    #[error("{path}:{}:{}: {}", error.line, error.column, error.kind)]
    Text {
        /// The file (or `<text>`).
        path: PathBuf,
        /// The parse error, with its position (in the message, not repeated as a source).
        error: Box<onnx_text::ParseError>,
    },
    /// A model the IR cannot represent.
    #[error("{path}: cannot represent the model")]
    Ir {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: onnx_ir::IrError,
    },
    /// A model that fails the checker (a file loaded, or a model given to
    /// [`Optimizer::optimize`]: it refuses an invalid model before optimizing).
    #[error(
        "{path}: the model fails the checker:\n  {}",
        render_check_errors(errors)
    )]
    Check {
        /// The file (`<graph NAME>` for a model given in memory).
        path: PathBuf,
        /// Every problem found, in model order (each names its node where it has one:
        /// [`onnx_ir::CheckError::node`]).
        errors: Vec<onnx_ir::CheckError>,
    },
    /// The optimizer failed.
    #[error("{path}: optimization failed")]
    Optimize {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: onnx_egraph::EGraphError,
    },
    /// A pass made a model the checker accepted fail it (with pass validation on:
    /// [`Optimizer::validate_passes`]).
    #[error("pass '{pass}' broke the model (the checker accepted it before):\n  {}", errors.join("\n  "))]
    PassBrokeModel {
        /// The pass.
        pass: String,
        /// What the checker found.
        errors: Vec<String>,
    },
    /// The differential check found a difference; nothing was written.
    #[error("check failed, nothing written: {0}")]
    Mismatch(Box<MismatchReport>),
    /// A model the interpreter cannot run, or bad run inputs.
    #[error("{path}: {message}")]
    Run {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A `.npy` file whose bytes are not a tensor.
    #[error("{path}: {error}")]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong with it (in the message, not repeated as a source).
        error: Box<run::npy::NpyError>,
    },
    /// A rule file that cannot be read.
    #[error("{path}: cannot read the rule file")]
    RuleFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Rule files (or rules written in Rust) with errors: every file's diagnostics, each with
    /// its path and spans (`RulesError::diagnostics`); displayed as their renderings.
    #[error("{}", render_rule_errors(.0))]
    Rules(Vec<onnx_rules::RulesError>),
    /// A rule written in Rust that the e-graph refuses (its right side is not `extern`, ...).
    #[error("rust rule {rule}: {source}")]
    RustRule {
        /// The rule's name.
        rule: String,
        /// Why.
        #[source]
        source: Box<onnx_egraph::EGraphError>,
    },
    /// A pipeline that does not parse or names what does not exist.
    #[error("pipeline {origin}: {message}")]
    Pipeline {
        /// The built-in name or the file.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The check could not run and `--require-check` (`Optimizer::require_check`) asked for it.
    #[error("the check could not run: {reason}")]
    CheckSkipped {
        /// Why.
        reason: String,
    },
    /// The check itself could not run.
    #[error("check could not run")]
    Verify(#[source] Box<verify::VerifyError>),
    /// An `--input-shape` ([`Optimizer::input_shape`]) that names no input of the model or
    /// contradicts its declared shape.
    #[error("--input-shape {name}: {message}")]
    BadInputShape {
        /// The input named.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An `--assume NAME=WHAT` ([`Optimizer::assume`]) that names no input of the model, names
    /// one twice, or cannot hold for the input (its element type has no 1, the model's opset has
    /// no ConstantOfShape of that type, or a subgraph reads it).
    #[error("--assume {name}: {message}")]
    BadAssumption {
        /// The input named.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A `--same-dim` ([`Optimizer::same_dim`]) that names no symbolic dim of the model's
    /// inputs, or ties it to something other than a plain name.
    #[error("--same-dim {name}: {message}")]
    BadDim {
        /// The dim named.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An `--outputs` name ([`Optimizer::outputs`]) that is not an output of the model, or is
    /// named twice.
    #[error("--outputs {name}: {why} (the model's outputs: {})", outputs.join(", "))]
    BadOutput {
        /// The name given.
        name: String,
        /// `not an output of the model` or `named twice`.
        why: &'static str,
        /// The model's outputs, in order.
        outputs: Vec<String>,
    },
    /// A `--skip` ([`Optimizer::skip`]) that names no rule, rule file, label or pass.
    #[error(
        "--skip {name}: no rule, rule file, label or pass has this name{}",
        match close.is_empty() {
            true => String::new(),
            false => format!(" (did you mean: {}?)", close.join(", ")),
        }
    )]
    UnknownSkip {
        /// The name given.
        name: String,
        /// Names that are close to it, closest first.
        close: Vec<String>,
    },
}

/// Loads a model file, binary (`.onnx`, external data mapped in) or text (the ONNX text
/// syntax, told apart by its `.onnxtxt`/`.txt` extension or its leading `<`).
pub fn load(path: impl AsRef<Path>) -> Result<Model, Error> {
    Ok(model::load_ir(path.as_ref())?.model)
}

/// Decodes a model from bytes, binary or text. External data is not resolved (there is no
/// directory to resolve it against): a model that needs it must be loaded with [`load`].
pub fn load_bytes(bytes: &[u8]) -> Result<Model, Error> {
    let origin = Path::new("<bytes>");
    let proto = if model::is_text_model(origin, bytes) {
        let text = std::str::from_utf8(bytes).map_err(|e| Error::Run {
            path: origin.to_path_buf(),
            message: format!("text model is not UTF-8: {e}"),
        })?;
        model::parse_text_model(text, origin)?
    } else {
        onnx_proto::load_model_bytes(
            bytes::Bytes::copy_from_slice(bytes),
            origin,
            PathBuf::from("."),
        )?
        .model
    };
    to_ir(proto, origin)
}

/// Parses a model written in the ONNX text syntax.
pub fn parse_text(text: &str) -> Result<Model, Error> {
    let origin = Path::new("<text>");
    to_ir(model::parse_text_model(text, origin)?, origin)
}

fn to_ir(proto: onnx_proto::ModelProto, origin: &Path) -> Result<Model, Error> {
    Model::from_proto(proto).map_err(|source| Error::Ir {
        path: origin.to_path_buf(),
        source,
    })
}

/// Prints a model in the ONNX text syntax (as `onnx.printer` does).
pub fn to_text(model: &Model) -> String {
    onnx_text::print_model(&model.to_proto(), &onnx_text::PrintOptions::default())
}

/// Saves a model after checking it: through a temporary file and a rename, so a failure never
/// leaves a half-written file; past protobuf's 2 GiB limit, tensors move to external data.
pub fn save(model: &Model, path: impl AsRef<Path>) -> Result<(), Error> {
    let path = path.as_ref();
    files::check_ir(path, model)?;
    model::save_proto(
        &model.to_proto(),
        None,
        path,
        &onnx_proto::SaveOptions::default(),
    )?;
    Ok(())
}

/// Converts a model to opset `opset` of the default domain in one step (up or down) and checks
/// the result on three random inputs: shorthand for [`Optimizer::converter`]. A node carries
/// over when both versions of its operator compute the same function for it; a node with no
/// equivalent legal at the target is an error that lists every such node (no version rules
/// exist yet to rewrite the others).
pub fn convert(model: &Model, opset: i64) -> Result<Optimized, Error> {
    Optimizer::converter(opset).optimize(model)
}

/// Runs a model in the reference interpreter on named inputs; returns the outputs by name, in
/// the graph's order.
pub fn run(
    model: &Model,
    inputs: Vec<(String, onnx_ref::Value)>,
) -> Result<Vec<(String, onnx_ref::Value)>, Error> {
    let origin = || PathBuf::from(model_origin(model));
    let session = onnx_ref::Session::new(&model.to_proto()).map_err(|e| Error::Run {
        path: origin(),
        message: e.to_string(),
    })?;
    session.run(inputs).map_err(|e| Error::Run {
        path: origin(),
        message: e.to_string(),
    })
}

fn render_rule_errors(errors: &[onnx_rules::RulesError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn model_origin(model: &Model) -> String {
    match model.graph.name.as_deref() {
        Some(name) if !name.is_empty() => format!("<graph {name}>"),
        _ => "<model>".to_string(),
    }
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
