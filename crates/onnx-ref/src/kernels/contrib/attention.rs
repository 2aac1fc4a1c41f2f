//! Contrib kernels: the attention family of onnxruntime's `com.microsoft` domain.
//!
//! - RotaryEmbedding (here): rotary position embedding of a (B, S, N·H) or (B, N, S, H) input,
//!   positions from `position_ids` (an offset, or one per token) into (max_pos, rd/2) caches.
//! - GroupQueryAttention (`gqa`): the LLM decoder attention with a BNSH KV cache, per-batch
//!   lengths from `seqlens_k`, K/V head sharing, optional rotary, local window, softcap, sinks.
//! - MultiHeadAttention (`mha`): separate, packed-KV or packed-QKV inputs, a key padding mask,
//!   an additive attention bias and a BNSH past/present cache.
//! - Attention (`bert`): the BERT-era op with packed input weights and a stacked
//!   (2, B, N, P, H) past/present.
//!
//! Everything is computed in f32 as onnxruntime's CPU kernels do (16-bit inputs are widened and
//! the results rounded once), on contiguous BNSH buffers; the scaled dot product and its
//! softmax (`sdpa`) are shared by the three attention kernels and use the standard Attention
//! kernel's softmax and the GEMM of `kernels::matmul`.

mod bert;
mod gqa;
mod mha;

use half::{bf16, f16};

use super::MS;
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::attention::{concat_seq, SoftmaxPrecision};
use crate::kernels::matmul::{GemmElem, MatRef};
use crate::kernels::unsupported;
use crate::tensor::Tensor;
use crate::value::Value;

/// Registers this family's kernels.
pub fn register_all(reg: &mut KernelRegistry) {
    reg.register(MS, "RotaryEmbedding", 1, LATEST, rotary_embedding);
    reg.register(
        MS,
        "GroupQueryAttention",
        1,
        LATEST,
        gqa::group_query_attention,
    );
    reg.register(
        MS,
        "MultiHeadAttention",
        1,
        LATEST,
        mha::multi_head_attention,
    );
    reg.register(MS, "Attention", 1, LATEST, bert::attention);
}

/// The element type of a float input these kernels accept (float, float16, bfloat16).
fn float_dtype(ctx: &KernelCtx, t: &Tensor) -> Result<DType> {
    match t.dtype() {
        d @ (DType::Float | DType::Float16 | DType::Bfloat16) => Ok(d),
        _ => Err(unsupported(ctx, t)),
    }
}

/// A float tensor's values (row-major) widened to f32.
fn floats(t: &Tensor) -> Result<Vec<f32>> {
    Ok(match t {
        Tensor::F32(a) => a.iter().copied().collect(),
        Tensor::F16(a) => a.iter().map(|x| x.to_f32()).collect(),
        Tensor::BF16(a) => a.iter().map(|x| x.to_f32()).collect(),
        other => {
            return Err(RefError::op(format!(
                "expected a float, float16 or bfloat16 tensor, got {}",
                other.dtype()
            )))
        }
    })
}

/// A float input that must have the main input's element type, widened to f32.
fn floats_like(t: &Tensor, dtype: DType, what: &str) -> Result<Vec<f32>> {
    if t.dtype() != dtype {
        return Err(RefError::op(format!(
            "{what} is {} but the input is {dtype}",
            t.dtype()
        )));
    }
    floats(t)
}

/// f32 values rounded to `dtype` as a tensor of `shape`.
fn to_tensor(dtype: DType, shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
    match dtype {
        DType::Float16 => Tensor::from_vec(shape, data.into_iter().map(f16::from_f32).collect()),
        DType::Bfloat16 => Tensor::from_vec(shape, data.into_iter().map(bf16::from_f32).collect()),
        _ => Tensor::from_vec(shape, data),
    }
}

fn tensors(outs: Vec<Tensor>, ctx: &KernelCtx) -> Vec<Value> {
    let n = ctx.num_outputs().max(1);
    outs.into_iter().take(n).map(Value::Tensor).collect()
}

