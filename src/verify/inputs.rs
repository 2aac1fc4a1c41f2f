//! Inputs that satisfy the model: values for its symbolic and unknown dims under which the
//! original runs, and integer inputs that stay in range.
//!
//! Every symbolic dim of a graph input (and every unknown one, named `?input:axis`) is a
//! parameter, 1 unless the user set it. When the original fails on that assignment, a search
//! moves one parameter at a time through candidate values taken from the graph (its declared
//! dims, the dims of its initializers, the elements of its small integer constants such as
//! Reshape and Expand targets, their products, and small numbers), keeping a move when the run
//! gets further through the graph than before (the failing node's place in topological order),
//! until the original runs or the budget is spent.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use onnx_proto::tensor_proto::DataType;
use onnx_proto::tensor_shape_proto::dimension;
use onnx_proto::{type_proto, ModelProto, TensorProto};
use onnx_ref::{RefError, Tensor, Value};

/// At most this many runs of the original while searching.
const MAX_RUNS: usize = 2000;
/// The search stops after this long, or after this many times the first run's time, but not
/// before `MIN_TIME` (a first run that fails at once says little of what a later one costs:
/// CLIP's search, whose first run fails at its first Conv, takes about 0.8 s on a loaded
/// 2-core machine).
const MAX_TIME: Duration = Duration::from_secs(30);
const MAX_RUN_FACTOR: u32 = 40;
const MIN_TIME: Duration = Duration::from_secs(6);
/// Runs the search makes before its time budget applies (`MAX_TIME` still does).
const MIN_RUNS: usize = 200;

/// Gives every unknown dim of a graph input (no value, no name, or -1) a name of its own,
/// `?input:axis`, so the search can set it; dims the user named keep their names.
pub(crate) fn name_unknown_dims(model: &mut ModelProto) {
    let Some(g) = model.graph.as_mut() else {
        return;
    };
    let inits: BTreeSet<String> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    for vi in &mut g.input {
        let name = vi.name.clone().unwrap_or_default();
        if inits.contains(&name) {
            continue;
        }
        let Some(type_proto::Value::TensorType(tt)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        else {
            continue;
        };
        let Some(shape) = tt.shape.as_mut() else {
            continue;
        };
        for (axis, d) in shape.dim.iter_mut().enumerate() {
            let unknown = match &d.value {
                None => true,
                Some(dimension::Value::DimValue(v)) => *v < 0,
                Some(dimension::Value::DimParam(p)) => p.is_empty(),
            };
            if unknown {
                d.value = Some(dimension::Value::DimParam(format!("?{name}:{axis}")));
            }
        }
    }
}

/// The search never tries dims that give one input more elements than this.
pub(crate) const MAX_SEARCH_ELEMENTS: u128 = 1 << 22;

/// The most elements any graph input has under `dims` (unset parameters count as 1).
pub(crate) fn largest_input(model: &ModelProto, dims: &BTreeMap<String, i64>) -> u128 {
    let Some(g) = model.graph.as_ref() else {
        return 0;
    };
    g.input
        .iter()
        .filter_map(
            |vi| match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(tt)) => tt.shape.as_ref(),
                _ => None,
            },
        )
        .map(|shape| {
            shape
                .dim
                .iter()
                .map(|d| match &d.value {
                    Some(dimension::Value::DimValue(v)) => (*v).max(0) as u128,
                    Some(dimension::Value::DimParam(p)) => {
                        dims.get(p).copied().unwrap_or(1).max(0) as u128
                    }
                    None => 1,
                })
                .fold(1u128, |a, b| a.saturating_mul(b))
        })
        .max()
        .unwrap_or(0)
}

/// The dim parameters of the graph inputs, in order of first appearance.
pub(crate) fn dim_params(model: &ModelProto) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(g) = model.graph.as_ref() else {
        return out;
    };
    for vi in &g.input {
        if let Some(type_proto::Value::TensorType(tt)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        {
            for d in tt.shape.iter().flat_map(|s| &s.dim) {
                if let Some(dimension::Value::DimParam(p)) = &d.value {
                    if !out.contains(p) {
                        out.push(p.clone());
                    }
                }
            }
        }
    }
    out
}

/// Candidate values for dims: small numbers, the graph's declared and initializer dims, the
/// elements of its small integer constants and their products; ascending, at most 48.
pub(crate) fn candidates(model: &ModelProto) -> Vec<i64> {
    let mut set: BTreeSet<i64> = [1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64].into_iter().collect();
    let Some(g) = model.graph.as_ref() else {
        return set.into_iter().collect();
    };
    let add_vec = |v: &[i64], set: &mut BTreeSet<i64>| {
        let mut prod: i64 = 1;
        for &x in v {
            if (1..=1 << 16).contains(&x) {
                set.insert(x);
                prod = prod.saturating_mul(x);
            }
        }
        if (1..=1 << 16).contains(&prod) {
            set.insert(prod);
        }
    };
    let small_ints = |t: &TensorProto| -> Option<Vec<i64>> {
        let n: i64 = t.dims.iter().product();
        if n > 64 || t.dims.len() > 1 {
            return None;
        }
        match Tensor::from_proto(t).ok()? {
            t @ (Tensor::I64(_) | Tensor::I32(_)) => t.to_i64_vec().ok(),
            _ => None,
        }
    };
    for t in &g.initializer {
        add_vec(&t.dims, &mut set);
        if let Some(v) = small_ints(t) {
            add_vec(&v, &mut set);
        }
    }
    for n in &g.node {
        for a in &n.attribute {
            if let Some(t) = &a.t {
                if let Some(v) = small_ints(t) {
                    add_vec(&v, &mut set);
                }
            }
            add_vec(&a.ints, &mut set);
        }
    }
    for vi in g.value_info.iter().chain(&g.output).chain(&g.input) {
        if let Some(type_proto::Value::TensorType(tt)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        {
            let dims: Vec<i64> = tt
                .shape
                .iter()
                .flat_map(|s| &s.dim)
                .filter_map(|d| match d.value {
                    Some(dimension::Value::DimValue(v)) => Some(v),
                    _ => None,
                })
                .collect();
            add_vec(&dims, &mut set);
        }
    }
    set.into_iter().take(48).collect()
}

/// How far a failed run got: the failing node's place in the graph's topological order (the
/// order the interpreter runs it in); -1 for a failure before any node (a bad input).
pub(crate) fn progress(order: &BTreeMap<usize, usize>, e: &RefError) -> i64 {
    match e {
        RefError::MissingKernel { node, .. } | RefError::Kernel { node, .. } => node
            .index
            .and_then(|i| order.get(&i))
            .map_or(-1, |&p| p as i64),
        _ => -1,
    }
}

/// Node index -> its place in a topological order of the main graph (Kahn's algorithm,
/// preferring the original order, as the interpreter plans).
pub(crate) fn topo_positions(model: &ModelProto) -> BTreeMap<usize, usize> {
    let mut out = BTreeMap::new();
    let Some(g) = model.graph.as_ref() else {
        return out;
    };
    let mut producer: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(o, i);
        }
    }
    let mut indeg = vec![0usize; g.node.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); g.node.len()];
    for (i, n) in g.node.iter().enumerate() {
        let deps: BTreeSet<usize> = n
            .input
            .iter()
            .filter_map(|x| producer.get(x.as_str()).copied())
            .filter(|&p| p != i)
            .collect();
        indeg[i] = deps.len();
        for p in deps {
            users[p].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..g.node.len()).filter(|&i| indeg[i] == 0).collect();
    while let Some(i) = ready.pop_first() {
        out.insert(i, out.len());
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.insert(u);
            }
        }
    }
    out
}

