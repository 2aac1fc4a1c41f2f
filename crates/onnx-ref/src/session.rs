//! The executor: a `Session` plans a model once (kernel lookup, topological order, value slots,
//! last uses, initializers decoded) and then runs it on inputs, freeing each intermediate after
//! its last use. Graphs are planned against a parent scope so that subgraphs (If/Loop/Scan
//! bodies) can read outer values through a `Scope` chain.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{type_proto, GraphProto, ModelProto, NodeProto, ValueInfoProto};

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::registry::{
    builtin_registry, lookup_kernel, normalize_domain, run_kernel, KernelCtx, KernelFn,
    KernelRegistry,
};
use crate::tensor::Tensor;
use crate::value::Value;

/// Opset version per domain (`""` for the default domain).
pub type Opsets = BTreeMap<String, i64>;

/// The opset imports of a model, domains normalized.
pub fn model_opsets(model: &ModelProto) -> Opsets {
    let mut out = Opsets::new();
    for o in &model.opset_import {
        let domain = normalize_domain(o.domain.as_deref().unwrap_or("")).to_string();
        out.insert(domain, o.version.unwrap_or(1));
    }
    out
}

/// Values visible to a graph from its enclosing graphs, innermost first.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    values: &'a BTreeMap<String, Value>,
    parent: Option<&'a Scope<'a>>,
}

impl<'a> Scope<'a> {
    /// A scope over `values`, nested in `parent`.
    pub fn new(values: &'a BTreeMap<String, Value>, parent: Option<&'a Scope<'a>>) -> Self {
        Scope { values, parent }
    }

    /// The value called `name` in this scope or the nearest enclosing one.
    pub fn lookup(&self, name: &str) -> Option<&'a Value> {
        self.values
            .get(name)
            .or_else(|| self.parent.and_then(|p| p.lookup(name)))
    }
}

/// The declared type of a graph input.
#[derive(Debug, Clone, PartialEq)]
pub enum DeclaredType {
    /// A tensor with an element type and, when known, a shape (`None` dims are symbolic).
    Tensor {
        dtype: Option<DType>,
        dims: Option<Vec<Option<i64>>>,
    },
    /// A sequence, map, optional or something the interpreter does not check.
    Other,
}

/// The declared type of a `ValueInfoProto`.
pub fn declared_type(vi: &ValueInfoProto) -> DeclaredType {
    let Some(tp) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return DeclaredType::Other;
    };
    match tp {
        type_proto::Value::TensorType(t) => DeclaredType::Tensor {
            dtype: t.elem_type.and_then(DType::from_code),
            dims: t.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .map(|d| match d.value {
                        Some(onnx_proto::tensor_shape_proto::dimension::Value::DimValue(v)) => {
                            Some(v)
                        }
                        _ => None,
                    })
                    .collect()
            }),
        },
        _ => DeclaredType::Other,
    }
}

type Slot = usize;

#[derive(Debug)]
struct Step {
    node_index: usize,
    node: NodeProto,
    opset: i64,
    kernel: KernelFn,
    inputs: Vec<Option<Slot>>,
    outputs: Vec<Option<Slot>>,
    /// Slots whose last use is this step.
    free: Vec<Slot>,
}

#[derive(Debug)]
struct GraphInput {
    name: String,
    slot: Slot,
    declared: DeclaredType,
    /// True when an initializer of the same name gives a default.
    has_default: bool,
}

/// A graph prepared for execution.
#[derive(Debug)]
pub(crate) struct GraphPlan {
    name: String,
    inputs: Vec<GraphInput>,
    outputs: Vec<(String, Slot)>,
    initializers: Vec<(Slot, Value)>,
    /// Values read from the enclosing scope.
    outer: Vec<(Slot, String)>,
    steps: Vec<Step>,
    slot_count: usize,
}

/// Names a graph reads from its enclosing scope (used by nodes with subgraphs, recursively).
fn free_names(graph: &GraphProto) -> BTreeSet<String> {
    let mut defined: BTreeSet<&str> = BTreeSet::new();
    for i in &graph.input {
        defined.insert(i.name.as_deref().unwrap_or(""));
    }
    for t in &graph.initializer {
        defined.insert(t.name.as_deref().unwrap_or(""));
    }
    for n in &graph.node {
        for o in &n.output {
            defined.insert(o);
        }
    }
    let mut free = BTreeSet::new();
    for n in &graph.node {
        for i in n.input.iter().chain(subgraph_reads(n).iter()) {
            if !i.is_empty() && !defined.contains(i.as_str()) {
                free.insert(i.clone());
            }
        }
    }
    free
}

