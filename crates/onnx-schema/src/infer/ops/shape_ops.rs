//! Ops that rearrange or create shapes: Reshape, Flatten, Transpose, Squeeze, Unsqueeze,
//! Concat, Expand, Tile, Shape, Size, Constant, ConstantOfShape, Range, OneHot, NonZero,
//! DepthToSpace, SpaceToDepth. Shape inputs are read as symbolic vectors, so a shape computed by
//! `Concat(Unsqueeze(Gather(Shape(x), 0)), [2], [64])` gives `[batch, 2, 64]`.

use onnx_proto::tensor_proto::DataType;

use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;
use crate::infer::symbolic::{range_len, MAX_SYM_LEN};
use crate::infer::tensor_data;

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    Some(match op {
        "Reshape" => reshape,
        "Flatten" => flatten,
        "Transpose" => transpose,
        "Squeeze" => squeeze,
        "Unsqueeze" => unsqueeze,
        "Concat" => concat,
        "Expand" => expand,
        "Tile" => tile,
        "Shape" => shape,
        "Size" => size,
        "Constant" => constant,
        "ConstantOfShape" => constant_of_shape,
        "Range" => range,
        "OneHot" => one_hot,
        "NonZero" => non_zero,
        "DepthToSpace" => depth_to_space,
        "SpaceToDepth" => space_to_depth,
        _ => return None,
    })
}

/// A shape given as input `i` (a 1-D int64 tensor): its symbolic value, or just its length.
fn shape_input(ctx: &NodeCtx<'_>, i: usize) -> Option<Dims> {
    if let Some(v) = ctx.sym(i) {
        return Some(v);
    }
    match ctx.shape(i).as_deref() {
        Some([SymDim::Known(n)]) => {
            let n = usize::try_from(*n).ok().filter(|&n| n <= MAX_SYM_LEN)?;
            Some(vec![SymDim::Unknown; n])
        }
        _ => None,
    }
}

fn reshape(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let target = if ctx.since() < 5 {
        ctx.attr_ints("shape")
            .map(|v| v.into_iter().map(SymDim::Known).collect())
    } else {
        shape_input(ctx, 1)
    };
    let Some(target) = target else {
        return Ok(vec![Out::default()]);
    };
    let input = ctx.shape(0);
    let allow_zero = ctx.attr_int_or("allowzero", 0) != 0;
    let mut out = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, d) in target.iter().enumerate() {
        match d {
            SymDim::Known(0) if !allow_zero => match &input {
                Some(input) => out.push(input.get(i).cloned().ok_or_else(|| {
                    ctx.fail(format!(
                        "shape {} copies dim {i} (0) of {}, which has no such dim",
                        dims::show(&target),
                        ctx.describe(0)
                    ))
                })?),
                None => out.push(SymDim::Unknown),
            },
            SymDim::Known(-1) => {
                if infer_at.is_some() {
                    return Err(ctx.fail(format!(
                        "shape {} has more than one -1",
                        dims::show(&target)
                    )));
                }
                infer_at = Some(i);
                out.push(SymDim::Unknown);
            }
            SymDim::Known(v) if *v < 0 => {
                return Err(ctx.fail(format!(
                    "shape {} has the invalid dim {v}",
                    dims::show(&target)
                )))
            }
            other => out.push(other.clone()),
        }
    }
    if let Some(input) = &input {
        let others: Dims = out
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != infer_at)
            .map(|(_, d)| d.clone())
            .collect();
        match solve_element_count(input, &others) {
            Ok(dim) => match infer_at.and_then(|at| out.get_mut(at)) {
                Some(slot) => *slot = dim,
                None if dim.known().is_some_and(|r| r != 1) => {
                    return Err(ctx.fail(format!(
                        "cannot reshape {} to {}: element counts differ",
                        ctx.describe(0),
                        dims::show(&target)
                    )))
                }
                None => {}
            },
            Err(Some(reason)) => {
                return Err(ctx.fail(format!(
                    "cannot reshape {} to {}: {reason}",
                    ctx.describe(0),
                    dims::show(&target)
                )))
            }
            Err(None) => {}
        }
    }
    Ok(vec![Out::shape(out)])
}

/// The dim `x` with `prod(input) == prod(others) * x`: both products as monomials (a known part
/// times named factors, [`dims::Monomial`]), `others`' factors cancelled from `input`'s.
/// `Err(None)`: not determined; `Err(Some(reason))`: impossible.
fn solve_element_count(input: &[SymDim], others: &[SymDim]) -> Result<SymDim, Option<String>> {
    let (Some(whole), Some(part)) = (
        dims::Monomial::product_of(input),
        dims::Monomial::product_of(others),
    ) else {
        return Err(None);
    };
    if part.coef == 0 {
        return Err(None);
    }
    if whole.factors.is_empty() && part.factors.is_empty() && whole.coef % part.coef != 0 {
        return Err(Some(format!(
            "{} elements do not divide into parts of {}",
            whole.coef, part.coef
        )));
    }
    match whole.divide(&part) {
        Some(q) => match q.to_dim() {
            SymDim::Unknown => Err(None),
            d => Ok(d),
        },
        None => Err(None),
    }
}

