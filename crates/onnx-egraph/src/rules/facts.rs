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
/// lowest value cast to float16 does not; ScatterND/ScatterElements of finite data and updates;
/// Trilu, Neg, Abs, Relu, Max and Min of finite values; Sigmoid, Tanh and Softmax (at most 1);
/// Mul, Add and Sub whose operands' bounds multiply or add to a magnitude the type holds (so
/// the rounded result cannot overflow: a float's lowest value times a 0/1 factor stays finite,
/// the lowest value plus itself does not). `false` when not known.
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
    type_range(d).map(|r| r.lo.abs().max(r.hi) as f64)
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
    let (op_type, roles) = standard_op(eg, n)?;
    let inputs = roles.inputs();
    let mut of = |i: usize| bound_at(eg, *inputs.get(i)?, depth - 1, seen);
    match op_type {
        "Where" => Some(of(1)?.max(of(2)?)),
        "Concat" => (0..inputs.len()).try_fold(0.0f64, |m, i| Some(m.max(of(i)?))),
        "Expand" | "Reshape" | "Unsqueeze" | "Squeeze" | "Flatten" | "Transpose" | "Identity"
        | "Slice" | "Gather" | "GatherElements" | "GatherND" | "Tile" => of(0),
        "ConstantOfShape" => match fill_value(eg, &roles).ok()? {
            // No value attribute: zeros.
            None => Some(0.0),
            Some(t) => tensor_bound(&t),
        },
        "Cast" => within(of(0)?, dtype),
        // Scattered updates into finite data, a triangle of it, its negation, magnitude or
        // clamp: no larger than what they read.
        "ScatterND" | "ScatterElements" => Some(of(0)?.max(of(2)?)),
        "Trilu" | "Neg" | "Abs" | "Relu" => of(0),
        "Max" | "Min" => (0..inputs.len()).try_fold(0.0f64, |m, i| Some(m.max(of(i)?))),
        // Bounded by 1 for any input (NaN stays NaN).
        "Sigmoid" | "Tanh" | "Softmax" => Some(1.0),
        // Arithmetic whose exact result stays within the type's largest finite value, so its
        // rounding cannot reach an infinity: a mask scaled by a 0/1 factor, or a bias added.
        "Mul" => within(of(0)? * of(1)?, dtype),
        "Add" | "Sub" => within(of(0)? + of(1)?, dtype),
        _ => None,
    }
}

/// `m` when a float of type `dtype` holds it.
fn within(m: f64, dtype: DType) -> Option<f64> {
    (m <= float_max(dtype)?).then_some(m)
}

/// The op type and roles of a default-domain operator e-node (`None` for anything else).
fn standard_op<'a>(
    eg: &'a OnnxEGraph,
    n: &'a crate::lang::ONode,
) -> Option<(&'a str, crate::build::Roles<'a>)> {
    let NodeKind::Op(op) = n.kind else {
        return None;
    };
    let info = eg.analysis.ops.get(op);
    if !info.domain.is_empty() {
        return None;
    }
    Some((
        info.op_type.as_str(),
        crate::build::Roles::new(info, &n.children),
    ))
}

/// The fill of a `ConstantOfShape` (`Ok(None)`: no value attribute, zeros; `Err`: a value that
/// cannot be read).
fn fill_value(
    eg: &OnnxEGraph,
    roles: &crate::build::Roles<'_>,
) -> Result<Option<onnx_ref::Tensor>, ()> {
    match roles
        .attr("value")
        .and_then(|a| eg[eg.find(a)].data.attr)
        .map(|a| eg.analysis.attrs.get(a))
        .and_then(|a| a.t.as_ref())
    {
        None => Ok(None),
        Some(t) => onnx_ref::Tensor::from_proto(t).map(Some).map_err(|_| ()),
    }
}

/// Whether `Reshape(Expand(Unsqueeze(k, [2]), e), r)` repeats each of k's heads (axis 1 of a
/// rank-4 `[batch, heads, seq, size]`) n times in a row, as transformers' `repeat_kv` does:
/// e (a shape vector, symbolic dims allowed) is `[b, h, n, s, d]` with each dim but n equal to
/// k's or 1, and r is `[b, h * n, s, d]` (one entry may be -1: transformers' view writes it for
/// h * n, dynamo's export for s; no 0, so Reshape's allowzero does not matter). The Unsqueeze
/// is the rule's to check.
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
    let Some(heads) = h.checked_mul(n) else {
        return Some(false);
    };
    // One -1 in r, anywhere, is the dim the others leave: every other entry is the one wanted.
    let wanted = [
        kd[0].clone(),
        SymDim::Known(heads),
        kd[2].clone(),
        kd[3].clone(),
    ];
    let mut inferred = 0;
    for (got, want) in rv.iter().zip(&wanted) {
        if got.known() == Some(-1) {
            inferred += 1;
        } else if !same(got, want) {
            return Some(false);
        }
    }
    Some(inferred <= 1)
}

