//! The normal form of an IR model: the arenas a fresh import of its protobuf gives
//! (`Model::from_proto(model.to_proto())`), built from the IR without the protobuf.
//!
//! A pass that edits the IR in place leaves removed nodes in the node arena, values nothing
//! refers to any more, types on values no declaration states, and values in the order the edit
//! made them. None of that reaches the file, but the passes after read the arenas (the
//! e-graph's lift reserves every value's name and walks every node of the arena), so a pass
//! that changed a model brings it to normal form: the passes after it see what they saw when it
//! ran on the protobuf, and the output stays byte for byte what it was.
//!
//! An edit need only get names right: names resolve here as import resolves them (a node input
//! to the latest definition before the node, else the first anywhere, else one shared undefined
//! value per name, a read from the enclosing scope in a subgraph; graph outputs and value_info
//! to the last definition), whatever handles the edit left.

use std::collections::HashMap;

use onnx_ir::onnx_proto::{TensorProto, ValueInfoProto};
use onnx_ir::{Attribute, AttributeValue, Graph, InfoList, InfoOverride, Model, Name};
use onnx_ir::{Node, NodeId, Value, ValueId};

use super::names::value_name;

/// Brings a model to normal form (see the module documentation).
pub(crate) fn normalize(model: &mut Model) {
    model.has_graph |= model.graph != Graph::default();
    for o in &mut model.opset_imports {
        o.field_presence.domain |= !o.domain.is_empty();
        o.field_presence.version |= o.version != 0;
    }
    normalize_graph(&mut model.graph, Scope::Main);
    for f in &mut model.functions {
        for o in &mut f.opset_imports {
            o.field_presence.domain |= !o.domain.is_empty();
            o.field_presence.version |= o.version != 0;
        }
        normalize_graph(&mut f.body, Scope::Function);
    }
}

/// Brings a main graph alone to normal form.
pub(crate) fn normalize_main_graph(g: &mut Graph) {
    normalize_graph(g, Scope::Main);
}

/// What a graph is, which decides what its protobuf holds and how unresolved names read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// A main graph: unresolved names are undefined.
    Main,
    /// A subgraph: unresolved names are reads from the enclosing scope.
    Sub,
    /// A function body: bare input and output names, no initializers, no graph fields.
    Function,
}

/// `Some(name)` unless the field was absent and the name is still empty (as export writes it).
fn fix_name(field: &mut Option<String>, name: &str) {
    if field.as_deref().unwrap_or("") != name {
        *field = Some(name.to_string());
    }
}

/// The declaration export writes for slot `index` of `list`: its override while the slot
/// still holds the override's value, else the value's own.
pub(crate) fn declaration(g: &Graph, list: InfoList, index: usize, id: ValueId) -> ValueInfoProto {
    let Some(value) = g.get_value(id) else {
        return ValueInfoProto {
            name: Some(value_name(g, id).to_string()),
            ..ValueInfoProto::default()
        };
    };
    match g.info_overrides.get(&(list, index)) {
        Some(o) if o.value == id => {
            let mut proto = o.proto.clone();
            fix_name(&mut proto.name, &value.name);
            proto
        }
        _ => value.value_info(),
    }
}

/// A graph under construction, with its shared undefined values.
struct Builder {
    graph: Graph,
    outer: bool,
    unresolved: HashMap<Name, ValueId>,
}

impl Builder {
    fn unresolved(&mut self, name: &Name) -> ValueId {
        if let Some(&id) = self.unresolved.get(name) {
            return id;
        }
        let id = self.graph.add_value(Value {
            name: name.clone(),
            is_outer: self.outer,
            ..Value::default()
        });
        self.unresolved.insert(name.clone(), id);
        id
    }
}

/// One declaration of the graph being built: list, slot, value, and what export writes.
type Decl = (InfoList, usize, ValueId, Option<ValueInfoProto>);

