//! Version conversion cases: `tests/convert/cases/*.onnxtxt`, small models in the ONNX text
//! syntax, each with a header line `# to: 9 13` (every opset it must convert to, checked against
//! the original in the interpreter) and optionally `# refused: 7` (opsets where conversion must
//! be the clean "cannot express" error, naming the node), and `# dims: H=7` (values of symbolic
//! dims for the check's random inputs). The rest of the header says what the case covers.

use std::path::{Path, PathBuf};

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/convert/cases");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnxtxt"))
        .collect();
    v.sort();
    v
}

/// The opsets a header line `# KEY: a b c` lists.
fn header_opsets(text: &str, key: &str) -> Vec<i64> {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .filter_map(|l| {
            l.strip_prefix('#')?
                .trim()
                .strip_prefix(key)?
                .strip_prefix(':')
        })
        .flat_map(|rest| rest.split_whitespace().map(|t| t.parse::<i64>().unwrap()))
        .collect()
}

/// An error with its sources.
fn chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    msg
}

#[test]
fn conversion_cases_convert_and_compute_the_same() {
    let mut failures = Vec::new();
    let mut n = 0;
    for path in cases() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let to = header_opsets(&text, "to");
        let refused = header_opsets(&text, "refused");
        assert!(
            !to.is_empty() || !refused.is_empty(),
            "{name}: no `# to:` or `# refused:` line"
        );
        let model = onnx_opt::parse_text(&text).unwrap();
        let dims: Vec<(String, i64)> = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(|l| l.strip_prefix('#')?.trim().strip_prefix("dims:"))
            .flat_map(|rest| rest.split_whitespace())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect();
        for target in to {
            n += 1;
            let mut converter = onnx_opt::Optimizer::converter(target).check(5);
            for (k, v) in &dims {
                converter = converter.dim(k, *v);
            }
            match converter.optimize(&model) {
                Ok(out) => {
                    let proto = out.model.to_proto();
                    let opset = proto
                        .opset_import
                        .iter()
                        .find(|o| o.domain.as_deref().unwrap_or("").is_empty())
                        .and_then(|o| o.version);
                    if opset != Some(target) {
                        failures.push(format!("{name} -> {target}: written at opset {opset:?}"));
                    }
                }
                Err(e) => failures.push(format!("{name} -> {target}: {}", chain(&e))),
            }
        }
        for target in refused {
            n += 1;
            match onnx_opt::Optimizer::converter(target).optimize(&model) {
                Err(onnx_opt::Error::Optimize {
                    source: onnx_egraph::EGraphError::NotExpressible { nodes, .. },
                    ..
                }) if !nodes.is_empty() => {}
                Err(e) => {
                    failures.push(format!("{name} -> {target}: another error: {}", chain(&e)))
                }
                Ok(_) => failures.push(format!("{name} -> {target}: converted, but must not")),
            }
        }
    }
    assert!(n > 0, "no conversion case ran");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A version step runs only toward the target: converting ReduceMean-11 to opset 18 steps it up
/// through 13 to 18 (`axes` becomes an input) and never down to 1; without a target no step
/// runs at all. (Relu, whose versions differ only in their types, has no steps: the rebinding
/// carries it.)
#[test]
fn version_steps_run_toward_the_target_only() {
    let text = r#"<ir_version: 6, opset_import: ["" : 11]>
g (float[2, 3] x) => (float[2, 1] y) {
   y = ReduceMean <axes = [1]> (x)
}"#;
    let model = onnx_opt::parse_text(text).unwrap();
    let out = onnx_opt::Optimizer::converter(18).optimize(&model).unwrap();
    let fired: Vec<&String> = out
        .report
        .egraph
        .main
        .phases
        .iter()
        .filter(|p| p.name == "version")
        .flat_map(|p| p.firings.keys())
        .collect();
    assert_eq!(
        fired,
        ["reduce_mean_11_to_13", "reduce_mean_13_to_18"],
        "{fired:?}"
    );
    assert_eq!(out.model.opset_version(""), Some(18));
    let plain = onnx_opt::Optimizer::new().optimize(&model).unwrap();
    let steps: Vec<&String> = plain
        .report
        .egraph
        .main
        .phases
        .iter()
        .flat_map(|p| p.firings.keys())
        .filter(|r| r.contains("_to_"))
        .collect();
    assert!(steps.is_empty(), "{steps:?}");
}

