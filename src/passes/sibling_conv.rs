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

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{attribute_proto, tensor_proto, AttributeProto, GraphProto, ModelProto};
use onnx_proto::{Message, NodeProto, TensorProto};

use crate::passes::sibling_matmul::{default_opset, fresh, replace_nodes, split_node, use_counts};

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
/// group of `n` removes `n - 1` Convs and adds one Split).
pub fn merge_sibling_convs(model: &mut ModelProto) -> usize {
    let opset = default_opset(model);
    if opset < 1 {
        return 0;
    }
    let opsets = onnx_schema::infer::opset_imports(&model.opset_import);
    let before = model.clone();
    let Some(graph) = model.graph.as_mut() else {
        return 0;
    };
    let mut names = BTreeSet::new();
    crate::passes::inline::collect_names(graph, &mut names);
    // Below IR 4 every initializer is also a graph input, and a constant all the same.
    let inputs_are_constants = before.ir_version.unwrap_or(0) < 4;
    let merged = merge_in(graph, &opsets, opset, inputs_are_constants, &mut names);
    if merged == 0 {
        return 0;
    }
    // The merged nodes stand where the first Conv stood; the IR's stable sort puts them after
    // the weights they read. Never leave a graph out of order: on any failure keep the original.
    let sorted = onnx_ir::Model::from_proto(std::mem::take(model))
        .ok()
        .and_then(|mut ir| ir.graph.sort_topologically().ok().map(|_| ir.to_proto()));
    match sorted {
        Some(m) => {
            *model = m;
            merged
        }
        None => {
            *model = before;
            0
        }
    }
}

fn is_default_domain(n: &NodeProto) -> bool {
    matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx"))
}

fn has_subgraph(n: &NodeProto) -> bool {
    n.attribute
        .iter()
        .any(|a| a.g.is_some() || !a.graphs.is_empty())
}

/// A node's attributes, sorted by name and encoded: equal keys mean equal attributes.
fn attribute_key(n: &NodeProto) -> Vec<Vec<u8>> {
    let mut attrs: Vec<&AttributeProto> = n.attribute.iter().collect();
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    attrs.iter().map(|a| a.encode_to_vec()).collect()
}

/// What the pass knows of the main graph.
struct Facts<'a> {
    /// Initializers that are not graph inputs, by name.
    inits: BTreeMap<&'a str, usize>,
    /// The node that writes each name.
    producer: BTreeMap<&'a str, usize>,
    /// The first node that reads each name.
    reader: BTreeMap<&'a str, usize>,
    /// Reads of each name; a graph output or a name a subgraph reads counts twice.
    uses: BTreeMap<&'a str, usize>,
    /// Names that depend on no graph input.
    input_free: BTreeSet<&'a str>,
    /// Types inference finds (empty when it fails).
    types: BTreeMap<String, onnx_proto::TypeProto>,
}

impl<'a> Facts<'a> {
    fn of(
        g: &'a GraphProto,
        opsets: &onnx_schema::infer::OpsetImports,
        inputs_are_constants: bool,
    ) -> Facts<'a> {
        let graph_inputs: BTreeSet<&str> = g
            .input
            .iter()
            .filter_map(|v| v.name.as_deref())
            .filter(|_| !inputs_are_constants)
            .collect();
        let inits: BTreeMap<&str, usize> = g
            .initializer
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.name.as_deref().map(|n| (n, i)))
            .filter(|(n, _)| !graph_inputs.contains(n))
            .collect();
        let mut producer = BTreeMap::new();
        let mut input_free: BTreeSet<&str> = inits.keys().copied().collect();
        let mut reader = BTreeMap::new();
        for (k, n) in g.node.iter().enumerate() {
            for i in &n.input {
                reader.entry(i.as_str()).or_insert(k);
            }
            for o in &n.output {
                producer.insert(o.as_str(), k);
            }
            let pure = is_default_domain(n)
                && !has_subgraph(n)
                && !onnx_egraph::RANDOM_OPS.contains(&n.op_type.as_deref().unwrap_or(""));
            if pure
                && n.input
                    .iter()
                    .all(|i| i.is_empty() || input_free.contains(i.as_str()))
            {
                input_free.extend(n.output.iter().map(String::as_str));
            }
        }
        Facts {
            inits,
            producer,
            reader,
            uses: use_counts(g),
            input_free,
            types: onnx_schema::infer::infer_graph(g, opsets).unwrap_or_default(),
        }
    }

    fn single_use(&self, name: &str) -> bool {
        self.uses.get(name).copied() == Some(1)
    }

    /// The dims of an operand: an initializer's, else what inference or value_info knows
    /// fully.
    fn dims_of(&self, g: &GraphProto, name: &str) -> Option<Vec<i64>> {
        if let Some(&i) = self.inits.get(name) {
            return Some(g.initializer[i].dims.clone());
        }
        let ty = match self.types.get(name) {
            Some(t) => t,
            None => g
                .value_info
                .iter()
                .find(|v| v.name.as_deref() == Some(name))?
                .r#type
                .as_ref()?,
        };
        let onnx_proto::type_proto::Value::TensorType(t) = ty.value.as_ref()? else {
            return None;
        };
        t.shape
            .as_ref()?
            .dim
            .iter()
            .map(|d| match d.value {
                Some(onnx_proto::tensor_shape_proto::dimension::Value::DimValue(v)) => Some(v),
                _ => None,
            })
            .collect()
    }
}

