//! The optimizer as a library: a builder over a [`Pipeline`], extra rules (text, files),
//! the cost model, folding and the differential check, and [`Optimizer::optimize`], which
//! returns the optimized model and a [`Report`].
//!
//! The check is on by default (three random inputs, as onnxsim's command line does). When it
//! finds a difference, the rule set is bisected to name the rule that broke the model: the
//! smallest prefix of the rules (in pipeline order) whose result differs ends with the culprit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use onnx_egraph::{CostKind, FoldOptions, OptimizeOptions, OptimizeReport, Phase, RuleSet};
use onnx_ir::Model;

use crate::info::ModelInfo;
use crate::pipeline::{Extra, Pipeline};
use crate::verify::{compare_models_on, Checked, InputSet, Mismatch, Tolerance};
use crate::Error;

/// Random trials of the default check.
pub const DEFAULT_CHECK_TRIALS: usize = 3;

/// Optimizes models: a pipeline, extra rules, and options.
///
/// ```
/// let model = onnx_opt::parse_text(
///     r#"<ir_version: 8, opset_import: ["" : 13]>
///        g (float[2, 3] x) => (float[2, 3] y) { t = Identity(x)  y = Relu(t) }"#,
/// )?;
/// let out = onnx_opt::Optimizer::new().optimize(&model)?;
/// assert_eq!(out.model.graph.order.len(), 1);
/// assert_eq!(out.report.nodes_after, 1);
/// # Ok::<(), onnx_opt::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Optimizer {
    pipeline: Pipeline,
    extra: Extra,
    cost: Option<CostKind>,
    fold: Option<FoldOptions>,
    target_opset: Option<i64>,
    check: usize,
    /// Input sets (test data) the check runs before its random trials.
    check_data: Vec<InputSet>,
    /// Test-data directories read against the model when it is optimized.
    check_data_dirs: Vec<std::path::PathBuf>,
    dims: BTreeMap<String, i64>,
    tolerance: Tolerance,
    /// A check that cannot run is an error, not a warning.
    require_check: bool,
}

impl Default for Optimizer {
    fn default() -> Self {
        Optimizer::new()
    }
}

/// An optimized model and what happened.
#[derive(Debug, Clone)]
pub struct Optimized {
    /// The optimized model; it has passed the checker.
    pub model: Model,
    /// Figures of the run.
    pub report: Report,
}

/// What an optimization did: node counts and op histograms before and after, the e-graph's
/// report (phases, firings per rule, refusals), and the check.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The pipeline that ran.
    pub pipeline: String,
    /// Nodes of the main graph before.
    pub nodes_before: usize,
    /// Nodes of the main graph after.
    pub nodes_after: usize,
    /// Initializers before.
    pub initializers_before: usize,
    /// Initializers after.
    pub initializers_after: usize,
    /// Count per op type before (subgraphs included).
    pub ops_before: BTreeMap<String, usize>,
    /// Count per op type after (subgraphs included).
    pub ops_after: BTreeMap<String, usize>,
    /// Random trials the check ran (0: it was off).
    pub check_trials: usize,
    /// Given input sets (test data) the check ran.
    pub check_data_sets: usize,
    /// Why the check's random trials stopped early: the original fails on random inputs
    /// (after every given data set, or a first random input, agreed).
    pub check_random_skipped: Option<String>,
    /// Why the check did not run at all (nothing was compared): the result is unchecked.
    pub check_skipped: Option<String>,
    /// The nodes the check ran around (no kernel in the interpreter), as `domain::op` with
    /// counts.
    pub check_opaque: Vec<String>,
    /// Dims of the random inputs that the check chose so that the original runs (those not
    /// left at 1 nor set by the user).
    pub check_dims: BTreeMap<String, i64>,
    /// Calls of model-local functions inlined before converting to another opset.
    pub inlined_calls: usize,
    /// Model-local functions removed after inlining (no call left).
    pub inlined_functions: usize,
    /// Model-local functions whose bodies were converted in place to the target opset.
    pub functions_converted: usize,
    /// Nodes of ops the target lacks replaced by their schema's function body.
    pub expanded_bodies: usize,
    /// If nodes with a constant condition replaced by the branch they take.
    pub spliced_ifs: usize,
    /// MatMul nodes removed by merging MatMuls that share their input (`sibling_matmul.rs`).
    pub merged_matmuls: usize,
    /// Conv nodes removed by merging Convs that share their input and attributes
    /// (`sibling_conv.rs`).
    pub merged_convs: usize,
    /// Milliseconds spent optimizing (check excluded).
    pub optimize_ms: f64,
    /// The cost model's latency estimate of the main graph's operators before and after, in
    /// its microseconds (shapes the analysis knows; unknown dims count as 1).
    pub estimate_before: f64,
    /// The same estimate for the optimized main graph.
    pub estimate_after: f64,
    /// Milliseconds spent checking.
    pub check_ms: f64,
    /// The e-graph's report: phases, firings per rule, refusals, folding.
    pub egraph: OptimizeReport,
}

