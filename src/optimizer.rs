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

use onnx_egraph::{CostKind, FoldOptions, Phase, RewriteOptions, RewriteReport, RuleSet};
use onnx_ir::Model;

use crate::info::ModelInfo;
use crate::passes::{run_passes, PassContext, PassHost, PassRuns};
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
    /// Run the checker after every pass.
    validate_passes: bool,
    /// Rules (by name, file or label) and passes (by name) left out.
    skip: Vec<String>,
    /// The graph outputs kept (all when empty).
    outputs: Vec<String>,
    /// Fixed shapes of graph inputs.
    input_shapes: Vec<(String, Vec<i64>)>,
    /// Symbolic dims of the inputs made the same as others (`--same-dim NAME=OTHER`).
    same_dims: Vec<(String, String)>,
    /// What the user assumes about inputs' values (`--assume NAME=ones`).
    assumed: Vec<(String, crate::Assumption)>,
    /// The default-domain opset a model below it is converted to when no target opset is
    /// given ([`Optimizer::target`]: the fused ops a runtime's rewrites start from).
    min_opset: Option<i64>,
}

/// A runtime whose own operators the output may use ([`Optimizer::target`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// onnxruntime (1.31): its `com.microsoft` contrib ops, as its CPU and CUDA execution
    /// providers run them; the built-in `onnxruntime` pipeline.
    OnnxRuntime,
}

impl Target {
    /// The target's name (`onnxruntime`), as `--target` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Target::OnnxRuntime => "onnxruntime",
        }
    }

    /// The default-domain opset the target's rewrites start from: a model below it is
    /// converted up to it unless a target opset is given.
    pub fn min_opset(self) -> i64 {
        match self {
            // Attention and RMSNormalization, what GroupQueryAttention and
            // SkipSimplifiedLayerNormalization are rewritten from, are opset 23's.
            Target::OnnxRuntime => 23,
        }
    }
}

impl std::str::FromStr for Target {
    type Err = Error;

    fn from_str(s: &str) -> Result<Target, Error> {
        match s {
            "onnxruntime" => Ok(Target::OnnxRuntime),
            other => Err(Error::Pipeline {
                origin: "--target".into(),
                message: format!("no target '{other}' (there is: onnxruntime)"),
            }),
        }
    }
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
    /// The realistic dims (a dim named `a + b` at the sum) half the random inputs used, where
    /// they differ from `check_dims` (ARCHITECTURE.md, "The check").
    pub check_realistic_dims: BTreeMap<String, i64>,
    /// The assumptions about input values the model was optimized and checked under
    /// (`attention_mask=ones`, [`Optimizer::assume`]); the output equals the input model on
    /// inputs that satisfy them.
    pub assumed: Vec<String>,
    /// Each pass of the pipeline, in order, with what it changed (`"splice-constant-ifs" ->
    /// {"spliced_ifs": 2}`); in `--report`, a map from pass name to its run.
    pub passes: crate::passes::PassRuns,
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
    pub egraph: RewriteReport,
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
            validate_passes: cfg!(debug_assertions)
                || std::env::var_os("ONNX_OPT_VALIDATE_PASSES").is_some_and(|v| v != "0"),
            dims: BTreeMap::new(),
            tolerance: Tolerance::default(),
            skip: Vec::new(),
            outputs: Vec::new(),
            input_shapes: Vec::new(),
            same_dims: Vec::new(),
            assumed: Vec::new(),
            min_opset: None,
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

    /// Optimizes for a runtime: its built-in pipeline (`onnxruntime`: the default rules, then
    /// the rewrites into onnxruntime's contrib ops, `rules/onnxruntime.rules`), and a model
    /// below the opset those rewrites start from ([`Target::min_opset`], 23) converted up to it
    /// unless [`Self::target_opset`] gives another. A later [`Self::pipeline`] replaces the
    /// pipeline.
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 10, opset_import: ["" : 23]>
    ///        g (float[1, 3, 8] a, float[1, 3, 8] b, float[8] s) => (float[1, 3, 8] y, float[1, 3, 8] t) {
    ///          t = Add(a, b)
    ///          y = RMSNormalization <axis = -1> (t, s)
    ///        }"#,
    /// )?;
    /// let out = onnx_opt::Optimizer::new().target(onnx_opt::Target::OnnxRuntime).optimize(&model)?;
    /// let ops: Vec<_> = out.model.graph.nodes_in_order().map(|(_, n)| n.op_type.to_string()).collect();
    /// assert_eq!(ops, ["SkipSimplifiedLayerNormalization"]);
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn target(mut self, target: Target) -> Self {
        self.pipeline =
            Pipeline::builtin(target.name()).expect("the built-in target pipeline parses");
        self.min_opset = Some(target.min_opset());
        self
    }

