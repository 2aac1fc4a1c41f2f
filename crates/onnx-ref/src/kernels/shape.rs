//! Shape and layout operators: Shape, Size, Reshape, Flatten, Transpose, Unsqueeze, Squeeze,
//! Concat, Split, Expand, Tile, Identity, Constant, ConstantOfShape, Range, Dropout,
//! DepthToSpace, SpaceToDepth, EyeLike, Trilu.

use ndarray::{Axis, IxDyn};

use super::{
    broadcast_shapes, broadcast_view, norm_axes, norm_axis, one, same_dtype, to_dims, typed,
    unsupported,
};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, map_all, map_numeric, Array, Elem, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "Shape", 1, LATEST, shape);
    reg.register("", "Size", 1, LATEST, size);
    reg.register("", "Reshape", 1, LATEST, reshape);
    reg.register("", "Flatten", 1, LATEST, flatten);
    reg.register("", "Transpose", 1, LATEST, transpose);
    reg.register("", "Unsqueeze", 1, LATEST, unsqueeze);
    reg.register("", "Squeeze", 1, LATEST, squeeze);
    reg.register("", "Concat", 1, LATEST, concat);
    reg.register("", "Split", 1, LATEST, split);
    reg.register("", "Expand", 8, LATEST, expand);
    reg.register("", "Tile", 1, LATEST, tile);
    reg.register("", "Identity", 1, LATEST, identity);
    reg.register("", "Constant", 1, LATEST, constant);
    reg.register("", "ConstantOfShape", 9, LATEST, constant_of_shape);
    reg.register("", "Range", 11, LATEST, range);
    reg.register("", "Dropout", 1, LATEST, dropout);
    reg.register("", "DepthToSpace", 1, LATEST, depth_to_space);
    reg.register("", "SpaceToDepth", 1, LATEST, space_to_depth);
    reg.register("", "EyeLike", 9, LATEST, eye_like);
    reg.register("", "Trilu", 14, LATEST, trilu);
}

fn int_input(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize) -> Result<Vec<i64>> {
    ctx.input(inputs, i)?
        .to_i64_vec()
        .map_err(|e| e.in_node(&ctx.node_ref()))
}

fn opt_int_input(ctx: &KernelCtx, inputs: &[Option<&Value>], i: usize) -> Result<Option<Vec<i64>>> {
    match ctx.opt_input(inputs, i)? {
        Some(t) => Ok(Some(
            t.to_i64_vec().map_err(|e| e.in_node(&ctx.node_ref()))?,
        )),
        None => Ok(None),
    }
}

fn i64_tensor(v: Vec<i64>) -> Result<Tensor> {
    Tensor::from_vec(&[v.len()], v)
}

fn shape(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let dims: Vec<i64> = t.shape().iter().map(|&d| d as i64).collect();
    let rank = dims.len() as i64;
    let clamp = |v: i64| {
        if v < 0 {
            (v + rank).max(0)
        } else {
            v.min(rank)
        }
    };
    let start = clamp(ctx.attr_int("start", 0)?) as usize;
    let end = clamp(ctx.attr_int("end", rank)?) as usize;
    let part = if start < end {
        dims[start..end].to_vec()
    } else {
        Vec::new()
    };
    one(i64_tensor(part)?)
}

fn size(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    one(Tensor::scalar(t.len() as i64))
}

/// The output shape of Reshape: `0` copies the input dim (unless `allowzero`), `-1` infers.
fn reshape_target(input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 => {
                if infer.replace(i).is_some() {
                    return Err(RefError::op(format!("shape {spec:?} has more than one -1")));
                }
                out.push(1);
            }
            0 if !allowzero => out.push(*input.get(i).ok_or_else(|| {
                RefError::op(format!(
                    "shape {spec:?} copies dim {i} of rank-{} input",
                    input.len()
                ))
            })?),
            d if d < 0 => {
                return Err(RefError::op(format!(
                    "invalid dimension {d} in shape {spec:?}"
                )))
            }
            d => out.push(d as usize),
        }
    }
    let total: usize = input.iter().product();
    if let Some(i) = infer {
        let known: usize = out
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, d)| *d)
            .product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(RefError::op(format!(
                "cannot infer -1 in {spec:?} for input shape {input:?}"
            )));
        }
        out[i] = total / known;
    }
    Ok(out)
}

