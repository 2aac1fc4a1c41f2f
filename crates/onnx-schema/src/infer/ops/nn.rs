//! The convolution and pooling family (Conv, ConvInteger, QLinearConv, DeformConv,
//! ConvTranspose, MaxPool, AveragePool, LpPool, the Global pools, MaxUnpool, MaxRoiPool,
//! RoiAlign), sampling (Resize, Upsample, GridSample, AffineGrid, Col2Im) and recurrent layers
//! (RNN, GRU, LSTM).
//!
//! Spatial output sizes follow onnx's `convPoolShapeInference`: explicit pads, `auto_pad`
//! (SAME_UPPER, SAME_LOWER, VALID), strides, dilations and `ceil_mode` (where the last window must
//! start inside the input or its left padding). A symbolic spatial dim stays symbolic only where
//! the output equals the input (kernel 1, stride 1, no padding, or SAME with stride 1).

use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    Some(match op {
        "Conv" | "ConvInteger" | "DeformConv" => conv,
        "QLinearConv" => conv,
        "ConvTranspose" => conv_transpose,
        "MaxPool" | "AveragePool" | "LpPool" => pool,
        "GlobalAveragePool" | "GlobalMaxPool" | "GlobalLpPool" => global_pool,
        "MaxUnpool" => max_unpool,
        "MaxRoiPool" => max_roi_pool,
        "RoiAlign" => roi_align,
        "Resize" | "Upsample" => resize,
        "GridSample" => grid_sample,
        "AffineGrid" => affine_grid,
        "Col2Im" => col2im,
        "RNN" | "GRU" | "LSTM" => recurrent,
        _ => return None,
    })
}

/// A per-spatial-axis attribute (strides, dilations) of `n` entries, defaulting to 1s.
fn per_axis(ctx: &NodeCtx<'_>, name: &str, n: usize) -> Result<Vec<i64>, InferError> {
    match ctx.attr_ints(name).filter(|v| !v.is_empty()) {
        Some(v) if v.len() == n && v.iter().all(|x| *x > 0) => Ok(v),
        Some(v) => Err(ctx.bad_attr(name, format!("{v:?} must have {n} positive entries"))),
        None => Ok(vec![1; n]),
    }
}

/// Explicit pads (`2n` entries, begins then ends), defaulting to 0s.
fn pads(ctx: &NodeCtx<'_>, n: usize) -> Result<Vec<i64>, InferError> {
    match ctx.attr_ints("pads").filter(|v| !v.is_empty()) {
        Some(v) if v.len() == 2 * n && v.iter().all(|x| *x >= 0) => Ok(v),
        Some(v) => Err(ctx.bad_attr(
            "pads",
            format!("{v:?} must have {} non-negative entries", 2 * n),
        )),
        None => Ok(vec![0; 2 * n]),
    }
}

/// Output spatial dims of a convolution or pooling window over `input` (spatial dims only).
fn window_output(ctx: &NodeCtx<'_>, input: &[SymDim], kernel: &[i64]) -> Result<Dims, InferError> {
    let n = kernel.len();
    if input.len() != n {
        return Err(ctx.fail(format!(
            "kernel {kernel:?} has {n} spatial dims but {} has {}",
            ctx.describe(0),
            input.len()
        )));
    }
    let strides = per_axis(ctx, "strides", n)?;
    let dilations = per_axis(ctx, "dilations", n)?;
    let pads = pads(ctx, n)?;
    let auto_pad = ctx
        .attr_str("auto_pad")
        .unwrap_or_else(|| "NOTSET".to_string());
    let ceil_mode = ctx.attr_int_or("ceil_mode", 0) != 0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (k, s, d) = (
            kernel.get(i).copied().unwrap_or(1),
            strides.get(i).copied().unwrap_or(1),
            dilations.get(i).copied().unwrap_or(1),
        );
        let (pb, pe) = (
            pads.get(i).copied().unwrap_or(0),
            pads.get(i + n).copied().unwrap_or(0),
        );
        let eff_k = d.saturating_mul(k.saturating_sub(1)).saturating_add(1);
        let dim = input.get(i).cloned().unwrap_or(SymDim::Unknown);
        let same = match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => s == 1,
            "VALID" => eff_k == 1 && s == 1,
            _ => pb.checked_add(pe) == Some(eff_k - 1) && s == 1,
        };
        let Some(x) = dim.known() else {
            out.push(if same { dim } else { SymDim::Unknown });
            continue;
        };
        let size = match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => dims::div_ceil(x, s),
            "VALID" => x
                .checked_sub(eff_k)
                .and_then(|t| dims::div_floor(t, s))
                .and_then(|v| v.checked_add(1)),
            _ => explicit_window_count(x, pb, pe, eff_k, s, ceil_mode),
        };
        match size {
            Some(v) if v >= 0 && x >= 0 => out.push(SymDim::Known(v)),
            _ => {
                return Err(ctx.fail(format!(
                    "window of kernel {kernel:?}, strides {strides:?}, dilations {dilations:?}, pads {pads:?} does not fit {}",
                    ctx.describe(0)
                )))
            }
        }
    }
    Ok(out)
}

