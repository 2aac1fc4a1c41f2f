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
//!
//! This is a pass, not a rule: the e-graph holds the values of one graph, and a branch is an
//! attribute of its If; the splice moves the branch's nodes, initializers and names into the
//! enclosing graph, which no rewrite of one value into an equal value can do.
//!
//! The splice edits the IR; a model it changed is brought to normal form (`normal_form.rs`), the
//! arenas a fresh import of its protobuf would give, so what runs after sees what it saw when
//! this pass ran on the protobuf.

use std::collections::{BTreeMap, BTreeSet};

use onnx_ir::onnx_proto::{attribute_proto, tensor_proto, TensorProto};
use onnx_ir::{AttributeValue, Graph, InfoList, InfoOverride, Model, Name, Node, NodeId, ValueId};

use super::names::{collect_names, value_name};

/// Splices the taken branch of every If with a constant condition, in every graph of the main
/// graph. Returns how many If nodes went; a model that changed is left in normal form.
pub(crate) fn splice_constant_ifs(model: &mut Model) -> usize {
    let mut names = BTreeSet::new();
    collect_names(&model.graph, &mut names);
    let n = splice_in(&mut model.graph, &mut names);
    if n > 0 {
        super::normal_form::normalize(model);
    }
    n
}

fn splice_in(g: &mut Graph, names: &mut BTreeSet<Name>) -> usize {
    let mut count = 0;
    // Subgraphs first: a spliced inner If may leave an outer branch simpler.
    for k in 0..g.order.len() {
        let Some(n) = g.nodes.get_mut(g.order[k].index()) else {
            continue;
        };
        for a in n.attributes.iter_mut() {
            for sub in a.value.subgraphs_mut() {
                count += splice_in(sub, names);
            }
        }
    }
    loop {
        let consts = constants(g);
        let Some((at, branch)) = g
            .nodes_in_order()
            .enumerate()
            .find_map(|(at, (_, n))| Some((at, taken_branch(g, n, &consts)?)))
        else {
            return count;
        };
        splice(g, at, branch, names);
        count += 1;
    }
}

