//! Planned graphs and how they run (the executor): a [`GraphPlan`] is a graph's steps in
//! topological order over a table of value slots, with the slots freed after their last use; a
//! [`SubPlan`] is a subgraph planned inside its owner with the outer values it captures. A step
//! is a kernel, a constant, or a node plan ([`NodePlan`]: control flow, a function body, a
//! Gradient, FlexAttention) that runs planned subgraphs. The planner that builds these is
//! `session` (`GraphPlan::build`); the node plans get it as a [`BuildGraph`] to plan bodies.
//!
//! Layer: above the kernel interface (`kernel`) and the values; below the node plans
//! (`control`, `function`, `gradient`, `flex_attention`) and the planner (`session`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use onnx_proto::{type_proto, FunctionProto, GraphProto, NodeProto, ValueInfoProto};

use crate::dtype::DType;
use crate::error::{NodeRef, RefError, Result};
use crate::kernel::{run_kernel, KernelCtx, KernelFn, KernelRegistry};
use crate::tensor::Tensor;
use crate::value::Value;

/// A node planned with its subgraphs or body: runs on the node's inputs; `frame` is the
/// enclosing graph's values, which subgraphs capture from.
pub(crate) trait NodePlan: std::fmt::Debug + Send + Sync {
    /// Runs the node; returns one value per output it computed.
    fn run(&self, ctx: &KernelCtx, inputs: &[Option<&Value>], frame: &Frame) -> Result<Vec<Value>>;
}

/// The planner of a graph (`GraphPlan::build`), given to the node plans that plan bodies:
/// `outer_visible` says which names the enclosing scopes provide.
pub(crate) type BuildGraph = fn(&GraphProto, &PlanCtx, &dyn Fn(&str) -> bool) -> Result<GraphPlan>;

/// A model-local function's identity: (domain, name, overload), domain normalized.
pub(crate) type FunctionKey = (String, String, String);

/// The model-local functions by key.
pub(crate) type LocalFunctions = BTreeMap<FunctionKey, FunctionProto>;

/// Opset version per domain (`""` for the default domain).
pub type Opsets = BTreeMap<String, i64>;

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

impl DeclaredType {
    /// How `value` breaks this declared type (its element type, its rank, or a static dim),
    /// or `None` when it fits. A declared dim below 0 (-1, as some exporters write for
    /// unknown) constrains nothing; only tensor declarations are checked.
    pub fn broken_by(&self, value: &Value) -> Option<String> {
        let DeclaredType::Tensor { dtype, dims } = self else {
            return None;
        };
        let t = match value {
            Value::Tensor(t) => t,
            other => return Some(format!("expected a tensor, got {}", other.kind())),
        };
        if let Some(d) = dtype.filter(|d| *d != t.dtype()) {
            return Some(format!("expected element type {d}, got {}", t.dtype()));
        }
        let dims = dims.as_ref()?;
        if dims.len() != t.rank() {
            return Some(format!(
                "expected rank {} {dims:?}, got shape {:?}",
                dims.len(),
                t.shape()
            ));
        }
        dims.iter()
            .zip(t.shape())
            .position(|(want, &got)| want.is_some_and(|w| w >= 0 && w != got as i64))
            .map(|axis| {
                format!(
                    "dimension {axis} must be {}, got shape {:?}",
                    dims[axis].unwrap_or(0),
                    t.shape()
                )
            })
    }
}

/// Index of a value in its graph's own value table.
pub(crate) type Slot = usize;

/// Where a step reads a value: a slot of its own graph, or the i-th value its graph captures
/// from the enclosing graph (resolved once at planning, never by name at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Src {
    Local(Slot),
    Outer(usize),
}

/// The values a running graph can read: its own slots and the values it captured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame<'v> {
    values: &'v [Option<Value>],
    outer: &'v [&'v Value],
}

impl<'v> Frame<'v> {
    /// A frame with no values (a lone node evaluated by `eval_node`).
    pub(crate) fn empty() -> Frame<'static> {
        Frame {
            values: &[],
            outer: &[],
        }
    }

    /// The value at `src`, when it has been computed.
    pub(crate) fn get(&self, src: Src) -> Option<&'v Value> {
        match src {
            Src::Local(s) => self.values.get(s).and_then(Option::as_ref),
            Src::Outer(i) => self.outer.get(i).copied(),
        }
    }
}

