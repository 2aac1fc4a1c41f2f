//! Symbolic dimensions ([`SymDim`]) and the shape algebra inference is built on: conversion
//! from and to `TypeProto` shapes, numpy broadcasting, unification of dims that must be equal,
//! products, and axis normalization.
//!
//! The rules never invent a number: a dim is `Known` only when it follows from known dims,
//! `Param` keeps the name a model gave it, and everything else is `Unknown`.

use std::fmt;

use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::type_proto::{self, Value};
use onnx_proto::{TensorShapeProto, TypeProto};

/// A symbolic scalar: a dimension of a shape, or one element of an integer vector computed
/// from shapes (`Shape(x)`, `Gather(Shape(x), 0)`, ...).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SymDim {
    /// A known value.
    Known(i64),
    /// A named dimension (`dim_param` in ONNX), e.g. "batch": unknown but equal to every other
    /// dimension of the same name.
    Param(String),
    /// Nothing is known.
    Unknown,
}

impl SymDim {
    /// The value when it is known.
    pub fn known(&self) -> Option<i64> {
        match self {
            SymDim::Known(v) => Some(*v),
            _ => None,
        }
    }

    /// Reads an ONNX dimension; an empty `dim_param` is unknown.
    pub fn from_dimension(dim: &Dimension) -> SymDim {
        match &dim.value {
            Some(dimension::Value::DimValue(v)) => SymDim::Known(*v),
            Some(dimension::Value::DimParam(p)) if !p.is_empty() => SymDim::Param(p.clone()),
            _ => SymDim::Unknown,
        }
    }

    /// Writes the dimension as ONNX does (`Unknown` has no value).
    pub fn to_dimension(&self) -> Dimension {
        let value = match self {
            SymDim::Known(v) => Some(dimension::Value::DimValue(*v)),
            SymDim::Param(p) => Some(dimension::Value::DimParam(p.clone())),
            SymDim::Unknown => None,
        };
        Dimension {
            value,
            denotation: None,
        }
    }

    /// `self + other`, as shape inference adds dims (a sum of two names is named `p+q`, the
    /// name Concat and Range give their result), so a guard compares a sum with such a dim.
    pub fn plus(&self, other: &SymDim) -> SymDim {
        add(self, other)
    }

    /// `self - other`, as shape inference subtracts dims (`(p+q) - q = p`).
    pub fn minus(&self, other: &SymDim) -> SymDim {
        sub(self, other)
    }

    /// Whether the dim is the known value `v`.
    pub(crate) fn is(&self, v: i64) -> bool {
        self.known() == Some(v)
    }
}

impl fmt::Display for SymDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SymDim::Known(v) => write!(f, "{v}"),
            SymDim::Param(p) => f.write_str(p),
            SymDim::Unknown => f.write_str("?"),
        }
    }
}

impl From<i64> for SymDim {
    fn from(v: i64) -> Self {
        SymDim::Known(v)
    }
}

impl From<&str> for SymDim {
    fn from(p: &str) -> Self {
        SymDim::Param(p.to_string())
    }
}

/// A shape (or a symbolic integer vector) as a list of dims.
pub(crate) type Dims = Vec<SymDim>;

/// Renders dims as `[batch, 16, ?]` for messages.
pub(crate) fn show(dims: &[SymDim]) -> String {
    let parts: Vec<String> = dims.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// The shape of a tensor (or sparse tensor) type; `None` when the type is not a tensor or its
/// rank is unknown.
pub fn shape_of(ty: &TypeProto) -> Option<Vec<SymDim>> {
    let shape = match ty.value.as_ref()? {
        Value::TensorType(t) => t.shape.as_ref()?,
        Value::SparseTensorType(t) => t.shape.as_ref()?,
        _ => return None,
    };
    Some(shape.dim.iter().map(SymDim::from_dimension).collect())
}

/// The element type of a tensor (or sparse tensor) type; `None` when not a tensor or undefined.
pub fn elem_type_of(ty: &TypeProto) -> Option<i32> {
    let elem = match ty.value.as_ref()? {
        Value::TensorType(t) => t.elem_type?,
        Value::SparseTensorType(t) => t.elem_type?,
        _ => return None,
    };
    (elem != 0).then_some(elem)
}

/// A tensor type with the given element type (0 when unknown) and shape (none when the rank is
/// unknown).
pub fn tensor_type(elem_type: Option<i32>, shape: Option<&[SymDim]>) -> TypeProto {
    TypeProto {
        value: Some(Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem_type.unwrap_or(0)),
            shape: shape.map(|dims| TensorShapeProto {
                dim: dims.iter().map(SymDim::to_dimension).collect(),
            }),
        })),
        denotation: None,
    }
}

