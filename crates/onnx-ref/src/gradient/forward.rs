//! The forward slice of a Gradient node: which nodes of the enclosing graph compute `y` from
//! the node's `xs` and `zs`, which outside values they read (captured from the enclosing scope,
//! constant for the derivative), and which values depend on some `xs` entry (where gradients
//! flow).
//!
//! The walk goes backward from `y` and stops at the names in `xs` and `zs`: the producers of
//! those names are not part of the slice (the Gradient node feeds their values), which is what
//! lets `xs` name an intermediate value. An ancestor of `y` that depends on none of `xs`/`zs` is
//! not copied either: its output is captured like an initializer.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{GraphProto, NodeProto};

use crate::control::subgraph_reads;

/// The forward part of a Gradient node.
#[derive(Debug, Default)]
pub(crate) struct ForwardSlice {
    /// Indices of the enclosing graph's nodes to copy, in topological order.
    pub(crate) nodes: Vec<usize>,
    /// Values the slice reads that it neither receives (`xs`, `zs`) nor computes, sorted.
    pub(crate) captures: Vec<String>,
    /// Values that depend on at least one `xs` entry (the `xs` names included).
    pub(crate) depends_on_x: BTreeSet<String>,
}

/// Why a Gradient node has no forward slice; the caller attaches the Gradient node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SliceError {
    /// `y` is computed from the Gradient node's own outputs.
    #[error("'{y}' depends on the Gradient node's own outputs (node {gradient})")]
    DependsOnGradient {
        /// The value the gradient is taken of.
        y: String,
        /// The Gradient node's index in its graph.
        gradient: usize,
    },
    /// The walk back from `y` came round to a node it is still inside.
    #[error("the graph has a cycle through node {node} (reading '{value}')")]
    Cycle {
        /// The node reached again.
        node: usize,
        /// The value whose producer it is.
        value: String,
    },
}

/// Every name a node reads: its non-empty inputs and what its subgraphs read.
fn node_reads(node: &NodeProto) -> Vec<String> {
    node.input
        .iter()
        .filter(|i| !i.is_empty())
        .cloned()
        .chain(subgraph_reads(node))
        .collect()
}

/// Computes the forward slice of `y` over the cut `xs ++ zs` in `graph`. `gradient_index` is
/// the Gradient node's own index (the slice must not contain it). Errors do not name
/// the Gradient node (the caller attaches it).
pub(crate) fn forward_slice(
    graph: &GraphProto,
    gradient_index: Option<usize>,
    xs: &[String],
    zs: &[String],
    y: &str,
) -> Result<ForwardSlice, SliceError> {
    let mut producer: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.entry(o.as_str()).or_insert(i);
        }
    }
    let cut: BTreeSet<&str> = xs.iter().chain(zs).map(String::as_str).collect();
    let xset: BTreeSet<&str> = xs.iter().map(String::as_str).collect();
    let mut reads: BTreeMap<usize, Vec<String>> = BTreeMap::new();

    // Iterative depth-first walk from y over producers, giving a post-order (topological
    // order) of the ancestors of y between the cut and y.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    let mut mark: BTreeMap<usize, Mark> = BTreeMap::new();
    let mut post: Vec<usize> = Vec::new();
    let start = match producer.get(y) {
        Some(&p) if !cut.contains(y) => Some(p),
        _ => None,
    };
    if let Some(p) = start {
        let mut stack: Vec<(usize, usize)> = vec![(p, 0)];
        mark.insert(p, Mark::Open);
        while let Some(top) = stack.last_mut() {
            let node = top.0;
            let next = top.1;
            top.1 += 1;
            if Some(node) == gradient_index {
                return Err(SliceError::DependsOnGradient {
                    y: y.to_string(),
                    gradient: node,
                });
            }
            let names = reads
                .entry(node)
                .or_insert_with(|| graph.node.get(node).map(node_reads).unwrap_or_default());
            let child = names.get(next).cloned();
            match child {
                None => {
                    mark.insert(node, Mark::Done);
                    post.push(node);
                    stack.pop();
                }
                Some(name) => {
                    if cut.contains(name.as_str()) {
                        continue;
                    }
                    let Some(&q) = producer.get(name.as_str()) else {
                        continue;
                    };
                    match mark.get(&q) {
                        Some(Mark::Done) => {}
                        Some(Mark::Open) => {
                            return Err(SliceError::Cycle {
                                node: q,
                                value: name,
                            });
                        }
                        None => {
                            mark.insert(q, Mark::Open);
                            stack.push((q, 0));
                        }
                    }
                }
            }
        }
    }

    // Dependence on the cut (for copying) and on xs (for gradients), in topological order.
    let mut depends_any: BTreeSet<String> = cut.iter().map(|s| s.to_string()).collect();
    let mut depends_on_x: BTreeSet<String> = xset.iter().map(|s| s.to_string()).collect();
    let mut nodes = Vec::new();
    for &i in &post {
        let names = reads.get(&i).map(Vec::as_slice).unwrap_or(&[]);
        let any = names.iter().any(|n| depends_any.contains(n));
        let on_x = names.iter().any(|n| depends_on_x.contains(n));
        if !any {
            continue;
        }
        nodes.push(i);
        if let Some(node) = graph.node.get(i) {
            for o in node.output.iter().filter(|o| !o.is_empty()) {
                if cut.contains(o.as_str()) {
                    continue;
                }
                depends_any.insert(o.clone());
                if on_x {
                    depends_on_x.insert(o.clone());
                }
            }
        }
    }
    let produced: BTreeSet<&str> = nodes
        .iter()
        .filter_map(|&i| graph.node.get(i))
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    let mut captures = BTreeSet::new();
    for &i in &nodes {
        for name in reads.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
            if !cut.contains(name.as_str()) && !produced.contains(name.as_str()) {
                captures.insert(name.clone());
            }
        }
    }
    Ok(ForwardSlice {
        nodes,
        captures: captures.into_iter().collect(),
        depends_on_x,
    })
}
