//! Building the syntax tree from pest's pairs for one chunk of a file. Literals become values
//! here (integer range, float range and string escapes are checked), a minus in front of a
//! number is folded into it, and expression trees taller than [`MAX_HEIGHT`] become an error.

use pest::iterators::{Pair, Pairs};

use crate::ast::*;
use crate::diag::{Diagnostic, LineIndex};
use crate::ir::{BinOp, Literal, Span, UnOp};

use super::Rule;

/// Tallest expression tree (operator chains, prefix operators, indexing).
const MAX_HEIGHT: usize = 128;

/// Builds AST nodes from pairs of one chunk; `offset` is the chunk's start in the file.
pub(super) struct Builder<'s> {
    source: &'s str,
    index: &'s LineIndex,
    offset: usize,
    pub(super) diags: Vec<Diagnostic>,
}

type Inner<'i> = Pairs<'i, Rule>;

impl<'s> Builder<'s> {
    pub(super) fn new(source: &'s str, index: &'s LineIndex, offset: usize) -> Self {
        Builder {
            source,
            index,
            offset,
            diags: Vec::new(),
        }
    }

    pub(super) fn span_at(&self, start: usize, end: usize) -> Span {
        self.index
            .span(self.source, self.offset + start, self.offset + end)
    }

    pub(super) fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        let s = pair.as_span();
        self.span_at(s.start(), s.end())
    }

    fn ident(&self, pair: &Pair<'_, Rule>) -> Ident {
        Ident {
            name: pair.as_str().to_string(),
            span: self.span(pair),
        }
    }

    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.diags.push(Diagnostic::new(span, message));
    }

    // ---- rules --------------------------------------------------------------------------

    pub(super) fn rule_def(&mut self, pair: Pair<'_, Rule>) -> Option<RuleDef> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let keyword = self.span(&it.next()?);
        let name = self.ident(&it.next()?);
        let mut def = RuleDef {
            span,
            keyword,
            name,
            tags: Vec::new(),
            lhs: Vec::new(),
            rhs: Vec::new(),
            extern_rhs: None,
            clauses: Vec::new(),
        };
        for p in it {
            match p.as_rule() {
                Rule::tags => {
                    for t in p.into_inner() {
                        let tag = self.tag(t)?;
                        def.tags.push(tag);
                    }
                }
                _ => self.rule_part(p, &mut def)?,
            }
        }
        Some(def)
    }

    /// The left side and clauses of a rule registered from Rust (`extern_rule`): its name and
    /// tags come from the caller, its right side is `extern`.
    pub(super) fn extern_def(&mut self, pair: Pair<'_, Rule>, name: &str) -> Option<RuleDef> {
        let span = self.span(&pair);
        let start = self.span_at(0, 0);
        let mut def = RuleDef {
            span,
            keyword: start,
            name: Ident {
                name: name.to_string(),
                span: start,
            },
            tags: Vec::new(),
            lhs: Vec::new(),
            rhs: Vec::new(),
            extern_rhs: None,
            clauses: Vec::new(),
        };
        for p in pair.into_inner() {
            if p.as_rule() != Rule::EOI {
                self.rule_part(p, &mut def)?;
            }
        }
        def.extern_rhs = Some(def.lhs.first().map_or(span, |p| p.span()));
        Some(def)
    }

    /// The tags of a `tag_list`.
    pub(super) fn tag_list(&mut self, pair: Pair<'_, Rule>) -> Option<Vec<Tag>> {
        pair.into_inner()
            .filter(|t| t.as_rule() != Rule::EOI)
            .map(|t| self.tag(t))
            .collect()
    }

    /// A side or a clause of a rule.
    fn rule_part(&mut self, p: Pair<'_, Rule>, def: &mut RuleDef) -> Option<()> {
        match p.as_rule() {
            Rule::lhs => {
                for q in p.into_inner() {
                    let pat = self.pattern(q)?;
                    def.lhs.push(pat);
                }
            }
            Rule::rhs => {
                for q in p.into_inner() {
                    if q.as_rule() == Rule::rhs_extern {
                        def.extern_rhs = Some(self.span(&q));
                    } else {
                        let term = self.term(q)?;
                        def.rhs.push(term);
                    }
                }
            }
            Rule::let_def => {
                let mut inner = p.into_inner();
                let _kw = inner.next()?;
                let name = self.ident(&inner.next()?);
                let term = self.term(inner.next()?)?;
                def.clauses.push(Clause::Let { name, term });
            }
            Rule::where_def => {
                let span = self.span(&p);
                let mut inner = p.into_inner();
                let _kw = inner.next()?;
                let expr = self.expr(inner.next()?)?;
                def.clauses.push(Clause::Where { expr, span });
            }
            Rule::hint_def => {
                let mut inner = p.into_inner();
                let _kw = inner.next()?;
                let expr = self.expr(inner.next()?)?;
                def.clauses.push(Clause::Hint { expr });
            }
            _ => return None,
        }
        Some(())
    }

    fn tag(&mut self, pair: Pair<'_, Rule>) -> Option<Tag> {
        let span = self.span(&pair);
        let kind = match pair.as_rule() {
            Rule::tag_word => TagKind::Word(pair.as_str().to_string()),
            Rule::tag_tol => {
                let num = pair.into_inner().next()?;
                let span = self.span(&num);
                TagKind::Tol(self.number(num.as_str(), span))
            }
            Rule::tag_opset => {
                let mut lo = None;
                let mut hi = None;
                for p in pair.into_inner() {
                    let v = self.version(&p);
                    match p.as_rule() {
                        Rule::opset_lo => lo = Some(v),
                        _ => hi = Some(v),
                    }
                }
                TagKind::Opset(lo?, hi)
            }
            _ => return None,
        };
        Some(Tag { kind, span })
    }

    /// An opset or version number (digits only).
    fn version(&mut self, pair: &Pair<'_, Rule>) -> i64 {
        pair.as_str().parse::<i64>().unwrap_or_else(|_| {
            self.error(self.span(pair), "version number out of range");
            0
        })
    }

    fn count(&mut self, pair: &Pair<'_, Rule>) -> usize {
        match pair.as_str().parse::<u32>() {
            Ok(n) => n as usize,
            Err(_) => {
                self.error(self.span(pair), "number out of range");
                0
            }
        }
    }

    // ---- literals -----------------------------------------------------------------------

    /// A number, `inf` or `nan`, with an optional leading `-`.
    fn number(&mut self, text: &str, span: Span) -> Literal {
        let (neg, body) = match text.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, text),
        };
        let sign = if neg { -1.0 } else { 1.0 };
        match body {
            "inf" => Literal::Float(sign * f64::INFINITY),
            "nan" => Literal::Float(f64::NAN),
            _ if body.contains(['.', 'e', 'E']) => match body.parse::<f64>() {
                Ok(v) if v.is_finite() => Literal::Float(sign * v),
                _ => {
                    self.error(span, format!("float literal `{text}` out of range"));
                    Literal::Float(0.0)
                }
            },
            _ => {
                let v = body
                    .parse::<i128>()
                    .ok()
                    .map(|v| if neg { -v } else { v })
                    .and_then(|v| i64::try_from(v).ok());
                v.map(Literal::Int).unwrap_or_else(|| {
                    self.error(
                        span,
                        format!("integer literal `{text}` out of range for int64"),
                    );
                    Literal::Int(0)
                })
            }
        }
    }

    fn string(&mut self, pair: Pair<'_, Rule>) -> Literal {
        let span = self.span(&pair);
        let body = pair.into_inner().next().map_or("", |p| p.as_str());
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                other => {
                    let shown = other.map_or(String::new(), String::from);
                    self.error(span, format!("unknown escape `\\{shown}` in string"));
                }
            }
        }
        Literal::Str(out)
    }

    /// A `literal` pair (or one of its alternatives).
    fn literal(&mut self, pair: Pair<'_, Rule>) -> Option<Lit> {
        let span = self.span(&pair);
        let value = match pair.as_rule() {
            Rule::literal => return self.literal(pair.into_inner().next()?),
            Rule::signed | Rule::number | Rule::special => self.number(pair.as_str(), span),
            Rule::boolean => Literal::Bool(pair.as_str() == "true"),
            Rule::string => self.string(pair),
            Rule::lit_list => {
                let mut items = Vec::new();
                for p in pair.into_inner() {
                    items.push(self.literal(p)?.value);
                }
                Literal::List(items)
            }
            _ => return None,
        };
        Some(Lit { value, span })
    }

    // ---- op heads -----------------------------------------------------------------------

    fn head(&mut self, pair: Pair<'_, Rule>) -> Option<Head> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let first = it.next()?;
        let kind = match first.as_rule() {
            Rule::op_var => {
                let mut inner = first.into_inner();
                let name = self.ident(&inner.next()?);
                let class = inner.next().map(|c| self.ident(&c));
                HeadKind::Var { name, class }
            }
            Rule::op_path => {
                let mut domain = None;
                let mut op = None;
                let mut since = None;
                for p in first.into_inner() {
                    match p.as_rule() {
                        Rule::domain => domain = Some(self.ident(&p)),
                        Rule::op_name => op = Some(self.ident(&p)),
                        Rule::op_since => since = Some(self.since(p)?),
                        _ => return None,
                    }
                }
                HeadKind::Named {
                    domain,
                    op: op?,
                    since,
                }
            }
            _ => return None,
        };
        let outputs = match it.next() {
            Some(out) => {
                let span = self.span(&out);
                let n = self.count(&out.into_inner().next()?);
                Some((n, span))
            }
            None => None,
        };
        Some(Head {
            kind,
            outputs,
            span,
        })
    }

    fn since(&mut self, pair: Pair<'_, Rule>) -> Option<SinceRange> {
        let span = self.span(&pair);
        let mut lo = None;
        let mut hi = None;
        let mut dots = false;
        for p in pair.into_inner() {
            match p.as_rule() {
                Rule::since_lo => lo = Some(self.version(&p)),
                Rule::since_dots => dots = true,
                Rule::since_hi => hi = Some(self.version(&p)),
                _ => return None,
            }
        }
        let lo = lo?;
        Some(SinceRange {
            lo,
            hi: if dots { hi } else { Some(lo) },
            exact: !dots,
            span,
        })
    }

    fn proj(&mut self, pair: Pair<'_, Rule>) -> Option<(usize, Span)> {
        let span = self.span(&pair);
        let n = self.count(&pair.into_inner().next()?);
        Some((n, span))
    }

    // ---- left side ----------------------------------------------------------------------

    fn pattern(&mut self, pair: Pair<'_, Rule>) -> Option<Pattern> {
        let inner = if pair.as_rule() == Rule::pattern {
            pair.into_inner().next()?
        } else {
            pair
        };
        let span = self.span(&inner);
        Some(match inner.as_rule() {
            Rule::pat_op => Pattern::Op(Box::new(self.pat_op(inner)?)),
            Rule::absent => Pattern::Absent(span),
            Rule::wildcard => Pattern::Wildcard(span),
            Rule::literal => Pattern::Lit(self.literal(inner)?),
            Rule::var_name => Pattern::Var(self.ident(&inner)),
            _ => return None,
        })
    }

    fn pat_op(&mut self, pair: Pair<'_, Rule>) -> Option<OpPattern> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let head = self.head(it.next()?)?;
        let mut attrs = Vec::new();
        let mut inputs = Vec::new();
        let mut proj = None;
        for p in it {
            match p.as_rule() {
                Rule::pat_attrs => {
                    for a in p.into_inner() {
                        attrs.push(self.pat_attr(a)?);
                    }
                }
                Rule::pat_inputs => {
                    for i in p.into_inner() {
                        inputs.push(self.pat_input(i)?);
                    }
                }
                Rule::proj => proj = Some(self.proj(p)?),
                _ => return None,
            }
        }
        Some(OpPattern {
            head,
            attrs,
            inputs,
            proj,
            span,
        })
    }

    fn pat_attr(&mut self, pair: Pair<'_, Rule>) -> Option<(AttrItem<AttrPatValue>, Span)> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let first = it.next()?;
        let item = match first.as_rule() {
            Rule::attr_rest => AttrItem::Rest(self.ident(&first.into_inner().next()?)),
            Rule::attr_name => {
                let name = self.ident(&first);
                let v = it.next()?;
                let vspan = self.span(&v);
                let value = match v.as_rule() {
                    Rule::wildcard => AttrPatValue::Wildcard(vspan),
                    Rule::literal => AttrPatValue::Lit(self.literal(v)?),
                    Rule::var_name => AttrPatValue::Var(self.ident(&v)),
                    _ => return None,
                };
                AttrItem::Named { name, value }
            }
            _ => return None,
        };
        Some((item, span))
    }

    fn pat_input(&mut self, pair: Pair<'_, Rule>) -> Option<PatInput> {
        let inner = pair.into_inner().next()?;
        Some(match inner.as_rule() {
            Rule::in_variadic => PatInput::Variadic(self.var_of(inner)?),
            Rule::in_optional => PatInput::Optional(self.var_of(inner)?),
            Rule::pattern => PatInput::Pat(self.pattern(inner)?),
            _ => return None,
        })
    }

    /// The variable of `xs..` / `x?`.
    fn var_of(&mut self, pair: Pair<'_, Rule>) -> Option<Ident> {
        let v = pair.into_inner().next()?;
        Some(self.ident(&v))
    }

    // ---- right side ---------------------------------------------------------------------

    fn term(&mut self, pair: Pair<'_, Rule>) -> Option<Term> {
        let inner = if pair.as_rule() == Rule::term {
            pair.into_inner().next()?
        } else {
            pair
        };
        let span = self.span(&inner);
        Some(match inner.as_rule() {
            Rule::term_op => Term::Op(Box::new(self.term_op(inner)?)),
            Rule::absent => Term::Absent(span),
            Rule::literal => Term::Lit(self.literal(inner)?),
            Rule::var_name => Term::Var(self.ident(&inner)),
            _ => return None,
        })
    }

    fn term_op(&mut self, pair: Pair<'_, Rule>) -> Option<OpTerm> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let head = self.head(it.next()?)?;
        let mut attrs = Vec::new();
        let mut inputs = Vec::new();
        let mut proj = None;
        for p in it {
            match p.as_rule() {
                Rule::term_attrs => {
                    for a in p.into_inner() {
                        attrs.push(self.term_attr(a)?);
                    }
                }
                Rule::term_inputs => {
                    for i in p.into_inner() {
                        let inner = i.into_inner().next()?;
                        inputs.push(match inner.as_rule() {
                            Rule::in_variadic => TermInput::Splice(self.var_of(inner)?),
                            _ => TermInput::Term(self.term(inner)?),
                        });
                    }
                }
                Rule::proj => proj = Some(self.proj(p)?),
                _ => return None,
            }
        }
        Some(OpTerm {
            head,
            attrs,
            inputs,
            proj,
            span,
        })
    }

    fn term_attr(&mut self, pair: Pair<'_, Rule>) -> Option<(AttrItem<Expr>, Span)> {
        let span = self.span(&pair);
        let mut it = pair.into_inner();
        let first = it.next()?;
        let item = match first.as_rule() {
            Rule::attr_rest => AttrItem::Rest(self.ident(&first.into_inner().next()?)),
            Rule::attr_name => {
                let name = self.ident(&first);
                let value = self.expr(it.next()?)?;
                AttrItem::Named { name, value }
            }
            _ => return None,
        };
        Some((item, span))
    }

    // ---- expressions --------------------------------------------------------------------

    /// Any expression pair, from `expr` down to `atom`.
    fn expr(&mut self, pair: Pair<'_, Rule>) -> Option<Expr> {
        self.expr_h(pair).map(|(e, _)| e)
    }

    /// An expression and its height; too tall trees become an error and a placeholder.
    fn expr_h(&mut self, pair: Pair<'_, Rule>) -> Option<(Expr, usize)> {
        let pair = skip_wrappers(pair);
        let span = self.span(&pair);
        let (e, h) = match pair.as_rule() {
            Rule::expr | Rule::and_expr | Rule::sum | Rule::product | Rule::cmp_expr => {
                self.chain(pair.into_inner())?
            }
            Rule::not_expr => self.prefix(pair.into_inner(), span)?,
            Rule::unary => self.prefix(pair.into_inner(), span)?,
            Rule::postfix => {
                let mut it = pair.into_inner();
                let (mut acc, mut h) = self.expr_h(it.next()?)?;
                for idx in it {
                    let ispan = self.span(&idx);
                    let (index, hi) = self.expr_h(idx.into_inner().next()?)?;
                    h = 1 + h.max(hi);
                    acc = Expr {
                        span: join(acc.span, ispan),
                        kind: ExprKind::Index {
                            list: Box::new(acc),
                            index: Box::new(index),
                        },
                    };
                    if h > MAX_HEIGHT {
                        return Some(self.too_tall(span));
                    }
                }
                (acc, h)
            }
            Rule::atom | Rule::paren => return self.expr_h(pair.into_inner().next()?),
            Rule::call => {
                let mut it = pair.into_inner();
                let func = self.ident(&it.next()?);
                let mut args = Vec::new();
                let mut h = 1;
                for a in it {
                    let (e, ha) = self.expr_h(a)?;
                    h = h.max(1 + ha);
                    args.push(e);
                }
                let kind = ExprKind::Call { func, args };
                (Expr { kind, span }, h)
            }
            Rule::list => {
                let mut items = Vec::new();
                let mut h = 1;
                for a in pair.into_inner() {
                    let (e, ha) = self.expr_h(a)?;
                    h = h.max(1 + ha);
                    items.push(e);
                }
                (list_expr(items, span), h)
            }
            Rule::number | Rule::special => {
                let lit = self.number(pair.as_str(), span);
                (lit_expr(lit, span), 1)
            }
            Rule::boolean => (lit_expr(Literal::Bool(pair.as_str() == "true"), span), 1),
            Rule::string => (lit_expr(self.string(pair), span), 1),
            Rule::var_name => {
                let kind = ExprKind::Name(pair.as_str().to_string());
                (Expr { kind, span }, 1)
            }
            _ => return None,
        };
        if h > MAX_HEIGHT {
            return Some(self.too_tall(span));
        }
        Some((e, h))
    }

    fn too_tall(&mut self, span: Span) -> (Expr, usize) {
        self.error(
            span,
            format!("expression nested deeper than {MAX_HEIGHT} levels"),
        );
        (lit_expr(Literal::Bool(false), span), 1)
    }

    /// `a op b op c ...`, left-associative.
    fn chain(&mut self, mut it: Inner<'_>) -> Option<(Expr, usize)> {
        let (mut acc, mut h) = self.expr_h(it.next()?)?;
        while let Some(op) = it.next() {
            let op = binop(op.as_str())?;
            let (rhs, hr) = self.expr_h(it.next()?)?;
            h = 1 + h.max(hr);
            let span = join(acc.span, rhs.span);
            if h > MAX_HEIGHT {
                return Some(self.too_tall(span));
            }
            acc = Expr {
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(acc),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        Some((acc, h))
    }

    /// `!!x` / `--x`: prefix operators, then the operand. A minus in front of a number is
    /// folded into the literal.
    fn prefix(&mut self, it: Inner<'_>, span: Span) -> Option<(Expr, usize)> {
        let mut ops = Vec::new();
        let mut operand = None;
        for p in it {
            match p.as_rule() {
                Rule::op_not => ops.push((UnOp::Not, self.span(&p))),
                Rule::op_neg => ops.push((UnOp::Neg, self.span(&p))),
                _ => operand = Some(p),
            }
        }
        let operand = operand?;
        if ops.len() >= MAX_HEIGHT {
            return Some(self.too_tall(span));
        }
        // `-3`, `-inf`: fold the minus signs of a bare number into it.
        if !ops.is_empty() && ops.iter().all(|(op, _)| *op == UnOp::Neg) {
            if let Some(text) = bare_number(&operand) {
                let negative = ops.len() % 2 == 1;
                let text = if negative {
                    format!("-{text}")
                } else {
                    text.to_string()
                };
                let lit = self.number(&text, span);
                return Some((lit_expr(lit, span), 1));
            }
        }
        let (mut acc, mut h) = self.expr_h(operand)?;
        for (op, op_span) in ops.into_iter().rev() {
            h += 1;
            acc = Expr {
                span: join(op_span, acc.span),
                kind: ExprKind::Unary {
                    op,
                    arg: Box::new(acc),
                },
            };
        }
        Some((acc, h))
    }
}

/// Descends through the precedence levels that wrap a single child (`expr` -> `and_expr` ->
/// ... -> `atom` -> `paren` -> `expr`) without recursing, so that nesting costs little stack.
fn skip_wrappers(mut pair: Pair<'_, Rule>) -> Pair<'_, Rule> {
    loop {
        let wrapper = matches!(
            pair.as_rule(),
            Rule::expr
                | Rule::and_expr
                | Rule::not_expr
                | Rule::cmp_expr
                | Rule::sum
                | Rule::product
                | Rule::unary
                | Rule::postfix
                | Rule::atom
                | Rule::paren
        );
        if !wrapper {
            return pair;
        }
        let mut inner = pair.clone().into_inner();
        match (inner.next(), inner.next()) {
            (Some(only), None) => pair = only,
            _ => return pair,
        }
    }
}

/// The text of a `postfix` that is a bare number, `inf` or `nan` (no indexing).
fn bare_number<'i>(postfix: &Pair<'i, Rule>) -> Option<&'i str> {
    if postfix.as_rule() != Rule::postfix {
        return None;
    }
    let mut it = postfix.clone().into_inner();
    let atom = it.next()?;
    if it.next().is_some() {
        return None;
    }
    let leaf = atom.into_inner().next()?;
    matches!(leaf.as_rule(), Rule::number | Rule::special).then(|| leaf.as_str())
}

fn binop(text: &str) -> Option<BinOp> {
    Some(match text {
        "||" => BinOp::Or,
        "&&" => BinOp::And,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "%" => BinOp::Rem,
        _ => return None,
    })
}

fn lit_expr(lit: Literal, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Lit(lit),
        span,
    }
}

/// `[a, b]`: a literal list when every item is a literal.
fn list_expr(items: Vec<Expr>, span: Span) -> Expr {
    let lits: Option<Vec<Literal>> = items
        .iter()
        .map(|e| match &e.kind {
            ExprKind::Lit(l) => Some(l.clone()),
            _ => None,
        })
        .collect();
    let kind = match lits {
        Some(lits) => ExprKind::Lit(Literal::List(lits)),
        None => ExprKind::List(items),
    };
    Expr { kind, span }
}

/// The span from the start of `a` to the end of `b`.
fn join(a: Span, b: Span) -> Span {
    Span {
        start: a.start,
        end: b.end.max(a.end),
        line: a.line,
        col: a.col,
    }
}
