//! Contrib kernels: the norm family, as onnxruntime's CPU provider registers it.
//!
//! - `layer`: SkipLayerNormalization and SkipSimplifiedLayerNormalization (com.microsoft), and
//!   SimplifiedLayerNormalization (the default domain, every opset: no standard op has the name).
//!   LayerNormalization below opset 17 is onnxruntime's own default-domain op with the semantics
//!   the standard one got at 17, so the standard kernel (`kernels/nn.rs`) serves opsets 1..=16 too.
//! - `gelu`: Gelu, BiasGelu, FastGelu, QuickGelu and BiasAdd.
//! - `fused`: FusedMatMul (MatMul with transposes and a scale) and FusedConv (Conv, an optional
//!   addend Z, an activation).
//! - `embed`: EmbedLayerNormalization.
//!
//! onnxruntime computes float16 in f32 and rounds once at the end; these kernels compute every
//! float type in f64 and round once to the output type, which agrees with it to float16's
//! precision (and to float32's for float32 inputs).

mod embed;
mod fused;
mod gelu;
mod layer;

use super::MS;
use crate::dtype::DType;
use crate::error::Result;
use crate::registry::{KernelCtx, KernelRegistry};
use crate::tensor::{array_from_vec, Tensor};
use crate::value::Value;

/// Registers this family's kernels.
pub fn register_all(reg: &mut KernelRegistry) {
    layer::register_all(reg);
    gelu::register_all(reg);
    fused::register_all(reg);
    embed::register_all(reg);
}

/// The values of a floating-point tensor as f64; an error naming `what` for another type.
fn floats(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<Vec<f64>> {
    if !matches!(
        t.dtype(),
        DType::Float | DType::Float16 | DType::Double | DType::Bfloat16
    ) {
        return Err(ctx.err(format!(
            "{what} must be float, float16, bfloat16 or double, found {}",
            t.dtype()
        )));
    }
    t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))
}

/// `t`'s values (a float tensor) broadcast, numpy style, to `shape`.
fn floats_broadcast(ctx: &KernelCtx, t: &Tensor, shape: &[usize], what: &str) -> Result<Vec<f64>> {
    let v = floats(ctx, t, what)?;
    let a = array_from_vec(t.shape(), v)?;
    let view = crate::kernels::broadcast_view(&a, shape).map_err(|_| {
        ctx.err(format!(
            "{what} of shape {:?} does not broadcast to {shape:?}",
            t.shape()
        ))
    })?;
    Ok(view.iter().copied().collect())
}

/// A tensor of `dtype` from f64 values, rounded once.
fn tensor_of(shape: &[usize], values: Vec<f64>, dtype: DType) -> Result<Value> {
    Ok(Value::Tensor(crate::kernels::cast_tensor(
        &Tensor::from_vec(shape, values)?,
        dtype,
    )?))
}

/// Checks that `t` has `dtype` (inputs that onnxruntime types alike, such as X and gamma).
fn same_type(ctx: &KernelCtx, t: &Tensor, dtype: DType, what: &str) -> Result<()> {
    if t.dtype() != dtype {
        return Err(ctx.err(format!(
            "{what} has type {} but the input has {dtype}",
            t.dtype()
        )));
    }
    Ok(())
}