/// One Conv of a group: its node, output channels, and the activation that alone reads it.
struct Member {
    conv: usize,
    channels: i64,
    activation: Option<usize>,
}

/// What makes Convs mergeable: input, attributes, weight dims past the first, bias present.
type ConvKey<'a> = (&'a str, Vec<Vec<u8>>, Vec<i64>, bool);

/// What makes activations mergeable: op type, attributes, further inputs.
type ActivationKey = Option<(String, Vec<Vec<u8>>, Vec<String>)>;

fn merge_in(
    g: &mut GraphProto,
    opsets: &onnx_schema::infer::OpsetImports,
    opset: i64,
    inputs_are_constants: bool,
    names: &mut BTreeSet<String>,
) -> usize {
    let facts = Facts::of(g, opsets, inputs_are_constants);
    // Weights may be shared (hash-consing merges equal ConstantOfShape fills): stacking never
    // removes a weight something else still reads.
    let constant = |name: &str| facts.input_free.contains(name);
    let mut groups: BTreeMap<(ConvKey, ActivationKey), Vec<Member>> = BTreeMap::new();
    for (k, n) in g.node.iter().enumerate() {
        if n.op_type.as_deref() != Some("Conv")
            || !is_default_domain(n)
            || !(2..=3).contains(&n.input.len())
            || n.output.len() != 1
            || n.input[0].is_empty()
            || n.input[1].is_empty()
        {
            continue;
        }
        let group = n
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("group"));
        if group.is_some_and(|a| a.i.unwrap_or(1) != 1) || !constant(&n.input[1]) {
            continue;
        }
        let bias = n.input.get(2).filter(|b| !b.is_empty());
        if bias.is_some_and(|b| !constant(b)) {
            continue;
        }
        let Some(dims) = facts.dims_of(g, &n.input[1]) else {
            continue;
        };
        if dims.len() < 3 || dims.iter().any(|&d| d <= 0) {
            continue;
        }
        if let Some(b) = bias {
            if facts.dims_of(g, b) != Some(vec![dims[0]]) {
                continue;
            }
        }
        let out = n.output[0].as_str();
        let activation = (facts.single_use(out))
            .then(|| facts.reader.get(out).copied())
            .flatten()
            .filter(|&a| {
                let c = &g.node[a];
                is_default_domain(c)
                    && ACTIVATIONS.contains(&c.op_type.as_deref().unwrap_or(""))
                    && c.input.first().map(String::as_str) == Some(out)
                    && c.output.len() == 1
            });
        let act_key = activation.map(|a| {
            let c = &g.node[a];
            (
                c.op_type.clone().unwrap_or_default(),
                attribute_key(c),
                c.input[1..].to_vec(),
            )
        });
        let key = (
            n.input[0].as_str(),
            attribute_key(n),
            dims[1..].to_vec(),
            bias.is_some(),
        );
        groups.entry((key, act_key)).or_default().push(Member {
            conv: k,
            channels: dims[0],
            activation,
        });
    }
    // A group pays when it removes nodes: n Convs and activations become three nodes, n bare
    // Convs two.
    let groups: Vec<Vec<Member>> = groups
        .into_iter()
        .filter(|((_, act), m)| m.len() >= if act.is_some() { 2 } else { 3 })
        .map(|(_, m)| m)
        .collect();
    if groups.is_empty() {
        return 0;
    }
    let mut removed_nodes = BTreeSet::new();
    let mut maybe_dead = BTreeSet::new();
    let mut placed: BTreeMap<usize, Vec<NodeProto>> = BTreeMap::new();
    let mut new_inits = Vec::new();
    let mut merged = 0;
    for group in &groups {
        let first = &g.node[group[0].conv];
        let base = first.output[0].clone();
        let mut nodes = Vec::new();
        let weights: Vec<&str> = group
            .iter()
            .map(|m| g.node[m.conv].input[1].as_str())
            .collect();
        let w = stack(
            g,
            &facts,
            &weights,
            &base,
            "weight",
            names,
            &mut nodes,
            &mut new_inits,
            &mut maybe_dead,
        );
        let mut inputs = vec![first.input[0].clone(), w];
        if first.input.get(2).is_some_and(|b| !b.is_empty()) {
            let biases: Vec<&str> = group
                .iter()
                .map(|m| g.node[m.conv].input[2].as_str())
                .collect();
            inputs.push(stack(
                g,
                &facts,
                &biases,
                &base,
                "bias",
                names,
                &mut nodes,
                &mut new_inits,
                &mut maybe_dead,
            ));
        }
        let mut y = fresh(names, &format!("{base}_merged"));
        nodes.push(NodeProto {
            input: inputs,
            output: vec![y.clone()],
            ..first.clone()
        });
        if let Some(a) = group[0].activation {
            let act = &g.node[a];
            let z = fresh(names, &format!("{}_merged", act.output[0]));
            let mut input = act.input.clone();
            input[0] = y;
            nodes.push(NodeProto {
                input,
                output: vec![z.clone()],
                ..act.clone()
            });
            y = z;
        }
        let outputs: Vec<String> = group
            .iter()
            .map(|m| g.node[m.activation.unwrap_or(m.conv)].output[0].clone())
            .collect();
        let sizes: Vec<i64> = group.iter().map(|m| m.channels).collect();
        let split = split_node(first, y, outputs, 1, sizes, opset, names, &mut new_inits);
        nodes.push(split);
        placed.insert(group[0].conv, nodes);
        for m in group {
            removed_nodes.insert(m.conv);
            removed_nodes.extend(m.activation);
        }
        merged += group.len() - 1;
    }
    // The weights' producers that only the merged nodes read go too.
    let mut reads_by_removed: BTreeMap<&str, usize> = BTreeMap::new();
    for &k in &removed_nodes {
        for i in &g.node[k].input {
            *reads_by_removed.entry(i.as_str()).or_default() += 1;
        }
    }
    let dead: Vec<usize> = maybe_dead
        .into_iter()
        .filter(|&k| {
            g.node[k].output.iter().all(|o| {
                facts.uses.get(o.as_str()).copied().unwrap_or(0)
                    == reads_by_removed.get(o.as_str()).copied().unwrap_or(0)
            })
        })
        .collect();
    let removed_nodes: BTreeSet<usize> = removed_nodes.into_iter().chain(dead).collect();
    // Values that no longer exist lose their value_info; initializers only removed nodes read go.
    let mut gone: BTreeSet<String> = BTreeSet::new();
    let mut orphans: BTreeSet<String> = BTreeSet::new();
    for &k in &removed_nodes {
        gone.extend(g.node[k].output.iter().cloned());
        orphans.extend(g.node[k].input.iter().cloned());
    }
    replace_nodes(g, placed, &removed_nodes);
    let mut still_read = BTreeSet::new();
    for n in &g.node {
        still_read.extend(n.input.iter().cloned());
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                crate::passes::inline::collect_names(sub, &mut still_read);
            }
        }
    }
    still_read.extend(g.output.iter().filter_map(|v| v.name.clone()));
    let produced: BTreeSet<&String> = g.node.iter().flat_map(|n| &n.output).collect();
    gone.retain(|name| !produced.contains(name));
    g.value_info
        .retain(|v| !v.name.as_ref().is_some_and(|n| gone.contains(n)));
    let graph_inputs: BTreeSet<String> = g.input.iter().filter_map(|v| v.name.clone()).collect();
    let mut dropped = BTreeSet::new();
    g.initializer.retain(|t| {
        let name = t.name.clone().unwrap_or_default();
        let keep = !orphans.contains(&name)
            || still_read.contains(&name)
            || (graph_inputs.contains(&name) && !inputs_are_constants);
        if !keep {
            dropped.insert(name);
        }
        keep
    });
    if inputs_are_constants {
        // The initializers listed as inputs go with them, and new ones are listed.
        g.input
            .retain(|v| !v.name.as_ref().is_some_and(|n| dropped.contains(n)));
        g.input.extend(new_inits.iter().map(input_of));
    }
    g.initializer.extend(new_inits);
    merged
}

