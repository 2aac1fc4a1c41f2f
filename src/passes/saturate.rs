//! The e-graph passes: `saturate` lifts the model into the e-graph, folds, runs the pipeline's
//! phases (with the version phase last under a target opset) and extracts; `saturate-at-target`
//! runs the phases again after a conversion up, where the rules see the target's ops (a fusion
//! into LayerNormalization needs the pattern before other rules rewrote it).
//!
//! Every rewrite these passes make is a rule (text, `RustRule` or raw egg rewrite), so `rules
//! list`, `rules explain` and the prover cover them.

use onnx_egraph::{CostKind, Phase};
use onnx_ir::Model;

use super::{Changes, Pass, PassContext};
use crate::Error;

/// `saturate`: the pipeline's phases. Converting up, the version phase alone (the phases run
/// again at the target in `saturate-at-target`).
pub(crate) struct Saturate;

impl Pass for Saturate {
    fn name(&self) -> &'static str {
        "saturate"
    }

    fn about(&self) -> &'static str {
        "the e-graph: lift, fold, the phases (and the version phase under a target opset), extract"
    }

    fn run(&self, model: &mut Model, cx: &mut PassContext<'_>) -> Result<Changes, Error> {
        let phases = cx.phases;
        let phases: Vec<Phase> = match cx.converting_up() {
            true => phases[phases.len() - 1..].to_vec(),
            false => not_lowering(phases),
        };
        let (out, fired) = cx.saturate(model, &phases)?;
        *model = out;
        Ok(Changes::from([("rule_firings", fired)]))
    }
}

/// `saturate-at-target`: after a conversion up, the pipeline's phases again (for the `convert`
/// pipeline, which has none, the built-in fusions into ops the source opset lacks).
pub(crate) struct SaturateAtTarget;

impl Pass for SaturateAtTarget {
    fn name(&self) -> &'static str {
        "saturate-at-target"
    }

    fn about(&self) -> &'static str {
        "conversion up only: the phases again at the target opset, where the rules see its ops"
    }

    fn is_enabled(&self, cx: &PassContext<'_>) -> bool {
        cx.converting_up()
    }

    fn run(&self, model: &mut Model, cx: &mut PassContext<'_>) -> Result<Changes, Error> {
        let Some((s, t)) = cx.conversion() else {
            return Ok(Changes::new());
        };
        let again = match !cx.host.has_phases() {
            false => not_lowering(&cx.host.pipeline_phases()?),
            true => cx.host.upward_fusion_phase(s, t)?.into_iter().collect(),
        };
        if again.is_empty() {
            return Ok(Changes::new());
        }
        let (out, fired) = cx.saturate(model, &again)?;
        *model = out;
        Ok(Changes::from([("rule_firings", fired)]))
    }
}

/// `lower`: the pipeline's lowering phases (`lowering = "onnxruntime"`), in an e-graph of their
/// own over the model the other phases extracted, extracted under the lowering's cost model:
/// rewrites into a runtime's own ops (`rules/onnxruntime.rules`), which must not compete with
/// the unfused forms the fusion rules keep in the first e-graph.
pub(crate) struct Lower;

impl Pass for Lower {
    fn name(&self) -> &'static str {
        "lower"
    }

    fn about(&self) -> &'static str {
        "the lowering phases (a runtime's own ops) over the extracted model, under their cost model"
    }

    fn is_enabled(&self, cx: &PassContext<'_>) -> bool {
        cx.phases.iter().any(|p| p.lowering.is_some())
    }

    fn run(&self, model: &mut Model, cx: &mut PassContext<'_>) -> Result<Changes, Error> {
        let lowering: Vec<Phase> = cx
            .phases
            .iter()
            .filter(|p| p.lowering.is_some())
            .cloned()
            .collect();
        let Some(cost) = lowering.first().and_then(|p| p.lowering) else {
            return Ok(Changes::new());
        };
        let (out, fired) = cx.saturate_with_cost(model, &lowering, Some(cost))?;
        *model = out;
        let mut changes = Changes::from([("rule_firings", fired)]);
        // A model for onnxruntime is written at an IR version it loads, where that is equal.
        if cost == CostKind::OnnxRuntime {
            if let Some((from, _)) = super::ir_version::clamp_for_onnxruntime(model) {
                changes.insert("ir_version_lowered_from", from as usize);
            }
        }
        Ok(changes)
    }
}

/// The phases that are not lowering phases (those run in `lower`).
pub(super) fn not_lowering(phases: &[Phase]) -> Vec<Phase> {
    phases
        .iter()
        .filter(|p| p.lowering.is_none())
        .cloned()
        .collect()
}
