//! Materializing a permutation of an array's axes (Transpose, and every kernel that moves an
//! axis last): the copy runs on the simplified layout (size-1 axes dropped, axes that stay
//! adjacent in the input merged), as memcpy of contiguous runs when the innermost axis keeps
//! its place, and in square tiles when it moves (both sides then stay in cache). Elements are
//! only moved, never computed, so the result is the same as ndarray's element-wise copy.

use ndarray::IxDyn;

use crate::tensor::Array;

/// Side of the square tiles of a transposing copy (in elements).
const TILE: usize = 32;

/// Materializes `a` with its axes permuted (`perm[i]` is the input axis of output axis `i`) in
/// standard layout.
pub(crate) fn permute<T: Clone>(a: &Array<T>, perm: &[usize]) -> Array<T> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| a.shape()[p]).collect();
    match a.as_slice() {
        Some(src) if perm.len() == a.ndim() => {
            let data = permuted_copy(src, a.shape(), perm);
            Array::from_shape_vec(IxDyn(&out_shape), data)
                .expect("a permutation keeps the element count")
        }
        _ => {
            let v = a.view().permuted_axes(IxDyn(perm));
            v.as_standard_layout().into_owned().into_shared()
        }
    }
}

/// The elements of the standard-layout `src` of `shape`, in the standard order of its axes
/// permuted by `perm`.
pub(crate) fn permuted_copy<T: Clone>(src: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
    let total: usize = shape.iter().product();
    if total == 0 {
        return Vec::new();
    }
    let (dims, strides) = simplified(shape, perm);
    let Some((&run, outer)) = dims.split_last() else {
        return src[..total].to_vec();
    };
    if strides[dims.len() - 1] == 1 {
        // The innermost axis stays innermost: contiguous runs of `run` elements.
        let mut out = Vec::with_capacity(total);
        for_each_offset(outer, &strides[..outer.len()], |off| {
            out.extend_from_slice(&src[off..off + run]);
        });
        return out;
    }
    transpose_tiled(src, &dims, &strides, total)
}

/// The output dims and their input strides with size-1 axes dropped and every output axis
/// merged into the next one when the two are adjacent in the input too (`stride[i] ==
/// stride[i + 1] * dim[i + 1]`). Empty when the permutation moves nothing.
fn simplified(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut in_strides = vec![0usize; shape.len()];
    let mut acc = 1;
    for (s, &d) in in_strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc *= d;
    }
    let mut dims: Vec<usize> = Vec::with_capacity(perm.len());
    let mut strides: Vec<usize> = Vec::with_capacity(perm.len());
    for &p in perm {
        let (d, s) = (shape[p], in_strides[p]);
        if d == 1 {
            continue;
        }
        match (dims.last_mut(), strides.last_mut()) {
            (Some(ld), Some(ls)) if *ls == s * d => {
                *ld *= d;
                *ls = s;
            }
            _ => {
                dims.push(d);
                strides.push(s);
            }
        }
    }
    if dims.len() == 1 {
        // One axis left is the whole array in order.
        dims.clear();
        strides.clear();
    }
    (dims, strides)
}

