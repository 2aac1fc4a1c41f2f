//! Loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class weights,
//! ignore_index, reductions none/sum/mean, the optional log_prob output).

use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::Tensor;
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "NegativeLogLikelihoodLoss", 12, LATEST, nll_loss);
    reg.register(
        "",
        "SoftmaxCrossEntropyLoss",
        12,
        LATEST,
        softmax_cross_entropy,
    );
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduction {
    None,
    Sum,
    Mean,
}

fn reduction(ctx: &KernelCtx) -> Result<Reduction> {
    match ctx.attr_string("reduction", "mean")?.as_str() {
        "none" => Ok(Reduction::None),
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => Err(ctx.err(format!("unknown reduction '{other}'"))),
    }
}

/// NLL over log-probabilities `x` of shape [N, C, d...] (as f64, row-major) and integer
/// targets [N, d...]. Returns the loss values (shape of target, or a scalar).
fn nll(
    x: &[f64],
    x_shape: &[usize],
    target: &[i64],
    weight: Option<&[f64]>,
    ignore: Option<i64>,
    red: Reduction,
) -> Result<Vec<f64>> {
    if x_shape.len() < 2 {
        return Err(RefError::op("input must have rank >= 2"));
    }
    let (n, c) = (x_shape[0], x_shape[1]);
    let d: usize = x_shape[2..].iter().product();
    if target.len() != n * d {
        return Err(RefError::op(format!(
            "target has {} values, expected {}",
            target.len(),
            n * d
        )));
    }
    let mut loss = vec![0f64; n * d];
    let mut weights = vec![0f64; n * d];
    for i in 0..n {
        for j in 0..d {
            let t = target[i * d + j];
            if Some(t) == ignore {
                continue;
            }
            if t < 0 || t as usize >= c {
                return Err(RefError::op(format!(
                    "target {t} is out of range for {c} classes"
                )));
            }
            let w = weight.map_or(1.0, |w| w[t as usize]);
            loss[i * d + j] = -x[(i * c + t as usize) * d + j] * w;
            weights[i * d + j] = w;
        }
    }
    Ok(match red {
        Reduction::None => loss,
        Reduction::Sum => vec![loss.iter().sum()],
        Reduction::Mean => {
            if weight.is_some() || ignore.is_some() {
                vec![loss.iter().sum::<f64>() / weights.iter().sum::<f64>()]
            } else {
                vec![loss.iter().sum::<f64>() / loss.len() as f64]
            }
        }
    })
}

struct LossInputs {
    x: Vec<f64>,
    target: Vec<i64>,
    weight: Option<Vec<f64>>,
    ignore: Option<i64>,
    red: Reduction,
}

fn loss_inputs(ctx: &KernelCtx, inputs: &[Option<&Value>], x: &Tensor) -> Result<LossInputs> {
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    Ok(LossInputs {
        x: x.to_f64_vec().map_err(err)?,
        target: ctx.input(inputs, 1)?.to_i64_vec().map_err(err)?,
        weight: ctx
            .opt_input(inputs, 2)?
            .map(|w| w.to_f64_vec().map_err(err))
            .transpose()?,
        ignore: ctx.attr_opt_int("ignore_index")?,
        red: reduction(ctx)?,
    })
}

fn output(
    values: Vec<f64>,
    target_shape: &[usize],
    red: Reduction,
    like: &Tensor,
) -> Result<Value> {
    let shape: &[usize] = if red == Reduction::None {
        target_shape
    } else {
        &[]
    };
    Ok(Value::Tensor(super::cast_tensor(
        &Tensor::from_vec(shape, values)?,
        like.dtype(),
    )?))
}

fn nll_loss(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let target_shape = ctx.input(inputs, 1)?.shape().to_vec();
    let li = loss_inputs(ctx, inputs, x)?;
    let loss = nll(
        &li.x,
        x.shape(),
        &li.target,
        li.weight.as_deref(),
        li.ignore,
        li.red,
    )
    .map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(vec![output(loss, &target_shape, li.red, x)?])
}

fn softmax_cross_entropy(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let target_shape = ctx.input(inputs, 1)?.shape().to_vec();
    let li = loss_inputs(ctx, inputs, x)?;
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(ctx.err("scores must have rank >= 2"));
    }
    let (n, c) = (shape[0], shape[1]);
    let d: usize = shape[2..].iter().product();
    // log_softmax over axis 1.
    let mut logp = li.x.clone();
    for i in 0..n {
        for j in 0..d {
            let at = |k: usize| (i * c + k) * d + j;
            let m = (0..c)
                .map(|k| li.x[at(k)])
                .fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..c).map(|k| (li.x[at(k)] - m).exp()).sum();
            for k in 0..c {
                logp[at(k)] = li.x[at(k)] - m - sum.ln();
            }
        }
    }
    let loss = nll(
        &logp,
        shape,
        &li.target,
        li.weight.as_deref(),
        li.ignore,
        li.red,
    )
    .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let mut out = vec![output(loss, &target_shape, li.red, x)?];
    if ctx.wants_output(1) {
        out.push(Value::Tensor(super::cast_tensor(
            &Tensor::from_vec(shape, logp)?,
            x.dtype(),
        )?));
    }
    Ok(out)
}
