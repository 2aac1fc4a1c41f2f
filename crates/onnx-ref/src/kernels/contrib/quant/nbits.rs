//! MatMulNBits: `Y = A · dequantize(B)ᵀ (+ bias)` where B holds N rows of K weights quantized
//! block-wise along K to 2, 4 or 8 bits (`[N, k_blocks, blob_size]` uint8, the values of a block
//! packed low bits first, the last block padded), with one scale per (row, block) and zero points
//! that are absent (2^(bits-1)), packed like B (uint8 `[N, ceil(k_blocks·bits/8)]`) or unpacked
//! in A's type (`[N, k_blocks]`). The deprecated `g_idx` gives each k its block (act-order).
//!
//! Speed matters: LLMs run through this kernel. The weights are dequantized a panel of output
//! columns at a time into an f32 `[cols, K]` buffer that stays in cache, multiplied by the GEMM
//! of `kernels/matmul.rs` (B read transposed: dot products for a few rows of A, packed
//! `matrixmultiply` for more), and the panel's result is copied out with the bias. float16 A is
//! computed in f32 and rounded once at the end, as onnxruntime's CPU provider does.
//! `accuracy_level` 4 asks for int8 compute: onnxruntime's CPU provider then quantizes A
//! symmetrically to int8 per block of `block_size` along K (scale max|a| / 127, rounded to
//! nearest even) before the product; this kernel does the same to A, then multiplies in f32.
//! Other levels compute in f32.

use std::borrow::Cow;

use super::super::super::matmul::{GemmElem, MatRef};
use super::{contiguous, float_data, float_result};
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::tensor::{check_size, Tensor};
use crate::value::Value;

/// Registers MatMulNBits.
pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register(super::super::MS, "MatMulNBits", 1, LATEST, matmul_nbits);
}

/// How many f32 values of dequantized weights one panel holds (1 MiB: stays in L2).
const PANEL_ELEMS: usize = 1 << 18;

/// The zero points of the blocks.
enum ZeroPoints<'a> {
    /// None given: 2^(bits-1) everywhere.
    Default(f32),
    /// uint8, packed like B: `row_bytes` bytes per row of N.
    Packed {
        data: Cow<'a, [u8]>,
        row_bytes: usize,
    },
    /// In A's type, one per (row, block).
    Float(Cow<'a, [f32]>),
}

/// The quantized weights with everything needed to dequantize a row of N.
struct Weights<'a> {
    b: Cow<'a, [u8]>,
    scales: Cow<'a, [f32]>,
    zero_points: ZeroPoints<'a>,
    g_idx: Option<Vec<usize>>,
    bits: usize,
    block: usize,
    k: usize,
    k_blocks: usize,
    blob: usize,
}

impl Weights<'_> {
    fn zero_point(&self, n: usize, blk: usize) -> f32 {
        match &self.zero_points {
            ZeroPoints::Default(z) => *z,
            ZeroPoints::Float(z) => z[n * self.k_blocks + blk],
            ZeroPoints::Packed { data, row_bytes } => {
                let bit = blk * self.bits;
                let byte = data[n * row_bytes + bit / 8];
                ((byte >> (bit % 8)) & mask(self.bits)) as f32
            }
        }
    }

    /// Row `n` of the dequantized weights (K values) into `out`.
    fn dequantize_row(&self, n: usize, out: &mut [f32]) {
        let row = &self.b[n * self.k_blocks * self.blob..][..self.k_blocks * self.blob];
        match &self.g_idx {
            None => {
                for (blk, (src, dst)) in row
                    .chunks_exact(self.blob)
                    .zip(out.chunks_mut(self.block))
                    .enumerate()
                {
                    let scale = self.scales[n * self.k_blocks + blk];
                    decode(self.bits, src, dst, scale, self.zero_point(n, blk));
                }
            }
            Some(g_idx) => {
                for (src, dst) in row.chunks_exact(self.blob).zip(out.chunks_mut(self.block)) {
                    decode(self.bits, src, dst, 1.0, 0.0);
                }
                for (v, &blk) in out.iter_mut().zip(g_idx) {
                    let scale = self.scales[n * self.k_blocks + blk];
                    *v = (*v - self.zero_point(n, blk)) * scale;
                }
            }
        }
    }
}

fn mask(bits: usize) -> u8 {
    ((1u16 << bits) - 1) as u8
}

/// `(q - zp) · scale` for the `dst.len()` values packed in `src`, low bits first.
fn decode(bits: usize, src: &[u8], dst: &mut [f32], scale: f32, zp: f32) {
    match bits {
        2 => decode_width::<2>(src, dst, scale, zp),
        4 => decode_width::<4>(src, dst, scale, zp),
        _ => decode_width::<8>(src, dst, scale, zp),
    }
}

#[inline]
fn decode_width<const BITS: usize>(src: &[u8], dst: &mut [f32], scale: f32, zp: f32) {
    let per_byte = 8 / BITS;
    let m = mask(BITS);
    for (chunk, &byte) in dst.chunks_mut(per_byte).zip(src) {
        for (j, d) in chunk.iter_mut().enumerate() {
            *d = (((byte >> (j * BITS)) & m) as f32 - zp) * scale;
        }
    }
}

