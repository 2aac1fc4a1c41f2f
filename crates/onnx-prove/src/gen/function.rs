//! Model-local functions in the fuzzer's whole models: a freshly built piece of the main graph
//! (a few random nodes, control flow included) becomes a FunctionProto of [`LOCAL_DOMAIN`]
//! called in its place. The values the piece reads become the function's inputs, its sinks
//! (and sometimes an inner value) its outputs; one attribute of a body node may refer to a
//! function attribute (`ref_attr_name`), sometimes declared with a default the call may leave
//! out. A function may be called again, from the main graph, a subgraph or another function's
//! piece (then a function calls a function).

use std::collections::BTreeSet;

use onnx_proto::attribute_proto::AttributeType;
use onnx_proto::{AttributeProto, FunctionProto, NodeProto, OperatorSetIdProto};

use super::scope::{node_reads, ValueType, LOCAL_DOMAIN};
use super::{Gen, Reject, ValueKind};

/// A model-local function with what a further call needs.
#[derive(Debug, Clone)]
pub(super) struct LocalFunction {
    pub proto: FunctionProto,
    /// Element type and shape of each formal input at the first call.
    inputs: Vec<ValueType>,
    /// The attribute the first call passed or the function declares as default.
    attribute: Option<AttributeProto>,
    /// The attribute has a default (`attribute_proto`): a call may leave it out.
    has_default: bool,
}

/// Whether a node or one of its subgraphs calls a model-local function.
fn calls_local(node: &NodeProto) -> bool {
    node.domain.as_deref() == Some(LOCAL_DOMAIN)
        || node.attribute.iter().any(|a| {
            a.g.iter()
                .chain(&a.graphs)
                .any(|g| g.node.iter().any(calls_local))
        })
}

