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

use onnx_ir::{Function, Graph, Model, Node, NodeId, OpsetImport, ValueId};
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
    let all: Vec<FunctionProto> = funcs.values().cloned().collect();
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
            let Some(out) = body_types(f, &types, &all) else {
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

/// The types of a function body's values, its inputs typed `input_types`; calls of the model's
/// functions `all` in it typed by their bodies (as onnx's inference types them). `None` where
/// inference fails.
fn body_types(
    f: &FunctionProto,
    input_types: &[TypeProto],
    all: &[FunctionProto],
) -> Option<BTreeMap<String, TypeProto>> {
    let options = onnx_schema::infer::InferOptions {
        functions: all,
        lenient: false,
    };
    onnx_schema::infer::infer_graph_with(
        &body_graph(f, input_types),
        &onnx_schema::infer::opset_imports(&f.opset_import),
        options,
    )
    .ok()
    .map(|g| g.types)
}

/// Merges one call's input types (`None`: not all known) into its function's typing, the
/// common type of all its calls. Returns whether the typing changed, or `Err(())` where the
/// call is not typed or disagrees with the others on element types or ranks.
fn merge_call(
    typing: &mut BTreeMap<FnKey, Vec<TypeProto>>,
    key: &FnKey,
    here: Option<Vec<TypeProto>>,
) -> Result<bool, ()> {
    let here = here.ok_or(())?;
    let Some(seen) = typing.get_mut(key) else {
        typing.insert(key.clone(), here);
        return Ok(true);
    };
    let mut changed = false;
    for (s, h) in seen.iter_mut().zip(&here) {
        if s != h {
            let c = common_type(s, h).ok_or(())?;
            changed |= c != *s;
            *s = c;
        }
    }
    Ok(changed)
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
    let wants = |fp: &FunctionProto| {
        let opsets = onnx_schema::infer::opset_imports(&fp.opset_import);
        // A body without default-domain ops, or already at the target: kept.
        matches!(opsets.get(""), Some(&v) if v != target)
    };
    let mut rewrite = |function: &str, unit: &Model| {
        convert(unit)
            .map(Some)
            .map_err(|source| FunctionError::Convert {
                function: function.to_string(),
                source: Box::new(source),
            })
    };
    bodies_in_place(model, Mode::Strict, &wants, &mut rewrite)
}

/// Whether a function that cannot be rewritten in place stops them all (a conversion, whose
/// caller then inlines every function) or is only left as it is (an optimization).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Strict,
    Lenient,
}

/// The functions whose bodies cannot be rewritten as a graph of their own: attribute
/// references (their values are the caller's) and a function called inside a subgraph (its
/// calls there are not typed); for Strict (conversion) also a body calling another local
/// function and a function called from another function's body. Lenient types those from the
/// calling bodies instead ([`nested_typing`]).
fn unfit(model: &Model, funcs: &BTreeMap<FnKey, &Function>, mode: Mode) -> BTreeSet<FnKey> {
    let mut out = match mode {
        Mode::Strict => called_outside_main(model, funcs),
        Mode::Lenient => called_in_subgraphs(model, funcs),
    };
    for (k, f) in funcs {
        let calls = || {
            f.body
                .nodes_in_order()
                .any(|(_, n)| funcs.contains_key(&key_of_node(n)))
        };
        if has_attr_ref(&f.body) || (mode == Mode::Strict && calls()) {
            out.insert(k.clone());
        }
    }
    out
}

/// The functions called inside a subgraph, of the main graph or of a body (their calls there
/// are not typed).
fn called_in_subgraphs(model: &Model, funcs: &BTreeMap<FnKey, &Function>) -> BTreeSet<FnKey> {
    let mut out = BTreeSet::new();
    let bodies = funcs.values().map(|f| &f.body);
    for g in std::iter::once(&model.graph).chain(bodies) {
        for (_, n) in g.nodes_in_order() {
            for sub in n.subgraphs() {
                for (_, m) in sub.nodes_in_order() {
                    calls_in(m, funcs, &mut out);
                }
            }
        }
    }
    out
}

