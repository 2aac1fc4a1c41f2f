//! The one op builder: lifting, rules and version conversion all add operator e-nodes through
//! [`OpBuilder`], so a node a rule builds hash-conses with a lifted node of the same schema.
//!
//! The builder looks up the schema, lays the attributes out in schema order with defaults
//! filled in (attributes the schema does not know follow, by name), pads absent optional inputs
//! with `None` leaves to the schema's arity, appends the outer-scope values read by subgraphs
//! (sorted by name), marks nondeterministic ops with a fresh `Unique` leaf, and decides whether
//! the e-node denotes a tuple. Children are given by role (attribute name, input slot,
//! outer-scope name), never by raw child index. A literal given for an input becomes a constant
//! of the element type its slot takes (`literal_input`).
//!
//! Layer: above `analysis`, `lang`, `tables` and `value`; below `lift`, `rules` and `convert`,
//! which it never imports.

use std::collections::BTreeMap;

use egg::Id;
use onnx_proto::AttributeProto;
use onnx_schema::{NodeDeterminism, OpSchema, ParamOption};

use crate::analysis::OnnxEGraph;
use crate::lang::{NodeKind, ONode, OpId};
use crate::tables::OpInfo;
use crate::value::{to_tensor, Val};
use crate::EGraphError;

/// Whether the number of outputs a node has is part of what it computes, so unread trailing
/// outputs are kept: variadic outputs (Split without sizes splits evenly into as many parts as it
/// has outputs), and BatchNormalization before 14, which is in training mode (batch statistics)
/// when it has its optional outputs, read or not.
pub fn output_count_is_meaning(s: &onnx_schema::OpSchema) -> bool {
    s.outputs.last().map(|f| f.option) == Some(onnx_schema::ParamOption::Variadic)
        || (s.name == "BatchNormalization" && s.since_version < 14)
}

/// How many outputs a node must write for runtimes to run it where the spec makes them
/// optional (0: no such need), given which inputs it has. Attention with a `past_key` (input
/// 4): onnxruntime's CPU kernel refuses the node without `present_key` and `present_value`
/// ("does not support past_key provided and present_key being null"), so they are written,
/// unread, when the graph reads neither.
pub(crate) fn outputs_runtimes_need(
    s: &onnx_schema::OpSchema,
    has_input: impl Fn(usize) -> bool,
) -> usize {
    match (s.domain.as_str(), s.name.as_str()) {
        ("", "Attention") if has_input(4) => 3,
        _ => 0,
    }
}

/// Names of ops whose result is not a function of their inputs, whatever a schema says.
pub const RANDOM_OPS: &[&str] = &[
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Bernoulli",
    "Multinomial",
];

/// onnxruntime's contrib ops whose outputs are random (its schemas leave every op's
/// determinism unknown; the others compute a function of their inputs, so two equal nodes are
/// one value).
pub const ONNXRUNTIME_RANDOM_OPS: &[&str] = &[
    "BiasDropout",
    "BitmaskBiasDropout",
    "BitmaskDropout",
    "Sampling",
];

/// An attribute given to the builder: a value, or an existing attribute class.
#[derive(Debug, Clone)]
pub enum AttrArg {
    Proto(Box<AttributeProto>),
    Class(Id),
}

/// Builds one operator e-node. See the module documentation.
#[derive(Debug, Clone)]
pub struct OpBuilder {
    domain: String,
    op_type: String,
    schema: Option<&'static OpSchema>,
    since_version: i64,
    attrs: BTreeMap<String, AttrArg>,
    inputs: Vec<Option<Id>>,
    outer: BTreeMap<String, Id>,
    n_outputs: Option<usize>,
    strict: bool,
}

impl OpBuilder {
    /// An op bound at a domain's opset version (the schema with the highest since_version not
    /// above it). Ops without a schema (custom domains) are built as given.
    pub fn at_opset(domain: &str, op_type: &str, opset: i64) -> Self {
        let domain = onnx_schema::normalize_domain(domain).to_string();
        let schema = onnx_schema::registry().lookup(&domain, op_type, opset);
        OpBuilder {
            since_version: schema.map_or(opset, |s| s.since_version),
            domain,
            op_type: op_type.to_string(),
            schema,
            attrs: BTreeMap::new(),
            inputs: Vec::new(),
            outer: BTreeMap::new(),
            n_outputs: None,
            strict: true,
        }
    }

    /// Lifting keeps attributes a schema does not know (the checker reports them); rules and
    /// conversion are strict (an unknown attribute is an error).
    pub(crate) fn lenient(mut self) -> Self {
        self.strict = false;
        self
    }

