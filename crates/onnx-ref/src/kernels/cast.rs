//! Cast and CastLike: every numeric type to every other (`as` semantics, like numpy), bool,
//! strings (parsed and printed as numpy does), and the coded narrow types through `f32` with
//! Cast's `saturate` and `round_mode` attributes.

use half::{bf16, f16};
use num_traits::AsPrimitive;

use super::one;
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::minifloat::{self, E8M0Rounding};
use crate::numeric::Num;
use crate::tensor::{with_numeric, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Cast", 1, LATEST, cast);
    reg.register("", "CastLike", 15, LATEST, cast_like);
    reg.register("", "BitCast", 26, LATEST, bit_cast);
}

/// BitCast: the same bytes read as another type of the same width.
fn bit_cast(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let to = dtype_attr(ctx)?;
    let from = t.dtype();
    if from.bit_width() != to.bit_width()
        || from == DType::String
        || to == DType::String
        || from.bit_width() < 8
    {
        return Err(ctx.err(format!(
            "cannot bit-cast {from} to {to}: element sizes differ"
        )));
    }
    let mut p = t.to_proto("");
    p.data_type = Some(to.code());
    one(Tensor::from_proto(&p).map_err(|e| e.in_node(&ctx.node_ref()))?)
}

/// How a cast to a narrow float type treats out-of-range values.
#[derive(Debug, Clone, Copy)]
struct CastMode {
    saturate: bool,
    rounding: E8M0Rounding,
}

fn cast_mode(ctx: &KernelCtx) -> Result<CastMode> {
    let saturate = ctx.attr_int("saturate", 1)? != 0;
    let rounding = match ctx.attr_string("round_mode", "up")?.as_str() {
        "up" => E8M0Rounding::Up,
        "down" => E8M0Rounding::Down,
        "nearest" => E8M0Rounding::Nearest,
        other => return Err(ctx.err(format!("unknown round_mode '{other}'"))),
    };
    Ok(CastMode { saturate, rounding })
}

fn cast(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let to = if ctx.opset < 6 {
        // Cast-1 spells the target as a string ("FLOAT", ...).
        match ctx.attr("to").and_then(|a| a.s.as_ref()) {
            Some(s) => {
                let name = String::from_utf8_lossy(s).to_uppercase();
                DType::ALL
                    .into_iter()
                    .find(|d| d.name() == name)
                    .ok_or_else(|| ctx.err(format!("unknown target type '{name}'")))?
            }
            None => dtype_attr(ctx)?,
        }
    } else {
        dtype_attr(ctx)?
    };
    one(cast_with(t, to, cast_mode(ctx)?).map_err(|e| e.in_node(&ctx.node_ref()))?)
}

fn dtype_attr(ctx: &KernelCtx) -> Result<DType> {
    let code = ctx
        .attr_opt_int("to")?
        .ok_or_else(|| ctx.err("attribute 'to' is required"))?;
    DType::from_code(code as i32).ok_or_else(|| ctx.err(format!("unknown target type code {code}")))
}

fn cast_like(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let like = ctx.input(inputs, 1)?;
    one(cast_with(t, like.dtype(), cast_mode(ctx)?).map_err(|e| e.in_node(&ctx.node_ref()))?)
}

/// Casts a tensor to `to` as ONNX Cast does with default attributes (saturating narrow floats).
pub fn cast_tensor(t: &Tensor, to: DType) -> Result<Tensor> {
    cast_with(
        t,
        to,
        CastMode {
            saturate: true,
            rounding: E8M0Rounding::Up,
        },
    )
}

/// Element types every numeric type converts to with `as` semantics.
trait CastAll:
    Num
    + AsPrimitive<f32>
    + AsPrimitive<f64>
    + AsPrimitive<f16>
    + AsPrimitive<bf16>
    + AsPrimitive<i8>
    + AsPrimitive<i16>
    + AsPrimitive<i32>
    + AsPrimitive<i64>
    + AsPrimitive<u8>
    + AsPrimitive<u16>
    + AsPrimitive<u32>
    + AsPrimitive<u64>
{
}