/// `(B, S, N·H)` (or a slice of heads `first..first + n` of a packed `(B, S, total·H)`) as
/// contiguous `(B, N, S, H)`.
fn bsnh_to_bnsh(x: &[f32], [b, s, total, h]: [usize; 4], first: usize, n: usize) -> Vec<f32> {
    split_heads(x, [b, s, total * h], first * h, n, h)
}

/// `n` heads of `size` values starting at column `offset` of the rows of a `(B, S, row)`
/// buffer, as contiguous `(B, N, S, size)`.
fn split_heads(
    x: &[f32],
    [b, s, row]: [usize; 3],
    offset: usize,
    n: usize,
    size: usize,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(b * n * s * size);
    for bi in 0..b {
        for ni in 0..n {
            for si in 0..s {
                let start = (bi * s + si) * row + offset + ni * size;
                out.extend_from_slice(&x[start..start + size]);
            }
        }
    }
    out
}

/// Contiguous `(B, N, S, H)` as `(B, S, N·H)`.
fn bnsh_to_bsnh(x: &[f32], [b, n, s, h]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for bi in 0..b {
        for ni in 0..n {
            for si in 0..s {
                let src = ((bi * n + ni) * s + si) * h;
                let dst = ((bi * s + si) * n + ni) * h;
                out[dst..dst + h].copy_from_slice(&x[src..src + h]);
            }
        }
    }
    out
}

/// Rotates the first `2·cos.len()` values of one head in place: halves (x1, x2) = (first,
/// second half) or, interleaved, (even, odd) positions become (x1·cos − x2·sin,
/// x2·cos + x1·sin).
fn rotate(x: &mut [f32], cos: &[f32], sin: &[f32], interleaved: bool) {
    let half = cos.len();
    for k in 0..half {
        let (i1, i2) = if interleaved {
            (2 * k, 2 * k + 1)
        } else {
            (k, k + half)
        };
        let (x1, x2) = (x[i1], x[i2]);
        x[i1] = x1 * cos[k] - x2 * sin[k];
        x[i2] = x2 * cos[k] + x1 * sin[k];
    }
}

/// A cos or sin cache `(max_position, half)`.
struct RopeCache {
    cos: Vec<f32>,
    sin: Vec<f32>,
    max_pos: usize,
    half: usize,
}

impl RopeCache {
    fn read(cos: &Tensor, sin: &Tensor, dtype: DType) -> Result<Self> {
        let (cs, ss) = (cos.shape(), sin.shape());
        if cs.len() != 2 || cs != ss {
            return Err(RefError::op(format!(
                "cos_cache {cs:?} and sin_cache {ss:?} must be 2-D of the same shape"
            )));
        }
        Ok(RopeCache {
            cos: floats_like(cos, dtype, "cos_cache")?,
            sin: floats_like(sin, dtype, "sin_cache")?,
            max_pos: cs[0],
            half: cs[1],
        })
    }

    /// The (cos, sin) rows of position `pos`.
    fn rows(&self, pos: i64) -> Result<(&[f32], &[f32])> {
        let p = usize::try_from(pos)
            .ok()
            .filter(|&p| p < self.max_pos)
            .ok_or_else(|| {
                RefError::op(format!(
                    "position {pos} is outside the caches of {} positions",
                    self.max_pos
                ))
            })?;
        let r = p * self.half..(p + 1) * self.half;
        Ok((&self.cos[r.clone()], &self.sin[r]))
    }
}

/// Rotates every head of a contiguous `(B, N, S, H)` buffer, token (b, s) at `pos[b·S + s]`.
fn rotate_bnsh(
    x: &mut [f32],
    [b, n, s, h]: [usize; 4],
    pos: &[i64],
    cache: &RopeCache,
    interleaved: bool,
) -> Result<()> {
    let rd = 2 * cache.half;
    if rd > h {
        return Err(RefError::op(format!(
            "rotary dimension {rd} exceeds the head size {h}"
        )));
    }
    for bi in 0..b {
        for si in 0..s {
            let (c, sn) = cache.rows(pos[bi * s + si])?;
            for ni in 0..n {
                let base = ((bi * n + ni) * s + si) * h;
                rotate(&mut x[base..base + rd], c, sn, interleaved);
            }
        }
    }
    Ok(())
}