/// Shapes that do not broadcast: two known dims at one output position differ (neither is 1).
/// The callers name the inputs and the operator (`InferError::Inconsistent`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "shapes {} do not broadcast: dims {first} and {second} differ",
    show_all(shapes)
)]
pub(crate) struct BroadcastError {
    /// Every shape given to [`broadcast`].
    pub(crate) shapes: Vec<Dims>,
    /// The known dim seen first at the conflicting position.
    pub(crate) first: i64,
    /// The known dim that differs from it.
    pub(crate) second: i64,
}

/// Shapes as "[a, b], [c]".
fn show_all(shapes: &[Dims]) -> String {
    let all: Vec<String> = shapes.iter().map(|s| show(s)).collect();
    all.join(", ")
}

/// Numpy (multidirectional) broadcasting of several shapes, as onnx's
/// `multidirectionalBroadcastShapeInference`: per output dim, a known dim other than 1 wins
/// (two different ones are an error), dims that are all 1 give 1, a single symbolic dim or
/// equal params give that param, anything else is unknown.
pub(crate) fn broadcast(shapes: &[&[SymDim]]) -> Result<Dims, BroadcastError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let mut known: i64 = 1;
        let mut symbolic: Option<&SymDim> = None;
        let mut n_symbolic = 0;
        for shape in shapes {
            let Some(pos) = (i + shape.len()).checked_sub(rank) else {
                continue;
            };
            let Some(dim) = shape.get(pos) else { continue };
            match dim {
                SymDim::Known(1) => {}
                SymDim::Known(v) => {
                    if known != 1 && known != *v {
                        return Err(BroadcastError {
                            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
                            first: known,
                            second: *v,
                        });
                    }
                    known = *v;
                }
                other => match symbolic {
                    None => {
                        symbolic = Some(other);
                        n_symbolic = 1;
                    }
                    Some(seen) if seen == other && matches!(other, SymDim::Param(_)) => {}
                    Some(_) => n_symbolic += 1,
                },
            }
        }
        out.push(if known != 1 {
            SymDim::Known(known)
        } else if let (1, Some(dim)) = (n_symbolic, symbolic) {
            dim.clone()
        } else if n_symbolic == 0 {
            SymDim::Known(1)
        } else {
            SymDim::Unknown
        });
    }
    Ok(out)
}

/// Unifies two dims that must be equal (MatMul's inner dims, Concat's other axes): a known value
/// wins, then a param; two different known values are an error (`None`).
pub(crate) fn unify(a: &SymDim, b: &SymDim) -> Option<SymDim> {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => (x == y).then_some(SymDim::Known(*x)),
        (SymDim::Known(_), _) => Some(a.clone()),
        (_, SymDim::Known(_)) => Some(b.clone()),
        (SymDim::Param(_), _) => Some(a.clone()),
        (SymDim::Unknown, _) => Some(b.clone()),
    }
}

/// The dims two alternatives may have (If branches): equal dims stay, others become unknown.
pub(crate) fn join(a: &SymDim, b: &SymDim) -> SymDim {
    if a == b {
        a.clone()
    } else {
        SymDim::Unknown
    }
}

/// A product of dims as a known coefficient times named factors (sorted, repeats kept): the
/// algebra behind `product`, `floor_div` and Reshape's -1. A param whose name is a product this
/// module wrote (`batch_size*sequence_length`, `4*batch`; torch's exporters write `2*s1` the same
/// way) is read back into its factors, so a product divided by one of its factors cancels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Monomial {
    /// The known part.
    pub(crate) coef: i64,
    /// The named factors, sorted.
    pub(crate) factors: Vec<String>,
}