/// The outcome of trying one assignment: `Ok` when the original ran, else how far it got and
/// why it failed.
pub(crate) type Attempt = Result<(), (i64, String)>;

/// An error message without its numbers: two failures of one node that read the same this
/// way fail the same check (a move that only changes the shapes in the message has not made
/// progress).
fn normalized(why: &str) -> String {
    why.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// The moves of the search from `current`: one parameter to a candidate; every parameter to
/// the same candidate; two parameters to the same candidate (dims that must agree with each
/// other and with a constant at once: the channels and spatial dims of a Conv input, the two
/// sides of a Concat that a MatMul then reads).
fn moves(
    current: &BTreeMap<String, i64>,
    params: &[String],
    candidates: &[i64],
) -> Vec<BTreeMap<String, i64>> {
    let mut out = Vec::new();
    let with = |pairs: &[(&String, i64)]| {
        let mut m = current.clone();
        for (p, v) in pairs {
            m.insert((*p).clone(), *v);
        }
        m
    };
    for p in params {
        for &v in candidates {
            out.push(with(&[(p, v)]));
        }
    }
    for &v in candidates {
        out.push(with(&params.iter().map(|p| (p, v)).collect::<Vec<_>>()));
    }
    for (i, p) in params.iter().enumerate() {
        for q in &params[i + 1..] {
            for &v in candidates {
                out.push(with(&[(p, v), (q, v)]));
            }
        }
    }
    out.retain(|m| m != current);
    out
}

/// The moves from `dims` in the order the search tries them: first with the numbers the last
/// failure names (a failing check usually prints the value a dim must take), then with every
/// candidate.
fn ordered_moves(
    dims: &BTreeMap<String, i64>,
    params: &[String],
    candidates: &[i64],
    why: &str,
) -> Vec<BTreeMap<String, i64>> {
    let mut named: Vec<i64> = Vec::new();
    for word in why.split(|c: char| !c.is_ascii_digit()) {
        if let Ok(v) = word.parse::<i64>() {
            if (1..=1 << 16).contains(&v) && !named.contains(&v) {
                named.push(v);
            }
        }
    }
    let mut out = moves(dims, params, &named);
    out.extend(moves(dims, params, candidates));
    out
}

/// Where the original's outputs break the dim names of the graph's declared output shapes
/// under `dims`: a `dim_param` whose size differs from the one the inputs bound to that name
/// (the inputs' params at `dims`, 1 where unset) or from another output's dim of the same name
/// (an output whose rank differs from its declaration, and fixed sizes, are left alone: a
/// stale declaration binds nothing). ONNX's dimension variables are not scoped: one name is one
/// value across the whole graph, outputs included (IR.md, "Static tensor shapes"), so inputs
/// under which the outputs disagree with their declaration are outside the model's interface,
/// however the original runs on them. The message names both sizes, for the dims search.
pub(crate) fn output_dims_broken(
    model: &ModelProto,
    dims: &BTreeMap<String, i64>,
    outputs: &[(String, Value)],
) -> Option<String> {
    let g = model.graph.as_ref()?;
    let mut bound: BTreeMap<String, i64> = dim_params(model)
        .into_iter()
        .map(|p| {
            let v = dims.get(&p).copied().unwrap_or(1);
            (p, v)
        })
        .collect();
    for vi in &g.output {
        let (Some(name), Some(type_proto::Value::TensorType(tt))) = (
            vi.name.as_deref(),
            vi.r#type.as_ref().and_then(|t| t.value.as_ref()),
        ) else {
            continue;
        };
        let Some(shape) = tt.shape.as_ref() else {
            continue;
        };
        let Some(Value::Tensor(t)) = outputs.iter().find(|(n, _)| n == name).map(|(_, v)| v) else {
            continue;
        };
        let actual = t.shape();
        // A rank or a fixed size the output does not have is the declaration's own error
        // (exporters leave stale shapes); only the names bind dims together.
        if actual.len() != shape.dim.len() {
            continue;
        }
        for (axis, (d, &n)) in shape.dim.iter().zip(actual).enumerate() {
            let n = n as i64;
            match &d.value {
                Some(dimension::Value::DimParam(p)) if !p.is_empty() => match bound.get(p) {
                    Some(&v) if v != n => {
                        return Some(format!(
                            "output '{name}' dim {axis} is {n} where its declared dim '{p}' is {v}"
                        ))
                    }
                    Some(_) => {}
                    None => {
                        bound.insert(p.clone(), n);
                    }
                },
                _ => {}
            }
        }
    }
    None
}

/// The dims a user sends: `dims`, with every dim param whose name is an arithmetic expression
/// of other dim params (`past_sequence_length + sequence_length`, as Optimum names an attention
/// mask's length; `a - b`, `a * b`, or one of them and an integer) set to that expression's
/// value. ONNX gives such a name no arithmetic (it is a name like any other), so these are one
/// choice among the dims the spec allows, the realistic one; `None` when no param is such an
/// expression. Params given in `dims` are left as given.
pub(crate) fn realistic_dims(
    dims: &BTreeMap<String, i64>,
    params: &[String],
) -> Option<BTreeMap<String, i64>> {
    let value = |term: &str, d: &BTreeMap<String, i64>| -> Option<i64> {
        let term = term.trim();
        match term.parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => params
                .iter()
                .any(|p| p == term)
                .then(|| d.get(term).copied().unwrap_or(1)),
        }
    };
    let mut out = dims.clone();
    let mut any = false;
    for p in params {
        if dims.contains_key(p) {
            continue;
        }
        let Some((at, op)) = p
            .char_indices()
            .find(|&(_, c)| matches!(c, '+' | '-' | '*'))
            .filter(|&(i, _)| i > 0)
        else {
            continue;
        };
        let (lhs, rhs) = (&p[..at], &p[at + 1..]);
        if rhs.contains(['+', '-', '*']) {
            continue;
        }
        let (Some(a), Some(b)) = (value(lhs, dims), value(rhs, dims)) else {
            continue;
        };
        // Both sides name something (two integers are no dim of the graph's).
        if lhs.trim().parse::<i64>().is_ok() && rhs.trim().parse::<i64>().is_ok() {
            continue;
        }
        let v = match op {
            '+' => a.checked_add(b),
            '-' => a.checked_sub(b),
            _ => a.checked_mul(b),
        };
        if let Some(v) = v.filter(|&v| v >= 1) {
            out.insert(p.clone(), v);
            any = true;
        }
    }
    any.then_some(out)
}

