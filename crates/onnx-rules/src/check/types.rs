//! Types: of attributes (schema attributes and logical parameters), of the guard and
//! computed-attribute expressions (function signatures from [`crate::funcs`]), and the light
//! element-type check between the two sides of a rule.
//!
//! The side check computes, per epoch, the element types each left and right op node can
//! produce: the allowed types of its output's type parameter, narrowed by the types of inputs
//! that share that parameter, and by the slots a left variable sits in. When a root's right
//! side can never have a type its left side has, the rule can never apply there: an error.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::attribute_proto::AttributeType;
use onnx_schema::{OpSchema, ParamOption};

use crate::diag::Diagnostic;
use crate::funcs::{builtin, Ty};
use crate::ir::*;
use crate::params::{logical_param, ParamLoc};
use crate::CheckOptions;

use super::resolve::Resolved;
use super::{closest, Findings, Lowered};

/// The type of an attribute or logical parameter, as far as the checks care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttrTy {
    Int,
    Float,
    Str,
    Ints,
    Floats,
    Strs,
    /// A tensor attribute (`value` of Constant, ...): any constant.
    Tensor,
    /// `training_mode` as an input: a bool (an int is accepted).
    Bool,
    /// Graphs, type protos, sparse tensors: no literal or expression fits.
    Other,
}

impl AttrTy {
    fn of(ty: AttributeType) -> AttrTy {
        match ty {
            AttributeType::Int => AttrTy::Int,
            AttributeType::Float => AttrTy::Float,
            AttributeType::String => AttrTy::Str,
            AttributeType::Ints => AttrTy::Ints,
            AttributeType::Floats => AttrTy::Floats,
            AttributeType::Strings => AttrTy::Strs,
            AttributeType::Tensor => AttrTy::Tensor,
            _ => AttrTy::Other,
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            AttrTy::Int => "an INT",
            AttrTy::Float => "a FLOAT",
            AttrTy::Str => "a STRING",
            AttrTy::Ints => "INTS (a list of ints)",
            AttrTy::Floats => "FLOATS (a list of numbers)",
            AttrTy::Strs => "STRINGS (a list of strings)",
            AttrTy::Tensor => "a TENSOR",
            AttrTy::Bool => "a bool",
            AttrTy::Other => "a graph or type attribute",
        }
    }

    /// The expression type of a variable bound to an attribute of this type.
    fn expr_ty(self) -> Ty {
        match self {
            AttrTy::Int => Ty::Int,
            AttrTy::Float => Ty::Float,
            AttrTy::Str => Ty::Str,
            AttrTy::Ints | AttrTy::Floats | AttrTy::Strs => Ty::List,
            AttrTy::Bool => Ty::Bool,
            AttrTy::Tensor | AttrTy::Other => Ty::Any,
        }
    }
}

/// The type of a logical parameter where it is an input (its value is a constant there).
fn logical_input_ty(name: &str) -> AttrTy {
    match name {
        "scales" | "roi" => AttrTy::Floats,
        "k" => AttrTy::Int,
        "min" | "max" | "value" | "ratio" => AttrTy::Float,
        "training_mode" => AttrTy::Bool,
        "axes" | "split" | "pads" | "starts" | "ends" | "steps" | "shape" | "sizes" => AttrTy::Ints,
        _ => AttrTy::Tensor,
    }
}

/// Where an attribute name of a rule lives in one schema version.
pub(crate) enum AttrSlot {
    /// A schema attribute (possibly a logical parameter that is an attribute here).
    Attr(AttrTy),
    /// A logical parameter that is this input here.
    Input(usize, AttrTy),
}

impl AttrSlot {
    pub(crate) fn ty(&self) -> AttrTy {
        match self {
            AttrSlot::Attr(t) | AttrSlot::Input(_, t) => *t,
        }
    }
}

/// Resolves the attribute `name` of a rule against one schema version: a logical parameter
/// first ([`crate::params`]), else a schema attribute of that name.
pub(crate) fn attr_slot(schema: &OpSchema, name: &str) -> Option<AttrSlot> {
    if schema.domain.is_empty() {
        if let Some(p) = logical_param(&schema.name, schema.since_version, name) {
            return Some(match p.loc {
                ParamLoc::Attr(a) => AttrSlot::Attr(
                    schema
                        .attribute(a)
                        .map_or(AttrTy::Tensor, |a| AttrTy::of(a.ty)),
                ),
                ParamLoc::Input(i) => AttrSlot::Input(i, logical_input_ty(name)),
            });
        }
    }
    schema
        .attribute(name)
        .map(|a| AttrSlot::Attr(AttrTy::of(a.ty)))
}

