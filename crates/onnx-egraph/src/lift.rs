//! Lifting an IR graph into the e-graph: graph inputs become `Input` leaves, initializers
//! `Const` leaves (content-addressed: duplicates merge), every node one operator e-node whose
//! children are its attributes in layout order (schema order, defaults filled in) then its
//! inputs, then the outer-scope values its subgraphs read. Building bottom-up in topological
//! order lets the analysis fold constants as the graph is built.

use std::collections::BTreeMap;

use egg::Id;
use onnx_ir::{Attribute, Graph, Model, NodeId, ValueId};
use onnx_proto::AttributeProto;

use crate::analysis::{FoldOptions, OnnxAnalysis, OnnxEGraph};
use crate::build::{AttrArg, OpBuilder};
use crate::lang::{NodeKind, ONode};
use crate::EGraphError;

/// Where a lifted node came from, so extraction can keep its name and metadata.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The op e-node as lifted (children as they were then; canonicalize before comparing).
    pub enode: ONode,
    pub node: NodeId,
}

/// A graph in the e-graph, with what extraction needs to write it back.
#[derive(Debug)]
pub struct Lifted {
    pub egraph: OnnxEGraph,
    /// The class joining the graph outputs.
    pub root: Id,
    /// Graph input values (non-initializer inputs, in order), one `Input(k)` leaf each.
    pub inputs: Vec<ValueId>,
    /// Outer-scope values read by this (sub)graph: `Input(inputs.len() + k)`.
    pub outer: Vec<String>,
    /// Op e-nodes by lifted class, with the IR node they came from.
    pub origins: Vec<Origin>,
    /// Initializer names (kept as names of their constants when they survive).
    pub initializer_names: BTreeMap<String, ValueId>,
    /// Class of every IR value, by value id.
    pub value_class: BTreeMap<ValueId, Id>,
    /// Consumers of each class in the graph as lifted (nodes reading it, graph outputs), for
    /// the `single_use` guard.
    pub uses: Vec<(Id, usize)>,
}

/// The opset version of each imported domain (domains normalized: "ai.onnx" is "").
pub fn opset_map(model: &Model) -> BTreeMap<String, i64> {
    model
        .opset_imports
        .iter()
        .map(|o| {
            (
                onnx_schema::normalize_domain(&o.domain).to_string(),
                o.version,
            )
        })
        .collect()
}

/// Lifts the main graph of a model.
pub fn lift_model(model: &Model, fold: FoldOptions) -> Result<Lifted, EGraphError> {
    lift_graph(&model.graph, &opset_map(model), fold)
}

/// Lifts one graph given the opset imports in force.
pub fn lift_graph(
    graph: &Graph,
    opsets: &BTreeMap<String, i64>,
    fold: FoldOptions,
) -> Result<Lifted, EGraphError> {
    lift_graph_in_scope(graph, opsets, fold, &BTreeMap::new())
}

