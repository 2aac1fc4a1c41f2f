//! ConvTranspose (1-D, 2-D, 3-D; groups, strides, dilations, pads, output_padding,
//! output_shape, auto_pad) as GEMM followed by a col2im scatter-add, following the ONNX
//! reference's padding rules.

use super::matmul::{GemmElem, MatRef};
use super::{one, same_dtype, to_dims, typed, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Real;
use crate::tensor::{array_from_vec, check_size, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "ConvTranspose", 1, LATEST, conv_transpose);
}

/// Geometry normalized to three spatial dims.
#[derive(Debug, Clone)]
struct Geometry {
    dims: usize,
    input: [usize; 3],
    kernel: [usize; 3],
    stride: [usize; 3],
    dilation: [usize; 3],
    pad_begin: [usize; 3],
    output: [usize; 3],
}

fn pad3(v: &[usize], fill: usize) -> [usize; 3] {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}

fn geometry(ctx: &KernelCtx, input: &[usize], kernel: &[usize]) -> Result<Geometry> {
    let n = input.len();
    if n == 0 || n > 3 {
        return Err(ctx.err(format!(
            "only 1-D, 2-D and 3-D ConvTranspose is supported, got {n} spatial dims"
        )));
    }
    let list = |name: &str, default: usize| -> Result<Vec<usize>> {
        match ctx.attr_ints(name) {
            Some(v) if !v.is_empty() => to_dims(v),
            _ => Ok(vec![default; n]),
        }
    };
    let stride = list("strides", 1)?;
    let dilation = list("dilations", 1)?;
    let out_pad = list("output_padding", 0)?;
    if stride.len() != n
        || dilation.len() != n
        || out_pad.len() < n
        || stride.contains(&0)
        || dilation.contains(&0)
    {
        return Err(ctx.err(
            "strides, dilations and output_padding must have one positive value per spatial dim",
        ));
    }
    let out_shape = match ctx.attr_ints("output_shape") {
        Some(v) if !v.is_empty() => Some(to_dims(&v[v.len().saturating_sub(n)..])?),
        _ => None,
    };
    let auto_pad = ctx.attr_string("auto_pad", "NOTSET")?;
    let pads = ctx.attr_ints("pads").filter(|p| !p.is_empty());
    let mut pad_begin = vec![0usize; n];
    let mut output = vec![0usize; n];
    for i in 0..n {
        let eff = (kernel[i] - 1) * dilation[i] + 1;
        let full = stride[i] * (input[i].max(1) - 1) + out_pad[i] + eff;
        match (pads, auto_pad.as_str()) {
            (None, "SAME_UPPER" | "SAME_LOWER") => {
                let out = out_shape.as_ref().map_or(input[i] * stride[i], |o| o[i]);
                let total = full as i64 - out as i64;
                let total = total.max(0) as usize;
                pad_begin[i] = if auto_pad == "SAME_UPPER" {
                    total / 2
                } else {
                    total - total / 2
                };
                output[i] = out;
            }
            (pads, _) => {
                let (b, e) = match pads {
                    Some(p) if p.len() == 2 * n && p.iter().all(|&v| v >= 0) => {
                        (p[i] as usize, p[i + n] as usize)
                    }
                    Some(p) => {
                        return Err(
                            ctx.err(format!("pads {p:?} must be 2 x {n} non-negative values"))
                        )
                    }
                    None => (0, 0),
                };
                pad_begin[i] = b;
                output[i] = match &out_shape {
                    Some(o) => o[i],
                    None => full
                        .checked_sub(b + e)
                        .ok_or_else(|| ctx.err("pads are larger than the output"))?,
                };
            }
        }
    }
    Ok(Geometry {
        dims: n,
        input: pad3(input, 1),
        kernel: pad3(kernel, 1),
        stride: pad3(&stride, 1),
        dilation: pad3(&dilation, 1),
        pad_begin: pad3(&pad_begin, 0),
        output: pad3(&output, 1),
    })
}

