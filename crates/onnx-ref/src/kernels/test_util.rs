//! Fixtures shared by the kernel unit tests: build a node, an int attribute, a tensor input,
//! and run one node through `eval_node`.

use onnx_proto::{AttributeProto, NodeProto};

use crate::error::Result;
use crate::eval::eval_node;
use crate::tensor::Tensor;
use crate::value::Value;

/// A present tensor input of `shape` holding `v`.
pub(crate) fn t<T: crate::tensor::Elem>(shape: &[usize], v: Vec<T>) -> Option<Value> {
    Some(Value::Tensor(
        Tensor::from_vec(shape, v).unwrap_or_else(|e| panic!("{e}")),
    ))
}

/// A default-domain node with the given inputs, one output `y` and attributes.
pub(crate) fn node(op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["y".into()],
        attribute: attrs,
        ..Default::default()
    }
}

/// An int attribute.
pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
        ..Default::default()
    }
}

/// Runs `n` at `opset` and returns its first output as a tensor.
pub(crate) fn run(n: &NodeProto, opset: i64, inputs: &[Option<Value>]) -> Result<Tensor> {
    let mut out = eval_node(n, opset, inputs)?;
    out.remove(0).into_tensor()
}
