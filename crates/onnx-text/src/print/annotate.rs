//! Building annotations: for each element, the `key: value` entries that carry what the
//! standard syntax cannot say (presence of empty fields, storage, doc strings, metadata,
//! rarely used messages). An element gets an annotation only when it needs one.

use std::fmt::Write;

use onnx_proto::{
    simple_sharded_dim_proto::Dim, tensor_proto::DataLocation, tensor_shape_proto::Dimension,
    type_proto::Value, AttributeProto, DeviceConfigurationProto, FunctionProto, GraphProto,
    IntIntListEntryProto, ModelProto, NodeDeviceConfigurationProto, NodeProto, OperatorSetIdProto,
    ShardedDimProto, ShardingSpecProto, SimpleShardedDimProto, StringStringEntryProto,
    TensorAnnotation, TensorProto, TrainingInfoProto, ValueInfoProto,
};

use super::tensor::{data_form, DataForm};
use super::{push_quoted, Printer};
use crate::defaults::{is_external_form, Defaults};
use crate::names::elem_type_name;
use crate::tensor_data::raw_elem;

/// The entries of one annotation, in a fixed order; values are already in text form.
#[derive(Debug, Default)]
pub(crate) struct Annotation {
    entries: Vec<(&'static str, String)>,
}

impl Annotation {
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn push(&mut self, key: &'static str, value: String) {
        self.entries.push((key, value));
    }

    /// The annotation text: one `key: value` entry per line (values may span lines).
    pub(crate) fn content(&self) -> String {
        let mut s = String::new();
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                s.push('\n');
            }
            s.push_str(k);
            s.push_str(": ");
            s.push_str(v);
        }
        s
    }

    /// Adds the `default_*` entries that differ from the base defaults (first in order).
    pub(crate) fn defaults(&mut self, d: Defaults) {
        let mut front = Vec::new();
        if d.node_domain_unset {
            front.push(("default_node_domain", "unset".to_string()));
        }
        if d.tensor_name_unset {
            front.push(("default_tensor_name", "unset".to_string()));
        }
        if d.tensor_storage_raw {
            front.push(("default_tensor_storage", "raw".to_string()));
        }
        front.append(&mut self.entries);
        self.entries = front;
    }
}

/// A string literal as text.
fn quote(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    push_quoted(&mut s, bytes);
    s
}

fn opt_string(value: &Option<String>) -> String {
    match value {
        Some(v) => quote(v.as_bytes()),
        None => "unset".to_string(),
    }
}

fn string_map(entries: &[StringStringEntryProto]) -> String {
    let options = Default::default();
    let mut p = Printer::new(&options, Defaults::default());
    p.string_map(entries);
    p.out
}

fn int_list(values: &[i64]) -> String {
    let items: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// `{key: value, ...}` from the entries that are present.
fn record(fields: Vec<(&str, Option<String>)>) -> String {
    let items: Vec<String> = fields
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}: {v}")))
        .collect();
    format!("{{{}}}", items.join(", "))
}

fn list(items: Vec<String>) -> String {
    format!("[{}]", items.join(", "))
}

fn non_empty<T>(items: &[T], render: impl Fn(&[T]) -> String) -> Option<String> {
    (!items.is_empty()).then(|| render(items))
}