/// Searches dims under which `run` succeeds, starting from `start`. Returns the dims and
/// `None`, or the best dims found and the last failure's message. `params` are the names it
/// may change (those the user set are left out by the caller).
///
/// Each round tries every move from the current dims and keeps the first that gets further
/// (a later failing node). When none does, it looks one move past each move that fails the
/// same node for a reason not seen before (one check of the node now holds, another fails):
/// a Conv whose channels and window both constrain its input needs two moves.
pub(crate) fn search_dims(
    start: BTreeMap<String, i64>,
    params: &[String],
    candidates: &[i64],
    run: &mut dyn FnMut(&BTreeMap<String, i64>) -> Attempt,
) -> (BTreeMap<String, i64>, Option<String>) {
    let t0 = Instant::now();
    let mut current = start;
    let first = run(&current);
    let one_run = t0.elapsed();
    let (mut best, mut why) = match first {
        Ok(()) => return (current, None),
        Err((p, why)) => (p, why),
    };
    let mut seen: BTreeSet<(i64, String)> = BTreeSet::from([(best, normalized(&why))]);
    let budget = MAX_TIME.min(one_run * MAX_RUN_FACTOR).max(MIN_TIME);
    let mut runs = 1;
    // The first `MIN_RUNS` tries stop only at `MAX_TIME`: where runs are cheap, what the search
    // finds does not depend on how fast the machine is.
    let spent = |runs: usize| {
        let elapsed = t0.elapsed();
        runs >= MAX_RUNS || elapsed > MAX_TIME || (runs >= MIN_RUNS && elapsed > budget)
    };
    let mut tried: BTreeSet<BTreeMap<String, i64>> = BTreeSet::from([current.clone()]);
    'rounds: loop {
        // The moves from the current dims, then (one level deep) from each sideways move.
        let mut sources = vec![(current.clone(), why.clone())];
        let mut i = 0;
        while let Some((from, from_why)) = sources.get(i).cloned() {
            for trial in ordered_moves(&from, params, candidates, &from_why) {
                if !tried.insert(trial.clone()) {
                    continue;
                }
                if spent(runs) {
                    return (current, Some(why));
                }
                runs += 1;
                match run(&trial) {
                    Ok(()) => return (trial, None),
                    Err((progress, w)) if progress > best => {
                        seen.insert((progress, normalized(&w)));
                        (best, why, current) = (progress, w, trial);
                        continue 'rounds;
                    }
                    Err((progress, w)) => {
                        if i == 0 && progress == best && seen.insert((progress, normalized(&w))) {
                            sources.push((trial, w));
                        }
                    }
                }
            }
            i += 1;
        }
        return (current, Some(why));
    }
}

