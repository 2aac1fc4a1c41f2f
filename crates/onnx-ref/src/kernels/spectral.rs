//! Spectral ops: DFT (opset 17: `axis` attribute; opset 20 on: `axis` input; forward and
//! inverse, onesided (an inverse onesided DFT is the real inverse, as numpy's irfft), real
//! `[..., 1]` or complex `[..., 2]` input, dft_length zero-pads or truncates), STFT (opset 17)
//! and MelWeightMatrix (opset 17).
//!
//! Transforms run in f64 with rustfft (O(n log n) for every length: radix for powers of two,
//! Rader/Bluestein for the rest) and are cast back to the input's type.

use num_complex::Complex64;
use rustfft::FftPlanner;

use super::{cast_tensor, one, unsupported};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{check_size, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "DFT", 17, 19, dft_17);
    reg.register("", "DFT", 20, LATEST, dft_20);
    reg.register("", "STFT", 17, LATEST, stft);
    reg.register("", "MelWeightMatrix", 17, LATEST, mel_weight_matrix);
}

/// Which transform a DFT node asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transform {
    /// Complex to complex, forward; `onesided` keeps bins `0..=len/2`.
    Forward { onesided: bool },
    /// Complex to complex, inverse, scaled by `1/len`.
    Inverse,
    /// Onesided spectrum to real signal (Hermitian extension, inverse, real part).
    InverseReal,
}

/// The shape of a signal tensor `[before..., n, after..., components]` around one axis.
#[derive(Debug, Clone, Copy)]
struct Lanes {
    before: usize,
    n: usize,
    after: usize,
    components: usize,
}

impl Lanes {
    fn new(ctx: &KernelCtx, shape: &[usize], axis: usize) -> Result<Lanes> {
        let rank = shape.len();
        let components = *shape
            .last()
            .ok_or_else(|| ctx.err("the signal must have rank >= 2"))?;
        if components != 1 && components != 2 {
            return Err(ctx.err(format!(
                "the last dimension must be 1 (real) or 2 (complex), got shape {shape:?}"
            )));
        }
        if axis + 1 >= rank {
            return Err(ctx.err(format!(
                "axis {axis} must not be the last (component) axis of shape {shape:?}"
            )));
        }
        Ok(Lanes {
            before: shape[..axis].iter().product(),
            n: shape[axis],
            after: shape[axis + 1..rank - 1].iter().product(),
            components,
        })
    }

    /// Sample `k` of lane (o, i) as a complex number.
    fn at(&self, data: &[f64], o: usize, k: usize, i: usize) -> Complex64 {
        let base = ((o * self.n + k) * self.after + i) * self.components;
        let re = data.get(base).copied().unwrap_or(0.0);
        let im = if self.components == 2 {
            data.get(base + 1).copied().unwrap_or(0.0)
        } else {
            0.0
        };
        Complex64::new(re, im)
    }
}

