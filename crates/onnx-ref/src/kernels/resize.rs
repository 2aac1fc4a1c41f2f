//! Resize (opsets 10–19: nearest, linear and cubic modes, every coordinate transformation,
//! antialias, axes, keep_aspect_ratio_policy, roi for tf_crop_and_resize) and Upsample. A
//! port of the ONNX reference: separable, one axis at a time, computed in f64.

use super::{norm_axes, one, unsupported};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{array_from_vec, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Resize", 10, LATEST, resize);
    reg.register("", "Upsample", 7, 9, upsample);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest(NearestMode),
    Linear,
    Cubic(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Debug, Clone)]
struct Settings {
    mode: Mode,
    coord: String,
    antialias: bool,
    exclude_outside: bool,
    extrapolation: f64,
}

fn coeffs(s: &Settings, ratio: f64, scale: f64) -> Vec<f64> {
    match s.mode {
        Mode::Nearest(m) => {
            if ratio.fract() == 0.0 {
                return vec![0.0, 1.0];
            }
            let up = match m {
                NearestMode::RoundPreferFloor => ratio > 0.5,
                NearestMode::RoundPreferCeil => ratio >= 0.5,
                NearestMode::Floor => false,
                NearestMode::Ceil => true,
            };
            if up {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Mode::Linear if s.antialias => {
            let scale = scale.min(1.0);
            let start = (-1.0 / scale).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            let c: Vec<f64> = (start..start + footprint)
                .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                .collect();
            let sum: f64 = c.iter().sum();
            c.into_iter().map(|v| v / sum).collect()
        }
        Mode::Linear => vec![1.0 - ratio, ratio],
        Mode::Cubic(a) if s.antialias => {
            let scale = scale.min(1.0);
            let f = |x: f64| {
                let x = x.abs();
                if x <= 1.0 {
                    (a + 2.0) * x.powi(3) - (a + 3.0) * x * x + 1.0
                } else if x < 2.0 {
                    a * x.powi(3) - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let i_start = (-2.0 / scale).floor() as i64 + 1;
            let i_end = 2 - i_start;
            let c: Vec<f64> = (i_start..i_end)
                .map(|i| f(scale * (i as f64 - ratio)))
                .collect();
            let sum: f64 = c.iter().sum();
            c.into_iter().map(|v| v / sum).collect()
        }
        Mode::Cubic(a) => {
            let r = ratio;
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * (1.0 - r) - (a + 3.0)) * (1.0 - r) * (1.0 - r) + 1.0,
                ((a * ((1.0 - r) + 1.0) - 5.0 * a) * ((1.0 - r) + 1.0) + 8.0 * a)
                    * ((1.0 - r) + 1.0)
                    - 4.0 * a,
            ]
        }
    }
}

/// Resizes `data` (row-major, `shape`) along `axis` to `out_len`.
#[allow(clippy::too_many_arguments)]
fn resize_axis(
    data: &[f64],
    shape: &[usize],
    axis: usize,
    scale: f64,
    out_len: usize,
    roi: Option<(f64, f64)>,
    s: &Settings,
) -> Result<Vec<f64>> {
    let in_len = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = vec![0.0; outer * out_len * inner];
    if out_len == 0 || outer * inner == 0 {
        return Ok(out);
    }
    if in_len == 0 {
        return Err(RefError::op(
            "cannot resize an empty axis to a non-empty one",
        ));
    }
    let out_w = scale * in_len as f64;
    let mut taps: Vec<(Vec<(usize, f64)>, bool)> = Vec::with_capacity(out_len);
    for y in 0..out_len {
        let yf = y as f64;
        let mut extrapolated = false;
        let x = match s.coord.as_str() {
            "align_corners" => {
                if out_w == 1.0 {
                    0.0
                } else {
                    yf * (in_len as f64 - 1.0) / (out_w - 1.0)
                }
            }
            "asymmetric" => yf / scale,
            "tf_crop_and_resize" => {
                let (r0, r1) = roi.unwrap_or((0.0, 1.0));
                let x = if out_w == 1.0 {
                    (r1 - r0) * (in_len as f64 - 1.0) / 2.0
                } else {
                    yf * (r1 - r0) * (in_len as f64 - 1.0) / (out_w - 1.0)
                } + r0 * (in_len as f64 - 1.0);
                extrapolated = x < 0.0 || x > in_len as f64 - 1.0;
                x
            }
            "pytorch_half_pixel" => {
                if out_w == 1.0 {
                    -0.5
                } else {
                    (yf + 0.5) / scale - 0.5
                }
            }
            "half_pixel" => (yf + 0.5) / scale - 0.5,
            "half_pixel_symmetric" => {
                let adjustment = out_len as f64 / out_w;
                let center = in_len as f64 / 2.0;
                center * (1.0 - adjustment) + (yf + 0.5) / scale - 0.5
            }
            other => {
                return Err(RefError::op(format!(
                    "unknown coordinate_transformation_mode '{other}'"
                )))
            }
        };
        let xi = x.floor();
        let ratio = if x == xi { 1.0 } else { x - xi };
        let mut c = coeffs(s, ratio, scale);
        let n = c.len() as i64;
        let pad = (n + 1) / 2;
        let xp = x + pad as f64;
        let p = xp.floor() as i64;
        let frac = xp - p as f64;
        let offset = if n % 2 == 0 {
            if frac == 0.0 {
                -(n / 2)
            } else {
                -(n / 2) + 1
            }
        } else {
            let base = -((n - 1) / 2);
            if frac <= 0.5 {
                base
            } else {
                base + 1
            }
        };
        let start = p + offset - pad;
        let idx: Vec<i64> = (0..n).map(|j| start + j).collect();
        if s.exclude_outside {
            for (cj, &i) in c.iter_mut().zip(&idx) {
                if i < 0 || i >= in_len as i64 {
                    *cj = 0.0;
                }
            }
            let sum: f64 = c.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            for cj in &mut c {
                *cj /= sum;
            }
        }
        let list = idx
            .iter()
            .zip(&c)
            .map(|(&i, &w)| (i.clamp(0, in_len as i64 - 1) as usize, w))
            .collect();
        taps.push((list, extrapolated));
    }
    for o in 0..outer {
        for (y, (list, extrapolated)) in taps.iter().enumerate() {
            let dst = &mut out[(o * out_len + y) * inner..][..inner];
            if *extrapolated {
                dst.fill(s.extrapolation);
                continue;
            }
            for &(i, w) in list {
                if w == 0.0 {
                    continue;
                }
                let src = &data[(o * in_len + i) * inner..][..inner];
                for (d, v) in dst.iter_mut().zip(src) {
                    *d += w * v;
                }
            }
        }
    }
    Ok(out)
}

fn float_input(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize) -> Result<Option<Vec<f64>>> {
    match ctx.opt_input(inputs, i)? {
        Some(t) if !t.is_empty() => Ok(Some(
            t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        )),
        _ => Ok(None),
    }
}

fn settings(ctx: &KernelCtx, default_coord: &str) -> Result<Settings> {
    let nearest = match ctx
        .attr_string("nearest_mode", "round_prefer_floor")?
        .as_str()
    {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        other => return Err(ctx.err(format!("unknown nearest_mode '{other}'"))),
    };
    let mode = match ctx.attr_string("mode", "nearest")?.as_str() {
        "nearest" => Mode::Nearest(nearest),
        "linear" | "bilinear" | "trilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic(ctx.attr_float("cubic_coeff_a", -0.75)? as f64),
        other => return Err(ctx.err(format!("unknown mode '{other}'"))),
    };
    Ok(Settings {
        mode,
        coord: ctx.attr_string("coordinate_transformation_mode", default_coord)?,
        antialias: ctx.attr_int("antialias", 0)? != 0,
        exclude_outside: ctx.attr_int("exclude_outside", 0)? != 0,
        extrapolation: ctx.attr_float("extrapolation_value", 0.0)? as f64,
    })
}

/// Runs the separable resize over every axis given full-rank scales and sizes.
fn run_resize(
    x: &Tensor,
    scales: &[f64],
    sizes: &[usize],
    roi: Option<&[f64]>,
    s: &Settings,
) -> Result<Tensor> {
    let rank = x.rank();
    let mut data = x.to_f64_vec()?;
    let mut shape = x.shape().to_vec();
    crate::tensor::check_size("Resize result", sizes)?;
    for axis in 0..rank {
        let trivial_roi =
            roi.is_none_or(|r| (r[axis] - 0.0).abs() < 1e-9 && (r[axis + rank] - 1.0).abs() < 1e-9);
        if (scales[axis] - 1.0).abs() < 1e-9 && sizes[axis] == shape[axis] && trivial_roi {
            continue;
        }
        let axis_roi = roi.map(|r| (r[axis], r[axis + rank]));
        data = resize_axis(&data, &shape, axis, scales[axis], sizes[axis], axis_roi, s)?;
        shape[axis] = sizes[axis];
    }
    let f = Tensor::from_vec(&shape, data)?;
    if x.dtype().is_integer() {
        let v: Vec<f64> = f
            .to_f64_vec()?
            .into_iter()
            .map(|v| v.round_ties_even())
            .collect();
        let (lo, hi) = int_range(x.dtype());
        let clipped = v.into_iter().map(|v| v.clamp(lo, hi)).collect();
        return super::cast_tensor(&Tensor::F64(array_from_vec(&shape, clipped)?), x.dtype());
    }
    super::cast_tensor(&f, x.dtype())
}

fn int_range(d: DType) -> (f64, f64) {
    match d {
        DType::Int8 => (i8::MIN as f64, i8::MAX as f64),
        DType::Uint8 => (0.0, u8::MAX as f64),
        DType::Int16 => (i16::MIN as f64, i16::MAX as f64),
        DType::Uint16 => (0.0, u16::MAX as f64),
        DType::Int32 => (i32::MIN as f64, i32::MAX as f64),
        DType::Uint32 => (0.0, u32::MAX as f64),
        DType::Uint64 => (0.0, u64::MAX as f64),
        _ => (i64::MIN as f64, i64::MAX as f64),
    }
}

fn resize(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    if matches!(
        x,
        Tensor::Str(_) | Tensor::Bool(_) | Tensor::C64(_) | Tensor::C128(_) | Tensor::Coded(..)
    ) {
        return Err(unsupported(ctx, x));
    }
    let rank = x.rank();
    let (roi, scales_in, sizes_in, s) = if ctx.opset < 11 {
        let mut s = settings(ctx, "asymmetric")?;
        if let Mode::Nearest(_) = s.mode {
            s.mode = Mode::Nearest(NearestMode::Floor);
        }
        (None, float_input(ctx, inputs, 1)?, None, s)
    } else {
        let sizes = match ctx.opt_input(inputs, 3)? {
            Some(t) if !t.is_empty() => {
                Some(t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?)
            }
            _ => None,
        };
        (
            float_input(ctx, inputs, 1)?,
            float_input(ctx, inputs, 2)?,
            sizes,
            settings(ctx, "half_pixel")?,
        )
    };
    let axes: Vec<usize> = match ctx.attr_ints("axes") {
        Some(a) if ctx.opset >= 18 => norm_axes(a, rank)?,
        _ => (0..rank).collect(),
    };
    let n = axes.len();
    let mut scales = vec![1.0; rank];
    let mut sizes: Vec<usize> = x.shape().to_vec();
    let mut full_roi = None;
    if let Some(r) = roi.as_deref() {
        if r.len() == 2 * n {
            let mut fr = vec![0.0; rank];
            fr.extend(vec![1.0; rank]);
            for (i, &a) in axes.iter().enumerate() {
                fr[a] = r[i];
                fr[rank + a] = r[n + i];
            }
            full_roi = Some(fr);
        } else if s.coord == "tf_crop_and_resize" {
            return Err(ctx.err(format!("roi must have {} values", 2 * n)));
        }
    }
    match (sizes_in, scales_in) {
        (Some(sz), _) => {
            if sz.len() != n {
                return Err(ctx.err(format!("sizes has {} values for {n} axes", sz.len())));
            }
            let sz = super::to_dims(&sz)?;
            for (i, &a) in axes.iter().enumerate() {
                scales[a] = sz[i] as f64 / x.shape()[a] as f64;
                sizes[a] = sz[i];
            }
            let policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch")?;
            if policy != "stretch" {
                let picked = axes.iter().map(|&a| scales[a]);
                let scale = if policy == "not_larger" {
                    picked.fold(f64::INFINITY, f64::min)
                } else {
                    picked.fold(f64::NEG_INFINITY, f64::max)
                };
                for &a in &axes {
                    scales[a] = scale;
                    sizes[a] = (scale * x.shape()[a] as f64 + 0.5) as usize;
                }
            }
        }
        (None, Some(sc)) => {
            if sc.len() != n {
                return Err(ctx.err(format!("scales has {} values for {n} axes", sc.len())));
            }
            for (i, &a) in axes.iter().enumerate() {
                if sc[i] <= 0.0 {
                    return Err(ctx.err(format!("scale {} must be positive", sc[i])));
                }
                scales[a] = sc[i];
                sizes[a] = (sc[i] * x.shape()[a] as f64) as usize;
            }
        }
        (None, None) => return Err(ctx.err("one of scales and sizes is required")),
    }
    one(run_resize(x, &scales, &sizes, full_roi.as_deref(), &s)
        .map_err(|e| e.in_node(&ctx.node_ref()))?)
}

fn upsample(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scales = if ctx.opset < 9 {
        ctx.attr_floats("scales")
            .map(|v| v.iter().map(|&f| f as f64).collect())
    } else {
        float_input(ctx, inputs, 1)?
    }
    .ok_or_else(|| ctx.err("scales are required"))?;
    if scales.len() != x.rank() {
        return Err(ctx.err(format!(
            "scales has {} values for rank {}",
            scales.len(),
            x.rank()
        )));
    }
    // The spec asks for scales of at least 1; like Resize, a scale that is not positive (or
    // NaN) is refused, so a model whose Upsample becomes a Resize fails on the same inputs.
    if let Some(bad) = scales.iter().find(|&&f| f.is_nan() || f <= 0.0) {
        return Err(ctx.err(format!("scale {bad} must be positive")));
    }
    let mut s = settings(ctx, "asymmetric")?;
    if let Mode::Nearest(_) = s.mode {
        s.mode = Mode::Nearest(NearestMode::Floor);
    }
    s.coord = "asymmetric".into();
    let sizes: Vec<usize> = x
        .shape()
        .iter()
        .zip(&scales)
        .map(|(&d, &f)| (d as f64 * f) as usize)
        .collect();
    one(run_resize(x, &scales, &sizes, None, &s).map_err(|e| e.in_node(&ctx.node_ref()))?)
}
