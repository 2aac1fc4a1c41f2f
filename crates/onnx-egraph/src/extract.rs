//! DAG-aware greedy extraction ("faster greedy DAG" of the extraction-gym benchmarks): each
//! class's best node is chosen by the cost of the *set* of classes it needs, so a subterm shared
//! by several parents is paid once. Deterministic (classes and nodes are visited in id order,
//! ties keep the earlier choice) and acyclic (a node whose cost set contains its own class is
//! never chosen).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use egg::{Id, Language};

use crate::analysis::OnnxEGraph;
use crate::lang::{NodeKind, ONode};

/// What a node costs on its own (its children are paid through their classes).
pub trait CostModel {
    /// `f64::INFINITY` forbids the node (e.g. an op not legal at the target opset).
    fn node_cost(&self, egraph: &OnnxEGraph, class: Id, node: &ONode) -> f64;
}

/// Bytes of constant data that cost as much as one operator under [`NodeCount`]: a rewrite that
/// saves a node but duplicates a large weight does not pay.
pub const CONST_BYTES_PER_NODE: f64 = 65536.0;

/// What an operator that depends on no graph input costs: a runtime computes it once, when it
/// loads the model (it is constant folding left lazy to keep the file small).
pub const INPUT_FREE_OP: f64 = 0.01;

/// Plain node count: every operator that depends on a graph input costs 1 (the others
/// `INPUT_FREE_OP`); a constant costs its bytes
/// (`CONST_BYTES_PER_NODE` per node) plus a small amount per tensor.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeCount;

impl CostModel for NodeCount {
    fn node_cost(&self, egraph: &OnnxEGraph, class: Id, node: &ONode) -> f64 {
        match node.kind {
            // A folded class is written as its constant, never recomputed.
            NodeKind::Op(_) if egraph[class].data.constant.is_some() => f64::INFINITY,
            NodeKind::Op(_) if egraph[class].data.input_free => INPUT_FREE_OP,
            NodeKind::Op(_) => 1.0,
            NodeKind::Const(c) => {
                0.001 + egraph.analysis.consts.get(c).bytes as f64 / CONST_BYTES_PER_NODE
            }
            _ => 0.0,
        }
    }
}

/// Estimated latency: per op, the bytes it moves and the arithmetic it does, from the shapes
/// the analysis knows (unknown shapes count as one element); constants cost their bytes (read
/// once: a tenth of an op's traffic per byte), so duplicated weights are never free.
#[derive(Debug, Clone, Copy, Default)]
pub struct Latency;

impl CostModel for Latency {
    fn node_cost(&self, egraph: &OnnxEGraph, class: Id, node: &ONode) -> f64 {
        match node.kind {
            NodeKind::Op(_) if egraph[class].data.constant.is_some() => f64::INFINITY,
            NodeKind::Op(_) if egraph[class].data.input_free => INPUT_FREE_OP,
            NodeKind::Op(_) => crate::cost::node_estimate(egraph, class, node),
            NodeKind::Const(c) => 1e-4 + egraph.analysis.consts.get(c).bytes as f64 / 5e4,
            _ => 0.0,
        }
    }
}

/// What a standard op costs, beyond its [`Latency`] estimate, where onnxruntime runs a fused
/// contrib kernel in its place: far more than any graph around it, so extraction keeps the
/// `com.microsoft` op wherever a rule wrote one into the op's class, and keeps the standard op
/// (its only form) elsewhere.
pub const REPLACED_BY_CONTRIB: f64 = 1e3;

/// [`Latency`] for onnxruntime: the standard ops `rules/onnxruntime.rules` rewrites into
/// contrib kernels (RMSNormalization and LayerNormalization of a sum into
/// SkipSimplifiedLayerNormalization and SkipLayerNormalization, Gelu into BiasGelu and FastGelu)
/// cost [`REPLACED_BY_CONTRIB`] more. So does the standard Attention with a mask that is
/// `finite` (a lowest-float mask): onnxruntime 1.31's Attention kernel gives 0 for a query row
/// that such a mask masks whole (a padded token's), where the standard (and the export) average
/// the values, as GroupQueryAttention and MultiHeadAttention do. With a mask that may hold -inf,
/// or none, that kernel computes the standard's output and Attention is costed as any op:
/// its 3-D form (`ort_attention_3d`) needs neither GroupQueryAttention's sequence lengths nor its
/// NaN guard, and runs a decode step faster (`benches/README.md`). Meant for an e-graph where
/// those are the only rewrites of them (a lowering phase over an extracted model): beside the
/// fusion rules, an unfused form of the op would win instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnnxRuntime;