/// Deepest nesting of subgraphs and function calls the planner accepts.
pub(crate) const MAX_NESTING: usize = 64;

/// What planning a graph needs besides the graph: kernels, opsets, model-local functions, and
/// the chain of function expansions in progress (to refuse recursion).
#[derive(Debug, Clone)]
pub(crate) struct PlanCtx<'a> {
    pub(crate) registry: &'a KernelRegistry,
    pub(crate) opsets: Opsets,
    pub(crate) functions: &'a LocalFunctions,
    pub(crate) call_stack: Vec<FunctionKey>,
    pub(crate) depth: usize,
    /// Decode this graph's large initializers when a run first reads them and drop them after
    /// their last read ([`Session::with_lazy_weights`]); never passed down to subgraphs.
    pub(crate) lazy_weights: bool,
    /// Check every value a node produces, and every subgraph input, against the type its
    /// graph declares for it ([`Session::checking_declarations`]); passed down to subgraphs.
    pub(crate) check_declarations: bool,
}

/// The data of a Gather over a lazy initializer `t`, and new indices when only some rows were
/// decoded: for axis 0 and integer indices all in range, a table of the named rows (sorted,
/// each once) and the indices renumbered into it; otherwise the whole tensor and `None` (the
/// kernel then reports bad indices itself).
fn gather_table(
    t: &onnx_proto::TensorProto,
    ctx: &KernelCtx,
    ins: &[Option<&Value>],
) -> Result<(Value, Option<Value>)> {
    let whole = || Ok((Value::Tensor(Tensor::from_proto(t)?), None));
    let (Some(raw), Some(Value::Tensor(indices))) = (&t.raw_data, ins.get(1).copied().flatten())
    else {
        return whole();
    };
    let elem_bits = t
        .data_type
        .and_then(DType::from_code)
        .map_or(0, DType::bit_width);
    let axis = ctx.attr_int("axis", 0)?;
    let Some(&rows) = t.dims.first() else {
        return whole();
    };
    let row_bytes = t.dims[1..].iter().try_fold(elem_bits / 8, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    });
    let Some(row_bytes) = row_bytes else {
        return whole();
    };
    let fits = elem_bits > 0
        && elem_bits.is_multiple_of(8)
        && (axis == 0 || axis == -(t.dims.len() as i64))
        && matches!(indices.dtype(), DType::Int64 | DType::Int32)
        && usize::try_from(rows)
            .ok()
            .and_then(|r| r.checked_mul(row_bytes))
            == Some(raw.len());
    if !fits {
        return whole();
    }
    let idx = indices.to_i64_vec()?;
    let mut picked: Vec<i64> = Vec::with_capacity(idx.len());
    for &i in &idx {
        let i = if i < 0 { i + rows } else { i };
        if !(0..rows).contains(&i) {
            return whole();
        }
        picked.push(i);
    }
    let mut unique = picked.clone();
    unique.sort_unstable();
    unique.dedup();
    let mut bytes = Vec::with_capacity(unique.len() * row_bytes);
    for &r in &unique {
        let start = r as usize * row_bytes;
        bytes.extend_from_slice(&raw[start..start + row_bytes]);
    }
    let mut dims = t.dims.clone();
    dims[0] = unique.len() as i64;
    let part = onnx_proto::TensorProto {
        dims,
        data_type: t.data_type,
        name: t.name.clone(),
        raw_data: Some(bytes.into()),
        ..Default::default()
    };
    let renumbered: Vec<i64> = picked
        .iter()
        .map(|i| unique.binary_search(i).unwrap_or_default() as i64)
        .collect();
    let shape = indices.shape().to_vec();
    let new_indices = match indices.dtype() {
        DType::Int32 => Tensor::from_vec(
            &shape,
            renumbered.iter().map(|&i| i as i32).collect::<Vec<_>>(),
        )?,
        _ => Tensor::from_vec(&shape, renumbered)?,
    };
    Ok((
        Value::Tensor(Tensor::from_proto(&part)?),
        Some(Value::Tensor(new_indices)),
    ))
}

impl PlanCtx<'_> {
    /// The context for a subgraph or function body one level down, or an error when nesting
    /// is too deep.
    pub(crate) fn descend(&self, node: &NodeRef) -> Result<Self> {
        if self.depth >= MAX_NESTING {
            return Err(RefError::Kernel {
                node: node.clone(),
                reason: format!("subgraphs and function calls nest deeper than {MAX_NESTING}"),
            });
        }
        let mut child = self.clone();
        child.depth += 1;
        child.lazy_weights = false;
        Ok(child)
    }
}

