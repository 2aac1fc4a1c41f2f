//! Object-detection ops: NonMaxSuppression (opsets 10 and 11: corner or center boxes, IoU and
//! score thresholds, per-class output limit, ties broken by lower box index as in the ONNX
//! reference) and RoiAlign (opset 10: no pixel shift; opset 16 on: coordinate_transformation_mode
//! half_pixel/output_half_pixel; modes avg and max, the latter as the reference computes it:
//! the maximum of the weighted bilinear corner values).

use super::{one, unsupported};
use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::kernel::{KernelCtx, KernelRegistry, LATEST};
use crate::numeric::Num;
use crate::tensor::{array_from_vec, check_size, map_float, Array, Tensor};
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register("", "NonMaxSuppression", 10, LATEST, non_max_suppression);
    reg.register("", "RoiAlign", 10, 15, roi_align_10);
    reg.register("", "RoiAlign", 16, LATEST, roi_align_16);
}

/// A box as its extent on both axes, in f32 as the reference computes it.
#[derive(Debug, Clone, Copy)]
struct Extent {
    x_min: f32,
    x_max: f32,
    y_min: f32,
    y_max: f32,
}

impl Extent {
    /// From `[y1, x1, y2, x2]` (any corner order) or `[x_center, y_center, width, height]`.
    fn new(b: &[f32], center_point: bool) -> Extent {
        let [a, b, c, d] = [b[0], b[1], b[2], b[3]];
        if center_point {
            let (half_w, half_h) = (c / 2.0, d / 2.0);
            Extent {
                x_min: a - half_w,
                x_max: a + half_w,
                y_min: b - half_h,
                y_max: b + half_h,
            }
        } else {
            Extent {
                x_min: b.min(d),
                x_max: b.max(d),
                y_min: a.min(c),
                y_max: a.max(c),
            }
        }
    }

    fn area(&self) -> f32 {
        (self.x_max - self.x_min) * (self.y_max - self.y_min)
    }

    /// True when the IoU of the two boxes exceeds `threshold` (degenerate boxes never do).
    fn suppresses(&self, other: &Extent, threshold: f32) -> bool {
        let ix_min = self.x_min.max(other.x_min);
        let ix_max = self.x_max.min(other.x_max);
        if ix_max <= ix_min {
            return false;
        }
        let iy_min = self.y_min.max(other.y_min);
        let iy_max = self.y_max.min(other.y_max);
        if iy_max <= iy_min {
            return false;
        }
        let inter = (ix_max - ix_min) * (iy_max - iy_min);
        let (a1, a2) = (self.area(), other.area());
        let union = a1 + a2 - inter;
        if inter <= 0.0 || a1 <= 0.0 || a2 <= 0.0 || union <= 0.0 {
            return false;
        }
        inter / union > threshold
    }
}

/// The most sampling points RoiAlign keeps for one ROI (16M).
const MAX_ROI_SAMPLES: u64 = 1 << 24;

/// The first element of an optional scalar-like input as f32.
fn first_f32(ctx: &KernelCtx, t: Option<&Tensor>, what: &str) -> Result<Option<f32>> {
    match t {
        None => Ok(None),
        Some(t) => {
            if !t.dtype().is_float() {
                return Err(ctx.err(format!("{what} must be a float tensor, got {}", t.dtype())));
            }
            Ok(t.to_f64_vec()?.first().map(|&v| v as f32))
        }
    }
}

fn float_data(ctx: &KernelCtx, t: &Tensor, what: &str) -> Result<Vec<f32>> {
    if !matches!(
        t.dtype(),
        DType::Float | DType::Double | DType::Float16 | DType::Bfloat16
    ) {
        return Err(ctx.err(format!("{what} must be a float tensor, got {}", t.dtype())));
    }
    Ok(t.to_f64_vec()?.into_iter().map(|v| v as f32).collect())
}

