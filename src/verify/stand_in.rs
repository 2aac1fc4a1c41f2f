//! The check around nodes the interpreter cannot run inside subgraphs (a custom-domain op in
//! an If branch or a Loop body). A main-graph boundary node is cut out (`boundary.rs`); a node
//! in a subgraph cannot be, as its values live in the subgraph's scope (once per iteration in a
//! Loop). Such a node is stood in for, in both models alike, by standard ops: each output is a
//! seeded random tensor (a function of the node's signature, domain, op and attributes, and of
//! the output's position, never of its name or place), its declared shape where the subgraph
//! declares it fully, else its first input's, plus the sum of the means of its inputs. The
//! outputs so depend on every input: a change the optimizer made to what the node reads shows
//! in what follows it, and so in the models' outputs, as a probe shows it in the main graph.
//!
//! Only when both models hold the same stood-in nodes (the same signatures, as many times):
//! where the optimizer moved one between a subgraph and the main graph, or merged two, the
//! stand-ins would differ where the models do not, and the check stays unrun as before.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use onnx_proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, type_proto, AttributeProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto,
};

/// A stood-in node's label (`domain::op`) and signature.
type Stood = (String, u64);

/// `model` with every opaque subgraph node stood in for, and those nodes (label, signature);
/// `None` when it has none.
fn stand_in(model: &ModelProto) -> Option<(ModelProto, Vec<Stood>)> {
    let paths = onnx_ref::opaque_subgraph_nodes(model);
    if paths.is_empty() {
        return None;
    }
    let mut out = model.clone();
    let mut stood = Vec::new();
    let mut fresh = 0usize;
    for path in &paths {
        let graph = out.graph.as_mut()?;
        let (g, i) = locate(graph, path)?;
        let node = g.node[i].clone();
        let declared: BTreeMap<&str, &onnx_proto::TypeProto> = g
            .value_info
            .iter()
            .chain(&g.output)
            .filter_map(|v| Some((v.name.as_deref()?, v.r#type.as_ref()?)))
            .collect();
        let (label, signature) = super::boundary::signature(&node);
        let nodes = replacement(&node, signature, &declared, &mut fresh);
        g.node.splice(i..=i, nodes);
        stood.push((label, signature));
    }
    // The standard ops the stand-ins use.
    let has_default = out
        .opset_import
        .iter()
        .any(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")));
    if !has_default {
        out.opset_import.push(OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        });
    }
    Some((out, stood))
}

/// Both models with their opaque subgraph nodes stood in for, and a summary line per kind;
/// `None` when neither has any, or they do not hold the same ones.
pub(crate) fn both(
    a: &ModelProto,
    b: &ModelProto,
) -> Option<(ModelProto, ModelProto, Vec<String>)> {
    let (a2, mut sa) = stand_in(a)?;
    let (b2, mut sb) = stand_in(b)?;
    let key = |s: &Vec<Stood>| {
        let mut k: Vec<u64> = s.iter().map(|x| x.1).collect();
        k.sort_unstable();
        k
    };
    if key(&sa) != key(&sb) {
        return None;
    }
    sb.clear();
    sa.sort();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for (l, _) in &sa {
        *count.entry(l.as_str()).or_default() += 1;
    }
    let lines = count
        .into_iter()
        .map(|(l, c)| match c {
            1 => format!("{l} (in a subgraph, stood in)"),
            c => format!("{c} x {l} (in a subgraph, stood in)"),
        })
        .collect();
    Some((a2, b2, lines))
}

/// The subgraph holding the node at `path`, and the node's index there.
fn locate<'a>(
    graph: &'a mut GraphProto,
    path: &[(usize, String)],
) -> Option<(&'a mut GraphProto, usize)> {
    let ((last, _), steps) = path.split_last()?;
    let mut g = graph;
    for (i, attr) in steps {
        let (name, k) = match attr.split_once('#') {
            Some((n, k)) => (n, Some(k.parse::<usize>().ok()?)),
            None => (attr.as_str(), None),
        };
        let a = g
            .node
            .get_mut(*i)?
            .attribute
            .iter_mut()
            .find(|a| a.name.as_deref() == Some(name))?;
        g = match k {
            None => a.g.as_mut()?,
            Some(k) => a.graphs.get_mut(k)?,
        };
    }
    (*last < g.node.len()).then_some((g, *last))
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn attr_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

fn attr_ints(name: &str, v: Vec<i64>) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v,
        ..Default::default()
    }
}

fn op(op: &str, inputs: Vec<String>, output: String, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs,
        output: vec![output],
        attribute,
        ..Default::default()
    }
}

