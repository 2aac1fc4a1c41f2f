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
/// a finite value; a Cast whose input's largest magnitude (as bounded by these same rules) the
/// target type holds: float16's -65504 computed in float and cast back stays finite, a float's
/// lowest value cast to float16 does not. `false` when not known (arithmetic can overflow, so Add
/// or Mul of finite values is not finite here).
pub(crate) fn finite(eg: &OnnxEGraph, c: Id) -> bool {
    bound_at(eg, eg.find(c), FINITE_DEPTH, &mut BTreeSet::new()).is_some()
}

fn dtype_of(eg: &OnnxEGraph, c: Id) -> Option<DType> {
    let ty = eg[c].data.ty.as_ref()?;
    DType::from_code(onnx_schema::infer::elem_type_of(ty)?)
}

/// Largest finite magnitude of a float type (None: not a float type).
fn float_max(d: DType) -> Option<f64> {
    Some(match d {
        DType::Float16 => 65504.0,
        DType::Bfloat16 => 3.3895313892515355e38,
        DType::Float => f32::MAX as f64,
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

/// Largest magnitude of the values of `t`, NaN ignored; `None` when one is infinite.
fn tensor_bound(t: &onnx_ref::Tensor) -> Option<f64> {
    let v = t.to_f64_vec().ok()?;
    v.iter()
        .filter(|x| !x.is_nan())
        .try_fold(0.0f64, |m, x| x.is_finite().then(|| m.max(x.abs())))
}

/// An upper bound on the magnitude of every non-NaN element of `c`, `None` when an infinity is
/// possible (or the value is not understood). Integer values are bounded by their type (or
/// their constant's values); float values by the rules `finite` lists.
fn bound_at(eg: &OnnxEGraph, c: Id, depth: usize, seen: &mut BTreeSet<Id>) -> Option<f64> {
    let c = eg.find(c);
    let dtype = dtype_of(eg, c)?;
    let constant = eg[c].data.constant;
    let values = || tensor_bound(&crate::value::decode(eg, constant?)?);
    if let Some(m) = int_max(dtype) {
        return Some(values().unwrap_or(m));
    }
    // Neither an integer nor a float type (string): nothing is known.
    float_max(dtype)?;
    if constant.is_some() {
        return values();
    }
    if depth == 0 || !seen.insert(c) {
        return None;
    }
    let best = eg[c]
        .nodes
        .iter()
        .filter_map(|n| node_bound(eg, n, dtype, depth, seen))
        .reduce(f64::min);
    seen.remove(&c);
    best
}

/// [`bound_at`] of one e-node of a class of type `dtype`.
fn node_bound(
    eg: &OnnxEGraph,
    n: &crate::lang::ONode,
    dtype: DType,
    depth: usize,
    seen: &mut BTreeSet<Id>,
) -> Option<f64> {
    let NodeKind::Op(op) = n.kind else {
        return None;
    };
    let info = eg.analysis.ops.get(op);
    if !info.domain.is_empty() {
        return None;
    }
    let roles = crate::build::Roles::new(info, &n.children);
    let inputs = roles.inputs();
    let mut of = |i: usize| bound_at(eg, *inputs.get(i)?, depth - 1, seen);
    match info.op_type.as_str() {
        "Where" => Some(of(1)?.max(of(2)?)),
        "Concat" => (0..inputs.len()).try_fold(0.0f64, |m, i| Some(m.max(of(i)?))),
        "Expand" | "Reshape" | "Unsqueeze" | "Squeeze" | "Flatten" | "Transpose" | "Identity"
        | "Slice" | "Gather" | "GatherElements" | "GatherND" | "Tile" => of(0),
        "ConstantOfShape" => match roles
            .attr("value")
            .and_then(|a| eg[eg.find(a)].data.attr)
            .map(|a| eg.analysis.attrs.get(a))
            .and_then(|a| a.t.as_ref())
        {
            // No value attribute: zeros.
            None => Some(0.0),
            Some(t) => tensor_bound(&onnx_ref::Tensor::from_proto(t).ok()?),
        },
        "Cast" => {
            let m = of(0)?;
            (m <= float_max(dtype)?).then_some(m)
        }
        _ => None,
    }
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
