//! Linear algebra and assorted tensor kernels: Det (LU with partial pivoting), Unique (sorted
//! or first-occurrence order, flattened or along an axis, all four outputs) and CenterCropPad.
//! Submodules hold MaxUnpool and Col2Im (`spatial`) and the quantized and deformable
//! convolutions (`qconv`).

mod qconv;
mod spatial;

use std::cmp::Ordering;

use ndarray::Slice;
use num_complex::{Complex32, Complex64};

use super::{norm_axes, norm_axis, one, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Real;
use crate::tensor::{array_from_vec, map_all, map_float, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Det", 11, LATEST, det);
    reg.register("", "Unique", 11, LATEST, unique);
    reg.register("", "CenterCropPad", 18, LATEST, center_crop_pad);
    spatial::register_all(reg);
    qconv::register_all(reg);
}

/// Determinant of one row-major `n×n` matrix by Gaussian elimination with partial pivoting.
fn det_f64(mut m: Vec<f64>, n: usize) -> f64 {
    let mut det = 1.0;
    for col in 0..n {
        let mut pivot = col;
        for row in col + 1..n {
            if m[row * n + col].abs() > m[pivot * n + col].abs() {
                pivot = row;
            }
        }
        let p = m[pivot * n + col];
        if p == 0.0 {
            return 0.0;
        }
        if pivot != col {
            for j in 0..n {
                m.swap(col * n + j, pivot * n + j);
            }
            det = -det;
        }
        det *= p;
        for row in col + 1..n {
            let f = m[row * n + col] / p;
            if f != 0.0 {
                for j in col..n {
                    m[row * n + j] -= f * m[col * n + j];
                }
            }
        }
    }
    det
}

fn det_of<T: Real>(a: &Array<T>) -> Result<Array<T>> {
    let shape = a.shape();
    let r = shape.len();
    if r < 2 || shape[r - 1] != shape[r - 2] {
        return Err(RefError::op(format!(
            "Det needs square matrices [*, M, M], got {shape:?}"
        )));
    }
    let n = shape[r - 1];
    let vals: Vec<f64> = a.iter().map(|v| v.to_f64()).collect();
    let out: Vec<T> = if n == 0 {
        vec![T::one(); shape[..r - 2].iter().product()]
    } else {
        vals.chunks(n * n)
            .map(|m| T::from_f64(det_f64(m.to_vec(), n)))
            .collect()
    };
    array_from_vec(&shape[..r - 2], out)
}

fn det(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    one(map_float!(x, a => det_of(a)?, other => return Err(unsupported(ctx, other))))
}

/// A total order for `PartialOrd` values: NaN (the only value unordered with itself) sorts
/// last and equals every other NaN, as numpy.unique does.
fn nan_last<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    a.partial_cmp(b).unwrap_or_else(|| {
        let a_nan = a.partial_cmp(a).is_none();
        let b_nan = b.partial_cmp(b).is_none();
        a_nan.cmp(&b_nan)
    })
}

fn complex32_order(a: &Complex32, b: &Complex32) -> Ordering {
    nan_last(&a.re, &b.re).then_with(|| nan_last(&a.im, &b.im))
}

fn complex64_order(a: &Complex64, b: &Complex64) -> Ordering {
    nan_last(&a.re, &b.re).then_with(|| nan_last(&a.im, &b.im))
}

/// The four outputs of Unique: unique values, first-occurrence indices, inverse indices and
/// counts.
struct UniqueResult<T> {
    values: Array<T>,
    indices: Vec<i64>,
    inverse: Vec<i64>,
    counts: Vec<i64>,
}