/// Lenient typing of the functions called from other bodies: each typed body's calls give
/// their functions input types (merged as the main graph's calls are), to a fixed point; then
/// a function called from a body that is skipped or untyped is skipped too (its body must stay
/// right for calls of types nobody saw), to a fixed point.
fn nested_typing(
    protos: &BTreeMap<FnKey, FunctionProto>,
    typing: &mut BTreeMap<FnKey, Vec<TypeProto>>,
    skip: &mut BTreeSet<FnKey>,
) {
    let all: Vec<FunctionProto> = protos.values().cloned().collect();
    let calls = |f: &FunctionProto| -> Vec<(FnKey, usize)> {
        f.node
            .iter()
            .enumerate()
            .map(|(i, n)| (key_of_proto_node(n), i))
            .filter(|(k, _)| protos.contains_key(k))
            .collect()
    };
    for _ in 0..=protos.len() {
        let mut grew = false;
        for (key, f) in protos {
            let Some(types) = typing.get(key).filter(|_| !skip.contains(key)).cloned() else {
                continue;
            };
            let inferred = body_types(f, &types, &all).unwrap_or_default();
            for (callee, i) in calls(f) {
                let n = &f.node[i];
                let arity = protos.get(&callee).map_or(0, |c| c.input.len());
                let here = match n.input.len() == arity && n.input.iter().all(|i| !i.is_empty()) {
                    true => input_types(&n.input, &inferred),
                    false => None,
                };
                match merge_call(typing, &callee, here) {
                    Ok(changed) => grew |= changed,
                    Err(()) => grew |= skip.insert(callee),
                }
            }
        }
        if !grew {
            break;
        }
    }
    for _ in 0..=protos.len() {
        let mut grew = false;
        for (key, f) in protos {
            if typing.contains_key(key) && !skip.contains(key) {
                continue;
            }
            for (callee, _) in calls(f) {
                grew |= skip.insert(callee);
            }
        }
        if !grew {
            break;
        }
    }
}

/// The functions called from a function's body or inside a subgraph of the main graph.
fn called_outside_main(model: &Model, funcs: &BTreeMap<FnKey, &Function>) -> BTreeSet<FnKey> {
    let mut out = BTreeSet::new();
    for f in funcs.values() {
        for (_, n) in f.body.nodes_in_order() {
            calls_in(n, funcs, &mut out);
        }
    }
    for (_, n) in model.graph.nodes_in_order() {
        for sub in n.subgraphs() {
            for (_, m) in sub.nodes_in_order() {
                calls_in(m, funcs, &mut out);
            }
        }
    }
    out
}

/// The functions a node (and its subgraphs) calls.
fn calls_in(n: &Node, funcs: &BTreeMap<FnKey, &Function>, out: &mut BTreeSet<FnKey>) {
    let k = key_of_node(n);
    if funcs.contains_key(&k) {
        out.insert(k);
    }
    for sub in n.subgraphs() {
        for (_, m) in sub.nodes_in_order() {
            calls_in(m, funcs, out);
        }
    }
}

/// What rewrites one body (named by its function): the new body, or `None` to keep it.
type BodyRewrite<'a> = dyn FnMut(&str, &Model) -> Result<Option<Model>, FunctionError> + 'a;

