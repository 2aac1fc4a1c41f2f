//! If nodes whose condition is a constant: the branch taken is spliced into the graph that holds
//! the If (onnxoptimizer's `eliminate_if_with_const_cond`, and more: the optimizer runs this on
//! its own output too, where folding has made a condition constant that was not in the input).
//!
//! The branch's nodes, initializers and value_info move into the enclosing graph, with every name
//! the branch defines that the model already uses renamed apart (in the branch and in the
//! subgraphs below it, which may read it). Each If output becomes an Identity of the branch
//! output it stands for, so the values keep their names and types; the optimizer removes the
//! Identity nodes. An If is left alone when its branch holds sparse initializers, when its
//! output count differs from the branch's, when the branch carries quantization annotations or
//! metadata (they have no place in the enclosing graph), when it holds a random op without a seed
//! (its stream is keyed by a name splicing may change), or when the condition is not a one-element bool
//! tensor defined in the same graph (an initializer or a `Constant` with a `value` tensor).

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{attribute_proto, tensor_proto, GraphProto, ModelProto, NodeProto, TensorProto};

/// Splices the taken branch of every If with a constant condition, in every graph of `model`.
/// Returns how many If nodes went.
pub fn splice_constant_ifs(model: &mut ModelProto) -> usize {
    let Some(graph) = model.graph.as_mut() else {
        return 0;
    };
    let mut names = BTreeSet::new();
    crate::passes::inline::collect_names(graph, &mut names);
    splice_in(graph, &mut names)
}

fn splice_in(g: &mut GraphProto, names: &mut BTreeSet<String>) -> usize {
    let mut count = 0;
    // Subgraphs first: a spliced inner If may leave an outer branch simpler.
    for n in g.node.iter_mut() {
        for a in n.attribute.iter_mut() {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                count += splice_in(sub, names);
            }
        }
    }
    loop {
        let consts = constants(g);
        let Some((at, branch)) = g.node.iter().enumerate().find_map(|(i, n)| {
            let b = taken_branch(n, &consts)?;
            Some((i, b))
        }) else {
            return count;
        };
        let node = g.node.remove(at);
        let (nodes, inits, infos) = rename_apart(branch, &node, names);
        let tail = g.node.split_off(at);
        g.node.extend(nodes);
        g.node.extend(tail);
        g.initializer.extend(inits);
        g.value_info.extend(infos);
        count += 1;
    }
}

/// One-element bool tensors defined in `g` by an initializer or a `Constant` node's `value`.
fn constants(g: &GraphProto) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for t in &g.initializer {
        if let (Some(name), Some(b)) = (&t.name, bool_scalar(t)) {
            out.insert(name.clone(), b);
        }
    }
    // An initializer that is also a graph input can be overridden: not a constant.
    for i in &g.input {
        if let Some(name) = &i.name {
            out.remove(name);
        }
    }
    for n in &g.node {
        let is_constant = n.op_type.as_deref() == Some("Constant")
            && matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx"));
        if !is_constant || n.output.len() != 1 {
            continue;
        }
        let value = n.attribute.iter().find(|a| {
            a.name.as_deref() == Some("value")
                && a.r#type == Some(attribute_proto::AttributeType::Tensor as i32)
        });
        if let Some(b) = value.and_then(|a| a.t.as_ref()).and_then(bool_scalar) {
            out.insert(n.output[0].clone(), b);
        }
    }
    out
}

fn bool_scalar(t: &TensorProto) -> Option<bool> {
    if t.data_type != Some(tensor_proto::DataType::Bool as i32)
        || t.dims.iter().product::<i64>() != 1
        || t.data_location == Some(tensor_proto::DataLocation::External as i32)
    {
        return None;
    }
    match (&t.raw_data, t.int32_data.as_slice()) {
        (Some(raw), _) if raw.len() == 1 => Some(raw[0] != 0),
        (None, [v]) => Some(*v != 0),
        _ => None,
    }
}

/// The branch an If with a constant condition takes (cloned), when it can be spliced.
fn taken_branch(n: &NodeProto, consts: &BTreeMap<String, bool>) -> Option<GraphProto> {
    if n.op_type.as_deref() != Some("If")
        || !matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx"))
    {
        return None;
    }
    let cond = *consts.get(n.input.first()?)?;
    let key = if cond { "then_branch" } else { "else_branch" };
    let branch = n
        .attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(key))?
        .g
        .clone()?;
    (branch.output.len() == n.output.len()
        && branch.sparse_initializer.is_empty()
        && branch.quantization_annotation.is_empty()
        && branch.metadata_props.is_empty()
        && !has_unseeded_random(&branch))
    .then_some(branch)
}

/// Whether a graph (or a subgraph in it) holds a random op without a seed: its stream is keyed
/// by its output's name, which splicing may change, so the check could not compare. Dropout
/// draws nothing at inference.
fn has_unseeded_random(g: &GraphProto) -> bool {
    g.node.iter().any(|n| {
        let op = n.op_type.as_deref().unwrap_or("");
        let default_domain = matches!(n.domain.as_deref(), None | Some("") | Some("ai.onnx"));
        let random = default_domain
            && op != "Dropout"
            && onnx_schema::registry().versions("", op).iter().any(|s| {
                // If, Loop and Scan are marked so for their bodies, which are read below.
                let has_body = s.attributes.iter().any(|a| {
                    matches!(
                        a.ty,
                        attribute_proto::AttributeType::Graph
                            | attribute_proto::AttributeType::Graphs
                    )
                });
                s.node_determinism == onnx_schema::NodeDeterminism::NonDeterministic && !has_body
            });
        let seeded = n
            .attribute
            .iter()
            .any(|a| a.name.as_deref() == Some("seed"));
        (random && !seeded)
            || n.attribute.iter().any(|a| {
                a.g.as_ref().is_some_and(has_unseeded_random)
                    || a.graphs.iter().any(has_unseeded_random)
            })
    })
}

