//! Convolutions that read the same input with the same attributes become one Conv over their
//! weights stacked on the output-channel axis, and a Split of its result (the 1x1 branches of
//! an Inception module are the usual case).
//!
//! `Conv(x, W1, B1) .. Conv(x, Wn, Bn)` with one set of attributes, `group` 1, and each `Wi` of
//! `Mi` output channels becomes `Split(Conv(x, [W1; ..; Wn], [B1; ..; Bn]), axis: 1,
//! split: [M1 .. Mn])`: each output channel is the same sum over the same window of `x` with
//! its own filter, so the results are those of the separate Convs. When every Conv's only
//! reader is the same elementwise activation (Relu, Clip with the same bounds, ...), the
//! activation is applied once, before the Split. So `n` Convs become two nodes, and `n` Convs
//! with their activations three.
//!
//! The weights and biases must depend on no graph input (below IR 4, initializers listed as
//! inputs count as constants). Initializers stored in the file that only their Conv reads are
//! joined into one initializer in `raw_data` (the output-channel axis is the outermost, so
//! their bytes are appended: the file does not grow); ConstantOfShape outputs of one fill
//! value become one ConstantOfShape; other weights (external data, initializers also read
//! elsewhere, computed constants) are joined by a Concat over axis 0, which depends on no
//! input and which runtimes fold at load.
//!
//! Like `sibling_matmul.rs`, a pass over the extracted graph: the e-graph extracts each class on
//! its own and never picks a rewrite that pays only when all siblings take it. Only the main
//! graph is merged.
//!
//! The merge edits the IR; a graph it changed is sorted and brought to normal form
//! (`normal_form.rs`), as the protobuf round trip it replaces left it. Shape inference still
//! reads the main graph's protobuf (`onnx_schema::infer` works on `GraphProto`).

use std::collections::{BTreeMap, BTreeSet};

use onnx_ir::onnx_proto::{tensor_proto, type_proto, AttributeProto, Message, TensorProto};
use onnx_ir::{Attribute, Graph, InfoList, Model, Name, Node, NodeId, Value, ValueId};

use super::names::{collect_names, fresh, value_name};
use super::sibling_matmul::{default_opset, initializer_positions, initializer_value};
use super::sibling_matmul::{replace_nodes, slot_name, split_node, use_counts};

/// Elementwise activations of one tensor input (further inputs, such as Clip's bounds, must be
/// the same names) that can be applied to the merged Conv's result before the Split.
const ACTIVATIONS: &[&str] = &[
    "Relu",
    "LeakyRelu",
    "Clip",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Elu",
    "Selu",
    "Celu",
    "Softplus",
    "Softsign",
    "ThresholdedRelu",
    "Mish",
    "Gelu",
];

/// Merges every group of sibling Convs in the main graph; returns how many Conv nodes went (a
/// group of `n` removes `n - 1` Convs and adds one Split). A graph that changed is sorted
/// topologically (and in normal form); one the merge would leave out of order is kept as it was.
pub(crate) fn merge_sibling_convs(model: &mut Model) -> usize {
    let opset = default_opset(model);
    if opset < 1 {
        return 0;
    }
    let imports: Vec<_> = model.opset_imports.iter().map(|o| o.to_proto()).collect();
    let opsets = onnx_schema::infer::opset_imports(&imports);
    let mut names = BTreeSet::new();
    collect_names(&model.graph, &mut names);
    // Below IR 4 every initializer is also a graph input, and a constant all the same.
    let inputs_are_constants = model.ir_version.unwrap_or(0) < 4;
    let graph = &mut model.graph;
    let facts = Facts::of(graph, &opsets, inputs_are_constants);
    let groups = groups(graph, &facts);
    if groups.is_empty() {
        return 0;
    }
    let before = graph.clone();
    let merged = merge_groups(
        graph,
        &facts,
        groups,
        opset,
        inputs_are_constants,
        &mut names,
    );
    // The merged nodes stand where the first Conv stood; the IR's stable sort puts them after
    // the weights they read. Never leave a graph out of order: on a cycle keep the original.
    super::normal_form::normalize_main_graph(graph);
    if graph.sort_topologically().is_err() {
        *graph = before;
        return 0;
    }
    merged
}

