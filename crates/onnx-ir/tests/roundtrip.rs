//! Lossless proto <-> IR conversion: every shared model, and synthetic protos that exercise
//! each corner of the format (metadata, doc strings, undefined names, sparse initializers,
//! functions, training info, annotations, unknown domains, subgraphs with outer reads, IR-3
//! initializers that are inputs, invalid graphs, unusual field presence).

mod common;

use bytes::Bytes;
use common::*;
use onnx_ir::{AttributeValue, Graph, Model, ValueId};
use onnx_proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, AttributeProto,
    DeviceConfigurationProto, FunctionProto, GraphProto, Message, ModelProto,
    NodeDeviceConfigurationProto, NodeProto, OperatorSetIdProto, SparseTensorProto,
    TensorAnnotation, TensorProto, TrainingInfoProto, ValueInfoProto,
};

/// Converts to IR and back, asserts the round trip, and returns the IR.
fn roundtrip(proto: &ModelProto) -> Model {
    let ir = Model::from_proto(proto.clone()).expect("conversion is total");
    let back = ir.to_proto();
    assert_eq!(&back, proto, "round trip changed the model");
    assert_eq!(back.encode_to_vec(), proto.encode_to_vec());
    ir
}

#[test]
fn every_shared_model_round_trips_losslessly() {
    let mut failures = Vec::new();
    let mut nan_models = 0;
    let shared = onnx_testdata::require_shared!();
    let paths = shared_models(&shared);
    for path in &paths {
        let loaded = onnx_proto::load_model(path).unwrap_or_else(|e| panic!("{e}"));
        let original = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ir = match Model::from_proto(loaded.model.clone()) {
            Ok(ir) => ir,
            Err(e) => {
                failures.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let back = ir.to_proto();
        // prost's `==` is float `==`: a model holding NaN (tree-ensemble membership values)
        // is unequal to itself, so for those the byte comparison alone decides.
        #[allow(clippy::eq_op)]
        let comparable = loaded.model == loaded.model;
        if !comparable {
            nan_models += 1;
        }
        if (comparable && back != loaded.model) || back.encode_to_vec() != original {
            failures.push(path.display().to_string());
        }
    }
    assert!(
        nan_models <= 2,
        "{nan_models} models are unequal to themselves"
    );
    assert!(
        failures.is_empty(),
        "{} of {} models do not round trip: {:?}",
        failures.len(),
        paths.len(),
        &failures[..failures.len().min(20)]
    );
}

#[test]
fn conversion_shares_tensor_bytes_instead_of_copying() {
    let shared = onnx_testdata::require_shared!();
    let path = shared.join("models/resnet18-opset13/model.onnx");
    let loaded = onnx_proto::load_model(&path).unwrap_or_else(|e| panic!("{e}"));
    let pointers = |g: &GraphProto| -> Vec<*const u8> {
        g.initializer
            .iter()
            .filter_map(|t| t.raw_data.as_ref())
            .filter(|r| !r.is_empty())
            .map(|r| r.as_ptr())
            .collect()
    };
    let original = pointers(loaded.model.graph.as_ref().expect("graph"));
    assert!(original.len() > 10, "resnet18 has raw initializers");
    let ir = Model::from_proto(loaded.model.clone()).expect("converts");
    let in_ir: Vec<*const u8> = ir
        .graph
        .initializers
        .iter()
        .filter_map(|&id| ir.graph.value(id).initializer.as_ref())
        .filter_map(|t| t.raw_data.as_ref())
        .filter(|r| !r.is_empty())
        .map(|r| r.as_ptr())
        .collect();
    assert_eq!(in_ir, original);
    let back = ir.to_proto();
    assert_eq!(pointers(back.graph.as_ref().expect("graph")), original);
}

#[test]
fn metadata_doc_strings_annotations_and_configuration_survive() {
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Relu", "r", &["x"], &["y"])],
    );
    g.doc_string = Some("graph doc".into());
    g.metadata_props = vec![entry("g", "1")];
    g.input[0].doc_string = Some("input doc".into());
    g.input[0].metadata_props = vec![entry("unit", "m")];
    g.node[0].doc_string = Some("node doc".into());
    g.node[0].metadata_props = vec![entry("n", "2")];
    g.node[0].device_configurations = vec![NodeDeviceConfigurationProto {
        configuration_id: Some("cfg".into()),
        pipeline_stage: Some(1),
        ..Default::default()
    }];
    g.quantization_annotation = vec![TensorAnnotation {
        tensor_name: Some("y".into()),
        quant_parameter_tensor_names: vec![entry("SCALE_TENSOR", "s")],
    }];
    let mut m = model(g);
    m.doc_string = Some("model doc".into());
    m.producer_name = Some("test".into());
    m.producer_version = Some("1".into());
    m.domain = Some("org.test".into());
    m.model_version = Some(7);
    m.metadata_props = vec![entry("author", "me"), entry("license", "none")];
    m.configuration = vec![DeviceConfigurationProto {
        name: Some("cfg".into()),
        num_devices: Some(2),
        device: vec!["a".into(), "b".into()],
    }];
    let ir = roundtrip(&m);
    let x = ir.graph.inputs[0];
    assert_eq!(ir.graph.value(x).doc_string.as_deref(), Some("input doc"));
    assert_eq!(ir.graph.quantization_annotation.len(), 1);
    assert_eq!(ir.opset_version("ai.onnx"), Some(17));
    assert_eq!(ir.opset_version(""), Some(17));
}

#[test]
fn value_info_of_undefined_names_becomes_values() {
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Relu", "r", &["x"], &["y"])],
    );
    g.value_info = vec![vi("y", &[2]), vi("ghost", &[3])];
    let ir = roundtrip(&model(g));
    let ghost = ir.graph.find_value("ghost").expect("ghost is a value");
    assert_eq!(ir.graph.value_info[1], ghost);
    let value = ir.graph.value(ghost);
    assert!(value.producer.is_none() && !value.is_outer);
    assert!(value.ty.is_some());
}

