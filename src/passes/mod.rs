//! Passes: everything that changes a model, each with a name, run in the order a pipeline file
//! declares (`[[pass]]`), as rustc's MIR pass manager runs a suite.
//!
//! A pass implements [`Pass`]: a name (what pipeline files write and what the report keys its
//! effect by), when it is enabled (a conversion-only pass is off without a target opset), and
//! `run` on the IR. [`run_passes`] is the driver: it runs the list, records each pass's effect
//! in one list of the report ([`PassRun`]), and with validation on (debug builds, tests, and
//! `ONNX_OPT_VALIDATE_PASSES=1`) runs the checker after every pass and names the pass that
//! broke a model the checker accepted.
//!
//! The passes, in the order the built-in pipelines run them:
//!
//! | name | module | what |
//! |---|---|---|
//! | `expand-bodies` | [`expand`] | conversion: ops the target lacks written as their schema's body |
//! | `convert-functions` | [`functions`], [`inline`] | conversion: local functions converted in place, else inlined |
//! | `optimize-functions` | [`functions`], [`inline`] | local functions inlined where no larger, other bodies optimized in place |
//! | `saturate` | [`saturate`] | the e-graph: lift, fold, the pipeline's phases (and the version phase), extract |
//! | `splice-constant-ifs` | [`if_const`] | an If with a constant condition becomes its branch; saturate again |
//! | `saturate-at-target` | [`saturate`] | conversion up: the phases again at the target opset |
//! | `merge-sibling-matmuls` | [`sibling_matmul`] | MatMuls over one input become one MatMul and a Split |
//! | `merge-sibling-matmul-pairs` | [`sibling_matmul`] | the same for pairs too (onnxruntime's pipeline) |
//! | `merge-sibling-convs` | [`sibling_conv`] | Convs over one input become one Conv and a Split (node-count cost only) |
//! | `lower` | [`saturate`] | the lowering phases (a runtime's own ops) over the extracted model, under their cost |
//! | `merge-sibling-matmul-nbits` | [`sibling_nbits`] | onnxruntime's MatMulNBits over one input become one and a Split |
//!
//! Only `saturate`, `saturate-at-target` and `lower` rewrite with rules (which the prover covers); the
//! others exist for what extraction cannot choose, and their headers say why.
//!
//! Layer: above the IR, the e-graph and the rule loading (`crate::rules`); below the optimizer's
//! builder (`crate::optimizer`), which implements [`PassHost`] and lends it to the passes
//! through a [`PassContext`]: no pass imports the optimizer.
//!
//! Every pass works on the IR; no model goes to its protobuf and back between or inside passes.
//! The e-graph's lift reads the arenas, not only what export writes, so a pass that edited a
//! model leaves it in the layout a fresh import of its protobuf gives: the inliner renumbers each
//! graph it changed ([`renumber`], by handle), the other passes bring the model to normal form
//! ([`normal_form`], by name). What is still read through a protobuf: type inference
//! (`onnx_schema::infer` takes a `GraphProto`, so `expand-bodies`, `convert-functions` and
//! `merge-sibling-convs` export a graph to infer its types), and `convert-functions` hands each
//! function body to the converter as a small model of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use onnx_egraph::{CostKind, Phase, RewriteReport};
use onnx_ir::Model;

use crate::Error;

pub(crate) mod expand;
pub(crate) mod functions;
pub(crate) mod if_const;
pub(crate) mod inline;
pub(crate) mod ir_version;
pub(crate) mod names;
pub(crate) mod normal_form;
mod renumber;
pub(crate) mod saturate;
pub(crate) mod sibling_conv;
pub(crate) mod sibling_matmul;
pub(crate) mod sibling_nbits;

/// What a pass changed, by kind (`"spliced_ifs" -> 2`); empty when it changed nothing.
pub(crate) type Changes = BTreeMap<&'static str, usize>;

