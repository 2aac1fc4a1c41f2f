//! Per-operator shape rules (and the element types the generic rules cannot give), grouped by
//! family. Each family module exposes `rule(op) -> Option<Rule>`; [`infer_outputs`] asks them
//! in turn; onnxruntime's own schemas (`SchemaOrigin::OnnxRuntime`) ask `contrib`. Ops without
//! a rule get only the generic element types.

mod contrib;
mod control;
mod elementwise;
mod index_ops;
mod linalg;
mod misc;
pub(crate) mod nn;
mod reduce;
mod shape_ops;

use super::context::{NodeCtx, Out};
use super::error::InferError;

/// A per-op rule: what it says about each output (fewer entries than outputs is fine).
pub(crate) type Rule = fn(&NodeCtx<'_>) -> Result<Vec<Out>, InferError>;

fn rule_for(domain: &str, op: &str) -> Option<Rule> {
    match domain {
        "" => elementwise::rule(op)
            .or_else(|| shape_ops::rule(op))
            .or_else(|| index_ops::rule(op))
            .or_else(|| linalg::rule(op))
            .or_else(|| nn::rule(op))
            .or_else(|| reduce::rule(op))
            .or_else(|| control::rule(op))
            .or_else(|| misc::rule(op)),
        "ai.onnx.ml" => misc::ml_rule(op),
        "ai.onnx.preview" => misc::preview_rule(op),
        "ai.onnx.preview.training" => misc::training_rule(op),
        _ => None,
    }
}

/// Runs the rule of the node's op, if there is one.
pub(crate) fn infer_outputs(ctx: &NodeCtx<'_>) -> Result<Vec<Out>, InferError> {
    let (domain, op) = (ctx.schema.domain.as_str(), ctx.schema.name.as_str());
    let rule = if ctx.schema.is_onnxruntime() {
        contrib::rule(domain, op)
    } else {
        rule_for(domain, op)
    };
    match rule {
        Some(rule) => rule(ctx),
        None => Ok(Vec::new()),
    }
}
