//! Optimizer kernels of the `ai.onnx.preview.training` domain: Adagrad, Adam and Momentum
//! (standard and Nesterov). Each takes a learning rate R, a step count T and n groups of
//! tensors (X..., G..., then the optimizer states), and returns the new X... and states.
//! Arithmetic is in f64; results take the dtype of the tensor they replace (float or double).

use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::tensor::Tensor;
use crate::value::Value;

const DOMAIN: &str = "ai.onnx.preview.training";

/// Registers this family's kernels.
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(DOMAIN, "Adagrad", 1, 1, adagrad);
    reg.register(DOMAIN, "Adam", 1, 1, adam);
    reg.register(DOMAIN, "Momentum", 1, 1, momentum);
}

/// The inputs of an optimizer node: R, T, and `groups` lists of n tensors each (X, G, states),
/// all tensors of one group position of equal shape and of float or double type.
struct OptimizerInputs<'v> {
    rate: f64,
    step: i64,
    groups: Vec<Vec<&'v Tensor>>,
}

fn optimizer_inputs<'v>(
    ctx: &KernelCtx,
    inputs: &[Option<&'v Value>],
    groups: usize,
) -> Result<OptimizerInputs<'v>> {
    let scalar = |i: usize, what: &str| -> Result<&Tensor> {
        let t = ctx.input(inputs, i)?;
        if t.len() != 1 {
            return Err(ctx.err(format!(
                "{what} must be a scalar, got shape {:?}",
                t.shape()
            )));
        }
        Ok(t)
    };
    let r = scalar(0, "R (learning rate)")?;
    if !matches!(r, Tensor::F32(_) | Tensor::F64(_)) {
        return Err(ctx.err(format!("R must be float or double, got {}", r.dtype())));
    }
    let rate = r.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?[0];
    let t = scalar(1, "T (update count)")?;
    if !matches!(t, Tensor::I64(_)) {
        return Err(ctx.err(format!("T must be int64, got {}", t.dtype())));
    }
    let step = t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?[0];
    let rest = inputs.len().saturating_sub(2);
    if rest == 0 || !rest.is_multiple_of(groups) {
        return Err(ctx.err(format!(
            "expected R, T and {groups} groups of n tensors, got {} inputs",
            inputs.len()
        )));
    }
    let n = rest / groups;
    let mut out = Vec::with_capacity(groups);
    for g in 0..groups {
        let mut list = Vec::with_capacity(n);
        for i in 0..n {
            let idx = 2 + g * n + i;
            let t = ctx.input(inputs, idx)?;
            if !matches!(t, Tensor::F32(_) | Tensor::F64(_)) {
                return Err(ctx.err(format!(
                    "input {idx} must be float or double, got {}",
                    t.dtype()
                )));
            }
            let x_shape = out
                .first()
                .and_then(|xs: &Vec<&Tensor>| xs.get(i))
                .map(|x| x.shape());
            if let Some(xs) = x_shape {
                if xs != t.shape() {
                    return Err(ctx.err(format!(
                        "input {idx} has shape {:?}, but its X has shape {xs:?}",
                        t.shape()
                    )));
                }
            }
            list.push(t);
        }
        out.push(list);
    }
    Ok(OptimizerInputs {
        rate,
        step,
        groups: out,
    })
}

/// `values` as a tensor shaped and typed like `like`.
fn like(like: &Tensor, values: Vec<f64>) -> Result<Value> {
    let t = match like {
        Tensor::F32(_) => {
            Tensor::from_vec(like.shape(), values.into_iter().map(|v| v as f32).collect())?
        }
        _ => Tensor::from_vec(like.shape(), values)?,
    };
    Ok(Value::Tensor(t))
}

/// Runs `update` on every tensor position i with the f64 values of each group at i, and
/// returns the outputs grouped as `[outputs of kind 0 for all i, outputs of kind 1, ...]`.
/// `update` returns one vector per output kind; output kind k is typed like input group
/// `like_group[k]`.
fn run_optimizer(
    ctx: &KernelCtx,
    opt: &OptimizerInputs,
    like_group: &[usize],
    update: impl Fn(&[Vec<f64>]) -> Vec<Vec<f64>>,
) -> Result<Vec<Value>> {
    let n = opt.groups.first().map_or(0, Vec::len);
    let mut by_kind: Vec<Vec<Value>> = vec![Vec::with_capacity(n); like_group.len()];
    for i in 0..n {
        let vals = opt
            .groups
            .iter()
            .map(|g| g[i].to_f64_vec())
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.in_node(&ctx.node_ref()))?;
        for (k, out) in update(&vals).into_iter().enumerate() {
            let template = opt.groups[like_group[k]][i];
            by_kind[k].push(like(template, out)?);
        }
    }
    Ok(by_kind.into_iter().flatten().collect())
}

