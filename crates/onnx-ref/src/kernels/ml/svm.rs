//! Support vector machines of `ai.onnx.ml` (opset 1): SVMClassifier and SVMRegressor, with the
//! LINEAR, POLY, RBF and SIGMOID kernels.
//!
//! Two modes, as in libsvm/liblinear: with support vectors (`vectors_per_class` or
//! `n_supports` > 0) the classifier runs one-vs-one pairwise classifiers that vote, optionally
//! turned into class probabilities by Platt scaling (`prob_a`, `prob_b`) and pairwise coupling;
//! without them the model is linear (`coefficients` per class, `rho[0]` as intercept). Scores
//! and labels follow onnxruntime, including its binary-case score columns.

use super::classifier::{read_transform, ClassLabels, Label};
use super::scores::{classifier_scores, logistic, SecondClass};
use super::tree::input_rows;
use super::ML;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::tensor::Tensor;
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(ML, "SVMClassifier", 1, 5, svm_classifier);
    reg.register(ML, "SVMRegressor", 1, 5, svm_regressor);
}

/// A kernel function with its parameters (`kernel_params` = gamma, coef0, degree).
#[derive(Debug, Clone, Copy)]
enum Kernel {
    Linear,
    Poly { gamma: f64, coef0: f64, degree: f64 },
    Rbf { gamma: f64 },
    Sigmoid { gamma: f64, coef0: f64 },
}

impl Kernel {
    fn read(ctx: &KernelCtx) -> Result<Kernel> {
        let params = ctx.attr_floats("kernel_params").unwrap_or_default();
        let (gamma, coef0, degree) = match params {
            [] => (0.0, 0.0, 0.0),
            [g, c, d, ..] => (f64::from(*g), f64::from(*c), f64::from(*d)),
            other => {
                return Err(ctx.err(format!(
                    "kernel_params needs gamma, coef0 and degree, got {} values",
                    other.len()
                )))
            }
        };
        Ok(match ctx.attr_string("kernel_type", "LINEAR")?.as_str() {
            "LINEAR" => Kernel::Linear,
            "POLY" => Kernel::Poly {
                gamma,
                coef0,
                degree,
            },
            "RBF" => Kernel::Rbf { gamma },
            "SIGMOID" => Kernel::Sigmoid { gamma, coef0 },
            other => {
                return Err(ctx.err(format!(
                    "kernel_type must be LINEAR, POLY, RBF or SIGMOID, got '{other}'"
                )))
            }
        })
    }

    fn eval(self, a: &[f64], b: &[f32]) -> f64 {
        let dot = || a.iter().zip(b).map(|(x, &y)| x * f64::from(y)).sum::<f64>();
        match self {
            Kernel::Linear => dot(),
            Kernel::Poly {
                gamma,
                coef0,
                degree,
            } => (gamma * dot() + coef0).powf(degree),
            Kernel::Rbf { gamma } => {
                let sq: f64 = a
                    .iter()
                    .zip(b)
                    .map(|(x, &y)| (x - f64::from(y)).powi(2))
                    .sum();
                (-gamma * sq).exp()
            }
            Kernel::Sigmoid { gamma, coef0 } => (gamma * dot() + coef0).tanh(),
        }
    }
}

/// A required float list attribute.
fn required_floats<'a>(ctx: &KernelCtx<'a>, name: &str) -> Result<&'a [f32]> {
    ctx.attr_floats(name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| ctx.err(format!("attribute '{name}' is required")))
}

/// Platt scaling of one pairwise decision value (libsvm's sigmoid_predict).
fn sigmoid_probability(score: f32, a: f32, b: f32) -> f32 {
    1.0 - logistic(f64::from(score * a + b)) as f32
}

