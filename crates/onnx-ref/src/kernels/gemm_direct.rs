//! f32 GEMM without packing, for products of a few dozen rows (MatMul over a short sequence, a
//! grouped Conv's channels), where packing both operands on every call costs matrixmultiply
//! about as much as the product. The output is computed in `MR`×`NR` register tiles, strips
//! of `NR` columns outermost (a strip of `b` stays in cache while every row passes over it).
//! Each element is matrixmultiply's arithmetic exactly: an FMA chain from zero over `k` in
//! blocks of [`KC`], the first block stored (`acc`, or `acc + beta·c`), each later one added
//! (`c + acc`), so on a CPU with FMA the result is bit-identical to the packed path's for
//! `alpha == 1` (the only case taken here). Without FMA the caller packs as before.

use super::matmul::MatRef;

/// matrixmultiply's `kc` for f32 (`S_KC`): the depth of one FMA chain.
const KC: usize = 256;
/// Rows of a register tile.
const MR: usize = 4;
/// Columns of a register tile (two 8-lane vectors).
const NR: usize = 16;

/// `c[m×n] (row-major) = a·b + beta·c` for a row-contiguous `a` and `b` (`cs == 1`), or
/// `None` (nothing written) when the CPU has no FMA.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_direct_f32(
    m: usize,
    k: usize,
    n: usize,
    a: MatRef<f32>,
    b: MatRef<f32>,
    beta: f32,
    c: &mut [f32],
) -> Option<()> {
    debug_assert!(a.cs == 1 && b.cs == 1 && k > 0);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
        {
            // SAFETY: the target features `gemm_fma` is compiled with were detected above.
            unsafe { gemm_fma(m, k, n, a, b, beta, c) };
            return Some(());
        }
    }
    let _ = (m, k, n, a, b, beta, c);
    None
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn gemm_fma(
    m: usize,
    k: usize,
    n: usize,
    a: MatRef<f32>,
    b: MatRef<f32>,
    beta: f32,
    c: &mut [f32],
) {
    gemm_tiles(m, k, n, a, b, beta, c)
}

/// The tiled product (inlined into the FMA-enabled caller, where `mul_add` is one
/// instruction).
#[inline(always)]
fn gemm_tiles(
    m: usize,
    k: usize,
    n: usize,
    a: MatRef<f32>,
    b: MatRef<f32>,
    beta: f32,
    c: &mut [f32],
) {
    // A strip narrower than `NR` (the last one) is copied here, zero-padded.
    let mut narrow = Vec::new();
    for j0 in (0..n).step_by(NR) {
        let w = NR.min(n - j0);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            // The strip's rows `k0..k0 + kc`: a pointer and a row stride valid for `NR` reads
            // per row (checked here, so that the tile loop has no bounds checks).
            let (strip, strip_rs) = if w == NR {
                let last = (k0 + kc - 1) * b.rs + j0 + NR;
                let rows = &b.data[k0 * b.rs + j0..last];
                (rows.as_ptr(), b.rs)
            } else {
                narrow.clear();
                narrow.resize(kc * NR, 0.0);
                for (p, dst) in narrow.chunks_exact_mut(NR).enumerate() {
                    dst[..w].copy_from_slice(&b.data[(k0 + p) * b.rs + j0..][..w]);
                }
                (narrow.as_ptr(), NR)
            };
            for i0 in (0..m).step_by(MR) {
                let h = MR.min(m - i0);
                // Rows past `m` repeat the last row; their sums are dropped.
                let rows: [*const f32; MR] = std::array::from_fn(|r| {
                    let o = (i0 + r.min(h - 1)) * a.rs + k0;
                    a.data[o..o + kc].as_ptr()
                });
                // SAFETY: each of `rows` starts `kc` readable values (sliced above); the strip
                // has `kc` rows of `NR` readable values `strip_rs` apart (sliced or copied).
                let acc = unsafe { tile(rows, strip, strip_rs, kc) };
                for (r, acc_row) in acc.iter().enumerate().take(h) {
                    let out = &mut c[(i0 + r) * n + j0..][..w];
                    for (cv, &s) in out.iter_mut().zip(acc_row) {
                        *cv = if k0 > 0 {
                            *cv + s
                        } else if beta == 0.0 {
                            s
                        } else {
                            s + beta * *cv
                        };
                    }
                }
            }
        }
    }
}

