//! Scans and selections: CumSum, CumProd, TopK, OneHot, Compress, NonZero, ReverseSequence.

use ndarray::{Axis, IxDyn};

use super::{norm_axis, one, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, map_all, map_numeric, with_numeric, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "CumSum", 11, LATEST, cum_sum);
    reg.register("", "CumProd", 26, LATEST, cum_prod);
    reg.register("", "TopK", 1, LATEST, top_k);
    reg.register("", "OneHot", 9, LATEST, one_hot);
    reg.register("", "Compress", 9, LATEST, compress);
    reg.register("", "NonZero", 9, LATEST, non_zero);
    reg.register("", "ReverseSequence", 10, LATEST, reverse_sequence);
}

fn scalar_axis(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize, rank: usize) -> Result<usize> {
    let v = ctx
        .input(inputs, i)?
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    norm_axis(
        *v.first()
            .ok_or_else(|| ctx.err("axis must have one value"))?,
        rank,
    )
}

/// Inclusive or exclusive, forward or reverse scan of `a` along `axis` with `op`.
fn scan<T: Num>(
    a: &Array<T>,
    axis: usize,
    exclusive: bool,
    reverse: bool,
    init: T,
    op: impl Fn(T, T) -> T,
) -> Array<T> {
    let mut out = a.to_owned();
    for mut lane in out.lanes_mut(Axis(axis)) {
        let n = lane.len();
        let mut acc = init;
        for k in 0..n {
            let i = if reverse { n - 1 - k } else { k };
            let v = lane[i];
            if exclusive {
                lane[i] = acc;
                acc = op(acc, v);
            } else {
                acc = op(acc, v);
                lane[i] = acc;
            }
        }
    }
    out.into_shared()
}

fn cum(ctx: &KernelCtx, inputs: &[Option<&Value>], product: bool) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let axis = scalar_axis(ctx, inputs, 1, x.rank())?;
    let exclusive = ctx.attr_int("exclusive", 0)? == 1;
    let reverse = ctx.attr_int("reverse", 0)? == 1;
    one(map_numeric!(x, a => if product {
        scan(a, axis, exclusive, reverse, Num::one(), Num::mul)
    } else {
        scan(a, axis, exclusive, reverse, Num::zero(), Num::add)
    }, other => return Err(unsupported(ctx, other))))
}

fn cum_sum(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    cum(ctx, inputs, false)
}

fn cum_prod(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    cum(ctx, inputs, true)
}

fn top_k(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let k = if ctx.opset < 10 {
        ctx.attr_int("k", 0)?
    } else {
        let v = ctx
            .input(inputs, 1)?
            .to_i64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?;
        *v.first().ok_or_else(|| ctx.err("K must have one value"))?
    };
    let axis = norm_axis(ctx.attr_int("axis", -1)?, x.rank())?;
    let largest = ctx.attr_int("largest", 1)? == 1;
    let dim = x.shape()[axis];
    if k < 0 || k as usize > dim {
        return Err(ctx.err(format!("K = {k} is out of range for a dimension of {dim}")));
    }
    let k = k as usize;
    fn topk<T: Num>(
        a: &Array<T>,
        axis: usize,
        k: usize,
        largest: bool,
    ) -> Result<(Array<T>, Array<i64>)> {
        let mut shape = a.shape().to_vec();
        shape[axis] = k;
        let mut vals = Array::from_elem(IxDyn(&shape), T::zero()).to_owned();
        let mut idxs = Array::from_elem(IxDyn(&shape), 0i64).to_owned();
        for ((lane, mut vl), mut il) in a
            .lanes(Axis(axis))
            .into_iter()
            .zip(vals.lanes_mut(Axis(axis)))
            .zip(idxs.lanes_mut(Axis(axis)))
        {
            let mut order: Vec<usize> = (0..lane.len()).collect();
            // Stable sort: equal values keep the lower index first. NaN counts as largest.
            order.sort_by(|&i, &j| {
                let (p, q) = (lane[i], lane[j]);
                let ord = match (p.is_nan(), q.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ => p.partial_cmp(&q).unwrap_or(std::cmp::Ordering::Equal),
                };
                if largest {
                    ord.reverse()
                } else {
                    ord
                }
            });
            for (slot, &i) in order.iter().take(k).enumerate() {
                vl[slot] = lane[i];
                il[slot] = i as i64;
            }
        }
        Ok((vals.into_shared(), idxs.into_shared()))
    }
    let indices;
    let values = map_numeric!(x, a => {
        let (v, i) = topk(a, axis, k, largest)?;
        indices = i;
        v
    }, other => return Err(unsupported(ctx, other)));
    Ok(vec![
        Value::Tensor(values),
        Value::Tensor(Tensor::I64(indices)),
    ])
}

