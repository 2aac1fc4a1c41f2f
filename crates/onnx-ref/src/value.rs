//! `Value`: what flows along a graph edge — a tensor, a sequence, a map or an optional.

use crate::dtype::DType;
use crate::error::{RefError, Result};
use crate::tensor::Tensor;

/// A runtime value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A tensor (a scalar is a tensor of shape `[]`).
    Tensor(Tensor),
    /// A sequence of values (usually tensors of one dtype).
    Sequence(Sequence),
    /// A map from integer or string keys to values.
    Map(MapValue),
    /// An optional value: `None` is the empty optional.
    Optional(Option<Box<Value>>),
}

/// A sequence value; `elem_dtype` remembers the element type of an empty tensor sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    /// Element tensor type, when known (needed for empty sequences).
    pub elem_dtype: Option<DType>,
    /// The elements, in order.
    pub items: Vec<Value>,
}

/// A map value: `keys` is a rank-1 tensor (integer or string), `values` has one entry per key.
#[derive(Debug, Clone, PartialEq)]
pub struct MapValue {
    pub keys: Tensor,
    pub values: Vec<Value>,
}

impl Value {
    /// The tensor, or an error naming `what` when the value is not a tensor.
    pub fn as_tensor(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(RefError::op(format!(
                "expected a tensor, found {}",
                other.kind()
            ))),
        }
    }

    /// Consumes the value into its tensor.
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(RefError::op(format!(
                "expected a tensor, found {}",
                other.kind()
            ))),
        }
    }

    /// A short description of the kind of value ("tensor FLOAT[2, 3]", "sequence", ...).
    pub fn kind(&self) -> String {
        match self {
            Value::Tensor(t) => format!("tensor {}{:?}", t.dtype(), t.shape()),
            Value::Sequence(s) => format!("sequence of {} values", s.items.len()),
            Value::Map(m) => format!("map of {} entries", m.values.len()),
            Value::Optional(None) => "empty optional".into(),
            Value::Optional(Some(v)) => format!("optional {}", v.kind()),
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}
