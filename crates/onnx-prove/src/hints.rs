//! What a rule's guard says about the instances it accepts, read before any instance is built:
//! which value variables must be constants (`is_const`, `is_static`, `value`, `all_equal`,
//! `any_equal`, `halves_equal`, `counts_up`) or must not be (`!is_const(s)`: computed from a shape), and
//! generation hints from the guard's top-level conjunction (`rank(v) == E`, `dim(v, i) == E`,
//! `t == E` for an attribute variable, `is_identity(p)`, `all_equal(p, 0)`,
//! `!any_equal(s, 0)`, `halves_equal(v)`, `counts_up(v)`, `len(value(a)) == n`, `normalize_axes(a, r) == E`). A hint is applied
//! when its right side can be evaluated from what the generator has already built; guards are
//! still evaluated by the engine, so a hint only raises the chance that the rule fires.

use std::collections::{BTreeMap, BTreeSet};

use onnx_rules::ir::{BinOp, Expr, ExprId, Literal, Rule, UnOp, VarId, VarKind};

/// A value of a hint expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GVal {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<GVal>),
    DType(i32),
    Absent,
}

impl GVal {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            GVal::Int(i) => Some(*i),
            GVal::Bool(b) => Some(*b as i64),
            GVal::DType(d) => Some(*d as i64),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            GVal::Float(f) => Some(*f),
            other => other.as_int().map(|i| i as f64),
        }
    }
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            GVal::List(l) => l.iter().map(GVal::as_int).collect(),
            other => other.as_int().map(|i| vec![i]),
        }
    }
}

impl From<&Literal> for GVal {
    fn from(l: &Literal) -> GVal {
        match l {
            Literal::Int(i) => GVal::Int(*i),
            Literal::Float(f) => GVal::Float(*f),
            Literal::Str(s) => GVal::Str(s.clone()),
            Literal::Bool(b) => GVal::Bool(*b),
            Literal::List(l) => GVal::List(l.iter().map(GVal::from).collect()),
        }
    }
}

/// What the generator knows while it builds an instance.
pub(crate) trait Facts {
    /// Shape of a bound value variable.
    fn shape(&self, v: VarId) -> Option<Vec<usize>>;
    /// Element type code of a bound value variable.
    fn dtype(&self, v: VarId) -> Option<i32>;
    /// Value of a bound attribute variable, or of a small constant value variable.
    fn value(&self, v: VarId) -> Option<GVal>;
    /// The instance's default-domain opset.
    fn opset(&self) -> i64;
}

/// Hints and constant requirements of one rule.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hints {
    /// Value variables that must be constants (initializers).
    pub consts: BTreeSet<VarId>,
    /// Variables that must not be constants (`!is_const(s)`).
    pub nonconst: BTreeSet<VarId>,
    /// Constant value variables whose value becomes an attribute (`value(eps)`): small positive.
    pub small: BTreeSet<VarId>,
    /// `rank(v) == E`.
    pub rank: BTreeMap<VarId, ExprId>,
    /// `dim(v, i) == E`.
    pub dims: Vec<(VarId, i64, ExprId)>,
    /// `dtype(v) == float` (a literal type).
    pub dtype: BTreeMap<VarId, i32>,
    /// `member(dtype(v), [float, double])`: the types v may take.
    pub dtype_in: BTreeMap<VarId, Vec<i32>>,
    /// `t == E` for an attribute variable (also `normalize_axes(t, r) == E`, `value(t) == E`).
    pub attr_eq: BTreeMap<VarId, ExprId>,
    /// `is_identity(p)`.
    pub identity: BTreeSet<VarId>,
    /// `all_equal(v, x)`: every element is x.
    pub fill: BTreeMap<VarId, f64>,
    /// `!any_equal(v, x)`: no element is x.
    pub avoid: BTreeMap<VarId, f64>,
    /// `halves_equal(v)`: the last axis is two equal halves.
    pub halves: BTreeSet<VarId>,
    /// `counts_up(v)`: v's elements are 0, 1, ..., n - 1.
    pub counts: BTreeSet<VarId>,
    /// `len(value(a)) == E` / `len(a) == E`.
    pub len: BTreeMap<VarId, ExprId>,
    /// `value(v) == E` for a value variable: v is the constant E (a scalar or a 1-D list).
    pub values: BTreeMap<VarId, ExprId>,
    /// `nonneg(v)` / `in_range(v, a, b)`: every element of integer value v lies in [a, b]
    /// (`None`: unbounded on that side).
    pub ranges: BTreeMap<VarId, (Option<i64>, Option<i64>)>,
}