#[test]
fn sparse_initializers_and_dense_initializers_are_values() {
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Add", "a", &["x", "sp"], &["y"])],
    );
    g.initializer = vec![tensor("unused", &[2])];
    g.sparse_initializer = vec![SparseTensorProto {
        values: Some(tensor("sp", &[1])),
        indices: Some(TensorProto {
            name: Some("sp_indices".into()),
            dims: vec![1],
            data_type: Some(DataType::Int64 as i32),
            int64_data: vec![1],
            ..Default::default()
        }),
        dims: vec![2],
    }];
    let ir = roundtrip(&model(g));
    let sp = ir.graph.find_value("sp").expect("sp");
    assert_eq!(ir.graph.sparse_initializers, vec![sp]);
    let (_, add) = ir.graph.nodes_in_order().next().expect("a node");
    assert_eq!(add.inputs[1], Some(sp));
    assert!(ir.graph.value(sp).sparse_initializer.is_some());
}

fn function_proto() -> FunctionProto {
    FunctionProto {
        name: Some("Double".into()),
        domain: Some("custom".into()),
        overload: Some("v2".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        attribute: vec!["alpha".into()],
        attribute_proto: vec![int_attr("beta", 3)],
        node: vec![NodeProto {
            attribute: vec![AttributeProto {
                name: Some("to".into()),
                r#type: Some(AttributeType::Int as i32),
                ref_attr_name: Some("alpha".into()),
                ..Default::default()
            }],
            ..node("Add", "add", &["a", "a"], &["b"])
        }],
        opset_import: vec![opset("", 17)],
        value_info: vec![vi("b", &[2])],
        doc_string: Some("doubles".into()),
        metadata_props: vec![entry("f", "1")],
    }
}

#[test]
fn functions_round_trip_with_their_bodies() {
    let mut call = node("Double", "call", &["x"], &["y"]);
    call.domain = Some("custom".into());
    call.overload = Some("v2".into());
    let mut m = model(graph("main", &["x"], &["y"], vec![call]));
    m.opset_import.push(opset("custom", 1));
    m.functions = vec![function_proto()];
    let ir = roundtrip(&m);
    let f = ir
        .function("custom", "Double", "v2")
        .expect("function found by id");
    assert_eq!(f.body.inputs.len(), 1);
    let b = f.body.outputs[0];
    assert!(
        f.body.value(b).ty.is_some(),
        "value_info types attach to the body's values"
    );
    assert_eq!(f.opset_version("ai.onnx"), Some(17));
}

#[test]
fn training_info_is_kept() {
    let mut m = model(graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Relu", "r", &["x"], &["y"])],
    ));
    m.training_info = vec![TrainingInfoProto {
        initialization: Some(graph("init", &[], &["w"], vec![])),
        algorithm: Some(graph("algo", &["x"], &["y"], vec![])),
        initialization_binding: vec![entry("w", "w")],
        update_binding: vec![entry("w", "w2")],
    }];
    let ir = roundtrip(&m);
    assert_eq!(ir.training_info.len(), 1);
}

