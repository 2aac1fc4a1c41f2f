//! Quantization: QuantizeLinear and DequantizeLinear (per-tensor, per-axis and blocked scales;
//! integer, 4-bit, 2-bit and float8 types), DynamicQuantizeLinear, MatMulInteger and
//! QLinearMatMul. Arithmetic is done in f64 and rounded half to even, as numpy does.

use super::matmul::matmul_of;
use super::{norm_axis, one};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::minifloat;
use crate::tensor::{array_from_vec, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "QuantizeLinear", 10, LATEST, quantize_linear);
    reg.register("", "DequantizeLinear", 10, LATEST, dequantize_linear);
    reg.register(
        "",
        "DynamicQuantizeLinear",
        11,
        LATEST,
        dynamic_quantize_linear,
    );
    reg.register("", "MatMulInteger", 10, LATEST, matmul_integer);
    reg.register("", "QLinearMatMul", 10, LATEST, qlinear_matmul);
}

/// Where each element of a tensor of `shape` finds its scale or zero point: the parameter
/// (`p_len` values of shape `p_shape`) is one value, one per index of `axis`, or blocked along
/// `axis` (`block` > 0), with the parameter's shape checked once.
enum ParamIndex {
    Scalar,
    PerAxis {
        inner: usize,
        dim: usize,
    },
    Blocked {
        inner: usize,
        dim: usize,
        pdim: usize,
        block: usize,
    },
}

impl ParamIndex {
    fn new(
        p_len: usize,
        p_shape: &[usize],
        shape: &[usize],
        axis: Result<usize>,
        block: usize,
    ) -> Result<Self> {
        if p_len == 1 {
            return Ok(ParamIndex::Scalar);
        }
        // The axis only matters (and must be valid) for per-axis and blocked parameters.
        let axis = axis?;
        let inner: usize = shape[axis + 1..].iter().product();
        let dim = shape[axis];
        if block == 0 {
            if p_len != dim {
                return Err(RefError::op(format!(
                    "per-axis parameter has {p_len} values for dimension {dim}"
                )));
            }
            return Ok(ParamIndex::PerAxis { inner, dim });
        }
        // Blocked: the parameter has the input's rank, with ceil(dim / block) along `axis`.
        if p_shape.len() != shape.len() {
            return Err(RefError::op("blocked parameter must have the input's rank"));
        }
        let pdim = p_shape[axis];
        if pdim != dim.div_ceil(block) {
            return Err(RefError::op(format!(
                "blocked parameter dim {pdim} does not fit {dim} / block {block}"
            )));
        }
        Ok(ParamIndex::Blocked {
            inner,
            dim,
            pdim,
            block,
        })
    }

    /// Calls `f(element, parameter index)` for every element of `y`, in order, with the
    /// indices counted by nested loops (no division per element).
    fn for_each(&self, y: &mut [f64], mut f: impl FnMut(&mut f64, usize)) {
        match *self {
            ParamIndex::Scalar => y.iter_mut().for_each(|v| f(v, 0)),
            ParamIndex::PerAxis { inner, dim } => {
                for (i, chunk) in y.chunks_mut(inner.max(1)).enumerate() {
                    let p = i % dim.max(1);
                    chunk.iter_mut().for_each(|v| f(v, p));
                }
            }
            ParamIndex::Blocked {
                inner,
                dim,
                pdim,
                block,
            } => {
                for (i, chunk) in y.chunks_mut(inner.max(1)).enumerate() {
                    let (o, c) = (i / dim.max(1), i % dim.max(1));
                    let base = (o * pdim + c / block) * inner;
                    chunk
                        .iter_mut()
                        .enumerate()
                        .for_each(|(r, v)| f(v, base + r));
                }
            }
        }
    }
}

/// A scale or zero-point expanded to one value per element of a tensor of `shape`.
fn expand_param(
    p: &[f64],
    p_shape: &[usize],
    shape: &[usize],
    axis: Result<usize>,
    block: usize,
) -> Result<Vec<f64>> {
    let n: usize = shape.iter().product();
    let index = ParamIndex::new(p.len(), p_shape, shape, axis, block)?;
    let mut out = vec![0.0; n];
    index.for_each(&mut out, |v, i| *v = p[i]);
    Ok(out)
}

fn int_bounds(d: DType) -> Option<(f64, f64)> {
    Some(match d {
        DType::Uint8 => (0.0, 255.0),
        DType::Int8 => (-128.0, 127.0),
        DType::Uint16 => (0.0, 65535.0),
        DType::Int16 => (-32768.0, 32767.0),
        DType::Int32 => (i32::MIN as f64, i32::MAX as f64),
        DType::Uint4 => (0.0, 15.0),
        DType::Int4 => (-8.0, 7.0),
        DType::Uint2 => (0.0, 3.0),
        DType::Int2 => (-2.0, 1.0),
        _ => return None,
    })
}

