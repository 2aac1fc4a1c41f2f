//! Tests of the Gradient operator through the public `Session` API: every derivative rule
//! against central finite differences in f64 on seeded random inputs (broadcast shapes and
//! size-1 dims included), chains, a value used twice, intermediate `xs`, `zs`, captured
//! values, and the planning errors.
//!
//! Each rule case builds `y0 = Op(inputs)`, `y = Mul(y0, w)` with a random initializer `w`
//! (so that a wrong transpose or axis cannot hide behind a plain sum) and
//! `Gradient(xs, y = "y")`, and compares the gradient with `(f(x+h) - f(x-h)) / 2h` per
//! element, where `f` is the sum of `y`.

use onnx_proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, type_proto, AttributeProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TypeProto, ValueInfoProto,
};

use super::emit::{float_attr, int_attr, ints_attr};
use crate::error::RefError;
use crate::session::Session;
use crate::tensor::Tensor;
use crate::value::Value;

/// A deterministic generator of values in [lo, hi) away from zero by at least `gap`.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn values(&mut self, n: usize, range: Range) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u = self.next();
                match range {
                    Range::Signed => {
                        let m = 0.2 + 0.8 * u;
                        if self.next() < 0.5 {
                            -m
                        } else {
                            m
                        }
                    }
                    Range::Positive => 0.5 + 1.5 * u,
                    Range::Negative => -0.5 - 1.5 * u,
                }
            })
            .collect()
    }
}

#[derive(Clone, Copy)]
enum Range {
    /// |x| in [0.2, 1), either sign (away from kinks at 0).
    Signed,
    /// [0.5, 2).
    Positive,
    /// (-2, -0.5].
    Negative,
}

/// An input of the op under test.
enum In {
    /// A graph input, differentiated, random f64 of this shape.
    Diff(&'static str, Vec<usize>, Range),
    /// A constant initializer (not differentiated).
    Const(&'static str, Tensor),
}

fn f64s(shape: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}"))
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::from_vec(&[v.len()], v.to_vec()).unwrap_or_else(|e| panic!("{e}"))
}

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn strings_attr(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Strings as i32),
        strings: v
            .iter()
            .map(|s| bytes::Bytes::from(s.to_string()))
            .collect(),
        ..Default::default()
    }
}

fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::String as i32),
        s: Some(bytes::Bytes::from(v.to_string())),
        ..Default::default()
    }
}

/// A Gradient node.
fn gradient(inputs: &[&str], xs: &[&str], zs: &[&str], y: &str, outputs: &[&str]) -> NodeProto {
    let mut n = node("Gradient", "grad", inputs, outputs);
    n.domain = Some("ai.onnx.preview.training".into());
    n.attribute.push(strings_attr("xs", xs));
    if !zs.is_empty() {
        n.attribute.push(strings_attr("zs", zs));
    }
    n.attribute.push(string_attr("y", y));
    n
}

