//! Matrix products: the strided GEMM every dense kernel uses (matrixmultiply for f32/f64, f32
//! for the 16-bit floats, a plain loop for integers), MatMul (batched, broadcasting, 1-D
//! operands) and Gemm (alpha, beta, transA/B, C broadcast, C optional from opset 11).

use half::slice::HalfBitsSliceExt;
use half::{bf16, f16};
use ndarray::{ArrayViewD, IxDyn};

use super::{
    broadcast_shapes, broadcast_view, gemm_direct, one, parallel, same_dtype, typed, unsupported,
};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "MatMul", 1, LATEST, matmul);
    reg.register("", "Gemm", 1, LATEST, gemm);
}

/// A strided matrix operand: `data[i * rs + j * cs]` is element (i, j).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatRef<'a, T> {
    pub data: &'a [T],
    pub rs: usize,
    pub cs: usize,
}

impl<T> MatRef<'_, T> {
    /// The same matrix of `rows` x `cols` with its data cut after its last element (a batch
    /// matrix's slice runs to the end of the whole buffer).
    fn trimmed(self, rows: usize, cols: usize) -> Self {
        let end = if rows == 0 || cols == 0 {
            0
        } else {
            (rows - 1) * self.rs + (cols - 1) * self.cs + 1
        };
        MatRef {
            data: &self.data[..end.min(self.data.len())],
            ..self
        }
    }
}

fn check_extent(
    len: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
    what: &str,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let last = (rows - 1)
        .checked_mul(rs)
        .and_then(|r| (cols - 1).checked_mul(cs).and_then(|c| r.checked_add(c)));
    match last {
        Some(l) if l < len => Ok(()),
        _ => Err(RefError::op(format!(
            "{what} buffer of {len} elements is too small for {rows}x{cols}"
        ))),
    }
}

/// Element types with a GEMM: `c[m×n] (row-major, contiguous) = alpha·a·b + beta·c`.
pub(crate) trait GemmElem: Num {
    #[allow(clippy::too_many_arguments)]
    fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: MatRef<Self>,
        b: MatRef<Self>,
        beta: Self,
        c: &mut [Self],
    );

    /// Checked GEMM.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: MatRef<Self>,
        b: MatRef<Self>,
        beta: Self,
        c: &mut [Self],
    ) -> Result<()> {
        check_extent(a.data.len(), m, k, a.rs, a.cs, "A")?;
        check_extent(b.data.len(), k, n, b.rs, b.cs, "B")?;
        if c.len() < m * n {
            return Err(RefError::op("C buffer too small"));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            for v in c.iter_mut().take(m * n) {
                *v = if beta == Self::zero() {
                    Self::zero()
                } else {
                    v.mul(beta)
                };
            }
            return Ok(());
        }
        Self::gemm_raw(m, k, n, alpha, a, b, beta, c);
        Ok(())
    }
}

/// Row counts up to which f32 GEMM skips packing (matrixmultiply packs both operands on every
/// call, which costs more than the product itself for a row or two: a classifier's batch of
/// one). Above it, packing pays for itself.
const SMALL_M: usize = 4;

/// Row counts up to which f32 GEMM (with `alpha == 1`, row-contiguous operands) runs
/// unpacked in register tiles ([`gemm_direct`], the same sums as the packed path).
const DIRECT_MAX_M: usize = 64;
/// Up to this many rows, the unpacked path also takes a product whose left operand has at
/// most `DIRECT_WIDE_MAX_MK` elements (it is reread for every strip of `NR` columns, from
/// cache) and at most `DIRECT_WIDE_MAX_N` columns (over more, packing pays for itself): a
/// grouped 1x1 Conv's groups (shufflenet's 68x68 and 136x136 weights over 196 and 49
/// positions).
const DIRECT_WIDE_MAX_M: usize = 160;
const DIRECT_WIDE_MAX_MK: usize = 1 << 15;
const DIRECT_WIDE_MAX_N: usize = 256;
/// Above this many rows, the unpacked path only takes a right operand of at most
/// `DIRECT_MAX_KN` elements: over a large one (a Conv's im2col columns), reading it in strided
/// strips costs more than matrixmultiply's packing (resnet18's 64-channel layers).
const DIRECT_ANY_KN_M: usize = 16;
const DIRECT_MAX_KN: usize = 1 << 18;