fn rotary_embedding(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let dtype = float_dtype(ctx, x)?;
    let pos_t = ctx.input(inputs, 1)?;
    let cache = RopeCache::read(ctx.input(inputs, 2)?, ctx.input(inputs, 3)?, dtype)?;
    let rd_attr = usize::try_from(ctx.attr_int("rotary_embedding_dim", 0)?)
        .map_err(|_| ctx.err("rotary_embedding_dim is negative"))?;
    let heads_attr = usize::try_from(ctx.attr_int("num_heads", 0)?)
        .map_err(|_| ctx.err("num_heads is negative"))?;
    let interleaved = ctx.attr_int("interleaved", 0)? == 1;
    if rd_attr > 0 && heads_attr == 0 {
        return Err(ctx.err("num_heads must be given with rotary_embedding_dim"));
    }
    // (batch, seq, heads, head size) and whether the input is (B, N, S, H).
    let (b, s, n, h, four_d) = match *x.shape() {
        [b, n, s, h] => (b, s, n, h, true),
        [b, s, hidden] => {
            let h = if rd_attr == 0 {
                2 * cache.half
            } else {
                hidden / heads_attr
            };
            if h == 0 || hidden % h != 0 {
                return Err(ctx.err(format!(
                    "hidden size {hidden} is not a multiple of the head size {h}"
                )));
            }
            (b, s, hidden / h, h, false)
        }
        ref other => {
            return Err(ctx.err(format!("input must be 3-D or 4-D, got {other:?}")));
        }
    };
    let rd = if rd_attr > 0 { rd_attr } else { h };
    if rd > h || rd % 2 != 0 || cache.half != rd / 2 {
        return Err(ctx.err(format!(
            "rotary dimension {rd} must be even, at most the head size {h}, and twice the \
             caches' {} columns",
            cache.half
        )));
    }
    let pos_ids = pos_t.to_i64_vec()?;
    let positions: Vec<i64> = if pos_ids.len() == 1 && pos_t.rank() <= 1 {
        (0..b)
            .flat_map(|_| (0..s as i64).map(|si| pos_ids[0] + si))
            .collect()
    } else if pos_t.shape() == [b, s] {
        pos_ids
    } else {
        return Err(ctx.err(format!(
            "position_ids {:?} must have 1 element or shape ({b}, {s})",
            pos_t.shape()
        )));
    };
    let data = floats(x)?;
    let mut heads = if four_d {
        data
    } else {
        bsnh_to_bnsh(&data, [b, s, n, h], 0, n)
    };
    rotate_bnsh(&mut heads, [b, n, s, h], &positions, &cache, interleaved)?;
    let out = if four_d {
        heads
    } else {
        bnsh_to_bsnh(&heads, [b, n, s, h])
    };
    Ok(vec![Value::Tensor(to_tensor(dtype, x.shape(), out)?)])
}

/// Sizes of one scaled dot-product attention over contiguous BNSH buffers.
#[derive(Debug, Clone, Copy)]
struct Dims {
    batch: usize,
    /// Query heads.
    heads: usize,
    /// Key/value heads (query head `h` reads key/value head `h / (heads / kv_heads)`).
    kv_heads: usize,
    /// Query length.
    q_len: usize,
    /// Key/value length (rows of each (batch, head) of the key and value buffers).
    kv_len: usize,
    head_size: usize,
    v_head_size: usize,
}

/// What a row hook sees: the batch, query head and query index of a score row.
#[derive(Debug, Clone, Copy)]
struct Row {
    b: usize,
    h: usize,
    i: usize,
}