/// What preparing a conversion did (see `Optimizer::prepare_conversion`).
#[derive(Default)]
struct Prepared {
    model: Option<Model>,
    expanded: usize,
    inlined: crate::inline::Inlined,
    in_place: crate::functions::InPlace,
}

impl Optimizer {
    /// The default pipeline with the built-in rules, the check on three random inputs.
    pub fn new() -> Self {
        Optimizer {
            pipeline: Pipeline::default_pipeline(),
            extra: Extra::default(),
            cost: None,
            fold: None,
            target_opset: None,
            check: DEFAULT_CHECK_TRIALS,
            check_data: Vec::new(),
            check_data_dirs: Vec::new(),
            require_check: false,
            dims: BTreeMap::new(),
            tolerance: Tolerance::default(),
        }
    }

    /// A converter to default-domain opset `opset`: the `convert` pipeline (no optimization
    /// rule) with that target; checked on three random inputs like any optimization. Nodes
    /// with no equivalent legal at the target are an error listing every one of them.
    pub fn converter(opset: i64) -> Self {
        Optimizer::new()
            .pipeline(Pipeline::builtin("convert").expect("the built-in convert pipeline parses"))
            .target_opset(opset)
    }

    /// Runs this pipeline (its phases, cost model and folding) instead of the default.
    pub fn pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = pipeline;
        self
    }

    /// Keeps (`true`, the default) or leaves out the built-in rule files the pipeline names.
    pub fn builtin_rules(mut self, on: bool) -> Self {
        self.extra.no_builtin = !on;
        self
    }

    /// Adds rules written as text (checked when the optimizer runs; `origin` names them in
    /// errors). They run in every phase.
    pub fn rules_text(mut self, origin: &str, text: &str) -> Self {
        self.extra
            .texts
            .push((origin.to_string(), text.to_string()));
        self
    }

    /// Adds a rule written in Rust (its left side is checked when the optimizer runs); it runs
    /// in every phase.
    pub fn rust_rule(mut self, rule: crate::RustRule) -> Self {
        self.extra.rust.push(rule);
        self
    }

    /// Proves the rules added to this optimizer (text and Rust; not the built-in ones, which
    /// `onnx-opt rules check` proves) on random instances in the reference interpreter.
    pub fn prove_added_rules(
        &self,
        options: &crate::prove::ProveOptions,
    ) -> Result<Vec<crate::prove::RuleVerdict>, Error> {
        let added = Pipeline {
            phases: vec![crate::pipeline::PhaseSpec {
                name: "added".into(),
                rules: Vec::new(),
                labels: Vec::new(),
                iterations: 1,
                enodes: 1,
                seconds: 1.0,
            }],
            ..self.pipeline.clone()
        };
        let phases = added.phases(&self.extra)?;
        Ok(phases
            .first()
            .map(|p| crate::prove::prove_rule_set(&p.rules, options))
            .unwrap_or_default())
    }

    /// Adds a rule file; it runs in every phase.
    pub fn rules_file(mut self, path: &Path) -> Result<Self, Error> {
        let text = crate::rules::read_rule_file(path)?;
        self.extra.texts.push((path.display().to_string(), text));
        Ok(self)
    }

    /// Also runs rules tagged `unsafe` (float-unsafe).
    pub fn unsafe_rules(mut self, on: bool) -> Self {
        self.extra.float_unsafe = on;
        self
    }

    /// Overrides the pipeline's cost model.
    pub fn cost(mut self, cost: CostKind) -> Self {
        self.cost = Some(cost);
        self
    }

    /// Overrides the pipeline's folding options.
    pub fn fold(mut self, fold: FoldOptions) -> Self {
        self.fold = Some(fold);
        self
    }

    /// Extracts only operators legal at this default-domain opset.
    pub fn target_opset(mut self, opset: i64) -> Self {
        self.target_opset = Some(opset);
        self
    }

    /// Random trials of the differential check (0 turns it off).
    pub fn check(mut self, trials: usize) -> Self {
        self.check = trials;
        self
    }

    /// Make a check that cannot run an error ([`Error::CheckSkipped`]). By default such a result
    /// is returned with `Report::check_skipped` saying why the check did not run (the original
    /// model cannot run in the interpreter, or fails on every input the search tried).
    pub fn require_check(mut self, require: bool) -> Self {
        self.require_check = require;
        self
    }

    /// Input sets (test data: graph input name and value) the check runs before its random
    /// trials. Where the original model fails on random inputs (indices out of range, a shape
    /// input), agreeing on these sets is the check; the report says why the random trials
    /// stopped.
    pub fn check_data(mut self, sets: Vec<InputSet>) -> Self {
        self.check_data = sets;
        self
    }

    /// A test-data directory for the check ([`crate::run::read_data_sets`]: `input_N.pb`
    /// files, or `test_data_set_*` directories of them), read when a model is optimized.
    pub fn check_data_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.check_data_dirs.push(dir.into());
        self
    }

    /// Value of a symbolic dimension for the check's random inputs.
    pub fn dim(mut self, name: &str, value: i64) -> Self {
        self.dims.insert(name.to_string(), value);
        self
    }

    /// The check's tolerances for floating-point outputs.
    pub fn tolerance(mut self, tolerance: Tolerance) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// The pipeline this optimizer runs.
    pub fn pipeline_spec(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The check's trial count.
    pub fn check_trials(&self) -> usize {
        self.check
    }

    /// The saturation phases this optimizer runs, with every rule parsed and checked.
    pub fn phases(&self) -> Result<Vec<Phase>, Error> {
        let mut phases = self.pipeline.phases(&self.extra)?;
        if self.target_opset.is_some() && !self.extra.no_builtin {
            let mut version = crate::rules::version_phase()?;
            version.target_opset = self.target_opset;
            phases.push(version);
        }
        Ok(phases)
    }

    fn options(&self, phases: Vec<Phase>) -> OptimizeOptions {
        OptimizeOptions {
            fold: self
                .fold
                .clone()
                .unwrap_or_else(|| self.pipeline.fold_options()),
            cost: self.cost.unwrap_or_else(|| self.pipeline.cost.into()),
            phases,
            target_opset: self.target_opset,
        }
    }

    /// Optimizes a model (its main graph and every subgraph), then checks the result against
    /// the original in the reference interpreter unless the check is off. A difference is an
    /// [`Error::Mismatch`] naming the first output that differs and the rule that broke it.
    pub fn optimize(&self, model: &Model) -> Result<Optimized, Error> {
        let origin = crate::model_origin(model);
        let phases = self.phases()?;
        let original = model.to_proto();
        let prepared = self.prepare_conversion(model, &original, &origin)?;
        let (expanded, inlined, in_place) =
            (prepared.expanded, prepared.inlined, prepared.in_place);
        let source_opset = model.opset_version("");
        let model = prepared.model.as_ref().unwrap_or(model);
        let before = ModelInfo::of(&original);
        let t1 = std::time::Instant::now();
        // Up to a later opset: converted first (the version phase alone), then optimized at
        // the target below, where the rules see the target's ops (a fusion into
        // LayerNormalization needs the pattern before other rules rewrote it).
        let up = matches!((source_opset, self.target_opset), (Some(s), Some(t)) if t > s)
            && !self.extra.no_builtin;
        let first: &[Phase] = match up {
            true => &phases[phases.len() - 1..],
            false => &phases,
        };
        let (mut optimized, mut egraph) = self.run_phases(model, first, None, &origin)?;
        // An If whose condition folded to a constant: its branch is spliced in and the model
        // optimized again (at most a few rounds; each removes at least one If). A conversion
        // does so where it wrote function bodies (some pick a case by an If).
        let mut spliced_ifs = 0;
        if !self.pipeline.phases.is_empty() || expanded > 0 {
            for _ in 0..4 {
                let mut p = optimized.to_proto();
                let n = crate::if_const::splice_constant_ifs(&mut p);
                if n == 0 {
                    break;
                }
                spliced_ifs += n;
                let m = Model::from_proto(p).map_err(|source| Error::Ir {
                    path: origin.clone().into(),
                    source,
                })?;
                let (o, again) = self.run_phases(&m, &phases, None, &origin)?;
                optimized = o;
                egraph = merge_runs(egraph, again);
            }
        }
        // Converted up: optimized again at the target, where the pipeline's rules (or, for a
        // conversion alone, the fusions into ops the source opset lacks) see the target's ops.
        if let (true, Some(s), Some(t)) = (up, source_opset, self.target_opset) {
            let again = match self.pipeline.phases.is_empty() {
                false => self.pipeline.phases(&self.extra)?,
                true => crate::rules::upward_fusion_phase(s, t)?
                    .into_iter()
                    .collect(),
            };
            if !again.is_empty() {
                let (o, report) = self.run_phases(&optimized, &again, None, &origin)?;
                optimized = o;
                egraph = merge_runs(egraph, report);
            }
        }
        // Sibling MatMuls over one input merged into one MatMul and a Split (a pass over the
        // extracted graph: see `sibling_matmul.rs`), where a pipeline optimizes.
        let mut proto = optimized.to_proto();
        let mut merged_matmuls = 0;
        let mut merged_convs = 0;
        if !self.pipeline.phases.is_empty() {
            merged_matmuls = crate::sibling_matmul::merge_sibling_matmuls(&mut proto);
            // Likewise sibling Convs (`sibling_conv.rs`), under the node-count cost model only:
            // the Split keeps onnxruntime's NCHWc layout from spanning the merged Conv's
            // readers (reorders around it made light_inception_v1 1.5 to 4% slower with its
            // optimizations on, 1.4 to 4% faster with them off).
            let cost = self.cost.unwrap_or_else(|| self.pipeline.cost.into());
            if cost == CostKind::NodeCount {
                merged_convs = crate::sibling_conv::merge_sibling_convs(&mut proto);
            }
            if merged_matmuls + merged_convs > 0 {
                optimized = Model::from_proto(proto.clone()).map_err(|source| Error::Ir {
                    path: origin.clone().into(),
                    source,
                })?;
            }
        }
        let optimize_ms = t1.elapsed().as_secs_f64() * 1e3;
        let t2 = std::time::Instant::now();
        let mut checked = Checked::default();
        let mut data = self.check_data.clone();
        for d in &self.check_data_dirs {
            data.extend(crate::run::read_data_sets(&original, d)?);
        }
        if self.check > 0 || !data.is_empty() {
            let (m, c) = self.differs(&original, &proto, &data)?;
            checked = c;
            if let (Some(reason), true) = (&checked.skipped, self.require_check) {
                return Err(Error::CheckSkipped {
                    reason: reason.clone(),
                });
            }
            if let Some(m) = m {
                let culprit = self.bisect(model, &original, &phases, &origin, &data);
                return Err(Error::Mismatch(Box::new(MismatchReport {
                    mismatch: m,
                    culprit,
                })));
            }
        }
        let check_ms = t2.elapsed().as_secs_f64() * 1e3;
        let after = ModelInfo::of(&proto);
        Ok(Optimized {
            model: optimized,
            report: Report {
                pipeline: self.pipeline.name.clone(),
                nodes_before: before.nodes,
                nodes_after: after.nodes,
                initializers_before: before.initializers,
                initializers_after: after.initializers,
                ops_before: before.op_histogram,
                ops_after: after.op_histogram,
                check_trials: checked.random,
                check_data_sets: checked.data_sets,
                check_random_skipped: checked.random_skipped,
                check_skipped: checked.skipped,
                check_opaque: checked.opaque,
                check_dims: checked.dims,
                inlined_calls: inlined.calls,
                inlined_functions: inlined.functions,
                functions_converted: in_place.functions,
                expanded_bodies: expanded,
                spliced_ifs,
                merged_matmuls,
                merged_convs,
                optimize_ms,
                estimate_before: egraph.main.estimate_before,
                estimate_after: egraph.main.estimate_after,
                check_ms,
                egraph,
            },
        })
    }

    /// Prepares a conversion to another opset: ops the target lacks written as their schema's
    /// body (`expand.rs`; bodies that do not pass type inference are not used, and the
    /// conversion then refuses those nodes by name), then model-local functions converted in
    /// place where their calls type them (`functions.rs`), else inlined (`inline.rs`).
    /// `model` is `None` when nothing changed.
    fn prepare_conversion(
        &self,
        model: &Model,
        original: &onnx_proto::ModelProto,
        origin: &str,
    ) -> Result<Prepared, Error> {
        let mut out = Prepared::default();
        let (Some(t), Some(source)) = (self.target_opset, model.opset_version("")) else {
            return Ok(out);
        };
        if source == t {
            return Ok(out);
        }
        let unsupported = |msg: String| Error::Optimize {
            path: origin.into(),
            source: onnx_egraph::EGraphError::Unsupported(msg),
        };
        let ir = |p: onnx_proto::ModelProto| {
            Model::from_proto(p).map_err(|source| Error::Ir {
                path: origin.into(),
                source,
            })
        };
        let (proto, n) = crate::expand::expand_for_target(original, t).map_err(unsupported)?;
        let infers = |p: &onnx_proto::ModelProto| {
            let opsets = onnx_schema::infer::opset_imports(&p.opset_import);
            p.graph
                .as_ref()
                .is_some_and(|g| onnx_schema::infer::infer_graph(g, &opsets).is_ok())
        };
        let mut current = original.clone();
        if n > 0 && (infers(&proto) || !infers(original)) {
            out.expanded = n;
            let m = self.fold_constant_ifs(proto, origin)?;
            current = m.to_proto();
            out.model = Some(m);
        }
        if current.functions.is_empty() {
            return Ok(out);
        }
        let unit = |m: &onnx_proto::ModelProto| -> Result<onnx_proto::ModelProto, String> {
            let m = Model::from_proto(m.clone()).map_err(|e| e.to_string())?;
            let done = Optimizer::converter(t).check(0).optimize(&m).map_err(|e| {
                let mut msg = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(x) = src {
                    msg.push_str(&format!(": {x}"));
                    src = x.source();
                }
                msg
            })?;
            Ok(done.model.to_proto())
        };
        match crate::functions::convert_in_place(&current, t, &unit).map_err(unsupported)? {
            Some((proto, done)) => {
                out.in_place = done;
                out.model = Some(ir(proto)?);
            }
            None => {
                let (proto, done) =
                    crate::inline::inline_local_functions(&current).map_err(unsupported)?;
                out.inlined = done;
                out.model = Some(ir(proto)?);
            }
        }
        Ok(out)
    }

    /// A model with written-out function bodies, folded at its own opset and with each If of
    /// a constant condition replaced by its branch (a body such as AffineGrid's picks its rank
    /// by an If), so the conversion after sees typed values.
    fn fold_constant_ifs(
        &self,
        mut proto: onnx_proto::ModelProto,
        origin: &str,
    ) -> Result<Model, Error> {
        let ir = |p: onnx_proto::ModelProto| {
            Model::from_proto(p).map_err(|source| Error::Ir {
                path: origin.into(),
                source,
            })
        };
        for _ in 0..4 {
            let options = OptimizeOptions {
                target_opset: None,
                ..self.options(Vec::new())
            };
            let folded = onnx_egraph::optimize_model(&ir(proto.clone())?, options)
                .map_err(|source| Error::Optimize {
                    path: origin.into(),
                    source,
                })?
                .0;
            proto = folded.to_proto();
            if crate::if_const::splice_constant_ifs(&mut proto) == 0 {
                break;
            }
        }
        ir(proto)
    }

    fn run_phases(
        &self,
        model: &Model,
        phases: &[Phase],
        keep: Option<&BTreeSet<String>>,
        origin: &str,
    ) -> Result<(Model, OptimizeReport), Error> {
        let phases = phases.iter().map(|p| restrict(p, keep)).collect();
        onnx_egraph::optimize_model(model, self.options(phases)).map_err(|source| Error::Optimize {
            path: origin.into(),
            source,
        })
    }

    fn differs(
        &self,
        original: &onnx_proto::ModelProto,
        optimized: &onnx_proto::ModelProto,
        data: &[InputSet],
    ) -> Result<(Option<Mismatch>, Checked), Error> {
        compare_models_on(
            original,
            optimized,
            data,
            self.check,
            &self.dims,
            self.tolerance,
        )
        .map_err(|e| Error::Verify(Box::new(e)))
    }

    /// The rule whose addition makes the outputs differ: binary search over prefixes of the
    /// rules in pipeline order. `None` when the difference does not come from a rule (the
    /// model with no rule at all already differs: folding or extraction).
    fn bisect(
        &self,
        model: &Model,
        original: &onnx_proto::ModelProto,
        phases: &[Phase],
        origin: &str,
        data: &[InputSet],
    ) -> Option<String> {
        let mut order: Vec<String> = Vec::new();
        for p in phases {
            for r in p.rules.rules() {
                if !order.contains(&r.name) {
                    order.push(r.name.clone());
                }
            }
        }
        let broken = |k: usize| -> bool {
            let keep: BTreeSet<String> = order[..k].iter().cloned().collect();
            match self.run_phases(model, phases, Some(&keep), origin) {
                Ok((m, _)) => matches!(
                    self.differs(original, &m.to_proto(), data),
                    Ok((Some(_), _))
                ),
                Err(_) => false,
            }
        };
        if order.is_empty() || broken(0) {
            return None;
        }
        // Invariant: prefix `lo` is fine, prefix `hi` is broken.
        let (mut lo, mut hi) = (0, order.len());
        if !broken(hi) {
            return None;
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if broken(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        Some(order[hi - 1].clone())
    }
}

/// A check failure: the first difference, and the rule found by bisection.
#[derive(Debug, Clone, PartialEq)]
pub struct MismatchReport {
    /// The first output that differs, and how.
    pub mismatch: Mismatch,
    /// The rule whose addition makes the outputs differ; `None` when they differ with no rule
    /// at all (folding or extraction is at fault).
    pub culprit: Option<String>,
}

impl std::fmt::Display for MismatchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = &self.mismatch;
        let on = match m.data_set {
            true => "test data set",
            false => "random input",
        };
        write!(
            f,
            "output '{}' differs on {on} {}: {}; ",
            m.output, m.trial, m.detail
        )?;
        match &self.culprit {
            Some(rule) => write!(
                f,
                "rule '{rule}' breaks it (found by bisecting the rules: without it the outputs are equal)"
            ),
            None => write!(
                f,
                "no rule is at fault (the outputs differ with every rule off: folding or extraction)"
            ),
        }
    }
}

