//! Function bodies `onnx.checker`'s full check expands. For an op that has a function body but
//! no type inference of its own (MeanVarianceNormalization), onnx infers types by expanding the
//! *latest* body with the node's attributes bound (`ProcessCall` with `AttributeBinder`). A body
//! attribute that refers (`ref_attr_name`) to an attribute the node omits, and that the body
//! gives no default for, is dropped: onnx does not fall back to the schema's default. When that
//! leaves a body node without a value it needs (a Constant without any value attribute, or a
//! required attribute of the body node's schema), onnx rejects the model, and so does this
//! check: the message says to set the attribute explicitly.

use onnx_proto::{AttributeProto, FunctionProto, NodeProto};
use onnx_schema::{OpSchema, SchemaRegistry};

use crate::check::schema::SchemaProblem;
use crate::graph::Node;
use crate::model::same_domain;

/// Checks the body onnx would expand for `node`, if any.
pub(crate) fn check_body_expansion(
    registry: &SchemaRegistry,
    schema: &OpSchema,
    callee: &str,
    node: &Node,
    out: &mut Vec<SchemaProblem>,
) {
    if schema.has_type_and_shape_inference || !schema.has_function() {
        return;
    }
    let Some(body_opset) = schema.function_opset_versions().last() else {
        return;
    };
    let Some(body) = schema.function_body(body_opset) else {
        return;
    };
    let is_bound = |name: &str| {
        let from_node = body.attribute.iter().any(|a| a == name) && node.attribute(name).is_some();
        from_node
            || body
                .attribute_proto
                .iter()
                .any(|a| a.name.as_deref() == Some(name))
    };
    for (index, body_node) in body.node.iter().enumerate() {
        let (dropped, kept): (Vec<&AttributeProto>, Vec<&AttributeProto>) =
            body_node.attribute.iter().partition(|a| {
                a.ref_attr_name
                    .as_deref()
                    .is_some_and(|r| !r.is_empty() && !is_bound(r))
            });
        let Some(first) = dropped.first() else {
            continue;
        };
        if lacks_needed_value(registry, &body, body_node, &dropped, &kept) {
            out.push(SchemaProblem::UnboundBodyAttribute {
                attribute: first.ref_attr_name.clone().unwrap_or_default(),
                callee: callee.to_string(),
                body_opset,
                body_node: index,
                body_op: body_node.op_type.clone().unwrap_or_default(),
            });
        }
    }
}

/// Whether a body node, once `dropped` is removed, misses a value: a Constant needs one value
/// attribute, any other op the required attributes of its schema.
fn lacks_needed_value(
    registry: &SchemaRegistry,
    body: &FunctionProto,
    body_node: &NodeProto,
    dropped: &[&AttributeProto],
    kept: &[&AttributeProto],
) -> bool {
    let domain = body_node.domain.as_deref().unwrap_or("");
    let op_type = body_node.op_type.as_deref().unwrap_or("");
    if same_domain(domain, "") && op_type == "Constant" {
        return !kept.iter().any(|a| {
            a.name
                .as_deref()
                .is_some_and(|n| n.starts_with("value") || n == "sparse_value")
        });
    }
    let version = body
        .opset_import
        .iter()
        .find(|o| same_domain(o.domain.as_deref().unwrap_or(""), domain))
        .and_then(|o| o.version);
    let Some(body_schema) = version.and_then(|v| registry.lookup(domain, op_type, v)) else {
        return false;
    };
    dropped.iter().any(|a| {
        a.name
            .as_deref()
            .and_then(|n| body_schema.attribute(n))
            .is_some_and(|s| s.required)
    })
}