/// Whether `name` can be one factor of a product's name: no operator, space or parenthesis in
/// it, so that `a*b` reads back as `a` times `b` and never as part of a sum.
fn simple_factor(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '+' | '-' | '*' | '/' | '(' | ')'))
}

impl Monomial {
    /// The dim as a monomial; `None` for an unknown dim.
    pub(crate) fn of(d: &SymDim) -> Option<Monomial> {
        match d {
            SymDim::Known(v) => Some(Monomial {
                coef: *v,
                factors: Vec::new(),
            }),
            SymDim::Param(name) => {
                let parts: Vec<&str> = name.split('*').collect();
                let mut coef = 1i64;
                let mut factors = Vec::new();
                if parts.len() > 1 {
                    for part in &parts {
                        match part.parse::<i64>() {
                            Ok(v) => coef = coef.checked_mul(v)?,
                            Err(_) if simple_factor(part) => factors.push((*part).to_string()),
                            // Not a product this module could have written: one opaque factor.
                            Err(_) => {
                                return Some(Monomial {
                                    coef: 1,
                                    factors: vec![name.clone()],
                                })
                            }
                        }
                    }
                } else {
                    factors.push(name.clone());
                }
                factors.sort();
                Some(Monomial { coef, factors })
            }
            SymDim::Unknown => None,
        }
    }

    /// The product of `dims`; `None` when one is unknown, or on overflow.
    pub(crate) fn product_of(dims: &[SymDim]) -> Option<Monomial> {
        let mut acc = Monomial {
            coef: 1,
            factors: Vec::new(),
        };
        for dim in dims {
            acc = acc.times(&Monomial::of(dim)?)?;
        }
        Some(acc)
    }

    /// `self * other`; `None` on overflow.
    fn times(&self, other: &Monomial) -> Option<Monomial> {
        let mut factors = self.factors.clone();
        factors.extend(other.factors.iter().cloned());
        factors.sort();
        Some(Monomial {
            coef: self.coef.checked_mul(other.coef)?,
            factors,
        })
    }

    /// `self / other` when it divides exactly: `other`'s factors are among `self`'s and its
    /// coefficient divides `self`'s (`None` otherwise, or for a zero divisor).
    pub(crate) fn divide(&self, other: &Monomial) -> Option<Monomial> {
        if other.coef == 0 || self.coef % other.coef != 0 {
            return None;
        }
        let mut factors = self.factors.clone();
        for f in &other.factors {
            let pos = factors.iter().position(|x| x == f)?;
            factors.remove(pos);
        }
        Some(Monomial {
            coef: self.coef / other.coef,
            factors,
        })
    }

    /// The monomial as a dim: known without factors, 0 when the coefficient is 0, the factor
    /// itself for one factor times 1, else the param named `coef*a*b` (the coefficient left out
    /// when 1); unknown when a factor cannot be part of such a name.
    pub(crate) fn to_dim(&self) -> SymDim {
        if self.coef == 0 || self.factors.is_empty() {
            return SymDim::Known(self.coef);
        }
        if self.coef == 1 && self.factors.len() == 1 {
            return SymDim::Param(self.factors[0].clone());
        }
        if self.coef < 0 || !self.factors.iter().all(|f| simple_factor(f)) {
            return SymDim::Unknown;
        }
        let mut parts: Vec<String> = Vec::with_capacity(self.factors.len() + 1);
        if self.coef != 1 {
            parts.push(self.coef.to_string());
        }
        parts.extend(self.factors.iter().cloned());
        SymDim::Param(parts.join("*"))
    }
}

/// The product of dims: known when all are known, 0 when any is 0, a named product of the
/// params and the known part otherwise (`batch_size*sequence_length`, see [`Monomial`]);
/// unknown when a dim is unknown or a param's name cannot be a factor (a sum).
pub(crate) fn product(dims: &[SymDim]) -> SymDim {
    if dims.iter().any(|d| d.is(0)) {
        return SymDim::Known(0);
    }
    Monomial::product_of(dims).map_or(SymDim::Unknown, |m| m.to_dim())
}

