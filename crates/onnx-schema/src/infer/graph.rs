//! Whole-graph inference: runs [`infer_node`](super::infer_node) over a graph's nodes in order,
//! with graph inputs as declared, initializers and `Constant` nodes as constants, and symbolic
//! values flowing between nodes. Declared `value_info` and graph output types are not read:
//! what comes out is what the rules infer.
//!
//! Nodes whose op or domain is unknown get unknown outputs and inference goes on around them.
//! Control-flow bodies (If, Loop, Scan) are inferred by the op rules from their own inputs.
//! With [`InferOptions::functions`], a call of a model-local function gets the output types
//! its body infers from the call's input types (as onnx's inference does); with
//! [`InferOptions::lenient`], a node whose inputs are inconsistent gets unknown outputs instead
//! of failing the whole graph.

use std::collections::BTreeMap;

use onnx_proto::{
    AttributeProto, FunctionProto, GraphProto, NodeProto, OperatorSetIdProto, TensorProto,
    TypeProto, ValueInfoProto,
};

use super::dims::{tensor_type, SymDim};
use super::error::InferError;
use super::tensor_data::constant_attribute_value;
use super::{infer_node_in_scope, InputInfo};
use crate::embedded::registry;
use crate::registry::normalize_domain;

/// The opset version imported for each domain ("" is the default domain).
pub type OpsetImports = BTreeMap<String, i64>;

/// Builds [`OpsetImports`] from a model's `opset_import` list ("ai.onnx" becomes "").
pub fn opset_imports(imports: &[OperatorSetIdProto]) -> OpsetImports {
    imports
        .iter()
        .map(|o| {
            (
                normalize_domain(o.domain.as_deref().unwrap_or_default()).to_string(),
                o.version.unwrap_or(0),
            )
        })
        .collect()
}

/// Everything [`infer_graph_values`] learned about a graph's values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GraphInference {
    /// The type of every value whose type is known: graph inputs, initializers, node outputs.
    pub types: BTreeMap<String, TypeProto>,
    /// The symbolic value of every integer scalar or vector computed from shapes.
    pub sym_values: BTreeMap<String, Vec<SymDim>>,
}

/// The type of each value of `graph` that inference knows, by value name (graph inputs,
/// initializers and node outputs). Fails on the first node whose inputs are inconsistent,
/// naming it.
pub fn infer_graph(
    graph: &GraphProto,
    opsets: &OpsetImports,
) -> Result<BTreeMap<String, TypeProto>, InferError> {
    infer_graph_values(graph, opsets).map(|g| g.types)
}

/// Like [`infer_graph`], and also returns the symbolic values.
pub fn infer_graph_values(
    graph: &GraphProto,
    opsets: &OpsetImports,
) -> Result<GraphInference, InferError> {
    infer_graph_with(graph, opsets, InferOptions::default())
}

/// What [`infer_graph_with`] does beyond [`infer_graph_values`].
#[derive(Debug, Clone, Copy, Default)]
pub struct InferOptions<'a> {
    /// The model's local functions: a node calling one (its domain, name and overload) gets
    /// the output types the function's body infers, its inputs typed as the call's are and
    /// its attribute references resolved from the call (else the function's defaults).
    pub functions: &'a [FunctionProto],
    /// A node whose inputs are inconsistent gets unknown outputs and inference goes on, instead
    /// of failing the graph.
    pub lenient: bool,
}

/// [`infer_graph_values`] with options (model-local functions, leniency).
pub fn infer_graph_with(
    graph: &GraphProto,
    opsets: &OpsetImports,
    options: InferOptions<'_>,
) -> Result<GraphInference, InferError> {
    infer_in_scope_with(graph, opsets, None, options, 0).map(|scope| scope.inferred)
}

/// How deep calls of model-local functions are followed (a model whose functions call each
/// other in a cycle is invalid; inference stops there rather than recursing).
const MAX_CALL_DEPTH: usize = 16;

/// The tensor type a constant's dims and element type describe.
pub(crate) fn constant_type(t: &TensorProto) -> TypeProto {
    let dims: Vec<SymDim> = t.dims.iter().map(|&d| SymDim::Known(d)).collect();
    tensor_type(t.data_type, Some(&dims))
}

/// The values visible while inferring one graph: its own, then those of the enclosing graphs
/// (for If, Loop and Scan bodies).
pub(crate) struct Scope<'a> {
    parent: Option<&'a Scope<'a>>,
    initializers: BTreeMap<&'a str, &'a TensorProto>,
    constants: BTreeMap<String, TensorProto>,
    inferred: GraphInference,
    options: InferOptions<'a>,
    /// Calls of model-local functions this graph is inside.
    depth: usize,
}

