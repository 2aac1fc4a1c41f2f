//! `--input-shape NAME:1,3,224,224` ([`crate::Optimizer::input_shape`]): graph inputs given
//! fixed shapes before the model is optimized (onnxsim's `--overwrite-input-shape`,
//! onnxslim's `--input-shapes`). Each symbolic dim of the input becomes its value, in every
//! declaration of the main graph that names the same symbol (inputs, outputs, value_info: one
//! symbol is one size), so the analysis sees known shapes and shape arithmetic folds. A given
//! shape that contradicts the model (another rank, a known dim of another size, one symbol
//! given two sizes) is an [`Error::BadInputShape`]; nothing else changes.

use std::collections::BTreeMap;

use onnx_ir::Model;
use onnx_proto::tensor_shape_proto::{dimension, Dimension};
use onnx_proto::{type_proto, TensorShapeProto, TypeProto};

use crate::Error;

/// Gives each named graph input its shape (see the module documentation).
pub(crate) fn set_input_shapes(
    model: &mut Model,
    shapes: &[(String, Vec<i64>)],
) -> Result<(), Error> {
    let g = &mut model.graph;
    let inputs: Vec<String> = g
        .inputs
        .iter()
        .filter(|&&v| g.value(v).initializer.is_none())
        .map(|&v| g.value(v).name.to_string())
        .collect();
    let mut symbols: BTreeMap<String, i64> = BTreeMap::new();
    for (name, dims) in shapes {
        let bad = |message: String| Error::BadInputShape {
            name: name.clone(),
            message,
        };
        if dims.iter().any(|&d| d < 0) {
            return Err(bad("a dim is negative".into()));
        }
        let Some(&id) = g
            .inputs
            .iter()
            .find(|&&v| g.value(v).name.as_str() == name && g.value(v).initializer.is_none())
        else {
            return Err(bad(format!(
                "not an input of the model (its inputs: {})",
                inputs.join(", ")
            )));
        };
        let value = g.value_mut(id);
        let tensor = match value.ty.as_mut().and_then(|t| t.value.as_mut()) {
            Some(type_proto::Value::TensorType(t)) => t,
            None => {
                value.ty = Some(TypeProto {
                    value: Some(type_proto::Value::TensorType(Default::default())),
                    ..Default::default()
                });
                match value.ty.as_mut().and_then(|t| t.value.as_mut()) {
                    Some(type_proto::Value::TensorType(t)) => t,
                    _ => unreachable!("just set"),
                }
            }
            Some(_) => return Err(bad("the input is not a tensor".into())),
        };
        let shape = tensor.shape.get_or_insert_with(|| TensorShapeProto {
            dim: vec![Dimension::default(); dims.len()],
        });
        if shape.dim.len() != dims.len() {
            return Err(bad(format!(
                "the model's input has rank {}, the shape given {} dims",
                shape.dim.len(),
                dims.len()
            )));
        }
        for (i, (d, &want)) in shape.dim.iter_mut().zip(dims).enumerate() {
            match &d.value {
                Some(dimension::Value::DimValue(v)) if *v != want => {
                    return Err(bad(format!("dim {i} is {v} in the model, not {want}")));
                }
                Some(dimension::Value::DimParam(p)) if !p.is_empty() => {
                    if let Some(&had) = symbols.get(p).filter(|&&had| had != want) {
                        return Err(bad(format!(
                            "dim {i} is '{p}', which another input shape makes {had}, not {want}"
                        )));
                    }
                    symbols.insert(p.clone(), want);
                }
                _ => {}
            }
            d.value = Some(dimension::Value::DimValue(want));
        }
        // A declaration kept as in the file (the input declared twice) takes the shape too.
        let ty = g.value(id).ty.clone();
        for ((list, _), o) in g.info_overrides.iter_mut() {
            if *list == onnx_ir::InfoList::Input && o.value == id {
                o.proto.r#type = ty.clone();
            }
        }
    }
    // One symbol is one size: every declaration of the main graph that names it.
    let fix = |ty: &mut TypeProto| {
        if let Some(type_proto::Value::TensorType(t)) = ty.value.as_mut() {
            for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
                if let Some(dimension::Value::DimParam(p)) = &d.value {
                    if let Some(&v) = symbols.get(p) {
                        d.value = Some(dimension::Value::DimValue(v));
                    }
                }
            }
        }
    };
    for v in g.values.iter_mut() {
        if let Some(ty) = v.ty.as_mut() {
            fix(ty);
        }
    }
    for o in g.info_overrides.values_mut() {
        if let Some(ty) = o.proto.r#type.as_mut() {
            fix(ty);
        }
    }
    Ok(())
}
