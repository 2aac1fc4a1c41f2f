//! `normalize_for_text`: the model the text round trip gives back, i.e. the input with
//! exactly the things the text (with its annotations) cannot hold replaced by what the
//! parser produces instead. Everything else (presence of empty strings, raw versus typed
//! storage, doc strings, metadata, training info, sparse initializers, device
//! configurations, NaN payloads, ...) is expressed and survives unchanged.
//!
//! What changes, field by field (all of it is malformed or meaningless data: no model in
//! the ONNX backend tests or the development models has any of it):
//!
//! - `AttributeProto.type`: a number that is not a known attribute type (including
//!   `UNDEFINED`) becomes the type implied by the populated value field (INTS when none is).
//!   An absent `type` is kept (an annotation restores it).
//! - `AttributeProto` value fields that do not belong to its type are cleared (a `FLOAT`
//!   attribute with an `i` as well); a reference attribute (`@name`) keeps no value field.
//!   The value field of its type, when absent, holds the default (`0`, `""`, an empty
//!   tensor, graph or type).
//! - `TensorProto` data fields that are not read: with `raw_data` present (or external data)
//!   the typed fields are cleared; without it, typed fields other than the one for the data
//!   type are cleared (all of them for an undefined data type); with external data,
//!   `raw_data` is cleared too. An absent `data_type` becomes 0 (`undefined`).
//! - `TypeProto`: an absent or unknown element type (tensor, sparse tensor, map key) becomes
//!   0 (`undefined`); `denotation` on types and dimensions is kept only at the top of a value
//!   info's type (annotated there) and dropped elsewhere; an empty opaque `domain` or `name`
//!   becomes absent. A value info whose type holds no type becomes untyped.
//! - `StringStringEntryProto` (metadata, external data, bindings): an absent key or value
//!   becomes `""`.

use onnx_proto::{
    attribute_proto::AttributeType, type_proto::Value, AttributeProto, FunctionProto, GraphProto,
    ModelProto, NodeProto, SparseTensorProto, StringStringEntryProto, TensorProto, TypeProto,
    ValueInfoProto,
};

use crate::defaults::is_external_form;
use crate::names::{attr_type_name, elem_type_name};
use crate::print::{effective_attribute_type, infer_attribute_type};
use crate::tensor_data::{typed_field, TypedField};

/// The model `parse_model(print_model(model))` returns: `model` with what the text cannot
/// hold replaced as documented in this module. For every well-formed model this is the model
/// itself.
pub fn normalize_for_text(model: &ModelProto) -> ModelProto {
    let mut m = model.clone();
    entries(&mut m.metadata_props);
    if let Some(g) = &mut m.graph {
        graph(g);
    }
    for f in &mut m.functions {
        function(f);
    }
    for t in &mut m.training_info {
        for g in t.initialization.iter_mut().chain(t.algorithm.iter_mut()) {
            graph(g);
        }
        entries(&mut t.initialization_binding);
        entries(&mut t.update_binding);
    }
    m
}

fn entries(list: &mut [StringStringEntryProto]) {
    for e in list {
        e.key.get_or_insert_with(String::new);
        e.value.get_or_insert_with(String::new);
    }
}

fn graph(g: &mut GraphProto) {
    entries(&mut g.metadata_props);
    for t in &mut g.initializer {
        tensor(t);
    }
    for s in &mut g.sparse_initializer {
        sparse(s);
    }
    for vi in g
        .input
        .iter_mut()
        .chain(g.output.iter_mut())
        .chain(g.value_info.iter_mut())
    {
        value_info(vi);
    }
    for q in &mut g.quantization_annotation {
        entries(&mut q.quant_parameter_tensor_names);
    }
    for n in &mut g.node {
        node(n);
    }
}

fn function(f: &mut FunctionProto) {
    entries(&mut f.metadata_props);
    for a in &mut f.attribute_proto {
        attribute(a);
    }
    for vi in &mut f.value_info {
        value_info(vi);
    }
    for n in &mut f.node {
        node(n);
    }
}

fn node(n: &mut NodeProto) {
    entries(&mut n.metadata_props);
    for a in &mut n.attribute {
        attribute(a);
    }
}

fn value_info(vi: &mut ValueInfoProto) {
    entries(&mut vi.metadata_props);
    if vi.r#type.as_ref().is_some_and(|t| t.value.is_none()) {
        vi.r#type = None;
    }
    if let Some(t) = &mut vi.r#type {
        type_proto(t, true);
    }
}

