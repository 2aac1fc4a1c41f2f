//! The rule IR: what a checked rule file compiles to. It has no egg dependency: onnx-egraph
//! compiles it into searchers and appliers. Patterns, right sides and expressions live in
//! arenas indexed by typed ids; every node keeps its source span for messages.
//!
//! Names of ops are resolved against the schemas by the checker, but a rule is *not* bound to
//! one opset: an [`OpRef`] names `(domain, op_type)` and an optional since_version range, and the
//! compiler binds it at the model's opset. Attributes are addressed by their *logical* name
//! ([`crate::params`]): `ReduceSum<axes: a>` reads the same whether `axes` is an attribute (opset
//! 1-12) or an input (13+).

/// A byte range in a rule file, with its 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub col: usize,
}

/// A checked rule file.
#[derive(Debug, Clone, Default)]
pub struct RuleFile {
    /// The path (or name) the file was read from, as given.
    pub path: String,
    /// The header comment (the leading `#` lines, without the `#`).
    pub header: String,
    pub rules: Vec<Rule>,
}

/// How the two sides of a rule must compare when it is proven.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Precision {
    /// Bitwise equal outputs (NaN equals NaN of the same bits class).
    Exact,
    /// Equal up to the per-dtype rounding tolerance (the default).
    Rounding,
    /// Equal up to this relative-and-absolute tolerance.
    Tolerance(f64),
}

/// Tags of a rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Tags {
    pub precision: Precision,
    /// Not valid for every float input (x*0 -> 0, reassociation, ...): off unless asked for.
    pub float_unsafe: bool,
    /// `[runtime_limit]`: the right side is refused on some inputs the left side takes (a
    /// runtime kernel's documented limit, which the rule's comment states); the prover skips
    /// the instances the right side refuses and proves the rest.
    pub runtime_limit: bool,
    /// Free-form tags (`[fusion]`, `[cleanup]`) used to select rules in pipelines.
    pub labels: Vec<String>,
}

impl Default for Tags {
    fn default() -> Self {
        Tags {
            precision: Precision::Rounding,
            float_unsafe: false,
            runtime_limit: false,
            labels: Vec::new(),
        }
    }
}

/// Default-domain opsets a rule applies at: `min..=max` (max `None`: no upper bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpsetWindow {
    pub min: i64,
    pub max: Option<i64>,
}

impl OpsetWindow {
    pub fn contains(&self, opset: i64) -> bool {
        opset >= self.min && self.max.is_none_or(|m| opset <= m)
    }
}

/// A part of a rule's window in which every op of the rule binds to one schema version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Epoch {
    pub window: OpsetWindow,
}

/// Index of a pattern node in [`Rule::pats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PatId(pub u32);
/// Index of a right-side node in [`Rule::terms`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TermId(pub u32);
/// Index of an expression in [`Rule::exprs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExprId(pub u32);
/// Index of a variable in [`Rule::vars`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VarId(pub u32);

/// One checked rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    /// The comment lines directly above the rule (its identity), without `#`.
    pub doc: String,
    pub span: Span,
    pub tags: Tags,
    /// Where the rule applies (from `[opset A..B]`, intersected with its ops' existence).
    pub window: OpsetWindow,
    /// The window split at the since_versions of the rule's ops; each was checked.
    pub epochs: Vec<Epoch>,
    pub vars: Vec<VarInfo>,
    pub pats: Vec<(Pat, Span)>,
    pub terms: Vec<(Term, Span)>,
    pub exprs: Vec<(Expr, Span)>,
    /// The left side's roots. One root for most rules; several when the rule matches several
    /// values at once (each root's class is unioned with the matching right side).
    pub lhs: Vec<PatId>,
    /// The right side: terms of the DSL, one per root of the left side, or `extern` (built
    /// by a Rust applier registered with the rule).
    pub rhs: Rhs,
    /// `let` bindings of the right side, in order: `(variable, term)`.
    pub lets: Vec<(VarId, TermId)>,
    /// The guard (`where`), a boolean expression; `None` is true.
    pub guard: Option<ExprId>,
    /// `hint` conditions: they steer the prover's instance generator toward instances where
    /// the rule fires (`hint rank(x) == 4`) and never restrict where the rule applies.
    pub hints: Vec<ExprId>,
    /// A version step: every default-domain op of the rule is pinned (`Op@A`). It holds at
    /// every opset (its window is its tag's) and rewrites a node at one schema version into
    /// nodes at others; it runs only when a target opset is set, in the direction of the target.
    pub step: Option<VersionStep>,
}

/// The opsets of a version step's two sides: the first opset at which every op of the side binds
/// its pin (the side's largest pin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionStep {
    pub lhs_opset: i64,
    pub rhs_opset: i64,
}