/// The models torch's dynamo exporter writes at opset 18 (`tests/models/torch/`, made by
/// `scripts/export_torch_models.py`) converted down to 17, 14, 13, 11 and 9, each checked
/// against the original in the interpreter; the table of outcomes is a snapshot.
#[test]
fn torch_exported_models_convert_down() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/torch");
    let mut table = String::new();
    for name in ["cnn", "bert", "llama"] {
        let path = dir.join(format!("{name}_opset18.onnx"));
        let model = onnx_opt::load(&path).unwrap();
        for target in [17, 14, 13, 11, 9] {
            let outcome = match onnx_opt::Optimizer::converter(target)
                .check(3)
                .dim("batch", 2)
                .dim("seq", 5)
                .optimize(&model)
            {
                Ok(out) => {
                    assert_eq!(out.model.opset_version(""), Some(target));
                    format!("ok, {} nodes", out.report.nodes_after)
                }
                Err(e) => chain(&e).lines().next().unwrap_or_default().to_string(),
            };
            table.push_str(&format!("{name} -> {target}: {outcome}\n"));
        }
    }
    insta::assert_snapshot!(table);
}

/// A TorchScript export with model-local functions (`export_modules_as_functions`): down to 11
/// the function is converted in place (its LayerNormalization written out), kept and called
/// twice, and the outputs are checked.
#[test]
fn torch_exported_local_functions_convert_in_place() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/torch/blocks_functions_opset18.onnx");
    let model = onnx_opt::load(&path).unwrap();
    for target in [17, 14, 13, 11] {
        let out = onnx_opt::Optimizer::converter(target)
            .check(3)
            .optimize(&model)
            .unwrap_or_else(|e| panic!("-> {target}: {}", chain(&e)));
        assert_eq!(
            out.report
                .passes
                .count("convert-functions", "functions_converted"),
            1,
            "-> {target}"
        );
        assert_eq!(
            out.report
                .passes
                .count("convert-functions", "inlined_calls"),
            0,
            "-> {target}"
        );
        let f = &out.model.functions[0];
        let ops: Vec<&str> = f.body.nodes.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(
            ops.contains(&"LayerNormalization"),
            target >= 17,
            "-> {target}: {ops:?}"
        );
        assert!(f
            .opset_imports
            .iter()
            .any(|o| o.domain.is_empty() && o.version == target));
        let calls = out
            .model
            .graph
            .nodes
            .iter()
            .filter(|n| n.op_type.as_str() == "Block")
            .count();
        assert_eq!(calls, 2, "-> {target}");
    }
}

