//! The view of one node that the per-op rules read ([`NodeCtx`]): input types, shapes, constant
//! and symbolic values, attributes with the schema's defaults filled in, and error constructors
//! that name the operator. Also [`Out`], what a rule says about one output.

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, GraphProto, TensorProto, TypeProto};

use super::dims::{self, Dims, SymDim};
use super::error::InferError;
use super::graph::Scope;
use super::tensor_data;
use super::InputInfo;
use crate::schema::OpSchema;

/// What a rule infers for one output; unset parts fall back to the generic rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Out {
    /// Element type, when the rule decides it (Cast, ArgMax, ...).
    pub elem: Option<i32>,
    /// Shape, when at least the rank is known.
    pub shape: Option<Dims>,
    /// A whole type, for outputs that are not tensors (sequences, optionals, If branches).
    pub ty: Option<TypeProto>,
}

impl Out {
    /// An output with a known shape.
    pub(crate) fn shape(dims: Dims) -> Out {
        Out {
            shape: Some(dims),
            ..Out::default()
        }
    }

    /// An output whose shape is `dims` when known.
    pub(crate) fn maybe_shape(dims: Option<Dims>) -> Out {
        Out {
            shape: dims,
            ..Out::default()
        }
    }

    /// An output whose rank is known but no dim is.
    pub(crate) fn rank(rank: usize) -> Out {
        Out::shape(vec![SymDim::Unknown; rank])
    }

    /// Sets the element type.
    pub(crate) fn elem(mut self, elem: i32) -> Out {
        self.elem = Some(elem);
        self
    }

    /// Sets the element type when known.
    pub(crate) fn maybe_elem(mut self, elem: Option<i32>) -> Out {
        self.elem = elem.or(self.elem);
        self
    }

    /// An output with a whole type.
    pub(crate) fn typed(ty: Option<TypeProto>) -> Out {
        Out {
            ty,
            ..Out::default()
        }
    }
}

/// One node as the inference rules see it.
pub(crate) struct NodeCtx<'a> {
    /// The schema the node binds to.
    pub schema: &'a OpSchema,
    attrs: &'a [AttributeProto],
    inputs: &'a [Option<InputInfo<'a>>],
    /// How many outputs the node has.
    pub n_outputs: usize,
    /// The opset version of the node's domain (for inferring subgraph bodies).
    pub opset: i64,
    /// The enclosing graph's values, when the node is inferred as part of a graph.
    pub scope: Option<&'a Scope<'a>>,
}

