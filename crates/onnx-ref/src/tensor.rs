//! `Tensor`: an n-dimensional array of one element type, shared (`ArcArray`) so that passing
//! a value to a kernel never copies it. Narrow types (float8, float6, float4, 4-bit and 2-bit
//! integers) are stored as one `u8` code per element beside their dtype tag.
//!
//! The `map_*`/`with_*` macros dispatch on the element type once per kernel call, so kernels
//! are generic functions over the element type with no per-element dynamic dispatch.

use half::{bf16, f16};
use ndarray::{ArcArray, IxDyn};
use num_complex::{Complex32, Complex64};

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::minifloat;

/// A shared n-dimensional array with a dynamic number of axes.
pub type Array<T> = ArcArray<T, IxDyn>;

/// The largest number of elements a tensor may have (2^32): anything larger is refused rather
/// than allocated.
pub const MAX_ELEMENTS: u64 = 1 << 32;

/// A tensor value: one variant per storage type.
#[derive(Debug, Clone, PartialEq)]
pub enum Tensor {
    F32(Array<f32>),
    F64(Array<f64>),
    F16(Array<f16>),
    BF16(Array<bf16>),
    I8(Array<i8>),
    I16(Array<i16>),
    I32(Array<i32>),
    I64(Array<i64>),
    U8(Array<u8>),
    U16(Array<u16>),
    U32(Array<u32>),
    U64(Array<u64>),
    Bool(Array<bool>),
    Str(Array<String>),
    C64(Array<Complex32>),
    C128(Array<Complex64>),
    /// A narrow type (`DType::is_coded`): one code per element, see `crate::minifloat`.
    Coded(DType, Array<u8>),
}

/// An element type with its own `Tensor` variant.
pub trait Elem: Clone + Default + Send + Sync + std::fmt::Debug + 'static {
    /// The ONNX data type of this element type.
    const DTYPE: DType;
    /// Wraps an array into its tensor variant.
    fn wrap(a: Array<Self>) -> Tensor;
    /// The array when the tensor holds this element type.
    fn unwrap(t: &Tensor) -> Option<&Array<Self>>;
}

macro_rules! impl_elem {
    ($($ty:ty => $variant:ident, $dtype:ident;)*) => {$(
        impl Elem for $ty {
            const DTYPE: DType = DType::$dtype;
            fn wrap(a: Array<Self>) -> Tensor {
                Tensor::$variant(a)
            }
            fn unwrap(t: &Tensor) -> Option<&Array<Self>> {
                match t {
                    Tensor::$variant(a) => Some(a),
                    _ => None,
                }
            }
        }
    )*};
}

impl_elem! {
    f32 => F32, Float;
    f64 => F64, Double;
    f16 => F16, Float16;
    bf16 => BF16, Bfloat16;
    i8 => I8, Int8;
    i16 => I16, Int16;
    i32 => I32, Int32;
    i64 => I64, Int64;
    u8 => U8, Uint8;
    u16 => U16, Uint16;
    u32 => U32, Uint32;
    u64 => U64, Uint64;
    bool => Bool, Bool;
    String => Str, String;
    Complex32 => C64, Complex64;
    Complex64 => C128, Complex128;
}

