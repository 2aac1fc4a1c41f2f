//! onnxruntime's own ops (schemas of origin `OnnxRuntime`): the `com.microsoft` contrib ops
//! that transformer exports use (normalizations, attention, rotary embedding, GELU variants,
//! fused and block-quantized matmuls, quantization) and onnxruntime's default-domain
//! LayerNormalization-1 and SimplifiedLayerNormalization-1. Shapes follow onnxruntime's
//! documented semantics (docs/ContribOperators.md); dims it does not fix stay unknown.

use onnx_proto::tensor_proto::DataType;

use super::elementwise::{broadcast_inputs, layer_normalization, quantize_linear, same_shape};
use super::linalg::matmul_dims;
use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;

/// The rule for onnxruntime's schema `op` of `domain`, when there is one.
pub(crate) fn rule(domain: &str, op: &str) -> Option<Rule> {
    match domain {
        "" => Some(match op {
            "LayerNormalization" => layer_normalization,
            "SimplifiedLayerNormalization" => simplified_layer_normalization,
            _ => return None,
        }),
        "com.microsoft" => Some(match op {
            "SkipLayerNormalization" | "SkipSimplifiedLayerNormalization" => skip_layer_norm,
            "EmbedLayerNormalization" => embed_layer_normalization,
            "Attention" => attention,
            "MultiHeadAttention" => multi_head_attention,
            "GroupQueryAttention" => group_query_attention,
            "RotaryEmbedding" | "Gelu" | "FastGelu" | "QuickGelu" => same_shape,
            "BiasGelu" | "BiasAdd" => |ctx| {
                let all: Vec<usize> = (0..ctx.n_inputs()).collect();
                Ok(vec![Out::maybe_shape(broadcast_inputs(ctx, &all)?)])
            },
            "FusedMatMul" => fused_matmul,
            "DynamicQuantizeMatMul" | "MatMulIntegerToFloat" => plain_matmul,
            "MatMulNBits" => matmul_n_bits,
            "GatherBlockQuantized" => gather_block_quantized,
            "QuantizeLinear" => quantize_linear,
            "DequantizeLinear" => {
                |ctx| Ok(vec![Out::maybe_shape(ctx.shape(0)).maybe_elem(ctx.elem(1))])
            }
            _ => return None,
        }),
        _ => None,
    }
}

/// A positive integer attribute.
fn positive(ctx: &NodeCtx<'_>, name: &str) -> Option<i64> {
    ctx.attr_int(name).filter(|v| *v > 0)
}

/// `dims` with the last one replaced by `last`.
fn with_last(dims: &[SymDim], last: SymDim) -> Dims {
    let mut out = dims.to_vec();
    if let Some(d) = out.last_mut() {
        *d = last;
    }
    out
}

/// `a / b` when `b` is a known positive count (head sizes from hidden sizes).
fn div(a: &SymDim, b: i64) -> SymDim {
    dims::floor_div(a, &SymDim::Known(b))
}

fn simplified_layer_normalization(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    // LayerNormalization's outputs without Mean: Y, inv_std_var.
    let mut outs = layer_normalization(ctx)?;
    outs.remove(1);
    Ok(outs)
}

/// Skip(Simplified)LayerNormalization: output and input_skip_bias_sum have the input's shape;
/// mean and inv_std_var (float) keep every dim but the normalized last one, which becomes 1.
fn skip_layer_norm(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    if let (Some(x), Some(skip)) = (&x, ctx.shape(1)) {
        if dims::broadcast(&[x, &skip]).is_err() || skip.len() > x.len() {
            return Err(ctx.fail(format!(
                "{} does not broadcast to {}",
                ctx.describe(1),
                ctx.describe(0)
            )));
        }
    }
    if let (Some(x), Some(gamma)) = (&x, ctx.shape(2)) {
        if let (Some(h), [g]) = (x.last(), gamma.as_slice()) {
            if dims::unify(h, g).is_none() {
                return Err(ctx.fail(format!(
                    "{} does not match the hidden size of {}",
                    ctx.describe(2),
                    ctx.describe(0)
                )));
            }
        }
    }
    let stats = x.as_deref().map(|x| with_last(x, SymDim::Known(1)));
    let float = DataType::Float as i32;
    Ok(vec![
        Out::maybe_shape(x.clone()),
        Out::maybe_shape(stats.clone()).elem(float),
        Out::maybe_shape(stats).elem(float),
        Out::maybe_shape(x),
    ])
}