/// Unique slices of `a` along `axis` (or of its flattened elements when `axis` is None).
fn unique_of<T: Clone>(
    a: &Array<T>,
    axis: Option<usize>,
    sorted: bool,
    order: impl Fn(&T, &T) -> Ordering,
) -> Result<UniqueResult<T>> {
    // Slices as rows of a [n, inner] matrix with the axis moved first.
    let moved: Array<T> = match axis {
        None => a.as_standard_layout().into_owned().into_shared(),
        Some(ax) => {
            let mut perm: Vec<usize> = vec![ax];
            perm.extend((0..a.ndim()).filter(|&i| i != ax));
            super::shape::permute(a, &perm)
        }
    };
    let (n, inner) = match axis {
        None => (a.len(), 1),
        Some(ax) => {
            let n = a.shape()[ax];
            (n, a.len().checked_div(n).unwrap_or(0))
        }
    };
    let flat: Vec<T> = moved.iter().cloned().collect();
    let row = |i: usize| &flat[i * inner..(i + 1) * inner];
    let cmp_rows = |i: &usize, j: &usize| {
        row(*i)
            .iter()
            .zip(row(*j))
            .map(|(x, y)| order(x, y))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    };
    let mut by_value: Vec<usize> = (0..n).collect();
    by_value.sort_by(cmp_rows); // stable: the first index of a group is its first occurrence
                                // Groups of equal rows in value order: (first index, members).
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in &by_value {
        match groups.last_mut() {
            Some((first, members)) if cmp_rows(first, &i) == Ordering::Equal => members.push(i),
            _ => groups.push((i, vec![i])),
        }
    }
    if !sorted {
        groups.sort_by_key(|(first, _)| *first);
    }
    let mut inverse = vec![0i64; n];
    let mut indices = Vec::with_capacity(groups.len());
    let mut counts = Vec::with_capacity(groups.len());
    let mut data = Vec::with_capacity(groups.len() * inner);
    for (k, (first, members)) in groups.iter().enumerate() {
        indices.push(*first as i64);
        counts.push(members.len() as i64);
        for &m in members {
            inverse[m] = k as i64;
        }
        data.extend_from_slice(row(*first));
    }
    let k = groups.len();
    let values = match axis {
        None => array_from_vec(&[k], data)?,
        Some(ax) => {
            let mut shape: Vec<usize> = vec![k];
            shape.extend(
                a.shape()
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != ax)
                    .map(|(_, d)| *d),
            );
            let arr = array_from_vec(&shape, data)?;
            // Move the unique axis back into place.
            let mut perm: Vec<usize> = (1..a.ndim()).collect();
            perm.insert(ax, 0);
            super::shape::permute(&arr, &perm)
        }
    };
    Ok(UniqueResult {
        values,
        indices,
        inverse,
        counts,
    })
}

fn unique(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let sorted = ctx.attr_int("sorted", 1)? != 0;
    let axis = match ctx.attr_opt_int("axis")? {
        Some(a) => Some(norm_axis(a, x.rank()).map_err(|e| e.in_node(&ctx.node_ref()))?),
        None => None,
    };
    macro_rules! run {
        ($a:expr, $variant:ident, $order:expr) => {{
            let r = unique_of($a, axis, sorted, $order)?;
            (Tensor::$variant(r.values), r.indices, r.inverse, r.counts)
        }};
    }
    let (values, indices, inverse, counts) = match x {
        Tensor::F32(a) => run!(a, F32, nan_last),
        Tensor::F64(a) => run!(a, F64, nan_last),
        Tensor::F16(a) => run!(a, F16, nan_last),
        Tensor::BF16(a) => run!(a, BF16, nan_last),
        Tensor::I8(a) => run!(a, I8, nan_last),
        Tensor::I16(a) => run!(a, I16, nan_last),
        Tensor::I32(a) => run!(a, I32, nan_last),
        Tensor::I64(a) => run!(a, I64, nan_last),
        Tensor::U8(a) => run!(a, U8, nan_last),
        Tensor::U16(a) => run!(a, U16, nan_last),
        Tensor::U32(a) => run!(a, U32, nan_last),
        Tensor::U64(a) => run!(a, U64, nan_last),
        Tensor::Bool(a) => run!(a, Bool, nan_last),
        Tensor::Str(a) => run!(a, Str, nan_last),
        Tensor::C64(a) => run!(a, C64, complex32_order),
        Tensor::C128(a) => run!(a, C128, complex64_order),
        other => return Err(unsupported(ctx, other)),
    };
    let int_vec = |v: Vec<i64>| -> Result<Value> {
        let n = v.len();
        Ok(Value::Tensor(Tensor::from_vec(&[n], v)?))
    };
    Ok(vec![
        Value::Tensor(values),
        int_vec(indices)?,
        int_vec(inverse)?,
        int_vec(counts)?,
    ])
}

