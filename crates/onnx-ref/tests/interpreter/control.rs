//! Control flow and function expansion on small hand-built models: If nested in Loop reading
//! outer values, Scan directions and axes, Scan-8 sequence lengths, empty loops, SequenceMap,
//! model-local functions (attribute references, defaults, two calls, recursion), and errors
//! that name the path through subgraphs and functions.

use onnx_proto::{
    attribute_proto::AttributeType, type_proto, AttributeProto, FunctionProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use onnx_ref::{eval_node, DType, RefError, Sequence, Session, Tensor, Value};

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn with_attr(mut n: NodeProto, a: AttributeProto) -> NodeProto {
    n.attribute.push(a);
    n
}

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

fn ref_attr(name: &str, refers_to: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ref_attr_name: Some(refers_to.into()),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    }
}

/// A tensor value info; `dims` None = unknown shape.
fn info(name: &str, dtype: DType, dims: Option<&[i64]>) -> ValueInfoProto {
    let shape = dims.map(|d| TensorShapeProto {
        dim: d
            .iter()
            .map(|&v| onnx_proto::tensor_shape_proto::Dimension {
                value: Some(onnx_proto::tensor_shape_proto::dimension::Value::DimValue(
                    v,
                )),
                ..Default::default()
            })
            .collect(),
    });
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dtype.code()),
                shape,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn graph(
    name: &str,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: nodes,
        input: inputs,
        output: outputs,
        ..Default::default()
    }
}

fn model(g: GraphProto, opset: i64) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(g),
        ..Default::default()
    }
}

fn floats(shape: &[usize], v: Vec<f32>) -> Value {
    Value::Tensor(Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}")))
}

