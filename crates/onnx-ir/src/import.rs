//! Protobuf -> IR. Total on every well-formed message: duplicate definitions become distinct
//! values, uses before definition and cycles are kept as they are, undefined names become
//! values without a definition. Only a few limits (nesting depth, 32-bit handles) can fail.
//!
//! Name resolution for a node input: the latest definition before the node, else the first
//! definition anywhere in the graph (a use before definition), else a read from an enclosing
//! scope (`is_outer`, subgraphs only) or an undefined value. Graph outputs and value_info
//! entries resolve to the last definition. Tensor data is moved, never copied.

use std::collections::HashMap;

use onnx_proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    SparseTensorProto, TensorProto, ValueInfoProto,
};

use crate::error::IrError;
use crate::graph::{
    Attribute, AttributeValue, Graph, InfoList, InfoOverride, Node, NodeFieldPresence, NodeId,
    Value, ValueId,
};
use crate::model::{Function, Model, OpsetFieldPresence, OpsetImport};
use crate::name::{Interner, Name};

/// How deep subgraphs may nest before conversion refuses the model. Protobuf decoding
/// (prost's recursion limit of 100 messages) already stops near 32 levels, three messages
/// per level; the limit keeps models built in memory within the same bound.
pub const MAX_SUBGRAPH_DEPTH: usize = 32;

impl Model {
    /// Converts a model. Takes the proto by value so tensor data moves into the IR.
    pub fn from_proto(proto: ModelProto) -> Result<Model, IrError> {
        let mut importer = Importer::default();
        let has_graph = proto.graph.is_some();
        let graph = importer.graph(proto.graph.unwrap_or_default(), Scope::Top)?;
        let opset_imports = proto
            .opset_import
            .into_iter()
            .map(|o| importer.opset_import(o))
            .collect();
        let functions = proto
            .functions
            .into_iter()
            .map(|f| importer.function(f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Model {
            ir_version: proto.ir_version,
            opset_imports,
            producer_name: proto.producer_name,
            producer_version: proto.producer_version,
            domain: proto.domain,
            model_version: proto.model_version,
            doc_string: proto.doc_string,
            metadata_props: proto.metadata_props,
            graph,
            has_graph,
            functions,
            training_info: proto.training_info,
            configuration: proto.configuration,
        })
    }
}

impl Graph {
    /// Converts a main graph (names it does not define are undefined values, not outer reads).
    pub fn from_proto(proto: GraphProto) -> Result<Graph, IrError> {
        Importer::default().graph(proto, Scope::Top)
    }

    /// Converts a subgraph: names it does not define become outer-scope reads (`is_outer`).
    pub fn from_proto_subgraph(proto: GraphProto) -> Result<Graph, IrError> {
        Importer::default().graph(proto, Scope::Sub)
    }
}

impl Function {
    /// Converts a model-local function.
    pub fn from_proto(proto: FunctionProto) -> Result<Function, IrError> {
        Importer::default().function(proto)
    }
}

/// Whether unresolved names of a graph are reads from an enclosing scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// A main graph or function body: unresolved names are undefined.
    Top,
    /// A subgraph: unresolved names are outer-scope reads.
    Sub,
}

/// A graph input or output as the source gives it.
enum Decl {
    /// A graph's `ValueInfoProto`.
    Info(ValueInfoProto),
    /// A function's bare name.
    Name(String),
}

impl Decl {
    fn name(&self) -> &str {
        match self {
            Decl::Info(info) => info.name.as_deref().unwrap_or(""),
            Decl::Name(name) => name,
        }
    }
}

/// The parts of a graph or function body, in proto order.
struct GraphParts {
    inputs: Vec<Decl>,
    outputs: Vec<Decl>,
    value_info: Vec<ValueInfoProto>,
    initializers: Vec<TensorProto>,
    sparse_initializers: Vec<SparseTensorProto>,
    nodes: Vec<NodeProto>,
}

#[derive(Default)]
struct Importer {
    interner: Interner,
    /// Enclosing graphs/nodes/attributes, for error messages.
    context: Vec<String>,
    /// How many subgraph levels are open.
    depth: usize,
}

