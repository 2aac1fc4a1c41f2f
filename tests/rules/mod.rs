//! Every built-in rule has a case under `tests/rule_cases/NAME.onnxtxt`: a small model in the
//! ONNX text syntax on which the rule fires. The case is optimized with all the built-in rules
//! (unsafe ones included), the rule must have fired without any refused union, the result must
//! compute the same as the original in the reference interpreter, and the printed result is an
//! insta snapshot (`tests/rule_cases/snapshots/`), so a change to any rule shows as a diff.
//! [`rust_rules`]: the proof of rules written in Rust.

mod rust_rules;

use std::collections::BTreeMap;
use std::path::PathBuf;

use onnx_opt::RuleSelection;
use onnx_opt::{compare_models, Tolerance};

fn cases_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/rule_cases"))
}

fn all_rules() -> RuleSelection {
    RuleSelection {
        float_unsafe: true,
        version: true,
        targets: true,
        ..Default::default()
    }
}

/// The rules a default optimization with a target opset runs: every built-in rule but the
/// target ones (`rules/onnxruntime.rules`), which run only in their pipeline's lowering phase.
fn untargeted_rules() -> RuleSelection {
    RuleSelection {
        targets: false,
        ..all_rules()
    }
}

/// The `onnxruntime` pipeline's lowering phases (its target rules, with the cleanups), and
/// their cost model: what a target rule's case runs under.
fn lowering_phases() -> (Vec<onnx_egraph::Phase>, onnx_egraph::CostKind) {
    let phases = onnx_opt::Optimizer::new()
        .target(onnx_opt::Target::OnnxRuntime)
        .unsafe_rules(true)
        .phases()
        .unwrap();
    let lowering: Vec<_> = phases
        .into_iter()
        .filter(|p| p.lowering.is_some())
        .collect();
    let cost = lowering[0].lowering.unwrap();
    (lowering, cost)
}

