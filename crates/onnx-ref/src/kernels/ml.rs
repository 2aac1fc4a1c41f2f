//! Kernels of the `ai.onnx.ml` domain: LabelEncoder (v1 class list; v2 keys/values lists; v4
//! tensor attributes), Binarizer, ArrayFeatureExtractor, Scaler, Normalizer, Imputer,
//! OneHotEncoder, FeatureVectorizer and LinearRegressor here; the tree ensembles in `ml/tree.rs`,
//! the classifiers (LinearClassifier, TreeEnsembleClassifier) in `ml/classifier.rs`, the SVMs in
//! `ml/svm.rs`, the map ops (ZipMap, CategoryMapper, DictVectorizer, CastMap) in `ml/maps.rs`
//! and the shared `post_transform` functions in `ml/scores.rs`.

use std::collections::BTreeMap;

use ndarray::Axis;

use super::{one, typed_like, unsupported};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, map_all, map_numeric, Array, Elem, Tensor};
use crate::value::Value;

mod classifier;
mod maps;
mod scores;
mod svm;
mod tree;

use scores::post_transform;

/// The domain of these kernels.
pub(crate) const ML: &str = "ai.onnx.ml";

/// Registers this family's kernels.
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(ML, "LabelEncoder", 1, 1, label_encoder_v1);
    reg.register(ML, "LabelEncoder", 2, 5, label_encoder);
    reg.register(ML, "Binarizer", 1, 5, binarizer);
    reg.register(ML, "ArrayFeatureExtractor", 1, 5, array_feature_extractor);
    reg.register(ML, "Scaler", 1, 5, scaler);
    reg.register(ML, "Normalizer", 1, 5, normalizer);
    reg.register(ML, "Imputer", 1, 5, imputer);
    reg.register(ML, "OneHotEncoder", 1, 5, one_hot_encoder);
    reg.register(ML, "FeatureVectorizer", 1, 5, feature_vectorizer);
    reg.register(ML, "LinearRegressor", 1, 5, linear_regressor);
    tree::register_all(reg);
    classifier::register_all(reg);
    svm::register_all(reg);
    maps::register_all(reg);
}

/// A LabelEncoder key: keys and inputs are compared as strings, integers or floats (floats by
/// value as f64, with every NaN one key and -0 equal to +0).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Str(String),
    Int(i64),
    Float(u64),
}

impl Key {
    fn float(v: f64) -> Key {
        if v.is_nan() {
            Key::Float(f64::NAN.to_bits())
        } else if v == 0.0 {
            Key::Float(0f64.to_bits())
        } else {
            Key::Float(v.to_bits())
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Key::Str(_) => "string",
            Key::Int(_) => "integer",
            Key::Float(_) => "float",
        }
    }
}

/// The elements of a tensor as keys.
fn tensor_keys(t: &Tensor) -> Result<Vec<Key>> {
    Ok(match t {
        Tensor::Str(a) => a.iter().cloned().map(Key::Str).collect(),
        t if t.dtype().is_integer() => t.to_i64_vec()?.into_iter().map(Key::Int).collect(),
        t if t.dtype().is_float() => t.to_f64_vec()?.into_iter().map(Key::float).collect(),
        other => {
            return Err(RefError::UnsupportedDType {
                context: "LabelEncoder keys".into(),
                dtype: other.dtype(),
            })
        }
    })
}

/// A 1-D tensor from a list attribute.
fn list_tensor<T: Elem>(v: Vec<T>) -> Result<Tensor> {
    Tensor::from_vec(&[v.len()], v)
}

/// `values` followed by `default` (same dtype), so a missing key maps to the last element.
fn append_default(values: &Tensor, default: &Tensor) -> Result<Tensor> {
    Ok(map_all!(values, a => {
        let d = typed_like(a, default)?;
        let first = d
            .iter()
            .next()
            .cloned()
            .ok_or_else(|| RefError::op("default_tensor is empty"))?;
        let mut v: Vec<_> = a.iter().cloned().collect();
        v.push(first);
        array_from_vec(&[v.len()], v)?
    }))
}

