//! Node attributes: the constructors and field accessors of [`Attribute`] and
//! [`AttributeValue`]. The types themselves are in `graph` (an attribute can hold a graph, a
//! graph holds nodes and their attributes: one recursive data model). Layer: above `graph` and
//! `name`; `graph` never imports this module.

use bytes::Bytes;
use onnx_proto::{attribute_proto::AttributeType, AttributeProto, TensorProto};

use crate::graph::{Attribute, AttributeValue, Graph};
use crate::name::Name;

impl AttributeValue {
    /// The subgraphs this value holds.
    pub fn subgraphs(&self) -> std::slice::Iter<'_, Graph> {
        match self {
            AttributeValue::Graph(g) => std::slice::from_ref(&**g).iter(),
            AttributeValue::Graphs(gs) => gs.iter(),
            AttributeValue::Proto(_) => [].iter(),
        }
    }

    /// The subgraphs this value holds, mutably.
    pub fn subgraphs_mut(&mut self) -> std::slice::IterMut<'_, Graph> {
        match self {
            AttributeValue::Graph(g) => std::slice::from_mut(&mut **g).iter_mut(),
            AttributeValue::Graphs(gs) => gs.iter_mut(),
            AttributeValue::Proto(_) => [].iter_mut(),
        }
    }
}

impl Attribute {
    fn proto(name: &str, ty: AttributeType, fill: impl FnOnce(&mut AttributeProto)) -> Self {
        let mut proto = AttributeProto {
            name: Some(name.to_string()),
            r#type: Some(ty as i32),
            ..AttributeProto::default()
        };
        fill(&mut proto);
        Attribute {
            name: Name::new(name),
            value: AttributeValue::Proto(Box::new(proto)),
            rest: None,
        }
    }

    /// An `INT` attribute.
    pub fn int(name: &str, value: i64) -> Self {
        Self::proto(name, AttributeType::Int, |p| p.i = Some(value))
    }

    /// A `FLOAT` attribute.
    pub fn float(name: &str, value: f32) -> Self {
        Self::proto(name, AttributeType::Float, |p| p.f = Some(value))
    }

    /// A `STRING` attribute.
    pub fn string(name: &str, value: impl Into<Bytes>) -> Self {
        Self::proto(name, AttributeType::String, |p| p.s = Some(value.into()))
    }

    /// An `INTS` attribute.
    pub fn ints(name: &str, values: Vec<i64>) -> Self {
        Self::proto(name, AttributeType::Ints, |p| p.ints = values)
    }

    /// A `FLOATS` attribute.
    pub fn floats(name: &str, values: Vec<f32>) -> Self {
        Self::proto(name, AttributeType::Floats, |p| p.floats = values)
    }

    /// A `TENSOR` attribute.
    pub fn tensor(name: &str, value: TensorProto) -> Self {
        Self::proto(name, AttributeType::Tensor, |p| p.t = Some(value))
    }

    /// A `GRAPH` attribute.
    pub fn graph(name: &str, graph: Graph) -> Self {
        Attribute {
            name: Name::new(name),
            value: AttributeValue::Graph(Box::new(graph)),
            rest: Some(Box::new(AttributeProto {
                name: Some(name.to_string()),
                r#type: Some(AttributeType::Graph as i32),
                ..AttributeProto::default()
            })),
        }
    }

    /// A `GRAPHS` attribute.
    pub fn graphs(name: &str, graphs: Vec<Graph>) -> Self {
        Attribute {
            name: Name::new(name),
            value: AttributeValue::Graphs(graphs),
            rest: Some(Box::new(AttributeProto {
                name: Some(name.to_string()),
                r#type: Some(AttributeType::Graphs as i32),
                ..AttributeProto::default()
            })),
        }
    }

    /// The proto message of a non-graph attribute.
    pub fn as_proto(&self) -> Option<&AttributeProto> {
        match &self.value {
            AttributeValue::Proto(p) => Some(p),
            _ => None,
        }
    }

    /// The proto fields other than the subgraphs: the whole message of a non-graph
    /// attribute, `rest` of a graph-valued one.
    pub fn fields(&self) -> Option<&AttributeProto> {
        match &self.value {
            AttributeValue::Proto(p) => Some(p),
            _ => self.rest.as_deref(),
        }
    }

    /// The `type` field (declared type), if present and known.
    pub fn declared_type(&self) -> Option<AttributeType> {
        self.fields()
            .and_then(|p| p.r#type)
            .and_then(|t| AttributeType::try_from(t).ok())
    }

    /// The `i` field of an `INT` attribute.
    pub fn as_int(&self) -> Option<i64> {
        self.as_proto().and_then(|p| p.i)
    }

    /// The `f` field of a `FLOAT` attribute.
    pub fn as_float(&self) -> Option<f32> {
        self.as_proto().and_then(|p| p.f)
    }

    /// The `ints` field of an `INTS` attribute.
    pub fn as_ints(&self) -> Option<&[i64]> {
        self.as_proto().map(|p| p.ints.as_slice())
    }

    /// The `s` field of a `STRING` attribute.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        self.as_proto().and_then(|p| p.s.as_ref())
    }

    /// The `t` field of a `TENSOR` attribute.
    pub fn as_tensor(&self) -> Option<&TensorProto> {
        self.as_proto().and_then(|p| p.t.as_ref())
    }

    /// The `ref_attr_name` field (a function-body attribute that refers to the caller's).
    pub fn ref_attr_name(&self) -> Option<&str> {
        self.fields().and_then(|p| p.ref_attr_name.as_deref())
    }
}
