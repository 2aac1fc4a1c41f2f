//! DSL rules in the engine: parsed with onnx-rules, run by the saturation loop, checked on
//! small models in the ONNX text syntax. Each case: rules, a model, the op sequence after.

use std::sync::Arc;

use onnx_egraph::{rewrite_model, Phase, RewriteOptions, RuleSet};
use onnx_ir::Model;

fn model(text: &str) -> Model {
    let proto = onnx_text::parse_model(text).unwrap_or_else(|e| panic!("{}", e.render()));
    Model::from_proto(proto).expect("a valid model")
}

fn rules(text: &str) -> Arc<RuleSet> {
    let file = onnx_rules::parse_rules("test.rules", text, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut set = RuleSet::new();
    set.add_file(file);
    Arc::new(set)
}

/// Optimizes and returns the op types in order and the report.
fn run(rule_text: &str, model_text: &str) -> (Vec<String>, onnx_egraph::RewriteReport, Model) {
    let m = model(model_text);
    let (out, report) = rewrite_model(
        &m,
        RewriteOptions {
            phases: vec![Phase::new("test", rules(rule_text))],
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ops = out
        .graph
        .nodes_in_order()
        .map(|(_, n)| n.op_type.to_string())
        .collect();
    (ops, report, out)
}

const TRANSPOSE: &str = "# t\n\n# Transpose(Transpose(x, q), p) == Transpose(x, compose(q, p))\nrule tt [exact]:\n  Transpose<perm: p>(Transpose<perm: q>(x)) => Transpose<perm: compose(q, p)>(x)\n\n# identity perm\nrule ti [exact]:\n  Transpose<perm: p>(x) => x\n  where is_identity(p)\n";

#[test]
fn transposes_that_cancel_disappear() {
    let (ops, report, _) = run(
        TRANSPOSE,
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3,4] x) => (float[2,3,4] y) {
            a = Transpose <perm = [1, 0, 2]> (x)
            b = Transpose <perm = [1, 0, 2]> (a)
            y = Relu(b)
        }"#,
    );
    assert_eq!(ops, ["Relu"]);
    let f = &report.main.phases[0].firings;
    assert!(f.contains_key("tt") && f.contains_key("ti"), "{f:?}");
}

#[test]
fn transposes_that_do_not_cancel_compose() {
    let (ops, _, out) = run(
        TRANSPOSE,
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3,4] x) => (float[4,3,2] y) {
            a = Transpose <perm = [1, 0, 2]> (x)
            y = Transpose <perm = [2, 0, 1]> (a)
        }"#,
    );
    assert_eq!(ops, ["Transpose"]);
    let (_, n) = out.graph.nodes_in_order().next().unwrap();
    let perm = n.attribute("perm").unwrap().to_proto().ints;
    // y[i] = a[perm2[i]] = x[perm1[perm2[i]]]: [2,0,1] then [1,0,2] -> [2,1,0]
    assert_eq!(perm, vec![2, 1, 0]);
}

#[test]
fn logical_parameters_read_the_same_before_and_after_opset_13() {
    let r = "# s\n\n# Squeeze(Unsqueeze(x, a), a) == x\nrule su [exact]:\n  Squeeze<axes: a>(Unsqueeze<axes: a>(x)) => x\n";
    for (opset, body) in [
        (
            11,
            "a = Unsqueeze <axes = [1]> (x)\n y = Squeeze <axes = [1]> (a)",
        ),
        (
            13,
            "k = Constant <value = int64[1] {1}> ()\n a = Unsqueeze(x, k)\n y = Squeeze(a, k)",
        ),
    ] {
        let text = format!(
            "<ir_version: 8, opset_import: [\"\" : {opset}]>\n g (float[2,3] x) => (float[2,3] y) {{\n {body}\n }}"
        );
        let (ops, report, _) = run(r, &text);
        assert_eq!(ops, ["Identity"], "opset {opset}");
        assert_eq!(
            report.main.phases[0].firings.get("su"),
            Some(&1),
            "opset {opset}"
        );
    }
}

#[test]
fn an_unnamed_attribute_must_be_its_default() {
    // LeakyRelu's alpha is not named: only the default 0.01 matches.
    let r = "# l\n\n# LeakyRelu(x) == Relu(x)? only a test of defaults\nrule lr:\n  LeakyRelu(x) => Relu(x)\n";
    let (ops, _, _) = run(
        r,
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] y) {
            y = LeakyRelu <alpha = 0.2> (x)
        }"#,
    );
    assert_eq!(ops, ["LeakyRelu"]);
}

