//! MatMuls that read the same input with constant weights become one MatMul over the weights
//! side by side, and a Split of its result (the query, key and value projections of an
//! attention block are the usual case).
//!
//! `MatMul(x, W1) .. MatMul(x, Wn)` with each `Wi` a 2-D initializer of `K` rows used by that
//! MatMul alone becomes `Split(MatMul(x, [W1 .. Wn]), axis: -1, split: [n1 .. nn])`: each
//! output element is the same dot product over `K`, so the results are those of the separate
//! MatMuls up to the order of the sums. The new weight replaces the old ones (the file does not
//! grow), and `n` MatMuls become two nodes.
//!
//! This is a pass over the extracted graph, not a rule: the e-graph extracts each class on its
//! own, and a rewrite that pays only when all the projections take it together is never chosen
//! there (ARCHITECTURE.md, extraction). Only the main graph is merged. A group is left alone when
//! a weight is also a graph input (it can be overridden), is stored outside the file or in typed
//! fields rather than `raw_data`, has an element type of less than a byte, or is read by any
//! other node or subgraph; below opset 11 (Split's negative axis) nothing is merged.
//!
//! The merge edits the IR; a model it changed is brought to normal form (`normal_form.rs`), as
//! the protobuf round trip it replaces left it. The helpers the Conv merge shares live here.

use std::collections::{BTreeMap, BTreeSet};

use onnx_ir::onnx_proto::{tensor_proto, TensorProto};
use onnx_ir::{same_domain, Attribute, Graph, Model, Name, Node, NodeId, Value, ValueId};

use super::names::{collect_names, fresh, value_name};

/// The fewest MatMuls merged into one: two MatMuls would become a MatMul and a Split, no fewer
/// nodes.
pub const MIN_GROUP: usize = 3;

/// The fewest MatMuls `merge-sibling-matmul-pairs` merges: a pair (a gated MLP's gate and up
/// projections), no fewer nodes, for a runtime where the one wider MatMul is faster.
pub const MIN_PAIR: usize = 2;

/// The largest merged weight built, in bytes. The merged weight is a new tensor, held in
/// memory and written out anew, where the separate weights were read in place from the model
/// file and copied by the kernel: a 7B decoder's query, key and value projections (96 MiB a
/// layer in float16, 3 GiB in all) stay separate, a 1B decoder's (12 MiB a layer) merge.
pub(crate) const MERGE_MAX_BYTES: usize = 32 << 20;

/// The bytes of a group's merged weight.
fn merged_bytes(group: &Group) -> usize {
    group
        .iter()
        .map(|(_, _, w)| {
            let size = element_size(w.data_type).unwrap_or(1);
            (w.rows as usize)
                .saturating_mul(w.cols as usize)
                .saturating_mul(size)
        })
        .fold(0, usize::saturating_add)
}

/// Merges every group of at least [`MIN_GROUP`] sibling MatMuls in the main graph; returns how
/// many MatMul nodes went (a group of `n` removes `n - 1` MatMuls and adds one Split). The graph
/// is left with the merged nodes in place and the replaced ones out of its order, not in normal
/// form.
pub(crate) fn merge_sibling_matmuls(model: &mut Model) -> usize {
    merge_sibling_matmul_groups(model, MIN_GROUP)
}

/// [`merge_sibling_matmuls`] with groups of at least `min_group`.
fn merge_sibling_matmul_groups(model: &mut Model, min_group: usize) -> usize {
    let opset = default_opset(model);
    if opset < 11 {
        return 0;
    }
    let mut names = BTreeSet::new();
    collect_names(&model.graph, &mut names);
    merge_in(&mut model.graph, opset, &mut names, min_group)
}

/// The model's default-domain opset (0 when it imports none).
pub(crate) fn default_opset(model: &Model) -> i64 {
    model
        .opset_imports
        .iter()
        .find(|o| same_domain(&o.domain, ""))
        .map_or(0, |o| o.version)
}

/// The name of an input or output slot ("" for an absent one).
pub(crate) fn slot_name(g: &Graph, slot: Option<ValueId>) -> Name {
    slot.map_or_else(Name::default, |id| value_name(g, id))
}

