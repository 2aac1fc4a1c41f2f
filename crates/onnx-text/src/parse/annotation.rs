//! Reading annotations: each element kind has its set of keys; a block is parsed by a nested
//! parser over its content and gives that element's notes, applied once the element is
//! parsed. Also the value forms used inside annotations: `unset`, key-value lists, records
//! `{key: value, ...}` and lists.

use std::collections::BTreeSet;

use onnx_proto::{
    simple_sharded_dim_proto::Dim, tensor_proto::Segment, DeviceConfigurationProto,
    IntIntListEntryProto, NodeDeviceConfigurationProto, OperatorSetIdProto, ShardedDimProto,
    ShardingSpecProto, SimpleShardedDimProto, SparseTensorProto, StringStringEntryProto,
    TensorAnnotation, TrainingInfoProto,
};

use super::{Fail, PResult, Parser};
use crate::error::ParseErrorKind;
use crate::lex::{AnnotationBlock, Tok};

/// `Some(None)`: the field is absent; `Some(Some(v))`: it holds `v`; `None`: not annotated.
pub(crate) type Presence = Option<Option<String>>;

#[derive(Debug, Default)]
pub(crate) struct ModelNotes {
    pub graph_unset: bool,
    pub opset_import: Option<(usize, Vec<OperatorSetIdProto>)>,
    pub training_info: Vec<TrainingInfoProto>,
    pub configuration: Vec<DeviceConfigurationProto>,
}

#[derive(Debug, Default)]
pub(crate) struct GraphNotes {
    pub name_unset: bool,
    pub doc_string: Option<String>,
    pub metadata_props: Vec<StringStringEntryProto>,
    pub sparse_initializer: Vec<SparseTensorProto>,
    pub quantization_annotation: Vec<TensorAnnotation>,
}

#[derive(Debug, Default)]
pub(crate) struct NodeNotes {
    pub domain: Presence,
    pub op_type_unset: bool,
    pub overload: Option<String>,
    pub doc_string: Option<String>,
    pub metadata_props: Vec<StringStringEntryProto>,
    pub device_configurations: Vec<NodeDeviceConfigurationProto>,
}

