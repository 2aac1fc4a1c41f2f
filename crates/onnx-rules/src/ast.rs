//! The syntax tree of a rule file, as the parser builds it: every node keeps its span. Names
//! are not resolved yet (the checker turns this into [`crate::ir`]); literals are already
//! values, and a minus sign in front of a number is folded into it.

use crate::ir::{BinOp, Literal, Span, UnOp};

/// A parsed file: its rules in source order (the header and identity comments are read from
/// the source lines by the checker).
#[derive(Debug, Clone, Default)]
pub struct File {
    pub rules: Vec<RuleDef>,
}

/// A name with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// `rule NAME [TAGS]: LEFT => RIGHT let ... where ...`
#[derive(Debug, Clone)]
pub struct RuleDef {
    /// From `rule` to the end of the last clause.
    pub span: Span,
    /// The `rule` keyword.
    pub keyword: Span,
    pub name: Ident,
    pub tags: Vec<Tag>,
    /// One root, or several in `(L1, L2)`.
    pub lhs: Vec<Pattern>,
    /// Empty when the right side is `extern`.
    pub rhs: Vec<Term>,
    /// `=> extern`: the right side is built in Rust (where the keyword is written; for a rule
    /// parsed by `parse_extern_rule`, the whole left side).
    pub extern_rhs: Option<Span>,
    /// `let` and `where` clauses in source order.
    pub clauses: Vec<Clause>,
}

/// A tag of `[exact, tol 1e-3, opset 13..]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tag {
    pub kind: TagKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TagKind {
    /// `exact`, `unsafe` or a label.
    Word(String),
    /// `tol X`.
    Tol(Literal),
    /// `opset A..B` / `opset A..` (`B` inclusive).
    Opset(i64, Option<i64>),
}

/// A `let`, `where` or `hint` clause.
#[derive(Debug, Clone)]
pub enum Clause {
    Let {
        name: Ident,
        term: Term,
    },
    Where {
        expr: Expr,
        span: Span,
    },
    /// A condition for the prover's instance generator; it does not restrict matching.
    Hint {
        expr: Expr,
    },
}

/// `@A..B`, `@A..`, `@A` of an op head.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SinceRange {
    pub lo: i64,
    pub hi: Option<i64>,
    /// Written `@A` (no `..`): exactly version A (a pin).
    pub exact: bool,
    pub span: Span,
}

/// What an op head names.
#[derive(Debug, Clone, PartialEq)]
pub enum HeadKind {
    /// `dom.ain::Op@A..B`.
    Named {
        domain: Option<Ident>,
        op: Ident,
        since: Option<SinceRange>,
    },
    /// `$f:class` or `$f`.
    Var { name: Ident, class: Option<Ident> },
}

/// An op head with its output count (`Op#2`).
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub kind: HeadKind,
    pub outputs: Option<(usize, Span)>,
    pub span: Span,
}

/// A literal with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Lit {
    pub value: Literal,
    pub span: Span,
}

/// An attribute entry of an op: `name: value` or `..rest`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrItem<V> {
    Named { name: Ident, value: V },
    Rest(Ident),
}

/// The value of a pattern attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrPatValue {
    Var(Ident),
    Wildcard(Span),
    Lit(Lit),
}

/// A left-side node.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    Var(Ident),
    Wildcard(Span),
    Absent(Span),
    Lit(Lit),
    Op(Box<OpPattern>),
}

impl Pattern {
    pub fn span(&self) -> Span {
        match self {
            Pattern::Var(id) => id.span,
            Pattern::Wildcard(s) | Pattern::Absent(s) => *s,
            Pattern::Lit(l) => l.span,
            Pattern::Op(op) => op.span,
        }
    }
}

/// `Head<attrs>(inputs).proj` on the left side.
#[derive(Debug, Clone, PartialEq)]
pub struct OpPattern {
    pub head: Head,
    pub attrs: Vec<(AttrItem<AttrPatValue>, Span)>,
    pub inputs: Vec<PatInput>,
    pub proj: Option<(usize, Span)>,
    pub span: Span,
}

/// An input of an op pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum PatInput {
    Pat(Pattern),
    /// `x?`
    Optional(Ident),
    /// `xs..`
    Variadic(Ident),
}

impl PatInput {
    pub fn span(&self) -> Span {
        match self {
            PatInput::Pat(p) => p.span(),
            PatInput::Optional(id) | PatInput::Variadic(id) => id.span,
        }
    }
}

/// A right-side node.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    Var(Ident),
    Absent(Span),
    Lit(Lit),
    Op(Box<OpTerm>),
}

impl Term {
    pub fn span(&self) -> Span {
        match self {
            Term::Var(id) => id.span,
            Term::Absent(s) => *s,
            Term::Lit(l) => l.span,
            Term::Op(op) => op.span,
        }
    }
}

/// `Head<attr: expr, ..rest>(inputs).proj` on the right side.
#[derive(Debug, Clone, PartialEq)]
pub struct OpTerm {
    pub head: Head,
    pub attrs: Vec<(AttrItem<Expr>, Span)>,
    pub inputs: Vec<TermInput>,
    pub proj: Option<(usize, Span)>,
    pub span: Span,
}

/// An input of a right-side op.
#[derive(Debug, Clone, PartialEq)]
pub enum TermInput {
    Term(Term),
    /// `xs..`
    Splice(Ident),
}

impl TermInput {
    pub fn span(&self) -> Span {
        match self {
            TermInput::Term(t) => t.span(),
            TermInput::Splice(id) => id.span,
        }
    }
}

/// An expression of a guard or a computed attribute.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    Lit(Literal),
    List(Vec<Expr>),
    /// A variable or an element type name.
    Name(String),
    Call {
        func: Ident,
        args: Vec<Expr>,
    },
    Unary {
        op: UnOp,
        arg: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Index {
        list: Box<Expr>,
        index: Box<Expr>,
    },
}
