//! Conv (1-D, 2-D, 3-D; groups, dilations, strides, explicit pads and auto_pad) by im2col +
//! GEMM, with a copy-free path for pointwise convolutions and a direct kernel for depthwise
//! ones; plus the window geometry that the pooling kernels share.

use super::matmul::{GemmElem, MatRef};
use super::{one, same_dtype, typed, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::{Num, Real};
use crate::tensor::{array_from_vec, check_size, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Conv", 1, LATEST, conv);
}

/// Sliding-window geometry over the spatial dims, normalized to exactly three dims (leading
/// dims of size 1 for 1-D and 2-D windows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// Number of real spatial dims (1, 2 or 3).
    pub dims: usize,
    pub input: [usize; 3],
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub dilation: [usize; 3],
    pub pad_begin: [usize; 3],
    /// Padding after the input that windows may read (explicit pads; not ceil_mode overhang).
    pub pad_end: [usize; 3],
    pub output: [usize; 3],
}

/// How a window's output size is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowKind {
    Conv,
    Pool { ceil_mode: bool },
}

fn three(v: &[usize], fill: usize) -> [usize; 3] {
    let mut out = [fill; 3];
    let off = 3 - v.len();
    out[off..].copy_from_slice(v);
    out
}

/// Reads kernel_shape/strides/dilations/pads/auto_pad and computes the window geometry.
pub(crate) fn window(
    ctx: &KernelCtx,
    input: &[usize],
    kernel: &[usize],
    kind: WindowKind,
) -> Result<Window> {
    let n = input.len();
    if n == 0 || n > 3 {
        return Err(ctx.err(format!(
            "only 1-D, 2-D and 3-D windows are supported, got {n} spatial dims"
        )));
    }
    if kernel.len() != n {
        return Err(ctx.err(format!("kernel {kernel:?} does not match {n} spatial dims")));
    }
    let read = |name: &str| -> Result<Vec<usize>> {
        match ctx.attr_ints(name) {
            Some(v) if !v.is_empty() => super::to_dims(v),
            _ => Ok(vec![1; n]),
        }
    };
    let stride = read("strides")?;
    let dilation = read("dilations")?;
    if stride.len() != n || dilation.len() != n || stride.contains(&0) || dilation.contains(&0) {
        return Err(ctx.err("strides and dilations must be positive, one per spatial dim"));
    }
    let auto_pad = ctx.attr_string("auto_pad", "NOTSET")?;
    let mut pad_begin = vec![0; n];
    let mut pad_end = vec![0; n];
    let mut output = vec![0; n];
    let ceil_mode = matches!(kind, WindowKind::Pool { ceil_mode: true });
    for i in 0..n {
        let eff = dilation[i] * (kernel[i].max(1) - 1) + 1;
        match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                output[i] = input[i].div_ceil(stride[i]);
                let k = if kind == WindowKind::Conv {
                    eff
                } else {
                    kernel[i]
                };
                let total = ((output[i].max(1) - 1) * stride[i] + k).saturating_sub(input[i]);
                let (b, e) = if auto_pad == "SAME_UPPER" {
                    (total / 2, total - total / 2)
                } else {
                    (total - total / 2, total / 2)
                };
                pad_begin[i] = b;
                pad_end[i] = e;
            }
            "VALID" => {
                if input[i] < eff {
                    return Err(ctx.err(format!("window {eff} is larger than input {}", input[i])));
                }
                output[i] = (input[i] - eff) / stride[i] + 1;
            }
            "NOTSET" | "" => {
                if let Some(p) = ctx.attr_ints("pads").filter(|p| !p.is_empty()) {
                    if p.len() != 2 * n || p.iter().any(|&v| v < 0) {
                        return Err(
                            ctx.err(format!("pads {p:?} must be 2 x {n} non-negative values"))
                        );
                    }
                    pad_begin[i] = p[i] as usize;
                    pad_end[i] = p[i + n] as usize;
                }
                let span = input[i] + pad_begin[i] + pad_end[i];
                if span < eff {
                    return Err(ctx.err(format!("window {eff} is larger than padded input {span}")));
                }
                output[i] = if ceil_mode {
                    let mut o = (span - eff).div_ceil(stride[i]) + 1;
                    if (o - 1) * stride[i] >= input[i] + pad_begin[i] {
                        o -= 1;
                    }
                    o
                } else {
                    (span - eff) / stride[i] + 1
                };
            }
            other => return Err(ctx.err(format!("unknown auto_pad '{other}'"))),
        }
    }
    Ok(Window {
        dims: n,
        input: three(input, 1),
        kernel: three(kernel, 1),
        stride: three(&stride, 1),
        dilation: three(&dilation, 1),
        pad_begin: three(&pad_begin, 0),
        pad_end: three(&pad_end, 0),
        output: three(&output, 1),
    })
}

