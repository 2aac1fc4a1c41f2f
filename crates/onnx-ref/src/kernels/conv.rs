//! Conv (1-D, 2-D, 3-D; groups, dilations, strides, explicit pads and auto_pad) by im2col +
//! GEMM, with a copy-free path for pointwise convolutions and a direct kernel for depthwise
//! ones; plus the window geometry that the pooling kernels share.

use super::matmul::{GemmElem, MatRef};
use super::parallel;
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
    /// The column taps (along the last dim) that read inside the input for some output
    /// column: `(lo, hi, first)`, output columns `[lo, hi)`, the first of them reading input
    /// column `first` (the next ones `stride` further each).
    pub(crate) fn column_taps(&self) -> Vec<(usize, usize, usize)> {
        let s = self.stride[2] as isize;
        (0..self.kernel[2])
            .filter_map(|e| {
                let (lo, hi) = self.valid_range(2, e);
                let off = (e * self.dilation[2]) as isize - self.pad_begin[2] as isize;
                (lo < hi).then(|| (lo, hi, (lo as isize * s + off) as usize))
            })
            .collect()
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
/// the output positions `p0..p1` (a row of `col` is `p1 - p0` long).
fn im2col<T: Num>(x: &[T], channels: usize, w: &Window, p0: usize, p1: usize, col: &mut [T]) {
    let [_, oh, ow] = w.output;
    let [id, ih, iw] = w.input;
    let [kd, kh, kw] = w.kernel;
    let width = p1 - p0;
    let ivol = id * ih * iw;
    // The output rows (z, y) the columns cross: their columns x0..x1 and where those start
    // in a row of `col`.
    let mut runs = Vec::new();
    let mut p = p0;
    while p < p1 {
        let (zy, x0) = (p / ow, p % ow);
        let x1 = ow.min(x0 + (p1 - p));
        runs.push((zy / oh, zy % oh, x0, x1, p - p0));
        p += x1 - x0;
    }
    let s = w.stride[2];
    let mut row = 0;
    for c in 0..channels {
        let xc = &x[c * ivol..(c + 1) * ivol];
        for a in 0..kd {
            for b in 0..kh {
                for e in 0..kw {
                    let dst = &mut col[row * width..(row + 1) * width];
                    let (w_lo, w_hi) = w.valid_range(2, e);
                    let off = (e * w.dilation[2]) as isize - w.pad_begin[2] as isize;
                    for &(z, y, x0, x1, at) in &runs {
                        let out = &mut dst[at..at + (x1 - x0)];
                        let iz = w.coord(0, z, a);
                        let iy = w.coord(1, y, b);
                        if iz < 0 || iz >= id as isize || iy < 0 || iy >= ih as isize {
                            out.fill(T::zero());
                            continue;
                        }
                        let src = &xc[(iz as usize * ih + iy as usize) * iw..][..iw];
                        let (lo, hi) = (w_lo.clamp(x0, x1), w_hi.clamp(x0, x1));
                        out[..lo - x0].fill(T::zero());
                        out[hi - x0..].fill(T::zero());
                        let inside = &mut out[lo - x0..hi - x0];
                        if lo == hi {
                            continue;
                        }
                        if s == 1 {
                            let first = (lo as isize + off) as usize;
                            inside.copy_from_slice(&src[first..first + (hi - lo)]);
                        } else {
                            for (o, v) in (lo..hi).zip(inside) {
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

/// The padded pass ([`depthwise_padded`]) for 1-D and 2-D windows with finite weights, the
/// row pass ([`depthwise_rows`]) otherwise: the same sums.
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
    if w.dims <= 2 && wts.iter().all(|v| num_traits::Float::is_finite(v.acc())) {
        depthwise_padded(x, wts, w, n, c, m, out)
    } else {
        depthwise_rows(x, wts, w, n, c, m, out)
    }
}

/// Output columns the padded depthwise pass computes at once (one AVX vector of f32).
const DW_LANES: usize = 8;

/// Depthwise convolution over a zero-padded copy of each channel (1-D and 2-D windows): every
/// output element's taps are summed in registers, [`DW_LANES`] output columns at a time, in
/// (row, column) order from zero, each tap `acc + weight · input` as in [`depthwise_rows`].
/// A tap that falls in the padding adds `weight · 0 = ±0` where the row pass skips it: the
/// same value, since the weight is finite and a sum from +0 is never -0 (`acc + ±0 == acc`).
/// With a horizontal stride s, the padded rows are split into s phase rows (columns p, p+s,
/// ...), so every tap reads a contiguous run.
#[inline(always)]
fn depthwise_padded<T: Real>(
    x: &[T],
    wts: &[T],
    w: &Window,
    n: usize,
    c: usize,
    m: usize,
    out: &mut [T],
) {
    debug_assert!(w.dims <= 2);
    let mult = m / c;
    let [_, oh, ow] = w.output;
    let [_, ih, iw] = w.input;
    let [_, kh, kw] = w.kernel;
    let [_, sh, sw] = w.stride;
    let [_, dh, dw] = w.dilation;
    let [_, pt, pl] = w.pad_begin;
    let (ivol, pvol, kvol) = (ih * iw, oh * ow, kh * kw);
    if pvol == 0 {
        return;
    }
    // The padded rows and (per phase) columns some output reads, the last lanes of a row
    // included.
    let prows = (oh - 1) * sh + (kh - 1) * dh + 1;
    let ow_lanes = ow.div_ceil(DW_LANES) * DW_LANES;
    let qw = ow_lanes + (kw - 1) * dw / sw;
    // Where tap (b, e) of output (0, 0) reads: padded row b·dh, column e·dw, which is column
    // e·dw / sw of phase e·dw % sw.
    let taps: Vec<usize> = (0..kh)
        .flat_map(|b| (0..kw).map(move |e| (((e * dw) % sw * prows + b * dh) * qw) + e * dw / sw))
        .collect();
    // Padding is written once (zeros); the input part is overwritten for each channel.
    let mut buf = vec![T::Acc::zero(); sw * prows * qw];
    let mut wv = vec![T::Acc::zero(); kvol];
    for ni in 0..n {
        for ci in 0..c {
            let xc = &x[(ni * c + ci) * ivol..][..ivol];
            for (iy, src) in xc.chunks_exact(iw).enumerate() {
                let r = pt + iy;
                if r >= prows {
                    break;
                }
                if sw == 1 {
                    let row = &mut buf[r * qw..][..qw];
                    let dst = row.get_mut(pl..).unwrap_or_default();
                    for (d, v) in dst.iter_mut().zip(src) {
                        *d = v.acc();
                    }
                    continue;
                }
                // Padded column j = pl + ix is column j / sw of phase j % sw.
                for p in 0..sw.min(iw) {
                    let j0 = pl + p;
                    let row = &mut buf[((j0 % sw) * prows + r) * qw..][..qw];
                    let dst = row.get_mut(j0 / sw..).unwrap_or_default();
                    for (d, v) in dst.iter_mut().zip(src[p..].iter().step_by(sw)) {
                        *d = v.acc();
                    }
                }
            }
            for j in 0..mult {
                let o = ci * mult + j;
                for (d, v) in wv.iter_mut().zip(&wts[o * kvol..(o + 1) * kvol]) {
                    *d = v.acc();
                }
                let dst = &mut out[(ni * m + o) * pvol..][..pvol];
                for (y, dst_row) in dst.chunks_exact_mut(ow).enumerate() {
                    let row0 = y * sh * qw;
                    for (x0, dst_lanes) in (0..ow_lanes)
                        .step_by(DW_LANES)
                        .zip(dst_row.chunks_mut(DW_LANES))
                    {
                        let mut acc = [T::Acc::zero(); DW_LANES];
                        for (&t, &wt) in taps.iter().zip(&wv) {
                            let src: &[T::Acc; DW_LANES] = buf[row0 + x0 + t..][..DW_LANES]
                                .try_into()
                                .expect("DW_LANES values");
                            for (a, v) in acc.iter_mut().zip(src) {
                                *a = *a + wt * *v;
                            }
                        }
                        for (d, a) in dst_lanes.iter_mut().zip(&acc) {
                            *d = T::from_acc(*a);
                        }
                    }
                }
            }
        }
    }
}

/// For each kernel tap, the valid run of an output row gets `weight · input` added. With a
/// horizontal stride s, each channel's rows are first split into s phase rows (columns p,
/// p+s, p+2s, ...), so every tap reads a contiguous run. Column ranges per tap are computed
/// once for all channels.
#[inline(always)]
fn depthwise_rows<T: Real>(
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

/// Multiply-adds each part of a Conv by GEMM split across threads has at least.
const PARALLEL_MIN_MACS: usize = 1 << 22;
/// Output positions each part of a split Conv has at least.
const PARALLEL_MIN_COLUMNS: usize = 64;

/// Whether the windows are the input itself (a 1x1 kernel, no stride, no padding): the GEMM
/// then reads the input as it is, without im2col.
fn is_pointwise(w: &Window) -> bool {
    w.kernel_volume() == 1 && w.stride == [1; 3] && w.pad_begin == [0; 3] && w.output == w.input
}

/// Conv by GEMM over the output positions `p0..p1` of every (image, output channel):
/// `rows[i * m + o]` receives those positions of output channel `o` of image `i`.
fn conv_columns<T: GemmElem>(
    xs: &[T],
    ws: &[T],
    w: &Window,
    [n, c, m, group]: [usize; 4],
    (p0, p1): (usize, usize),
    rows: &mut [&mut [T]],
) -> Result<()> {
    let (cg, mg) = (c / group, m / group);
    let (kvol, pvol, ivol) = (w.kernel_volume(), w.output_volume(), w.input_volume());
    let width = p1 - p0;
    let pointwise = is_pointwise(w);
    let mut col = if pointwise {
        Vec::new()
    } else {
        vec![T::zero(); cg * kvol * width]
    };
    let mut block = vec![T::zero(); mg * width];
    for ni in 0..n {
        for g in 0..group {
            let xg = &xs[(ni * c + g * cg) * ivol..][..cg * ivol];
            let b = if pointwise {
                MatRef {
                    data: &xg[p0..],
                    rs: pvol,
                    cs: 1,
                }
            } else {
                im2col(xg, cg, w, p0, p1, &mut col);
                MatRef {
                    data: &col[..],
                    rs: width,
                    cs: 1,
                }
            };
            let a = MatRef {
                data: &ws[g * mg * cg * kvol..][..mg * cg * kvol],
                rs: cg * kvol,
                cs: 1,
            };
            T::gemm(mg, cg * kvol, width, T::one(), a, b, T::zero(), &mut block)?;
            for (r, src) in block.chunks_exact(width.max(1)).enumerate().take(mg) {
                rows[ni * m + g * mg + r].copy_from_slice(src);
            }
        }
    }
    Ok(())
}

/// Conv by GEMM split into `parts` ranges of output positions, computed on several threads
/// (each its own im2col columns and GEMM columns: the same sums as on one thread).
fn conv_gemm_split<T: GemmElem>(
    xs: &[T],
    ws: &[T],
    w: &Window,
    dims: [usize; 4],
    parts: usize,
    out: &mut [T],
) -> Result<()> {
    let pvol = w.output_volume();
    let bounds = parallel::split_bounds(pvol, parts);
    let mut parts: Vec<Vec<&mut [T]>> = (0..parts).map(|_| Vec::new()).collect();
    for row in out.chunks_exact_mut(pvol) {
        let mut rest = row;
        for (t, part) in parts.iter_mut().enumerate() {
            let (head, tail) = rest.split_at_mut(bounds[t + 1] - bounds[t]);
            part.push(head);
            rest = tail;
        }
    }
    parallel::run_parts(parts, |t, mut rows| {
        conv_columns(xs, ws, w, dims, (bounds[t], bounds[t + 1]), &mut rows)
    })
}

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
    let parts = parallel::parts_for(
        n * m * cg * kvol * pvol,
        PARALLEL_MIN_MACS,
        pvol,
        PARALLEL_MIN_COLUMNS,
    );
    if cg == 1 && group == c && group > 1 {
        depthwise(xs, ws, w, n, c, m, &mut out);
    } else if parts > 1 {
        conv_gemm_split(xs, ws, w, [n, c, m, group], parts, &mut out)?;
    } else {
        let pointwise = is_pointwise(w);
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
                    im2col(xg, cg, w, 0, pvol, &mut col);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A window over `input` (1 to 3 spatial dims) with explicit pads.
    fn geometry(
        input: &[usize],
        kernel: &[usize],
        stride: &[usize],
        dilation: &[usize],
        pads: (&[usize], &[usize]),
    ) -> Window {
        let dims = input.len();
        let output: Vec<usize> = (0..dims)
            .map(|i| {
                let eff = dilation[i] * (kernel[i] - 1) + 1;
                (input[i] + pads.0[i] + pads.1[i] - eff) / stride[i] + 1
            })
            .collect();
        Window {
            dims,
            input: three(input, 1),
            kernel: three(kernel, 1),
            stride: three(stride, 1),
            dilation: three(dilation, 1),
            pad_begin: three(pads.0, 0),
            pad_end: three(pads.1, 0),
            output: three(&output, 1),
        }
    }

    /// Direct convolution, summed in `S` over (input channel, depth, row, column) in that order
    /// from zero (f64 for a reference value; f32 for the order a kernel must keep).
    fn direct<S: num_traits::Float + From<f32>>(
        x: &[f32],
        wt: &[f32],
        w: &Window,
        [n, c, m, group]: [usize; 4],
    ) -> Vec<S> {
        let (cg, mg) = (c / group, m / group);
        let [od, oh, ow] = w.output;
        let [id, ih, iw] = w.input;
        let [kd, kh, kw] = w.kernel;
        let mut out = vec![S::zero(); n * m * od * oh * ow];
        let mut at = 0;
        for ni in 0..n {
            for o in 0..m {
                let g = o / mg;
                for z in 0..od {
                    for y in 0..oh {
                        for xo in 0..ow {
                            let mut sum = S::zero();
                            for ci in 0..cg {
                                for a in 0..kd {
                                    for b in 0..kh {
                                        for e in 0..kw {
                                            let (iz, iy, ix) = (
                                                w.coord(0, z, a),
                                                w.coord(1, y, b),
                                                w.coord(2, xo, e),
                                            );
                                            if iz < 0 || iy < 0 || ix < 0 {
                                                continue;
                                            }
                                            let (iz, iy, ix) =
                                                (iz as usize, iy as usize, ix as usize);
                                            if iz >= id || iy >= ih || ix >= iw {
                                                continue;
                                            }
                                            let ch = g * cg + ci;
                                            let xv =
                                                x[(((ni * c + ch) * id + iz) * ih + iy) * iw + ix];
                                            let wv =
                                                wt[(((o * cg + ci) * kd + a) * kh + b) * kw + e];
                                            sum = sum
                                                + <S as From<f32>>::from(xv)
                                                    * <S as From<f32>>::from(wv);
                                        }
                                    }
                                }
                            }
                            out[at] = sum;
                            at += 1;
                        }
                    }
                }
            }
        }
        out
    }

    fn values(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0)
            .collect()
    }

    /// The GEMM Conv on one thread and split into 2, 3 and 7 parts (column ranges crossing
    /// output rows) gives the direct convolution's result, and the same result on any number
    /// of threads: pointwise, strides, pads, dilations, groups, a batch, 1-D and 3-D, 1x1
    /// outputs, fewer positions than threads.
    #[test]
    fn split_conv_matches_one_thread_and_the_direct_sum() {
        type Case<'a> = (
            [usize; 4],
            &'a [usize],
            &'a [usize],
            &'a [usize],
            &'a [usize],
            (&'a [usize], &'a [usize]),
        );
        let cases: [Case; 9] = [
            (
                [1, 8, 6, 1],
                &[9, 11],
                &[1, 1],
                &[1, 1],
                &[1, 1],
                (&[0, 0], &[0, 0]),
            ),
            (
                [2, 6, 4, 2],
                &[10, 7],
                &[3, 3],
                &[2, 2],
                &[1, 1],
                (&[1, 1], &[1, 1]),
            ),
            (
                [1, 3, 5, 1],
                &[13, 12],
                &[3, 2],
                &[1, 3],
                &[2, 1],
                (&[2, 0], &[1, 2]),
            ),
            (
                [1, 4, 4, 4],
                &[8, 8],
                &[3, 3],
                &[1, 1],
                &[1, 1],
                (&[1, 1], &[1, 1]),
            ),
            ([1, 2, 3, 1], &[31], &[5], &[2], &[1], (&[2], &[2])),
            (
                [1, 2, 2, 1],
                &[4, 5, 6],
                &[2, 3, 2],
                &[1, 2, 1],
                &[1, 1, 2],
                (&[1, 0, 1], &[0, 1, 1]),
            ),
            (
                [1, 3, 2, 1],
                &[3, 3],
                &[3, 3],
                &[1, 1],
                &[1, 1],
                (&[0, 0], &[0, 0]),
            ),
            (
                [1, 2, 2, 1],
                &[2, 1],
                &[1, 1],
                &[1, 1],
                &[1, 1],
                (&[0, 0], &[0, 0]),
            ),
            // Taps that read nothing of some output rows (a kernel wider than the input).
            (
                [1, 1, 2, 1],
                &[3, 2],
                &[3, 5],
                &[1, 1],
                &[1, 1],
                (&[1, 2], &[1, 2]),
            ),
        ];
        for (dims, input, kernel, stride, dilation, pads) in cases {
            let [n, c, m, group] = dims;
            let w = geometry(input, kernel, stride, dilation, pads);
            let ivol: usize = input.iter().product();
            let x = values(n * c * ivol, 1);
            let wt = values(m * (c / group) * w.kernel_volume(), 2);
            let pvol = w.output_volume();
            let want = direct::<f64>(&x, &wt, &w, dims);
            let mut one = vec![0f32; n * m * pvol];
            {
                let mut rows: Vec<&mut [f32]> = one.chunks_exact_mut(pvol).collect();
                conv_columns(&x, &wt, &w, dims, (0, pvol), &mut rows).unwrap();
            }
            for (g, v) in one.iter().zip(&want) {
                assert!(
                    (*g as f64 - v).abs() < 1e-4,
                    "{dims:?} {input:?}: {g} vs {v}"
                );
            }
            for parts in [2, 3, 7] {
                let mut split = vec![0f32; n * m * pvol];
                conv_gemm_split(&x, &wt, &w, dims, parts, &mut split).unwrap();
                assert_eq!(split, one, "{dims:?} {input:?} in {parts} parts");
            }
        }
    }

    /// The depthwise kernel equals, bit for bit, each output element's sum of weight x input
    /// over its valid taps in (depth, row, column) order from 0 in f32 (what a faster kernel
    /// must keep): strides, pads, dilations, a channel multiplier, inputs narrower than the
    /// kernel, 1-D and 3-D, infinite weights and NaN inputs.
    #[test]
    fn depthwise_adds_each_tap_in_order() {
        type Case<'a> = (
            [usize; 3],
            &'a [usize],
            &'a [usize],
            &'a [usize],
            &'a [usize],
            (&'a [usize], &'a [usize]),
        );
        let cases: [Case; 7] = [
            (
                [1, 4, 4],
                &[7, 7],
                &[3, 3],
                &[1, 1],
                &[1, 1],
                (&[1, 1], &[1, 1]),
            ),
            (
                [2, 3, 6],
                &[9, 10],
                &[3, 3],
                &[2, 2],
                &[1, 1],
                (&[1, 1], &[1, 1]),
            ),
            (
                [1, 2, 2],
                &[8, 9],
                &[3, 3],
                &[1, 2],
                &[2, 2],
                (&[2, 0], &[1, 3]),
            ),
            (
                [1, 2, 2],
                &[6, 2],
                &[3, 3],
                &[1, 1],
                &[1, 1],
                (&[1, 1], &[1, 1]),
            ),
            (
                [1, 3, 3],
                &[5, 11],
                &[5, 5],
                &[1, 1],
                &[1, 1],
                (&[2, 2], &[2, 2]),
            ),
            ([1, 2, 4], &[17], &[3], &[3], &[1], (&[1], &[2])),
            (
                [1, 2, 2],
                &[4, 5, 6],
                &[3, 3, 3],
                &[1, 1, 2],
                &[1, 1, 1],
                (&[1, 1, 1], &[1, 1, 1]),
            ),
        ];
        for ([n, c, m], input, kernel, stride, dilation, pads) in cases {
            let w = geometry(input, kernel, stride, dilation, pads);
            let (ivol, kvol, pvol) = (w.input_volume(), w.kernel_volume(), w.output_volume());
            let mut x = values(n * c * ivol, 3);
            let mut wt = values(m * kvol, 4);
            x[1] = f32::NAN;
            wt[kvol + 2] = f32::INFINITY;
            let mut got = vec![0f32; n * m * pvol];
            depthwise(&x, &wt, &w, n, c, m, &mut got);
            let want = direct::<f32>(&x, &wt, &w, [n, c, m, c]);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{input:?} {kernel:?} {stride:?}");
        }
    }

    /// The padded depthwise pass equals the row pass (and the direct sum in f32) bit for bit
    /// for finite weights, in f32 and f16: rows of width 1, widths around and past the lane
    /// count, strides 1 to 3, dilations, symmetric, one-sided and no pads, kernels wider than
    /// the input, a channel multiplier, a batch, 1-D windows, NaN and infinite inputs, zero
    /// and negative weights.
    #[test]
    fn padded_depthwise_equals_the_row_pass() {
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let mut cases = 0;
        for (ih, iw) in [
            (1, 1),
            (2, 1),
            (5, 3),
            (3, 7),
            (4, 8),
            (6, 9),
            (14, 14),
            (7, 17),
        ] {
            for (kh, kw) in [(1, 1), (3, 3), (1, 3), (5, 5), (2, 3)] {
                for (stride, dilation) in [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2)] {
                    for (pb, pe) in [((0, 0), (0, 0)), ((1, 1), (1, 1)), ((2, 0), (0, 3))] {
                        let eff = |k: usize| dilation * (k - 1) + 1;
                        if ih + pb.0 + pe.0 < eff(kh) || iw + pb.1 + pe.1 < eff(kw) {
                            continue;
                        }
                        let one_d = ih == 1 && kh == 1 && pb.0 == 0 && pe.0 == 0;
                        let w = if one_d {
                            geometry(&[iw], &[kw], &[stride], &[dilation], (&[pb.1], &[pe.1]))
                        } else {
                            geometry(
                                &[ih, iw],
                                &[kh, kw],
                                &[if stride == 3 { 1 } else { stride }, stride],
                                &[dilation, dilation],
                                (&[pb.0, pb.1], &[pe.0, pe.1]),
                            )
                        };
                        let (n, c, m) = if cases % 3 == 0 { (2, 2, 4) } else { (1, 3, 3) };
                        let (ivol, kvol, pvol) =
                            (w.input_volume(), w.kernel_volume(), w.output_volume());
                        let mut x = values(n * c * ivol, cases + 5);
                        let mut wt = values(m * kvol, cases + 6);
                        let (xl, wl) = (x.len(), wt.len());
                        x[cases % xl] = f32::NAN;
                        x[(cases * 7 + 3) % xl] = f32::NEG_INFINITY;
                        wt[cases % wl] = 0.0;
                        let mut fast = vec![0f32; n * m * pvol];
                        depthwise_padded(&x, &wt, &w, n, c, m, &mut fast);
                        let mut rows = vec![0f32; n * m * pvol];
                        depthwise_rows(&x, &wt, &w, n, c, m, &mut rows);
                        let what = format!(
                            "{:?} {:?} {:?} {:?}",
                            w.input, w.kernel, w.stride, w.pad_begin
                        );
                        assert_eq!(bits(&fast), bits(&rows), "{what}");
                        let want = direct::<f32>(&x, &wt, &w, [n, c, m, c]);
                        assert_eq!(bits(&fast), bits(&want), "{what}");
                        let mut dispatched = vec![0f32; n * m * pvol];
                        depthwise(&x, &wt, &w, n, c, m, &mut dispatched);
                        assert_eq!(bits(&dispatched), bits(&want), "{what}");
                        let (xh, wh): (Vec<half::f16>, Vec<half::f16>) = (
                            x.iter().map(|&v| half::f16::from_f32(v)).collect(),
                            wt.iter().map(|&v| half::f16::from_f32(v)).collect(),
                        );
                        let mut fast = vec![half::f16::ZERO; n * m * pvol];
                        depthwise_padded(&xh, &wh, &w, n, c, m, &mut fast);
                        let mut rows = vec![half::f16::ZERO; n * m * pvol];
                        depthwise_rows(&xh, &wh, &w, n, c, m, &mut rows);
                        let hbits =
                            |v: &[half::f16]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(hbits(&fast), hbits(&rows), "f16 {what}");
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 400, "{cases} cases");
    }
}
