//! Convs that share their input and attributes merge into one Conv and a Split, with a shared
//! activation applied once (`src/passes/sibling_conv.rs`), under the node-count cost model; each case
//! is optimized with the check on, so the merged model computes what the original does.

use std::collections::BTreeMap;

/// Optimizes a text model with the default pipeline under the node-count cost model and the
/// check on; returns the optimized main graph's op counts, the report's merged Conv count and
/// the graph's output names.
fn optimize(text: &str) -> (BTreeMap<String, usize>, usize, Vec<String>) {
    optimize_with(text, onnx_egraph::CostKind::NodeCount)
}

fn optimize_with(
    text: &str,
    cost: onnx_egraph::CostKind,
) -> (BTreeMap<String, usize>, usize, Vec<String>) {
    let model = onnx_opt::parse_text(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = onnx_opt::Optimizer::new()
        .cost(cost)
        .check(3)
        .optimize(&model)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let g = out.model.to_proto().graph.unwrap();
    let mut ops = BTreeMap::new();
    for n in &g.node {
        *ops.entry(n.op_type.clone().unwrap_or_default())
            .or_default() += 1;
    }
    let outputs = g.output.iter().map(|v| v.name.clone().unwrap()).collect();
    (
        ops,
        out.report
            .passes
            .count("merge-sibling-convs", "merged_convs"),
        outputs,
    )
}

/// `n` float values, different per `seed`, in the text syntax.
fn values(n: usize, seed: f32) -> String {
    (0..n)
        .map(|i| format!("{:.3}", (i as f32 * 0.37 + seed).sin()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Branches of one input `x` [1, 4, 5, 5] at `opset`: one `Conv(x, wI, bI)` per entry of
/// `channels`, each 1x1 with `attrs`, then `act` (an op name, or empty for none) to output `yI`.
fn branches(opset: i64, channels: &[usize], attrs: &str, act: &str) -> String {
    let mut inits = Vec::new();
    let mut body = Vec::new();
    let mut outputs = Vec::new();
    for (i, &m) in channels.iter().enumerate() {
        inits.push(format!(
            "float[{m},4,1,1] w{i} = {{{}}}, float[{m}] b{i} = {{{}}}",
            values(m * 4, i as f32),
            values(m, 10.0 + i as f32)
        ));
        if act.is_empty() {
            body.push(format!("  y{i} = Conv{attrs}(x, w{i}, b{i})"));
        } else {
            body.push(format!("  c{i} = Conv{attrs}(x, w{i}, b{i})"));
            body.push(format!("  y{i} = {act}(c{i})"));
        }
        outputs.push(format!("float[1,{m},5,5] y{i}"));
    }
    format!(
        "<ir_version: 8, opset_import: [\"\" : {opset}]>\ng (float[1,4,5,5] x) => ({}) <{}> {{\n{}\n}}",
        outputs.join(", "),
        inits.join(", "),
        body.join("\n")
    )
}

#[test]
fn sibling_convs_with_one_activation_become_a_conv_an_activation_and_a_split() {
    // Split takes its sizes as an attribute below 13, as an input from 13.
    for opset in [9, 11, 13, 18] {
        let (ops, merged, outputs) = optimize(&branches(opset, &[2, 3, 1], "", "Relu"));
        assert_eq!(merged, 2, "opset {opset}");
        let want: BTreeMap<String, usize> = [("Conv", 1), ("Relu", 1), ("Split", 1)]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        assert_eq!(ops, want, "opset {opset}");
        assert_eq!(outputs, ["y0", "y1", "y2"], "opset {opset}");
    }
    // Two Convs with their activations also pay: four nodes become three.
    let (ops, merged, _) = optimize(&branches(13, &[2, 3], "", "Sigmoid"));
    assert_eq!(
        (merged, ops.get("Conv"), ops.get("Split")),
        (1, Some(&1), Some(&1))
    );
}

#[test]
fn the_latency_cost_model_keeps_sibling_convs_apart() {
    let (ops, merged, _) = optimize_with(
        &branches(13, &[2, 3, 1], "", "Relu"),
        onnx_egraph::CostKind::Latency,
    );
    assert_eq!(merged, 0);
    assert_eq!(
        (ops.get("Conv"), ops.get("Split")),
        (Some(&3), None),
        "{ops:?}"
    );
}

#[test]
fn three_bare_sibling_convs_merge_and_keep_their_output_names() {
    let (ops, merged, outputs) = optimize(&branches(13, &[2, 2, 3], "<strides = [2, 2]>", ""));
    assert_eq!(merged, 2);
    assert_eq!(
        (ops.get("Conv"), ops.get("Split")),
        (Some(&1), Some(&1)),
        "{ops:?}"
    );
    assert_eq!(outputs, ["y0", "y1", "y2"]);
}

#[test]
fn sibling_convs_stay_apart_where_merging_would_not_pay_or_not_hold() {
    let grouped = branches(13, &[2, 2, 2], "<group = 2>", "Relu")
        .replace("float[2,4,1,1] w", "float[2,2,1,1] w")
        .replace(&values(8, 0.0), &values(4, 0.0))
        .replace(&values(8, 1.0), &values(4, 1.0))
        .replace(&values(8, 2.0), &values(4, 2.0));
    let cases = [
        // Two bare Convs would become a Conv and a Split.
        ("two bare siblings", branches(13, &[2, 3], "", ""), 2),
        // Grouped convolutions do not stack on the output channels.
        ("group 2", grouped, 3),
        // Different strides, different activations.
        (
            "different attributes",
            branches(13, &[2, 3], "", "Relu").replace(
                "c1 = Conv(x",
                "c1 = Conv<strides = [1, 1], dilations = [2, 2]>(x",
            ),
            2,
        ),
        (
            "different activations",
            branches(13, &[2, 3], "", "Relu").replace("y1 = Relu", "y1 = Sigmoid"),
            2,
        ),
        // A weight given as a graph input can be overridden.
        (
            "a weight given as an input",
            branches(13, &[2, 3], "", "Relu")
                .replace(
                    "(float[1,4,5,5] x)",
                    "(float[1,4,5,5] x, float[3,4,1,1] w1)",
                )
                .replace(
                    &format!("float[3,4,1,1] w1 = {{{}}}, ", values(12, 1.0)),
                    "",
                ),
            2,
        ),
    ];
    for (what, text, convs) in cases {
        let (ops, merged, _) = optimize(&text);
        assert_eq!(merged, 0, "{what}");
        assert_eq!(ops.get("Conv"), Some(&convs), "{what}: {ops:?}");
        assert_eq!(ops.get("Split"), None, "{what}: {ops:?}");
    }
}

#[test]
fn a_conv_whose_result_has_another_reader_merges_without_the_activation() {
    // c0 is also a graph output: its Relu cannot move before the Split, so only the Relu
    // group of two (c1, c2) merges with its activation.
    let text = branches(13, &[2, 3, 1], "", "Relu").replace("=> (", "=> (float[1,2,5,5] c0, ");
    let (ops, merged, outputs) = optimize(&text);
    assert_eq!(merged, 1);
    assert_eq!(
        (ops.get("Conv"), ops.get("Relu")),
        (Some(&2), Some(&2)),
        "{ops:?}"
    );
    assert_eq!(outputs, ["c0", "y0", "y1", "y2"]);
}

/// Large weights made by ConstantOfShape (kept unfolded: folding would grow the file): one fill
/// value becomes one ConstantOfShape, different ones a Concat; neither depends on `x`.
#[test]
fn constant_of_shape_weights_are_stacked_without_growing_the_file() {
    let model = |fill1: &str| {
        format!(
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,32,6,6] x) => (float[1,16,6,6] y0, float[1,24,6,6] y1, float[1,8,6,6] y2) <int64[4] s0 = {{16, 32, 3, 3}}, int64[4] s1 = {{24, 32, 3, 3}}, int64[4] s2 = {{8, 32, 3, 3}}> {{
  w0 = ConstantOfShape<value = float[1] {{0.01}}>(s0)
  w1 = ConstantOfShape<value = float[1] {{{fill1}}}>(s1)
  w2 = ConstantOfShape<value = float[1] {{0.01}}>(s2)
  c0 = Conv<pads = [1, 1, 1, 1]>(x, w0)
  c1 = Conv<pads = [1, 1, 1, 1]>(x, w1)
  c2 = Conv<pads = [1, 1, 1, 1]>(x, w2)
  y0 = Relu(c0)
  y1 = Relu(c1)
  y2 = Relu(c2)
}}"#
        )
    };
    let (ops, merged, _) = optimize(&model("0.01"));
    assert_eq!(merged, 2);
    let want: BTreeMap<String, usize> = [
        ("ConstantOfShape", 1),
        ("Conv", 1),
        ("Relu", 1),
        ("Split", 1),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .into();
    assert_eq!(ops, want);
    let (ops, merged, _) = optimize(&model("-0.02"));
    assert_eq!(merged, 2);
    assert_eq!(
        (
            ops.get("ConstantOfShape"),
            ops.get("Concat"),
            ops.get("Conv")
        ),
        (Some(&3), Some(&1), Some(&1)),
        "{ops:?}"
    );
}

/// Below IR 4 every initializer is also a graph input and still a constant: the weights merge,
/// the merged ones are listed as inputs and the replaced ones leave the inputs with them.
#[test]
fn ir_3_initializers_listed_as_inputs_merge() {
    let text = format!(
        r#"<ir_version: 3, opset_import: ["" : 9]>
g (float[1,4,5,5] x, float[2,4,1,1] w0, float[3,4,1,1] w1) => (float[1,2,5,5] y0, float[1,3,5,5] y1) <float[2,4,1,1] w0 = {{{}}}, float[3,4,1,1] w1 = {{{}}}> {{
  c0 = Conv(x, w0)
  c1 = Conv(x, w1)
  y0 = Relu(c0)
  y1 = Relu(c1)
}}"#,
        values(8, 0.0),
        values(12, 1.0)
    );
    let model = onnx_opt::parse_text(&text).unwrap_or_else(|e| panic!("{e}"));
    let out = onnx_opt::Optimizer::new()
        .cost(onnx_egraph::CostKind::NodeCount)
        .check(3)
        .optimize(&model)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        out.report
            .passes
            .count("merge-sibling-convs", "merged_convs"),
        1
    );
    let g = out.model.to_proto().graph.unwrap();
    let inputs: Vec<&str> = g.input.iter().filter_map(|v| v.name.as_deref()).collect();
    let inits: Vec<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    assert_eq!(inits.len(), 1, "{inits:?}");
    assert_eq!(inputs, ["x", inits[0]]);
    assert_eq!(g.initializer[0].dims, [5, 4, 1, 1]);
}

/// Random groups of sibling Convs (channels, kernel, stride, padding, dilation, bias, activation,
/// opset, and weights as initializers, ConstantOfShape fills or a computed constant), each
/// optimized under the node-count cost model with the check on (the original and the merged
/// model agree on random inputs, or `optimize` fails): the group merges exactly when it pays.
#[test]
fn random_sibling_conv_groups_merge_when_they_pay_and_compute_the_same() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let strategy = (
        prop::collection::vec(1usize..4, 2..5),
        (1usize..4, 1usize..3, 0usize..2, 1usize..3),
        prop::sample::select(vec!["", "Relu", "Sigmoid", "LeakyRelu", "Clip"]),
        (any::<bool>(), 0usize..3),
        prop::sample::select(vec![9i64, 11, 13, 18]),
    );
    let mut runner = TestRunner::new(Config {
        cases: 48,
        rng_seed: RngSeed::Fixed(1301),
        failure_persistence: None,
        max_shrink_iters: 0,
        ..Config::default()
    });
    let result = runner.run(
        &strategy,
        |(channels, (k, s, p, d), act, (bias, storage), opset)| {
            let span = d * (k - 1) + 1;
            let size = 6 + 2 * p;
            prop_assume!(size >= span);
            let o = (size - span) / s + 1;
            let clip = act == "Clip" && opset >= 11;
            let act = if act == "Clip" && !clip { "Relu" } else { act };
            let distinct = (1..channels.len()).all(|i| !channels[..i].contains(&channels[i]));
            let mut inits = vec!["float lo = {-0.5}, float hi = {0.5}".to_string()];
            let mut body = Vec::new();
            let mut outputs = Vec::new();
            for (i, &m) in channels.iter().enumerate() {
                let n = m * 3 * k * k;
                match storage {
                    0 => inits.push(format!("float[{m},3,{k},{k}] w{i} = {{{}}}", values(n, i as f32))),
                    1 => {
                        inits.push(format!("int64[4] s{i} = {{{m}, 3, {k}, {k}}}"));
                        body.push(format!(
                            "  w{i} = ConstantOfShape<value = float[1] {{{}}}>(s{i})",
                            // One fill for all where the shapes differ (one ConstantOfShape
                            // after the merge); else one each (equal weights would make equal
                            // Convs, which the e-graph merges first).
                            if distinct { 0.1 } else { 0.1 * (i + 1) as f32 }
                        ));
                    }
                    _ => {
                        inits.push(format!("float[{m},3,{k},{k}] a{i} = {{{}}}", values(n, i as f32)));
                        body.push(format!("  w{i} = Neg(a{i})"));
                    }
                }
                let b = if bias {
                    inits.push(format!("float[{m}] b{i} = {{{}}}", values(m, 5.0 + i as f32)));
                    format!(", b{i}")
                } else {
                    String::new()
                };
                let conv = format!(
                    "Conv<kernel_shape = [{k}, {k}], strides = [{s}, {s}], pads = [{p}, {p}, {p}, {p}], dilations = [{d}, {d}]>(x, w{i}{b})"
                );
                match act {
                    "" => body.push(format!("  y{i} = {conv}")),
                    "Clip" => {
                        body.push(format!("  c{i} = {conv}"));
                        body.push(format!("  y{i} = Clip(c{i}, lo, hi)"));
                    }
                    a => {
                        body.push(format!("  c{i} = {conv}"));
                        body.push(format!("  y{i} = {a}(c{i})"));
                    }
                }
                outputs.push(format!("float[1,{m},{o},{o}] y{i}"));
            }
            let text = format!(
                "<ir_version: 8, opset_import: [\"\" : {opset}]>\ng (float[1,3,6,6] x) => ({}) <{}> {{\n{}\n}}",
                outputs.join(", "),
                inits.join(", "),
                body.join("\n")
            );
            let (ops, merged, names) = optimize(&text);
            let n = channels.len();
            let pays = !act.is_empty() || n >= 3;
            prop_assert_eq!(merged, if pays { n - 1 } else { 0 }, "{}\n{:?}", text, ops);
            prop_assert_eq!(ops.get("Split").copied(), pays.then_some(1), "{}", text);
            prop_assert_eq!(names.len(), n);
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The pass on its own, on a graph whose later weights are written after the first Conv (as
/// extraction emits them, next to their reader): the Concat that stacks them stands where the
/// first Conv stood, and the result is put back in topological order.
#[test]
fn the_merged_graph_is_in_topological_order() {
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,32,6,6] x) => (float[1,16,6,6] y0, float[1,24,6,6] y1) <int64[4] s0 = {16, 32, 3, 3}, int64[4] s1 = {24, 32, 3, 3}> {
  w0 = ConstantOfShape<value = float[1] {0.01}>(s0)
  c0 = Conv<pads = [1, 1, 1, 1]>(x, w0)
  y0 = Relu(c0)
  w1 = ConstantOfShape<value = float[1] {-0.02}>(s1)
  c1 = Conv<pads = [1, 1, 1, 1]>(x, w1)
  y1 = Relu(c1)
}"#;
    let model = onnx_opt::parse_text(text).unwrap();
    let (merged, run) = onnx_opt::Optimizer::new()
        .cost(onnx_opt::CostKind::NodeCount)
        .run_pass("merge-sibling-convs", &model)
        .unwrap();
    assert_eq!(run.count("merged_convs"), 1);
    let proto = merged.to_proto();
    let g = proto.graph.unwrap();
    let mut defined: std::collections::BTreeSet<String> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    defined.insert("x".into());
    let mut ops = Vec::new();
    for n in &g.node {
        for i in &n.input {
            assert!(
                defined.contains(i),
                "{i} read before it is written: {:?}",
                g.node
            );
        }
        defined.extend(n.output.iter().cloned());
        ops.push(n.op_type.clone().unwrap());
    }
    assert_eq!(
        ops,
        [
            "ConstantOfShape",
            "ConstantOfShape",
            "Concat",
            "Conv",
            "Relu",
            "Split"
        ]
    );
}
