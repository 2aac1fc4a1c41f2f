//! Grid sampling: GridSample (opsets 16-19: 4-D input, modes bilinear/nearest/bicubic;
//! opset 20 on: any spatial rank, modes linear/nearest/cubic; paddings zeros/border/
//! reflection; align_corners) and AffineGrid (opset 20: 2-D and 3-D sampling grids).
//!
//! GridSample follows the ONNX reference (itself PyTorch's `grid_sampler`): each output point
//! maps to a set of input taps with weights (one per dimension, combined as a tensor product),
//! computed once per batch item and applied to every channel. Weighted modes compute in f64;
//! nearest copies the element, so it serves every element type.

use super::{one, to_dims, unsupported};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, map_numeric, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "GridSample", 16, 19, grid_sample_16);
    reg.register("", "GridSample", 20, LATEST, grid_sample_20);
    reg.register("", "AffineGrid", 20, LATEST, affine_grid);
}

/// How values between input pixels are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interpolation {
    Nearest,
    Linear,
    Cubic,
}

/// What an out-of-range tap reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// One spatial dimension of the input: its size and the coordinate range that counts as
/// inside (`[-0.5, len - 0.5]`, or `[0, len - 1]` with align_corners).
#[derive(Debug, Clone, Copy)]
struct Axis {
    len: usize,
    min: f64,
    max: f64,
}

/// The sampling settings shared by every output point.
#[derive(Debug, Clone)]
struct Sampler {
    axes: Vec<Axis>,
    mode: Interpolation,
    padding: Padding,
    align_corners: bool,
    /// Round denormalized coordinates to f32, as the reference does for float/half grids.
    coords_f32: bool,
}

/// Per output point, the flat input positions (within one channel plane) and their weights.
#[derive(Debug, Default)]
struct TapTable {
    offsets: Vec<usize>,
    taps: Vec<(usize, f64)>,
}