fn has_subgraph(n: &Node) -> bool {
    n.subgraphs().next().is_some()
}

/// A node's attributes, sorted by name and encoded: equal keys mean equal attributes.
fn attribute_key(n: &Node) -> Vec<Vec<u8>> {
    let mut attrs: Vec<AttributeProto> = n.attributes.iter().map(Attribute::to_proto).collect();
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    attrs.iter().map(|a| a.encode_to_vec()).collect()
}

/// What the pass knows of the main graph (positions are in the node order).
struct Facts {
    /// Initializers that are not graph inputs, by name: their position in the list.
    inits: BTreeMap<Name, usize>,
    /// The node that writes each name.
    producer: BTreeMap<Name, usize>,
    /// The first node that reads each name.
    reader: BTreeMap<Name, usize>,
    /// Reads of each name; a graph output or a name a subgraph reads counts twice.
    uses: BTreeMap<Name, usize>,
    /// Names that depend on no graph input.
    input_free: BTreeSet<Name>,
    /// Types inference finds (empty when it fails).
    types: BTreeMap<String, onnx_ir::onnx_proto::TypeProto>,
}

impl Facts {
    fn of(
        g: &Graph,
        opsets: &onnx_schema::infer::OpsetImports,
        inputs_are_constants: bool,
    ) -> Facts {
        let inits = initializer_positions(g, !inputs_are_constants);
        let mut producer = BTreeMap::new();
        let mut input_free: BTreeSet<Name> = inits.keys().cloned().collect();
        let mut reader = BTreeMap::new();
        for (k, (_, n)) in g.nodes_in_order().enumerate() {
            for &i in &n.inputs {
                reader.entry(slot_name(g, i)).or_insert(k);
            }
            for &o in &n.outputs {
                producer.insert(slot_name(g, o), k);
            }
            let pure = n.is_onnx_domain()
                && !has_subgraph(n)
                && !onnx_egraph::RANDOM_OPS.contains(&n.op_type.as_str());
            let free = |i: &Option<ValueId>| {
                let name = slot_name(g, *i);
                name.is_empty() || input_free.contains(&name)
            };
            if pure && n.inputs.iter().all(free) {
                input_free.extend(n.outputs.iter().map(|&o| slot_name(g, o)));
            }
        }
        // Inference reads the graph as the file holds it.
        let types = onnx_schema::infer::infer_graph(&g.to_proto(), opsets).unwrap_or_default();
        Facts {
            inits,
            producer,
            reader,
            uses: use_counts(g),
            input_free,
            types,
        }
    }

    fn single_use(&self, name: &str) -> bool {
        self.uses.get(name).copied() == Some(1)
    }

    /// The dims of an operand: an initializer's, else what inference or value_info knows
    /// fully.
    fn dims_of(&self, g: &Graph, name: &str) -> Option<Vec<i64>> {
        if let Some(&i) = self.inits.get(name) {
            let t = g.get_value(g.initializers[i])?.initializer.clone();
            return Some(t.unwrap_or_default().dims);
        }
        let declared;
        let ty = match self.types.get(name) {
            Some(t) => t,
            None => {
                let (i, &id) = (g.value_info.iter().enumerate())
                    .find(|(_, &id)| &*value_name(g, id) == name)?;
                declared = super::normal_form::declaration(g, InfoList::ValueInfo, i, id);
                declared.r#type.as_ref()?
            }
        };
        let type_proto::Value::TensorType(t) = ty.value.as_ref()? else {
            return None;
        };
        t.shape
            .as_ref()?
            .dim
            .iter()
            .map(|d| match d.value {
                Some(onnx_ir::onnx_proto::tensor_shape_proto::dimension::Value::DimValue(v)) => {
                    Some(v)
                }
                _ => None,
            })
            .collect()
    }
}

/// One Conv of a group: its position, output channels, and the activation that alone reads it.
struct Member {
    conv: usize,
    channels: i64,
    activation: Option<usize>,
}

