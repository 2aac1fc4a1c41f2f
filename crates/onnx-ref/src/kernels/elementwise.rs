//! Broadcasting binary and variadic elementwise operators: arithmetic (Add, Sub, Mul, Div,
//! Pow, Mod), Max/Min/Sum/Mean, comparisons, logic, bitwise ops and Where.

use ndarray::Zip;

use super::{
    all_inputs, broadcast_shapes, broadcast_view, one, same_dtype, typed, typed_like, unsupported,
    zip_map,
};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{check_size, map_all, map_numeric, with_numeric, Array, Elem, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Add", 1, LATEST, add);
    reg.register("", "Sub", 1, LATEST, sub);
    reg.register("", "Mul", 1, LATEST, mul);
    reg.register("", "Div", 1, LATEST, div);
    reg.register("", "Pow", 1, LATEST, pow);
    reg.register("", "Mod", 10, LATEST, modulo);
    reg.register("", "Max", 1, LATEST, max);
    reg.register("", "Min", 1, LATEST, min);
    reg.register("", "Sum", 1, LATEST, sum);
    reg.register("", "Mean", 1, LATEST, mean);
    reg.register("", "Equal", 1, LATEST, equal);
    reg.register("", "Less", 1, LATEST, less);
    reg.register("", "Greater", 1, LATEST, greater);
    reg.register("", "LessOrEqual", 12, LATEST, less_equal);
    reg.register("", "GreaterOrEqual", 12, LATEST, greater_equal);
    reg.register("", "And", 1, LATEST, and);
    reg.register("", "Or", 1, LATEST, or);
    reg.register("", "Xor", 1, LATEST, xor);
    reg.register("", "Not", 1, LATEST, not);
    reg.register("", "Where", 9, LATEST, where_);
    reg.register("", "BitShift", 11, LATEST, bitshift);
    reg.register("", "BitwiseAnd", 18, LATEST, bitwise_and);
    reg.register("", "BitwiseOr", 18, LATEST, bitwise_or);
    reg.register("", "BitwiseXor", 18, LATEST, bitwise_xor);
    reg.register("", "BitwiseNot", 18, LATEST, bitwise_not);
}

/// The two operands of a binary op; before opset 7, `broadcast`/`axis` attributes align B.
fn binary_operands<'v>(
    ctx: &KernelCtx,
    inputs: &[Option<&'v Value>],
) -> Result<(&'v Tensor, std::borrow::Cow<'v, Tensor>)> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    if ctx.opset < 7 && ctx.attr_int("broadcast", 0)? == 1 {
        if let Some(axis) = ctx.attr_opt_int("axis")? {
            let rank = a.rank() as i64;
            let axis = if axis < 0 { axis + rank } else { axis };
            if axis < 0 || axis + b.rank() as i64 > rank {
                return Err(ctx.err(format!(
                    "legacy broadcast axis {axis} does not fit ranks {} and {}",
                    a.rank(),
                    b.rank()
                )));
            }
            let mut shape = vec![1; axis as usize];
            shape.extend_from_slice(b.shape());
            shape.resize(a.rank(), 1);
            return Ok((a, std::borrow::Cow::Owned(b.reshaped(&shape)?)));
        }
    }
    Ok((a, std::borrow::Cow::Borrowed(b)))
}

macro_rules! arith_kernel {
    ($name:ident, $method:ident) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let (a, b) = binary_operands(ctx, inputs)?;
            same_dtype(ctx, &[a, &b])?;
            one(map_numeric!(a, x => zip_map(x, typed(&b)?, |p, q| Num::$method(*p, *q))?, other => return Err(unsupported(ctx, other))))
        }
    };
}

arith_kernel!(add, add);
arith_kernel!(sub, sub);
arith_kernel!(mul, mul);
arith_kernel!(div, div);

fn modulo(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let (a, b) = binary_operands(ctx, inputs)?;
    same_dtype(ctx, &[a, &b])?;
    let fmod = ctx.attr_int("fmod", 0)? == 1;
    fn py_mod<T: Num>(x: T, y: T) -> T {
        let r = x.rem(y);
        if T::IS_SIGNED && r != T::zero() && ((r < T::zero()) != (y < T::zero())) {
            r.add(y)
        } else {
            r
        }
    }
    one(map_numeric!(a, x => {
        let y = typed(&b)?;
        if fmod { zip_map(x, y, |p, q| Num::rem(*p, *q))? } else { zip_map(x, y, |p, q| py_mod(*p, *q))? }
    }, other => return Err(unsupported(ctx, other))))
}

