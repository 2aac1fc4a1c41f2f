//! IR -> protobuf. Writes exactly what the IR holds: nodes in `order`, every list in its
//! order, declarations through their [`InfoOverride`](crate::InfoOverride) where one applies.
//! For a model fresh from [`Model::from_proto`], `to_proto` gives back the same message.
//! Tensor data is shared, not copied (`raw_data` is a `Bytes`).

use onnx_proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    SparseTensorProto, TensorProto, ValueInfoProto,
};

use crate::graph::{Attribute, AttributeValue, Graph, InfoList, Node, ValueId};
use crate::model::{Function, Model, OpsetImport};
use crate::name::Name;

impl Model {
    /// Converts back to the protobuf message.
    pub fn to_proto(&self) -> ModelProto {
        ModelProto {
            ir_version: self.ir_version,
            opset_import: self
                .opset_imports
                .iter()
                .map(OpsetImport::to_proto)
                .collect(),
            producer_name: self.producer_name.clone(),
            producer_version: self.producer_version.clone(),
            domain: self.domain.clone(),
            model_version: self.model_version,
            doc_string: self.doc_string.clone(),
            graph: (self.has_graph || self.graph != Graph::default())
                .then(|| self.graph.to_proto()),
            metadata_props: self.metadata_props.clone(),
            training_info: self.training_info.clone(),
            functions: self.functions.iter().map(Function::to_proto).collect(),
            configuration: self.configuration.clone(),
        }
    }
}

impl OpsetImport {
    /// Converts back to the protobuf message.
    pub fn to_proto(&self) -> OperatorSetIdProto {
        OperatorSetIdProto {
            domain: (self.field_presence.domain || !self.domain.is_empty())
                .then(|| self.domain.to_string()),
            version: (self.field_presence.version || self.version != 0).then_some(self.version),
        }
    }
}

impl Function {
    /// Converts back to the protobuf message.
    pub fn to_proto(&self) -> FunctionProto {
        let body = &self.body;
        FunctionProto {
            name: self.name.as_ref().map(|n| n.to_string()),
            input: body.inputs.iter().map(|&id| body.value_name(id)).collect(),
            output: body.outputs.iter().map(|&id| body.value_name(id)).collect(),
            attribute: self.attributes.iter().map(|a| a.to_string()).collect(),
            attribute_proto: self.attribute_protos.clone(),
            node: body
                .nodes_in_order()
                .map(|(_, n)| body.node_to_proto(n))
                .collect(),
            doc_string: self.doc_string.clone(),
            opset_import: self
                .opset_imports
                .iter()
                .map(OpsetImport::to_proto)
                .collect(),
            domain: self.domain.as_ref().map(|d| d.to_string()),
            overload: self.overload.as_ref().map(|o| o.to_string()),
            value_info: body
                .value_info
                .iter()
                .enumerate()
                .map(|(i, &id)| body.declaration(InfoList::ValueInfo, i, id))
                .collect(),
            metadata_props: self.metadata_props.clone(),
        }
    }
}

/// `Some(name)` unless the proto had no name and the name is still empty.
fn fix_name(original: &mut Option<String>, name: &str) {
    if original.as_deref().unwrap_or("") != name {
        *original = Some(name.to_string());
    }
}

impl Graph {
    /// Converts back to the protobuf message.
    pub fn to_proto(&self) -> GraphProto {
        GraphProto {
            node: self
                .nodes_in_order()
                .map(|(_, n)| self.node_to_proto(n))
                .collect(),
            name: self.name.clone(),
            initializer: self
                .initializers
                .iter()
                .map(|&id| self.initializer(id))
                .collect(),
            sparse_initializer: self
                .sparse_initializers
                .iter()
                .map(|&id| self.sparse_initializer(id))
                .collect(),
            doc_string: self.doc_string.clone(),
            input: self.declarations(InfoList::Input, &self.inputs),
            output: self.declarations(InfoList::Output, &self.outputs),
            value_info: self.declarations(InfoList::ValueInfo, &self.value_info),
            quantization_annotation: self.quantization_annotation.clone(),
            metadata_props: self.metadata_props.clone(),
        }
    }

