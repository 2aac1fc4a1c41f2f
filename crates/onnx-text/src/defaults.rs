//! Presence defaults: what the parser puts in a field the text leaves out.
//!
//! The text cannot tell an absent string field from an empty one, nor `raw_data` from typed
//! storage. onnx's parser always chooses "empty string" and "typed field"; those are the base
//! defaults here too, so text without annotations parses exactly as onnx.parser parses it.
//! A model (or a standalone graph or function) may switch a default with an annotation
//! (`#@ default_node_domain: unset`), chosen by the printer as whatever most elements of the
//! model have, so that a model needs one annotation line instead of one per node.

use onnx_proto::{
    tensor_proto::DataLocation, AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto,
    SparseTensorProto, TensorProto,
};

use crate::tensor_data::raw_elem;

/// The presence defaults in force for a scope.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Defaults {
    /// A node written without a domain has no `domain` field (base: the field holds "").
    pub node_domain_unset: bool,
    /// A tensor value written without a name has no `name` field (base: the field holds "").
    pub tensor_name_unset: bool,
    /// Numeric tensor values are stored in `raw_data` (base: in the typed field).
    pub tensor_storage_raw: bool,
}

/// Counts of how elements of a model are stored, to choose its defaults.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    domain_unset: usize,
    domain_empty: usize,
    name_unset: usize,
    name_empty: usize,
    raw: usize,
    typed: usize,
}

impl Tally {
    /// Counts over a whole model: its graph, subgraphs, functions and training graphs.
    pub(crate) fn of_model(model: &ModelProto) -> Self {
        let mut t = Tally::default();
        if let Some(g) = &model.graph {
            t.graph(g);
        }
        for f in &model.functions {
            t.function(f);
        }
        for ti in &model.training_info {
            for g in ti.initialization.iter().chain(ti.algorithm.iter()) {
                t.graph(g);
            }
        }
        t
    }

    /// Counts over one graph and its subgraphs.
    pub(crate) fn of_graph(graph: &GraphProto) -> Self {
        let mut t = Tally::default();
        t.graph(graph);
        t
    }

    /// Counts over one function.
    pub(crate) fn of_function(function: &FunctionProto) -> Self {
        let mut t = Tally::default();
        t.function(function);
        t
    }

    /// The defaults that need the fewest per-element annotations (ties keep the base).
    pub(crate) fn defaults(&self) -> Defaults {
        Defaults {
            node_domain_unset: self.domain_unset > self.domain_empty,
            tensor_name_unset: self.name_unset > self.name_empty,
            tensor_storage_raw: self.raw > self.typed,
        }
    }

    fn graph(&mut self, g: &GraphProto) {
        for init in &g.initializer {
            self.storage(init);
        }
        for sparse in &g.sparse_initializer {
            self.sparse(sparse);
        }
        for n in &g.node {
            self.node(n);
        }
    }

    fn function(&mut self, f: &FunctionProto) {
        for n in &f.node {
            self.node(n);
        }
        for a in &f.attribute_proto {
            self.attribute(a);
        }
    }

    fn node(&mut self, n: &NodeProto) {
        match n.domain.as_deref() {
            None => self.domain_unset += 1,
            Some("") => self.domain_empty += 1,
            Some(_) => {}
        }
        for a in &n.attribute {
            self.attribute(a);
        }
    }

    fn attribute(&mut self, a: &AttributeProto) {
        for t in a.t.iter().chain(a.tensors.iter()) {
            self.unnamed_tensor(t);
        }
        if let Some(s) = &a.sparse_tensor {
            self.sparse(s);
        }
        for s in &a.sparse_tensors {
            self.sparse(s);
        }
        if let Some(g) = &a.g {
            self.graph(g);
        }
        for g in &a.graphs {
            self.graph(g);
        }
    }

    fn sparse(&mut self, s: &SparseTensorProto) {
        for t in s.values.iter().chain(s.indices.iter()) {
            self.unnamed_tensor(t);
        }
    }

    fn unnamed_tensor(&mut self, t: &TensorProto) {
        match t.name.as_deref() {
            None => self.name_unset += 1,
            Some("") => self.name_empty += 1,
            Some(_) => {}
        }
        self.storage(t);
    }

    fn storage(&mut self, t: &TensorProto) {
        if is_external_form(t) {
            return;
        }
        let Some(elem) = t.data_type.and_then(raw_elem) else {
            return;
        };
        match &t.raw_data {
            Some(raw) if raw.len() % elem.size() == 0 => self.raw += 1,
            Some(_) => {}
            None => self.typed += 1,
        }
    }
}

/// True when a tensor prints in the external-data form (`[ "location": ... ]`).
pub(crate) fn is_external_form(t: &TensorProto) -> bool {
    t.data_location == Some(DataLocation::External as i32) || !t.external_data.is_empty()
}