/// Dims the search found (`found`, where `run` succeeds) made as small as they go: each group
/// of params that share a value, then each param alone, moved to the smallest candidate below
/// its value under which `run` still succeeds (never to `avoid`, the realistic dims the trials
/// already take). A move such as "every param to 64" that got the search past one constraint
/// (a head size of 64 named by a dim param) leaves the others larger than they need to be, and
/// the check's trials then run the model on a batch of 64 sequences of 64 tokens. Smaller dims
/// are as much inputs of the model (the search starts from every param at 1); the trials take
/// seconds instead of minutes. At most `MIN_RUNS` runs and `MIN_TIME`.
pub(crate) fn shrink(
    mut found: BTreeMap<String, i64>,
    params: &[String],
    candidates: &[i64],
    run: &mut dyn FnMut(&BTreeMap<String, i64>) -> Attempt,
    avoid: Option<&BTreeMap<String, i64>>,
) -> BTreeMap<String, i64> {
    let t0 = Instant::now();
    let mut groups: Vec<Vec<&String>> = Vec::new();
    let mut values: Vec<i64> = params
        .iter()
        .filter_map(|p| found.get(p).copied())
        .collect();
    values.sort_unstable();
    values.dedup();
    for v in values {
        let group: Vec<&String> = params
            .iter()
            .filter(|p| found.get(*p) == Some(&v))
            .collect();
        if group.len() > 1 {
            groups.push(group);
        }
    }
    groups.extend(params.iter().map(|p| vec![p]));
    let mut runs = 0;
    for group in groups {
        let Some(&now) = group.first().and_then(|p| found.get(*p)) else {
            continue;
        };
        if group.iter().any(|p| found.get(*p) != Some(&now)) {
            continue; // an earlier move changed part of the group
        }
        for &v in candidates.iter().filter(|&&v| v < now) {
            let mut trial = found.clone();
            for p in &group {
                trial.insert((*p).clone(), v);
            }
            if Some(&trial) == avoid {
                continue;
            }
            if runs >= MIN_RUNS || t0.elapsed() > MIN_TIME {
                return found;
            }
            runs += 1;
            if run(&trial).is_ok() {
                found = trial;
                break;
            }
        }
    }
    found
}

/// The values that carry a graph input's integers unchanged (Cast, Identity, reshapes), each
/// mapped to that input (the inputs to themselves).
fn input_origins(g: &onnx_proto::GraphProto) -> BTreeMap<String, String> {
    let mut origin: BTreeMap<String, String> = g
        .input
        .iter()
        .filter_map(|v| v.name.clone())
        .map(|n| (n.clone(), n))
        .collect();
    for n in &g.node {
        let pass = matches!(
            n.op_type.as_deref(),
            Some("Cast" | "Identity" | "Reshape" | "Unsqueeze" | "Squeeze" | "Flatten" | "Expand")
        ) && n.domain.as_deref().unwrap_or("").is_empty();
        if pass {
            if let (Some(src), Some(o)) = (
                n.input.first().and_then(|i| origin.get(i)).cloned(),
                n.output.first(),
            ) {
                origin.insert(o.clone(), src);
            }
        }
    }
    origin
}

/// What an integer graph input is, read as a shape by the node that consumes it (directly or
/// through [`input_origins`]' ops).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ShapeRole {
    /// A Reshape's target; the data's declared dims (a name, or unknown) when it has a type.
    Reshape(Option<Vec<DeclaredDim>>),
    /// Expand's target or Tile's repeats: ones broadcast with anything (and repeat once).
    Broadcast,
    /// ConstantOfShape's shape: small sizes.
    Sizes,
    /// Axes that must be distinct (Unsqueeze's, a Reduce's, Slice's): 0, 1, ...
    Distinct,
    /// Slice's steps: ones.
    Ones,
    /// Split's sizes: they sum to the data's dim on the split axis (when declared).
    Split(Option<DeclaredDim>),
    /// Squeeze's axes: the data's declared dims of size 1 (when it has enough).
    Squeeze(Option<Vec<DeclaredDim>>),
    /// OneHot's depth: a few classes.
    Positive,
    /// Resize's and Upsample's scales (floats): 1 on the first two axes (batch and channels) of
    /// a tensor of rank 3 or more, 2 on the others.
    Scales,
    /// Values the declarations determine (ints or floats; a shorter list repeats its last):
    /// NonMaxSuppression's IoU threshold, AffineGrid's size, Col2Im's image and block shapes,
    /// STFT's frame step and length, DFT's axis, MelWeightMatrix's parameters.
    Values(Vec<f64>),
    /// AffineGrid's size: the batch is theta's first dim, then one channel and 2, 3 (, 4).
    AffineSize(DeclaredDim),
    /// ImageDecoder's encoded stream (uint8): a binary PNM image of the declared output's
    /// height and width when the stream's declared length holds one (a comment pads it), else
    /// one row as wide as the length allows.
    Image(Option<(i64, i64)>),
}

impl ShapeRole {
    /// Whether the role also gives a float input its values (OneHot's depth, Resize's scales).
    fn takes_floats(&self) -> bool {
        matches!(
            self,
            ShapeRole::Positive | ShapeRole::Scales | ShapeRole::Values(_)
        )
    }
}

/// One dim of a declared shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeclaredDim {
    Fixed(i64),
    Named(String),
    Unknown,
}