/// Whether a literal attribute value of a pattern fits the attribute type.
pub(crate) fn literal_fits(lit: &Literal, ty: AttrTy) -> bool {
    let all = |items: &[Literal], f: fn(&Literal) -> bool| items.iter().all(f);
    let is_int = |l: &Literal| matches!(l, Literal::Int(_));
    let is_num = |l: &Literal| matches!(l, Literal::Int(_) | Literal::Float(_));
    let is_str = |l: &Literal| matches!(l, Literal::Str(_));
    match (ty, lit) {
        (AttrTy::Tensor, _) => true,
        (AttrTy::Int, Literal::Int(_)) => true,
        (AttrTy::Float, Literal::Int(_) | Literal::Float(_)) => true,
        (AttrTy::Str, Literal::Str(_)) => true,
        (AttrTy::Bool, Literal::Bool(_) | Literal::Int(_)) => true,
        (AttrTy::Ints, Literal::List(items)) => all(items, is_int),
        (AttrTy::Floats, Literal::List(items)) => all(items, is_num),
        (AttrTy::Strs, Literal::List(items)) => all(items, is_str),
        _ => false,
    }
}

/// Whether a computed attribute expression of type `ty` fits the attribute type.
pub(crate) fn expr_fits(ty: Ty, attr: AttrTy) -> bool {
    if matches!(ty, Ty::Any | Ty::AttrVal) {
        return attr != AttrTy::Other;
    }
    match attr {
        AttrTy::Int => matches!(ty, Ty::Int | Ty::Dim | Ty::DType | Ty::Num),
        AttrTy::Float => matches!(ty, Ty::Int | Ty::Float | Ty::Num | Ty::Dim),
        AttrTy::Str => matches!(ty, Ty::Str | Ty::DType),
        AttrTy::Ints | AttrTy::Floats | AttrTy::Strs => ty == Ty::List,
        AttrTy::Tensor => ty != Ty::Bool,
        AttrTy::Bool => matches!(ty, Ty::Bool | Ty::Int),
        AttrTy::Other => false,
    }
}

// ---- expressions --------------------------------------------------------------------------

/// The type of an attribute variable: its attribute's type where that is the same in every
/// schema version it binds to, else unknown.
fn attr_var_ty(lw: &Lowered, res: &Resolved, v: VarId) -> Ty {
    let Some((pid, name)) = lw.attr_binding.get(&v) else {
        return Ty::Any;
    };
    let Pat::Op(op) = lw.rule.pat(*pid) else {
        return Ty::Any;
    };
    let bindings = match &op.head {
        OpHead::Named(r) => res.bindings(r),
        OpHead::Var { var, .. } => lw
            .op_class
            .get(var)
            .map_or(Vec::new(), |c| res.class_bindings(*c)),
    };
    let tys: BTreeSet<Ty> = bindings
        .iter()
        .filter_map(|(s, _)| attr_slot(s, name))
        .map(|slot| slot.ty().expr_ty())
        .collect();
    match tys.len() {
        1 => tys.into_iter().next().unwrap_or(Ty::Any),
        _ => Ty::Any,
    }
}

fn var_ty(lw: &Lowered, res: &Resolved, v: VarId) -> Ty {
    if lw.error_vars.contains(&v) {
        return Ty::Any;
    }
    match lw.rule.var(v).kind {
        VarKind::Value | VarKind::Let => Ty::Value,
        VarKind::List => Ty::List,
        VarKind::Attr => attr_var_ty(lw, res, v),
        VarKind::Rest | VarKind::Op => Ty::Any,
    }
}

