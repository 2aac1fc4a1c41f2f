//! Control-flow operators: If, Loop, Scan (Scan-8 with its batch axis and sequence_lens,
//! Scan-9+ with scan axes and directions) and SequenceMap.
//!
//! Their subgraphs are planned once with the enclosing graph (`plan_control`, called by the
//! session planner) and checked there for the number of inputs and outputs, so a malformed body
//! fails at planning, naming the node. At run time a body's captured outer values are bound
//! once per run of the node, then the body runs from its plan as many times as needed, with
//! loop-carried values moved from one iteration to the next.
//!
//! Layer: a node plan, above the executor (`plan`), the kernel interface and the kernels; below
//! the planner (`session`), which calls `plan_control` with a callback that plans a subgraph.

use std::any::Any;

use ndarray::{Axis, IxDyn};
use std::collections::BTreeSet;

use onnx_proto::{GraphProto, NodeProto, TensorProto};

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::KernelCtx;
use crate::kernels::norm_axis;
use crate::plan::{DeclaredType, Frame, NodePlan, SubPlan};
use crate::tensor::{check_size, map_all, Array, Tensor};
use crate::value::{Sequence, Value};

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
    for o in &graph.output {
        let name = o.name.as_deref().unwrap_or("");
        if !name.is_empty() && !defined.contains(name) {
            free.insert(name.to_string());
        }
    }
    free
}

/// Outer names read by a node's subgraph attributes.
pub(crate) fn subgraph_reads(node: &NodeProto) -> Vec<String> {
    let mut out = BTreeSet::new();
    for a in &node.attribute {
        for g in a.g.iter().chain(a.graphs.iter()) {
            out.extend(free_names(g));
        }
    }
    out.into_iter().collect()
}

/// True for the ops this module runs.
pub(crate) fn is_control_op(domain: &str, op: &str) -> bool {
    domain.is_empty() && matches!(op, "If" | "Loop" | "Scan" | "SequenceMap")
}

/// A control-flow node with its planned subgraphs.
#[derive(Debug)]
pub(crate) enum ControlPlan {
    If {
        then_branch: SubPlan,
        else_branch: SubPlan,
    },
    Loop {
        body: SubPlan,
        /// Number of loop-carried values (N).
        carried: usize,
        /// Number of scan outputs (K).
        scans: usize,
    },
    Scan(ScanPlan),
    SequenceMap {
        body: SubPlan,
    },
}

/// A Scan node: its body and attributes, checked at planning.
#[derive(Debug)]
pub(crate) struct ScanPlan {
    body: SubPlan,
    /// Scan-8: every input and output has a leading batch axis, and input 0 is sequence_lens.
    batched: bool,
    states: usize,
    input_axes: Vec<i64>,
    input_reverse: Vec<bool>,
    output_axes: Vec<i64>,
    output_reverse: Vec<bool>,
}

/// Builds a subgraph attribute into a plan (supplied by the session planner).
pub(crate) type BuildSub<'a> = dyn FnMut(&str, &GraphProto) -> Result<SubPlan> + 'a;

