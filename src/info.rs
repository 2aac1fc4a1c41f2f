//! `onnx-opt info`: a summary of a model (IR version, opsets, producer, graph signature, op
//! histogram, parameters, external data), computed from the proto without decoding tensors.

use std::collections::BTreeMap;
use std::fmt;

use onnx_proto::{
    tensor_proto::DataType, type_proto, GraphProto, ModelProto, TensorProto, TypeProto,
    ValueInfoProto,
};

/// What `onnx-opt info` prints, also used for the before/after table of `optimize`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// The IR version, when set.
    pub ir_version: Option<i64>,
    /// Opset imports: (domain, version).
    pub opsets: Vec<(String, i64)>,
    /// Producer name and version.
    pub producer: String,
    /// Graph inputs that are not initializers: (name, type).
    pub inputs: Vec<(String, String)>,
    /// Graph outputs: (name, type).
    pub outputs: Vec<(String, String)>,
    /// Nodes of the main graph.
    pub nodes: usize,
    /// Nodes inside subgraphs (If/Loop/Scan bodies), at any depth.
    pub subgraph_nodes: usize,
    /// Count per op type (`domain.Op` for non-default domains), main graph and subgraphs.
    pub op_histogram: BTreeMap<String, usize>,
    /// Initializers of the main graph.
    pub initializers: usize,
    /// Elements over all initializers (sparse ones count their stored values).
    pub parameters: u64,
    /// Bytes of tensor data stored in the model file.
    pub inline_bytes: u64,
    /// Bytes of tensor data stored in external files, and the number of such tensors.
    pub external_bytes: u64,
    /// Tensors stored in external files.
    pub external_tensors: usize,
    /// Model-local functions.
    pub functions: usize,
}

impl ModelInfo {
    /// Summarizes a model.
    pub fn of(model: &ModelProto) -> ModelInfo {
        let mut info = ModelInfo {
            ir_version: model.ir_version,
            opsets: model
                .opset_import
                .iter()
                .map(|o| {
                    (
                        display_domain(o.domain.as_deref().unwrap_or("")),
                        o.version.unwrap_or(0),
                    )
                })
                .collect(),
            producer: format!(
                "{} {}",
                model.producer_name.as_deref().unwrap_or(""),
                model.producer_version.as_deref().unwrap_or("")
            )
            .trim()
            .to_string(),
            functions: model.functions.len(),
            ..ModelInfo::default()
        };
        if let Some(g) = &model.graph {
            info.inputs = g.input.iter().map(signature).collect();
            info.outputs = g.output.iter().map(signature).collect();
            info.nodes = g.node.len();
            info.initializers = g.initializer.len() + g.sparse_initializer.len();
            count_graph(g, &mut info, 0);
        }
        info
    }
}

fn count_graph(g: &GraphProto, info: &mut ModelInfo, depth: usize) {
    for t in &g.initializer {
        count_tensor(t, info);
    }
    for s in &g.sparse_initializer {
        if let Some(v) = &s.values {
            count_tensor(v, info);
        }
    }
    for n in &g.node {
        if depth > 0 {
            info.subgraph_nodes += 1;
        }
        let key = match n.domain.as_deref() {
            None | Some("") | Some("ai.onnx") => n.op_type().to_string(),
            Some(d) => format!("{d}.{}", n.op_type()),
        };
        *info.op_histogram.entry(key).or_default() += 1;
        for a in &n.attribute {
            for sub in a.g.iter().chain(a.graphs.iter()) {
                count_graph(sub, info, depth + 1);
            }
        }
    }
}

fn count_tensor(t: &TensorProto, info: &mut ModelInfo) {
    let elems = t
        .dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?));
    info.parameters = info.parameters.saturating_add(elems.unwrap_or(0));
    if onnx_proto::is_external(t) {
        info.external_tensors += 1;
        let len = t
            .external_data
            .iter()
            .find(|e| e.key.as_deref() == Some("length"))
            .and_then(|e| e.value.as_deref()?.parse::<u64>().ok());
        info.external_bytes += len.unwrap_or(0);
        return;
    }
    let typed = t.float_data.len() * 4
        + t.int32_data.len() * 4
        + t.int64_data.len() * 8
        + t.double_data.len() * 8
        + t.uint64_data.len() * 8
        + t.string_data.iter().map(|s| s.len()).sum::<usize>();
    info.inline_bytes += (t.raw_data.as_ref().map_or(0, |r| r.len()) + typed) as u64;
}

