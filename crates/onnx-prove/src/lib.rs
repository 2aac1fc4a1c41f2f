//! onnx-prove: the development tools of onnx-opt, kept out of the library (and its proptest
//! dependency out of every embedder's build): the rule prover, and in [`fuzz`] the optimizer's
//! differential fuzzer. The `onnx-opt` binary (crates/onnx-opt-cli) uses the prover for
//! `rules check`.
//!
//! The rule prover (`onnx-opt rules check`, [`prove_rule`]; [`prove_rule_set`] for a whole
//! [`RuleSet`], rules written in Rust included): for each rule, each epoch of its opset window and
//! a sample of the element types its ops allow, it generates instances of the left side,
//! keeps those where the rule fires at the root, and checks in the reference interpreter that
//! the right side the engine built computes the same values (by the rule's precision tag).
//!
//! - `choice`: the randomness (a proptest-generated choice vector, shrunk toward zeros).
//! - `hints`: what the guard and the `hint` clauses say (constants, ranks, attribute values).
//! - `gen` and `ops`: the instance as a model (op-aware shapes and attributes).
//! - `engine`: lift, saturate with the one rule, extract the right side.
//! - `compare`: run both sides, compare.
//!
//! A failure (a mismatch, a refused union, a right side that fails) is shrunk and reported with
//! the instance in the ONNX text syntax and its seed. A rule whose epoch gets fewer than
//! [`ProveOptions::min_fired`] firing instances fails too: the generator cannot reach it (the
//! report names the most common reason an instance did not count). Same options, same
//! verdicts.
//!
//! NaN, infinities and -0 appear in graph inputs, not in constants (a weight of +inf makes
//! every folding rule fail for no useful reason); rules tagged `unsafe` get none (their tag
//! says they do not hold for those).
//!
//! ```
//! use onnx_prove::{prove_rule, ProveOptions};
//!
//! let text = "# header\n\n# Identity(x) == x\nrule identity_elim [exact]:\n  Identity(x) => x\n";
//! let file = onnx_rules::parse_rules("t.rules", text, &Default::default()).unwrap();
//! let opts = ProveOptions { instances: 2, ..Default::default() };
//! let v = prove_rule(&file.rules[0], &Default::default(), &opts);
//! assert!(v.passed(&opts));
//! ```

#![warn(missing_docs)]

pub(crate) mod choice;
mod compare;
mod engine;
mod error;
pub mod fuzz;
pub(crate) mod gen;
mod hints;
mod ops;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use onnx_egraph::{GuardRegistry, RuleSet};
use onnx_proto::ModelProto;
use onnx_ref::DType;
use onnx_rules::ir::{OpHead, Pat, Rule};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

pub use error::Error;

use choice::{fnv, mix, SplitMix, CHOICES};
use compare::Ran;
use engine::{Applied, EngineFailure};
use gen::{Instance, Reject};
use hints::Hints;

/// Proves the rules added to an optimizer (text and Rust; not the built-in ones, which
/// `onnx-opt rules check` proves) on random instances in the reference interpreter.
pub fn prove_added_rules(
    optimizer: &onnx_opt::Optimizer,
    options: &ProveOptions,
) -> Result<Vec<RuleVerdict>, onnx_opt::Error> {
    let rules = optimizer.added_rules()?;
    Ok(prove_rule_set(&rules, options))
}

/// How hard the prover tries.
#[derive(Debug, Clone)]
pub struct ProveOptions {
    /// Firing instances wanted per (rule, epoch opset, dtype).
    pub instances: usize,
    /// Instances generated at most per (rule, epoch opset, dtype).
    pub max_attempts: usize,
    /// The master seed; every instance's seed derives from it.
    pub seed: u64,
    /// A (rule, epoch) with fewer firing instances over all its dtypes fails.
    pub min_fired: usize,
}

impl Default for ProveOptions {
    fn default() -> Self {
        ProveOptions {
            instances: 24,
            max_attempts: 400,
            seed: 0,
            min_fired: 4,
        }
    }
}