fn adagrad(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let opt = optimizer_inputs(ctx, inputs, 3)?;
    let decay = ctx.attr_float("decay_factor", 0.0)? as f64;
    let eps = ctx.attr_float("epsilon", 1e-6)? as f64;
    let norm = ctx.attr_float("norm_coefficient", 0.0)? as f64;
    let r = opt.rate / (1.0 + opt.step as f64 * decay);
    run_optimizer(ctx, &opt, &[0, 2], |v| {
        let (x, g, h) = (&v[0], &v[1], &v[2]);
        let mut x_new = Vec::with_capacity(x.len());
        let mut h_new = Vec::with_capacity(x.len());
        for i in 0..x.len() {
            let gr = norm * x[i] + g[i];
            let hn = h[i] + gr * gr;
            x_new.push(x[i] - r * gr / (hn.sqrt() + eps));
            h_new.push(hn);
        }
        vec![x_new, h_new]
    })
}

fn adam(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let opt = optimizer_inputs(ctx, inputs, 4)?;
    let alpha = ctx.attr_float("alpha", 0.9)? as f64;
    let beta = ctx.attr_float("beta", 0.999)? as f64;
    let eps = ctx.attr_float("epsilon", 1e-6)? as f64;
    let norm = ctx.attr_float("norm_coefficient", 0.0)? as f64;
    let norm_post = ctx.attr_float("norm_coefficient_post", 0.0)? as f64;
    let r = if opt.step > 0 {
        let t = opt.step as f64;
        opt.rate * (1.0 - beta.powf(t)).sqrt() / (1.0 - alpha.powf(t))
    } else {
        opt.rate
    };
    run_optimizer(ctx, &opt, &[0, 2, 3], |v| {
        let (x, g, m, h) = (&v[0], &v[1], &v[2], &v[3]);
        let (mut x_new, mut v_new, mut h_new) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..x.len() {
            let gr = norm * x[i] + g[i];
            let vn = alpha * m[i] + (1.0 - alpha) * gr;
            let hn = beta * h[i] + (1.0 - beta) * gr * gr;
            let xn = x[i] - r * vn / (hn.sqrt() + eps);
            x_new.push((1.0 - norm_post) * xn);
            v_new.push(vn);
            h_new.push(hn);
        }
        vec![x_new, v_new, h_new]
    })
}

fn momentum(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let opt = optimizer_inputs(ctx, inputs, 3)?;
    let required = |name: &str| -> Result<f64> {
        ctx.attr_opt_float(name)?
            .map(f64::from)
            .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))
    };
    let alpha = required("alpha")?;
    let beta = required("beta")?;
    let norm = required("norm_coefficient")?;
    let nesterov = match ctx.attr_opt_string("mode")?.as_deref() {
        Some("standard") => false,
        Some("nesterov") => true,
        Some(other) => {
            return Err(ctx.err(format!(
                "mode must be 'standard' or 'nesterov', got '{other}'"
            )))
        }
        None => return Err(ctx.err("attribute 'mode' is required")),
    };
    // The first update (T = 0) does not scale the gradient.
    let beta = if opt.step > 0 { beta } else { 1.0 };
    let r = opt.rate;
    run_optimizer(ctx, &opt, &[0, 2], |v| {
        let (x, g, m) = (&v[0], &v[1], &v[2]);
        let (mut x_new, mut v_new) = (Vec::new(), Vec::new());
        for i in 0..x.len() {
            let gr = norm * x[i] + g[i];
            let vn = alpha * m[i] + beta * gr;
            x_new.push(if nesterov {
                x[i] - r * (gr + alpha * vn)
            } else {
                x[i] - r * vn
            });
            v_new.push(vn);
        }
        vec![x_new, v_new]
    })
}

#[cfg(test)]
mod tests {
    use onnx_proto::{AttributeProto, NodeProto};