/// `top`: the type of a value info, whose denotations the text keeps.
fn type_proto(t: &mut TypeProto, top: bool) {
    if !top {
        t.denotation = None;
    }
    let known = |code: &mut Option<i32>| {
        if code.and_then(elem_type_name).is_none() {
            *code = Some(0);
        }
    };
    match &mut t.value {
        Some(Value::TensorType(tt)) => {
            known(&mut tt.elem_type);
            if let Some(s) = &mut tt.shape {
                for d in &mut s.dim {
                    if !top {
                        d.denotation = None;
                    }
                }
            }
        }
        Some(Value::SparseTensorType(st)) => {
            known(&mut st.elem_type);
            if let Some(s) = &mut st.shape {
                for d in &mut s.dim {
                    if !top {
                        d.denotation = None;
                    }
                }
            }
        }
        Some(Value::SequenceType(s)) => {
            if let Some(e) = &mut s.elem_type {
                type_proto(e, false);
            }
        }
        Some(Value::OptionalType(o)) => {
            if let Some(e) = &mut o.elem_type {
                type_proto(e, false);
            }
        }
        Some(Value::MapType(m)) => {
            known(&mut m.key_type);
            if let Some(v) = &mut m.value_type {
                type_proto(v, false);
            }
        }
        Some(Value::OpaqueType(o)) => {
            if o.domain.as_deref() == Some("") {
                o.domain = None;
            }
            if o.name.as_deref() == Some("") {
                o.name = None;
            }
        }
        None => {}
    }
}

fn tensor(t: &mut TensorProto) {
    entries(&mut t.metadata_props);
    entries(&mut t.external_data);
    t.data_type.get_or_insert(0);
    let external = is_external_form(t);
    if external {
        t.raw_data = None;
    }
    let keep = if external || t.raw_data.is_some() {
        None
    } else {
        t.data_type.and_then(typed_field)
    };
    if keep != Some(TypedField::Float) {
        t.float_data.clear();
    }
    if keep != Some(TypedField::Double) {
        t.double_data.clear();
    }
    if keep != Some(TypedField::Int32) {
        t.int32_data.clear();
    }
    if keep != Some(TypedField::Int64) {
        t.int64_data.clear();
    }
    if keep != Some(TypedField::Uint64) {
        t.uint64_data.clear();
    }
    if keep != Some(TypedField::String) {
        t.string_data.clear();
    }
}

fn sparse(s: &mut SparseTensorProto) {
    for t in s.values.iter_mut().chain(s.indices.iter_mut()) {
        tensor(t);
    }
}

fn attribute(a: &mut AttributeProto) {
    let declared_known = a
        .r#type
        .and_then(|t| AttributeType::try_from(t).ok())
        .and_then(attr_type_name)
        .is_some();
    if a.r#type.is_some() && !declared_known {
        a.r#type = Some(infer_attribute_type(a) as i32);
    }
    let ty = effective_attribute_type(a);
    let reference = a.ref_attr_name.is_some();
    let keeps = |t: AttributeType| !reference && ty == t;
    if !keeps(AttributeType::Float) {
        a.f = None;
    } else {
        a.f.get_or_insert(0.0);
    }
    if !keeps(AttributeType::Int) {
        a.i = None;
    } else {
        a.i.get_or_insert(0);
    }
    if !keeps(AttributeType::String) {
        a.s = None;
    } else {
        a.s.get_or_insert_with(Default::default);
    }
    if !keeps(AttributeType::Tensor) {
        a.t = None;
    } else {
        tensor(a.t.get_or_insert_with(Default::default));
    }
    if !keeps(AttributeType::Graph) {
        a.g = None;
    } else {
        graph(a.g.get_or_insert_with(Default::default));
    }
    if !keeps(AttributeType::SparseTensor) {
        a.sparse_tensor = None;
    } else {
        sparse(a.sparse_tensor.get_or_insert_with(Default::default));
    }
    if !keeps(AttributeType::TypeProto) {
        a.tp = None;
    } else {
        let tp = a.tp.get_or_insert_with(Default::default);
        type_proto(tp, false);
    }
    if !keeps(AttributeType::Floats) {
        a.floats.clear();
    }
    if !keeps(AttributeType::Ints) {
        a.ints.clear();
    }
    if !keeps(AttributeType::Strings) {
        a.strings.clear();
    }
    if !keeps(AttributeType::Tensors) {
        a.tensors.clear();
    }
    for t in &mut a.tensors {
        tensor(t);
    }
    if !keeps(AttributeType::Graphs) {
        a.graphs.clear();
    }
    for g in &mut a.graphs {
        graph(g);
    }
    if !keeps(AttributeType::SparseTensors) {
        a.sparse_tensors.clear();
    }
    for s in &mut a.sparse_tensors {
        sparse(s);
    }
    if !keeps(AttributeType::TypeProtos) {
        a.type_protos.clear();
    }
    for t in &mut a.type_protos {
        type_proto(t, false);
    }
}
