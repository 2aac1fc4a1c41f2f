//! Type constraints, as onnx's `OpSchema::CheckInputOutputType` (run by `onnx.checker`'s
//! full check): every input and output whose type is known must be allowed by its formal
//! parameter, and values bound to one homogeneous type parameter ("T" of Add's A, B and C, or
//! every value of a homogeneous variadic) must have one type.
//!
//! A value's type is what the model declares: its graph input, output or value_info entry, else
//! its initializer's element type; a subgraph's read from an enclosing graph takes the type
//! declared there. An input of the main graph's values (read there or from a subgraph) that
//! declares no type takes the type inference gives it, through calls of model-local functions
//! too (onnx's full check infers before it checks; a sequence a function returns fed to Scan
//! was accepted without it, and failed once the optimizer declared its type: fuzz seeds
//! 0xe3779b97f4a7f114, 0xe3779b97f4a79930). A function body checked for one call of it takes
//! the types inference gives its values from that call's input types (a sequence passed through
//! one function to another whose body fed it to Scan was accepted without it: fuzz seed
//! 0x1fe68f0af33cb9f7). Other values of unknown type are not checked.

use std::collections::BTreeMap;

use onnx_proto::tensor_proto::DataType;
use onnx_proto::TypeProto;
use onnx_schema::{element_type_name, type_str_of, OpSchema};

use crate::check::schema::{Port, SchemaProblem};
use crate::graph::{Graph, Node, Value, ValueId};

/// The graphs a node's values resolve in: its own and the enclosing ones (outermost first).
pub(crate) struct TypeScope<'g> {
    /// The graph holding the node.
    pub(crate) graph: &'g Graph,
    /// The graphs enclosing it, outermost first.
    pub(crate) outer: &'g [&'g Graph],
    /// The inferred types of the outermost graph's values (the main graph's, or a function
    /// body's for one call of it), if known.
    pub(crate) inferred: Option<&'g BTreeMap<String, TypeProto>>,
}

impl TypeScope<'_> {
    /// The type string of a value, if the model declares one.
    pub(crate) fn type_str(&self, id: ValueId) -> Option<String> {
        let value = self.graph.get_value(id)?;
        if let Some(found) = declared_type_str(value) {
            return Some(found);
        }
        if !value.is_outer {
            return None;
        }
        for graph in self.outer.iter().rev() {
            let Some(outer) = graph
                .find_value(&value.name)
                .and_then(|id| graph.get_value(id))
            else {
                continue;
            };
            if let Some(found) = declared_type_str(outer) {
                return Some(found);
            }
            if !outer.is_outer {
                return None;
            }
        }
        None
    }
}

impl TypeScope<'_> {
    /// The inferred type string of a value the outermost graph defines (a graph input,
    /// initializer or node output of the main graph, or of a function body checked for a call),
    /// if inference knows it.
    pub(crate) fn inferred_type_str(&self, id: ValueId) -> Option<String> {
        self.inferred_type(id).and_then(type_str_of)
    }

    /// The type of a value: declared (here or where an enclosing graph defines it), else
    /// inferred (for a value of the outermost graph).
    pub(crate) fn value_type(&self, id: ValueId) -> Option<TypeProto> {
        let value = self.graph.get_value(id)?;
        let mut found = value.ty.clone();
        if value.is_outer {
            for graph in self.outer.iter().rev() {
                if found.is_some() {
                    break;
                }
                let Some(outer) = graph
                    .find_value(&value.name)
                    .and_then(|i| graph.get_value(i))
                else {
                    continue;
                };
                found = outer.ty.clone();
                if !outer.is_outer {
                    break;
                }
            }
        }
        found
            .filter(|ty| type_str_of(ty).is_some())
            .or_else(|| self.inferred_type(id).cloned())
    }

    fn inferred_type(&self, id: ValueId) -> Option<&TypeProto> {
        let inferred = self.inferred?;
        let value = self.graph.get_value(id)?;
        // The graph defining the value: this one, else the innermost enclosing one that does.
        let mut defined_in_outermost = self.outer.is_empty();
        if value.is_outer {
            defined_in_outermost = false;
            for (depth, graph) in self.outer.iter().enumerate().rev() {
                let Some(outer) = graph
                    .find_value(&value.name)
                    .and_then(|i| graph.get_value(i))
                else {
                    continue;
                };
                if !outer.is_outer {
                    defined_in_outermost = depth == 0;
                    break;
                }
            }
        }
        defined_in_outermost
            .then(|| inferred.get(value.name.as_str()))
            .flatten()
    }
}

/// The declared type of a value, else the type of its initializer.
fn declared_type_str(value: &Value) -> Option<String> {
    if let Some(found) = value.ty.as_ref().and_then(type_str_of) {
        return Some(found);
    }
    let element = |data_type: Option<i32>| {
        DataType::try_from(data_type?)
            .ok()
            .and_then(element_type_name)
    };
    if let Some(name) = value
        .initializer
        .as_ref()
        .and_then(|t| element(t.data_type))
    {
        return Some(format!("tensor({name})"));
    }
    value
        .sparse_initializer
        .as_ref()
        .and_then(|s| s.values.as_ref())
        .and_then(|t| element(t.data_type))
        .map(|name| format!("sparse_tensor({name})"))
}

/// Checks the known types of a node's inputs and outputs against the schema's constraints.
pub(crate) fn check_types(
    schema: &OpSchema,
    callee: &str,
    scope: &TypeScope<'_>,
    node: &Node,
    out: &mut Vec<SchemaProblem>,
) {
    // Type parameter (or literal type) -> (type, where it was bound).
    let mut bound: BTreeMap<&str, (String, Port, usize)> = BTreeMap::new();
    let sides = [
        (Port::Input, &node.inputs, &schema.inputs),
        (Port::Output, &node.outputs, &schema.outputs),
    ];
    for (port, values, formals) in sides {
        for (index, value) in values.iter().enumerate() {
            // Values past the formal parameters belong to the last (variadic) one.
            let Some(formal) = formals.get(index).or(formals.last()) else {
                break;
            };
            let Some(id) = *value else { continue };
            let declared = scope.type_str(id);
            let inferred = match (&declared, port) {
                (None, Port::Input) => scope.inferred_type_str(id),
                _ => None,
            };
            let is_inferred = inferred.is_some();
            let Some(type_str) = declared.or(inferred) else {
                continue;
            };
            let name = scope
                .graph
                .get_value(id)
                .map(|v| v.name.clone())
                .unwrap_or_default();
            let allowed = schema.allowed_types(&formal.type_str).unwrap_or(&[]);
            if !allowed.is_empty() && !allowed.contains(&type_str) {
                out.push(SchemaProblem::TypeNotAllowed {
                    port,
                    index,
                    value: name,
                    type_str,
                    param: formal.name.clone(),
                    type_param: formal.type_str.clone(),
                    callee: callee.to_string(),
                    inferred: is_inferred,
                });
                continue;
            }
            if !formal.is_homogeneous {
                continue;
            }
            match bound.get(formal.type_str.as_str()) {
                Some((first, by_port, by_index)) if *first != type_str => {
                    out.push(SchemaProblem::InconsistentType {
                        port,
                        index,
                        value: name,
                        type_str,
                        type_param: formal.type_str.clone(),
                        bound: first.clone(),
                        bound_by: (*by_port, *by_index),
                        callee: callee.to_string(),
                    });
                }
                Some(_) => {}
                None => {
                    bound.insert(&formal.type_str, (type_str, port, index));
                }
            }
        }
    }
}
