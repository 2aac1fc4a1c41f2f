//! Narrow types stored as one `u8` code per element: the float8 family, float6, float4,
//! and the 4-bit and 2-bit integers. Conversions to and from `f32` follow `ml_dtypes` (what
//! the ONNX reference implementation uses): round to nearest even, overflow to infinity when
//! the format has it, else to NaN when it has that, else saturate; `saturate` clamps first.

use crate::dtype::DType;

/// How a sign-magnitude minifloat spends its top codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Specials {
    /// IEEE-like: exponent all ones is infinity (mantissa 0) or NaN (E5M2).
    Ieee,
    /// No infinity; exponent and mantissa all ones is NaN (E4M3FN).
    Fn,
    /// No infinity, no negative zero; the code `1000...0` is the only NaN (FNUZ types).
    Fnuz,
    /// Every code is a finite number (float4, float6).
    Finite,
}

#[derive(Debug, Clone, Copy)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    specials: Specials,
}

fn format(dtype: DType) -> Option<Format> {
    let f = |exp_bits, man_bits, bias, specials| {
        Some(Format {
            exp_bits,
            man_bits,
            bias,
            specials,
        })
    };
    match dtype {
        DType::Float8E4M3FN => f(4, 3, 7, Specials::Fn),
        DType::Float8E4M3FNUZ => f(4, 3, 8, Specials::Fnuz),
        DType::Float8E5M2 => f(5, 2, 15, Specials::Ieee),
        DType::Float8E5M2FNUZ => f(5, 2, 16, Specials::Fnuz),
        DType::Float4E2M1 => f(2, 1, 1, Specials::Finite),
        DType::Float6E2M3 => f(2, 3, 1, Specials::Finite),
        DType::Float6E3M2 => f(3, 2, 3, Specials::Finite),
        _ => None,
    }
}

impl Format {
    fn sign_bit(&self) -> u8 {
        1 << (self.exp_bits + self.man_bits)
    }
    fn exp_max(&self) -> u32 {
        (1 << self.exp_bits) - 1
    }
    fn man_max(&self) -> u32 {
        (1 << self.man_bits) - 1
    }
    /// The largest code whose value is a positive finite number.
    fn max_finite_code(&self) -> u8 {
        let all = (self.sign_bit() as u32 - 1) as u8;
        match self.specials {
            Specials::Ieee => ((self.exp_max() - 1) << self.man_bits | self.man_max()) as u8,
            Specials::Fn => all - 1,
            Specials::Fnuz | Specials::Finite => all,
        }
    }
    fn nan_code(&self, negative: bool) -> u8 {
        match self.specials {
            Specials::Ieee => {
                let c = (self.exp_max() << self.man_bits | (1 << (self.man_bits - 1))) as u8;
                if negative {
                    c | self.sign_bit()
                } else {
                    c
                }
            }
            Specials::Fn => {
                let c = self.sign_bit() - 1;
                if negative {
                    c | self.sign_bit()
                } else {
                    c
                }
            }
            Specials::Fnuz => self.sign_bit(),
            // ml_dtypes maps NaN to a zero whose sign is the NaN's sign bit inverted.
            Specials::Finite => {
                if negative {
                    0
                } else {
                    self.sign_bit()
                }
            }
        }
    }
    /// Value of a positive code (no sign bit), ignoring specials.
    fn magnitude(&self, code: u8) -> f64 {
        let e = (code as u32 >> self.man_bits) & self.exp_max();
        let m = code as u32 & self.man_max();
        if e == 0 {
            m as f64 * 2f64.powi(1 - self.bias - self.man_bits as i32)
        } else {
            ((1u32 << self.man_bits) + m) as f64
                * 2f64.powi(e as i32 - self.bias - self.man_bits as i32)
        }
    }

    fn decode(&self, code: u8) -> f32 {
        let sign = code & self.sign_bit() != 0;
        let mag_code = code & (self.sign_bit() - 1);
        let e = (mag_code as u32 >> self.man_bits) & self.exp_max();
        let m = mag_code as u32 & self.man_max();
        match self.specials {
            Specials::Fnuz if code == self.sign_bit() => return f32::NAN,
            Specials::Fn if e == self.exp_max() && m == self.man_max() => return f32::NAN,
            Specials::Ieee if e == self.exp_max() => {
                return if m == 0 {
                    if sign {
                        f32::NEG_INFINITY
                    } else {
                        f32::INFINITY
                    }
                } else {
                    f32::NAN
                };
            }
            _ => {}
        }
        let v = self.magnitude(mag_code) as f32;
        if sign {
            -v
        } else {
            v
        }
    }