/// The graph input that lists an initializer (below IR 4).
fn input_of(t: &TensorProto) -> onnx_proto::ValueInfoProto {
    use onnx_proto::tensor_shape_proto::{dimension, Dimension};
    onnx_proto::ValueInfoProto {
        name: t.name.clone(),
        r#type: Some(onnx_proto::TypeProto {
            value: Some(onnx_proto::type_proto::Value::TensorType(
                onnx_proto::type_proto::Tensor {
                    elem_type: t.data_type,
                    shape: Some(onnx_proto::TensorShapeProto {
                        dim: t
                            .dims
                            .iter()
                            .map(|&d| Dimension {
                                value: Some(dimension::Value::DimValue(d)),
                                ..Default::default()
                            })
                            .collect(),
                    }),
                },
            )),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn int64_tensor(name: &str, values: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![values.len() as i64],
        data_type: Some(tensor_proto::DataType::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// The name of `parts` stacked on axis 0: a new initializer (of initializers only their Conv
/// reads, which then go), a new ConstantOfShape, or a Concat node (pushed to `nodes`).
/// ConstantOfShape nodes the result replaces are added to `replaced` (removed if nothing else
/// reads them).
#[allow(clippy::too_many_arguments)]
fn stack(
    g: &GraphProto,
    facts: &Facts,
    parts: &[&str],
    base: &str,
    what: &str,
    names: &mut BTreeSet<String>,
    nodes: &mut Vec<NodeProto>,
    new_inits: &mut Vec<TensorProto>,
    replaced: &mut BTreeSet<usize>,
) -> String {
    let name = fresh(names, &format!("{base}_merged_{what}"));
    let dims: Vec<Vec<i64>> = parts
        .iter()
        .map(|p| facts.dims_of(g, p).unwrap_or_default())
        .collect();
    let mut stacked = dims[0].clone();
    stacked[0] = dims.iter().map(|d| d[0]).sum();
    // Initializers (in the file) only their Conv reads: their little-endian bytes appended.
    let raws: Option<Vec<(bytes::Bytes, &TensorProto)>> = parts
        .iter()
        .map(|p| {
            let t = &g.initializer[*facts.inits.get(p)?];
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
            new_inits.push(TensorProto {
                name: Some(name.clone()),
                dims: stacked,
                data_type,
                raw_data: Some(raw.into()),
                ..Default::default()
            });
            return name;
        }
    }
    // ConstantOfShape outputs of one fill value: one ConstantOfShape.
    let fills: Option<Vec<usize>> = parts
        .iter()
        .map(|p| {
            let &k = facts.producer.get(p)?;
            (g.node[k].op_type.as_deref() == Some("ConstantOfShape")
                && is_default_domain(&g.node[k]))
            .then_some(k)
        })
        .collect();
    if let Some(ks) = fills {
        let value = |k: usize| attribute_key(&g.node[k]);
        if ks.iter().all(|&k| value(k) == value(ks[0])) {
            let shape = fresh(names, &format!("{name}_shape"));
            new_inits.push(int64_tensor(&shape, &stacked));
            nodes.push(NodeProto {
                input: vec![shape],
                output: vec![name.clone()],
                name: Some(fresh(names, &format!("{name}_fill"))),
                ..g.node[ks[0]].clone()
            });
            replaced.extend(ks);
            return name;
        }
    }
    nodes.push(NodeProto {
        name: Some(fresh(names, &format!("{name}_concat"))),
        op_type: Some("Concat".into()),
        input: parts.iter().map(|p| p.to_string()).collect(),
        output: vec![name.clone()],
        attribute: vec![AttributeProto {
            name: Some("axis".into()),
            r#type: Some(attribute_proto::AttributeType::Int as i32),
            i: Some(0),
            ..Default::default()
        }],
        ..Default::default()
    });
    name
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
        model: &mut onnx_ir::Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let n =
            super::sibling_matmul::merge_siblings_on_proto(model, cx, "Conv", merge_sibling_convs)?;
        Ok(super::Changes::from([("merged_convs", n)]))
    }
}