/// Outer names read by a node's subgraph attributes.
fn subgraph_reads(node: &NodeProto) -> Vec<String> {
    let mut out = BTreeSet::new();
    for a in &node.attribute {
        for g in a.g.iter().chain(a.graphs.iter()) {
            out.extend(free_names(g));
        }
    }
    out.into_iter().collect()
}

fn graph_err(graph: &str, reason: impl Into<String>) -> RefError {
    RefError::Graph {
        graph: graph.to_string(),
        reason: reason.into(),
    }
}

impl GraphPlan {
    /// Plans `graph`. `outer_names` says which names the enclosing scope provides.
    pub(crate) fn build(
        graph: &GraphProto,
        opsets: &Opsets,
        registry: &KernelRegistry,
        outer_names: &dyn Fn(&str) -> bool,
    ) -> Result<GraphPlan> {
        let gname = graph.name.clone().unwrap_or_default();
        let mut slots: BTreeMap<String, Slot> = BTreeMap::new();
        let intern = |name: &str, slots: &mut BTreeMap<String, Slot>| -> Slot {
            let next = slots.len();
            *slots.entry(name.to_string()).or_insert(next)
        };

        let mut initializers = Vec::new();
        let mut init_names = BTreeSet::new();
        for t in &graph.initializer {
            let name = t.name.clone().unwrap_or_default();
            let value = Tensor::from_proto(t)?;
            let slot = intern(&name, &mut slots);
            init_names.insert(name);
            initializers.push((slot, Value::Tensor(value)));
        }
        if !graph.sparse_initializer.is_empty() {
            return Err(graph_err(
                &gname,
                "sparse initializers are not supported yet",
            ));
        }
        let mut inputs = Vec::new();
        for vi in &graph.input {
            let name = vi.name.clone().unwrap_or_default();
            let slot = intern(&name, &mut slots);
            inputs.push(GraphInput {
                has_default: init_names.contains(&name),
                name,
                slot,
                declared: declared_type(vi),
            });
        }

        // Topological order: Kahn's algorithm, preferring the original order.
        let mut producer: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, n) in graph.node.iter().enumerate() {
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                if producer.insert(o, i).is_some() {
                    return Err(graph_err(
                        &gname,
                        format!("value '{o}' is produced by more than one node"),
                    ));
                }
            }
        }
        let graph_defined =
            |name: &str| inputs.iter().any(|i| i.name == name) || init_names.contains(name);
        let reads: Vec<Vec<String>> = graph
            .node
            .iter()
            .map(|n| {
                n.input
                    .iter()
                    .filter(|i| !i.is_empty())
                    .cloned()
                    .chain(subgraph_reads(n))
                    .collect()
            })
            .collect();
        let mut outer = Vec::new();
        let mut indegree = vec![0usize; graph.node.len()];
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); graph.node.len()];
        for (i, names) in reads.iter().enumerate() {
            for name in names {
                if let Some(&p) = producer.get(name.as_str()) {
                    if !graph_defined(name) {
                        indegree[i] += 1;
                        users[p].push(i);
                    }
                } else if !graph_defined(name) {
                    if outer_names(name) {
                        if !slots.contains_key(name) {
                            let slot = intern(name, &mut slots);
                            outer.push((slot, name.clone()));
                        }
                    } else {
                        let n = &graph.node[i];
                        return Err(graph_err(
                            &gname,
                            format!(
                                "node {i} '{}' ({}) reads '{name}', which no node, input or initializer defines",
                                n.name.as_deref().unwrap_or(""),
                                n.op_type.as_deref().unwrap_or("")
                            ),
                        ));
                    }
                }
            }
        }
        let mut ready: BTreeSet<usize> = (0..graph.node.len())
            .filter(|&i| indegree[i] == 0)
            .collect();
        let mut order = Vec::with_capacity(graph.node.len());
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for &u in &users[i] {
                indegree[u] -= 1;
                if indegree[u] == 0 {
                    ready.insert(u);
                }
            }
        }
        if order.len() != graph.node.len() {
            let stuck: Vec<usize> = (0..graph.node.len())
                .filter(|&i| indegree[i] > 0)
                .take(5)
                .collect();
            return Err(graph_err(
                &gname,
                format!("the graph has a cycle through nodes {stuck:?}"),
            ));
        }

        // Steps, with kernels resolved up front.
        let mut steps = Vec::with_capacity(order.len());
        for &i in &order {
            let node = &graph.node[i];
            let domain = normalize_domain(node.domain.as_deref().unwrap_or(""));
            let opset = *opsets.get(domain).ok_or_else(|| {
                graph_err(
                    &gname,
                    format!(
                        "node {i} '{}' ({}) uses domain '{domain}', which the model does not import",
                        node.name.as_deref().unwrap_or(""),
                        node.op_type.as_deref().unwrap_or("")
                    ),
                )
            })?;
            let ctx = KernelCtx {
                node,
                index: Some(i),
                opset,
            };
            let kernel = lookup_kernel(registry, &ctx)?;
            let ins = node
                .input
                .iter()
                .map(|n| (!n.is_empty()).then(|| intern(n, &mut slots)))
                .collect();
            let outs = node
                .output
                .iter()
                .map(|n| (!n.is_empty()).then(|| intern(n, &mut slots)))
                .collect();
            steps.push(Step {
                node_index: i,
                node: node.clone(),
                opset,
                kernel,
                inputs: ins,
                outputs: outs,
                free: Vec::new(),
            });
        }
        let mut outputs = Vec::new();
        for o in &graph.output {
            let name = o.name.clone().unwrap_or_default();
            let slot = *slots.get(&name).ok_or_else(|| {
                graph_err(&gname, format!("graph output '{name}' is never defined"))
            })?;
            outputs.push((name, slot));
        }

        // Last uses: a slot is freed after the last step that reads it, unless it is a graph
        // output. Subgraph reads count as reads of the node that owns the subgraph.
        let keep: BTreeSet<Slot> = outputs.iter().map(|(_, s)| *s).collect();
        let mut last_use: BTreeMap<Slot, usize> = BTreeMap::new();
        for (k, step) in steps.iter().enumerate() {
            for s in step.inputs.iter().flatten() {
                last_use.insert(*s, k);
            }
            for name in subgraph_reads(&step.node) {
                if let Some(&s) = slots.get(&name) {
                    last_use.insert(s, k);
                }
            }
        }
        for (&slot, &k) in &last_use {
            if !keep.contains(&slot) {
                if let Some(step) = steps.get_mut(k) {
                    step.free.push(slot);
                }
            }
        }
        // Outputs nobody reads are dropped as soon as they are produced.
        for step in &mut steps {
            let unused: Vec<Slot> = step
                .outputs
                .iter()
                .flatten()
                .copied()
                .filter(|s| !keep.contains(s) && !last_use.contains_key(s))
                .collect();
            step.free.extend(unused);
        }

        Ok(GraphPlan {
            name: gname,
            inputs,
            outputs,
            initializers,
            outer,
            steps,
            slot_count: slots.len(),
        })
    }

    /// Runs the plan. `feeds` are the graph inputs by name; `parent` resolves outer names.
    pub(crate) fn run(
        &self,
        feeds: Vec<(String, Value)>,
        parent: Option<&Scope>,
    ) -> Result<Vec<(String, Value)>> {
        let mut values: Vec<Option<Value>> = vec![None; self.slot_count];
        for (slot, v) in &self.initializers {
            values[*slot] = Some(v.clone());
        }
        let mut fed = BTreeSet::new();
        for (name, value) in feeds {
            let input =
                self.inputs
                    .iter()
                    .find(|i| i.name == name)
                    .ok_or_else(|| RefError::Input {
                        input: name.clone(),
                        reason: format!("graph '{}' has no input of that name", self.name),
                    })?;
            check_input(&input.name, &input.declared, &value)?;
            values[input.slot] = Some(value);
            fed.insert(name);
        }
        for input in &self.inputs {
            if !fed.contains(&input.name) && !input.has_default {
                return Err(RefError::Input {
                    input: input.name.clone(),
                    reason: "no value was given".into(),
                });
            }
        }
        for (slot, name) in &self.outer {
            let v = parent.and_then(|p| p.lookup(name)).ok_or_else(|| {
                graph_err(
                    &self.name,
                    format!("outer-scope value '{name}' is not available"),
                )
            })?;
            values[*slot] = Some(v.clone());
        }
        for step in &self.steps {
            let outs = {
                let ins: Vec<Option<&Value>> = step
                    .inputs
                    .iter()
                    .map(|s| s.and_then(|s| values[s].as_ref()))
                    .collect();
                let ctx = KernelCtx {
                    node: &step.node,
                    index: Some(step.node_index),
                    opset: step.opset,
                };
                if let Some(missing) = step
                    .inputs
                    .iter()
                    .zip(&ins)
                    .position(|(s, v)| s.is_some() && v.is_none())
                {
                    return Err(ctx.err(format!(
                        "input {missing} '{}' has no value",
                        step.node.input[missing]
                    )));
                }
                run_kernel(step.kernel, &ctx, &ins)?
            };
            for (slot, v) in step.outputs.iter().zip(outs) {
                if let Some(s) = slot {
                    values[*s] = Some(v);
                }
            }
            for s in &step.free {
                values[*s] = None;
            }
        }
        let mut out = Vec::with_capacity(self.outputs.len());
        for (name, slot) in &self.outputs {
            let v = values[*slot].clone().ok_or_else(|| {
                graph_err(
                    &self.name,
                    format!("graph output '{name}' was not computed"),
                )
            })?;
            out.push((name.clone(), v));
        }
        Ok(out)
    }
}

