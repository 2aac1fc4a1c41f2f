//! Type and shape inference per operator, like onnx's C++ shape inference, with symbolic shape
//! arithmetic on top.
//!
//! [`infer_node`] gives a node's output types from its schema, attributes and what is known of
//! its inputs (types, constant values, symbolic integer values). Element types come from the
//! schema's type constraints for every operator (`element_types.rs`), plus per-op rules where an
//! output's type is not bound by an input (Cast, ConstantOfShape, QuantizeLinear, ...). Shapes
//! come from per-op rules grouped by family under `ops/`. Shape arithmetic folds through
//! symbolic values (`symbolic.rs`): `Shape(x)` of a `float[batch,16,128]` is the int64 vector
//! `[batch, 16, 128]`, Gather/Slice/Concat/... on it give new symbolic vectors, and Reshape,
//! Expand, ConstantOfShape, Tile, ... read such vectors as shapes.
//!
//! Unknown stays unknown: no rule invents a number, params keep their names, broadcasting
//! follows onnx. Inconsistent inputs (MatMul of 3x4 by 5x6) are an [`InferError`], never a
//! panic. [`infer_graph`] runs the rules over a graph, node by node.
//!
//! One assumption goes beyond onnx's own inference, because exported transformers need it: a
//! Slice from 0 with step 1 whose end is a symbolic dim `p` (`position_ids[:, :seq]`) is assumed
//! to stay in bounds, so its length is `p` rather than `min(p, dim)` (see `ops/index_ops.rs`).
//!
//! # Example
//!
//! ```
//! use onnx_schema::infer::{infer_node, shape_of, tensor_type, InputInfo, SymDim};
//! use onnx_schema::registry;
//!
//! let x = tensor_type(Some(1), Some(&[SymDim::from("batch"), 16.into(), 128.into()]));
//! let shape = registry().lookup("", "Shape", 17).unwrap();
//! let out = infer_node(shape, 17, &[], &[Some(InputInfo::typed(&x))], 1).unwrap();
//! let dims = shape_of(out[0].ty.as_ref().unwrap()).unwrap();
//! assert_eq!(dims, [SymDim::Known(3)]);
//! assert_eq!(
//!     out[0].sym_value.as_deref(),
//!     Some(&[SymDim::from("batch"), 16.into(), 128.into()][..])
//! );
//! ```

mod context;
mod dims;
mod element_types;
mod error;
mod graph;
mod ops;
mod symbolic;
mod tensor_data;

use onnx_proto::{AttributeProto, TensorProto, TypeProto};

pub use dims::{elem_type_of, shape_of, tensor_type, SymDim};
pub use error::InferError;
pub use graph::{
    infer_function_call, infer_graph, infer_graph_values, infer_graph_with, opset_imports,
    GraphInference, InferOptions, OpsetImports,
};
pub use ops::nn::explicit_window_count;

use crate::schema::{OpSchema, ParamOption};
use context::{NodeCtx, Out};

/// What is known of one present input of a node.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InputInfo<'a> {
    /// The input's type; `None` when unknown.
    pub ty: Option<&'a TypeProto>,
    /// The input's value, when constant (shape inputs, axes, pads, ...).
    pub constant: Option<&'a TensorProto>,
    /// The value of an integer scalar (one element) or vector, known symbolically.
    pub sym_value: Option<&'a [SymDim]>,
}

impl<'a> InputInfo<'a> {
    /// An input of which only the type is known.
    pub fn typed(ty: &'a TypeProto) -> Self {
        Self {
            ty: Some(ty),
            ..Self::default()
        }
    }

    /// A constant input (its type follows from the tensor when `ty` is `None`).
    pub fn constant(ty: Option<&'a TypeProto>, value: &'a TensorProto) -> Self {
        Self {
            ty,
            constant: Some(value),
            sym_value: None,
        }
    }

    /// An integer input with a symbolic value.
    pub fn symbolic(ty: Option<&'a TypeProto>, value: &'a [SymDim]) -> Self {
        Self {
            ty,
            constant: None,
            sym_value: Some(value),
        }
    }
}

/// What inference says about one output of a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputInfo {
    /// The output's type (element type and shape with symbolic dims); `None` when nothing is
    /// known. A tensor type with elem_type 0 has a known shape but an unknown element type.
    pub ty: Option<TypeProto>,
    /// For integer scalars and vectors computed from shapes: the value, element by element.
    pub sym_value: Option<Vec<SymDim>>,
}

