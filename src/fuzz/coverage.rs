//! Op coverage of a fuzzing campaign: which default-domain operators appeared in the models
//! that ran, and with how many distinct attribute settings.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{AttributeProto, ModelProto};

/// Every operator of the default domain the schemas know (any version), sorted.
pub fn default_domain_ops() -> Vec<String> {
    let mut ops: Vec<String> = onnx_schema::registry()
        .op_types("")
        .map(str::to_string)
        .collect();
    ops.sort();
    ops.dedup();
    ops
}

/// Operators seen and their attribute settings.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    ops: BTreeMap<String, BTreeSet<String>>,
}

impl Coverage {
    /// Records the default-domain nodes of a model's main graph.
    pub fn add(&mut self, m: &ModelProto) {
        let Some(g) = &m.graph else { return };
        for n in &g.node {
            if n.domain
                .as_deref()
                .is_some_and(|d| !d.is_empty() && d != "ai.onnx")
            {
                continue;
            }
            let mut attrs: Vec<String> = n.attribute.iter().map(setting).collect();
            attrs.sort();
            self.ops
                .entry(n.op_type.clone().unwrap_or_default())
                .or_default()
                .insert(attrs.join(","));
        }
    }

    /// Distinct operators seen.
    pub fn ops_seen(&self) -> usize {
        self.ops.len()
    }

    /// Distinct (operator, attribute setting) pairs seen.
    pub fn settings(&self) -> usize {
        self.ops.values().map(BTreeSet::len).sum()
    }

    /// Default-domain operators never seen.
    pub fn missing(&self) -> Vec<String> {
        default_domain_ops()
            .into_iter()
            .filter(|o| !self.ops.contains_key(o))
            .collect()
    }

    /// Distinct attribute settings per operator seen.
    pub fn per_op(&self) -> impl Iterator<Item = (&str, usize)> + '_ {
        self.ops.iter().map(|(k, v)| (k.as_str(), v.len()))
    }
}

fn setting(a: &AttributeProto) -> String {
    let name = a.name.as_deref().unwrap_or("");
    let v = if let Some(i) = a.i {
        i.to_string()
    } else if let Some(f) = a.f {
        f.to_string()
    } else if let Some(s) = &a.s {
        String::from_utf8_lossy(s).into_owned()
    } else if !a.ints.is_empty() {
        format!("{:?}", a.ints)
    } else if !a.floats.is_empty() {
        format!("{:?}", a.floats)
    } else if a.t.is_some() {
        "tensor".into()
    } else {
        String::new()
    };
    format!("{name}={v}")
}
