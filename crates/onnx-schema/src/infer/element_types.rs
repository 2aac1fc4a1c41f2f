//! Generic element-type inference from the schema's type constraints, for every operator:
//! inputs bind type parameters ("T" from input 0), outputs that share a parameter take its type,
//! outputs with a literal type ("tensor(int64)") or a single-type constraint take that type.
//!
//! Also checks that inputs bound to one parameter agree and that each input's type is allowed.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::type_proto::{self, Value};
use onnx_proto::TypeProto;

use super::context::NodeCtx;
use super::error::InferError;
use crate::schema::{FormalParameter, ParamOption};
use crate::type_str::{element_type_from_name, type_str_of};

/// The type with every shape removed (tensor shapes, also inside sequences and optionals).
pub(crate) fn strip_shapes(ty: &TypeProto) -> TypeProto {
    let value = ty.value.as_ref().map(|v| match v {
        Value::TensorType(t) => Value::TensorType(type_proto::Tensor {
            elem_type: t.elem_type,
            shape: None,
        }),
        Value::SparseTensorType(t) => Value::SparseTensorType(type_proto::SparseTensor {
            elem_type: t.elem_type,
            shape: None,
        }),
        Value::SequenceType(s) => Value::SequenceType(Box::new(type_proto::Sequence {
            elem_type: s.elem_type.as_deref().map(|e| Box::new(strip_shapes(e))),
        })),
        Value::OptionalType(o) => Value::OptionalType(Box::new(type_proto::Optional {
            elem_type: o.elem_type.as_deref().map(|e| Box::new(strip_shapes(e))),
        })),
        Value::MapType(m) => Value::MapType(Box::new(type_proto::Map {
            key_type: m.key_type,
            value_type: m.value_type.as_deref().map(|e| Box::new(strip_shapes(e))),
        })),
        Value::OpaqueType(o) => Value::OpaqueType(o.clone()),
    });
    TypeProto {
        value,
        denotation: None,
    }
}

/// Parses a literal type string of a tensor ("tensor(int64)") into a type.
pub(crate) fn parse_tensor_type_str(type_str: &str) -> Option<TypeProto> {
    let name = type_str.strip_prefix("tensor(")?.strip_suffix(')')?;
    let elem = element_type_from_name(name)?;
    Some(tensor_of(elem))
}

/// A tensor type of element type `elem` without a shape.
pub(crate) fn tensor_of(elem: DataType) -> TypeProto {
    TypeProto {
        value: Some(Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem as i32),
            shape: None,
        })),
        denotation: None,
    }
}

/// The formal parameter that node position `i` binds to (the last one when it is variadic).
pub(crate) fn formal_at(params: &[FormalParameter], i: usize) -> Option<&FormalParameter> {
    match params.get(i) {
        Some(p) => Some(p),
        None => params.last().filter(|p| p.option == ParamOption::Variadic),
    }
}

fn is_type_param(ctx: &NodeCtx<'_>, type_str: &str) -> bool {
    ctx.schema
        .type_constraints
        .iter()
        .any(|tc| tc.type_param == type_str)
}

/// The generic type of each output (shapes stripped), or `None` when it does not follow from the
/// schema and the inputs. Fails when two inputs bound to one parameter disagree, or an input's
/// type is not allowed.
pub(crate) fn generic_output_types(
    ctx: &NodeCtx<'_>,
) -> Result<Vec<Option<TypeProto>>, InferError> {
    let schema = ctx.schema;
    // (type parameter, its type string, its type, the input that bound it)
    let mut bound: Vec<(&str, String, TypeProto, usize)> = Vec::new();
    for i in 0..ctx.n_inputs() {
        let Some(formal) = formal_at(&schema.inputs, i) else {
            continue;
        };
        let Some(ty) = ctx.ty(i) else { continue };
        let Some(found) = type_str_of(ty) else {
            continue;
        };
        if let Some(allowed) = schema.allowed_types(&formal.type_str) {
            if !allowed.contains(&found) {
                return Err(InferError::TypeMismatch {
                    op: Box::new(schema.id()),
                    index: i,
                    name: formal.name.clone(),
                    found,
                    expected: format!("one of {}", allowed.join(", ")),
                });
            }
        }
        let heterogeneous = formal.option == ParamOption::Variadic && !formal.is_homogeneous;
        if heterogeneous || !is_type_param(ctx, &formal.type_str) {
            continue;
        }
        match bound.iter().find(|(p, ..)| *p == formal.type_str) {
            Some((_, seen, _, at)) if *seen != found => {
                return Err(InferError::TypeMismatch {
                    op: Box::new(schema.id()),
                    index: i,
                    name: formal.name.clone(),
                    found,
                    expected: format!(
                        "{seen} like input {at} ('{}'), both being type {}",
                        formal_at(&schema.inputs, *at).map_or("?", |f| f.name.as_str()),
                        formal.type_str
                    ),
                });
            }
            Some(_) => {}
            None => bound.push((&formal.type_str, found, strip_shapes(ty), i)),
        }
    }
    let mut out = Vec::with_capacity(ctx.n_outputs);
    for o in 0..ctx.n_outputs {
        let Some(formal) = formal_at(&schema.outputs, o) else {
            out.push(None);
            continue;
        };
        let ty = if let Some((.., ty, _)) = bound.iter().find(|(p, ..)| *p == formal.type_str) {
            Some(ty.clone())
        } else if let Some(ty) = parse_tensor_type_str(&formal.type_str) {
            Some(ty)
        } else {
            match schema.allowed_types(&formal.type_str) {
                Some([single]) => parse_tensor_type_str(single),
                _ => None,
            }
        };
        out.push(ty);
    }
    Ok(out)
}
