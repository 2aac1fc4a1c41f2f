//! Rules in the e-graph: checked rules of onnx-rules (the DSL's IR) run against the e-graph.
//! `matcher` finds bindings of a rule's left side, `eval` evaluates its guard, `apply`
//! builds the right side with the op builder and unions it through the refusal check. `rust`
//! holds rules whose guard and right side are Rust closures (their left side is rule text).
//!
//! A rule applies at the model's default-domain opset when its window contains it; its ops bind
//! the schema versions of that opset (or of their `@` range).

mod apply;
mod eval;
mod facts;
pub(crate) use facts::finite;
mod matcher;
mod rust;

use std::collections::BTreeMap;
use std::sync::Arc;

use egg::Id;
use onnx_rules::ir::{OpHead, Pat, PatId, Precision, Rule, RuleFile, Term};

use crate::analysis::OnnxEGraph;
use crate::lang::NodeKind;
use crate::EGraphError;

pub use crate::value::Val;
pub use eval::{GuardCtx, GuardRegistry};
pub use matcher::Bound;
pub use rust::{RustApplier, RustGuard, RustMatch, RustOp, RustRhs};

pub(crate) use matcher::{Env, Matcher};

/// A set of checked rules (text rules, and rules whose guard and right side are Rust
/// closures) and the Rust guards their text calls. Cloning is cheap (rules and closures are
/// shared).
///
/// # Example
///
/// A rule whose left side is text and whose right side is built in Rust:
///
/// ```
/// use std::sync::Arc;
/// use onnx_egraph::{RuleSet, RustRhs};
///
/// let rule = onnx_rules::parse_extern_rule(
///     "sub_self",
///     "# Sub(x, x) == Mul(x, 0) for finite x\nSub(x, x) where is_float(x)",
///     "unsafe",
///     &Default::default(),
/// )
/// .unwrap();
/// let mut set = RuleSet::new();
/// set.add_rust_rule(
///     rule,
///     None,
///     Arc::new(|rhs: &mut RustRhs<'_>| {
///         let x = rhs.var("x").ok_or("x is bound")?;
///         let zero = rhs.scalar_like(x, 0.0)?;
///         rhs.op("Mul").input(x).input(zero).build().map(Some)
///     }),
/// )
/// .unwrap();
/// assert!(set.is_rust_rule("sub_self"));
/// assert_eq!(format!("{set:?}"), r#"RuleSet { rules: ["sub_self (rust)"], guards: [], float_unsafe: false }"#);
/// ```
#[derive(Clone, Default)]
pub struct RuleSet {
    rules: Vec<RuleEntry>,
    /// Guards written in Rust, callable by name from rule text.
    pub guards: GuardRegistry,
    /// Run rules tagged `unsafe` too.
    pub float_unsafe: bool,
}

/// A rule of a set, with its Rust guard and applier when it has them.
#[derive(Clone)]
pub(crate) struct RuleEntry {
    pub rule: Arc<Rule>,
    pub rust: Option<rust::RustParts>,
}

impl std::fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .rules
            .iter()
            .map(|e| match e.rust {
                Some(_) => format!("{} (rust)", e.rule.name),
                None => e.rule.name.clone(),
            })
            .collect();
        f.debug_struct("RuleSet")
            .field("rules", &names)
            .field("guards", &self.guards)
            .field("float_unsafe", &self.float_unsafe)
            .finish()
    }
}

