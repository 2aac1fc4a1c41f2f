//! Element types: every `TensorProto.DataType` of onnx 1.23.2, with their storage facts
//! (bit width, how the interpreter stores them) and names as the ONNX spec spells them.

use std::fmt;

/// An ONNX tensor element type (`TensorProto.DataType`, without `UNDEFINED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DType {
    Float,
    Uint8,
    Int8,
    Uint16,
    Int16,
    Int32,
    Int64,
    String,
    Bool,
    Float16,
    Double,
    Uint32,
    Uint64,
    Complex64,
    Complex128,
    Bfloat16,
    Float8E4M3FN,
    Float8E4M3FNUZ,
    Float8E5M2,
    Float8E5M2FNUZ,
    Uint4,
    Int4,
    Float4E2M1,
    Float8E8M0,
    Uint2,
    Int2,
    Float6E2M3,
    Float6E3M2,
}

impl DType {
    /// Every data type, in `TensorProto.DataType` order.
    pub const ALL: [DType; 28] = [
        DType::Float,
        DType::Uint8,
        DType::Int8,
        DType::Uint16,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::String,
        DType::Bool,
        DType::Float16,
        DType::Double,
        DType::Uint32,
        DType::Uint64,
        DType::Complex64,
        DType::Complex128,
        DType::Bfloat16,
        DType::Float8E4M3FN,
        DType::Float8E4M3FNUZ,
        DType::Float8E5M2,
        DType::Float8E5M2FNUZ,
        DType::Uint4,
        DType::Int4,
        DType::Float4E2M1,
        DType::Float8E8M0,
        DType::Uint2,
        DType::Int2,
        DType::Float6E2M3,
        DType::Float6E3M2,
    ];

    /// The `TensorProto.DataType` code.
    pub fn code(self) -> i32 {
        // ALL is in code order starting at 1.
        DType::ALL
            .iter()
            .position(|d| *d == self)
            .map_or(0, |p| p as i32 + 1)
    }

    /// The type for a `TensorProto.DataType` code; `None` for `UNDEFINED` and unknown codes.
    pub fn from_code(code: i32) -> Option<DType> {
        if code < 1 {
            return None;
        }
        DType::ALL.get((code - 1) as usize).copied()
    }

    /// The name as in `TensorProto.DataType` (`FLOAT`, `INT64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Float => "FLOAT",
            DType::Uint8 => "UINT8",
            DType::Int8 => "INT8",
            DType::Uint16 => "UINT16",
            DType::Int16 => "INT16",
            DType::Int32 => "INT32",
            DType::Int64 => "INT64",
            DType::String => "STRING",
            DType::Bool => "BOOL",
            DType::Float16 => "FLOAT16",
            DType::Double => "DOUBLE",
            DType::Uint32 => "UINT32",
            DType::Uint64 => "UINT64",
            DType::Complex64 => "COMPLEX64",
            DType::Complex128 => "COMPLEX128",
            DType::Bfloat16 => "BFLOAT16",
            DType::Float8E4M3FN => "FLOAT8E4M3FN",
            DType::Float8E4M3FNUZ => "FLOAT8E4M3FNUZ",
            DType::Float8E5M2 => "FLOAT8E5M2",
            DType::Float8E5M2FNUZ => "FLOAT8E5M2FNUZ",
            DType::Uint4 => "UINT4",
            DType::Int4 => "INT4",
            DType::Float4E2M1 => "FLOAT4E2M1",
            DType::Float8E8M0 => "FLOAT8E8M0",
            DType::Uint2 => "UINT2",
            DType::Int2 => "INT2",
            DType::Float6E2M3 => "FLOAT6E2M3",
            DType::Float6E3M2 => "FLOAT6E3M2",
        }
    }

    /// Bits per element in packed serialized form (`raw_data`); 0 for strings.
    pub fn bit_width(self) -> usize {
        match self {
            DType::String => 0,
            DType::Bool | DType::Uint8 | DType::Int8 => 8,
            DType::Float8E4M3FN
            | DType::Float8E4M3FNUZ
            | DType::Float8E5M2
            | DType::Float8E5M2FNUZ
            | DType::Float8E8M0 => 8,
            DType::Uint16 | DType::Int16 | DType::Float16 | DType::Bfloat16 => 16,
            DType::Float | DType::Int32 | DType::Uint32 => 32,
            DType::Double | DType::Int64 | DType::Uint64 | DType::Complex64 => 64,
            DType::Complex128 => 128,
            DType::Uint4 | DType::Int4 | DType::Float4E2M1 => 4,
            DType::Uint2 | DType::Int2 => 2,
            DType::Float6E2M3 | DType::Float6E3M2 => 6,
        }
    }

    /// Bytes that `n` elements take in `raw_data` (packed for sub-byte types).
    pub fn raw_len(self, n: usize) -> Option<usize> {
        n.checked_mul(self.bit_width()).map(|bits| bits.div_ceil(8))
    }

    /// True for types the interpreter stores as one `u8` code per element (float8, float6,
    /// float4, 4-bit and 2-bit integers).
    pub fn is_coded(self) -> bool {
        matches!(
            self,
            DType::Float8E4M3FN
                | DType::Float8E4M3FNUZ
                | DType::Float8E5M2
                | DType::Float8E5M2FNUZ
                | DType::Float8E8M0
                | DType::Uint4
                | DType::Int4
                | DType::Float4E2M1
                | DType::Uint2
                | DType::Int2
                | DType::Float6E2M3
                | DType::Float6E3M2
        )
    }

    /// True for IEEE-style and narrow floating-point types (not complex).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float
                | DType::Double
                | DType::Float16
                | DType::Bfloat16
                | DType::Float8E4M3FN
                | DType::Float8E4M3FNUZ
                | DType::Float8E5M2
                | DType::Float8E5M2FNUZ
                | DType::Float8E8M0
                | DType::Float4E2M1
                | DType::Float6E2M3
                | DType::Float6E3M2
        )
    }

    /// True for signed and unsigned integer types (not bool).
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::Uint8
                | DType::Int8
                | DType::Uint16
                | DType::Int16
                | DType::Int32
                | DType::Int64
                | DType::Uint32
                | DType::Uint64
                | DType::Uint4
                | DType::Int4
                | DType::Uint2
                | DType::Int2
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d.code()), Some(d));
        }
        assert_eq!(DType::Float.code(), 1);
        assert_eq!(DType::Float6E3M2.code(), 28);
        assert_eq!(DType::from_code(0), None);
        assert_eq!(DType::from_code(29), None);
    }

    #[test]
    fn packed_lengths() {
        assert_eq!(DType::Int4.raw_len(3), Some(2));
        assert_eq!(DType::Uint2.raw_len(5), Some(2));
        assert_eq!(DType::Float6E2M3.raw_len(5), Some(4));
        assert_eq!(DType::Float.raw_len(usize::MAX), None);
    }
}