/// Calls `f` with the input offset of every index of `dims` (input `strides`), in standard
/// order of `dims`.
fn for_each_offset(dims: &[usize], strides: &[usize], mut f: impl FnMut(usize)) {
    let mut idx = vec![0usize; dims.len()];
    let mut off = 0usize;
    loop {
        f(off);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < dims[d] {
                break;
            }
            off -= strides[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/// The copy when the innermost output axis is not the input's: the output axis `q` with input
/// stride 1 and the innermost output axis are copied in `TILE`×`TILE` tiles, for every index of
/// the other axes.
fn transpose_tiled<T: Clone>(src: &[T], dims: &[usize], strides: &[usize], total: usize) -> Vec<T> {
    let rank = dims.len();
    let last = rank - 1;
    let q = strides
        .iter()
        .position(|&s| s == 1)
        .expect("a permutation of a standard layout has an axis of stride 1");
    let mut out_strides = vec![0usize; rank];
    let mut acc = 1;
    for (s, &d) in out_strides.iter_mut().zip(dims).rev() {
        *s = acc;
        acc *= d;
    }
    let (rows, cols) = (dims[q], dims[last]);
    let (col_stride, row_out_stride) = (strides[last], out_strides[q]);
    // The other axes, each with its input and output stride.
    let others: Vec<usize> = (0..rank).filter(|&i| i != q && i != last).collect();
    let other_dims: Vec<usize> = others.iter().map(|&i| dims[i]).collect();
    let other_in: Vec<usize> = others.iter().map(|&i| strides[i]).collect();
    let other_out: Vec<usize> = others.iter().map(|&i| out_strides[i]).collect();
    let mut out = vec![src[0].clone(); total];
    let mut out_bases = Vec::new();
    for_each_offset(&other_dims, &other_out, |o| out_bases.push(o));
    let mut k = 0;
    for_each_offset(&other_dims, &other_in, |ib| {
        let ob = out_bases[k];
        k += 1;
        for r0 in (0..rows).step_by(TILE) {
            let r1 = (r0 + TILE).min(rows);
            for c0 in (0..cols).step_by(TILE) {
                let c1 = (c0 + TILE).min(cols);
                for r in r0..r1 {
                    let dst = &mut out[ob + r * row_out_stride + c0..ob + r * row_out_stride + c1];
                    let base = ib + r;
                    for (c, d) in (c0..c1).zip(dst) {
                        *d = src[base + c * col_stride].clone();
                    }
                }
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The straightforward copy: every output index mapped back to its input offset.
    fn reference(src: &[f32], shape: &[usize], perm: &[usize]) -> Vec<f32> {
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let total: usize = shape.iter().product();
        let mut in_strides = vec![1usize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            in_strides[i] = in_strides[i + 1] * shape[i + 1];
        }
        (0..total)
            .map(|mut flat| {
                let mut off = 0;
                for i in (0..out_shape.len()).rev() {
                    off += (flat % out_shape[i]) * in_strides[perm[i]];
                    flat /= out_shape[i];
                }
                src[off]
            })
            .collect()
    }

    fn check(src: &[f32], shape: &[usize], perm: &[usize]) {
        let got = permuted_copy(src, shape, perm);
        let want = reference(src, shape, perm);
        let same = got.len() == want.len()
            && got
                .iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits());
        assert!(same, "shape {shape:?} perm {perm:?}");
        // Through ndarray's copy too, as `permute` falls back to it.
        let a = Array::from_shape_vec(IxDyn(shape), src.to_vec()).unwrap();
        let via = permute(&a, perm);
        let ndarray_copy = a
            .view()
            .permuted_axes(IxDyn(perm))
            .as_standard_layout()
            .to_owned();
        assert_eq!(via.shape(), ndarray_copy.shape());
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(via.as_slice().unwrap()),
            bits(ndarray_copy.as_slice().unwrap())
        );
    }

    fn random_perm(rng: &mut ChaCha8Rng, rank: usize) -> Vec<usize> {
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        perm
    }

    #[test]
    fn random_shapes_and_permutations_match_the_index_mapping() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..600 {
            let rank = rng.random_range(1..=6);
            let shape: Vec<usize> = (0..rank)
                .map(|_| match rng.random_range(0..10) {
                    0 => 0,
                    1 => 1,
                    2 => rng.random_range(30..70),
                    _ => rng.random_range(2..6),
                })
                .collect();
            let total: usize = shape.iter().product();
            if total > 200_000 {
                continue;
            }
            let src: Vec<f32> = (0..total)
                .map(|i| {
                    if i % 97 == 5 {
                        f32::NAN
                    } else {
                        rng.random::<f32>() - 0.5
                    }
                })
                .collect();
            let perm = random_perm(&mut rng, rank);
            check(&src, &shape, &perm);
        }
    }

    #[test]
    fn edge_layouts_match_the_index_mapping() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[5], &[0]),
            (&[0, 3], &[1, 0]),
            (&[3, 0, 2], &[2, 0, 1]),
            (&[1, 1, 1], &[2, 1, 0]),
            (&[4, 1, 3], &[2, 1, 0]),
            (&[7, 9], &[1, 0]),
            (&[33, 65], &[1, 0]),
            (&[64, 32], &[1, 0]),
            (&[2, 3, 4, 5], &[0, 1, 2, 3]),
            (&[1, 4, 6, 7, 7], &[0, 2, 1, 3, 4]),
            (&[1, 16, 2, 64], &[0, 2, 1, 3]),
            (&[1, 2, 16, 64], &[0, 1, 3, 2]),
            (&[2, 3, 4, 5, 6, 7], &[5, 4, 3, 2, 1, 0]),
            (&[2, 3, 4, 5, 6, 7], &[1, 0, 3, 2, 5, 4]),
            (&[3, 40, 1, 50], &[3, 2, 0, 1]),
        ];
        for (shape, perm) in cases {
            let total: usize = shape.iter().product();
            let src: Vec<f32> = (0..total).map(|i| i as f32).collect();
            check(&src, shape, perm);
        }
    }

    #[test]
    fn strings_are_permuted_too() {
        let a = Array::from_shape_vec(
            IxDyn(&[2, 3]),
            ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec(),
        )
        .unwrap();
        let t = permute(&a, &[1, 0]);
        assert_eq!(t.shape(), &[3, 2]);
        assert_eq!(t.iter().cloned().collect::<String>(), "adbecf");
    }

    #[test]
    fn a_non_standard_input_goes_through_ndarray() {
        let a = Array::from_shape_vec(IxDyn(&[3, 4]), (0..12).map(|i| i as f32).collect()).unwrap();
        let t = a.clone().reversed_axes();
        let p = permute(&t, &[1, 0]);
        assert_eq!(p.shape(), &[3, 4]);
        assert_eq!(p.as_slice().unwrap(), a.as_slice().unwrap());
    }
}