fn conv_transpose_of<T: GemmElem + Real>(
    x: &Array<T>,
    w: &Array<T>,
    bias: Option<&Array<T>>,
    g: &Geometry,
    group: usize,
) -> Result<Array<T>> {
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let mg = w.shape()[1];
    let m = mg * group;
    let cg = c / group;
    let kvol: usize = g.kernel.iter().product();
    let ivol: usize = g.input.iter().product();
    let ovol: usize = g.output.iter().product();
    let mut out_shape = vec![n, m];
    out_shape.extend_from_slice(&g.output[3 - g.dims..]);
    check_size("ConvTranspose result", &out_shape)?;
    let x_std = x.as_standard_layout();
    let xs = x_std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let w_std = w.as_standard_layout();
    let ws = w_std
        .as_slice()
        .ok_or_else(|| RefError::op("weight is not contiguous"))?;
    let mut out = vec![T::zero(); n * m * ovol];
    let mut cols = vec![T::zero(); mg * kvol * ivol];
    let [id, ih, iw] = g.input;
    let [kd, kh, kw] = g.kernel;
    let [od, oh, ow] = g.output;
    for ni in 0..n {
        for gi in 0..group {
            let xg = &xs[(ni * c + gi * cg) * ivol..][..cg * ivol];
            let wg = &ws[gi * cg * mg * kvol..][..cg * mg * kvol];
            // cols[(m, k), i] = sum_c W[c, (m, k)] * x[c, i]
            T::gemm(
                mg * kvol,
                cg,
                ivol,
                T::one(),
                MatRef {
                    data: wg,
                    rs: 1,
                    cs: mg * kvol,
                },
                MatRef {
                    data: xg,
                    rs: ivol,
                    cs: 1,
                },
                T::zero(),
                &mut cols,
            )?;
            for mm in 0..mg {
                let dst = &mut out[(ni * m + gi * mg + mm) * ovol..][..ovol];
                for a in 0..kd {
                    for b in 0..kh {
                        for e in 0..kw {
                            let row =
                                &cols[((mm * kd + a) * kh + b) * kw * ivol + e * ivol..][..ivol];
                            for z in 0..id {
                                let oz = (z * g.stride[0] + a * g.dilation[0]) as isize
                                    - g.pad_begin[0] as isize;
                                if oz < 0 || oz >= od as isize {
                                    continue;
                                }
                                for y in 0..ih {
                                    let oy = (y * g.stride[1] + b * g.dilation[1]) as isize
                                        - g.pad_begin[1] as isize;
                                    if oy < 0 || oy >= oh as isize {
                                        continue;
                                    }
                                    for xx in 0..iw {
                                        let ox = (xx * g.stride[2] + e * g.dilation[2]) as isize
                                            - g.pad_begin[2] as isize;
                                        if ox < 0 || ox >= ow as isize {
                                            continue;
                                        }
                                        let o = (oz as usize * oh + oy as usize) * ow + ox as usize;
                                        dst[o] = dst[o].add(row[(z * ih + y) * iw + xx]);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(bias) = bias {
        let bv: Vec<T> = bias.iter().copied().collect();
        if bv.len() != m {
            return Err(RefError::op(format!(
                "bias has {} values for {m} output channels",
                bv.len()
            )));
        }
        for (i, chunk) in out.chunks_mut(ovol.max(1)).enumerate() {
            for v in chunk {
                *v = v.add(bv[i % m]);
            }
        }
    }
    array_from_vec(&out_shape, out)
}

fn conv_transpose(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let w = ctx.input(inputs, 1)?;
    let bias = ctx.opt_input(inputs, 2)?;
    same_dtype(ctx, &[x, w])?;
    if x.rank() < 3 || w.rank() != x.rank() {
        return Err(ctx.err(format!(
            "X {:?} and W {:?} must have the same rank >= 3",
            x.shape(),
            w.shape()
        )));
    }
    let group = ctx.attr_int("group", 1)?;
    if group <= 0 || x.shape()[1] % group as usize != 0 || w.shape()[0] != x.shape()[1] {
        return Err(ctx.err(format!(
            "group {group} does not fit X {:?} and W {:?}",
            x.shape(),
            w.shape()
        )));
    }
    // kernel_shape, when given, must be W's spatial dims (as for Conv; onnxruntime refuses
    // the node otherwise, and shape inference would read the attribute).
    if let Some(k) = ctx.attr_ints("kernel_shape").filter(|k| !k.is_empty()) {
        if to_dims(k)? != w.shape()[2..] {
            return Err(ctx.err(format!(
                "kernel_shape {k:?} does not match W {:?}",
                w.shape()
            )));
        }
    }
    let g = geometry(ctx, &x.shape()[2..], &w.shape()[2..])?;
    let group = group as usize;
    let out = match x {
        Tensor::F32(a) => Tensor::F32(conv_transpose_of(
            a,
            typed(w)?,
            bias.map(typed).transpose()?,
            &g,
            group,
        )?),
        Tensor::F64(a) => Tensor::F64(conv_transpose_of(
            a,
            typed(w)?,
            bias.map(typed).transpose()?,
            &g,
            group,
        )?),
        Tensor::F16(a) => Tensor::F16(conv_transpose_of(
            a,
            typed(w)?,
            bias.map(typed).transpose()?,
            &g,
            group,
        )?),
        Tensor::BF16(a) => Tensor::BF16(conv_transpose_of(
            a,
            typed(w)?,
            bias.map(typed).transpose()?,
            &g,
            group,
        )?),
        other => return Err(unsupported(ctx, other)),
    };
    one(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{node, t};
    use crate::eval::eval_node;

    /// A kernel_shape that is not W's spatial dims is refused, not ignored (found by the
    /// optimizer fuzzer: shape inference reads the attribute, so a folded Shape disagreed).
    #[test]
    fn a_kernel_shape_other_than_ws_is_an_error() {
        let ints = |v: &[i64]| onnx_proto::AttributeProto {
            name: Some("kernel_shape".into()),
            ints: v.to_vec(),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Ints as i32),
            ..Default::default()
        };
        let inputs = [t(&[1, 1, 3], vec![1.0, 2.0, 3.0]), t(&[1, 1, 1], vec![2.0])];
        let bad = node("ConvTranspose", &["x", "w"], vec![ints(&[2])]);
        let e = eval_node(&bad, 11, &inputs).unwrap_err().to_string();
        assert!(
            e.contains("kernel_shape [2] does not match W [1, 1, 1]"),
            "{e}"
        );
        let good = node("ConvTranspose", &["x", "w"], vec![ints(&[1])]);
        let y = eval_node(&good, 11, &inputs).unwrap().remove(0);
        let y = y.into_tensor().unwrap();
        assert_eq!(y.shape(), &[1, 1, 3]);
        assert_eq!(y.to_f64_vec().unwrap(), vec![2.0, 4.0, 6.0]);
    }
}
