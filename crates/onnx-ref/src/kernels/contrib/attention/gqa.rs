//! GroupQueryAttention (com.microsoft), as onnxruntime's CPU kernel computes it.
//!
//! Inputs: query (B, S, N·H), or packed (B, S, (N + 2·Nkv)·H) with key and value absent; key
//! and value (B, S, Nkv·H); past_key/past_value (B, Nkv, P, H); seqlens_k (B) holding each
//! batch's total length minus one; total_sequence_length (scalar); cos_cache/sin_cache;
//! position_ids (B, S); attention_bias (B or 1, N or 1, S, T); head_sink (N).
//!
//! A first prompt (S > 1 and S = total_sequence_length) starts at position 0 in every batch
//! (shorter batches are right-padded); otherwise batch b's new tokens follow its
//! `seqlens_k[b] + 1 − S` past tokens. The present cache (B, Nkv, max(P, T), H) holds the past
//! tokens then the new ones; rows past a batch's length are zero. Query i of batch b attends the
//! keys before min(past_b + i + 1, total_b) (all of total_b when `causal` is 0), only the last
//! `local_window_size` of them with a window. Rotary positions are past_b + s, or
//! `position_ids`; a first prompt reads only `position_ids[0]`, as the start of every batch.
//! Several new tokens after a past (S > 1, S != total) are refused unless the batch is 1, as
//! onnxruntime refuses them.

use std::cell::RefCell;

use super::{
    bnsh_to_bsnh, bsnh_to_bnsh, float_dtype, floats, floats_like, heads_attr, rotate_bnsh, sdpa,
    tensors, to_tensor, Bias4, Dims, RopeCache, Row,
};
use crate::error::Result;
use crate::kernel::KernelCtx;
use crate::tensor::Tensor;
use crate::value::Value;

