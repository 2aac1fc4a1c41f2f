//! FusedMatMul and FusedConv (com.microsoft): the standard MatMul and Conv kernels with what
//! onnxruntime's graph fusions fold into them.
//!
//! - FusedMatMul: `alpha · A' × B'`, where an operand of rank r ≥ 3 with `transBatch` has its
//!   first axis moved behind the other batch axes (permutation `[1, .., r-2, 0, r-1]`), and then
//!   with `trans` its last two axes swapped; the product broadcasts like MatMul. float16 is
//!   multiplied in f32 and rounded once.
//! - FusedConv: `activation(Conv(X, W, B) + Z)`, with `activation` one of Relu, Tanh, Sigmoid,
//!   LeakyRelu (`activation_params` = [alpha]), Clip ([min, max]) and HardSigmoid
//!   ([alpha, beta]); no activation attribute is the identity.

use super::{floats, floats_broadcast, same_type, tensor_of, MS};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{map_all, Tensor};
use crate::value::Value;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register(MS, "FusedMatMul", 1, LATEST, fused_matmul);
    reg.register(MS, "FusedConv", 1, LATEST, fused_conv);
}

/// Operand `t` of FusedMatMul with its `transBatch` and `trans` permutations applied.
fn arrange(
    ctx: &KernelCtx,
    t: &Tensor,
    trans: bool,
    trans_batch: bool,
    name: &str,
) -> Result<Tensor> {
    let r = t.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    if trans_batch {
        if r < 3 {
            return Err(ctx.err(format!(
                "transBatch{name} needs {name} of rank >= 3, found {:?}",
                t.shape()
            )));
        }
        perm = (1..r - 1).chain([0, r - 1]).collect();
    }
    if trans && r >= 2 {
        perm.swap(r - 2, r - 1);
    }
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t.clone());
    }
    Ok(map_all!(t, a => crate::kernels::shape::permute(a, &perm)))
}

fn flag(ctx: &KernelCtx, name: &str) -> Result<bool> {
    Ok(ctx.attr_int(name, 0)? != 0)
}

fn fused_matmul(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    let dtype = a.dtype();
    same_type(ctx, b, dtype, "B")?;
    if !matches!(
        dtype,
        DType::Float | DType::Float16 | DType::Double | DType::Bfloat16
    ) {
        return Err(ctx.err(format!("A must be a float tensor, found {dtype}")));
    }
    let alpha = ctx.attr_float("alpha", 1.0)? as f64;
    let a = arrange(ctx, a, flag(ctx, "transA")?, flag(ctx, "transBatchA")?, "A")?;
    let b = arrange(ctx, b, flag(ctx, "transB")?, flag(ctx, "transBatchB")?, "B")?;
    // 16-bit floats multiply in f32, rounded once with alpha applied.
    let widen = |t: Tensor| -> Result<Tensor> {
        if matches!(dtype, DType::Float16 | DType::Bfloat16) {
            crate::kernels::cast_tensor(&t, DType::Float)
        } else {
            Ok(t)
        }
    };
    let (a, b) = (Value::Tensor(widen(a)?), Value::Tensor(widen(b)?));
    let product = crate::kernels::matmul::matmul(ctx, &[Some(&a), Some(&b)])?;
    let Some(Value::Tensor(p)) = product.into_iter().next() else {
        return Err(ctx.err("MatMul produced no tensor"));
    };
    if alpha == 1.0 && p.dtype() == dtype {
        return Ok(vec![Value::Tensor(p)]);
    }
    let scaled = p.to_f64_vec()?.into_iter().map(|v| v * alpha).collect();
    Ok(vec![tensor_of(p.shape(), scaled, dtype)?])
}

/// FusedConv's activation, read from `activation` and `activation_params`.
#[derive(Debug, Clone, Copy)]
enum Activation {
    Identity,
    Relu,
    Tanh,
    Sigmoid,
    LeakyRelu(f64),
    Clip(f64, f64),
    HardSigmoid(f64, f64),
}

impl Activation {
    fn from_attrs(ctx: &KernelCtx) -> Result<Self> {
        let Some(name) = ctx.attr_opt_string("activation")? else {
            return Ok(Self::Identity);
        };
        let params: Vec<f64> = ctx
            .attr_floats("activation_params")
            .unwrap_or(&[])
            .iter()
            .map(|&p| p as f64)
            .collect();
        let need = |n: usize| -> Result<()> {
            if params.len() < n {
                Err(ctx.err(format!(
                    "activation {name} needs {n} activation_params, found {}",
                    params.len()
                )))
            } else {
                Ok(())
            }
        };
        Ok(match name.as_str() {
            "Relu" => Self::Relu,
            "Tanh" => Self::Tanh,
            "Sigmoid" => Self::Sigmoid,
            "LeakyRelu" => {
                need(1)?;
                Self::LeakyRelu(params[0])
            }
            "Clip" => {
                need(2)?;
                Self::Clip(params[0], params[1])
            }
            "HardSigmoid" => {
                need(2)?;
                Self::HardSigmoid(params[0], params[1])
            }
            other => return Err(ctx.err(format!("unsupported activation '{other}'"))),
        })
    }

    fn apply(self, x: f64) -> f64 {
        match self {
            Self::Identity => x,
            Self::Relu => x.max(0.0),
            Self::Tanh => x.tanh(),
            Self::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Self::LeakyRelu(alpha) => {
                if x >= 0.0 {
                    x
                } else {
                    alpha * x
                }
            }
            Self::Clip(lo, hi) => x.max(lo).min(hi),
            Self::HardSigmoid(alpha, beta) => (alpha * x + beta).clamp(0.0, 1.0),
        }
    }
}

fn fused_conv(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let activation = Activation::from_attrs(ctx)?;
    let x = ctx.input(inputs, 0)?;
    let dtype = x.dtype();
    // The convolution runs in f32 for 16-bit floats, so the sum and the activation round once.
    let wide = |i: usize| -> Result<Option<Value>> {
        Ok(match ctx.opt_input(inputs, i)? {
            None => None,
            Some(t) if matches!(dtype, DType::Float16 | DType::Bfloat16) => {
                same_type(ctx, t, dtype, "W and B")?;
                Some(Value::Tensor(crate::kernels::cast_tensor(t, DType::Float)?))
            }
            Some(t) => Some(Value::Tensor(t.clone())),
        })
    };
    let conv_inputs = [wide(0)?, wide(1)?, wide(2)?];
    let refs: Vec<Option<&Value>> = conv_inputs.iter().map(Option::as_ref).collect();
    let conv = crate::kernels::conv::conv(ctx, &refs)?;
    let Some(Value::Tensor(y)) = conv.into_iter().next() else {
        return Err(ctx.err("Conv produced no tensor"));
    };
    let mut v = floats(ctx, &y, "Y")?;
    if let Some(z) = ctx.opt_input(inputs, 3)? {
        same_type(ctx, z, dtype, "Z")?;
        let zv = floats_broadcast(ctx, z, y.shape(), "Z")?;
        for (a, b) in v.iter_mut().zip(zv) {
            *a += b;
        }
    }
    let out = v.into_iter().map(|x| activation.apply(x)).collect();
    Ok(vec![tensor_of(y.shape(), out, dtype)?])
}
