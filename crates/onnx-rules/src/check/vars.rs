//! Lowering and variables: turns one rule's syntax tree into the IR arenas, binding variables
//! on the left side (with their kind: value, attribute, list, rest, op) and resolving their
//! uses on the right side, in `let`s and in the guard. Reports kind conflicts, unbound
//! variables, misplaced `xs..`, bad projections and roots. Ops are not looked up here
//! (resolve.rs); the spans of their parts are kept in [`SiteInfo`] for later phases.

use std::collections::{BTreeMap, BTreeSet};

use crate::ast::{self, AttrItem, AttrPatValue, Clause, HeadKind, PatInput, TermInput};
use crate::classes::{is_commutative, op_class_from_name, op_class_name, OP_CLASSES};
use crate::diag::Diagnostic;
use crate::ir::*;

use super::{closest, dtype_code, Lowered, Site, SiteInfo};

/// Lowers a rule's sides and clauses (name, tags, window and epochs are filled in later).
pub(crate) fn lower_rule(def: &ast::RuleDef, diags: &mut Vec<Diagnostic>) -> Lowered {
    let mut lw = Lower {
        out: Lowered {
            rule: Rule {
                name: def.name.name.clone(),
                doc: String::new(),
                span: def.span,
                tags: Tags::default(),
                window: OpsetWindow { min: 1, max: None },
                epochs: Vec::new(),
                vars: Vec::new(),
                pats: Vec::new(),
                terms: Vec::new(),
                exprs: Vec::new(),
                lhs: Vec::new(),
                rhs: Rhs::Terms(Vec::new()),
                lets: Vec::new(),
                guard: None,
                hints: Vec::new(),
                step: None,
            },
            sites: BTreeMap::new(),
            attr_binding: BTreeMap::new(),
            rest_binding: BTreeMap::new(),
            op_class: BTreeMap::new(),
            error_vars: BTreeSet::new(),
            let_terms: BTreeMap::new(),
        },
        names: BTreeMap::new(),
        let_clause: BTreeMap::new(),
        visible_clause: usize::MAX,
        diags,
    };
    lw.rule_body(def);
    lw.out
}

struct Lower<'d> {
    out: Lowered,
    names: BTreeMap<String, VarId>,
    /// The clause index of each `let` variable.
    let_clause: BTreeMap<VarId, usize>,
    /// Lets defined by clauses before this index are visible.
    visible_clause: usize,
    diags: &'d mut Vec<Diagnostic>,
}

fn kind_desc(kind: VarKind) -> &'static str {
    match kind {
        VarKind::Value => "a value",
        VarKind::Attr => "an attribute value",
        VarKind::List => "a list of inputs (bound by `xs..`)",
        VarKind::Rest => "a set of attributes (bound by `..rest`)",
        VarKind::Op => "an op variable (bound by `$f`)",
        VarKind::Let => "a `let` value",
    }
}

fn at(span: Span) -> String {
    format!("{}:{}", span.line, span.col)
}

