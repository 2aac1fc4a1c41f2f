//! MultiHeadAttention (com.microsoft), as onnxruntime's CPU kernel computes it.
//!
//! Inputs: query (B, S, D), or packed QKV (B, S, N, 3, H) with key and value absent; key and
//! value (B, L, D) and (B, L, Dv), packed KV (B, L, N, 2, H) with value absent, or already
//! split into heads (B, N, L, H) (then no bias or past); bias (D + D + Dv) added to Q, K and V;
//! key_padding_mask (B), (B, T) or (B, S, T); attention_bias (B or 1, N or 1, S, T);
//! past_key/past_value (B, N, P, H). Outputs: output (B, S, N·Hv), present_key/present_value
//! (B, N, P + L, H) and qk (B, N, S, T), the scaled Q·Kᵀ before masks and bias.

use super::{
    bnsh_to_bsnh, bsnh_to_bnsh, concat_seq, float_dtype, floats, floats_like, heads_attr, sdpa,
    tensors, to_tensor, BertMasks, Bias4, Dims, KeyMask,
};
use crate::error::Result;
use crate::kernel::KernelCtx;
use crate::tensor::Tensor;
use crate::value::Value;

pub(super) fn multi_head_attention(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
) -> Result<Vec<Value>> {
    let query = ctx.input(inputs, 0)?;
    let dtype = float_dtype(ctx, query)?;
    let n = heads_attr(ctx, "num_heads")?;
    for (i, what) in [(8, "past_sequence_length"), (9, "cache_indirection")] {
        if ctx.opt_input(inputs, i)?.is_some() {
            return Err(ctx.err(format!("input {what} is not supported")));
        }
    }
    let key = ctx.opt_input(inputs, 1)?;
    let value = ctx.opt_input(inputs, 2)?;
    let bias = ctx
        .opt_input(inputs, 3)?
        .map(|t| floats_like(t, dtype, "bias"))
        .transpose()?;
    let qd = floats(query)?;
    let fl = |t: &Tensor, what: &str| floats_like(t, dtype, what);
    // Q, K, V as (B, N, ·, H) before the bias, with (b, s, l, h, hv) and whether K/V are
    // already split into heads.
    let (b, s) = (query.shape()[0], query.shape().get(1).copied().unwrap_or(0));
    let (q, k, v, l, h, hv, kv_heads_given) = match (query.shape(), key, value) {
        (&[_, _, qn, 3, h], None, None) if qn == n => {
            // (B, S, N, 3, H): head i of Q, K, V is slot (i, 0..3).
            let pick = |which: usize| {
                let mut out = Vec::with_capacity(b * n * s * h);
                for bi in 0..b {
                    for ni in 0..n {
                        for si in 0..s {
                            let start = ((bi * s + si) * 3 * n + ni * 3 + which) * h;
                            out.extend_from_slice(&qd[start..start + h]);
                        }
                    }
                }
                out
            };
            (pick(0), pick(1), pick(2), s, h, h, false)
        }
        (&[_, _, d], Some(key), value) => {
            if d % n != 0 {
                return Err(ctx.err(format!(
                    "query hidden size {d} is not a multiple of {n} heads"
                )));
            }
            let h = d / n;
            let q = bsnh_to_bnsh(&qd, [b, s, n, h], 0, n);
            match (key.shape(), value) {
                (&[kb, l, kn, 2, kh], None) if kb == b && kn == n && kh == h => {
                    let kd = fl(key, "key")?;
                    let pick = |which: usize| {
                        let mut out = Vec::with_capacity(b * n * l * h);
                        for bi in 0..b {
                            for ni in 0..n {
                                for li in 0..l {
                                    let start = ((bi * l + li) * 2 * n + ni * 2 + which) * h;
                                    out.extend_from_slice(&kd[start..start + h]);
                                }
                            }
                        }
                        out
                    };
                    (q, pick(0), pick(1), l, h, h, false)
                }
                (&[kb, l, kd], Some(value)) if kb == b && kd == d => {
                    let [vb, vl, dv] = *value.shape() else {
                        return Err(
                            ctx.err(format!("value {:?} must be 3-D like key", value.shape()))
                        );
                    };
                    if vb != b || vl != l || dv % n != 0 {
                        return Err(ctx.err(format!(
                            "value {:?} must be ({b}, {l}, a multiple of {n})",
                            value.shape()
                        )));
                    }
                    let hv = dv / n;
                    (
                        q,
                        bsnh_to_bnsh(&fl(key, "key")?, [b, l, n, h], 0, n),
                        bsnh_to_bnsh(&fl(value, "value")?, [b, l, n, hv], 0, n),
                        l,
                        h,
                        hv,
                        false,
                    )
                }
                (&[kb, kn, l, kh], Some(value)) if kb == b && kn == n && kh == h => {
                    let [vb, vn, vl, hv] = *value.shape() else {
                        return Err(ctx.err("value must be 4-D like key"));
                    };
                    if vb != b || vn != n || vl != l {
                        return Err(ctx.err(format!(
                            "value {:?} must be ({b}, {n}, {l}, ·)",
                            value.shape()
                        )));
                    }
                    (q, fl(key, "key")?, fl(value, "value")?, l, h, hv, true)
                }
                (ks, _) => {
                    return Err(ctx.err(format!(
                        "key {ks:?} (value {:?}) is not (B, L, D), (B, L, N, 2, H) or \
                         (B, N, L, H)",
                        value.map(|v| v.shape().to_vec())
                    )))
                }
            }
        }
        (qs, _, _) => {
            return Err(ctx.err(format!(
                "query {qs:?} must be (B, S, D) with key, or (B, S, N, 3, H) alone"
            )))
        }
    };
    let (mut q, mut k, mut v) = (q, k, v);
    if let Some(bias) = &bias {
        if kv_heads_given {
            return Err(ctx.err("bias cannot be used with key and value of shape (B, N, L, H)"));
        }
        let d = n * h;
        if bias.len() != 2 * d + n * hv {
            return Err(ctx.err(format!(
                "bias has {} values, expected {}",
                bias.len(),
                2 * d + n * hv
            )));
        }
        add_head_bias(&mut q, &bias[..d], n, s, h);
        add_head_bias(&mut k, &bias[d..2 * d], n, l, h);
        add_head_bias(&mut v, &bias[2 * d..], n, l, hv);
    }
    let past = match (ctx.opt_input(inputs, 6)?, ctx.opt_input(inputs, 7)?) {
        (Some(pk), Some(pv)) => {
            if kv_heads_given {
                return Err(ctx.err("past_key cannot be used with key of shape (B, N, L, H)"));
            }
            let p = pk.shape().get(2).copied().unwrap_or(0);
            if pk.shape() != [b, n, p, h] || pv.shape() != [b, n, p, hv] {
                return Err(ctx.err(format!(
                    "past_key {:?} and past_value {:?} must be ({b}, {n}, P, {h}) and \
                     ({b}, {n}, P, {hv})",
                    pk.shape(),
                    pv.shape()
                )));
            }
            Some((fl(pk, "past_key")?, fl(pv, "past_value")?, p))
        }
        (None, None) => None,
        _ => return Err(ctx.err("past_key and past_value must be given together")),
    };
    let p = past.as_ref().map_or(0, |x| x.2);
    let t = p + l;
    let present_k = concat_seq(past.as_ref().map(|x| (x.0.as_slice(), p)), &k, [b, n, l, h]);
    let present_v = concat_seq(
        past.as_ref().map(|x| (x.1.as_slice(), p)),
        &v,
        [b, n, l, hv],
    );
    let masks = BertMasks {
        mask: ctx
            .opt_input(inputs, 4)?
            .map(|m| KeyMask::read(m, [b, s, t], false))
            .transpose()?,
        filter: ctx.attr_float("mask_filter_value", -10000.0)?,
        causal: ctx.attr_int("unidirectional", 0)? != 0,
        past: p,
        bias: ctx
            .opt_input(inputs, 5)?
            .map(|x| Bias4::read(x, dtype, [b, n, s, t], "attention_bias"))
            .transpose()?,
        s,
        t,
    };
    let scale = match ctx.attr_float("scale", 0.0)? {
        x if x != 0.0 => x,
        _ => 1.0 / (h as f32).sqrt(),
    };
    let want_qk = ctx.wants_output(3);
    let mut qk = vec![0.0f32; if want_qk { b * n * s * t } else { 0 }];
    let out = sdpa(
        &q,
        &present_k,
        &present_v,
        Dims {
            batch: b,
            heads: n,
            kv_heads: n,
            q_len: s,
            kv_len: t,
            head_size: h,
            v_head_size: hv,
        },
        scale,
        |r, row| {
            if want_qk {
                qk[((r.b * n + r.h) * s + r.i) * t..][..t].copy_from_slice(row);
            }
            masks.apply(r, row);
            Ok(())
        },
        |_| None,
        |_, _| {},
    )?;
    let mut outs = vec![
        to_tensor(dtype, &[b, s, n * hv], bnsh_to_bsnh(&out, [b, n, s, hv]))?,
        to_tensor(dtype, &[b, n, t, h], present_k)?,
        to_tensor(dtype, &[b, n, t, hv], present_v)?,
    ];
    if want_qk {
        outs.push(to_tensor(dtype, &[b, n, s, t], qk)?);
    }
    Ok(tensors(outs, ctx))
}

/// Adds a (N·size) bias to a (B, N, len, size) buffer.
fn add_head_bias(x: &mut [f32], bias: &[f32], n: usize, len: usize, size: usize) {
    for (chunk_idx, chunk) in x.chunks_mut(size).enumerate() {
        let head = (chunk_idx / len) % n;
        for (v, &bv) in chunk.iter_mut().zip(&bias[head * size..(head + 1) * size]) {
            *v += bv;
        }
    }
}