/// Output columns a small-GEMM block keeps in registers.
const BLOCK_N: usize = 16;

/// A dot product in eight independent lanes (vectorizes; sums in another order than a plain
/// loop, as any blocked GEMM does).
#[inline]
fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (xs, ys) in xc.zip(yc) {
        for l in 0..8 {
            lanes[l] += xs[l] * ys[l];
        }
    }
    let mut tail = 0f32;
    for (p, q) in xr.iter().zip(yr) {
        tail += p * q;
    }
    lanes.iter().sum::<f32>() + tail
}

/// One row of `a` times `BLOCK_N` (or fewer, `w`) columns of a row-major `b` starting at
/// column `j0`, accumulated in registers over the whole inner dimension.
#[inline]
fn row_block_f32(arow: &[f32], b: MatRef<f32>, j0: usize, w: usize) -> [f32; BLOCK_N] {
    let mut acc = [0f32; BLOCK_N];
    if w == BLOCK_N {
        for (p, &av) in arow.iter().enumerate() {
            let brow = &b.data[p * b.rs + j0..][..BLOCK_N];
            for l in 0..BLOCK_N {
                acc[l] += av * brow[l];
            }
        }
    } else {
        for (p, &av) in arow.iter().enumerate() {
            let brow = &b.data[p * b.rs + j0..][..w];
            for (l, bv) in brow.iter().enumerate() {
                acc[l] += av * bv;
            }
        }
    }
    acc
}

/// Weights (`k·n` elements) from which a one-row product runs as [`gemv_f32`], and the least
/// of them each of its parts reads.
const GEMV_MIN_WORK: usize = 1 << 18;
/// Output columns each part of a split one-row product has at least.
const GEMV_MIN_COLUMNS: usize = 16;
/// Output columns a one-row product over a large row-major weight accumulates at a time: each
/// weight row is then read as one contiguous run.
const GEMV_CHUNK: usize = 256;

/// `c = alpha·a·b + beta·c` for one row `a` over a large weight `b` (row-major or transposed),
/// its columns split across threads. Each column sums in the order of [`small_gemm_f32`] (all
/// of `k` in one accumulator, or [`dot_f32`]), so the split does not change the result.
#[allow(clippy::too_many_arguments)]
fn gemv_f32(
    k: usize,
    n: usize,
    alpha: f32,
    arow: &[f32],
    b: MatRef<f32>,
    beta: f32,
    c: &mut [f32],
) {
    let count = parallel::parts_for(k * n, GEMV_MIN_WORK, n, GEMV_MIN_COLUMNS);
    let bounds = parallel::split_bounds(n, count);
    let mut parts = Vec::with_capacity(count);
    let mut rest = &mut c[..n];
    for t in 0..count {
        let (head, tail) = rest.split_at_mut(bounds[t + 1] - bounds[t]);
        parts.push(head);
        rest = tail;
    }
    let done: std::result::Result<(), ()> = parallel::run_parts(parts, |t, part| {
        gemv_columns(k, alpha, arow, b, beta, bounds[t], part);
        Ok(())
    });
    debug_assert!(done.is_ok());
}

/// Columns `j0..j0 + c.len()` of [`gemv_f32`].
fn gemv_columns(
    k: usize,
    alpha: f32,
    arow: &[f32],
    b: MatRef<f32>,
    beta: f32,
    j0: usize,
    c: &mut [f32],
) {
    let scaled = |prev: f32| if beta == 0.0 { 0.0 } else { beta * prev };
    if b.cs == 1 {
        let mut acc = [0f32; GEMV_CHUNK];
        for (i, chunk) in c.chunks_mut(GEMV_CHUNK).enumerate() {
            let (w, jj) = (chunk.len(), j0 + i * GEMV_CHUNK);
            let acc = &mut acc[..w];
            acc.fill(0.0);
            for (p, &av) in arow.iter().enumerate().take(k) {
                let brow = &b.data[p * b.rs + jj..][..w];
                for (x, bv) in acc.iter_mut().zip(brow) {
                    *x += av * bv;
                }
            }
            for (cv, v) in chunk.iter_mut().zip(acc.iter()) {
                *cv = alpha * v + scaled(*cv);
            }
        }
    } else {
        for (j, cv) in c.iter_mut().enumerate() {
            let bcol = &b.data[(j0 + j) * b.cs..][..k];
            *cv = alpha * dot_f32(&arow[..k], bcol) + scaled(*cv);
        }
    }
}

