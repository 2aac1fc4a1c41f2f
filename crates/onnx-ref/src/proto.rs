//! Conversions between `Tensor`/`Value` and the ONNX protobuf messages (`TensorProto`,
//! `SequenceProto`, `OptionalProto`, `MapProto`), validating everything untrusted data can get
//! wrong: element counts, negative or absurd dims, unknown types, external data.

use bytes::Bytes;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use onnx_proto::{MapProto, OptionalProto, SequenceProto, TensorProto};

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::minifloat;
use crate::tensor::{array_from_vec, Array, Tensor, MAX_ELEMENTS};
use crate::value::{MapValue, Sequence, Value};

fn invalid(name: &str, reason: impl Into<String>) -> RefError {
    RefError::InvalidTensor {
        tensor: name.to_string(),
        reason: reason.into(),
    }
}

/// Validated dims of a tensor proto: non-negative, element count within `MAX_ELEMENTS`.
fn proto_shape(name: &str, dims: &[i64]) -> Result<(Vec<usize>, usize)> {
    let mut n: u128 = 1;
    for &d in dims {
        if d < 0 {
            return Err(invalid(
                name,
                format!("negative dimension {d} in dims {dims:?}"),
            ));
        }
        n = n.saturating_mul(d as u128);
    }
    if n > MAX_ELEMENTS as u128 {
        return Err(RefError::TooLarge {
            tensor: name.to_string(),
            shape: dims.to_vec(),
            elements: n,
            limit: MAX_ELEMENTS,
        });
    }
    Ok((dims.iter().map(|&d| d as usize).collect(), n as usize))
}

fn from_le<T, const N: usize>(raw: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    raw.chunks_exact(N)
        .map(|c| {
            let mut b = [0u8; N];
            b.copy_from_slice(c);
            f(b)
        })
        .collect()
}

fn check_len(name: &str, field: &str, got: usize, want: usize) -> Result<()> {
    if got != want {
        return Err(invalid(
            name,
            format!("{field} has {got} entries, expected {want}"),
        ));
    }
    Ok(())
}

impl Tensor {
    /// Decodes a `TensorProto` (from `raw_data` or the typed field for its type).
    pub fn from_proto(t: &TensorProto) -> Result<Tensor> {
        let name = t.name.as_deref().unwrap_or("");
        if onnx_proto::is_external(t) {
            return Err(RefError::ExternalData {
                tensor: name.to_string(),
            });
        }
        let code = t.data_type.unwrap_or(0);
        let dtype = DType::from_code(code).ok_or_else(|| RefError::UnknownDType {
            tensor: name.to_string(),
            code,
        })?;
        let (shape, n) = proto_shape(name, &t.dims)?;
        match t.raw_data.as_ref() {
            Some(raw) if !raw.is_empty() && dtype != DType::String => {
                decode_raw(name, dtype, &shape, n, raw)
            }
            _ => decode_typed(name, dtype, &shape, n, t),
        }
    }

    /// Encodes as a `TensorProto` named `name`: `raw_data` for numeric types, `string_data`
    /// for strings.
    pub fn to_proto(&self, name: &str) -> TensorProto {
        let dtype = self.dtype();
        let mut p = TensorProto {
            name: Some(name.to_string()),
            data_type: Some(dtype.code()),
            dims: self.shape().iter().map(|&d| d as i64).collect(),
            ..Default::default()
        };
        fn le<T: Clone, const N: usize>(a: &Array<T>, f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
            let mut out = Vec::with_capacity(a.len() * N);
            for x in a.iter() {
                out.extend_from_slice(&f(x.clone()));
            }
            out
        }
        let raw: Vec<u8> = match self {
            Tensor::Str(a) => {
                p.string_data = a
                    .iter()
                    .map(|s| Bytes::from(s.clone().into_bytes()))
                    .collect();
                return p;
            }
            Tensor::F32(a) => le(a, f32::to_le_bytes),
            Tensor::F64(a) => le(a, f64::to_le_bytes),
            Tensor::F16(a) => le(a, |x: f16| x.to_bits().to_le_bytes()),
            Tensor::BF16(a) => le(a, |x: bf16| x.to_bits().to_le_bytes()),
            Tensor::I8(a) => le(a, i8::to_le_bytes),
            Tensor::I16(a) => le(a, i16::to_le_bytes),
            Tensor::I32(a) => le(a, i32::to_le_bytes),
            Tensor::I64(a) => le(a, i64::to_le_bytes),
            Tensor::U8(a) => le(a, u8::to_le_bytes),
            Tensor::U16(a) => le(a, u16::to_le_bytes),
            Tensor::U32(a) => le(a, u32::to_le_bytes),
            Tensor::U64(a) => le(a, u64::to_le_bytes),
            Tensor::Bool(a) => le(a, |b: bool| [b as u8]),
            Tensor::C64(a) => le(a, |c: Complex32| {
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&c.re.to_le_bytes());
                b[4..].copy_from_slice(&c.im.to_le_bytes());
                b
            }),
            Tensor::C128(a) => le(a, |c: Complex64| {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&c.re.to_le_bytes());
                b[8..].copy_from_slice(&c.im.to_le_bytes());
                b
            }),
            Tensor::Coded(d, a) => minifloat::pack_bits(a.iter().copied(), d.bit_width(), a.len()),
        };
        p.raw_data = Some(Bytes::from(raw));
        p
    }
}