/// The integer graph inputs a node reads as a shape or axes (a Reshape, Expand or Tile target,
/// ConstantOfShape's shape, Unsqueeze, Squeeze, Reduce and Slice axes, Slice's steps, Split's
/// sizes, CumSum's and CumProd's axis, Resize's sizes), Resize's scales and OneHot's depth (an
/// input read so and also as indices keeps its index bound instead): random values would make the original fail on them, so [`shape_safe`] gives them
/// values their consumer takes.
pub(crate) fn shape_roles(model: &ModelProto) -> BTreeMap<String, ShapeRole> {
    let mut out = BTreeMap::new();
    let Some(g) = model.graph.as_ref() else {
        return out;
    };
    let origin = input_origins(g);
    let declared: BTreeMap<&str, Vec<DeclaredDim>> = g
        .input
        .iter()
        .chain(&g.value_info)
        .chain(&g.output)
        .filter_map(|vi| {
            let tt = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(tt)) => tt,
                _ => return None,
            };
            let dims = tt
                .shape
                .as_ref()?
                .dim
                .iter()
                .map(|d| match &d.value {
                    Some(dimension::Value::DimValue(v)) if *v >= 0 => DeclaredDim::Fixed(*v),
                    Some(dimension::Value::DimParam(p)) => DeclaredDim::Named(p.clone()),
                    _ => DeclaredDim::Unknown,
                })
                .collect();
            Some((vi.name.as_deref()?, dims))
        })
        .chain(g.initializer.iter().filter_map(|t| {
            Some((
                t.name.as_deref()?,
                t.dims.iter().map(|&d| DeclaredDim::Fixed(d)).collect(),
            ))
        }))
        .collect();
    for n in &g.node {
        if !n.domain.as_deref().unwrap_or("").is_empty() {
            continue;
        }
        let data = || {
            n.input
                .first()
                .and_then(|d| declared.get(d.as_str()))
                .cloned()
        };
        let int_attr = |name: &str| {
            n.attribute
                .iter()
                .find(|a| a.name.as_deref() == Some(name))
                .and_then(|a| a.i)
        };
        let ints_attr = |name: &str| {
            n.attribute
                .iter()
                .find(|a| a.name.as_deref() == Some(name))
                .map(|a| a.ints.clone())
        };
        // The declared dims of a node's input or output when all are fixed.
        let fixed = |name: Option<&String>| -> Option<Vec<i64>> {
            declared
                .get(name?.as_str())?
                .iter()
                .map(|d| match d {
                    DeclaredDim::Fixed(x) => Some(*x),
                    _ => None,
                })
                .collect()
        };
        let give = |out: &mut BTreeMap<String, ShapeRole>, slot: usize, role: ShapeRole| {
            if let Some(src) = n.input.get(slot).and_then(|i| origin.get(i)) {
                out.entry(src.clone()).or_insert(role);
            }
        };
        let (slot, role) = match n.op_type.as_deref() {
            Some("Reshape") => (1, ShapeRole::Reshape(data())),
            Some("Expand" | "Tile") => (1, ShapeRole::Broadcast),
            Some("ConstantOfShape") => (0, ShapeRole::Sizes),
            Some("Unsqueeze") => (1, ShapeRole::Distinct),
            Some(op) if op.starts_with("Reduce") => (1, ShapeRole::Distinct),
            Some("Slice") => {
                give(&mut out, 3, ShapeRole::Distinct);
                (4, ShapeRole::Ones)
            }
            Some("Split" | "SplitToSequence") => {
                let axis = int_attr("axis").unwrap_or(0);
                let dim = data().and_then(|d| {
                    let a = if axis < 0 {
                        axis + d.len() as i64
                    } else {
                        axis
                    };
                    usize::try_from(a).ok().and_then(|a| d.get(a).cloned())
                });
                (1, ShapeRole::Split(dim))
            }
            Some("Squeeze") => (1, ShapeRole::Squeeze(data())),
            Some("OneHot") => (1, ShapeRole::Positive),
            Some("CumSum" | "CumProd") => (1, ShapeRole::Distinct),
            Some("Resize") => {
                give(&mut out, 3, ShapeRole::Sizes);
                (2, ShapeRole::Scales)
            }
            Some("Upsample") => (1, ShapeRole::Scales),
            Some("NonMaxSuppression") => (3, ShapeRole::Values(vec![0.5])),
            Some("AffineGrid") => {
                let batch = data().and_then(|d| d.first().cloned());
                (
                    1,
                    ShapeRole::AffineSize(batch.unwrap_or(DeclaredDim::Unknown)),
                )
            }
            Some("Col2Im") => {
                let Some((image, block)) = fixed(n.input.first()).and_then(|input| {
                    col2im_shapes(
                        &input,
                        fixed(n.output.first()).as_deref(),
                        ints_attr("strides"),
                        ints_attr("pads"),
                        ints_attr("dilations"),
                    )
                }) else {
                    continue;
                };
                give(&mut out, 2, ShapeRole::Values(block));
                (1, ShapeRole::Values(image))
            }
            Some("STFT") => {
                let Some(signal) = fixed(n.input.first()).filter(|d| d.len() == 3) else {
                    continue;
                };
                let window = fixed(n.input.get(2).filter(|w| !w.is_empty()));
                let length = match window.as_deref() {
                    Some([w]) => *w,
                    _ => signal[1].min(16),
                };
                if length < 1 || length > signal[1] {
                    continue;
                }
                give(&mut out, 3, ShapeRole::Values(vec![length as f64]));
                (1, ShapeRole::Values(vec![(length / 2).max(1) as f64]))
            }
            Some("DFT") => {
                // The axis input (opset 20 on): the first axis but the last with 2 or more.
                let Some(d) = fixed(n.input.first()) else {
                    continue;
                };
                let Some(axis) = (0..d.len().saturating_sub(1)).find(|&a| d[a] >= 2) else {
                    continue;
                };
                (2, ShapeRole::Values(vec![axis as f64]))
            }
            Some("MelWeightMatrix") => {
                // Bins and DFT length from the declared output [dft/2 + 1, bins].
                let (bins, dft) = match fixed(n.output.first()).as_deref() {
                    Some([half, bins]) if *half >= 2 && *bins >= 1 => (*bins, 2 * (half - 1)),
                    _ => (8, 16),
                };
                for (slot, v) in [(1, dft as f64), (2, 8192.0), (3, 0.0), (4, 4096.0)] {
                    give(&mut out, slot, ShapeRole::Values(vec![v]));
                }
                (0, ShapeRole::Values(vec![bins as f64]))
            }
            Some("ImageDecoder") => {
                let hw = fixed(n.output.first()).and_then(|d| match d.as_slice() {
                    [h, w, _] if *h >= 1 && *w >= 1 => Some((*h, *w)),
                    _ => None,
                });
                (0, ShapeRole::Image(hw))
            }
            _ => continue,
        };
        give(&mut out, slot, role);
    }
    out
}

