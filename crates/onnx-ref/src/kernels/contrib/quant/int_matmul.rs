//! Integer matrix products: MatMulIntegerToFloat, DynamicQuantizeMatMul and QGemm.
//!
//! `Y = ((A - a_zp) · (B - b_zp)) · (a_scale · b_scale) + bias`, batched and broadcast like
//! MatMul. The integer product is exact: the centred operands are multiplied in f64 (exact for
//! any K below 2^37 with 8-bit operands) by the crate's GEMM, then rounded to f32 as
//! onnxruntime converts its int32 accumulator. As in onnxruntime, a scalar or per-column B scale
//! (`[N]`, or B's shape with 1 in place of K) and the scalar A scale form the multiplier; any
//! other scale shape multiplies the output afterwards by broadcasting (the bias included).
//! DynamicQuantizeMatMul first quantizes A to uint8 over its whole range (zero included), as
//! onnxruntime does: scale `(max - min) / 255` (1 when max = min), zero point and values rounded
//! half to even.

use ndarray::IxDyn;

use super::super::super::matmul::matmul_of;
use super::{float_data, float_result, scalar_value};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::broadcast_view;
use crate::tensor::{array_from_vec, Array, Tensor};
use crate::value::Value;

/// Registers MatMulIntegerToFloat, DynamicQuantizeMatMul and QGemm.
pub(super) fn register_all(reg: &mut KernelRegistry) {
    let ms = super::super::MS;
    reg.register(
        ms,
        "MatMulIntegerToFloat",
        1,
        LATEST,
        matmul_integer_to_float,
    );
    reg.register(
        ms,
        "DynamicQuantizeMatMul",
        1,
        LATEST,
        dynamic_quantize_matmul,
    );
    reg.register(ms, "QGemm", 1, LATEST, qgemm);
}

