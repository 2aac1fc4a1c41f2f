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
//!
//! On the IR, except where type inference reads protobufs (the main graph's and the bodies')
//! and where a body is converted: the body goes to the converter as a model of its own through
//! its protobuf (typed inputs, inferred outputs), and the converted body comes back as a
//! function through its protobuf (its initializers as Constant nodes).

use std::collections::{BTreeMap, BTreeSet};

use onnx_ir::{Function, Graph, Model, Node, OpsetImport, ValueId};
use onnx_proto::{
    FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TypeProto, ValueInfoProto,
};

use crate::passes::inline::{key_of_fn, key_of_node, FnKey, FunctionError};

/// Whether an attribute (or a subgraph inside it) refers to an attribute of the function.
fn has_attr_ref(g: &Graph) -> bool {
    g.nodes_in_order().any(|(_, n)| {
        n.attributes.iter().any(|a| {
            a.ref_attr_name().is_some_and(|r| !r.is_empty())
                || a.value.subgraphs().any(has_attr_ref)
        })
    })
}

fn has_subgraph_call(g: &Graph, funcs: &BTreeMap<FnKey, &Function>) -> bool {
    let calls_in = |s: &Graph| {
        s.nodes_in_order()
            .any(|(_, m)| funcs.contains_key(&key_of_node(m)))
            || has_subgraph_call(s, funcs)
    };
    g.nodes_in_order().any(|(_, n)| n.subgraphs().any(calls_in))
}

/// The function a protobuf node calls (its id).
fn key_of_proto_node(n: &NodeProto) -> FnKey {
    (
        n.domain.clone().unwrap_or_default(),
        n.op_type.clone().unwrap_or_default(),
        n.overload.clone().unwrap_or_default(),
    )
}

/// The types of a call's inputs (by name), when all are known.
fn input_types(inputs: &[String], types: &BTreeMap<String, TypeProto>) -> Option<Vec<TypeProto>> {
    inputs.iter().map(|i| types.get(i).cloned()).collect()
}