#[test]
fn every_builtin_rule_fires_on_its_case_and_keeps_the_result() {
    let files = onnx_opt::load_rule_files(&all_rules()).expect("built-in rules check");
    let phases = || onnx_opt::rule_phases(&untargeted_rules()).unwrap();
    let targeted = |path: &str| onnx_opt::TARGET_RULE_FILES.iter().any(|(p, _)| *p == path);
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    // The generated version steps (loaded as rules/version/steps.rules, one per pair of
    // versions of an op) are proven below like every rule and exercised by the conversion tests; they have
    // no case files.
    let written = files
        .iter()
        .filter(|f| f.path != "rules/version/steps.rules");
    for (file, rule) in written.flat_map(|f| f.rules.iter().map(move |r| (f.path.as_str(), r))) {
        seen.push(format!("{}.onnxtxt", rule.name));
        let path = cases_dir().join(format!("{}.onnxtxt", rule.name));
        let Ok(text) = std::fs::read_to_string(&path) else {
            failures.push(format!("{}: no case file {}", rule.name, path.display()));
            continue;
        };
        let proto = match onnx_text::parse_model(&text) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{}: {}", rule.name, e.render()));
                continue;
            }
        };
        let model = onnx_ir::Model::from_proto(proto.clone()).expect("case converts to the IR");
        // A version step runs toward a target: its right side's opset, where the case lands.
        let target = rule.step.map(|s| s.own_target());
        // A target rule runs where its pipeline runs it: in the lowering phase, under the
        // target's cost model.
        let (mut phases, cost) = match targeted(file) {
            true => lowering_phases(),
            false => (phases(), onnx_egraph::CostKind::default()),
        };
        for p in phases.iter_mut() {
            p.target_opset = target;
        }
        let options = onnx_egraph::RewriteOptions {
            phases,
            target_opset: target,
            cost,
            ..Default::default()
        };
        let (out, report) = match onnx_egraph::rewrite_model(&model, options) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{}: {e}", rule.name));
                continue;
            }
        };
        let phase = &report.main.phases[0];
        if !phase.firings.contains_key(&rule.name) {
            failures.push(format!(
                "{}: did not fire on its case (fired: {:?})",
                rule.name, phase.firings
            ));
        }
        if !phase.refusals.is_empty() {
            failures.push(format!(
                "{}: refused unions {:?}",
                rule.name, phase.refusals
            ));
        }
        let optimized = out.to_proto();
        match compare_models(
            &proto,
            &optimized,
            3,
            &BTreeMap::new(),
            Tolerance::default(),
        ) {
            Ok(None) => {}
            Ok(Some(m)) => failures.push(format!("{}: outputs differ: {m:?}", rule.name)),
            Err(e) => failures.push(format!("{}: {e:#}", rule.name)),
        }
        let printed = onnx_text::print_model(&optimized, &Default::default());
        insta::with_settings!({
            snapshot_path => cases_dir().join("snapshots"),
            prepend_module_to_snapshot => false,
            description => format!("{} after the built-in rules", path.display()),
        }, {
            insta::assert_snapshot!(rule.name.as_str(), printed);
        });
    }
    // No stale case files.
    for entry in std::fs::read_dir(cases_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".onnxtxt") && !seen.contains(&name) {
            failures.push(format!(
                "{name}: a case file for a rule that does not exist"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `rules/bodies.rules` and its case files are what `scripts/gen_body_fusions.py` writes from
/// the committed schema table (the script needs only Python's standard library).
#[test]
fn generated_body_fusions_are_current() {
    crate::generated_files_are_current("gen_body_fusions.py");
}

/// `onnx-opt rules check` on the built-in rules: every rule, every epoch, proven on random
/// instances in the reference interpreter (the same proof CI runs).
#[test]
fn every_builtin_rule_is_proven_on_random_instances() {
    let files = onnx_opt::load_rule_files(&all_rules()).expect("built-in rules check");
    let opts = onnx_prove::ProveOptions::default();
    let guards = onnx_egraph::GuardRegistry::default();
    let verdicts: Vec<_> = files
        .iter()
        .flat_map(|f| &f.rules)
        .map(|r| onnx_prove::prove_rule(r, &guards, &opts))
        .collect();
    let failed: Vec<&str> = verdicts
        .iter()
        .filter(|v| !v.passed(&opts))
        .map(|v| v.rule.as_str())
        .collect();
    assert!(
        failed.is_empty(),
        "{}",
        onnx_prove::render_verdicts(&verdicts, &opts)
    );
    // Every version step up has its inverse, and the round trip comes back.
    let all: Vec<&onnx_rules::ir::Rule> = files.iter().flat_map(|f| &f.rules).collect();
    let mut trips = 0;
    for r in &all {
        let Some(step) = r.step else { continue };
        if step.rhs_opset < step.lhs_opset {
            continue;
        }
        let back = onnx_prove::step_inverses(r, &all);
        // A step into other ops (Softmax-11 as Flatten, Softmax-13 and Reshape) has no step
        // back from its root; its instances are proven above like every rule's.
        let into_other_ops = r.step_ops().is_some_and(|(a, b)| a.op_type != b.op_type);
        if back.is_empty() && into_other_ops {
            continue;
        }
        assert!(!back.is_empty(), "{}: no step back", r.name);
        let t = onnx_prove::round_trip(r, &back, &guards, &opts);
        assert!(t.passed(&opts), "{} then {}: {t:?}", t.step, t.inverse);
        trips += 1;
    }
    assert!(trips >= 200, "{trips} round trips");
}

/// Optimizes a text model with every built-in rule (unsafe ones included) and returns the
/// original and optimized protos.
fn optimize_text(text: &str) -> (onnx_proto::ModelProto, onnx_proto::ModelProto) {
    let proto = onnx_text::parse_model(text).unwrap_or_else(|e| panic!("{}", e.render()));
    let model = onnx_ir::Model::from_proto(proto.clone()).expect("model converts to the IR");
    let options = onnx_egraph::RewriteOptions {
        phases: onnx_opt::rule_phases(&untargeted_rules()).unwrap(),
        ..Default::default()
    };
    let (out, _) = onnx_egraph::rewrite_model(&model, options).expect("optimizes");
    (proto, out.to_proto())
}

/// How many nodes of `op_type` the model has, in its subgraphs too.
fn count_op(model: &onnx_proto::ModelProto, op_type: &str) -> usize {
    fn in_graph(g: &onnx_proto::GraphProto, op_type: &str) -> usize {
        g.node
            .iter()
            .map(|n| {
                let here = usize::from(n.op_type.as_deref() == Some(op_type));
                let nested: usize = n
                    .attribute
                    .iter()
                    .flat_map(|a| a.g.iter().chain(&a.graphs))
                    .map(|sub| in_graph(sub, op_type))
                    .sum();
                here + nested
            })
            .sum()
    }
    model.graph.as_ref().map_or(0, |g| in_graph(g, op_type))
}

/// A model on which a rule must not apply: what it shows, the text model, an op and how many
/// of it the optimized model must still have.
type GuardCase<'a> = (&'a str, &'a str, &'a str, usize);

/// Optimizes each guard case; the failures: a wrong count of the op, or a changed result.
fn check_guard_cases(cases: &[GuardCase<'_>]) -> Vec<String> {
    let mut failures = Vec::new();
    for (what, text, op, count) in cases {
        let (original, optimized) = optimize_text(text);
        let after = count_op(&optimized, op);
        if after != *count {
            failures.push(format!("{what}: {after} {op} after, {count} wanted"));
        }
        match compare_models(
            &original,
            &optimized,
            3,
            &BTreeMap::from([("N".to_string(), 2), ("M".to_string(), 3)]),
            Tolerance::default(),
        ) {
            Ok(None) => {}
            Ok(Some(m)) => failures.push(format!("{what}: outputs differ: {m:?}")),
            Err(e) => failures.push(format!("{what}: {e:#}")),
        }
    }
    failures
}

/// The guards issue 13 lists as known wrong results of the peers: on each model the rule that
/// touches it must not apply, so the named op keeps its count, and the result is unchanged.
#[test]
fn guards_that_peers_got_wrong() {
    let cases: &[GuardCase<'_>] = &[
        (
            "Pad with value 0 into MaxPool (the pad value must be -inf)",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] x) => (float[1,2,5,5] y) {
  p = Constant <value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}> ()
  t = Pad(x, p)
  y = MaxPool <kernel_shape = [3, 3]> (t)
}"#,
            "Pad",
            1,
        ),
        (
            "Pad with a non-zero value into AveragePool",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] x) => (float[1,2,5,5] y) {
  p = Constant <value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}> ()
  v = Constant <value = float {1.0}> ()
  t = Pad(x, p, v)
  y = AveragePool <kernel_shape = [3, 3]> (t)
}"#,
            "Pad",
            1,
        ),
        (
            "Pad into an AveragePool that already pads and excludes padding from the count",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] x) => (float[1,2,7,7] y) {
  p = Constant <value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}> ()
  t = Pad(x, p)
  y = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (t)
}"#,
            "Pad",
            1,
        ),
        (
            "Pad with an axes input into Conv",
            r#"<ir_version: 8, opset_import: ["" : 18]>
g (float[1,2,5,5] x, float[3,2,3,3] w) => (float[1,3,5,3] y) {
  p = Constant <value = int64[4] {1, 0, 1, 0}> ()
  ax = Constant <value = int64[2] {2, 3}> ()
  v = Constant <value = float {0.0}> ()
  t = Pad(x, p, v, ax)
  y = Conv(t, w)
}"#,
            "Pad",
            1,
        ),
        (
            "Reshape chain whose outer target has a 0 (copies a dim of the inner result)",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4] x) => (float[6,4] y) {
  s = Constant <value = int64[2] {6, 4}> ()
  a = Reshape(x, s)
  t = Constant <value = int64[2] {0, -1}> ()
  y = Reshape(a, t)
}"#,
            "Reshape",
            1,
        ),
        (
            "Shape with start then Slice",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,M,4] x) => (int64[1] y) {
  s = Shape <start = 1> (x)
  st = Constant <value = int64[1] {0}> ()
  en = Constant <value = int64[1] {1}> ()
  y = Slice(s, st, en)
}"#,
            "Slice",
            1,
        ),
        (
            "Conv times a Mul that broadcasts on the last axis instead of the channel",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] x, float[3,2,3,3] w) => (float[1,3,3,3] y) {
  s = Constant <value = float[1,1,1,3] {2.0, -0.5, 0.25}> ()
  c = Conv(x, w)
  y = Mul(c, s)
}"#,
            "Mul",
            1,
        ),
        (
            "Two Clips with disjoint ranges",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  a = Constant <value = float {0.0}> ()
  b = Constant <value = float {1.0}> ()
  c = Constant <value = float {2.0}> ()
  d = Constant <value = float {3.0}> ()
  t = Clip(x, a, b)
  y = Clip(t, c, d)
}"#,
            "Clip",
            2,
        ),
        (
            "Relu of a Clip whose range is negative",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  lo = Constant <value = float {-3.0}> ()
  hi = Constant <value = float {-1.0}> ()
  t = Clip(x, lo, hi)
  y = Relu(t)
}"#,
            "Relu",
            1,
        ),
        (
            "A Mul by a constant close to but not exactly 1",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  k = Constant <value = float {1.0000001}> ()
  y = Mul(x, k)
}"#,
            "Mul",
            1,
        ),
        (
            "A Cast chain that rounds twice (f64 -> f32 -> f16)",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (double[2,3] x) => (float16[2,3] y) {
  a = Cast <to = 1> (x)
  y = Cast <to = 10> (a)
}"#,
            "Cast",
            2,
        ),
        (
            "A per-column Mul after a MatMul whose result has another consumer (folding the scale \
             into the weights would compute the product twice with two weight copies)",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,4] a) => (float[2,3] y1, float[2,3] y2) {
  w = Constant <value = float[4,3] {0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 1.1, 1.2}> ()
  k = Constant <value = float[3] {2.0, -0.5, 0.25}> ()
  m = MatMul(a, w)
  y1 = Mul(m, k)
  y2 = Relu(m)
}"#,
            "MatMul",
            1,
        ),
        (
            "Gemm times Mul when the Gemm has another consumer",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,4] a) => (float[2,3] y1, float[2,3] y2) {
  w = Constant <value = float[4,3] {0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 1.1, 1.2}> ()
  c = Constant <value = float[3] {0.5, 0.25, -1.0}> ()
  k = Constant <value = float {2.0}> ()
  m = Gemm(a, w, c)
  y1 = Mul(m, k)
  y2 = Relu(m)
}"#,
            "Gemm",
            1,
        ),
        (
            "MatMul then Transpose then BatchNormalization (the channel is not the MatMul's column)",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4] x) => (float[2,4,3] y) {
  w = Constant <value = float[4,4] {0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, -0.9, 1.0, 1.1, 1.2, 0.3, -0.1, 0.2, 0.9}> ()
  m = MatMul(x, w)
  t = Transpose <perm = [0, 2, 1]> (m)
  s = Constant <value = float[4] {2.0, -0.5, 0.25, 1.5}> ()
  b = Constant <value = float[4] {0.1, 0.2, -0.3, 0.4}> ()
  mu = Constant <value = float[4] {0.5, -0.5, 0.0, 1.0}> ()
  v = Constant <value = float[4] {1.0, 2.0, 0.5, 4.0}> ()
  y = BatchNormalization(t, s, b, mu, v)
}"#,
            "BatchNormalization",
            1,
        ),
        (
            "A Reshape chain whose inner Reshape has allowzero 1 and whose outer target has a 0 \
             (it copies the inner result's dim 0, 3, not x's, 2): one Reshape to [3, 2] is right",
            r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] x) => (float[3,2] y) {
  s1 = Constant <value = int64[2] {3, 2}> ()
  a = Reshape <allowzero = 1> (x, s1)
  s2 = Constant <value = int64[2] {0, -1}> ()
  y = Reshape(a, s2)
}"#,
            "Reshape",
            1,
        ),
        (
            "A seeded RandomUniform is not folded into a constant",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  r = RandomUniform <shape = [2, 3], seed = 1.0> ()
  y = Add(r, x)
}"#,
            "RandomUniform",
            1,
        ),
        (
            "A RandomNormalLike of a constant is not folded into a constant",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  c = Constant <value = float[2,3] {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}> ()
  r = RandomNormalLike(c)
  y = Add(r, x)
}"#,
            "RandomNormalLike",
            1,
        ),
        (
            "A Div by a constant whose reciprocal overflows",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  k = Constant <value = float {1e-40}> ()
  y = Div(x, k)
}"#,
            "Div",
            1,
        ),
    ];
    let mut failures = check_guard_cases(cases);
    // Random ops are never merged: two identical RandomUniformLike nodes stay two.
    let (_, optimized) = optimize_text(
        r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  a = RandomUniformLike(x)
  b = RandomUniformLike(x)
  y = Sub(a, b)
}"#,
    );
    if count_op(&optimized, "RandomUniformLike") != 2 {
        failures.push("two RandomUniformLike nodes were merged".to_string());
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The guards of the rules of this library beyond issue 13's list: each model is one the
/// rule must not touch.
#[test]
fn guards_of_the_rule_library() {
    let two_lowest_masks = format!(
        "{}{ATTENTION_OVER_M}",
        r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,5,4] k, float[1,2,5,4] v, bool[3,5] a, bool[3,5] b) => (float[1,2,3,4] y) {
  zero = Constant <value = float {0.0}> ()
  low = Constant <value = float {-3.4028235e+38}> ()
  ma = Where(a, zero, low)
  mb = Where(b, zero, low)
  m = Add(ma, mb)
"#
    );
    let cases: &[GuardCase<'_>] = &[
        (
            "Relu of a size plus a constant that can wrap past the largest int64",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x) => (int64 y) {
  n = Size(x)
  b = Constant <value = int64 {9223372036854775807}> ()
  s = Add(n, b)
  y = Relu(s)
}"#,
            "Relu",
            1,
        ),
        (
            "Abs of a difference of two sizes",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x, float[M] z) => (int64 y) {
  a = Size(x)
  b = Size(z)
  d = Sub(a, b)
  y = Abs(d)
}"#,
            "Abs",
            1,
        ),
        (
            "torch's -1 guard over an index minus one, which can be -1",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,M] x) => (int64[N] y) {
  k = ArgMax <axis = 1, keepdims = 0> (x)
  one = Constant <value = int64 {1}> ()
  j = Sub(k, one)
  m = Constant <value = int64 {-1}> ()
  e = Equal(j, m)
  y = Where(e, one, j)
}"#,
            "Where",
            1,
        ),
        (
            "Relu of a size cast to int32, which can wrap",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x) => (int32 y) {
  n = Size(x)
  c = Cast <to = 6> (n)
  y = Relu(c)
}"#,
            "Relu",
            1,
        ),
        (
            "Pad with a negative (cropping) amount into Conv",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] x, float[3,2,3,3] w) => (float[1,3,2,3] y) {
  p = Constant <value = int64[8] {0, 0, -1, 0, 0, 0, 0, 0}> ()
  t = Pad(x, p)
  y = Conv(t, w)
}"#,
            "Pad",
            1,
        ),
        (
            "Pad on the channel axis into Conv",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,5,5] x, float[3,2,3,3] w) => (float[1,3,3,3] y) {
  p = Constant <value = int64[8] {0, 1, 0, 0, 0, 0, 0, 0}> ()
  t = Pad(x, p)
  y = Conv(t, w)
}"#,
            "Pad",
            1,
        ),
        (
            "A Mul on the last axis before a Conv",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,3,3] x, float[3,2,3,3] w) => (float[1,3,1,1] y) {
  s = Constant <value = float[3] {2.0, -0.5, 0.25}> ()
  m = Mul(x, s)
  y = Conv(m, w)
}"#,
            "Mul",
            1,
        ),
        (
            "A reduction then an Unsqueeze on another axis",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[3,1] y) {
  a = Constant <value = int64[1] {0}> ()
  u = Constant <value = int64[1] {1}> ()
  r = ReduceSum <keepdims = 0> (x, a)
  y = Unsqueeze(r, u)
}"#,
            "Unsqueeze",
            1,
        ),
        (
            "x times a HardSigmoid with the default alpha (not HardSwish)",
            r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] x) => (float[2,3] y) {
  h = HardSigmoid(x)
  y = Mul(x, h)
}"#,
            "HardSigmoid",
            1,
        ),
        (
            "Two Clips whose ranges overlap only in part keep the intersection",
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,3] y) {
  a = Constant <value = float {-1.0}> ()
  b = Constant <value = float {2.0}> ()
  c = Constant <value = float {1.0}> ()
  d = Constant <value = float {3.0}> ()
  t = Clip(x, a, b)
  y = Clip(t, c, d)
}"#,
            "Clip",
            1,
        ),
        (
            "rotate_half with cos and sin of Concat(f, f) fuses (the control of the two below)",
            ROTARY_HALF,
            "RotaryEmbedding",
            1,
        ),
        (
            "GroupNorm's export over a dynamic batch and length fuses (the Reshape back reads Shape)",
            GROUP_NORM_DYNAMIC,
            "GroupNormalization",
            1,
        ),
        (
            "GroupNorm's export with a scale on the last axis instead of the channel",
            r#"<ir_version: 10, opset_import: ["" : 21]>
g (float[2,4,4] x) => (float[2,4,4] y) {
  s = Constant <value = int64[3] {0, 2, -1}> ()
  one = Constant <value = float[2] {1.0, 1.0}> ()
  zero = Constant <value = float[2] {0.0, 0.0}> ()
  gm = Constant <value = float[4] {1.0, 2.0, 0.5, -1.0}> ()
  bt = Constant <value = float[4,1] {0.0, 0.1, -0.2, 0.3}> ()
  r = Reshape(x, s)
  n = InstanceNormalization(r, one, zero)
  sh = Shape(x)
  b = Reshape(n, sh)
  m = Mul(b, gm)
  y = Add(m, bt)
}"#,
            "InstanceNormalization",
            1,
        ),
        (
            "GroupNorm's export whose InstanceNormalization scales the groups",
            r#"<ir_version: 10, opset_import: ["" : 21]>
g (float[2,4,4] x) => (float[2,4,4] y) {
  s = Constant <value = int64[3] {0, 2, -1}> ()
  one = Constant <value = float[2] {1.0, 2.0}> ()
  zero = Constant <value = float[2] {0.0, 0.0}> ()
  gm = Constant <value = float[4,1] {1.0, 2.0, 0.5, -1.0}> ()
  bt = Constant <value = float[4,1] {0.0, 0.1, -0.2, 0.3}> ()
  r = Reshape(x, s)
  n = InstanceNormalization(r, one, zero)
  sh = Shape(x)
  b = Reshape(n, sh)
  m = Mul(b, gm)
  y = Add(m, bt)
}"#,
            "InstanceNormalization",
            1,
        ),
        (
            "rotate_half with cos and sin whose halves differ (Concat of two frequency tensors)",
            &ROTARY_HALF.replace("emb = Concat <axis = -1> (f, f)", "emb = Concat <axis = -1> (f, h)"),
            "Neg",
            1,
        ),
        (
            "rotate_half over a slice of the head fuses on the slice (a partial rotary dim)",
            &ROTARY_HALF
                .replace("float[B,3,2] f, float[B,3,2] h", "float[B,3,1] f, float[B,3,1] h")
                .replace("two = Constant <value = int64[1] {2}> ()", "two = Constant <value = int64[1] {1}> ()")
                .replace("x1 = Slice(x, zero, two, last)", "x1 = Slice(xh, zero, two, last)")
                .replace("x2 = Slice(x, two, big, last)", "x2 = Slice(xh, two, big, last)")
                .replace("  one = Constant", "  h2 = Constant <value = int64[1] {2}> ()\n  xh = Slice(x, zero, h2, last)\n  one = Constant")
                .replace("a = Mul(x, cu)", "a = Mul(xh, cu)")
                .replace("float[B,2,3,4] y", "float[B,2,3,2] y"),
            "RotaryEmbedding",
            1,
        ),
        (
            "GroupNorm's export below opset 21 (GroupNormalization-18 scales per group)",
            &GROUP_NORM_DYNAMIC.replace("\"\" : 21", "\"\" : 20"),
            "InstanceNormalization",
            1,
        ),
        (
            "A LayerNormalization written out at opset 13 keeps its Mul by ones and its Pow",
            LAYER_NORM_13,
            "Mul",
            1,
        ),
        (
            "The square of a written-out LayerNormalization stays a Pow (onnxruntime's fusion)",
            LAYER_NORM_13,
            "Pow",
            1,
        ),
        (
            "A Mul by ones of anything but a normalization goes",
            &LAYER_NORM_13.replace("y = Mul(n, g)", "y = Mul(d, g)"),
            "Mul",
            0,
        ),
        (
            "Softmax attention whose mask is a graph input (a row of -inf is NaN, Attention's 0)",
            r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,5,4] k, float[1,2,5,4] v, float[3,5] m) => (float[1,2,3,4] y) {
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul(q, kt)
  c = Constant <value = float {0.5}> ()
  d = Mul(s, c)
  a = Add(d, m)
  p = Softmax <axis = -1> (a)
  y = MatMul(p, v)
}"#,
            "Softmax",
            1,
        ),
        (
            "A float16 mask made in float from float16's lowest value, then cast, fuses",
            &F16_MASKED_ATTENTION.replace("LOW", "-65504.0"),
            "Attention",
            1,
        ),
        (
            "A float16 mask cast from float's lowest value holds -inf: Softmax stays",
            &F16_MASKED_ATTENTION.replace("LOW", "-3.4028234663852886e38"),
            "Softmax",
            1,
        ),
        (
            "K and V heads tiled (Unsqueeze at axis 1), not repeated in place as repeat_kv does",
            r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,4,3,8] q, float[1,2,5,8] k, float[1,2,5,8] v) => (float[1,4,3,8] y) {
  axes = Constant <value = int64[1] {1}> ()
  uk = Unsqueeze(k, axes)
  uv = Unsqueeze(v, axes)
  e = Constant <value = int64[5] {1, 2, 2, 5, 8}> ()
  r = Constant <value = int64[4] {1, 4, 5, 8}> ()
  ek = Expand(uk, e)
  ev = Expand(uv, e)
  rk = Reshape(ek, r)
  rv = Reshape(ev, r)
  y = Attention(q, rk, rv)
}"#,
            "Expand",
            2,
        ),
        (
            "ScatterND whose constant row indices are a permutation, not 0..n-1",
            r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[3,2] t, float[3,2] u) => (float[3,2] y) {
  i = Constant <value = int64[3,1] {1, 0, 2}> ()
  y = ScatterND(t, i, u)
}"#,
            "ScatterND",
            1,
        ),
        (
            "ScatterND over Range(0, 3) into 4 rows",
            r#"<ir_version: 8, opset_import: ["" : 18]>
g (float[4,2] t, float[3,2] u) => (float[4,2] y) {
  zero = Constant <value = int64 {0}> ()
  one = Constant <value = int64 {1}> ()
  n = Constant <value = int64 {3}> ()
  r = Range(zero, n, one)
  ax = Constant <value = int64[1] {-1}> ()
  i = Unsqueeze(r, ax)
  y = ScatterND(t, i, u)
}"#,
            "ScatterND",
            1,
        ),
        (
            "channels-first LayerNorm whose scale is per position, not per channel",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4,3] x) => (float[2,4,3] y) {
  ax = Constant <value = int64[1] {1}> ()
  two = Constant <value = float {2.0}> ()
  eps = Constant <value = float {0.00001}> ()
  g = Constant <value = float[4,3] {1.0, 2.0, 0.5, 1.25, 1.0, 2.0, 0.5, 1.25, 1.0, 2.0, 0.5, 1.25}> ()
  b = Constant <value = float[4,1] {0.0, 0.1, -0.2, 0.3}> ()
  m = ReduceMean <axes = [1]> (x)
  d = Sub(x, m)
  p = Pow(d, two)
  v = ReduceMean <axes = [1]> (p)
  ve = Add(v, eps)
  s = Sqrt(ve)
  n = Div(d, s)
  gm = Mul(n, g)
  y = Add(gm, b)
}"#,
            "ReduceMean",
            2,
        ),
        (
            "SDPA's NaN guard writing 1, not 0, where a row sees no key (the first row's mask is all -inf)",
            r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,5,4] k, float[1,2,5,4] v, bool[1,1,2,5] keep) => (float[1,2,3,4] y) {
  zero = Constant <value = float {0}> ()
  one = Constant <value = float {1}> ()
  ninf = Constant <value = float {-inf}> ()
  mk = Where(keep, zero, ninf)
  shape = Constant <value = int64[4] {1, 1, 1, 5}> ()
  none = Expand(ninf, shape)
  m = Concat <axis = 2> (none, mk)
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  c = Constant <value = float {0.5}> ()
  qs = Mul(q, c)
  s = MatMul(qs, kt)
  a = Add(s, m)
  p = Softmax <axis = -1> (a)
  nan = IsNaN(p)
  pz = Where(nan, one, p)
  y = MatMul(pz, v)
}"#,
            "Softmax",
            1,
        ),
        (
            "attention whose mask adds two lowest-float masks (the sum overflows to -inf)",
            &two_lowest_masks,
            "Softmax",
            1,
        ),
    ];
    let failures = check_guard_cases(cases);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Masked float16 attention whose mask is made in float (Where over a ConstantOfShape filled
/// with LOW) and cast to float16, as TorchScript exports of float16 decoders build it.
const F16_MASKED_ATTENTION: &str = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float16[1,2,3,4] q, float16[1,2,5,4] k, float16[1,2,5,4] v, bool[3,5] keep) => (float16[1,2,3,4] y) {
  sh = Constant <value = int64[2] {3, 5}> ()
  low = ConstantOfShape <value = float[1] {LOW}> (sh)
  zero = Constant <value = float {0.0}> ()
  mf = Where(keep, zero, low)
  m = Cast <to = 10> (mf)
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul(q, kt)
  cf = Constant <value = float {2.0}> ()
  c = Cast <to = 10> (cf)
  d = Div(s, c)
  a = Add(d, m)
  p = Softmax <axis = -1> (a)
  y = MatMul(p, v)
}"#;

