//! Unit tests of the classifiers, SVMs and map ops: bad attributes (errors naming the node),
//! opset differences, size-0 batches, and the map inputs onnxruntime's Python API cannot feed
//! (so `tests/ml_models.rs` cannot cover them).

use onnx_proto::{AttributeProto, NodeProto};

use super::{
    f64s, floats, int_attr, ints, kernel_err, ml_node, run, run_all, string, strings, strs, t,
    tensor_attr,
};
use crate::error::{RefError, Result};
use crate::tensor::Tensor;
use crate::value::{MapValue, Value};

/// A named two-output (label, scores) node.
fn classifier(op: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    let mut n = ml_node(op, 1, 2, attrs);
    n.name = Some("clf".into());
    n
}

/// Asserts an error that names node 'clf' and mentions `needle`.
fn named_err<T: std::fmt::Debug>(r: Result<T>, needle: &str) {
    match r {
        Err(e @ RefError::Kernel { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("'clf'") && text.contains(needle),
                "'{text}' should name node 'clf' and mention '{needle}'"
            );
        }
        other => panic!("expected a kernel error mentioning '{needle}', got {other:?}"),
    }
}

fn tensors(out: Vec<Value>) -> Vec<Tensor> {
    out.into_iter()
        .map(|v| v.into_tensor().unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn x3() -> Option<Value> {
    t(&[2, 3], vec![0.5f32, -0.2, 0.1, -0.7, 0.3, 0.9])
}

fn linear(attrs: Vec<AttributeProto>) -> NodeProto {
    let mut all = vec![
        floats("coefficients", &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
        floats("intercepts", &[0.0, 0.5]),
        ints("classlabels_ints", &[7, 8]),
    ];
    all.extend(attrs);
    classifier("LinearClassifier", all)
}

#[test]
fn linear_classifier_labels_scores_and_errors() {
    let out = tensors(run_all(&linear(vec![]), 1, &[x3()]).unwrap_or_else(|e| panic!("{e}")));
    // Row 0 scores [0.5, 0.3] -> 7; row 1 [-0.7, 0.8] -> 8.
    assert_eq!(f64s(&out[0]).1, vec![7.0, 8.0]);
    assert_eq!(f64s(&out[1]).0, vec![2, 2]);
    let empty = run_all(&linear(vec![]), 1, &[t::<f32>(&[0, 3], vec![])])
        .map(tensors)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (f64s(&empty[0]).0, f64s(&empty[1]).0),
        (vec![0], vec![0, 2])
    );
    named_err(
        run_all(&linear(vec![string("post_transform", "EXP")]), 1, &[x3()]),
        "post_transform must be",
    );
    let bad = classifier(
        "LinearClassifier",
        vec![
            floats("coefficients", &[1.0; 4]),
            floats("intercepts", &[0.0, 0.0]),
        ],
    );
    named_err(run_all(&bad, 1, &[x3()]), "4 coefficients and 2 intercepts");
    let no_labels = classifier(
        "LinearClassifier",
        vec![
            floats("coefficients", &[1.0; 6]),
            floats("intercepts", &[0.0, 0.0]),
        ],
    );
    named_err(
        run_all(&no_labels, 1, &[x3()]),
        "0 class labels for 2 classes",
    );
    let both = linear(vec![strings("classlabels_strings", &["a", "b"])]);
    named_err(run_all(&both, 1, &[x3()]), "only one is allowed");
}

#[test]
fn linear_classifier_single_column_without_two_labels_uses_0_and_1() {
    let n = classifier(
        "LinearClassifier",
        vec![
            floats("coefficients", &[1.0, 0.0, 0.0]),
            strings("classlabels_strings", &["only"]),
        ],
    );
    let out = tensors(run_all(&n, 1, &[x3()]).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(strs(&out[0]), vec!["1", "0"]);
    assert_eq!(f64s(&out[1]), (vec![2, 1], vec![0.5, f64::from(-0.7f32)]));
}

fn svc(attrs: Vec<AttributeProto>) -> NodeProto {
    let mut all = vec![
        string("kernel_type", "RBF"),
        floats("kernel_params", &[0.5, 0.0, 0.0]),
        ints("vectors_per_class", &[1, 1]),
        floats("support_vectors", &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
        floats("coefficients", &[1.0, -1.0]),
        floats("rho", &[0.0]),
        ints("classlabels_ints", &[0, 1]),
    ];
    for a in attrs {
        all.retain(|b| b.name != a.name);
        all.push(a);
    }
    classifier("SVMClassifier", all)
}

#[test]
fn svm_classifier_votes_and_rejects_bad_attributes() {
    // Each row is closer to the first support vector: the pairwise value is positive.
    let out = tensors(run_all(&svc(vec![]), 1, &[x3()]).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(f64s(&out[0]).1, vec![0.0, 0.0]);
    let (shape, z) = f64s(&out[1]);
    assert_eq!(shape, vec![2, 2]);
    assert!(z[1] > 0.0 && (z[0] + z[1]).abs() < 1e-6, "{z:?}");
    let empty = run_all(&svc(vec![]), 1, &[t::<f32>(&[0, 3], vec![])])
        .map(tensors)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&empty[1]).0, vec![0, 2]);
    named_err(
        run_all(&svc(vec![string("kernel_type", "CUBIC")]), 1, &[x3()]),
        "kernel_type must be",
    );
    named_err(
        run_all(&svc(vec![floats("kernel_params", &[0.5])]), 1, &[x3()]),
        "kernel_params needs gamma, coef0 and degree",
    );
    named_err(
        run_all(
            &svc(vec![ints("vectors_per_class", &[1, 1, 0])]),
            1,
            &[x3()],
        ),
        "vectors_per_class has 3 entries for 2 classes",
    );
    named_err(
        run_all(&svc(vec![floats("support_vectors", &[0.0; 5])]), 1, &[x3()]),
        "5 support_vectors values",
    );
    named_err(
        run_all(&svc(vec![floats("prob_a", &[1.0])]), 1, &[x3()]),
        "1 prob_a but 0 prob_b",
    );
    named_err(
        run_all(&svc(vec![floats("rho", &[])]), 1, &[x3()]),
        "attribute 'rho' is required",
    );
}

#[test]
fn svm_regressor_modes_and_errors() {
    let n = ml_node(
        "SVMRegressor",
        1,
        1,
        vec![
            floats("coefficients", &[1.0, 2.0, 0.0]),
            floats("rho", &[0.5]),
        ],
    );
    let out = run(&n, 1, &[x3()]).unwrap_or_else(|e| panic!("{e}"));
    let (shape, y) = f64s(&out);
    assert_eq!(shape, vec![2, 1]);
    assert!(
        (y[0] - 0.6).abs() < 1e-6 && (y[1] - 0.4).abs() < 1e-6,
        "{y:?}"
    );
    let one_class = ml_node(
        "SVMRegressor",
        1,
        1,
        vec![
            floats("coefficients", &[1.0, 2.0, 0.0]),
            floats("rho", &[0.5]),
            int_attr("one_class", 1),
        ],
    );
    let out = run(&one_class, 1, &[x3()]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![1.0, 1.0]);
    let bad = ml_node(
        "SVMRegressor",
        1,
        1,
        vec![
            floats("coefficients", &[1.0]),
            floats("rho", &[0.5]),
            int_attr("n_supports", -2),
        ],
    );
    kernel_err(run(&bad, 1, &[x3()]), "n_supports must be >= 0");
    let bad = ml_node(
        "SVMRegressor",
        1,
        1,
        vec![
            floats("coefficients", &[1.0]),
            floats("rho", &[0.5]),
            int_attr("n_supports", 2),
            floats("support_vectors", &[0.0; 6]),
        ],
    );
    kernel_err(
        run(&bad, 1, &[x3()]),
        "1 coefficients for 2 support vectors",
    );
}

/// One stump: x0 <= 0 goes to leaf 1 (class 0 weight 1), else leaf 2 (class 1 weight 1).
fn stump(extra: Vec<AttributeProto>) -> NodeProto {
    let mut attrs = vec![
        ints("nodes_treeids", &[0, 0, 0]),
        ints("nodes_nodeids", &[0, 1, 2]),
        ints("nodes_featureids", &[0, 0, 0]),
        strings("nodes_modes", &["BRANCH_LEQ", "LEAF", "LEAF"]),
        ints("nodes_truenodeids", &[1, 0, 0]),
        ints("nodes_falsenodeids", &[2, 0, 0]),
        ints("class_treeids", &[0, 0]),
        ints("class_nodeids", &[1, 2]),
        ints("class_ids", &[0, 2]),
        floats("class_weights", &[1.0, 1.0]),
        ints("classlabels_int64s", &[5, 6, 7]),
    ];
    for a in extra {
        attrs.retain(|b| b.name != a.name);
        attrs.push(a);
    }
    if !attrs
        .iter()
        .any(|a| a.name.as_deref() == Some("nodes_values_as_tensor"))
    {
        attrs.push(floats("nodes_values", &[0.0, 0.0, 0.0]));
    }
    classifier("TreeEnsembleClassifier", attrs)
}

#[test]
fn tree_classifier_opsets_and_errors() {
    let out = tensors(run_all(&stump(vec![]), 1, &[x3()]).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(f64s(&out[0]).1, vec![7.0, 5.0]);
    assert_eq!(
        f64s(&out[1]),
        (vec![2, 3], vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    );
    // The tensor form of the thresholds exists from opset 3 on.
    let values = Tensor::from_vec(&[3], vec![0f32, 0.0, 0.0]).unwrap_or_else(|e| panic!("{e}"));
    let with_tensor = stump(vec![tensor_attr("nodes_values_as_tensor", values)]);
    named_err(
        run_all(&with_tensor, 1, &[x3()]),
        "'nodes_values_as_tensor' needs ai.onnx.ml opset 3",
    );
    let out = tensors(run_all(&with_tensor, 3, &[x3()]).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(f64s(&out[0]).1, vec![7.0, 5.0]);
    // Deprecated in opset 5 (replaced by TreeEnsemble).
    assert!(run_all(&stump(vec![]), 5, &[x3()]).is_err());
    named_err(
        run_all(&stump(vec![ints("classlabels_int64s", &[1])]), 3, &[x3()]),
        "1 class labels",
    );
    named_err(
        run_all(&stump(vec![ints("class_nodeids", &[0, 2])]), 3, &[x3()]),
        "points at branch node (0, 0)",
    );
    named_err(
        run_all(&stump(vec![ints("class_ids", &[0, 3])]), 3, &[x3()]),
        "leaf 1 targets 3 of 3 targets",
    );
    named_err(
        run_all(&stump(vec![floats("base_values", &[0.0; 4])]), 3, &[x3()]),
        "4 base_values for 3 classes",
    );
    let empty = run_all(&stump(vec![]), 3, &[t::<f32>(&[0, 3], vec![])])
        .map(tensors)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (f64s(&empty[0]).0, f64s(&empty[1]).0),
        (vec![0], vec![0, 3])
    );
}

fn map_of(keys: Tensor, values: Vec<Tensor>) -> Option<Value> {
    Some(Value::Map(MapValue {
        keys,
        values: values.into_iter().map(Value::Tensor).collect(),
    }))
}

fn one_output(n: &NodeProto, inputs: &[Option<Value>]) -> Result<Value> {
    let mut out = run_all(n, 1, inputs)?;
    Ok(out.remove(0))
}

#[test]
fn zip_map_rows_and_errors() {
    let n = ml_node("ZipMap", 1, 1, vec![ints("classlabels_int64s", &[3, 1])]);
    let out = one_output(&n, &[t(&[2], vec![0.25f32, 0.75])]).unwrap_or_else(|e| panic!("{e}"));
    let Value::Sequence(seq) = out else {
        panic!("expected a sequence, got {out:?}")
    };
    assert_eq!(seq.items.len(), 1);
    let Value::Map(m) = &seq.items[0] else {
        panic!("expected a map")
    };
    // Keys come out sorted.
    assert_eq!(f64s(&m.keys).1, vec![1.0, 3.0]);
    assert_eq!(m.values[0], Value::Tensor(Tensor::scalar(0.75f32)));
    kernel_err(
        one_output(&n, &[t(&[1, 3], vec![0f32; 3])]),
        "3 scores per row but 2 class labels",
    );
    let both = ml_node(
        "ZipMap",
        1,
        1,
        vec![
            ints("classlabels_int64s", &[1]),
            strings("classlabels_strings", &["a"]),
        ],
    );
    kernel_err(
        one_output(&both, &[t(&[1], vec![0f32])]),
        "only one is allowed",
    );
    let out = one_output(&n, &[t::<f32>(&[0, 2], vec![])]).unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(out, Value::Sequence(s) if s.items.is_empty()));
}

#[test]
fn category_mapper_both_ways_and_errors() {
    let cats = || {
        vec![
            strings("cats_strings", &["a", "b"]),
            ints("cats_int64s", &[10, 20]),
        ]
    };
    let n = ml_node("CategoryMapper", 1, 1, cats());
    let out = run(
        &n,
        1,
        &[t(&[3], vec!["b".to_string(), "x".into(), "a".into()])],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f64s(&out).1, vec![20.0, -1.0, 10.0]);
    let out = run(&n, 1, &[t(&[2], vec![10i64, 30])]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(strs(&out), vec!["a", "_Unused"]);
    kernel_err(run(&n, 1, &[t(&[1], vec![1f32])]), "string or int64");
    let bad = ml_node(
        "CategoryMapper",
        1,
        1,
        vec![strings("cats_strings", &["a"]), ints("cats_int64s", &[])],
    );
    kernel_err(
        run(&bad, 1, &[t(&[1], vec![1i64])]),
        "1 cats_strings but 0 cats_int64s",
    );
}

fn str_scalar(s: &str) -> Tensor {
    Tensor::scalar(s.to_string())
}

#[test]
fn dict_vectorizer_string_values_and_errors() {
    let n = ml_node(
        "DictVectorizer",
        1,
        1,
        vec![ints("int64_vocabulary", &[4, 2, 9])],
    );
    let keys = Tensor::from_vec(&[2], vec![9i64, 4]).unwrap_or_else(|e| panic!("{e}"));
    let input = map_of(keys, vec![str_scalar("nine"), str_scalar("four")]);
    let out = run(&n, 1, std::slice::from_ref(&input)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.shape(), &[1, 3]);
    assert_eq!(strs(&out), vec!["four", "", "nine"]);
    let wrong = ml_node(
        "DictVectorizer",
        1,
        1,
        vec![strings("string_vocabulary", &["a"])],
    );
    kernel_err(run(&wrong, 1, &[input]), "exactly one of string_vocabulary");
    kernel_err(run(&n, 1, &[t(&[1], vec![1f32])]), "must be a map");
}

#[test]
fn cast_map_string_values_forms_and_errors() {
    let keys = || Tensor::from_vec(&[2], vec![2i64, 0]).unwrap_or_else(|e| panic!("{e}"));
    let strings_map = map_of(keys(), vec![str_scalar("7"), str_scalar("-3")]);
    let cast = |attrs: Vec<AttributeProto>| ml_node("CastMap", 1, 1, attrs);
    let out = run(
        &cast(vec![string("cast_to", "TO_INT64")]),
        1,
        std::slice::from_ref(&strings_map),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Dense: values in ascending key order.
    assert_eq!(f64s(&out), (vec![1, 2], vec![-3.0, 7.0]));
    let sparse = cast(vec![
        string("cast_to", "TO_STRING"),
        string("map_form", "SPARSE"),
        int_attr("max_map", 4),
    ]);
    let out = run(&sparse, 1, std::slice::from_ref(&strings_map)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(strs(&out), vec!["-3", "0.f", "7", "0.f"]);
    let floats_map = map_of(
        keys(),
        vec![Tensor::scalar(1.5f32), Tensor::scalar(-0.25f32)],
    );
    let out = run(&sparse, 1, &[floats_map]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(strs(&out), vec!["-0.250000", "0.f", "1.500000", "0.f"]);
    let words = map_of(keys(), vec![str_scalar("seven"), str_scalar("1")]);
    kernel_err(
        run(&cast(vec![]), 1, &[words]),
        "map value 'seven' is not a number",
    );
    let negative = map_of(
        Tensor::from_vec(&[1], vec![-1i64]).unwrap_or_else(|e| panic!("{e}")),
        vec![Tensor::scalar(1f32)],
    );
    kernel_err(run(&sparse, 1, &[negative]), "keys >= 0, found -1");
    kernel_err(
        run(
            &cast(vec![string("map_form", "DIAGONAL")]),
            1,
            &[strings_map],
        ),
        "map_form must be DENSE or SPARSE",
    );
}