impl Hints {
    pub fn from_rule(rule: &Rule) -> Hints {
        let mut h = Hints::default();
        // Constants: every value variable read by a function that needs a constant.
        for (e, _) in &rule.exprs {
            if let Expr::Call { func, args } = e {
                let needs_const = matches!(
                    func.as_str(),
                    "is_const"
                        | "is_static"
                        | "value"
                        | "all_equal"
                        | "any_equal"
                        | "halves_equal"
                        | "counts_up"
                        | "finite"
                );
                if let (true, Some(&a)) = (needs_const, args.first()) {
                    if let Expr::Var(v) = rule.expr(a) {
                        if rule.var(*v).kind == VarKind::Value {
                            h.consts.insert(*v);
                            if func == "value" {
                                h.small.insert(*v);
                            }
                        }
                    }
                }
            }
        }
        for g in rule.guard.iter().chain(&rule.hints).copied() {
            let atoms = rule.conjuncts(g);
            for a in atoms {
                h.add_atom(rule, a);
            }
        }
        let nonconst = h.nonconst.clone();
        h.consts.retain(|v| !nonconst.contains(v));
        h
    }

    fn add_atom(&mut self, rule: &Rule, a: ExprId) {
        let var_of = |e: ExprId| match rule.expr(e) {
            Expr::Var(v) => Some(*v),
            _ => None,
        };
        let lit_f64 = |e: ExprId| match rule.expr(e) {
            Expr::Literal(l) => GVal::from(l).as_f64(),
            Expr::Unary { op: UnOp::Neg, arg } => match rule.expr(*arg) {
                Expr::Literal(l) => GVal::from(l).as_f64().map(|x| -x),
                _ => None,
            },
            _ => None,
        };
        match rule.expr(a) {
            Expr::Call { func, args } => match (func.as_str(), args.as_slice()) {
                ("is_identity", [p]) => self.identity.extend(var_of(*p)),
                ("member", [x, l]) => {
                    let v = match rule.expr(*x) {
                        Expr::Call { func, args } if func == "dtype" && args.len() == 1 => {
                            var_of(args[0])
                        }
                        _ => None,
                    };
                    let types: Option<Vec<i32>> = match rule.expr(*l) {
                        Expr::List(items) => items
                            .iter()
                            .map(|&i| match rule.expr(i) {
                                Expr::DType(d) => Some(*d),
                                _ => None,
                            })
                            .collect(),
                        _ => None,
                    };
                    if let (Some(v), Some(t)) = (v, types) {
                        self.dtype_in.insert(v, t);
                    }
                }
                ("all_equal", [v, x]) => {
                    if let (Some(v), Some(x)) = (var_of(*v), lit_f64(*x)) {
                        self.fill.insert(v, x);
                    }
                }
                ("halves_equal", [v]) => self.halves.extend(var_of(*v)),
                ("counts_up", [v]) => self.counts.extend(var_of(*v)),
                ("nonneg", [v]) => {
                    if let Some(v) = var_of(*v) {
                        self.ranges.insert(v, (Some(0), None));
                    }
                }
                ("in_range", [v, lo, hi]) => {
                    let int = |e: ExprId| lit_f64(e).filter(|x| x.fract() == 0.0).map(|x| x as i64);
                    if let (Some(v), Some(lo), Some(hi)) = (var_of(*v), int(*lo), int(*hi)) {
                        self.ranges.insert(v, (Some(lo), Some(hi)));
                    }
                }
                _ => {}
            },
            Expr::Unary { op: UnOp::Not, arg } => {
                if let Expr::Call { func, args } = rule.expr(*arg) {
                    match (func.as_str(), args.as_slice()) {
                        ("any_equal", [v, x]) => {
                            if let (Some(v), Some(x)) = (var_of(*v), lit_f64(*x)) {
                                self.avoid.insert(v, x);
                            }
                        }
                        ("is_const" | "is_static", [v]) => self.nonconst.extend(var_of(*v)),
                        _ => {}
                    }
                }
            }
            Expr::Binary {
                op: BinOp::Eq,
                lhs,
                rhs,
            } if !self.add_eq(rule, *lhs, *rhs) => {
                self.add_eq(rule, *rhs, *lhs);
            }
            _ => {}
        }
    }

