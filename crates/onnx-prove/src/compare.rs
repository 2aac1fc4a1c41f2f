//! Running both sides of a fired instance in the reference interpreter on the same inputs and
//! comparing their outputs by the rule's precision: `exact` bitwise (every NaN equals every
//! NaN, -0 differs from +0), rounding within a per-dtype tolerance, `tol X` within X; NaN must
//! meet NaN and an infinity the same infinity in every mode; dtypes and shapes must agree.
//!
//! Rounding in float16, bfloat16 and float is also accepted when the right side is at least as
//! accurate as the left: both are measured against the left side run in double (its floating
//! tensors widened). A fused op that rounds once where the pattern rounded at every step
//! (LayerNormalization for its decomposition) differs from the pattern by more than the
//! tolerance exactly where the pattern loses digits to cancellation; it is not wrong there.

use onnx_proto::{type_proto, ModelProto, TensorProto};
use onnx_ref::{DType, Session, Tensor, Value};
use onnx_rules::ir::Precision;

use super::gen::Instance;
use crate::Error;

/// Trials per fired instance (trial 0 is the data the instance was built with).
pub(crate) const TRIALS: usize = 3;

/// What running both sides gave.
pub(crate) enum Ran {
    /// The left side does not run (not a valid instance).
    Rejected(String),
    Agree,
    /// The right side fails where the left side runs.
    RhsError(String),
    /// The outputs differ.
    Mismatch(String),
}

/// Relative and absolute tolerance of the rounding mode, per dtype.
pub(crate) fn rounding_tolerance(d: DType) -> f64 {
    match d {
        DType::Double => 1e-9,
        DType::Float => 1e-4,
        DType::Float16 | DType::Bfloat16 => 1e-2,
        _ => 1e-1,
    }
}

fn session(m: &ModelProto) -> Result<Session, Error> {
    match std::panic::catch_unwind(|| Session::new(m)) {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::PlanPanicked),
    }
}

fn run(s: &Session, inputs: Vec<(String, Value)>) -> Result<Vec<(String, Value)>, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.run(inputs))) {
        Ok(r) => Ok(r?),
        Err(_) => Err(Error::RunPanicked),
    }
}

/// Runs both models on the instance's trials and compares. With `runtime_limit` (the rule's
/// tag), a right side refused on the instance's first trial leaves the instance out.
pub(crate) fn run_both(
    lhs: &ModelProto,
    rhs: &ModelProto,
    inst: &Instance,
    p: Precision,
    runtime_limit: bool,
) -> Ran {
    let a = match session(lhs) {
        Ok(s) => s,
        Err(e) => return Ran::Rejected(format!("the left side cannot be planned: {e}")),
    };
    let b = match session(rhs) {
        Ok(s) => s,
        Err(e) => return Ran::RhsError(format!("the right side cannot be planned: {e}")),
    };
    let mut truth = Truth::default();
    for trial in 0..TRIALS {
        let inputs = inst.trial_inputs(trial);
        let ra = match run(&a, inputs.clone()) {
            Ok(v) => v,
            Err(e) if trial == 0 => return Ran::Rejected(format!("the left side fails: {e}")),
            Err(_) => continue,
        };
        let rb = match run(&b, inputs.clone()) {
            Ok(v) => v,
            Err(e) if runtime_limit && trial == 0 => {
                return Ran::Rejected(format!("outside the right side's runtime limit: {e}"))
            }
            Err(e) => {
                return Ran::RhsError(format!(
                    "trial {trial}: the right side fails where the left side runs: {e}\n{}",
                    describe_inputs(&inputs)
                ))
            }
        };
        for (k, ((name, va), (_, vb))) in ra.iter().zip(&rb).enumerate() {
            let mut diff = compare_values(va, vb, p, None);
            if diff.is_some() && p == Precision::Rounding && is_narrow_float(va) {
                if let Some(Value::Tensor(t)) = truth.output(lhs, &inputs, k) {
                    diff = compare_values(va, vb, p, Some(&t));
                }
            }
            if let Some(d) = diff {
                return Ran::Mismatch(format!(
                    "trial {trial}, output '{name}': {d}\n{}",
                    describe_inputs(&inputs)
                ));
            }
        }
    }
    Ran::Agree
}

/// The inputs of a trial, printed (small tensors in full).
fn describe_inputs(inputs: &[(String, Value)]) -> String {
    let mut out = String::from("inputs:");
    for (name, v) in inputs {
        if let Value::Tensor(t) = v {
            out.push_str(&format!(
                "\n  {name}: {}{:?} = {}",
                t.dtype().name().to_lowercase(),
                t.shape(),
                elements(t, 64)
            ));
        }
    }
    out
}

fn elements(t: &Tensor, max: usize) -> String {
    let vals: Vec<String> = if t.dtype().is_float() {
        t.to_f64_vec()
            .map(|v| v.iter().take(max).map(|x| fmt_f64(*x)).collect())
            .unwrap_or_default()
    } else {
        t.to_i64_vec()
            .map(|v| v.iter().take(max).map(|x| x.to_string()).collect())
            .unwrap_or_default()
    };
    let more = if t.len() > max { ", ..." } else { "" };
    format!("[{}{more}]", vals.join(", "))
}

fn fmt_f64(x: f64) -> String {
    if x == 0.0 && x.is_sign_negative() {
        "-0".into()
    } else {
        format!("{x}")
    }
}

/// The left side in double, built on first use.
#[derive(Default)]
struct Truth {
    tried: bool,
    session: Option<Session>,
}