/// softmax(scale · Q·Kᵀ ⊕ masks) · V over contiguous BNSH buffers. `scores` turns each row of
/// scaled scores into the logits (masks, biases, softcap; a key left out is -inf); `sink`
/// gives a head's extra logit that takes probability mass but has no value (None: plain
/// softmax); `probs` sees each row of probabilities. Returns the (B, N, S, Hv) output.
#[allow(clippy::too_many_arguments)]
fn sdpa(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: Dims,
    scale: f32,
    mut scores: impl FnMut(Row, &mut [f32]) -> Result<()>,
    sink: impl Fn(usize) -> Option<f32>,
    mut probs: impl FnMut(Row, &[f32]),
) -> Result<Vec<f32>> {
    let Dims {
        batch,
        heads,
        kv_heads,
        q_len: l,
        kv_len: t,
        head_size: d,
        v_head_size: dv,
    } = dims;
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(RefError::op(format!(
            "{heads} query heads are not a multiple of {kv_heads} key/value heads"
        )));
    }
    let group = heads / kv_heads;
    let mut out = vec![0.0f32; batch * heads * l * dv];
    let mut qk = vec![0.0f32; l * t];
    let mut row = Vec::with_capacity(t + 1);
    for b in 0..batch {
        for h in 0..heads {
            let kvh = h / group;
            let q_bh = &q[(b * heads + h) * l * d..][..l * d];
            let k_bh = &k[(b * kv_heads + kvh) * t * d..][..t * d];
            let v_bh = &v[(b * kv_heads + kvh) * t * dv..][..t * dv];
            f32::gemm(
                l,
                d,
                t,
                scale,
                MatRef {
                    data: q_bh,
                    rs: d,
                    cs: 1,
                },
                MatRef {
                    data: k_bh,
                    rs: 1,
                    cs: d,
                },
                0.0,
                &mut qk,
            )?;
            for i in 0..l {
                let r = Row { b, h, i };
                let logits = &mut qk[i * t..(i + 1) * t];
                scores(r, logits)?;
                row.clear();
                row.extend_from_slice(logits);
                if let Some(extra) = sink(h) {
                    row.push(extra);
                }
                if row.iter().all(|&x| x == f32::NEG_INFINITY) {
                    // A fully masked row gives zeros, as onnxruntime's kernels do.
                    row.fill(0.0);
                } else {
                    SoftmaxPrecision::Acc.softmax(&mut row);
                }
                logits.copy_from_slice(&row[..t]);
                probs(r, logits);
            }
            f32::gemm(
                l,
                t,
                dv,
                1.0,
                MatRef {
                    data: &qk,
                    rs: t,
                    cs: 1,
                },
                MatRef {
                    data: v_bh,
                    rs: dv,
                    cs: 1,
                },
                0.0,
                &mut out[(b * heads + h) * l * dv..][..l * dv],
            )?;
        }
    }
    Ok(out)
}

/// A positive head-count attribute.
fn heads_attr(ctx: &KernelCtx, name: &str) -> Result<usize> {
    match ctx.attr_opt_int(name)? {
        Some(n) if n > 0 => Ok(n as usize),
        Some(n) => Err(ctx.err(format!("attribute '{name}' must be positive, got {n}"))),
        None => Err(ctx.err(format!("attribute '{name}' is required"))),
    }
}

/// An additive bias broadcast to (B, N, S, T): shape (B or 1, N or 1, S, T).
struct Bias4 {
    values: Vec<f32>,
    strides: [usize; 3],
}

impl Bias4 {
    fn read(t: &Tensor, dtype: DType, [b, n, s, kv]: [usize; 4], what: &str) -> Result<Self> {
        let shape = t.shape();
        let ok = shape.len() == 4
            && (shape[0] == b || shape[0] == 1)
            && (shape[1] == n || shape[1] == 1)
            && shape[2] == s
            && shape[3] == kv;
        if !ok {
            return Err(RefError::op(format!(
                "{what} {shape:?} must be ({b} or 1, {n} or 1, {s}, {kv})"
            )));
        }
        let row = s * kv;
        Ok(Bias4 {
            values: floats_like(t, dtype, what)?,
            strides: [
                if shape[0] == 1 { 0 } else { shape[1] * row },
                if shape[1] == 1 { 0 } else { row },
                kv,
            ],
        })
    }