    /// `l == r` where `l` says what to set; true when it was understood.
    fn add_eq(&mut self, rule: &Rule, l: ExprId, r: ExprId) -> bool {
        match rule.expr(l) {
            Expr::Var(v) if rule.var(*v).kind == VarKind::Attr => {
                self.attr_eq.insert(*v, r);
                true
            }
            Expr::Call { func, args } => {
                let first = args.first().and_then(|&a| match rule.expr(a) {
                    Expr::Var(v) => Some(*v),
                    Expr::Call { func, args } if func == "value" && args.len() == 1 => {
                        match rule.expr(args[0]) {
                            Expr::Var(v) => Some(*v),
                            _ => None,
                        }
                    }
                    _ => None,
                });
                let Some(v) = first else {
                    return false;
                };
                let is_attr = rule.var(v).kind == VarKind::Attr;
                match (func.as_str(), args.len()) {
                    ("rank", 1) => {
                        self.rank.insert(v, r);
                    }
                    ("dim", 2) => match rule.expr(args[1]) {
                        Expr::Literal(Literal::Int(i)) => self.dims.push((v, *i, r)),
                        Expr::Unary { op: UnOp::Neg, arg } => match rule.expr(*arg) {
                            Expr::Literal(Literal::Int(i)) => self.dims.push((v, -*i, r)),
                            _ => return false,
                        },
                        _ => return false,
                    },
                    ("dtype", 1) => match rule.expr(r) {
                        Expr::DType(d) => {
                            self.dtype.insert(v, *d);
                        }
                        _ => return false,
                    },
                    ("len", 1) => {
                        self.len.insert(v, r);
                    }
                    ("normalize_axes", 2) | ("value", 1) if is_attr => {
                        self.attr_eq.insert(v, r);
                    }
                    ("value", 1) => {
                        self.values.insert(v, r);
                        self.consts.insert(v);
                    }
                    _ => return false,
                }
                true
            }
            _ => false,
        }
    }
}

/// Evaluates a hint expression from what is known; `None` when something is not (yet) known.
pub(crate) fn eval(rule: &Rule, e: ExprId, f: &dyn Facts) -> Option<GVal> {
    match rule.expr(e) {
        Expr::Literal(l) => Some(GVal::from(l)),
        Expr::List(items) => Some(GVal::List(
            items
                .iter()
                .map(|&i| eval(rule, i, f))
                .collect::<Option<_>>()?,
        )),
        Expr::DType(d) => Some(GVal::DType(*d)),
        Expr::Var(v) => f.value(*v),
        Expr::Unary { op, arg } => match (op, eval(rule, *arg, f)?) {
            (UnOp::Not, GVal::Bool(b)) => Some(GVal::Bool(!b)),
            (UnOp::Neg, GVal::Int(i)) => Some(GVal::Int(i.checked_neg()?)),
            (UnOp::Neg, GVal::Float(x)) => Some(GVal::Float(-x)),
            _ => None,
        },
        Expr::Binary { op, lhs, rhs } => {
            let (a, b) = (eval(rule, *lhs, f)?, eval(rule, *rhs, f)?);
            binary(*op, a, b)
        }
        Expr::Index { list, index } => {
            let l = match eval(rule, *list, f)? {
                GVal::List(l) => l,
                _ => return None,
            };
            let i = eval(rule, *index, f)?.as_int()?;
            let i = if i < 0 { i + l.len() as i64 } else { i };
            l.get(usize::try_from(i).ok()?).cloned()
        }
        Expr::Call { func, args } => call(rule, func, args, f),
    }
}

