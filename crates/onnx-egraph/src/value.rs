//! Values of rule expressions ([`Val`]) and their conversions: from attributes and constant
//! tensors, to attributes and constant tensors; literal comparison in a constant's dtype; and
//! whether two attribute protos hold the same value. Shared by the op builder, the rules and
//! version conversion. Layer: imports only `egraph` and `lang`, below `build`, `rules` and
//! `convert`.

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, TensorProto};
use onnx_rules::ir::Literal;

use crate::egraph::OnnxEGraph;
use crate::lang::ConstId;

/// Constants larger than this are not decoded by guards and literal matches.
pub const MAX_GUARD_DECODE_BYTES: usize = 1 << 16;

/// A value of an expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Val>),
    /// A dimension with a name (symbolic); known dims are `Int`.
    Param(String),
    DType(i32),
    /// A tensor-valued variable (an e-class).
    Class(egg::Id),
    Absent,
}

impl Val {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            Val::Bool(b) => Some(*b as i64),
            // An element type as an int attribute (`Cast<to: dtype(x)>`): its TensorProto code.
            Val::DType(d) => Some(*d as i64),
            _ => None,
        }
    }
    /// A one-element list as its element; anything else as it is.
    pub fn one_element(self) -> Val {
        match self {
            Val::List(mut l) if l.len() == 1 => l.remove(0),
            v => v,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Val::Int(i) => Some(*i as f64),
            Val::Float(f) => Some(*f),
            _ => None,
        }
    }
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            Val::List(l) => l.iter().map(|v| v.as_int()).collect(),
            Val::Int(i) => Some(vec![*i]),
            _ => None,
        }
    }
}

impl From<&Literal> for Val {
    fn from(l: &Literal) -> Val {
        match l {
            Literal::Int(i) => Val::Int(*i),
            Literal::Float(f) => Val::Float(*f),
            Literal::Str(s) => Val::Str(s.clone()),
            Literal::Bool(b) => Val::Bool(*b),
            Literal::List(l) => Val::List(l.iter().map(Val::from).collect()),
        }
    }
}

/// The value of an attribute.
pub fn attr_value(a: &AttributeProto) -> Option<Val> {
    let ty = a.r#type.and_then(|t| AttributeType::try_from(t).ok());
    Some(match ty? {
        AttributeType::Int => Val::Int(a.i?),
        AttributeType::Float => Val::Float(a.f? as f64),
        AttributeType::String => Val::Str(String::from_utf8_lossy(a.s.as_ref()?).into_owned()),
        AttributeType::Ints => Val::List(a.ints.iter().map(|&i| Val::Int(i)).collect()),
        AttributeType::Floats => {
            Val::List(a.floats.iter().map(|&f| Val::Float(f as f64)).collect())
        }
        AttributeType::Strings => Val::List(
            a.strings
                .iter()
                .map(|s| Val::Str(String::from_utf8_lossy(s).into_owned()))
                .collect(),
        ),
        _ => return None,
    })
}

/// The value of a small constant: a scalar for rank 0, a list for rank 1 (None otherwise or
/// when too large to decode).
pub fn const_val(eg: &OnnxEGraph, k: ConstId) -> Option<Val> {
    let t = decode(eg, k)?;
    let vals = elements(&t)?;
    match t.rank() {
        0 => vals.into_iter().next(),
        1 => Some(Val::List(vals)),
        _ => None,
    }
}

/// A constant decoded (no cache: the search phase holds the e-graph immutably).
pub fn decode(eg: &OnnxEGraph, k: ConstId) -> Option<onnx_ref::Tensor> {
    let e = eg.analysis.consts.get(k);
    if e.bytes > MAX_GUARD_DECODE_BYTES {
        return None;
    }
    onnx_ref::Tensor::from_proto(&e.tensor).ok()
}

/// Constants larger than this are not read by `halves_equal` (a rotary table of 128K positions
/// by 128 float32 dims is 64 MiB).
pub const MAX_HALVES_BYTES: usize = 1 << 28;

