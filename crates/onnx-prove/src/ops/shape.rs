//! Planners of the shape ops: Transpose, Reshape, Squeeze, Unsqueeze, Concat, Split, Expand,
//! Pad, Slice (axes of the right rank, Reshape targets with 0 and -1, Squeeze axes on dims of
//! size 1, Slice bounds past the ends).

use onnx_ref::{DType, Tensor};

use super::normalize;
use crate::gen::{AVal, Gen, LeafOpts, OpCall, Reject, Slot};

impl Gen<'_> {
    pub(super) fn plan_transpose(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let perm = Self::attr_val(c, "perm").and_then(|v| v.as_ints());
        let xs = match (self.known_shape(c, 0), &perm) {
            (Some(s), _) => s,
            (None, Some(p)) => {
                let s = if p.len() == self.base.len() {
                    self.base.clone()
                } else {
                    self.shape_of_rank(p.len())
                };
                self.fill(c, 0, s, LeafOpts::default())?
            }
            (None, None) => self.operand(c, 0, 0)?,
        };
        if Self::attr_is_free(c, "perm") {
            let v = if self.ch.one_in(8) {
                AVal::Absent
            } else {
                self.perm_value(c, xs.len())
            };
            self.set_attr(c, "perm", v);
        }
        Ok(())
    }

    pub(super) fn plan_reshape(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 0)?;
        if !Self::attr_is_free(c, "shape") {
            return Ok(());
        }
        let var = Self::attr_var(c, "shape");
        // A computed target (`!is_const(s)`) is the shape of an input: no 0 or -1 in it.
        let computed = var.is_some_and(|v| self.hints.nonconst.contains(&v));
        let avoid_zero = computed || var.is_some_and(|v| self.hints.avoid.get(&v) == Some(&0.0));
        let s: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
        let n: i64 = s.iter().product();
        let mut t: Vec<i64> = match self.ch.below(5) {
            0 => s.clone(),
            1 => {
                if self.ch.one_in(2) {
                    vec![n]
                } else {
                    vec![-1]
                }
            }
            2 if s.len() >= 2 => {
                let i = self.ch.below(s.len() - 1);
                let mut t = s.clone();
                let merged = t[i] * t[i + 1];
                t.splice(i..=i + 1, [merged]);
                t
            }
            3 => {
                let mut t = s.clone();
                match t.iter().position(|&d| d == 1) {
                    Some(i) if self.ch.one_in(2) => {
                        t.remove(i);
                    }
                    _ => {
                        let i = self.ch.below(t.len() + 1);
                        t.insert(i, 1);
                    }
                }
                t
            }
            _ => s.iter().rev().copied().collect(),
        };
        if !avoid_zero {
            for i in 0..t.len().min(s.len()) {
                if t[i] == s[i] && self.ch.one_in(4) {
                    t[i] = 0;
                }
            }
        }
        if !computed && !t.is_empty() && self.ch.one_in(3) {
            let i = self.ch.below(t.len());
            if t[i] != 0 && !t.contains(&-1) {
                t[i] = -1;
            }
        }
        if computed {
            let known: i64 = t.iter().filter(|&&d| d != -1).product();
            for d in t.iter_mut() {
                if *d == -1 {
                    *d = if known > 0 { n / known } else { 0 };
                }
            }
        }
        self.set_attr(c, "shape", AVal::Ints(t));
        Ok(())
    }

    pub(super) fn plan_squeeze(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let fixed = Self::attr_val(c, "axes").and_then(|v| v.as_ints());
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let mut s = self.base.clone();
                match &fixed {
                    Some(ax) => {
                        let need = ax.iter().map(|&a| if a < 0 { -a } else { a + 1 }).max();
                        while (s.len() as i64) < need.unwrap_or(0) {
                            s.push(self.nonzero_dim());
                        }
                        for &a in ax {
                            if let Some(i) = normalize(a, s.len()) {
                                s[i] = 1;
                            }
                        }
                    }
                    None => {
                        if self.ch.one_in(2) {
                            let i = self.ch.below(s.len() + 1);
                            s.insert(i, 1);
                        }
                    }
                }
                self.fill(c, 0, s, LeafOpts::default())?
            }
        };
        if !Self::attr_is_free(c, "axes") {
            return Ok(());
        }
        let optional = Self::attr_index(c, "axes").is_some_and(|i| c.attrs[i].optional);
        let r = xs.len() as i64;
        let ones: Vec<i64> = (0..r).filter(|&i| xs[i as usize] == 1).collect();
        let reuse = self.lists.get("axes").cloned().filter(|prev| {
            !prev.is_empty()
                && prev
                    .iter()
                    .all(|&a| normalize(a, xs.len()).is_some_and(|i| xs[i] == 1))
        });
        let choice = self.ch.below(6);
        let v = match (choice, reuse) {
            (1, Some(prev)) => AVal::Ints(prev),
            (0, _) if optional => AVal::Absent,
            (5, _) => AVal::Ints(Vec::new()),
            _ if ones.is_empty() => {
                if optional {
                    AVal::Absent
                } else {
                    AVal::Ints(Vec::new())
                }
            }
            _ => {
                let mut v = Vec::new();
                for &a in &ones {
                    if self.ch.one_in(2) {
                        v.push(if self.ch.one_in(2) { a - r } else { a });
                    }
                }
                if v.is_empty() {
                    v.push(ones[0]);
                }
                AVal::Ints(v)
            }
        };
        self.set_attr(c, "axes", v);
        Ok(())
    }

    pub(super) fn plan_unsqueeze(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 0)?;
        if !Self::attr_is_free(c, "axes") {
            return Ok(());
        }
        let r = xs.len();
        let reuse = self.lists.get("axes").cloned().filter(|prev| {
            let out = r + prev.len();
            let mut seen: Vec<usize> = prev.iter().filter_map(|&a| normalize(a, out)).collect();
            seen.sort_unstable();
            seen.dedup();
            !prev.is_empty() && seen.len() == prev.len()
        });
        let v = match reuse {
            Some(prev) if self.ch.one_in(2) => prev,
            _ => {
                let k = 1 + self.ch.below(2);
                let out = r + k;
                let mut free: Vec<i64> = (0..out as i64).collect();
                let mut v = Vec::new();
                for _ in 0..k {
                    let a = free.remove(self.ch.below(free.len()));
                    v.push(if self.ch.one_in(3) { a - out as i64 } else { a });
                }
                v
            }
        };
        self.set_attr(c, "axes", AVal::Ints(v));
        Ok(())
    }

    pub(super) fn plan_concat(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let reference = match self.first_known_shape(c) {
            Some(s) => s,
            None => {
                let mut b = self.base.clone();
                if b.is_empty() {
                    b.push(self.dim());
                }
                b
            }
        };
        let r = reference.len();
        if r == 0 {
            return self.reject("Concat of scalars");
        }
        if Self::attr_is_free(c, "axis") {
            let a = self.int_in(-(r as i64), r as i64 - 1);
            self.set_attr(c, "axis", AVal::Int(a));
        }
        let axis = Self::attr_val(c, "axis")
            .and_then(|v| v.as_int())
            .unwrap_or(0);
        let Some(ax) = normalize(axis, r) else {
            return self.reject("Concat axis out of range");
        };
        for i in 0..c.inputs.len() {
            if Self::is_free(c, i) {
                let mut s = reference.clone();
                s[ax] = self.dim();
                self.fill(c, i, s, LeafOpts::default())?;
            }
        }
        Ok(())
    }

    pub(super) fn plan_split(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 1)?;
        let r = xs.len();
        if r == 0 {
            return self.reject("Split of a scalar");
        }
        if Self::attr_is_free(c, "axis") {
            let a = self.int_in(-(r as i64), r as i64 - 1);
            self.set_attr(c, "axis", AVal::Int(a));
        }
        let axis = Self::attr_val(c, "axis")
            .and_then(|v| v.as_int())
            .unwrap_or(0);
        let Some(ax) = normalize(axis, r) else {
            return self.reject("Split axis out of range");
        };
        if Self::attr_is_free(c, "split") {
            let optional = Self::attr_index(c, "split").is_some_and(|i| c.attrs[i].optional);
            let v = if optional && self.ch.one_in(3) {
                AVal::Absent
            } else {
                let (d, n) = (xs[ax] as i64, c.n_outputs.max(1));
                let mut cuts: Vec<i64> = (0..n - 1).map(|_| self.int_in(0, d)).collect();
                cuts.sort_unstable();
                let mut sizes = Vec::new();
                let mut prev = 0;
                for &cut in cuts.iter().chain(std::iter::once(&d)) {
                    sizes.push(cut - prev);
                    prev = cut;
                }
                AVal::Ints(sizes)
            };
            self.set_attr(c, "split", v);
        }
        Ok(())
    }

    pub(super) fn plan_expand(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 0)?;
        if !Self::is_free(c, 1) {
            return Ok(());
        }
        let extra = if self.ch.one_in(2) {
            1 + self.ch.below(2)
        } else {
            0
        };
        let mut t: Vec<i64> = (0..extra).map(|_| self.dim() as i64).collect();
        for &d in &xs {
            t.push(if d == 1 {
                self.dim() as i64
            } else if self.ch.one_in(3) {
                1
            } else {
                d as i64
            });
        }
        // A computed target (`!is_const(s)`) is the Shape of a graph input of that shape.
        if let Some(Slot::Free { var: Some(v), .. }) = c.inputs.get(1) {
            let v = *v;
            if self.hints.nonconst.contains(&v) {
                c.inputs[1] = Slot::Known(self.bind_shape_of_input(v, &AVal::Ints(t))?);
                return Ok(());
            }
        }
        let data = Tensor::from_vec(&[t.len()], t.clone()).ok();
        let opts = LeafOpts {
            dtype: Some(DType::Int64),
            konst: true,
            data,
            ..Default::default()
        };
        self.fill(c, 1, vec![t.len()], opts)?;
        Ok(())
    }

    pub(super) fn plan_pad(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 0)?;
        let r = xs.len();
        if Self::attr_is_free(c, "pads") {
            let v = AVal::Ints((0..2 * r).map(|_| self.ch.pick(&[0, 0, 1, 2])).collect());
            self.set_attr(c, "pads", v);
        }
        if Self::attr_is_free(c, "mode") {
            let mut modes = vec!["constant", "reflect", "edge"];
            if c.schema.since_version >= 19 {
                modes.push("wrap");
            }
            let m = self.ch.pick(&modes);
            let v = if m == "constant" && self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Str(m.to_string())
            };
            self.set_attr(c, "mode", v);
        }
        Ok(())
    }

    pub(super) fn plan_slice(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 1)?;
        let r = xs.len();
        if r == 0 {
            return self.reject("Slice of a scalar");
        }
        let ri = r as i64;
        let axes: Vec<i64> = match Self::attr_val(c, "axes").and_then(|v| v.as_ints()) {
            Some(a) => a,
            None if Self::attr_is_free(c, "axes") => {
                let optional = Self::attr_index(c, "axes").is_some_and(|i| c.attrs[i].optional);
                if optional && self.ch.one_in(3) {
                    self.set_attr(c, "axes", AVal::Absent);
                    (0..ri).collect()
                } else {
                    let mut all: Vec<i64> = (0..ri).collect();
                    for i in (1..all.len()).rev() {
                        let j = self.ch.below(i + 1);
                        all.swap(i, j);
                    }
                    all.truncate(1 + self.ch.below(r));
                    for a in all.iter_mut() {
                        if self.ch.one_in(3) {
                            *a -= ri;
                        }
                    }
                    self.set_attr(c, "axes", AVal::Ints(all.clone()));
                    // A hint on the axes' variable may have replaced the random choice.
                    Self::attr_val(c, "axes")
                        .and_then(|v| v.as_ints())
                        .unwrap_or(all)
                }
            }
            None => (0..ri).collect(),
        };
        let mut dims = Vec::new();
        for &a in &axes {
            match normalize(a, r) {
                Some(i) => dims.push(xs[i] as i64),
                None => return self.reject("Slice axis out of range"),
            }
        }
        if Self::attr_is_free(c, "starts") {
            let v = dims.iter().map(|&d| self.int_in(-(d + 1), d + 1)).collect();
            self.set_attr(c, "starts", AVal::Ints(v));
        }
        if Self::attr_is_free(c, "ends") {
            let mut v = Vec::new();
            for &d in &dims {
                v.push(if self.ch.below(2) == 0 {
                    self.ch.pick(&[d, i64::MAX, d + 3])
                } else {
                    self.int_in(-(d + 1), d + 1)
                });
            }
            self.set_attr(c, "ends", AVal::Ints(v));
        }
        if Self::attr_is_free(c, "steps") {
            let optional = Self::attr_index(c, "steps").is_some_and(|i| c.attrs[i].optional);
            let v = match self.ch.below(3) {
                0 if optional => AVal::Absent,
                1 => AVal::Ints(dims.iter().map(|_| self.ch.pick(&[1, 2, -1, -2])).collect()),
                _ => AVal::Ints(vec![1; dims.len()]),
            };
            self.set_attr(c, "steps", v);
        }
        Ok(())
    }
}