impl Window {
    pub(crate) fn input_volume(&self) -> usize {
        self.input.iter().product()
    }
    pub(crate) fn output_volume(&self) -> usize {
        self.output.iter().product()
    }
    pub(crate) fn kernel_volume(&self) -> usize {
        self.kernel.iter().product()
    }
    /// Output spatial dims (only the real ones).
    pub(crate) fn output_dims(&self) -> &[usize] {
        &self.output[3 - self.dims..]
    }
    /// Input coordinate of output `o` and kernel tap `k` along dim `d` (may be out of range).
    #[inline]
    pub(crate) fn coord(&self, d: usize, o: usize, k: usize) -> isize {
        (o * self.stride[d] + k * self.dilation[d]) as isize - self.pad_begin[d] as isize
    }
    /// Output positions along dim `d` whose tap `k` reads inside the input: `[lo, hi)`.
    #[inline]
    pub(crate) fn valid_range(&self, d: usize, k: usize) -> (usize, usize) {
        let off = (k * self.dilation[d]) as isize - self.pad_begin[d] as isize;
        let s = self.stride[d] as isize;
        let n = self.input[d] as isize;
        // o*s + off >= 0  and  o*s + off < n
        let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
        let hi = if n - off <= 0 {
            0
        } else {
            (n - off + s - 1) / s
        };
        let lo = lo.max(0) as usize;
        let hi = (hi.max(0) as usize).min(self.output[d]);
        (lo.min(hi), hi)
    }
}

/// Lays out the windows of one group's channels as columns: rows (c, kd, kh, kw), columns
/// the output positions.
fn im2col<T: Num>(x: &[T], channels: usize, w: &Window, col: &mut [T]) {
    let [od, oh, ow] = w.output;
    let [id, ih, iw] = w.input;
    let [kd, kh, kw] = w.kernel;
    let pvol = od * oh * ow;
    let ivol = id * ih * iw;
    let mut row = 0;
    for c in 0..channels {
        let xc = &x[c * ivol..(c + 1) * ivol];
        for a in 0..kd {
            for b in 0..kh {
                for e in 0..kw {
                    let dst = &mut col[row * pvol..(row + 1) * pvol];
                    let (w_lo, w_hi) = w.valid_range(2, e);
                    for z in 0..od {
                        let iz = w.coord(0, z, a);
                        for y in 0..oh {
                            let iy = w.coord(1, y, b);
                            let base = (z * oh + y) * ow;
                            let out = &mut dst[base..base + ow];
                            if iz < 0 || iz >= id as isize || iy < 0 || iy >= ih as isize {
                                out.fill(T::zero());
                                continue;
                            }
                            let src = &xc[(iz as usize * ih + iy as usize) * iw..][..iw];
                            out[..w_lo].fill(T::zero());
                            out[w_hi..].fill(T::zero());
                            let s = w.stride[2];
                            let off = (e * w.dilation[2]) as isize - w.pad_begin[2] as isize;
                            for (o, v) in out.iter_mut().enumerate().take(w_hi).skip(w_lo) {
                                *v = src[(o as isize * s as isize + off) as usize];
                            }
                        }
                    }
                    row += 1;
                }
            }
        }
    }
}

