//! Signal windows: HannWindow, HammingWindow, BlackmanWindow (periodic or symmetric).

use super::one;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::Tensor;
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "HannWindow", 17, LATEST, hann);
    reg.register("", "HammingWindow", 17, LATEST, hamming);
    reg.register("", "BlackmanWindow", 17, LATEST, blackman);
}

/// A window of `size` samples from `f(n, denominator)`, in the requested output type.
fn window(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    f: impl Fn(f64, f64) -> f64,
) -> Result<Vec<Value>> {
    // `size` is a scalar (the function bodies feed it to Range, which takes scalars only).
    let t = ctx.input(inputs, 0)?;
    if t.rank() != 0 {
        return Err(ctx.err(format!(
            "size must be a scalar, not of shape {:?}",
            t.shape()
        )));
    }
    let size = t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let n = *size
        .first()
        .ok_or_else(|| ctx.err("size must have one value"))?;
    if n < 0 {
        return Err(ctx.err(format!("size {n} must be non-negative")));
    }
    // A size read from data: refuse one past the allocation limit instead of aborting.
    crate::tensor::check_size("window", &[n as usize]).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let periodic = match ctx.attr_int("periodic", 1)? {
        0 => false,
        1 => true,
        p => return Err(ctx.err(format!("periodic must be 0 or 1, not {p}"))),
    };
    let code = ctx.attr_int("output_datatype", DType::Float.code() as i64)?;
    let dtype = DType::from_code(code as i32)
        .ok_or_else(|| ctx.err(format!("unknown output_datatype {code}")))?;
    // A symmetric window of one sample divides 0 by 0: NaN, as onnx's reference, its function
    // body and onnxruntime compute it.
    let denom = if periodic { n as f64 } else { (n - 1) as f64 };
    let v: Vec<f64> = (0..n).map(|i| f(i as f64, denom)).collect();
    one(super::cast_tensor(
        &Tensor::from_vec(&[n as usize], v)?,
        dtype,
    )?)
}

fn hann(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    use std::f64::consts::PI;
    window(ctx, inputs, |i, d| 0.5 - 0.5 * (2.0 * PI * i / d).cos())
}

fn hamming(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    use std::f64::consts::PI;
    let a0 = 25.0 / 46.0;
    window(ctx, inputs, |i, d| {
        a0 - (1.0 - a0) * (2.0 * PI * i / d).cos()
    })
}

fn blackman(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    use std::f64::consts::PI;
    window(ctx, inputs, |i, d| {
        0.42 - 0.5 * (2.0 * PI * i / d).cos() + 0.08 * (4.0 * PI * i / d).cos()
    })
}
