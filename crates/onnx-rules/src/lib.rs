//! The onnx-opt rule language: a pest grammar, a syntax tree with spans, a checker against the
//! ONNX operator schemas, and the rule IR ([`ir`]) that onnx-egraph compiles. The language is
//! described in `rules/README.md`.
//!
//! [`parse_rules`] reads one file and either returns every rule checked, or every error of the
//! file at once, each with `file:line:col` and a caret excerpt.
//!
//! ```
//! use onnx_rules::{parse_rules, CheckOptions, ir::Precision};
//!
//! let source = "\
//! ## cleanup.rules: eliminations that make no arithmetic change.
//!
//! ## Identity(x) == x
//! rule identity_elim [exact]:
//!   Identity(x) => x
//!
//! ## Squeeze(Unsqueeze(x, a), a) == x
//! rule squeeze_unsqueeze:
//!   Squeeze<axes: a>(Unsqueeze<axes: a>(x)) => x
//! ";
//! let file = parse_rules("cleanup.rules", source, &CheckOptions::default()).unwrap();
//! assert_eq!(file.rules.len(), 2);
//! assert_eq!(file.rules[0].doc, "Identity(x) == x");
//! assert_eq!(file.rules[0].tags.precision, Precision::Exact);
//! // Squeeze and Unsqueeze moved `axes` to an input at opset 13: two epochs at least.
//! assert!(file.rules[1].epochs.len() >= 2);
//!
//! let bad = "# header\n\n# Relu(x) == x\nrule r:\n  Relux(x) => x\n";
//! let err = parse_rules("bad.rules", bad, &CheckOptions::default()).unwrap_err();
//! assert!(err.to_string().starts_with("bad.rules:5:3: error: unknown op `Relux`"));
//! ```

mod ast;
mod check;
mod classes;
mod diag;
mod funcs;
pub mod ir;
pub mod params;
mod parse;

use std::collections::BTreeSet;

pub use classes::{
    is_associative, is_commutative, op_class_from_name, op_class_members, op_class_name, OP_CLASSES,
};
pub use diag::{Diagnostic, Diagnostics};
pub use funcs::{builtin, FuncSig, GuardSig, Ty, BUILTINS};

/// What the checker needs to know besides the file.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Guards written in Rust, callable like built-ins.
    pub extra_guards: Vec<GuardSig>,
    /// Rule names already used by other loaded files (names are unique across files).
    pub taken_names: BTreeSet<String>,
}

/// The errors of a rule file; its `Display` is the full rendering of every error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{rendered}")]
pub struct RulesError {
    path: String,
    diagnostics: Diagnostics,
    rendered: String,
}

impl RulesError {
    /// The path the file was read from, as given.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every error, in source order.
    pub fn diagnostics(&self) -> &Diagnostics {
        &self.diagnostics
    }
}

/// Parses and checks one rule file. `path` names the file in messages and in the result.
pub fn parse_rules(
    path: &str,
    source: &str,
    options: &CheckOptions,
) -> Result<ir::RuleFile, RulesError> {
    let index = diag::LineIndex::new(source);
    let (file, mut errors) = parse::parse_file(source, &index);
    let checked = check::check_file(path, source, &index, &file, options, &mut errors);
    if errors.is_empty() {
        return Ok(checked);
    }
    let mut diagnostics = Diagnostics::new();
    diagnostics.extend(errors);
    diagnostics.sort();
    let rendered = diagnostics.render(path, source);
    Err(RulesError {
        path: path.to_string(),
        diagnostics,
        rendered,
    })
}