/// One register tile: for each of the `MR` rows of `a` (pointers to their first value of the
/// block), the FMA chains over `kc` depths against the `NR` values of `b`'s row at each depth.
///
/// # Safety
/// Each `a[r]` must be valid for `kc` reads, and `b` for `NR` reads at every `p * b_rs`,
/// `p < kc`.
#[inline(always)]
unsafe fn tile(a: [*const f32; MR], b: *const f32, b_rs: usize, kc: usize) -> [[f32; NR]; MR] {
    let mut acc = [[0f32; NR]; MR];
    for p in 0..kc {
        // SAFETY: within the bounds the caller promises.
        let bv = unsafe { b.add(p * b_rs).cast::<[f32; NR]>().read_unaligned() };
        for r in 0..MR {
            // SAFETY: as above.
            let av = unsafe { *a[r].add(p) };
            for l in 0..NR {
                acc[r][l] = av.mul_add(bv[l], acc[r][l]);
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// matrixmultiply's packed product, the path this one replaces.
    #[allow(clippy::too_many_arguments)]
    fn packed(
        m: usize,
        k: usize,
        n: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        beta: f32,
        c: &mut [f32],
    ) {
        // SAFETY: a is m×k with row stride lda >= k, b is k×n with row stride ldb >= n, c is
        // m×n row-major: every index lies inside the slices (asserted).
        assert!(a.len() >= (m - 1) * lda + k && b.len() >= (k - 1) * ldb + n && c.len() >= m * n);
        unsafe {
            matrixmultiply::sgemm(
                m,
                k,
                n,
                1.0,
                a.as_ptr(),
                lda as isize,
                1,
                b.as_ptr(),
                ldb as isize,
                1,
                beta,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    }

    /// The plain per-element definition: one FMA chain per block of `KC`, blocks added.
    #[allow(clippy::too_many_arguments)]
    fn chained(
        m: usize,
        k: usize,
        n: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        beta: f32,
        c: &mut [f32],
    ) {
        for i in 0..m {
            for j in 0..n {
                let mut out = c[i * n + j];
                for k0 in (0..k).step_by(KC) {
                    let mut acc = 0f32;
                    for p in k0..(k0 + KC).min(k) {
                        acc = a[i * lda + p].mul_add(b[p * ldb + j], acc);
                    }
                    out = if k0 > 0 {
                        out + acc
                    } else if beta == 0.0 {
                        acc
                    } else {
                        acc + beta * out
                    };
                }
                c[i * n + j] = out;
            }
        }
    }

    #[test]
    fn equals_the_packed_product_bit_for_bit() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let shapes = [
            (5, 1, 1),
            (5, 3, 17),
            (16, 128, 128),
            (16, 64, 16),
            (7, 255, 33),
            (13, 256, 15),
            (6, 257, 16),
            (64, 600, 40),
            (33, 513, 3),
            (9, 20, 0),
            (100, 300, 50),
            (68, 68, 196),
            (136, 136, 49),
        ];
        for (case, &(m, k, n)) in shapes.iter().enumerate() {
            for beta in [0.0f32, 1.0, -2.5] {
                // Row strides past the row length, as a batch or a Conv's im2col slice has.
                let (lda, ldb) = (k + case % 3, n + case % 2);
                let a: Vec<f32> = (0..m * lda)
                    .map(|i| {
                        if i % 211 == 7 {
                            f32::NAN
                        } else {
                            rng.random::<f32>() * 2.0 - 1.0
                        }
                    })
                    .collect();
                let b: Vec<f32> = (0..k * ldb)
                    .map(|_| rng.random::<f32>() * 4.0 - 2.0)
                    .collect();
                let c0: Vec<f32> = (0..m * n).map(|_| rng.random::<f32>() - 0.5).collect();
                let (am, bm) = (
                    MatRef {
                        data: &a,
                        rs: lda,
                        cs: 1,
                    },
                    MatRef {
                        data: &b,
                        rs: ldb,
                        cs: 1,
                    },
                );
                let mut got = c0.clone();
                if gemm_direct_f32(m, k, n, am, bm, beta, &mut got).is_none() {
                    assert_eq!(got, c0, "nothing is written without FMA");
                    continue;
                }
                let mut want = c0.clone();
                chained(m, k, n, &a, lda, &b, ldb, beta, &mut want);
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "m={m} k={k} n={n} beta={beta}");
                if n > 0 {
                    let mut mm = c0.clone();
                    packed(m, k, n, &a, lda, &b, ldb, beta, &mut mm);
                    let same = got
                        .iter()
                        .zip(&mm)
                        .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
                    assert!(same, "packed differs: m={m} k={k} n={n} beta={beta}");
                }
            }
        }
    }
}