fn reshape(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let spec = if ctx.opset < 5 {
        ctx.attr_ints("shape")
            .map(<[i64]>::to_vec)
            .unwrap_or_default()
    } else {
        int_input(ctx, inputs, 1)?
    };
    let allowzero = match ctx.attr_int("allowzero", 0)? {
        0 => false,
        1 => true,
        a => return Err(ctx.err(format!("allowzero must be 0 or 1, not {a}"))),
    };
    let target = reshape_target(t.shape(), &spec, allowzero)?;
    one(t.reshaped(&target)?)
}

fn flatten(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let rank = t.rank();
    let axis = ctx.attr_int("axis", 1)?;
    let axis = if axis == rank as i64 {
        rank
    } else {
        norm_axis(axis, rank.max(1))?
    };
    let outer: usize = t.shape()[..axis].iter().product();
    let inner: usize = t.shape()[axis..].iter().product();
    one(t.reshaped(&[outer, inner])?)
}

pub(crate) use super::permute::permute;

fn transpose(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let rank = t.rank();
    let perm: Vec<usize> = match ctx.attr_ints("perm") {
        Some(p) => {
            let p = norm_axes(p, rank)?;
            if p.len() != rank {
                return Err(ctx.err(format!("perm {p:?} does not match rank {rank}")));
            }
            p
        }
        None => (0..rank).rev().collect(),
    };
    one(map_all!(t, a => permute(a, &perm)))
}

fn axes_input(
    ctx: &KernelCtx,
    inputs: &[Option<&Value>],
    since_input: i64,
) -> Result<Option<Vec<i64>>> {
    if ctx.opset < since_input {
        Ok(ctx.attr_ints("axes").map(<[i64]>::to_vec))
    } else {
        opt_int_input(ctx, inputs, 1)
    }
}

fn unsqueeze(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let axes = axes_input(ctx, inputs, 13)?.ok_or_else(|| ctx.err("axes are required"))?;
    let out_rank = t.rank() + axes.len();
    let mut axes = norm_axes(&axes, out_rank)?;
    axes.sort_unstable();
    let mut shape = Vec::with_capacity(out_rank);
    let mut src = t.shape().iter();
    for i in 0..out_rank {
        if axes.contains(&i) {
            shape.push(1);
        } else {
            shape.push(
                *src.next()
                    .ok_or_else(|| ctx.err("axes do not fit the input rank"))?,
            );
        }
    }
    one(t.reshaped(&shape)?)
}

fn squeeze(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let axes = axes_input(ctx, inputs, 13)?;
    let shape: Vec<usize> = match axes {
        Some(axes) if !axes.is_empty() => {
            let axes = norm_axes(&axes, t.rank())?;
            for &a in &axes {
                if t.shape()[a] != 1 {
                    return Err(
                        ctx.err(format!("cannot squeeze axis {a} of size {}", t.shape()[a]))
                    );
                }
            }
            t.shape()
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| *d)
                .collect()
        }
        _ => t.shape().iter().copied().filter(|&d| d != 1).collect(),
    };
    one(t.reshaped(&shape)?)
}

fn concat(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let ts: Vec<&Tensor> = inputs
        .iter()
        .flatten()
        .map(|v| v.as_tensor())
        .collect::<Result<_>>()?;
    let first = ts
        .first()
        .ok_or_else(|| ctx.err("needs at least one input"))?;
    same_dtype(ctx, &ts)?;
    let axis = norm_axis(ctx.attr_int("axis", 1)?, first.rank())?;
    if let Some(t) = ts.iter().find(|t| t.rank() != first.rank()) {
        return Err(ctx.err(format!(
            "inputs of shapes {:?} and {:?} differ in rank",
            first.shape(),
            t.shape()
        )));
    }
    fn cat<T: Elem>(ts: &[&Tensor], axis: usize) -> Result<Array<T>> {
        let views: Vec<_> = ts
            .iter()
            .map(|t| typed::<T>(t).map(|a| a.view()))
            .collect::<Result<_>>()?;
        ndarray::concatenate(Axis(axis), &views)
            .map(|a| a.into_shared())
            .map_err(|e| RefError::op(format!("cannot concatenate: {e}")))
    }
    one(map_all!(*first, _a => cat(&ts, axis)?))
}