/// `flat[i]` for every i of `idx` (all in range).
fn pick<T: Clone>(flat: &[T], idx: &[usize]) -> Vec<T> {
    idx.iter().map(|&i| flat[i].clone()).collect()
}

/// Picks `table[idx[i]]` for every i, shaped `shape`.
fn gather_flat(table: &Tensor, idx: &[usize], shape: &[usize]) -> Result<Tensor> {
    Ok(map_all!(table, a => {
        let flat = a
            .as_slice()
            .ok_or_else(|| RefError::op("value table is not contiguous"))?;
        array_from_vec(shape, pick(flat, idx))?
    }))
}

fn label_encoder(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let keys: Vec<Key> = if let Some(s) = ctx.attr_strings("keys_strings") {
        s.into_iter().map(Key::Str).collect()
    } else if let Some(i) = ctx.attr_ints("keys_int64s") {
        i.iter().map(|&v| Key::Int(v)).collect()
    } else if let Some(f) = ctx.attr_floats("keys_floats") {
        f.iter().map(|&v| Key::float(f64::from(v))).collect()
    } else if let Some(t) = ctx.attr_tensor("keys_tensor")? {
        tensor_keys(&t).map_err(err)?
    } else {
        return Err(
            ctx.err("one of keys_strings, keys_int64s, keys_floats, keys_tensor is required")
        );
    };
    let values = if let Some(s) = ctx.attr_strings("values_strings") {
        list_tensor(s)?
    } else if let Some(i) = ctx.attr_ints("values_int64s") {
        list_tensor(i.to_vec())?
    } else if let Some(f) = ctx.attr_floats("values_floats") {
        list_tensor(f.to_vec())?
    } else if let Some(t) = ctx.attr_tensor("values_tensor")? {
        t.reshaped(&[t.len()]).map_err(err)?
    } else {
        return Err(ctx.err(
            "one of values_strings, values_int64s, values_floats, values_tensor is required",
        ));
    };
    if keys.len() != values.len() {
        return Err(ctx.err(format!("{} keys but {} values", keys.len(), values.len())));
    }
    let dtype = values.dtype();
    let default = match ctx.attr_tensor("default_tensor")? {
        Some(t) => super::cast_tensor(&t, dtype).map_err(err)?,
        None if dtype == DType::String => {
            Tensor::scalar(ctx.attr_string("default_string", "_Unused")?)
        }
        None if dtype.is_integer() => {
            super::cast_tensor(&Tensor::scalar(ctx.attr_int("default_int64", -1)?), dtype)
                .map_err(err)?
        }
        None => super::cast_tensor(
            &Tensor::scalar(ctx.attr_float("default_float", -0.0)?),
            dtype,
        )
        .map_err(err)?,
    };
    let table = append_default(&values, &default).map_err(err)?;
    let index: BTreeMap<&Key, usize> = keys.iter().enumerate().rev().map(|(i, k)| (k, i)).collect();
    let input_keys = tensor_keys(x).map_err(err)?;
    if let (Some(k), Some(i)) = (keys.first(), input_keys.first()) {
        if k.kind() != i.kind() {
            return Err(ctx.err(format!(
                "input of type {} cannot match {} keys",
                x.dtype(),
                k.kind()
            )));
        }
    }
    let missing = keys.len();
    let idx: Vec<usize> = input_keys
        .iter()
        .map(|k| index.get(k).copied().unwrap_or(missing))
        .collect();
    one(gather_flat(&table, &idx, x.shape()).map_err(err)?)
}

/// LabelEncoder v1: strings to their index in `classes_strings`, or int64 indices back to
/// strings.
fn label_encoder_v1(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let classes = ctx.attr_strings("classes_strings").unwrap_or_default();
    match x {
        Tensor::Str(a) => {
            let default = ctx.attr_int("default_int64", -1)?;
            let index: BTreeMap<&str, i64> = classes
                .iter()
                .enumerate()
                .rev()
                .map(|(i, c)| (c.as_str(), i as i64))
                .collect();
            one(Tensor::I64(
                a.map(|s| index.get(s.as_str()).copied().unwrap_or(default))
                    .into_shared(),
            ))
        }
        Tensor::I64(a) => {
            let default = ctx.attr_string("default_string", "_Unused")?;
            one(Tensor::Str(
                a.map(|&i| {
                    usize::try_from(i)
                        .ok()
                        .and_then(|i| classes.get(i))
                        .unwrap_or(&default)
                        .clone()
                })
                .into_shared(),
            ))
        }
        other => Err(unsupported(ctx, other)),
    }
}

