//! The syntax and its extensions, one construct at a time: every proto built here must come
//! back bit-exactly from `parse(print(...))`, and the printed text must contain what the
//! syntax documentation promises.

use bytes::Bytes;
use onnx_proto::{
    attribute_proto::AttributeType,
    simple_sharded_dim_proto::Dim,
    tensor_proto::{DataLocation, DataType, Segment},
    tensor_shape_proto::{dimension::Value as DimValue, Dimension},
    type_proto::{self, Value},
    AttributeProto, DeviceConfigurationProto, FunctionProto, GraphProto, IntIntListEntryProto,
    Message, ModelProto, NodeDeviceConfigurationProto, NodeProto, OperatorSetIdProto,
    ShardedDimProto, ShardingSpecProto, SimpleShardedDimProto, SparseTensorProto,
    StringStringEntryProto, TensorAnnotation, TensorProto, TensorShapeProto, TrainingInfoProto,
    TypeProto, ValueInfoProto,
};
use onnx_text::{
    normalize_for_text, parse_function, parse_graph, parse_model, parse_node, print_function,
    print_graph, print_model, print_node, ParseErrorKind, PrintOptions,
};

use crate::util::same_model;

/// Prints, parses back, and requires the exact model; returns the text.
fn round_trip(model: &ModelProto) -> String {
    let text = print_model(model, &PrintOptions::default());
    let back = match parse_model(&text) {
        Ok(m) => m,
        Err(e) => panic!("{}\n--- text ---\n{text}", e.render()),
    };
    assert!(
        same_model(&back, model),
        "round trip changed the model\n--- text ---\n{text}\n--- original ---\n{model:#?}\n--- parsed ---\n{back:#?}"
    );
    assert!(
        same_model(&normalize_for_text(model), model),
        "normalize changed a well-formed model"
    );
    text
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn entry(k: &str, v: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: s(k),
        value: s(v),
    }
}

fn tensor_type(elem: DataType, dims: &[&str]) -> TypeProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d.parse::<i64>() {
                Ok(v) => DimValue::DimValue(v),
                Err(_) if *d == "?" => return Dimension::default(),
                Err(_) => DimValue::DimParam(d.to_string()),
            }),
            denotation: None,
        })
        .collect();
    TypeProto {
        value: Some(Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem as i32),
            shape: Some(TensorShapeProto { dim }),
        })),
        denotation: None,
    }
}

fn value(name: &str, ty: TypeProto) -> ValueInfoProto {
    ValueInfoProto {
        name: s(name),
        r#type: Some(ty),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: s(op),
        domain: s(""),
        input: inputs.iter().map(|i| i.to_string()).collect(),
        output: outputs.iter().map(|o| o.to_string()).collect(),
        ..Default::default()
    }
}