/// input_ids [batch, seq] -> output [batch, seq, hidden] (hidden from the word embedding),
/// mask_index [batch] (int32), embedding_sum like output.
fn embed_layer_normalization(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let ids = ctx.shape(0);
    let (batch, seq) = match ids.as_deref() {
        Some([b, s]) => (b.clone(), s.clone()),
        Some(_) => return Err(ctx.fail(format!("{} must have rank 2", ctx.describe(0)))),
        None => (SymDim::Unknown, SymDim::Unknown),
    };
    let hidden = match ctx.shape(2).as_deref() {
        Some([_, h]) => h.clone(),
        Some(_) => return Err(ctx.fail(format!("{} must have rank 2", ctx.describe(2)))),
        None => SymDim::Unknown,
    };
    let output = vec![batch.clone(), seq, hidden];
    Ok(vec![
        Out::shape(output.clone()),
        Out::shape(vec![batch]).elem(DataType::Int32 as i32),
        Out::shape(output),
    ])
}

/// Attention: input [batch, seq, input_hidden], weights [input_hidden, q+k+v hidden] ->
/// output [batch, seq, v_hidden]; present [2, batch, heads, past + seq, head_size].
fn attention(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let input = ctx.shape(0);
    let (batch, seq) = match input.as_deref() {
        Some([b, s, _]) => (b.clone(), s.clone()),
        Some(_) => return Err(ctx.fail(format!("{} must have rank 3", ctx.describe(0)))),
        None => (SymDim::Unknown, SymDim::Unknown),
    };
    let weights = ctx.shape(1);
    if let (Some([_, _, h]), Some([w, _])) = (input.as_deref(), weights.as_deref()) {
        if dims::unify(h, w).is_none() {
            return Err(ctx.fail(format!(
                "{} and {}: hidden sizes {h} and {w} differ",
                ctx.describe(0),
                ctx.describe(1)
            )));
        }
    }
    let sizes = ctx.attr_ints("qkv_hidden_sizes").filter(|s| !s.is_empty());
    let (qk_hidden, v_hidden) = match (sizes.as_deref(), weights.as_deref()) {
        (Some([q, _, v]), _) => (SymDim::Known(*q), SymDim::Known(*v)),
        (Some(other), _) => {
            return Err(ctx.bad_attr("qkv_hidden_sizes", format!("{other:?} must have 3 entries")))
        }
        (None, Some([_, total])) => {
            let v = div(total, 3);
            (v.clone(), v)
        }
        _ => (SymDim::Unknown, SymDim::Unknown),
    };
    let heads = positive(ctx, "num_heads");
    let head_size = heads.map_or(SymDim::Unknown, |n| div(&qk_hidden, n));
    let present = match ctx.shape(4).as_deref() {
        Some([two, b, n, past, h]) => {
            let total = if ctx.attr_int_or("past_present_share_buffer", 0) != 0 {
                past.clone()
            } else {
                dims::add(past, &seq)
            };
            vec![two.clone(), b.clone(), n.clone(), total, h.clone()]
        }
        Some(_) => return Err(ctx.fail(format!("{} must have rank 5", ctx.describe(4)))),
        None => vec![
            SymDim::Known(2),
            batch.clone(),
            heads.map_or(SymDim::Unknown, SymDim::Known),
            seq.clone(),
            head_size,
        ],
    };
    Ok(vec![
        Out::shape(vec![batch, seq, v_hidden]),
        Out::shape(present),
    ])
}

