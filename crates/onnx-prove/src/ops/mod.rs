//! Op-aware planning: where random shapes almost never fit, the planner of the op chooses the
//! shapes of its free leaves and the values of its free attributes together, from what is
//! already known ([`nn`]: channels and inner dims, Einsum equations; [`shape`]: shape ops;
//! [`recurrent`]: RNN/GRU/LSTM, LinearAttention, CausalConvWithState, RotaryEmbedding;
//! [`spatial`]: Resize, Upsample, RoiAlign, Col2Im, DeformConv, AffineGrid, STFT,
//! ImageDecoder; [`text`]: string ops and TfIdfVectorizer). Every other op gets the generic
//! plan: free inputs take the shape of a known input (a broadcasting variant of it for
//! elementwise ops), free attributes a value by their name (`axis`, `axes`, `perm`, `to`,
//! `epsilon`, ...).

use onnx_proto::attribute_proto::AttributeType;
use onnx_ref::DType;

use super::choice::{float_tensor, int_tensor};
use super::gen::{AState, AVal, Gen, LeafOpts, Loc, OpCall, Reject, Slot};

mod nn;
mod recurrent;
mod shape;
mod spatial;
mod text;

/// Ops whose inputs broadcast against each other (multidirectionally, or PRelu's slope).
const BROADCASTING: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "Where",
    "Mod",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "PRelu",
    "StringConcat",
];

