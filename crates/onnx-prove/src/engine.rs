//! One instance through the engine: lift the left side, saturate with a phase holding only the
//! rule under proof, decide whether it fired at the root, and extract the right side (the
//! lifted root e-nodes cost infinity, so extraction must take what the rule built) back into a
//! model.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use egg::Id;
use onnx_egraph::lift_graph;
use onnx_egraph::saturate;
use onnx_egraph::{emit_graph, EmitOptions};
use onnx_egraph::{
    extract_dag, CostModel, EGraphError, FoldOptions, NodeCount, NodeKind, ONode, OnnxEGraph,
    Phase, RuleSet,
};
use onnx_ir::Model;
use onnx_proto::ModelProto;
use onnx_rules::ir::VersionStep;

/// Why a fired instance failed inside the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineFailure {
    /// The engine refused a union the rule asked for (different types or constants).
    Refused,
    /// A merge of different types got through (reported by saturation).
    Unsound,
    /// Nothing could be extracted, or the extracted graph could not be written.
    Extraction,
    /// The right side fails the checker.
    Invalid,
    /// The engine panicked.
    Panic,
}

/// What the engine did with an instance.
pub(crate) enum Applied {
    /// The model is not a valid instance (checker, lifting).
    Rejected(String),
    /// The rule did not fire at the root.
    NotFired,
    /// The rule fired at the root; the right side as a model.
    Fired(Box<ModelProto>),
    Failed(EngineFailure, String),
}

/// Costs NodeCount, except the lifted root e-nodes, which are forbidden.
struct AvoidRoots<'a> {
    forbidden: &'a BTreeSet<ONode>,
}

fn canonical(eg: &OnnxEGraph, n: &ONode) -> ONode {
    ONode::new(n.kind, n.children.iter().map(|&c| eg.find(c)).collect())
}

impl CostModel for AvoidRoots<'_> {
    fn node_cost(&self, egraph: &OnnxEGraph, class: Id, node: &ONode) -> f64 {
        if self.forbidden.contains(&canonical(egraph, node)) {
            return f64::INFINITY;
        }
        NodeCount.node_cost(egraph, class, node)
    }
}

/// The phase of a prover run: only the rule under proof, unsafe rules allowed, small limits; a
/// version step runs toward its right side's opset.
pub(crate) fn phase(rules: &Arc<RuleSet>, step: Option<VersionStep>) -> Phase {
    let mut p = Phase::new("prove", rules.clone());
    p.target_opset = step.map(|s| s.own_target());
    p.iter_limit = 4;
    p.node_limit = 20_000;
    p.time_limit = Duration::from_secs(5);
    p
}

/// Runs the rule on one instance. The right side of a version step is written at the step's
/// right-side opset (its IR version raised to that opset's where it is below).
pub(crate) fn apply_rule(
    lhs: &ModelProto,
    rules: &Arc<RuleSet>,
    rule: &str,
    step: Option<VersionStep>,
) -> Applied {
    let model = match Model::from_proto(lhs.clone()) {
        Ok(m) => m,
        Err(e) => return Applied::Rejected(format!("not representable: {e}")),
    };
    if let Err(errors) = onnx_ir::check_model(&model) {
        let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
        return Applied::Rejected(format!("fails the checker: {first}"));
    }
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        apply_checked(&model, rules, rule, step)
    }));
    match run {
        Ok(a) => a,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Applied::Failed(EngineFailure::Panic, format!("the engine panicked: {msg}"))
        }
    }
}