/// Col2Im's image and block shapes for an input of fixed dims `[N, C * prod(block), L]`: the
/// declared output's spatial dims as the image where fixed (the block searched so that the
/// blocks number L), else a block of ones and an image of L blocks along the first axis.
fn col2im_shapes(
    input: &[i64],
    output: Option<&[i64]>,
    strides: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
    dilations: Option<Vec<i64>>,
) -> Option<(Vec<f64>, Vec<f64>)> {
    let [_, ck, l] = *input else {
        return None;
    };
    let r = output.map_or(2, |o| o.len().saturating_sub(2)).max(1);
    let at = |v: &Option<Vec<i64>>, i: usize, d: i64| {
        v.as_ref().and_then(|v| v.get(i).copied()).unwrap_or(d)
    };
    let s: Vec<i64> = (0..r).map(|i| at(&strides, i, 1).max(1)).collect();
    let p: Vec<i64> = (0..r)
        .map(|i| at(&pads, i, 0) + at(&pads, i + r, 0))
        .collect();
    let dl: Vec<i64> = (0..r).map(|i| at(&dilations, i, 1).max(1)).collect();
    let blocks =
        |img: i64, k: i64, i: usize| (img + p[i] - dl[i] * (k - 1) - 1).div_euclid(s[i]) + 1;
    let floats = |v: &[i64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    if let Some(image) = output.map(|o| &o[2..]).filter(|o| o.len() == r) {
        // Every block of at most 64 cells over the image.
        let mut k = vec![1i64; r];
        for _ in 0..4096 {
            let n: Option<i64> = (0..r)
                .map(|i| Some(blocks(image[i], k[i], i)).filter(|&b| b >= 1))
                .product();
            let cells: i64 = k.iter().product();
            if n == Some(l) && cells > 0 && ck % cells == 0 {
                return Some((floats(image), floats(&k)));
            }
            // The next block, in odometer order.
            let mut i = 0;
            loop {
                if i == r {
                    return None;
                }
                k[i] += 1;
                if k[i] <= 8 {
                    break;
                }
                k[i] = 1;
                i += 1;
            }
        }
        return None;
    }
    // A block of ones: L blocks along the first axis, one along the others.
    let image: Vec<i64> = (0..r)
        .map(|i| match i {
            0 => (l - 1) * s[0] + 1 - p[0],
            _ => 1 - p[i],
        })
        .collect();
    (image.iter().all(|&x| x >= 1) && l >= 1).then(|| (floats(&image), vec![1.0; r]))
}

/// A binary PNM image of exactly `len` bytes, its pixels taken from `pixels` (cycled): `h` by
/// `w` in colour when that fits (a header comment pads it to the length), else one grey row.
fn pnm_image(len: usize, hw: Option<(i64, i64)>, pixels: &[u8]) -> Option<Vec<u8>> {
    let pixel = |i: usize| pixels.get(i % pixels.len().max(1)).copied().unwrap_or(0);
    let with = |header: String, n: usize| {
        let mut out = header.into_bytes();
        out.extend((0..n).map(pixel));
        out
    };
    if let Some((h, w)) = hw {
        let n = (h * w * 3) as usize;
        let base = format!("P6\n{w} {h}\n255\n");
        match len.checked_sub(base.len() + n) {
            Some(0) => return Some(with(base, n)),
            Some(pad) if pad >= 2 => {
                let header = format!("P6\n#{}\n{w} {h}\n255\n", " ".repeat(pad - 2));
                return Some(with(header, n));
            }
            _ => {}
        }
    }
    // One grey row of w pixels: "P5\nW 1\n255\n" then W bytes.
    (1..len).find_map(|w| {
        let header = format!("P5\n{w} 1\n255\n");
        (header.len() + w == len).then(|| with(header, w))
    })
}

/// A value for an input [`shape_roles`] names, of the drawn value's shape: a Reshape's target
/// is the data's own dims where its declared rank is that length (named dims at their value in
/// `dims`, else 1), else -1 then ones; an Expand target or Tile's repeats ones;
/// ConstantOfShape's sizes 1 or 2 (from the drawn value); distinct axes 0, 1, ...; Slice's
/// steps ones; Split's sizes the data's dim less one per other part, then ones (zeros where the
/// dim is smaller); Squeeze's axes the data's dims of size 1; OneHot's depth 3. A value the
/// declarations do not determine passes unchanged.
pub(crate) fn shape_safe(
    name: &str,
    v: Value,
    roles: &BTreeMap<String, ShapeRole>,
    dims: &BTreeMap<String, i64>,
) -> Value {
    let Some(role) = roles.get(name) else {
        return v;
    };
    match (role, &v) {
        (ShapeRole::Image(hw), Value::Tensor(Tensor::U8(a))) if a.ndim() == 1 => {
            let drawn: Vec<u8> = a.iter().copied().collect();
            return pnm_image(drawn.len(), *hw, &drawn)
                .and_then(|bytes| Tensor::from_vec(&[bytes.len()], bytes).ok())
                .map_or(v, Value::Tensor);
        }
        (ShapeRole::Image(_), _) => return v,
        _ => {}
    }
    let (drawn, shape): (Vec<i64>, Vec<usize>) = match &v {
        Value::Tensor(Tensor::I64(a)) if a.ndim() <= 1 => {
            (a.iter().copied().collect(), a.shape().to_vec())
        }
        Value::Tensor(Tensor::I32(a)) if a.ndim() <= 1 => {
            (a.iter().map(|&x| x as i64).collect(), a.shape().to_vec())
        }
        Value::Tensor(Tensor::F32(a)) if a.ndim() <= 1 && role.takes_floats() => {
            (vec![0; a.len()], a.shape().to_vec())
        }
        Value::Tensor(Tensor::F64(a)) if a.ndim() <= 1 && role.takes_floats() => {
            (vec![0; a.len()], a.shape().to_vec())
        }
        _ => return v,
    };
    let k = drawn.len();
    let dim = |d: &DeclaredDim| match d {
        DeclaredDim::Fixed(x) => Some(*x),
        DeclaredDim::Named(p) => Some(dims.get(p).copied().unwrap_or(1)),
        DeclaredDim::Unknown => None,
    };
    let values: Vec<f64> = match role {
        ShapeRole::Values(given) => (0..k)
            .map(|i| given.get(i).or(given.last()).copied().unwrap_or(1.0))
            .collect(),
        ShapeRole::AffineSize(batch) => (0..k)
            .map(|i| match i {
                0 => dim(batch).unwrap_or(1) as f64,
                1 => 1.0,
                i => i as f64,
            })
            .collect(),
        _ => Vec::new(),
    };
    if !values.is_empty() {
        let made = match &v {
            Value::Tensor(Tensor::I64(_)) => {
                Tensor::from_vec(&shape, values.iter().map(|&x| x as i64).collect())
            }
            Value::Tensor(Tensor::I32(_)) => {
                Tensor::from_vec(&shape, values.iter().map(|&x| x as i32).collect())
            }
            Value::Tensor(Tensor::F32(_)) => {
                Tensor::from_vec(&shape, values.iter().map(|&x| x as f32).collect())
            }
            Value::Tensor(Tensor::F64(_)) => Tensor::from_vec(&shape, values),
            _ => return v,
        };
        return made.map(Value::Tensor).unwrap_or(v);
    }
    let values: Vec<i64> = match role {
        ShapeRole::Values(_) | ShapeRole::AffineSize(_) | ShapeRole::Image(_) => return v,
        ShapeRole::Distinct => (0..k as i64).collect(),
        ShapeRole::Ones => vec![1; k],
        ShapeRole::Positive => vec![3; k],
        ShapeRole::Scales => (0..k)
            .map(|i| if k >= 3 && i < 2 { 1 } else { 2 })
            .collect(),
        ShapeRole::Split(Some(d)) if k > 0 => match dim(d) {
            // The first part takes what the others (one each, or none) leave.
            Some(n) => {
                let each = i64::from(n >= k as i64 - 1);
                let mut v = vec![each; k];
                v[0] = n - each * (k as i64 - 1);
                v
            }
            None => return v,
        },
        ShapeRole::Split(_) => return v,
        ShapeRole::Squeeze(Some(data)) => {
            let ones: Vec<i64> = (0..data.len() as i64)
                .filter(|&i| dim(&data[i as usize]) == Some(1))
                .collect();
            match ones.len() >= k {
                true => ones[..k].to_vec(),
                false => return v,
            }
        }
        ShapeRole::Squeeze(None) => return v,
        ShapeRole::Reshape(Some(data)) if data.len() == k => data
            .iter()
            .map(|d| match d {
                DeclaredDim::Fixed(x) => *x,
                DeclaredDim::Named(p) => dims.get(p).copied().unwrap_or(1),
                DeclaredDim::Unknown => -1,
            })
            .collect(),
        ShapeRole::Reshape(_) => (0..k).map(|i| if i == 0 { -1 } else { 1 }).collect(),
        ShapeRole::Broadcast => vec![1; k],
        ShapeRole::Sizes => drawn.iter().map(|x| 1 + x.rem_euclid(2)).collect(),
    };
    // A Reshape target may hold one -1 at most.
    let values = match values.iter().filter(|&&x| x == -1).count() > 1 {
        true => (0..k).map(|i| if i == 0 { -1 } else { 1 }).collect(),
        false => values,
    };
    let made = match &v {
        Value::Tensor(Tensor::I64(_)) => Tensor::from_vec(&shape, values),
        Value::Tensor(Tensor::I32(_)) => Tensor::from_vec(
            &shape,
            values.iter().map(|&x| x as i32).collect::<Vec<i32>>(),
        ),
        Value::Tensor(Tensor::F32(_)) => Tensor::from_vec(
            &shape,
            values.iter().map(|&x| x as f32).collect::<Vec<f32>>(),
        ),
        Value::Tensor(Tensor::F64(_)) => Tensor::from_vec(
            &shape,
            values.iter().map(|&x| x as f64).collect::<Vec<f64>>(),
        ),
        _ => return v,
    };
    made.map(Value::Tensor).unwrap_or(v)
}

/// Upper bounds (exclusive) for integer graph inputs that index something: an input read,
/// directly or through shape-only ops, as the indices of a Gather (or the ids of an
/// EmbedLayerNormalization) over a table whose gathered axis has a known size.
pub(crate) fn index_bounds(model: &ModelProto) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    let Some(g) = model.graph.as_ref() else {
        return out;
    };
    let mut dims: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for t in &g.initializer {
        if let Some(n) = t.name.as_deref() {
            dims.insert(n, t.dims.clone());
        }
    }
    for vi in g.value_info.iter().chain(&g.input) {
        if let (Some(n), Some(type_proto::Value::TensorType(tt))) = (
            vi.name.as_deref(),
            vi.r#type.as_ref().and_then(|t| t.value.as_ref()),
        ) {
            let d: Vec<i64> = tt
                .shape
                .iter()
                .flat_map(|s| &s.dim)
                .map(|d| match d.value {
                    Some(dimension::Value::DimValue(v)) => v,
                    _ => -1,
                })
                .collect();
            dims.entry(n).or_insert(d);
        }
    }
    let origin = input_origins(g);
    let mut bound = |idx: &str, table: &str, axis: i64| {
        let (Some(src), Some(d)) = (origin.get(idx), dims.get(table)) else {
            return;
        };
        let axis = if axis < 0 {
            axis + d.len() as i64
        } else {
            axis
        };
        if let Some(&n) = usize::try_from(axis).ok().and_then(|a| d.get(a)) {
            if n > 0 {
                let e = out.entry(src.clone()).or_insert(n);
                *e = (*e).min(n);
            }
        }
    };
    for n in &g.node {
        let domain = n.domain.as_deref().unwrap_or("");
        match (domain, n.op_type.as_deref()) {
            ("" | "ai.onnx", Some("Gather")) if n.input.len() >= 2 => {
                let axis = n
                    .attribute
                    .iter()
                    .find(|a| a.name.as_deref() == Some("axis"))
                    .and_then(|a| a.i)
                    .unwrap_or(0);
                bound(&n.input[1], &n.input[0], axis);
            }
            // RoiAlign's batch_indices index X's batch.
            ("" | "ai.onnx", Some("RoiAlign")) if n.input.len() >= 3 => {
                bound(&n.input[2], &n.input[0], 0);
            }
            ("com.microsoft", Some("EmbedLayerNormalization")) if n.input.len() >= 5 => {
                bound(&n.input[0], &n.input[2], 0);
                if !n.input[1].is_empty() {
                    bound(&n.input[1], &n.input[4], 0);
                }
            }
            _ => {}
        }
    }
    out
}

