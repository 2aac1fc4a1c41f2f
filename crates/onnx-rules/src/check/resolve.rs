//! Op resolution, the opset window and its epochs.
//!
//! Every named op is looked up in the schema registry. A default-domain op *exists* at the
//! opsets where the schema it binds to is not deprecated (and, for `Op@A..B`, has its
//! since_version in `A..=B`). The rule's window is its `[opset A..B]` tag (default `1..`)
//! intersected with where every named default-domain op exists; when that leaves several
//! pieces, the newest one is kept. Only an empty window is an error. The window is then split
//! at every since_version of every named default-domain op (deprecations included): inside
//! one epoch each op binds to one schema version, so checking an epoch at its first opset
//! checks all of it. Ops of other domains do not move the default-domain window; they are
//! checked against their newest version.

use std::collections::BTreeSet;

use onnx_schema::OpSchema;

use crate::classes::op_class_members;
use crate::diag::Diagnostic;
use crate::ir::*;

use super::{closest, merge_windows, show_window, Lowered, Site};

type OpKey = (String, String, Option<(i64, Option<i64>)>);

fn key(r: &OpRef) -> OpKey {
    (r.domain.clone(), r.op_type.clone(), r.since)
}

fn in_range(since: Option<(i64, Option<i64>)>, v: i64) -> bool {
    since.is_none_or(|(lo, hi)| v >= lo && hi.is_none_or(|h| v <= h))
}

/// The window, the epochs and the ops that resolved.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub window: OpsetWindow,
    /// Empty when the window is.
    pub epochs: Vec<Epoch>,
    known: BTreeSet<OpKey>,
    /// Set when the rule is a version step (every default-domain op pinned).
    pub step: Option<VersionStep>,
}

impl Resolved {
    /// Whether the op was found (unknown ops are reported once and then skipped).
    pub fn is_known(&self, r: &OpRef) -> bool {
        self.known.contains(&key(r))
    }

    /// The schema versions a named op binds to in the window, each with its opsets: one per
    /// epoch for the default domain, the newest version for other domains.
    pub fn bindings(&self, r: &OpRef) -> Vec<(&'static OpSchema, OpsetWindow)> {
        if !self.is_known(r) || self.epochs.is_empty() {
            return Vec::new();
        }
        if r.domain.is_empty() {
            self.epochs
                .iter()
                .filter_map(|e| Some((self.binding_at(r, e.window)?, e.window)))
                .collect()
        } else {
            self.binding_at(r, self.window)
                .map(|s| vec![(s, self.window)])
                .unwrap_or_default()
        }
    }

    /// The schema a named op binds to at the first opset of `w` (the newest usable version
    /// for other domains).
    pub fn binding_at(&self, r: &OpRef, w: OpsetWindow) -> Option<&'static OpSchema> {
        if !self.is_known(r) {
            return None;
        }
        let reg = onnx_schema::registry();
        if let (Some(pin), Some(_)) = (r.pin, self.step) {
            return reg
                .versions(&r.domain, &r.op_type)
                .iter()
                .find(|s| s.since_version == pin && !s.deprecated);
        }
        if r.domain.is_empty() {
            reg.lookup("", &r.op_type, w.min)
                .filter(|s| !s.deprecated && in_range(r.since, s.since_version))
        } else {
            reg.versions(&r.domain, &r.op_type)
                .iter()
                .rev()
                .find(|s| !s.deprecated && in_range(r.since, s.since_version))
        }
    }

    /// Every schema version of every member of an op class in the window, with its opsets.
    pub fn class_bindings(&self, class: OpClass) -> Vec<(&'static OpSchema, OpsetWindow)> {
        if self.epochs.is_empty() {
            return Vec::new();
        }
        let reg = onnx_schema::registry();
        let mut out = Vec::new();
        for op in op_class_members(class) {
            for (s, w) in version_spans(reg.versions("", op), None) {
                if let Some(w) = intersect_one(w, self.window) {
                    out.push((s, w));
                }
            }
        }
        out
    }
}

/// Each usable (not deprecated, in range) version with the opsets that bind to it.
fn version_spans(
    versions: &[OpSchema],
    since: Option<(i64, Option<i64>)>,
) -> Vec<(&OpSchema, OpsetWindow)> {
    versions
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.deprecated && in_range(since, s.since_version))
        .map(|(i, s)| {
            let max = versions.get(i + 1).map(|n| n.since_version - 1);
            let w = OpsetWindow {
                min: s.since_version,
                max,
            };
            (s, w)
        })
        .collect()
}

fn intersect_one(a: OpsetWindow, b: OpsetWindow) -> Option<OpsetWindow> {
    let min = a.min.max(b.min);
    let max = match (a.max, b.max) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    };
    (max.is_none_or(|m| m >= min)).then_some(OpsetWindow { min, max })
}

