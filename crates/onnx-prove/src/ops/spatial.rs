//! Planners of the image and signal ops: Resize (every version: scales or sizes, roi, axes,
//! modes, coordinate transformations, antialias, aspect-ratio policies), Upsample, RoiAlign,
//! Col2Im, DeformConv, AffineGrid, STFT and ImageDecoder: block geometries that fit, indices in
//! range, constant shape inputs and encoded images.

use onnx_ref::DType;

use crate::gen::{AVal, Gen, LeafOpts, OpCall, Reject};

/// Scale factors Resize and Upsample draw from (down, identity and up).
const SCALES: &[f64] = &[1.0, 2.0, 0.5, 1.5, 3.0, 0.75];

impl Gen<'_> {
    /// An image-like operand: known, or a new leaf `[N, C, spatial...]` with `spatial` dims
    /// of 1 to 4.
    fn image(&mut self, c: &mut OpCall, i: usize, spatial: usize) -> Result<Vec<usize>, Reject> {
        if let Some(s) = self.known_shape(c, i) {
            return Ok(s);
        }
        let mut s = vec![self.ch.pick(&[1usize, 2]), self.nonzero_dim()];
        for _ in 0..spatial {
            s.push(1 + self.ch.below(4));
        }
        self.fill_shape(c, i, s)
    }

    /// Per-axis attribute `name` (strides, dilations, pads): chosen when free from `options`
    /// (`len` values), read back with `fill` for an absent one.
    fn per_axis(
        &mut self,
        c: &mut OpCall,
        name: &str,
        len: usize,
        options: &[i64],
        fill: i64,
    ) -> Vec<usize> {
        if Self::attr_is_free(c, name) {
            let v = if self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Ints((0..len).map(|_| self.ch.pick(options)).collect())
            };
            self.set_attr(c, name, v);
        }
        let v = Self::attr_val(c, name)
            .and_then(|v| v.as_ints())
            .unwrap_or_else(|| vec![fill; len]);
        v.iter().map(|&x| x.max(0) as usize).collect()
    }

    /// Resize: opset 10 takes scales; 11 and 12 roi and scales (empty when sizes are given,
    /// or roi unused); from 13 on exactly one of scales and sizes, roi optional; from 18 on `axes`,
    /// `antialias` and `keep_aspect_ratio_policy`. The roi is read by tf_crop_and_resize.
    pub(super) fn plan_resize(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let v = c.schema.since_version;
        let xs = self.operand(c, 0, 1)?;
        let rank = xs.len();
        if rank == 0 {
            return self.reject("Resize of a scalar");
        }
        let mut modes = vec!["nearest", "linear"];
        if v >= 11 {
            modes.push("cubic");
        }
        self.pick_str_attr(c, "mode", &modes);
        // tf_half_pixel_for_nn (opsets 11 to 17) is not generated: the interpreter lacks it.
        let mut coords = vec![
            "half_pixel",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "tf_crop_and_resize",
        ];
        if v >= 18 {
            coords.push("half_pixel_symmetric");
        }
        self.pick_str_attr(c, "coordinate_transformation_mode", &coords);
        self.pick_str_attr(
            c,
            "nearest_mode",
            &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
        );
        let a = AVal::Float(self.ch.pick(&[-0.5, -0.75]));
        self.maybe_attr(c, "cubic_coeff_a", 2, a);
        let e = AVal::Int(self.ch.below(2) as i64);
        self.maybe_attr(c, "exclude_outside", 2, e);
        let x = AVal::Float(self.ch.pick(&[0.0, -1.0, 2.5]));
        self.maybe_attr(c, "extrapolation_value", 2, x);
        let aa = AVal::Int(self.ch.below(2) as i64);
        self.maybe_attr(c, "antialias", 2, aa);
        if Self::attr_is_free(c, "axes") {
            let v = if self.ch.one_in(2) {
                AVal::Absent
            } else {
                let mut ax: Vec<i64> = (0..rank as i64).filter(|_| self.ch.one_in(2)).collect();
                if ax.is_empty() {
                    ax.push(rank as i64 - 1);
                }
                for a in ax.iter_mut() {
                    if self.ch.one_in(3) {
                        *a -= rank as i64;
                    }
                }
                AVal::Ints(ax)
            };
            self.set_attr(c, "axes", v);
        }
        let axes: Vec<usize> = match Self::attr_val(c, "axes").and_then(|v| v.as_ints()) {
            Some(a) => {
                let mut n = Vec::new();
                for x in a {
                    match super::normalize(x, rank) {
                        Some(i) if !n.contains(&i) => n.push(i),
                        _ => return self.reject("Resize axes out of range or repeated"),
                    }
                }
                n
            }
            None => (0..rank).collect(),
        };
        let n = axes.len();
        // roi, scales and sizes are logical parameters (attribute slots written as inputs).
        let use_sizes = match (Self::attr_val(c, "scales"), Self::attr_val(c, "sizes")) {
            (_, Some(_)) => true,
            (Some(_), None) => false,
            (None, None) => v >= 11 && self.ch.one_in(2),
        };
        if use_sizes {
            let sizes: Vec<i64> = axes
                .iter()
                .map(|&a| match self.ch.below(4) {
                    0 => xs[a] as i64,
                    1 => 2 * xs[a] as i64,
                    _ => self.nonzero_dim() as i64,
                })
                .collect();
            self.free_attr_or(c, "sizes", AVal::Ints(sizes));
            // Before 13 scales is required, and empty beside sizes.
            let empty = if v < 13 {
                AVal::Floats(Vec::new())
            } else {
                AVal::Absent
            };
            self.free_attr_or(c, "scales", empty);
            let p = self
                .ch
                .pick(&["stretch", "not_larger", "not_smaller"])
                .to_string();
            self.maybe_attr(c, "keep_aspect_ratio_policy", 2, AVal::Str(p));
        } else {
            let scales: Vec<f64> = (0..n).map(|_| self.ch.pick(SCALES)).collect();
            self.free_attr_or(c, "scales", AVal::Floats(scales));
            self.free_attr_or(c, "sizes", AVal::Absent);
        }
        if Self::attr_is_free(c, "roi") {
            let crop =
                Self::str_attr(c, "coordinate_transformation_mode", "") == "tf_crop_and_resize";
            let roi = if crop || self.ch.one_in(3) {
                let starts = (0..n).map(|_| self.ch.pick(&[0.0, 0.1, 0.25, -0.2]));
                let starts: Vec<f64> = starts.collect();
                let ends: Vec<f64> = (0..n)
                    .map(|_| self.ch.pick(&[1.0, 0.8, 0.5, 1.2]))
                    .collect();
                AVal::Floats([starts, ends].concat())
            } else if v < 13 {
                // Required before 13, and empty when unused.
                AVal::Floats(Vec::new())
            } else {
                AVal::Absent
            };
            self.set_attr(c, "roi", roi);
        }
        Ok(())
    }

    /// Upsample: scales of every axis (an attribute at opset 7, an input at 9), at least 1.
    pub(super) fn plan_upsample(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 1)?;
        let scales: Vec<f64> = (0..xs.len())
            .map(|i| {
                if xs.len() >= 3 && i < 2 {
                    1.0
                } else {
                    self.ch.pick(&[1.0, 2.0, 3.0, 1.5])
                }
            })
            .collect();
        self.pick_str_attr(c, "mode", &["nearest", "linear"]);
        if Self::is_free(c, 1) {
            self.fill_floats(c, 1, DType::Float, &[scales.len()], scales)?;
        } else {
            self.free_attr_or(c, "scales", AVal::Floats(scales));
        }
        Ok(())
    }

    /// RoiAlign: X `[N, C, H, W]`, rois `[R, 4]` boxes inside (or near) the image, batch
    /// indices `[R]` in `0..N`.
    pub(super) fn plan_roi_align(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.image(c, 0, 2)?;
        let [n, _, h, w] = xs[..] else {
            return self.reject("RoiAlign X of rank != 4");
        };
        if n == 0 {
            return self.reject("RoiAlign of an empty batch");
        }
        let rois = match self.known_shape(c, 1) {
            Some(s) if s.len() == 2 => s[0],
            Some(_) => return self.reject("RoiAlign rois of rank != 2"),
            None => self.nonzero_dim(),
        };
        if Self::is_free(c, 1) {
            let mut boxes = Vec::new();
            for _ in 0..rois {
                let (x0, y0) = (self.unit() * w as f64, self.unit() * h as f64);
                let (bw, bh) = (self.unit() * w as f64, self.unit() * h as f64);
                boxes.extend([x0, y0, x0 + bw, y0 + bh]);
            }
            let dtype = self.slot_dtype(c, 1);
            if self.ch.one_in(2) {
                self.fill_floats(c, 1, dtype, &[rois, 4], boxes)?;
            } else {
                let opts = LeafOpts {
                    positive: true,
                    ..Default::default()
                };
                self.fill(c, 1, vec![rois, 4], opts)?;
            }
        }
        if Self::is_free(c, 2) {
            let idx: Vec<i64> = (0..rois).map(|_| self.int_in(0, n as i64 - 1)).collect();
            self.fill_ints(c, 2, DType::Int64, &[rois], idx)?;
        }
        self.pick_str_attr(c, "mode", &["avg", "max"]);
        for name in ["output_height", "output_width"] {
            let d = AVal::Int(1 + self.ch.below(3) as i64);
            self.maybe_attr(c, name, 3, d);
        }
        let r = AVal::Int(self.ch.below(3) as i64);
        self.maybe_attr(c, "sampling_ratio", 2, r);
        let s = AVal::Float(self.ch.pick(&[1.0, 0.5, 2.0]));
        self.maybe_attr(c, "spatial_scale", 2, s);
        self.pick_str_attr(
            c,
            "coordinate_transformation_mode",
            &["half_pixel", "output_half_pixel"],
        );
        Ok(())
    }

    /// Col2Im: an image shape and a block shape (constants), strides, dilations and pads;
    /// the input `[N, C*prod(block), L]` holds exactly the blocks the geometry gives.
    pub(super) fn plan_col2im(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let k = if self.ch.one_in(4) { 1 } else { 2 };
        let image: Vec<usize> = (0..k).map(|_| 1 + self.ch.below(4)).collect();
        let block: Vec<usize> = image.iter().map(|&d| 1 + self.ch.below(d.min(3))).collect();
        let stride = self.per_axis(c, "strides", k, &[1, 2], 1);
        let dilation = self.per_axis(c, "dilations", k, &[1, 2], 1);
        let pads = self.per_axis(c, "pads", 2 * k, &[0, 1], 0);
        if stride.len() != k || dilation.len() != k || pads.len() != 2 * k {
            return self.reject("Col2Im attributes of the wrong length");
        }
        let mut blocks = 1;
        for d in 0..k {
            let span = image[d] + pads[d] + pads[d + k];
            let eff = dilation[d] * (block[d] - 1) + 1;
            if span < eff || stride[d] == 0 {
                return self.reject("Col2Im block larger than the padded image");
            }
            blocks *= (span - eff) / stride[d] + 1;
        }
        let bvol: usize = block.iter().product();
        match self.known_shape(c, 0) {
            Some(s) if s.len() == 3 && s[2] == blocks && s[1] % bvol == 0 => {}
            Some(_) => return self.reject("Col2Im input does not fit the geometry"),
            None => {
                let s = vec![self.nonzero_dim(), bvol * self.nonzero_dim(), blocks];
                self.fill_shape(c, 0, s)?;
            }
        }
        let to_i64 = |v: &[usize]| v.iter().map(|&d| d as i64).collect::<Vec<i64>>();
        self.fill_ints(c, 1, DType::Int64, &[k], to_i64(&image))?;
        self.fill_ints(c, 2, DType::Int64, &[k], to_i64(&block))?;
        Ok(())
    }

    /// DeformConv (2-D): X `[N, C, H, W]`, W `[M, C/group, kh, kw]`, offset `[N,
    /// offset_group*2*kh*kw, oh, ow]`, B `[M]`, mask `[N, offset_group*kh*kw, oh, ow]`.
    pub(super) fn plan_deform_conv(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.image(c, 0, 2)?;
        let [n, cin, h, w] = xs[..] else {
            return self.reject("DeformConv X of rank != 4");
        };
        let divisors: Vec<usize> = (1..=cin).filter(|g| cin % g == 0).collect();
        if divisors.is_empty() {
            return self.reject("DeformConv of zero channels");
        }
        for name in ["group", "offset_group"] {
            let g = divisors[self.ch.below(divisors.len())] as i64;
            self.maybe_attr(c, name, 2, AVal::Int(g));
        }
        let group = Self::int_attr(c, "group", 1).max(1) as usize;
        let og = Self::int_attr(c, "offset_group", 1).max(1) as usize;
        // The generic preset follows the base rank; DeformConv is 2-D.
        if Self::attr_val(c, "kernel_shape")
            .and_then(|v| v.as_ints())
            .is_some_and(|k| k.len() != 2)
        {
            Self::unset_attr(c, "kernel_shape");
        }
        let fixed = Self::attr_val(c, "kernel_shape").and_then(|v| v.as_ints());
        let (kh, kw) = match (self.known_shape(c, 1), fixed.as_deref()) {
            (Some(s), _) if s.len() == 4 => (s[2], s[3]),
            (Some(_), _) => return self.reject("DeformConv W of rank != 4"),
            (None, Some(&[a, b])) if a > 0 && b > 0 => (a as usize, b as usize),
            (None, Some(_)) => return self.reject("DeformConv kernel_shape is not 2 sizes"),
            (None, None) => (
                1 + self.ch.below(h.clamp(1, 3)),
                1 + self.ch.below(w.clamp(1, 3)),
            ),
        };
        let m = group * self.ch.pick(&[1usize, 2]);
        if Self::is_free(c, 1) {
            self.fill_shape(c, 1, vec![m, cin / group, kh, kw])?;
        }
        let m = self.known_shape(c, 1).map_or(m, |s| s[0]);
        let kernel = AVal::Ints(vec![kh as i64, kw as i64]);
        self.maybe_attr(c, "kernel_shape", 2, kernel);
        let stride = self.per_axis(c, "strides", 2, &[1, 2], 1);
        let dilation = self.per_axis(c, "dilations", 2, &[1, 2], 1);
        let pads = self.per_axis(c, "pads", 4, &[0, 1], 0);
        if stride.len() != 2 || dilation.len() != 2 || pads.len() != 4 {
            return self.reject("DeformConv attributes of the wrong length");
        }
        let mut out = Vec::new();
        for (i, (&d, &k)) in [h, w].iter().zip(&[kh, kw]).enumerate() {
            let span = d + pads[i] + pads[i + 2];
            let eff = dilation[i] * (k.max(1) - 1) + 1;
            if span < eff || stride[i] == 0 {
                return self.reject("DeformConv kernel larger than the padded input");
            }
            out.push((span - eff) / stride[i] + 1);
        }
        let (oh, ow) = (out[0], out[1]);
        self.expect_shape(c, 2, vec![n, og * 2 * kh * kw, oh, ow], "offset")?;
        self.expect_shape(c, 3, vec![m], "B")?;
        self.expect_shape(c, 4, vec![n, og * kh * kw, oh, ow], "mask")?;
        Ok(())
    }

    /// AffineGrid: theta `[N, 2, 3]` with size `[N, C, H, W]`, or `[N, 3, 4]` with `[N, C, D,
    /// H, W]` (a constant).
    pub(super) fn plan_affine_grid(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let theta = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let k = self.ch.pick(&[2usize, 3]);
                let s = vec![self.nonzero_dim(), k, k + 1];
                self.fill_shape(c, 0, s)?
            }
        };
        let (n, k) = match theta[..] {
            [n, 2, 3] => (n, 2),
            [n, 3, 4] => (n, 3),
            _ => return self.reject("AffineGrid theta is not [N, 2, 3] or [N, 3, 4]"),
        };
        let mut size = vec![n as i64, self.nonzero_dim() as i64];
        for _ in 0..k {
            size.push(1 + self.ch.below(4) as i64);
        }
        self.fill_ints(c, 1, DType::Int64, &[k + 2], size)?;
        let a = AVal::Int(self.ch.below(2) as i64);
        self.maybe_attr(c, "align_corners", 2, a);
        Ok(())
    }

    /// STFT: signal `[batch, length, 1 or 2]`, a positive frame step, a window and a frame
    /// length that agree (either may be absent); onesided only for a real signal.
    pub(super) fn plan_stft(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let s = vec![
                    self.nonzero_dim(),
                    1 + self.ch.below(8),
                    self.ch.pick(&[1, 2]),
                ];
                self.fill_shape(c, 0, s)?
            }
        };
        let [_, length, comps] = xs[..] else {
            return self.reject("STFT signal of rank != 3");
        };
        if comps != 1 && comps != 2 {
            return self.reject("STFT signal with a last dim other than 1 or 2");
        }
        let frame = match self.known_shape(c, 2) {
            Some(w) if w.len() == 1 => w[0],
            Some(_) => return self.reject("STFT window of rank != 1"),
            None => 1 + self.ch.below(length.clamp(1, 4)),
        };
        let step = 1 + self.ch.below(3) as i64;
        let int_type = self.slot_dtype(c, 1);
        self.fill_ints(c, 1, int_type, &[], vec![step])?;
        if Self::is_free(c, 2) {
            let opts = LeafOpts {
                positive: true,
                ..Default::default()
            };
            self.fill(c, 2, vec![frame], opts)?;
        }
        self.fill_ints(c, 3, int_type, &[], vec![frame as i64])?;
        if Self::attr_is_free(c, "onesided") {
            let v = if comps == 2 {
                AVal::Int(0)
            } else if self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Int(self.ch.below(2) as i64)
            };
            self.set_attr(c, "onesided", v);
        }
        Ok(())
    }

    /// ImageDecoder: a small binary PNM image (P5 gray or P6 color) as a constant byte
    /// stream (PNG and JPEG would need an encoder; trial inputs would not decode).
    pub(super) fn plan_image_decoder(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        if Self::is_free(c, 0) {
            let (w, h) = (1 + self.ch.below(4), 1 + self.ch.below(4));
            let color = self.ch.one_in(2);
            let magic = if color { "P6" } else { "P5" };
            let mut bytes: Vec<i64> = format!("{magic}\n{w} {h}\n255\n")
                .bytes()
                .map(i64::from)
                .collect();
            let n = w * h * if color { 3 } else { 1 };
            bytes.extend((0..n).map(|_| self.rng.below(256) as i64));
            let len = bytes.len();
            self.fill_ints(c, 0, DType::Uint8, &[len], bytes)?;
        }
        self.pick_str_attr(c, "pixel_format", &["RGB", "BGR", "Grayscale"]);
        Ok(())
    }
}
