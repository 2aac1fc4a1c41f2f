//! Op coverage of a fuzzing campaign: which default-domain operators appeared in the models
//! that ran (subgraphs and model-local function bodies included), with how many distinct
//! attribute settings, and how much control flow and how many functions the models held.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{AttributeProto, GraphProto, ModelProto, NodeProto};

/// Every operator of the default domain the schemas know (any version), sorted.
pub fn default_domain_ops() -> Vec<String> {
    let mut ops: Vec<String> = onnx_schema::registry()
        .op_types("")
        .map(str::to_string)
        .collect();
    ops.sort();
    ops.dedup();
    ops
}

/// Operators seen (in main graphs, subgraphs and model-local function bodies) and their
/// attribute settings, with what the models nest.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    ops: BTreeMap<String, BTreeSet<String>>,
    nesting: Nesting,
}

/// What the models seen nest: control flow and model-local functions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nesting {
    /// Models holding each control-flow operator (by op type, at any depth), and `function`:
    /// models with model-local functions.
    pub models: BTreeMap<String, usize>,
    /// Control-flow nodes per op type (at any depth, function bodies included).
    pub nodes: BTreeMap<String, usize>,
    /// Model-local functions defined.
    pub functions: usize,
    /// Calls of model-local functions (nodes of a non-default domain a model defines).
    pub calls: usize,
    /// Nodes inside subgraphs (at any depth).
    pub subgraph_nodes: usize,
    /// Nodes inside model-local function bodies.
    pub function_nodes: usize,
}

impl Coverage {
    /// Records the nodes of a model: its main graph, subgraphs and function bodies.
    pub fn add(&mut self, m: &ModelProto) {
        let mut kinds = BTreeSet::new();
        let local: BTreeSet<(&str, &str)> = m
            .functions
            .iter()
            .map(|f| {
                (
                    f.domain.as_deref().unwrap_or(""),
                    f.name.as_deref().unwrap_or(""),
                )
            })
            .collect();
        if let Some(g) = &m.graph {
            self.add_nodes(&g.node, false, &local, &mut kinds);
        }
        for f in &m.functions {
            self.nesting.functions += 1;
            kinds.insert("function".to_string());
            let before = self.nesting.subgraph_nodes;
            self.nesting.function_nodes += count_nodes(&f.node);
            self.add_nodes(&f.node, false, &local, &mut kinds);
            // Nodes of a function's subgraphs count as function nodes, not twice.
            self.nesting.subgraph_nodes = before;
        }
        for k in kinds {
            *self.nesting.models.entry(k).or_insert(0) += 1;
        }
    }

    fn add_nodes(
        &mut self,
        nodes: &[NodeProto],
        in_subgraph: bool,
        local: &BTreeSet<(&str, &str)>,
        kinds: &mut BTreeSet<String>,
    ) {
        for n in nodes {
            if in_subgraph {
                self.nesting.subgraph_nodes += 1;
            }
            let op = n.op_type.clone().unwrap_or_default();
            let domain = n.domain.as_deref().unwrap_or("");
            if !domain.is_empty() && domain != "ai.onnx" {
                if local.contains(&(domain, op.as_str())) {
                    self.nesting.calls += 1;
                }
                continue;
            }
            let mut subgraphs = n
                .attribute
                .iter()
                .flat_map(|a| a.g.iter().chain(&a.graphs))
                .peekable();
            if subgraphs.peek().is_some() {
                *self.nesting.nodes.entry(op.clone()).or_insert(0) += 1;
                kinds.insert(op.clone());
            }
            let subgraphs: Vec<&GraphProto> = subgraphs.collect();
            for g in subgraphs {
                self.add_nodes(&g.node, true, local, kinds);
            }
            let mut attrs: Vec<String> = n.attribute.iter().map(setting).collect();
            attrs.sort();
            self.ops.entry(op).or_default().insert(attrs.join(","));
        }
    }

    /// What the models seen nest.
    pub fn nesting(&self) -> &Nesting {
        &self.nesting
    }

    /// Distinct operators seen.
    pub fn ops_seen(&self) -> usize {
        self.ops.len()
    }

    /// Distinct (operator, attribute setting) pairs seen.
    pub fn settings(&self) -> usize {
        self.ops.values().map(BTreeSet::len).sum()
    }

    /// Default-domain operators never seen.
    pub fn missing(&self) -> Vec<String> {
        default_domain_ops()
            .into_iter()
            .filter(|o| !self.ops.contains_key(o))
            .collect()
    }

    /// Distinct attribute settings per operator seen.
    pub fn per_op(&self) -> impl Iterator<Item = (&str, usize)> + '_ {
        self.ops.iter().map(|(k, v)| (k.as_str(), v.len()))
    }
}

fn setting(a: &AttributeProto) -> String {
    let name = a.name.as_deref().unwrap_or("");
    let v = if let Some(i) = a.i {
        i.to_string()
    } else if let Some(f) = a.f {
        f.to_string()
    } else if let Some(s) = &a.s {
        String::from_utf8_lossy(s).into_owned()
    } else if !a.ints.is_empty() {
        format!("{:?}", a.ints)
    } else if !a.floats.is_empty() {
        format!("{:?}", a.floats)
    } else if a.t.is_some() {
        "tensor".into()
    } else if a.g.is_some() {
        "graph".into()
    } else if let Some(r) = &a.ref_attr_name {
        format!("@{r}")
    } else {
        String::new()
    };
    format!("{name}={v}")
}

/// Nodes of a list and of their subgraphs, at any depth.
fn count_nodes(nodes: &[NodeProto]) -> usize {
    nodes
        .iter()
        .map(|n| {
            1 + n
                .attribute
                .iter()
                .flat_map(|a| a.g.iter().chain(&a.graphs))
                .map(|g| count_nodes(&g.node))
                .sum::<usize>()
        })
        .sum()
}