/// Runs `transform` of length `len` along the lanes of `data`; returns the output values in
/// `[before, out_len, after, out_components]` order with that output length.
fn transform_lanes(
    data: &[f64],
    lanes: &Lanes,
    len: usize,
    transform: Transform,
) -> Result<(Vec<f64>, usize, usize)> {
    let (out_len, out_comps) = match transform {
        Transform::Forward { onesided: true } => (len / 2 + 1, 2),
        Transform::Forward { onesided: false } | Transform::Inverse => (len, 2),
        Transform::InverseReal => (len, 1),
    };
    let count = lanes.before * lanes.after;
    check_size("DFT output", &[count, out_len, out_comps])?;
    let mut buffer = vec![Complex64::new(0.0, 0.0); count * len];
    // Input bins that feed the transform: all of them (up to len), or for the real inverse
    // the `len/2 + 1` stored bins of the Hermitian spectrum.
    let used = match transform {
        Transform::InverseReal => lanes.n.min(len / 2 + 1),
        _ => lanes.n.min(len),
    };
    for o in 0..lanes.before {
        for i in 0..lanes.after {
            let lane = &mut buffer[(o * lanes.after + i) * len..][..len];
            for (k, slot) in lane.iter_mut().enumerate().take(used) {
                *slot = lanes.at(data, o, k, i);
            }
            if transform == Transform::InverseReal {
                for k in len / 2 + 1..len {
                    lane[k] = lane[len - k].conj();
                }
            }
        }
    }
    if len > 0 && count > 0 {
        let mut planner = FftPlanner::<f64>::new();
        let fft = match transform {
            Transform::Forward { .. } => planner.plan_fft_forward(len),
            Transform::Inverse | Transform::InverseReal => planner.plan_fft_inverse(len),
        };
        fft.process(&mut buffer);
    }
    let scale = match transform {
        Transform::Forward { .. } => 1.0,
        _ => 1.0 / len as f64,
    };
    let mut out = vec![0.0; count * out_len * out_comps];
    for o in 0..lanes.before {
        for i in 0..lanes.after {
            let lane = &buffer[(o * lanes.after + i) * len..][..len];
            for (k, v) in lane.iter().enumerate().take(out_len) {
                let at = ((o * out_len + k) * lanes.after + i) * out_comps;
                out[at] = v.re * scale;
                if out_comps == 2 {
                    out[at + 1] = v.im * scale;
                }
            }
        }
    }
    Ok((out, out_len, out_comps))
}

/// A positive length from an optional scalar input.
fn opt_length(ctx: &KernelCtx, t: Option<&Tensor>, what: &str) -> Result<Option<usize>> {
    let Some(t) = t else { return Ok(None) };
    let v = t.to_i64_vec()?;
    match v.as_slice() {
        [n] if *n > 0 => Ok(Some(*n as usize)),
        [n] => Err(ctx.err(format!("{what} must be positive, got {n}"))),
        _ => Err(ctx.err(format!(
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        ))),
    }
}

fn float_input<'a>(ctx: &KernelCtx, t: &'a Tensor) -> Result<&'a Tensor> {
    if matches!(
        t.dtype(),
        DType::Float | DType::Double | DType::Float16 | DType::Bfloat16
    ) {
        Ok(t)
    } else {
        Err(unsupported(ctx, t))
    }
}

fn dft_17(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let axis = ctx.attr_int("axis", 1)?;
    dft(ctx, inputs, axis)
}

fn dft_20(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let axis = match ctx.opt_input(inputs, 2)? {
        None => -2,
        Some(t) => match t.to_i64_vec()?.as_slice() {
            [a] => *a,
            _ => return Err(ctx.err(format!("axis must be a scalar, got shape {:?}", t.shape()))),
        },
    };
    dft(ctx, inputs, axis)
}

fn dft(ctx: &KernelCtx, inputs: &[Option<&Value>], axis: i64) -> Result<Vec<Value>> {
    let x = float_input(ctx, ctx.input(inputs, 0)?)?;
    let rank = x.rank();
    if rank < 2 {
        return Err(ctx.err(format!(
            "input must have rank >= 2, got shape {:?}",
            x.shape()
        )));
    }
    // Valid axes are [-rank, -2] and [0, rank - 2].
    let r = rank as i64;
    if axis < -r || axis > r - 2 || axis == -1 {
        return Err(ctx.err(format!(
            "axis {axis} is out of range for rank {rank} (the last axis holds the components)"
        )));
    }
    let axis = axis.rem_euclid(r) as usize;
    let lanes = Lanes::new(ctx, x.shape(), axis)?;
    let inverse = ctx.attr_int("inverse", 0)? != 0;
    let onesided = ctx.attr_int("onesided", 0)? != 0;
    let transform = match (inverse, onesided) {
        (false, onesided) => Transform::Forward { onesided },
        (true, false) => Transform::Inverse,
        (true, true) => Transform::InverseReal,
    };
    let len = match opt_length(ctx, ctx.opt_input(inputs, 1)?, "dft_length")? {
        Some(n) => n,
        None if transform == Transform::InverseReal => {
            if lanes.n < 2 {
                return Err(ctx.err(format!(
                    "an inverse onesided DFT of {} bins needs dft_length",
                    lanes.n
                )));
            }
            2 * (lanes.n - 1)
        }
        None => lanes.n,
    };
    let data = x.to_f64_vec()?;
    let (out, out_len, out_comps) = transform_lanes(&data, &lanes, len, transform)?;
    let mut shape = x.shape().to_vec();
    shape[axis] = out_len;
    shape[rank - 1] = out_comps;
    one(cast_tensor(&Tensor::from_vec(&shape, out)?, x.dtype())?)
}