/// What the prover found for one rule.
#[derive(Debug, Clone)]
pub struct RuleVerdict {
    /// The rule's name.
    pub rule: String,
    /// One entry per (epoch opset, dtype) tried.
    pub checks: Vec<EpochCheck>,
    /// The first failure found, shrunk.
    pub failure: Option<ProveFailure>,
    /// Seconds spent proving it.
    pub seconds: f64,
}

/// The instances of one (epoch opset, dtype).
#[derive(Debug, Clone)]
pub struct EpochCheck {
    /// The opset the instance was built at.
    pub opset: i64,
    /// The element type it was instantiated with.
    pub dtype: String,
    /// Instances generated.
    pub attempts: usize,
    /// Instances where the rule fired at the root (and both sides agreed).
    pub fired: usize,
    /// The most common reason an instance did not count, with its count.
    pub top_miss: Option<(String, usize)>,
}

/// An instance on which the rule is wrong.
#[derive(Debug, Clone)]
pub struct ProveFailure {
    /// The opset the instance was built at.
    pub opset: i64,
    /// The seed of the instance before shrinking.
    pub seed: u64,
    /// The shrunk left side as ONNX text.
    pub instance: String,
    /// What went wrong (element type, the differing element, the inputs, the right side).
    pub detail: String,
}

impl RuleVerdict {
    /// No failure, at least one instance tried, and every epoch opset fired at least
    /// `opts.min_fired` times.
    pub fn passed(&self, opts: &ProveOptions) -> bool {
        self.failure.is_none()
            && !self.checks.is_empty()
            && self
                .per_opset()
                .iter()
                .all(|&(_, f, _)| f >= opts.min_fired)
    }

    /// (opset, fired) of the epochs that fired too rarely (not the one a failure cut short).
    fn rare_epochs(&self, opts: &ProveOptions) -> Vec<(i64, usize)> {
        let cut = self.failure.as_ref().map(|f| f.opset);
        self.per_opset()
            .into_iter()
            .filter(|&(o, fired, _)| fired < opts.min_fired && Some(o) != cut)
            .map(|(o, f, _)| (o, f))
            .collect()
    }

    /// (opset, fired, attempts) summed over dtypes, in opset order.
    fn per_opset(&self) -> Vec<(i64, usize, usize)> {
        let mut out: Vec<(i64, usize, usize)> = Vec::new();
        for c in &self.checks {
            match out.iter_mut().find(|(o, _, _)| *o == c.opset) {
                Some(e) => {
                    e.1 += c.fired;
                    e.2 += c.attempts;
                }
                None => out.push((c.opset, c.fired, c.attempts)),
            }
        }
        out
    }
}

/// Element types the prover samples.
const DTYPES: [DType; 5] = [
    DType::Float,
    DType::Float16,
    DType::Double,
    DType::Int32,
    DType::Int64,
];

/// The largest tensor (elements) a kernel may make while an instance runs: a Range or a
/// ConstantOfShape of a random bound would otherwise allocate gigabytes.
const INSTANCE_ELEMENT_LIMIT: u64 = 1 << 24;

/// At most this many dtypes per epoch (float first, the others in rotation).
const DTYPES_PER_EPOCH: usize = 3;

/// Evaluations spent shrinking a failure, at most.
const SHRINK_BUDGET: usize = 400;