    fn encode(&self, x: f32, saturate: bool) -> u8 {
        let negative = x.is_sign_negative();
        if x.is_nan() {
            return self.nan_code(negative);
        }
        let max_code = self.max_finite_code();
        let max_val = self.magnitude(max_code);
        let mut a = (x as f64).abs();
        if saturate && a > max_val {
            a = max_val;
        }
        let sign = if negative { self.sign_bit() } else { 0 };
        let overflow = || match self.specials {
            Specials::Ieee => sign | (self.exp_max() << self.man_bits) as u8,
            Specials::Fn | Specials::Fnuz => self.nan_code(negative),
            Specials::Finite => sign | max_code,
        };
        if a.is_infinite() {
            return overflow();
        }
        // Largest code with magnitude <= a (codes are monotonic in value).
        let (mut lo, mut hi) = (0u8, max_code);
        if a >= max_val {
            lo = max_code;
        } else {
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if self.magnitude(mid) <= a {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
        }
        let below = self.magnitude(lo);
        let result = if below == a {
            lo
        } else {
            let (above, above_is_overflow) = if lo == max_code {
                let e = (max_code as u32 >> self.man_bits) & self.exp_max();
                let ulp = 2f64.powi(e.max(1) as i32 - self.bias - self.man_bits as i32);
                (max_val + ulp, true)
            } else {
                (self.magnitude(lo + 1), false)
            };
            let pick_above = match (a - below).partial_cmp(&(above - a)) {
                Some(std::cmp::Ordering::Greater) => true,
                Some(std::cmp::Ordering::Less) => false,
                _ => lo & 1 == 1,
            };
            if !pick_above {
                lo
            } else if above_is_overflow {
                return overflow();
            } else {
                lo + 1
            }
        };
        if result == 0 && self.specials == Specials::Fnuz {
            return 0;
        }
        sign | result
    }
}

/// Decodes a FLOAT8E8M0 code: `2^(code - 127)`, 255 is NaN.
fn e8m0_decode(code: u8) -> f32 {
    if code == 0xFF {
        f32::NAN
    } else {
        2f32.powi(code as i32 - 127)
    }
}

/// How FLOAT8E8M0 rounds (Cast's `round_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E8M0Rounding {
    Up,
    Down,
    Nearest,
}

/// Encodes a FLOAT8E8M0 code as `onnx.numpy_helper.to_float8e8m0` does.
pub fn e8m0_encode(x: f32, saturate: bool, rounding: E8M0Rounding) -> u8 {
    let bits = x.to_bits();
    let exponent = (bits >> 23) & 0xFF;
    if exponent == 0xFF {
        return 0xFF;
    }
    let round_up = match rounding {
        E8M0Rounding::Down => false,
        E8M0Rounding::Up => bits & 0x7F_FFFF != 0,
        E8M0Rounding::Nearest => {
            let g = bits & 0x40_0000 != 0;
            let r = bits & 0x20_0000 != 0;
            let s = bits & 0x1F_FFFF != 0;
            let lsb = exponent > 0;
            g && (r || s || lsb)
        }
    };
    let round_up = round_up && !(saturate && exponent == 0xFE);
    (exponent + round_up as u32) as u8
}

/// The value of a coded element as `f32` (integers exactly, floats decoded).
pub fn coded_to_f32(dtype: DType, code: u8) -> f32 {
    match dtype {
        DType::Float8E8M0 => e8m0_decode(code),
        DType::Int4 | DType::Int2 | DType::Uint4 | DType::Uint2 => coded_to_i64(dtype, code) as f32,
        _ => format(dtype).map_or(f32::NAN, |f| f.decode(code)),
    }
}

/// The value of a 4-bit or 2-bit integer code (sign-extended for the signed types).
pub fn coded_to_i64(dtype: DType, code: u8) -> i64 {
    match dtype {
        DType::Int4 => ((code << 4) as i8 >> 4) as i64,
        DType::Int2 => ((code << 6) as i8 >> 6) as i64,
        DType::Uint4 => (code & 0x0F) as i64,
        DType::Uint2 => (code & 0x03) as i64,
        _ => coded_to_f32(dtype, code) as i64,
    }
}

/// The code of an integer for a 4-bit or 2-bit type: wraps like a C cast (ml_dtypes).
pub fn i64_to_coded(dtype: DType, v: i64) -> u8 {
    match dtype {
        DType::Int4 | DType::Uint4 => (v & 0x0F) as u8,
        DType::Int2 | DType::Uint2 => (v & 0x03) as u8,
        _ => f32_to_coded(dtype, v as f32, false),
    }
}