fn intersect(a: &[OpsetWindow], b: &[OpsetWindow]) -> Vec<OpsetWindow> {
    let mut out: Vec<OpsetWindow> = a
        .iter()
        .flat_map(|x| b.iter().filter_map(|y| intersect_one(*x, *y)))
        .collect();
    out.sort_by_key(|w| w.min);
    out
}

fn show_windows(ws: &[OpsetWindow]) -> String {
    ws.iter()
        .map(|w| show_window(*w))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Looks up every named op, computes the window and the epochs.
pub(crate) fn resolve(
    lw: &Lowered,
    tag_window: OpsetWindow,
    diags: &mut Vec<Diagnostic>,
) -> Resolved {
    let reg = onnx_schema::registry();
    if let Some(r) = step_rule(lw, tag_window, diags) {
        return r;
    }
    let mut known = BTreeSet::new();
    let mut pieces = vec![tag_window];
    let mut empty = false;
    let mut seen = BTreeSet::new();
    for (site, info) in &lw.sites {
        let Some(OpHead::Named(r)) = site_head(lw, site) else {
            continue;
        };
        if !seen.insert(key(r)) {
            continue;
        }
        let versions = reg.versions(&r.domain, &r.op_type);
        if versions.is_empty() {
            diags.push(unknown_op(r, info.head));
            continue;
        }
        if let Some((lo, hi)) = r.since {
            if !versions.iter().any(|s| in_range(r.since, s.since_version)) {
                let all: Vec<String> = versions
                    .iter()
                    .map(|s| s.since_version.to_string())
                    .collect();
                let range = show_window(OpsetWindow { min: lo, max: hi });
                diags.push(
                    Diagnostic::new(
                        info.since.unwrap_or(info.head),
                        format!(
                            "no version of `{}` has its since_version in {range}",
                            r.op_type
                        ),
                    )
                    .with_note(format!("its versions: {}", all.join(", "))),
                );
                continue;
            }
        }
        known.insert(key(r));
        if !r.domain.is_empty() || empty {
            continue;
        }
        let exists = merge_windows(
            version_spans(versions, r.since)
                .into_iter()
                .map(|(_, w)| w)
                .collect(),
        );
        let next = intersect(&pieces, &exists);
        if next.is_empty() {
            let name = match r.since {
                Some((lo, hi)) => format!(
                    "{}@{}",
                    r.op_type,
                    show_window(OpsetWindow { min: lo, max: hi })
                ),
                None => r.op_type.clone(),
            };
            let exists_at = if exists.is_empty() {
                "at no opset".to_string()
            } else {
                format!("at opsets {}", show_windows(&exists))
            };
            diags.push(
                Diagnostic::new(
                    info.head,
                    format!(
                        "`{name}` does not exist at any opset of the rule's window ({})",
                        show_windows(&pieces)
                    ),
                )
                .with_note(format!("`{name}` exists (not deprecated) {exists_at}")),
            );
            empty = true;
        } else {
            pieces = next;
        }
    }
    let window = pieces.last().copied().unwrap_or(tag_window);
    let epochs = if empty {
        Vec::new()
    } else {
        split_epochs(window, &known)
    };
    Resolved {
        window,
        epochs,
        known,
        step: None,
    }
}

/// The head of the op at a site, if the site is an op.
fn site_head<'a>(lw: &'a Lowered, site: &Site) -> Option<&'a OpHead> {
    match site {
        Site::Pat(p) => match lw.rule.pat(*p) {
            Pat::Op(op) => Some(&op.head),
            _ => None,
        },
        Site::Term(t) => match lw.rule.term(*t) {
            Term::Op(op) => Some(&op.head),
            _ => None,
        },
    }
}

/// A default-domain op of a rule: the reference, whether it is on the right side, the span of
/// its head and of its `@` version.
type SiteOp<'a> = (&'a OpRef, bool, Span, Option<Span>);

/// The default-domain named ops of the rule; and whether the rule has op variables.
fn default_ops(lw: &Lowered) -> (Vec<SiteOp<'_>>, bool) {
    let mut out = Vec::new();
    let mut has_var = false;
    for (site, info) in &lw.sites {
        let Some(head) = site_head(lw, site) else {
            continue;
        };
        let right = matches!(site, Site::Term(_));
        match head {
            OpHead::Named(r) if r.domain.is_empty() => out.push((r, right, info.head, info.since)),
            OpHead::Named(_) => {}
            OpHead::Var { .. } => has_var = true,
        }
    }
    (out, has_var)
}