    /// The name written for a handle; a handle out of range (a graph built inconsistently,
    /// which the checker reports) writes a name no ONNX tool resolves.
    fn value_name(&self, id: ValueId) -> String {
        match self.get_value(id) {
            Some(v) => v.name.to_string(),
            None => format!("<invalid value {}>", id.0),
        }
    }

    fn declarations(&self, list: InfoList, ids: &[ValueId]) -> Vec<ValueInfoProto> {
        ids.iter()
            .enumerate()
            .map(|(i, &id)| self.declaration(list, i, id))
            .collect()
    }

    /// The declaration written for slot `index` of `list` (its override, or the value's info).
    pub(crate) fn declaration(&self, list: InfoList, index: usize, id: ValueId) -> ValueInfoProto {
        let Some(value) = self.get_value(id) else {
            return ValueInfoProto {
                name: Some(self.value_name(id)),
                ..ValueInfoProto::default()
            };
        };
        match self.info_overrides.get(&(list, index)) {
            Some(o) if o.value == id => {
                let mut proto = o.proto.clone();
                fix_name(&mut proto.name, &value.name);
                proto
            }
            _ => value.value_info(),
        }
    }

    fn initializer(&self, id: ValueId) -> TensorProto {
        let name = self.value_name(id);
        let mut tensor = self
            .get_value(id)
            .and_then(|v| v.initializer.clone())
            .unwrap_or_default();
        fix_name(&mut tensor.name, &name);
        tensor
    }

    fn sparse_initializer(&self, id: ValueId) -> SparseTensorProto {
        let name = self.value_name(id);
        let mut sparse = self
            .get_value(id)
            .and_then(|v| v.sparse_initializer.as_deref().cloned())
            .unwrap_or_default();
        let current = sparse
            .values
            .as_ref()
            .and_then(|v| v.name.as_deref())
            .unwrap_or("");
        if current != name {
            fix_name(
                &mut sparse.values.get_or_insert_with(TensorProto::default).name,
                &name,
            );
        }
        sparse
    }

    fn value_names(&self, ids: &[Option<ValueId>]) -> Vec<String> {
        ids.iter()
            .map(|id| match id {
                Some(id) => self.value_name(*id),
                None => String::new(),
            })
            .collect()
    }

    /// Converts one node of this graph (its inputs and outputs are handles into this graph).
    pub fn node_to_proto(&self, node: &Node) -> NodeProto {
        let present =
            |name: &Name, flag: bool| (flag || !name.is_empty()).then(|| name.to_string());
        NodeProto {
            input: self.value_names(&node.inputs),
            output: self.value_names(&node.outputs),
            name: node.name.as_ref().map(|n| n.to_string()),
            op_type: present(&node.op_type, node.field_presence.op_type),
            domain: present(&node.domain, node.field_presence.domain),
            overload: node.overload.as_ref().map(|o| o.to_string()),
            attribute: node.attributes.iter().map(Attribute::to_proto).collect(),
            doc_string: node.doc_string.clone(),
            metadata_props: node.metadata_props.clone(),
            device_configurations: node.device_configurations.clone(),
        }
    }
}

impl Attribute {
    /// Converts back to the protobuf message (subgraphs included).
    pub fn to_proto(&self) -> AttributeProto {
        let mut proto = match &self.value {
            AttributeValue::Proto(p) => (**p).clone(),
            AttributeValue::Graph(g) => AttributeProto {
                g: Some(g.to_proto()),
                ..self.rest.as_deref().cloned().unwrap_or_default()
            },
            AttributeValue::Graphs(gs) => AttributeProto {
                graphs: gs.iter().map(Graph::to_proto).collect(),
                ..self.rest.as_deref().cloned().unwrap_or_default()
            },
        };
        fix_name(&mut proto.name, &self.name);
        proto
    }
}