fn non_max_suppression(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let boxes_t = ctx.input(inputs, 0)?;
    let scores_t = ctx.input(inputs, 1)?;
    let center_point = match ctx.attr_int("center_point_box", 0)? {
        0 => false,
        1 => true,
        v => return Err(ctx.err(format!("center_point_box must be 0 or 1, got {v}"))),
    };
    let max_per_class = match ctx.opt_input(inputs, 2)? {
        Some(t) => t.to_i64_vec()?.first().copied().unwrap_or(0).max(0) as usize,
        None => 0,
    };
    let iou_threshold = first_f32(ctx, ctx.opt_input(inputs, 3)?, "iou_threshold")?.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&iou_threshold) {
        return Err(ctx.err(format!(
            "iou_threshold must be within [0, 1], got {iou_threshold}"
        )));
    }
    let score_threshold = first_f32(ctx, ctx.opt_input(inputs, 4)?, "score_threshold")?;
    let (bs, ss) = (boxes_t.shape(), scores_t.shape());
    if bs.len() != 3 || bs[2] != 4 {
        return Err(ctx.err(format!(
            "boxes must have shape [batches, boxes, 4], got {bs:?}"
        )));
    }
    if ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(ctx.err(format!(
            "scores shape {ss:?} does not match boxes {bs:?}: expected [{}, classes, {}]",
            bs[0], bs[1]
        )));
    }
    let (batches, num_boxes, classes) = (bs[0], bs[1], ss[1]);
    let boxes = float_data(ctx, boxes_t, "boxes")?;
    let scores = float_data(ctx, scores_t, "scores")?;
    let mut selected: Vec<i64> = Vec::new();
    let mut candidates: Vec<(f32, usize)> = Vec::with_capacity(num_boxes);
    let mut kept: Vec<Extent> = Vec::new();
    for b in 0..batches {
        let extents: Vec<Extent> = boxes
            .get(b * num_boxes * 4..(b + 1) * num_boxes * 4)
            .unwrap_or(&[])
            .chunks_exact(4)
            .map(|c| Extent::new(c, center_point))
            .collect();
        for c in 0..classes {
            let base = (b * classes + c) * num_boxes;
            let class_scores = scores.get(base..base + num_boxes).unwrap_or(&[]);
            candidates.clear();
            candidates.extend(
                class_scores
                    .iter()
                    .enumerate()
                    .filter(|(_, &s)| score_threshold.is_none_or(|t| s > t))
                    .map(|(i, &s)| (s, i)),
            );
            // Highest score first; equal scores keep the lower box index first. NaN sorts last.
            candidates.sort_by(|x, y| {
                y.0.partial_cmp(&x.0)
                    .unwrap_or_else(|| x.0.is_nan().cmp(&y.0.is_nan()))
                    .then(x.1.cmp(&y.1))
            });
            kept.clear();
            for &(_, i) in &candidates {
                if kept.len() >= max_per_class {
                    break;
                }
                let Some(e) = extents.get(i) else { continue };
                if kept.iter().all(|k| !e.suppresses(k, iou_threshold)) {
                    kept.push(*e);
                    selected.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    let n = selected.len() / 3;
    one(Tensor::from_vec(&[n, 3], selected)?)
}

/// The bilinear taps of one sampling point: four flat positions in a plane and their weights.
#[derive(Debug, Clone, Copy, Default)]
struct Bilinear {
    pos: [usize; 4],
    weight: [f64; 4],
}

/// RoiAlign settings read from the node.
#[derive(Debug, Clone, Copy)]
struct RoiSettings {
    max_mode: bool,
    half_pixel: bool,
    out_h: usize,
    out_w: usize,
    sampling_ratio: i64,
    spatial_scale: f64,
}

fn roi_align_10(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    roi_align(ctx, inputs, false)
}

fn roi_align_16(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let half_pixel = match ctx
        .attr_string("coordinate_transformation_mode", "half_pixel")?
        .as_str()
    {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => {
            return Err(ctx.err(format!(
                "coordinate_transformation_mode '{other}' is not half_pixel or output_half_pixel"
            )))
        }
    };
    roi_align(ctx, inputs, half_pixel)
}

/// The sampling points of one roi, `[out_h][out_w][grid_h][grid_w]` in order, and the number
/// of points a bin averages over.
fn roi_samples(
    roi: [f64; 4],
    height: usize,
    width: usize,
    s: &RoiSettings,
) -> Result<(Vec<Bilinear>, usize, usize)> {
    let offset = if s.half_pixel { 0.5 } else { 0.0 };
    let start_w = roi[0] * s.spatial_scale - offset;
    let start_h = roi[1] * s.spatial_scale - offset;
    let end_w = roi[2] * s.spatial_scale - offset;
    let end_h = roi[3] * s.spatial_scale - offset;
    let (mut roi_w, mut roi_h) = (end_w - start_w, end_h - start_h);
    if !s.half_pixel {
        roi_w = roi_w.max(1.0);
        roi_h = roi_h.max(1.0);
    }
    let bin_h = roi_h / s.out_h as f64;
    let bin_w = roi_w / s.out_w as f64;
    let grid = |bin: f64| -> i64 {
        if s.sampling_ratio > 0 {
            s.sampling_ratio
        } else if bin.is_finite() {
            bin.ceil() as i64
        } else {
            0
        }
    };
    let (grid_h, grid_w) = (grid(bin_h), grid(bin_w));
    let count = grid_h.saturating_mul(grid_w).max(1) as usize;
    let (gh, gw) = (grid_h.max(0) as usize, grid_w.max(0) as usize);
    let total = check_size("RoiAlign sampling points", &[s.out_h, s.out_w, gh, gw])?;
    // The points of one ROI are kept (every channel reads them): bounded well below the tensor
    // limit, since each is a few words. An adaptive grid over a huge ROI asks for billions.
    if total as u64 > MAX_ROI_SAMPLES {
        return Err(RefError::TooLarge {
            tensor: "RoiAlign sampling points of one ROI".into(),
            shape: [s.out_h, s.out_w, gh, gw]
                .iter()
                .map(|&d| d as i64)
                .collect(),
            elements: total as u128,
            limit: MAX_ROI_SAMPLES,
        });
    }
    let mut samples = Vec::with_capacity(total);
    let (hf, wf) = (height as f64, width as f64);
    for ph in 0..s.out_h {
        for pw in 0..s.out_w {
            for iy in 0..gh {
                let yy = start_h + ph as f64 * bin_h + (iy as f64 + 0.5) * bin_h / gh as f64;
                for ix in 0..gw {
                    let xx = start_w + pw as f64 * bin_w + (ix as f64 + 0.5) * bin_w / gw as f64;
                    samples.push(bilinear(yy, xx, height, width, hf, wf));
                }
            }
        }
    }
    Ok((samples, count, gh * gw))
}

/// The bilinear taps of point (y, x) in a `height` x `width` plane (zero outside [-1, size]).
fn bilinear(y: f64, x: f64, height: usize, width: usize, hf: f64, wf: f64) -> Bilinear {
    if height == 0
        || width == 0
        || y.is_nan()
        || x.is_nan()
        || y < -1.0
        || y > hf
        || x < -1.0
        || x > wf
    {
        return Bilinear::default();
    }
    let (mut y, mut x) = (y.max(0.0), x.max(0.0));
    let (mut y_low, mut x_low) = (y as usize, x as usize);
    let (y_high, x_high);
    if y_low >= height - 1 {
        y_low = height - 1;
        y_high = y_low;
        y = y_low as f64;
    } else {
        y_high = y_low + 1;
    }
    if x_low >= width - 1 {
        x_low = width - 1;
        x_high = x_low;
        x = x_low as f64;
    } else {
        x_high = x_low + 1;
    }
    let (ly, lx) = (y - y_low as f64, x - x_low as f64);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    Bilinear {
        pos: [
            y_low * width + x_low,
            y_low * width + x_high,
            y_high * width + x_low,
            y_high * width + x_high,
        ],
        weight: [hy * hx, hy * lx, ly * hx, ly * lx],
    }
}

fn roi_align(ctx: &KernelCtx, inputs: &[Option<&Value>], half_pixel: bool) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let rois_t = ctx.input(inputs, 1)?;
    let batch_t = ctx.input(inputs, 2)?;
    let max_mode = match ctx.attr_string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => return Err(ctx.err(format!("mode '{other}' is not avg or max"))),
    };
    let dim = |name: &str| -> Result<usize> {
        let v = ctx.attr_int(name, 1)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| ctx.err(format!("{name} must be positive, got {v}")))
    };
    let s = RoiSettings {
        max_mode,
        half_pixel,
        out_h: dim("output_height")?,
        out_w: dim("output_width")?,
        sampling_ratio: ctx.attr_int("sampling_ratio", 0)?,
        spatial_scale: ctx.attr_float("spatial_scale", 1.0)? as f64,
    };
    if s.sampling_ratio < 0 {
        return Err(ctx.err(format!(
            "sampling_ratio must be >= 0, got {}",
            s.sampling_ratio
        )));
    }
    if x.rank() != 4 {
        return Err(ctx.err(format!("X must be 4-D (N, C, H, W), got {:?}", x.shape())));
    }
    let (rs, bs) = (rois_t.shape(), batch_t.shape());
    if rs.len() != 2 || rs[1] != 4 {
        return Err(ctx.err(format!("rois must have shape [num_rois, 4], got {rs:?}")));
    }
    if bs != [rs[0]] {
        return Err(ctx.err(format!(
            "batch_indices shape {bs:?} does not match rois {rs:?}"
        )));
    }
    if !rois_t.dtype().is_float() {
        return Err(unsupported(ctx, rois_t));
    }
    let rois = rois_t.to_f64_vec()?;
    let batch_indices = batch_t.to_i64_vec()?;
    let n = x.shape()[0];
    for (r, &b) in batch_indices.iter().enumerate() {
        if b < 0 || b as usize >= n {
            return Err(ctx.err(format!("batch_indices[{r}] = {b} is outside [0, {n})")));
        }
    }
    let out_shape = [rs[0], x.shape()[1], s.out_h, s.out_w];
    check_size("RoiAlign output", &out_shape)?;
    let y = map_float!(x, a => pool_rois(a, &rois, &batch_indices, &s, &out_shape)?, other => {
        return Err(unsupported(ctx, other))
    });
    one(y)
}

