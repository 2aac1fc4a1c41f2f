//! Random kernels: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike,
//! Bernoulli, Multinomial, and Dropout from opset 12 (training mode draws a mask).
//!
//! Every draw is reproducible: a node with a `seed` attribute draws from a ChaCha8 stream seeded
//! by that value, and a node without one from a stream seeded by a fixed constant mixed with
//! the node's first output name, so two runs of one model agree while two unseeded nodes of a
//! model still draw different numbers. The numbers do not match numpy's, so tests compare the
//! outputs of these nodes by dtype and shape only.
//!
//! Dropout is registered here for opsets 12 and later, overriding shape.rs's inference-only
//! kernel (random_ops registers last): inference (no `training_mode`, or false) and ratio 0 are
//! the identity with an all-true mask, as there.

use ndarray::IxDyn;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{cast_tensor, one, to_dims};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{check_size, map_float, Array, Tensor};
use crate::value::Value;

/// Registers this family's kernels.
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "RandomNormal", 1, LATEST, random_normal);
    reg.register("", "RandomUniform", 1, LATEST, random_uniform);
    reg.register("", "RandomNormalLike", 1, LATEST, random_normal_like);
    reg.register("", "RandomUniformLike", 1, LATEST, random_uniform_like);
    reg.register("", "Bernoulli", 15, LATEST, bernoulli);
    reg.register("", "Multinomial", 7, LATEST, multinomial);
    reg.register("", "Dropout", 12, LATEST, dropout);
}

/// The seed of unseeded nodes, before mixing in the node's output name.
const DEFAULT_SEED: u64 = 0x6f6e_6e78_2d72_6566;

/// The random stream of a node: from its `seed` attribute, or from [`DEFAULT_SEED`] and its
/// first output name (FNV-1a) when it has none.
fn node_rng(ctx: &KernelCtx) -> Result<ChaCha8Rng> {
    let seed = match ctx.attr_opt_float("seed")? {
        Some(s) => u64::from(s.to_bits()),
        None => {
            let name = ctx.node.output.first().map_or("", String::as_str);
            name.bytes()
                .fold(DEFAULT_SEED ^ 0xcbf2_9ce4_8422_2325, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                })
        }
    };
    Ok(ChaCha8Rng::seed_from_u64(seed))
}

/// A uniform draw in `[0, 1)` with 53 random bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.random::<u64>() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `n` draws from N(mean, scale^2) by the Box-Muller transform.
fn normal_samples(rng: &mut ChaCha8Rng, n: usize, mean: f64, scale: f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        let u1 = 1.0 - unit(rng); // (0, 1]: ln is finite
        let u2 = unit(rng);
        let radius = (-2.0 * u1.ln()).sqrt();
        let angle = std::f64::consts::TAU * u2;
        out.push(mean + scale * radius * angle.cos());
        out.push(mean + scale * radius * angle.sin());
    }
    out.truncate(n);
    out
}

/// `n` draws uniform in `[low, high)`.
fn uniform_samples(rng: &mut ChaCha8Rng, n: usize, low: f64, high: f64) -> Vec<f64> {
    (0..n).map(|_| low + (high - low) * unit(rng)).collect()
}

/// The `dtype` attribute as a float type the generators may produce, or `default`.
fn float_dtype(ctx: &KernelCtx, default: DType) -> Result<DType> {
    let dtype = match ctx.attr_opt_int("dtype")? {
        Some(code) => DType::from_code(code as i32)
            .ok_or_else(|| ctx.err(format!("unknown dtype code {code}")))?,
        None => default,
    };
    if !matches!(
        dtype,
        DType::Float | DType::Double | DType::Float16 | DType::Bfloat16
    ) {
        return Err(ctx.err(format!(
            "dtype must be float16, bfloat16, float or double, got {dtype}"
        )));
    }
    Ok(dtype)
}

