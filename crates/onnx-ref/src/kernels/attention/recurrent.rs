//! Recurrent sequence mixers (opset 27): LinearAttention (linear, gated, delta and
//! gated-delta state updates, with grouped key/value heads) and CausalConvWithState (a
//! depthwise causal 1-D convolution carrying its last `k - 1` inputs as state, with an
//! optional fused SiLU). Both compute in f32, as the reference does, and round once to the
//! output type.

use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::cast_tensor;
use crate::tensor::Tensor;
use crate::value::Value;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "LinearAttention", 27, LATEST, linear_attention);
    reg.register(
        "",
        "CausalConvWithState",
        27,
        LATEST,
        causal_conv_with_state,
    );
}

/// A float tensor's values as f32 (row-major), or an error naming the input.
fn f32_values(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<Vec<f32>> {
    let d = t.dtype();
    if !matches!(
        d,
        DType::Float | DType::Float16 | DType::Bfloat16 | DType::Double
    ) {
        return Err(ctx.err(format!("{what} must be a float tensor, got {d}")));
    }
    Ok(t.to_f64_vec()?.into_iter().map(|v| v as f32).collect())
}

/// An f32 result cast to `dtype`.
fn output(shape: &[usize], data: Vec<f32>, dtype: DType) -> Result<Value> {
    let t = Tensor::from_vec(shape, data)?;
    Ok(Value::Tensor(if dtype == DType::Float {
        t
    } else {
        cast_tensor(&t, dtype)?
    }))
}

/// The state update LinearAttention applies per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UpdateRule {
    gating: bool,
    delta: bool,
}

/// The dims of a LinearAttention problem.
#[derive(Debug, Clone, Copy)]
struct LinearDims {
    batch: usize,
    steps: usize,
    q_heads: usize,
    kv_heads: usize,
    dk: usize,
    dv: usize,
}