fn flatten(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::rank(2)]);
    };
    let rank = i64::try_from(input.len()).unwrap_or(i64::MAX);
    let axis = ctx.attr_int_or("axis", 1);
    let axis = if axis < 0 { axis + rank } else { axis };
    let axis = usize::try_from(axis)
        .ok()
        .filter(|a| *a <= input.len())
        .ok_or_else(|| {
            ctx.bad_attr(
                "axis",
                format!("axis {axis} is out of range for rank {rank}"),
            )
        })?;
    let (head, tail) = input.split_at(axis);
    Ok(vec![Out::shape(vec![
        dims::product(head),
        dims::product(tail),
    ])])
}

fn transpose(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let perm = ctx
        .attr_ints("perm")
        .filter(|p| !p.is_empty() || ctx.has_attr("perm"));
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::maybe_shape(
            perm.map(|p| vec![SymDim::Unknown; p.len()]),
        )]);
    };
    let perm: Vec<usize> = match perm {
        Some(p) => {
            if p.len() != input.len() {
                return Err(ctx.bad_attr(
                    "perm",
                    format!(
                        "{p:?} has {} entries but {} has rank {}",
                        p.len(),
                        ctx.describe(0),
                        input.len()
                    ),
                ));
            }
            ctx.axes("perm", &p, input.len())?
        }
        None => (0..input.len()).rev().collect(),
    };
    let out = perm.iter().filter_map(|&a| input.get(a).cloned()).collect();
    Ok(vec![Out::shape(out)])
}

/// The axes of Squeeze/Unsqueeze/Reduce*: the attribute before `input_since`, else input 1.
/// `Ok(None)`: axes given but unknown. `Ok(Some(vec![]))` also for "not given".
pub(crate) fn axes_arg(ctx: &NodeCtx<'_>, input_since: i64) -> Option<Option<Vec<i64>>> {
    if ctx.since() < input_since {
        return Some(ctx.attr_ints("axes").filter(|_| ctx.has_attr("axes")));
    }
    if !ctx.has_input(1) {
        return Some(None);
    }
    ctx.ints(1).map(Some)
}

fn squeeze(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let Some(axes) = axes_arg(ctx, 13) else {
        // Axes given but unknown: the rank is known when the number of axes is.
        return Ok(vec![match ctx.shape(1).as_deref() {
            Some([SymDim::Known(n)]) => usize::try_from(*n)
                .ok()
                .and_then(|n| input.len().checked_sub(n))
                .map_or_else(Out::default, Out::rank),
            _ => Out::default(),
        }]);
    };
    // An empty axes list reads as no axes, as onnxruntime and the interpreter's kernel read it
    // (onnx's own inference and reference squeeze none; the spec says only what an absent list
    // means). The rules never rewrite a Squeeze whose list is empty, so only folding and types
    // depend on this reading, and they share it with the kernel.
    let axes = axes.filter(|a| !a.is_empty());
    let Some(axes) = axes else {
        if input.iter().any(|d| d.known().is_none()) {
            return Ok(vec![Out::default()]);
        }
        return Ok(vec![Out::shape(
            input.into_iter().filter(|d| !d.is(1)).collect(),
        )]);
    };
    let axes = ctx.axes("axes", &axes, input.len())?;
    for &a in &axes {
        if let Some(SymDim::Known(v)) = input.get(a) {
            if *v != 1 {
                return Err(ctx.fail(format!(
                    "cannot squeeze axis {a} of {}: its dim is {v}, not 1",
                    ctx.describe(0)
                )));
            }
        }
    }
    let out = input
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, d)| d)
        .collect();
    Ok(vec![Out::shape(out)])
}

