//! Number formatting and parsing, bit-exact in both directions.
//!
//! Floats print as C++ `std::to_chars(value)` does (what onnx's printer uses): the shortest
//! digits that parse back to the same value, in fixed notation unless scientific notation is
//! strictly shorter (`1e-05`, `1e+16`, `0.001`, `123456792`). NaN prints as `nan` / `-nan`
//! when its bits are the canonical quiet NaN (what onnx's parser produces for those words);
//! any other NaN prints as `nan(0x7fa00000)` with the full bit pattern (an extension that only
//! appears when needed). Infinities print as `inf` / `-inf`.

use std::fmt::Write;

/// Writes an `f32` in the text syntax.
pub(crate) fn write_f32(out: &mut String, value: f32) {
    if value.is_nan() {
        match value.to_bits() {
            0x7fc0_0000 => out.push_str("nan"),
            0xffc0_0000 => out.push_str("-nan"),
            bits => {
                let _ = write!(out, "nan(0x{bits:08x})");
            }
        }
    } else if value.is_infinite() {
        out.push_str(if value < 0.0 { "-inf" } else { "inf" });
    } else {
        let mut buf = ryu::Buffer::new();
        let digits = Digits::from_ryu(buf.format_finite(value.abs()));
        write_shortest(out, value.is_sign_negative(), &digits, || {
            value.abs() as u128
        });
    }
}

/// Writes an `f64` in the text syntax.
pub(crate) fn write_f64(out: &mut String, value: f64) {
    if value.is_nan() {
        match value.to_bits() {
            0x7ff8_0000_0000_0000 => out.push_str("nan"),
            0xfff8_0000_0000_0000 => out.push_str("-nan"),
            bits => {
                let _ = write!(out, "nan(0x{bits:016x})");
            }
        }
    } else if value.is_infinite() {
        out.push_str(if value < 0.0 { "-inf" } else { "inf" });
    } else {
        let mut buf = ryu::Buffer::new();
        let digits = Digits::from_ryu(buf.format_finite(value.abs()));
        write_shortest(out, value.is_sign_negative(), &digits, || {
            value.abs() as u128
        });
    }
}

/// Shortest round-trip digits `d1 d2 ... dn` and the exponent `x` of `d1.d2...dn × 10^x`.
struct Digits {
    bytes: [u8; 24],
    len: usize,
    exponent: i32,
}

impl Digits {
    /// From ryu's output (`0.00012`, `123.45`, `1.0`, `1e16`, `1.5e-7`), in one pass.
    fn from_ryu(text: &str) -> Self {
        let mut d = Digits {
            bytes: [0; 24],
            len: 0,
            exponent: 0,
        };
        // Position of the point among the mantissa digits, counting dropped leading zeros.
        let mut point: Option<i32> = None;
        let mut seen: i32 = 0;
        let mut leading_zeros: i32 = 0;
        let mut exp: i32 = 0;
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'0'..=b'9' => {
                    if d.len == 0 && b == b'0' {
                        leading_zeros += 1;
                    } else if let Some(slot) = d.bytes.get_mut(d.len) {
                        *slot = b;
                        d.len += 1;
                    }
                    seen += 1;
                }
                b'.' => point = Some(seen),
                b'e' | b'E' => {
                    exp = text.get(i + 1..).and_then(|e| e.parse().ok()).unwrap_or(0);
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        while d.len > 1 && d.bytes.get(d.len - 1) == Some(&b'0') {
            d.len -= 1;
        }
        if d.len == 0 {
            d.bytes[0] = b'0';
            d.len = 1;
        } else {
            d.exponent = point.unwrap_or(seen) - leading_zeros - 1 + exp;
        }
        d
    }

    fn as_str(&self) -> &str {
        self.bytes
            .get(..self.len)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("0")
    }
}

/// Lays out shortest round-trip digits the way `std::to_chars` does: fixed notation unless
/// scientific is strictly shorter. `exact_integer` gives the value as an integer; it is used
/// when fixed notation has no fractional part, where `to_chars` prints the exact value
/// (`123456792` for the f32 nearest 123456789) rather than padding the digits with zeros.
fn write_shortest(
    out: &mut String,
    negative: bool,
    digits: &Digits,
    exact_integer: impl Fn() -> u128,
) {
    let all = digits.as_str();
    let (lead, rest) = all.split_at(1.min(all.len()));
    let n = all.len() as i32;
    let exponent = digits.exponent;
    let exp_digits = if exponent.abs() >= 100 { 3 } else { 2 };
    let sci_len = n + i32::from(n > 1) + 2 + exp_digits;
    let fixed_len = if exponent >= n - 1 {
        exponent + 1
    } else if exponent >= 0 {
        n + 1
    } else {
        2 + (-exponent - 1) + n
    };
    if negative {
        out.push('-');
    }
    if fixed_len <= sci_len {
        if exponent >= n - 1 {
            if exponent <= 6 {
                // Below 10^7 every integer is exact in f32 and f64: pad the digits.
                out.push_str(all);
                for _ in 0..(exponent - (n - 1)) {
                    out.push('0');
                }
            } else {
                // An integer below 10^23 (fixed is never shorter beyond that).
                let _ = write!(out, "{}", exact_integer());
            }
        } else if exponent >= 0 {
            let split = exponent as usize;
            out.push_str(lead);
            out.push_str(rest.get(..split).unwrap_or(""));
            out.push('.');
            out.push_str(rest.get(split..).unwrap_or(""));
        } else {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(all);
        }
    } else {
        out.push_str(lead);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exponent < 0 { '-' } else { '+' },
            exponent.abs()
        );
    }
}

