//! ai.onnx.preview FlexAttention (version 1): scaled dot-product attention over rank-4 inputs
//! with grouped key/value heads and two optional modifier subgraphs, `score_mod` (applied to
//! the scores before softmax) and `prob_mod` (applied to the probabilities after it).
//!
//! The scores are computed in the input type (Q and K pre-scaled by √scale, rounded like the
//! reference), then everything from the softmax on runs in the softmax precision: f32 for
//! 16-bit and f32 inputs, f64 for f64, or the `softmax_precision` attribute.
//!
//! The modifier subgraphs run with the built-in kernels at ai.onnx opset
//! [`MODIFIER_OPSET`]: the op does not see the model's opset imports, and the subgraphs may
//! not read values from the enclosing graph.
//!
//! Running a subgraph needs the planner, so FlexAttention is a planning step, not a registered
//! kernel: this module is its arithmetic, given the planner's part as a [`ModifierGraphs`]
//! (planning a modifier graph, running the plan); `crate::flex_attention` is the step. Layer: a
//! kernel module (imports the kernel interface and the kernels' helpers only).

use half::{bf16, f16};
use onnx_proto::GraphProto;

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::KernelCtx;
use crate::kernels::cast_tensor;
use crate::kernels::matmul::{GemmElem, MatRef};
use crate::tensor::Tensor;
use crate::value::Value;

/// The ai.onnx opset the modifier subgraphs are planned with.
pub(crate) const MODIFIER_OPSET: i64 = 26;

/// The planner's part of FlexAttention: plans a modifier subgraph (with the built-in kernels at
/// [`MODIFIER_OPSET`], reading no outer value), and runs such a plan on its inputs.
pub(crate) trait ModifierGraphs {
    /// A planned modifier graph.
    type Plan;
    /// Plans `graph`.
    fn plan_graph(&self, graph: &GraphProto) -> Result<Self::Plan>;
    /// Runs a plan; returns the graph outputs in order.
    fn run_plan(&self, plan: &Self::Plan, inputs: Vec<Option<Value>>) -> Result<Vec<Value>>;
}

/// Rounding of an f64 to a float type and back.
fn rounding(dtype: DType) -> Result<fn(f64) -> f64> {
    Ok(match dtype {
        DType::Float => |x| x as f32 as f64,
        DType::Double => |x| x,
        DType::Float16 => |x| f16::from_f64(x).to_f64(),
        DType::Bfloat16 => |x| bf16::from_f64(x).to_f64(),
        other => {
            return Err(RefError::op(format!(
                "FlexAttention computes in float types, not {other}"
            )))
        }
    })
}

/// Runs a modifier subgraph on one tensor and returns its single output as f64 values,
/// checking it kept the shape.
fn run_modifier<M: ModifierGraphs>(
    modifiers: &M,
    graph: &GraphProto,
    what: &str,
    shape: &[usize],
    values: &[f64],
    dtype: DType,
) -> Result<Vec<f64>> {
    // The graph must name its one input (its value is fed by position).
    graph
        .input
        .first()
        .and_then(|i| i.name.clone())
        .ok_or_else(|| RefError::op(format!("{what} graph has no input")))?;
    if graph.input.len() != 1 || graph.output.len() != 1 {
        return Err(RefError::op(format!(
            "{what} graph must have one input and one output, has {} and {}",
            graph.input.len(),
            graph.output.len()
        )));
    }
    let plan = modifiers.plan_graph(graph)?;
    let feed = cast_tensor(&Tensor::from_vec(shape, values.to_vec())?, dtype)?;
    let mut outs = modifiers.run_plan(&plan, vec![Some(Value::Tensor(feed))])?;
    let out = match outs.pop() {
        Some(Value::Tensor(t)) => t,
        _ => {
            return Err(RefError::op(format!(
                "{what} graph did not produce a tensor"
            )))
        }
    };
    if out.shape() != shape {
        return Err(RefError::op(format!(
            "{what} graph changed the shape {shape:?} to {:?}",
            out.shape()
        )));
    }
    out.to_f64_vec()
}