#[test]
fn commutative_and_associative_operands_match_in_any_order() {
    let r = "# g\n\n# x * 0.5 * (1 + erf(x / sqrt 2)) == Gelu(x)\nrule gelu:\n  Mul(Mul(x, 0.5), Add(Erf(Div(x, 1.4142135623730951)), 1)) => Gelu(x)\n";
    let (ops, report, _) = run(
        r,
        r#"<ir_version: 8, opset_import: ["" : 20]>
        g (float[2,3] x) => (float[2,3] y) {
            s = Constant <value = float {1.4142135}> ()
            h = Constant <value = float {0.5}> ()
            one = Constant <value = float {1.0}> ()
            d = Div(x, s)
            e = Erf(d)
            p = Add(one, e)
            m = Mul(x, p)
            y = Mul(m, h)
        }"#,
    );
    assert_eq!(ops, ["Gelu"], "{:?}", report.main.phases);
}

#[test]
fn a_rule_building_a_different_type_is_refused_and_reported() {
    // Unsound on purpose: Transpose changes the shape; the applier refuses the union.
    let r = "# u\n\n# wrong on purpose\nrule bad:\n  Transpose<perm: _>(x) => Relu(x)\n";
    let (ops, report, _) = run(
        r,
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[3,2] y) {
            y = Transpose <perm = [1, 0]> (x)
        }"#,
    );
    assert_eq!(ops, ["Transpose"]);
    let refusals = &report.main.phases[0].refusals;
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!(refusals[0].rule, "bad");
    assert!(
        refusals[0].reason.contains("different types"),
        "{}",
        refusals[0].reason
    );
}

