//! The IR version of a model lowered for onnxruntime: at most the one onnxruntime loads, where
//! nothing in the model needs a newer one.
//!
//! onnxruntime 1.31 refuses a model whose IR version is above 13 ("Unsupported model IR
//! version"), whatever it holds; tools write IR 14 today (onnx 1.23's `helper.make_model`, its
//! `IR_VERSION`). IR 14 added only the FLOAT6E2M3 and FLOAT6E3M2 element
//! types and `TypeProto.Opaque` outside ONNX-ML (`proto/onnx.proto`, `IR_VERSION`), so a model
//! that uses neither, at a default-domain opset IR 13 covers, means the same at IR 13. Anything
//! this does not read (training information) keeps the model's version.

use onnx_ir::onnx_proto::{type_proto, AttributeProto, TensorProto, TypeProto};
use onnx_ir::{same_domain, AttributeValue, Graph, Model};

/// The highest IR version onnxruntime 1.31 loads.
pub(crate) const ONNXRUNTIME_MAX_IR: i64 = 13;

/// The element types IR 14 added (FLOAT6E2M3, FLOAT6E3M2).
const IR_14_ELEMENT_TYPES: [i32; 2] = [27, 28];

/// Lowers the model's IR version to [`ONNXRUNTIME_MAX_IR`] where it is above and nothing needs
/// it; returns the (old, new) versions when it did.
pub(crate) fn clamp_for_onnxruntime(model: &mut Model) -> Option<(i64, i64)> {
    let ir = model.ir_version?;
    if ir <= ONNXRUNTIME_MAX_IR || !model.training_info.is_empty() {
        return None;
    }
    let registry = onnx_schema::registry();
    let opset_ok = model
        .opset_imports
        .iter()
        .filter(|o| same_domain(&o.domain, ""))
        .all(|o| {
            registry
                .min_ir_version_for_opset(o.version)
                .is_some_and(|min| min <= ONNXRUNTIME_MAX_IR)
        });
    let functions_ok = model.functions.iter().all(|f| {
        !graph_needs_ir_14(&f.body) && !f.attribute_protos.iter().any(attribute_needs_ir_14)
    });
    if !opset_ok || !functions_ok || graph_needs_ir_14(&model.graph) {
        return None;
    }
    model.ir_version = Some(ONNXRUNTIME_MAX_IR);
    Some((ir, ONNXRUNTIME_MAX_IR))
}

fn graph_needs_ir_14(g: &Graph) -> bool {
    let values = g.values.iter().any(|v| {
        v.ty.as_ref().is_some_and(type_needs_ir_14)
            || v.initializer.as_ref().is_some_and(tensor_needs_ir_14)
            || v.sparse_initializer
                .as_ref()
                .is_some_and(|s| s.values.as_ref().is_some_and(tensor_needs_ir_14))
    });
    values
        || g.nodes.iter().any(|n| {
            n.attributes.iter().any(|a| match &a.value {
                AttributeValue::Proto(p) => attribute_needs_ir_14(p),
                other => other.subgraphs().any(graph_needs_ir_14),
            })
        })
}

fn tensor_needs_ir_14(t: &TensorProto) -> bool {
    t.data_type
        .is_some_and(|d| IR_14_ELEMENT_TYPES.contains(&d))
}

fn attribute_needs_ir_14(a: &AttributeProto) -> bool {
    a.t.as_ref().is_some_and(tensor_needs_ir_14)
        || a.tensors.iter().any(tensor_needs_ir_14)
        || a.tp.as_ref().is_some_and(type_needs_ir_14)
        || a.type_protos.iter().any(type_needs_ir_14)
        || a.sparse_tensor
            .as_ref()
            .and_then(|s| s.values.as_ref())
            .is_some_and(tensor_needs_ir_14)
        || a.sparse_tensors
            .iter()
            .filter_map(|s| s.values.as_ref())
            .any(tensor_needs_ir_14)
        // A graph attribute kept as a proto (not lifted into a `Graph`) is not read: the model
        // keeps its version.
        || a.g.is_some()
        || !a.graphs.is_empty()
}

fn type_needs_ir_14(t: &TypeProto) -> bool {
    use type_proto::Value;
    match &t.value {
        Some(Value::TensorType(x)) => x
            .elem_type
            .is_some_and(|d| IR_14_ELEMENT_TYPES.contains(&d)),
        Some(Value::SparseTensorType(x)) => x
            .elem_type
            .is_some_and(|d| IR_14_ELEMENT_TYPES.contains(&d)),
        Some(Value::SequenceType(s)) => s.elem_type.as_deref().is_some_and(type_needs_ir_14),
        Some(Value::OptionalType(o)) => o.elem_type.as_deref().is_some_and(type_needs_ir_14),
        Some(Value::MapType(m)) => m.value_type.as_deref().is_some_and(type_needs_ir_14),
        Some(Value::OpaqueType(_)) => true,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Model {
        Model::from_proto(onnx_text::parse_model(text).expect("test model parses"))
            .expect("imports")
    }

    #[test]
    fn an_ir_14_model_that_needs_nothing_of_14_is_written_at_13() {
        let mut m = parse(
            "<ir_version: 14, opset_import: [\"\" : 23]>\ng (float[2] x) => (float[2] y) {\n  y = Relu(x)\n}\n",
        );
        assert_eq!(clamp_for_onnxruntime(&mut m), Some((14, 13)));
        assert_eq!(m.ir_version, Some(13));
        // At 13 or below nothing changes.
        assert_eq!(clamp_for_onnxruntime(&mut m), None);
        assert_eq!(m.ir_version, Some(13));
    }

    #[test]
    fn a_float6_value_or_initializer_keeps_ir_14() {
        for text in [
            "<ir_version: 14, opset_import: [\"\" : 23]>\ng (float6e2m3[2] x) => (float6e2m3[2] y) {\n  y = Identity(x)\n}\n",
            "<ir_version: 14, opset_import: [\"\" : 23]>\ng (float[2] x) => (float[2] y)\n  <float6e3m2[2] w = {1, 2}>\n{\n  c = Cast <to = 1> (w)\n  y = Add(x, c)\n}\n",
        ] {
            let mut m = parse(text);
            assert_eq!(clamp_for_onnxruntime(&mut m), None, "{text}");
            assert_eq!(m.ir_version, Some(14));
        }
    }

    #[test]
    fn a_float6_tensor_in_a_subgraph_keeps_ir_14() {
        let mut m = parse(
            "<ir_version: 14, opset_import: [\"\" : 23]>\ng (bool c, float[2] x) => (float[2] y) {\n  y = If(c) <then_branch = t () => (float[2] a) {\n    w = Constant <value = float6e2m3[2] {1, 2}> ()\n    a = Cast <to = 1> (w)\n  }, else_branch = e () => (float[2] b) {\n    b = Identity(x)\n  }>\n}\n",
        );
        assert_eq!(clamp_for_onnxruntime(&mut m), None);
    }
}
