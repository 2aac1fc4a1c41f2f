//! Model-local functions optimized inside (`optimize-functions`): a function inlining makes no
//! larger goes inline, every other body called from the main graph is optimized as a graph of
//! its own and kept when that leaves it fewer nodes, and the check runs the calls through the
//! new bodies. Bodies that cannot be typed by their calls stay as they are.

use onnx_opt::{Optimized, Optimizer};

fn optimize(text: &str) -> Optimized {
    let model = onnx_opt::parse_text(text).expect("test model parses");
    let out = Optimizer::new()
        .check(5)
        .optimize(&model)
        .expect("optimizes");
    assert!(out.report.check_trials > 0, "the check did not run");
    assert_eq!(out.report.check_skipped, None);
    // What is written is a model the checker accepts.
    onnx_ir::check_model(&out.model).expect("the output passes the checker");
    out
}

fn body_ops(out: &Optimized, name: &str) -> Vec<String> {
    let f = out
        .model
        .functions
        .iter()
        .find(|f| f.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("function {name} is gone"));
    f.body
        .nodes_in_order()
        .map(|(_, n)| n.op_type.to_string())
        .collect()
}

fn main_ops(out: &Optimized) -> Vec<String> {
    out.model
        .graph
        .nodes_in_order()
        .map(|(_, n)| n.op_type.to_string())
        .collect()
}

fn count(out: &Optimized, what: &str) -> usize {
    out.report.passes.count("optimize-functions", what)
}

/// A body with a foldable product, a Transpose pair and an Identity, called twice.
const BLOCK_TWICE: &str = r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x) => (float[2,3] y) {
   a = this.Block (x)
   y = this.Block (a)
}
<domain: "this", opset_import: ["" : 19]>
Block (x) => (r)
{
   one = Constant <value_float: float = 1.0> ()
   two = Constant <value_float: float = 2.0> ()
   s = Mul (one, two)
   t = Mul (x, s)
   u = Identity (t)
   v = Transpose <perm: ints = [1, 0]> (u)
   w = Transpose <perm: ints = [1, 0]> (v)
   r = Add (w, x)
}"#;

#[test]
fn a_body_called_twice_is_optimized_in_place_and_checked() {
    let out = optimize(BLOCK_TWICE);
    assert_eq!(count(&out, "functions_optimized"), 1);
    assert_eq!(count(&out, "inlined_calls"), 0);
    assert_eq!(main_ops(&out), ["Block", "Block"]);
    assert_eq!(body_ops(&out, "Block"), ["Constant", "Mul", "Add"]);
}

/// onnxscript's issue #2673: a constant folded inside a function must be a Constant node there
/// (a function has no initializers), not an initializer of the main graph the body cannot see.
#[test]
fn a_constant_folded_in_a_body_is_a_constant_node_of_the_body() {
    let called = |calls: &str| {
        format!(
            r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x) => (float[2,3] y) {{
{calls}
}}
<domain: "this", opset_import: ["" : 19]>
function (x) => (return_val)
{{
   tmp = Constant <value_int: int = 1> ()
   tmp_0 = Cast <to: int = 1> (tmp)
   return_val = Sub (tmp_0, x)
}}"#
        )
    };
    // Called twice: kept, its Cast folded into a float Constant inside the body.
    let out = optimize(&called(
        "   a = this.function (x)\n   y = this.function (a)",
    ));
    assert_eq!(count(&out, "functions_optimized"), 1);
    assert_eq!(body_ops(&out, "function"), ["Constant", "Sub"]);
    assert!(out.model.graph.initializers.is_empty());
    // Called once: inlining is no larger, so the call goes and the graph folds around it.
    let out = optimize(&called("   y = this.function (x)"));
    assert_eq!(count(&out, "inlined_calls"), 1);
    assert!(out.model.functions.is_empty());
    assert_eq!(main_ops(&out), ["Sub"]);
}

