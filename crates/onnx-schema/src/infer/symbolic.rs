//! Symbolic values: output values as symbolic scalars, for the small integer tensors that shape
//! arithmetic computes (`Shape`, `Gather`, `Slice`, `Split`, `Concat`, `Unsqueeze`, `Squeeze`,
//! `Cast`, `Add`, `Sub`, `Mul`, `Div`, `Equal`, `Where`, `Range`, ...).
//!
//! A symbolic value holds integers only (known values or named dims), so Cast to a float type
//! keeps it, and Floor/Ceil/Round are the identity on it. Values are produced only for outputs of
//! rank 0 or 1 with at most [`MAX_SYM_LEN`] elements.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::TypeProto;

use super::context::NodeCtx;
use super::dims::{self, Dims, SymDim};
use super::tensor_data;

/// The longest vector tracked symbolically.
pub(crate) const MAX_SYM_LEN: usize = 1024;

fn is_integer(elem: i32) -> bool {
    [
        DataType::Int64,
        DataType::Int32,
        DataType::Int16,
        DataType::Int8,
        DataType::Uint64,
        DataType::Uint32,
        DataType::Uint16,
        DataType::Uint8,
    ]
    .iter()
    .any(|t| *t as i32 == elem)
}

fn is_float(elem: i32) -> bool {
    [
        DataType::Float,
        DataType::Double,
        DataType::Float16,
        DataType::Bfloat16,
    ]
    .iter()
    .any(|t| *t as i32 == elem)
}

/// The symbolic value of each output (`None` where there is none): the first output of the ops
/// above, every output of Split. Only integer, bool and float scalars and vectors get one.
pub(crate) fn sym_values(ctx: &NodeCtx<'_>, out_types: &[Option<&TypeProto>]) -> Vec<Option<Dims>> {
    let mut values: Vec<Option<Dims>> = vec![None; out_types.len()];
    let is_split = ctx.schema.domain.is_empty() && ctx.schema.name == "Split";
    if is_split {
        for (slot, part) in values.iter_mut().zip(split_parts(ctx).unwrap_or_default()) {
            *slot = Some(part);
        }
    } else if let (Some(slot), Some(Some(ty))) = (values.first_mut(), out_types.first()) {
        *slot = dims::elem_type_of(ty).and_then(|elem| compute(ctx, elem));
    }
    values
        .into_iter()
        .zip(out_types)
        .map(|(value, ty)| fit(*ty, value?))
        .collect()
}

/// `value` when it fits the output type: a numeric scalar or vector of its length.
fn fit(out_ty: Option<&TypeProto>, value: Dims) -> Option<Dims> {
    let out_ty = out_ty?;
    let elem = dims::elem_type_of(out_ty)?;
    if !(is_integer(elem) || is_float(elem) || elem == DataType::Bool as i32)
        || value.len() > MAX_SYM_LEN
    {
        return None;
    }
    match dims::shape_of(out_ty).as_deref() {
        Some([]) if value.len() == 1 => Some(value),
        Some([len])
            if len
                .known()
                .is_none_or(|n| usize::try_from(n).ok() == Some(value.len())) =>
        {
            Some(value)
        }
        Some(_) => None,
        None => Some(value),
    }
}

/// The parts Split cuts a symbolic vector into.
fn split_parts(ctx: &NodeCtx<'_>) -> Option<Vec<Dims>> {
    if ctx.rank(0)? != 1 || !matches!(ctx.attr_int_or("axis", 0), 0 | -1) {
        return None;
    }
    let value = ctx.sym(0)?;
    let n = ctx.n_outputs.max(1);
    let sizes: Vec<usize> = if ctx.since() < 13 && ctx.has_attr("split") {
        ctx.attr_ints("split")?
            .into_iter()
            .map(|s| usize::try_from(s).ok())
            .collect::<Option<_>>()?
    } else if ctx.since() >= 13 && ctx.has_input(1) {
        ctx.ints(1)?
            .into_iter()
            .map(|s| usize::try_from(s).ok())
            .collect::<Option<_>>()?
    } else {
        let chunk = value.len().div_ceil(n);
        (0..n)
            .map(|i| chunk.min(value.len().saturating_sub(i * chunk)))
            .collect()
    };
    if sizes.len() != n || sizes.iter().sum::<usize>() != value.len() {
        return None;
    }
    let mut rest = value.as_slice();
    let mut parts = Vec::with_capacity(n);
    for size in sizes {
        let (part, tail) = rest.split_at(size.min(rest.len()));
        parts.push(part.to_vec());
        rest = tail;
    }
    Some(parts)
}

