//! The small transformer building blocks around attention: RotaryEmbedding (opset 23),
//! SwiGLU (opset 28) and TensorScatter (opset 24, the KV-cache update). 16-bit floats round
//! after each step the reference computes in their type.

use super::round_to;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::kernels::{norm_axis, one, typed, unsupported};
use crate::numeric::Real;
use crate::tensor::{array_from_vec, map_all, Array, Tensor};
use crate::value::Value;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "RotaryEmbedding", 23, LATEST, rotary_embedding);
    reg.register("", "SwiGLU", 28, LATEST, swiglu);
    reg.register("", "TensorScatter", 24, LATEST, tensor_scatter);
}

/// The attributes of a RotaryEmbedding node.
#[derive(Debug, Clone, Copy)]
struct Rotary {
    interleaved: bool,
    rotary_dim: usize,
    num_heads: usize,
}

fn rotary_embedding(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let cos = ctx.input(inputs, 1)?;
    let sin = ctx.input(inputs, 2)?;
    let positions = ctx
        .opt_input(inputs, 3)?
        .map(|t| t.to_i64_vec())
        .transpose()?;
    let nonneg = |name: &str| -> Result<usize> {
        let v = ctx.attr_int(name, 0)?;
        usize::try_from(v).map_err(|_| ctx.err(format!("attribute '{name}' is negative: {v}")))
    };
    let rot = Rotary {
        interleaved: ctx.attr_int("interleaved", 0)? != 0,
        rotary_dim: nonneg("rotary_embedding_dim")?,
        num_heads: nonneg("num_heads")?,
    };
    let pos = positions.as_deref();
    one(match x {
        Tensor::F32(a) => Tensor::F32(rotary_typed(a, typed(cos)?, typed(sin)?, pos, rot)?),
        Tensor::F64(a) => Tensor::F64(rotary_typed(a, typed(cos)?, typed(sin)?, pos, rot)?),
        Tensor::F16(a) => Tensor::F16(rotary_typed(a, typed(cos)?, typed(sin)?, pos, rot)?),
        Tensor::BF16(a) => Tensor::BF16(rotary_typed(a, typed(cos)?, typed(sin)?, pos, rot)?),
        other => return Err(unsupported(ctx, other)),
    })
}