fn decode_raw(name: &str, dtype: DType, shape: &[usize], n: usize, raw: &[u8]) -> Result<Tensor> {
    let want = dtype
        .raw_len(n)
        .ok_or_else(|| invalid(name, "byte length overflows"))?;
    if raw.len() != want {
        return Err(invalid(
            name,
            format!(
                "raw_data has {} bytes, expected {want} for {n} elements of {dtype}",
                raw.len()
            ),
        ));
    }
    Ok(match dtype {
        DType::Float => Tensor::F32(array_from_vec(shape, from_le(raw, f32::from_le_bytes))?),
        DType::Double => Tensor::F64(array_from_vec(shape, from_le(raw, f64::from_le_bytes))?),
        DType::Float16 => Tensor::F16(array_from_vec(
            shape,
            from_le(raw, |b| f16::from_bits(u16::from_le_bytes(b))),
        )?),
        DType::Bfloat16 => Tensor::BF16(array_from_vec(
            shape,
            from_le(raw, |b| bf16::from_bits(u16::from_le_bytes(b))),
        )?),
        DType::Int8 => Tensor::I8(array_from_vec(shape, from_le(raw, i8::from_le_bytes))?),
        DType::Int16 => Tensor::I16(array_from_vec(shape, from_le(raw, i16::from_le_bytes))?),
        DType::Int32 => Tensor::I32(array_from_vec(shape, from_le(raw, i32::from_le_bytes))?),
        DType::Int64 => Tensor::I64(array_from_vec(shape, from_le(raw, i64::from_le_bytes))?),
        DType::Uint8 => Tensor::U8(array_from_vec(shape, raw.to_vec())?),
        DType::Uint16 => Tensor::U16(array_from_vec(shape, from_le(raw, u16::from_le_bytes))?),
        DType::Uint32 => Tensor::U32(array_from_vec(shape, from_le(raw, u32::from_le_bytes))?),
        DType::Uint64 => Tensor::U64(array_from_vec(shape, from_le(raw, u64::from_le_bytes))?),
        DType::Bool => Tensor::Bool(array_from_vec(
            shape,
            raw.iter().map(|&b| b != 0).collect(),
        )?),
        DType::Complex64 => Tensor::C64(array_from_vec(
            shape,
            from_le(raw, |b: [u8; 8]| {
                let re = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let im = f32::from_le_bytes([b[4], b[5], b[6], b[7]]);
                Complex32::new(re, im)
            }),
        )?),
        DType::Complex128 => Tensor::C128(array_from_vec(
            shape,
            from_le(raw, |b: [u8; 16]| {
                let mut re = [0u8; 8];
                let mut im = [0u8; 8];
                re.copy_from_slice(&b[..8]);
                im.copy_from_slice(&b[8..]);
                Complex64::new(f64::from_le_bytes(re), f64::from_le_bytes(im))
            }),
        )?),
        DType::String => return Err(invalid(name, "STRING tensors cannot use raw_data")),
        coded => {
            let codes = minifloat::unpack_bits(raw, coded.bit_width(), n)
                .ok_or_else(|| invalid(name, "raw_data too short"))?;
            Tensor::Coded(coded, array_from_vec(shape, codes)?)
        }
    })
}

