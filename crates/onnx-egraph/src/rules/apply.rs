//! The applier of compiled rules: builds the right side with the op builder (attributes and
//! logical parameters by name, literals typed by their slot's type parameter, `let`s shared,
//! `..rest` copied), then unions it with the matched class unless the union would merge values
//! of different types or two different constants: such a union is refused and reported.

use std::collections::BTreeMap;

use egg::Id;
use onnx_rules::ir::{InputTerm, OpHead, OpTerm, Rule, Term, TermId, VarId};
use onnx_rules::params::{logical_param, ParamLoc};

use crate::analysis::OnnxEGraph;
use crate::build::{literal_input, AttrArg, OpBuilder};
use crate::lang::{NodeKind, ONode};
use crate::value::{const_val, to_attribute, Val};
use crate::RhsError;

use super::eval::{Evaluator, GuardCtx, GuardRegistry};
use super::matcher::{Bound, Env};

pub(crate) struct RhsBuilder<'a> {
    pub eg: &'a mut OnnxEGraph,
    pub rule: &'a Rule,
    pub env: &'a Env,
    pub opset: i64,
    pub guards: &'a GuardRegistry,
    pub uses: &'a BTreeMap<Id, usize>,
    pub lets: BTreeMap<VarId, Option<Id>>,
    pub roots: &'a [Id],
}

/// An input being built: a class, absent, or a literal waiting for its slot's type.
enum Pending {
    Ready(Option<Id>),
    Literal(Val),
}

