//! The remaining ops with shape rules: random generators, EyeLike, BitCast, SwiGLU, attention
//! (Attention, LinearAttention, CausalConvWithState), signal processing (DFT, STFT, windows,
//! MelWeightMatrix), strings, NonMaxSuppression, TfIdfVectorizer, ImageDecoder, and the
//! `ai.onnx.ml` and `ai.onnx.preview.training` ops that have simple rules.

use onnx_proto::tensor_proto::DataType;

use super::elementwise::broadcast_inputs;
use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;

/// The rule for `op` of the default domain, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    Some(match op {
        "RandomNormal" | "RandomUniform" => random,
        "Multinomial" => multinomial,
        "BitCast" => bit_cast,
        "SwiGLU" => |ctx| Ok(vec![Out::maybe_shape(broadcast_inputs(ctx, &[0, 1])?)]),
        "Attention" => attention,
        "LinearAttention" => linear_attention,
        "CausalConvWithState" => causal_conv_with_state,
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => window,
        "MelWeightMatrix" => mel_weight_matrix,
        "DFT" => dft,
        "STFT" => stft,
        "NonMaxSuppression" => |_| Ok(vec![Out::shape(vec![SymDim::Unknown, SymDim::Known(3)])]),
        "StringSplit" => string_split,
        "StringNormalizer" => string_normalizer,
        "TfIdfVectorizer" => tf_idf_vectorizer,
        "ImageDecoder" => image_decoder,
        _ => return None,
    })
}

/// The rule for `op` of `ai.onnx.ml`, when there is one.
pub(crate) fn ml_rule(op: &str) -> Option<Rule> {
    Some(match op {
        "Binarizer" | "Imputer" | "Normalizer" | "Scaler" => {
            |ctx| Ok(vec![Out::maybe_shape(ctx.shape(0))])
        }
        "LabelEncoder" => label_encoder,
        "TreeEnsemble" | "TreeEnsembleRegressor" | "LinearRegressor" | "SVMRegressor" => regressor,
        "TreeEnsembleClassifier" | "LinearClassifier" | "SVMClassifier" => classifier,
        "CategoryMapper" => category_mapper,
        "OneHotEncoder" => one_hot_encoder,
        "ArrayFeatureExtractor" => array_feature_extractor,
        _ => return None,
    })
}

/// The rule for `op` of `ai.onnx.preview`, when there is one.
pub(crate) fn preview_rule(op: &str) -> Option<Rule> {
    Some(match op {
        "FlexAttention" => flex_attention,
        _ => return None,
    })
}

/// The rule for `op` of `ai.onnx.preview.training`, when there is one.
pub(crate) fn training_rule(op: &str) -> Option<Rule> {
    Some(match op {
        "Adagrad" | "Momentum" | "Adam" => optimizer,
        _ => return None,
    })
}

fn dtype(ctx: &NodeCtx<'_>, name: &str, default: DataType) -> i32 {
    ctx.attr_int(name)
        .and_then(|d| i32::try_from(d).ok())
        .unwrap_or(default as i32)
}

fn random(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let shape = ctx
        .attr_ints("shape")
        .ok_or_else(|| ctx.bad_attr("shape", "required attribute is missing"))?;
    let dims = shape.into_iter().map(SymDim::Known).collect();
    Ok(vec![Out::shape(dims).elem(dtype(
        ctx,
        "dtype",
        DataType::Float,
    ))])
}

fn multinomial(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let batch = ctx
        .shape(0)
        .and_then(|s| s.first().cloned())
        .unwrap_or(SymDim::Unknown);
    let samples = SymDim::Known(ctx.attr_int_or("sample_size", 1));
    Ok(vec![Out::shape(vec![batch, samples]).elem(dtype(
        ctx,
        "dtype",
        DataType::Int32,
    ))])
}

fn bit_cast(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let to = ctx
        .attr_int("to")
        .and_then(|t| i32::try_from(t).ok())
        .ok_or_else(|| ctx.bad_attr("to", "required attribute is missing"))?;
    Ok(vec![Out::maybe_shape(ctx.shape(0)).elem(to)])
}

fn heads(ctx: &NodeCtx<'_>, name: &str) -> Option<i64> {
    ctx.attr_int(name).filter(|h| *h > 0)
}