/// `c = alpha·a·b + beta·c` for a few rows of `a` (row-contiguous), without packing: blocks of
/// output columns accumulated in registers when `b` is row-major, dot products when `b` is a
/// transposed row-major matrix. `None` when the layout is neither.
#[allow(clippy::too_many_arguments)]
fn small_gemm_f32(
    m: usize,
    k: usize,
    n: usize,
    alpha: f32,
    a: MatRef<f32>,
    b: MatRef<f32>,
    beta: f32,
    c: &mut [f32],
) -> Option<()> {
    if m > SMALL_M || a.cs != 1 {
        return None;
    }
    if m == 1 && k * n >= GEMV_MIN_WORK && (b.cs == 1 || b.rs == 1) {
        gemv_f32(k, n, alpha, &a.data[..k], b, beta, c);
        return Some(());
    }
    let scaled = |prev: f32| if beta == 0.0 { 0.0 } else { beta * prev };
    if b.cs == 1 {
        for i in 0..m {
            let arow = &a.data[i * a.rs..i * a.rs + k];
            for j0 in (0..n).step_by(BLOCK_N) {
                let w = BLOCK_N.min(n - j0);
                let acc = row_block_f32(arow, b, j0, w);
                for (cv, v) in c[i * n + j0..][..w].iter_mut().zip(acc) {
                    *cv = alpha * v + scaled(*cv);
                }
            }
        }
        return Some(());
    }
    if b.rs == 1 {
        for i in 0..m {
            let arow = &a.data[i * a.rs..i * a.rs + k];
            for j in 0..n {
                let bcol = &b.data[j * b.cs..j * b.cs + k];
                let cv = &mut c[i * n + j];
                *cv = alpha * dot_f32(arow, bcol) + scaled(*cv);
            }
        }
        return Some(());
    }
    None
}

impl GemmElem for f32 {
    fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f32,
        a: MatRef<f32>,
        b: MatRef<f32>,
        beta: f32,
        c: &mut [f32],
    ) {
        if small_gemm_f32(m, k, n, alpha, a, b, beta, c).is_some() {
            return;
        }
        let direct_rows = m <= DIRECT_MAX_M
            || (m <= DIRECT_WIDE_MAX_M && m * k <= DIRECT_WIDE_MAX_MK && n <= DIRECT_WIDE_MAX_N);
        if direct_rows
            && (m <= DIRECT_ANY_KN_M || k * n <= DIRECT_MAX_KN)
            && alpha == 1.0
            && a.cs == 1
            && b.cs == 1
            && gemm_direct::gemm_direct_f32(m, k, n, a, b, beta, c).is_some()
        {
            return;
        }
        // SAFETY: `gemm` checked that every (i, j) index of A (m×k), B (k×n) and C (m×n,
        // row-major) lies inside its slice, and C is exclusively borrowed.
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                alpha,
                a.data.as_ptr(),
                a.rs as isize,
                a.cs as isize,
                b.data.as_ptr(),
                b.rs as isize,
                b.cs as isize,
                beta,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    }
}

impl GemmElem for f64 {
    fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        alpha: f64,
        a: MatRef<f64>,
        b: MatRef<f64>,
        beta: f64,
        c: &mut [f64],
    ) {
        // SAFETY: as for f32: extents were checked by `gemm`.
        unsafe {
            matrixmultiply::dgemm(
                m,
                k,
                n,
                alpha,
                a.data.as_ptr(),
                a.rs as isize,
                a.cs as isize,
                b.data.as_ptr(),
                b.rs as isize,
                b.cs as isize,
                beta,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    }
}

/// Right operands up to this many elements are widened to f32 whole; larger ones in panels
/// of rows (a 16-bit weight is never widened as a whole: 4096x11008 would be 180 MB).
const WIDEN_WHOLE_MAX: usize = 1 << 20;

/// 16-bit floats widened to f32 in slices (SIMD where the CPU has it); `Num::from_f32`
/// rounds back.
trait Widen: Num {
    fn widen(src: &[Self], dst: &mut [f32]);
}

impl Widen for f16 {
    fn widen(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst)
    }
}

impl Widen for bf16 {
    fn widen(src: &[Self], dst: &mut [f32]) {
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst)
    }
}