impl CostModel for OnnxRuntime {
    fn node_cost(&self, egraph: &OnnxEGraph, class: Id, node: &ONode) -> f64 {
        let base = Latency.node_cost(egraph, class, node);
        let NodeKind::Op(op) = node.kind else {
            return base;
        };
        let info = egraph.analysis.ops.get(op);
        let replaced = onnx_schema::normalize_domain(&info.domain).is_empty()
            && matches!(
                info.op_type.as_str(),
                "RMSNormalization" | "LayerNormalization" | "Gelu"
            )
            || (onnx_schema::normalize_domain(&info.domain).is_empty()
                && info.op_type == "Attention"
                && crate::build::Roles::new(info, &node.children)
                    .input(3)
                    .is_some_and(|m| crate::rules::finite(egraph, m)));
        match replaced && base.is_finite() {
            true => base + REPLACED_BY_CONTRIB,
            false => base,
        }
    }
}

/// Wraps a cost model so that operators not legal at a target opset cost infinity: an op is
/// legal at opset `T` of its domain when the schema it binds to there is the one the e-node
/// binds to (same since_version, so same semantics). Ops of domains without schemas are legal.
#[derive(Debug, Clone, Copy)]
pub struct AtOpset<C> {
    pub inner: C,
    /// Target version of the default domain.
    pub target: i64,
}

impl<C: CostModel> CostModel for AtOpset<C> {
    fn node_cost(&self, egraph: &OnnxEGraph, class: Id, node: &ONode) -> f64 {
        if !legal_at(egraph, node, self.target) {
            return f64::INFINITY;
        }
        self.inner.node_cost(egraph, class, node)
    }
}

/// Whether an e-node may be written at default-domain opset `target`: every node that is not an
/// operator, operators of other domains, and default-domain operators whose schema at `target`
/// is the one they bind to (same since_version).
pub fn legal_at(egraph: &OnnxEGraph, node: &ONode, target: i64) -> bool {
    let NodeKind::Op(op) = node.kind else {
        return true;
    };
    let info = egraph.analysis.ops.get(op);
    if !(info.has_schema && onnx_schema::normalize_domain(&info.domain).is_empty()) {
        return true;
    }
    let bound = onnx_schema::registry().lookup(&info.domain, &info.op_type, target);
    bound.map(|s| s.since_version) == Some(info.since_version)
}

/// The chosen node of every class reachable from the root.
#[derive(Debug, Clone)]
pub struct Selection {
    pub choice: BTreeMap<Id, ONode>,
    /// The DAG cost of the root.
    pub cost: f64,
}

struct Best {
    node: ONode,
    total: f64,
    /// The classes this choice needs (itself included) with their own costs, sorted by id:
    /// a shared subterm is in the set once, so it is paid once.
    set: Vec<(Id, f64)>,
}

/// Union of two cost sets sorted by class id (a linear merge; equal ids carry equal costs).
fn merge_sets(a: &[(Id, f64)], b: &[(Id, f64)]) -> Vec<(Id, f64)> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn contains(set: &[(Id, f64)], c: Id) -> bool {
    set.binary_search_by(|(id, _)| id.cmp(&c)).is_ok()
}

/// Extracts the best DAG below `root` under `model`.
pub fn extract_dag(
    egraph: &OnnxEGraph,
    root: Id,
    model: &dyn CostModel,
) -> Result<Selection, crate::EGraphError> {
    extract_dag_keeping(egraph, root, model, &BTreeSet::new())
}