/// Whether constant `k`'s last axis is two equal halves, bitwise (`halves_equal`): read from its
/// raw little-endian bytes where it has them (a table stored in a mapped file is not decoded),
/// else decoded. `None` when it is too large or unreadable.
pub fn halves_equal(eg: &OnnxEGraph, k: ConstId) -> Option<bool> {
    let e = eg.analysis.consts.get(k);
    if e.bytes > MAX_HALVES_BYTES {
        return None;
    }
    let dims = &e.tensor.dims;
    let n = usize::try_from(*dims.last()?).ok()?;
    if !n.is_multiple_of(2) {
        return Some(false);
    }
    let count: usize = dims
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .product::<Option<usize>>()?;
    if n == 0 || count == 0 {
        return Some(true);
    }
    let raw = e.tensor.raw_data.as_deref().unwrap_or_default();
    if !raw.is_empty() && raw.len().is_multiple_of(count) {
        let row = n * (raw.len() / count);
        return Some(raw.chunks(row).all(|r| r[..row / 2] == r[row / 2..]));
    }
    let t = onnx_ref::Tensor::from_proto(&e.tensor).ok()?;
    let vals = t.to_f64_vec().ok()?;
    Some(vals.chunks(n).all(|r| {
        let (lo, hi) = r.split_at(n / 2);
        lo.iter().zip(hi).all(|(a, c)| a.to_bits() == c.to_bits())
    }))
}

/// Whether constant `k`'s elements, in order, are 0, 1, ..., n - 1 (`counts_up`): the indices
/// of every row, as ScatterND and Gather take them. Constants over 1 MiB are not read.
pub fn counts_up(eg: &OnnxEGraph, k: ConstId) -> Option<bool> {
    let e = eg.analysis.consts.get(k);
    if e.bytes > 1 << 20 {
        return None;
    }
    let t = onnx_ref::Tensor::from_proto(&e.tensor).ok()?;
    if t.dtype().is_float() || t.dtype() == onnx_ref::DType::Bool {
        return Some(false);
    }
    let vals = t.to_i64_vec().ok()?;
    Some(vals.iter().zip(0i64..).all(|(&v, i)| v == i))
}

fn elements(t: &onnx_ref::Tensor) -> Option<Vec<Val>> {
    let dt = t.dtype();
    if dt == onnx_ref::DType::Bool {
        return Some(
            t.to_i64_vec()
                .ok()?
                .into_iter()
                .map(|v| Val::Bool(v != 0))
                .collect(),
        );
    }
    if dt.is_float() {
        return Some(t.to_f64_vec().ok()?.into_iter().map(Val::Float).collect());
    }
    Some(t.to_i64_vec().ok()?.into_iter().map(Val::Int).collect())
}

/// Equal in the sense of rule literals: NaN equals NaN, zeros equal only with the same sign.
fn same_f64(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a == b && a.is_sign_negative() == b.is_sign_negative())
}

/// The literal rounded to a dtype, as f64 (None when it is not representable exactly, e.g. a
/// fraction in an integer type).
fn literal_in(dt: onnx_ref::DType, l: f64) -> Option<f64> {
    use onnx_ref::DType as D;
    Some(match dt {
        D::Float => l as f32 as f64,
        D::Double => l,
        D::Float16 => half::f16::from_f64(l).to_f64(),
        D::Bfloat16 => half::bf16::from_f64(l).to_f64(),
        _ if dt.is_float() => return None,
        _ => {
            if l.fract() != 0.0 || !l.is_finite() {
                return None;
            }
            l
        }
    })
}

/// True when every element of constant `k` equals the literal in the constant's dtype (a list
/// literal: a 1-D constant with exactly those elements).
pub fn const_equals_literal(eg: &OnnxEGraph, k: ConstId, l: &Literal) -> bool {
    let Some(t) = decode(eg, k) else {
        return false;
    };
    let dt = t.dtype();
    let Some(vals) = elements(&t) else {
        return false;
    };
    let eq = |v: &Val, l: &Literal| -> bool {
        let lv = match l {
            Literal::Int(i) => *i as f64,
            Literal::Float(f) => *f,
            Literal::Bool(b) => *b as i64 as f64,
            _ => return false,
        };
        let Some(lv) = literal_in(dt, lv) else {
            return false;
        };
        match v {
            Val::Float(f) => same_f64(*f, lv),
            Val::Int(i) => (*i as f64) == lv,
            Val::Bool(b) => (*b as i64 as f64) == lv,
            _ => false,
        }
    };
    match l {
        Literal::List(items) => {
            t.rank() == 1
                && vals.len() == items.len()
                && vals.iter().zip(items).all(|(v, l)| eq(v, l))
        }
        Literal::Str(_) => false,
        _ => !vals.is_empty() && vals.iter().all(|v| eq(v, l)),
    }
}