fn pool_rois<T: Num>(
    a: &Array<T>,
    rois: &[f64],
    batch_indices: &[i64],
    s: &RoiSettings,
    out_shape: &[usize; 4],
) -> Result<Array<T>> {
    let std = a.as_standard_layout();
    let xs = std
        .as_slice()
        .ok_or_else(|| RefError::op("input is not contiguous"))?;
    let (channels, height, width) = (a.shape()[1], a.shape()[2], a.shape()[3]);
    let plane = height * width;
    let bins = s.out_h * s.out_w;
    let mut out = Vec::with_capacity(out_shape.iter().product());
    for (roi, &b) in rois.chunks_exact(4).zip(batch_indices) {
        let (samples, count, per_bin) =
            roi_samples([roi[0], roi[1], roi[2], roi[3]], height, width, s)?;
        for c in 0..channels {
            let base = (b as usize * channels + c) * plane;
            let data = xs.get(base..base + plane).unwrap_or(&[]);
            let at = |p: usize| data.get(p).map_or(0.0, |v| v.to_f64());
            for bin in 0..bins {
                let points = samples
                    .get(bin * per_bin..(bin + 1) * per_bin)
                    .unwrap_or(&[]);
                let v = if s.max_mode {
                    points
                        .iter()
                        .map(|t| {
                            (0..4)
                                .map(|k| t.weight[k] * at(t.pos[k]))
                                .fold(f64::NEG_INFINITY, f64::max)
                        })
                        .reduce(f64::max)
                        .unwrap_or(0.0)
                } else {
                    let sum: f64 = points
                        .iter()
                        .map(|t| (0..4).map(|k| t.weight[k] * at(t.pos[k])).sum::<f64>())
                        .sum();
                    sum / count as f64
                };
                out.push(T::from_f64(v));
            }
        }
    }
    array_from_vec(out_shape, out)
}

