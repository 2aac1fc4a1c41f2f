//! Unit tests of the `ai.onnx.ml` kernels (the backend suite covers only a few of them; the
//! classifiers, SVMs and map ops are also checked against onnxruntime by `tests/ml_models.rs`).

use onnx_proto::{AttributeProto, NodeProto, TensorProto};

use super::ML;
use crate::error::{RefError, Result};
use crate::eval::eval_node;
pub(super) use crate::kernels::test_util::{int_attr, node, run, t};
use crate::tensor::Tensor;
use crate::value::Value;

mod classifiers;

/// An `ai.onnx.ml` node with inputs `i0..` and outputs `y` (one) or `y0..` (several).
pub(super) fn ml_node(
    op: &str,
    n_in: usize,
    n_out: usize,
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    let names: Vec<String> = (0..n_in).map(|i| format!("i{i}")).collect();
    let inputs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut n = node(op, &inputs, attrs);
    n.domain = Some(ML.into());
    if n_out > 1 {
        n.output = (0..n_out).map(|i| format!("y{i}")).collect();
    }
    n
}

/// Runs `n` and returns every output it computed.
pub(super) fn run_all(n: &NodeProto, opset: i64, inputs: &[Option<Value>]) -> Result<Vec<Value>> {
    eval_node(n, opset, inputs)
}

pub(super) fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub(super) fn floats(name: &str, v: &[f32]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        floats: v.to_vec(),
        ..Default::default()
    }
}

pub(super) fn strings(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        strings: v.iter().map(|s| s.as_bytes().to_vec().into()).collect(),
        ..Default::default()
    }
}

