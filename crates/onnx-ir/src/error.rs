//! The error type of onnx-ir: conversion limits and operations that need a well-formed graph
//! (sorting a graph with a cycle). Problems of the model itself are reported by the checker
//! ([`crate::CheckError`]), never by conversion.

use crate::graph::NodeId;
use crate::name::Name;

/// Errors from converting between protobuf and IR, and from graph algorithms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IrError {
    /// Subgraphs (If/Loop/Scan bodies, graph attributes) nest deeper than the converter allows.
    #[error("{context}: subgraphs nest deeper than {limit} levels")]
    NestingTooDeep {
        /// Where the limit was reached (the chain of graph, node and attribute names).
        context: String,
        /// The nesting limit.
        limit: usize,
    },
    /// A graph has more values or nodes than a 32-bit handle can address.
    #[error("graph '{graph}': more than {limit} {what}")]
    TooMany {
        /// The graph's name.
        graph: String,
        /// "values" or "nodes".
        what: &'static str,
        /// The largest count a handle can address.
        limit: u64,
    },
    /// The nodes depend on each other in a cycle, so no topological order exists.
    #[error(
        "graph '{graph}' has a cycle: node {index} '{node_name}' ({op_type}) depends on itself"
    )]
    Cycle {
        /// The graph's name.
        graph: String,
        /// A node on the cycle.
        node: NodeId,
        /// Its position in the graph's node order.
        index: usize,
        /// Its name ("" when it has none).
        node_name: Name,
        /// Its operator.
        op_type: Name,
    },
    /// A handle does not point into the graph's arenas (the graph was built inconsistently).
    #[error("graph '{graph}': {what} handle {index} is out of range")]
    InvalidHandle {
        /// The graph's name.
        graph: String,
        /// "value" or "node".
        what: &'static str,
        /// The handle's index.
        index: u32,
    },
}