impl RuleSet {
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds every rule of a checked file. A rule with an `extern` right side (a file checked
    /// with `allow_extern`) needs its Rust applier: add it with [`Self::add_rust_rule`]
    /// instead; added here, its matches are counted as not built and change nothing.
    pub fn add_file(&mut self, file: RuleFile) {
        for rule in file.rules {
            self.add_rule(rule);
        }
    }
    /// Adds one checked rule (see [`Self::add_file`] for `extern` right sides).
    pub fn add_rule(&mut self, rule: Rule) {
        self.rules.push(RuleEntry {
            rule: Arc::new(rule),
            rust: None,
        });
    }
    /// Keeps only the rules for which `keep` is true (text and Rust rules).
    pub fn retain(&mut self, mut keep: impl FnMut(&Rule) -> bool) {
        self.rules.retain(|r| keep(&r.rule));
    }
    /// Adds a rule whose right side is built in Rust: `rule` has an `extern` right side (from
    /// `onnx_rules::parse_extern_rule`, or a file checked with `allow_extern`) and one left
    /// root. Where its left side matches and its text `where` holds, `guard` (if any) decides,
    /// then `applier` builds the value that replaces the matched root. Fails when the rule's
    /// right side is written in the rule language or it has several roots.
    pub fn add_rust_rule(
        &mut self,
        rule: Rule,
        guard: Option<RustGuard>,
        applier: RustApplier,
    ) -> Result<(), EGraphError> {
        let message = if !rule.is_extern() {
            Some("its right side is written in the rule language, not `extern`")
        } else if rule.lhs.len() != 1 {
            Some("a rule whose right side is built in Rust has exactly one left root")
        } else {
            None
        };
        if let Some(m) = message {
            return Err(EGraphError::RustRule {
                rule: rule.name.clone(),
                message: m.to_string(),
            });
        }
        self.rules.push(RuleEntry {
            rule: Arc::new(rule),
            rust: Some(rust::RustParts { guard, applier }),
        });
        Ok(())
    }
    /// The rules, in the order added (text and Rust rules).
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().map(|r| r.rule.as_ref())
    }
    /// Whether rule `name` has its right side built in Rust.
    pub fn is_rust_rule(&self, name: &str) -> bool {
        self.rules
            .iter()
            .any(|e| e.rule.name == name && e.rust.is_some())
    }
    /// A set holding only rule `name` (with its Rust parts), the same Rust guards and the same
    /// `float_unsafe`; `None` when there is no such rule.
    pub fn only(&self, name: &str) -> Option<RuleSet> {
        let entry = self.rules.iter().find(|e| e.rule.name == name)?;
        Some(RuleSet {
            rules: vec![entry.clone()],
            guards: self.guards.clone(),
            float_unsafe: self.float_unsafe,
        })
    }
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
    /// The rules that run at a default-domain opset. Version steps run only toward a target
    /// opset, and not at all without one.
    pub(crate) fn active(&self, opset: i64, target: Option<i64>) -> Vec<RuleEntry> {
        self.rules
            .iter()
            .filter(|e| {
                let r = &e.rule;
                let step_ok = match (r.step, target) {
                    (Some(s), Some(t)) => s.toward(t),
                    (Some(_), None) => false,
                    (None, _) => true,
                };
                step_ok && r.window.contains(opset) && (self.float_unsafe || !r.tags.float_unsafe)
            })
            .cloned()
            .collect()
    }
    /// The entry of rule `name`.
    pub(crate) fn entry(&self, name: &str) -> Option<&RuleEntry> {
        self.rules.iter().find(|e| e.rule.name == name)
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

/// The bindings of a rule in the e-graph whose guard (text, then Rust) holds (at most `limit`).
pub(crate) fn search(ctx: &SearchCtx<'_>, entry: &RuleEntry, limit: usize) -> Vec<RuleMatch> {
    let rule: &Rule = &entry.rule;
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
            if guard_holds(ctx, rule, &env, &roots)
                && rust_guard(ctx, entry, &env, &roots) == Some(true)
            {
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

/// The Rust guard of a rule: `Some(true)` when it has none; a guard that panics is unknown.
pub(crate) fn rust_guard(
    ctx: &SearchCtx<'_>,
    entry: &RuleEntry,
    env: &Env,
    roots: &[Id],
) -> Option<bool> {
    let Some(guard) = entry.rust.as_ref().and_then(|r| r.guard.as_ref()) else {
        return Some(true);
    };
    let view = RustMatch {
        egraph: ctx.eg,
        rule: &entry.rule,
        env,
        root: *roots.first()?,
        opset: ctx.opset,
        uses: ctx.uses,
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guard(&view))).unwrap_or(None)
}

/// Same element type and a shape known equal (dims equal by value or by name, or b is a Cast
/// or Identity of a).
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
    // `Cast(a)` and `Identity(a)` have a's shape by definition, known or not.
    let shape_preserved = eg[b].nodes.iter().any(|n| match n.kind {
        crate::lang::NodeKind::Op(op) => {
            let info = eg.analysis.ops.get(op);
            info.domain.is_empty()
                && matches!(info.op_type.as_str(), "Cast" | "Identity")
                && crate::build::Roles::new(info, &n.children)
                    .inputs()
                    .first()
                    .map(|&c| eg.find(c))
                    == Some(a)
        }
        _ => false,
    });
    if shape_preserved {
        return true;
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
    /// The union was refused (different types or constants), or a Rust applier failed.
    Refused(String),
    /// The right side could not be built for this match (e.g. an attribute value out of
    /// range); nothing changed.
    NotBuilt(String),
    /// A Rust applier declined the match (`Ok(None)`); nothing changed.
    Declined,
}

/// Builds the right side of a match and unions it with the matched classes.
pub(crate) fn apply(
    eg: &mut OnnxEGraph,
    entry: &RuleEntry,
    m: &RuleMatch,
    opset: i64,
    uses: &BTreeMap<Id, usize>,
    guards: &GuardRegistry,
) -> Applied {
    let rule: &Rule = &entry.rule;
    let built = match &entry.rust {
        Some(parts) => match apply_rust(eg, rule, &parts.applier, m, opset, uses) {
            Ok(id) => vec![id],
            Err(done) => return done,
        },
        None if rule.is_extern() => {
            return Applied::NotBuilt(
                "the right side is `extern` and no Rust applier is registered for it".into(),
            )
        }
        None => {
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
                    Err(e) => return Applied::NotBuilt(e.to_string()),
                }
            }
            built
        }
    };
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

/// Runs a Rust applier on a match: the class it built, or what became of the match instead
/// (declined; failed or panicked, reported as a refusal).
fn apply_rust(
    eg: &mut OnnxEGraph,
    rule: &Rule,
    applier: &RustApplier,
    m: &RuleMatch,
    opset: i64,
    uses: &BTreeMap<Id, usize>,
) -> Result<Id, Applied> {
    let Some(&root) = m.roots.first() else {
        return Err(Applied::NotBuilt("the match has no root".into()));
    };
    let mut rhs = RustRhs {
        egraph: eg,
        rule,
        env: &m.env,
        root,
        opset,
        uses,
    };
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| applier(&mut rhs)));
    match run {
        Ok(Ok(Some(id))) => {
            // An id the applier made up (not a class of this e-graph) is refused.
            let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| eg.find(id)));
            found.map_err(|_| {
                Applied::Refused(format!("the Rust applier returned {id}, not a class"))
            })
        }
        Ok(Ok(None)) => Err(Applied::Declined),
        Ok(Err(message)) => Err(Applied::Refused(format!(
            "the Rust applier failed: {message}"
        ))),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(Applied::Refused(format!(
                "the Rust applier panicked: {message}"
            )))
        }
    }
}