impl RhsBuilder<'_> {
    fn eval(&self, e: onnx_rules::ir::ExprId) -> Result<Val, RhsError> {
        let ev = Evaluator {
            ctx: GuardCtx {
                egraph: self.eg,
                opset: self.opset,
                uses: self.uses,
            },
            rule: self.rule,
            env: self.env,
            guards: self.guards,
            roots: self.roots,
        };
        let v = ev.eval(e).ok_or(RhsError::NoKnownValue)?;
        Ok(match v {
            Val::Class(c) => match self.eg[c].data.constant.and_then(|k| const_val(self.eg, k)) {
                Some(x) => x,
                None => Val::Class(c),
            },
            v => v,
        })
    }

    /// Builds a term; `None` is an absent optional value.
    pub fn term(&mut self, t: TermId) -> Result<Option<Id>, RhsError> {
        match self.pending(t)? {
            Pending::Ready(x) => Ok(x),
            Pending::Literal(_) => Err(RhsError::LiteralWithoutSlot),
        }
    }

    /// A `let` variable's term, built once.
    fn pending_var(&mut self, v: onnx_rules::ir::VarId) -> Result<Pending, RhsError> {
        if let Some(&id) = self.lets.get(&v) {
            return Ok(Pending::Ready(id));
        }
        let Some(&(_, lt)) = self.rule.lets.iter().find(|(lv, _)| *lv == v) else {
            return Err(RhsError::NotALet);
        };
        let id = self.term(lt)?;
        self.lets.insert(v, id);
        Ok(Pending::Ready(id))
    }

    fn pending(&mut self, t: TermId) -> Result<Pending, RhsError> {
        Ok(match self.rule.term(t) {
            Term::Absent => Pending::Ready(None),
            Term::Literal(l) => Pending::Literal(Val::from(l)),
            Term::Var(v) => {
                if let Some(&id) = self.lets.get(v) {
                    return Ok(Pending::Ready(id));
                }
                if let Some((_, lt)) = self.rule.lets.iter().find(|(lv, _)| lv == v) {
                    let id = self.term(*lt)?;
                    self.lets.insert(*v, id);
                    return Ok(Pending::Ready(id));
                }
                match self.env.get(v.0 as usize).cloned().flatten() {
                    Some(Bound::Class(c)) => {
                        let c = self.eg.find(c);
                        match self.eg[c].data.attr {
                            // An attribute used as an input: a constant in the slot's type.
                            Some(a) => {
                                match crate::value::attr_value(self.eg.analysis.attrs.get(a)) {
                                    Some(v) => Pending::Literal(v),
                                    None => return Err(RhsError::AttributeNotInput),
                                }
                            }
                            None => Pending::Ready(Some(c)),
                        }
                    }
                    Some(Bound::Absent) => Pending::Ready(None),
                    _ => {
                        return Err(RhsError::NotAValue {
                            var: self.rule.var(*v).name.clone(),
                        })
                    }
                }
            }
            Term::Op(o) => Pending::Ready(Some(self.op(o, None)?)),
            Term::Proj { tuple, index } => {
                let Term::Op(o) = self.rule.term(*tuple) else {
                    return Err(RhsError::ProjectionOfNonOp);
                };
                let t = self.op(o, Some(*index))?;
                Pending::Ready(Some(t))
            }
        })
    }

    /// In a version step: whether attribute `name` (class `c`), carried by `..rest` from the
    /// left op that binds `rest`, holds that op's schema default.
    fn holds_source_default(&self, rest: onnx_rules::ir::VarId, name: &str, c: Id) -> bool {
        let source = self.rule.pats.iter().find_map(|(p, _)| match p {
            onnx_rules::ir::Pat::Op(o) if o.rest == Some(rest) => match &o.head {
                OpHead::Named(r) => r.pin.and_then(|pin| {
                    onnx_schema::registry()
                        .versions(&r.domain, &r.op_type)
                        .iter()
                        .find(|s| s.since_version == pin)
                }),
                _ => None,
            },
            _ => None,
        });
        let Some(default) = source
            .and_then(|s| s.attribute(name))
            .and_then(|a| a.default.as_ref())
        else {
            return false;
        };
        let held = self.eg[c].nodes.iter().find_map(|n| match n.kind {
            crate::lang::NodeKind::Attr(a) => Some(self.eg.analysis.attrs.get(a)),
            _ => None,
        });
        held.is_some_and(|p| crate::value::same_value(p, default))
    }

    /// Builds an op; with `proj`, returns output `proj` of the tuple.
    fn op(&mut self, o: &OpTerm, proj: Option<usize>) -> Result<Id, RhsError> {
        let (mut b, copied_attrs) = match &o.head {
            OpHead::Named(r) if r.pin.is_some() && self.rule.step.is_some() => {
                // A version step writes the op at its pinned version, whatever the opset.
                let pin = r.pin.unwrap_or_default();
                let b = OpBuilder::at_opset(&r.domain, &r.op_type, pin);
                if b.schema().map(|s| s.since_version) != Some(pin) {
                    return Err(RhsError::NoVersion {
                        op: r.op_type.clone(),
                        pin,
                    });
                }
                (b, Vec::new())
            }
            OpHead::Named(r) => {
                let opset = if r.domain.is_empty() {
                    self.opset
                } else {
                    self.eg
                        .analysis
                        .domain_opset(&r.domain)
                        .ok_or_else(|| RhsError::NoOpset {
                            domain: r.domain.clone(),
                        })?
                };
                let b = OpBuilder::at_opset(&r.domain, &r.op_type, opset);
                let since =
                    b.schema()
                        .map(|s| s.since_version)
                        .ok_or_else(|| RhsError::NoSchema {
                            op: r.op_type.clone(),
                            opset,
                        })?;
                if let Some((lo, hi)) = r.since {
                    if since < lo || hi.is_some_and(|h| since > h) {
                        return Err(RhsError::OutsideRange {
                            op: r.op_type.clone(),
                            since,
                        });
                    }
                }
                (b, Vec::new())
            }
            OpHead::Var { var, .. } => match self.env.get(var.0 as usize).cloned().flatten() {
                Some(Bound::Op(op, attrs)) => {
                    let info = self.eg.analysis.ops.get(op).clone();
                    let b = OpBuilder::at_opset(&info.domain, &info.op_type, info.since_version);
                    let copied: Vec<(String, Id)> =
                        info.attr_names.iter().cloned().zip(attrs).collect();
                    (b, copied)
                }
                _ => return Err(RhsError::UnboundOp),
            },
        };
        let schema = b.schema().ok_or(RhsError::RhsWithoutSchema)?;
        let op_type = schema.name.clone();
        let since = schema.since_version;
        let default_domain = onnx_schema::normalize_domain(&schema.domain).is_empty();
        for (name, c) in copied_attrs {
            b = b.attr(&name, AttrArg::Class(c));
        }
        let mut named: Vec<&str> = Vec::new();
        let mut slot_values: BTreeMap<usize, Pending> = BTreeMap::new();
        for (name, e) in &o.attrs {
            named.push(name);
            // A `let` term given to a logical parameter that is an input here: built, then
            // the input (`let s = Shape(x)`, `Reshape<shape: s>`).
            let let_term = match self.rule.expr(*e) {
                onnx_rules::ir::Expr::Var(v) => {
                    self.rule.lets.iter().any(|(lv, _)| lv == v).then_some(*v)
                }
                _ => None,
            };
            let loc = if default_domain {
                logical_param(&op_type, since, name).map(|p| p.loc)
            } else {
                None
            };
            // A variable bound to a value (not an attribute), given to a logical parameter
            // that is an input here: that value itself, with its element type.
            let value_var = match (self.rule.expr(*e), loc) {
                (onnx_rules::ir::Expr::Var(v), Some(ParamLoc::Input(_))) => {
                    match self.env.get(v.0 as usize).cloned().flatten() {
                        Some(Bound::Class(c)) if self.eg[self.eg.find(c)].data.attr.is_none() => {
                            Some(self.eg.find(c))
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            let v = match (let_term, value_var) {
                (Some(v), _) => match self.pending_var(v)? {
                    Pending::Ready(Some(c)) => Val::Class(c),
                    Pending::Ready(None) => Val::Absent,
                    Pending::Literal(l) => l,
                },
                (None, Some(c)) => Val::Class(c),
                (None, None) => self.eval(*e)?,
            };
            let slot = match loc {
                Some(ParamLoc::Input(s)) => Some(s),
                Some(ParamLoc::Attr(_)) | None => None,
            };
            let attr_name: &str = match loc {
                Some(ParamLoc::Attr(a)) => a,
                _ => name,
            };
            match slot {
                None => {
                    let a = attr_name;
                    if v == Val::Absent {
                        continue;
                    }
                    let ty =
                        schema
                            .attribute(a)
                            .map(|s| s.ty)
                            .ok_or_else(|| RhsError::NoAttribute {
                                op: op_type.clone(),
                                attr: a.to_string(),
                            })?;
                    let attr = to_attribute(a, ty, &v).ok_or_else(|| RhsError::WrongValue {
                        op: op_type.clone(),
                        attr: a.to_string(),
                        value: format!("{v:?}"),
                    })?;
                    b = b.attr(a, AttrArg::Proto(Box::new(attr)));
                }
                Some(slot) => {
                    let p = match v {
                        Val::Class(c) => Pending::Ready(Some(c)),
                        Val::Absent => Pending::Ready(None),
                        v => Pending::Literal(v),
                    };
                    slot_values.insert(slot, p);
                }
            }
        }
        if let Some(r) = o.rest {
            if let Some(Bound::Rest(list)) = self.env.get(r.0 as usize).cloned().flatten() {
                for (name, c) in list {
                    if named.contains(&name.as_str()) {
                        continue;
                    }
                    let absent = self.eg[c]
                        .nodes
                        .iter()
                        .any(|n| matches!(n.kind, crate::lang::NodeKind::None));
                    if schema.attribute(&name).is_some() {
                        b = b.attr(&name, AttrArg::Class(c));
                    } else if absent {
                        // Not held by the node: nothing to carry.
                    } else if self.rule.step.is_some() && !self.holds_source_default(r, &name, c) {
                        // A version step carries every attribute: one the target version does
                        // not have is dropped only where it holds its default.
                        return Err(RhsError::NoAttributeAt {
                            op: op_type.clone(),
                            since,
                            attr: name.clone(),
                        });
                    }
                }
            }
        }
        // Positional inputs go to the slots that are not logical parameters.
        let logical: Vec<usize> = if default_domain {
            onnx_rules::params::logical_input_slots(&op_type, since)
        } else {
            Vec::new()
        };
        let mut slot = 0usize;
        let next_slot = |slot: &mut usize| {
            while logical.contains(slot) {
                *slot += 1;
            }
            let s = *slot;
            *slot += 1;
            s
        };
        for i in &o.inputs {
            match i {
                InputTerm::Term(t) => {
                    let p = self.pending(*t)?;
                    slot_values.insert(next_slot(&mut slot), p);
                }
                InputTerm::Splice(v) => {
                    let Some(Bound::List(ids)) = self.env.get(v.0 as usize).cloned().flatten()
                    else {
                        return Err(RhsError::NotAList);
                    };
                    for id in ids {
                        slot_values.insert(next_slot(&mut slot), Pending::Ready(Some(id)));
                    }
                }
            }
        }
        let mut resolved: BTreeMap<usize, Option<Id>> = BTreeMap::new();
        let mut literals = Vec::new();
        for (s, p) in slot_values {
            match p {
                Pending::Ready(x) => {
                    resolved.insert(s, x);
                }
                Pending::Literal(v) => literals.push((s, v)),
            }
        }
        for (s, v) in literals {
            let id = literal_input(self.eg, schema, s, &v, &resolved)?;
            resolved.insert(s, Some(id));
        }
        for (s, id) in resolved {
            b = b.input(s, id);
        }
        let n_out = o.outputs.unwrap_or(1);
        let (id, enode) = b.outputs(n_out).add_to(self.eg)?;
        let is_tuple = match enode.kind {
            NodeKind::Op(op) => self.eg.analysis.ops.get(op).is_tuple,
            _ => false,
        };
        if is_tuple && n_out > 1 {
            // Every output gets its projection, so that rules rooted at the others (Attention's
            // present_key is the Concat of its past and new keys) can match them.
            for k in 0..n_out {
                self.eg.add(ONode::new(NodeKind::Out(k as u32), vec![id]));
            }
        }
        match (proj, is_tuple) {
            (Some(i), true) => Ok(self.eg.add(ONode::new(NodeKind::Out(i as u32), vec![id]))),
            (None, true) if o.outputs.is_none() => {
                Ok(self.eg.add(ONode::new(NodeKind::Out(0), vec![id])))
            }
            (Some(0), false) | (None, _) => Ok(id),
            (Some(i), false) => Err(RhsError::OutputOfSingleOutput {
                op: op_type.to_string(),
                index: i,
            }),
        }
    }
}

/// Why a union was refused, or `None` when it is sound to make.
pub(crate) fn refusal_reason(eg: &mut OnnxEGraph, a: Id, b: Id) -> Option<String> {
    let (a, b) = (eg.find(a), eg.find(b));
    if a == b {
        return None;
    }
    if let (Some(ta), Some(tb)) = (&eg[a].data.ty, &eg[b].data.ty) {
        if !crate::types::compatible(ta, tb) {
            return Some(format!(
                "different types: {} vs {}",
                crate::types::describe(ta),
                crate::types::describe(tb)
            ));
        }
    }
    if let (Some(x), Some(y)) = (eg[a].data.constant, eg[b].data.constant) {
        if !eg.analysis.same_constant(x, y) {
            return Some("different constants".to_string());
        }
    }
    None
}