/// Rewrites model-local function bodies in place: each function `wants` accepts, called from
/// the main graph, has its body typed by its calls (their common type) and handed to `rewrite`
/// as a model of its own; `Ok(None)` from `rewrite` keeps that body. The calls' outputs are
/// typed in the main graph. Returns the model and how many bodies changed; `Ok(None)` when, in
/// Strict mode, some function cannot be rewritten (see [`unfit`]).
fn bodies_in_place(
    model: &Model,
    mode: Mode,
    wants: &dyn Fn(&FunctionProto) -> bool,
    rewrite: &mut BodyRewrite<'_>,
) -> Result<Option<(Model, InPlace)>, FunctionError> {
    let funcs: BTreeMap<FnKey, &Function> =
        model.functions.iter().map(|f| (key_of_fn(f), f)).collect();
    let graph = &model.graph;
    // A model without a graph (as its protobuf writes it).
    if !model.has_graph && *graph == Graph::default() {
        return Ok(None);
    }
    if funcs.is_empty() {
        return Ok(None);
    }
    let mut skip = unfit(model, &funcs, mode);
    if mode == Mode::Strict && (!skip.is_empty() || has_subgraph_call(graph, &funcs)) {
        return Ok(None);
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
        let here =
            match n.inputs.len() == f.body.inputs.len() && n.inputs.iter().all(Option::is_some) {
                true => input_types(&input_names(graph, n), &types),
                false => None,
            };
        if merge_call(&mut typing, &key, here).is_err() {
            if mode == Mode::Strict {
                return Ok(None);
            }
            skip.insert(key);
        }
    }
    if mode == Mode::Lenient {
        nested_typing(&protos, &mut typing, &mut skip);
    }
    let all: Vec<FunctionProto> = protos.values().cloned().collect();
    let mut out = model.clone();
    let mut done = InPlace::default();
    for f in out.functions.iter_mut() {
        let key = key_of_fn(f);
        if skip.contains(&key) {
            continue;
        }
        let Some(input_types) = typing.get(&key) else {
            match mode {
                Mode::Strict => return Ok(None),
                Mode::Lenient => continue,
            }
        };
        let mut fp = f.to_proto();
        let function = fp.name.clone().unwrap_or_default();
        if !wants(&fp) {
            continue;
        }
        let mut body = body_graph(&fp, input_types);
        let inferred = body_types(&fp, input_types, &all).unwrap_or_default();
        for o in body.output.iter_mut() {
            o.r#type = o.name.as_ref().and_then(|n| inferred.get(n)).cloned();
        }
        // The outputs of calls of other functions, typed by their bodies (the graph's own
        // inference cannot see into them).
        let outputs: BTreeSet<&str> = fp.output.iter().map(String::as_str).collect();
        for n in fp
            .node
            .iter()
            .filter(|n| protos.contains_key(&key_of_proto_node(n)))
        {
            for o in n
                .output
                .iter()
                .filter(|o| !o.is_empty() && !outputs.contains(o.as_str()))
            {
                if let Some(t) = inferred.get(o) {
                    body.value_info.push(value_info(o, Some(t.clone())));
                }
            }
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
        let Some(converted) = rewrite(&function, &unit)? else {
            continue;
        };
        let g = &converted.graph;
        let names = |ids: &[ValueId]| -> Vec<String> {
            ids.iter().map(|&v| g.value(v).name.to_string()).collect()
        };
        if names(&g.inputs) != fp.input || names(&g.outputs) != fp.output {
            match mode {
                Mode::Strict => return Err(FunctionError::SignatureChanged { function }),
                Mode::Lenient => continue,
            }
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
        // The imports follow the rewritten body: the default domain at its opset, and any
        // domain the rewrite introduced.
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

/// The functions inlining makes no larger (in nodes) than keeping: called `k` times from the
/// main graph (or its subgraphs) and never from a function body, with `b` body nodes, inlining
/// changes the count by `k·b - k - b`, so a function called once, a one-node body, and two
/// calls of two nodes go inline.
fn inline_candidates(model: &Model) -> BTreeSet<FnKey> {
    let funcs: BTreeMap<FnKey, &Function> =
        model.functions.iter().map(|f| (key_of_fn(f), f)).collect();
    let mut from_bodies = BTreeSet::new();
    for f in funcs.values() {
        for (_, n) in f.body.nodes_in_order() {
            calls_in(n, &funcs, &mut from_bodies);
        }
    }
    fn count(g: &Graph, funcs: &BTreeMap<FnKey, &Function>, out: &mut BTreeMap<FnKey, usize>) {
        for (_, n) in g.nodes_in_order() {
            let k = key_of_node(n);
            if funcs.contains_key(&k) {
                *out.entry(k).or_default() += 1;
            }
            for sub in n.subgraphs() {
                count(sub, funcs, out);
            }
        }
    }
    let mut calls = BTreeMap::new();
    count(&model.graph, &funcs, &mut calls);
    calls
        .into_iter()
        .filter(|(k, n)| {
            let b = funcs[k].body.nodes_in_order().count();
            !from_bodies.contains(k) && (n - 1) * b.saturating_sub(1) <= 1
        })
        .map(|(k, _)| k)
        .collect()
}

/// Functions with attribute references bound by their calls ([`bind_refs`]): the model, and
/// per function (by its key) the keys of its bound copies and the calls retargeted to them.
type Bound = (Model, BTreeMap<FnKey, (Vec<FnKey>, Vec<NodeId>)>);

/// The model with the attribute references (`@alpha`) of each function bound as its calls
/// bind them (see [`super::inline::body_bound_by`]), where every call of it is a node of the
/// main graph: the calls that bind them alike share one copy, the first such group the
/// function itself and each other a copy named `NAME__bound_K` that its calls now call. Each
/// copy keeps the function's attribute declarations, so its calls stay valid, and for them it
/// computes what the function did. `None` when no function has references to bind.
fn bind_refs(model: &Model) -> Result<Option<Bound>, FunctionError> {
    let funcs: BTreeMap<FnKey, &Function> =
        model.functions.iter().map(|f| (key_of_fn(f), f)).collect();
    // Calls inside subgraphs or bodies: their functions are left alone.
    let elsewhere = called_outside_main(model, &funcs);
    // Per function, its calls grouped by the body they bind.
    let mut groups: BTreeMap<FnKey, Vec<(Graph, Vec<NodeId>)>> = BTreeMap::new();
    for (id, n) in model.graph.nodes_in_order() {
        let key = key_of_node(n);
        let Some(f) = funcs.get(&key) else {
            continue;
        };
        if elsewhere.contains(&key) || !has_attr_ref(&f.body) {
            continue;
        }
        let body = super::inline::body_bound_by(n, f)?;
        let g = groups.entry(key).or_default();
        match g.iter_mut().find(|(b, _)| *b == body) {
            Some((_, calls)) => calls.push(id),
            None => g.push((body, vec![id])),
        }
    }
    if groups.is_empty() {
        return Ok(None);
    }
    let mut out = model.clone();
    let mut taken: BTreeSet<FnKey> = funcs.keys().cloned().collect();
    let mut bound = BTreeMap::new();
    for (key, group) in groups {
        let Some(at) = out.functions.iter().position(|f| key_of_fn(f) == key) else {
            continue;
        };
        let original = out.functions[at].clone();
        let mut copies = Vec::new();
        let mut retargeted = Vec::new();
        for (k, (body, calls)) in group.into_iter().enumerate() {
            if k == 0 {
                out.functions[at].body = body;
                continue;
            }
            let mut copy = original.clone();
            copy.body = body;
            let name = (1..)
                .map(|i| format!("{}__bound_{}", key.1, k + i - 1))
                .find(|n| !taken.contains(&(key.0.clone(), n.clone(), key.2.clone())))
                .unwrap_or_default();
            copy.name = Some(name.as_str().into());
            let copy_key = key_of_fn(&copy);
            taken.insert(copy_key.clone());
            for &id in &calls {
                out.graph.node_mut(id).op_type = name.as_str().into();
            }
            retargeted.extend(calls);
            copies.push(copy_key);
            out.functions.push(copy);
        }
        bound.insert(key, (copies, retargeted));
    }
    Ok(Some((out, bound)))
}

/// Nodes a body has once written as a function (its initializers become Constant nodes).
fn body_size(m: &Model) -> usize {
    m.graph.nodes_in_order().count() + m.graph.initializers.len()
}

/// `optimize-functions`: model-local functions optimized. Those that inlining makes no larger
/// ([`inline_candidates`]) are inlined (their nodes then optimize with the graph around them);
/// every other body is optimized as a graph of its own, typed by its calls (in the main graph,
/// or in other bodies typed so: [`nested_typing`]; the outputs of calls in a body typed by the
/// callee's body), by the pipeline's phases (not its lowering), and kept when that leaves it
/// fewer nodes. A body with attribute references (`@alpha`) is optimized with them bound, one copy
/// per binding its calls give ([`bind_refs`]), and stays as it was unless that rewrote some
/// copy. A body that cannot be typed or optimized (attribute references in a function called
/// outside the main graph, calls inside subgraphs, calls from a body that is itself not typed,
/// calls that disagree on element types or ranks), or that the inliner refuses, stays as it
/// is. The check runs on the whole model as always: the
/// interpreter runs the calls through the new bodies.
pub(crate) struct OptimizeFunctions;

impl super::Pass for OptimizeFunctions {
    fn name(&self) -> &'static str {
        "optimize-functions"
    }

    fn about(&self) -> &'static str {
        "model-local functions: inlined where that is no larger, other bodies optimized as graphs of their own"
    }

    fn is_enabled(&self, cx: &super::PassContext<'_>) -> bool {
        cx.conversion().is_none()
    }

    fn run(
        &self,
        model: &mut Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let mut changes = super::Changes::new();
        if model.functions.is_empty() {
            return Ok(changes);
        }
        let pick = inline_candidates(model);
        if !pick.is_empty() {
            let mut m = model.clone();
            // A body the inliner refuses (an unseeded random op, other schema versions) stays
            // a function.
            if let Ok(done) = super::inline::inline_functions(&mut m, Some(&pick)) {
                *model = m;
                changes.insert("inlined_calls", done.calls);
                changes.insert("inlined_functions", done.functions);
            }
        }
        if model.functions.is_empty() {
            return Ok(changes);
        }
        // Bodies with attribute references are optimized with them bound, a copy per binding
        // their calls give (kept only where that optimizes some copy).
        let bound = bind_refs(model).map_err(|e| e.into_error(cx.origin))?;
        let phases = super::saturate::not_lowering(cx.phases);
        let mut rewrite = |_: &str, unit: &Model| -> Result<Option<Model>, FunctionError> {
            let before = body_size(unit);
            Ok(match cx.saturate(unit, &phases) {
                Ok((out, _)) if body_size(&out) < before => Some(out),
                _ => None,
            })
        };
        let unit = bound.as_ref().map_or(&*model, |(m, _)| m);
        if let Some((mut out, done)) = bodies_in_place(unit, Mode::Lenient, &|_| true, &mut rewrite)
            .map_err(|e| e.into_error(cx.origin))?
        {
            // A function none of whose bound copies the pipeline rewrote goes back to its
            // references, its copies and retargeted calls undone.
            if let Some((m, families)) = &bound {
                let body_of = |model: &Model, k: &FnKey| {
                    model
                        .functions
                        .iter()
                        .find(|f| key_of_fn(f) == *k)
                        .map(|f| f.body.clone())
                };
                let mut rewritten = 0;
                for (key, (copies, calls)) in families {
                    let members = std::iter::once(key).chain(copies);
                    let changed = members
                        .filter(|k| body_of(&out, k) != body_of(m, k))
                        .count();
                    if changed > 0 {
                        rewritten += 1;
                        continue;
                    }
                    out.functions.retain(|f| !copies.contains(&key_of_fn(f)));
                    if let (Some(f), Some(orig)) = (
                        out.functions.iter_mut().find(|f| key_of_fn(f) == *key),
                        model.functions.iter().find(|f| key_of_fn(f) == *key),
                    ) {
                        *f = orig.clone();
                    }
                    for &id in calls {
                        out.graph.node_mut(id).op_type = key.1.as_str().into();
                    }
                }
                if rewritten > 0 {
                    changes.insert("functions_bound", rewritten);
                }
            }
            if done.functions > 0 {
                *model = out;
                changes.insert("functions_optimized", done.functions);
            }
        }
        Ok(changes)
    }
}