fn linear_attention(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let q = ctx.input(inputs, 0)?;
    let k = ctx.input(inputs, 1)?;
    let v = ctx.input(inputs, 2)?;
    let past = ctx.opt_input(inputs, 3)?;
    let decay = ctx.opt_input(inputs, 4)?;
    let beta = ctx.opt_input(inputs, 5)?;
    let rule_name = ctx.attr_string("update_rule", "gated_delta")?;
    let rule = match rule_name.as_str() {
        "linear" => UpdateRule {
            gating: false,
            delta: false,
        },
        "gated" => UpdateRule {
            gating: true,
            delta: false,
        },
        "delta" => UpdateRule {
            gating: false,
            delta: true,
        },
        "gated_delta" => UpdateRule {
            gating: true,
            delta: true,
        },
        r => {
            return Err(ctx.err(format!(
                "update_rule '{r}' is not linear, gated, delta or gated_delta"
            )))
        }
    };
    if rule.gating != decay.is_some() {
        return Err(ctx.err(format!(
            "update_rule '{rule_name}' {} the decay input",
            if rule.gating { "requires" } else { "forbids" }
        )));
    }
    if rule.delta != beta.is_some() {
        return Err(ctx.err(format!(
            "update_rule '{rule_name}' {} the beta input",
            if rule.delta { "requires" } else { "forbids" }
        )));
    }
    let q_heads = ctx.attr_int("q_num_heads", 0)?;
    let kv_heads = ctx.attr_int("kv_num_heads", 0)?;
    if q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0 {
        return Err(ctx.err(format!(
            "q_num_heads ({q_heads}) must be a positive multiple of kv_num_heads ({kv_heads})"
        )));
    }
    let (q_heads, kv_heads) = (q_heads as usize, kv_heads as usize);
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs.len() != 3 || ks.len() != 3 || vs.len() != 3 {
        return Err(ctx.err(format!(
            "query, key and value must be rank 3, got {qs:?}, {ks:?} and {vs:?}"
        )));
    }
    let (batch, steps) = (qs[0], qs[1]);
    let dk = if qs[2] % q_heads == 0 {
        qs[2] / q_heads
    } else {
        0
    };
    let dv = if vs[2] % kv_heads == 0 {
        vs[2] / kv_heads
    } else {
        0
    };
    let same_bt = |s: &[usize]| s[0] == batch && s[1] == steps;
    if qs[2] % q_heads != 0
        || vs[2] % kv_heads != 0
        || ks[2] != kv_heads * dk
        || !same_bt(ks)
        || !same_bt(vs)
    {
        return Err(ctx.err(format!(
            "query {qs:?}, key {ks:?} and value {vs:?} do not fit {q_heads} query and \
             {kv_heads} key/value heads"
        )));
    }
    let dims = LinearDims {
        batch,
        steps,
        q_heads,
        kv_heads,
        dk,
        dv,
    };
    let side =
        |t: Option<&Tensor>, what: &str, widths: &[usize]| -> Result<Option<(Vec<f32>, usize)>> {
            let Some(t) = t else { return Ok(None) };
            let s = t.shape();
            if s.len() != 3 || !same_bt(s) || !widths.contains(&s[2]) {
                return Err(ctx.err(format!(
                    "{what} of shape {s:?} must be ({batch}, {steps}, one of {widths:?})"
                )));
            }
            Ok(Some((f32_values(ctx, t, what)?, s[2])))
        };
    let decay = side(decay, "decay", &[kv_heads, kv_heads * dk])?;
    let beta = side(beta, "beta", &[kv_heads, 1])?;
    let state_shape = [batch, kv_heads, dk, dv];
    let (mut state, state_dtype) = match past {
        Some(p) if p.shape() != state_shape => {
            return Err(ctx.err(format!(
                "past_state of shape {:?} must be {state_shape:?}",
                p.shape()
            )))
        }
        Some(p) => (f32_values(ctx, p, "past_state")?, p.dtype()),
        None => (vec![0.0; batch * kv_heads * dk * dv], q.dtype()),
    };
    let scale = ctx.attr_float("scale", 0.0)?;
    let scale = if scale == 0.0 {
        1.0 / (dk as f32).sqrt()
    } else {
        scale
    };
    let qv = f32_values(ctx, q, "query")?;
    let kv = f32_values(ctx, k, "key")?;
    let vv = f32_values(ctx, v, "value")?;
    let out = linear_recurrence(
        dims,
        [&qv, &kv, &vv],
        decay.as_ref().map(|(d, w)| (d.as_slice(), *w)),
        beta.as_ref().map(|(b, w)| (b.as_slice(), *w)),
        &mut state,
        scale,
    );
    Ok(vec![
        output(&[batch, steps, q_heads * dv], out, q.dtype())?,
        output(&state_shape, state, state_dtype)?,
    ])
}