/// What makes Convs mergeable: input, attributes, weight dims past the first, bias present.
type ConvKey = (Name, Vec<Vec<u8>>, Vec<i64>, bool);

/// What makes activations mergeable: op type, attributes, further inputs.
type ActivationKey = Option<(Name, Vec<Vec<u8>>, Vec<Name>)>;

/// The groups of Convs that pay to merge, in key order.
fn groups(g: &Graph, facts: &Facts) -> Vec<Vec<Member>> {
    let nodes: Vec<&Node> = g.nodes_in_order().map(|(_, n)| n).collect();
    // Weights may be shared (hash-consing merges equal ConstantOfShape fills): stacking never
    // removes a weight something else still reads.
    let constant = |name: &Name| facts.input_free.contains(name);
    let mut groups: BTreeMap<(ConvKey, ActivationKey), Vec<Member>> = BTreeMap::new();
    for (k, n) in nodes.iter().enumerate() {
        if n.op_type != "Conv" || !n.is_onnx_domain() || !(2..=3).contains(&n.inputs.len()) {
            continue;
        }
        let (x, w) = (slot_name(g, n.inputs[0]), slot_name(g, n.inputs[1]));
        if n.outputs.len() != 1 || x.is_empty() || w.is_empty() {
            continue;
        }
        let group = n.attribute("group").and_then(Attribute::fields);
        if group.is_some_and(|a| a.i.unwrap_or(1) != 1) || !constant(&w) {
            continue;
        }
        let bias = n.inputs.get(2).map(|&b| slot_name(g, b));
        let bias = bias.filter(|b| !b.is_empty());
        if bias.as_ref().is_some_and(|b| !constant(b)) {
            continue;
        }
        let Some(dims) = facts.dims_of(g, &w) else {
            continue;
        };
        if dims.len() < 3 || dims.iter().any(|&d| d <= 0) {
            continue;
        }
        if let Some(b) = &bias {
            if facts.dims_of(g, b) != Some(vec![dims[0]]) {
                continue;
            }
        }
        let out = slot_name(g, n.outputs[0]);
        let activation = (facts.single_use(&out))
            .then(|| facts.reader.get(&out).copied())
            .flatten()
            .filter(|&a| {
                let c = nodes[a];
                c.is_onnx_domain()
                    && ACTIVATIONS.contains(&c.op_type.as_str())
                    && c.inputs.first().map(|&i| slot_name(g, i)) == Some(out.clone())
                    && c.outputs.len() == 1
            });
        let act_key = activation.map(|a| {
            let c = nodes[a];
            let further = c.inputs[1..].iter().map(|&i| slot_name(g, i)).collect();
            (c.op_type.clone(), attribute_key(c), further)
        });
        let key = (x, attribute_key(n), dims[1..].to_vec(), bias.is_some());
        groups.entry((key, act_key)).or_default().push(Member {
            conv: k,
            channels: dims[0],
            activation,
        });
    }
    // A group pays when it removes nodes: n Convs and activations become three nodes, n bare
    // Convs two.
    groups
        .into_iter()
        .filter(|((_, act), m)| m.len() >= if act.is_some() { 2 } else { 3 })
        .map(|(_, m)| m)
        .collect()
}

