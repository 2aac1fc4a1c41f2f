//! The planner and the session: a `Session` plans a model once (kernel lookup, topological
//! order, value slots, last uses, initializers decoded, subgraphs and function bodies planned
//! recursively) and then runs it on inputs with the executor (`crate::plan`), freeing each
//! intermediate after its last use.
//!
//! A step is a kernel, a control-flow node with its planned subgraphs (`crate::control`), an
//! op expanded into its function body (`crate::function`), a Gradient node with its
//! generated backward graph (`crate::gradient`), or a FlexAttention node with its modifier
//! subgraphs (`crate::flex_attention`). A subgraph reads outer-scope values
//! through captures resolved at planning time to slots of the enclosing graph (`Src`), so a loop
//! body that runs many times never looks names up.
//!
//! Layer: the planner, above the executor (`plan`), the node plans it dispatches to (`control`,
//! `function`, `gradient`, `flex_attention`) and the registry; only `eval` is above it.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{GraphProto, ModelProto, NodeProto};

use crate::control::{self, subgraph_reads};
use crate::dtype::DType;
use crate::error::{NodeRef, RefError, Result};
use crate::flex_attention::{self, FlexAttentionPlan};
use crate::function::{self, local_functions};
use crate::gradient::{self, GradientPlan};
use crate::kernel::{normalize_domain, run_kernel, KernelCtx, KernelRegistry};
use crate::plan::{
    declared_type, graph_err, DeclaredType, GraphInput, GraphPlan, Opsets, PartialRead, PlanCtx,
    Profile, Slot, Src, Step, StepKind, SubPlan,
};
use crate::registry::builtin_registry;
use crate::tensor::Tensor;
use crate::value::Value;

/// The opset imports of a model, domains normalized.
pub fn model_opsets(model: &ModelProto) -> Opsets {
    let mut out = Opsets::new();
    for o in &model.opset_import {
        let domain = normalize_domain(o.domain.as_deref().unwrap_or("")).to_string();
        out.insert(domain, o.version.unwrap_or(1));
    }
    out
}

/// Values visible to a graph from its enclosing graphs, innermost first. (The executor resolves
/// outer-scope names to slots at planning time; this type remains for callers that keep their
/// own name-to-value environments.)
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

/// Whether `step` is a Gather (a kernel) that reads `slot` as its data and nowhere else.
fn reads_rows_only(step: &Step, slot: Slot) -> bool {
    step.node.op_type.as_deref() == Some("Gather")
        && normalize_domain(step.node.domain.as_deref().unwrap_or("")).is_empty()
        && matches!(step.kind, StepKind::Kernel(_))
        && step.inputs.len() == 2
        && step.inputs[0] == Some(Src::Local(slot))
        && step.inputs[1] != Some(Src::Local(slot))
}

/// Whether `step` is a MatMul or Gemm (a kernel) whose right operand, and only that, is
/// `slot`: a 2-D float, float16 or bfloat16 tensor `t` that it can read in place.
fn reads_as_weight_only(step: &Step, slot: Slot, t: &onnx_proto::TensorProto) -> bool {
    let float = matches!(
        t.data_type.and_then(DType::from_code),
        Some(DType::Float | DType::Float16 | DType::Bfloat16)
    );
    let arity = match step.node.op_type.as_deref() {
        Some("MatMul") => 2..=2,
        Some("Gemm") => 2..=3,
        _ => return false,
    };
    normalize_domain(step.node.domain.as_deref().unwrap_or("")).is_empty()
        && matches!(step.kind, StepKind::Kernel(_))
        && arity.contains(&step.inputs.len())
        && step.inputs[1] == Some(Src::Local(slot))
        && step.inputs[0] != Some(Src::Local(slot))
        && step.inputs.get(2) != Some(&Some(Src::Local(slot)))
        && t.dims.len() == 2
        && float
}

/// An initializer worth decoding lazily: raw data of at least 1 KiB in the model itself.
fn is_lazy_candidate(t: &onnx_proto::TensorProto) -> bool {
    t.raw_data.as_ref().is_some_and(|r| r.len() >= 1024) && !onnx_proto::is_external(t)
}

