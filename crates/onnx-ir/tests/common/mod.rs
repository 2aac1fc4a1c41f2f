//! Helpers shared by the integration tests: the models of the shared test data (found with
//! `onnx_testdata::require_shared!`) and small proto builders.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use onnx_proto::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto,
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// Every `model.onnx` of the backend suite and of the development models under `root` (the
/// shared directory), sorted.
pub fn shared_models(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for sub in [
        "onnx-backend/node",
        "onnx-backend/simple",
        "onnx-backend/pytorch-converted",
        "onnx-backend/pytorch-operator",
        "models",
    ] {
        let dir = root.join(sub);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        let mut models: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("model.onnx"))
            .filter(|p| p.is_file())
            .collect();
        models.sort();
        out.extend(models);
    }
    assert!(
        out.len() > 1900,
        "expected the whole backend suite, found {} models",
        out.len()
    );
    out
}

pub fn entry(key: &str, value: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(key.into()),
        value: Some(value.into()),
    }
}

pub fn tensor_type(elem: DataType, dims: &[i64]) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem as i32),
            shape: Some(TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&d| tensor_shape_proto::Dimension {
                        value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                        ..Default::default()
                    })
                    .collect(),
            }),
        })),
        ..Default::default()
    }
}

/// A float tensor value-info entry.
pub fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(tensor_type(DataType::Float, dims)),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// A float tensor with raw data of the right size.
pub fn tensor(name: &str, dims: &[i64]) -> TensorProto {
    let count: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(Bytes::from(vec![0u8; 4 * count as usize])),
        ..Default::default()
    }
}

pub fn int_attr(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

pub fn graph_attr(name: &str, graph: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(graph),
        ..Default::default()
    }
}

pub fn opset(domain: &str, version: i64) -> OperatorSetIdProto {
    OperatorSetIdProto {
        domain: Some(domain.into()),
        version: Some(version),
    }
}

/// A model around a graph with IR 8 and opset 17.
pub fn model(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![opset("", 17)],
        graph: Some(graph),
        ..Default::default()
    }
}

/// A graph `name` with float inputs and outputs of shape [2].
pub fn graph(name: &str, inputs: &[&str], outputs: &[&str], nodes: Vec<NodeProto>) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        input: inputs.iter().map(|n| vi(n, &[2])).collect(),
        output: outputs.iter().map(|n| vi(n, &[2])).collect(),
        node: nodes,
        ..Default::default()
    }
}