/// Reads of each name in `g`; a graph output or a name a subgraph reads counts twice more, so
/// a count of 1 means one node input and nothing else.
pub(crate) fn use_counts(g: &Graph) -> BTreeMap<Name, usize> {
    let mut uses: BTreeMap<Name, usize> = BTreeMap::new();
    let mut in_subgraphs = BTreeSet::new();
    for (_, n) in g.nodes_in_order() {
        for &i in &n.inputs {
            *uses.entry(slot_name(g, i)).or_default() += 1;
        }
        for sub in n.subgraphs() {
            collect_names(sub, &mut in_subgraphs);
        }
    }
    for &id in &g.outputs {
        *uses.entry(value_name(g, id)).or_default() += 2;
    }
    for name in &in_subgraphs {
        if let Some(u) = uses.get_mut(name) {
            *u += 2;
        }
    }
    uses
}

/// A new initializer value (its tensor named after it); listed by the caller.
pub(crate) fn initializer_value(g: &mut Graph, name: Name, mut tensor: TensorProto) -> ValueId {
    tensor.name = Some(name.to_string());
    g.add_value(Value {
        name,
        initializer: Some(tensor),
        ..Value::default()
    })
}

/// A node of `first`'s domain (as written) with no attributes, its outputs not yet produced
/// by it (see [`place`]).
pub(crate) fn node_like(
    first: &Node,
    name: Option<Name>,
    op_type: &str,
    inputs: Vec<Option<ValueId>>,
    outputs: Vec<Option<ValueId>>,
) -> Node {
    let mut node = Node::new(op_type, inputs, outputs);
    node.name = name;
    node.domain = first.domain.clone();
    node.field_presence.domain = first.field_presence.domain;
    node
}

/// `Split(input, axis, sizes)` into `outputs`, named after the first merged node `first`: the
/// sizes as an int64 initializer (appended to `new_inits`) from opset 13, as an attribute below.
#[allow(clippy::too_many_arguments)]
pub(crate) fn split_node(
    g: &mut Graph,
    first: NodeId,
    input: ValueId,
    outputs: Vec<Option<ValueId>>,
    axis: i64,
    sizes: Vec<i64>,
    opset: i64,
    names: &mut BTreeSet<Name>,
    new_inits: &mut Vec<ValueId>,
) -> Node {
    let node = g.node(first);
    let op = match node.op_type.is_empty() && !node.field_presence.op_type {
        true => "node",
        false => node.op_type.as_str(),
    };
    let base = node.name.as_deref().unwrap_or(op);
    let name = fresh(names, &format!("{base}_split"));
    let mut split = node_like(node, Some(name), "Split", vec![Some(input)], outputs);
    split.attributes.push(Attribute::int("axis", axis));
    if opset >= 13 {
        let first_output = slot_name(g, g.node(first).outputs[0]);
        let s_name = fresh(names, &format!("{first_output}_split_sizes"));
        let tensor = TensorProto {
            dims: vec![sizes.len() as i64],
            data_type: Some(tensor_proto::DataType::Int64 as i32),
            int64_data: sizes,
            ..Default::default()
        };
        let s = initializer_value(g, s_name, tensor);
        new_inits.push(s);
        split.inputs.push(Some(s));
    } else {
        split.attributes.push(Attribute::ints("split", sizes));
    }
    split
}

/// Rebuilds `g.order`: the nodes of `placed` go in (added to the arena, producing their
/// outputs) before the node at their position, and the nodes at the positions of `removed` go.
pub(crate) fn replace_nodes(
    g: &mut Graph,
    mut placed: BTreeMap<usize, Vec<Node>>,
    removed: &BTreeSet<usize>,
) {
    let order = std::mem::take(&mut g.order);
    let mut new_order = Vec::with_capacity(order.len());
    for (i, id) in order.into_iter().enumerate() {
        for node in placed.remove(&i).unwrap_or_default() {
            new_order.push(g.add_node_unordered(node));
        }
        if !removed.contains(&i) {
            new_order.push(id);
        }
    }
    g.order = new_order;
}

/// Ends a sibling merge: the merged nodes go in at their positions (see [`replace_nodes`]), the
/// replaced nodes and the initializers at `removed_inits` (positions in the list) go, and the new
/// initializers are appended.
pub(crate) fn apply_merges(
    g: &mut Graph,
    placed: BTreeMap<usize, Vec<Node>>,
    removed_nodes: &BTreeSet<usize>,
    removed_inits: &BTreeSet<usize>,
    new_inits: Vec<ValueId>,
) {
    replace_nodes(g, placed, removed_nodes);
    let inits = std::mem::take(&mut g.initializers);
    g.initializers = inits
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !removed_inits.contains(i))
        .map(|(_, id)| id)
        .chain(new_inits)
        .collect();
}