fn stft(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let signal = float_input(ctx, ctx.input(inputs, 0)?)?;
    let shape = signal.shape();
    if shape.len() != 3 || !(shape[2] == 1 || shape[2] == 2) {
        return Err(ctx.err(format!(
            "signal must have shape [batch, length, 1 or 2], got {shape:?}"
        )));
    }
    let step = opt_length(ctx, Some(ctx.input(inputs, 1)?), "frame_step")?
        .ok_or_else(|| ctx.err("frame_step is required"))?;
    let window = match ctx.opt_input(inputs, 2)? {
        Some(w) => {
            let w = float_input(ctx, w)?;
            if w.rank() != 1 {
                return Err(ctx.err(format!("window must be 1-D, got shape {:?}", w.shape())));
            }
            Some(w.to_f64_vec()?)
        }
        None => None,
    };
    let frame_length = opt_length(ctx, ctx.opt_input(inputs, 3)?, "frame_length")?;
    let frame = match (frame_length, &window) {
        (Some(n), Some(w)) if n != w.len() => {
            return Err(ctx.err(format!(
                "frame_length {n} differs from the window length {}",
                w.len()
            )))
        }
        (Some(n), _) => n,
        (None, Some(w)) => w.len(),
        (None, None) => shape[1],
    };
    let window = window.unwrap_or_else(|| vec![1.0; frame]);
    let onesided = ctx.attr_int("onesided", 1)? != 0;
    let (batch, length, comps) = (shape[0], shape[1], shape[2]);
    let frames = if length >= frame {
        (length - frame) / step + 1
    } else {
        0
    };
    let data = signal.to_f64_vec()?;
    // Gather the windowed frames as a [batch, frames, frame, comps] signal, then transform.
    check_size("STFT frames", &[batch, frames, frame, comps])?;
    let mut framed = Vec::with_capacity(batch * frames * frame * comps);
    for b in 0..batch {
        for f in 0..frames {
            for (k, w) in window.iter().enumerate() {
                let at = (b * length + f * step + k) * comps;
                for c in 0..comps {
                    framed.push(data.get(at + c).copied().unwrap_or(0.0) * w);
                }
            }
        }
    }
    let lanes = Lanes {
        before: batch * frames,
        n: frame,
        after: 1,
        components: comps,
    };
    let (out, bins, _) = transform_lanes(&framed, &lanes, frame, Transform::Forward { onesided })?;
    let out_shape = [batch, frames, bins, 2];
    one(cast_tensor(
        &Tensor::from_vec(&out_shape, out)?,
        signal.dtype(),
    )?)
}

/// A scalar integer input.
fn int_scalar(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize, what: &str) -> Result<i64> {
    let t = ctx.input(inputs, i)?;
    match t.to_i64_vec()?.as_slice() {
        [v] => Ok(*v),
        _ => Err(ctx.err(format!(
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        ))),
    }
}

/// A scalar float input, as f32 (the reference computes the mel edges in the input's f32).
fn float_scalar(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize, what: &str) -> Result<f32> {
    let t = float_input(ctx, ctx.input(inputs, i)?)?;
    match t.to_f64_vec()?.as_slice() {
        [v] => Ok(*v as f32),
        _ => Err(ctx.err(format!(
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        ))),
    }
}