/// A body that reads its caller's attribute (`@alpha`) is optimized with the value bound: one
/// function where every call gives the same value (the default stands in for a call that gives
/// none), a bound copy per other value; each keeps the attribute, so the calls stay valid. A
/// body that binding does not make smaller stays as it was.
#[test]
fn a_body_with_attribute_references_is_optimized_per_binding() {
    let scale = |a: &str, b: &str| {
        format!(
            r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x) => (float[2,3] y) {{
   a = this.Scale {a} (x)
   y = this.Scale {b} (a)
}}
<domain: "this", opset_import: ["" : 19]>
Scale <alpha: float = 3.0> (x) => (r)
{{
   k = Constant <value_float: float = @alpha> ()
   u = Identity (x)
   r = Mul (u, k)
}}"#
        )
    };
    // Both give 3.0 (the second by the default): bound and optimized.
    let out = optimize(&scale("<alpha: float = 3.0>", ""));
    assert_eq!(count(&out, "functions_optimized"), 1);
    assert_eq!(count(&out, "functions_bound"), 1);
    assert_eq!(body_ops(&out, "Scale"), ["Constant", "Mul"]);
    assert_eq!(main_ops(&out), ["Scale", "Scale"]);
    let f = &out.model.functions[0];
    assert_eq!(
        f.attribute_protos.len(),
        1,
        "the function keeps its attribute"
    );
    // 3.0 and 2.0: a bound copy for the second call, both optimized.
    let out = optimize(&scale("<alpha: float = 3.0>", "<alpha: float = 2.0>"));
    assert_eq!(count(&out, "functions_optimized"), 2);
    assert_eq!(count(&out, "functions_bound"), 1);
    assert_eq!(main_ops(&out), ["Scale", "Scale__bound_1"]);
    for name in ["Scale", "Scale__bound_1"] {
        assert_eq!(body_ops(&out, name), ["Constant", "Mul"]);
    }
    // A body binding leaves as large stays with its reference, and its calls call it.
    let plain = |a: &str, b: &str| {
        format!(
            r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x) => (float[2,3] y) {{
   a = this.Scale {a} (x)
   y = this.Scale {b} (a)
}}
<domain: "this", opset_import: ["" : 19]>
Scale <alpha: float = 3.0> (x) => (r)
{{
   k = Constant <value_float: float = @alpha> ()
   s = Sin (x)
   r = Mul (s, k)
}}"#
        )
    };
    let out = optimize(&plain("<alpha: float = 3.0>", "<alpha: float = 2.0>"));
    assert_eq!(count(&out, "functions_bound"), 0);
    assert_eq!(main_ops(&out), ["Scale", "Scale"]);
    assert_eq!(out.model.functions.len(), 1);
    let k = out.model.functions[0]
        .body
        .nodes_in_order()
        .next()
        .unwrap()
        .1;
    assert!(k.attributes[0].ref_attr_name().is_some(), "{k:?}");
}

/// Bodies that cannot be typed by their calls stay as they were: one called inside a
/// subgraph, one whose calls disagree on the element type.
#[test]
fn bodies_their_calls_do_not_type_are_kept() {
    let in_branch = r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x, bool c) => (float[2,3] y) {
   a = this.Twice (x)
   y = If (c) <then_branch = g1 () => (float[2,3] t) { t = this.Twice (a) }, else_branch = g2 () => (float[2,3] e) { e = Neg (a) }>
}
<domain: "this", opset_import: ["" : 19]>
Twice (x) => (r)
{
   u = Identity (x)
   v = Add (u, x)
   r = Abs (v)
}"#;
    let out = optimize(in_branch);
    assert_eq!(count(&out, "functions_optimized"), 0);
    assert_eq!(body_ops(&out, "Twice"), ["Identity", "Add", "Abs"]);

    let two_types = r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x, double[2,3] d) => (float[2,3] y, double[2,3] z) {
   y = this.Twice (x)
   z = this.Twice (d)
   w = this.Twice (y)
}
<domain: "this", opset_import: ["" : 19]>
Twice (x) => (r)
{
   u = Identity (x)
   v = Add (u, x)
   r = Abs (v)
}"#;
    let out = optimize(two_types);
    assert_eq!(count(&out, "functions_optimized"), 0);
    assert_eq!(body_ops(&out, "Twice"), ["Identity", "Add", "Abs"]);
}

