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

/// Cost of one op producing `out` elements from inputs of `ins` elements each, in
/// microseconds: a roofline calibrated against onnxruntime on one CPU thread (about 20 GB/s of
/// memory traffic, 200 GFLOP/s of arithmetic, and 1 us of overhead per node;
/// `benches/compare_peers.py` prints the estimate beside the measured latency). `macs` is the
/// multiply-accumulate count of Conv, ConvTranspose, MatMul and Gemm (see [`node_estimate`]);
/// other ops do a few operations per output element.
///
/// Traffic is what the op reads and writes: every input whole for most ops, but only the
/// output's worth of the data for the gathers and slices (a Gather from an embedding table
/// reads the rows it takes), and nothing but the shape for Shape and Size. The view-like ops
/// (Reshape and its family, Identity) cost half an overhead and no arithmetic.
pub fn op_cost(op_type: &str, out: f64, ins: &[f64], macs: Option<f64>) -> f64 {
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
    let traffic = (written + read) * 4.0 / 2e4;
    let flops_per_out = match op_type {
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" | "Shape" | "Size"
        | "Gather" | "GatherElements" | "GatherND" | "Slice" | "Transpose" | "Concat" | "Split"
        | "Expand" => 0.0,
        // Square roots take several multiplies' time, transcendental functions more. Division
        // costs a multiply (memory bound): `x / c` and the `x * (1/c)` it equals tie, and the
        // tie keeps the input's form, which onnxruntime's own Gelu fusion recognizes (a
        // costlier Div turned bert-tiny's `Div(x, sqrt 2)` into a Mul and lost ORT's BiasGelu).
        "Sqrt" | "Reciprocal" => 4.0,
        "Pow" | "Exp" | "Log" | "Erf" | "Tanh" | "Sigmoid" | "Softplus" | "Sin" | "Cos" => 8.0,
        _ => 1.0,
    };
    let flops = match macs {
        Some(m) => 2.0 * m,
        None => out * flops_per_out,
    };
    let overhead = match op_type {
        "Identity" | "Reshape" | "Squeeze" | "Unsqueeze" | "Flatten" => 0.5,
        _ => 1.0,
    };
    overhead + traffic + flops / 2e5
}

/// The dims of a class's tensor type (unknown dims count as 1), when its rank is known.
fn dims(egraph: &OnnxEGraph, class: Id) -> Option<Vec<f64>> {
    match &egraph[class].data.ty.as_ref()?.value {
        Some(type_proto::Value::TensorType(t)) => Some(
            t.shape
                .as_ref()?
                .dim
                .iter()
                .map(|d| match d.value {
                    Some(Dim::DimValue(v)) if v > 0 => v as f64,
                    _ => 1.0,
                })
                .collect(),
        ),
        _ => None,
    }
}

/// The estimate of one operator e-node in `class`, as [`op_cost`] prices it. A node with
/// several outputs (a tuple class, no type) counts its input elements as its output.
pub fn node_estimate(egraph: &OnnxEGraph, class: Id, node: &crate::lang::ONode) -> f64 {
    let crate::lang::NodeKind::Op(op) = node.kind else {
        return 0.0;
    };
    // The inputs, in order (attributes are children too, and carry no data).
    let info = egraph.analysis.ops.get(op);
    let inputs = crate::build::Roles::new(info, &node.children).inputs();
    // An input read twice (`Mul(x, x)`) is moved once.
    let ins: Vec<f64> = inputs
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let c = egraph.find(c);
            if inputs[..i].iter().any(|&d| egraph.find(d) == c) {
                0.0
            } else {
                elements(egraph, c)
            }
        })
        .collect();
    let out = if egraph[class].data.ty.is_some() {
        elements(egraph, class)
    } else {
        ins.iter().sum()
    };
    let op_type = &info.op_type;
    // Multiply-accumulates: per output element, the reduced length (the weights per output
    // channel for Conv, A's last dim for MatMul and onnxruntime's MatMulNBits, K for Gemm); per input element, the weights
    // per input channel for ConvTranspose.
    let macs = match (op_type.as_str(), inputs) {
        ("MatMul", [a, _]) | ("MatMulNBits", [a, ..]) => dims(egraph, *a)
            .and_then(|d| d.last().copied())
            .map(|k| out * k),
        // onnxruntime's FusedMatMul: K is the dim A and B share among their last two (either
        // may be transposed).
        ("FusedMatMul", [a, b]) => match (dims(egraph, *a), dims(egraph, *b)) {
            (Some(da), Some(db)) if da.len() >= 2 && db.len() >= 2 => {
                let (a1, a2) = (da[da.len() - 1], da[da.len() - 2]);
                let b_last = [db[db.len() - 1], db[db.len() - 2]];
                Some(out * if b_last.contains(&a1) { a1 } else { a2 })
            }
            _ => None,
        },
        ("Gemm", [_, _, ..]) => Some(out * (ins[0] * ins[1] / out.max(1.0)).sqrt()),
        ("Conv", [_, w, ..]) => {
            dims(egraph, *w).and_then(|d| d.first().map(|&cout| out * ins[1] / cout.max(1.0)))
        }
        ("ConvTranspose", [_, w, ..]) => {
            dims(egraph, *w).and_then(|d| d.first().map(|&cin| ins[0] * ins[1] / cin.max(1.0)))
        }
        _ => None,
    };
    // A square, `Pow(x, 2)`, is priced a hair under `Mul(x, x)` (the margin covers the exponent
    // constant's own charge): onnxruntime squares with a multiply either way (measured equal),
    // and its LayerNormFusion and SimplifiedLayerNormFusion recognize only the `Pow` form, so
    // the input's `Pow` is kept (bert-tiny at opset 13 lost its five fused LayerNormalizations,
    // 1.12x the input's latency, when `pow_two` turned them into `x * x`).
    if op_type == "Pow" && inputs.len() == 2 && is_scalar_two(egraph, inputs[1]) {
        return 0.99 * op_cost("Mul", out, &ins[..1], None);
    }
    op_cost(op_type, out, &ins, macs)
}

/// The class is a constant with one element, equal to 2.
fn is_scalar_two(egraph: &OnnxEGraph, class: Id) -> bool {
    let Some(k) = egraph[egraph.find(class)].data.constant else {
        return false;
    };
    let entry = egraph.analysis.consts.get(k);
    if entry.bytes > 16 {
        return false;
    }
    onnx_ref::Tensor::from_proto(&entry.tensor)
        .ok()
        .filter(|t| t.len() == 1)
        .and_then(|t| t.to_f64_vec().ok())
        .is_some_and(|v| v[0] == 2.0)
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