/// `src` widened to a new f32 vector.
fn widened<T: Widen>(src: &[T]) -> Vec<f32> {
    let mut out = vec![0f32; src.len()];
    T::widen(src, &mut out);
    out
}

/// GEMM of 16-bit floats in f32, rounded once at the end. The right operand (a weight, often
/// a memory-mapped one) is widened a row or a column at a time for a few rows of `a`, in
/// panels of rows for more: it is read once and never held widened as a whole. The sums run
/// in the order of [`small_gemm_f32`] (row blocks, or dot products for a transposed `b`), so
/// the few-row result is the same as widening everything first.
#[allow(clippy::too_many_arguments)]
fn gemm_16<T: Widen>(
    m: usize,
    k: usize,
    n: usize,
    alpha: T,
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: &mut [T],
) {
    let (alpha, beta) = (alpha.to_f32(), beta.to_f32());
    let (a, b) = (a.trimmed(m, k), b.trimmed(k, n));
    let a32 = widened(a.data);
    let a32 = MatRef {
        data: &a32,
        rs: a.rs,
        cs: a.cs,
    };
    let mut c32 = widened(&c[..m * n]);
    let scaled = |prev: f32| if beta == 0.0 { 0.0 } else { beta * prev };
    if m <= SMALL_M && a.cs == 1 && b.cs == 1 {
        let mut acc = vec![0f32; m * n];
        let mut row = vec![0f32; n];
        for p in 0..k {
            T::widen(&b.data[p * b.rs..p * b.rs + n], &mut row);
            for i in 0..m {
                let av = a32.data[i * a32.rs + p];
                for (x, r) in acc[i * n..(i + 1) * n].iter_mut().zip(&row) {
                    *x += av * r;
                }
            }
        }
        for (cv, v) in c32.iter_mut().zip(acc) {
            *cv = alpha * v + scaled(*cv);
        }
    } else if m <= SMALL_M && a.cs == 1 && b.rs == 1 {
        let mut col = vec![0f32; k];
        for j in 0..n {
            T::widen(&b.data[j * b.cs..j * b.cs + k], &mut col);
            for i in 0..m {
                let arow = &a32.data[i * a32.rs..i * a32.rs + k];
                let cv = &mut c32[i * n + j];
                *cv = alpha * dot_f32(arow, &col) + scaled(*cv);
            }
        }
    } else if k * n > WIDEN_WHOLE_MAX && b.cs == 1 {
        // Panels of rows of `b`, each adding its share of the product to `c`.
        let rows = (WIDEN_WHOLE_MAX / n).max(1);
        let mut panel = vec![0f32; rows * n];
        for p0 in (0..k).step_by(rows) {
            let h = rows.min(k - p0);
            for r in 0..h {
                let src = &b.data[(p0 + r) * b.rs..(p0 + r) * b.rs + n];
                T::widen(src, &mut panel[r * n..(r + 1) * n]);
            }
            let a_part = MatRef {
                data: &a32.data[p0 * a32.cs..],
                rs: a32.rs,
                cs: a32.cs,
            };
            let b_part = MatRef {
                data: &panel[..h * n],
                rs: n,
                cs: 1,
            };
            let beta_here = if p0 == 0 { beta } else { 1.0 };
            f32::gemm_raw(m, h, n, alpha, a_part, b_part, beta_here, &mut c32);
        }
    } else {
        let b32 = widened(b.data);
        let b32 = MatRef {
            data: &b32,
            rs: b.rs,
            cs: b.cs,
        };
        f32::gemm_raw(m, k, n, alpha, a32, b32, beta, &mut c32);
    }
    for (d, s) in c.iter_mut().zip(c32) {
        *d = T::from_f32(s);
    }
}

macro_rules! gemm_via_f32 {
    ($($ty:ty),*) => {$(
        impl GemmElem for $ty {
            fn gemm_raw(m: usize, k: usize, n: usize, alpha: Self, a: MatRef<Self>, b: MatRef<Self>, beta: Self, c: &mut [Self]) {
                gemm_16(m, k, n, alpha, a, b, beta, c)
            }
        }
    )*};
}
gemm_via_f32!(f16, bf16);

