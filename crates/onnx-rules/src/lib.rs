//! The onnx-opt rule language: a pest grammar, a syntax tree with spans, a checker against the
//! ONNX operator schemas, and the rule IR ([`ir`]) that onnx-egraph compiles. The language is
//! described in `rules/README.md`.
//!
//! [`parse_rules`] reads one file and either returns every rule checked, or every error of the
//! file at once, each with `file:line:col` and a caret excerpt.
//! [`parse_extern_rule`] checks the left side and clauses of a rule whose right side is built in
//! Rust (`=> extern`, [`ir::Rhs::Extern`]; onnx-egraph's `RuleSet::add_rust_rule` runs it).
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
pub mod version_steps;

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
    /// Accept `=> extern` right sides (built by Rust code registered with the rule, see
    /// onnx-egraph's `RuleSet::add_rust_rule`). Off by default: a rule file must write its
    /// right sides. [`parse_extern_rule`] always accepts its own.
    pub allow_extern: bool,
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

impl RulesError {
    fn new(path: &str, source: &str, errors: Vec<Diagnostic>) -> Self {
        let mut diagnostics = Diagnostics::new();
        diagnostics.extend(errors);
        diagnostics.sort();
        let rendered = diagnostics.render(path, source);
        RulesError {
            path: path.to_string(),
            diagnostics,
            rendered,
        }
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
    Err(RulesError::new(path, source, errors))
}

/// Parses and checks a rule whose right side is built in Rust: `text` is its left side and
/// clauses (`where`, `hint`; `#` comment lines before the left side become its identity),
/// `tags` its tags as written between the brackets of a rule file (`"exact, opset 13.."`, or
/// `""`). The rule is checked like a rule of a file, in every epoch of its window, and comes
/// back with [`ir::Rhs::Extern`] as its right side; onnx-egraph's `RuleSet::add_rust_rule`
/// joins it to its Rust guard and applier.
///
/// Errors are labelled `rust rule NAME` with carets in `text` (`rust rule NAME tags` for an
/// error in `tags`, and the name itself for a name that is malformed or in
/// `options.taken_names`).
///
/// ```
/// use onnx_rules::{parse_extern_rule, CheckOptions};
///
/// let rule = parse_extern_rule(
///     "add_zero",
///     "Add(x, 0) where is_float(x)",
///     "exact",
///     &CheckOptions::default(),
/// )
/// .unwrap();
/// assert!(rule.is_extern());
///
/// let err = parse_extern_rule("bad", "Relux(x)", "", &CheckOptions::default()).unwrap_err();
/// assert!(err.to_string().starts_with("rust rule bad:1:1: error: unknown op `Relux`"));
/// ```
pub fn parse_extern_rule(
    name: &str,
    text: &str,
    tags: &str,
    options: &CheckOptions,
) -> Result<ir::Rule, RulesError> {
    let label = format!("rust rule {name}");
    let name_ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let taken = options.taken_names.contains(name);
    if !name_ok || taken {
        let index = diag::LineIndex::new(name);
        let span = index.span(name, 0, name.len());
        let message = if taken {
            format!("rule name `{name}` is already used by another loaded rule")
        } else {
            "a rule name is letters, digits and `_`".to_string()
        };
        return Err(RulesError::new(
            &label,
            name,
            vec![Diagnostic::new(span, message)],
        ));
    }
    let tag_index = diag::LineIndex::new(tags);
    let (tag_defs, mut tag_errors) = parse::parse_tags(tags, &tag_index);
    let (checked_tags, window) = check::check_tags(&tag_defs, &mut tag_errors);
    if !tag_errors.is_empty() {
        return Err(RulesError::new(&format!("{label} tags"), tags, tag_errors));
    }
    let index = diag::LineIndex::new(text);
    let (def, mut errors) = parse::parse_extern(text, &index, name);
    let options = CheckOptions {
        allow_extern: true,
        ..options.clone()
    };
    let rule = def.map(|def| {
        let mut rule = check::check_rule_tagged(&def, checked_tags, window, &options, &mut errors);
        rule.doc = leading_comments(text);
        rule
    });
    match rule {
        Some(rule) if errors.is_empty() => Ok(rule),
        _ => Err(RulesError::new(&label, text, errors)),
    }
}

/// The `#` comment lines at the start of a text, without `#` and one following space.
fn leading_comments(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .take_while(|l| l.is_empty() || l.starts_with('#'))
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}