/// A LayerNormalization written out, as exporters write it below opset 17, with an untrained
/// scale of ones (bert-tiny's).
const LAYER_NORM_13: &str = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3,4] x) => (float[N,3,4] y) {
  m = ReduceMean <axes = [-1]> (x)
  d = Sub(x, m)
  two = Constant <value = float {2.0}> ()
  p = Pow(d, two)
  v = ReduceMean <axes = [-1]> (p)
  eps = Constant <value = float {1e-5}> ()
  ve = Add(v, eps)
  s = Sqrt(ve)
  n = Div(d, s)
  g = Constant <value = float[4] {1.0, 1.0, 1.0, 1.0}> ()
  y = Mul(n, g)
}"#;

/// transformers' `apply_rotary_pos_emb` on a 4-D query with frequencies `f` (and an unused `h`).
const ROTARY_HALF: &str = r#"<ir_version: 11, opset_import: ["" : 23]>
g (float[B,2,3,4] x, float[B,3,2] f, float[B,3,2] h) => (float[B,2,3,4] y) {
  one = Constant <value = int64[1] {1}> ()
  zero = Constant <value = int64[1] {0}> ()
  two = Constant <value = int64[1] {2}> ()
  big = Constant <value = int64[1] {9223372036854775807}> ()
  last = Constant <value = int64[1] {-1}> ()
  emb = Concat <axis = -1> (f, f)
  c = Cos(emb)
  s = Sin(emb)
  cu = Unsqueeze(c, one)
  su = Unsqueeze(s, one)
  x1 = Slice(x, zero, two, last)
  x2 = Slice(x, two, big, last)
  nx2 = Neg(x2)
  rot = Concat <axis = -1> (nx2, x1)
  a = Mul(x, cu)
  b = Mul(rot, su)
  y = Add(a, b)
}"#;