/// Values of one graph under construction, with its name lookups (lookups only: hash order
/// never reaches the output).
struct Builder {
    graph: Graph,
    scope: Scope,
    unresolved: HashMap<Name, ValueId>,
}

impl Builder {
    fn push_value(&mut self, value: Value) -> Result<ValueId, IrError> {
        if self.graph.values.len() >= u32::MAX as usize {
            return Err(IrError::TooMany {
                graph: self.graph.name_or_empty().to_string(),
                what: "values",
                limit: u32::MAX as u64,
            });
        }
        Ok(self.graph.add_value(value))
    }

    /// The shared value of a name defined nowhere in this graph.
    fn unresolved(&mut self, name: &Name) -> Result<ValueId, IrError> {
        if let Some(&id) = self.unresolved.get(name) {
            return Ok(id);
        }
        let id = self.push_value(Value {
            name: name.clone(),
            is_outer: self.scope == Scope::Sub,
            ..Value::default()
        })?;
        self.unresolved.insert(name.clone(), id);
        Ok(id)
    }
}

impl Importer {
    fn intern(&mut self, text: &str) -> Name {
        self.interner.intern(text)
    }

    fn opt_intern(&mut self, text: Option<String>) -> Option<Name> {
        text.map(|t| self.intern(&t))
    }

    fn opset_import(&mut self, proto: OperatorSetIdProto) -> OpsetImport {
        OpsetImport {
            domain: self.intern(proto.domain.as_deref().unwrap_or("")),
            version: proto.version.unwrap_or(0),
            field_presence: OpsetFieldPresence {
                domain: proto.domain.is_some(),
                version: proto.version.is_some(),
            },
        }
    }

    fn graph(&mut self, proto: GraphProto, scope: Scope) -> Result<Graph, IrError> {
        let graph = Graph {
            name: proto.name,
            doc_string: proto.doc_string,
            quantization_annotation: proto.quantization_annotation,
            metadata_props: proto.metadata_props,
            ..Graph::default()
        };
        self.context
            .push(format!("graph '{}'", graph.name_or_empty()));
        let parts = GraphParts {
            inputs: proto.input.into_iter().map(Decl::Info).collect(),
            outputs: proto.output.into_iter().map(Decl::Info).collect(),
            value_info: proto.value_info,
            initializers: proto.initializer,
            sparse_initializers: proto.sparse_initializer,
            nodes: proto.node,
        };
        let result = self.build(graph, parts, scope);
        self.context.pop();
        result
    }

    fn function(&mut self, proto: FunctionProto) -> Result<Function, IrError> {
        let name = self.opt_intern(proto.name);
        self.context
            .push(format!("function '{}'", name.as_deref().unwrap_or("")));
        let parts = GraphParts {
            inputs: proto.input.into_iter().map(Decl::Name).collect(),
            outputs: proto.output.into_iter().map(Decl::Name).collect(),
            value_info: proto.value_info,
            initializers: Vec::new(),
            sparse_initializers: Vec::new(),
            nodes: proto.node,
        };
        let body = self.build(Graph::default(), parts, Scope::Top);
        self.context.pop();
        let attributes = proto.attribute.iter().map(|a| self.intern(a)).collect();
        let opset_imports = proto
            .opset_import
            .into_iter()
            .map(|o| self.opset_import(o))
            .collect();
        Ok(Function {
            name,
            domain: self.opt_intern(proto.domain),
            overload: self.opt_intern(proto.overload),
            attributes,
            attribute_protos: proto.attribute_proto,
            opset_imports,
            body: body?,
            doc_string: proto.doc_string,
            metadata_props: proto.metadata_props,
        })
    }

