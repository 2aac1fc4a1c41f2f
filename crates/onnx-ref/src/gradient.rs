//! The Gradient operator (`ai.onnx.preview.training::Gradient`, version 1) by reverse-mode
//! symbolic differentiation.
//!
//! At planning, a Gradient node with attributes `xs`, `zs` and `y` becomes a standalone
//! backward graph (`gradient_graph`): its inputs are `xs ++ zs` (fed from the node's inputs),
//! its nodes are the forward nodes of the enclosing graph that lie between those names and `y`
//! (`forward::forward_slice`, copied), then the nodes the per-op vector-Jacobian rules emit
//! (`rules::vjp`), walking the forward nodes in reverse from the seed `dy = ones like y`
//! (for a non-scalar `y` the gradient of the sum of its elements, as the backend test data and
//! onnxruntime's implementation do) and adding the contributions of every use of a value; its
//! outputs are `dy/dx` for each `xs` entry. Values the forward part reads from elsewhere
//! (initializers, graph inputs, values computed without `xs`/`zs`) are captured from the
//! enclosing scope like the outer values of a control-flow body, and are constant for the
//! derivative. The graph is planned once by the same planner and run on the node's inputs.
//!
//! Choices where the spec is silent: a `y` that does not depend on an `xs` entry has a zero
//! gradient for it; an op without a rule on a path the gradient flows through is a planning
//! error naming the Gradient node and the op; a rule emits nodes valid for the model's
//! default-domain opset, which must be at least 9. The backward graphs use a few internal
//! kernels (`kernels/backward.rs`, domain `ai.onnx_opt.internal`) for what ONNX cannot say
//! without static ranks or types (summing a broadcast gradient back to its operand's shape, typed
//! constants, matrix transposes of unknown rank).
//!
//! Layer: a node plan, above the executor (`plan`), `control` and the kernels; below the planner
//! (`session`), which plans the backward graph this module generates.

mod emit;
mod forward;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use onnx_proto::{GraphProto, NodeProto, ValueInfoProto};

use crate::error::{RefError, Result};
use crate::kernel::{normalize_domain, KernelCtx};
use crate::plan::{Frame, NodePlan, Opsets, SubPlan};
use crate::value::Value;

use emit::Emitter;
use forward::forward_slice;
use rules::RuleError;

pub(crate) use crate::kernels::backward::INTERNAL_DOMAIN;

/// The domain of the Gradient operator.
const TRAINING_DOMAIN: &str = "ai.onnx.preview.training";

/// The lowest default-domain opset the backward graphs are written for (Where, Sign, Expand,
/// numpy broadcasting).
const MIN_OPSET: i64 = 9;

/// True for `ai.onnx.preview.training::Gradient`.
pub(crate) fn is_gradient_op(domain: &str, op: &str) -> bool {
    normalize_domain(domain) == TRAINING_DOMAIN && op == "Gradient"
}

/// The attributes of a Gradient node.
struct GradientAttrs {
    xs: Vec<String>,
    zs: Vec<String>,
    y: String,
}

fn read_attrs(ctx: &KernelCtx) -> Result<GradientAttrs> {
    let xs = ctx
        .attr_strings("xs")
        .ok_or_else(|| ctx.err("attribute 'xs' is missing"))?;
    let zs = ctx.attr_strings("zs").unwrap_or_default();
    let y = ctx
        .attr_opt_string("y")?
        .ok_or_else(|| ctx.err("attribute 'y' is missing"))?;
    Ok(GradientAttrs { xs, zs, y })
}

/// The names a Gradient node reads from its graph besides its inputs: the values its forward
/// part captures. The planner orders the node after their producers and keeps them alive until
/// it ran. Empty for other nodes, and for a malformed Gradient node (planning reports it).
pub(crate) fn gradient_reads(node: &NodeProto, index: usize, graph: &GraphProto) -> Vec<String> {
    let domain = node.domain.as_deref().unwrap_or("");
    if !is_gradient_op(domain, node.op_type.as_deref().unwrap_or("")) {
        return Vec::new();
    }
    let ctx = KernelCtx {
        node,
        index: Some(index),
        opset: 1,
    };
    let Ok(attrs) = read_attrs(&ctx) else {
        return Vec::new();
    };
    forward_slice(graph, Some(index), &attrs.xs, &attrs.zs, &attrs.y)
        .map(|s| s.captures)
        .unwrap_or_default()
}