/// Crops or zero-pads `a` symmetrically (extra element at the end) to `target` on `axes`.
fn center_crop_pad_of<T: Clone + Default>(
    a: &Array<T>,
    axes: &[usize],
    target: &[usize],
) -> Result<Array<T>> {
    let mut out_shape = a.shape().to_vec();
    let mut crop: Vec<(usize, usize)> = a.shape().iter().map(|&d| (0, d)).collect();
    let mut place: Vec<(usize, usize)> = crop.clone();
    for (&ax, &want) in axes.iter().zip(target) {
        let dim = a.shape()[ax];
        out_shape[ax] = want;
        if want < dim {
            let start = (dim - want) / 2;
            crop[ax] = (start, start + want);
            place[ax] = (0, want);
        } else if want > dim {
            let start = (want - dim) / 2;
            place[ax] = (start, start + dim);
        }
    }
    crate::tensor::check_size("CenterCropPad result", &out_shape)?;
    let mut out = ndarray::ArrayD::<T>::default(ndarray::IxDyn(&out_shape));
    let src = a.slice_each_axis(|ax| {
        let (s, e) = crop[ax.axis.index()];
        Slice::from(s..e)
    });
    out.slice_each_axis_mut(|ax| {
        let (s, e) = place[ax.axis.index()];
        Slice::from(s..e)
    })
    .assign(&src);
    Ok(out.into_shared())
}

fn center_crop_pad(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let shape = ctx
        .input(inputs, 1)?
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let axes = match ctx.attr_ints("axes") {
        Some(a) => norm_axes(a, x.rank()).map_err(|e| e.in_node(&ctx.node_ref()))?,
        None => (0..x.rank()).collect(),
    };
    if shape.len() != axes.len() {
        return Err(ctx.err(format!(
            "shape has {} values for {} axes",
            shape.len(),
            axes.len()
        )));
    }
    let target = super::to_dims(&shape).map_err(|e| e.in_node(&ctx.node_ref()))?;
    one(map_all!(x, a => center_crop_pad_of(a, &axes, &target)?))
}

