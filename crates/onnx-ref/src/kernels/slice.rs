//! Indexing operators: Slice (attribute and input forms, negative steps, clamping), Gather,
//! GatherElements, GatherND, ScatterElements, ScatterND.

use ndarray::{Axis, Dimension, IxDyn, Slice};

use super::{norm_axis, one, typed, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, map_all, map_numeric, Array};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Slice", 1, LATEST, slice);
    reg.register("", "Gather", 1, LATEST, gather);
    reg.register("", "GatherElements", 11, LATEST, gather_elements);
    reg.register("", "GatherND", 11, LATEST, gather_nd);
    reg.register("", "ScatterElements", 11, LATEST, scatter_elements);
    reg.register("", "Scatter", 9, 10, scatter_elements);
    reg.register("", "ScatterND", 11, LATEST, scatter_nd);
}

fn ints(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize) -> Result<Option<Vec<i64>>> {
    match ctx.opt_input(inputs, i)? {
        Some(t) => Ok(Some(
            t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        )),
        None => Ok(None),
    }
}

/// The ndarray slice selecting what Python's `a[start:end:step]` selects on a dim of `dim`.
pub(crate) fn python_slice(start: i64, end: i64, step: i64, dim: usize) -> Slice {
    let d = dim as i64;
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    if step > 0 {
        let s = norm(start).clamp(0, d);
        let e = norm(end).clamp(0, d).max(s);
        Slice::new(s as isize, Some(e as isize), step as isize)
    } else {
        let s = norm(start).clamp(-1, d - 1);
        let e = norm(end).clamp(-1, d - 1);
        // Elements s, s+step, ... > e: the range [e+1, s+1) taken from the back.
        let lo = e + 1;
        let hi = (s + 1).max(lo);
        Slice::new(lo as isize, Some(hi as isize), step as isize)
    }
}

fn slice(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let rank = t.rank();
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        (
            ctx.attr_ints("starts")
                .map(<[i64]>::to_vec)
                .unwrap_or_default(),
            ctx.attr_ints("ends")
                .map(<[i64]>::to_vec)
                .unwrap_or_default(),
            ctx.attr_ints("axes").map(<[i64]>::to_vec),
            None,
        )
    } else {
        (
            ints(ctx, inputs, 1)?.ok_or_else(|| ctx.err("starts is required"))?,
            ints(ctx, inputs, 2)?.ok_or_else(|| ctx.err("ends is required"))?,
            ints(ctx, inputs, 3)?,
            ints(ctx, inputs, 4)?,
        )
    };
    if starts.len() != ends.len() {
        return Err(ctx.err(format!(
            "starts {starts:?} and ends {ends:?} differ in length"
        )));
    }
    let axes: Vec<i64> = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.err("starts, ends, axes and steps must have the same length"));
    }
    let mut per_axis: Vec<Option<(i64, i64, i64)>> = vec![None; rank];
    for i in 0..starts.len() {
        let axis = norm_axis(axes[i], rank)?;
        if steps[i] == 0 {
            return Err(ctx.err("slice step must not be zero"));
        }
        per_axis[axis] = Some((starts[i], ends[i], steps[i]));
    }
    let shape = t.shape().to_vec();
    let out = map_all!(t, a => {
        let mut v = a.clone();
        for (axis, spec) in per_axis.iter().enumerate() {
            if let Some((s, e, st)) = spec {
                v.slice_axis_inplace(Axis(axis), python_slice(*s, *e, *st, shape[axis]));
            }
        }
        v
    });
    one(out)
}