pub(super) fn string(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

pub(super) fn tensor_attr(name: &str, t: Tensor) -> AttributeProto {
    let proto: TensorProto = t.to_proto(name);
    AttributeProto {
        name: Some(name.into()),
        t: Some(proto),
        ..Default::default()
    }
}

/// Shape and values of a numeric tensor.
pub(super) fn f64s(t: &Tensor) -> (Vec<usize>, Vec<f64>) {
    (
        t.shape().to_vec(),
        t.to_f64_vec().unwrap_or_else(|e| panic!("{e}")),
    )
}

/// The values of a string tensor.
pub(super) fn strs(t: &Tensor) -> Vec<String> {
    t.as_array::<String>()
        .unwrap_or_else(|| panic!("not strings"))
        .iter()
        .cloned()
        .collect()
}

/// Asserts a kernel error whose reason mentions `needle`.
pub(super) fn kernel_err<T: std::fmt::Debug>(r: Result<T>, needle: &str) {
    match r {
        Err(RefError::Kernel { reason, .. }) => {
            assert!(
                reason.contains(needle),
                "'{reason}' does not mention '{needle}'"
            )
        }
        other => panic!("expected a kernel error mentioning '{needle}', got {other:?}"),
    }
}

#[test]
fn label_encoder_v1_both_directions() {
    let n = ml_node(
        "LabelEncoder",
        1,
        1,
        vec![
            strings("classes_strings", &["a", "b"]),
            int_attr("default_int64", 9),
        ],
    );
    let out = run(
        &n,
        1,
        &[t(&[3], vec!["b".to_string(), "z".into(), "a".into()])],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![1.0, 9.0, 0.0]);
    let out = run(&n, 1, &[t(&[3], vec![1i64, -1, 5])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(strs(&out), vec!["b", "_Unused", "_Unused"]);
}

#[test]
fn label_encoder_float_keys_and_defaults() {
    let n = ml_node(
        "LabelEncoder",
        1,
        1,
        vec![
            floats("keys_floats", &[f32::NAN, 0.0, 1.5]),
            strings("values_strings", &["nan", "zero", "x"]),
        ],
    );
    let out = run(&n, 2, &[t(&[2, 2], vec![-0.0f32, f32::NAN, 1.5, 7.0])])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(strs(&out), vec!["zero", "nan", "x", "_Unused"]);
    // A tensor default is cast to the values' type; size-0 input gives size-0 output.
    let n = ml_node(
        "LabelEncoder",
        1,
        1,
        vec![
            tensor_attr(
                "keys_tensor",
                Tensor::from_vec(&[2], vec![1i64, 2]).unwrap_or_else(|e| panic!("{e}")),
            ),
            tensor_attr(
                "values_tensor",
                Tensor::from_vec(&[2], vec![0.5f64, 2.5]).unwrap_or_else(|e| panic!("{e}")),
            ),
        ],
    );
    let out = run(&n, 4, &[t(&[3], vec![2i64, 3, 1])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![2.5, -0.0, 0.5]);
    let out = run(&n, 4, &[t::<i64>(&[0, 2], vec![])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).0, vec![0, 2]);
}

#[test]
fn label_encoder_rejects_mismatches() {
    let n = ml_node(
        "LabelEncoder",
        1,
        1,
        vec![ints("keys_int64s", &[1, 2]), ints("values_int64s", &[1])],
    );
    kernel_err(run(&n, 2, &[t(&[1], vec![1i64])]), "2 keys but 1 values");
    let n = ml_node(
        "LabelEncoder",
        1,
        1,
        vec![ints("keys_int64s", &[1]), ints("values_int64s", &[1])],
    );
    kernel_err(
        run(&n, 2, &[t(&[1], vec!["1".to_string()])]),
        "integer keys",
    );
}

#[test]
fn binarizer_and_feature_extractor() {
    let threshold = AttributeProto {
        name: Some("threshold".into()),
        f: Some(2.0),
        ..Default::default()
    };
    let n = ml_node("Binarizer", 1, 1, vec![threshold]);
    let out = run(&n, 1, &[t(&[4], vec![1i64, 2, 3, -4])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![0.0, 0.0, 1.0, 0.0]);
    let n = ml_node("ArrayFeatureExtractor", 2, 1, vec![]);
    let out = run(
        &n,
        1,
        &[
            t(&[3], vec!["a".to_string(), "b".into(), "c".into()]),
            t(&[2], vec![2i64, 0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(strs(&out), vec!["c", "a"]);
    assert_eq!(Some(out.shape().to_vec()), Some(vec![1, 2]));
    kernel_err(
        run(&n, 1, &[t(&[2, 3], vec![0f32; 6]), t(&[1], vec![3i64])]),
        "index 3 is out of range",
    );
    let out = run(&n, 1, &[t(&[0, 3], Vec::<f32>::new()), t(&[1], vec![1i64])])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).0, vec![0, 1]);
}

#[test]
fn scaler_normalizer_imputer() {
    let n = ml_node(
        "Scaler",
        1,
        1,
        vec![floats("offset", &[1.0, 2.0]), floats("scale", &[2.0])],
    );
    let out = run(&n, 1, &[t(&[2, 2], vec![1i32, 2, 3, 4])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![0.0, 0.0, 4.0, 4.0]);
    kernel_err(
        run(
            &ml_node("Scaler", 1, 1, vec![floats("scale", &[1.0, 2.0, 3.0])]),
            1,
            &[t(&[2], vec![1f32, 2.0])],
        ),
        "scale has 3 values for 2 features",
    );
    for (norm, want) in [
        ("MAX", [0.25, 1.0]),
        ("L1", [0.2, 0.8]),
        ("L2", [3.0 / 5.0, 4.0 / 5.0]),
    ] {
        let (a, b) = if norm == "L2" { (3.0, 4.0) } else { (1.0, 4.0) };
        let n = ml_node("Normalizer", 1, 1, vec![string("norm", norm)]);
        let out = run(&n, 1, &[t(&[1, 2], vec![a, b])]).unwrap_or_else(|e| panic!("{e}"));
        let got = f64s(&out).1;
        assert!(
            (got[0] - want[0]).abs() < 1e-6 && (got[1] - want[1]).abs() < 1e-6,
            "{norm}: {got:?}"
        );
    }
    let n = ml_node(
        "Imputer",
        1,
        1,
        vec![floats("imputed_value_floats", &[7.0, 8.0])],
    );
    let out = run(&n, 1, &[t(&[2, 2], vec![f32::NAN, 1.0, 2.0, f32::NAN])])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![7.0, 1.0, 2.0, 8.0]);
    let n = ml_node(
        "Imputer",
        1,
        1,
        vec![
            ints("imputed_value_int64s", &[5]),
            int_attr("replaced_value_int64", -1),
        ],
    );
    let out = run(&n, 1, &[t(&[3], vec![-1i64, 0, -1])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![5.0, 0.0, 5.0]);
}

#[test]
fn one_hot_encoder_and_feature_vectorizer() {
    let n = ml_node(
        "OneHotEncoder",
        1,
        1,
        vec![ints("cats_int64s", &[3, 1]), int_attr("zeros", 1)],
    );
    let out = run(&n, 1, &[t(&[3], vec![1i64, 3, 2])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out), (vec![3, 2], vec![0.0, 1.0, 1.0, 0.0, 0.0, 0.0]));
    let strict = ml_node(
        "OneHotEncoder",
        1,
        1,
        vec![strings("cats_strings", &["a"]), int_attr("zeros", 0)],
    );
    kernel_err(
        run(&strict, 1, &[t(&[1], vec!["b".to_string()])]),
        "zeros = 0",
    );
    let n = ml_node(
        "FeatureVectorizer",
        2,
        1,
        vec![ints("inputdimensions", &[1, 3])],
    );
    let out = run(
        &n,
        1,
        &[
            t(&[2, 1], vec![1i64, 2]),
            t(&[2, 2], vec![3f64, 4.0, 5.0, 6.0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        f64s(&out),
        (vec![2, 4], vec![1.0, 3.0, 4.0, 0.0, 2.0, 5.0, 6.0, 0.0])
    );
}

#[test]
fn linear_regressor_with_two_targets() {
    let n = ml_node(
        "LinearRegressor",
        1,
        1,
        vec![
            floats("coefficients", &[1.0, 2.0, -1.0, 0.0]),
            floats("intercepts", &[0.5, 1.0]),
            int_attr("targets", 2),
        ],
    );
    let out = run(&n, 1, &[t(&[1, 2], vec![3f32, 4.0])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out), (vec![1, 2], vec![11.5, -2.0]));
    let bad = ml_node(
        "LinearRegressor",
        1,
        1,
        vec![floats("coefficients", &[1.0])],
    );
    kernel_err(
        run(&bad, 1, &[t(&[1, 2], vec![3f32, 4.0])]),
        "1 coefficients",
    );
}

/// A one-split tree: x[0] <= 1 goes to leaf 0 (weight 10), else leaf 1 (weight 20).
fn one_split(aggregate: i64, roots: &[i64], true_id: i64) -> NodeProto {
    ml_node(
        "TreeEnsemble",
        1,
        1,
        vec![
            ints("nodes_featureids", &[0]),
            tensor_attr(
                "nodes_splits",
                Tensor::from_vec(&[1], vec![1f32]).unwrap_or_else(|e| panic!("{e}")),
            ),
            tensor_attr(
                "nodes_modes",
                Tensor::from_vec(&[1], vec![0u8]).unwrap_or_else(|e| panic!("{e}")),
            ),
            ints("nodes_truenodeids", &[true_id]),
            ints("nodes_falsenodeids", &[1]),
            ints("nodes_trueleafs", &[1]),
            ints("nodes_falseleafs", &[1]),
            ints("leaf_targetids", &[0, 1]),
            tensor_attr(
                "leaf_weights",
                Tensor::from_vec(&[2], vec![10f32, 20.0]).unwrap_or_else(|e| panic!("{e}")),
            ),
            ints("tree_roots", roots),
            int_attr("n_targets", 2),
            int_attr("aggregate_function", aggregate),
        ],
    )
}

#[test]
fn tree_ensemble_aggregates_and_validates() {
    let x = || t(&[2, 1], vec![0.5f32, 3.0]);
    let out = run(&one_split(0, &[0, 0], 0), 5, &[x()]).unwrap_or_else(|e| panic!("{e}"));
    // Average of two identical trees.
    assert_eq!(f64s(&out), (vec![2, 2], vec![10.0, 0.0, 0.0, 20.0]));
    let out = run(&one_split(2, &[0], 0), 5, &[x()]).unwrap_or_else(|e| panic!("{e}"));
    // MIN: a target no leaf reaches keeps the largest float.
    assert_eq!(f64s(&out).1[1], f64::from(f32::MAX));
    kernel_err(run(&one_split(1, &[0], 5), 5, &[x()]), "leaf 5");
    kernel_err(
        run(&one_split(1, &[0], 0), 5, &[t(&[1, 0], Vec::<f32>::new())]),
        "feature 0",
    );
    kernel_err(run(&one_split(9, &[0], 0), 5, &[x()]), "aggregate_function");
}

#[test]
fn tree_ensemble_regressor_with_base_values() {
    let n = ml_node(
        "TreeEnsembleRegressor",
        1,
        1,
        vec![
            ints("nodes_treeids", &[0, 0, 0]),
            ints("nodes_nodeids", &[0, 1, 2]),
            ints("nodes_featureids", &[1, 0, 0]),
            strings("nodes_modes", &["BRANCH_GT", "LEAF", "LEAF"]),
            floats("nodes_values", &[0.0, 0.0, 0.0]),
            ints("nodes_truenodeids", &[1, 0, 0]),
            ints("nodes_falsenodeids", &[2, 0, 0]),
            ints("target_treeids", &[0, 0]),
            ints("target_nodeids", &[1, 2]),
            ints("target_ids", &[0, 0]),
            floats("target_weights", &[1.0, -1.0]),
            floats("base_values", &[100.0]),
        ],
    );
    let out =
        run(&n, 3, &[t(&[2, 2], vec![0f32, 1.0, 0.0, -1.0])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out), (vec![2, 1], vec![101.0, 99.0]));
}
