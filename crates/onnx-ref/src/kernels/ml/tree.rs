//! Tree ensembles of `ai.onnx.ml`: TreeEnsemble (opset 5; tensor attributes, set membership)
//! and TreeEnsembleRegressor (opsets 1-4; per-tree node ids, several targets per leaf). Both
//! build one [`Forest`] (branch nodes and leaves by index, validated once) and evaluate it per
//! row in f64; TreeEnsembleClassifier (`classifier.rs`) builds its forest with
//! [`legacy_forest`] too.

use std::collections::BTreeMap;

use super::scores::post_transform;
use super::ML;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::kernels::{cast_tensor, one};
use crate::tensor::Tensor;
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(ML, "TreeEnsemble", 5, 5, tree_ensemble);
    reg.register(ML, "TreeEnsembleRegressor", 1, 4, tree_ensemble_regressor);
}

/// A branch comparison: true goes to the node's true child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
    Member,
}

/// Where a branch leads.
#[derive(Debug, Clone, Copy)]
enum Next {
    Node(usize),
    Leaf(usize),
}

#[derive(Debug, Clone)]
struct Branch {
    feature: usize,
    mode: Mode,
    split: f64,
    members: Vec<f64>,
    missing_goes_true: bool,
    on_true: Next,
    on_false: Next,
}

/// Trees as branch nodes and leaves; a leaf adds weights to targets.
#[derive(Debug, Default)]
pub(super) struct Forest {
    branches: Vec<Branch>,
    leaves: Vec<Vec<(usize, f64)>>,
    roots: Vec<Next>,
    n_targets: usize,
}

/// Where a bad reference of a [`Forest`] sits: a branch node's child or a tree's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Referrer {
    /// A branch node (its index among the branches).
    Node(usize),
    /// A tree's root (the tree's index).
    Tree(usize),
}

impl std::fmt::Display for Referrer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Referrer::Node(i) => write!(f, "node {i}"),
            Referrer::Tree(t) => write!(f, "tree {t}"),
        }
    }
}

/// Why a [`Forest`] cannot be evaluated; the kernel attaches its node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ForestError {
    /// A branch or root refers to a branch node that does not exist.
    #[error("{from} refers to node {index} of {count}")]
    NoSuchNode {
        from: Referrer,
        index: usize,
        count: usize,
    },
    /// A branch or root refers to a leaf that does not exist.
    #[error("{from} refers to leaf {index} of {count}")]
    NoSuchLeaf {
        from: Referrer,
        index: usize,
        count: usize,
    },
    /// A branch tests a feature the input does not have.
    #[error("node {node} tests feature {feature} of an input with {features} features")]
    NoSuchFeature {
        node: usize,
        feature: usize,
        features: usize,
    },
    /// A leaf adds a weight to a target the ensemble does not have.
    #[error("leaf {leaf} targets {target} of {targets} targets")]
    NoSuchTarget {
        leaf: usize,
        target: usize,
        targets: usize,
    },
    /// Following the branches from a tree's root never reaches a leaf.
    #[error("the tree has a cycle")]
    Cycle { tree: usize },
}

/// How the leaf values of the trees combine per target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Average,
    Sum,
    Min,
    Max,
}

impl Branch {
    fn goes_true(&self, v: f64) -> bool {
        if v.is_nan() {
            return self.missing_goes_true
                || (self.mode == Mode::Member && self.members.iter().any(|m| m.is_nan()));
        }
        match self.mode {
            Mode::Leq => v <= self.split,
            Mode::Lt => v < self.split,
            Mode::Gte => v >= self.split,
            Mode::Gt => v > self.split,
            Mode::Eq => v == self.split,
            Mode::Neq => v != self.split,
            Mode::Member => self.members.contains(&v),
        }
    }
}

