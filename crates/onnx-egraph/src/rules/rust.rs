//! Rules whose guard and right side are Rust closures. The left side is rule text (checked by
//! `onnx_rules::parse_extern_rule`, or a file's `=> extern` rule), matched by the same matcher
//! as every rule; after the text `where` holds, the [`RustGuard`] decides, and the
//! [`RustApplier`] builds the replacement through [`RustRhs`], which adds ops with the one
//! [`OpBuilder`] (by op name, at the model's opset, attributes and logical parameters by name
//! as in rule text). What it returns goes through the refusal check of text right sides.
//!
//! [`RustMatch`] is the read-only view of a match both closures see: the classes bound to the
//! pattern's variables, attribute values, types, shapes and constants.

use std::collections::BTreeMap;
use std::sync::Arc;

use egg::Id;
use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, TensorProto};
use onnx_rules::ir::{Rule, VarKind};
use onnx_rules::params::{logical_input_slots, logical_param, ParamLoc};
use onnx_schema::infer::SymDim;

use crate::analysis::OnnxEGraph;
use crate::build::{literal_input, AttrArg, OpBuilder};
use crate::lang::{NodeKind, ONode};
use crate::value::{attr_value, const_val, decode, to_attribute, to_tensor, Val};
use crate::RhsError;

use super::matcher::{Bound, Env};

