//! Renumbering: a graph edited in place (nodes replaced in `order`, values added, renamed or
//! left unused) rewritten into the arena layout `Graph::from_proto` gives the protobuf it
//! writes, so the passes after an IR pass see the same graph as after a protobuf round trip
//! (lift and extraction read the arenas, not only `order`). Layer: IR only.

use std::collections::HashMap;

use onnx_ir::{Graph, InfoList, Name, Node, NodeId, Value, ValueId};

/// Rewrites a graph's arenas into the layout `Graph::from_proto` gives the protobuf it writes:
/// values in the order graph inputs, initializers, sparse initializers, node outputs (node by
/// node), then the values defined nowhere in the order they are first read (nodes, graph
/// outputs, value_info), one per name; nodes in `order` only, each output's producer set;
/// absent slots (a value named "") as `None`; declaration overrides only where the slot still
/// holds their value.
pub(crate) fn renumber(g: &mut Graph) {
    let mut r = Renumbering {
        new_id: vec![None; g.values.len()],
        old: std::mem::take(&mut g.values),
        values: Vec::new(),
        undefined: HashMap::new(),
    };
    for list in [
        &mut g.inputs,
        &mut g.initializers,
        &mut g.sparse_initializers,
    ] {
        for v in list.iter_mut() {
            *v = r.place(*v, true);
        }
    }
    let mut arena: Vec<Option<Node>> = std::mem::take(&mut g.nodes).into_iter().map(Some).collect();
    let mut nodes: Vec<Node> = std::mem::take(&mut g.order)
        .iter()
        .filter_map(|id| arena.get_mut(id.index()).and_then(Option::take))
        .collect();
    // Every node's outputs before any input (a read before its definition finds it).
    for (index, node) in nodes.iter_mut().enumerate() {
        for (position, slot) in node.outputs.iter_mut().enumerate() {
            *slot = r.present(*slot).map(|v| {
                let n = r.place(v, true);
                r.values[n.index()].producer = Some((NodeId(index as u32), position));
                n
            });
        }
    }
    for node in nodes.iter_mut() {
        for slot in node.inputs.iter_mut() {
            *slot = r.present(*slot).map(|v| r.place(v, false));
        }
    }
    for list in [&mut g.outputs, &mut g.value_info] {
        for v in list.iter_mut() {
            *v = r.place(*v, false);
        }
    }
    g.order = (0..nodes.len() as u32).map(NodeId).collect();
    g.nodes = nodes;
    g.values = r.values;
    let overrides = std::mem::take(&mut g.info_overrides);
    for ((list, index), mut o) in overrides {
        let slot = match list {
            InfoList::Input => g.inputs.get(index),
            InfoList::Output => g.outputs.get(index),
            InfoList::ValueInfo => g.value_info.get(index),
        };
        let Some(&now) = slot else { continue };
        if r.new_id.get(o.value.index()).copied().flatten() == Some(now) {
            o.value = now;
            g.info_overrides.insert((list, index), o);
        }
    }
}

/// The state of [`renumber`]: the old arena and where each of its values went.
struct Renumbering {
    old: Vec<Value>,
    new_id: Vec<Option<ValueId>>,
    values: Vec<Value>,
    /// The values defined nowhere, by name.
    undefined: HashMap<Name, ValueId>,
}

impl Renumbering {
    /// A slot's value, `None` for the absent one (named "").
    fn present(&self, slot: Option<ValueId>) -> Option<ValueId> {
        slot.filter(|v| !self.old[v.index()].name.is_empty())
    }

    /// The new handle of an old value, placed next unless it was already (or, for a value
    /// defined nowhere, one of its name was).
    fn place(&mut self, v: ValueId, defines: bool) -> ValueId {
        if let Some(n) = self.new_id[v.index()] {
            return n;
        }
        let value = &self.old[v.index()];
        let n = match self.undefined.get(&value.name) {
            Some(&n) if !defines => n,
            _ => {
                let n = ValueId(self.values.len() as u32);
                let mut value = value.clone();
                value.producer = None;
                if !defines {
                    self.undefined.insert(value.name.clone(), n);
                }
                self.values.push(value);
                n
            }
        };
        self.new_id[v.index()] = Some(n);
        n
    }
}