impl Forest {
    /// Checks every reference once so that evaluation cannot index out of range or loop.
    pub(super) fn validate(&self, n_features: usize) -> std::result::Result<(), ForestError> {
        let check = |n: Next, from: Referrer| match n {
            Next::Node(index) if index >= self.branches.len() => Err(ForestError::NoSuchNode {
                from,
                index,
                count: self.branches.len(),
            }),
            Next::Leaf(index) if index >= self.leaves.len() => Err(ForestError::NoSuchLeaf {
                from,
                index,
                count: self.leaves.len(),
            }),
            _ => Ok(()),
        };
        for (i, b) in self.branches.iter().enumerate() {
            check(b.on_true, Referrer::Node(i))?;
            check(b.on_false, Referrer::Node(i))?;
            if b.feature >= n_features {
                return Err(ForestError::NoSuchFeature {
                    node: i,
                    feature: b.feature,
                    features: n_features,
                });
            }
        }
        for (t, &r) in self.roots.iter().enumerate() {
            check(r, Referrer::Tree(t))?;
        }
        for (i, leaf) in self.leaves.iter().enumerate() {
            if let Some(&(t, _)) = leaf.iter().find(|(t, _)| *t >= self.n_targets) {
                return Err(ForestError::NoSuchTarget {
                    leaf: i,
                    target: t,
                    targets: self.n_targets,
                });
            }
        }
        Ok(())
    }

    /// The leaf a row reaches in tree `tree`.
    fn leaf_of(&self, tree: usize, row: &[f64]) -> std::result::Result<usize, ForestError> {
        let mut at = self.roots[tree];
        for _ in 0..=self.branches.len() {
            match at {
                Next::Leaf(l) => return Ok(l),
                Next::Node(n) => {
                    let b = &self.branches[n];
                    at = if b.goes_true(row[b.feature]) {
                        b.on_true
                    } else {
                        b.on_false
                    };
                }
            }
        }
        Err(ForestError::Cycle { tree })
    }

    /// Per-target sums of the leaf weights one row reaches, and whether any leaf gave each
    /// target a weight (the classifiers treat "no weight" apart from a zero sum). With
    /// `single`, sums are rounded to f32 after every addition, as runtimes with float weights
    /// compute them (a 0.2 + 0.3 that must not exceed 0.5).
    pub(super) fn sum_with_hits(
        &self,
        row: &[f64],
        single: bool,
    ) -> std::result::Result<(Vec<f64>, Vec<bool>), ForestError> {
        let mut sums = vec![0.0; self.n_targets];
        let mut hits = vec![false; self.n_targets];
        for tree in 0..self.roots.len() {
            let leaf = self.leaf_of(tree, row)?;
            for &(t, w) in &self.leaves[leaf] {
                sums[t] = if single {
                    f64::from(sums[t] as f32 + w as f32)
                } else {
                    sums[t] + w
                };
                hits[t] = true;
            }
        }
        Ok((sums, hits))
    }

    /// Scores of every row (`rows` of `n_features` values), `n_targets` per row.
    fn predict(
        &self,
        x: &[f64],
        n_features: usize,
        aggregate: Aggregate,
        unreached: f64,
    ) -> std::result::Result<Vec<f64>, ForestError> {
        let rows = x.len().checked_div(n_features).unwrap_or(0);
        let mut out = Vec::with_capacity(rows * self.n_targets);
        let init = match aggregate {
            Aggregate::Sum | Aggregate::Average => 0.0,
            Aggregate::Min | Aggregate::Max => unreached,
        };
        for row in x.chunks_exact(n_features.max(1)).take(rows) {
            let mut scores = vec![init; self.n_targets];
            for tree in 0..self.roots.len() {
                let leaf = self.leaf_of(tree, row)?;
                for &(t, w) in &self.leaves[leaf] {
                    let s = &mut scores[t];
                    *s = match aggregate {
                        Aggregate::Sum | Aggregate::Average => *s + w,
                        Aggregate::Min => s.min(w),
                        Aggregate::Max => s.max(w),
                    };
                }
            }
            if aggregate == Aggregate::Average && !self.roots.is_empty() {
                let n = self.roots.len() as f64;
                scores.iter_mut().for_each(|s| *s /= n);
            }
            out.extend(scores);
        }
        Ok(out)
    }
}

