//! Unary elementwise operators: float math (Sqrt, Exp, Erf, Tanh, trig...), activations
//! (Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Elu, Selu, Gelu...), Abs/Neg/Sign,
//! Clip, IsNaN/IsInf, and PRelu.

use num_traits::{Float, Zero};

use super::{one, same_dtype, typed, unsupported, zip_map};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::{cst, erf, AccFloat, Num, Real};
use crate::tensor::{map_float, map_numeric, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Sqrt", 1, LATEST, sqrt);
    reg.register("", "Exp", 1, LATEST, exp);
    reg.register("", "Log", 1, LATEST, log);
    reg.register("", "Erf", 9, LATEST, erf_kernel);
    reg.register("", "Tanh", 1, LATEST, tanh);
    reg.register("", "Sigmoid", 1, LATEST, sigmoid);
    reg.register("", "Reciprocal", 1, LATEST, reciprocal);
    reg.register("", "Floor", 1, LATEST, floor);
    reg.register("", "Ceil", 1, LATEST, ceil);
    reg.register("", "Round", 11, LATEST, round);
    reg.register("", "Sin", 7, LATEST, sin);
    reg.register("", "Cos", 7, LATEST, cos);
    reg.register("", "Tan", 7, LATEST, tan);
    reg.register("", "Asin", 7, LATEST, asin);
    reg.register("", "Acos", 7, LATEST, acos);
    reg.register("", "Atan", 7, LATEST, atan);
    reg.register("", "Sinh", 9, LATEST, sinh);
    reg.register("", "Cosh", 9, LATEST, cosh);
    reg.register("", "Asinh", 9, LATEST, asinh);
    reg.register("", "Acosh", 9, LATEST, acosh);
    reg.register("", "Atanh", 9, LATEST, atanh);
    reg.register("", "Softplus", 1, LATEST, softplus);
    reg.register("", "Softsign", 1, LATEST, softsign);
    reg.register("", "Mish", 18, LATEST, mish);
    reg.register("", "Relu", 1, LATEST, relu);
    reg.register("", "LeakyRelu", 1, LATEST, leaky_relu);
    reg.register("", "Elu", 1, LATEST, elu);
    reg.register("", "Selu", 1, LATEST, selu);
    reg.register("", "Celu", 12, LATEST, celu);
    reg.register("", "ThresholdedRelu", 10, LATEST, thresholded_relu);
    reg.register("", "HardSigmoid", 1, LATEST, hard_sigmoid);
    reg.register("", "HardSwish", 14, LATEST, hard_swish);
    reg.register("", "Gelu", 20, LATEST, gelu);
    reg.register("", "Swish", 24, LATEST, swish);
    reg.register("", "Shrink", 9, LATEST, shrink);
    reg.register("", "Abs", 1, LATEST, abs);
    reg.register("", "Neg", 1, LATEST, neg);
    reg.register("", "Sign", 9, LATEST, sign);
    reg.register("", "Clip", 1, LATEST, clip);
    reg.register("", "IsNaN", 9, LATEST, is_nan);
    reg.register("", "IsInf", 10, LATEST, is_inf);
    reg.register("", "PRelu", 1, LATEST, prelu);
}

/// `f` over a float array, computed in the accumulation type.
fn map_real<T: Real>(a: &Array<T>, f: impl Fn(T::Acc) -> T::Acc) -> Array<T> {
    a.mapv(|v| T::from_acc(f(v.acc()))).into_shared()
}

macro_rules! float_unary {
    ($name:ident, |$x:ident| $e:expr) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let t = ctx.input(inputs, 0)?;
            one(map_float!(t, a => map_real(a, |$x| $e), other => return Err(unsupported(ctx, other))))
        }
    };
}

float_unary!(sqrt, |x| x.sqrt());
float_unary!(exp, |x| x.exp());
float_unary!(log, |x| x.ln());
float_unary!(tanh, |x| x.tanh());
float_unary!(reciprocal, |x| x.recip());
float_unary!(floor, |x| x.floor());
float_unary!(ceil, |x| x.ceil());
float_unary!(sin, |x| x.sin());
float_unary!(cos, |x| x.cos());
float_unary!(tan, |x| x.tan());
float_unary!(asin, |x| x.asin());
float_unary!(acos, |x| x.acos());
float_unary!(atan, |x| x.atan());
float_unary!(sinh, |x| x.sinh());
float_unary!(cosh, |x| x.cosh());
float_unary!(asinh, |x| x.asinh());
float_unary!(acosh, |x| x.acosh());
float_unary!(atanh, |x| x.atanh());
float_unary!(softsign, |x| x / (x.abs() + 1.0));
float_unary!(erf_kernel, |x| cst(erf(x.as_f64())));
float_unary!(sigmoid, |x| sigmoid_of(x));
float_unary!(softplus, |x| softplus_of(x));
float_unary!(mish, |x| x * softplus_of(x).tanh());

