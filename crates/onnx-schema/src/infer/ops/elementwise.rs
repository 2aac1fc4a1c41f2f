//! Elementwise families: unary ops and every op whose output has its first input's shape
//! (activations, normalizations, Softmax, Cast, Clip, quantization, scatters), numpy-broadcasting
//! ops (arithmetic, comparisons, logic, Max/Min/Sum/Mean, Where), and the multi-output ones of
//! the family (Dropout, BatchNormalization, LayerNormalization, DynamicQuantizeLinear).

use onnx_proto::tensor_proto::DataType;

use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::error::InferError;

/// Ops whose single output has the shape of input 0 (element type from the generic rules).
const SAME_SHAPE: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Ceil",
    "Cos",
    "Cosh",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "HardSigmoid",
    "HardSwish",
    "IsInf",
    "IsNaN",
    "LeakyRelu",
    "Log",
    "Mish",
    "Neg",
    "Not",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Celu",
    "Gelu",
    "Swish",
    "BitwiseNot",
    "Softmax",
    "LogSoftmax",
    "Hardmax",
    "LpNormalization",
    "MeanVarianceNormalization",
    "CumSum",
    "CumProd",
    "Trilu",
    "ReverseSequence",
    "Clip",
    "LRN",
    "InstanceNormalization",
    "GroupNormalization",
    "RMSNormalization",
    "RegexFullMatch",
    "ScatterElements",
    "ScatterND",
    "Scatter",
    "RotaryEmbedding",
    "CastLike",
];

/// Ops whose output broadcasts all inputs (numpy rules).
const BROADCAST: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Greater",
    "Less",
    "GreaterOrEqual",
    "LessOrEqual",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Max",
    "Min",
    "Mean",
    "Sum",
    "Where",
    "StringConcat",
    "PRelu",
];

/// Ops that had a `broadcast` attribute before opset 7: then the output has input 0's shape.
const LEGACY_BROADCAST: &[&str] = &[
    "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less", "PRelu",
];

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    if SAME_SHAPE.contains(&op) {
        return Some(same_shape);
    }
    if BROADCAST.contains(&op) {
        return Some(broadcast_all);
    }
    Some(match op {
        "Identity" => identity,
        "Cast" => cast,
        "Dropout" => dropout,
        "BatchNormalization" => batch_normalization,
        "LayerNormalization" => layer_normalization,
        "QuantizeLinear" => quantize_linear,
        "DequantizeLinear" => dequantize_linear,
        "DynamicQuantizeLinear" => dynamic_quantize_linear,
        "Bernoulli" | "RandomUniformLike" | "RandomNormalLike" | "EyeLike" => random_like,
        "TensorScatter" => same_shape,
        _ => return None,
    })
}

pub(crate) fn same_shape(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![Out::maybe_shape(ctx.shape(0))])
}

fn identity(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![Out::typed(ctx.ty(0).cloned())])
}

fn cast(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let to = ctx
        .attr_int("to")
        .ok_or_else(|| ctx.bad_attr("to", "required attribute is missing"))?;
    let to = i32::try_from(to)
        .ok()
        .filter(|t| DataType::try_from(*t).is_ok_and(|d| d != DataType::Undefined))
        .ok_or_else(|| ctx.bad_attr("to", format!("{to} is not an element type")))?;
    Ok(vec![Out::maybe_shape(ctx.shape(0)).elem(to)])
}

/// The broadcast shape of `inputs` (skipping absent ones), or an error naming them.
pub(crate) fn broadcast_inputs(
    ctx: &NodeCtx<'_>,
    inputs: &[usize],
) -> Result<Option<Dims>, InferError> {
    let mut shapes = Vec::with_capacity(inputs.len());
    for &i in inputs {
        if !ctx.has_input(i) {
            continue;
        }
        match ctx.shape(i) {
            Some(s) => shapes.push(s),
            None => return Ok(None),
        }
    }
    let refs: Vec<&[SymDim]> = shapes.iter().map(Vec::as_slice).collect();
    dims::broadcast(&refs).map(Some).map_err(|reason| {
        let described: Vec<String> = inputs.iter().map(|&i| ctx.describe(i)).collect();
        ctx.fail(format!("{}: {reason}", described.join(", ")))
    })
}