#[test]
fn unknown_domains_and_field_presence_are_kept() {
    let mut custom = node("Mystery", "m", &["x"], &["y"]);
    custom.domain = Some("com.example".into());
    let mut explicit_default = node("Relu", "r", &["y"], &["z"]);
    explicit_default.domain = Some(String::new());
    let mut unnamed = node("Relu", "", &["z"], &["w"]);
    unnamed.name = None;
    unnamed.op_type = Some("Relu".into());
    let mut g = graph(
        "main",
        &["x"],
        &["w"],
        vec![custom, explicit_default, unnamed],
    );
    g.doc_string = None;
    let mut m = model(g);
    m.opset_import = vec![
        OperatorSetIdProto {
            domain: None,
            version: Some(17),
        },
        opset("com.example", 1),
    ];
    let ir = roundtrip(&m);
    assert_eq!(ir.opset_version("ai.onnx"), Some(17));
    let domains: Vec<&str> = ir.graph.nodes_in_order().map(|(_, n)| &*n.domain).collect();
    assert_eq!(domains, ["com.example", "", ""]);
}

#[test]
fn if_and_loop_bodies_are_ir_graphs_reading_outer_values() {
    // then: Add(outer_a, outer_b); else: Identity(outer_a); loop body reads outer `a`.
    let then_g = graph(
        "then",
        &[],
        &["t"],
        vec![node("Add", "add", &["a", "b"], &["t"])],
    );
    let else_g = graph(
        "else",
        &[],
        &["e"],
        vec![node("Identity", "id", &["a"], &["e"])],
    );
    let mut if_node = node("If", "if", &["cond"], &["r"]);
    if_node.attribute = vec![
        graph_attr("then_branch", then_g),
        graph_attr("else_branch", else_g),
    ];
    let body = graph(
        "body",
        &["i", "c", "acc"],
        &["c_out", "acc_out"],
        vec![
            node("Identity", "c_id", &["c"], &["c_out"]),
            node("Add", "acc_add", &["acc", "a"], &["acc_out"]),
        ],
    );
    let mut loop_node = node("Loop", "loop", &["n", "", "r"], &["final"]);
    loop_node.attribute = vec![graph_attr("body", body)];
    let mut g = graph(
        "main",
        &["a", "b", "cond", "n"],
        &["final"],
        vec![if_node, loop_node],
    );
    g.node.insert(0, node("Identity", "pre", &["a"], &["a2"]));
    let ir = roundtrip(&model(g));
    let (_, if_ir) = ir.graph.nodes_in_order().nth(1).expect("if");
    let AttributeValue::Graph(then_ir) = &if_ir.attributes[0].value else {
        panic!("then_branch is an IR graph")
    };
    let outer: Vec<&str> = then_ir.outer_values().map(|(_, v)| &*v.name).collect();
    assert_eq!(outer, ["a", "b"]);
    let (outer_a, _) = then_ir.outer_values().next().expect("a");
    let main_a = ir.graph.find_value("a").expect("a");
    assert!(
        then_ir
            .value(outer_a)
            .name
            .ptr_eq(&ir.graph.value(main_a).name),
        "names are interned once per model, across subgraphs"
    );
    assert!(then_ir.value(outer_a).is_outer && !ir.graph.value(main_a).is_outer);
    let names: Vec<String> = if_ir
        .subgraphs()
        .flat_map(|g| g.outer_reads())
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, ["a", "b", "a"]);
    let (_, loop_ir) = ir.graph.nodes_in_order().nth(2).expect("loop");
    assert_eq!(loop_ir.inputs[1], None, "absent optional input");
    let body_ir = loop_ir.subgraphs().next().expect("body");
    assert_eq!(
        body_ir
            .outer_reads()
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>(),
        ["a"]
    );
}