macro_rules! gemm_loop {
    ($($ty:ty),*) => {$(
        impl GemmElem for $ty {
            fn gemm_raw(m: usize, k: usize, n: usize, alpha: Self, a: MatRef<Self>, b: MatRef<Self>, beta: Self, c: &mut [Self]) {
                for i in 0..m {
                    for j in 0..n {
                        let mut acc: Self = 0;
                        for p in 0..k {
                            acc = acc.wrapping_add(a.data[i * a.rs + p * a.cs].wrapping_mul(b.data[p * b.rs + j * b.cs]));
                        }
                        let prev = if beta == 0 { 0 } else { c[i * n + j].wrapping_mul(beta) };
                        c[i * n + j] = acc.wrapping_mul(alpha).wrapping_add(prev);
                    }
                }
            }
        }
    )*};
}
gemm_loop!(i8, i16, i32, i64, u8, u16, u32, u64);

/// f32 GEMM on row-major contiguous operands: `c = a·b` (exposed for benchmarks and tests).
pub fn gemm_f32(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) -> Result<()> {
    f32::gemm(
        m,
        k,
        n,
        1.0,
        MatRef {
            data: a,
            rs: k,
            cs: 1,
        },
        MatRef {
            data: b,
            rs: n,
            cs: 1,
        },
        0.0,
        c,
    )
}

