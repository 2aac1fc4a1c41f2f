//! Control flow (If, Loop, Scan, SequenceMap), sequences and optionals.
//!
//! Bodies are inferred with [`infer_graph`](crate::infer::infer_graph) from the types their
//! inputs get from the node; values a body reads from the outer scope are unknown there, so a
//! body output's declared type is used where it says more. If joins its branches: dims that
//! differ become unknown.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::type_proto::{self, Value};
use onnx_proto::{GraphProto, TypeProto};

use super::Rule;
use crate::infer::context::{NodeCtx, Out};
use crate::infer::dims::{self, Dims, SymDim};
use crate::infer::element_types::{strip_shapes, tensor_of};
use crate::infer::error::InferError;
use crate::infer::graph::{infer_subgraph_outputs, OpsetImports};

/// The rule for `op`, when this family has one.
pub(crate) fn rule(op: &str) -> Option<Rule> {
    Some(match op {
        "If" => if_,
        "Loop" => loop_,
        "Scan" => scan,
        "SequenceMap" => sequence_map,
        "SequenceEmpty" => sequence_empty,
        "SequenceConstruct" => sequence_construct,
        "SequenceInsert" => sequence_insert,
        "SequenceErase" => |ctx| Ok(vec![Out::typed(ctx.ty(0).cloned())]),
        "SequenceAt" => |ctx| Ok(vec![Out::typed(ctx.ty(0).and_then(seq_elem))]),
        "SequenceLength" | "OptionalHasElement" => |_| Ok(vec![Out::shape(vec![])]),
        "SplitToSequence" => split_to_sequence,
        "ConcatFromSequence" => concat_from_sequence,
        "Optional" => optional,
        "OptionalGetElement" => optional_get_element,
        _ => return None,
    })
}

fn seq_of(ty: TypeProto) -> TypeProto {
    TypeProto {
        value: Some(Value::SequenceType(Box::new(type_proto::Sequence {
            elem_type: Some(Box::new(ty)),
        }))),
        denotation: None,
    }
}

fn seq_elem(ty: &TypeProto) -> Option<TypeProto> {
    match ty.value.as_ref()? {
        Value::SequenceType(s) => s.elem_type.as_deref().cloned(),
        _ => None,
    }
}

/// The tensor type with `shape` replaced (element type kept).
fn with_shape(ty: &TypeProto, shape: Option<&[SymDim]>) -> TypeProto {
    dims::tensor_type(dims::elem_type_of(ty), shape)
}

/// The type a value has when it is either `a` or `b`: equal dims stay, others become unknown.
pub(crate) fn join_types(a: Option<&TypeProto>, b: Option<&TypeProto>) -> Option<TypeProto> {
    match (a, b) {
        (Some(a), Some(b)) if a == b => Some(a.clone()),
        (Some(a), Some(b)) => {
            let (Some(ea), Some(eb)) = (dims::elem_type_of(a), dims::elem_type_of(b)) else {
                return Some(strip_shapes(a));
            };
            let shape = match (dims::shape_of(a), dims::shape_of(b)) {
                (Some(sa), Some(sb)) if sa.len() == sb.len() => Some(
                    sa.iter()
                        .zip(&sb)
                        .map(|(x, y)| dims::join(x, y))
                        .collect::<Dims>(),
                ),
                _ => None,
            };
            Some(dims::tensor_type(
                Some(if ea == eb { ea } else { 0 }),
                shape.as_deref(),
            ))
        }
        (Some(x), None) | (None, Some(x)) => Some(strip_shapes(x)),
        (None, None) => None,
    }
}

/// Combines a body output's declared type with the inferred one: the declared type wins where
/// it says something (a non-tensor type, a known element type, a dim that is not unknown), the
/// inferred one fills the rest.
fn prefer(declared: Option<&TypeProto>, inferred: Option<&TypeProto>) -> Option<TypeProto> {
    let (Some(d), Some(i)) = (declared, inferred) else {
        return declared.or(inferred).cloned();
    };
    if !is_tensor(d) || !is_tensor(i) {
        return Some(d.clone());
    }
    let elem = dims::elem_type_of(d).or_else(|| dims::elem_type_of(i));
    let shape = match (dims::shape_of(d), dims::shape_of(i)) {
        (Some(ds), Some(is)) if ds.len() == is.len() => Some(
            ds.iter()
                .zip(&is)
                .map(|(x, y)| match x {
                    SymDim::Unknown => y.clone(),
                    _ => x.clone(),
                })
                .collect::<Dims>(),
        ),
        (Some(ds), _) => Some(ds),
        (None, is) => is,
    };
    Some(dims::tensor_type(elem, shape.as_deref()))
}

