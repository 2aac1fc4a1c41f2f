//! ONNX type strings: rendering a `TypeProto` the way onnx's `DataTypeUtils::ToString` does
//! ("tensor(float)", "seq(tensor(int64))", "map(int64,tensor(float))", ...), and the names of
//! tensor element types. Shapes do not appear in type strings.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::type_proto::Value;
use onnx_proto::TypeProto;

/// Every element type with its type-string name, in enum order.
const ELEMENT_TYPE_NAMES: [(DataType, &str); 28] = [
    (DataType::Float, "float"),
    (DataType::Uint8, "uint8"),
    (DataType::Int8, "int8"),
    (DataType::Uint16, "uint16"),
    (DataType::Int16, "int16"),
    (DataType::Int32, "int32"),
    (DataType::Int64, "int64"),
    (DataType::String, "string"),
    (DataType::Bool, "bool"),
    (DataType::Float16, "float16"),
    (DataType::Double, "double"),
    (DataType::Uint32, "uint32"),
    (DataType::Uint64, "uint64"),
    (DataType::Complex64, "complex64"),
    (DataType::Complex128, "complex128"),
    (DataType::Bfloat16, "bfloat16"),
    (DataType::Float8e4m3fn, "float8e4m3fn"),
    (DataType::Float8e4m3fnuz, "float8e4m3fnuz"),
    (DataType::Float8e5m2, "float8e5m2"),
    (DataType::Float8e5m2fnuz, "float8e5m2fnuz"),
    (DataType::Uint4, "uint4"),
    (DataType::Int4, "int4"),
    (DataType::Float4e2m1, "float4e2m1"),
    (DataType::Float8e8m0, "float8e8m0"),
    (DataType::Uint2, "uint2"),
    (DataType::Int2, "int2"),
    (DataType::Float6e2m3, "float6e2m3"),
    (DataType::Float6e3m2, "float6e3m2"),
];

/// The type-string name of an element type ("float", "int64", "bfloat16", ...); `None` for
/// `UNDEFINED`.
pub fn element_type_name(data_type: DataType) -> Option<&'static str> {
    ELEMENT_TYPE_NAMES
        .iter()
        .find(|(t, _)| *t == data_type)
        .map(|(_, name)| *name)
}

/// The element type a type-string name denotes ("float" -> `FLOAT`); `None` for unknown names.
pub fn element_type_from_name(name: &str) -> Option<DataType> {
    ELEMENT_TYPE_NAMES
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(t, _)| *t)
}

fn element_name_of(raw: Option<i32>) -> Option<&'static str> {
    DataType::try_from(raw?).ok().and_then(element_type_name)
}

/// Renders a `TypeProto` as an ONNX type string, as onnx's `DataTypeUtils::ToString` does:
/// "tensor(float)", "sparse_tensor(float)", "seq(tensor(int64))", "optional(seq(tensor(float)))",
/// "map(int64,tensor(float))", "opaque(domain,name)". These are the strings in
/// [`TypeConstraint::allowed`](crate::TypeConstraint::allowed).
///
/// `None` when the type is not set, an element type is `UNDEFINED` or unknown, or a nested type
/// is missing.
///
/// # Example
///
/// ```
/// use onnx_proto::type_proto::{Sequence, Tensor, Value};
/// use onnx_proto::TypeProto;
///
/// let float = TypeProto {
///     value: Some(Value::TensorType(Tensor { elem_type: Some(1), shape: None })),
///     ..Default::default()
/// };
/// let seq = TypeProto {
///     value: Some(Value::SequenceType(Box::new(Sequence { elem_type: Some(Box::new(float)) }))),
///     ..Default::default()
/// };
/// assert_eq!(onnx_schema::type_str_of(&seq).as_deref(), Some("seq(tensor(float))"));
/// ```
pub fn type_str_of(ty: &TypeProto) -> Option<String> {
    let mut out = String::new();
    write_type_str(ty, &mut out)?;
    Some(out)
}

fn write_type_str(ty: &TypeProto, out: &mut String) -> Option<()> {
    match ty.value.as_ref()? {
        Value::TensorType(t) => {
            out.push_str("tensor(");
            out.push_str(element_name_of(t.elem_type)?);
        }
        Value::SparseTensorType(t) => {
            out.push_str("sparse_tensor(");
            out.push_str(element_name_of(t.elem_type)?);
        }
        Value::SequenceType(s) => {
            out.push_str("seq(");
            write_type_str(s.elem_type.as_deref()?, out)?;
        }
        Value::OptionalType(o) => {
            out.push_str("optional(");
            write_type_str(o.elem_type.as_deref()?, out)?;
        }
        Value::MapType(m) => {
            out.push_str("map(");
            out.push_str(element_name_of(m.key_type)?);
            out.push(',');
            write_type_str(m.value_type.as_deref()?, out)?;
        }
        Value::OpaqueType(o) => {
            out.push_str("opaque(");
            if let Some(domain) = o.domain.as_deref().filter(|d| !d.is_empty()) {
                out.push_str(domain);
                out.push(',');
            }
            out.push_str(o.name.as_deref().unwrap_or_default());
        }
    }
    out.push(')');
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_proto::type_proto::{Map, Opaque, Optional, Tensor};

    fn tensor(elem: i32) -> TypeProto {
        TypeProto {
            value: Some(Value::TensorType(Tensor {
                elem_type: Some(elem),
                shape: None,
            })),
            ..Default::default()
        }
    }

    #[test]
    fn element_names_cover_every_data_type_but_undefined() {
        for raw in 0..=40 {
            let Ok(dt) = DataType::try_from(raw) else {
                assert!(element_name_of(Some(raw)).is_none());
                continue;
            };
            let name = element_type_name(dt);
            assert_eq!(name.is_none(), dt == DataType::Undefined, "{dt:?}");
            if let Some(name) = name {
                assert_eq!(name, dt.as_str_name().to_ascii_lowercase());
                assert_eq!(element_type_from_name(name), Some(dt));
            }
        }
    }

    #[test]
    fn renders_nested_types_and_rejects_incomplete_ones() {
        let map = TypeProto {
            value: Some(Value::MapType(Box::new(Map {
                key_type: Some(DataType::Int64 as i32),
                value_type: Some(Box::new(tensor(1))),
            }))),
            ..Default::default()
        };
        assert_eq!(
            type_str_of(&map).as_deref(),
            Some("map(int64,tensor(float))")
        );
        let opt = TypeProto {
            value: Some(Value::OptionalType(Box::new(Optional {
                elem_type: Some(Box::new(map)),
            }))),
            ..Default::default()
        };
        assert_eq!(
            type_str_of(&opt).as_deref(),
            Some("optional(map(int64,tensor(float)))")
        );
        let opaque = TypeProto {
            value: Some(Value::OpaqueType(Opaque {
                domain: Some("com.x".into()),
                name: Some("Blob".into()),
            })),
            ..Default::default()
        };
        assert_eq!(type_str_of(&opaque).as_deref(), Some("opaque(com.x,Blob)"));

        assert_eq!(type_str_of(&TypeProto::default()), None);
        assert_eq!(type_str_of(&tensor(0)), None, "UNDEFINED element type");
        assert_eq!(type_str_of(&tensor(999)), None, "unknown element type");
        let empty_optional = TypeProto {
            value: Some(Value::OptionalType(Box::new(Optional { elem_type: None }))),
            ..Default::default()
        };
        assert_eq!(type_str_of(&empty_optional), None);
    }
}
