//! Rules written in Rust: a left side in rule text (checked by `onnx_rules::parse_extern_rule`),
//! a guard and a right side in Rust (`RuleSet::add_rust_rule`), run by the saturation loop on
//! small models in the ONNX text syntax; `explain_rule` on them; and the errors of their text.

use std::sync::Arc;

use onnx_egraph::{
    explain_rule, rewrite_model, Phase, RewriteOptions, RewriteReport, RuleSet, RustApplier,
    RustGuard, RustMatch, RustRhs, SiteVerdict, Val,
};
use onnx_ir::Model;
use onnx_ref::{Session, Tensor, Value};

fn model(text: &str) -> Model {
    let proto = onnx_text::parse_model(text).unwrap_or_else(|e| panic!("{}", e.render()));
    Model::from_proto(proto).expect("a valid model")
}

/// A Rust rule from its left side and clauses, tags, guard and applier, alone in a set.
fn rust_rule(
    name: &str,
    text: &str,
    tags: &str,
    guard: Option<RustGuard>,
    applier: RustApplier,
) -> RuleSet {
    let rule = onnx_rules::parse_extern_rule(name, text, tags, &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut set = RuleSet::new();
    set.add_rust_rule(rule, guard, applier).unwrap();
    set
}

/// Optimizes with one phase of `set`: the op types in order, the report, the model.
fn run(set: &RuleSet, m: &Model) -> (Vec<String>, RewriteReport, Model) {
    let (out, report) = rewrite_model(
        m,
        RewriteOptions {
            phases: vec![Phase::new("test", Arc::new(set.clone()))],
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

/// Runs a model in the reference interpreter on the given float inputs.
fn eval(m: &Model, inputs: &[(&str, Tensor)]) -> Vec<Vec<f64>> {
    let session = Session::new(&m.to_proto()).unwrap();
    let inputs = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), Value::Tensor(t.clone())))
        .collect();
    let outs = session.run(inputs).unwrap();
    outs.into_iter()
        .map(|(_, v)| match v {
            Value::Tensor(t) => t.to_f64_vec().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// `Mul(x, 2)` built as `Add(x, x)` in Rust.
fn doubling(guard: Option<RustGuard>) -> RuleSet {
    rust_rule(
        "double_to_add",
        "# Mul(x, 2) == Add(x, x)\nMul(x, 2)\n  where is_float(x)",
        "exact",
        guard,
        Arc::new(|rhs: &mut RustRhs<'_>| {
            let x = rhs.var("x").ok_or("x is not bound")?;
            rhs.op("Add").input(x).input(x).build().map(Some)
        }),
    )
}

const ADD_SELF: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) {
    two = Constant <value = float {2.0}> ()
    a = Mul(x, two)
    y = Relu(a)
}"#;

const ADD_SELF_RANK3: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,4] x) => (float[2,3,4] y) {
    two = Constant <value = float {2.0}> ()
    a = Mul(x, two)
    y = Relu(a)
}"#;

#[test]
fn a_rust_rule_fires_and_builds_its_right_side() {
    let m = model(ADD_SELF);
    let (ops, report, out) = run(&doubling(None), &m);
    assert_eq!(ops, ["Add", "Relu"]);
    assert_eq!(report.main.phases[0].firings.get("double_to_add"), Some(&1));
    let x = Tensor::from_vec(&[2, 3], vec![-1.5f32, 0.0, 1.0, 2.5, -3.0, 4.0]).unwrap();
    assert_eq!(
        eval(&out, &[("x", x.clone())]),
        eval(&m, &[("x", x)]),
        "same values"
    );
    let sites = explain_rule(&m, Arc::new(doubling(None)), "double_to_add").unwrap();
    assert_eq!(sites.len(), 1);
    assert_eq!(sites[0].verdict, SiteVerdict::Fired);
}