/// One pass: a named step over the IR.
pub(crate) trait Pass: Sync {
    /// The name pipeline files write and the report keys the pass's effect by.
    fn name(&self) -> &'static str;
    /// One line saying what it does (`onnx-opt pipelines` prints it).
    fn about(&self) -> &'static str;
    /// Whether the pass runs in this context (the default: always).
    fn is_enabled(&self, _cx: &PassContext<'_>) -> bool {
        true
    }
    /// Runs the pass on the model.
    fn run(&self, model: &mut Model, cx: &mut PassContext<'_>) -> Result<Changes, Error>;
}

/// Every pass, in the order the built-in pipelines run them.
pub(crate) const PASSES: &[&dyn Pass] = &[
    &expand::ExpandBodies,
    &functions::ConvertFunctions,
    &functions::OptimizeFunctions,
    &saturate::Saturate,
    &if_const::SpliceConstantIfs,
    &saturate::SaturateAtTarget,
    &sibling_matmul::MergeSiblingMatMuls,
    &sibling_matmul::MergeSiblingMatMulPairs,
    &sibling_conv::MergeSiblingConvs,
    &saturate::Lower,
    &sibling_nbits::MergeSiblingMatMulNBits,
];

/// The pass of a name.
pub(crate) fn pass_named(name: &str) -> Option<&'static dyn Pass> {
    PASSES.iter().copied().find(|p| p.name() == name)
}

/// The names of every pass, for error messages and `onnx-opt pipelines`.
pub fn pass_names() -> Vec<&'static str> {
    PASSES.iter().map(|p| p.name()).collect()
}

/// Every pass with one line saying what it does, in the order the built-in pipelines run them.
pub fn pass_table() -> Vec<(&'static str, &'static str)> {
    PASSES.iter().map(|p| (p.name(), p.about())).collect()
}

/// One entry of a pipeline's pass list.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PassSpec {
    /// The pass (`onnx-opt pipelines` lists them).
    pub name: String,
    /// Run only when this earlier pass changed the model (a conversion splices constant Ifs
    /// only where it wrote function bodies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_changed: Option<String>,
}

impl PassSpec {
    /// An unconditional entry.
    pub fn named(name: &str) -> PassSpec {
        PassSpec {
            name: name.to_string(),
            if_changed: None,
        }
    }
}

/// What one pass did: its runs, what it changed by kind, and its time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PassRun {
    /// The pass.
    #[serde(skip)]
    pub name: String,
    /// Whether it was enabled (a conversion-only pass is not without a target opset).
    pub ran: bool,
    /// What it changed, by kind; empty when nothing.
    pub changes: BTreeMap<String, usize>,
    /// Milliseconds it took.
    pub ms: f64,
}

impl PassRun {
    /// The count of one kind of change (0 when none).
    pub fn count(&self, what: &str) -> usize {
        self.changes.get(what).copied().unwrap_or(0)
    }
}

/// The passes' runs in pipeline order, serialized as a map from pass name to its run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassRuns(pub Vec<PassRun>);

impl PassRuns {
    /// The run of a pass, if the pipeline has it.
    pub fn get(&self, name: &str) -> Option<&PassRun> {
        self.0.iter().find(|r| r.name == name)
    }

    /// The count of one kind of change of one pass (0 when the pass did not run or changed
    /// nothing of that kind).
    pub fn count(&self, pass: &str, what: &str) -> usize {
        self.get(pass).map_or(0, |r| r.count(what))
    }

    /// The runs in order.
    pub fn iter(&self) -> impl Iterator<Item = &PassRun> {
        self.0.iter()
    }
}

impl serde::Serialize for PassRuns {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for r in &self.0 {
            map.serialize_entry(&r.name, r)?;
        }
        map.end()
    }
}