/// Indices normalized to `[0, dim)`; negative ones count from the end.
fn norm_indices(idx: &[i64], dim: usize) -> Result<Vec<usize>> {
    idx.iter()
        .map(|&i| {
            let j = if i < 0 { i + dim as i64 } else { i };
            if j < 0 || j >= dim as i64 {
                Err(RefError::op(format!(
                    "index {i} is out of bounds for a dimension of {dim}"
                )))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

fn gather(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let data = ctx.input(inputs, 0)?;
    let idx_t = ctx.input(inputs, 1)?;
    if data.rank() == 0 {
        return Err(ctx.err("data must have rank >= 1"));
    }
    let axis = norm_axis(ctx.attr_int("axis", 0)?, data.rank())?;
    let dim = data.shape()[axis];
    let idx = norm_indices(
        &idx_t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        dim,
    )?;
    let mut out_shape = data.shape()[..axis].to_vec();
    out_shape.extend_from_slice(idx_t.shape());
    out_shape.extend_from_slice(&data.shape()[axis + 1..]);
    check_size("Gather result", &out_shape)?;
    fn gather_of<T: Clone>(
        a: &Array<T>,
        axis: usize,
        idx: &[usize],
        out_shape: &[usize],
    ) -> Result<Array<T>> {
        let std = a.as_standard_layout();
        let flat = std
            .as_slice()
            .ok_or_else(|| RefError::op("data is not contiguous"))?;
        let outer: usize = a.shape()[..axis].iter().product();
        let inner: usize = a.shape()[axis + 1..].iter().product();
        let dim = a.shape()[axis];
        let mut out = Vec::with_capacity(outer * idx.len() * inner);
        for o in 0..outer {
            for &i in idx {
                let base = (o * dim + i) * inner;
                out.extend_from_slice(&flat[base..base + inner]);
            }
        }
        array_from_vec(out_shape, out)
    }
    one(map_all!(data, a => gather_of(a, axis, &idx, &out_shape)?))
}

fn gather_elements(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let data = ctx.input(inputs, 0)?;
    let idx_t = ctx.input(inputs, 1)?;
    let axis = norm_axis(ctx.attr_int("axis", 0)?, data.rank())?;
    if idx_t.rank() != data.rank() {
        return Err(ctx.err("indices must have the rank of data"));
    }
    let idx = norm_indices(
        &idx_t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        data.shape()[axis],
    )?;
    let idx_shape = idx_t.shape().to_vec();
    fn ge<T: Clone>(a: &Array<T>, axis: usize, idx: &[usize], shape: &[usize]) -> Result<Array<T>> {
        let mut out = Vec::with_capacity(idx.len());
        let ia = array_from_vec(shape, idx.to_vec())?;
        for (pos, &i) in ia.indexed_iter() {
            let mut p: Vec<usize> = pos.slice().to_vec();
            p[axis] = i;
            out.push(
                a.get(IxDyn(&p))
                    .cloned()
                    .ok_or_else(|| RefError::op("index out of bounds"))?,
            );
        }
        array_from_vec(shape, out)
    }
    one(map_all!(data, a => ge(a, axis, &idx, &idx_shape)?))
}

fn gather_nd(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let data = ctx.input(inputs, 0)?;
    let idx_t = ctx.input(inputs, 1)?;
    let b = ctx.attr_int("batch_dims", 0)? as usize;
    let q = idx_t.rank();
    let k = *idx_t
        .shape()
        .last()
        .ok_or_else(|| ctx.err("indices must have rank >= 1"))?;
    if b >= q || b + k > data.rank() {
        return Err(ctx.err("batch_dims and indices do not fit the data rank"));
    }
    let idx = idx_t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let ds = data.shape().to_vec();
    let mut out_shape: Vec<usize> = idx_t.shape()[..q - 1].to_vec();
    out_shape.extend_from_slice(&ds[b + k..]);
    let batch: usize = ds[..b].iter().product();
    let per_batch_idx: usize = idx_t.shape()[b..q - 1].iter().product();
    let inner: usize = ds[b + k..].iter().product();
    let per_batch_data: usize = ds[b..].iter().product();
    #[allow(clippy::too_many_arguments)]
    fn gnd<T: Clone>(
        a: &Array<T>,
        idx: &[i64],
        ds: &[usize],
        b: usize,
        k: usize,
        batch: usize,
        per_idx: usize,
        inner: usize,
        per_data: usize,
        out_shape: &[usize],
    ) -> Result<Array<T>> {
        let std = a.as_standard_layout();
        let flat = std
            .as_slice()
            .ok_or_else(|| RefError::op("data is not contiguous"))?;
        let mut out = Vec::with_capacity(batch * per_idx * inner);
        for bi in 0..batch {
            for j in 0..per_idx {
                let tuple = &idx[(bi * per_idx + j) * k..(bi * per_idx + j + 1) * k];
                let mut off = 0usize;
                for (d, &i) in tuple.iter().enumerate() {
                    let dim = ds[b + d];
                    let i = if i < 0 { i + dim as i64 } else { i };
                    if i < 0 || i >= dim as i64 {
                        return Err(RefError::op(format!(
                            "index {i} out of bounds for dim {dim}"
                        )));
                    }
                    off = off * dim + i as usize;
                }
                let base = bi * per_data + off * inner;
                out.extend_from_slice(&flat[base..base + inner]);
            }
        }
        array_from_vec(out_shape, out)
    }
    one(
        map_all!(data, a => gnd(a, &idx, &ds, b, k, batch, per_batch_idx, inner, per_batch_data, &out_shape)?),
    )
}

/// How scatter combines an update with the existing element.
#[derive(Debug, Clone, Copy)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(ctx: &KernelCtx) -> Result<Reduction> {
    Ok(match ctx.attr_string("reduction", "none")?.as_str() {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        r => return Err(ctx.err(format!("unknown reduction '{r}'"))),
    })
}

/// The combining function of a reduction over a numeric type.
fn reducer<T: Num>(r: Reduction) -> fn(&T, &T) -> T {
    match r {
        Reduction::None => |_, n| *n,
        Reduction::Add => |o, n| o.add(*n),
        Reduction::Mul => |o, n| o.mul(*n),
        Reduction::Max => |o, n| o.max_nan(*n),
        Reduction::Min => |o, n| o.min_nan(*n),
    }
}

/// Scatter with `combine` for any element type: numeric types get the reduction, other
/// types only support plain replacement.
macro_rules! scatter_dispatch {
    ($ctx:expr, $data:expr, $red:expr, $a:ident, $f:ident => $body:expr) => {
        match $red {
            Reduction::None => map_all!($data, $a => { let $f = |_: &_, n: &_| Clone::clone(n); $body }),
            r => map_numeric!($data, $a => { let $f = reducer(r); $body }, other => return Err(unsupported($ctx, other))),
        }
    };
}

fn scatter_elements(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let data = ctx.input(inputs, 0)?;
    let idx_t = ctx.input(inputs, 1)?;
    let upd = ctx.input(inputs, 2)?;
    let axis = norm_axis(ctx.attr_int("axis", 0)?, data.rank())?;
    let red = reduction(ctx)?;
    if idx_t.shape() != upd.shape() || idx_t.rank() != data.rank() {
        return Err(ctx.err("indices and updates must have the same shape and the rank of data"));
    }
    let idx = norm_indices(
        &idx_t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        data.shape()[axis],
    )?;
    fn se<T: Clone>(
        a: &Array<T>,
        u: &Array<T>,
        idx: &[usize],
        axis: usize,
        combine: impl Fn(&T, &T) -> T,
    ) -> Result<Array<T>> {
        let mut out = a.to_owned();
        for ((pos, v), &i) in u.indexed_iter().zip(idx) {
            let mut p: Vec<usize> = pos.slice().to_vec();
            p[axis] = i;
            let slot = out
                .get_mut(IxDyn(&p))
                .ok_or_else(|| RefError::op("index out of bounds"))?;
            *slot = combine(slot, v);
        }
        Ok(out.into_shared())
    }
    one(scatter_dispatch!(ctx, data, red, a, f => se(a, typed(upd)?, &idx, axis, f)?))
}

fn scatter_nd(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let data = ctx.input(inputs, 0)?;
    let idx_t = ctx.input(inputs, 1)?;
    let upd = ctx.input(inputs, 2)?;
    let red = reduction(ctx)?;
    let k = *idx_t
        .shape()
        .last()
        .ok_or_else(|| ctx.err("indices must have rank >= 1"))?;
    if k > data.rank() {
        return Err(ctx.err("index tuples are longer than the data rank"));
    }
    let idx = idx_t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let ds = data.shape().to_vec();
    let inner: usize = ds[k..].iter().product();
    fn snd<T: Clone>(
        a: &Array<T>,
        u: &Array<T>,
        idx: &[i64],
        ds: &[usize],
        k: usize,
        inner: usize,
        combine: impl Fn(&T, &T) -> T,
    ) -> Result<Array<T>> {
        let mut out: Vec<T> = a.as_standard_layout().iter().cloned().collect();
        let us: Vec<T> = u.as_standard_layout().iter().cloned().collect();
        for (j, tuple) in idx.chunks(k.max(1)).enumerate() {
            let mut off = 0usize;
            for (d, &i) in tuple.iter().enumerate().take(k) {
                let dim = ds[d];
                let i = if i < 0 { i + dim as i64 } else { i };
                if i < 0 || i >= dim as i64 {
                    return Err(RefError::op(format!(
                        "index {i} out of bounds for dim {dim}"
                    )));
                }
                off = off * dim + i as usize;
            }
            for e in 0..inner {
                let src = us
                    .get(j * inner + e)
                    .ok_or_else(|| RefError::op("updates too short"))?;
                let dst = out
                    .get_mut(off * inner + e)
                    .ok_or_else(|| RefError::op("index out of bounds"))?;
                *dst = combine(dst, src);
            }
        }
        array_from_vec(ds, out)
    }
    one(scatter_dispatch!(ctx, data, red, a, f => snd(a, typed(upd)?, &idx, &ds, k, inner, f)?))
}
