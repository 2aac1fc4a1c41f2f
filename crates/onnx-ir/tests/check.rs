//! The structural checker and topological sorting: broken models built here are rejected with
//! exactly the expected messages (the shared models are checked in `schema_check.rs`).

mod common;

use common::*;
use onnx_ir::{check_model, CheckError, Graph, IrError, Model, Node, Value, ValueId};
use onnx_proto::{
    attribute_proto::AttributeType, AttributeProto, FunctionProto, ModelProto, NodeProto,
};

/// The checker's messages for a model (empty when it passes).
fn messages(proto: ModelProto) -> Vec<String> {
    let model = Model::from_proto(proto).expect("conversion is total");
    match check_model(&model) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

/// Asserts the exact list of messages.
fn check(proto: ModelProto, expected: &[&str]) {
    assert_eq!(messages(proto), expected);
}

fn relu_model() -> ModelProto {
    model(graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Relu", "r", &["x"], &["y"])],
    ))
}

#[test]
fn a_valid_model_passes() {
    check(relu_model(), &[]);
}

#[test]
fn undefined_input_is_named_with_node_index_name_and_op() {
    let m = model(graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Conv", "conv1", &["X", "W"], &["y"])],
    ));
    check(
        m,
        &[
            "node 0 'conv1' (Conv): input 'X' is not defined",
            "node 0 'conv1' (Conv): input 'W' is not defined",
        ],
    );
}

#[test]
fn cycle_is_rejected() {
    let nodes = vec![
        node("Relu", "c1", &["w"], &["v"]),
        node("Relu", "c2", &["v"], &["w"]),
        node("Identity", "out", &["x"], &["y"]),
    ];
    check(
        model(graph("main", &["x"], &["y"], nodes)),
        &[
            "node 0 'c1' (Relu): input 'w' is used before node 1 'c2' (Relu) defines it (nodes are not in topological order)",
            "node 0 'c1' (Relu) is on a cycle",
        ],
    );
}

#[test]
fn output_defined_twice_is_rejected() {
    let nodes = vec![
        node("Relu", "a", &["x"], &["y"]),
        node("Relu", "b", &["x"], &["y"]),
    ];
    check(
        model(graph("main", &["x"], &["y"], nodes)),
        &["node 1 'b' (Relu): output 'y' is already defined (not SSA)"],
    );
}

#[test]
fn missing_opset_import_is_rejected() {
    let mut custom = node("Mystery", "m", &["x"], &["y"]);
    custom.domain = Some("com.example".into());
    check(
        model(graph("main", &["x"], &["y"], vec![custom])),
        &["node 0 'm' (Mystery): no opset import for domain 'com.example'"],
    );
}

#[test]
fn ir3_initializer_must_be_an_input() {
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Add", "a", &["x", "w"], &["y"])],
    );
    g.initializer = vec![tensor("w", &[2])];
    let mut m = model(g);
    m.ir_version = Some(3);
    m.opset_import = vec![opset("", 8)];
    check(
        m.clone(),
        &["initializer 'w' is not a graph input (required below IR version 4; the model has 3)"],
    );
    m.graph.as_mut().expect("graph").input.push(vi("w", &[2]));
    check(m.clone(), &[]);
    m.ir_version = Some(4);
    m.graph.as_mut().expect("graph").input.pop();
    check(m, &[]);
}

#[test]
fn duplicate_attribute_is_rejected() {
    let mut n = node("LeakyRelu", "r", &["x"], &["y"]);
    n.attribute = vec![float_attr("alpha", 0.1), float_attr("alpha", 0.2)];
    check(
        model(graph("main", &["x"], &["y"], vec![n])),
        &["node 0 'r' (LeakyRelu): attribute 'alpha' appears more than once"],
    );
}

fn float_attr(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(value),
        ..Default::default()
    }
}

#[test]
fn attribute_fields_must_match_their_type() {
    let mut n = node("HardSigmoid", "r", &["x"], &["y"]);
    n.attribute = vec![
        AttributeProto {
            i: Some(1),
            ..float_attr("alpha", 0.5)
        },
        AttributeProto {
            name: Some("beta".into()),
            i: Some(1),
            ..Default::default()
        },
    ];
    check(
        model(graph("main", &["x"], &["y"], vec![n])),
        &[
            "node 0 'r' (HardSigmoid): attribute 'alpha' is declared FLOAT but sets field 'i'",
            "node 0 'r' (HardSigmoid): attribute 'alpha' sets more than one value field (f, i)",
            "node 0 'r' (HardSigmoid): attribute 'beta' has no type field",
        ],
    );
    // The schema knows both attributes; a missing type field is reported once, structurally.
}