    /// Runs this pipeline (its phases, cost model and folding) instead of the default.
    pub fn pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = pipeline;
        self
    }

    /// Leaves out rules, by name (`gemm_add_bias`), by file (`fusion`, `fusion.rules`,
    /// `rules/fusion.rules`, or a `--rules` file's path) or by label (`fusion`), or a pass by
    /// name (`merge-sibling-convs`): onnxslim's `skip_fusion_patterns`, onnxsim's
    /// `--skip-optimization`. Repeatable. A name that matches nothing is an
    /// [`Error::UnknownSkip`] (with the closest names) when the optimizer runs.
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 8, opset_import: ["" : 13]>
    ///        g (float[2, 3] x) => (float[2, 3] y) { t = Identity(x)  y = Relu(t) }"#,
    /// )?;
    /// let kept = onnx_opt::Optimizer::new().skip("identity_elim").optimize(&model)?;
    /// assert_eq!(kept.model.graph.order.len(), 2);
    /// let err = onnx_opt::Optimizer::new().skip("identity_elimm").optimize(&model).unwrap_err();
    /// assert!(matches!(err, onnx_opt::Error::UnknownSkip { .. }));
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn skip(mut self, name: &str) -> Self {
        self.skip.push(name.to_string());
        self
    }

    /// Keeps only these graph outputs, in this order; what only the others needed is removed
    /// (onnxslim's `--outputs`). The check compares the kept outputs. A name that is not an
    /// output of the model, or is named twice, is an [`Error::BadOutput`].
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 8, opset_import: ["" : 13]>
    ///        g (float[2, 3] x) => (float[2, 3] y, float[2, 3] z) { y = Relu(x)  z = Neg(x) }"#,
    /// )?;
    /// let out = onnx_opt::Optimizer::new().outputs(&["z"]).optimize(&model)?;
    /// let ops: Vec<_> = out.model.graph.nodes_in_order().map(|(_, n)| n.op_type.to_string()).collect();
    /// assert_eq!(ops, ["Neg"]);
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn outputs(mut self, names: &[&str]) -> Self {
        self.outputs = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Gives a graph input a fixed shape before optimizing (onnxsim's
    /// `--overwrite-input-shape`): its symbolic dims become these values in every declaration of
    /// the main graph that names them, so shape arithmetic folds. Repeatable. A shape that
    /// contradicts the model (rank, a known dim, a symbol given two sizes) or an unknown input
    /// is an [`Error::BadInputShape`].
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 8, opset_import: ["" : 13]>
    ///        g (float[n, 3] x) => (int64[2] s) { s = Shape(x) }"#,
    /// )?;
    /// let out = onnx_opt::Optimizer::new().input_shape("x", &[4, 3]).optimize(&model)?;
    /// let g = &out.model.graph;
    /// assert!(g.nodes_in_order().all(|(_, n)| n.op_type.as_str() != "Shape"), "folded");
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn input_shape(mut self, name: &str, dims: &[i64]) -> Self {
        self.input_shapes.push((name.to_string(), dims.to_vec()));
        self
    }

    /// `--same-dim NAME=OTHER`: the inputs' symbolic dim `name` is the same size as `other`: every
    /// declaration of the main graph that names `name` (whole, or as a token of an expression
    /// such as `s15 + s70`) names `other` instead. An assumption about the inputs the model
    /// will get, stated in its interface, so the output declares it and the check draws its
    /// inputs under it; for example that the KV cache of every layer has one length, which
    /// torch's dynamo exporter gives a symbol per layer, so each layer computes its own
    /// sequence lengths and mask slice:
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 8, opset_import: ["" : 13]>
    ///        g (float[a] x, float[b] y) => (int64[1] s, int64[1] t) { s = Shape(x) t = Shape(y) }"#,
    /// )?;
    /// let out = onnx_opt::Optimizer::new().same_dim("b", "a").optimize(&model)?;
    /// let g = &out.model.graph;
    /// let shapes = g.nodes_in_order().filter(|(_, n)| n.op_type.as_str() == "Shape").count();
    /// assert_eq!(shapes, 1, "one Shape serves both outputs");
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn same_dim(mut self, name: &str, other: &str) -> Self {
        self.same_dims.push((name.to_string(), other.to_string()));
        self
    }

    /// `--assume NAME=ones`: the graph input `name` holds ones (true for bool) whatever its
    /// shape, as an LLM's `attention_mask` does when no sequence is padded. Every node that read
    /// it reads `ConstantOfShape(Shape(name))` instead, so what is computed from its values
    /// folds; the input stays in the interface, and the check draws its inputs under the
    /// assumption. The output is equal to the input model only on inputs that satisfy it:
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 8, opset_import: ["" : 13]>
    ///        g (float[n] x, bool[n] m) => (float[n] y) { z = Neg(x) y = Where(m, x, z) }"#,
    /// )?;
    /// let out = onnx_opt::Optimizer::new()
    ///     .assume("m", onnx_opt::Assumption::Ones)
    ///     .optimize(&model)?;
    /// let g = &out.model.graph;
    /// assert!(g.nodes_in_order().all(|(_, n)| n.op_type.as_str() != "Where"), "y is x");
    /// assert_eq!(g.inputs.len(), 2, "m stays in the interface");
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn assume(mut self, name: &str, what: crate::Assumption) -> Self {
        self.assumed.push((name.to_string(), what));
        self
    }

    /// The model with only the outputs `outputs` names, in that order (the declarations of the
    /// outputs kept move with them).
    fn keep_outputs(&self, model: &Model) -> Result<Model, Error> {
        let g = &model.graph;
        let names: Vec<String> = g
            .outputs
            .iter()
            .map(|&v| g.value(v).name.to_string())
            .collect();
        let mut picked: Vec<usize> = Vec::new();
        for want in &self.outputs {
            let bad = |why| Error::BadOutput {
                name: want.clone(),
                why,
                outputs: names.clone(),
            };
            let i = names
                .iter()
                .position(|n| n == want)
                .ok_or_else(|| bad("not an output of the model"))?;
            if picked.contains(&i) {
                return Err(bad("named twice"));
            }
            picked.push(i);
        }
        let mut out = model.clone();
        let g = &mut out.graph;
        g.outputs = picked.iter().map(|&i| model.graph.outputs[i]).collect();
        let overrides = std::mem::take(&mut g.info_overrides);
        g.info_overrides = overrides
            .into_iter()
            .filter_map(|((list, i), o)| match list {
                onnx_ir::InfoList::Output => {
                    picked.iter().position(|&p| p == i).map(|j| ((list, j), o))
                }
                _ => Some(((list, i), o)),
            })
            .collect();
        Ok(out)
    }

    /// The `skip` names resolved against every rule and pass this optimizer can run.
    fn skipped(&self) -> Result<crate::rules::Skipped, Error> {
        if self.skip.is_empty() {
            return Ok(crate::rules::Skipped::default());
        }
        let mut files = crate::rules::load_rule_files(&crate::rules::RuleSelection {
            version: true,
            targets: true,
            ..Default::default()
        })?;
        files.extend(self.pipeline.rule_files(&self.extra)?);
        let rust: Vec<String> = self.extra.rust.iter().map(|r| r.name.clone()).collect();
        crate::rules::resolve_skips(&self.skip, &files, &rust, &crate::passes::pass_names())
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

    /// The rules added to this optimizer (text and Rust; not the built-in ones), parsed and
    /// checked against the schemas, as one set (what `onnx_prove::prove_added_rules` proves).
    pub fn added_rules(&self) -> Result<Arc<RuleSet>, Error> {
        let added = Pipeline {
            phases: vec![crate::pipeline::PhaseSpec {
                name: "added".into(),
                rules: Vec::new(),
                labels: Vec::new(),
                lowering: None,
                iterations: 1,
                enodes: 1,
                seconds: 1.0,
            }],
            ..self.pipeline.clone()
        };
        let phases = added.phases(&self.extra)?;
        Ok(phases
            .into_iter()
            .next()
            .map(|p| p.rules)
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

    /// Runs the checker after every pass, and makes a pass that breaks a model the checker
    /// accepted an [`Error::PassBrokeModel`] naming it. On by default in debug builds and when
    /// the environment sets `ONNX_OPT_VALIDATE_PASSES=1` (the tests do).
    pub fn validate_passes(mut self, on: bool) -> Self {
        self.validate_passes = on;
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
        self.drop_skipped_rules(&mut phases)?;
        Ok(phases)
    }

    /// Removes the rules `skip` names from the phases.
    fn drop_skipped_rules(&self, phases: &mut [Phase]) -> Result<(), Error> {
        let skipped = self.skipped()?;
        if skipped.rules.is_empty() {
            return Ok(());
        }
        for p in phases {
            Arc::make_mut(&mut p.rules).retain(|r| !skipped.rules.contains(&r.name));
        }
        Ok(())
    }

    fn options(&self, phases: Vec<Phase>) -> RewriteOptions {
        RewriteOptions {
            fold: self
                .fold
                .clone()
                .unwrap_or_else(|| self.pipeline.fold_options()),
            cost: self.cost.unwrap_or(self.pipeline.cost),
            phases,
            target_opset: self.target_opset,
        }
    }

    /// Optimizes a model (its main graph and every subgraph) by the pipeline's passes, then
    /// checks the result against the original in the reference interpreter unless the check is
    /// off. A difference is an [`Error::Mismatch`] naming the first output that differs and the
    /// rule that broke it. A model that fails the checker is refused before anything runs
    /// ([`Error::Check`], every problem listed).
    pub fn optimize(&self, model: &Model) -> Result<Optimized, Error> {
        self.optimize_model(model, true, &|_| {})
    }

    /// [`Self::optimize`] for a model the caller has just checked (`optimize_file` checks the
    /// file it loads, naming the file): the checker does not run on it again. `progress` is
    /// told when the check starts, and when a difference sends it looking for the culprit.
    pub(crate) fn optimize_checked(
        &self,
        model: &Model,
        progress: &dyn Fn(&str),
    ) -> Result<Optimized, Error> {
        self.optimize_model(model, false, progress)
    }

    fn optimize_model(
        &self,
        model: &Model,
        check_first: bool,
        progress: &dyn Fn(&str),
    ) -> Result<Optimized, Error> {
        if let (Some(min), None) = (self.min_opset, self.target_opset) {
            let below = model
                .opset_imports
                .iter()
                .find(|o| onnx_schema::normalize_domain(&o.domain).is_empty())
                .is_some_and(|o| o.version < min);
            if below {
                let up = self.clone().target_opset(min);
                return up.optimize_model(model, check_first, progress);
            }
        }
        let prepared;
        let model = match self.outputs.is_empty()
            && self.input_shapes.is_empty()
            && self.same_dims.is_empty()
            && self.assumed.is_empty()
        {
            true => model,
            false => {
                let mut m = match self.outputs.is_empty() {
                    true => model.clone(),
                    false => self.keep_outputs(model)?,
                };
                crate::input_shapes::same_dims(&mut m, &self.same_dims)?;
                crate::input_shapes::set_input_shapes(&mut m, &self.input_shapes)?;
                crate::assume::apply(&mut m, &self.assumed)?;
                prepared = m;
                &prepared
            }
        };
        let origin = crate::model_origin(model);
        let valid = match check_first {
            true => onnx_ir::check_model(model),
            false => Ok(()),
        };
        if let Err(errors) = valid {
            return Err(Error::Check {
                path: origin.into(),
                errors,
            });
        }
        let phases = self.phases()?;
        let original = model.to_proto();
        let before = ModelInfo::of(&original);
        let t1 = std::time::Instant::now();
        let (optimized, egraph, passes) = self.run_pipeline(model, &phases, None, &origin)?;
        let optimize_ms = t1.elapsed().as_secs_f64() * 1e3;
        let proto = optimized.to_proto();
        let t2 = std::time::Instant::now();
        let mut checked = Checked::default();
        let mut data = self.check_data.clone();
        for d in &self.check_data_dirs {
            data.extend(crate::run::read_data_sets(&original, d)?);
        }
        if self.check > 0 || !data.is_empty() {
            progress("checking");
            let (m, c) = self.differs(&original, &proto, &data)?;
            checked = c;
            if let (Some(reason), true) = (&checked.skipped, self.require_check) {
                return Err(Error::CheckSkipped {
                    reason: reason.clone(),
                });
            }
            if let Some(m) = m {
                progress("the check found a difference: finding the rule");
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
                check_realistic_dims: checked.realistic_dims,
                assumed: self
                    .assumed
                    .iter()
                    .map(|(n, a)| format!("{n}={a}"))
                    .collect(),
                passes,
                optimize_ms,
                estimate_before: egraph.main.estimate_before,
                estimate_after: egraph.main.estimate_after,
                check_ms,
                egraph,
            },
        })
    }

    /// Runs the pipeline's passes (only the rules in `keep`, when given).
    fn run_pipeline(
        &self,
        model: &Model,
        phases: &[Phase],
        keep: Option<&BTreeSet<String>>,
        origin: &str,
    ) -> Result<(Model, RewriteReport, PassRuns), Error> {
        let mut cx = PassContext {
            host: self,
            phases,
            keep,
            origin,
            source_opset: model.opset_version(""),
            egraph: None,
            runs: PassRuns::default(),
        };
        let skipped = self.skipped()?;
        let passes: Vec<crate::PassSpec> = self
            .pipeline
            .pass_list()
            .into_iter()
            .filter(|p| !skipped.passes.contains(&p.name))
            .collect();
        let out = run_passes(model, &passes, &mut cx, self.validate_passes)?;
        Ok((out, cx.egraph.unwrap_or_default(), cx.runs))
    }

    /// Runs one pass (by its pipeline name) on a model, with this optimizer's settings; returns
    /// the model after it and what it changed. For tests and tools that look at one pass.
    ///
    /// ```
    /// let model = onnx_opt::parse_text(
    ///     r#"<ir_version: 8, opset_import: ["" : 13]>
    ///        g (float[2, 3] x) => (float[2, 3] y) { t = Identity(x)  y = Relu(t) }"#,
    /// )?;
    /// let (out, run) = onnx_opt::Optimizer::new().run_pass("saturate", &model)?;
    /// assert_eq!(out.graph.order.len(), 1);
    /// assert!(run.ran);
    /// # Ok::<(), onnx_opt::Error>(())
    /// ```
    pub fn run_pass(&self, name: &str, model: &Model) -> Result<(Model, crate::PassRun), Error> {
        let origin = crate::model_origin(model);
        let phases = self.phases()?;
        let mut cx = PassContext {
            host: self,
            phases: &phases,
            keep: None,
            origin: &origin,
            source_opset: model.opset_version(""),
            egraph: None,
            runs: PassRuns::default(),
        };
        let spec = crate::PassSpec::named(name);
        let out = run_passes(model, &[spec], &mut cx, self.validate_passes)?;
        let run = cx.runs.0.pop().ok_or_else(|| Error::Pipeline {
            origin,
            message: format!("no pass named '{name}'"),
        })?;
        Ok((out, run))
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
            match self.run_pipeline(model, phases, Some(&keep), origin) {
                Ok((m, _, _)) => matches!(
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

impl PassHost for Optimizer {
    fn target(&self) -> Option<i64> {
        self.target_opset
    }

    fn uses_builtin_rules(&self) -> bool {
        !self.extra.no_builtin
    }

    fn has_phases(&self) -> bool {
        !self.pipeline.phases.is_empty()
    }

    fn pipeline_phases(&self) -> Result<Vec<Phase>, Error> {
        let mut phases = self.pipeline.phases(&self.extra)?;
        self.drop_skipped_rules(&mut phases)?;
        Ok(phases)
    }

    fn upward_fusion_phase(&self, source: i64, target: i64) -> Result<Option<Phase>, Error> {
        let mut phase = crate::rules::upward_fusion_phase(source, target)?;
        self.drop_skipped_rules(phase.as_mut_slice())?;
        Ok(phase)
    }

    fn cost_kind(&self) -> CostKind {
        self.cost.unwrap_or(self.pipeline.cost)
    }

    fn fold_only(&self, model: &Model, origin: &str) -> Result<Model, Error> {
        let options = RewriteOptions {
            target_opset: None,
            ..self.options(Vec::new())
        };
        onnx_egraph::rewrite_model(model, options)
            .map(|(m, _)| m)
            .map_err(|source| Error::Optimize {
                path: origin.into(),
                source,
            })
    }

    fn run_phases(
        &self,
        model: &Model,
        phases: &[Phase],
        keep: Option<&BTreeSet<String>>,
        origin: &str,
        cost: Option<CostKind>,
    ) -> Result<(Model, RewriteReport), Error> {
        let phases = phases.iter().map(|p| restrict(p, keep)).collect();
        let mut options = self.options(phases);
        if let Some(cost) = cost {
            options.cost = cost;
        }
        onnx_egraph::rewrite_model(model, options).map_err(|source| Error::Optimize {
            path: origin.into(),
            source,
        })
    }

    fn convert_unit(&self, target: i64, model: &Model) -> Result<Model, Error> {
        Optimizer::converter(target)
            .check(0)
            .optimize(model)
            .map(|out| out.model)
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
    q.lowering = p.lowering;
    q
}
