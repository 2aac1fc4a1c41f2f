//! Guard functions that read the e-graph's structure rather than one class's analysis data:
//! `finite(v)` (v holds no infinity) and `repeats_heads(k, e, r)` (a grouped-query attention's
//! `repeat_kv`). Layer: under `eval`, which calls them.

use std::collections::BTreeSet;

use egg::Id;
use onnx_ref::DType;
use onnx_schema::infer::SymDim;

use crate::egraph::OnnxEGraph;
use crate::lang::NodeKind;

/// How deep `finite` follows a value's producers.
const FINITE_DEPTH: usize = 24;

/// Whether every element of `c` is finite or NaN (never +-inf), from how it is computed: any
/// integer or bool value; a constant without infinities; `ConstantOfShape` of a finite value;
/// `Where` whose two branches are finite; `Concat` of finite values; a value moved or copied
/// (Expand, Reshape, Unsqueeze, Squeeze, Flatten, Transpose, Identity, Slice, Gather, Tile) from
/// a finite value; a Cast from an integer type to a type that holds its range, or between float
/// types that does not narrow. `false` when not known (arithmetic can overflow, so Add or Mul of
/// finite values is not finite here).
pub(crate) fn finite(eg: &OnnxEGraph, c: Id) -> bool {
    finite_at(eg, eg.find(c), FINITE_DEPTH, &mut BTreeSet::new())
}

fn dtype_of(eg: &OnnxEGraph, c: Id) -> Option<DType> {
    let ty = eg[c].data.ty.as_ref()?;
    DType::from_code(onnx_schema::infer::elem_type_of(ty)?)
}

/// Largest finite magnitude of a float type (None: not a float type).
fn float_max(d: DType) -> Option<f64> {
    Some(match d {
        DType::Float16 => 65504.0,
        DType::Bfloat16 | DType::Float => f32::MAX as f64,
        DType::Double => f64::MAX,
        _ => return None,
    })
}

/// Largest magnitude an integer or bool type holds.
fn int_max(d: DType) -> Option<f64> {
    Some(match d {
        DType::Bool => 1.0,
        DType::Int2 | DType::Uint2 => 4.0,
        DType::Int4 | DType::Uint4 => 16.0,
        DType::Int8 => 128.0,
        DType::Uint8 => 255.0,
        DType::Int16 => 32768.0,
        DType::Uint16 => 65535.0,
        DType::Int32 => 2147483648.0,
        DType::Uint32 => 4294967295.0,
        DType::Int64 => 9223372036854775808.0,
        DType::Uint64 => 18446744073709551615.0,
        _ => return None,
    })
}

fn finite_at(eg: &OnnxEGraph, c: Id, depth: usize, seen: &mut BTreeSet<Id>) -> bool {
    let c = eg.find(c);
    let Some(dtype) = dtype_of(eg, c) else {
        return false;
    };
    if int_max(dtype).is_some() {
        return true;
    }
    if float_max(dtype).is_none() || depth == 0 || !seen.insert(c) {
        return false;
    }
    if let Some(k) = eg[c].data.constant {
        if let Some(t) = crate::value::decode(eg, k) {
            if let Ok(v) = t.to_f64_vec() {
                return v.iter().all(|x| !x.is_infinite());
            }
        }
    }
    let ok = eg[c].nodes.iter().any(|n| {
        let NodeKind::Op(op) = n.kind else {
            return false;
        };
        let info = eg.analysis.ops.get(op);
        if !info.domain.is_empty() {
            return false;
        }
        let roles = crate::build::Roles::new(info, &n.children);
        let inputs = roles.inputs();
        let mut fin = |i: usize| {
            inputs
                .get(i)
                .is_some_and(|&x| finite_at(eg, x, depth - 1, seen))
        };
        match info.op_type.as_str() {
            "Where" => fin(1) && fin(2),
            "Concat" => (0..inputs.len()).all(fin),
            "Expand" | "Reshape" | "Unsqueeze" | "Squeeze" | "Flatten" | "Transpose"
            | "Identity" | "Slice" | "Gather" | "GatherElements" | "GatherND" | "Tile" => fin(0),
            "ConstantOfShape" => roles
                .attr("value")
                .and_then(|a| eg[eg.find(a)].data.attr)
                .map(|a| eg.analysis.attrs.get(a))
                .and_then(|a| a.t.as_ref())
                .and_then(|t| onnx_ref::Tensor::from_proto(t).ok())
                .and_then(|t| t.to_f64_vec().ok())
                // No value attribute: zeros.
                .is_none_or(|v| v.iter().all(|x| !x.is_infinite())),
            "Cast" => {
                let Some(&x) = inputs.first() else {
                    return false;
                };
                let Some(from) = dtype_of(eg, x) else {
                    return false;
                };
                let to = float_max(dtype).unwrap_or(0.0);
                match (int_max(from), float_max(from)) {
                    (Some(m), _) => m <= to,
                    (None, Some(m)) => m <= to && finite_at(eg, x, depth - 1, seen),
                    _ => false,
                }
            }
            _ => false,
        }
    });
    seen.remove(&c);
    ok
}

/// Whether `Reshape(Expand(Unsqueeze(k, [2]), e), r)` repeats each of k's heads (axis 1 of a
/// rank-4 `[batch, heads, seq, size]`) n times in a row, as transformers' `repeat_kv` does:
/// e (a shape vector, symbolic dims allowed) is `[b, h, n, s, d]` with each dim but n equal to
/// k's or 1, and r is `[b, h * n, s, d]` (h * n may be -1; no 0, so Reshape's allowzero does not
/// matter). The Unsqueeze is the rule's to check.
pub(crate) fn repeats_heads(eg: &OnnxEGraph, k: Id, ev: &[SymDim], rv: &[SymDim]) -> Option<bool> {
    let ty = eg[eg.find(k)].data.ty.as_ref()?;
    let kd = onnx_schema::infer::shape_of(ty)?;
    if kd.len() != 4 || kd.iter().any(|d| matches!(d, SymDim::Unknown)) {
        return Some(false);
    }
    // A 0 in r copies the input's dim unless allowzero is set: no 0, so allowzero cannot matter.
    if ev.len() != 5 || rv.len() != 4 || rv.iter().any(|d| d.known() == Some(0)) {
        return Some(false);
    }
    let same = |a: &SymDim, b: &SymDim| match (a, b) {
        (SymDim::Known(x), SymDim::Known(y)) => x == y,
        (SymDim::Param(p), SymDim::Param(q)) => p == q,
        _ => false,
    };
    for (i, j) in [(0, 0), (1, 1), (3, 2), (4, 3)] {
        if !(ev[i].known() == Some(1) || same(&ev[i], &kd[j])) {
            return Some(false);
        }
    }
    let (Some(n), Some(h)) = (ev[2].known(), kd[1].known()) else {
        return Some(false);
    };
    if n < 1 {
        return Some(false);
    }
    let heads_ok = rv[1].known() == Some(-1) || rv[1].known() == h.checked_mul(n);
    Some(heads_ok && same(&rv[0], &kd[0]) && same(&rv[2], &kd[2]) && same(&rv[3], &kd[3]))
}