pub(super) fn group_query_attention(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
) -> Result<Vec<Value>> {
    let query = ctx.input(inputs, 0)?;
    let dtype = float_dtype(ctx, query)?;
    let n = heads_attr(ctx, "num_heads")?;
    let nkv = heads_attr(ctx, "kv_num_heads")?;
    for (i, what) in [
        (12, "k_scale"),
        (13, "v_scale"),
        (14, "q_norm_weight"),
        (15, "k_norm_weight"),
    ] {
        if ctx.opt_input(inputs, i)?.is_some() {
            return Err(ctx.err(format!("input {what} is not supported")));
        }
    }
    for attr in ["k_quant_type", "v_quant_type"] {
        let q = ctx.attr_string(attr, "NONE")?;
        if q != "NONE" {
            return Err(ctx.err(format!(
                "{attr} {q} (a quantized KV cache) is not supported"
            )));
        }
    }
    if ctx.attr_int("sliding_window_cache", 0)? != 0 {
        return Err(ctx.err("sliding_window_cache is not supported"));
    }
    let [b, s, hidden] = *query.shape() else {
        return Err(ctx.err(format!("query must be 3-D, got {:?}", query.shape())));
    };
    let key = ctx.opt_input(inputs, 1)?;
    let value = ctx.opt_input(inputs, 2)?;
    let q_data = floats(query)?;
    let (h, q, mut k, v) = match (key, value) {
        (None, None) => {
            let total = n + 2 * nkv;
            if hidden % total != 0 {
                return Err(ctx.err(format!(
                    "packed query hidden size {hidden} is not a multiple of {total} heads"
                )));
            }
            let h = hidden / total;
            let dims = [b, s, total, h];
            (
                h,
                bsnh_to_bnsh(&q_data, dims, 0, n),
                bsnh_to_bnsh(&q_data, dims, n, nkv),
                bsnh_to_bnsh(&q_data, dims, n + nkv, nkv),
            )
        }
        (Some(key), Some(value)) => {
            if hidden % n != 0 {
                return Err(ctx.err(format!(
                    "query hidden size {hidden} is not a multiple of {n} heads"
                )));
            }
            let h = hidden / n;
            for (t, what) in [(key, "key"), (value, "value")] {
                if t.shape() != [b, s, nkv * h] {
                    return Err(ctx.err(format!(
                        "{what} {:?} must be ({b}, {s}, {})",
                        t.shape(),
                        nkv * h
                    )));
                }
            }
            (
                h,
                bsnh_to_bnsh(&q_data, [b, s, n, h], 0, n),
                bsnh_to_bnsh(&floats_like(key, dtype, "key")?, [b, s, nkv, h], 0, nkv),
                bsnh_to_bnsh(&floats_like(value, dtype, "value")?, [b, s, nkv, h], 0, nkv),
            )
        }
        _ => return Err(ctx.err("key and value must be given together")),
    };
    let mut q = q;

    // Lengths.
    let seqlens = ctx.input(inputs, 5)?.to_i64_vec()?;
    if seqlens.len() != b {
        return Err(ctx.err(format!(
            "seqlens_k has {} entries for batch {b}",
            seqlens.len()
        )));
    }
    let total_t = ctx.input(inputs, 6)?.to_i64_vec()?;
    let [total] = total_t[..] else {
        return Err(ctx.err("total_sequence_length must hold one value"));
    };
    let total = usize::try_from(total)
        .map_err(|_| ctx.err(format!("total_sequence_length {total} is negative")))?;
    let past_key = ctx.opt_input(inputs, 3)?;
    let past_value = ctx.opt_input(inputs, 4)?;
    let (past, past_len) = match (past_key, past_value) {
        (Some(pk), Some(pv)) => {
            let shape = pk.shape();
            if shape.len() != 4
                || shape[0] != b
                || shape[1] != nkv
                || shape[3] != h
                || pv.shape() != shape
            {
                return Err(ctx.err(format!(
                    "past_key {:?} and past_value {:?} must both be ({b}, {nkv}, past, {h})",
                    shape,
                    pv.shape()
                )));
            }
            (
                Some((
                    floats_like(pk, dtype, "past_key")?,
                    floats_like(pv, dtype, "past_value")?,
                )),
                shape[2],
            )
        }
        (None, None) => (None, 0),
        _ => return Err(ctx.err("past_key and past_value must be given together")),
    };
    let present_len = past_len.max(total);
    let first_prompt = s > 1 && s == total;
    // onnxruntime refuses a later prompt (several new tokens after a past) in a batch.
    if s > 1 && s != total && b != 1 {
        return Err(ctx.err(format!(
            "batch_size must be 1 when sequence_length > 1 and past context is given \
             (batch {b}, {s} new tokens, total {total}), as onnxruntime requires"
        )));
    }
    let mut totals = Vec::with_capacity(b);
    let mut pasts = Vec::with_capacity(b);
    for (bi, &sk) in seqlens.iter().enumerate() {
        let tot = usize::try_from(sk + 1)
            .ok()
            .filter(|&t| t <= total.max(s))
            .ok_or_else(|| {
                ctx.err(format!(
                    "seqlens_k[{bi}] = {sk} is outside [-1, total_sequence_length)"
                ))
            })?;
        let p = if first_prompt {
            0
        } else {
            tot.checked_sub(s).ok_or_else(|| {
                ctx.err(format!(
                    "batch {bi}: total length {tot} is shorter than the {s} new tokens"
                ))
            })?
        };
        if p > past_len || p + s > present_len {
            return Err(ctx.err(format!(
                "batch {bi}: {p} past tokens do not fit the past ({past_len}) or present \
                 ({present_len}) cache"
            )));
        }
        totals.push(tot);
        pasts.push(p);
    }

    // Rotary embedding of Q and K.
    if ctx.attr_int("do_rotary", 0)? == 1 {
        let (Some(cos), Some(sin)) = (ctx.opt_input(inputs, 7)?, ctx.opt_input(inputs, 8)?) else {
            return Err(ctx.err("do_rotary needs cos_cache and sin_cache"));
        };
        let cache = RopeCache::read(cos, sin, dtype)?;
        let positions: Vec<i64> = match ctx.opt_input(inputs, 9)? {
            // A first prompt reads only the first position, as the start of every batch
            // (onnxruntime's position format 0).
            Some(p) if p.shape() == [b, s] && first_prompt => {
                let start = p.to_i64_vec()?[0];
                (0..b)
                    .flat_map(|_| (0..s).map(move |si| start + si as i64))
                    .collect()
            }
            Some(p) if p.shape() == [b, s] => p.to_i64_vec()?,
            Some(p) => {
                return Err(ctx.err(format!("position_ids {:?} must be ({b}, {s})", p.shape())))
            }
            None => (0..b)
                .flat_map(|bi| {
                    let p = pasts[bi];
                    (0..s).map(move |si| (p + si) as i64)
                })
                .collect(),
        };
        let interleaved = ctx.attr_int("rotary_interleaved", 0)? == 1;
        rotate_bnsh(&mut q, [b, n, s, h], &positions, &cache, interleaved)?;
        rotate_bnsh(&mut k, [b, nkv, s, h], &positions, &cache, interleaved)?;
    }

    // The present cache: past tokens, then the new ones.
    let mut present_k = vec![0.0f32; b * nkv * present_len * h];
    let mut present_v = present_k.clone();
    for (bi, &p) in pasts.iter().enumerate() {
        for hi in 0..nkv {
            let dst = (bi * nkv + hi) * present_len * h;
            if let Some((pk, pv)) = &past {
                let src = (bi * nkv + hi) * past_len * h;
                present_k[dst..dst + p * h].copy_from_slice(&pk[src..src + p * h]);
                present_v[dst..dst + p * h].copy_from_slice(&pv[src..src + p * h]);
            }
            let src = (bi * nkv + hi) * s * h;
            let at = dst + p * h;
            present_k[at..at + s * h].copy_from_slice(&k[src..src + s * h]);
            present_v[at..at + s * h].copy_from_slice(&v[src..src + s * h]);
        }
    }

    // Attention.
    let scale = match ctx.attr_float("scale", 0.0)? {
        x if x != 0.0 => x,
        _ => 1.0 / (h as f32).sqrt(),
    };
    let softcap = ctx.attr_float("softcap", 0.0)?;
    let window = ctx.attr_int("local_window_size", -1)?;
    let causal = ctx.attr_int("causal", 1)? != 0;
    let qk_mode = ctx.attr_int("qk_output", 0)?;
    if !(0..=2).contains(&qk_mode) {
        return Err(ctx.err(format!("qk_output {qk_mode} is not 0, 1 or 2")));
    }
    let bias = ctx
        .opt_input(inputs, 10)?
        .map(|t| Bias4::read(t, dtype, [b, n, s, total], "attention_bias"))
        .transpose()?;
    let sinks = ctx
        .opt_input(inputs, 11)?
        .map(|t| {
            if t.shape() != [n] {
                return Err(ctx.err(format!("head_sink {:?} must be ({n})", t.shape())));
            }
            floats_like(t, dtype, "head_sink")
        })
        .transpose()?;
    let smooth = ctx.attr_int("smooth_softmax", 0)? != 0;
    let t = present_len;
    // output_qk, written by both row hooks.
    let qk_out = RefCell::new(vec![0.0f32; if qk_mode != 0 { b * n * s * t } else { 0 }]);
    let range = |r: Row| {
        let end = if causal {
            (pasts[r.b] + r.i + 1).min(totals[r.b])
        } else {
            totals[r.b]
        };
        let start = if window > 0 {
            end.saturating_sub(window as usize)
        } else {
            0
        };
        (start, end)
    };
    let out = sdpa(
        &q,
        &present_k,
        &present_v,
        Dims {
            batch: b,
            heads: n,
            kv_heads: nkv,
            q_len: s,
            kv_len: t,
            head_size: h,
            v_head_size: h,
        },
        scale,
        |r, row| {
            let (start, end) = range(r);
            if qk_mode == 1 {
                let mut buf = qk_out.borrow_mut();
                let dst = &mut buf[((r.b * n + r.h) * s + r.i) * t..][..t];
                dst[start..end].copy_from_slice(&row[start..end]);
            }
            for (j, x) in row.iter_mut().enumerate() {
                if j < start || j >= end {
                    *x = f32::NEG_INFINITY;
                    continue;
                }
                if softcap > 0.0 {
                    *x = softcap * (*x / softcap).tanh();
                }
                if let Some(bias) = &bias {
                    *x += bias.row(r)[j];
                }
            }
            Ok(())
        },
        |hi| match &sinks {
            Some(v) => Some(v[hi]),
            None if smooth => Some(0.0),
            None => None,
        },
        |r, probs| {
            if qk_mode == 2 {
                let mut buf = qk_out.borrow_mut();
                buf[((r.b * n + r.h) * s + r.i) * t..][..t].copy_from_slice(probs);
            }
        },
    )?;
    let mut outs = vec![
        to_tensor(dtype, &[b, s, n * h], bnsh_to_bsnh(&out, [b, n, s, h]))?,
        to_tensor(dtype, &[b, nkv, t, h], present_k)?,
        to_tensor(dtype, &[b, nkv, t, h], present_v)?,
    ];
    if qk_mode != 0 {
        outs.push(to_tensor(dtype, &[b, n, s, t], qk_out.into_inner())?);
    } else if ctx.wants_output(3) {
        outs.push(Tensor::from_vec::<f32>(&[0], vec![])?);
    }
    Ok(tensors(outs, ctx))
}
