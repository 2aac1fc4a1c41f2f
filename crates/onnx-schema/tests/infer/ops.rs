//! Per-op rules on hand-built nodes: one `check` per case (op, opset, attributes, input types
//! and constants, expected outputs), and the errors for inconsistent nodes.

use onnx_proto::{AttributeProto, TensorProto, TypeProto};
use onnx_schema::infer::{InferError, InputInfo};

use crate::support::{
    attr_int, attr_ints, attr_str, float, int64s, render_all, run, type_of, typed,
};

/// One input: a type, optionally with a constant value.
#[derive(Clone, Copy)]
enum In<'a> {
    Ty(&'a TypeProto),
    Const(&'a TensorProto),
    Absent,
}

fn infos<'a>(ins: &[In<'a>], const_types: &'a [TypeProto]) -> Vec<Option<InputInfo<'a>>> {
    let mut const_at = 0;
    ins.iter()
        .map(|i| match *i {
            In::Ty(t) => Some(InputInfo::typed(t)),
            In::Const(c) => {
                let ty = const_types.get(const_at);
                const_at += 1;
                Some(InputInfo::constant(ty, c))
            }
            In::Absent => None,
        })
        .collect()
}

fn const_types(ins: &[In<'_>]) -> Vec<TypeProto> {
    ins.iter()
        .filter_map(|i| match i {
            In::Const(c) => Some(type_of(c)),
            _ => None,
        })
        .collect()
}

/// Infers `op` and compares the rendered outputs with `expect`.
fn check(op: &str, opset: i64, attrs: &[AttributeProto], ins: &[In<'_>], expect: &[&str]) {
    let types = const_types(ins);
    let outs = run(op, opset, attrs, &infos(ins, &types), expect.len())
        .unwrap_or_else(|e| panic!("{op}-{opset}: unexpected error: {e}"));
    assert_eq!(render_all(&outs), expect, "{op}-{opset}");
}

/// Infers `op` and returns the error, which must occur.
fn check_err(
    op: &str,
    opset: i64,
    attrs: &[AttributeProto],
    ins: &[In<'_>],
    n_outputs: usize,
) -> InferError {
    let types = const_types(ins);
    match run(op, opset, attrs, &infos(ins, &types), n_outputs) {
        Ok(outs) => panic!(
            "{op}-{opset}: expected an error, got {:?}",
            render_all(&outs)
        ),
        Err(e) => e,
    }
}

#[test]
fn matmul_follows_numpy_and_rejects_bad_inner_dims() {
    let a = float(&["batch", "1", "3", "4"]);
    let b = float(&["5", "4", "6"]);
    check(
        "MatMul",
        13,
        &[],
        &[In::Ty(&a), In::Ty(&b)],
        &["float[batch, 5, 3, 6]"],
    );
    let v = float(&["4"]);
    let m = float(&["4", "6"]);
    check("MatMul", 13, &[], &[In::Ty(&v), In::Ty(&m)], &["float[6]"]);
    check(
        "MatMul",
        13,
        &[],
        &[In::Ty(&a), In::Ty(&v)],
        &["float[batch, 1, 3]"],
    );
    let seq = float(&["batch", "sequence", "128"]);
    let w = float(&["128", "256"]);
    check(
        "MatMul",
        13,
        &[],
        &[In::Ty(&seq), In::Ty(&w)],
        &["float[batch, sequence, 256]"],
    );

    let x = float(&["3", "4"]);
    let y = float(&["5", "6"]);
    let err = check_err("MatMul", 13, &[], &[In::Ty(&x), In::Ty(&y)], 1);
    let msg = err.to_string();
    assert!(matches!(err, InferError::Inconsistent { .. }), "{err:?}");
    assert!(
        msg.contains("MatMul") && msg.contains("[3, 4]") && msg.contains("[5, 6]"),
        "{msg}"
    );
}

#[test]
fn gemm_transposes_and_checks_inner_dims() {
    let a = float(&["batch", "1280"]);
    let b = float(&["1000", "1280"]);
    let c = float(&["1000"]);
    check(
        "Gemm",
        13,
        &[attr_int("transB", 1)],
        &[In::Ty(&a), In::Ty(&b), In::Ty(&c)],
        &["float[batch, 1000]"],
    );
    let err = check_err("Gemm", 13, &[], &[In::Ty(&a), In::Ty(&b)], 1);
    assert!(
        err.to_string().contains("inner dims 1280 and 1000"),
        "{err}"
    );
}

#[test]
fn broadcasting_follows_onnx() {
    let a = float(&["batch", "1"]);
    let b = float(&["3"]);
    check(
        "Add",
        14,
        &[],
        &[In::Ty(&a), In::Ty(&b)],
        &["float[batch, 3]"],
    );
    let p = float(&["n"]);
    let q = float(&["m"]);
    check("Mul", 14, &[], &[In::Ty(&p), In::Ty(&q)], &["float[?]"]);
    // A known dim other than 1 wins over a symbolic one (which must be 1 or equal), as in onnx.
    check(
        "Sum",
        13,
        &[],
        &[In::Ty(&a), In::Ty(&b), In::Ty(&p)],
        &["float[batch, 3]"],
    );
    let cond = typed(9, &["1", "3"]);
    check(
        "Where",
        16,
        &[],
        &[In::Ty(&cond), In::Ty(&a), In::Ty(&b)],
        &["float[batch, 3]"],
    );
    check(
        "Equal",
        13,
        &[],
        &[In::Ty(&a), In::Ty(&b)],
        &["bool[batch, 3]"],
    );
    let two = float(&["2"]);
    let err = check_err("Add", 14, &[], &[In::Ty(&two), In::Ty(&b)], 1);
    assert!(err.to_string().contains("dims 2 and 3 differ"), "{err}");
    // Legacy broadcast (opset < 7): the output has A's shape.
    let big = float(&["2", "3"]);
    check(
        "Add",
        6,
        &[attr_int("broadcast", 1)],
        &[In::Ty(&big), In::Ty(&b)],
        &["float[2, 3]"],
    );
}

#[test]
fn element_types_come_from_constraints_and_attributes() {
    let x = float(&["2", "3"]);
    check(
        "Cast",
        13,
        &[attr_int("to", 7)],
        &[In::Ty(&x)],
        &["int64[2, 3]"],
    );
    check("Shape", 15, &[], &[In::Ty(&x)], &["int64[2]"]);
    check(
        "ArgMax",
        13,
        &[attr_int("axis", 1), attr_int("keepdims", 0)],
        &[In::Ty(&x)],
        &["int64[2]"],
    );
    let scale = float(&[]);
    let zp = typed(3, &[]);
    check(
        "QuantizeLinear",
        13,
        &[],
        &[In::Ty(&x), In::Ty(&scale), In::Ty(&zp)],
        &["int8[2, 3]"],
    );
    check(
        "QuantizeLinear",
        13,
        &[],
        &[In::Ty(&x), In::Ty(&scale)],
        &["uint8[2, 3]"],
    );
    let q = typed(3, &["2", "3"]);
    check(
        "DequantizeLinear",
        13,
        &[],
        &[In::Ty(&q), In::Ty(&scale), In::Ty(&zp)],
        &["float[2, 3]"],
    );
    let shape = int64s(&[2], &[4, 5]);
    let value = AttributeProto {
        name: Some("value".into()),
        r#type: Some(4),
        t: Some(int64s(&[1], &[7])),
        ..Default::default()
    };
    check(
        "ConstantOfShape",
        9,
        &[value],
        &[In::Const(&shape)],
        &["int64[4, 5]"],
    );
    check(
        "ConstantOfShape",
        9,
        &[],
        &[In::Const(&shape)],
        &["float[4, 5]"],
    );
    let bad = typed(7, &["2"]);
    let err = check_err("Add", 14, &[], &[In::Ty(&x), In::Ty(&bad)], 1);
    assert!(
        matches!(err, InferError::TypeMismatch { index: 1, .. }),
        "{err:?}"
    );
    let strings = typed(8, &["2"]);
    let err = check_err("Relu", 14, &[], &[In::Ty(&strings)], 1);
    assert!(err.to_string().contains("tensor(string)"), "{err}");
}

#[test]
fn constants_without_a_type_get_their_tensor_type() {
    let x = float(&["2", "3"]);
    let shape = int64s(&[2], &[3, 2]);
    let outs = run(
        "Reshape",
        14,
        &[],
        &[
            Some(InputInfo::typed(&x)),
            Some(InputInfo::constant(None, &shape)),
        ],
        1,
    )
    .expect("consistent");
    assert_eq!(render_all(&outs), ["float[3, 2]"]);
    let err = run(
        "Add",
        14,
        &[],
        &[
            Some(InputInfo::typed(&x)),
            Some(InputInfo::constant(None, &shape)),
        ],
        1,
    )
    .expect_err("int64 constant added to float");
    assert!(
        matches!(err, InferError::TypeMismatch { index: 1, .. }),
        "{err:?}"
    );
}

#[test]
fn missing_required_inputs_are_errors_and_unknown_stays_unknown() {
    let x = float(&["2"]);
    let err = check_err("Add", 14, &[], &[In::Ty(&x), In::Absent], 1);
    assert!(
        matches!(err, InferError::MissingInput { index: 1, .. }),
        "{err:?}"
    );
    let unranked = TypeProto {
        value: Some(onnx_proto::type_proto::Value::TensorType(
            onnx_proto::type_proto::Tensor {
                elem_type: Some(1),
                shape: None,
            },
        )),
        denotation: None,
    };
    check(
        "Add",
        14,
        &[],
        &[In::Ty(&x), In::Ty(&unranked)],
        &["float[*]"],
    );
    check("Relu", 14, &[], &[In::Ty(&unranked)], &["float[*]"]);
    let outs = run("Relu", 14, &[], &[Some(InputInfo::default())], 1).unwrap();
    assert_eq!(render_all(&outs), ["unknown"]);
}

#[test]
fn conv_and_pooling_windows() {
    let x = float(&["batch", "3", "224", "224"]);
    let w = float(&["64", "3", "7", "7"]);
    let conv = [
        attr_ints("strides", &[2, 2]),
        attr_ints("pads", &[3, 3, 3, 3]),
    ];
    check(
        "Conv",
        11,
        &conv,
        &[In::Ty(&x), In::Ty(&w)],
        &["float[batch, 64, 112, 112]"],
    );
    let same = [
        attr_str("auto_pad", "SAME_UPPER"),
        attr_ints("strides", &[2, 2]),
    ];
    check(
        "Conv",
        11,
        &same,
        &[In::Ty(&x), In::Ty(&w)],
        &["float[batch, 64, 112, 112]"],
    );
    let sym = float(&["batch", "3", "h", "w"]);
    let pointwise = float(&["8", "3", "1", "1"]);
    check(
        "Conv",
        11,
        &[],
        &[In::Ty(&sym), In::Ty(&pointwise)],
        &["float[batch, 8, h, w]"],
    );
    check(
        "Conv",
        11,
        &conv,
        &[In::Ty(&sym), In::Ty(&w)],
        &["float[batch, 64, ?, ?]"],
    );
    let grouped = float(&["64", "1", "3", "3"]);
    let err = check_err("Conv", 11, &[], &[In::Ty(&x), In::Ty(&grouped)], 1);
    assert!(err.to_string().contains("channels"), "{err}");

    let y = float(&["1", "64", "112", "112"]);
    let pool = [
        attr_ints("kernel_shape", &[3, 3]),
        attr_ints("strides", &[2, 2]),
        attr_ints("pads", &[1, 1, 1, 1]),
    ];
    check(
        "MaxPool",
        12,
        &pool,
        &[In::Ty(&y)],
        &["float[1, 64, 56, 56]"],
    );
    let ceil = [
        attr_ints("kernel_shape", &[3, 3]),
        attr_ints("strides", &[2, 2]),
        attr_int("ceil_mode", 1),
    ];
    let odd = float(&["1", "1", "6", "6"]);
    check(
        "MaxPool",
        12,
        &ceil,
        &[In::Ty(&odd)],
        &["float[1, 1, 3, 3]", "int64[1, 1, 3, 3]"],
    );
    check(
        "GlobalAveragePool",
        1,
        &[],
        &[In::Ty(&x)],
        &["float[batch, 3, 1, 1]"],
    );
    let ct = float(&["3", "8", "3", "3"]);
    let small = float(&["1", "3", "5", "5"]);
    check(
        "ConvTranspose",
        11,
        &[attr_ints("strides", &[2, 2])],
        &[In::Ty(&small), In::Ty(&ct)],
        &["float[1, 8, 11, 11]"],
    );
}

#[test]
fn reductions_with_axes_as_attribute_or_input() {
    let x = float(&["batch", "sequence", "128"]);
    check(
        "ReduceMean",
        13,
        &[attr_ints("axes", &[-1])],
        &[In::Ty(&x)],
        &["float[batch, sequence, 1]"],
    );
    let axes = int64s(&[1], &[1]);
    check(
        "ReduceMean",
        18,
        &[attr_int("keepdims", 0)],
        &[In::Ty(&x), In::Const(&axes)],
        &["float[batch, 128]"],
    );
    check("ReduceSum", 13, &[], &[In::Ty(&x)], &["float[1, 1, 1]"]);
    check(
        "ReduceSum",
        13,
        &[attr_int("noop_with_empty_axes", 1)],
        &[In::Ty(&x)],
        &["float[batch, sequence, 128]"],
    );
    let unknown_axes = typed(7, &["1"]);
    check(
        "ReduceMax",
        18,
        &[attr_int("keepdims", 0)],
        &[In::Ty(&x), In::Ty(&unknown_axes)],
        &["float[?, ?]"],
    );
    let k = int64s(&[1], &[5]);
    check(
        "TopK",
        11,
        &[],
        &[In::Ty(&x), In::Const(&k)],
        &["float[batch, sequence, 5]", "int64[batch, sequence, 5]"],
    );
}

#[test]
fn shape_rearrangements() {
    let x = float(&["batch", "1280", "1", "1"]);
    check("Flatten", 13, &[], &[In::Ty(&x)], &["float[batch, 1280]"]);
    check(
        "Flatten",
        13,
        &[attr_int("axis", 0)],
        &[In::Ty(&x)],
        &["float[1, 1280*batch]"],
    );
    check(
        "Transpose",
        13,
        &[],
        &[In::Ty(&x)],
        &["float[1, 1, 1280, batch]"],
    );
    check(
        "Squeeze",
        11,
        &[attr_ints("axes", &[2, 3])],
        &[In::Ty(&x)],
        &["float[batch, 1280]"],
    );
    let axes = int64s(&[1], &[1]);
    let err = check_err("Squeeze", 13, &[], &[In::Ty(&x), In::Const(&axes)], 1);
    assert!(err.to_string().contains("1280, not 1"), "{err}");
    check("Squeeze", 13, &[], &[In::Ty(&x)], &["float[*]"]);
    let two = int64s(&[2], &[0, -1]);
    check(
        "Unsqueeze",
        13,
        &[],
        &[In::Ty(&x), In::Const(&two)],
        &["float[1, batch, 1280, 1, 1, 1]"],
    );
    let a = float(&["batch", "3"]);
    let b = float(&["batch", "5"]);
    check(
        "Concat",
        13,
        &[attr_int("axis", 1)],
        &[In::Ty(&a), In::Ty(&b)],
        &["float[batch, 8]"],
    );
    let c = float(&["2", "5"]);
    check(
        "Concat",
        13,
        &[attr_int("axis", 1)],
        &[In::Ty(&a), In::Ty(&c)],
        &["float[2, 8]"],
    );
    let d = float(&["4", "5"]);
    let err = check_err(
        "Concat",
        13,
        &[attr_int("axis", 1)],
        &[In::Ty(&c), In::Ty(&d)],
        1,
    );
    assert!(err.to_string().contains("disagree on dim 0"), "{err}");
    let bad_shape = int64s(&[2], &[7, -1]);
    let six = float(&["2", "3"]);
    let err = check_err(
        "Reshape",
        14,
        &[],
        &[In::Ty(&six), In::Const(&bad_shape)],
        1,
    );
    assert!(err.to_string().contains("do not divide"), "{err}");
}

#[test]
fn slicing_and_splitting() {
    let x = float(&["10", "batch", "8"]);
    let starts = int64s(&[2], &[1, -3]);
    let ends = int64s(&[2], &[100, -1]);
    let axes = int64s(&[2], &[0, 2]);
    check(
        "Slice",
        13,
        &[],
        &[
            In::Ty(&x),
            In::Const(&starts),
            In::Const(&ends),
            In::Const(&axes),
        ],
        &["float[9, batch, 2]"],
    );
    let steps = int64s(&[2], &[-1, 1]);
    let rev_starts = int64s(&[2], &[-1, 0]);
    let rev_ends = int64s(&[2], &[i64::MIN, 4]);
    check(
        "Slice",
        13,
        &[],
        &[
            In::Ty(&x),
            In::Const(&rev_starts),
            In::Const(&rev_ends),
            In::Const(&axes),
            In::Const(&steps),
        ],
        &["float[10, batch, 4]"],
    );
    let all = float(&["10", "6"]);
    check(
        "Split",
        13,
        &[attr_int("axis", 1)],
        &[In::Ty(&all)],
        &["float[10, 3]", "float[10, 3]"],
    );
    check(
        "Split",
        18,
        &[attr_int("axis", 0), attr_int("num_outputs", 3)],
        &[In::Ty(&all)],
        &["float[4, 6]", "float[4, 6]", "float[2, 6]"],
    );
    let sizes = int64s(&[2], &[2, 4]);
    check(
        "Split",
        13,
        &[attr_int("axis", 1)],
        &[In::Ty(&all), In::Const(&sizes)],
        &["float[10, 2]", "float[10, 4]"],
    );
    let idx = typed(7, &["batch", "sequence"]);
    let table = float(&["30522", "128"]);
    check(
        "Gather",
        13,
        &[],
        &[In::Ty(&table), In::Ty(&idx)],
        &["float[batch, sequence, 128]"],
    );
    let pads = int64s(&[6], &[0, 1, 2, 0, 1, 2]);
    check(
        "Pad",
        13,
        &[],
        &[In::Ty(&x), In::Const(&pads)],
        &["float[10, ?, 12]"],
    );
}

#[test]
fn normalizations_and_multi_output_ops() {
    let x = float(&["batch", "sequence", "128"]);
    let s = float(&["128"]);
    check(
        "LayerNormalization",
        17,
        &[],
        &[In::Ty(&x), In::Ty(&s), In::Ty(&s)],
        &[
            "float[batch, sequence, 128]",
            "float[batch, sequence, 1]",
            "float[batch, sequence, 1]",
        ],
    );
    let img = float(&["1", "64", "56", "56"]);
    let c = float(&["64"]);
    check(
        "BatchNormalization",
        9,
        &[],
        &[In::Ty(&img), In::Ty(&c), In::Ty(&c), In::Ty(&c), In::Ty(&c)],
        &["float[1, 64, 56, 56]"],
    );
    let wrong = float(&["32"]);
    let err = check_err(
        "BatchNormalization",
        15,
        &[],
        &[
            In::Ty(&img),
            In::Ty(&wrong),
            In::Ty(&c),
            In::Ty(&c),
            In::Ty(&c),
        ],
        1,
    );
    assert!(err.to_string().contains("64 channels"), "{err}");
    check(
        "Dropout",
        13,
        &[],
        &[In::Ty(&x)],
        &["float[batch, sequence, 128]", "bool[batch, sequence, 128]"],
    );
    check(
        "Softmax",
        13,
        &[attr_int("axis", -1)],
        &[In::Ty(&x)],
        &["float[batch, sequence, 128]"],
    );
    let seq = float(&["5", "batch", "10"]);
    let w = float(&["1", "80", "10"]);
    let r = float(&["1", "80", "20"]);
    check(
        "LSTM",
        14,
        &[attr_int("hidden_size", 20)],
        &[In::Ty(&seq), In::Ty(&w), In::Ty(&r)],
        &[
            "float[5, 1, batch, 20]",
            "float[1, batch, 20]",
            "float[1, batch, 20]",
        ],
    );
}

#[test]
fn einsum_and_resize() {
    let a = float(&["b", "3", "4"]);
    let b = float(&["b", "4", "5"]);
    let eq = |e: &str| AttributeProto {
        name: Some("equation".into()),
        r#type: Some(3),
        s: Some(e.as_bytes().to_vec().into()),
        ..Default::default()
    };
    check(
        "Einsum",
        12,
        &[eq("bij,bjk->bik")],
        &[In::Ty(&a), In::Ty(&b)],
        &["float[b, 3, 5]"],
    );
    let m = float(&["3", "4"]);
    let n = float(&["4", "5"]);
    check(
        "Einsum",
        12,
        &[eq("ij,jk")],
        &[In::Ty(&m), In::Ty(&n)],
        &["float[3, 5]"],
    );
    check(
        "Einsum",
        12,
        &[eq("...ij->...ji")],
        &[In::Ty(&a)],
        &["float[b, 4, 3]"],
    );
    let x = float(&["1", "3", "10", "10"]);
    let scales = TensorProto {
        dims: vec![4],
        data_type: Some(1),
        float_data: vec![1.0, 1.0, 2.0, 1.5],
        ..Default::default()
    };
    check(
        "Resize",
        13,
        &[],
        &[In::Ty(&x), In::Absent, In::Const(&scales)],
        &["float[1, 3, 20, 15]"],
    );
    let sizes = int64s(&[4], &[1, 3, 7, 8]);
    check(
        "Resize",
        13,
        &[],
        &[In::Ty(&x), In::Absent, In::Absent, In::Const(&sizes)],
        &["float[1, 3, 7, 8]"],
    );
}