/// The `shape` attribute of RandomNormal/RandomUniform, checked.
fn shape_attr(ctx: &KernelCtx) -> Result<Vec<usize>> {
    let dims = ctx
        .attr_ints("shape")
        .ok_or_else(|| ctx.err("attribute 'shape' is required"))?;
    let shape = to_dims(dims).map_err(|e| e.in_node(&ctx.node_ref()))?;
    check_size("random output", &shape)?;
    Ok(shape)
}

/// Samples as a tensor of `shape` and `dtype`.
fn samples_tensor(shape: &[usize], samples: Vec<f64>, dtype: DType) -> Result<Tensor> {
    cast_tensor(&Tensor::from_vec(shape, samples)?, dtype)
}

fn normal_params(ctx: &KernelCtx) -> Result<(f64, f64)> {
    Ok((
        f64::from(ctx.attr_float("mean", 0.0)?),
        f64::from(ctx.attr_float("scale", 1.0)?),
    ))
}

fn uniform_params(ctx: &KernelCtx) -> Result<(f64, f64)> {
    Ok((
        f64::from(ctx.attr_float("low", 0.0)?),
        f64::from(ctx.attr_float("high", 1.0)?),
    ))
}

fn random_normal(ctx: &KernelCtx, _inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let shape = shape_attr(ctx)?;
    let dtype = float_dtype(ctx, DType::Float)?;
    let (mean, scale) = normal_params(ctx)?;
    let n = shape.iter().product();
    let samples = normal_samples(&mut node_rng(ctx)?, n, mean, scale);
    one(samples_tensor(&shape, samples, dtype)?)
}

fn random_uniform(ctx: &KernelCtx, _inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let shape = shape_attr(ctx)?;
    let dtype = float_dtype(ctx, DType::Float)?;
    let (low, high) = uniform_params(ctx)?;
    let n = shape.iter().product();
    let samples = uniform_samples(&mut node_rng(ctx)?, n, low, high);
    one(samples_tensor(&shape, samples, dtype)?)
}