fn pow(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let (a, b) = binary_operands(ctx, inputs)?;
    let exp: Array<f64> = match b.as_ref() {
        Tensor::F64(e) => e.clone(),
        other => {
            let v = other.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
            crate::tensor::array_from_vec(other.shape(), v)?
        }
    };
    fn powv<T: Num>(x: &Array<T>, e: &Array<f64>) -> Result<Array<T>> {
        // A scalar exponent of 1 or 2 (LayerNorm's variance, squared errors): exact without
        // pow, since a float's square rounded once is what pow rounds to.
        let scalar = (e.len() == 1 && e.ndim() <= x.ndim())
            .then(|| e.iter().next().copied())
            .flatten();
        if T::IS_FLOAT && e.shape().iter().all(|&d| d == 1) {
            match scalar {
                Some(2.0) => return Ok(x.mapv(|p| p.mul(p)).into_shared()),
                Some(1.0) => return Ok(x.clone()),
                _ => {}
            }
        }
        if T::IS_FLOAT {
            zip_map(x, e, |p, q| T::from_f64(p.to_f64().powf(*q)))
        } else {
            zip_map(x, e, |p, q| {
                let (p, q) = (p.to_i64(), *q);
                if q >= 0.0 && q.fract() == 0.0 && q < 64.0 {
                    T::from_i64(p.wrapping_pow(q as u32))
                } else {
                    T::from_f64((p as f64).powf(q))
                }
            })
        }
    }
    one(map_numeric!(a, x => powv(x, &exp)?, other => return Err(unsupported(ctx, other))))
}

/// Folds a variadic op over all inputs with broadcasting.
fn variadic<T: Num>(ts: &[&Tensor], f: impl Fn(T, T) -> T) -> Result<Array<T>> {
    let mut acc: Array<T> = typed::<T>(ts[0])?.clone();
    for t in &ts[1..] {
        acc = zip_map(&acc, typed::<T>(t)?, |p, q| f(*p, *q))?;
    }
    Ok(acc)
}

fn variadic_inputs<'v>(ctx: &KernelCtx, inputs: &[Option<&'v Value>]) -> Result<Vec<&'v Tensor>> {
    let ts = all_inputs(ctx, inputs)?;
    if ts.is_empty() {
        return Err(ctx.err("needs at least one input"));
    }
    same_dtype(ctx, &ts)?;
    Ok(ts)
}

fn max(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts = variadic_inputs(ctx, inputs)?;
    one(
        map_numeric!(ts[0], _a => variadic(&ts, Num::max_nan)?, other => return Err(unsupported(ctx, other))),
    )
}

fn min(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts = variadic_inputs(ctx, inputs)?;
    one(
        map_numeric!(ts[0], _a => variadic(&ts, Num::min_nan)?, other => return Err(unsupported(ctx, other))),
    )
}

fn sum(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts = variadic_inputs(ctx, inputs)?;
    one(
        map_numeric!(ts[0], _a => variadic(&ts, Num::add)?, other => return Err(unsupported(ctx, other))),
    )
}

fn mean(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts = variadic_inputs(ctx, inputs)?;
    fn mean_of<T: Num>(ts: &[&Tensor]) -> Result<Array<T>> {
        let total = variadic::<T>(ts, Num::add)?;
        let n = T::from_f64(ts.len() as f64);
        Ok(total.mapv(|x| x.div(n)).into_shared())
    }
    one(map_numeric!(ts[0], _a => mean_of(&ts)?, other => return Err(unsupported(ctx, other))))
}

macro_rules! compare_kernel {
    ($name:ident, |$p:ident, $q:ident| $e:expr) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let (a, b) = binary_operands(ctx, inputs)?;
            same_dtype(ctx, &[a, &b])?;
            let out = match a {
                Tensor::Bool(x) => zip_map(x, typed::<bool>(&b)?, |$p, $q| $e)?,
                Tensor::Str(x) => zip_map(x, typed::<String>(&b)?, |$p, $q| $e)?,
                t => with_numeric!(t, x => zip_map(x, typed_like(x, &b)?, |$p, $q| $e)?, other => return Err(unsupported(ctx, other))),
            };
            one(Tensor::Bool(out))
        }
    };
}

compare_kernel!(equal, |p, q| p == q);
compare_kernel!(less, |p, q| p < q);
compare_kernel!(greater, |p, q| p > q);
compare_kernel!(less_equal, |p, q| p <= q);
compare_kernel!(greater_equal, |p, q| p >= q);

macro_rules! logic_kernel {
    ($name:ident, $op:tt) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let (a, b) = binary_operands(ctx, inputs)?;
            match (a, b.as_ref()) {
                (Tensor::Bool(x), Tensor::Bool(y)) => one(Tensor::Bool(zip_map(x, y, |p, q| *p $op *q)?)),
                _ => Err(ctx.err("inputs must be bool tensors")),
            }
        }
    };
}

