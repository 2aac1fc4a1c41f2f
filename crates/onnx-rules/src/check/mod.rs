//! The checker: syntax tree to [`crate::ir::RuleFile`], collecting every error of the file.
//!
//! Per file: the header, identity comments and rule names. Per rule, in phases:
//! 1. [`vars`]: lower to the IR arenas, bind and resolve variables;
//! 2. [`resolve`]: look the ops up, compute the opset window and split it into epochs;
//! 3. [`types`]: type the guard and computed-attribute expressions;
//! 4. [`ops`]: in every epoch, check each op against the schema it binds to (attributes,
//!    literal and computed attribute types, arity, outputs, `..rest`);
//! 5. [`types`] again: the light element-type check between the two sides.

mod ops;
mod resolve;
mod types;
mod vars;

use std::collections::{BTreeMap, BTreeSet};

use crate::ast::{self, TagKind};
use crate::diag::{Diagnostic, LineIndex};
use crate::ir::*;
use crate::CheckOptions;

/// One op occurrence of a rule: an op pattern or an op term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Site {
    Pat(PatId),
    Term(TermId),
}

/// Where the parts of one op occurrence are written, for messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct SiteInfo {
    /// The whole op.
    pub span: Span,
    /// The op name (or the op variable).
    pub head: Span,
    pub since: Option<Span>,
    pub outputs: Option<Span>,
    /// Per named attribute, in the order of the IR's `attrs`: its name and its value.
    pub attr_names: Vec<Span>,
    pub attr_values: Vec<Span>,
    pub rest: Option<Span>,
    pub inputs: Vec<Span>,
}

/// A rule lowered to the IR, with what later phases need to know about it.
#[derive(Debug, Clone)]
pub(crate) struct Lowered {
    pub rule: Rule,
    pub sites: BTreeMap<Site, SiteInfo>,
    /// Each attribute variable's first binding: the op pattern and the attribute name.
    pub attr_binding: BTreeMap<VarId, (PatId, String)>,
    /// Each `..rest` variable's op pattern.
    pub rest_binding: BTreeMap<VarId, PatId>,
    /// Each op variable's class.
    pub op_class: BTreeMap<VarId, OpClass>,
    /// Stand-ins for variables that did not resolve (already reported): typed as unknown.
    pub error_vars: BTreeSet<VarId>,
    /// Each `let` variable's term.
    pub let_terms: BTreeMap<VarId, TermId>,
}

/// Checks a parsed file; errors go to `diags`.
pub(crate) fn check_file(
    path: &str,
    source: &str,
    index: &LineIndex,
    file: &ast::File,
    options: &CheckOptions,
    diags: &mut Vec<Diagnostic>,
) -> RuleFile {
    let lines: Vec<&str> = source.split('\n').collect();
    let first_rule_line = lines
        .iter()
        .position(|l| crate::parse::starts_rule(l))
        .map_or(lines.len() + 1, |i| i + 1);
    let doc_start = if first_rule_line > lines.len() {
        first_rule_line
    } else {
        doc_block_start(&lines, first_rule_line)
    };
    let header = comment_text(lines.iter().take(doc_start.saturating_sub(1)).copied());
    if header.trim().is_empty() {
        let end = lines.first().map_or(0, |l| l.len());
        diags.push(
            Diagnostic::new(
                index.span(source, 0, end),
                "missing file header: a rule file starts with `#` comment lines saying what it holds and what it assumes",
            )
            .with_note("a blank line separates the header from the first rule's identity comment"),
        );
    }

    let mut seen: BTreeMap<&str, Span> = BTreeMap::new();
    let mut rules = Vec::new();
    for def in &file.rules {
        let line = def.keyword.line;
        let start = doc_block_start(&lines, line);
        let doc = comment_text(
            lines
                .iter()
                .take(line.saturating_sub(1))
                .skip(start.saturating_sub(1))
                .copied(),
        );
        if doc.trim().is_empty() {
            diags.push(
                Diagnostic::new(
                    def.name.span,
                    format!("rule `{}` has no identity comment", def.name.name),
                )
                .with_note("write the identity it states on a `#` line directly above it, e.g. `# Identity(x) == x`"),
            );
        }
        let name = def.name.name.as_str();
        if options.taken_names.contains(name) {
            diags.push(Diagnostic::new(
                def.name.span,
                format!("rule name `{name}` is already used by another loaded rule file"),
            ));
        } else if let Some(first) = seen.get(name) {
            diags.push(
                Diagnostic::new(def.name.span, format!("duplicate rule name `{name}`"))
                    .with_note(format!("first defined at {}:{}", first.line, first.col)),
            );
        } else {
            seen.insert(name, def.name.span);
        }
        let mut rule = check_rule(def, options, diags);
        rule.doc = doc;
        rules.push(rule);
    }
    RuleFile {
        path: path.to_string(),
        header,
        rules,
    }
}