/// How a step computes its outputs.
#[derive(Debug)]
pub(crate) enum StepKind {
    /// A registered kernel.
    Kernel(KernelFn),
    /// A control-flow node with its planned subgraphs (`crate::control`).
    Control(Box<dyn NodePlan>),
    /// An op expanded into its function body (`crate::function`).
    Function(Box<dyn NodePlan>),
    /// A Gradient node with its planned backward graph (`crate::gradient`).
    Gradient(Box<dyn NodePlan>),
    /// A FlexAttention node, whose modifier subgraphs are planned and run by the executor
    /// (`crate::flex_attention`).
    FlexAttention(Box<dyn NodePlan>),
    /// Outputs computed at planning (`Constant`), cloned (sharing buffers) on each run.
    Constant(Vec<Value>),
    /// A kernel run at planning on the values its inputs had then (initializers, which a fed
    /// graph input may override): a run whose inputs equal them shares the outputs, another
    /// runs the kernel.
    Folded {
        kernel: KernelFn,
        inputs: Vec<Value>,
        outputs: Vec<Value>,
    },
}

impl StepKind {
    /// Runs the step on its inputs; `frame` is the enclosing graph's values, which subgraphs
    /// capture from.
    pub(crate) fn run(
        &self,
        ctx: &KernelCtx,
        inputs: &[Option<&Value>],
        frame: &Frame,
    ) -> Result<Vec<Value>> {
        match self {
            StepKind::Kernel(kernel) => run_kernel(*kernel, ctx, inputs),
            StepKind::Control(plan)
            | StepKind::Function(plan)
            | StepKind::Gradient(plan)
            | StepKind::FlexAttention(plan) => plan.run(ctx, inputs, frame),
            StepKind::Constant(values) => Ok(values.clone()),
            StepKind::Folded {
                kernel,
                inputs: planned,
                outputs,
            } => {
                let same = inputs.len() == planned.len()
                    && inputs.iter().zip(planned).all(|(v, p)| *v == Some(p));
                if same {
                    Ok(outputs.clone())
                } else {
                    run_kernel(*kernel, ctx, inputs)
                }
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) node_index: usize,
    pub(crate) node: NodeProto,
    pub(crate) opset: i64,
    pub(crate) kind: StepKind,
    pub(crate) inputs: Vec<Option<Src>>,
    pub(crate) outputs: Vec<Option<Slot>>,
    /// Slots whose last use is this step.
    pub(crate) free: Vec<Slot>,
    /// Lazy initializers (indices into [`GraphPlan::lazy`]) this step reads first.
    pub(crate) load: Vec<usize>,
    /// A lazy initializer only this step reads, and reads without decoding all of it.
    pub(crate) partial: Option<PartialRead>,
}

/// How a step reads a lazy initializer (an index into [`GraphPlan::lazy`]) that no other step
/// reads, without decoding the whole tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartialRead {
    /// A Gather whose data it is: only the rows its indices name are decoded.
    GatherRows(usize),
    /// A MatMul or Gemm whose right operand it is: a 2-D float weight read in place from the
    /// tensor's bytes (a memory-mapped file's pages), never copied or widened as a whole.
    ProductWeight(usize),
}

#[derive(Debug)]
pub(crate) struct GraphInput {
    pub(crate) name: String,
    pub(crate) slot: Slot,
    pub(crate) declared: DeclaredType,
    /// True when an initializer of the same name gives a default.
    pub(crate) has_default: bool,
}

/// A graph prepared for execution.
#[derive(Debug)]
pub(crate) struct GraphPlan {
    pub(crate) name: String,
    pub(crate) inputs: Vec<GraphInput>,
    pub(crate) outputs: Vec<(String, Src)>,
    /// Declared types of the outputs (used for zero-iteration loops and empty sequences).
    pub(crate) output_types: Vec<DeclaredType>,
    pub(crate) initializers: Vec<(Slot, Value)>,
    /// Initializers decoded on each run just before their first read (and freed after their
    /// last, like any value): their slot and tensor (whose `raw_data` shares the model's).
    pub(crate) lazy: Vec<(Slot, onnx_proto::TensorProto)>,
    /// Names captured from the enclosing scope; `Src::Outer(i)` is `outer_names[i]`.
    pub(crate) outer_names: Vec<String>,
    pub(crate) steps: Vec<Step>,
    pub(crate) slot_count: usize,
    /// The declared types to check values against (empty unless planned with
    /// `check_declarations`): by slot, the value's name and its declared type.
    pub(crate) declared: BTreeMap<Slot, (String, DeclaredType)>,
    /// Check the inputs bound to this graph against their declared types (a subgraph planned
    /// with `check_declarations`; a session checks the main graph's inputs itself).
    pub(crate) check_inputs: bool,
}

/// A subgraph planned inside its owner: the plan and, for each name it captures, where that
/// value lives in the owner's frame.
#[derive(Debug)]
pub(crate) struct SubPlan {
    pub(crate) plan: GraphPlan,
    pub(crate) captures: Vec<Src>,
}

impl SubPlan {
    /// The captured values, read from the owner's frame once per run of the owning node.
    pub(crate) fn bind<'v>(&self, frame: &Frame<'v>) -> Result<Vec<&'v Value>> {
        self.captures
            .iter()
            .zip(&self.plan.outer_names)
            .map(|(src, name)| {
                frame.get(*src).ok_or_else(|| {
                    graph_err(
                        &self.plan.name,
                        format!("outer-scope value '{name}' has no value"),
                    )
                })
            })
            .collect()
    }
}

