//! onnxruntime's MatMulNBits nodes that read the same input with constant weights become one
//! MatMulNBits over the weights stacked, and a Split of its result: the packed QKV projection
//! onnxruntime-genai's model builder writes, for a block-quantized model `rules/onnxruntime.rules`
//! lowered to MatMulNBits (or one a quantizer wrote so).
//!
//! MatMulNBits stores its weights N-major: B is `[N, blocks, blob]`, the scales `[N, blocks]`
//! (or flat, `[N * blocks]`), the zero points `[N, bytes]` packed (or flat) or `[N, blocks]` in
//! the scales' type. Each output column n is A times the dequantized row n of B, so the nodes'
//! B, scales and zero points laid one after the other are the weights of one node with N the sum
//! of theirs, whose result split along the last axis is theirs, column for column.
//!
//! This is a pass over the extracted graph for the reason `sibling_matmul.rs` gives: extraction
//! chooses each class on its own, and a merge pays only when the whole group takes it. A group
//! is nodes of the main graph with one input A and the same K, bits, block_size and
//! accuracy_level, each with B, scales and zero points that are initializers in `raw_data` of
//! the same element types and trailing dims, read by that node alone, in the file (not external)
//! and not graph inputs; all with zero points or none; no g_idx, no bias, and no other attribute.
//! At least [`MIN_GROUP`] nodes merge, and the merged B is at most [`MERGE_MAX_BYTES`].

use std::collections::{BTreeMap, BTreeSet};

use onnx_ir::onnx_proto::TensorProto;
use onnx_ir::{same_domain, Graph, Model, Name, Node, NodeId, Value, ValueId};

use super::names::{collect_names, fresh};
use super::sibling_matmul::{
    apply_merges, default_opset, initializer_positions, initializer_value, node_like, slot_name,
    split_node, use_counts, MERGE_MAX_BYTES, MIN_GROUP,
};

/// The attributes a merged node may carry (N is rewritten, the others must agree).
const KNOWN_ATTRS: &[&str] = &["K", "N", "bits", "block_size", "accuracy_level"];

/// One constant input of a node: its initializer, position in the list, dims and type.
struct Part {
    init: ValueId,
    position: usize,
    dims: Vec<i64>,
    data_type: i32,
    bytes: usize,
}

/// One MatMulNBits of a group: position in the order, node, N, and B, scales, zero points.
struct Member {
    at: usize,
    node: NodeId,
    n: i64,
    parts: Vec<Part>,
}

/// What nodes must share to merge: A's name, the attributes but N, and each constant input's
/// element type and dims after the first (the flat ones: their length per row of N).
type Key = (Name, Vec<(String, i64)>, Vec<(i32, Vec<i64>)>);

fn constant_part(
    g: &Graph,
    name: &str,
    inits: &BTreeMap<Name, usize>,
    uses: &BTreeMap<Name, usize>,
) -> Option<Part> {
    let &position = inits.get(name)?;
    if uses.get(name).copied().unwrap_or(0) != 1 {
        return None;
    }
    let init = g.initializers[position];
    let t = g.get_value(init)?.initializer.as_ref()?;
    let external =
        t.data_location == Some(onnx_ir::onnx_proto::tensor_proto::DataLocation::External as i32);
    let raw = t.raw_data.as_ref()?;
    let data_type = t.data_type?;
    let dtype = onnx_ref::DType::from_code(data_type)?;
    let count = usize::try_from(t.dims.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?).ok()?;
    let bytes = dtype.raw_len(count)?;
    (!external && !t.dims.is_empty() && raw.len() == bytes && dtype.bit_width() >= 8).then(|| {
        Part {
            init,
            position,
            dims: t.dims.clone(),
            data_type,
            bytes,
        }
    })
}

/// The node as a group member, and its key; `None` when it cannot merge.
fn member(
    g: &Graph,
    at: usize,
    id: NodeId,
    n: &Node,
    inits: &BTreeMap<Name, usize>,
    uses: &BTreeMap<Name, usize>,
) -> Option<(Key, Member)> {
    if n.op_type != "MatMulNBits" || !same_domain(&n.domain, "com.microsoft") {
        return None;
    }
    if n.outputs.len() != 1
        || !(3..=4).contains(&n.inputs.len())
        || n.inputs.iter().any(Option::is_none)
    {
        return None;
    }
    let mut attrs = Vec::new();
    let mut big_n = None;
    for a in &n.attributes {
        if !KNOWN_ATTRS.contains(&a.name.as_str()) {
            return None;
        }
        let v = a.as_int()?;
        match a.name.as_str() {
            "N" => big_n = Some(v),
            _ => attrs.push((a.name.to_string(), v)),
        }
    }
    attrs.sort();
    let big_n = big_n.filter(|&v| v > 0)?;
    let a = slot_name(g, n.inputs[0]);
    if a.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    let mut shapes = Vec::new();
    for &slot in &n.inputs[1..] {
        let p = constant_part(g, &slot_name(g, slot), inits, uses)?;
        // N-major: the leading dim is N, or a flat tensor of N equal rows.
        let per_row = match p.dims.as_slice() {
            [lead, rest @ ..] if *lead == big_n => rest.to_vec(),
            [flat] if flat % big_n == 0 => vec![-(flat / big_n)],
            _ => return None,
        };
        shapes.push((p.data_type, per_row));
        parts.push(p);
    }
    Some((
        (a, attrs, shapes),
        Member {
            at,
            node: id,
            n: big_n,
            parts,
        },
    ))
}