pub(super) fn normalize(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

impl Gen<'_> {
    /// Plans the op: its own planner first, then the generic completion.
    pub(crate) fn plan(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        match c.op_type.as_str() {
            "Conv" => self.plan_conv(c)?,
            "BatchNormalization" => self.plan_batchnorm(c)?,
            "MatMul" => self.plan_matmul(c)?,
            "Gemm" => self.plan_gemm(c)?,
            "Transpose" => self.plan_transpose(c)?,
            "Reshape" => self.plan_reshape(c)?,
            "Squeeze" => self.plan_squeeze(c)?,
            "Unsqueeze" => self.plan_unsqueeze(c)?,
            "Concat" => self.plan_concat(c)?,
            "Split" => self.plan_split(c)?,
            "Expand" => self.plan_expand(c)?,
            "Pad" => self.plan_pad(c)?,
            "Slice" => self.plan_slice(c)?,
            "LayerNormalization" => self.plan_layernorm(c)?,
            "MeanVarianceNormalization" => self.plan_mvn(c)?,
            "Einsum" => self.plan_einsum(c)?,
            "RNN" | "GRU" | "LSTM" => self.plan_recurrent(c)?,
            "LinearAttention" => self.plan_linear_attention(c)?,
            "CausalConvWithState" => self.plan_causal_conv(c)?,
            "RotaryEmbedding" => self.plan_rotary(c)?,
            "Resize" => self.plan_resize(c)?,
            "Upsample" => self.plan_upsample(c)?,
            "RoiAlign" => self.plan_roi_align(c)?,
            "Col2Im" => self.plan_col2im(c)?,
            "DeformConv" => self.plan_deform_conv(c)?,
            "AffineGrid" => self.plan_affine_grid(c)?,
            "STFT" => self.plan_stft(c)?,
            "ImageDecoder" => self.plan_image_decoder(c)?,
            "StringNormalizer" => self.plan_string_normalizer(c)?,
            "StringSplit" => self.plan_string_split(c)?,
            "RegexFullMatch" => self.plan_regex(c)?,
            "TfIdfVectorizer" => self.plan_tfidf(c)?,
            _ => {}
        }
        self.complete(c)
    }

    /// Generic completion: every input and attribute still free.
    fn complete(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let elementwise = BROADCASTING.contains(&c.op_type.as_str());
        // Before opset 7 binary ops broadcast only with `broadcast: 1`, and only the second
        // operand to the first (a suffix); without it the shapes are equal.
        let legacy = c.schema.attribute("broadcast").is_some();
        if legacy && Self::attr_is_free(c, "broadcast") {
            let v = self.ch.below(2) as i64;
            self.set_attr(c, "broadcast", AVal::Int(v));
        }
        let legacy_on = Self::attr_val(c, "broadcast").and_then(|v| v.as_int()) == Some(1);
        let mut reference = self.first_known_shape(c);
        for i in 0..c.inputs.len() {
            if !Self::is_free(c, i) {
                continue;
            }
            let lit = matches!(&c.inputs[i], Slot::Free { lit: Some(_), .. });
            let shape = match &reference {
                None => self.base.clone(),
                Some(r) if legacy && legacy_on && i > 0 => self.suffix_variant(r),
                Some(r) if legacy => r.clone(),
                Some(r) if lit => self.literal_shape(r),
                Some(r) if elementwise => self.broadcast_variant(r),
                Some(r) => r.clone(),
            };
            let opts = LeafOpts {
                dtype: self.uncommon_dtype(c, i),
                ..Default::default()
            };
            let s = self.fill(c, i, shape, opts)?;
            if reference.is_none() {
                reference = Some(s);
            }
        }
        let rank = self.known_shape(c, 0).map_or(0, |s| s.len());
        for ai in 0..c.attrs.len() {
            if !matches!(c.attrs[ai].state, AState::Free) {
                continue;
            }
            let name = c.attrs[ai].name.clone();
            let odds = if c.attrs[ai].rest { 2 } else { 4 };
            if c.attrs[ai].optional && self.ch.one_in(odds) {
                self.set_attr(c, &name, AVal::Absent);
                continue;
            }
            let v = self.attr_by_name(c, ai, rank);
            self.set_attr(c, &name, v);
        }
        Ok(())
    }

    /// For a free input whose type allows none of the common element types (BitShift's
    /// unsigned integers) and no known input shares its type: one of the allowed types.
    fn uncommon_dtype(&mut self, c: &OpCall, i: usize) -> Option<DType> {
        let f = &c.schema.inputs[*c.formal.get(i)?];
        let shared = c.inputs.iter().enumerate().any(|(j, s)| {
            matches!(s, Slot::Known(_)) && c.schema.inputs[c.formal[j]].type_str == f.type_str
        });
        let allowed: Vec<DType> = c
            .schema
            .allowed_types(&f.type_str)?
            .iter()
            .filter_map(|t| super::gen::dtype_of_type_str(t))
            .collect();
        let common = [
            self.dtype,
            DType::Float,
            DType::Int64,
            DType::Int32,
            DType::Double,
            DType::Float16,
            DType::Bool,
            DType::String,
        ];
        if shared || allowed.is_empty() || allowed.iter().any(|d| common.contains(d)) {
            return None;
        }
        Some(allowed[self.ch.below(allowed.len())])
    }

    /// An integer in `lo..=hi`.
    pub(super) fn int_in(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.ch.below((hi - lo + 1) as usize) as i64
    }

    /// A shape for a literal constant beside an operand of shape `r`: mostly a scalar.
    pub(super) fn literal_shape(&mut self, r: &[usize]) -> Vec<usize> {
        match self.ch.below(8) {
            0..=3 => Vec::new(),
            4 => vec![1],
            _ => self.broadcast_variant(r),
        }
    }

    /// A shape that broadcasts with `r`: `r` itself, a suffix with some dims 1, a per-channel
    /// shape, or a larger one (one more leading dim).
    pub fn broadcast_variant(&mut self, r: &[usize]) -> Vec<usize> {
        match self.ch.below(8) {
            0..=3 => r.to_vec(),
            4 | 5 => self.suffix_variant(r),
            6 => {
                if r.len() >= 2 {
                    let mut s = vec![1; r.len()];
                    s[1] = r[1];
                    if self.ch.one_in(2) {
                        s.remove(0);
                    }
                    s
                } else {
                    Vec::new()
                }
            }
            _ => {
                let mut s = r.to_vec();
                let d = self.nonzero_dim();
                s.insert(0, d);
                s
            }
        }
    }

    /// A suffix of `r` with some dims 1 (broadcasts to `r` unidirectionally).
    pub(super) fn suffix_variant(&mut self, r: &[usize]) -> Vec<usize> {
        let l = self.ch.below(r.len() + 1);
        let mut s = Vec::new();
        for &d in &r[r.len() - l..] {
            s.push(if self.ch.one_in(2) { 1 } else { d });
        }
        s
    }

    /// Input `i`'s shape: known, or a new leaf of the base shape (at least `min_rank`).
    pub(super) fn operand(
        &mut self,
        c: &mut OpCall,
        i: usize,
        min_rank: usize,
    ) -> Result<Vec<usize>, Reject> {
        if let Some(s) = self.known_shape(c, i) {
            return Ok(s);
        }
        let mut s = self.base.clone();
        while s.len() < min_rank {
            let d = self.nonzero_dim();
            s.insert(0, d);
        }
        self.fill(c, i, s, LeafOpts::default())
    }

    /// A value for attribute `ai` by its name (or its type).
    pub(super) fn attr_by_name(&mut self, c: &OpCall, ai: usize, r: usize) -> AVal {
        let name = c.attrs[ai].name.clone();
        let ri = r as i64;
        match name.as_str() {
            "axis" => {
                let hi = if c.op_type == "Flatten" { ri } else { ri - 1 };
                AVal::Int(if ri == 0 { 0 } else { self.int_in(-ri, hi) })
            }
            "axes" => self.axes_value(c, r),
            "perm" => self.perm_value(c, r),
            "to" => {
                let d = self.ch.pick(&[
                    self.dtype,
                    DType::Float,
                    DType::Double,
                    DType::Float16,
                    DType::Int32,
                    DType::Int64,
                    DType::Bool,
                ]);
                AVal::Int(d.code() as i64)
            }
            "keepdims" | "select_last_index" | "transA" | "transB" => {
                AVal::Int(self.ch.below(2) as i64)
            }
            "epsilon" => AVal::Float(self.ch.pick(&[1e-5, 1e-3, 0.1])),
            "alpha" | "beta" | "gamma" => AVal::Float(self.ch.pick(&[1.0, 0.5, 2.0, 1.5])),
            "momentum" => AVal::Float(self.ch.pick(&[0.9, 0.5])),
            "ratio" => AVal::Float(self.ch.pick(&[0.5, 0.1, 0.25])),
            "min" => AVal::Float(self.ch.pick(&[-1.0, 0.0, -0.5])),
            "max" => AVal::Float(self.ch.pick(&[1.0, 0.5, 6.0])),
            "value" if c.op_type == "ConstantOfShape" => self.fill_value(),
            "value" => AVal::Float(self.ch.pick(&[0.0, 1.5, -1.0])),
            "pads" => AVal::Ints((0..2 * r).map(|_| self.ch.pick(&[0, 0, 1, 2])).collect()),
            "k" => AVal::Int(1),
            "direction" if c.op_type == "BitShift" => {
                AVal::Str(self.ch.pick(&["LEFT", "RIGHT"]).to_string())
            }
            "mode" if c.op_type == "Pad" => {
                let mut modes = vec!["constant", "reflect", "edge"];
                if c.schema.since_version >= 19 {
                    modes.push("wrap");
                }
                AVal::Str(self.ch.pick(&modes).to_string())
            }
            "noop_with_empty_axes"
            | "allowzero"
            | "training_mode"
            | "is_test"
            | "spatial"
            | "seed"
            | "consumed_inputs"
            | "saturate"
            | "round_mode"
            | "stash_type" => AVal::Absent,
            _ => {
                let ty = match &c.attrs[ai].loc {
                    Loc::Attr(a) => c.schema.attribute(a).map(|s| s.ty),
                    Loc::Input(_) => None,
                };
                match (c.attrs[ai].optional, ty) {
                    (true, _) => AVal::Absent,
                    (false, Some(AttributeType::Int)) => AVal::Int(self.ch.below(2) as i64),
                    (false, Some(AttributeType::Float)) => AVal::Float(1.0),
                    _ => AVal::Absent,
                }
            }
        }
    }

    /// ConstantOfShape's `value`: a one-element tensor of a common element type, its value
    /// ordinary or special (NaN, infinities, -0, the integer type's extremes).
    fn fill_value(&mut self) -> AVal {
        let dtype = self.ch.pick(&[
            self.dtype,
            DType::Float,
            DType::Double,
            DType::Float16,
            DType::Int64,
            DType::Int32,
            DType::Int8,
            DType::Uint8,
            DType::Bool,
        ]);
        let t = if dtype.is_float() {
            let x = self
                .ch
                .pick(&[1.5, -2.25, 0.0, -0.0, f64::NAN, f64::INFINITY, 65504.0, 1e6]);
            float_tensor(dtype, &[1], vec![x])
        } else {
            let x = self.ch.pick(&[3, -7, 0, 1, i64::MAX, i64::MIN, 300]);
            int_tensor(dtype, &[1], vec![x])
        };
        match t {
            Some(t) => AVal::Tensor(Box::new(t.to_proto("value"))),
            None => AVal::Absent,
        }
    }

    /// Axes for a reduction-like op over rank `r`: the last axis, one axis, a subset, or the
    /// axes generated last (so that patterns with two axes lists often agree).
    pub(super) fn axes_value(&mut self, c: &OpCall, r: usize) -> AVal {
        let want = Self::attr_var(c, "axes")
            .and_then(|v| self.hints.len.get(&v).copied())
            .and_then(|e| super::hints::eval(self.rule, e, self))
            .and_then(|g| g.as_int());
        if r == 0 {
            return AVal::Ints(Vec::new());
        }
        let ri = r as i64;
        let mut axes: Vec<i64> = match self.ch.below(4) {
            0 => vec![if self.ch.one_in(2) { ri - 1 } else { -1 }],
            1 => vec![self.int_in(-ri, ri - 1)],
            2 => {
                let mut v = Vec::new();
                for a in 0..ri {
                    if self.ch.one_in(2) {
                        v.push(if self.ch.one_in(2) { a - ri } else { a });
                    }
                }
                if v.is_empty() {
                    v.push(0);
                }
                v
            }
            _ => match self.lists.get("axes") {
                Some(prev) if prev.iter().all(|&a| normalize(a, r).is_some()) => prev.clone(),
                _ => vec![-1],
            },
        };
        if let Some(n) = want.filter(|&n| (0..=ri).contains(&n)) {
            let n = n as usize;
            axes.truncate(n);
            for a in 0..ri {
                if axes.len() >= n {
                    break;
                }
                if !axes.iter().any(|&x| normalize(x, r) == Some(a as usize)) {
                    axes.push(a);
                }
            }
        }
        AVal::Ints(axes)
    }

    /// A permutation of `r` axes (the identity when a hint asks, or one time in four).
    pub(super) fn perm_value(&mut self, c: &OpCall, r: usize) -> AVal {
        let identity = Self::attr_var(c, "perm").is_some_and(|v| self.hints.identity.contains(&v));
        let mut p: Vec<i64> = (0..r as i64).collect();
        if identity || self.ch.one_in(4) {
            return AVal::Ints(p);
        }
        for i in (1..r).rev() {
            let j = self.ch.below(i + 1);
            p.swap(i, j);
        }
        AVal::Ints(p)
    }

    pub(super) fn free_attr_or(&mut self, c: &mut OpCall, name: &str, v: AVal) {
        if Self::attr_is_free(c, name) {
            self.set_attr(c, name, v);
        }
    }

    /// Sets a free optional attribute to `v`, or leaves it absent one time in `odds`.
    pub(super) fn maybe_attr(&mut self, c: &mut OpCall, name: &str, odds: usize, v: AVal) {
        let v = if self.ch.one_in(odds) {
            AVal::Absent
        } else {
            v
        };
        self.free_attr_or(c, name, v);
    }

    /// A free string attribute set to one of `options` (absent one time in three: its default).
    pub(super) fn pick_str_attr(&mut self, c: &mut OpCall, name: &str, options: &[&str]) {
        let v = AVal::Str(self.ch.pick(options).to_string());
        self.maybe_attr(c, name, 3, v);
    }

    /// An integer attribute's value once chosen, else `default`.
    pub(super) fn int_attr(c: &OpCall, name: &str, default: i64) -> i64 {
        Self::attr_val(c, name)
            .and_then(|v| v.as_int())
            .unwrap_or(default)
    }

    /// A string attribute's value once chosen, else `default`.
    pub(super) fn str_attr(c: &OpCall, name: &str, default: &str) -> String {
        match Self::attr_val(c, name) {
            Some(AVal::Str(s)) => s,
            _ => default.to_string(),
        }
    }

    /// Makes free input `i` a constant of `dtype` (an integer type) holding `vals`.
    pub(super) fn fill_ints(
        &mut self,
        c: &mut OpCall,
        i: usize,
        dtype: DType,
        shape: &[usize],
        vals: Vec<i64>,
    ) -> Result<(), Reject> {
        if !Self::is_free(c, i) {
            return Ok(());
        }
        let Some(t) = int_tensor(dtype, shape, vals) else {
            return self.reject(format!("cannot write {} constants", dtype.name()));
        };
        self.fill_const(c, i, t)
    }

    /// Makes free input `i` a constant of `dtype` (a floating type) holding `vals`.
    pub(super) fn fill_floats(
        &mut self,
        c: &mut OpCall,
        i: usize,
        dtype: DType,
        shape: &[usize],
        vals: Vec<f64>,
    ) -> Result<(), Reject> {
        if !Self::is_free(c, i) {
            return Ok(());
        }
        let Some(t) = float_tensor(dtype, shape, vals) else {
            return self.reject(format!("cannot write {} constants", dtype.name()));
        };
        self.fill_const(c, i, t)
    }

    /// Makes free input `i` the constant `t`.
    fn fill_const(&mut self, c: &mut OpCall, i: usize, t: onnx_ref::Tensor) -> Result<(), Reject> {
        let opts = LeafOpts {
            dtype: Some(t.dtype()),
            konst: true,
            data: Some(t.clone()),
            ..Default::default()
        };
        self.fill(c, i, t.shape().to_vec(), opts)?;
        Ok(())
    }

    /// Makes free input `i` a leaf of `shape` (its dtype per the schema).
    pub(super) fn fill_shape(
        &mut self,
        c: &mut OpCall,
        i: usize,
        shape: Vec<usize>,
    ) -> Result<Vec<usize>, Reject> {
        if !Self::is_free(c, i) {
            return Ok(self.known_shape(c, i).unwrap_or_default());
        }
        self.fill(c, i, shape, LeafOpts::default())
    }

    /// The shape input `i` must have: a known one must equal `want`, a free one becomes a
    /// leaf of it; an absent one is fine.
    pub(super) fn expect_shape(
        &mut self,
        c: &mut OpCall,
        i: usize,
        want: Vec<usize>,
        what: &str,
    ) -> Result<(), Reject> {
        match self.known_shape(c, i) {
            Some(s) if s != want => {
                self.reject(format!("{} {what} {s:?} is not {want:?}", c.op_type))
            }
            Some(_) => Ok(()),
            None => {
                self.fill_shape(c, i, want)?;
                Ok(())
            }
        }
    }

    /// Whether input `i` is given (known or to be planned), not absent or past the end.
    pub(super) fn present(c: &OpCall, i: usize) -> bool {
        matches!(c.inputs.get(i), Some(Slot::Known(_) | Slot::Free { .. }))
    }

    /// A fraction in [0, 1) (from the choice vector: constants shrink with the model).
    pub(super) fn unit(&mut self) -> f64 {
        self.ch.below(1000) as f64 / 1000.0
    }
}
