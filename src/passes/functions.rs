//! Model-local functions converted in place, for conversion to another opset: each function
//! keeps its name and signature, and its body is converted to the target like a graph of its
//! own, typed by its calls. A function is polymorphic (its body is untyped); the version steps
//! need element types, so a function is converted in place only when its calls agree on them
//! and on the rank (each dim kept where they agree). Otherwise the caller inlines the functions instead
//! (`inline.rs`).
//!
//! In place is refused (the caller falls back to inlining) for: a body with attribute
//! references (`@alpha`: its values are the caller's), a body calling another local function,
//! a call inside a subgraph, a function not called from the main graph, calls with missing or
//! untyped inputs, and calls that disagree on element types or ranks.

use std::collections::BTreeMap;

use onnx_proto::{FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto, ValueInfoProto};

use crate::passes::inline::{key_of_fn, key_of_node, FnKey};

/// Whether an attribute (or a subgraph inside it) refers to an attribute of the function.
fn has_attr_ref(nodes: &[NodeProto]) -> bool {
    nodes.iter().any(|n| {
        n.attribute.iter().any(|a| {
            a.ref_attr_name.as_deref().is_some_and(|r| !r.is_empty())
                || a.g.iter().chain(&a.graphs).any(|g| has_attr_ref(&g.node))
        })
    })
}

fn has_subgraph_call(g: &GraphProto, funcs: &BTreeMap<FnKey, FunctionProto>) -> bool {
    let calls_in = |s: &GraphProto| {
        s.node.iter().any(|m| funcs.contains_key(&key_of_node(m))) || has_subgraph_call(s, funcs)
    };
    g.node.iter().any(|n| {
        n.attribute
            .iter()
            .any(|a| a.g.iter().chain(&a.graphs).any(calls_in))
    })
}

/// The types of a call's inputs, when all are known.
fn input_types(n: &NodeProto, types: &BTreeMap<String, TypeProto>) -> Option<Vec<TypeProto>> {
    n.input.iter().map(|i| types.get(i).cloned()).collect()
}

fn value_info(name: &str, ty: Option<TypeProto>) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: ty,
        ..Default::default()
    }
}

/// The tensor type two calls share: the same element type and rank, each dim kept where they
/// agree (a graph's inputs need a shape, so calls of other ranks share none).
fn common_type(a: &TypeProto, b: &TypeProto) -> Option<TypeProto> {
    use onnx_schema::infer::{elem_type_of, shape_of, SymDim};
    let elem = elem_type_of(a).filter(|&e| e != 0)?;
    if elem_type_of(b) != Some(elem) {
        return None;
    }
    let (x, y) = (shape_of(a)?, shape_of(b)?);
    if x.len() != y.len() {
        return None;
    }
    let dims: Vec<SymDim> = x
        .into_iter()
        .zip(y)
        .map(|(p, q)| if p == q { p } else { SymDim::Unknown })
        .collect();
    Some(onnx_schema::infer::tensor_type(Some(elem), Some(&dims)))
}

/// The types of the main graph's values: declared, inferred, and the outputs of calls whose
/// bodies infer from the calls' input types (to a fixed point: a call reading another call's
/// output is typed once that one is).
fn main_graph_types(
    model: &ModelProto,
    funcs: &BTreeMap<FnKey, FunctionProto>,
) -> BTreeMap<String, TypeProto> {
    let Some(graph) = &model.graph else {
        return BTreeMap::new();
    };
    let opsets = onnx_schema::infer::opset_imports(&model.opset_import);
    let mut known: BTreeMap<String, TypeProto> = BTreeMap::new();
    for v in graph
        .input
        .iter()
        .chain(&graph.output)
        .chain(&graph.value_info)
    {
        if let (Some(n), Some(t)) = (&v.name, &v.r#type) {
            known.insert(n.clone(), t.clone());
        }
    }
    for _ in 0..=graph.node.len() {
        // Inference sees the known types as extra graph inputs.
        let mut seeded = graph.clone();
        let declared: std::collections::BTreeSet<&str> = graph
            .input
            .iter()
            .filter_map(|v| v.name.as_deref())
            .collect();
        for (n, t) in &known {
            if !declared.contains(n.as_str()) {
                seeded.input.push(value_info(n, Some(t.clone())));
            }
        }
        if let Ok(inferred) = onnx_schema::infer::infer_graph(&seeded, &opsets) {
            for (n, t) in inferred {
                known.entry(n).or_insert(t);
            }
        }
        let mut grew = false;
        for n in &graph.node {
            let Some(f) = funcs.get(&key_of_node(n)) else {
                continue;
            };
            if n.output
                .iter()
                .all(|o| o.is_empty() || known.contains_key(o))
            {
                continue;
            }
            let Some(types) = input_types(n, &known) else {
                continue;
            };
            let body = body_graph(f, &types);
            let Ok(out) = onnx_schema::infer::infer_graph(
                &body,
                &onnx_schema::infer::opset_imports(&f.opset_import),
            ) else {
                continue;
            };
            for (o, fo) in n.output.iter().zip(&f.output) {
                if let (false, Some(t)) = (o.is_empty(), out.get(fo)) {
                    grew |= known.insert(o.clone(), t.clone()).is_none();
                }
            }
        }
        if !grew {
            break;
        }
    }
    known
}