/// Plans a control-flow node: its subgraphs, and the arity checks between node and bodies.
pub(crate) fn plan_control(ctx: &KernelCtx, build: &mut BuildSub) -> Result<ControlPlan> {
    let graph = |name: &str| {
        ctx.attr_graph(name)
            .ok_or_else(|| ctx.err(format!("graph attribute '{name}' is missing")))
    };
    let node_inputs = ctx.node.input.len();
    let node_outputs = ctx.num_outputs();
    match ctx.op() {
        "If" => {
            let then_branch = build("then_branch", graph("then_branch")?)?;
            let else_branch = build("else_branch", graph("else_branch")?)?;
            for (part, branch) in [("then_branch", &then_branch), ("else_branch", &else_branch)] {
                if branch.plan.num_inputs() != 0 {
                    return Err(ctx.err(format!(
                        "{part} declares {} inputs; If branches take none",
                        branch.plan.num_inputs()
                    )));
                }
                if branch.plan.num_outputs() != node_outputs {
                    return Err(ctx.err(format!(
                        "{part} has {} outputs, the node has {node_outputs}",
                        branch.plan.num_outputs()
                    )));
                }
            }
            Ok(ControlPlan::If {
                then_branch,
                else_branch,
            })
        }
        "Loop" => {
            if node_inputs < 2 {
                return Err(ctx.err("Loop needs inputs M and cond (either may be empty)"));
            }
            let body = build("body", graph("body")?)?;
            let carried = node_inputs - 2;
            if body.plan.num_inputs() != carried + 2 {
                return Err(ctx.err(format!(
                    "body has {} inputs, expected {} (iteration number, condition and {carried} loop-carried values)",
                    body.plan.num_inputs(),
                    carried + 2
                )));
            }
            let Some(scans) = body.plan.num_outputs().checked_sub(carried + 1) else {
                return Err(ctx.err(format!(
                    "body has {} outputs, expected at least {} (condition and {carried} loop-carried values)",
                    body.plan.num_outputs(),
                    carried + 1
                )));
            };
            if node_outputs > carried + scans {
                return Err(ctx.err(format!(
                    "the node has {node_outputs} outputs, the body gives {carried} loop-carried values and {scans} scan outputs"
                )));
            }
            Ok(ControlPlan::Loop {
                body,
                carried,
                scans,
            })
        }
        "Scan" => plan_scan(ctx, build, graph("body")?),
        "SequenceMap" => {
            let body = build("body", graph("body")?)?;
            if body.plan.num_inputs() != node_inputs {
                return Err(ctx.err(format!(
                    "body has {} inputs, the node has {node_inputs}",
                    body.plan.num_inputs()
                )));
            }
            if body.plan.num_outputs() != node_outputs {
                return Err(ctx.err(format!(
                    "body has {} outputs, the node has {node_outputs}",
                    body.plan.num_outputs()
                )));
            }
            Ok(ControlPlan::SequenceMap { body })
        }
        other => Err(ctx.err(format!("'{other}' is not a control-flow op"))),
    }
}

fn plan_scan(ctx: &KernelCtx, build: &mut BuildSub, graph: &GraphProto) -> Result<ControlPlan> {
    if ctx.opset < 8 {
        return Err(RefError::MissingKernel {
            node: ctx.node_ref(),
            version: ctx.opset,
        });
    }
    let batched = ctx.opset < 9;
    let scan_inputs = ctx.attr_opt_int("num_scan_inputs")?.unwrap_or(0);
    let scan_inputs = usize::try_from(scan_inputs)
        .ok()
        .filter(|&m| m > 0)
        .ok_or_else(|| ctx.err("attribute num_scan_inputs must be a positive int"))?;
    let leading = usize::from(batched);
    let states = ctx
        .node
        .input
        .len()
        .checked_sub(scan_inputs + leading)
        .ok_or_else(|| {
            ctx.err(format!(
                "{} inputs cannot hold num_scan_inputs = {scan_inputs}",
                ctx.node.input.len()
            ))
        })?;
    let body = build("body", graph)?;
    if body.plan.num_inputs() != states + scan_inputs {
        return Err(ctx.err(format!(
            "body has {} inputs, expected {} ({states} state values and {scan_inputs} scan inputs)",
            body.plan.num_inputs(),
            states + scan_inputs
        )));
    }
    let Some(scans) = body.plan.num_outputs().checked_sub(states) else {
        return Err(ctx.err(format!(
            "body has {} outputs, expected at least {states} state values",
            body.plan.num_outputs()
        )));
    };
    if ctx.num_outputs() > states + scans {
        return Err(ctx.err(format!(
            "the node has {} outputs, the body gives {states} state values and {scans} scan outputs",
            ctx.num_outputs()
        )));
    }
    let list = |name: &str, len: usize| -> Result<Vec<i64>> {
        let values = ctx.attr_ints(name).unwrap_or(&[]);
        if values.len() > len {
            return Err(ctx.err(format!(
                "attribute {name} has {} entries, expected at most {len}",
                values.len()
            )));
        }
        let mut out = values.to_vec();
        out.resize(len, 0);
        Ok(out)
    };
    let directions = |name: &str, len: usize| -> Result<Vec<bool>> {
        list(name, len)?
            .into_iter()
            .map(|d| match d {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(ctx.err(format!(
                    "attribute {name} has direction {other}; only 0 (forward) and 1 (reverse) exist"
                ))),
            })
            .collect()
    };
    let (input_axes, input_reverse, output_axes, output_reverse) = if batched {
        (
            vec![0; scan_inputs],
            directions("directions", scan_inputs)?,
            vec![0; scans],
            vec![false; scans],
        )
    } else {
        (
            list("scan_input_axes", scan_inputs)?,
            directions("scan_input_directions", scan_inputs)?,
            list("scan_output_axes", scans)?,
            directions("scan_output_directions", scans)?,
        )
    };
    Ok(ControlPlan::Scan(ScanPlan {
        body,
        batched,
        states,
        input_axes,
        input_reverse,
        output_axes,
        output_reverse,
    }))
}