impl Lower<'_> {
    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.diags.push(Diagnostic::new(span, message));
    }

    fn rule_body(&mut self, def: &ast::RuleDef) {
        for p in &def.lhs {
            let id = self.pat(p);
            if !matches!(self.out.rule.pat(id), Pat::Op(_) | Pat::Proj { .. }) {
                self.error(
                    p.span(),
                    "a left side root must be an op pattern (`Op(...)`), not a variable or a constant",
                );
            }
            self.out.rule.lhs.push(id);
        }
        // Every `let` name is known before the right side is lowered: the right side may use
        // any of them, a `let` or the guard only the ones defined above it.
        for (i, clause) in def.clauses.iter().enumerate() {
            if let Clause::Let { name, .. } = clause {
                self.declare_let(name, i);
            }
        }
        if def.extern_rhs.is_some() {
            // Built in Rust: no terms (check_rule reports what an extern rule may not have).
            self.out.rule.rhs = Rhs::Extern;
        } else {
            let terms: Vec<TermId> = def.rhs.iter().map(|t| self.term(t, true)).collect();
            self.out.rule.rhs = Rhs::Terms(terms);
        }
        if def.extern_rhs.is_none() && def.lhs.len() != def.rhs.len() {
            let span = def.rhs.first().map_or(def.span, |t| t.span());
            self.error(
                span,
                format!(
                    "the left side has {} root(s) but the right side has {}",
                    def.lhs.len(),
                    def.rhs.len()
                ),
            );
        }
        for (i, clause) in def.clauses.iter().enumerate() {
            self.visible_clause = i;
            match clause {
                Clause::Let { name, term, .. } => {
                    let t = self.term(term, false);
                    if let Some(&v) = self.names.get(&name.name) {
                        if self.let_clause.get(&v) == Some(&i) {
                            self.out.rule.lets.push((v, t));
                            self.out.let_terms.insert(v, t);
                        }
                    }
                }
                Clause::Where { expr, span } => {
                    let e = self.expr(expr);
                    if self.out.rule.guard.is_some() {
                        self.error(
                            *span,
                            "a rule has at most one `where`: join the conditions with `&&`",
                        );
                    } else {
                        self.out.rule.guard = Some(e);
                    }
                }
                Clause::Hint { expr, .. } => {
                    let e = self.expr(expr);
                    self.out.rule.hints.push(e);
                }
            }
        }
    }

    fn declare_let(&mut self, name: &ast::Ident, clause: usize) {
        if dtype_code(&name.name).is_some() {
            self.error(
                name.span,
                format!(
                    "`{}` is an element type name, not a variable name",
                    name.name
                ),
            );
            return;
        }
        if let Some(&v) = self.names.get(&name.name) {
            let prev = self.out.rule.var(v).clone();
            let what = if prev.kind == VarKind::Let {
                "`let` is defined twice"
            } else {
                "`let` reuses a name bound on the left side"
            };
            self.diags.push(
                Diagnostic::new(name.span, format!("this {what}: `{}`", name.name)).with_note(
                    format!("`{}` is first bound at {}", name.name, at(prev.span)),
                ),
            );
            return;
        }
        let v = self.new_var(&name.name, VarKind::Let, name.span);
        self.names.insert(name.name.clone(), v);
        self.let_clause.insert(v, clause);
    }

    fn new_var(&mut self, name: &str, kind: VarKind, span: Span) -> VarId {
        let id = VarId(self.out.rule.vars.len() as u32);
        self.out.rule.vars.push(VarInfo {
            name: name.to_string(),
            kind,
            span,
        });
        id
    }

    /// A stand-in for a variable that could not be resolved (already reported), so the IR
    /// stays well-formed and later phases treat it as unknown.
    fn error_var(&mut self, ident: &ast::Ident, kind: VarKind) -> VarId {
        let v = self.new_var(&ident.name, kind, ident.span);
        self.out.error_vars.insert(v);
        v
    }

    /// Binds a variable on the left side, or checks a second occurrence has the same kind.
    fn bind(&mut self, ident: &ast::Ident, kind: VarKind) -> VarId {
        if dtype_code(&ident.name).is_some() {
            self.error(
                ident.span,
                format!(
                    "`{}` is an element type name, not a variable name",
                    ident.name
                ),
            );
            return self.error_var(ident, kind);
        }
        match self.names.get(&ident.name) {
            Some(&v) => {
                let prev = self.out.rule.var(v).clone();
                if prev.kind != kind {
                    self.diags.push(
                        Diagnostic::new(
                            ident.span,
                            format!(
                                "`{}` is used here as {}, but it is {}",
                                ident.name,
                                kind_desc(kind),
                                kind_desc(prev.kind)
                            ),
                        )
                        .with_note(format!(
                            "`{}` is first bound at {}",
                            ident.name,
                            at(prev.span)
                        )),
                    );
                }
                v
            }
            None => {
                let v = self.new_var(&ident.name, kind, ident.span);
                self.names.insert(ident.name.clone(), v);
                v
            }
        }
    }

    /// Resolves a use (right side, `let`, guard): the variable must be bound on the left or
    /// by a visible `let`, with one of the `allowed` kinds; `role` says what is needed here.
    fn use_var(&mut self, ident: &ast::Ident, allowed: &[VarKind], role: &str) -> VarId {
        let found = self.names.get(&ident.name).copied();
        let Some(v) = found.filter(|v| self.visible(*v)) else {
            let message = if found.is_some() {
                format!(
                    "`{}` is used before its `let`: a `let` or the guard sees only the `let`s above it",
                    ident.name
                )
            } else {
                format!(
                    "unbound variable `{}`: it is not bound on the left side or by a `let`",
                    ident.name
                )
            };
            let mut d = Diagnostic::new(ident.span, message);
            if found.is_none() {
                let names = self.names.keys().map(String::as_str);
                if let Some(close) = closest(&ident.name, names) {
                    d = d.with_note(format!("did you mean `{close}`?"));
                }
            }
            self.diags.push(d);
            let kind = allowed.first().copied().unwrap_or(VarKind::Value);
            return self.error_var(ident, kind);
        };
        let kind = self.out.rule.var(v).kind;
        if !allowed.contains(&kind) && !self.out.error_vars.contains(&v) {
            let span = self.out.rule.var(v).span;
            self.diags.push(
                Diagnostic::new(
                    ident.span,
                    format!(
                        "`{}` is {}; here it must be {role}",
                        ident.name,
                        kind_desc(kind)
                    ),
                )
                .with_note(format!("`{}` is bound at {}", ident.name, at(span))),
            );
            return self.error_var(ident, kind);
        }
        v
    }

    fn visible(&self, v: VarId) -> bool {
        self.let_clause
            .get(&v)
            .is_none_or(|&clause| clause < self.visible_clause)
    }

    // ---- op heads -----------------------------------------------------------------------

    fn head(&mut self, h: &ast::Head, left: bool, info: &mut SiteInfo) -> OpHead {
        info.outputs = h.outputs.map(|(_, s)| s);
        match &h.kind {
            HeadKind::Named { domain, op, since } => {
                info.head = op.span;
                info.since = since.map(|s| s.span);
                let domain = domain.as_ref().map_or(String::new(), |d| {
                    onnx_schema::normalize_domain(&d.name).to_string()
                });
                if let Some(s) = since {
                    if s.hi.is_some_and(|hi| hi < s.lo) || s.lo < 1 {
                        self.error(s.span, "empty version range");
                    }
                }
                OpHead::Named(OpRef {
                    domain,
                    op_type: op.name.clone(),
                    since: since.map(|s| (s.lo, s.hi)),
                    pin: since.filter(|s| s.exact).map(|s| s.lo),
                })
            }
            HeadKind::Var { name, class } => {
                info.head = h.span;
                let class_v = class.as_ref().and_then(|c| {
                    let found = op_class_from_name(&c.name);
                    if found.is_none() {
                        let names: Vec<&str> =
                            OP_CLASSES.iter().map(|&k| op_class_name(k)).collect();
                        self.error(
                            c.span,
                            format!(
                                "unknown op class `{}` (classes: {})",
                                c.name,
                                names.join(", ")
                            ),
                        );
                    }
                    found
                });
                if !left {
                    if class.is_some() {
                        self.error(
                            h.span,
                            "an op variable's class is written at its first occurrence on the left side only",
                        );
                    }
                    let var =
                        self.use_var(name, &[VarKind::Op], "an op variable bound by `$f:class`");
                    return OpHead::Var { var, class: None };
                }
                let first = !self.names.contains_key(&name.name);
                let var = self.bind(name, VarKind::Op);
                if first {
                    match class_v {
                        Some(c) => {
                            self.out.op_class.insert(var, c);
                        }
                        None if class.is_none() => self.error(
                            h.span,
                            format!(
                                "the first occurrence of `${}` needs a class: `${}:idempotent(...)`",
                                name.name, name.name
                            ),
                        ),
                        None => {}
                    }
                    OpHead::Var {
                        var,
                        class: class_v,
                    }
                } else {
                    if let (Some(c), Some(&prev)) = (class_v, self.out.op_class.get(&var)) {
                        if c != prev {
                            self.error(
                                h.span,
                                format!(
                                    "`${}` already ranges over class `{}`",
                                    name.name,
                                    op_class_name(prev)
                                ),
                            );
                        }
                    }
                    OpHead::Var { var, class: None }
                }
            }
        }
    }

    fn check_outputs(&mut self, head: &ast::Head, proj: Option<(usize, Span)>) {
        if let Some((0, span)) = head.outputs {
            self.error(span, "an op has at least one output");
        }
        if let Some((i, span)) = proj {
            match head.outputs {
                None => self.error(
                    span,
                    format!("`.{i}` needs the output count: write `Op#n(...).{i}`"),
                ),
                Some((n, _)) if i >= n && n > 0 => self.error(
                    span,
                    format!("output index {i} out of range: the op has {n} output(s)"),
                ),
                _ => {}
            }
        }
    }

    // ---- left side ----------------------------------------------------------------------

    fn push_pat(&mut self, pat: Pat, span: Span) -> PatId {
        let id = PatId(self.out.rule.pats.len() as u32);
        self.out.rule.pats.push((pat, span));
        id
    }

    fn pat(&mut self, p: &ast::Pattern) -> PatId {
        match p {
            ast::Pattern::Var(id) => {
                let v = self.bind(id, VarKind::Value);
                self.push_pat(Pat::Var(v), id.span)
            }
            ast::Pattern::Wildcard(s) => self.push_pat(Pat::Wildcard, *s),
            ast::Pattern::Absent(s) => self.push_pat(Pat::Absent, *s),
            ast::Pattern::Lit(l) => self.push_pat(Pat::Literal(l.value.clone()), l.span),
            ast::Pattern::Op(op) => self.pat_op(op),
        }
    }

    fn pat_op(&mut self, op: &ast::OpPattern) -> PatId {
        let mut info = SiteInfo {
            span: op.span,
            ..SiteInfo::default()
        };
        let head = self.head(&op.head, true, &mut info);
        let mut attrs: Vec<(String, AttrPat)> = Vec::new();
        let mut rest = None;
        let mut attr_vars = Vec::new();
        for (item, span) in &op.attrs {
            match item {
                AttrItem::Named { name, value } => {
                    if attrs.iter().any(|(n, _)| *n == name.name) {
                        self.error(
                            name.span,
                            format!("attribute `{}` is given twice", name.name),
                        );
                        continue;
                    }
                    let (value, vspan) = match value {
                        AttrPatValue::Var(id) => match dtype_code(&id.name) {
                            Some(code) => (AttrPat::Literal(Literal::Int(code.into())), id.span),
                            None => {
                                let v = self.bind(id, VarKind::Attr);
                                attr_vars.push((v, name.name.clone()));
                                (AttrPat::Var(v), id.span)
                            }
                        },
                        AttrPatValue::Wildcard(s) => (AttrPat::Wildcard, *s),
                        AttrPatValue::Lit(l) => (AttrPat::Literal(l.value.clone()), l.span),
                    };
                    attrs.push((name.name.clone(), value));
                    info.attr_names.push(name.span);
                    info.attr_values.push(vspan);
                }
                AttrItem::Rest(id) => {
                    if rest.is_some() {
                        self.error(*span, "an op has at most one `..rest`");
                        continue;
                    }
                    rest = Some(self.bind(id, VarKind::Rest));
                    info.rest = Some(*span);
                }
            }
        }
        let mut inputs = Vec::new();
        let last = op.inputs.len().saturating_sub(1);
        for (i, input) in op.inputs.iter().enumerate() {
            info.inputs.push(input.span());
            inputs.push(match input {
                PatInput::Pat(p) => InputPat::Pat(self.pat(p)),
                PatInput::Optional(id) => InputPat::Optional(self.bind(id, VarKind::Value)),
                PatInput::Variadic(id) => {
                    if i != last {
                        self.error(id.span, format!("`{}..` must be the last input", id.name));
                    }
                    InputPat::Variadic(self.bind(id, VarKind::List))
                }
            });
        }
        self.check_outputs(&op.head, op.proj);
        let commutative =
            matches!(&head, OpHead::Named(r) if r.domain.is_empty() && is_commutative(&r.op_type));
        let outputs = op.head.outputs.map(|(n, _)| n);
        let id = self.push_pat(
            Pat::Op(OpPat {
                head,
                outputs,
                attrs,
                rest,
                inputs,
                commutative,
            }),
            op.span,
        );
        for (v, name) in attr_vars {
            self.out.attr_binding.entry(v).or_insert((id, name));
        }
        if let Some(r) = rest {
            self.out.rest_binding.entry(r).or_insert(id);
        }
        self.out.sites.insert(Site::Pat(id), info);
        match op.proj {
            Some((index, _)) => self.push_pat(Pat::Proj { tuple: id, index }, op.span),
            None => id,
        }
    }

    // ---- right side ---------------------------------------------------------------------

    fn push_term(&mut self, term: Term, span: Span) -> TermId {
        let id = TermId(self.out.rule.terms.len() as u32);
        self.out.rule.terms.push((term, span));
        id
    }

    fn term(&mut self, t: &ast::Term, root: bool) -> TermId {
        match t {
            ast::Term::Var(id) => {
                let v = self.use_var(
                    id,
                    &[VarKind::Value, VarKind::Let, VarKind::Attr],
                    "a value, a `let` or an attribute value",
                );
                self.push_term(Term::Var(v), id.span)
            }
            ast::Term::Absent(s) => {
                if root {
                    self.error(*s, "a right side root cannot be `None`");
                }
                self.push_term(Term::Absent, *s)
            }
            ast::Term::Lit(l) => self.push_term(Term::Literal(l.value.clone()), l.span),
            ast::Term::Op(op) => self.term_op(op),
        }
    }

    fn term_op(&mut self, op: &ast::OpTerm) -> TermId {
        let mut info = SiteInfo {
            span: op.span,
            ..SiteInfo::default()
        };
        let head = self.head(&op.head, false, &mut info);
        let mut attrs: Vec<(String, ExprId)> = Vec::new();
        let mut rest = None;
        for (item, span) in &op.attrs {
            match item {
                AttrItem::Named { name, value } => {
                    if attrs.iter().any(|(n, _)| *n == name.name) {
                        self.error(
                            name.span,
                            format!("attribute `{}` is given twice", name.name),
                        );
                        continue;
                    }
                    let e = self.expr(value);
                    attrs.push((name.name.clone(), e));
                    info.attr_names.push(name.span);
                    info.attr_values.push(value.span);
                }
                AttrItem::Rest(id) => {
                    if rest.is_some() {
                        self.error(*span, "an op has at most one `..rest`");
                        continue;
                    }
                    rest = Some(self.use_var(
                        id,
                        &[VarKind::Rest],
                        "attributes bound by `..rest` on the left side",
                    ));
                    info.rest = Some(*span);
                }
            }
        }
        let mut inputs = Vec::new();
        for input in &op.inputs {
            info.inputs.push(input.span());
            inputs.push(match input {
                TermInput::Term(t) => InputTerm::Term(self.term(t, false)),
                TermInput::Splice(id) => InputTerm::Splice(self.use_var(
                    id,
                    &[VarKind::List],
                    "a list of inputs bound by `xs..` on the left side",
                )),
            });
        }
        self.check_outputs(&op.head, op.proj);
        let outputs = op.head.outputs.map(|(n, _)| n);
        let id = self.push_term(
            Term::Op(OpTerm {
                head,
                outputs,
                attrs,
                rest,
                inputs,
            }),
            op.span,
        );
        self.out.sites.insert(Site::Term(id), info);
        match op.proj {
            Some((index, _)) => self.push_term(Term::Proj { tuple: id, index }, op.span),
            None => id,
        }
    }

    // ---- expressions --------------------------------------------------------------------

    fn push_expr(&mut self, e: Expr, span: Span) -> ExprId {
        let id = ExprId(self.out.rule.exprs.len() as u32);
        self.out.rule.exprs.push((e, span));
        id
    }

    /// Children are pushed before their parent, so the arena is in evaluation order.
    fn expr(&mut self, e: &ast::Expr) -> ExprId {
        let kind = match &e.kind {
            ast::ExprKind::Lit(l) => Expr::Literal(l.clone()),
            ast::ExprKind::List(items) => Expr::List(items.iter().map(|i| self.expr(i)).collect()),
            ast::ExprKind::Name(name) => {
                let bound = self.names.contains_key(name);
                match dtype_code(name) {
                    Some(code) if !bound => Expr::DType(code),
                    _ => {
                        let ident = ast::Ident {
                            name: name.clone(),
                            span: e.span,
                        };
                        Expr::Var(self.use_var(
                            &ident,
                            &[VarKind::Value, VarKind::Attr, VarKind::Let, VarKind::List],
                            "a value, an attribute value, a `let` or a list of inputs",
                        ))
                    }
                }
            }
            ast::ExprKind::Call { func, args } => Expr::Call {
                func: func.name.clone(),
                args: args.iter().map(|a| self.expr(a)).collect(),
            },
            ast::ExprKind::Unary { op, arg } => Expr::Unary {
                op: *op,
                arg: self.expr(arg),
            },
            ast::ExprKind::Binary { op, lhs, rhs } => Expr::Binary {
                op: *op,
                lhs: self.expr(lhs),
                rhs: self.expr(rhs),
            },
            ast::ExprKind::Index { list, index } => Expr::Index {
                list: self.expr(list),
                index: self.expr(index),
            },
        };
        self.push_expr(kind, e.span)
    }
}