impl Printer<'_> {
    fn common(&self, ann: &mut Annotation, doc: &Option<String>, meta: &[StringStringEntryProto]) {
        if let Some(d) = doc {
            ann.push("doc_string", quote(d.as_bytes()));
        }
        if !meta.is_empty() {
            ann.push("metadata_props", string_map(meta));
        }
    }

    pub(crate) fn model_annotation(&self, m: &ModelProto) -> Annotation {
        let mut ann = Annotation::default();
        if m.graph.is_none() {
            ann.push("graph", "unset".to_string());
        }
        if let Some(v) = opset_override(&m.opset_import) {
            ann.push("opset_import", v);
        }
        if !m.training_info.is_empty() {
            let items = m
                .training_info
                .iter()
                .map(|t| self.training_info(t))
                .collect();
            ann.push("training_info", list(items));
        }
        if !m.configuration.is_empty() {
            let items = m.configuration.iter().map(device_configuration).collect();
            ann.push("configuration", list(items));
        }
        ann
    }

    fn training_info(&self, t: &TrainingInfoProto) -> String {
        record(vec![
            (
                "initialization",
                t.initialization.as_ref().map(|g| self.graph_text(g)),
            ),
            (
                "algorithm",
                t.algorithm.as_ref().map(|g| self.graph_text(g)),
            ),
            (
                "initialization_binding",
                non_empty(&t.initialization_binding, string_map),
            ),
            ("update_binding", non_empty(&t.update_binding, string_map)),
        ])
    }

    /// A graph as a value inside an annotation.
    fn graph_text(&self, g: &GraphProto) -> String {
        let mut p = self.nested();
        p.graph_value(g);
        p.out
    }

    pub(crate) fn graph_annotation(&self, g: &GraphProto) -> Annotation {
        let mut ann = Annotation::default();
        if g.name.is_none() {
            ann.push("name", "unset".to_string());
        }
        self.common(&mut ann, &g.doc_string, &g.metadata_props);
        if !g.sparse_initializer.is_empty() {
            let items = g
                .sparse_initializer
                .iter()
                .map(|s| {
                    let mut p = self.nested();
                    p.sparse_tensor(s);
                    p.out
                })
                .collect();
            ann.push("sparse_initializer", list(items));
        }
        if !g.quantization_annotation.is_empty() {
            let items = g.quantization_annotation.iter().map(quantization).collect();
            ann.push("quantization_annotation", list(items));
        }
        ann
    }

    pub(crate) fn node_annotation(&self, n: &NodeProto) -> Annotation {
        let mut ann = Annotation::default();
        match n.domain.as_deref() {
            None if !self.defaults.node_domain_unset => ann.push("domain", "unset".into()),
            Some("") if self.defaults.node_domain_unset => ann.push("domain", "\"\"".into()),
            _ => {}
        }
        if n.op_type.is_none() {
            ann.push("op_type", "unset".to_string());
        }
        if n.overload.as_deref() == Some("") {
            ann.push("overload", "\"\"".to_string());
        }
        self.common(&mut ann, &n.doc_string, &n.metadata_props);
        if !n.device_configurations.is_empty() {
            let items = n
                .device_configurations
                .iter()
                .map(node_device_configuration)
                .collect();
            ann.push("device_configurations", list(items));
        }
        ann
    }

    pub(crate) fn attribute_annotation(&self, a: &AttributeProto) -> Annotation {
        let mut ann = Annotation::default();
        if a.name.is_none() {
            ann.push("name", "unset".to_string());
        }
        if a.r#type.is_none() {
            ann.push("type", "unset".to_string());
        }
        if let Some(d) = &a.doc_string {
            ann.push("doc_string", quote(d.as_bytes()));
        }
        ann
    }

    pub(crate) fn value_info_annotation(&self, vi: &ValueInfoProto) -> Annotation {
        let mut ann = Annotation::default();
        if vi.name.is_none() {
            ann.push("name", "unset".to_string());
        }
        self.common(&mut ann, &vi.doc_string, &vi.metadata_props);
        if let Some(t) = &vi.r#type {
            if let Some(d) = &t.denotation {
                ann.push("denotation", quote(d.as_bytes()));
            }
            let dims: &[Dimension] = match &t.value {
                Some(Value::TensorType(tt)) => tt.shape.as_ref().map_or(&[], |s| &s.dim),
                Some(Value::SparseTensorType(st)) => st.shape.as_ref().map_or(&[], |s| &s.dim),
                _ => &[],
            };
            if dims.iter().any(|d| d.denotation.is_some()) {
                let items = dims.iter().map(|d| opt_string(&d.denotation)).collect();
                ann.push("dim_denotation", list(items));
            }
        }
        ann
    }

    /// The annotation of a tensor value. `initializer`: the tensor prints with its name
    /// always (`<float[2] w = {...}>`); otherwise a missing or empty name prints nothing.
    pub(crate) fn tensor_annotation(&self, t: &TensorProto, initializer: bool) -> Annotation {
        let mut ann = Annotation::default();
        match t.name.as_deref() {
            None if initializer || !self.defaults.tensor_name_unset => {
                ann.push("name", "unset".to_string())
            }
            Some("") if !initializer && self.defaults.tensor_name_unset => {
                ann.push("name", "\"\"".to_string())
            }
            _ => {}
        }
        if let Some(code) = t.data_type.filter(|c| elem_type_name(*c).is_none()) {
            ann.push("data_type", code.to_string());
        }
        let form = data_form(t);
        let raw_capable = t.data_type.and_then(raw_elem).is_some();
        match form {
            DataForm::Raw(_) if !self.defaults.tensor_storage_raw => {
                ann.push("storage", "raw".to_string())
            }
            DataForm::Typed(_) if raw_capable && self.defaults.tensor_storage_raw => {
                ann.push("storage", "typed".to_string())
            }
            DataForm::RawHex => {
                let raw = t.raw_data.as_deref().unwrap_or(&[]);
                let mut hex = String::with_capacity(raw.len() * 2 + 2);
                hex.push('"');
                for b in raw {
                    let _ = write!(hex, "{b:02x}");
                }
                hex.push('"');
                ann.push("raw_data", hex);
            }
            _ => {}
        }
        let implied_location = is_external_form(t).then_some(DataLocation::External as i32);
        if t.data_location != implied_location {
            let value = match t.data_location {
                None => "unset".to_string(),
                Some(0) => "default".to_string(),
                Some(1) => "external".to_string(),
                Some(other) => other.to_string(),
            };
            ann.push("data_location", value);
        }
        if let Some(s) = &t.segment {
            let seg = record(vec![
                ("begin", s.begin.map(|v| v.to_string())),
                ("end", s.end.map(|v| v.to_string())),
            ]);
            ann.push("segment", seg);
        }
        self.common(&mut ann, &t.doc_string, &t.metadata_props);
        ann
    }

    pub(crate) fn function_annotation(&self, f: &FunctionProto) -> Annotation {
        let mut ann = Annotation::default();
        if f.name.is_none() {
            ann.push("name", "unset".to_string());
        }
        if let Some(v) = opset_override(&f.opset_import) {
            ann.push("opset_import", v);
        }
        if !f.metadata_props.is_empty() {
            ann.push("metadata_props", string_map(&f.metadata_props));
        }
        ann
    }
}