/// `a + b` on symbolic scalars: known when both are known, `p + 0 = p`, and the sum of two
/// named dims is the dim named `p+q` (the names in order, so `q + p` is the same dim): a KV
/// cache's `Concat(past, new)` has `past_sequence_length+sequence_length` keys, and every
/// value computed the same way has the same name.
pub(crate) fn add(a: &SymDim, b: &SymDim) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => {
            x.checked_add(*y).map_or(SymDim::Unknown, SymDim::Known)
        }
        (_, SymDim::Known(0)) => a.clone(),
        (SymDim::Known(0), _) => b.clone(),
        (SymDim::Param(p), SymDim::Param(q)) => {
            let (p, q) = if p <= q { (p, q) } else { (q, p) };
            SymDim::Param(format!("{p}+{q}"))
        }
        _ => SymDim::Unknown,
    }
}

/// `a - b` on symbolic scalars: known when both are known, `p - 0 = p`, `p - p = 0`,
/// `(p+q) - q = p`.
pub(crate) fn sub(a: &SymDim, b: &SymDim) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => {
            x.checked_sub(*y).map_or(SymDim::Unknown, SymDim::Known)
        }
        (_, SymDim::Known(0)) => a.clone(),
        (SymDim::Param(p), SymDim::Param(q)) if p == q => SymDim::Known(0),
        // (p+q) - q = p, for the sums `add` names.
        (SymDim::Param(sum), SymDim::Param(q)) => match sum.split_once('+') {
            Some((x, y)) if y == q && !x.is_empty() => SymDim::Param(x.to_string()),
            Some((x, y)) if x == q && !y.is_empty() => SymDim::Param(y.to_string()),
            _ => SymDim::Unknown,
        },
        _ => SymDim::Unknown,
    }
}

/// `a * b` on symbolic scalars: known when both are known, `p * 1 = p`, `x * 0 = 0`.
pub(crate) fn mul(a: &SymDim, b: &SymDim) -> SymDim {
    product(&[a.clone(), b.clone()])
}

/// `a / b` (integer division rounding toward negative infinity, as shape arithmetic uses it):
/// known when both are known and `b != 0`, `p / 1 = p`, `p / p = 1`, and a product divided by
/// some of its factors.
pub(crate) fn floor_div(a: &SymDim, b: &SymDim) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => {
            div_floor(*x, *y).map_or(SymDim::Unknown, SymDim::Known)
        }
        (_, SymDim::Known(1)) => a.clone(),
        (SymDim::Param(p), SymDim::Param(q)) if p == q => SymDim::Known(1),
        // An exact quotient of products (`(4*b*s) / (4*b) = s`); the division of a product by
        // one of its factors does not round.
        _ => match (Monomial::of(a), Monomial::of(b)) {
            (Some(x), Some(y)) if !x.factors.is_empty() => {
                x.divide(&y).map_or(SymDim::Unknown, |q| q.to_dim())
            }
            _ => SymDim::Unknown,
        },
    }
}

/// Normalizes a possibly negative axis for a tensor of rank `rank` (`-1` is the last axis);
/// `None` when out of range.
pub(crate) fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let rank_i = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis + rank_i } else { axis };
    (0..rank_i)
        .contains(&a)
        .then(|| usize::try_from(a).ok())
        .flatten()
}

/// `floor(a / b)` for known values with `b > 0`, correct for negative `a`.
pub(crate) fn div_floor(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let q = a.checked_div(b)?;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        Some(q - 1)
    } else {
        Some(q)
    }
}