/// Depthwise convolution (one input channel per group). Compiled twice on x86-64: with AVX
/// when the CPU has it (chosen at run time; the same arithmetic, eight lanes wide) and for the
/// baseline.
fn depthwise<T: Real>(x: &[T], wts: &[T], w: &Window, n: usize, c: usize, m: usize, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU supports AVX, checked just above.
        unsafe { depthwise_avx(x, wts, w, n, c, m, out) };
        return;
    }
    depthwise_impl(x, wts, w, n, c, m, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn depthwise_avx<T: Real>(
    x: &[T],
    wts: &[T],
    w: &Window,
    n: usize,
    c: usize,
    m: usize,
    out: &mut [T],
) {
    depthwise_impl(x, wts, w, n, c, m, out)
}

/// For each kernel tap, the valid run of an output row gets `weight · input` added. With a
/// horizontal stride s, each channel's rows are first split into s phase rows (columns p,
/// p+s, p+2s, ...), so every tap reads a contiguous run. Column ranges per tap are computed
/// once for all channels.
#[inline(always)]
fn depthwise_impl<T: Real>(
    x: &[T],
    wts: &[T],
    w: &Window,
    n: usize,
    c: usize,
    m: usize,
    out: &mut [T],
) {
    let mult = m / c;
    let [od, oh, ow] = w.output;
    let [id, ih, iw] = w.input;
    let [kd, kh, kw] = w.kernel;
    let (pvol, ivol, kvol) = (od * oh * ow, id * ih * iw, kd * kh * kw);
    let s = w.stride[2];
    let rows = id * ih;
    let phase_w = iw.div_ceil(s);
    // Per column tap: output columns [lo, hi) read inside the row, starting at input column
    // `first`, which is column first / s of phase first % s.
    let col_taps: Vec<(usize, usize, usize, usize)> = (0..kw)
        .map(|e| {
            let (lo, hi) = w.valid_range(2, e);
            let off = (e * w.dilation[2]) as isize - w.pad_begin[2] as isize;
            let first = if lo < hi {
                (lo as isize * s as isize + off) as usize
            } else {
                0
            };
            (lo, hi, first % s, first / s)
        })
        .collect();
    // The input row (index into the plane's rows) that output row (z, y) reads at tap (a, b).
    let in_row = |z: usize, y: usize, a: usize, b: usize| -> Option<usize> {
        let iz = w.coord(0, z, a);
        let iy = w.coord(1, y, b);
        if iz < 0 || iz >= id as isize || iy < 0 || iy >= ih as isize {
            return None;
        }
        Some(iz as usize * ih + iy as usize)
    };
    let mut phases: Vec<T> = if s > 1 {
        vec![T::zero(); s * rows * phase_w]
    } else {
        Vec::new()
    };
    let mut acc = vec![T::Acc::zero(); pvol];
    for ni in 0..n {
        for ci in 0..c {
            let xc = &x[(ni * c + ci) * ivol..][..ivol];
            if s > 1 {
                for (r, src) in xc.chunks_exact(iw).enumerate() {
                    for (q, group) in src.chunks(s).enumerate() {
                        for (p, v) in group.iter().enumerate() {
                            phases[(p * rows + r) * phase_w + q] = *v;
                        }
                    }
                }
            }
            // Row `r` of phase `p` (the plane itself when there is no stride).
            let row_of = |p: usize, r: usize| -> &[T] {
                if s > 1 {
                    &phases[(p * rows + r) * phase_w..][..phase_w]
                } else {
                    &xc[r * iw..][..iw]
                }
            };
            for j in 0..mult {
                let o = ci * mult + j;
                let wk = &wts[o * kvol..(o + 1) * kvol];
                acc.fill(T::Acc::zero());
                for z in 0..od {
                    for y in 0..oh {
                        let dst = &mut acc[(z * oh + y) * ow..][..ow];
                        for a in 0..kd {
                            for b in 0..kh {
                                let Some(r) = in_row(z, y, a, b) else {
                                    continue;
                                };
                                for (e, &(lo, hi, phase, start)) in col_taps.iter().enumerate() {
                                    if lo >= hi {
                                        continue;
                                    }
                                    let wv = wk[(a * kh + b) * kw + e].acc();
                                    let src = &row_of(phase, r)[start..];
                                    for (d, v) in dst[lo..hi].iter_mut().zip(src) {
                                        *d = *d + wv * v.acc();
                                    }
                                }
                            }
                        }
                    }
                }
                let dst = &mut out[(ni * m + o) * pvol..][..pvol];
                for (d, a) in dst.iter_mut().zip(&acc) {
                    *d = T::from_acc(*a);
                }
            }
        }
    }
}

use num_traits::Zero;

fn conv_of<T: GemmElem + Real>(
    x: &Array<T>,
    wt: &Array<T>,
    bias: Option<&Array<T>>,
    w: &Window,
    group: usize,
) -> Result<Array<T>> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let m = wt.shape()[0];
    let cg = c / group;
    let mg = m / group;
    let kvol = w.kernel_volume();
    let pvol = w.output_volume();
    let ivol = w.input_volume();
    let mut out_shape = vec![n, m];
    out_shape.extend_from_slice(w.output_dims());
    check_size("Conv result", &out_shape)?;
    let x_std = x.as_standard_layout();
    let xs = x_std
        .as_slice()
        .ok_or_else(|| RefError::op("Conv input is not contiguous"))?;
    let w_std = wt.as_standard_layout();
    let ws = w_std
        .as_slice()
        .ok_or_else(|| RefError::op("Conv weight is not contiguous"))?;
    let mut out = vec![T::zero(); n * m * pvol];
    if cg == 1 && group == c && group > 1 {
        depthwise(xs, ws, w, n, c, m, &mut out);
    } else {
        let pointwise =
            kvol == 1 && w.stride == [1; 3] && w.pad_begin == [0; 3] && w.output == w.input;
        let mut col = if pointwise {
            Vec::new()
        } else {
            vec![T::zero(); cg * kvol * pvol]
        };
        for ni in 0..n {
            for g in 0..group {
                let xg = &xs[(ni * c + g * cg) * ivol..][..cg * ivol];
                let b = if pointwise {
                    xg
                } else {
                    im2col(xg, cg, w, &mut col);
                    &col[..]
                };
                let a = &ws[g * mg * cg * kvol..][..mg * cg * kvol];
                let dst = &mut out[(ni * m + g * mg) * pvol..][..mg * pvol];
                T::gemm(
                    mg,
                    cg * kvol,
                    pvol,
                    T::one(),
                    MatRef {
                        data: a,
                        rs: cg * kvol,
                        cs: 1,
                    },
                    MatRef {
                        data: b,
                        rs: pvol,
                        cs: 1,
                    },
                    T::zero(),
                    dst,
                )?;
            }
        }
    }
    if let Some(bias) = bias {
        let bv: Vec<T> = bias.iter().copied().collect();
        if bv.len() != m {
            return Err(RefError::op(format!(
                "bias has {} values for {m} output channels",
                bv.len()
            )));
        }
        for (i, chunk) in out.chunks_mut(pvol.max(1)).enumerate() {
            let b = bv[i % m];
            for v in chunk {
                *v = v.add(b);
            }
        }
    }
    array_from_vec(&out_shape, out)
}

