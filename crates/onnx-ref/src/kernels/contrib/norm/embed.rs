//! EmbedLayerNormalization (com.microsoft): BERT's embedding block.
//!
//! For token (b, s): `word_embedding[input_ids[b, s]] + position_embedding[p]
//! (+ segment_embedding[segment_ids[b, s]])`, where p is `position_ids[b, s]` (position_ids of
//! shape (B, S), or (1, S) shared by the batch) or else s; the sum is layer-normalized over the
//! hidden axis with gamma and beta. Outputs: the normalized (B, S, H) tensor, `mask_index`
//! (int32, per batch the number of mask entries equal to 1; zeros without a mask) and the
//! optional `embedding_sum`, the sum before normalization. An index out of its table's range
//! is an error.

use super::{floats, same_type, tensor_of, MS};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::Tensor;
use crate::value::Value;

/// onnxruntime's default epsilon.
const EPSILON: f32 = 1e-12;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register(MS, "EmbedLayerNormalization", 1, LATEST, embed_layer_norm);
}

/// An integer input of shape (B, S) as i64s (`batch_one`: (1, S) is accepted too).
fn ids(
    ctx: &KernelCtx,
    t: &Tensor,
    b: usize,
    s: usize,
    batch_one: bool,
    what: &str,
) -> Result<Vec<i64>> {
    let fits = t.shape() == [b, s] || (batch_one && t.shape() == [1, s]);
    if !fits {
        return Err(ctx.err(format!(
            "{what} must have shape [{b}, {s}]{}, found {:?}",
            if batch_one { " or [1, S]" } else { "" },
            t.shape()
        )));
    }
    if !t.dtype().is_integer() {
        return Err(ctx.err(format!("{what} must be int32, found {}", t.dtype())));
    }
    t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))
}

/// A (rows, H) embedding table as f64s; `rows` is returned.
fn table(ctx: &KernelCtx, t: &Tensor, hidden: usize, what: &str) -> Result<(Vec<f64>, usize)> {
    if t.rank() != 2 || t.shape()[1] != hidden {
        return Err(ctx.err(format!(
            "{what} must have shape [N, {hidden}], found {:?}",
            t.shape()
        )));
    }
    Ok((floats(ctx, t, what)?, t.shape()[0]))
}

/// Row `i` of a table with `rows` rows, or an error naming the index.
fn row<'a>(
    ctx: &KernelCtx,
    table: &'a [f64],
    rows: usize,
    hidden: usize,
    i: i64,
    what: &str,
) -> Result<&'a [f64]> {
    match usize::try_from(i) {
        Ok(i) if i < rows => Ok(&table[i * hidden..(i + 1) * hidden]),
        _ => Err(ctx.err(format!("{what} {i} is out of range [0, {rows})"))),
    }
}

fn embed_layer_norm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let input_ids = ctx.input(inputs, 0)?;
    let segment_ids = ctx.opt_input(inputs, 1)?;
    let word = ctx.input(inputs, 2)?;
    let position = ctx.input(inputs, 3)?;
    let segment = ctx.opt_input(inputs, 4)?;
    let gamma = ctx.input(inputs, 5)?;
    let beta = ctx.input(inputs, 6)?;
    let mask = ctx.opt_input(inputs, 7)?;
    let position_ids = ctx.opt_input(inputs, 8)?;
    if input_ids.rank() != 2 {
        return Err(ctx.err(format!(
            "input_ids must have rank 2 (batch, sequence), found {:?}",
            input_ids.shape()
        )));
    }
    let (b, s) = (input_ids.shape()[0], input_ids.shape()[1]);
    if word.rank() != 2 {
        return Err(ctx.err(format!(
            "word_embedding must have rank 2, found {:?}",
            word.shape()
        )));
    }
    let hidden = word.shape()[1];
    let dtype = word.dtype();
    for (t, what) in [
        (position, "position_embedding"),
        (gamma, "gamma"),
        (beta, "beta"),
    ] {
        same_type(ctx, t, dtype, what)?;
    }
    let word_ids = ids(ctx, input_ids, b, s, false, "input_ids")?;
    let (word_v, word_rows) = table(ctx, word, hidden, "word_embedding")?;
    let (pos_v, pos_rows) = table(ctx, position, hidden, "position_embedding")?;
    let segments = match (segment_ids, segment) {
        (Some(ids_t), Some(table_t)) => {
            same_type(ctx, table_t, dtype, "segment_embedding")?;
            Some((
                ids(ctx, ids_t, b, s, false, "segment_ids")?,
                table(ctx, table_t, hidden, "segment_embedding")?,
            ))
        }
        (None, None) => None,
        _ => {
            return Err(
                ctx.err("segment_ids and segment_embedding must be given together or not at all")
            )
        }
    };
    let pos_ids = position_ids
        .map(|t| ids(ctx, t, b, s, true, "position_ids"))
        .transpose()?;
    for (t, what) in [(gamma, "gamma"), (beta, "beta")] {
        if t.shape() != [hidden] {
            return Err(ctx.err(format!(
                "{what} must have shape [{hidden}], found {:?}",
                t.shape()
            )));
        }
    }
    let g = floats(ctx, gamma, "gamma")?;
    let be = floats(ctx, beta, "beta")?;
    let eps = ctx.attr_float("epsilon", EPSILON)? as f64;
    let mut sum = vec![0.0; b * s * hidden];
    let mut y = vec![0.0; b * s * hidden];
    for bi in 0..b {
        for si in 0..s {
            let t = bi * s + si;
            let p = match &pos_ids {
                Some(p) if p.len() == s => p[si],
                Some(p) => p[t],
                None => si as i64,
            };
            let w = row(
                ctx,
                &word_v,
                word_rows,
                hidden,
                word_ids[t],
                "input_ids value",
            )?;
            let pe = row(ctx, &pos_v, pos_rows, hidden, p, "position")?;
            let out = &mut sum[t * hidden..(t + 1) * hidden];
            for ((o, a), c) in out.iter_mut().zip(w).zip(pe) {
                *o = a + c;
            }
            if let Some((seg_ids, (seg_v, seg_rows))) = &segments {
                let se = row(
                    ctx,
                    seg_v,
                    *seg_rows,
                    hidden,
                    seg_ids[t],
                    "segment_ids value",
                )?;
                for (o, c) in out.iter_mut().zip(se) {
                    *o += c;
                }
            }
            let n = hidden as f64;
            let mean = out.iter().sum::<f64>() / n;
            let var = out.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            let inv = 1.0 / (var + eps).sqrt();
            for (i, v) in out.iter().enumerate() {
                y[t * hidden + i] = (v - mean) * inv * g[i] + be[i];
            }
        }
    }
    let mask_index: Vec<i32> = match mask {
        Some(m) => {
            let mv = ids(ctx, m, b, s, false, "mask")?;
            mv.chunks(s.max(1))
                .take(b)
                .map(|r| r.iter().filter(|&&v| v == 1).count() as i32)
                .collect()
        }
        None => vec![0; b],
    };
    let mask_index = if s == 0 { vec![0; b] } else { mask_index };
    let shape = [b, s, hidden];
    Ok(vec![
        tensor_of(&shape, y, dtype)?,
        Value::Tensor(Tensor::from_vec(&[b], mask_index)?),
        tensor_of(&shape, sum, dtype)?,
    ])
}