impl NodePlan for ControlPlan {
    /// Runs the node; `frame` holds the enclosing graph's values its subgraphs capture.
    fn run(&self, ctx: &KernelCtx, inputs: &[Option<&Value>], frame: &Frame) -> Result<Vec<Value>> {
        let mut outputs = match self {
            ControlPlan::If {
                then_branch,
                else_branch,
            } => {
                let cond = truth(ctx, ctx.input(inputs, 0)?, "cond")?;
                let (part, branch) = if cond {
                    ("then_branch", then_branch)
                } else {
                    ("else_branch", else_branch)
                };
                let bound = branch.bind(frame)?;
                run_body(ctx, part, branch, Vec::new(), &bound)?
            }
            ControlPlan::Loop {
                body,
                carried,
                scans,
            } => run_loop(ctx, inputs, frame, body, *carried, *scans)?,
            ControlPlan::Scan(plan) => plan.run(ctx, inputs, frame)?,
            ControlPlan::SequenceMap { body } => run_sequence_map(ctx, inputs, frame, body)?,
        };
        outputs.truncate(ctx.num_outputs());
        Ok(outputs)
    }
}

/// Runs a body, attaching the node and the part to errors.
fn run_body(
    ctx: &KernelCtx,
    part: &str,
    body: &SubPlan,
    inputs: Vec<Option<Value>>,
    bound: &[&Value],
) -> Result<Vec<Value>> {
    body.plan
        .run(inputs, bound)
        .map_err(|e| RefError::nested(&ctx.node_ref(), part, e))
}