impl Truth {
    /// Output `k` of the widened left side on `inputs` (widened too).
    fn output(&mut self, lhs: &ModelProto, inputs: &[(String, Value)], k: usize) -> Option<Value> {
        if !self.tried {
            self.tried = true;
            self.session = widen(lhs).and_then(|m| session(&m).ok());
        }
        let s = self.session.as_ref()?;
        let wide: Vec<(String, Value)> = inputs
            .iter()
            .map(|(n, v)| (n.clone(), widen_value(v)))
            .collect();
        run(s, wide).ok()?.into_iter().nth(k).map(|(_, v)| v)
    }
}

fn is_narrow_float(v: &Value) -> bool {
    matches!(v, Value::Tensor(t) if matches!(t.dtype(), DType::Float | DType::Float16 | DType::Bfloat16))
}

fn widen_value(v: &Value) -> Value {
    match v {
        Value::Tensor(t) if is_narrow_float(v) => t
            .to_f64_vec()
            .ok()
            .and_then(|d| Tensor::from_vec(t.shape(), d).ok())
            .map_or_else(|| v.clone(), Value::Tensor),
        other => other.clone(),
    }
}

const NARROW: [i32; 3] = [1, 10, 16];
const DOUBLE: i32 = 11;

/// The model with its float16, bfloat16 and float inputs, outputs and initializers in double;
/// `None` when a node names an element type (Cast, ...) or holds a tensor attribute.
fn widen(m: &ModelProto) -> Option<ModelProto> {
    let mut m = m.clone();
    let g = m.graph.as_mut()?;
    for n in &g.node {
        for a in &n.attribute {
            let typed = matches!(
                a.name.as_deref(),
                Some("to" | "dtype" | "output_dtype" | "stash_type" | "saturate")
            );
            if typed || a.t.is_some() || a.g.is_some() {
                return None;
            }
        }
    }
    for vi in g.input.iter_mut().chain(g.output.iter_mut()) {
        if let Some(type_proto::Value::TensorType(t)) =
            vi.r#type.as_mut().and_then(|t| t.value.as_mut())
        {
            if t.elem_type.is_some_and(|e| NARROW.contains(&e)) {
                t.elem_type = Some(DOUBLE);
            }
        }
    }
    for t in g.initializer.iter_mut() {
        if t.data_type.is_some_and(|e| NARROW.contains(&e)) {
            *t = widen_tensor(t)?;
        }
    }
    g.value_info.clear();
    Some(m)
}

fn widen_tensor(t: &TensorProto) -> Option<TensorProto> {
    let v = Tensor::from_proto(t).ok()?;
    let d = Tensor::from_vec(v.shape(), v.to_f64_vec().ok()?).ok()?;
    Some(d.to_proto(t.name.as_deref().unwrap_or("")))
}

fn compare_values(a: &Value, b: &Value, p: Precision, truth: Option<&Tensor>) -> Option<String> {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => compare_tensors(x, y, p, truth),
        _ => {
            let tol = onnx_opt::Tolerance {
                rtol: 0.0,
                atol: 0.0,
            };
            onnx_opt::compare_values(a, b, tol)
        }
    }
}

/// Multi-index of flat element `i` in `shape`.
fn index_of(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        if shape[k] > 0 {
            idx[k] = i % shape[k];
            i /= shape[k];
        }
    }
    idx
}

fn compare_tensors(x: &Tensor, y: &Tensor, p: Precision, truth: Option<&Tensor>) -> Option<String> {
    if x.dtype() != y.dtype() {
        return Some(format!(
            "dtype {} vs {}",
            x.dtype().name(),
            y.dtype().name()
        ));
    }
    if x.shape() != y.shape() {
        return Some(format!("shape {:?} vs {:?}", x.shape(), y.shape()));
    }
    let dtype = x.dtype();
    if dtype.is_float() {
        let (Ok(a), Ok(b)) = (x.to_f64_vec(), y.to_f64_vec()) else {
            return (x != y).then(|| "values differ".to_string());
        };
        let tol = match p {
            Precision::Exact => 0.0,
            Precision::Rounding => rounding_tolerance(dtype),
            Precision::Tolerance(t) => t,
        };
        let t: Option<Vec<f64>> = truth
            .filter(|t| t.shape() == x.shape())
            .and_then(|t| t.to_f64_vec().ok());
        for (i, (&l, &r)) in a.iter().zip(&b).enumerate() {
            // As accurate as the left side, measured against the left side in double.
            let as_accurate = t.as_ref().is_some_and(|t| {
                let e = t[i];
                e.is_finite() && (r - e).abs() <= (l - e).abs() + tol + tol * e.abs()
            });
            let same = if as_accurate {
                true
            } else if l.is_nan() || r.is_nan() {
                l.is_nan() && r.is_nan()
            } else if p == Precision::Exact {
                l.to_bits() == r.to_bits()
            } else if l.is_infinite() || r.is_infinite() {
                l == r
            } else {
                (l - r).abs() <= tol + tol * l.abs().max(r.abs())
            };
            if !same {
                let how = match p {
                    Precision::Exact => "exact".to_string(),
                    _ => format!("tolerance {tol:e}"),
                };
                let reference = t
                    .as_ref()
                    .map(|t| format!(", left side in double {}", fmt_f64(t[i])))
                    .unwrap_or_default();
                return Some(format!(
                    "element {:?}: left {} right {} ({}, {how}{reference})",
                    index_of(i, x.shape()),
                    fmt_f64(l),
                    fmt_f64(r),
                    dtype.name().to_lowercase()
                ));
            }
        }
        return None;
    }
    if let (Ok(a), Ok(b)) = (x.to_i64_vec(), y.to_i64_vec()) {
        return a.iter().zip(&b).position(|(l, r)| l != r).map(|i| {
            format!(
                "element {:?}: left {} right {} ({})",
                index_of(i, x.shape()),
                a[i],
                b[i],
                dtype.name().to_lowercase()
            )
        });
    }
    (x != y).then(|| "values differ".to_string())
}
