//! Per-epoch op checks: every op occurrence against the schema version it binds to in each
//! epoch (for an op variable: every version of every member of its class in the window).
//! Named attributes and logical parameters must exist and literal or computed values must fit
//! their type; the inputs must fit the schema's arity (`xs..` only in a variadic slot, `None`
//! only in an optional one); `Op#n` must be a possible output count; a right side's `..rest`
//! must be able to carry every attribute the left op may have; a right side op gets every
//! required attribute. A finding that holds in some epochs only names their opsets.

use std::collections::BTreeSet;

use onnx_schema::{OpSchema, ParamOption};

use crate::diag::Diagnostic;
use crate::funcs::Ty;
use crate::ir::*;
use crate::params::logical_params;

use super::resolve::Resolved;
use super::types::{attr_slot, expr_fits, literal_fits, AttrSlot};
use super::{Findings, Lowered, Site, SiteInfo};

/// The value of a named attribute, on either side.
enum AttrValue<'a> {
    Lit(&'a Literal),
    Other,
    Expr(ExprId),
}

/// What an input position holds, for the arity checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InputKind {
    Value,
    Absent,
    Optional,
    Variadic,
}

/// An op pattern or term, seen the same way.
struct View<'a> {
    head: &'a OpHead,
    outputs: Option<usize>,
    attrs: Vec<(&'a str, AttrValue<'a>)>,
    rest: Option<VarId>,
    inputs: Vec<InputKind>,
    is_term: bool,
}

fn view<'a>(rule: &'a Rule, site: Site) -> Option<View<'a>> {
    match site {
        Site::Pat(p) => {
            let Pat::Op(op) = rule.pat(p) else {
                return None;
            };
            Some(View {
                head: &op.head,
                outputs: op.outputs,
                attrs: op
                    .attrs
                    .iter()
                    .map(|(n, a)| {
                        let v = match a {
                            AttrPat::Literal(l) => AttrValue::Lit(l),
                            _ => AttrValue::Other,
                        };
                        (n.as_str(), v)
                    })
                    .collect(),
                rest: op.rest,
                inputs: op
                    .inputs
                    .iter()
                    .map(|i| match i {
                        InputPat::Pat(q) if *rule.pat(*q) == Pat::Absent => InputKind::Absent,
                        InputPat::Pat(_) => InputKind::Value,
                        InputPat::Optional(_) => InputKind::Optional,
                        InputPat::Variadic(_) => InputKind::Variadic,
                    })
                    .collect(),
                is_term: false,
            })
        }
        Site::Term(t) => {
            let Term::Op(op) = rule.term(t) else {
                return None;
            };
            Some(View {
                head: &op.head,
                outputs: op.outputs,
                attrs: op
                    .attrs
                    .iter()
                    .map(|(n, e)| (n.as_str(), AttrValue::Expr(*e)))
                    .collect(),
                rest: op.rest,
                inputs: op
                    .inputs
                    .iter()
                    .map(|i| match i {
                        InputTerm::Term(q) if *rule.term(*q) == Term::Absent => InputKind::Absent,
                        InputTerm::Term(_) => InputKind::Value,
                        InputTerm::Splice(_) => InputKind::Variadic,
                    })
                    .collect(),
                is_term: true,
            })
        }
    }
}

/// Runs the schema checks of every op occurrence of a rule.
pub(crate) fn check_ops(
    lw: &Lowered,
    res: &Resolved,
    expr_types: &[Ty],
    diags: &mut Vec<Diagnostic>,
) {
    let mut findings = Findings::default();
    let checker = Checker {
        lw,
        res,
        expr_types,
    };
    for (site, info) in &lw.sites {
        let Some(v) = view(&lw.rule, *site) else {
            continue;
        };
        let bindings = match v.head {
            OpHead::Named(r) => res.bindings(r),
            OpHead::Var { var, .. } => lw
                .op_class
                .get(var)
                .map_or(Vec::new(), |c| res.class_bindings(*c)),
        };
        for (schema, window) in bindings {
            checker.check(&v, info, schema, window, &mut findings);
        }
    }
    findings.emit(res.window, diags);
}

struct Checker<'a> {
    lw: &'a Lowered,
    res: &'a Resolved,
    expr_types: &'a [Ty],
}