/// The opsets a rule is proven at: each epoch's first opset, and the newest default-domain
/// opset when the window is open-ended.
fn epoch_opsets(rule: &Rule) -> Vec<i64> {
    // A version step: its left side at the opset where its ops bind their pins.
    if let Some(s) = rule.step {
        return vec![s.lhs_opset];
    }
    let mut v: Vec<i64> = rule.epochs.iter().map(|e| e.window.min).collect();
    if v.is_empty() {
        v.push(rule.window.min);
    }
    let open = rule
        .epochs
        .last()
        .map_or(rule.window.max.is_none(), |e| e.window.max.is_none());
    if let (true, Some(latest)) = (open, onnx_schema::registry().max_opset("")) {
        v.push(latest);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether every default-domain op of the left side takes `d` at `opset` (through the input
/// whose type parameter is the output's).
fn lhs_allows(rule: &Rule, opset: i64, d: DType) -> bool {
    let Some(want) = gen::type_str(d) else {
        return false;
    };
    let reg = onnx_schema::registry();
    let takes = |op: &str| {
        let Some(s) = reg.lookup("", op, opset) else {
            return false;
        };
        let Some(out) = s.outputs.first() else {
            return true;
        };
        match s.inputs.iter().find(|f| f.type_str == out.type_str) {
            Some(f) => s
                .allowed_types(&f.type_str)
                .is_none_or(|a| a.contains(&want)),
            None => true,
        }
    };
    rule.pats.iter().all(|(p, _)| match p {
        Pat::Op(op) => match &op.head {
            OpHead::Named(r) if r.domain.is_empty() => takes(&r.op_type),
            OpHead::Var { class: Some(c), .. } => {
                onnx_rules::op_class_members(*c).iter().any(|m| takes(m))
            }
            _ => true,
        },
        _ => true,
    })
}

/// The dtypes tried at an epoch opset.
fn dtype_sample(rule: &Rule, opset: i64, hints: &Hints, seed: u64) -> Vec<DType> {
    let mut allowed: Vec<DType> = DTYPES
        .into_iter()
        .filter(|&d| lhs_allows(rule, opset, d))
        .collect();
    // Ops that take none of the usual types (BitShift, the quantizers): any type the left
    // side takes, else the usual ones (the generator then decides).
    if allowed.is_empty() {
        allowed = DType::ALL
            .into_iter()
            .filter(|&d| gen::type_str(d).is_some() && lhs_allows(rule, opset, d))
            .collect();
    }
    if allowed.is_empty() {
        allowed = DTYPES.to_vec();
    }
    let pinned: Vec<DType> = hints
        .dtype
        .values()
        .filter_map(|&c| DType::from_code(c))
        .collect();
    // `member(dtype(v), [...])` in the guard or a hint: the types the rule can fire at.
    for types in hints.dtype_in.values() {
        let within: Vec<DType> = allowed
            .iter()
            .copied()
            .filter(|d| types.contains(&d.code()))
            .collect();
        if !within.is_empty() {
            allowed = within;
        } else {
            // Types beyond the usual sample (uint8, bool, ...): the listed ones the left allows.
            let listed: Vec<DType> = types
                .iter()
                .filter_map(|&c| DType::from_code(c))
                .filter(|&d| lhs_allows(rule, opset, d))
                .collect();
            if !listed.is_empty() {
                allowed = listed;
            }
        }
    }
    if let Some(&p) = pinned.first() {
        allowed.retain(|&d| d == p);
        if allowed.is_empty() {
            allowed.push(p);
        }
    }
    if allowed.len() <= DTYPES_PER_EPOCH {
        return allowed;
    }
    let first = allowed.remove(0);
    let start = (mix(seed, opset as u64) % allowed.len() as u64) as usize;
    let mut out = vec![first];
    for k in 0..DTYPES_PER_EPOCH - 1 {
        out.push(allowed[(start + k) % allowed.len()]);
    }
    out
}

/// The seed of one instance.
fn instance_seed(seed: u64, rule: &str, opset: i64, d: DType, attempt: usize) -> u64 {
    let group = mix(mix(seed, fnv(rule)), (opset as u64) << 8 | d.code() as u64);
    mix(group, attempt as u64)
}

/// The choice vector of a seed, drawn by proptest from a ChaCha `TestRng`.
fn choices_for(seed: u64) -> Vec<u32> {
    let mut bytes = [0u8; 32];
    let mut s = SplitMix::new(seed);
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&s.next_u64().to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    proptest::collection::vec(proptest::arbitrary::any::<u32>(), CHOICES)
        .new_tree(&mut runner)
        .map(|t| t.current())
        .unwrap_or_else(|_| vec![0; CHOICES])
}

/// What went wrong with a fired instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FailKind {
    Engine(EngineFailure),
    RhsError,
    Mismatch,
}

struct Failure {
    kind: FailKind,
    detail: String,
    instance: Instance,
    rhs: Option<ModelProto>,
}

enum Eval {
    /// Not a valid instance, and why.
    Rejected(String),
    NotFired,
    Passed,
    Failed(Box<Failure>),
}

/// Everything an evaluation needs besides the choices.
struct Ctx<'a> {
    rule: &'a Rule,
    hints: Hints,
    rules: Arc<RuleSet>,
    special: bool,
}

impl<'a> Ctx<'a> {
    fn new(rule: &'a Rule, guards: &GuardRegistry) -> Self {
        let mut set = RuleSet::new();
        set.add_rule(rule.clone());
        set.guards = guards.clone();
        Self::with_set(rule, set)
    }

    /// `set` holds the rule alone (with its Rust guard and applier when it has them).
    fn with_set(rule: &'a Rule, mut set: RuleSet) -> Self {
        set.float_unsafe = true;
        Ctx {
            rule,
            hints: Hints::from_rule(rule),
            rules: Arc::new(set),
            special: !rule.tags.float_unsafe,
        }
    }
}

/// True when the left side runs on the instance's first trial.
fn lhs_runs(inst: &Instance) -> bool {
    let run = std::panic::catch_unwind(|| {
        onnx_ref::Session::new(&inst.model)
            .and_then(|s| s.run(inst.trial_inputs(0)))
            .is_ok()
    });
    run.unwrap_or(false)
}

fn evaluate(ctx: &Ctx<'_>, opset: i64, d: DType, choices: &[u32]) -> Eval {
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        gen::generate(ctx.rule, &ctx.hints, opset, d, ctx.special, choices)
    }));
    let inst = match built {
        Ok(Ok(i)) => i,
        Ok(Err(Reject(why))) => return Eval::Rejected(why),
        Err(_) => return Eval::Rejected("the generator panicked".into()),
    };
    let fail = |kind, detail: String, instance: Instance, rhs| {
        Eval::Failed(Box::new(Failure {
            kind,
            detail,
            instance,
            rhs,
        }))
    };
    match engine::apply_rule(&inst.model, &ctx.rules, &ctx.rule.name, ctx.rule.step) {
        Applied::Rejected(why) => Eval::Rejected(why),
        Applied::NotFired => Eval::NotFired,
        Applied::Failed(k, detail) => {
            if lhs_runs(&inst) {
                fail(FailKind::Engine(k), detail, inst, None)
            } else {
                Eval::Rejected("the left side does not run".into())
            }
        }
        Applied::Fired(rhs) => {
            match compare::run_both(
                &inst.model,
                &rhs,
                &inst,
                ctx.rule.tags.precision,
                ctx.rule.tags.runtime_limit,
            ) {
                Ran::Rejected(why) => Eval::Rejected(why),
                Ran::Agree => Eval::Passed,
                Ran::RhsError(detail) => fail(FailKind::RhsError, detail, inst, Some(*rhs)),
                Ran::Mismatch(detail) => fail(FailKind::Mismatch, detail, inst, Some(*rhs)),
            }
        }
    }
}

