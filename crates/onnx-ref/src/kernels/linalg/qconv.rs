//! Convolutions beyond Conv: ConvInteger and QLinearConv (zero points subtracted, then the
//! Conv kernel of `conv.rs` runs in f64, which is exact for 8-bit operands), and DeformConv
//! (2-D; bilinear sampling at offset positions with an optional mask, then one GEMM per group).

use onnx_proto::NodeProto;

use super::super::matmul::{GemmElem, MatRef};
use super::super::{cast_tensor, one, unsupported};
use super::per_channel;
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{run_kernel, KernelCtx, KernelRegistry, LATEST};
use crate::numeric::AccFloat;
use crate::tensor::{check_size, Tensor};
use crate::value::Value;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "ConvInteger", 10, LATEST, conv_integer);
    reg.register("", "QLinearConv", 10, LATEST, qlinear_conv);
    reg.register("", "DeformConv", 19, LATEST, deform_conv);
}

fn is_8bit(t: &Tensor) -> bool {
    matches!(t.dtype(), DType::Uint8 | DType::Int8)
}

/// `(x - x_zp) conv (w - w_zp)` (plus an integer bias per output channel), computed exactly by
/// the Conv kernel in f64. `w_zp` may hold one value per output channel.
fn integer_conv(
    ctx: &KernelCtx,
    x: &Tensor,
    x_zp: Option<&Tensor>,
    w: &Tensor,
    w_zp: Option<&Tensor>,
    bias: Option<&Tensor>,
) -> Result<Tensor> {
    if !is_8bit(x) || !is_8bit(w) {
        return Err(ctx.err(format!(
            "x and w must be int8 or uint8, got {} and {}",
            x.dtype(),
            w.dtype()
        )));
    }
    let m = w.shape().first().copied().unwrap_or(0);
    let per_m = w.len().checked_div(m).unwrap_or(0);
    let xz = match x_zp {
        Some(t) => per_channel(t, 1, "x_zero_point")?[0],
        None => 0.0,
    };
    let wz = match w_zp {
        Some(t) => per_channel(t, m, "w_zero_point")?,
        None => vec![0.0; m],
    };
    let xs: Vec<f64> = x.to_f64_vec()?.into_iter().map(|v| v - xz).collect();
    let ws: Vec<f64> = w
        .to_f64_vec()?
        .into_iter()
        .enumerate()
        .map(|(i, v)| v - wz.get(i / per_m.max(1)).copied().unwrap_or(0.0))
        .collect();
    let mut conv_node: NodeProto = ctx.node.clone();
    conv_node.op_type = Some("Conv".into());
    conv_node.domain = None;
    conv_node.input = vec!["x".into(), "w".into()];
    conv_node.output = vec!["y".into()];
    let mut args = vec![
        Some(Value::Tensor(Tensor::from_vec(x.shape(), xs)?)),
        Some(Value::Tensor(Tensor::from_vec(w.shape(), ws)?)),
    ];
    if let Some(b) = bias {
        let bv = per_channel(b, m, "B")?;
        if b.len() != m {
            return Err(ctx.err(format!("B has {} values for {m} output channels", b.len())));
        }
        conv_node.input.push("b".into());
        args.push(Some(Value::Tensor(Tensor::from_vec(&[m], bv)?)));
    }
    // Conv-11's kernel, as `eval_node` would find it in the built-in registry.
    let refs: Vec<Option<&Value>> = args.iter().map(Option::as_ref).collect();
    let conv_ctx = KernelCtx {
        node: &conv_node,
        index: None,
        opset: 11,
    };
    let mut out = run_kernel(super::super::conv::conv, &conv_ctx, &refs).map_err(|e| match e {
        RefError::Kernel { reason, .. } => ctx.err(reason),
        other => other,
    })?;
    if out.is_empty() {
        return Err(ctx.err("the convolution produced no output"));
    }
    out.remove(0).into_tensor()
}

fn conv_integer(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = ctx.input(inputs, 1)?;
    let acc = integer_conv(
        ctx,
        x,
        ctx.opt_input(inputs, 2)?,
        w,
        ctx.opt_input(inputs, 3)?,
        None,
    )?;
    one(cast_tensor(&acc, DType::Int32)?)
}

