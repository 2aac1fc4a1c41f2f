//! Comparing an inferred type with a declared one: the verdicts the coverage tests count.

use onnx_proto::type_proto::Value;
use onnx_proto::TypeProto;
use onnx_schema::infer::{elem_type_of, shape_of, SymDim};
use onnx_schema::type_str_of;

/// How an inferred type relates to the declared one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Everything the declaration says was inferred (element type, rank, every declared dim).
    Full,
    /// Some of it was inferred, nothing contradicts it.
    Partial,
    /// Nothing was inferred.
    Nothing,
    /// The inferred type contradicts the declared one (element type, rank, or a known dim).
    Mismatch(String),
}

fn is_tensor(ty: &TypeProto) -> bool {
    matches!(
        ty.value,
        Some(Value::TensorType(_)) | Some(Value::SparseTensorType(_))
    )
}

fn render(dims: &[SymDim]) -> String {
    let parts: Vec<String> = dims.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// Compares `inferred` with `declared`.
pub fn compare(declared: &TypeProto, inferred: Option<&TypeProto>) -> Verdict {
    let Some(inferred) = inferred else {
        return Verdict::Nothing;
    };
    if !is_tensor(declared) || !is_tensor(inferred) {
        return match (type_str_of(declared), type_str_of(inferred)) {
            (Some(d), Some(i)) if d == i => Verdict::Full,
            (Some(d), Some(i)) => Verdict::Mismatch(format!("type {i}, declared {d}")),
            (_, None) => Verdict::Nothing,
            (None, Some(_)) => Verdict::Partial,
        };
    }
    let (de, ie) = (elem_type_of(declared), elem_type_of(inferred));
    if let (Some(d), Some(i)) = (de, ie) {
        if d != i {
            return Verdict::Mismatch(format!("element type {i}, declared {d}"));
        }
    }
    let (ds, is) = (shape_of(declared), shape_of(inferred));
    if let (Some(d), Some(i)) = (&ds, &is) {
        if d.len() != i.len() {
            return Verdict::Mismatch(format!("shape {}, declared {}", render(i), render(d)));
        }
        for (x, y) in d.iter().zip(i) {
            if let (SymDim::Known(a), SymDim::Known(b)) = (x, y) {
                if a != b {
                    return Verdict::Mismatch(format!(
                        "shape {}, declared {}",
                        render(i),
                        render(d)
                    ));
                }
            }
        }
    }
    let elem_full = de.is_none() || ie == de;
    let shape_full = match (&ds, &is) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(d), Some(i)) => d
            .iter()
            .zip(i)
            .all(|(x, y)| matches!(x, SymDim::Unknown) || x == y),
    };
    if elem_full && shape_full {
        Verdict::Full
    } else if ie.is_none() && is.is_none() {
        Verdict::Nothing
    } else {
        Verdict::Partial
    }
}