impl<'a> Scope<'a> {
    fn ty(&self, name: &str) -> Option<&TypeProto> {
        match self.inferred.types.get(name) {
            Some(t) => Some(t),
            None => self.parent.and_then(|p| p.ty(name)),
        }
    }

    fn constant(&self, name: &str) -> Option<&TensorProto> {
        match self.initializers.get(name) {
            Some(t) => Some(*t),
            None => match self.constants.get(name) {
                Some(t) => Some(t),
                None => self.parent.and_then(|p| p.constant(name)),
            },
        }
    }

    fn sym_value(&self, name: &str) -> Option<&[SymDim]> {
        match self.inferred.sym_values.get(name) {
            Some(v) => Some(v),
            None => self.parent.and_then(|p| p.sym_value(name)),
        }
    }

    /// What is known of the value `name` here.
    fn input_info(&self, name: &str) -> InputInfo<'_> {
        InputInfo {
            ty: self.ty(name),
            constant: self.constant(name),
            sym_value: self.sym_value(name),
        }
    }
}

/// Infers `graph` with the values of `parent` visible (for subgraph bodies).
pub(crate) fn infer_in_scope<'a>(
    graph: &'a GraphProto,
    opsets: &OpsetImports,
    parent: Option<&'a Scope<'a>>,
) -> Result<Scope<'a>, InferError> {
    let (options, depth) = parent.map_or((InferOptions::default(), 0), |p| (p.options, p.depth));
    infer_in_scope_with(graph, opsets, parent, options, depth)
}

fn infer_in_scope_with<'a>(
    graph: &'a GraphProto,
    opsets: &OpsetImports,
    parent: Option<&'a Scope<'a>>,
    options: InferOptions<'a>,
    depth: usize,
) -> Result<Scope<'a>, InferError> {
    let mut scope = Scope {
        parent,
        initializers: graph
            .initializer
            .iter()
            .filter_map(|t| Some((t.name.as_deref()?, t)))
            .collect(),
        constants: BTreeMap::new(),
        inferred: GraphInference::default(),
        options,
        depth,
    };
    for input in &graph.input {
        if let (Some(name), Some(ty)) = (input.name.as_deref(), input.r#type.as_ref()) {
            scope.inferred.types.insert(name.to_string(), ty.clone());
        }
    }
    for (name, t) in &scope.initializers {
        scope
            .inferred
            .types
            .insert((*name).to_string(), constant_type(t));
    }
    for node in &graph.node {
        let domain = normalize_domain(node.domain.as_deref().unwrap_or_default());
        let op_type = node.op_type.as_deref().unwrap_or_default();
        let Some(&version) = opsets.get(domain) else {
            continue;
        };
        let Some(schema) = registry()
            .lookup(domain, op_type, version)
            .or_else(|| crate::onnxruntime_extensions().lookup(domain, op_type, version))
        else {
            if let Some(types) = scope.call_outputs(node) {
                for (name, ty) in node.output.iter().zip(types) {
                    if let (false, Some(ty)) = (name.is_empty(), ty) {
                        scope.inferred.types.insert(name.clone(), ty);
                    }
                }
            }
            continue;
        };
        let outputs = {
            let inputs: Vec<Option<InputInfo<'_>>> = node
                .input
                .iter()
                .map(|name| (!name.is_empty()).then(|| scope.input_info(name)))
                .collect();
            infer_node_in_scope(
                schema,
                version,
                &node.attribute,
                &inputs,
                node.output.len(),
                Some(&scope),
            )
            .map_err(|source| InferError::Node {
                node: node
                    .name
                    .clone()
                    .filter(|n| !n.is_empty())
                    .or_else(|| node.output.first().cloned())
                    .unwrap_or_default(),
                op_type: if domain.is_empty() {
                    op_type.to_string()
                } else {
                    format!("{domain}:{op_type}")
                },
                source: Box::new(source),
            })
        };
        let outputs = match outputs {
            Ok(outputs) => outputs,
            Err(_) if scope.options.lenient => continue,
            Err(e) => return Err(e),
        };
        if domain.is_empty() && op_type == "Constant" {
            if let (Some(name), Some(t)) = (
                node.output.first(),
                constant_attribute_value(&node.attribute),
            ) {
                scope.constants.insert(name.clone(), t);
            }
        }
        for (name, out) in node.output.iter().zip(outputs) {
            if name.is_empty() {
                continue;
            }
            if let Some(ty) = out.ty {
                scope.inferred.types.insert(name.clone(), ty);
            }
            if let Some(sym) = out.sym_value {
                scope.inferred.sym_values.insert(name.clone(), sym);
            }
        }
    }
    Ok(scope)
}