/// A guard written in Rust, evaluated after the rule's text `where` holds. Three-valued like
/// text guards: `Some(true)` lets the rule fire, `Some(false)` and `None` (unknown) do not.
pub type RustGuard = Arc<dyn Fn(&RustMatch<'_>) -> Option<bool> + Send + Sync>;

/// A right side written in Rust: builds the replacement of the matched root with
/// [`RustRhs::op`] and returns its class. `Ok(None)` declines the match (nothing changes, the
/// phase report counts it under `declined`); `Err(message)` is reported as a refused union
/// naming the rule, and the run goes on.
pub type RustApplier = Arc<dyn Fn(&mut RustRhs<'_>) -> Result<Option<Id>, RhsError> + Send + Sync>;

/// The Rust parts of a rule: its guard (optional) and its applier.
#[derive(Clone)]
pub(crate) struct RustParts {
    pub guard: Option<RustGuard>,
    pub applier: RustApplier,
}

/// The variable of the rule named `name` (not a `let`).
fn var_index(rule: &Rule, name: &str) -> Option<usize> {
    rule.vars
        .iter()
        .position(|v| v.name == name && v.kind != VarKind::Let)
}

/// What one match of a Rust rule binds, read-only: given to its [`RustGuard`], and to its
/// [`RustApplier`] through [`RustRhs::matched`].
pub struct RustMatch<'a> {
    pub(crate) egraph: &'a OnnxEGraph,
    pub(crate) rule: &'a Rule,
    pub(crate) env: &'a Env,
    pub(crate) root: Id,
    pub(crate) opset: i64,
    pub(crate) uses: &'a BTreeMap<Id, usize>,
}

impl<'a> RustMatch<'a> {
    /// The rule's name.
    pub fn rule_name(&self) -> &'a str {
        &self.rule.name
    }

    /// The class the left side matched (the value the applier's result replaces).
    pub fn root(&self) -> Id {
        self.egraph.find(self.root)
    }

    /// The model's default-domain opset.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// The e-graph, for what this view does not offer.
    pub fn egraph(&self) -> &'a OnnxEGraph {
        self.egraph
    }

    fn bound(&self, name: &str) -> Option<&'a Bound> {
        self.env.get(var_index(self.rule, name)?)?.as_ref()
    }

    /// The class bound to a value variable (`x`, or `x?` when present). `None` for an absent
    /// optional input, an attribute variable (see [`Self::attr`]), or an unknown name.
    pub fn var(&self, name: &str) -> Option<Id> {
        match self.bound(name)? {
            Bound::Class(c) => {
                let c = self.egraph.find(*c);
                self.egraph[c].data.attr.is_none().then_some(c)
            }
            _ => None,
        }
    }

    /// Whether an optional input (`x?`) or a parameter bound by the pattern is absent.
    pub fn is_absent(&self, name: &str) -> bool {
        matches!(self.bound(name), Some(Bound::Absent))
    }

    /// The classes bound to a variadic variable (`xs..`).
    pub fn list(&self, name: &str) -> Option<Vec<Id>> {
        match self.bound(name)? {
            Bound::List(l) => Some(l.iter().map(|&c| self.egraph.find(c)).collect()),
            _ => None,
        }
    }

    /// The value of an attribute variable (`<alpha: a>`): the attribute's value, or a logical
    /// parameter's (a constant input at later opsets: its scalar or 1-D value). [`Val::Absent`]
    /// when the attribute or parameter is absent; `None` when not known.
    pub fn attr(&self, name: &str) -> Option<Val> {
        match self.bound(name)? {
            Bound::Absent => Some(Val::Absent),
            Bound::Class(c) => {
                let c = self.egraph.find(*c);
                match self.egraph[c].data.attr {
                    Some(a) => attr_value(self.egraph.analysis.attrs.get(a)),
                    None => self.value(c),
                }
            }
            _ => None,
        }
    }

    /// The element type (`TensorProto.DataType` code) of a class.
    pub fn dtype(&self, id: Id) -> Option<i32> {
        let ty = self.egraph[id].data.ty.as_ref()?;
        onnx_schema::infer::elem_type_of(ty).filter(|&e| e != 0)
    }

    /// The shape of a class, with symbolic dimensions.
    pub fn shape(&self, id: Id) -> Option<Vec<SymDim>> {
        let ty = self.egraph[id].data.ty.as_ref()?;
        onnx_schema::infer::shape_of(ty)
    }

    /// The rank of a class.
    pub fn rank(&self, id: Id) -> Option<usize> {
        self.shape(id).map(|s| s.len())
    }

    /// The shape of a class when every dimension is a known number.
    pub fn static_shape(&self, id: Id) -> Option<Vec<i64>> {
        self.shape(id)?
            .iter()
            .map(|d| match d {
                SymDim::Known(v) => Some(*v),
                _ => None,
            })
            .collect()
    }

    /// The constant of a class, as stored (not decoded).
    pub fn constant(&self, id: Id) -> Option<&'a TensorProto> {
        let k = self.egraph[id].data.constant?;
        Some(&self.egraph.analysis.consts.get(k).tensor)
    }

    /// The constant of a class decoded (`None` above 64 KiB, as for text guards).
    pub fn tensor(&self, id: Id) -> Option<onnx_ref::Tensor> {
        decode(self.egraph, self.egraph[id].data.constant?)
    }

    /// The value of a small constant: a scalar for rank 0, a list for rank 1.
    pub fn value(&self, id: Id) -> Option<Val> {
        const_val(self.egraph, self.egraph[id].data.constant?)
    }

    /// The element of a constant with one element, as f64.
    pub fn scalar_f64(&self, id: Id) -> Option<f64> {
        let t = self.tensor(id)?;
        if t.len() != 1 {
            return None;
        }
        t.to_f64_vec().ok()?.first().copied()
    }

    /// Whether the value had exactly one consumer in the graph as lifted.
    pub fn single_use(&self, id: Id) -> bool {
        self.uses.get(&self.egraph.find(id)).copied() == Some(1)
    }
}

/// What a [`RustApplier`] builds with: the match ([`Self::matched`], and shortcuts for the
/// common reads) and the e-graph, through ops added by name.
pub struct RustRhs<'a> {
    pub(crate) egraph: &'a mut OnnxEGraph,
    pub(crate) rule: &'a Rule,
    pub(crate) env: &'a Env,
    pub(crate) root: Id,
    pub(crate) opset: i64,
    pub(crate) uses: &'a BTreeMap<Id, usize>,
}