#[test]
fn ir3_initializers_that_are_inputs_are_one_value() {
    let mut g = graph(
        "main",
        &["x", "w"],
        &["y"],
        vec![node("Add", "a", &["x", "w"], &["y"])],
    );
    g.initializer = vec![tensor("w", &[2])];
    let mut m = model(g);
    m.ir_version = Some(3);
    m.opset_import = vec![opset("", 8)];
    let ir = roundtrip(&m);
    let w = ir.graph.find_value("w").expect("w");
    assert_eq!(ir.graph.inputs[1], w);
    assert_eq!(ir.graph.initializers, vec![w]);
    assert!(ir.graph.value(w).initializer.is_some() && ir.graph.value(w).ty.is_some());
    assert_eq!(
        ir.graph.values.iter().filter(|v| &*v.name == "w").count(),
        1
    );
}

#[test]
fn invalid_graphs_convert_without_hiding_problems() {
    // Two nodes define `t`; `u` is used before it is defined; `v`/`w` form a cycle; `nope`
    // is never defined.
    let nodes = vec![
        node("Relu", "first", &["x"], &["t"]),
        node("Relu", "second", &["x"], &["t"]),
        node("Add", "early", &["t", "u"], &["s"]),
        node("Relu", "late", &["s"], &["u"]),
        node("Relu", "c1", &["w"], &["v"]),
        node("Relu", "c2", &["v"], &["w"]),
        node("Relu", "lost", &["nope"], &["y"]),
    ];
    let ir = roundtrip(&model(graph("main", &["x"], &["y"], nodes)));
    let g = &ir.graph;
    let ts: Vec<ValueId> = g
        .values_with_ids()
        .filter(|(_, v)| &*v.name == "t")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(ts.len(), 2, "two definitions of t are two values");
    let (_, early) = g.nodes_in_order().nth(2).expect("early");
    assert_eq!(
        early.inputs[0],
        Some(ts[1]),
        "a use sees the latest definition before it"
    );
    let u = early.inputs[1].expect("u");
    assert_eq!(
        g.value(u).producer.map(|(n, _)| n.0),
        Some(3),
        "use before definition"
    );
    let nope = g.find_value("nope").expect("undefined names are values");
    assert!(g.value(nope).producer.is_none() && !g.value(nope).is_outer);
}

#[test]
fn odd_field_presence_round_trips() {
    // A value_info without a name, an attribute typed GRAPH without a graph, an attribute
    // with a graph and a stray int, an input declared with two different types, an output
    // that is an input, a node output with an empty name, op_type absent.
    let mut g = graph("main", &["x"], &["x", "y"], vec![]);
    let mut odd = node("Split", "split", &["x"], &["y", ""]);
    odd.attribute = vec![
        AttributeProto {
            name: Some("empty_graph".into()),
            r#type: Some(AttributeType::Graph as i32),
            ..Default::default()
        },
        AttributeProto {
            i: Some(4),
            ..graph_attr(
                "both",
                graph(
                    "inner",
                    &[],
                    &["q"],
                    vec![node("Relu", "q", &["x"], &["q"])],
                ),
            )
        },
        AttributeProto {
            name: None,
            r#type: Some(AttributeType::Graphs as i32),
            graphs: vec![graph("g0", &[], &[], vec![]), graph("g1", &[], &[], vec![])],
            ..Default::default()
        },
    ];
    let mut absent_op = node("", "absent_op", &["x"], &["z"]);
    absent_op.op_type = None;
    g.node = vec![odd, absent_op];
    g.value_info = vec![
        ValueInfoProto::default(),
        vi("x", &[5]),
        ValueInfoProto {
            name: Some("z".into()),
            ..Default::default()
        },
    ];
    g.output[0].r#type = None;
    let ir = roundtrip(&model(g));
    let x = ir.graph.inputs[0];
    assert_eq!(
        ir.graph.outputs[0], x,
        "an output that is an input is the same value"
    );
    let (_, split) = ir.graph.nodes_in_order().next().expect("split");
    assert_eq!(split.outputs[1], None);
    assert!(matches!(
        split.attributes[0].value,
        AttributeValue::Proto(_)
    ));
    assert!(matches!(
        split.attributes[1].value,
        AttributeValue::Graph(_)
    ));
    assert!(matches!(&split.attributes[2].value, AttributeValue::Graphs(g) if g.len() == 2));
    assert_eq!(
        ir.graph.info_overrides.len(),
        3,
        "the unnamed entry, x re-declared twice"
    );
}