    fn build(&mut self, graph: Graph, parts: GraphParts, scope: Scope) -> Result<Graph, IrError> {
        if parts.nodes.len() >= u32::MAX as usize {
            return Err(IrError::TooMany {
                graph: graph.name_or_empty().to_string(),
                what: "nodes",
                limit: u32::MAX as u64,
            });
        }
        let mut b = Builder {
            graph,
            scope,
            unresolved: HashMap::new(),
        };
        // Graph-level definitions, in the order they become visible.
        let mut graph_defs: Vec<(Name, ValueId)> = Vec::new();
        let mut unpaired_inputs: HashMap<Name, Vec<ValueId>> = HashMap::new();
        let mut input_decls: Vec<(ValueId, Option<ValueInfoProto>)> = Vec::new();
        for decl in parts.inputs {
            let name = self.intern(decl.name());
            let id = b.push_value(Value::new(name.clone()))?;
            b.graph.inputs.push(id);
            unpaired_inputs.entry(name.clone()).or_default().push(id);
            graph_defs.push((name, id));
            input_decls.push((id, decl_info(decl)));
        }
        let mut pair_with_input = |name: &Name| -> Option<ValueId> {
            let ids = unpaired_inputs.get_mut(name)?;
            if ids.is_empty() {
                None
            } else {
                Some(ids.remove(0))
            }
        };
        for tensor in parts.initializers {
            let name = self.intern(tensor.name.as_deref().unwrap_or(""));
            let id = match pair_with_input(&name) {
                Some(id) => id,
                None => {
                    let id = b.push_value(Value::new(name.clone()))?;
                    graph_defs.push((name, id));
                    id
                }
            };
            b.graph.value_mut(id).initializer = Some(tensor);
            b.graph.initializers.push(id);
        }
        for sparse in parts.sparse_initializers {
            let text = sparse
                .values
                .as_ref()
                .and_then(|v| v.name.as_deref())
                .unwrap_or("");
            let name = self.intern(text);
            let id = match pair_with_input(&name) {
                Some(id) => id,
                None => {
                    let id = b.push_value(Value::new(name.clone()))?;
                    graph_defs.push((name, id));
                    id
                }
            };
            b.graph.value_mut(id).sparse_initializer = Some(Box::new(sparse));
            b.graph.sparse_initializers.push(id);
        }

        // Node outputs are definitions too; create them all before resolving any input.
        let mut node_outputs: Vec<Vec<Option<ValueId>>> = Vec::with_capacity(parts.nodes.len());
        for (index, node) in parts.nodes.iter().enumerate() {
            let mut outputs = Vec::with_capacity(node.output.len());
            for (position, text) in node.output.iter().enumerate() {
                if text.is_empty() {
                    outputs.push(None);
                    continue;
                }
                let name = self.intern(text);
                let id = b.push_value(Value {
                    name,
                    producer: Some((NodeId(index as u32), position)),
                    ..Value::default()
                })?;
                outputs.push(Some(id));
            }
            node_outputs.push(outputs);
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
        for (node, outputs) in parts.nodes.into_iter().zip(node_outputs) {
            let mut inputs = Vec::with_capacity(node.input.len());
            for text in &node.input {
                if text.is_empty() {
                    inputs.push(None);
                    continue;
                }
                let name = self.intern(text);
                let id = match current.get(&name).or_else(|| first_def.get(&name)) {
                    Some(&id) => id,
                    None => b.unresolved(&name)?,
                };
                inputs.push(Some(id));
            }
            for id in outputs.iter().flatten() {
                current.insert(b.graph.value(*id).name.clone(), *id);
            }
            let node = self.node(node, inputs, outputs)?;
            b.graph.nodes.push(node);
        }
        b.graph.order = (0..b.graph.nodes.len() as u32).map(NodeId).collect();

        let resolve_last = |importer: &mut Importer, b: &mut Builder, text: &str| {
            let name = importer.intern(text);
            match last_def.get(&name) {
                Some(&id) => Ok(id),
                None => b.unresolved(&name),
            }
        };
        let mut decls: Vec<(InfoList, usize, ValueId, Option<ValueInfoProto>)> = input_decls
            .into_iter()
            .enumerate()
            .map(|(i, (id, info))| (InfoList::Input, i, id, info))
            .collect();
        for (i, decl) in parts.outputs.into_iter().enumerate() {
            let id = resolve_last(self, &mut b, decl.name())?;
            b.graph.outputs.push(id);
            decls.push((InfoList::Output, i, id, decl_info(decl)));
        }
        for (i, info) in parts.value_info.into_iter().enumerate() {
            let id = resolve_last(self, &mut b, info.name.as_deref().unwrap_or(""))?;
            b.graph.value_info.push(id);
            decls.push((InfoList::ValueInfo, i, id, Some(info)));
        }
        attach_declarations(&mut b.graph, decls);
        Ok(b.graph)
    }

    fn node(
        &mut self,
        proto: NodeProto,
        inputs: Vec<Option<ValueId>>,
        outputs: Vec<Option<ValueId>>,
    ) -> Result<Node, IrError> {
        let name = self.opt_intern(proto.name);
        let op_type = self.intern(proto.op_type.as_deref().unwrap_or(""));
        self.context.push(format!(
            "node '{}' ({op_type})",
            name.as_deref().unwrap_or("")
        ));
        let attributes = proto
            .attribute
            .into_iter()
            .map(|a| self.attribute(a))
            .collect::<Result<Vec<_>, _>>();
        self.context.pop();
        Ok(Node {
            name,
            field_presence: NodeFieldPresence {
                op_type: proto.op_type.is_some(),
                domain: proto.domain.is_some(),
            },
            op_type,
            domain: self.intern(proto.domain.as_deref().unwrap_or("")),
            overload: self.opt_intern(proto.overload),
            inputs,
            outputs,
            attributes: attributes?,
            doc_string: proto.doc_string,
            metadata_props: proto.metadata_props,
            device_configurations: proto.device_configurations,
        })
    }

    fn attribute(&mut self, mut proto: AttributeProto) -> Result<Attribute, IrError> {
        let name = self.intern(proto.name.as_deref().unwrap_or(""));
        if proto.g.is_none() && proto.graphs.is_empty() {
            return Ok(Attribute {
                name,
                value: AttributeValue::Proto(Box::new(proto)),
                rest: None,
            });
        }
        if self.depth >= MAX_SUBGRAPH_DEPTH {
            return Err(IrError::NestingTooDeep {
                context: self.context.join(" > "),
                limit: MAX_SUBGRAPH_DEPTH,
            });
        }
        self.context.push(format!("attribute '{name}'"));
        self.depth += 1;
        let value = match proto.g.take() {
            Some(g) => self
                .graph(g, Scope::Sub)
                .map(|g| AttributeValue::Graph(Box::new(g))),
            None => std::mem::take(&mut proto.graphs)
                .into_iter()
                .map(|g| self.graph(g, Scope::Sub))
                .collect::<Result<Vec<_>, _>>()
                .map(AttributeValue::Graphs),
        };
        self.depth -= 1;
        self.context.pop();
        Ok(Attribute {
            name,
            value: value?,
            rest: Some(Box::new(proto)),
        })
    }
}

fn decl_info(decl: Decl) -> Option<ValueInfoProto> {
    match decl {
        Decl::Info(info) => Some(info),
        Decl::Name(_) => None,
    }
}

/// Gives each declared value its type, doc string and metadata from its first typed
/// declaration (else its first declaration), and records every declaration that the value
/// would not reproduce as an [`InfoOverride`].
fn attach_declarations(
    graph: &mut Graph,
    decls: Vec<(InfoList, usize, ValueId, Option<ValueInfoProto>)>,
) {
    let mut primary: Vec<Option<usize>> = vec![None; graph.values.len()];
    for (k, (_, _, id, info)) in decls.iter().enumerate() {
        let Some(info) = info else { continue };
        let Some(slot) = primary.get_mut(id.index()) else {
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
        if let Some(value) = graph.values.get_mut(id) {
            value.ty = info.r#type.clone();
            value.doc_string = info.doc_string.clone();
            value.metadata_props = info.metadata_props.clone();
        }
    }
    for (list, index, id, info) in decls {
        let Some(info) = info else { continue };
        let Some(value) = graph.get_value(id) else {
            continue;
        };
        if value.value_info() != info {
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
