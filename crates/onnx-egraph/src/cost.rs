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

/// Cost of one op producing `out` elements from `ins` input elements (microseconds, roughly:
/// 1 GB/s of traffic and 1 GFLOP/s, plus a fixed launch overhead per node).
pub fn op_cost(op_type: &str, out: f64, ins: f64) -> f64 {
    let traffic = (out + ins) * 4.0 / 1e3;
    let flops_per_out = match op_type {
        "Conv" | "ConvTranspose" | "MatMul" | "Gemm" => (ins / out.max(1.0)).max(1.0) * 2.0,
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" => 0.0,
        _ => 1.0,
    };
    let overhead = match op_type {
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" => 0.5,
        _ => 1.0,
    };
    overhead + traffic + out * flops_per_out / 1e3
}