#[test]
fn a_rust_guard_that_is_false_or_unknown_blocks_the_rule() {
    // Rank 2 only; unknown when the rank is not known.
    let rank2: RustGuard = Arc::new(|m: &RustMatch<'_>| Some(m.rank(m.var("x")?)? == 2));
    let set = doubling(Some(rank2.clone()));
    let (ops, report, _) = run(&set, &model(ADD_SELF));
    assert_eq!(ops, ["Add", "Relu"], "rank 2: the guard holds");
    assert!(report.main.phases[0].firings.contains_key("double_to_add"));

    let m3 = model(ADD_SELF_RANK3);
    let (ops, report, _) = run(&set, &m3);
    assert_eq!(ops, ["Mul", "Relu"], "rank 3: the guard is false");
    assert!(report.main.phases[0].firings.is_empty());
    let sites = explain_rule(&m3, Arc::new(set), "double_to_add").unwrap();
    match &sites[0].verdict {
        SiteVerdict::GuardFailed { value, .. } => assert_eq!(value, "false (the Rust guard)"),
        other => panic!("{other:?}"),
    }

    let unknown: RustGuard = Arc::new(|_: &RustMatch<'_>| None);
    let set = doubling(Some(unknown));
    let m = model(ADD_SELF);
    let (ops, _, _) = run(&set, &m);
    assert_eq!(ops, ["Mul", "Relu"], "an unknown guard does not fire");
    let sites = explain_rule(&m, Arc::new(set), "double_to_add").unwrap();
    match &sites[0].verdict {
        SiteVerdict::GuardFailed { value, .. } => assert_eq!(value, "unknown (the Rust guard)"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_applier_error_is_a_refusal_naming_the_rule_and_the_run_goes_on() {
    let mut set = rust_rule(
        "always_fails",
        "Mul(x, 2)",
        "",
        None,
        Arc::new(|_: &mut RustRhs<'_>| Err("no replacement today".into())),
    );
    // A rule whose right side has another type: refused like a text rule's.
    let wrong_type =
        onnx_rules::parse_extern_rule("wrong_type", "Neg(x)", "", &Default::default()).unwrap();
    set.add_rust_rule(
        wrong_type,
        None,
        Arc::new(|rhs: &mut RustRhs<'_>| {
            let x = rhs.var("x").ok_or("x")?;
            rhs.op("Transpose").input(x).build().map(Some)
        }),
    )
    .unwrap();
    // A text rule in the same phase still fires.
    let text =
        "# t\n\n# Relu(Relu(x)) == Relu(x)\nrule relu_relu [exact]:\n  Relu(Relu(x)) => Relu(x)\n";
    set.add_file(onnx_rules::parse_rules("t.rules", text, &Default::default()).unwrap());
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y, float[2,3] z) {
            two = Constant <value = float {2.0}> ()
            a = Mul(x, two)
            b = Relu(a)
            y = Relu(b)
            z = Neg(x)
        }"#,
    );
    let (ops, report, _) = run(&set, &m);
    assert_eq!(ops, ["Mul", "Relu", "Neg"]);
    let phase = &report.main.phases[0];
    assert_eq!(phase.firings.get("relu_relu"), Some(&1));
    let refusals: Vec<(&str, &str)> = phase
        .refusals
        .iter()
        .map(|r| (r.rule.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(
        refusals,
        [
            (
                "always_fails",
                "the Rust applier failed: no replacement today"
            ),
            ("wrong_type", "different types: float[2,3] vs float[3,2]"),
        ]
    );
    let set = Arc::new(set);
    let sites = explain_rule(&m, set.clone(), "always_fails").unwrap();
    assert_eq!(
        sites[0].verdict,
        SiteVerdict::Refused("the Rust applier failed: no replacement today".into())
    );
    let sites = explain_rule(&m, set, "wrong_type").unwrap();
    assert!(
        matches!(&sites[0].verdict, SiteVerdict::Refused(r) if r.starts_with("different types")),
        "{sites:?}"
    );
}

#[test]
fn an_applier_may_decline_a_match() {
    // Declines where x is a graph input of rank 3; fires elsewhere.
    let set = rust_rule(
        "declines_rank3",
        "Mul(x, 2)",
        "",
        None,
        Arc::new(|rhs: &mut RustRhs<'_>| {
            let x = rhs.var("x").ok_or("x")?;
            if rhs.matched().rank(x) == Some(3) {
                return Ok(None);
            }
            rhs.op("Add").inputs(&[x, x]).build().map(Some)
        }),
    );
    let m3 = model(ADD_SELF_RANK3);
    let (ops, report, _) = run(&set, &m3);
    assert_eq!(ops, ["Mul", "Relu"]);
    let phase = &report.main.phases[0];
    assert!(phase.firings.is_empty() && phase.refusals.is_empty());
    assert_eq!(phase.declined.get("declines_rank3"), Some(&1));
    let sites = explain_rule(&m3, Arc::new(set.clone()), "declines_rank3").unwrap();
    assert_eq!(
        sites[0].verdict,
        SiteVerdict::Refused("declined by the Rust applier".into())
    );
    let (ops, _, _) = run(&set, &model(ADD_SELF));
    assert_eq!(ops, ["Add", "Relu"]);
}

#[test]
fn a_rust_rule_builds_a_multi_input_op_with_attributes() {
    // MatMul(a, b) + c * k == Gemm(a, b, c, beta = k) for a constant scalar k.
    let set = rust_rule(
        "matmul_add_scaled_to_gemm",
        "Add(MatMul(a, b), Mul(c, k))\n  where rank(a) == 2 && rank(b) == 2 && is_const(k)",
        "",
        Some(Arc::new(|m: &RustMatch<'_>| {
            let k = m.var("k")?;
            Some(m.scalar_f64(k).is_some() && m.rank(m.var("c")?)? <= 2)
        })),
        Arc::new(|rhs: &mut RustRhs<'_>| {
            let m = rhs.matched();
            let (a, b, c, k) = (m.var("a"), m.var("b"), m.var("c"), m.var("k"));
            let (Some(a), Some(b), Some(c), Some(k)) = (a, b, c, k) else {
                return Err("a variable is not bound".into());
            };
            let beta = m.scalar_f64(k).ok_or("k is a scalar")? as f32;
            rhs.op("Gemm")
                .inputs(&[a, b, c])
                .attr_float("alpha", 1.0)
                .attr_float("beta", beta)
                .attr_int("transA", 0)
                .build()
                .map(Some)
        }),
    );
    let m = model(
        r#"<ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] a, float[3,4] b, float[4] c) => (float[2,4] y) {
            k = Constant <value = float {0.5}> ()
            p = MatMul(a, b)
            q = Mul(c, k)
            y = Add(p, q)
        }"#,
    );
    let (ops, report, out) = run(&set, &m);
    assert_eq!(ops, ["Gemm"], "{:?}", report.main.phases);
    let (_, gemm) = out.graph.nodes_in_order().next().unwrap();
    let beta = gemm.attribute("beta").unwrap().to_proto().f;
    assert_eq!(beta, Some(0.5));
    let a = Tensor::from_vec(&[2, 3], (0..6).map(|i| i as f32 - 2.0).collect()).unwrap();
    let b = Tensor::from_vec(&[3, 4], (0..12).map(|i| 0.25 * i as f32).collect()).unwrap();
    let c = Tensor::from_vec(&[4], vec![1.0f32, -2.0, 3.0, 0.5]).unwrap();
    let inputs = [("a", a), ("b", b), ("c", c)];
    assert_eq!(eval(&out, &inputs), eval(&m, &inputs));
}

#[test]
fn logical_parameters_are_attributes_at_every_opset() {
    // Unsqueeze(Relu(x), a) == Relu(Unsqueeze(x, a)): `axes` is read and written by name
    // whether it is an attribute (opset 11) or an input (opset 13).
    let set = rust_rule(
        "unsqueeze_relu_swap",
        "# Unsqueeze(Relu(x), a) == Relu(Unsqueeze(x, a))\nUnsqueeze<axes: a>(Relu(x))",
        "exact",
        None,
        Arc::new(|rhs: &mut RustRhs<'_>| {
            let x = rhs.var("x").ok_or("x")?;
            let axes = rhs.attr("a").ok_or("the axes are not known")?;
            assert!(matches!(&axes, Val::List(l) if l.len() == 1));
            let u = rhs.op("Unsqueeze").input(x).attr("axes", axes).build()?;
            rhs.op("Relu").input(u).build().map(Some)
        }),
    );
    for (opset, body) in [
        (11, "r = Relu(x)\n y = Unsqueeze <axes = [1]> (r)"),
        (
            13,
            "k = Constant <value = int64[1] {1}> ()\n r = Relu(x)\n y = Unsqueeze(r, k)",
        ),
    ] {
        let text = format!(
            "<ir_version: 8, opset_import: [\"\" : {opset}]>\n g (float[2,3] x) => (float[2,1,3] y) {{\n {body}\n }}"
        );
        let (ops, report, _) = run(&set, &model(&text));
        // Both forms cost the same, and a tie keeps the input's; the firing shows the right
        // side was built (a build that fails is a refusal, not a firing).
        assert_eq!(ops, ["Relu", "Unsqueeze"], "opset {opset}");
        assert_eq!(
            report.main.phases[0].firings.get("unsqueeze_relu_swap"),
            Some(&1),
            "opset {opset}: {:?}",
            report.main.phases[0]
        );
    }
}