/// What the passes need from the optimizer that runs them: its settings and its e-graph runs.
pub(crate) trait PassHost {
    /// The default-domain opset a conversion targets.
    fn target(&self) -> Option<i64>;
    /// Whether the built-in rules run (the version phase is one of them).
    fn uses_builtin_rules(&self) -> bool;
    /// Whether the pipeline has saturation phases of its own.
    fn has_phases(&self) -> bool;
    /// The pipeline's own phases (without the version phase), rules parsed and checked.
    fn pipeline_phases(&self) -> Result<Vec<Phase>, Error>;
    /// The built-in fusions a conversion up from `source` to `target` runs
    /// (`crate::rules::upward_fusion_phase`), without the rules the optimizer skips.
    fn upward_fusion_phase(&self, source: i64, target: i64) -> Result<Option<Phase>, Error>;
    /// The extraction cost model in effect.
    fn cost_kind(&self) -> CostKind;
    /// Folds a model at its own opset: lift, fold, extract, no rule.
    fn fold_only(&self, model: &Model, origin: &str) -> Result<Model, Error>;
    /// Saturation phases on a model (only the rules in `keep`, when given), extracted under
    /// `cost` (the optimizer's when `None`).
    fn run_phases(
        &self,
        model: &Model,
        phases: &[Phase],
        keep: Option<&BTreeSet<String>>,
        origin: &str,
        cost: Option<CostKind>,
    ) -> Result<(Model, RewriteReport), Error>;
    /// A model converted to default-domain opset `target` by the `convert` pipeline, unchecked
    /// (a model-local function's body, converted in place).
    fn convert_unit(&self, target: i64, model: &Model) -> Result<Model, Error>;
}

/// What passes share: the optimizer's settings, the phases, the rules bisection keeps, and what
/// the passes before did.
pub(crate) struct PassContext<'a> {
    /// The settings (target opset, cost, folding, rules) and the e-graph runs.
    pub host: &'a dyn PassHost,
    /// The saturation phases of the pipeline, with the version phase last under a target.
    pub phases: &'a [Phase],
    /// Bisection: only these rules run (all when `None`).
    pub keep: Option<&'a BTreeSet<String>>,
    /// Names the model in errors.
    pub origin: &'a str,
    /// The input's default-domain opset.
    pub source_opset: Option<i64>,
    /// The e-graph's report, merged over every saturation.
    pub egraph: Option<RewriteReport>,
    /// The passes run so far.
    pub runs: PassRuns,
}

impl PassContext<'_> {
    /// The conversion's target, when it differs from the source opset.
    pub fn conversion(&self) -> Option<(i64, i64)> {
        match (self.source_opset, self.host.target()) {
            (Some(s), Some(t)) if s != t => Some((s, t)),
            _ => None,
        }
    }

    /// Converting to a later opset with the built-in rules: the version phase runs alone first
    /// and the pipeline's phases again at the target (`saturate-at-target`).
    pub fn converting_up(&self) -> bool {
        matches!(self.conversion(), Some((s, t)) if t > s) && self.host.uses_builtin_rules()
    }

    /// Whether a pass that ran before changed the model.
    pub fn changed(&self, pass: &str) -> bool {
        self.runs
            .get(pass)
            .is_some_and(|r| r.changes.values().any(|&n| n > 0))
    }

    /// Runs saturation phases on a model and merges their report into the context's; returns
    /// the model and how many times rules fired (main graph and subgraphs).
    pub fn saturate(&mut self, model: &Model, phases: &[Phase]) -> Result<(Model, usize), Error> {
        self.saturate_with_cost(model, phases, None)
    }

    /// [`Self::saturate`], extracted under `cost` (the optimizer's when `None`).
    pub fn saturate_with_cost(
        &mut self,
        model: &Model,
        phases: &[Phase],
        cost: Option<CostKind>,
    ) -> Result<(Model, usize), Error> {
        let (out, report) = self
            .host
            .run_phases(model, phases, self.keep, self.origin, cost)?;
        let fired = report
            .main
            .phases
            .iter()
            .flat_map(|p| p.firings.values())
            .chain(report.subgraph_firings.values())
            .sum();
        self.egraph = Some(match self.egraph.take() {
            None => report,
            Some(first) => merge_runs(first, report),
        });
        Ok((out, fired))
    }
}

