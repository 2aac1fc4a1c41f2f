//! Seeded random inputs for a model: one value per graph input that has no initializer,
//! shaped from the declared type (symbolic dims from a caller-given table, else 1).

use std::collections::{BTreeMap, BTreeSet};

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use onnx_proto::{tensor_shape_proto::dimension, type_proto, ModelProto};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::minifloat;
use crate::tensor::{check_size, Tensor};
use crate::value::Value;

/// Random values for every graph input of `model` that is not also an initializer, from
/// `seed`: floats uniform in [-1, 1], integers in [-5, 5] (unsigned [0, 5]), bools fair,
/// strings short words; sequences of one to three tensors (every sequence of the set as long as
/// the first; elements of undeclared rank vectors of two), optionals present or empty. Symbolic
/// dims take their value from `dims` (by `dim_param` name) or 1. Fails for tensor inputs of
/// unknown rank or of a map or sparse type.
pub fn random_inputs(
    model: &ModelProto,
    seed: u64,
    dims: &BTreeMap<String, i64>,
) -> Result<Vec<(String, Value)>> {
    let graph = model.graph.as_ref().ok_or_else(|| RefError::Graph {
        graph: String::new(),
        reason: "the model has no graph".into(),
    })?;
    let initializers: BTreeSet<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    // Every sequence of one input set has the length the first one draws (ops over several
    // sequences, such as SequenceMap, need them alike).
    let mut seq_len = None;
    for vi in &graph.input {
        let name = vi.name.clone().unwrap_or_default();
        if initializers.contains(name.as_str()) {
            continue;
        }
        let err = |reason: &str| RefError::Input {
            input: name.clone(),
            reason: reason.to_string(),
        };
        let v = random_value(
            &mut rng,
            vi.r#type.as_ref(),
            dims,
            &name,
            &err,
            &mut seq_len,
        )?;
        out.push((name, v));
    }
    Ok(out)
}

/// A random value of a declared type: a tensor; a sequence of one to three tensors (of the
/// same shape, so a concatenation or stack of them works; `[2]` where the elements' rank is
/// not declared; as long as the set's other sequences, `seq_len`); an optional, present or
/// empty.
fn random_value(
    rng: &mut ChaCha8Rng,
    ty: Option<&onnx_proto::TypeProto>,
    dims: &BTreeMap<String, i64>,
    name: &str,
    err: &dyn Fn(&str) -> RefError,
    seq_len: &mut Option<usize>,
) -> Result<Value> {
    match ty.and_then(|t| t.value.as_ref()) {
        Some(type_proto::Value::TensorType(tt)) => {
            let dtype = tt
                .elem_type
                .and_then(DType::from_code)
                .ok_or_else(|| err("unknown element type"))?;
            let shape_proto = tt.shape.as_ref().ok_or_else(|| err("unknown rank"))?;
            let mut shape = Vec::with_capacity(shape_proto.dim.len());
            for d in &shape_proto.dim {
                let v = match &d.value {
                    // A declared -1 is an unknown dim (some exporters write it).
                    Some(dimension::Value::DimValue(-1)) => 1,
                    Some(dimension::Value::DimValue(v)) => *v,
                    Some(dimension::Value::DimParam(p)) => dims.get(p).copied().unwrap_or(1),
                    None => 1,
                };
                if v < 0 {
                    return Err(err(&format!("negative dimension {v}")));
                }
                shape.push(v as usize);
            }
            check_size(name, &shape)?;
            Ok(Value::Tensor(random_tensor(rng, dtype, &shape)?))
        }
        Some(type_proto::Value::SequenceType(st)) => {
            let elem = st.elem_type.as_deref();
            let elem_dtype = match elem.and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(tt)) => tt.elem_type.and_then(DType::from_code),
                _ => None,
            };
            let n = *seq_len.get_or_insert_with(|| rng.random_range(1..=3usize));
            // Elements of undeclared rank: vectors of two.
            let shaped = match elem.and_then(|t| t.value.as_ref()) {
                Some(type_proto::Value::TensorType(tt)) if tt.shape.is_none() => {
                    let mut tt = tt.clone();
                    tt.shape = Some(onnx_proto::TensorShapeProto {
                        dim: vec![onnx_proto::tensor_shape_proto::Dimension {
                            value: Some(dimension::Value::DimValue(2)),
                            ..Default::default()
                        }],
                    });
                    Some(onnx_proto::TypeProto {
                        value: Some(type_proto::Value::TensorType(tt)),
                        ..Default::default()
                    })
                }
                _ => None,
            };
            let elem = shaped.as_ref().or(elem);
            let items = (0..n)
                .map(|_| random_value(rng, elem, dims, name, err, seq_len))
                .collect::<Result<Vec<_>>>()?;
            Ok(Value::Sequence(crate::value::Sequence {
                elem_dtype,
                items,
            }))
        }
        Some(type_proto::Value::OptionalType(ot)) => {
            if rng.random_bool(0.5) {
                let v = random_value(rng, ot.elem_type.as_deref(), dims, name, err, seq_len)?;
                Ok(Value::Optional(Some(Box::new(v))))
            } else {
                Ok(Value::Optional(None))
            }
        }
        _ => Err(err(
            "only tensor, sequence and optional inputs can be generated",
        )),
    }
}

