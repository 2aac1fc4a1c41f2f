//! Attention-family kernels. This module holds Attention (opset 23; 24 adds
//! `nonpad_kv_seqlen`; 25 adds sliding windows) and the pieces its relatives share: the head
//! layout helpers and the reference-faithful rounding of 16-bit floats. The relatives live in
//! submodules: `flex` (ai.onnx.preview FlexAttention's arithmetic; the op is a planning step,
//! `crate::flex_attention`, as it runs subgraphs), `recurrent` (LinearAttention,
//! CausalConvWithState) and `blocks` (RotaryEmbedding, SwiGLU, TensorScatter).
//!
//! Precision follows onnx's reference implementation, which produced the backend test data:
//! float16/bfloat16 inputs are computed in f32 but rounded to the input type after every step
//! the reference performs in that type (the scaling of Q and K, each matrix product, softcap,
//! the bias addition and each softmax step), so the results agree with it to the last bit.

mod blocks;
mod flex;
mod recurrent;

pub(crate) use flex::{flex_attention, ModifierGraphs, MODIFIER_OPSET};

use half::{bf16, f16};
use num_traits::Float;

use super::matmul::{GemmElem, MatRef};
use super::{typed, unsupported};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::{AccFloat, Real};
use crate::tensor::{array_from_vec, check_size, Array, Tensor};
use crate::value::Value;

/// Registers this family's kernels.
pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Attention", 23, LATEST, attention);
    blocks::register_all(reg);
    recurrent::register_all(reg);
}

/// Rounds an accumulator value to the element type `T` and back: the reference's rounding
/// after a step it computes in `T` (the identity for f32 and f64).
#[inline]
fn round_to<T: Real>(x: T::Acc) -> T::Acc {
    T::from_acc(x).acc()
}

/// The precision a softmax is computed in, as onnx's reference does it (numpy on the dtype).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SoftmaxPrecision {
    /// The accumulation type itself (f32 or f64), no extra rounding.
    Acc,
    /// float32 inside an f64 computation.
    F32,
    /// float16: each step rounds; sums accumulate in f32 (numpy's pairwise half sum).
    F16,
    /// bfloat16: each step rounds, and so does each addition of a sum (ml_dtypes' ufunc).
    Bf16,
}

impl SoftmaxPrecision {
    /// The precision numpy computes in for element type `dtype`.
    pub(crate) fn native(dtype: DType) -> Self {
        match dtype {
            DType::Float16 => Self::F16,
            DType::Bfloat16 => Self::Bf16,
            _ => Self::Acc,
        }
    }

    /// The precision for a `softmax_precision` attribute (a TensorProto data type code).
    pub(crate) fn from_code(code: i64, input: DType) -> Result<Self> {
        let dtype = i32::try_from(code).ok().and_then(DType::from_code);
        match dtype {
            Some(DType::Float) if input == DType::Double => Ok(Self::F32),
            Some(DType::Float) | Some(DType::Double) => Ok(Self::Acc),
            Some(DType::Float16) => Ok(Self::F16),
            Some(DType::Bfloat16) => Ok(Self::Bf16),
            _ => Err(RefError::op(format!(
                "softmax_precision {code} is not float, float16, bfloat16 or double"
            ))),
        }
    }

    /// Rounds to this precision.
    #[inline]
    pub(crate) fn round<A: AccFloat>(self, x: A) -> A {
        match self {
            Self::Acc => x,
            Self::F32 => A::lit(x.as_f64() as f32 as f64),
            Self::F16 => A::lit(f16::from_f64(x.as_f64()).to_f64()),
            Self::Bf16 => A::lit(bf16::from_f64(x.as_f64()).to_f64()),
        }
    }

