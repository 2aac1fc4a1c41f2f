//! The printer: writes models, graphs, functions and nodes in the text syntax, byte for byte
//! as onnx 1.23.2's C++ printer (`onnx.printer.to_text`) where that printer is complete, plus
//! the annotations and extensions that let the parser rebuild the exact proto (see the
//! `syntax` module docs).
//!
//! Printing is one pass over the proto, linear in its size; tensor data streams straight
//! into the output buffer.

mod annotate;
mod tensor;
mod types;

use onnx_proto::{
    attribute_proto::AttributeType, AttributeProto, FunctionProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, StringStringEntryProto, ValueInfoProto,
};

use crate::defaults::{Defaults, Tally};
use crate::names::{self, is_identifier};
use crate::number::write_f32;
use annotate::Annotation;

/// Options of the printer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// Print `...` instead of the data of tensors with more than this many elements. The
    /// result is for reading only: the parser refuses elided tensors. `None` (the default)
    /// prints every tensor in full.
    pub elide_tensors_above: Option<usize>,
}

/// Prints a model.
///
/// ```
/// let text = "<ir_version: 8, opset_import: [\"\" : 17]>\n\
///             g (float[N,3] X) => (float[N,3] Y) {\n   Y = Relu (X)\n}";
/// let model = onnx_text::parse_model(text).unwrap();
/// let printed = onnx_text::print_model(&model, &Default::default());
/// assert_eq!(printed, "<\n   ir_version: 8,\n   opset_import: [\"\" : 17]\n>\n\
///                      g (float[N,3] X) => (float[N,3] Y) {\n   Y = Relu (X)\n}");
/// assert_eq!(onnx_text::parse_model(&printed).unwrap(), model);
/// ```
pub fn print_model(model: &ModelProto, options: &PrintOptions) -> String {
    let defaults = Tally::of_model(model).defaults();
    let mut p = Printer::new(options, defaults);
    p.model(model);
    p.out
}

/// Prints a graph on its own (as `onnx.printer.to_text(graph)`).
pub fn print_graph(graph: &GraphProto, options: &PrintOptions) -> String {
    let defaults = Tally::of_graph(graph).defaults();
    let mut p = Printer::new(options, defaults);
    let mut ann = p.graph_annotation(graph);
    ann.defaults(defaults);
    p.lines(&ann, 0);
    p.graph(graph);
    p.out
}

/// Prints a function on its own (as `onnx.printer.to_text(function)`).
pub fn print_function(function: &FunctionProto, options: &PrintOptions) -> String {
    let defaults = Tally::of_function(function).defaults();
    let mut p = Printer::new(options, defaults);
    p.function(function, true);
    p.out
}

/// Prints one node, without indentation or a final line break (the form `parse_node` reads).
pub fn print_node(node: &NodeProto, options: &PrintOptions) -> String {
    let mut p = Printer::new(options, Defaults::default());
    p.indent = 0;
    let ann = p.node_annotation(node);
    p.lines(&ann, 0);
    p.node(node);
    if p.out.ends_with('\n') {
        p.out.pop();
    }
    p.out
}

/// The printer's state: the output, the current indentation (onnx's `indent_level`), and
/// the presence defaults of the model being printed.
pub(crate) struct Printer<'o> {
    pub(crate) out: String,
    pub(crate) indent: usize,
    pub(crate) options: &'o PrintOptions,
    pub(crate) defaults: Defaults,
}

impl<'o> Printer<'o> {
    pub(crate) fn new(options: &'o PrintOptions, defaults: Defaults) -> Self {
        Printer {
            out: String::new(),
            indent: 3,
            options,
            defaults,
        }
    }