/// Integer inputs drawn in range: inputs with a bound from [`index_bounds`] in `[0, bound)`,
/// the other integer inputs in {0, 1} (indices, masks and positions are usually such, and 0
/// and 1 are in range for any axis of two or more).
pub(crate) fn index_safe(name: &str, v: Value, bounds: &BTreeMap<String, i64>) -> Value {
    let m = bounds.get(name).copied().unwrap_or(2).max(1);
    match v {
        Value::Tensor(Tensor::I64(a)) => {
            Value::Tensor(Tensor::I64(a.mapv(|x| x.rem_euclid(m)).into_shared()))
        }
        Value::Tensor(Tensor::I32(a)) => Value::Tensor(Tensor::I32(
            a.mapv(|x| x.rem_euclid(m.min(i32::MAX as i64) as i32))
                .into_shared(),
        )),
        other => other,
    }
}

/// The dims-map key under which the dims search holds element `i` of integer input `input`,
/// when it searches that input's values (see [`searchable_values`]).
pub(crate) fn value_key(input: &str, i: usize) -> String {
    format!("value {input}[{i}]")
}

/// The integer graph inputs of a static shape of 1 to [`MAX_SEARCHED_ELEMENTS`] elements that
/// no role and no index bound gives values, with their element counts. When no dims alone let
/// the original run, the dims search also searches these inputs' values, one element per
/// parameter ([`value_key`]): values read as a shape through ops the roles do not follow (a
/// Split of a size vector inside an If branch, as ONNX's AffineGrid expansion reads it) are
/// found as dims are, from the numbers the original's failures name.
pub(crate) fn searchable_values(
    model: &ModelProto,
    roles: &BTreeMap<String, ShapeRole>,
    bounds: &BTreeMap<String, i64>,
) -> Vec<(String, usize)> {
    let Some(g) = model.graph.as_ref() else {
        return Vec::new();
    };
    let inits: BTreeSet<&str> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    g.input
        .iter()
        .filter_map(|vi| {
            let name = vi.name.as_deref()?;
            if inits.contains(name) || roles.contains_key(name) || bounds.contains_key(name) {
                return None;
            }
            let Some(type_proto::Value::TensorType(tt)) =
                vi.r#type.as_ref().and_then(|t| t.value.as_ref())
            else {
                return None;
            };
            let int = [DataType::Int32 as i32, DataType::Int64 as i32];
            if !tt.elem_type.is_some_and(|e| int.contains(&e)) {
                return None;
            }
            let dims = &tt.shape.as_ref()?.dim;
            let len = match dims.as_slice() {
                [] => 1,
                [d] => match d.value {
                    Some(dimension::Value::DimValue(n)) => usize::try_from(n).ok()?,
                    _ => return None,
                },
                _ => return None,
            };
            (1..=MAX_SEARCHED_ELEMENTS)
                .contains(&len)
                .then(|| (name.to_string(), len))
        })
        .collect()
}

