//! Checks of model-local functions (IR >= 8, as `onnx.checker`): unique ids, no call cycles,
//! a name and a domain, unique formal names, and the body under the function's own opset
//! imports with no enclosing scope.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use crate::check::check_opset_versions;
use crate::check::error::CheckError;
use crate::check::graph::{GraphChecker, GraphKind};
use crate::check::schema::SchemaChecker;
use crate::graph::Graph;
use crate::model::{Function, Model};

/// "domain:name", with ":overload" when there is one.
fn function_label(f: &Function) -> String {
    let (domain, name, overload) = f.id();
    if overload.is_empty() {
        format!("{domain}:{name}")
    } else {
        format!("{domain}:{name}:{overload}")
    }
}

pub(crate) fn check_functions(
    model: &Model,
    ir_version: i64,
    schema: Option<&SchemaChecker<'_>>,
    errors: &mut Vec<CheckError>,
) {
    let mut by_id: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    for (index, f) in model.functions.iter().enumerate() {
        // The first definition is the one calls resolve to.
        match by_id.entry(f.id()) {
            Entry::Occupied(_) => errors.push(CheckError::DuplicateFunction {
                function: function_label(f),
            }),
            Entry::Vacant(slot) => {
                slot.insert(index);
            }
        }
    }
    check_call_cycles(model, &by_id, errors);
    for (index, f) in model.functions.iter().enumerate() {
        let label = function_label(f);
        let mut inner = Vec::new();
        match &f.name {
            Some(name) if !name.is_empty() => {}
            _ => errors.push(CheckError::EmptyFunctionName { index }),
        }
        if f.domain.is_none() {
            inner.push(CheckError::FunctionWithoutDomain {
                function: f.name.clone().unwrap_or_default(),
            });
        }
        check_opset_versions(&f.opset_imports, &mut inner);
        let body = &f.body;
        let input_names = body.inputs.iter().filter_map(|&id| body.get_value(id));
        let output_names = body.outputs.iter().filter_map(|&id| body.get_value(id));
        for (what, names) in [
            (
                "input",
                input_names.map(|v| v.name.clone()).collect::<Vec<_>>(),
            ),
            ("output", output_names.map(|v| v.name.clone()).collect()),
            ("attribute", f.attributes.clone()),
        ] {
            let mut seen = BTreeSet::new();
            for name in names {
                if !seen.insert(name.clone()) {
                    inner.push(CheckError::DuplicateFunctionName {
                        function: label.clone(),
                        what,
                        name,
                    });
                }
            }
        }
        let checker = GraphChecker {
            ir_version,
            opsets: &f.opset_imports,
            schema,
            inferred: None,
        };
        checker.check(
            body,
            GraphKind::FunctionBody,
            &[],
            &mut Vec::new(),
            &mut inner,
        );
        errors.extend(inner.into_iter().map(|error| CheckError::InFunction {
            function: label.clone(),
            error: Box::new(error),
        }));
    }
}

/// The functions a graph's nodes call (subgraphs included), as indices, sorted.
fn callees(graph: &Graph, by_id: &BTreeMap<(&str, &str, &str), usize>, out: &mut BTreeSet<usize>) {
    for (_, node) in graph.nodes_in_order() {
        let key = (
            &*node.domain,
            &*node.op_type,
            node.overload.as_deref().unwrap_or(""),
        );
        if let Some(&index) = by_id.get(&key) {
            out.insert(index);
        }
        for sub in node.subgraphs() {
            callees(sub, by_id, out);
        }
    }
}

/// Reports the first call cycle among model-local functions (depth-first, in file order).
fn check_call_cycles(
    model: &Model,
    by_id: &BTreeMap<(&str, &str, &str), usize>,
    errors: &mut Vec<CheckError>,
) {
    let edges: Vec<Vec<usize>> = model
        .functions
        .iter()
        .map(|f| {
            let mut out = BTreeSet::new();
            callees(&f.body, by_id, &mut out);
            out.into_iter().collect()
        })
        .collect();
    // 0 = unvisited, 1 = on the current path, 2 = done.
    let mut state = vec![0u8; edges.len()];
    for root in 0..edges.len() {
        if state.get(root) != Some(&0) {
            continue;
        }
        let mut path = vec![root];
        let mut cursor = vec![0usize];
        if let Some(s) = state.get_mut(root) {
            *s = 1;
        }
        while let (Some(&func), Some(next)) = (path.last(), cursor.last_mut()) {
            let callee = edges.get(func).and_then(|e| e.get(*next)).copied();
            *next += 1;
            match callee {
                None => {
                    if let Some(s) = state.get_mut(func) {
                        *s = 2;
                    }
                    path.pop();
                    cursor.pop();
                }
                Some(c) if state.get(c) == Some(&1) => {
                    let start = path.iter().position(|&p| p == c).unwrap_or(0);
                    let mut cycle: Vec<String> = path
                        .get(start..)
                        .unwrap_or(&[])
                        .iter()
                        .filter_map(|&p| model.functions.get(p))
                        .map(function_label)
                        .collect();
                    cycle.extend(model.functions.get(c).map(function_label));
                    errors.push(CheckError::FunctionCallCycle { cycle });
                    return;
                }
                Some(c) if state.get(c) == Some(&0) => {
                    if let Some(s) = state.get_mut(c) {
                        *s = 1;
                    }
                    path.push(c);
                    cursor.push(0);
                }
                Some(_) => {}
            }
        }
    }
}