    use super::*;
    use crate::error::RefError;
    use crate::eval::eval_node;

    fn f_attr(name: &str, v: f32) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            f: Some(v),
            ..Default::default()
        }
    }

    fn node(op: &str, n_in: usize, n_out: usize, attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            domain: Some(DOMAIN.into()),
            input: (0..n_in).map(|i| format!("i{i}")).collect(),
            output: (0..n_out).map(|i| format!("o{i}")).collect(),
            attribute: attrs,
            ..Default::default()
        }
    }

    fn vals(v: &[f64]) -> Option<Value> {
        Some(Value::Tensor(
            Tensor::from_vec(&[v.len()], v.to_vec()).unwrap_or_else(|e| panic!("{e}")),
        ))
    }

    fn head(rate: f64, step: i64) -> Vec<Option<Value>> {
        vec![
            Some(Value::Tensor(Tensor::scalar(rate))),
            Some(Value::Tensor(Tensor::scalar(step))),
        ]
    }

    fn f64s(v: &Value) -> Vec<f64> {
        v.as_tensor()
            .and_then(Tensor::to_f64_vec)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn adagrad_two_tensors_in_double() {
        let n = node("Adagrad", 8, 4, vec![f_attr("epsilon", 0.0)]);
        let mut inputs = head(1.0, 0);
        inputs.extend([vals(&[1.0]), vals(&[2.0, 2.0])]);
        inputs.extend([vals(&[3.0]), vals(&[1.0, 4.0])]);
        inputs.extend([vals(&[0.0]), vals(&[0.0, 0.0])]);
        let out = eval_node(&n, 1, &inputs).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.len(), 4);
        // x - g / sqrt(h + g^2): 1 - 3/3, [2 - 1/1, 2 - 4/4]; doubles stay doubles.
        assert_eq!(f64s(&out[0]), vec![0.0]);
        assert_eq!(f64s(&out[1]), vec![1.0, 1.0]);
        assert_eq!(f64s(&out[3]), vec![1.0, 16.0]);
        assert_eq!(
            out[1].as_tensor().map(Tensor::dtype).ok(),
            Some(crate::DType::Double)
        );
    }

    #[test]
    fn momentum_first_step_ignores_beta_and_mode_is_checked() {
        let attrs = |mode: &str| {
            vec![
                f_attr("alpha", 0.5),
                f_attr("beta", 0.1),
                f_attr("norm_coefficient", 0.0),
                AttributeProto {
                    name: Some("mode".into()),
                    s: Some(mode.as_bytes().to_vec().into()),
                    ..Default::default()
                },
            ]
        };
        let mut inputs = head(1.0, 0);
        inputs.extend([vals(&[1.0]), vals(&[2.0]), vals(&[4.0])]);
        let out = eval_node(&node("Momentum", 5, 2, attrs("standard")), 1, &inputs)
            .unwrap_or_else(|e| panic!("{e}"));
        // v = 0.5*4 + 1*2 = 4; x = 1 - 4.
        assert_eq!(f64s(&out[1]), vec![4.0]);
        assert_eq!(f64s(&out[0]), vec![-3.0]);
        let r = eval_node(&node("Momentum", 5, 2, attrs("heavy")), 1, &inputs);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("heavy")));
    }

    #[test]
    fn mismatched_shapes_and_group_counts_are_errors() {
        let mut inputs = head(1.0, 1);
        inputs.extend([vals(&[1.0]), vals(&[2.0, 3.0]), vals(&[0.0])]);
        let r = eval_node(&node("Adagrad", 5, 2, vec![]), 1, &inputs);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("shape")));
        let mut inputs = head(1.0, 1);
        inputs.extend([vals(&[1.0]), vals(&[2.0])]);
        let r = eval_node(&node("Adam", 4, 3, vec![]), 1, &inputs);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("groups")));
    }

    #[test]
    fn adam_size_zero_tensors() {
        let mut inputs = head(0.1, 3);
        inputs.extend([vals(&[]), vals(&[]), vals(&[]), vals(&[])]);
        let out =
            eval_node(&node("Adam", 6, 3, vec![]), 1, &inputs).unwrap_or_else(|e| panic!("{e}"));
        assert!(out.iter().all(|v| f64s(v).is_empty()));
    }
}