#[test]
fn model_level_rules() {
    let mut m = relu_model();
    m.ir_version = None;
    check(m, &["the model has no IR version"]);
    let mut m = relu_model();
    m.ir_version = Some(15);
    check(
        m,
        &["IR version 15 is not supported (this checker knows 1 to 14)"],
    );
    let mut m = relu_model();
    m.opset_import.clear();
    check(
        m,
        &[
            "a model with IR version 8 must import at least one opset",
            "node 0 'r' (Relu): no opset import for domain ''",
        ],
    );
    let mut m = relu_model();
    m.metadata_props = vec![entry("k", "1"), entry("k", "2")];
    check(m, &["metadata key 'k' appears more than once"]);
}

#[test]
fn graph_level_rules() {
    let mut g = graph(
        "",
        &["x", "x"],
        &["y", "missing"],
        vec![node("", "r", &["x"], &["y"])],
    );
    g.output[0].r#type = None;
    g.input[1].r#type = Some(onnx_proto::TypeProto {
        value: Some(onnx_proto::type_proto::Value::TensorType(Default::default())),
        ..Default::default()
    });
    g.initializer = vec![tensor("w", &[2]), tensor("w", &[3])];
    g.initializer[1].raw_data = Some(bytes::Bytes::from_static(&[0; 4]));
    check(
        model(g),
        &[
            "the graph has no name",
            "graph input 'x' has a type without its 'elem_type' field",
            "graph output 'y' has no type",
            "graph input 'x' is declared more than once",
            "initializer 'w' is defined more than once",
            "tensor 'w' has 4 bytes of raw_data, fewer than the 12 its shape and type need",
            "node 0 'r' (): the node has no op_type",
            "graph output 'missing' is not defined in this graph",
        ],
    );
}

fn if_model(
    then_nodes: Vec<NodeProto>,
    then_outputs: &[&str],
    after: Vec<NodeProto>,
) -> ModelProto {
    let then_g = graph("then", &[], then_outputs, then_nodes);
    let else_g = graph(
        "else",
        &[],
        &["e"],
        vec![node("Identity", "id", &["x"], &["e"])],
    );
    let mut if_node = node("If", "if", &["cond"], &["y"]);
    if_node.attribute = vec![
        graph_attr("then_branch", then_g),
        graph_attr("else_branch", else_g),
    ];
    let mut nodes = vec![if_node];
    nodes.extend(after);
    let mut g = graph("main", &["x"], &["y"], nodes);
    g.input.push(ValueInfoProtoBool::cond());
    model(g)
}

struct ValueInfoProtoBool;
impl ValueInfoProtoBool {
    fn cond() -> onnx_proto::ValueInfoProto {
        onnx_proto::ValueInfoProto {
            name: Some("cond".into()),
            r#type: Some(tensor_type(onnx_proto::tensor_proto::DataType::Bool, &[])),
            ..Default::default()
        }
    }
}

#[test]
fn subgraphs_see_outer_names_defined_before_their_node() {
    check(
        if_model(vec![node("Relu", "r", &["x"], &["t"])], &["t"], vec![]),
        &[],
    );
    check(
        if_model(
            vec![node("Add", "add", &["x", "later"], &["t"])],
            &["t"],
            vec![node("Relu", "late", &["x"], &["later"])],
        ),
        &["node 0 'if' (If) attribute 'then_branch': node 0 'add' (Add): input 'later' is not defined"],
    );
}

#[test]
fn subgraph_outputs_may_not_reuse_outer_names_or_pass_them_through() {
    check(
        if_model(vec![node("Relu", "r", &["x"], &["cond"])], &["cond"], vec![]),
        &["node 0 'if' (If) attribute 'then_branch': node 0 'r' (Relu): output 'cond' reuses a name of an enclosing graph"],
    );
    check(
        if_model(vec![], &["x"], vec![]),
        &["node 0 'if' (If) attribute 'then_branch': graph output 'x' is not defined in this graph (it is read from an enclosing graph; pass it through an Identity)"],
    );
}