fn check_required_inputs(
    schema: &OpSchema,
    inputs: &[Option<InputInfo<'_>>],
) -> Result<(), InferError> {
    for (index, formal) in schema.inputs.iter().enumerate() {
        let present = inputs.get(index).is_some_and(Option::is_some);
        let required = match formal.option {
            ParamOption::Single => true,
            ParamOption::Variadic => formal.min_arity > 0,
            ParamOption::Optional => false,
        };
        if required && !present {
            return Err(InferError::MissingInput {
                op: Box::new(schema.id()),
                index,
                name: formal.name.clone(),
            });
        }
    }
    Ok(())
}

fn is_tensor_type(ty: &TypeProto) -> bool {
    matches!(
        ty.value,
        Some(onnx_proto::type_proto::Value::TensorType(_))
            | Some(onnx_proto::type_proto::Value::SparseTensorType(_))
    )
}

/// Infers the output types of a node of `schema` (bound under `opset_version`) from its
/// attributes and what is known of its inputs (`None`: an absent optional input). Returns one
/// [`OutputInfo`] per output, `n_outputs` in all.
///
/// A pure function of its arguments. Fails only when the node cannot be valid: a required input
/// is absent, input types disagree or are not allowed, or shapes and attributes contradict the
/// operator (the error names the op and the inputs).
pub fn infer_node(
    schema: &OpSchema,
    opset_version: i64,
    attributes: &[AttributeProto],
    inputs: &[Option<InputInfo<'_>>],
    n_outputs: usize,
) -> Result<Vec<OutputInfo>, InferError> {
    infer_node_in_scope(schema, opset_version, attributes, inputs, n_outputs, None)
}

/// [`infer_node`] with the values of an enclosing graph visible to subgraph bodies.
pub(crate) fn infer_node_in_scope(
    schema: &OpSchema,
    opset_version: i64,
    attributes: &[AttributeProto],
    inputs: &[Option<InputInfo<'_>>],
    n_outputs: usize,
    scope: Option<&graph::Scope<'_>>,
) -> Result<Vec<OutputInfo>, InferError> {
    check_required_inputs(schema, inputs)?;
    // A constant given without a type has the type its tensor describes.
    let derived: Vec<Option<TypeProto>> = inputs
        .iter()
        .map(|i| match i {
            Some(InputInfo {
                ty: None,
                constant: Some(t),
                ..
            }) => Some(graph::constant_type(t)),
            _ => None,
        })
        .collect();
    let inputs: Vec<Option<InputInfo<'_>>> = inputs
        .iter()
        .zip(&derived)
        .map(|(info, ty)| {
            info.map(|info| InputInfo {
                ty: info.ty.or(ty.as_ref()),
                ..info
            })
        })
        .collect();
    let ctx = NodeCtx::new(schema, attributes, &inputs, n_outputs, opset_version, scope);
    let generic = element_types::generic_output_types(&ctx)?;
    let rules = ops::infer_outputs(&ctx)?;
    let mut outputs = Vec::with_capacity(n_outputs);
    for (i, generic_ty) in generic.into_iter().enumerate() {
        let rule = rules.get(i).cloned().unwrap_or_default();
        let ty = assemble_type(rule, generic_ty);
        outputs.push(OutputInfo {
            ty,
            sym_value: None,
        });
    }
    let out_types: Vec<Option<&TypeProto>> = outputs.iter().map(|o| o.ty.as_ref()).collect();
    let values = symbolic::sym_values(&ctx, &out_types);
    for (output, value) in outputs.iter_mut().zip(values) {
        output.sym_value = value;
    }
    Ok(outputs)
}

fn assemble_type(rule: Out, generic: Option<TypeProto>) -> Option<TypeProto> {
    if rule.ty.is_some() {
        return rule.ty;
    }
    if let Some(ty) = generic.as_ref().filter(|t| !is_tensor_type(t)) {
        return Some(ty.clone());
    }
    let elem = rule
        .elem
        .or_else(|| generic.as_ref().and_then(elem_type_of));
    if elem.is_none() && rule.shape.is_none() {
        return None;
    }
    Some(tensor_type(elem, rule.shape.as_deref()))
}
