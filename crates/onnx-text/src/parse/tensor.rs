//! Parsing tensor values: `float[2] name {1, 2}` (attributes), the `= {...}` part of
//! initializers, external data `[ "location": ... ]`, sparse-tensor records, and the tensor
//! annotations (storage, name presence, raw bytes, ...).

use bytes::Bytes;
use onnx_proto::{
    tensor_proto::DataLocation, tensor_shape_proto::dimension::Value as DimValue,
    type_proto::Value, SparseTensorProto, TensorProto, TypeProto,
};

use super::annotation::TensorNotes;
use super::{PResult, Parser};
use crate::error::ParseErrorKind;
use crate::lex::{AnnotationBlock, Tok};
use crate::tensor_data::{
    encode_raw_int, encode_raw_uint, raw_elem, typed_field, RawElem, TypedField,
};

impl Parser<'_> {
    /// A tensor value (attribute form): type, optional name, optional `=`, data.
    pub(crate) fn tensor_value(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<TensorProto> {
        let notes = self.tensor_notes(blocks)?;
        let ty = self.type_proto()?;
        self.tensor_after_type(ty, notes)
    }

    /// A tensor value after its type: optional name, optional `=`, data.
    pub(crate) fn tensor_after_type(
        &mut self,
        ty: TypeProto,
        notes: TensorNotes,
    ) -> PResult<TensorProto> {
        let name = match self.peek()? {
            Tok::Ident(_) | Tok::Str(_) => Some(self.name("a tensor name")?),
            _ => None,
        };
        self.eat(b'=')?;
        let name = match name {
            Some(n) => Some(n),
            None if self.scope.tensor_name_unset => None,
            None => Some(String::new()),
        };
        self.tensor_data(name, &ty, notes)
    }

    /// The data part of a tensor whose type and name are known (after `=` for initializers).
    pub(crate) fn tensor_data(
        &mut self,
        name: Option<String>,
        ty: &TypeProto,
        notes: TensorNotes,
    ) -> PResult<TensorProto> {
        let display_name = name.clone().unwrap_or_default();
        let bad = |reason: &str| ParseErrorKind::Tensor {
            tensor: display_name.clone(),
            reason: reason.to_string(),
        };
        let Some(Value::TensorType(tt)) = &ty.value else {
            return self.fail(bad("a tensor value needs a tensor type"));
        };
        let Some(shape) = &tt.shape else {
            return self.fail(bad(
                "a tensor value needs a shape (`[]` is an unknown rank)",
            ));
        };
        let mut t = TensorProto {
            name,
            data_type: tt.elem_type,
            ..Default::default()
        };
        for d in &shape.dim {
            match d.value {
                Some(DimValue::DimValue(v)) => t.dims.push(v),
                _ => return self.fail(bad("a tensor's dimensions must be numbers")),
            }
        }
        let data_type = tt.elem_type.unwrap_or(0);
        let raw = notes.storage_raw.unwrap_or(self.scope.tensor_storage_raw);
        if self.eat(b'{')? {
            match raw_elem(data_type).filter(|_| raw) {
                Some(elem) => {
                    let data = self.raw_values(elem, &display_name)?;
                    t.raw_data = Some(Bytes::from(data));
                }
                None => self.typed_values(&mut t, data_type, &display_name)?,
            }
        } else if self.eat(b'[')? {
            t.data_location = Some(DataLocation::External as i32);
            if !self.eat(b']')? {
                loop {
                    let key = self.string("a string key")?;
                    self.expect(b':')?;
                    let value = self.string("a string value")?;
                    t.external_data.push(onnx_proto::StringStringEntryProto {
                        key: Some(key),
                        value: Some(value),
                    });
                    if !self.eat(b',')? {
                        break;
                    }
                }
                self.expect(b']')?;
            }
        } else if self.at(b'.')? {
            return self.fail(ParseErrorKind::ElidedTensor(display_name));
        }
        self.apply_tensor_notes(&mut t, notes)?;
        Ok(t)
    }

    /// The values between `{` and `}` into the typed field for the element type.
    fn typed_values(&mut self, t: &mut TensorProto, data_type: i32, name: &str) -> PResult<()> {
        if self.eat(b'}')? {
            return Ok(());
        }
        let Some(field) = typed_field(data_type) else {
            return self.fail(ParseErrorKind::Tensor {
                tensor: name.to_string(),
                reason: format!("element type {data_type} has no values"),
            });
        };
        loop {
            match field {
                TypedField::Int32 => {
                    let offset = self.offset()?;
                    let v = self.int()?;
                    let v = i32::try_from(v).or_else(|_| {
                        self.fail_at(
                            offset,
                            ParseErrorKind::OutOfRange {
                                text: v.to_string(),
                                target: "int32".to_string(),
                            },
                        )
                    })?;
                    t.int32_data.push(v);
                }
                TypedField::Int64 => {
                    let v = self.int()?;
                    t.int64_data.push(v);
                }
                TypedField::Uint64 => {
                    let v = self.uint()?;
                    t.uint64_data.push(v);
                }
                TypedField::Float => {
                    let v = self.float()?;
                    t.float_data.push(v);
                }
                TypedField::Double => {
                    let v = self.double()?;
                    t.double_data.push(v);
                }
                TypedField::String => {
                    let v = self.bytes("a string literal")?;
                    t.string_data.push(Bytes::from(v));
                }
            }
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b'}')
    }

    /// The values between `{` and `}` encoded as `raw_data`.
    fn raw_values(&mut self, elem: RawElem, name: &str) -> PResult<Vec<u8>> {
        let mut out = Vec::new();
        if self.eat(b'}')? {
            return Ok(out);
        }
        loop {
            let offset = self.offset()?;
            let fits = match elem {
                RawElem::F32 => {
                    out.extend_from_slice(&self.float()?.to_le_bytes());
                    true
                }
                RawElem::F64 => {
                    out.extend_from_slice(&self.double()?.to_le_bytes());
                    true
                }
                RawElem::U32 | RawElem::U64 => {
                    let v = self.uint()?;
                    encode_raw_uint(elem, v, &mut out)
                }
                _ => {
                    let v = self.int()?;
                    encode_raw_int(elem, v, &mut out)
                }
            };
            if !fits {
                return self.fail_at(
                    offset,
                    ParseErrorKind::Tensor {
                        tensor: name.to_string(),
                        reason: format!("value does not fit {}", elem.name()),
                    },
                );
            }
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b'}')?;
        Ok(out)
    }

    fn apply_tensor_notes(&mut self, t: &mut TensorProto, notes: TensorNotes) -> PResult<()> {
        if let Some(name) = notes.name {
            t.name = name;
        }
        if let Some(dt) = notes.data_type {
            t.data_type = Some(dt);
        }
        if let Some((offset, raw)) = notes.raw_data {
            let has_values = t.raw_data.as_ref().is_some_and(|r| !r.is_empty())
                || !t.float_data.is_empty()
                || !t.int32_data.is_empty()
                || !t.int64_data.is_empty()
                || !t.uint64_data.is_empty()
                || !t.double_data.is_empty()
                || !t.string_data.is_empty();
            if has_values {
                return self.fail_at(
                    offset,
                    ParseErrorKind::AnnotationConflict {
                        key: "raw_data".to_string(),
                        reason: "the tensor also has values in `{...}`".to_string(),
                    },
                );
            }
            t.raw_data = Some(Bytes::from(raw));
        }
        if let Some(loc) = notes.data_location {
            t.data_location = loc;
        }
        t.segment = notes.segment;
        t.doc_string = notes.doc_string;
        t.metadata_props = notes.metadata_props;
        Ok(())
    }

    /// A sparse tensor record: `{dims: [..], values: <tensor>, indices: <tensor>}`.
    pub(crate) fn sparse_tensor(&mut self) -> PResult<SparseTensorProto> {
        let mut s = SparseTensorProto::default();
        self.record(|p, key| {
            match key {
                "dims" => s.dims = p.list(Parser::int)?,
                "values" => {
                    let blocks = p.take_annotation()?;
                    s.values = Some(p.tensor_value(blocks)?);
                }
                "indices" => {
                    let blocks = p.take_annotation()?;
                    s.indices = Some(p.tensor_value(blocks)?);
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(s)
    }
}