/// Types every expression of the rule (indexed by [`ExprId`]), reporting unknown functions,
/// wrong arities and argument types, operator misuse and a non-bool guard.
pub(crate) fn expr_types(
    lw: &Lowered,
    res: &Resolved,
    options: &CheckOptions,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Ty> {
    let rule = &lw.rule;
    let mut tys: Vec<Ty> = Vec::with_capacity(rule.exprs.len());
    for (expr, span) in &rule.exprs {
        // Children precede their parent in the arena.
        let ty_of = |e: &ExprId| tys.get(e.0 as usize).copied().unwrap_or(Ty::Any);
        let span_of = |e: &ExprId| rule.exprs.get(e.0 as usize).map_or(*span, |(_, s)| *s);
        let ty = match expr {
            Expr::Literal(l) => match l {
                Literal::Int(_) => Ty::Int,
                Literal::Float(_) => Ty::Float,
                Literal::Str(_) => Ty::Str,
                Literal::Bool(_) => Ty::Bool,
                Literal::List(_) => Ty::List,
            },
            Expr::List(_) => Ty::List,
            Expr::DType(_) => Ty::DType,
            Expr::Var(v) => var_ty(lw, res, *v),
            Expr::Call { func, args } => {
                if builtin(func).is_some() && options.extra_guards.iter().any(|g| g.name == *func) {
                    diags.push(Diagnostic::new(
                        *span,
                        format!(
                            "`{func}` is a built-in function: a guard registered in Rust needs another name"
                        ),
                    ));
                }
                let sig: Option<(&[Ty], Ty)> = match builtin(func) {
                    Some(f) => Some((f.params, f.ret)),
                    None => options
                        .extra_guards
                        .iter()
                        .find(|g| g.name == *func)
                        .map(|g| (g.params.as_slice(), g.ret)),
                };
                match sig {
                    None => {
                        let mut d = Diagnostic::new(*span, format!("unknown function `{func}`"));
                        let names = crate::funcs::BUILTINS
                            .iter()
                            .map(|f| f.name)
                            .chain(options.extra_guards.iter().map(|g| g.name.as_str()));
                        if let Some(close) = closest(func, names) {
                            d = d.with_note(format!("did you mean `{close}`?"));
                        }
                        diags.push(d);
                        Ty::Any
                    }
                    Some((params, ret)) => {
                        if params.len() != args.len() {
                            let shown: Vec<String> = params.iter().map(Ty::to_string).collect();
                            diags.push(Diagnostic::new(
                                *span,
                                format!(
                                    "`{func}` takes {} argument{} ({}), got {}",
                                    params.len(),
                                    if params.len() == 1 { "" } else { "s" },
                                    shown.join(", "),
                                    args.len()
                                ),
                            ));
                        } else {
                            for (k, (p, a)) in params.iter().zip(args).enumerate() {
                                let t = ty_of(a);
                                if !p.accepts(t) {
                                    diags.push(Diagnostic::new(
                                        span_of(a),
                                        format!(
                                            "argument {} of `{func}` must be {}, got {}",
                                            k + 1,
                                            p.describe(),
                                            t.describe()
                                        ),
                                    ));
                                }
                            }
                        }
                        ret
                    }
                }
            }
            Expr::Unary { op, arg } => {
                let t = ty_of(arg);
                match op {
                    UnOp::Not => {
                        if !Ty::Bool.accepts(t) {
                            diags.push(Diagnostic::new(
                                *span,
                                format!("`!` needs a bool, got {}", t.describe()),
                            ));
                        }
                        Ty::Bool
                    }
                    UnOp::Neg => {
                        if !t.is_numeric() {
                            diags.push(Diagnostic::new(
                                *span,
                                format!("`-` needs a number, got {}", t.describe()),
                            ));
                            Ty::Any
                        } else if t == Ty::Dim {
                            Ty::Int
                        } else {
                            t
                        }
                    }
                }
            }
            Expr::Binary { op, lhs, rhs } => {
                let (l, r) = (ty_of(lhs), ty_of(rhs));
                binary_ty(*op, l, r, (span_of(lhs), span_of(rhs)), *span, diags)
            }
            Expr::Index { list, index } => {
                let (l, i) = (ty_of(list), ty_of(index));
                if !Ty::List.accepts(l) {
                    diags.push(Diagnostic::new(
                        span_of(list),
                        format!("only a list can be indexed, this is {}", l.describe()),
                    ));
                }
                if !Ty::Int.accepts(i) {
                    diags.push(Diagnostic::new(
                        span_of(index),
                        format!("an index must be an int, got {}", i.describe()),
                    ));
                }
                Ty::Any
            }
        };
        tys.push(ty);
    }
    for (what, e) in rule
        .guard
        .iter()
        .map(|&g| ("the guard", g))
        .chain(rule.hints.iter().map(|&h| ("a hint", h)))
    {
        let t = tys.get(e.0 as usize).copied().unwrap_or(Ty::Any);
        if !Ty::Bool.accepts(t) {
            let span = rule.exprs.get(e.0 as usize).map_or(rule.span, |(_, s)| *s);
            diags.push(Diagnostic::new(
                span,
                format!("{what} must be a bool, but it is {}", t.describe()),
            ));
        }
    }
    tys
}

fn binary_ty(
    op: BinOp,
    l: Ty,
    r: Ty,
    spans: (Span, Span),
    span: Span,
    diags: &mut Vec<Diagnostic>,
) -> Ty {
    let sym = match op {
        BinOp::And => "&&",
        BinOp::Or => "||",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
    };
    match op {
        BinOp::And | BinOp::Or => {
            for (t, s) in [(l, spans.0), (r, spans.1)] {
                if !Ty::Bool.accepts(t) {
                    diags.push(Diagnostic::new(
                        s,
                        format!("`{sym}` needs bools, got {}", t.describe()),
                    ));
                }
            }
            Ty::Bool
        }
        BinOp::Eq | BinOp::Ne => {
            if l == Ty::Value || r == Ty::Value {
                diags.push(Diagnostic::new(
                    span,
                    format!("`{sym}` cannot compare values (tensors): compare `value(v)`, or use `all_equal` or `same_shape`"),
                ));
            } else if !(l.accepts(r) || r.accepts(l) || (l.is_numeric() && r.is_numeric())) {
                diags.push(Diagnostic::new(
                    span,
                    format!("`{sym}` compares {} with {}", l.describe(), r.describe()),
                ));
            }
            Ty::Bool
        }
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            for (t, s) in [(l, spans.0), (r, spans.1)] {
                if !t.is_numeric() {
                    diags.push(Diagnostic::new(
                        s,
                        format!("`{sym}` needs numbers, got {}", t.describe()),
                    ));
                }
            }
            Ty::Bool
        }
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => {
            let mut ok = true;
            for (t, s) in [(l, spans.0), (r, spans.1)] {
                if !t.is_numeric() {
                    ok = false;
                    diags.push(Diagnostic::new(
                        s,
                        format!("`{sym}` needs numbers, got {}", t.describe()),
                    ));
                }
            }
            let int_like = |t: Ty| matches!(t, Ty::Int | Ty::Dim);
            match (l, r) {
                _ if !ok => Ty::Any,
                (Ty::Any, _) | (_, Ty::Any) => Ty::Any,
                (a, b) if int_like(a) && int_like(b) => Ty::Int,
                (Ty::Float, _) | (_, Ty::Float) => Ty::Float,
                _ => Ty::Num,
            }
        }
    }
}