/// The truth value of a single-element bool (or integer) tensor.
fn truth(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<bool> {
    if t.len() != 1 {
        return Err(ctx.err(format!(
            "{what} must hold exactly one element, got shape {:?}",
            t.shape()
        )));
    }
    let v = t
        .to_i64_vec()
        .map_err(|_| ctx.err(format!("{what} must be a bool tensor, got {}", t.dtype())))?;
    Ok(v.first().is_some_and(|&x| x != 0))
}

fn run_loop(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    frame: &Frame,
    body: &SubPlan,
    carried: usize,
    scans: usize,
) -> Result<Vec<Value>> {
    let max_trips = match ctx.opt_input(inputs, 0)? {
        Some(m) => {
            let v = m.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
            Some(*v.first().ok_or_else(|| ctx.err("M is empty"))?)
        }
        None => None,
    };
    let mut cond = match ctx.opt_input(inputs, 1)? {
        Some(c) => truth(ctx, c, "cond")?,
        None => true,
    };
    let mut state: Vec<Value> = (0..carried)
        .map(|i| {
            inputs
                .get(i + 2)
                .copied()
                .flatten()
                .cloned()
                .ok_or_else(|| ctx.err(format!("loop-carried input {} is missing", i + 2)))
        })
        .collect::<Result<_>>()?;
    let bound = body.bind(frame)?;
    let mut parts: Vec<Vec<Value>> = vec![Vec::new(); scans];
    let mut trip: i64 = 0;
    while cond && max_trips.is_none_or(|m| trip < m) {
        let mut feeds = Vec::with_capacity(carried + 2);
        feeds.push(Some(Value::Tensor(Tensor::scalar(trip))));
        feeds.push(Some(Value::Tensor(Tensor::scalar(cond))));
        feeds.extend(state.drain(..).map(Some));
        let mut outs = run_body(ctx, "body", body, feeds, &bound)?.into_iter();
        let cond_out = outs
            .next()
            .ok_or_else(|| ctx.err("body returned no condition"))?;
        cond = truth(ctx, &cond_out.into_tensor()?, "body condition output")?;
        state.extend(outs.by_ref().take(carried));
        for (part, v) in parts.iter_mut().zip(outs) {
            part.push(v);
        }
        trip += 1;
    }
    let mut outputs = state;
    for (k, part) in parts.into_iter().enumerate() {
        let declared = body.plan.output_type(1 + carried + k);
        let inferred;
        let declared = match declared {
            Some(DeclaredType::Tensor { dtype: Some(_), .. }) => declared,
            _ if part.is_empty() => {
                inferred = inferred_scan_element(ctx, inputs, carried + k);
                inferred.as_ref().or(declared)
            }
            _ => declared,
        };
        outputs.push(Value::Tensor(stack_values(ctx, part, 0, declared)?));
    }
    Ok(outputs)
}

/// The type of one slice of a Loop's scan output `output` (a node output index) when no
/// iteration ran and the body does not declare it: what onnx's inference gives the node's output
/// from its inputs' types at run time (as onnxruntime types a body at load), the leading
/// iteration axis removed. `None` when inference knows no element type for it.
fn inferred_scan_element(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    output: usize,
) -> Option<DeclaredType> {
    use onnx_schema::infer::{infer_node, tensor_type, InputInfo, SymDim};
    let domain = onnx_schema::normalize_domain(ctx.node.domain.as_deref().unwrap_or(""));
    let schema = onnx_schema::registry().lookup(domain, ctx.op(), ctx.opset)?;
    let types: Vec<Option<onnx_proto::TypeProto>> = inputs
        .iter()
        .map(|v| match v {
            Some(Value::Tensor(t)) => {
                let dims: Vec<SymDim> =
                    t.shape().iter().map(|&d| SymDim::Known(d as i64)).collect();
                Some(tensor_type(Some(t.dtype().code()), Some(&dims)))
            }
            _ => None,
        })
        .collect();
    let infos: Vec<Option<InputInfo<'_>>> = inputs
        .iter()
        .zip(&types)
        .map(|(v, ty)| {
            v.map(|_| InputInfo {
                ty: ty.as_ref(),
                ..InputInfo::default()
            })
        })
        .collect();
    let outs = infer_node(
        schema,
        ctx.opset,
        &ctx.node.attribute,
        &infos,
        ctx.node.output.len(),
    )
    .ok()?;
    let ty = outs.into_iter().nth(output)?.ty?;
    let vi = onnx_proto::ValueInfoProto {
        r#type: Some(ty),
        ..Default::default()
    };
    match crate::plan::declared_type(&vi) {
        DeclaredType::Tensor {
            dtype: Some(dtype),
            dims,
        } => Some(DeclaredType::Tensor {
            dtype: Some(dtype),
            dims: dims.map(|d| d.into_iter().skip(1).collect()),
        }),
        _ => None,
    }
}

impl ScanPlan {
    fn run(&self, ctx: &KernelCtx, inputs: &[Option<&Value>], frame: &Frame) -> Result<Vec<Value>> {
        let bound = self.body.bind(frame)?;
        let leading = usize::from(self.batched);
        let states: Vec<Value> = (0..self.states)
            .map(|i| {
                inputs
                    .get(leading + i)
                    .copied()
                    .flatten()
                    .cloned()
                    .ok_or_else(|| ctx.err(format!("state input {} is missing", leading + i)))
            })
            .collect::<Result<_>>()?;
        let scanned: Vec<&Tensor> = (0..self.input_axes.len())
            .map(|j| ctx.input(inputs, leading + self.states + j))
            .collect::<Result<_>>()?;
        if !self.batched {
            let axes = scanned
                .iter()
                .zip(&self.input_axes)
                .map(|(t, &a)| norm_axis(a, t.rank()).map_err(|e| e.in_node(&ctx.node_ref())))
                .collect::<Result<Vec<_>>>()?;
            let len = common_length(ctx, &scanned, &axes)?;
            let (states, parts) = self.scan_once(ctx, &bound, states, &scanned, &axes, len)?;
            let mut outputs = states;
            for (k, mut part) in parts.into_iter().enumerate() {
                if self.output_reverse.get(k).copied().unwrap_or(false) {
                    part.reverse();
                }
                let axis = self.output_axes.get(k).copied().unwrap_or(0);
                let rank = part.first().map_or_else(
                    || self.declared_rank(k),
                    |p| match p {
                        Value::Tensor(t) => t.rank(),
                        _ => 0,
                    },
                );
                let axis = norm_axis(axis, rank + 1).map_err(|e| e.in_node(&ctx.node_ref()))?;
                let declared = self.body.plan.output_type(self.states + k);
                outputs.push(Value::Tensor(stack_values(ctx, part, axis, declared)?));
            }
            return Ok(outputs);
        }
        self.run_batched(ctx, inputs, &bound, states, &scanned)
    }

    fn declared_rank(&self, k: usize) -> usize {
        match self.body.plan.output_type(self.states + k) {
            Some(DeclaredType::Tensor { dims: Some(d), .. }) => d.len(),
            _ => 0,
        }
    }

    /// One scan over `len` steps: returns the final states and, per scan output, the slices in
    /// iteration order.
    fn scan_once(
        &self,
        ctx: &KernelCtx,
        bound: &[&Value],
        mut states: Vec<Value>,
        scanned: &[&Tensor],
        axes: &[usize],
        len: usize,
    ) -> Result<(Vec<Value>, Vec<Vec<Value>>)> {
        let outputs = self.body.plan.num_outputs() - self.states;
        let mut parts: Vec<Vec<Value>> = vec![Vec::with_capacity(len); outputs];
        for t in 0..len {
            let mut feeds: Vec<Option<Value>> = states.drain(..).map(Some).collect();
            for ((x, &axis), &reverse) in scanned.iter().zip(axes).zip(&self.input_reverse) {
                let index = if reverse { len - 1 - t } else { t };
                feeds.push(Some(Value::Tensor(slice_at(x, axis, index))));
            }
            let mut outs = run_body(ctx, "body", &self.body, feeds, bound)?.into_iter();
            states.extend(outs.by_ref().take(self.states));
            for (part, v) in parts.iter_mut().zip(outs) {
                part.push(v);
            }
        }
        Ok((states, parts))
    }

    /// Scan-8: one scan per batch entry, each over its own sequence length; scan outputs are
    /// padded with zeros up to the longest sequence, then everything is stacked on axis 0.
    fn run_batched(
        &self,
        ctx: &KernelCtx,
        inputs: &[Option<&Value>],
        bound: &[&Value],
        states: Vec<Value>,
        scanned: &[&Tensor],
    ) -> Result<Vec<Value>> {
        let state_tensors: Vec<&Tensor> = states
            .iter()
            .map(|s| match s {
                Value::Tensor(t) => Ok(t),
                other => Err(ctx.err(format!(
                    "Scan-8 state values must be tensors, got {}",
                    other.kind()
                ))),
            })
            .collect::<Result<_>>()?;
        let batch = match scanned.first() {
            Some(x) if x.rank() >= 2 => x.shape()[0],
            _ => return Err(ctx.err("Scan-8 scan inputs need shape [batch, sequence, ...]")),
        };
        let max_len = common_length(ctx, scanned, &vec![1; scanned.len()])?;
        for x in scanned.iter().chain(&state_tensors) {
            if x.shape().first() != Some(&batch) {
                return Err(ctx.err(format!(
                    "every state and scan input needs batch size {batch} on axis 0, got shape {:?}",
                    x.shape()
                )));
            }
        }
        let lens: Vec<usize> = match ctx.opt_input(inputs, 0)? {
            Some(t) => t
                .to_i64_vec()
                .map_err(|e| e.in_node(&ctx.node_ref()))?
                .into_iter()
                .map(|l| {
                    usize::try_from(l)
                        .ok()
                        .filter(|&l| l <= max_len)
                        .ok_or_else(|| {
                            ctx.err(format!("sequence length {l} is outside 0..={max_len}"))
                        })
                })
                .collect::<Result<_>>()?,
            None => vec![max_len; batch],
        };
        if lens.len() != batch {
            return Err(ctx.err(format!(
                "sequence_lens has {} entries for a batch of {batch}",
                lens.len()
            )));
        }
        let outputs = self.body.plan.num_outputs() - self.states;
        let mut final_states: Vec<Vec<Value>> = vec![Vec::with_capacity(batch); self.states];
        let mut scan_outputs: Vec<Vec<Value>> = vec![Vec::with_capacity(batch); outputs];
        for (b, &len) in lens.iter().enumerate() {
            let states_b = state_tensors
                .iter()
                .map(|s| Value::Tensor(slice_at(s, 0, b)))
                .collect();
            let scanned_b: Vec<Tensor> = scanned.iter().map(|x| slice_at(x, 0, b)).collect();
            let refs: Vec<&Tensor> = scanned_b.iter().collect();
            let axes = vec![0; refs.len()];
            let (states_b, parts) = self.scan_once(ctx, bound, states_b, &refs, &axes, len)?;
            for (acc, s) in final_states.iter_mut().zip(states_b) {
                acc.push(s);
            }
            for (k, mut part) in parts.into_iter().enumerate() {
                if len < max_len {
                    let Some(Value::Tensor(sample)) = part.first() else {
                        return Err(ctx.err(format!(
                            "batch entry {b} has sequence length {len}; cannot pad scan output {k} without a sample"
                        )));
                    };
                    let zeros = zeros_like(sample, sample.shape())?;
                    part.resize(max_len, Value::Tensor(zeros));
                }
                let declared = self.body.plan.output_type(self.states + k);
                scan_outputs[k].push(Value::Tensor(stack_values(ctx, part, 0, declared)?));
            }
        }
        let mut result = Vec::with_capacity(self.states + outputs);
        for (k, parts) in final_states.into_iter().chain(scan_outputs).enumerate() {
            let declared = self.body.plan.output_type(k);
            result.push(Value::Tensor(stack_values(ctx, parts, 0, declared)?));
        }
        Ok(result)
    }
}

/// The common length of the scan inputs along their scan axes.
fn common_length(ctx: &KernelCtx, scanned: &[&Tensor], axes: &[usize]) -> Result<usize> {
    let mut len = None;
    for (j, (x, &axis)) in scanned.iter().zip(axes).enumerate() {
        let n = *x.shape().get(axis).ok_or_else(|| {
            ctx.err(format!(
                "scan input {j} of shape {:?} has no axis {axis}",
                x.shape()
            ))
        })?;
        match len {
            None => len = Some(n),
            Some(l) if l != n => {
                return Err(ctx.err(format!(
                "scan inputs have different lengths along their scan axes: {l} and {n} (input {j})"
            )))
            }
            Some(_) => {}
        }
    }
    Ok(len.unwrap_or(0))
}

fn run_sequence_map(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    frame: &Frame,
    body: &SubPlan,
) -> Result<Vec<Value>> {
    let len = match inputs.first().copied().flatten() {
        Some(Value::Sequence(s)) => s.items.len(),
        Some(other) => {
            return Err(ctx.err(format!("input 0 must be a sequence, got {}", other.kind())))
        }
        None => return Err(ctx.err("required input 0 is missing")),
    };
    for (i, v) in inputs.iter().enumerate() {
        match v {
            Some(Value::Sequence(s)) if s.items.len() != len => {
                return Err(ctx.err(format!(
                    "input {i} is a sequence of {} values, input 0 has {len}",
                    s.items.len()
                )))
            }
            None => return Err(ctx.err(format!("input {i} is missing"))),
            _ => {}
        }
    }
    let bound = body.bind(frame)?;
    let mut results: Vec<Vec<Value>> = vec![Vec::with_capacity(len); body.plan.num_outputs()];
    for t in 0..len {
        let feeds = inputs
            .iter()
            .map(|v| match v {
                Some(Value::Sequence(s)) => s.items.get(t).cloned(),
                other => other.cloned(),
            })
            .collect();
        let outs = run_body(ctx, "body", body, feeds, &bound)?;
        for (acc, v) in results.iter_mut().zip(outs) {
            acc.push(v);
        }
    }
    Ok(results
        .into_iter()
        .enumerate()
        .map(|(k, items)| {
            let elem_dtype = match items.first() {
                Some(Value::Tensor(t)) => Some(t.dtype()),
                _ => sequence_elem_dtype(body.plan.output_type(k)),
            };
            Value::Sequence(Sequence { elem_dtype, items })
        })
        .collect())
}

fn sequence_elem_dtype(declared: Option<&DeclaredType>) -> Option<DType> {
    match declared {
        Some(DeclaredType::Tensor { dtype, .. }) => *dtype,
        _ => None,
    }
}

/// The slice of `t` at `index` along `axis` (the axis removed); callers check the bounds.
fn slice_at(t: &Tensor, axis: usize, index: usize) -> Tensor {
    map_all!(t, a => a.index_axis(Axis(axis), index).to_owned().into_shared())
}

/// Stacks per-iteration values along a new `axis`. With no values, an empty tensor whose
/// element type and other dims come from the body's declared output type (unknown dims as 0).
fn stack_values(
    ctx: &KernelCtx,
    parts: Vec<Value>,
    axis: usize,
    declared: Option<&DeclaredType>,
) -> Result<Tensor> {
    let tensors: Vec<Tensor> = parts
        .into_iter()
        .map(|v| match v {
            Value::Tensor(t) => Ok(t),
            other => Err(ctx.err(format!(
                "scan outputs must be tensors, got {}",
                other.kind()
            ))),
        })
        .collect::<Result<_>>()?;
    let Some(first) = tensors.first() else {
        let Some(DeclaredType::Tensor {
            dtype: Some(dtype),
            dims,
        }) = declared
        else {
            return Err(ctx.err(
                "zero iterations, and the body does not declare the element type of a scan output",
            ));
        };
        let mut shape: Vec<usize> = dims
            .iter()
            .flatten()
            .map(|d| d.and_then(|d| usize::try_from(d).ok()).unwrap_or(0))
            .collect();
        shape.insert(axis.min(shape.len()), 0);
        let sample = empty_of(*dtype).map_err(|e| e.in_node(&ctx.node_ref()))?;
        return zeros_like(&sample, &shape).map_err(|e| e.in_node(&ctx.node_ref()));
    };
    if axis > first.rank() {
        return Err(ctx.err(format!(
            "scan output axis {axis} is out of range for slices of rank {}",
            first.rank()
        )));
    }
    if let Some(other) = tensors.iter().find(|t| t.dtype() != first.dtype()) {
        return Err(ctx.err(format!(
            "iterations produced different element types: {} and {}",
            first.dtype(),
            other.dtype()
        )));
    }
    let mut shape = first.shape().to_vec();
    shape.insert(axis, tensors.len());
    check_size("scan output", &shape).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let stacked = map_all!(first, a => stack_typed(ctx, a, &tensors, axis)?);
    Ok(stacked)
}

fn stack_typed<T: Clone + 'static>(
    ctx: &KernelCtx,
    _first: &Array<T>,
    parts: &[Tensor],
    axis: usize,
) -> Result<Array<T>> {
    let mut views = Vec::with_capacity(parts.len());
    for p in parts {
        let a = array_any(p)
            .downcast_ref::<Array<T>>()
            .ok_or_else(|| ctx.err("iterations produced different element types"))?;
        views.push(a.view());
    }
    ndarray::stack(Axis(axis), &views)
        .map(|a| a.into_shared())
        .map_err(|e| {
            ctx.err(format!(
                "iterations produced values of different shapes ({e}); first {:?}",
                parts.first().map(Tensor::shape).unwrap_or(&[])
            ))
        })
}