#[test]
fn a_multi_output_op_built_in_rust_reads_its_projections() {
    // Concat(Split(x)) == x, built backwards on purpose: Relu(x) becomes
    // Relu(Concat(Split#2(x).0, Split#2(x).1)); extraction keeps the cheaper original.
    let set = rust_rule(
        "split_concat",
        "Relu(x) where dim(x, 0) == 2",
        "exact",
        // Only on a graph input, so the rule does not run again on what it built.
        Some(Arc::new(|m: &RustMatch<'_>| {
            let x = m.var("x")?;
            Some(
                m.egraph()[x]
                    .nodes
                    .iter()
                    .any(|n| matches!(n.kind, onnx_egraph::NodeKind::Input(_))),
            )
        })),
        Arc::new(|rhs: &mut RustRhs<'_>| {
            let x = rhs.var("x").ok_or("x")?;
            let parts = rhs
                .op("Split")
                .input(x)
                .attr_int("axis", 0)
                .build_outputs(2)?;
            assert_eq!(parts.len(), 2);
            let joined = rhs
                .op("Concat")
                .inputs(&parts)
                .attr_int("axis", 0)
                .build()?;
            rhs.op("Relu").input(joined).build().map(Some)
        }),
    );
    let (ops, report, _) = run(
        &set,
        &model(
            r#"<ir_version: 8, opset_import: ["" : 17]>
            g (float[2,3] x) => (float[2,3] y) {
                y = Relu(x)
            }"#,
        ),
    );
    assert_eq!(ops, ["Relu"]);
    let phase = &report.main.phases[0];
    assert_eq!(phase.firings.get("split_concat"), Some(&1), "{phase:?}");
    assert!(phase.refusals.is_empty());
}

