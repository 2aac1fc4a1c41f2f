//! Sequence and optional operators: SequenceEmpty/Construct/At/Insert/Erase/Length,
//! SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.

use ndarray::Axis;

use super::{norm_axis, same_dtype, typed};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{map_all, Array, Elem, Tensor};
use crate::value::{Sequence, Value};

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "SequenceEmpty", 11, LATEST, sequence_empty);
    reg.register("", "SequenceConstruct", 11, LATEST, sequence_construct);
    reg.register("", "SequenceAt", 11, LATEST, sequence_at);
    reg.register("", "SequenceInsert", 11, LATEST, sequence_insert);
    reg.register("", "SequenceErase", 11, LATEST, sequence_erase);
    reg.register("", "SequenceLength", 11, LATEST, sequence_length);
    reg.register("", "SplitToSequence", 11, LATEST, split_to_sequence);
    reg.register("", "ConcatFromSequence", 11, LATEST, concat_from_sequence);
    reg.register("", "Optional", 15, LATEST, optional);
    reg.register("", "OptionalHasElement", 15, LATEST, optional_has_element);
    reg.register("", "OptionalGetElement", 15, LATEST, optional_get_element);
}

fn seq_input<'v>(ctx: &KernelCtx, inputs: &[Option<&'v Value>], i: usize) -> Result<&'v Sequence> {
    match inputs.get(i).copied().flatten() {
        Some(Value::Sequence(s)) => Ok(s),
        Some(other) => Err(ctx.err(format!(
            "input {i} must be a sequence, found {}",
            other.kind()
        ))),
        None => Err(ctx.err(format!("required input {i} is missing"))),
    }
}

fn position(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    i: usize,
    len: usize,
    default: i64,
    inclusive_end: bool,
) -> Result<usize> {
    let p = match ctx.opt_input(inputs, i)? {
        Some(t) => t
            .to_i64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?
            .first()
            .copied()
            .unwrap_or(default),
        None => default,
    };
    let n = len as i64;
    let q = if p < 0 { p + n } else { p };
    let limit = if inclusive_end { n } else { n - 1 };
    if q < 0 || q > limit {
        return Err(ctx.err(format!(
            "position {p} is out of range for a sequence of {len}"
        )));
    }
    Ok(q as usize)
}

fn sequence_empty(ctx: &KernelCtx, _inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let code = ctx.attr_int("dtype", DType::Float.code() as i64)?;
    let dtype =
        DType::from_code(code as i32).ok_or_else(|| ctx.err(format!("unknown dtype {code}")))?;
    Ok(vec![Value::Sequence(Sequence {
        elem_dtype: Some(dtype),
        items: Vec::new(),
    })])
}

fn sequence_construct(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts = super::all_inputs(ctx, inputs)?;
    same_dtype(ctx, &ts)?;
    let elem_dtype = ts.first().map(|t| t.dtype());
    Ok(vec![Value::Sequence(Sequence {
        elem_dtype,
        items: ts.into_iter().map(|t| Value::Tensor(t.clone())).collect(),
    })])
}

fn sequence_at(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let s = seq_input(ctx, inputs, 0)?;
    let p = position(ctx, inputs, 1, s.items.len(), 0, false)?;
    Ok(vec![s.items[p].clone()])
}

fn sequence_insert(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let s = seq_input(ctx, inputs, 0)?;
    let t = ctx.input(inputs, 1)?;
    if let Some(d) = s.elem_dtype {
        if d != t.dtype() {
            return Err(ctx.err(format!(
                "cannot insert a {} tensor into a sequence of {d}",
                t.dtype()
            )));
        }
    }
    let p = position(ctx, inputs, 2, s.items.len(), s.items.len() as i64, true)?;
    let mut items = s.items.clone();
    items.insert(p, Value::Tensor(t.clone()));
    Ok(vec![Value::Sequence(Sequence {
        elem_dtype: Some(t.dtype()),
        items,
    })])
}

