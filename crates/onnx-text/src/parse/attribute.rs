//! Parsing attributes: `name: type = value`, `name = value` (type inferred as onnx's parser
//! does), lists, references `@name`, and values of every attribute type.

use bytes::Bytes;
use onnx_proto::{attribute_proto::AttributeType, AttributeProto};

use super::annotation::AttributeNotes;
use super::{PResult, Parser};
use crate::error::ParseErrorKind;
use crate::lex::{AnnotationBlock, Tok};
use crate::names::{attr_type_from_name, attr_type_names, is_float_word};

/// One parsed attribute value (the pieces of an `AttributeProto` a value fills).
enum Single {
    Int(i64),
    Float(f32),
    Str(Vec<u8>),
    Tensor(Box<onnx_proto::TensorProto>),
    Graph(Box<onnx_proto::GraphProto>),
    Sparse(Box<onnx_proto::SparseTensorProto>),
    Type(onnx_proto::TypeProto),
}

impl Single {
    fn attribute_type(&self) -> AttributeType {
        match self {
            Single::Int(_) => AttributeType::Int,
            Single::Float(_) => AttributeType::Float,
            Single::Str(_) => AttributeType::String,
            Single::Tensor(_) => AttributeType::Tensor,
            Single::Graph(_) => AttributeType::Graph,
            Single::Sparse(_) => AttributeType::SparseTensor,
            Single::Type(_) => AttributeType::TypeProto,
        }
    }
}

fn list_type(single: AttributeType) -> AttributeType {
    match single {
        AttributeType::Int => AttributeType::Ints,
        AttributeType::Float => AttributeType::Floats,
        AttributeType::String => AttributeType::Strings,
        AttributeType::Tensor => AttributeType::Tensors,
        AttributeType::Graph => AttributeType::Graphs,
        AttributeType::SparseTensor => AttributeType::SparseTensors,
        AttributeType::TypeProto => AttributeType::TypeProtos,
        other => other,
    }
}

fn single_type(list: AttributeType) -> Option<AttributeType> {
    Some(match list {
        AttributeType::Ints => AttributeType::Int,
        AttributeType::Floats => AttributeType::Float,
        AttributeType::Strings => AttributeType::String,
        AttributeType::Tensors => AttributeType::Tensor,
        AttributeType::Graphs => AttributeType::Graph,
        AttributeType::SparseTensors => AttributeType::SparseTensor,
        AttributeType::TypeProtos => AttributeType::TypeProto,
        _ => return None,
    })
}

fn type_name(t: AttributeType) -> String {
    crate::names::attr_type_name(t)
        .unwrap_or("undefined")
        .to_string()
}

