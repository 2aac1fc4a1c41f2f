//! Ops that select parts of a tensor: Slice, Gather, GatherElements, GatherND, Split, Pad,
//! Compress, CenterCropPad, Unique.
//!
//! Slice makes one assumption beyond onnx's inference: an end that is a symbolic dim `p`, with
//! start `s >= 0` and step 1, gives `p - s` elements when the sliced dim is known (a table of
//! positions sliced to `x[:, :seq]`: exporters write it this way, and such models only run when
//! `p` is within the table, since a shorter slice of at least 2 rows broadcasts with nothing of
//! `p`). A sliced dim that is itself symbolic gives `p - s` only when it is `p` or a sum of dims
//! with `p` as a term; any other name may be shorter than `p`, down to 1, which broadcasts: a
//! causal mask `total` long sliced to the `past+seq` keys, with a 1-long attention mask.

use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;
use crate::infer::symbolic::slice_bounds;
use crate::infer::tensor_data;

/// Ends at or beyond this are "to the end of the dim" even when the dim is not known: exporters
/// write `INT_MAX` or `INT64_MAX` there, and no real dim is longer.
const TO_THE_END: i64 = i32::MAX as i64;

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    Some(match op {
        "Slice" => slice,
        "Gather" => gather,
        "GatherElements" => gather_elements,
        "GatherND" => gather_nd,
        "Split" => split,
        "Pad" => pad,
        "Compress" => compress,
        "CenterCropPad" => center_crop_pad,
        "Unique" => unique,
        _ => return None,
    })
}

/// The length of `dim[start:end:step]`.
fn slice_len(dim: &SymDim, start: &SymDim, end: &SymDim, step: i64) -> SymDim {
    if let (SymDim::Known(n), SymDim::Known(s), SymDim::Known(e)) = (dim, start, end) {
        return match slice_bounds(*n, *s, *e, step) {
            Some((s, e)) => SymDim::Known(dims::div_ceil(e - s, step).unwrap_or(0).max(0)),
            None => SymDim::Unknown,
        };
    }
    match (start, end) {
        // Everything from a non-negative start: dim - start.
        (SymDim::Known(s), SymDim::Known(e)) if step == 1 && *s >= 0 && *e >= TO_THE_END => {
            dims::sub(dim, &SymDim::Known(*s))
        }
        // The whole dim reversed.
        (SymDim::Known(-1), SymDim::Known(e)) if step == -1 && *e <= -TO_THE_END => dim.clone(),
        // A symbolic end p known to be within the dim: the dim itself, or a sum of dims
        // `p+q` that `dims::add` named (dims are never negative, so p <= p+q).
        (SymDim::Known(s), SymDim::Param(p)) if step == 1 && *s >= 0 && within(p, dim) => {
            dims::sub(end, &SymDim::Known(*s))
        }
        _ => SymDim::Unknown,
    }
}

/// Whether a Slice to the dim named `p` is taken to stay within `dim`: `dim` is `p`, or a sum
/// `dims::add` named with `p` as one of its terms (dims are never negative), or a known dim
/// (a table of positions sliced to `seq`, the module comment's assumption). Never a dim named
/// otherwise, which may be shorter than `p`, down to 1.
fn within(p: &str, dim: &SymDim) -> bool {
    match dim {
        SymDim::Param(d) => d == p || d.split('+').any(|term| term == p),
        SymDim::Known(_) => true,
        SymDim::Unknown => false,
    }
}

fn slice(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = input.len();
    let (starts, ends, axes, steps) = if ctx.since() < 10 {
        let known = |name: &str| {
            ctx.attr_ints(name)
                .map(|v| v.into_iter().map(SymDim::Known).collect::<Dims>())
        };
        (known("starts"), known("ends"), ctx.attr_ints("axes"), None)
    } else {
        let axes = if ctx.has_input(3) { ctx.ints(3) } else { None };
        let steps = if ctx.has_input(4) { ctx.ints(4) } else { None };
        if (ctx.has_input(3) && axes.is_none()) || (ctx.has_input(4) && steps.is_none()) {
            return Ok(vec![Out::rank(rank)]);
        }
        (ctx.sym(1), ctx.sym(2), axes, steps)
    };
    let (Some(starts), Some(ends)) = (starts, ends) else {
        let mut out = input;
        match axes {
            Some(axes) => {
                for a in ctx.axes("axes", &axes, rank)? {
                    if let Some(d) = out.get_mut(a) {
                        *d = SymDim::Unknown;
                    }
                }
            }
            None => out.fill(SymDim::Unknown),
        }
        return Ok(vec![Out::shape(out)]);
    };
    if starts.len() != ends.len() {
        return Err(ctx.fail(format!(
            "starts {} and ends {} differ in length",
            dims::show(&starts),
            dims::show(&ends)
        )));
    }
    let axes: Vec<i64> = axes.unwrap_or_else(|| {
        (0..starts.len())
            .filter_map(|a| i64::try_from(a).ok())
            .collect()
    });
    let axes = ctx.axes("axes", &axes, rank)?;
    if axes.len() != starts.len() || steps.as_ref().is_some_and(|s| s.len() != starts.len()) {
        return Err(ctx.fail(format!(
            "starts, ends, axes and steps must have one entry each ({} starts, {} axes)",
            starts.len(),
            axes.len()
        )));
    }
    let mut out = input;
    for (k, &axis) in axes.iter().enumerate() {
        let step = steps.as_ref().and_then(|s| s.get(k).copied()).unwrap_or(1);
        if step == 0 {
            return Err(ctx.fail("a step is 0"));
        }
        let (Some(start), Some(end)) = (starts.get(k), ends.get(k)) else {
            continue;
        };
        if let Some(d) = out.get_mut(axis) {
            *d = slice_len(d, start, end, step);
        }
    }
    Ok(vec![Out::shape(out)])
}