/// The typed array of a tensor, for downcasting to the array type of another tensor of the same
/// dtype.
fn array_any(t: &Tensor) -> &dyn Any {
    match t {
        Tensor::F32(a) => a,
        Tensor::F64(a) => a,
        Tensor::F16(a) => a,
        Tensor::BF16(a) => a,
        Tensor::I8(a) => a,
        Tensor::I16(a) => a,
        Tensor::I32(a) => a,
        Tensor::I64(a) => a,
        Tensor::U8(a) => a,
        Tensor::U16(a) => a,
        Tensor::U32(a) => a,
        Tensor::U64(a) => a,
        Tensor::Bool(a) => a,
        Tensor::Str(a) => a,
        Tensor::C64(a) => a,
        Tensor::C128(a) => a,
        Tensor::Coded(_, a) => a,
    }
}

/// An empty tensor of `dtype`, as a type witness for `zeros_like`.
fn empty_of(dtype: DType) -> Result<Tensor> {
    Tensor::from_proto(&TensorProto {
        dims: vec![0],
        data_type: Some(dtype.code()),
        ..Default::default()
    })
}

/// A tensor of `shape` filled with zeros (the element type's default) of `like`'s dtype.
fn zeros_like(like: &Tensor, shape: &[usize]) -> Result<Tensor> {
    check_size("zeros", shape)?;
    Ok(map_all!(like, a => zeros_shaped(a, shape)))
}

fn zeros_shaped<T: Clone + Default>(_like: &Array<T>, shape: &[usize]) -> Array<T> {
    Array::from_elem(IxDyn(shape), T::default())
}
