//! Attention (com.microsoft), the BERT-era op, as onnxruntime's CPU kernel computes it.
//!
//! Inputs: input (B, S, Din); weights (Din, D + D + Dv) (`qkv_hidden_sizes` = [D, D, Dv],
//! default three equal thirds); bias (D + D + Dv); mask_index (B) key lengths, (2B) key
//! lengths then start positions, (B, T) or (B, S, T) 0/1 masks (a 4-D mask is refused, as
//! onnxruntime's CPU kernel does); past (2, B, N, P, H), stacked keys and values;
//! attention_bias (B or 1, N or 1, S, T). Outputs: output (B, S, Dv) and present
//! (2, B, N, P + S, H).

use super::{
    bnsh_to_bsnh, concat_seq, float_dtype, floats, floats_like, heads_attr, sdpa, split_heads,
    tensors, to_tensor, BertMasks, Bias4, Dims, KeyMask,
};
use crate::error::Result;
use crate::kernel::KernelCtx;
use crate::kernels::matmul::{GemmElem, MatRef};
use crate::value::Value;

pub(super) fn attention(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let input = ctx.input(inputs, 0)?;
    let dtype = float_dtype(ctx, input)?;
    let n = heads_attr(ctx, "num_heads")?;
    if ctx.attr_int("do_rotary", 0)? != 0 {
        return Err(ctx.err("do_rotary is not supported"));
    }
    if ctx.attr_int("past_present_share_buffer", 0)? != 0 || ctx.opt_input(inputs, 6)?.is_some() {
        return Err(ctx.err("a past/present shared buffer is not supported"));
    }
    let [b, s, din] = *input.shape() else {
        return Err(ctx.err(format!("input must be 3-D, got {:?}", input.shape())));
    };
    let weights = ctx.input(inputs, 1)?;
    let [wd, wcols] = *weights.shape() else {
        return Err(ctx.err(format!("weights must be 2-D, got {:?}", weights.shape())));
    };
    if wd != din {
        return Err(ctx.err(format!(
            "weights {:?} do not match the input hidden size {din}",
            weights.shape()
        )));
    }
    let (dq, dk, dv) = match ctx.attr_ints("qkv_hidden_sizes") {
        Some(&[q, k, v]) if q > 0 && k > 0 && v > 0 => (q as usize, k as usize, v as usize),
        Some(other) => {
            return Err(ctx.err(format!(
                "qkv_hidden_sizes {other:?} must be three positive sizes"
            )))
        }
        None if wcols % 3 == 0 => (wcols / 3, wcols / 3, wcols / 3),
        None => return Err(ctx.err(format!("weights have {wcols} columns, not a multiple of 3"))),
    };
    if dq != dk || dq + dk + dv != wcols || dq % n != 0 || dv % n != 0 {
        return Err(ctx.err(format!(
            "hidden sizes ({dq}, {dk}, {dv}) must have Q = K, add up to the {wcols} weight \
             columns and divide into {n} heads"
        )));
    }
    let (h, hv) = (dq / n, dv / n);

    // QKV = input · weights + bias, (B·S, D + D + Dv).
    let x = floats(input)?;
    let w = floats_like(weights, dtype, "weights")?;
    let mut qkv = vec![0.0f32; b * s * wcols];
    if let Some(bias) = ctx.opt_input(inputs, 2)? {
        if bias.shape() != [wcols] {
            return Err(ctx.err(format!("bias {:?} must be ({wcols})", bias.shape())));
        }
        let bias = floats_like(bias, dtype, "bias")?;
        for row in qkv.chunks_mut(wcols) {
            row.copy_from_slice(&bias);
        }
    }
    f32::gemm(
        b * s,
        din,
        wcols,
        1.0,
        MatRef {
            data: &x,
            rs: din,
            cs: 1,
        },
        MatRef {
            data: &w,
            rs: wcols,
            cs: 1,
        },
        1.0,
        &mut qkv,
    )?;
    // Q, K and V are the column blocks [0, D), [D, 2D) and [2D, 2D + Dv) of the rows.
    let q = split_heads(&qkv, [b, s, wcols], 0, n, h);
    let k = split_heads(&qkv, [b, s, wcols], dq, n, h);
    let v = split_heads(&qkv, [b, s, wcols], 2 * dq, n, hv);

    // The past: (2, B, N, P, H).
    let past = ctx
        .opt_input(inputs, 4)?
        .map(|t| {
            let p = t.shape().get(3).copied().unwrap_or(0);
            if t.shape() != [2, b, n, p, h] || h != hv {
                return Err(ctx.err(format!(
                    "past {:?} must be (2, {b}, {n}, P, {h}) with equal K and V head sizes",
                    t.shape()
                )));
            }
            Ok((floats_like(t, dtype, "past")?, p))
        })
        .transpose()?;
    let p = past.as_ref().map_or(0, |x| x.1);
    let t = p + s;
    let half = b * n * p * h;
    let present_k = concat_seq(past.as_ref().map(|x| (&x.0[..half], p)), &k, [b, n, s, h]);
    let present_v = concat_seq(past.as_ref().map(|x| (&x.0[half..], p)), &v, [b, n, s, hv]);
    if let Some(m) = ctx.opt_input(inputs, 3)? {
        if m.rank() == 4 {
            return Err(ctx.err("a 4-D mask_index is not supported"));
        }
    }
    let masks = BertMasks {
        mask: ctx
            .opt_input(inputs, 3)?
            .map(|m| KeyMask::read(m, [b, s, t], true))
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
            masks.apply(r, row);
            Ok(())
        },
        |_| None,
        |_, _| {},
    )?;
    let mut outs = vec![to_tensor(
        dtype,
        &[b, s, n * hv],
        bnsh_to_bsnh(&out, [b, n, s, hv]),
    )?];
    if ctx.wants_output(1) {
        if h != hv {
            return Err(ctx.err("present needs equal K and V head sizes"));
        }
        let mut present = present_k;
        present.extend_from_slice(&present_v);
        outs.push(to_tensor(dtype, &[2, b, n, t, h], present)?);
    }
    Ok(tensors(outs, ctx))
}
