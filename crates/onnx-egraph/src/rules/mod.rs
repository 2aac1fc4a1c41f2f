//! Rules in the e-graph: checked rules of onnx-rules (the DSL's IR) run against the e-graph.
//! [`matcher`] finds bindings of a rule's left side, [`eval`] evaluates its guard, [`apply`]
//! builds the right side with the op builder and unions it through the refusal check.
//!
//! A rule applies at the model's default-domain opset when its window contains it; its ops bind
//! the schema versions of that opset (or of their `@` range).

mod apply;
mod eval;
mod explain;
mod matcher;
mod value;

use std::collections::BTreeMap;
use std::sync::Arc;

use egg::Id;
use onnx_rules::ir::{OpHead, Pat, PatId, Precision, Rule, RuleFile, Term};

use crate::analysis::OnnxEGraph;
use crate::lang::NodeKind;

pub use eval::{GuardCtx, GuardFn, GuardRegistry};
pub use explain::{explain_rule, SiteReport, SiteVerdict};
pub use matcher::Bound;
pub use value::Val;

use matcher::{Env, Matcher};

/// A set of checked rules and the Rust guards they call.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Arc<Rule>>,
    /// Guards written in Rust, callable by name from rule text.
    pub guards: GuardRegistry,
    /// Run rules tagged `unsafe` too.
    pub float_unsafe: bool,
}

impl RuleSet {
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds every rule of a checked file.
    pub fn add_file(&mut self, file: RuleFile) {
        self.rules.extend(file.rules.into_iter().map(Arc::new));
    }
    /// Adds one checked rule.
    pub fn add_rule(&mut self, rule: Rule) {
        self.rules.push(Arc::new(rule));
    }
    /// The rules, in the order added.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|r| r.as_ref())
    }
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
    /// The rules that run at a default-domain opset.
    pub(crate) fn active(&self, opset: i64) -> Vec<Arc<Rule>> {
        self.rules
            .iter()
            .filter(|r| r.window.contains(opset) && (self.float_unsafe || !r.tags.float_unsafe))
            .cloned()
            .collect()
    }
}

/// One binding of a rule's left side.
#[derive(Debug, Clone)]
pub struct RuleMatch {
    /// The class of each root of the left side.
    pub roots: Vec<Id>,
    pub(crate) env: Env,
}

impl RuleMatch {
    /// A key of the match in canonical class ids: the same key means the same right side
    /// (hash-consing), so a match applied once need not be applied again.
    pub(crate) fn key(&self, eg: &OnnxEGraph) -> Vec<u32> {
        let mut k: Vec<u32> = self
            .roots
            .iter()
            .map(|&c| usize::from(eg.find(c)) as u32)
            .collect();
        for b in &self.env {
            match b {
                None => k.push(u32::MAX),
                Some(Bound::Absent) => k.push(u32::MAX - 1),
                Some(Bound::Class(c)) => k.push(usize::from(eg.find(*c)) as u32),
                Some(Bound::List(l)) | Some(Bound::Op(_, l)) => {
                    if let Some(Bound::Op(op, _)) = b {
                        k.push(op.0);
                    }
                    k.push(l.len() as u32);
                    k.extend(l.iter().map(|&c| usize::from(eg.find(c)) as u32));
                }
                Some(Bound::Rest(r)) => {
                    k.push(r.len() as u32);
                    k.extend(r.iter().map(|(_, c)| usize::from(eg.find(*c)) as u32));
                }
            }
        }
        k
    }
}

/// The consumers of each class in the graph as lifted (for `single_use`), by canonical id.
pub(crate) fn use_counts(eg: &OnnxEGraph, lifted_uses: &[(Id, usize)]) -> BTreeMap<Id, usize> {
    let mut m = BTreeMap::new();
    for &(c, n) in lifted_uses {
        *m.entry(eg.find(c)).or_insert(0) += n;
    }
    m
}

/// Classes where a root pattern can match, in id order.
pub(crate) fn candidates(eg: &OnnxEGraph, rule: &Rule, p: PatId) -> Vec<Id> {
    let mut out: Vec<Id> = match rule.pat(p) {
        Pat::Op(op) => {
            let types: Vec<(String, String)> = match &op.head {
                OpHead::Named(r) => vec![(r.domain.clone(), r.op_type.clone())],
                OpHead::Var { class: Some(c), .. } => onnx_rules::op_class_members(*c)
                    .iter()
                    .map(|t| (String::new(), t.to_string()))
                    .collect(),
                OpHead::Var { .. } => return eg.classes().map(|c| c.id).collect(),
            };
            let mut v = Vec::new();
            for (d, t) in types {
                for &opid in eg.analysis.ops.of_type(&d, &t) {
                    let info = eg.analysis.ops.get(opid);
                    let Some(classes) = eg.classes_for_op(&NodeKind::Op(opid)) else {
                        continue;
                    };
                    if info.is_tuple && op.outputs.is_none() {
                        // Used through output 0.
                        let tuples: std::collections::BTreeSet<Id> =
                            classes.map(|c| eg.find(c)).collect();
                        if let Some(outs) = eg.classes_for_op(&NodeKind::Out(0)) {
                            for o in outs {
                                if eg[o].nodes.iter().any(|n| {
                                    n.kind == NodeKind::Out(0)
                                        && tuples.contains(&eg.find(n.children[0]))
                                }) {
                                    v.push(o);
                                }
                            }
                        }
                    } else {
                        v.extend(classes);
                    }
                }
            }
            v
        }
        Pat::Proj { index, .. } => eg
            .classes_for_op(&NodeKind::Out(*index as u32))
            .map(|c| c.collect())
            .unwrap_or_default(),
        _ => eg.classes().map(|c| c.id).collect(),
    };
    out.iter_mut().for_each(|c| *c = eg.find(*c));
    out.sort();
    out.dedup();
    out
}

