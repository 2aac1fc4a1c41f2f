//! Differential verification: run two models on the same seeded random inputs in the reference
//! interpreter and compare every output (same dtype and shape; floats within rtol/atol with
//! NaN equal to NaN, and in float16 and bfloat16 NaN equal to an infinity, both an overflow;
//! everything else exactly).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

mod boundary;
mod inputs;
mod stand_in;

pub use boundary::BoundaryError;

use onnx_proto::ModelProto;
use onnx_ref::{Session, Tensor, Value};

/// Tolerances for floating-point outputs. For float16 and bfloat16 outputs they are at least
/// 1e-2 (relative, and absolute times the output's largest finite magnitude when that is
/// above 1): one more rounding in a 16-bit type already moves a value by
/// about 1e-3 (float16) or 8e-3 (bfloat16).
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            rtol: 1e-3,
            atol: 1e-4,
        }
    }
}

/// The first difference found between two models' outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The random input (0-based) it happened on, or the given data set's index.
    pub trial: usize,
    /// It happened on a given data set (`trial` is its index), not a random input.
    pub data_set: bool,
    /// The output that differs.
    pub output: String,
    /// How it differs.
    pub detail: String,
    /// The largest absolute difference between the two outputs' elements, for float tensors
    /// of one shape (infinite where one is NaN or infinite and the other is not); `None`
    /// otherwise.
    pub max_difference: Option<f64>,
}

/// Errors of verification itself (a model the interpreter cannot run, ...).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("the {which} model cannot run in the reference interpreter")]
    /// The interpreter cannot load a model.
    Session {
        /// `original` or `optimized`.
        which: &'static str,
        #[source]
        /// Why.
        source: Box<onnx_ref::RefError>,
    },
    #[error("trial {trial}: the {which} model failed")]
    /// The values fed to a model's boundary nodes' outputs on one trial cannot be made.
    Boundary {
        /// `original` or `optimized`.
        which: &'static str,
        /// The trial.
        trial: usize,
        #[source]
        /// Why.
        source: Box<BoundaryError>,
    },
    #[error("trial {trial}: the {which} model failed")]
    /// A model failed on one trial.
    Run {
        /// `original` or `optimized`.
        which: &'static str,
        /// The trial.
        trial: usize,
        #[source]
        /// Why.
        source: Box<onnx_ref::RefError>,
    },
    /// The interpreter panicked running the original model (a bug in the interpreter).
    #[error("trial {trial}: the interpreter panicked running the original model")]
    Panic {
        /// The trial.
        trial: usize,
    },
    /// The check could not compare anything: the original cannot run in the interpreter, or
    /// fails on every input the search tried.
    #[error("the check could not run: {reason}")]
    Skipped {
        /// Why.
        reason: String,
    },
    #[error("trial {trial}: the models have different outputs: {left:?} vs {right:?}")]
    /// The models' output names differ.
    Outputs {
        /// The trial.
        trial: usize,
        /// The original's output names.
        left: Vec<String>,
        /// The optimized model's output names.
        right: Vec<String>,
    },
}

impl VerifyError {
    /// Why the original model failed on an input set (its run, or the values fed to its
    /// boundary nodes), when this is that failure: the check then skips the random inputs.
    fn original_failure(&self) -> Option<String> {
        match self {
            VerifyError::Run {
                which: "original",
                source,
                ..
            } => Some(source.to_string()),
            VerifyError::Boundary {
                which: "original",
                source,
                ..
            } => Some(source.to_string()),
            _ => None,
        }
    }
}

/// Runs both models on `trials` seeded random inputs; `Ok(None)` when all outputs agree. A
/// check that could not compare anything (see [`Checked::skipped`]) is an error here.
pub fn compare_models(
    original: &ModelProto,
    optimized: &ModelProto,
    trials: usize,
    dims: &BTreeMap<String, i64>,
    tol: Tolerance,
) -> Result<Option<Mismatch>, VerifyError> {
    let (m, checked) = compare_models_on(original, optimized, &[], trials, dims, tol)?;
    match checked.skipped {
        Some(reason) if m.is_none() => Err(VerifyError::Skipped { reason }),
        _ => Ok(m),
    }
}

/// What a check compared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// Given input sets (test data) both models ran on.
    pub data_sets: usize,
    /// Random inputs both models ran on.
    pub random: usize,
    /// Why the random trials stopped early: the original model fails on random inputs (only
    /// after every given data set or random input agreed).
    pub random_skipped: Option<String>,
    /// Why the check could not run at all (the original cannot run in the interpreter, or no
    /// inputs were found under which it runs): nothing was compared.
    pub skipped: Option<String>,
    /// The nodes the check ran around (no kernel: custom domains, contrib ops without one),
    /// as `domain::op`, with a count where there are several (`2 x trt::Plugin`).
    pub opaque: Vec<String>,
    /// The dims the random inputs used where the search moved them from their defaults.
    pub dims: BTreeMap<String, i64>,
    /// The realistic dims (a param named `a + b` at the sum) the even-numbered random inputs
    /// used, where they differ from `dims`; empty otherwise.
    pub realistic_dims: BTreeMap<String, i64>,
}

impl Checked {
    fn not_run(why: String, opaque: Vec<String>) -> Self {
        Checked {
            skipped: Some(why),
            opaque,
            ..Default::default()
        }
    }
}

/// One input set: (graph input name, value).
pub type InputSet = Vec<(String, Value)>;

/// A run's outputs: (graph output name, value).
type Outputs = Vec<(String, Value)>;