/// FlexAttention on the node's inputs, its modifier subgraphs planned and run by `modifiers`.
pub(crate) fn flex_attention<M: ModifierGraphs>(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    modifiers: &M,
) -> Result<Vec<Value>> {
    let q = ctx.input(inputs, 0)?;
    let k = ctx.input(inputs, 1)?;
    let v = ctx.input(inputs, 2)?;
    let dtype = q.dtype();
    if k.dtype() != dtype || v.dtype() != dtype {
        return Err(ctx.err("Q, K and V must have the same type"));
    }
    let round_t = rounding(dtype)?;
    let compute = match ctx.attr_opt_int("softmax_precision")? {
        Some(code) => i32::try_from(code)
            .ok()
            .and_then(DType::from_code)
            .filter(|d| {
                matches!(
                    d,
                    DType::Float | DType::Double | DType::Float16 | DType::Bfloat16
                )
            })
            .ok_or_else(|| ctx.err(format!("unsupported softmax_precision {code}")))?,
        None if dtype == DType::Double => DType::Double,
        None => DType::Float,
    };
    let round_c = rounding(compute)?;
    let (&[b, hq, l, e], &[bk, hkv, s, ek], &[bv, hv, sv, ev]) = (q.shape(), k.shape(), v.shape())
    else {
        return Err(ctx.err(format!(
            "Q, K and V must be rank 4, got {:?}, {:?} and {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    };
    if bk != b || bv != b || hv != hkv || sv != s || ek != e {
        return Err(ctx.err(format!(
            "Q {:?}, K {:?} and V {:?} do not agree",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    if hkv == 0 || hq % hkv != 0 {
        return Err(ctx.err(format!(
            "{hq} query heads are not a multiple of {hkv} key/value heads"
        )));
    }
    let group = hq / hkv;
    let score_shape = [b, hq, l, s];
    crate::tensor::check_size("FlexAttention scores", &score_shape)?;
    let scale = match ctx.attr_opt_float("scale")? {
        Some(x) => x,
        None => 1.0 / (e as f32).sqrt(),
    };
    let sqrt_scale = round_t(scale.sqrt() as f64);
    let qv: Vec<f64> = q
        .to_f64_vec()?
        .into_iter()
        .map(|x| round_t(x * sqrt_scale))
        .collect();
    let kv: Vec<f64> = k
        .to_f64_vec()?
        .into_iter()
        .map(|x| round_t(x * sqrt_scale))
        .collect();
    let vv: Vec<f64> = v.to_f64_vec()?.into_iter().map(round_c).collect();

    let mut scores = vec![0.0f64; b * hq * l * s];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            let out = &mut scores[(bi * hq + h) * l * s..][..l * s];
            f64::gemm(
                l,
                e,
                s,
                1.0,
                MatRef {
                    data: &qv[(bi * hq + h) * l * e..][..l * e],
                    rs: e,
                    cs: 1,
                },
                MatRef {
                    data: &kv[(bi * hkv + kh) * s * e..][..s * e],
                    rs: 1,
                    cs: e,
                },
                0.0,
                out,
            )?;
        }
    }
    // The product is rounded to the input type, then cast to the softmax precision.
    for x in scores.iter_mut() {
        *x = round_c(round_t(*x));
    }
    if let Some(g) = ctx.attr_graph("score_mod") {
        scores = run_modifier(modifiers, g, "score_mod", &score_shape, &scores, compute)
            .map_err(|e| e.in_node(&ctx.node_ref()))?;
    }
    if s > 0 {
        for row in scores.chunks_mut(s) {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, |m, x| {
                if x.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(x)
                }
            });
            let mut sum = 0.0;
            for x in row.iter_mut() {
                *x = round_c(round_c(*x - max).exp());
                sum += *x;
            }
            let sum = round_c(sum);
            for x in row.iter_mut() {
                *x = round_c(*x / sum);
            }
        }
    }
    if let Some(g) = ctx.attr_graph("prob_mod") {
        scores = run_modifier(modifiers, g, "prob_mod", &score_shape, &scores, compute)
            .map_err(|e| e.in_node(&ctx.node_ref()))?;
    }
    let mut y = vec![0.0f64; b * hq * l * ev];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            f64::gemm(
                l,
                s,
                ev,
                1.0,
                MatRef {
                    data: &scores[(bi * hq + h) * l * s..][..l * s],
                    rs: s,
                    cs: 1,
                },
                MatRef {
                    data: &vv[(bi * hkv + kh) * s * ev..][..s * ev],
                    rs: ev,
                    cs: 1,
                },
                0.0,
                &mut y[(bi * hq + h) * l * ev..][..l * ev],
            )?;
        }
    }
    let y: Vec<f64> = y.into_iter().map(round_c).collect();
    let out = cast_tensor(&Tensor::from_vec(&[b, hq, l, ev], y)?, dtype)?;
    Ok(vec![Value::Tensor(out)])
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32_tensor, floats, node, run};
    use onnx_proto::{AttributeProto, GraphProto, NodeProto, TensorProto, ValueInfoProto};

    fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
        AttributeProto {
            name: Some(name.to_string()),
            g: Some(g),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Graph as i32),
            ..Default::default()
        }
    }

    /// A graph computing `y = x * c` for a float constant `c`.
    fn scale_graph(c: f32) -> GraphProto {
        let vi = |n: &str| ValueInfoProto {
            name: Some(n.to_string()),
            ..Default::default()
        };
        GraphProto {
            name: Some("mod".into()),
            node: vec![NodeProto {
                op_type: Some("Mul".into()),
                input: vec!["x".into(), "c".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            initializer: vec![TensorProto {
                name: Some("c".into()),
                data_type: Some(1),
                float_data: vec![c],
                ..Default::default()
            }],
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        }
    }

    #[test]
    fn uniform_scores_average_values_and_mods_apply() {
        let q = f32_tensor(&[1, 1, 1, 2], vec![0.0, 0.0]);
        let k = f32_tensor(&[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let v = f32_tensor(&[1, 1, 2, 1], vec![2.0, 4.0]);
        let n = node("FlexAttention", "ai.onnx.preview", 3, 1, vec![]);
        let out = run(&n, 1, &[q.clone(), k.clone(), v.clone()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![3.0]);
        let n = node(
            "FlexAttention",
            "ai.onnx.preview",
            3,
            1,
            vec![graph_attr("prob_mod", scale_graph(0.5))],
        );
        let out = run(&n, 1, &[q.clone(), k.clone(), v.clone()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![1.5]);
        // Rank-3 inputs are refused.
        let n = node("FlexAttention", "ai.onnx.preview", 3, 1, vec![]);
        let x = f32_tensor(&[1, 2, 2], vec![0.0; 4]);
        assert!(run(&n, 1, &[x.clone(), x.clone(), x]).is_err());
    }
}
