//! Printing tensor values: `float[2,2] name {1,2,3,4}` (attribute form) and
//! `float[2,2] name =  {1,2,3,4}` (initializer form), external data as
//! `["location": "w.bin", ...]`, and the sparse-tensor record (an extension).

use onnx_proto::{SparseTensorProto, TensorProto};

use super::Printer;
use crate::defaults::is_external_form;
use crate::number::{write_f32, write_f64};
use crate::tensor_data::{decode_raw, raw_elem, typed_field, RawElem, RawValue, TypedField};

/// How a tensor's data appears in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataForm {
    /// `[ "location": ... ]` entries.
    External,
    /// Decoded `raw_data` elements.
    Raw(RawElem),
    /// `raw_data` that decodes to no element list (odd length, strings, undefined types):
    /// the text shows `{}` and an annotation carries the bytes in hex.
    RawHex,
    /// The typed field for the element type (`None`: undefined types have none).
    Typed(Option<TypedField>),
}

/// Decides how a tensor's data prints.
pub(crate) fn data_form(t: &TensorProto) -> DataForm {
    if is_external_form(t) {
        return DataForm::External;
    }
    match &t.raw_data {
        Some(raw) => match t.data_type.and_then(raw_elem) {
            Some(elem) if raw.len() % elem.size() == 0 => DataForm::Raw(elem),
            _ => DataForm::RawHex,
        },
        None => DataForm::Typed(t.data_type.and_then(typed_field)),
    }
}

impl Printer<'_> {
    /// A tensor value; its annotation, if any, is written by the caller.
    pub(crate) fn tensor(&mut self, t: &TensorProto, initializer: bool) {
        self.elem_type(t.data_type);
        if !t.dims.is_empty() {
            self.out.push('[');
            for (i, d) in t.dims.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(&d.to_string());
            }
            self.out.push(']');
        }
        let name = t.name.as_deref().unwrap_or("");
        if initializer || !name.is_empty() {
            self.out.push(' ');
            self.id(name);
        }
        if initializer {
            self.out.push_str(" = ");
        }
        let form = data_form(t);
        if let Some(limit) = self.options.elide_tensors_above {
            if element_count(t, form) > limit {
                self.out.push_str("...");
                return;
            }
        }
        match form {
            DataForm::External => self.string_map(&t.external_data),
            DataForm::Raw(elem) => self.raw_values(t, elem),
            DataForm::RawHex | DataForm::Typed(None) => self.out.push_str(" {}"),
            DataForm::Typed(Some(field)) => self.typed_values(t, field),
        }
    }

    fn raw_values(&mut self, t: &TensorProto, elem: RawElem) {
        let raw = t.raw_data.as_deref().unwrap_or(&[]);
        self.out.reserve(raw.len() * 3);
        self.out.push_str(" {");
        for (i, chunk) in raw.chunks_exact(elem.size()).enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            match decode_raw(elem, chunk) {
                RawValue::Int(v) => self.push_int(v),
                RawValue::Uint(v) => self.push_uint(v),
                RawValue::F32(v) => write_f32(&mut self.out, v),
                RawValue::F64(v) => write_f64(&mut self.out, v),
            }
        }
        self.out.push('}');
    }

    fn typed_values(&mut self, t: &TensorProto, field: TypedField) {
        match field {
            TypedField::String => {
                self.out.push('{');
                for (i, s) in t.string_data.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.quoted(s);
                }
                self.out.push('}');
                return;
            }
            TypedField::Float => {
                self.out.push_str(" {");
                for (i, v) in t.float_data.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    write_f32(&mut self.out, *v);
                }
            }
            TypedField::Double => {
                self.out.push_str(" {");
                for (i, v) in t.double_data.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    write_f64(&mut self.out, *v);
                }
            }
            TypedField::Int32 => {
                self.out.push_str(" {");
                for (i, v) in t.int32_data.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.push_int(i64::from(*v));
                }
            }
            TypedField::Int64 => {
                self.out.push_str(" {");
                for (i, v) in t.int64_data.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.push_int(*v);
                }
            }
            TypedField::Uint64 => {
                self.out.push_str(" {");
                for (i, v) in t.uint64_data.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.push_uint(*v);
                }
            }
        }
        self.out.push('}');
    }

    fn push_int(&mut self, v: i64) {
        use std::fmt::Write;
        let _ = write!(self.out, "{v}");
    }

    fn push_uint(&mut self, v: u64) {
        use std::fmt::Write;
        let _ = write!(self.out, "{v}");
    }

    /// A sparse tensor (an extension): `{dims: [..], values: <tensor>, indices: <tensor>}`,
    /// each key present only when the field is.
    pub(crate) fn sparse_tensor(&mut self, s: &SparseTensorProto) {
        self.out.push('{');
        let mut sep = "";
        if !s.dims.is_empty() {
            let dims: Vec<String> = s.dims.iter().map(i64::to_string).collect();
            self.out.push_str("dims: [");
            self.out.push_str(&dims.join(", "));
            self.out.push(']');
            sep = ", ";
        }
        for (key, part) in [("values", &s.values), ("indices", &s.indices)] {
            if let Some(t) = part {
                self.out.push_str(sep);
                self.out.push_str(key);
                self.out.push_str(": ");
                let ann = self.tensor_annotation(t, false);
                self.inline(&ann);
                self.tensor(t, false);
                sep = ", ";
            }
        }
        self.out.push('}');
    }
}

/// The number of values a tensor prints (for eliding).
fn element_count(t: &TensorProto, form: DataForm) -> usize {
    match form {
        DataForm::External | DataForm::RawHex | DataForm::Typed(None) => 0,
        DataForm::Raw(elem) => t.raw_data.as_ref().map_or(0, |r| r.len() / elem.size()),
        DataForm::Typed(Some(field)) => match field {
            TypedField::Int32 => t.int32_data.len(),
            TypedField::Int64 => t.int64_data.len(),
            TypedField::Uint64 => t.uint64_data.len(),
            TypedField::Float => t.float_data.len(),
            TypedField::Double => t.double_data.len(),
            TypedField::String => t.string_data.len(),
        },
    }
}
