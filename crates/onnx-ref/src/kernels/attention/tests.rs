//! Unit tests of Attention and the node-building helpers the family's tests share.

use super::*;
use crate::eval::eval_node;
use onnx_proto::{AttributeProto, NodeProto};

/// A node of `op` with `inputs` names `in0..`, `outputs` names `out0..` and attributes.
pub(crate) fn node(
    op: &str,
    domain: &str,
    inputs: usize,
    outputs: usize,
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op.to_string()),
        domain: Some(domain.to_string()),
        input: (0..inputs).map(|i| format!("in{i}")).collect(),
        output: (0..outputs).map(|i| format!("out{i}")).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        i: Some(v),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    }
}

pub(crate) fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        f: Some(v),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Float as i32),
        ..Default::default()
    }
}

pub(crate) fn string_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        s: Some(v.as_bytes().to_vec().into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::String as i32),
        ..Default::default()
    }
}

pub(crate) fn f32_tensor(shape: &[usize], data: Vec<f32>) -> Option<Value> {
    Some(Value::Tensor(
        Tensor::from_vec(shape, data).unwrap_or_else(|e| panic!("{e}")),
    ))
}

/// Runs a node, returning its output tensors.
pub(crate) fn run(node: &NodeProto, opset: i64, inputs: &[Option<Value>]) -> Result<Vec<Tensor>> {
    let outs = eval_node(node, opset, inputs)?;
    Ok(outs
        .into_iter()
        .map(|v| match v {
            Value::Tensor(t) => t,
            other => panic!("expected a tensor, got {}", other.kind()),
        })
        .collect())
}

pub(crate) fn floats(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap_or_else(|e| panic!("{e}"))
}

fn seq(n: usize, step: f32) -> Vec<f32> {
    (0..n).map(|i| ((i * 7 % 11) as f32 - 5.0) * step).collect()
}