fn gather(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(data), Some(indices)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Out::default()]);
    };
    let axis = ctx.axis("axis", ctx.attr_int_or("axis", 0), data.len())?;
    if let (Some(SymDim::Known(n)), Some(values)) = (data.get(axis), ctx.ints(1)) {
        if let Some(bad) = values.iter().find(|&&v| v < -n || v >= *n) {
            return Err(ctx.fail(format!(
                "index {bad} is out of range for dim {axis} ({n}) of {}",
                ctx.describe(0)
            )));
        }
    }
    let mut out: Dims = data.get(..axis).unwrap_or_default().to_vec();
    out.extend(indices);
    out.extend(data.get(axis + 1..).unwrap_or_default().iter().cloned());
    Ok(vec![Out::shape(out)])
}

fn gather_elements(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![Out::maybe_shape(ctx.shape(1))])
}

fn gather_nd(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(data), Some(indices)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Out::default()]);
    };
    let batch = usize::try_from(ctx.attr_int_or("batch_dims", 0)).unwrap_or(usize::MAX);
    let Some((last, lead)) = indices.split_last() else {
        return Err(ctx.fail(format!("{} must have rank >= 1", ctx.describe(1))));
    };
    let Some(k) = last.known().and_then(|k| usize::try_from(k).ok()) else {
        return Ok(vec![Out::default()]);
    };
    let Some(rest) = batch.checked_add(k).and_then(|from| data.get(from..)) else {
        return Err(ctx.fail(format!(
            "{} indexes {k} dims after {batch} batch dims of {}",
            ctx.describe(1),
            ctx.describe(0)
        )));
    };
    let mut out = lead.to_vec();
    out.extend(rest.iter().cloned());
    Ok(vec![Out::shape(out)])
}

fn split(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let n = ctx.n_outputs;
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default(); n]);
    };
    let axis = ctx.axis("axis", ctx.attr_int_or("axis", 0), input.len())?;
    let dim = input.get(axis).cloned().unwrap_or(SymDim::Unknown);
    let with = |d: SymDim| {
        let mut s = input.clone();
        if let Some(slot) = s.get_mut(axis) {
            *slot = d;
        }
        Out::shape(s)
    };
    let sizes = if ctx.since() < 13 {
        ctx.attr_ints("split").filter(|s| !s.is_empty())
    } else if ctx.has_input(1) {
        match ctx.ints(1) {
            Some(s) => Some(s),
            None => return Ok(vec![with(SymDim::Unknown); n]),
        }
    } else {
        None
    };
    if let Some(sizes) = sizes {
        if sizes.len() != n {
            return Err(ctx.fail(format!(
                "split {sizes:?} has {} parts for {n} outputs",
                sizes.len()
            )));
        }
        let total = sizes.iter().try_fold(0i64, |acc, s| acc.checked_add(*s));
        if total.is_none_or(|t| dim.known().is_some_and(|d| d != t)) || sizes.iter().any(|s| *s < 0)
        {
            return Err(ctx.fail(format!(
                "split {sizes:?} does not add up to dim {axis} of {}",
                ctx.describe(0)
            )));
        }
        return Ok(sizes.into_iter().map(|s| with(SymDim::Known(s))).collect());
    }
    let parts = i64::try_from(n).unwrap_or(i64::MAX).max(1);
    match dim {
        SymDim::Known(d) if d % parts == 0 => Ok(vec![with(SymDim::Known(d / parts)); n]),
        SymDim::Known(d) if ctx.since() >= 18 => {
            let chunk = dims::div_ceil(d, parts).unwrap_or(0);
            let last = d - chunk * (parts - 1);
            if last < 0 {
                return Err(ctx.fail(format!("dim {axis} ({d}) cannot be split into {n} parts")));
            }
            let mut outs = vec![with(SymDim::Known(chunk)); n.saturating_sub(1)];
            outs.push(with(SymDim::Known(last)));
            Ok(outs)
        }
        SymDim::Known(d) => Err(ctx.fail(format!(
            "dim {axis} ({d}) is not divisible into {n} equal parts"
        ))),
        other if n == 1 => Ok(vec![with(other)]),
        _ => Ok(vec![with(SymDim::Unknown); n]),
    }
}