#[test]
fn explain_says_which_part_of_the_pattern_or_guard_failed() {
    use onnx_egraph::{explain_rule, SiteVerdict};
    let r = "# e\n\n# Transpose(x, identity) == x\nrule ti [exact]:\n  Transpose<perm: p>(Relu(x)) => Relu(x)\n  where is_identity(p)\n";
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] a, float[3,2] b, float[3,2] c) {
            r = Relu(x)
            a = Transpose <perm = [0, 1]> (r)
            b = Transpose <perm = [1, 0]> (r)
            n = Neg(x)
            c = Transpose <perm = [1, 0]> (n)
        }"#,
    );
    let sites = explain_rule(&m, rules(r), "ti").unwrap();
    let by_site: std::collections::BTreeMap<_, _> = sites
        .iter()
        .map(|s| (s.site.as_str(), &s.verdict))
        .collect();
    assert_eq!(by_site["a"], &SiteVerdict::Fired, "{sites:?}");
    assert!(
        matches!(by_site["b"], SiteVerdict::GuardFailed { line: 6, value, .. } if value == "false"),
        "{sites:?}"
    );
    // The values the match bound, with what the analysis knows of them (p is an attribute).
    match by_site["b"] {
        SiteVerdict::GuardFailed { bound, .. } => assert_eq!(bound, &["x: float[2,3]"]),
        other => panic!("{other:?}"),
    }
    assert!(by_site["b"]
        .to_string()
        .ends_with("the condition is false (x: float[2,3])"));
    match by_site["c"] {
        SiteVerdict::PatternFailed {
            line: 5, reason, ..
        } => {
            assert!(reason.contains("expected Relu, found Neg"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(explain_rule(&m, rules(r), "nope").is_err());
}

#[test]
fn a_guard_written_in_rust_is_declared_checked_and_called() {
    use onnx_egraph::Val;
    use onnx_rules::{CheckOptions, GuardSig, Ty};
    let text = "# r\n\n# Relu(x) == x where x is known non-negative (by a Rust guard)\nrule relu_of_nonneg [exact]:\n  Relu(x) => x\n  where known_nonneg(x)\n";
    let options = CheckOptions {
        extra_guards: vec![GuardSig::new("known_nonneg", vec![Ty::Value], Ty::Bool)],
        ..Default::default()
    };
    // Without the declaration the checker refuses the call.
    assert!(
        onnx_rules::parse_rules("r.rules", text, &Default::default())
            .unwrap_err()
            .to_string()
            .contains("unknown function `known_nonneg`")
    );
    // A registered guard may not take a built-in's name (the built-in would silently win).
    let clash = CheckOptions {
        extra_guards: vec![GuardSig::new("nonneg", vec![Ty::Value], Ty::Bool)],
        ..Default::default()
    };
    let err = onnx_rules::parse_rules("r.rules", &text.replace("known_nonneg", "nonneg"), &clash)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`nonneg` is a built-in function"), "{err}");
    let file = onnx_rules::parse_rules("r.rules", text, &options).unwrap();
    let mut set = RuleSet::new();
    set.add_file(file);
    // "non-negative": the value is produced by Abs (a toy analysis).
    set.guards.register("known_nonneg", |ctx, args| {
        let Val::Class(c) = args.first()? else {
            return None;
        };
        let abs = ctx.egraph[*c].nodes.iter().any(|n| match n.kind {
            onnx_egraph::NodeKind::Op(op) => ctx.egraph.analysis.ops().get(op).op_type == "Abs",
            _ => false,
        });
        Some(Val::Bool(abs))
    });
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y, float[2,3] z) {
            a = Abs(x)
            y = Relu(a)
            z = Relu(x)
        }"#,
    );
    let (out, report) = rewrite_model(
        &m,
        RewriteOptions {
            phases: vec![Phase::new("test", Arc::new(set))],
            ..Default::default()
        },
    )
    .unwrap();
    let ops: Vec<String> = out
        .graph
        .nodes_in_order()
        .map(|(_, n)| n.op_type.to_string())
        .collect();
    assert_eq!(ops, ["Abs", "Relu"], "only z keeps its Relu");
    assert_eq!(
        report.main.phases[0].firings.get("relu_of_nonneg"),
        Some(&1)
    );
}

#[test]
fn unused_trailing_outputs_do_not_stop_a_rule() {
    // Dropout's mask is listed but nothing reads it: the node is the one-output op.
    let r = "# d\n\n# Dropout(x) in inference == x\nrule d [exact]:\n  Dropout<ratio: _>(x) => x\n";
    let (ops, report, _) = run(
        r,
        r#"<ir_version: 8, opset_import: ["" : 11]>
        g (float[2,3] x) => (float[2,3] y) {
            a, mask = Dropout <ratio = 0.5> (x)
            y = Relu(a)
        }"#,
    );
    assert_eq!(ops, ["Relu"]);
    assert_eq!(report.main.phases[0].firings.get("d"), Some(&1));
    // A mask that is read keeps the node whole.
    let (ops, _, _) = run(
        r,
        r#"<ir_version: 8, opset_import: ["" : 11]>
        g (float[2,3] x) => (float[2,3] y, bool[2,3] m) {
            a, m = Dropout <ratio = 0.5> (x)
            y = Relu(a)
        }"#,
    );
    assert_eq!(ops, ["Dropout", "Relu"]);
}

#[test]
fn extraction_keeps_the_input_form_when_sharing_picks_between_equal_switches() {
    // x / s and x * (1/s) cost the same; the folded product (a second MatMul) is cheaper for the
    // Div's class alone, so the greedy pass takes it, and the pass that shares x must switch back:
    // between its equal switches it takes the input's Div (the form onnxruntime's Gelu fusion
    // matches), not the first it tries.
    let r = "# t\n\n# x / s == x * (1 / s)\nrule div_to_mul:\n  Div(x, s) => Mul(x, Div(1, s))\n  where is_const(s) && rank(s) == 0\n\n# (MatMul(a, b) + c) * s == MatMul(a, b * s) + c * s\nrule fold_scale:\n  Mul(Add(MatMul(a, b), c), s) => Add(MatMul(a, Mul(b, s)), Mul(c, s))\n  where is_const(b) && is_const(c) && is_const(s) && rank(s) == 0 && rank(b) == 2 && rank(c) == 1\n";
    let (ops, report, _) = run(
        r,
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] a) => (float[2,2] y) {
            w = Constant <value = float[3,2] {0.5, -1.0, 2.0, 0.25, -0.75, 1.5}> ()
            c = Constant <value = float[2] {0.1, -0.2}> ()
            s = Constant <value = float {1.4142135}> ()
            q = Mul(a, a)
            m = MatMul(q, w)
            x = Add(m, c)
            d = Div(x, s)
            e = Erf(d)
            y = Mul(x, e)
        }"#,
    );
    let fired = |name: &str| {
        report
            .main
            .phases
            .iter()
            .any(|p| p.firings.get(name).is_some_and(|&n| n > 0))
    };
    assert!(
        fired("div_to_mul") && fired("fold_scale"),
        "{:?}",
        report.main.phases
    );
    // (A Mul comes first in the graph, so the Mul form is the first switch tried.)
    assert_eq!(ops, ["Mul", "MatMul", "Add", "Div", "Erf", "Mul"]);
}

#[test]
fn explain_says_when_a_right_side_was_not_built() {
    use onnx_egraph::{explain_rule, SiteVerdict};
    // alpha takes the constant's one value; a constant of two values cannot be an attribute.
    let r = "# e\n\n# x * c == LeakyRelu(x, alpha: c) (not an identity: explain only)\nrule lr:\n  Mul(x, c) => LeakyRelu<alpha: value(c)>(x)\n  where is_const(c)\n";
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] a, float[2] b) {
            one = Constant <value = float[1] {0.5}> ()
            two = Constant <value = float[2] {0.5, 0.25}> ()
            a = Mul(x, one)
            b = Mul(x, two)
        }"#,
    );
    let sites = explain_rule(&m, rules(r), "lr").unwrap();
    let by_site: std::collections::BTreeMap<_, _> = sites
        .iter()
        .map(|s| (s.site.as_str(), &s.verdict))
        .collect();
    assert_eq!(by_site["a"], &SiteVerdict::Fired, "{sites:?}");
    match by_site["b"] {
        SiteVerdict::NotBuilt(reason) => assert!(reason.contains("alpha"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(by_site["b"]
        .to_string()
        .starts_with("matched, but the right side was not built"));
}