/// A random tensor of `dtype` and `shape`.
pub fn random_tensor(rng: &mut impl Rng, dtype: DType, shape: &[usize]) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let mut float =
        |n: usize| -> Vec<f64> { (0..n).map(|_| rng.random_range(-1.0..=1.0)).collect() };
    Ok(match dtype {
        DType::Float => Tensor::from_vec(shape, float(n).into_iter().map(|x| x as f32).collect())?,
        DType::Double => Tensor::from_vec(shape, float(n))?,
        DType::Float16 => {
            Tensor::from_vec(shape, float(n).into_iter().map(f16::from_f64).collect())?
        }
        DType::Bfloat16 => {
            Tensor::from_vec(shape, float(n).into_iter().map(bf16::from_f64).collect())?
        }
        DType::Complex64 => {
            let v = float(2 * n);
            Tensor::from_vec(
                shape,
                v.chunks_exact(2)
                    .map(|c| Complex32::new(c[0] as f32, c[1] as f32))
                    .collect(),
            )?
        }
        DType::Complex128 => {
            let v = float(2 * n);
            Tensor::from_vec(
                shape,
                v.chunks_exact(2)
                    .map(|c| Complex64::new(c[0], c[1]))
                    .collect(),
            )?
        }
        DType::Bool => Tensor::from_vec(shape, (0..n).map(|_| rng.random_bool(0.5)).collect())?,
        DType::String => {
            let words = ["a", "bb", "ccc", "onnx", ""];
            Tensor::from_vec(
                shape,
                (0..n)
                    .map(|_| words[rng.random_range(0..words.len())].to_string())
                    .collect(),
            )?
        }
        DType::Int8 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(-5..=5i8)).collect())?
        }
        DType::Int16 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(-5..=5i16)).collect())?
        }
        DType::Int32 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(-5..=5i32)).collect())?
        }
        DType::Int64 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(-5..=5i64)).collect())?
        }
        DType::Uint8 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(0..=5u8)).collect())?
        }
        DType::Uint16 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(0..=5u16)).collect())?
        }
        DType::Uint32 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(0..=5u32)).collect())?
        }
        DType::Uint64 => {
            Tensor::from_vec(shape, (0..n).map(|_| rng.random_range(0..=5u64)).collect())?
        }
        coded if coded.is_integer() => {
            let (lo, hi) = match coded {
                DType::Int4 => (-8, 7),
                DType::Int2 => (-2, 1),
                DType::Uint4 => (0, 15),
                _ => (0, 3),
            };
            let codes = (0..n)
                .map(|_| minifloat::i64_to_coded(coded, rng.random_range(lo..=hi)))
                .collect();
            Tensor::from_codes(coded, shape, codes)?
        }
        coded => {
            let codes = float(n)
                .into_iter()
                .map(|x| minifloat::f32_to_coded(coded, x as f32, true))
                .collect();
            Tensor::from_codes(coded, shape, codes)?
        }
    })
}