fn compute(ctx: &NodeCtx<'_>, out_elem: i32) -> Option<Dims> {
    if !ctx.schema.domain.is_empty() {
        return None;
    }
    match ctx.schema.name.as_str() {
        "Shape" => shape(ctx),
        "Size" => Some(vec![dims::product(&ctx.shape(0)?)]),
        "Constant" => {
            let t = tensor_data::constant_attribute_value(ctx.node_attrs())?;
            tensor_data::tensor_sym_values(&t)
        }
        "Identity" | "Unsqueeze" | "Squeeze" | "Reshape" | "Flatten" | "Floor" | "Ceil"
        | "Round" => ctx.sym(0),
        "Cast" | "CastLike" => cast(ctx, out_elem),
        "Gather" => gather(ctx),
        "Slice" => slice(ctx),
        "Concat" => (0..ctx.n_inputs())
            .map(|i| ctx.sym(i).or_else(|| unknown_vector(ctx, i)))
            .collect::<Option<Vec<Dims>>>()
            .map(|parts| parts.concat()),
        "Add" => elementwise(ctx, dims::add),
        "Sub" => elementwise(ctx, dims::sub),
        "Mul" => elementwise(ctx, dims::mul),
        "Div" if is_integer(out_elem) => elementwise(ctx, trunc_div),
        "Div" => elementwise(ctx, exact_div),
        "Mod" if ctx.attr_int_or("fmod", 0) == 0 => elementwise(ctx, floor_mod),
        "Max" => elementwise_n(ctx, |a, b| known2(a, b, |x, y| Some(x.max(y)))),
        "Min" => elementwise_n(ctx, |a, b| known2(a, b, |x, y| Some(x.min(y)))),
        "Neg" => Some(
            ctx.sym(0)?
                .iter()
                .map(|d| dims::sub(&SymDim::Known(0), d))
                .collect(),
        ),
        "Abs" => Some(
            ctx.sym(0)?
                .iter()
                .map(|d| {
                    d.known()
                        .and_then(i64::checked_abs)
                        .map_or(SymDim::Unknown, SymDim::Known)
                })
                .collect(),
        ),
        "Equal" => elementwise(ctx, |a, b| compare(a, b, |x, y| x == y)),
        "And" => elementwise(ctx, |a, b| {
            known2(a, b, |x, y| Some(i64::from(x != 0 && y != 0)))
        }),
        "Or" => elementwise(ctx, |a, b| {
            known2(a, b, |x, y| Some(i64::from(x != 0 || y != 0)))
        }),
        "Xor" => elementwise(ctx, |a, b| {
            known_only(a, b, |x, y| i64::from((x != 0) != (y != 0)))
        }),
        "Less" => elementwise(ctx, |a, b| compare(a, b, |x, y| x < y)),
        "LessOrEqual" => elementwise(ctx, |a, b| compare(a, b, |x, y| x <= y)),
        "Greater" => elementwise(ctx, |a, b| compare(a, b, |x, y| x > y)),
        "GreaterOrEqual" => elementwise(ctx, |a, b| compare(a, b, |x, y| x >= y)),
        "Not" => Some(
            ctx.sym(0)?
                .iter()
                .map(|d| {
                    d.known()
                        .map_or(SymDim::Unknown, |v| SymDim::Known(i64::from(v == 0)))
                })
                .collect(),
        ),
        "Where" => where_(ctx),
        "Range" => range(ctx),
        "ConstantOfShape" => constant_of_shape(ctx),
        "Expand" => expand(ctx),
        _ => None,
    }
}

fn shape(ctx: &NodeCtx<'_>) -> Option<Dims> {
    let dims = ctx.shape(0)?;
    let rank = i64::try_from(dims.len()).ok()?;
    let clamp = |v: i64| -> usize {
        let v = if v < 0 { v + rank } else { v };
        usize::try_from(v.clamp(0, rank)).unwrap_or(0)
    };
    let start = clamp(ctx.attr_int_or("start", 0));
    let end = ctx.attr_int("end").map_or(dims.len(), clamp);
    Some(dims.get(start..end.max(start))?.to_vec())
}

fn cast(ctx: &NodeCtx<'_>, out_elem: i32) -> Option<Dims> {
    let value = ctx.sym(0)?;
    if out_elem == DataType::Bool as i32 {
        return Some(
            value
                .iter()
                .map(|d| {
                    d.known()
                        .map_or(SymDim::Unknown, |v| SymDim::Known(i64::from(v != 0)))
                })
                .collect(),
        );
    }
    Some(value)
}

/// A vector input whose values are unknown but whose length is: that many unknowns.
fn unknown_vector(ctx: &NodeCtx<'_>, i: usize) -> Option<Dims> {
    match ctx.shape(i).as_deref() {
        Some([SymDim::Known(n)]) => {
            let n = usize::try_from(*n).ok().filter(|&n| n <= MAX_SYM_LEN)?;
            Some(vec![SymDim::Unknown; n])
        }
        _ => None,
    }
}