// ---- element types between the sides ------------------------------------------------------

/// A set of type strings (`tensor(float)`); `None` is unknown (anything).
type TypeSet = Option<BTreeSet<String>>;

fn meet(a: TypeSet, b: TypeSet) -> TypeSet {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The formal input a position binds to (the last one again when it is variadic).
fn formal_input(s: &OpSchema, i: usize) -> Option<&onnx_schema::FormalParameter> {
    s.inputs.get(i).or_else(|| {
        s.inputs
            .last()
            .filter(|f| f.option == ParamOption::Variadic)
    })
}

fn allowed(s: &OpSchema, type_str: &str) -> TypeSet {
    s.allowed_types(type_str)
        .map(|a| a.iter().cloned().collect())
}

/// The element types output `index` of `s` can have, given the types of its inputs.
fn output_types(s: &OpSchema, index: usize, inputs: &[TypeSet]) -> TypeSet {
    let formal = s.outputs.get(index).or_else(|| {
        s.outputs
            .last()
            .filter(|f| f.option == ParamOption::Variadic)
    })?;
    let mut set = allowed(s, &formal.type_str);
    for (i, t) in inputs.iter().enumerate() {
        if formal_input(s, i).is_some_and(|f| f.type_str == formal.type_str) {
            set = meet(set, t.clone());
        }
    }
    set
}

struct Sides<'a> {
    lw: &'a Lowered,
    res: &'a Resolved,
    window: OpsetWindow,
    vars: BTreeMap<VarId, BTreeSet<String>>,
}