fn unsqueeze(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let input = ctx.shape(0);
    let axes = match axes_arg(ctx, 13) {
        Some(Some(axes)) => axes,
        Some(None) => return Err(ctx.bad_attr("axes", "Unsqueeze needs axes")),
        None => {
            let n = match ctx.shape(1).as_deref() {
                Some([SymDim::Known(n)]) => usize::try_from(*n).ok().filter(|&n| n <= MAX_SYM_LEN),
                _ => None,
            };
            let out = input
                .zip(n)
                .map_or_else(Out::default, |(s, n)| Out::rank(s.len() + n));
            return Ok(vec![out]);
        }
    };
    let Some(input) = input else {
        return Ok(vec![Out::default()]);
    };
    let rank = input.len() + axes.len();
    let axes = ctx.axes("axes", &axes, rank)?;
    let mut rest = input.into_iter();
    let out = (0..rank)
        .map(|i| {
            if axes.contains(&i) {
                SymDim::Known(1)
            } else {
                rest.next().unwrap_or(SymDim::Unknown)
            }
        })
        .collect();
    Ok(vec![Out::shape(out)])
}

fn concat(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let shapes: Vec<Option<Dims>> = (0..ctx.n_inputs()).map(|i| ctx.shape(i)).collect();
    let Some(rank) = shapes.iter().flatten().map(Vec::len).next() else {
        return Ok(vec![Out::default()]);
    };
    let axis = ctx
        .attr_int("axis")
        .ok_or_else(|| ctx.bad_attr("axis", "required attribute is missing"))?;
    let axis = ctx.axis("axis", axis, rank.max(1))?;
    let mut out = vec![SymDim::Unknown; rank];
    let mut axis_dim = Some(SymDim::Known(0));
    for (i, shape) in shapes.iter().enumerate() {
        let Some(shape) = shape else {
            axis_dim = None;
            continue;
        };
        if shape.len() != rank {
            return Err(ctx.fail(format!(
                "all inputs must have rank {rank}, but input {i} is {}",
                dims::show(shape)
            )));
        }
        for (d, (slot, dim)) in out.iter_mut().zip(shape).enumerate() {
            if d == axis {
                axis_dim = axis_dim.map(|a| dims::add(&a, dim));
                continue;
            }
            *slot = dims::unify(slot, dim).ok_or_else(|| {
                ctx.fail(format!(
                    "inputs disagree on dim {d} ({slot} vs {dim} in input {i} {})",
                    dims::show(shape)
                ))
            })?;
        }
    }
    if let Some(slot) = out.get_mut(axis) {
        *slot = axis_dim.unwrap_or(SymDim::Unknown);
    }
    Ok(vec![Out::shape(out)])
}

fn expand(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(input), Some(target)) = (ctx.shape(0), shape_input(ctx, 1)) else {
        return Ok(vec![Out::default()]);
    };
    dims::broadcast(&[&input, &target])
        .map(|s| vec![Out::shape(s)])
        .map_err(|reason| {
            ctx.fail(format!(
                "{} cannot expand to {}: {reason}",
                ctx.describe(0),
                dims::show(&target)
            ))
        })
}

fn tile(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let Some(repeats) = ctx.sym(1) else {
        return Ok(vec![Out::rank(input.len())]);
    };
    if repeats.len() != input.len() {
        return Err(ctx.fail(format!(
            "repeats {} must have one entry per dim of {}",
            dims::show(&repeats),
            ctx.describe(0)
        )));
    }
    let out = input
        .iter()
        .zip(&repeats)
        .map(|(d, r)| dims::mul(d, r))
        .collect();
    Ok(vec![Out::shape(out)])
}

fn shape(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(rank) = ctx.rank(0) else {
        return Ok(vec![Out::rank(1)]);
    };
    let r = i64::try_from(rank).unwrap_or(i64::MAX);
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r);
    let start = clamp(ctx.attr_int_or("start", 0));
    let end = ctx.attr_int("end").map_or(r, clamp);
    Ok(vec![Out::shape(vec![SymDim::Known((end - start).max(0))])])
}

fn size(_ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![Out::shape(vec![])])
}

fn constant(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    if let Some(t) = tensor_data::constant_attribute_value(ctx.node_attrs()) {
        let dims = t.dims.iter().map(|&d| SymDim::Known(d)).collect();
        return Ok(vec![Out::shape(dims).maybe_elem(t.data_type)]);
    }
    let sparse = ctx
        .node_attrs()
        .iter()
        .find(|a| a.name.as_deref() == Some("sparse_value"))
        .and_then(|a| a.sparse_tensor.as_ref());
    match sparse {
        Some(s) => Ok(vec![Out::shape(
            s.dims.iter().map(|&d| SymDim::Known(d)).collect(),
        )
        .maybe_elem(s.values.as_ref().and_then(|v| v.data_type))]),
        None => Err(ctx.bad_attr("value", "Constant needs one value attribute")),
    }
}

fn constant_of_shape(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = ctx
        .attr_tensor("value")
        .and_then(|t| t.data_type)
        .unwrap_or(DataType::Float as i32);
    let shape = shape_input(ctx, 0);
    if let Some(s) = &shape {
        if let Some(bad) = s.iter().find(|d| d.known().is_some_and(|v| v < 0)) {
            return Err(ctx.fail(format!(
                "shape {} has the negative dim {bad}",
                dims::show(s)
            )));
        }
    }
    Ok(vec![Out::maybe_shape(shape).elem(elem)])
}