impl<T> CastAll for T where
    T: Num
        + AsPrimitive<f32>
        + AsPrimitive<f64>
        + AsPrimitive<f16>
        + AsPrimitive<bf16>
        + AsPrimitive<i8>
        + AsPrimitive<i16>
        + AsPrimitive<i32>
        + AsPrimitive<i64>
        + AsPrimitive<u8>
        + AsPrimitive<u16>
        + AsPrimitive<u32>
        + AsPrimitive<u64>
{
}

fn conv<S: AsPrimitive<D>, D: Copy + 'static>(a: &Array<S>) -> Array<D> {
    a.mapv(|x| x.as_()).into_shared()
}

fn numeric_to<S: CastAll>(a: &Array<S>, to: DType, mode: CastMode) -> Result<Tensor> {
    Ok(match to {
        DType::Float => Tensor::F32(conv(a)),
        DType::Double => Tensor::F64(conv(a)),
        DType::Float16 => Tensor::F16(conv(a)),
        DType::Bfloat16 => Tensor::BF16(conv(a)),
        DType::Int8 => Tensor::I8(conv(a)),
        DType::Int16 => Tensor::I16(conv(a)),
        DType::Int32 => Tensor::I32(conv(a)),
        DType::Int64 => Tensor::I64(conv(a)),
        DType::Uint8 => Tensor::U8(conv(a)),
        DType::Uint16 => Tensor::U16(conv(a)),
        DType::Uint32 => Tensor::U32(conv(a)),
        DType::Uint64 => Tensor::U64(conv(a)),
        DType::Bool => Tensor::Bool(a.mapv(|x| x != S::zero()).into_shared()),
        DType::String => Tensor::Str(a.mapv(|x| format_number(x)).into_shared()),
        d if d.is_integer() => Tensor::Coded(
            d,
            a.mapv(|x| {
                let v = if S::IS_FLOAT {
                    let f = x.to_f64();
                    if f.is_nan() {
                        0
                    } else {
                        f as i64
                    }
                } else {
                    x.to_i64()
                };
                minifloat::i64_to_coded(d, v)
            })
            .into_shared(),
        ),
        DType::Float8E8M0 => Tensor::Coded(
            to,
            a.mapv(|x| minifloat::e8m0_encode(x.to_f32(), mode.saturate, mode.rounding))
                .into_shared(),
        ),
        d if d.is_coded() => Tensor::Coded(
            d,
            a.mapv(|x| minifloat::f32_to_coded(d, x.to_f32(), mode.saturate))
                .into_shared(),
        ),
        d => {
            return Err(RefError::UnsupportedDType {
                context: "Cast target".into(),
                dtype: d,
            })
        }
    })
}

/// A number printed as numpy's `astype(str)` does (shortest round-trip repr).
fn format_number<T: Num>(x: T) -> String {
    if !T::IS_FLOAT {
        return x.to_i64().to_string();
    }
    let f = x.to_f64();
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // Shortest repr in the source precision.
    let s = if T::DTYPE == DType::Double {
        python_repr(f, format!("{f:e}"))
    } else {
        let g = x.to_f32();
        python_repr(f, format!("{g:e}"))
    };
    s
}