/// The branch's nodes (with an Identity per If output), initializers and value_info, every name
/// it defines that `names` holds renamed to a fresh one (recorded in `names`).
fn rename_apart(
    mut b: GraphProto,
    node: &NodeProto,
    names: &mut BTreeSet<String>,
) -> (
    Vec<NodeProto>,
    Vec<TensorProto>,
    Vec<onnx_proto::ValueInfoProto>,
) {
    let mut defined: Vec<String> = b
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    defined.extend(b.node.iter().flat_map(|n| n.output.iter().cloned()));
    let mut map = BTreeMap::new();
    for d in defined.into_iter().filter(|d| !d.is_empty()) {
        // Every name the branch defines is already in `names` (collected over the whole model,
        // branches included); only those that would clash in the enclosing graph must change,
        // but renaming all is simpler and as correct.
        let mut k = 1;
        let fresh = loop {
            let f = format!("{d}_if{k}");
            if !names.contains(&f) {
                break f;
            }
            k += 1;
        };
        names.insert(fresh.clone());
        map.insert(d, fresh);
    }
    rename_graph(&mut b, &map);
    let mut nodes = b.node;
    for (out, if_out) in b.output.iter().zip(&node.output) {
        if if_out.is_empty() {
            continue;
        }
        let name = node.name.as_deref().unwrap_or("If");
        nodes.push(NodeProto {
            input: vec![out.name.clone().unwrap_or_default()],
            output: vec![if_out.clone()],
            name: Some(format!("{name}/{if_out}")),
            op_type: Some("Identity".into()),
            ..Default::default()
        });
    }
    (nodes, b.initializer, b.value_info)
}

/// Renames, in `g` and every subgraph below it, each use and definition of a name in `map`.
fn rename_graph(g: &mut GraphProto, map: &BTreeMap<String, String>) {
    let re = |s: &mut String| {
        if let Some(n) = map.get(s.as_str()) {
            *s = n.clone();
        }
    };
    for t in g.initializer.iter_mut() {
        if let Some(name) = t.name.as_mut() {
            re(name);
        }
    }
    for v in g.output.iter_mut().chain(g.value_info.iter_mut()) {
        if let Some(name) = v.name.as_mut() {
            re(name);
        }
    }
    for n in g.node.iter_mut() {
        n.input.iter_mut().for_each(re);
        n.output.iter_mut().for_each(re);
        for a in n.attribute.iter_mut() {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                rename_graph(sub, map);
            }
        }
    }
}

/// `splice-constant-ifs`: each If whose condition folded to a constant becomes the branch it
/// takes, and the model is saturated again with every phase (at most four rounds; each removes
/// at least one If).
pub(crate) struct SpliceConstantIfs;

impl super::Pass for SpliceConstantIfs {
    fn name(&self) -> &'static str {
        "splice-constant-ifs"
    }

    fn about(&self) -> &'static str {
        "an If with a constant condition replaced by its branch, then the phases again"
    }

    fn run(
        &self,
        model: &mut onnx_ir::Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let (mut spliced, mut fired) = (0, 0);
        for _ in 0..4 {
            if !has_if(&model.graph) {
                break;
            }
            let mut p = model.to_proto();
            let n = splice_constant_ifs(&mut p);
            if n == 0 {
                break;
            }
            spliced += n;
            let m = cx.to_ir(p)?;
            let phases = cx.phases;
            let (out, n) = cx.saturate(&m, phases)?;
            *model = out;
            fired += n;
        }
        Ok(super::Changes::from([
            ("spliced_ifs", spliced),
            ("rule_firings", fired),
        ]))
    }
}

/// Whether a graph or one of its subgraphs has an If node.
fn has_if(g: &onnx_ir::Graph) -> bool {
    g.nodes_in_order()
        .any(|(_, n)| n.op_type.as_str() == "If" || n.subgraphs().any(has_if))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ModelProto {
        onnx_text::parse_model(text).expect("test model parses")
    }

    fn ops(m: &ModelProto) -> Vec<String> {
        m.graph
            .as_ref()
            .unwrap()
            .node
            .iter()
            .map(|n| n.op_type.clone().unwrap_or_default())
            .collect()
    }

    const FALSE_COND: &str = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) <bool c = {0}> {
  y = If (c) <then_branch = t () => (float[2] a) { a = Abs(x) },
              else_branch = e () => (float[2] b) { b = Neg(x) }>
}"#;

    #[test]
    fn a_false_initializer_takes_the_else_branch() {
        let mut m = parse(FALSE_COND);
        assert_eq!(splice_constant_ifs(&mut m), 1);
        assert_eq!(ops(&m), ["Neg", "Identity"]);
        let g = m.graph.as_ref().unwrap();
        assert_eq!(g.node[1].output, ["y"]);
        assert_eq!(g.node[0].output, g.node[1].input);
    }

    #[test]
    fn an_initializer_that_is_also_an_input_is_not_a_constant() {
        let text = FALSE_COND.replace("(float[2] x)", "(float[2] x, bool c)");
        let mut m = parse(&text);
        assert_eq!(splice_constant_ifs(&mut m), 0);
        assert_eq!(ops(&m), ["If"]);
    }

    #[test]
    fn a_condition_of_more_than_one_element_is_left_alone() {
        let text = FALSE_COND.replace("<bool c = {0}>", "<bool[2] c = {0, 0}>");
        let mut m = parse(&text);
        assert_eq!(splice_constant_ifs(&mut m), 0);
    }
}
