//! `explain`: why a rule did or did not fire on a model. The model is lifted and saturated with
//! the whole rule set (so the e-graph is the one optimization sees); then at every class where
//! the rule's root op occurs, the matcher runs with tracing: the verdict is that it fired, or the
//! deepest pattern node that failed and why, or the first conjunct of the guard that was false
//! or unknown; then the rule's applier runs on a copy of the e-graph: fired, a refused union,
//! or a right side not built. For a rule written in Rust, its Rust guard first, and an applier
//! that declines or fails.
//!
//! Layer: above `saturate` (it saturates the model first), `lift` and `rules`; nothing in the
//! crate imports it but `lib.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use onnx_ir::Model;
use onnx_rules::ir::{PatId, Precision, Rule, Span};

use crate::analysis::FoldOptions;
use crate::saturate::{saturate, Phase};
use crate::value::Val;
use crate::EGraphError;

use crate::rules::{
    candidates, guard_holds, rust_guard, use_counts, Applied, Env, Matcher, RuleEntry, RuleMatch,
    RuleSet, SearchCtx,
};

/// What happened at one site.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum SiteVerdict {
    /// The left side matched and the guard held: the rule fired here.
    Fired,
    /// A pattern node did not match (the deepest failure), at this line and column of the rule.
    PatternFailed {
        line: usize,
        col: usize,
        reason: String,
    },
    /// The guard's conjunct at this line and column was false, or unknown (an unknown rank,
    /// shape or value fails a guard). For the Rust guard of a rule written in Rust, the line
    /// and column are the rule's and `value` is `false (the Rust guard)` or
    /// `unknown (the Rust guard)`. `bound` lists the value variables the match bound with
    /// their element type and shape as the analysis knows them (`m: float[batch,1,seq,?]`),
    /// which is what a shape guard reads.
    GuardFailed {
        line: usize,
        col: usize,
        value: String,
        bound: Vec<String>,
    },
    /// Matched, guard true, but the implicit type guard of a bare-variable right side failed.
    TypeUnknownOrDifferent,
    /// Matched and the guard held, but the engine refused the union (the right side has a
    /// different type or constant): the rule is unsound here. For a rule written in Rust, also
    /// an applier that failed (`the Rust applier failed: ...`) or declined the match
    /// (`declined by the Rust applier`).
    Refused(String),
    /// Matched and the guard held, but the right side could not be built here (an attribute
    /// expression with no value, a constant of the wrong kind): the rule does not fire.
    NotBuilt(String),
}

impl std::fmt::Display for SiteVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SiteVerdict::Fired => f.write_str("fired"),
            SiteVerdict::PatternFailed { line, col, reason } => {
                write!(f, "pattern failed at {line}:{col}: {reason}")
            }
            SiteVerdict::GuardFailed {
                line,
                col,
                value,
                bound,
            } => {
                write!(f, "guard failed at {line}:{col}: the condition is {value}")?;
                if !bound.is_empty() {
                    write!(f, " ({})", bound.join(", "))?;
                }
                Ok(())
            }
            SiteVerdict::Refused(reason) => {
                write!(f, "matched, but the union was refused: {reason}")
            }
            SiteVerdict::NotBuilt(reason) => {
                write!(f, "matched, but the right side was not built: {reason}")
            }
            SiteVerdict::TypeUnknownOrDifferent => {
                f.write_str("matched, but the replacement's type is not known equal to the value's")
            }
        }
    }
}

/// One site: a class where the rule's root op occurs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SiteReport {
    /// A value name the class had in the model (or `class N`).
    pub site: String,
    pub verdict: SiteVerdict,
}

/// Explains rule `name` of `rules` on the model's main graph.
pub fn explain_rule(
    model: &Model,
    rules: Arc<RuleSet>,
    name: &str,
) -> Result<Vec<SiteReport>, EGraphError> {
    let entry = rules
        .entry(name)
        .cloned()
        .ok_or_else(|| EGraphError::UnknownRule(name.to_string()))?;
    let rule: &Rule = &entry.rule;
    let lifted = crate::lift::lift_model(model, FoldOptions::default())?;
    let opset = lifted.egraph.analysis.opsets.get("").copied().unwrap_or(0);
    let uses = lifted.uses.clone();
    let (mut egraph, _) = saturate(
        lifted.egraph,
        &[Phase::new("explain", rules.clone())],
        &uses,
    )?;
    egraph.rebuild();
    let use_map: BTreeMap<egg::Id, usize> = use_counts(&egraph, &uses);
    let ctx = SearchCtx {
        eg: &egraph,
        opset,
        uses: &use_map,
        guards: &rules.guards,
    };
    let mut out = Vec::new();
    if !rule.window.contains(opset) {
        return Ok(out);
    }
    let depth = pattern_depths(rule);
    let Some(&root) = rule.lhs.first() else {
        return Ok(out);
    };
    for c in candidates(&egraph, rule, root) {
        let m = Matcher {
            eg: &egraph,
            rule,
            opset,
            ac: rule.tags.precision != Precision::Exact,
            trace: Some(Default::default()),
            bound: Default::default(),
        };
        let empty: Env = vec![None; rule.vars.len()];
        let envs = m.pat(root, c, &empty);
        let site = egraph[c]
            .data
            .names
            .iter()
            .next()
            .cloned()
            .unwrap_or_else(|| format!("class {c}"));
        let verdict = if envs.is_empty() {
            let trace = m.trace.map(|t| t.into_inner()).unwrap_or_default();
            let deepest = trace
                .iter()
                .filter(|(_, r)| !r.is_empty())
                .max_by_key(|(p, _)| depth.get(p).copied().unwrap_or(0));
            match deepest {
                Some((p, reason)) => {
                    let s = rule.pats[p.0 as usize].1;
                    SiteVerdict::PatternFailed {
                        line: s.line,
                        col: s.col,
                        reason: reason.clone(),
                    }
                }
                None => SiteVerdict::PatternFailed {
                    line: rule.span.line,
                    col: rule.span.col,
                    reason: "no match".into(),
                },
            }
        } else {
            let held: Vec<&Env> = envs
                .iter()
                .filter(|e| guard_holds(&ctx, rule, e, &[c]))
                .collect();
            match held.first() {
                None => guard_failure(&ctx, rule, &envs[0], c),
                Some(first) if entry.rust.is_none() => applied_verdict(&ctx, &entry, first, c),
                Some(first) => rust_verdict(&ctx, &entry, &held, first, c),
            }
        };
        out.push(SiteReport { site, verdict });
    }
    Ok(out)
}

