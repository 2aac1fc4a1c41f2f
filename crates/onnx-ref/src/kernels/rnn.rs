//! Recurrent layers: RNN, GRU and LSTM (every opset version: activations with their
//! alpha/beta, forward/reverse/bidirectional, sequence_lens, initial states, peepholes, clip,
//! linear_before_reset, input_forget, and `layout = 1` from opset 14).
//!
//! Computation runs in f32 (f64 for double inputs). The input projection of the whole sequence
//! is one GEMM per direction; each time step adds one GEMM of the hidden state by `R^T`.

use half::{bf16, f16};

use super::matmul::{GemmElem, MatRef};
use super::unsupported;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::AccFloat;
use crate::tensor::{array_from_vec, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "RNN", 1, LATEST, rnn);
    reg.register("", "GRU", 1, LATEST, gru);
    reg.register("", "LSTM", 1, LATEST, lstm);
}

/// An activation function of a recurrent cell, with its alpha/beta resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Activation {
    Relu,
    Tanh,
    Sigmoid,
    Affine(f64, f64),
    LeakyRelu(f64),
    ThresholdedRelu(f64),
    ScaledTanh(f64, f64),
    HardSigmoid(f64, f64),
    Elu(f64),
    Softsign,
    Softplus,
}

impl Activation {
    /// Parses an activation name, taking alpha/beta from the iterators when it uses them.
    fn parse(
        name: &str,
        alphas: &mut impl Iterator<Item = f64>,
        betas: &mut impl Iterator<Item = f64>,
    ) -> Option<Activation> {
        let mut alpha = |d: f64| alphas.next().unwrap_or(d);
        Some(match name.to_ascii_lowercase().as_str() {
            "relu" => Activation::Relu,
            "tanh" => Activation::Tanh,
            "sigmoid" => Activation::Sigmoid,
            "affine" => Activation::Affine(alpha(1.0), betas.next().unwrap_or(0.0)),
            "leakyrelu" => Activation::LeakyRelu(alpha(0.01)),
            "thresholdedrelu" => Activation::ThresholdedRelu(alpha(1.0)),
            "scaledtanh" => Activation::ScaledTanh(alpha(1.0), betas.next().unwrap_or(1.0)),
            "hardsigmoid" => Activation::HardSigmoid(alpha(0.2), betas.next().unwrap_or(0.5)),
            "elu" => Activation::Elu(alpha(1.0)),
            "softsign" => Activation::Softsign,
            "softplus" => Activation::Softplus,
            _ => return None,
        })
    }

    /// Applies the activation to every element of `xs` (one dispatch per slice).
    fn apply<A: AccFloat>(self, xs: &mut [A]) {
        let one = A::lit(1.0);
        match self {
            Activation::Relu => xs.iter_mut().for_each(|x| *x = x.max(A::lit(0.0))),
            Activation::Tanh => xs.iter_mut().for_each(|x| *x = x.tanh()),
            Activation::Sigmoid => xs.iter_mut().for_each(|x| *x = one / (one + (-*x).exp())),
            Activation::Affine(a, b) => {
                let (a, b) = (A::lit(a), A::lit(b));
                xs.iter_mut().for_each(|x| *x = a * *x + b)
            }
            Activation::LeakyRelu(a) => {
                let a = A::lit(a);
                xs.iter_mut()
                    .for_each(|x| *x = if *x < A::lit(0.0) { a * *x } else { *x })
            }
            Activation::ThresholdedRelu(a) => {
                let a = A::lit(a);
                xs.iter_mut()
                    .for_each(|x| *x = if *x > a { *x } else { A::lit(0.0) })
            }
            Activation::ScaledTanh(a, b) => {
                let (a, b) = (A::lit(a), A::lit(b));
                xs.iter_mut().for_each(|x| *x = a * (b * *x).tanh())
            }
            Activation::HardSigmoid(a, b) => {
                let (a, b) = (A::lit(a), A::lit(b));
                xs.iter_mut()
                    .for_each(|x| *x = (a * *x + b).max(A::lit(0.0)).min(one))
            }
            Activation::Elu(a) => {
                let a = A::lit(a);
                xs.iter_mut().for_each(|x| {
                    *x = if *x < A::lit(0.0) {
                        a * (x.exp() - one)
                    } else {
                        *x
                    }
                })
            }
            Activation::Softsign => xs.iter_mut().for_each(|x| *x = *x / (one + x.abs())),
            Activation::Softplus => xs.iter_mut().for_each(|x| *x = (one + x.exp()).ln()),
        }
    }
}