/// [`extract_dag`], where a tie between two nodes of a class goes to the one of the input's
/// form: `original` holds (class, kind) of the input graph's operator nodes. `x / c` and the
/// `x * (1/c)` it equals cost the same, and the Div is what onnxruntime's Gelu fusion matches.
pub fn extract_dag_keeping(
    egraph: &OnnxEGraph,
    root: Id,
    model: &dyn CostModel,
    original: &BTreeSet<(Id, NodeKind)>,
) -> Result<Selection, crate::EGraphError> {
    let is_original = |c: Id, n: &ONode| original.contains(&(c, n.kind));
    let root = egraph.find(root);
    let mut classes: Vec<Id> = egraph.classes().map(|c| c.id).collect();
    classes.sort();
    // Parents of each class: (parent class, index of the node in it).
    let mut parents: BTreeMap<Id, Vec<Id>> = BTreeMap::new();
    for &c in &classes {
        for n in &egraph[c].nodes {
            for &child in n.children() {
                parents.entry(egraph.find(child)).or_default().push(c);
            }
        }
    }
    for p in parents.values_mut() {
        p.sort();
        p.dedup();
    }
    let mut best: BTreeMap<Id, Best> = BTreeMap::new();
    let mut queue: VecDeque<Id> = VecDeque::new();
    let mut queued: BTreeSet<Id> = BTreeSet::new();
    for &c in &classes {
        if egraph[c].nodes.iter().any(|n| n.is_leaf()) {
            queue.push_back(c);
            queued.insert(c);
        }
    }
    while let Some(c) = queue.pop_front() {
        queued.remove(&c);
        let mut improved = false;
        for node in &egraph[c].nodes {
            let own = model.node_cost(egraph, c, node);
            if !own.is_finite() {
                continue;
            }
            let mut kids: Vec<Id> = node.children().iter().map(|&k| egraph.find(k)).collect();
            if !kids.iter().all(|k| best.contains_key(k)) || kids.contains(&c) {
                continue;
            }
            if kids.iter().any(|k| contains(&best[k].set, c)) {
                continue; // choosing this node would make a cycle
            }
            // Merge the children's sets, largest first.
            kids.sort_by_key(|k| std::cmp::Reverse(best[k].set.len()));
            kids.dedup();
            let mut set: Vec<(Id, f64)> = match kids.first() {
                Some(k) => best[k].set.clone(),
                None => Vec::new(),
            };
            for k in kids.iter().skip(1) {
                set = merge_sets(&set, &best[k].set);
            }
            set = merge_sets(&set, &[(c, own)]);
            let total: f64 = set.iter().map(|(_, v)| v).sum();
            let better = match best.get(&c) {
                None => true,
                Some(b) => {
                    total < b.total - 1e-12
                        || (total <= b.total + 1e-12
                            && is_original(c, node)
                            && !is_original(c, &b.node))
                }
            };
            if better {
                best.insert(
                    c,
                    Best {
                        node: node.clone(),
                        total,
                        set,
                    },
                );
                improved = true;
            }
        }
        if improved {
            for &p in parents.get(&c).map(|v| v.as_slice()).unwrap_or(&[]) {
                if queued.insert(p) {
                    queue.push_back(p);
                }
            }
        }
    }
    let Some(root_best) = best.get(&root) else {
        return Err(crate::EGraphError::NoExtraction);
    };
    let _ = root_best;
    let mut choice: BTreeMap<Id, ONode> = BTreeMap::new();
    let Some(mut cost) = selection_cost(
        egraph,
        root,
        model,
        &best,
        &BTreeMap::new(),
        None,
        Some(&mut choice),
    ) else {
        return Err(crate::EGraphError::Internal(
            "the greedy extraction is cyclic".into(),
        ));
    };
    share_better(
        egraph,
        root,
        model,
        &best,
        &is_original,
        &mut choice,
        &mut cost,
    );
    Ok(Selection { choice, cost })
}