fn split(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let axis = norm_axis(ctx.attr_int("axis", 0)?, t.rank())?;
    let dim = t.shape()[axis];
    let n_out = ctx.num_outputs();
    let sizes: Vec<usize> = {
        let given = if ctx.opset >= 13 || (ctx.opset < 2 && inputs.len() > 1) {
            opt_int_input(ctx, inputs, 1)?
        } else {
            ctx.attr_ints("split").map(<[i64]>::to_vec)
        };
        match given {
            Some(s) if !s.is_empty() => to_dims(&s)?,
            _ => {
                let parts = ctx
                    .attr_opt_int("num_outputs")?
                    .map_or(n_out, |n| n as usize);
                if parts == 0 {
                    return Err(ctx.err("no outputs to split into"));
                }
                if ctx.opset >= 18 {
                    let chunk = dim.div_ceil(parts);
                    (0..parts)
                        .map(|i| chunk.min(dim.saturating_sub(i * chunk)))
                        .collect()
                } else {
                    if dim % parts != 0 {
                        return Err(ctx.err(format!(
                            "dimension {dim} does not split evenly into {parts}"
                        )));
                    }
                    vec![dim / parts; parts]
                }
            }
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(ctx.err(format!(
            "split sizes {sizes:?} do not sum to dimension {dim}"
        )));
    }
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        let part = map_all!(t, a => {
            let mut v = a.clone();
            v.slice_axis_inplace(Axis(axis), ndarray::Slice::from(start..start + s));
            v
        });
        out.push(Value::Tensor(part));
        start += s;
    }
    Ok(out)
}

fn expand(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let target = to_dims(&int_input(ctx, inputs, 1)?)?;
    let shape = broadcast_shapes(t.shape(), &target)?;
    check_size("Expand result", &shape)?;
    one(map_all!(t, a => broadcast_view(a, &shape)?.to_owned().into_shared()))
}

fn tile(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let repeats = to_dims(&int_input(ctx, inputs, 1)?)?;
    if repeats.len() != t.rank() {
        return Err(ctx.err(format!(
            "repeats {repeats:?} do not match rank {}",
            t.rank()
        )));
    }
    let out_shape: Vec<usize> = t.shape().iter().zip(&repeats).map(|(d, r)| d * r).collect();
    check_size("Tile result", &out_shape)?;
    fn tile_of<T: Clone>(a: &Array<T>, repeats: &[usize]) -> Result<Array<T>> {
        let mut cur = a.clone();
        for (axis, &r) in repeats.iter().enumerate() {
            if r != 1 {
                let views: Vec<_> = (0..r).map(|_| cur.view()).collect();
                cur = if r == 0 {
                    let mut shape = cur.shape().to_vec();
                    shape[axis] = 0;
                    array_from_vec(&shape, Vec::new())?
                } else {
                    ndarray::concatenate(Axis(axis), &views)
                        .map_err(|e| RefError::op(format!("cannot tile: {e}")))?
                        .into_shared()
                };
            }
        }
        Ok(cur)
    }
    one(map_all!(t, a => tile_of(a, &repeats)?))
}

fn identity(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let v = inputs
        .first()
        .copied()
        .flatten()
        .ok_or_else(|| ctx.err("required input 0 is missing"))?;
    Ok(vec![v.clone()])
}

fn constant(ctx: &KernelCtx, _inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    if let Some(t) = ctx.attr_tensor("value")? {
        return one(t);
    }
    if let Some(v) = ctx.attr_opt_float("value_float")? {
        return one(Tensor::scalar(v));
    }
    if let Some(v) = ctx.attr_floats("value_floats") {
        return one(Tensor::from_vec(&[v.len()], v.to_vec())?);
    }
    if let Some(v) = ctx.attr_opt_int("value_int")? {
        return one(Tensor::scalar(v));
    }
    if let Some(v) = ctx.attr_ints("value_ints") {
        return one(i64_tensor(v.to_vec())?);
    }
    if let Some(v) = ctx.attr_opt_string("value_string")? {
        return one(Tensor::scalar(v));
    }
    if let Some(v) = ctx.attr_strings("value_strings") {
        return one(Tensor::from_vec(&[v.len()], v)?);
    }
    if ctx.attr("sparse_value").is_some() {
        return Err(ctx.err("sparse_value constants are not supported yet"));
    }
    Err(ctx.err("no value attribute"))
}