/// Which recurrent cell a node computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CellKind {
    Rnn,
    Gru { linear_before_reset: bool },
    Lstm { input_forget: bool },
}

impl CellKind {
    /// Gates per cell (rows of W per hidden unit).
    fn gates(self) -> usize {
        match self {
            CellKind::Rnn => 1,
            CellKind::Gru { .. } => 3,
            CellKind::Lstm { .. } => 4,
        }
    }

    /// Activation functions per direction, and their defaults.
    fn default_activations(self) -> &'static [&'static str] {
        match self {
            CellKind::Rnn => &["Tanh"],
            CellKind::Gru { .. } => &["Sigmoid", "Tanh"],
            CellKind::Lstm { .. } => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// The attributes and dimensions of a recurrent node.
#[derive(Debug, Clone)]
struct RecurrentSpec {
    kind: CellKind,
    hidden: usize,
    input_size: usize,
    seq_len: usize,
    batch: usize,
    /// One entry per direction: true when it runs backwards in time.
    reverse: Vec<bool>,
    /// Activation functions, per direction.
    activations: Vec<Vec<Activation>>,
    clip: Option<f64>,
    batch_major: bool,
}

/// Reads attributes and checks input shapes.
fn read_spec(ctx: &KernelCtx, kind: CellKind, x: &Tensor, w: &Tensor) -> Result<RecurrentSpec> {
    let batch_major = if ctx.opset >= 14 {
        match ctx.attr_int("layout", 0)? {
            0 => false,
            1 => true,
            l => return Err(ctx.err(format!("layout must be 0 or 1, got {l}"))),
        }
    } else {
        false
    };
    let reverse = match ctx.attr_string("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(ctx.err(format!("unknown direction '{other}'"))),
    };
    let dirs = reverse.len();
    let (seq_len, batch, input_size) = match x.shape() {
        [a, b, i] if batch_major => (*b, *a, *i),
        [s, b, i] => (*s, *b, *i),
        s => return Err(ctx.err(format!("X must have rank 3, got {s:?}"))),
    };
    let g = kind.gates();
    let hidden = match w.shape() {
        [d, gh, i] if *d == dirs && *i == input_size && gh % g == 0 => gh / g,
        s => {
            return Err(ctx.err(format!(
                "W {s:?} must be [{dirs}, {g} * hidden_size, {input_size}]"
            )))
        }
    };
    if let Some(h) = ctx.attr_opt_int("hidden_size")? {
        if h < 0 || h as usize != hidden {
            return Err(ctx.err(format!("hidden_size {h} does not match W {:?}", w.shape())));
        }
    }
    let names = ctx.attr_strings("activations").unwrap_or_default();
    let per_dir = kind.default_activations().len();
    let names: Vec<String> = if names.is_empty() {
        let defaults = kind.default_activations().iter().map(|s| s.to_string());
        defaults.cycle().take(per_dir * dirs).collect()
    } else if names.len() == per_dir * dirs {
        names
    } else if names.len() == per_dir {
        names.iter().cycle().take(per_dir * dirs).cloned().collect()
    } else {
        return Err(ctx.err(format!(
            "{} activations given, expected {per_dir} per direction",
            names.len()
        )));
    };
    let mut alphas = ctx
        .attr_floats("activation_alpha")
        .unwrap_or_default()
        .iter()
        .map(|&v| v as f64);
    let mut betas = ctx
        .attr_floats("activation_beta")
        .unwrap_or_default()
        .iter()
        .map(|&v| v as f64);
    let mut activations = Vec::with_capacity(dirs);
    for chunk in names.chunks(per_dir) {
        let mut acts = Vec::with_capacity(per_dir);
        for name in chunk {
            acts.push(
                Activation::parse(name, &mut alphas, &mut betas)
                    .ok_or_else(|| ctx.err(format!("unknown activation '{name}'")))?,
            );
        }
        activations.push(acts);
    }
    let clip = match ctx.attr_opt_float("clip")? {
        Some(c) if c > 0.0 => Some(c as f64),
        Some(c) => return Err(ctx.err(format!("clip must be positive, got {c}"))),
        None => None,
    };
    Ok(RecurrentSpec {
        kind,
        hidden,
        input_size,
        seq_len,
        batch,
        reverse,
        activations,
        clip,
        batch_major,
    })
}

/// The tensor's values in the compute type `A`, row-major.
fn acc_values<A: AccFloat>(t: &Tensor) -> Result<Vec<A>> {
    Ok(match t {
        Tensor::F32(a) => a.iter().map(|&v| A::lit(v as f64)).collect(),
        Tensor::F64(a) => a.iter().map(|&v| A::lit(v)).collect(),
        Tensor::F16(a) => a.iter().map(|v| A::lit(v.to_f64())).collect(),
        Tensor::BF16(a) => a.iter().map(|v| A::lit(v.to_f64())).collect(),
        other => {
            return Err(RefError::op(format!(
                "expected a float tensor, found {}",
                other.dtype()
            )))
        }
    })
}

/// A tensor of the dtype of `like` from compute-type values.
fn from_acc<A: AccFloat>(like: &Tensor, shape: &[usize], v: Vec<A>) -> Result<Tensor> {
    Ok(match like {
        Tensor::F64(_) => Tensor::F64(array_from_vec(
            shape,
            v.iter().map(|x| x.as_f64()).collect(),
        )?),
        Tensor::F16(_) => Tensor::F16(array_from_vec(
            shape,
            v.iter().map(|x| f16::from_f64(x.as_f64())).collect(),
        )?),
        Tensor::BF16(_) => Tensor::BF16(array_from_vec(
            shape,
            v.iter().map(|x| bf16::from_f64(x.as_f64())).collect(),
        )?),
        _ => Tensor::F32(array_from_vec(
            shape,
            v.iter().map(|x| x.as_f64() as f32).collect(),
        )?),
    })
}

/// Checks an optional input's shape and reads it, or fills `len` zeros.
fn optional_values<A: AccFloat>(
    ctx: &KernelCtx,
    t: Option<&Tensor>,
    want: &[usize],
    what: &str,
) -> Result<Option<Vec<A>>> {
    match t {
        None => Ok(None),
        Some(t) if t.shape() == want => Ok(Some(acc_values(t)?)),
        Some(t) => Err(ctx.err(format!("{what} {:?} must be {want:?}", t.shape()))),
    }
}

/// The outputs of a recurrent layer in time-major layout: Y [seq, dirs, batch, hidden],
/// Y_h and Y_c [dirs, batch, hidden].
struct RecurrentOutputs<A> {
    y: Vec<A>,
    y_h: Vec<A>,
    y_c: Vec<A>,
}

/// Clamps pre-activations to `[-clip, clip]`.
fn clip_slice<A: AccFloat>(xs: &mut [A], clip: Option<f64>) {
    if let Some(c) = clip {
        let (lo, hi) = (A::lit(-c), A::lit(c));
        xs.iter_mut().for_each(|x| *x = x.max(lo).min(hi));
    }
}

/// The inputs of a recurrent layer in compute type, already validated.
struct RecurrentInputs<A> {
    /// X in time-major layout [seq, batch, input].
    x: Vec<A>,
    w: Vec<A>,
    r: Vec<A>,
    /// [dirs, 2 * gates * hidden]: Wb then Rb.
    b: Vec<A>,
    /// Time steps per batch entry.
    lens: Vec<usize>,
    /// [dirs, batch, hidden].
    h0: Vec<A>,
    c0: Vec<A>,
    /// [dirs, 3 * hidden] peepholes (i, o, f).
    p: Vec<A>,
}

/// Moves axes 0 and 1 of a row-major 3-D or 4-D buffer: [a, b, rest] -> [b, a, rest].
fn swap_leading<A: Copy>(v: &[A], a: usize, b: usize, rest: usize) -> Vec<A> {
    let mut out = Vec::with_capacity(v.len());
    for j in 0..b {
        for i in 0..a {
            out.extend_from_slice(&v[(i * b + j) * rest..][..rest]);
        }
    }
    out
}

/// Runs every direction of the layer.
fn run_layer<A: AccFloat + GemmElem>(
    spec: &RecurrentSpec,
    inp: &RecurrentInputs<A>,
) -> Result<RecurrentOutputs<A>> {
    let (s_len, batch, hid, isz) = (spec.seq_len, spec.batch, spec.hidden, spec.input_size);
    let dirs = spec.reverse.len();
    let g = spec.kind.gates();
    let gh = g * hid;
    let mut y = vec![A::lit(0.0); s_len * dirs * batch * hid];
    let mut y_h = vec![A::lit(0.0); dirs * batch * hid];
    let mut y_c = vec![A::lit(0.0); dirs * batch * hid];
    let mut xw = vec![A::lit(0.0); s_len * batch * gh];
    let mut hr = vec![A::lit(0.0); batch * gh];
    let mut gate = vec![A::lit(0.0); gh];
    let mut rh = vec![A::lit(0.0); batch * hid];
    for d in 0..dirs {
        let acts = &spec.activations[d];
        let w = &inp.w[d * gh * isz..][..gh * isz];
        let r = &inp.r[d * gh * hid..][..gh * hid];
        let wb = &inp.b[d * 2 * gh..][..gh];
        let rb = &inp.b[d * 2 * gh + gh..][..gh];
        let p = &inp.p[d * 3 * hid..][..3 * hid];
        // X · W^T for every time step at once, plus the input bias.
        A::gemm(
            s_len * batch,
            isz,
            gh,
            A::lit(1.0),
            MatRef {
                data: &inp.x,
                rs: isz,
                cs: 1,
            },
            MatRef {
                data: w,
                rs: 1,
                cs: isz,
            },
            A::lit(0.0),
            &mut xw,
        )?;
        for row in xw.chunks_mut(gh.max(1)) {
            row.iter_mut().zip(wb).for_each(|(v, b)| *v = *v + *b);
        }
        let mut h = inp.h0[d * batch * hid..][..batch * hid].to_vec();
        let mut c = inp.c0[d * batch * hid..][..batch * hid].to_vec();
        // GRU without linear_before_reset multiplies the reset gate into H before R_h.
        let gru_reset_first = matches!(
            spec.kind,
            CellKind::Gru {
                linear_before_reset: false
            }
        );
        let rec_cols = if gru_reset_first { 2 * hid } else { gh };
        for step in 0..s_len {
            A::gemm(
                batch,
                hid,
                rec_cols,
                A::lit(1.0),
                MatRef {
                    data: &h,
                    rs: hid,
                    cs: 1,
                },
                MatRef {
                    data: r,
                    rs: 1,
                    cs: hid,
                },
                A::lit(0.0),
                &mut hr[..batch * rec_cols],
            )?;
            if gru_reset_first {
                // rh = r ⊙ h per batch, then rh · R_h^T into columns 2H..3H.
                for b in 0..batch {
                    if step >= inp.lens[b] {
                        continue;
                    }
                    let t = if spec.reverse[d] {
                        inp.lens[b] - 1 - step
                    } else {
                        step
                    };
                    let pre = &mut gate[..hid];
                    let xrow = &xw[(t * batch + b) * gh..][..gh];
                    let hrow = &hr[b * rec_cols..][..rec_cols];
                    for j in 0..hid {
                        pre[j] = xrow[hid + j] + hrow[hid + j] + rb[hid + j];
                    }
                    clip_slice(pre, spec.clip);
                    acts[0].apply(pre);
                    for j in 0..hid {
                        rh[b * hid + j] = pre[j] * h[b * hid + j];
                    }
                }
                let mut rh_r = vec![A::lit(0.0); batch * hid];
                A::gemm(
                    batch,
                    hid,
                    hid,
                    A::lit(1.0),
                    MatRef {
                        data: &rh,
                        rs: hid,
                        cs: 1,
                    },
                    MatRef {
                        data: &r[2 * hid * hid..],
                        rs: 1,
                        cs: hid,
                    },
                    A::lit(0.0),
                    &mut rh_r,
                )?;
                // Re-lay hr as [batch, 3H] with the R_h product in the last H columns.
                let mut full = vec![A::lit(0.0); batch * gh];
                for b in 0..batch {
                    full[b * gh..][..2 * hid].copy_from_slice(&hr[b * 2 * hid..][..2 * hid]);
                    full[b * gh + 2 * hid..][..hid].copy_from_slice(&rh_r[b * hid..][..hid]);
                }
                hr.copy_from_slice(&full);
            }
            for b in 0..batch {
                if step >= inp.lens[b] {
                    continue;
                }
                let t = if spec.reverse[d] {
                    inp.lens[b] - 1 - step
                } else {
                    step
                };
                let xrow = &xw[(t * batch + b) * gh..][..gh];
                let hrow = &hr[b * gh..][..gh];
                let hb = &mut h[b * hid..][..hid];
                let cb = &mut c[b * hid..][..hid];
                match spec.kind {
                    CellKind::Rnn => {
                        for j in 0..hid {
                            gate[j] = xrow[j] + hrow[j] + rb[j];
                        }
                        clip_slice(&mut gate[..hid], spec.clip);
                        acts[0].apply(&mut gate[..hid]);
                        hb.copy_from_slice(&gate[..hid]);
                    }
                    CellKind::Gru {
                        linear_before_reset,
                    } => {
                        let (zr, hh) = gate.split_at_mut(2 * hid);
                        for j in 0..2 * hid {
                            zr[j] = xrow[j] + hrow[j] + rb[j];
                        }
                        clip_slice(zr, spec.clip);
                        acts[0].apply(zr);
                        let (z, rg) = zr.split_at(hid);
                        for j in 0..hid {
                            let rec = if linear_before_reset {
                                rg[j] * (hrow[2 * hid + j] + rb[2 * hid + j])
                            } else {
                                hrow[2 * hid + j] + rb[2 * hid + j]
                            };
                            hh[j] = xrow[2 * hid + j] + rec;
                        }
                        clip_slice(&mut hh[..hid], spec.clip);
                        acts[1].apply(&mut hh[..hid]);
                        for j in 0..hid {
                            hb[j] = (A::lit(1.0) - z[j]) * hh[j] + z[j] * hb[j];
                        }
                    }
                    CellKind::Lstm { input_forget } => {
                        for j in 0..gh {
                            gate[j] = xrow[j] + hrow[j] + rb[j];
                        }
                        let (i_g, rest) = gate.split_at_mut(hid);
                        let (o_g, rest) = rest.split_at_mut(hid);
                        let (f_g, c_g) = rest.split_at_mut(hid);
                        for j in 0..hid {
                            i_g[j] = i_g[j] + p[j] * cb[j];
                            f_g[j] = f_g[j] + p[2 * hid + j] * cb[j];
                        }
                        clip_slice(i_g, spec.clip);
                        clip_slice(f_g, spec.clip);
                        clip_slice(c_g, spec.clip);
                        acts[0].apply(i_g);
                        if input_forget {
                            for j in 0..hid {
                                f_g[j] = A::lit(1.0) - i_g[j];
                            }
                        } else {
                            acts[0].apply(f_g);
                        }
                        acts[1].apply(c_g);
                        for j in 0..hid {
                            cb[j] = f_g[j] * cb[j] + i_g[j] * c_g[j];
                            o_g[j] = o_g[j] + p[hid + j] * cb[j];
                        }
                        clip_slice(o_g, spec.clip);
                        acts[0].apply(o_g);
                        let hc = &mut c_g[..hid];
                        hc.copy_from_slice(cb);
                        acts[2].apply(hc);
                        for j in 0..hid {
                            hb[j] = o_g[j] * hc[j];
                        }
                    }
                }
                y[((t * dirs + d) * batch + b) * hid..][..hid].copy_from_slice(hb);
            }
        }
        y_h[d * batch * hid..][..batch * hid].copy_from_slice(&h);
        y_c[d * batch * hid..][..batch * hid].copy_from_slice(&c);
    }
    Ok(RecurrentOutputs { y, y_h, y_c })
}

/// Reads and validates every input, runs the layer, and lays out the outputs.
fn recurrent_in<A: AccFloat + GemmElem>(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    kind: CellKind,
) -> Result<Vec<Value>> {
    let x_t = ctx.input(inputs, 0)?;
    let w_t = ctx.input(inputs, 1)?;
    let r_t = ctx.input(inputs, 2)?;
    let spec = read_spec(ctx, kind, x_t, w_t)?;
    let (s_len, batch, hid) = (spec.seq_len, spec.batch, spec.hidden);
    let dirs = spec.reverse.len();
    let gh = kind.gates() * hid;
    for (i, t) in [w_t, r_t].iter().enumerate() {
        if t.dtype() != x_t.dtype() {
            return Err(ctx.err(format!(
                "input {} has type {} but X has {}",
                i + 1,
                t.dtype(),
                x_t.dtype()
            )));
        }
    }
    if r_t.shape() != [dirs, gh, hid] {
        return Err(ctx.err(format!("R {:?} must be [{dirs}, {gh}, {hid}]", r_t.shape())));
    }
    let state_shape = if spec.batch_major {
        [batch, dirs, hid]
    } else {
        [dirs, batch, hid]
    };
    let mut x = acc_values::<A>(x_t)?;
    if spec.batch_major {
        x = swap_leading(&x, batch, s_len, spec.input_size);
    }
    let b = optional_values(ctx, ctx.opt_input(inputs, 3)?, &[dirs, 2 * gh], "B")?
        .unwrap_or_else(|| vec![A::lit(0.0); dirs * 2 * gh]);
    let lens = match ctx.opt_input(inputs, 4)? {
        None => vec![s_len; batch],
        Some(t) => {
            let v = t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
            if v.len() != batch {
                return Err(ctx.err(format!(
                    "sequence_lens has {} values for batch {batch}",
                    v.len()
                )));
            }
            v.iter()
                .map(|&l| {
                    usize::try_from(l)
                        .ok()
                        .filter(|&l| l <= s_len)
                        .ok_or_else(|| {
                            ctx.err(format!("sequence length {l} is outside [0, {s_len}]"))
                        })
                })
                .collect::<Result<Vec<usize>>>()?
        }
    };
    let read_state = |i: usize, what: &str| -> Result<Vec<A>> {
        let v = optional_values(ctx, ctx.opt_input(inputs, i)?, &state_shape, what)?
            .unwrap_or_else(|| vec![A::lit(0.0); dirs * batch * hid]);
        Ok(if spec.batch_major {
            swap_leading(&v, batch, dirs, hid)
        } else {
            v
        })
    };
    let h0 = read_state(5, "initial_h")?;
    let (c0, p) = if matches!(kind, CellKind::Lstm { .. }) {
        let c0 = read_state(6, "initial_c")?;
        let p = optional_values(ctx, ctx.opt_input(inputs, 7)?, &[dirs, 3 * hid], "P")?
            .unwrap_or_else(|| vec![A::lit(0.0); dirs * 3 * hid]);
        (c0, p)
    } else {
        (
            vec![A::lit(0.0); dirs * batch * hid],
            vec![A::lit(0.0); dirs * 3 * hid],
        )
    };
    let inp = RecurrentInputs {
        x,
        w: acc_values(w_t)?,
        r: acc_values(r_t)?,
        b,
        lens,
        h0,
        c0,
        p,
    };
    let out = run_layer(&spec, &inp)?;
    let (y, y_shape, y_h, y_c) = if spec.batch_major {
        // Time-major Y [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden].
        let mut y = Vec::with_capacity(out.y.len());
        for b in 0..batch {
            for t in 0..s_len {
                for d in 0..dirs {
                    y.extend_from_slice(&out.y[((t * dirs + d) * batch + b) * hid..][..hid]);
                }
            }
        }
        (
            y,
            vec![batch, s_len, dirs, hid],
            swap_leading(&out.y_h, dirs, batch, hid),
            swap_leading(&out.y_c, dirs, batch, hid),
        )
    } else {
        (out.y, vec![s_len, dirs, batch, hid], out.y_h, out.y_c)
    };
    let mut outs = vec![
        Value::Tensor(from_acc(x_t, &y_shape, y)?),
        Value::Tensor(from_acc(x_t, &state_shape, y_h)?),
    ];
    if matches!(kind, CellKind::Lstm { .. }) {
        outs.push(Value::Tensor(from_acc(x_t, &state_shape, y_c)?));
    }
    Ok(outs)
}

fn recurrent(ctx: &KernelCtx, inputs: &[Option<&Value>], kind: CellKind) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    match x {
        Tensor::F64(_) => recurrent_in::<f64>(ctx, inputs, kind),
        Tensor::F32(_) | Tensor::F16(_) | Tensor::BF16(_) => recurrent_in::<f32>(ctx, inputs, kind),
        other => Err(unsupported(ctx, other)),
    }
}

fn rnn(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    recurrent(ctx, inputs, CellKind::Rnn)
}

fn gru(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let linear_before_reset = ctx.opset >= 3 && ctx.attr_int("linear_before_reset", 0)? != 0;
    recurrent(
        ctx,
        inputs,
        CellKind::Gru {
            linear_before_reset,
        },
    )
}

fn lstm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let input_forget = ctx.attr_int("input_forget", 0)? != 0;
    recurrent(ctx, inputs, CellKind::Lstm { input_forget })
}

#[cfg(test)]
mod tests;
