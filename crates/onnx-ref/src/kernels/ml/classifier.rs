//! Classifiers of `ai.onnx.ml`: LinearClassifier and TreeEnsembleClassifier (opsets 1-4; opset
//! 3 adds the `*_as_tensor` attributes), plus the class-label handling the SVM classifier
//! shares. Each outputs Y, one label per row (int64 or string, from `classlabels_*`), and Z,
//! the float scores `[N, classes]`.
//!
//! The binary cases follow onnxruntime, whose behaviour the exporters (skl2onnx, onnxmltools)
//! target: a single score column is expanded to two (`[1 - s, s]` or `[-s, s]`), labels of a
//! one-column model come from the sign of the raw score, and the tree classifier tracks which
//! classes any leaf gave a weight (a class no leaf reached scores 0).

use std::collections::BTreeSet;

use super::scores::{classifier_scores, PostTransform, SecondClass};
use super::tree::{floats_or_tensor, input_rows, ints, legacy_forest, LeafWeights};
use super::ML;
use crate::error::Result;
use crate::kernel::{KernelCtx, KernelRegistry};
use crate::tensor::Tensor;
use crate::value::Value;

pub(crate) fn register_all(reg: &mut KernelRegistry) {
    reg.register(ML, "LinearClassifier", 1, 5, linear_classifier);
    reg.register(ML, "TreeEnsembleClassifier", 1, 4, tree_ensemble_classifier);
}

/// The class labels of a classifier: `classlabels_strings`, else the int64 list.
#[derive(Debug, Clone)]
pub(super) enum ClassLabels {
    Ints(Vec<i64>),
    Strings(Vec<String>),
}

/// The label chosen for one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Label {
    /// The class at this index of the labels.
    Class(usize),
    /// A fixed label (the 0/1 of a binary model without two class labels): the integer, or
    /// its decimal string for string labels.
    Literal(i64),
}

impl ClassLabels {
    /// Reads `classlabels_strings` or the int64 labels attribute `ints_name`.
    pub(super) fn read(ctx: &KernelCtx, ints_name: &str) -> Result<Self> {
        let strings = ctx.attr_strings("classlabels_strings").unwrap_or_default();
        let ints = ctx.attr_ints(ints_name).unwrap_or_default();
        if !strings.is_empty() && !ints.is_empty() {
            return Err(ctx.err(format!(
                "classlabels_strings and {ints_name} are both set; only one is allowed"
            )));
        }
        Ok(if strings.is_empty() {
            ClassLabels::Ints(ints.to_vec())
        } else {
            ClassLabels::Strings(strings)
        })
    }

    pub(super) fn len(&self) -> usize {
        match self {
            ClassLabels::Ints(v) => v.len(),
            ClassLabels::Strings(v) => v.len(),
        }
    }

    /// The Y output: one label per row, shaped `[N]`.
    pub(super) fn tensor(&self, ctx: &KernelCtx, picks: &[Label]) -> Result<Tensor> {
        let missing = |i: usize| {
            ctx.err(format!(
                "class index {i} is out of range for {} class labels",
                self.len()
            ))
        };
        match self {
            ClassLabels::Ints(v) => {
                let out = picks
                    .iter()
                    .map(|p| match *p {
                        Label::Class(i) => v.get(i).copied().ok_or_else(|| missing(i)),
                        Label::Literal(l) => Ok(l),
                    })
                    .collect::<Result<Vec<i64>>>()?;
                Tensor::from_vec(&[out.len()], out)
            }
            ClassLabels::Strings(v) => {
                let out = picks
                    .iter()
                    .map(|p| match *p {
                        Label::Class(i) => v.get(i).cloned().ok_or_else(|| missing(i)),
                        Label::Literal(l) => Ok(l.to_string()),
                    })
                    .collect::<Result<Vec<String>>>()?;
                Tensor::from_vec(&[out.len()], out)
            }
        }
    }
}

/// The `post_transform` attribute.
pub(super) fn read_transform(ctx: &KernelCtx) -> Result<PostTransform> {
    PostTransform::parse(&ctx.attr_string("post_transform", "NONE")?).map_err(|e| ctx.err(e))
}

/// The index of the first largest value among those `keep` admits.
fn first_max(values: &[f64], keep: impl Fn(usize) -> bool) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in values.iter().enumerate() {
        if keep(i) && best.is_none_or(|b| v > values[b]) {
            best = Some(i);
        }
    }
    best
}

