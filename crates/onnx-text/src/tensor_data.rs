//! How tensor data maps to the text: which typed field of `TensorProto` holds each element
//! type (the field onnx's parser fills), and how `raw_data` bytes decode to, and encode from,
//! the numbers written in the text.
//!
//! The printed numbers of a tensor are always the values of its typed field, so text read by
//! onnx's parser means the same as the original. A tensor stored as `raw_data` prints the
//! values that typed field would hold: 16-bit floats as their bit patterns (as onnx's
//! printer does), sub-byte types (`int4`, `uint4`, `int2`, `uint2`, `float4e2m1`, the 6-bit
//! floats) as their packed bytes, which is also how `int32_data` holds them.

use onnx_proto::tensor_proto::DataType;

/// The typed field of `TensorProto` that holds an element type's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypedField {
    Int32,
    Int64,
    Uint64,
    Float,
    Double,
    String,
}

/// The typed field for an element type (`None`: undefined or unknown types have none).
pub(crate) fn typed_field(data_type: i32) -> Option<TypedField> {
    use DataType as D;
    let dt = DataType::try_from(data_type).ok()?;
    Some(match dt {
        D::Float | D::Complex64 => TypedField::Float,
        D::Double | D::Complex128 => TypedField::Double,
        D::Int64 => TypedField::Int64,
        D::Uint32 | D::Uint64 => TypedField::Uint64,
        D::String => TypedField::String,
        D::Undefined => return None,
        D::Uint8
        | D::Int8
        | D::Uint16
        | D::Int16
        | D::Int32
        | D::Bool
        | D::Float16
        | D::Bfloat16
        | D::Float8e4m3fn
        | D::Float8e4m3fnuz
        | D::Float8e5m2
        | D::Float8e5m2fnuz
        | D::Uint4
        | D::Int4
        | D::Float4e2m1
        | D::Float8e8m0
        | D::Uint2
        | D::Int2
        | D::Float6e2m3
        | D::Float6e3m2 => TypedField::Int32,
    })
}

/// How one element of `raw_data` is laid out (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawElem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl RawElem {
    /// Bytes per element.
    pub(crate) fn size(self) -> usize {
        match self {
            RawElem::I8 | RawElem::U8 => 1,
            RawElem::I16 | RawElem::U16 => 2,
            RawElem::I32 | RawElem::U32 | RawElem::F32 => 4,
            RawElem::I64 | RawElem::U64 | RawElem::F64 => 8,
        }
    }

    /// The name of the stored type, for range errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            RawElem::I8 => "int8",
            RawElem::U8 => "uint8",
            RawElem::I16 => "int16",
            RawElem::U16 => "uint16",
            RawElem::I32 => "int32",
            RawElem::U32 => "uint32",
            RawElem::I64 => "int64",
            RawElem::U64 => "uint64",
            RawElem::F32 => "float",
            RawElem::F64 => "double",
        }
    }
}

/// The `raw_data` layout of an element type (`None` for strings and undefined types).
pub(crate) fn raw_elem(data_type: i32) -> Option<RawElem> {
    use DataType as D;
    let dt = DataType::try_from(data_type).ok()?;
    Some(match dt {
        D::Float | D::Complex64 => RawElem::F32,
        D::Double | D::Complex128 => RawElem::F64,
        D::Int8 => RawElem::I8,
        D::Int16 => RawElem::I16,
        D::Int32 => RawElem::I32,
        D::Int64 => RawElem::I64,
        D::Uint16 | D::Float16 | D::Bfloat16 => RawElem::U16,
        D::Uint32 => RawElem::U32,
        D::Uint64 => RawElem::U64,
        D::Uint8
        | D::Bool
        | D::Float8e4m3fn
        | D::Float8e4m3fnuz
        | D::Float8e5m2
        | D::Float8e5m2fnuz
        | D::Float8e8m0
        | D::Uint4
        | D::Int4
        | D::Float4e2m1
        | D::Uint2
        | D::Int2
        | D::Float6e2m3
        | D::Float6e3m2 => RawElem::U8,
        D::String | D::Undefined => return None,
    })
}

