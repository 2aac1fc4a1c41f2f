//! Random whole models for the optimizer fuzzer ([`crate::fuzz`]): a DAG of default-domain
//! operators drawn from the schemas at a random opset, built with the prover's machinery. Each
//! node is an [`OpCall`] made from its schema (inputs read earlier values or become new leaves,
//! every attribute is free), planned by the prover's op-aware planners ([`crate::ops`]) and
//! evaluated at once, so a combination the kernels refuse is dropped where it is made and the
//! generator tries another operator. Graph inputs, initializers, `Constant` nodes, values read
//! by several nodes, several outputs (sinks and intermediate values), a graph input or an
//! initializer as an output, symbolic dims and dims of 0 and 1 all occur. One model in four
//! may also hold If, Loop and Scan nodes and model-local functions ([`super::control`]), and
//! about one in five (from opset 11) chains of sequence and optional values ([`super::seq`]).

use std::collections::BTreeSet;
use std::sync::OnceLock;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, ModelProto, NodeProto};
use onnx_ref::DType;
use onnx_rules::ir::Rule;
use onnx_rules::params::{logical_params, ParamLoc};
use onnx_schema::{OpSchema, ParamOption};

use super::scope::outer_reads;
use super::{
    dtype_of_type_str, AState, AVal, AttrSlot, Gen, GenStart, GenValue, Instance, Loc, OpCall,
    Reject, Slot, ValueKind,
};
use crate::choice::{mix, random_tensor, Choices, DataOpts};
use crate::hints::Hints;

/// Operators never drawn from their schemas: their attributes are subgraphs (If, Loop and Scan
/// are built by [`super::control`], SequenceMap by [`super::seq`] with the other sequence
/// operators), or they are written by the generator itself (Constant).
const SKIPPED: &[&str] = &["If", "Loop", "Scan", "SequenceMap", "Constant"];

/// Nondeterministic operators: their outputs are compared by type only.
pub(crate) const RANDOM_OPS: &[&str] = &[
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Bernoulli",
    "Multinomial",
];

/// Element types a model's main dtype is drawn from (float weighted).
const MODEL_DTYPES: [DType; 7] = [
    DType::Float,
    DType::Float,
    DType::Float,
    DType::Double,
    DType::Float16,
    DType::Int64,
    DType::Int32,
];

/// A generated model with the data of its graph inputs.
pub(crate) struct DagModel {
    pub model: ModelProto,
    pub instance: Instance,
}

/// The rule the generator's context needs (no variable of it is used).
fn model_rule() -> &'static Rule {
    static RULE: OnceLock<Rule> = OnceLock::new();
    RULE.get_or_init(|| {
        let text = "# fuzz\n\n# x == x\nrule fuzz [exact]: Identity(x) => x\n";
        let file = onnx_rules::parse_rules("fuzz.rules", text, &Default::default())
            .expect("the fuzzer's placeholder rule parses");
        file.rules.into_iter().next().expect("one rule")
    })
}

fn no_hints() -> &'static Hints {
    static HINTS: OnceLock<Hints> = OnceLock::new();
    HINTS.get_or_init(Hints::default)
}

/// Whether the generator can build the schema's op: tensor inputs and outputs, and no required
/// attribute of a kind it cannot write.
fn generable(s: &OpSchema) -> bool {
    if s.deprecated || SKIPPED.contains(&s.name.as_str()) {
        return false;
    }
    let tensor_formal = |f: &onnx_schema::FormalParameter| {
        f.type_str.starts_with("tensor(")
            || s.allowed_types(&f.type_str)
                .is_some_and(|a| a.iter().any(|t| dtype_of_type_str(t).is_some()))
    };
    s.inputs.iter().chain(&s.outputs).all(tensor_formal)
        && s.attributes.iter().all(|a| {
            !a.required
                || matches!(
                    a.ty,
                    AttributeType::Int
                        | AttributeType::Ints
                        | AttributeType::Float
                        | AttributeType::Floats
                        | AttributeType::String
                )
        })
}

/// The default-domain operators the generator draws from at `opset`, sorted.
pub(crate) fn candidate_ops(opset: i64) -> Vec<&'static str> {
    let reg = onnx_schema::registry();
    let mut ops: Vec<&'static str> = reg
        .op_types("")
        .filter(|op| reg.lookup("", op, opset).is_some_and(generable))
        .collect();
    ops.sort_unstable();
    ops.dedup();
    ops
}