#[test]
fn only_an_extern_rule_with_one_root_takes_a_rust_right_side() {
    let text = "# t\n\n# Relu(x) == Relu(x)\nrule text_rule:\n  Relu(x) => Relu(x)\n";
    let file = onnx_rules::parse_rules("t.rules", text, &Default::default()).unwrap();
    let applier: RustApplier = Arc::new(|_: &mut RustRhs<'_>| Ok(None));
    let err = RuleSet::new()
        .add_rust_rule(file.rules[0].clone(), None, applier.clone())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "rust rule 'text_rule': its right side is written in the rule language, not `extern`"
    );
    // A file may declare `=> extern` rules when allowed; added without an applier they never
    // fire (their matches count as not built).
    let text =
        "# t\n\n# Mul(x, 2) == x + x, built in Rust\nrule from_file:\n  Mul(x, 2) => extern\n";
    let options = onnx_rules::CheckOptions {
        allow_extern: true,
        ..Default::default()
    };
    let file = onnx_rules::parse_rules("t.rules", text, &options).unwrap();
    assert!(file.rules[0].is_extern());
    let mut set = RuleSet::new();
    set.add_file(file.clone());
    let (ops, report, _) = run(&set, &model(ADD_SELF));
    assert_eq!(ops, ["Mul", "Relu"]);
    assert_eq!(report.main.phases[0].not_built.get("from_file"), Some(&1));
    let mut set = RuleSet::new();
    let applier: RustApplier = Arc::new(|rhs: &mut RustRhs<'_>| {
        let x = rhs.var("x").ok_or("x")?;
        rhs.op("Add").inputs(&[x, x]).build().map(Some)
    });
    set.add_rust_rule(file.rules[0].clone(), None, applier)
        .unwrap();
    let (ops, _, _) = run(&set, &model(ADD_SELF));
    assert_eq!(ops, ["Add", "Relu"]);
}

#[test]
fn the_left_side_of_a_rust_rule_is_checked_with_carets_in_its_text() {
    let err = onnx_rules::parse_extern_rule(
        "fuse_gelu",
        "# x * Phi(x) == Gelu(x)\nMul(x, Add(Erf(Div(x, 1.41)), 1))\n  where is_float(x) && rank(x) > \"2\"",
        "fusion",
        &Default::default(),
    )
    .unwrap_err();
    insta::assert_snapshot!(err.to_string());
    let err = onnx_rules::parse_extern_rule(
        "fuse",
        "Gelux<approximate: \"tanh\">(x)",
        "opset 20..",
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "rust rule fuse:1:1: error: unknown op `Gelux`\n  |\n1 | Gelux<approximate: \"tanh\">(x)\n  | ^^^^^"
        ),
        "{err}"
    );
}