fn sequence_erase(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let s = seq_input(ctx, inputs, 0)?;
    let p = position(ctx, inputs, 1, s.items.len(), -1, false)?;
    let mut items = s.items.clone();
    items.remove(p);
    Ok(vec![Value::Sequence(Sequence {
        elem_dtype: s.elem_dtype,
        items,
    })])
}

fn sequence_length(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let s = seq_input(ctx, inputs, 0)?;
    Ok(vec![Value::Tensor(Tensor::scalar(s.items.len() as i64))])
}

fn split_to_sequence(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let axis = norm_axis(ctx.attr_int("axis", 0)?, t.rank())?;
    let dim = t.shape()[axis];
    let split = ctx.opt_input(inputs, 1)?;
    let (sizes, squeeze): (Vec<usize>, bool) = match split {
        None => (vec![1; dim], ctx.attr_int("keepdims", 1)? == 0),
        Some(s) => {
            let v = s.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
            if s.rank() == 0 {
                let chunk = *v.first().ok_or_else(|| ctx.err("empty split"))?;
                if chunk <= 0 {
                    return Err(ctx.err(format!("split size {chunk} must be positive")));
                }
                let chunk = chunk as usize;
                (
                    (0..dim.div_ceil(chunk))
                        .map(|i| chunk.min(dim - i * chunk))
                        .collect(),
                    false,
                )
            } else {
                (super::to_dims(&v)?, false)
            }
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(ctx.err(format!("split sizes {sizes:?} do not sum to {dim}")));
    }
    let mut items = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        let part = map_all!(t, a => {
            let mut v = a.clone();
            v.slice_axis_inplace(Axis(axis), ndarray::Slice::from(start..start + s));
            v
        });
        let part = if squeeze {
            let mut shape = part.shape().to_vec();
            shape.remove(axis);
            part.reshaped(&shape)?
        } else {
            part
        };
        items.push(Value::Tensor(part));
        start += s;
    }
    Ok(vec![Value::Sequence(Sequence {
        elem_dtype: Some(t.dtype()),
        items,
    })])
}

fn concat_from_sequence(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let s = seq_input(ctx, inputs, 0)?;
    let ts: Vec<&Tensor> = s
        .items
        .iter()
        .map(|v| v.as_tensor())
        .collect::<Result<_>>()?;
    let first = ts
        .first()
        .ok_or_else(|| ctx.err("cannot concatenate an empty sequence"))?;
    same_dtype(ctx, &ts)?;
    let new_axis = ctx.attr_int("new_axis", 0)? == 1;
    let rank = first.rank() + new_axis as usize;
    let axis = norm_axis(
        ctx.attr_opt_int("axis")?
            .ok_or_else(|| ctx.err("axis is required"))?,
        rank,
    )?;
    fn cat<T: Elem>(ts: &[&Tensor], axis: usize, stack: bool) -> Result<Array<T>> {
        let views: Vec<_> = ts
            .iter()
            .map(|t| typed::<T>(t).map(|a| a.view()))
            .collect::<Result<_>>()?;
        let r = if stack {
            ndarray::stack(Axis(axis), &views)
        } else {
            ndarray::concatenate(Axis(axis), &views)
        };
        r.map(|a| a.into_shared())
            .map_err(|e| RefError::op(format!("cannot concatenate: {e}")))
    }
    Ok(vec![Value::Tensor(
        map_all!(*first, _a => cat(&ts, axis, new_axis)?),
    )])
}

fn optional(_ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let inner = inputs.first().copied().flatten().cloned();
    Ok(vec![Value::Optional(inner.map(Box::new))])
}

fn optional_has_element(_ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let has = match inputs.first().copied().flatten() {
        None => false,
        Some(Value::Optional(inner)) => inner.is_some(),
        Some(_) => true,
    };
    Ok(vec![Value::Tensor(Tensor::scalar(has))])
}

fn optional_get_element(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    match inputs.first().copied().flatten() {
        Some(Value::Optional(Some(v))) => Ok(vec![(**v).clone()]),
        Some(Value::Optional(None)) => Err(ctx.err("the optional is empty")),
        Some(v) => Ok(vec![v.clone()]),
        None => Err(ctx.err("required input 0 is missing")),
    }
}