/// X as f64 rows: `[N, F]`, or `[F]` as one row.
pub(super) fn input_rows(ctx: &KernelCtx, x: &Tensor) -> Result<(usize, usize, Vec<f64>)> {
    if !matches!(
        x,
        Tensor::F32(_) | Tensor::F64(_) | Tensor::F16(_) | Tensor::I64(_) | Tensor::I32(_)
    ) {
        return Err(ctx.err(format!("unsupported input type {}", x.dtype())));
    }
    let (n, f) = match x.shape() {
        [f] => (1, *f),
        [n, f] => (*n, *f),
        other => return Err(ctx.err(format!("input must be [N, F], got {other:?}"))),
    };
    Ok((
        n,
        f,
        x.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
    ))
}

/// A non-negative index attribute element.
pub(super) fn index(ctx: &KernelCtx, name: &str, v: i64) -> Result<usize> {
    usize::try_from(v).map_err(|_| ctx.err(format!("{name} has negative entry {v}")))
}

/// A required ints attribute.
pub(super) fn ints<'a>(ctx: &KernelCtx<'a>, name: &str) -> Result<&'a [i64]> {
    ctx.attr_ints(name)
        .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))
}

/// A required tensor attribute as f64 values.
fn tensor_f64(ctx: &KernelCtx, name: &str) -> Result<Option<Vec<f64>>> {
    match ctx.attr_tensor(name)? {
        Some(t) => Ok(Some(
            t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        )),
        None => Ok(None),
    }
}