fn known_only(a: &SymDim, b: &SymDim, f: impl Fn(i64, i64) -> i64) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => SymDim::Known(f(*x, *y)),
        _ => SymDim::Unknown,
    }
}

/// A comparison of symbolic scalars (1 or 0). Besides known values: a named dim equals itself,
/// and since a dim is never negative, it compares with a negative constant as 0 does (torch's
/// expand guard `Equal(shape, -1)` over a shape built from `Shape` is all false).
fn compare(a: &SymDim, b: &SymDim, f: impl Fn(i64, i64) -> bool) -> SymDim {
    let r = match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => f(*x, *y),
        (SymDim::Param(p), SymDim::Param(q)) if p == q => f(0, 0),
        (SymDim::Param(_), SymDim::Known(y)) if *y < 0 => f(0, *y),
        (SymDim::Known(x), SymDim::Param(_)) if *x < 0 => f(*x, 0),
        _ => return SymDim::Unknown,
    };
    SymDim::Known(i64::from(r))
}

fn known2(a: &SymDim, b: &SymDim, f: impl Fn(i64, i64) -> Option<i64>) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => f(*x, *y).map_or(SymDim::Unknown, SymDim::Known),
        (SymDim::Param(p), SymDim::Param(q)) if p == q => a.clone(),
        _ => SymDim::Unknown,
    }
}

fn trunc_div(a: &SymDim, b: &SymDim) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => {
            x.checked_div(*y).map_or(SymDim::Unknown, SymDim::Known)
        }
        _ => dims::floor_div(a, b),
    }
}

fn exact_div(a: &SymDim, b: &SymDim) -> SymDim {
    match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => match (x.checked_rem(*y), x.checked_div(*y)) {
            (Some(0), Some(q)) => SymDim::Known(q),
            _ => SymDim::Unknown,
        },
        _ => dims::floor_div(a, b),
    }
}

fn floor_mod(a: &SymDim, b: &SymDim) -> SymDim {
    known2(a, b, |x, y| {
        let r = x.checked_rem(y)?;
        Some(if r != 0 && ((r < 0) != (y < 0)) {
            r + y
        } else {
            r
        })
    })
}

/// Applies `f` elementwise to inputs 0 and 1, broadcasting a one-element side.
fn elementwise(ctx: &NodeCtx<'_>, f: impl Fn(&SymDim, &SymDim) -> SymDim) -> Option<Dims> {
    let a = ctx.sym(0)?;
    let b = ctx.sym(1)?;
    zip_broadcast(&a, &b, f)
}

fn elementwise_n(ctx: &NodeCtx<'_>, f: impl Fn(&SymDim, &SymDim) -> SymDim) -> Option<Dims> {
    let mut acc = ctx.sym(0)?;
    for i in 1..ctx.n_inputs() {
        acc = zip_broadcast(&acc, &ctx.sym(i)?, &f)?;
    }
    Some(acc)
}

fn zip_broadcast(
    a: &[SymDim],
    b: &[SymDim],
    f: impl Fn(&SymDim, &SymDim) -> SymDim,
) -> Option<Dims> {
    match (a.len(), b.len()) {
        (n, m) if n == m => Some(a.iter().zip(b).map(|(x, y)| f(x, y)).collect()),
        (1, _) => a.first().map(|x| b.iter().map(|y| f(x, y)).collect()),
        (_, 1) => b.first().map(|y| a.iter().map(|x| f(x, y)).collect()),
        _ => None,
    }
}

fn gather(ctx: &NodeCtx<'_>) -> Option<Dims> {
    if ctx.rank(0)? != 1 || ctx.attr_int_or("axis", 0) != 0 {
        return None;
    }
    let data = ctx.sym(0)?;
    let len = i64::try_from(data.len()).ok()?;
    ctx.ints(1)?
        .into_iter()
        .map(|i| {
            let i = if i < 0 { i + len } else { i };
            data.get(usize::try_from(i).ok()?).cloned()
        })
        .collect()
}