/// The code nearest to `x` (see the module docs for overflow and `saturate`).
pub fn f32_to_coded(dtype: DType, x: f32, saturate: bool) -> u8 {
    match dtype {
        DType::Float8E8M0 => e8m0_encode(x, saturate, E8M0Rounding::Up),
        DType::Int4 | DType::Int2 | DType::Uint4 | DType::Uint2 => {
            let v = if x.is_nan() { 0 } else { x as i64 };
            i64_to_coded(dtype, v)
        }
        _ => format(dtype).map_or(0, |f| f.encode(x, saturate)),
    }
}

/// Unpacks `n` elements of `width` bits from an LSB-first bit stream (the `raw_data` layout
/// of the sub-byte types). Returns `None` when `data` is too short.
pub fn unpack_bits(data: &[u8], width: usize, n: usize) -> Option<Vec<u8>> {
    if width == 8 {
        return data.get(..n).map(<[u8]>::to_vec);
    }
    let mask = (1u32 << width) - 1;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let bit = i * width;
        let byte = bit / 8;
        let shift = bit % 8;
        let lo = *data.get(byte)? as u32;
        let hi = if shift + width > 8 {
            *data.get(byte + 1)? as u32
        } else {
            0
        };
        out.push((((lo | hi << 8) >> shift) & mask) as u8);
    }
    Some(out)
}

/// Packs codes of `width` bits into an LSB-first bit stream (inverse of [`unpack_bits`]).
pub fn pack_bits(codes: impl Iterator<Item = u8>, width: usize, n: usize) -> Vec<u8> {
    if width == 8 {
        return codes.collect();
    }
    let mut out = vec![0u8; (n * width).div_ceil(8)];
    let mask = (1u32 << width) - 1;
    for (i, c) in codes.enumerate() {
        let bit = i * width;
        let v = (c as u32 & mask) << (bit % 8);
        if let Some(b) = out.get_mut(bit / 8) {
            *b |= v as u8;
        }
        if v > 0xFF {
            if let Some(b) = out.get_mut(bit / 8 + 1) {
                *b |= (v >> 8) as u8;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float8_matches_ml_dtypes() {
        // Values from ml_dtypes: x.astype(fmt).view(uint8).
        let xs = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e9,
            7.0,
            6.5,
            0.3,
            -0.0,
            1e-10,
        ];
        let expect = [
            (
                DType::Float8E4M3FN,
                [127u8, 127, 255, 127, 78, 77, 42, 128, 0],
            ),
            (
                DType::Float8E4M3FNUZ,
                [128, 128, 128, 128, 86, 85, 50, 0, 0],
            ),
            (DType::Float8E5M2, [126, 124, 252, 124, 71, 70, 53, 128, 0]),
            (
                DType::Float8E5M2FNUZ,
                [128, 128, 128, 128, 75, 74, 57, 0, 0],
            ),
            (DType::Float4E2M1, [8, 7, 15, 7, 7, 7, 1, 8, 0]),
            (DType::Float6E2M3, [32, 31, 63, 31, 30, 29, 2, 32, 0]),
            (DType::Float6E3M2, [32, 31, 63, 31, 23, 22, 5, 32, 0]),
        ];
        for (dtype, codes) in expect {
            for (x, c) in xs.iter().zip(codes) {
                assert_eq!(f32_to_coded(dtype, *x, false), c, "{dtype} {x}");
            }
        }
    }

    #[test]
    fn float8_decode_round_trips() {
        for dtype in [
            DType::Float8E4M3FN,
            DType::Float8E5M2,
            DType::Float8E4M3FNUZ,
            DType::Float8E5M2FNUZ,
        ] {
            for code in 0..=255u8 {
                let v = coded_to_f32(dtype, code);
                if !v.is_nan() {
                    assert_eq!(
                        coded_to_f32(dtype, f32_to_coded(dtype, v, false)),
                        v,
                        "{dtype} {code}"
                    );
                }
            }
        }
        assert_eq!(coded_to_f32(DType::Float8E4M3FN, 0x7E), 448.0);
        assert_eq!(f32_to_coded(DType::Float8E4M3FN, 1e9, true), 0x7E);
    }

    #[test]
    fn sub_byte_packing() {
        let codes = [1u8, 2, 3, 0, 1];
        let packed = pack_bits(codes.iter().copied(), 2, 5);
        assert_eq!(packed, vec![0b00_11_10_01, 0b01]);
        assert_eq!(unpack_bits(&packed, 2, 5).as_deref(), Some(&codes[..]));
        let six = [63u8, 1, 2, 3, 4];
        let packed = pack_bits(six.iter().copied(), 6, 5);
        assert_eq!(packed.len(), 4);
        assert_eq!(unpack_bits(&packed, 6, 5).as_deref(), Some(&six[..]));
        assert_eq!(coded_to_i64(DType::Int4, 0xF), -1);
        assert_eq!(coded_to_i64(DType::Int2, 2), -2);
    }
}
