//! The e-graph path without rules on small models written in the ONNX text syntax: dead code,
//! common subexpressions, duplicate initializers and constants go; names, inputs and outputs
//! stay; the interpreter agrees with the original. Plus a proptest over random elementwise
//! graphs.

use onnx_egraph::{rewrite_model, FoldOptions, RewriteOptions};
use onnx_ir::Model;
use onnx_proto::ModelProto;
use onnx_ref::{Session, Tensor, Value};
use proptest::prelude::*;

fn optimize_text(text: &str) -> (ModelProto, ModelProto) {
    let proto = onnx_text::parse_model(text).unwrap_or_else(|e| panic!("{}", e.render()));
    let model = Model::from_proto(proto.clone()).unwrap();
    let (out, _) = rewrite_model(&model, RewriteOptions::default()).unwrap();
    (proto, out.to_proto())
}

fn ops(m: &ModelProto) -> Vec<String> {
    m.graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.op_type().to_string())
        .collect()
}

fn run(m: &ModelProto, inputs: &[(&str, Tensor)]) -> Vec<(String, Value)> {
    let s = Session::new(m).unwrap();
    s.run(
        inputs
            .iter()
            .map(|(n, t)| (n.to_string(), Value::Tensor(t.clone())))
            .collect(),
    )
    .unwrap()
}

fn x() -> Tensor {
    Tensor::from_vec(
        &[2, 3],
        vec![-1.5f32, 0.0, 2.0, f32::NAN, f32::INFINITY, -0.0],
    )
    .unwrap()
}

/// Runs both models on `inputs` and asserts equal outputs (NaN == NaN, bitwise otherwise).
fn assert_same(a: &ModelProto, b: &ModelProto, inputs: &[(&str, Tensor)]) {
    let ra = run(a, inputs);
    let rb = run(b, inputs);
    assert_eq!(ra.len(), rb.len());
    for ((na, va), (nb, vb)) in ra.iter().zip(&rb) {
        assert_eq!(na, nb);
        let (Value::Tensor(ta), Value::Tensor(tb)) = (va, vb) else {
            panic!("not tensors")
        };
        assert_eq!(ta.shape(), tb.shape());
        let (p, q) = (ta.to_f64_vec().unwrap(), tb.to_f64_vec().unwrap());
        for (x, y) in p.iter().zip(&q) {
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{x} vs {y}"
            );
        }
    }
}

#[test]
fn common_subexpressions_and_dead_code_go() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y) {
            a = Relu(x)
            b = Relu(x)
            dead = Sigmoid(x)
            y = Add(a, b)
        }"#;
    let (orig, opt) = optimize_text(text);
    assert_eq!(ops(&opt), ["Relu", "Add"]);
    let g = opt.graph.as_ref().unwrap();
    assert_eq!(g.input[0].name(), "x");
    assert_eq!(g.output[0].name(), "y");
    assert_eq!(
        g.node[0].output[0], "a",
        "a surviving value keeps one of its names"
    );
    assert_same(&orig, &opt, &[("x", x())]);
}

#[test]
fn constants_fold_and_duplicate_initializers_merge() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y) <float[3] w1 = {1.0, 2.0, 3.0}, float[3] w2 = {1.0, 2.0, 3.0}> {
            s = Add(w1, w2)
            t = Mul(s, w1)
            u = Add(x, t)
            y = Sub(u, w2)
        }"#;
    let (orig, opt) = optimize_text(text);
    assert_eq!(ops(&opt), ["Add", "Sub"]);
    let g = opt.graph.as_ref().unwrap();
    assert_eq!(g.initializer.len(), 2, "w1 == w2 merged; t folded");
    assert_same(&orig, &opt, &[("x", x())]);
}

#[test]
fn outputs_keep_names_even_when_aliased() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y, float[2,3] z, float[2,3] w, float[3] c) <float[3] k = {1.0, 2.0, 3.0}> {
            y = Relu(x)
            z = Relu(x)
            w = Identity(x)
            c = Identity(k)
        }"#;
    let (orig, opt) = optimize_text(text);
    let g = opt.graph.as_ref().unwrap();
    let names: Vec<&str> = g.output.iter().map(|o| o.name()).collect();
    assert_eq!(names, ["y", "z", "w", "c"]);
    assert_same(&orig, &opt, &[("x", x())]);
}

#[test]
fn shape_arithmetic_folds_with_static_shapes_and_stays_symbolic_otherwise() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[N,6] x) => (float[N,2,3] y) <int64[1] zero = {0}> {
            s = Shape(x)
            n = Gather(s, zero)
            rest = Constant<value = int64[2] {2, 3}>()
            shape = Concat<axis = 0>(n, rest)
            y = Reshape(x, shape)
        }"#;
    let (orig, opt) = optimize_text(text);
    // N is unknown: the Shape/Gather/Concat chain must stay.
    assert!(ops(&opt).contains(&"Shape".to_string()));
    let t = Tensor::from_vec(&[1, 6], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    assert_same(&orig, &opt, &[("x", t)]);
    let static_text = text
        .replace("float[N,6] x", "float[4,6] x")
        .replace("float[N,2,3] y", "float[4,2,3] y");
    let (orig, opt) = optimize_text(&static_text);
    assert_eq!(ops(&opt), ["Reshape"], "static shape arithmetic folds away");
    let t = Tensor::from_vec(&[4, 6], (0..24).map(|i| i as f32).collect()).unwrap();
    assert_same(&orig, &opt, &[("x", t)]);
}

