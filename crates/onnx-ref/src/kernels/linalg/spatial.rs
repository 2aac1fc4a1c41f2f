//! Spatial scatter kernels: MaxUnpool (indices into the inferred unpooled tensor, then placed
//! in the corner of `output_shape` as the ONNX reference does) and Col2Im (any number of
//! spatial dims, overlapping blocks summed).

use super::super::{one, to_dims, unsupported};
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, map_float, map_numeric, Array};
use crate::value::Value;

pub(super) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "MaxUnpool", 9, LATEST, max_unpool);
    reg.register("", "Col2Im", 18, LATEST, col2im);
}

/// An ints attribute with one value per spatial dim, or `fill` repeated when absent.
fn per_dim(ctx: &KernelCtx, name: &str, n: usize, fill: i64) -> Result<Vec<usize>> {
    match ctx.attr_ints(name) {
        Some(v) if !v.is_empty() => {
            if v.len() != n {
                return Err(ctx.err(format!("{name} {v:?} must have {n} values")));
            }
            to_dims(v).map_err(|e| e.in_node(&ctx.node_ref()))
        }
        _ => Ok(vec![fill as usize; n]),
    }
}

fn max_unpool_of<T: Num>(
    x: &Array<T>,
    idx: &[i64],
    inferred: &[usize],
    out_shape: &[usize],
) -> Result<Array<T>> {
    let total = check_size("MaxUnpool result", inferred)?;
    check_size("MaxUnpool result", out_shape)?;
    if idx.len() != x.len() {
        return Err(RefError::op(format!(
            "I has {} values but X has {}",
            idx.len(),
            x.len()
        )));
    }
    let mut y = vec![T::zero(); total];
    for (&i, v) in idx.iter().zip(x.iter()) {
        let slot = usize::try_from(i)
            .ok()
            .and_then(|i| y.get_mut(i))
            .ok_or_else(|| {
                RefError::op(format!(
                    "index {i} is outside the output of {total} elements"
                ))
            })?;
        *slot = *v;
    }
    if inferred == out_shape {
        return array_from_vec(out_shape, y);
    }
    let src = array_from_vec(inferred, y)?;
    let mut out = ndarray::ArrayD::from_elem(ndarray::IxDyn(out_shape), T::zero());
    let common: Vec<usize> = inferred
        .iter()
        .zip(out_shape)
        .map(|(a, b)| *a.min(b))
        .collect();
    let sl = |ax: ndarray::AxisDescription| ndarray::Slice::from(0..common[ax.axis.index()]);
    out.slice_each_axis_mut(sl).assign(&src.slice_each_axis(sl));
    Ok(out.into_shared())
}

fn max_unpool(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let indices = ctx.input(inputs, 1)?;
    if x.rank() < 3 {
        return Err(ctx.err(format!("X must have rank >= 3, got {:?}", x.shape())));
    }
    if indices.shape() != x.shape() {
        return Err(ctx.err(format!(
            "I {:?} must have the shape of X {:?}",
            indices.shape(),
            x.shape()
        )));
    }
    let n = x.rank() - 2;
    let kernel = to_dims(
        ctx.attr_ints("kernel_shape")
            .ok_or_else(|| ctx.err("kernel_shape is required"))?,
    )
    .map_err(|e| e.in_node(&ctx.node_ref()))?;
    if kernel.len() != n {
        return Err(ctx.err(format!("kernel_shape {kernel:?} must have {n} values")));
    }
    let strides = per_dim(ctx, "strides", n, 1)?;
    let pads = per_dim(ctx, "pads", 2 * n, 0)?;
    let mut inferred = x.shape()[..2].to_vec();
    for d in 0..n {
        let full = (x.shape()[d + 2].saturating_sub(1)) * strides[d] + kernel[d];
        let size = full.checked_sub(pads[d] + pads[d + n]).ok_or_else(|| {
            ctx.err(format!(
                "pads {pads:?} exceed the unpooled extent {full} of dim {d}"
            ))
        })?;
        inferred.push(size);
    }
    let out_shape = match ctx.opt_input(inputs, 2)? {
        Some(t) => {
            let s = to_dims(&t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?)
                .map_err(|e| e.in_node(&ctx.node_ref()))?;
            if s.len() != x.rank() {
                return Err(ctx.err(format!("output_shape {s:?} must have rank {}", x.rank())));
            }
            s
        }
        None => inferred.clone(),
    };
    let idx = indices
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))?;
    one(
        map_float!(x, a => max_unpool_of(a, &idx, &inferred, &out_shape)
        .map_err(|e| e.in_node(&ctx.node_ref()))?, other => return Err(unsupported(ctx, other))),
    )
}

/// The geometry of Col2Im: per spatial dim the image size, block size, dilation, stride,
/// leading pad, and number of block positions.
struct BlockGeometry {
    image: Vec<usize>,
    block: Vec<usize>,
    dilation: Vec<usize>,
    stride: Vec<usize>,
    pad_begin: Vec<usize>,
    positions: Vec<usize>,
}

/// Row-major multi-index successor; false after the last index.
fn next_index(idx: &mut [usize], dims: &[usize]) -> bool {
    for d in (0..dims.len()).rev() {
        idx[d] += 1;
        if idx[d] < dims[d] {
            return true;
        }
        idx[d] = 0;
    }
    false
}