fn qlinear_conv(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let x_scale = ctx.input(inputs, 1)?;
    let x_zp = ctx.opt_input(inputs, 2)?;
    let w = ctx.input(inputs, 3)?;
    let w_scale = ctx.input(inputs, 4)?;
    let w_zp = ctx.opt_input(inputs, 5)?;
    let y_scale = ctx.input(inputs, 6)?;
    let y_zp = ctx.opt_input(inputs, 7)?;
    let bias = ctx.opt_input(inputs, 8)?;
    let in_err = |e: RefError| e.in_node(&ctx.node_ref());
    let acc = integer_conv(ctx, x, x_zp, w, w_zp, bias)?;
    let m = w.shape().first().copied().unwrap_or(0);
    let xs = per_channel(x_scale, 1, "x_scale").map_err(in_err)?[0] as f32;
    let ys = per_channel(y_scale, 1, "y_scale").map_err(in_err)?[0] as f32;
    let ws = per_channel(w_scale, m, "w_scale").map_err(in_err)?;
    let target = y_zp.map_or(x.dtype(), Tensor::dtype);
    let (lo, hi) = match target {
        DType::Uint8 => (0.0, 255.0),
        DType::Int8 => (-128.0, 127.0),
        other => return Err(ctx.err(format!("unsupported output type {other}"))),
    };
    let zp = match y_zp {
        Some(t) => per_channel(t, 1, "y_zero_point").map_err(in_err)?[0],
        None => 0.0,
    };
    // Scales multiply in f32 as the reference does; the product with the accumulator in f64.
    let scales: Vec<f64> = ws.iter().map(|&w| (xs * w as f32 / ys) as f64).collect();
    let plane = acc
        .len()
        .checked_div(acc.shape()[..2].iter().product())
        .unwrap_or(0);
    let y: Vec<f64> = acc
        .to_f64_vec()
        .map_err(in_err)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let s = scales[(i / plane.max(1)) % m.max(1)];
            (v * s + zp).clamp(lo, hi).round_ties_even()
        })
        .collect();
    one(cast_tensor(&Tensor::from_vec(acc.shape(), y)?, target)?)
}

/// The geometry and attributes of a 2-D DeformConv.
struct DeformGeometry {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    m: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 2],
    group: usize,
    offset_group: usize,
}

/// Bilinear sample of a row-major `h×w` plane at (y, x), zero outside (GridSample with
/// align_corners and zero padding).
fn bilinear<A: AccFloat>(plane: &[A], h: usize, w: usize, y: A, x: A) -> A {
    let (y0, x0) = (y.floor(), x.floor());
    let (dy, dx) = (y - y0, x - x0);
    let one = A::lit(1.0);
    let at = |yy: A, xx: A| -> A {
        if yy < A::lit(0.0) || xx < A::lit(0.0) {
            return A::lit(0.0);
        }
        let (yi, xi) = (yy.as_f64() as usize, xx.as_f64() as usize);
        if yi < h && xi < w {
            plane[yi * w + xi]
        } else {
            A::lit(0.0)
        }
    };
    at(y0, x0) * (one - dy) * (one - dx)
        + at(y0, x0 + one) * (one - dy) * dx
        + at(y0 + one, x0) * dy * (one - dx)
        + at(y0 + one, x0 + one) * dy * dx
}

fn deform_conv_in<A: AccFloat + GemmElem>(
    g: &DeformGeometry,
    x: &[A],
    wt: &[A],
    offset: &[A],
    bias: Option<&[A]>,
    mask: Option<&[A]>,
) -> Result<Vec<A>> {
    let (kvol, pvol) = (g.kh * g.kw, g.oh * g.ow);
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let c_per_og = g.c / g.offset_group;
    let mut col = vec![A::lit(0.0); g.c * kvol * pvol];
    let mut out = vec![A::lit(0.0); g.n * g.m * pvol];
    for ni in 0..g.n {
        for ci in 0..g.c {
            let og = ci / c_per_og;
            let plane = &x[(ni * g.c + ci) * g.h * g.w..][..g.h * g.w];
            for a in 0..g.kh {
                for b in 0..g.kw {
                    let tap = a * g.kw + b;
                    let off_base = ((ni * g.offset_group + og) * kvol + tap) * 2 * pvol;
                    let mask_base = ((ni * g.offset_group + og) * kvol + tap) * pvol;
                    let dst = &mut col[(ci * kvol + tap) * pvol..][..pvol];
                    for i in 0..g.oh {
                        for j in 0..g.ow {
                            let p = i * g.ow + j;
                            let y = A::lit(
                                (i * g.stride[0] + a * g.dilation[0]) as f64 - g.pad[0] as f64,
                            ) + offset[off_base + p];
                            let xx = A::lit(
                                (j * g.stride[1] + b * g.dilation[1]) as f64 - g.pad[1] as f64,
                            ) + offset[off_base + pvol + p];
                            let mut v = bilinear(plane, g.h, g.w, y, xx);
                            if let Some(mk) = mask {
                                v = v * mk[mask_base + p];
                            }
                            dst[p] = v;
                        }
                    }
                }
            }
        }
        for gi in 0..g.group {
            A::gemm(
                mg,
                cg * kvol,
                pvol,
                A::lit(1.0),
                MatRef {
                    data: &wt[gi * mg * cg * kvol..],
                    rs: cg * kvol,
                    cs: 1,
                },
                MatRef {
                    data: &col[gi * cg * kvol * pvol..],
                    rs: pvol,
                    cs: 1,
                },
                A::lit(0.0),
                &mut out[(ni * g.m + gi * mg) * pvol..][..mg * pvol],
            )?;
        }
    }
    if let Some(bias) = bias {
        for (i, chunk) in out.chunks_mut(pvol.max(1)).enumerate() {
            let bv = bias[i % g.m];
            chunk.iter_mut().for_each(|v| *v = *v + bv);
        }
    }
    Ok(out)
}