fn function(name: &str, calls: &str) -> FunctionProto {
    let mut call = node(calls, "call", &["a"], &["b"]);
    call.domain = Some("custom".into());
    FunctionProto {
        name: Some(name.into()),
        domain: Some("custom".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        node: vec![call],
        opset_import: vec![opset("custom", 1)],
        ..Default::default()
    }
}

#[test]
fn functions_are_checked() {
    let mut m = relu_model();
    m.functions = vec![
        function("F", "G"),
        function("G", "F"),
        function("G", "Relu"),
    ];
    let mut bad = function("H", "Relu");
    bad.node[0].domain = None;
    bad.input.push("a".into());
    m.functions.push(bad);
    check(
        m,
        &[
            "function 'custom:G' is defined more than once",
            "model-local functions call each other in a cycle: custom:F -> custom:G -> custom:F",
            "function 'custom:H': function 'custom:H' lists input 'a' more than once",
            "function 'custom:H': node 0 'call' (Relu): no opset import for domain ''",
        ],
    );
}

#[test]
fn use_before_definition_is_reported_and_fixed_by_sorting() {
    let nodes = vec![
        node("Relu", "second", &["t"], &["y"]),
        node("Relu", "first", &["x"], &["t"]),
    ];
    let proto = model(graph("main", &["x"], &["y"], nodes));
    check(
        proto.clone(),
        &["node 0 'second' (Relu): input 't' is used before node 1 'first' (Relu) defines it (nodes are not in topological order)"],
    );
    let mut ir = Model::from_proto(proto).expect("converts");
    assert_eq!(ir.graph.sort_topologically(), Ok(true));
    assert_eq!(check_model(&ir), Ok(()));
    let names: Vec<&str> = ir
        .graph
        .nodes_in_order()
        .map(|(_, n)| n.name_or_empty())
        .collect();
    assert_eq!(names, ["first", "second"]);
}

#[test]
fn topological_order_is_stable_and_names_a_node_on_a_cycle() {
    // d depends on nothing, b on a; a after b in the file: only b moves.
    let nodes = vec![
        node("Relu", "d", &["x"], &["d_out"]),
        node("Relu", "b", &["a_out"], &["b_out"]),
        node("Relu", "a", &["x"], &["a_out"]),
        node("Relu", "c", &["x"], &["c_out"]),
    ];
    let ir = Model::from_proto(model(graph("main", &["x"], &["b_out"], nodes))).expect("converts");
    let order = ir.graph.topological_order().expect("acyclic");
    let names: Vec<&str> = order
        .iter()
        .map(|&id| ir.graph.node(id).name_or_empty())
        .collect();
    assert_eq!(names, ["d", "a", "b", "c"]);

    let nodes = vec![
        node("Relu", "start", &["x"], &["s"]),
        node("Add", "c1", &["s", "w"], &["v"]),
        node("Relu", "c2", &["v"], &["w"]),
    ];
    let ir = Model::from_proto(model(graph("main", &["x"], &["w"], nodes))).expect("converts");
    let err = ir.graph.topological_order().expect_err("cycle");
    assert!(matches!(err, IrError::Cycle { index: 1, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "graph 'main' has a cycle: node 1 'c1' (Add) depends on itself"
    );
}

#[test]
fn subgraph_reads_are_implicit_dependencies() {
    // The If's branch reads `late`, produced by a node after the If in the file.
    let mut m = if_model(
        vec![node("Add", "add", &["x", "late"], &["t"])],
        &["t"],
        vec![node("Relu", "late_node", &["x"], &["late"])],
    );
    let mut ir = Model::from_proto(m.clone()).expect("converts");
    assert_eq!(ir.graph.sort_topologically(), Ok(true));
    let names: Vec<&str> = ir
        .graph
        .nodes_in_order()
        .map(|(_, n)| n.name_or_empty())
        .collect();
    assert_eq!(names, ["late_node", "if"]);
    assert_eq!(check_model(&ir), Ok(()));
    m.graph.as_mut().expect("graph").node.swap(0, 1);
    check(m, &[]);
}

#[test]
fn inconsistent_handles_are_reported_not_panicked_on() {
    let mut g = Graph::new("main");
    let x = g.add_value(Value::typed(
        "x",
        tensor_type(onnx_proto::tensor_proto::DataType::Float, &[2]),
    ));
    g.inputs.push(x);
    g.outputs.push(ValueId(7));
    g.add_node(Node::new("Relu", vec![Some(x)], vec![Some(ValueId(9))]));
    let model = Model::new(8, vec![onnx_ir::OpsetImport::new("", 17)], g);
    let errors = check_model(&model).expect_err("dangling handles");
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "graph output 0: value handle 7 is out of range",
            "node 0 output 0: value handle 9 is out of range",
        ]
    );
    assert!(matches!(
        errors[0],
        CheckError::InvalidHandle {
            what: "value",
            index: 7,
            ..
        }
    ));
}

#[test]
fn subgraph_inputs_may_reuse_outer_names() {
    let body = graph(
        "body",
        &["x"],
        &["o"],
        vec![node("Identity", "i", &["x"], &["o"])],
    );
    let mut scan = node("Scan", "scan", &["x"], &["y"]);
    scan.attribute = vec![graph_attr("body", body), int_attr("num_scan_inputs", 1)];
    check(model(graph("main", &["x"], &["y"], vec![scan])), &[]);
}