impl Scope<'_> {
    /// The output types of `node` when it calls one of [`InferOptions::functions`] (`None`
    /// when it calls none, or calls are nested too deep).
    fn call_outputs(&self, node: &NodeProto) -> Option<Vec<Option<TypeProto>>> {
        fn id<'s>(
            d: &'s Option<String>,
            n: &'s Option<String>,
            o: &'s Option<String>,
        ) -> [&'s str; 3] {
            [d, n, o].map(|x| x.as_deref().unwrap_or(""))
        }
        let call = id(&node.domain, &node.op_type, &node.overload);
        let f = (self.options.functions.iter())
            .find(|f| id(&f.domain, &f.name, &f.overload) == call)?;
        if self.depth >= MAX_CALL_DEPTH {
            return None;
        }
        let input_types: Vec<Option<TypeProto>> = (node.input.iter())
            .map(|a| (!a.is_empty()).then(|| self.ty(a).cloned()).flatten())
            .collect();
        let inner = infer_call(
            f,
            &node.attribute,
            &input_types,
            self.options,
            self.depth + 1,
        );
        let inner = inner.ok()?;
        Some(
            f.output
                .iter()
                .map(|o| inner.types.get(o).cloned())
                .collect(),
        )
    }
}

/// What inference learns about the values of a model-local function's body for one call of
/// it: its formal inputs typed as the call's inputs (`input_types`, by position; missing ones
/// unknown), its attribute references resolved from the call's attributes (`call_attributes`),
/// else the function's defaults. Calls of [`InferOptions::functions`] inside the body are
/// followed too (to a fixed depth).
pub fn infer_function_call(
    function: &FunctionProto,
    call_attributes: &[AttributeProto],
    input_types: &[Option<TypeProto>],
    options: InferOptions<'_>,
) -> Result<GraphInference, InferError> {
    infer_call(function, call_attributes, input_types, options, 1)
}

fn infer_call(
    f: &FunctionProto,
    call_attributes: &[AttributeProto],
    input_types: &[Option<TypeProto>],
    options: InferOptions<'_>,
    depth: usize,
) -> Result<GraphInference, InferError> {
    let typed = |name: &String, ty: Option<TypeProto>| ValueInfoProto {
        name: Some(name.clone()),
        r#type: ty,
        ..Default::default()
    };
    let body = GraphProto {
        name: f.name.clone(),
        node: f
            .node
            .iter()
            .map(|n| resolve_attribute_refs(n, call_attributes, &f.attribute_proto))
            .collect(),
        input: f
            .input
            .iter()
            .enumerate()
            .map(|(i, formal)| typed(formal, input_types.get(i).cloned().flatten()))
            .collect(),
        output: f.output.iter().map(|o| typed(o, None)).collect(),
        value_info: f.value_info.clone(),
        ..Default::default()
    };
    let opsets = opset_imports(&f.opset_import);
    infer_in_scope_with(&body, &opsets, None, options, depth).map(|scope| scope.inferred)
}

/// A function body node with each attribute reference (`@name`) replaced by the call's
/// attribute of that name, else the function's default, else dropped; in subgraphs too.
fn resolve_attribute_refs(
    node: &NodeProto,
    given: &[AttributeProto],
    defaults: &[AttributeProto],
) -> NodeProto {
    let mut node = node.clone();
    let mut attributes = Vec::with_capacity(node.attribute.len());
    for mut a in std::mem::take(&mut node.attribute) {
        if let Some(r) = a.ref_attr_name.clone().filter(|r| !r.is_empty()) {
            let by_name = |x: &&AttributeProto| x.name.as_deref() == Some(r.as_str());
            let Some(value) = given.iter().find(by_name).or(defaults.iter().find(by_name)) else {
                continue;
            };
            let name = a.name.take();
            a = value.clone();
            a.name = name;
        }
        for g in a.g.iter_mut().chain(a.graphs.iter_mut()) {
            g.node = (g.node.iter())
                .map(|n| resolve_attribute_refs(n, given, defaults))
                .collect();
        }
        attributes.push(a);
    }
    node.attribute = attributes;
    node
}

/// The types of `graph`'s outputs, by position, as inferred with `parent`'s values visible
/// (`None` for an output whose type is unknown or when inference fails).
pub(crate) fn infer_subgraph_outputs(
    graph: &GraphProto,
    opsets: &OpsetImports,
    parent: Option<&Scope<'_>>,
) -> Vec<Option<TypeProto>> {
    let scope = infer_in_scope(graph, opsets, parent).ok();
    graph
        .output
        .iter()
        .map(|o| {
            let name = o.name.as_deref()?;
            scope.as_ref()?.ty(name).cloned()
        })
        .collect()
}