/// A copy of a phase keeping only the named rules (all when `keep` is `None`).
fn restrict(p: &Phase, keep: Option<&BTreeSet<String>>) -> Phase {
    let mut set: RuleSet = (*p.rules).clone();
    if let Some(keep) = keep {
        set.retain(|r| keep.contains(&r.name));
    }
    let mut q = Phase::new(&p.name, Arc::new(set));
    q.iter_limit = p.iter_limit;
    q.node_limit = p.node_limit;
    q.time_limit = p.time_limit;
    q.match_limit = p.match_limit;
    q.target_opset = p.target_opset;
    q
}

/// The report of two optimizations of one model, the second on the first's result: the input's
/// figures come from the first, the phases of both in order, everything else from the second.
fn merge_runs(first: OptimizeReport, second: OptimizeReport) -> OptimizeReport {
    let mut out = second;
    let mut phases = first.main.phases;
    phases.append(&mut out.main.phases);
    out.main.phases = phases;
    out.main.nodes_before = first.main.nodes_before;
    out.main.estimate_before = first.main.estimate_before;
    out.main.lift_seconds += first.main.lift_seconds;
    out.main.saturate_seconds += first.main.saturate_seconds;
    out.main.extract_seconds += first.main.extract_seconds;
    out.subgraphs += first.subgraphs;
    for (rule, n) in first.subgraph_firings {
        *out.subgraph_firings.entry(rule).or_default() += n;
    }
    let mut refusals = first.subgraph_refusals;
    refusals.append(&mut out.subgraph_refusals);
    out.subgraph_refusals = refusals;
    out
}
