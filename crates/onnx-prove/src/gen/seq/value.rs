//! The values of sequence and optional type: their [`ContainerType`] (what a declaration
//! says, and what a kernel's output is checked against) and contents, declarations (a sequence
//! graph input declares its elements' shape), and fresh contents for later trials.

use onnx_proto::{type_proto, TensorShapeProto, TypeProto};
use onnx_ref::{DType, Sequence, Tensor, Value};

use super::super::{type_str, Gen, GenValue, Reject, ValueKind, MAX_ELEMENTS};
use crate::choice::{int_tensor, random_tensor, DataOpts, SplitMix};

/// The type of a value that is not a tensor; the element type is a tensor element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContainerType {
    /// `seq(tensor(elem))`.
    Sequence(DType),
    /// `optional(tensor(elem))`.
    OptionalTensor(DType),
    /// `optional(seq(tensor(elem)))`.
    OptionalSequence(DType),
}

/// A sequence or optional value of the generator: its type and trial-0 contents.
#[derive(Debug, Clone)]
pub(crate) struct Container {
    pub ty: ContainerType,
    pub value: Value,
}

impl ContainerType {
    /// The element type of the tensors it holds.
    pub fn elem(self) -> DType {
        match self {
            ContainerType::Sequence(d)
            | ContainerType::OptionalTensor(d)
            | ContainerType::OptionalSequence(d) => d,
        }
    }

    /// The type as the schemas write it: `seq(tensor(float))`, `optional(tensor(int64))`.
    pub fn type_str(self) -> Option<String> {
        let t = type_str(self.elem())?;
        Some(match self {
            ContainerType::Sequence(_) => format!("seq({t})"),
            ContainerType::OptionalTensor(_) => format!("optional({t})"),
            ContainerType::OptionalSequence(_) => format!("optional(seq({t}))"),
        })
    }

    /// The type proto of a declaration (element shapes unknown unless `elem_shape` is given).
    pub fn type_proto(self, elem_shape: Option<TensorShapeProto>) -> TypeProto {
        let tensor = tensor_type(self.elem(), elem_shape);
        let seq = |elem: TypeProto| TypeProto {
            value: Some(type_proto::Value::SequenceType(Box::new(
                type_proto::Sequence {
                    elem_type: Some(Box::new(elem)),
                },
            ))),
            ..Default::default()
        };
        let opt = |elem: TypeProto| TypeProto {
            value: Some(type_proto::Value::OptionalType(Box::new(
                type_proto::Optional {
                    elem_type: Some(Box::new(elem)),
                },
            ))),
            ..Default::default()
        };
        match self {
            ContainerType::Sequence(_) => seq(tensor),
            ContainerType::OptionalTensor(_) => opt(tensor),
            ContainerType::OptionalSequence(_) => opt(seq(tensor)),
        }
    }

    /// Whether `v` is a value of this type.
    pub fn holds(self, v: &Value) -> bool {
        let d = self.elem();
        let tensor = |v: &Value| matches!(v, Value::Tensor(t) if t.dtype() == d);
        let seq = |v: &Value| matches!(v, Value::Sequence(s) if s.items.iter().all(tensor));
        match (self, v) {
            (ContainerType::Sequence(_), v) => seq(v),
            (_, Value::Optional(None)) => true,
            (ContainerType::OptionalTensor(_), Value::Optional(Some(v))) => tensor(v),
            (ContainerType::OptionalSequence(_), Value::Optional(Some(v))) => seq(v),
            _ => false,
        }
    }

    /// The type of what an optional of this type holds (`None` for a sequence).
    pub(super) fn inner(self) -> Option<Option<ContainerType>> {
        match self {
            ContainerType::Sequence(_) => None,
            ContainerType::OptionalTensor(_) => Some(None),
            ContainerType::OptionalSequence(d) => Some(Some(ContainerType::Sequence(d))),
        }
    }
}

/// `tensor(elem)` with the given shape (none: unknown).
pub(super) fn tensor_type(elem: DType, shape: Option<TensorShapeProto>) -> TypeProto {
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem.code()),
            shape,
        })),
        ..Default::default()
    }
}

/// Elements of the tensors a value holds.
pub(crate) fn elements(v: &Value) -> usize {
    match v {
        Value::Tensor(t) => t.len(),
        Value::Sequence(s) => s.items.iter().map(elements).sum(),
        Value::Optional(Some(v)) => elements(v),
        _ => 0,
    }
}

/// `v` with fresh tensor contents of the same shapes (a tensor the options cannot draw is
/// kept).
pub(crate) fn redraw_value(rng: &mut SplitMix, v: &Value, o: &DataOpts) -> Value {
    match v {
        Value::Tensor(t) => {
            Value::Tensor(random_tensor(rng, t.dtype(), t.shape(), o).unwrap_or_else(|| t.clone()))
        }
        Value::Sequence(s) => Value::Sequence(Sequence {
            elem_dtype: s.elem_dtype,
            items: s.items.iter().map(|i| redraw_value(rng, i, o)).collect(),
        }),
        Value::Optional(Some(inner)) => {
            Value::Optional(Some(Box::new(redraw_value(rng, inner, o))))
        }
        other => other.clone(),
    }
}

impl GenValue {
    /// The value the interpreter sees.
    pub fn value(&self) -> Value {
        match &self.container {
            Some(c) => c.value.clone(),
            None => Value::Tensor(self.tensor.clone()),
        }
    }

    /// The sequence or optional type of a container value.
    pub fn container_type(&self) -> Option<ContainerType> {
        self.container.as_ref().map(|c| c.ty)
    }
}

impl Gen<'_> {
    /// Pushes a sequence or optional value (its `tensor` is an empty placeholder: read
    /// `container`).
    pub(in crate::gen) fn push_container(
        &mut self,
        name: String,
        ty: ContainerType,
        value: Value,
        kind: ValueKind,
    ) -> Result<usize, Reject> {
        if elements(&value) > MAX_ELEMENTS {
            return self.reject("a sequence over the size limit");
        }
        let placeholder = int_tensor(ty.elem(), &[0], Vec::new()).unwrap_or(Tensor::scalar(false));
        Ok(self.push_value(GenValue {
            name,
            tensor: placeholder,
            kind,
            data: DataOpts::default(),
            container: Some(Container { ty, value }),
        }))
    }

    /// The declared type of a container value: a sequence graph input declares the shape its
    /// elements share (symbolic dims like tensor inputs when the model is symbolic).
    pub(in crate::gen) fn container_type_proto(
        &self,
        k: usize,
        symbolic: bool,
    ) -> Option<TypeProto> {
        let v = &self.values[k];
        let c = v.container.as_ref()?;
        let shape = match (&c.value, v.kind) {
            (Value::Sequence(s), ValueKind::Input) => {
                common_shape(&s.items).map(|dims| TensorShapeProto {
                    dim: super::super::node::declared_dims(&dims, symbolic),
                })
            }
            _ => None,
        };
        Some(c.ty.type_proto(shape))
    }
}

/// The shape every tensor of `items` has (`None` when they differ or there are none).
fn common_shape(items: &[Value]) -> Option<Vec<usize>> {
    let mut shapes = items.iter().map(|v| match v {
        Value::Tensor(t) => Some(t.shape().to_vec()),
        _ => None,
    });
    let first = shapes.next()??;
    shapes.all(|s| s.as_ref() == Some(&first)).then_some(first)
}