fn attention(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(q), k, v) = (ctx.shape(0), ctx.shape(1), ctx.shape(2)) else {
        return Ok(Vec::new());
    };
    let past_seq = ctx.shape(4).and_then(|p| p.get(2).cloned());
    let kv_seq = match k.as_deref() {
        Some([_, s, _]) | Some([_, _, s, _]) => s.clone(),
        _ => SymDim::Unknown,
    };
    let total_seq = match past_seq {
        Some(p) => dims::add(&p, &kv_seq),
        None => kv_seq.clone(),
    };
    let (batch, q_heads, q_seq) = match q.as_slice() {
        [b, s, _] => (
            b.clone(),
            heads(ctx, "q_num_heads").map_or(SymDim::Unknown, SymDim::Known),
            s.clone(),
        ),
        [b, h, s, _] => (b.clone(), h.clone(), s.clone()),
        _ => return Err(ctx.fail(format!("{} must have rank 3 or 4", ctx.describe(0)))),
    };
    let kv_heads = match k.as_deref() {
        Some([_, h, _, _]) => h.clone(),
        _ => heads(ctx, "kv_num_heads").map_or(SymDim::Unknown, SymDim::Known),
    };
    let head_of = |shape: Option<&Dims>| -> SymDim {
        match shape.map(Vec::as_slice) {
            Some([_, _, _, d]) => d.clone(),
            Some([_, _, hidden]) => dims::floor_div(hidden, &kv_heads),
            _ => SymDim::Unknown,
        }
    };
    let (k_head, v_head) = (head_of(k.as_ref()), head_of(v.as_ref()));
    let y = if q.len() == 3 {
        vec![batch.clone(), q_seq.clone(), dims::mul(&q_heads, &v_head)]
    } else {
        vec![
            batch.clone(),
            q_heads.clone(),
            q_seq.clone(),
            v_head.clone(),
        ]
    };
    Ok(vec![
        Out::shape(y),
        Out::shape(vec![
            batch.clone(),
            kv_heads.clone(),
            total_seq.clone(),
            k_head,
        ]),
        Out::shape(vec![batch.clone(), kv_heads, total_seq.clone(), v_head]),
        Out::shape(vec![batch, q_heads, q_seq, total_seq]),
    ])
}

fn linear_attention(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(q), Some(k), Some(v)) = (ctx.shape(0), ctx.shape(1), ctx.shape(2)) else {
        return Ok(Vec::new());
    };
    let ([b, t, _], [_, _, k_hidden], [_, _, v_hidden]) =
        (q.as_slice(), k.as_slice(), v.as_slice())
    else {
        return Err(ctx.fail("query, key and value must have rank 3"));
    };
    let q_heads = SymDim::Known(heads(ctx, "q_num_heads").unwrap_or(1));
    let kv_heads = SymDim::Known(heads(ctx, "kv_num_heads").unwrap_or(1));
    let d_k = dims::floor_div(k_hidden, &kv_heads);
    let d_v = dims::floor_div(v_hidden, &kv_heads);
    // The state has past_state's type, else the query's.
    let state_elem = ctx.elem(3).or_else(|| ctx.elem(0));
    Ok(vec![
        Out::shape(vec![b.clone(), t.clone(), dims::mul(&q_heads, &d_v)]),
        Out::shape(vec![b.clone(), kv_heads, d_k, d_v]).maybe_elem(state_elem),
    ])
}

fn causal_conv_with_state(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    let state = match (x.as_deref(), ctx.shape(1).as_deref()) {
        (Some([b, c, _]), Some([_, _, k])) => {
            Some(vec![b.clone(), c.clone(), dims::sub(k, &SymDim::Known(1))])
        }
        (Some([b, c, _]), _) => Some(vec![b.clone(), c.clone(), SymDim::Unknown]),
        _ => None,
    };
    Ok(vec![Out::maybe_shape(x), Out::maybe_shape(state)])
}

fn window(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let size = ctx
        .sym(0)
        .and_then(|v| v.into_iter().next())
        .unwrap_or(SymDim::Unknown);
    Ok(vec![Out::shape(vec![size]).elem(dtype(
        ctx,
        "output_datatype",
        DataType::Float,
    ))])
}

fn mel_weight_matrix(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let bins = ctx
        .int_scalar(1)
        .map_or(SymDim::Unknown, |n| SymDim::Known(n / 2 + 1));
    let mels = ctx.int_scalar(0).map_or(SymDim::Unknown, SymDim::Known);
    Ok(vec![Out::shape(vec![bins, mels]).elem(dtype(
        ctx,
        "output_datatype",
        DataType::Float,
    ))])
}

