//! `type_str_of` against every type string in the table, through a test-only parser that
//! follows onnx's `DataTypeUtils::FromString`.

use std::collections::BTreeSet;

use onnx_proto::type_proto::{Map, Opaque, Optional, Sequence, SparseTensor, Tensor, Value};
use onnx_proto::TypeProto;
use onnx_schema::{element_type_from_name, registry, type_str_of};

fn elem(name: &str) -> i32 {
    match element_type_from_name(name) {
        Some(t) => t as i32,
        None => panic!("unknown element type {name:?}"),
    }
}

fn boxed(inner: &str) -> Option<Box<TypeProto>> {
    Some(Box::new(type_proto(inner)))
}

/// Builds the `TypeProto` a canonical type string denotes.
fn type_proto(s: &str) -> TypeProto {
    let inner = |prefix: &str| {
        s.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(')'))
    };
    let value = if let Some(e) = inner("seq(") {
        Value::SequenceType(Box::new(Sequence {
            elem_type: boxed(e),
        }))
    } else if let Some(e) = inner("optional(") {
        Value::OptionalType(Box::new(Optional {
            elem_type: boxed(e),
        }))
    } else if let Some(kv) = inner("map(") {
        let (k, v) = kv.split_once(',').expect("map has a comma");
        Value::MapType(Box::new(Map {
            key_type: Some(elem(k)),
            value_type: boxed(v),
        }))
    } else if let Some(e) = inner("sparse_tensor(") {
        Value::SparseTensorType(SparseTensor {
            elem_type: Some(elem(e)),
            shape: None,
        })
    } else if let Some(e) = inner("tensor(") {
        Value::TensorType(Tensor {
            elem_type: Some(elem(e)),
            shape: None,
        })
    } else if let Some(dn) = inner("opaque(") {
        let (domain, name) = dn.split_once(',').unwrap_or(("", dn));
        Value::OpaqueType(Opaque {
            domain: Some(domain.to_string()).filter(|d| !d.is_empty()),
            name: Some(name.to_string()),
        })
    } else {
        panic!("not a canonical type string: {s:?}")
    };
    TypeProto {
        value: Some(value),
        ..Default::default()
    }
}

fn all_type_strings() -> BTreeSet<String> {
    let mut strings = BTreeSet::new();
    for s in registry().iter() {
        for tc in &s.type_constraints {
            strings.extend(tc.allowed.iter().cloned());
        }
        for p in s.inputs.iter().chain(&s.outputs) {
            if s.type_constraints
                .iter()
                .all(|tc| tc.type_param != p.type_str)
            {
                strings.insert(p.type_str.clone());
            }
        }
    }
    strings
}

#[test]
fn type_str_of_round_trips_every_type_string_in_the_table() {
    let strings = all_type_strings();
    // onnx 1.23.2 uses 120 distinct type strings (the 6 ML map strings canonicalised);
    // onnxruntime 1.31.1's own schemas add 6 (SparseToDenseMatMul's sparse_tensor(...) types).
    assert_eq!(strings.len(), 126);
    assert!(strings.contains("sparse_tensor(float)"));
    for s in &strings {
        assert_eq!(type_str_of(&type_proto(s)).as_deref(), Some(s.as_str()));
    }
}

#[test]
fn ml_map_types_are_canonical() {
    // onnx spells ZipMap's constraint "seq(map(string, float))"; DataTypeUtils::ToString of
    // the type it denotes (the value is a scalar tensor) is "seq(map(string,tensor(float)))".
    let zipmap = registry()
        .lookup("ai.onnx.ml", "ZipMap", 1)
        .expect("ZipMap-1");
    assert_eq!(
        zipmap.allowed_types("T"),
        Some(
            &[
                "seq(map(string,tensor(float)))".to_string(),
                "seq(map(int64,tensor(float)))".to_string()
            ][..]
        )
    );
    let strings = all_type_strings();
    assert!(strings.iter().all(|s| !s.contains(' ')));
    assert!(strings.contains("map(int64,tensor(double))"));
}

#[test]
fn sparse_and_opaque_types_render() {
    for s in ["sparse_tensor(float)", "opaque(com.x,Blob)", "opaque(Blob)"] {
        assert_eq!(type_str_of(&type_proto(s)).as_deref(), Some(s));
    }
}
