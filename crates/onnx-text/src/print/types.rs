//! Printing types: `float[N,3]`, `float` (a scalar), `float[]` (unknown rank), `seq(...)`,
//! `map(int64, ...)`, `optional(...)`, `sparse_tensor(float[3])`, `opaque(domain,name)`.

use onnx_proto::{
    tensor_shape_proto::{dimension::Value as DimValue, Dimension},
    type_proto::Value,
    TensorShapeProto, TypeProto,
};

use super::Printer;
use crate::names::{self, elem_type_name, is_identifier};

impl Printer<'_> {
    pub(crate) fn type_proto(&mut self, t: &TypeProto) {
        match &t.value {
            Some(Value::TensorType(tt)) => {
                self.elem_type(tt.elem_type);
                self.shape_suffix(tt.shape.as_ref());
            }
            Some(Value::SequenceType(s)) => {
                self.out.push_str("seq(");
                if let Some(e) = &s.elem_type {
                    self.type_proto(e);
                }
                self.out.push(')');
            }
            Some(Value::MapType(m)) => {
                self.out.push_str("map(");
                self.elem_type(m.key_type);
                self.out.push_str(", ");
                if let Some(v) = &m.value_type {
                    self.type_proto(v);
                }
                self.out.push(')');
            }
            Some(Value::OptionalType(o)) => {
                self.out.push_str("optional(");
                if let Some(e) = &o.elem_type {
                    self.type_proto(e);
                }
                self.out.push(')');
            }
            Some(Value::SparseTensorType(st)) => {
                self.out.push_str("sparse_tensor(");
                self.elem_type(st.elem_type);
                self.shape_suffix(st.shape.as_ref());
                self.out.push(')');
            }
            Some(Value::OpaqueType(o)) => {
                self.out.push_str("opaque(");
                if let Some(d) = o.domain.as_deref().filter(|d| !d.is_empty()) {
                    if names::is_dotted_identifier(d) {
                        self.out.push_str(d);
                    } else {
                        self.quoted(d.as_bytes());
                    }
                    self.out.push(',');
                }
                if let Some(n) = o.name.as_deref().filter(|n| !n.is_empty()) {
                    if is_identifier(n) {
                        self.out.push_str(n);
                    } else {
                        self.quoted(n.as_bytes());
                    }
                }
                self.out.push(')');
            }
            None => {}
        }
    }

    /// An element type name (`undefined` for 0, an absent field and unknown numbers).
    pub(crate) fn elem_type(&mut self, code: Option<i32>) {
        self.out
            .push_str(code.and_then(elem_type_name).unwrap_or("undefined"));
    }

    /// `[d1,d2]` for a known rank above 0, nothing for a scalar, `[]` for an unknown rank.
    fn shape_suffix(&mut self, shape: Option<&TensorShapeProto>) {
        match shape {
            Some(s) if s.dim.is_empty() => {}
            Some(s) => {
                self.out.push('[');
                for (i, d) in s.dim.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.dim(d);
                }
                self.out.push(']');
            }
            None => self.out.push_str("[]"),
        }
    }

    fn dim(&mut self, d: &Dimension) {
        match &d.value {
            Some(DimValue::DimValue(v)) => self.out.push_str(&v.to_string()),
            Some(DimValue::DimParam(p)) => self.id(p),
            None => self.out.push('?'),
        }
    }
}
