//! Differential verification: run two models on the same seeded random inputs in the reference
//! interpreter and compare every output (same dtype and shape; floats within rtol/atol with
//! NaN equal to NaN; everything else exactly).

use std::collections::BTreeMap;

use onnx_proto::ModelProto;
use onnx_ref::{Session, Tensor, Value};

/// Tolerances for floating-point outputs. For float16 and bfloat16 outputs they are at least
/// 1e-2 (relative and absolute): one more rounding in a 16-bit type already moves a value by
/// about 1e-3 (float16) or 8e-3 (bfloat16).
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            rtol: 1e-3,
            atol: 1e-4,
        }
    }
}

/// The first difference found between two models' outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// The random input (0-based) it happened on, or the given data set's index.
    pub trial: usize,
    /// It happened on a given data set (`trial` is its index), not a random input.
    pub data_set: bool,
    /// The output that differs.
    pub output: String,
    /// How it differs.
    pub detail: String,
}

/// Errors of verification itself (a model the interpreter cannot run, ...).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("the {which} model cannot run in the reference interpreter")]
    /// The interpreter cannot load a model.
    Session {
        /// `original` or `optimized`.
        which: &'static str,
        #[source]
        /// Why.
        source: Box<onnx_ref::RefError>,
    },
    #[error("trial {trial}: the {which} model failed")]
    /// A model failed on one trial.
    Run {
        /// `original` or `optimized`.
        which: &'static str,
        /// The trial.
        trial: usize,
        #[source]
        /// Why.
        source: Box<onnx_ref::RefError>,
    },
    /// The interpreter panicked running the original model (a bug in the interpreter).
    #[error("trial {trial}: the interpreter panicked running the original model")]
    Panic {
        /// The trial.
        trial: usize,
    },
    #[error("trial {trial}: the models have different outputs: {left:?} vs {right:?}")]
    /// The models' output names differ.
    Outputs {
        /// The trial.
        trial: usize,
        /// The original's output names.
        left: Vec<String>,
        /// The optimized model's output names.
        right: Vec<String>,
    },
}

/// Runs both models on `trials` seeded random inputs; `Ok(None)` when all outputs agree.
pub fn compare_models(
    original: &ModelProto,
    optimized: &ModelProto,
    trials: usize,
    dims: &BTreeMap<String, i64>,
    tol: Tolerance,
) -> Result<Option<Mismatch>, VerifyError> {
    compare_models_on(original, optimized, &[], trials, dims, tol).map(|(m, _)| m)
}

/// What a check compared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// Given input sets (test data) both models ran on.
    pub data_sets: usize,
    /// Random inputs both models ran on.
    pub random: usize,
    /// Why the random trials stopped early: the original model fails on random inputs (only
    /// after every given data set agreed; without data sets that is an error).
    pub random_skipped: Option<String>,
}

/// One input set: (graph input name, value).
pub type InputSet = Vec<(String, Value)>;