fn sigmoid_of<A: AccFloat>(x: A) -> A {
    if x >= A::zero() {
        A::one() / (A::one() + (-x).exp())
    } else {
        let e = x.exp();
        e / (A::one() + e)
    }
}

fn softplus_of<A: AccFloat>(x: A) -> A {
    // log(1 + exp(x)) without overflow.
    if x > cst(20.0) {
        x
    } else {
        x.exp().ln_1p()
    }
}

fn round(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    fn round_half_even<A: Float>(x: A) -> A {
        let r = x.round();
        if (x - x.trunc()).abs() == A::from(0.5).unwrap_or(A::nan()) {
            (x / A::from(2.0).unwrap_or(A::nan())).round() * A::from(2.0).unwrap_or(A::nan())
        } else {
            r
        }
    }
    one(
        map_float!(t, a => map_real(a, round_half_even), other => return Err(unsupported(ctx, other))),
    )
}

fn relu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    fn relu_of<T: Num>(a: &Array<T>) -> Array<T> {
        a.mapv(|x| if x < T::zero() { T::zero() } else { x })
            .into_shared()
    }
    one(map_numeric!(t, a => relu_of(a), other => return Err(unsupported(ctx, other))))
}

/// Defines a float activation kernel whose math takes attribute values.
macro_rules! float_activation {
    ($name:ident, [$($attr:ident = $key:literal : $default:expr),*], |$x:ident| $e:expr) => {
        fn $name(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
            let t = ctx.input(inputs, 0)?;
            $(let $attr = ctx.attr_float($key, $default)? as f64;)*
            fn apply<T: Real>(a: &Array<T>, $($attr: f64),*) -> Array<T> {
                $(let $attr: T::Acc = cst($attr);)*
                map_real(a, |$x| $e)
            }
            one(map_float!(t, a => apply(a, $($attr),*), other => return Err(unsupported(ctx, other))))
        }
    };
}

float_activation!(leaky_relu, [alpha = "alpha": 0.01], |x| if x < Zero::zero() { x * alpha } else { x });
float_activation!(elu, [alpha = "alpha": 1.0], |x| if x < Zero::zero() { alpha * (x.exp() - cst(1.0)) } else { x });
float_activation!(
    selu,
    [alpha = "alpha": 1.673_263_2, gamma = "gamma": 1.050_701],
    |x| if x <= Zero::zero() { gamma * (alpha * x.exp() - alpha) } else { gamma * x }
);
// NaN stays NaN, as in Celu's function body (alpha * Elu(x / alpha)); `max` would drop it.
float_activation!(celu, [alpha = "alpha": 1.0], |x| {
    let zero: <T as Real>::Acc = Zero::zero();
    let neg = alpha * ((x / alpha).exp() - cst(1.0));
    if x.is_nan() {
        x
    } else {
        x.max(zero) + neg.min(zero)
    }
});
float_activation!(thresholded_relu, [alpha = "alpha": 1.0], |x| if x > alpha { x } else { Zero::zero() });
float_activation!(
    hard_sigmoid,
    [alpha = "alpha": 0.2, beta = "beta": 0.5],
    // NaN stays NaN, as in onnxruntime, onnx's reference and the function body (Max of Min).
    |x| if x.is_nan() { x } else { (alpha * x + beta).max(Zero::zero()).min(cst(1.0)) }
);
float_activation!(swish, [alpha = "alpha": 1.0], |x| x * sigmoid_of(alpha * x));
float_activation!(hard_swish, [], |x| x
    * (x / cst(6.0) + cst(0.5)).max(Zero::zero()).min(cst(1.0)));
float_activation!(shrink_float, [bias = "bias": 0.0, lambd = "lambd": 0.5], |x| if x < -lambd {
    x + bias
} else if x > lambd {
    x - bias
} else {
    Zero::zero()
});

/// Shrink over every numeric type the schema allows: floats as above; integers compared in
/// f64 and shifted by a whole bias in their own type (exact, as the function body's Add and Sub
/// over an integer constant), by a fractional one in f64 cast back as onnx's reference does
/// (`astype`: toward zero).
fn shrink(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    if t.dtype().is_float() {
        return shrink_float(ctx, inputs);
    }
    let bias = ctx.attr_float("bias", 0.0)? as f64;
    let lambd = ctx.attr_float("lambd", 0.5)? as f64;
    fn apply<T: Num>(a: &Array<T>, bias: f64, lambd: f64) -> Array<T> {
        a.mapv(|v| {
            let x = v.to_f64();
            let whole = bias.fract() == 0.0;
            if x < -lambd {
                match whole {
                    true => v.add(T::from_f64(bias)),
                    false => T::from_f64(x + bias),
                }
            } else if x > lambd {
                match whole {
                    true => v.sub(T::from_f64(bias)),
                    false => T::from_f64(x - bias),
                }
            } else {
                T::zero()
            }
        })
        .into_shared()
    }
    one(map_numeric!(t, a => apply(a, bias, lambd), other => return Err(unsupported(ctx, other))))
}