/// `ceil(a / b)` for known values.
pub(crate) fn div_ceil(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let q = a.checked_div(b)?;
    if (a % b != 0) && ((a < 0) == (b < 0)) {
        Some(q + 1)
    } else {
        Some(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> SymDim {
        SymDim::Param(name.to_string())
    }
    fn k(v: i64) -> SymDim {
        SymDim::Known(v)
    }

    #[test]
    fn broadcast_follows_onnx() {
        let a = [p("batch"), k(1), k(4)];
        let b = [k(3), k(4)];
        assert_eq!(broadcast(&[&a, &b]).unwrap(), [p("batch"), k(3), k(4)]);
        assert_eq!(broadcast(&[&[p("n")], &[p("n")]]).unwrap(), [p("n")]);
        assert_eq!(
            broadcast(&[&[p("n")], &[p("m")]]).unwrap(),
            [SymDim::Unknown]
        );
        assert_eq!(
            broadcast(&[&[p("n")], &[SymDim::Unknown]]).unwrap(),
            [SymDim::Unknown]
        );
        assert_eq!(broadcast(&[&[p("n")], &[k(5)]]).unwrap(), [k(5)]);
        assert_eq!(broadcast(&[&[p("n")], &[k(1)]]).unwrap(), [p("n")]);
        assert_eq!(broadcast(&[&[], &[k(2)]]).unwrap(), [k(2)]);
        let err = broadcast(&[&[k(3)], &[k(4)]]).unwrap_err();
        assert_eq!((err.first, err.second), (3, 4));
        assert_eq!(
            err.to_string(),
            "shapes [3], [4] do not broadcast: dims 3 and 4 differ"
        );
    }

    #[test]
    fn arithmetic_keeps_params_only_where_exact() {
        assert_eq!(product(&[p("b"), k(1), k(1)]), p("b"));
        assert_eq!(product(&[p("b"), k(2)]), p("2*b"));
        assert_eq!(product(&[p("s"), p("b")]), p("b*s"));
        assert_eq!(product(&[p("b*s"), k(4), k(8)]), p("32*b*s"));
        assert_eq!(product(&[p("past+seq"), p("b")]), SymDim::Unknown);
        assert_eq!(product(&[p("b"), SymDim::Unknown]), SymDim::Unknown);
        assert_eq!(product(&[p("past+seq"), k(1)]), p("past+seq"));
        assert_eq!(
            floor_div(&p("32*b*s"), &product(&[k(4), p("b"), k(8)])),
            p("s")
        );
        assert_eq!(floor_div(&p("2*s1"), &k(2)), p("s1"));
        assert_eq!(floor_div(&p("b*s"), &k(2)), SymDim::Unknown);
        assert_eq!(floor_div(&p("b*s"), &p("t")), SymDim::Unknown);
        assert_eq!(product(&[p("b"), SymDim::Unknown, k(0)]), k(0));
        assert_eq!(product(&[]), k(1));
        assert_eq!(add(&p("s"), &k(0)), p("s"));
        assert_eq!(add(&p("seq"), &p("past")), p("past+seq"));
        assert_eq!(add(&p("past"), &p("seq")), p("past+seq"));
        assert_eq!(add(&p("s"), &k(2)), SymDim::Unknown);
        assert_eq!(sub(&p("past+seq"), &p("seq")), p("past"));
        assert_eq!(sub(&p("past+seq"), &p("past")), p("seq"));
        assert_eq!(sub(&p("past+seq"), &p("other")), SymDim::Unknown);
        assert_eq!(sub(&p("s"), &p("s")), k(0));
        assert_eq!(floor_div(&k(-7), &k(2)), k(-4));
        assert_eq!(floor_div(&k(7), &k(2)), k(3));
        assert_eq!(floor_div(&p("s"), &k(1)), p("s"));
        assert_eq!(floor_div(&k(1), &k(0)), SymDim::Unknown);
        assert_eq!(div_floor(-7, 2), Some(-4));
        assert_eq!(div_ceil(7, 2), Some(4));
        assert_eq!(div_ceil(-7, 2), Some(-3));
    }

    #[test]
    fn unify_prefers_known_then_param() {
        assert_eq!(unify(&SymDim::Unknown, &p("n")), Some(p("n")));
        assert_eq!(unify(&p("n"), &k(4)), Some(k(4)));
        assert_eq!(unify(&k(3), &k(4)), None);
        assert_eq!(normalize_axis(-1, 3), Some(2));
        assert_eq!(normalize_axis(3, 3), None);
        assert_eq!(normalize_axis(-4, 3), None);
    }
}
