//! Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (axes as an
//! attribute or, from ReduceSum-13 and the others' opset 18, as an input; keepdims;
//! noop_with_empty_axes) and ArgMax/ArgMin. Floats accumulate in f64.

use super::{norm_axes, norm_axis, one, unsupported};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, map_numeric, with_numeric, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "ReduceSum", 1, LATEST, reduce_sum);
    reg.register("", "ReduceMean", 1, LATEST, reduce_mean);
    reg.register("", "ReduceMax", 1, LATEST, reduce_max);
    reg.register("", "ReduceMin", 1, LATEST, reduce_min);
    reg.register("", "ReduceProd", 1, LATEST, reduce_prod);
    reg.register("", "ReduceL1", 1, LATEST, reduce_l1);
    reg.register("", "ReduceL2", 1, LATEST, reduce_l2);
    reg.register("", "ReduceLogSum", 1, LATEST, reduce_log_sum);
    reg.register("", "ReduceLogSumExp", 1, LATEST, reduce_log_sum_exp);
    reg.register("", "ReduceSumSquare", 1, LATEST, reduce_sum_square);
    reg.register("", "ArgMax", 1, LATEST, arg_max);
    reg.register("", "ArgMin", 1, LATEST, arg_min);
}

/// Applies `f` to every lane of `a` over `axes` (each lane as a contiguous slice), giving the
/// kept shape (with 1s in place of reduced axes when `keepdims`).
pub(crate) fn reduce_lanes<T: Clone, O>(
    a: &Array<T>,
    axes: &[usize],
    keepdims: bool,
    f: impl Fn(&[T]) -> O,
) -> Result<Array<O>> {
    let rank = a.ndim();
    let kept: Vec<usize> = (0..rank).filter(|i| !axes.contains(i)).collect();
    let mut perm = kept.clone();
    perm.extend(axes.iter().copied());
    let permuted = a.view().permuted_axes(ndarray::IxDyn(&perm));
    let moved;
    let flat = match (permuted.as_slice(), a.as_slice()) {
        (Some(flat), _) => flat,
        (None, Some(src)) => {
            moved = super::permute::permuted_copy(src, a.shape(), &perm);
            &moved[..]
        }
        (None, None) => {
            moved = permuted.iter().cloned().collect::<Vec<T>>();
            &moved[..]
        }
    };
    let lane: usize = axes.iter().map(|&i| a.shape()[i]).product();
    let outer: usize = kept.iter().map(|&i| a.shape()[i]).product();
    let mut out = Vec::with_capacity(outer);
    for o in 0..outer {
        out.push(f(&flat[o * lane..(o + 1) * lane]));
    }
    let shape: Vec<usize> = if keepdims {
        (0..rank)
            .map(|i| if axes.contains(&i) { 1 } else { a.shape()[i] })
            .collect()
    } else {
        kept.iter().map(|&i| a.shape()[i]).collect()
    };
    array_from_vec(&shape, out)
}

/// The reduced axes, or `None` for "no reduction" (empty axes with noop_with_empty_axes).
fn reduce_axes(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    rank: usize,
    input_since: i64,
) -> Result<Option<Vec<usize>>> {
    let axes: Option<Vec<i64>> = if ctx.opset >= input_since {
        match ctx.opt_input(inputs, 1)? {
            Some(t) => Some(t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?),
            None => None,
        }
    } else {
        ctx.attr_ints("axes").map(<[i64]>::to_vec)
    };
    match axes {
        Some(a) if !a.is_empty() => Ok(Some(norm_axes(&a, rank)?)),
        _ => {
            if ctx.attr_int("noop_with_empty_axes", 0)? == 1 {
                Ok(None)
            } else {
                Ok(Some((0..rank).collect()))
            }
        }
    }
}

/// Defines a reduction kernel: `$f` maps a lane (`&[T]`) to the result, generic over `T: Num`.
macro_rules! reduction {
    ($name:ident, $since:expr, |$lane:ident: &[$t:ident]| $body:expr) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let x = ctx.input(inputs, 0)?;
            let keepdims = ctx.attr_int("keepdims", 1)? == 1;
            let Some(axes) = reduce_axes(ctx, inputs, x.rank(), $since)? else {
                return one(x.clone());
            };
            fn lanes<$t: Num>(a: &Array<$t>, axes: &[usize], keepdims: bool) -> Result<Array<$t>> {
                reduce_lanes(a, axes, keepdims, |$lane: &[$t]| -> $t { $body })
            }
            one(map_numeric!(x, a => lanes(a, &axes, keepdims)?, other => return Err(unsupported(ctx, other))))
        }
    };
}

fn sum_of<T: Num>(lane: &[T]) -> T {
    if T::IS_FLOAT {
        T::from_f64(lane.iter().map(|v| v.to_f64()).sum())
    } else {
        lane.iter().fold(T::zero(), |a, b| a.add(*b))
    }
}