impl Parser<'_> {
    /// `< attr, attr, ... >`.
    ///
    /// Attributes are built in place (an `AttributeProto` is over a kilobyte): graphs nest
    /// through here, and every frame on that path counts against the stack.
    pub(crate) fn attribute_list(&mut self) -> PResult<Vec<AttributeProto>> {
        self.expect(b'<')?;
        let mut attrs = Vec::new();
        loop {
            let blocks = self.take_annotation()?;
            let name = self.name("an attribute name")?;
            attrs.push(AttributeProto::default());
            if let Some(attr) = attrs.last_mut() {
                self.attribute_rest(attr, blocks, name)?;
            }
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b'>')?;
        Ok(attrs)
    }

    /// An attribute after its name, `[: type] = value`, into `attr`.
    pub(crate) fn attribute_rest(
        &mut self,
        attr: &mut AttributeProto,
        blocks: Vec<AnnotationBlock>,
        name: String,
    ) -> PResult<()> {
        let notes = self.attribute_notes(blocks)?;
        let declared = self.declared_attribute_type()?;
        self.expect(b'=')?;
        let value_offset = self.offset()?;
        let value_blocks = self.take_annotation()?;
        if matches!(self.peek()?, Tok::Punct(b'@' | b'[')) {
            self.no_annotation(&value_blocks, value_offset)?;
        }
        if self.eat(b'@')? {
            attr.ref_attr_name = Some(self.name("the referenced attribute's name")?);
            attr.r#type = declared.map(|t| t as i32);
        } else if self.at(b'[')? {
            self.attribute_list_value(attr, declared, &name)?;
        } else {
            let single = self.single_value(declared, &name, value_blocks, false)?;
            self.store_checked(attr, single, declared, &name, value_offset)?;
        }
        attr.name = Some(name);
        apply_attribute_notes(attr, notes);
        Ok(())
    }

    /// The optional `: type` after an attribute's name.
    fn declared_attribute_type(&mut self) -> PResult<Option<AttributeType>> {
        if !self.eat(b':')? {
            return Ok(None);
        }
        let offset = self.offset()?;
        let word = self.ident("an attribute type")?;
        match attr_type_from_name(word) {
            Some(t) => Ok(Some(t)),
            None => self.fail_at(
                offset,
                ParseErrorKind::Expected {
                    expected: format!("an attribute type ({})", attr_type_names()),
                    found: format!("`{word}`"),
                },
            ),
        }
    }

    /// Stores a single value after checking it against the declared type.
    fn store_checked(
        &self,
        attr: &mut AttributeProto,
        single: Single,
        declared: Option<AttributeType>,
        name: &str,
        offset: usize,
    ) -> PResult<()> {
        let found = single.attribute_type();
        if let Some(d) = declared.filter(|d| *d != found) {
            let reason = if single_type(d).is_some() {
                "a list needs `[...]`".to_string()
            } else {
                type_name(found)
            };
            return self.fail_at(
                offset,
                ParseErrorKind::AttributeType {
                    attribute: name.to_string(),
                    declared: type_name(d),
                    found: reason,
                },
            );
        }
        attr.r#type = Some(found as i32);
        store_single(attr, single);
        Ok(())
    }

    fn attribute_list_value(
        &mut self,
        attr: &mut AttributeProto,
        declared: Option<AttributeType>,
        name: &str,
    ) -> PResult<()> {
        let list_offset = self.offset()?;
        let element = match declared {
            Some(d) => match single_type(d) {
                Some(s) => Some(s),
                None => {
                    return self.fail_at(
                        list_offset,
                        ParseErrorKind::AttributeValue {
                            attribute: name.to_string(),
                            reason: format!(
                                "a {} attribute cannot be given as a list",
                                type_name(d)
                            ),
                        },
                    )
                }
            },
            None => None,
        };
        self.expect(b'[')?;
        if self.eat(b']')? {
            match declared {
                Some(d) => attr.r#type = Some(d as i32),
                None => {
                    return self.fail_at(
                        list_offset,
                        ParseErrorKind::AttributeValue {
                            attribute: name.to_string(),
                            reason: "an empty list needs a type annotation (`name: ints = []`)"
                                .to_string(),
                        },
                    )
                }
            }
            return Ok(());
        }
        let mut element = element;
        loop {
            let blocks = self.take_annotation()?;
            let offset = self.offset()?;
            let single = self.single_value(element, name, blocks, true)?;
            let found = single.attribute_type();
            match element {
                Some(e) if e != found => {
                    return self.fail_at(offset, mismatch(name, e, found, true))
                }
                _ => element = Some(found),
            }
            push_single(attr, single);
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b']')?;
        attr.r#type = element.map(|e| list_type(e) as i32);
        Ok(())
    }

    /// One value. With a declared type, the value is read as that type; without one, its
    /// type is inferred as onnx's parser does (a type word starts a tensor or a type, a
    /// float word is a float, another identifier starts a graph, literals are themselves).
    fn single_value(
        &mut self,
        declared: Option<AttributeType>,
        name: &str,
        blocks: Vec<AnnotationBlock>,
        in_list: bool,
    ) -> PResult<Single> {
        match declared {
            Some(AttributeType::Graph) => return Ok(Single::Graph(Box::new(self.graph(blocks)?))),
            Some(AttributeType::Tensor) => {
                return Ok(Single::Tensor(Box::new(self.tensor_value(blocks)?)))
            }
            None if self.next_is_graph_name()? => {
                return Ok(Single::Graph(Box::new(self.graph(blocks)?)))
            }
            _ => {}
        }
        self.plain_value(declared, name, blocks, in_list)
    }

    /// Without a declared type, an identifier that is neither a type nor a float word
    /// starts a graph.
    fn next_is_graph_name(&mut self) -> PResult<bool> {
        match *self.peek()? {
            Tok::Ident(word) => Ok(!is_float_word(word) && !self.next_is_type()?),
            _ => Ok(false),
        }
    }

    /// A value that is not a graph.
    fn plain_value(
        &mut self,
        declared: Option<AttributeType>,
        name: &str,
        blocks: Vec<AnnotationBlock>,
        in_list: bool,
    ) -> PResult<Single> {
        let offset = self.offset()?;
        if declared.is_some() {
            self.no_annotation(&blocks, offset)?;
        }
        match declared {
            Some(AttributeType::Int) => {
                let negative = self.at(b'-')?;
                let found = match self.peek_nth(usize::from(negative))? {
                    Tok::Float(_) => Some(AttributeType::Float),
                    Tok::Ident(w) if is_float_word(w) => Some(AttributeType::Float),
                    Tok::Str(_) => Some(AttributeType::String),
                    _ => None,
                };
                if let Some(found) = found {
                    return self.fail(mismatch(name, AttributeType::Int, found, in_list));
                }
                return self.int().map(Single::Int);
            }
            Some(AttributeType::Float) => return self.float().map(Single::Float),
            Some(AttributeType::String) => return self.bytes("a string literal").map(Single::Str),
            Some(AttributeType::SparseTensor) => {
                return Ok(Single::Sparse(Box::new(self.sparse_tensor()?)))
            }
            Some(AttributeType::TypeProto) => {
                if matches!(self.peek()?, Tok::Punct(b',' | b'>' | b']')) {
                    return Ok(Single::Type(Default::default()));
                }
                return self.type_proto().map(Single::Type);
            }
            _ => {}
        }
        if let Tok::Ident(word) = *self.peek()? {
            if is_float_word(word) && !self.next_is_type()? {
                self.no_annotation(&blocks, offset)?;
                return self.float().map(Single::Float);
            }
            // A tensor when a name, `=` or `{` follows the type; a type otherwise.
            let ty = self.type_proto()?;
            if matches!(self.peek()?, Tok::Punct(b'{' | b'=') | Tok::Ident(_)) {
                let notes = self.tensor_notes(blocks)?;
                return Ok(Single::Tensor(Box::new(self.tensor_after_type(ty, notes)?)));
            }
            self.no_annotation(&blocks, offset)?;
            return Ok(Single::Type(ty));
        }
        self.no_annotation(&blocks, offset)?;
        match self.peek()? {
            Tok::Str(_) => self.bytes("a string literal").map(Single::Str),
            Tok::Punct(b'{') => Ok(Single::Sparse(Box::new(self.sparse_tensor()?))),
            _ => {
                let negative = self.at(b'-')?;
                let is_int = match self.peek_nth(usize::from(negative))? {
                    Tok::Int(_) => true,
                    Tok::Float(_) | Tok::Ident(_) => false,
                    _ => return self.expected(&format!("a value for attribute `{name}`")),
                };
                if is_int {
                    self.int().map(Single::Int)
                } else {
                    self.float().map(Single::Float)
                }
            }
        }
    }

    fn no_annotation(&self, blocks: &[AnnotationBlock], offset: usize) -> PResult<()> {
        if blocks.is_empty() {
            Ok(())
        } else {
            self.fail_at(offset, ParseErrorKind::MisplacedAnnotation)
        }
    }
}