fn dft(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(mut x) = ctx.shape(0) else {
        return Ok(vec![Out::default()]);
    };
    let rank = x.len();
    let axis = if ctx.since() >= 20 {
        if ctx.has_input(2) {
            match ctx.int_scalar(2) {
                Some(a) => a,
                None => return Ok(vec![Out::rank(rank)]),
            }
        } else {
            -2
        }
    } else {
        ctx.attr_int_or("axis", 1)
    };
    // The last dim holds (real) or (real, imaginary); axes count over the others too.
    let axis = ctx.axis("axis", axis, rank)?;
    if axis + 1 == rank {
        return Err(ctx.bad_attr("axis", "cannot be the last (complex) dim"));
    }
    let n = x.get(axis).cloned().unwrap_or(SymDim::Unknown);
    let dft_length = if ctx.has_input(1) {
        Some(ctx.int_scalar(1).map_or(SymDim::Unknown, SymDim::Known))
    } else {
        None
    };
    let onesided = ctx.attr_int_or("onesided", 0) != 0;
    let inverse = ctx.attr_int_or("inverse", 0) != 0;
    let (length, last) = match (onesided, inverse) {
        // An inverse one-sided transform rebuilds a real signal of 2 * (n - 1) samples.
        (true, true) => (
            dft_length.unwrap_or_else(|| {
                n.known()
                    .and_then(|v| (v - 1).checked_mul(2))
                    .map_or(SymDim::Unknown, SymDim::Known)
            }),
            1,
        ),
        (true, false) => (
            dft_length
                .unwrap_or(n)
                .known()
                .map_or(SymDim::Unknown, |v| SymDim::Known(v / 2 + 1)),
            2,
        ),
        (false, _) => (dft_length.unwrap_or(n), 2),
    };
    if let Some(slot) = x.get_mut(axis) {
        *slot = length;
    }
    if let Some(slot) = x.last_mut() {
        *slot = SymDim::Known(last);
    }
    Ok(vec![Out::shape(x)])
}

fn stft(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(signal) = ctx.shape(0) else {
        return Ok(vec![Out::rank(4)]);
    };
    let batch = signal.first().cloned().unwrap_or(SymDim::Unknown);
    let frame_length = ctx
        .int_scalar(3)
        .or_else(|| ctx.shape(2).and_then(|w| w.first().and_then(SymDim::known)));
    let step = ctx.int_scalar(1);
    let frames = match (signal.get(1).and_then(SymDim::known), frame_length, step) {
        (Some(n), Some(l), Some(s)) if s > 0 => n
            .checked_sub(l)
            .and_then(|t| dims::div_floor(t, s)?.checked_add(1))
            .map_or(SymDim::Unknown, SymDim::Known),
        _ => SymDim::Unknown,
    };
    let bins = frame_length.map_or(SymDim::Unknown, |l| {
        SymDim::Known(if ctx.attr_int_or("onesided", 1) != 0 {
            l / 2 + 1
        } else {
            l
        })
    });
    Ok(vec![Out::shape(vec![
        batch,
        frames,
        bins,
        SymDim::Known(2),
    ])])
}

fn string_split(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    let y = x
        .as_ref()
        .map(|s| [s.clone(), vec![SymDim::Unknown]].concat());
    Ok(vec![Out::maybe_shape(y), Out::maybe_shape(x)])
}

fn string_normalizer(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let out = match ctx.shape(0).as_deref() {
        Some([_]) => Some(vec![SymDim::Unknown]),
        Some([one, _]) => Some(vec![one.clone(), SymDim::Unknown]),
        _ => None,
    };
    Ok(vec![Out::maybe_shape(out)])
}

fn tf_idf_vectorizer(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let size = ctx
        .attr_ints("ngram_indexes")
        .and_then(|v| v.into_iter().max())
        .and_then(|m| m.checked_add(1))
        .map_or(SymDim::Unknown, SymDim::Known);
    let out = match ctx.shape(0).as_deref() {
        Some([_]) => Some(vec![size]),
        Some([n, _]) => Some(vec![n.clone(), size]),
        _ => None,
    };
    Ok(vec![Out::maybe_shape(out)])
}

fn image_decoder(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let channels = match ctx.attr_str("pixel_format").as_deref() {
        Some("Grayscale") => 1,
        _ => 3,
    };
    Ok(vec![Out::shape(vec![
        SymDim::Unknown,
        SymDim::Unknown,
        SymDim::Known(channels),
    ])])
}