/// `Relu`, or `ai.onnx.ml::LinearClassifier`.
fn op_name(s: &OpSchema) -> String {
    if s.domain.is_empty() {
        s.name.clone()
    } else {
        format!("{}::{}", s.domain, s.name)
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The note listing what a schema version has, for an unknown attribute.
fn attribute_note(s: &OpSchema) -> String {
    let mut names: Vec<String> = s.attributes.iter().map(|a| a.name.clone()).collect();
    if s.domain.is_empty() {
        for p in logical_params(&s.name, s.since_version) {
            if !names.iter().any(|n| n == p.name) {
                names.push(format!("{} (logical)", p.name));
            }
        }
    }
    if names.is_empty() {
        format!("`{}-{}` has no attributes", op_name(s), s.since_version)
    } else {
        format!(
            "`{}-{}` has: {}",
            op_name(s),
            s.since_version,
            names.join(", ")
        )
    }
}

impl Checker<'_> {
    fn check(&self, v: &View, info: &SiteInfo, s: &OpSchema, w: OpsetWindow, out: &mut Findings) {
        let op = op_name(s);
        let mut input_slots: Vec<(usize, &str, Span)> = Vec::new();
        for (k, (name, value)) in v.attrs.iter().enumerate() {
            let name_span = info.attr_names.get(k).copied().unwrap_or(info.span);
            let value_span = info.attr_values.get(k).copied().unwrap_or(info.span);
            let Some(slot) = attr_slot(s, name) else {
                out.add(
                    name_span,
                    format!("unknown attribute `{name}` of `{op}`"),
                    vec![attribute_note(s)],
                    w,
                );
                continue;
            };
            if let AttrSlot::Input(i, _) = slot {
                input_slots.push((i, name, name_span));
            }
            let ty = slot.ty();
            match value {
                AttrValue::Lit(l) if !literal_fits(l, ty) => out.add(
                    value_span,
                    format!(
                        "attribute `{name}` of `{op}` is {}; this literal does not fit",
                        ty.describe()
                    ),
                    Vec::new(),
                    w,
                ),
                AttrValue::Expr(e) => {
                    let t = self
                        .expr_types
                        .get(e.0 as usize)
                        .copied()
                        .unwrap_or(Ty::Any);
                    // On a right side, a logical parameter that is an input at this epoch
                    // may be given a value (`let s = Shape(x)`, then `Reshape<shape: s>`).
                    let value_into_input =
                        v.is_term && matches!(slot, AttrSlot::Input(..)) && matches!(t, Ty::Value);
                    if !expr_fits(t, ty) && !value_into_input {
                        out.add(
                            value_span,
                            format!(
                                "attribute `{name}` of `{op}` is {}, but this is {}",
                                ty.describe(),
                                t.describe()
                            ),
                            Vec::new(),
                            w,
                        );
                    }
                }
                _ => {}
            }
        }
        self.check_inputs(v, info, s, &input_slots, w, out);
        self.check_outputs(v, info, s, w, out);
        if v.is_term {
            self.check_rest(v, info, s, w, out);
        }
    }

    fn check_inputs(
        &self,
        v: &View,
        info: &SiteInfo,
        s: &OpSchema,
        input_slots: &[(usize, &str, Span)],
        w: OpsetWindow,
        out: &mut Findings,
    ) {
        let op = op_name(s);
        let n = v.inputs.len();
        for &(slot, name, span) in input_slots {
            if slot < n {
                out.add(
                    span,
                    format!(
                        "logical parameter `{name}` is input {slot} of `{op}`, but {} given explicitly",
                        if n == 1 { "1 input is".to_string() } else { format!("{n} inputs are") }
                    ),
                    Vec::new(),
                    w,
                );
            }
        }
        let effective = input_slots
            .iter()
            .map(|(i, _, _)| i + 1)
            .fold(n, usize::max);
        let variadic = s
            .inputs
            .last()
            .is_some_and(|f| f.option == ParamOption::Variadic);
        if !variadic && n > s.max_input {
            let span = info.inputs.get(s.max_input).copied().unwrap_or(info.span);
            out.add(
                span,
                format!(
                    "too many inputs: `{op}` takes at most {}, got {n}",
                    plural(s.max_input, "input")
                ),
                Vec::new(),
                w,
            );
        }
        if effective < s.min_input {
            out.add(
                info.head,
                format!(
                    "too few inputs: `{op}` needs at least {}, got {n}",
                    plural(s.min_input, "input")
                ),
                Vec::new(),
                w,
            );
        }
        for (i, kind) in v.inputs.iter().enumerate() {
            let formal = s
                .inputs
                .get(i)
                .or_else(|| s.inputs.last().filter(|_| variadic));
            let Some(formal) = formal else { continue };
            let span = info.inputs.get(i).copied().unwrap_or(info.span);
            let message = match (kind, formal.option) {
                (InputKind::Variadic, o) if o != ParamOption::Variadic => format!(
                    "a list of inputs (`xs..`) needs a variadic input slot; input {i} of `{op}` is `{}`",
                    formal.name
                ),
                (InputKind::Absent, ParamOption::Single) => {
                    format!("input {i} (`{}`) of `{op}` is required: it cannot be `None`", formal.name)
                }
                (InputKind::Optional, ParamOption::Single) => {
                    format!("input {i} (`{}`) of `{op}` is required: it cannot be optional (`x?`)", formal.name)
                }
                _ => continue,
            };
            out.add(span, message, Vec::new(), w);
        }
    }

    fn check_outputs(
        &self,
        v: &View,
        info: &SiteInfo,
        s: &OpSchema,
        w: OpsetWindow,
        out: &mut Findings,
    ) {
        let op = op_name(s);
        let range = if s.max_output >= i32::MAX as usize {
            format!("{} or more", s.min_output)
        } else if s.min_output == s.max_output {
            s.min_output.to_string()
        } else {
            format!("{} to {}", s.min_output, s.max_output)
        };
        match v.outputs {
            Some(n) if n > 0 && (n < s.min_output || n > s.max_output) => out.add(
                info.outputs.unwrap_or(info.head),
                format!("`{op}` has {range} outputs, not {n}"),
                Vec::new(),
                w,
            ),
            None if s.min_output > 1 => out.add(
                info.head,
                format!(
                    "`{op}` always has {range} outputs: write `{}#{}(...)` and pick one with `.i`",
                    s.name, s.min_output
                ),
                Vec::new(),
                w,
            ),
            _ => {}
        }
    }

    /// The right side's `..rest` copies the attributes the left op did not name: each one the
    /// left op may have must exist on the right op. Without `..rest`, the right op must be
    /// given every attribute it requires.
    fn check_rest(
        &self,
        v: &View,
        info: &SiteInfo,
        s: &OpSchema,
        w: OpsetWindow,
        out: &mut Findings,
    ) {
        let op = op_name(s);
        let named: BTreeSet<&str> = v.attrs.iter().map(|(n, _)| *n).collect();
        let Some(rest) = v.rest else {
            for a in &s.attributes {
                if a.required && a.default.is_none() && !named.contains(a.name.as_str()) {
                    out.add(
                        info.head,
                        format!("`{op}` requires attribute `{}`", a.name),
                        Vec::new(),
                        w,
                    );
                }
            }
            return;
        };
        let Some(&left_pat) = self.lw.rest_binding.get(&rest) else {
            return;
        };
        let Pat::Op(left) = self.lw.rule.pat(left_pat) else {
            return;
        };
        let OpHead::Named(left_ref) = &left.head else {
            return;
        };
        let Some(ls) = self.res.binding_at(left_ref, w) else {
            return;
        };
        // A version step may carry an attribute the target version lacks: it is then not built
        // (the node holds what only the source version computes).
        if self.res.step.is_some() {
            return;
        }
        let left_named: BTreeSet<&str> = left.attrs.iter().map(|(n, _)| n.as_str()).collect();
        let rest_name = &self.lw.rule.var(rest).name;
        for a in &ls.attributes {
            let name = a.name.as_str();
            if left_named.contains(name) || named.contains(name) || s.attribute(name).is_some() {
                continue;
            }
            out.add(
                info.rest.unwrap_or(info.span),
                format!(
                    "`..{rest_name}` may carry attribute `{name}` of `{}`, which `{op}` does not have",
                    op_name(ls)
                ),
                Vec::new(),
                w,
            );
        }
    }
}