/// Builds one random model from a choice vector (at most `max_nodes` operator nodes).
pub(crate) fn generate_model(choices: &[u32], max_nodes: usize) -> Result<DagModel, Reject> {
    let mut ch = Choices::new(choices);
    let data_seed = ch.seed();
    let reg = onnx_schema::registry();
    let latest = reg.max_opset("").unwrap_or(21);
    let opset = 7 + ch.below((latest - 6).max(1) as usize) as i64;
    let dtype = ch.pick(&MODEL_DTYPES);
    let symbolic = ch.one_in(4);
    let special = ch.one_in(4);
    let (a, b) = (2 + ch.below(4), 2 + ch.below(4));
    let mut pool = vec![1, a, b];
    if ch.one_in(5) {
        pool.push(0);
    }
    let rank = ch.pick(&[2usize, 3, 1, 4, 0, 2, 3]);
    // About one model in five (from opset 11) has chains of sequence and optional operators.
    let containers = opset >= 11 && ch.one_in(5);
    let mut g = Gen::new(GenStart {
        rule: model_rule(),
        hints: no_hints(),
        opset,
        dtype,
        special,
        special_ints: false,
        ch,
        data_seed,
        pool,
        symbolic,
    });
    g.base = g.shape_of_rank(rank);
    let base = g.base.clone();
    g.add_leaf(base, dtype, ValueKind::Input, "x")?;
    for _ in 0..g.ch.below(3) {
        let shape = g.broadcast_variant(&g.base.clone());
        let d = if g.ch.one_in(4) {
            g.ch.pick(&[DType::Int64, DType::Float, DType::Bool])
        } else {
            dtype
        };
        let kind = if g.ch.one_in(3) {
            ValueKind::Init
        } else {
            ValueKind::Input
        };
        g.add_leaf(
            shape,
            d,
            kind,
            if kind == ValueKind::Init { "w" } else { "x" },
        )?;
    }
    g.nest.ops = candidate_ops(opset);
    // Decided from the data seed, not a draw: a model without control flow reads the same
    // draws as before control flow existed.
    g.nest.enabled = mix(data_seed, 0xc0).is_multiple_of(4);
    let target = 1 + g.ch.below(max_nodes.max(1));
    g.nest.containers = containers;
    let built = g.random_nodes(target);
    if built == 0 {
        return g.reject("no node could be built");
    }
    let (model, instance) = g.finish_model(data_seed)?;
    Ok(DagModel { model, instance })
}

/// How far the generator got, to roll back a node that could not be built.
pub(super) struct Mark {
    values: usize,
    nodes: usize,
    names: BTreeSet<String>,
    functions: usize,
}