logic_kernel!(and, &);
logic_kernel!(or, |);
logic_kernel!(xor, ^);

fn not(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    match ctx.input(inputs, 0)? {
        Tensor::Bool(x) => one(Tensor::Bool(x.mapv(|b| !b).into_shared())),
        other => Err(unsupported(ctx, other)),
    }
}

fn where_(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let cond = match ctx.input(inputs, 0)? {
        Tensor::Bool(c) => c,
        other => return Err(unsupported(ctx, other)),
    };
    let x = ctx.input(inputs, 1)?;
    let y = ctx.input(inputs, 2)?;
    same_dtype(ctx, &[x, y])?;
    fn select<T: Elem>(c: &Array<bool>, x: &Array<T>, y: &Array<T>) -> Result<Array<T>> {
        let shape = broadcast_shapes(&broadcast_shapes(c.shape(), x.shape())?, y.shape())?;
        check_size("Where result", &shape)?;
        let (cv, xv, yv) = (
            broadcast_view(c, &shape)?,
            broadcast_view(x, &shape)?,
            broadcast_view(y, &shape)?,
        );
        Ok(Zip::from(&cv)
            .and(&xv)
            .and(&yv)
            .map_collect(|c, a, b| if *c { a.clone() } else { b.clone() })
            .into_shared())
    }
    one(map_all!(x, a => select(cond, a, typed(y)?)?))
}

/// Integer types for the bitwise ops.
trait Bits:
    Num
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
    + std::ops::Not<Output = Self>
{
    const BITS: u32;
    fn shl(self, n: u32) -> Self;
    fn shr(self, n: u32) -> Self;
}

macro_rules! impl_bits {
    ($($ty:ty),*) => {$(
        impl Bits for $ty {
            const BITS: u32 = <$ty>::BITS;
            fn shl(self, n: u32) -> Self { self.checked_shl(n).unwrap_or(0) }
            fn shr(self, n: u32) -> Self { self.checked_shr(n).unwrap_or(0) }
        }
    )*};
}
impl_bits!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! with_int {
    ($t:expr, $a:ident => $body:expr, $other:ident => $fallback:expr) => {
        match $t {
            Tensor::I8($a) => Tensor::I8($body),
            Tensor::I16($a) => Tensor::I16($body),
            Tensor::I32($a) => Tensor::I32($body),
            Tensor::I64($a) => Tensor::I64($body),
            Tensor::U8($a) => Tensor::U8($body),
            Tensor::U16($a) => Tensor::U16($body),
            Tensor::U32($a) => Tensor::U32($body),
            Tensor::U64($a) => Tensor::U64($body),
            $other => $fallback,
        }
    };
}

fn bitshift(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let (a, b) = binary_operands(ctx, inputs)?;
    same_dtype(ctx, &[a, &b])?;
    let left = match ctx.attr_string("direction", "")?.as_str() {
        "LEFT" => true,
        "RIGHT" => false,
        d => return Err(ctx.err(format!("direction must be LEFT or RIGHT, got '{d}'"))),
    };
    fn shift<T: Bits>(x: &Array<T>, y: &Array<T>, left: bool) -> Result<Array<T>> {
        zip_map(x, y, |p, q| {
            // numpy saturates out-of-range shift counts: 0, or -1 when shifting a negative
            // value right (the sign fills the result).
            let n = q.to_i64();
            if n < 0 || n >= T::BITS as i64 {
                if !left && *p < T::zero() {
                    !T::zero()
                } else {
                    T::zero()
                }
            } else if left {
                p.shl(n as u32)
            } else {
                p.shr(n as u32)
            }
        })
    }
    one(
        with_int!(a, x => shift(x, typed(&b)?, left)?, other => return Err(unsupported(ctx, other))),
    )
}

macro_rules! bitwise_kernel {
    ($name:ident, $op:tt) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let (a, b) = binary_operands(ctx, inputs)?;
            same_dtype(ctx, &[a, &b])?;
            one(with_int!(a, x => zip_map(x, typed_like(x, &b)?, |p, q| *p $op *q)?, other => match other {
                Tensor::Bool(x) => Tensor::Bool(zip_map(x, typed::<bool>(&b)?, |p, q| *p $op *q)?),
                o => return Err(unsupported(ctx, o)),
            }))
        }
    };
}

bitwise_kernel!(bitwise_and, &);
bitwise_kernel!(bitwise_or, |);
bitwise_kernel!(bitwise_xor, ^);

fn bitwise_not(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    one(
        with_int!(a, x => x.mapv(|v| !v).into_shared(), other => match other {
            Tensor::Bool(x) => Tensor::Bool(x.mapv(|v| !v).into_shared()),
            o => return Err(unsupported(ctx, o)),
        }),
    )
}