/// The `axis` attribute (an `Err` kept for later when it does not fit the rank) and block size.
fn axis_and_block(ctx: &KernelCtx, rank: usize) -> Result<(Result<usize>, usize)> {
    let axis = norm_axis(ctx.attr_int("axis", 1)?, rank);
    let block = ctx.attr_int("block_size", 0)?.max(0) as usize;
    Ok((axis, block))
}

fn param(
    ctx: &KernelCtx,
    t: &Tensor,
    x_shape: &[usize],
    axis: &Result<usize>,
    block: usize,
) -> Result<Vec<f64>> {
    let v = t.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let axis = match axis {
        Ok(a) => Ok(*a),
        Err(e) => Err(RefError::op(e.to_string())),
    };
    expand_param(&v, t.shape(), x_shape, axis, block).map_err(|e| e.in_node(&ctx.node_ref()))
}

pub(crate) fn quantize_linear(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let zp = ctx.opt_input(inputs, 2)?;
    let target = match (zp, ctx.attr_int("output_dtype", 0)?) {
        (Some(z), _) => z.dtype(),
        (None, 0) => DType::Uint8,
        (None, code) => DType::from_code(code as i32)
            .ok_or_else(|| ctx.err(format!("unknown output_dtype {code}")))?,
    };
    let (axis, block) = axis_and_block(ctx, x.rank())?;
    let shape = x.shape().to_vec();
    let xs = x.to_f64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?;
    let s = param(ctx, scale, &shape, &axis, block)?;
    let z = match zp {
        Some(z) => param(ctx, z, &shape, &axis, block)?,
        None => vec![0.0; xs.len()],
    };
    let saturate = ctx.attr_int("saturate", 1)? != 0;
    // numpy divides float32 inputs in float32; rounding ties depend on it.
    let single = x.dtype() == DType::Float;
    let divide = |x: f64, s: f64| {
        if single {
            (x as f32 / s as f32) as f64
        } else {
            x / s
        }
    };
    if let Some((lo, hi)) = int_bounds(target) {
        let q: Vec<f64> = xs
            .iter()
            .zip(&s)
            .zip(&z)
            .map(|((x, s), z)| (divide(*x, *s).round_ties_even() + z).clamp(lo, hi))
            .collect();
        let f = Tensor::from_vec(&shape, q)?;
        return one(super::cast_tensor(&f, target)?);
    }
    if target.is_coded() {
        let codes = xs
            .iter()
            .zip(&s)
            .zip(&z)
            .map(|((x, s), z)| minifloat::f32_to_coded(target, (x / s + z) as f32, saturate))
            .collect();
        return one(Tensor::from_codes(target, &shape, codes)?);
    }
    Err(ctx.err(format!("unsupported output type {target}")))
}

pub(crate) fn dequantize_linear(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let scale = ctx.input(inputs, 1)?;
    let zp = ctx.opt_input(inputs, 2)?;
    let (axis, block) = axis_and_block(ctx, x.rank())?;
    let shape = x.shape().to_vec();
    let in_node = |e: RefError| e.in_node(&ctx.node_ref());
    let axis_of = || match &axis {
        Ok(a) => Ok(*a),
        Err(e) => Err(RefError::op(e.to_string())),
    };
    // The parameters stay one value per scale (not one per element): each element finds its
    // own through the index, in the single pass that computes it.
    let s = scale.to_f64_vec().map_err(in_node)?;
    let s_index =
        ParamIndex::new(s.len(), scale.shape(), &shape, axis_of(), block).map_err(in_node)?;
    let z = match zp {
        Some(z) => {
            let v = z.to_f64_vec().map_err(in_node)?;
            let index =
                ParamIndex::new(v.len(), z.shape(), &shape, axis_of(), block).map_err(in_node)?;
            Some((v, index))
        }
        None => None,
    };
    let out_dtype = match ctx.attr_int("output_dtype", 0)? {
        0 => scale.dtype(),
        code => DType::from_code(code as i32)
            .ok_or_else(|| ctx.err(format!("unknown output_dtype {code}")))?,
    };
    let mut y = x.to_f64_vec().map_err(in_node)?;
    if let Some((zv, zi)) = &z {
        zi.for_each(&mut y, |v, i| *v -= zv[i]);
    }
    s_index.for_each(&mut y, |v, i| *v *= s[i]);
    one(super::cast_tensor(
        &Tensor::from_vec(&shape, y)?,
        out_dtype,
    )?)
}