/// Runs a pipeline's passes over a model. With `validate`, the checker runs after every pass
/// and a pass that makes a model the checker accepted fail it is an error naming the pass.
pub(crate) fn run_passes(
    model: &Model,
    specs: &[PassSpec],
    cx: &mut PassContext<'_>,
    validate: bool,
) -> Result<Model, Error> {
    let mut model = model.clone();
    let mut valid = validate && onnx_ir::check_model(&model).is_ok();
    for spec in specs {
        let pass = pass_named(&spec.name).ok_or_else(|| Error::Pipeline {
            origin: cx.origin.to_string(),
            message: format!("no pass named '{}'", spec.name),
        })?;
        let enabled =
            pass.is_enabled(cx) && spec.if_changed.as_deref().is_none_or(|p| cx.changed(p));
        let t = Instant::now();
        let changes = match enabled {
            true => pass.run(&mut model, cx)?,
            false => Changes::new(),
        };
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match cx.runs.0.iter_mut().find(|r| r.name == spec.name) {
            Some(run) => {
                run.ran |= enabled;
                run.ms += ms;
                for (k, n) in changes {
                    *run.changes.entry(k.to_string()).or_default() += n;
                }
            }
            None => cx.runs.0.push(PassRun {
                name: spec.name.clone(),
                ran: enabled,
                changes: changes
                    .into_iter()
                    .map(|(k, n)| (k.to_string(), n))
                    .collect(),
                ms,
            }),
        }
        if valid && enabled {
            if let Err(errors) = onnx_ir::check_model(&model) {
                return Err(Error::PassBrokeModel {
                    pass: spec.name.clone(),
                    errors: errors.iter().map(ToString::to_string).collect(),
                });
            }
            valid = true;
        }
    }
    Ok(model)
}

/// The line the summary table gives a pass's effect, if it changed something.
pub(crate) fn describe(run: &PassRun) -> Option<String> {
    let n = |k: &str| run.count(k);
    let line = match run.name.as_str() {
        "convert-functions" if n("inlined_calls") > 0 => format!(
            "local functions: {} call(s) inlined to change the opset; {} function(s) removed (no call left)",
            n("inlined_calls"),
            n("inlined_functions")
        ),
        "convert-functions" if n("functions_converted") > 0 => format!(
            "local functions: {} converted in place to the target opset",
            n("functions_converted")
        ),
        "expand-bodies" if n("expanded_bodies") > 0 => format!(
            "function bodies: {} node(s) of ops the target lacks written as their schema's body",
            n("expanded_bodies")
        ),
        "splice-constant-ifs" if n("spliced_ifs") > 0 => format!(
            "if: {} If node(s) with a constant condition replaced by the branch taken",
            n("spliced_ifs")
        ),
        "merge-sibling-matmuls" | "merge-sibling-matmul-pairs" if n("merged_matmuls") > 0 => format!(
            "matmuls: {} MatMul node(s) merged into a sibling that reads the same input",
            n("merged_matmuls")
        ),
        "lower" if n("ir_version_lowered_from") > 0 => format!(
            "ir version: {} -> {} (the highest onnxruntime loads; nothing in the model needs more)",
            n("ir_version_lowered_from"),
            ir_version::ONNXRUNTIME_MAX_IR
        ),
        "merge-sibling-matmul-nbits" if n("merged_matmul_nbits") > 0 => format!(
            "matmul-nbits: {} MatMulNBits node(s) merged into a sibling that reads the same input",
            n("merged_matmul_nbits")
        ),
        "merge-sibling-convs" if n("merged_convs") > 0 => format!(
            "convs: {} Conv node(s) merged into a sibling that reads the same input",
            n("merged_convs")
        ),
        _ => return None,
    };
    Some(line)
}

/// The report of two optimizations of one model, the second on the first's result: the input's
/// figures come from the first, the phases of both in order, everything else from the second.
fn merge_runs(first: RewriteReport, second: RewriteReport) -> RewriteReport {
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
