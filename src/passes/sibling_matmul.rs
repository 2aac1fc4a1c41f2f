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

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{attribute_proto, tensor_proto, AttributeProto, GraphProto, ModelProto};
use onnx_proto::{NodeProto, TensorProto};

/// The fewest MatMuls merged into one: two MatMuls would become a MatMul and a Split, no fewer
/// nodes.
pub const MIN_GROUP: usize = 3;

/// Merges every group of sibling MatMuls in the main graph; returns how many MatMul nodes went
/// (a group of `n` removes `n - 1` MatMuls and adds one Split).
pub fn merge_sibling_matmuls(model: &mut ModelProto) -> usize {
    let opset = default_opset(model);
    if opset < 11 {
        return 0;
    }
    let Some(graph) = model.graph.as_mut() else {
        return 0;
    };
    let mut names = BTreeSet::new();
    crate::passes::inline::collect_names(graph, &mut names);
    merge_in(graph, opset, &mut names)
}

/// The model's default-domain opset (0 when it imports none).
pub(crate) fn default_opset(model: &ModelProto) -> i64 {
    model
        .opset_import
        .iter()
        .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .and_then(|o| o.version)
        .unwrap_or(0)
}

/// Reads of each name in `g`; a graph output or a name a subgraph reads counts twice more, so
/// a count of 1 means one node input and nothing else.
pub(crate) fn use_counts(g: &GraphProto) -> BTreeMap<&str, usize> {
    let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
    let mut in_subgraphs = BTreeSet::new();
    for n in &g.node {
        for i in &n.input {
            *uses.entry(i.as_str()).or_default() += 1;
        }
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                crate::passes::inline::collect_names(sub, &mut in_subgraphs);
            }
        }
    }
    for name in g.output.iter().filter_map(|v| v.name.as_deref()) {
        *uses.entry(name).or_default() += 2;
    }
    for name in &in_subgraphs {
        if let Some(u) = uses.get_mut(name.as_str()) {
            *u += 2;
        }
    }
    uses
}

/// `Split(input, axis, sizes)` into `outputs`, named after the first merged node `first`: the
/// sizes as an int64 initializer (pushed to `new_inits`) from opset 13, as an attribute below.
#[allow(clippy::too_many_arguments)]
pub(crate) fn split_node(
    first: &NodeProto,
    input: String,
    outputs: Vec<String>,
    axis: i64,
    sizes: Vec<i64>,
    opset: i64,
    names: &mut BTreeSet<String>,
    new_inits: &mut Vec<TensorProto>,
) -> NodeProto {
    let op = first.op_type.as_deref().unwrap_or("node");
    let mut split = NodeProto {
        name: Some(fresh(
            names,
            &format!("{}_split", first.name.as_deref().unwrap_or(op)),
        )),
        op_type: Some("Split".into()),
        domain: first.domain.clone(),
        input: vec![input],
        output: outputs,
        attribute: vec![AttributeProto {
            name: Some("axis".into()),
            r#type: Some(attribute_proto::AttributeType::Int as i32),
            i: Some(axis),
            ..Default::default()
        }],
        ..Default::default()
    };
    if opset >= 13 {
        let s_name = fresh(names, &format!("{}_split_sizes", first.output[0]));
        new_inits.push(TensorProto {
            name: Some(s_name.clone()),
            dims: vec![sizes.len() as i64],
            data_type: Some(tensor_proto::DataType::Int64 as i32),
            int64_data: sizes,
            ..Default::default()
        });
        split.input.push(s_name);
    } else {
        split.attribute.push(AttributeProto {
            name: Some("split".into()),
            r#type: Some(attribute_proto::AttributeType::Ints as i32),
            ints: sizes,
            ..Default::default()
        });
    }
    split
}

/// Rebuilds `g.node`: the nodes of `placed` go in before the node at their index, and the nodes
/// of `removed` go.
pub(crate) fn replace_nodes(
    g: &mut GraphProto,
    mut placed: BTreeMap<usize, Vec<NodeProto>>,
    removed: &BTreeSet<usize>,
) {
    let nodes = std::mem::take(&mut g.node);
    for (i, n) in nodes.into_iter().enumerate() {
        if let Some(new) = placed.remove(&i) {
            g.node.extend(new);
        }
        if !removed.contains(&i) {
            g.node.push(n);
        }
    }
}

/// Bytes per element (none for types narrower than a byte, or strings).
fn element_size(data_type: i32) -> Option<usize> {
    let bits = onnx_ref::DType::from_code(data_type)?.bit_width();
    (bits >= 8 && bits % 8 == 0).then_some(bits / 8)
}

/// A weight a group can take: its index among the initializers, columns, element type.
struct Weight {
    init: usize,
    rows: i64,
    cols: i64,
    data_type: i32,
}

/// The MatMuls of one group: node index and weight, in graph order.
type Group = Vec<(usize, Weight)>;

fn mergeable_weight(
    g: &GraphProto,
    name: &str,
    inits: &BTreeMap<&str, usize>,
    uses: &BTreeMap<&str, usize>,
) -> Option<Weight> {
    let &init = inits.get(name)?;
    if uses.get(name).copied().unwrap_or(0) != 1 {
        return None;
    }
    let t = &g.initializer[init];
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
        rows,
        cols,
        data_type,
    })
}

