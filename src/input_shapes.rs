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

/// The names of the graph's inputs that are not initializers (what a caller feeds), in order.
pub(crate) fn input_names(g: &onnx_ir::Graph) -> Vec<String> {
    g.inputs
        .iter()
        .filter(|&&v| g.value(v).initializer.is_none())
        .map(|&v| g.value(v).name.to_string())
        .collect()
}

/// Gives each named graph input its shape (see the module documentation).
pub(crate) fn set_input_shapes(
    model: &mut Model,
    shapes: &[(String, Vec<i64>)],
) -> Result<(), Error> {
    let g = &mut model.graph;
    let inputs = input_names(g);
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
    rewrite_dim_params(g, |p| {
        symbols.get(p).map(|&v| dimension::Value::DimValue(v))
    });
    Ok(())
}

/// Every symbolic dim of every tensor type the main graph declares (its values' types, and the
/// declarations kept as in the file) becomes what `f` gives for its name, where it gives one.
fn rewrite_dim_params(g: &mut onnx_ir::Graph, mut f: impl FnMut(&str) -> Option<dimension::Value>) {
    let mut fix = |ty: &mut TypeProto| {
        if let Some(type_proto::Value::TensorType(t)) = ty.value.as_mut() {
            for d in t.shape.iter_mut().flat_map(|s| s.dim.iter_mut()) {
                if let Some(dimension::Value::DimParam(p)) = &d.value {
                    if let Some(new) = f(p) {
                        d.value = Some(new);
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
}

/// Whether `s` is a plain identifier, the only kind of symbol `--same-dim` renames.
fn is_symbol(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `p` with every identifier token `from` replaced by `to` (`s15 + s70` -> `s69 + s70`), or
/// `None` if `p` does not name `from`.
fn rename_tokens(p: &str, from: &str, to: &str) -> Option<String> {
    let mut out = String::with_capacity(p.len());
    let mut token = String::new();
    let mut hit = false;
    let mut flush = |token: &mut String, out: &mut String| {
        if token == from {
            out.push_str(to);
            hit = true;
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in p.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    hit.then_some(out)
}

/// `--same-dim NAME=OTHER` ([`crate::Optimizer::same_dim`]): a symbolic dim that a graph input
/// declares is made the same size as another symbol, in every declaration of the main graph
/// (inputs, outputs, value_info): `OTHER` replaces `NAME` wherever it is a token of a dim's name,
/// so `s15 + s70` becomes `s69 + s70`. This is an assumption the user states about the inputs
/// they will send (ONNX: one symbol is one size), so the model's interface changes with it and
/// the check draws its inputs under it. A name no input declares, or an `OTHER` that is not a
/// plain identifier, is an [`Error::BadDim`].
pub(crate) fn same_dims(model: &mut Model, ties: &[(String, String)]) -> Result<(), Error> {
    let g = &mut model.graph;
    let declared: std::collections::BTreeSet<String> = g
        .inputs
        .iter()
        .filter(|&&v| g.value(v).initializer.is_none())
        .filter_map(|&v| match g.value(v).ty.as_ref()?.value.as_ref()? {
            type_proto::Value::TensorType(t) => t.shape.as_ref(),
            _ => None,
        })
        .flat_map(|s| s.dim.iter())
        .filter_map(|d| match &d.value {
            Some(dimension::Value::DimParam(p)) if is_symbol(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    // What each name given so far was renamed to, so that `b=a` then `c=b` ties all three.
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let follow = |renamed: &BTreeMap<String, String>, mut s: String| {
        while let Some(next) = renamed.get(&s) {
            s = next.clone();
        }
        s
    };
    for (given, to_given) in ties {
        let name = given;
        let bad = |message: String| Error::BadDim {
            name: name.clone(),
            message,
        };
        if !declared.contains(name) {
            let known: Vec<&str> = declared.iter().map(String::as_str).collect();
            return Err(bad(format!(
                "no input of the model has a dim of that name (their symbolic dims: {})",
                match known.is_empty() {
                    true => "none".to_string(),
                    false => known.join(", "),
                }
            )));
        }
        if !is_symbol(to_given) {
            return Err(bad(format!(
                "'{to_given}' is not a plain name (letters, digits, '_')"
            )));
        }
        if to_given == name {
            return Err(bad("a dim cannot be tied to itself".into()));
        }
        let (name, to) = (
            &follow(&renamed, name.clone()),
            &follow(&renamed, to_given.clone()),
        );
        if name == to {
            continue;
        }
        renamed.insert(name.clone(), to.clone());
        rewrite_dim_params(g, |p| {
            rename_tokens(p, name, to).map(dimension::Value::DimParam)
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renamed_whole() {
        assert_eq!(
            rename_tokens("s15 + s70", "s15", "s69").as_deref(),
            Some("s69 + s70")
        );
        assert_eq!(rename_tokens("s150 + s70", "s15", "s69"), None);
        assert_eq!(rename_tokens("2*s15", "s15", "p").as_deref(), Some("2*p"));
        assert!(is_symbol("past_len") && !is_symbol("a + b") && !is_symbol("1x"));
    }
}