/// Applies `$body` to the array of any tensor (`$t: &Tensor`), rewrapping the resulting array
/// in the same variant (and the same dtype tag for coded tensors).
macro_rules! map_all {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $crate::tensor::Tensor::F32($body),
            $crate::tensor::Tensor::F64($a) => $crate::tensor::Tensor::F64($body),
            $crate::tensor::Tensor::F16($a) => $crate::tensor::Tensor::F16($body),
            $crate::tensor::Tensor::BF16($a) => $crate::tensor::Tensor::BF16($body),
            $crate::tensor::Tensor::I8($a) => $crate::tensor::Tensor::I8($body),
            $crate::tensor::Tensor::I16($a) => $crate::tensor::Tensor::I16($body),
            $crate::tensor::Tensor::I32($a) => $crate::tensor::Tensor::I32($body),
            $crate::tensor::Tensor::I64($a) => $crate::tensor::Tensor::I64($body),
            $crate::tensor::Tensor::U8($a) => $crate::tensor::Tensor::U8($body),
            $crate::tensor::Tensor::U16($a) => $crate::tensor::Tensor::U16($body),
            $crate::tensor::Tensor::U32($a) => $crate::tensor::Tensor::U32($body),
            $crate::tensor::Tensor::U64($a) => $crate::tensor::Tensor::U64($body),
            $crate::tensor::Tensor::Bool($a) => $crate::tensor::Tensor::Bool($body),
            $crate::tensor::Tensor::Str($a) => $crate::tensor::Tensor::Str($body),
            $crate::tensor::Tensor::C64($a) => $crate::tensor::Tensor::C64($body),
            $crate::tensor::Tensor::C128($a) => $crate::tensor::Tensor::C128($body),
            $crate::tensor::Tensor::Coded(d, $a) => $crate::tensor::Tensor::Coded(*d, $body),
        }
    };
}
pub(crate) use map_all;

/// Evaluates `$body` with `$a` bound to the typed array of any tensor (no rewrapping).
macro_rules! with_all {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $body,
            $crate::tensor::Tensor::F64($a) => $body,
            $crate::tensor::Tensor::F16($a) => $body,
            $crate::tensor::Tensor::BF16($a) => $body,
            $crate::tensor::Tensor::I8($a) => $body,
            $crate::tensor::Tensor::I16($a) => $body,
            $crate::tensor::Tensor::I32($a) => $body,
            $crate::tensor::Tensor::I64($a) => $body,
            $crate::tensor::Tensor::U8($a) => $body,
            $crate::tensor::Tensor::U16($a) => $body,
            $crate::tensor::Tensor::U32($a) => $body,
            $crate::tensor::Tensor::U64($a) => $body,
            $crate::tensor::Tensor::Bool($a) => $body,
            $crate::tensor::Tensor::Str($a) => $body,
            $crate::tensor::Tensor::C64($a) => $body,
            $crate::tensor::Tensor::C128($a) => $body,
            $crate::tensor::Tensor::Coded(_, $a) => $body,
        }
    };
}

/// Like `map_all!` over the real numeric types (floats and integers, not bool, string,
/// complex or coded); any other tensor evaluates `$fallback`.
macro_rules! map_numeric {
    ($t:expr, $a:ident => $body:expr, $other:ident => $fallback:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $crate::tensor::Tensor::F32($body),
            $crate::tensor::Tensor::F64($a) => $crate::tensor::Tensor::F64($body),
            $crate::tensor::Tensor::F16($a) => $crate::tensor::Tensor::F16($body),
            $crate::tensor::Tensor::BF16($a) => $crate::tensor::Tensor::BF16($body),
            $crate::tensor::Tensor::I8($a) => $crate::tensor::Tensor::I8($body),
            $crate::tensor::Tensor::I16($a) => $crate::tensor::Tensor::I16($body),
            $crate::tensor::Tensor::I32($a) => $crate::tensor::Tensor::I32($body),
            $crate::tensor::Tensor::I64($a) => $crate::tensor::Tensor::I64($body),
            $crate::tensor::Tensor::U8($a) => $crate::tensor::Tensor::U8($body),
            $crate::tensor::Tensor::U16($a) => $crate::tensor::Tensor::U16($body),
            $crate::tensor::Tensor::U32($a) => $crate::tensor::Tensor::U32($body),
            $crate::tensor::Tensor::U64($a) => $crate::tensor::Tensor::U64($body),
            $other => $fallback,
        }
    };
}
pub(crate) use map_numeric;