/// Input 0 as a real numeric tensor of one of the types the ML ops accept (float, double,
/// int64, int32).
fn ml_numeric_input<'v>(ctx: &KernelCtx, inputs: &[Option<&'v Value>]) -> Result<&'v Tensor> {
    let x = ctx.input(inputs, 0)?;
    match x {
        Tensor::F32(_) | Tensor::F64(_) | Tensor::I64(_) | Tensor::I32(_) => Ok(x),
        other => Err(ctx.err(format!(
            "input must be float, double, int64 or int32, got {}",
            other.dtype()
        ))),
    }
}

fn binarizer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ml_numeric_input(ctx, inputs)?;
    let threshold = f64::from(ctx.attr_float("threshold", 0.0)?);
    fn apply<T: Num>(a: &Array<T>, threshold: f64) -> Array<T> {
        a.map(|&v| {
            if v.to_f64() > threshold {
                T::one()
            } else {
                T::zero()
            }
        })
        .into_shared()
    }
    one(map_numeric!(x, a => apply(a, threshold), other => return Err(unsupported(ctx, other))))
}

fn array_feature_extractor(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let indices = ctx.input(inputs, 1)?;
    if !matches!(indices, Tensor::I64(_)) {
        return Err(ctx.err(format!("indices must be int64, got {}", indices.dtype())));
    }
    if x.rank() == 0 {
        return Err(ctx.err("input must have rank >= 1"));
    }
    let last = x.rank() - 1;
    let width = x.shape()[last];
    let idx = indices
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?
        .into_iter()
        .map(|i| {
            usize::try_from(i)
                .ok()
                .filter(|&u| u < width)
                .ok_or_else(|| ctx.err(format!("index {i} is out of range for {width} features")))
        })
        .collect::<Result<Vec<usize>>>()?;
    let mut shape = x.shape().to_vec();
    shape[last] = idx.len();
    if x.rank() == 1 {
        shape.insert(0, 1);
    }
    let picked = map_all!(x, a => a.select(Axis(last), &idx).into_shared());
    one(picked.reshaped(&shape)?)
}

/// Input 0 as f64 rows `[N, C]` (a 1-D input is one row), for the ops that output floats.
fn rows_f64(ctx: &KernelCtx, x: &Tensor) -> Result<(usize, usize, Vec<f64>)> {
    let (n, c) = match x.shape() {
        [c] => (1, *c),
        [n, c] => (*n, *c),
        other => {
            return Err(ctx.err(format!(
                "input must have shape [C] or [N, C], got {other:?}"
            )))
        }
    };
    Ok((
        n,
        c,
        x.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
    ))
}

/// A per-feature parameter list of length 1 (shared) or `c`.
fn per_feature(ctx: &KernelCtx, name: &str, v: &[f32], c: usize, default: f32) -> Result<Vec<f64>> {
    match v.len() {
        0 => Ok(vec![f64::from(default); c]),
        1 => Ok(vec![f64::from(v[0]); c]),
        n if n == c => Ok(v.iter().map(|&x| f64::from(x)).collect()),
        n => Err(ctx.err(format!("{name} has {n} values for {c} features"))),
    }
}

fn f32_tensor(shape: &[usize], v: Vec<f64>) -> Result<Tensor> {
    Tensor::from_vec(shape, v.into_iter().map(|x| x as f32).collect())
}

