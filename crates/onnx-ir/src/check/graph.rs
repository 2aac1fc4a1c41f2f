//! The graph walk of the checker: handles, declarations, initializers, then each node in
//! order (inputs defined before use, operator, opset import, attributes and their subgraphs,
//! SSA of outputs), then cycles and graph outputs. Name visibility follows `onnx.checker`'s
//! lexical scopes: a subgraph sees the names its enclosing graphs defined before the node
//! that holds it, its inputs may reuse outer names, its node outputs may not.

use std::collections::{BTreeMap, HashSet};

use onnx_proto::{
    attribute_proto::AttributeType, type_proto, AttributeProto, TensorProto, TypeProto,
};

use crate::check::error::{CheckError, NodeRef};
use crate::check::schema::{SchemaChecker, TypeScope};
use crate::check::tensor::check_tensor;
use crate::error::IrError;
use crate::graph::{Attribute, AttributeValue, Graph, InfoList, Node, NodeId, ValueId};
use crate::model::{opset_version_in, OpsetImport};
use crate::name::Name;

/// What kind of graph is checked; rules differ slightly between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GraphKind {
    /// The model's main graph.
    Main,
    /// A subgraph held by an attribute.
    Subgraph,
    /// A function body.
    FunctionBody,
}

/// Names visible to a graph, innermost scope last (lookups only).
pub(crate) type Scopes = Vec<HashSet<Name>>;

/// Model-wide facts a graph walk needs.
pub(crate) struct GraphChecker<'a> {
    pub(crate) ir_version: i64,
    /// The opset imports nodes resolve their domain in.
    pub(crate) opsets: &'a [OpsetImport],
    /// The schema checks, when switched on.
    pub(crate) schema: Option<&'a SchemaChecker<'a>>,
    /// The types inference gives the values of the main graph (when this walks the main graph
    /// and its subgraphs, with schema checks on).
    pub(crate) inferred: Option<&'a BTreeMap<String, TypeProto>>,
}

fn node_ref(graph: &Graph, index: usize, id: NodeId) -> NodeRef {
    let node = graph.get_node(id);
    NodeRef {
        id,
        index,
        name: node.and_then(|n| n.name.clone()),
        op_type: node.map(|n| n.op_type.clone()).unwrap_or_default(),
    }
}