/// `base`, or `base_N` for the first N that makes it a name `names` does not hold; added to them.
pub(crate) fn fresh(names: &mut BTreeSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut i = 1;
    while names.contains(&name) {
        name = format!("{base}_{i}");
        i += 1;
    }
    names.insert(name.clone());
    name
}

fn merge_in(g: &mut GraphProto, opset: i64, names: &mut BTreeSet<String>) -> usize {
    let graph_inputs: BTreeSet<&str> = g.input.iter().filter_map(|v| v.name.as_deref()).collect();
    let inits: BTreeMap<&str, usize> = g
        .initializer
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.name.as_deref().map(|n| (n, i)))
        .filter(|(n, _)| !graph_inputs.contains(n))
        .collect();
    let uses = use_counts(g);
    // Groups: (first input, weight type, weight rows) -> (node index, weight) in graph order.
    let mut groups: BTreeMap<(&str, i32, i64), Group> = BTreeMap::new();
    for (i, n) in g.node.iter().enumerate() {
        let default_domain = matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx"));
        if n.op_type.as_deref() != Some("MatMul")
            || !default_domain
            || n.input.len() != 2
            || n.output.len() != 1
            || n.input[0].is_empty()
        {
            continue;
        }
        if let Some(w) = mergeable_weight(g, &n.input[1], &inits, &uses) {
            groups
                .entry((n.input[0].as_str(), w.data_type, w.rows))
                .or_default()
                .push((i, w));
        }
    }
    let groups: Vec<Group> = groups
        .into_values()
        .filter(|m| m.len() >= MIN_GROUP)
        .collect();
    if groups.is_empty() {
        return 0;
    }
    let mut removed_nodes = BTreeSet::new();
    let mut removed_inits = BTreeSet::new();
    let mut placed: BTreeMap<usize, Vec<NodeProto>> = BTreeMap::new();
    let mut new_inits = Vec::new();
    let mut merged = 0;
    for group in groups {
        let first = &g.node[group[0].0];
        let rows = group[0].1.rows as usize;
        let data_type = group[0].1.data_type;
        let size = element_size(data_type).unwrap_or(1);
        let total_cols: i64 = group.iter().map(|(_, w)| w.cols).sum();
        let mut raw = Vec::with_capacity(rows * total_cols as usize * size);
        for r in 0..rows {
            for (_, w) in &group {
                let row = w.cols as usize * size;
                let data = g.initializer[w.init]
                    .raw_data
                    .as_ref()
                    .map_or(&[][..], |b| b);
                raw.extend_from_slice(&data[r * row..(r + 1) * row]);
            }
        }
        let w_name = fresh(names, &format!("{}_merged", first.input[1]));
        let y_name = fresh(names, &format!("{}_merged", first.output[0]));
        new_inits.push(TensorProto {
            name: Some(w_name.clone()),
            dims: vec![rows as i64, total_cols],
            data_type: Some(data_type),
            raw_data: Some(raw.into()),
            ..Default::default()
        });
        let matmul = NodeProto {
            name: first.name.clone(),
            op_type: Some("MatMul".into()),
            domain: first.domain.clone(),
            input: vec![first.input[0].clone(), w_name],
            output: vec![y_name.clone()],
            ..Default::default()
        };
        let widths: Vec<i64> = group.iter().map(|(_, w)| w.cols).collect();
        let outputs = group
            .iter()
            .map(|(i, _)| g.node[*i].output[0].clone())
            .collect();
        let split = split_node(
            first,
            y_name,
            outputs,
            -1,
            widths,
            opset,
            names,
            &mut new_inits,
        );
        placed.insert(group[0].0, vec![matmul, split]);
        for (i, w) in &group {
            removed_nodes.insert(*i);
            removed_inits.insert(w.init);
        }
        merged += group.len() - 1;
    }
    replace_nodes(g, placed, &removed_nodes);
    let inits = std::mem::take(&mut g.initializer);
    g.initializer = inits
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !removed_inits.contains(i))
        .map(|(_, t)| t)
        .chain(new_inits)
        .collect();
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
        model: &mut onnx_ir::Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let n = merge_siblings_on_proto(model, cx, "MatMul", merge_sibling_matmuls)?;
        Ok(super::Changes::from([("merged_matmuls", n)]))
    }
}

/// Runs a sibling merge over the protobuf of a model whose main graph has at least two nodes
/// of the default-domain `op` (the model is replaced only when the merge removed nodes);
/// returns how many nodes went.
pub(crate) fn merge_siblings_on_proto(
    model: &mut onnx_ir::Model,
    cx: &super::PassContext<'_>,
    op: &str,
    merge: fn(&mut ModelProto) -> usize,
) -> Result<usize, crate::Error> {
    let count = model
        .graph
        .nodes_in_order()
        .filter(|(_, n)| n.op_type == op && n.is_onnx_domain())
        .count();
    if count < 2 {
        return Ok(0);
    }
    let mut proto = model.to_proto();
    let n = merge(&mut proto);
    if n > 0 {
        *model = cx.to_ir(proto)?;
    }
    Ok(n)
}