/// torch's export of GroupNorm(2 groups, 4 channels) over a 3-D input of dynamic batch and length.
const GROUP_NORM_DYNAMIC: &str = r#"<ir_version: 10, opset_import: ["" : 21]>
g (float[N,4,L] x) => (float[N,4,L] y) {
  s = Constant <value = int64[3] {0, 2, -1}> ()
  one = Constant <value = float[2] {1.0, 1.0}> ()
  zero = Constant <value = float[2] {0.0, 0.0}> ()
  gm = Constant <value = float[4,1] {1.0, 2.0, 0.5, -1.0}> ()
  bt = Constant <value = float[1,4,1] {0.0, 0.1, -0.2, 0.3}> ()
  r = Reshape(x, s)
  n = InstanceNormalization <epsilon = 0.001> (r, one, zero)
  sh = Shape(x)
  b = Reshape(n, sh)
  m = Mul(b, gm)
  y = Add(m, bt)
}"#;

/// The generated version steps (loaded as rules/version/steps.rules) have no case files; each one's
/// first instance that the prover finds (a fired, agreeing draw, seeded) is written here as its
/// before and after, one snapshot for the file: the opset, the initializers and nodes of each
/// side.
#[test]
fn generated_version_steps_before_and_after() {
    let files = onnx_opt::load_rule_files(&all_rules()).expect("built-in rules check");
    let opts = onnx_prove::ProveOptions::default();
    let guards = onnx_egraph::GuardRegistry::default();
    let compact = |text: &str| -> String {
        let opset = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("opset_import: "))
            .unwrap_or_default()
            .trim_end_matches(',')
            .to_string();
        let mut body = Vec::new();
        let mut seen_signature = false;
        for l in text.lines() {
            let t = l.trim();
            if !seen_signature {
                seen_signature = t.contains("=>") && !t.starts_with('<') && !t.starts_with('#');
                continue;
            }
            if t.is_empty() || t == "{" || t == "}" {
                continue;
            }
            body.push(t.to_string());
        }
        format!("{opset} {}", body.join(" ; "))
    };
    let mut out = String::new();
    let mut missing = Vec::new();
    let steps = files
        .iter()
        .filter(|f| f.path == "rules/version/steps.rules")
        .flat_map(|f| &f.rules);
    for rule in steps {
        match onnx_prove::first_firing(rule, &guards, &opts) {
            Some((before, after)) => {
                out.push_str(&format!(
                    "{}\n  before: {}\n  after:  {}\n",
                    rule.name,
                    compact(&before),
                    compact(&after)
                ));
            }
            None => missing.push(rule.name.clone()),
        }
    }
    assert!(missing.is_empty(), "no firing instance: {missing:?}");
    insta::assert_snapshot!(out);
}