/// Local functions change only when the opset changes. A function its calls type is converted
/// in place (its body at the target, the function kept, with a subgraph in the body too); one
/// with an attribute reference is inlined (with a subgraph too); a recursive one is refused by
/// name.
#[test]
fn local_functions_convert_in_place_or_inline_or_refuse_by_name() {
    let with_fn = |body: &str, attrs: &str| {
        format!(
            r#"<ir_version: 9, opset_import: ["" : 18, "local" : 1]>
g (float[2,3] x, bool c) => (float[2,3] y) {{
  y = local.F {attrs} (x, c)
}}
<domain: "local", opset_import: ["" : 18, "local" : 1]>
F {attrs} (a, c) => (b) {{
{body}
}}"#
        )
    };
    let default_opset = |f: &onnx_ir::Function| {
        f.opset_imports
            .iter()
            .find(|o| o.domain.is_empty())
            .map(|o| o.version)
    };
    // Same opset: nothing changes, the function stays.
    let plain = onnx_opt::parse_text(&with_fn("  b = Relu (a)", "")).unwrap();
    let out = onnx_opt::Optimizer::converter(18).optimize(&plain).unwrap();
    assert_eq!(
        out.report
            .passes
            .count("convert-functions", "inlined_calls"),
        0
    );
    assert_eq!(
        out.report
            .passes
            .count("convert-functions", "functions_converted"),
        0
    );
    assert_eq!(out.model.functions.len(), 1);
    // Another opset: converted in place; the body imports the target.
    let out = onnx_opt::Optimizer::converter(13).optimize(&plain).unwrap();
    assert_eq!(
        (
            out.report
                .passes
                .count("convert-functions", "functions_converted"),
            out.report
                .passes
                .count("convert-functions", "inlined_calls")
        ),
        (1, 0)
    );
    assert_eq!(out.model.functions.len(), 1);
    assert_eq!(default_opset(&out.model.functions[0]), Some(13));
    // A subgraph in the body: converted in place with it (If-19 down to If-13).
    let sub = onnx_opt::parse_text(&with_fn(
        "  b = If (c) <then_branch = g1 () => (float[2,3] t) { t = Relu (a) }, else_branch = g2 () => (float[2,3] e) { e = Neg (a) }>",
        "",
    ))
    .unwrap();
    let out = onnx_opt::Optimizer::converter(13)
        .check(5)
        .optimize(&sub)
        .unwrap();
    assert_eq!(
        out.report
            .passes
            .count("convert-functions", "functions_converted"),
        1
    );
    assert_eq!(default_opset(&out.model.functions[0]), Some(13));
    // An attribute reference: its value is the caller's, so the calls are inlined instead.
    let with_ref = onnx_opt::parse_text(&with_fn(
        "  k = Constant <value_float: float = @alpha> ()\n  b = Mul (a, k)",
        "<alpha: float = 2.0>",
    ))
    .unwrap();
    let out = onnx_opt::Optimizer::converter(13)
        .check(5)
        .optimize(&with_ref)
        .unwrap();
    assert_eq!(
        (
            out.report
                .passes
                .count("convert-functions", "functions_converted"),
            out.report
                .passes
                .count("convert-functions", "inlined_calls")
        ),
        (0, 1)
    );
    assert!(out.model.functions.is_empty());
    // An attribute reference and a subgraph: inlined, the branch renamed with the body (it
    // reads `a` and `k` by their new names) and its own reference resolved.
    let both = onnx_opt::parse_text(&with_fn(
        "  k = Constant <value_float: float = @alpha> ()\n  b = If (c) <then_branch = g1 () => (float[2,3] t) { t = Mul (a, k) }, else_branch = g2 () => (float[2,3] e) { s = Constant <value_float: float = @alpha> ()\n e = Sub (a, s) }>",
        "<alpha: float = 2.0>",
    ))
    .unwrap();
    let out = onnx_opt::Optimizer::converter(13)
        .check(5)
        .optimize(&both)
        .unwrap();
    assert_eq!(
        (
            out.report
                .passes
                .count("convert-functions", "functions_converted"),
            out.report
                .passes
                .count("convert-functions", "inlined_calls")
        ),
        (0, 1)
    );
    // Recursion: refused up front by the checker, naming the cycle.
    let rec = onnx_opt::parse_text(&with_fn("  b = local.F (a, c)", "")).unwrap();
    let err = onnx_opt::Optimizer::converter(13)
        .optimize(&rec)
        .unwrap_err();
    let msg = chain(&err);
    assert!(
        msg.contains("model-local functions call each other in a cycle: local:F -> local:F"),
        "{msg}"
    );
}

/// Converting up lands on the target's fused ops: a LayerNormalization written out at opset 13
/// becomes LayerNormalization at 17, and the erf form of Gelu becomes Gelu at 20; below the
/// opset that introduced an op, the pattern stays. `optimize --target-opset` fuses the same way.
#[test]
fn converting_up_fuses_into_the_targets_ops() {
    let text = r#"<ir_version: 7, opset_import: ["" : 13]>
g (float[2,8] x, float[8] gamma, float[8] beta) => (float[2,8] y, float[2,8] z) {
  mean = ReduceMean <axes = [-1]> (x)
  d = Sub (x, mean)
  two = Constant <value = float {2}> ()
  sq = Pow (d, two)
  var = ReduceMean <axes = [-1]> (sq)
  eps = Constant <value = float {1e-5}> ()
  ve = Add (var, eps)
  sd = Sqrt (ve)
  n = Div (d, sd)
  g = Mul (n, gamma)
  y = Add (g, beta)
  half = Constant <value = float {0.5}> ()
  one = Constant <value = float {1}> ()
  r2 = Constant <value = float {1.4142135623730951}> ()
  xh = Mul (x, half)
  xs = Div (x, r2)
  e = Erf (xs)
  e1 = Add (e, one)
  z = Mul (xh, e1)
}"#;
    let model = onnx_opt::parse_text(text).unwrap();
    let count =
        |m: &onnx_ir::Model, op: &str| m.graph.nodes.iter().filter(|n| n.op_type == op).count();
    for (target, ln, gelu) in [(16, 0, 0), (17, 1, 0), (20, 1, 1)] {
        let out = onnx_opt::Optimizer::converter(target)
            .check(3)
            .optimize(&model)
            .unwrap();
        assert_eq!(out.model.opset_version(""), Some(target));
        assert_eq!(count(&out.model, "LayerNormalization"), ln, "to {target}");
        assert_eq!(count(&out.model, "Gelu"), gelu, "to {target}");
        let optimized = onnx_opt::Optimizer::new()
            .target_opset(target)
            .check(3)
            .optimize(&model)
            .unwrap();
        assert_eq!(
            count(&optimized.model, "LayerNormalization"),
            ln,
            "optimize to {target}"
        );
        assert_eq!(
            count(&optimized.model, "Gelu"),
            gelu,
            "optimize to {target}"
        );
    }
}

