//! The Gelu family of com.microsoft and BiasAdd.
//!
//! - Gelu: `0.5·x·(1 + erf(x/√2))`; BiasGelu: Gelu of `A + B` (B broadcast over A, in practice
//!   one value per element of A's last axis).
//! - FastGelu: the tanh approximation `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` of `X (+ bias)`.
//! - QuickGelu: `x·sigmoid(alpha·x)`, alpha 1.702 by default.
//! - BiasAdd: `X + bias + skip` for X and skip of shape (N, S, C) and bias of shape (C).
//!   onnxruntime's CPU provider has no BiasAdd kernel (only its GPU providers do): this one
//!   follows the operator's documentation and is unit-tested below.

use std::f64::consts::{PI, SQRT_2};

use super::{floats, floats_broadcast, same_type, tensor_of, MS};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::erf;
use crate::value::Value;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register(MS, "Gelu", 1, LATEST, gelu);
    reg.register(MS, "BiasGelu", 1, LATEST, bias_gelu);
    reg.register(MS, "FastGelu", 1, LATEST, fast_gelu);
    reg.register(MS, "QuickGelu", 1, LATEST, quick_gelu);
    reg.register(MS, "BiasAdd", 1, LATEST, bias_add);
}

fn gelu_erf(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / SQRT_2))
}

fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// `f` applied to input 0 plus (when `bias_input` names a present input) that input broadcast
/// to input 0's shape; the result has input 0's type.
fn map_with_bias(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    bias_input: Option<usize>,
    f: impl Fn(f64) -> f64,
) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let mut v = floats(ctx, x, "input")?;
    if let Some(i) = bias_input {
        if let Some(b) = ctx.opt_input(inputs, i)? {
            same_type(ctx, b, x.dtype(), "bias")?;
            let bv = floats_broadcast(ctx, b, x.shape(), "bias")?;
            for (a, b) in v.iter_mut().zip(bv) {
                *a += b;
            }
        }
    }
    let y = v.into_iter().map(f).collect();
    Ok(vec![tensor_of(x.shape(), y, x.dtype())?])
}

fn gelu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    map_with_bias(ctx, inputs, None, gelu_erf)
}

fn bias_gelu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    ctx.input(inputs, 1)?;
    map_with_bias(ctx, inputs, Some(1), gelu_erf)
}

fn fast_gelu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    map_with_bias(ctx, inputs, Some(1), gelu_tanh)
}

fn quick_gelu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let alpha = ctx.attr_float("alpha", 1.702)? as f64;
    map_with_bias(ctx, inputs, None, |x| x / (1.0 + (-alpha * x).exp()))
}

fn bias_add(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let bias = ctx.input(inputs, 1)?;
    let skip = ctx.input(inputs, 2)?;
    let shape = x.shape();
    if shape.len() != 3 {
        return Err(ctx.err(format!("X must have rank 3 (N, S, C), found {shape:?}")));
    }
    if bias.shape() != [shape[2]] {
        return Err(ctx.err(format!(
            "bias must have shape [{}], found {:?}",
            shape[2],
            bias.shape()
        )));
    }
    if skip.shape() != shape {
        return Err(ctx.err(format!(
            "skip must have X's shape {shape:?}, found {:?}",
            skip.shape()
        )));
    }
    same_type(ctx, bias, x.dtype(), "bias")?;
    same_type(ctx, skip, x.dtype(), "skip")?;
    let xv = floats(ctx, x, "X")?;
    let bv = floats(ctx, bias, "bias")?;
    let sv = floats(ctx, skip, "skip")?;
    let c = shape[2];
    let y = xv
        .iter()
        .zip(&sv)
        .enumerate()
        .map(|(k, (x, s))| x + bv[k % c] + s)
        .collect();
    Ok(vec![tensor_of(shape, y, x.dtype())?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::eval_node;
    use crate::tensor::Tensor;
    use half::f16;
    use onnx_proto::NodeProto;

    fn node(op: &str, n_inputs: usize) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            domain: Some(MS.into()),
            input: (0..n_inputs).map(|i| format!("i{i}")).collect(),
            output: vec!["y".into()],
            ..Default::default()
        }
    }

    fn run(op: &str, inputs: Vec<Tensor>) -> Result<Tensor> {
        let n = inputs.len();
        let values: Vec<Option<Value>> =
            inputs.into_iter().map(|t| Some(Value::Tensor(t))).collect();
        let mut out = eval_node(&node(op, n), 1, &values)?;
        match out.remove(0) {
            Value::Tensor(t) => Ok(t),
            other => panic!("not a tensor: {}", other.kind()),
        }
    }

    /// BiasAdd is X + bias (over the last axis) + skip, element by element.
    #[test]
    fn bias_add_adds_bias_over_channels_and_skip() {
        let (n, s, c) = (2, 3, 4);
        let x: Vec<f32> = (0..n * s * c).map(|i| i as f32 * 0.5 - 3.0).collect();
        let skip: Vec<f32> = (0..n * s * c).map(|i| (i as f32).sin()).collect();
        let bias: Vec<f32> = (0..c).map(|i| 10.0 * i as f32 + 0.25).collect();
        let y = run(
            "BiasAdd",
            vec![
                Tensor::from_vec(&[n, s, c], x.clone()).unwrap(),
                Tensor::from_vec(&[c], bias.clone()).unwrap(),
                Tensor::from_vec(&[n, s, c], skip.clone()).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(y.shape(), &[n, s, c]);
        let got = y.to_f64_vec().unwrap();
        let mut k = 0;
        for _ in 0..n * s {
            for (ci, b) in bias.iter().enumerate() {
                let want = x[k] + b + skip[k];
                assert!(
                    (got[k] - want as f64).abs() < 1e-5,
                    "element {k} channel {ci}"
                );
                k += 1;
            }
        }
    }

    #[test]
    fn bias_add_float16_keeps_its_type_and_rounds_once() {
        let halves = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let (x, bias, skip) = (
            halves(&[1.5, -0.1, 7.0, 0.3]),
            halves(&[0.25, -1.0]),
            halves(&[2.0, 0.7, -3.3, 1e-3]),
        );
        let y = run(
            "BiasAdd",
            vec![
                Tensor::from_vec(&[1, 2, 2], x.clone()).unwrap(),
                Tensor::from_vec(&[2], bias.clone()).unwrap(),
                Tensor::from_vec(&[1, 2, 2], skip.clone()).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(y.dtype(), crate::dtype::DType::Float16);
        let want: Vec<f64> = (0..4)
            .map(|k| {
                let sum = x[k].to_f64() + bias[k % 2].to_f64() + skip[k].to_f64();
                f16::from_f64(sum).to_f64()
            })
            .collect();
        assert_eq!(y.to_f64_vec().unwrap(), want);
    }

    #[test]
    fn bias_add_rejects_a_bias_of_the_wrong_size() {
        let x = Tensor::from_vec(&[1, 2, 3], vec![0f32; 6]).unwrap();
        let bias = Tensor::from_vec(&[2], vec![0f32; 2]).unwrap();
        let skip = Tensor::from_vec(&[1, 2, 3], vec![0f32; 6]).unwrap();
        let err = run("BiasAdd", vec![x, bias, skip]).unwrap_err().to_string();
        assert!(err.contains("bias must have shape [3]"), "{err}");
    }
}