fn merge_groups(
    g: &mut Graph,
    facts: &Facts,
    groups: Vec<Vec<Member>>,
    opset: i64,
    inputs_are_constants: bool,
    names: &mut BTreeSet<Name>,
) -> usize {
    let order = g.order.clone();
    let node_at = |g: &Graph, k: usize| g.node(order[k]).clone();
    let mut removed_nodes = BTreeSet::new();
    let mut maybe_dead = BTreeSet::new();
    let mut placed: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
    let mut new_inits = Vec::new();
    let mut merged = 0;
    for group in &groups {
        let first = node_at(g, group[0].conv);
        let base = slot_name(g, first.outputs[0]);
        let mut nodes = Vec::new();
        let mut stacking = Stacking {
            facts,
            base: &base,
            names: &mut *names,
            nodes: &mut nodes,
            new_inits: &mut new_inits,
            replaced: &mut maybe_dead,
            order: &order,
        };
        let weights: Vec<Option<ValueId>> =
            group.iter().map(|m| node_at(g, m.conv).inputs[1]).collect();
        let w = stacking.stack(g, &weights, "weight");
        let mut inputs = vec![first.inputs[0], Some(w)];
        if first
            .inputs
            .get(2)
            .is_some_and(|&b| !slot_name(g, b).is_empty())
        {
            let biases: Vec<Option<ValueId>> =
                group.iter().map(|m| node_at(g, m.conv).inputs[2]).collect();
            inputs.push(Some(stacking.stack(g, &biases, "bias")));
        }
        let mut y = g.add_value(Value::new(fresh(names, &format!("{base}_merged"))));
        nodes.push(Node {
            inputs,
            outputs: vec![Some(y)],
            ..first.clone()
        });
        if let Some(a) = group[0].activation {
            let act = node_at(g, a);
            let z_name = fresh(names, &format!("{}_merged", slot_name(g, act.outputs[0])));
            let z = g.add_value(Value::new(z_name));
            let mut inputs = act.inputs.clone();
            inputs[0] = Some(y);
            nodes.push(Node {
                inputs,
                outputs: vec![Some(z)],
                ..act
            });
            y = z;
        }
        let outputs: Vec<Option<ValueId>> = group
            .iter()
            .map(|m| node_at(g, m.activation.unwrap_or(m.conv)).outputs[0])
            .collect();
        let sizes: Vec<i64> = group.iter().map(|m| m.channels).collect();
        let (first_id, input) = (order[group[0].conv], y);
        let split = split_node(
            g,
            first_id,
            input,
            outputs,
            1,
            sizes,
            opset,
            names,
            &mut new_inits,
        );
        nodes.push(split);
        placed.insert(group[0].conv, nodes);
        for m in group {
            removed_nodes.insert(m.conv);
            removed_nodes.extend(m.activation);
        }
        merged += group.len() - 1;
    }
    // The weights' producers that only the merged nodes read go too.
    let mut reads_by_removed: BTreeMap<Name, usize> = BTreeMap::new();
    for &k in &removed_nodes {
        for &i in &g.node(order[k]).inputs {
            *reads_by_removed.entry(slot_name(g, i)).or_default() += 1;
        }
    }
    let dead: Vec<usize> = maybe_dead
        .into_iter()
        .filter(|&k| {
            g.node(order[k]).outputs.iter().all(|&o| {
                let o = slot_name(g, o);
                facts.uses.get(&o).copied().unwrap_or(0)
                    == reads_by_removed.get(&o).copied().unwrap_or(0)
            })
        })
        .collect();
    let removed_nodes: BTreeSet<usize> = removed_nodes.into_iter().chain(dead).collect();
    // Values that no longer exist lose their value_info; initializers only removed nodes read go.
    let mut gone: BTreeSet<Name> = BTreeSet::new();
    let mut orphans: BTreeSet<Name> = BTreeSet::new();
    for &k in &removed_nodes {
        let n = g.node(order[k]);
        gone.extend(n.outputs.iter().map(|&o| slot_name(g, o)));
        orphans.extend(n.inputs.iter().map(|&i| slot_name(g, i)));
    }
    replace_nodes(g, placed, &removed_nodes);
    let mut still_read = BTreeSet::new();
    let mut produced = BTreeSet::new();
    for (_, n) in g.nodes_in_order() {
        still_read.extend(n.inputs.iter().map(|&i| slot_name(g, i)));
        produced.extend(n.outputs.iter().map(|&o| slot_name(g, o)));
        for sub in n.subgraphs() {
            collect_names(sub, &mut still_read);
        }
    }
    still_read.extend(g.outputs.iter().map(|&id| value_name(g, id)));
    gone.retain(|name| !produced.contains(name));
    retain_declared(g, InfoList::ValueInfo, |name| !gone.contains(name));
    let graph_inputs: BTreeSet<Name> = g.inputs.iter().map(|&id| value_name(g, id)).collect();
    let mut dropped = BTreeSet::new();
    let inits = std::mem::take(&mut g.initializers);
    for id in inits {
        let name = value_name(g, id);
        let keep = !orphans.contains(&name)
            || still_read.contains(&name)
            || (graph_inputs.contains(&name) && !inputs_are_constants);
        match keep {
            true => g.initializers.push(id),
            false => {
                dropped.insert(name);
            }
        }
    }
    if inputs_are_constants {
        // The initializers listed as inputs go with them, and new ones are listed.
        retain_declared(g, InfoList::Input, |name| !dropped.contains(name));
        for &id in &new_inits {
            let v = g.value_mut(id);
            v.ty = v.initializer.as_ref().map(input_type);
            g.inputs.push(id);
        }
    }
    g.initializers.extend(new_inits);
    merged
}