/// Dispatches a generic body over the GEMM element types.
macro_rules! map_gemm {
    ($t:expr, $a:ident => $body:expr, $other:ident => $fallback:expr) => {
        match $t {
            Tensor::F32($a) => Tensor::F32($body),
            Tensor::F64($a) => Tensor::F64($body),
            Tensor::F16($a) => Tensor::F16($body),
            Tensor::BF16($a) => Tensor::BF16($body),
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

/// MatMul's result shape: the batch dims, then m unless A was 1-D, then n unless B was 1-D.
fn out_shape_final(
    batch: Vec<usize>,
    a_rank: usize,
    b_rank: usize,
    m: usize,
    n: usize,
) -> Vec<usize> {
    let mut shape = batch;
    if a_rank > 1 {
        shape.push(m);
    }
    if b_rank > 1 {
        shape.push(n);
    }
    shape
}

pub(crate) fn matmul_of<T: GemmElem>(a: &Array<T>, b: &Array<T>) -> Result<Array<T>> {
    matmul_views(a.view(), b.view())
}

/// MatMul of two array views (the right one may be a weight viewed in place).
fn matmul_views<T: GemmElem>(a: ArrayViewD<T>, b: ArrayViewD<T>) -> Result<Array<T>> {
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(RefError::op("MatMul operands must have rank >= 1"));
    }
    let a_shape: Vec<usize> = if a.ndim() == 1 {
        vec![1, a.shape()[0]]
    } else {
        a.shape().to_vec()
    };
    let b_shape: Vec<usize> = if b.ndim() == 1 {
        vec![b.shape()[0], 1]
    } else {
        b.shape().to_vec()
    };
    let (ra, rb) = (a_shape.len(), b_shape.len());
    let (m, k) = (a_shape[ra - 2], a_shape[ra - 1]);
    let (k2, n) = (b_shape[rb - 2], b_shape[rb - 1]);
    if k != k2 {
        return Err(RefError::op(format!(
            "MatMul inner dimensions differ: {:?} x {:?}",
            a.shape(),
            b.shape()
        )));
    }
    let batch = broadcast_shapes(&a_shape[..ra - 2], &b_shape[..rb - 2])?;
    let batch_n: usize = batch.iter().product();
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    check_size("MatMul result", &out_shape)?;
    let a_std = a.as_standard_layout();
    let b_std = b.as_standard_layout();
    let a_flat = a_std
        .as_slice()
        .ok_or_else(|| RefError::op("MatMul operand is not contiguous"))?;
    let b_flat = b_std
        .as_slice()
        .ok_or_else(|| RefError::op("MatMul operand is not contiguous"))?;
    // Offset of each batch matrix within a broadcast operand.
    let offsets = |shape: &[usize], mat: usize| -> Vec<usize> {
        let bdims = &shape[..shape.len() - 2];
        let pad = batch.len() - bdims.len();
        let mut out = Vec::with_capacity(batch_n);
        let mut idx = vec![0usize; batch.len()];
        for _ in 0..batch_n {
            let mut off = 0;
            for (d, &dim) in bdims.iter().enumerate() {
                let i = if dim == 1 { 0 } else { idx[d + pad] };
                off = off * dim + i;
            }
            out.push(off * mat);
            for d in (0..batch.len()).rev() {
                idx[d] += 1;
                if idx[d] < batch[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    };
    let mut out = vec![T::zero(); batch_n * m * n];
    if rb == 2 && batch_n > 1 {
        // One matrix on the right: the left batch is one tall matrix.
        T::gemm(
            batch_n * m,
            k,
            n,
            T::one(),
            MatRef {
                data: a_flat,
                rs: k,
                cs: 1,
            },
            MatRef {
                data: b_flat,
                rs: n,
                cs: 1,
            },
            T::zero(),
            &mut out,
        )?;
        return array_from_vec(&out_shape_final(batch, a.ndim(), b.ndim(), m, n), out);
    }
    let a_off = offsets(&a_shape, m * k);
    let b_off = offsets(&b_shape, k * n);
    for (bi, (ao, bo)) in a_off.iter().zip(&b_off).enumerate() {
        T::gemm(
            m,
            k,
            n,
            T::one(),
            MatRef {
                data: &a_flat[*ao..],
                rs: k,
                cs: 1,
            },
            MatRef {
                data: &b_flat[*bo..],
                rs: n,
                cs: 1,
            },
            T::zero(),
            &mut out[bi * m * n..(bi + 1) * m * n],
        )?;
    }
    array_from_vec(&out_shape_final(batch, a.ndim(), b.ndim(), m, n), out)
}

/// MatMul or Gemm with its right operand, a 2-D float weight, read in place from `t`'s
/// little-endian raw bytes (a memory-mapped file's pages), neither copied nor decoded: `None`
/// when the bytes cannot be viewed so (no raw data, a misaligned or short buffer, a big-endian
/// host, another dtype than the left operand's), and the caller decodes the tensor instead.
pub(crate) fn product_in_place(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    t: &onnx_proto::TensorProto,
) -> Result<Option<Vec<Value>>> {
    let (Some(Value::Tensor(a)), Some(raw), [k, n]) = (
        inputs.first().copied().flatten(),
        t.raw_data.as_ref(),
        t.dims.as_slice(),
    ) else {
        return Ok(None);
    };
    let (Ok(k), Ok(n)) = (usize::try_from(*k), usize::try_from(*n)) else {
        return Ok(None);
    };
    if cfg!(target_endian = "big") {
        return Ok(None);
    }
    fn viewed<'w, T>(w: &'w [T], k: usize, n: usize) -> Option<ArrayViewD<'w, T>> {
        ArrayViewD::from_shape(IxDyn(&[k, n]), w).ok()
    }
    let bits = || bytemuck::try_cast_slice::<u8, u16>(raw).ok();
    let product = match (a, t.data_type.and_then(DType::from_code)) {
        (Tensor::F32(a), Some(DType::Float)) => {
            let w = bytemuck::try_cast_slice::<u8, f32>(raw).ok();
            match w.and_then(|w| viewed(w, k, n)) {
                Some(w) => product_with(ctx, inputs, a, w).map(Tensor::F32),
                None => return Ok(None),
            }
        }
        (Tensor::F16(a), Some(DType::Float16)) => {
            let w = bits().map(|b| b.reinterpret_cast::<f16>());
            match w.and_then(|w| viewed(w, k, n)) {
                Some(w) => product_with(ctx, inputs, a, w).map(Tensor::F16),
                None => return Ok(None),
            }
        }
        (Tensor::BF16(a), Some(DType::Bfloat16)) => {
            let w = bits().map(|b| b.reinterpret_cast::<bf16>());
            match w.and_then(|w| viewed(w, k, n)) {
                Some(w) => product_with(ctx, inputs, a, w).map(Tensor::BF16),
                None => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    let out = product.map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(Some(vec![Value::Tensor(out)]))
}

/// The node's product (MatMul, or Gemm with its attributes and optional C) with `w` as its
/// right operand.
fn product_with<T: GemmElem>(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    a: &Array<T>,
    w: ArrayViewD<T>,
) -> Result<Array<T>> {
    if ctx.node.op_type.as_deref() != Some("Gemm") {
        return matmul_views(a.view(), w);
    }
    let c = if ctx.opset < 11 {
        Some(ctx.input(inputs, 2)?)
    } else {
        ctx.opt_input(inputs, 2)?
    };
    if let Some(c) = c {
        same_dtype(ctx, &[ctx.input(inputs, 0)?, c])?;
    }
    let c = match c {
        Some(c) => Some(typed(c)?),
        None => None,
    };
    let trans_a = ctx.attr_int("transA", 0)? != 0;
    let trans_b = ctx.attr_int("transB", 0)? != 0;
    let alpha = ctx.attr_float("alpha", 1.0)? as f64;
    let beta = ctx.attr_float("beta", 1.0)? as f64;
    gemm_of(a, w, c, trans_a, trans_b, alpha, beta)
}

pub(crate) fn matmul(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    same_dtype(ctx, &[a, b])?;
    one(map_gemm!(a, x => matmul_of(x, typed(b)?)?, other => return Err(unsupported(ctx, other))))
}

#[allow(clippy::too_many_arguments)]
fn gemm_of<T: GemmElem>(
    a: &Array<T>,
    b: ArrayViewD<T>,
    c: Option<&Array<T>>,
    trans_a: bool,
    trans_b: bool,
    alpha: f64,
    beta: f64,
) -> Result<Array<T>> {
    let to2d = |x: &[usize]| -> Result<(usize, usize)> {
        match x {
            [r, c] => Ok((*r, *c)),
            [n] => Ok((1, *n)),
            s => Err(RefError::op(format!(
                "Gemm operands must be 2-D, got {s:?}"
            ))),
        }
    };
    let (ar, ac) = to2d(a.shape())?;
    let (br, bc) = to2d(b.shape())?;
    let (m, k) = if trans_a { (ac, ar) } else { (ar, ac) };
    let (k2, n) = if trans_b { (bc, br) } else { (br, bc) };
    if k != k2 {
        return Err(RefError::op(format!(
            "Gemm inner dimensions differ: {:?} x {:?}",
            a.shape(),
            b.shape()
        )));
    }
    let a_std = a.as_standard_layout();
    let b_std = b.as_standard_layout();
    let a_flat = a_std
        .as_slice()
        .ok_or_else(|| RefError::op("Gemm operand is not contiguous"))?;
    let b_flat = b_std
        .as_slice()
        .ok_or_else(|| RefError::op("Gemm operand is not contiguous"))?;
    let am = if trans_a {
        MatRef {
            data: a_flat,
            rs: 1,
            cs: ac,
        }
    } else {
        MatRef {
            data: a_flat,
            rs: ac,
            cs: 1,
        }
    };
    let bm = if trans_b {
        MatRef {
            data: b_flat,
            rs: 1,
            cs: bc,
        }
    } else {
        MatRef {
            data: b_flat,
            rs: bc,
            cs: 1,
        }
    };
    let (mut out, beta) = match c {
        Some(c) if beta != 0.0 => {
            let cv = broadcast_view(c, &[m, n])?;
            (cv.iter().copied().collect::<Vec<T>>(), T::from_f64(beta))
        }
        _ => (vec![T::zero(); m * n], T::zero()),
    };
    T::gemm(m, k, n, T::from_f64(alpha), am, bm, beta, &mut out)?;
    array_from_vec(&[m, n], out)
}

fn gemm(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    let c = if ctx.opset < 11 {
        Some(ctx.input(inputs, 2)?)
    } else {
        ctx.opt_input(inputs, 2)?
    };
    same_dtype(ctx, &[a, b])?;
    if let Some(c) = c {
        same_dtype(ctx, &[a, c])?;
    }
    let trans_a = ctx.attr_int("transA", 0)? != 0;
    let trans_b = ctx.attr_int("transB", 0)? != 0;
    let alpha = ctx.attr_float("alpha", 1.0)? as f64;
    let beta = ctx.attr_float("beta", 1.0)? as f64;
    one(map_gemm!(a, x => {
        let c = match c { Some(c) => Some(typed(c)?), None => None };
        gemm_of(x, typed(b)?.view(), c, trans_a, trans_b, alpha, beta)?
    }, other => return Err(unsupported(ctx, other))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1) with a few exact zeros.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let v = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 16;
                (v % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// f64 reference of `alpha·a·b + beta·c` for strided operands.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        m: usize,
        k: usize,
        n: usize,
        alpha: f32,
        a: MatRef<f32>,
        b: MatRef<f32>,
        beta: f32,
        c: &[f32],
    ) -> Vec<f64> {
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| {
                        a.data[i * a.rs + p * a.cs] as f64 * b.data[p * b.rs + j * b.cs] as f64
                    })
                    .sum();
                let prev = if beta == 0.0 {
                    0.0
                } else {
                    beta as f64 * c[i * n + j] as f64
                };
                out[i * n + j] = alpha as f64 * dot + prev;
            }
        }
        out
    }

    /// The unpacked small-row paths (row-major and transposed B, partial column blocks, beta
    /// on and off) and the packed path agree with an f64 reference.
    #[test]
    fn f32_gemm_paths_match_reference() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (1, 7, 5),
            (1, 1280, 1000),
            (1, 700, 531),
            (1, 4099, 77),
            (2, 33, 17),
            (4, 64, 48),
            (5, 20, 9),
            (16, 128, 128),
        ] {
            for trans_b in [false, true] {
                for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 2.0)] {
                    let a = values(m * k, 1);
                    let bv = values(k * n, 2);
                    let c0 = values(m * n, 3);
                    let am = MatRef {
                        data: &a,
                        rs: k,
                        cs: 1,
                    };
                    let bm = weight_ref(&bv, k, n, trans_b);
                    let mut c = c0.clone();
                    f32::gemm(m, k, n, alpha, am, bm, beta, &mut c).unwrap();
                    let want = reference(m, k, n, alpha, am, bm, beta, &c0);
                    for (idx, (g, w)) in c.iter().zip(&want).enumerate() {
                        let tol = 1e-4 * (k as f64).sqrt() * (1.0 + w.abs());
                        assert!(
                            (*g as f64 - w).abs() <= tol,
                            "m={m} k={k} n={n} transB={trans_b} alpha={alpha} beta={beta} \
                             [{idx}]: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    /// A `k x n` weight stored row-major, or as its `n x k` transpose (Gemm's transB).
    fn weight_ref(data: &[f32], k: usize, n: usize, trans_b: bool) -> MatRef<'_, f32> {
        if trans_b {
            MatRef { data, rs: 1, cs: k }
        } else {
            MatRef { data, rs: n, cs: 1 }
        }
    }

    /// A one-row product over a large weight (split across threads where there are several)
    /// sums each column exactly as the unsplit small-row paths do: one accumulator over `k`
    /// for a row-major weight, `dot_f32` for a transposed one; odd sizes, beta on and off.
    #[test]
    fn gemv_equals_the_unsplit_sums() {
        for &(k, n) in &[
            (1024, 256),
            (513, 1031),
            (4099, 77),
            (262_144, 1),
            (3, 100_003),
        ] {
            for trans_b in [false, true] {
                for (alpha, beta) in [(1.0f32, 0.0f32), (0.5, 2.0)] {
                    let a = values(k, 1);
                    let bv = values(k * n, 2);
                    let c0 = values(n, 3);
                    let bm = weight_ref(&bv, k, n, trans_b);
                    let am = MatRef {
                        data: &a,
                        rs: k,
                        cs: 1,
                    };
                    let mut c = c0.clone();
                    f32::gemm(1, k, n, alpha, am, bm, beta, &mut c).unwrap();
                    let scaled = |prev: f32| if beta == 0.0 { 0.0 } else { beta * prev };
                    for j in 0..n {
                        let sum = if trans_b {
                            dot_f32(&a, &bv[j * k..(j + 1) * k])
                        } else {
                            let mut acc = 0f32;
                            for p in 0..k {
                                acc += a[p] * bv[p * n + j];
                            }
                            acc
                        };
                        let want = alpha * sum + scaled(c0[j]);
                        assert_eq!(c[j].to_bits(), want.to_bits(), "k={k} n={n} [{j}]");
                    }
                }
            }
        }
    }

    /// NaN in an operand reaches the outputs it feeds, as in the packed path.
    #[test]
    fn small_gemm_propagates_nan() {
        let (m, k, n) = (1, 3, 20);
        let mut a = values(m * k, 1);
        a[1] = f32::NAN;
        let b = values(k * n, 2);
        let mut c = vec![0.0; m * n];
        f32::gemm(
            m,
            k,
            n,
            1.0,
            MatRef {
                data: &a,
                rs: k,
                cs: 1,
            },
            MatRef {
                data: &b,
                rs: n,
                cs: 1,
            },
            0.0,
            &mut c,
        )
        .unwrap();
        assert!(c.iter().all(|v| v.is_nan()), "{c:?}");
    }
}
