//! Parsing the structure: models (header, graph, functions), graphs (signature,
//! initializers, value infos, nodes), nodes, functions and value infos.

use onnx_proto::{
    tensor_shape_proto::Dimension, type_proto::Value, AttributeProto, FunctionProto, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, TypeProto, ValueInfoProto,
};

use super::annotation::ValueNotes;
use super::{Fail, PResult, Parser};
use crate::error::ParseErrorKind;
use crate::lex::{AnnotationBlock, Tok};

impl Parser<'_> {
    pub(crate) fn model(&mut self) -> PResult<ModelProto> {
        let blocks = self.take_annotation()?;
        let notes = self.model_notes(blocks)?;
        let mut m = ModelProto::default();
        if self.eat(b'<')? {
            loop {
                let offset = self.offset()?;
                let key = self.ident("a model header key")?;
                self.expect(b':')?;
                match key {
                    "ir_version" => m.ir_version = Some(self.int()?),
                    "opset_import" => m.opset_import.extend(self.opsets()?),
                    "producer_name" => m.producer_name = Some(self.string("a string")?),
                    "producer_version" => m.producer_version = Some(self.string("a string")?),
                    "domain" => m.domain = Some(self.string("a string")?),
                    "model_version" => m.model_version = Some(self.int()?),
                    "doc_string" => m.doc_string = Some(self.string("a string")?),
                    "metadata_props" => m.metadata_props.extend(self.string_map()?),
                    other => {
                        return self.fail_at(
                            offset,
                            ParseErrorKind::Unknown {
                                what: "model header key",
                                word: other.to_string(),
                            },
                        )
                    }
                }
                if !self.eat(b',')? {
                    break;
                }
            }
            self.expect(b'>')?;
        }
        let graph_offset = self.offset()?;
        let blocks = self.take_annotation()?;
        let graph = self.graph(blocks)?;
        if notes.graph_unset {
            let empty = GraphProto {
                name: graph.name.clone().filter(String::is_empty),
                ..Default::default()
            };
            if graph != empty {
                return self.fail_at(
                    graph_offset,
                    ParseErrorKind::AnnotationConflict {
                        key: "graph".to_string(),
                        reason: "a model without a graph prints the empty graph `\"\" () => () {}`"
                            .to_string(),
                    },
                );
            }
        } else {
            m.graph = Some(graph);
        }
        while !self.at_eof()? {
            let blocks = self.take_annotation()?;
            m.functions.push(self.function(blocks)?);
        }
        if let Some((offset, opsets)) = notes.opset_import {
            self.check_opset_override(&m.opset_import, &opsets, offset)?;
            m.opset_import = opsets;
        }
        m.training_info = notes.training_info;
        m.configuration = notes.configuration;
        Ok(m)
    }

    /// `["domain" : version, ...]`.
    fn opsets(&mut self) -> PResult<Vec<OperatorSetIdProto>> {
        self.list(|p| {
            let domain = p.string("a domain string")?;
            p.expect(b':')?;
            let version = p.int()?;
            Ok(OperatorSetIdProto {
                domain: Some(domain),
                version: Some(version),
            })
        })
    }

    /// An `opset_import` annotation must describe the same list the header shows.
    fn check_opset_override(
        &self,
        header: &[OperatorSetIdProto],
        exact: &[OperatorSetIdProto],
        offset: usize,
    ) -> PResult<()> {
        let shown =
            |o: &OperatorSetIdProto| (o.domain.clone().unwrap_or_default(), o.version.unwrap_or(0));
        if header.len() != exact.len()
            || header.iter().zip(exact).any(|(h, e)| shown(h) != shown(e))
        {
            return self.fail_at(
                offset,
                ParseErrorKind::AnnotationConflict {
                    key: "opset_import".to_string(),
                    reason: "it lists other opsets than the header".to_string(),
                },
            );
        }
        Ok(())
    }

    pub(crate) fn graph(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<GraphProto> {
        self.enter()?;
        let saved = self.scope;
        let result = self.graph_inner(blocks);
        self.scope = saved;
        self.leave();
        result
    }

    /// A graph. Subgraphs nest through here, so the signature and the annotation are parsed
    /// in helpers whose frames are gone before the nodes (and their subgraphs) are.
    fn graph_inner(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<GraphProto> {
        let notes = Box::new(self.graph_notes(blocks)?);
        let mut g = Box::new(self.graph_signature()?);
        g.node = self.node_list()?;
        if notes.name_unset {
            g.name = None;
        }
        let notes = *notes;
        g.doc_string = notes.doc_string;
        g.metadata_props = notes.metadata_props;
        g.sparse_initializer = notes.sparse_initializer;
        g.quantization_annotation = notes.quantization_annotation;
        Ok(*g)
    }

    /// `name (inputs) => (outputs) <initializers and value infos>`.
    fn graph_signature(&mut self) -> PResult<GraphProto> {
        let mut g = GraphProto {
            name: Some(self.name("a graph name")?),
            ..Default::default()
        };
        if self.eat(b'(')? && !self.eat(b')')? {
            loop {
                let blocks = self.take_annotation()?;
                let vi_offset = self.offset()?;
                let vi = self.value_info()?;
                if self.eat(b'=')? {
                    let ty = vi.r#type.clone().unwrap_or_default();
                    let name = vi.name.clone();
                    let t = self.tensor_data(name, &ty, Default::default())?;
                    g.initializer.push(t);
                }
                let notes = self.value_notes(blocks)?;
                g.input.push(self.apply_value_notes(vi, notes, vi_offset)?);
                if !self.eat(b',')? {
                    break;
                }
            }
            self.expect(b')')?;
        }
        self.expect_arrow()?;
        self.expect(b'(')?;
        if !self.eat(b')')? {
            g.output = self.value_info_items()?;
            self.expect(b')')?;
        }
        if self.eat(b'<')? && !self.eat(b'>')? {
            loop {
                let blocks = self.take_annotation()?;
                let vi_offset = self.offset()?;
                let vi = self.value_info()?;
                if self.eat(b'=')? {
                    let notes = self.tensor_notes(blocks)?;
                    let ty = vi.r#type.unwrap_or_default();
                    let t = self.tensor_data(vi.name, &ty, notes)?;
                    g.initializer.push(t);
                } else {
                    let notes = self.value_notes(blocks)?;
                    g.value_info
                        .push(self.apply_value_notes(vi, notes, vi_offset)?);
                }
                if !self.eat(b',')? {
                    break;
                }
            }
            self.expect(b'>')?;
        }
        Ok(g)
    }

    /// Value infos separated by commas, each with its annotation.
    fn value_info_items(&mut self) -> PResult<Vec<ValueInfoProto>> {
        let mut list = Vec::new();
        loop {
            let blocks = self.take_annotation()?;
            let offset = self.offset()?;
            let vi = self.value_info()?;
            let notes = self.value_notes(blocks)?;
            list.push(self.apply_value_notes(vi, notes, offset)?);
            if !self.eat(b',')? {
                break;
            }
        }
        Ok(list)
    }

    /// `[type] name`.
    fn value_info(&mut self) -> PResult<ValueInfoProto> {
        let r#type = if self.next_is_type()? {
            Some(self.type_proto()?)
        } else {
            None
        };
        let name = self.name("a value name")?;
        Ok(ValueInfoProto {
            name: Some(name),
            r#type,
            ..Default::default()
        })
    }

    fn apply_value_notes(
        &self,
        mut vi: ValueInfoProto,
        notes: ValueNotes,
        offset: usize,
    ) -> PResult<ValueInfoProto> {
        if notes.name_unset {
            vi.name = None;
        }
        vi.doc_string = notes.doc_string;
        vi.metadata_props = notes.metadata_props;
        if let Some(d) = notes.denotation {
            match vi.r#type.as_mut() {
                Some(t) => t.denotation = Some(d),
                None => return self.conflict(offset, "denotation", "the value has no type"),
            }
        }
        if let Some((list_offset, denotations)) = notes.dim_denotation {
            let dims = vi.r#type.as_mut().and_then(|t| shape_dims(t));
            match dims {
                Some(dims) if dims.len() == denotations.len() => {
                    for (d, den) in dims.iter_mut().zip(denotations) {
                        d.denotation = den;
                    }
                }
                _ => {
                    return self.conflict(
                        list_offset,
                        "dim_denotation",
                        "it needs one entry per dimension of the value's shape",
                    )
                }
            }
        }
        Ok(vi)
    }

    fn conflict<T>(&self, offset: usize, key: &str, reason: &str) -> PResult<T> {
        Err(Fail {
            offset,
            kind: ParseErrorKind::AnnotationConflict {
                key: key.to_string(),
                reason: reason.to_string(),
            },
        })
    }

    /// `{ node ... }`.
    fn node_list(&mut self) -> PResult<Vec<NodeProto>> {
        self.expect(b'{')?;
        let mut nodes = Vec::new();
        loop {
            let offset = self.offset()?;
            let blocks = self.take_annotation()?;
            if self.eat(b'}')? {
                if !blocks.is_empty() {
                    return self.fail_at(offset, ParseErrorKind::MisplacedAnnotation);
                }
                return Ok(nodes);
            }
            nodes.push(self.node(blocks)?);
        }
    }

    /// A node. Subgraphs nest through its attributes, so its head and annotation are parsed
    /// in helpers.
    pub(crate) fn node(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<NodeProto> {
        let notes = Box::new(self.node_notes(blocks)?);
        let (mut n, domain) = self.node_head()?;
        if self.at(b'<')? {
            n.attribute = self.attribute_list()?;
        }
        self.expect(b'(')?;
        n.input = self.name_list()?;
        self.expect(b')')?;
        if n.attribute.is_empty() && self.at(b'<')? {
            n.attribute = self.attribute_list()?;
        }
        let notes = *notes;
        n.domain = match notes.domain {
            Some(d) => d,
            None if domain.is_empty() && self.scope.node_domain_unset => None,
            None => Some(domain),
        };
        if notes.op_type_unset {
            n.op_type = None;
        }
        if let Some(o) = notes.overload {
            n.overload = Some(o);
        }
        n.doc_string = notes.doc_string;
        n.metadata_props = notes.metadata_props;
        n.device_configurations = notes.device_configurations;
        Ok(n)
    }

    /// `[name] outputs = domain.Op:overload`; returns the node and its domain as written.
    fn node_head(&mut self) -> PResult<(NodeProto, String)> {
        let mut n = NodeProto::default();
        if self.eat(b'[')? {
            n.name = Some(self.optional_name()?.unwrap_or_default());
            self.expect(b']')?;
        }
        n.output = self.name_list()?;
        self.expect(b'=')?;
        // `domain.parts.Op`, where a part may be quoted (an extension).
        let mut parts = Vec::new();
        match self.peek()? {
            Tok::Ident(_) | Tok::Str(_) => parts.push(self.name("an operator")?),
            _ => parts.push(String::new()),
        }
        while self.eat(b'.')? {
            parts.push(self.name("an operator")?);
        }
        n.op_type = Some(parts.pop().unwrap_or_default());
        if self.eat(b':')? {
            n.overload = Some(self.name("an overload name")?);
        }
        Ok((n, parts.join(".")))
    }

    pub(crate) fn function(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<FunctionProto> {
        let saved = self.scope;
        let result = self.function_inner(blocks);
        self.scope = saved;
        result
    }

    fn function_inner(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<FunctionProto> {
        let notes = self.function_notes(blocks)?;
        let mut f = FunctionProto::default();
        if self.eat(b'<')? {
            loop {
                let offset = self.offset()?;
                let key = self.ident("a function header key")?;
                self.expect(b':')?;
                match key {
                    "opset_import" => f.opset_import.extend(self.opsets()?),
                    "doc_string" => f.doc_string = Some(self.string("a string")?),
                    "domain" => f.domain = Some(self.string("a string")?),
                    "overload" => f.overload = Some(self.string("a string")?),
                    other => {
                        return self.fail_at(
                            offset,
                            ParseErrorKind::Unknown {
                                what: "function header key",
                                word: other.to_string(),
                            },
                        )
                    }
                }
                if !self.eat(b',')? {
                    break;
                }
            }
            self.expect(b'>')?;
        }
        f.name = Some(self.name("a function name")?);
        if self.eat(b'<')? {
            loop {
                let blocks = self.take_annotation()?;
                let name_offset = self.offset()?;
                let name = self.name("an attribute name")?;
                if matches!(self.peek()?, Tok::Punct(b':' | b'=')) {
                    let mut attr = AttributeProto::default();
                    self.attribute_rest(&mut attr, blocks, name)?;
                    f.attribute_proto.push(attr);
                } else if blocks.is_empty() {
                    f.attribute.push(name);
                } else {
                    return self.fail_at(name_offset, ParseErrorKind::MisplacedAnnotation);
                }
                if !self.eat(b',')? {
                    break;
                }
            }
            self.expect(b'>')?;
        }
        f.input = self.function_io(&mut f.value_info)?;
        self.expect_arrow()?;
        f.output = self.function_io(&mut f.value_info)?;
        if self.eat(b'<')? && !self.eat(b'>')? {
            let mut more = self.value_info_items()?;
            f.value_info.append(&mut more);
            self.expect(b'>')?;
        }
        f.node = self.node_list()?;
        if notes.name_unset {
            f.name = None;
        }
        if let Some((offset, opsets)) = notes.opset_import {
            self.check_opset_override(&f.opset_import, &opsets, offset)?;
            f.opset_import = opsets;
        }
        f.metadata_props = notes.metadata_props;
        Ok(f)
    }

    /// Function inputs or outputs: `(name, type name, ...)`; typed entries also go to
    /// `value_info` (as onnx's parser does).
    fn function_io(&mut self, value_info: &mut Vec<ValueInfoProto>) -> PResult<Vec<String>> {
        self.expect(b'(')?;
        let mut names = Vec::new();
        if self.eat(b')')? {
            return Ok(names);
        }
        loop {
            let vi = self.value_info()?;
            let name = vi.name.clone().unwrap_or_default();
            if vi.r#type.is_some() {
                value_info.push(vi);
            }
            names.push(name);
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b')')?;
        Ok(names)
    }
}

/// The dimensions of a tensor or sparse-tensor type's shape.
fn shape_dims(t: &mut TypeProto) -> Option<&mut Vec<Dimension>> {
    match t.value.as_mut()? {
        Value::TensorType(tt) => tt.shape.as_mut().map(|s| &mut s.dim),
        Value::SparseTensorType(st) => st.shape.as_mut().map(|s| &mut s.dim),
        _ => None,
    }
}