fn display_domain(d: &str) -> String {
    if d.is_empty() {
        "ai.onnx".into()
    } else {
        d.into()
    }
}

fn signature(v: &ValueInfoProto) -> (String, String) {
    (
        v.name.clone().unwrap_or_default(),
        v.r#type.as_ref().map_or_else(|| "?".into(), type_to_string),
    )
}

/// Renders a type as `float[N,3]`, `seq(int64[])`, `optional(...)`, `map(int64, float[])`.
pub fn type_to_string(t: &TypeProto) -> String {
    match &t.value {
        Some(type_proto::Value::TensorType(tt)) => {
            tensor_type_string(tt.elem_type, tt.shape.as_ref())
        }
        Some(type_proto::Value::SparseTensorType(tt)) => {
            format!(
                "sparse {}",
                tensor_type_string(tt.elem_type, tt.shape.as_ref())
            )
        }
        Some(type_proto::Value::SequenceType(s)) => format!(
            "seq({})",
            s.elem_type
                .as_deref()
                .map_or_else(|| "?".into(), type_to_string)
        ),
        Some(type_proto::Value::OptionalType(s)) => format!(
            "optional({})",
            s.elem_type
                .as_deref()
                .map_or_else(|| "?".into(), type_to_string)
        ),
        Some(type_proto::Value::MapType(m)) => format!(
            "map({}, {})",
            elem_type_name(m.key_type),
            m.value_type
                .as_deref()
                .map_or_else(|| "?".into(), type_to_string)
        ),
        Some(type_proto::Value::OpaqueType(o)) => {
            format!("opaque({}.{})", o.domain(), o.name())
        }
        None => "?".into(),
    }
}

fn tensor_type_string(elem: Option<i32>, shape: Option<&onnx_proto::TensorShapeProto>) -> String {
    let name = elem_type_name(elem);
    match shape {
        None => format!("{name}[?]"),
        Some(s) => {
            let dims: Vec<String> = s
                .dim
                .iter()
                .map(|d| match &d.value {
                    Some(onnx_proto::tensor_shape_proto::dimension::Value::DimValue(v)) => {
                        v.to_string()
                    }
                    Some(onnx_proto::tensor_shape_proto::dimension::Value::DimParam(p)) => {
                        p.clone()
                    }
                    None => "?".into(),
                })
                .collect();
            format!("{name}[{}]", dims.join(","))
        }
    }
}

/// The lower-case ONNX name of an element type (`float`, `int64`, `float8e4m3fn`, ...).
pub fn elem_type_name(elem: Option<i32>) -> String {
    match elem.and_then(|e| DataType::try_from(e).ok()) {
        Some(DataType::Undefined) | None => format!("type{}", elem.unwrap_or(0)),
        Some(dt) => dt.as_str_name().to_ascii_lowercase(),
    }
}

impl fmt::Display for ModelInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ir_version {
            Some(v) => writeln!(f, "ir_version: {v}")?,
            None => writeln!(f, "ir_version: (missing)")?,
        }
        let opsets: Vec<String> = self
            .opsets
            .iter()
            .map(|(d, v)| format!("{d} {v}"))
            .collect();
        writeln!(f, "opsets: {}", opsets.join(", "))?;
        writeln!(
            f,
            "producer: {}",
            if self.producer.is_empty() {
                "(none)"
            } else {
                &self.producer
            }
        )?;
        writeln!(f, "inputs:")?;
        for (n, t) in &self.inputs {
            writeln!(f, "  {n}: {t}")?;
        }
        writeln!(f, "outputs:")?;
        for (n, t) in &self.outputs {
            writeln!(f, "  {n}: {t}")?;
        }
        write!(f, "nodes: {}", self.nodes)?;
        if self.subgraph_nodes > 0 {
            write!(f, " (+{} in subgraphs)", self.subgraph_nodes)?;
        }
        writeln!(f)?;
        for (op, n) in &self.op_histogram {
            writeln!(f, "  {op:<24} {n}")?;
        }
        writeln!(
            f,
            "initializers: {} ({} parameters, {} bytes inline)",
            self.initializers, self.parameters, self.inline_bytes
        )?;
        if self.external_tensors > 0 {
            writeln!(
                f,
                "external data: {} tensors, {} bytes",
                self.external_tensors, self.external_bytes
            )?;
        } else {
            writeln!(f, "external data: none")?;
        }
        writeln!(f, "functions: {}", self.functions)
    }
}
