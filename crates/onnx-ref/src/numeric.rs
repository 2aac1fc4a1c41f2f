//! Numeric element traits the generic kernels are written against: `Num` (arithmetic that
//! never panics: integers wrap, integer division by zero gives 0) and `Real` (floating-point
//! types with an accumulation type: f32 for f16/bf16/f32, f64 for f64). `Tensor::to_f64_vec`
//! is here too: it reads every real element through `Num`. Layer: above `tensor` (`Num`
//! extends its `Elem`), below the kernels.

use half::{bf16, f16};
use num_traits::Float;

use crate::error::{RefError, Result};
use crate::minifloat;
use crate::tensor::{with_numeric, Elem, Tensor};

/// Real numeric element types (floats and integers).
pub trait Num: Elem + Copy + PartialOrd {
    /// True for floating-point types.
    const IS_FLOAT: bool;
    /// True for signed types (floats included).
    const IS_SIGNED: bool;
    fn zero() -> Self;
    fn one() -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Division; integers truncate, and divide by zero gives 0 instead of panicking.
    fn div(self, o: Self) -> Self;
    /// Remainder with the sign of the dividend (C `fmod`); integer `% 0` gives 0.
    fn rem(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    /// Conversion with `as` semantics (saturating float-to-int, NaN to 0).
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
    fn from_i64(v: i64) -> Self;
    fn to_i64(self) -> i64;
    /// The smallest value (negative infinity for floats).
    fn lowest() -> Self;
    /// The largest value (infinity for floats).
    fn highest() -> Self;
    fn is_nan(self) -> bool;
    /// `numpy.maximum`: NaN wins.
    fn max_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() {
                self
            } else {
                o
            }
        } else if o > self {
            o
        } else {
            self
        }
    }
    /// The larger of the two where neither is NaN, the one that is not NaN otherwise (NaN when
    /// both are): MaxPool's fold. Floats compute it without a branch.
    #[inline]
    fn max_skip_nan(self, o: Self) -> Self {
        if o.is_nan() || !(self.is_nan() || o > self) {
            self
        } else {
            o
        }
    }
    /// `numpy.minimum`: NaN wins.
    fn min_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            if self.is_nan() {
                self
            } else {
                o
            }
        } else if o < self {
            o
        } else {
            self
        }
    }
}

macro_rules! impl_num_int {
    ($($ty:ty, $signed:expr;)*) => {$(
        impl Num for $ty {
            const IS_FLOAT: bool = false;
            const IS_SIGNED: bool = $signed;
            #[inline] fn zero() -> Self { 0 }
            #[inline] fn one() -> Self { 1 }
            #[inline] fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline] fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline] fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline] fn div(self, o: Self) -> Self { self.checked_div(o).unwrap_or(0) }
            #[inline] fn rem(self, o: Self) -> Self { self.checked_rem(o).unwrap_or(0) }
            #[inline] fn neg(self) -> Self { (0 as $ty).wrapping_sub(self) }
            #[inline] fn abs(self) -> Self { if self < (0 as $ty) { self.neg() } else { self } }
            #[inline] fn from_f64(v: f64) -> Self { v as $ty }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f32(v: f32) -> Self { v as $ty }
            #[inline] fn to_f32(self) -> f32 { self as f32 }
            #[inline] fn from_i64(v: i64) -> Self { v as $ty }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn lowest() -> Self { <$ty>::MIN }
            #[inline] fn highest() -> Self { <$ty>::MAX }
            #[inline] fn is_nan(self) -> bool { false }
        }
    )*};
}

impl_num_int! {
    i8, true; i16, true; i32, true; i64, true;
    u8, false; u16, false; u32, false; u64, false;
}

macro_rules! impl_num_float {
    ($($ty:ty;)*) => {$(
        impl Num for $ty {
            const IS_FLOAT: bool = true;
            const IS_SIGNED: bool = true;
            #[inline] fn zero() -> Self { 0.0 }
            #[inline] fn one() -> Self { 1.0 }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            #[inline] fn rem(self, o: Self) -> Self { self % o }
            #[inline] fn neg(self) -> Self { -self }
            #[inline] fn abs(self) -> Self { <$ty>::abs(self) }
            #[inline] fn from_f64(v: f64) -> Self { v as $ty }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f32(v: f32) -> Self { v as $ty }
            #[inline] fn to_f32(self) -> f32 { self as f32 }
            #[inline] fn from_i64(v: i64) -> Self { v as $ty }
            #[inline] fn to_i64(self) -> i64 { self as i64 }
            #[inline] fn lowest() -> Self { <$ty>::NEG_INFINITY }
            #[inline] fn highest() -> Self { <$ty>::INFINITY }
            #[inline] fn is_nan(self) -> bool { <$ty>::is_nan(self) }
            #[inline] fn max_skip_nan(self, o: Self) -> Self { <$ty>::max(self, o) }
        }
    )*};
}