/// True when an attribute's value equals a literal.
pub fn attr_equals_literal(a: &AttributeProto, l: &Literal) -> bool {
    let Some(v) = attr_value(a) else {
        return false;
    };
    vals_equal(&v, &Val::from(l))
}

/// Structural equality with numeric coercion (1 == 1.0).
pub fn vals_equal(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::List(x), Val::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| vals_equal(p, q))
        }
        (Val::Int(_) | Val::Float(_), Val::Int(_) | Val::Float(_)) => {
            let (x, y) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            same_f64(x, y)
        }
        // An element type compares with the integer code attributes carry (`Cast<to: t>`).
        (Val::DType(d), Val::Int(i)) | (Val::Int(i), Val::DType(d)) => *d as i64 == *i,
        _ => a == b,
    }
}

/// An attribute of the schema's type from a value.
pub fn to_attribute(name: &str, ty: AttributeType, v: &Val) -> Option<AttributeProto> {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    match ty {
        AttributeType::Int => {
            a.i = Some(match v {
                // A one-element tensor as an int (TopK's `k` input before 10's attribute).
                Val::List(l) if l.len() == 1 => l[0].as_int()?,
                _ => v.as_int()?,
            })
        }
        // A one-element tensor as a float (a scale exported as a `[1]` tensor).
        AttributeType::Float => a.f = Some(v.clone().one_element().as_f64()? as f32),
        AttributeType::String => match v {
            Val::Str(s) => a.s = Some(s.clone().into_bytes().into()),
            _ => return None,
        },
        AttributeType::Ints => a.ints = v.as_ints()?,
        AttributeType::Floats => match v {
            Val::List(l) => {
                a.floats = l
                    .iter()
                    .map(|x| x.as_f64().map(|f| f as f32))
                    .collect::<Option<_>>()?
            }
            _ => a.floats = vec![v.as_f64()? as f32],
        },
        _ => return None,
    }
    Some(a)
}

/// A constant tensor of `dtype` holding a scalar (rank 0) or a list (rank 1).
pub fn to_tensor(v: &Val, dtype: i32) -> Option<TensorProto> {
    let dt = onnx_ref::DType::from_code(dtype)?;
    let (vals, shape): (Vec<f64>, Vec<usize>) = match v {
        Val::List(l) => (
            l.iter().map(|x| x.as_f64()).collect::<Option<_>>()?,
            vec![l.len()],
        ),
        Val::Bool(b) => (vec![*b as i64 as f64], vec![]),
        _ => (vec![v.as_f64()?], vec![]),
    };
    if !dt.is_float() && vals.iter().any(|x| x.fract() != 0.0 || !x.is_finite()) {
        return None;
    }
    let t = if dt == onnx_ref::DType::Int64 {
        onnx_ref::Tensor::from_vec(&shape, vals.iter().map(|&x| x as i64).collect()).ok()?
    } else {
        let src = onnx_ref::Tensor::from_vec(&shape, vals).ok()?;
        onnx_ref::kernels::cast_tensor(&src, dt).ok()?
    };
    Some(t.to_proto(""))
}

/// Two attribute values are the same value (names and doc strings aside).
pub(crate) fn same_value(a: &onnx_proto::AttributeProto, b: &onnx_proto::AttributeProto) -> bool {
    let strip = |p: &onnx_proto::AttributeProto| {
        let mut p = p.clone();
        p.name = None;
        p.doc_string = None;
        p
    };
    strip(a) == strip(b)
}
