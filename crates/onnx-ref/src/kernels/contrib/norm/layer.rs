//! SkipLayerNormalization, SkipSimplifiedLayerNormalization (com.microsoft) and
//! SimplifiedLayerNormalization (default domain); LayerNormalization below opset 17 reuses the
//! standard kernel.
//!
//! The skip forms normalize `input + skip (+ bias)` over the last axis of a rank-2 or rank-3
//! input; `skip` is the input's shape or its trailing dims (leading 1s allowed), repeated over
//! the batch. Outputs: the normalized value, the mean and the inverse standard deviation
//! (float, the input's shape with a last dim of 1; the simplified form writes a mean of zeros,
//! as onnxruntime does), and the sum `input + skip + bias`.

use super::{floats, floats_broadcast, same_type, tensor_of, MS};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::norm_axis;
use crate::tensor::Tensor;
use crate::value::Value;

/// onnxruntime's default epsilon for the skip forms.
const SKIP_EPSILON: f32 = 1e-12;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register(MS, "SkipLayerNormalization", 1, LATEST, skip_layer_norm);
    reg.register(
        MS,
        "SkipSimplifiedLayerNormalization",
        1,
        LATEST,
        skip_simplified_layer_norm,
    );
    reg.register(
        "",
        "SimplifiedLayerNormalization",
        1,
        LATEST,
        simplified_layer_norm,
    );
    reg.register("", "LayerNormalization", 1, 16, layer_norm_below_17);
}

/// onnxruntime's LayerNormalization below opset 17: the standard op's semantics, except that
/// Scale (and B) may have another float type than X and Y has Scale's type. Mixed types are
/// computed in double and Y rounded once to Scale's type.
fn layer_norm_below_17(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    if x.dtype() == scale.dtype() {
        return crate::kernels::nn::layer_norm(ctx, inputs);
    }
    let mut wide = Vec::with_capacity(inputs.len());
    for (i, v) in inputs.iter().enumerate() {
        wide.push(match ctx.opt_input(inputs, i)? {
            Some(t) if i < 3 => {
                floats(ctx, t, "X, Scale and B")?;
                Some(Value::Tensor(crate::kernels::cast_tensor(
                    t,
                    DType::Double,
                )?))
            }
            _ => v.cloned(),
        });
    }
    let refs: Vec<Option<&Value>> = wide.iter().map(Option::as_ref).collect();
    let mut out = crate::kernels::nn::layer_norm(ctx, &refs)?;
    if let Some(Value::Tensor(y)) = out.first() {
        out[0] = Value::Tensor(crate::kernels::cast_tensor(y, scale.dtype())?);
    }
    Ok(out)
}

fn skip_layer_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let beta = ctx.opt_input(inputs, 3)?;
    let bias = ctx.opt_input(inputs, 4)?;
    skip_norm(ctx, inputs, beta, bias, false)
}

fn skip_simplified_layer_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let bias = ctx.opt_input(inputs, 3)?;
    skip_norm(ctx, inputs, None, bias, true)
}

/// A per-hidden-unit parameter: one value per element of the last axis.
fn hidden_param(
    ctx: &KernelCtx,
    t: &Tensor,
    hidden: usize,
    dtype: DType,
    what: &str,
) -> Result<Vec<f64>> {
    same_type(ctx, t, dtype, what)?;
    if t.rank() != 1 || t.shape()[0] != hidden {
        return Err(ctx.err(format!(
            "{what} must have shape [{hidden}], found {:?}",
            t.shape()
        )));
    }
    floats(ctx, t, what)
}