fn required_attr(ctx: &KernelCtx, name: &str) -> Result<usize> {
    let v = ctx
        .attr_opt_int(name)?
        .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))?;
    usize::try_from(v).map_err(|_| ctx.err(format!("attribute '{name}' is negative ({v})")))
}

/// Reads and checks B, the scales, zero points and g_idx against the attributes.
fn weights<'a>(
    ctx: &KernelCtx,
    inputs: &[Option<&'a Value>],
    float_type: crate::dtype::DType,
) -> Result<Weights<'a>> {
    let k = required_attr(ctx, "K")?;
    let n = required_attr(ctx, "N")?;
    let block = required_attr(ctx, "block_size")?;
    let bits = ctx.attr_int("bits", 4)?;
    if !matches!(bits, 2 | 4 | 8) {
        return Err(ctx.err(format!("bits {bits} is not 2, 4 or 8")));
    }
    let bits = bits as usize;
    if block < 16 || !block.is_power_of_two() {
        return Err(ctx.err(format!("block_size {block} is not a power of two >= 16")));
    }
    let k_blocks = k.div_ceil(block);
    let blob = block * bits / 8;
    let b = match ctx.input(inputs, 1)? {
        Tensor::U8(a) => a,
        other => return Err(ctx.err(format!("B must be uint8, found {}", other.dtype()))),
    };
    if b.len() != n * k_blocks * blob {
        return Err(ctx.err(format!(
            "B has shape {:?}, expected [{n}, {k_blocks}, {blob}] for N={n}, K={k}, \
             block_size={block}, bits={bits}",
            b.shape()
        )));
    }
    let scales_t = ctx.input(inputs, 2)?;
    if scales_t.dtype() != float_type {
        return Err(ctx.err(format!(
            "scales are {} but A is {float_type}",
            scales_t.dtype()
        )));
    }
    let scales = float_data(ctx, scales_t, "scales")?;
    if scales.len() != n * k_blocks {
        return Err(ctx.err(format!(
            "scales have shape {:?}, expected [{n}, {k_blocks}]",
            scales_t.shape()
        )));
    }
    let zero_points = match ctx.opt_input(inputs, 3)? {
        None => ZeroPoints::Default((1u32 << (bits - 1)) as f32),
        Some(Tensor::U8(z)) => {
            let row_bytes = (k_blocks * bits).div_ceil(8);
            if z.len() != n * row_bytes {
                return Err(ctx.err(format!(
                    "packed zero_points have shape {:?}, expected [{n}, {row_bytes}]",
                    z.shape()
                )));
            }
            ZeroPoints::Packed {
                data: contiguous(z),
                row_bytes,
            }
        }
        Some(z) if z.dtype() == float_type => {
            let data = float_data(ctx, z, "zero_points")?;
            if data.len() != n * k_blocks {
                return Err(ctx.err(format!(
                    "zero_points have shape {:?}, expected [{n}, {k_blocks}]",
                    z.shape()
                )));
            }
            ZeroPoints::Float(data)
        }
        Some(z) => {
            return Err(ctx.err(format!(
                "zero_points must be uint8 or {float_type}, found {}",
                z.dtype()
            )))
        }
    };
    let g_idx = match ctx.opt_input(inputs, 4)? {
        None => None,
        Some(t) => {
            let v = t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
            if v.len() != k {
                return Err(ctx.err(format!("g_idx has {} values for K={k}", v.len())));
            }
            let idx = v
                .iter()
                .map(|&g| usize::try_from(g).ok().filter(|&g| g < k_blocks))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| ctx.err(format!("g_idx has a block outside 0..{k_blocks}")))?;
            Some(idx)
        }
    };
    Ok(Weights {
        b: contiguous(b),
        scales,
        zero_points,
        g_idx,
        bits,
        block,
        k,
        k_blocks,
        blob,
    })
}

/// `a (m×K) · dequantize(w)ᵀ + bias` (m×n), dequantizing `panel_elems / K` (at least 16)
/// output columns at a time.
fn product(
    w: &Weights,
    a: &[f32],
    m: usize,
    n: usize,
    bias: Option<&[f32]>,
    panel_elems: usize,
) -> Result<Vec<f32>> {
    let k = w.k;
    let mut y = vec![0f32; m * n];
    if m == 0 || n == 0 {
        return Ok(y);
    }
    let cols = (panel_elems / k.max(1)).max(16).min(n);
    let mut panel = vec![0f32; cols * k];
    let mut c = vec![0f32; m * cols];
    for j0 in (0..n).step_by(cols) {
        let width = cols.min(n - j0);
        for (j, row) in panel.chunks_exact_mut(k.max(1)).take(width).enumerate() {
            w.dequantize_row(j0 + j, &mut row[..k]);
        }
        f32::gemm(
            m,
            k,
            width,
            1.0,
            MatRef {
                data: a,
                rs: k,
                cs: 1,
            },
            MatRef {
                data: &panel[..width * k],
                rs: 1,
                cs: k,
            },
            0.0,
            &mut c[..m * width],
        )?;
        for (dst, src) in y.chunks_exact_mut(n).zip(c.chunks_exact(width)) {
            let dst = &mut dst[j0..j0 + width];
            dst.copy_from_slice(src);
            if let Some(bias) = bias {
                for (d, b) in dst.iter_mut().zip(&bias[j0..j0 + width]) {
                    *d += b;
                }
            }
        }
    }
    Ok(y)
}