/// The shape of the `*Like` ops' input and the output dtype (the `dtype` attribute, else the
/// input's type, which must then be a float type).
fn like_params(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<(Vec<usize>, DType)> {
    let x = ctx.input(inputs, 0)?;
    let default = x.dtype();
    let dtype = if ctx.attr("dtype").is_some() || default.is_float() {
        float_dtype(ctx, default)?
    } else {
        return Err(ctx.err(format!(
            "input type {default} is not a float type and no dtype attribute is given"
        )));
    };
    Ok((x.shape().to_vec(), dtype))
}

fn random_normal_like(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let (shape, dtype) = like_params(ctx, inputs)?;
    let (mean, scale) = normal_params(ctx)?;
    let samples = normal_samples(&mut node_rng(ctx)?, shape.iter().product(), mean, scale);
    one(samples_tensor(&shape, samples, dtype)?)
}

fn random_uniform_like(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let (shape, dtype) = like_params(ctx, inputs)?;
    let (low, high) = uniform_params(ctx)?;
    let samples = uniform_samples(&mut node_rng(ctx)?, shape.iter().product(), low, high);
    one(samples_tensor(&shape, samples, dtype)?)
}

/// Bernoulli: 1 with probability `p` (each element of the input), else 0, in `dtype` (default
/// the input's type; any numeric type or bool).
fn bernoulli(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let p = ctx.input(inputs, 0)?;
    if !matches!(
        p,
        Tensor::F32(_) | Tensor::F64(_) | Tensor::F16(_) | Tensor::BF16(_)
    ) {
        return Err(ctx.err(format!(
            "input must be a float tensor of probabilities, got {}",
            p.dtype()
        )));
    }
    let dtype = match ctx.attr_opt_int("dtype")? {
        Some(code) => DType::from_code(code as i32)
            .filter(|d| !matches!(d, DType::String | DType::Complex64 | DType::Complex128))
            .ok_or_else(|| ctx.err(format!("dtype code {code} is not a numeric type")))?,
        None => p.dtype(),
    };
    let probs = p.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let mut rng = node_rng(ctx)?;
    let draws: Vec<bool> = probs.iter().map(|&q| unit(&mut rng) < q).collect();
    one(cast_tensor(&Tensor::from_vec(p.shape(), draws)?, dtype)?)
}

/// Multinomial: `sample_size` class indices per batch row, drawn from the softmax of the row
/// of unnormalized log-probabilities.
fn multinomial(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let &[batch, classes] = x.shape() else {
        return Err(ctx.err(format!(
            "input must have shape [batch_size, class_size], got {:?}",
            x.shape()
        )));
    };
    if !x.dtype().is_float() || x.dtype().is_coded() {
        return Err(ctx.err(format!("input must be a float tensor, got {}", x.dtype())));
    }
    let samples = ctx.attr_int("sample_size", 1)?;
    let samples = usize::try_from(samples)
        .map_err(|_| ctx.err(format!("sample_size must be non-negative, got {samples}")))?;
    let dtype = match ctx.attr_int("dtype", 6)? {
        6 => DType::Int32,
        7 => DType::Int64,
        other => return Err(ctx.err(format!("dtype must be int32 (6) or int64 (7), got {other}"))),
    };
    check_size("Multinomial output", &[batch, samples])?;
    if classes == 0 && batch > 0 && samples > 0 {
        return Err(ctx.err("cannot sample from zero classes"));
    }
    let logits = x.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let mut rng = node_rng(ctx)?;
    let mut out = Vec::with_capacity(batch * samples);
    let mut cumulative = vec![0.0; classes];
    for row in logits.chunks(classes.max(1)).take(batch) {
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut total = 0.0;
        for (c, &l) in cumulative.iter_mut().zip(row) {
            total += (l - max).exp();
            *c = total;
        }
        for _ in 0..samples {
            let u = unit(&mut rng) * total;
            let idx = cumulative.partition_point(|&c| c <= u).min(classes - 1);
            out.push(idx as i64);
        }
    }
    one(cast_tensor(
        &Tensor::from_vec(&[batch, samples], out)?,
        dtype,
    )?)
}

/// Dropout (opset 12+): inputs data, optional ratio (default 0.5), optional training_mode
/// (default false). Training with a non-zero ratio keeps each element with probability
/// `1 - ratio`, scaling kept ones by `1 / (1 - ratio)`; otherwise the output is the input.
/// The optional second output is the boolean keep-mask.
fn dropout(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scalar = |i: usize, what: &str| -> Result<Option<f64>> {
        match ctx.opt_input(inputs, i)? {
            None => Ok(None),
            Some(t) if t.len() == 1 => Ok(t
                .to_f64_vec()
                .map_err(|e| e.in_node(&ctx.node_ref()))?
                .first()
                .copied()),
            Some(t) => Err(ctx.err(format!(
                "{what} must be a scalar, got shape {:?}",
                t.shape()
            ))),
        }
    };
    let ratio = scalar(1, "ratio")?.unwrap_or(0.5);
    let training = scalar(2, "training_mode")?.is_some_and(|t| t != 0.0);
    if !training || ratio == 0.0 {
        let mut out = vec![Value::Tensor(x.clone())];
        if ctx.wants_output(1) {
            out.push(Value::Tensor(Tensor::Bool(Array::from_elem(
                IxDyn(x.shape()),
                true,
            ))));
        }
        return Ok(out);
    }
    if !(0.0..1.0).contains(&ratio) {
        return Err(ctx.err(format!(
            "ratio must be in [0, 1) in training mode, got {ratio}"
        )));
    }
    let mut rng = node_rng(ctx)?;
    let mask: Array<bool> =
        Array::from_shape_simple_fn(IxDyn(x.shape()), || unit(&mut rng) >= ratio).into_shared();
    let scale = 1.0 / (1.0 - ratio);
    let output = map_float!(x, a => {
        let mut y = a.to_owned();
        ndarray::Zip::from(&mut y).and(&mask).for_each(|v, &keep| {
            *v = if keep {
                crate::numeric::Num::from_f64(crate::numeric::Num::to_f64(*v) * scale)
            } else {
                crate::numeric::Num::zero()
            };
        });
        y.into_shared()
    }, other => return Err(ctx.err(format!(
        "training-mode Dropout needs a float16, bfloat16, float or double input, got {}",
        other.dtype()
    ))));
    Ok(vec![
        Value::Tensor(output),
        Value::Tensor(Tensor::Bool(mask)),
    ])
}

#[cfg(test)]
mod tests {
    use onnx_proto::{AttributeProto, NodeProto};

    use super::*;
    use crate::error::RefError;
    use crate::eval::eval_node;

    fn node(op: &str, n_in: usize, n_out: usize, attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: (0..n_in).map(|i| format!("i{i}")).collect(),
            output: (0..n_out).map(|i| format!("{op}_o{i}")).collect(),
            attribute: attrs,
            ..Default::default()
        }
    }

    fn f_attr(name: &str, v: f32) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            f: Some(v),
            ..Default::default()
        }
    }

    fn i_attr(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            i: Some(v),
            ..Default::default()
        }
    }

    fn shape_attr(dims: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some("shape".into()),
            ints: dims.to_vec(),
            ..Default::default()
        }
    }

    fn run(n: &NodeProto, opset: i64, inputs: Vec<Option<Value>>) -> Result<Vec<Value>> {
        eval_node(n, opset, &inputs)
    }

    fn values(v: &Value) -> Vec<f64> {
        v.as_tensor()
            .and_then(Tensor::to_f64_vec)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn mean_var(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
    }

    fn tensor(shape: &[usize], v: Vec<f32>) -> Option<Value> {
        Some(Value::Tensor(
            Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}")),
        ))
    }

    #[test]
    fn normal_has_the_requested_moments_and_repeats_by_seed() {
        let attrs = vec![
            shape_attr(&[100, 100]),
            f_attr("mean", 2.0),
            f_attr("scale", 3.0),
            f_attr("seed", 7.0),
            i_attr("dtype", 11),
        ];
        let n = node("RandomNormal", 0, 1, attrs.clone());
        let a = run(&n, 22, vec![]).unwrap_or_else(|e| panic!("{e}"));
        let (mean, var) = mean_var(&values(&a[0]));
        assert!((mean - 2.0).abs() < 0.1, "mean {mean}");
        assert!((var - 9.0).abs() < 0.5, "variance {var}");
        let b = run(&n, 22, vec![]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b);
        let mut other_seed = attrs;
        other_seed[3] = f_attr("seed", 8.0);
        let c = run(&node("RandomNormal", 0, 1, other_seed), 22, vec![])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a, c);
        assert_eq!(
            a[0].as_tensor().map(Tensor::dtype).ok(),
            Some(DType::Double)
        );
    }

    #[test]
    fn uniform_like_stays_in_range_with_the_input_type() {
        let n = node(
            "RandomUniformLike",
            1,
            1,
            vec![f_attr("low", -1.0), f_attr("high", 3.0)],
        );
        let x = tensor(&[10_000], vec![0.0; 10_000]);
        let out = run(&n, 22, vec![x.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let v = values(&out[0]);
        assert!(v.iter().all(|&s| (-1.0..3.0).contains(&s)));
        let (mean, _) = mean_var(&v);
        assert!((mean - 1.0).abs() < 0.05, "mean {mean}");
        assert_eq!(
            out[0].as_tensor().map(Tensor::dtype).ok(),
            Some(DType::Float)
        );
        // Unseeded: two runs agree.
        let again = run(&n, 22, vec![x]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out, again);
        // An integer input needs an explicit float dtype.
        let ints = Some(Value::Tensor(Tensor::scalar(1i64)));
        let r = run(&node("RandomNormalLike", 1, 1, vec![]), 22, vec![ints]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("INT64")));
    }

    #[test]
    fn bad_shapes_and_dtypes_are_errors() {
        let r = run(
            &node("RandomUniform", 0, 1, vec![shape_attr(&[2, -1])]),
            22,
            vec![],
        );
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("-1")));
        let r = run(&node("RandomUniform", 0, 1, vec![]), 22, vec![]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("shape")));
        let r = run(
            &node(
                "RandomNormal",
                0,
                1,
                vec![shape_attr(&[1]), i_attr("dtype", 7)],
            ),
            22,
            vec![],
        );
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("INT64")));
        let empty = run(
            &node("RandomNormal", 0, 1, vec![shape_attr(&[0, 3])]),
            22,
            vec![],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            empty[0].as_tensor().map(|t| t.shape().to_vec()).ok(),
            Some(vec![0, 3])
        );
    }

    #[test]
    fn bernoulli_frequency_follows_probability() {
        let n = node(
            "Bernoulli",
            1,
            1,
            vec![f_attr("seed", 1.0), i_attr("dtype", 9)],
        );
        let p = tensor(&[10_000], vec![0.3; 10_000]);
        let out = run(&n, 22, vec![p]).unwrap_or_else(|e| panic!("{e}"));
        let v = values(&out[0]);
        let (mean, _) = mean_var(&v);
        assert!((mean - 0.3).abs() < 0.02, "frequency {mean}");
        assert_eq!(
            out[0].as_tensor().map(Tensor::dtype).ok(),
            Some(DType::Bool)
        );
        let certain = run(
            &node("Bernoulli", 1, 1, vec![]),
            15,
            vec![tensor(&[3], vec![0.0, 1.0, 1.0])],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values(&certain[0]), vec![0.0, 1.0, 1.0]);
    }

    #[test]
    fn multinomial_follows_softmax_of_logits() {
        let n = node(
            "Multinomial",
            1,
            1,
            vec![i_attr("sample_size", 10_000), i_attr("dtype", 7)],
        );
        let logits = tensor(&[1, 3], vec![0.0, 2f32.ln(), f32::NEG_INFINITY]);
        let out = run(&n, 7, vec![logits]).unwrap_or_else(|e| panic!("{e}"));
        let v = values(&out[0]);
        let ones = v.iter().filter(|&&c| c == 1.0).count() as f64 / v.len() as f64;
        assert!(v.iter().all(|&c| c == 0.0 || c == 1.0));
        assert!(
            (ones - 2.0 / 3.0).abs() < 0.02,
            "frequency of class 1: {ones}"
        );
        let r = run(&n, 7, vec![tensor(&[3], vec![0.0; 3])]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("batch_size")));
    }

    #[test]
    fn dropout_inference_and_training() {
        let x = tensor(&[10_000], vec![1.0; 10_000]);
        let ratio = tensor(&[], vec![0.25]);
        let yes = Some(Value::Tensor(Tensor::scalar(true)));
        let no = Some(Value::Tensor(Tensor::scalar(false)));
        let n = node("Dropout", 3, 2, vec![i_attr("seed", 3)]);
        // Inference: identity and an all-true mask.
        let out = run(&n, 13, vec![x.clone(), ratio.clone(), no]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values(&out[0]), vec![1.0; 10_000]);
        assert!(values(&out[1]).iter().all(|&m| m == 1.0));
        // Training: about 75% kept, scaled by 4/3, the mask marks the kept ones.
        let out =
            run(&n, 13, vec![x.clone(), ratio, yes.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let y = values(&out[0]);
        let mask = values(&out[1]);
        let kept = mask.iter().filter(|&&m| m == 1.0).count() as f64 / 10_000.0;
        assert!((kept - 0.75).abs() < 0.02, "kept {kept}");
        for (v, m) in y.iter().zip(&mask) {
            let want = if *m == 1.0 { 4.0 / 3.0 } else { 0.0 };
            assert!((v - want).abs() < 1e-6);
        }
        // Ratio 0 in training is the identity; ratio 1 is an error.
        let out = run(&n, 13, vec![x.clone(), tensor(&[], vec![0.0]), yes.clone()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(values(&out[0]), vec![1.0; 10_000]);
        let r = run(&n, 13, vec![x, tensor(&[], vec![1.0]), yes]);
        assert!(matches!(r, Err(RefError::Kernel { reason, .. }) if reason.contains("ratio")));
    }
}