/// Bytes per element (none for types narrower than a byte, or strings).
fn element_size(data_type: i32) -> Option<usize> {
    let bits = onnx_ref::DType::from_code(data_type)?.bit_width();
    (bits >= 8 && bits % 8 == 0).then_some(bits / 8)
}

/// A weight a group can take: its value and position among the initializers, its dims and
/// element type.
struct Weight {
    init: ValueId,
    position: usize,
    rows: i64,
    cols: i64,
    data_type: i32,
}

/// The MatMuls of one group: position in the order, node and weight, in graph order.
type Group = Vec<(usize, NodeId, Weight)>;

fn mergeable_weight(
    g: &Graph,
    name: &str,
    inits: &BTreeMap<Name, usize>,
    uses: &BTreeMap<Name, usize>,
) -> Option<Weight> {
    let &position = inits.get(name)?;
    if uses.get(name).copied().unwrap_or(0) != 1 {
        return None;
    }
    let init = g.initializers[position];
    let t = g.get_value(init)?.initializer.as_ref()?;
    let external = t.data_location == Some(tensor_proto::DataLocation::External as i32);
    let raw = t.raw_data.as_ref()?;
    let &[rows, cols] = t.dims.as_slice() else {
        return None;
    };
    let data_type = t.data_type?;
    let size = element_size(data_type)?;
    let expected = usize::try_from(rows.checked_mul(cols)?)
        .ok()?
        .checked_mul(size)?;
    (!external && rows > 0 && cols > 0 && raw.len() == expected).then_some(Weight {
        init,
        position,
        rows,
        cols,
        data_type,
    })
}

/// Initializers by name (without those that are graph inputs, with `exclude_inputs`): their
/// position in the list (the last, for a name listed twice).
pub(crate) fn initializer_positions(g: &Graph, exclude_inputs: bool) -> BTreeMap<Name, usize> {
    let graph_inputs: BTreeSet<Name> = match exclude_inputs {
        true => g.inputs.iter().map(|&id| value_name(g, id)).collect(),
        false => BTreeSet::new(),
    };
    g.initializers
        .iter()
        .enumerate()
        .map(|(i, &id)| (value_name(g, id), i))
        .filter(|(n, _)| !graph_inputs.contains(n))
        .collect()
}

