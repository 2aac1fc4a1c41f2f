//! Per-op latency estimates for the [`crate::extract::Latency`] cost model: a simple roofline
//! of elements moved and arithmetic done, with fused ops cheaper than their parts.

use egg::Id;
use onnx_proto::{tensor_shape_proto::dimension::Value as Dim, type_proto};

use crate::analysis::OnnxEGraph;

/// Number of elements of a class's value from its known shape (unknown dims count as 1).
pub fn elements(egraph: &OnnxEGraph, class: Id) -> f64 {
    let Some(ty) = &egraph[class].data.ty else {
        return 1.0;
    };
    match &ty.value {
        Some(type_proto::Value::TensorType(t)) => t.shape.as_ref().map_or(1.0, |s| {
            s.dim
                .iter()
                .map(|d| match d.value {
                    Some(Dim::DimValue(v)) if v > 0 => v as f64,
                    _ => 1.0,
                })
                .product()
        }),
        _ => 1.0,
    }
}

/// Cost of one op producing `out` elements from inputs of `ins` elements each (microseconds,
/// roughly: 1 GB/s of traffic and 1 GFLOP/s, plus a fixed launch overhead per node).
///
/// Traffic is what the op reads and writes: every input whole for most ops, but only the
/// output's worth of the data for the gathers and slices (a Gather from an embedding table
/// reads the rows it takes), and nothing but the shape for Shape and Size. The view-like ops
/// (Reshape and its family, Identity) cost half an overhead and no arithmetic.
pub fn op_cost(op_type: &str, out: f64, ins: &[f64]) -> f64 {
    let total: f64 = ins.iter().sum();
    let read = match op_type {
        "Shape" | "Size" => 0.0,
        "Gather" | "GatherElements" | "GatherND" => out + ins.iter().skip(1).sum::<f64>(),
        "Slice" => out + ins.iter().skip(1).sum::<f64>(),
        _ => total,
    };
    let written = match op_type {
        "Shape" | "Size" => 0.0,
        _ => out,
    };
    let traffic = (written + read) * 4.0 / 1e3;
    let flops_per_out = match op_type {
        "Conv" | "ConvTranspose" | "MatMul" | "Gemm" => (total / out.max(1.0)).max(1.0) * 2.0,
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" | "Shape" | "Size"
        | "Gather" | "GatherElements" | "GatherND" | "Slice" | "Transpose" | "Concat" | "Split"
        | "Expand" => 0.0,
        // Division and square roots take several multiplies' time; transcendental functions
        // more (so `x / c` is never preferred to the `x * (1/c)` it equals).
        "Div" | "Sqrt" | "Reciprocal" => 4.0,
        "Pow" | "Exp" | "Log" | "Erf" | "Tanh" | "Sigmoid" | "Softplus" | "Sin" | "Cos" => 8.0,
        _ => 1.0,
    };
    let overhead = match op_type {
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" => 0.5,
        _ => 1.0,
    };
    overhead + traffic + out * flops_per_out / 1e3
}

/// The estimate of one operator e-node in `class`, as [`op_cost`] prices it. A node with
/// several outputs (a tuple class, no type) counts its input elements as its output.
pub fn node_estimate(egraph: &OnnxEGraph, class: Id, node: &crate::lang::ONode) -> f64 {
    let crate::lang::NodeKind::Op(op) = node.kind else {
        return 0.0;
    };
    // The inputs, in order; attribute leaves are children too, and carry no data.
    let ins: Vec<f64> = node
        .children
        .iter()
        .filter(|&&c| {
            !egraph[c]
                .nodes
                .iter()
                .any(|n| matches!(n.kind, crate::lang::NodeKind::Attr(_)))
        })
        .map(|&c| elements(egraph, c))
        .collect();
    let out = if egraph[class].data.ty.is_some() {
        elements(egraph, class)
    } else {
        ins.iter().sum()
    };
    op_cost(&egraph.analysis.ops.get(op).op_type, out, &ins)
}

/// The cost model's latency estimate of running `nodes` (operator e-nodes with their classes):
/// the sum of [`node_estimate`], in the cost model's microseconds. Constants are not counted,
/// so the estimate of a graph before and after optimization compare the work of their ops.
pub fn estimate<'a>(
    egraph: &OnnxEGraph,
    nodes: impl IntoIterator<Item = (Id, &'a crate::lang::ONode)>,
) -> f64 {
    nodes
        .into_iter()
        .map(|(class, node)| node_estimate(egraph, class, node))
        .sum()
}