fn slice(ctx: &NodeCtx<'_>) -> Option<Dims> {
    if ctx.rank(0)? != 1 {
        return None;
    }
    let data = ctx.sym(0)?;
    let (starts, ends, axes, steps) = if ctx.since() < 10 {
        (
            ctx.attr_ints("starts")?,
            ctx.attr_ints("ends")?,
            ctx.attr_ints("axes"),
            None,
        )
    } else {
        let axes = if ctx.has_input(3) {
            Some(ctx.ints(3)?)
        } else {
            None
        };
        let steps = if ctx.has_input(4) {
            Some(ctx.ints(4)?)
        } else {
            None
        };
        (ctx.ints(1)?, ctx.ints(2)?, axes, steps)
    };
    if let Some(axes) = &axes {
        if axes.iter().any(|&a| a != 0 && a != -1) {
            return None;
        }
    }
    let (&start, &end) = (starts.first()?, ends.first()?);
    let step = steps.as_ref().and_then(|s| s.first().copied()).unwrap_or(1);
    let indices = slice_indices(i64::try_from(data.len()).ok()?, start, end, step)?;
    indices
        .into_iter()
        .map(|i| data.get(usize::try_from(i).ok()?).cloned())
        .collect()
}

/// The indices `data[start:end:step]` selects from a dimension of length `len`, per the ONNX
/// Slice clamping rules; `None` for a zero step.
pub(crate) fn slice_indices(len: i64, start: i64, end: i64, step: i64) -> Option<Vec<i64>> {
    let (start, end) = slice_bounds(len, start, end, step)?;
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < end) || (step < 0 && i > end) {
        out.push(i);
        if out.len() > MAX_SYM_LEN {
            return None;
        }
        i = i.checked_add(step)?;
    }
    Some(out)
}

/// Clamped (start, end) of a slice over a dimension of known length, per the ONNX spec.
pub(crate) fn slice_bounds(len: i64, start: i64, end: i64, step: i64) -> Option<(i64, i64)> {
    // A negative length is a declared dim of -1 (some exporters write it for "unknown").
    if step == 0 || len < 0 {
        return None;
    }
    let fix = |v: i64| if v < 0 { v.saturating_add(len) } else { v };
    let (start, end) = (fix(start), fix(end));
    if step > 0 {
        Some((start.clamp(0, len), end.clamp(0, len)))
    } else {
        Some((start.clamp(-1, len - 1), end.clamp(-1, len - 1)))
    }
}

fn where_(ctx: &NodeCtx<'_>) -> Option<Dims> {
    let cond = ctx.sym(0)?;
    let x = ctx.sym(1)?;
    let y = ctx.sym(2)?;
    let n = cond.len().max(x.len()).max(y.len());
    let pick = |v: &[SymDim], i: usize| -> Option<SymDim> {
        if v.len() == 1 {
            v.first().cloned()
        } else {
            v.get(i).cloned()
        }
    };
    (0..n)
        .map(|i| {
            let c = pick(&cond, i)?;
            let (a, b) = (pick(&x, i)?, pick(&y, i)?);
            Some(match c.known() {
                Some(0) => b,
                Some(_) => a,
                None if a == b && !matches!(a, SymDim::Unknown) => a,
                None => SymDim::Unknown,
            })
        })
        .collect()
}

fn range(ctx: &NodeCtx<'_>) -> Option<Dims> {
    let (start, limit, delta) = (ctx.int_scalar(0)?, ctx.int_scalar(1)?, ctx.int_scalar(2)?);
    let n = range_len(start, limit, delta)?;
    if n > MAX_SYM_LEN as i64 {
        return None;
    }
    (0..n)
        .map(|i| {
            i.checked_mul(delta)
                .and_then(|o| o.checked_add(start))
                .map(SymDim::Known)
        })
        .collect()
}

/// The number of elements of `Range(start, limit, delta)`: `max(ceil((limit - start) / delta), 0)`.
pub(crate) fn range_len(start: i64, limit: i64, delta: i64) -> Option<i64> {
    let span = limit.checked_sub(start)?;
    Some(dims::div_ceil(span, delta)?.max(0))
}

fn constant_of_shape(ctx: &NodeCtx<'_>) -> Option<Dims> {
    let shape = ctx.ints(0)?;
    let [n] = shape.as_slice() else { return None };
    let n = usize::try_from(*n).ok().filter(|&n| n <= MAX_SYM_LEN)?;
    let value = match ctx.attr_tensor("value") {
        Some(t) => *tensor_data::tensor_ints(t)?.first()?,
        None => 0,
    };
    Some(vec![SymDim::Known(value); n])
}

fn expand(ctx: &NodeCtx<'_>) -> Option<Dims> {
    let value = ctx.sym(0)?;
    let shape = ctx.ints(1)?;
    match (value.as_slice(), shape.as_slice()) {
        ([one], [n]) => {
            let n = usize::try_from(*n).ok().filter(|&n| n <= MAX_SYM_LEN)?;
            Some(vec![one.clone(); n.max(1)])
        }
        (_, [n]) if *n == 1 || usize::try_from(*n).ok() == Some(value.len()) => Some(value),
        _ => None,
    }
}