/// Rewrites draws toward zero while the same kind of failure remains: first whole blocks of
/// draws (halving the block size down to one draw), then single draws to 1, 2 or half.
fn shrink(
    ctx: &Ctx<'_>,
    opset: i64,
    d: DType,
    mut best: Vec<u32>,
    mut f: Box<Failure>,
) -> Box<Failure> {
    let evals = std::cell::Cell::new(0);
    let attempt = |cand: &[u32], f: &Failure| -> Option<Box<Failure>> {
        if evals.get() >= SHRINK_BUDGET {
            return None;
        }
        evals.set(evals.get() + 1);
        match evaluate(ctx, opset, d, cand) {
            Eval::Failed(g) if g.kind == f.kind && g.instance.size <= f.instance.size => Some(g),
            _ => None,
        }
    };
    let mut size = f.instance.used.min(best.len()).next_power_of_two();
    while size >= 1 {
        let mut start = 0;
        while start < f.instance.used.min(best.len()) {
            let end = (start + size).min(best.len());
            if best[start..end].iter().any(|&v| v != 0) {
                let mut cand = best.clone();
                cand[start..end].fill(0);
                if let Some(g) = attempt(&cand, &f) {
                    best = cand;
                    f = g;
                }
            }
            start += size;
        }
        size /= 2;
    }
    loop {
        let mut improved = false;
        for i in 0..f.instance.used.min(best.len()) {
            for v in [1, 2, best[i] / 2] {
                if v >= best[i] {
                    continue;
                }
                let mut cand = best.clone();
                cand[i] = v;
                if let Some(g) = attempt(&cand, &f) {
                    best = cand;
                    f = g;
                    improved = true;
                    break;
                }
            }
        }
        if !improved || evals.get() >= SHRINK_BUDGET {
            return f;
        }
    }
}