/// How deep [`int_range`] follows a value's producers.
const RANGE_DEPTH: usize = 24;

/// Bounds every element of an integer (or bool) value lies within: `lo <= x <= hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IntRange {
    pub lo: i128,
    pub hi: i128,
}

impl IntRange {
    fn new(lo: i128, hi: i128) -> IntRange {
        IntRange { lo, hi }
    }
    fn union(self, o: IntRange) -> IntRange {
        IntRange::new(self.lo.min(o.lo), self.hi.max(o.hi))
    }
    fn intersect(self, o: IntRange) -> IntRange {
        IntRange::new(self.lo.max(o.lo), self.hi.min(o.hi))
    }
    fn within(self, o: IntRange) -> bool {
        o.lo <= self.lo && self.hi <= o.hi
    }
    /// The range when it fits the type's (integer arithmetic wraps: a result that may leave
    /// the type's range is not known).
    fn fits(self, ty: IntRange) -> Option<IntRange> {
        self.within(ty).then_some(self)
    }
}

/// The values an integer or bool type holds.
fn type_range(d: DType) -> Option<IntRange> {
    let r = |lo: i128, hi: i128| Some(IntRange::new(lo, hi));
    match d {
        DType::Bool => r(0, 1),
        DType::Int2 => r(-2, 1),
        DType::Uint2 => r(0, 3),
        DType::Int4 => r(-8, 7),
        DType::Uint4 => r(0, 15),
        DType::Int8 => r(i8::MIN.into(), i8::MAX.into()),
        DType::Uint8 => r(0, u8::MAX.into()),
        DType::Int16 => r(i16::MIN.into(), i16::MAX.into()),
        DType::Uint16 => r(0, u16::MAX.into()),
        DType::Int32 => r(i32::MIN.into(), i32::MAX.into()),
        DType::Uint32 => r(0, u32::MAX.into()),
        DType::Int64 => r(i64::MIN.into(), i64::MAX.into()),
        DType::Uint64 => r(0, u64::MAX.into()),
        _ => None,
    }
}

/// Smallest and largest element of an integer tensor (`None` when empty or not integer).
fn tensor_range(t: &onnx_ref::Tensor) -> Option<IntRange> {
    let vals: Vec<i128> = match t.as_array::<u64>() {
        Some(a) => a.iter().map(|&x| x.into()).collect(),
        None => t.to_i64_vec().ok()?.into_iter().map(i128::from).collect(),
    };
    let lo = vals.iter().copied().min()?;
    let hi = vals.iter().copied().max()?;
    Some(IntRange::new(lo, hi))
}

/// The bounds of every element of integer or bool value `c`, from how it is computed, or
/// `None` when `c` is not of an integer type. At least the type's own range; tighter where
/// known: a constant's smallest and largest element; `Shape`, `Size`, `ArgMax`, `ArgMin` and
/// `NonZero` are non-negative; `ConstantOfShape` has its value; values moved or selected
/// (Gather, Concat, Slice, Unsqueeze, Reshape, Expand, Where, ...) keep their inputs' bounds;
/// `Add`, `Sub`, `Mul`, `Neg`, `Abs` and non-negative `Div` bound their results when those
/// cannot wrap; `Max`, `Min`, `Relu` and `Clip` clamp; a `Cast` between integer types keeps
/// the bounds the target holds. Each e-node of a class bounds the same value, so the class's
/// range is the intersection of its e-nodes'.
pub(crate) fn int_range(eg: &OnnxEGraph, c: Id) -> Option<IntRange> {
    let mut walk = RangeWalk {
        eg,
        seen: BTreeSet::new(),
        memo: std::collections::BTreeMap::new(),
    };
    walk.class(c, RANGE_DEPTH)
}

struct RangeWalk<'a> {
    eg: &'a OnnxEGraph,
    /// Classes on the current path (a cycle is cut there: unknown beyond the type's range).
    seen: BTreeSet<Id>,
    memo: std::collections::BTreeMap<Id, Option<IntRange>>,
}