#[test]
fn random_ops_are_never_merged() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2,3] x) => (float[2,3] y) {
            a = RandomUniformLike<seed = 1.0>(x)
            b = RandomUniformLike<seed = 1.0>(x)
            y = Sub(a, b)
        }"#;
    let (_, opt) = optimize_text(text);
    assert_eq!(ops(&opt), ["RandomUniformLike", "RandomUniformLike", "Sub"]);
}

#[test]
fn subgraphs_are_optimized_with_outer_values() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (bool c, float[2,3] x) => (float[2,3] y) {
            r = Relu(x)
            y = If(c) <then_branch = t () => (float[2,3] o) {
                    a = Neg(r)
                    b = Neg(r)
                    o = Add(a, b)
                }, else_branch = e () => (float[2,3] o2) {
                    o2 = Identity(r)
                }>
        }"#;
    let (orig, opt) = optimize_text(text);
    let g = opt.graph.as_ref().unwrap();
    let if_node = g.node.iter().find(|n| n.op_type() == "If").unwrap();
    let then = if_node
        .attribute
        .iter()
        .find(|a| a.name() == "then_branch")
        .unwrap()
        .g
        .as_ref()
        .unwrap();
    assert_eq!(then.node.len(), 2, "Neg(r) computed once in the body");
    for cond in [true, false] {
        let c = Tensor::from_vec(&[], vec![cond]).unwrap();
        assert_same(&orig, &opt, &[("c", c), ("x", x())]);
    }
}

#[test]
fn folding_respects_the_budget_unless_lifted() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[64,64] x) => (float[64,64] y) <int64[2] s = {64, 64}> {
            big = ConstantOfShape<value = float[1] {0.5}>(s)
            y = Add(x, big)
        }"#;
    let proto = onnx_text::parse_model(text).unwrap();
    let model = Model::from_proto(proto).unwrap();
    let (out, report) = rewrite_model(&model, RewriteOptions::default()).unwrap();
    assert_eq!(ops(&out.to_proto()), ["ConstantOfShape", "Add"]);
    assert_eq!(
        report.main.folds_over_budget, 0,
        "inference showed the size: never computed"
    );
    let options = RewriteOptions {
        fold: FoldOptions {
            enabled: true,
            budget_floor: None,
            ..FoldOptions::default()
        },
        ..Default::default()
    };
    let (out, _) = rewrite_model(&model, options).unwrap();
    assert_eq!(ops(&out.to_proto()), ["Add"]);
}

#[test]
fn integer_values_equal_as_dims_are_one_value() {
    // (S + T) - S and T's own Shape slice are both `[T]`: one value, so one Cast, and the Add
    // and Sub go. With the union off (as the prover runs) they stay.
    let text = r#"
        <ir_version: 10, opset_import: ["" : 18]>
        g (float[B,S,4] x, float[B,T,4] z) => (float[1] ya, float[1] yb) {
            s = Shape <start = 1, end = 2> (x)
            t = Shape <start = 1, end = 2> (z)
            st = Add(s, t)
            b = Sub(st, s)
            ya = Cast <to = 1> (t)
            yb = Cast <to = 1> (b)
        }"#;
    let proto = onnx_text::parse_model(text).unwrap();
    let model = Model::from_proto(proto.clone()).unwrap();
    let (out, _) = rewrite_model(&model, RewriteOptions::default()).unwrap();
    let merged = ops(&out.to_proto());
    assert_eq!(
        merged.iter().filter(|o| *o == "Cast").count(),
        1,
        "{merged:?}"
    );
    assert!(
        !merged.iter().any(|o| o == "Add" || o == "Sub"),
        "{merged:?}"
    );
    let z = Tensor::from_vec(&[2, 5, 4], vec![0.0f32; 40]).unwrap();
    let x3 = Tensor::from_vec(&[2, 3, 4], vec![0.0f32; 24]).unwrap();
    let got = run(&out.to_proto(), &[("x", x3), ("z", z)]);
    for (name, v) in &got {
        let t = v.as_tensor().unwrap();
        assert_eq!(t.to_f64_vec().unwrap(), [5.0], "{name}");
    }
    let options = RewriteOptions {
        fold: FoldOptions {
            union_equal_dims: false,
            ..FoldOptions::default()
        },
        ..Default::default()
    };
    let (out, _) = rewrite_model(&model, options).unwrap();
    let apart = ops(&out.to_proto());
    assert_eq!(
        apart.iter().filter(|o| *o == "Cast").count(),
        2,
        "{apart:?}"
    );
    assert!(apart.iter().any(|o| o == "Sub"), "{apart:?}");
}