/// Y and Z from the chosen labels and the score rows (each padded with zeros to `width`).
fn outputs(
    ctx: &KernelCtx,
    labels: &ClassLabels,
    picks: &[Label],
    rows: Vec<Vec<f64>>,
    width: usize,
) -> Result<Vec<Value>> {
    let n = rows.len();
    let mut z = Vec::with_capacity(n * width);
    for mut row in rows {
        row.resize(width, 0.0);
        z.extend(row.into_iter().map(|v| v as f32));
    }
    Ok(vec![
        Value::Tensor(labels.tensor(ctx, picks)?),
        Value::Tensor(Tensor::from_vec(&[n, width], z)?),
    ])
}

fn linear_classifier(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    let x = ctx.input(inputs, 0)?;
    let (n, f, xv) = input_rows(ctx, x)?;
    let labels = ClassLabels::read(ctx, "classlabels_ints")?;
    let coef = ctx
        .attr_floats("coefficients")
        .ok_or_else(|| ctx.err("attribute 'coefficients' is required"))?;
    let intercepts = ctx.attr_floats("intercepts").unwrap_or_default();
    let classes = if !intercepts.is_empty() {
        intercepts.len()
    } else {
        coef.len().checked_div(f).unwrap_or(0)
    };
    if classes == 0 || coef.len() != classes * f {
        return Err(ctx.err(format!(
            "{} coefficients and {} intercepts do not fit inputs of {f} features",
            coef.len(),
            intercepts.len()
        )));
    }
    if classes > 1 && labels.len() < classes {
        return Err(ctx.err(format!(
            "{} class labels for {classes} classes",
            labels.len()
        )));
    }
    let transform = read_transform(ctx)?;
    ctx.attr_int("multi_class", 0)?;
    // One score column with two labels: the second column is added as 1 - s.
    let two_labels = labels.len() == 2;
    let second = if classes == 1 && two_labels {
        SecondClass::Complement
    } else {
        SecondClass::Keep
    };
    let width = if second == SecondClass::Complement {
        2
    } else {
        classes
    };
    let mut picks = Vec::with_capacity(n);
    let mut rows = Vec::with_capacity(n);
    for r in 0..n {
        let row = &xv[r * f..][..f];
        let scores: Vec<f64> = (0..classes)
            .map(|c| {
                let w = &coef[c * f..][..f];
                let dot: f64 = row.iter().zip(w).map(|(a, &b)| a * f64::from(b)).sum();
                dot + intercepts.get(c).map_or(0.0, |&b| f64::from(b))
            })
            .collect();
        picks.push(if classes == 1 {
            let positive = scores[0] > 0.0;
            match (two_labels, positive) {
                (true, true) => Label::Class(1),
                (true, false) => Label::Class(0),
                (false, p) => Label::Literal(i64::from(p)),
            }
        } else {
            Label::Class(first_max(&scores, |_| true).unwrap_or(0))
        });
        rows.push(classifier_scores(scores, transform, second));
    }
    outputs(ctx, &labels, &picks, rows, width)
}

/// Attributes TreeEnsembleClassifier gained in opset 3.
const TENSOR_ATTRS: [&str; 4] = [
    "base_values_as_tensor",
    "class_weights_as_tensor",
    "nodes_hitrates_as_tensor",
    "nodes_values_as_tensor",
];