/// One-element bool tensors defined in `g` by an initializer or a `Constant` node's `value`.
fn constants(g: &Graph) -> BTreeMap<Name, bool> {
    let mut out = BTreeMap::new();
    for &id in &g.initializers {
        let Some(v) = g.get_value(id) else { continue };
        if let (false, Some(b)) = (
            v.name.is_empty(),
            v.initializer.as_ref().and_then(bool_scalar),
        ) {
            out.insert(v.name.clone(), b);
        }
    }
    // An initializer that is also a graph input can be overridden: not a constant.
    for &id in &g.inputs {
        out.remove(&value_name(g, id));
    }
    for (_, n) in g.nodes_in_order() {
        if n.op_type != "Constant" || !n.is_onnx_domain() || n.outputs.len() != 1 {
            continue;
        }
        let value = n.attributes.iter().find_map(|a| {
            let fields = a.fields()?;
            (&*a.name == "value"
                && fields.r#type == Some(attribute_proto::AttributeType::Tensor as i32))
            .then_some(fields)
        });
        let Some(b) = value.and_then(|a| a.t.as_ref()).and_then(bool_scalar) else {
            continue;
        };
        if let Some(id) = n.outputs[0] {
            out.insert(value_name(g, id), b);
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

/// The attribute holding the branch an If with a constant condition takes, when it can be
/// spliced.
fn taken_branch(g: &Graph, n: &Node, consts: &BTreeMap<Name, bool>) -> Option<usize> {
    if n.op_type != "If" || !n.is_onnx_domain() {
        return None;
    }
    let cond = *consts.get(&value_name(g, (*n.inputs.first()?)?))?;
    let key = if cond { "then_branch" } else { "else_branch" };
    let at = n.attributes.iter().position(|a| &*a.name == key)?;
    let AttributeValue::Graph(branch) = &n.attributes[at].value else {
        return None;
    };
    (branch.outputs.len() == n.outputs.len()
        && branch.sparse_initializers.is_empty()
        && branch.quantization_annotation.is_empty()
        && branch.metadata_props.is_empty()
        && !has_unseeded_random(branch))
    .then_some(at)
}

/// Whether a graph (or a subgraph in it) holds a random op without a seed: its stream is keyed
/// by its output's name, which splicing may change, so the check could not compare. Dropout
/// draws nothing at inference.
fn has_unseeded_random(g: &Graph) -> bool {
    g.nodes_in_order().any(|(_, n)| {
        let op = n.op_type.as_str();
        let random = n.is_onnx_domain()
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
        let seeded = n.attribute("seed").is_some();
        (random && !seeded) || n.subgraphs().any(has_unseeded_random)
    })
}

/// Replaces the If at position `at` of `g`'s order by the branch its attribute `branch` holds:
/// the branch's nodes (then an Identity per If output), initializers and value_info, every name
/// the branch defines renamed to a fresh one (recorded in `names`). Reads of names the branch
/// does not define keep their names; normal form resolves them in `g`.
fn splice(g: &mut Graph, at: usize, branch: usize, names: &mut BTreeSet<Name>) {
    let if_id = g.order[at];
    let if_node = g.node_mut(if_id);
    let AttributeValue::Graph(b) = std::mem::take(&mut if_node.attributes[branch].value) else {
        return;
    };
    let mut b = *b;
    let if_name = if_node.name.clone();
    let if_outputs = if_node.outputs.clone();
    rename_apart(&mut b, names);
    let mut mover = Mover {
        moved: vec![None; b.values.len()],
        values: std::mem::take(&mut b.values),
    };
    let mut spliced: Vec<NodeId> = Vec::new();
    let order = std::mem::take(&mut b.order);
    for id in order {
        let Some(node) = b.nodes.get_mut(id.index()) else {
            continue;
        };
        let mut node = std::mem::take(node);
        for slot in node.inputs.iter_mut().chain(node.outputs.iter_mut()) {
            *slot = slot.map(|v| mover.move_to(g, v));
        }
        spliced.push(g.add_node_unordered(node));
    }
    let if_label = if_name.as_deref().unwrap_or("If").to_string();
    for (&out, if_out) in b.outputs.iter().zip(if_outputs) {
        let Some(if_out) = if_out.filter(|&v| !value_name(g, v).is_empty()) else {
            continue;
        };
        let input = mover.move_to(g, out);
        let mut identity = Node::new("Identity", vec![Some(input)], vec![Some(if_out)]);
        identity.name = Some(Name::from(format!("{if_label}/{}", value_name(g, if_out))));
        spliced.push(g.add_node_unordered(identity));
    }
    for &id in &b.initializers {
        let v = mover.move_to(g, id);
        g.initializers.push(v);
    }
    let first_info = g.value_info.len();
    for (i, &id) in b.value_info.iter().enumerate() {
        let v = mover.move_to(g, id);
        g.value_info.push(v);
        if let Some(o) = b.info_overrides.get(&(InfoList::ValueInfo, i)) {
            if o.value == id {
                let proto = o.proto.clone();
                let slot = (InfoList::ValueInfo, first_info + i);
                g.info_overrides
                    .insert(slot, InfoOverride { value: v, proto });
            }
        }
    }
    g.order.splice(at..=at, spliced);
}

/// The branch's values, moved into the enclosing graph as they are first met.
struct Mover {
    values: Vec<onnx_ir::Value>,
    moved: Vec<Option<ValueId>>,
}

impl Mover {
    /// The value in `g` that the branch's value `id` became.
    fn move_to(&mut self, g: &mut Graph, id: ValueId) -> ValueId {
        if let Some(Some(v)) = self.moved.get(id.index()) {
            return *v;
        }
        let Some(value) = self.values.get_mut(id.index()) else {
            let name = format!("<invalid value {}>", id.0);
            return g.add_value(onnx_ir::Value::new(name));
        };
        let mut value = std::mem::take(value);
        value.producer = None;
        value.is_outer = false;
        let v = g.add_value(value);
        self.moved[id.index()] = Some(v);
        v
    }
}

/// Renames every name the branch defines (initializers, node outputs) to a fresh one (recorded
/// in `names`), in the branch and the subgraphs below it, which may read it.
fn rename_apart(b: &mut Graph, names: &mut BTreeSet<Name>) {
    let mut defined: Vec<Name> = b.initializers.iter().map(|&id| value_name(b, id)).collect();
    for (_, n) in b.nodes_in_order() {
        defined.extend(n.outputs.iter().flatten().map(|&id| value_name(b, id)));
    }
    let mut map = BTreeMap::new();
    for d in defined.into_iter().filter(|d| !d.is_empty()) {
        // Every name the branch defines is already in `names` (collected over the whole model,
        // branches included); only those that would clash in the enclosing graph must change,
        // but renaming all is simpler and as correct.
        let mut k = 1;
        let fresh = loop {
            let f = format!("{d}_if{k}");
            if !names.contains(f.as_str()) {
                break Name::from(f);
            }
            k += 1;
        };
        names.insert(fresh.clone());
        map.insert(d, fresh);
    }
    rename_graph(b, &map, true);
}

/// Renames, in `g` and every subgraph below it, each value whose name is in `map` (a subgraph's
/// own inputs keep theirs: they are not the branch's names).
fn rename_graph(g: &mut Graph, map: &BTreeMap<Name, Name>, top: bool) {
    let inputs: BTreeSet<ValueId> = match top {
        true => BTreeSet::new(),
        false => g.inputs.iter().copied().collect(),
    };
    for (k, v) in g.values.iter_mut().enumerate() {
        if let Some(new) = map.get(&v.name) {
            if !inputs.contains(&ValueId(k as u32)) {
                v.name = new.clone();
            }
        }
    }
    for n in g.nodes.iter_mut() {
        for a in n.attributes.iter_mut() {
            for sub in a.value.subgraphs_mut() {
                rename_graph(sub, map, false);
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
        model: &mut Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let (mut spliced, mut fired) = (0, 0);
        for _ in 0..4 {
            if !has_if(&model.graph) {
                break;
            }
            let n = splice_constant_ifs(model);
            if n == 0 {
                break;
            }
            spliced += n;
            let phases = cx.phases;
            let (out, n) = cx.saturate(model, phases)?;
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
fn has_if(g: &Graph) -> bool {
    g.nodes_in_order()
        .any(|(_, n)| n.op_type.as_str() == "If" || n.subgraphs().any(has_if))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Model {
        Model::from_proto(onnx_text::parse_model(text).expect("test model parses"))
            .expect("imports")
    }

    fn ops(m: &Model) -> Vec<String> {
        m.graph
            .nodes_in_order()
            .map(|(_, n)| n.op_type.to_string())
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
        let p = m.to_proto();
        let g = p.graph.as_ref().unwrap();
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
    fn a_spliced_model_is_what_a_fresh_import_gives() {
        let mut m = parse(FALSE_COND);
        assert_eq!(splice_constant_ifs(&mut m), 1);
        let fresh = Model::from_proto(m.to_proto()).expect("imports");
        assert_eq!(m, fresh);
    }

    #[test]
    fn a_condition_of_more_than_one_element_is_left_alone() {
        let text = FALSE_COND.replace("<bool c = {0}>", "<bool[2] c = {0, 0}>");
        let mut m = parse(&text);
        assert_eq!(splice_constant_ifs(&mut m), 0);
    }
}