fn gelu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let tanh_approx = match ctx.attr_string("approximate", "none")?.as_str() {
        "none" => false,
        "tanh" => true,
        other => {
            return Err(ctx.err(format!(
                "approximate must be 'none' or 'tanh', got '{other}'"
            )))
        }
    };
    fn apply<T: Real>(a: &Array<T>, tanh_approx: bool) -> Array<T> {
        a.mapv(|v| {
            let x = v.to_f64();
            let y = if tanh_approx {
                0.5 * x
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
            } else {
                0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
            };
            T::from_f64(y)
        })
        .into_shared()
    }
    one(map_float!(t, a => apply(a, tanh_approx), other => return Err(unsupported(ctx, other))))
}

fn abs(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    one(
        map_numeric!(t, a => a.mapv(Num::abs).into_shared(), other => return Err(unsupported(ctx, other))),
    )
}

fn neg(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    one(
        map_numeric!(t, a => a.mapv(Num::neg).into_shared(), other => return Err(unsupported(ctx, other))),
    )
}

fn sign(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    fn sign_of<T: Num>(a: &Array<T>) -> Array<T> {
        a.mapv(|x| {
            if x > T::zero() {
                T::one()
            } else if x < T::zero() {
                T::one().neg()
            } else {
                x
            }
        })
        .into_shared()
    }
    one(map_numeric!(t, a => sign_of(a), other => return Err(unsupported(ctx, other))))
}

fn clip(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    fn clip_of<T: Num>(a: &Array<T>, lo: Option<T>, hi: Option<T>) -> Array<T> {
        // One loop per bound combination, so the bounds are not re-tested per element. NaN
        // passes through (every comparison with it is false).
        let above = |x: T, l: T| if x < l { l } else { x };
        let below = |x: T, h: T| if x > h { h } else { x };
        match (lo, hi) {
            (Some(l), Some(h)) => a.mapv(|x| below(above(x, l), h)),
            (Some(l), None) => a.mapv(|x| above(x, l)),
            (None, Some(h)) => a.mapv(|x| below(x, h)),
            (None, None) => return a.clone(),
        }
        .into_shared()
    }
    if ctx.opset < 11 {
        // Before 11 the bounds are attributes whose defaults are the float range, so an
        // unset bound still moves -inf/inf (as onnxruntime's Clip-6 does).
        let lo = Some(ctx.attr_opt_float("min")?.unwrap_or(f32::MIN).into());
        let hi = Some(ctx.attr_opt_float("max")?.unwrap_or(f32::MAX).into());
        return one(
            map_numeric!(t, a => clip_of(a, lo.map(Num::from_f64), hi.map(Num::from_f64)), other => return Err(unsupported(ctx, other))),
        );
    }
    let lo = ctx.opt_input(inputs, 1)?;
    let hi = ctx.opt_input(inputs, 2)?;
    for b in [lo, hi].into_iter().flatten() {
        same_dtype(ctx, &[t, b])?;
        if b.len() != 1 {
            return Err(ctx.err(format!(
                "min and max must be scalars, got shape {:?}",
                b.shape()
            )));
        }
    }
    fn bound<T: Num>(b: Option<&Tensor>) -> Result<Option<T>> {
        Ok(match b {
            Some(b) => typed::<T>(b)?.iter().next().copied(),
            None => None,
        })
    }
    one(
        map_numeric!(t, a => clip_of(a, bound(lo)?, bound(hi)?), other => return Err(unsupported(ctx, other))),
    )
}

fn is_nan(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let v = t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    one(Tensor::from_vec(
        t.shape(),
        v.into_iter().map(f64::is_nan).collect(),
    )?)
}

fn is_inf(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let pos = ctx.attr_int("detect_positive", 1)? == 1;
    let negative = ctx.attr_int("detect_negative", 1)? == 1;
    let v = t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let out = v
        .into_iter()
        .map(|x| x.is_infinite() && ((x > 0.0 && pos) || (x < 0.0 && negative)))
        .collect();
    one(Tensor::from_vec(t.shape(), out)?)
}

fn prelu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let slope = ctx.input(inputs, 1)?;
    same_dtype(ctx, &[x, slope])?;
    // Before opset 7 the slope may be [C] against [N, C, ...]: align it to axis 1.
    let slope = if ctx.opset < 7
        && slope.rank() == 1
        && x.rank() > 2
        && slope.len() == x.shape()[1]
        && slope.len() != x.shape()[x.rank() - 1]
    {
        let mut shape = vec![1; x.rank() - 1];
        shape[0] = slope.len();
        std::borrow::Cow::Owned(slope.reshaped(&shape)?)
    } else {
        std::borrow::Cow::Borrowed(slope)
    };
    one(
        map_numeric!(x, a => zip_map(a, typed(&slope)?, |p, q| if *p < Num::zero() { p.mul(*q) } else { *p })?, other => return Err(unsupported(ctx, other))),
    )
}
