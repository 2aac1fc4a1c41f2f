//! Evaluating one node outside any graph ([`eval_node`], the entry point constant folding
//! uses): the node's kernel when the built-in registry has one, else the planner's step for it
//! (control flow whose subgraphs read no outer value, FlexAttention, a function body). Layer:
//! the top, above the planner (`session`).

use onnx_proto::NodeProto;

use crate::error::Result;
use crate::flex_attention::{is_flex_attention, FlexAttentionPlan};
use crate::kernel::{normalize_domain, run_kernel, KernelCtx, KernelRegistry};
use crate::plan::{Frame, GraphPlan, LocalFunctions, NodePlan, Opsets, PlanCtx};
use crate::registry::builtin_registry;
use crate::session::plan_node;
use crate::value::Value;

/// Runs one node with the built-in kernels, as constant folding does. `opset_version` is the
/// model's opset import for the node's domain; `inputs` follow `node.input` (`None` for an
/// absent optional input). Returns one value per output the node computed.
///
/// A node without a kernel still runs when it is FlexAttention, control flow (If, Loop, Scan,
/// SequenceMap) whose subgraphs read no outer-scope value, or an op with a context-independent
/// function body in its schema; a subgraph that reads an outer value is an error naming the
/// values.
pub fn eval_node(
    node: &NodeProto,
    opset_version: i64,
    inputs: &[Option<Value>],
) -> Result<Vec<Value>> {
    let refs: Vec<Option<&Value>> = inputs.iter().map(Option::as_ref).collect();
    let ctx = KernelCtx {
        node,
        index: None,
        opset: opset_version,
    };
    let registry = builtin_registry();
    let domain = node.domain.as_deref().unwrap_or("");
    match registry.lookup(domain, ctx.op(), opset_version) {
        Some(kernel) => run_kernel(kernel, &ctx, &refs),
        // Runs as a kernel would (its modifier subgraphs read no outer value).
        None if is_flex_attention(domain, ctx.op(), opset_version) => {
            FlexAttentionPlan::new(GraphPlan::build).run(&ctx, &refs, &Frame::empty())
        }
        None => eval_planned_node(node, opset_version, &refs, registry),
    }
}

/// Evaluates one node outside any graph, as `eval_node` does for a node without a kernel:
/// control flow whose subgraphs read no outer value, or a function-expanded op.
fn eval_planned_node(
    node: &NodeProto,
    opset_version: i64,
    inputs: &[Option<&Value>],
    registry: &KernelRegistry,
) -> Result<Vec<Value>> {
    let domain = normalize_domain(node.domain.as_deref().unwrap_or("")).to_string();
    let ctx = KernelCtx {
        node,
        index: None,
        opset: opset_version,
    };
    let outer = crate::control::subgraph_reads(node);
    if !outer.is_empty() {
        return Err(ctx.err(format!(
            "a subgraph reads outer-scope values {outer:?}; evaluate it inside a Session"
        )));
    }
    let functions = LocalFunctions::new();
    let plan_ctx = PlanCtx {
        registry,
        opsets: Opsets::from([(domain, opset_version)]),
        functions: &functions,
        call_stack: Vec::new(),
        depth: 0,
        lazy_weights: false,
        check_declarations: false,
    };
    let (_, kind) = plan_node(node, None, &plan_ctx, &|_| false, &|_| None)?;
    kind.run(&ctx, inputs, &Frame::empty())
}
