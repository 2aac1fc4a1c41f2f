//! The graph data model: [`Graph`] owns arenas of [`Value`]s and [`Node`]s addressed by the
//! typed handles [`ValueId`] and [`NodeId`]; nothing points at anything else.
//!
//! A value is one *definition* of a name (a graph input, an initializer, a node output), a
//! name a subgraph reads from an enclosing scope (`is_outer`), or a name that is used or
//! described (value_info, graph output) but defined nowhere. Two definitions of one name are
//! two values with the same name: the graph keeps what the file says, and the checker judges it.
//!
//! A node's [`Attribute`]s are defined here too: a subgraph-valued attribute holds IR graphs (so
//! bodies of If/Loop/Scan can be optimized recursively), so graph, node and attribute are one
//! recursive data model; `attribute` adds their constructors and accessors on top. Layer: imports
//! only `name` (and onnx-proto).

use onnx_proto::{
    AttributeProto, NodeDeviceConfigurationProto, SparseTensorProto, StringStringEntryProto,
    TensorAnnotation, TensorProto, TypeProto, ValueInfoProto,
};
use std::collections::BTreeMap;

use crate::name::Name;

/// Handle of a [`Value`] in its graph's `values` arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ValueId(pub u32);

/// Handle of a [`Node`] in its graph's `nodes` arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl ValueId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl NodeId {
    /// The arena index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One value of a graph (see the module documentation for what counts as one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Value {
    /// The value's name ("" only when the file says so).
    pub name: Name,
    /// The declared type (from a graph input, output or value_info entry).
    pub ty: Option<TypeProto>,
    /// The initializer tensor, as in the file: `raw_data` shares the loaded buffer.
    pub initializer: Option<TensorProto>,
    /// The sparse initializer, as in the file (boxed: rare and large).
    pub sparse_initializer: Option<Box<SparseTensorProto>>,
    /// The node and output position that defines the value.
    pub producer: Option<(NodeId, usize)>,
    /// True for a name a subgraph reads from an enclosing scope.
    pub is_outer: bool,
    /// The doc string of the value's declaration.
    pub doc_string: Option<String>,
    /// The metadata of the value's declaration.
    pub metadata_props: Vec<StringStringEntryProto>,
}

impl Value {
    /// A value with only a name.
    pub fn new(name: impl Into<Name>) -> Self {
        Value {
            name: name.into(),
            ..Value::default()
        }
    }

    /// A value with a name and a type.
    pub fn typed(name: impl Into<Name>, ty: TypeProto) -> Self {
        Value {
            name: name.into(),
            ty: Some(ty),
            ..Value::default()
        }
    }

    /// The value-info declaration this value writes by default (name, type, doc, metadata).
    pub fn value_info(&self) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(self.name.to_string()),
            r#type: self.ty.clone(),
            doc_string: self.doc_string.clone(),
            metadata_props: self.metadata_props.clone(),
        }
    }
}

/// Which optional proto fields of a node were written although empty. Only `to_proto` reads
/// it: a field that is non-empty is always written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct NodeFieldPresence {
    /// `op_type` was present in the proto.
    pub op_type: bool,
    /// `domain` was present in the proto.
    pub domain: bool,
}

/// One operator application.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Node {
    /// The node's name, if it has one.
    pub name: Option<Name>,
    /// The operator.
    pub op_type: Name,
    /// The operator's domain as written ("" and "ai.onnx" both mean the ONNX domain).
    pub domain: Name,
    /// The function overload this node calls, if any.
    pub overload: Option<Name>,
    /// Inputs; `None` is an absent optional input (the empty name in the file).
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs; `None` is an absent optional output (the empty name in the file).
    pub outputs: Vec<Option<ValueId>>,
    /// Attributes in file order.
    pub attributes: Vec<Attribute>,
    /// The node's doc string.
    pub doc_string: Option<String>,
    /// The node's metadata.
    pub metadata_props: Vec<StringStringEntryProto>,
    /// Multi-device configurations, kept as in the file.
    pub device_configurations: Vec<NodeDeviceConfigurationProto>,
    /// Presence of empty optional fields, for a byte-exact round trip.
    pub field_presence: NodeFieldPresence,
}

impl Node {
    /// A node of the ONNX domain with the given operator, inputs and outputs.
    pub fn new(
        op_type: impl Into<Name>,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<Option<ValueId>>,
    ) -> Self {
        Node {
            op_type: op_type.into(),
            inputs,
            outputs,
            ..Node::default()
        }
    }

    /// The attribute with this name (the first, if the node repeats it).
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| &*a.name == name)
    }

    /// True for the ONNX domain ("" or "ai.onnx").
    pub fn is_onnx_domain(&self) -> bool {
        self.domain.is_empty() || &*self.domain == "ai.onnx"
    }

    /// The subgraphs held by this node's attributes, in attribute order.
    pub fn subgraphs(&self) -> impl Iterator<Item = &Graph> {
        self.attributes.iter().flat_map(|a| a.value.subgraphs())
    }

    /// The node's name, or "" when it has none.
    pub fn name_or_empty(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
}