/// One generated instance and what became of it (for looking into a rule that fires too
/// rarely).
#[derive(Debug, Clone)]
pub struct InstanceSample {
    /// The seed that reproduces it.
    pub seed: u64,
    /// The left side as ONNX text (empty when the generator rejected the draw).
    pub instance: String,
    /// `rejected: ...`, `not fired`, `passed`, or the failure.
    pub outcome: String,
}

/// The first `n` instances the prover would generate for `rule` at `opset` with element type
/// `dtype` (lower-case ONNX name), with their outcomes.
pub fn sample_instances(
    rule: &Rule,
    guards: &GuardRegistry,
    opts: &ProveOptions,
    opset: i64,
    dtype: &str,
    n: usize,
) -> Vec<InstanceSample> {
    let Some(d) = DTYPES
        .into_iter()
        .find(|d| d.name().eq_ignore_ascii_case(dtype))
    else {
        return Vec::new();
    };
    let ctx = Ctx::new(rule, guards);
    (0..n)
        .map(|attempt| {
            let seed = instance_seed(opts.seed, &rule.name, opset, d, attempt);
            let choices = choices_for(seed);
            let instance = gen::generate(rule, &ctx.hints, opset, d, ctx.special, &choices)
                .map(|i| print(&i.model))
                .unwrap_or_default();
            let outcome = match evaluate(&ctx, opset, d, &choices) {
                Eval::Rejected(why) => format!("rejected: {why}"),
                Eval::NotFired => "not fired".into(),
                Eval::Passed => "passed".into(),
                Eval::Failed(f) => format!("{:?}: {}", f.kind, f.detail),
            };
            InstanceSample {
                seed,
                instance,
                outcome,
            }
        })
        .collect()
}

/// The first instance on which `rule` fires and both sides agree, searched like its proof
/// (epoch by epoch, element type by element type), with the right side it built: (instance,
/// right side), as ONNX text. `None` when no draw within the proof's attempts does.
pub fn first_firing(
    rule: &Rule,
    guards: &GuardRegistry,
    opts: &ProveOptions,
) -> Option<(String, String)> {
    let ctx = Ctx::new(rule, guards);
    let _limit = onnx_ref::ElementLimit::scoped(INSTANCE_ELEMENT_LIMIT);
    for opset in epoch_opsets(rule) {
        for d in dtype_sample(rule, opset, &ctx.hints, opts.seed) {
            for attempt in 0..opts.max_attempts {
                let seed = instance_seed(opts.seed, &rule.name, opset, d, attempt);
                let choices = choices_for(seed);
                let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    gen::generate(rule, &ctx.hints, opset, d, ctx.special, &choices)
                }));
                let Ok(Ok(inst)) = built else { continue };
                let Applied::Fired(rhs) =
                    engine::apply_rule(&inst.model, &ctx.rules, &rule.name, rule.step)
                else {
                    continue;
                };
                if matches!(
                    compare::run_both(
                        &inst.model,
                        &rhs,
                        &inst,
                        rule.tags.precision,
                        rule.tags.runtime_limit,
                    ),
                    Ran::Agree
                ) {
                    return Some((print(&inst.model), print(&rhs)));
                }
            }
        }
    }
    None
}

fn print(m: &ModelProto) -> String {
    onnx_text::print_model(m, &onnx_text::PrintOptions::default())
}

/// Proves one rule written in the rule language. `guards` are the Rust guards its text may
/// call. A rule whose right side is built in Rust (`=> extern`) fails here: its applier lives
/// in a [`RuleSet`], so prove it with [`prove_rule_set`].
pub fn prove_rule(rule: &Rule, guards: &GuardRegistry, opts: &ProveOptions) -> RuleVerdict {
    if rule.is_extern() {
        return RuleVerdict {
            rule: rule.name.clone(),
            checks: Vec::new(),
            failure: Some(ProveFailure {
                opset: rule.window.min,
                seed: opts.seed,
                instance: String::new(),
                detail: "the right side is built in Rust: prove the rule with `prove_rule_set` on the RuleSet that holds its applier".into(),
            }),
            seconds: 0.0,
        };
    }
    prove_in(&Ctx::new(rule, guards), opts)
}