fn skip_norm(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    beta: Option<&Tensor>,
    bias: Option<&Tensor>,
    simplified: bool,
) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let skip = ctx.input(inputs, 1)?;
    let gamma = ctx.input(inputs, 2)?;
    let shape = x.shape().to_vec();
    if !(2..=3).contains(&shape.len()) {
        return Err(ctx.err(format!("input must have rank 2 or 3, found {shape:?}")));
    }
    let hidden = shape[shape.len() - 1];
    let dtype = x.dtype();
    same_type(ctx, skip, dtype, "skip")?;
    // skip is the input's shape, or its trailing dims behind leading 1s: (1, S, H) or (S, H).
    let skip_dims = skip.shape();
    let core: Vec<usize> = skip_dims.iter().copied().skip_while(|&d| d == 1).collect();
    let fits = skip_dims.len() <= shape.len()
        && skip_dims.len() >= 2
        && skip_dims[skip_dims.len() - 1] == hidden
        && shape[shape.len() - core.len()..] == core[..];
    if !fits {
        return Err(ctx.err(format!(
            "skip of shape {skip_dims:?} does not fit the input's {shape:?}"
        )));
    }
    let xv = floats(ctx, x, "input")?;
    let sv = floats_broadcast(ctx, skip, &shape, "skip")?;
    let g = hidden_param(ctx, gamma, hidden, dtype, "gamma")?;
    let b = beta
        .map(|t| hidden_param(ctx, t, hidden, dtype, "beta"))
        .transpose()?;
    let bias = bias
        .map(|t| hidden_param(ctx, t, hidden, dtype, "bias"))
        .transpose()?;
    let eps = ctx.attr_float("epsilon", SKIP_EPSILON)? as f64;
    if eps < 0.0 {
        return Err(ctx.err(format!("epsilon must be >= 0, got {eps}")));
    }
    let rows = xv.len().checked_div(hidden).unwrap_or(0);
    let mut sum = vec![0.0; xv.len()];
    let mut y = vec![0.0; xv.len()];
    let mut means = vec![0.0; rows];
    let mut inv_stds = vec![0.0; rows];
    for r in 0..rows {
        let span = r * hidden..(r + 1) * hidden;
        for (i, k) in span.clone().enumerate() {
            sum[k] = xv[k] + sv[k] + bias.as_ref().map_or(0.0, |b| b[i]);
        }
        let row = &sum[span.clone()];
        let n = hidden as f64;
        let mean = row.iter().sum::<f64>() / n;
        let inv = if simplified {
            1.0 / (row.iter().map(|v| v * v).sum::<f64>() / n + eps).sqrt()
        } else {
            1.0 / (row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n + eps).sqrt()
        };
        let center = if simplified { 0.0 } else { mean };
        for (i, k) in span.enumerate() {
            y[k] = (sum[k] - center) * inv * g[i] + b.as_ref().map_or(0.0, |b| b[i]);
        }
        means[r] = if simplified { 0.0 } else { mean };
        inv_stds[r] = inv;
    }
    let mut stat_shape = shape.clone();
    *stat_shape.last_mut().expect("rank >= 2") = 1;
    Ok(vec![
        tensor_of(&shape, y, dtype)?,
        tensor_of(&stat_shape, means, DType::Float)?,
        tensor_of(&stat_shape, inv_stds, DType::Float)?,
        tensor_of(&shape, sum, dtype)?,
    ])
}

/// RMS normalization over the axes from `axis` on: `X / sqrt(mean(X²) + epsilon) * scale`.
/// Outputs Y (the scale's type) and the inverse RMS (`stash_type`, float by default) shaped
/// like X with 1s from `axis` on.
fn simplified_layer_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let shape = x.shape().to_vec();
    if shape.is_empty() {
        return Err(ctx.err("input must have rank >= 1"));
    }
    let axis = norm_axis(ctx.attr_int("axis", -1)?, shape.len())
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let stash = match ctx.attr_int("stash_type", 1)? {
        1 => DType::Float,
        code => DType::from_code(code as i32)
            .filter(|d| d.is_float())
            .ok_or_else(|| ctx.err(format!("stash_type {code} is not a float type")))?,
    };
    let inner: usize = shape[axis..].iter().product();
    let xv = floats(ctx, x, "X")?;
    let s = floats_broadcast(ctx, scale, &shape[axis..], "scale")?;
    let mut y = vec![0.0; xv.len()];
    let mut inv_rms = Vec::new();
    if inner > 0 {
        for (o, row) in xv.chunks(inner).enumerate() {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / inner as f64;
            let inv = 1.0 / (ms + eps).sqrt();
            for (i, v) in row.iter().enumerate() {
                y[o * inner + i] = v * inv * s[i];
            }
            inv_rms.push(inv);
        }
    }
    let stat_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if i < axis { d } else { 1 })
        .collect();
    if inner == 0 {
        inv_rms = vec![0.0; stat_shape.iter().product()];
    }
    Ok(vec![
        tensor_of(&shape, y, scale.dtype())?,
        tensor_of(&stat_shape, inv_rms, stash)?,
    ])
}
