//! FlexAttention (`ai.onnx.preview`, version 1) as a planning step: its `score_mod` and
//! `prob_mod` subgraphs are planned with the built-in kernels at the kernels' `MODIFIER_OPSET`
//! and run by the executor, each time the node runs (so a bad modifier fails the run, not the
//! planning, as for a kernel). The arithmetic is the kernel-layer
//! `kernels::attention::flex`, given this step as its [`ModifierGraphs`].
//!
//! Layer: a node plan, above the executor (`plan`), the registry and the kernels; below the
//! planner (`session`), which passes its graph planner (`GraphPlan::build`) in.

use onnx_proto::GraphProto;

use crate::error::Result;
use crate::kernel::{normalize_domain, run_as_kernel, KernelCtx};
use crate::kernels::{flex_attention, ModifierGraphs, MODIFIER_OPSET};
use crate::plan::{BuildGraph, Frame, GraphPlan, LocalFunctions, NodePlan, Opsets, PlanCtx};
use crate::registry::builtin_registry;
use crate::value::Value;

/// True for `ai.onnx.preview::FlexAttention` at a version this runs (1 on).
pub(crate) fn is_flex_attention(domain: &str, op: &str, opset: i64) -> bool {
    normalize_domain(domain) == "ai.onnx.preview" && op == "FlexAttention" && opset >= 1
}

/// A planned FlexAttention node: the planner its modifier subgraphs are planned with.
#[derive(Debug)]
pub(crate) struct FlexAttentionPlan {
    build: BuildGraph,
}

impl FlexAttentionPlan {
    /// A step that plans modifier subgraphs with `build`.
    pub(crate) fn new(build: BuildGraph) -> Self {
        FlexAttentionPlan { build }
    }
}

impl NodePlan for FlexAttentionPlan {
    /// Runs the node as a kernel runs (errors name the node; the output count is checked). The
    /// modifier subgraphs read no outer value: `frame` is not used.
    fn run(
        &self,
        ctx: &KernelCtx,
        inputs: &[Option<&Value>],
        _frame: &Frame,
    ) -> Result<Vec<Value>> {
        run_as_kernel(ctx, inputs, |ctx, inputs| flex_attention(ctx, inputs, self))
    }
}

impl ModifierGraphs for FlexAttentionPlan {
    type Plan = GraphPlan;

    fn plan_graph(&self, graph: &GraphProto) -> Result<GraphPlan> {
        let opsets: Opsets = [(String::new(), MODIFIER_OPSET)].into_iter().collect();
        let functions = LocalFunctions::new();
        let plan_ctx = PlanCtx {
            registry: builtin_registry(),
            opsets,
            functions: &functions,
            call_stack: Vec::new(),
            depth: 0,
            lazy_weights: false,
            check_declarations: false,
        };
        (self.build)(graph, &plan_ctx, &|_| false)
    }

    fn run_plan(&self, plan: &GraphPlan, inputs: Vec<Option<Value>>) -> Result<Vec<Value>> {
        plan.run(inputs, &[])
    }
}