fn rotary_typed<T: Real>(
    x: &Array<T>,
    cos: &Array<T>,
    sin: &Array<T>,
    positions: Option<&[i64]>,
    rot: Rotary,
) -> Result<Array<T>> {
    // Dims as (batch, seq, heads, head_size) and the strides of those axes in `x`.
    let (dims, strides) = match *x.shape() {
        [b, h, s, d] => ([b, s, h, d], [h * s * d, d, s * d]),
        [b, s, hidden] => {
            let h = rot.num_heads;
            if h == 0 || hidden % h != 0 {
                return Err(RefError::op(format!(
                    "3-D input needs num_heads dividing the hidden size {hidden}, got {h}"
                )));
            }
            let d = hidden / h;
            ([b, s, h, d], [s * hidden, hidden, d])
        }
        ref other => {
            return Err(RefError::op(format!(
                "input must be 3-D or 4-D, got shape {other:?}"
            )))
        }
    };
    let [b, s, h, d] = dims;
    let rd = if rot.rotary_dim == 0 {
        d
    } else {
        rot.rotary_dim
    };
    if rd > d || rd % 2 != 0 {
        return Err(RefError::op(format!(
            "rotary_embedding_dim {rd} must be even and at most the head size {d}"
        )));
    }
    let half = rd / 2;
    for (name, cache) in [("cos_cache", cos), ("sin_cache", sin)] {
        let ok = match (positions, cache.shape()) {
            (Some(_), [_, last]) => *last == half,
            (None, [cb, cs, last]) => *cb == b && *cs == s && *last == half,
            _ => false,
        };
        if !ok {
            return Err(RefError::op(format!(
                "{name} of shape {:?} does not fit batch {b}, sequence {s}, rotary half {half} \
                 ({})",
                cache.shape(),
                if positions.is_some() {
                    "with position_ids: (max_position, half)"
                } else {
                    "without position_ids: (batch, seq, half)"
                }
            )));
        }
    }
    if let Some(p) = positions {
        if p.len() != b * s {
            return Err(RefError::op(format!(
                "position_ids has {} entries, expected batch {b} x sequence {s}",
                p.len()
            )));
        }
    }
    let max_pos = cos.shape()[0].min(sin.shape()[0]);
    let xs = x.as_standard_layout();
    let xs = xs
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let cos_std = cos.as_standard_layout();
    let sin_std = sin.as_standard_layout();
    let (cos_flat, sin_flat) = match (cos_std.as_slice(), sin_std.as_slice()) {
        (Some(c), Some(s)) => (c, s),
        _ => return Err(RefError::op("caches are not contiguous")),
    };
    let mut out = xs.to_vec();
    for bi in 0..b {
        for si in 0..s {
            let cache_row = match positions {
                Some(p) => {
                    let pos = p[bi * s + si];
                    usize::try_from(pos)
                        .ok()
                        .filter(|&q| q < max_pos)
                        .ok_or_else(|| {
                            RefError::op(format!(
                                "position id {pos} is outside the caches of {max_pos} positions"
                            ))
                        })?
                }
                None => bi * s + si,
            };
            let c = &cos_flat[cache_row * half..][..half];
            let sn = &sin_flat[cache_row * half..][..half];
            for hi in 0..h {
                let base = bi * strides[0] + si * strides[1] + hi * strides[2];
                for (k, (&ck, &sk)) in c.iter().zip(sn).enumerate() {
                    let (i1, i2) = if rot.interleaved {
                        (base + 2 * k, base + 2 * k + 1)
                    } else {
                        (base + k, base + half + k)
                    };
                    let (x1, x2) = (xs[i1].acc(), xs[i2].acc());
                    let (ck, sk) = (ck.acc(), sk.acc());
                    let real = round_to::<T>(round_to::<T>(ck * x1) - round_to::<T>(sk * x2));
                    let imag = round_to::<T>(round_to::<T>(sk * x1) + round_to::<T>(ck * x2));
                    out[i1] = T::from_acc(real);
                    out[i2] = T::from_acc(imag);
                }
            }
        }
    }
    array_from_vec(x.shape(), out)
}

fn swiglu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    if a.shape() != b.shape() {
        return Err(ctx.err(format!(
            "A {:?} and B {:?} must have the same shape (no broadcasting)",
            a.shape(),
            b.shape()
        )));
    }
    let alpha = ctx.attr_float("alpha", 1.0)? as f64;
    one(match a {
        Tensor::F32(x) => Tensor::F32(swiglu_typed(x, typed(b)?, alpha)?),
        Tensor::F64(x) => Tensor::F64(swiglu_typed(x, typed(b)?, alpha)?),
        Tensor::F16(x) => Tensor::F16(swiglu_typed(x, typed(b)?, alpha)?),
        Tensor::BF16(x) => Tensor::BF16(swiglu_typed(x, typed(b)?, alpha)?),
        other => return Err(unsupported(ctx, other)),
    })
}

/// `a · sigmoid(alpha · a) · b`, rounding like the reference's numpy steps.
fn swiglu_typed<T: Real>(a: &Array<T>, b: &Array<T>, alpha: f64) -> Result<Array<T>> {
    use crate::numeric::AccFloat;
    use num_traits::Float;
    let alpha = <T::Acc as AccFloat>::lit(alpha);
    let one = <T::Acc as AccFloat>::lit(1.0);
    let out: Vec<T> = a
        .iter()
        .zip(b.iter())
        .map(|(&x, &y)| {
            let x = x.acc();
            let e = round_to::<T>(round_to::<T>(-(alpha * x)).exp());
            let sig = round_to::<T>(one / round_to::<T>(one + e));
            T::from_acc(round_to::<T>(x * sig) * y.acc())
        })
        .collect();
    array_from_vec(a.shape(), out)
}