fn model_with(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(10),
        opset_import: vec![OperatorSetIdProto {
            domain: s(""),
            version: Some(21),
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn graph_with(nodes: Vec<NodeProto>, initializer: Vec<TensorProto>) -> GraphProto {
    GraphProto {
        name: s("g"),
        node: nodes,
        initializer,
        input: vec![value("X", tensor_type(DataType::Float, &["N"]))],
        output: vec![value("Y", tensor_type(DataType::Float, &["N"]))],
        ..Default::default()
    }
}

fn raw(name: &str, dt: DataType, dims: &[i64], bytes: &[u8]) -> TensorProto {
    TensorProto {
        name: s(name),
        data_type: Some(dt as i32),
        dims: dims.to_vec(),
        raw_data: Some(Bytes::copy_from_slice(bytes)),
        ..Default::default()
    }
}

fn attr(name: &str, ty: AttributeType) -> AttributeProto {
    AttributeProto {
        name: s(name),
        r#type: Some(ty as i32),
        ..Default::default()
    }
}

#[test]
fn the_briefs_example_parses_and_prints_as_onnx_does() {
    let m = parse_model(
        r#"<ir_version: 8, opset_import: ["" : 17]> g (float[N, 3] X) => (float[N, 3] Y) { Y = Relu(X) }"#,
    )
    .unwrap_or_else(|e| panic!("{}", e.render()));
    let text = round_trip(&m);
    assert_eq!(
        text,
        "<\n   ir_version: 8,\n   opset_import: [\"\" : 17]\n>\ng (float[N,3] X) => (float[N,3] Y) {\n   Y = Relu (X)\n}"
    );
}

#[test]
fn every_element_type_round_trips_raw_and_typed() {
    let mut inits = Vec::new();
    for code in 1..=28 {
        let dt = DataType::try_from(code).unwrap_or(DataType::Undefined);
        if dt == DataType::String {
            continue;
        }
        let width = match code {
            1 | 6 | 12 | 14 => 4,
            7 | 11 | 13 | 15 => 8,
            4 | 5 | 10 | 16 => 2,
            _ => 1,
        } * if code == 14 || code == 15 { 2 } else { 1 };
        let bytes: Vec<u8> = (0..2 * width)
            .map(|i| (i * 37 + code as usize) as u8)
            .collect();
        inits.push(raw(&format!("raw{code}"), dt, &[2], &bytes));
        let mut typed = TensorProto {
            name: s(&format!("typed{code}")),
            data_type: Some(code),
            dims: vec![2],
            ..Default::default()
        };
        match code {
            1 | 14 => {
                typed.float_data = vec![1.5, -0.0, f32::INFINITY, 1e-45]
                    [..2 + 2 * usize::from(code == 14)]
                    .to_vec()
            }
            11 | 15 => {
                typed.double_data = vec![0.1, -1e300, f64::NEG_INFINITY, 5e-324]
                    [..2 + 2 * usize::from(code == 15)]
                    .to_vec()
            }
            7 => typed.int64_data = vec![i64::MIN, i64::MAX],
            12 | 13 => typed.uint64_data = vec![0, u64::MAX],
            _ => typed.int32_data = vec![i32::MIN, 255],
        }
        inits.push(typed);
    }
    inits.push(TensorProto {
        name: s("strings"),
        data_type: Some(DataType::String as i32),
        dims: vec![3],
        string_data: vec![
            Bytes::from_static(b"plain"),
            Bytes::from_static(b"quote \" backslash \\ newline \n tab \t"),
            Bytes::from_static(b"\xff\x00 not utf-8"),
        ],
        ..Default::default()
    });
    let text = round_trip(&model_with(graph_with(
        vec![node("Relu", &["X"], &["Y"])],
        inits,
    )));
    assert!(text.contains("\"\\xff\u{0} not utf-8\""), "{text}");
    assert!(text.contains("float16[2] raw10 =  {"), "{text}");
}

#[test]
fn raw_data_that_decodes_to_no_values_is_kept_in_hex() {
    let odd = raw("odd", DataType::Float, &[1], &[1, 2, 3]);
    let undefined = raw("undefined_type", DataType::Undefined, &[2], &[9, 8]);
    let string_raw = raw("string_raw", DataType::String, &[1], b"abc");
    let mut unknown = raw("unknown_type", DataType::Float, &[1], &[1, 2, 3, 4]);
    unknown.data_type = Some(99);
    let text = round_trip(&model_with(graph_with(
        vec![node("Relu", &["X"], &["Y"])],
        vec![odd, undefined, string_raw, unknown],
    )));
    assert!(text.contains(r#"raw_data: "010203""#), "{text}");
    assert!(text.contains("data_type: 99"), "{text}");
}

#[test]
fn float_values_keep_every_bit() {
    let floats = [
        0.1f32,
        -0.0,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7fa0_0001),
        f32::from_bits(0xff80_0001),
        f32::INFINITY,
        123456789.0,
    ];
    let mut a = attr("values", AttributeType::Floats);
    a.floats = floats.to_vec();
    let mut f = attr("alpha", AttributeType::Float);
    f.f = Some(f32::from_bits(0x7fc0_0005));
    let mut n = node("Custom", &["X"], &["Y"]);
    n.attribute = vec![a, f];
    let bytes: Vec<u8> = floats.iter().flat_map(|v| v.to_le_bytes()).collect();
    let t = raw("w", DataType::Float, &[11], &bytes);
    let text = round_trip(&model_with(graph_with(vec![n], vec![t])));
    assert!(text.contains("nan(0x7fa00001)"), "{text}");
    assert!(text.contains("-nan"), "{text}");
    assert!(text.contains("123456792"), "{text}");
}

#[test]
fn tensor_fields_beyond_values_are_annotated() {
    let mut external = TensorProto {
        name: s("ext"),
        data_type: Some(DataType::Float as i32),
        dims: vec![4],
        data_location: Some(DataLocation::External as i32),
        external_data: vec![
            entry("location", "weights.bin"),
            entry("offset", "0"),
            entry("length", "16"),
        ],
        ..Default::default()
    };
    external.doc_string = s("stored outside");
    let mut no_location = external.clone();
    no_location.name = s("ext_no_location");
    no_location.data_location = None;
    let mut default_location = raw("default_location", DataType::Int8, &[1], &[255]);
    default_location.data_location = Some(DataLocation::Default as i32);
    default_location.segment = Some(Segment {
        begin: Some(0),
        end: Some(1),
    });
    default_location.metadata_props = vec![entry("k", "v")];
    let mut unnamed = raw("", DataType::Int64, &[], &7i64.to_le_bytes());
    unnamed.name = None;
    let text = round_trip(&model_with(graph_with(
        vec![node("Relu", &["X"], &["Y"])],
        vec![external, no_location, default_location, unnamed],
    )));
    assert!(
        text.contains(
            r#"float[4] ext = ["location": "weights.bin", "offset": "0", "length": "16"]"#
        ),
        "{text}"
    );
    assert!(text.contains("data_location: unset"), "{text}");
    assert!(text.contains("segment: {begin: 0, end: 1}"), "{text}");
}

#[test]
fn presence_defaults_follow_the_majority() {
    // Three nodes without a domain field, one with an empty one.
    let mut nodes: Vec<NodeProto> = (0..3)
        .map(|i| {
            let mut n = node("Relu", &["X"], &[&format!("Y{i}")]);
            n.domain = None;
            n
        })
        .collect();
    nodes.push(node("Relu", &["X"], &["Y"]));
    let text = round_trip(&model_with(graph_with(nodes.clone(), vec![])));
    assert!(
        text.starts_with("#@ default_node_domain: unset\n<"),
        "{text}"
    );
    assert_eq!(text.matches("#@ domain: \"\"").count(), 1, "{text}");
    // The other way round: one absent domain among empty ones.
    for n in &mut nodes {
        n.domain = n.domain.is_none().then(String::new);
    }
    let text = round_trip(&model_with(graph_with(nodes, vec![])));
    assert!(!text.contains("default_node_domain"), "{text}");
    assert_eq!(text.matches("#@ domain: unset").count(), 1, "{text}");
}

#[test]
fn attributes_of_every_type() {
    let t = |name: Option<&str>| TensorProto {
        name: name.map(str::to_string),
        data_type: Some(DataType::Int64 as i32),
        dims: vec![2],
        int64_data: vec![1, -2],
        ..Default::default()
    };
    let sub = |name: &str| GraphProto {
        name: s(name),
        node: vec![node("Identity", &["X"], &["Z"])],
        output: vec![value("Z", tensor_type(DataType::Float, &["N"]))],
        ..Default::default()
    };
    let sparse = SparseTensorProto {
        values: Some(t(Some("sparse_values"))),
        indices: Some(TensorProto {
            name: None,
            data_type: Some(DataType::Int64 as i32),
            dims: vec![2],
            raw_data: Some(Bytes::from([0u8; 16].to_vec())),
            ..Default::default()
        }),
        dims: vec![10],
    };
    let mut attrs = Vec::new();
    let mut a = attr("i", AttributeType::Int);
    a.i = Some(-7);
    attrs.push(a);
    let mut a = attr("f", AttributeType::Float);
    a.f = Some(-0.0);
    attrs.push(a);
    let mut a = attr("s", AttributeType::String);
    a.s = Some(Bytes::from_static(b"multi\nline \"string\""));
    a.doc_string = s("a documented attribute");
    attrs.push(a);
    let mut a = attr("t", AttributeType::Tensor);
    a.t = Some(t(None));
    attrs.push(a);
    let mut a = attr("sp", AttributeType::SparseTensor);
    a.sparse_tensor = Some(sparse.clone());
    attrs.push(a);
    let mut a = attr("tp", AttributeType::TypeProto);
    a.tp = Some(tensor_type(DataType::Bfloat16, &["?", "3"]));
    attrs.push(a);
    let mut a = attr("empty_tp", AttributeType::TypeProto);
    a.tp = Some(TypeProto::default());
    attrs.push(a);
    let mut a = attr("fs", AttributeType::Floats);
    a.floats = vec![1.0, 2.5];
    attrs.push(a);
    let mut a = attr("is", AttributeType::Ints);
    a.ints = vec![];
    attrs.push(a);
    let mut a = attr("ss", AttributeType::Strings);
    a.strings = vec![Bytes::from_static(b"a"), Bytes::from_static(b"")];
    attrs.push(a);
    let mut a = attr("ts", AttributeType::Tensors);
    a.tensors = vec![t(Some("first")), t(None)];
    attrs.push(a);
    let mut a = attr("sps", AttributeType::SparseTensors);
    a.sparse_tensors = vec![sparse.clone(), SparseTensorProto::default()];
    attrs.push(a);
    let mut a = attr("tps", AttributeType::TypeProtos);
    a.type_protos = vec![tensor_type(DataType::Float, &[]), TypeProto::default()];
    attrs.push(a);
    let mut a = attr("r", AttributeType::Float);
    a.ref_attr_name = s("outer");
    attrs.push(a);
    let mut a = AttributeProto {
        name: s("untyped"),
        i: Some(3),
        ..Default::default()
    };
    a.doc_string = None;
    attrs.push(a);
    attrs.push(AttributeProto {
        name: None,
        r#type: Some(AttributeType::Ints as i32),
        ints: vec![1],
        ..Default::default()
    });
    let mut n = node("Custom", &["X"], &["Y"]);
    n.domain = s("com.example");
    n.attribute = attrs;
    let mut with_graphs = node("If", &["X"], &["W"]);
    let mut g = attr("then_branch", AttributeType::Graph);
    g.g = Some(sub("float"));
    let mut gs = attr("branches", AttributeType::Graphs);
    gs.graphs = vec![sub("nan"), sub("b2")];
    with_graphs.attribute = vec![g, gs];
    let text = round_trip(&model_with(graph_with(vec![n, with_graphs], vec![])));
    assert!(text.contains("r: float = @outer"), "{text}");
    assert!(text.contains("is: ints = []"), "{text}");
    assert!(
        text.contains(r#"then_branch: graph = "float" () =>"#),
        "{text}"
    );
}

#[test]
fn nodes_with_unusual_names_domains_and_extras() {
    let mut a = node("Op-With-Dash", &["X", ""], &["Y", "out put"]);
    a.domain = s("com.x-y");
    a.name = s("");
    let mut b = node("Relu", &["Y"], &[]);
    b.overload = s("");
    b.doc_string = s("has an empty overload");
    b.metadata_props = vec![entry("origin", "test")];
    let mut c = node("Relu", &["Y"], &["float"]);
    c.overload = s("v2");
    c.domain = s("ai.onnx.ml");
    c.device_configurations = vec![NodeDeviceConfigurationProto {
        configuration_id: s("cfg"),
        sharding_spec: vec![ShardingSpecProto {
            tensor_name: s("Y"),
            device: vec![0, 1],
            index_to_device_group_map: vec![IntIntListEntryProto {
                key: Some(0),
                value: vec![0, 1],
            }],
            sharded_dim: vec![ShardedDimProto {
                axis: Some(0),
                simple_sharding: vec![
                    SimpleShardedDimProto {
                        dim: Some(Dim::DimParam("N".into())),
                        num_shards: Some(2),
                    },
                    SimpleShardedDimProto {
                        dim: Some(Dim::DimValue(4)),
                        num_shards: None,
                    },
                ],
            }],
        }],
        pipeline_stage: Some(1),
    }];
    let mut d = node("", &["Y"], &["Z"]);
    d.op_type = None;
    d.domain = s("local");
    let text = round_trip(&model_with(graph_with(vec![a, b, c, d], vec![])));
    assert!(
        text.contains(r#"[""] Y, "out put" = "com.x-y"."Op-With-Dash" (X, "")"#),
        "{text}"
    );
    assert!(text.contains("float = ai.onnx.ml.Relu:v2 (Y)"), "{text}");
}

#[test]
fn graphs_values_and_types() {
    let seq = TypeProto {
        value: Some(Value::SequenceType(Box::new(type_proto::Sequence {
            elem_type: Some(Box::new(TypeProto {
                value: Some(Value::OptionalType(Box::new(type_proto::Optional {
                    elem_type: Some(Box::new(TypeProto {
                        value: Some(Value::MapType(Box::new(type_proto::Map {
                            key_type: Some(DataType::Int64 as i32),
                            value_type: Some(Box::new(tensor_type(DataType::Float, &[]))),
                        }))),
                        denotation: None,
                    })),
                }))),
                denotation: None,
            })),
        }))),
        denotation: None,
    };
    let unknown_rank = TypeProto {
        value: Some(Value::TensorType(type_proto::Tensor {
            elem_type: Some(DataType::Int8 as i32),
            shape: None,
        })),
        denotation: None,
    };
    let sparse = TypeProto {
        value: Some(Value::SparseTensorType(type_proto::SparseTensor {
            elem_type: Some(DataType::Float as i32),
            shape: Some(TensorShapeProto {
                dim: vec![Dimension {
                    value: Some(DimValue::DimValue(-1)),
                    denotation: None,
                }],
            }),
        })),
        denotation: None,
    };
    let opaque = |domain: Option<&str>, name: Option<&str>| TypeProto {
        value: Some(Value::OpaqueType(type_proto::Opaque {
            domain: domain.map(str::to_string),
            name: name.map(str::to_string),
        })),
        denotation: None,
    };
    let mut image = value(
        "image",
        tensor_type(DataType::Uint8, &["batch", "a b", "?"]),
    );
    image.doc_string = s("an image");
    image.metadata_props = vec![entry("layout", "NHW")];
    if let Some(t) = image.r#type.as_mut() {
        t.denotation = s("IMAGE");
        if let Some(Value::TensorType(tt)) = t.value.as_mut() {
            if let Some(shape) = tt.shape.as_mut() {
                shape.dim[0].denotation = s("DATA_BATCH");
            }
        }
    }
    let mut untyped = value("float", TypeProto::default());
    untyped.r#type = None;
    let mut nameless = value("", tensor_type(DataType::Float, &[]));
    nameless.name = None;
    let g = GraphProto {
        name: None,
        node: vec![node("Identity", &["seq"], &["out"])],
        input: vec![
            value("seq", seq),
            value("unknown_rank", unknown_rank),
            value("sparse", sparse),
            value("opaque1", opaque(Some("com.x"), Some("Thing"))),
            value("opaque2", opaque(None, Some("Thing"))),
            value("opaque3", opaque(None, None)),
            image,
            untyped,
        ],
        output: vec![value("out", tensor_type(DataType::Float, &[])), nameless],
        value_info: vec![value("mid", tensor_type(DataType::Double, &["N"]))],
        doc_string: s("graph docs"),
        metadata_props: vec![entry("a", "b")],
        sparse_initializer: vec![SparseTensorProto {
            values: Some(TensorProto {
                name: s("sparse_init"),
                data_type: Some(DataType::Float as i32),
                dims: vec![1],
                float_data: vec![3.0],
                ..Default::default()
            }),
            indices: None,
            dims: vec![5],
        }],
        quantization_annotation: vec![TensorAnnotation {
            tensor_name: s("mid"),
            quant_parameter_tensor_names: vec![
                entry("SCALE_TENSOR", "s"),
                entry("ZERO_POINT_TENSOR", "z"),
            ],
        }],
        ..Default::default()
    };
    let text = round_trip(&model_with(g));
    assert!(
        text.contains("seq(optional(map(int64, float))) seq"),
        "{text}"
    );
    assert!(text.contains("int8[] unknown_rank"), "{text}");
    assert!(text.contains("opaque(com.x,Thing) opaque1"), "{text}");
    assert!(text.contains(r#"uint8[batch,"a b",?] image"#), "{text}");
    assert!(text.contains(r#"  "float")"#), "{text}");
}

#[test]
fn model_fields_training_info_and_functions() {
    let function = FunctionProto {
        name: s("F"),
        domain: None,
        overload: s(""),
        input: vec!["x".into(), "float".into()],
        output: vec!["y".into()],
        attribute: vec!["plain".into(), "needs quotes".into()],
        attribute_proto: vec![{
            let mut a = attr("alpha", AttributeType::Float);
            a.f = Some(0.5);
            a
        }],
        node: vec![{
            let mut n = node("Mul", &["x", "float"], &["y"]);
            n.domain = None;
            n
        }],
        doc_string: s("function docs"),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(18),
        }],
        value_info: vec![value("y", tensor_type(DataType::Float, &["N"]))],
        metadata_props: vec![entry("fk", "fv")],
    };
    let mut unnamed_function = function.clone();
    unnamed_function.name = None;
    unnamed_function.domain = s("custom");
    unnamed_function.overload = None;
    let training = TrainingInfoProto {
        initialization: Some(GraphProto {
            name: s("init"),
            node: vec![node("Constant", &[], &["c"])],
            ..Default::default()
        }),
        algorithm: None,
        initialization_binding: vec![entry("w", "c")],
        update_binding: vec![],
    };
    let m = ModelProto {
        ir_version: None,
        opset_import: vec![
            OperatorSetIdProto {
                domain: None,
                version: Some(21),
            },
            OperatorSetIdProto {
                domain: s("custom"),
                version: None,
            },
        ],
        producer_name: s(""),
        producer_version: s("1.0"),
        domain: s("org.example"),
        model_version: Some(-1),
        doc_string: s("model \"docs\"\nsecond line"),
        graph: Some(graph_with(vec![node("Relu", &["X"], &["Y"])], vec![])),
        metadata_props: vec![entry("k", "v"), entry("", "")],
        training_info: vec![training, TrainingInfoProto::default()],
        functions: vec![function, unnamed_function],
        configuration: vec![DeviceConfigurationProto {
            name: s("two"),
            num_devices: Some(2),
            device: vec!["gpu:0".into(), "gpu:1".into()],
        }],
    };
    let text = round_trip(&m);
    if std::env::var_os("SHOW_TEXT").is_some() {
        println!("{text}");
    }
    assert!(
        text.contains("opset_import: [unset : 21, \"custom\" : unset]"),
        "{text}"
    );
    assert!(
        text.contains(
            "<plain,\"needs quotes\",alpha: float = 0.5>(x, \"float\") => (y) <float[N] y>"
        ),
        "{text}"
    );
    let no_graph = ModelProto {
        graph: None,
        ..Default::default()
    };
    let text = round_trip(&no_graph);
    assert!(text.starts_with("#@ graph: unset\n"), "{text}");
}

#[test]
fn standalone_graphs_functions_and_nodes() {
    let mut g = graph_with(vec![node("Relu", &["X"], &["Y"])], vec![]);
    g.node[0].domain = None;
    let text = print_graph(&g, &PrintOptions::default());
    assert_eq!(
        text,
        "#@ default_node_domain: unset\ng (float[N] X) => (float[N] Y) {\n   Y = Relu (X)\n}"
    );
    let back = parse_graph(&text).unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(back.encode_to_vec(), g.encode_to_vec());

    let f = FunctionProto {
        name: s("F"),
        domain: s("local"),
        input: vec!["a".into()],
        output: vec!["b".into()],
        node: vec![node("Neg", &["a"], &["b"])],
        opset_import: vec![OperatorSetIdProto {
            domain: s(""),
            version: Some(21),
        }],
        ..Default::default()
    };
    let text = print_function(&f, &PrintOptions::default());
    assert_eq!(
        text,
        "<\n  domain: \"local\",\n  opset_import: [\"\" : 21]\n>\nF (a) => (b)\n{\n   b = Neg (a)\n}"
    );
    let back = parse_function(&text).unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(back, f);

    let mut n = node("Conv", &["X", "W", ""], &["Y"]);
    n.name = s("conv0");
    n.domain = None;
    let mut strides = attr("strides", AttributeType::Ints);
    strides.ints = vec![2, 2];
    n.attribute = vec![strides];
    let text = print_node(&n, &PrintOptions::default());
    assert_eq!(
        text,
        "#@ domain: unset\n[conv0] Y = Conv <strides: ints = [2, 2]> (X, W, \"\")"
    );
    let back = parse_node(&text).unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(back, n);
}

#[test]
fn elided_tensors_print_but_do_not_parse() {
    let bytes: Vec<u8> = (0..400u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let m = model_with(graph_with(
        vec![node("Relu", &["X"], &["Y"])],
        vec![
            raw("big", DataType::Float, &[100], &bytes),
            raw("small", DataType::Float, &[1], &bytes[..4]),
        ],
    ));
    let options = PrintOptions {
        elide_tensors_above: Some(10),
    };
    let text = print_model(&m, &options);
    assert!(text.contains("float[100] big = ..."), "{text}");
    assert!(text.contains("float[1] small =  {0}"), "{text}");
    let err = parse_model(&text).expect_err("elided data cannot be parsed");
    assert_eq!(err.kind, ParseErrorKind::ElidedTensor("big".to_string()));
}

#[test]
fn malformed_protos_round_trip_to_their_normal_form() {
    // An attribute with an unknown type number and stray fields; a tensor with data in a
    // field its type does not read; a type without an element type.
    let mut a = AttributeProto {
        name: s("weird"),
        r#type: Some(99),
        i: Some(4),
        f: Some(1.0),
        ..Default::default()
    };
    a.ints = vec![1, 2];
    let mut n = node("Custom", &["X"], &["Y"]);
    n.attribute = vec![a];
    let t = TensorProto {
        name: s("t"),
        data_type: Some(DataType::Float as i32),
        dims: vec![1],
        float_data: vec![1.0],
        int64_data: vec![5],
        ..Default::default()
    };
    let mut g = graph_with(vec![n], vec![t]);
    g.value_info.push(value(
        "v",
        TypeProto {
            value: Some(Value::TensorType(type_proto::Tensor {
                elem_type: None,
                shape: None,
            })),
            denotation: None,
        },
    ));
    let m = model_with(g);
    let normal = normalize_for_text(&m);
    assert!(!same_model(&normal, &m));
    let text = print_model(&m, &PrintOptions::default());
    let back = parse_model(&text).unwrap_or_else(|e| panic!("{}", e.render()));
    assert!(same_model(&back, &normal), "{text}\n{back:#?}\n{normal:#?}");
    let g = normal.graph.unwrap_or_default();
    assert_eq!(
        g.node[0].attribute[0].r#type,
        Some(AttributeType::Float as i32)
    );
    assert_eq!(g.node[0].attribute[0].i, None);
    assert!(g.initializer[0].int64_data.is_empty());
}