    /// Softmax of `row` in place, numpy-style in this precision: NaN propagates, and a row of
    /// -inf gives NaN (-inf - -inf), as Softmax does. (Attention zeroes a row whose mask is all
    /// -inf afterwards, as its function body does.)
    pub(crate) fn softmax<A: AccFloat>(self, row: &mut [A]) {
        let mut max = A::neg_infinity();
        for &v in row.iter() {
            if v.is_nan() || v > max {
                max = v;
                if v.is_nan() {
                    break;
                }
            }
        }
        let shift = max;
        let mut sum = A::zero();
        for v in row.iter_mut() {
            *v = self.round(self.round(*v - shift).exp());
            sum = if self == Self::Bf16 {
                self.round(sum + *v)
            } else {
                sum + *v
            };
        }
        let mut sum = self.round(sum);
        if sum == A::zero() {
            sum = A::one();
        }
        for v in row.iter_mut() {
            *v = self.round(*v / sum);
        }
    }
}

/// A tensor of rank 3 `(batch, seq, heads * size)` or rank 4 `(batch, heads, seq, size)` as
/// contiguous `(batch, heads, seq, size)` values in the accumulation type, with its dims.
pub(crate) fn to_heads<T: Real>(
    a: &Array<T>,
    heads: Option<usize>,
    what: &str,
) -> Result<(Vec<T::Acc>, [usize; 4])> {
    match *a.shape() {
        [b, h, s, d] => Ok((a.iter().map(|v| v.acc()).collect(), [b, h, s, d])),
        [b, s, hidden] => {
            let h = heads.ok_or_else(|| {
                RefError::op(format!("{what} is 3-D, so the number of heads is required"))
            })?;
            if h == 0 || hidden % h != 0 {
                return Err(RefError::op(format!(
                    "{what} hidden size {hidden} is not a multiple of {h} heads"
                )));
            }
            let d = hidden / h;
            let std = a.as_standard_layout();
            let flat = std
                .as_slice()
                .ok_or_else(|| RefError::op(format!("{what} is not contiguous")))?;
            let mut out = Vec::with_capacity(flat.len());
            for bi in 0..b {
                for hi in 0..h {
                    for si in 0..s {
                        let start = (bi * s + si) * hidden + hi * d;
                        out.extend(flat[start..start + d].iter().map(|v| v.acc()));
                    }
                }
            }
            Ok((out, [b, h, s, d]))
        }
        ref other => Err(RefError::op(format!(
            "{what} must be 3-D or 4-D, got shape {other:?}"
        ))),
    }
}

/// Contiguous `(batch, heads, seq, size)` values back to `T`, as rank 4 or, when `three_d`,
/// as rank 3 `(batch, seq, heads * size)`.
pub(crate) fn from_heads<T: Real>(
    data: &[T::Acc],
    [b, h, s, d]: [usize; 4],
    three_d: bool,
) -> Result<Tensor> {
    if !three_d {
        let out: Vec<T> = data.iter().map(|&v| T::from_acc(v)).collect();
        return Ok(T::wrap(array_from_vec(&[b, h, s, d], out)?));
    }
    let mut out = vec![T::zero(); data.len()];
    for bi in 0..b {
        for hi in 0..h {
            for si in 0..s {
                let src = ((bi * h + hi) * s + si) * d;
                let dst = (bi * s + si) * h * d + hi * d;
                for k in 0..d {
                    out[dst + k] = T::from_acc(data[src + k]);
                }
            }
        }
    }
    Ok(T::wrap(array_from_vec(&[b, s, h * d], out)?))
}

/// Concatenates `past` `(b, h, p, d)` and `new` `(b, h, s, d)` along the sequence axis.
pub(crate) fn concat_seq<A: Copy>(
    past: Option<(&[A], usize)>,
    new: &[A],
    dims: [usize; 4],
) -> Vec<A> {
    let [b, h, s, d] = dims;
    let p = past.map_or(0, |(_, p)| p);
    let mut out = Vec::with_capacity(b * h * (p + s) * d);
    for bh in 0..b * h {
        if let Some((past, _)) = past {
            out.extend_from_slice(&past[bh * p * d..(bh + 1) * p * d]);
        }
        out.extend_from_slice(&new[bh * s * d..(bh + 1) * s * d]);
    }
    out
}