#[test]
fn single_key_returns_its_value() {
    // One key: softmax is 1, so Y is V broadcast over the queries.
    let n = node("Attention", "", 3, 1, vec![]);
    let out = run(
        &n,
        23,
        &[
            f32_tensor(&[1, 1, 3, 2], seq(6, 0.3)),
            f32_tensor(&[1, 1, 1, 2], vec![0.5, -1.0]),
            f32_tensor(&[1, 1, 1, 2], vec![2.0, 3.0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(floats(&out[0]), vec![2.0, 3.0, 2.0, 3.0, 2.0, 3.0]);
}

#[test]
fn causal_mask_hides_later_keys() {
    let n = node(
        "Attention",
        "",
        3,
        4,
        vec![
            int_attr("is_causal", 1),
            int_attr("qk_matmul_output_mode", 3),
        ],
    );
    let out = run(
        &n,
        23,
        &[
            f32_tensor(&[1, 1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]),
            f32_tensor(&[1, 1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]),
            f32_tensor(&[1, 1, 2, 1], vec![10.0, 20.0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // Query 0 only sees key 0.
    let probs = floats(&out[3]);
    assert_eq!(probs[0], 1.0);
    assert_eq!(probs[1], 0.0);
    assert_eq!(floats(&out[0])[0], 10.0);
    assert!((probs[2] + probs[3] - 1.0).abs() < 1e-6);
}

#[test]
fn fully_masked_row_is_zero_and_present_concatenates() {
    let n = node("Attention", "", 6, 3, vec![]);
    let mask = Some(Value::Tensor(
        Tensor::from_vec(&[1, 3], vec![false, false, false]).unwrap_or_else(|e| panic!("{e}")),
    ));
    let out = run(
        &n,
        23,
        &[
            f32_tensor(&[1, 1, 1, 2], vec![1.0, 2.0]),
            f32_tensor(&[1, 1, 1, 2], vec![3.0, 4.0]),
            f32_tensor(&[1, 1, 1, 1], vec![5.0]),
            mask,
            f32_tensor(&[1, 1, 2, 2], vec![0.1, 0.2, 0.3, 0.4]),
            f32_tensor(&[1, 1, 2, 1], vec![6.0, 7.0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(floats(&out[0]), vec![0.0]);
    assert_eq!(out[1].shape(), &[1, 1, 3, 2]);
    assert_eq!(floats(&out[2]), vec![6.0, 7.0, 5.0]);
}

#[test]
fn empty_sequences_give_empty_outputs() {
    let n = node("Attention", "", 3, 1, vec![]);
    let out = run(
        &n,
        23,
        &[
            f32_tensor(&[1, 2, 0, 4], vec![]),
            f32_tensor(&[1, 2, 3, 4], vec![0.0; 24]),
            f32_tensor(&[1, 2, 3, 5], vec![0.0; 30]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out[0].shape(), &[1, 2, 0, 5]);
}

#[test]
fn bad_shapes_and_attributes_are_errors() {
    let q = f32_tensor(&[1, 3, 2, 4], vec![0.0; 24]);
    let kv = f32_tensor(&[1, 2, 2, 4], vec![0.0; 16]);
    let n = node("Attention", "", 3, 1, vec![]);
    let err = run(&n, 23, &[q.clone(), kv.clone(), kv.clone()]);
    assert!(
        matches!(&err, Err(RefError::Kernel { reason, .. }) if reason.contains("multiple")),
        "{err:?}"
    );
    let n = node(
        "Attention",
        "",
        3,
        1,
        vec![int_attr("qk_matmul_output_mode", 7)],
    );
    let q = f32_tensor(&[1, 2, 2, 4], vec![0.0; 16]);
    assert!(run(&n, 23, &[q.clone(), kv.clone(), kv.clone()]).is_err());
    // Heads attributes on 4-D inputs are refused from opset 25 only.
    let n = node("Attention", "", 3, 1, vec![int_attr("q_num_heads", 2)]);
    assert!(run(&n, 23, &[q.clone(), kv.clone(), kv.clone()]).is_ok());
    assert!(run(&n, 25, &[q.clone(), kv.clone(), kv.clone()]).is_err());
    // 3-D inputs need the head counts.
    let n = node("Attention", "", 3, 1, vec![]);
    let x = f32_tensor(&[1, 2, 4], vec![0.0; 8]);
    assert!(run(&n, 23, &[x.clone(), x.clone(), x]).is_err());
    let int = Some(Value::Tensor(
        Tensor::from_vec(&[1], vec![1i32]).unwrap_or_else(|e| panic!("{e}")),
    ));
    assert!(run(&n, 23, &[int.clone(), int.clone(), int]).is_err());
}

#[test]
fn window_and_nonpad_depend_on_opset() {
    // left_window_size 0 with is_causal: each query sees only its own key (opset 25);
    // opset 24 ignores the attribute.
    let n = node(
        "Attention",
        "",
        3,
        4,
        vec![
            int_attr("is_causal", 1),
            int_attr("left_window_size", 0),
            int_attr("qk_matmul_output_mode", 3),
        ],
    );
    let x = f32_tensor(&[1, 1, 2, 1], vec![1.0, 1.0]);
    let p25 = run(&n, 25, &[x.clone(), x.clone(), x.clone()]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(floats(&p25[3]), vec![1.0, 0.0, 0.0, 1.0]);
    let p24 = run(&n, 24, &[x.clone(), x.clone(), x.clone()]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(floats(&p24[3]), vec![1.0, 0.0, 0.5, 0.5]);
    // nonpad_kv_seqlen = 1 hides key 1 (opset 24).
    let n = node(
        "Attention",
        "",
        7,
        4,
        vec![int_attr("qk_matmul_output_mode", 3)],
    );
    let lens = Some(Value::Tensor(
        Tensor::from_vec(&[1], vec![1i64]).unwrap_or_else(|e| panic!("{e}")),
    ));
    let p = run(
        &n,
        24,
        &[x.clone(), x.clone(), x.clone(), None, None, None, lens],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(floats(&p[3]), vec![1.0, 0.0, 1.0, 0.0]);
}

#[test]
fn bfloat16_sums_round_each_step() {
    let mut row = vec![0.0f32; 200];
    for (i, v) in row.iter_mut().enumerate() {
        *v = (i as f32 * 0.37).sin();
    }
    let mut bf = row.clone();
    SoftmaxPrecision::Bf16.softmax(&mut bf);
    for v in &bf {
        assert_eq!(*v, bf16::from_f32(*v).to_f32());
    }
    SoftmaxPrecision::Acc.softmax(&mut row);
    let total: f32 = row.iter().sum();
    assert!((total - 1.0).abs() < 1e-5);
}

#[test]
fn softcap_bounds_the_scores() {
    let n = node(
        "Attention",
        "",
        3,
        4,
        vec![
            float_attr("softcap", 0.5),
            int_attr("qk_matmul_output_mode", 1),
        ],
    );
    let out = run(
        &n,
        23,
        &[
            f32_tensor(&[1, 1, 2, 2], vec![10.0, 0.0, -10.0, 0.0]),
            f32_tensor(&[1, 1, 2, 2], vec![10.0, 0.0, 0.0, 0.0]),
            f32_tensor(&[1, 1, 2, 1], vec![1.0, 2.0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let qk = floats(&out[3]);
    assert!(qk.iter().all(|x| x.abs() <= 0.5), "{qk:?}");
    assert!(qk[0] > 0.49 && qk[2] < -0.49, "{qk:?}");
}

#[test]
fn scores_all_minus_inf_under_a_finite_mask_give_nan_as_softmax_does() {
    // Attention's function body zeroes a row only where the mask's row is all -inf; a row of
    // -inf scores under a finite mask is Softmax's NaN.
    let n = node("Attention", "", 4, 1, vec![]);
    let out = run(
        &n,
        23,
        &[
            f32_tensor(&[1, 1, 1, 1], vec![f32::NEG_INFINITY]),
            f32_tensor(&[1, 1, 2, 1], vec![1.0, 2.0]),
            f32_tensor(&[1, 1, 2, 1], vec![3.0, 4.0]),
            f32_tensor(&[1, 2], vec![0.0, -1.0]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(floats(&out[0])[0].is_nan(), "{:?}", floats(&out[0]));
    let mut row = vec![f32::NEG_INFINITY; 3];
    SoftmaxPrecision::Acc.softmax(&mut row);
    assert!(row.iter().all(|v| v.is_nan()), "{row:?}");
}