/// A function body as a graph with typed inputs (outputs untyped).
fn body_graph(f: &FunctionProto, input_types: &[TypeProto]) -> GraphProto {
    GraphProto {
        name: f.name.clone(),
        node: f.node.clone(),
        input: f
            .input
            .iter()
            .zip(input_types)
            .map(|(n, t)| value_info(n, Some(t.clone())))
            .collect(),
        output: f.output.iter().map(|n| value_info(n, None)).collect(),
        value_info: f.value_info.clone(),
        ..Default::default()
    }
}

/// What converting in place did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InPlace {
    /// Functions whose bodies were converted.
    pub functions: usize,
}

/// Converts every model-local function's body to default-domain opset `target` with
/// `convert` (a model of one graph in, the converted model out), and types the calls' outputs
/// in the main graph (so the graph around the calls converts too). `Ok(None)`: the functions
/// cannot be converted in place (see the module documentation); the caller inlines them.
pub fn convert_in_place(
    model: &ModelProto,
    target: i64,
    convert: &dyn Fn(&ModelProto) -> Result<ModelProto, String>,
) -> Result<Option<(ModelProto, InPlace)>, String> {
    let funcs: BTreeMap<FnKey, FunctionProto> = model
        .functions
        .iter()
        .map(|f| (key_of_fn(f), f.clone()))
        .collect();
    let Some(graph) = &model.graph else {
        return Ok(None);
    };
    if funcs.is_empty() || has_subgraph_call(graph, &funcs) {
        return Ok(None);
    }
    for f in funcs.values() {
        if has_attr_ref(&f.node) || f.node.iter().any(|n| funcs.contains_key(&key_of_node(n))) {
            return Ok(None);
        }
    }
    let types = main_graph_types(model, &funcs);
    // Each function's input types, from its calls.
    let mut typing: BTreeMap<FnKey, Vec<TypeProto>> = BTreeMap::new();
    for n in &graph.node {
        let key = key_of_node(n);
        let Some(f) = funcs.get(&key) else {
            continue;
        };
        if n.input.len() != f.input.len() || n.input.iter().any(|i| i.is_empty()) {
            return Ok(None);
        }
        let Some(here) = input_types(n, &types) else {
            return Ok(None);
        };
        match typing.get_mut(&key) {
            None => {
                typing.insert(key, here);
            }
            Some(seen) => {
                for (s, h) in seen.iter_mut().zip(&here) {
                    if s == h {
                        continue;
                    }
                    let Some(c) = common_type(s, h) else {
                        return Ok(None);
                    };
                    *s = c;
                }
            }
        }
    }
    let mut out = model.clone();
    let mut done = InPlace::default();
    for f in out.functions.iter_mut() {
        let key = key_of_fn(f);
        let Some(input_types) = typing.get(&key) else {
            return Ok(None);
        };
        let name = f.name.clone().unwrap_or_default();
        let opsets = onnx_schema::infer::opset_imports(&f.opset_import);
        match opsets.get("") {
            Some(&v) if v != target => {}
            // A body without default-domain ops, or already at the target: kept.
            _ => continue,
        }
        let mut body = body_graph(f, input_types);
        let inferred = onnx_schema::infer::infer_graph(&body, &opsets).unwrap_or_default();
        for o in body.output.iter_mut() {
            o.r#type = o.name.as_ref().and_then(|n| inferred.get(n)).cloned();
        }
        let unit = ModelProto {
            ir_version: model.ir_version,
            opset_import: f.opset_import.clone(),
            graph: Some(body),
            ..Default::default()
        };
        let converted = convert(&unit).map_err(|e| format!("local function '{name}': {e}"))?;
        let g = converted.graph.unwrap_or_default();
        let ins: Vec<&str> = g.input.iter().filter_map(|v| v.name.as_deref()).collect();
        let outs: Vec<&str> = g.output.iter().filter_map(|v| v.name.as_deref()).collect();
        if ins != f.input.iter().map(String::as_str).collect::<Vec<_>>()
            || outs != f.output.iter().map(String::as_str).collect::<Vec<_>>()
        {
            return Err(format!(
                "local function '{name}': its converted body does not keep the signature"
            ));
        }
        // A function has no initializers: the body's constants become Constant nodes.
        let mut nodes: Vec<NodeProto> = g
            .initializer
            .iter()
            .map(|t| NodeProto {
                output: vec![t.name.clone().unwrap_or_default()],
                op_type: Some("Constant".into()),
                attribute: vec![onnx_proto::AttributeProto {
                    name: Some("value".into()),
                    r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
                    t: Some(t.clone()),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect();
        nodes.extend(g.node.iter().cloned());
        f.node = nodes;
        let kept: std::collections::BTreeSet<&str> = f
            .node
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        f.value_info
            .retain(|v| v.name.as_deref().is_some_and(|n| kept.contains(n)));
        // The imports follow the converted body: the default domain at the target, and any
        // domain the conversion introduced.
        for o in &converted.opset_import {
            let d = onnx_schema::normalize_domain(o.domain.as_deref().unwrap_or(""));
            match f
                .opset_import
                .iter_mut()
                .find(|p| onnx_schema::normalize_domain(p.domain.as_deref().unwrap_or("")) == d)
            {
                Some(p) => p.version = o.version,
                None => f.opset_import.push(o.clone()),
            }
        }
        done.functions += 1;
    }
    // The calls' outputs typed where the graph does not declare them (each by its own call's
    // input types).
    if let Some(g) = out.graph.as_mut() {
        let mut declared: std::collections::BTreeSet<String> = g
            .input
            .iter()
            .chain(&g.output)
            .chain(&g.value_info)
            .filter_map(|v| v.name.clone())
            .collect();
        let mut extra = Vec::new();
        for n in &g.node {
            if !funcs.contains_key(&key_of_node(n)) {
                continue;
            }
            for o in &n.output {
                if let Some(t) = types.get(o) {
                    if !o.is_empty() && declared.insert(o.clone()) {
                        extra.push(value_info(o, Some(t.clone())));
                    }
                }
            }
        }
        g.value_info.extend(extra);
    }
    Ok(Some((out, done)))
}

/// `convert-functions`: a conversion's model-local functions converted in place where their
/// calls type them (this module), else inlined (`inline.rs`).
pub(crate) struct ConvertFunctions;

impl super::Pass for ConvertFunctions {
    fn name(&self) -> &'static str {
        "convert-functions"
    }

    fn about(&self) -> &'static str {
        "conversion only: model-local functions converted in place, else inlined"
    }

    fn is_enabled(&self, cx: &super::PassContext<'_>) -> bool {
        cx.conversion().is_some()
    }

    fn run(
        &self,
        model: &mut onnx_ir::Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let Some((_, target)) = cx.conversion() else {
            return Ok(super::Changes::new());
        };
        if model.functions.is_empty() {
            return Ok(super::Changes::new());
        }
        let unsupported = |msg: String| crate::Error::Optimize {
            path: cx.origin.into(),
            source: onnx_egraph::EGraphError::Unsupported(msg),
        };
        let current = model.to_proto();
        let host = cx.host;
        let unit = |m: &ModelProto| -> Result<ModelProto, String> {
            let m = onnx_ir::Model::from_proto(m.clone()).map_err(|e| e.to_string())?;
            let done = host.convert_unit(target, &m).map_err(|e| {
                let mut msg = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(x) = src {
                    msg.push_str(&format!(": {x}"));
                    src = x.source();
                }
                msg
            })?;
            Ok(done.to_proto())
        };
        match convert_in_place(&current, target, &unit).map_err(unsupported)? {
            Some((proto, done)) => {
                *model = cx.to_ir(proto)?;
                Ok(super::Changes::from([(
                    "functions_converted",
                    done.functions,
                )]))
            }
            None => {
                let (proto, done) =
                    super::inline::inline_local_functions(&current).map_err(unsupported)?;
                *model = cx.to_ir(proto)?;
                Ok(super::Changes::from([
                    ("inlined_calls", done.calls),
                    ("inlined_functions", done.functions),
                ]))
            }
        }
    }
}