/// Runs both models on every given input set (test data), then on `trials` seeded random
/// inputs. Where the original fails on a random input after the given sets agreed, the random
/// trials stop and `Checked::random_skipped` says why.
pub fn compare_models_on(
    original: &ModelProto,
    optimized: &ModelProto,
    data: &[InputSet],
    trials: usize,
    dims: &BTreeMap<String, i64>,
    tol: Tolerance,
) -> Result<(Option<Mismatch>, Checked), VerifyError> {
    // Weights are decoded when a run first reads them and dropped after their last read, and
    // models with large weights run one after the other: the check then holds one model's live
    // weights and activations at a time, not both models' every weight.
    let side_by_side = weight_bytes(original) + weight_bytes(optimized) < SIDE_BY_SIDE_MAX_BYTES;
    let a = Session::with_lazy_weights(original).map_err(|source| VerifyError::Session {
        which: "original",
        source: Box::new(source),
    })?;
    let b = Session::with_lazy_weights(optimized).map_err(|source| VerifyError::Session {
        which: "optimized",
        source: Box::new(source),
    })?;
    let mut checked = Checked::default();
    for (k, inputs) in data.iter().enumerate() {
        if let Some(mut m) = run_pair(&a, &b, inputs, k, tol, side_by_side)? {
            m.data_set = true;
            return Ok((Some(m), checked));
        }
        checked.data_sets += 1;
    }
    for trial in 0..trials {
        let inputs = match onnx_ref::random_inputs(original, 0x5eed + trial as u64, dims) {
            Ok(v) => v
                .into_iter()
                .map(|(name, v)| (name, index_safe(v)))
                .collect::<Vec<_>>(),
            Err(e) if checked.data_sets > 0 => {
                checked.random_skipped = Some(e.to_string());
                break;
            }
            Err(e) => {
                return Err(VerifyError::Run {
                    which: "original",
                    trial,
                    source: Box::new(e),
                })
            }
        };
        match run_pair(&a, &b, &inputs, trial, tol, side_by_side) {
            Ok(Some(m)) => return Ok((Some(m), checked)),
            Ok(None) => checked.random += 1,
            Err(VerifyError::Run {
                which: "original",
                source,
                ..
            }) if checked.data_sets > 0 => {
                checked.random_skipped = Some(source.to_string());
                break;
            }
            Err(VerifyError::Panic { .. }) if checked.data_sets > 0 => {
                checked.random_skipped = Some("the interpreter panicked".into());
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok((None, checked))
}

/// Models whose initializers together reach this size run one after the other in the check.
const SIDE_BY_SIDE_MAX_BYTES: usize = 16 << 20;

/// Encoded size of a model's main-graph initializers.
fn weight_bytes(model: &ModelProto) -> usize {
    model.graph.as_ref().map_or(0, |g| {
        g.initializer
            .iter()
            .map(onnx_proto::Message::encoded_len)
            .sum()
    })
}

/// Runs both sessions on one input set and compares their outputs: side by side (one thread
/// each) or one after the other.
fn run_pair(
    a: &Session,
    b: &Session,
    inputs: &InputSet,
    trial: usize,
    tol: Tolerance,
    side_by_side: bool,
) -> Result<Option<Mismatch>, VerifyError> {
    {
        let (ra, rb) = if side_by_side {
            std::thread::scope(|scope| {
                let original = scope.spawn(|| a.run(inputs.clone()));
                let rb = b.run(inputs.clone());
                let ra = original.join().map_err(|_| VerifyError::Panic { trial })?;
                Ok::<_, VerifyError>((ra, rb))
            })?
        } else {
            let ra =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.run(inputs.clone())))
                    .map_err(|_| VerifyError::Panic { trial })?;
            (ra, b.run(inputs.clone()))
        };
        let ra = ra.map_err(|e| VerifyError::Run {
            which: "original",
            trial,
            source: Box::new(e),
        })?;
        let rb = rb.map_err(|e| VerifyError::Run {
            which: "optimized",
            trial,
            source: Box::new(e),
        })?;
        let names_a: Vec<String> = ra.iter().map(|(n, _)| n.clone()).collect();
        let names_b: Vec<String> = rb.iter().map(|(n, _)| n.clone()).collect();
        if names_a != names_b {
            return Err(VerifyError::Outputs {
                trial,
                left: names_a,
                right: names_b,
            });
        }
        for ((name, va), (_, vb)) in ra.iter().zip(&rb) {
            if let Some(detail) = compare_values(va, vb, tol) {
                return Ok(Some(Mismatch {
                    trial,
                    data_set: false,
                    output: name.clone(),
                    detail,
                }));
            }
        }
    }
    Ok(None)
}

/// Integer inputs are drawn from {0, 1}: such inputs are usually indices (token ids, masks,
/// positions), and 0 and 1 are in bounds for any non-empty axis.
fn index_safe(v: Value) -> Value {
    match v {
        Value::Tensor(Tensor::I64(a)) => {
            Value::Tensor(Tensor::I64(a.mapv(|x| x.rem_euclid(2)).into_shared()))
        }
        Value::Tensor(Tensor::I32(a)) => {
            Value::Tensor(Tensor::I32(a.mapv(|x| x.rem_euclid(2)).into_shared()))
        }
        other => other,
    }
}

/// `None` when equal within tolerance, else a description of the first difference.
pub fn compare_values(a: &Value, b: &Value, tol: Tolerance) -> Option<String> {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => compare_tensors(x, y, tol),
        (Value::Sequence(x), Value::Sequence(y)) => {
            if x.items.len() != y.items.len() {
                return Some(format!(
                    "sequence lengths {} vs {}",
                    x.items.len(),
                    y.items.len()
                ));
            }
            x.items
                .iter()
                .zip(&y.items)
                .enumerate()
                .find_map(|(i, (p, q))| {
                    compare_values(p, q, tol).map(|d| format!("element {i}: {d}"))
                })
        }
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => None,
            (Some(p), Some(q)) => compare_values(p, q, tol),
            _ => Some("one optional is empty, the other is not".into()),
        },
        _ if a == b => None,
        _ => Some(format!("values differ: {} vs {}", a.kind(), b.kind())),
    }
}