/// `cast_noop` reads the input's type wherever it is known: from inference, inside an If's
/// branches, and from value_info where no inference runs (a custom-domain op's output).
#[test]
fn cast_noop_sees_types_from_inference_subgraphs_and_value_info() {
    let cases = [
        (
            "inside both branches of an If",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, bool c) => (float[2,3] y) {
  y = If(c) <then_branch = t () => (float[2,3] a) {
      e = Exp(x)
      a = Cast <to = 1> (e)
    }, else_branch = f () => (float[2,3] b) {
      n = Neg(x)
      m = Cast <to = 1> (n)
      b = Cast <to = 1> (m)
    }>
}"#,
        ),
        (
            "after a custom-domain op typed by value_info",
            r#"<ir_version: 8, opset_import: ["" : 17, "com.foo" : 1]>
g (float[2,3] x) => (float[2,3] y) <float[2,3] u> {
  u = com.foo.Bar(x)
  y = Cast <to = 1> (u)
}"#,
        ),
        (
            "after a custom-domain op typed by value_info in a branch",
            r#"<ir_version: 8, opset_import: ["" : 17, "com.foo" : 1]>
g (float[2,3] x, bool c) => (float[2,3] y) {
  y = If(c) <then_branch = t () => (float[2,3] a) <float[2,3] u> {
      u = com.foo.Bar(x)
      a = Cast <to = 1> (u)
    }, else_branch = f () => (float[2,3] b) {
      b = Neg(x)
    }>
}"#,
        ),
        (
            "a bool Cast to bool after Equal",
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[2,3] z) => (bool[2,3] y) {
  e = Equal(x, z)
  y = Cast <to = 9> (e)
}"#,
        ),
    ];
    let mut failures = Vec::new();
    for (what, text) in cases {
        let (before, after) = optimize_text(text);
        let (b, a) = (count_op(&before, "Cast"), count_op(&after, "Cast"));
        if b == 0 || a != 0 {
            failures.push(format!("{what}: {b} Cast before, {a} after (0 wanted)"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// An Attention given a past always writes its present outputs, though the graph reads only its
/// first: onnxruntime's CPU kernel refuses `past_key` with no `present_key` (onnxscript's GQA
/// fusion tests output no present).
#[test]
fn attention_with_a_past_writes_its_present_outputs() {
    let text = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[batch,4,seq,8] q, float[batch,2,seq,8] k, float[batch,2,seq,6] v, float[batch,2,past,8] past_k, float[batch,2,past,6] past_v, float[seq,total] m) => (float[batch,4,seq,6] y) {
  present_k = Concat <axis = -2> (past_k, k)
  present_v = Concat <axis = -2> (past_v, v)
  y = Attention <scale = 0.25> (q, present_k, present_v, m)
}"#;
    let (_, after) = optimize_text(text);
    let g = after.graph.as_ref().expect("a graph");
    let attention: Vec<_> = g
        .node
        .iter()
        .filter(|n| n.op_type.as_deref() == Some("Attention"))
        .collect();
    assert_eq!(attention.len(), 1, "one Attention");
    let a = attention[0];
    assert_eq!(
        a.input.len(),
        6,
        "past_key and past_value are inputs: {:?}",
        a.input
    );
    assert_eq!(a.output.len(), 3, "present outputs written: {:?}", a.output);
    assert!(a.output.iter().all(|o| !o.is_empty()), "{:?}", a.output);
    assert_eq!(count_op(&after, "Concat"), 0);
}

/// The end of a text model: Softmax(Q @ K^T * 0.5 + m) @ V, over the q, k, v and m it defines.
const ATTENTION_OVER_M: &str = r#"  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  c = Constant <value = float {0.5}> ()
  s = MatMul(q, kt)
  sc = Mul(s, c)
  sm = Add(sc, m)
  p = Softmax <axis = -1> (sm)
  y = MatMul(p, v)
}"#;

/// `finite` follows the arithmetic exporters build causal masks with: the lowest float times a
/// 0/1 factor (transformers' `causal_mask *= arange > cache_position`), scattered into with
/// ScatterND and cut to a triangle; attention over such a mask fuses.
#[test]
fn attention_fuses_over_a_mask_scaled_scattered_and_triangular() {
    let text = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,5,4] k, float[1,2,5,4] v, bool[3,5] f, float[1,5] u) => (float[1,2,3,4] y) {
  sh = Constant <value = int64[2] {3, 5}> ()
  full = ConstantOfShape <value = float[1] {-3.4028235e+38}> (sh)
  tri = Trilu <upper = 1> (full)
  ff = Cast <to = 1> (f)
  scaled = Mul(tri, ff)
  idx = Constant <value = int64[1,1] {1}> ()
  zero = Constant <value = float {0.0}> ()
  lowu = Constant <value = float {-3.4028235e+38}> ()
  keep = Greater(u, zero)
  row = Where(keep, zero, lowu)
  m = ScatterND(scaled, idx, row)
"#;
    let (before, after) = optimize_text(&format!("{text}{ATTENTION_OVER_M}"));
    assert_eq!(count_op(&after, "Attention"), 1, "the attention fuses");
    assert_eq!(count_op(&after, "Softmax"), 0);
    let same = compare_models(&before, &after, 3, &BTreeMap::new(), Tolerance::default());
    assert!(matches!(same, Ok(None)), "{same:?}");
}

/// Keys and values whose sequence dim shape inference cannot name (DINOv2's, computed from the
/// image size; here a Reshape with -1 of a named length) fuse: the head size and the key count
/// are the MatMuls' contracted axes, equal wherever the original runs, so no guard asks for them.
#[test]
fn attention_fuses_over_keys_of_unknown_length() {
    let text = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,L] kf, float[1,2,L] vf) => (float[1,2,3,4] y) {
  sh = Constant <value = int64[4] {1, 2, -1, 4}> ()
  k = Reshape(kf, sh)
  v = Reshape(vf, sh)
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  c = Constant <value = float {0.5}> ()
  s = MatMul(q, kt)
  sc = Mul(s, c)
  p = Softmax <axis = -1> (sc)
  y = MatMul(p, v)
}"#;
    let (before, after) = optimize_text(text);
    assert_eq!(count_op(&after, "Attention"), 1, "the attention fuses");
    assert_eq!(count_op(&after, "Softmax"), 0);
    let dims = BTreeMap::from([("L".to_string(), 20)]);
    let same = compare_models(&before, &after, 3, &dims, Tolerance::default());
    assert!(matches!(same, Ok(None)), "{same:?}");
}

/// A scale exported as a one-element `[1]` tensor (GPT-2's through Optimum) computes like a
/// scalar one: the attention fuses with the scale as Attention's attribute.
#[test]
fn attention_fuses_with_a_scale_of_shape_one() {
    let text = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,3,4] q, float[1,2,5,4] k, float[1,2,5,4] v, bool[3,5] keep) => (float[1,2,3,4] y) {
  zero = Constant <value = float {0.0}> ()
  low = Constant <value = float {-3.4028235e+38}> ()
  m = Where(keep, zero, low)
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  c = Constant <value = float[1] {2.0}> ()
  s = MatMul(q, kt)
  sc = Div(s, c)
  sm = Add(sc, m)
  p = Softmax <axis = -1> (sm)
  y = MatMul(p, v)
}"#;
    let (before, after) = optimize_text(text);
    assert_eq!(count_op(&after, "Attention"), 1, "the attention fuses");
    let same = compare_models(&before, &after, 3, &BTreeMap::new(), Tolerance::default());
    assert!(matches!(same, Ok(None)), "{same:?}");
}
