//! The built-in kernels, registered by family, and the helpers they share (broadcasting, axis
//! normalization, result packing).

use ndarray::IxDyn;

use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::tensor::{Array, Tensor};
use crate::value::Value;

mod attention;
pub(crate) mod backward;
mod broadcast;
mod cast;
mod contrib;
mod conv;
mod conv_transpose;
mod detection;
mod einsum;
mod elementwise;
mod gemm_direct;
mod grid;
mod image;
mod linalg;
mod loss;
mod matmul;
mod ml;
mod nn;
mod pad;
mod parallel;
mod permute;
mod pool;
mod quant;
mod random_ops;
mod reduce;
mod resize;
mod rnn;
mod select;
mod sequence;
mod shape;
mod signal;
mod slice;
mod spectral;
mod strings;
#[cfg(test)]
mod test_util;
mod training;
mod unary;

pub(crate) use attention::{flex_attention, ModifierGraphs, MODIFIER_OPSET};
pub use cast::cast_tensor;
pub use matmul::gemm_f32;
pub(crate) use matmul::product_in_place;

/// Registers every built-in kernel family.
pub fn register_all(reg: &mut KernelRegistry) {
    elementwise::register_all(reg);
    unary::register_all(reg);
    cast::register_all(reg);
    shape::register_all(reg);
    slice::register_all(reg);
    reduce::register_all(reg);
    matmul::register_all(reg);
    conv::register_all(reg);
    pool::register_all(reg);
    nn::register_all(reg);
    pad::register_all(reg);
    resize::register_all(reg);
    conv_transpose::register_all(reg);
    loss::register_all(reg);
    quant::register_all(reg);
    select::register_all(reg);
    sequence::register_all(reg);
    signal::register_all(reg);
    attention::register_all(reg);
    rnn::register_all(reg);
    einsum::register_all(reg);
    linalg::register_all(reg);
    grid::register_all(reg);
    detection::register_all(reg);
    spectral::register_all(reg);
    strings::register_all(reg);
    ml::register_all(reg);
    training::register_all(reg);
    image::register_all(reg);
    random_ops::register_all(reg);
    contrib::register_all(reg);
}

/// A kernel result with a single tensor output.
pub(crate) fn one(t: Tensor) -> Result<Vec<Value>> {
    Ok(vec![Value::Tensor(t)])
}

/// The "unsupported dtype" error for a kernel.
pub(crate) fn unsupported(ctx: &KernelCtx, t: &Tensor) -> RefError {
    ctx.err(format!("unsupported input type {}", t.dtype()))
}

/// The multidirectional (numpy) broadcast of two shapes.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for (i, o) in out.iter_mut().enumerate() {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        *o = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(RefError::op(format!(
                "shapes {a:?} and {b:?} do not broadcast"
            )));
        };
    }
    Ok(out)
}

/// Views `a` broadcast to `shape`.
pub(crate) fn broadcast_view<'a, T>(
    a: &'a Array<T>,
    shape: &[usize],
) -> Result<ndarray::ArrayView<'a, T, IxDyn>> {
    a.broadcast(IxDyn(shape)).ok_or_else(|| {
        RefError::op(format!(
            "shape {:?} does not broadcast to {shape:?}",
            a.shape()
        ))
    })
}

pub(crate) use broadcast::zip_map;

/// An axis in `[-rank, rank)` as an index.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(RefError::op(format!(
            "axis {axis} is out of range for rank {rank}"
        )));
    }
    Ok(if axis < 0 { axis + r } else { axis } as usize)
}

/// Axes normalized, checked distinct.
pub(crate) fn norm_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if out.contains(&n) {
            return Err(RefError::op(format!("axis {a} is repeated in {axes:?}")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Converts non-negative i64 dims to usize.
pub(crate) fn to_dims(dims: &[i64]) -> Result<Vec<usize>> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| RefError::op(format!("negative dimension {d} in {dims:?}")))
        })
        .collect()
}

/// The input tensors of a variadic node (all present).
pub(crate) fn all_inputs<'v>(
    ctx: &KernelCtx,
    inputs: &[Option<&'v Value>],
) -> Result<Vec<&'v Tensor>> {
    (0..inputs.len()).map(|i| ctx.input(inputs, i)).collect()
}

/// Fails unless every tensor has the dtype of the first.
pub(crate) fn same_dtype(ctx: &KernelCtx, ts: &[&Tensor]) -> Result<()> {
    if let Some(first) = ts.first() {
        for (i, t) in ts.iter().enumerate().skip(1) {
            if t.dtype() != first.dtype() {
                return Err(ctx.err(format!(
                    "input {i} has type {} but input 0 has {}",
                    t.dtype(),
                    first.dtype()
                )));
            }
        }
    }
    Ok(())
}

/// The array of `t` typed like `_like` (for type inference in generic kernels).
pub(crate) fn typed_like<'a, T: crate::tensor::Elem>(
    _like: &Array<T>,
    t: &'a Tensor,
) -> Result<&'a Array<T>> {
    typed(t)
}

/// The typed array of a tensor known (by a prior dtype check) to hold `T`. For coded tensors
/// `T` is `u8`.
pub(crate) fn typed<T: crate::tensor::Elem>(t: &Tensor) -> Result<&Array<T>> {
    match t {
        Tensor::Coded(_, a) => {
            let any: &dyn std::any::Any = a;
            any.downcast_ref::<Array<T>>()
        }
        other => T::unwrap(other),
    }
    .ok_or_else(|| RefError::op(format!("expected {} data, found {}", T::DTYPE, t.dtype())))
}