fn scaler(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ml_numeric_input(ctx, inputs)?;
    let c = x.shape().last().copied().unwrap_or(1);
    let offset = per_feature(
        ctx,
        "offset",
        ctx.attr_floats("offset").unwrap_or_default(),
        c,
        0.0,
    )?;
    let scale = per_feature(
        ctx,
        "scale",
        ctx.attr_floats("scale").unwrap_or_default(),
        c,
        1.0,
    )?;
    let v = x.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let out = v
        .iter()
        .enumerate()
        .map(|(i, &x)| (x - offset[i % c.max(1)]) * scale[i % c.max(1)])
        .collect();
    one(f32_tensor(x.shape(), out)?)
}

fn normalizer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ml_numeric_input(ctx, inputs)?;
    let (_, c, mut v) = rows_f64(ctx, x)?;
    let norm = ctx.attr_string("norm", "MAX")?;
    let measure: fn(&[f64]) -> f64 = match norm.as_str() {
        "MAX" => |r| r.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        "L1" => |r| r.iter().map(|x| x.abs()).sum(),
        "L2" => |r| r.iter().map(|x| x * x).sum::<f64>().sqrt(),
        other => return Err(ctx.err(format!("norm must be MAX, L1 or L2, got '{other}'"))),
    };
    if c > 0 {
        for row in v.chunks_mut(c) {
            let m = measure(row);
            for x in row.iter_mut() {
                *x /= m;
            }
        }
    }
    one(f32_tensor(x.shape(), v)?)
}

fn imputer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ml_numeric_input(ctx, inputs)?;
    let c = x.shape().last().copied().unwrap_or(1).max(1);
    let floats = ctx.attr_floats("imputed_value_floats").unwrap_or_default();
    let ints = ctx.attr_ints("imputed_value_int64s").unwrap_or_default();
    let pick = |len: usize| -> Result<()> {
        if len == 1 || len == c {
            Ok(())
        } else {
            Err(ctx.err(format!("{len} imputed values for {c} features")))
        }
    };
    fn fill<T: Num>(a: &Array<T>, c: usize, replaced: impl Fn(T) -> bool, with: &[T]) -> Array<T> {
        let mut out = a.as_standard_layout().into_owned();
        for (i, v) in out.iter_mut().enumerate() {
            if replaced(*v) {
                *v = with[if with.len() == 1 { 0 } else { i % c }];
            }
        }
        out.into_shared()
    }
    let out = match x {
        Tensor::F32(a) => {
            pick(floats.len())?;
            let r = ctx.attr_float("replaced_value_float", f32::NAN)?;
            Tensor::F32(fill(
                a,
                c,
                |v: f32| v == r || (r.is_nan() && v.is_nan()),
                floats,
            ))
        }
        Tensor::F64(a) => {
            pick(floats.len())?;
            let r = f64::from(ctx.attr_float("replaced_value_float", f32::NAN)?);
            let with: Vec<f64> = floats.iter().map(|&f| f64::from(f)).collect();
            Tensor::F64(fill(
                a,
                c,
                |v: f64| v == r || (r.is_nan() && v.is_nan()),
                &with,
            ))
        }
        Tensor::I64(a) => {
            pick(ints.len())?;
            let r = ctx.attr_int("replaced_value_int64", 0)?;
            Tensor::I64(fill(a, c, |v| v == r, ints))
        }
        Tensor::I32(a) => {
            pick(ints.len())?;
            let r = ctx.attr_int("replaced_value_int64", 0)?;
            let with: Vec<i32> = ints.iter().map(|&i| i as i32).collect();
            Tensor::I32(fill(a, c, |v| i64::from(v) == r, &with))
        }
        other => return Err(unsupported(ctx, other)),
    };
    one(out)
}

