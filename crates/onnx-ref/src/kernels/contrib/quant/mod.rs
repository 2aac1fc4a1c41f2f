//! Contrib kernels: the quant family (onnxruntime's `com.microsoft` quantization operators).
//!
//! - `nbits`: MatMulNBits (block-quantized weights of 2, 4 or 8 bits, dequantized block-wise
//!   into f32 panels that the crate's GEMM multiplies).
//! - `gather_block`: GatherBlockQuantized (a Gather that dequantizes the gathered slices).
//! - `int_matmul`: MatMulIntegerToFloat, DynamicQuantizeMatMul and QGemm (exact integer
//!   products).
//! - `qlinear`: the QLinear elementwise, concat and pooling operators.
//! - QuantizeLinear and DequantizeLinear of the contrib domain run the standard kernels of
//!   `kernels/quant.rs` (per-tensor or per-axis; 8-, 16- and 4-bit integers).
//!
//! The helpers here read the float/float16 operands these kernels share as contiguous f32, and
//! the scalar operands and quantized results of `int_matmul` and `qlinear`.

mod gather_block;
mod int_matmul;
mod nbits;
mod qlinear;

use std::borrow::Cow;

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::super::quant;
use super::MS;
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{Array, Tensor};

/// Registers this family's kernels.
pub fn register_all(reg: &mut KernelRegistry) {
    nbits::register_all(reg);
    gather_block::register_all(reg);
    int_matmul::register_all(reg);
    qlinear::register_all(reg);
    reg.register(MS, "QuantizeLinear", 1, LATEST, quant::quantize_linear);
    reg.register(MS, "DequantizeLinear", 1, LATEST, quant::dequantize_linear);
}

/// The elements of an array in row-major order, borrowed when the array is contiguous.
fn contiguous<T: Clone>(a: &Array<T>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().cloned().collect()),
    }
}

/// A float32 or float16 tensor as contiguous f32 (borrowed for contiguous float32).
fn float_data<'a>(ctx: &KernelCtx, t: &'a Tensor, what: &str) -> Result<Cow<'a, [f32]>> {
    match t {
        Tensor::F32(a) => Ok(contiguous(a)),
        Tensor::F16(a) => {
            let src = contiguous(a);
            let mut out = vec![0f32; src.len()];
            src.convert_to_f32_slice(&mut out);
            Ok(Cow::Owned(out))
        }
        other => Err(ctx.err(format!(
            "{what} must be float or float16, found {}",
            other.dtype()
        ))),
    }
}

/// An f32 result as a tensor of `dtype` (float32 or float16), rounded once.
fn float_result(dtype: DType, shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
    match dtype {
        DType::Float => Tensor::from_vec(shape, data),
        DType::Float16 => {
            let mut out = vec![f16::ZERO; data.len()];
            out.convert_from_f32_slice(&data);
            Tensor::from_vec(shape, out)
        }
        other => Err(RefError::op(format!(
            "result type {other} is not float or float16"
        ))),
    }
}

/// A single-valued tensor's value (scalar or one element).
fn scalar_value(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<f64> {
    let v = t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(ctx.err(format!(
            "{what} must be a scalar, found shape {:?}",
            t.shape()
        ))),
    }
}

/// Quantized values (already integral and in range) as a tensor of `dtype`.
fn q_tensor(shape: &[usize], values: Vec<f32>, dtype: DType) -> Result<Tensor> {
    match dtype {
        DType::Uint8 => Tensor::from_vec(shape, values.into_iter().map(|v| v as u8).collect()),
        _ => Tensor::from_vec(shape, values.into_iter().map(|v| v as i8).collect()),
    }
}