    /// The schema the op binds to, if any.
    pub fn schema(&self) -> Option<&'static OpSchema> {
        self.schema
    }

    /// Sets an attribute by name.
    pub fn attr(mut self, name: &str, value: AttrArg) -> Self {
        self.attrs.insert(name.to_string(), value);
        self
    }

    /// Sets input `slot` (absent inputs before it stay absent).
    pub fn input(mut self, slot: usize, value: Option<Id>) -> Self {
        if self.inputs.len() <= slot {
            self.inputs.resize(slot + 1, None);
        }
        self.inputs[slot] = value;
        self
    }

    /// Appends an input after the ones given.
    pub fn push_input(mut self, value: Option<Id>) -> Self {
        self.inputs.push(value);
        self
    }

    /// An outer-scope value read by one of the op's subgraphs.
    pub fn outer(mut self, name: &str, value: Id) -> Self {
        self.outer.insert(name.to_string(), value);
        self
    }

    /// The number of outputs (default: the schema's minimum, at least one).
    pub fn outputs(mut self, n: usize) -> Self {
        self.n_outputs = Some(n);
        self
    }

    /// Adds the e-node; returns its class (a tuple class when the op has several outputs) and
    /// the e-node as added.
    pub fn add_to(self, egraph: &mut OnnxEGraph) -> Result<(Id, ONode), EGraphError> {
        let schema = self.schema;
        let mut layout: Vec<(String, Option<AttributeProto>)> = Vec::new();
        if let Some(s) = schema {
            for a in &s.attributes {
                layout.push((a.name.clone(), a.default.clone()));
            }
        }
        for name in self.attrs.keys() {
            if !layout.iter().any(|(l, _)| l == name) {
                if self.strict && schema.is_some() {
                    return Err(EGraphError::Build {
                        op: self.op_type.clone(),
                        message: format!(
                            "no attribute '{name}' at since_version {}",
                            self.since_version
                        ),
                    });
                }
                layout.push((name.clone(), None));
            }
        }
        let none = egraph.add(ONode::leaf(NodeKind::None));
        let mut children = Vec::with_capacity(layout.len() + self.inputs.len());
        for (name, default) in &layout {
            let id = match self.attrs.get(name) {
                Some(AttrArg::Class(c)) => *c,
                Some(AttrArg::Proto(p)) => {
                    let a = egraph.analysis.attrs.intern((**p).clone());
                    egraph.add(ONode::leaf(NodeKind::Attr(a)))
                }
                None => match default {
                    Some(p) => {
                        let a = egraph.analysis.attrs.intern(p.clone());
                        egraph.add(ONode::leaf(NodeKind::Attr(a)))
                    }
                    None => none,
                },
            };
            children.push(id);
        }
        let variadic = schema
            .and_then(|s| s.inputs.last())
            .is_some_and(|p| p.option == ParamOption::Variadic);
        let n_inputs = match schema {
            Some(s) if !variadic => s.inputs.len().max(self.inputs.len()),
            _ => self.inputs.len(),
        };
        if self.strict {
            if let Some(s) = schema {
                if self.inputs.len() > s.max_input {
                    return Err(EGraphError::Build {
                        op: self.op_type.clone(),
                        message: format!(
                            "{} inputs given, the schema takes at most {}",
                            self.inputs.len(),
                            s.max_input
                        ),
                    });
                }
            }
        }
        for i in 0..n_inputs {
            children.push(self.inputs.get(i).copied().flatten().unwrap_or(none));
        }
        let implicit: Vec<String> = self.outer.keys().cloned().collect();
        children.extend(self.outer.values().copied());
        let nondeterministic = RANDOM_OPS.contains(&self.op_type.as_str())
            || match schema {
                // onnxruntime's schemas classify no op: its random ones are named.
                Some(s) if s.is_onnxruntime() && s.node_determinism == NodeDeterminism::Unknown => {
                    ONNXRUNTIME_RANDOM_OPS.contains(&self.op_type.as_str())
                }
                Some(s) => s.node_determinism != NodeDeterminism::Deterministic,
                None => true,
            };
        if nondeterministic {
            let u = egraph.analysis.next_unique;
            egraph.analysis.next_unique += 1;
            children.push(egraph.add(ONode::leaf(NodeKind::Unique(u))));
        }
        let n_outputs = self
            .n_outputs
            .unwrap_or_else(|| schema.map_or(1, |s| s.min_output.max(1)));
        let is_tuple = n_outputs > 1 || schema.is_some_and(|s| s.max_output > 1);
        let info = OpInfo {
            domain: self.domain,
            op_type: self.op_type,
            since_version: self.since_version,
            attr_names: layout.into_iter().map(|(n, _)| n).collect(),
            n_inputs,
            implicit_inputs: implicit,
            n_outputs,
            min_outputs: schema.map_or(n_outputs, |s| s.min_output),
            is_tuple,
            nondeterministic,
            has_schema: schema.is_some(),
        };
        let op: OpId = egraph.analysis.ops.intern(info);
        let enode = ONode::new(NodeKind::Op(op), children);
        let id = egraph.add(enode.clone());
        Ok((id, enode))
    }
}

