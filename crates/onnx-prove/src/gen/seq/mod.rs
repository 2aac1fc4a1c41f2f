//! Sequence and optional values in generated models. A value of the generator is a tensor or
//! a [`Container`]: a sequence of tensors of one element type (of any shapes, possibly empty)
//! or an optional holding a tensor or a sequence (or nothing). [`Gen::add_container_node`]
//! draws one operator on them (SplitToSequence, SequenceConstruct, SequenceEmpty,
//! SequenceInsert, SequenceErase, SequenceAt, SequenceLength, ConcatFromSequence, SequenceMap
//! with a one- or two-node body, Optional, OptionalHasElement, OptionalGetElement), building
//! the sequence or optional it reads first when none exists, so that chains form: a source,
//! edits, then tensors (SequenceAt, SequenceLength, ConcatFromSequence, OptionalGetElement)
//! that later tensor operators read. Sequences and optionals are graph inputs too (read by
//! the operator they are made for; sequences of one element shape, declared in the type) and
//! graph outputs. Positions and split sizes are constant initializers chosen in range
//! (negative ones included), so every trial runs.

mod value;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, GraphProto, NodeProto, TypeProto, ValueInfoProto};
use onnx_ref::{DType, Sequence, Value};

use value::tensor_type;
pub(crate) use value::{redraw_value, Container, ContainerType};

use super::{int_attr, type_str, Gen, Reject, ValueKind};
use crate::choice::{int_tensor, random_tensor, DataOpts};

/// The operators drawn on sequences and optionals (those the opset has).
const CONTAINER_OPS: &[&str] = &[
    "SplitToSequence",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceInsert",
    "SequenceErase",
    "SequenceAt",
    "SequenceLength",
    "ConcatFromSequence",
    "SequenceMap",
    "Optional",
    "OptionalHasElement",
    "OptionalGetElement",
];

/// Operators a `SequenceMap` body is made of (each keeps its input's element type).
const BODY_OPS: &[&str] = &["Identity", "Transpose", "Add", "Mul", "Neg", "Abs"];

/// Whether formal parameter `formal` (an input, or with `output` an output) of `op` at `opset`
/// admits type `ty` (`seq(tensor(float))`, ...).
fn admits(op: &str, opset: i64, output: bool, formal: usize, ty: &str) -> bool {
    let Some(s) = onnx_schema::registry().lookup("", op, opset) else {
        return false;
    };
    let params = if output { &s.outputs } else { &s.inputs };
    params.get(formal).is_some_and(|f| {
        f.type_str == ty
            || s.allowed_types(&f.type_str)
                .is_some_and(|a| a.iter().any(|t| t == ty))
    })
}

/// A declaration of `name` with type `ty`.
fn value_info_of(name: &str, ty: TypeProto) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(ty),
        ..Default::default()
    }
}

/// How an optional value is made.
#[derive(Clone, Copy)]
enum OptionalSource {
    Tensor,
    Sequence,
    Empty,
}