#[test]
fn graphs_built_in_code_convert_to_protos() {
    let mut g = Graph::new("built");
    let x = g.add_value(onnx_ir::Value::typed(
        "x",
        tensor_type(DataType::Float, &[2]),
    ));
    let y = g.add_value(onnx_ir::Value::typed(
        "y",
        tensor_type(DataType::Float, &[2]),
    ));
    g.inputs.push(x);
    g.outputs.push(y);
    let relu = g.add_node(onnx_ir::Node::new("Relu", vec![Some(x)], vec![Some(y)]));
    assert_eq!(g.value(y).producer, Some((relu, 0)));
    let proto = g.to_proto();
    assert_eq!(proto.node.len(), 1);
    assert_eq!(
        proto.node[0].domain, None,
        "the default domain is not spelled out"
    );
    assert_eq!(proto.node[0].input, ["x"]);
    assert_eq!(proto.output[0], vi("y", &[2]));
    let again = Graph::from_proto(proto.clone()).expect("converts");
    assert_eq!(again.to_proto(), proto);
    g.remove_node(relu);
    assert!(g.to_proto().node.is_empty());
    assert_eq!(g.value(y).producer, None);
}

#[test]
fn renamed_values_are_written_with_their_new_name() {
    let mut g = graph(
        "main",
        &["x"],
        &["y"],
        vec![node("Add", "a", &["x", "w"], &["y"])],
    );
    g.initializer = vec![tensor("w", &[2])];
    let mut ir = Model::from_proto(model(g)).expect("converts");
    let w = ir.graph.find_value("w").expect("w");
    ir.graph.value_mut(w).name = "weight".into();
    let back = ir.to_proto();
    let g = back.graph.expect("graph");
    assert_eq!(g.initializer[0].name.as_deref(), Some("weight"));
    assert_eq!(g.node[0].input, ["x", "weight"]);
    assert_eq!(g.initializer[0].raw_data, Some(Bytes::from(vec![0u8; 8])));
}

#[test]
fn nesting_beyond_the_limit_is_an_error_not_a_stack_overflow() {
    let nested = |depth: usize| {
        let mut g = graph(
            "leaf",
            &[],
            &["o"],
            vec![node("Identity", "id", &["x"], &["o"])],
        );
        for level in 0..depth {
            let mut wrapper = node("If", &format!("if{level}"), &["cond"], &["o"]);
            wrapper.attribute = vec![graph_attr("then_branch", g)];
            g = graph(&format!("level{level}"), &[], &["o"], vec![wrapper]);
        }
        model(g)
    };
    let ok = nested(onnx_ir::MAX_SUBGRAPH_DEPTH);
    roundtrip(&ok);
    let err = Model::from_proto(nested(onnx_ir::MAX_SUBGRAPH_DEPTH + 1)).expect_err("too deep");
    assert!(
        matches!(err, onnx_ir::IrError::NestingTooDeep { limit: 32, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(
            "graph 'level32' > node 'if32' (If) > attribute 'then_branch' > graph 'level31'"
        ),
        "{err}"
    );
}