/// Keeps the declarations of one list whose value's name passes `keep`; the overrides of the
/// kept ones move with them.
fn retain_declared(g: &mut Graph, list: InfoList, keep: impl Fn(&Name) -> bool) {
    let ids = match list {
        InfoList::Input => std::mem::take(&mut g.inputs),
        InfoList::Output => std::mem::take(&mut g.outputs),
        InfoList::ValueInfo => std::mem::take(&mut g.value_info),
    };
    let mut kept = Vec::with_capacity(ids.len());
    for (i, id) in ids.into_iter().enumerate() {
        let o = g.info_overrides.remove(&(list, i));
        if keep(&value_name(g, id)) {
            if let Some(o) = o {
                g.info_overrides.insert((list, kept.len()), o);
            }
            kept.push(id);
        }
    }
    match list {
        InfoList::Input => g.inputs = kept,
        InfoList::Output => g.outputs = kept,
        InfoList::ValueInfo => g.value_info = kept,
    }
}

/// The type of the graph input that lists an initializer (below IR 4).
fn input_type(t: &TensorProto) -> onnx_ir::onnx_proto::TypeProto {
    use onnx_ir::onnx_proto::tensor_shape_proto::{dimension, Dimension};
    onnx_ir::onnx_proto::TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: t.data_type,
            shape: Some(onnx_ir::onnx_proto::TensorShapeProto {
                dim: t
                    .dims
                    .iter()
                    .map(|&d| Dimension {
                        value: Some(dimension::Value::DimValue(d)),
                        ..Default::default()
                    })
                    .collect(),
            }),
        })),
        ..Default::default()
    }
}