/// The 1-based line where the comment block directly above `line` starts (`line` itself when
/// the line above is not a comment).
fn doc_block_start(lines: &[&str], line: usize) -> usize {
    let mut start = line;
    while start > 1
        && lines
            .get(start - 2)
            .is_some_and(|l| l.trim_start().starts_with('#'))
    {
        start -= 1;
    }
    start
}

/// The text of the comment lines among `lines`, without `#` and one following space.
fn comment_text<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    lines
        .filter_map(|l| l.trim().strip_prefix('#'))
        .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

fn check_rule(def: &ast::RuleDef, options: &CheckOptions, diags: &mut Vec<Diagnostic>) -> Rule {
    let (tags, tag_window) = check_tags(&def.tags, diags);
    check_rule_tagged(def, tags, tag_window, options, diags)
}

/// Checks a rule whose tags are already checked (a rule registered from Rust gets its tags
/// apart from its text).
pub(crate) fn check_rule_tagged(
    def: &ast::RuleDef,
    tags: Tags,
    tag_window: OpsetWindow,
    options: &CheckOptions,
    diags: &mut Vec<Diagnostic>,
) -> Rule {
    check_extern(def, options, diags);
    let lowered = vars::lower_rule(def, diags);
    let res = resolve::resolve(&lowered, tag_window, diags);
    let expr_types = types::expr_types(&lowered, &res, options, diags);
    ops::check_ops(&lowered, &res, &expr_types, diags);
    types::check_sides(&lowered, &res, diags);
    let mut rule = lowered.rule;
    rule.tags = tags;
    rule.window = res.window;
    rule.epochs = res.epochs;
    rule.step = res.step;
    // A version step rewrites a node into the same node at another version, operands in
    // place: before 7 broadcasting is directional (B to A), so operands never swap.
    if rule.step.is_some() {
        for (p, _) in rule.pats.iter_mut() {
            if let Pat::Op(op) = p {
                op.commutative = false;
            }
        }
    }
    rule
}

/// What a rule with an `extern` right side may not have: `extern` in a file that does not
/// allow it, several left roots, `let` clauses.
fn check_extern(def: &ast::RuleDef, options: &CheckOptions, diags: &mut Vec<Diagnostic>) {
    let Some(span) = def.extern_rhs else {
        return;
    };
    if !options.allow_extern {
        diags.push(
            Diagnostic::new(
                span,
                "the right side must be written: `extern` marks a right side built in Rust, which this file cannot provide",
            )
            .with_note("write the right side here, or register the rule from Rust (`RuleSet::add_rust_rule`, rules/README.md)"),
        );
    }
    if let Some(second) = def.lhs.get(1) {
        diags.push(Diagnostic::new(
            second.span(),
            "a rule whose right side is built in Rust has exactly one left root",
        ));
    }
    for clause in &def.clauses {
        if let ast::Clause::Let { name, .. } = clause {
            diags.push(Diagnostic::new(
                name.span,
                "a `let` is part of a right side in the rule language: a rule whose right side is built in Rust has none",
            ));
        }
    }
}