/// The backend node tests the interpreter passes (its manifest), each converted to the
/// neighbouring opsets (one below, one above) and down to the lowest opset its ops exist at
/// (the largest first version among its default-domain ops), every result checked against the
/// original on the test's own data sets. A conversion is written and equal, or refused with
/// the "cannot express" error; a result that differs fails the test. The table of outcomes
/// per kind of target, and the tests with another error, are a snapshot.
#[test]
fn backend_node_tests_convert_to_neighbouring_and_lowest_opsets() {
    let shared = onnx_testdata::require_shared!();
    let manifest = insta::Snapshot::from_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "crates/onnx-ref/tests/interpreter/snapshots/interpreter__conformance__manifest.snap",
    ))
    .unwrap()
    .as_text()
    .map(|t| t.to_string())
    .unwrap();
    let latest = onnx_schema::registry().max_opset("").unwrap();
    let mut counts: std::collections::BTreeMap<(&str, &str), usize> = Default::default();
    let mut others = Vec::new();
    let mut wrong = Vec::new();
    let mut refused_up = Vec::new();
    for line in manifest.lines().filter(|l| l.starts_with("node/")) {
        let dir = shared.join("onnx-backend").join(line.trim());
        let Ok(model) = onnx_opt::load(dir.join("model.onnx")) else {
            continue;
        };
        if onnx_ir::check_model(&model).is_err() {
            continue;
        }
        let Some(opset) = model.opset_version("") else {
            continue;
        };
        let lowest = model
            .graph
            .nodes
            .iter()
            .filter(|n| n.domain.is_empty() || n.domain.as_str() == "ai.onnx")
            .filter_map(|n| {
                onnx_schema::registry()
                    .versions("", &n.op_type)
                    .iter()
                    .map(|s| s.since_version)
                    .min()
            })
            .max()
            .unwrap_or(1);
        let mut targets = vec![("one below", opset - 1), ("one above", opset + 1)];
        if lowest < opset - 1 {
            targets.push(("lowest", lowest));
        }
        for (kind, target) in targets {
            if target < 1 || target > latest {
                continue;
            }
            let outcome = match onnx_opt::Optimizer::converter(target)
                .check(0)
                .check_data_dir(&dir)
                .optimize(&model)
            {
                Ok(out) => {
                    assert_eq!(out.model.opset_version(""), Some(target), "{line}");
                    "converted, equal on its data"
                }
                Err(onnx_opt::Error::Optimize {
                    source: onnx_egraph::EGraphError::NotExpressible { .. },
                    ..
                }) => {
                    if kind == "one above" {
                        refused_up
                            .push(format!("{} -> {target}", line.trim_start_matches("node/")));
                    }
                    "refused: cannot express"
                }
                Err(onnx_opt::Error::Mismatch(m)) => {
                    wrong.push(format!("{line} -> {target}: {m}"));
                    "DIFFERENT"
                }
                Err(e) => {
                    let msg = chain(&e);
                    others.push(format!(
                        "{} -> {target}: {}",
                        line.trim_start_matches("node/"),
                        msg.lines().next().unwrap_or_default()
                    ));
                    "another error"
                }
            };
            *counts.entry((kind, outcome)).or_default() += 1;
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let mut table = String::new();
    for ((kind, outcome), n) in &counts {
        table.push_str(&format!("{kind}: {outcome}: {n}\n"));
    }
    table.push_str("\nrefused one above:\n");
    for o in &refused_up {
        table.push_str(&format!("{o}\n"));
    }
    table.push_str("\nanother error:\n");
    for o in &others {
        table.push_str(&format!("{o}\n"));
    }
    insta::assert_snapshot!(table);
}
