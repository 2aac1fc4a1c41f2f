//! Reductions, generically: every Reduce* op (axes as attribute or input, `keepdims`,
//! `noop_with_empty_axes`), ArgMax/ArgMin, TopK, and the losses that reduce
//! (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

use super::shape_ops::axes_arg;
use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{Dims, SymDim};
use crate::infer::error::InferError;

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    if op.starts_with("Reduce") {
        return Some(reduce);
    }
    Some(match op {
        "ArgMax" | "ArgMin" => arg_reduce,
        "TopK" => top_k,
        "NegativeLogLikelihoodLoss" => nll_loss,
        "SoftmaxCrossEntropyLoss" => softmax_cross_entropy_loss,
        _ => return None,
    })
}

/// The shape after reducing `axes` of `input`.
fn reduced(input: &[SymDim], axes: &[usize], keepdims: bool) -> Dims {
    input
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(SymDim::Known(1)),
            (true, false) => None,
        })
        .collect()
}

fn reduce(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let input_since = if ctx.schema.name == "ReduceSum" {
        13
    } else {
        18
    };
    let keepdims = ctx.attr_int_or("keepdims", 1) != 0;
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = input.len();
    let axes = match axes_arg(ctx, input_since) {
        Some(Some(axes)) if !axes.is_empty() => ctx.axes("axes", &axes, rank)?,
        Some(_) => {
            if ctx.attr_int_or("noop_with_empty_axes", 0) != 0 {
                return Ok(vec![Out::shape(input)]);
            }
            (0..rank).collect()
        }
        None if keepdims => return Ok(vec![Out::rank(rank)]),
        None => {
            let out = match ctx.shape(1).as_deref() {
                Some([SymDim::Known(n)]) => usize::try_from(*n)
                    .ok()
                    .and_then(|n| rank.checked_sub(n))
                    .map_or_else(Out::default, Out::rank),
                _ => Out::default(),
            };
            return Ok(vec![out]);
        }
    };
    Ok(vec![Out::shape(reduced(&input, &axes, keepdims))])
}

fn arg_reduce(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let axis = ctx.axis("axis", ctx.attr_int_or("axis", 0), input.len())?;
    let keepdims = ctx.attr_int_or("keepdims", 1) != 0;
    Ok(vec![Out::shape(reduced(&input, &[axis], keepdims))])
}

fn top_k(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(input) = ctx.shape(0) else {
        return Ok(vec![Out::default(), Out::default()]);
    };
    let axis = ctx.axis("axis", ctx.attr_int_or("axis", -1), input.len())?;
    let k = if ctx.since() < 10 {
        ctx.attr_int("k").map(SymDim::Known)
    } else {
        ctx.sym(1).and_then(|v| v.into_iter().next())
    }
    .unwrap_or(SymDim::Unknown);
    if let (Some(kv), Some(n)) = (k.known(), input.get(axis).and_then(SymDim::known)) {
        if kv < 0 || kv > n {
            return Err(ctx.fail(format!(
                "k = {kv} is out of range for dim {axis} of {}",
                ctx.describe(0)
            )));
        }
    }
    let mut out = input;
    if let Some(slot) = out.get_mut(axis) {
        *slot = k;
    }
    Ok(vec![Out::shape(out.clone()), Out::shape(out)])
}

fn loss_shape(ctx: &NodeCtx<'_>, target: usize) -> Out {
    match ctx.attr_str("reduction").as_deref() {
        Some("none") => Out::maybe_shape(ctx.shape(target)),
        _ => Out::shape(vec![]),
    }
}

fn nll_loss(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![loss_shape(ctx, 1)])
}

fn softmax_cross_entropy_loss(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![loss_shape(ctx, 1), Out::maybe_shape(ctx.shape(0))])
}
