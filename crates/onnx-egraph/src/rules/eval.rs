//! Evaluation of guards and computed attributes. Three-valued: anything unknown (a rank, a
//! shape, a value that is not constant) makes the expression `None`, and a guard that is not
//! `Some(true)` fails.

use std::collections::BTreeMap;
use std::sync::Arc;

use egg::Id;
use onnx_rules::ir::{BinOp, Expr, ExprId, Rule, UnOp};
use onnx_schema::infer::SymDim;

use crate::analysis::OnnxEGraph;
use crate::value::{attr_value, const_val, decode, vals_equal, Val};

use super::matcher::{Bound, Env};

/// A guard written in Rust: called with the evaluated arguments; `None` is unknown.
pub type GuardFn = dyn Fn(&GuardCtx<'_>, &[Val]) -> Option<Val> + Send + Sync;

/// Guards registered in Rust, by name.
#[derive(Clone, Default)]
pub struct GuardRegistry {
    pub(crate) guards: BTreeMap<String, Arc<GuardFn>>,
}

impl std::fmt::Debug for GuardRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.guards.keys()).finish()
    }
}

impl GuardRegistry {
    /// Registers a guard callable from rule text as `name(args...)`.
    pub fn register(
        &mut self,
        name: &str,
        f: impl Fn(&GuardCtx<'_>, &[Val]) -> Option<Val> + Send + Sync + 'static,
    ) {
        self.guards.insert(name.to_string(), Arc::new(f));
    }
    /// Names of the registered guards.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.guards.keys().map(|s| s.as_str())
    }
}

/// What a guard sees: the e-graph (types, constants) and the model's opset.
pub struct GuardCtx<'a> {
    pub egraph: &'a OnnxEGraph,
    pub opset: i64,
    /// Consumers of each class in the input graph (canonical ids).
    pub uses: &'a BTreeMap<Id, usize>,
}

impl GuardCtx<'_> {
    /// The symbolic shape of a class (None when unknown or not a tensor).
    pub fn shape(&self, c: Id) -> Option<Vec<SymDim>> {
        let ty = self.egraph[c].data.ty.as_ref()?;
        onnx_schema::infer::shape_of(ty)
    }
    /// The element type code of a class.
    pub fn dtype(&self, c: Id) -> Option<i32> {
        let ty = self.egraph[c].data.ty.as_ref()?;
        onnx_schema::infer::elem_type_of(ty).filter(|&e| e != 0)
    }
}

pub(crate) struct Evaluator<'a> {
    pub ctx: GuardCtx<'a>,
    pub rule: &'a Rule,
    pub env: &'a Env,
    pub guards: &'a GuardRegistry,
    /// The classes of the left side's roots (`root()`).
    pub roots: &'a [Id],
}

fn dim_val(d: &SymDim) -> Option<Val> {
    match d {
        SymDim::Known(v) => Some(Val::Int(*v)),
        SymDim::Param(p) => Some(Val::Param(p.clone())),
        SymDim::Unknown => None,
    }
}