pub(crate) fn check_tags(tags: &[ast::Tag], diags: &mut Vec<Diagnostic>) -> (Tags, OpsetWindow) {
    let mut out = Tags::default();
    let mut window = OpsetWindow { min: 1, max: None };
    let mut precision_tag: Option<Span> = None;
    let mut opset_tag = false;
    let mut set_precision = |p: Precision, span: Span, diags: &mut Vec<Diagnostic>| {
        if let Some(first) = precision_tag {
            diags.push(
                Diagnostic::new(
                    span,
                    "conflicting precision tags: give one of `exact` or `tol X`",
                )
                .with_note(format!("the first is at {}:{}", first.line, first.col)),
            );
        } else {
            precision_tag = Some(span);
        }
        p
    };
    for tag in tags {
        match &tag.kind {
            TagKind::Word(w) => match w.as_str() {
                "exact" => out.precision = set_precision(Precision::Exact, tag.span, diags),
                "unsafe" => out.float_unsafe = true,
                "runtime_limit" => out.runtime_limit = true,
                "tol" | "opset" => diags.push(Diagnostic::new(
                    tag.span,
                    format!("tag `{w}` needs a value: `tol 1e-3`, `opset 13..`"),
                )),
                _ => {
                    if !out.labels.iter().any(|l| l == w) {
                        out.labels.push(w.clone());
                    }
                }
            },
            TagKind::Tol(lit) => {
                let v = match lit {
                    Literal::Int(i) => *i as f64,
                    Literal::Float(f) => *f,
                    _ => f64::NAN,
                };
                if !(v.is_finite() && v > 0.0) {
                    diags.push(Diagnostic::new(
                        tag.span,
                        "a tolerance is a finite number above 0",
                    ));
                }
                out.precision = set_precision(Precision::Tolerance(v), tag.span, diags);
            }
            TagKind::Opset(lo, hi) => {
                if opset_tag {
                    diags.push(Diagnostic::new(
                        tag.span,
                        "a rule has at most one `opset` tag",
                    ));
                    continue;
                }
                opset_tag = true;
                if *lo < 1 || hi.is_some_and(|h| h < *lo) {
                    diags.push(Diagnostic::new(tag.span, "empty opset range"));
                    continue;
                }
                window = OpsetWindow { min: *lo, max: *hi };
            }
        }
    }
    (out, window)
}

/// The `TensorProto.DataType` code of an element type name (`float` -> 1).
pub(crate) fn dtype_code(name: &str) -> Option<i32> {
    onnx_schema::element_type_from_name(name).map(|t| t as i32)
}

/// The candidate closest to `name` by edit distance, if close enough to be a likely typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .filter(|c| *c != name)
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Errors found in some epochs (or schema versions), merged so that each is reported once
/// with the opsets where it holds.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    found: BTreeMap<(usize, usize, String), Finding>,
}

/// One finding: where, its notes (from the newest epoch), and every window it holds in.
#[derive(Debug)]
struct Finding {
    span: Span,
    notes: Vec<String>,
    windows: Vec<OpsetWindow>,
}

impl Findings {
    pub(crate) fn add(&mut self, span: Span, message: String, notes: Vec<String>, at: OpsetWindow) {
        let entry = self
            .found
            .entry((span.start, span.end, message))
            .or_insert_with(|| Finding {
                span,
                notes: Vec::new(),
                windows: Vec::new(),
            });
        // Epochs come in ascending order: the notes describe the newest schema version.
        entry.notes = notes;
        entry.windows.push(at);
    }

    /// Emits each finding once; the opsets are named unless it holds in the whole window.
    pub(crate) fn emit(self, window: OpsetWindow, diags: &mut Vec<Diagnostic>) {
        for ((_, _, message), finding) in self.found {
            let merged = merge_windows(finding.windows);
            let message = if merged == [window] {
                message
            } else {
                let list: Vec<String> = merged.iter().map(|w| show_window(*w)).collect();
                let single = merged.len() == 1 && merged[0].max == Some(merged[0].min);
                let word = if single { "opset" } else { "opsets" };
                format!("{message} (at {word} {})", list.join(", "))
            };
            let mut d = Diagnostic::new(finding.span, message);
            d.notes = finding.notes;
            diags.push(d);
        }
    }
}

pub(crate) fn merge_windows(mut windows: Vec<OpsetWindow>) -> Vec<OpsetWindow> {
    windows.sort_by_key(|w| (w.min, w.max.unwrap_or(i64::MAX)));
    let mut out: Vec<OpsetWindow> = Vec::new();
    for w in windows {
        if let Some(last) = out.last_mut() {
            let last_end = last.max.unwrap_or(i64::MAX);
            if w.min <= last_end.saturating_add(1) {
                last.max = match (last.max, w.max) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                continue;
            }
        }
        out.push(w);
    }
    out
}

/// `13`, `1..12`, `13..`.
pub(crate) fn show_window(w: OpsetWindow) -> String {
    match w.max {
        Some(m) if m == w.min => m.to_string(),
        Some(m) => format!("{}..{m}", w.min),
        None => format!("{}..", w.min),
    }
}