/// [`lift_graph`] for a subgraph: `outer_types` are the types of the enclosing scopes' values
/// it may read, by name.
pub fn lift_graph_in_scope(
    graph: &Graph,
    opsets: &BTreeMap<String, i64>,
    fold: FoldOptions,
    outer_types: &BTreeMap<String, onnx_proto::TypeProto>,
) -> Result<Lifted, EGraphError> {
    let mut egraph = OnnxEGraph::new(OnnxAnalysis::new(fold));
    egraph.analysis.opsets = opsets.clone();
    egraph.analysis.outer_types = outer_types.clone();
    let mut value_class: BTreeMap<ValueId, Id> = BTreeMap::new();
    let mut inputs = Vec::new();
    let mut initializer_names = BTreeMap::new();
    for &v in &graph.initializers {
        let value = graph.value(v);
        let Some(t) = &value.initializer else {
            continue;
        };
        let c = egraph.analysis.consts.intern(t.clone());
        let id = egraph.add(ONode::leaf(NodeKind::Const(c)));
        egraph[id].data.names.insert(value.name.to_string());
        value_class.insert(v, id);
        initializer_names.insert(value.name.to_string(), v);
    }
    for &v in &graph.inputs {
        if value_class.contains_key(&v) {
            continue; // an initializer also listed as input (IR < 4): a constant
        }
        let id = egraph.add(ONode::leaf(NodeKind::Input(inputs.len() as u32)));
        let value = graph.value(v);
        egraph[id].data.names.insert(value.name.to_string());
        if egraph[id].data.ty.is_none() {
            egraph[id].data.ty = value.ty.as_ref().map(crate::types::declared);
        }
        value_class.insert(v, id);
        inputs.push(v);
    }
    let order = graph
        .topological_order()
        .map_err(|e| EGraphError::Ir(e.to_string()))?;
    let mut outer: Vec<String> = Vec::new();
    let mut origins = Vec::new();
    let mut uses: Vec<(Id, usize)> = Vec::new();
    // Values something reads (nodes, subgraphs' outer reads, graph outputs): trailing outputs
    // nothing reads are dropped when the schema allows (Dropout's mask, MaxPool's indices), so
    // such a node is the same op as one written without them.
    let mut consumed: std::collections::BTreeSet<ValueId> = graph.outputs.iter().copied().collect();
    for n in graph.nodes.iter() {
        consumed.extend(n.inputs.iter().flatten().copied());
        for sub in n.subgraphs() {
            for name in sub.outer_reads() {
                if let Some(v) = graph.find_value(&name) {
                    consumed.insert(v);
                }
            }
        }
    }
    for nid in order {
        let node = graph.node(nid);
        let domain = onnx_schema::normalize_domain(&node.domain).to_string();
        let opset = opsets
            .get(&domain)
            .copied()
            .ok_or_else(|| EGraphError::NoOpset {
                node: node.name_or_empty().to_string(),
                op: node.op_type.to_string(),
                domain: domain.clone(),
            })?;
        let mut builder = OpBuilder::at_opset(&domain, &node.op_type, opset).lenient();
        let mut implicit = Vec::new();
        for a in &node.attributes {
            builder = builder.attr(
                &a.name,
                AttrArg::Proto(Box::new(attribute_proto(a, &mut implicit))),
            );
        }
        for input in &node.inputs {
            let id = input.map(|v| {
                class_of(
                    &mut egraph,
                    graph,
                    v,
                    &mut value_class,
                    &mut outer,
                    inputs.len(),
                )
            });
            builder = builder.push_input(id);
        }
        implicit.sort();
        implicit.dedup();
        // Outer reads of a subgraph that this graph defines are this graph's values; the others
        // are outer values of this graph too.
        for name in &implicit {
            let id = match graph.find_value(name) {
                Some(v) => class_of(
                    &mut egraph,
                    graph,
                    v,
                    &mut value_class,
                    &mut outer,
                    inputs.len(),
                ),
                None => outer_class(&mut egraph, name, &mut outer, inputs.len()),
            };
            builder = builder.outer(name, id);
        }
        let mut n_out = node.outputs.len();
        // Never where the count is meaning (see `output_count_is_meaning`).
        if let Some(s) = builder
            .schema()
            .filter(|s| !crate::build::output_count_is_meaning(s))
        {
            let keep = s.min_output.max(1);
            while n_out > keep && node.outputs[n_out - 1].is_none_or(|v| !consumed.contains(&v)) {
                n_out -= 1;
            }
            // All or the minimum: some ops allow no count in between (BatchNormalization-7
            // takes 1 or 5 outputs).
            if n_out > keep {
                n_out = node.outputs.len();
            }
        }
        let (id, enode) = builder.outputs(n_out).add_to(&mut egraph)?;
        if let (Some(&u), Some(Some(v))) = (enode.children.last(), node.outputs.first()) {
            if let Some(NodeKind::Unique(k)) = egraph[u].nodes.first().map(|n| n.kind) {
                egraph
                    .analysis
                    .unique_names
                    .insert(k, graph.value(*v).name.to_string());
            }
        }
        let mut read: Vec<Id> = node
            .inputs
            .iter()
            .flatten()
            .filter_map(|v| value_class.get(v).copied())
            .collect();
        read.sort();
        read.dedup();
        uses.extend(read.into_iter().map(|c| (c, 1)));
        let is_tuple = match enode.kind {
            NodeKind::Op(op) => egraph.analysis.ops.get(op).is_tuple,
            _ => false,
        };
        origins.push(Origin { enode, node: nid });
        for (i, out) in node.outputs.iter().enumerate().take(n_out) {
            let Some(v) = out else { continue };
            let vid = if is_tuple {
                egraph.add(ONode::new(NodeKind::Out(i as u32), vec![id]))
            } else {
                id
            };
            let value = graph.value(*v);
            egraph[vid].data.names.insert(value.name.to_string());
            let declared = value.ty.as_ref().map(crate::types::declared);
            match (&egraph[vid].data.ty, declared) {
                (None, d) => egraph[vid].data.ty = d,
                // Dims the inference left unknown take the declared ones.
                (Some(t), Some(d)) => {
                    if let Some(r) = crate::types::refine(t, &d) {
                        egraph[vid].data.ty = Some(r);
                    }
                }
                (Some(_), None) => {}
            }
            value_class.insert(*v, vid);
        }
    }
    let mut outs = Vec::with_capacity(graph.outputs.len());
    for &v in &graph.outputs {
        outs.push(class_of(
            &mut egraph,
            graph,
            v,
            &mut value_class,
            &mut outer,
            inputs.len(),
        ));
    }
    uses.extend(outs.iter().map(|&c| (c, 1)));
    let root = egraph.add(ONode::new(NodeKind::Root, outs));
    egraph.rebuild();
    Ok(Lifted {
        egraph,
        root,
        inputs,
        outer,
        origins,
        initializer_names,
        value_class,
        uses,
    })
}

/// The class of an IR value; a value defined nowhere in this graph is an outer-scope value.
fn class_of(
    egraph: &mut OnnxEGraph,
    graph: &Graph,
    v: ValueId,
    value_class: &mut BTreeMap<ValueId, Id>,
    outer: &mut Vec<String>,
    n_inputs: usize,
) -> Id {
    if let Some(&id) = value_class.get(&v) {
        return id;
    }
    let name = graph.value(v).name.to_string();
    let id = outer_class(egraph, &name, outer, n_inputs);
    value_class.insert(v, id);
    id
}

fn outer_class(
    egraph: &mut OnnxEGraph,
    name: &str,
    outer: &mut Vec<String>,
    n_inputs: usize,
) -> Id {
    let k = match outer.iter().position(|o| o == name) {
        Some(k) => k,
        None => {
            outer.push(name.to_string());
            outer.len() - 1
        }
    };
    let id = egraph.add(ONode::leaf(NodeKind::Input((n_inputs + k) as u32)));
    egraph[id].data.names.insert(name.to_string());
    if egraph[id].data.ty.is_none() {
        egraph[id].data.ty = egraph
            .analysis
            .outer_types
            .get(name)
            .map(crate::types::declared);
    }
    id
}

/// The proto of an attribute; subgraphs travel as opaque attribute values, and the outer
/// names they read are collected.
fn attribute_proto(a: &Attribute, implicit: &mut Vec<String>) -> AttributeProto {
    for g in a.value.subgraphs() {
        implicit.extend(g.outer_reads().iter().map(|n| n.to_string()));
    }
    a.to_proto()
}