/// The names of a node's inputs ("" for an absent one).
fn input_names(g: &Graph, n: &Node) -> Vec<String> {
    n.inputs
        .iter()
        .map(|i| i.map_or(String::new(), |v| g.value(v).name.to_string()))
        .collect()
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
    graph: &GraphProto,
    opset_import: &[OperatorSetIdProto],
    funcs: &BTreeMap<FnKey, FunctionProto>,
) -> BTreeMap<String, TypeProto> {
    let opsets = onnx_schema::infer::opset_imports(opset_import);
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
        let declared: BTreeSet<&str> = graph
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
            let Some(f) = funcs.get(&key_of_proto_node(n)) else {
                continue;
            };
            if n.output
                .iter()
                .all(|o| o.is_empty() || known.contains_key(o))
            {
                continue;
            }
            let Some(types) = input_types(&n.input, &known) else {
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
pub(crate) fn convert_in_place(
    model: &Model,
    target: i64,
    convert: &dyn Fn(&Model) -> Result<Model, crate::Error>,
) -> Result<Option<(Model, InPlace)>, FunctionError> {
    let funcs: BTreeMap<FnKey, &Function> =
        model.functions.iter().map(|f| (key_of_fn(f), f)).collect();
    let graph = &model.graph;
    // A model without a graph (as its protobuf writes it).
    if !model.has_graph && *graph == Graph::default() {
        return Ok(None);
    }
    if funcs.is_empty() || has_subgraph_call(graph, &funcs) {
        return Ok(None);
    }
    for f in funcs.values() {
        if has_attr_ref(&f.body)
            || f.body
                .nodes_in_order()
                .any(|(_, n)| funcs.contains_key(&key_of_node(n)))
        {
            return Ok(None);
        }
    }
    // Type inference reads protobufs: the main graph's and the bodies'.
    let protos: BTreeMap<FnKey, FunctionProto> = funcs
        .iter()
        .map(|(k, f)| (k.clone(), f.to_proto()))
        .collect();
    let opset_import: Vec<OperatorSetIdProto> = model
        .opset_imports
        .iter()
        .map(OpsetImport::to_proto)
        .collect();
    let types = main_graph_types(&graph.to_proto(), &opset_import, &protos);
    // Each function's input types, from its calls.
    let mut typing: BTreeMap<FnKey, Vec<TypeProto>> = BTreeMap::new();
    for (_, n) in graph.nodes_in_order() {
        let key = key_of_node(n);
        let Some(f) = funcs.get(&key) else {
            continue;
        };
        if n.inputs.len() != f.body.inputs.len() || n.inputs.iter().any(Option::is_none) {
            return Ok(None);
        }
        let Some(here) = input_types(&input_names(graph, n), &types) else {
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
        let mut fp = f.to_proto();
        let function = fp.name.clone().unwrap_or_default();
        let opsets = onnx_schema::infer::opset_imports(&fp.opset_import);
        match opsets.get("") {
            Some(&v) if v != target => {}
            // A body without default-domain ops, or already at the target: kept.
            _ => continue,
        }
        let mut body = body_graph(&fp, input_types);
        let inferred = onnx_schema::infer::infer_graph(&body, &opsets).unwrap_or_default();
        for o in body.output.iter_mut() {
            o.r#type = o.name.as_ref().and_then(|n| inferred.get(n)).cloned();
        }
        let unit = ModelProto {
            ir_version: model.ir_version,
            opset_import: fp.opset_import.clone(),
            graph: Some(body),
            ..Default::default()
        };
        let unit = Model::from_proto(unit).map_err(|source| FunctionError::Body {
            function: function.clone(),
            source,
        })?;
        let converted = convert(&unit).map_err(|source| FunctionError::Convert {
            function: function.clone(),
            source: Box::new(source),
        })?;
        let g = &converted.graph;
        let names = |ids: &[ValueId]| -> Vec<String> {
            ids.iter().map(|&v| g.value(v).name.to_string()).collect()
        };
        if names(&g.inputs) != fp.input || names(&g.outputs) != fp.output {
            return Err(FunctionError::SignatureChanged { function });
        }
        // A function has no initializers: the body's constants become Constant nodes.
        let g = g.to_proto();
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
        nodes.extend(g.node);
        fp.node = nodes;
        let kept: BTreeSet<&str> = fp
            .node
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        let value_info = std::mem::take(&mut fp.value_info);
        fp.value_info = value_info
            .into_iter()
            .filter(|v| v.name.as_deref().is_some_and(|n| kept.contains(n)))
            .collect();
        // The imports follow the converted body: the default domain at the target, and any
        // domain the conversion introduced.
        for o in converted.opset_imports.iter().map(OpsetImport::to_proto) {
            let d = onnx_schema::normalize_domain(o.domain.as_deref().unwrap_or(""));
            match fp
                .opset_import
                .iter_mut()
                .find(|p| onnx_schema::normalize_domain(p.domain.as_deref().unwrap_or("")) == d)
            {
                Some(p) => p.version = o.version,
                None => fp.opset_import.push(o),
            }
        }
        *f = Function::from_proto(fp).map_err(|source| FunctionError::Body {
            function: function.clone(),
            source,
        })?;
        done.functions += 1;
    }
    // The calls' outputs typed where the graph does not declare them (each by its own call's
    // input types).
    let g = &mut out.graph;
    let mut declared: BTreeSet<String> = g
        .inputs
        .iter()
        .chain(&g.outputs)
        .chain(&g.value_info)
        .map(|&v| g.value(v).name.to_string())
        .collect();
    let mut extra = Vec::new();
    for (_, n) in g.nodes_in_order() {
        if !funcs.contains_key(&key_of_node(n)) {
            continue;
        }
        for &o in n.outputs.iter().flatten() {
            let name = g.value(o).name.to_string();
            if let Some(t) = types.get(&name) {
                if declared.insert(name) {
                    extra.push((o, t.clone()));
                }
            }
        }
    }
    for (o, t) in extra {
        g.value_mut(o).ty = Some(t);
        g.value_info.push(o);
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
        model: &mut Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let Some((_, target)) = cx.conversion() else {
            return Ok(super::Changes::new());
        };
        if model.functions.is_empty() {
            return Ok(super::Changes::new());
        }
        let host = cx.host;
        let unit = |m: &Model| host.convert_unit(target, m);
        match convert_in_place(model, target, &unit).map_err(|e| e.into_error(cx.origin))? {
            Some((out, done)) => {
                *model = out;
                Ok(super::Changes::from([(
                    "functions_converted",
                    done.functions,
                )]))
            }
            None => {
                let done = super::inline::inline_local_functions(model)
                    .map_err(|e| e.into_error(cx.origin))?;
                Ok(super::Changes::from([
                    ("inlined_calls", done.calls),
                    ("inlined_functions", done.functions),
                ]))
            }
        }
    }
}