fn one_hot(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let idx_t = ctx.input(inputs, 0)?;
    let idx = match idx_t {
        t if t.dtype().is_float() => t
            .to_f64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?
            .into_iter()
            .map(|v| v as i64)
            .collect(),
        t => t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
    };
    let depth_t = ctx.input(inputs, 1)?;
    let depth = *depth_t
        .to_f64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?
        .first()
        .ok_or_else(|| ctx.err("depth must have one value"))? as i64;
    if depth <= 0 {
        return Err(ctx.err(format!("depth {depth} must be positive")));
    }
    let values = ctx.input(inputs, 2)?;
    if values.len() != 2 {
        return Err(ctx.err("values must have two elements [off, on]"));
    }
    let rank = idx_t.rank() + 1;
    let axis = norm_axis(ctx.attr_int("axis", -1)?, rank)?;
    let mut shape = idx_t.shape().to_vec();
    shape.insert(axis, depth as usize);
    crate::tensor::check_size("OneHot result", &shape)?;
    let outer: usize = idx_t.shape()[..axis].iter().product();
    let inner: usize = idx_t.shape()[axis..].iter().product();
    fn fill<T: Clone>(
        v: &Array<T>,
        idx: &[i64],
        depth: usize,
        outer: usize,
        inner: usize,
        shape: &[usize],
    ) -> Result<Array<T>> {
        let off = v
            .iter()
            .next()
            .cloned()
            .ok_or_else(|| RefError::op("values is empty"))?;
        let on = v
            .iter()
            .nth(1)
            .cloned()
            .ok_or_else(|| RefError::op("values is empty"))?;
        let mut out = vec![off; outer * depth * inner];
        for o in 0..outer {
            for i in 0..inner {
                let mut j = idx[o * inner + i];
                if j < 0 {
                    j += depth as i64;
                }
                if (0..depth as i64).contains(&j) {
                    out[(o * depth + j as usize) * inner + i] = on.clone();
                }
            }
        }
        array_from_vec(shape, out)
    }
    one(map_all!(values, v => fill(v, &idx, depth as usize, outer, inner, &shape)?))
}

fn compress(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let cond: Vec<bool> = ctx
        .input(inputs, 1)?
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?
        .into_iter()
        .map(|v| v != 0)
        .collect();
    let (src, axis) = match ctx.attr_opt_int("axis")? {
        Some(a) => (x.clone(), norm_axis(a, x.rank())?),
        None => (x.reshaped(&[x.len()])?, 0),
    };
    let dim = src.shape()[axis];
    let keep: Vec<usize> = cond
        .iter()
        .enumerate()
        .take(dim)
        .filter(|(_, &c)| c)
        .map(|(i, _)| i)
        .collect();
    one(map_all!(&src, a => a.select(Axis(axis), &keep).into_shared()))
}

fn non_zero(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let nz: Vec<bool> = match x {
        Tensor::Bool(a) => a.iter().copied().collect(),
        t => {
            with_numeric!(t, a => a.iter().map(|v| Num::to_f64(*v) != 0.0).collect(), other => return Err(unsupported(ctx, other)))
        }
    };
    let shape = x.shape().to_vec();
    let rank = shape.len();
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); rank];
    let mut count = 0;
    let mut idx = vec![0usize; rank];
    for &flag in &nz {
        if flag {
            for (d, c) in coords.iter_mut().enumerate() {
                c.push(idx[d] as i64);
            }
            count += 1;
        }
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let flat: Vec<i64> = coords.into_iter().flatten().collect();
    one(Tensor::from_vec(&[rank, count], flat)?)
}

fn reverse_sequence(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let lens = ctx
        .input(inputs, 1)?
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let batch_axis = norm_axis(ctx.attr_int("batch_axis", 1)?, x.rank())?;
    let time_axis = norm_axis(ctx.attr_int("time_axis", 0)?, x.rank())?;
    if batch_axis == time_axis || x.rank() < 2 {
        return Err(ctx.err("batch_axis and time_axis must differ on an input of rank >= 2"));
    }
    if lens.len() != x.shape()[batch_axis] {
        return Err(ctx.err("sequence_lens must have one entry per batch"));
    }
    fn rev<T: Clone>(a: &Array<T>, lens: &[i64], batch_axis: usize, time_axis: usize) -> Array<T> {
        let mut out = a.to_owned();
        for (b, &len) in lens.iter().enumerate() {
            let src = a.index_axis(Axis(batch_axis), b);
            let mut dst = out.index_axis_mut(Axis(batch_axis), b);
            let t_axis = if time_axis > batch_axis {
                time_axis - 1
            } else {
                time_axis
            };
            let n = (len.max(0) as usize).min(src.shape()[t_axis]);
            for t in 0..n {
                dst.index_axis_mut(Axis(t_axis), t)
                    .assign(&src.index_axis(Axis(t_axis), n - 1 - t));
            }
        }
        out.into_shared()
    }
    one(map_all!(x, a => rev(a, &lens, batch_axis, time_axis)))
}
