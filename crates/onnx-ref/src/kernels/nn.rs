//! Neural-network layers: Softmax/LogSoftmax/Hardmax (2-D coercion before opset 13, per-axis
//! from 13), BatchNormalization (every version, inference and training_mode outputs), LRN,
//! LayerNormalization, InstanceNormalization, LpNormalization, MeanVarianceNormalization.

use super::{norm_axes, norm_axis, one, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Real;
use crate::tensor::{array_from_vec, map_float, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Softmax", 1, LATEST, softmax);
    reg.register("", "LogSoftmax", 1, LATEST, log_softmax);
    reg.register("", "Hardmax", 1, LATEST, hardmax);
    reg.register("", "BatchNormalization", 1, LATEST, batch_norm);
    reg.register("", "LRN", 1, LATEST, lrn);
    reg.register("", "LayerNormalization", 17, LATEST, layer_norm);
    reg.register("", "InstanceNormalization", 1, LATEST, instance_norm);
    reg.register("", "LpNormalization", 1, LATEST, lp_norm);
    reg.register("", "MeanVarianceNormalization", 9, LATEST, mvn);
    reg.register("", "GroupNormalization", 18, LATEST, group_norm);
    reg.register("", "RMSNormalization", 23, LATEST, rms_norm);
}

/// Applies `f` to every contiguous row of `a` viewed as `[outer, inner]` where the rows run
/// along the axes from `axis` on (the pre-13 softmax coercion) or along the single `axis`.
fn map_rows<T: Real>(
    a: &Array<T>,
    axis: usize,
    coerce_2d: bool,
    mut f: impl FnMut(&[T], &mut [T]),
) -> Result<Array<T>> {
    let rank = a.ndim();
    let shape = a.shape().to_vec();
    if coerce_2d || axis + 1 == rank {
        let inner: usize = shape[axis..].iter().product();
        let std = a.as_standard_layout();
        let xs = std
            .as_slice()
            .ok_or_else(|| RefError::op("input is not contiguous"))?;
        let mut out = vec![T::zero(); xs.len()];
        if inner > 0 {
            for (src, dst) in xs.chunks(inner).zip(out.chunks_mut(inner)) {
                f(src, dst);
            }
        }
        return array_from_vec(&shape, out);
    }
    // Move `axis` last, apply, move it back.
    let mut perm: Vec<usize> = (0..rank).filter(|&i| i != axis).collect();
    perm.push(axis);
    let moved = super::shape::permute(a, &perm);
    let done = map_rows(&moved, rank - 1, false, f)?;
    let mut inverse = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    Ok(super::shape::permute(&done, &inverse))
}

fn softmax_axis(ctx: &KernelCtx, x: &Tensor) -> Result<(usize, bool)> {
    let coerce = ctx.opset < 13;
    let default = if coerce { 1 } else { -1 };
    let rank = x.rank().max(1);
    Ok((norm_axis(ctx.attr_int("axis", default)?, rank)?, coerce))
}

/// Softmax (or log-softmax) of one row, computed in `T::Acc`; `exps` is scratch space reused
/// across rows, so each exponential is computed once.
fn softmax_row<T: Real>(src: &[T], dst: &mut [T], log: bool, exps: &mut Vec<T::Acc>) {
    let m = src
        .iter()
        .map(|v| v.acc())
        .fold(T::Acc::neg_infinity(), |a, b| {
            if b > a || b.is_nan() {
                b
            } else {
                a
            }
        });
    exps.clear();
    exps.extend(src.iter().map(|v| (v.acc() - m).exp()));
    let sum: T::Acc = exps.iter().copied().sum();
    if log {
        let ln_sum = sum.ln();
        for (d, s) in dst.iter_mut().zip(src) {
            *d = T::from_acc(s.acc() - m - ln_sum);
        }
    } else {
        for (d, e) in dst.iter_mut().zip(exps.iter()) {
            *d = T::from_acc(*e / sum);
        }
    }
}

use num_traits::Float;

fn softmax(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    if x.rank() == 0 {
        return Err(ctx.err("input must have rank >= 1"));
    }
    let (axis, coerce) = softmax_axis(ctx, x)?;
    one(
        map_float!(x, a => map_rows(a, axis, coerce, { let mut exps = Vec::new(); move |s, d| softmax_row(s, d, false, &mut exps) })?, other => return Err(unsupported(ctx, other))),
    )
}

fn log_softmax(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    if x.rank() == 0 {
        return Err(ctx.err("input must have rank >= 1"));
    }
    let (axis, coerce) = softmax_axis(ctx, x)?;
    one(
        map_float!(x, a => map_rows(a, axis, coerce, { let mut exps = Vec::new(); move |s, d| softmax_row(s, d, true, &mut exps) })?, other => return Err(unsupported(ctx, other))),
    )
}

fn hardmax(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    if x.rank() == 0 {
        return Err(ctx.err("input must have rank >= 1"));
    }
    let (axis, coerce) = softmax_axis(ctx, x)?;
    fn row<T: Real>(s: &[T], d: &mut [T]) {
        let mut best = 0;
        for (i, v) in s.iter().enumerate() {
            if *v > s[best] {
                best = i;
            }
        }
        for (i, o) in d.iter_mut().enumerate() {
            *o = if i == best { T::one() } else { T::zero() };
        }
    }
    one(
        map_float!(x, a => map_rows(a, axis, coerce, row)?, other => return Err(unsupported(ctx, other))),
    )
}

/// Per-channel parameters as f64, expanded to `[C, spatial...]` sized `c * per_channel`.
fn channel_params(t: &Tensor, c: usize, inner: usize) -> Result<Vec<f64>> {
    let v = t.to_f64_vec()?;
    if v.len() == c || v.len() == c * inner {
        Ok(v)
    } else {
        Err(RefError::op(format!(
            "parameter of shape {:?} does not fit {c} channels",
            t.shape()
        )))
    }
}

fn batch_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let bias = ctx.input(inputs, 2)?;
    let mean = ctx.input(inputs, 3)?;
    let var = ctx.input(inputs, 4)?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let momentum = ctx.attr_float("momentum", 0.9)? as f64;
    if x.rank() < 2 {
        return Err(ctx.err(format!("input must have rank >= 2, got {:?}", x.shape())));
    }
    let training = if ctx.opset >= 14 {
        ctx.attr_int("training_mode", 0)? == 1
    } else if ctx.opset < 7 {
        ctx.attr_int("is_test", 0)? == 0 && ctx.num_outputs() > 1
    } else {
        ctx.num_outputs() > 1
    };
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let inner: usize = x.shape()[2..].iter().product();
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let s = channel_params(scale, c, inner).map_err(err)?;
    let b = channel_params(bias, c, inner).map_err(err)?;
    let mut m = channel_params(mean, c, inner).map_err(err)?;
    let mut v = channel_params(var, c, inner).map_err(err)?;
    let per_channel = |p: &[f64], ch: usize, i: usize| {
        if p.len() == c {
            p[ch]
        } else {
            p[ch * inner + i]
        }
    };
    if !training && [&s, &b, &m, &v].iter().all(|p| p.len() == c) {
        // Inference with per-channel parameters: y = x·a + shift per channel, a and shift
        // computed once in f64 (float and double; the 16-bit floats go the f64 way below).
        let coefs: Vec<(f64, f64)> = (0..c)
            .map(|ch| {
                let a = s[ch] / (v[ch] + eps).sqrt();
                (a, b[ch] - m[ch] * a)
            })
            .collect();
        match x {
            Tensor::F32(a) => {
                let coefs: Vec<(f32, f32)> =
                    coefs.iter().map(|&(a, b)| (a as f32, b as f32)).collect();
                return one(Tensor::F32(affine_per_channel(a, c, inner, &coefs)?));
            }
            Tensor::F64(a) => return one(Tensor::F64(affine_per_channel(a, c, inner, &coefs)?)),
            _ => {}
        }
    }
    let xv = x.to_f64_vec().map_err(err)?;
    let mut batch_mean = vec![0.0; c];
    let mut batch_var = vec![0.0; c];
    if training {
        let count = (n * inner) as f64;
        for ch in 0..c {
            let mut sum = 0.0;
            for ni in 0..n {
                sum += xv[(ni * c + ch) * inner..][..inner].iter().sum::<f64>();
            }
            let mu = sum / count;
            let mut sq = 0.0;
            for ni in 0..n {
                sq += xv[(ni * c + ch) * inner..][..inner]
                    .iter()
                    .map(|x| (x - mu) * (x - mu))
                    .sum::<f64>();
            }
            batch_mean[ch] = mu;
            batch_var[ch] = sq / count;
        }
    }
    let mut y = vec![0.0; xv.len()];
    for ni in 0..n {
        for ch in 0..c {
            for i in 0..inner {
                let k = (ni * c + ch) * inner + i;
                let (mu, var) = if training {
                    (batch_mean[ch], batch_var[ch])
                } else {
                    (per_channel(&m, ch, i), per_channel(&v, ch, i))
                };
                y[k] = per_channel(&s, ch, i) * (xv[k] - mu) / (var + eps).sqrt()
                    + per_channel(&b, ch, i);
            }
        }
    }
    let dtype = x.dtype();
    let to_t = |vals: Vec<f64>, shape: &[usize], dtype| -> Result<Value> {
        Ok(Value::Tensor(super::cast_tensor(
            &Tensor::from_vec(shape, vals)?,
            dtype,
        )?))
    };
    let mut out = vec![to_t(y, x.shape(), dtype)?];
    if training && ctx.num_outputs() > 1 {
        for ch in 0..c {
            m[ch] = m[ch] * momentum + batch_mean[ch] * (1.0 - momentum);
            v[ch] = v[ch] * momentum + batch_var[ch] * (1.0 - momentum);
        }
        out.push(to_t(m[..c].to_vec(), mean.shape(), mean.dtype())?);
        out.push(to_t(v[..c].to_vec(), var.shape(), var.dtype())?);
        if ctx.opset < 14 {
            out.push(to_t(batch_mean, mean.shape(), mean.dtype())?);
            out.push(to_t(batch_var, var.shape(), var.dtype())?);
        }
    }
    Ok(out)
}