/// Children of an op e-node by role.
pub struct Roles<'a> {
    pub info: &'a OpInfo,
    pub children: &'a [Id],
}

impl<'a> Roles<'a> {
    pub fn new(info: &'a OpInfo, children: &'a [Id]) -> Self {
        Roles { info, children }
    }
    /// The attribute class of this name.
    pub fn attr(&self, name: &str) -> Option<Id> {
        let i = self.info.attr_names.iter().position(|n| n == name)?;
        self.children.get(i).copied()
    }
    /// The regular inputs (absent ones are `None` leaves).
    pub fn inputs(&self) -> &'a [Id] {
        let a = self.info.attr_names.len();
        &self.children[a..a + self.info.n_inputs]
    }
    /// Input `slot`.
    pub fn input(&self, slot: usize) -> Option<Id> {
        self.inputs().get(slot).copied()
    }
    /// The outer-scope values read by subgraphs, by name.
    pub fn outer(&self) -> impl Iterator<Item = (&'a str, Id)> + 'a {
        let start = self.info.attr_names.len() + self.info.n_inputs;
        self.info
            .implicit_inputs
            .iter()
            .map(|s| s.as_str())
            .zip(self.children[start..].iter().copied())
    }
}

/// A constant for a literal given in input `slot` of an op: its element type is the slot's
/// when the schema fixes it, else the one of an input already given for the same type
/// parameter (`Add(x, 1)`: `1` in `x`'s type).
pub(crate) fn literal_input(
    eg: &mut OnnxEGraph,
    schema: &onnx_schema::OpSchema,
    slot: usize,
    v: &Val,
    given: &BTreeMap<usize, Option<Id>>,
) -> Result<Id, crate::RhsError> {
    use crate::RhsError;
    let op_type = &schema.name;
    let type_str = |s: usize| -> Option<String> {
        let f = schema
            .inputs
            .get(s.min(schema.inputs.len().checked_sub(1)?))?;
        Some(f.type_str.clone())
    };
    let ts = type_str(slot).ok_or(RhsError::LiteralSlot)?;
    let dtype = if let Some(inner) = ts.strip_prefix("tensor(").and_then(|x| x.strip_suffix(')')) {
        onnx_schema::element_type_from_name(inner).map(|d| d as i32)
    } else {
        // An input given for the same type parameter fixes it; one whose type is not known
        // leaves the literal's type unknown (guessing float would merge values of two types).
        let mut unknown = false;
        let from_given = given.iter().find_map(|(&o, id)| {
            let id = (*id)?;
            if type_str(o).as_deref() != Some(ts.as_str()) {
                return None;
            }
            let e = eg[id]
                .data
                .ty
                .as_ref()
                .and_then(onnx_schema::infer::elem_type_of)
                .filter(|&e| e != 0);
            unknown |= e.is_none();
            e
        });
        match (from_given, unknown) {
            (Some(e), _) => Some(e),
            (None, true) => None,
            (None, false) => constraint_type(schema, &ts, v),
        }
    }
    .ok_or_else(|| RhsError::LiteralType {
        op: op_type.clone(),
    })?;
    // A logical parameter whose input is a 1-element tensor where its attribute was a scalar.
    let wrapped;
    let v = match v {
        Val::Int(_) if onnx_rules::params::one_element_input(op_type, slot) => {
            wrapped = Val::List(vec![v.clone()]);
            &wrapped
        }
        _ => v,
    };
    let t = to_tensor(v, dtype).ok_or_else(|| RhsError::LiteralDoesNotFit {
        value: format!("{v:?}"),
    })?;
    let k = eg.analysis.consts.intern(t);
    Ok(eg.add(ONode::leaf(NodeKind::Const(k))))
}

/// The element type of a literal whose type parameter no given input fixes (Slice's `starts`
/// from an attribute, Dropout's `ratio`): the constraint's one type, or int64 for integers and
/// float for other numbers where the constraint allows them.
fn constraint_type(schema: &onnx_schema::OpSchema, type_param: &str, v: &Val) -> Option<i32> {
    let allowed = &schema
        .type_constraints
        .iter()
        .find(|t| t.type_param == type_param)?
        .allowed;
    let code = |name: &str| {
        let inner = name.strip_prefix("tensor(")?.strip_suffix(')')?;
        onnx_schema::element_type_from_name(inner).map(|d| d as i32)
    };
    if let [only] = allowed.as_slice() {
        return code(only);
    }
    let integral = |x: &Val| matches!(x, Val::Int(_) | Val::Bool(_));
    let is_int = match v {
        Val::List(l) => l.iter().all(integral),
        other => integral(other),
    };
    let preferred = if is_int {
        "tensor(int64)"
    } else {
        "tensor(float)"
    };
    allowed
        .iter()
        .find(|t| t.as_str() == preferred)
        .and_then(|t| code(t))
}
