//! Building one instance of a rule's left side as a model. The pattern is walked from its
//! roots; an operator's sub-patterns are built first (their outputs are then known), then the
//! op's planner ([`super::ops`]) chooses shapes for the leaves and values for the attributes it
//! is free to choose, and the node is evaluated at once with the reference interpreter's kernels,
//! so every later choice sees real shapes and an invalid combination is rejected where it is
//! made. Value variables become graph inputs (or initializers when the guard needs them
//! constant), literals initializers, attribute variables and wildcards attributes (or constant
//! inputs, for logical parameters that are inputs at the opset).

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{ModelProto, NodeProto};
use onnx_ref::{DType, Tensor, Value};
use onnx_rules::ir::{InputPat, Literal, OpHead, OpPat, Pat, PatId, Rule, VarId};
use onnx_rules::params::{logical_params, ParamLoc};
use onnx_schema::{OpSchema, ParamOption};

use super::choice::{mix, Choices, DataOpts, SplitMix};
use super::hints::{Facts, GVal, Hints};

pub(crate) mod control;
pub(crate) mod dag;
mod function;
mod leaf;
mod node;
pub(crate) mod scope;
mod seq;

/// Tensors larger than this are not generated (instances stay small and fast).
pub(crate) const MAX_ELEMENTS: usize = 4096;

/// Why an instance was not built or not run (it does not count; not a failure).
#[derive(Debug, Clone)]
pub(crate) struct Reject(pub String);

/// An attribute (or logical parameter) value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AVal {
    Int(i64),
    Float(f64),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Str(String),
    Strs(Vec<String>),
    /// A tensor-valued attribute (ConstantOfShape's `value`).
    Tensor(Box<onnx_proto::TensorProto>),
    Absent,
}

impl AVal {
    pub fn from_literal(l: &Literal) -> AVal {
        match l {
            Literal::Int(i) => AVal::Int(*i),
            Literal::Float(f) => AVal::Float(*f),
            Literal::Str(s) => AVal::Str(s.clone()),
            Literal::Bool(b) => AVal::Int(*b as i64),
            Literal::List(items) => {
                let ints: Option<Vec<i64>> = items
                    .iter()
                    .map(|i| match i {
                        Literal::Int(x) => Some(*x),
                        _ => None,
                    })
                    .collect();
                match ints {
                    Some(v) => AVal::Ints(v),
                    None => AVal::Floats(
                        items
                            .iter()
                            .map(|i| GVal::from(i).as_f64().unwrap_or(f64::NAN))
                            .collect(),
                    ),
                }
            }
        }
    }

    /// A hint's value in the shape of an attribute.
    pub fn from_gval(g: GVal) -> AVal {
        match g {
            GVal::Int(i) => AVal::Int(i),
            GVal::DType(d) => AVal::Int(d as i64),
            GVal::Bool(b) => AVal::Int(b as i64),
            GVal::Float(f) => AVal::Float(f),
            GVal::Str(s) => AVal::Str(s),
            GVal::Absent => AVal::Absent,
            GVal::List(l) => match GVal::List(l.clone()).as_ints() {
                Some(v) => AVal::Ints(v),
                None => AVal::Floats(l.iter().filter_map(GVal::as_f64).collect()),
            },
        }
    }

    pub fn to_gval(&self) -> GVal {
        match self {
            AVal::Int(i) => GVal::Int(*i),
            AVal::Float(f) => GVal::Float(*f),
            AVal::Ints(l) => GVal::List(l.iter().map(|&i| GVal::Int(i)).collect()),
            AVal::Floats(l) => GVal::List(l.iter().map(|&f| GVal::Float(f)).collect()),
            AVal::Str(s) => GVal::Str(s.clone()),
            AVal::Strs(l) => GVal::List(l.iter().map(|s| GVal::Str(s.clone())).collect()),
            // Hints do not read tensor-valued attributes.
            AVal::Tensor(_) | AVal::Absent => GVal::Absent,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            AVal::Int(i) => Some(*i),
            AVal::Float(f) => Some(*f as i64),
            _ => None,
        }
    }

    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            AVal::Ints(l) => Some(l.clone()),
            AVal::Int(i) => Some(vec![*i]),
            _ => None,
        }
    }
}

/// Where a generated value lives in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    Input,
    Init,
    Node,
}