fn col2im_of<T: Num>(x: &Array<T>, g: &BlockGeometry, n: usize, c: usize) -> Result<Array<T>> {
    let bvol: usize = g.block.iter().product();
    let lvol: usize = g.positions.iter().product();
    let ivol: usize = g.image.iter().product();
    let mut shape = vec![n, c];
    shape.extend_from_slice(&g.image);
    check_size("Col2Im result", &shape)?;
    let std = x.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let mut out = vec![T::zero(); n * c * ivol];
    let dims = g.image.len();
    if bvol == 0 || lvol == 0 {
        return array_from_vec(&shape, out);
    }
    for plane in 0..n * c {
        let (ni, ci) = (plane / c, plane % c);
        let dst = &mut out[plane * ivol..][..ivol];
        let mut kidx = vec![0usize; dims];
        for k in 0..bvol {
            let src = &xs[(ni * c * bvol + ci * bvol + k) * lvol..][..lvol];
            let mut lidx = vec![0usize; dims];
            for v in src {
                // Flat image offset of this block position and tap, if inside the image.
                let mut off = 0usize;
                let mut inside = true;
                for d in 0..dims {
                    let coord = (lidx[d] * g.stride[d] + kidx[d] * g.dilation[d]) as isize
                        - g.pad_begin[d] as isize;
                    if coord < 0 || coord >= g.image[d] as isize {
                        inside = false;
                        break;
                    }
                    off = off * g.image[d] + coord as usize;
                }
                if inside {
                    dst[off] = dst[off].add(*v);
                }
                next_index(&mut lidx, &g.positions);
            }
            next_index(&mut kidx, &g.block);
        }
    }
    array_from_vec(&shape, out)
}

fn col2im(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let in_err = |e: RefError| e.in_node(&ctx.node_ref());
    let image = to_dims(&ctx.input(inputs, 1)?.to_i64_vec().map_err(in_err)?).map_err(in_err)?;
    let block = to_dims(&ctx.input(inputs, 2)?.to_i64_vec().map_err(in_err)?).map_err(in_err)?;
    let dims = image.len();
    if block.len() != dims || dims == 0 {
        return Err(ctx.err(format!(
            "image_shape {image:?} and block_shape {block:?} must have the same positive length"
        )));
    }
    let [n, cb, l] = *x.shape() else {
        return Err(ctx.err(format!("input must have rank 3, got {:?}", x.shape())));
    };
    let bvol: usize = block.iter().product();
    if bvol == 0 || cb % bvol != 0 {
        return Err(ctx.err(format!(
            "input dim 1 ({cb}) is not a multiple of the block volume {bvol}"
        )));
    }
    let dilation = per_dim(ctx, "dilations", dims, 1)?;
    let stride = per_dim(ctx, "strides", dims, 1)?;
    let pads = per_dim(ctx, "pads", 2 * dims, 0)?;
    if dilation.contains(&0) || stride.contains(&0) {
        return Err(ctx.err("dilations and strides must be positive"));
    }
    let mut positions = Vec::with_capacity(dims);
    for d in 0..dims {
        let span = image[d] + pads[d] + pads[d + dims];
        let eff = dilation[d] * (block[d] - 1) + 1;
        let p = span
            .checked_sub(eff)
            .map(|r| r / stride[d] + 1)
            .ok_or_else(|| ctx.err(format!("block {eff} is larger than padded image {span}")))?;
        positions.push(p);
    }
    let lvol: usize = positions.iter().product();
    if lvol != l {
        return Err(ctx.err(format!(
            "input has {l} blocks but the geometry gives {positions:?} = {lvol}"
        )));
    }
    let g = BlockGeometry {
        image,
        block,
        dilation,
        stride,
        pad_begin: pads[..dims].to_vec(),
        positions,
    };
    one(
        map_numeric!(x, a => col2im_of(a, &g, n, cb / bvol).map_err(in_err)?,
        other => return Err(unsupported(ctx, other))),
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::{eval, ints_attr, node};
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn max_unpool_scatters_and_checks_indices() -> Result<()> {
        let x = Tensor::from_vec(&[1, 1, 1, 2], vec![3f32, 4.])?;
        let i = Tensor::from_vec(&[1, 1, 1, 2], vec![1i64, 2])?;
        let n = node("MaxUnpool", 2, 1, vec![ints_attr("kernel_shape", &[1, 2])]);
        let y = eval(&n, 11, vec![x.clone(), i])?;
        assert_eq!(y[0], Tensor::from_vec(&[1, 1, 1, 3], vec![0f32, 3., 4.])?);
        let bad = Tensor::from_vec(&[1, 1, 1, 2], vec![1i64, 3])?;
        assert!(eval(&n, 11, vec![x.clone(), bad]).is_err());
        let empty = Tensor::from_vec(&[1, 0, 1, 2], Vec::<f32>::new())?;
        let empty_i = Tensor::from_vec(&[1, 0, 1, 2], Vec::<i64>::new())?;
        assert_eq!(
            eval(&n, 11, vec![empty, empty_i])?[0].shape(),
            &[1, 0, 1, 3]
        );
        Ok(())
    }

    #[test]
    fn col2im_sums_overlaps_and_rejects_bad_geometry() -> Result<()> {
        // One channel, 1-D image of 3 from blocks of 2 at stride 1: positions 0 and 1.
        let x = Tensor::from_vec(&[1, 2, 2], vec![1i32, 2, 10, 20])?;
        let image = Tensor::from_vec(&[1], vec![3i64])?;
        let block = Tensor::from_vec(&[1], vec![2i64])?;
        let n = node("Col2Im", 3, 1, vec![]);
        let y = eval(&n, 18, vec![x.clone(), image, block.clone()])?;
        assert_eq!(y[0], Tensor::from_vec(&[1, 1, 3], vec![1i32, 12, 20])?);
        let wrong = Tensor::from_vec(&[1], vec![5i64])?;
        assert!(eval(&n, 18, vec![x, wrong, block]).is_err());
        Ok(())
    }
}