impl VersionStep {
    /// Whether the step moves toward `target`: up to a version the target binds or a later one
    /// below it, or down from a version newer than the target. A step within one opset (a
    /// node written with other ops of the same versions: BatchNormalization-7 with `spatial`
    /// 0 as arithmetic) runs toward any other target.
    pub fn toward(&self, target: i64) -> bool {
        match self.rhs_opset.cmp(&self.lhs_opset) {
            std::cmp::Ordering::Greater => self.rhs_opset <= target,
            std::cmp::Ordering::Less => self.lhs_opset > target,
            std::cmp::Ordering::Equal => self.lhs_opset != target,
        }
    }

    /// The target a step is run toward on its own (proofs, case files): its right side's
    /// opset, or the next one for a step within one opset.
    pub fn own_target(&self) -> i64 {
        match self.rhs_opset == self.lhs_opset {
            true => self.rhs_opset + 1,
            false => self.rhs_opset,
        }
    }
}

/// The right side of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rhs {
    /// Written in the DSL: one term per root of the left side.
    Terms(Vec<TermId>),
    /// `=> extern`: built by Rust code registered with the rule (onnx-egraph's
    /// `RuleSet::add_rust_rule`). Such a rule has exactly one left root, no `let`, and no
    /// terms: [`Rule::terms`] is empty.
    Extern,
}

impl Rule {
    /// The right side's terms, one per left root (empty for an `extern` right side).
    pub fn rhs_terms(&self) -> &[TermId] {
        match &self.rhs {
            Rhs::Terms(t) => t,
            Rhs::Extern => &[],
        }
    }
    /// For a version step: the op its left root names and the op its right root names (the
    /// step `Relu@13(x) => Relu@14(x)` gives Relu-13 and Relu-14).
    pub fn step_ops(&self) -> Option<(&OpRef, &OpRef)> {
        self.step?;
        let Pat::Op(l) = self.pat(*self.lhs.first()?) else {
            return None;
        };
        let Term::Op(r) = self.term(*self.rhs_terms().first()?) else {
            return None;
        };
        match (&l.head, &r.head) {
            (OpHead::Named(a), OpHead::Named(b)) if a.pin.is_some() && b.pin.is_some() => {
                Some((a, b))
            }
            _ => None,
        }
    }
    /// Whether the right side is written in Rust (`=> extern`).
    pub fn is_extern(&self) -> bool {
        self.rhs == Rhs::Extern
    }
    pub fn pat(&self, id: PatId) -> &Pat {
        &self.pats[id.0 as usize].0
    }
    pub fn term(&self, id: TermId) -> &Term {
        &self.terms[id.0 as usize].0
    }
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.0 as usize].0
    }
    pub fn var(&self, id: VarId) -> &VarInfo {
        &self.vars[id.0 as usize]
    }
    /// The top-level conjuncts of a boolean expression (`a && (b && c)` gives a, b, c).
    pub fn conjuncts(&self, e: ExprId) -> Vec<ExprId> {
        let mut out = Vec::new();
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match self.expr(e) {
                Expr::Binary {
                    op: BinOp::And,
                    lhs,
                    rhs,
                } => {
                    stack.push(*rhs);
                    stack.push(*lhs);
                }
                _ => out.push(e),
            }
        }
        out
    }
}

/// What a variable stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarKind {
    /// A tensor value (an input or output of an op).
    Value,
    /// An attribute or logical parameter value (`<perm: p>`); usable in expressions, in
    /// attribute positions of the right side, and in input positions (as a constant).
    Attr,
    /// The remaining inputs of a variadic op (`xs..`).
    List,
    /// The attributes a pattern did not name (`<..rest>`), copied to the right side.
    Rest,
    /// An operator, from an op class (`$f:idempotent(...)`).
    Op,
    /// A `let` of the right side.
    Let,
}

/// A variable of a rule.
#[derive(Debug, Clone, PartialEq)]
pub struct VarInfo {
    pub name: String,
    pub kind: VarKind,
    /// Where it is first bound.
    pub span: Span,
}

/// A reference to an operator.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpRef {
    /// Normalized domain ("" for ai.onnx).
    pub domain: String,
    pub op_type: String,
    /// `Op@A..B`: only schema versions with since_version in `A..=B` (B `None`: open).
    /// `None`: the version bound at the model's opset.
    pub since: Option<(i64, Option<i64>)>,
    /// `Op@A` (no `..`): the op is pinned to the schema version whose since_version is A.
    /// In a version step (every default-domain op of the rule pinned, see [`Rule::step`]) a
    /// pinned op binds that version at every opset; elsewhere a pin on the left side is the
    /// range `A..A`.
    pub pin: Option<i64>,
}