/// Runs both models on every given input set (test data), then on `trials` seeded random
/// inputs.
///
/// Nodes the interpreter cannot run are boundaries (see `boundary.rs`): both models are cut
/// there, their outputs fed the same values and their inputs compared. Random inputs use dims
/// under which the original runs (see `inputs.rs`: `dims` fixes some, the rest are searched).
/// Where the original cannot run at all, `Checked::skipped` says why and nothing is compared;
/// where it fails on a later random input, the random trials stop and
/// `Checked::random_skipped` says why. Only a difference is a mismatch; the optimized model
/// failing where the original runs is an error.
pub fn compare_models_on(
    original: &ModelProto,
    optimized: &ModelProto,
    data: &[InputSet],
    trials: usize,
    dims: &BTreeMap<String, i64>,
    tol: Tolerance,
) -> Result<(Option<Mismatch>, Checked), VerifyError> {
    // Nodes without a kernel inside subgraphs: stood in for in both models alike.
    let stood = stand_in::both(original, optimized);
    let (original, optimized, stood_in) = match &stood {
        Some((a, b, lines)) => (a, b, lines.clone()),
        None => (original, optimized, Vec::new()),
    };
    let a_cut = match boundary::cut(
        original,
        &onnx_ref::opaque_nodes(original),
        &BTreeMap::new(),
    ) {
        Ok(c) => c,
        Err(why) => return Ok((None, Checked::not_run(why.to_string(), stood_in))),
    };
    let mut opaque = a_cut.summary();
    opaque.extend(stood_in);
    let b_opaque = onnx_ref::opaque_nodes(optimized);
    // Types of the optimized model's boundary outputs it no longer declares: the original's.
    let fallback = match (b_opaque.is_empty(), original.graph.as_ref()) {
        (false, Some(g)) => boundary::known_types(original, g),
        _ => BTreeMap::new(),
    };
    let b_cut = match boundary::cut(optimized, &b_opaque, &fallback) {
        Ok(c) => c,
        Err(why) => return Ok((None, Checked::not_run(why.to_string(), opaque))),
    };
    let a = match Session::with_lazy_weights(&a_cut.model) {
        Ok(a) => a,
        Err(e) => {
            let why = format!("the original model cannot run in the reference interpreter: {e}");
            return Ok((None, Checked::not_run(why, opaque)));
        }
    };
    let b = Session::with_lazy_weights(&b_cut.model).map_err(|source| VerifyError::Session {
        which: "optimized",
        source: Box::new(source),
    })?;
    // Weights are decoded when a run first reads them and dropped after their last read (a
    // MatMul or Gemm weight is read in place, a Gather's table by rows), and models whose runs
    // decode many weight bytes run one after the other: the check then holds one model's live
    // weights and activations at a time, not both models' every weight.
    let side_by_side = a.decoded_weight_bytes() + b.decoded_weight_bytes() < SIDE_BY_SIDE_MAX_BYTES;
    let pair = Pair {
        a: &a,
        b: &b,
        a_cut: &a_cut,
        b_cut: &b_cut,
        probes: a_cut.probe_pairs(&b_cut),
        tol,
        side_by_side,
    };
    let mut checked = Checked {
        opaque,
        ..Default::default()
    };
    for (k, inputs) in data.iter().enumerate() {
        let run = pair.run(inputs, k, 0x5eed + k as u64, dims);
        if let Some(mut m) = run? {
            m.data_set = true;
            return Ok((Some(m), checked));
        }
        checked.data_sets += 1;
    }
    if trials == 0 {
        return Ok((None, checked));
    }
    // The random inputs: unknown dims named, dims searched on the first trial.
    let mut gen = a_cut.model.clone();
    inputs::name_unknown_dims(&mut gen);
    let fed: BTreeSet<String> = a_cut.fed_names();
    let bounds = inputs::index_bounds(original);
    let mut roles = inputs::shape_roles(original);
    roles.retain(|n, _| !bounds.contains_key(n));
    let make = |seed: u64, d: &BTreeMap<String, i64>| -> Result<InputSet, onnx_ref::RefError> {
        let v = onnx_ref::random_inputs(&gen, seed, d)?;
        Ok(v.into_iter()
            .filter(|(n, _)| !fed.contains(n))
            .map(|(n, v)| {
                let v = inputs::index_safe(&n, v, &bounds);
                let v = inputs::shape_safe(&n, v, &roles, d);
                let v = inputs::searched_values(&n, v, d);
                (n, v)
            })
            .collect())
    };
    let order = inputs::topo_positions(&a_cut.model);
    let params: Vec<String> = inputs::dim_params(&gen)
        .into_iter()
        .filter(|p| !dims.contains_key(p))
        .collect();
    // The original's outputs on the dims the search ends with: the first trial's (same seed).
    let first_run: RefCell<Option<FirstRun>> = RefCell::new(None);
    // Value draws per dims tried: one in a first search, `SEARCH_DRAWS` in a second where the
    // first finds none (each failing try then costs that many runs).
    let draws = Cell::new(1);
    let mut attempt = |d: &BTreeMap<String, i64>| -> inputs::Attempt {
        if inputs::largest_input(&gen, d) > inputs::MAX_SEARCH_ELEMENTS {
            return Err((-2, "an input would be too large".into()));
        }
        // Values the original fails on (an empty optional, a loop of no iterations) are drawn
        // again; the furthest failure through the graph stands for the dims.
        let mut furthest: Option<(i64, String)> = None;
        for draw in 0..draws.get() {
            let seed = value_seed(0x5eed, draw);
            let mut feed = make(seed, d).map_err(|e| (-1, e.to_string()))?;
            feed.extend(a_cut.feed(seed, d).map_err(|e| (-1, e.to_string()))?);
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.run(feed))) {
                // Dims under which the outputs break their declared shapes are no input of the
                // model's (its dimension variables name one value across the graph).
                Ok(Ok(outputs)) => {
                    return match inputs::output_dims_broken(original, d, &outputs) {
                        Some(why) => Err((order.len() as i64, why)),
                        None => {
                            *first_run.borrow_mut() = Some((d.clone(), seed, outputs));
                            Ok(())
                        }
                    }
                }
                Ok(Err(e)) => {
                    let p = inputs::progress(&order, &e);
                    if furthest.as_ref().is_none_or(|(q, _)| p > *q) {
                        furthest = Some((p, e.to_string()));
                    }
                }
                Err(_) => {
                    return Err((
                        -1,
                        "the interpreter panicked running the original model".into(),
                    ))
                }
            }
        }
        Err(furthest.unwrap_or((-1, String::new())))
    };
    // Realistic dims first (a param named `a + b` set to the sum, where the original runs so),
    // then the dims the search finds from every param at 1, which the spec allows as much: the
    // trials alternate between the two (ARCHITECTURE.md, "The check").
    let realistic = inputs::realistic_dims(dims, &params).filter(|r| attempt(r).is_ok());
    let candidates = inputs::candidates(&a_cut.model);
    let (mut searched, mut failure) =
        inputs::search_dims(dims.clone(), &params, &candidates, &mut attempt);
    if failure.is_some() {
        draws.set(SEARCH_DRAWS);
        (searched, failure) = inputs::search_dims(dims.clone(), &params, &candidates, &mut attempt);
    }
    if failure.is_none() {
        searched = inputs::shrink(
            searched,
            &params,
            &candidates,
            &mut attempt,
            realistic.as_ref(),
        );
    }
    // Where no dims let the original run on drawn values, the values of its small integer
    // inputs are searched too (from `start`'s dims).
    // Inputs the boundary feeds (outputs of cut-out nodes) are drawn by the cut, not searched.
    let mut values = inputs::searchable_values(&gen, &roles, &bounds);
    values.retain(|(n, _)| !fed.contains(n));
    let keys: Vec<String> = values
        .iter()
        .flat_map(|(n, len)| (0..*len).map(|i| inputs::value_key(n, i)))
        .collect();
    let mut search_values = |start: &BTreeMap<String, i64>| -> Option<BTreeMap<String, i64>> {
        if keys.is_empty() || keys.iter().any(|k| start.contains_key(k)) {
            return None;
        }
        let mut from = start.clone();
        from.extend(keys.iter().map(|k| (k.clone(), 1)));
        let all: Vec<String> = params.iter().chain(&keys).cloned().collect();
        match inputs::search_dims(from, &all, &candidates, &mut attempt) {
            (found, None) => Some(found),
            _ => None,
        }
    };
    if failure.is_some() && realistic.is_none() {
        if let Some(found) = search_values(&searched) {
            (searched, failure) = (found, None);
        }
    }
    let found = match (failure, &realistic) {
        (None, _) => searched,
        (Some(_), Some(r)) => r.clone(),
        (Some(why), None) => {
            let why = format!("the original model fails on random inputs: {why}");
            match checked.data_sets {
                0 => checked.skipped = Some(why),
                _ => checked.random_skipped = Some(why),
            }
            return Ok((None, checked));
        }
    };
    checked.dims = found
        .iter()
        .filter(|(k, v)| dims.get(*k) != Some(v) && **v != 1)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let realistic = realistic.filter(|r| *r != found);
    if let Some(r) = &realistic {
        checked.realistic_dims = r
            .iter()
            .filter(|(k, v)| dims.get(*k) != Some(v) && **v != 1)
            .map(|(k, v)| (k.clone(), *v))
            .collect();
    }
    // Searched values for the trials' later draws, once a trial's first half fails.
    let mut fallback: Option<Option<BTreeMap<String, i64>>> = None;
    'trials: for trial in 0..trials {
        let drawn = match &realistic {
            Some(r) if trial % 2 == 0 => r,
            _ => &found,
        };
        // Values the original fails on are drawn again (the optimized model need only agree
        // where the original runs); after half the draws, the searched values stand in for
        // the small integer inputs', where a search finds some.
        for draw in 0..TRIAL_DRAWS {
            let found = match &fallback {
                Some(Some(f)) if draw >= TRIAL_DRAWS / 2 => f,
                _ => drawn,
            };
            let seed = value_seed(0x5eed + trial as u64, draw);
            let inputs = match make(seed, found) {
                Ok(v) => v,
                Err(e) => {
                    checked.random_skipped = Some(e.to_string());
                    break 'trials;
                }
            };
            let known = match first_run.take() {
                Some((d, s, outputs)) if trial == 0 && d == *found && s == seed => Some(outputs),
                other => {
                    *first_run.borrow_mut() = other;
                    None
                }
            };
            match pair.run_knowing(&inputs, trial, seed, found, known) {
                Ok(Some(m)) => return Ok((Some(m), checked)),
                Ok(None) => {
                    checked.random += 1;
                    continue 'trials;
                }
                Err(e) if e.original_failure().is_some() => {
                    if draw + 1 == TRIAL_DRAWS / 2 && fallback.is_none() {
                        fallback = Some(search_values(found));
                    }
                    if draw + 1 < TRIAL_DRAWS {
                        continue;
                    }
                    let why = e.original_failure().unwrap_or_default();
                    checked.random_skipped = Some(format!(
                        "the original model fails on random input {trial}: {why}"
                    ));
                    break 'trials;
                }
                Err(VerifyError::Panic { .. }) => {
                    checked.random_skipped = Some("the interpreter panicked".into());
                    break 'trials;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok((None, checked))
}

/// The original's outputs on the dims the search ends with, and the value seed they were drawn
/// with.
type FirstRun = (BTreeMap<String, i64>, u64, Outputs);

/// Value draws per dims the search tries (in its second search), and per random trial, before
/// the original's failure on them counts: values it fails on (an empty optional, a loop of no iterations, sequences
/// of other lengths) are drawn again.
const SEARCH_DRAWS: u64 = 4;
const TRIAL_DRAWS: u64 = 8;

/// The seed of a trial's `draw`-th value draw (the first is the trial's own seed).
fn value_seed(trial_seed: u64, draw: u64) -> u64 {
    trial_seed + (draw << 16)
}

/// Models whose runs together decode this many weight bytes run one after the other in the
/// check.
const SIDE_BY_SIDE_MAX_BYTES: usize = 16 << 20;

/// The two planned models of a check and how to compare them.
struct Pair<'a> {
    a: &'a Session,
    b: &'a Session,
    a_cut: &'a boundary::Cut,
    b_cut: &'a boundary::Cut,
    /// Inputs of matched boundary nodes: (original's name, optimized's name).
    probes: Vec<(String, String)>,
    tol: Tolerance,
    side_by_side: bool,
}

impl Pair<'_> {
    /// Runs both models on one input set (plus the boundary values of `seed`) and compares
    /// their outputs, then the inputs of their matched boundary nodes.
    fn run(
        &self,
        inputs: &InputSet,
        trial: usize,
        seed: u64,
        dims: &BTreeMap<String, i64>,
    ) -> Result<Option<Mismatch>, VerifyError> {
        self.run_knowing(inputs, trial, seed, dims, None)
    }

    /// [`Pair::run`], given the original's outputs on these inputs when they are known.
    fn run_knowing(
        &self,
        inputs: &InputSet,
        trial: usize,
        seed: u64,
        dims: &BTreeMap<String, i64>,
        original: Option<Outputs>,
    ) -> Result<Option<Mismatch>, VerifyError> {
        let boundary = |cut: &boundary::Cut, which: &'static str| {
            cut.feed(seed, dims).map_err(|e| VerifyError::Boundary {
                which,
                trial,
                source: Box::new(e),
            })
        };
        let mut feed_a = inputs.clone();
        feed_a.extend(boundary(self.a_cut, "original")?);
        let mut feed_b = inputs.clone();
        feed_b.extend(boundary(self.b_cut, "optimized")?);
        let (a, b) = (self.a, self.b);
        let (ra, rb) = if let Some(ra) = original {
            (Ok(ra), b.run(feed_b.clone()))
        } else if self.side_by_side {
            std::thread::scope(|scope| {
                let fa = feed_a.clone();
                let original = scope.spawn(move || a.run(fa));
                let rb = b.run(feed_b.clone());
                let ra = original.join().map_err(|_| VerifyError::Panic { trial })?;
                Ok::<_, VerifyError>((ra, rb))
            })?
        } else {
            let fa = feed_a.clone();
            let ra = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.run(fa)))
                .map_err(|_| VerifyError::Panic { trial })?;
            (ra, b.run(feed_b.clone()))
        };
        let ra = ra.map_err(|e| VerifyError::Run {
            which: "original",
            trial,
            source: Box::new(e),
        })?;
        let rb = rb.map_err(|e| VerifyError::Run {
            which: "optimized",
            trial,
            source: Box::new(e),
        })?;
        let own_a = &ra[..self.a_cut.own_outputs.min(ra.len())];
        let own_b = &rb[..self.b_cut.own_outputs.min(rb.len())];
        let names_a: Vec<String> = own_a.iter().map(|(n, _)| n.clone()).collect();
        let names_b: Vec<String> = own_b.iter().map(|(n, _)| n.clone()).collect();
        if names_a != names_b {
            return Err(VerifyError::Outputs {
                trial,
                left: names_a,
                right: names_b,
            });
        }
        for ((name, va), (_, vb)) in own_a.iter().zip(own_b) {
            if let Some(detail) = compare_values(va, vb, self.tol) {
                return Ok(Some(Mismatch {
                    trial,
                    data_set: false,
                    output: name.clone(),
                    max_difference: max_abs_difference(va, vb),
                    detail,
                }));
            }
        }
        let values = |r: &[(String, Value)], feed: &[(String, Value)]| -> BTreeMap<String, Value> {
            r.iter()
                .chain(feed)
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect()
        };
        let (va, vb) = (values(&ra, &feed_a), values(&rb, &feed_b));
        for (x, y) in &self.probes {
            let (Some(p), Some(q)) = (va.get(x), vb.get(y)) else {
                continue;
            };
            if let Some(detail) = compare_values(p, q, self.tol) {
                return Ok(Some(Mismatch {
                    trial,
                    data_set: false,
                    output: format!("{x} (an input of a node the check runs around)"),
                    max_difference: max_abs_difference(p, q),
                    detail,
                }));
            }
        }
        Ok(None)
    }
}

