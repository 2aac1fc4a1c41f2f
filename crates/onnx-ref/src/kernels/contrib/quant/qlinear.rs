//! The QLinear operators of uint8/int8 tensors with per-tensor scales and zero points:
//! QLinearAdd, QLinearMul (broadcasting), QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
//! QLinearAveragePool and QLinearGlobalAveragePool (NCHW, or NHWC with `channels_last`).
//!
//! Each dequantizes in f32 (`scale · (q - zp)`), computes in f32 and requantizes as onnxruntime
//! does: `saturate(round_half_even(v / y_scale) + y_zp)`. Absent zero points are 0.

use ndarray::IxDyn;

use super::super::super::pool::{for_each_window, out_shape, pool_window};
use super::{q_tensor, scalar_value};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::{broadcast_shapes, broadcast_view, norm_axis};
use crate::tensor::{array_from_vec, Array, Tensor};
use crate::value::Value;

/// Registers the QLinear operators.
pub(super) fn register_all(reg: &mut KernelRegistry) {
    let ms = super::super::MS;
    reg.register(ms, "QLinearAdd", 1, LATEST, qlinear_add);
    reg.register(ms, "QLinearMul", 1, LATEST, qlinear_mul);
    reg.register(ms, "QLinearSigmoid", 1, LATEST, qlinear_sigmoid);
    reg.register(ms, "QLinearLeakyRelu", 1, LATEST, qlinear_leaky_relu);
    reg.register(ms, "QLinearConcat", 1, LATEST, qlinear_concat);
    reg.register(ms, "QLinearAveragePool", 1, LATEST, qlinear_average_pool);
    reg.register(
        ms,
        "QLinearGlobalAveragePool",
        1,
        LATEST,
        qlinear_global_average_pool,
    );
}

/// A per-tensor quantization: scale and zero point.
#[derive(Debug, Clone, Copy)]
pub(super) struct QParams {
    pub scale: f32,
    pub zp: f32,
}

impl QParams {
    /// Reads the scale (input `s`) and optional zero point (input `z`) of a tensor of `dtype`.
    pub(super) fn read(
        ctx: &KernelCtx,
        inputs: &[Option<&Value>],
        s: usize,
        z: usize,
        dtype: DType,
    ) -> Result<QParams> {
        let scale = scalar_value(ctx, ctx.input(inputs, s)?, "scale")? as f32;
        let zp = match ctx.opt_input(inputs, z)? {
            None => 0.0,
            Some(t) if t.dtype() == dtype => scalar_value(ctx, t, "zero point")? as f32,
            Some(t) => {
                return Err(ctx.err(format!(
                    "zero point is {} but the tensor is {dtype}",
                    t.dtype()
                )))
            }
        };
        Ok(QParams { scale, zp })
    }

    fn dequantize(self, q: f32) -> f32 {
        self.scale * (q - self.zp)
    }
}

/// The range of an 8-bit quantized type.
pub(super) fn bounds(ctx: &KernelCtx, dtype: DType) -> Result<(f32, f32)> {
    match dtype {
        DType::Uint8 => Ok((0.0, 255.0)),
        DType::Int8 => Ok((-128.0, 127.0)),
        other => Err(ctx.err(format!(
            "quantized type must be uint8 or int8, found {other}"
        ))),
    }
}

/// `saturate(round_half_even(v / scale) + zp)`.
pub(super) fn quantize(v: f32, p: QParams, (lo, hi): (f32, f32)) -> f32 {
    ((v / p.scale).round_ties_even() + p.zp).clamp(lo, hi)
}

/// The values of a uint8/int8 tensor as f32 (in an array of its shape).
pub(super) fn q_values(ctx: &KernelCtx, t: &Tensor) -> Result<Array<f32>> {
    match t {
        Tensor::U8(a) => Ok(a.mapv(|v| v as f32).into_shared()),
        Tensor::I8(a) => Ok(a.mapv(|v| v as f32).into_shared()),
        other => Err(ctx.err(format!(
            "quantized input must be uint8 or int8, found {}",
            other.dtype()
        ))),
    }
}

/// A broadcasting binary op: inputs A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp; `f`
/// combines the dequantized values.
fn qlinear_binary(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    f: impl Fn(f32, f32) -> f32,
) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 3)?;
    let dtype = a.dtype();
    if b.dtype() != dtype {
        return Err(ctx.err(format!("A is {dtype} but B is {}", b.dtype())));
    }
    let range = bounds(ctx, dtype)?;
    let pa = QParams::read(ctx, inputs, 1, 2, dtype)?;
    let pb = QParams::read(ctx, inputs, 4, 5, dtype)?;
    let pc = QParams::read(ctx, inputs, 6, 7, dtype)?;
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let shape = broadcast_shapes(a.shape(), b.shape()).map_err(err)?;
    let (av, bv) = (q_values(ctx, a)?, q_values(ctx, b)?);
    let (av, bv) = (
        broadcast_view(&av, &shape).map_err(err)?,
        broadcast_view(&bv, &shape).map_err(err)?,
    );
    let out: Vec<f32> = av
        .iter()
        .zip(bv.iter())
        .map(|(&x, &y)| quantize(f(pa.dequantize(x), pb.dequantize(y)), pc, range))
        .collect();
    Ok(vec![Value::Tensor(
        q_tensor(&shape, out, dtype).map_err(err)?,
    )])
}