/// Walks the selection from `root` (`over` first, then the choices in `choice`, then the greedy
/// `best` for classes without one) and returns its DAG cost (each class paid once), or `None`
/// when it has a cycle. With `out`, also returns the choices of exactly the reachable classes.
fn selection_cost(
    egraph: &OnnxEGraph,
    root: Id,
    model: &dyn CostModel,
    best: &BTreeMap<Id, Best>,
    choice: &BTreeMap<Id, ONode>,
    over: Option<(Id, &ONode)>,
    mut out: Option<&mut BTreeMap<Id, ONode>>,
) -> Option<f64> {
    // Iterative DFS with colours: 1 = on the stack, 2 = done.
    let slots = egraph
        .classes()
        .map(|c| usize::from(c.id))
        .max()
        .unwrap_or(0)
        + 1;
    let mut colour = vec![0u8; slots];
    let mut cost = 0.0;
    let mut stack: Vec<(Id, bool)> = vec![(root, false)];
    while let Some((c, leaving)) = stack.pop() {
        let ci = usize::from(c);
        if leaving {
            colour[ci] = 2;
            continue;
        }
        match colour[ci] {
            2 => continue,
            1 => return None,
            _ => {}
        }
        let node = match over {
            Some((oc, n)) if oc == c => n,
            _ => match choice.get(&c) {
                Some(n) => n,
                None => &best.get(&c)?.node,
            },
        };
        colour[ci] = 1;
        stack.push((c, true));
        cost += model.node_cost(egraph, c, node);
        for &k in node.children() {
            let k = egraph.find(k);
            match colour[usize::from(k)] {
                1 => return None,
                0 => stack.push((k, false)),
                _ => {}
            }
        }
        if let Some(out) = out.as_deref_mut() {
            out.insert(c, node.clone());
        }
    }
    Some(cost)
}

/// A greedy DAG extraction pays a shared subterm once only inside one choice's subtree, so it
/// may pick, for one consumer, a node that recomputes what another consumer already needs (a
/// Conv folded with its BatchNormalization beside the original Conv that a Relu still reads:
/// two Convs and two weight copies). This pass tries, for every selected class, each other
/// node whose greedy subtree reaches a class already selected, and keeps a switch when the whole
/// selection's DAG cost drops; it repeats while something improves (a few rounds at most).
fn share_better(
    egraph: &OnnxEGraph,
    root: Id,
    model: &dyn CostModel,
    best: &BTreeMap<Id, Best>,
    is_original: &dyn Fn(Id, &ONode) -> bool,
    choice: &mut BTreeMap<Id, ONode>,
    cost: &mut f64,
) {
    const MAX_ROUNDS: usize = 4;
    const MAX_TRIALS: usize = 20_000;
    let mut trials = 0;
    for _ in 0..MAX_ROUNDS {
        let mut improved = false;
        let selected: Vec<Id> = choice.keys().copied().collect();
        for c in selected {
            let Some(current) = choice.get(&c).cloned() else {
                continue; // no longer reachable after an earlier switch
            };
            let mut pick: Option<(f64, ONode)> = None;
            for node in &egraph[c].nodes {
                if *node == current || !model.node_cost(egraph, c, node).is_finite() {
                    continue;
                }
                let kids: Vec<Id> = node.children().iter().map(|&k| egraph.find(k)).collect();
                if !kids
                    .iter()
                    .all(|k| choice.contains_key(k) || best.contains_key(k))
                {
                    continue;
                }
                // Only a node that reaches something already selected can share it.
                let shares = kids.iter().any(|k| {
                    choice.contains_key(k)
                        || best
                            .get(k)
                            .is_some_and(|b| b.set.iter().any(|(id, _)| choice.contains_key(id)))
                });
                if !shares {
                    continue;
                }
                trials += 1;
                if trials > MAX_TRIALS {
                    break;
                }
                let Some(t) =
                    selection_cost(egraph, root, model, best, choice, Some((c, node)), None)
                else {
                    continue;
                };
                // The cheapest switch of this class; on a tie, the input's own node.
                let wins = match &pick {
                    None => t < *cost - 1e-9,
                    Some((u, prev)) => {
                        t < u - 1e-9
                            || (t <= u + 1e-9 && is_original(c, node) && !is_original(c, prev))
                    }
                };
                if wins {
                    pick = Some((t, node.clone()));
                }
            }
            if let Some((_, node)) = pick {
                let mut next = BTreeMap::new();
                let over = Some((c, &node));
                if let Some(t) =
                    selection_cost(egraph, root, model, best, choice, over, Some(&mut next))
                {
                    *choice = next;
                    *cost = t;
                    improved = true;
                }
            }
            if trials > MAX_TRIALS {
                return;
            }
        }
        if !improved {
            return;
        }
    }
}