/// `None` when equal within tolerance, else a description of the first difference. Float
/// elements are equal when both are NaN, when they are equal, when both are finite and within
/// `atol + rtol * |b|` (for float16 and bfloat16 at least 1e-2 both, atol times the largest
/// finite `|b|` of the tensor when above 1), and in float16 and
/// bfloat16 when one is NaN and the other an infinity (an overflow either way).
pub fn compare_values(a: &Value, b: &Value, tol: Tolerance) -> Option<String> {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => compare_tensors(x, y, tol),
        (Value::Sequence(x), Value::Sequence(y)) => {
            if x.items.len() != y.items.len() {
                return Some(format!(
                    "sequence lengths {} vs {}",
                    x.items.len(),
                    y.items.len()
                ));
            }
            x.items
                .iter()
                .zip(&y.items)
                .enumerate()
                .find_map(|(i, (p, q))| {
                    compare_values(p, q, tol).map(|d| format!("element {i}: {d}"))
                })
        }
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => None,
            (Some(p), Some(q)) => compare_values(p, q, tol),
            _ => Some("one optional is empty, the other is not".into()),
        },
        _ if a == b => None,
        _ => Some(format!("values differ: {} vs {}", a.kind(), b.kind())),
    }
}

/// The largest absolute difference between two float tensors of one dtype and shape (NaN
/// against NaN counts 0, NaN or an infinity against anything else infinite); `None` for other
/// values.
fn max_abs_difference(a: &Value, b: &Value) -> Option<f64> {
    let (Value::Tensor(x), Value::Tensor(y)) = (a, b) else {
        return None;
    };
    if !x.dtype().is_float() || x.dtype() != y.dtype() || x.shape() != y.shape() {
        return None;
    }
    let (p, q) = (x.to_f64_vec().ok()?, y.to_f64_vec().ok()?);
    Some(p.iter().zip(&q).fold(0.0, |worst: f64, (a, b)| {
        let d = if (a.is_nan() && b.is_nan()) || a == b {
            0.0
        } else if a.is_finite() && b.is_finite() {
            (a - b).abs()
        } else {
            f64::INFINITY
        };
        worst.max(d)
    }))
}

