//! Control flow and model-local functions in the fuzzer's whole models ([`super::dag`]).
//!
//! If, Loop and Scan nodes get bodies that are small random DAGs drawn with the same machinery
//! as the main graph (schema nodes planned and evaluated at once, constants, nested control
//! flow down to [`MAX_DEPTH`]); a body node reads the body's inputs and, by name, any value of
//! the enclosing scopes. A body's inputs are values of the generator holding the contents of
//! the first iteration (a Scan's first slice, a Loop's initial values), so every body node sees
//! real shapes; the body's values leave the visible values when the body is closed, while the
//! graph inputs and initializers made meanwhile stay (the body reads them from the main graph).
//! The control node itself is then run in a one-node model by the interpreter's session (its
//! subgraphs read outer values, which `eval_node` does not provide), and its outputs join the
//! graph like any node's.
//!
//! Model-local functions ([`LOCAL_DOMAIN`]) are freshly built pieces of graph: the values a
//! piece reads become the function's inputs, its sinks (and sometimes an inner value) its
//! outputs, one attribute of a body node may refer to a function attribute (`ref_attr_name`,
//! sometimes with a default), and a call replaces the piece. A function may be called again
//! (from the main graph, a body or another function's piece).

use std::collections::BTreeSet;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    ValueInfoProto,
};
use onnx_ref::{DType, Session, Tensor, Value};

use super::function::LocalFunction;
use super::scope::{node_reads, ValueType, LOCAL_DOMAIN};
use super::{int_attr, Gen, GenValue, Reject, ValueKind, MAX_ELEMENTS};
use crate::choice::{random_tensor, DataOpts};

/// Deepest subgraph nesting (a body inside a body).
const MAX_DEPTH: usize = 2;

/// Largest value (in elements) a Loop carries or a Scan scans.
const MAX_CARRIED: usize = 512;

/// Control-flow and function state of the model being generated.
#[derive(Debug, Default)]
pub(crate) struct Nesting {
    /// Control flow and functions may be drawn in this model.
    pub enabled: bool,
    /// Sequence and optional chains may be drawn in this model's main graph ([`super::seq`]).
    pub containers: bool,
    /// The default-domain operators schema nodes are drawn from.
    pub ops: Vec<&'static str>,
    /// Subgraph depth of the nodes being built (0: the main graph).
    pub(super) depth: usize,
    /// A function's piece of graph is being built (no function is defined inside it).
    pub(super) in_function: bool,
    /// The model-local functions defined so far, callees first.
    pub(super) functions: Vec<LocalFunction>,
}

/// Where a subgraph (or a function's piece) starts among the generator's values and nodes.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScopeStart {
    pub values: usize,
    pub nodes: usize,
}

fn graph_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

fn ints_attr(name: &str, ints: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints,
        ..Default::default()
    }
}

/// The slice of `t` at index 0 along `axis` (the axis removed), by the Gather kernel.
fn first_slice(t: &Tensor, axis: usize) -> Result<Tensor, Reject> {
    let node = NodeProto {
        input: vec!["x".into(), "i".into()],
        output: vec!["y".into()],
        op_type: Some("Gather".into()),
        attribute: vec![int_attr("axis", axis as i64)],
        ..Default::default()
    };
    let args = [
        Some(Value::Tensor(t.clone())),
        Some(Value::Tensor(Tensor::scalar(0i64))),
    ];
    match onnx_ref::eval_node(&node, 13, &args).map(|mut v| v.pop()) {
        Ok(Some(Value::Tensor(s))) => Ok(s),
        _ => Err(Reject("cannot slice a scan input".into())),
    }
}