fn decode_typed(
    name: &str,
    dtype: DType,
    shape: &[usize],
    n: usize,
    t: &TensorProto,
) -> Result<Tensor> {
    let i32s = || -> Result<&[i32]> {
        check_len(name, "int32_data", t.int32_data.len(), n)?;
        Ok(&t.int32_data)
    };
    Ok(match dtype {
        DType::Float => {
            check_len(name, "float_data", t.float_data.len(), n)?;
            Tensor::F32(array_from_vec(shape, t.float_data.clone())?)
        }
        DType::Complex64 => {
            check_len(name, "float_data", t.float_data.len(), n * 2)?;
            let v = t
                .float_data
                .chunks_exact(2)
                .map(|c| Complex32::new(c[0], c[1]))
                .collect();
            Tensor::C64(array_from_vec(shape, v)?)
        }
        DType::Double => {
            check_len(name, "double_data", t.double_data.len(), n)?;
            Tensor::F64(array_from_vec(shape, t.double_data.clone())?)
        }
        DType::Complex128 => {
            check_len(name, "double_data", t.double_data.len(), n * 2)?;
            let v = t
                .double_data
                .chunks_exact(2)
                .map(|c| Complex64::new(c[0], c[1]))
                .collect();
            Tensor::C128(array_from_vec(shape, v)?)
        }
        DType::Int64 => {
            check_len(name, "int64_data", t.int64_data.len(), n)?;
            Tensor::I64(array_from_vec(shape, t.int64_data.clone())?)
        }
        DType::Uint64 => {
            check_len(name, "uint64_data", t.uint64_data.len(), n)?;
            Tensor::U64(array_from_vec(shape, t.uint64_data.clone())?)
        }
        DType::Uint32 => {
            check_len(name, "uint64_data", t.uint64_data.len(), n)?;
            Tensor::U32(array_from_vec(
                shape,
                t.uint64_data.iter().map(|&x| x as u32).collect(),
            )?)
        }
        DType::Int32 => Tensor::I32(array_from_vec(shape, i32s()?.to_vec())?),
        DType::Int16 => Tensor::I16(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| x as i16).collect(),
        )?),
        DType::Int8 => Tensor::I8(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| x as i8).collect(),
        )?),
        DType::Uint16 => Tensor::U16(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| x as u16).collect(),
        )?),
        DType::Uint8 => Tensor::U8(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| x as u8).collect(),
        )?),
        DType::Bool => Tensor::Bool(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| x != 0).collect(),
        )?),
        DType::Float16 => Tensor::F16(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| f16::from_bits(x as u16)).collect(),
        )?),
        DType::Bfloat16 => Tensor::BF16(array_from_vec(
            shape,
            i32s()?.iter().map(|&x| bf16::from_bits(x as u16)).collect(),
        )?),
        DType::String => {
            check_len(name, "string_data", t.string_data.len(), n)?;
            let v = t
                .string_data
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect();
            Tensor::Str(array_from_vec(shape, v)?)
        }
        coded => {
            let per_entry = match coded.bit_width() {
                4 => 2,
                2 => 4,
                _ => 1,
            };
            check_len(
                name,
                "int32_data",
                t.int32_data.len(),
                n.div_ceil(per_entry),
            )?;
            let codes = if per_entry == 1 {
                t.int32_data.iter().map(|&x| x as u8).collect()
            } else {
                let bytes: Vec<u8> = t.int32_data.iter().map(|&x| x as u8).collect();
                minifloat::unpack_bits(&bytes, coded.bit_width(), n)
                    .ok_or_else(|| invalid(name, "int32_data too short"))?
            };
            Tensor::Coded(coded, array_from_vec(shape, codes)?)
        }
    })
}

// SequenceProto / OptionalProto elem_type codes.
const ELEM_TENSOR: i32 = 1;
const ELEM_SEQUENCE: i32 = 3;
const ELEM_MAP: i32 = 4;
const ELEM_OPTIONAL: i32 = 5;

impl Value {
    /// Decodes a `SequenceProto` into `Value::Sequence`.
    pub fn from_sequence_proto(s: &SequenceProto) -> Result<Value> {
        let name = s.name.as_deref().unwrap_or("");
        let items: Vec<Value> = match s.elem_type.unwrap_or(0) {
            ELEM_TENSOR => s
                .tensor_values
                .iter()
                .map(|t| Tensor::from_proto(t).map(Value::Tensor))
                .collect::<Result<_>>()?,
            ELEM_SEQUENCE => s
                .sequence_values
                .iter()
                .map(Value::from_sequence_proto)
                .collect::<Result<_>>()?,
            ELEM_MAP => s
                .map_values
                .iter()
                .map(Value::from_map_proto)
                .collect::<Result<_>>()?,
            ELEM_OPTIONAL => s
                .optional_values
                .iter()
                .map(Value::from_optional_proto)
                .collect::<Result<_>>()?,
            0 if s.tensor_values.is_empty() && s.sequence_values.is_empty() => Vec::new(),
            other => {
                return Err(invalid(
                    name,
                    format!("sequence elem_type {other} is not supported"),
                ))
            }
        };
        let elem_dtype = s
            .tensor_values
            .first()
            .and_then(|t| t.data_type)
            .and_then(DType::from_code);
        Ok(Value::Sequence(Sequence { elem_dtype, items }))
    }

    /// Decodes an `OptionalProto` into `Value::Optional`.
    pub fn from_optional_proto(o: &OptionalProto) -> Result<Value> {
        let inner = if let Some(t) = &o.tensor_value {
            Some(Value::Tensor(Tensor::from_proto(t)?))
        } else if let Some(s) = &o.sequence_value {
            Some(Value::from_sequence_proto(s)?)
        } else if let Some(m) = &o.map_value {
            Some(Value::from_map_proto(m)?)
        } else if let Some(inner) = &o.optional_value {
            Some(Value::from_optional_proto(inner)?)
        } else {
            None
        };
        Ok(Value::Optional(inner.map(Box::new)))
    }

