//! Shrinking a failing case: drop graph outputs one at a time, then the nodes, inputs,
//! initializers and model-local functions nothing reads or calls any more, as long as the same
//! check still fails.

use std::collections::BTreeSet;

use onnx_ir::Model;
use onnx_proto::{ModelProto, NodeProto};

use super::{check_case, FailedCheck, FuzzCase, Verdict};
use crate::gen::scope::outer_reads;
use onnx_opt::Optimizer;

/// The smallest case found (by dropping outputs and what only they used) that still fails
/// `check` under `optimizer`; `case` itself when nothing smaller fails.
pub fn minimize(case: &FuzzCase, optimizer: &Optimizer, check: FailedCheck) -> FuzzCase {
    let mut best = case.clone();
    loop {
        let outputs = best.proto.graph.as_ref().map_or(0, |g| g.output.len());
        let mut improved = false;
        for k in 0..outputs {
            let Some(cand) = without_output(&best, k) else {
                continue;
            };
            if matches!(check_case(&cand, optimizer), Verdict::Failed(f) if f.check == check) {
                best = cand;
                improved = true;
                break;
            }
        }
        if !improved {
            return best;
        }
    }
}

/// `case` without graph output `k` and what only it used (`None` when it is the last output).
fn without_output(case: &FuzzCase, k: usize) -> Option<FuzzCase> {
    let mut proto: ModelProto = case.proto.clone();
    let g = proto.graph.as_mut()?;
    if g.output.len() < 2 {
        return None;
    }
    g.output.remove(k);
    prune(&mut proto);
    let g = proto.graph.as_ref()?;
    let inputs: BTreeSet<&str> = g.input.iter().filter_map(|v| v.name.as_deref()).collect();
    let trials = case
        .trials
        .iter()
        .map(|t| {
            t.iter()
                .filter(|(n, _)| inputs.contains(n.as_str()))
                .cloned()
                .collect()
        })
        .collect();
    let model = Model::from_proto(proto.clone()).ok()?;
    Some(FuzzCase {
        seed: case.seed,
        model,
        proto,
        trials,
    })
}

/// Removes nodes whose outputs nobody reads (subgraphs read by name too), then unread inputs
/// (one stays), initializers and model-local functions nothing calls.
fn prune(proto: &mut ModelProto) {
    prune_graph(proto);
    // Functions called from the graph, then from the functions they call.
    let mut called: BTreeSet<(String, String)> = BTreeSet::new();
    if let Some(g) = &proto.graph {
        calls(&g.node, &mut called);
    }
    loop {
        let before = called.len();
        for f in &proto.functions {
            let id = (
                f.domain.clone().unwrap_or_default(),
                f.name.clone().unwrap_or_default(),
            );
            if called.contains(&id) {
                calls(&f.node, &mut called);
            }
        }
        if called.len() == before {
            break;
        }
    }
    proto.functions.retain(|f| {
        called.contains(&(
            f.domain.clone().unwrap_or_default(),
            f.name.clone().unwrap_or_default(),
        ))
    });
}

/// (domain, op type) of the non-default-domain nodes of a list and their subgraphs.
fn calls(nodes: &[NodeProto], out: &mut BTreeSet<(String, String)>) {
    for n in nodes {
        let domain = n.domain.clone().unwrap_or_default();
        if !domain.is_empty() && domain != "ai.onnx" {
            out.insert((domain, n.op_type.clone().unwrap_or_default()));
        }
        for g in n.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs)) {
            calls(&g.node, out);
        }
    }
}

fn prune_graph(proto: &mut ModelProto) {
    let Some(g) = proto.graph.as_mut() else {
        return;
    };
    loop {
        let mut live: BTreeSet<String> = g.output.iter().filter_map(|o| o.name.clone()).collect();
        for n in &g.node {
            live.extend(n.input.iter().cloned());
            live.extend(outer_reads(n));
        }
        let before = g.node.len();
        g.node.retain(|n| n.output.iter().any(|o| live.contains(o)));
        if g.node.len() == before {
            g.initializer
                .retain(|t| t.name.as_ref().is_some_and(|n| live.contains(n)));
            let inits: BTreeSet<String> = g
                .initializer
                .iter()
                .filter_map(|t| t.name.clone())
                .collect();
            let read = |v: &onnx_proto::ValueInfoProto| {
                v.name
                    .as_ref()
                    .is_some_and(|n| live.contains(n) || inits.contains(n))
            };
            if g.input.iter().any(read) {
                g.input.retain(read);
            }
            return;
        }
    }
}