/// Python's float repr from Rust's shortest scientific form `d.ddde±x`.
fn python_repr(f: f64, sci: String) -> String {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if negative { "-" } else { "" };
    if f != 0.0 && !(-4..16).contains(&exp) {
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        return format!(
            "{sign}{m}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    let point = exp + 1;
    let (int, frac) = if point <= 0 {
        (
            "0".to_string(),
            format!("{}{}", "0".repeat((-point) as usize), digits),
        )
    } else if point as usize >= digits.len() {
        (
            format!("{digits}{}", "0".repeat(point as usize - digits.len())),
            String::new(),
        )
    } else {
        (
            digits[..point as usize].to_string(),
            digits[point as usize..].to_string(),
        )
    };
    let frac = frac.trim_end_matches('0');
    format!("{sign}{int}.{}", if frac.is_empty() { "0" } else { frac })
}

fn parse_number(s: &str) -> f64 {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "nan" | "+nan" | "-nan" => f64::NAN,
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => t.parse::<f64>().unwrap_or(f64::NAN),
    }
}

fn cast_with(t: &Tensor, to: DType, mode: CastMode) -> Result<Tensor> {
    if t.dtype() == to {
        return Ok(t.clone());
    }
    match t {
        Tensor::Bool(a) => numeric_to(&a.mapv(|b| b as u8).into_shared(), to, mode),
        Tensor::Str(a) => {
            if to.is_integer() && !to.is_coded() {
                let v: Array<i64> = a
                    .mapv(|s| {
                        s.trim()
                            .parse::<i64>()
                            .unwrap_or_else(|_| parse_number(&s) as i64)
                    })
                    .into_shared();
                numeric_to(&v, to, mode)
            } else if to == DType::Bool {
                Ok(Tensor::Bool(
                    a.mapv(|s| parse_number(&s) != 0.0).into_shared(),
                ))
            } else {
                numeric_to(&a.mapv(|s| parse_number(&s)).into_shared(), to, mode)
            }
        }
        Tensor::Coded(d, a) => {
            if d.is_integer() {
                numeric_to(
                    &a.mapv(|c| minifloat::coded_to_i64(*d, c)).into_shared(),
                    to,
                    mode,
                )
            } else {
                numeric_to(
                    &a.mapv(|c| minifloat::coded_to_f32(*d, c)).into_shared(),
                    to,
                    mode,
                )
            }
        }
        Tensor::C64(a) if to == DType::Complex128 => Ok(Tensor::C128(
            a.mapv(|c| num_complex::Complex64::new(c.re as f64, c.im as f64))
                .into_shared(),
        )),
        Tensor::C128(a) if to == DType::Complex64 => Ok(Tensor::C64(
            a.mapv(|c| num_complex::Complex32::new(c.re as f32, c.im as f32))
                .into_shared(),
        )),
        other => {
            with_numeric!(other, a => numeric_to(a, to, mode), o => Err(RefError::UnsupportedDType {
                context: format!("Cast to {to}"),
                dtype: o.dtype(),
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_numpy() {
        assert_eq!(format_number(1.0f32), "1.0");
        assert_eq!(format_number(0.478_925_47f32), "0.47892547");
        assert_eq!(format_number(1e-5f32), "1e-05");
        assert_eq!(format_number(-2.5e20f64), "-2.5e+20");
        assert_eq!(format_number(123.0f64), "123.0");
        assert_eq!(format_number(f32::NAN), "nan");
        assert_eq!(format_number(-7i32), "-7");
    }

    #[test]
    fn casts_between_types() {
        let t = Tensor::from_vec(&[3], vec![1.7f32, -2.2, 0.0]).unwrap_or_else(|e| panic!("{e}"));
        let i = cast_tensor(&t, DType::Int32).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            i,
            Tensor::from_vec(&[3], vec![1i32, -2, 0]).unwrap_or_else(|e| panic!("{e}"))
        );
        let b = cast_tensor(&t, DType::Bool).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            b,
            Tensor::from_vec(&[3], vec![true, true, false]).unwrap_or_else(|e| panic!("{e}"))
        );
        let s = Tensor::from_vec(&[2], vec!["1e-5".to_string(), "-INF".to_string()])
            .unwrap_or_else(|e| panic!("{e}"));
        let f = cast_tensor(&s, DType::Float).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            f,
            Tensor::from_vec(&[2], vec![1e-5f32, f32::NEG_INFINITY])
                .unwrap_or_else(|e| panic!("{e}"))
        );
    }
}
