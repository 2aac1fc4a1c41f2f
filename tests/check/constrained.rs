//! A generated batch of valid models whose symbolic or unknown dims must agree with each other
//! or with constants: the default check must find dims under which the original runs, check the
//! optimization on them, and never skip.

use onnx_opt::Optimizer;

/// One generated model: a name and its text.
struct Case {
    name: String,
    text: String,
}

fn model(name: &str, opset: i64, sig: &str, inits: &str, body: &str) -> Case {
    let inits = match inits.is_empty() {
        true => String::new(),
        false => format!(" <{inits}>"),
    };
    Case {
        name: name.to_string(),
        text: format!(
            "<ir_version: 8, opset_import: [\"\" : {opset}]>\n{name} {sig}{inits} {{\n{body}\n}}"
        ),
    }
}

fn floats(n: usize, seed: usize) -> String {
    (0..n)
        .map(|i| format!("{:.2}", (((i * 7 + seed * 13) % 17) as f32 - 8.0) / 8.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The batch: each family over a few constants, so every model needs dims other than the
/// defaults (1 for every symbolic and unknown dim).
fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    // A Reshape to a constant target from an input of one symbolic dim: N = product.
    for (a, b) in [(2, 12), (3, 5), (4, 4), (6, 7), (2, 9), (5, 3)] {
        out.push(model(
            &format!("reshape_const_{a}x{b}"),
            13,
            &format!("(float[N] x) => (float[{a}, {b}] y)"),
            &format!("int64[2] s = {{{a}, {b}}}"),
            "  i = Identity(x)\n  r = Reshape(i, s)\n  y = Relu(r)",
        ));
    }
    // The same from two unknown dims ([?, ?]), the target with a -1.
    for (a, b) in [(2, 6), (3, 4), (5, 2), (4, 8)] {
        out.push(model(
            &format!("reshape_unknown_{a}x{b}"),
            13,
            &format!("(float[?, ?] x) => (float[{a}, ?] y)"),
            &format!("int64[3] s = {{{a}, {b}, -1}}"),
            "  n = Neg(x)\n  m = Neg(n)\n  r = Reshape(m, s)\n  y = ReduceSum <keepdims = 0> (r)",
        ));
    }
    // A Conv over an input of symbolic channels and spatial dims smaller than... anything:
    // C = the weight's input channels, H and W at least the kernel.
    for (c, k, m) in [
        (3, 3, 2),
        (2, 2, 4),
        (4, 3, 1),
        (5, 1, 2),
        (3, 5, 2),
        (1, 3, 3),
    ] {
        out.push(model(
            &format!("conv_channels_{c}_k{k}_m{m}"),
            13,
            "(float[B, C, H, W] x) => (float[B, ?, ?, ?] y)",
            &format!(
                "float[{m}, {c}, {k}, {k}] w = {{{}}}",
                floats(m * c * k * k, c + k)
            ),
            "  c = Conv(x, w)\n  r = Relu(c)\n  y = Relu(r)",
        ));
    }
    // A MatMul from an input of a symbolic inner dim onto constant weights: K = rows.
    for (k, n) in [(3, 2), (5, 4), (7, 1), (4, 6), (2, 3), (6, 5)] {
        out.push(model(
            &format!("matmul_inner_{k}x{n}"),
            13,
            "(float[B, S, K] x) => (float[B, S, ?] y)",
            &format!(
                "float[{k}, {n}] w = {{{}}}, float[{n}] b = {{{}}}",
                floats(k * n, k),
                floats(n, n)
            ),
            "  m = MatMul(x, w)\n  y = Add(m, b)",
        ));
    }
    // An Expand to a constant target (the input's dim is 1 or the target's) whose input is then
    // concatenated with the result (so its last dim is the target's).
    for (a, b) in [(3, 5), (2, 4), (4, 2), (6, 3)] {
        out.push(model(
            &format!("expand_target_{a}x{b}"),
            13,
            "(float[P, Q] x) => (float[?, ?] y)",
            &format!("int64[2] s = {{{a}, {b}}}"),
            "  e = Expand(x, s)\n  t = Transpose <perm = [1, 0]> (e)\n  u = Transpose <perm = [1, 0]> (t)\n  y = Concat <axis = 0> (u, x)",
        ));
    }
    // A pooling window or a Pad-then-Conv that needs a large enough input.
    for k in [3, 4, 5, 6] {
        out.push(model(
            &format!("maxpool_window_{k}"),
            13,
            "(float[1, 2, H, W] x) => (float[1, 2, ?, ?] y)",
            "",
            &format!("  p = MaxPool <kernel_shape = [{k}, {k}]> (x)\n  y = Relu(p)"),
        ));
        out.push(model(
            &format!("avgpool_strided_{k}"),
            13,
            "(float[1, 1, H, W] x) => (float[1, 1, ?, ?] y)",
            "",
            &format!(
                "  p = AveragePool <kernel_shape = [{k}, 2], strides = [2, 2]> (x)\n  y = Neg(p)"
            ),
        ));
    }
    // Two inputs of different symbols that a Concat, an Add or a MatMul ties together.
    for n in [2, 3, 4] {
        out.push(model(
            &format!("concat_ties_dims_{n}"),
            13,
            "(float[A, B] x, float[C, D] z) => (float[?, ?] y)",
            &format!("float[{n}, 2] w = {{{}}}", floats(n * 2, n)),
            "  c = Concat <axis = 0> (x, z)\n  y = MatMul(c, w)",
        ));
        out.push(model(
            &format!("add_after_matmul_{n}"),
            13,
            "(float[M, K] x, float[R, S] z) => (float[?, ?] y)",
            &format!("float[{n}, 3] w = {{{}}}", floats(n * 3, n + 1)),
            "  m = MatMul(x, w)\n  a = Add(m, z)\n  y = Relu(a)",
        ));
    }
    // A mask over past and current positions: T = P + S (a sum, not one constant).
    for h in [2, 4, 8] {
        out.push(model(
            &format!("mask_total_is_past_plus_new_{h}"),
            13,
            &format!(
                "(float[B, P, {h}] past, float[B, S, {h}] cur, float[B, T] mask) => (float[?, ?] y)"
            ),
            "int64[1] ax = {2}",
            "  kv = Concat <axis = 1> (past, cur)\n  s = ReduceSum <keepdims = 0> (kv, ax)\n  y = Concat <axis = 0> (s, mask)",
        ));
    }
    // Attention heads: a hidden dim split by a constant Reshape into heads of a fixed size.
    for (heads, size) in [(2, 4), (4, 2), (3, 3), (2, 8)] {
        out.push(model(
            &format!("heads_reshape_{heads}x{size}"),
            13,
            "(float[B, S, H] x) => (float[B, ?, S, ?] y)",
            &format!("int64[4] s = {{0, 0, {heads}, {size}}}"),
            "  r = Reshape(x, s)\n  t = Transpose <perm = [0, 2, 1, 3]> (r)\n  y = Softmax <axis = -1> (t)",
        ));
    }
    // A Split into constant sizes: the axis is their sum.
    for (a, b) in [(2, 3), (1, 4), (3, 3), (5, 2)] {
        out.push(model(
            &format!("split_sizes_{a}_{b}"),
            13,
            &format!("(float[2, N] x) => (float[2, {a}] y, float[2, {b}] z)"),
            &format!("int64[2] s = {{{a}, {b}}}"),
            "  y, z = Split <axis = 1> (x, s)",
        ));
    }
    // A Gather of a row by a constant index: the axis must be longer than the index.
    for i in [1, 2, 4, 7] {
        out.push(model(
            &format!("gather_const_index_{i}"),
            13,
            "(float[N, 3] x) => (float[3] y)",
            &format!("int64 i = {{{i}}}"),
            "  g = Gather <axis = 0> (x, i)\n  y = Neg(g)",
        ));
    }
    // Broadcasting against a constant, then a Concat with it: the last dim is the constant's.
    for n in [3, 5] {
        out.push(model(
            &format!("broadcast_against_const_{n}"),
            13,
            "(float[A, B] x) => (float[?, ?] y)",
            &format!("float[2, {n}] c = {{{}}}", floats(2 * n, n)),
            "  a = Add(x, c)\n  z = Mul(a, c)\n  d = Sub(z, c)\n  y = Concat <axis = 0> (x, d)",
        ));
    }
    out
}

#[test]
fn shape_constrained_models_are_checked_not_skipped() {
    let cases = cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let m = match onnx_opt::parse_text(&case.text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{}: does not parse: {e}", case.name));
                continue;
            }
        };
        // The defaults (every dim 1) break every one of these models.
        let plain = onnx_ref::Session::new(&m.to_proto()).expect("it plans");
        let ones = onnx_ref::random_inputs(&m.to_proto(), 1, &Default::default());
        if let Ok(inputs) = ones {
            if plain.run(inputs).is_ok() {
                failures.push(format!(
                    "{}: runs with every dim 1 (not a constraint)",
                    case.name
                ));
                continue;
            }
        }
        match Optimizer::new().optimize(&m) {
            Ok(o) if o.report.check_skipped.is_none() && o.report.check_trials == 3 => {}
            Ok(o) => failures.push(format!(
                "{}: check skipped ({:?}), {} trials",
                case.name, o.report.check_skipped, o.report.check_trials
            )),
            Err(e) => failures.push(format!("{}: {e:?}", case.name)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