fn merge_in(g: &mut Graph, opset: i64, names: &mut BTreeSet<Name>, min_group: usize) -> usize {
    let inits = initializer_positions(g, true);
    let uses = use_counts(g);
    // Groups: (first input, weight type, weight rows) -> MatMuls in graph order.
    let mut groups: BTreeMap<(Name, i32, i64), Group> = BTreeMap::new();
    for (i, (id, n)) in g.nodes_in_order().enumerate() {
        if n.op_type != "MatMul" || !n.is_onnx_domain() || n.inputs.len() != 2 {
            continue;
        }
        let x = slot_name(g, n.inputs[0]);
        if n.outputs.len() != 1 || x.is_empty() {
            continue;
        }
        if let Some(w) = mergeable_weight(g, &slot_name(g, n.inputs[1]), &inits, &uses) {
            groups
                .entry((x, w.data_type, w.rows))
                .or_default()
                .push((i, id, w));
        }
    }
    let groups: Vec<Group> = groups
        .into_values()
        .filter(|m| m.len() >= min_group && merged_bytes(m) <= MERGE_MAX_BYTES)
        .collect();
    if groups.is_empty() {
        return 0;
    }
    let mut removed_nodes = BTreeSet::new();
    let mut removed_inits = BTreeSet::new();
    let mut placed: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
    let mut new_inits = Vec::new();
    let mut merged = 0;
    for group in groups {
        let (at, first, _) = &group[0];
        let (at, first) = (*at, *first);
        let rows = group[0].2.rows as usize;
        let data_type = group[0].2.data_type;
        let size = element_size(data_type).unwrap_or(1);
        let total_cols: i64 = group.iter().map(|(_, _, w)| w.cols).sum();
        let mut raw = Vec::with_capacity(rows * total_cols as usize * size);
        for r in 0..rows {
            for (_, _, w) in &group {
                let row = w.cols as usize * size;
                let data = g
                    .value(w.init)
                    .initializer
                    .as_ref()
                    .and_then(|t| t.raw_data.as_ref())
                    .map_or(&[][..], |b| b);
                raw.extend_from_slice(&data[r * row..(r + 1) * row]);
            }
        }
        let node = g.node(first);
        let (x, w_first, y_first) = (node.inputs[0], node.inputs[1], node.outputs[0]);
        let w_name = fresh(names, &format!("{}_merged", slot_name(g, w_first)));
        let y_name = fresh(names, &format!("{}_merged", slot_name(g, y_first)));
        let tensor = TensorProto {
            dims: vec![rows as i64, total_cols],
            data_type: Some(data_type),
            raw_data: Some(raw.into()),
            ..Default::default()
        };
        let w = initializer_value(g, w_name, tensor);
        new_inits.push(w);
        let y = g.add_value(Value::new(y_name));
        let node = g.node(first);
        let matmul = node_like(
            node,
            node.name.clone(),
            "MatMul",
            vec![x, Some(w)],
            vec![Some(y)],
        );
        let widths: Vec<i64> = group.iter().map(|(_, _, w)| w.cols).collect();
        let outputs = group
            .iter()
            .map(|(_, n, _)| g.node(*n).outputs[0])
            .collect();
        let split = split_node(
            g,
            first,
            y,
            outputs,
            -1,
            widths,
            opset,
            names,
            &mut new_inits,
        );
        placed.insert(at, vec![matmul, split]);
        for (i, _, w) in &group {
            removed_nodes.insert(*i);
            removed_inits.insert(w.position);
        }
        merged += group.len() - 1;
    }
    apply_merges(g, placed, &removed_nodes, &removed_inits, new_inits);
    merged
}

/// `merge-sibling-matmuls`: this module's merge, as a pass.
pub(crate) struct MergeSiblingMatMuls;

impl super::Pass for MergeSiblingMatMuls {
    fn name(&self) -> &'static str {
        "merge-sibling-matmuls"
    }

    fn about(&self) -> &'static str {
        "MatMuls over one input with constant weights merged into one MatMul and a Split"
    }

    fn run(
        &self,
        model: &mut Model,
        _cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let n = merge_siblings(model, "MatMul", merge_sibling_matmuls);
        Ok(super::Changes::from([("merged_matmuls", n)]))
    }
}

/// `merge-sibling-matmul-pairs`: the same merge for groups of two and more. Two MatMuls become
/// a MatMul and a Split, no fewer nodes, so this pass is for a runtime where the wider MatMul
/// pays: in onnxruntime 1.31.1 (1 thread), a hidden-512 Llama's decode step with each layer's
/// gate and up projections stacked measured 1-2% faster (benches/README.md), and the
/// `onnxruntime` pipeline runs it.
pub(crate) struct MergeSiblingMatMulPairs;

impl super::Pass for MergeSiblingMatMulPairs {
    fn name(&self) -> &'static str {
        "merge-sibling-matmul-pairs"
    }

    fn about(&self) -> &'static str {
        "MatMuls over one input with constant weights merged as above, pairs too (a gated MLP's gate and up projections)"
    }

    fn run(
        &self,
        model: &mut Model,
        _cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let n = merge_siblings(model, "MatMul", |m| {
            merge_sibling_matmul_groups(m, MIN_PAIR)
        });
        Ok(super::Changes::from([("merged_matmuls", n)]))
    }
}

/// Runs a sibling merge on a model whose main graph has at least two nodes of the
/// default-domain `op`; a model the merge changed is left in normal form. Returns how many
/// nodes went.
pub(crate) fn merge_siblings(
    model: &mut Model,
    op: &str,
    merge: impl FnOnce(&mut Model) -> usize,
) -> usize {
    let count = model
        .graph
        .nodes_in_order()
        .filter(|(_, n)| n.op_type == op && n.is_onnx_domain())
        .count();
    if count < 2 {
        return 0;
    }
    let n = merge(model);
    if n > 0 {
        super::normal_form::normalize(model);
    }
    n
}