pub(crate) fn conv(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let wt = ctx.input(inputs, 1)?;
    let bias = ctx.opt_input(inputs, 2)?;
    same_dtype(ctx, &[x, wt])?;
    if x.rank() < 3 || wt.rank() != x.rank() {
        return Err(ctx.err(format!(
            "X {:?} and W {:?} must have the same rank >= 3",
            x.shape(),
            wt.shape()
        )));
    }
    let group = ctx.attr_int("group", 1)?;
    let c = x.shape()[1];
    let m = wt.shape()[0];
    if group <= 0
        || c % group as usize != 0
        || m % group as usize != 0
        || wt.shape()[1] * group as usize != c
    {
        return Err(ctx.err(format!(
            "group {group} does not fit X {:?} and W {:?}",
            x.shape(),
            wt.shape()
        )));
    }
    let kernel: Vec<usize> = match ctx.attr_ints("kernel_shape") {
        Some(k) if !k.is_empty() => super::to_dims(k)?,
        _ => wt.shape()[2..].to_vec(),
    };
    if kernel != wt.shape()[2..] {
        return Err(ctx.err(format!(
            "kernel_shape {kernel:?} does not match W {:?}",
            wt.shape()
        )));
    }
    let w = window(ctx, &x.shape()[2..], &kernel, WindowKind::Conv)?;
    let out = match x {
        Tensor::F32(a) => Tensor::F32(conv_of(
            a,
            typed(wt)?,
            bias.map(typed).transpose()?,
            &w,
            group as usize,
        )?),
        Tensor::F64(a) => Tensor::F64(conv_of(
            a,
            typed(wt)?,
            bias.map(typed).transpose()?,
            &w,
            group as usize,
        )?),
        Tensor::F16(a) => Tensor::F16(conv_of(
            a,
            typed(wt)?,
            bias.map(typed).transpose()?,
            &w,
            group as usize,
        )?),
        Tensor::BF16(a) => Tensor::BF16(conv_of(
            a,
            typed(wt)?,
            bias.map(typed).transpose()?,
            &w,
            group as usize,
        )?),
        other => return Err(unsupported(ctx, other)),
    };
    one(out)
}