/// Like `with_all!` over the real numeric types; any other tensor evaluates `$fallback`.
macro_rules! with_numeric {
    ($t:expr, $a:ident => $body:expr, $other:ident => $fallback:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $body,
            $crate::tensor::Tensor::F64($a) => $body,
            $crate::tensor::Tensor::F16($a) => $body,
            $crate::tensor::Tensor::BF16($a) => $body,
            $crate::tensor::Tensor::I8($a) => $body,
            $crate::tensor::Tensor::I16($a) => $body,
            $crate::tensor::Tensor::I32($a) => $body,
            $crate::tensor::Tensor::I64($a) => $body,
            $crate::tensor::Tensor::U8($a) => $body,
            $crate::tensor::Tensor::U16($a) => $body,
            $crate::tensor::Tensor::U32($a) => $body,
            $crate::tensor::Tensor::U64($a) => $body,
            $other => $fallback,
        }
    };
}
pub(crate) use with_numeric;

/// Like `map_all!` over the floating-point types f32, f64, f16, bf16.
macro_rules! map_float {
    ($t:expr, $a:ident => $body:expr, $other:ident => $fallback:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $crate::tensor::Tensor::F32($body),
            $crate::tensor::Tensor::F64($a) => $crate::tensor::Tensor::F64($body),
            $crate::tensor::Tensor::F16($a) => $crate::tensor::Tensor::F16($body),
            $crate::tensor::Tensor::BF16($a) => $crate::tensor::Tensor::BF16($body),
            $other => $fallback,
        }
    };
}
pub(crate) use map_float;

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::Coded(d, _) => *d,
            t => with_all!(t, a => elem_dtype(a)),
        }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[usize] {
        with_all!(self, a => a.shape())
    }

    /// Number of axes (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_all!(self, a => a.len())
    }

    /// True when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A tensor from a flat vector in row-major order.
    pub fn from_vec<T: Elem>(shape: &[usize], data: Vec<T>) -> Result<Tensor> {
        Ok(T::wrap(array_from_vec(shape, data)?))
    }

    /// A coded tensor (see `DType::is_coded`) from one code per element.
    pub fn from_codes(dtype: DType, shape: &[usize], codes: Vec<u8>) -> Result<Tensor> {
        if !dtype.is_coded() {
            return Err(RefError::UnsupportedDType {
                context: "coded tensor".into(),
                dtype,
            });
        }
        Ok(Tensor::Coded(dtype, array_from_vec(shape, codes)?))
    }

    /// A scalar (shape `[]`).
    pub fn scalar<T: Elem>(v: T) -> Tensor {
        T::wrap(ArcArray::from_elem(IxDyn(&[]), v))
    }

    /// The typed array when the tensor holds `T`.
    pub fn as_array<T: Elem>(&self) -> Option<&Array<T>> {
        T::unwrap(self)
    }

    /// The elements as `i64` (integer and bool tensors; used for shapes, axes, indices).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        let v = match self {
            Tensor::I64(a) => a.iter().copied().collect(),
            Tensor::I32(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::I16(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::I8(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::U8(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::U16(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::U32(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::U64(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::Bool(a) => a.iter().map(|&x| x as i64).collect(),
            Tensor::Coded(d, a) if d.is_integer() => {
                a.iter().map(|&c| minifloat::coded_to_i64(*d, c)).collect()
            }
            other => {
                return Err(RefError::UnsupportedDType {
                    context: "expected an integer tensor".into(),
                    dtype: other.dtype(),
                })
            }
        };
        Ok(v)
    }

    /// The same data with another shape of equal element count (no copy when contiguous).
    pub fn reshaped(&self, shape: &[usize]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != self.len() {
            return Err(RefError::op(format!(
                "cannot reshape {:?} ({} elements) to {:?} ({} elements)",
                self.shape(),
                self.len(),
                shape,
                n
            )));
        }
        Ok(map_all!(self, a => reshape_array(a, shape)?))
    }
}

fn elem_dtype<T: Elem>(_a: &Array<T>) -> DType {
    T::DTYPE
}

/// An array from a flat row-major vector, checking the element count.
pub fn array_from_vec<T>(shape: &[usize], data: Vec<T>) -> Result<Array<T>> {
    let n = data.len();
    ArcArray::from_shape_vec(IxDyn(shape), data)
        .map_err(|e| RefError::op(format!("{n} elements do not fit shape {shape:?}: {e}")))
}

/// Reshapes an array, sharing the buffer when it is in standard layout.
pub fn reshape_array<T: Clone>(a: &Array<T>, shape: &[usize]) -> Result<Array<T>> {
    let src = if a.is_standard_layout() {
        a.clone()
    } else {
        a.as_standard_layout().into_owned().into_shared()
    };
    src.into_shape_with_order(IxDyn(shape))
        .map_err(|e| RefError::op(format!("cannot reshape {:?} to {shape:?}: {e}", a.shape())))
}

thread_local! {
    static ELEMENT_LIMIT: std::cell::Cell<u64> = const { std::cell::Cell::new(MAX_ELEMENTS) };
}

/// The element limit of a tensor a kernel makes on this thread: `MAX_ELEMENTS` unless lowered
/// with [`set_element_limit`] or [`ElementLimit::scoped`].
pub fn element_limit() -> u64 {
    ELEMENT_LIMIT.with(|l| l.get())
}

/// Sets the element limit of this thread (never above `MAX_ELEMENTS`), e.g. for a prover that
/// runs many random instances and must not allocate gigabytes for one of them.
pub fn set_element_limit(n: u64) {
    ELEMENT_LIMIT.with(|l| l.set(n.min(MAX_ELEMENTS)));
}

/// A lowered element limit for this thread, restored when dropped.
pub struct ElementLimit {
    previous: u64,
}

impl ElementLimit {
    /// Lowers this thread's limit to `n` (never raises it) until the guard is dropped.
    pub fn scoped(n: u64) -> Self {
        let previous = element_limit();
        set_element_limit(n.min(previous));
        ElementLimit { previous }
    }
}

impl Drop for ElementLimit {
    fn drop(&mut self) {
        set_element_limit(self.previous);
    }
}

/// Fails when a shape has more than [`element_limit`] elements, or when the product of its
/// non-zero dims overflows `isize` (an empty tensor with absurd other dims, which ndarray
/// cannot index).
pub fn check_size(what: &str, shape: &[usize]) -> Result<usize> {
    let limit = element_limit();
    let mut n: u128 = 1;
    let mut nonzero: u128 = 1;
    for &d in shape {
        n = n.saturating_mul(d as u128);
        if d != 0 {
            nonzero = nonzero.saturating_mul(d as u128);
        }
    }
    if n > limit as u128 || nonzero > isize::MAX as u128 {
        return Err(RefError::TooLarge {
            tensor: what.to_string(),
            shape: shape.iter().map(|&d| d as i64).collect(),
            elements: n.max(nonzero),
            limit,
        });
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_size_refuses_empty_shapes_ndarray_cannot_index() {
        let huge = 1usize << 62;
        assert!(check_size("t", &[0, huge, huge]).is_err());
        assert_eq!(check_size("t", &[0, 3, 4]).unwrap(), 0);
        assert_eq!(check_size("t", &[2, 3]).unwrap(), 6);
    }

    #[test]
    fn scalars_are_rank_zero() {
        let s = Tensor::scalar(3i64);
        assert_eq!(s.rank(), 0);
        assert_eq!(s.len(), 1);
        let v = Tensor::from_vec(&[1], vec![3i64]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v.rank(), 1);
        assert_ne!(s, v);
    }

    #[test]
    fn reshape_checks_count() {
        let t = Tensor::from_vec(&[2, 3], vec![0f32; 6]).unwrap_or_else(|e| panic!("{e}"));
        assert!(t.reshaped(&[3, 2]).is_ok());
        assert!(matches!(t.reshaped(&[4]), Err(RefError::Op { .. })));
    }
}
