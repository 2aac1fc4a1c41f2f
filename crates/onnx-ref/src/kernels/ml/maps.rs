//! The `ai.onnx.ml` ops on maps and categories (opset 1): ZipMap (score rows to a sequence of
//! label -> score maps), CategoryMapper (strings <-> int64 by two parallel lists),
//! DictVectorizer (a map to a dense row over a vocabulary) and CastMap (an int64-keyed map to
//! a dense or sparse row, cast to float, int64 or string).
//!
//! Maps are `Value::Map` with a rank-1 key tensor and one scalar tensor per value. Maps this
//! module builds have their keys sorted ascending (a repeated key keeps its last value), as
//! onnxruntime's `std::map` does, so output is deterministic.

use std::collections::BTreeMap;

use super::classifier::ClassLabels;
use super::ML;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::kernels::one;
use crate::tensor::Tensor;
use crate::value::{MapValue, Sequence, Value};

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(ML, "ZipMap", 1, 5, zip_map);
    reg.register(ML, "CategoryMapper", 1, 5, category_mapper);
    reg.register(ML, "DictVectorizer", 1, 5, dict_vectorizer);
    reg.register(ML, "CastMap", 1, 5, cast_map);
}

/// A map with scalar float values from sorted (key, value) pairs.
fn float_map<K: crate::tensor::Elem>(entries: BTreeMap<K, f32>) -> Result<Value> {
    let (keys, values): (Vec<K>, Vec<f32>) = entries.into_iter().unzip();
    Ok(Value::Map(MapValue {
        keys: Tensor::from_vec(&[keys.len()], keys)?,
        values: values
            .into_iter()
            .map(|v| Value::Tensor(Tensor::scalar(v)))
            .collect(),
    }))
}

fn zip_map(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let Tensor::F32(a) = x else {
        return Err(ctx.err(format!("input must be float, got {}", x.dtype())));
    };
    let (rows, width) = match x.shape() {
        [c] => (1, *c),
        [n, c] => (*n, *c),
        other => return Err(ctx.err(format!("input must be [C] or [N, C], got {other:?}"))),
    };
    let labels = ClassLabels::read(ctx, "classlabels_int64s")?;
    if labels.len() == 0 {
        return Err(ctx.err("one of classlabels_strings, classlabels_int64s is required"));
    }
    if labels.len() != width {
        return Err(ctx.err(format!(
            "{width} scores per row but {} class labels",
            labels.len()
        )));
    }
    let scores: Vec<f32> = a.iter().copied().collect();
    let mut maps = Vec::with_capacity(rows);
    for row in scores.chunks_exact(width.max(1)).take(rows) {
        maps.push(match &labels {
            ClassLabels::Ints(keys) => {
                float_map(keys.iter().copied().zip(row.iter().copied()).collect())?
            }
            ClassLabels::Strings(keys) => {
                float_map(keys.iter().cloned().zip(row.iter().copied()).collect())?
            }
        });
    }
    Ok(vec![Value::Sequence(Sequence {
        elem_dtype: None,
        items: maps,
    })])
}

fn category_mapper(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let strings = ctx.attr_strings("cats_strings").unwrap_or_default();
    let ints = ctx.attr_ints("cats_int64s").unwrap_or_default();
    if strings.len() != ints.len() {
        return Err(ctx.err(format!(
            "{} cats_strings but {} cats_int64s",
            strings.len(),
            ints.len()
        )));
    }
    match x {
        Tensor::Str(a) => {
            let default = ctx.attr_int("default_int64", -1)?;
            // The first occurrence of a repeated category wins.
            let index: BTreeMap<&str, i64> = strings
                .iter()
                .zip(ints)
                .rev()
                .map(|(s, &i)| (s.as_str(), i))
                .collect();
            one(Tensor::I64(
                a.map(|s| index.get(s.as_str()).copied().unwrap_or(default))
                    .into_shared(),
            ))
        }
        Tensor::I64(a) => {
            let default = ctx.attr_string("default_string", "_Unused")?;
            let index: BTreeMap<i64, &String> = ints.iter().copied().zip(&strings).rev().collect();
            one(Tensor::Str(
                a.map(|i| {
                    index
                        .get(i)
                        .map_or_else(|| default.clone(), |s| (*s).clone())
                })
                .into_shared(),
            ))
        }
        other => Err(ctx.err(format!(
            "input must be string or int64, got {}",
            other.dtype()
        ))),
    }
}

/// Input 0 as a map.
fn map_input<'v>(ctx: &KernelCtx, inputs: &[Option<&'v Value>]) -> Result<&'v MapValue> {
    match inputs.first().copied().flatten() {
        Some(Value::Map(m)) => Ok(m),
        Some(other) => Err(ctx.err(format!("input 0 must be a map, found {}", other.kind()))),
        None => Err(ctx.err("required input 0 is missing")),
    }
}

