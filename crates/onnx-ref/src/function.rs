//! Function expansion: a node whose op has no kernel runs through a function body, planned
//! once with the enclosing graph. Bodies come from the model's own functions
//! (`ModelProto.functions`, matched by domain, name and overload) or, failing that, from the
//! op's schema (`onnx_schema`, context-independent bodies only).
//!
//! Each call site gets its own plan of the body, so values inside two calls of one function
//! never collide: the body's names live in its own slot table. Attributes are bound at
//! planning: a body attribute with `ref_attr_name` takes the caller's attribute of that name,
//! else the function's default (`attribute_proto`, or the schema default), else it is absent.
//! Formal inputs the caller leaves out become absent inputs of the body nodes that read them.
//!
//! Layer: a node plan, above the executor (`plan`) and the kernel interface; below the planner
//! (`session`), which passes its graph planner (`GraphPlan::build`) to `plan_function`.

use std::collections::BTreeSet;

use onnx_proto::{AttributeProto, GraphProto, ModelProto, NodeProto, ValueInfoProto};

use crate::error::{RefError, Result};
use crate::kernel::{normalize_domain, KernelCtx};
use crate::plan::{BuildGraph, Frame, FunctionKey, GraphPlan, LocalFunctions, NodePlan, PlanCtx};
use crate::value::Value;

/// The model's functions by (domain, name, overload).
pub(crate) fn local_functions(model: &ModelProto) -> LocalFunctions {
    model
        .functions
        .iter()
        .map(|f| {
            let key = (
                normalize_domain(f.domain.as_deref().unwrap_or("")).to_string(),
                f.name.clone().unwrap_or_default(),
                f.overload.clone().unwrap_or_default(),
            );
            (key, f.clone())
        })
        .collect()
}

fn key_label(key: &FunctionKey) -> String {
    let (domain, name, overload) = key;
    let mut out = if domain.is_empty() {
        name.clone()
    } else {
        format!("{domain}::{name}")
    };
    if !overload.is_empty() {
        out.push_str(&format!(":{overload}"));
    }
    out
}

/// An op expanded into its function body for one call site.
#[derive(Debug)]
pub(crate) struct FunctionPlan {
    /// "function d::F", for error paths.
    label: String,
    body: GraphPlan,
    /// For each body input, the node input that feeds it.
    feeds: Vec<usize>,
    /// For each body output, the node output it becomes.
    places: Vec<usize>,
}

impl NodePlan for FunctionPlan {
    /// Runs the body on the node's inputs; returns one value per node output (an empty
    /// optional stands in for outputs the node does not request). A body reads no outer value:
    /// `frame` is not used.
    fn run(
        &self,
        ctx: &KernelCtx,
        inputs: &[Option<&Value>],
        _frame: &Frame,
    ) -> Result<Vec<Value>> {
        let feeds = self
            .feeds
            .iter()
            .map(|&i| inputs.get(i).copied().flatten().cloned())
            .collect();
        let values = self
            .body
            .run(feeds, &[])
            .map_err(|e| RefError::nested(&ctx.node_ref(), self.label.as_str(), e))?;
        let mut out = vec![Value::Optional(None); ctx.num_outputs()];
        for (&place, value) in self.places.iter().zip(values) {
            if let Some(slot) = out.get_mut(place) {
                *slot = value;
            }
        }
        Ok(out)
    }
}

