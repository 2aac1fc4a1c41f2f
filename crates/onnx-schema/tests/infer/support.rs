//! Shared helpers: type builders and a one-node inference call.

use onnx_proto::tensor_proto::DataType;
use onnx_proto::{AttributeProto, TensorProto, TypeProto};
use onnx_proto::{GraphProto, NodeProto, ValueInfoProto};
use onnx_schema::infer::{
    elem_type_of, infer_graph_values, infer_node, shape_of, tensor_type, GraphInference,
    InferError, InputInfo, OpsetImports, OutputInfo, SymDim,
};
use onnx_schema::{element_type_name, registry, type_str_of};

/// Parses a dim: a number is known, "?" unknown, anything else a param.
pub fn dim(text: &str) -> SymDim {
    match text.parse::<i64>() {
        Ok(v) => SymDim::Known(v),
        Err(_) if text == "?" => SymDim::Unknown,
        Err(_) => SymDim::Param(text.to_string()),
    }
}

/// Dims from a list like `["batch", "16", "?"]`.
pub fn dims(text: &[&str]) -> Vec<SymDim> {
    text.iter().map(|t| dim(t)).collect()
}

/// A float tensor type of the given dims.
pub fn float(text: &[&str]) -> TypeProto {
    tensor_type(Some(1), Some(&dims(text)))
}

/// A tensor type of element type `elem` and the given dims.
pub fn typed(elem: i32, text: &[&str]) -> TypeProto {
    tensor_type(Some(elem), Some(&dims(text)))
}

/// An int64 constant of the given dims and values.
pub fn int64s(dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: Some(7),
        int64_data: values.to_vec(),
        ..Default::default()
    }
}

/// The int64 type of a constant.
pub fn type_of(t: &TensorProto) -> TypeProto {
    let d: Vec<SymDim> = t.dims.iter().map(|&v| SymDim::Known(v)).collect();
    tensor_type(t.data_type, Some(&d))
}

pub fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(2),
        i: Some(v),
        ..Default::default()
    }
}

pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(7),
        ints: v.to_vec(),
        ..Default::default()
    }
}

pub fn attr_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(3),
        s: Some(v.as_bytes().to_vec().into()),
        ..Default::default()
    }
}

/// Runs `infer_node` for `op` at `opset` in the default domain.
pub fn run(
    op: &str,
    opset: i64,
    attrs: &[AttributeProto],
    inputs: &[Option<InputInfo<'_>>],
    n_outputs: usize,
) -> Result<Vec<OutputInfo>, InferError> {
    let schema = registry()
        .lookup("", op, opset)
        .unwrap_or_else(|| panic!("{op} has no schema at opset {opset}"));
    infer_node(schema, opset, attrs, inputs, n_outputs)
}

/// Renders a type as `float[batch, 16, ?]`: element type (`?` unknown) and shape (`[*]` for an
/// unknown rank); "unknown" for no type, the type string for non-tensors.
pub fn render(ty: Option<&TypeProto>) -> String {
    let Some(ty) = ty else {
        return "unknown".to_string();
    };
    if !matches!(ty.value, Some(onnx_proto::type_proto::Value::TensorType(_))) {
        return type_str_of(ty).unwrap_or_else(|| "incomplete".to_string());
    }
    let elem = elem_type_of(ty)
        .and_then(|e| DataType::try_from(e).ok())
        .and_then(element_type_name)
        .unwrap_or("?");
    let shape = match shape_of(ty) {
        Some(s) => {
            let parts: Vec<String> = s.iter().map(ToString::to_string).collect();
            format!("[{}]", parts.join(", "))
        }
        None => "[*]".to_string(),
    };
    format!("{elem}{shape}")
}

/// Renders every output of a node.
pub fn render_all(outs: &[OutputInfo]) -> Vec<String> {
    outs.iter().map(|o| render(o.ty.as_ref())).collect()
}

/// A small graph under construction: inputs, constants and nodes, inferred at one opset.
pub struct Graph {
    pub graph: GraphProto,
    opset: i64,
}

impl Graph {
    pub fn new(opset: i64) -> Self {
        Self {
            graph: GraphProto::default(),
            opset,
        }
    }

    pub fn input(mut self, name: &str, ty: TypeProto) -> Self {
        self.graph.input.push(ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(ty),
            ..Default::default()
        });
        self
    }

    /// A `Constant` node producing an int64 tensor (a scalar when `dims` is empty).
    pub fn constant(self, name: &str, dims: &[i64], values: &[i64]) -> Self {
        let value = AttributeProto {
            name: Some("value".into()),
            r#type: Some(4),
            t: Some(int64s(dims, values)),
            ..Default::default()
        };
        self.node("Constant", &[], &[name], vec![value])
    }

    pub fn initializer(mut self, name: &str, t: TensorProto) -> Self {
        self.graph.initializer.push(TensorProto {
            name: Some(name.into()),
            ..t
        });
        self
    }

    pub fn node(
        mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> Self {
        self.graph.node.push(NodeProto {
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs,
            ..Default::default()
        });
        self
    }

    /// Adds a graph output by name (its type is left to inference).
    pub fn output(mut self, name: &str) -> Self {
        self.graph.output.push(ValueInfoProto {
            name: Some(name.into()),
            ..Default::default()
        });
        self
    }

    pub fn infer(&self) -> GraphInference {
        let opsets: OpsetImports = [(String::new(), self.opset)].into_iter().collect();
        infer_graph_values(&self.graph, &opsets).expect("the graph is consistent")
    }
}