impl Gen<'_> {
    pub(super) fn mark(&self) -> Mark {
        Mark {
            values: self.values.len(),
            nodes: self.nodes.len(),
            names: self.names.clone(),
            functions: self.functions_defined(),
        }
    }

    pub(super) fn rollback(&mut self, m: Mark) {
        for v in self.values.drain(m.values..) {
            self.by_name.remove(&v.name);
        }
        self.nodes.truncate(m.nodes);
        self.names = m.names;
        self.forget_functions(m.functions);
    }

    pub(super) fn add_leaf(
        &mut self,
        shape: Vec<usize>,
        dtype: DType,
        kind: ValueKind,
        base: &str,
    ) -> Result<usize, Reject> {
        let data = DataOpts {
            special: self.special && kind == ValueKind::Input && dtype.is_float(),
            ..Default::default()
        };
        let Some(tensor) = random_tensor(&mut self.rng, dtype, &shape, &data) else {
            return self.reject(format!("cannot generate {}", dtype.name()));
        };
        let name = self.fresh_name(base);
        Ok(self.push_value(GenValue {
            name,
            tensor,
            kind,
            data,
            container: None,
        }))
    }

    /// A `Constant` node holding a small random tensor.
    pub(super) fn add_constant_node(&mut self) -> Result<(), Reject> {
        // Constant-1 holds floating types only.
        let d = if self.opset < 9 {
            self.ch.pick(&[DType::Float, DType::Double])
        } else {
            self.ch.pick(&[self.dtype, DType::Int64, DType::Float])
        };
        let shape = if self.ch.one_in(2) {
            Vec::new()
        } else {
            let b = self.base.clone();
            self.broadcast_variant(&b)
        };
        let data = DataOpts::default();
        let Some(tensor) = random_tensor(&mut self.rng, d, &shape, &data) else {
            return self.reject("cannot generate a constant");
        };
        let name = self.fresh_name("k");
        let attr = AttributeProto {
            name: Some("value".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(tensor.to_proto("")),
            ..Default::default()
        };
        self.nodes.push(NodeProto {
            output: vec![name.clone()],
            op_type: Some("Constant".into()),
            attribute: vec![attr],
            ..Default::default()
        });
        self.push_value(GenValue {
            name,
            tensor,
            kind: ValueKind::Node,
            data,
            container: None,
        });
        Ok(())
    }

    /// The element types formal input `k` may take, given the inputs chosen so far.
    fn formal_dtypes(&self, schema: &OpSchema, k: usize, inputs: &[(Slot, usize)]) -> Vec<DType> {
        let f = &schema.inputs[k];
        if let Some(d) = dtype_of_type_str(&f.type_str) {
            return vec![d];
        }
        for (s, j) in inputs {
            if let Slot::Known(v) = s {
                if schema.inputs[*j].type_str == f.type_str {
                    return vec![self.values[*v].tensor.dtype()];
                }
            }
        }
        schema
            .allowed_types(&f.type_str)
            .map(|a| a.iter().filter_map(|t| dtype_of_type_str(t)).collect())
            .unwrap_or_default()
    }

    /// An earlier value for input `k` (its type allowed; beside a known operand, a shape that
    /// broadcasts with it) when `reuse`, or a new leaf left to the planner.
    fn choose_input(
        &mut self,
        schema: &OpSchema,
        k: usize,
        inputs: &[(Slot, usize)],
        reuse: bool,
    ) -> Slot {
        let free = Slot::Free {
            var: None,
            lit: None,
        };
        if !reuse {
            return free;
        }
        let first = !inputs.iter().any(|(s, _)| matches!(s, Slot::Known(_)));
        let reuse = if first {
            !self.ch.one_in(8)
        } else {
            self.ch.one_in(3)
        };
        if !reuse {
            return free;
        }
        let dtypes = self.formal_dtypes(schema, k, inputs);
        let reference = inputs.iter().find_map(|(s, _)| match s {
            Slot::Known(v) => Some(self.values[*v].tensor.shape().to_vec()),
            _ => None,
        });
        let candidates: Vec<usize> = (0..self.values.len())
            .filter(|&v| self.values[v].container.is_none())
            .filter(|&v| dtypes.contains(&self.values[v].tensor.dtype()))
            .filter(|&v| {
                reference
                    .as_ref()
                    .is_none_or(|r| broadcasts(r, self.values[v].tensor.shape()))
            })
            .collect();
        if candidates.is_empty() {
            return free;
        }
        // Recent values first: deeper graphs.
        let recent = &candidates[candidates.len().saturating_sub(6)..];
        let pick = if self.ch.one_in(3) {
            candidates[self.ch.below(candidates.len())]
        } else {
            recent[self.ch.below(recent.len())]
        };
        Slot::Known(pick)
    }

    /// Adds one node of `op_type` from its schema: inputs (earlier values among them when
    /// `reuse`), attributes, outputs.
    pub(super) fn add_schema_node(&mut self, op_type: &str, reuse: bool) -> Result<(), Reject> {
        let Some(schema) = onnx_schema::registry().lookup("", op_type, self.opset) else {
            return self.reject(format!("{op_type} does not exist"));
        };
        let logical = logical_params(op_type, schema.since_version);
        let logical_slots: Vec<usize> = logical
            .iter()
            .filter_map(|p| match p.loc {
                ParamLoc::Input(k) => Some(k),
                ParamLoc::Attr(_) => None,
            })
            .collect();
        let mut chosen: Vec<(Slot, usize)> = Vec::new();
        let mut node_pos = Vec::new();
        for k in (0..schema.inputs.len()).filter(|k| !logical_slots.contains(k)) {
            let f = &schema.inputs[k];
            let count = match f.option {
                ParamOption::Single => 1,
                ParamOption::Optional => usize::from(self.ch.one_in(2)),
                ParamOption::Variadic => f.min_arity.max(1) + self.ch.below(3),
            };
            if count == 0 {
                chosen.push((Slot::Absent, k));
                node_pos.push(k);
            }
            for j in 0..count {
                let s = self.choose_input(schema, k, &chosen, reuse);
                chosen.push((s, k));
                node_pos.push(k + j);
            }
        }
        let mut attrs = Vec::new();
        for p in &logical {
            if let ParamLoc::Input(k) = p.loc {
                attrs.push(AttrSlot {
                    name: p.name.to_string(),
                    loc: Loc::Input(k),
                    var: None,
                    state: AState::Free,
                    optional: schema.inputs[k].option == ParamOption::Optional,
                    rest: false,
                });
            }
        }
        for a in &schema.attributes {
            attrs.push(AttrSlot {
                name: a.name.clone(),
                loc: Loc::Attr(a.name.clone()),
                var: None,
                state: AState::Free,
                optional: !a.required,
                rest: true,
            });
        }
        let variadic_out = schema.outputs.last().map(|f| f.option) == Some(ParamOption::Variadic);
        let n_outputs = if variadic_out {
            1 + self.ch.below(3)
        } else if schema.max_output > schema.min_output && self.ch.one_in(3) {
            schema.max_output
        } else {
            schema.min_output.max(1)
        };
        let (inputs, formal): (Vec<Slot>, Vec<usize>) = chosen.into_iter().unzip();
        let mut c = OpCall {
            op_type: op_type.to_string(),
            schema,
            opset: self.opset,
            inputs,
            node_pos,
            formal,
            attrs,
            n_outputs,
            commutative: false,
        };
        self.preset_attrs(&mut c);
        self.plan(&mut c)?;
        self.build_node(&c, "")?;
        Ok(())
    }

    /// Attributes the prover's planners do not choose: the shape and dtype of random ops, and
    /// sometimes a non-default value for other optional attributes (by type).
    fn preset_attrs(&mut self, c: &mut OpCall) {
        if RANDOM_OPS.contains(&c.op_type.as_str()) {
            let shape: Vec<i64> = self.base.iter().map(|&d| d as i64).collect();
            self.free_attr_or(c, "shape", AVal::Ints(shape));
            let d = self.ch.pick(&[DType::Float, DType::Double]);
            let dv = if self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Int(d.code() as i64)
            };
            self.free_attr_or(c, "dtype", dv);
            let seed = if self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Float(self.ch.below(100) as f64)
            };
            self.free_attr_or(c, "seed", seed);
        }
        let rank = match c.inputs.first() {
            Some(Slot::Known(k)) => self.values[*k].tensor.rank(),
            _ => self.base.len(),
        };
        let spatial = rank.saturating_sub(2);
        if spatial > 0 {
            let ks: Vec<i64> = (0..spatial).map(|_| 1 + self.ch.below(2) as i64).collect();
            self.free_attr_or(c, "kernel_shape", AVal::Ints(ks));
        }
        let bs = self.ch.pick(&[1, 2]);
        self.free_attr_or(c, "blocksize", AVal::Int(bs));
        for ai in 0..c.attrs.len() {
            let a = &c.attrs[ai];
            if !matches!(a.state, AState::Free) || !a.optional || !self.ch.one_in(4) {
                continue;
            }
            let Loc::Attr(name) = &a.loc else { continue };
            let Some(ty) = c.schema.attribute(name).map(|s| s.ty) else {
                continue;
            };
            let name = name.clone();
            let v = match ty {
                AttributeType::Int => AVal::Int(self.ch.pick(&[0, 1, 2])),
                AttributeType::Float => AVal::Float(self.ch.pick(&[0.5, 1.0, 2.0])),
                _ => continue,
            };
            // Element type codes (`to`, `stash_type`, ...): 0, 1, 2 are undefined, float,
            // uint8, which few of these attributes allow; their planners or defaults decide.
            if !matches!(
                name.as_str(),
                "axis"
                    | "to"
                    | "keepdims"
                    | "epsilon"
                    | "alpha"
                    | "beta"
                    | "gamma"
                    | "seed"
                    | "dtype"
                    | "stash_type"
                    | "output_dtype"
                    | "output_datatype"
                    | "precision"
                    | "softmax_precision"
            ) {
                self.set_attr(c, &name, v);
            }
        }
    }

    /// The model: sinks and some intermediate values as outputs, sometimes a graph input or
    /// an initializer too.
    fn finish_model(mut self, data_seed: u64) -> Result<(ModelProto, Instance), Reject> {
        let read: BTreeSet<String> = self
            .nodes
            .iter()
            .flat_map(|n| n.input.iter().cloned().chain(outer_reads(n)))
            .collect();
        let mut outputs: Vec<usize> = Vec::new();
        for k in 0..self.values.len() {
            let v = &self.values[k];
            if v.kind != ValueKind::Node {
                continue;
            }
            let sink = !read.contains(&v.name);
            let take = if sink {
                !self.ch.one_in(8)
            } else {
                self.ch.one_in(8)
            };
            if take {
                outputs.push(k);
            }
        }
        if self.ch.one_in(6) {
            if let Some(k) = self.values.iter().position(|v| v.kind == ValueKind::Input) {
                outputs.push(k);
            }
        }
        if self.ch.one_in(10) {
            if let Some(k) = self.values.iter().position(|v| v.kind == ValueKind::Init) {
                outputs.push(k);
            }
        }
        if !outputs
            .iter()
            .any(|&k| self.values[k].kind == ValueKind::Node)
        {
            match self.values.iter().rposition(|v| v.kind == ValueKind::Node) {
                Some(k) => outputs.push(k),
                None => return self.reject("no node output"),
            }
        }
        let (ir, mut graph, inputs) = self.graph_of_leaves("fuzz");
        if inputs.is_empty() {
            return self.reject("no graph input");
        }
        // Some exporters declare an unknown dim as -1 (onnx's checker accepts it).
        if self.symbolic && self.ch.one_in(6) {
            use onnx_proto::tensor_shape_proto::dimension::Value as Dim;
            for vi in &mut graph.input {
                let Some(onnx_proto::type_proto::Value::TensorType(t)) =
                    vi.r#type.as_mut().and_then(|t| t.value.as_mut())
                else {
                    continue;
                };
                for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
                    if matches!(d.value, Some(Dim::DimParam(_))) {
                        d.value = Some(Dim::DimValue(-1));
                    }
                }
            }
        }
        // A dim named as arithmetic of others that it does not equal (`n2 + n2` for a dim of
        // 3): ONNX gives a dim's name no arithmetic, so nothing may be derived from it. The
        // optimizer's check draws such a name as the sum first (Optimum names an attention
        // mask `past_sequence_length + sequence_length`); the trials here keep its real size.
        if self.symbolic && self.ch.one_in(5) {
            rename_a_dim_as_a_sum(&mut graph);
        }
        for &k in &outputs {
            let symbolic = self.symbolic && self.values[k].kind == ValueKind::Input;
            graph.output.push(self.value_info(k, symbolic));
        }
        let model = ModelProto {
            ir_version: Some(self.ir_with_functions(ir)),
            opset_import: self.opset_imports(),
            producer_name: Some("onnx-opt fuzz".into()),
            graph: Some(graph),
            functions: self.function_protos(),
            ..Default::default()
        };
        let size = (0, 0, model.graph.as_ref().map_or(0, |g| g.node.len()));
        let instance = Instance {
            model: model.clone(),
            inputs,
            data_seed,
            used: self.ch.used(),
            size,
        };
        Ok((model, instance))
    }
}