/// A as onnxruntime's int8 compute sees it: each row's blocks of `block` values along K
/// quantized to int8 with the scale max|a| / 127 and dequantized again.
fn quantize_a_int8(a: &mut [f32], k: usize, block: usize) {
    if k == 0 || block == 0 {
        return;
    }
    for row in a.chunks_exact_mut(k) {
        for blk in row.chunks_mut(block) {
            let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = amax / 127.0;
            let inverse = if scale != 0.0 { 1.0 / scale } else { 0.0 };
            for v in blk.iter_mut() {
                *v = (*v * inverse).round_ties_even().clamp(-127.0, 127.0) * scale;
            }
        }
    }
}

fn matmul_nbits(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let dtype = a.dtype();
    let w = weights(ctx, inputs, dtype)?;
    let n = required_attr(ctx, "N")?;
    let k = w.k;
    let (&a_k, lead) = a
        .shape()
        .split_last()
        .ok_or_else(|| ctx.err("A must have rank >= 1"))?;
    if a_k != k {
        return Err(ctx.err(format!("A has shape {:?} but K is {k}", a.shape())));
    }
    let bias = match ctx.opt_input(inputs, 5)? {
        None => None,
        Some(t) => {
            if t.dtype() != dtype || t.len() != n {
                return Err(ctx.err(format!(
                    "bias must be {dtype} of {n} values, found {} of shape {:?}",
                    t.dtype(),
                    t.shape()
                )));
            }
            Some(float_data(ctx, t, "bias")?)
        }
    };
    let mut out_shape = lead.to_vec();
    out_shape.push(n);
    check_size("MatMulNBits result", &out_shape)?;
    let m: usize = lead.iter().product();
    let mut a32 = float_data(ctx, a, "A")?;
    let bits = ctx.attr_int("bits", 4)?;
    if ctx.attr_int("accuracy_level", 0)? == 4 && matches!(bits, 4 | 8) {
        let block = required_attr(ctx, "block_size")?;
        quantize_a_int8(a32.to_mut(), k, block);
    }
    let y = product(&w, &a32, m, n, bias.as_deref(), PANEL_ELEMS)
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let y = float_result(dtype, &out_shape, y).map_err(|e| e.in_node(&ctx.node_ref()))?;
    Ok(vec![Value::Tensor(y)])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights of n rows of k values (4 bits, block 16, packed zero points) from a counter.
    fn weights(n: usize, k: usize) -> Weights<'static> {
        let (block, bits) = (16, 4);
        let k_blocks = k.div_ceil(block);
        let blob = block * bits / 8;
        let b = (0..n * k_blocks * blob)
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        let scales = (0..n * k_blocks)
            .map(|i| 0.01 + (i % 7) as f32 * 0.003)
            .collect();
        let row_bytes = k_blocks.div_ceil(2);
        let zps = (0..n * row_bytes).map(|i| (i * 11 % 256) as u8).collect();
        Weights {
            b: Cow::Owned(b),
            scales: Cow::Owned(scales),
            zero_points: ZeroPoints::Packed {
                data: Cow::Owned(zps),
                row_bytes,
            },
            g_idx: None,
            bits,
            block,
            k,
            k_blocks,
            blob,
        }
    }

    #[test]
    fn panels_agree_with_a_plain_product() {
        let (m, n, k) = (5, 37, 40);
        let w = weights(n, k);
        let a: Vec<f32> = (0..m * k)
            .map(|i| ((i * 13 % 17) as f32 - 8.0) / 8.0)
            .collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 * 0.1).collect();
        // Reference: each weight decoded on its own, products summed in f64.
        let mut expected = vec![0f64; m * n];
        for j in 0..n {
            for p in 0..k {
                let (blk, off) = (p / 16, p % 16);
                let byte = w.b[(j * w.k_blocks + blk) * w.blob + off / 2];
                let q = if off % 2 == 0 { byte & 15 } else { byte >> 4 } as f64;
                let zp = w.zero_point(j, blk) as f64;
                let wv = (q - zp) * w.scales[j * w.k_blocks + blk] as f64;
                for i in 0..m {
                    expected[i * n + j] += a[i * k + p] as f64 * wv;
                }
            }
        }
        // 16 columns a panel: three panels, the last one partial; and one panel for all.
        for panel_elems in [16 * k, 1 << 20] {
            let y = product(&w, &a, m, n, Some(&bias), panel_elems).unwrap();
            for (i, (got, want)) in y.iter().zip(&expected).enumerate() {
                let want = want + bias[i % n] as f64;
                assert!(
                    (*got as f64 - want).abs() < 1e-4,
                    "panel {panel_elems}: y[{i}] = {got}, expected {want}"
                );
            }
        }
    }
}