fn qlinear_add(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    qlinear_binary(ctx, inputs, |x, y| x + y)
}

fn qlinear_mul(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    qlinear_binary(ctx, inputs, |x, y| x * y)
}

/// A unary op: inputs X, X_scale, X_zp, Y_scale, Y_zp. onnxruntime tabulates the 256 results;
/// computing each element directly gives the same values.
fn qlinear_unary(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    f: impl Fn(f32) -> f32,
) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let dtype = x.dtype();
    let range = bounds(ctx, dtype)?;
    let px = QParams::read(ctx, inputs, 1, 2, dtype)?;
    let py = QParams::read(ctx, inputs, 3, 4, dtype)?;
    let out: Vec<f32> = q_values(ctx, x)?
        .iter()
        .map(|&q| quantize(f(px.dequantize(q)), py, range))
        .collect();
    let y = q_tensor(x.shape(), out, dtype).map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(vec![Value::Tensor(y)])
}

fn qlinear_sigmoid(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    qlinear_unary(ctx, inputs, |v| 1.0 / (1.0 + (-v).exp()))
}

fn qlinear_leaky_relu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let alpha = ctx.attr_float("alpha", 0.01)?;
    qlinear_unary(ctx, inputs, |v| if v >= 0.0 { v } else { alpha * v })
}

/// QLinearConcat: Y_scale, Y_zp, then (tensor, scale, zero point) per input; each input is
/// requantized to Y's parameters (copied when they are the same).
fn qlinear_concat(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let y_zp_t = ctx.input(inputs, 1)?;
    let dtype = y_zp_t.dtype();
    let range = bounds(ctx, dtype)?;
    let py = QParams::read(ctx, inputs, 0, 1, dtype)?;
    if inputs.len() < 5 || !(inputs.len() - 2).is_multiple_of(3) {
        return Err(ctx.err(format!(
            "expected Y_scale, Y_zero_point and (tensor, scale, zero point) triples, found {} \
             inputs",
            inputs.len()
        )));
    }
    let first = ctx.input(inputs, 2)?;
    let rank = first.rank();
    let axis = norm_axis(ctx.attr_int("axis", 0)?, rank).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let mut parts: Vec<Array<f32>> = Vec::new();
    for i in (2..inputs.len()).step_by(3) {
        let t = ctx.input(inputs, i)?;
        if t.dtype() != dtype || t.rank() != rank {
            return Err(ctx.err(format!(
                "input {i} is {} of rank {}, expected {dtype} of rank {rank}",
                t.dtype(),
                t.rank()
            )));
        }
        let p = QParams::read(ctx, inputs, i + 1, i + 2, dtype)?;
        let mut v = q_values(ctx, t)?;
        if p.scale != py.scale || p.zp != py.zp {
            v.mapv_inplace(|q| quantize(p.dequantize(q), py, range));
        }
        parts.push(v);
    }
    let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
    let joined = ndarray::concatenate(ndarray::Axis(axis), &views)
        .map_err(|e| ctx.err(format!("inputs do not concatenate on axis {axis}: {e}")))?;
    let shape = joined.shape().to_vec();
    let y = q_tensor(&shape, joined.into_iter().collect(), dtype)
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(vec![Value::Tensor(y)])
}

/// `a` with its last axis moved to position 1 (NHWC to NCHW) or back.
fn move_channels(a: &Array<f32>, to_front: bool) -> Array<f32> {
    let r = a.ndim();
    let perm: Vec<usize> = if to_front {
        std::iter::once(0)
            .chain(std::iter::once(r - 1))
            .chain(1..r - 1)
            .collect()
    } else {
        std::iter::once(0)
            .chain(2..r)
            .chain(std::iter::once(1))
            .collect()
    };
    a.view()
        .permuted_axes(IxDyn(&perm))
        .as_standard_layout()
        .into_owned()
        .into_shared()
}

/// Pooling inputs: X, x_scale, x_zp, y_scale, y_zp; X dequantized (channels moved first when
/// `channels_last`).
struct PoolInput {
    x: Array<f32>,
    dtype: DType,
    py: QParams,
    channels_last: bool,
}