impl<'a> RustRhs<'a> {
    /// The read-only view of the match (types, shapes, constants, attribute values). Take
    /// what you need from it before adding ops: `let x = rhs.matched().var("x")`.
    pub fn matched(&self) -> RustMatch<'_> {
        RustMatch {
            egraph: self.egraph,
            rule: self.rule,
            env: self.env,
            root: self.root,
            opset: self.opset,
            uses: self.uses,
        }
    }

    /// [`RustMatch::var`].
    pub fn var(&self, name: &str) -> Option<Id> {
        self.matched().var(name)
    }

    /// [`RustMatch::attr`].
    pub fn attr(&self, name: &str) -> Option<Val> {
        self.matched().attr(name)
    }

    /// The model's default-domain opset.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// An op of the default domain, bound at the model's opset.
    pub fn op(&mut self, op_type: &str) -> RustOp<'_, 'a> {
        self.op_in("", op_type)
    }

    /// An op of a domain, bound at the model's import of that domain.
    pub fn op_in(&mut self, domain: &str, op_type: &str) -> RustOp<'_, 'a> {
        RustOp {
            rhs: self,
            domain: onnx_schema::normalize_domain(domain).to_string(),
            op_type: op_type.to_string(),
            inputs: Vec::new(),
            at_slots: BTreeMap::new(),
            attrs: Vec::new(),
        }
    }

    /// A constant (identical tensors are one class).
    pub fn constant(&mut self, tensor: &onnx_ref::Tensor) -> Id {
        self.constant_proto(tensor.to_proto(""))
    }

    /// A constant from its proto.
    pub fn constant_proto(&mut self, tensor: TensorProto) -> Id {
        let k = self.egraph.analysis.consts.intern(tensor);
        self.egraph.add(ONode::leaf(NodeKind::Const(k)))
    }

    /// A scalar constant of an element type (`TensorProto.DataType` code).
    pub fn scalar(&mut self, dtype: i32, value: f64) -> Result<Id, RhsError> {
        let t =
            to_tensor(&Val::Float(value), dtype).ok_or(RhsError::NotAScalar { value, dtype })?;
        Ok(self.constant_proto(t))
    }

    /// A scalar constant with the element type of class `like`.
    pub fn scalar_like(&mut self, like: Id, value: f64) -> Result<Id, RhsError> {
        let dtype = self
            .matched()
            .dtype(like)
            .ok_or(RhsError::UnknownElementType)?;
        self.scalar(dtype, value)
    }
}

/// An op being built by a [`RustApplier`]: inputs in order, attributes by name; nothing is
/// added to the e-graph until [`Self::build`].
///
/// Logical parameters (rules/README.md: `axes`, `split`, `pads`, `min`/`max`, ...) are given as
/// attributes at every opset, as in rule text: where the schema takes one as an input, it
/// becomes a constant input, and positional inputs skip its slot. [`Self::input_at`] sets a
/// slot by its index in the schema.
pub struct RustOp<'r, 'a> {
    rhs: &'r mut RustRhs<'a>,
    domain: String,
    op_type: String,
    inputs: Vec<Option<Id>>,
    at_slots: BTreeMap<usize, Option<Id>>,
    attrs: Vec<(String, AttrGiven)>,
}

/// An attribute given to [`RustOp`].
enum AttrGiven {
    Val(Val),
    Tensor(Box<TensorProto>),
}

impl RustOp<'_, '_> {
    /// The next input.
    pub fn input(mut self, id: Id) -> Self {
        self.inputs.push(Some(id));
        self
    }

    /// The next inputs.
    pub fn inputs(mut self, ids: &[Id]) -> Self {
        self.inputs.extend(ids.iter().map(|&i| Some(i)));
        self
    }

    /// The next input is absent (an optional input left out before a later one).
    pub fn absent(mut self) -> Self {
        self.inputs.push(None);
        self
    }