fn one_hot_encoder(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let cats: Vec<Key> = if let Some(s) = ctx.attr_strings("cats_strings") {
        s.into_iter().map(Key::Str).collect()
    } else if let Some(i) = ctx.attr_ints("cats_int64s") {
        i.iter().map(|&v| Key::Int(v)).collect()
    } else {
        return Err(ctx.err("one of cats_strings or cats_int64s is required"));
    };
    let zeros = ctx.attr_int("zeros", 1)? != 0;
    let keys: Vec<Key> = match x {
        Tensor::Str(_) | Tensor::I64(_) | Tensor::I32(_) => tensor_keys(x),
        // Float inputs are matched against integer categories by their integer value.
        Tensor::F32(_) | Tensor::F64(_) => Ok(x
            .to_f64_vec()?
            .into_iter()
            .map(|v| Key::Int(v as i64))
            .collect()),
        other => Err(RefError::UnsupportedDType {
            context: "OneHotEncoder input".into(),
            dtype: other.dtype(),
        }),
    }
    .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let index: BTreeMap<&Key, usize> = cats.iter().enumerate().rev().map(|(i, k)| (k, i)).collect();
    let mut shape = x.shape().to_vec();
    shape.push(cats.len());
    check_size("OneHotEncoder output", &shape)?;
    let mut out = vec![0f32; keys.len() * cats.len()];
    for (i, k) in keys.iter().enumerate() {
        match index.get(k) {
            Some(&c) => out[i * cats.len() + c] = 1.0,
            None if zeros => {}
            None => return Err(ctx.err(format!("value {k:?} is not a category and zeros = 0"))),
        }
    }
    one(Tensor::from_vec(&shape, out)?)
}

fn feature_vectorizer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let dims = ctx.attr_ints("inputdimensions").unwrap_or_default();
    if dims.len() != inputs.len() {
        return Err(ctx.err(format!(
            "{} inputs but {} inputdimensions",
            inputs.len(),
            dims.len()
        )));
    }
    let widths = super::to_dims(dims).map_err(|e| e.in_node(&ctx.node_ref()))?;
    let total: usize = widths.iter().sum();
    let mut parts = Vec::with_capacity(inputs.len());
    let mut batch: Option<usize> = None;
    for i in 0..inputs.len() {
        let t = ctx.input(inputs, i)?;
        let n = if t.rank() <= 1 {
            1
        } else {
            t.shape()[..t.rank() - 1].iter().product()
        };
        if batch.is_some_and(|b| b != n) {
            return Err(ctx.err(format!("input {i} has {n} rows, input 0 has {batch:?}")));
        }
        batch = Some(n);
        let c = t.shape().last().copied().unwrap_or(1);
        parts.push((c, t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?));
    }
    let n = batch.unwrap_or(1);
    let mut out = Vec::with_capacity(n * total);
    for r in 0..n {
        for ((c, v), &w) in parts.iter().zip(&widths) {
            // Each input contributes exactly `w` columns: truncated or zero-padded.
            for k in 0..w {
                out.push(if k < *c { v[r * c + k] } else { 0.0 });
            }
        }
    }
    one(f32_tensor(&[n, total], out)?)
}

fn linear_regressor(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ml_numeric_input(ctx, inputs)?;
    let (n, c, v) = rows_f64(ctx, x)?;
    let targets = ctx.attr_int("targets", 1)?;
    let targets = usize::try_from(targets)
        .ok()
        .filter(|&t| t > 0)
        .ok_or_else(|| ctx.err(format!("targets must be positive, got {targets}")))?;
    let coef = ctx.attr_floats("coefficients").unwrap_or_default();
    if coef.len() != targets * c {
        return Err(ctx.err(format!(
            "{} coefficients for {targets} targets of {c} features",
            coef.len()
        )));
    }
    let intercepts = per_feature(
        ctx,
        "intercepts",
        ctx.attr_floats("intercepts").unwrap_or_default(),
        targets,
        0.0,
    )?;
    let transform = ctx.attr_string("post_transform", "NONE")?;
    let mut out = Vec::with_capacity(n * targets);
    for r in 0..n {
        let row = &v[r * c..][..c];
        let mut scores: Vec<f64> = (0..targets)
            .map(|t| {
                let w = &coef[t * c..][..c];
                row.iter()
                    .zip(w)
                    .map(|(a, &b)| a * f64::from(b))
                    .sum::<f64>()
                    + intercepts[t]
            })
            .collect();
        post_transform(&transform, &mut scores).map_err(|e| ctx.err(e))?;
        out.extend(scores);
    }
    one(f32_tensor(&[n, targets], out)?)
}

#[cfg(test)]
mod tests;