fn normalize_graph(g: &mut Graph, scope: Scope) {
    let mut old = std::mem::take(g);
    let function = scope == Scope::Function;
    let mut b = Builder {
        graph: Graph::default(),
        outer: scope == Scope::Sub,
        unresolved: HashMap::new(),
    };
    if !function {
        b.graph.name = old.name.take();
        b.graph.doc_string = old.doc_string.take();
        b.graph.quantization_annotation = std::mem::take(&mut old.quantization_annotation);
        b.graph.metadata_props = std::mem::take(&mut old.metadata_props);
    }
    let mut graph_defs: Vec<(Name, ValueId)> = Vec::new();
    let mut unpaired: HashMap<Name, Vec<ValueId>> = HashMap::new();
    let mut decls: Vec<Decl> = Vec::new();
    for (i, &id) in old.inputs.iter().enumerate() {
        let name = value_name(&old, id);
        let new = b.graph.add_value(Value::new(name.clone()));
        b.graph.inputs.push(new);
        unpaired.entry(name.clone()).or_default().push(new);
        graph_defs.push((name, new));
        let info = (!function).then(|| declaration(&old, InfoList::Input, i, id));
        decls.push((InfoList::Input, i, new, info));
    }
    let mut pair_with_input = |name: &Name| -> Option<ValueId> {
        let ids = unpaired.get_mut(name)?;
        (!ids.is_empty()).then(|| ids.remove(0))
    };
    if !function {
        // Tensors move; one listed twice is written twice.
        let mut placed: HashMap<ValueId, ValueId> = HashMap::new();
        for &id in &old.initializers {
            let name = value_name(&old, id);
            let taken = old
                .values
                .get_mut(id.index())
                .and_then(|v| v.initializer.take());
            let mut tensor = match (taken, placed.get(&id)) {
                (Some(t), _) => t,
                (None, Some(&p)) => b.graph.value(p).initializer.clone().unwrap_or_default(),
                (None, None) => TensorProto::default(),
            };
            fix_name(&mut tensor.name, &name);
            let new = pair_with_input(&name).unwrap_or_else(|| {
                let new = b.graph.add_value(Value::new(name.clone()));
                graph_defs.push((name, new));
                new
            });
            b.graph.value_mut(new).initializer = Some(tensor);
            b.graph.initializers.push(new);
            placed.entry(id).or_insert(new);
        }
        for &id in &old.sparse_initializers {
            let name = value_name(&old, id);
            let mut sparse = old
                .get_value(id)
                .and_then(|v| v.sparse_initializer.as_deref().cloned())
                .unwrap_or_default();
            let current = sparse.values.as_ref().and_then(|v| v.name.as_deref());
            if current.unwrap_or("") != &*name {
                let values = sparse.values.get_or_insert_with(TensorProto::default);
                fix_name(&mut values.name, &name);
            }
            let new = pair_with_input(&name).unwrap_or_else(|| {
                let new = b.graph.add_value(Value::new(name.clone()));
                graph_defs.push((name, new));
                new
            });
            b.graph.value_mut(new).sparse_initializer = Some(Box::new(sparse));
            b.graph.sparse_initializers.push(new);
        }
    }

    // The nodes in order, their inputs and outputs as names ("" is an absent one).
    let mut seen = vec![false; old.nodes.len()];
    let repeated = old.order.iter().any(|id| {
        seen.get_mut(id.index())
            .is_some_and(|s| std::mem::replace(s, true))
    });
    let mut arena: Vec<Option<Node>> = std::mem::take(&mut old.nodes)
        .into_iter()
        .map(Some)
        .collect();
    let named = |old: &Graph, slots: &[Option<ValueId>]| -> Vec<Option<Name>> {
        slots
            .iter()
            .map(|s| s.map(|id| value_name(old, id)).filter(|n| !n.is_empty()))
            .collect()
    };
    let mut nodes = Vec::with_capacity(old.order.len());
    for id in &old.order {
        let node = match repeated {
            true => arena.get(id.index()).cloned().flatten(),
            false => arena.get_mut(id.index()).and_then(Option::take),
        };
        if let Some(node) = node {
            let inputs = named(&old, &node.inputs);
            let outputs = named(&old, &node.outputs);
            nodes.push((node, inputs, outputs));
        }
    }
    // Node outputs are definitions too; all made before any input resolves.
    let mut node_outputs: Vec<Vec<Option<ValueId>>> = Vec::with_capacity(nodes.len());
    for (k, (_, _, outputs)) in nodes.iter().enumerate() {
        let ids = outputs
            .iter()
            .enumerate()
            .map(|(position, name)| {
                name.as_ref().map(|name| {
                    b.graph.add_value(Value {
                        name: name.clone(),
                        producer: Some((NodeId(k as u32), position)),
                        ..Value::default()
                    })
                })
            })
            .collect();
        node_outputs.push(ids);
    }
    let mut first_def: HashMap<Name, ValueId> = HashMap::new();
    let mut last_def: HashMap<Name, ValueId> = HashMap::new();
    let node_defs = node_outputs.iter().flatten().flatten().map(|&id| {
        let name = b.graph.value(id).name.clone();
        (name, id)
    });
    for (name, id) in graph_defs.iter().cloned().chain(node_defs) {
        first_def.entry(name.clone()).or_insert(id);
        last_def.insert(name, id);
    }
    let mut current: HashMap<Name, ValueId> = graph_defs.into_iter().collect();
    for ((mut node, inputs, _), outputs) in nodes.into_iter().zip(node_outputs) {
        node.inputs = Vec::with_capacity(inputs.len());
        for name in inputs {
            let id = name.map(
                |name| match current.get(&name).or_else(|| first_def.get(&name)) {
                    Some(&id) => id,
                    None => b.unresolved(&name),
                },
            );
            node.inputs.push(id);
        }
        for &id in outputs.iter().flatten() {
            current.insert(b.graph.value(id).name.clone(), id);
        }
        node.outputs = outputs;
        normalize_node(&mut node);
        b.graph.nodes.push(node);
    }
    b.graph.order = (0..b.graph.nodes.len() as u32).map(NodeId).collect();

    let resolve_last = |b: &mut Builder, name: &Name| match last_def.get(name) {
        Some(&id) => id,
        None => b.unresolved(name),
    };
    for (i, &id) in old.outputs.iter().enumerate() {
        let new = resolve_last(&mut b, &value_name(&old, id));
        b.graph.outputs.push(new);
        let info = (!function).then(|| declaration(&old, InfoList::Output, i, id));
        decls.push((InfoList::Output, i, new, info));
    }
    for (i, &id) in old.value_info.iter().enumerate() {
        let new = resolve_last(&mut b, &value_name(&old, id));
        b.graph.value_info.push(new);
        let info = declaration(&old, InfoList::ValueInfo, i, id);
        decls.push((InfoList::ValueInfo, i, new, Some(info)));
    }
    attach_declarations(&mut b.graph, decls);
    *g = b.graph;
}