/// `y = x·a + shift` with `(a, shift)` per channel, over `[n, c, inner]`.
fn affine_per_channel<T: Copy + std::ops::Mul<Output = T> + std::ops::Add<Output = T>>(
    x: &Array<T>,
    c: usize,
    inner: usize,
    coefs: &[(T, T)],
) -> Result<Array<T>> {
    let std = x.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let mut out = Vec::with_capacity(xs.len());
    if inner > 0 && c > 0 {
        for (i, plane) in xs.chunks(inner).enumerate() {
            let (a, shift) = coefs[i % c];
            out.extend(plane.iter().map(|&v| v * a + shift));
        }
    }
    array_from_vec(x.shape(), out)
}

fn lrn(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let size = ctx.attr_int("size", 0)?;
    if size <= 0 || x.rank() < 2 {
        return Err(ctx.err("size must be positive and the input of rank >= 2"));
    }
    let alpha = ctx.attr_float("alpha", 1e-4)? as f64;
    let beta = ctx.attr_float("beta", 0.75)? as f64;
    let bias = ctx.attr_float("bias", 1.0)? as f64;
    fn apply<T: Real>(
        a: &Array<T>,
        size: usize,
        alpha: f64,
        beta: f64,
        bias: f64,
    ) -> Result<Array<T>> {
        let shape = a.shape().to_vec();
        let (n, c) = (shape[0], shape[1]);
        let inner: usize = shape[2..].iter().product();
        let std = a.as_standard_layout();
        let xs = std
            .as_slice()
            .ok_or_else(|| RefError::op("input is not contiguous"))?;
        let lo = (size - 1) / 2;
        let hi = (size - 1).div_ceil(2);
        let mut out = vec![T::zero(); xs.len()];
        for ni in 0..n {
            for ch in 0..c {
                let from = ch.saturating_sub(lo);
                let to = (ch + hi).min(c - 1);
                for i in 0..inner {
                    let mut sq = 0f64;
                    for cc in from..=to {
                        let v = xs[(ni * c + cc) * inner + i].to_f64();
                        sq += v * v;
                    }
                    let k = (ni * c + ch) * inner + i;
                    out[k] =
                        T::from_f64(xs[k].to_f64() / (bias + alpha / size as f64 * sq).powf(beta));
                }
            }
        }
        array_from_vec(&shape, out)
    }
    one(
        map_float!(x, a => apply(a, size as usize, alpha, beta, bias)?, other => return Err(unsupported(ctx, other))),
    )
}

