//! Internal kernels the backward graphs of `crate::gradient` use, in the private domain
//! `ai.onnx_opt.internal` (version 1). They exist only in this interpreter's registry
//! (`register_all`, called by `KernelRegistry::with_builtin_kernels`) and only generated
//! gradient graphs import the domain; a model that names it itself gets them too, so the names
//! are kept specific. Plain kernels: the gradient module (a planning step) emits nodes of them,
//! and they import nothing above the kernel interface.
//!
//! Each does one thing ONNX cannot say without knowing ranks or element types at graph-building
//! time:
//! - `SumToShapeOf(grad, like)`: sums `grad` over the axes along which `like` was broadcast
//!   (leading extra axes, and axes where `like` has size 1), giving `like`'s shape. The
//!   gradient of a broadcast operand.
//! - `FullLike(like) <value: float>`: a tensor of `like`'s shape and element type filled with
//!   `value` (the seed of ones, zero gradients).
//! - `ScalarLike(like) <value: float>`: a rank-0 tensor of `like`'s element type (constants in
//!   derivative formulas, broadcast by the ops that use them).
//! - `CastToTypeOf(x, like)`: `x` cast to `like`'s element type (ONNX `CastLike` is opset 15+).
//! - `PromoteMatMulOperand(t) <side: int>`: a rank-1 MatMul operand as the matrix MatMul
//!   treats it (`[1, k]` for side 0, the left operand; `[k, 1]` for side 1); other ranks
//!   unchanged.
//! - `PromoteMatMulResult(g, a, b)`: `g` (shaped like `MatMul(a, b)`) with the axes MatMul
//!   dropped for rank-1 operands put back.
//! - `SwapLastAxes(t)`: `t` with its last two axes exchanged (a batched matrix transpose).

use ndarray::{Axis, IxDyn};

use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::kernels::cast_tensor;
use crate::numeric::Num;
use crate::tensor::{map_all, map_numeric, Array, Tensor};
use crate::value::Value;

/// The private domain of the internal kernels.
pub(crate) const INTERNAL_DOMAIN: &str = "ai.onnx_opt.internal";

/// Registers the internal kernels of gradient graphs (domain `ai.onnx_opt.internal`, version 1).
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(INTERNAL_DOMAIN, "SumToShapeOf", 1, 1, sum_to_shape_of);
    reg.register(INTERNAL_DOMAIN, "FullLike", 1, 1, full_like);
    reg.register(INTERNAL_DOMAIN, "ScalarLike", 1, 1, scalar_like);
    reg.register(INTERNAL_DOMAIN, "CastToTypeOf", 1, 1, cast_to_type_of);
    reg.register(
        INTERNAL_DOMAIN,
        "PromoteMatMulOperand",
        1,
        1,
        promote_operand,
    );
    reg.register(INTERNAL_DOMAIN, "PromoteMatMulResult", 1, 1, promote_result);
    reg.register(INTERNAL_DOMAIN, "SwapLastAxes", 1, 1, swap_last_axes);
}

fn one(t: Tensor) -> Result<Vec<Value>> {
    Ok(vec![Value::Tensor(t)])
}

fn sum_to_shape_of(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let grad = ctx.input(inputs, 0)?;
    let like = ctx.input(inputs, 1)?;
    let target = like.shape().to_vec();
    if grad.shape() == target.as_slice() {
        return one(grad.clone());
    }
    let rank = grad.rank();
    let Some(lead) = rank.checked_sub(target.len()) else {
        return Err(ctx.err(format!(
            "cannot sum a gradient of shape {:?} to the larger rank of {target:?}",
            grad.shape()
        )));
    };
    let mut axes = Vec::new();
    for (k, &d) in grad.shape().iter().enumerate() {
        if k < lead {
            axes.push(k);
            continue;
        }
        let t = target[k - lead];
        if t == 1 && d != 1 {
            axes.push(k);
        } else if t != d {
            return Err(ctx.err(format!(
                "shape {target:?} does not broadcast to the gradient's shape {:?}",
                grad.shape()
            )));
        }
    }
    let summed = map_numeric!(grad, a => sum_axes(a, &axes, lead), other => {
        return Err(ctx.err(format!("cannot sum a gradient of type {}", other.dtype())))
    });
    one(summed)
}

/// Sums `a` over `axes` (ascending); axes below `lead` are removed, the others kept as size 1.
fn sum_axes<T: Num>(a: &Array<T>, axes: &[usize], lead: usize) -> Array<T> {
    if T::IS_FLOAT {
        let mut acc = a.mapv(|v| v.to_f64());
        for &k in axes.iter().rev() {
            let s = acc.sum_axis(Axis(k));
            acc = if k < lead { s } else { s.insert_axis(Axis(k)) };
        }
        acc.mapv(T::from_f64).into_shared()
    } else {
        let mut acc = a.to_owned();
        for &k in axes.iter().rev() {
            let s = acc.fold_axis(Axis(k), T::zero(), |x, y| x.add(*y));
            acc = if k < lead { s } else { s.insert_axis(Axis(k)) };
        }
        acc.into_shared()
    }
}

fn fill<T: Num>(shape: &[usize], value: f64) -> Array<T> {
    Array::from_elem(IxDyn(shape), T::from_f64(value))
}

fn filled(ctx: &KernelCtx, like: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let value = f64::from(ctx.attr_float("value", 0.0)?);
    Ok(map_numeric!(like, _a => fill(shape, value), other => {
        return Err(ctx.err(format!("cannot fill a tensor of type {}", other.dtype())))
    }))
}

fn full_like(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let like = ctx.input(inputs, 0)?;
    one(filled(ctx, like, like.shape())?)
}

fn scalar_like(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let like = ctx.input(inputs, 0)?;
    one(filled(ctx, like, &[])?)
}

fn cast_to_type_of(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let like = ctx.input(inputs, 1)?;
    if x.dtype() == like.dtype() {
        return one(x.clone());
    }
    one(cast_tensor(x, like.dtype())?)
}

fn promote_operand(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let side = ctx.attr_int("side", 0)?;
    match (t.rank(), side) {
        (0, _) => Err(ctx.err("a MatMul operand cannot be a scalar")),
        (1, 0) => one(t.reshaped(&[1, t.len()])?),
        (1, 1) => one(t.reshaped(&[t.len(), 1])?),
        (1, other) => Err(ctx.err(format!("side must be 0 or 1, got {other}"))),
        _ => one(t.clone()),
    }
}

fn promote_result(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let g = ctx.input(inputs, 0)?;
    let a = ctx.input(inputs, 1)?;
    let b = ctx.input(inputs, 2)?;
    let mut shape = g.shape().to_vec();
    if b.rank() == 1 {
        shape.push(1);
    }
    if a.rank() == 1 {
        let at = shape.len().saturating_sub(1);
        shape.insert(at, 1);
    }
    one(g.reshaped(&shape)?)
}

fn swap_last_axes(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let rank = t.rank();
    if rank < 2 {
        return Err(ctx.err(format!(
            "cannot swap the last two axes of a tensor of shape {:?}",
            t.shape()
        )));
    }
    one(map_all!(t, a => {
        let mut v = a.view();
        v.swap_axes(rank - 2, rank - 1);
        v.as_standard_layout().into_owned().into_shared()
    }))
}