/// Merges every group of sibling MatMulNBits nodes in the main graph; returns how many nodes
/// went. The graph is left with the merged nodes in place and the replaced ones out of its
/// order, not in normal form.
pub(crate) fn merge_sibling_matmul_nbits(model: &mut Model) -> usize {
    let opset = default_opset(model);
    if opset < 11 {
        return 0;
    }
    let mut names = BTreeSet::new();
    collect_names(&model.graph, &mut names);
    let g = &mut model.graph;
    let inits = initializer_positions(g, true);
    let uses = use_counts(g);
    let mut groups: BTreeMap<Key, Vec<Member>> = BTreeMap::new();
    for (i, (id, n)) in g.nodes_in_order().enumerate() {
        if let Some((key, m)) = member(g, i, id, n, &inits, &uses) {
            groups.entry(key).or_default().push(m);
        }
    }
    let groups: Vec<Vec<Member>> = groups
        .into_values()
        .filter(|m| {
            let b: usize = m
                .iter()
                .map(|x| x.parts[0].bytes)
                .fold(0, usize::saturating_add);
            m.len() >= MIN_GROUP && b <= MERGE_MAX_BYTES
        })
        .collect();
    let mut removed_nodes = BTreeSet::new();
    let mut removed_inits = BTreeSet::new();
    let mut placed: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
    let mut new_inits = Vec::new();
    let mut merged = 0;
    for group in groups {
        let first = group[0].node;
        let total_n: i64 = group.iter().map(|m| m.n).sum();
        let mut inputs = vec![g.node(first).inputs[0]];
        for k in 0..group[0].parts.len() {
            let mut raw = Vec::with_capacity(group.iter().map(|m| m.parts[k].bytes).sum());
            for m in &group {
                let data = g
                    .value(m.parts[k].init)
                    .initializer
                    .as_ref()
                    .and_then(|t| t.raw_data.as_ref())
                    .map_or(&[][..], |b| b);
                raw.extend_from_slice(data);
            }
            let p = &group[0].parts[k];
            let mut dims = p.dims.clone();
            dims[0] = group.iter().map(|m| m.parts[k].dims[0]).sum();
            let source = slot_name(g, g.node(first).inputs[k + 1]);
            let name = fresh(&mut names, &format!("{source}_merged"));
            let tensor = TensorProto {
                dims,
                data_type: Some(p.data_type),
                raw_data: Some(raw.into()),
                ..Default::default()
            };
            let v = initializer_value(g, name, tensor);
            new_inits.push(v);
            inputs.push(Some(v));
        }
        let node = g.node(first);
        let y_name = fresh(
            &mut names,
            &format!("{}_merged", slot_name(g, node.outputs[0])),
        );
        let y = g.add_value(Value::new(y_name));
        let node = g.node(first);
        let mut fused = node_like(
            node,
            node.name.clone(),
            "MatMulNBits",
            inputs,
            vec![Some(y)],
        );
        fused.attributes = node
            .attributes
            .iter()
            .map(|a| match a.name.as_str() {
                "N" => onnx_ir::Attribute::int("N", total_n),
                _ => a.clone(),
            })
            .collect();
        let widths: Vec<i64> = group.iter().map(|m| m.n).collect();
        let outputs = group.iter().map(|m| g.node(m.node).outputs[0]).collect();
        let mut split = split_node(
            g,
            first,
            y,
            outputs,
            -1,
            widths,
            opset,
            &mut names,
            &mut new_inits,
        );
        // The Split is the default domain's, not the MatMulNBits' com.microsoft.
        split.domain = Default::default();
        split.field_presence.domain = false;
        placed.insert(group[0].at, vec![fused, split]);
        for m in &group {
            removed_nodes.insert(m.at);
            removed_inits.extend(m.parts.iter().map(|p| p.position));
        }
        merged += group.len() - 1;
    }
    if merged == 0 {
        return 0;
    }
    apply_merges(g, placed, &removed_nodes, &removed_inits, new_inits);
    merged
}

/// `merge-sibling-matmul-nbits`: this module's merge, as a pass.
pub(crate) struct MergeSiblingMatMulNBits;

impl super::Pass for MergeSiblingMatMulNBits {
    fn name(&self) -> &'static str {
        "merge-sibling-matmul-nbits"
    }

    fn about(&self) -> &'static str {
        "onnxruntime's MatMulNBits over one input with constant weights merged into one and a Split"
    }

    fn run(
        &self,
        model: &mut Model,
        _cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let count = model
            .graph
            .nodes_in_order()
            .filter(|(_, n)| n.op_type == "MatMulNBits")
            .count();
        let n = match count >= MIN_GROUP {
            true => merge_sibling_matmul_nbits(model),
            false => 0,
        };
        if n > 0 {
            super::normal_form::normalize(model);
        }
        Ok(super::Changes::from([("merged_matmul_nbits", n)]))
    }
}
