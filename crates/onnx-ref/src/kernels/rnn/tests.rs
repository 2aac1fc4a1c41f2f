//! Unit tests of the recurrent kernels: hand-computed recurrences, sequence_lens with
//! reverse direction, batch-major layout, and errors for bad attributes and shapes.

use super::*;
use onnx_proto::{AttributeProto, NodeProto};

fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        ..Default::default()
    }
}

fn attr_strs(name: &str, v: &[&str]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        strings: v.iter().map(|s| s.as_bytes().to_vec().into()).collect(),
        ..Default::default()
    }
}

/// Runs `op` with inputs in slot order (`None` for absent ones).
fn run(
    op: &str,
    opset: i64,
    attrs: Vec<AttributeProto>,
    inputs: Vec<Option<Tensor>>,
) -> Result<Vec<Tensor>> {
    let node = NodeProto {
        op_type: Some(op.into()),
        input: inputs
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if t.is_some() {
                    format!("x{i}")
                } else {
                    String::new()
                }
            })
            .collect(),
        output: vec!["y".into(), "y_h".into()],
        attribute: attrs,
        ..Default::default()
    };
    let vals: Vec<Option<Value>> = inputs.into_iter().map(|t| t.map(Value::Tensor)).collect();
    crate::eval_node(&node, opset, &vals)?
        .into_iter()
        .map(Value::into_tensor)
        .collect()
}

fn t(shape: &[usize], v: Vec<f32>) -> Option<Tensor> {
    Some(Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}")))
}

fn close(t: &Tensor, want: &[f64]) {
    let got = t.to_f64_vec().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
}

#[test]
fn rnn_recurrence_by_hand() -> Result<()> {
    let x = t(&[2, 1, 1], vec![1., 1.]);
    let w = t(&[1, 1, 1], vec![1.]);
    let r = t(&[1, 1, 1], vec![0.5]);
    let out = run("RNN", 7, vec![attr_i("hidden_size", 1)], vec![x, w, r])?;
    let h1 = 1f64.tanh();
    let h2 = (1.0 + 0.5 * h1).tanh();
    assert_eq!(out[0].shape(), &[2, 1, 1, 1]);
    close(&out[0], &[h1, h2]);
    close(&out[1], &[h2]);
    Ok(())
}

#[test]
fn reverse_with_sequence_lens_zero_fills() -> Result<()> {
    // Batch 2, lens [2, 1], identity activation via Affine(1, 0), R = 1: h accumulates x.
    let x = t(&[2, 2, 1], vec![1., 10., 2., 20.]);
    let w = t(&[1, 1, 1], vec![1.]);
    let r = t(&[1, 1, 1], vec![1.]);
    let lens = Some(Tensor::from_vec(&[2], vec![2i32, 1])?);
    let attrs = vec![
        attr_s("direction", "reverse"),
        attr_strs("activations", &["Affine"]),
    ];
    let out = run("RNN", 14, attrs, vec![x, w, r, None, lens])?;
    // Batch 0 runs t=1 then t=0: Y[1] = 2, Y[0] = 3; batch 1 only t=0: Y[0] = 10, Y[1] = 0.
    close(&out[0], &[3., 10., 2., 0.]);
    close(&out[1], &[3., 10.]);
    Ok(())
}

#[test]
fn batch_major_layout_from_opset_14() -> Result<()> {
    let x = t(&[3, 2, 1], vec![1., 2., 3., 4., 5., 6.]);
    let w = t(&[2, 1, 1], vec![1., 1.]);
    let r = t(&[2, 1, 1], vec![0., 0.]);
    let attrs = vec![
        attr_i("layout", 1),
        attr_s("direction", "bidirectional"),
        attr_strs("activations", &["Relu"]),
    ];
    let out = run("RNN", 14, attrs, vec![x, w, r])?;
    assert_eq!(out[0].shape(), &[3, 2, 2, 1]);
    assert_eq!(out[1].shape(), &[3, 2, 1]);
    // With R = 0 each output is relu(x) in both directions.
    close(&out[0], &[1., 1., 2., 2., 3., 3., 4., 4., 5., 5., 6., 6.]);
    close(&out[1], &[2., 1., 4., 3., 6., 5.]);
    Ok(())
}

#[test]
fn gru_and_lstm_single_unit() -> Result<()> {
    let x = t(&[1, 1, 1], vec![1.]);
    // GRU gates z, r, h with W = [0, 0, 1], R = 0, h0 = 0.5: z = r = 0.5, h~ = tanh(1).
    let w = t(&[1, 3, 1], vec![0., 0., 1.]);
    let r = t(&[1, 3, 1], vec![0.; 3]);
    let h0 = t(&[1, 1, 1], vec![0.5]);
    let out = run("GRU", 7, vec![], vec![x.clone(), w, r, None, None, h0])?;
    close(&out[1], &[0.5 * 1f64.tanh() + 0.25]);
    // LSTM gates i, o, f, c with W = [0, 0, 0, 1]: i = o = f = 0.5, c~ = tanh(1).
    let w = t(&[1, 4, 1], vec![0., 0., 0., 1.]);
    let r = t(&[1, 4, 1], vec![0.; 4]);
    let out = run("LSTM", 7, vec![], vec![x.clone(), w.clone(), r.clone()])?;
    let c = 0.5 * 1f64.tanh();
    close(&out[1], &[0.5 * c.tanh()]);
    // input_forget couples f = 1 - i: same here since i = 0.5.
    let out = run("LSTM", 7, vec![attr_i("input_forget", 1)], vec![x, w, r])?;
    close(&out[1], &[0.5 * c.tanh()]);
    Ok(())
}

#[test]
fn bad_attributes_and_shapes_are_errors() {
    let x = t(&[1, 1, 1], vec![1.]);
    let w = t(&[1, 1, 1], vec![1.]);
    let r = t(&[1, 1, 1], vec![1.]);
    let bad_act = vec![attr_strs("activations", &["Gelu"])];
    assert!(run("RNN", 7, bad_act, vec![x.clone(), w.clone(), r.clone()]).is_err());
    let bad_dir = vec![attr_s("direction", "sideways")];
    assert!(run("RNN", 7, bad_dir, vec![x.clone(), w.clone(), r.clone()]).is_err());
    let bad_hidden = vec![attr_i("hidden_size", 3)];
    assert!(run("RNN", 7, bad_hidden, vec![x.clone(), w.clone(), r.clone()]).is_err());
    let lens = Some(Tensor::from_vec(&[1], vec![5i32]).unwrap_or_else(|e| panic!("{e}")));
    assert!(run("RNN", 7, vec![], vec![x.clone(), w.clone(), r, None, lens]).is_err());
    let wide_r = t(&[1, 1, 2], vec![1., 1.]);
    assert!(run("RNN", 7, vec![], vec![x.clone(), w.clone(), wide_r]).is_err());
    let ints = Some(Tensor::from_vec(&[1, 1, 1], vec![1i32]).unwrap_or_else(|e| panic!("{e}")));
    assert!(run(
        "RNN",
        7,
        vec![],
        vec![ints, w.clone(), t(&[1, 1, 1], vec![1.])]
    )
    .is_err());
}

#[test]
fn empty_batch_gives_empty_outputs() -> Result<()> {
    let x = t(&[2, 0, 1], vec![]);
    let w = t(&[1, 1, 1], vec![1.]);
    let r = t(&[1, 1, 1], vec![1.]);
    let out = run("RNN", 7, vec![], vec![x, w, r])?;
    assert_eq!(out[0].shape(), &[2, 1, 0, 1]);
    assert_eq!(out[1].shape(), &[1, 0, 1]);
    Ok(())
}