impl RangeWalk<'_> {
    fn class(&mut self, c: Id, depth: usize) -> Option<IntRange> {
        let eg = self.eg;
        let c = eg.find(c);
        let ty = type_range(dtype_of(eg, c)?)?;
        if let Some(k) = eg[c].data.constant {
            if let Some(r) = crate::value::decode(eg, k).as_ref().and_then(tensor_range) {
                return Some(r.intersect(ty));
            }
        }
        if let Some(r) = self.memo.get(&c) {
            return *r;
        }
        if depth == 0 || !self.seen.insert(c) {
            return Some(ty);
        }
        let mut best = ty;
        for n in &eg[c].nodes {
            if let Some(r) = self.node(n, ty, depth) {
                best = best.intersect(r);
            }
        }
        self.seen.remove(&c);
        self.memo.insert(c, Some(best));
        Some(best)
    }

    fn node(&mut self, n: &crate::lang::ONode, ty: IntRange, depth: usize) -> Option<IntRange> {
        let eg = self.eg;
        let (op_type, roles) = standard_op(eg, n)?;
        let inputs = roles.inputs();
        let absent = |i: usize| {
            inputs.get(i).is_none_or(|&x| {
                eg[eg.find(x)]
                    .nodes
                    .iter()
                    .any(|m| m.kind == NodeKind::None)
            })
        };
        let mut of = |i: usize| -> Option<IntRange> { self.class(*inputs.get(i)?, depth - 1) };
        let nonneg = IntRange::new(0, i64::MAX.into());
        let r = match op_type {
            "Shape" | "Size" | "ArgMax" | "ArgMin" | "NonZero" => nonneg,
            "Where" => of(1)?.union(of(2)?),
            "Concat" => {
                let mut acc: Option<IntRange> = None;
                for i in 0..inputs.len() {
                    let r = of(i)?;
                    acc = Some(acc.map_or(r, |a| a.union(r)));
                }
                acc?
            }
            "Expand" | "Reshape" | "Unsqueeze" | "Squeeze" | "Flatten" | "Transpose"
            | "Identity" | "Slice" | "Gather" | "GatherElements" | "GatherND" | "Tile"
            | "DepthToSpace" | "SpaceToDepth" => of(0)?,
            "ConstantOfShape" => match fill_value(eg, &roles).ok()? {
                None => IntRange::new(0, 0),
                Some(t) => tensor_range(&t)?,
            },
            "Add" => {
                let (a, b) = (of(0)?, of(1)?);
                IntRange::new(a.lo + b.lo, a.hi + b.hi).fits(ty)?
            }
            "Sub" => {
                let (a, b) = (of(0)?, of(1)?);
                IntRange::new(a.lo - b.hi, a.hi - b.lo).fits(ty)?
            }
            "Mul" => {
                let (a, b) = (of(0)?, of(1)?);
                let corners = [
                    a.lo.checked_mul(b.lo)?,
                    a.lo.checked_mul(b.hi)?,
                    a.hi.checked_mul(b.lo)?,
                    a.hi.checked_mul(b.hi)?,
                ];
                let lo = *corners.iter().min()?;
                let hi = *corners.iter().max()?;
                IntRange::new(lo, hi).fits(ty)?
            }
            "Div" => {
                // Non-negative over positive: truncation and flooring agree.
                let (a, b) = (of(0)?, of(1)?);
                if a.lo < 0 || b.lo < 1 {
                    return None;
                }
                IntRange::new(a.lo / b.hi, a.hi / b.lo)
            }
            "Neg" => {
                let a = of(0)?;
                IntRange::new(-a.hi, -a.lo).fits(ty)?
            }
            "Abs" => {
                let a = of(0)?;
                let m = a.lo.abs().max(a.hi.abs());
                let lo = if a.lo <= 0 && a.hi >= 0 {
                    0
                } else {
                    a.lo.abs().min(a.hi.abs())
                };
                IntRange::new(lo, m).fits(ty)?
            }
            "Relu" => {
                let a = of(0)?;
                IntRange::new(a.lo.max(0), a.hi.max(0))
            }
            "Max" | "Min" => {
                let max = op_type == "Max";
                let mut acc: Option<IntRange> = None;
                for i in 0..inputs.len() {
                    let r = of(i)?;
                    acc = Some(match acc {
                        None => r,
                        Some(a) if max => IntRange::new(a.lo.max(r.lo), a.hi.max(r.hi)),
                        Some(a) => IntRange::new(a.lo.min(r.lo), a.hi.min(r.hi)),
                    });
                }
                acc?
            }
            "Clip" => {
                // min(max(x, lo), hi); an absent bound does not clamp. Integer Clip has its
                // bounds as inputs (opset 12 on).
                let mut r = of(0)?;
                if !absent(1) {
                    let m = of(1)?;
                    r = IntRange::new(r.lo.max(m.lo), r.hi.max(m.hi));
                }
                if !absent(2) {
                    let m = of(2)?;
                    r = IntRange::new(r.lo.min(m.lo), r.hi.min(m.hi));
                }
                r
            }
            "Cast" | "CastLike" => {
                let r = of(0)?;
                if r.within(ty) {
                    r
                } else {
                    ty
                }
            }
            _ => return None,
        };
        Some(r)
    }
}