fn tensor_scatter(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let past = ctx.input(inputs, 0)?;
    let update = ctx.input(inputs, 1)?;
    if past.dtype() != update.dtype() {
        return Err(ctx.err(format!(
            "update has type {} but past_cache has {}",
            update.dtype(),
            past.dtype()
        )));
    }
    let rank = past.rank();
    let axis = norm_axis(ctx.attr_int("axis", -2)?, rank.max(1))?;
    if rank < 2 || axis == 0 {
        return Err(ctx.err(format!(
            "axis {axis} of a rank-{rank} cache must be a sequence axis after the batch axis"
        )));
    }
    let circular = match ctx.attr_string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        m => return Err(ctx.err(format!("mode '{m}' is not 'linear' or 'circular'"))),
    };
    let (ps, us) = (past.shape(), update.shape());
    let compatible = ps.len() == us.len()
        && ps
            .iter()
            .zip(us)
            .enumerate()
            .all(|(i, (p, u))| if i == axis { u <= p } else { u == p });
    if !compatible {
        return Err(ctx.err(format!(
            "update {us:?} does not fit past_cache {ps:?} along axis {axis}"
        )));
    }
    let batch = ps[0];
    let writes = match ctx.opt_input(inputs, 2)? {
        Some(t) => t.to_i64_vec()?,
        None => vec![0; batch],
    };
    if writes.len() != batch {
        return Err(ctx.err(format!(
            "write_indices has {} entries for batch {batch}",
            writes.len()
        )));
    }
    let plan = ScatterPlan {
        outer: ps[..axis].iter().product(),
        per_batch: ps[1..axis].iter().product(),
        max_len: ps[axis],
        len: us[axis],
        inner: ps[axis + 1..].iter().product(),
        circular,
    };
    one(map_all!(past, a => plan.apply(a, typed_like_past(a, update)?, &writes)?))
}

fn typed_like_past<'a, T: crate::tensor::Elem>(
    _: &Array<T>,
    t: &'a Tensor,
) -> Result<&'a Array<T>> {
    typed(t)
}

/// Where TensorScatter writes: the cache viewed as (outer, max_len, inner).
#[derive(Debug, Clone, Copy)]
struct ScatterPlan {
    outer: usize,
    /// Outer rows per batch entry.
    per_batch: usize,
    max_len: usize,
    len: usize,
    inner: usize,
    circular: bool,
}