impl Gen<'_> {
    /// Defines a model-local function from a freshly built piece of graph and calls it in the
    /// piece's place.
    pub(super) fn define_function(&mut self) -> Result<(), Reject> {
        self.nest.in_function = true;
        let r = self.function_of_piece();
        self.nest.in_function = false;
        r
    }

    fn function_of_piece(&mut self) -> Result<(), Reject> {
        let s = self.scope_start();
        // A function calling another: the piece starts with a call.
        if !self.nest.functions.is_empty() && self.ch.one_in(2) {
            self.call_function()?;
        }
        let size = 1 + self.ch.below(4);
        self.random_nodes(size);
        if self.nodes.len() == s.nodes {
            return self.reject("an empty function");
        }
        let piece = &self.nodes[s.nodes..];
        let produced: BTreeSet<&str> = piece
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str))
            .collect();
        let mut inputs: Vec<String> = Vec::new();
        let mut read: BTreeSet<String> = BTreeSet::new();
        for n in piece {
            for name in node_reads(n) {
                if !produced.contains(name.as_str()) && !inputs.contains(&name) {
                    inputs.push(name.clone());
                }
                read.insert(name);
            }
        }
        let mut outputs: Vec<String> = Vec::new();
        for k in s.values..self.values.len() {
            let v = &self.values[k];
            if v.kind != ValueKind::Node || !produced.contains(v.name.as_str()) {
                continue;
            }
            let sink = !read.contains(&v.name);
            if sink || self.ch.one_in(4) {
                outputs.push(v.name.clone());
            }
        }
        if outputs.is_empty() {
            return self.reject("a function without outputs");
        }
        let in_types: Vec<ValueType> = inputs
            .iter()
            .filter_map(|n| self.by_name.get(n).map(|&k| self.value_type(k)))
            .collect();
        if in_types.len() != inputs.len() {
            return self.reject("a function input that is not visible");
        }
        let keep: BTreeSet<String> = outputs.iter().cloned().collect();
        let mut body = self.close_scope(s, &keep);
        let (attribute, has_default) = self.attribute_reference(&mut body);
        let name = self.fresh_name("f");
        let mut opset_import = vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(self.opset),
        }];
        if body.iter().any(calls_local) {
            opset_import.push(OperatorSetIdProto {
                domain: Some(LOCAL_DOMAIN.into()),
                version: Some(1),
            });
        }
        let formal: Vec<String> = attribute
            .iter()
            .filter(|_| !has_default)
            .filter_map(|a| a.name.clone())
            .collect();
        let proto = FunctionProto {
            name: Some(name.clone()),
            domain: Some(LOCAL_DOMAIN.into()),
            input: inputs.clone(),
            output: outputs.clone(),
            attribute: formal,
            attribute_proto: attribute.iter().filter(|_| has_default).cloned().collect(),
            node: body,
            opset_import,
            ..Default::default()
        };
        let passed = attribute
            .iter()
            .filter(|_| !has_default || self.ch.one_in(2))
            .cloned()
            .collect();
        self.nest.functions.push(LocalFunction {
            proto,
            inputs: in_types,
            attribute,
            has_default,
        });
        // The piece's outputs are the call's now.
        self.nodes.push(NodeProto {
            input: inputs,
            output: outputs,
            op_type: Some(name),
            domain: Some(LOCAL_DOMAIN.into()),
            attribute: passed,
            ..Default::default()
        });
        Ok(())
    }

    /// Sometimes turns one scalar or list attribute of a top-level body node into a reference
    /// to a function attribute `p_NAME`; returns that attribute with the node's value, and
    /// whether the function declares it as a default.
    fn attribute_reference(&mut self, body: &mut [NodeProto]) -> (Option<AttributeProto>, bool) {
        let scalar = [
            AttributeType::Int as i32,
            AttributeType::Float as i32,
            AttributeType::Ints as i32,
            AttributeType::Floats as i32,
            AttributeType::String as i32,
        ];
        let mut slots = Vec::new();
        for (i, n) in body.iter().enumerate() {
            for (j, a) in n.attribute.iter().enumerate() {
                if a.r#type.is_some_and(|t| scalar.contains(&t)) && a.ref_attr_name.is_none() {
                    slots.push((i, j));
                }
            }
        }
        if slots.is_empty() || self.ch.one_in(2) {
            return (None, false);
        }
        let (i, j) = slots[self.ch.below(slots.len())];
        let actual = body[i].attribute[j].clone();
        let formal = format!("p_{}", actual.name.as_deref().unwrap_or(""));
        body[i].attribute[j] = AttributeProto {
            name: actual.name.clone(),
            ref_attr_name: Some(formal.clone()),
            r#type: actual.r#type,
            ..Default::default()
        };
        let mut passed = actual;
        passed.name = Some(formal);
        (Some(passed), self.ch.one_in(3))
    }

    /// Calls a local function defined earlier on visible values of its inputs' types.
    pub(super) fn call_function(&mut self) -> Result<(), Reject> {
        let f = self.nest.functions[self.ch.below(self.nest.functions.len())].clone();
        let mut input = Vec::new();
        for want in &f.inputs {
            let candidates: Vec<usize> = (0..self.values.len())
                .filter(|&k| self.has_type(k, want))
                .collect();
            if candidates.is_empty() {
                return self.reject("no value for a function input");
            }
            let k = candidates[self.ch.below(candidates.len())];
            input.push(self.values[k].name.clone());
        }
        let mut attribute = Vec::new();
        if let Some(mut a) = f.attribute.clone() {
            if a.f.is_some() && self.ch.one_in(3) {
                a.f = Some(self.ch.pick(&[0.5, 1.0, 2.0]));
            }
            if !f.has_default || self.ch.one_in(2) {
                attribute.push(a);
            }
        }
        let node = NodeProto {
            input,
            output: self.output_names(f.proto.output.len()),
            op_type: f.proto.name.clone(),
            domain: Some(LOCAL_DOMAIN.into()),
            attribute,
            ..Default::default()
        };
        self.run_and_add(node)?;
        Ok(())
    }
}