fn mel_weight_matrix(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let mel_bins = int_scalar(ctx, inputs, 0, "num_mel_bins")?;
    let dft_length = int_scalar(ctx, inputs, 1, "dft_length")?;
    let sample_rate = int_scalar(ctx, inputs, 2, "sample_rate")?;
    let lower = float_scalar(ctx, inputs, 3, "lower_edge_hertz")?;
    let upper = float_scalar(ctx, inputs, 4, "upper_edge_hertz")?;
    if mel_bins < 0 || dft_length <= 0 || sample_rate <= 0 {
        return Err(ctx.err(format!(
            "need num_mel_bins >= 0, dft_length > 0 and sample_rate > 0, got {mel_bins}, {dft_length}, {sample_rate}"
        )));
    }
    let code = ctx.attr_int("output_datatype", DType::Float.code() as i64)?;
    let dtype = i32::try_from(code)
        .ok()
        .and_then(DType::from_code)
        .ok_or_else(|| ctx.err(format!("unknown output_datatype {code}")))?;
    let mel_bins = mel_bins as usize;
    let spectrogram_bins = (dft_length / 2 + 1) as usize;
    let out_shape = [spectrogram_bins, mel_bins];
    check_size("MelWeightMatrix output", &out_shape)?;
    let to_mel = |hz: f32| (2595.0f32 * (hz / 700.0).ln_1p()) as f64 / 10f64.ln();
    let (low_mel, high_mel) = (to_mel(lower), to_mel(upper));
    let step = (high_mel - low_mel) / (mel_bins + 2) as f64;
    let edges: Vec<i64> = (0..mel_bins + 2)
        .map(|i| {
            let mel = i as f64 * step + low_mel;
            let hz = 700.0 * (mel / 2595.0 * 10f64.ln()).exp_m1();
            (((dft_length + 1) as f64 * hz) / sample_rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0.0f64; spectrogram_bins * mel_bins];
    let mut set = |row: i64, col: usize, v: f64| -> Result<()> {
        let slot = usize::try_from(row)
            .ok()
            .filter(|&r| r < spectrogram_bins)
            .and_then(|r| out.get_mut(r * mel_bins + col))
            .ok_or_else(|| {
                ctx.err(format!(
                    "mel band {col} reaches frequency bin {row}, outside [0, {spectrogram_bins}): check the edge frequencies against sample_rate"
                ))
            })?;
        *slot = v;
        Ok(())
    };
    for (i, e) in edges.windows(3).enumerate() {
        let (left, center, right) = (e[0], e[1], e[2]);
        let rise = center - left;
        if rise == 0 {
            set(center, i, 1.0)?;
        } else {
            for j in left..=center {
                set(j, i, (j - left) as f64 / rise as f64)?;
            }
        }
        let fall = right - center;
        if fall > 0 {
            for j in center..right {
                set(j, i, (right - j) as f64 / fall as f64)?;
            }
        }
    }
    one(cast_tensor(&Tensor::from_vec(&out_shape, out)?, dtype)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_util::{int_attr, node, run, t};

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    /// The naive O(n^2) DFT of a real signal, as (re, im) pairs.
    fn naive_dft(x: &[f64], len: usize) -> Vec<f64> {
        let mut out = Vec::new();
        for k in 0..len {
            let (mut re, mut im) = (0.0, 0.0);
            for (j, v) in x.iter().enumerate().take(len) {
                let a = -2.0 * std::f64::consts::PI * (j * k) as f64 / len as f64;
                re += v * a.cos();
                im += v * a.sin();
            }
            out.extend([re, im]);
        }
        out
    }

    #[test]
    fn prime_length_matches_naive_dft_and_pads() {
        let x: Vec<f64> = vec![1.0, -2.0, 0.5, 3.0, 4.0];
        let n = node("DFT", &["x", "len"], vec![]);
        // dft_length 7 (prime, larger than the signal): zero-padded.
        let y = run(&n, 20, &[t(&[5, 1], x.clone()), t(&[], vec![7i64])])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y.shape(), &[7, 2]);
        assert!(close(
            &y.to_f64_vec().unwrap_or_default(),
            &naive_dft(&x, 7)
        ));
        // dft_length 3 truncates.
        let y = run(&n, 20, &[t(&[5, 1], x.clone()), t(&[], vec![3i64])])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(close(
            &y.to_f64_vec().unwrap_or_default(),
            &naive_dft(&x[..3], 3)
        ));
    }

    #[test]
    fn inverse_onesided_round_trips_a_real_signal() {
        let x: Vec<f64> = vec![0.5, 1.0, -1.5, 2.0, 0.0, 3.0];
        let fwd = node(
            "DFT",
            &["x"],
            vec![int_attr("onesided", 1), int_attr("axis", 0)],
        );
        let spec = run(&fwd, 17, &[t(&[6, 1], x.clone())]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.shape(), &[4, 2]);
        let inv = node(
            "DFT",
            &["x"],
            vec![
                int_attr("onesided", 1),
                int_attr("inverse", 1),
                int_attr("axis", 0),
            ],
        );
        let back = run(&inv, 17, &[Some(Value::Tensor(spec))]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.shape(), &[6, 1]);
        assert!(close(&back.to_f64_vec().unwrap_or_default(), &x));
    }

    #[test]
    fn axis_rules_differ_by_opset() {
        let x = t(&[2, 3, 1], vec![1f32; 6]);
        // Opset 17 defaults to axis 1; opset 20 defaults to -2 (the same axis here).
        let n17 = node("DFT", &["x"], vec![]);
        let a = run(&n17, 17, std::slice::from_ref(&x)).unwrap_or_else(|e| panic!("{e}"));
        let n20 = node("DFT", &["x"], vec![]);
        let b = run(&n20, 20, std::slice::from_ref(&x)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b);
        // The component axis is never a signal axis.
        let last = node("DFT", &["x", "", "axis"], vec![]);
        assert!(run(&last, 20, &[x.clone(), None, t(&[], vec![-1i64])]).is_err());
        assert!(run(&last, 20, &[x.clone(), None, t(&[], vec![2i64])]).is_err());
        let bad_len = node("DFT", &["x", "len"], vec![]);
        assert!(run(&bad_len, 20, &[x, t(&[], vec![0i64])]).is_err());
    }

    #[test]
    fn empty_batches_transform_to_empty() {
        let n = node("DFT", &["x"], vec![]);
        let y = run(&n, 20, &[t(&[0, 4, 1], Vec::<f64>::new())]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y.shape(), &[0, 4, 2]);
    }

    #[test]
    fn stft_frames_and_checks_window() {
        let signal: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let n = node("STFT", &["s", "step", "w", "len"], vec![]);
        let y = run(
            &n,
            17,
            &[
                t(&[1, 8, 1], signal.clone()),
                t(&[], vec![2i64]),
                None,
                t(&[], vec![4i64]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // Frames start at 0, 2, 4: three frames of 4 samples, 3 onesided bins.
        assert_eq!(y.shape(), &[1, 3, 3, 2]);
        let v = y.to_f64_vec().unwrap_or_default();
        // Bin 0 of frame 1 is the sum 2 + 3 + 4 + 5.
        assert_eq!(v[6], 14.0);
        let err = run(
            &n,
            17,
            &[
                t(&[1, 8, 1], signal),
                t(&[], vec![2i64]),
                t(&[3], vec![1f32; 3]),
                t(&[], vec![4i64]),
            ],
        );
        assert!(err.is_err());
    }

    #[test]
    fn mel_matrix_rejects_bands_past_nyquist() {
        let n = node("MelWeightMatrix", &["m", "d", "r", "lo", "hi"], vec![]);
        let ok = run(
            &n,
            17,
            &[
                t(&[], vec![4i64]),
                t(&[], vec![16i64]),
                t(&[], vec![8000i64]),
                t(&[], vec![0f32]),
                t(&[], vec![4000f32]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.shape(), &[9, 4]);
        let bad = run(
            &n,
            17,
            &[
                t(&[], vec![4i64]),
                t(&[], vec![16i64]),
                t(&[], vec![8000i64]),
                t(&[], vec![0f32]),
                t(&[], vec![40000f32]),
            ],
        );
        assert!(bad.is_err());
    }
}