impl ScatterPlan {
    fn apply<T: Clone>(
        self,
        past: &Array<T>,
        update: &Array<T>,
        writes: &[i64],
    ) -> Result<Array<T>> {
        let mut out: Vec<T> = past.iter().cloned().collect();
        let upd: Vec<T> = update.iter().cloned().collect();
        for o in 0..self.outer {
            let batch = o / self.per_batch.max(1);
            let start = writes.get(batch).copied().unwrap_or(0);
            for s in 0..self.len {
                let pos = start + s as i64;
                let pos = if self.circular && self.max_len > 0 {
                    pos.rem_euclid(self.max_len as i64)
                } else {
                    pos
                };
                let pos = usize::try_from(pos)
                    .ok()
                    .filter(|&p| p < self.max_len)
                    .ok_or_else(|| {
                        RefError::op(format!(
                            "write position {pos} is outside the cache of length {}",
                            self.max_len
                        ))
                    })?;
                let dst = (o * self.max_len + pos) * self.inner;
                let src = (o * self.len + s) * self.inner;
                out[dst..dst + self.inner].clone_from_slice(&upd[src..src + self.inner]);
            }
        }
        array_from_vec(past.shape(), out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{f32_tensor, floats, int_attr, node, run, string_attr};
    use super::*;

    #[test]
    fn rotary_rotates_pairs() {
        // One head of size 2, cos = 0, sin = 1: (x1, x2) -> (-x2, x1).
        let n = node("RotaryEmbedding", "", 3, 1, vec![]);
        let out = run(
            &n,
            23,
            &[
                f32_tensor(&[1, 1, 1, 2], vec![3.0, 4.0]),
                f32_tensor(&[1, 1, 1], vec![0.0]),
                f32_tensor(&[1, 1, 1], vec![1.0]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![-4.0, 3.0]);
        // A position id outside the cache is an error, not a panic.
        let n = node("RotaryEmbedding", "", 4, 1, vec![]);
        let pos = Some(Value::Tensor(
            Tensor::from_vec(&[1, 1], vec![5i64]).unwrap_or_else(|e| panic!("{e}")),
        ));
        let err = run(
            &n,
            23,
            &[
                f32_tensor(&[1, 1, 1, 2], vec![3.0, 4.0]),
                f32_tensor(&[2, 1], vec![0.0, 1.0]),
                f32_tensor(&[2, 1], vec![1.0, 0.0]),
                pos,
            ],
        );
        assert!(err.is_err());
        // Odd rotary dims are refused.
        let n = node(
            "RotaryEmbedding",
            "",
            3,
            1,
            vec![int_attr("rotary_embedding_dim", 1)],
        );
        let err = run(
            &n,
            23,
            &[
                f32_tensor(&[1, 1, 1, 2], vec![3.0, 4.0]),
                f32_tensor(&[1, 1, 1], vec![0.0]),
                f32_tensor(&[1, 1, 1], vec![1.0]),
            ],
        );
        assert!(err.is_err());
    }

    #[test]
    fn swiglu_gates_and_checks_shapes() {
        let n = node("SwiGLU", "", 2, 1, vec![]);
        let out = run(
            &n,
            28,
            &[
                f32_tensor(&[2], vec![0.0, 100.0]),
                f32_tensor(&[2], vec![5.0, 2.0]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![0.0, 200.0]);
        assert!(run(
            &n,
            28,
            &[
                f32_tensor(&[2], vec![0.0, 1.0]),
                f32_tensor(&[1], vec![1.0])
            ]
        )
        .is_err());
        let empty = run(
            &n,
            28,
            &[f32_tensor(&[0, 3], vec![]), f32_tensor(&[0, 3], vec![])],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(empty[0].shape(), &[0, 3]);
    }

    #[test]
    fn tensor_scatter_writes_per_batch() {
        let n = node(
            "TensorScatter",
            "",
            3,
            1,
            vec![int_attr("axis", 1), string_attr("mode", "circular")],
        );
        let idx = Some(Value::Tensor(
            Tensor::from_vec(&[2], vec![2i64, 0]).unwrap_or_else(|e| panic!("{e}")),
        ));
        let out = run(
            &n,
            24,
            &[
                f32_tensor(&[2, 3], vec![0.0; 6]),
                f32_tensor(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                idx.clone(),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(floats(&out[0]), vec![2.0, 0.0, 1.0, 3.0, 4.0, 0.0]);
        // Linear mode refuses to write past the end.
        let n = node("TensorScatter", "", 3, 1, vec![int_attr("axis", 1)]);
        let err = run(
            &n,
            24,
            &[
                f32_tensor(&[2, 3], vec![0.0; 6]),
                f32_tensor(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                idx,
            ],
        );
        assert!(err.is_err());
        // Axis 0 (the batch) is not a sequence axis.
        let n = node("TensorScatter", "", 2, 1, vec![int_attr("axis", 0)]);
        assert!(run(
            &n,
            24,
            &[
                f32_tensor(&[2, 3], vec![0.0; 6]),
                f32_tensor(&[1, 3], vec![0.0; 3])
            ]
        )
        .is_err());
    }
}