fn binary(op: BinOp, a: GVal, b: GVal) -> Option<GVal> {
    match op {
        BinOp::And | BinOp::Or => match (a, b) {
            (GVal::Bool(x), GVal::Bool(y)) => {
                Some(GVal::Bool(if op == BinOp::And { x && y } else { x || y }))
            }
            _ => None,
        },
        BinOp::Eq => Some(GVal::Bool(
            a == b || (a.as_f64().is_some() && a.as_f64() == b.as_f64()),
        )),
        BinOp::Ne => Some(GVal::Bool(
            a != b && (a.as_f64().is_none() || a.as_f64() != b.as_f64()),
        )),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            Some(GVal::Bool(match op {
                BinOp::Lt => x < y,
                BinOp::Le => x <= y,
                BinOp::Gt => x > y,
                _ => x >= y,
            }))
        }
        _ => match (&a, &b) {
            (GVal::Int(x), GVal::Int(y)) => Some(GVal::Int(match op {
                BinOp::Add => x.checked_add(*y)?,
                BinOp::Sub => x.checked_sub(*y)?,
                BinOp::Mul => x.checked_mul(*y)?,
                BinOp::Div => x.checked_div(*y)?,
                _ => x.checked_rem(*y)?,
            })),
            _ => {
                let (x, y) = (a.as_f64()?, b.as_f64()?);
                Some(GVal::Float(match op {
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

fn call(rule: &Rule, func: &str, args: &[ExprId], f: &dyn Facts) -> Option<GVal> {
    let var = |i: usize| match rule.expr(*args.get(i)?) {
        Expr::Var(v) => Some(*v),
        _ => None,
    };
    let arg = |i: usize| eval(rule, *args.get(i)?, f);
    let ints = |v: GVal| v.as_ints();
    match (func, args.len()) {
        ("rank", 1) => Some(GVal::Int(f.shape(var(0)?)?.len() as i64)),
        ("shape", 1) => Some(GVal::List(
            f.shape(var(0)?)?
                .into_iter()
                .map(|d| GVal::Int(d as i64))
                .collect(),
        )),
        ("dim", 2) => {
            let s = f.shape(var(0)?)?;
            let i = arg(1)?.as_int()?;
            let i = if i < 0 { i + s.len() as i64 } else { i };
            Some(GVal::Int(*s.get(usize::try_from(i).ok()?)? as i64))
        }
        ("numel", 1) => Some(GVal::Int(f.shape(var(0)?)?.iter().product::<usize>() as i64)),
        ("dtype", 1) => Some(GVal::DType(f.dtype(var(0)?)?)),
        ("value", 1) => f.value(var(0)?),
        ("opset", 0) => Some(GVal::Int(f.opset())),
        ("member", 2) => match (arg(0)?, arg(1)?) {
            (x, GVal::List(l)) => {
                Some(GVal::Bool(l.iter().any(|e| {
                    *e == x || (x.as_f64().is_some() && x.as_f64() == e.as_f64())
                })))
            }
            _ => None,
        },
        ("len", 1) => match arg(0)? {
            GVal::List(l) => Some(GVal::Int(l.len() as i64)),
            _ => None,
        },
        ("range", 2) => {
            let (a, b) = (arg(0)?.as_int()?, arg(1)?.as_int()?);
            if b - a > 1 << 12 {
                return None;
            }
            Some(GVal::List((a..b).map(GVal::Int).collect()))
        }
        ("concat", 2) => match (arg(0)?, arg(1)?) {
            (GVal::List(mut a), GVal::List(b)) => {
                a.extend(b);
                Some(GVal::List(a))
            }
            _ => None,
        },
        ("sorted", 1) => {
            let mut l = ints(arg(0)?)?;
            l.sort_unstable();
            Some(GVal::List(l.into_iter().map(GVal::Int).collect()))
        }
        ("inverse_perm", 1) => {
            let p = ints(arg(0)?)?;
            let mut inv = vec![0i64; p.len()];
            for (i, &x) in p.iter().enumerate() {
                *inv.get_mut(usize::try_from(x).ok()?)? = i as i64;
            }
            Some(GVal::List(inv.into_iter().map(GVal::Int).collect()))
        }
        ("compose", 2) => {
            let (q, p) = (ints(arg(0)?)?, ints(arg(1)?)?);
            let r: Option<Vec<GVal>> = p
                .iter()
                .map(|&i| q.get(usize::try_from(i).ok()?).map(|&x| GVal::Int(x)))
                .collect();
            Some(GVal::List(r?))
        }
        ("normalize_axes", 2) => {
            let r = arg(1)?.as_int()?;
            let axes = ints(arg(0)?)?;
            Some(GVal::List(
                axes.iter()
                    .map(|&x| GVal::Int(if x < 0 { x + r } else { x }))
                    .collect(),
            ))
        }
        _ => None,
    }
}