#[derive(Debug, Default)]
pub(crate) struct AttributeNotes {
    pub name_unset: bool,
    pub type_unset: bool,
    pub doc_string: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct ValueNotes {
    pub name_unset: bool,
    pub doc_string: Option<String>,
    pub metadata_props: Vec<StringStringEntryProto>,
    pub denotation: Option<String>,
    pub dim_denotation: Option<(usize, Vec<Option<String>>)>,
}

#[derive(Debug, Default)]
pub(crate) struct TensorNotes {
    pub name: Presence,
    pub data_type: Option<i32>,
    /// `Some(true)`: raw, `Some(false)`: typed.
    pub storage_raw: Option<bool>,
    pub raw_data: Option<(usize, Vec<u8>)>,
    /// `Some(None)`: absent.
    pub data_location: Option<Option<i32>>,
    pub segment: Option<Segment>,
    pub doc_string: Option<String>,
    pub metadata_props: Vec<StringStringEntryProto>,
}

#[derive(Debug, Default)]
pub(crate) struct FunctionNotes {
    pub name_unset: bool,
    pub opset_import: Option<(usize, Vec<OperatorSetIdProto>)>,
    pub metadata_props: Vec<StringStringEntryProto>,
}

const MODEL_KEYS: &str = "default_node_domain, default_tensor_name, default_tensor_storage, graph, opset_import, training_info, configuration";
const GRAPH_KEYS: &str = "default_node_domain, default_tensor_name, default_tensor_storage, name, doc_string, metadata_props, sparse_initializer, quantization_annotation";
const NODE_KEYS: &str =
    "domain, op_type, overload, doc_string, metadata_props, device_configurations";
const ATTRIBUTE_KEYS: &str = "name, type, doc_string";
const VALUE_KEYS: &str = "name, doc_string, metadata_props, denotation, dim_denotation";
const TENSOR_KEYS: &str =
    "name, data_type, storage, raw_data, data_location, segment, doc_string, metadata_props";
const FUNCTION_KEYS: &str = "default_node_domain, default_tensor_name, default_tensor_storage, name, opset_import, metadata_props";

impl Parser<'_> {
    /// Parses annotation blocks: `handle(parser, key)` reads the value of a key it knows and
    /// returns `false` for a key it does not.
    fn annotation_entries(
        &mut self,
        blocks: Vec<AnnotationBlock>,
        element: &'static str,
        known: &'static str,
        mut handle: impl FnMut(&mut Parser<'_>, &str) -> PResult<bool>,
    ) -> PResult<()> {
        let mut seen = BTreeSet::new();
        for block in blocks {
            let mut sub = Parser::new(&block.content, self.scope, self.depth);
            let result = (|| -> PResult<()> {
                loop {
                    while sub.eat(b',')? {}
                    if sub.at_eof()? {
                        return Ok(());
                    }
                    let key_offset = sub.offset()?;
                    let key = sub.ident("an annotation key")?;
                    sub.expect(b':')?;
                    if !seen.insert(key.to_string()) {
                        return sub.fail_at(
                            key_offset,
                            ParseErrorKind::DuplicateAnnotation(key.to_string()),
                        );
                    }
                    if !handle(&mut sub, key)? {
                        return sub.fail_at(
                            key_offset,
                            ParseErrorKind::UnknownAnnotation {
                                element,
                                key: key.to_string(),
                                known,
                            },
                        );
                    }
                }
            })();
            if let Err(f) = result {
                return Err(Fail {
                    offset: block.input_offset(f.offset),
                    kind: f.kind,
                });
            }
            // Defaults set by this block apply to what follows it.
            self.scope = sub.scope;
        }
        Ok(())
    }

    /// The `default_*` keys (for models, graphs and functions).
    fn default_entry(p: &mut Parser<'_>, key: &str) -> PResult<bool> {
        match key {
            "default_node_domain" => p.scope.node_domain_unset = p.opt_string()?.is_none(),
            "default_tensor_name" => p.scope.tensor_name_unset = p.opt_string()?.is_none(),
            "default_tensor_storage" => {
                let offset = p.offset()?;
                p.scope.tensor_storage_raw = match p.ident("`raw` or `typed`")? {
                    "raw" => true,
                    "typed" => false,
                    other => {
                        return p.fail_at(
                            offset,
                            ParseErrorKind::Unknown {
                                what: "storage",
                                word: other.to_string(),
                            },
                        )
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub(crate) fn model_notes(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<ModelNotes> {
        let mut n = ModelNotes::default();
        self.annotation_entries(blocks, "model", MODEL_KEYS, |p, key| {
            match key {
                "graph" => {
                    p.unset_word()?;
                    n.graph_unset = true;
                }
                "opset_import" => n.opset_import = Some(p.opset_override()?),
                "training_info" => n.training_info = p.list(Parser::training_info)?,
                "configuration" => n.configuration = p.list(Parser::device_configuration)?,
                _ => return Parser::default_entry(p, key),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    pub(crate) fn graph_notes(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<GraphNotes> {
        let mut n = GraphNotes::default();
        self.annotation_entries(blocks, "graph", GRAPH_KEYS, |p, key| {
            match key {
                "name" => {
                    p.unset_word()?;
                    n.name_unset = true;
                }
                "doc_string" => n.doc_string = Some(p.string("a string")?),
                "metadata_props" => n.metadata_props = p.string_map()?,
                "sparse_initializer" => n.sparse_initializer = p.list(Parser::sparse_tensor)?,
                "quantization_annotation" => {
                    n.quantization_annotation = p.list(Parser::quantization_annotation)?
                }
                _ => return Parser::default_entry(p, key),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    pub(crate) fn node_notes(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<NodeNotes> {
        let mut n = NodeNotes::default();
        self.annotation_entries(blocks, "node", NODE_KEYS, |p, key| {
            match key {
                "domain" => n.domain = Some(p.opt_string()?),
                "op_type" => {
                    p.unset_word()?;
                    n.op_type_unset = true;
                }
                "overload" => n.overload = Some(p.string("a string")?),
                "doc_string" => n.doc_string = Some(p.string("a string")?),
                "metadata_props" => n.metadata_props = p.string_map()?,
                "device_configurations" => {
                    n.device_configurations = p.list(Parser::node_device_configuration)?
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    pub(crate) fn attribute_notes(
        &mut self,
        blocks: Vec<AnnotationBlock>,
    ) -> PResult<AttributeNotes> {
        let mut n = AttributeNotes::default();
        self.annotation_entries(blocks, "attribute", ATTRIBUTE_KEYS, |p, key| {
            match key {
                "name" => {
                    p.unset_word()?;
                    n.name_unset = true;
                }
                "type" => {
                    p.unset_word()?;
                    n.type_unset = true;
                }
                "doc_string" => n.doc_string = Some(p.string("a string")?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    pub(crate) fn value_notes(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<ValueNotes> {
        let mut n = ValueNotes::default();
        self.annotation_entries(blocks, "value", VALUE_KEYS, |p, key| {
            match key {
                "name" => {
                    p.unset_word()?;
                    n.name_unset = true;
                }
                "doc_string" => n.doc_string = Some(p.string("a string")?),
                "metadata_props" => n.metadata_props = p.string_map()?,
                "denotation" => n.denotation = Some(p.string("a string")?),
                "dim_denotation" => {
                    let offset = p.offset()?;
                    n.dim_denotation = Some((offset, p.list(Parser::opt_string)?));
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    pub(crate) fn tensor_notes(&mut self, blocks: Vec<AnnotationBlock>) -> PResult<TensorNotes> {
        let mut n = TensorNotes::default();
        self.annotation_entries(blocks, "tensor", TENSOR_KEYS, |p, key| {
            match key {
                "name" => n.name = Some(p.opt_string()?),
                "data_type" => {
                    let offset = p.offset()?;
                    let v = p.int()?;
                    n.data_type = Some(i32::try_from(v).or_else(|_| {
                        p.fail_at(
                            offset,
                            ParseErrorKind::OutOfRange {
                                text: v.to_string(),
                                target: "int32".to_string(),
                            },
                        )
                    })?);
                }
                "storage" => {
                    let offset = p.offset()?;
                    n.storage_raw = Some(match p.ident("`raw` or `typed`")? {
                        "raw" => true,
                        "typed" => false,
                        other => {
                            return p.fail_at(
                                offset,
                                ParseErrorKind::Unknown {
                                    what: "storage",
                                    word: other.to_string(),
                                },
                            )
                        }
                    });
                }
                "raw_data" => {
                    let offset = p.offset()?;
                    n.raw_data = Some((offset, p.hex_bytes()?));
                }
                "data_location" => {
                    let offset = p.offset()?;
                    n.data_location = Some(match *p.peek()? {
                        Tok::Ident("unset") => {
                            p.next()?;
                            None
                        }
                        Tok::Ident("default") => {
                            p.next()?;
                            Some(0)
                        }
                        Tok::Ident("external") => {
                            p.next()?;
                            Some(1)
                        }
                        _ => {
                            let v = p.int()?;
                            Some(i32::try_from(v).or_else(|_| {
                                p.fail_at(
                                    offset,
                                    ParseErrorKind::OutOfRange {
                                        text: v.to_string(),
                                        target: "int32".to_string(),
                                    },
                                )
                            })?)
                        }
                    });
                }
                "segment" => {
                    let mut seg = Segment::default();
                    p.record(|p, key| {
                        match key {
                            "begin" => seg.begin = Some(p.int()?),
                            "end" => seg.end = Some(p.int()?),
                            _ => return Ok(false),
                        }
                        Ok(true)
                    })?;
                    n.segment = Some(seg);
                }
                "doc_string" => n.doc_string = Some(p.string("a string")?),
                "metadata_props" => n.metadata_props = p.string_map()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    pub(crate) fn function_notes(
        &mut self,
        blocks: Vec<AnnotationBlock>,
    ) -> PResult<FunctionNotes> {
        let mut n = FunctionNotes::default();
        self.annotation_entries(blocks, "function", FUNCTION_KEYS, |p, key| {
            match key {
                "name" => {
                    p.unset_word()?;
                    n.name_unset = true;
                }
                "opset_import" => n.opset_import = Some(p.opset_override()?),
                "metadata_props" => n.metadata_props = p.string_map()?,
                _ => return Parser::default_entry(p, key),
            }
            Ok(true)
        })?;
        Ok(n)
    }

    /// The word `unset`.
    fn unset_word(&mut self) -> PResult<()> {
        if *self.peek()? == Tok::Ident("unset") {
            self.next()?;
            Ok(())
        } else {
            self.expected("`unset`")
        }
    }

    /// `unset` or a string.
    pub(crate) fn opt_string(&mut self) -> PResult<Option<String>> {
        if *self.peek()? == Tok::Ident("unset") {
            self.next()?;
            Ok(None)
        } else {
            self.string("a string or `unset`").map(Some)
        }
    }

    /// `["key": "value", ...]`.
    pub(crate) fn string_map(&mut self) -> PResult<Vec<StringStringEntryProto>> {
        self.list(|p| {
            let key = p.string("a string key")?;
            p.expect(b':')?;
            let value = p.string("a string value")?;
            Ok(StringStringEntryProto {
                key: Some(key),
                value: Some(value),
            })
        })
    }

    /// `[item, ...]`, possibly empty.
    pub(crate) fn list<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        if self.eat(b']')? {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b']')?;
        Ok(items)
    }

    /// `{key: value, ...}`: `field(parser, key)` reads a known key's value and returns
    /// `false` for an unknown key.
    pub(crate) fn record(
        &mut self,
        mut field: impl FnMut(&mut Self, &str) -> PResult<bool>,
    ) -> PResult<()> {
        self.expect(b'{')?;
        let mut seen = BTreeSet::new();
        if self.eat(b'}')? {
            return Ok(());
        }
        loop {
            let offset = self.offset()?;
            let key = self.ident("a field name")?;
            self.expect(b':')?;
            if !seen.insert(key) {
                return self.fail_at(offset, ParseErrorKind::DuplicateAnnotation(key.to_string()));
            }
            if !field(self, key)? {
                return self.fail_at(
                    offset,
                    ParseErrorKind::Unknown {
                        what: "field",
                        word: key.to_string(),
                    },
                );
            }
            if !self.eat(b',')? {
                break;
            }
        }
        self.expect(b'}')
    }

    /// A string of hex digits as bytes.
    fn hex_bytes(&mut self) -> PResult<Vec<u8>> {
        let offset = self.offset()?;
        let text = self.string("a string of hex digits")?;
        let bad = || Fail {
            offset,
            kind: ParseErrorKind::BadEscape("expected an even number of hex digits".to_string()),
        };
        if text.len() % 2 != 0 {
            return Err(bad());
        }
        (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(bad)
            })
            .collect()
    }

    /// `[domain : version, ...]` where either side may be `unset`.
    fn opset_override(&mut self) -> PResult<(usize, Vec<OperatorSetIdProto>)> {
        let offset = self.offset()?;
        let list = self.list(|p| {
            let domain = p.opt_string()?;
            p.expect(b':')?;
            let version = if *p.peek()? == Tok::Ident("unset") {
                p.next()?;
                None
            } else {
                Some(p.int()?)
            };
            Ok(OperatorSetIdProto { domain, version })
        })?;
        Ok((offset, list))
    }

    fn training_info(&mut self) -> PResult<TrainingInfoProto> {
        let mut t = TrainingInfoProto::default();
        self.record(|p, key| {
            match key {
                "initialization" => {
                    let blocks = p.take_annotation()?;
                    t.initialization = Some(p.graph(blocks)?);
                }
                "algorithm" => {
                    let blocks = p.take_annotation()?;
                    t.algorithm = Some(p.graph(blocks)?);
                }
                "initialization_binding" => t.initialization_binding = p.string_map()?,
                "update_binding" => t.update_binding = p.string_map()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(t)
    }

    fn device_configuration(&mut self) -> PResult<DeviceConfigurationProto> {
        let mut c = DeviceConfigurationProto::default();
        self.record(|p, key| {
            match key {
                "name" => c.name = Some(p.string("a string")?),
                "num_devices" => c.num_devices = Some(p.int32()?),
                "device" => c.device = p.list(|p| p.string("a string"))?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(c)
    }

    fn quantization_annotation(&mut self) -> PResult<TensorAnnotation> {
        let mut q = TensorAnnotation::default();
        self.record(|p, key| {
            match key {
                "tensor_name" => q.tensor_name = Some(p.string("a string")?),
                "quant_parameter_tensor_names" => {
                    q.quant_parameter_tensor_names = p.string_map()?
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(q)
    }

    fn node_device_configuration(&mut self) -> PResult<NodeDeviceConfigurationProto> {
        let mut c = NodeDeviceConfigurationProto::default();
        self.record(|p, key| {
            match key {
                "configuration_id" => c.configuration_id = Some(p.string("a string")?),
                "sharding_spec" => c.sharding_spec = p.list(Parser::sharding_spec)?,
                "pipeline_stage" => c.pipeline_stage = Some(p.int32()?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(c)
    }

    fn sharding_spec(&mut self) -> PResult<ShardingSpecProto> {
        let mut s = ShardingSpecProto::default();
        self.record(|p, key| {
            match key {
                "tensor_name" => s.tensor_name = Some(p.string("a string")?),
                "device" => s.device = p.list(Parser::int)?,
                "index_to_device_group_map" => {
                    s.index_to_device_group_map = p.list(|p| {
                        let mut e = IntIntListEntryProto::default();
                        p.record(|p, key| {
                            match key {
                                "key" => e.key = Some(p.int()?),
                                "value" => e.value = p.list(Parser::int)?,
                                _ => return Ok(false),
                            }
                            Ok(true)
                        })?;
                        Ok(e)
                    })?
                }
                "sharded_dim" => s.sharded_dim = p.list(Parser::sharded_dim)?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(s)
    }

    fn sharded_dim(&mut self) -> PResult<ShardedDimProto> {
        let mut d = ShardedDimProto::default();
        self.record(|p, key| {
            match key {
                "axis" => d.axis = Some(p.int()?),
                "simple_sharding" => {
                    d.simple_sharding = p.list(|p| {
                        let mut s = SimpleShardedDimProto::default();
                        p.record(|p, key| {
                            match key {
                                "dim_value" => s.dim = Some(Dim::DimValue(p.int()?)),
                                "dim_param" => s.dim = Some(Dim::DimParam(p.string("a string")?)),
                                "num_shards" => s.num_shards = Some(p.int()?),
                                _ => return Ok(false),
                            }
                            Ok(true)
                        })?;
                        Ok(s)
                    })?
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(d)
    }

    /// A 32-bit integer.
    pub(crate) fn int32(&mut self) -> PResult<i32> {
        let offset = self.offset()?;
        let v = self.int()?;
        i32::try_from(v).or_else(|_| {
            self.fail_at(
                offset,
                ParseErrorKind::OutOfRange {
                    text: v.to_string(),
                    target: "int32".to_string(),
                },
            )
        })
    }
}