/// A `Constant` node's value does not depend on the run: it is computed once at planning
/// (decoding its tensor attribute) and shared by every run.
fn precompute_constant(node: &NodeProto, index: usize, opset: i64, kind: StepKind) -> StepKind {
    let is_constant = node.op_type.as_deref() == Some("Constant")
        && normalize_domain(node.domain.as_deref().unwrap_or("")).is_empty()
        && node.input.iter().all(String::is_empty);
    match kind {
        StepKind::Kernel(kernel) if is_constant => {
            let ctx = KernelCtx {
                node,
                index: Some(index),
                opset,
            };
            // A malformed Constant keeps its kernel and fails when (if ever) it runs, as
            // any other node does: a branch that is never taken must not fail planning.
            match run_kernel(kernel, &ctx, &[]) {
                Ok(values) => StepKind::Constant(values),
                Err(_) => StepKind::Kernel(kernel),
            }
        }
        other => other,
    }
}

/// A `ConstantOfShape` whose shape is known at planning (an initializer, or a `Constant`'s
/// output) is computed once, as a `Constant` is: its output is a weight spelled as a shape and
/// a value (the zoo's "light" models carry every weight so), and a session that holds its
/// initializers decoded holds this one too. A run that feeds another shape (a graph input
/// overriding the initializer) runs the kernel. Not with lazy weights, whose sessions hold only
/// what their live steps need; a shape the kernel refuses keeps the kernel, which fails when
/// (if ever) it runs.
fn precompute_constant_of_shape(
    node: &NodeProto,
    index: usize,
    opset: i64,
    kind: StepKind,
    shape: Option<&Value>,
) -> StepKind {
    let is_constant_of_shape = node.op_type.as_deref() == Some("ConstantOfShape")
        && normalize_domain(node.domain.as_deref().unwrap_or("")).is_empty()
        && node.input.len() == 1;
    match (kind, shape) {
        (StepKind::Kernel(kernel), Some(shape)) if is_constant_of_shape => {
            let ctx = KernelCtx {
                node,
                index: Some(index),
                opset,
            };
            match run_kernel(kernel, &ctx, &[Some(shape)]) {
                Ok(outputs) => StepKind::Folded {
                    kernel,
                    inputs: vec![shape.clone()],
                    outputs,
                },
                Err(_) => StepKind::Kernel(kernel),
            }
        }
        (kind, _) => kind,
    }
}