pub(crate) fn layer_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let bias = ctx.opt_input(inputs, 2)?;
    let axis = norm_axis(ctx.attr_int("axis", -1)?, x.rank().max(1))?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let shape = x.shape().to_vec();
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis..].iter().product();
    let norm_shape = &shape[axis..];
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let bcast = |t: &Tensor| -> Result<Vec<f64>> {
        let v = t.to_f64_vec().map_err(err)?;
        if t.shape() == norm_shape {
            return Ok(v);
        }
        let arr = array_from_vec(t.shape(), v)?;
        let view = super::broadcast_view(&arr, norm_shape).map_err(err)?;
        Ok(view.iter().copied().collect())
    };
    let s = bcast(scale)?;
    let b = match bias {
        Some(b) => bcast(b)?,
        None => vec![0.0; inner],
    };
    let mut means = Vec::with_capacity(outer);
    let mut inv_stds = Vec::with_capacity(outer);
    // A contiguous f32 input is read and written in place of its f64 copy: the same f64
    // arithmetic, rounded to f32 as the cast below would.
    let y = match x {
        Tensor::F32(a) if a.as_slice().is_some() => {
            let xs = a.as_slice().unwrap_or_default();
            let mut y = vec![0f32; xs.len()];
            if inner > 0 {
                for (row, out) in xs.chunks_exact(inner).zip(y.chunks_exact_mut(inner)) {
                    let (mu, inv) = normalize_row(row, eps, &s, &b, out, |v| v as f32);
                    means.push(mu);
                    inv_stds.push(inv);
                }
            }
            Tensor::from_vec(&shape, y)?
        }
        _ => {
            let xv = x.to_f64_vec().map_err(err)?;
            let mut y = vec![0.0; xv.len()];
            if inner > 0 {
                for (row, out) in xv.chunks_exact(inner).zip(y.chunks_exact_mut(inner)) {
                    let (mu, inv) = normalize_row(row, eps, &s, &b, out, |v| v);
                    means.push(mu);
                    inv_stds.push(inv);
                }
            }
            super::cast_tensor(&Tensor::from_vec(&shape, y)?, x.dtype())?
        }
    };
    if inner == 0 {
        // Rows without elements: the row formula on an empty row (a mean of 0/0).
        let (mu, inv) = normalize_row::<f64, f64>(&[], eps, &[], &[], &mut [], |v| v);
        means.resize(outer, mu);
        inv_stds.resize(outer, inv);
    }
    let stat_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if i < axis { d } else { 1 })
        .collect();
    let stash = match ctx.attr_int("stash_type", 1)? {
        1 => crate::dtype::DType::Float,
        code => crate::dtype::DType::from_code(code as i32)
            .ok_or_else(|| ctx.err(format!("unknown stash_type {code}")))?,
    };
    let mut out = vec![Value::Tensor(y)];
    if ctx.wants_output(1) || ctx.wants_output(2) {
        out.push(Value::Tensor(super::cast_tensor(
            &Tensor::from_vec(&stat_shape, means)?,
            stash,
        )?));
        out.push(Value::Tensor(super::cast_tensor(
            &Tensor::from_vec(&stat_shape, inv_stds)?,
            stash,
        )?));
    }
    Ok(out)
}

