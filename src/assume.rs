//! `--assume NAME=ones` ([`crate::Optimizer::assume`]): an assumption the user states about the
//! values of a graph input, applied before the model is optimized. Under `ones` every element
//! of the input is 1 (true for a bool input), whatever its shape: the usual case is an LLM's
//! `attention_mask` when no sequence is padded (a batch of one, or sequences of one length).
//!
//! The input stays in the model's interface (callers still pass it, and its shape still
//! counts), but every node of the main graph that read it reads `ConstantOfShape(Shape(x))`
//! instead, so the rules see a tensor whose value is known everywhere and the mask arithmetic
//! built from it folds away. The check compares the optimized model with the model so
//! prepared, that is, on inputs drawn under the assumption. An output that is the input itself
//! stays the input.
//!
//! Errors ([`Error::BadAssumption`]): a name that is not a graph input, an input named twice,
//! an element type with no 1 (string, complex), a model below opset 9 (ConstantOfShape; 20 for
//! a bfloat16 input), or an input that a subgraph reads from the main graph (its reads are by
//! name, and are not rewritten).

use onnx_ir::onnx_proto::{tensor_proto::DataType, AttributeProto, TensorProto};
use onnx_ir::{Attribute, AttributeValue, Model, Node, Value};

use crate::Error;

/// What the user assumes about an input's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Assumption {
    /// Every element is 1 (true for bool).
    Ones,
}

impl std::str::FromStr for Assumption {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ones" => Ok(Assumption::Ones),
            other => Err(format!("unknown assumption '{other}' (known: ones)")),
        }
    }
}

impl std::fmt::Display for Assumption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Assumption::Ones => f.write_str("ones"),
        }
    }
}

/// The bytes of 1 in `dtype` (little-endian, as `raw_data` holds it), or `None` for a type
/// without one.
fn one_bytes(dtype: i32) -> Option<Vec<u8>> {
    let t = DataType::try_from(dtype).ok()?;
    Some(match t {
        DataType::Bool | DataType::Int8 | DataType::Uint8 => vec![1],
        DataType::Int16 | DataType::Uint16 => 1u16.to_le_bytes().to_vec(),
        DataType::Int32 | DataType::Uint32 => 1u32.to_le_bytes().to_vec(),
        DataType::Int64 | DataType::Uint64 => 1u64.to_le_bytes().to_vec(),
        DataType::Float => 1f32.to_le_bytes().to_vec(),
        DataType::Double => 1f64.to_le_bytes().to_vec(),
        DataType::Float16 => 0x3C00u16.to_le_bytes().to_vec(),
        DataType::Bfloat16 => 0x3F80u16.to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// Applies each assumption to the model's main graph (see the module documentation).
pub(crate) fn apply(model: &mut Model, assumed: &[(String, Assumption)]) -> Result<(), Error> {
    if assumed.is_empty() {
        return Ok(());
    }
    // ConstantOfShape is opset 9's; its bfloat16 value, opset 20's.
    let opset = model.opset_version("");
    let mut names = std::collections::BTreeSet::new();
    crate::passes::names::collect_names(&model.graph, &mut names);
    let g = &mut model.graph;
    let mut seen = std::collections::BTreeSet::new();
    let mut prelude: Vec<Node> = Vec::new();
    for (name, what) in assumed {
        let bad = |message: String| Error::BadAssumption {
            name: name.clone(),
            message,
        };
        if !seen.insert(name.as_str()) {
            return Err(bad("named twice".into()));
        }
        let Some(&input) = g.inputs.iter().find(|&&v| &*g.value(v).name == name) else {
            return Err(bad(format!(
                "not an input of the model (its inputs: {})",
                crate::input_shapes::input_names(g).join(", ")
            )));
        };
        let dtype = onnx_schema::infer::elem_type_of(
            g.value(input)
                .ty
                .as_ref()
                .ok_or_else(|| bad("the input declares no type".into()))?,
        )
        .ok_or_else(|| bad("the input is not a tensor of a known element type".into()))?;
        let one = one_bytes(dtype).ok_or_else(|| {
            bad(format!(
                "its element type {} has no 1",
                crate::elem_type_name(Some(dtype))
            ))
        })?;
        let least = match DataType::try_from(dtype) {
            Ok(DataType::Bfloat16) => 20,
            _ => 9,
        };
        if opset.is_none_or(|v| v < least) {
            return Err(bad(format!(
                "the model's opset ({}) has no ConstantOfShape of its type, which the assumption \
                 writes (opset {least} or later: convert the model first)",
                opset.map_or("none".to_string(), |v| v.to_string())
            )));
        }
        let read_inside = g.nodes_in_order().any(|(_, n)| {
            n.subgraphs()
                .any(|s| s.outer_reads().iter().any(|r| &**r == name))
        });
        if read_inside {
            return Err(bad(
                "a subgraph reads it from the main graph, and those reads are not rewritten".into(),
            ));
        }
        match what {
            Assumption::Ones => {
                let shape = g.add_value(Value::new(crate::passes::names::fresh(
                    &mut names,
                    &format!("{name}_shape"),
                )));
                let ones = g.add_value(Value::new(crate::passes::names::fresh(
                    &mut names,
                    &format!("{name}_assumed_ones"),
                )));
                let order = g.order.clone();
                for id in order {
                    for slot in g.node_mut(id).inputs.iter_mut() {
                        if *slot == Some(input) {
                            *slot = Some(ones);
                        }
                    }
                }
                prelude.push(Node::new("Shape", vec![Some(input)], vec![Some(shape)]));
                let mut fill = Node::new("ConstantOfShape", vec![Some(shape)], vec![Some(ones)]);
                fill.attributes.push(tensor_attribute("value", dtype, one));
                prelude.push(fill);
            }
        }
    }
    let mut placed: Vec<onnx_ir::NodeId> = prelude
        .into_iter()
        .map(|n| g.add_node_unordered(n))
        .collect();
    placed.append(&mut g.order);
    g.order = placed;
    // A fresh import of the edited model: the layout every pass expects (ARCHITECTURE.md).
    *model = Model::from_proto(model.to_proto()).map_err(|e| Error::BadAssumption {
        name: assumed[0].0.clone(),
        message: format!("the prepared model does not import again: {e}"),
    })?;
    Ok(())
}

/// A one-element tensor attribute (ConstantOfShape's `value`).
fn tensor_attribute(name: &str, dtype: i32, raw: Vec<u8>) -> Attribute {
    let t = TensorProto {
        dims: vec![1],
        data_type: Some(dtype),
        raw_data: Some(raw.into()),
        ..TensorProto::default()
    };
    let proto = AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(onnx_ir::onnx_proto::attribute_proto::AttributeType::Tensor as i32),
        t: Some(t),
        ..AttributeProto::default()
    };
    Attribute {
        name: name.into(),
        value: AttributeValue::Proto(Box::new(proto)),
        rest: None,
    }
}