/// Checks a fed value against its declared type: dtype, rank and static dims.
fn check_input(name: &str, declared: &DeclaredType, value: &Value) -> Result<()> {
    let DeclaredType::Tensor { dtype, dims } = declared else {
        return Ok(());
    };
    let err = |reason: String| RefError::Input {
        input: name.to_string(),
        reason,
    };
    let t = match value {
        Value::Tensor(t) => t,
        other => return Err(err(format!("expected a tensor, got {}", other.kind()))),
    };
    if let Some(d) = dtype {
        if t.dtype() != *d {
            return Err(err(format!("expected element type {d}, got {}", t.dtype())));
        }
    }
    if let Some(dims) = dims {
        if dims.len() != t.rank() {
            return Err(err(format!(
                "expected rank {} {dims:?}, got shape {:?}",
                dims.len(),
                t.shape()
            )));
        }
        for (axis, (want, got)) in dims.iter().zip(t.shape()).enumerate() {
            if let Some(w) = want {
                if *w != *got as i64 {
                    return Err(err(format!(
                        "dimension {axis} must be {w}, got shape {:?}",
                        t.shape()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A model prepared for repeated execution.
#[derive(Debug)]
pub struct Session {
    plan: GraphPlan,
    opsets: Opsets,
}

impl Session {
    /// Plans a model with the built-in kernels. Fails on a node without a kernel (naming its
    /// index, name and op), a cycle, an undefined value or an undecodable initializer. Nodes
    /// out of topological order are sorted.
    pub fn new(model: &ModelProto) -> Result<Session> {
        Self::with_registry(model, builtin_registry())
    }

    /// Like [`Session::new`] with another kernel registry.
    pub fn with_registry(model: &ModelProto, registry: &KernelRegistry) -> Result<Session> {
        let graph = model
            .graph
            .as_ref()
            .ok_or_else(|| graph_err("", "the model has no graph"))?;
        let opsets = model_opsets(model);
        let plan = GraphPlan::build(graph, &opsets, registry, &|_| false)?;
        Ok(Session { plan, opsets })
    }

    /// The opset imports the session was planned with.
    pub fn opsets(&self) -> &Opsets {
        &self.opsets
    }

    /// Names of the graph inputs the caller must feed (inputs without an initializer default).
    pub fn required_inputs(&self) -> Vec<&str> {
        self.plan
            .inputs
            .iter()
            .filter(|i| !i.has_default)
            .map(|i| i.name.as_str())
            .collect()
    }

    /// Runs the model: `inputs` by name (checked against the declared dtype, rank and static
    /// dims); returns the graph outputs in order.
    pub fn run(&self, inputs: Vec<(String, Value)>) -> Result<Vec<(String, Value)>> {
        self.plan.run(inputs, None)
    }
}