/// A conversion converts bodies (`convert-functions`); `optimize-functions` does not run,
/// even in a pipeline that lists it.
#[test]
fn a_conversion_does_not_run_the_pass() {
    let model = onnx_opt::parse_text(BLOCK_TWICE).unwrap();
    let out = Optimizer::new().target_opset(18).optimize(&model).unwrap();
    let run = out
        .report
        .passes
        .get("optimize-functions")
        .expect("in the pipeline");
    assert!(!run.ran);
    assert_eq!(
        out.report
            .passes
            .count("convert-functions", "functions_converted"),
        1
    );
}

/// A TorchScript export with `export_modules_as_functions` (`tests/models/torch/
/// attn_functions_opset18.onnx`, made by `scripts/export_torch_models.py`): one self-attention
/// function called twice, its view shapes read from `x.size()` with batch and sequence dynamic.
/// Its body, typed by the calls, loses the shape arithmetic; the function stays, called twice.
#[test]
fn a_torchscript_exported_function_body_loses_its_shape_arithmetic() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/torch/attn_functions_opset18.onnx");
    let model = onnx_opt::load(&path).unwrap();
    let before = model.functions[0].body.nodes_in_order().count();
    let out = Optimizer::new().check(5).optimize(&model).unwrap();
    assert!(out.report.check_trials > 0);
    assert_eq!(count(&out, "functions_optimized"), 1);
    assert_eq!(
        main_ops(&out),
        ["SelfAttention", "SelfAttention", "MatMul", "Add"]
    );
    let ops = body_ops(&out, "SelfAttention");
    assert!(
        ops.len() * 2 < before,
        "{before} nodes before, {} after: {ops:?}",
        ops.len()
    );
    for gone in ["Shape", "Gather", "Unsqueeze", "Concat", "Sqrt", "Cast"] {
        assert!(!ops.iter().any(|o| o == gone), "{gone} left: {ops:?}");
    }
}

/// The TorchScript exporter passes a LayerNorm epsilon that differs between module instances
/// as an attribute of the function (`tests/models/torch/eps_functions_opset17.onnx`: three
/// calls, two epsilons): the body is optimized bound (its product by 1.0 goes), the function
/// for the first epsilon and a copy for the other, and the check runs the calls through both.
#[test]
fn a_torchscript_function_reading_its_epsilon_attribute_is_optimized_per_epsilon() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/torch/eps_functions_opset17.onnx");
    let model = onnx_opt::load(&path).unwrap();
    let body = &model.functions[0].body;
    let before = body.nodes_in_order().count();
    let muls = |ops: &[String]| ops.iter().filter(|o| *o == "Mul").count();
    let muls_before = muls(
        &body
            .nodes_in_order()
            .map(|(_, n)| n.op_type.to_string())
            .collect::<Vec<_>>(),
    );
    let out = Optimizer::new().check(5).optimize(&model).unwrap();
    assert!(out.report.check_trials > 0);
    assert_eq!(out.report.check_skipped, None);
    onnx_ir::check_model(&out.model).expect("the output passes the checker");
    assert_eq!(count(&out, "functions_bound"), 1);
    assert_eq!(
        main_ops(&out),
        ["EpsBlock", "EpsBlock", "EpsBlock__bound_1"]
    );
    for name in ["EpsBlock", "EpsBlock__bound_1"] {
        let ops = body_ops(&out, name);
        assert!(ops.len() < before, "{name}: {before} nodes before: {ops:?}");
        // The GELU's product by 1.0 is gone.
        assert_eq!(muls(&ops), muls_before - 1, "{name}: {ops:?}");
    }
}