impl_num_float! { f32; f64; }

macro_rules! impl_num_half {
    ($($ty:ty;)*) => {$(
        impl Num for $ty {
            const IS_FLOAT: bool = true;
            const IS_SIGNED: bool = true;
            #[inline] fn zero() -> Self { <$ty>::ZERO }
            #[inline] fn one() -> Self { <$ty>::ONE }
            #[inline] fn add(self, o: Self) -> Self { self + o }
            #[inline] fn sub(self, o: Self) -> Self { self - o }
            #[inline] fn mul(self, o: Self) -> Self { self * o }
            #[inline] fn div(self, o: Self) -> Self { self / o }
            #[inline] fn rem(self, o: Self) -> Self { <$ty>::from_f32(self.to_f32() % o.to_f32()) }
            #[inline] fn neg(self) -> Self { -self }
            #[inline] fn abs(self) -> Self { <$ty>::from_bits(self.to_bits() & 0x7FFF) }
            #[inline] fn from_f64(v: f64) -> Self { <$ty>::from_f64(v) }
            #[inline] fn to_f64(self) -> f64 { <$ty>::to_f64(self) }
            #[inline] fn from_f32(v: f32) -> Self { <$ty>::from_f32(v) }
            #[inline] fn to_f32(self) -> f32 { <$ty>::to_f32(self) }
            #[inline] fn from_i64(v: i64) -> Self { <$ty>::from_f64(v as f64) }
            #[inline] fn to_i64(self) -> i64 { <$ty>::to_f32(self) as i64 }
            #[inline] fn lowest() -> Self { <$ty>::NEG_INFINITY }
            #[inline] fn highest() -> Self { <$ty>::INFINITY }
            #[inline] fn is_nan(self) -> bool { <$ty>::is_nan(self) }
        }
    )*};
}

impl_num_half! { f16; bf16; }

/// The float types math is done in (f32, f64).
pub trait AccFloat: Float + std::iter::Sum + Send + Sync + std::fmt::Debug + 'static {
    /// A constant (rounded to this type).
    fn lit(v: f64) -> Self;
    /// Widening to f64.
    fn as_f64(self) -> f64;
}