/// Why a numeric literal was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// The text is not a number of the expected kind.
    Malformed,
    /// The value does not fit the target type.
    OutOfRange,
}

/// Parses a float literal: decimal and scientific forms, `nan`, `inf`, `infinity` in any
/// case, and `nan(0x...)` with a full bit pattern; `negative` for a leading `-`.
pub(crate) fn parse_f32(negative: bool, body: &str) -> Result<f32, NumberError> {
    if let Some(bits) = nan_bits(body)? {
        let bits = u32::try_from(bits).map_err(|_| NumberError::OutOfRange)?;
        let v = f32::from_bits(bits);
        return Ok(if negative { -v } else { v });
    }
    let magnitude = match special(body) {
        Some(Special::Nan) => f32::NAN,
        Some(Special::Inf) => f32::INFINITY,
        None => {
            check_decimal(body)?;
            let v: f32 = body.parse().map_err(|_| NumberError::Malformed)?;
            if v.is_infinite() {
                return Err(NumberError::OutOfRange);
            }
            v
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// Parses a double literal; see [`parse_f32`].
pub(crate) fn parse_f64(negative: bool, body: &str) -> Result<f64, NumberError> {
    if let Some(bits) = nan_bits(body)? {
        let v = f64::from_bits(bits);
        return Ok(if negative { -v } else { v });
    }
    let magnitude = match special(body) {
        Some(Special::Nan) => f64::NAN,
        Some(Special::Inf) => f64::INFINITY,
        None => {
            check_decimal(body)?;
            let v: f64 = body.parse().map_err(|_| NumberError::Malformed)?;
            if v.is_infinite() {
                return Err(NumberError::OutOfRange);
            }
            v
        }
    };
    Ok(if negative { -magnitude } else { magnitude })
}

enum Special {
    Nan,
    Inf,
}

fn special(body: &str) -> Option<Special> {
    if body.eq_ignore_ascii_case("nan") {
        Some(Special::Nan)
    } else if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        Some(Special::Inf)
    } else {
        None
    }
}

/// `nan(0x<hex>)`: the full bit pattern of a NaN (sign included).
fn nan_bits(body: &str) -> Result<Option<u64>, NumberError> {
    let Some(inner) = body
        .strip_prefix("nan(0x")
        .and_then(|rest| rest.strip_suffix(')'))
    else {
        return Ok(None);
    };
    u64::from_str_radix(inner, 16)
        .map(Some)
        .map_err(|_| NumberError::Malformed)
}

/// Only the forms onnx's lexer produces: digits, one optional point, an optional exponent.
fn check_decimal(body: &str) -> Result<(), NumberError> {
    let bytes = body.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_digit) {
        return Err(NumberError::Malformed);
    }
    if bytes
        .iter()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        Ok(())
    } else {
        Err(NumberError::Malformed)
    }
}

/// Parses a decimal integer literal; `negative` for a leading `-`.
pub(crate) fn parse_i64(negative: bool, body: &str) -> Result<i64, NumberError> {
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NumberError::Malformed);
    }
    let magnitude: u64 = body.parse().map_err(|_| NumberError::OutOfRange)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
            .ok_or(NumberError::OutOfRange)
    } else {
        i64::try_from(magnitude).map_err(|_| NumberError::OutOfRange)
    }
}