fn apply_checked(
    model: &Model,
    rules: &Arc<RuleSet>,
    rule: &str,
    step: Option<VersionStep>,
) -> Applied {
    let opsets = onnx_egraph::opset_map(model);
    // Without the analysis' union of equal dims: a shape rule's two sides would be one class
    // before the rule fires.
    let fold = FoldOptions {
        union_equal_dims: false,
        ..FoldOptions::default()
    };
    let mut lifted = match lift_graph(&model.graph, &opsets, fold) {
        Ok(l) => l,
        Err(e) => return Applied::Rejected(format!("cannot lift: {e}")),
    };
    // The classes of the rule's roots (the graph outputs) and their e-nodes as lifted. An
    // output that projects a multi-output node also has that node's class (the tuple): a rule
    // whose root is the node itself (`TopK@10#2(x) => TopK@11#2(x)`) changes the tuple, and
    // the projections follow by congruence.
    let mut roots: Vec<(Id, Vec<ONode>)> = Vec::new();
    let mut tuples: Vec<(Id, Vec<ONode>)> = Vec::new();
    for &v in &model.graph.outputs {
        let Some(&c) = lifted.value_class.get(&v) else {
            return Applied::Rejected("an output without a class".into());
        };
        let c = lifted.egraph.find(c);
        roots.push((c, lifted.egraph[c].nodes.clone()));
        for n in &lifted.egraph[c].nodes {
            if let NodeKind::Out(_) = n.kind {
                let t = lifted.egraph.find(n.children[0]);
                if tuples.iter().all(|(x, _)| *x != t) {
                    tuples.push((t, lifted.egraph[t].nodes.clone()));
                }
            }
        }
    }
    let egraph = std::mem::take(&mut lifted.egraph);
    let (egraph, reports) = match saturate(egraph, &[phase(rules, step)], &lifted.uses) {
        Ok(r) => r,
        Err(EGraphError::UnsoundMerge {
            cause, left, right, ..
        }) => {
            return Applied::Failed(
                EngineFailure::Unsound,
                format!("{cause} merged values of different types: {left} vs {right}"),
            )
        }
        Err(e) => return Applied::Failed(EngineFailure::Unsound, e.to_string()),
    };
    lifted.egraph = egraph;
    let eg = &lifted.egraph;
    if let Some(r) = reports
        .iter()
        .flat_map(|r| &r.refusals)
        .find(|r| r.rule == rule)
    {
        return Applied::Failed(
            EngineFailure::Refused,
            format!("union refused: {}", r.reason),
        );
    }
    let fired = reports
        .iter()
        .any(|r| r.firings.get(rule).copied().unwrap_or(0) > 0);
    let changed = |c: Id, before: &[ONode]| -> (bool, BTreeSet<ONode>) {
        let before: BTreeSet<ONode> = before.iter().map(|n| canonical(eg, n)).collect();
        let c = eg.find(c);
        (eg[c].nodes.iter().any(|n| !before.contains(n)), before)
    };
    // Each root changed itself, or (a rule whose root is a multi-output node) through the
    // node it projects, whose class gained a node: extraction must then take the new node,
    // through the same projections.
    let mut forbidden = BTreeSet::new();
    let mut at_root = true;
    for (c, before) in &roots {
        let (new, before_nodes) = changed(*c, before);
        if new {
            forbidden.extend(
                before_nodes
                    .into_iter()
                    .filter(|n| matches!(n.kind, NodeKind::Op(_) | NodeKind::Out(_))),
            );
            continue;
        }
        let via_tuple: Vec<&(Id, Vec<ONode>)> = tuples
            .iter()
            .filter(|(t, _)| {
                before.iter().any(|n| {
                    matches!(n.kind, NodeKind::Out(_)) && eg.find(n.children[0]) == eg.find(*t)
                })
            })
            .filter(|(t, b)| changed(*t, b).0)
            .collect();
        if via_tuple.is_empty() {
            at_root = false;
        }
        for (t, b) in via_tuple {
            let (_, before_nodes) = changed(*t, b);
            forbidden.extend(
                before_nodes
                    .into_iter()
                    .filter(|n| matches!(n.kind, NodeKind::Op(_))),
            );
        }
    }
    if !fired {
        // A match whose right side could not be built says why (else "did not fire").
        if let Some(why) = reports.iter().find_map(|r| r.not_built_reasons.get(rule)) {
            return Applied::Rejected(format!("the right side was not built: {why}"));
        }
    }
    if !fired || !at_root {
        return Applied::NotFired;
    }
    let cost = AvoidRoots {
        forbidden: &forbidden,
    };
    let sel = match extract_dag(eg, lifted.root, &cost) {
        Ok(s) => s,
        Err(e) => return Applied::Failed(EngineFailure::Extraction, e.to_string()),
    };
    let options = EmitOptions {
        initializers_are_inputs: model.ir_version.unwrap_or(0) < 4,
        ..Default::default()
    };
    let graph = match emit_graph(&lifted, &model.graph, &sel, options) {
        Ok(g) => g,
        Err(e) => return Applied::Failed(EngineFailure::Extraction, e.to_string()),
    };
    let mut out = model.clone();
    out.graph = graph;
    onnx_egraph::import_used_domains(&mut out);
    if let Some(s) = step {
        for o in out.opset_imports.iter_mut() {
            if o.domain.is_empty() || o.domain == "ai.onnx" {
                o.version = s.rhs_opset;
            }
        }
        let min_ir = onnx_schema::registry().min_ir_version_for_opset(s.rhs_opset);
        if let (Some(ir), Some(min)) = (out.ir_version, min_ir) {
            out.ir_version = Some(ir.max(min));
        }
    }
    if let Err(errors) = onnx_ir::check_model(&out) {
        let msgs: Vec<String> = errors.iter().take(3).map(|e| e.to_string()).collect();
        return Applied::Failed(
            EngineFailure::Invalid,
            format!("the right side fails the checker: {}", msgs.join("; ")),
        );
    }
    Applied::Fired(Box::new(out.to_proto()))
}