/// The values of an 8-bit integer tensor as f64.
pub(super) fn int8_values(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<Array<f64>> {
    match t {
        Tensor::U8(a) => Ok(a.mapv(|v| v as f64).into_shared()),
        Tensor::I8(a) => Ok(a.mapv(|v| v as f64).into_shared()),
        other => Err(ctx.err(format!(
            "{what} must be uint8 or int8, found {}",
            other.dtype()
        ))),
    }
}

/// `x - zp` with `zp` broadcast to x's shape; `zp` of another integer type than `x` is refused.
pub(super) fn centred(
    ctx: &KernelCtx,
    x: &Tensor,
    zp: Option<&Tensor>,
    what: &str,
) -> Result<Array<f64>> {
    let mut v = int8_values(ctx, x, what)?;
    if let Some(z) = zp {
        if z.dtype() != x.dtype() {
            return Err(ctx.err(format!(
                "{what}'s zero point is {} but {what} is {}",
                z.dtype(),
                x.dtype()
            )));
        }
        let zv = int8_values(ctx, z, what)?;
        let zb = broadcast_view(&zv, x.shape()).map_err(|e| e.in_node(&ctx.node_ref()))?;
        v.zip_mut_with(&zb, |a, b| *a -= b);
    }
    Ok(v)
}

/// True when a B quantization parameter of `shape` is per column of B (`[N]` for a 2-D B, or
/// B's shape with 1 in place of K).
fn per_column(shape: &[usize], b_shape: &[usize]) -> bool {
    let r = b_shape.len();
    if r < 2 {
        return false;
    }
    (r == 2 && shape == [b_shape[1]])
        || (shape.len() == r
            && shape[r - 2] == 1
            && shape[..r - 2] == b_shape[..r - 2]
            && shape[r - 1] == b_shape[r - 1])
}

/// The float part shared by both ops: `acc · (a_scale · b_scale) + bias`, then any scale that
/// is neither scalar nor per column multiplied in by broadcasting.
#[allow(clippy::too_many_arguments)]
fn finish(
    ctx: &KernelCtx,
    acc: Array<f64>,
    b_shape: &[usize],
    a_scale: &Tensor,
    b_scale: &Tensor,
    bias: Option<&Tensor>,
    out_type: DType,
) -> Result<Tensor> {
    let shape = acc.shape().to_vec();
    let n = *shape.last().unwrap_or(&1);
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let a_scalar = a_scale.len() == 1;
    let b_supported = b_scale.len() == 1 || per_column(b_scale.shape(), b_shape);
    let a_mult = if a_scalar {
        float_data(ctx, a_scale, "a_scale")?[0]
    } else {
        1.0
    };
    let multipliers: Vec<f32> = if b_supported {
        float_data(ctx, b_scale, "b_scale")?
            .iter()
            .map(|s| a_mult * s)
            .collect()
    } else {
        vec![a_mult]
    };
    let bias = match bias {
        None => None,
        Some(t) => {
            let v = float_data(ctx, t, "bias")?;
            if v.len() != n {
                return Err(ctx.err(format!(
                    "bias has {} values for {n} output columns",
                    v.len()
                )));
            }
            Some(v)
        }
    };
    let mut y: Vec<f32> = Vec::with_capacity(acc.len());
    // Per-column multipliers repeat every N values, per batch matrix when B is batched.
    let per_matrix = multipliers.len() / n.max(1);
    let m = shape.len().checked_sub(2).map_or(1, |i| shape[i]);
    for (i, v) in acc.iter().enumerate() {
        let col = i % n.max(1);
        let mult = if multipliers.len() == 1 {
            multipliers[0]
        } else {
            let batch = (i / (n * m.max(1))) % per_matrix.max(1);
            multipliers[batch * n + col]
        };
        let mut x = (*v as f32) * mult;
        if let Some(b) = &bias {
            x += b[col];
        }
        y.push(x);
    }
    let mut out = array_from_vec(&shape, y).map_err(err)?;
    for (scale, applies) in [(a_scale, !a_scalar), (b_scale, !b_supported)] {
        if applies {
            let s = float_data(ctx, scale, "scale")?.into_owned();
            let s = array_from_vec(scale.shape(), s).map_err(err)?;
            let sb = broadcast_view(&s, &shape).map_err(err)?;
            out.zip_mut_with(&sb, |y, s| *y *= s);
        }
    }
    let data = out.iter().copied().collect();
    float_result(out_type, &shape, data).map_err(err)
}

fn matmul_integer_to_float(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    let a_scale = ctx.input(inputs, 2)?;
    let b_scale = ctx.input(inputs, 3)?;
    let a_zp = ctx.opt_input(inputs, 4)?;
    if let Some(z) = a_zp {
        scalar_value(ctx, z, "a_zero_point")?;
    }
    let out_type = a_scale.dtype();
    let av = centred(ctx, a, a_zp, "A")?;
    let bv = centred(ctx, b, ctx.opt_input(inputs, 5)?, "B")?;
    let acc = matmul_of(&av, &bv).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let y = finish(
        ctx,
        acc,
        b.shape(),
        a_scale,
        b_scale,
        ctx.opt_input(inputs, 6)?,
        out_type,
    )?;
    Ok(vec![Value::Tensor(y)])
}

/// onnxruntime's dynamic uint8 quantization of A: (values, scale, zero point).
fn quantize_dynamic(x: &[f32]) -> (Vec<f64>, f32, f32) {
    let min = x.iter().copied().fold(0f32, f32::min);
    let max = x.iter().copied().fold(0f32, f32::max);
    let scale = if max == min { 1.0 } else { (max - min) / 255.0 };
    let zp = (0.0 - min / scale).clamp(0.0, 255.0).round_ties_even();
    let q = x
        .iter()
        .map(|v| ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) as f64)
        .collect();
    (q, scale, zp)
}

fn dynamic_quantize_matmul(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    let b_scale = ctx.input(inputs, 2)?;
    if a.dtype() != DType::Float {
        return Err(ctx.err(format!("A must be float, found {}", a.dtype())));
    }
    let (q, scale, zp) = quantize_dynamic(&float_data(ctx, a, "A")?);
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let av =
        array_from_vec(a.shape(), q.into_iter().map(|v| v - zp as f64).collect()).map_err(err)?;
    let bv = centred(ctx, b, ctx.opt_input(inputs, 3)?, "B")?;
    let acc = matmul_of(&av, &bv).map_err(err)?;
    let y = finish(
        ctx,
        acc,
        b.shape(),
        &Tensor::scalar(scale),
        b_scale,
        ctx.opt_input(inputs, 4)?,
        DType::Float,
    )?;
    Ok(vec![Value::Tensor(y)])
}