/// MultiHeadAttention: query [batch, seq, hidden] (or packed QKV [batch, seq, heads, 3, head])
/// -> output [batch, seq, v_hidden]; present_key/value [batch, heads, past + kv_seq, head].
fn multi_head_attention(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(query) = ctx.shape(0) else {
        return Ok(Vec::new());
    };
    let heads = positive(ctx, "num_heads");
    let (batch, seq, q_hidden) = match query.as_slice() {
        [b, s, h] => (b.clone(), s.clone(), h.clone()),
        [b, s, n, _, h] => (b.clone(), s.clone(), dims::mul(n, h)),
        _ => return Err(ctx.fail(format!("{} must have rank 3 or 5", ctx.describe(0)))),
    };
    let key = ctx.shape(1);
    let value = ctx.shape(2);
    let v_hidden = match (value.as_deref(), key.as_deref()) {
        (Some([_, _, v]), _) => v.clone(),
        (Some([_, n, _, h]), _) => dims::mul(n, h),
        (None, Some([_, _, n, _, h])) => dims::mul(n, h),
        _ => q_hidden.clone(),
    };
    let head = heads.map_or(SymDim::Unknown, |n| div(&q_hidden, n));
    let kv_seq = match key.as_deref() {
        Some([_, l, _]) | Some([_, l, _, _, _]) => l.clone(),
        Some([_, _, l, _]) => l.clone(),
        None if query.len() == 5 => seq.clone(),
        _ => SymDim::Unknown,
    };
    // A 4-D key is already the present key (past concatenated by the caller).
    let total = match (key.as_deref(), ctx.shape(6).as_deref()) {
        (Some([_, _, _, _]), _) => kv_seq,
        (_, Some([_, _, past, _])) => dims::add(past, &kv_seq),
        _ => kv_seq,
    };
    let present = vec![
        batch.clone(),
        heads.map_or(SymDim::Unknown, SymDim::Known),
        total,
        head,
    ];
    Ok(vec![
        Out::shape(vec![batch, seq, v_hidden]),
        Out::shape(present.clone()),
        Out::shape(present),
    ])
}

/// GroupQueryAttention: query [batch, seq, heads * head] (or packed with key and value,
/// [batch, seq, (heads + 2 kv_heads) * head]) -> output [batch, seq, heads * head];
/// present_key/value [batch, kv_heads, present_seq, head], present_seq the total sequence
/// length (the past buffer's length when it is longer: a shared buffer).
fn group_query_attention(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(query) = ctx.shape(0) else {
        return Ok(Vec::new());
    };
    let [batch, seq, q_width] = query.as_slice() else {
        return Err(ctx.fail(format!("{} must have rank 3", ctx.describe(0))));
    };
    let heads = positive(ctx, "num_heads")
        .ok_or_else(|| ctx.bad_attr("num_heads", "must be a positive integer"))?;
    let kv_heads = positive(ctx, "kv_num_heads")
        .ok_or_else(|| ctx.bad_attr("kv_num_heads", "must be a positive integer"))?;
    let packed = !ctx.has_input(1);
    let head = if packed {
        div(q_width, heads + 2 * kv_heads)
    } else {
        div(q_width, heads)
    };
    if let (Some(h), false) = (head.known(), packed) {
        if let Some([_, _, k]) = ctx.shape(1).as_deref() {
            if dims::unify(k, &SymDim::Known(h * kv_heads)).is_none() {
                return Err(ctx.fail(format!(
                    "{} does not hold kv_num_heads={kv_heads} heads of size {h}",
                    ctx.describe(1)
                )));
            }
        }
    }
    let total = ctx.sym(6).and_then(|v| match v.as_slice() {
        [t] => Some(t.clone()),
        _ => None,
    });
    let past = ctx.shape(3).and_then(|p| p.get(2).cloned());
    let present_seq = match (past, total) {
        (Some(SymDim::Known(p)), Some(SymDim::Known(t))) => SymDim::Known(p.max(t)),
        (_, Some(t)) => t,
        _ => SymDim::Unknown,
    };
    let output = vec![
        batch.clone(),
        seq.clone(),
        dims::mul(&head, &SymDim::Known(heads)),
    ];
    let present = vec![batch.clone(), SymDim::Known(kv_heads), present_seq, head];
    Ok(vec![
        Out::shape(output),
        Out::shape(present.clone()),
        Out::shape(present),
    ])
}