/// A value of the instance with its trial-0 contents.
#[derive(Debug, Clone)]
pub(crate) struct GenValue {
    pub name: String,
    /// The tensor (an empty placeholder for a sequence or an optional).
    pub tensor: Tensor,
    pub kind: ValueKind,
    pub data: DataOpts,
    /// A sequence or optional value: its type and contents (`None` for a tensor).
    pub container: Option<seq::Container>,
}

/// What a variable of the rule is bound to in the instance.
#[derive(Debug, Clone)]
pub(crate) enum Binding {
    Value(usize),
    Absent,
    Attr(AVal),
    List(Vec<usize>),
    Op(String),
    Rest,
}

/// An input position of the op being built.
#[derive(Debug, Clone)]
pub(crate) enum Slot {
    Known(usize),
    Free {
        var: Option<VarId>,
        lit: Option<Literal>,
    },
    Absent,
}

/// Where an attribute of the op being built goes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Loc {
    Attr(String),
    Input(usize),
}

/// The state of one attribute of the op being built.
#[derive(Debug, Clone)]
pub(crate) enum AState {
    Fixed(AVal),
    Free,
    Done(AVal),
}

#[derive(Debug, Clone)]
pub(crate) struct AttrSlot {
    pub name: String,
    pub loc: Loc,
    pub var: Option<VarId>,
    pub state: AState,
    pub optional: bool,
    /// Not named by the pattern (bound by `..rest`).
    pub rest: bool,
}

/// The op being built.
pub(crate) struct OpCall {
    pub op_type: String,
    pub schema: &'static OpSchema,
    pub opset: i64,
    /// Positional inputs (logical-parameter inputs excluded), in order.
    pub inputs: Vec<Slot>,
    /// Node input position of each positional input.
    pub node_pos: Vec<usize>,
    /// Formal parameter of each positional input.
    pub formal: Vec<usize>,
    pub attrs: Vec<AttrSlot>,
    pub n_outputs: usize,
    pub commutative: bool,
}

/// How a leaf is made.
#[derive(Debug, Clone, Default)]
pub(crate) struct LeafOpts {
    pub dtype: Option<DType>,
    pub positive: bool,
    pub konst: bool,
    /// Exact contents (a shape target, ...): a constant.
    pub data: Option<Tensor>,
}

/// A built instance: the left side as a model and the data of its graph inputs.
#[derive(Debug, Clone)]
pub(crate) struct Instance {
    pub model: ModelProto,
    /// Graph inputs: name, trial-0 value (a tensor, a sequence or an optional), element
    /// options.
    pub inputs: Vec<(String, Value, DataOpts)>,
    pub data_seed: u64,
    /// Draws the instance read from its choice vector.
    pub used: usize,
    /// How big the instance is (elements of its leaves, then ranks, then nodes): shrinking
    /// never makes it bigger.
    pub size: (usize, usize, usize),
}

impl Instance {
    /// The graph inputs of one trial: trial 0 is the data the instance was built with, later
    /// trials draw fresh contents of the same shapes (sequences keep their length, optionals
    /// their presence).
    pub fn trial_inputs(&self, trial: usize) -> Vec<(String, Value)> {
        let mut rng = SplitMix::new(mix(self.data_seed, trial as u64));
        self.inputs
            .iter()
            .map(|(name, v, o)| {
                let v = if trial == 0 {
                    v.clone()
                } else {
                    seq::redraw_value(&mut rng, v, o)
                };
                (name.clone(), v)
            })
            .collect()
    }
}

/// The generator of one instance.
pub(crate) struct Gen<'a> {
    pub rule: &'a Rule,
    pub hints: &'a Hints,
    pub opset: i64,
    pub dtype: DType,
    /// NaN/Inf/-0 (and integer extremes) may appear in data.
    pub special: bool,
    /// Integer extremes too (off for whole models: an extreme read as a size allocates it).
    pub special_ints: bool,
    pub ch: Choices<'a>,
    pub rng: SplitMix,
    /// Dims of this instance are drawn from here ({1, a, b} and sometimes 0).
    pub pool: Vec<usize>,
    /// A shape leaves start from when nothing else decides.
    pub base: Vec<usize>,
    pub values: Vec<GenValue>,
    pub env: Vec<Option<Binding>>,
    /// The last list value generated per attribute name (reused to make coincidences likely).
    pub lists: BTreeMap<String, Vec<i64>>,
    nodes: Vec<NodeProto>,
    domains: BTreeMap<String, i64>,
    names: BTreeSet<String>,
    by_name: BTreeMap<String, usize>,
    memo: BTreeMap<String, Vec<usize>>,
    symbolic: bool,
    /// Control flow and model-local functions (whole models only).
    nest: control::Nesting,
}