/// Renames the graph inputs' largest symbolic dim `nD` to `nA + nA`, for the smallest other
/// symbolic dim `nA` with 2A != D, everywhere it occurs (dims named alike stay alike). Nothing
/// when the inputs have fewer than two symbolic dims.
fn rename_a_dim_as_a_sum(graph: &mut onnx_proto::GraphProto) {
    use onnx_proto::tensor_shape_proto::dimension::Value as Dim;
    let mut sizes: Vec<i64> = Vec::new();
    for vi in &graph.input {
        let Some(onnx_proto::type_proto::Value::TensorType(t)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        for d in t.shape.iter().flat_map(|s| s.dim.iter()) {
            if let Some(Dim::DimParam(p)) = &d.value {
                if let Some(k) = p.strip_prefix('n').and_then(|k| k.parse::<i64>().ok()) {
                    if !sizes.contains(&k) {
                        sizes.push(k);
                    }
                }
            }
        }
    }
    sizes.sort_unstable();
    let Some(&largest) = sizes.last() else { return };
    let Some(&other) = sizes.iter().find(|&&a| a != largest && 2 * a != largest) else {
        return;
    };
    let (from, to) = (format!("n{largest}"), format!("n{other} + n{other}"));
    for vi in &mut graph.input {
        let Some(onnx_proto::type_proto::Value::TensorType(t)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
            if matches!(&d.value, Some(Dim::DimParam(p)) if *p == from) {
                d.value = Some(Dim::DimParam(to.clone()));
            }
        }
    }
}

/// Whether shapes `a` and `b` broadcast together (numpy rules).
fn broadcasts(a: &[usize], b: &[usize]) -> bool {
    a.iter()
        .rev()
        .zip(b.iter().rev())
        .all(|(&x, &y)| x == y || x == 1 || y == 1)
}