/// A value of type `found` where `declared` (an element type when `in_list`) is needed.
fn mismatch(
    name: &str,
    declared: AttributeType,
    found: AttributeType,
    in_list: bool,
) -> ParseErrorKind {
    ParseErrorKind::AttributeType {
        attribute: name.to_string(),
        declared: type_name(if in_list {
            list_type(declared)
        } else {
            declared
        }),
        found: if in_list {
            format!("a list holding {}", type_name(found))
        } else {
            type_name(found)
        },
    }
}

fn apply_attribute_notes(attr: &mut AttributeProto, notes: AttributeNotes) {
    if notes.name_unset {
        attr.name = None;
    }
    if notes.type_unset {
        attr.r#type = None;
    }
    attr.doc_string = notes.doc_string;
}

fn store_single(attr: &mut AttributeProto, single: Single) {
    match single {
        Single::Int(v) => attr.i = Some(v),
        Single::Float(v) => attr.f = Some(v),
        Single::Str(v) => attr.s = Some(Bytes::from(v)),
        Single::Tensor(v) => attr.t = Some(*v),
        Single::Graph(v) => attr.g = Some(*v),
        Single::Sparse(v) => attr.sparse_tensor = Some(*v),
        Single::Type(v) => attr.tp = Some(v),
    }
}

fn push_single(attr: &mut AttributeProto, single: Single) {
    match single {
        Single::Int(v) => attr.ints.push(v),
        Single::Float(v) => attr.floats.push(v),
        Single::Str(v) => attr.strings.push(Bytes::from(v)),
        Single::Tensor(v) => attr.tensors.push(*v),
        Single::Graph(v) => attr.graphs.push(*v),
        Single::Sparse(v) => attr.sparse_tensors.push(*v),
        Single::Type(v) => attr.type_protos.push(v),
    }
}