/// What a generator starts from: its rule and hints, the opset and element type, the data
/// options, the remaining choices and the dim pool.
pub(crate) struct GenStart<'a> {
    pub rule: &'a Rule,
    pub hints: &'a Hints,
    pub opset: i64,
    pub dtype: DType,
    pub special: bool,
    pub special_ints: bool,
    pub ch: Choices<'a>,
    pub data_seed: u64,
    pub pool: Vec<usize>,
    pub symbolic: bool,
}

impl<'a> Gen<'a> {
    /// A generator with nothing built yet.
    pub(crate) fn new(start: GenStart<'a>) -> Self {
        Gen {
            rule: start.rule,
            hints: start.hints,
            opset: start.opset,
            dtype: start.dtype,
            special: start.special,
            special_ints: start.special_ints,
            ch: start.ch,
            rng: SplitMix::new(start.data_seed),
            pool: start.pool,
            base: Vec::new(),
            values: Vec::new(),
            env: vec![None; start.rule.vars.len()],
            lists: BTreeMap::new(),
            nodes: Vec::new(),
            domains: BTreeMap::new(),
            names: BTreeSet::new(),
            by_name: BTreeMap::new(),
            memo: BTreeMap::new(),
            symbolic: start.symbolic,
            nest: control::Nesting::default(),
        }
    }
}

/// Builds one instance of `rule`'s left side at `opset` with element type `dtype`.
pub(crate) fn generate(
    rule: &Rule,
    hints: &Hints,
    opset: i64,
    dtype: DType,
    special: bool,
    choices: &[u32],
) -> Result<Instance, Reject> {
    let mut ch = Choices::new(choices);
    let data_seed = ch.seed();
    // Shapes computed from symbolic dims need a symbolic instance.
    let symbolic = ch.one_in(4) || !hints.nonconst.is_empty();
    let (a, b) = (2 + ch.below(4), 2 + ch.below(4));
    let mut pool = vec![1, a, b];
    if ch.one_in(4) {
        pool.push(0);
    }
    let rank = ch.pick(&[1usize, 2, 3, 0, 4, 5]);
    let mut g = Gen::new(GenStart {
        rule,
        hints,
        opset,
        dtype,
        special,
        special_ints: true,
        ch,
        data_seed,
        pool,
        symbolic,
    });
    g.base = g.shape_of_rank(rank);
    let mut roots = Vec::new();
    for &p in &rule.lhs {
        match rule.pat(p) {
            // A multi-output node as the root: every output is an output of the instance
            // (an unused output would be dropped, and the node would have fewer).
            Pat::Op(op) if op.outputs.is_some_and(|n| n > 1) => {
                roots.extend(g.gen_op_memo(p, op)?);
            }
            _ => roots.push(g.gen_pat(p)?),
        }
    }
    g.finish(&roots, data_seed)
}

impl Facts for Gen<'_> {
    fn shape(&self, v: VarId) -> Option<Vec<usize>> {
        match self.env.get(v.0 as usize)? {
            Some(Binding::Value(i)) => Some(self.values[*i].tensor.shape().to_vec()),
            _ => None,
        }
    }
    fn dtype(&self, v: VarId) -> Option<i32> {
        match self.env.get(v.0 as usize)? {
            Some(Binding::Value(i)) => Some(self.values[*i].tensor.dtype().code()),
            _ => None,
        }
    }
    fn value(&self, v: VarId) -> Option<GVal> {
        match self.env.get(v.0 as usize)? {
            Some(Binding::Attr(a)) => Some(a.to_gval()),
            Some(Binding::Absent) => Some(GVal::Absent),
            Some(Binding::Value(i)) => {
                let t = &self.values[*i].tensor;
                if self.values[*i].kind != ValueKind::Init || t.rank() > 1 {
                    return None;
                }
                let vals: Vec<GVal> = if t.dtype().is_float() {
                    t.to_f64_vec().ok()?.into_iter().map(GVal::Float).collect()
                } else {
                    t.to_i64_vec().ok()?.into_iter().map(GVal::Int).collect()
                };
                if t.rank() == 0 {
                    vals.into_iter().next()
                } else {
                    Some(GVal::List(vals))
                }
            }
            _ => None,
        }
    }
    fn opset(&self) -> i64 {
        self.opset
    }
}