impl TapTable {
    fn point(&self, p: usize) -> &[(usize, f64)] {
        match (self.offsets.get(p), self.offsets.get(p + 1)) {
            (Some(&a), Some(&b)) => self.taps.get(a..b).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// Reflects `x` into `[min, max]` by bouncing off the nearer border.
fn reflect(x: f64, min: f64, max: f64) -> f64 {
    let range = max - min;
    if range <= 0.0 || !range.is_finite() {
        return min;
    }
    if x < min {
        let dx = min - x;
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n % 2.0 == 0.0 {
            min + r
        } else {
            max - r
        }
    } else if x > max {
        let dx = x - max;
        let n = (dx / range).trunc();
        let r = dx - n * range;
        if n % 2.0 == 0.0 {
            max - r
        } else {
            min + r
        }
    } else {
        x
    }
}

/// Keys' cubic convolution weights (alpha = -0.75) for taps at -1, 0, 1, 2 from `floor(x)`,
/// where `t = x - floor(x)`.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

impl Sampler {
    /// The input coordinate of normalized coordinate `n` along `axis`.
    fn denormalize(&self, n: f64, axis: &Axis) -> f64 {
        let len = axis.len as f64;
        let x = if self.align_corners {
            (n + 1.0) / 2.0 * (len - 1.0)
        } else {
            ((n + 1.0) * len - 1.0) / 2.0
        };
        if self.coords_f32 {
            x as f32 as f64
        } else {
            x
        }
    }

    /// The input index an integer tap reads, or `None` for a zero.
    fn pixel(&self, i: f64, axis: &Axis) -> Option<usize> {
        if axis.len == 0 || !i.is_finite() {
            return None;
        }
        let last = axis.len as f64 - 1.0;
        let i = match self.padding {
            Padding::Zeros => i,
            Padding::Border => i.clamp(0.0, last),
            Padding::Reflection => reflect(i, axis.min, axis.max).trunc().clamp(0.0, last),
        };
        (i >= 0.0 && i <= last).then_some(i as usize)
    }

    /// The taps (index or zero, weight) of one dimension for input coordinate `x`.
    fn axis_taps(&self, x: f64, axis: &Axis, out: &mut Vec<(Option<usize>, f64)>) {
        out.clear();
        if x.is_nan() {
            return;
        }
        let mut x = if self.mode == Interpolation::Nearest {
            x.round_ties_even()
        } else {
            x
        };
        if x < axis.min || x > axis.max {
            match self.padding {
                Padding::Zeros => {}
                Padding::Border => x = x.clamp(0.0, (axis.len as f64 - 1.0).max(0.0)),
                Padding::Reflection => x = reflect(x, axis.min, axis.max),
            }
        }
        match self.mode {
            Interpolation::Nearest => out.push((self.pixel(x.trunc(), axis), 1.0)),
            Interpolation::Linear => {
                let x0 = x.floor();
                let t = x - x0;
                out.push((self.pixel(x0, axis), 1.0 - t));
                out.push((self.pixel(x0 + 1.0, axis), t));
            }
            Interpolation::Cubic => {
                let x0 = x.floor();
                let w = cubic_weights(x - x0);
                for (k, wk) in w.into_iter().enumerate() {
                    out.push((self.pixel(x0 + k as f64 - 1.0, axis), wk));
                }
            }
        }
    }

    /// The tap table of every grid point (`coords` holds `axes.len()` normalized coordinates
    /// per point, innermost axis first as in the grid tensor).
    fn tap_table(&self, coords: &[f64]) -> TapTable {
        let rank = self.axes.len();
        let points = coords.len().checked_div(rank).unwrap_or(0);
        let mut table = TapTable {
            offsets: Vec::with_capacity(points + 1),
            taps: Vec::new(),
        };
        table.offsets.push(0);
        let mut per_axis: Vec<Vec<(Option<usize>, f64)>> = vec![Vec::new(); rank];
        let mut strides = vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * self.axes[d + 1].len;
        }
        for point in coords.chunks_exact(rank.max(1)).take(points) {
            for (d, taps) in per_axis.iter_mut().enumerate() {
                // The grid stores coordinates innermost axis first (x, y, z).
                let n = point[rank - 1 - d];
                self.axis_taps(self.denormalize(n, &self.axes[d]), &self.axes[d], taps);
            }
            push_product(&per_axis, &strides, &mut table.taps);
            table.offsets.push(table.taps.len());
        }
        table
    }
}

/// Appends the tensor product of per-axis taps, dropping zero taps (out of range).
fn push_product(
    per_axis: &[Vec<(Option<usize>, f64)>],
    strides: &[usize],
    out: &mut Vec<(usize, f64)>,
) {
    let rank = per_axis.len();
    if per_axis.iter().any(Vec::is_empty) {
        return;
    }
    let mut counter = vec![0usize; rank];
    loop {
        let mut index = Some(0usize);
        let mut weight = 1.0;
        for d in 0..rank {
            let (i, w) = per_axis[d][counter[d]];
            index = match (index, i) {
                (Some(acc), Some(i)) => Some(acc + i * strides[d]),
                _ => None,
            };
            weight *= w;
        }
        if let Some(i) = index {
            out.push((i, weight));
        }
        // Odometer increment, last axis fastest.
        let mut d = rank;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            counter[d] += 1;
            if counter[d] < per_axis[d].len() {
                break;
            }
            counter[d] = 0;
        }
    }
}

/// The geometry of a GridSample call: batch, channels, per-channel plane size, grid points.
struct Layout {
    batch: usize,
    channels: usize,
    plane: usize,
    points: usize,
    out_shape: Vec<usize>,
}

/// Applies per-batch tap tables with f64 weights (linear and cubic modes).
fn sample_weighted<T: Num>(a: &Array<T>, tables: &[TapTable], l: &Layout) -> Result<Array<T>> {
    let std = a.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let mut out = Vec::with_capacity(l.batch * l.channels * l.points);
    for (n, table) in tables.iter().enumerate() {
        for c in 0..l.channels {
            let base = (n * l.channels + c) * l.plane;
            let plane = xs.get(base..base + l.plane).unwrap_or(&[]);
            for p in 0..l.points {
                let v: f64 = table
                    .point(p)
                    .iter()
                    .map(|&(i, w)| w * plane.get(i).map_or(0.0, |x| x.to_f64()))
                    .sum();
                out.push(T::from_f64(v));
            }
        }
    }
    array_from_vec(&l.out_shape, out)
}

/// Applies per-batch tap tables by copying the one tap (nearest mode; any element type).
fn sample_nearest<T: Clone + Default>(
    a: &Array<T>,
    tables: &[TapTable],
    l: &Layout,
) -> Result<Array<T>> {
    let std = a.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let mut out = Vec::with_capacity(l.batch * l.channels * l.points);
    for (n, table) in tables.iter().enumerate() {
        for c in 0..l.channels {
            let base = (n * l.channels + c) * l.plane;
            let plane = xs.get(base..base + l.plane).unwrap_or(&[]);
            for p in 0..l.points {
                let v = table
                    .point(p)
                    .first()
                    .and_then(|&(i, _)| plane.get(i).cloned())
                    .unwrap_or_default();
                out.push(v);
            }
        }
    }
    array_from_vec(&l.out_shape, out)
}

fn grid_sample_16(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    grid_sample(ctx, inputs, 16)
}

fn grid_sample_20(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    grid_sample(ctx, inputs, 20)
}

fn parse_mode(ctx: &KernelCtx, version: i64) -> Result<Interpolation> {
    let default = if version >= 20 { "linear" } else { "bilinear" };
    let mode = ctx.attr_string("mode", default)?;
    match (mode.as_str(), version >= 20) {
        ("nearest", _) => Ok(Interpolation::Nearest),
        ("linear", true) | ("bilinear", false) => Ok(Interpolation::Linear),
        ("cubic", true) | ("bicubic", false) => Ok(Interpolation::Cubic),
        (other, true) => Err(ctx.err(format!(
            "mode '{other}' is not one of linear, nearest, cubic (opset 20 names)"
        ))),
        (other, false) => Err(ctx.err(format!(
            "mode '{other}' is not one of bilinear, nearest, bicubic (opset 16 names)"
        ))),
    }
}

fn grid_sample(ctx: &KernelCtx, inputs: &[Option<&Value>], version: i64) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let grid = ctx.input(inputs, 1)?;
    let mode = parse_mode(ctx, version)?;
    let padding = match ctx.attr_string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => {
            return Err(ctx.err(format!(
                "padding_mode '{other}' is not one of zeros, border, reflection"
            )))
        }
    };
    let align_corners = ctx.attr_int("align_corners", 0)? != 0;
    let rank = x.rank();
    if version < 20 && rank != 4 {
        return Err(ctx.err(format!(
            "X must be 4-D before opset 20, got shape {:?}",
            x.shape()
        )));
    }
    if rank < 3 {
        return Err(ctx.err(format!("X must have rank >= 3, got shape {:?}", x.shape())));
    }
    let spatial = rank - 2;
    let gshape = grid.shape();
    if gshape.len() != rank || gshape[0] != x.shape()[0] || gshape[rank - 1] != spatial {
        return Err(ctx.err(format!(
            "grid shape {gshape:?} does not match X shape {:?}: expected [{}, ..., {spatial}] of rank {rank}",
            x.shape(),
            x.shape()[0]
        )));
    }
    if !matches!(
        grid.dtype(),
        DType::Float | DType::Double | DType::Float16 | DType::Bfloat16
    ) {
        return Err(ctx.err(format!("grid must be a float tensor, got {}", grid.dtype())));
    }
    let axes: Vec<Axis> = x.shape()[2..]
        .iter()
        .map(|&len| {
            let (min, max) = if align_corners {
                (0.0, len as f64 - 1.0)
            } else {
                (-0.5, len as f64 - 0.5)
            };
            Axis { len, min, max }
        })
        .collect();
    let sampler = Sampler {
        axes,
        mode,
        padding,
        align_corners,
        coords_f32: grid.dtype() != DType::Double,
    };
    let mut out_shape = x.shape()[..2].to_vec();
    out_shape.extend_from_slice(&gshape[1..rank - 1]);
    crate::tensor::check_size("GridSample output", &out_shape)?;
    let layout = Layout {
        batch: x.shape()[0],
        channels: x.shape()[1],
        plane: x.shape()[2..].iter().product(),
        points: gshape[1..rank - 1].iter().product(),
        out_shape,
    };
    let coords = grid.to_f64_vec()?;
    let per_batch = layout.points * spatial;
    let tables: Vec<TapTable> = (0..layout.batch)
        .map(|n| {
            let chunk = coords
                .get(n * per_batch..(n + 1) * per_batch)
                .unwrap_or(&[]);
            sampler.tap_table(chunk)
        })
        .collect();
    let y = if mode == Interpolation::Nearest {
        match x {
            Tensor::Coded(..) => return Err(unsupported(ctx, x)),
            t => crate::tensor::map_all!(t, a => sample_nearest(a, &tables, &layout)?),
        }
    } else {
        map_numeric!(x, a => sample_weighted(a, &tables, &layout)?, other => {
            return Err(ctx.err(format!(
                "{} input needs mode 'nearest'; weighted modes take real numbers",
                other.dtype()
            )))
        })
    };
    one(y)
}