/// A version step: every default-domain op pinned (`Op@A`), no op variables. Its window is the
/// tag's, in one epoch; each side must bind its pins at one opset (its largest pin). Returns
/// `None` for other rules (reporting a pin on the right side of a rule that is not a step).
fn step_rule(
    lw: &Lowered,
    tag_window: OpsetWindow,
    diags: &mut Vec<Diagnostic>,
) -> Option<Resolved> {
    let (ops, has_var) = default_ops(lw);
    let all_pinned = !ops.is_empty() && !has_var && ops.iter().all(|(r, ..)| r.pin.is_some());
    if !all_pinned {
        for (r, right, head, since) in &ops {
            if *right && r.pin.is_some() {
                diags.push(
                    Diagnostic::new(
                        since.unwrap_or(*head),
                        format!(
                            "`{}@{}` pins a version on the right side, which only a version step can do",
                            r.op_type,
                            r.pin.unwrap_or_default()
                        ),
                    )
                    .with_note("in a version step every op is pinned (`Op@A`), on both sides, and no op variable is used"),
                );
            }
        }
        return None;
    }
    let reg = onnx_schema::registry();
    let mut known = BTreeSet::new();
    let mut failed = false;
    let mut side_opset = [0i64; 2];
    for (r, right, head, since) in &ops {
        let pin = r.pin.unwrap_or_default();
        let versions = reg.versions("", &r.op_type);
        if versions.is_empty() {
            diags.push(unknown_op(r, *head));
            failed = true;
            continue;
        }
        if !versions
            .iter()
            .any(|s| s.since_version == pin && !s.deprecated)
        {
            let all: Vec<String> = versions
                .iter()
                .filter(|s| !s.deprecated)
                .map(|s| s.since_version.to_string())
                .collect();
            diags.push(
                Diagnostic::new(
                    since.unwrap_or(*head),
                    format!("`{}` has no version {pin} (not deprecated)", r.op_type),
                )
                .with_note(format!("its versions: {}", all.join(", "))),
            );
            failed = true;
            continue;
        }
        known.insert(key(r));
        let side = &mut side_opset[usize::from(*right)];
        *side = (*side).max(pin);
    }
    // Each side at its opset: every op there binds its pin.
    if !failed {
        for (r, right, head, _) in &ops {
            let at = side_opset[usize::from(*right)];
            let bound = reg.lookup("", &r.op_type, at).map(|s| s.since_version);
            if bound != r.pin {
                let side = if *right { "right" } else { "left" };
                diags.push(Diagnostic::new(
                    *head,
                    format!(
                        "the {side} side's ops do not exist together: at opset {at} `{}` is version {}, not {}",
                        r.op_type,
                        bound.map_or("none".to_string(), |b| b.to_string()),
                        r.pin.unwrap_or_default()
                    ),
                ));
                failed = true;
            }
        }
    }
    // Ops of other domains resolve as in any rule.
    for (site, info) in &lw.sites {
        if let Some(OpHead::Named(r)) = site_head(lw, site) {
            if !r.domain.is_empty() {
                if reg.versions(&r.domain, &r.op_type).is_empty() {
                    diags.push(unknown_op(r, info.head));
                } else {
                    known.insert(key(r));
                }
            }
        }
    }
    Some(Resolved {
        window: tag_window,
        epochs: if failed {
            Vec::new()
        } else {
            vec![Epoch { window: tag_window }]
        },
        known,
        step: (!failed).then_some(VersionStep {
            lhs_opset: side_opset[0],
            rhs_opset: side_opset[1],
        }),
    })
}

/// The window split at every since_version of the known default-domain ops.
fn split_epochs(window: OpsetWindow, known: &BTreeSet<OpKey>) -> Vec<Epoch> {
    let reg = onnx_schema::registry();
    let mut points: BTreeSet<i64> = BTreeSet::new();
    for (domain, op, _) in known {
        if !domain.is_empty() {
            continue;
        }
        for s in reg.versions(domain, op) {
            let v = s.since_version;
            if v > window.min && window.max.is_none_or(|m| v <= m) {
                points.insert(v);
            }
        }
    }
    let mut epochs = Vec::new();
    let mut start = window.min;
    for p in points {
        epochs.push(Epoch {
            window: OpsetWindow {
                min: start,
                max: Some(p - 1),
            },
        });
        start = p;
    }
    epochs.push(Epoch {
        window: OpsetWindow {
            min: start,
            max: window.max,
        },
    });
    epochs
}

fn unknown_op(r: &OpRef, span: Span) -> Diagnostic {
    let reg = onnx_schema::registry();
    let domain_known = reg.domains().any(|d| d == r.domain);
    if !domain_known {
        let domains: Vec<&str> = reg
            .domains()
            .map(|d| if d.is_empty() { "ai.onnx" } else { d })
            .collect();
        return Diagnostic::new(span, format!("unknown domain `{}`", r.domain))
            .with_note(format!("the schema registry knows: {}", domains.join(", ")));
    }
    let shown = if r.domain.is_empty() {
        format!("`{}`", r.op_type)
    } else {
        format!("`{}::{}`", r.domain, r.op_type)
    };
    let mut d = Diagnostic::new(span, format!("unknown op {shown}"));
    if let Some(close) = closest(&r.op_type, reg.op_types(&r.domain)) {
        d = d.with_note(format!("did you mean `{close}`?"));
    }
    d
}