/// Everything a search needs besides the rule.
pub(crate) struct SearchCtx<'a> {
    pub eg: &'a OnnxEGraph,
    pub opset: i64,
    pub uses: &'a BTreeMap<Id, usize>,
    pub guards: &'a GuardRegistry,
}

impl<'a> SearchCtx<'a> {
    /// An evaluator of a rule's expressions under one binding.
    pub(crate) fn evaluator(
        &self,
        rule: &'a Rule,
        env: &'a Env,
        roots: &'a [Id],
    ) -> eval::Evaluator<'a> {
        eval::Evaluator {
            ctx: GuardCtx {
                egraph: self.eg,
                opset: self.opset,
                uses: self.uses,
            },
            rule,
            env,
            guards: self.guards,
            roots,
        }
    }
}

/// The bindings of a rule in the e-graph whose guard holds (at most `limit`).
pub(crate) fn search(ctx: &SearchCtx<'_>, rule: &Rule, limit: usize) -> Vec<RuleMatch> {
    let m = Matcher {
        eg: ctx.eg,
        rule,
        opset: ctx.opset,
        ac: rule.tags.precision != Precision::Exact,
        trace: None,
        bound: Default::default(),
    };
    let mut out = Vec::new();
    let empty: Env = vec![None; rule.vars.len()];
    let Some(&first) = rule.lhs.first() else {
        return out;
    };
    for c in candidates(ctx.eg, rule, first) {
        let mut partial: Vec<(Vec<Id>, Env)> = m
            .pat(first, c, &empty)
            .into_iter()
            .map(|e| (vec![c], e))
            .collect();
        for &other in &rule.lhs[1..] {
            let cands = candidates(ctx.eg, rule, other);
            let mut next = Vec::new();
            for (roots, env) in &partial {
                for &d in &cands {
                    for e in m.pat(other, d, env) {
                        let mut r = roots.clone();
                        r.push(d);
                        next.push((r, e));
                    }
                }
            }
            partial = next;
        }
        for (roots, env) in partial {
            if guard_holds(ctx, rule, &env, &roots) {
                out.push(RuleMatch { roots, env });
                if out.len() >= limit {
                    return out;
                }
            }
        }
    }
    out
}

/// The rule's guard, and the implicit guard of bare-variable right sides: the variable's
/// type must be known equal to the matched value's.
pub(crate) fn guard_holds(ctx: &SearchCtx<'_>, rule: &Rule, env: &Env, roots: &[Id]) -> bool {
    for (i, &t) in rule.rhs_terms().iter().enumerate() {
        if let Term::Var(v) = rule.term(t) {
            if let Some(Some(Bound::Class(c))) = env.get(v.0 as usize) {
                if !known_same_type(ctx.eg, *c, roots[i]) {
                    return false;
                }
            }
        }
    }
    let Some(g) = rule.guard else {
        return true;
    };
    ctx.evaluator(rule, env, roots).eval(g) == Some(Val::Bool(true))
}

/// Same element type and a shape known equal (dims equal by value or by name).
fn known_same_type(eg: &OnnxEGraph, a: Id, b: Id) -> bool {
    let (a, b) = (eg.find(a), eg.find(b));
    if a == b {
        return true;
    }
    let (Some(ta), Some(tb)) = (&eg[a].data.ty, &eg[b].data.ty) else {
        return false;
    };
    use onnx_schema::infer::{elem_type_of, shape_of, SymDim};
    let (Some(ea), Some(eb)) = (elem_type_of(ta), elem_type_of(tb)) else {
        return false;
    };
    if ea != eb || ea == 0 {
        return false;
    }
    let (Some(sa), Some(sb)) = (shape_of(ta), shape_of(tb)) else {
        return false;
    };
    sa.len() == sb.len()
        && sa.iter().zip(&sb).all(|(x, y)| match (x, y) {
            (SymDim::Known(p), SymDim::Known(q)) => p == q,
            (SymDim::Param(p), SymDim::Param(q)) => p == q,
            _ => false,
        })
}

/// What applying one match did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Applied {
    /// The e-graph changed (a union was made).
    Changed,
    /// The right side was already equal to the left.
    Unchanged,
    /// The union was refused (different types or constants).
    Refused(String),
    /// The right side could not be built for this match (e.g. an attribute value out of
    /// range); nothing changed.
    NotBuilt(String),
}

/// Builds the right side of a match and unions it with the matched classes.
pub(crate) fn apply(
    eg: &mut OnnxEGraph,
    rule: &Rule,
    m: &RuleMatch,
    opset: i64,
    uses: &BTreeMap<Id, usize>,
    guards: &GuardRegistry,
) -> Applied {
    let mut b = apply::RhsBuilder {
        eg,
        rule,
        env: &m.env,
        opset,
        guards,
        uses,
        lets: BTreeMap::new(),
        roots: &m.roots,
    };
    let mut built = Vec::new();
    for &t in rule.rhs_terms() {
        match b.term(t) {
            Ok(Some(id)) => built.push(id),
            Ok(None) => return Applied::NotBuilt("the right side is absent".into()),
            Err(e) => return Applied::NotBuilt(e),
        }
    }
    for (&root, &id) in m.roots.iter().zip(&built) {
        if let Some(reason) = apply::refusal_reason(eg, root, id) {
            return Applied::Refused(reason);
        }
    }
    let mut changed = false;
    for (&root, &id) in m.roots.iter().zip(&built) {
        changed |= eg.union(root, id);
    }
    if changed {
        Applied::Changed
    } else {
        Applied::Unchanged
    }
}