fn constant(name: &str, out: &str, t: Tensor) -> NodeProto {
    with_attr(
        node("Constant", name, &[], &[out]),
        AttributeProto {
            name: Some("value".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(t.to_proto(out)),
            ..Default::default()
        },
    )
}

fn run(m: &ModelProto, inputs: Vec<(&str, Value)>) -> Result<Vec<Value>, RefError> {
    let s = Session::new(m)?;
    let out = s.run(
        inputs
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect(),
    )?;
    Ok(out.into_iter().map(|(_, v)| v).collect())
}

fn ok<T>(r: Result<T, RefError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Loop body: acc' = If(i < 2, acc + x, acc - x) where x comes from the main graph, two
/// scopes out; scan output = acc'.
fn loop_with_nested_if(trips: i64, cond: bool) -> ModelProto {
    let then_branch = graph(
        "then",
        vec![node("Add", "plus", &["acc", "x"], &["t_out"])],
        vec![],
        vec![untyped("t_out")],
    );
    let else_branch = graph(
        "else",
        vec![node("Sub", "minus", &["acc", "x"], &["e_out"])],
        vec![],
        vec![untyped("e_out")],
    );
    let body = graph(
        "body",
        vec![
            constant("two", "two", Tensor::scalar(2i64)),
            node("Less", "early", &["i", "two"], &["is_early"]),
            with_attr(
                with_attr(
                    node("If", "choose", &["is_early"], &["acc_next"]),
                    graph_attr("then_branch", then_branch),
                ),
                graph_attr("else_branch", else_branch),
            ),
            node("Identity", "scan", &["acc_next"], &["acc_scan"]),
        ],
        vec![
            info("i", DType::Int64, Some(&[])),
            info("cond_in", DType::Bool, Some(&[])),
            info("acc", DType::Float, Some(&[2])),
        ],
        vec![
            untyped("cond_in"),
            untyped("acc_next"),
            info("acc_scan", DType::Float, Some(&[2])),
        ],
    );
    let main = graph(
        "main",
        vec![
            constant("m", "m", Tensor::scalar(trips)),
            constant("c", "c", Tensor::scalar(cond)),
            constant("zero", "acc0", ok(Tensor::from_vec(&[2], vec![0f32, 0.0]))),
            with_attr(
                node("Loop", "loop", &["m", "c", "acc0"], &["acc_final", "accs"]),
                graph_attr("body", body),
            ),
        ],
        vec![info("x", DType::Float, Some(&[2]))],
        vec![untyped("acc_final"), untyped("accs")],
    );
    model(main, 13)
}

#[test]
fn loop_runs_a_nested_if_that_reads_an_outer_value() {
    let out = ok(run(
        &loop_with_nested_if(3, true),
        vec![("x", floats(&[2], vec![1.0, 2.0]))],
    ));
    assert_eq!(out[0], floats(&[2], vec![1.0, 2.0]));
    assert_eq!(out[1], floats(&[3, 2], vec![1.0, 2.0, 2.0, 4.0, 1.0, 2.0]));
}

#[test]
fn empty_loops_return_initial_values_and_empty_scan_outputs() {
    for (trips, cond) in [(0, true), (5, false)] {
        let out = ok(run(
            &loop_with_nested_if(trips, cond),
            vec![("x", floats(&[2], vec![1.0, 2.0]))],
        ));
        assert_eq!(
            out[0],
            floats(&[2], vec![0.0, 0.0]),
            "M={trips} cond={cond}"
        );
        assert_eq!(out[1], floats(&[0, 2], vec![]), "M={trips} cond={cond}");
    }
}

/// Range as its function body writes it: a Loop whose body declares no types, its scan output
/// a copy of the carried value (ONNX's `Range` expansion).
fn untyped_range_loop(trips: i64, start: Tensor) -> ModelProto {
    let body = graph(
        "body",
        vec![
            node("Identity", "keep", &["cond_in"], &["cond_out"]),
            node("Add", "step", &["prev", "delta"], &["current"]),
            node("Identity", "emit", &["prev"], &["range"]),
        ],
        vec![untyped("i"), untyped("cond_in"), untyped("prev")],
        vec![untyped("cond_out"), untyped("current"), untyped("range")],
    );
    let main = graph(
        "main",
        vec![
            constant("m", "m", Tensor::scalar(trips)),
            constant("c", "c", Tensor::scalar(true)),
            constant("start", "start", start),
            with_attr(
                node("Loop", "loop", &["m", "c", "start"], &["last", "ranges"]),
                graph_attr("body", body),
            ),
        ],
        vec![info("delta", DType::Int32, None)],
        vec![untyped("last"), untyped("ranges")],
    );
    model(main, 13)
}

#[test]
fn an_empty_loop_types_an_undeclared_scan_output_from_its_inputs() {
    let delta = ("delta", Value::Tensor(Tensor::scalar(-2i32)));
    let ran = ok(run(
        &untyped_range_loop(2, Tensor::scalar(5i32)),
        vec![delta.clone()],
    ));
    assert_eq!(
        ran[1],
        Value::Tensor(ok(Tensor::from_vec(&[2], vec![5i32, 3])))
    );
    // No iteration runs: the slices take the carried value's element type and shape, as
    // inference types the body from the Loop's inputs.
    let empty = ok(run(
        &untyped_range_loop(0, Tensor::scalar(5i32)),
        vec![delta.clone()],
    ));
    assert_eq!(
        empty[1],
        Value::Tensor(ok(Tensor::from_vec(&[0], Vec::<i32>::new())))
    );
    let start = ok(Tensor::from_vec(&[2], vec![5i32, 6]));
    let empty = ok(run(&untyped_range_loop(0, start), vec![delta]));
    assert_eq!(
        empty[1],
        Value::Tensor(ok(Tensor::from_vec(&[0, 2], Vec::<i32>::new())))
    );
}

#[test]
fn a_body_with_the_wrong_arity_fails_at_planning_naming_the_node() {
    let mut m = loop_with_nested_if(3, true);
    let g = m.graph.as_mut().and_then(|g| g.node.get_mut(3));
    let body = g
        .and_then(|n| n.attribute.get_mut(0))
        .and_then(|a| a.g.as_mut())
        .unwrap_or_else(|| panic!("the model has a loop body"));
    body.input.push(untyped("extra"));
    let err = Session::new(&m).map(|_| ());
    match err {
        Err(RefError::Kernel { node, reason }) => {
            assert_eq!((node.index, node.name.as_str()), (Some(3), "loop"));
            assert!(reason.contains("body has 4 inputs, expected 3"), "{reason}");
        }
        other => panic!("expected an arity error, got {other:?}"),
    }
}

#[test]
fn errors_inside_a_body_name_the_path() {
    // The then branch reshapes to an impossible shape at run time.
    let mut m = loop_with_nested_if(3, true);
    let then = m
        .graph
        .as_mut()
        .and_then(|g| g.node.get_mut(3))
        .and_then(|n| n.attribute.get_mut(0))
        .and_then(|a| a.g.as_mut())
        .and_then(|body| body.node.get_mut(2))
        .and_then(|n| n.attribute.get_mut(0))
        .and_then(|a| a.g.as_mut())
        .unwrap_or_else(|| panic!("the model has a then branch"));
    then.node = vec![
        constant("shape", "shape", ok(Tensor::from_vec(&[1], vec![3i64]))),
        node("Reshape", "bad", &["acc", "shape"], &["t_out"]),
    ];
    let err = run(&m, vec![("x", floats(&[2], vec![1.0, 2.0]))]);
    let text = err
        .map(|_| ())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        text.starts_with(
            "node 3 'loop' (Loop) > body node 2 'choose' (If) > then_branch node 1 'bad' (Reshape): "
        ),
        "{text}"
    );
}

/// Scan-11: state s, scan input xs [3, 2] over axis `in_axis`; s' = s + x_t, scan output s'.
fn cumulative_scan(in_axis: i64, in_dir: i64, out_dir: i64) -> ModelProto {
    let body = graph(
        "body",
        vec![
            node("Add", "add", &["s", "x_t"], &["s_next"]),
            node("Identity", "copy", &["s_next"], &["y_t"]),
        ],
        vec![untyped("s"), untyped("x_t")],
        vec![untyped("s_next"), untyped("y_t")],
    );
    let scan = [
        int_attr("num_scan_inputs", 1),
        ints_attr("scan_input_axes", &[in_axis]),
        ints_attr("scan_input_directions", &[in_dir]),
        ints_attr("scan_output_directions", &[out_dir]),
        graph_attr("body", body),
    ]
    .into_iter()
    .fold(
        node("Scan", "scan", &["s0", "xs"], &["s_final", "ys"]),
        with_attr,
    );
    model(
        graph(
            "main",
            vec![scan],
            vec![
                info("s0", DType::Float, None),
                info("xs", DType::Float, None),
            ],
            vec![untyped("s_final"), untyped("ys")],
        ),
        11,
    )
}

#[test]
fn scan_runs_forward_reverse_and_along_other_axes() {
    let xs = floats(&[3, 2], vec![1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
    let s0 = floats(&[2], vec![0.0, 0.0]);
    let go = |m: &ModelProto, s0: &Value, xs: &Value| {
        ok(run(m, vec![("s0", s0.clone()), ("xs", xs.clone())]))
    };
    let forward = go(&cumulative_scan(0, 0, 0), &s0, &xs);
    assert_eq!(forward[0], floats(&[2], vec![6.0, 60.0]));
    assert_eq!(
        forward[1],
        floats(&[3, 2], vec![1.0, 10.0, 3.0, 30.0, 6.0, 60.0])
    );
    // Reverse input: 3, 2, 1 -> 3, 5, 6 in iteration order.
    let reverse = go(&cumulative_scan(0, 1, 0), &s0, &xs);
    assert_eq!(
        reverse[1],
        floats(&[3, 2], vec![3.0, 30.0, 5.0, 50.0, 6.0, 60.0])
    );
    // Reverse input and output: the last iteration's slice comes first.
    let both = go(&cumulative_scan(0, 1, 1), &s0, &xs);
    assert_eq!(
        both[1],
        floats(&[3, 2], vec![6.0, 60.0, 5.0, 50.0, 3.0, 30.0])
    );
    // Along axis -1 of the transposed input: the same sums.
    let xs_t = floats(&[2, 3], vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
    let by_column = go(&cumulative_scan(-1, 0, 0), &s0, &xs_t);
    assert_eq!(by_column, forward);
    // Zero iterations: the body declares no type for its scan output, so its shape is unknown.
    let empty = run(
        &cumulative_scan(0, 0, 0),
        vec![("s0", s0.clone()), ("xs", floats(&[0, 2], vec![]))],
    );
    assert!(
        matches!(&empty, Err(RefError::Kernel { reason, .. }) if reason.contains("zero iterations")),
        "{empty:?}"
    );
    let bad_axis = run(
        &cumulative_scan(2, 0, 0),
        vec![("s0", s0.clone()), ("xs", xs.clone())],
    );
    assert!(
        matches!(&bad_axis, Err(RefError::Kernel { node, .. }) if node.name == "scan"),
        "{bad_axis:?}"
    );
}

#[test]
fn scan8_honours_sequence_lengths_and_pads_with_zeros() {
    let body = graph(
        "body",
        vec![
            node("Add", "add", &["s", "x_t"], &["s_next"]),
            node("Identity", "copy", &["s_next"], &["y_t"]),
        ],
        vec![untyped("s"), untyped("x_t")],
        vec![untyped("s_next"), untyped("y_t")],
    );
    let scan = [int_attr("num_scan_inputs", 1), graph_attr("body", body)]
        .into_iter()
        .fold(
            node("Scan", "scan8", &["lens", "s0", "xs"], &["s_final", "ys"]),
            with_attr,
        );
    let m = model(
        graph(
            "main",
            vec![scan],
            vec![
                info("lens", DType::Int64, None),
                info("s0", DType::Float, None),
                info("xs", DType::Float, None),
            ],
            vec![untyped("s_final"), untyped("ys")],
        ),
        8,
    );
    let lens = Value::Tensor(ok(Tensor::from_vec(&[2], vec![3i64, 1])));
    let s0 = floats(&[2, 1], vec![0.0, 100.0]);
    let xs = floats(&[2, 3, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = ok(run(&m, vec![("lens", lens), ("s0", s0), ("xs", xs)]));
    assert_eq!(out[0], floats(&[2, 1], vec![6.0, 104.0]));
    assert_eq!(
        out[1],
        floats(&[2, 3, 1], vec![1.0, 3.0, 6.0, 104.0, 0.0, 0.0])
    );
}

#[test]
fn sequence_map_maps_sequences_with_a_broadcast_tensor() {
    let body = graph(
        "body",
        vec![node("Add", "add", &["item", "bias"], &["out"])],
        vec![untyped("item"), untyped("bias")],
        vec![info("out", DType::Float, None)],
    );
    let m = model(
        graph(
            "main",
            vec![with_attr(
                node("SequenceMap", "map", &["seq", "b"], &["mapped"]),
                graph_attr("body", body),
            )],
            vec![untyped("seq"), info("b", DType::Float, None)],
            vec![untyped("mapped")],
        ),
        17,
    );
    let seq = |items: Vec<Value>| {
        Value::Sequence(Sequence {
            elem_dtype: Some(DType::Float),
            items,
        })
    };
    let out = ok(run(
        &m,
        vec![
            (
                "seq",
                seq(vec![floats(&[1], vec![1.0]), floats(&[2], vec![2.0, 3.0])]),
            ),
            ("b", floats(&[], vec![10.0])),
        ],
    ));
    assert_eq!(
        out[0],
        seq(vec![
            floats(&[1], vec![11.0]),
            floats(&[2], vec![12.0, 13.0])
        ])
    );
    let empty = ok(run(
        &m,
        vec![("seq", seq(vec![])), ("b", floats(&[], vec![10.0]))],
    ));
    assert_eq!(empty[0], seq(vec![]));
}

/// local::ScaleAdd(a, b) = a * alpha + b + beta, beta defaulting to 10.
fn scale_add() -> FunctionProto {
    FunctionProto {
        name: Some("ScaleAdd".into()),
        domain: Some("local".into()),
        input: vec!["a".into(), "b".into()],
        output: vec!["y".into()],
        attribute: vec!["alpha".into()],
        attribute_proto: vec![float_attr("beta", 10.0)],
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        node: vec![
            with_attr(
                node("Constant", "alpha", &[], &["alpha_c"]),
                ref_attr("value_float", "alpha"),
            ),
            with_attr(
                node("Constant", "beta", &[], &["beta_c"]),
                ref_attr("value_float", "beta"),
            ),
            node("Mul", "scale", &["a", "alpha_c"], &["t"]),
            node("Add", "shift", &["t", "b"], &["u"]),
            node("Add", "offset", &["u", "beta_c"], &["y"]),
        ],
        ..Default::default()
    }
}

fn function_model(nodes: Vec<NodeProto>, functions: Vec<FunctionProto>) -> ModelProto {
    let mut m = model(
        graph(
            "main",
            nodes,
            vec![info("x", DType::Float, None)],
            vec![untyped("y")],
        ),
        13,
    );
    m.opset_import.push(OperatorSetIdProto {
        domain: Some("local".into()),
        version: Some(1),
    });
    m.functions = functions;
    m
}

fn call(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        domain: Some("local".into()),
        ..node(op, name, inputs, outputs)
    }
}

#[test]
fn local_functions_bind_attributes_and_defaults_per_call() {
    // y1 = x*2 + x + 10; y = y1*3 + x + 1.
    let m = function_model(
        vec![
            with_attr(
                call("first", "ScaleAdd", &["x", "x"], &["y1"]),
                float_attr("alpha", 2.0),
            ),
            with_attr(
                with_attr(
                    call("second", "ScaleAdd", &["y1", "x"], &["y"]),
                    float_attr("alpha", 3.0),
                ),
                float_attr("beta", 1.0),
            ),
        ],
        vec![scale_add()],
    );
    let out = ok(run(&m, vec![("x", floats(&[2], vec![1.0, 2.0]))]));
    assert_eq!(out[0], floats(&[2], vec![41.0, 51.0]));
}

#[test]
fn recursive_functions_are_refused() {
    let mut f = scale_add();
    f.node.push(call("again", "ScaleAdd", &["y", "b"], &["z"]));
    let m = function_model(
        vec![with_attr(
            call("first", "ScaleAdd", &["x", "x"], &["y"]),
            float_attr("alpha", 2.0),
        )],
        vec![f],
    );
    let err = Session::new(&m).map(|_| ()).map_err(|e| e.to_string());
    let text = err.err().unwrap_or_default();
    assert!(
        text.contains("calls itself recursively (local::ScaleAdd > local::ScaleAdd)"),
        "{text}"
    );
    assert!(
        text.starts_with("node 0 'first' (local::ScaleAdd) > "),
        "{text}"
    );
}

#[test]
fn a_missing_kernel_inside_a_function_names_the_call_and_the_body_node() {
    let mut f = scale_add();
    f.node.push(node("NoSuchOp", "mystery", &["y"], &["z"]));
    let m = function_model(
        vec![with_attr(
            call("first", "ScaleAdd", &["x", "x"], &["y"]),
            float_attr("alpha", 2.0),
        )],
        vec![f],
    );
    match Session::new(&m).map(|_| ()) {
        Err(RefError::Nested { node, part, inner }) => {
            assert_eq!(
                (node.name.as_str(), part.as_str()),
                ("first", "function local::ScaleAdd")
            );
            assert!(
                matches!(&*inner, RefError::MissingKernel { node, version: 13 } if node.name == "mystery" && node.index == Some(5)),
                "{inner:?}"
            );
        }
        other => panic!("expected a nested MissingKernel, got {other:?}"),
    }
}

#[test]
fn eval_node_runs_control_flow_without_outer_reads() {
    let then_branch = graph(
        "then",
        vec![constant("one", "one", Tensor::scalar(1f32))],
        vec![],
        vec![untyped("one")],
    );
    let else_branch = graph(
        "else",
        vec![constant(
            "two",
            "two",
            ok(Tensor::from_vec(&[2], vec![2f32, 2.0])),
        )],
        vec![],
        vec![untyped("two")],
    );
    let if_node = with_attr(
        with_attr(
            node("If", "pick", &["c"], &["y"]),
            graph_attr("then_branch", then_branch),
        ),
        graph_attr("else_branch", else_branch),
    );
    // Branches with different output shapes.
    let yes = ok(eval_node(
        &if_node,
        13,
        &[Some(Value::Tensor(Tensor::scalar(true)))],
    ));
    assert_eq!(yes, vec![floats(&[], vec![1.0])]);
    let no = ok(eval_node(
        &if_node,
        13,
        &[Some(Value::Tensor(Tensor::scalar(false)))],
    ));
    assert_eq!(no, vec![floats(&[2], vec![2.0, 2.0])]);

    // A branch that reads an outer value cannot be evaluated alone.
    let mut reads_outer = if_node.clone();
    if let Some(g) = reads_outer.attribute[0].g.as_mut() {
        g.node = vec![node("Neg", "neg", &["outside"], &["one"])];
    }
    let err = eval_node(
        &reads_outer,
        13,
        &[Some(Value::Tensor(Tensor::scalar(true)))],
    );
    assert!(
        matches!(&err, Err(RefError::Kernel { node, reason }) if node.name == "pick" && reason.contains("\"outside\"") && reason.contains("Session")),
        "{err:?}"
    );
}

fn swiglu(alpha: Option<f32>) -> NodeProto {
    let n = node("SwiGLU", "gate", &["a", "b"], &["y"]);
    match alpha {
        Some(v) => with_attr(n, float_attr("alpha", v)),
        None => n,
    }
}

#[test]
fn ops_without_kernels_run_their_schema_function_body() {
    // SwiGLU-28 = Mul(Swish<alpha>(A), B), alpha defaulting to 1 through the schema.
    let inputs = [
        Some(floats(&[2], vec![0.0, 1.0])),
        Some(floats(&[2], vec![2.0, 3.0])),
    ];
    let y = |alpha| match ok(eval_node(&swiglu(alpha), 28, &inputs)).first() {
        Some(Value::Tensor(t)) => ok(t.to_f64_vec()),
        other => panic!("expected a tensor, got {other:?}"),
    };
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    for (alpha, expected) in [(None, 3.0 * sigmoid(1.0)), (Some(2.0), 3.0 * sigmoid(2.0))] {
        let got = y(alpha);
        assert_eq!(got[0], 0.0);
        assert!((got[1] - expected).abs() < 1e-6, "{alpha:?}: {got:?}");
    }
    // Before its introduction the op has neither kernel nor body.
    assert!(matches!(
        eval_node(&swiglu(None), 27, &inputs),
        Err(RefError::MissingKernel { version: 27, .. })
    ));
}

fn constant_seven(
    _ctx: &onnx_ref::KernelCtx,
    _inputs: &[Option<&Value>],
) -> Result<Vec<Value>, RefError> {
    Ok(vec![floats(&[], vec![7.0])])
}

#[test]
fn a_dedicated_kernel_wins_over_a_function_body() {
    let m = model(
        graph(
            "main",
            vec![swiglu(None)],
            vec![info("a", DType::Float, None), info("b", DType::Float, None)],
            vec![untyped("y")],
        ),
        28,
    );
    let mut registry = onnx_ref::KernelRegistry::with_builtin_kernels();
    registry.register("", "SwiGLU", 1, onnx_ref::LATEST, constant_seven);
    let s = ok(Session::with_registry(&m, &registry));
    let out = ok(s.run(vec![
        ("a".into(), floats(&[1], vec![1.0])),
        ("b".into(), floats(&[1], vec![1.0])),
    ]));
    assert_eq!(out[0].1, floats(&[], vec![7.0]));
}