fn range(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    if let (Some(start), Some(limit), Some(delta)) =
        (ctx.int_scalar(0), ctx.int_scalar(1), ctx.int_scalar(2))
    {
        if delta == 0 {
            return Err(ctx.fail("delta is 0"));
        }
        let n = range_len(start, limit, delta).map_or(SymDim::Unknown, SymDim::Known);
        return Ok(vec![Out::shape(vec![n])]);
    }
    let scalar = |i: usize| -> Option<f64> {
        match ctx.floats(i)?.as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    };
    if let (Some(start), Some(limit), Some(delta)) = (scalar(0), scalar(1), scalar(2)) {
        let n = ((limit - start) / delta).ceil().max(0.0);
        if n.is_finite() && n < 9.0e15 {
            // n is a non-negative integer below 2^53, so the conversion is exact.
            #[allow(clippy::cast_possible_truncation)]
            return Ok(vec![Out::shape(vec![SymDim::Known(n as i64)])]);
        }
    }
    // Range(s, l, 1) has l - s elements when that difference is a dim (a dim is never
    // negative, so the spec's max(.., 0) leaves it): Range(0, p, 1) has p, and
    // Range(past, past+seq, 1), transformers' cache positions, has seq.
    if let (Some(start), Some(limit), Some(delta)) = (ctx.sym(0), ctx.sym(1), ctx.sym(2)) {
        if let ([s], [l @ SymDim::Param(_)], [SymDim::Known(1)]) =
            (start.as_slice(), limit.as_slice(), delta.as_slice())
        {
            if let n @ SymDim::Param(_) = dims::sub(l, s) {
                return Ok(vec![Out::shape(vec![n])]);
            }
        }
    }
    Ok(vec![Out::rank(1)])
}

fn one_hot(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(indices) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = indices.len() + 1;
    let axis = ctx.axis("axis", ctx.attr_int_or("axis", -1), rank)?;
    let depth = match ctx.floats(1).as_deref() {
        Some([d]) if d.is_finite() && *d >= 0.0 && *d < 9.0e15 => {
            // A non-negative depth below 2^53: truncation is the spec's conversion.
            #[allow(clippy::cast_possible_truncation)]
            let d = *d as i64;
            SymDim::Known(d)
        }
        _ => ctx
            .sym(1)
            .and_then(|v| v.into_iter().next())
            .unwrap_or(SymDim::Unknown),
    };
    let mut out = indices;
    out.insert(axis.min(out.len()), depth);
    Ok(vec![Out::shape(out)])
}

fn non_zero(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let rank = ctx
        .rank(0)
        .and_then(|r| i64::try_from(r).ok())
        .map_or(SymDim::Unknown, SymDim::Known);
    Ok(vec![Out::shape(vec![rank, SymDim::Unknown])])
}

fn blocksize(ctx: &NodeCtx<'_>) -> Result<i64, InferError> {
    ctx.attr_int("blocksize")
        .filter(|b| *b > 0)
        .ok_or_else(|| ctx.bad_attr("blocksize", "must be a positive integer"))
}

fn depth_to_space(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let b = blocksize(ctx)?;
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Out::rank(4)]);
    };
    let [n, c, h, w] = x.as_slice() else {
        return Err(ctx.fail(format!("{} must have rank 4", ctx.describe(0))));
    };
    let bb = SymDim::Known(b.saturating_mul(b));
    if let (Some(c), Some(bb)) = (c.known(), bb.known()) {
        if c % bb != 0 {
            return Err(ctx.fail(format!(
                "{} channels are not divisible by blocksize^2 = {bb}",
                ctx.describe(0)
            )));
        }
    }
    let out = vec![
        n.clone(),
        dims::floor_div(c, &bb),
        dims::mul(h, &SymDim::Known(b)),
        dims::mul(w, &SymDim::Known(b)),
    ];
    Ok(vec![Out::shape(out)])
}

fn space_to_depth(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let b = blocksize(ctx)?;
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Out::rank(4)]);
    };
    let [n, c, h, w] = x.as_slice() else {
        return Err(ctx.fail(format!("{} must have rank 4", ctx.describe(0))));
    };
    let out = vec![
        n.clone(),
        dims::mul(c, &SymDim::Known(b.saturating_mul(b))),
        dims::floor_div(h, &SymDim::Known(b)),
        dims::floor_div(w, &SymDim::Known(b)),
    ];
    Ok(vec![Out::shape(out)])
}