    /// The bias row of (batch, head, query).
    fn row(&self, r: Row) -> &[f32] {
        let start = r.b * self.strides[0] + r.h * self.strides[1] + r.i * self.strides[2];
        &self.values[start..start + self.strides[2]]
    }
}

/// The int32 mask of MultiHeadAttention (`key_padding_mask`) and Attention (`mask_index`), in
/// onnxruntime's CPU forms. A key it hides gets `mask_filter_value` added to its score.
enum KeyMask {
    /// (B): keys at or after `end[b]` are hidden.
    End(Vec<i64>),
    /// (2B): keys at or after `end[b]` or before `start[b]` are hidden.
    StartEnd(Vec<i64>, Vec<i64>),
    /// (B, T): key j of batch b is hidden where the mask is 0.
    Keys(Vec<i64>),
    /// (B, S, T): key j of query i of batch b is hidden where the mask is 0.
    Full(Vec<i64>),
}

impl KeyMask {
    /// Reads a mask for batch `b`, query length `s` and total key length `t`.
    fn read(mask: &Tensor, [b, s, t]: [usize; 3], allow_start: bool) -> Result<Self> {
        let v = mask.to_i64_vec()?;
        Ok(match *mask.shape() {
            [n] if n == b => KeyMask::End(v),
            [n] if allow_start && n == 2 * b => {
                let (end, start) = v.split_at(b);
                KeyMask::StartEnd(end.to_vec(), start.to_vec())
            }
            [mb, mt] if mb == b && mt == t => KeyMask::Keys(v),
            [mb, ms, mt] if mb == b && ms == s && mt == t => KeyMask::Full(v),
            ref other => {
                return Err(RefError::op(format!(
                    "mask of shape {other:?} is not one of ({b}){}, ({b}, {t}) or \
                     ({b}, {s}, {t})",
                    if allow_start {
                        format!(", ({})", 2 * b)
                    } else {
                        String::new()
                    }
                )))
            }
        })
    }

    /// Whether key `j` of query `i` of batch `b` is hidden.
    fn hides(&self, b: usize, i: usize, j: usize, [s, t]: [usize; 2]) -> bool {
        let j64 = j as i64;
        match self {
            KeyMask::End(end) => j64 >= end[b],
            KeyMask::StartEnd(end, start) => j64 >= end[b] || j64 < start[b].min(t as i64),
            KeyMask::Keys(m) => m[b * t + j] <= 0,
            KeyMask::Full(m) => m[(b * s + i) * t + j] <= 0,
        }
    }
}

/// The masks of MultiHeadAttention and Attention, applied to a row of scaled scores:
/// `mask_filter_value` for a key the mask hides, -inf for a future key when unidirectional
/// (query i sees the keys up to `past + i`), then the additive attention bias.
struct BertMasks {
    mask: Option<KeyMask>,
    filter: f32,
    causal: bool,
    past: usize,
    bias: Option<Bias4>,
    /// Query and total key lengths.
    s: usize,
    t: usize,
}

impl BertMasks {
    fn apply(&self, r: Row, row: &mut [f32]) {
        for (j, x) in row.iter_mut().enumerate() {
            if self.causal && j > self.past + r.i {
                *x = f32::NEG_INFINITY;
                continue;
            }
            if let Some(m) = &self.mask {
                if m.hides(r.b, r.i, j, [self.s, self.t]) {
                    *x += self.filter;
                }
            }
        }
        if let Some(bias) = &self.bias {
            for (x, &bj) in row.iter_mut().zip(bias.row(r)) {
                *x += bj;
            }
        }
    }
}