/// A structural signature of a pattern: equal signatures build the same value.
fn signature(rule: &Rule, p: PatId) -> String {
    match rule.pat(p) {
        Pat::Op(op) => {
            let mut s = format!(
                "{:?}#{:?}<{:?};{:?}>(",
                op.head, op.outputs, op.attrs, op.rest
            );
            for i in &op.inputs {
                match i {
                    InputPat::Pat(q) => s.push_str(&signature(rule, *q)),
                    other => s.push_str(&format!("{other:?}")),
                }
                s.push(',');
            }
            s.push(')');
            s
        }
        Pat::Proj { tuple, index } => format!("{}.{index}", signature(rule, *tuple)),
        other => format!("{other:?}"),
    }
}

/// "tensor(float)" for a dtype.
pub(crate) fn type_str(dt: DType) -> Option<String> {
    let t = onnx_proto::tensor_proto::DataType::try_from(dt.code()).ok()?;
    onnx_schema::element_type_name(t).map(|n| format!("tensor({n})"))
}

/// The dtype of "tensor(float)".
pub(crate) fn dtype_of_type_str(s: &str) -> Option<DType> {
    let name = s.strip_prefix("tensor(")?.strip_suffix(')')?;
    let t = onnx_schema::element_type_from_name(name)?;
    DType::from_code(t as i32)
}

