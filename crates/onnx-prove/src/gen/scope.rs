//! What both the control-flow and the function generators read: the names a node reads from
//! its scope (subgraphs included), the value types of generated graphs, and the domain of the
//! generated model-local functions. Below `control` and `function`, which import it.

use std::collections::BTreeSet;

use onnx_proto::{GraphProto, NodeProto};
use onnx_ref::DType;

/// The domain of the model-local functions.
pub(crate) const LOCAL_DOMAIN: &str = "local.fuzz";

/// The element type and shape of a value.
pub(crate) type ValueType = (DType, Vec<usize>);

/// Every name a node reads: its inputs and its subgraphs' outer reads, in order, once each.
pub(crate) fn node_reads(node: &NodeProto) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in node.input.iter().cloned().chain(outer_reads(node)) {
        if !n.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Names a node's subgraphs read from the enclosing scopes (recursively).
pub(crate) fn outer_reads(node: &NodeProto) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for a in &node.attribute {
        for g in a.g.iter().chain(&a.graphs) {
            out.extend(graph_free_names(g));
        }
    }
    out
}

/// Names a graph reads without defining them.
fn graph_free_names(g: &GraphProto) -> BTreeSet<String> {
    let mut defined: BTreeSet<&str> = BTreeSet::new();
    defined.extend(g.input.iter().filter_map(|v| v.name.as_deref()));
    defined.extend(g.initializer.iter().filter_map(|t| t.name.as_deref()));
    for n in &g.node {
        defined.extend(n.output.iter().map(String::as_str));
    }
    let mut free = BTreeSet::new();
    for n in &g.node {
        for i in n.input.iter().cloned().chain(outer_reads(n)) {
            if !i.is_empty() && !defined.contains(i.as_str()) {
                free.insert(i);
            }
        }
    }
    free
}
