//! The generator's helpers for planners: dims from the instance's pool, leaves (graph inputs
//! and initializers, with the guard's hints applied), literals, and attribute choices.

use onnx_ref::{DType, Tensor};
use onnx_rules::ir::{Literal, VarId};

use super::{
    dtype_of_type_str, type_str, AState, AVal, Binding, Gen, GenValue, LeafOpts, OpCall, Reject,
    Slot, ValueKind, MAX_ELEMENTS,
};
use crate::choice::{float_tensor, int_tensor, random_tensor, DataOpts};
use crate::hints::{eval, GVal};

/// The largest dim a `hint dim(v, i) == N` sets (larger hints are ignored): big enough for a
/// few blocks of a block-quantized weight (MatMulNBits' smallest block is 16), small enough
/// to keep instances quick.
const MAX_HINTED_DIM: i64 = 64;

impl Gen<'_> {
    /// A shape of rank `r` from the pool. Always reads six draws, so that a shrunk rank leaves
    /// the draws after it in place.
    pub fn shape_of_rank(&mut self, r: usize) -> Vec<usize> {
        let mut s: Vec<usize> = (0..r.max(6)).map(|_| self.dim()).collect();
        s.truncate(r);
        s
    }

    /// A dim from the instance's pool.
    pub fn dim(&mut self) -> usize {
        let i = self.ch.below(self.pool.len());
        self.pool[i]
    }

    /// A dim from the pool that is not 0.
    pub fn nonzero_dim(&mut self) -> usize {
        let d = self.dim();
        if d == 0 {
            1
        } else {
            d
        }
    }

    pub fn value_shape(&self, i: usize) -> Vec<usize> {
        self.values[i].tensor.shape().to_vec()
    }

    /// Shape of input `i` when it is known.
    pub fn known_shape(&self, c: &OpCall, i: usize) -> Option<Vec<usize>> {
        match c.inputs.get(i)? {
            Slot::Known(k) => Some(self.value_shape(*k)),
            _ => None,
        }
    }

    pub fn first_known_shape(&self, c: &OpCall) -> Option<Vec<usize>> {
        (0..c.inputs.len()).find_map(|i| self.known_shape(c, i))
    }

    pub fn is_free(c: &OpCall, i: usize) -> bool {
        matches!(c.inputs.get(i), Some(Slot::Free { .. }))
    }

    /// The dtype a free input takes: the dtype of a known input of the same type parameter,
    /// else the instance dtype when allowed, else a common allowed one.
    pub fn slot_dtype(&self, c: &OpCall, i: usize) -> DType {
        let f = &c.schema.inputs[c.formal[i]];
        if let Some(d) = dtype_of_type_str(&f.type_str) {
            return d;
        }
        for (j, s) in c.inputs.iter().enumerate() {
            if let (true, Slot::Known(k)) = (j != i, s) {
                if c.schema.inputs[c.formal[j]].type_str == f.type_str {
                    return self.values[*k].tensor.dtype();
                }
            }
        }
        let allowed = c.schema.allowed_types(&f.type_str).unwrap_or(&[]);
        let ok = |d: DType| type_str(d).is_some_and(|t| allowed.contains(&t));
        if allowed.is_empty() || ok(self.dtype) {
            return self.dtype;
        }
        for d in [
            DType::Float,
            DType::Int64,
            DType::Int32,
            DType::Double,
            DType::Float16,
            DType::Bool,
        ] {
            if ok(d) {
                return d;
            }
        }
        // String only when nothing else is allowed (the string ops).
        let dtypes: Vec<DType> = allowed
            .iter()
            .filter_map(|t| dtype_of_type_str(t))
            .collect();
        dtypes
            .iter()
            .copied()
            .find(|&d| d != DType::String)
            .or(dtypes.first().copied())
            .unwrap_or(self.dtype)
    }

    /// Makes free input `i` a leaf of `shape` (hints may change it); returns the actual shape.
    pub fn fill(
        &mut self,
        c: &mut OpCall,
        i: usize,
        shape: Vec<usize>,
        opts: LeafOpts,
    ) -> Result<Vec<usize>, Reject> {
        let (var, lit) = match &c.inputs[i] {
            Slot::Free { var, lit } => (*var, lit.clone()),
            Slot::Known(k) => return Ok(self.value_shape(*k)),
            Slot::Absent => return Ok(Vec::new()),
        };
        if let Some(v) = var {
            if let Some(Binding::Value(k)) = &self.env[v.0 as usize] {
                let k = *k;
                c.inputs[i] = Slot::Known(k);
                return Ok(self.value_shape(k));
            }
        }
        let dtype = opts.dtype.unwrap_or_else(|| self.slot_dtype(c, i));
        let k = self.make_leaf(var, lit.as_ref(), shape, dtype, opts)?;
        c.inputs[i] = Slot::Known(k);
        Ok(self.value_shape(k))
    }

    pub(super) fn eval_int(&self, e: onnx_rules::ir::ExprId) -> Option<i64> {
        eval(self.rule, e, self)?.as_int()
    }

    pub(super) fn make_leaf(
        &mut self,
        var: Option<VarId>,
        lit: Option<&Literal>,
        mut shape: Vec<usize>,
        mut dtype: DType,
        opts: LeafOpts,
    ) -> Result<usize, Reject> {
        let hints = self.hints;
        if let Some(v) = var {
            if let Some(&e) = hints.rank.get(&v) {
                if let Some(r) = self.eval_int(e).filter(|r| (0..=6).contains(r)) {
                    let r = r as usize;
                    while shape.len() > r {
                        shape.remove(0);
                    }
                    while shape.len() < r {
                        let d = self.nonzero_dim();
                        shape.insert(0, d);
                    }
                }
            }
            for &(hv, i, e) in &hints.dims {
                if hv != v {
                    continue;
                }
                let n = shape.len() as i64;
                let idx = if i < 0 { i + n } else { i };
                if let (true, Some(d)) = ((0..n).contains(&idx), self.eval_int(e)) {
                    if (0..=MAX_HINTED_DIM).contains(&d) {
                        shape[idx as usize] = d as usize;
                    }
                }
            }
            if let Some(d) = hints.dtype.get(&v).and_then(|&d| DType::from_code(d)) {
                dtype = d;
            }
        }
        if shape.iter().product::<usize>() > MAX_ELEMENTS {
            return self.reject("a leaf over the size limit");
        }
        let random_const = self.ch.one_in(10);
        // `nonneg(v)` / `in_range(v, a, b)`: v is a graph input clipped to the range (integer
        // Clip needs opset 12), else a constant within it.
        let range = var
            .and_then(|v| hints.ranges.get(&v).copied())
            .filter(|_| dtype.is_integer() && dtype != DType::Bool);
        let konst = lit.is_some()
            || opts.konst
            || opts.data.is_some()
            || var.is_some_and(|v| hints.consts.contains(&v))
            || random_const
            || (range.is_some() && self.opset < 12);
        let data = DataOpts {
            special: self.special && !konst && (self.special_ints || dtype.is_float()),
            positive: opts.positive,
            small: var.is_some_and(|v| hints.small.contains(&v)),
            fill: var.and_then(|v| hints.fill.get(&v).copied()),
            avoid: var.and_then(|v| hints.avoid.get(&v).copied()),
            halves: var.is_some_and(|v| hints.halves.contains(&v)),
            counts: var.is_some_and(|v| hints.counts.contains(&v)),
        };
        // `hint value(v) == E`: the constant E itself (before what the op's plan chose).
        let hinted = var
            .and_then(|v| hints.values.get(&v).copied())
            .and_then(|e| eval(self.rule, e, self));
        let was_hinted = hinted.is_some();
        let tensor = if let Some(g) = hinted {
            let (vals, shape): (Option<Vec<f64>>, Vec<usize>) = match &g {
                crate::hints::GVal::List(l) => {
                    (l.iter().map(|x| x.as_f64()).collect(), vec![l.len()])
                }
                other => (other.as_f64().map(|x| vec![x]), Vec::new()),
            };
            let Some(vals) = vals else {
                return self.reject("a hinted value is not numbers");
            };
            let made = if dtype.is_float() {
                crate::choice::float_tensor(dtype, &shape, vals)
            } else {
                crate::choice::int_tensor(dtype, &shape, vals.iter().map(|&x| x as i64).collect())
            };
            match made {
                Some(t) => t,
                None => return self.reject(format!("cannot make a hinted {}", dtype.name())),
            }
        } else if let Some(t) = opts.data {
            t
        } else if let Some(l) = lit {
            self.literal_tensor(l, dtype, &shape)?
        } else {
            match random_tensor(&mut self.rng, dtype, &shape, &data) {
                Some(t) => t,
                None => return self.reject(format!("cannot generate {}", dtype.name())),
            }
        };
        let tensor = match range {
            Some((lo, hi)) if konst && lit.is_none() && !was_hinted => {
                let clamp = |x: i64| x.max(lo.unwrap_or(i64::MIN)).min(hi.unwrap_or(i64::MAX));
                let vals = tensor.to_i64_vec().map_err(|e| Reject(e.to_string()))?;
                let shape = tensor.shape().to_vec();
                match crate::choice::int_tensor(
                    dtype,
                    &shape,
                    vals.into_iter().map(clamp).collect(),
                ) {
                    Some(t) => t,
                    None => return self.reject("cannot clamp a leaf to its range"),
                }
            }
            _ => tensor,
        };
        let base = match var {
            Some(v) => self.rule.var(v).name.clone(),
            None if konst => "c".to_string(),
            None => "in".to_string(),
        };
        let name = self.fresh_name(&base);
        let k = self.push_value(GenValue {
            name,
            tensor,
            kind: if konst {
                ValueKind::Init
            } else {
                ValueKind::Input
            },
            data,
            container: None,
        });
        let k = match range {
            Some((lo, hi)) if !konst => self.clipped(k, dtype, lo, hi)?,
            _ => k,
        };
        if let Some(v) = var {
            self.env[v.0 as usize] = Some(Binding::Value(k));
        }
        Ok(k)
    }

    /// `Clip(x, lo, hi)` of value `x` (an absent side does not clamp): a computed value whose
    /// range the engine's range facts see.
    fn clipped(
        &mut self,
        x: usize,
        dtype: DType,
        lo: Option<i64>,
        hi: Option<i64>,
    ) -> Result<usize, Reject> {
        let mut names = vec![self.values[x].name.clone()];
        for (bound, base) in [(lo, "lo"), (hi, "hi")] {
            match bound {
                Some(b) => {
                    let Some(t) = crate::choice::int_tensor(dtype, &[], vec![b]) else {
                        return self.reject("cannot write a range bound");
                    };
                    let i = self.push_initializer(t, base);
                    names.push(self.values[i].name.clone());
                }
                None => names.push(String::new()),
            }
        }
        while names.last().is_some_and(|n| n.is_empty()) {
            names.pop();
        }
        Ok(self.add_node("Clip", "", names, Vec::new(), 1, self.opset)?[0])
    }

    /// A constant whose every element equals the literal (a list literal: 1-D, those
    /// elements). For 0 in a floating type, sometimes -0.0, which the literal must not match.
    pub(super) fn literal_tensor(
        &mut self,
        l: &Literal,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, Reject> {
        let neg_zero = self.ch.one_in(8);
        let (vals, shape): (Vec<f64>, Vec<usize>) = match l {
            Literal::List(items) => (
                items
                    .iter()
                    .map(|i| GVal::from(i).as_f64().unwrap_or(f64::NAN))
                    .collect(),
                vec![items.len()],
            ),
            Literal::Str(_) => return self.reject("a string literal input"),
            other => {
                let mut x = GVal::from(other).as_f64().unwrap_or(f64::NAN);
                if x == 0.0 && neg_zero && dtype.is_float() {
                    x = -0.0;
                }
                (vec![x; shape.iter().product()], shape.to_vec())
            }
        };
        let t = if dtype.is_float() {
            float_tensor(dtype, &shape, vals)
        } else {
            if vals.iter().any(|v| v.fract() != 0.0 || !v.is_finite()) {
                return self.reject("a fractional literal in an integer slot");
            }
            int_tensor(dtype, &shape, vals.iter().map(|&v| v as i64).collect())
        };
        match t {
            Some(t) => Ok(t),
            None => self.reject("cannot build the literal"),
        }
    }

    pub(super) fn fresh_name(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.names.contains(&name) {
            k += 1;
            name = format!("{base}{k}");
        }
        self.names.insert(name.clone());
        name
    }

    /// Adds tensor `t` as an initializer with a fresh name from `base`.
    pub(super) fn push_initializer(&mut self, t: onnx_ref::Tensor, base: &str) -> usize {
        let name = self.fresh_name(base);
        self.push_value(GenValue {
            name,
            tensor: t,
            kind: ValueKind::Init,
            data: DataOpts::default(),
            container: None,
        })
    }

    pub(super) fn push_value(&mut self, v: GenValue) -> usize {
        let k = self.values.len();
        self.by_name.insert(v.name.clone(), k);
        self.values.push(v);
        k
    }

    /// Index of the attribute slot `name`.
    pub fn attr_index(c: &OpCall, name: &str) -> Option<usize> {
        c.attrs.iter().position(|a| a.name == name)
    }

    pub fn attr_is_free(c: &OpCall, name: &str) -> bool {
        Self::attr_index(c, name).is_some_and(|i| matches!(c.attrs[i].state, AState::Free))
    }

    /// The value of an attribute once fixed or chosen (absent attributes: `None`).
    pub fn attr_val(c: &OpCall, name: &str) -> Option<AVal> {
        let i = Self::attr_index(c, name)?;
        match &c.attrs[i].state {
            AState::Fixed(AVal::Absent) | AState::Done(AVal::Absent) | AState::Free => None,
            AState::Fixed(v) | AState::Done(v) => Some(v.clone()),
        }
    }

    /// The variable an attribute slot binds.
    pub fn attr_var(c: &OpCall, name: &str) -> Option<VarId> {
        Self::attr_index(c, name).and_then(|i| c.attrs[i].var)
    }

    /// Frees an attribute the generator chose (a preset the planner overrides); one the
    /// pattern fixes is kept.
    pub fn unset_attr(c: &mut OpCall, name: &str) {
        if let Some(i) = Self::attr_index(c, name) {
            if matches!(c.attrs[i].state, AState::Done(_)) {
                c.attrs[i].state = AState::Free;
            }
        }
    }

    /// Chooses a free attribute (hints on its variable win); fixed ones are kept.
    pub fn set_attr(&mut self, c: &mut OpCall, name: &str, candidate: AVal) {
        let Some(i) = Self::attr_index(c, name) else {
            return;
        };
        if !matches!(c.attrs[i].state, AState::Free) {
            return;
        }
        let mut v = candidate;
        if let Some(var) = c.attrs[i].var {
            if let Some(&e) = self.hints.attr_eq.get(&var) {
                if let Some(g) = eval(self.rule, e, self) {
                    v = AVal::from_gval(g);
                }
            }
            if let Some(&x) = self.hints.fill.get(&var) {
                v = match v {
                    AVal::Ints(l) => AVal::Ints(vec![x as i64; l.len()]),
                    AVal::Floats(l) => AVal::Floats(vec![x; l.len()]),
                    AVal::Int(_) => AVal::Int(x as i64),
                    AVal::Float(_) => AVal::Float(x),
                    other => other,
                };
            }
            self.env[var.0 as usize] = Some(match &v {
                AVal::Absent => Binding::Absent,
                other => Binding::Attr(other.clone()),
            });
        }
        if let AVal::Ints(l) = &v {
            self.lists.insert(name.to_string(), l.clone());
        }
        c.attrs[i].state = AState::Done(v);
    }
}
