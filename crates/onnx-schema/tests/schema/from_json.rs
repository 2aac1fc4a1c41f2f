//! `SchemaRegistry::from_json` on small hand-made tables: what survives, and the typed error for
//! each kind of damage.

use base64::Engine as _;
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, GraphProto, Message, NodeProto, TensorProto};
use onnx_schema::{Error, SchemaRegistry};
use serde_json::{json, Value};

fn b64(message: &impl Message) -> String {
    base64::engine::general_purpose::STANDARD.encode(message.encode_to_vec())
}

/// A one-schema table: `Foo-3` in domain "com.example" with the given attributes.
fn table(attributes: Value) -> Value {
    json!({
        "format_version": 1,
        "onnx_version": "test",
        "opset_versions": {"com.example": {"min": 1, "max": 3}},
        "version_table": [],
        "schemas": [schema_json("Foo", 3, attributes)]
    })
}

fn schema_json(name: &str, since_version: i64, attributes: Value) -> Value {
    json!({
        "domain": "com.example", "name": name, "since_version": since_version,
        "deprecated": false, "support_level": "COMMON", "node_determinism": "Deterministic",
        "min_input": 1, "max_input": 1, "min_output": 1, "max_output": 1,
        "inputs": [{"name": "X", "type_str": "T", "option": "Single",
                    "is_homogeneous": true, "min_arity": 1}],
        "outputs": [{"name": "Y", "type_str": "T", "option": "Single",
                     "is_homogeneous": true, "min_arity": 1}],
        "attributes": attributes,
        "type_constraints": [{"type_param": "T", "allowed": ["tensor(float)"]}],
        "has_function": false, "has_context_dependent_function": false,
        "has_type_and_shape_inference_function": true, "has_data_propagation_function": false,
        "function_bodies": [], "context_dependent_functions": []
    })
}

fn parse(value: &Value) -> Result<SchemaRegistry, Error> {
    SchemaRegistry::from_json(&value.to_string())
}