fn constant_of_shape(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let shape = to_dims(&int_input(ctx, inputs, 0)?)?;
    check_size("ConstantOfShape result", &shape)?;
    let value = ctx
        .attr_tensor("value")?
        .unwrap_or_else(|| Tensor::scalar(0f32));
    if value.len() != 1 {
        return Err(ctx.err(format!("value must have one element, has {}", value.len())));
    }
    fn fill<T: Clone>(a: &Array<T>, shape: &[usize]) -> Result<Array<T>> {
        let v = a
            .iter()
            .next()
            .cloned()
            .ok_or_else(|| RefError::op("empty value"))?;
        Ok(Array::from_elem(IxDyn(shape), v))
    }
    one(map_all!(&value, a => fill(a, &shape)?))
}

fn range(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let start = ctx.input(inputs, 0)?;
    let limit = ctx.input(inputs, 1)?;
    let delta = ctx.input(inputs, 2)?;
    same_dtype(ctx, &[start, limit, delta])?;
    fn range_of<T: Num>(s: &Tensor, l: &Tensor, d: &Tensor) -> Result<Array<T>> {
        let get = |t: &Tensor| -> Result<T> {
            typed::<T>(t)?
                .iter()
                .next()
                .copied()
                .ok_or_else(|| RefError::op("start, limit and delta must be scalars"))
        };
        let (s, l, d) = (get(s)?, get(l)?, get(d)?);
        if d == T::zero() {
            return Err(RefError::op("delta must not be zero"));
        }
        let n = ((l.to_f64() - s.to_f64()) / d.to_f64()).ceil().max(0.0);
        if n > crate::tensor::element_limit() as f64 || n.is_nan() {
            return Err(RefError::op(format!("Range would produce {n} elements")));
        }
        let n = n as usize;
        let mut v = Vec::with_capacity(n);
        let mut x = s;
        for _ in 0..n {
            v.push(x);
            x = x.add(d);
        }
        array_from_vec(&[n], v)
    }
    one(
        map_numeric!(start, _a => range_of(start, limit, delta)?, other => return Err(unsupported(ctx, other))),
    )
}

fn dropout(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    if ctx.opset >= 12 {
        let training = match ctx.opt_input(inputs, 2)? {
            Some(tm) => {
                tm.to_i64_vec()
                    .map_err(|e| e.in_node(&ctx.node_ref()))?
                    .first()
                    .copied()
                    .unwrap_or(0)
                    != 0
            }
            None => false,
        };
        let ratio = match ctx.opt_input(inputs, 1)? {
            Some(r) => r
                .to_f64_vec()
                .map_err(|e| e.in_node(&ctx.node_ref()))?
                .first()
                .copied()
                .unwrap_or(0.5),
            None => 0.5,
        };
        if training && ratio != 0.0 {
            return Err(ctx.err(
                "training-mode Dropout is random; the reference interpreter only runs inference",
            ));
        }
    } else if ctx.opset < 7
        && ctx.attr_int("is_test", 0)? == 0
        && ctx.attr_float("ratio", 0.5)? != 0.0
        && ctx.wants_output(1)
    {
        return Err(ctx.err("training-mode Dropout (is_test = 0) is random; the reference interpreter only runs inference"));
    }
    let mut out = vec![Value::Tensor(t.clone())];
    if ctx.wants_output(1) {
        let mask = if ctx.opset >= 10 {
            Tensor::Bool(Array::from_elem(IxDyn(t.shape()), true))
        } else {
            crate::kernels::cast_tensor(
                &Tensor::Bool(Array::from_elem(IxDyn(t.shape()), true)),
                t.dtype(),
            )?
        };
        out.push(Value::Tensor(mask));
    }
    Ok(out)
}

