//! Reading the values of small constant tensors (shape inputs, axes, pads, scales, Range bounds)
//! from `TensorProto`s, in every encoding ONNX allows (typed fields or little-endian
//! `raw_data`), and the tensor a `Constant` node denotes.
//!
//! Decoding is bounded: tensors with more than [`MAX_DECODED`] elements, external data or an
//! inconsistent element count read as "not known" (`None`), never as an error or a panic.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::{AttributeProto, TensorProto};

use super::dims::SymDim;

/// The largest tensor whose values inference reads.
pub(crate) const MAX_DECODED: usize = 1 << 20;

/// The number of elements the tensor's dims describe; `None` for negative dims or overflow.
pub(crate) fn element_count(t: &TensorProto) -> Option<usize> {
    t.dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

fn is_external(t: &TensorProto) -> bool {
    t.data_location == Some(1)
}

fn data_type(t: &TensorProto) -> Option<DataType> {
    DataType::try_from(t.data_type?).ok()
}

fn raw_chunks<const N: usize>(t: &TensorProto, n: usize) -> Option<Vec<[u8; N]>> {
    let raw = t.raw_data.as_ref()?;
    if raw.len() != n.checked_mul(N)? {
        return None;
    }
    Some(
        raw.chunks_exact(N)
            .filter_map(|c| <[u8; N]>::try_from(c).ok())
            .collect(),
    )
}

/// The values of an integer or bool tensor as i64; `None` for other types, external data, big
/// tensors or bad encodings. uint64 values above `i64::MAX` make it `None`.
pub(crate) fn tensor_ints(t: &TensorProto) -> Option<Vec<i64>> {
    if is_external(t) {
        return None;
    }
    let n = element_count(t)?;
    if n > MAX_DECODED {
        return None;
    }
    let has_raw = t.raw_data.is_some();
    let values: Vec<i64> = match data_type(t)? {
        DataType::Int64 if has_raw => raw_chunks::<8>(t, n)?
            .into_iter()
            .map(i64::from_le_bytes)
            .collect(),
        DataType::Int64 => t.int64_data.clone(),
        DataType::Int32 if has_raw => raw_chunks::<4>(t, n)?
            .into_iter()
            .map(|b| i64::from(i32::from_le_bytes(b)))
            .collect(),
        DataType::Int16 if has_raw => raw_chunks::<2>(t, n)?
            .into_iter()
            .map(|b| i64::from(i16::from_le_bytes(b)))
            .collect(),
        DataType::Uint16 if has_raw => raw_chunks::<2>(t, n)?
            .into_iter()
            .map(|b| i64::from(u16::from_le_bytes(b)))
            .collect(),
        DataType::Int8 if has_raw => raw_chunks::<1>(t, n)?
            .into_iter()
            .map(|b| i64::from(i8::from_le_bytes(b)))
            .collect(),
        DataType::Uint8 | DataType::Bool if has_raw => raw_chunks::<1>(t, n)?
            .into_iter()
            .map(|b| i64::from(b[0]))
            .collect(),
        DataType::Int32
        | DataType::Int16
        | DataType::Uint16
        | DataType::Int8
        | DataType::Uint8
        | DataType::Bool => t.int32_data.iter().map(|&v| i64::from(v)).collect(),
        DataType::Uint32 if has_raw => raw_chunks::<4>(t, n)?
            .into_iter()
            .map(|b| i64::from(u32::from_le_bytes(b)))
            .collect(),
        DataType::Uint64 if has_raw => raw_chunks::<8>(t, n)?
            .into_iter()
            .map(|b| i64::try_from(u64::from_le_bytes(b)).ok())
            .collect::<Option<_>>()?,
        DataType::Uint32 | DataType::Uint64 => t
            .uint64_data
            .iter()
            .map(|&v| i64::try_from(v).ok())
            .collect::<Option<_>>()?,
        _ => return None,
    };
    (values.len() == n).then_some(values)
}

fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((bits >> 10) & 0x1f);
    let frac = f64::from(bits & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn bf16_to_f64(bits: u16) -> f64 {
    f64::from(f32::from_bits(u32::from(bits) << 16))
}

/// The values of a numeric tensor as f64 (floats, float16, bfloat16, double, and integers);
/// `None` for other types, external data, big tensors or bad encodings.
pub(crate) fn tensor_floats(t: &TensorProto) -> Option<Vec<f64>> {
    if is_external(t) {
        return None;
    }
    let n = element_count(t)?;
    if n > MAX_DECODED {
        return None;
    }
    let has_raw = t.raw_data.is_some();
    let values: Vec<f64> = match data_type(t)? {
        DataType::Float if has_raw => raw_chunks::<4>(t, n)?
            .into_iter()
            .map(|b| f64::from(f32::from_le_bytes(b)))
            .collect(),
        DataType::Float => t.float_data.iter().map(|&v| f64::from(v)).collect(),
        DataType::Double if has_raw => raw_chunks::<8>(t, n)?
            .into_iter()
            .map(f64::from_le_bytes)
            .collect(),
        DataType::Double => t.double_data.clone(),
        DataType::Float16 | DataType::Bfloat16 => {
            let bits: Vec<u16> = if has_raw {
                raw_chunks::<2>(t, n)?
                    .into_iter()
                    .map(u16::from_le_bytes)
                    .collect()
            } else {
                t.int32_data
                    .iter()
                    .map(|&v| u16::try_from(v).ok())
                    .collect::<Option<_>>()?
            };
            let convert = if data_type(t)? == DataType::Float16 {
                f16_to_f64
            } else {
                bf16_to_f64
            };
            bits.into_iter().map(convert).collect()
        }
        _ => {
            // Integers are exact in f64 up to 2^53, far beyond any size inference reads.
            #[allow(clippy::cast_precision_loss)]
            let ints = tensor_ints(t)?.into_iter().map(|v| v as f64).collect();
            ints
        }
    };
    (values.len() == n).then_some(values)
}

/// The values of a tensor of rank 0 or 1 as symbolic scalars, when it is an integer tensor.
pub(crate) fn tensor_sym_values(t: &TensorProto) -> Option<Vec<SymDim>> {
    if t.dims.len() > 1 {
        return None;
    }
    Some(tensor_ints(t)?.into_iter().map(SymDim::Known).collect())
}

fn scalar_or_vector(data_type: DataType, dims: Vec<i64>) -> TensorProto {
    TensorProto {
        dims,
        data_type: Some(data_type as i32),
        ..Default::default()
    }
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The tensor a `Constant` node's attributes denote (`value`, `value_float(s)`, `value_int(s)`,
/// `value_string(s)`); `None` for `sparse_value` or no value attribute.
pub(crate) fn constant_attribute_value(attrs: &[AttributeProto]) -> Option<TensorProto> {
    for attr in attrs {
        let tensor = match attr.name.as_deref()? {
            "value" => attr.t.clone()?,
            "value_float" => TensorProto {
                float_data: vec![attr.f?],
                ..scalar_or_vector(DataType::Float, vec![])
            },
            "value_floats" => TensorProto {
                float_data: attr.floats.clone(),
                ..scalar_or_vector(DataType::Float, vec![len_i64(attr.floats.len())])
            },
            "value_int" => TensorProto {
                int64_data: vec![attr.i?],
                ..scalar_or_vector(DataType::Int64, vec![])
            },
            "value_ints" => TensorProto {
                int64_data: attr.ints.clone(),
                ..scalar_or_vector(DataType::Int64, vec![len_i64(attr.ints.len())])
            },
            "value_string" => TensorProto {
                string_data: vec![attr.s.clone()?],
                ..scalar_or_vector(DataType::String, vec![])
            },
            "value_strings" => TensorProto {
                string_data: attr.strings.clone(),
                ..scalar_or_vector(DataType::String, vec![len_i64(attr.strings.len())])
            },
            _ => continue,
        };
        return Some(tensor);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(data_type: DataType, dims: Vec<i64>, bytes: Vec<u8>) -> TensorProto {
        TensorProto {
            dims,
            data_type: Some(data_type as i32),
            raw_data: Some(bytes.into()),
            ..Default::default()
        }
    }

    #[test]
    fn reads_ints_from_raw_and_typed_fields() {
        let t = raw(
            DataType::Int64,
            vec![2],
            [3i64, -1].iter().flat_map(|v| v.to_le_bytes()).collect(),
        );
        assert_eq!(tensor_ints(&t), Some(vec![3, -1]));
        let t = raw(DataType::Int32, vec![], 7i32.to_le_bytes().to_vec());
        assert_eq!(tensor_ints(&t), Some(vec![7]));
        let typed = TensorProto {
            dims: vec![3],
            data_type: Some(DataType::Int32 as i32),
            int32_data: vec![1, 2, 3],
            ..Default::default()
        };
        assert_eq!(tensor_ints(&typed), Some(vec![1, 2, 3]));
        // Wrong byte count or a count that disagrees with dims: not known.
        let short = raw(DataType::Int64, vec![2], vec![0; 12]);
        assert_eq!(tensor_ints(&short), None);
        let mismatch = TensorProto {
            dims: vec![4],
            ..typed
        };
        assert_eq!(tensor_ints(&mismatch), None);
        let negative = raw(DataType::Int64, vec![-1], vec![]);
        assert_eq!(tensor_ints(&negative), None);
    }

    #[test]
    fn reads_floats_of_every_float_type() {
        let t = raw(
            DataType::Float16,
            vec![2],
            [0x3c00u16, 0xc000]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        assert_eq!(tensor_floats(&t), Some(vec![1.0, -2.0]));
        let t = raw(
            DataType::Bfloat16,
            vec![1],
            0x3fc0u16.to_le_bytes().to_vec(),
        );
        assert_eq!(tensor_floats(&t), Some(vec![1.5]));
        let t = TensorProto {
            dims: vec![1],
            data_type: Some(DataType::Float as i32),
            float_data: vec![0.5],
            ..Default::default()
        };
        assert_eq!(tensor_floats(&t), Some(vec![0.5]));
        let strings = TensorProto {
            dims: vec![1],
            data_type: Some(DataType::String as i32),
            string_data: vec![b"a".to_vec().into()],
            ..Default::default()
        };
        assert_eq!(tensor_floats(&strings), None);
    }
}