/// A node as import makes it: optional fields present when not empty, subgraphs in normal form.
fn normalize_node(node: &mut Node) {
    node.field_presence.op_type |= !node.op_type.is_empty();
    node.field_presence.domain |= !node.domain.is_empty();
    for a in &mut node.attributes {
        normalize_attribute(a);
    }
}

fn normalize_attribute(a: &mut Attribute) {
    let mut rest = a.rest.take().map(|r| *r).unwrap_or_default();
    fix_name(&mut rest.name, &a.name);
    match &mut a.value {
        AttributeValue::Proto(p) => fix_name(&mut p.name, &a.name),
        AttributeValue::Graph(g) => {
            normalize_graph(g, Scope::Sub);
            rest.g = None;
            a.rest = Some(Box::new(rest));
        }
        // Written as an attribute with no graph: imported as any other attribute.
        AttributeValue::Graphs(gs) if gs.is_empty() => {
            a.value = AttributeValue::Proto(Box::new(rest));
        }
        AttributeValue::Graphs(gs) => {
            for g in gs.iter_mut() {
                normalize_graph(g, Scope::Sub);
            }
            rest.graphs = Vec::new();
            a.rest = Some(Box::new(rest));
        }
    }
}

/// Gives each declared value its type, doc string and metadata from its first typed
/// declaration (else its first), and records every declaration the value would not write as
/// an override (import's rule).
fn attach_declarations(graph: &mut Graph, decls: Vec<Decl>) {
    let mut primary: Vec<Option<usize>> = vec![None; graph.values.len()];
    for (k, (_, _, id, info)) in decls.iter().enumerate() {
        let (Some(info), Some(slot)) = (info, primary.get_mut(id.index())) else {
            continue;
        };
        let better = match slot {
            None => true,
            Some(prev) => {
                info.r#type.is_some()
                    && decls
                        .get(*prev)
                        .and_then(|d| d.3.as_ref())
                        .is_some_and(|p| p.r#type.is_none())
            }
        };
        if better {
            *slot = Some(k);
        }
    }
    for (id, k) in primary.iter().enumerate() {
        let Some(info) = k.and_then(|k| decls.get(k)).and_then(|d| d.3.as_ref()) else {
            continue;
        };
        let value = &mut graph.values[id];
        value.ty = info.r#type.clone();
        value.doc_string = info.doc_string.clone();
        value.metadata_props = info.metadata_props.clone();
    }
    for (list, index, id, info) in decls {
        let Some(info) = info else { continue };
        if graph.value(id).value_info() != info {
            graph.info_overrides.insert(
                (list, index),
                InfoOverride {
                    value: id,
                    proto: info,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) {
        let proto = onnx_text::parse_model(text).expect("test model parses");
        let model = Model::from_proto(proto).expect("imports");
        let mut normal = model.clone();
        normalize(&mut normal);
        assert_eq!(normal, model, "a fresh import is in normal form");
    }

    #[test]
    fn a_fresh_import_is_in_normal_form() {
        check(
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x, bool c) => (float[2] y) <float[2] w = {1, 2}> {
  t = Add(x, w)
  y = If (c) <then_branch = a () => (float[2] p) { p = Abs(t) },
              else_branch = e () => (float[2] q) { q = Neg(x) }>
}"#,
        );
    }

    #[test]
    fn removed_nodes_and_stale_values_go() {
        let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) {
  t = Abs(x)
  y = Neg(x)
}"#;
        let proto = onnx_text::parse_model(text).expect("test model parses");
        let mut model = Model::from_proto(proto).expect("imports");
        let abs = model.graph.order[0];
        model.graph.remove_node(abs);
        let fresh = Model::from_proto(model.to_proto()).expect("imports");
        assert_ne!(model, fresh);
        normalize(&mut model);
        assert_eq!(model, fresh);
    }
}