/// The number of windows of effective size `eff_k` and stride `s` over `x` padded by `pb` and
/// `pe`; with `ceil_mode` the last window must start inside the input or its left padding.
/// `None` on overflow. (Also what version conversion uses to write `ceil_mode` as padding.)
pub fn explicit_window_count(
    x: i64,
    pb: i64,
    pe: i64,
    eff_k: i64,
    s: i64,
    ceil_mode: bool,
) -> Option<i64> {
    let total = x.checked_add(pb)?.checked_add(pe)?.checked_sub(eff_k)?;
    if !ceil_mode {
        return dims::div_floor(total, s)?.checked_add(1);
    }
    let v = dims::div_ceil(total, s)?.checked_add(1)?;
    if (v - 1).checked_mul(s)? >= x.checked_add(pb)? {
        Some(v - 1)
    } else {
        Some(v)
    }
}

fn conv(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let w_index = if ctx.schema.name == "QLinearConv" {
        3
    } else {
        1
    };
    let (x, w) = (ctx.shape(0), ctx.shape(w_index));
    let rank = x.as_ref().map(Vec::len).or(w.as_ref().map(Vec::len));
    let Some(rank) = rank else {
        return Ok(vec![Out::default()]);
    };
    if rank < 3 {
        return Err(ctx.fail(format!("{} must have rank >= 3", ctx.describe(0))));
    }
    let m = w
        .as_ref()
        .and_then(|w| w.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let group = ctx.attr_int_or("group", 1);
    if let (Some(x), Some(w)) = (&x, &w) {
        if x.len() != w.len() {
            return Err(ctx.fail(format!(
                "{} and {} differ in rank",
                ctx.describe(0),
                ctx.describe(w_index)
            )));
        }
        if let (Some(c), Some(wc)) = (
            x.get(1).and_then(SymDim::known),
            w.get(1).and_then(SymDim::known),
        ) {
            if wc.checked_mul(group) != Some(c) {
                return Err(ctx.fail(format!(
                    "{} has {c} channels but {} with group {group} expects {}",
                    ctx.describe(0),
                    ctx.describe(w_index),
                    wc.saturating_mul(group)
                )));
            }
        }
    }
    let n = x
        .as_ref()
        .and_then(|x| x.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let kernel = ctx
        .attr_ints("kernel_shape")
        .filter(|k| !k.is_empty())
        .or_else(|| w.as_ref()?.get(2..)?.iter().map(SymDim::known).collect());
    let spatial = match (&x, kernel) {
        (Some(x), Some(kernel)) => window_output(ctx, x.get(2..).unwrap_or_default(), &kernel)?,
        _ => vec![SymDim::Unknown; rank - 2],
    };
    let mut out = vec![n, m];
    out.extend(spatial);
    Ok(vec![Out::shape(out)])
}

fn conv_transpose(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (x, w) = (ctx.shape(0), ctx.shape(1));
    let Some(rank) = x.as_ref().map(Vec::len).or(w.as_ref().map(Vec::len)) else {
        return Ok(vec![Out::default()]);
    };
    if rank < 3 {
        return Err(ctx.fail(format!("{} must have rank >= 3", ctx.describe(0))));
    }
    let n_spatial = rank - 2;
    let group = ctx.attr_int_or("group", 1);
    let c_out = w
        .as_ref()
        .and_then(|w| w.get(1))
        .map_or(SymDim::Unknown, |d| dims::mul(d, &SymDim::Known(group)));
    let n = x
        .as_ref()
        .and_then(|x| x.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let mut out = vec![n, c_out];
    if let Some(shape) = ctx.attr_ints("output_shape").filter(|s| !s.is_empty()) {
        let spatial = shape
            .get(shape.len().saturating_sub(n_spatial)..)
            .unwrap_or_default();
        out.extend(spatial.iter().map(|&d| SymDim::Known(d)));
        return Ok(vec![Out::shape(out)]);
    }
    let kernel: Option<Vec<i64>> = ctx
        .attr_ints("kernel_shape")
        .filter(|k| !k.is_empty())
        .or_else(|| w.as_ref()?.get(2..)?.iter().map(SymDim::known).collect());
    let (Some(x), Some(kernel)) = (x, kernel) else {
        out.extend(vec![SymDim::Unknown; n_spatial]);
        return Ok(vec![Out::shape(out)]);
    };
    let strides = per_axis(ctx, "strides", n_spatial)?;
    let dilations = per_axis(ctx, "dilations", n_spatial)?;
    let pads = pads(ctx, n_spatial)?;
    let output_padding = ctx
        .attr_ints("output_padding")
        .filter(|p| p.len() == n_spatial)
        .unwrap_or_else(|| vec![0; n_spatial]);
    let auto_pad = ctx
        .attr_str("auto_pad")
        .unwrap_or_else(|| "NOTSET".to_string());
    for i in 0..n_spatial {
        let dim = x.get(i + 2).cloned().unwrap_or(SymDim::Unknown);
        let s = strides.get(i).copied().unwrap_or(1);
        let Some(v) = dim.known() else {
            out.push(SymDim::Unknown);
            continue;
        };
        let size = if auto_pad.starts_with("SAME") {
            v.checked_mul(s)
        } else {
            let k = kernel.get(i).copied().unwrap_or(1);
            let d = dilations.get(i).copied().unwrap_or(1);
            let (pb, pe) = (
                pads.get(i).copied().unwrap_or(0),
                pads.get(i + n_spatial).copied().unwrap_or(0),
            );
            let output_pad = output_padding.get(i).copied().unwrap_or(0);
            // stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pads
            s.checked_mul(v - 1)
                .and_then(|t| t.checked_add(output_pad))
                .and_then(|t| t.checked_add(d.checked_mul(k - 1)?))
                .and_then(|t| t.checked_add(1))
                .and_then(|t| t.checked_sub(pb)?.checked_sub(pe))
        };
        let Some(size) = size.filter(|v| *v >= 0) else {
            return Err(ctx.fail(format!(
                "kernel {kernel:?}, strides {strides:?} and pads {pads:?} give no valid output size for {}",
                ctx.describe(0)
            )));
        };
        out.push(SymDim::Known(size));
    }
    Ok(vec![Out::shape(out)])
}

fn pool(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let kernel = ctx
        .attr_ints("kernel_shape")
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ctx.bad_attr("kernel_shape", "required attribute is missing"))?;
    let Some(x) = ctx.shape(0) else {
        let out = Out::rank(kernel.len() + 2);
        return Ok(vec![out.clone(), out]);
    };
    if x.len() != kernel.len() + 2 {
        return Err(ctx.fail(format!(
            "kernel_shape {kernel:?} does not match {}",
            ctx.describe(0)
        )));
    }
    let mut out: Dims = x.get(..2).unwrap_or_default().to_vec();
    out.extend(window_output(ctx, x.get(2..).unwrap_or_default(), &kernel)?);
    Ok(vec![Out::shape(out.clone()), Out::shape(out)])
}

fn global_pool(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    if x.len() < 2 {
        return Err(ctx.fail(format!("{} must have rank >= 2", ctx.describe(0))));
    }
    let mut out: Dims = x.get(..2).unwrap_or_default().to_vec();
    out.resize(x.len(), SymDim::Known(1));
    Ok(vec![Out::shape(out)])
}

fn max_unpool(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    if ctx.has_input(2) {
        return Ok(vec![Out::maybe_shape(ctx.sym(2))]);
    }
    let kernel = ctx
        .attr_ints("kernel_shape")
        .ok_or_else(|| ctx.bad_attr("kernel_shape", "required attribute is missing"))?;
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Out::rank(kernel.len() + 2)]);
    };
    let n = kernel.len();
    let strides = per_axis(ctx, "strides", n)?;
    let pads = pads(ctx, n)?;
    let mut out: Dims = x.get(..2).unwrap_or_default().to_vec();
    for i in 0..n {
        let dim = x.get(i + 2).and_then(SymDim::known);
        out.push(dim.map_or(SymDim::Unknown, |v| {
            let s = strides.get(i).copied().unwrap_or(1);
            let k = kernel.get(i).copied().unwrap_or(1);
            let (pb, pe) = (
                pads.get(i).copied().unwrap_or(0),
                pads.get(i + n).copied().unwrap_or(0),
            );
            // (in - 1) * stride + kernel - pads
            (v - 1)
                .checked_mul(s)
                .and_then(|t| t.checked_add(k)?.checked_sub(pb)?.checked_sub(pe))
                .map_or(SymDim::Unknown, SymDim::Known)
        }));
    }
    Ok(vec![Out::shape(out)])
}