impl AccFloat for f32 {
    #[inline]
    fn lit(v: f64) -> Self {
        v as f32
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl AccFloat for f64 {
    #[inline]
    fn lit(v: f64) -> Self {
        v
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self
    }
}

/// Floating-point element types, computed through an accumulation type `Acc`.
pub trait Real: Num {
    /// The type math is done in (f32 for the 16-bit floats).
    type Acc: AccFloat;
    fn acc(self) -> Self::Acc;
    fn from_acc(a: Self::Acc) -> Self;
}

impl Real for f32 {
    type Acc = f32;
    #[inline]
    fn acc(self) -> f32 {
        self
    }
    #[inline]
    fn from_acc(a: f32) -> Self {
        a
    }
}

impl Real for f64 {
    type Acc = f64;
    #[inline]
    fn acc(self) -> f64 {
        self
    }
    #[inline]
    fn from_acc(a: f64) -> Self {
        a
    }
}

impl Real for f16 {
    type Acc = f32;
    #[inline]
    fn acc(self) -> f32 {
        self.to_f32()
    }
    #[inline]
    fn from_acc(a: f32) -> Self {
        f16::from_f32(a)
    }
}

impl Real for bf16 {
    type Acc = f32;
    #[inline]
    fn acc(self) -> f32 {
        self.to_f32()
    }
    #[inline]
    fn from_acc(a: f32) -> Self {
        bf16::from_f32(a)
    }
}

/// A constant in an accumulation type.
#[inline]
pub fn cst<A: AccFloat>(v: f64) -> A {
    A::lit(v)
}

/// The error function (Abramowitz–Stegun 7.1.26 is too coarse; this is the W. J. Cody
/// rational approximation used by most libms, accurate to double precision).
#[allow(clippy::excessive_precision)] // Cody's published coefficients, kept verbatim.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    let r = if ax < 0.5 {
        let t = x * x;
        let p = [
            3.209_377_589_138_469_4e3,
            3.774_852_376_853_020_2e2,
            1.138_641_541_510_501_6e2,
            3.161_123_743_870_565_6,
            1.857_777_061_846_031_5e-1,
        ];
        let q = [
            2.844_236_833_439_170_6e3,
            1.282_616_526_077_372_3e3,
            2.440_246_379_344_441_7e2,
            2.360_129_095_234_412_1e1,
            1.0,
        ];
        let num = (((p[4] * t + p[3]) * t + p[2]) * t + p[1]) * t + p[0];
        let den = (((q[4] * t + q[3]) * t + q[2]) * t + q[1]) * t + q[0];
        return x * num / den;
    } else if ax < 4.0 {
        let p = [
            1.230_339_354_797_997_2e3,
            2.051_078_377_826_071_5e3,
            1.712_047_612_634_070_7e3,
            8.819_522_212_417_690_9e2,
            2.986_351_381_974_001_3e2,
            6.611_919_063_714_163e1,
            8.883_149_794_388_376,
            5.641_884_969_886_701e-1,
            2.153_115_354_744_038_3e-8,
        ];
        let q = [
            1.230_339_354_803_749_5e3,
            3.439_367_674_143_721_6e3,
            4.362_619_090_143_247e3,
            3.290_799_235_733_459_7e3,
            1.621_389_574_566_690_3e3,
            5.371_811_018_620_098_6e2,
            1.176_939_508_913_125e2,
            1.574_492_611_070_983_5e1,
            1.0,
        ];
        let mut num = p[8];
        let mut den = q[8];
        for i in (0..8).rev() {
            num = num * ax + p[i];
            den = den * ax + q[i];
        }
        let erfc = (-ax * ax).exp() * num / den;
        1.0 - erfc
    } else {
        let t = 1.0 / (ax * ax);
        let p = [
            -6.587_491_615_298_378e-4,
            -1.608_378_514_874_227_5e-2,
            -1.257_817_261_112_292_6e-1,
            -3.603_448_999_498_044_5e-1,
            -3.053_266_349_612_323_4e-1,
            -1.631_538_713_730_709_7e-2,
        ];
        let q = [
            2.335_204_976_268_691_8e-3,
            6.051_834_131_244_131_9e-2,
            5.279_051_029_514_284_6e-1,
            1.872_952_849_923_460_4,
            2.568_520_192_289_822,
            1.0,
        ];
        let mut num = p[5];
        let mut den = q[5];
        for i in (0..5).rev() {
            num = num * t + p[i];
            den = den * t + q[i];
        }
        let frac_1_sqrt_pi = 0.564_189_583_547_756_3;
        let erfc = (-ax * ax).exp() / ax * (frac_1_sqrt_pi + t * num / den);
        1.0 - erfc
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

impl Tensor {
    /// The elements as `f64` (real numeric, bool and coded tensors).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let v = match self {
            Tensor::Bool(a) => a.iter().map(|&x| x as u8 as f64).collect(),
            Tensor::Coded(d, a) => a
                .iter()
                .map(|&c| minifloat::coded_to_f32(*d, c) as f64)
                .collect(),
            t => {
                with_numeric!(t, a => a.iter().map(|x| Num::to_f64(*x)).collect(), other => {
                    return Err(RefError::UnsupportedDType {
                        context: "expected a real numeric tensor".into(),
                        dtype: other.dtype(),
                    })
                })
            }
        };
        Ok(v)
    }
}

#[cfg(test)]
#[allow(clippy::excessive_precision)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_never_panics() {
        assert_eq!(Num::div(7i32, 0), 0);
        assert_eq!(Num::div(i32::MIN, -1), 0);
        assert_eq!(Num::div(-7i32, 2), -3);
        assert_eq!(Num::rem(-7i32, 2), -1);
    }

    #[test]
    fn erf_values() {
        let cases = [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.5, 0.999_593_047_982_555),
            (-3.0, -0.999_977_909_503_001_4),
            (5.0, 0.999_999_999_998_462_5),
        ];
        for (x, want) in cases {
            assert!(
                (erf(x) - want).abs() < 1e-13,
                "erf({x}) = {} != {want}",
                erf(x)
            );
        }
    }

    #[test]
    fn nan_propagates_in_max() {
        assert!(Num::max_nan(1.0f32, f32::NAN).is_nan());
        assert_eq!(Num::max_nan(1.0f32, 2.0), 2.0);
        assert_eq!(Num::min_nan(3u8, 2), 2);
    }
}