/// Runs the recurrence over all steps, updating `state` `(batch, kv_heads, dk, dv)` in place
/// and returning the output `(batch, steps, q_heads * dv)`. `decay` and `beta` come with the
/// width of their last axis.
fn linear_recurrence(
    dims: LinearDims,
    [q, k, v]: [&[f32]; 3],
    decay: Option<(&[f32], usize)>,
    beta: Option<(&[f32], usize)>,
    state: &mut [f32],
    scale: f32,
) -> Vec<f32> {
    let LinearDims {
        batch,
        steps,
        q_heads,
        kv_heads,
        dk,
        dv,
    } = dims;
    let group = q_heads / kv_heads;
    let mut out = vec![0.0f32; batch * steps * q_heads * dv];
    let mut v_t = vec![0.0f32; dv];
    for b in 0..batch {
        for h in 0..kv_heads {
            let s = &mut state[(b * kv_heads + h) * dk * dv..][..dk * dv];
            for t in 0..steps {
                let row = b * steps + t;
                let k_t = &k[(row * kv_heads + h) * dk..][..dk];
                v_t.copy_from_slice(&v[(row * kv_heads + h) * dv..][..dv]);
                if let Some((g, width)) = decay {
                    for d in 0..dk {
                        let gd = if width == kv_heads {
                            g[row * width + h]
                        } else {
                            g[row * width + h * dk + d]
                        };
                        let f = gd.exp();
                        for x in &mut s[d * dv..(d + 1) * dv] {
                            *x *= f;
                        }
                    }
                }
                if let Some((bt, width)) = beta {
                    let bv = bt[row * width + if width == 1 { 0 } else { h }];
                    for (m, x) in v_t.iter_mut().enumerate() {
                        let retrieved: f32 = (0..dk).map(|d| s[d * dv + m] * k_t[d]).sum();
                        *x = bv * (*x - retrieved);
                    }
                }
                for (d, &kd) in k_t.iter().enumerate() {
                    for (x, &vm) in s[d * dv..(d + 1) * dv].iter_mut().zip(&v_t) {
                        *x += kd * vm;
                    }
                }
                for qh in h * group..(h + 1) * group {
                    let q_t = &q[(row * q_heads + qh) * dk..][..dk];
                    let o = &mut out[(row * q_heads + qh) * dv..][..dv];
                    for (m, x) in o.iter_mut().enumerate() {
                        let acc: f32 = (0..dk).map(|d| q_t[d] * s[d * dv + m]).sum();
                        *x = scale * acc;
                    }
                }
            }
        }
    }
    out
}