fn pool_input(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<PoolInput> {
    let x = ctx.input(inputs, 0)?;
    let dtype = x.dtype();
    bounds(ctx, dtype)?;
    if x.rank() < 3 {
        return Err(ctx.err(format!("X must have rank >= 3, found {:?}", x.shape())));
    }
    let px = QParams::read(ctx, inputs, 1, 2, dtype)?;
    let py = QParams::read(ctx, inputs, 3, 4, dtype)?;
    let channels_last = ctx.attr_int("channels_last", 0)? != 0;
    let mut v = q_values(ctx, x)?;
    v.mapv_inplace(|q| px.dequantize(q));
    let v = if channels_last {
        move_channels(&v, true)
    } else {
        v
    };
    Ok(PoolInput {
        x: v,
        dtype,
        py,
        channels_last,
    })
}

/// A pooled NCHW result (already quantized) as the output tensor, the channels moved back
/// last when asked.
fn requantized_output(ctx: &KernelCtx, p: &PoolInput, pooled: Array<f32>) -> Result<Vec<Value>> {
    let pooled = if p.channels_last {
        move_channels(&pooled, false)
    } else {
        pooled
    };
    let shape = pooled.shape().to_vec();
    let out = pooled.iter().copied().collect();
    let y = q_tensor(&shape, out, p.dtype).map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(vec![Value::Tensor(y)])
}

/// QLinearAveragePool as onnxruntime computes it: the dequantized window summed in f32 (row
/// by row), divided by the taps inside the input (the kernel's volume with
/// `count_include_pad`), then `saturate(round_half_even(v / y_scale + y_zp))`.
fn qlinear_average_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let p = pool_input(ctx, inputs)?;
    let x = Tensor::F32(p.x.clone());
    let w = pool_window(ctx, &x)?;
    let include_pad = ctx.attr_int("count_include_pad", 0)? != 0;
    let kernel_volume: usize = w.kernel.iter().product();
    let range = bounds(ctx, p.dtype)?;
    let shape = out_shape(&x, &w);
    let std = p.x.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| ctx.err("input is not contiguous"))?;
    let (ivol, ovol) = (w.input_volume(), w.output_volume());
    let planes = shape[0] * shape[1];
    let mut out = vec![0f32; planes * ovol];
    for (plane, dst) in xs
        .chunks(ivol.max(1))
        .zip(out.chunks_mut(ovol.max(1)))
        .take(planes)
    {
        for_each_window(&w, |o, taps, _| {
            let mut sum = 0f32;
            let mut count = 0usize;
            for t in taps {
                sum += plane[t];
                count += 1;
            }
            let div = if include_pad { kernel_volume } else { count };
            let mean = sum / div as f32;
            dst[o] = (mean / p.py.scale + p.py.zp)
                .round_ties_even()
                .clamp(range.0, range.1);
        });
    }
    let pooled = array_from_vec(&shape, out).map_err(|e| e.in_node(&ctx.node_ref()))?;
    requantized_output(ctx, &p, pooled)
}

/// QLinearGlobalAveragePool as onnxruntime's MLAS computes it: the integer sum of
/// `q - x_zp` over each plane times `x_scale / (y_scale · size)`, rounded half to even.
fn qlinear_global_average_pool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let dtype = x.dtype();
    let range = bounds(ctx, dtype)?;
    if x.rank() < 3 {
        return Err(ctx.err(format!("X must have rank >= 3, found {:?}", x.shape())));
    }
    let px = QParams::read(ctx, inputs, 1, 2, dtype)?;
    let py = QParams::read(ctx, inputs, 3, 4, dtype)?;
    let channels_last = ctx.attr_int("channels_last", 0)? != 0;
    let mut q = q_values(ctx, x)?;
    if channels_last {
        q = move_channels(&q, true);
    }
    let shape = q.shape().to_vec();
    let size: usize = shape[2..].iter().product();
    let scale = px.scale / (py.scale * size as f32);
    let std = q.as_standard_layout();
    let qs = std.as_slice().unwrap_or(&[]);
    let out: Vec<f32> = qs
        .chunks(size.max(1))
        .map(|plane| {
            let acc = plane.iter().map(|&v| v as i64).sum::<i64>() - px.zp as i64 * size as i64;
            ((acc as f32 * scale).round_ties_even() + py.zp).clamp(range.0, range.1)
        })
        .collect();
    let mut out_shape = shape[..2].to_vec();
    out_shape.extend(std::iter::repeat_n(1, shape.len() - 2));
    let pooled = array_from_vec(&out_shape, out).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let p = PoolInput {
        x: q,
        dtype,
        py,
        channels_last,
    };
    requantized_output(ctx, &p, pooled)
}