/// One decoded `raw_data` element, as the number it prints as.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum RawValue {
    Int(i64),
    Uint(u64),
    F32(f32),
    F64(f64),
}

/// Decodes the element at `chunk` (exactly `elem.size()` bytes).
pub(crate) fn decode_raw(elem: RawElem, chunk: &[u8]) -> RawValue {
    let mut b = [0u8; 8];
    if let Some(dest) = b.get_mut(..chunk.len().min(8)) {
        dest.copy_from_slice(chunk.get(..dest.len()).unwrap_or(&[]));
    }
    match elem {
        RawElem::I8 => RawValue::Int(i64::from(b[0] as i8)),
        RawElem::U8 => RawValue::Int(i64::from(b[0])),
        RawElem::I16 => RawValue::Int(i64::from(i16::from_le_bytes([b[0], b[1]]))),
        RawElem::U16 => RawValue::Int(i64::from(u16::from_le_bytes([b[0], b[1]]))),
        RawElem::I32 => RawValue::Int(i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        RawElem::U32 => RawValue::Uint(u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        RawElem::I64 => RawValue::Int(i64::from_le_bytes(b)),
        RawElem::U64 => RawValue::Uint(u64::from_le_bytes(b)),
        RawElem::F32 => RawValue::F32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        RawElem::F64 => RawValue::F64(f64::from_le_bytes(b)),
    }
}

/// Appends an integer as a raw element; `false` when it does not fit.
pub(crate) fn encode_raw_int(elem: RawElem, value: i64, out: &mut Vec<u8>) -> bool {
    match elem {
        RawElem::I8 => i8::try_from(value).map(|v| out.extend_from_slice(&v.to_le_bytes())),
        RawElem::U8 => u8::try_from(value).map(|v| out.push(v)),
        RawElem::I16 => i16::try_from(value).map(|v| out.extend_from_slice(&v.to_le_bytes())),
        RawElem::U16 => u16::try_from(value).map(|v| out.extend_from_slice(&v.to_le_bytes())),
        RawElem::I32 => i32::try_from(value).map(|v| out.extend_from_slice(&v.to_le_bytes())),
        RawElem::I64 => {
            out.extend_from_slice(&value.to_le_bytes());
            Ok(())
        }
        RawElem::U32 | RawElem::U64 | RawElem::F32 | RawElem::F64 => return false,
    }
    .is_ok()
}

/// Appends an unsigned integer as a raw element; `false` when it does not fit.
pub(crate) fn encode_raw_uint(elem: RawElem, value: u64, out: &mut Vec<u8>) -> bool {
    match elem {
        RawElem::U32 => match u32::try_from(value) {
            Ok(v) => {
                out.extend_from_slice(&v.to_le_bytes());
                true
            }
            Err(_) => false,
        },
        RawElem::U64 => {
            out.extend_from_slice(&value.to_le_bytes());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_int_round_trip() {
        for (elem, v) in [
            (RawElem::I8, -128i64),
            (RawElem::U8, 255),
            (RawElem::I16, -300),
            (RawElem::U16, 65535),
            (RawElem::I32, i64::from(i32::MIN)),
            (RawElem::I64, i64::MAX),
        ] {
            let mut bytes = Vec::new();
            assert!(encode_raw_int(elem, v, &mut bytes));
            assert_eq!(bytes.len(), elem.size());
            assert_eq!(decode_raw(elem, &bytes), RawValue::Int(v));
        }
        let mut bytes = Vec::new();
        assert!(!encode_raw_int(RawElem::U8, 256, &mut bytes));
        assert!(!encode_raw_int(RawElem::I8, 128, &mut bytes));
        assert!(encode_raw_uint(
            RawElem::U32,
            u64::from(u32::MAX),
            &mut bytes
        ));
        assert!(!encode_raw_uint(
            RawElem::U32,
            u64::from(u32::MAX) + 1,
            &mut bytes
        ));
    }

    #[test]
    fn every_known_type_has_a_field() {
        for code in 1..=28 {
            assert!(typed_field(code).is_some(), "{code}");
            assert_eq!(raw_elem(code).is_none(), code == 8, "{code}");
        }
        assert_eq!(typed_field(0), None);
        assert_eq!(typed_field(99), None);
    }
}