/// Every name the enclosing graph uses (inputs, initializers, node inputs and outputs, value
/// infos, subgraph reads), so that emitted names collide with none.
fn names_in(graph: &GraphProto) -> BTreeSet<String> {
    let mut taken = BTreeSet::new();
    let vis = graph
        .input
        .iter()
        .chain(&graph.output)
        .chain(&graph.value_info);
    taken.extend(vis.filter_map(|v| v.name.clone()));
    taken.extend(graph.initializer.iter().filter_map(|t| t.name.clone()));
    for n in &graph.node {
        taken.extend(n.input.iter().cloned());
        taken.extend(n.output.iter().cloned());
        taken.extend(crate::control::subgraph_reads(n));
    }
    taken
}

/// The declared type of `name` in `graph` (input, value_info or output), or an untyped entry.
fn value_info(graph: &GraphProto, name: &str) -> ValueInfoProto {
    graph
        .input
        .iter()
        .chain(&graph.value_info)
        .chain(&graph.output)
        .find(|v| v.name.as_deref() == Some(name))
        .cloned()
        .unwrap_or_else(|| ValueInfoProto {
            name: Some(name.to_string()),
            ..Default::default()
        })
}

/// Builds the backward graph of a Gradient node (`ctx`) inside `graph`; `outer_visible` says
/// which names the enclosing scopes define. See the module documentation.
pub(crate) fn gradient_graph(
    ctx: &KernelCtx,
    graph: &GraphProto,
    outer_visible: &dyn Fn(&str) -> bool,
    opsets: &Opsets,
) -> Result<GraphProto> {
    let attrs = read_attrs(ctx)?;
    let GradientAttrs { xs, zs, y } = &attrs;
    let opset = *opsets.get("").ok_or_else(|| {
        ctx.err("the backward graph needs the default ONNX domain, which the model does not import")
    })?;
    if opset < MIN_OPSET {
        return Err(ctx.err(format!(
            "the backward graph needs default-domain opset {MIN_OPSET} or later, the model has {opset}"
        )));
    }
    let expected = xs.len() + zs.len();
    if ctx.node.input.len() != expected {
        return Err(ctx.err(format!(
            "{} inputs given, xs and zs name {expected}",
            ctx.node.input.len()
        )));
    }
    if ctx.num_outputs() > xs.len() {
        return Err(ctx.err(format!(
            "{} outputs requested, xs names {}",
            ctx.num_outputs(),
            xs.len()
        )));
    }
    let taken = names_in(graph);
    let defined = |name: &str| {
        graph.input.iter().any(|i| i.name.as_deref() == Some(name))
            || graph
                .initializer
                .iter()
                .any(|t| t.name.as_deref() == Some(name))
            || graph
                .node
                .iter()
                .any(|n| n.output.iter().any(|o| o == name))
            || outer_visible(name)
    };
    let mut seen = BTreeSet::new();
    for (list, name) in xs
        .iter()
        .map(|n| ("xs", n))
        .chain(zs.iter().map(|n| ("zs", n)))
    {
        if name.is_empty() || !defined(name) {
            return Err(ctx.err(format!("'{name}' in {list} names no value of the graph")));
        }
        if !seen.insert(name.as_str()) {
            return Err(ctx.err(format!("'{name}' appears more than once in xs and zs")));
        }
    }
    if !defined(y) {
        return Err(ctx.err(format!("y '{y}' names no value of the graph")));
    }
    let slice = forward_slice(graph, ctx.index, xs, zs, y).map_err(|r| ctx.err(r))?;

    let cut: BTreeSet<&str> = xs.iter().chain(zs).map(String::as_str).collect();
    let mut e = Emitter::new("grad/", taken, opset);
    // Contributions to the gradient of each value, summed when a value has several uses.
    let mut contributions: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    if slice.depends_on_x.contains(y.as_str()) {
        let seed = e.full_like(y, 1.0);
        contributions.entry(y.clone()).or_default().push(seed);
    }
    for &i in slice.nodes.iter().rev() {
        let Some(node) = graph.node.get(i) else {
            continue;
        };
        let gy: Vec<Option<String>> = node
            .output
            .iter()
            .map(|o| total(&mut e, contributions.remove(o)))
            .collect();
        if gy.iter().all(Option::is_none) {
            continue;
        }
        let wants: Vec<bool> = node
            .input
            .iter()
            .map(|n| slice.depends_on_x.contains(n))
            .collect();
        if !wants.iter().any(|&w| w) {
            continue;
        }
        let op = node.op_type.as_deref().unwrap_or("");
        let grads = rules::vjp(&mut e, node, &gy, &wants).map_err(|err| {
            let at = format!("node {i} '{}'", node.name.as_deref().unwrap_or(""));
            match err {
                RuleError::NoRule => {
                    let domain = node.domain.as_deref().unwrap_or("");
                    let qualified = if normalize_domain(domain).is_empty() {
                        op.to_string()
                    } else {
                        format!("{domain}::{op}")
                    };
                    ctx.err(format!("no derivative rule for '{qualified}' ({at})"))
                }
                RuleError::Invalid(reason) => {
                    ctx.err(format!("cannot differentiate '{op}' ({at}): {reason}"))
                }
            }
        })?;
        for (name, g) in node.input.iter().zip(grads) {
            if let Some(g) = g {
                contributions.entry(name.clone()).or_default().push(g);
            }
        }
    }

    let mut outputs = Vec::with_capacity(xs.len());
    let mut used = BTreeSet::new();
    for x in xs {
        let mut g = match total(&mut e, contributions.remove(x)) {
            Some(g) => g,
            None => e.full_like(x, 0.0),
        };
        if !used.insert(g.clone()) {
            g = e.op("Identity", &[&g]);
        }
        outputs.push(ValueInfoProto {
            name: Some(g),
            ..Default::default()
        });
    }

    // The forward nodes, with outputs that are xs/zs names left unnamed (the node's inputs
    // give those values).
    let mut nodes: Vec<NodeProto> = Vec::with_capacity(slice.nodes.len() + e.nodes.len());
    for &i in &slice.nodes {
        if let Some(n) = graph.node.get(i) {
            let mut n = n.clone();
            for o in &mut n.output {
                if cut.contains(o.as_str()) {
                    o.clear();
                }
            }
            nodes.push(n);
        }
    }
    nodes.append(&mut e.nodes);
    Ok(GraphProto {
        name: Some(format!(
            "gradient of '{y}' ({})",
            ctx.node.name.as_deref().unwrap_or("")
        )),
        input: xs.iter().chain(zs).map(|n| value_info(graph, n)).collect(),
        node: nodes,
        output: outputs,
        ..Default::default()
    })
}