/// One row of LayerNormalization in f64: `(x - mean) · inv_std · scale + bias` into `out`
/// (each value through `store`); returns the row's mean and inverse standard deviation.
#[inline]
fn normalize_row<X: Copy + Into<f64>, Y>(
    row: &[X],
    eps: f64,
    scale: &[f64],
    bias: &[f64],
    out: &mut [Y],
    store: impl Fn(f64) -> Y,
) -> (f64, f64) {
    let n = row.len() as f64;
    let mu = row.iter().map(|&v| v.into()).sum::<f64>() / n;
    let var = row
        .iter()
        .map(|&v| {
            let d = v.into() - mu;
            d * d
        })
        .sum::<f64>()
        / n;
    let inv = 1.0 / (var + eps).sqrt();
    for (((o, &v), s), b) in out.iter_mut().zip(row).zip(scale).zip(bias) {
        *o = store((v.into() - mu) * inv * s + b);
    }
    (mu, inv)
}

fn group_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let bias = ctx.input(inputs, 2)?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let groups = ctx.attr_int("num_groups", 0)?;
    if x.rank() < 2 || groups <= 0 || x.shape()[1] % groups as usize != 0 {
        return Err(ctx.err(format!(
            "num_groups {groups} does not divide the channels of {:?}",
            x.shape()
        )));
    }
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let (n, c, g) = (x.shape()[0], x.shape()[1], groups as usize);
    let inner: usize = x.shape()[2..].iter().product();
    let s = scale.to_f64_vec().map_err(err)?;
    let b = bias.to_f64_vec().map_err(err)?;
    // Opset 18 has one scale per group, opset 21 one per channel.
    let per_channel = |p: &[f64], ch: usize| if p.len() == c { p[ch] } else { p[ch / (c / g)] };
    if !(s.len() == c || s.len() == g) || b.len() != s.len() {
        return Err(ctx
            .err("scale and bias must have one value per channel (or per group before opset 21)"));
    }
    let xv = x.to_f64_vec().map_err(err)?;
    let mut y = vec![0.0; xv.len()];
    let per_group = c / g * inner;
    for ni in 0..n {
        for gi in 0..g {
            let start = (ni * c + gi * (c / g)) * inner;
            let block = &xv[start..start + per_group];
            let mu = block.iter().sum::<f64>() / per_group as f64;
            let var = block.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / per_group as f64;
            for (k, v) in block.iter().enumerate() {
                let ch = gi * (c / g) + k / inner;
                y[start + k] =
                    per_channel(&s, ch) * (v - mu) / (var + eps).sqrt() + per_channel(&b, ch);
            }
        }
    }
    one(super::cast_tensor(
        &Tensor::from_vec(x.shape(), y)?,
        x.dtype(),
    )?)
}