/// The output types of `body` when its inputs have `input_types` (`None`: as declared), with
/// the enclosing graph's values visible.
fn body_outputs(
    ctx: &NodeCtx<'_>,
    body: &GraphProto,
    input_types: &[Option<TypeProto>],
) -> Vec<Option<TypeProto>> {
    let mut graph = body.clone();
    for (input, ty) in graph.input.iter_mut().zip(input_types) {
        let declared_shape = input.r#type.as_ref().and_then(dims::shape_of);
        if let (Some(ty), None) = (ty, declared_shape) {
            input.r#type = Some(ty.clone());
        }
    }
    let opsets: OpsetImports = [(String::new(), ctx.opset)].into_iter().collect();
    let inferred = infer_subgraph_outputs(&graph, &opsets, ctx.scope);
    body.output
        .iter()
        .enumerate()
        .map(|(i, o)| prefer(o.r#type.as_ref(), inferred.get(i).and_then(Option::as_ref)))
        .collect()
}

fn if_(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (Some(then_branch), Some(else_branch)) =
        (ctx.attr_graph("then_branch"), ctx.attr_graph("else_branch"))
    else {
        return Err(ctx.bad_attr("then_branch", "If needs then_branch and else_branch"));
    };
    // A known condition selects one branch.
    match ctx.int_scalar(0) {
        Some(0) => {
            return Ok(body_outputs(ctx, else_branch, &[])
                .into_iter()
                .map(Out::typed)
                .collect())
        }
        Some(_) => {
            return Ok(body_outputs(ctx, then_branch, &[])
                .into_iter()
                .map(Out::typed)
                .collect())
        }
        None => {}
    }
    let then_out = body_outputs(ctx, then_branch, &[]);
    let else_out = body_outputs(ctx, else_branch, &[]);
    if then_out.len() != else_out.len() || then_out.len() != ctx.n_outputs {
        return Err(ctx.fail(format!(
            "then_branch has {} outputs, else_branch {}, the node {}",
            then_out.len(),
            else_out.len(),
            ctx.n_outputs
        )));
    }
    Ok(then_out
        .iter()
        .zip(&else_out)
        .map(|(a, b)| Out::typed(join_types(a.as_ref(), b.as_ref())))
        .collect())
}

/// The final type of a loop-carried value: its initial type or the body's output type, which
/// wins when they are not both tensors (an optional sequence may come back as a sequence).
fn carried_type(initial: Option<&TypeProto>, body: Option<TypeProto>) -> Option<TypeProto> {
    match (initial, body) {
        (Some(i), Some(b)) if is_tensor(i) && is_tensor(&b) => join_types(Some(i), Some(&b)),
        (_, Some(b)) => Some(strip_shapes(&b)),
        (i, None) => i.map(strip_shapes),
    }
}

fn is_tensor(ty: &TypeProto) -> bool {
    matches!(ty.value, Some(Value::TensorType(_)))
}

fn scalar(elem: DataType) -> TypeProto {
    dims::tensor_type(Some(elem as i32), Some(&[]))
}

fn loop_(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let body = ctx
        .attr_graph("body")
        .ok_or_else(|| ctx.bad_attr("body", "required attribute is missing"))?;
    let n_carried = ctx.n_inputs().saturating_sub(2);
    let mut body_inputs = vec![Some(scalar(DataType::Int64)), Some(scalar(DataType::Bool))];
    body_inputs.extend((0..n_carried).map(|i| ctx.ty(2 + i).cloned()));
    let outs = body_outputs(ctx, body, &body_inputs);
    let trip_count = if ctx.has_input(1) {
        SymDim::Unknown
    } else {
        ctx.int_scalar(0).map_or(SymDim::Unknown, SymDim::Known)
    };
    let mut result = Vec::with_capacity(ctx.n_outputs);
    for j in 0..ctx.n_outputs {
        let body_ty = outs.get(1 + j).cloned().flatten();
        if j < n_carried {
            result.push(Out::typed(carried_type(ctx.ty(2 + j), body_ty)));
        } else {
            let ty = body_ty.map(|t| {
                let shape = dims::shape_of(&t).map(|s| [vec![trip_count.clone()], s].concat());
                with_shape(&t, shape.as_deref())
            });
            result.push(Out::typed(ty));
        }
    }
    Ok(result)
}

fn scan(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let body = ctx
        .attr_graph("body")
        .ok_or_else(|| ctx.bad_attr("body", "required attribute is missing"))?;
    let n_scan = usize::try_from(ctx.attr_int_or("num_scan_inputs", 0)).unwrap_or(0);
    if ctx.since() < 9 {
        // Scan-8 has a batch axis and sequence_lens; only the element types are inferred.
        let outs = body_outputs(ctx, body, &[]);
        return Ok(outs
            .iter()
            .map(|t| Out::typed(t.as_ref().map(strip_shapes)))
            .collect());
    }
    let n_states = ctx.n_inputs().checked_sub(n_scan).ok_or_else(|| {
        ctx.fail(format!(
            "num_scan_inputs {n_scan} exceeds the {} inputs",
            ctx.n_inputs()
        ))
    })?;
    let input_axes = ctx.attr_ints("scan_input_axes").unwrap_or_default();
    let output_axes = ctx.attr_ints("scan_output_axes").unwrap_or_default();
    let mut seq_len = SymDim::Unknown;
    let mut body_inputs: Vec<Option<TypeProto>> =
        (0..n_states).map(|i| ctx.ty(i).cloned()).collect();
    for k in 0..n_scan {
        let i = n_states + k;
        let ty = ctx.ty(i).map(|t| {
            let shape = ctx.shape(i).and_then(|mut s| {
                let axis = dims::normalize_axis(input_axes.get(k).copied().unwrap_or(0), s.len())?;
                let removed = s.remove(axis);
                if k == 0 {
                    seq_len = removed;
                }
                Some(s)
            });
            with_shape(t, shape.as_deref())
        });
        body_inputs.push(ty);
    }
    let outs = body_outputs(ctx, body, &body_inputs);
    let mut result = Vec::with_capacity(ctx.n_outputs);
    for j in 0..ctx.n_outputs {
        let body_ty = outs.get(j).cloned().flatten();
        if j < n_states {
            result.push(Out::typed(carried_type(ctx.ty(j), body_ty)));
            continue;
        }
        let k = j - n_states;
        let ty = body_ty.map(|t| {
            let shape = dims::shape_of(&t).and_then(|mut s| {
                let axis =
                    dims::normalize_axis(output_axes.get(k).copied().unwrap_or(0), s.len() + 1)?;
                s.insert(axis, seq_len.clone());
                Some(s)
            });
            with_shape(&t, shape.as_deref())
        });
        result.push(Out::typed(ty));
    }
    Ok(result)
}

fn sequence_map(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let body = ctx
        .attr_graph("body")
        .ok_or_else(|| ctx.bad_attr("body", "required attribute is missing"))?;
    let body_inputs: Vec<Option<TypeProto>> = (0..ctx.n_inputs())
        .map(|i| ctx.ty(i).map(|t| seq_elem(t).unwrap_or_else(|| t.clone())))
        .collect();
    let outs = body_outputs(ctx, body, &body_inputs);
    Ok(outs
        .into_iter()
        .map(|t| Out::typed(t.map(seq_of)))
        .collect())
}

fn sequence_empty(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = ctx
        .attr_int("dtype")
        .and_then(|d| i32::try_from(d).ok())
        .and_then(|d| DataType::try_from(d).ok())
        .unwrap_or(DataType::Float);
    Ok(vec![Out::typed(Some(seq_of(tensor_of(elem))))])
}

fn sequence_construct(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let mut joined = ctx.ty(0).cloned();
    for i in 1..ctx.n_inputs() {
        joined = join_types(joined.as_ref(), ctx.ty(i));
    }
    Ok(vec![Out::typed(joined.map(seq_of))])
}

fn sequence_insert(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let elem = ctx.ty(0).and_then(seq_elem);
    let joined = join_types(elem.as_ref(), ctx.ty(1));
    Ok(vec![Out::typed(joined.map(seq_of))])
}

fn split_to_sequence(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(ty) = ctx.ty(0) else {
        return Ok(vec![Out::default()]);
    };
    let shape = ctx.shape(0).and_then(|mut s| {
        let axis = dims::normalize_axis(ctx.attr_int_or("axis", 0), s.len())?;
        if ctx.has_input(1) {
            if let Some(slot) = s.get_mut(axis) {
                *slot = SymDim::Unknown;
            }
        } else if ctx.attr_int_or("keepdims", 1) != 0 {
            if let Some(slot) = s.get_mut(axis) {
                *slot = SymDim::Known(1);
            }
        } else {
            s.remove(axis);
        }
        Some(s)
    });
    Ok(vec![Out::typed(Some(seq_of(with_shape(
        ty,
        shape.as_deref(),
    ))))])
}

fn concat_from_sequence(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let Some(elem) = ctx.ty(0).and_then(seq_elem) else {
        return Ok(vec![Out::default()]);
    };
    let new_axis = ctx.attr_int_or("new_axis", 0) != 0;
    let axis = ctx
        .attr_int("axis")
        .ok_or_else(|| ctx.bad_attr("axis", "required attribute is missing"))?;
    let shape = dims::shape_of(&elem).and_then(|mut s| {
        if new_axis {
            let at = dims::normalize_axis(axis, s.len() + 1)?;
            s.insert(at, SymDim::Unknown);
        } else {
            let at = dims::normalize_axis(axis, s.len())?;
            if let Some(slot) = s.get_mut(at) {
                *slot = SymDim::Unknown;
            }
        }
        Some(s)
    });
    Ok(vec![Out::typed(Some(with_shape(&elem, shape.as_deref())))])
}

fn optional(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let inner = if ctx.has_input(0) {
        ctx.ty(0).cloned()
    } else {
        ctx.attr("type").and_then(|a| a.tp.clone())
    };
    Ok(vec![Out::typed(inner.map(|t| TypeProto {
        value: Some(Value::OptionalType(Box::new(type_proto::Optional {
            elem_type: Some(Box::new(t)),
        }))),
        denotation: None,
    }))])
}

fn optional_get_element(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let ty = ctx.ty(0).and_then(|t| match t.value.as_ref()? {
        Value::OptionalType(o) => o.elem_type.as_deref().cloned(),
        _ => Some(t.clone()),
    });
    Ok(vec![Out::typed(ty)])
}