#[cfg(test)]
mod tests {
    use crate::kernels::test_util::{int_attr, node, run, t};

    #[test]
    fn nms_without_limit_selects_nothing_and_ties_prefer_lower_index() {
        let n = node("NonMaxSuppression", &["b", "s", "m"], vec![]);
        let boxes = t(
            &[1, 3, 4],
            vec![0f32, 0.0, 1.0, 1.0, 5.0, 5.0, 6.0, 6.0, 0.0, 0.0, 1.0, 1.0],
        );
        let scores = t(&[1, 1, 3], vec![0.5f32, 0.5, 0.5]);
        let none = run(&n, 11, &[boxes.clone(), scores.clone()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none.shape(), &[0, 3]);
        let limit = t(&[1], vec![3i64]);
        let y = run(&n, 11, &[boxes, scores, limit]).unwrap_or_else(|e| panic!("{e}"));
        // Box 2 duplicates box 0 (IoU 1 > 0) and is suppressed; equal scores keep index order.
        assert_eq!(y.to_i64_vec().unwrap_or_default(), vec![0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn nms_rejects_bad_shapes_and_thresholds() {
        let n = node("NonMaxSuppression", &["b", "s", "m", "iou"], vec![]);
        let boxes = t(&[1, 2, 4], vec![0f32; 8]);
        let scores = t(&[1, 1, 3], vec![0f32; 3]);
        assert!(run(&n, 10, &[boxes.clone(), scores]).is_err());
        let scores = t(&[1, 1, 2], vec![0f32; 2]);
        let iou = t(&[1], vec![1.5f32]);
        assert!(run(
            &n,
            10,
            &[boxes.clone(), scores.clone(), t(&[1], vec![1i64]), iou]
        )
        .is_err());
        let bad = node(
            "NonMaxSuppression",
            &["b", "s"],
            vec![int_attr("center_point_box", 2)],
        );
        assert!(run(&bad, 10, &[boxes, scores]).is_err());
    }

    #[test]
    fn roi_align_opset_10_has_no_half_pixel_shift() {
        let x = t(&[1, 1, 2, 2], vec![0f32, 1.0, 2.0, 3.0]);
        let rois = t(&[1, 4], vec![0f32, 0.0, 1.0, 1.0]);
        let bi = t(&[1], vec![0i64]);
        let n = node(
            "RoiAlign",
            &["x", "r", "b"],
            vec![int_attr("sampling_ratio", 1)],
        );
        // Opset 10: the one sample sits at (0.5, 0.5): the mean of the four pixels.
        let y10 =
            run(&n, 10, &[x.clone(), rois.clone(), bi.clone()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y10.to_f64_vec().unwrap_or_default(), vec![1.5]);
        // Opset 16 default half_pixel: the sample sits at (0, 0).
        let y16 = run(&n, 16, &[x.clone(), rois, bi]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y16.to_f64_vec().unwrap_or_default(), vec![0.0]);
        let far = t(&[1], vec![1i64]);
        let rois = t(&[1, 4], vec![0f32, 0.0, 1.0, 1.0]);
        assert!(run(&n, 16, &[x, rois, far]).is_err());
    }

    #[test]
    fn roi_align_with_no_rois_is_empty() {
        let x = t(&[1, 2, 2, 2], vec![0f64; 8]);
        let rois = t(&[0, 4], Vec::<f64>::new());
        let bi = t(&[0], Vec::<i64>::new());
        let n = node(
            "RoiAlign",
            &["x", "r", "b"],
            vec![int_attr("output_height", 3)],
        );
        let y = run(&n, 16, &[x, rois, bi]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(y.shape(), &[0, 2, 3, 1]);
    }

    #[test]
    fn roi_align_over_a_huge_roi_with_adaptive_sampling_is_an_error_not_an_abort() {
        // sampling_ratio 0 samples ceil(bin size) points per bin: one 3e4 x 3e4 bin asks for
        // 9e8 points (under the tensor element limit, but tens of GB of sampling points); it
        // must be refused before anything is allocated.
        let x = t(&[1, 1, 2, 2], vec![0f32; 4]);
        let rois = t(&[1, 4], vec![0f32, 0.0, 3e4, 3e4]);
        let bi = t(&[1], vec![0i64]);
        let n = node(
            "RoiAlign",
            &["x", "r", "b"],
            vec![int_attr("output_height", 1), int_attr("output_width", 1)],
        );
        for opset in [10, 16] {
            let e = run(&n, opset, &[x.clone(), rois.clone(), bi.clone()]).unwrap_err();
            assert!(e.to_string().contains("sampling points of one ROI"), "{e}");
        }
        // A ROI of the image's size still runs.
        let rois = t(&[1, 4], vec![0f32, 0.0, 1.0, 1.0]);
        assert!(run(&n, 16, &[x, rois, bi]).is_ok());
    }
}