impl<'a> NodeCtx<'a> {
    pub(crate) fn new(
        schema: &'a OpSchema,
        attrs: &'a [AttributeProto],
        inputs: &'a [Option<InputInfo<'a>>],
        n_outputs: usize,
        opset: i64,
        scope: Option<&'a Scope<'a>>,
    ) -> Self {
        Self {
            schema,
            attrs,
            inputs,
            n_outputs,
            opset,
            scope,
        }
    }

    /// The since_version of the bound schema (what decides attribute vs input forms).
    pub(crate) fn since(&self) -> i64 {
        self.schema.since_version
    }

    /// Number of input slots the node has (present or absent).
    pub(crate) fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Input `i` when present.
    pub(crate) fn input(&self, i: usize) -> Option<&InputInfo<'a>> {
        self.inputs.get(i).and_then(Option::as_ref)
    }

    /// Whether input `i` is present (even with an unknown type).
    pub(crate) fn has_input(&self, i: usize) -> bool {
        self.input(i).is_some()
    }

    /// The type of input `i` when present and known.
    pub(crate) fn ty(&self, i: usize) -> Option<&'a TypeProto> {
        self.input(i).and_then(|info| info.ty)
    }

    /// The element type of input `i`.
    pub(crate) fn elem(&self, i: usize) -> Option<i32> {
        self.ty(i).and_then(dims::elem_type_of)
    }

    /// The shape of input `i` when its rank is known. A constant input's shape comes from its
    /// dims when its type is not given.
    pub(crate) fn shape(&self, i: usize) -> Option<Dims> {
        let info = self.input(i)?;
        if let Some(shape) = info.ty.and_then(dims::shape_of) {
            return Some(shape);
        }
        info.constant
            .map(|t| t.dims.iter().map(|&d| SymDim::Known(d)).collect())
    }

    /// The rank of input `i` when known.
    pub(crate) fn rank(&self, i: usize) -> Option<usize> {
        self.shape(i).map(|s| s.len())
    }

    /// The constant value of input `i`.
    pub(crate) fn constant(&self, i: usize) -> Option<&'a TensorProto> {
        self.input(i).and_then(|info| info.constant)
    }

    /// The values of integer input `i` when all are known (from its constant or its symbolic
    /// value).
    pub(crate) fn ints(&self, i: usize) -> Option<Vec<i64>> {
        let info = self.input(i)?;
        if let Some(t) = info.constant {
            return tensor_data::tensor_ints(t);
        }
        if let Some(values) = info.sym_value {
            return values.iter().map(SymDim::known).collect();
        }
        self.is_empty_tensor(i).then(Vec::new)
    }

    /// Whether input `i` has a known shape with no elements (its value is known: empty).
    fn is_empty_tensor(&self, i: usize) -> bool {
        self.shape(i).is_some_and(|s| s.iter().any(|d| d.is(0)))
    }

    /// The value of integer input `i` as symbolic scalars (rank 0 or 1 inputs).
    pub(crate) fn sym(&self, i: usize) -> Option<Dims> {
        let info = self.input(i)?;
        if let Some(values) = info.sym_value {
            return Some(values.to_vec());
        }
        match info.constant {
            Some(t) => tensor_data::tensor_sym_values(t),
            None => self.is_empty_tensor(i).then(Vec::new),
        }
    }

    /// The values of numeric input `i` as f64, when constant.
    pub(crate) fn floats(&self, i: usize) -> Option<Vec<f64>> {
        if let Some(t) = self.constant(i) {
            return tensor_data::tensor_floats(t);
        }
        // Symbolic values are integers.
        #[allow(clippy::cast_precision_loss)]
        let from_sym = self
            .ints(i)
            .map(|v| v.into_iter().map(|x| x as f64).collect());
        from_sym
    }

    /// The scalar value of input `i` (a rank-0 or one-element tensor).
    pub(crate) fn int_scalar(&self, i: usize) -> Option<i64> {
        match self.ints(i)?.as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// The attribute `name`: the node's own, else the schema's default.
    pub(crate) fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.attrs
            .iter()
            .find(|a| a.name.as_deref() == Some(name) && a.ref_attr_name.is_none())
            .or_else(|| {
                self.schema
                    .attribute(name)
                    .and_then(|schema| schema.default.as_ref())
            })
    }

    /// Whether the node itself sets attribute `name`.
    pub(crate) fn has_attr(&self, name: &str) -> bool {
        self.attrs
            .iter()
            .any(|a| a.name.as_deref() == Some(name) && a.ref_attr_name.is_none())
    }

    fn attr_type(attr: &AttributeProto) -> Option<AttributeType> {
        attr.r#type.and_then(|t| AttributeType::try_from(t).ok())
    }

    /// Integer attribute `name`.
    pub(crate) fn attr_int(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(|a| a.i)
    }

    /// Integer attribute `name`, or `default` when neither node nor schema gives one.
    pub(crate) fn attr_int_or(&self, name: &str, default: i64) -> i64 {
        self.attr_int(name).unwrap_or(default)
    }

    /// Integer-list attribute `name` (an explicitly empty list is `Some(vec![])`).
    pub(crate) fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        let attr = self.attr(name)?;
        match Self::attr_type(attr) {
            Some(AttributeType::Ints) | None => Some(attr.ints.clone()),
            Some(AttributeType::Int) => attr.i.map(|v| vec![v]),
            _ => None,
        }
    }

    /// Float-list attribute `name`.
    pub(crate) fn attr_floats(&self, name: &str) -> Option<Vec<f32>> {
        Some(self.attr(name)?.floats.clone())
    }

    /// String attribute `name`, as UTF-8 (lossy).
    pub(crate) fn attr_str(&self, name: &str) -> Option<String> {
        let bytes = self.attr(name)?.s.as_ref()?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    }

    /// Tensor attribute `name`.
    pub(crate) fn attr_tensor(&self, name: &str) -> Option<&'a TensorProto> {
        self.attr(name)?.t.as_ref()
    }

    /// Graph attribute `name`.
    pub(crate) fn attr_graph(&self, name: &str) -> Option<&'a GraphProto> {
        self.attr(name)?.g.as_ref()
    }

    /// Every attribute of the node, for rules that read them all (Constant).
    pub(crate) fn node_attrs(&self) -> &'a [AttributeProto] {
        self.attrs
    }

    /// An [`InferError::Inconsistent`] for this op.
    pub(crate) fn fail(&self, reason: impl Into<String>) -> InferError {
        InferError::Inconsistent {
            op: Box::new(self.schema.id()),
            reason: reason.into(),
        }
    }

    /// An [`InferError::BadAttribute`] for this op.
    pub(crate) fn bad_attr(&self, name: &str, reason: impl Into<String>) -> InferError {
        InferError::BadAttribute {
            op: Box::new(self.schema.id()),
            name: name.to_string(),
            reason: reason.into(),
        }
    }

    /// The formal name of input `i`, for messages.
    pub(crate) fn input_name(&self, i: usize) -> &str {
        let formal = self
            .schema
            .inputs
            .get(i)
            .or_else(|| self.schema.inputs.last());
        formal.map_or("?", |f| f.name.as_str())
    }

    /// Normalizes `axis` (from attribute or input `what`) for rank `rank`, or fails naming it.
    pub(crate) fn axis(&self, what: &str, axis: i64, rank: usize) -> Result<usize, InferError> {
        dims::normalize_axis(axis, rank).ok_or_else(|| {
            self.bad_attr(what, format!("axis {axis} is out of range for rank {rank}"))
        })
    }

    /// Normalizes a list of axes; fails on out-of-range or repeated axes.
    pub(crate) fn axes(
        &self,
        what: &str,
        axes: &[i64],
        rank: usize,
    ) -> Result<Vec<usize>, InferError> {
        let mut out = Vec::with_capacity(axes.len());
        for &a in axes {
            let axis = self.axis(what, a, rank)?;
            if out.contains(&axis) {
                return Err(self.bad_attr(what, format!("axis {a} is repeated in {axes:?}")));
            }
            out.push(axis);
        }
        Ok(out)
    }

    /// Describes input `i` for messages: "input 'A' [3, 4]".
    pub(crate) fn describe(&self, i: usize) -> String {
        let shape = self
            .shape(i)
            .map_or_else(|| "(unknown shape)".to_string(), |s| dims::show(&s));
        format!("input '{}' {shape}", self.input_name(i))
    }
}