fn tree_ensemble(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let (n, f, xv) = input_rows(ctx, x)?;
    let features = ints(ctx, "nodes_featureids")?;
    let count = features.len();
    let splits = tensor_f64(ctx, "nodes_splits")?
        .ok_or_else(|| ctx.err("attribute 'nodes_splits' is required"))?;
    let modes = tensor_f64(ctx, "nodes_modes")?
        .ok_or_else(|| ctx.err("attribute 'nodes_modes' is required"))?;
    let true_ids = ints(ctx, "nodes_truenodeids")?;
    let false_ids = ints(ctx, "nodes_falsenodeids")?;
    let true_leafs = ints(ctx, "nodes_trueleafs")?;
    let false_leafs = ints(ctx, "nodes_falseleafs")?;
    let missing = ctx
        .attr_ints("nodes_missing_value_tracks_true")
        .unwrap_or_default();
    let lists = [
        splits.len(),
        modes.len(),
        true_ids.len(),
        false_ids.len(),
        true_leafs.len(),
        false_leafs.len(),
    ];
    if lists.iter().any(|&l| l != count) || !(missing.is_empty() || missing.len() == count) {
        return Err(ctx.err(format!(
            "the nodes_* attributes have different lengths ({count} feature ids)"
        )));
    }
    let targets = ints(ctx, "leaf_targetids")?;
    let weights = tensor_f64(ctx, "leaf_weights")?
        .ok_or_else(|| ctx.err("attribute 'leaf_weights' is required"))?;
    if targets.len() != weights.len() {
        return Err(ctx.err(format!(
            "{} leaf_targetids but {} leaf_weights",
            targets.len(),
            weights.len()
        )));
    }
    let mut members = tensor_f64(ctx, "membership_values")?
        .unwrap_or_default()
        .into_iter();
    let n_targets = index(ctx, "n_targets", ctx.attr_int("n_targets", 0)?)?;
    let mut forest = Forest {
        n_targets,
        ..Default::default()
    };
    for (&t, &w) in targets.iter().zip(&weights) {
        forest
            .leaves
            .push(vec![(index(ctx, "leaf_targetids", t)?, w)]);
    }
    let next = |id: i64, leaf: i64| -> Result<Next> {
        let i = index(ctx, "node ids", id)?;
        Ok(if leaf != 0 {
            Next::Leaf(i)
        } else {
            Next::Node(i)
        })
    };
    for i in 0..count {
        let mode = match modes[i] as i64 {
            0 => Mode::Leq,
            1 => Mode::Lt,
            2 => Mode::Gte,
            3 => Mode::Gt,
            4 => Mode::Eq,
            5 => Mode::Neq,
            6 => Mode::Member,
            m => return Err(ctx.err(format!("node {i} has unknown mode {m}"))),
        };
        let set = if mode == Mode::Member {
            // The members of the k-th membership node, up to the k-th NaN.
            let set: Vec<f64> = members.by_ref().take_while(|v| !v.is_nan()).collect();
            if set.is_empty() {
                return Err(ctx.err(format!("membership node {i} has no members")));
            }
            set
        } else {
            Vec::new()
        };
        forest.branches.push(Branch {
            feature: index(ctx, "nodes_featureids", features[i])?,
            mode,
            split: splits[i],
            members: set,
            missing_goes_true: missing.get(i).is_some_and(|&m| m != 0),
            on_true: next(true_ids[i], true_leafs[i])?,
            on_false: next(false_ids[i], false_leafs[i])?,
        });
    }
    for &r in ints(ctx, "tree_roots")? {
        let r = index(ctx, "tree_roots", r)?;
        let b = forest
            .branches
            .get(r)
            .ok_or_else(|| ctx.err(format!("tree root {r} is not a node")))?;
        // A root whose both branches are the same leaf is that leaf.
        let root = match (b.on_true, b.on_false) {
            (Next::Leaf(a), Next::Leaf(c)) if a == c => Next::Leaf(a),
            _ => Next::Node(r),
        };
        forest.roots.push(root);
    }
    let aggregate = match ctx.attr_int("aggregate_function", 1)? {
        0 => Aggregate::Average,
        1 => Aggregate::Sum,
        2 => Aggregate::Min,
        3 => Aggregate::Max,
        other => return Err(ctx.err(format!("unknown aggregate_function {other}"))),
    };
    let transform = match ctx.attr_int("post_transform", 0)? {
        0 => "NONE",
        1 => "SOFTMAX",
        2 => "LOGISTIC",
        3 => "SOFTMAX_ZERO",
        4 => "PROBIT",
        other => return Err(ctx.err(format!("unknown post_transform {other}"))),
    };
    forest.validate(f).map_err(|e| ctx.err(e))?;
    let unreached = match (x.dtype(), aggregate) {
        (DType::Float, Aggregate::Min) => f64::from(f32::MAX),
        (DType::Float, _) => f64::from(f32::MIN),
        (DType::Float16, Aggregate::Min) => 65504.0,
        (DType::Float16, _) => -65504.0,
        (_, Aggregate::Min) => f64::MAX,
        _ => f64::MIN,
    };
    let mut scores = forest
        .predict(&xv, f, aggregate, unreached)
        .map_err(|e| ctx.err(e))?;
    for row in scores.chunks_mut(n_targets.max(1)) {
        post_transform(transform, row).map_err(|e| ctx.err(e))?;
    }
    let out = Tensor::from_vec(&[n, n_targets], scores)?;
    let dtype = if x.dtype().is_float() {
        x.dtype()
    } else {
        DType::Float
    };
    one(cast_tensor(&out, dtype)?)
}

/// A float list attribute given either as `{name}_as_tensor` (opset 3+) or as `{name}`, as f64.
pub(super) fn floats_or_tensor(ctx: &KernelCtx, name: &str) -> Result<Vec<f64>> {
    match tensor_f64(ctx, &format!("{name}_as_tensor"))? {
        Some(v) => Ok(v),
        None => Ok(ctx
            .attr_floats(name)
            .unwrap_or_default()
            .iter()
            .map(|&v| f64::from(v))
            .collect()),
    }
}