impl Gen<'_> {
    /// Adds one operator on sequences or optionals (and the source it reads when none exists).
    pub(super) fn add_container_node(&mut self) -> Result<(), Reject> {
        let reg = onnx_schema::registry();
        let ops: Vec<&str> = CONTAINER_OPS
            .iter()
            .copied()
            .filter(|op| reg.lookup("", op, self.opset).is_some())
            .collect();
        if ops.is_empty() {
            return self.reject("no sequence operators at this opset");
        }
        let op = ops[self.ch.below(ops.len())];
        match op {
            "SplitToSequence" => self.split_to_sequence().map(drop),
            "SequenceConstruct" => self.sequence_construct().map(drop),
            "SequenceEmpty" => self.sequence_empty().map(drop),
            "SequenceInsert" => self.sequence_insert(),
            "SequenceErase" => self.sequence_erase(),
            "SequenceAt" => self.sequence_at(),
            "SequenceLength" => self.sequence_length(),
            "ConcatFromSequence" => self.concat_from_sequence(),
            "SequenceMap" => self.sequence_map(),
            "Optional" => {
                let src = self.optional_source();
                self.optional(src).map(drop)
            }
            "OptionalHasElement" => self.optional_has_element(),
            "OptionalGetElement" => self.optional_get_element(),
            other => self.reject(format!("{other} is not a sequence operator")),
        }
    }

    /// The values of a container type satisfying `keep`, most recent last.
    fn containers(&self, keep: impl Fn(ContainerType, &Value) -> bool) -> Vec<usize> {
        (0..self.values.len())
            .filter(|&k| {
                self.values[k]
                    .container
                    .as_ref()
                    .is_some_and(|c| keep(c.ty, &c.value))
            })
            .collect()
    }

    /// One of `candidates`, usually a recent one.
    fn pick_recent(&mut self, candidates: &[usize]) -> usize {
        let recent = &candidates[candidates.len().saturating_sub(4)..];
        if self.ch.one_in(3) {
            candidates[self.ch.below(candidates.len())]
        } else {
            recent[self.ch.below(recent.len())]
        }
    }

    /// An earlier tensor (of element type `dtype` when given, of rank at least `min_rank`,
    /// that formal input `formal` of `op` admits), or a new leaf.
    fn tensor_operand(
        &mut self,
        op: &str,
        formal: usize,
        dtype: Option<DType>,
        min_rank: usize,
    ) -> Result<usize, Reject> {
        let opset = self.opset;
        let ok = |d: DType| type_str(d).is_some_and(|t| admits(op, opset, false, formal, &t));
        let candidates: Vec<usize> = (0..self.values.len())
            .filter(|&k| {
                let v = &self.values[k];
                let d = v.tensor.dtype();
                v.container.is_none()
                    && dtype.is_none_or(|w| w == d)
                    && v.tensor.rank() >= min_rank
                    && ok(d)
            })
            .collect();
        if !candidates.is_empty() && !self.ch.one_in(4) {
            return Ok(self.pick_recent(&candidates));
        }
        let d = dtype.unwrap_or(self.dtype);
        if !ok(d) {
            return self.reject(format!("{op} does not take {}", d.name()));
        }
        let base = self.base.clone();
        let mut shape = self.broadcast_variant(&base);
        while shape.len() < min_rank {
            let n = self.nonzero_dim();
            shape.insert(0, n);
        }
        let kind = if self.ch.one_in(4) {
            ValueKind::Init
        } else {
            ValueKind::Input
        };
        let name = if kind == ValueKind::Init { "w" } else { "x" };
        self.add_leaf(shape, d, kind, name)
    }

    /// A scalar (or, with `vector`, 1-D) int64 or int32 constant.
    fn index_constant(
        &mut self,
        vals: Vec<i64>,
        vector: bool,
        base: &str,
    ) -> Result<usize, Reject> {
        let d = if self.ch.one_in(4) {
            DType::Int32
        } else {
            DType::Int64
        };
        let shape: Vec<usize> = if vector { vec![vals.len()] } else { Vec::new() };
        let Some(t) = int_tensor(d, &shape, vals) else {
            return self.reject("cannot build an index constant");
        };
        Ok(self.push_initializer(t, base))
    }

    /// A position in a sequence of `len`: in `-len..len`, or `-len..=len` with `end`.
    fn position(&mut self, len: usize, end: bool) -> Result<usize, Reject> {
        let n = len as i64;
        let span = (2 * len + usize::from(end)) as i64;
        if span == 0 {
            return self.reject("no position in an empty sequence");
        }
        let p = -n + self.ch.below(span as usize) as i64;
        self.index_constant(vec![p], false, "pos")
    }

    /// An earlier sequence (usually a recent one), or a new source.
    fn any_sequence(&mut self, nonempty: bool) -> Result<usize, Reject> {
        let seqs = self.containers(|ty, v| {
            matches!(ty, ContainerType::Sequence(_))
                && (!nonempty || matches!(v, Value::Sequence(s) if !s.items.is_empty()))
        });
        if !seqs.is_empty() && !self.ch.one_in(4) {
            return Ok(self.pick_recent(&seqs));
        }
        self.sequence_source()
    }

    /// A new sequence: split from a tensor, constructed, empty, or a graph input.
    fn sequence_source(&mut self) -> Result<usize, Reject> {
        match self.ch.below(8) {
            0..=2 => self.split_to_sequence(),
            3..=5 => self.sequence_construct(),
            6 => self.sequence_empty(),
            _ => self.sequence_input(),
        }
    }

    /// The type of a sequence value.
    fn seq_elem(&self, s: usize) -> Result<DType, Reject> {
        match self.values[s].container_type() {
            Some(ContainerType::Sequence(d)) => Ok(d),
            _ => self.reject("not a sequence"),
        }
    }

    fn seq_len(&self, s: usize) -> usize {
        match self.values[s].container.as_ref().map(|c| &c.value) {
            Some(Value::Sequence(q)) => q.items.len(),
            _ => 0,
        }
    }

    /// Adds a node with one output of type `ty` (`None`: a tensor).
    fn add_one(
        &mut self,
        op: &str,
        inputs: Vec<String>,
        attrs: Vec<AttributeProto>,
        ty: Option<ContainerType>,
    ) -> Result<usize, Reject> {
        if let Some(t) = ty.and_then(ContainerType::type_str) {
            if !admits(op, self.opset, true, 0, &t) {
                return self.reject(format!("{op} does not make {t}"));
            }
        }
        let opset = self.opset;
        Ok(self.add_typed_node(op, "", inputs, attrs, &[ty], opset)?[0])
    }

    fn name_of(&self, k: usize) -> String {
        self.values[k].name.clone()
    }

    /// A sequence graph input of 0 to 3 tensors of one shape.
    fn sequence_input(&mut self) -> Result<usize, Reject> {
        let d = self.dtype;
        let base = self.base.clone();
        let shape = self.broadcast_variant(&base);
        let len = self.ch.pick(&[1, 2, 3, 0, 2]);
        let data = DataOpts {
            special: self.special && d.is_float(),
            ..Default::default()
        };
        let mut items = Vec::new();
        for _ in 0..len {
            let Some(t) = random_tensor(&mut self.rng, d, &shape, &data) else {
                return self.reject(format!("cannot generate {}", d.name()));
            };
            items.push(Value::Tensor(t));
        }
        let value = Value::Sequence(Sequence {
            elem_dtype: Some(d),
            items,
        });
        let name = self.fresh_name("xs");
        let k = self.push_container(name, ContainerType::Sequence(d), value, ValueKind::Input)?;
        self.values[k].data = data;
        Ok(k)
    }

    /// SplitToSequence of a tensor along an axis: no split (keepdims 0 or 1), a chunk size,
    /// or sizes.
    fn split_to_sequence(&mut self) -> Result<usize, Reject> {
        let x = self.tensor_operand("SplitToSequence", 0, None, 1)?;
        let shape = self.values[x].tensor.shape().to_vec();
        let r = shape.len() as i64;
        let axis = -r + self.ch.below(2 * shape.len()) as i64;
        let dim = shape[axis.rem_euclid(r) as usize];
        let mut inputs = vec![self.name_of(x)];
        let mut attrs = Vec::new();
        if axis != 0 || self.ch.one_in(3) {
            attrs.push(int_attr("axis", axis));
        }
        match self.ch.below(4) {
            0 | 1 => {
                if self.ch.one_in(2) {
                    attrs.push(int_attr("keepdims", self.ch.pick(&[0, 1])));
                }
            }
            2 => {
                let chunk = 1 + self.ch.below(dim.max(1) + 1) as i64;
                let k = self.index_constant(vec![chunk], false, "split")?;
                inputs.push(self.name_of(k));
            }
            _ => {
                let mut sizes = Vec::new();
                let mut left = dim;
                while left > 0 {
                    let s = 1 + self.ch.below(left);
                    sizes.push(s as i64);
                    left -= s;
                }
                if sizes.is_empty() {
                    return self.reject("no split sizes for a dim of 0");
                }
                let k = self.index_constant(sizes, true, "split")?;
                inputs.push(self.name_of(k));
            }
        }
        let d = self.values[x].tensor.dtype();
        self.add_one(
            "SplitToSequence",
            inputs,
            attrs,
            Some(ContainerType::Sequence(d)),
        )
    }

    /// SequenceConstruct of one to three tensors of one element type (shapes may differ).
    fn sequence_construct(&mut self) -> Result<usize, Reject> {
        let first = self.tensor_operand("SequenceConstruct", 0, None, 0)?;
        let d = self.values[first].tensor.dtype();
        let mut inputs = vec![self.name_of(first)];
        for _ in 0..self.ch.below(3) {
            let k = self.tensor_operand("SequenceConstruct", 0, Some(d), 0)?;
            inputs.push(self.name_of(k));
        }
        self.add_one(
            "SequenceConstruct",
            inputs,
            Vec::new(),
            Some(ContainerType::Sequence(d)),
        )
    }

    /// SequenceEmpty, of the model's element type or another (float when `dtype` is absent).
    fn sequence_empty(&mut self) -> Result<usize, Reject> {
        let (d, attrs) = if self.ch.one_in(4) {
            (DType::Float, Vec::new())
        } else {
            let d = self
                .ch
                .pick(&[self.dtype, self.dtype, DType::Int64, DType::Float]);
            (d, vec![int_attr("dtype", d.code() as i64)])
        };
        self.add_one(
            "SequenceEmpty",
            Vec::new(),
            attrs,
            Some(ContainerType::Sequence(d)),
        )
    }

    /// SequenceInsert of a tensor of the sequence's element type, at the end or a position.
    fn sequence_insert(&mut self) -> Result<(), Reject> {
        let s = self.any_sequence(false)?;
        let d = self.seq_elem(s)?;
        let t = self.tensor_operand("SequenceInsert", 1, Some(d), 0)?;
        let mut inputs = vec![self.name_of(s), self.name_of(t)];
        if !self.ch.one_in(3) {
            let len = self.seq_len(s);
            let p = self.position(len, true)?;
            inputs.push(self.name_of(p));
        }
        self.add_one(
            "SequenceInsert",
            inputs,
            Vec::new(),
            Some(ContainerType::Sequence(d)),
        )
        .map(drop)
    }

    /// SequenceErase of the last element or a position.
    fn sequence_erase(&mut self) -> Result<(), Reject> {
        let s = self.any_sequence(true)?;
        let d = self.seq_elem(s)?;
        let mut inputs = vec![self.name_of(s)];
        if !self.ch.one_in(3) {
            let len = self.seq_len(s);
            let p = self.position(len, false)?;
            inputs.push(self.name_of(p));
        }
        self.add_one(
            "SequenceErase",
            inputs,
            Vec::new(),
            Some(ContainerType::Sequence(d)),
        )
        .map(drop)
    }

    /// SequenceAt of a position: a tensor later operators read.
    fn sequence_at(&mut self) -> Result<(), Reject> {
        let s = self.any_sequence(true)?;
        let len = self.seq_len(s);
        let p = self.position(len, false)?;
        let inputs = vec![self.name_of(s), self.name_of(p)];
        self.add_one("SequenceAt", inputs, Vec::new(), None)
            .map(drop)
    }

    fn sequence_length(&mut self) -> Result<(), Reject> {
        let s = self.any_sequence(false)?;
        let inputs = vec![self.name_of(s)];
        self.add_one("SequenceLength", inputs, Vec::new(), None)
            .map(drop)
    }

    /// ConcatFromSequence along an axis of the first element, or stacked on a new axis.
    fn concat_from_sequence(&mut self) -> Result<(), Reject> {
        let s = self.any_sequence(true)?;
        let rank = match self.values[s].container.as_ref().map(|c| &c.value) {
            Some(Value::Sequence(q)) => match q.items.first() {
                Some(Value::Tensor(t)) => t.rank(),
                _ => return self.reject("concatenating an empty sequence"),
            },
            _ => return self.reject("not a sequence"),
        };
        let new_axis = self.ch.one_in(3);
        let r = (rank + usize::from(new_axis)) as i64;
        if r == 0 {
            return self.reject("concatenating scalars without a new axis");
        }
        let axis = -r + self.ch.below(2 * r as usize) as i64;
        let mut attrs = vec![int_attr("axis", axis)];
        if new_axis || self.ch.one_in(4) {
            attrs.push(int_attr("new_axis", i64::from(new_axis)));
        }
        let inputs = vec![self.name_of(s)];
        self.add_one("ConcatFromSequence", inputs, attrs, None)
            .map(drop)
    }

    /// SequenceMap with a body of one or two element-type-preserving operators over one
    /// element (sometimes with a scalar additional input added to it).
    fn sequence_map(&mut self) -> Result<(), Reject> {
        let s = self.any_sequence(false)?;
        let d = self.seq_elem(s)?;
        let Some(ty) = type_str(d) else {
            return self.reject("an element type without a name");
        };
        let opset = self.opset;
        let usable: Vec<&str> = BODY_OPS
            .iter()
            .copied()
            .filter(|op| admits(op, opset, false, 0, &ty))
            .collect();
        if usable.is_empty() {
            return self.reject(format!("no body operator takes {ty}"));
        }
        let x = self.fresh_name("elem");
        let mut body_inputs = vec![value_info_of(&x, tensor_type(d, None))];
        let mut inputs = vec![self.name_of(s)];
        let mut nodes = Vec::new();
        let mut last = x.clone();
        if admits("Add", opset, false, 0, &ty) && self.ch.one_in(3) {
            let extra = self.tensor_operand("Add", 0, Some(d), 0)?;
            let w = self.fresh_name("side");
            body_inputs.push(value_info_of(&w, tensor_type(d, None)));
            inputs.push(self.name_of(extra));
            let out = self.fresh_name("b");
            nodes.push(body_node("Add", vec![last, w], &out));
            last = out;
        }
        for _ in 0..1 + self.ch.below(2) {
            let op = usable[self.ch.below(usable.len())];
            let args = if matches!(op, "Add" | "Mul") {
                vec![last.clone(), last.clone()]
            } else {
                vec![last.clone()]
            };
            let out = self.fresh_name("b");
            nodes.push(body_node(op, args, &out));
            last = out;
        }
        let body = GraphProto {
            name: Some(self.fresh_name("body")),
            node: nodes,
            input: body_inputs,
            output: vec![value_info_of(&last, tensor_type(d, None))],
            ..Default::default()
        };
        let attr = AttributeProto {
            name: Some("body".into()),
            r#type: Some(AttributeType::Graph as i32),
            g: Some(body),
            ..Default::default()
        };
        self.add_one(
            "SequenceMap",
            inputs,
            vec![attr],
            Some(ContainerType::Sequence(d)),
        )
        .map(drop)
    }

    fn optional_source(&mut self) -> OptionalSource {
        match self.ch.below(4) {
            0 | 1 => OptionalSource::Tensor,
            2 => OptionalSource::Sequence,
            _ => OptionalSource::Empty,
        }
    }

    /// What an optional holds (a tensor, a sequence, or nothing) and its type.
    fn optional_parts(
        &mut self,
        src: OptionalSource,
    ) -> Result<(Option<usize>, ContainerType), Reject> {
        Ok(match src {
            OptionalSource::Tensor => {
                let t = self.tensor_operand("Optional", 0, None, 0)?;
                let d = self.values[t].tensor.dtype();
                (Some(t), ContainerType::OptionalTensor(d))
            }
            OptionalSource::Sequence => {
                let s = self.any_sequence(false)?;
                let d = self.seq_elem(s)?;
                (Some(s), ContainerType::OptionalSequence(d))
            }
            OptionalSource::Empty => {
                let d = self.ch.pick(&[self.dtype, DType::Int64, DType::Float]);
                let ty = if self.ch.one_in(3) {
                    ContainerType::OptionalSequence(d)
                } else {
                    ContainerType::OptionalTensor(d)
                };
                (None, ty)
            }
        })
    }

    /// The Optional operator over a tensor, a sequence or nothing (with its `type`, and
    /// sometimes with it when there is an input).
    fn optional(&mut self, src: OptionalSource) -> Result<usize, Reject> {
        let (inner, ty) = self.optional_parts(src)?;
        let mut attrs = Vec::new();
        if inner.is_none() || self.ch.one_in(4) {
            let elem = match ty.inner() {
                Some(Some(seq)) => seq.type_proto(None),
                _ => tensor_type(ty.elem(), None),
            };
            attrs.push(AttributeProto {
                name: Some("type".into()),
                r#type: Some(AttributeType::TypeProto as i32),
                tp: Some(elem),
                ..Default::default()
            });
        }
        let inputs = inner.map(|k| self.name_of(k)).into_iter().collect();
        self.add_one("Optional", inputs, attrs, Some(ty))
    }

    /// An optional graph input holding `inner`'s value (or nothing).
    fn optional_input(&mut self, inner: Option<usize>, ty: ContainerType) -> Result<usize, Reject> {
        let Some(t) = ty.type_str() else {
            return self.reject("an element type without a name");
        };
        if !admits("OptionalHasElement", self.opset, false, 0, &t) {
            return self.reject(format!("{t} is not an optional type at this opset"));
        }
        let value = Value::Optional(inner.map(|k| Box::new(self.values[k].value())));
        let data = inner.map(|k| self.values[k].data).unwrap_or_default();
        let name = self.fresh_name("xo");
        let k = self.push_container(name, ty, value, ValueKind::Input)?;
        self.values[k].data = data;
        Ok(k)
    }

    /// An earlier optional (non-empty with `full`), or a new one (an Optional node, or
    /// sometimes a graph input).
    fn any_optional(&mut self, full: bool) -> Result<usize, Reject> {
        let opts = self.containers(|ty, v| {
            ty.inner().is_some() && (!full || matches!(v, Value::Optional(Some(_))))
        });
        if !opts.is_empty() && !self.ch.one_in(4) {
            return Ok(self.pick_recent(&opts));
        }
        let src = match self.optional_source() {
            OptionalSource::Empty if full => OptionalSource::Tensor,
            other => other,
        };
        if self.ch.one_in(5) {
            let (inner, ty) = self.optional_parts(src)?;
            return self.optional_input(inner, ty);
        }
        self.optional(src)
    }

    /// OptionalHasElement of an optional; from opset 18 also of a tensor, a sequence, or no
    /// input at all.
    fn optional_has_element(&mut self) -> Result<(), Reject> {
        let plain = self.opset >= 18 && self.ch.one_in(4);
        let input = if plain {
            match self.ch.below(3) {
                0 => Some(self.tensor_operand("OptionalHasElement", 0, None, 0)?),
                1 => Some(self.any_sequence(false)?),
                _ => None,
            }
        } else {
            Some(self.any_optional(false)?)
        };
        let inputs = input.map(|k| self.name_of(k)).into_iter().collect();
        self.add_one("OptionalHasElement", inputs, Vec::new(), None)
            .map(drop)
    }

    /// OptionalGetElement of a non-empty optional (a tensor or a sequence out); from opset 18
    /// also of a tensor or a sequence.
    fn optional_get_element(&mut self) -> Result<(), Reject> {
        let input = if self.opset >= 18 && self.ch.one_in(5) {
            if self.ch.one_in(2) {
                self.tensor_operand("OptionalGetElement", 0, None, 0)?
            } else {
                self.any_sequence(false)?
            }
        } else {
            self.any_optional(true)?
        };
        let out = match self.values[input].container_type() {
            None => None,
            Some(ty) => match ty.inner() {
                Some(inner) => inner,
                None => Some(ty),
            },
        };
        let inputs = vec![self.name_of(input)];
        self.add_one("OptionalGetElement", inputs, Vec::new(), out)
            .map(drop)
    }
}

/// A node of a `SequenceMap` body.
fn body_node(op: &str, inputs: Vec<String>, output: &str) -> NodeProto {
    NodeProto {
        input: inputs,
        output: vec![output.to_string()],
        op_type: Some(op.to_string()),
        ..Default::default()
    }
}
