//! Parsing types: tensor types with shapes (`float[N,3]`, `float`, `float[]`), `seq`, `map`,
//! `optional`, `sparse_tensor` and `opaque`.

use onnx_proto::{
    tensor_shape_proto::{dimension::Value as DimValue, Dimension},
    type_proto::{self, Value},
    TensorShapeProto, TypeProto,
};

use super::{PResult, Parser};
use crate::error::ParseErrorKind;
use crate::lex::Tok;
use crate::names::{elem_type_code, is_extension_type_word, is_standard_type_word};

impl Parser<'_> {
    /// True when a type starts here (onnx's `NextIsType`); this crate's extra element-type
    /// names count only when a name or a shape follows them.
    pub(crate) fn next_is_type(&mut self) -> PResult<bool> {
        let Tok::Ident(word) = *self.peek()? else {
            return Ok(false);
        };
        if is_standard_type_word(word) {
            return Ok(true);
        }
        if is_extension_type_word(word) {
            return Ok(matches!(
                self.peek_nth(1)?,
                Tok::Ident(_) | Tok::Str(_) | Tok::Punct(b'[')
            ));
        }
        Ok(false)
    }

    /// An element-type name.
    pub(crate) fn elem_type(&mut self) -> PResult<i32> {
        let offset = self.offset()?;
        let word = self.ident("an element type")?;
        match elem_type_code(word) {
            Some(code) => Ok(code),
            None => self.fail_at(
                offset,
                ParseErrorKind::Unknown {
                    what: "element type",
                    word: word.to_string(),
                },
            ),
        }
    }

    pub(crate) fn type_proto(&mut self) -> PResult<TypeProto> {
        self.enter()?;
        let result = self.type_proto_inner();
        self.leave();
        result
    }

    fn type_proto_inner(&mut self) -> PResult<TypeProto> {
        let offset = self.offset()?;
        let word = self.ident("a type")?;
        if let Some(code) = elem_type_code(word) {
            let shape = self.shape_suffix()?;
            return Ok(TypeProto {
                value: Some(Value::TensorType(type_proto::Tensor {
                    elem_type: Some(code),
                    shape,
                })),
                denotation: None,
            });
        }
        let value = match word {
            "seq" => {
                self.expect(b'(')?;
                let elem = self.optional_inner_type()?;
                self.expect(b')')?;
                Value::SequenceType(Box::new(type_proto::Sequence {
                    elem_type: elem.map(Box::new),
                }))
            }
            "optional" => {
                self.expect(b'(')?;
                let elem = self.optional_inner_type()?;
                self.expect(b')')?;
                Value::OptionalType(Box::new(type_proto::Optional {
                    elem_type: elem.map(Box::new),
                }))
            }
            "map" => {
                self.expect(b'(')?;
                let key = self.elem_type()?;
                self.expect(b',')?;
                let value = self.optional_inner_type()?;
                self.expect(b')')?;
                Value::MapType(Box::new(type_proto::Map {
                    key_type: Some(key),
                    value_type: value.map(Box::new),
                }))
            }
            "sparse_tensor" => {
                self.expect(b'(')?;
                let elem = self.elem_type()?;
                let shape = self.shape_suffix()?;
                self.expect(b')')?;
                Value::SparseTensorType(type_proto::SparseTensor {
                    elem_type: Some(elem),
                    shape,
                })
            }
            "opaque" => self.opaque()?,
            _ => {
                return self.fail_at(
                    offset,
                    ParseErrorKind::Unknown {
                        what: "type",
                        word: word.to_string(),
                    },
                )
            }
        };
        Ok(TypeProto {
            value: Some(value),
            denotation: None,
        })
    }

    /// The element type inside `seq(...)`, `optional(...)`, `map(k, ...)`: absent when the
    /// parentheses close at once.
    fn optional_inner_type(&mut self) -> PResult<Option<TypeProto>> {
        if self.at(b')')? {
            Ok(None)
        } else {
            self.type_proto().map(Some)
        }
    }

    /// `opaque()`, `opaque(name)`, `opaque(domain, name)`; the domain may be dotted.
    fn opaque(&mut self) -> PResult<Value> {
        self.expect(b'(')?;
        let mut opaque = type_proto::Opaque::default();
        if !self.eat(b')')? {
            let first = self.dotted_or_quoted()?;
            if self.eat(b',')? {
                opaque.domain = Some(first);
                opaque.name = Some(self.name("an opaque type name")?);
            } else {
                opaque.name = Some(first);
            }
            self.expect(b')')?;
        }
        Ok(Value::OpaqueType(opaque))
    }

    /// `a.b.c` or a string literal.
    pub(crate) fn dotted_or_quoted(&mut self) -> PResult<String> {
        if let Tok::Str(_) = self.peek()? {
            return self.string("a domain");
        }
        let mut s = self.ident("a name")?.to_string();
        while self.eat(b'.')? {
            s.push('.');
            s.push_str(self.ident("a name")?);
        }
        Ok(s)
    }

    /// After an element type: `[dims]` (known rank), `[]` (unknown rank) or nothing (scalar).
    fn shape_suffix(&mut self) -> PResult<Option<TensorShapeProto>> {
        if !self.eat(b'[')? {
            return Ok(Some(TensorShapeProto::default()));
        }
        if self.eat(b']')? {
            return Ok(None);
        }
        let mut shape = TensorShapeProto::default();
        loop {
            let value = if self.eat(b'?')? {
                None
            } else {
                match self.peek()? {
                    Tok::Ident(_) | Tok::Str(_) => {
                        Some(DimValue::DimParam(self.name("a dimension")?))
                    }
                    _ => Some(DimValue::DimValue(self.int()?)),
                }
            };
            shape.dim.push(Dimension {
                value,
                denotation: None,
            });
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b']')?;
        Ok(Some(shape))
    }
}
