//! The check around nodes the interpreter cannot run (custom domains, contrib ops without a
//! kernel): each such node is a boundary. Both models are cut at their boundary nodes: the node
//! is removed, its outputs become graph inputs fed the same random values in both models, and
//! its inputs become extra graph outputs ("probes") compared across the models.
//!
//! The values fed to a boundary node's outputs are a function of the node's signature (domain,
//! op, attributes), the output's position and the trial, never of its name or place in the
//! graph: two nodes the optimizer could have merged get the same values, so a merge is never a
//! false difference. Probes are compared between nodes matched across the models by an output
//! name they share (the optimizer keeps value names), else by a signature that is unique in
//! both models; an unmatched node's inputs are not compared.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use onnx_proto::{GraphProto, Message, ModelProto, TypeProto, ValueInfoProto};
use onnx_ref::Value;

/// Why a model cannot be cut at its boundary nodes, or their outputs not fed.
#[derive(Debug, thiserror::Error)]
pub enum BoundaryError {
    /// The model has no main graph.
    #[error("the model has no graph")]
    NoGraph,
    /// Nothing gives the type of a boundary node's output.
    #[error(
        "the type of output '{output}' of {label} node '{node}' is unknown (declare it in \
         value_info)"
    )]
    UnknownType {
        /// The output's name.
        output: String,
        /// The node's `domain::op`.
        label: String,
        /// The node's name (may be empty).
        node: String,
    },
    /// No random value of a boundary output's type can be made.
    #[error("{label} output '{output}': {error}")]
    Feed {
        /// The node's `domain::op`.
        label: String,
        /// The output's name.
        output: String,
        /// Why (in the message, not repeated as a source).
        error: Box<onnx_ref::RefError>,
    },
}

/// A node's label (`domain::op`, the op alone in the default domain) and signature: a hash of
/// its domain, op, overload and attributes (in name order), never of its name or place.
pub(crate) fn signature(n: &onnx_proto::NodeProto) -> (String, u64) {
    let domain = n.domain.clone().unwrap_or_default();
    let op = n.op_type.clone().unwrap_or_default();
    let label = match domain.as_str() {
        "" | "ai.onnx" => op.clone(),
        d => format!("{d}::{op}"),
    };
    let mut attrs = n.attribute.clone();
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    let mut h = std::collections::hash_map::DefaultHasher::new();
    domain.hash(&mut h);
    op.hash(&mut h);
    n.overload.hash(&mut h);
    for a in &attrs {
        a.encode_to_vec().hash(&mut h);
    }
    (label, h.finish())
}

/// One boundary node of a model.
#[derive(Debug, Clone)]
pub(crate) struct Opaque {
    /// `domain::op` (the op alone in the default domain).
    pub label: String,
    signature: u64,
    /// Input names ("" for an absent optional input).
    inputs: Vec<String>,
    /// Output names with the types they are fed ("" for an output the node skips).
    outputs: Vec<(String, Option<TypeProto>)>,
}

/// A model cut at its boundary nodes.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    /// The model without its boundary nodes: their outputs are graph inputs, their inputs
    /// extra graph outputs (after the model's own outputs).
    pub model: ModelProto,
    /// The boundary nodes, in graph order.
    pub nodes: Vec<Opaque>,
    /// The model's own output count (the cut model's outputs past it are probes).
    pub own_outputs: usize,
}

/// Cuts `model` at the main-graph nodes `opaque` (indices into its nodes). Types of the cut
/// outputs come from the model's value_info and graph outputs, else shape inference, else the
/// node's first input (an op that maps a tensor to one like it, the usual plugin); a node none
/// of these types is an error that says so.
pub(crate) fn cut(
    model: &ModelProto,
    opaque: &[usize],
    fallback: &BTreeMap<String, TypeProto>,
) -> Result<Cut, BoundaryError> {
    let Some(graph) = model.graph.as_ref() else {
        return Err(BoundaryError::NoGraph);
    };
    let own_outputs = graph.output.len();
    if opaque.is_empty() {
        return Ok(Cut {
            model: model.clone(),
            nodes: Vec::new(),
            own_outputs,
        });
    }
    let types = known_types(model, graph);
    let drop: BTreeSet<usize> = opaque.iter().copied().collect();
    let mut nodes = Vec::new();
    for &i in opaque {
        let n = &graph.node[i];
        let (label, signature) = signature(n);
        let first_input = n
            .input
            .first()
            .filter(|s| !s.is_empty())
            .and_then(|s| types.get(s));
        let mut outputs = Vec::new();
        for o in &n.output {
            if o.is_empty() {
                outputs.push((String::new(), None));
                continue;
            }
            let ty = types
                .get(o)
                .or_else(|| fallback.get(o))
                .or(first_input)
                .cloned();
            if ty.is_none() {
                return Err(BoundaryError::UnknownType {
                    output: o.clone(),
                    label,
                    node: n.name.clone().unwrap_or_default(),
                });
            }
            outputs.push((o.clone(), ty));
        }
        nodes.push(Opaque {
            label,
            signature,
            inputs: n.input.clone(),
            outputs,
        });
    }
    let fed: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(|(o, _)| o.as_str()))
        .filter(|o| !o.is_empty())
        .collect();
    let graph_inputs: BTreeSet<&str> = graph
        .input
        .iter()
        .filter_map(|v| v.name.as_deref())
        .chain(graph.initializer.iter().filter_map(|t| t.name.as_deref()))
        .collect();
    let mut g: GraphProto = graph.clone();
    g.node = graph
        .node
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(i))
        .map(|(_, n)| n.clone())
        .collect();
    for n in &nodes {
        for (o, ty) in &n.outputs {
            if !o.is_empty() {
                g.input.push(ValueInfoProto {
                    name: Some(o.clone()),
                    r#type: ty.clone(),
                    ..Default::default()
                });
            }
        }
    }
    let mut outs: BTreeSet<String> = g.output.iter().filter_map(|v| v.name.clone()).collect();
    for n in &nodes {
        for i in &n.inputs {
            if i.is_empty() || fed.contains(i.as_str()) || graph_inputs.contains(i.as_str()) {
                continue;
            }
            if outs.insert(i.clone()) {
                g.output.push(ValueInfoProto {
                    name: Some(i.clone()),
                    ..Default::default()
                });
            }
        }
    }
    let mut m = model.clone();
    m.graph = Some(g);
    Ok(Cut {
        model: m,
        nodes,
        own_outputs,
    })
}