    /// A printer for text nested in an annotation (same options and defaults).
    pub(crate) fn nested(&self) -> Printer<'o> {
        Printer::new(self.options, self.defaults)
    }

    pub(crate) fn spaces(&mut self, n: usize) {
        for _ in 0..n {
            self.out.push(' ');
        }
    }

    /// A name: bare when it is an identifier, quoted otherwise (onnx's `printId`).
    pub(crate) fn id(&mut self, name: &str) {
        if is_identifier(name) {
            self.out.push_str(name);
        } else {
            self.quoted(name.as_bytes());
        }
    }

    /// A name where a type may also start: type words are quoted too, so that they read
    /// as names (onnx's parser reads an unquoted type word there as a type).
    pub(crate) fn id_not_type(&mut self, name: &str) {
        if names::is_standard_type_word(name) || names::is_extension_type_word(name) {
            self.quoted(name.as_bytes());
        } else {
            self.id(name);
        }
    }

    /// A string literal (see [`push_quoted`]).
    pub(crate) fn quoted(&mut self, bytes: &[u8]) {
        push_quoted(&mut self.out, bytes);
    }

    /// Writes an annotation as whole lines at `indent` (for elements that start a line).
    pub(crate) fn lines(&mut self, ann: &Annotation, indent: usize) {
        if ann.is_empty() {
            return;
        }
        for line in ann.content().split('\n') {
            self.spaces(indent);
            self.out.push_str("#@ ");
            self.out.push_str(line);
            self.out.push('\n');
        }
    }

    /// Writes an annotation for an element in the middle of a line: the annotation goes on
    /// lines of its own and the element continues on the next line.
    pub(crate) fn inline(&mut self, ann: &Annotation) {
        if ann.is_empty() {
            return;
        }
        self.out.push('\n');
        let indent = self.indent;
        self.lines(ann, indent);
        self.spaces(indent);
    }

    fn model(&mut self, m: &ModelProto) {
        let mut ann = self.model_annotation(m);
        ann.defaults(self.defaults);
        self.lines(&ann, 0);
        self.out.push_str("<\n");
        let mut first = true;
        if let Some(v) = m.ir_version {
            self.header_key(&mut first, "ir_version");
            self.out.push_str(&v.to_string());
        }
        self.header_key(&mut first, "opset_import");
        self.opsets(&m.opset_import, ", ");
        let strings = [
            ("producer_name", &m.producer_name),
            ("producer_version", &m.producer_version),
            ("domain", &m.domain),
        ];
        for (key, value) in strings {
            if let Some(v) = value {
                self.header_key(&mut first, key);
                self.quoted(v.as_bytes());
            }
        }
        if let Some(v) = m.model_version {
            self.header_key(&mut first, "model_version");
            self.out.push_str(&v.to_string());
        }
        if let Some(v) = &m.doc_string {
            self.header_key(&mut first, "doc_string");
            self.quoted(v.as_bytes());
        }
        if !m.metadata_props.is_empty() {
            self.header_key(&mut first, "metadata_props");
            self.string_map(&m.metadata_props);
        }
        self.out.push_str("\n>\n");
        let placeholder = GraphProto::default();
        let graph = m.graph.as_ref().unwrap_or(&placeholder);
        let gann = self.graph_annotation(graph);
        self.lines(&gann, 0);
        self.graph(graph);
        for f in &m.functions {
            self.out.push('\n');
            self.function(f, false);
        }
    }

    fn header_key(&mut self, first: &mut bool, key: &str) {
        if !*first {
            self.out.push_str(",\n");
        }
        *first = false;
        self.out.push_str("   ");
        self.out.push_str(key);
        self.out.push_str(": ");
    }

    pub(crate) fn opsets(&mut self, opsets: &[OperatorSetIdProto], sep: &str) {
        self.out.push('[');
        for (i, o) in opsets.iter().enumerate() {
            if i > 0 {
                self.out.push_str(sep);
            }
            self.quoted(o.domain.as_deref().unwrap_or("").as_bytes());
            self.out.push_str(" : ");
            self.out.push_str(&o.version.unwrap_or(0).to_string());
        }
        self.out.push(']');
    }

    /// `["key": "value", ...]` (metadata and external-data entries).
    pub(crate) fn string_map(&mut self, entries: &[StringStringEntryProto]) {
        self.out.push('[');
        for (i, e) in entries.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.quoted(e.key.as_deref().unwrap_or("").as_bytes());
            self.out.push_str(": ");
            self.quoted(e.value.as_deref().unwrap_or("").as_bytes());
        }
        self.out.push(']');
    }

    /// A graph (its annotation, if any, is written by the caller).
    pub(crate) fn graph(&mut self, g: &GraphProto) {
        self.graph_named(g, false);
    }

    /// A graph, with its name quoted even when it is an identifier if `quote_name`.
    fn graph_named(&mut self, g: &GraphProto, quote_name: bool) {
        let name = g.name.as_deref().unwrap_or("");
        if quote_name {
            self.quoted(name.as_bytes());
        } else {
            self.id(name);
        }
        self.out.push(' ');
        self.value_infos(&g.input);
        self.out.push_str(" => ");
        self.value_infos(&g.output);
        self.out.push(' ');
        if !g.initializer.is_empty() || !g.value_info.is_empty() {
            self.out.push('\n');
            let indent = self.indent;
            self.spaces(indent);
            self.out.push('<');
            let mut sep = "";
            for init in &g.initializer {
                self.out.push_str(sep);
                let ann = self.tensor_annotation(init, true);
                self.inline(&ann);
                self.tensor(init, true);
                sep = ", ";
            }
            for vi in &g.value_info {
                self.out.push_str(sep);
                self.value_info(vi);
                sep = ", ";
            }
            self.out.push_str(">\n");
        }
        self.nodes(&g.node);
    }

    pub(crate) fn value_infos(&mut self, list: &[ValueInfoProto]) {
        self.out.push('(');
        for (i, vi) in list.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.value_info(vi);
        }
        self.out.push(')');
    }

    fn value_info(&mut self, vi: &ValueInfoProto) {
        let ann = self.value_info_annotation(vi);
        self.inline(&ann);
        let name = vi.name.as_deref().unwrap_or("");
        match vi.r#type.as_ref().filter(|t| t.value.is_some()) {
            Some(t) => {
                self.type_proto(t);
                self.out.push(' ');
                self.id(name);
            }
            None => {
                self.out.push(' ');
                self.id_not_type(name);
            }
        }
    }

    fn nodes(&mut self, nodes: &[NodeProto]) {
        self.out.push_str("{\n");
        for n in nodes {
            let ann = self.node_annotation(n);
            let indent = self.indent;
            self.lines(&ann, indent);
            self.node(n);
        }
        if self.indent > 3 {
            let closing = (self.indent - 3).max(3);
            self.spaces(closing);
        }
        self.out.push('}');
    }

    fn node(&mut self, n: &NodeProto) {
        let indent = self.indent;
        self.spaces(indent);
        if let Some(name) = &n.name {
            self.out.push('[');
            self.id(name);
            self.out.push_str("] ");
        }
        for (i, o) in n.output.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.id(o);
        }
        self.out.push_str(" = ");
        if let Some(domain) = n.domain.as_deref().filter(|d| !d.is_empty()) {
            if names::is_dotted_identifier(domain) {
                self.out.push_str(domain);
            } else {
                self.quoted(domain.as_bytes());
            }
            self.out.push('.');
        }
        match n.op_type.as_deref() {
            Some(op) if !op.is_empty() => self.id(op),
            // An empty operator after a domain must still be a token.
            _ if n.domain.as_deref().is_some_and(|d| !d.is_empty()) => self.out.push_str("\"\""),
            _ => {}
        }
        if let Some(overload) = n.overload.as_deref().filter(|o| !o.is_empty()) {
            self.out.push(':');
            self.id(overload);
        }
        let has_subgraph = n
            .attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty());
        if !has_subgraph && !n.attribute.is_empty() {
            self.attributes(&n.attribute);
        }
        self.out.push_str(" (");
        for (i, input) in n.input.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.id(input);
        }
        self.out.push(')');
        if has_subgraph && !n.attribute.is_empty() {
            self.attributes(&n.attribute);
        }
        self.out.push('\n');
    }

    fn attributes(&mut self, attrs: &[AttributeProto]) {
        self.out.push_str(" <");
        for (i, a) in attrs.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.attribute(a);
        }
        self.out.push('>');
    }

    pub(crate) fn attribute(&mut self, a: &AttributeProto) {
        let ann = self.attribute_annotation(a);
        self.inline(&ann);
        self.id(a.name.as_deref().unwrap_or(""));
        let ty = effective_attribute_type(a);
        self.out.push_str(": ");
        self.out
            .push_str(names::attr_type_name(ty).unwrap_or("ints"));
        self.out.push_str(" = ");
        if let Some(r) = &a.ref_attr_name {
            self.out.push('@');
            self.id(r);
            return;
        }
        self.attribute_value(a, ty);
    }

    fn attribute_value(&mut self, a: &AttributeProto, ty: AttributeType) {
        match ty {
            AttributeType::Int => self.out.push_str(&a.i.unwrap_or(0).to_string()),
            AttributeType::Float => write_f32(&mut self.out, a.f.unwrap_or(0.0)),
            AttributeType::String => self.quoted(a.s.as_deref().unwrap_or(&[])),
            AttributeType::Tensor => {
                let placeholder = Default::default();
                let t = a.t.as_ref().unwrap_or(&placeholder);
                let ann = self.tensor_annotation(t, false);
                self.inline(&ann);
                self.tensor(t, false);
            }
            AttributeType::Graph => {
                let placeholder = Default::default();
                self.indent += 3;
                self.graph_value(a.g.as_ref().unwrap_or(&placeholder));
                self.indent -= 3;
            }
            AttributeType::SparseTensor => {
                let placeholder = Default::default();
                self.sparse_tensor(a.sparse_tensor.as_ref().unwrap_or(&placeholder));
            }
            AttributeType::TypeProto => {
                if let Some(tp) = &a.tp {
                    self.type_proto(tp);
                }
            }
            AttributeType::Floats => {
                self.out.push('[');
                for (i, f) in a.floats.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    write_f32(&mut self.out, *f);
                }
                self.out.push(']');
            }
            AttributeType::Ints => {
                let list: Vec<String> = a.ints.iter().map(i64::to_string).collect();
                self.out.push('[');
                self.out.push_str(&list.join(", "));
                self.out.push(']');
            }
            AttributeType::Strings => {
                self.out.push('[');
                for (i, s) in a.strings.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.quoted(s);
                }
                self.out.push(']');
            }
            AttributeType::Tensors => {
                self.out.push('[');
                for (i, t) in a.tensors.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    let ann = self.tensor_annotation(t, false);
                    self.inline(&ann);
                    self.tensor(t, false);
                }
                self.out.push(']');
            }
            AttributeType::Graphs => {
                self.indent += 3;
                self.out.push('[');
                for (i, g) in a.graphs.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.graph_value(g);
                }
                self.out.push(']');
                self.indent -= 3;
            }
            AttributeType::SparseTensors => {
                self.out.push('[');
                for (i, s) in a.sparse_tensors.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.sparse_tensor(s);
                }
                self.out.push(']');
            }
            AttributeType::TypeProtos => {
                self.out.push('[');
                for (i, t) in a.type_protos.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.type_proto(t);
                }
                self.out.push(']');
            }
            AttributeType::Undefined => {}
        }
    }

    /// A graph in value position (attributes, annotations): its annotation goes on lines
    /// of its own, and a name that could read as a type or a float is quoted.
    pub(crate) fn graph_value(&mut self, g: &GraphProto) {
        let ann = self.graph_annotation(g);
        self.inline(&ann);
        let name = g.name.as_deref().unwrap_or("");
        let quote = names::is_float_word(name)
            || names::is_standard_type_word(name)
            || names::is_extension_type_word(name);
        self.graph_named(g, quote);
    }

    pub(crate) fn function(&mut self, f: &FunctionProto, standalone: bool) {
        let mut ann = self.function_annotation(f);
        if standalone {
            ann.defaults(self.defaults);
        }
        self.lines(&ann, 0);
        self.out.push_str("<\n");
        // Domain and overload print exactly when present (onnx's parser sets them exactly
        // when written); onnx's printer always writes the domain and skips an empty overload.
        if let Some(d) = &f.domain {
            self.out.push_str("  domain: ");
            self.quoted(d.as_bytes());
            self.out.push_str(",\n");
        }
        if let Some(o) = &f.overload {
            self.out.push_str("  overload: ");
            self.quoted(o.as_bytes());
            self.out.push_str(",\n");
        }
        self.out.push_str("  opset_import: ");
        self.opsets(&f.opset_import, ",");
        if let Some(doc) = &f.doc_string {
            self.out.push_str(",\n  doc_string: ");
            self.quoted(doc.as_bytes());
        }
        self.out.push_str("\n>\n");
        self.id(f.name.as_deref().unwrap_or(""));
        self.out.push(' ');
        if !f.attribute.is_empty() || !f.attribute_proto.is_empty() {
            self.out.push('<');
            let mut sep = "";
            for a in &f.attribute {
                self.out.push_str(sep);
                self.id(a);
                sep = ",";
            }
            for a in &f.attribute_proto {
                self.out.push_str(sep);
                self.attribute(a);
                sep = ",";
            }
            self.out.push('>');
        }
        self.function_names(&f.input);
        self.out.push_str(" => ");
        self.function_names(&f.output);
        if !f.value_info.is_empty() {
            self.out.push_str(" <");
            for (i, vi) in f.value_info.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                self.value_info(vi);
            }
            self.out.push('>');
        }
        self.out.push('\n');
        self.nodes(&f.node);
    }

    fn function_names(&mut self, names: &[String]) {
        self.out.push('(');
        for (i, n) in names.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.id_not_type(n);
        }
        self.out.push(')');
    }
}