/// Proves every rule of a set, in order: rules written in the rule language as
/// [`prove_rule`] does, and rules written in Rust alike. Instances come from the left side,
/// the text `where` and the `hint`s; each is saturated with that rule alone (its Rust guard
/// and applier included) and both sides are compared in the reference interpreter. The set's
/// Rust guards are callable from the rules' text; `float_unsafe` is ignored (every rule is
/// proven).
///
/// ```
/// use std::sync::Arc;
/// use onnx_egraph::{RuleSet, RustRhs};
/// use onnx_prove::{prove_rule_set, ProveOptions};
///
/// // Neg(Neg(x)) == x, its right side built in Rust.
/// let rule = onnx_rules::parse_extern_rule("neg_neg", "Neg(Neg(x))", "exact", &Default::default())
///     .unwrap();
/// let mut set = RuleSet::new();
/// set.add_rust_rule(rule, None, Arc::new(|rhs: &mut RustRhs<'_>| Ok(rhs.var("x"))))
///     .unwrap();
/// let opts = ProveOptions { instances: 2, ..Default::default() };
/// let verdicts = prove_rule_set(&set, &opts);
/// assert!(verdicts[0].passed(&opts), "{}", onnx_prove::render_verdicts(&verdicts, &opts));
/// ```
pub fn prove_rule_set(set: &RuleSet, opts: &ProveOptions) -> Vec<RuleVerdict> {
    set.rules()
        .filter_map(|rule| {
            let single = set.only(&rule.name)?;
            Some(prove_in(&Ctx::with_set(rule, single), opts))
        })
        .collect()
}