    /// Input `slot` of the schema (`None`: absent), whatever the positional inputs are.
    pub fn input_at(mut self, slot: usize, id: Option<Id>) -> Self {
        self.at_slots.insert(slot, id);
        self
    }

    fn val(mut self, name: &str, v: Val) -> Self {
        self.attrs.push((name.to_string(), AttrGiven::Val(v)));
        self
    }

    /// An attribute (or logical parameter) from a value, e.g. one read with
    /// [`RustMatch::attr`]; converted to the schema's attribute type. [`Val::Absent`] leaves it
    /// at its default.
    pub fn attr(self, name: &str, value: Val) -> Self {
        self.val(name, value)
    }

    /// An `int` attribute.
    pub fn attr_int(self, name: &str, value: i64) -> Self {
        self.val(name, Val::Int(value))
    }

    /// A `float` attribute.
    pub fn attr_float(self, name: &str, value: f32) -> Self {
        self.val(name, Val::Float(value as f64))
    }

    /// An `ints` attribute (or a logical parameter such as `axes`).
    pub fn attr_ints(self, name: &str, value: &[i64]) -> Self {
        self.val(
            name,
            Val::List(value.iter().map(|&i| Val::Int(i)).collect()),
        )
    }

    /// A `floats` attribute.
    pub fn attr_floats(self, name: &str, value: &[f32]) -> Self {
        let l = value.iter().map(|&f| Val::Float(f as f64)).collect();
        self.val(name, Val::List(l))
    }

    /// A `string` attribute.
    pub fn attr_string(self, name: &str, value: &str) -> Self {
        self.val(name, Val::Str(value.to_string()))
    }

    /// A `tensor` attribute.
    pub fn attr_tensor(mut self, name: &str, value: &onnx_ref::Tensor) -> Self {
        self.attrs.push((
            name.to_string(),
            AttrGiven::Tensor(Box::new(value.to_proto(""))),
        ));
        self
    }

    /// Adds the op (one output) and returns its class.
    pub fn build(self) -> Result<Id, RhsError> {
        let op = self.op_type.clone();
        let mut out = self.add(None)?;
        out.pop().ok_or(RhsError::NoOutput { op })
    }

    /// Adds the op with `n` outputs and returns the class of each (the `Out(i)` projections of
    /// the tuple it denotes).
    pub fn build_outputs(self, n: usize) -> Result<Vec<Id>, RhsError> {
        self.add(Some(n))
    }

    fn add(self, n_outputs: Option<usize>) -> Result<Vec<Id>, RhsError> {
        let op = self.op_type.clone();
        self.add_inner(n_outputs).map_err(|e| RhsError::Building {
            op,
            source: Box::new(e),
        })
    }