/// The leaf weights of an opset 1-4 ensemble: entry k adds `weights[k]` to output `ids[k]`
/// at leaf (`trees[k]`, `nodes[k]`). `what` names the attributes ("target", "class").
pub(super) struct LeafWeights<'a> {
    pub what: &'static str,
    pub trees: &'a [i64],
    pub nodes: &'a [i64],
    pub ids: &'a [i64],
    pub weights: Vec<f64>,
}

/// Builds the forest of TreeEnsembleRegressor / TreeEnsembleClassifier (opsets 1-4): nodes
/// listed by (tree id, node id) with string modes, roots found as the nodes nothing refers to.
pub(super) fn legacy_forest(
    ctx: &KernelCtx,
    n_targets: usize,
    leaf: LeafWeights,
) -> Result<Forest> {
    let tree_ids = ints(ctx, "nodes_treeids")?;
    let node_ids = ints(ctx, "nodes_nodeids")?;
    let features = ints(ctx, "nodes_featureids")?;
    let modes = ctx
        .attr_strings("nodes_modes")
        .ok_or_else(|| ctx.err("attribute 'nodes_modes' is required"))?;
    let values = floats_or_tensor(ctx, "nodes_values")?;
    let true_ids = ints(ctx, "nodes_truenodeids")?;
    let false_ids = ints(ctx, "nodes_falsenodeids")?;
    let missing = ctx
        .attr_ints("nodes_missing_value_tracks_true")
        .unwrap_or_default();
    let count = tree_ids.len();
    let lists = [
        node_ids.len(),
        features.len(),
        modes.len(),
        values.len(),
        true_ids.len(),
        false_ids.len(),
    ];
    if lists.iter().any(|&l| l != count) || !(missing.is_empty() || missing.len() == count) {
        return Err(ctx.err(format!(
            "the nodes_* attributes have different lengths ({count} tree ids)"
        )));
    }
    // Branches and leaves get dense indices; (tree, node id) -> where it went.
    let mut place: BTreeMap<(i64, i64), Next> = BTreeMap::new();
    let mut position: BTreeMap<(i64, i64), usize> = BTreeMap::new();
    let (mut n_branches, mut n_leaves) = (0, 0);
    for i in 0..count {
        position.insert((tree_ids[i], node_ids[i]), i);
        let next = if modes[i] == "LEAF" {
            n_leaves += 1;
            Next::Leaf(n_leaves - 1)
        } else {
            n_branches += 1;
            Next::Node(n_branches - 1)
        };
        if place.insert((tree_ids[i], node_ids[i]), next).is_some() {
            return Err(ctx.err(format!(
                "node ({}, {}) is listed twice",
                tree_ids[i], node_ids[i]
            )));
        }
    }
    let mut forest = Forest {
        leaves: vec![Vec::new(); n_leaves],
        n_targets,
        ..Default::default()
    };
    let child = |tree: i64, id: i64| {
        place
            .get(&(tree, id))
            .copied()
            .ok_or_else(|| ctx.err(format!("tree {tree} has no node {id}")))
    };
    let mut referenced = vec![false; count];
    for i in 0..count {
        if modes[i] == "LEAF" {
            continue;
        }
        let mode = match modes[i].as_str() {
            "BRANCH_LEQ" => Mode::Leq,
            "BRANCH_LT" => Mode::Lt,
            "BRANCH_GTE" => Mode::Gte,
            "BRANCH_GT" => Mode::Gt,
            "BRANCH_EQ" => Mode::Eq,
            "BRANCH_NEQ" => Mode::Neq,
            other => return Err(ctx.err(format!("node {i} has unknown mode '{other}'"))),
        };
        for id in [true_ids[i], false_ids[i]] {
            if let Some(&j) = position.get(&(tree_ids[i], id)) {
                referenced[j] = true;
            }
        }
        forest.branches.push(Branch {
            feature: index(ctx, "nodes_featureids", features[i])?,
            mode,
            split: values[i],
            members: Vec::new(),
            missing_goes_true: missing.get(i).is_some_and(|&m| m != 0),
            on_true: child(tree_ids[i], true_ids[i])?,
            on_false: child(tree_ids[i], false_ids[i])?,
        });
    }
    // Each tree's root is its node that no branch refers to.
    let mut roots: BTreeMap<i64, Next> = BTreeMap::new();
    for i in (0..count).filter(|&i| !referenced[i]) {
        let at = child(tree_ids[i], node_ids[i])?;
        if roots.insert(tree_ids[i], at).is_some() {
            return Err(ctx.err(format!("tree {} has more than one root", tree_ids[i])));
        }
    }
    forest.roots = roots.into_values().collect();
    let what = leaf.what;
    if [leaf.nodes.len(), leaf.ids.len(), leaf.weights.len()]
        .iter()
        .any(|&l| l != leaf.trees.len())
    {
        return Err(ctx.err(format!("the {what}_* attributes have different lengths")));
    }
    for k in 0..leaf.trees.len() {
        match child(leaf.trees[k], leaf.nodes[k])? {
            Next::Leaf(l) => forest.leaves[l].push((
                index(ctx, &format!("{what}_ids"), leaf.ids[k])?,
                leaf.weights[k],
            )),
            Next::Node(_) => {
                return Err(ctx.err(format!(
                    "{what} weight {k} points at branch node ({}, {})",
                    leaf.trees[k], leaf.nodes[k]
                )))
            }
        }
    }
    Ok(forest)
}