/// The exact opset list when some entry lacks its domain or version (the header can only
/// show `""` and `0` for those).
fn opset_override(opsets: &[OperatorSetIdProto]) -> Option<String> {
    if opsets
        .iter()
        .all(|o| o.domain.is_some() && o.version.is_some())
    {
        return None;
    }
    let items = opsets
        .iter()
        .map(|o| {
            let version = o.version.map_or("unset".to_string(), |v| v.to_string());
            format!("{} : {version}", opt_string(&o.domain))
        })
        .collect();
    Some(list(items))
}

fn quantization(q: &TensorAnnotation) -> String {
    record(vec![
        (
            "tensor_name",
            q.tensor_name.as_ref().map(|s| quote(s.as_bytes())),
        ),
        (
            "quant_parameter_tensor_names",
            non_empty(&q.quant_parameter_tensor_names, string_map),
        ),
    ])
}

fn device_configuration(c: &DeviceConfigurationProto) -> String {
    record(vec![
        ("name", c.name.as_ref().map(|s| quote(s.as_bytes()))),
        ("num_devices", c.num_devices.map(|v| v.to_string())),
        (
            "device",
            non_empty(&c.device, |d| {
                list(d.iter().map(|s| quote(s.as_bytes())).collect())
            }),
        ),
    ])
}

fn node_device_configuration(c: &NodeDeviceConfigurationProto) -> String {
    record(vec![
        (
            "configuration_id",
            c.configuration_id.as_ref().map(|s| quote(s.as_bytes())),
        ),
        (
            "sharding_spec",
            non_empty(&c.sharding_spec, |specs| {
                list(specs.iter().map(sharding_spec).collect())
            }),
        ),
        ("pipeline_stage", c.pipeline_stage.map(|v| v.to_string())),
    ])
}

fn sharding_spec(s: &ShardingSpecProto) -> String {
    record(vec![
        (
            "tensor_name",
            s.tensor_name.as_ref().map(|n| quote(n.as_bytes())),
        ),
        ("device", non_empty(&s.device, int_list)),
        (
            "index_to_device_group_map",
            non_empty(&s.index_to_device_group_map, |m| {
                list(m.iter().map(int_int_list_entry).collect())
            }),
        ),
        (
            "sharded_dim",
            non_empty(&s.sharded_dim, |dims| {
                list(dims.iter().map(sharded_dim).collect())
            }),
        ),
    ])
}

fn int_int_list_entry(e: &IntIntListEntryProto) -> String {
    record(vec![
        ("key", e.key.map(|k| k.to_string())),
        ("value", non_empty(&e.value, int_list)),
    ])
}

fn sharded_dim(d: &ShardedDimProto) -> String {
    record(vec![
        ("axis", d.axis.map(|a| a.to_string())),
        (
            "simple_sharding",
            non_empty(&d.simple_sharding, |ss| {
                list(ss.iter().map(simple_sharding).collect())
            }),
        ),
    ])
}

fn simple_sharding(s: &SimpleShardedDimProto) -> String {
    let (value, param) = match &s.dim {
        Some(Dim::DimValue(v)) => (Some(v.to_string()), None),
        Some(Dim::DimParam(p)) => (None, Some(quote(p.as_bytes()))),
        None => (None, None),
    };
    record(vec![
        ("dim_value", value),
        ("dim_param", param),
        ("num_shards", s.num_shards.map(|v| v.to_string())),
    ])
}
