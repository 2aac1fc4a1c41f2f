//! Pad: constant, reflect, edge and wrap modes; pads as an attribute (`paddings` in opset 1,
//! `pads` in 2–10) or an input (11+), optional axes (18+); negative pads crop.

use super::{norm_axes, one, typed};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{array_from_vec, check_size, map_all, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Pad", 1, LATEST, pad);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Source index along one axis for output index `o`, or `None` for the constant.
fn source_index(o: i64, begin: i64, dim: i64, mode: PadMode) -> Option<usize> {
    let i = o - begin;
    if (0..dim).contains(&i) {
        return Some(i as usize);
    }
    if dim == 0 {
        return None;
    }
    let j = match mode {
        PadMode::Constant => return None,
        PadMode::Edge => i.clamp(0, dim - 1),
        PadMode::Wrap => i.rem_euclid(dim),
        PadMode::Reflect => {
            if dim == 1 {
                0
            } else {
                let period = 2 * (dim - 1);
                let m = i.rem_euclid(period);
                if m >= dim {
                    period - m
                } else {
                    m
                }
            }
        }
    };
    Some(j as usize)
}

fn pad_of<T: Clone>(
    a: &Array<T>,
    begins: &[i64],
    ends: &[i64],
    mode: PadMode,
    fill: T,
) -> Result<Array<T>> {
    let shape = a.shape().to_vec();
    let rank = shape.len();
    let mut out_shape = Vec::with_capacity(rank);
    for i in 0..rank {
        let d = shape[i] as i64 + begins[i] + ends[i];
        if d < 0 {
            return Err(RefError::op(format!(
                "pads {begins:?}/{ends:?} crop more than shape {shape:?}"
            )));
        }
        out_shape.push(d as usize);
    }
    let total = check_size("Pad result", &out_shape)?;
    if mode != PadMode::Constant && shape.contains(&0) && total > 0 {
        return Err(RefError::op(
            "cannot pad an empty axis in reflect, edge or wrap mode",
        ));
    }
    // Per-axis source index tables.
    let tables: Vec<Vec<Option<usize>>> = (0..rank)
        .map(|ax| {
            (0..out_shape[ax] as i64)
                .map(|o| source_index(o, begins[ax], shape[ax] as i64, mode))
                .collect()
        })
        .collect();
    let std = a.as_standard_layout();
    let src = std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let mut strides = vec![1usize; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    let mut out = Vec::with_capacity(total);
    let mut idx = vec![0usize; rank];
    for _ in 0..total {
        let mut off = Some(0usize);
        for ax in 0..rank {
            off = match (off, tables[ax][idx[ax]]) {
                (Some(o), Some(s)) => Some(o + s * strides[ax]),
                _ => None,
            };
        }
        out.push(match off {
            Some(o) => src[o].clone(),
            None => fill.clone(),
        });
        for ax in (0..rank).rev() {
            idx[ax] += 1;
            if idx[ax] < out_shape[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    array_from_vec(&out_shape, out)
}

fn pad(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let rank = x.rank();
    let mode = match ctx.attr_string("mode", "constant")?.as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => return Err(ctx.err(format!("unknown mode '{other}'"))),
    };
    let (pads, value): (Vec<i64>, Option<Tensor>) = if ctx.opset < 11 {
        let name = if ctx.opset < 2 { "paddings" } else { "pads" };
        let pads = ctx
            .attr_ints(name)
            .map(<[i64]>::to_vec)
            .ok_or_else(|| ctx.err(format!("{name} is required")))?;
        let v = ctx.attr_float("value", 0.0)?;
        (
            pads,
            Some(super::cast_tensor(&Tensor::scalar(v), x.dtype())?),
        )
    } else {
        let pads = ctx
            .input(inputs, 1)?
            .to_i64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?;
        (pads, ctx.opt_input(inputs, 2)?.cloned())
    };
    let axes: Vec<usize> = match ctx.opt_input(inputs, 3)? {
        Some(t) if ctx.opset >= 18 => norm_axes(
            &t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
            rank,
        )?,
        _ => (0..rank).collect(),
    };
    let n = axes.len();
    if pads.len() != 2 * n {
        return Err(ctx.err(format!(
            "pads has {} values, expected {}",
            pads.len(),
            2 * n
        )));
    }
    let mut begins = vec![0i64; rank];
    let mut ends = vec![0i64; rank];
    for (i, &a) in axes.iter().enumerate() {
        begins[a] = pads[i];
        ends[a] = pads[n + i];
    }
    if let Some(v) = &value {
        if v.dtype() != x.dtype() {
            return Err(ctx.err(format!(
                "constant_value has type {} but data has {}",
                v.dtype(),
                x.dtype()
            )));
        }
    }
    let out = map_all!(x, a => {
        let fill = match &value {
            Some(v) if !v.is_empty() => typed(v)?.iter().next().cloned().unwrap_or_default(),
            _ => Default::default(),
        };
        pad_of(a, &begins, &ends, mode, fill)?
    });
    one(out)
}