fn deform_geometry(
    ctx: &KernelCtx,
    x: &Tensor,
    w: &Tensor,
    offset: &Tensor,
) -> Result<DeformGeometry> {
    let (&[n, c, h, wd], &[m, cg, kh, kw]) = (x.shape(), w.shape()) else {
        return Err(ctx.err(format!(
            "only 2-D DeformConv is supported: X {:?} and W {:?} must have rank 4",
            x.shape(),
            w.shape()
        )));
    };
    let two = |name: &str, fill: i64, len: usize| -> Result<Vec<usize>> {
        let v = match ctx.attr_ints(name) {
            Some(v) if !v.is_empty() => v.to_vec(),
            _ => vec![fill; len],
        };
        if v.len() != len || v.iter().any(|&d| d < 0) {
            return Err(ctx.err(format!("{name} {v:?} must be {len} non-negative values")));
        }
        Ok(v.iter().map(|&d| d as usize).collect())
    };
    let stride = two("strides", 1, 2)?;
    let dilation = two("dilations", 1, 2)?;
    let pads = two("pads", 0, 4)?;
    if let Some(k) = ctx.attr_ints("kernel_shape") {
        if k != [kh as i64, kw as i64] {
            return Err(ctx.err(format!(
                "kernel_shape {k:?} does not match W {:?}",
                w.shape()
            )));
        }
    }
    let group = ctx.attr_int("group", 1)?;
    let offset_group = ctx.attr_int("offset_group", 1)?;
    if group <= 0 || offset_group <= 0 || stride.contains(&0) || dilation.contains(&0) {
        return Err(ctx.err("group, offset_group, strides and dilations must be positive"));
    }
    let (group, offset_group) = (group as usize, offset_group as usize);
    if cg * group != c || m % group != 0 || c % offset_group != 0 {
        return Err(ctx.err(format!(
            "group {group} / offset_group {offset_group} do not fit X {:?} and W {:?}",
            x.shape(),
            w.shape()
        )));
    }
    let out_dim = |i: usize, k: usize, d: usize| -> Result<usize> {
        let span = [h, wd][i] + pads[i] + pads[i + 2];
        let eff = dilation[i] * (k.max(1) - 1) + 1;
        span.checked_sub(eff)
            .map(|r| r / stride[i] + 1)
            .ok_or_else(|| {
                ctx.err(format!(
                    "kernel extent {eff} exceeds padded input {span} ({d})"
                ))
            })
    };
    let oh = out_dim(0, kh, 0)?;
    let ow = out_dim(1, kw, 1)?;
    let want = [n, offset_group * 2 * kh * kw, oh, ow];
    if offset.shape() != want {
        return Err(ctx.err(format!("offset {:?} must be {want:?}", offset.shape())));
    }
    check_size("DeformConv result", &[n, m, oh, ow])?;
    Ok(DeformGeometry {
        n,
        c,
        h,
        w: wd,
        m,
        kh,
        kw,
        oh,
        ow,
        stride: [stride[0], stride[1]],
        dilation: [dilation[0], dilation[1]],
        pad: [pads[0], pads[1]],
        group,
        offset_group,
    })
}

fn deform_conv_typed<A: AccFloat + GemmElem>(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    g: &DeformGeometry,
) -> Result<Vec<A>> {
    let vals = |t: &Tensor| -> Result<Vec<A>> {
        Ok(t.to_f64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?
            .into_iter()
            .map(A::lit)
            .collect())
    };
    let x = vals(ctx.input(inputs, 0)?)?;
    let w = vals(ctx.input(inputs, 1)?)?;
    let offset = vals(ctx.input(inputs, 2)?)?;
    let bias = match ctx.opt_input(inputs, 3)? {
        Some(b) if b.len() == g.m => Some(vals(b)?),
        Some(b) => return Err(ctx.err(format!("B {:?} must have {} values", b.shape(), g.m))),
        None => None,
    };
    let mask = match ctx.opt_input(inputs, 4)? {
        Some(mk) if mk.shape() == [g.n, g.offset_group * g.kh * g.kw, g.oh, g.ow] => {
            Some(vals(mk)?)
        }
        Some(mk) => return Err(ctx.err(format!("mask {:?} does not fit the output", mk.shape()))),
        None => None,
    };
    deform_conv_in(g, &x, &w, &offset, bias.as_deref(), mask.as_deref())
        .map_err(|e| e.in_node(&ctx.node_ref()))
}