fn causal_conv_with_state(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = ctx.input(inputs, 1)?;
    let bias = ctx.opt_input(inputs, 2)?;
    let past = ctx.opt_input(inputs, 3)?;
    let silu = match ctx.attr_string("activation", "none")?.as_str() {
        "none" => false,
        "silu" | "swish" => true,
        a => return Err(ctx.err(format!("activation '{a}' is not 'none', 'silu' or 'swish'"))),
    };
    let (xs, ws) = (x.shape(), w.shape());
    let &[batch, channels, len] = xs else {
        return Err(ctx.err(format!(
            "input must be (batch, channels, length), got {xs:?}"
        )));
    };
    let k = match *ws {
        [c, 1, k] if c == channels && k > 0 => k,
        _ => {
            return Err(ctx.err(format!(
                "weight of shape {ws:?} must be ({channels}, 1, kernel_size >= 1)"
            )))
        }
    };
    let pad = k - 1;
    if let Some(b) = bias {
        if b.shape() != [channels] {
            return Err(ctx.err(format!(
                "bias of shape {:?} must be ({channels})",
                b.shape()
            )));
        }
    }
    if let Some(p) = past {
        if p.shape() != [batch, channels, pad] {
            return Err(ctx.err(format!(
                "past_state of shape {:?} must be ({batch}, {channels}, {pad})",
                p.shape()
            )));
        }
    }
    let xv = f32_values(ctx, x, "input")?;
    let wv = f32_values(ctx, w, "weight")?;
    let bv = bias.map(|b| f32_values(ctx, b, "bias")).transpose()?;
    let pv = past.map(|p| f32_values(ctx, p, "past_state")).transpose()?;
    let dtype = x.dtype();
    let padded_len = len + pad;
    let mut out = vec![0.0f32; batch * channels * len];
    let mut state = vec![0.0f32; batch * channels * pad];
    let mut padded = vec![0.0f32; padded_len];
    for b in 0..batch {
        for c in 0..channels {
            let row = b * channels + c;
            padded.fill(0.0);
            if let Some(p) = &pv {
                padded[..pad].copy_from_slice(&p[row * pad..(row + 1) * pad]);
            }
            padded[pad..].copy_from_slice(&xv[row * len..(row + 1) * len]);
            let wc = &wv[c * k..(c + 1) * k];
            let b0 = bv.as_ref().and_then(|bv| bv.get(c)).copied().unwrap_or(0.0);
            for (t, o) in out[row * len..(row + 1) * len].iter_mut().enumerate() {
                let acc: f32 = wc.iter().zip(&padded[t..t + k]).map(|(a, b)| a * b).sum();
                *o = acc + b0;
            }
            state[row * pad..(row + 1) * pad].copy_from_slice(&padded[padded_len - pad..]);
        }
    }
    if silu {
        // The reference rounds the convolution to the input type before the activation.
        let rounded = output(&[out.len()], out, dtype)?;
        let Value::Tensor(t) = rounded else {
            return Err(ctx.err("internal: convolution output is not a tensor"));
        };
        out = t
            .to_f64_vec()?
            .into_iter()
            .map(|v| {
                let v = v as f32;
                v * (1.0 / (1.0 + (-v).exp()))
            })
            .collect();
    }
    Ok(vec![
        output(&[batch, channels, len], out, dtype)?,
        output(&[batch, channels, pad], state, dtype)?,
    ])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32_tensor, floats, int_attr, node, run, string_attr};

    #[test]
    fn linear_attention_accumulates_outer_products() {
        // One head, dk = dv = 1, rule "linear", scale 1: o_t = q_t * sum_{s<=t} k_s v_s.
        let n = node(
            "LinearAttention",
            "",
            3,
            2,
            vec![
                int_attr("q_num_heads", 1),
                int_attr("kv_num_heads", 1),
                string_attr("update_rule", "linear"),
            ],
        );
        let out = run(
            &n,
            27,
            &[
                f32_tensor(&[1, 3, 1], vec![1.0, 2.0, 1.0]),
                f32_tensor(&[1, 3, 1], vec![1.0, 1.0, 2.0]),
                f32_tensor(&[1, 3, 1], vec![3.0, 1.0, 1.0]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![3.0, 8.0, 6.0]);
        assert_eq!(floats(&out[1]), vec![6.0]);
        // The gated rules need a decay input.
        let n = node(
            "LinearAttention",
            "",
            3,
            2,
            vec![int_attr("q_num_heads", 1), int_attr("kv_num_heads", 1)],
        );
        let x = f32_tensor(&[1, 3, 1], vec![1.0, 2.0, 1.0]);
        assert!(run(&n, 27, &[x.clone(), x.clone(), x]).is_err());
    }

    #[test]
    fn causal_conv_keeps_the_tail_as_state() {
        let n = node("CausalConvWithState", "", 4, 2, vec![]);
        let out = run(
            &n,
            27,
            &[
                f32_tensor(&[1, 1, 3], vec![1.0, 2.0, 3.0]),
                f32_tensor(&[1, 1, 3], vec![1.0, 10.0, 100.0]),
                f32_tensor(&[1], vec![0.5]),
                f32_tensor(&[1, 1, 2], vec![4.0, 5.0]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![154.5, 215.5, 321.5]);
        assert_eq!(floats(&out[1]), vec![2.0, 3.0]);
        // A kernel of size 1 keeps an empty state; a zero-length input keeps the past.
        let out = run(
            &n,
            27,
            &[
                f32_tensor(&[1, 1, 0], vec![]),
                f32_tensor(&[1, 1, 3], vec![1.0, 10.0, 100.0]),
                None,
                f32_tensor(&[1, 1, 2], vec![4.0, 5.0]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out[0].shape(), &[1, 1, 0]);
        assert_eq!(floats(&out[1]), vec![4.0, 5.0]);
        let bad = node(
            "CausalConvWithState",
            "",
            2,
            2,
            vec![string_attr("activation", "relu")],
        );
        let err = run(
            &bad,
            27,
            &[
                f32_tensor(&[1, 1, 1], vec![1.0]),
                f32_tensor(&[1, 1, 1], vec![1.0]),
            ],
        );
        assert!(err.is_err());
    }
}