/// Proves the rule of a context.
fn prove_in(ctx: &Ctx<'_>, opts: &ProveOptions) -> RuleVerdict {
    let _limit = onnx_ref::ElementLimit::scoped(INSTANCE_ELEMENT_LIMIT);
    let rule = ctx.rule;
    let start = Instant::now();
    let mut checks = Vec::new();
    let mut failure = None;
    'epochs: for opset in epoch_opsets(rule) {
        for d in dtype_sample(rule, opset, &ctx.hints, opts.seed) {
            let mut check = EpochCheck {
                opset,
                dtype: d.name().to_lowercase(),
                attempts: 0,
                fired: 0,
                top_miss: None,
            };
            let mut misses: BTreeMap<String, usize> = BTreeMap::new();
            while check.fired < opts.instances && check.attempts < opts.max_attempts {
                let seed = instance_seed(opts.seed, &rule.name, opset, d, check.attempts);
                check.attempts += 1;
                let choices = choices_for(seed);
                match evaluate(ctx, opset, d, &choices) {
                    Eval::Rejected(why) => *misses.entry(short(&why)).or_insert(0) += 1,
                    Eval::NotFired => {
                        *misses.entry("did not fire at the root".into()).or_insert(0) += 1
                    }
                    Eval::Passed => check.fired += 1,
                    Eval::Failed(f) => {
                        let f = shrink(ctx, opset, d, choices, f);
                        failure = Some(report(opset, seed, d, &f));
                        check.top_miss = top(misses);
                        checks.push(check);
                        break 'epochs;
                    }
                }
            }
            check.top_miss = top(misses);
            checks.push(check);
        }
    }
    RuleVerdict {
        rule: rule.name.clone(),
        checks,
        failure,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// A reason cut to its first clause (so that counts group).
fn short(why: &str) -> String {
    let s: String = why.chars().take(160).collect();
    s.split(['\n']).next().unwrap_or_default().to_string()
}

fn top(misses: BTreeMap<String, usize>) -> Option<(String, usize)> {
    misses
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
}

fn report(opset: i64, seed: u64, d: DType, f: &Failure) -> ProveFailure {
    let what = match f.kind {
        FailKind::Mismatch => "the two sides differ".to_string(),
        FailKind::RhsError => "the right side fails".to_string(),
        FailKind::Engine(EngineFailure::Refused) => "the engine refused the union".to_string(),
        FailKind::Engine(k) => format!("engine failure ({k:?})"),
    };
    let mut detail = format!("{what} (dtype {}): {}", d.name().to_lowercase(), f.detail);
    if let Some(rhs) = &f.rhs {
        let _ = write!(detail, "\nright side:\n{}", print(rhs).trim_end());
    }
    ProveFailure {
        opset,
        seed,
        instance: print(&f.instance.model),
        detail,
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}\n")).collect::<String>()
}

/// One line per rule (name, fired/attempts per epoch opset, PASS/FAIL, time), then every
/// failure in full, then a summary line.
pub fn render_verdicts(v: &[RuleVerdict], opts: &ProveOptions) -> String {
    let width = v.iter().map(|r| r.rule.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in v {
        let epochs: Vec<String> = r
            .per_opset()
            .iter()
            .map(|(o, f, a)| format!("{o}:{f}/{a}"))
            .collect();
        let status = if r.passed(opts) { "PASS" } else { "FAIL" };
        let _ = writeln!(
            out,
            "{:<width$}  {status}  {:>6.2}s  {}",
            r.rule,
            r.seconds,
            epochs.join(" ")
        );
    }
    for r in v.iter().filter(|r| !r.passed(opts)) {
        let _ = writeln!(out, "\n--- {} ---", r.rule);
        if let Some(f) = &r.failure {
            let _ = writeln!(out, "  at opset {}, seed {:#018x}", f.opset, f.seed);
            let _ = write!(
                out,
                "  {}\n  instance:\n{}",
                f.detail.replace('\n', "\n  "),
                indent(&f.instance)
            );
        }
        for (opset, fired) in r.rare_epochs(opts) {
            let _ = writeln!(
                out,
                "  fires too rarely at opset {opset}: {fired} instances (at least {} wanted); give it a `hint` clause (rules/README.md)",
                opts.min_fired
            );
            for c in r.checks.iter().filter(|c| c.opset == opset) {
                let why = c
                    .top_miss
                    .as_ref()
                    .map(|(w, n)| format!(", most often: {w} ({n})"))
                    .unwrap_or_default();
                let _ = writeln!(out, "    {}: {}/{}{why}", c.dtype, c.fired, c.attempts);
            }
        }
    }
    let passed = v.iter().filter(|r| r.passed(opts)).count();
    let _ = writeln!(
        out,
        "\n{} rules: {passed} passed, {} failed",
        v.len(),
        v.len() - passed
    );
    out
}

/// The round trip of a version step and its inverse: on instances of the step's left side
/// where the step fires, the inverse must fire on the step's result and give back a model that
/// computes what the instance does.
#[derive(Debug, Clone)]
pub struct RoundTrip {
    /// The step (up).
    pub step: String,
    /// Its inverse (down).
    pub inverse: String,
    /// Instances the step fired on.
    pub fired: usize,
    /// Of those, instances that came back equal through the inverse.
    pub returned: usize,
    /// Of those, instances with a dim known only by name where no inverse fired: a step back
    /// whose guard reads a static dim (Split-18's `num_outputs` down to 13 needs the dim to
    /// divide) cannot fire there, and the step up is one-way on them.
    pub one_way: usize,
    /// The first instance that did not come back, and why.
    pub failure: Option<String>,
}

impl RoundTrip {
    /// Every instance came back, and there were at least `opts.min_fired` of them.
    pub fn passed(&self, opts: &ProveOptions) -> bool {
        self.failure.is_none() && self.returned >= opts.min_fired
    }
}

/// The inverses of a version step in `rules`: the steps whose single-op sides swap the step's
/// ops and versions (Relu-13 -> Relu-14 and back; Upsample-9 -> Resize-10 and back).
pub fn step_inverses<'a>(step: &Rule, rules: &[&'a Rule]) -> Vec<&'a Rule> {
    type Key = (String, i64, String, i64);
    let key = |r: &Rule| -> Option<Key> {
        let (a, b) = r.step_ops()?;
        Some((a.op_type.clone(), a.pin?, b.op_type.clone(), b.pin?))
    };
    let Some((a, x, b, y)) = key(step) else {
        return Vec::new();
    };
    let want = Some((b, y, a, x));
    rules.iter().filter(|r| key(r) == want).copied().collect()
}