#[test]
fn tensor_and_graph_defaults_survive() {
    let tensor = TensorProto {
        dims: vec![2],
        data_type: Some(1),
        float_data: vec![1.5, -2.0],
        name: Some("w".into()),
        ..Default::default()
    };
    let tensor_default = AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(tensor),
        ..Default::default()
    };
    let graph_default = AttributeProto {
        name: Some("body".into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(GraphProto {
            name: Some("g".into()),
            node: vec![NodeProto {
                op_type: Some("Identity".into()),
                input: vec!["a".into()],
                output: vec!["b".into()],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let reg = parse(&table(json!([
        {"name": "body", "type": "GRAPH", "required": false, "default": b64(&graph_default)},
        {"name": "value", "type": "TENSOR", "required": false, "default": b64(&tensor_default)},
    ])))
    .expect("valid table");
    let foo = reg
        .lookup("com.example", "Foo", 7)
        .expect("Foo-3 binds at 7");
    assert_eq!(
        foo.attribute("value").and_then(|a| a.default.as_ref()),
        Some(&tensor_default)
    );
    assert_eq!(
        foo.attribute("body").and_then(|a| a.default.as_ref()),
        Some(&graph_default)
    );
    assert_eq!(
        foo.attribute("body").map(|a| a.ty),
        Some(AttributeType::Graph)
    );
    assert_eq!(reg.len(), 1);
    assert_eq!(reg.max_opset("com.example"), Some(3));
    assert!(reg.lookup("com.example", "Foo", 2).is_none());
}

#[test]
fn malformed_json_is_a_json_error() {
    let err = SchemaRegistry::from_json("{\"format_version\": 1,").unwrap_err();
    assert!(matches!(err, Error::Json { .. }), "{err}");
    let mut missing_field = table(json!([]));
    if let Some(map) = missing_field.as_object_mut() {
        map.remove("schemas");
    }
    assert!(matches!(parse(&missing_field), Err(Error::Json { .. })));
}

#[test]
fn another_format_version_is_refused() {
    let mut t = table(json!([]));
    t["format_version"] = json!(2);
    assert!(matches!(
        parse(&t),
        Err(Error::FormatVersion {
            found: 2,
            expected: 1
        })
    ));
}

#[test]
fn bad_base64_names_schema_and_field() {
    let t = table(json!([{"name": "alpha", "type": "FLOAT", "required": false, "default": "@@"}]));
    let err = parse(&t).unwrap_err();
    let Error::Base64 { schema, field, .. } = &err else {
        panic!("expected Error::Base64, got {err:?}");
    };
    assert_eq!(schema.to_string(), "com.example:Foo-3");
    assert_eq!(field, "attributes.alpha.default");
}

#[test]
fn bytes_that_are_not_the_message_are_a_decode_error() {
    // 0x0a 0x05 announces a 5-byte field but the input ends: truncated protobuf.
    let truncated = base64::engine::general_purpose::STANDARD.encode([0x0a, 0x05, b'a']);
    let t = table(json!([{"name": "a", "type": "INT", "required": false, "default": truncated}]));
    assert!(matches!(
        parse(&t),
        Err(Error::Decode {
            message: "AttributeProto",
            ..
        })
    ));
}

#[test]
fn unknown_enum_strings_are_reported() {
    let t = table(json!([{"name": "a", "type": "COMPLEX", "required": false, "default": null}]));
    let err = parse(&t).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownValue { field, value, .. }
            if field == "attributes.a.type" && value == "COMPLEX"),
        "{err}"
    );
    let mut t = table(json!([]));
    t["schemas"][0]["inputs"][0]["option"] = json!("Sometimes");
    assert!(matches!(parse(&t), Err(Error::UnknownValue { .. })));
    let mut t = table(json!([]));
    t["schemas"][0]["support_level"] = json!("LEGACY");
    assert!(matches!(parse(&t), Err(Error::UnknownValue { .. })));
}

#[test]
fn out_of_range_numbers_are_reported() {
    let mut t = table(json!([]));
    t["schemas"][0]["min_input"] = json!(-1);
    assert!(matches!(
        parse(&t),
        Err(Error::OutOfRange { value: -1, .. })
    ));
    let mut t = table(json!([]));
    t["schemas"][0]["since_version"] = json!(0);
    assert!(matches!(parse(&t), Err(Error::OutOfRange { value: 0, .. })));
}

#[test]
fn duplicates_and_unsorted_lists_are_inconsistent() {
    let mut t = table(json!([]));
    t["schemas"] = json!([
        schema_json("Foo", 3, json!([])),
        schema_json("Foo", 3, json!([]))
    ]);
    let err = parse(&t).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { .. }), "{err}");
    assert!(err.to_string().contains("com.example:Foo-3"), "{err}");

    let unsorted = json!([
        {"name": "b", "type": "INT", "required": true, "default": null},
        {"name": "a", "type": "INT", "required": true, "default": null},
    ]);
    assert!(matches!(
        parse(&table(unsorted)),
        Err(Error::Inconsistent { .. })
    ));
}

#[test]
fn merge_joins_tables_and_rejects_a_version_in_both() {
    let onnx = parse(&table(json!([]))).expect("valid table");
    let mut runtime = table(json!([]));
    runtime["onnxruntime_version"] = json!("test-ort");
    runtime["opset_versions"] = json!({"com.example": {"min": 1, "max": 5}});
    runtime["schemas"] = json!([schema_json("Foo", 5, json!([]))]);
    let runtime = parse(&runtime).expect("valid onnxruntime table");
    assert_eq!(runtime.onnxruntime_version(), Some("test-ort"));
    assert!(runtime.iter().all(|s| s.is_onnxruntime()));
    let merged = onnx.clone().merge(runtime).expect("no version in both");
    assert_eq!(merged.len(), 2);
    assert_eq!(merged.max_opset("com.example"), Some(5));
    assert_eq!(merged.onnxruntime_version(), Some("test-ort"));
    let bound = |opset| {
        merged
            .lookup("com.example", "Foo", opset)
            .map(|s| (s.since_version, s.is_onnxruntime()))
    };
    assert_eq!(bound(4), Some((3, false)));
    assert_eq!(bound(5), Some((5, true)));
    let err = onnx.clone().merge(onnx).expect_err("Foo-3 twice");
    assert!(err.to_string().contains("com.example:Foo-3"), "{err}");
}