/// A body that calls another function, and a function called only from bodies: each is typed
/// by its calls (those in bodies typed by the caller's body, the callee's outputs by its own
/// body), optimized in place and checked. `Inner`'s Cast to float goes where every call gives
/// it floats; where a call in a body gives it doubles and one in the main graph floats, the
/// calls disagree and it stays as it is.
#[test]
fn bodies_calling_other_functions_are_optimized_by_the_types_of_their_calls() {
    let nested = |outer_input: &str| {
        format!(
            r#"<ir_version: 9, opset_import: ["this" : 1, "" : 19]>
g (float[2,3] x, double[2,3] d) => (float[2,3] y, float[2,3] z) {{
   a = this.Outer (x, d)
   y = this.Outer (a, d)
   z = this.Inner (x)
}}
<domain: "this", opset_import: ["this" : 1, "" : 19]>
Outer (x, d) => (r)
{{
   i = this.Inner ({outer_input})
   j = this.Inner (i)
   k = Identity (j)
   r = Add (k, x)
}}
<domain: "this", opset_import: ["" : 19]>
Inner (x) => (y)
{{
   c = Cast <to: int = 1> (x)
   a = Abs (c)
   n = Neg (a)
   y = Exp (n)
}}"#
        )
    };
    let out = optimize(&nested("x"));
    assert_eq!(count(&out, "functions_optimized"), 2);
    assert_eq!(main_ops(&out), ["Outer", "Outer", "Inner"]);
    assert_eq!(body_ops(&out, "Outer"), ["Inner", "Inner", "Add"]);
    assert_eq!(body_ops(&out, "Inner"), ["Abs", "Neg", "Exp"]);
    // A call in Outer's body gives Inner doubles: Inner keeps its Cast (Outer still loses its
    // Identity, the calls' outputs typed by Inner's body).
    let out = optimize(&nested("d"));
    assert_eq!(count(&out, "functions_optimized"), 1);
    assert_eq!(body_ops(&out, "Outer"), ["Inner", "Inner", "Add"]);
    assert_eq!(body_ops(&out, "Inner"), ["Cast", "Abs", "Neg", "Exp"]);
}

/// The TorchScript exporter with nested module functions
/// (`tests/models/torch/nested_functions_opset17.onnx`): each block's function calls two
/// RMSNorm functions and an MLP function. The norms, called only from the blocks' body, lose
/// the float-to-float Casts transformers' RMSNorm writes; the calls stay; the check runs.
#[test]
fn a_torchscript_export_of_nested_module_functions_is_optimized_inside() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/torch/nested_functions_opset17.onnx");
    let model = onnx_opt::load(&path).unwrap();
    let casts = |ops: &[String]| ops.iter().filter(|o| *o == "Cast").count();
    let before: Vec<(String, Vec<String>)> = model
        .functions
        .iter()
        .map(|f| {
            let ops = f.body.nodes_in_order().map(|(_, n)| n.op_type.to_string());
            (
                f.name.as_deref().unwrap_or_default().to_string(),
                ops.collect(),
            )
        })
        .collect();
    let out = Optimizer::new().check(5).optimize(&model).unwrap();
    assert!(out.report.check_trials > 0);
    assert_eq!(out.report.check_skipped, None);
    onnx_ir::check_model(&out.model).expect("the output passes the checker");
    assert_eq!(main_ops(&out), ["NestedBlock", "NestedBlock"]);
    assert_eq!(
        body_ops(&out, "NestedBlock"),
        ["CastNorm", "GeluMLP", "Add", "CastNorm.1"]
    );
    for (name, ops) in &before {
        if name.starts_with("CastNorm") {
            assert_eq!(casts(ops), 2, "{name} before: {ops:?}");
            let after = body_ops(&out, name);
            assert_eq!(casts(&after), 0, "{name}: {after:?}");
        }
    }
}