/// Writes a string literal: `\` and `"` are escaped (as onnx's `printQuoted`); bytes that
/// are not UTF-8 are written as `\xHH` (an extension).
pub(crate) fn push_quoted(out: &mut String, bytes: &[u8]) {
    use std::fmt::Write;
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || c == '"' {
                out.push('\\');
            }
            out.push(c);
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('"');
}

/// The attribute type the printer writes: the declared one when it is known, otherwise the
/// one the populated field implies (the declared type is restored by an annotation when it
/// was absent; see `normalize_for_text` for unknown numbers).
pub(crate) fn effective_attribute_type(a: &AttributeProto) -> AttributeType {
    if let Some(t) = a
        .r#type
        .and_then(|t| AttributeType::try_from(t).ok())
        .filter(|t| *t != AttributeType::Undefined)
    {
        return t;
    }
    infer_attribute_type(a)
}

/// The attribute type implied by which value field is populated (INTS when none is).
pub(crate) fn infer_attribute_type(a: &AttributeProto) -> AttributeType {
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if a.sparse_tensor.is_some() {
        AttributeType::SparseTensor
    } else if a.tp.is_some() {
        AttributeType::TypeProto
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else if !a.sparse_tensors.is_empty() {
        AttributeType::SparseTensors
    } else if !a.type_protos.is_empty() {
        AttributeType::TypeProtos
    } else {
        AttributeType::Ints
    }
}