    /// Decodes a `MapProto` into `Value::Map`.
    pub fn from_map_proto(m: &MapProto) -> Result<Value> {
        let name = m.name.as_deref().unwrap_or("");
        let keys = if m.key_type == Some(DType::String.code()) {
            let v: Vec<String> = m
                .string_keys
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect();
            Tensor::from_vec(&[v.len()], v)?
        } else {
            Tensor::from_vec(&[m.keys.len()], m.keys.clone())?
        };
        let values = match &m.values {
            Some(s) => match Value::from_sequence_proto(s)? {
                Value::Sequence(s) => s.items,
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        if values.len() != keys.len() {
            return Err(invalid(
                name,
                format!("map has {} keys and {} values", keys.len(), values.len()),
            ));
        }
        Ok(Value::Map(MapValue { keys, values }))
    }

    /// Encodes a sequence value as a `SequenceProto` (`None` for other kinds of values).
    pub fn to_sequence_proto(&self, name: &str) -> Option<SequenceProto> {
        let Value::Sequence(s) = self else {
            return None;
        };
        let mut p = SequenceProto {
            name: Some(name.to_string()),
            elem_type: Some(ELEM_TENSOR),
            ..Default::default()
        };
        for item in &s.items {
            match item {
                Value::Tensor(t) => p.tensor_values.push(t.to_proto("")),
                Value::Sequence(_) => {
                    p.elem_type = Some(ELEM_SEQUENCE);
                    p.sequence_values.extend(item.to_sequence_proto(""));
                }
                Value::Optional(_) => {
                    p.elem_type = Some(ELEM_OPTIONAL);
                    p.optional_values.extend(item.to_optional_proto(""));
                }
                Value::Map(_) => p.elem_type = Some(ELEM_MAP),
            }
        }
        Some(p)
    }

    /// Encodes an optional value as an `OptionalProto` (`None` for other kinds of values).
    pub fn to_optional_proto(&self, name: &str) -> Option<OptionalProto> {
        let Value::Optional(inner) = self else {
            return None;
        };
        let mut p = OptionalProto {
            name: Some(name.to_string()),
            elem_type: Some(0),
            ..Default::default()
        };
        match inner.as_deref() {
            None => {}
            Some(Value::Tensor(t)) => {
                p.elem_type = Some(ELEM_TENSOR);
                p.tensor_value = Some(t.to_proto(""));
            }
            Some(v @ Value::Sequence(_)) => {
                p.elem_type = Some(ELEM_SEQUENCE);
                p.sequence_value = v.to_sequence_proto("");
            }
            Some(v @ Value::Optional(_)) => {
                p.elem_type = Some(ELEM_OPTIONAL);
                p.optional_value = v.to_optional_proto("").map(Box::new);
            }
            Some(Value::Map(_)) => p.elem_type = Some(ELEM_MAP),
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DType, dims: Vec<i64>) -> TensorProto {
        TensorProto {
            name: Some("t".into()),
            data_type: Some(dtype.code()),
            dims,
            ..Default::default()
        }
    }

    #[test]
    fn round_trips_every_numeric_type() {
        let cases = [
            Tensor::from_vec(&[2], vec![1.5f32, -2.0]),
            Tensor::from_vec(&[2], vec![f16::from_f32(1.5), f16::NAN]),
            Tensor::from_vec(&[3], vec![true, false, true]),
            Tensor::from_vec(&[], vec![-7i64]),
            Tensor::from_vec(&[2], vec!["a".to_string(), "bé".to_string()]),
            Tensor::from_codes(DType::Int4, &[3], vec![1, 15, 8]),
            Tensor::from_codes(DType::Float6E2M3, &[5], vec![1, 2, 3, 4, 63]),
        ];
        for t in cases {
            let t = t.unwrap_or_else(|e| panic!("{e}"));
            let back = Tensor::from_proto(&t.to_proto("x")).unwrap_or_else(|e| panic!("{e}"));
            if t.dtype() == DType::Float16 {
                assert_eq!(format!("{back:?}"), format!("{t:?}"));
            } else {
                assert_eq!(back, t);
            }
        }
    }

    #[test]
    fn typed_fields_decode() {
        let mut p = proto(DType::Uint4, vec![3]);
        p.int32_data = vec![0x21, 0x03];
        let t = Tensor::from_proto(&p).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t,
            Tensor::from_codes(DType::Uint4, &[3], vec![1, 2, 3]).unwrap_or_else(|e| panic!("{e}"))
        );
    }
}