/// The single element of a map value, as a rank-0 tensor.
fn map_scalar<'v>(ctx: &KernelCtx, v: &'v Value) -> Result<&'v Tensor> {
    match v {
        Value::Tensor(t) if t.len() == 1 => Ok(t),
        other => Err(ctx.err(format!(
            "map values must be scalars, found {}",
            other.kind()
        ))),
    }
}

/// A map's values as one rank-1 tensor of their common type (`fallback` for an empty map).
fn map_values(ctx: &KernelCtx, m: &MapValue, fallback: DType) -> Result<Tensor> {
    let scalars = m
        .values
        .iter()
        .map(|v| map_scalar(ctx, v))
        .collect::<Result<Vec<&Tensor>>>()?;
    let dtype = scalars.first().map_or(fallback, |t| t.dtype());
    if let Some(t) = scalars.iter().find(|t| t.dtype() != dtype) {
        return Err(ctx.err(format!("map values mix {dtype} and {}", t.dtype())));
    }
    let n = scalars.len();
    Ok(match dtype {
        DType::String => Tensor::from_vec(
            &[n],
            scalars
                .iter()
                .map(|t| {
                    t.as_array::<String>()
                        .and_then(|a| a.iter().next().cloned())
                        .unwrap_or_default()
                })
                .collect(),
        )?,
        DType::Int64 => {
            let mut v = Vec::with_capacity(n);
            for t in &scalars {
                v.extend(t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?);
            }
            Tensor::from_vec(&[n], v)?
        }
        DType::Float | DType::Double => {
            let mut v = Vec::with_capacity(n);
            for t in &scalars {
                v.extend(t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?);
            }
            if dtype == DType::Float {
                Tensor::from_vec(&[n], v.into_iter().map(|x| x as f32).collect())?
            } else {
                Tensor::from_vec(&[n], v)?
            }
        }
        other => {
            return Err(ctx.err(format!(
                "map values must be int64, float, double or string, found {other}"
            )))
        }
    })
}

/// `values[slot[i]]` at position i, or the type's zero (empty string) where `slot[i]` is None.
fn scatter(values: &Tensor, slots: &[Option<usize>], width: usize) -> Result<Tensor> {
    fn pick<T: Clone + Default>(v: &[T], slots: &[Option<usize>]) -> Vec<T> {
        slots
            .iter()
            .map(|s| s.and_then(|i| v.get(i)).cloned().unwrap_or_default())
            .collect()
    }
    let shape = [1, width];
    match values {
        Tensor::Str(a) => {
            Tensor::from_vec(&shape, pick(&a.iter().cloned().collect::<Vec<_>>(), slots))
        }
        Tensor::I64(a) => {
            Tensor::from_vec(&shape, pick(&a.iter().copied().collect::<Vec<_>>(), slots))
        }
        Tensor::F32(a) => {
            Tensor::from_vec(&shape, pick(&a.iter().copied().collect::<Vec<_>>(), slots))
        }
        Tensor::F64(a) => {
            Tensor::from_vec(&shape, pick(&a.iter().copied().collect::<Vec<_>>(), slots))
        }
        other => Err(crate::error::RefError::op(format!(
            "cannot scatter {} values",
            other.dtype()
        ))),
    }
}

fn dict_vectorizer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let m = map_input(ctx, inputs)?;
    let values = map_values(ctx, m, DType::Float)?;
    let strings = ctx.attr_strings("string_vocabulary").unwrap_or_default();
    let ints = ctx.attr_ints("int64_vocabulary").unwrap_or_default();
    // Position of each map entry in the vocabulary (keys outside it are dropped).
    let positions: Vec<Option<usize>> = match (&m.keys, strings.is_empty(), ints.is_empty()) {
        (Tensor::Str(keys), false, true) => {
            let vocab: BTreeMap<&str, usize> = strings
                .iter()
                .enumerate()
                .rev()
                .map(|(i, s)| (s.as_str(), i))
                .collect();
            keys.iter()
                .map(|k| vocab.get(k.as_str()).copied())
                .collect()
        }
        (Tensor::I64(keys), true, false) => {
            let vocab: BTreeMap<i64, usize> = ints
                .iter()
                .enumerate()
                .rev()
                .map(|(i, &k)| (k, i))
                .collect();
            keys.iter().map(|k| vocab.get(k).copied()).collect()
        }
        (keys, _, _) => {
            return Err(ctx.err(format!(
                "needs exactly one of string_vocabulary ({} entries) and int64_vocabulary ({} \
                 entries), matching the {} map keys",
                strings.len(),
                ints.len(),
                keys.dtype()
            )))
        }
    };
    let width = strings.len().max(ints.len());
    let mut slots = vec![None; width];
    for (entry, pos) in positions.into_iter().enumerate() {
        if let Some(p) = pos {
            slots[p] = Some(entry);
        }
    }
    one(scatter(&values, &slots, width).map_err(|e| e.in_node(&ctx.node_ref()))?)
}