fn dynamic_quantize_linear(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let xs: Vec<f32> = x
        .to_f64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let min = xs.iter().copied().fold(0f32, f32::min);
    let max = xs.iter().copied().fold(0f32, f32::max);
    let scale = (max - min) / 255.0;
    let zp = if scale == 0.0 {
        0.0
    } else {
        (0.0 - min / scale).round_ties_even().clamp(0.0, 255.0)
    };
    let y: Vec<u8> = xs
        .iter()
        .map(|v| if scale == 0.0 { zp } else { ((v / scale).round_ties_even() + zp).clamp(0.0, 255.0) } as u8)
        .collect();
    Ok(vec![
        Value::Tensor(Tensor::from_vec(x.shape(), y)?),
        Value::Tensor(Tensor::scalar(scale)),
        Value::Tensor(Tensor::scalar(zp as u8)),
    ])
}

/// `(A - a_zp) · (B - b_zp)`, batched and broadcast like MatMul (1-D operands too), as exact
/// integers held in f64. `a_zp` is a scalar or one value per row of A, `b_zp` a scalar or one
/// per column of B. The centred operands are multiplied in f64 by the crate's GEMM: with the
/// 8-bit operands the schemas allow, every product is at most 2^16 and every partial sum an
/// integer below 2^53 for any K under 2^37, so the sums are exact in any order.
fn int_matmul(
    a: &Tensor,
    b: &Tensor,
    a_zp: Option<&Tensor>,
    b_zp: Option<&Tensor>,
) -> Result<(Vec<usize>, Vec<f64>)> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(RefError::op("MatMul operands must have rank >= 1"));
    }
    let zero_points = |t: Option<&Tensor>| -> Result<Vec<f64>> {
        let z = t.map(|t| t.to_i64_vec()).transpose()?.unwrap_or_default();
        Ok(if z.is_empty() {
            vec![0.0]
        } else {
            z.into_iter().map(|v| v as f64).collect()
        })
    };
    let (azp, bzp) = (zero_points(a_zp)?, zero_points(b_zp)?);
    let k = a.shape()[a.rank() - 1];
    let m = if a.rank() == 1 {
        1
    } else {
        a.shape()[a.rank() - 2]
    };
    let n = if b.rank() == 1 {
        1
    } else {
        b.shape()[b.rank() - 1]
    };
    let centred = |t: &Tensor, z: &[f64], index: &dyn Fn(usize) -> usize| -> Result<Array<f64>> {
        let v = t.to_i64_vec()?;
        let data = v
            .into_iter()
            .enumerate()
            .map(|(f, x)| x as f64 - z[index(f) % z.len()])
            .collect();
        array_from_vec(t.shape(), data)
    };
    let av = centred(a, &azp, &|f| (f / k.max(1)) % m.max(1))?;
    let bv = centred(b, &bzp, &|f| f % n.max(1))?;
    let out = matmul_of(&av, &bv)?;
    let shape = out.shape().to_vec();
    Ok((shape, out.iter().copied().collect()))
}

fn matmul_integer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let b = ctx.input(inputs, 1)?;
    let (shape, out) = int_matmul(a, b, ctx.opt_input(inputs, 2)?, ctx.opt_input(inputs, 3)?)
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    one(Tensor::I32(array_from_vec(
        &shape,
        out.into_iter().map(|v| v as i32).collect(),
    )?))
}