/// Class probabilities from pairwise probabilities `r` (`k` × `k`, row-major): the second
/// method of Wu, Lin and Weng (2004), as libsvm and onnxruntime compute it, in f32.
fn multiclass_probability(k: usize, r: &[f32]) -> Vec<f32> {
    let mut q = vec![0f32; k * k];
    let mut qp = vec![0f32; k];
    let mut p = vec![1.0 / k as f32; k];
    let eps = 0.005 / k as f32;
    for t in 0..k {
        for j in 0..t {
            q[t * k + t] += r[j * k + t] * r[j * k + t];
            q[t * k + j] = q[j * k + t];
        }
        for j in t + 1..k {
            q[t * k + t] += r[j * k + t] * r[j * k + t];
            q[t * k + j] = -r[j * k + t] * r[t * k + j];
        }
    }
    for _ in 0..100 {
        let mut pqp = 0f32;
        for t in 0..k {
            qp[t] = (0..k).map(|j| q[t * k + j] * p[j]).sum();
            pqp += p[t] * qp[t];
        }
        let max_error = qp.iter().map(|v| (v - pqp).abs()).fold(0f32, f32::max);
        if max_error < eps {
            break;
        }
        for t in 0..k {
            let diff = (-qp[t] + pqp) / q[t * k + t];
            p[t] += diff;
            pqp = (pqp + diff * (diff * q[t * k + t] + 2.0 * qp[t])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[t * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
    p
}

/// The first index of the largest value.
fn argmax<T: PartialOrd + Copy>(v: &[T]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if v.get(best).is_some_and(|b| x > b) {
            best = i;
        }
    }
    best
}

/// The one-vs-one part of an SVC model: support vectors grouped by class.
struct Svc<'a> {
    kernel: Kernel,
    /// Support vectors, `features` values each.
    vectors: &'a [f32],
    features: usize,
    /// First support vector of each class, and how many it has.
    starts: Vec<usize>,
    counts: Vec<usize>,
    /// `[classes - 1, vectors]`: the dual coefficients.
    coefficients: &'a [f32],
    rho: &'a [f32],
}

impl Svc<'_> {
    fn vector_count(&self) -> usize {
        self.counts.iter().sum()
    }

    /// The pairwise decision values (i < j, in order) and the votes per class of one row.
    fn decide(&self, row: &[f64]) -> (Vec<f32>, Vec<i64>) {
        let n_vectors = self.vector_count();
        let kernels: Vec<f64> = self
            .vectors
            .chunks_exact(self.features.max(1))
            .take(n_vectors)
            .map(|sv| self.kernel.eval(row, sv))
            .collect();
        let classes = self.counts.len();
        let mut votes = vec![0i64; classes];
        let mut scores = Vec::with_capacity(classes * classes.saturating_sub(1) / 2);
        let block = |coef_row: usize, class: usize| -> f64 {
            let (start, count) = (self.starts[class], self.counts[class]);
            let coef = &self.coefficients[coef_row * n_vectors + start..][..count];
            coef.iter()
                .zip(&kernels[start..start + count])
                .map(|(&c, &k)| f64::from(c) * k)
                .sum()
        };
        for i in 0..classes {
            for j in i + 1..classes {
                let s = block(j - 1, i) + block(i, j) + f64::from(self.rho[scores.len()]);
                votes[if s > 0.0 { i } else { j }] += 1;
                scores.push(s as f32);
            }
        }
        (scores, votes)
    }
}

fn svm_classifier(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let (n, f, xv) = input_rows(ctx, x)?;
    let labels = ClassLabels::read(ctx, "classlabels_ints")?;
    let classes = labels.len();
    if classes == 0 {
        return Err(ctx.err("one of classlabels_strings, classlabels_ints is required"));
    }
    let coefficients = required_floats(ctx, "coefficients")?;
    let rho = required_floats(ctx, "rho")?;
    let prob_a = ctx.attr_floats("prob_a").unwrap_or_default();
    let prob_b = ctx.attr_floats("prob_b").unwrap_or_default();
    if prob_a.len() != prob_b.len() {
        return Err(ctx.err(format!(
            "{} prob_a but {} prob_b values",
            prob_a.len(),
            prob_b.len()
        )));
    }
    let have_proba = !prob_a.is_empty();
    let transform = read_transform(ctx)?;
    let all_positive = coefficients.iter().all(|&c| c >= 0.0);
    let per_class = ctx.attr_ints("vectors_per_class").unwrap_or_default();
    let mut counts = Vec::with_capacity(per_class.len());
    for &c in per_class {
        counts.push(
            usize::try_from(c)
                .map_err(|_| ctx.err(format!("vectors_per_class has negative entry {c}")))?,
        );
    }
    let n_vectors: usize = counts.iter().sum();
    let pairs = classes * (classes - 1) / 2;
    let mut picks = Vec::with_capacity(n);
    let mut rows = Vec::with_capacity(n);
    let width;
    if n_vectors == 0 {
        // Linear mode: one weight vector per class, one intercept.
        if coefficients.len() != classes * f {
            return Err(ctx.err(format!(
                "{} coefficients for {classes} classes of {f} features",
                coefficients.len()
            )));
        }
        width = classes;
        for r in 0..n {
            let row = &xv[r * f..][..f];
            let scores: Vec<f64> = coefficients
                .chunks_exact(f.max(1))
                .take(classes)
                .map(|w| Kernel::Linear.eval(row, w) + f64::from(rho[0]))
                .collect();
            let best = argmax(&scores);
            let top = scores.get(best).copied().unwrap_or(0.0);
            picks.push(if classes == 2 && !have_proba {
                let positive = if all_positive { top >= 0.5 } else { top > 0.0 };
                Label::Class(if positive { 1 } else { best })
            } else {
                Label::Class(best)
            });
            rows.push(classifier_scores(scores, transform, SecondClass::Keep));
        }
    } else {
        let sv = ctx.attr_floats("support_vectors").unwrap_or_default();
        if counts.len() != classes {
            return Err(ctx.err(format!(
                "vectors_per_class has {} entries for {classes} classes",
                counts.len()
            )));
        }
        if classes < 2 {
            return Err(ctx.err("an SVC model needs at least 2 classes"));
        }
        if sv.len() != n_vectors * f {
            return Err(ctx.err(format!(
                "{} support_vectors values for {n_vectors} vectors of {f} features",
                sv.len()
            )));
        }
        if coefficients.len() < (classes - 1) * n_vectors {
            return Err(ctx.err(format!(
                "{} coefficients for {classes} classes and {n_vectors} support vectors",
                coefficients.len()
            )));
        }
        if rho.len() < pairs || (have_proba && prob_a.len() < pairs) {
            return Err(ctx.err(format!(
                "rho, prob_a and prob_b need {pairs} values each (one per pair of classes)"
            )));
        }
        let mut starts = Vec::with_capacity(classes);
        let mut start = 0;
        for &c in &counts {
            starts.push(start);
            start += c;
        }
        let svc = Svc {
            kernel: Kernel::read(ctx)?,
            vectors: sv,
            features: f,
            starts,
            counts,
            coefficients,
            rho,
        };
        width = if have_proba {
            classes
        } else if classes > 2 {
            pairs
        } else {
            2
        };
        // Without probabilities, the one binary decision value becomes two columns.
        let second = if transform == super::scores::PostTransform::None {
            SecondClass::Negate
        } else {
            SecondClass::Complement
        };
        for r in 0..n {
            let (scores, votes) = svc.decide(&xv[r * f..][..f]);
            picks.push(Label::Class(argmax(&votes)));
            let scores: Vec<f64> = if have_proba {
                let mut pairwise = vec![0f32; classes * classes];
                let mut k = 0;
                for i in 0..classes {
                    for j in i + 1..classes {
                        let p = sigmoid_probability(scores[k], prob_a[k], prob_b[k])
                            .clamp(1e-7, 1.0 - 1e-7);
                        pairwise[i * classes + j] = p;
                        pairwise[j * classes + i] = 1.0 - p;
                        k += 1;
                    }
                }
                multiclass_probability(classes, &pairwise)
                    .into_iter()
                    .map(f64::from)
                    .collect()
            } else {
                scores.into_iter().map(f64::from).collect()
            };
            let second = if have_proba {
                SecondClass::Keep
            } else {
                second
            };
            rows.push(classifier_scores(scores, transform, second));
        }
    }
    let mut z = Vec::with_capacity(n * width);
    for mut row in rows {
        row.resize(width, 0.0);
        z.extend(row.into_iter().map(|v| v as f32));
    }
    Ok(vec![
        Value::Tensor(labels.tensor(ctx, &picks)?),
        Value::Tensor(Tensor::from_vec(&[n, width], z)?),
    ])
}

/// SVMRegressor: one output per row. `post_transform` is validated but, as in onnxruntime,
/// not applied.
fn svm_regressor(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let (n, f, xv) = input_rows(ctx, x)?;
    let coefficients = required_floats(ctx, "coefficients")?;
    let rho = required_floats(ctx, "rho")?;
    read_transform(ctx)?;
    let n_supports = ctx.attr_int("n_supports", 0)?;
    let n_supports = usize::try_from(n_supports)
        .map_err(|_| ctx.err(format!("n_supports must be >= 0, got {n_supports}")))?;
    let one_class = ctx.attr_int("one_class", 0)? != 0;
    let mut out = Vec::with_capacity(n);
    if n_supports > 0 {
        let sv = ctx.attr_floats("support_vectors").unwrap_or_default();
        if sv.len() != n_supports * f {
            return Err(ctx.err(format!(
                "{} support_vectors values for {n_supports} vectors of {f} features",
                sv.len()
            )));
        }
        if coefficients.len() < n_supports {
            return Err(ctx.err(format!(
                "{} coefficients for {n_supports} support vectors",
                coefficients.len()
            )));
        }
        let kernel = Kernel::read(ctx)?;
        for r in 0..n {
            let row = &xv[r * f..][..f];
            let s: f64 = sv
                .chunks_exact(f.max(1))
                .take(n_supports)
                .zip(coefficients)
                .map(|(v, &c)| f64::from(c) * kernel.eval(row, v))
                .sum();
            out.push(s + f64::from(rho[0]));
        }
    } else {
        if coefficients.len() != f {
            return Err(ctx.err(format!(
                "{} coefficients for inputs of {f} features",
                coefficients.len()
            )));
        }
        for r in 0..n {
            out.push(Kernel::Linear.eval(&xv[r * f..][..f], coefficients) + f64::from(rho[0]));
        }
    }
    let out: Vec<f32> = out
        .into_iter()
        .map(|s| match (one_class, s > 0.0) {
            (false, _) => s as f32,
            (true, true) => 1.0,
            (true, false) => -1.0,
        })
        .collect();
    Ok(vec![Value::Tensor(Tensor::from_vec(&[n, 1], out)?)])
}