/// The attention mask as an additive bias broadcast to `(batch, q_heads, q_len, kv_len)`: the
/// last axis is padded with -inf (`false`) when shorter than the keys, as the reference does.
struct MaskBias<A> {
    values: Vec<A>,
    /// Strides over (batch, head, query, key); 0 for a broadcast axis.
    strides: [usize; 4],
    /// Length of the key axis before padding.
    keys: usize,
}

impl<A: AccFloat> MaskBias<A> {
    fn new(mask: &Tensor, target: [usize; 4]) -> Result<Self> {
        let shape = mask.shape();
        if shape.is_empty() || shape.len() > 4 {
            return Err(RefError::op(format!(
                "attn_mask must have rank 1 to 4, got shape {shape:?}"
            )));
        }
        let mut dims = [1usize; 4];
        dims[4 - shape.len()..].copy_from_slice(shape);
        let keys = dims[3];
        if keys > target[3] {
            return Err(RefError::op(format!(
                "attn_mask has {keys} keys but there are only {} keys",
                target[3]
            )));
        }
        let mut strides = [0usize; 4];
        let mut stride = 1;
        for axis in (0..4).rev() {
            if axis < 3 && dims[axis] != 1 && dims[axis] != target[axis] {
                return Err(RefError::op(format!(
                    "attn_mask of shape {shape:?} does not broadcast to {target:?}"
                )));
            }
            strides[axis] = if dims[axis] == 1 && axis < 3 {
                0
            } else {
                stride
            };
            stride *= dims[axis];
        }
        let values: Vec<A> = if mask.dtype() == DType::Bool {
            mask.to_i64_vec()?
                .into_iter()
                .map(|v| if v != 0 { A::zero() } else { A::neg_infinity() })
                .collect()
        } else if mask.dtype().is_float() {
            mask.to_f64_vec()?.into_iter().map(A::lit).collect()
        } else {
            return Err(RefError::op(format!(
                "attn_mask must be bool or float, got {}",
                mask.dtype()
            )));
        };
        Ok(MaskBias {
            values,
            strides,
            keys,
        })
    }

    /// The bias of key `j` in the row of (batch, head, query).
    #[inline]
    fn at(&self, row_base: usize, j: usize) -> A {
        if j < self.keys {
            self.values[row_base + j * self.strides[3]]
        } else {
            A::neg_infinity()
        }
    }
}

/// What `qk_matmul_output` (output 3) shows, following the reference's reading of the modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QkOutputMode {
    /// The scaled product Q·Kᵀ (mode 1 also shows it when there is no softcap).
    Raw,
    /// After softcap (mode 1 with a softcap).
    Softcapped,
    /// After adding the bias (mode 2).
    Biased,
    /// After softmax (mode 3).
    Softmax,
}

/// The structural masks of Attention: causal, sliding window and key padding.
#[derive(Debug, Clone)]
struct Frontier {
    is_causal: bool,
    left_window: i64,
    right_window: i64,
    /// Number of valid keys per batch (`nonpad_kv_seqlen`).
    nonpad: Option<Vec<i64>>,
    /// Keys that precede the query block (past length), used when `nonpad` is absent.
    past: i64,
    q_len: i64,
}

impl Frontier {
    /// Whether query `i` of batch `b` may attend key `j`.
    #[inline]
    fn allows(&self, b: usize, i: usize, j: usize) -> bool {
        let (i, j) = (i as i64, j as i64);
        let offset = match &self.nonpad {
            Some(n) => n.get(b).copied().unwrap_or(0) - self.q_len,
            None => self.past,
        };
        if let Some(n) = &self.nonpad {
            if j >= n.get(b).copied().unwrap_or(0) {
                return false;
            }
        }
        let diff = i + offset - j;
        if self.is_causal && diff < 0 {
            return false;
        }
        if self.left_window >= 0 && diff > self.left_window {
            return false;
        }
        !(self.right_window >= 0 && -diff > self.right_window)
    }
}