/// Values of a tensor that must have one value, or one per `n` entries.
pub(super) fn per_channel(t: &Tensor, n: usize, what: &str) -> Result<Vec<f64>> {
    let v = t.to_f64_vec()?;
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v),
        l => Err(RefError::op(format!(
            "{what} has {l} values; expected 1 or {n}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onnx_proto::{AttributeProto, NodeProto};

    pub(super) fn node(
        op: &str,
        n_in: usize,
        n_out: usize,
        attrs: Vec<AttributeProto>,
    ) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: (0..n_in).map(|i| format!("x{i}")).collect(),
            output: (0..n_out).map(|i| format!("y{i}")).collect(),
            attribute: attrs,
            ..Default::default()
        }
    }

    pub(super) fn int_attr(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            i: Some(v),
            ..Default::default()
        }
    }

    pub(super) fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            ints: v.to_vec(),
            ..Default::default()
        }
    }

    pub(super) fn eval(node: &NodeProto, opset: i64, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let vals: Vec<Option<Value>> = inputs.into_iter().map(|t| Some(Value::Tensor(t))).collect();
        crate::eval_node(node, opset, &vals)?
            .into_iter()
            .map(Value::into_tensor)
            .collect()
    }

    #[test]
    fn det_of_batches_singular_and_empty() -> Result<()> {
        let m = Tensor::from_vec(&[2, 2, 2], vec![1f32, 2., 3., 4., 2., 4., 1., 2.])?;
        let r = eval(&node("Det", 1, 1, vec![]), 11, vec![m])?;
        assert_eq!(r[0], Tensor::from_vec(&[2], vec![-2f32, 0.])?);
        let perm = Tensor::from_vec(&[3, 3], vec![0f64, 1., 0., 0., 0., 1., 1., 0., 0.])?;
        assert_eq!(
            eval(&node("Det", 1, 1, vec![]), 22, vec![perm])?[0],
            Tensor::scalar(1f64)
        );
        let empty = Tensor::from_vec(&[3, 0, 0], Vec::<f32>::new())?;
        assert_eq!(
            eval(&node("Det", 1, 1, vec![]), 11, vec![empty])?[0],
            Tensor::from_vec(&[3], vec![1f32; 3])?
        );
        let bad = Tensor::from_vec(&[2, 3], vec![0f32; 6])?;
        assert!(eval(&node("Det", 1, 1, vec![]), 11, vec![bad]).is_err());
        let ints = Tensor::from_vec(&[1, 1], vec![3i32])?;
        assert!(eval(&node("Det", 1, 1, vec![]), 11, vec![ints]).is_err());
        Ok(())
    }

    #[test]
    fn unique_orders_nan_and_axis() -> Result<()> {
        let x = Tensor::from_vec(&[6], vec![2f32, f32::NAN, 1., 2., f32::NAN, -0.5])?;
        let sorted = eval(&node("Unique", 1, 4, vec![]), 11, vec![x.clone()])?;
        let vals = sorted[0].to_f64_vec()?;
        assert_eq!(&vals[..3], &[-0.5, 1., 2.]);
        assert!(vals[3].is_nan() && vals.len() == 4);
        assert_eq!(sorted[1].to_i64_vec()?, vec![5, 2, 0, 1]);
        assert_eq!(sorted[2].to_i64_vec()?, vec![2, 3, 1, 2, 3, 0]);
        assert_eq!(sorted[3].to_i64_vec()?, vec![1, 1, 2, 2]);
        let first = eval(
            &node("Unique", 1, 4, vec![int_attr("sorted", 0)]),
            11,
            vec![x],
        )?;
        assert_eq!(first[1].to_i64_vec()?, vec![0, 1, 2, 5]);
        assert_eq!(first[2].to_i64_vec()?, vec![0, 1, 2, 0, 1, 3]);
        // Columns of a matrix: [[1, 0, 1], [2, 5, 2]] has unique columns [0,5] and [1,2].
        let m = Tensor::from_vec(&[2, 3], vec![1i64, 0, 1, 2, 5, 2])?;
        let cols = eval(
            &node("Unique", 1, 4, vec![int_attr("axis", -1)]),
            11,
            vec![m.clone()],
        )?;
        assert_eq!(cols[0], Tensor::from_vec(&[2, 2], vec![0i64, 1, 5, 2])?);
        assert_eq!(cols[2].to_i64_vec()?, vec![1, 0, 1]);
        assert!(eval(
            &node("Unique", 1, 4, vec![int_attr("axis", 2)]),
            11,
            vec![m]
        )
        .is_err());
        let empty = Tensor::from_vec(&[0], Vec::<String>::new())?;
        let e = eval(&node("Unique", 1, 4, vec![]), 11, vec![empty])?;
        assert_eq!(e[0].shape(), &[0]);
        Ok(())
    }

    #[test]
    fn center_crop_pad_both_ways() -> Result<()> {
        let x = Tensor::from_vec(&[2, 3], vec![1i32, 2, 3, 4, 5, 6])?;
        let shape = Tensor::from_vec(&[2], vec![4i64, 1])?;
        let r = eval(
            &node("CenterCropPad", 2, 1, vec![]),
            18,
            vec![x.clone(), shape],
        )?;
        assert_eq!(r[0], Tensor::from_vec(&[4, 1], vec![0i32, 2, 5, 0])?);
        let one_axis = Tensor::from_vec(&[1], vec![0i64])?;
        let r = eval(
            &node("CenterCropPad", 2, 1, vec![ints_attr("axes", &[-1])]),
            18,
            vec![x.clone(), one_axis],
        )?;
        assert_eq!(r[0].shape(), &[2, 0]);
        let wrong = Tensor::from_vec(&[1], vec![2i64])?;
        assert!(eval(&node("CenterCropPad", 2, 1, vec![]), 18, vec![x, wrong]).is_err());
        Ok(())
    }
}