/// What CastMap casts the map values to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CastTo {
    Float,
    Int64,
    Str,
}

/// A float as C++ `std::to_string` prints it (`%f`).
fn float_string(v: f32) -> String {
    if v.is_nan() {
        if v.is_sign_negative() { "-nan" } else { "nan" }.to_string()
    } else {
        format!("{v:.6}")
    }
}

fn cast_map(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let m = map_input(ctx, inputs)?;
    let Tensor::I64(keys) = &m.keys else {
        return Err(ctx.err(format!("map keys must be int64, found {}", m.keys.dtype())));
    };
    let cast_to = match ctx.attr_string("cast_to", "TO_FLOAT")?.as_str() {
        "TO_FLOAT" => CastTo::Float,
        "TO_INT64" => CastTo::Int64,
        "TO_STRING" => CastTo::Str,
        other => {
            return Err(ctx.err(format!(
                "cast_to must be TO_FLOAT, TO_STRING or TO_INT64, got '{other}'"
            )))
        }
    };
    let sparse = match ctx.attr_string("map_form", "DENSE")?.as_str() {
        "DENSE" => false,
        "SPARSE" => true,
        other => return Err(ctx.err(format!("map_form must be DENSE or SPARSE, got '{other}'"))),
    };
    let values = map_values(ctx, m, DType::Float)?;
    let cast_err = |s: &str| ctx.err(format!("map value '{s}' is not a number"));
    let converted: Tensor = match (&values, cast_to) {
        (Tensor::F32(a), CastTo::Float) => Tensor::F32(a.clone()),
        (Tensor::F32(a), CastTo::Int64) => {
            Tensor::from_vec(&[a.len()], a.iter().map(|&v| v as i64).collect())?
        }
        (Tensor::F32(a), CastTo::Str) => {
            Tensor::from_vec(&[a.len()], a.iter().map(|&v| float_string(v)).collect())?
        }
        (Tensor::Str(a), CastTo::Float) => Tensor::from_vec(
            &[a.len()],
            a.iter()
                .map(|s| s.trim().parse::<f32>().map_err(|_| cast_err(s)))
                .collect::<Result<Vec<f32>>>()?,
        )?,
        (Tensor::Str(a), CastTo::Int64) => Tensor::from_vec(
            &[a.len()],
            a.iter()
                .map(|s| s.trim().parse::<i64>().map_err(|_| cast_err(s)))
                .collect::<Result<Vec<i64>>>()?,
        )?,
        (Tensor::Str(a), CastTo::Str) => Tensor::Str(a.clone()),
        (other, _) => {
            return Err(ctx.err(format!(
                "map values must be float or string, found {}",
                other.dtype()
            )))
        }
    };
    // Entries in ascending key order, as the map type defines them.
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let key_list: Vec<i64> = keys.iter().copied().collect();
    order.sort_by_key(|&i| key_list[i]);
    let slots: Vec<Option<usize>> = if sparse {
        let max_map = ctx.attr_int("max_map", 1)?;
        let width = usize::try_from(max_map)
            .map_err(|_| ctx.err(format!("max_map must be >= 0, got {max_map}")))?;
        if let Some(&k) = key_list.iter().find(|&&k| k < 0) {
            return Err(ctx.err(format!("SPARSE map_form needs keys >= 0, found {k}")));
        }
        let mut slots = vec![None; width];
        for &i in &order {
            if let Some(slot) = usize::try_from(key_list[i])
                .ok()
                .and_then(|k| slots.get_mut(k))
            {
                *slot = Some(i);
            }
        }
        slots
    } else {
        order.iter().map(|&i| Some(i)).collect()
    };
    let width = slots.len();
    let out = if cast_to == CastTo::Str && slots.iter().any(Option::is_none) {
        // Absent keys of a sparse string row read "0.f", as onnxruntime pads them.
        let Tensor::Str(a) = &converted else {
            return Err(ctx.err("string cast produced no strings"));
        };
        let v: Vec<String> = slots
            .iter()
            .map(|s| {
                s.and_then(|i| a.get(i))
                    .cloned()
                    .unwrap_or_else(|| "0.f".into())
            })
            .collect();
        Tensor::from_vec(&[1, width], v)?
    } else {
        scatter(&converted, &slots, width).map_err(|e| e.in_node(&ctx.node_ref()))?
    };
    one(out)
}