fn rms_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let axis = norm_axis(ctx.attr_int("axis", -1)?, x.rank().max(1))?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let shape = x.shape().to_vec();
    let inner: usize = shape[axis..].iter().product();
    let sv = scale.to_f64_vec().map_err(err)?;
    let sa = array_from_vec(scale.shape(), sv)?;
    let s: Vec<f64> = super::broadcast_view(&sa, &shape[axis..])
        .map_err(err)?
        .iter()
        .copied()
        .collect();
    let xv = x.to_f64_vec().map_err(err)?;
    let mut y = vec![0.0; xv.len()];
    if inner > 0 {
        for (o, row) in xv.chunks(inner).enumerate() {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / inner as f64;
            let inv = 1.0 / (ms + eps).sqrt();
            for (i, v) in row.iter().enumerate() {
                y[o * inner + i] = v * inv * s[i];
            }
        }
    }
    // Y has the scale's type (V), which may differ from X's (T).
    one(super::cast_tensor(
        &Tensor::from_vec(&shape, y)?,
        scale.dtype(),
    )?)
}

fn instance_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let bias = ctx.input(inputs, 2)?;
    let eps = ctx.attr_float("epsilon", 1e-5)? as f64;
    if x.rank() < 3 {
        return Err(ctx.err("input must have rank >= 3"));
    }
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let inner: usize = x.shape()[2..].iter().product();
    let s = scale.to_f64_vec().map_err(err)?;
    let b = bias.to_f64_vec().map_err(err)?;
    if s.len() != c || b.len() != c {
        return Err(ctx.err("scale and B must have one value per channel"));
    }
    let xv = x.to_f64_vec().map_err(err)?;
    let mut y = vec![0.0; xv.len()];
    for p in 0..n * c {
        let ch = p % c;
        let row = &xv[p * inner..(p + 1) * inner];
        let mu = row.iter().sum::<f64>() / inner as f64;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / inner as f64;
        for i in 0..inner {
            y[p * inner + i] = s[ch] * (row[i] - mu) / (var + eps).sqrt() + b[ch];
        }
    }
    one(super::cast_tensor(
        &Tensor::from_vec(x.shape(), y)?,
        x.dtype(),
    )?)
}