    fn add_inner(self, n_outputs: Option<usize>) -> Result<Vec<Id>, RhsError> {
        let RustOp {
            rhs,
            domain,
            op_type,
            inputs,
            at_slots,
            attrs,
        } = self;
        let eg = &mut *rhs.egraph;
        let opset = if domain.is_empty() {
            rhs.opset
        } else {
            *eg.analysis
                .opsets
                .get(&domain)
                .ok_or_else(|| RhsError::NoImport {
                    domain: domain.clone(),
                })?
        };
        let mut b = OpBuilder::at_opset(&domain, &op_type, opset);
        let schema = b.schema();
        if schema.is_none() && domain.is_empty() {
            return Err(RhsError::NoSchemaOf { op: op_type, opset });
        }
        let since = schema.map_or(opset, |s| s.since_version);
        let default_domain = domain.is_empty();
        let mut slots: BTreeMap<usize, Option<Id>> = BTreeMap::new();
        let mut params: Vec<(usize, Val)> = Vec::new();
        for (name, given) in attrs {
            let loc = if default_domain {
                logical_param(&op_type, since, &name).map(|p| p.loc)
            } else {
                None
            };
            let attr_name = match loc {
                Some(ParamLoc::Attr(a)) => a.to_string(),
                _ => name.clone(),
            };
            match (loc, given) {
                (Some(ParamLoc::Input(_)), AttrGiven::Val(Val::Absent)) => {}
                (Some(ParamLoc::Input(slot)), AttrGiven::Val(v)) => params.push((slot, v)),
                (Some(ParamLoc::Input(slot)), AttrGiven::Tensor(t)) => {
                    let k = eg.analysis.consts.intern(*t);
                    slots.insert(slot, Some(eg.add(ONode::leaf(NodeKind::Const(k)))));
                }
                (_, AttrGiven::Val(Val::Absent)) => {}
                (_, given) => {
                    let proto = attribute(schema, &attr_name, given)?;
                    b = b.attr(&attr_name, AttrArg::Proto(Box::new(proto)));
                }
            }
        }
        let logical = if default_domain {
            logical_input_slots(&op_type, since)
        } else {
            Vec::new()
        };
        let mut slot = 0usize;
        for id in inputs {
            while logical.contains(&slot) {
                slot += 1;
            }
            slots.insert(slot, id);
            slot += 1;
        }
        slots.extend(at_slots);
        if let Some(s) = schema {
            for (slot, v) in params {
                let id = literal_input(eg, s, slot, &v, &slots)?;
                slots.insert(slot, Some(id));
            }
        }
        for (s, id) in slots {
            b = b.input(s, id);
        }
        if let Some(n) = n_outputs {
            b = b.outputs(n);
        }
        let (id, enode) = b.add_to(eg)?;
        let info = match enode.kind {
            NodeKind::Op(op) => eg.analysis.ops.get(op).clone(),
            _ => return Err(RhsError::NotAnOp),
        };
        if !info.is_tuple {
            return match n_outputs {
                None | Some(1) => Ok(vec![id]),
                Some(n) => Err(RhsError::OutputsOfSingleOutput { n }),
            };
        }
        let n = n_outputs.unwrap_or(1);
        Ok((0..n)
            .map(|i| eg.add(ONode::new(NodeKind::Out(i as u32), vec![id])))
            .collect())
    }
}

/// An attribute of the type the schema gives it (as given for ops without a schema).
fn attribute(
    schema: Option<&onnx_schema::OpSchema>,
    name: &str,
    given: AttrGiven,
) -> Result<AttributeProto, RhsError> {
    let ty = match schema {
        Some(s) => Some(
            s.attribute(name)
                .map(|a| a.ty)
                .ok_or_else(|| RhsError::NoAttribute {
                    op: s.name.clone(),
                    attr: name.to_string(),
                })?,
        ),
        None => None,
    };
    match given {
        AttrGiven::Tensor(t) => {
            if ty.is_some_and(|t| t != AttributeType::Tensor) {
                return Err(RhsError::NotATensor {
                    attr: name.to_string(),
                });
            }
            Ok(AttributeProto {
                name: Some(name.to_string()),
                r#type: Some(AttributeType::Tensor as i32),
                t: Some(*t),
                ..Default::default()
            })
        }
        AttrGiven::Val(v) => {
            let ty = match ty {
                Some(t) => t,
                None => match &v {
                    Val::Int(_) | Val::Bool(_) => AttributeType::Int,
                    Val::Float(_) => AttributeType::Float,
                    Val::Str(_) => AttributeType::String,
                    Val::List(l) if l.iter().all(|x| matches!(x, Val::Int(_))) => {
                        AttributeType::Ints
                    }
                    Val::List(_) => AttributeType::Floats,
                    _ => {
                        return Err(RhsError::NoAttributeValue {
                            attr: name.to_string(),
                            value: format!("{v:?}"),
                        })
                    }
                },
            };
            to_attribute(name, ty, &v).ok_or_else(|| RhsError::WrongValueOfType {
                attr: name.to_string(),
                ty: format!("{ty:?}"),
                value: format!("{v:?}"),
            })
        }
    }
}