impl Sides<'_> {
    fn schema(&self, head: &OpHead) -> Option<&'static OpSchema> {
        match head {
            OpHead::Named(r) => self.res.binding_at(r, self.window),
            OpHead::Var { .. } => None,
        }
    }

    /// Narrows each left variable to the types of the input slots it sits in.
    fn constrain_vars(&mut self) {
        for (pat, _) in &self.lw.rule.pats {
            let Pat::Op(op) = pat else { continue };
            let Some(s) = self.schema(&op.head) else {
                continue;
            };
            for (i, input) in op.inputs.iter().enumerate() {
                let v = match input {
                    InputPat::Pat(p) => match self.lw.rule.pat(*p) {
                        Pat::Var(v) => *v,
                        _ => continue,
                    },
                    InputPat::Optional(v) => *v,
                    InputPat::Variadic(_) => continue,
                };
                let Some(set) = formal_input(s, i).and_then(|f| allowed(s, &f.type_str)) else {
                    continue;
                };
                let merged = meet(self.vars.get(&v).cloned(), Some(set)).unwrap_or_default();
                self.vars.insert(v, merged);
            }
        }
    }

    fn pat_types(&self, p: PatId, index: usize) -> TypeSet {
        match self.lw.rule.pat(p) {
            Pat::Var(v) => self.vars.get(v).cloned(),
            Pat::Proj { tuple, index } => self.pat_types(*tuple, *index),
            Pat::Op(op) => {
                let s = self.schema(&op.head)?;
                let inputs: Vec<TypeSet> = op
                    .inputs
                    .iter()
                    .map(|i| match i {
                        InputPat::Pat(q) => self.pat_types(*q, 0),
                        InputPat::Optional(v) => self.vars.get(v).cloned(),
                        InputPat::Variadic(_) => None,
                    })
                    .collect();
                output_types(s, index, &inputs)
            }
            _ => None,
        }
    }

    fn term_types(&self, t: TermId, index: usize, depth: usize) -> TypeSet {
        if depth > 64 {
            return None;
        }
        match self.lw.rule.term(t) {
            Term::Var(v) => match self.lw.let_terms.get(v) {
                Some(lt) => self.term_types(*lt, 0, depth + 1),
                None if self.lw.rule.var(*v).kind == VarKind::Value => self.vars.get(v).cloned(),
                None => None,
            },
            Term::Proj { tuple, index } => self.term_types(*tuple, *index, depth + 1),
            Term::Op(op) => {
                let s = self.schema(&op.head)?;
                let inputs: Vec<TypeSet> = op
                    .inputs
                    .iter()
                    .map(|i| match i {
                        InputTerm::Term(q) => self.term_types(*q, 0, depth + 1),
                        InputTerm::Splice(_) => None,
                    })
                    .collect();
                output_types(s, index, &inputs)
            }
            _ => None,
        }
    }
}

fn show_types(set: &BTreeSet<String>) -> String {
    let names: Vec<&str> = set
        .iter()
        .map(|t| {
            t.strip_prefix("tensor(")
                .and_then(|t| t.strip_suffix(')'))
                .unwrap_or(t)
        })
        .collect();
    if names.len() > 6 {
        format!("{}, ... ({} types)", names[..6].join(", "), names.len())
    } else {
        names.join(", ")
    }
}

/// Reports the roots whose right side can never have the left side's element type.
pub(crate) fn check_sides(lw: &Lowered, res: &Resolved, diags: &mut Vec<Diagnostic>) {
    let mut findings = Findings::default();
    for epoch in &res.epochs {
        let mut sides = Sides {
            lw,
            res,
            window: epoch.window,
            vars: BTreeMap::new(),
        };
        sides.constrain_vars();
        for (l, r) in lw.rule.lhs.iter().zip(lw.rule.rhs_terms()) {
            let (Some(lt), Some(rt)) = (sides.pat_types(*l, 0), sides.term_types(*r, 0, 0)) else {
                continue;
            };
            if lt.is_empty() || rt.is_empty() || !lt.is_disjoint(&rt) {
                continue;
            }
            let span = lw
                .rule
                .terms
                .get(r.0 as usize)
                .map_or(lw.rule.span, |(_, s)| *s);
            findings.add(
                span,
                "the right side never has an element type of the left side".to_string(),
                vec![
                    format!("left side: {}", show_types(&lt)),
                    format!("right side: {}", show_types(&rt)),
                ],
                epoch.window,
            );
        }
    }
    findings.emit(res.window, diags);
}