fn int64_tensor(values: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![values.len() as i64],
        data_type: Some(tensor_proto::DataType::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// What stacking a group's weights or biases adds to: the names, the merged nodes, the new
/// initializers, and the ConstantOfShape nodes (positions) a stacked fill replaces.
struct Stacking<'a> {
    facts: &'a Facts,
    base: &'a str,
    names: &'a mut BTreeSet<Name>,
    nodes: &'a mut Vec<Node>,
    new_inits: &'a mut Vec<ValueId>,
    replaced: &'a mut BTreeSet<usize>,
    order: &'a [NodeId],
}

impl Stacking<'_> {
    /// `parts` stacked on axis 0: a new initializer (of initializers only their Conv reads,
    /// which then go), a new ConstantOfShape, or a Concat node (pushed to `nodes`).
    /// ConstantOfShape nodes the result replaces are added to `replaced` (removed if nothing
    /// else reads them).
    fn stack(&mut self, g: &mut Graph, parts: &[Option<ValueId>], what: &str) -> ValueId {
        let facts = self.facts;
        let name = fresh(self.names, &format!("{}_merged_{what}", self.base));
        let part_names: Vec<Name> = parts.iter().map(|&p| slot_name(g, p)).collect();
        let dims: Vec<Vec<i64>> = part_names
            .iter()
            .map(|p| facts.dims_of(g, p).unwrap_or_default())
            .collect();
        let mut stacked = dims[0].clone();
        stacked[0] = dims.iter().map(|d| d[0]).sum();
        // Initializers (in the file) only their Conv reads: their little-endian bytes appended.
        let raws: Option<Vec<(bytes::Bytes, &TensorProto)>> = part_names
            .iter()
            .map(|p| {
                let id = g.initializers[*facts.inits.get(p)?];
                let t = g.get_value(id)?.initializer.as_ref()?;
                if !facts.single_use(p) {
                    // Appending a weight that stays would grow the file.
                    return None;
                }
                if t.data_location == Some(tensor_proto::DataLocation::External as i32) {
                    return None;
                }
                let raw = match &t.raw_data {
                    Some(raw) => raw.clone(),
                    // Typed fields: decoded and written as raw_data.
                    None => {
                        onnx_ref::Tensor::from_proto(t)
                            .ok()?
                            .to_proto("")
                            .raw_data?
                    }
                };
                Some((raw, t))
            })
            .collect();
        if let Some(ts) = raws {
            let data_type = ts[0].1.data_type;
            let bits = data_type
                .and_then(onnx_ref::DType::from_code)
                .map_or(0, onnx_ref::DType::bit_width);
            let whole = |(raw, t): &(bytes::Bytes, &TensorProto)| {
                let bytes = t
                    .dims
                    .iter()
                    .try_fold(bits as i64 / 8, |acc, &d| acc.checked_mul(d));
                bits.is_multiple_of(8)
                    && bits > 0
                    && t.data_type == data_type
                    && bytes == Some(raw.len() as i64)
            };
            if ts.iter().all(whole) {
                let mut raw = Vec::new();
                for (r, _) in &ts {
                    raw.extend_from_slice(r);
                }
                let tensor = TensorProto {
                    dims: stacked,
                    data_type,
                    raw_data: Some(raw.into()),
                    ..Default::default()
                };
                let id = initializer_value(g, name, tensor);
                self.new_inits.push(id);
                return id;
            }
        }
        let out = g.add_value(Value::new(name.clone()));
        // ConstantOfShape outputs of one fill value: one ConstantOfShape.
        let fills: Option<Vec<usize>> = part_names
            .iter()
            .map(|p| {
                let &k = facts.producer.get(p)?;
                let n = g.node(self.order[k]);
                (n.op_type == "ConstantOfShape" && n.is_onnx_domain()).then_some(k)
            })
            .collect();
        if let Some(ks) = fills {
            let value = |k: usize| attribute_key(g.node(self.order[k]));
            if ks.iter().all(|&k| value(k) == value(ks[0])) {
                let shape_name = fresh(self.names, &format!("{name}_shape"));
                let shape = initializer_value(g, shape_name, int64_tensor(&stacked));
                self.new_inits.push(shape);
                let fill_name = fresh(self.names, &format!("{name}_fill"));
                self.nodes.push(Node {
                    inputs: vec![Some(shape)],
                    outputs: vec![Some(out)],
                    name: Some(fill_name),
                    ..g.node(self.order[ks[0]]).clone()
                });
                self.replaced.extend(ks);
                return out;
            }
        }
        let concat_name = fresh(self.names, &format!("{name}_concat"));
        let mut concat = Node::new("Concat", parts.to_vec(), vec![Some(out)]);
        concat.name = Some(concat_name);
        concat.attributes.push(Attribute::int("axis", 0));
        self.nodes.push(concat);
        out
    }
}

/// `merge-sibling-convs`: this module's merge, as a pass; under the node-count cost model only.
/// The Split keeps onnxruntime's NCHWc layout from spanning the merged Conv's readers (reorders
/// around it made light_inception_v1 1.5 to 4% slower with its optimizations on, 1.4 to 4%
/// faster with them off).
pub(crate) struct MergeSiblingConvs;

impl super::Pass for MergeSiblingConvs {
    fn name(&self) -> &'static str {
        "merge-sibling-convs"
    }

    fn about(&self) -> &'static str {
        "Convs over one input with one set of attributes merged into one Conv and a Split (node-count cost only)"
    }

    fn is_enabled(&self, cx: &super::PassContext<'_>) -> bool {
        cx.host.cost_kind() == onnx_egraph::CostKind::NodeCount
    }

    fn run(
        &self,
        model: &mut Model,
        _cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let n = super::sibling_matmul::merge_siblings(model, "Conv", merge_sibling_convs);
        Ok(super::Changes::from([("merged_convs", n)]))
    }
}