fn deform_conv(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = ctx.input(inputs, 1)?;
    let offset = ctx.input(inputs, 2)?;
    super::super::same_dtype(ctx, &[x, w, offset])?;
    let g = deform_geometry(ctx, x, w, offset)?;
    let shape = [g.n, g.m, g.oh, g.ow];
    let out = match x {
        Tensor::F64(_) => Tensor::from_vec(&shape, deform_conv_typed::<f64>(ctx, inputs, &g)?)?,
        Tensor::F32(_) | Tensor::F16(_) | Tensor::BF16(_) => {
            Tensor::from_vec(&shape, deform_conv_typed::<f32>(ctx, inputs, &g)?)?
        }
        other => return Err(unsupported(ctx, other)),
    };
    one(cast_tensor(&out, x.dtype())?)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{eval, int_attr, ints_attr, node};
    use super::*;

    #[test]
    fn conv_integer_subtracts_zero_points() -> Result<()> {
        let x = Tensor::from_vec(&[1, 1, 2, 2], vec![3u8, 4, 5, 6])?;
        let w = Tensor::from_vec(&[2, 1, 1, 1], vec![1u8, 2])?;
        let xz = Tensor::scalar(1u8);
        let wz = Tensor::from_vec(&[2], vec![0u8, 1])?;
        let y = eval(
            &node("ConvInteger", 4, 1, vec![]),
            10,
            vec![x.clone(), w.clone(), xz, wz],
        )?;
        assert_eq!(
            y[0],
            Tensor::from_vec(&[1, 2, 2, 2], vec![2i32, 3, 4, 5, 2, 3, 4, 5])?
        );
        let f = Tensor::from_vec(&[1, 1, 2, 2], vec![0f32; 4])?;
        assert!(eval(&node("ConvInteger", 2, 1, vec![]), 10, vec![f, w]).is_err());
        Ok(())
    }

    #[test]
    fn qlinear_conv_rounds_half_even_and_saturates() -> Result<()> {
        let x = Tensor::from_vec(&[1, 1, 1, 3], vec![1u8, 3, 200])?;
        let w = Tensor::from_vec(&[1, 1, 1, 1], vec![1i8])?;
        let inputs = vec![
            x,
            Tensor::scalar(0.5f32),
            Tensor::scalar(0u8),
            w,
            Tensor::scalar(1f32),
            Tensor::scalar(0i8),
            Tensor::scalar(1f32),
            Tensor::scalar(100u8),
        ];
        let y = eval(&node("QLinearConv", 8, 1, vec![]), 10, inputs)?;
        // 100.5 -> 100 and 101.5 -> 102 (half to even); 100 + 100 = 200.
        assert_eq!(
            y[0],
            Tensor::from_vec(&[1, 1, 1, 3], vec![100u8, 102, 200])?
        );
        Ok(())
    }

    #[test]
    fn deform_conv_with_zero_offsets_is_conv() -> Result<()> {
        let x = Tensor::from_vec(&[1, 1, 2, 2], vec![1f32, 2., 3., 4.])?;
        let w = Tensor::from_vec(&[1, 1, 2, 2], vec![1f32, 1., 1., 1.])?;
        let zero = Tensor::from_vec(&[1, 8, 1, 1], vec![0f32; 8])?;
        let n = node("DeformConv", 3, 1, vec![ints_attr("kernel_shape", &[2, 2])]);
        assert_eq!(
            eval(&n, 19, vec![x.clone(), w.clone(), zero])?[0],
            Tensor::from_vec(&[1, 1, 1, 1], vec![10f32])?
        );
        // Shift every tap half a pixel right: the right column reads zeros beyond the edge.
        let half = Tensor::from_vec(&[1, 8, 1, 1], vec![0f32, 0.5, 0., 0.5, 0., 0.5, 0., 0.5])?;
        assert_eq!(
            eval(&n, 19, vec![x.clone(), w.clone(), half])?[0],
            Tensor::from_vec(&[1, 1, 1, 1], vec![1.5f32 + 1.0 + 3.5 + 2.0])?
        );
        let bad = Tensor::from_vec(&[1, 4, 1, 1], vec![0f32; 4])?;
        assert!(eval(&n, 19, vec![x.clone(), w.clone(), bad]).is_err());
        let grouped = node("DeformConv", 3, 1, vec![int_attr("offset_group", 3)]);
        let zero = Tensor::from_vec(&[1, 8, 1, 1], vec![0f32; 8])?;
        assert!(eval(&grouped, 19, vec![x, w, zero]).is_err());
        Ok(())
    }
}