fn tree_ensemble_classifier(ctx: &KernelCtx, inputs: &[Option<&Value>]) -> Result<Vec<Value>> {
    if ctx.opset < 3 {
        if let Some(a) = TENSOR_ATTRS.iter().find(|a| ctx.attr(a).is_some()) {
            return Err(ctx.err(format!(
                "attribute '{a}' needs ai.onnx.ml opset 3, the model imports {}",
                ctx.opset
            )));
        }
    }
    let x = ctx.input(inputs, 0)?;
    let (n, f, xv) = input_rows(ctx, x)?;
    let labels = ClassLabels::read(ctx, "classlabels_int64s")?;
    let n_classes = labels.len();
    if n_classes < 2 {
        return Err(ctx.err(format!(
            "{n_classes} class labels: a classifier needs at least 2"
        )));
    }
    let class_ids = ints(ctx, "class_ids")?;
    let weights = floats_or_tensor(ctx, "class_weights")?;
    let all_positive = weights.iter().all(|&w| w >= 0.0);
    let distinct: BTreeSet<i64> = class_ids.iter().copied().collect();
    // Weights for a single class of two: the model scores that class alone.
    let binary_case = n_classes == 2 && distinct.len() == 1;
    let leaf = LeafWeights {
        what: "class",
        trees: ints(ctx, "class_treeids")?,
        nodes: ints(ctx, "class_nodeids")?,
        ids: class_ids,
        weights,
    };
    let forest = legacy_forest(ctx, n_classes, leaf)?;
    forest.validate(f).map_err(|e| ctx.err(e))?;
    let base = floats_or_tensor(ctx, "base_values")?;
    if base.len() > n_classes {
        return Err(ctx.err(format!(
            "{} base_values for {n_classes} classes",
            base.len()
        )));
    }
    let transform = read_transform(ctx)?;
    // Float weights accumulate in f32 (double ones, from a double tensor, in f64).
    let double_weights = ctx
        .attr("class_weights_as_tensor")
        .and_then(|a| a.t.as_ref())
        .is_some_and(|t| t.data_type == Some(crate::dtype::DType::Double.code()));
    let add = Add {
        single: !double_weights,
    };
    let mut picks = Vec::with_capacity(n);
    let mut rows = Vec::with_capacity(n);
    for r in 0..n {
        let row = &xv[r * f..][..f];
        let (mut sums, mut hits) = forest
            .sum_with_hits(row, add.single)
            .map_err(|e| ctx.err(e))?;
        if n_classes > 2 {
            for (k, &b) in base.iter().enumerate() {
                sums[k] = if hits[k] { add.sum(sums[k], b) } else { b };
                hits[k] = true;
            }
            // A row no leaf scored and no base value covers falls back to the first class.
            let best = first_max(&sums, |k| hits[k]).unwrap_or(0);
            picks.push(Label::Class(best));
            let mut scores = sums;
            transform.apply(&mut scores);
            rows.push(scores);
            continue;
        }
        let (pick, scores) = binary_tree_scores(
            &mut sums,
            &hits,
            &base,
            Binary {
                binary_case,
                all_positive,
                transform,
                add,
            },
        );
        picks.push(pick);
        rows.push(scores);
    }
    if matches!(labels, ClassLabels::Strings(_)) {
        // String labels are picked by index, the 0/1 fallback included.
        for p in &mut picks {
            if let Label::Literal(l) = *p {
                *p = Label::Class(usize::from(l != 0));
            }
        }
    }
    outputs(ctx, &labels, &picks, rows, n_classes)
}

/// Addition in the precision of the model's weights.
#[derive(Debug, Clone, Copy)]
struct Add {
    single: bool,
}

impl Add {
    fn sum(self, a: f64, b: f64) -> f64 {
        if self.single {
            f64::from(a as f32 + b as f32)
        } else {
            a + b
        }
    }
}

/// What a two-class tree ensemble needs besides the row's sums.
#[derive(Debug, Clone, Copy)]
struct Binary {
    /// Weights name a single class: the model scores that class alone.
    binary_case: bool,
    /// No weight is negative: the score is a probability (else a margin).
    all_positive: bool,
    transform: PostTransform,
    add: Add,
}

/// The label and scores of a two-class tree ensemble for one row, from the per-class sums and
/// whether any leaf reached each class.
fn binary_tree_scores(
    sums: &mut [f64],
    hits: &[bool],
    base: &[f64],
    model: Binary,
) -> (Label, Vec<f64>) {
    let add = model.add;
    let mut columns = 2;
    let mut second = SecondClass::Keep;
    match *base {
        [b0, b1] => {
            if hits[1] {
                sums[1] = add.sum(b1, sums[0]);
                sums[0] = -sums[1];
            } else {
                sums[1] = add.sum(sums[1], b1);
                sums[0] = add.sum(sums[0], b0);
            }
        }
        [b0] => {
            sums[0] = add.sum(sums[0], b0);
            if !hits[1] {
                columns = 1;
            }
        }
        _ => {
            second = SecondClass::Negate;
            if !hits[1] {
                columns = 1;
            }
        }
    }
    let positive = if columns == 2 && hits[1] {
        sums[1]
    } else if hits[0] {
        sums[0]
    } else {
        0.0
    };
    let pick = if model.binary_case {
        let won = if model.all_positive {
            second = SecondClass::Complement;
            positive > 0.5
        } else {
            second = SecondClass::Negate;
            positive > 0.0
        };
        Label::Class(usize::from(won))
    } else {
        Label::Literal(i64::from(positive > 0.0))
    };
    // A class no leaf reached contributes 0, whatever base value was added to it.
    let scores: Vec<f64> = (0..columns)
        .map(|k| if hits[k] { sums[k] } else { 0.0 })
        .collect();
    (pick, classifier_scores(scores, model.transform, second))
}