fn qlinear_matmul(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let a = ctx.input(inputs, 0)?;
    let a_scale = ctx.input(inputs, 1)?;
    let a_zp = ctx.input(inputs, 2)?;
    let b = ctx.input(inputs, 3)?;
    let b_scale = ctx.input(inputs, 4)?;
    let b_zp = ctx.input(inputs, 5)?;
    let y_scale = ctx.input(inputs, 6)?;
    let y_zp = ctx.input(inputs, 7)?;
    let err = |e: RefError| e.in_node(&ctx.node_ref());
    let first = |t: &Tensor| -> Result<f64> {
        t.to_f64_vec()
            .map_err(err)?
            .first()
            .copied()
            .ok_or_else(|| ctx.err("empty scale"))
    };
    let (shape, acc) = int_matmul(a, b, Some(a_zp), Some(b_zp)).map_err(err)?;
    let scale = first(a_scale)? * first(b_scale)? / first(y_scale)?;
    let zp = first(y_zp)?;
    let target = y_zp.dtype();
    let (lo, hi) =
        int_bounds(target).ok_or_else(|| ctx.err(format!("unsupported output type {target}")))?;
    let y: Vec<f64> = acc
        .into_iter()
        .map(|v| ((v * scale).round_ties_even() + zp).clamp(lo, hi))
        .collect();
    one(super::cast_tensor(&Tensor::from_vec(&shape, y)?, target)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(a - a_zp) · (b - b_zp)` by the definition: numpy's matmul broadcasting over batch
    /// dims (both operands at least 2-D here), one loop per output element.
    fn naive(
        a: &[i64],
        ash: &[usize],
        b: &[i64],
        bsh: &[usize],
        azp: &[i64],
        bzp: &[i64],
    ) -> (Vec<usize>, Vec<f64>) {
        let (m, k, n) = (ash[ash.len() - 2], ash[ash.len() - 1], bsh[bsh.len() - 1]);
        let (abatch, bbatch) = (&ash[..ash.len() - 2], &bsh[..bsh.len() - 2]);
        let rank = abatch.len().max(bbatch.len());
        let pad = |s: &[usize]| [vec![1; rank - s.len()], s.to_vec()].concat();
        let (pa, pb) = (pad(abatch), pad(bbatch));
        let batch: Vec<usize> = pa.iter().zip(&pb).map(|(x, y)| *x.max(y)).collect();
        let total: usize = batch.iter().product();
        let mut out = Vec::new();
        for t in 0..total {
            let (mut rem, mut ia, mut ib, mut sa, mut sb) = (t, 0, 0, 1, 1);
            for d in (0..rank).rev() {
                let i = rem % batch[d];
                rem /= batch[d];
                ia += (i % pa[d]) * sa;
                ib += (i % pb[d]) * sb;
                sa *= pa[d];
                sb *= pb[d];
            }
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0i64;
                    for p in 0..k {
                        let x = a[(ia * m + i) * k + p] - azp[i % azp.len()];
                        let y = b[(ib * k + p) * n + j] - bzp[j % bzp.len()];
                        acc += x * y;
                    }
                    out.push(acc as f64);
                }
            }
        }
        let mut shape = batch;
        shape.extend([m, n]);
        (shape, out)
    }

    #[test]
    fn int_matmul_broadcasts_batches_and_centres_rows_and_columns() {
        let cases: [(&[usize], &[usize], usize, usize); 4] = [
            (&[2, 3, 4], &[4, 5], 3, 5),
            (&[3, 4], &[2, 4, 5], 1, 5),
            (&[2, 1, 3, 4], &[3, 4, 5], 3, 1),
            (&[1, 3, 4], &[2, 4, 5], 1, 1),
        ];
        for (ash, bsh, azp_len, bzp_len) in cases {
            let count = |s: &[usize]| s.iter().product::<usize>();
            let a: Vec<u8> = (0..count(ash)).map(|i| (i * 37 % 256) as u8).collect();
            let b: Vec<i8> = (0..count(bsh))
                .map(|i| ((i * 53 % 256) as i64 - 128) as i8)
                .collect();
            let azp: Vec<u8> = (0..azp_len).map(|i| (100 + 7 * i) as u8).collect();
            let bzp: Vec<i8> = (0..bzp_len).map(|i| (3 * i as i64 - 5) as i8).collect();
            let zp_shape = |n: usize| if n == 1 { vec![] } else { vec![n] };
            let (got_shape, got) = int_matmul(
                &Tensor::from_vec(ash, a.clone()).unwrap(),
                &Tensor::from_vec(bsh, b.clone()).unwrap(),
                Some(&Tensor::from_vec(&zp_shape(azp_len), azp.clone()).unwrap()),
                Some(&Tensor::from_vec(&zp_shape(bzp_len), bzp.clone()).unwrap()),
            )
            .unwrap();
            let (want_shape, want) = naive(
                &a.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                ash,
                &b.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                bsh,
                &azp.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                &bzp.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            );
            assert_eq!((got_shape, got), (want_shape, want), "{ash:?} x {bsh:?}");
        }
    }

    #[test]
    fn int_matmul_takes_one_dimensional_operands_as_matmul_does() {
        let a = Tensor::from_vec(&[3], vec![1u8, 2, 3]).unwrap();
        let b = Tensor::from_vec(&[3, 2], vec![1u8, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(
            int_matmul(&a, &b, None, None).unwrap(),
            (vec![2], vec![22.0, 28.0])
        );
        let m = Tensor::from_vec(&[2, 3], vec![1u8, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(
            int_matmul(&m, &a, None, None).unwrap(),
            (vec![2], vec![14.0, 32.0])
        );
        let bad = Tensor::from_vec(&[2], vec![1u8, 2]).unwrap();
        assert!(int_matmul(&bad, &b, None, None).is_err());
    }
}