impl Gen<'_> {
    /// One random node of the current scope: sometimes (in models with control flow, above
    /// the deepest nesting) an If, Loop, Scan or function call, else a `Constant` or a schema
    /// node.
    pub(super) fn add_random_node(&mut self) -> Result<(), Reject> {
        let depth = self.nest.depth;
        if self.nest.enabled && depth < MAX_DEPTH && self.ch.one_in(if depth == 0 { 3 } else { 6 })
        {
            return self.add_control();
        }
        if self.nest.containers && depth == 0 && (self.nodes.is_empty() || self.ch.one_in(3)) {
            return self.add_container_node();
        }
        if self.ch.one_in(12) {
            return self.add_constant_node();
        }
        if self.nest.ops.is_empty() {
            return self.reject("no operator to draw");
        }
        let op = self.nest.ops[self.ch.below(self.nest.ops.len())];
        // A node that cannot be built is tried once more on new leaves only: the ops with a
        // planner need shapes that earlier values seldom have.
        let mark = self.mark();
        let r = self.add_schema_node(op, true);
        if r.is_ok() {
            return r;
        }
        self.rollback(mark);
        self.add_schema_node(op, false)
    }

    /// Up to `n` random nodes in the current scope (failed attempts rolled back); how many.
    pub(super) fn random_nodes(&mut self, n: usize) -> usize {
        let (mut built, mut attempts) = (0, 0);
        while built < n && attempts < 6 * n {
            attempts += 1;
            let mark = self.mark();
            match self.add_random_node() {
                Ok(()) => built += 1,
                Err(_) => self.rollback(mark),
            }
        }
        built
    }

    /// An If, Loop, Scan, a new local function, or a call of one made earlier.
    fn add_control(&mut self) -> Result<(), Reject> {
        let define = self.nest.depth == 0 && !self.nest.in_function;
        let call = !self.nest.functions.is_empty();
        match self.ch.below(5) {
            0 => self.add_if(),
            1 => self.add_loop(),
            2 => self.add_scan(),
            _ if call && (!define || self.ch.one_in(3)) => self.call_function(),
            _ if define => self.define_function(),
            _ => self.add_if(),
        }
    }

    /// The model-local functions, callees first.
    pub(super) fn function_protos(&self) -> Vec<FunctionProto> {
        self.nest
            .functions
            .iter()
            .map(|f| f.proto.clone())
            .collect()
    }

    /// The model's opset imports: the default domain, and the local one when functions exist.
    pub(super) fn opset_imports(&self) -> Vec<OperatorSetIdProto> {
        let mut out = vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(self.opset),
        }];
        if !self.nest.functions.is_empty() {
            out.push(OperatorSetIdProto {
                domain: Some(LOCAL_DOMAIN.into()),
                version: Some(1),
            });
        }
        out
    }

    /// The IR version the model needs at `ir` for its opset: 8 with functions, 9 when a
    /// function declares an attribute default.
    pub(super) fn ir_with_functions(&self, ir: i64) -> i64 {
        let f = &self.nest.functions;
        if f.iter().any(|f| !f.proto.attribute_proto.is_empty()) {
            ir.max(9)
        } else if !f.is_empty() {
            ir.max(8)
        } else {
            ir
        }
    }

    /// Number of functions defined (a rollback point).
    pub(super) fn functions_defined(&self) -> usize {
        self.nest.functions.len()
    }

    /// Forgets the functions defined after a rollback point.
    pub(super) fn forget_functions(&mut self, n: usize) {
        self.nest.functions.truncate(n);
    }

    pub(super) fn scope_start(&self) -> ScopeStart {
        ScopeStart {
            values: self.values.len(),
            nodes: self.nodes.len(),
        }
    }

    /// Runs `f` one subgraph level deeper.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, Reject>) -> Result<T, Reject> {
        self.nest.depth += 1;
        let r = f(self);
        self.nest.depth -= 1;
        r
    }

    /// Closes a scope: its nodes leave the graph (returned), its node values leave the visible
    /// values except those named in `keep`; leaves made meanwhile stay.
    pub(super) fn close_scope(&mut self, s: ScopeStart, keep: &BTreeSet<String>) -> Vec<NodeProto> {
        let nodes = self.nodes.split_off(s.nodes);
        let tail = self.values.split_off(s.values);
        for v in &tail {
            self.by_name.remove(&v.name);
        }
        for v in tail {
            if v.kind != ValueKind::Node || keep.contains(&v.name) {
                self.push_value(v);
            }
        }
        nodes
    }

    /// A body input holding `tensor` (its first-iteration contents).
    fn body_input(&mut self, tensor: Tensor, base: &str) -> usize {
        let name = self.fresh_name(base);
        self.push_value(GenValue {
            name,
            tensor,
            kind: ValueKind::Node,
            data: DataOpts::default(),
            container: None,
        })
    }

    pub(super) fn value_type(&self, k: usize) -> ValueType {
        let t = &self.values[k].tensor;
        (t.dtype(), t.shape().to_vec())
    }

    pub(super) fn has_type(&self, k: usize, want: &ValueType) -> bool {
        let t = &self.values[k].tensor;
        t.dtype() == want.0 && t.shape() == want.1.as_slice()
    }

    /// A `Constant` node of `dtype` and `shape` with random contents (Constant-1 holds
    /// floating types only).
    fn constant_of(&mut self, dtype: DType, shape: &[usize]) -> Result<usize, Reject> {
        if self.opset < 9 && !matches!(dtype, DType::Float | DType::Double | DType::Float16) {
            return self.reject("Constant-1 holds floating types only");
        }
        let Some(t) = random_tensor(&mut self.rng, dtype, shape, &DataOpts::default()) else {
            return self.reject("cannot generate a constant");
        };
        self.constant_tensor(t)
    }

    fn constant_tensor(&mut self, t: Tensor) -> Result<usize, Reject> {
        let attr = AttributeProto {
            name: Some("value".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(t.to_proto("")),
            ..Default::default()
        };
        Ok(self.add_node("Constant", "", Vec::new(), vec![attr], 1, self.opset)?[0])
    }

    /// A scalar constant: a `Constant` node from opset 9, else an initializer.
    fn scalar_constant(&mut self, t: Tensor, base: &str) -> Result<usize, Reject> {
        if self.opset >= 9 && self.ch.one_in(2) {
            return self.constant_tensor(t);
        }
        Ok(self.push_initializer(t, base))
    }

    /// A visible value for a body output of type `want` (any type when `None`): `Identity`
    /// or an update (`update_of`) of a visible value of that type, or a `Constant`.
    fn identity_or_constant(
        &mut self,
        s: ScopeStart,
        want: Option<&ValueType>,
    ) -> Result<usize, Reject> {
        let candidates: Vec<usize> = (0..self.values.len())
            .filter(|&k| want.is_none_or(|w| self.has_type(k, w)))
            .filter(|&k| self.values[k].tensor.dtype() != DType::String)
            .collect();
        if !candidates.is_empty() && !self.ch.one_in(3) {
            let k = candidates[self.ch.below(candidates.len())];
            if self.ch.one_in(2) {
                if let Some(u) = self.update_of(s, k) {
                    return Ok(u);
                }
            }
            let name = self.values[k].name.clone();
            return Ok(self.add_node("Identity", "", vec![name], Vec::new(), 1, self.opset)?[0]);
        }
        let (dtype, shape) = match want {
            Some(w) => w.clone(),
            None => (self.dtype, self.base.clone()),
        };
        self.constant_of(dtype, &shape)
    }

    /// Node values of the scope from `s` of type `want`, not in `taken`, most recent last.
    fn scope_values(&self, s: ScopeStart, want: Option<&ValueType>, taken: &[usize]) -> Vec<usize> {
        (s.values..self.values.len())
            .filter(|&k| self.values[k].kind == ValueKind::Node && !taken.contains(&k))
            .filter(|&k| want.is_none_or(|w| self.has_type(k, w)))
            .collect()
    }

    /// A recent one of `candidates` (not empty).
    fn recent(&mut self, candidates: &[usize]) -> usize {
        let n = candidates.len().min(3);
        candidates[candidates.len() - 1 - self.ch.below(n)]
    }

    /// A body output of type `want` (any when `None`) for a body started at `s`: a value of
    /// the body, else, for a body input `fallback`, an update of it or the input passed
    /// through, else an Identity or Constant.
    fn body_output(
        &mut self,
        s: ScopeStart,
        want: Option<&ValueType>,
        fallback: Option<usize>,
        taken: &[usize],
    ) -> Result<usize, Reject> {
        let local = self.scope_values(s, want, taken);
        let fallback = fallback.filter(|f| !taken.contains(f));
        if !local.is_empty() && !self.ch.one_in(5) {
            return Ok(self.recent(&local));
        }
        if let Some(f) = fallback {
            if !self.ch.one_in(3) {
                if let Some(k) = self.update_of(s, f) {
                    return Ok(k);
                }
            }
            if !self.ch.one_in(4) {
                return Ok(f);
            }
        }
        self.identity_or_constant(s, want)
    }

    /// `v op u` of the same type as `v` (op Add, Sub or Mul; `u` a visible value that
    /// broadcasts to `v`, most often one of the scope from `s`), or `None`.
    fn update_of(&mut self, s: ScopeStart, v: usize) -> Option<usize> {
        let want = self.value_type(v);
        let fits = |g: &Self, k: usize| {
            let t = &g.values[k].tensor;
            t.dtype() == want.0
                && t.rank() <= want.1.len()
                && t.shape()
                    .iter()
                    .rev()
                    .zip(want.1.iter().rev())
                    .all(|(&a, &b)| a == b || a == 1)
        };
        let all: Vec<usize> = (0..self.values.len()).filter(|&k| fits(self, k)).collect();
        let local: Vec<usize> = all.iter().copied().filter(|&k| k >= s.values).collect();
        let pool = if !local.is_empty() && !self.ch.one_in(4) {
            local
        } else {
            all
        };
        if pool.is_empty() || matches!(want.0, DType::Bool | DType::String) {
            return None;
        }
        let u = pool[self.ch.below(pool.len())];
        let op = self.ch.pick(&["Add", "Sub", "Mul"]);
        let names = vec![self.values[v].name.clone(), self.values[u].name.clone()];
        let mark = self.mark();
        match self.add_node(op, "", names, Vec::new(), 1, self.opset) {
            Ok(k) if self.has_type(k[0], &want) => Some(k[0]),
            _ => {
                self.rollback(mark);
                None
            }
        }
    }

    /// The graph of a body: its inputs, outputs and the nodes of its scope.
    fn body_graph(
        &mut self,
        s: ScopeStart,
        part: &str,
        inputs: &[usize],
        outputs: &[usize],
    ) -> GraphProto {
        let input: Vec<ValueInfoProto> =
            inputs.iter().map(|&k| self.value_info(k, false)).collect();
        let output: Vec<ValueInfoProto> =
            outputs.iter().map(|&k| self.value_info(k, false)).collect();
        let node = self.close_scope(s, &BTreeSet::new());
        GraphProto {
            name: Some(self.fresh_name(part)),
            node,
            input,
            output,
            ..Default::default()
        }
    }

    /// Runs `node` (with subgraphs, or a call of a local function) in a one-node model whose
    /// graph inputs are the values it reads; adds its outputs to the visible values.
    pub(super) fn run_and_add(&mut self, node: NodeProto) -> Result<Vec<usize>, Reject> {
        let mut graph = GraphProto {
            name: Some("eval".into()),
            node: vec![node.clone()],
            ..Default::default()
        };
        let mut feeds = Vec::new();
        for name in node_reads(&node) {
            let Some(&k) = self.by_name.get(&name) else {
                return self.reject(format!("reads '{name}', which is not visible"));
            };
            graph.input.push(self.value_info(k, false));
            feeds.push((name, Value::Tensor(self.values[k].tensor.clone())));
        }
        graph.output = node
            .output
            .iter()
            .map(|o| ValueInfoProto {
                name: Some(o.clone()),
                ..Default::default()
            })
            .collect();
        let model = ModelProto {
            ir_version: Some(self.ir_with_functions(7)),
            opset_import: self.opset_imports(),
            graph: Some(graph),
            functions: self.function_protos(),
            ..Default::default()
        };
        let op = node.op_type.clone().unwrap_or_default();
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Session::new(&model).and_then(|s| s.run(feeds))
        }));
        let outs = match run {
            Ok(Ok(outs)) => outs,
            Ok(Err(e)) => return self.reject(format!("{op}: {e}")),
            Err(_) => return self.reject(format!("{op}: the interpreter panicked")),
        };
        let mut ids = Vec::new();
        for (name, v) in outs {
            let Value::Tensor(t) = v else {
                return self.reject(format!("{op}: a non-tensor output"));
            };
            if t.len() > MAX_ELEMENTS {
                return self.reject("an output over the size limit");
            }
            ids.push(self.push_value(GenValue {
                name,
                tensor: t,
                kind: ValueKind::Node,
                data: DataOpts::default(),
                container: None,
            }));
        }
        self.nodes.push(node);
        Ok(ids)
    }

    /// Fresh names for `n` node outputs.
    pub(super) fn output_names(&mut self, n: usize) -> Vec<String> {
        (0..n).map(|_| self.fresh_name("t")).collect()
    }

    /// A visible value (not a string, at most `max` elements, rank at least `min_rank`), most
    /// often a recent one; `None` when there is none.
    fn some_value(&mut self, max: usize, min_rank: usize) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.values.len())
            .filter(|&k| {
                let t = &self.values[k].tensor;
                t.dtype() != DType::String && t.len() <= max && t.rank() >= min_rank
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        Some(if self.ch.one_in(3) {
            candidates[self.ch.below(candidates.len())]
        } else {
            let recent = &candidates[candidates.len().saturating_sub(6)..];
            recent[self.ch.below(recent.len())]
        })
    }

    /// A visible value, or a new graph input or initializer of the base shape.
    fn value_or_leaf(&mut self, max: usize) -> Result<usize, Reject> {
        match self.some_value(max, 0) {
            Some(k) if !self.ch.one_in(4) => Ok(k),
            _ => {
                let shape = self.base.clone();
                let kind = if self.ch.one_in(3) {
                    ValueKind::Init
                } else {
                    ValueKind::Input
                };
                self.add_leaf(shape, self.dtype, kind, "x")
            }
        }
    }

    /// An If condition: a bool graph input, a comparison of a reduced value, or a constant.
    fn condition(&mut self) -> Result<usize, Reject> {
        let value = self.ch.one_in(2);
        match self.ch.below(3) {
            0 => {
                let shape = if self.ch.one_in(2) { vec![] } else { vec![1] };
                let k = self.add_leaf(shape.clone(), DType::Bool, ValueKind::Input, "c")?;
                if let Ok(t) = Tensor::from_vec(&shape, vec![value]) {
                    self.values[k].tensor = t;
                }
                Ok(k)
            }
            1 => self.computed_condition(),
            _ => self.scalar_constant(Tensor::scalar(value), "c"),
        }
    }

    /// `Greater(ReduceMax(Cast(x, float)), 0)` (or `Less`) of a visible value `x`.
    fn computed_condition(&mut self) -> Result<usize, Reject> {
        let Some(x) = self.some_value(MAX_ELEMENTS, 0) else {
            return self.reject("no value to compare");
        };
        if self.values[x].tensor.is_empty() {
            return self.reject("an empty value has no maximum");
        }
        let mut name = self.values[x].name.clone();
        if self.values[x].tensor.dtype() != DType::Float {
            let to = int_attr("to", DType::Float.code() as i64);
            let k = self.add_node("Cast", "", vec![name], vec![to], 1, self.opset)?[0];
            name = self.values[k].name.clone();
        }
        let keep = int_attr("keepdims", 0);
        let r = self.add_node("ReduceMax", "", vec![name], vec![keep], 1, self.opset)?[0];
        let zero = self.scalar_constant(Tensor::scalar(0.0f32), "zero")?;
        let op = self.ch.pick(&["Greater", "Less"]);
        let names = vec![self.values[r].name.clone(), self.values[zero].name.clone()];
        Ok(self.add_node(op, "", names, Vec::new(), 1, self.opset)?[0])
    }

    /// An If node: a condition and two branches of a few nodes each with outputs of equal
    /// types.
    fn add_if(&mut self) -> Result<(), Reject> {
        let cond = self.condition()?;
        let n = 1 + usize::from(self.ch.one_in(3));
        let (then_branch, types) = self.nested(|g| g.branch("then", n, None))?;
        let (else_branch, _) = self.nested(|g| g.branch("else", n, Some(&types)))?;
        let node = NodeProto {
            input: vec![self.values[cond].name.clone()],
            output: self.output_names(n),
            op_type: Some("If".into()),
            attribute: vec![
                graph_attr("then_branch", then_branch),
                graph_attr("else_branch", else_branch),
            ],
            ..Default::default()
        };
        self.run_and_add(node)?;
        Ok(())
    }

    /// An If branch: a few random nodes, then `n` outputs of the types `like` (any types when
    /// `None`); returns the graph and the output types.
    fn branch(
        &mut self,
        part: &str,
        n: usize,
        like: Option<&[ValueType]>,
    ) -> Result<(GraphProto, Vec<ValueType>), Reject> {
        let s = self.scope_start();
        let size = 1 + self.ch.below(4);
        self.random_nodes(size);
        let mut outs: Vec<usize> = Vec::new();
        for i in 0..n {
            let want = like.and_then(|l| l.get(i));
            let k = self.body_output(s, want, None, &outs)?;
            outs.push(k);
        }
        let types = outs.iter().map(|&k| self.value_type(k)).collect();
        Ok((self.body_graph(s, part, &[], &outs), types))
    }

    /// A Loop node: a trip count (a constant or a graph input, 0 to 4, or absent), a condition
    /// (or none), one or two loop-carried values and a body updating them, with zero or one
    /// scan output.
    fn add_loop(&mut self) -> Result<(), Reject> {
        let trips = self.ch.below(5) as i64;
        // Without a trip count the body's condition ends the loop (int64 Less: opset 9).
        let m = match self.ch.below(5) {
            0 if self.opset >= 9 => None,
            1 => {
                let k = self.add_leaf(Vec::new(), DType::Int64, ValueKind::Input, "m")?;
                self.values[k].tensor = Tensor::scalar(trips);
                Some(k)
            }
            _ => Some(self.scalar_constant(Tensor::scalar(trips), "m")?),
        };
        let cond = if m.is_none() || self.ch.one_in(2) {
            Some(self.condition()?)
        } else {
            None
        };
        let mut carried = Vec::new();
        for _ in 0..1 + usize::from(self.ch.one_in(3)) {
            carried.push(self.value_or_leaf(MAX_CARRIED)?);
        }
        let (body, scans) = self.nested(|g| g.loop_body(&carried, m.is_none()))?;
        let name = |k: Option<usize>| k.map_or(String::new(), |k| self.values[k].name.clone());
        let mut input = vec![name(m), name(cond)];
        input.extend(carried.iter().map(|&k| self.values[k].name.clone()));
        let node = NodeProto {
            input,
            output: self.output_names(carried.len() + scans),
            op_type: Some("Loop".into()),
            attribute: vec![graph_attr("body", body)],
            ..Default::default()
        };
        self.run_and_add(node)?;
        Ok(())
    }

    /// A Loop body over `carried`: the iteration number and condition, the carried values,
    /// a few random nodes; outputs the condition (passed through, or `Less(i, K)` when
    /// `must_stop`), the updated values and zero or one scan output. Returns the number of
    /// scan outputs.
    fn loop_body(
        &mut self,
        carried: &[usize],
        must_stop: bool,
    ) -> Result<(GraphProto, usize), Reject> {
        let s = self.scope_start();
        let iter = self.body_input(Tensor::scalar(0i64), "i");
        let cond_in = self.body_input(Tensor::scalar(true), "cond");
        let mut inputs = vec![iter, cond_in];
        for &k in carried {
            let t = self.values[k].tensor.clone();
            inputs.push(self.body_input(t, "v"));
        }
        let size = 1 + self.ch.below(4);
        self.random_nodes(size);
        let cond_out = if must_stop || (self.opset >= 9 && self.ch.one_in(4)) {
            let k = 1 + self.ch.below(3) as i64;
            let bound = self.constant_tensor(Tensor::scalar(k))?;
            let names = vec![
                self.values[iter].name.clone(),
                self.values[bound].name.clone(),
            ];
            self.add_node("Less", "", names, Vec::new(), 1, self.opset)?[0]
        } else if self.ch.one_in(4) {
            let name = self.values[cond_in].name.clone();
            self.add_node("Identity", "", vec![name], Vec::new(), 1, self.opset)?[0]
        } else {
            cond_in
        };
        let mut outs = vec![cond_out];
        for &v in &inputs[2..] {
            let want = self.value_type(v);
            let k = self.body_output(s, Some(&want), Some(v), &outs)?;
            outs.push(k);
        }
        let scans = usize::from(self.ch.one_in(2));
        for _ in 0..scans {
            let k = self.body_output(s, None, None, &outs)?;
            outs.push(k);
        }
        Ok((self.body_graph(s, "body", &inputs, &outs), scans))
    }

    /// A Scan node: one scanned value (a small scan axis), one or two state values and a body
    /// updating them with zero or one scan output. Scan-8 (opset 8) has a batch axis on every
    /// input and output and no scan axes.
    fn add_scan(&mut self) -> Result<(), Reject> {
        if self.opset < 8 {
            return self.reject("Scan needs opset 8");
        }
        let batched = self.opset < 9;
        let lead = usize::from(batched);
        let x = match self.some_value(MAX_CARRIED, 1 + lead) {
            Some(k) if !self.ch.one_in(4) => k,
            _ => {
                let mut shape = vec![self.nonzero_dim(), 1 + self.ch.below(3)];
                shape.truncate(1 + lead + usize::from(self.ch.one_in(2)));
                self.add_leaf(shape, self.dtype, ValueKind::Input, "xs")?
            }
        };
        let xshape = self.values[x].tensor.shape().to_vec();
        let axis = if batched {
            1
        } else {
            self.ch.below(xshape.len())
        };
        if xshape.len() <= axis || xshape[axis] == 0 || (batched && xshape[0] == 0) {
            return self.reject("a scan input with nothing to scan");
        }
        let mut states = Vec::new();
        for _ in 0..1 + usize::from(self.ch.one_in(3)) {
            let k = if batched {
                let fits = |g: &Self, k: usize| {
                    let t = &g.values[k].tensor;
                    t.rank() >= 1 && t.shape()[0] == xshape[0] && t.dtype() != DType::String
                };
                let known: Vec<usize> = (0..self.values.len()).filter(|&k| fits(self, k)).collect();
                if !known.is_empty() && !self.ch.one_in(3) {
                    known[self.ch.below(known.len())]
                } else {
                    let mut shape = vec![xshape[0]];
                    let r = self.ch.below(2);
                    shape.extend(self.shape_of_rank(r));
                    self.add_leaf(shape, self.dtype, ValueKind::Input, "s")?
                }
            } else {
                self.value_or_leaf(MAX_CARRIED)?
            };
            states.push(k);
        }
        let mut slices = Vec::new();
        for &k in &states {
            let t = &self.values[k].tensor;
            slices.push(if batched {
                first_slice(t, 0)?
            } else {
                t.clone()
            });
        }
        let mut scanned = first_slice(&self.values[x].tensor, axis)?;
        if batched {
            scanned = first_slice(&scanned, 0)?;
        }
        let (body, scans, out_ranks) = self.nested(|g| g.scan_body(slices, scanned))?;
        let mut attribute = vec![graph_attr("body", body), int_attr("num_scan_inputs", 1)];
        let negative = self.opset >= 11 && self.ch.one_in(3);
        if batched {
            if self.ch.one_in(3) {
                attribute.push(ints_attr("directions", vec![self.ch.below(2) as i64]));
            }
        } else {
            if axis != 0 || self.ch.one_in(3) {
                let a = axis as i64 - if negative { xshape.len() as i64 } else { 0 };
                attribute.push(ints_attr("scan_input_axes", vec![a]));
            }
            if self.ch.one_in(3) {
                let d = vec![self.ch.below(2) as i64];
                attribute.push(ints_attr("scan_input_directions", d));
            }
            if scans > 0 && self.ch.one_in(3) {
                let axes: Vec<i64> = out_ranks
                    .iter()
                    .map(|&r| {
                        let a = self.ch.below(r + 1) as i64;
                        if negative {
                            a - (r as i64 + 1)
                        } else {
                            a
                        }
                    })
                    .collect();
                attribute.push(ints_attr("scan_output_axes", axes));
            }
            if scans > 0 && self.ch.one_in(3) {
                let d = (0..scans).map(|_| self.ch.below(2) as i64).collect();
                attribute.push(ints_attr("scan_output_directions", d));
            }
        }
        let mut input = if batched {
            vec![String::new()]
        } else {
            Vec::new()
        };
        input.extend(states.iter().map(|&k| self.values[k].name.clone()));
        input.push(self.values[x].name.clone());
        let node = NodeProto {
            input,
            output: self.output_names(states.len() + scans),
            op_type: Some("Scan".into()),
            attribute,
            ..Default::default()
        };
        self.run_and_add(node)?;
        Ok(())
    }

    /// A Scan body over the state values `states` and one scanned slice; returns the graph,
    /// the number of scan outputs and their ranks.
    fn scan_body(
        &mut self,
        states: Vec<Tensor>,
        scanned: Tensor,
    ) -> Result<(GraphProto, usize, Vec<usize>), Reject> {
        let s = self.scope_start();
        let mut inputs: Vec<usize> = states
            .into_iter()
            .map(|t| self.body_input(t, "s"))
            .collect();
        let n_states = inputs.len();
        inputs.push(self.body_input(scanned, "xs"));
        let size = 1 + self.ch.below(4);
        self.random_nodes(size);
        let mut outs = Vec::new();
        for &v in &inputs[..n_states] {
            let want = self.value_type(v);
            let k = self.body_output(s, Some(&want), Some(v), &outs)?;
            outs.push(k);
        }
        let scans = usize::from(!self.ch.one_in(3));
        for _ in 0..scans {
            let k = self.body_output(s, None, None, &outs)?;
            outs.push(k);
        }
        let ranks = outs[n_states..]
            .iter()
            .map(|&k| self.values[k].tensor.rank())
            .collect();
        Ok((self.body_graph(s, "body", &inputs, &outs), scans, ranks))
    }
}
