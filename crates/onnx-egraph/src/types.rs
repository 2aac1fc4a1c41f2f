//! Types of e-classes as `TypeProto`s (element type and shape with symbolic dims), and the
//! comparisons the analysis merge needs.

use onnx_proto::{
    tensor_shape_proto::{dimension::Value as Dim, Dimension},
    type_proto, TensorProto, TensorShapeProto, TypeProto,
};

/// A type as the model declares it, made safe to reason with: a negative `dim_value` (some
/// exporters write -1 for "unknown", and onnx.checker accepts it) is an unknown dimension,
/// never a size.
pub fn declared(t: &TypeProto) -> TypeProto {
    let mut t = t.clone();
    if let Some(type_proto::Value::TensorType(tt)) = &mut t.value {
        if let Some(shape) = &mut tt.shape {
            for d in shape.dim.iter_mut() {
                if matches!(d.value, Some(Dim::DimValue(v)) if v < 0) {
                    d.value = None;
                }
            }
        }
    }
    t
}

/// An inferred type with its unknown dims filled from the type the model declares for the value
/// (as onnx's shape inference merges value_info): the same element type and rank, and a dim the
/// inference left unknown takes the declared size or name. `None` when nothing changes.
pub fn refine(inferred: &TypeProto, declared: &TypeProto) -> Option<TypeProto> {
    let (Some(type_proto::Value::TensorType(i)), Some(type_proto::Value::TensorType(d))) =
        (&inferred.value, &declared.value)
    else {
        return None;
    };
    if i.elem_type != d.elem_type {
        return None;
    }
    let (Some(is), Some(ds)) = (&i.shape, &d.shape) else {
        return None;
    };
    if is.dim.len() != ds.dim.len() {
        return None;
    }
    let mut out = inferred.clone();
    let mut changed = false;
    if let Some(type_proto::Value::TensorType(t)) = &mut out.value {
        if let Some(shape) = &mut t.shape {
            for (dim, decl) in shape.dim.iter_mut().zip(&ds.dim) {
                if dim.value.is_none() && decl.value.is_some() {
                    dim.value = decl.value.clone();
                    changed = true;
                }
            }
        }
    }
    changed.then_some(out)
}

/// The tensor type of a constant.
pub fn tensor_type_of(t: &TensorProto) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: t.data_type,
            shape: Some(TensorShapeProto {
                dim: t
                    .dims
                    .iter()
                    .map(|&d| Dimension {
                        value: Some(Dim::DimValue(d)),
                        denotation: None,
                    })
                    .collect(),
            }),
        })),
        denotation: None,
    }
}

fn tensor_parts(t: &TypeProto) -> Option<(Option<i32>, Option<&TensorShapeProto>)> {
    match &t.value {
        Some(type_proto::Value::TensorType(tt)) => Some((tt.elem_type, tt.shape.as_ref())),
        _ => None,
    }
}

/// False when the two types cannot describe the same value: different element types, ranks,
/// or concrete dimensions.
pub fn compatible(a: &TypeProto, b: &TypeProto) -> bool {
    let (Some((ea, sa)), Some((eb, sb))) = (tensor_parts(a), tensor_parts(b)) else {
        return true;
    };
    if let (Some(x), Some(y)) = (ea, eb) {
        if x != 0 && y != 0 && x != y {
            return false;
        }
    }
    let (Some(sa), Some(sb)) = (sa, sb) else {
        return true;
    };
    if sa.dim.len() != sb.dim.len() {
        return false;
    }
    sa.dim
        .iter()
        .zip(&sb.dim)
        .all(|(x, y)| match (&x.value, &y.value) {
            (Some(Dim::DimValue(p)), Some(Dim::DimValue(q))) => p == q,
            _ => true,
        })
}

fn known_dims(t: &TypeProto) -> i64 {
    match tensor_parts(t) {
        Some((_, Some(s))) => {
            1 + s
                .dim
                .iter()
                .map(|d| match d.value {
                    Some(Dim::DimValue(_)) => 2,
                    Some(Dim::DimParam(_)) => 1,
                    None => 0,
                })
                .sum::<i64>()
        }
        _ => 0,
    }
}

/// True when `a` says strictly more than `b` (more dims known).
pub fn more_specific(a: &TypeProto, b: &TypeProto) -> bool {
    known_dims(a) > known_dims(b)
}

/// A short rendering for messages (`float[N,3]`).
pub fn describe(t: &TypeProto) -> String {
    match tensor_parts(t) {
        Some((e, s)) => {
            let elem = e
                .and_then(|e| onnx_proto::tensor_proto::DataType::try_from(e).ok())
                .map_or("?".to_string(), |d| d.as_str_name().to_ascii_lowercase());
            match s {
                None => format!("{elem}[?]"),
                Some(s) => {
                    let dims: Vec<String> = s
                        .dim
                        .iter()
                        .map(|d| match &d.value {
                            Some(Dim::DimValue(v)) => v.to_string(),
                            Some(Dim::DimParam(p)) => p.clone(),
                            None => "?".into(),
                        })
                        .collect();
                    format!("{elem}[{}]", dims.join(","))
                }
            }
        }
        None => format!("{t:?}"),
    }
}

/// Bytes of a tensor type whose shape is fully known (element size from the data type).
pub fn static_bytes(t: &TypeProto) -> Option<f64> {
    let (elem, shape) = tensor_parts(t)?;
    let shape = shape?;
    let bits = onnx_ref::DType::from_code(elem?)?.bit_width().max(1) as f64;
    let mut n = 1f64;
    for d in &shape.dim {
        match d.value {
            Some(Dim::DimValue(v)) if v >= 0 => n *= v as f64,
            _ => return None,
        }
    }
    Some(n * bits / 8.0)
}