/// FusedMatMul: alpha * op(A) @ op(B), op transposing the last two dims when transA/transB.
/// With transBatchA/transBatchB (batch dims moved) only the element type is inferred.
fn fused_matmul(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    if ctx.attr_int_or("transBatchA", 0) != 0 || ctx.attr_int_or("transBatchB", 0) != 0 {
        return Ok(vec![Out::default()]);
    }
    let (Some(mut a), Some(mut b)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Out::default()]);
    };
    for (shape, attr) in [(&mut a, "transA"), (&mut b, "transB")] {
        if ctx.attr_int_or(attr, 0) != 0 && shape.len() >= 2 {
            let n = shape.len();
            shape.swap(n - 2, n - 1);
        }
    }
    Ok(vec![Out::maybe_shape(matmul_dims(ctx, &a, &b, 0, 1)?)])
}

fn plain_matmul(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(a), Some(b)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Out::default()]);
    };
    Ok(vec![Out::maybe_shape(matmul_dims(ctx, &a, &b, 0, 1)?)])
}

/// MatMulNBits: A [..., K] times the N x K block-quantized B -> [..., N] (K and N attributes).
fn matmul_n_bits(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let n = ctx
        .attr_int("N")
        .ok_or_else(|| ctx.bad_attr("N", "required attribute is missing"))?;
    let k = ctx
        .attr_int("K")
        .ok_or_else(|| ctx.bad_attr("K", "required attribute is missing"))?;
    let Some(a) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let Some(a_k) = a.last() else {
        return Err(ctx.fail(format!("{} must have rank >= 1", ctx.describe(0))));
    };
    if dims::unify(a_k, &SymDim::Known(k)).is_none() {
        return Err(ctx.fail(format!("{} does not end in K={k}", ctx.describe(0))));
    }
    Ok(vec![Out::shape(with_last(&a, SymDim::Known(n)))])
}

/// GatherBlockQuantized: Gather of `data` along gather_axis, dequantized to the scales' type;
/// uint8 data packs 8/bits values per byte along quantize_axis, which the output unpacks.
fn gather_block_quantized(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = ctx.elem(2);
    let (Some(data), Some(indices)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Out::default().maybe_elem(elem)]);
    };
    let rank = data.len();
    let gather = ctx.axis("gather_axis", ctx.attr_int_or("gather_axis", 0), rank)?;
    let quantize = ctx.axis("quantize_axis", ctx.attr_int_or("quantize_axis", 1), rank)?;
    let bits = ctx.attr_int_or("bits", 4);
    if !matches!(bits, 4 | 8) {
        return Err(ctx.bad_attr("bits", format!("{bits} is not 4 or 8")));
    }
    let mut unpacked = data;
    if ctx.elem(0) == Some(DataType::Uint8 as i32) {
        if let Some(d) = unpacked.get_mut(quantize) {
            *d = dims::mul(d, &SymDim::Known(8 / bits));
        }
    }
    let mut out: Dims = unpacked.get(..gather).unwrap_or_default().to_vec();
    out.extend(indices);
    out.extend_from_slice(unpacked.get(gather + 1..).unwrap_or_default());
    Ok(vec![Out::shape(out).maybe_elem(elem)])
}