fn lp_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    if x.rank() == 0 {
        return Err(ctx.err("the input must have an axis to normalize over (it is a scalar)"));
    }
    let axis = norm_axis(ctx.attr_int("axis", -1)?, x.rank())?;
    let p = ctx.attr_int("p", 2)?;
    if p != 1 && p != 2 {
        return Err(ctx.err(format!("p must be 1 or 2, got {p}")));
    }
    fn row<T: Real>(s: &[T], d: &mut [T], p: i64) {
        let norm: f64 = if p == 1 {
            s.iter().map(|v| v.to_f64().abs()).sum()
        } else {
            s.iter()
                .map(|v| v.to_f64() * v.to_f64())
                .sum::<f64>()
                .sqrt()
        };
        for (o, v) in d.iter_mut().zip(s) {
            *o = T::from_f64(if norm == 0.0 { 0.0 } else { v.to_f64() / norm });
        }
    }
    one(
        map_float!(x, a => map_rows(a, axis, false, |s, d| row(s, d, p))?, other => return Err(unsupported(ctx, other))),
    )
}

fn mvn(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let axes = match ctx.attr_ints("axes") {
        Some(a) => norm_axes(a, x.rank())?,
        None => norm_axes(&[0, 2, 3], x.rank())?,
    };
    fn apply<T: Real>(a: &Array<T>, axes: &[usize]) -> Result<Array<T>> {
        let f = a.mapv(|v| v.to_f64()).into_shared();
        let mean = super::reduce::reduce_lanes(&f, axes, true, |l: &[f64]| {
            l.iter().sum::<f64>() / l.len() as f64
        })?;
        let centered = super::zip_map(&f, &mean, |x, m| x - m)?;
        let var = super::reduce::reduce_lanes(&centered, axes, true, |l: &[f64]| {
            l.iter().map(|v| v * v).sum::<f64>() / l.len() as f64
        })?;
        let out = super::zip_map(&centered, &var, |c, v| T::from_f64(c / (v.sqrt() + 1e-9)))?;
        Ok(out)
    }
    one(map_float!(x, a => apply(a, &axes)?, other => return Err(unsupported(ctx, other))))
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{int_attr, node, run, t};
    use crate::eval::eval_node;
    use crate::tensor::Tensor;
    use crate::value::Value;

    /// LayerNormalization's f32 path (read and written in place) equals the f64 path (the same
    /// input widened) rounded to f32, bit for bit, with its mean and inverse standard deviation
    /// too: axes inside and last, a broadcast scale, no bias, NaN and infinities, empty rows.
    #[test]
    fn layer_norm_f32_path_equals_the_f64_path_rounded() {
        let cases: &[(&[usize], i64, &[usize], bool)] = &[
            (&[2, 3, 8], -1, &[8], true),
            (&[4, 16, 128], 2, &[128], true),
            (&[3, 5, 7], 1, &[5, 7], false),
            (&[3, 5, 7], 1, &[1, 7], true),
            (&[6], 0, &[6], true),
            (&[2, 0, 4], -1, &[4], true),
            (&[2, 3, 0], 1, &[3, 0], true),
        ];
        for (case, &(shape, axis, sshape, with_bias)) in cases.iter().enumerate() {
            let len: usize = shape.iter().product();
            let slen: usize = sshape.iter().product();
            let xs: Vec<f32> = (0..len)
                .map(|i| match (i * 7 + case) % 41 {
                    3 if case == 0 => f32::NAN,
                    5 if case == 1 => f32::INFINITY,
                    v => (v as f32 - 20.0) * 0.37 + (i as f32).sin() * 1e3,
                })
                .collect();
            let sc: Vec<f32> = (0..slen).map(|i| 0.5 + i as f32 * 0.01).collect();
            let bi: Vec<f32> = (0..slen).map(|i| -0.25 + i as f32 * 0.003).collect();
            let mut n = node(
                "LayerNormalization",
                if with_bias {
                    &["x", "s", "b"]
                } else {
                    &["x", "s"]
                },
                vec![int_attr("axis", axis)],
            );
            n.output = vec!["y".into(), "mean".into(), "inv".into()];
            let run_as = |x: Option<Value>, s: Option<Value>, b: Option<Value>| {
                let inputs: Vec<Option<Value>> = if with_bias { vec![x, s, b] } else { vec![x, s] };
                eval_node(&n, 17, &inputs).unwrap()
            };
            let widen = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
            let got = run_as(
                t(shape, xs.clone()),
                t(sshape, sc.clone()),
                t(sshape, bi.clone()),
            );
            let wide = run_as(
                t(shape, widen(&xs)),
                t(sshape, widen(&sc)),
                t(sshape, widen(&bi)),
            );
            for (g, w) in got.iter().zip(&wide) {
                let (Value::Tensor(Tensor::F32(g)), Value::Tensor(w)) = (g, w) else {
                    panic!("case {case}: outputs are f32 tensors");
                };
                let w = w.to_f64_vec().unwrap();
                assert_eq!(g.len(), w.len(), "case {case}");
                for (x, y) in g.iter().zip(&w) {
                    assert_eq!(
                        x.to_bits(),
                        (*y as f32).to_bits(),
                        "case {case}: {x} vs {y}"
                    );
                }
            }
        }
    }

    /// Inference BatchNormalization (the per-channel affine path for float and double) agrees
    /// with the formula in f64, on a batch, a rank-2 input and an empty spatial extent.
    #[test]
    fn batch_norm_inference_matches_the_formula() {
        let n = node("BatchNormalization", &["x", "s", "b", "m", "v"], vec![]);
        let (s, b, m, v): ([f64; 3], [f64; 3], [f64; 3], [f64; 3]) = (
            [0.5, -2.0, 1.5],
            [0.1, 0.0, -3.0],
            [1.0, -0.5, 2.0],
            [0.25, 4.0, 1e-3],
        );
        for shape in [vec![2, 3, 5], vec![1, 3], vec![2, 3, 0]] {
            let len: usize = shape.iter().product();
            let inner = len / (shape[0] * 3).max(1);
            let xs: Vec<f64> = (0..len)
                .map(|i| ((i * 37 % 19) as f64 - 9.0) / 4.0)
                .collect();
            let want: Vec<f64> = (0..len)
                .map(|i| {
                    let ch = (i / inner.max(1)) % 3;
                    s[ch] * (xs[i] - m[ch]) / (v[ch] + 1e-5f32 as f64).sqrt() + b[ch]
                })
                .collect();
            let p = |a: [f64; 3]| t(&[3], a.to_vec());
            let got = run(&n, 15, &[t(&shape, xs.clone()), p(s), p(b), p(m), p(v)]).unwrap();
            let got = got.to_f64_vec().unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                    "{shape:?}: {g} vs {w}"
                );
            }
            let p32 = |a: [f64; 3]| t(&[3], a.iter().map(|&x| x as f32).collect::<Vec<_>>());
            let x32: Vec<f32> = xs.iter().map(|&x| x as f32).collect();
            let got = run(&n, 15, &[t(&shape, x32), p32(s), p32(b), p32(m), p32(v)]).unwrap();
            assert_eq!(got.shape(), &shape[..]);
            for (g, w) in got.to_f64_vec().unwrap().iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{shape:?}: {g} vs {w}"
                );
            }
        }
    }
}
