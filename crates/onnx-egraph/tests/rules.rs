//! Rules written in Rust against the library: a sound rule runs through the phases and the
//! result still computes the same; an unsound rule (one that merges values of different types)
//! is reported with its name, both when it merges directly and when congruence closure does the
//! merge after it.

use std::time::Duration;

use egg::{Applier, Id, PatternAst, Rewrite, SearchMatches, Searcher, Subst, Symbol, Var};
use onnx_egraph::{
    rewrite_model, EGraphError, NodeKind, ONode, OnnxAnalysis, OnnxEGraph, Phase, PhaseStop,
    RewriteOptions,
};
use onnx_ir::Model;

/// Matches every e-class holding an op e-node of this op_type.
struct OpSearcher(&'static str);

impl Searcher<ONode, OnnxAnalysis> for OpSearcher {
    fn search_eclass_with_limit(
        &self,
        egraph: &OnnxEGraph,
        eclass: Id,
        limit: usize,
    ) -> Option<SearchMatches<'_, ONode>> {
        if limit == 0 {
            return None;
        }
        let hit = egraph[eclass].nodes.iter().any(|n| match n.kind {
            NodeKind::Op(op) => egraph.analysis.ops().get(op).op_type == self.0,
            _ => false,
        });
        hit.then(|| SearchMatches {
            eclass,
            substs: vec![Subst::default()],
            ast: None,
        })
    }

    fn vars(&self) -> Vec<Var> {
        Vec::new()
    }
}

/// What an applier does with the op e-node it matched.
#[derive(Clone, Copy)]
enum Action {
    /// Unions the class with the op's data input (the first child after the attributes).
    UnionWithInput,
    /// Unions each attribute child of the op with the op's first attribute of the same name in
    /// another node of this op_type (merges attribute leaves; the ops then merge by congruence).
    UnionAttributes,
}

struct OpApplier(&'static str, Action);

impl Applier<ONode, OnnxAnalysis> for OpApplier {
    fn apply_one(
        &self,
        egraph: &mut OnnxEGraph,
        eclass: Id,
        _subst: &Subst,
        _ast: Option<&PatternAst<ONode>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let ops: Vec<ONode> = egraph[eclass]
            .nodes
            .iter()
            .filter(|n| matches!(n.kind, NodeKind::Op(op) if egraph.analysis.ops().get(op).op_type == self.0))
            .cloned()
            .collect();
        let mut changed = Vec::new();
        for node in ops {
            let NodeKind::Op(op) = node.kind else {
                continue;
            };
            let n_attrs = egraph.analysis.ops().get(op).attr_names.len();
            match self.1 {
                Action::UnionWithInput => {
                    if let Some(&input) = node.children.get(n_attrs) {
                        if egraph.union(eclass, input) {
                            changed.push(eclass);
                        }
                    }
                }
                Action::UnionAttributes => {
                    let others: Vec<ONode> = egraph
                        .classes()
                        .flat_map(|c| c.nodes.iter().cloned())
                        .filter(|n| n.kind == node.kind && n != &node)
                        .collect();
                    for other in others {
                        for k in 0..n_attrs {
                            if egraph.union(node.children[k], other.children[k]) {
                                changed.push(node.children[k]);
                            }
                        }
                    }
                }
            }
        }
        changed
    }
}

fn rule(name: &str, op: &'static str, action: Action) -> Rewrite<ONode, OnnxAnalysis> {
    Rewrite::new(name, OpSearcher(op), OpApplier(op, action)).expect("a valid rule")
}

fn phase(rules: Vec<Rewrite<ONode, OnnxAnalysis>>) -> Phase {
    let mut p = Phase::with_rewrites("test", rules);
    p.iter_limit = 10;
    p.node_limit = 10_000;
    p.time_limit = Duration::from_secs(10);
    p
}

fn model(text: &str) -> Model {
    let proto = onnx_text::parse_model(text).unwrap_or_else(|e| panic!("{}", e.render()));
    Model::from_proto(proto).expect("a valid model")
}

fn options(rules: Vec<Rewrite<ONode, OnnxAnalysis>>) -> RewriteOptions {
    RewriteOptions {
        phases: vec![phase(rules)],
        ..Default::default()
    }
}

#[test]
fn a_sound_rule_removes_identity_and_the_report_says_why_the_phase_ended() {
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y) {
            a = Identity(x)
            y = Relu(a)
        }"#,
    );
    let (out, report) = rewrite_model(
        &m,
        options(vec![rule("identity", "Identity", Action::UnionWithInput)]),
    )
    .expect("a sound rule optimizes");
    let ops: Vec<&str> = out
        .graph
        .nodes_in_order()
        .map(|(_, n)| n.op_type.as_str())
        .collect();
    assert_eq!(ops, ["Relu"]);
    let p = &report.main.phases[0];
    assert_eq!(p.name, "test");
    assert_eq!(p.stop, PhaseStop::Saturated);
    assert!(p.iterations >= 1);
}

#[test]
fn a_direct_unsound_merge_names_the_rule() {
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[3,2] y) {
            y = Transpose <perm = [1, 0]> (x)
        }"#,
    );
    let err = rewrite_model(
        &m,
        options(vec![rule(
            "transpose-is-noop",
            "Transpose",
            Action::UnionWithInput,
        )]),
    )
    .map(|_| ())
    .expect_err("merging [3,2] with [2,3] is unsound");
    let EGraphError::UnsoundMerge {
        phase,
        cause,
        left,
        right,
    } = &err
    else {
        panic!("expected an unsound-merge error, got {err}");
    };
    assert_eq!(phase, "test");
    assert_eq!(cause, "rule 'transpose-is-noop'");
    let mut sides = [left.as_str(), right.as_str()];
    sides.sort();
    assert_eq!(sides, ["float[2,3]", "float[3,2]"], "{err}");
    assert!(
        err.to_string().contains("rule 'transpose-is-noop' merged"),
        "{err}"
    );
}

#[test]
fn a_merge_by_congruence_names_the_rules_of_that_iteration() {
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3,4] x) => (float[3,2,4] y, float[2,4,3] z) {
            y = Transpose <perm = [1, 0, 2]> (x)
            z = Transpose <perm = [0, 2, 1]> (x)
        }"#,
    );
    let err = rewrite_model(
        &m,
        options(vec![rule(
            "perms-are-equal",
            "Transpose",
            Action::UnionAttributes,
        )]),
    )
    .map(|_| ())
    .expect_err("equal perms make the two transposes congruent");
    let EGraphError::UnsoundMerge { cause, .. } = &err else {
        panic!("expected an unsound-merge error, got {err}");
    };
    assert_eq!(cause, "congruence closure after rules 'perms-are-equal'");
}