reduction!(reduce_sum, 13, |lane: &[T]| sum_of(lane));
reduction!(reduce_mean, 18, |lane: &[T]| {
    if T::IS_FLOAT {
        T::from_f64(lane.iter().map(|v| v.to_f64()).sum::<f64>() / lane.len() as f64)
    } else {
        sum_of(lane).div(T::from_i64(lane.len() as i64))
    }
});
reduction!(reduce_max_num, 18, |lane: &[T]| lane
    .iter()
    .fold(T::lowest(), |a, b| a.max_nan(*b)));
reduction!(reduce_min_num, 18, |lane: &[T]| lane
    .iter()
    .fold(T::highest(), |a, b| a.min_nan(*b)));

/// ReduceMax/ReduceMin on bool tensors (opset 20): any / all.
fn reduce_bool(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    x: &Array<bool>,
    any: bool,
) -> Result<Vec<Value>> {
    let keepdims = ctx.attr_int("keepdims", 1)? == 1;
    let Some(axes) = reduce_axes(ctx, inputs, x.ndim(), 18)? else {
        return one(Tensor::Bool(x.clone()));
    };
    let out = if any {
        reduce_lanes(x, &axes, keepdims, |lane: &[bool]| lane.iter().any(|&b| b))?
    } else {
        reduce_lanes(x, &axes, keepdims, |lane: &[bool]| lane.iter().all(|&b| b))?
    };
    one(Tensor::Bool(out))
}

fn reduce_max(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    match ctx.input(inputs, 0)? {
        Tensor::Bool(x) => reduce_bool(ctx, inputs, x, true),
        _ => reduce_max_num(ctx, inputs),
    }
}

fn reduce_min(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    match ctx.input(inputs, 0)? {
        Tensor::Bool(x) => reduce_bool(ctx, inputs, x, false),
        _ => reduce_min_num(ctx, inputs),
    }
}
reduction!(reduce_prod, 18, |lane: &[T]| {
    if T::IS_FLOAT {
        T::from_f64(lane.iter().map(|v| v.to_f64()).product())
    } else {
        lane.iter().fold(T::one(), |a, b| a.mul(*b))
    }
});
reduction!(reduce_l1, 18, |lane: &[T]| {
    if T::IS_FLOAT {
        T::from_f64(lane.iter().map(|v| v.to_f64().abs()).sum())
    } else {
        lane.iter().fold(T::zero(), |a, b| a.add(b.abs()))
    }
});
reduction!(reduce_l2, 18, |lane: &[T]| T::from_f64(
    lane.iter()
        .map(|v| v.to_f64() * v.to_f64())
        .sum::<f64>()
        .sqrt()
));
reduction!(reduce_log_sum, 18, |lane: &[T]| T::from_f64(
    lane.iter().map(|v| v.to_f64()).sum::<f64>().ln()
));
reduction!(reduce_log_sum_exp, 18, |lane: &[T]| {
    let m = lane
        .iter()
        .map(|v| v.to_f64())
        .fold(f64::NEG_INFINITY, f64::max);
    if m.is_infinite() {
        T::from_f64(lane.iter().map(|v| v.to_f64().exp()).sum::<f64>().ln())
    } else {
        T::from_f64(
            m + lane
                .iter()
                .map(|v| (v.to_f64() - m).exp())
                .sum::<f64>()
                .ln(),
        )
    }
});
reduction!(reduce_sum_square, 18, |lane: &[T]| {
    if T::IS_FLOAT {
        T::from_f64(lane.iter().map(|v| v.to_f64() * v.to_f64()).sum())
    } else {
        lane.iter().fold(T::zero(), |a, b| a.add(b.mul(*b)))
    }
});

fn arg_reduce(ctx: &KernelCtx, inputs: &[Option<&Value>], want_max: bool) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    if x.rank() == 0 {
        return Err(ctx.err("input must have rank >= 1"));
    }
    let axis = norm_axis(ctx.attr_int("axis", 0)?, x.rank())?;
    let keepdims = ctx.attr_int("keepdims", 1)? == 1;
    let last = ctx.attr_int("select_last_index", 0)? == 1;
    fn arg<T: Num>(
        a: &Array<T>,
        axis: usize,
        keepdims: bool,
        want_max: bool,
        last: bool,
    ) -> Result<Array<i64>> {
        reduce_lanes(a, &[axis], keepdims, |lane: &[T]| {
            let mut best: Option<(usize, T)> = None;
            for (i, &v) in lane.iter().enumerate() {
                best = match best {
                    None => Some((i, v)),
                    Some((bi, bv)) => {
                        if bv.is_nan() {
                            Some((bi, bv))
                        } else if v.is_nan() {
                            Some((i, v))
                        } else {
                            let better = if want_max { v > bv } else { v < bv };
                            if better || (last && v == bv) {
                                Some((i, v))
                            } else {
                                Some((bi, bv))
                            }
                        }
                    }
                };
            }
            best.map_or(0, |(i, _)| i as i64)
        })
    }
    let out = with_numeric!(x, a => arg(a, axis, keepdims, want_max, last)?, other => return Err(unsupported(ctx, other)));
    one(Tensor::I64(out))
}

fn arg_max(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    arg_reduce(ctx, inputs, true)
}

fn arg_min(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    arg_reduce(ctx, inputs, false)
}