impl Gen<'_> {
    pub fn reject<T>(&self, why: impl Into<String>) -> Result<T, Reject> {
        Err(Reject(why.into()))
    }

    fn gen_pat(&mut self, p: PatId) -> Result<usize, Reject> {
        let rule = self.rule;
        match rule.pat(p) {
            Pat::Op(op) => Ok(self.gen_op_memo(p, op)?[0]),
            Pat::Proj { tuple, index } => {
                let Pat::Op(op) = rule.pat(*tuple) else {
                    return self.reject("a projection of a non-operator");
                };
                let outs = self.gen_op_memo(*tuple, op)?;
                match outs.get(*index) {
                    Some(&v) => Ok(v),
                    None => self.reject("projection past the outputs"),
                }
            }
            _ => self.reject("a root that is not an operator"),
        }
    }

    fn gen_op_memo(&mut self, p: PatId, op: &OpPat) -> Result<Vec<usize>, Reject> {
        let sig = signature(self.rule, p);
        if let Some(outs) = self.memo.get(&sig) {
            return Ok(outs.clone());
        }
        let outs = self.gen_op(op)?;
        self.memo.insert(sig, outs.clone());
        Ok(outs)
    }

    /// The op type an op pattern's head names (an op variable picks a member of its class).
    fn resolve_head(&mut self, op: &OpPat) -> Result<(String, String), Reject> {
        match &op.head {
            OpHead::Named(r) => Ok((r.domain.clone(), r.op_type.clone())),
            OpHead::Var { var, class } => {
                if let Some(Binding::Op(t)) = &self.env[var.0 as usize] {
                    return Ok((String::new(), t.clone()));
                }
                let members = class.map(onnx_rules::op_class_members).unwrap_or(&[]);
                let want = type_str(self.dtype).unwrap_or_default();
                let usable: Vec<&str> = members
                    .iter()
                    .copied()
                    .filter(|m| {
                        onnx_schema::registry()
                            .lookup("", m, self.opset)
                            .is_some_and(|s| {
                                s.inputs.first().is_some_and(|f| {
                                    s.allowed_types(&f.type_str)
                                        .is_some_and(|a| a.contains(&want))
                                })
                            })
                    })
                    .collect();
                if usable.is_empty() {
                    return self.reject("no member of the op class takes this dtype");
                }
                let t = usable[self.ch.below(usable.len())].to_string();
                self.env[var.0 as usize] = Some(Binding::Op(t.clone()));
                Ok((String::new(), t))
            }
        }
    }

    fn gen_op(&mut self, op: &OpPat) -> Result<Vec<usize>, Reject> {
        let (domain, op_type) = self.resolve_head(op)?;
        let reg = onnx_schema::registry();
        let opset = if domain.is_empty() {
            self.opset
        } else {
            let v = reg.max_opset(&domain).unwrap_or(1);
            self.domains.insert(domain.clone(), v);
            v
        };
        let Some(schema) = reg.lookup(&domain, &op_type, opset) else {
            return self.reject(format!("{op_type} does not exist at opset {opset}"));
        };
        if let OpHead::Named(r) = &op.head {
            if let Some((lo, hi)) = r.since {
                let sv = schema.since_version;
                if sv < lo || hi.is_some_and(|h| sv > h) {
                    return self.reject(format!("{op_type}-{sv} is outside the pattern's range"));
                }
            }
        }
        let logical = if domain.is_empty() {
            logical_params(&op_type, schema.since_version)
        } else {
            Vec::new()
        };
        let logical_slots: Vec<usize> = logical
            .iter()
            .filter_map(|p| match p.loc {
                ParamLoc::Input(k) => Some(k),
                ParamLoc::Attr(_) => None,
            })
            .collect();
        let positions: Vec<usize> = (0..schema.inputs.len())
            .filter(|k| !logical_slots.contains(k))
            .collect();
        let variadic = schema.inputs.last().map(|f| f.option) == Some(ParamOption::Variadic);
        // Inputs: sub-patterns first (their values are then known).
        let mut inputs = Vec::new();
        let mut lists: Vec<(VarId, usize, usize)> = Vec::new();
        for ip in &op.inputs {
            match ip {
                InputPat::Pat(q) => {
                    let s = self.input_slot(*q)?;
                    inputs.push(s);
                }
                InputPat::Optional(v) => {
                    let s = match &self.env[v.0 as usize] {
                        Some(Binding::Value(i)) => Slot::Known(*i),
                        Some(Binding::Absent) => Slot::Absent,
                        Some(_) => return self.reject("optional bound to a non-value"),
                        None => {
                            if self.ch.one_in(2) {
                                self.env[v.0 as usize] = Some(Binding::Absent);
                                Slot::Absent
                            } else {
                                Slot::Free {
                                    var: Some(*v),
                                    lit: None,
                                }
                            }
                        }
                    };
                    inputs.push(s);
                }
                InputPat::Variadic(v) => {
                    if let Some(Binding::List(l)) = &self.env[v.0 as usize] {
                        inputs.extend(l.iter().map(|&i| Slot::Known(i)));
                        continue;
                    }
                    let in_variadic = if variadic {
                        inputs
                            .len()
                            .saturating_sub(positions.len().saturating_sub(1))
                    } else {
                        0
                    };
                    let min = schema.inputs.last().map_or(0, |f| f.min_arity);
                    let needed = min.saturating_sub(in_variadic);
                    let count = needed.max(self.ch.below(4));
                    let start = inputs.len();
                    for _ in 0..count {
                        inputs.push(Slot::Free {
                            var: None,
                            lit: None,
                        });
                    }
                    lists.push((*v, start, inputs.len()));
                }
            }
        }
        if inputs.len() > positions.len() && !variadic {
            return self.reject(format!("{op_type}: more inputs than the schema has"));
        }
        if positions.is_empty() && !inputs.is_empty() {
            return self.reject(format!("{op_type}: no positional inputs"));
        }
        let node_pos: Vec<usize> = (0..inputs.len())
            .map(|i| {
                if i < positions.len() {
                    positions[i]
                } else {
                    positions[positions.len() - 1] + (i + 1 - positions.len())
                }
            })
            .collect();
        let formal: Vec<usize> = node_pos
            .iter()
            .map(|&p| p.min(schema.inputs.len().saturating_sub(1)))
            .collect();
        let attrs = self.attr_slots(op, schema, &logical)?;
        let mut c = OpCall {
            op_type: op_type.clone(),
            schema,
            opset,
            inputs,
            node_pos,
            formal,
            attrs,
            n_outputs: op.outputs.unwrap_or(1),
            commutative: op.commutative,
        };
        self.plan(&mut c)?;
        for (v, start, end) in lists {
            let vals: Vec<usize> = c.inputs[start..end]
                .iter()
                .filter_map(|s| match s {
                    Slot::Known(i) => Some(*i),
                    _ => None,
                })
                .collect();
            self.env[v.0 as usize] = Some(Binding::List(vals));
        }
        if let Some(r) = op.rest {
            self.env[r.0 as usize] = Some(Binding::Rest);
        }
        self.build_node(&c, &domain)
    }

    /// The slot of an input pattern; operator sub-patterns are built here.
    fn input_slot(&mut self, q: PatId) -> Result<Slot, Reject> {
        Ok(match self.rule.pat(q) {
            Pat::Var(v) => match &self.env[v.0 as usize] {
                Some(Binding::Value(i)) => Slot::Known(*i),
                Some(Binding::Absent) => Slot::Absent,
                Some(_) => return self.reject("a value variable bound to a non-value"),
                None => Slot::Free {
                    var: Some(*v),
                    lit: None,
                },
            },
            Pat::Wildcard => Slot::Free {
                var: None,
                lit: None,
            },
            Pat::Literal(l) => Slot::Free {
                var: None,
                lit: Some(l.clone()),
            },
            Pat::Absent => Slot::Absent,
            Pat::Op(_) | Pat::Proj { .. } => Slot::Known(self.gen_pat(q)?),
        })
    }

    /// The attributes a pattern names, and with `..rest` the others.
    fn attr_slots(
        &mut self,
        op: &OpPat,
        schema: &OpSchema,
        logical: &[onnx_rules::params::LogicalParam],
    ) -> Result<Vec<AttrSlot>, Reject> {
        let mut out = Vec::new();
        for (name, ap) in &op.attrs {
            let loc = match logical.iter().find(|p| p.name == name) {
                Some(p) => match p.loc {
                    ParamLoc::Attr(a) => Loc::Attr(a.to_string()),
                    ParamLoc::Input(k) => Loc::Input(k),
                },
                None => Loc::Attr(name.clone()),
            };
            let optional = match &loc {
                Loc::Attr(a) => match schema.attribute(a) {
                    Some(s) => !s.required,
                    None => return self.reject(format!("{} has no attribute {a}", schema.name)),
                },
                Loc::Input(k) => match schema.inputs.get(*k) {
                    Some(f) => f.option == ParamOption::Optional,
                    None => return self.reject(format!("{} has no input {k}", schema.name)),
                },
            };
            let (var, state) = match ap {
                onnx_rules::ir::AttrPat::Literal(l) => (None, AState::Fixed(AVal::from_literal(l))),
                onnx_rules::ir::AttrPat::Wildcard => (None, AState::Free),
                onnx_rules::ir::AttrPat::Var(v) => match &self.env[v.0 as usize] {
                    Some(Binding::Attr(a)) => (Some(*v), AState::Fixed(a.clone())),
                    Some(Binding::Absent) => (Some(*v), AState::Fixed(AVal::Absent)),
                    Some(_) => {
                        return self.reject("an attribute variable bound to a non-attribute")
                    }
                    None => (Some(*v), AState::Free),
                },
            };
            out.push(AttrSlot {
                name: name.clone(),
                loc,
                var,
                state,
                optional,
                rest: false,
            });
        }
        if op.rest.is_some() {
            // A version step is built only where the node holds no attribute the target
            // version lacks: such attributes are left absent.
            let target = step_target(self.rule, &schema.name);
            for a in &schema.attributes {
                if out.iter().any(|s| s.loc == Loc::Attr(a.name.clone())) {
                    continue;
                }
                let lacking = !a.required && target.is_some_and(|t| t.attribute(&a.name).is_none());
                out.push(AttrSlot {
                    name: a.name.clone(),
                    loc: Loc::Attr(a.name.clone()),
                    var: None,
                    state: if lacking {
                        AState::Fixed(AVal::Absent)
                    } else {
                        AState::Free
                    },
                    optional: !a.required,
                    rest: true,
                });
            }
        }
        Ok(out)
    }
}

/// In a version step, the schema the right side writes `op` at (its pinned version).
fn step_target(rule: &Rule, op: &str) -> Option<&'static OpSchema> {
    rule.step?;
    rule.terms.iter().find_map(|(t, _)| match t {
        onnx_rules::ir::Term::Op(o) => match &o.head {
            onnx_rules::ir::OpHead::Named(r) if r.op_type == op && r.domain.is_empty() => {
                let pin = r.pin?;
                onnx_schema::registry()
                    .versions("", op)
                    .iter()
                    .find(|s| s.since_version == pin)
            }
            _ => None,
        },
        _ => None,
    })
}

/// An `INT` attribute.
pub(super) fn int_attr(name: &str, v: i64) -> onnx_proto::AttributeProto {
    onnx_proto::AttributeProto {
        name: Some(name.into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}