/// The most elements of one input whose values the dims search may search.
const MAX_SEARCHED_ELEMENTS: usize = 8;

/// `v` with the values the dims search chose for input `name` (all of its [`value_key`]s in
/// `dims`), else as drawn.
pub(crate) fn searched_values(name: &str, v: Value, dims: &BTreeMap<String, i64>) -> Value {
    let Value::Tensor(t) = &v else {
        return v;
    };
    let Some(values) = (0..t.len())
        .map(|i| dims.get(&value_key(name, i)).copied())
        .collect::<Option<Vec<i64>>>()
    else {
        return v;
    };
    let shape = t.shape().to_vec();
    let made = match t {
        Tensor::I64(_) => Tensor::from_vec(&shape, values),
        Tensor::I32(_) => Tensor::from_vec(&shape, values.iter().map(|&x| x as i32).collect()),
        _ => return v,
    };
    made.map(Value::Tensor).unwrap_or(v)
}

#[cfg(test)]
mod shrink_tests {
    use super::*;

    fn dims(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// A model that runs when `head` is 64 and `total` is at least `past`: the search's
    /// "every dim to 64" leaves batch and past at 64; the shrink takes them down to the
    /// smallest candidates that still run, and never onto the dims to avoid.
    #[test]
    fn shrink_takes_each_dim_to_the_smallest_that_runs_and_avoids_the_realistic_dims() {
        let params: Vec<String> = ["batch", "head", "past", "total"]
            .map(String::from)
            .to_vec();
        let candidates = [1, 2, 4, 8, 32, 64];
        let mut run = |d: &BTreeMap<String, i64>| -> Attempt {
            if d["head"] == 64 && d["total"] >= d["past"] {
                Ok(())
            } else {
                Err((0, "head must be 64".into()))
            }
        };
        let found = dims(&[("batch", 64), ("head", 64), ("past", 64), ("total", 64)]);
        let shrunk = shrink(found.clone(), &params, &candidates, &mut run, None);
        assert_eq!(
            shrunk,
            dims(&[("batch", 1), ("head", 64), ("past", 1), ("total", 1)])
        );
        let avoid = dims(&[("batch", 1), ("head", 64), ("past", 1), ("total", 1)]);
        let shrunk = shrink(found, &params, &candidates, &mut run, Some(&avoid));
        assert_ne!(shrunk, avoid);
        assert_eq!(shrunk["head"], 64);
        assert!(
            shrunk["batch"] == 1 && shrunk["total"] >= shrunk["past"],
            "{shrunk:?}"
        );
    }
}
