//! Score post-processing shared by the `ai.onnx.ml` regressors and classifiers: the
//! `post_transform` functions (LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT) and the classifiers'
//! binary-case expansion of one score into two columns.
//!
//! The formulas follow onnxruntime's, the runtime these models are exported for: PROBIT uses
//! the same closed-form approximation of erf⁻¹ (Winitzki, a = 0.147), so results agree to f32
//! rounding rather than to the approximation error.

use std::f64::consts::{PI, SQRT_2};

/// A `post_transform` attribute value that names no transform.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("post_transform must be NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT, got '{value}'")]
pub(crate) struct UnknownPostTransform {
    /// The attribute value as written.
    pub(crate) value: String,
}

/// A `post_transform` attribute value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PostTransform {
    None,
    Logistic,
    Softmax,
    SoftmaxZero,
    Probit,
}

impl PostTransform {
    /// Parses the attribute value.
    pub(crate) fn parse(name: &str) -> Result<Self, UnknownPostTransform> {
        Ok(match name {
            "NONE" => Self::None,
            "LOGISTIC" => Self::Logistic,
            "SOFTMAX" => Self::Softmax,
            "SOFTMAX_ZERO" => Self::SoftmaxZero,
            "PROBIT" => Self::Probit,
            other => {
                return Err(UnknownPostTransform {
                    value: other.to_string(),
                })
            }
        })
    }

    /// Applies the transform to one row of scores in place.
    pub(crate) fn apply(self, row: &mut [f64]) {
        match self {
            Self::None => {}
            Self::Logistic => row.iter_mut().for_each(|v| *v = logistic(*v)),
            Self::Softmax => softmax(row),
            Self::SoftmaxZero => softmax_zero(row),
            Self::Probit => row.iter_mut().for_each(|v| *v = probit(*v)),
        }
    }
}

/// Applies a `post_transform` named by its attribute value to one row of scores.
pub(crate) fn post_transform(name: &str, row: &mut [f64]) -> Result<(), UnknownPostTransform> {
    PostTransform::parse(name)?.apply(row);
    Ok(())
}

/// The logistic function, computed without overflow for large |v|.
pub(crate) fn logistic(v: f64) -> f64 {
    let p = 1.0 / (1.0 + (-v.abs()).exp());
    if v < 0.0 {
        1.0 - p
    } else {
        p
    }
}

/// The probit function: √2 · erf⁻¹(2p − 1).
pub(crate) fn probit(p: f64) -> f64 {
    SQRT_2 * erf_inv(2.0 * p - 1.0)
}

/// The closed-form approximation of erf⁻¹ onnxruntime uses (relative error about 2e-3).
fn erf_inv(x: f64) -> f64 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let log = ((1.0 - x) * (1.0 + x)).ln();
    let a = 2.0 / (PI * 0.147) + 0.5 * log;
    let b = log / 0.147;
    sign * (-a + (a * a - b).sqrt()).sqrt()
}

/// Softmax of one row (stable: the row's maximum is subtracted first).
fn softmax(row: &mut [f64]) {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    if sum > 0.0 {
        row.iter_mut().for_each(|v| *v /= sum);
    }
}

/// Softmax that leaves (near-)zero scores at zero: a score within 1e-7 of 0 counts as absent.
fn softmax_zero(row: &mut [f64]) {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let scale_absent = (-max).exp();
    let mut sum = 0.0;
    for v in row.iter_mut() {
        if v.abs() > 1e-7 {
            *v = (*v - max).exp();
            sum += *v;
        } else {
            *v *= scale_absent;
        }
    }
    if sum > 0.0 {
        row.iter_mut().for_each(|v| *v /= sum);
    }
}

/// How a classifier with a single score column writes its two output columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecondClass {
    /// Write only the scores there are.
    Keep,
    /// `[1 - s, s]` (all weights positive: the score is a probability).
    Complement,
    /// `[-s, s]`, or `[σ(-s), σ(s)]` under LOGISTIC (mixed-sign weights: the score is a margin).
    Negate,
}

/// Transforms a classifier's scores for one row. Two or more scores get the transform; a single
/// score gets PROBIT, or else is expanded to two columns as `second` says (without the
/// transform, except LOGISTIC under [`SecondClass::Negate`]).
pub(crate) fn classifier_scores(
    mut scores: Vec<f64>,
    transform: PostTransform,
    second: SecondClass,
) -> Vec<f64> {
    match scores.as_slice() {
        [] => scores,
        [s] => {
            let s = *s;
            if transform == PostTransform::Probit {
                return vec![probit(s)];
            }
            match second {
                SecondClass::Keep => scores,
                SecondClass::Complement => vec![1.0 - s, s],
                SecondClass::Negate if transform == PostTransform::Logistic => {
                    vec![logistic(-s), logistic(s)]
                }
                SecondClass::Negate => vec![-s, s],
            }
        }
        _ => {
            transform.apply(&mut scores);
            scores
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn transforms_of_a_row() {
        let mut row = [1.0, 2.0, 3.0];
        PostTransform::Softmax.apply(&mut row);
        assert!(
            close(&row, &[0.09003057, 0.24472847, 0.66524096]),
            "{row:?}"
        );
        let mut row = [0.0, 1.0];
        PostTransform::SoftmaxZero.apply(&mut row);
        assert!(close(&row, &[0.0, 1.0]), "{row:?}");
        assert!((logistic(-800.0)).abs() < 1e-12 && (logistic(800.0) - 1.0).abs() < 1e-12);
        // probit(0.5) = 0 and probit(0.975) ~ 1.96 (the approximation is within 2e-3).
        assert!(probit(0.5).abs() < 1e-12);
        assert!((probit(0.975) - 1.959964).abs() < 5e-3);
        assert_eq!(
            PostTransform::parse("EXP"),
            Err(UnknownPostTransform {
                value: "EXP".into()
            })
        );
    }

    #[test]
    fn single_scores_expand_to_two_columns() {
        let t = PostTransform::Logistic;
        assert_eq!(
            classifier_scores(vec![0.25], t, SecondClass::Complement),
            [0.75, 0.25]
        );
        assert!(close(
            &classifier_scores(vec![0.0], t, SecondClass::Negate),
            &[0.5, 0.5]
        ));
        assert_eq!(
            classifier_scores(vec![2.0], PostTransform::None, SecondClass::Negate),
            [-2.0, 2.0]
        );
        assert_eq!(
            classifier_scores(vec![2.0], PostTransform::None, SecondClass::Keep),
            [2.0]
        );
    }
}