/// The base grid coordinate of index `i` along an axis of `len` points.
fn base_coordinate(i: usize, len: usize, align_corners: bool) -> f64 {
    if align_corners {
        if len <= 1 {
            -1.0
        } else {
            -1.0 + 2.0 * i as f64 / (len as f64 - 1.0)
        }
    } else {
        -1.0 + (2.0 * i as f64 + 1.0) / len as f64
    }
}

fn affine_grid(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let theta = ctx.input(inputs, 0)?;
    let size = to_dims(
        &ctx.input(inputs, 1)?
            .to_i64_vec()
            .map_err(|e| e.in_node(&ctx.node_ref()))?,
    )
    .map_err(|e| e.in_node(&ctx.node_ref()))?;
    let align_corners = ctx.attr_int("align_corners", 0)? != 0;
    let spatial = match size.len() {
        4 => 2,
        5 => 3,
        n => {
            return Err(ctx.err(format!(
                "size must have 4 (N, C, H, W) or 5 (N, C, D, H, W) values, got {n}"
            )))
        }
    };
    let batch = size[0];
    let expected = [batch, spatial, spatial + 1];
    if theta.shape() != expected {
        return Err(ctx.err(format!(
            "theta shape {:?} does not match size {size:?}: expected {expected:?}",
            theta.shape()
        )));
    }
    let dtype = theta.dtype();
    if !matches!(
        dtype,
        DType::Float | DType::Double | DType::Float16 | DType::Bfloat16
    ) {
        return Err(unsupported(ctx, theta));
    }
    let dims = &size[2..];
    let mut out_shape = vec![batch];
    out_shape.extend_from_slice(dims);
    out_shape.push(spatial);
    let total = crate::tensor::check_size("AffineGrid output", &out_shape)?;
    let th = theta.to_f64_vec()?;
    let points: usize = dims.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut homo = vec![1.0; spatial + 1];
    let mut index = vec![0usize; spatial];
    for n in 0..batch {
        let t = th
            .get(n * spatial * (spatial + 1)..(n + 1) * spatial * (spatial + 1))
            .ok_or_else(|| ctx.err("theta is shorter than its shape"))?;
        for p in 0..points {
            // Split the point index into (d, h, w), then fill (x, y, z, 1).
            let mut rest = p;
            for d in (0..spatial).rev() {
                index[d] = rest % dims[d];
                rest /= dims[d];
            }
            for d in 0..spatial {
                homo[spatial - 1 - d] = base_coordinate(index[d], dims[d], align_corners);
            }
            for row in t.chunks_exact(spatial + 1) {
                out.push(row.iter().zip(&homo).map(|(a, b)| a * b).sum::<f64>());
            }
        }
    }
    one(super::cast_tensor(
        &Tensor::from_vec(&out_shape, out)?,
        dtype,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_util::{int_attr, run, t};
    use onnx_proto::{AttributeProto, NodeProto};

    fn node(op: &str, attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: vec!["x".into(), "grid".into()],
            output: vec!["y".into()],
            attribute: attrs,
            ..Default::default()
        }
    }

    fn string_attr(name: &str, v: &str) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            s: Some(v.as_bytes().to_vec().into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::String as i32),
            ..Default::default()
        }
    }

    #[test]
    fn nearest_copies_any_element_type() {
        let x = t(&[1, 1, 1, 2], vec!["a".to_string(), "b".to_string()]);
        // x = -1 (left pixel centre at -0.5 denormalized), x = 0.6 (right), x = 3 (outside).
        let grid = t(&[1, 1, 3, 2], vec![-0.6f32, 0.0, 0.6, 0.0, 3.0, 0.0]);
        let n = node("GridSample", vec![string_attr("mode", "nearest")]);
        let y = run(&n, 20, &[x, grid]).unwrap_or_else(|e| panic!("{e}"));
        let expect = Tensor::from_vec(
            &[1, 1, 1, 3],
            vec!["a".to_string(), "b".to_string(), String::new()],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y, expect);
    }

    #[test]
    fn opset_names_of_modes_are_checked() {
        let x = t(&[1, 1, 2, 2], vec![1f32, 2.0, 3.0, 4.0]);
        let grid = t(&[1, 1, 1, 2], vec![0f32, 0.0]);
        let old = node("GridSample", vec![string_attr("mode", "bilinear")]);
        let centre = run(&old, 16, &[x.clone(), grid.clone()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            centre,
            Tensor::from_vec(&[1, 1, 1, 1], vec![2.5f32]).unwrap_or_else(|e| panic!("{e}"))
        );
        assert!(run(&old, 20, &[x.clone(), grid.clone()]).is_err());
        let new = node("GridSample", vec![string_attr("mode", "cubic")]);
        assert!(run(&new, 16, &[x, grid]).is_err());
    }

    #[test]
    fn five_d_needs_opset_20() {
        let x = t(&[1, 1, 1, 1, 2], vec![1f64, 3.0]);
        let grid = t(&[1, 1, 1, 1, 3], vec![0f64, 0.0, 0.0]);
        let n = node("GridSample", vec![int_attr("align_corners", 1)]);
        assert!(run(&n, 16, &[x.clone(), grid.clone()]).is_err());
        let y = run(&n, 20, &[x, grid]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            y,
            Tensor::from_vec(&[1, 1, 1, 1, 1], vec![2f64]).unwrap_or_else(|e| panic!("{e}"))
        );
    }

    #[test]
    fn empty_grid_and_bad_grid_shape() {
        let x = t(&[1, 2, 2, 2], vec![0f32; 8]);
        let grid = t(&[1, 0, 3, 2], Vec::<f32>::new());
        let n = node("GridSample", vec![]);
        let y = run(&n, 20, &[x.clone(), grid]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y.shape(), &[1, 2, 0, 3]);
        let wrong = t(&[1, 1, 1, 3], vec![0f32; 3]);
        let err = run(&n, 20, &[x, wrong]).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("grid shape")));
    }

    #[test]
    fn border_and_reflection_padding() {
        let x = t(&[1, 1, 1, 3], vec![10f32, 20.0, 30.0]);
        // Far right of the input: x = 2 (align_corners) + overshoot.
        let grid = t(&[1, 1, 1, 2], vec![1.5f32, 0.0]);
        let border = node(
            "GridSample",
            vec![
                int_attr("align_corners", 1),
                string_attr("padding_mode", "border"),
            ],
        );
        let y = run(&border, 20, &[x.clone(), grid.clone()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y.to_f64_vec().unwrap_or_default(), vec![30.0]);
        let refl = node(
            "GridSample",
            vec![
                int_attr("align_corners", 1),
                string_attr("padding_mode", "reflection"),
            ],
        );
        // 1.5 -> x = 2.5, reflected about 2 -> 1.5: halfway between 20 and 30.
        let y = run(&refl, 20, &[x, grid]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y.to_f64_vec().unwrap_or_default(), vec![25.0]);
    }

    #[test]
    fn affine_grid_identity_and_errors() {
        let n = NodeProto {
            op_type: Some("AffineGrid".into()),
            input: vec!["theta".into(), "size".into()],
            output: vec!["grid".into()],
            attribute: vec![int_attr("align_corners", 1)],
            ..Default::default()
        };
        let theta = t(&[1, 2, 3], vec![1f32, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let size = t(&[4], vec![1i64, 1, 2, 3]);
        let g = run(&n, 20, &[theta.clone(), size]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.shape(), &[1, 2, 3, 2]);
        let v = g.to_f64_vec().unwrap_or_default();
        assert_eq!(
            v,
            vec![-1.0, -1.0, 0.0, -1.0, 1.0, -1.0, -1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
        );
        let bad = t(&[5], vec![1i64, 1, 2, 3, 4]);
        assert!(run(&n, 20, &[theta.clone(), bad]).is_err());
        let empty = t(&[4], vec![1i64, 1, 0, 3]);
        let g = run(&n, 20, &[theta, empty]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.shape(), &[1, 0, 3, 2]);
    }
}