fn compare_tensors(x: &Tensor, y: &Tensor, tol: Tolerance) -> Option<String> {
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
    let tol = if matches!(
        x.dtype(),
        onnx_ref::DType::Float16 | onnx_ref::DType::Bfloat16
    ) {
        Tolerance {
            rtol: tol.rtol.max(1e-2),
            atol: tol.atol.max(1e-2),
        }
    } else {
        tol
    };
    if x.dtype().is_float() {
        let (Ok(p), Ok(q)) = (x.to_f64_vec(), y.to_f64_vec()) else {
            return (x != y).then(|| "values differ".to_string());
        };
        for (i, (a, b)) in p.iter().zip(&q).enumerate() {
            let same = (a.is_nan() && b.is_nan())
                || a == b
                || (a - b).abs() <= tol.atol + tol.rtol * b.abs();
            if !same {
                return Some(format!(
                    "element {i}: {a} vs {b} (rtol {}, atol {})",
                    tol.rtol, tol.atol
                ));
            }
        }
        None
    } else if x != y {
        Some("values differ".into())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that fails on random inputs (its Reshape target fits only 24 elements) is
    /// checked on the given sets alone: with a set, the random trials stop and say why; a set
    /// where the two models differ is a mismatch on that set; with no set, the failure is an
    /// error.
    #[test]
    fn given_sets_check_where_random_inputs_fail() {
        let text = |body: &str| {
            onnx_text::parse_model(&format!(
                "<ir_version: 7, opset_import: [\"\" : 13]>\ng (float[N] x) => (float[2,12] y) {{\n  s = Constant <value = int64[2] {{2, 12}}> ()\n  {body}\n}}"
            ))
            .unwrap()
        };
        let a = text("y = Reshape (x, s)");
        let b = text("r = Reshape (x, s)\n  y = Relu (r)");
        let x: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let set = vec![(
            "x".to_string(),
            Value::Tensor(Tensor::from_vec(&[24], x.clone()).unwrap()),
        )];
        let dims = BTreeMap::new();
        let tol = Tolerance::default();
        let (m, c) = compare_models_on(&a, &a, std::slice::from_ref(&set), 3, &dims, tol).unwrap();
        assert_eq!(m, None);
        assert_eq!(c.data_sets, 1);
        assert_eq!(c.random, 0);
        assert!(
            c.random_skipped.as_deref().unwrap().contains("Reshape"),
            "{c:?}"
        );
        // Non-negative inputs: Relu changes nothing, the sets agree.
        assert_eq!(
            compare_models_on(&a, &b, std::slice::from_ref(&set), 3, &dims, tol)
                .unwrap()
                .0,
            None
        );
        let neg = vec![(
            "x".to_string(),
            Value::Tensor(
                Tensor::from_vec(&[24], x.iter().map(|v| -v - 1.0).collect::<Vec<f32>>()).unwrap(),
            ),
        )];
        let (m, _) = compare_models_on(&a, &b, &[set, neg], 3, &dims, tol).unwrap();
        let m = m.unwrap();
        assert!(m.data_set && m.trial == 1, "{m:?}");
        assert!(matches!(
            compare_models_on(&a, &a, &[], 3, &dims, tol),
            Err(VerifyError::Run {
                which: "original",
                ..
            })
        ));
    }
}