/// The verdict of a Rust rule at a site whose text guard holds (for the bindings `held`): its
/// Rust guard is false or unknown, or its applier (run on a copy of the e-graph) declines,
/// fails, builds a refused union, or fires.
fn rust_verdict(
    ctx: &SearchCtx<'_>,
    entry: &RuleEntry,
    held: &[&Env],
    first: &Env,
    root: egg::Id,
) -> SiteVerdict {
    let rule: &Rule = &entry.rule;
    let Some(env) = held
        .iter()
        .find(|e| rust_guard(ctx, entry, e, &[root]) == Some(true))
    else {
        let value = match rust_guard(ctx, entry, first, &[root]) {
            Some(false) => "false (the Rust guard)",
            _ => "unknown (the Rust guard)",
        };
        return SiteVerdict::GuardFailed {
            line: rule.span.line,
            col: rule.span.col,
            value: value.to_string(),
            bound: bound_types(ctx.eg, rule, first),
        };
    };
    applied_verdict(ctx, entry, env, root)
}

/// The verdict of a match whose guards hold: its right side built and unioned on a copy of the
/// e-graph (fired), or declined, refused or not built.
fn applied_verdict(
    ctx: &SearchCtx<'_>,
    entry: &RuleEntry,
    env: &Env,
    root: egg::Id,
) -> SiteVerdict {
    let mut copy = ctx.eg.clone();
    let m = RuleMatch {
        roots: vec![root],
        env: env.clone(),
    };
    match crate::rules::apply(&mut copy, entry, &m, ctx.opset, ctx.uses, ctx.guards) {
        Applied::Changed | Applied::Unchanged => SiteVerdict::Fired,
        Applied::Declined => SiteVerdict::Refused("declined by the Rust applier".into()),
        Applied::Refused(reason) => SiteVerdict::Refused(reason),
        // A Rust applier's failure is its refusal (as it always was reported).
        Applied::NotBuilt(reason) if entry.rust.is_some() => SiteVerdict::Refused(reason),
        Applied::NotBuilt(reason) => SiteVerdict::NotBuilt(reason),
    }
}

/// The first conjunct of the guard that is not true.
fn guard_failure(ctx: &SearchCtx<'_>, rule: &Rule, env: &Env, root: egg::Id) -> SiteVerdict {
    let Some(g) = rule.guard else {
        return SiteVerdict::TypeUnknownOrDifferent;
    };
    let conj = rule.conjuncts(g);
    let roots = [root];
    let ev = ctx.evaluator(rule, env, &roots);
    for e in conj {
        let v = ev.eval(e);
        if v != Some(Val::Bool(true)) {
            let s: Span = rule.exprs[e.0 as usize].1;
            return SiteVerdict::GuardFailed {
                line: s.line,
                col: s.col,
                value: match v {
                    Some(Val::Bool(false)) => "false".into(),
                    None => "unknown".into(),
                    Some(other) => format!("{other:?}"),
                },
                bound: bound_types(ctx.eg, rule, env),
            };
        }
    }
    SiteVerdict::TypeUnknownOrDifferent
}

/// Each value variable `env` binds, as `name: dtype[dims]` from the analysis (`?` for what it
/// does not know).
fn bound_types(eg: &crate::egraph::OnnxEGraph, rule: &Rule, env: &Env) -> Vec<String> {
    rule.vars
        .iter()
        .zip(env)
        .filter_map(|(var, b)| {
            let Some(crate::rules::Bound::Class(c)) = b else {
                return None;
            };
            let data = &eg[eg.find(*c)].data;
            if data.attr.is_some() {
                return None;
            }
            let ty = data.ty.as_ref();
            let elem = ty
                .and_then(onnx_schema::infer::elem_type_of)
                .and_then(onnx_ref::DType::from_code)
                .map_or("?".to_string(), |d| format!("{d:?}").to_lowercase());
            let dims = ty
                .and_then(onnx_schema::infer::shape_of)
                .map_or("?".into(), |d| {
                    let d: Vec<String> = d.iter().map(|x| x.to_string()).collect();
                    format!("[{}]", d.join(","))
                });
            Some(format!("{}: {elem}{dims}", var.name))
        })
        .collect()
}

/// Depth of every pattern node below the roots (the root is 0).
fn pattern_depths(rule: &Rule) -> BTreeMap<PatId, usize> {
    use onnx_rules::ir::{InputPat, Pat};
    let mut d = BTreeMap::new();
    let mut stack: Vec<(PatId, usize)> = rule.lhs.iter().map(|&p| (p, 0)).collect();
    while let Some((p, k)) = stack.pop() {
        d.insert(p, k);
        match rule.pat(p) {
            Pat::Op(op) => {
                for i in &op.inputs {
                    if let InputPat::Pat(q) = i {
                        stack.push((*q, k + 1));
                    }
                }
            }
            Pat::Proj { tuple, .. } => stack.push((*tuple, k)),
            _ => {}
        }
    }
    d
}