/// A random elementwise graph over one input: each step applies a unary or binary op to
/// earlier values (sharing subterms), outputs are the last two values.
fn graph_text(steps: &[(u8, usize, usize)]) -> String {
    let mut body = String::new();
    let mut names = vec!["x".to_string(), "k".to_string()];
    for (i, &(op, a, b)) in steps.iter().enumerate() {
        let a = &names[a % names.len()];
        let b = &names[b % names.len()];
        let expr = match op % 8 {
            0 => format!("Add({a}, {b})"),
            1 => format!("Mul({a}, {b})"),
            2 => format!("Sub({a}, {b})"),
            3 => format!("Relu({a})"),
            4 => format!("Neg({a})"),
            5 => format!("Max({a}, {b})"),
            6 => format!("Abs({a})"),
            _ => format!("Identity({a})"),
        };
        let n = format!("v{i}");
        body.push_str(&format!("  {n} = {expr}\n"));
        names.push(n);
    }
    let l = names.len();
    format!(
        "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2,3] x) => (float[2,3] o1, float[2,3] o2) <float[3] k = {{0.5, -2.0, 3.0}}> {{\n{body}  o1 = Identity({})\n  o2 = Identity({})\n}}",
        names[l - 1],
        names[l - 2]
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_graphs_compute_the_same(steps in prop::collection::vec((0u8..8, 0usize..16, 0usize..16), 1..12),
                                      data in prop::collection::vec(prop_oneof![-4.0f32..4.0, Just(f32::NAN), Just(f32::INFINITY), Just(0.0)], 6)) {
        let text = graph_text(&steps);
        let (orig, opt) = optimize_text(&text);
        let t = Tensor::from_vec(&[2, 3], data).unwrap();
        assert_same(&orig, &opt, &[("x", t)]);
        // Idempotence: optimizing again changes nothing.
        let again = rewrite_model(&Model::from_proto(opt.clone()).unwrap(), RewriteOptions::default()).unwrap().0.to_proto();
        prop_assert_eq!(again, opt);
    }
}

#[test]
fn optimization_is_deterministic() {
    let text = graph_text(&[(0, 0, 1), (1, 2, 0), (0, 3, 2), (3, 4, 0), (0, 5, 4)]);
    let (_, a) = optimize_text(&text);
    let (_, b) = optimize_text(&text);
    assert_eq!(a, b);
}

#[test]
fn a_target_opset_forbids_ops_bound_to_other_versions() {
    // Relu binds Relu-14 at opset 17; at target 13 it would bind Relu-13, which takes floats
    // only: an int32 Relu has no legal graph there, a float one is rebound to Relu-13.
    let relu = |ty: &str| {
        let text = format!(
            "<ir_version: 8, opset_import: [\"\" : 17]>\ng ({ty}[2,3] x) => ({ty}[2,3] y) {{\n  y = Relu(x)\n}}"
        );
        Model::from_proto(onnx_text::parse_model(&text).unwrap()).unwrap()
    };
    let at = |target| RewriteOptions {
        target_opset: Some(target),
        ..Default::default()
    };
    assert!(
        rewrite_model(&relu("int32"), at(14)).is_ok(),
        "Relu-14 is legal at 14"
    );
    let err = rewrite_model(&relu("int32"), at(13))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot express 1 node(s) at opset 13")
            && err.contains("the node computing 'y' (Relu, version 14; opset 13 has version 13)"),
        "{err}"
    );
    let (converted, _) = rewrite_model(&relu("float"), at(13)).unwrap();
    assert_eq!(converted.opset_imports[0].version, 13);
}

/// A declared dim of -1 means "unknown" (some exporters write it; onnx.checker accepts it):
/// `Shape` of such an input must not fold to a constant holding -1.
#[test]
fn a_declared_dim_of_minus_one_is_unknown_not_a_size() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[-1,3] x) => (int64[2] y) {
            y = Shape(x)
        }"#;
    let proto = onnx_text::parse_model(text).unwrap();
    let model = Model::from_proto(proto).unwrap();
    let (out, _) = rewrite_model(&model, RewriteOptions::default()).unwrap();
    assert_eq!(ops(&out.to_proto()), ["Shape"]);
}

/// A Loop body that passes its condition straight through (`cond` in, `cond` out) optimizes;
/// the body keeps `cond` as its output without redefining it.
#[test]
fn a_loop_body_passing_an_input_through_optimizes() {
    let text = r#"
        <ir_version: 8, opset_import: ["" : 17]>
        g (int64 n, bool c, float[2] x) => (float[2] y) {
            y = Loop (n, c, x) <body = body (int64 i, bool cond, float[2] acc) => (bool cond, float[2] out) {
                out = Add(acc, acc)
            }>
        }"#;
    let proto = onnx_text::parse_model(text).unwrap();
    let model = Model::from_proto(proto.clone()).unwrap();
    let (out, _) =
        rewrite_model(&model, RewriteOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let opt = out.to_proto();
    let n = Tensor::from_vec(&[], vec![3i64]).unwrap();
    let c = Tensor::from_vec(&[], vec![true]).unwrap();
    let x = Tensor::from_vec(&[2], vec![1.0f32, -2.0]).unwrap();
    assert_same(&proto, &opt, &[("n", n), ("c", c), ("x", x)]);
}