impl Evaluator<'_> {
    pub fn eval(&self, e: ExprId) -> Option<Val> {
        match self.rule.expr(e) {
            Expr::Literal(l) => Some(Val::from(l)),
            Expr::List(items) => Some(Val::List(
                items.iter().map(|&i| self.eval(i)).collect::<Option<_>>()?,
            )),
            Expr::DType(d) => Some(Val::DType(*d)),
            Expr::Var(v) => match self.env.get(v.0 as usize)?.as_ref()? {
                Bound::Class(c) => {
                    let c = self.ctx.egraph.find(*c);
                    match self.ctx.egraph[c].data.attr {
                        Some(a) => attr_value(self.ctx.egraph.analysis.attrs.get(a)),
                        None => Some(Val::Class(c)),
                    }
                }
                Bound::Absent => Some(Val::Absent),
                Bound::List(l) => Some(Val::List(l.iter().map(|&c| Val::Class(c)).collect())),
                _ => None,
            },
            Expr::Unary { op, arg } => {
                let v = self.eval(*arg)?;
                match op {
                    UnOp::Not => match v {
                        Val::Bool(b) => Some(Val::Bool(!b)),
                        _ => None,
                    },
                    UnOp::Neg => match v {
                        Val::Int(i) => Some(Val::Int(i.checked_neg()?)),
                        Val::Float(f) => Some(Val::Float(-f)),
                        _ => None,
                    },
                }
            }
            Expr::Binary { op, lhs, rhs } => self.binary(*op, *lhs, *rhs),
            Expr::Index { list, index } => {
                let l = self.list(self.eval(*list)?)?;
                let i = self.eval(*index)?.as_int()?;
                let n = l.len() as i64;
                let i = if i < 0 { i + n } else { i };
                if i < 0 || i >= n {
                    return None;
                }
                l.into_iter().nth(i as usize)
            }
            Expr::Call { func, args } => {
                let vals: Vec<Val> = args.iter().map(|&a| self.eval(a)).collect::<Option<_>>()?;
                self.call(func, &vals)
            }
        }
    }

    fn binary(&self, op: BinOp, l: ExprId, r: ExprId) -> Option<Val> {
        // Short-circuit with three-valued logic: false && unknown is false.
        match op {
            BinOp::And => {
                let a = self.eval(l);
                if a == Some(Val::Bool(false)) {
                    return a;
                }
                let b = self.eval(r);
                return match (a, b) {
                    (_, Some(Val::Bool(false))) => Some(Val::Bool(false)),
                    (Some(Val::Bool(true)), Some(Val::Bool(true))) => Some(Val::Bool(true)),
                    _ => None,
                };
            }
            BinOp::Or => {
                let a = self.eval(l);
                if a == Some(Val::Bool(true)) {
                    return a;
                }
                let b = self.eval(r);
                return match (a, b) {
                    (_, Some(Val::Bool(true))) => Some(Val::Bool(true)),
                    (Some(Val::Bool(false)), Some(Val::Bool(false))) => Some(Val::Bool(false)),
                    _ => None,
                };
            }
            _ => {}
        }
        let a = self.eval(l)?;
        let b = self.eval(r)?;
        let a = self.scalar_of(a);
        let b = self.scalar_of(b);
        if let BinOp::Eq | BinOp::Ne = op {
            let eq = vals_equal(&a, &b);
            return Some(Val::Bool(if op == BinOp::Eq { eq } else { !eq }));
        }
        // Order and arithmetic read a one-element list as its element: a scale exported as a
        // `[1]` tensor computes like a scalar one (equality still tells `[x]` from `x`).
        let (a, b) = (a.one_element(), b.one_element());
        // A named dim plus or minus another dim is the dim shape inference names so (`p+q`).
        if let (BinOp::Add | BinOp::Sub, true) =
            (op, matches!(a, Val::Param(_)) || matches!(b, Val::Param(_)))
        {
            let sym = |v: &Val| match v {
                Val::Param(p) => Some(SymDim::Param(p.clone())),
                Val::Int(i) => Some(SymDim::Known(*i)),
                _ => None,
            };
            let (x, y) = (sym(&a)?, sym(&b)?);
            let r = match op {
                BinOp::Add => x.plus(&y),
                _ => x.minus(&y),
            };
            return dim_val(&r);
        }
        match op {
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let (x, y) = (a.as_f64()?, b.as_f64()?);
                Some(Val::Bool(match op {
                    BinOp::Lt => x < y,
                    BinOp::Le => x <= y,
                    BinOp::Gt => x > y,
                    _ => x >= y,
                }))
            }
            _ => match (a, b) {
                (Val::Int(x), Val::Int(y)) => Some(Val::Int(match op {
                    BinOp::Add => x.checked_add(y)?,
                    BinOp::Sub => x.checked_sub(y)?,
                    BinOp::Mul => x.checked_mul(y)?,
                    BinOp::Div => x.checked_div(y)?,
                    _ => x.checked_rem(y)?,
                })),
                (a, b) => {
                    let (x, y) = (a.as_f64()?, b.as_f64()?);
                    Some(Val::Float(match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        BinOp::Div => x / y,
                        _ => x % y,
                    }))
                }
            },
        }
    }

    /// A constant class compared or computed with is its value.
    fn scalar_of(&self, v: Val) -> Val {
        if let Val::Class(c) = v {
            if let Some(k) = self.ctx.egraph[c].data.constant {
                if let Some(x) = const_val(self.ctx.egraph, k) {
                    return x;
                }
            }
        }
        v
    }

    fn list(&self, v: Val) -> Option<Vec<Val>> {
        match self.scalar_of(v) {
            Val::List(l) => Some(l),
            _ => None,
        }
    }

    fn class(v: &Val) -> Option<Id> {
        match v {
            Val::Class(c) => Some(*c),
            _ => None,
        }
    }

    fn call(&self, f: &str, a: &[Val]) -> Option<Val> {
        let ctx = &self.ctx;
        let eg = ctx.egraph;
        let b = |x: bool| Some(Val::Bool(x));
        let ints = |v: &Val| self.list(v.clone()).and_then(|l| Val::List(l).as_ints());
        match (f, a) {
            ("is_const", [v]) => match v {
                Val::Class(c) => b(eg[*c].data.constant.is_some()),
                Val::Absent => b(false),
                _ => b(true),
            },
            ("is_absent", [v]) => b(*v == Val::Absent),
            ("is_static", [v]) => match v {
                Val::Class(c) => b(eg[*c].data.input_free),
                Val::Absent => b(false),
                _ => b(true),
            },
            ("rank", [v]) => Some(Val::Int(ctx.shape(Self::class(v)?)?.len() as i64)),
            ("shape", [v]) => Some(Val::List(
                ctx.shape(Self::class(v)?)?
                    .iter()
                    .map(dim_val)
                    .collect::<Option<_>>()?,
            )),
            ("dim", [v, i]) => {
                let s = ctx.shape(Self::class(v)?)?;
                let i = i.as_int()?;
                let i = if i < 0 { i + s.len() as i64 } else { i };
                dim_val(s.get(usize::try_from(i).ok()?)?)
            }
            ("numel", [v]) => {
                let s = ctx.shape(Self::class(v)?)?;
                let mut n = 1i64;
                for d in s {
                    n = n.checked_mul(d.known()?)?;
                }
                Some(Val::Int(n))
            }
            ("dtype", [v]) => Some(Val::DType(ctx.dtype(Self::class(v)?)?)),
            ("is_float", [v]) => {
                let d = onnx_ref::DType::from_code(ctx.dtype(Self::class(v)?)?)?;
                b(d.is_float())
            }
            ("value", [v]) => match v {
                Val::Class(c) => const_val(eg, eg[*c].data.constant?),
                other => Some(other.clone()),
            },
            ("all_equal" | "any_equal", [v, x]) => {
                let x = x.as_f64()?;
                let vals: Vec<f64> = match v {
                    Val::Class(c) => {
                        let d = &eg[*c].data;
                        decode(eg, d.constant.or(d.splat)?)?.to_f64_vec().ok()?
                    }
                    Val::List(l) => l.iter().map(|e| e.as_f64()).collect::<Option<_>>()?,
                    other => vec![other.as_f64()?],
                };
                let eq = |y: &f64| *y == x || (y.is_nan() && x.is_nan());
                b(if f == "all_equal" {
                    vals.iter().all(eq)
                } else {
                    vals.iter().any(eq)
                })
            }
            ("as_dim", [v]) => {
                let c = eg.find(Self::class(v)?);
                if let Some(k) = eg[c].data.constant {
                    return match const_val(eg, k)? {
                        Val::Int(i) => Some(Val::Int(i)),
                        Val::List(l) if l.len() == 1 => Some(Val::Int(l[0].as_int()?)),
                        _ => None,
                    };
                }
                match eg[c].data.sym.as_deref()? {
                    [d] => dim_val(d),
                    _ => None,
                }
            }
            ("counts_up", [v]) => b(crate::value::counts_up(
                eg,
                eg[Self::class(v)?].data.constant?,
            )?),
            ("halves_equal", [v]) => b(crate::value::halves_equal(
                eg,
                eg[Self::class(v)?].data.constant?,
            )?),
            ("broadcasts_to", [v, shape]) => {
                let s = ctx.shape(Self::class(v)?)?;
                let target = self.list(shape.clone())?;
                if s.len() > target.len() {
                    return b(false);
                }
                let off = target.len() - s.len();
                let mut ok = true;
                for (i, d) in s.iter().enumerate() {
                    let t = &target[off + i];
                    match d {
                        SymDim::Known(1) => {}
                        SymDim::Known(k) => match t {
                            Val::Int(x) if x == k => {}
                            Val::Int(_) => ok = false,
                            _ => return None,
                        },
                        SymDim::Param(p) => match t {
                            Val::Param(q) if q == p => {}
                            _ => return None,
                        },
                        SymDim::Unknown => return None,
                    }
                }
                b(ok)
            }
            ("same_shape", [x, y]) => {
                let (s, t) = (ctx.shape(Self::class(x)?)?, ctx.shape(Self::class(y)?)?);
                if s.len() != t.len() {
                    return b(false);
                }
                for (p, q) in s.iter().zip(&t) {
                    match (p, q) {
                        (SymDim::Known(a), SymDim::Known(c)) if a != c => return b(false),
                        (SymDim::Known(a), SymDim::Known(c)) if a == c => {}
                        (SymDim::Param(a), SymDim::Param(c)) if a == c => {}
                        _ => return None,
                    }
                }
                b(true)
            }
            ("single_use", [v]) => {
                let c = eg.find(Self::class(v)?);
                b(ctx.uses.get(&c).copied() == Some(1))
            }
            ("divides_by_sqrt", [v]) => {
                let op_of = |n: &crate::lang::ONode| match n.kind {
                    crate::lang::NodeKind::Op(op) => {
                        let info = eg.analysis.ops.get(op);
                        info.domain.is_empty().then_some(info)
                    }
                    _ => None,
                };
                let c = eg.find(Self::class(v)?);
                b(eg[c].nodes.iter().any(|n| {
                    let Some(info) = op_of(n).filter(|i| i.op_type == "Div") else {
                        return false;
                    };
                    let inputs = crate::build::Roles::new(info, &n.children).inputs();
                    inputs.get(1).is_some_and(|&d| {
                        eg[eg.find(d)]
                            .nodes
                            .iter()
                            .any(|m| op_of(m).is_some_and(|i| i.op_type == "Sqrt"))
                    })
                }))
            }
            ("finite", [v]) => b(super::facts::finite(eg, Self::class(v)?)),
            ("nonneg", [v]) => b(super::facts::int_range(eg, Self::class(v)?)?.lo >= 0),
            ("in_range", [v, lo, hi]) => {
                let r = super::facts::int_range(eg, Self::class(v)?)?;
                let at_least = |x: &Val, bound: i128| match self.scalar_of(x.clone()) {
                    Val::Int(i) => Some(bound >= i128::from(i)),
                    other => Some(bound as f64 >= other.as_f64()?),
                };
                let at_most = |x: &Val, bound: i128| match self.scalar_of(x.clone()) {
                    Val::Int(i) => Some(bound <= i128::from(i)),
                    other => Some(bound as f64 <= other.as_f64()?),
                };
                b(at_least(lo, r.lo)? && at_most(hi, r.hi)?)
            }
            ("lower", [v]) => {
                let r = super::facts::int_range(eg, Self::class(v)?)?;
                Some(Val::Int(i64::try_from(r.lo).ok()?))
            }
            ("upper", [v]) => {
                let r = super::facts::int_range(eg, Self::class(v)?)?;
                Some(Val::Int(i64::try_from(r.hi).ok()?))
            }
            ("repeats_heads", [k, e, r]) => {
                let vector = |v: &Val| -> Option<Vec<SymDim>> {
                    match v {
                        Val::Class(c) => sym_value(eg, eg.find(*c)),
                        other => Some(ints(other)?.into_iter().map(SymDim::Known).collect()),
                    }
                };
                b(super::facts::repeats_heads(
                    eg,
                    Self::class(k)?,
                    &vector(e)?,
                    &vector(r)?,
                )?)
            }
            ("opset", []) => Some(Val::Int(ctx.opset)),
            ("root", []) => Some(Val::Class(eg.find(*self.roots.first()?))),
            ("root_at", [i]) => {
                let Val::Int(i) = self.scalar_of(i.clone()) else {
                    return None;
                };
                let i = usize::try_from(i).ok()?;
                Some(Val::Class(eg.find(*self.roots.get(i)?)))
            }
            ("member", [x, l]) => {
                let x = self.scalar_of(x.clone());
                let l = self.list(l.clone())?;
                b(l.iter().any(|e| vals_equal(&x, &self.scalar_of(e.clone()))))
            }
            ("len", [l]) => Some(Val::Int(self.list(l.clone())?.len() as i64)),
            ("range", [x, y]) => {
                let (x, y) = (x.as_int()?, y.as_int()?);
                if y - x > 1 << 16 {
                    return None;
                }
                Some(Val::List((x..y).map(Val::Int).collect()))
            }
            ("add_lists", [x, y]) => {
                let (x, y) = (ints(x)?, ints(y)?);
                if x.len() != y.len() {
                    return None;
                }
                let sum: Option<Vec<Val>> = x
                    .iter()
                    .zip(&y)
                    .map(|(a, b)| a.checked_add(*b).map(Val::Int))
                    .collect();
                Some(Val::List(sum?))
            }
            ("concat", [x, y]) => {
                let mut l = self.list(x.clone())?;
                l.extend(self.list(y.clone())?);
                Some(Val::List(l))
            }
            ("select", [l, idx]) => {
                let l = self.list(l.clone())?;
                let out: Option<Vec<Val>> = ints(idx)?
                    .iter()
                    .map(|&i| l.get(usize::try_from(i).ok()?).cloned())
                    .collect();
                Some(Val::List(out?))
            }
            ("without", [l, idx]) => {
                let l = self.list(l.clone())?;
                let idx = ints(idx)?;
                Some(Val::List(
                    l.into_iter()
                        .enumerate()
                        .filter(|(i, _)| !idx.contains(&(*i as i64)))
                        .map(|(_, v)| v)
                        .collect(),
                ))
            }
            ("no_literal_zero", [s, x]) => {
                let sym = sym_value(eg, Self::class(s)?)?;
                let xs = ctx.shape(Self::class(x)?)?;
                b(sym.iter().enumerate().all(|(i, d)| match d {
                    SymDim::Known(k) => *k > 0 || *k == -1,
                    d => xs.get(i).is_some_and(|x| x == d),
                }))
            }
            ("reshape_target", [s, x]) => {
                let sym = sym_value(eg, Self::class(s)?)?;
                let xs = ctx.shape(Self::class(x)?)?;
                let mut out = Vec::with_capacity(sym.len());
                let mut minus_one = sym.contains(&SymDim::Known(-1));
                let mut added_minus_one = false;
                for (i, d) in sym.iter().enumerate() {
                    let same = xs.get(i).is_some_and(|x| x == d);
                    out.push(match d {
                        SymDim::Known(k) => Val::Int(*k),
                        SymDim::Param(_) if same => Val::Int(0),
                        _ if !minus_one => {
                            minus_one = true;
                            added_minus_one = true;
                            Val::Int(-1)
                        }
                        _ => return None,
                    });
                }
                // A new -1 is inferable only when every other entry is a known positive
                // size: next to a copied dim that may be 0 at run time it is ambiguous.
                if added_minus_one
                    && !out
                        .iter()
                        .all(|v| matches!(v, Val::Int(k) if *k > 0 || *k == -1))
                {
                    return None;
                }
                Some(Val::List(out))
            }
            ("reversed", [l]) => {
                let mut v = self.list(l.clone())?;
                v.reverse();
                Some(Val::List(v))
            }
            ("sorted", [l]) => {
                let mut v = ints(l)?;
                v.sort_unstable();
                Some(Val::List(v.into_iter().map(Val::Int).collect()))
            }
            ("compose", [q, p]) => {
                let (q, p) = (ints(q)?, ints(p)?);
                if q.len() != p.len() {
                    return None;
                }
                let r: Option<Vec<Val>> = p
                    .iter()
                    .map(|&i| q.get(usize::try_from(i).ok()?).map(|&x| Val::Int(x)))
                    .collect();
                Some(Val::List(r?))
            }
            ("inverse_perm", [p]) => {
                let p = ints(p)?;
                let mut inv = vec![0i64; p.len()];
                for (i, &x) in p.iter().enumerate() {
                    *inv.get_mut(usize::try_from(x).ok()?)? = i as i64;
                }
                Some(Val::List(inv.into_iter().map(Val::Int).collect()))
            }
            ("disjoint", [l, m]) => {
                let (l, m) = (self.list(l.clone())?, self.list(m.clone())?);
                b(!l.iter().any(|x| {
                    let x = self.scalar_of(x.clone());
                    m.iter().any(|y| vals_equal(&x, &self.scalar_of(y.clone())))
                }))
            }
            ("keeps_layout", [p, x]) => {
                let p = ints(p)?;
                let s = ctx.shape(Self::class(x)?)?;
                if p.len() != s.len() {
                    return None;
                }
                // The dims not known to be 1, in the order the permutation lists them, must
                // keep their relative order.
                let mut last = -1i64;
                for &i in &p {
                    let d = s.get(usize::try_from(i).ok()?)?;
                    if *d != SymDim::Known(1) {
                        if i < last {
                            return b(false);
                        }
                        last = i;
                    }
                }
                b(true)
            }
            ("is_identity", [p]) => {
                let p = ints(p)?;
                b(p.iter().enumerate().all(|(i, &x)| x == i as i64))
            }
            ("normalize_axes", [axes, r]) => {
                let r = r.as_int()?;
                let axes = match self.scalar_of(axes.clone()) {
                    Val::Int(i) => vec![i],
                    other => ints(&other)?,
                };
                let out: Option<Vec<Val>> = axes
                    .iter()
                    .map(|&x| {
                        let y = if x < 0 { x + r } else { x };
                        (0..r.max(1)).contains(&y).then_some(Val::Int(y))
                    })
                    .collect();
                Some(Val::List(out?))
            }
            _ => {
                let g = self.guards.guards.get(f)?;
                g(ctx, a)
            }
        }
    }
}

/// A shape vector's value with symbolic dims: the analysis' `sym`, or a constant's entries.
fn sym_value(eg: &OnnxEGraph, c: Id) -> Option<Vec<SymDim>> {
    if let Some(v) = eg[c].data.sym.clone() {
        return Some(v);
    }
    match const_val(eg, eg[c].data.constant?)? {
        Val::List(l) => l.iter().map(|v| v.as_int().map(SymDim::Known)).collect(),
        _ => None,
    }
}