fn double_input(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Double as i32),
                shape: None,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn model(
    nodes: Vec<NodeProto>,
    inputs: &[&str],
    inits: Vec<TensorProto>,
    outputs: &[&str],
    opset: i64,
) -> ModelProto {
    let named = |n: &&str| ValueInfoProto {
        name: Some(n.to_string()),
        ..Default::default()
    };
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![
            OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(opset),
            },
            OperatorSetIdProto {
                domain: Some("ai.onnx.preview.training".into()),
                version: Some(1),
            },
        ],
        graph: Some(GraphProto {
            name: Some("test".into()),
            node: nodes,
            input: inputs.iter().map(|n| double_input(n)).collect(),
            initializer: inits,
            output: outputs.iter().map(named).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(m: &ModelProto, feeds: &[(&str, Tensor)]) -> Result<Vec<Tensor>, RefError> {
    let session = Session::new(m)?;
    let feeds = feeds
        .iter()
        .map(|(n, t)| (n.to_string(), Value::Tensor(t.clone())))
        .collect();
    session
        .run(feeds)?
        .into_iter()
        .map(|(_, v)| v.into_tensor())
        .collect()
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap_or_else(|e| panic!("{e}"))
}

/// One finite-difference check: the op, its attributes and inputs, at `opset`.
struct Case {
    op: &'static str,
    attrs: Vec<AttributeProto>,
    inputs: Vec<In>,
    opset: i64,
    /// Extra outputs of the forward node (multi-output ops); output 0 is differentiated.
    extra_outputs: usize,
    /// Finite-difference step and tolerance.
    step: f64,
    tol: f64,
}

fn case(op: &'static str, inputs: Vec<In>) -> Case {
    Case {
        op,
        attrs: Vec::new(),
        inputs,
        opset: 17,
        extra_outputs: 0,
        step: 1e-6,
        tol: 1e-6,
    }
}

impl Case {
    fn attr(mut self, a: AttributeProto) -> Self {
        self.attrs.push(a);
        self
    }

    fn opset(mut self, v: i64) -> Self {
        self.opset = v;
        self
    }

    fn outputs(mut self, extra: usize) -> Self {
        self.extra_outputs = extra;
        self
    }

    fn tolerance(mut self, step: f64, tol: f64) -> Self {
        self.step = step;
        self.tol = tol;
        self
    }

    /// Builds the forward node, the weighted sum and the Gradient, and compares with finite
    /// differences.
    fn check(self, seed: u64) {
        let label = format!("{} (opset {})", self.op, self.opset);
        let mut rng = Lcg(seed);
        let names: Vec<&str> = self
            .inputs
            .iter()
            .map(|i| match i {
                In::Diff(n, ..) | In::Const(n, _) => *n,
            })
            .collect();
        let diff: Vec<&str> = self
            .inputs
            .iter()
            .filter_map(|i| match i {
                In::Diff(n, ..) => Some(*n),
                In::Const(..) => None,
            })
            .collect();
        let mut feeds: Vec<(&str, Tensor)> = Vec::new();
        let mut inits = Vec::new();
        for i in &self.inputs {
            match i {
                In::Diff(n, shape, range) => {
                    let len = shape.iter().product();
                    feeds.push((n, f64s(shape, rng.values(len, *range))));
                }
                In::Const(n, t) => inits.push(t.to_proto(n)),
            }
        }
        let mut outs = vec!["y0".to_string()];
        outs.extend((0..self.extra_outputs).map(|k| format!("y0_{k}")));
        let out_refs: Vec<&str> = outs.iter().map(String::as_str).collect();
        let mut fwd = node(self.op, "op", &names, &out_refs);
        fwd.attribute = self.attrs.clone();

        // The shape of y0, for the weights.
        let probe = model(vec![fwd.clone()], &diff, inits.clone(), &["y0"], self.opset);
        let y0 = run(&probe, &feeds).unwrap_or_else(|e| panic!("{label}: forward: {e}"));
        let y0_shape = y0[0].shape().to_vec();
        let w = f64s(&y0_shape, rng.values(y0[0].len(), Range::Signed));
        let w = crate::kernels::cast_tensor(&w, y0[0].dtype()).unwrap_or_else(|e| panic!("{e}"));
        inits.push(w.to_proto("w"));
        let weighted = node("Mul", "weigh", &["y0", "w"], &["y"]);
        let grad_outs: Vec<String> = diff.iter().map(|n| format!("d_{n}")).collect();
        let grad_refs: Vec<&str> = grad_outs.iter().map(String::as_str).collect();
        let g = gradient(&diff, &diff, &[], "y", &grad_refs);
        let mut outputs = vec!["y"];
        outputs.extend(&grad_refs);
        let full = model(
            vec![fwd, weighted, g],
            &diff,
            inits.clone(),
            &outputs,
            self.opset,
        );
        let got = run(&full, &feeds).unwrap_or_else(|e| panic!("{label}: gradient: {e}"));
        let f = |feeds: &[(&str, Tensor)]| -> f64 {
            let out = run(&full, feeds).unwrap_or_else(|e| panic!("{label}: {e}"));
            values(&out[0]).iter().sum()
        };
        for (k, name) in diff.iter().enumerate() {
            let grad = &got[k + 1];
            let base = &feeds[k].1;
            assert_eq!(grad.shape(), base.shape(), "{label}: shape of d{name}");
            let analytic = values(grad);
            let x = values(base);
            for (j, want) in analytic.iter().enumerate() {
                let at = |delta: f64| {
                    let mut moved = x.clone();
                    moved[j] += delta;
                    let mut fs = feeds.clone();
                    fs[k].1 = f64s(base.shape(), moved);
                    f(&fs)
                };
                let numeric = (at(self.step) - at(-self.step)) / (2.0 * self.step);
                let err = (numeric - want).abs();
                assert!(
                    err <= self.tol * (1.0 + numeric.abs()),
                    "{label}: d{name}[{j}] = {want}, finite differences give {numeric}"
                );
            }
        }
    }
}

use In::{Const, Diff};
use Range::{Positive, Signed};

fn d(name: &'static str, shape: &[usize]) -> In {
    Diff(name, shape.to_vec(), Signed)
}

fn p(name: &'static str, shape: &[usize]) -> In {
    Diff(name, shape.to_vec(), Positive)
}

#[test]
fn binary_arithmetic_with_broadcasting() {
    case("Add", vec![d("a", &[2, 3, 4]), d("b", &[3, 1])]).check(1);
    case("Add", vec![d("a", &[2, 3]), d("b", &[2, 3])]).check(2);
    case("Sub", vec![d("a", &[3]), d("b", &[2, 3])]).check(3);
    case("Mul", vec![d("a", &[2, 3]), d("b", &[2, 1])]).check(4);
    case("Mul", vec![d("a", &[1, 3]), d("b", &[])]).check(5);
    case("Div", vec![d("a", &[2, 3]), p("b", &[3])]).check(6);
    case("Pow", vec![p("a", &[2, 3]), d("b", &[3])]).check(7);
    case(
        "Pow",
        vec![p("a", &[2, 3]), Const("b", f64s(&[], vec![3.0]))],
    )
    .check(8);
    case("Pow", vec![d("a", &[4]), Const("b", i64s(&[2]))]).check(9);
    case("Sum", vec![d("a", &[2, 3]), d("b", &[3]), d("c", &[2, 1])]).check(10);
    case("Mean", vec![d("a", &[2, 3]), d("b", &[1, 3])]).check(11);
    let cond = Tensor::from_vec(&[3], vec![true, false, true]).unwrap_or_else(|e| panic!("{e}"));
    case(
        "Where",
        vec![Const("c", cond), d("a", &[2, 3]), d("b", &[1])],
    )
    .check(12);
}

#[test]
fn unary_ops() {
    for (i, op) in [
        "Neg",
        "Identity",
        "Relu",
        "LeakyRelu",
        "Sigmoid",
        "Tanh",
        "Exp",
        "Abs",
        "Sin",
        "Cos",
        "Erf",
        "Softplus",
    ]
    .into_iter()
    .enumerate()
    {
        case(op, vec![d("x", &[2, 3])]).check(20 + i as u64);
    }
    case("LeakyRelu", vec![d("x", &[5])])
        .attr(float_attr("alpha", 0.3))
        .check(40);
    for (i, op) in ["Log", "Sqrt", "Reciprocal"].into_iter().enumerate() {
        case(op, vec![p("x", &[2, 3])]).check(41 + i as u64);
    }
    case("Cast", vec![d("x", &[2, 2])])
        .attr(int_attr("to", DataType::Double as i64))
        .check(45);
    // Through float32: the step must dwarf f32 rounding.
    case("Cast", vec![d("x", &[3])])
        .attr(int_attr("to", DataType::Float as i64))
        .tolerance(1e-2, 1e-5)
        .check(46);
    let lo = || Const("lo", f64s(&[], vec![-0.5]));
    let hi = || Const("hi", f64s(&[], vec![0.5]));
    case("Clip", vec![d("x", &[2, 4]), lo(), hi()]).check(47);
    let lo_d = Diff("lo", vec![], Range::Negative);
    case("Clip", vec![d("x", &[2, 4]), lo_d, p("hi", &[])])
        .tolerance(1e-6, 1e-6)
        .check(48);
    case("Clip", vec![d("x", &[2, 4])])
        .attr(float_attr("min", -0.5))
        .attr(float_attr("max", 0.5))
        .opset(9)
        .check(49);
}

#[test]
fn matmul_and_gemm() {
    let shapes: [(&[usize], &[usize]); 8] = [
        (&[2, 3], &[3, 4]),
        (&[2, 2, 3], &[3, 4]),
        (&[2, 3], &[2, 3, 4]),
        (&[2, 1, 2, 3], &[3, 3, 2]),
        (&[3], &[3, 4]),
        (&[2, 3], &[3]),
        (&[3], &[3]),
        (&[2, 2, 3], &[3]),
    ];
    for (i, (a, b)) in shapes.into_iter().enumerate() {
        case("MatMul", vec![d("a", a), d("b", b)]).check(60 + i as u64);
    }
    case("MatMul", vec![d("a", &[3]), d("b", &[2, 3, 4])]).check(70);
    for (k, (ta, tb)) in [(0, 0), (1, 0), (0, 1), (1, 1)].into_iter().enumerate() {
        let a: &[usize] = if ta == 1 { &[3, 2] } else { &[2, 3] };
        let b: &[usize] = if tb == 1 { &[4, 3] } else { &[3, 4] };
        case("Gemm", vec![d("a", a), d("b", b), d("c", &[4])])
            .attr(int_attr("transA", ta))
            .attr(int_attr("transB", tb))
            .attr(float_attr("alpha", 0.5))
            .attr(float_attr("beta", 2.0))
            .check(80 + k as u64);
    }
    case("Gemm", vec![d("a", &[2, 3]), d("b", &[3, 4])])
        .opset(11)
        .check(85);
    case(
        "Gemm",
        vec![d("a", &[2, 3]), d("b", &[3, 4]), d("c", &[2, 1])],
    )
    .opset(9)
    .check(86);
}

#[test]
fn shape_ops() {
    case("Reshape", vec![d("x", &[2, 3]), Const("s", i64s(&[3, -1]))]).check(90);
    case("Transpose", vec![d("x", &[2, 3, 4])])
        .attr(ints_attr("perm", &[1, 2, 0]))
        .check(91);
    case("Transpose", vec![d("x", &[2, 3])]).check(92);
    case("Flatten", vec![d("x", &[2, 3, 2])])
        .attr(int_attr("axis", 2))
        .check(93);
    case(
        "Squeeze",
        vec![d("x", &[2, 1, 3]), Const("axes", i64s(&[1]))],
    )
    .check(94);
    case("Squeeze", vec![d("x", &[2, 1, 3])])
        .attr(ints_attr("axes", &[1]))
        .opset(11)
        .check(95);
    case(
        "Unsqueeze",
        vec![d("x", &[2, 3]), Const("axes", i64s(&[0, 3]))],
    )
    .check(96);
    case("Unsqueeze", vec![d("x", &[2, 3])])
        .attr(ints_attr("axes", &[-1]))
        .opset(12)
        .check(97);
    case(
        "Expand",
        vec![d("x", &[3, 1]), Const("s", i64s(&[2, 3, 4]))],
    )
    .check(98);
    case(
        "Concat",
        vec![d("a", &[2, 1]), d("b", &[2, 3]), d("c", &[2, 2])],
    )
    .attr(int_attr("axis", -1))
    .check(99);
    case(
        "Concat",
        vec![d("a", &[1, 2]), Const("b", f64s(&[2, 2], vec![1.0; 4]))],
    )
    .attr(int_attr("axis", 0))
    .opset(11)
    .check(100);
    case("Split", vec![d("x", &[2, 5]), Const("sp", i64s(&[2, 3]))])
        .attr(int_attr("axis", 1))
        .outputs(1)
        .check(101);
    case("Split", vec![d("x", &[4, 3])])
        .outputs(1)
        .opset(11)
        .check(102);
}

#[test]
fn reductions() {
    let axes = || Const("axes", i64s(&[1]));
    for (k, keep) in [0, 1].into_iter().enumerate() {
        let seed = 110 + 10 * k as u64;
        case("ReduceSum", vec![d("x", &[2, 3, 2]), axes()])
            .attr(int_attr("keepdims", keep))
            .check(seed);
        case("ReduceSum", vec![d("x", &[2, 3, 2])])
            .attr(ints_attr("axes", &[0, -1]))
            .attr(int_attr("keepdims", keep))
            .opset(11)
            .check(seed + 1);
        case("ReduceMean", vec![d("x", &[2, 3, 2]), axes()])
            .attr(int_attr("keepdims", keep))
            .opset(18)
            .check(seed + 2);
        case("ReduceMean", vec![d("x", &[2, 3])])
            .attr(int_attr("keepdims", keep))
            .check(seed + 3);
        for (j, op) in [
            "ReduceSumSquare",
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSumExp",
            "ReduceMax",
            "ReduceMin",
        ]
        .into_iter()
        .enumerate()
        {
            case(op, vec![d("x", &[2, 3, 2])])
                .attr(ints_attr("axes", &[1]))
                .attr(int_attr("keepdims", keep))
                .check(seed + 4 + j as u64);
        }
        case("ReduceLogSum", vec![p("x", &[3, 2])])
            .attr(int_attr("keepdims", keep))
            .check(seed + 9);
    }
    // noop_with_empty_axes: the identity.
    case("ReduceSum", vec![d("x", &[2, 3])])
        .attr(int_attr("noop_with_empty_axes", 1))
        .check(130);
}

#[test]
fn softmax_family() {
    for (k, op) in ["Softmax", "LogSoftmax"].into_iter().enumerate() {
        let seed = 140 + 10 * k as u64;
        case(op, vec![d("x", &[2, 3, 4])]).check(seed);
        case(op, vec![d("x", &[2, 3, 4])])
            .attr(int_attr("axis", 1))
            .check(seed + 1);
        // Before opset 13: the axes from `axis` on are flattened into one.
        case(op, vec![d("x", &[2, 3, 4])])
            .attr(int_attr("axis", 1))
            .opset(11)
            .check(seed + 2);
        case(op, vec![d("x", &[2, 3, 4])]).opset(12).check(seed + 3);
    }
}

fn scalar(v: f64) -> Tensor {
    f64s(&[], vec![v])
}

#[test]
fn chain_of_ops_matches_finite_differences() {
    // y = ReduceSum(Tanh(MatMul(Relu(x + b), W)) * Sigmoid(x2)) with W captured.
    let mut rng = Lcg(200);
    let x = f64s(&[2, 3], rng.values(6, Signed));
    let b = f64s(&[3], rng.values(3, Signed));
    let w = f64s(&[3, 2], rng.values(6, Signed));
    let nodes = vec![
        node("Add", "add", &["x", "b"], &["h0"]),
        node("Relu", "relu", &["h0"], &["h1"]),
        node("MatMul", "mm", &["h1", "w"], &["h2"]),
        node("Tanh", "tanh", &["h2"], &["h3"]),
        node("Sigmoid", "sig", &["h2"], &["h4"]),
        node("Mul", "mul", &["h3", "h4"], &["h5"]),
        node("ReduceSum", "sum", &["h5"], &["y"]),
        gradient(&["x", "b"], &["x", "b"], &[], "y", &["dx", "db"]),
    ];
    let m = model(
        nodes,
        &["x", "b"],
        vec![w.to_proto("w")],
        &["y", "dx", "db"],
        13,
    );
    let got = run(&m, &[("x", x.clone()), ("b", b.clone())]).unwrap_or_else(|e| panic!("{e}"));
    let f = |x: &Tensor, b: &Tensor| -> f64 {
        let out = run(&m, &[("x", x.clone()), ("b", b.clone())]).unwrap_or_else(|e| panic!("{e}"));
        values(&out[0])[0]
    };
    let h = 1e-6;
    for (k, base) in [&x, &b].into_iter().enumerate() {
        let analytic = values(&got[k + 1]);
        for (j, want) in analytic.iter().enumerate() {
            let shift = |delta: f64| {
                let mut v = values(base);
                v[j] += delta;
                f64s(base.shape(), v)
            };
            let (plus, minus) = if k == 0 {
                (f(&shift(h), &b), f(&shift(-h), &b))
            } else {
                (f(&x, &shift(h)), f(&x, &shift(-h)))
            };
            let numeric = (plus - minus) / (2.0 * h);
            assert!(
                (numeric - want).abs() < 1e-6,
                "input {k}[{j}]: {want} vs {numeric}"
            );
        }
    }
}

#[test]
fn value_used_twice_sums_its_contributions() {
    // y = x * x + sin(x): dy/dx = 2x + cos(x).
    let nodes = vec![
        node("Mul", "sq", &["x", "x"], &["s"]),
        node("Sin", "sin", &["x"], &["t"]),
        node("Add", "add", &["s", "t"], &["y"]),
        gradient(&["x"], &["x"], &[], "y", &["dx"]),
    ];
    let m = model(nodes, &["x"], Vec::new(), &["dx"], 13);
    let xs = vec![-1.5, 0.0, 0.25, 2.0];
    let got = run(&m, &[("x", f64s(&[4], xs.clone()))]).unwrap_or_else(|e| panic!("{e}"));
    for (g, x) in values(&got[0]).iter().zip(&xs) {
        assert!((g - (2.0 * x + x.cos())).abs() < 1e-12, "{g} at {x}");
    }
}

#[test]
fn backend_models_add_and_mul() {
    // The two backend tests: c = a + b, d = c * a.
    let nodes = vec![
        node("Add", "my_add", &["a", "b"], &["c"]),
        node("Mul", "my_mul", &["c", "a"], &["d"]),
        gradient(&["a", "b"], &["a", "b"], &[], "d", &["dd_da", "dd_db"]),
    ];
    let m = model(nodes, &["a", "b"], Vec::new(), &["d", "dd_da", "dd_db"], 12);
    let got = run(&m, &[("a", scalar(1.0)), ("b", scalar(2.0))]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got[1], scalar(4.0));
    assert_eq!(got[2], scalar(1.0));
}

#[test]
fn intermediate_xs_and_fed_values() {
    // xs names an intermediate value h = Exp(x); the node feeds h1 in its place:
    // y = h * h, dy/dh at h1 = 2 h1 (the producer of h is not differentiated).
    let nodes = vec![
        node("Exp", "exp", &["x"], &["h"]),
        node("Mul", "sq", &["h", "h"], &["y"]),
        gradient(&["h1"], &["h"], &[], "y", &["dh"]),
    ];
    let m = model(nodes, &["x", "h1"], Vec::new(), &["dh"], 13);
    let got = run(
        &m,
        &[
            ("x", f64s(&[2], vec![0.0, 1.0])),
            ("h1", f64s(&[2], vec![3.0, -1.0])),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got[0], f64s(&[2], vec![6.0, -2.0]));
}

#[test]
fn zs_are_inputs_without_gradients_and_captures_are_constants() {
    // y = (x * z) + v2 where v2 = Exp(v) is computed from a graph input outside xs/zs.
    let nodes = vec![
        node("Exp", "exp", &["v"], &["v2"]),
        node("Mul", "mul", &["x", "z"], &["p"]),
        node("Add", "add", &["p", "v2"], &["y"]),
        gradient(&["x", "z"], &["x"], &["z"], "y", &["dx"]),
    ];
    let m = model(nodes, &["x", "z", "v"], Vec::new(), &["dx"], 13);
    let got = run(
        &m,
        &[
            ("x", f64s(&[2], vec![1.0, 2.0])),
            ("z", f64s(&[2], vec![5.0, -7.0])),
            ("v", f64s(&[2], vec![0.0, 0.0])),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got[0], f64s(&[2], vec![5.0, -7.0]));
}

#[test]
fn y_independent_of_an_x_gives_zeros() {
    let nodes = vec![
        node("Neg", "neg", &["a"], &["y"]),
        gradient(&["a", "b"], &["a", "b"], &[], "y", &["da", "db"]),
    ];
    let m = model(nodes, &["a", "b"], Vec::new(), &["da", "db"], 13);
    let got = run(
        &m,
        &[
            ("a", f64s(&[2], vec![1.0, 2.0])),
            ("b", f64s(&[3], vec![1.0; 3])),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got[0], f64s(&[2], vec![-1.0, -1.0]));
    assert_eq!(got[1], f64s(&[3], vec![0.0; 3]));
    // y = x itself: ones.
    let m = model(
        vec![gradient(&["a"], &["a"], &[], "a", &["da"])],
        &["a"],
        Vec::new(),
        &["da"],
        13,
    );
    let got = run(&m, &[("a", f64s(&[2], vec![4.0, 5.0]))]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got[0], f64s(&[2], vec![1.0, 1.0]));
}

fn plan_error(nodes: Vec<NodeProto>, inputs: &[&str], opset: i64) -> String {
    let outputs: Vec<String> = nodes
        .iter()
        .filter(|n| n.op_type.as_deref() == Some("Gradient"))
        .flat_map(|n| n.output.clone())
        .collect();
    let refs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    match Session::new(&model(nodes, inputs, Vec::new(), &refs, opset)) {
        Ok(_) => panic!("planning succeeded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn op_without_rule_is_a_planning_error() {
    let mut topk = node("TopK", "top", &["x", "k"], &["v", "i"]);
    topk.attribute.push(int_attr("axis", 0));
    let nodes = vec![
        node("Constant", "kc", &[], &["k"]),
        topk,
        node("Neg", "neg", &["v"], &["y"]),
        gradient(&["x"], &["x"], &[], "y", &["dx"]),
    ];
    let err = plan_error(nodes, &["x"], 13);
    assert!(err.contains("'grad'"), "{err}");
    assert!(
        err.contains("no derivative rule for 'TopK' (node 1 'top')"),
        "{err}"
    );
}

#[test]
fn bad_names_and_arity_are_errors() {
    let add = || node("Add", "add", &["a", "b"], &["y"]);
    let err = plan_error(
        vec![add(), gradient(&["a"], &["nope"], &[], "y", &["d"])],
        &["a", "b"],
        13,
    );
    assert!(err.contains("'nope' in xs names no value"), "{err}");
    let err = plan_error(
        vec![add(), gradient(&["a"], &["a"], &["zz"], "y", &["d"])],
        &["a", "b"],
        13,
    );
    assert!(err.contains("1 inputs given, xs and zs name 2"), "{err}");
    let err = plan_error(
        vec![add(), gradient(&["a"], &["a"], &[], "gone", &["d"])],
        &["a", "b"],
        13,
    );
    assert!(err.contains("y 'gone' names no value"), "{err}");
    let err = plan_error(
        vec![
            add(),
            gradient(&["a", "a"], &["a", "a"], &[], "y", &["d", "e"]),
        ],
        &["a", "b"],
        13,
    );
    assert!(err.contains("more than once"), "{err}");
    let err = plan_error(
        vec![add(), gradient(&["a"], &["a"], &[], "y", &["d"])],
        &["a", "b"],
        8,
    );
    assert!(err.contains("opset 9 or later"), "{err}");
    // A cycle through the forward part.
    let nodes = vec![
        node("Add", "add", &["a", "y"], &["c"]),
        node("Neg", "neg", &["c"], &["y"]),
        gradient(&["a"], &["a"], &[], "y", &["d"]),
    ];
    let err = plan_error(nodes, &["a"], 13);
    assert!(err.contains("cycle"), "{err}");
    // y computed from the Gradient node's own output.
    let nodes = vec![
        gradient(&["a"], &["a"], &[], "y", &["d"]),
        node("Neg", "neg", &["d"], &["y"]),
    ];
    let err = plan_error(nodes, &["a"], 13);
    assert!(
        err.contains("cycle") || err.contains("own outputs"),
        "{err}"
    );
}

#[test]
fn gradient_outside_a_graph_is_an_error() {
    let g = gradient(&["a"], &["a"], &[], "a", &["d"]);
    let err = crate::eval::eval_node(&g, 1, &[Some(Value::Tensor(scalar(1.0)))]);
    assert!(
        matches!(&err, Err(e) if e.to_string().contains("enclosing graph")),
        "{err:?}"
    );
}
