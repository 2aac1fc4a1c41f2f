//! Value names for passes that add values to a graph: every name a graph uses (to make fresh
//! ones that clash with none), and a fresh name from a base.
//!
//! Names are read from the graph's lists and its nodes in order (what the file holds), never
//! from the value arena, which may keep values no list or node refers to any more.

use std::collections::BTreeSet;

use onnx_ir::{Graph, Name, ValueId};

/// The name a handle has in the file ("<invalid value N>" for a handle out of range, as
/// `to_proto` writes it).
pub(crate) fn value_name(g: &Graph, id: ValueId) -> Name {
    match g.get_value(id) {
        Some(v) => v.name.clone(),
        None => Name::from(format!("<invalid value {}>", id.0)),
    }
}

/// Every name `g` and the subgraphs below it use: graph inputs, outputs, value_info,
/// initializers, node inputs and outputs ("" for an absent one).
pub(crate) fn collect_names(g: &Graph, out: &mut BTreeSet<Name>) {
    for &id in g.inputs.iter().chain(&g.outputs).chain(&g.value_info) {
        out.insert(value_name(g, id));
    }
    for &id in &g.initializers {
        out.insert(value_name(g, id));
    }
    for (_, n) in g.nodes_in_order() {
        for slot in n.inputs.iter().chain(&n.outputs) {
            out.insert(slot.map_or_else(Name::default, |id| value_name(g, id)));
        }
        for sub in n.subgraphs() {
            collect_names(sub, out);
        }
    }
}

/// `base`, or `base_N` for the first N that makes it a name `names` does not hold; added to them.
pub(crate) fn fresh(names: &mut BTreeSet<Name>, base: &str) -> Name {
    let mut name = base.to_string();
    let mut i = 1;
    while names.contains(name.as_str()) {
        name = format!("{base}_{i}");
        i += 1;
    }
    let name = Name::from(name);
    names.insert(name.clone());
    name
}