fn pad(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = input.len();
    let pads = match ctx.since() {
        1 => ctx.attr_ints("paddings"),
        v if v < 11 => ctx.attr_ints("pads"),
        _ => ctx
            .sym(1)
            .map(|p| {
                p.into_iter()
                    .map(|d| d.known())
                    .collect::<Option<Vec<i64>>>()
            })
            .unwrap_or(None),
    };
    let Some(pads) = pads else {
        return Ok(vec![Out::rank(rank)]);
    };
    let axes: Vec<usize> = if ctx.since() >= 18 && ctx.has_input(3) {
        match ctx.ints(3) {
            Some(a) => ctx.axes("axes", &a, rank)?,
            None => return Ok(vec![Out::rank(rank)]),
        }
    } else {
        (0..rank).collect()
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.fail(format!(
            "pads {pads:?} must have 2 entries per padded axis ({} axes) of {}",
            axes.len(),
            ctx.describe(0)
        )));
    }
    let mut out = input;
    for (k, &axis) in axes.iter().enumerate() {
        let (Some(&begin), Some(&end)) = (pads.get(k), pads.get(k + axes.len())) else {
            continue;
        };
        if let Some(d) = out.get_mut(axis) {
            let padded = dims::add(d, &SymDim::Known(begin.saturating_add(end)));
            if padded.known().is_some_and(|v| v < 0) {
                return Err(ctx.fail(format!("pads {pads:?} make dim {axis} negative")));
            }
            *d = padded;
        }
    }
    Ok(vec![Out::shape(out)])
}

fn compress(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let count = ctx
        .constant(1)
        .and_then(tensor_data::tensor_ints)
        .map_or(SymDim::Unknown, |c| {
            SymDim::Known(i64::try_from(c.iter().filter(|v| **v != 0).count()).unwrap_or(i64::MAX))
        });
    if !ctx.has_attr("axis") {
        return Ok(vec![Out::shape(vec![count])]);
    }
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let axis = ctx.axis("axis", ctx.attr_int_or("axis", 0), input.len())?;
    let mut out = input;
    if let Some(d) = out.get_mut(axis) {
        *d = count;
    }
    Ok(vec![Out::shape(out)])
}

fn center_crop_pad(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = input.len();
    let axes: Vec<usize> = match ctx.attr_ints("axes").filter(|_| ctx.has_attr("axes")) {
        Some(a) => ctx.axes("axes", &a, rank)?,
        None => (0..rank).collect(),
    };
    let Some(shape) = ctx.sym(1) else {
        let mut out = input;
        for &a in &axes {
            if let Some(d) = out.get_mut(a) {
                *d = SymDim::Unknown;
            }
        }
        return Ok(vec![Out::shape(out)]);
    };
    if shape.len() != axes.len() {
        return Err(ctx.fail(format!(
            "shape {} must have one entry per axis",
            dims::show(&shape)
        )));
    }
    let mut out = input;
    for (&a, d) in axes.iter().zip(shape) {
        if let Some(slot) = out.get_mut(a) {
            *slot = d;
        }
    }
    Ok(vec![Out::shape(out)])
}

fn unique(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let input = ctx.shape(0);
    let y = match (ctx.has_attr("axis"), &input) {
        (false, _) => Out::rank(1),
        (true, Some(input)) => {
            let axis = ctx.axis("axis", ctx.attr_int_or("axis", 0), input.len())?;
            let mut out = input.clone();
            if let Some(d) = out.get_mut(axis) {
                *d = SymDim::Unknown;
            }
            Out::shape(out)
        }
        (true, None) => Out::default(),
    };
    let inverse = match (ctx.has_attr("axis"), &input) {
        (false, Some(input)) => Out::shape(vec![dims::product(input)]),
        (true, Some(input)) => {
            let axis = ctx.axis("axis", ctx.attr_int_or("axis", 0), input.len())?;
            Out::shape(vec![input.get(axis).cloned().unwrap_or(SymDim::Unknown)])
        }
        _ => Out::rank(1),
    };
    Ok(vec![y, Out::rank(1), inverse, Out::rank(1)])
}