/// One attribute of a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attribute {
    /// The attribute's name.
    pub name: Name,
    /// The attribute's value.
    pub value: AttributeValue,
    /// For graph-valued attributes: the rest of the proto (`type`, `doc_string`,
    /// `ref_attr_name`, and any stray value field), with `g`/`graphs` moved into `value`.
    /// `None` for [`AttributeValue::Proto`], whose message holds everything.
    pub rest: Option<Box<AttributeProto>>,
}

/// The value of an attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    /// A `GRAPH` attribute (the proto's `g`).
    Graph(Box<Graph>),
    /// A `GRAPHS` attribute (the proto's `graphs`).
    Graphs(Vec<Graph>),
    /// Any other attribute, as the proto message (its `g` is unset and `graphs` empty).
    /// Boxed: the message is large and most attributes are small.
    Proto(Box<AttributeProto>),
}

impl Default for AttributeValue {
    fn default() -> Self {
        AttributeValue::Proto(Box::default())
    }
}

/// Which declaration list of a graph an [`InfoOverride`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InfoList {
    /// `graph.input`
    Input,
    /// `graph.output`
    Output,
    /// `graph.value_info`
    ValueInfo,
}

/// A declaration (graph input, output or value_info entry) whose text differs from what its
/// value writes by default, e.g. a value declared twice with different types. Written instead
/// of the default only while the slot still holds `value`, so rebuilt lists never pick up a
/// stale override.
#[derive(Debug, Clone, PartialEq)]
pub struct InfoOverride {
    /// The value the slot held.
    pub value: ValueId,
    /// The declaration exactly as in the file.
    pub proto: ValueInfoProto,
}

/// A graph: the main graph of a model, a subgraph held by an attribute, or a function body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Graph {
    /// The graph's name.
    pub name: Option<String>,
    /// The graph's doc string.
    pub doc_string: Option<String>,
    /// Arena of values, indexed by [`ValueId`].
    pub values: Vec<Value>,
    /// Arena of nodes, indexed by [`NodeId`]; nodes absent from `order` are removed.
    pub nodes: Vec<Node>,
    /// The node sequence.
    pub order: Vec<NodeId>,
    /// Graph inputs, in order.
    pub inputs: Vec<ValueId>,
    /// Graph outputs, in order.
    pub outputs: Vec<ValueId>,
    /// Initializers, in order (a value may also be a graph input).
    pub initializers: Vec<ValueId>,
    /// Sparse initializers, in order.
    pub sparse_initializers: Vec<ValueId>,
    /// Values with a value_info entry, in order.
    pub value_info: Vec<ValueId>,
    /// Quantization annotations, kept as in the file.
    pub quantization_annotation: Vec<TensorAnnotation>,
    /// The graph's metadata.
    pub metadata_props: Vec<StringStringEntryProto>,
    /// Declarations that differ from their value's default text (see [`InfoOverride`]).
    pub info_overrides: BTreeMap<(InfoList, usize), InfoOverride>,
}

impl Graph {
    /// An empty graph with a name.
    pub fn new(name: impl Into<String>) -> Self {
        Graph {
            name: Some(name.into()),
            ..Graph::default()
        }
    }

    /// The graph's name, or "" when it has none.
    pub fn name_or_empty(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// The value behind a handle. Panics on a handle from another graph.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.index()]
    }

    /// The value behind a handle, mutably. Panics on a handle from another graph.
    pub fn value_mut(&mut self, id: ValueId) -> &mut Value {
        &mut self.values[id.index()]
    }