fn tree_ensemble_regressor(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let (n, f, xv) = input_rows(ctx, x)?;
    let n_targets = index(ctx, "n_targets", ctx.attr_int("n_targets", 1)?)?;
    let leaf = LeafWeights {
        what: "target",
        trees: ints(ctx, "target_treeids")?,
        nodes: ints(ctx, "target_nodeids")?,
        ids: ints(ctx, "target_ids")?,
        weights: floats_or_tensor(ctx, "target_weights")?,
    };
    let forest = legacy_forest(ctx, n_targets, leaf)?;
    let aggregate = match ctx.attr_string("aggregate_function", "SUM")?.as_str() {
        "AVERAGE" => Aggregate::Average,
        "SUM" => Aggregate::Sum,
        "MIN" => Aggregate::Min,
        "MAX" => Aggregate::Max,
        other => return Err(ctx.err(format!("unknown aggregate_function '{other}'"))),
    };
    let base = floats_or_tensor(ctx, "base_values")?;
    if !base.is_empty() && base.len() != n_targets {
        return Err(ctx.err(format!(
            "{} base_values for {n_targets} targets",
            base.len()
        )));
    }
    let transform = ctx.attr_string("post_transform", "NONE")?;
    forest.validate(f).map_err(|e| ctx.err(e))?;
    let unreached = if aggregate == Aggregate::Min {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    let mut scores = forest
        .predict(&xv, f, aggregate, unreached)
        .map_err(|e| ctx.err(e))?;
    for row in scores.chunks_mut(n_targets.max(1)) {
        for (t, s) in row.iter_mut().enumerate() {
            // A target no leaf reached scores 0 before the base value.
            if s.is_infinite() && matches!(aggregate, Aggregate::Min | Aggregate::Max) {
                *s = 0.0;
            }
            *s += base.get(t).copied().unwrap_or(0.0);
        }
        post_transform(&transform, row).map_err(|e| ctx.err(e))?;
    }
    one(Tensor::from_vec(
        &[n, n_targets],
        scores.into_iter().map(|s| s as f32).collect(),
    )?)
}