fn broadcast_all(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let name = ctx.schema.name.as_str();
    if ctx.since() < 7 && LEGACY_BROADCAST.contains(&name) {
        return same_shape(ctx);
    }
    let all: Vec<usize> = (0..ctx.n_inputs()).collect();
    Ok(vec![Out::maybe_shape(broadcast_inputs(ctx, &all)?)])
}

fn dropout(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let shape = ctx.shape(0);
    Ok(vec![
        Out::maybe_shape(shape.clone()),
        Out::maybe_shape(shape),
    ])
}

/// The channel dim (`[C]`) of an NC... input, from X or from a per-channel input.
fn channels(ctx: &NodeCtx<'_>, per_channel_inputs: &[usize]) -> SymDim {
    let from_x = ctx.shape(0).and_then(|s| s.get(1).cloned());
    let mut c = from_x.unwrap_or(SymDim::Unknown);
    for &i in per_channel_inputs {
        if let Some([d]) = ctx.shape(i).as_deref() {
            c = dims::unify(&c, d).unwrap_or(c);
        }
    }
    c
}

fn batch_normalization(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    if let Some(x) = &x {
        let c = x.get(1).cloned().unwrap_or(SymDim::Known(1));
        for i in 1..5 {
            if let Some([d]) = ctx.shape(i).as_deref() {
                if dims::unify(&c, d).is_none() {
                    return Err(ctx.fail(format!(
                        "{} has {c} channels but {} has {d}",
                        ctx.describe(0),
                        ctx.describe(i)
                    )));
                }
            }
        }
    }
    let c = channels(ctx, &[1, 2, 3, 4]);
    let mut outs = vec![Out::maybe_shape(x)];
    for _ in 1..ctx.n_outputs {
        outs.push(Out::shape(vec![c.clone()]));
    }
    Ok(outs)
}

pub(crate) fn layer_normalization(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let x = ctx.shape(0);
    let stash = i32::try_from(ctx.attr_int_or("stash_type", 1)).unwrap_or(1);
    let stats = match &x {
        Some(x) => {
            let axis = ctx.axis("axis", ctx.attr_int_or("axis", -1), x.len())?;
            let mut s: Dims = x.get(..axis).unwrap_or_default().to_vec();
            s.resize(x.len(), SymDim::Known(1));
            Some(s)
        }
        None => None,
    };
    Ok(vec![
        Out::maybe_shape(x),
        Out::maybe_shape(stats.clone()).elem(stash),
        Out::maybe_shape(stats).elem(stash),
    ])
}

pub(crate) fn quantize_linear(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let out = Out::maybe_shape(ctx.shape(0));
    let output_dtype = ctx.attr_int_or("output_dtype", 0);
    let elem = if let Some(zp) = ctx.elem(2) {
        Some(zp)
    } else if output_dtype != 0 {
        i32::try_from(output_dtype).ok()
    } else {
        Some(DataType::Uint8 as i32)
    };
    Ok(vec![out.maybe_elem(elem)])
}

fn dequantize_linear(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let out = Out::maybe_shape(ctx.shape(0));
    let output_dtype = ctx.attr_int_or("output_dtype", 0);
    let elem = if output_dtype != 0 {
        i32::try_from(output_dtype).ok()
    } else if ctx.since() < 19 {
        Some(DataType::Float as i32)
    } else {
        ctx.elem(1)
    };
    Ok(vec![out.maybe_elem(elem)])
}

fn dynamic_quantize_linear(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    Ok(vec![
        Out::maybe_shape(ctx.shape(0)),
        Out::shape(vec![]),
        Out::shape(vec![]),
    ])
}

fn random_like(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = ctx
        .attr_int("dtype")
        .and_then(|d| i32::try_from(d).ok())
        .or_else(|| ctx.elem(0));
    Ok(vec![Out::maybe_shape(ctx.shape(0)).maybe_elem(elem)])
}