fn compare_tensors(x: &Tensor, y: &Tensor, tol: Tolerance) -> Option<String> {
    if x.dtype() != y.dtype() {
        return Some(format!(
            "dtype {} vs {}",
            x.dtype().name(),
            y.dtype().name()
        ));
    }
    if x.shape() != y.shape() {
        return Some(format!("shape {:?} vs {:?}", x.shape(), y.shape()));
    }
    let sixteen_bits = matches!(
        x.dtype(),
        onnx_ref::DType::Float16 | onnx_ref::DType::Bfloat16
    );
    if x.dtype().is_float() {
        let (Ok(p), Ok(q)) = (x.to_f64_vec(), y.to_f64_vec()) else {
            return (x != y).then(|| "values differ".to_string());
        };
        // In 16 bits the absolute tolerance scales with the output's largest finite
        // magnitude: an element is a sum of terms that large, each rounded to about 1e-3 of
        // itself, so a near-zero element of a deep network's output (a logit beside logits
        // of 5) moves by a rounding of the large ones, not of itself.
        let tol = if sixteen_bits {
            let scale = q
                .iter()
                .filter(|v| v.is_finite())
                .fold(1f64, |m, v| m.max(v.abs()));
            Tolerance {
                rtol: tol.rtol.max(1e-2),
                atol: tol.atol.max(1e-2) * scale,
            }
        } else {
            tol
        };
        for (i, (a, b)) in p.iter().zip(&q).enumerate() {
            // In 16-bit floats an overflow is NaN or an infinity depending on the order the
            // steps round in (inf - inf, inf * 0): NaN against an infinity is one overflow.
            let overflowed = sixteen_bits
                && ((a.is_nan() && b.is_infinite()) || (a.is_infinite() && b.is_nan()));
            let same = (a.is_nan() && b.is_nan())
                || a == b
                || overflowed
                // Finite values only: against an infinity the tolerance is infinite too.
                || (a.is_finite() && b.is_finite() && (a - b).abs() <= tol.atol + tol.rtol * b.abs());
            if !same {
                return Some(format!(
                    "element {i}: {a} vs {b} (rtol {}, atol {})",
                    tol.rtol, tol.atol
                ));
            }
        }
        None
    } else if x != y {
        Some("values differ".into())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check ran its three random trials, none skipped (`what` names the model).
    fn assert_three_trials(c: &Checked, what: &str) {
        assert_eq!(
            (c.random, c.skipped.as_deref(), c.random_skipped.as_deref()),
            (3, None, None),
            "{what}"
        );
    }

    /// A model that fails on every random input (its Reshape target is cast from a float input,
    /// whose random values in [-1, 1] cast to 0 or 1, with `allowzero`; no role and no value
    /// search gives floats) is checked on the given sets alone: with a set,
    /// the random trials stop and say why; a set where the two models differ is a mismatch on
    /// that set; with no set, the check is skipped with the reason (never an error).
    #[test]
    fn given_sets_check_where_random_inputs_fail() {
        let text = |body: &str| {
            onnx_text::parse_model(&format!(
                "<ir_version: 7, opset_import: [\"\" : 14]>\ng (float[24] x, float[2] s) => (float[2,12] y) {{\n  {body}\n}}"
            ))
            .unwrap()
        };
        let a = text("t = Cast <to = 7> (s)\n  y = Reshape <allowzero = 1> (x, t)");
        let b = text("t = Cast <to = 7> (s)\n  r = Reshape <allowzero = 1> (x, t)\n  y = Relu (r)");
        let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let shape = Value::Tensor(Tensor::from_vec(&[2], vec![2f32, 12.0]).unwrap());
        let set = vec![
            (
                "x".to_string(),
                Value::Tensor(Tensor::from_vec(&[24], x.clone()).unwrap()),
            ),
            ("s".to_string(), shape.clone()),
        ];
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let (m, c) = compare_models_on(&a, &a, std::slice::from_ref(&set), 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_eq!(c.data_sets, 1);
        assert_eq!(c.random, 0);
        assert_eq!(c.skipped, None);
        assert!(
            c.random_skipped.as_deref().unwrap().contains("Reshape"),
            "{c:?}"
        );
        // Non-negative inputs: Relu changes nothing, the sets agree.
        assert_eq!(
            compare_models_on(&a, &b, std::slice::from_ref(&set), 3, &dims, tol)
                .unwrap()
                .0,
            None
        );
        let neg = vec![
            (
                "x".to_string(),
                Value::Tensor(
                    Tensor::from_vec(&[24], x.iter().map(|v| -v - 1.0).collect::<Vec<f32>>())
                        .unwrap(),
                ),
            ),
            ("s".to_string(), shape),
        ];
        let (m, _) = compare_models_on(&a, &b, &[set, neg], 3, &dims, tol).unwrap();
        let m = m.unwrap();
        assert!(m.data_set && m.trial == 1, "{m:?}");
        let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
        assert_eq!((m, c.random), (None, 0));
        assert!(c.skipped.as_deref().unwrap().contains("Reshape"), "{c:?}");
    }

    /// Integer inputs read as shapes get values their consumer takes: a Reshape target the
    /// data's own dims (or -1 then ones), an Expand target ones, ConstantOfShape's sizes 1 or
    /// 2; through a Cast too. The check then runs its random trials, and a difference shows.
    #[test]
    fn integer_inputs_read_as_shapes_take_values_the_original_runs_on() {
        let text = |body: &str| {
            onnx_text::parse_model(&format!(
                "<ir_version: 8, opset_import: [\"\" : 19]>\ng (float[B, 8] x, int64[2] s, int64[3] r, int64[3] e, int32[2] c) => (float[P, Q] y, float[U, V, W] y2, float[Z, B, 8] z, float[M, N] w) {{\n{body}\n}}"
            ))
            .unwrap()
        };
        let body = "  y = Reshape (x, s)\n  y2 = Reshape (x, r)\n  z = Expand (x, e)\n  k = Cast <to = 7> (c)\n  w = ConstantOfShape <value = float[1] {2.0}> (k)";
        let a = text(body);
        let dims = BTreeMap::from([("B".to_string(), 3)]);
        let tol = Tolerance::default();
        let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_three_trials(&c, "");
        let roles = inputs::shape_roles(&a);
        let drawn = |k: usize| Value::Tensor(Tensor::from_vec(&[k], vec![0i64; k]).unwrap());
        let got = |name: &str, k: usize| match inputs::shape_safe(name, drawn(k), &roles, &dims) {
            Value::Tensor(Tensor::I64(v)) => v.iter().copied().collect::<Vec<i64>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(got("s", 2), [3, 8]);
        assert_eq!(got("r", 3), [-1, 1, 1]);
        assert_eq!(got("e", 3), [1, 1, 1]);
        // A difference after the Reshape shows.
        let b = text(&body.replace("y = Reshape (x, s)", "t = Reshape (x, s)\n  y = Relu (t)"));
        let (m, _) = compare_models_on(&a, &b, &[], 3, &dims, tol).unwrap();
        assert_eq!(m.map(|m| m.output), Some("y".to_string()));
    }

    /// CumSum's axis, Resize's scales and sizes from graph inputs get values the original
    /// runs on (axis 0; scales 1 on batch and channels and 2 elsewhere; sizes 1 or 2), so the
    /// check runs its random trials on them instead of being skipped.
    #[test]
    fn axis_scales_and_sizes_inputs_take_values_the_original_runs_on() {
        let a = onnx_text::parse_model(
            "<ir_version: 8, opset_import: [\"\" : 19]>\ng (float[2, 3, 4] x, int32 axis, float[3] scales, float[1, 1, 2, 2] im, int64[4] sizes) => (float[2, 3, 4] c, float[A, B, C] r, float[D, E, F, G] s) {\n  c = CumSum (x, axis)\n  r = Resize <mode = \"linear\"> (x, , scales)\n  s = Resize (im, , , sizes)\n}",
        )
        .unwrap();
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_three_trials(&c, "");
        let roles = inputs::shape_roles(&a);
        let scales = Value::Tensor(Tensor::from_vec(&[3], vec![-0.5f32; 3]).unwrap());
        match inputs::shape_safe("scales", scales, &roles, &dims) {
            Value::Tensor(Tensor::F32(v)) => {
                assert_eq!(v.iter().copied().collect::<Vec<f32>>(), [1.0, 1.0, 2.0])
            }
            other => panic!("{other:?}"),
        }
        let axis = Value::Tensor(Tensor::from_vec(&[], vec![5i32]).unwrap());
        match inputs::shape_safe("axis", axis, &roles, &dims) {
            Value::Tensor(Tensor::I32(v)) => {
                assert_eq!(v.iter().copied().collect::<Vec<i32>>(), [0])
            }
            other => panic!("{other:?}"),
        }
        // A difference after the Resize shows.
        let b = onnx_text::parse_model(
            "<ir_version: 8, opset_import: [\"\" : 19]>\ng (float[2, 3, 4] x, int32 axis, float[3] scales, float[1, 1, 2, 2] im, int64[4] sizes) => (float[2, 3, 4] c, float[A, B, C] r, float[D, E, F, G] s) {\n  c = CumSum (x, axis)\n  t = Resize <mode = \"linear\"> (x, , scales)\n  r = Neg (t)\n  s = Resize (im, , , sizes)\n}",
        )
        .unwrap();
        let (m, _) = compare_models_on(&a, &b, &[], 3, &dims, tol).unwrap();
        assert_eq!(m.map(|m| m.output), Some("r".to_string()));
        // Upsample's scales (opset 9) as Resize's: random ones below 1 would fail.
        let up = onnx_text::parse_model(
            "<ir_version: 4, opset_import: [\"\" : 9]>\ng (float[1, 1, 2, 2] x, float[4] s) => (float[A, B, C, D] y) {\n  y = Upsample <mode = \"nearest\"> (x, s)\n}",
        )
        .unwrap();
        let (m, c) = compare_models_on(&up, &up, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_three_trials(&c, "Upsample");
    }

    /// Inputs whose values an op constrains beyond their type (NonMaxSuppression's IoU
    /// threshold, RoiAlign's batch indices, AffineGrid's size, SplitToSequence's split,
    /// Col2Im's image and block shapes, STFT's frame step and length, DFT's axis,
    /// MelWeightMatrix's parameters, ImageDecoder's encoded stream) get values the original
    /// runs on: the check runs its random trials on each of these models (the ONNX backend
    /// tests' shapes) instead of being skipped.
    #[test]
    fn constrained_op_inputs_take_values_the_original_runs_on() {
        let models = [
            "(float[1, 6, 4] boxes, float[1, 1, 6] scores, int64[1] max, float[1] iou, float[1] thr) => (int64[N, 3] y) {\n  y = NonMaxSuppression (boxes, scores, max, iou, thr)\n}",
            "(float[1, 1, 10, 10] x, float[3, 4] rois, int64[3] b) => (float[3, 1, 5, 5] y) {\n  y = RoiAlign <output_height = 5, output_width = 5> (x, rois, b)\n}",
            "(float[2, 3, 4] theta, int64[5] size) => (float[2, 4, 5, 6, 3] y) {\n  y = AffineGrid (theta, size)\n}",
            "(float[3, 6] x, int64[2] split) => (seq(float) y) {\n  y = SplitToSequence (x, split)\n}",
            "(float[3, 6] x, int64 split) => (seq(float) y) {\n  y = SplitToSequence <axis = 1> (x, split)\n}",
            "(float[1, 9, 4] x, int64[2] image, int64[2] block) => (float[1, 1, 5, 5] y) {\n  y = Col2Im <strides = [2, 2]> (x, image, block)\n}",
            "(float[1, 5, 15] x, int64[2] image, int64[2] block) => (float[1, 1, 5, 5] y) {\n  y = Col2Im <pads = [0, 1, 0, 1]> (x, image, block)\n}",
            "(float[1, 4, 5] x, int64[2] image, int64[2] block) => (float[A, B, C, D] y) {\n  y = Col2Im (x, image, block)\n}",
            "(float[1, 128, 1] x, int64 step, int64 len) => (float[1, 15, 9, 2] y) {\n  y = STFT (x, step, , len)\n}",
            "(float[1, 6, 10, 2] x, int64 axis) => (float[1, 10, 10, 1] y) {\n  y = DFT <inverse = 1, onesided = 1> (x, , axis)\n}",
            "(int32 bins, int32 dft, int32 rate, float lo, float hi) => (float[9, 8] y) {\n  y = MelWeightMatrix (bins, dft, rate, lo, hi)\n}",
            "(uint8[3085] data) => (uint8[32, 32, 3] y) {\n  y = ImageDecoder (data)\n}",
            "(uint8[312] data) => (uint8[32, 32, 3] y) {\n  y = ImageDecoder <pixel_format = \"Grayscale\"> (data)\n}",
        ];
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        for body in models {
            let text = format!("<ir_version: 9, opset_import: [\"\" : 20]>\ng {body}");
            let a = onnx_text::parse_model(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
            assert_eq!(m, None, "{body}");
            assert_three_trials(&c, body);
        }
        // The image stream is a PNM of the declared output's size, padded to the length.
        let a = onnx_text::parse_model(&format!(
            "<ir_version: 9, opset_import: [\"\" : 20]>\ng {}",
            models[12]
        ))
        .unwrap();
        let roles = inputs::shape_roles(&a);
        let drawn = Value::Tensor(Tensor::from_vec(&[312], vec![7u8; 312]).unwrap());
        match inputs::shape_safe("data", drawn, &roles, &dims) {
            // 32 x 32 in colour does not fit in 312 bytes: one grey row.
            Value::Tensor(Tensor::U8(v)) => {
                let bytes: Vec<u8> = v.iter().copied().collect();
                assert_eq!(bytes.len(), 312);
                assert!(bytes.starts_with(b"P5\n299 1\n255\n"), "{:?}", &bytes[..16]);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Values the original fails on are drawn again: an optional input drawn empty under
    /// OptionalGetElement, two sequences of other lengths under SequenceMap (the sequences of
    /// one draw share a length, elements of undeclared rank are vectors of two), a Range whose
    /// random bounds are empty under a Loop that cannot type zero iterations. The check runs
    /// its random trials on each instead of being skipped, and a difference still shows.
    #[test]
    fn values_the_original_fails_on_are_drawn_again() {
        let models = [
            "(optional(float[2, 3]) o) => (float[2, 3] y) {\n  y = OptionalGetElement (o)\n}",
            "(seq(float) a, seq(float[2]) b) => (seq(float) y) {\n  y = SequenceMap <body = g (float[N] x, float[N] z) => (float[N] w) { w = Add (x, z) }> (a, b)\n}",
        ];
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let model = |body: &str| {
            let text = format!("<ir_version: 9, opset_import: [\"\" : 18]>\ng {body}");
            onnx_text::parse_model(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
        };
        for body in models {
            let a = model(body);
            let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
            assert_eq!(m, None, "{body}");
            assert_three_trials(&c, body);
        }
        let a = model(models[0]);
        let b = model(&models[0].replace(
            "y = OptionalGetElement (o)",
            "t = OptionalGetElement (o)\n  y = Neg (t)",
        ));
        let (m, _) = compare_models_on(&a, &b, &[], 3, &dims, tol).unwrap();
        assert_eq!(m.map(|m| m.output), Some("y".to_string()));
    }

    /// A small integer input read as a shape through ops no role follows (a Split, a Squeeze,
    /// a Range whose length a MatMul then constrains) gets searched values: the check runs, and
    /// a change after it is caught.
    #[test]
    fn values_no_role_gives_are_searched() {
        let model = |tail: &str| {
            let text = format!(
                "<ir_version: 9, opset_import: [\"\" : 18]>\ng (float[7] x, int64[2] s) => (float y) {{\n  p, q = Split <num_outputs: int = 2> (s)\n  n = Squeeze (q)\n  zero = Constant <value = int64 {{0}}> ()\n  one = Constant <value = int64 {{1}}> ()\n  r = Range (zero, n, one)\n  f = Cast <to: int = 1> (r)\n  {tail}\n}}"
            );
            onnx_text::parse_model(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
        };
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let a = model("y = MatMul (f, x)");
        let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_three_trials(&c, "s read as a Range's length");
        assert_eq!(c.dims.get(&inputs::value_key("s", 1)), Some(&7), "{c:?}");
        let b = model("t = MatMul (f, x)\n  y = Neg (t)");
        let (m, _) = compare_models_on(&a, &b, &[], 3, &dims, tol).unwrap();
        assert_eq!(m.map(|m| m.output), Some("y".to_string()));
    }

    /// A node without a kernel inside an If branch or a Loop body is stood in for in both
    /// models (`stand_in.rs`): the check runs, a change before the node (in what it reads) or
    /// after it shows in the outputs, and equal models agree.
    #[test]
    fn the_check_runs_around_nodes_without_a_kernel_in_subgraphs() {
        let with_alpha = |before: &str, after: &str, alpha: &str| {
            onnx_text::parse_model(&format!(
                "<ir_version: 8, opset_import: [\"\" : 13, \"com.x\" : 1]>\ng (float[2, 3] x) => (float[2, 3] y, float[2, 3] z) {{\n  c = Constant <value = bool {{1}}> ()\n  y = If (c) <then_branch = g1 () => (float[2, 3] t) {{ u = {before} (x)\n v = com.x.Plugin <alpha: float = {alpha}> (u)\n t = {after} (v) }}, else_branch = g2 () => (float[2, 3] e) {{ e = Neg (x) }}>\n  n = Constant <value = int64 {{2}}> ()\n  z = Loop (n, c, x) <body = b (int64 i, bool cin, float[2, 3] acc) => (bool cout, float[2, 3] next) {{ cout = Identity (cin)\n p = com.x.Plugin <alpha: float = 2.0> (acc)\n next = {after} (p) }}>\n}}"
            ))
            .unwrap()
        };
        let model = |before: &str, after: &str| with_alpha(before, after, "2.0");
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let a = model("Relu", "Abs");
        let (m, c) = compare_models_on(&a, &a, &[], 3, &dims, tol).unwrap();
        assert_eq!((m, c.random, c.skipped), (None, 3, None));
        assert_eq!(
            c.opaque,
            vec!["2 x com.x::Plugin (in a subgraph, stood in)".to_string()]
        );
        // What the plugin reads changes: its stand-in's outputs change with it.
        let (m, _) = compare_models_on(&a, &model("Neg", "Abs"), &[], 3, &dims, tol).unwrap();
        assert!(m.is_some(), "a change before the plugin went unseen");
        // After it, in both the branch and the loop body.
        let (m, _) = compare_models_on(&a, &model("Relu", "Neg"), &[], 3, &dims, tol).unwrap();
        assert!(m.is_some(), "a change after the plugin went unseen");
        // A plugin with other attributes is another signature: the two models do not hold
        // the same stood-in nodes, so nothing is stood in and the check does not run.
        let other = with_alpha("Relu", "Abs", "3.0");
        let (m, c) = compare_models_on(&a, &other, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert!(c.skipped.is_some(), "{c:?}");
    }

    fn custom(body: &str) -> ModelProto {
        onnx_text::parse_model(&format!(
            "<ir_version: 8, opset_import: [\"\" : 13, \"com.x\" : 1]>\ng (float[2, 3] x) => (float[2, 3] y) {{\n{body}\n}}"
        ))
        .unwrap()
    }

    /// A node of an unknown domain is a boundary: a change before it shows in its input, a
    /// change after it in the outputs; a renamed output, or two equal nodes merged into one,
    /// is no difference.
    #[test]
    fn the_check_runs_around_nodes_without_a_kernel() {
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let original = custom("a = Neg(x)\nb = com.x.Plugin <k = 2> (a)\ny = Relu(b)");
        let check = |optimized: &ModelProto| {
            compare_models_on(&original, optimized, &[], 3, &dims, tol).unwrap()
        };
        let (m, c) = check(&original);
        assert_eq!(m, None);
        assert_eq!(c.random, 3);
        assert_eq!(c.opaque, vec!["com.x::Plugin".to_string()]);
        assert_eq!(c.skipped, None);
        let renamed = custom("a = Neg(x)\nq = com.x.Plugin <k = 2> (a)\ny = Relu(q)");
        assert_eq!(check(&renamed).0, None);
        let before = custom("a = Abs(x)\nb = com.x.Plugin <k = 2> (a)\ny = Relu(b)");
        let m = check(&before).0.unwrap();
        assert!(m.output.starts_with("a (an input of a node"), "{m:?}");
        let after = custom("a = Neg(x)\nb = com.x.Plugin <k = 2> (a)\ny = Sigmoid(b)");
        assert_eq!(check(&after).0.unwrap().output, "y");
        let other_attr = custom("a = Neg(x)\nb = com.x.Plugin <k = 3> (a)\ny = Relu(b)");
        assert_eq!(check(&other_attr).0.unwrap().output, "y");
        let two = custom(
            "a = Neg(x)\nb = com.x.Plugin <k = 2> (a)\nc = com.x.Plugin <k = 2> (a)\ny = Add(b, c)",
        );
        let merged = custom("a = Neg(x)\nb = com.x.Plugin <k = 2> (a)\ny = Add(b, b)");
        let (m, c) = compare_models_on(&two, &merged, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_eq!(c.opaque, vec!["2 x com.x::Plugin".to_string()]);
    }

    /// Dims that break the original by default are searched: a Reshape of [N] to a constant
    /// target runs with N = 24, a mask over past and new positions with T = P + S; a model no
    /// dims can satisfy is skipped with the reason, never a mismatch or an error.
    #[test]
    fn dims_are_searched_until_the_original_runs() {
        let parse = |t: &str| onnx_text::parse_model(t).unwrap();
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let reshape = parse(
            "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[N] x) => (float[2, 12] y) <int64[2] s = {2, 12}> {\n y = Reshape(x, s)\n}",
        );
        let (m, c) = compare_models_on(&reshape, &reshape, &[], 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_eq!((c.random, c.skipped), (3, None));
        assert_eq!(c.dims.get("N"), Some(&24));
        let mask = parse(
            "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[B, P, 4] past, float[B, S, 4] cur, float[B, T] mask) => (float[?, ?] y) <int64[1] ax = {2}> {\n kv = Concat <axis = 1> (past, cur)\n s = ReduceSum <keepdims = 0> (kv, ax)\n y = Concat <axis = 0> (s, mask)\n}",
        );
        let (m, c) = compare_models_on(&mask, &mask, &[], 3, &dims, tol).unwrap();
        assert_eq!((m, c.random, c.skipped), (None, 3, None));
        let user = BTreeMap::from([("P".to_string(), 3), ("S".to_string(), 2)]);
        let (_, c) = compare_models_on(&mask, &mask, &[], 3, &user, tol).unwrap();
        assert_eq!(c.dims.get("T"), Some(&5));
        let never = parse(
            "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[2, 3] x) => (float[4] y) <int64[1] s = {4}> {\n y = Reshape(x, s)\n}",
        );
        let (m, c) = compare_models_on(&never, &never, &[], 3, &dims, tol).unwrap();
        assert_eq!((m, c.random), (None, 0));
        assert!(c.skipped.as_deref().unwrap().contains("Reshape"), "{c:?}");
    }

    /// In float16 and bfloat16, NaN against an infinity is one overflow and compares equal;
    /// +inf against -inf, and either against a finite value, still differ; in float32 NaN
    /// against an infinity differs.
    #[test]
    fn sixteen_bit_overflow_is_nan_or_infinite_alike() {
        use half::{bf16, f16};
        let tol = Tolerance::default();
        let h = |v: &[f32]| {
            Value::Tensor(
                Tensor::from_vec(&[v.len()], v.iter().map(|&x| f16::from_f32(x)).collect())
                    .unwrap(),
            )
        };
        let b = |v: &[f32]| {
            Value::Tensor(
                Tensor::from_vec(&[v.len()], v.iter().map(|&x| bf16::from_f32(x)).collect())
                    .unwrap(),
            )
        };
        let f = |v: &[f32]| Value::Tensor(Tensor::from_vec(&[v.len()], v.to_vec()).unwrap());
        let (nan, inf) = (f32::NAN, f32::INFINITY);
        for t in [h, b] {
            assert_eq!(compare_values(&t(&[nan, 1.0]), &t(&[-inf, 1.0]), tol), None);
            assert_eq!(compare_values(&t(&[inf]), &t(&[nan]), tol), None);
            assert!(compare_values(&t(&[inf]), &t(&[-inf]), tol).is_some());
            assert!(compare_values(&t(&[nan]), &t(&[60000.0]), tol).is_some());
            assert!(compare_values(&t(&[inf]), &t(&[1.0]), tol).is_some());
        }
        assert!(compare_values(&f(&[nan]), &f(&[-inf]), tol).is_some());
        assert_eq!(compare_values(&f(&[nan]), &f(&[nan]), tol), None);
    }

    /// In float16 the absolute tolerance grows with the output's largest finite magnitude: a
    /// near-zero logit beside logits of 5 may move by 0.02, beside logits of at most 1 not;
    /// in float32 the tolerance stays as given.
    #[test]
    fn sixteen_bit_tolerance_scales_with_the_output() {
        use half::f16;
        let tol = Tolerance::default();
        let h = |v: &[f32]| {
            Value::Tensor(
                Tensor::from_vec(&[v.len()], v.iter().map(|&x| f16::from_f32(x)).collect())
                    .unwrap(),
            )
        };
        let f = |v: &[f32]| Value::Tensor(Tensor::from_vec(&[v.len()], v.to_vec()).unwrap());
        assert_eq!(
            compare_values(&h(&[-0.04, 5.0]), &h(&[-0.02, 5.0]), tol),
            None
        );
        assert!(compare_values(&h(&[-0.04, 1.0]), &h(&[-0.02, 1.0]), tol).is_some());
        assert!(compare_values(&h(&[-0.2, 5.0]), &h(&[-0.02, 5.0]), tol).is_some());
        assert!(compare_values(&f(&[-0.04, 5.0]), &f(&[-0.02, 5.0]), tol).is_some());
        // An infinity does not widen the tolerance.
        let inf = f32::INFINITY;
        assert!(compare_values(&h(&[-0.04, inf]), &h(&[-0.02, inf]), tol).is_some());
    }
}