fn label_encoder(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = if let Some(t) = ctx.attr_tensor("values_tensor") {
        t.data_type
    } else if ctx.has_attr("values_strings") {
        Some(DataType::String as i32)
    } else if ctx.has_attr("values_int64s") {
        Some(DataType::Int64 as i32)
    } else if ctx.has_attr("values_floats") {
        Some(DataType::Float as i32)
    } else {
        None
    };
    Ok(vec![Out::maybe_shape(ctx.shape(0)).maybe_elem(elem)])
}

/// The number of rows of a 2-D (or 1-D: one row) ML input.
fn rows(ctx: &NodeCtx<'_>) -> SymDim {
    match ctx.shape(0).as_deref() {
        Some([_]) => SymDim::Known(1),
        Some([n, ..]) => n.clone(),
        _ => SymDim::Unknown,
    }
}

fn list_len(ctx: &NodeCtx<'_>, names: &[&str]) -> Option<i64> {
    names.iter().find_map(|name| {
        let attr = ctx.attr(name).filter(|_| ctx.has_attr(name))?;
        let n = attr
            .ints
            .len()
            .max(attr.strings.len())
            .max(attr.floats.len());
        i64::try_from(n).ok()
    })
}

fn regressor(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let targets = if ctx.schema.name == "SVMRegressor" {
        Some(1)
    } else {
        ctx.attr_int("n_targets")
            .or_else(|| ctx.attr_int("targets"))
    };
    let targets = targets.map_or(SymDim::Unknown, SymDim::Known);
    Ok(vec![Out::shape(vec![rows(ctx), targets])])
}

fn classifier(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (label_elem, n_classes) = if let Some(n) = list_len(ctx, &["classlabels_strings"]) {
        (DataType::String, Some(n))
    } else {
        (
            DataType::Int64,
            list_len(ctx, &["classlabels_ints", "classlabels_int64s"]),
        )
    };
    let n = rows(ctx);
    Ok(vec![
        Out::shape(vec![n.clone()]).elem(label_elem as i32),
        Out::shape(vec![n, n_classes.map_or(SymDim::Unknown, SymDim::Known)]),
    ])
}

fn category_mapper(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = match ctx.elem(0) {
        Some(e) if e == DataType::String as i32 => Some(DataType::Int64 as i32),
        Some(_) => Some(DataType::String as i32),
        None => None,
    };
    Ok(vec![Out::maybe_shape(ctx.shape(0)).maybe_elem(elem)])
}

fn one_hot_encoder(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let n = list_len(ctx, &["cats_int64s", "cats_strings"]).map_or(SymDim::Unknown, SymDim::Known);
    let out = ctx.shape(0).map(|s| [s, vec![n]].concat());
    Ok(vec![Out::maybe_shape(out)])
}

fn flex_attention(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(q), v) = (ctx.shape(0), ctx.shape(2)) else {
        return Ok(Vec::new());
    };
    let [b, h, s, _] = q.as_slice() else {
        return Err(ctx.fail(format!("{} must have rank 4", ctx.describe(0))));
    };
    let v_head = v.and_then(|v| v.get(3).cloned()).unwrap_or(SymDim::Unknown);
    Ok(vec![Out::shape(vec![
        b.clone(),
        h.clone(),
        s.clone(),
        v_head,
    ])])
}

fn array_feature_extractor(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(x), Some(y)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Out::default()]);
    };
    let n = dims::product(&y);
    let out = match x.split_last() {
        Some((_, lead)) if !lead.is_empty() => [lead.to_vec(), vec![n]].concat(),
        _ => vec![SymDim::Known(1), n],
    };
    Ok(vec![Out::shape(out)])
}

fn optimizer(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    // Inputs: R, T, then groups of n tensors (X, G, and V/H state); outputs: new X, then the new
    // states, each the type of the input it updates (every group but the gradients G).
    let groups = if ctx.schema.name == "Adam" { 4 } else { 3 };
    let n = ctx.n_inputs().saturating_sub(2) / groups;
    let out_groups: &[usize] = if groups == 4 { &[0, 2, 3] } else { &[0, 2] };
    let outs = (0..ctx.n_outputs)
        .map(|j| {
            let (g, k) = (j / n.max(1), j % n.max(1));
            let input = out_groups.get(g).map(|&group| 2 + group * n + k);
            Out::typed(input.and_then(|i| ctx.ty(i).cloned()))
        })
        .collect();
    Ok(outs)
}