/// Plans `graph` as a subgraph of `node_ref` (its attribute or generated graph `part`) and
/// resolves the outer values it captures to where they live in the owner's frame.
fn plan_subgraph(
    graph: &GraphProto,
    child: &PlanCtx,
    node_ref: &NodeRef,
    part: &str,
    outer_visible: &dyn Fn(&str) -> bool,
    resolve: &dyn Fn(&str) -> Option<Src>,
) -> Result<SubPlan> {
    let plan = GraphPlan::build(graph, child, outer_visible)
        .map_err(|e| RefError::nested(node_ref, part, e))?;
    let captures = plan
        .outer_names
        .iter()
        .map(|name| {
            resolve(name).ok_or_else(|| {
                RefError::nested(
                    node_ref,
                    part,
                    graph_err(
                        &plan.name,
                        format!("outer-scope value '{name}' is not defined"),
                    ),
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(SubPlan { plan, captures })
}

/// Decides how a node runs: a registered kernel wins, then FlexAttention, control flow, a
/// Gradient, then a function body (model-local or from the schema); otherwise `MissingKernel`.
/// `outer_visible` says which names the node's subgraphs may capture and `resolve` where they
/// live.
pub(crate) fn plan_node(
    node: &NodeProto,
    index: Option<usize>,
    ctx: &PlanCtx,
    outer_visible: &dyn Fn(&str) -> bool,
    resolve: &dyn Fn(&str) -> Option<Src>,
) -> Result<(i64, StepKind)> {
    plan_node_in(node, index, None, ctx, outer_visible, resolve)
}

/// `plan_node` for a node of `enclosing` (a Gradient node differentiates its enclosing graph;
/// without one it is an error).
fn plan_node_in(
    node: &NodeProto,
    index: Option<usize>,
    enclosing: Option<&GraphProto>,
    ctx: &PlanCtx,
    outer_visible: &dyn Fn(&str) -> bool,
    resolve: &dyn Fn(&str) -> Option<Src>,
) -> Result<(i64, StepKind)> {
    let domain = normalize_domain(node.domain.as_deref().unwrap_or(""));
    let kctx_of = |opset| KernelCtx { node, index, opset };
    let Some(&opset) = ctx.opsets.get(domain) else {
        return Err(kctx_of(0).err(format!(
            "domain '{domain}' is not imported by the model or function"
        )));
    };
    let kctx = kctx_of(opset);
    if let Some(kernel) = ctx.registry.lookup(domain, kctx.op(), opset) {
        return Ok((opset, StepKind::Kernel(kernel)));
    }
    if flex_attention::is_flex_attention(domain, kctx.op(), opset) {
        let plan = FlexAttentionPlan::new(GraphPlan::build);
        return Ok((opset, StepKind::FlexAttention(Box::new(plan))));
    }
    let node_ref = kctx.node_ref();
    if control::is_control_op(domain, kctx.op()) {
        let mut build_sub = |part: &str, graph: &GraphProto| -> Result<SubPlan> {
            let child = ctx.descend(&node_ref)?;
            plan_subgraph(graph, &child, &node_ref, part, outer_visible, resolve)
        };
        let plan = control::plan_control(&kctx, &mut build_sub)?;
        return Ok((opset, StepKind::Control(Box::new(plan))));
    }
    if gradient::is_gradient_op(domain, kctx.op()) && opset == 1 {
        let Some(graph) = enclosing else {
            return Err(
                kctx.err("Gradient differentiates its enclosing graph; run it inside a Session")
            );
        };
        let backward = gradient::gradient_graph(&kctx, graph, outer_visible, &ctx.opsets)?;
        let mut child = ctx.descend(&node_ref)?;
        child
            .opsets
            .insert(gradient::INTERNAL_DOMAIN.to_string(), 1);
        let body = plan_subgraph(
            &backward,
            &child,
            &node_ref,
            "gradient graph",
            outer_visible,
            resolve,
        )?;
        return Ok((opset, StepKind::Gradient(Box::new(GradientPlan::new(body)))));
    }
    if let Some(plan) = function::plan_function(&kctx, ctx, GraphPlan::build)? {
        return Ok((opset, StepKind::Function(Box::new(plan))));
    }
    Err(RefError::MissingKernel {
        node: kctx.node_ref(),
        version: opset,
    })
}

impl GraphPlan {
    /// Plans `graph`. `outer_visible` says which names the enclosing scopes provide.
    pub(crate) fn build(
        graph: &GraphProto,
        ctx: &PlanCtx,
        outer_visible: &dyn Fn(&str) -> bool,
    ) -> Result<GraphPlan> {
        let gname = graph.name.clone().unwrap_or_default();
        let mut slots: BTreeMap<String, Slot> = BTreeMap::new();
        let intern = |name: &str, slots: &mut BTreeMap<String, Slot>| -> Slot {
            let next = slots.len();
            *slots.entry(name.to_string()).or_insert(next)
        };
        let mut outer_index: BTreeMap<String, usize> = BTreeMap::new();
        let mut outer_names: Vec<String> = Vec::new();

        let mut initializers = Vec::new();
        let mut lazy = Vec::new();
        let mut init_names = BTreeSet::new();
        for t in &graph.initializer {
            let name = t.name.clone().unwrap_or_default();
            let slot = intern(&name, &mut slots);
            init_names.insert(name);
            if ctx.lazy_weights && is_lazy_candidate(t) {
                lazy.push((slot, t.clone()));
                continue;
            }
            initializers.push((slot, Value::Tensor(Tensor::from_proto(t)?)));
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
            .enumerate()
            .map(|(i, n)| {
                n.input
                    .iter()
                    .filter(|i| !i.is_empty())
                    .cloned()
                    .chain(subgraph_reads(n))
                    .chain(gradient::gradient_reads(n, i, graph))
                    .collect()
            })
            .collect();
        let mut capture = |name: &str| {
            if !outer_index.contains_key(name) {
                outer_index.insert(name.to_string(), outer_names.len());
                outer_names.push(name.to_string());
            }
        };
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
                    if outer_visible(name) {
                        capture(name);
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
        for o in &graph.output {
            let name = o.name.as_deref().unwrap_or("");
            if !producer.contains_key(name) && !graph_defined(name) && outer_visible(name) {
                capture(name);
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

        // What this graph's subgraphs may capture: everything it defines, and what it may
        // capture itself.
        let mut defined_here: BTreeSet<&str> = graph
            .input
            .iter()
            .map(|i| i.name.as_deref().unwrap_or(""))
            .collect();
        defined_here.extend(init_names.iter().map(String::as_str));
        defined_here.extend(producer.keys().copied());
        let sub_visible = |name: &str| defined_here.contains(name) || outer_visible(name);

        // Values known at planning: the initializers (a fed input may override them), then the
        // outputs of `Constant` nodes.
        let mut known: BTreeMap<String, Value> = BTreeMap::new();
        if !ctx.lazy_weights {
            let by_slot: BTreeMap<Slot, &Value> =
                initializers.iter().map(|(s, v)| (*s, v)).collect();
            for t in &graph.initializer {
                let name = t.name.as_deref().unwrap_or("");
                if let Some(v) = by_slot.get(&slots[name]) {
                    known.insert(name.to_string(), (*v).clone());
                }
            }
        }
        // Steps, with kernels, subgraphs and function bodies planned up front.
        let mut steps = Vec::with_capacity(order.len());
        for &i in &order {
            let node = &graph.node[i];
            let resolve = |name: &str| {
                slots
                    .get(name)
                    .map(|&s| Src::Local(s))
                    .or_else(|| outer_index.get(name).map(|&k| Src::Outer(k)))
            };
            let (opset, kind) =
                plan_node_in(node, Some(i), Some(graph), ctx, &sub_visible, &resolve)?;
            let kind = precompute_constant(node, i, opset, kind);
            let kind = if ctx.lazy_weights {
                kind
            } else {
                let shape = node.input.first().and_then(|n| known.get(n.as_str()));
                precompute_constant_of_shape(node, i, opset, kind, shape)
            };
            if let StepKind::Constant(values) = &kind {
                for (name, v) in node.output.iter().zip(values) {
                    if !name.is_empty() {
                        known.insert(name.clone(), v.clone());
                    }
                }
            }
            let resolved: Vec<Option<Option<Src>>> = node
                .input
                .iter()
                .map(|n| (!n.is_empty()).then(|| resolve(n)))
                .collect();
            let mut ins = Vec::with_capacity(node.input.len());
            for (n, r) in node.input.iter().zip(resolved) {
                ins.push(r.map(|src| src.unwrap_or_else(|| Src::Local(intern(n, &mut slots)))));
            }
            let outs = node
                .output
                .iter()
                .map(|n| (!n.is_empty()).then(|| intern(n, &mut slots)))
                .collect();
            steps.push(Step {
                node_index: i,
                node: node.clone(),
                opset,
                kind,
                inputs: ins,
                outputs: outs,
                free: Vec::new(),
                load: Vec::new(),
                partial: None,
            });
        }
        let mut outputs = Vec::new();
        for o in &graph.output {
            let name = o.name.clone().unwrap_or_default();
            let src = slots
                .get(&name)
                .map(|&s| Src::Local(s))
                .or_else(|| outer_index.get(&name).map(|&k| Src::Outer(k)))
                .ok_or_else(|| {
                    graph_err(&gname, format!("graph output '{name}' is never defined"))
                })?;
            outputs.push((name, src));
        }
        let output_types = graph.output.iter().map(declared_type).collect();

        // Last uses: a slot is freed after the last step that reads it, unless it is a graph
        // output. Subgraph reads count as reads of the node that owns the subgraph.
        let keep: BTreeSet<Slot> = outputs
            .iter()
            .filter_map(|(_, s)| match s {
                Src::Local(s) => Some(*s),
                Src::Outer(_) => None,
            })
            .collect();
        let mut last_use: BTreeMap<Slot, usize> = BTreeMap::new();
        for (k, step) in steps.iter().enumerate() {
            for src in step.inputs.iter().flatten() {
                if let Src::Local(s) = src {
                    last_use.insert(*s, k);
                }
            }
            // Subgraph and Gradient reads count as reads of the node that owns them.
            for name in reads.get(step.node_index).map(Vec::as_slice).unwrap_or(&[]) {
                if let Some(&s) = slots.get(name) {
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
        // A lazy initializer is decoded before the first step that reads it; one no step reads
        // (a graph output, or unused) is decoded at planning like the others.
        let mut first_use: BTreeMap<Slot, usize> = BTreeMap::new();
        for (k, step) in steps.iter().enumerate() {
            let direct = step.inputs.iter().flatten().filter_map(|src| match src {
                Src::Local(s) => Some(*s),
                Src::Outer(_) => None,
            });
            let nested = reads
                .get(step.node_index)
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .filter_map(|name| slots.get(name).copied());
            for s in direct.chain(nested) {
                first_use.entry(s).or_insert(k);
            }
        }
        let mut kept_lazy = Vec::with_capacity(lazy.len());
        for (slot, t) in lazy {
            match first_use.get(&slot) {
                Some(&k) if !keep.contains(&slot) => {
                    let only_here = last_use.get(&slot) == Some(&k);
                    if only_here && reads_rows_only(&steps[k], slot) {
                        steps[k].partial = Some(PartialRead::GatherRows(kept_lazy.len()));
                    } else if only_here && reads_as_weight_only(&steps[k], slot, &t) {
                        steps[k].partial = Some(PartialRead::ProductWeight(kept_lazy.len()));
                    } else {
                        steps[k].load.push(kept_lazy.len());
                    }
                    kept_lazy.push((slot, t));
                }
                _ => initializers.push((slot, Value::Tensor(Tensor::from_proto(&t)?))),
            }
        }
        let lazy = kept_lazy;
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

        let mut declared = BTreeMap::new();
        if ctx.check_declarations {
            for vi in graph.value_info.iter().chain(&graph.output) {
                let name = vi.name.as_deref().unwrap_or("");
                if let (Some(&slot), true) = (slots.get(name), producer.contains_key(name)) {
                    declared.insert(slot, (name.to_string(), declared_type(vi)));
                }
            }
        }

        Ok(GraphPlan {
            name: gname,
            inputs,
            outputs,
            output_types,
            initializers,
            lazy,
            outer_names,
            steps,
            slot_count: slots.len(),
            declared,
            check_inputs: ctx.check_declarations && ctx.depth > 0,
        })
    }
}

/// Checks a fed value against its declared type: dtype, rank and static dims.
fn check_input(name: &str, declared: &DeclaredType, value: &Value) -> Result<()> {
    match declared.broken_by(value) {
        Some(reason) => Err(RefError::Input {
            input: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// A model prepared for repeated execution.
#[derive(Debug)]
pub struct Session {
    plan: GraphPlan,
    opsets: Opsets,
}

impl Session {
    /// Bytes of the main graph's weights a run holds decoded: those decoded at planning, and
    /// the lazy ones each run decodes whole (not a Gather's rows nor a MatMul or Gemm weight
    /// read in place). An upper bound on what one run's weights add to its memory.
    pub fn decoded_weight_bytes(&self) -> usize {
        let eager: usize = self
            .plan
            .initializers
            .iter()
            .map(|(_, v)| match v {
                Value::Tensor(t) => t.len() * t.dtype().bit_width().div_ceil(8),
                _ => 0,
            })
            .sum();
        let whole: usize = self
            .plan
            .steps
            .iter()
            .flat_map(|s| &s.load)
            .map(|&i| self.plan.lazy[i].1.raw_data.as_ref().map_or(0, |r| r.len()))
            .sum();
        eager + whole
    }

    /// Plans a model with the built-in kernels. Fails on a node without a kernel or function
    /// body (naming its index, name and op, and the path through subgraphs and functions), a
    /// cycle, an undefined value or an undecodable initializer. Nodes out of topological order
    /// are sorted.
    pub fn new(model: &ModelProto) -> Result<Session> {
        Self::with_registry(model, builtin_registry())
    }

    /// Like [`Session::new`] with another kernel registry.
    pub fn with_registry(model: &ModelProto, registry: &KernelRegistry) -> Result<Session> {
        Self::plan(model, registry, false, false)
    }

    /// Like [`Session::new`], but the main graph's initializers of at least 1 KiB stay encoded
    /// in the model's buffers: each run decodes one when a step first reads it and drops it
    /// after its last read, so a run holds the weights its live steps need, not every weight
    /// (each run decodes them again).
    pub fn with_lazy_weights(model: &ModelProto) -> Result<Session> {
        Self::plan(model, builtin_registry(), true, false)
    }

    /// Like [`Session::new`], but a run also checks every value a node produces (in the main
    /// graph and in subgraphs) against the type its graph declares for it (in `value_info` or
    /// as a graph output), and every value bound to a subgraph input against that input's
    /// declaration, and fails naming the first that breaks it. An optimizer may rely on
    /// declared types, so a model that breaks one on some input is invalid there; a
    /// comparison of a model with its optimized form skips such inputs.
    pub fn checking_declarations(model: &ModelProto) -> Result<Session> {
        Self::plan(model, builtin_registry(), false, true)
    }

    fn plan(
        model: &ModelProto,
        registry: &KernelRegistry,
        lazy_weights: bool,
        check_declarations: bool,
    ) -> Result<Session> {
        let graph = model
            .graph
            .as_ref()
            .ok_or_else(|| graph_err("", "the model has no graph"))?;
        let opsets = model_opsets(model);
        let functions = local_functions(model);
        let ctx = PlanCtx {
            registry,
            opsets: opsets.clone(),
            functions: &functions,
            call_stack: Vec::new(),
            depth: 0,
            lazy_weights,
            check_declarations,
        };
        let plan = GraphPlan::build(graph, &ctx, &|_| false)?;
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
        self.run_inner(inputs, None)
    }

    /// [`Session::run`], adding the time of every top-level node to `profile` (a control-flow
    /// node or function call counts as one, its body included).
    pub fn run_profiled(
        &self,
        inputs: Vec<(String, Value)>,
        profile: &mut Profile,
    ) -> Result<Vec<(String, Value)>> {
        self.run_inner(inputs, Some(profile))
    }

    fn run_inner(
        &self,
        inputs: Vec<(String, Value)>,
        profile: Option<&mut Profile>,
    ) -> Result<Vec<(String, Value)>> {
        let mut feeds: Vec<Option<Value>> = vec![None; self.plan.inputs.len()];
        for (name, value) in inputs {
            let position = self
                .plan
                .inputs
                .iter()
                .position(|i| i.name == name)
                .ok_or_else(|| RefError::Input {
                    input: name.clone(),
                    reason: format!("graph '{}' has no input of that name", self.plan.name),
                })?;
            let declared = &self.plan.inputs[position];
            check_input(&declared.name, &declared.declared, &value)?;
            feeds[position] = Some(value);
        }
        let values = self.plan.run_profiled(feeds, &[], profile)?;
        Ok(self
            .plan
            .outputs
            .iter()
            .map(|(name, _)| name.clone())
            .zip(values)
            .collect())
    }
}

/// The main-graph nodes (indices into `graph.node`) that no kernel, FlexAttention or
/// control-flow plan, Gradient or function body (model-local or the schema's) can run at the model's opsets:
/// custom-domain ops and contrib ops without a kernel. A [`Session`] refuses a model holding
/// one; a caller that can treat them as boundaries (the optimizer's check) cuts them out first.
/// A node whose domain the model does not import is not listed (planning reports it).
pub fn opaque_nodes(model: &ModelProto) -> Vec<usize> {
    let Some(graph) = model.graph.as_ref() else {
        return Vec::new();
    };
    let opsets = model_opsets(model);
    let functions = local_functions(model);
    let ctx = probing_ctx(&opsets, &functions);
    graph
        .node
        .iter()
        .enumerate()
        .filter(|&(i, node)| opaque_in(&ctx, &opsets, node, Some(i)))
        .map(|(i, _)| i)
        .collect()
}

/// The planning context [`opaque_in`] asks, with the built-in kernels.
fn probing_ctx<'a>(opsets: &Opsets, functions: &'a crate::plan::LocalFunctions) -> PlanCtx<'a> {
    PlanCtx {
        registry: builtin_registry(),
        opsets: opsets.clone(),
        functions,
        call_stack: Vec::new(),
        depth: 0,
        lazy_weights: false,
        check_declarations: false,
    }
}

/// Whether a node no kernel, control-flow plan, Gradient or function body can run (see
/// [`opaque_nodes`]); a node whose domain the model does not import is not.
fn opaque_in(ctx: &PlanCtx<'_>, opsets: &Opsets, node: &NodeProto, index: Option<usize>) -> bool {
    let domain = normalize_domain(node.domain.as_deref().unwrap_or(""));
    let Some(&opset) = opsets.get(domain) else {
        return false;
    };
    let kctx = KernelCtx { node, index, opset };
    let op = kctx.op();
    let runnable = builtin_registry().lookup(domain, op, opset).is_some()
        || control::is_control_op(domain, op)
        || flex_attention::is_flex_attention(domain, op, opset)
        || (gradient::is_gradient_op(domain, op) && opset == 1)
        || !matches!(
            function::plan_function(&kctx, ctx, GraphPlan::build),
            Ok(None)
        );
    !runnable
}

/// The nodes inside the main graph's subgraphs (If branches, Loop and Scan bodies, at any
/// depth) that [`opaque_nodes`] would list were they in the main graph: each as the path of
/// node indices from the main graph down (the last the node's index in its subgraph, with an
/// empty name), each with the attribute that holds the next subgraph (`body`, or `name#k` for
/// the k-th graph of a list). A caller that stands them in (the optimizer's check)
/// rewrites them before planning.
pub fn opaque_subgraph_nodes(model: &ModelProto) -> Vec<Vec<(usize, String)>> {
    let Some(graph) = model.graph.as_ref() else {
        return Vec::new();
    };
    let opsets = model_opsets(model);
    let functions = local_functions(model);
    let ctx = probing_ctx(&opsets, &functions);
    fn walk(
        g: &onnx_proto::GraphProto,
        ctx: &PlanCtx<'_>,
        opsets: &Opsets,
        path: &mut Vec<(usize, String)>,
        top: bool,
        out: &mut Vec<Vec<(usize, String)>>,
    ) {
        for (i, node) in g.node.iter().enumerate() {
            if !top && opaque_in(ctx, opsets, node, Some(i)) {
                let mut p = path.clone();
                p.push((i, String::new()));
                out.push(p);
                continue;
            }
            for a in &node.attribute {
                let name = a.name.clone().unwrap_or_default();
                let subs = a.g.iter().map(|g| (name.clone(), g)).chain(
                    a.graphs
                        .iter()
                        .enumerate()
                        .map(|(k, g)| (format!("{name}#{k}"), g)),
                );
                for (step, sub) in subs {
                    path.push((i, step));
                    walk(sub, ctx, opsets, path, false, out);
                    path.pop();
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(graph, &ctx, &opsets, &mut Vec::new(), true, &mut out);
    out
}
