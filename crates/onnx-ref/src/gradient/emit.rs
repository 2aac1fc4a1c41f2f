//! The emitter the derivative rules write the backward graph with: it appends ordinary ONNX
//! nodes (default domain, valid for the model's opset) and internal nodes, each with a fresh
//! output name that collides with no name of the enclosing graph.

use std::collections::BTreeSet;

use onnx_proto::{attribute_proto::AttributeType, tensor_proto::DataType};
use onnx_proto::{AttributeProto, NodeProto, TensorProto};

use crate::kernels::backward::INTERNAL_DOMAIN;

/// Appends backward nodes with fresh names.
#[derive(Debug)]
pub(crate) struct Emitter {
    /// The nodes emitted so far, in order.
    pub(crate) nodes: Vec<NodeProto>,
    /// Names that must not be reused (the enclosing graph's and those emitted).
    taken: BTreeSet<String>,
    /// Prefix of emitted names.
    prefix: String,
    counter: usize,
    /// The default-domain opset emitted nodes must be valid for.
    pub(crate) opset: i64,
}

/// An int attribute.
pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

/// An ints attribute.
pub(crate) fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(AttributeType::Ints as i32),
        ..Default::default()
    }
}

/// A float attribute.
pub(crate) fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(v),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    }
}

impl Emitter {
    /// An emitter whose names start with `prefix` and avoid `taken`.
    pub(crate) fn new(prefix: &str, taken: BTreeSet<String>, opset: i64) -> Self {
        Emitter {
            nodes: Vec::new(),
            taken,
            prefix: prefix.to_string(),
            counter: 0,
            opset,
        }
    }

    /// A name no other value has.
    pub(crate) fn fresh(&mut self, hint: &str) -> String {
        loop {
            let name = format!("{}{}_{hint}", self.prefix, self.counter);
            self.counter += 1;
            if self.taken.insert(name.clone()) {
                return name;
            }
        }
    }

    /// Appends a node of `domain` with `outputs` fresh outputs and returns their names.
    pub(crate) fn node_in(
        &mut self,
        domain: &str,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        outputs: usize,
    ) -> Vec<String> {
        let names: Vec<String> = (0..outputs).map(|_| self.fresh(op)).collect();
        self.nodes.push(NodeProto {
            name: names.first().cloned(),
            op_type: Some(op.to_string()),
            domain: (!domain.is_empty()).then(|| domain.to_string()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: names.clone(),
            attribute: attrs,
            ..Default::default()
        });
        names
    }

    /// Appends a one-output node and returns its output name.
    fn single(
        &mut self,
        domain: &str,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> String {
        let mut names = self.node_in(domain, op, inputs, attrs, 1);
        names.pop().unwrap_or_default()
    }

    /// A one-output default-domain node with attributes.
    pub(crate) fn op_with(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> String {
        self.single("", op, inputs, attrs)
    }

    /// A one-output default-domain node.
    pub(crate) fn op(&mut self, op: &str, inputs: &[&str]) -> String {
        self.single("", op, inputs, Vec::new())
    }

    /// A one-output internal node (see `kernels/backward.rs`).
    pub(crate) fn internal(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> String {
        self.single(INTERNAL_DOMAIN, op, inputs, attrs)
    }

    pub(crate) fn add(&mut self, a: &str, b: &str) -> String {
        self.op("Add", &[a, b])
    }

    pub(crate) fn sub(&mut self, a: &str, b: &str) -> String {
        self.op("Sub", &[a, b])
    }

    pub(crate) fn mul(&mut self, a: &str, b: &str) -> String {
        self.op("Mul", &[a, b])
    }

    pub(crate) fn div(&mut self, a: &str, b: &str) -> String {
        self.op("Div", &[a, b])
    }

    pub(crate) fn neg(&mut self, a: &str) -> String {
        self.op("Neg", &[a])
    }

    /// A tensor shaped and typed like `like`, filled with `value`.
    pub(crate) fn full_like(&mut self, like: &str, value: f64) -> String {
        self.internal("FullLike", &[like], vec![float_attr("value", value as f32)])
    }

    /// A rank-0 tensor typed like `like` holding `value`.
    pub(crate) fn scalar_like(&mut self, like: &str, value: f64) -> String {
        self.internal(
            "ScalarLike",
            &[like],
            vec![float_attr("value", value as f32)],
        )
    }

    /// `g` summed back to the shape of `like` (the gradient of a broadcast operand).
    pub(crate) fn sum_to(&mut self, g: &str, like: &str) -> String {
        self.internal("SumToShapeOf", &[g, like], Vec::new())
    }

    /// `x` cast to the element type of `like`.
    pub(crate) fn cast_like(&mut self, x: &str, like: &str) -> String {
        self.internal("CastToTypeOf", &[x, like], Vec::new())
    }

    /// `Shape(x)`.
    pub(crate) fn shape(&mut self, x: &str) -> String {
        self.op("Shape", &[x])
    }

    /// `g` reshaped to the shape of `like` (zeros in the shape are sizes from opset 14 on,
    /// where Reshape has `allowzero`).
    pub(crate) fn reshape_like(&mut self, g: &str, like: &str) -> String {
        let shape = self.shape(like);
        let attrs = if self.opset >= 14 {
            vec![int_attr("allowzero", 1)]
        } else {
            Vec::new()
        };
        self.op_with("Reshape", &[g, &shape], attrs)
    }

    /// `t` broadcast to the shape of `like`.
    pub(crate) fn expand_like(&mut self, t: &str, like: &str) -> String {
        let shape = self.shape(like);
        self.op("Expand", &[t, &shape])
    }

    /// A 1-D int64 constant.
    pub(crate) fn const_i64(&mut self, values: &[i64]) -> String {
        let tensor = TensorProto {
            dims: vec![values.len() as i64],
            data_type: Some(DataType::Int64 as i32),
            int64_data: values.to_vec(),
            ..Default::default()
        };
        let attr = AttributeProto {
            name: Some("value".into()),
            t: Some(tensor),
            r#type: Some(AttributeType::Tensor as i32),
            ..Default::default()
        };
        self.op_with("Constant", &[], vec![attr])
    }

    /// `Where(cond, a, b)`.
    pub(crate) fn where_(&mut self, cond: &str, a: &str, b: &str) -> String {
        self.op("Where", &[cond, a, b])
    }

    /// `ReduceSum(x)` over constant `axes`, keeping dims, in the form of the model's opset.
    pub(crate) fn reduce_sum_keep(&mut self, x: &str, axes: &[i64]) -> String {
        if self.opset >= 13 {
            let axes = self.const_i64(axes);
            self.op_with("ReduceSum", &[x, &axes], vec![int_attr("keepdims", 1)])
        } else {
            self.op_with(
                "ReduceSum",
                &[x],
                vec![ints_attr("axes", axes), int_attr("keepdims", 1)],
            )
        }
    }

    /// Records a node the caller built itself (a forward node cloned with other attributes).
    pub(crate) fn push(&mut self, node: NodeProto) {
        for o in &node.output {
            self.taken.insert(o.clone());
        }
        self.nodes.push(node);
    }
}