    /// The node behind a handle. Panics on a handle from another graph.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The node behind a handle, mutably. Panics on a handle from another graph.
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id.index()]
    }

    /// The value behind a handle, or `None` for a handle out of range.
    pub fn get_value(&self, id: ValueId) -> Option<&Value> {
        self.values.get(id.index())
    }

    /// The node behind a handle, or `None` for a handle out of range.
    pub fn get_node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The nodes in graph order, with their handles.
    pub fn nodes_in_order(&self) -> impl Iterator<Item = (NodeId, &Node)> + '_ {
        self.order
            .iter()
            .filter_map(|&id| self.get_node(id).map(|node| (id, node)))
    }

    /// All values with their handles, in arena order.
    pub fn values_with_ids(&self) -> impl Iterator<Item = (ValueId, &Value)> + '_ {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| (ValueId(i as u32), v))
    }

    /// The value a name refers to: the last definition (graph input, initializer, output of
    /// a node in `order`, in that order), else any value of that name (an outer-scope read or
    /// an undefined name). Linear in the number of values.
    pub fn find_value(&self, name: &str) -> Option<ValueId> {
        let mut found = None;
        for &id in self
            .inputs
            .iter()
            .chain(&self.initializers)
            .chain(&self.sparse_initializers)
        {
            if self.get_value(id).is_some_and(|v| &*v.name == name) {
                found = Some(id);
            }
        }
        for (_, node) in self.nodes_in_order() {
            for id in node.outputs.iter().flatten() {
                if self.get_value(*id).is_some_and(|v| &*v.name == name) {
                    found = Some(*id);
                }
            }
        }
        found.or_else(|| {
            self.values_with_ids()
                .find(|(_, v)| &*v.name == name)
                .map(|(id, _)| id)
        })
    }

    /// Appends a value and returns its handle.
    pub fn add_value(&mut self, value: Value) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(value);
        id
    }

    /// Appends a node to the arena and to the end of `order`, and records it as the producer
    /// of its outputs. Returns its handle.
    pub fn add_node(&mut self, node: Node) -> NodeId {
        let id = self.add_node_unordered(node);
        self.order.push(id);
        id
    }

    /// Adds a node to the arena and sets the producer of its outputs, without placing it in
    /// `order` (for a pass that rebuilds the order itself).
    pub fn add_node_unordered(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        for (position, output) in node.outputs.iter().enumerate() {
            if let Some(value) = output.and_then(|v| self.values.get_mut(v.index())) {
                value.producer = Some((id, position));
            }
        }
        self.nodes.push(node);
        id
    }

    /// Removes a node from `order` and clears the producer of its outputs. The arena slot
    /// stays (handles remain valid).
    pub fn remove_node(&mut self, id: NodeId) {
        self.order.retain(|&n| n != id);
        let outputs: Vec<ValueId> = self
            .get_node(id)
            .map(|n| n.outputs.iter().flatten().copied().collect())
            .unwrap_or_default();
        for v in outputs {
            if let Some(value) = self.values.get_mut(v.index()) {
                if value.producer.is_some_and(|(p, _)| p == id) {
                    value.producer = None;
                }
            }
        }
    }

    /// True when `id` is listed as a graph input.
    pub fn is_input(&self, id: ValueId) -> bool {
        self.inputs.contains(&id)
    }

    /// True when `id` is listed as an initializer or sparse initializer.
    pub fn is_initializer(&self, id: ValueId) -> bool {
        self.initializers.contains(&id) || self.sparse_initializers.contains(&id)
    }

    /// The values of this graph that are reads from an enclosing scope.
    pub fn outer_values(&self) -> impl Iterator<Item = (ValueId, &Value)> + '_ {
        self.values_with_ids().filter(|(_, v)| v.is_outer)
    }

    /// Names this graph and its nested subgraphs read from enclosing scopes (names used but
    /// not defined here), sorted and without repeats. These are the implicit inputs of a node
    /// that holds this graph.
    pub fn outer_reads(&self) -> Vec<Name> {
        let mut names: Vec<Name> = Vec::new();
        self.collect_outer_reads(&mut names);
        names.sort();
        names.dedup();
        names
    }

    fn collect_outer_reads(&self, out: &mut Vec<Name>) {
        for (_, node) in self.nodes_in_order() {
            for id in node.inputs.iter().flatten() {
                if let Some(v) = self.get_value(*id).filter(|v| v.is_outer) {
                    out.push(v.name.clone());
                }
            }
        }
        for id in &self.outputs {
            if let Some(v) = self.get_value(*id).filter(|v| v.is_outer) {
                out.push(v.name.clone());
            }
        }
        let defined = self.defined_names();
        for (_, node) in self.nodes_in_order() {
            for sub in node.subgraphs() {
                for name in sub.outer_reads() {
                    if defined.binary_search(&name).is_err() {
                        out.push(name);
                    }
                }
            }
        }
    }

    /// Names defined in this graph (inputs, initializers, outputs of nodes in `order`),
    /// sorted and without repeats.
    pub fn defined_names(&self) -> Vec<Name> {
        let mut names: Vec<Name> = self
            .inputs
            .iter()
            .chain(&self.initializers)
            .chain(&self.sparse_initializers)
            .filter_map(|id| self.get_value(*id))
            .map(|v| v.name.clone())
            .collect();
        for (_, node) in self.nodes_in_order() {
            names.extend(
                node.outputs
                    .iter()
                    .flatten()
                    .filter_map(|id| self.get_value(*id))
                    .map(|v| v.name.clone()),
            );
        }
        names.sort();
        names.dedup();
        names
    }

    /// For each value (indexed by `ValueId`), the nodes in `order` that read it, as
    /// `(node, input position)` in graph order.
    pub fn uses(&self) -> Vec<Vec<(NodeId, usize)>> {
        let mut uses = vec![Vec::new(); self.values.len()];
        for (id, node) in self.nodes_in_order() {
            for (position, input) in node.inputs.iter().enumerate() {
                if let Some(list) = input.and_then(|v| uses.get_mut(v.index())) {
                    list.push((id, position));
                }
            }
        }
        uses
    }
}