fn depth_to_space(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let b = ctx.attr_int("blocksize", 0)?;
    let s = t.shape();
    if t.rank() != 4 || b <= 0 || b > 1 << 16 || s[1] % (b * b) as usize != 0 {
        return Err(ctx.err(format!(
            "needs a 4-D input with C divisible by blocksize^2, got {s:?} and {b}"
        )));
    }
    let b = b as usize;
    let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
    let crd = ctx.attr_string("mode", "DCR")? == "CRD";
    let (tmp, perm) = if crd {
        (vec![n, c / (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3])
    } else {
        (vec![n, b, b, c / (b * b), h, w], [0, 3, 4, 1, 5, 2])
    };
    let r = t.reshaped(&tmp)?;
    let p = map_all!(&r, a => permute(a, &perm));
    one(p.reshaped(&[n, c / (b * b), h * b, w * b])?)
}

fn space_to_depth(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    let b = ctx.attr_int("blocksize", 0)?;
    let s = t.shape();
    if t.rank() != 4 || b <= 0 || b > 1 << 16 || s[2] % b as usize != 0 || s[3] % b as usize != 0 {
        return Err(ctx.err(format!(
            "needs a 4-D input with H and W divisible by blocksize, got {s:?} and {b}"
        )));
    }
    let b = b as usize;
    let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
    let r = t.reshaped(&[n, c, h / b, b, w / b, b])?;
    let perm = if ctx.attr_string("mode", "DCR")? == "CRD" {
        [0, 1, 3, 5, 2, 4]
    } else {
        [0, 3, 5, 1, 2, 4]
    };
    let p = map_all!(&r, a => permute(a, &perm));
    one(p.reshaped(&[n, c * b * b, h / b, w / b])?)
}

fn eye_like(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    if t.rank() != 2 {
        return Err(ctx.err(format!("input must be 2-D, got {:?}", t.shape())));
    }
    let k = ctx.attr_int("k", 0)?;
    let dtype = match ctx.attr_opt_int("dtype")? {
        Some(c) => {
            DType::from_code(c as i32).ok_or_else(|| ctx.err(format!("unknown dtype {c}")))?
        }
        None => t.dtype(),
    };
    let (rows, cols) = (t.shape()[0], t.shape()[1]);
    let mut v = vec![0f64; rows * cols];
    for r in 0..rows {
        let c = r as i64 + k;
        if c >= 0 && (c as usize) < cols {
            v[r * cols + c as usize] = 1.0;
        }
    }
    let f = Tensor::from_vec(&[rows, cols], v)?;
    one(crate::kernels::cast_tensor(&f, dtype)?)
}

fn trilu(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let t = ctx.input(inputs, 0)?;
    if t.rank() < 2 {
        return Err(ctx.err("input must have rank >= 2"));
    }
    let k = match ctx.opt_input(inputs, 1)? {
        Some(k) => k
            .to_i64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?
            .first()
            .copied()
            .unwrap_or(0),
        None => 0,
    };
    let upper = ctx.attr_int("upper", 1)? == 1;
    fn tri<T: Elem>(a: &Array<T>, k: i64, upper: bool) -> Array<T> {
        let mut out = a.to_owned();
        let rank = out.ndim();
        for (idx, v) in out.indexed_iter_mut() {
            let (r, c) = (idx[rank - 2] as i64, idx[rank - 1] as i64);
            let keep = if upper { c - r >= k } else { c - r <= k };
            if !keep {
                *v = T::default();
            }
        }
        out.into_shared()
    }
    one(map_all!(t, a => tri(a, k, upper)))
}

#[cfg(test)]
mod tests {
    use crate::kernels::test_util::{int_attr, node, run, t};

    #[test]
    fn concat_of_inputs_of_different_ranks_is_an_error() {
        let n = node("Concat", &["a", "b"], vec![int_attr("axis", -1)]);
        let a = t(&[1, 2, 2], vec![1.0f32; 4]);
        let b = t(&[2, 2], vec![2.0f32; 4]);
        let err = run(&n, 13, &[a.clone(), b.clone()]).unwrap_err();
        assert!(err.to_string().contains("differ in rank"), "{err}");
        let err = run(&n, 13, &[b, a]).unwrap_err();
        assert!(err.to_string().contains("differ in rank"), "{err}");
        let ok = run(
            &n,
            13,
            &[t(&[2, 1], vec![1.0f32, 2.0]), t(&[2, 2], vec![3.0f32; 4])],
        )
        .unwrap();
        assert_eq!(ok.shape(), &[2, 3]);
    }
}