/// The function body for a node without a kernel, planned with `build`; `None` when neither the
/// model nor the schema gives one (the caller reports `MissingKernel`).
pub(crate) fn plan_function(
    ctx: &KernelCtx,
    plan_ctx: &PlanCtx,
    build: BuildGraph,
) -> Result<Option<FunctionPlan>> {
    let domain = normalize_domain(ctx.node.domain.as_deref().unwrap_or("")).to_string();
    let key: FunctionKey = (
        domain.clone(),
        ctx.op().to_string(),
        ctx.node.overload.clone().unwrap_or_default(),
    );
    let (body, defaults) = if let Some(f) = plan_ctx.functions.get(&key) {
        (f.clone(), f.attribute_proto.clone())
    } else {
        let Some(schema) = onnx_schema::registry().lookup(&domain, ctx.op(), ctx.opset) else {
            return Ok(None);
        };
        let Some(body) = schema.function_body(ctx.opset) else {
            return Ok(None);
        };
        let mut defaults: Vec<AttributeProto> = schema
            .attributes
            .iter()
            .filter_map(|a| a.default.clone())
            .collect();
        defaults.extend(body.attribute_proto.iter().cloned());
        (body, defaults)
    };
    let label = format!("function {}", key_label(&key));
    let node_ref = ctx.node_ref();
    if plan_ctx.call_stack.contains(&key) {
        let chain: Vec<String> = plan_ctx
            .call_stack
            .iter()
            .chain(std::iter::once(&key))
            .map(key_label)
            .collect();
        return Err(ctx.err(format!(
            "function {} calls itself recursively ({})",
            key_label(&key),
            chain.join(" > ")
        )));
    }
    if ctx.node.input.len() > body.input.len() {
        return Err(ctx.err(format!(
            "{} inputs given, {label} declares {}",
            ctx.node.input.len(),
            body.input.len()
        )));
    }
    if ctx.node.output.len() > body.output.len() {
        return Err(ctx.err(format!(
            "{} outputs requested, {label} declares {}",
            ctx.node.output.len(),
            body.output.len()
        )));
    }

    let mut feeds = Vec::new();
    let mut inputs = Vec::new();
    let mut absent = BTreeSet::new();
    for (i, formal) in body.input.iter().enumerate() {
        if ctx.node.input.get(i).is_some_and(|n| !n.is_empty()) {
            feeds.push(i);
            inputs.push(named_value(formal));
        } else {
            absent.insert(formal.clone());
        }
    }
    let mut places = Vec::new();
    let mut outputs = Vec::new();
    for (i, formal) in body.output.iter().enumerate() {
        if ctx.node.output.get(i).is_some_and(|n| !n.is_empty()) {
            places.push(i);
            outputs.push(named_value(formal));
        }
    }
    let binding = Binding {
        call: &ctx.node.attribute,
        defaults: &defaults,
        absent: &absent,
    };
    let graph = GraphProto {
        name: Some(key_label(&key)),
        node: body.node.iter().map(|n| binding.bind_node(n)).collect(),
        input: inputs,
        output: outputs,
        ..Default::default()
    };

    let mut child = plan_ctx.descend(&node_ref)?;
    for o in &body.opset_import {
        let d = normalize_domain(o.domain.as_deref().unwrap_or("")).to_string();
        child.opsets.insert(d, o.version.unwrap_or(1));
    }
    child.call_stack.push(key);
    let plan = build(&graph, &child, &|_| false)
        .map_err(|e| RefError::nested(&node_ref, label.as_str(), e))?;
    Ok(Some(FunctionPlan {
        label,
        body: plan,
        feeds,
        places,
    }))
}

fn named_value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        ..Default::default()
    }
}

/// How one call binds a body: the caller's attributes, the defaults, and the formal inputs it
/// leaves out.
struct Binding<'a> {
    call: &'a [AttributeProto],
    defaults: &'a [AttributeProto],
    absent: &'a BTreeSet<String>,
}

impl Binding<'_> {
    /// A body node with attribute references resolved and absent formal inputs emptied,
    /// recursively through its subgraphs.
    fn bind_node(&self, node: &NodeProto) -> NodeProto {
        let mut out = node.clone();
        for input in &mut out.input {
            if self.absent.contains(input.as_str()) {
                input.clear();
            }
        }
        out.attribute = node
            .attribute
            .iter()
            .filter_map(|a| self.bind_attribute(a))
            .collect();
        out
    }

    fn bind_attribute(&self, attr: &AttributeProto) -> Option<AttributeProto> {
        if let Some(reference) = attr.ref_attr_name.as_deref().filter(|r| !r.is_empty()) {
            let named = |list: &[AttributeProto]| {
                list.iter()
                    .find(|a| a.name.as_deref() == Some(reference))
                    .cloned()
            };
            let mut bound = named(self.call).or_else(|| named(self.defaults))?;
            bound.name = attr.name.clone();
            bound.ref_attr_name = None;
            return Some(bound);
        }
        let mut out = attr.clone();
        if let Some(g) = &attr.g {
            out.g = Some(self.bind_graph(g));
        }
        out.graphs = attr.graphs.iter().map(|g| self.bind_graph(g)).collect();
        Some(out)
    }

    fn bind_graph(&self, graph: &GraphProto) -> GraphProto {
        GraphProto {
            node: graph.node.iter().map(|n| self.bind_node(n)).collect(),
            ..graph.clone()
        }
    }
}