/// Attributes and optional inputs of one Attention node, checked.
struct AttentionSpec<'v> {
    scale: Option<f64>,
    softcap: f64,
    q_heads: Option<usize>,
    kv_heads: Option<usize>,
    qk_mode: QkOutputMode,
    precision: Option<i64>,
    mask: Option<&'v Tensor>,
    past_key: Option<&'v Tensor>,
    past_value: Option<&'v Tensor>,
    frontier: Frontier,
}

fn heads_attr(ctx: &KernelCtx, name: &str) -> Result<Option<usize>> {
    match ctx.attr_opt_int(name)? {
        None => Ok(None),
        Some(h) if h > 0 => Ok(Some(h as usize)),
        Some(h) => Err(ctx.err(format!("attribute '{name}' must be positive, got {h}"))),
    }
}

impl<'v> AttentionSpec<'v> {
    fn read(ctx: &KernelCtx, inputs: &[Option<&'v Value>], q: &Tensor) -> Result<Self> {
        let softcap = ctx.attr_float("softcap", 0.0)? as f64;
        let mode = ctx.attr_int("qk_matmul_output_mode", 0)?;
        let qk_mode = match mode {
            0 => QkOutputMode::Raw,
            1 if softcap != 0.0 => QkOutputMode::Softcapped,
            1 => QkOutputMode::Raw,
            2 => QkOutputMode::Biased,
            3 => QkOutputMode::Softmax,
            m => return Err(ctx.err(format!("qk_matmul_output_mode {m} is not 0, 1, 2 or 3"))),
        };
        let (left_window, right_window) = if ctx.opset >= 25 {
            (
                ctx.attr_int("left_window_size", -1)?,
                ctx.attr_int("right_window_size", -1)?,
            )
        } else {
            (-1, -1)
        };
        if left_window < -1 || right_window < -1 {
            return Err(ctx.err(format!(
                "window sizes must be -1 or nonnegative, got {left_window} and {right_window}"
            )));
        }
        let q_heads = heads_attr(ctx, "q_num_heads")?;
        let kv_heads = heads_attr(ctx, "kv_num_heads")?;
        if ctx.opset >= 25 && q.rank() == 4 && (q_heads.is_some() || kv_heads.is_some()) {
            return Err(ctx.err("q_num_heads and kv_num_heads must not be given for 4-D inputs"));
        }
        let past_key = ctx.opt_input(inputs, 4)?;
        let past_value = ctx.opt_input(inputs, 5)?;
        if past_key.is_some() != past_value.is_some() {
            return Err(ctx.err("past_key and past_value must be given together"));
        }
        let nonpad = if ctx.opset >= 24 {
            ctx.opt_input(inputs, 6)?
                .map(|t| t.to_i64_vec())
                .transpose()?
        } else {
            None
        };
        if nonpad.is_some() && past_key.is_some() {
            return Err(ctx.err("nonpad_kv_seqlen cannot be combined with past_key/past_value"));
        }
        Ok(AttentionSpec {
            scale: ctx.attr_opt_float("scale")?.map(f64::from),
            softcap,
            q_heads,
            kv_heads,
            qk_mode,
            precision: ctx.attr_opt_int("softmax_precision")?,
            mask: ctx.opt_input(inputs, 3)?,
            past_key,
            past_value,
            frontier: Frontier {
                is_causal: ctx.attr_int("is_causal", 0)? != 0,
                left_window,
                right_window,
                nonpad,
                past: 0,
                q_len: 0,
            },
        })
    }
}

fn attention(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let q = ctx.input(inputs, 0)?;
    let k = ctx.input(inputs, 1)?;
    let v = ctx.input(inputs, 2)?;
    let spec = AttentionSpec::read(ctx, inputs, q)?;
    let outputs = match q {
        Tensor::F32(a) => attention_typed(a, k, v, spec)?,
        Tensor::F64(a) => attention_typed(a, k, v, spec)?,
        Tensor::F16(a) => attention_typed(a, k, v, spec)?,
        Tensor::BF16(a) => attention_typed(a, k, v, spec)?,
        other => return Err(unsupported(ctx, other)),
    };
    Ok(outputs.into_iter().map(Value::Tensor).collect())
}

/// A past cache `(batch, kv_heads, past, size)` checked against the new keys or values.
fn past_cache<T: Real>(
    past: Option<&Tensor>,
    dims: [usize; 4],
    what: &str,
) -> Result<Option<(Vec<T::Acc>, usize)>> {
    let Some(past) = past else { return Ok(None) };
    let a = typed::<T>(past)?;
    match *a.shape() {
        [b, h, p, d] if b == dims[0] && h == dims[1] && d == dims[3] => {
            Ok(Some((a.iter().map(|v| v.acc()).collect(), p)))
        }
        ref s => Err(RefError::op(format!(
            "{what} of shape {s:?} does not match ({}, {}, past, {})",
            dims[0], dims[1], dims[3]
        ))),
    }
}

fn attention_typed<T: Real>(
    q: &Array<T>,
    k: &Tensor,
    v: &Tensor,
    mut spec: AttentionSpec,
) -> Result<Vec<Tensor>>
where
    T::Acc: GemmElem,
{
    let (k, v) = (typed::<T>(k)?, typed::<T>(v)?);
    if q.ndim() != k.ndim() || q.ndim() != v.ndim() {
        return Err(RefError::op(format!(
            "Q, K and V must have the same rank, got {:?}, {:?} and {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let three_d = q.ndim() == 3;
    let (qv, [b, hq, l, d]) = to_heads(q, spec.q_heads, "Q")?;
    let (kv_new, kdims) = to_heads(k, spec.kv_heads, "K")?;
    let (vv_new, vdims) = to_heads(v, spec.kv_heads, "V")?;
    let hkv = kdims[1];
    if kdims[0] != b || vdims[0] != b || vdims[1] != hkv || kdims[3] != d || vdims[2] != kdims[2] {
        return Err(RefError::op(format!(
            "Q {:?}, K {kdims:?} and V {vdims:?} (batch, heads, seq, size) do not agree",
            [b, hq, l, d]
        )));
    }
    if hkv == 0 || hq % hkv != 0 {
        return Err(RefError::op(format!(
            "{hq} query heads are not a multiple of {hkv} key/value heads"
        )));
    }
    let dv = vdims[3];
    let past_k = past_cache::<T>(spec.past_key, kdims, "past_key")?;
    let past_v = past_cache::<T>(spec.past_value, vdims, "past_value")?;
    let past_len = past_k.as_ref().map_or(0, |(_, p)| *p);
    if past_v.as_ref().map_or(0, |(_, p)| *p) != past_len {
        return Err(RefError::op("past_key and past_value lengths differ"));
    }
    let present_k = concat_seq(
        past_k.as_ref().map(|(x, p)| (x.as_slice(), *p)),
        &kv_new,
        kdims,
    );
    let present_v = concat_seq(
        past_v.as_ref().map(|(x, p)| (x.as_slice(), *p)),
        &vv_new,
        vdims,
    );
    let s = past_len + kdims[2];
    check_size("Attention scores", &[b, hq, l, s])?;
    if let Some(n) = &spec.frontier.nonpad {
        if n.len() != b {
            return Err(RefError::op(format!(
                "nonpad_kv_seqlen has {} entries for batch {b}",
                n.len()
            )));
        }
    }
    spec.frontier.past = past_len as i64;
    spec.frontier.q_len = l as i64;
    let mask = spec
        .mask
        .map(|m| MaskBias::<T::Acc>::new(m, [b, hq, l, s]))
        .transpose()?;

    let dtype = <T as crate::tensor::Elem>::DTYPE;
    let precision = match spec.precision {
        Some(code) => SoftmaxPrecision::from_code(code, dtype)?,
        None => SoftmaxPrecision::native(dtype),
    };
    let scale = spec.scale.unwrap_or(1.0 / (d as f64).sqrt()).sqrt();
    let scale = T::from_f64(scale).acc();
    let qs: Vec<T::Acc> = qv.iter().map(|&x| round_to::<T>(x * scale)).collect();
    let ks: Vec<T::Acc> = present_k
        .iter()
        .map(|&x| round_to::<T>(x * scale))
        .collect();
    let softcap = <T::Acc as AccFloat>::lit(spec.softcap);
    let zero = <T::Acc as num_traits::Zero>::zero();
    let group = hq / hkv;

    let mut y = vec![zero; b * hq * l * dv];
    let mut qk_out = vec![zero; b * hq * l * s];
    let mut scores = vec![zero; l * s];
    let mut probs = vec![zero; l * s];
    let mut bias = vec![zero; s];
    for bi in 0..b {
        for h in 0..hq {
            let kvh = h / group;
            let q_bh = &qs[(bi * hq + h) * l * d..][..l * d];
            let k_bh = &ks[(bi * hkv + kvh) * s * d..][..s * d];
            let v_bh = &present_v[(bi * hkv + kvh) * s * dv..][..s * dv];
            T::Acc::gemm(
                l,
                d,
                s,
                <T::Acc as crate::numeric::Num>::one(),
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
                zero,
                &mut scores,
            )?;
            let qk_bh = &mut qk_out[(bi * hq + h) * l * s..][..l * s];
            for i in 0..l {
                let row = &mut scores[i * s..(i + 1) * s];
                let out_row = &mut qk_bh[i * s..(i + 1) * s];
                for x in row.iter_mut() {
                    *x = round_to::<T>(*x);
                }
                if spec.qk_mode == QkOutputMode::Raw {
                    out_row.copy_from_slice(row);
                }
                if spec.softcap > 0.0 {
                    for x in row.iter_mut() {
                        let t = round_to::<T>(round_to::<T>(*x / softcap).tanh());
                        *x = round_to::<T>(t * softcap);
                    }
                }
                if spec.qk_mode == QkOutputMode::Softcapped {
                    out_row.copy_from_slice(row);
                }
                let mask_base = mask.as_ref().map_or(0, |m| {
                    bi * m.strides[0] + h * m.strides[1] + i * m.strides[2]
                });
                for (j, bj) in bias.iter_mut().enumerate() {
                    let m = mask.as_ref().map_or(zero, |m| m.at(mask_base, j));
                    *bj = if spec.frontier.allows(bi, i, j) {
                        m
                    } else {
                        m + <T::Acc as num_traits::Float>::neg_infinity()
                    };
                }
                for (x, &bj) in row.iter_mut().zip(&bias) {
                    *x = round_to::<T>(*x + bj);
                }
                if spec.qk_mode == QkOutputMode::Biased {
                    out_row.copy_from_slice(row);
                }
                let p_row = &mut probs[i * s..(i + 1) * s];
                for (p, &x) in p_row.iter_mut().zip(row.iter()) {
                    *p = precision.round(x);
                }
                precision.softmax(p_row);
                let neg_inf = <T::Acc as num_traits::Float>::neg_infinity();
                if bias.iter().all(|&x| x == neg_inf) {
                    p_row.fill(zero);
                }
                for p in p_row.iter_mut() {
                    *p = round_to::<T>(*p);
                }
                if spec.qk_mode == QkOutputMode::Softmax {
                    out_row.copy_from_slice(p_row);
                }
            }
            let y_bh = &mut y[(bi * hq + h) * l * dv..][..l * dv];
            T::Acc::gemm(
                l,
                s,
                dv,
                <T::Acc as crate::numeric::Num>::one(),
                MatRef {
                    data: &probs,
                    rs: s,
                    cs: 1,
                },
                MatRef {
                    data: v_bh,
                    rs: dv,
                    cs: 1,
                },
                zero,
                y_bh,
            )?;
            for x in y_bh.iter_mut() {
                *x = round_to::<T>(*x);
            }
        }
    }
    Ok(vec![
        from_heads::<T>(&y, [b, hq, l, dv], three_d)?,
        from_heads::<T>(&present_k, [b, hkv, s, d], false)?,
        from_heads::<T>(&present_v, [b, hkv, s, dv], false)?,
        from_heads::<T>(&qk_out, [b, hq, l, s], false)?,
    ])
}

#[cfg(test)]
pub(crate) mod tests;