/// The sum of a value's gradient contributions (`None` when there are none).
fn total(e: &mut Emitter, parts: Option<Vec<String>>) -> Option<String> {
    let mut parts = parts?.into_iter();
    let first = parts.next()?;
    Some(parts.fold(first, |acc, p| e.add(&acc, &p)))
}

/// A planned Gradient node: its backward graph.
#[derive(Debug)]
pub(crate) struct GradientPlan {
    body: SubPlan,
}

impl GradientPlan {
    /// Wraps the planned backward graph.
    pub(crate) fn new(body: SubPlan) -> Self {
        GradientPlan { body }
    }
}

impl NodePlan for GradientPlan {
    /// Runs the backward graph on the node's inputs (`xs` then `zs` values); `frame` holds
    /// the enclosing graph's values it captures.
    fn run(&self, ctx: &KernelCtx, inputs: &[Option<&Value>], frame: &Frame) -> Result<Vec<Value>> {
        let bound = self.body.bind(frame)?;
        let feeds = inputs.iter().map(|v| v.cloned()).collect();
        let mut outputs = self
            .body
            .plan
            .run(feeds, &bound)
            .map_err(|e| RefError::nested(&ctx.node_ref(), "gradient graph", e))?;
        outputs.truncate(ctx.num_outputs());
        Ok(outputs)
    }
}