/// Parses an unsigned decimal integer literal.
pub(crate) fn parse_u64(negative: bool, body: &str) -> Result<u64, NumberError> {
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NumberError::Malformed);
    }
    let v: u64 = body.parse().map_err(|_| NumberError::OutOfRange)?;
    if negative && v != 0 {
        return Err(NumberError::OutOfRange);
    }
    Ok(v)
}

/// Splits a leading `-` (for tests and callers holding a whole literal).
#[cfg(test)]
fn split_sign(text: &str) -> (bool, &str) {
    match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_text(v: f32) -> String {
        let mut s = String::new();
        write_f32(&mut s, v);
        s
    }

    fn f64_text(v: f64) -> String {
        let mut s = String::new();
        write_f64(&mut s, v);
        s
    }

    /// Expected strings are what onnx 1.23.2's printer writes for the same f32 attributes.
    #[test]
    fn f32_matches_to_chars() {
        let cases: &[(f32, &str)] = &[
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (123456789.0, "123456792"),
            (0.1, "0.1"),
            (1e-7, "1e-07"),
            (1.5e-7, "1.5e-07"),
            (100000.0, "1e+05"),
            (1e6, "1e+06"),
            (3.4028235e38, "3.4028235e+38"),
            (1e-45, "1e-45"),
            (12345678.0, "12345678"),
            (0.001, "0.001"),
            (1.0, "1"),
            (-0.0, "-0"),
            (0.0, "0"),
            (10000.0, "10000"),
            (1.0000001, "1.0000001"),
            (-2.5529897, "-2.5529897"),
            (0.121675014, "0.121675014"),
            (f32::INFINITY, "inf"),
            (f32::NEG_INFINITY, "-inf"),
            (f32::NAN, "nan"),
            (-f32::NAN, "-nan"),
        ];
        for (v, want) in cases {
            assert_eq!(f32_text(*v), *want, "{v:e}");
        }
        assert_eq!(f64_text(1e300), "1e+300");
        assert_eq!(f64_text(0.1), "0.1");
        assert_eq!(f64_text(1e22), "1e+22");
        assert_eq!(f64_text(123456789012.0), "123456789012");
    }

    #[test]
    fn floats_round_trip_bit_exactly() {
        let mut bits: u32 = 0x0000_0001;
        for _ in 0..20_000 {
            let v = f32::from_bits(bits);
            let text = f32_text(v);
            let (neg, body) = split_sign(&text);
            let back = parse_f32(neg, body).expect("printed floats parse");
            assert_eq!(back.to_bits(), v.to_bits(), "{}", f32_text(v));
            bits = bits.wrapping_mul(2_654_435_761).wrapping_add(12345);
        }
        let mut bits: u64 = 1;
        for _ in 0..20_000 {
            let v = f64::from_bits(bits);
            let text = f64_text(v);
            let (neg, body) = split_sign(&text);
            let back = parse_f64(neg, body).expect("printed doubles parse");
            assert_eq!(back.to_bits(), v.to_bits(), "{}", f64_text(v));
            bits = bits
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
        }
    }

    #[test]
    fn nan_payloads_use_the_bit_pattern_form() {
        let v = f32::from_bits(0x7fa0_0001);
        assert_eq!(f32_text(v), "nan(0x7fa00001)");
        assert_eq!(
            parse_f32(false, "nan(0x7fa00001)").map(f32::to_bits),
            Ok(0x7fa0_0001)
        );
        assert_eq!(
            parse_f32(false, "nan(0x1ffffffff)"),
            Err(NumberError::OutOfRange)
        );
        assert_eq!(parse_f32(true, "Infinity"), Ok(f32::NEG_INFINITY));
        assert_eq!(parse_f32(false, "1e39"), Err(NumberError::OutOfRange));
        assert_eq!(parse_f32(false, "1e-50"), Ok(0.0));
        assert_eq!(parse_f32(false, "x1"), Err(NumberError::Malformed));
        assert_eq!(parse_f32(true, "0").map(f32::to_bits), Ok(0x8000_0000));
    }

    #[test]
    fn integers() {
        assert_eq!(parse_i64(true, "9223372036854775808"), Ok(i64::MIN));
        assert_eq!(
            parse_i64(false, "9223372036854775808"),
            Err(NumberError::OutOfRange)
        );
        assert_eq!(parse_u64(false, "18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_u64(true, "1"), Err(NumberError::OutOfRange));
        assert_eq!(parse_i64(false, "1.5"), Err(NumberError::Malformed));
    }
}