/// The types the model declares or inference finds, by value name.
pub(crate) fn known_types(model: &ModelProto, graph: &GraphProto) -> BTreeMap<String, TypeProto> {
    let opsets = onnx_schema::infer::opset_imports(&model.opset_import);
    let mut types = onnx_schema::infer_graph(graph, &opsets).unwrap_or_default();
    // What the model declares wins over inference.
    for vi in graph
        .value_info
        .iter()
        .chain(&graph.output)
        .chain(&graph.input)
    {
        if let (Some(n), Some(t)) = (&vi.name, &vi.r#type) {
            if t.value.is_some() {
                types.insert(n.clone(), t.clone());
            }
        }
    }
    types
}

impl Cut {
    /// The boundary outputs, fed by [`Cut::feed`].
    pub(crate) fn fed_names(&self) -> BTreeSet<String> {
        self.nodes
            .iter()
            .flat_map(|n| n.outputs.iter().map(|(o, _)| o.clone()))
            .filter(|o| !o.is_empty())
            .collect()
    }

    /// `domain::op` of each boundary node, with counts: "2 trt::Plugin, 1 com.x::Y".
    pub(crate) fn summary(&self) -> Vec<String> {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for n in &self.nodes {
            *count.entry(n.label.as_str()).or_default() += 1;
        }
        count
            .into_iter()
            .map(|(l, c)| match c {
                1 => l.to_string(),
                c => format!("{c} x {l}"),
            })
            .collect()
    }

    /// The values fed to the boundary outputs on one trial.
    pub(crate) fn feed(
        &self,
        trial_seed: u64,
        dims: &BTreeMap<String, i64>,
    ) -> Result<Vec<(String, Value)>, BoundaryError> {
        let mut out = Vec::new();
        for n in &self.nodes {
            for (j, (name, ty)) in n.outputs.iter().enumerate() {
                if name.is_empty() {
                    continue;
                }
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (trial_seed, n.signature, j).hash(&mut h);
                let probe = ModelProto {
                    graph: Some(GraphProto {
                        input: vec![ValueInfoProto {
                            name: Some(name.clone()),
                            r#type: ty.clone(),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                let v = onnx_ref::random_inputs(&probe, h.finish(), dims).map_err(|e| {
                    BoundaryError::Feed {
                        label: n.label.clone(),
                        output: name.clone(),
                        error: Box::new(e),
                    }
                })?;
                out.extend(v);
            }
        }
        Ok(out)
    }

    /// Pairs of probe names (this model's, `other`'s) to compare: the inputs of boundary
    /// nodes matched across the models.
    pub(crate) fn probe_pairs(&self, other: &Cut) -> Vec<(String, String)> {
        let unique = |c: &Cut, sig: u64| c.nodes.iter().filter(|n| n.signature == sig).count() == 1;
        let mut pairs = Vec::new();
        for a in &self.nodes {
            let by_name = other.nodes.iter().find(|b| {
                b.signature == a.signature
                    && a.outputs
                        .iter()
                        .any(|(o, _)| !o.is_empty() && b.outputs.iter().any(|(p, _)| p == o))
            });
            let matched = by_name.or_else(|| {
                (unique(self, a.signature) && unique(other, a.signature))
                    .then(|| other.nodes.iter().find(|b| b.signature == a.signature))
                    .flatten()
            });
            let Some(b) = matched else { continue };
            for (x, y) in a.inputs.iter().zip(&b.inputs) {
                if !x.is_empty() && !y.is_empty() {
                    pairs.push((x.clone(), y.clone()));
                }
            }
        }
        pairs.sort();
        pairs.dedup();
        pairs
    }
}