/// Runs the round trip of `step` (a version step) through its `inverses` (each instance must
/// come back through one of them).
pub fn round_trip(
    step: &Rule,
    inverses: &[&Rule],
    guards: &GuardRegistry,
    opts: &ProveOptions,
) -> RoundTrip {
    let mut out = RoundTrip {
        step: step.name.clone(),
        inverse: inverses
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(" or "),
        fired: 0,
        returned: 0,
        one_way: 0,
        failure: None,
    };
    let Some(s) = step.step else {
        out.failure = Some("not a version step".into());
        return out;
    };
    if inverses.is_empty() || inverses.iter().any(|r| r.step.is_none()) {
        out.failure = Some("no version step back".into());
        return out;
    }
    let _limit = onnx_ref::ElementLimit::scoped(INSTANCE_ELEMENT_LIMIT);
    let up = Ctx::new(step, guards);
    let downs: Vec<Ctx<'_>> = inverses.iter().map(|r| Ctx::new(r, guards)).collect();
    let opset = s.lhs_opset;
    'dtypes: for d in dtype_sample(step, opset, &up.hints, opts.seed) {
        let mut fired = 0;
        for attempt in 0..opts.max_attempts {
            if fired >= opts.instances {
                break;
            }
            let seed = instance_seed(opts.seed ^ 0x5eed, &step.name, opset, d, attempt);
            let choices = choices_for(seed);
            let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                gen::generate(step, &up.hints, opset, d, up.special, &choices)
            }));
            let Ok(Ok(inst)) = built else { continue };
            let Applied::Fired(there) =
                engine::apply_rule(&inst.model, &up.rules, &step.name, step.step)
            else {
                continue;
            };
            // The step's result must run like the instance (else it is the step's own failure,
            // reported by its proof).
            if !matches!(
                compare::run_both(&inst.model, &there, &inst, step.tags.precision, false),
                Ran::Agree
            ) {
                continue;
            }
            fired += 1;
            out.fired += 1;
            let mut whys = Vec::new();
            let mut not_fired = 0;
            for down in &downs {
                let inverse = down.rule;
                let why = match engine::apply_rule(&there, &down.rules, &inverse.name, inverse.step)
                {
                    Applied::Fired(back) => {
                        match compare::run_both(
                            &inst.model,
                            &back,
                            &inst,
                            inverse.tags.precision,
                            false,
                        ) {
                            Ran::Agree => None,
                            Ran::Rejected(w) | Ran::RhsError(w) | Ran::Mismatch(w) => {
                                Some(format!("back through {} differs: {w}", inverse.name))
                            }
                        }
                    }
                    Applied::NotFired => {
                        not_fired += 1;
                        Some(format!("the step back {} did not fire", inverse.name))
                    }
                    Applied::Rejected(w) => {
                        Some(format!("the step back {} did not apply: {w}", inverse.name))
                    }
                    Applied::Failed(k, w) => Some(format!(
                        "the step back {} failed ({k:?}): {w}",
                        inverse.name
                    )),
                };
                match why {
                    None => {
                        whys.clear();
                        break;
                    }
                    Some(w) => whys.push(w),
                }
            }
            if whys.is_empty() {
                out.returned += 1;
                continue;
            }
            if not_fired == downs.len() && has_symbolic_dim(&inst.model) {
                out.one_way += 1;
                continue;
            }
            let why = whys.join("; ");
            out.failure = Some(format!(
                "{why} (dtype {}, seed {seed:#x})\ninstance:\n{}",
                d.name().to_lowercase(),
                indent(&print(&inst.model))
            ));
            break 'dtypes;
        }
    }
    out
}

/// Whether a graph input of the model has a dim known only by name (or not at all).
fn has_symbolic_dim(model: &ModelProto) -> bool {
    use onnx_proto::tensor_shape_proto::dimension::Value as D;
    use onnx_proto::type_proto::Value as T;
    let Some(g) = &model.graph else { return false };
    g.input
        .iter()
        .any(|v| match v.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(T::TensorType(t)) => t.shape.as_ref().is_none_or(|s| {
                s.dim
                    .iter()
                    .any(|d| !matches!(d.value, Some(D::DimValue(_))))
            }),
            _ => false,
        })
}