/// QGemm: `acc = op(A - a_zp) · op(B - b_zp) + C` (C int32, broadcast to [M, N]). With
/// `y_zero_point` the result is `saturate(round_half_even(acc · s) + y_zp)` where
/// `s = alpha · a_scale · b_scale / y_scale`; without it, `acc · alpha · a_scale · b_scale` in
/// float32. B's scale and zero point are scalar or per column.
fn qgemm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let a_scale = scalar_value(ctx, ctx.input(inputs, 1)?, "a_scale")? as f32;
    let a_zp = ctx.input(inputs, 2)?;
    scalar_value(ctx, a_zp, "a_zero_point")?;
    let b = ctx.input(inputs, 3)?;
    let b_scale = float_data(ctx, ctx.input(inputs, 4)?, "b_scale")?;
    let b_zp = ctx.input(inputs, 5)?;
    let c = ctx.opt_input(inputs, 6)?;
    let y_scale = ctx.opt_input(inputs, 7)?;
    let y_zp = ctx.opt_input(inputs, 8)?;
    let alpha = ctx.attr_float("alpha", 1.0)?;
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    if a.rank() != 2 || b.rank() != 2 {
        return Err(ctx.err(format!(
            "A and B must be matrices, found {:?} and {:?}",
            a.shape(),
            b.shape()
        )));
    }
    let mut av = centred(ctx, a, Some(a_zp), "A")?;
    if ctx.attr_int("transA", 0)? != 0 {
        av = av
            .reversed_axes()
            .as_standard_layout()
            .into_owned()
            .into_shared();
    }
    let trans_b = ctx.attr_int("transB", 0)? != 0;
    let n = b.shape()[if trans_b { 0 } else { 1 }];
    // B's zero point is per column of op(B): centre B before transposing only for a scalar.
    let b_zp_values = int8_values(ctx, b_zp, "b_zero_point")?;
    let mut bv = centred(ctx, b, None, "B")?;
    if trans_b {
        bv = bv
            .reversed_axes()
            .as_standard_layout()
            .into_owned()
            .into_shared();
    }
    if b_zp.dtype() != b.dtype() || (b_zp_values.len() != 1 && b_zp_values.len() != n) {
        return Err(ctx.err(format!(
            "b_zero_point must be {} with 1 or {n} values",
            b.dtype()
        )));
    }
    let zp_row = b_zp_values
        .broadcast(IxDyn(&[n]))
        .ok_or_else(|| ctx.err("b_zero_point does not fit N"))?
        .to_owned();
    for mut row in bv.rows_mut() {
        row.zip_mut_with(&zp_row, |v, z| *v -= z);
    }
    let mut acc = matmul_of(&av, &bv).map_err(err)?;
    let shape = acc.shape().to_vec();
    if let Some(c) = c {
        if c.dtype() != DType::Int32 {
            return Err(ctx.err(format!("C must be int32, found {}", c.dtype())));
        }
        let cv = array_from_vec(c.shape(), c.to_f64_vec().map_err(err)?).map_err(err)?;
        let cb = broadcast_view(&cv, &shape).map_err(err)?;
        acc.zip_mut_with(&cb, |v, c| *v += c);
    }
    if b_scale.len() != 1 && b_scale.len() != n {
        return Err(ctx.err(format!("b_scale must have 1 or {n} values")));
    }
    let y_scale = y_scale
        .map(|t| scalar_value(ctx, t, "y_scale"))
        .transpose()?
        .map(|s| s as f32);
    let scales: Vec<f32> = b_scale
        .iter()
        .map(|bs| {
            let s = alpha * a_scale * bs;
            y_scale.map_or(s, |ys| s / ys)
        })
        .collect();
    let scale_of = |i: usize| scales[if scales.len() == 1 { 0 } else { i % n }];
    let y = match y_zp {
        Some(z) => {
            let zp = scalar_value(ctx, z, "y_zero_point")? as f32;
            let (lo, hi) = match z.dtype() {
                DType::Uint8 => (0.0, 255.0),
                DType::Int8 => (-128.0, 127.0),
                other => return Err(ctx.err(format!("y_zero_point must be 8-bit, found {other}"))),
            };
            let q: Vec<f32> = acc
                .iter()
                .enumerate()
                .map(|(i, &v)| ((v as f32 * scale_of(i)).round_ties_even() + zp).clamp(lo, hi))
                .collect();
            super::q_tensor(&shape, q, z.dtype()).map_err(err)?
        }
        None => {
            let f: Vec<f32> = acc
                .iter()
                .enumerate()
                .map(|(i, &v)| v as f32 * scale_of(i))
                .collect();
            Tensor::from_vec(&shape, f).map_err(err)?
        }
    };
    Ok(vec![Value::Tensor(y)])
}