fn max_roi_pool(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let pooled = ctx
        .attr_ints("pooled_shape")
        .ok_or_else(|| ctx.bad_attr("pooled_shape", "required attribute is missing"))?;
    let rois = ctx
        .shape(1)
        .and_then(|r| r.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let c = ctx
        .shape(0)
        .and_then(|x| x.get(1).cloned())
        .unwrap_or(SymDim::Unknown);
    let mut out = vec![rois, c];
    out.extend(pooled.into_iter().map(SymDim::Known));
    Ok(vec![Out::shape(out)])
}

fn roi_align(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let rois = ctx
        .shape(1)
        .and_then(|r| r.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let n_rois = ctx
        .shape(2)
        .and_then(|b| b.first().cloned())
        .map_or(rois.clone(), |b| dims::unify(&rois, &b).unwrap_or(rois));
    let c = ctx
        .shape(0)
        .and_then(|x| x.get(1).cloned())
        .unwrap_or(SymDim::Unknown);
    let h = SymDim::Known(ctx.attr_int_or("output_height", 1));
    let w = SymDim::Known(ctx.attr_int_or("output_width", 1));
    Ok(vec![Out::shape(vec![n_rois, c, h, w])])
}

/// `floor(dim * scale)` as onnx computes it (in f32).
fn scaled(dim: &SymDim, scale: f64) -> SymDim {
    match dim {
        SymDim::Known(v) => {
            // Dims and scales are small; onnx multiplies in f32 and floors.
            #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
            let out = ((*v as f32) * (scale as f32)).floor() as i64;
            SymDim::Known(out)
        }
        _ if scale == 1.0 => dim.clone(),
        _ => SymDim::Unknown,
    }
}

fn resize(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(x) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = x.len();
    let (scales_at, sizes_at) = match (ctx.schema.name.as_str(), ctx.since()) {
        ("Upsample", v) if v < 9 => (None, None),
        ("Upsample", _) | ("Resize", 10) => (Some(1), None),
        _ => (Some(2), Some(3)),
    };
    let axes: Vec<usize> = match ctx.attr_ints("axes").filter(|a| !a.is_empty()) {
        Some(a) => ctx.axes("axes", &a, rank)?,
        None => (0..rank).collect(),
    };
    let mut out = x.clone();
    if let Some(sizes) = sizes_at.filter(|&i| ctx.has_input(i)).map(|i| ctx.sym(i)) {
        let Some(sizes) = sizes else {
            return Ok(vec![Out::rank(rank)]);
        };
        if sizes.len() != axes.len() {
            return Err(ctx.fail(format!(
                "sizes {} must have one entry per axis",
                dims::show(&sizes)
            )));
        }
        let policy = ctx
            .attr_str("keep_aspect_ratio_policy")
            .unwrap_or_else(|| "stretch".to_string());
        if policy != "stretch" {
            return Ok(vec![Out::shape(keep_aspect_ratio(
                &x, &axes, &sizes, &policy,
            ))]);
        }
        for (&a, s) in axes.iter().zip(sizes) {
            if let Some(slot) = out.get_mut(a) {
                *slot = s;
            }
        }
        return Ok(vec![Out::shape(out)]);
    }
    let scales: Option<Vec<f64>> = match scales_at {
        None => ctx
            .attr_floats("scales")
            .map(|v| v.into_iter().map(f64::from).collect()),
        Some(i) if ctx.has_input(i) => ctx.floats(i),
        Some(_) => None,
    };
    let Some(scales) = scales.filter(|s| !s.is_empty()) else {
        return Ok(vec![Out::rank(rank)]);
    };
    if scales.len() != axes.len() {
        return Err(ctx.fail(format!(
            "scales {scales:?} must have one entry per axis of {}",
            ctx.describe(0)
        )));
    }
    for (&a, &s) in axes.iter().zip(&scales) {
        if let Some(slot) = out.get_mut(a) {
            *slot = scaled(slot, s);
        }
    }
    Ok(vec![Out::shape(out)])
}

fn keep_aspect_ratio(x: &[SymDim], axes: &[usize], sizes: &[SymDim], policy: &str) -> Dims {
    let mut out = x.to_vec();
    let ratios: Option<Vec<f64>> = axes
        .iter()
        .zip(sizes)
        .map(|(&a, s)| {
            // Small dims: exact in f32/f64.
            #[allow(clippy::cast_precision_loss)]
            let r = Some(s.known()? as f32 / x.get(a)?.known()? as f32);
            r.map(f64::from)
        })
        .collect();
    let Some(ratios) = ratios else {
        for &a in axes {
            if let Some(slot) = out.get_mut(a) {
                *slot = SymDim::Unknown;
            }
        }
        return out;
    };
    let fold = if policy == "not_larger" {
        f64::min
    } else {
        f64::max
    };
    let scale = ratios.iter().copied().reduce(fold).unwrap_or(1.0);
    for &a in axes {
        if let Some(slot) = out.get_mut(a) {
            if let Some(v) = slot.known() {
                #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
                let rounded = ((v as f32) * (scale as f32)).round() as i64;
                *slot = SymDim::Known(rounded);
            }
        }
    }
    out
}

fn grid_sample(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    let grid = ctx.shape(1);
    let Some(grid) = grid else {
        return Ok(vec![Out::maybe_shape(
            x.map(|x| vec![SymDim::Unknown; x.len()]),
        )]);
    };
    let n = x
        .as_ref()
        .and_then(|x| x.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let n = grid
        .first()
        .map_or(n.clone(), |g| dims::unify(&n, g).unwrap_or(n));
    let c = x
        .as_ref()
        .and_then(|x| x.get(1).cloned())
        .unwrap_or(SymDim::Unknown);
    let mut out = vec![n, c];
    out.extend(
        grid.get(1..grid.len().saturating_sub(1))
            .unwrap_or_default()
            .iter()
            .cloned(),
    );
    Ok(vec![Out::shape(out)])
}

fn affine_grid(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(size) = ctx.sym(1) else {
        return Ok(vec![Out::default()]);
    };
    let spatial = size.get(2..).unwrap_or_default();
    let (Some(n), true) = (size.first(), matches!(spatial.len(), 2 | 3)) else {
        return Err(ctx.fail(format!(
            "size {} must be [N, C, H, W] or [N, C, D, H, W]",
            dims::show(&size)
        )));
    };
    let mut out = vec![n.clone()];
    out.extend(spatial.iter().cloned());
    out.push(SymDim::Known(i64::try_from(spatial.len()).unwrap_or(0)));
    Ok(vec![Out::shape(out)])
}

fn col2im(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    let (Some(image), Some(block)) = (ctx.sym(1), ctx.sym(2)) else {
        return Ok(vec![Out::default()]);
    };
    let n = x
        .as_ref()
        .and_then(|x| x.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let c = x
        .as_ref()
        .and_then(|x| x.get(1).cloned())
        .map_or(SymDim::Unknown, |c| {
            dims::floor_div(&c, &dims::product(&block))
        });
    let mut out = vec![n, c];
    out.extend(image);
    Ok(vec![Out::shape(out)])
}

fn recurrent(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    let layout = ctx.attr_int_or("layout", 0);
    let (seq, batch) = match x.as_deref() {
        Some([a, b, _]) if layout == 0 => (a.clone(), b.clone()),
        Some([a, b, _]) => (b.clone(), a.clone()),
        Some(_) => return Err(ctx.fail(format!("{} must have rank 3", ctx.describe(0)))),
        None => (SymDim::Unknown, SymDim::Unknown),
    };
    let dirs = SymDim::Known(
        if ctx.attr_str("direction").as_deref() == Some("bidirectional") {
            2
        } else {
            1
        },
    );
    let hidden = ctx.attr_int("hidden_size").map_or_else(
        || {
            ctx.shape(2)
                .and_then(|r| r.get(2).cloned())
                .unwrap_or(SymDim::Unknown)
        },
        SymDim::Known,
    );
    let (y, state) = if layout == 0 {
        (
            vec![seq, dirs.clone(), batch.clone(), hidden.clone()],
            vec![dirs, batch, hidden],
        )
    } else {
        (
            vec![batch.clone(), seq, dirs.clone(), hidden.clone()],
            vec![batch, dirs, hidden],
        )
    };
    Ok(vec![
        Out::shape(y),
        Out::shape(state.clone()),
        Out::shape(state),
    ])
}
