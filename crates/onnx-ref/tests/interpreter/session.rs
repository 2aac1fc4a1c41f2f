//! Session planning and running on small hand-built graphs: errors name what is wrong, nodes
//! out of order are sorted, inputs are checked, `eval_node` and `random_inputs` behave.

use std::collections::BTreeMap;

use onnx_proto::{
    tensor_shape_proto::{dimension, Dimension},
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use onnx_ref::{eval_node, random_inputs, DType, RefError, Session, Tensor, Value};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn tensor_info(name: &str, dtype: DType, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam("batch".into()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dtype.code()),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, opset: i64) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: vec![tensor_info("x", DType::Float, &[None, Some(3)])],
            output: vec![tensor_info("y", DType::Float, &[None, Some(3)])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn floats(shape: &[usize], v: Vec<f32>) -> Value {
    Value::Tensor(Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn runs_nodes_given_out_of_order() {
    // y = relu(neg(x)), with the consumer listed first.
    let m = model(
        vec![
            node("Relu", "r", &["t"], &["y"]),
            node("Neg", "n", &["x"], &["t"]),
        ],
        13,
    );
    let s = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
    let out = s
        .run(vec![(
            "x".into(),
            floats(&[2, 3], vec![1.0, -2.0, 3.0, -4.0, 0.0, 5.0]),
        )])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, "y");
    assert_eq!(
        out[0].1,
        floats(&[2, 3], vec![0.0, 2.0, 0.0, 4.0, 0.0, 0.0])
    );
}

#[test]
fn missing_kernel_names_the_node() {
    let m = model(
        vec![
            node("Relu", "r", &["x"], &["t"]),
            node("NoSuchOp", "mystery", &["t"], &["y"]),
        ],
        13,
    );
    let err = Session::new(&m).map(|_| ());
    match err {
        Err(RefError::MissingKernel { node, version: 13 }) => {
            assert_eq!(
                (node.index, node.name.as_str(), node.op.as_str()),
                (Some(1), "mystery", "NoSuchOp")
            );
        }
        other => panic!("expected MissingKernel, got {other:?}"),
    }
}

#[test]
fn cycles_and_undefined_values_are_errors() {
    let cyclic = model(
        vec![
            node("Relu", "a", &["y"], &["t"]),
            node("Neg", "b", &["t"], &["y"]),
        ],
        13,
    );
    assert!(
        matches!(Session::new(&cyclic), Err(RefError::Graph { reason, .. }) if reason.contains("cycle"))
    );
    let undefined = model(vec![node("Relu", "a", &["nowhere"], &["y"])], 13);
    assert!(
        matches!(Session::new(&undefined), Err(RefError::Graph { reason, .. }) if reason.contains("'nowhere'"))
    );
}

#[test]
fn inputs_are_checked_against_the_model() {
    let m = model(vec![node("Relu", "r", &["x"], &["y"])], 13);
    let s = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
    let wrong_type = Value::Tensor(
        Tensor::from_vec(&[1, 3], vec![1i64, 2, 3]).unwrap_or_else(|e| panic!("{e}")),
    );
    assert!(
        matches!(s.run(vec![("x".into(), wrong_type)]), Err(RefError::Input { input, reason }) if input == "x" && reason.contains("INT64"))
    );
    let wrong_dim = floats(&[1, 4], vec![0.0; 4]);
    assert!(
        matches!(s.run(vec![("x".into(), wrong_dim)]), Err(RefError::Input { reason, .. }) if reason.contains("dimension 1 must be 3"))
    );
    let wrong_rank = floats(&[3], vec![0.0; 3]);
    assert!(
        matches!(s.run(vec![("x".into(), wrong_rank)]), Err(RefError::Input { reason, .. }) if reason.contains("rank 2"))
    );
    assert!(matches!(s.run(vec![]), Err(RefError::Input { input, .. }) if input == "x"));
}

#[test]
fn kernel_errors_carry_the_node() {
    let mut reshape = node("Reshape", "bad_reshape", &["x", "shape"], &["y"]);
    reshape.attribute.clear();
    let mut m = model(vec![node("Constant", "c", &[], &["shape"]), reshape], 13);
    if let Some(g) = m.graph.as_mut() {
        g.node[0].attribute.push(AttributeProto {
            name: Some("value_ints".into()),
            ints: vec![5, 5],
            r#type: Some(7),
            ..Default::default()
        });
    }
    let s = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
    let err = s.run(vec![("x".into(), floats(&[2, 3], vec![0.0; 6]))]);
    assert!(
        matches!(&err, Err(RefError::Kernel { node, reason }) if node.name == "bad_reshape" && node.index == Some(1) && reason.contains("reshape")),
        "{err:?}"
    );
}

#[test]
fn eval_node_uses_the_opset_semantics() {
    // Softmax-1 flattens to 2-D from axis 1; Softmax-13 works along the last axis only.
    let x = floats(&[2, 2], vec![0.0, 0.0, 0.0, 0.0]);
    let x3 = Value::Tensor(
        Tensor::from_vec(&[1, 2, 2], vec![0f32; 4]).unwrap_or_else(|e| panic!("{e}")),
    );
    let n = node("Softmax", "s", &["x"], &["y"]);
    let old = eval_node(&n, 11, &[Some(x3.clone())]).unwrap_or_else(|e| panic!("{e}"));
    let new = eval_node(&n, 13, &[Some(x3)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        old[0],
        Value::Tensor(
            Tensor::from_vec(&[1, 2, 2], vec![0.25f32; 4]).unwrap_or_else(|e| panic!("{e}"))
        )
    );
    assert_eq!(
        new[0],
        Value::Tensor(
            Tensor::from_vec(&[1, 2, 2], vec![0.5f32; 4]).unwrap_or_else(|e| panic!("{e}"))
        )
    );
    let add = node("Add", "a", &["p", "q"], &["r"]);
    let out = eval_node(
        &add,
        14,
        &[Some(x.clone()), Some(floats(&[2], vec![1.0, 2.0]))],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0], floats(&[2, 2], vec![1.0, 2.0, 1.0, 2.0]));
    let mismatch = eval_node(&add, 14, &[Some(x), Some(floats(&[3], vec![1.0; 3]))]);
    assert!(
        matches!(mismatch, Err(RefError::Kernel { reason, .. }) if reason.contains("broadcast"))
    );
}

#[test]
fn random_inputs_are_seeded_and_shaped() {
    let m = model(vec![node("Relu", "r", &["x"], &["y"])], 13);
    let dims = BTreeMap::from([("batch".to_string(), 4)]);
    let a = random_inputs(&m, 7, &dims).unwrap_or_else(|e| panic!("{e}"));
    let b = random_inputs(&m, 7, &dims).unwrap_or_else(|e| panic!("{e}"));
    let c = random_inputs(&m, 8, &dims).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let t = a[0].1.as_tensor().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.shape(), &[4, 3]);
    assert!(t
        .to_f64_vec()
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .all(|v| (-1.0..=1.0).contains(v)));
    let default = random_inputs(&m, 7, &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        default[0]
            .1
            .as_tensor()
            .map(|t| t.shape().to_vec())
            .unwrap_or_default(),
        vec![1, 3]
    );
}

/// A symmetric window of one sample divides 0 by 0 (`size - 1`): NaN, as onnx's reference,
/// the windows' function bodies and onnxruntime compute it; a periodic one is defined. A size
/// that is not a scalar, and `periodic` other than 0 or 1, are errors.
#[test]
fn symmetric_window_of_one_sample_is_nan() {
    for op in ["HannWindow", "HammingWindow", "BlackmanWindow"] {
        let mut n = node(op, "w", &["size"], &["y"]);
        n.attribute.push(AttributeProto {
            name: Some("periodic".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
            i: Some(0),
            ..Default::default()
        });
        let size = Value::Tensor(Tensor::scalar(1i64));
        let out = eval_node(&n, 17, &[Some(size.clone())]).unwrap_or_else(|e| panic!("{e}"));
        let Value::Tensor(t) = &out[0] else {
            panic!("{op}: not a tensor")
        };
        let v = t.to_f64_vec().unwrap_or_else(|e| panic!("{e}"));
        assert!(v.len() == 1 && v[0].is_nan(), "{op}: {v:?}");
        n.attribute.clear();
        let out = eval_node(&n, 17, &[Some(size)]).unwrap_or_else(|e| panic!("{e}"));
        let Value::Tensor(t) = &out[0] else {
            panic!("{op}: not a tensor")
        };
        let v = t.to_f64_vec().unwrap_or_else(|e| panic!("{e}"));
        assert!(v.len() == 1 && v[0].is_finite(), "{op}: {v:?}");
        // `size` is a scalar and `periodic` 0 or 1 (the function bodies assume both).
        let one =
            Value::Tensor(Tensor::from_vec(&[1], vec![4i64]).unwrap_or_else(|e| panic!("{e}")));
        let err = eval_node(&n, 17, &[Some(one)]).unwrap_err().to_string();
        assert!(err.contains("size must be a scalar"), "{op}: {err}");
        n.attribute.push(AttributeProto {
            name: Some("periodic".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
            i: Some(2),
            ..Default::default()
        });
        let err = eval_node(&n, 17, &[Some(Value::Tensor(Tensor::scalar(4i64)))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("periodic must be 0 or 1"), "{op}: {err}");
    }
}

/// Reshape's `allowzero` is 0 or 1; another value is an error, not read as 0 (the optimizer's
/// rules read it as one of the two).
#[test]
fn reshape_allowzero_other_than_0_or_1_is_an_error() {
    let mut n = node("Reshape", "r", &["x", "s"], &["y"]);
    n.attribute.push(AttributeProto {
        name: Some("allowzero".into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
        i: Some(2),
        ..Default::default()
    });
    let x =
        Value::Tensor(Tensor::from_vec(&[3], vec![1i64, 2, 3]).unwrap_or_else(|e| panic!("{e}")));
    let s = Value::Tensor(Tensor::from_vec(&[1], vec![0i64]).unwrap_or_else(|e| panic!("{e}")));
    let err = eval_node(&n, 16, &[Some(x), Some(s)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("allowzero must be 0 or 1"), "{err}");
}

/// A session with lazy weights computes what an eager one does: a weight read by two nodes, a
/// weight that is also a graph output, one read only inside a subgraph, a small one (decoded at
/// planning), and an overridable one (an initializer listed as a graph input) fed or not.
#[test]
fn lazy_weights_give_the_eager_results() {
    let raw = |name: &str, fill: f32| TensorProto {
        name: Some(name.into()),
        dims: vec![86, 3],
        data_type: Some(onnx_proto::tensor_proto::DataType::Float as i32),
        raw_data: Some(
            (0..86 * 3)
                .flat_map(|i| (fill + i as f32 * 0.5).to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
        ),
        ..Default::default()
    };
    let attr_graph = |name: &str, g: GraphProto| AttributeProto {
        name: Some(name.into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    };
    let branch = |name: &str, read: &str| GraphProto {
        name: Some(name.into()),
        node: vec![node("Identity", "i", &[read], &["t"])],
        output: vec![tensor_info("t", DType::Float, &[Some(86), Some(3)])],
        ..Default::default()
    };
    let mut cond = node("If", "if", &["c"], &["z"]);
    cond.attribute
        .push(attr_graph("then_branch", branch("then", "u")));
    cond.attribute
        .push(attr_graph("else_branch", branch("else", "x")));
    let mut m = model(
        vec![
            node("Add", "a", &["x", "w"], &["a"]),
            node("Mul", "b", &["a", "v"], &["b"]),
            node("Sub", "s", &["b", "v"], &["d"]),
            node("Add", "e", &["d", "small"], &["e"]),
            cond,
            node("Add", "y", &["e", "z"], &["y"]),
        ],
        13,
    );
    let g = m.graph.as_mut().unwrap();
    g.initializer = vec![
        raw("w", 1.0),
        raw("v", -2.0),
        raw("u", 3.0),
        TensorProto {
            name: Some("small".into()),
            dims: vec![3],
            data_type: Some(onnx_proto::tensor_proto::DataType::Float as i32),
            float_data: vec![0.25, 0.5, 0.75],
            ..Default::default()
        },
        TensorProto {
            name: Some("c".into()),
            dims: vec![],
            data_type: Some(onnx_proto::tensor_proto::DataType::Bool as i32),
            int32_data: vec![1],
            ..Default::default()
        },
    ];
    g.input
        .push(tensor_info("w", DType::Float, &[Some(86), Some(3)]));
    g.output = vec![
        tensor_info("y", DType::Float, &[Some(86), Some(3)]),
        tensor_info("v", DType::Float, &[Some(86), Some(3)]),
    ];
    let eager = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
    let lazy = Session::with_lazy_weights(&m).unwrap_or_else(|e| panic!("{e}"));
    let x = floats(&[86, 3], (0..86 * 3).map(|i| i as f32 / 7.0).collect());
    let fed_w = floats(&[86, 3], vec![-1.0; 86 * 3]);
    for inputs in [
        vec![("x".to_string(), x.clone())],
        vec![("x".to_string(), x.clone()), ("w".to_string(), fed_w)],
    ] {
        let want = eager.run(inputs.clone()).unwrap_or_else(|e| panic!("{e}"));
        // Twice: each run decodes the weights again.
        for _ in 0..2 {
            let got = lazy.run(inputs.clone()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want);
        }
    }
    let plain = eager.run(vec![("x".to_string(), x.clone())]).unwrap();
    let fed = eager
        .run(vec![
            ("x".to_string(), x),
            ("w".to_string(), floats(&[86, 3], vec![-1.0; 86 * 3])),
        ])
        .unwrap();
    assert_ne!(plain[0], fed[0], "feeding w overrides its initializer");
}

/// A Gather whose table is a lazy weight read by nothing else decodes only the rows its
/// indices name; the results equal an eager session's for repeated, negative and no indices,
/// int32 and int64 indices, and an index out of range is an error in both.
#[test]
fn lazy_gather_gives_the_eager_results() {
    let table = TensorProto {
        name: Some("table".into()),
        dims: vec![300, 2],
        data_type: Some(onnx_proto::tensor_proto::DataType::Float as i32),
        raw_data: Some(
            (0..600)
                .flat_map(|i| (i as f32 * 0.25 - 7.0).to_le_bytes())
                .collect::<Vec<u8>>()
                .into(),
        ),
        ..Default::default()
    };
    for dtype in [DType::Int64, DType::Int32] {
        let m = ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(13),
            }],
            graph: Some(GraphProto {
                name: Some("g".into()),
                node: vec![node("Gather", "g", &["table", "i"], &["y"])],
                initializer: vec![table.clone()],
                input: vec![tensor_info("i", dtype, &[None])],
                output: vec![tensor_info("y", DType::Float, &[None, Some(2)])],
                ..Default::default()
            }),
            ..Default::default()
        };
        let eager = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
        let lazy = Session::with_lazy_weights(&m).unwrap_or_else(|e| panic!("{e}"));
        let indices = |v: &[i64]| {
            let t = match dtype {
                DType::Int32 => {
                    Tensor::from_vec(&[v.len()], v.iter().map(|&i| i as i32).collect::<Vec<_>>())
                }
                _ => Tensor::from_vec(&[v.len()], v.to_vec()),
            };
            vec![(
                "i".to_string(),
                Value::Tensor(t.unwrap_or_else(|e| panic!("{e}"))),
            )]
        };
        for v in [&[5i64, -1, 5, 0, 299][..], &[], &[-300, 17]] {
            let want = eager.run(indices(v)).unwrap_or_else(|e| panic!("{e}"));
            let got = lazy.run(indices(v)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want, "{dtype} {v:?}");
        }
        for v in [&[300i64][..], &[2, -301]] {
            assert!(eager.run(indices(v)).is_err(), "{v:?}");
            let err = lazy.run(indices(v)).unwrap_err().to_string();
            assert!(err.contains("Gather"), "{err}");
        }
    }
}

/// Upsample refuses a scale that is not positive, as Resize does (the optimizer converts one
/// into the other, so both must fail on the same inputs; fuzz seed 0xe3779b97f4a7cc70).
#[test]
fn upsample_refuses_a_scale_that_is_not_positive() {
    let n = node("Upsample", "u", &["x", "scales"], &["y"]);
    let x = || {
        Value::Tensor(Tensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap_or_else(|e| panic!("{e}")))
    };
    let scales =
        |s: f32| Value::Tensor(Tensor::from_vec(&[1], vec![s]).unwrap_or_else(|e| panic!("{e}")));
    for bad in [-0.5f32, 0.0, f32::NAN] {
        let err = eval_node(&n, 9, &[Some(x()), Some(scales(bad))])
            .unwrap_err()
            .to_string();
        assert!(err.contains("must be positive"), "{bad}: {err}");
    }
    let out = eval_node(&n, 9, &[Some(x()), Some(scales(2.0))]).unwrap_or_else(|e| panic!("{e}"));
    let Value::Tensor(t) = &out[0] else {
        panic!("not a tensor")
    };
    assert_eq!(
        t.to_f64_vec().unwrap_or_else(|e| panic!("{e}")),
        [1.0, 1.0, 2.0, 2.0]
    );
}

#[test]
fn checking_declarations_refuses_a_value_that_breaks_its_declared_type() {
    // t = Neg(x) is float, but value_info declares it int64; a subgraph output declared
    // [?, 3] gets Transpose(x) = [3, 2].
    let mut m = model(
        vec![
            node("Neg", "n", &["x"], &["t"]),
            node("Identity", "i", &["t"], &["y"]),
        ],
        13,
    );
    m.graph
        .as_mut()
        .unwrap()
        .value_info
        .push(tensor_info("t", DType::Int64, &[None, Some(3)]));
    let x = floats(&[2, 3], vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0]);
    let plain = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
    assert!(plain.run(vec![("x".into(), x.clone())]).is_ok());
    let checking = Session::checking_declarations(&m).unwrap_or_else(|e| panic!("{e}"));
    let err = checking
        .run(vec![("x".into(), x.clone())])
        .expect_err("t breaks its declaration")
        .to_string();
    assert!(
        err.contains("value 't' breaks its declared type: expected element type INT64, got FLOAT"),
        "{err}"
    );

    let then_branch = GraphProto {
        name: Some("then".into()),
        node: vec![node("Transpose", "tr", &["x"], &["t"])],
        output: vec![tensor_info("t", DType::Float, &[None, Some(3)])],
        ..Default::default()
    };
    let else_branch = GraphProto {
        name: Some("else".into()),
        node: vec![node("Identity", "id", &["x"], &["e"])],
        output: vec![tensor_info("e", DType::Float, &[None, Some(3)])],
        ..Default::default()
    };
    let mut cond = node("If", "if", &["c"], &["y"]);
    for (name, g) in [("then_branch", then_branch), ("else_branch", else_branch)] {
        cond.attribute.push(AttributeProto {
            name: Some(name.into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Graph as i32),
            g: Some(g),
            ..Default::default()
        });
    }
    let mut m = model(vec![cond], 13);
    let g = m.graph.as_mut().unwrap();
    g.input.push(tensor_info("c", DType::Bool, &[]));
    g.output = vec![tensor_info("y", DType::Float, &[None, None])];
    let inputs = |c: bool| {
        vec![
            ("x".to_string(), x.clone()),
            (
                "c".to_string(),
                Value::Tensor(Tensor::from_vec(&[], vec![c]).unwrap_or_else(|e| panic!("{e}"))),
            ),
        ]
    };
    let plain = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
    assert!(plain.run(inputs(true)).is_ok());
    let checking = Session::checking_declarations(&m).unwrap_or_else(|e| panic!("{e}"));
    let err = checking
        .run(inputs(true))
        .expect_err("the branch output breaks its declaration")
        .to_string();
    assert!(
        err.contains("then")
            && err.contains(
                "value 't' breaks its declared type: dimension 1 must be 3, got shape [3, 2]"
            ),
        "{err}"
    );
    // The other branch keeps its declaration.
    assert!(checking.run(inputs(false)).is_ok());
}

/// A MatMul whose right operand is a lazy 2-D float weight read by nothing else reads it in
/// place from the tensor's bytes (float, float16, bfloat16); the results equal an eager
/// session's for a row, a few rows, a batch of many rows, a 1-D left operand, a weight large
/// enough to be widened in panels, and bytes too misaligned to view (decoded instead).
#[test]
fn lazy_matmul_weight_gives_the_eager_results() {
    use onnx_proto::tensor_proto::DataType;
    let weight = |dtype: DataType, k: usize, n: usize, skew: usize| {
        let values = (0..k * n).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 512.0);
        let mut raw: Vec<u8> = vec![0; skew];
        for v in values {
            match dtype {
                DataType::Float16 => raw.extend(half::f16::from_f32(v).to_bits().to_le_bytes()),
                DataType::Bfloat16 => raw.extend(half::bf16::from_f32(v).to_bits().to_le_bytes()),
                _ => raw.extend(v.to_le_bytes()),
            }
        }
        let raw = bytes::Bytes::from(raw).slice(skew..);
        TensorProto {
            name: Some("w".into()),
            dims: vec![k as i64, n as i64],
            data_type: Some(dtype as i32),
            raw_data: Some(raw),
            ..Default::default()
        }
    };
    let cast = |name: &str, input: &str, output: &str, to: i32| {
        let mut c = node("Cast", name, &[input], &[output]);
        c.attribute.push(AttributeProto {
            name: Some("to".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
            i: Some(to as i64),
            ..Default::default()
        });
        c
    };
    // A node without inputs runs too (the in-place read must not assume one).
    let mut half_node = node("Constant", "half", &[], &["half"]);
    half_node.attribute.push(AttributeProto {
        name: Some("value_float".into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Float as i32),
        f: Some(0.5),
        ..Default::default()
    });
    for dtype in [DataType::Float, DataType::Float16, DataType::Bfloat16] {
        for (a_shape, k, n, skew) in [
            (vec![1, 37], 37, 300, 0),
            (vec![3, 37], 37, 300, 0),
            (vec![2, 5, 37], 37, 300, 0),
            (vec![37], 37, 300, 0),
            (vec![6, 1100], 1100, 1000, 0),
            (vec![2, 1100], 1100, 1000, 0),
            (vec![3, 37], 37, 300, 1),
        ] {
            let rank = a_shape.len();
            let dims: Vec<Option<i64>> = a_shape.iter().map(|&d| Some(d as i64)).collect();
            let mut out_dims = dims[..rank - 1].to_vec();
            out_dims.push(Some(n as i64));
            let m = ModelProto {
                ir_version: Some(8),
                opset_import: vec![OperatorSetIdProto {
                    domain: Some(String::new()),
                    version: Some(13),
                }],
                graph: Some(GraphProto {
                    name: Some("g".into()),
                    node: vec![
                        half_node.clone(),
                        cast("in", "x", "xc", dtype as i32),
                        node("MatMul", "mm", &["xc", "w"], &["p"]),
                        cast("out", "p", "q", DataType::Float as i32),
                        node("Add", "add", &["q", "half"], &["y"]),
                    ],
                    initializer: vec![weight(dtype, k, n, skew)],
                    input: vec![tensor_info("x", DType::Float, &dims)],
                    output: vec![tensor_info("y", DType::Float, &out_dims)],
                    ..Default::default()
                }),
                ..Default::default()
            };
            let eager = Session::new(&m).unwrap_or_else(|e| panic!("{e}"));
            let lazy = Session::with_lazy_weights(&m).unwrap_or_else(|e| panic!("{e}"));
            let count: usize = a_shape.iter().product();
            let x = floats(
                &a_shape,
                (0..count)
                    .map(|i| ((i * 31 % 97) as f32 - 48.0) / 50.0)
                    .collect(),
            );
            let inputs = vec![("x".to_string(), x)];
            let want = eager.run(inputs.clone()).unwrap_or_else(|e| panic!("{e}"));
            let got = lazy.run(inputs).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want, "{dtype:?} {a_shape:?} x [{k}, {n}] skew {skew}");
        }
    }
}

/// The product of a float16 left operand and a large float16 weight is the float32 product
/// rounded once, whichever way the weight is widened (a row at a time, or in panels of rows).
#[test]
fn float16_matmul_is_the_widened_product() {
    let (k, n) = (1100usize, 1000usize);
    let w: Vec<f32> = (0..k * n)
        .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 512.0)
        .map(|v| half::f16::from_f32(v).to_f32())
        .collect();
    for rows in [1usize, 3, 6] {
        let a: Vec<f32> = (0..rows * k)
            .map(|i| ((i * 31 % 97) as f32 - 48.0) / 50.0)
            .map(|v| half::f16::from_f32(v).to_f32())
            .collect();
        let half_of = |v: &[f32], shape: &[usize]| {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            Tensor::from_vec(shape, h).unwrap_or_else(|e| panic!("{e}"))
        };
        let out = eval_node(
            &node("MatMul", "mm", &["a", "w"], &["y"]),
            13,
            &[
                Some(Value::Tensor(half_of(&a, &[rows, k]))),
                Some(Value::Tensor(half_of(&w, &[k, n]))),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let Value::Tensor(Tensor::F16(y)) = &out[0] else {
            panic!("float16 MatMul gave {:?}", out[0]);
        };
        for i in 0..rows {
            for j in (0..n).step_by(97) {
                let exact: f64 = (0..k)
                    .map(|p| f64::from(a[i * k + p]) * f64::from(w[p * n + j]))
                    .sum();
                let got = f64::from(y[[i, j]].to_f32());
                assert!(
                    (got - exact).abs() <= 1e-3 * exact.abs() + 2e-3,
                    "rows {rows} ({i}, {j}): {got} vs {exact}"
                );
            }
        }
    }
}

/// A Gemm whose B is a lazy 2-D float weight read by nothing else reads it in place too:
/// with and without transB, alpha, beta and a bias C, in float and float16, the results equal
/// an eager session's.
#[test]
fn lazy_gemm_weight_gives_the_eager_results() {
    use onnx_proto::tensor_proto::DataType;
    let attr_i = |name: &str, v: i64| AttributeProto {
        name: Some(name.into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    };
    let attr_f = |name: &str, v: f32| AttributeProto {
        name: Some(name.into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    };
    let (m, k, n) = (3usize, 40usize, 50usize);
    for dtype in [DataType::Float, DataType::Float16] {
        for trans_b in [0i64, 1] {
            let dims = if trans_b == 1 { [n, k] } else { [k, n] };
            let mut raw = Vec::new();
            for i in 0..k * n {
                let v = ((i * 7919 % 1013) as f32 - 506.0) / 512.0;
                match dtype {
                    DataType::Float16 => raw.extend(half::f16::from_f32(v).to_bits().to_le_bytes()),
                    _ => raw.extend(v.to_le_bytes()),
                }
            }
            let w = TensorProto {
                name: Some("w".into()),
                dims: dims.iter().map(|&d| d as i64).collect(),
                data_type: Some(dtype as i32),
                raw_data: Some(raw.into()),
                ..Default::default()
            };
            let mut to = node("Cast", "in", &["x"], &["xc"]);
            to.attribute.push(attr_i("to", dtype as i64));
            let mut bias = node("Cast", "bias", &["b"], &["bc"]);
            bias.attribute.push(attr_i("to", dtype as i64));
            let mut gemm = node("Gemm", "gemm", &["xc", "w", "bc"], &["p"]);
            gemm.attribute.extend([
                attr_i("transB", trans_b),
                attr_f("alpha", 0.5),
                attr_f("beta", 2.0),
            ]);
            let mut back = node("Cast", "out", &["p"], &["y"]);
            back.attribute.push(attr_i("to", DataType::Float as i64));
            let model = ModelProto {
                ir_version: Some(8),
                opset_import: vec![OperatorSetIdProto {
                    domain: Some(String::new()),
                    version: Some(13),
                }],
                graph: Some(GraphProto {
                    name: Some("g".into()),
                    node: vec![to, bias, gemm, back],
                    initializer: vec![w],
                    input: vec![
                        tensor_info("x", DType::Float, &[Some(m as i64), Some(k as i64)]),
                        tensor_info("b", DType::Float, &[Some(n as i64)]),
                    ],
                    output: vec![tensor_info(
                        "y",
                        DType::Float,
                        &[Some(m as i64), Some(n as i64)],
                    )],
                    ..Default::default()
                }),
                ..Default::default()
            };
            let eager = Session::new(&model).unwrap_or_else(|e| panic!("{e}"));
            let lazy = Session::with_lazy_weights(&model).unwrap_or_else(|e| panic!("{e}"));
            let x = floats(
                &[m, k],
                (0..m * k)
                    .map(|i| ((i * 31 % 97) as f32 - 48.0) / 50.0)
                    .collect(),
            );
            let b = floats(&[n], (0..n).map(|i| i as f32 / 10.0 - 2.0).collect());
            let inputs = vec![("x".to_string(), x), ("b".to_string(), b)];
            let want = eager.run(inputs.clone()).unwrap_or_else(|e| panic!("{e}"));
            let got = lazy.run(inputs).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want, "{dtype:?} transB {trans_b}");
        }
    }
}

/// A ConstantOfShape of an initializer's shape is computed at planning: every run gives the
/// same value (a run never changes the shared one), a fed input that overrides the initializer
/// runs the kernel on its shape, and a lazy session (which computes it in each run) agrees.
#[test]
fn constant_of_shape_of_an_initializer_follows_a_fed_shape() {
    let mut fill = node("ConstantOfShape", "fill", &["shape"], &["filled"]);
    fill.attribute.push(AttributeProto {
        name: Some("value".into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
        t: Some(TensorProto {
            dims: vec![1],
            data_type: Some(DType::Float.code()),
            float_data: vec![0.5],
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut m = model(
        vec![fill, node("Add", "add", &["filled", "filled"], &["y"])],
        13,
    );
    let g = m.graph.as_mut().unwrap();
    g.initializer.push(TensorProto {
        name: Some("shape".into()),
        dims: vec![2],
        data_type: Some(DType::Int64.code()),
        int64_data: vec![2, 3],
        ..Default::default()
    });
    // Listed as an input too (as IR < 4 requires): a run may override it.
    g.input = vec![tensor_info("shape", DType::Int64, &[Some(2)])];
    g.output = vec![tensor_info("y", DType::Float, &[None, None])];
    let y_of = |outs: Vec<(String, Value)>| outs.into_iter().next().unwrap().1;
    for session in [
        Session::new(&m).unwrap_or_else(|e| panic!("{e}")),
        Session::with_lazy_weights(&m).unwrap_or_else(|e| panic!("{e}")),
    ] {
        for _ in 0..2 {
            let y = y_of(session.run(vec![]).unwrap_or_else(|e| panic!("{e}")));
            assert_eq!(y, floats(&[2, 3], vec![1.0; 6]));
        }
        let fed = Value::Tensor(Tensor::from_vec(&[2], vec![1i64, 4]).unwrap());
        let y = y_of(session.run(vec![("shape".into(), fed)]).unwrap());
        assert_eq!(y, floats(&[1, 4], vec![1.0; 4]));
        let same = Value::Tensor(Tensor::from_vec(&[2], vec![2i64, 3]).unwrap());
        let y = y_of(session.run(vec![("shape".into(), same)]).unwrap());
        assert_eq!(y, floats(&[2, 3], vec![1.0; 6]));
    }
}
