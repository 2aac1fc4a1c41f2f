//! The elementwise broadcast loop shared by every binary kernel: numpy broadcasting over
//! contiguous operands, with the dims coalesced so the innermost loop runs over a contiguous
//! run of both operands (or one operand against a repeated scalar of the other). A per-channel
//! bias over NCHW becomes N·C runs of H·W elements against one value; a row added to every
//! row of a matrix becomes one run per row. Non-contiguous operands fall back to ndarray's Zip.

use ndarray::Zip;

use super::{broadcast_shapes, broadcast_view};
use crate::error::Result;
use crate::tensor::{array_from_vec, check_size, Array};

/// One coalesced dim: its size and each operand's element stride (0 when broadcast).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dim {
    size: usize,
    a: usize,
    b: usize,
}

/// Row-major element strides of `shape` seen inside an output of rank `rank`, 0 on every dim
/// of size 1 and on the leading dims the operand does not have.
fn strides_in(shape: &[usize], rank: usize) -> Vec<usize> {
    let mut out = vec![0; rank];
    let mut step = 1;
    for (i, &d) in shape.iter().enumerate().rev() {
        let o = rank - shape.len() + i;
        out[o] = if d == 1 { 0 } else { step };
        step *= d;
    }
    out
}

/// The output dims with size-1 dims dropped and neighbours merged where both operands are
/// contiguous across them (or broadcast across both). Innermost dim last; never empty.
fn coalesce(out: &[usize], a: &[usize], b: &[usize]) -> Vec<Dim> {
    let sa = strides_in(a, out.len());
    let sb = strides_in(b, out.len());
    let mut dims: Vec<Dim> = Vec::with_capacity(out.len());
    for i in (0..out.len()).rev() {
        if out[i] == 1 {
            continue;
        }
        let d = Dim {
            size: out[i],
            a: sa[i],
            b: sb[i],
        };
        match dims.last_mut() {
            Some(inner) if d.a == inner.a * inner.size && d.b == inner.b * inner.size => {
                inner.size *= d.size;
            }
            _ => dims.push(d),
        }
    }
    if dims.is_empty() {
        dims.push(Dim {
            size: 1,
            a: 0,
            b: 0,
        });
    }
    dims.reverse();
    dims
}

/// `f` over two contiguous row-major operands broadcast to `out_shape`, in output order.
fn broadcast_slices<A, B, O: Clone>(
    a: &[A],
    a_shape: &[usize],
    b: &[B],
    b_shape: &[usize],
    out_shape: &[usize],
    f: &impl Fn(&A, &B) -> O,
) -> Vec<O> {
    let total: usize = out_shape.iter().product();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let dims = coalesce(out_shape, a_shape, b_shape);
    let (outer, inner) = dims.split_at(dims.len() - 1);
    let inner = inner[0];
    let n = inner.size;
    // Index counter over the outer dims, with both operands' offsets kept in step.
    let mut idx = vec![0usize; outer.len()];
    let (mut oa, mut ob) = (0usize, 0usize);
    loop {
        match (inner.a, inner.b) {
            (0, 0) => {
                let v = f(&a[oa], &b[ob]);
                out.extend(std::iter::repeat_n(v, n));
            }
            (0, _) => {
                let x = &a[oa];
                out.extend(b[ob..ob + n].iter().map(|y| f(x, y)));
            }
            (_, 0) => {
                let y = &b[ob];
                out.extend(a[oa..oa + n].iter().map(|x| f(x, y)));
            }
            _ => out.extend(
                a[oa..oa + n]
                    .iter()
                    .zip(&b[ob..ob + n])
                    .map(|(x, y)| f(x, y)),
            ),
        }
        // Advance the outer counter (innermost outer dim first).
        let mut k = outer.len();
        loop {
            if k == 0 {
                return out;
            }
            k -= 1;
            idx[k] += 1;
            oa += outer[k].a;
            ob += outer[k].b;
            if idx[k] < outer[k].size {
                break;
            }
            oa -= outer[k].a * outer[k].size;
            ob -= outer[k].b * outer[k].size;
            idx[k] = 0;
        }
    }
}

/// `f` applied elementwise to `a` and `b` under numpy broadcasting.
pub(crate) fn zip_map<A, B, O: Clone>(
    a: &Array<A>,
    b: &Array<B>,
    f: impl Fn(&A, &B) -> O,
) -> Result<Array<O>> {
    let shape = if a.shape() == b.shape() {
        a.shape().to_vec()
    } else {
        let s = broadcast_shapes(a.shape(), b.shape())?;
        check_size("broadcast result", &s)?;
        s
    };
    if let (Some(sa), Some(sb)) = (a.as_slice(), b.as_slice()) {
        let out = broadcast_slices(sa, a.shape(), sb, b.shape(), &shape, &f);
        return array_from_vec(&shape, out);
    }
    let av = broadcast_view(a, &shape)?;
    let bv = broadcast_view(b, &shape)?;
    Ok(Zip::from(&av).and(&bv).map_collect(&f).into_shared())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{ArrayD, IxDyn};

    fn arr(shape: &[usize], start: i64) -> Array<i64> {
        let n: usize = shape.iter().product();
        ArrayD::from_shape_vec(IxDyn(shape), (0..n as i64).map(|v| v + start).collect())
            .unwrap()
            .into_shared()
    }

    /// The fast loop agrees with ndarray's broadcasting Zip on every pattern.
    #[test]
    fn matches_ndarray_broadcasting() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 3, 4], &[2, 3, 4]),
            (&[1, 4, 5, 5], &[1, 4, 1, 1]),
            (&[2, 3, 4], &[4]),
            (&[5, 1], &[1, 6]),
            (&[3, 1, 4], &[2, 1]),
            (&[], &[3]),
            (&[2, 3], &[]),
            (&[], &[]),
            (&[0, 3], &[3]),
            (&[2, 0, 3], &[1, 1, 3]),
            (&[1, 1, 1], &[1]),
            (&[4, 1, 3, 1], &[1, 2, 1, 5]),
        ];
        for (sa, sb) in cases {
            let a = arr(sa, 0);
            let b = arr(sb, 100);
            let got = zip_map(&a, &b, |x, y| x * 1000 + y).unwrap();
            let shape = broadcast_shapes(sa, sb).unwrap();
            let av = a.broadcast(IxDyn(&shape)).unwrap();
            let bv = b.broadcast(IxDyn(&shape)).unwrap();
            let want = Zip::from(&av).and(&bv).map_collect(|x, y| x * 1000 + y);
            assert_eq!(got.shape(), want.shape(), "{sa:?} + {sb:?}");
            assert_eq!(
                got.iter().collect::<Vec<_>>(),
                want.iter().collect::<Vec<_>>()
            );
        }
    }

    /// A transposed (non-contiguous) operand takes the general path with the same result.
    #[test]
    fn non_contiguous_operand() {
        let a = arr(&[3, 4], 0);
        let t = a.t().to_owned().into_shared();
        let view = a.clone().reversed_axes();
        let got = zip_map(&view, &arr(&[4, 1], 0), |x, y| x + y).unwrap();
        let want = zip_map(&t, &arr(&[4, 1], 0), |x, y| x + y).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn incompatible_shapes_are_an_error() {
        let err = zip_map(&arr(&[2, 3], 0), &arr(&[4], 0), |x, y| x + y).unwrap_err();
        assert!(err.to_string().contains("do not broadcast"), "{err}");
    }
}
