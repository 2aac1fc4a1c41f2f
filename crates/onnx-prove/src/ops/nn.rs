//! Planners of the ops whose operands must agree on channels and inner dims: Conv,
//! BatchNormalization, MatMul, Gemm, LayerNormalization, MeanVarianceNormalization, and
//! Einsum (a random equation over the instance's dims).

use super::normalize;
use crate::gen::{AVal, Gen, LeafOpts, OpCall, Reject};

impl Gen<'_> {
    pub(super) fn plan_conv(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let k = self.ch.pick(&[2usize, 1, 3]);
                let mut s = vec![self.ch.pick(&[1usize, 2]), self.ch.pick(&[2usize, 1, 3, 4])];
                for _ in 0..k {
                    s.push(1 + self.ch.below(5));
                }
                self.fill(c, 0, s, LeafOpts::default())?
            }
        };
        if xs.len() < 3 || xs[1] == 0 {
            return self.reject("Conv input of rank < 3");
        }
        let k = xs.len() - 2;
        let cin = xs[1];
        let group = match Self::attr_val(c, "group") {
            Some(v) => v.as_int().unwrap_or(1).max(1) as usize,
            None if Self::attr_is_free(c, "group") => {
                let g = match self.known_shape(c, 1) {
                    Some(w) if w.len() >= 2 && w[1] > 0 && cin % w[1] == 0 => cin / w[1],
                    Some(_) => 1,
                    None => {
                        let divs: Vec<usize> = (1..=cin).filter(|g| cin % g == 0).collect();
                        if self.ch.one_in(3) {
                            divs[self.ch.below(divs.len())]
                        } else {
                            1
                        }
                    }
                };
                let v = if g == 1 && self.ch.one_in(2) {
                    AVal::Absent
                } else {
                    AVal::Int(g as i64)
                };
                self.set_attr(c, "group", v);
                g
            }
            None => 1,
        };
        if cin % group != 0 {
            return self.reject("Conv channels not divisible by group");
        }
        let ws = match self.known_shape(c, 1) {
            Some(s) => s,
            None => {
                let mut s = vec![group * self.ch.pick(&[1usize, 2, 3]), cin / group];
                for &d in &xs[2..] {
                    s.push(1 + self.ch.below(d.clamp(1, 3)));
                }
                self.fill(c, 1, s, LeafOpts::default())?
            }
        };
        if ws.len() != xs.len() {
            return self.reject("Conv weight of the wrong rank");
        }
        if Self::is_free(c, 2) {
            self.fill(c, 2, vec![ws[0]], LeafOpts::default())?;
        }
        let kernel: Vec<i64> = ws[2..].iter().map(|&d| d as i64).collect();
        if Self::attr_is_free(c, "kernel_shape") {
            let v = if self.ch.one_in(4) {
                AVal::Ints(kernel.clone())
            } else {
                AVal::Absent
            };
            self.set_attr(c, "kernel_shape", v);
        }
        if Self::attr_is_free(c, "strides") {
            let v = if self.ch.one_in(2) {
                AVal::Ints((0..k).map(|_| self.ch.pick(&[1, 2])).collect())
            } else {
                AVal::Absent
            };
            self.set_attr(c, "strides", v);
        }
        if Self::attr_is_free(c, "dilations") {
            let v = if self.ch.one_in(2) {
                let mut d = Vec::new();
                for (i, &kk) in kernel.iter().enumerate() {
                    let fits = (kk - 1) * 2 < xs[2 + i] as i64;
                    d.push(if fits && self.ch.one_in(2) { 2 } else { 1 });
                }
                AVal::Ints(d)
            } else {
                AVal::Absent
            };
            self.set_attr(c, "dilations", v);
        }
        let mut auto = false;
        if Self::attr_is_free(c, "auto_pad") {
            let v = if self.ch.one_in(6) {
                auto = true;
                AVal::Str(
                    self.ch
                        .pick(&["SAME_UPPER", "SAME_LOWER", "VALID"])
                        .to_string(),
                )
            } else {
                AVal::Absent
            };
            self.set_attr(c, "auto_pad", v);
        }
        if Self::attr_is_free(c, "pads") {
            let v = if !auto && self.ch.one_in(2) {
                AVal::Ints((0..2 * k).map(|_| self.ch.pick(&[0, 1])).collect())
            } else {
                AVal::Absent
            };
            self.set_attr(c, "pads", v);
        }
        Ok(())
    }

    pub(super) fn plan_batchnorm(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let mut s = vec![self.ch.pick(&[1usize, 2]), self.nonzero_dim()];
                for _ in 0..self.ch.below(3) {
                    s.push(self.nonzero_dim());
                }
                self.fill(c, 0, s, LeafOpts::default())?
            }
        };
        if xs.len() < 2 {
            return self.reject("BatchNormalization input of rank < 2");
        }
        for i in 1..c.inputs.len().min(5) {
            if Self::is_free(c, i) {
                let opts = LeafOpts {
                    positive: i == 4,
                    ..Default::default()
                };
                self.fill(c, i, vec![xs[1]], opts)?;
            }
        }
        Ok(())
    }

    /// Batch dims for a matrix operand: none, or broadcast-compatible with `like`.
    fn batch_dims(&mut self, n: usize, like: &[usize]) -> Vec<usize> {
        (0..n)
            .map(|i| {
                let j = like.len().checked_sub(n - i);
                match j.map(|j| like[j]) {
                    Some(d) if !self.ch.one_in(4) => d,
                    _ => self.ch.pick(&[1, 2]),
                }
            })
            .collect()
    }

    pub(super) fn plan_matmul(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let a = match self.known_shape(c, 0) {
            Some(s) => s,
            None => {
                let ra = self.ch.pick(&[2usize, 1, 3]);
                let (m, k) = (self.dim(), self.nonzero_dim());
                let s = match (ra, self.known_shape(c, 1)) {
                    (_, Some(b)) if !b.is_empty() => {
                        let k = if b.len() == 1 { b[0] } else { b[b.len() - 2] };
                        if ra == 1 {
                            vec![k]
                        } else {
                            let batch = b[..b.len().saturating_sub(2)].to_vec();
                            let mut s = self.batch_dims(ra - 2, &batch);
                            s.extend([m, k]);
                            s
                        }
                    }
                    (1, _) => vec![k],
                    _ => {
                        let mut s = self.shape_of_rank(ra - 2);
                        s.extend([m, k]);
                        s
                    }
                };
                self.fill(c, 0, s, LeafOpts::default())?
            }
        };
        if a.is_empty() {
            return self.reject("MatMul of a scalar");
        }
        if Self::is_free(c, 1) {
            let k = a[a.len() - 1];
            let rb = self.ch.pick(&[2usize, 1, 3]);
            let s = if rb == 1 {
                vec![k]
            } else {
                let batch = a[..a.len().saturating_sub(2)].to_vec();
                let mut s = self.batch_dims(rb - 2, &batch);
                let n = self.dim();
                s.extend([k, n]);
                s
            };
            self.fill(c, 1, s, LeafOpts::default())?;
        }
        Ok(())
    }

    /// A 0/1 flag attribute: fixed, chosen when free, else its default 0.
    fn flag(&mut self, c: &mut OpCall, name: &str) -> bool {
        if Self::attr_is_free(c, name) {
            let v = self.ch.below(2) as i64;
            let a = if v == 0 && self.ch.one_in(2) {
                AVal::Absent
            } else {
                AVal::Int(v)
            };
            self.set_attr(c, name, a);
        }
        Self::attr_val(c, name).and_then(|v| v.as_int()) == Some(1)
    }

    pub(super) fn plan_gemm(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let ta = self.flag(c, "transA");
        let tb = self.flag(c, "transB");
        let (m, k) = match self.known_shape(c, 0) {
            Some(s) if s.len() == 2 => {
                if ta {
                    (s[1], s[0])
                } else {
                    (s[0], s[1])
                }
            }
            Some(_) => return self.reject("Gemm A of rank != 2"),
            None => {
                let (m, k) = match self.known_shape(c, 1) {
                    Some(b) if b.len() == 2 => (self.dim(), if tb { b[1] } else { b[0] }),
                    _ => (self.dim(), self.nonzero_dim()),
                };
                let s = if ta { vec![k, m] } else { vec![m, k] };
                let s = self.fill(c, 0, s, LeafOpts::default())?;
                if s.len() != 2 {
                    return self.reject("Gemm A of rank != 2");
                }
                if ta {
                    (s[1], s[0])
                } else {
                    (s[0], s[1])
                }
            }
        };
        let n = match self.known_shape(c, 1) {
            Some(s) if s.len() == 2 => {
                if tb {
                    s[0]
                } else {
                    s[1]
                }
            }
            Some(_) => return self.reject("Gemm B of rank != 2"),
            None => {
                let n = self.dim();
                let s = if tb { vec![n, k] } else { vec![k, n] };
                self.fill(c, 1, s, LeafOpts::default())?;
                n
            }
        };
        if Self::is_free(c, 2) {
            let shapes = [
                vec![m, n],
                vec![n],
                vec![1, n],
                vec![m, 1],
                vec![1],
                Vec::new(),
            ];
            let s = shapes[self.ch.below(shapes.len())].clone();
            self.fill(c, 2, s, LeafOpts::default())?;
        }
        Ok(())
    }

    pub(super) fn plan_layernorm(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 1)?;
        let r = xs.len();
        if r == 0 {
            return self.reject("LayerNormalization of a scalar");
        }
        self.free_attr_or(c, "axis", AVal::Int(-1));
        let axis = Self::attr_val(c, "axis")
            .and_then(|v| v.as_int())
            .unwrap_or(-1);
        let Some(ax) = normalize(axis, r) else {
            return self.reject("LayerNormalization axis out of range");
        };
        for i in 1..c.inputs.len() {
            if Self::is_free(c, i) {
                self.fill(c, i, xs[ax..].to_vec(), LeafOpts::default())?;
            }
        }
        Ok(())
    }

    /// MeanVarianceNormalization: `axes` always set. Its function body reads `axes` from the
    /// attribute with no default, and onnx's checker expands the body at opset 18 and on.
    pub(super) fn plan_mvn(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        let xs = self.operand(c, 0, 0)?;
        if Self::attr_is_free(c, "axes") {
            let v = if xs.len() == 4 && self.ch.one_in(3) {
                AVal::Ints(vec![0, 2, 3])
            } else {
                self.axes_value(c, xs.len())
            };
            self.set_attr(c, "axes", v);
        }
        Ok(())
    }

    /// Einsum: each operand's dims get letters (a letter shared between operands or repeated
    /// in one, a diagonal, stands for dims of one size), sometimes a leading ellipsis; the
    /// output is implicit or an explicit subset of the letters in a random order.
    pub(super) fn plan_einsum(&mut self, c: &mut OpCall) -> Result<(), Reject> {
        if !Self::attr_is_free(c, "equation") {
            for i in 0..c.inputs.len() {
                if Self::is_free(c, i) {
                    let s = self.base.clone();
                    self.fill_shape(c, i, s)?;
                }
            }
            return Ok(());
        }
        // Letters in use with their dims.
        let mut letters: Vec<(char, usize)> = Vec::new();
        let ellipsis = self.ch.one_in(5);
        // The broadcast shape of the ellipsis dims so far.
        let mut ell: Vec<usize> = Vec::new();
        let mut terms = Vec::new();
        for i in 0..c.inputs.len() {
            let known = self.known_shape(c, i);
            let rank = match &known {
                Some(s) => s.len(),
                None => self.ch.pick(&[2usize, 1, 3, 2, 0]),
            };
            // The ellipsis takes the leading dims of a known operand, or new ones that
            // broadcast with those seen.
            let lead = match (&known, ellipsis) {
                (_, false) => 0,
                (Some(_), true) => self.ch.below(rank.min(2) + 1),
                (None, true) => self.ch.below(3),
            };
            let mut dims = Vec::new();
            let mut term = String::new();
            if ellipsis {
                term.push_str("...");
                let mine: Vec<usize> = match &known {
                    Some(s) => s[..lead].to_vec(),
                    None => (0..lead)
                        .map(|p| match ell.len().checked_sub(lead - p) {
                            Some(j) if !self.ch.one_in(3) => ell[j],
                            Some(_) => 1,
                            None => self.nonzero_dim(),
                        })
                        .collect(),
                };
                match broadcast_shapes(&ell, &mine) {
                    Some(b) => ell = b,
                    None => return self.reject("Einsum ellipsis dims do not broadcast"),
                }
                dims.extend(mine);
            }
            let body = match &known {
                Some(s) => s[lead..].to_vec(),
                None => Vec::new(),
            };
            for p in 0..rank.saturating_sub(lead).max(body.len()) {
                let want = body.get(p).copied();
                let reuse: Vec<(char, usize)> = letters
                    .iter()
                    .copied()
                    .filter(|&(_, d)| want.is_none_or(|w| w == d))
                    .collect();
                let (l, d) = if !reuse.is_empty() && self.ch.one_in(2) {
                    reuse[self.ch.below(reuse.len())]
                } else {
                    let l = match (b'a'..=b'z')
                        .map(char::from)
                        .find(|l| letters.iter().all(|&(m, _)| m != *l))
                    {
                        Some(l) => l,
                        None => return self.reject("Einsum out of letters"),
                    };
                    let d = match want {
                        Some(w) => w,
                        None => self.dim(),
                    };
                    letters.push((l, d));
                    (l, d)
                };
                term.push(l);
                dims.push(d);
            }
            if known.is_none() {
                self.fill_shape(c, i, dims)?;
            }
            terms.push(term);
        }
        let mut eq = terms.join(",");
        if !self.ch.one_in(4) {
            let mut used: Vec<char> = Vec::new();
            for t in &terms {
                for l in t.chars().filter(char::is_ascii_alphabetic) {
                    if !used.contains(&l) {
                        used.push(l);
                    }
                }
            }
            let mut out: Vec<char> = used.into_iter().filter(|_| self.ch.one_in(2)).collect();
            for i in (1..out.len()).rev() {
                let j = self.ch.below(i + 1);
                out.swap(i, j);
            }
            eq.push_str("->");
            if ellipsis {
                eq.push_str("...");
            }
            eq.extend(out);
        }
        self.set_attr(c, "equation", AVal::Str(eq));
        Ok(())
    }
}

/// The numpy broadcast of two shapes, if they broadcast.
fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![1; n];
    for (k, o) in out.iter_mut().enumerate() {
        let x = (k + a.len()).checked_sub(n).map_or(1, |j| a[j]);
        let y = (k + b.len()).checked_sub(n).map_or(1, |j| b[j]);
        *o = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}