/// The head of an operator pattern or term.
#[derive(Debug, Clone, PartialEq)]
pub enum OpHead {
    Named(OpRef),
    /// An op variable; in a pattern its first occurrence carries the class it ranges over.
    Var {
        var: VarId,
        class: Option<OpClass>,
    },
}

/// Op classes usable with op variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// f(f(x)) == f(x): Relu, Abs, Ceil, Floor, Round, Sign, ...
    Idempotent,
    /// Strictly increasing elementwise ops (ArgMax/ArgMin of f(x) == of x, up to rounding).
    Monotone,
    /// ReduceSum, ReduceMean, ReduceMax, ... (`axes` and `keepdims` logical parameters).
    Reduction,
    /// Unary elementwise ops with no attributes.
    UnaryElementwise,
}

/// A literal.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    /// A list of literals (`[1, 2, 3]`).
    List(Vec<Literal>),
}

/// A left-side (pattern) node.
#[derive(Debug, Clone, PartialEq)]
pub enum Pat {
    /// Binds the value; a second occurrence must be the same value (same e-class).
    Var(VarId),
    /// `_`: any value, not bound.
    Wildcard,
    /// Matches a constant whose every element equals the literal exactly in the constant's
    /// dtype (a list literal matches a 1-D constant with those elements).
    Literal(Literal),
    /// `None`: an absent optional input.
    Absent,
    Op(OpPat),
    /// Output `index` of a multi-output op pattern.
    Proj {
        tuple: PatId,
        index: usize,
    },
}

/// An operator pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct OpPat {
    pub head: OpHead,
    /// `Op#n`: the node must have exactly `n` outputs. `None`: a single-output use (for ops with
    /// optional outputs: none of the optional outputs is used).
    pub outputs: Option<usize>,
    /// Named attributes / logical parameters (every other one must equal its default unless
    /// `rest` is given).
    pub attrs: Vec<(String, AttrPat)>,
    /// `..rest`: the other attributes, any value, bound to this variable.
    pub rest: Option<VarId>,
    pub inputs: Vec<InputPat>,
    /// Commutative operands may match in either order (set by the checker for Add, Mul, ...).
    pub commutative: bool,
}

/// An attribute of a pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrPat {
    Var(VarId),
    Literal(Literal),
    Wildcard,
}

/// An input position of an operator pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum InputPat {
    Pat(PatId),
    /// `x?`: present (bound to the value) or absent (bound to absent).
    Optional(VarId),
    /// `xs..`: all remaining inputs of a variadic op (the last position only).
    Variadic(VarId),
}

/// A right-side node.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// A value variable, a `let`, an optional (`x?`, may be absent) or an attribute variable
    /// used as an input (a scalar constant of the type its slot's type parameter takes).
    Var(VarId),
    /// A constant: its element type is the one its slot's type parameter takes from the other
    /// operands (the compiler resolves it per match); lists are 1-D int64.
    Literal(Literal),
    /// An absent optional input.
    Absent,
    Op(OpTerm),
    /// Output `index` of a multi-output term.
    Proj {
        tuple: TermId,
        index: usize,
    },
}

/// An operator built by a right side.
#[derive(Debug, Clone, PartialEq)]
pub struct OpTerm {
    pub head: OpHead,
    pub outputs: Option<usize>,
    /// Attributes / logical parameters computed from expressions.
    pub attrs: Vec<(String, ExprId)>,
    /// `..rest`: copies the attributes bound by the pattern's `..rest`.
    pub rest: Option<VarId>,
    pub inputs: Vec<InputTerm>,
}

/// An input of a right-side op.
#[derive(Debug, Clone, PartialEq)]
pub enum InputTerm {
    Term(TermId),
    /// `xs..`: the values of a variadic binding, spliced in.
    Splice(VarId),
}

/// Unary operators of expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Not,
    Neg,
}

/// Binary operators of expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    And,
    Or,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

/// An expression of a guard or a computed attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Literal),
    /// A list built from expressions (`[dim(a, 0), 1]`).
    List(Vec<ExprId>),
    /// An element type name (`float`, `int64`, ...) as its `TensorProto.DataType` code.
    DType(i32),
    Var(VarId),
    /// A built-in function ([`crate::builtin`]) or a guard registered in Rust.
    Call {
        func: String,
        args: Vec<ExprId>,
    },
    Unary {
        op: UnOp,
        arg: ExprId,
    },
    Binary {
        op: BinOp,
        lhs: ExprId,
        rhs: ExprId,
    },
    /// `list[i]` (negative i counts from the end).
    Index {
        list: ExprId,
        index: ExprId,
    },
}