/// The standard nodes that stand in for `node`: per output, a seeded RandomUniform (the
/// declared static shape) or RandomUniformLike (the first input's), plus the sum of the
/// inputs' means, cast to the declared element type.
fn replacement(
    node: &NodeProto,
    signature: u64,
    declared: &BTreeMap<&str, &onnx_proto::TypeProto>,
    fresh: &mut usize,
) -> Vec<NodeProto> {
    let mut name = |what: &str| {
        *fresh += 1;
        format!("onnx_opt_stand_in_{}_{what}", *fresh)
    };
    let mut nodes = Vec::new();
    // The sum of the inputs' means (a scalar), or none.
    let mut sum: Option<String> = None;
    for x in node.input.iter().filter(|x| !x.is_empty()) {
        let cast = name("cast");
        nodes.push(op(
            "Cast",
            vec![x.clone()],
            cast.clone(),
            vec![attr_int("to", DataType::Float as i64)],
        ));
        let mean = name("mean");
        nodes.push(op(
            "ReduceMean",
            vec![cast],
            mean.clone(),
            vec![attr_int("keepdims", 0)],
        ));
        sum = Some(match sum {
            None => mean,
            Some(s) => {
                let add = name("sum");
                nodes.push(op("Add", vec![s, mean], add.clone(), vec![]));
                add
            }
        });
    }
    let first = node.input.iter().find(|x| !x.is_empty()).cloned();
    for (j, o) in node.output.iter().enumerate() {
        if o.is_empty() {
            continue;
        }
        let tensor = declared.get(o.as_str()).and_then(|t| match &t.value {
            Some(type_proto::Value::TensorType(tt)) => Some(tt),
            _ => None,
        });
        let elem = tensor
            .and_then(|t| t.elem_type)
            .filter(|&e| e != 0)
            .unwrap_or(DataType::Float as i32);
        let shape: Option<Vec<i64>> = tensor.and_then(|t| t.shape.as_ref()).and_then(|s| {
            s.dim
                .iter()
                .map(|d| match d.value {
                    Some(onnx_proto::tensor_shape_proto::dimension::Value::DimValue(v))
                        if v >= 0 =>
                    {
                        Some(v)
                    }
                    _ => None,
                })
                .collect()
        });
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (signature, j).hash(&mut h);
        let seed = (h.finish() % 1_000_000) as f32;
        let random = name("random");
        match (shape, &first) {
            (Some(shape), _) => nodes.push(op(
                "RandomUniform",
                vec![],
                random.clone(),
                vec![
                    attr_float("seed", seed),
                    attr_int("dtype", DataType::Float as i64),
                    attr_ints("shape", shape),
                ],
            )),
            (None, Some(x)) => nodes.push(op(
                "RandomUniformLike",
                vec![x.clone()],
                random.clone(),
                vec![
                    attr_float("seed", seed),
                    attr_int("dtype", DataType::Float as i64),
                ],
            )),
            // No shape to give it: a scalar.
            (None, None) => nodes.push(op(
                "RandomUniform",
                vec![],
                random.clone(),
                vec![
                    attr_float("seed", seed),
                    attr_int("dtype", DataType::Float as i64),
                    attr_ints("shape", vec![]),
                ],
            )),
        }
        let value = match &sum {
            Some(s) => {
                let add = name("value");
                nodes.push(op("Add", vec![random, s.clone()], add.clone(), vec![]));
                add
            }
            None => random,
        };
        nodes.push(op(
            "Cast",
            vec![value],
            o.clone(),
            vec![attr_int("to", elem as i64)],
        ));
    }
    nodes
}