pub(crate) fn graph_err(graph: &str, reason: impl Into<String>) -> RefError {
    RefError::Graph {
        graph: graph.to_string(),
        reason: reason.into(),
    }
}

impl GraphPlan {
    /// An error naming `name` when `value` breaks its declared type.
    fn check_declared(&self, name: &str, declared: &DeclaredType, value: &Value) -> Result<()> {
        match declared.broken_by(value) {
            Some(reason) => Err(graph_err(
                &self.name,
                format!("value '{name}' breaks its declared type: {reason}"),
            )),
            None => Ok(()),
        }
    }

    /// Number of graph inputs.
    pub(crate) fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Number of graph outputs.
    pub(crate) fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// The declared type of output `i`.
    pub(crate) fn output_type(&self, i: usize) -> Option<&DeclaredType> {
        self.output_types.get(i)
    }

    /// Runs the plan. `inputs` follow the graph inputs (`None`: not fed, the initializer
    /// default applies); `outer` are the captured values, in `outer_names` order. Returns the
    /// graph outputs in order.
    pub(crate) fn run(&self, inputs: Vec<Option<Value>>, outer: &[&Value]) -> Result<Vec<Value>> {
        self.run_profiled(inputs, outer, None)
    }

    /// [`GraphPlan::run`], adding each step's wall time to `profile` when one is given.
    pub(crate) fn run_profiled(
        &self,
        inputs: Vec<Option<Value>>,
        outer: &[&Value],
        mut profile: Option<&mut Profile>,
    ) -> Result<Vec<Value>> {
        if inputs.len() > self.inputs.len() {
            return Err(graph_err(
                &self.name,
                format!(
                    "{} inputs given, the graph declares {}",
                    inputs.len(),
                    self.inputs.len()
                ),
            ));
        }
        if outer.len() != self.outer_names.len() {
            return Err(graph_err(
                &self.name,
                format!(
                    "{} outer-scope values bound, the graph captures {}",
                    outer.len(),
                    self.outer_names.len()
                ),
            ));
        }
        let mut values: Vec<Option<Value>> = vec![None; self.slot_count];
        for (slot, v) in &self.initializers {
            values[*slot] = Some(v.clone());
        }
        let mut given = inputs.into_iter();
        for input in &self.inputs {
            match given.next().flatten() {
                Some(v) => {
                    if self.check_inputs {
                        self.check_declared(&input.name, &input.declared, &v)?;
                    }
                    values[input.slot] = Some(v)
                }
                None if input.has_default => {}
                None => {
                    return Err(RefError::Input {
                        input: input.name.clone(),
                        reason: format!("no value was given (graph '{}')", self.name),
                    })
                }
            }
        }
        for step in &self.steps {
            let started = profile.is_some().then(Instant::now);
            for &i in &step.load {
                let (slot, t) = &self.lazy[i];
                // A fed graph input overrides its initializer.
                if values[*slot].is_none() {
                    values[*slot] = Some(Value::Tensor(Tensor::from_proto(t)?));
                }
            }
            let outs = {
                let frame = Frame {
                    values: &values,
                    outer,
                };
                let ins: Vec<Option<&Value>> = step
                    .inputs
                    .iter()
                    .map(|s| s.and_then(|s| frame.get(s)))
                    .collect();
                let ctx = KernelCtx {
                    node: &step.node,
                    index: Some(step.node_index),
                    opset: step.opset,
                };
                // A lazy table is decoded here: only its rows the indices name, or (a fed
                // input, or indices this cannot take) as a whole.
                let table = match step.partial {
                    Some(PartialRead::GatherRows(i)) if ins[0].is_none() => {
                        Some(gather_table(&self.lazy[i].1, &ctx, &ins)?)
                    }
                    _ => None,
                };
                let mut ins = ins;
                if let Some((data, _)) = &table {
                    ins[0] = Some(data);
                }
                if let Some((_, Some(indices))) = &table {
                    ins[1] = Some(indices);
                }
                // A lazy weight is read in place, or decoded here when it cannot be.
                let mut in_place = None;
                let weight = match (step.partial, ins.first().copied().flatten()) {
                    (Some(PartialRead::ProductWeight(i)), Some(_)) if ins[1].is_none() => {
                        let t = &self.lazy[i].1;
                        in_place = crate::kernels::product_in_place(&ctx, &ins, t)?;
                        match in_place {
                            Some(_) => None,
                            None => Some(Value::Tensor(Tensor::from_proto(t)?)),
                        }
                    }
                    _ => None,
                };
                if let Some(w) = &weight {
                    ins[1] = Some(w);
                }
                if let Some(missing) = step
                    .inputs
                    .iter()
                    .zip(&ins)
                    .position(|(s, v)| s.is_some() && v.is_none())
                    .filter(|_| in_place.is_none())
                {
                    return Err(ctx.err(format!(
                        "input {missing} '{}' has no value",
                        step.node.input.get(missing).map_or("", String::as_str)
                    )));
                }
                match in_place {
                    Some(outs) => outs,
                    None => step.kind.run(&ctx, &ins, &frame)?,
                }
            };
            for (slot, v) in step.outputs.iter().zip(outs) {
                if let Some(s) = slot {
                    if let Some((name, declared)) = self.declared.get(s) {
                        self.check_declared(name, declared, &v)?;
                    }
                    values[*s] = Some(v);
                }
            }
            for s in &step.free {
                values[*s] = None;
            }
            if let (Some(p), Some(t)) = (profile.as_deref_mut(), started) {
                p.add(&step.node, t.elapsed());
            }
        }
        let mut out = Vec::with_capacity(self.outputs.len());
        for (k, (name, src)) in self.outputs.iter().enumerate() {
            let used_later = self.outputs[k + 1..].iter().any(|(_, s)| s == src);
            let v = match *src {
                Src::Local(s) if !used_later => values[s].take(),
                Src::Local(s) => values[s].clone(),
                Src::Outer(i) => outer.get(i).map(|v| (*v).clone()),
            };
            let v = v.ok_or_else(|| {
                graph_err(
                    &self.name,
                    format!("graph output '{name}' was not computed"),
                )
            })?;
            out.push(v);
        }
        Ok(out)
    }
}

/// Wall time spent per operator type over one or more profiled runs.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// `(domain, op_type)` -> (node runs, total time).
    by_op: BTreeMap<(String, String), (usize, Duration)>,
}

impl Profile {
    pub(crate) fn add(&mut self, node: &NodeProto, elapsed: Duration) {
        let key = (
            node.domain.clone().unwrap_or_default(),
            node.op_type.clone().unwrap_or_default(),
        );
        let entry = self.by_op.entry(key).or_default();
        entry.0 += 1;
        entry.1 += elapsed;
    }

    /// `(domain, op_type, node runs, total time)`, the most expensive first.
    pub fn by_op(&self) -> Vec<(&str, &str, usize, Duration)> {
        let mut rows: Vec<_> = self
            .by_op
            .iter()
            .map(|((d, o), (n, t))| (d.as_str(), o.as_str(), *n, *t))
            .collect();
        rows.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| (a.0, a.1).cmp(&(b.0, b.1))));
        rows
    }

    /// Total time of every profiled node.
    pub fn total(&self) -> Duration {
        self.by_op.values().map(|(_, t)| *t).sum()
    }
}