impl GraphChecker<'_> {
    /// Checks `graph`; `enclosing` holds the enclosing graphs (outermost first) and `scopes`
    /// the names they define.
    pub(crate) fn check<'g>(
        &self,
        graph: &'g Graph,
        kind: GraphKind,
        enclosing: &[&'g Graph],
        scopes: &mut Scopes,
        errors: &mut Vec<CheckError>,
    ) {
        if !check_handles(graph, errors) {
            return;
        }
        if kind != GraphKind::FunctionBody {
            if graph.name_or_empty().is_empty() {
                errors.push(CheckError::EmptyGraphName);
            }
            self.check_declarations(graph, kind, errors);
        }
        let mut here: HashSet<Name> = HashSet::new();
        let mut available = vec![false; graph.values.len()];
        for &id in &graph.inputs {
            let name = graph.value(id).name.clone();
            if !here.insert(name.clone()) && kind != GraphKind::FunctionBody {
                errors.push(CheckError::DuplicateInput { value: name });
            }
            mark(&mut available, id);
        }
        self.check_initializers(graph, &mut here, &mut available, errors);
        scopes.push(here);

        let mut position: Vec<Option<usize>> = vec![None; graph.nodes.len()];
        for (pos, id) in graph.order.iter().enumerate() {
            if let Some(slot) = position.get_mut(id.index()) {
                slot.get_or_insert(pos);
            }
        }
        for (index, &id) in graph.order.iter().enumerate() {
            let node = graph.node(id);
            let node_ref = node_ref(graph, index, id);
            for input in node.inputs.iter().flatten() {
                self.check_use(
                    graph, &node_ref, *input, &available, &position, scopes, errors,
                );
            }
            self.check_node(graph, node, &node_ref, kind, enclosing, scopes, errors);
            for &output in node.outputs.iter().flatten() {
                let name = graph.value(output).name.clone();
                let (outer, this) = match scopes.split_last() {
                    Some((this, outer)) => (outer, Some(this)),
                    None => (&[][..], None),
                };
                if this.is_some_and(|s| s.contains(&name)) {
                    errors.push(CheckError::DuplicateDefinition {
                        node: node_ref.clone(),
                        value: name.clone(),
                    });
                } else if outer.iter().any(|s| s.contains(&name)) {
                    errors.push(CheckError::ShadowsOuterName {
                        node: node_ref.clone(),
                        value: name.clone(),
                    });
                }
                if let Some(this) = scopes.last_mut() {
                    this.insert(name);
                }
                mark(&mut available, output);
            }
        }
        if let Err(IrError::Cycle { node, index, .. }) = graph.topological_order() {
            errors.push(CheckError::Cycle {
                node: node_ref(graph, index, node),
            });
        }
        let here = scopes.pop().unwrap_or_default();
        for &id in &graph.outputs {
            let value = graph.value(id);
            if available.get(id.index()).copied().unwrap_or(false) || here.contains(&value.name) {
                continue;
            }
            errors.push(CheckError::UndefinedOutput {
                value: value.name.clone(),
                from_outer_scope: scopes.iter().any(|s| s.contains(&value.name)),
            });
        }
    }

    /// Empty names everywhere; types of main-graph inputs and outputs.
    fn check_declarations(&self, graph: &Graph, kind: GraphKind, errors: &mut Vec<CheckError>) {
        for (list, ids) in [
            (InfoList::Input, &graph.inputs),
            (InfoList::Output, &graph.outputs),
        ] {
            for (index, &id) in ids.iter().enumerate() {
                let decl = graph.declaration(list, index, id);
                let name = graph.value(id).name.clone();
                if decl.name.as_deref().unwrap_or("").is_empty() {
                    errors.push(CheckError::EmptyDeclarationName { list, index });
                }
                if kind != GraphKind::Main {
                    continue;
                }
                let Some(ty) = &decl.r#type else {
                    errors.push(CheckError::MissingType { list, value: name });
                    continue;
                };
                if let Some(field) = missing_type_field(ty) {
                    errors.push(CheckError::IncompleteType {
                        list,
                        value: name,
                        field,
                    });
                }
            }
        }
    }

    fn check_initializers(
        &self,
        graph: &Graph,
        here: &mut HashSet<Name>,
        available: &mut [bool],
        errors: &mut Vec<CheckError>,
    ) {
        let mut names: HashSet<Name> = HashSet::new();
        let dense = graph.initializers.iter().map(|&id| (id, false));
        let sparse = graph.sparse_initializers.iter().map(|&id| (id, true));
        for (index, (id, is_sparse)) in dense.chain(sparse).enumerate() {
            let value = graph.value(id);
            let name = value.name.clone();
            if name.is_empty() {
                errors.push(CheckError::EmptyInitializerName { index });
            } else if !names.insert(name.clone()) {
                errors.push(CheckError::DuplicateInitializer {
                    value: name.clone(),
                });
            }
            let tensor = if is_sparse {
                value
                    .sparse_initializer
                    .as_ref()
                    .and_then(|s| s.values.as_ref())
            } else {
                value.initializer.as_ref()
            };
            if let Some(problem) =
                tensor.and_then(|t| if is_sparse { None } else { check_tensor(t) })
            {
                errors.push(CheckError::InvalidTensor {
                    tensor: name.clone(),
                    problem,
                });
            }
            if self.ir_version <= 3 && !is_sparse {
                if !here.contains(&name) {
                    errors.push(CheckError::InitializerNotInput {
                        value: name,
                        ir_version: self.ir_version,
                    });
                }
            } else {
                here.insert(name);
            }
            mark(available, id);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_use(
        &self,
        graph: &Graph,
        node: &NodeRef,
        input: ValueId,
        available: &[bool],
        position: &[Option<usize>],
        scopes: &Scopes,
        errors: &mut Vec<CheckError>,
    ) {
        if available.get(input.index()).copied().unwrap_or(false) {
            return;
        }
        let value = graph.value(input);
        let producer = value.producer.and_then(|(p, _)| {
            position
                .get(p.index())
                .copied()
                .flatten()
                .map(|pos| (p, pos))
        });
        match producer {
            Some((p, pos)) if !value.is_outer => errors.push(CheckError::UseBeforeDefinition {
                node: node.clone(),
                value: value.name.clone(),
                producer: node_ref(graph, pos, p),
            }),
            _ => {
                if !scopes.iter().any(|s| s.contains(&value.name)) {
                    errors.push(CheckError::UndefinedInput {
                        node: node.clone(),
                        value: value.name.clone(),
                    });
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_node<'g>(
        &self,
        graph: &'g Graph,
        node: &'g Node,
        node_ref: &NodeRef,
        kind: GraphKind,
        enclosing: &[&'g Graph],
        scopes: &mut Scopes,
        errors: &mut Vec<CheckError>,
    ) {
        if node.op_type.is_empty() {
            errors.push(CheckError::EmptyOpType {
                node: node_ref.clone(),
            });
        }
        if node.inputs.is_empty() && node.outputs.is_empty() {
            errors.push(CheckError::NoInputsOrOutputs {
                node: node_ref.clone(),
            });
        }
        let opset = opset_version_in(self.opsets, &node.domain);
        if opset.is_none() {
            errors.push(CheckError::MissingOpsetImport {
                node: node_ref.clone(),
                domain: node.domain.clone(),
            });
        }
        // The graphs a subgraph of this node sees around it (built only for nodes with one).
        let mut inner_enclosing: Vec<&'g Graph> = Vec::new();
        if node.subgraphs().next().is_some() {
            inner_enclosing.extend_from_slice(enclosing);
            inner_enclosing.push(graph);
        }
        let mut seen: HashSet<&str> = HashSet::new();
        for attribute in &node.attributes {
            if !seen.insert(&attribute.name) {
                errors.push(CheckError::DuplicateAttribute {
                    node: node_ref.clone(),
                    attribute: attribute.name.clone(),
                });
            }
            self.check_attribute(attribute, node_ref, kind, errors);
            let graphs: Vec<&Graph> = attribute.value.subgraphs().collect();
            let many = matches!(attribute.value, AttributeValue::Graphs(_));
            for (i, sub) in graphs.into_iter().enumerate() {
                let mut inner = Vec::new();
                self.check(
                    sub,
                    GraphKind::Subgraph,
                    &inner_enclosing,
                    scopes,
                    &mut inner,
                );
                errors.extend(inner.into_iter().map(|error| CheckError::InSubgraph {
                    node: node_ref.clone(),
                    attribute: attribute.name.clone(),
                    graph_index: many.then_some(i),
                    error: Box::new(error),
                }));
            }
        }
        if let (Some(schema), Some(opset)) = (self.schema, opset) {
            let scope = TypeScope {
                graph,
                outer: enclosing,
                inferred: self.inferred,
            };
            let mut problems = Vec::new();
            schema.check_node(&scope, node, opset, &mut problems);
            errors.extend(problems.into_iter().map(|problem| CheckError::Schema {
                node: node_ref.clone(),
                problem,
            }));
        }
    }

    fn check_attribute(
        &self,
        attribute: &Attribute,
        node: &NodeRef,
        kind: GraphKind,
        errors: &mut Vec<CheckError>,
    ) {
        let graph_field = match &attribute.value {
            AttributeValue::Proto(_) => None,
            AttributeValue::Graph(_) => Some(("g", AttributeType::Graph)),
            AttributeValue::Graphs(_) => Some(("graphs", AttributeType::Graphs)),
        };
        let empty = AttributeProto::default();
        let proto = attribute.fields().unwrap_or(&empty);
        if attribute.name.is_empty() {
            errors.push(CheckError::EmptyAttributeName { node: node.clone() });
        }
        if self.ir_version >= 2 && proto.r#type.is_none() {
            errors.push(CheckError::AttributeWithoutType {
                node: node.clone(),
                attribute: attribute.name.clone(),
            });
        }
        let mut fields = set_fields(proto);
        fields.extend(graph_field);
        if let Some(declared) = proto.r#type {
            if let Some((field, _)) = fields.iter().find(|(_, ty)| *ty as i32 != declared) {
                errors.push(CheckError::AttributeTypeMismatch {
                    node: node.clone(),
                    attribute: attribute.name.clone(),
                    declared: AttributeType::try_from(declared)
                        .map(|t| t.as_str_name().to_string())
                        .unwrap_or_else(|_| declared.to_string()),
                    field,
                });
            }
        }
        if fields.len() > 1 {
            errors.push(CheckError::AttributeMultipleValues {
                node: node.clone(),
                attribute: attribute.name.clone(),
                fields: fields.iter().map(|(f, _)| *f).collect(),
            });
        }
        if kind != GraphKind::Main && proto.ref_attr_name.is_some() && !fields.is_empty() {
            errors.push(CheckError::RefAttributeWithValue {
                node: node.clone(),
                attribute: attribute.name.clone(),
            });
        }
        let tensors: Vec<&TensorProto> = proto.t.iter().chain(&proto.tensors).collect();
        for tensor in tensors {
            if let Some(problem) = check_tensor(tensor) {
                let name = tensor.name.as_deref().filter(|n| !n.is_empty());
                errors.push(CheckError::InvalidTensor {
                    tensor: name
                        .map(Name::new)
                        .unwrap_or_else(|| attribute.name.clone()),
                    problem,
                });
            }
        }
    }
}

/// Value fields set in an attribute proto, with the type each implies.
fn set_fields(p: &AttributeProto) -> Vec<(&'static str, AttributeType)> {
    use AttributeType as T;
    let singular = [
        ("f", p.f.is_some(), T::Float),
        ("i", p.i.is_some(), T::Int),
        ("s", p.s.is_some(), T::String),
        ("t", p.t.is_some(), T::Tensor),
        ("g", p.g.is_some(), T::Graph),
        ("tp", p.tp.is_some(), T::TypeProto),
        ("sparse_tensor", p.sparse_tensor.is_some(), T::SparseTensor),
        ("floats", !p.floats.is_empty(), T::Floats),
        ("ints", !p.ints.is_empty(), T::Ints),
        ("strings", !p.strings.is_empty(), T::Strings),
        ("tensors", !p.tensors.is_empty(), T::Tensors),
        ("graphs", !p.graphs.is_empty(), T::Graphs),
        (
            "sparse_tensors",
            !p.sparse_tensors.is_empty(),
            T::SparseTensors,
        ),
        ("type_protos", !p.type_protos.is_empty(), T::TypeProtos),
    ];
    singular
        .into_iter()
        .filter(|(_, set, _)| *set)
        .map(|(name, _, ty)| (name, ty))
        .collect()
}

/// The field a main-graph declaration's type lacks, as `onnx.checker` requires them.
fn missing_type_field(ty: &onnx_proto::TypeProto) -> Option<&'static str> {
    use type_proto::Value as V;
    match &ty.value {
        Some(V::TensorType(t)) => {
            if t.elem_type.is_none() {
                Some("elem_type")
            } else if t.shape.is_none() {
                Some("shape")
            } else {
                None
            }
        }
        Some(V::SparseTensorType(t)) => {
            if t.elem_type.is_none() {
                Some("elem_type")
            } else if t.shape.is_none() {
                Some("shape")
            } else {
                None
            }
        }
        Some(V::SequenceType(t)) => t.elem_type.is_none().then_some("elem_type"),
        Some(V::OptionalType(t)) => t.elem_type.is_none().then_some("elem_type"),
        Some(V::MapType(t)) => {
            if t.key_type.is_none() {
                Some("key_type")
            } else if t.value_type.is_none() {
                Some("value_type")
            } else {
                None
            }
        }
        Some(V::OpaqueType(t)) => t.name.as_deref().unwrap_or("").is_empty().then_some("name"),
        None => Some("value"),
    }
}

fn mark(available: &mut [bool], id: ValueId) {
    if let Some(flag) = available.get_mut(id.index()) {
        *flag = true;
    }
}

/// Checks that every handle points into the graph; false (with errors) when one does not.
fn check_handles(graph: &Graph, errors: &mut Vec<CheckError>) -> bool {
    let before = errors.len();
    let values = graph.values.len();
    let value = |id: ValueId, place: String, errors: &mut Vec<CheckError>| {
        if id.index() >= values {
            errors.push(CheckError::InvalidHandle {
                what: "value",
                index: id.0,
                place,
            });
        }
    };
    for (label, ids) in [
        ("graph input", &graph.inputs),
        ("graph output", &graph.outputs),
        ("initializer", &graph.initializers),
        ("sparse initializer", &graph.sparse_initializers),
        ("value_info entry", &graph.value_info),
    ] {
        for (i, &id) in ids.iter().enumerate() {
            value(id, format!("{label} {i}"), errors);
        }
    }
    for (index, &id) in graph.order.iter().enumerate() {
        let Some(node) = graph.get_node(id) else {
            errors.push(CheckError::InvalidHandle {
                what: "node",
                index: id.0,
                place: format!("node order position {index}"),
            });
            continue;
        };
        for (i, input) in node.inputs.iter().enumerate() {
            if let Some(id) = input {
                value(*id, format!("node {index} input {i}"), errors);
            }
        }
        for (i, output) in node.outputs.iter().enumerate() {
            if let Some(id) = output {
                value(*id, format!("node {index} output {i}"), errors);
            }
        }
    }
    for (i, v) in graph.values.iter().enumerate() {
        if let Some((node, _)) = v.producer {
            if node.index() >= graph.nodes.len() {
                errors.push(CheckError::InvalidHandle {
                    what: "node",
                    index: node.0,
                    place: format!("producer of value {i} '{}'", v.name),
                });
            }
        }
    }
    errors.len() == before
}
