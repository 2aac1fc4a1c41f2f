//! Inlining of model-local functions, for conversion to another opset: a function body is
//! written at its own opset imports, so before the default-domain opset changes every call is
//! replaced by the body (values renamed apart, attribute references replaced by the caller's
//! attributes or the function's defaults), and the body then converts with the graph around it.
//! A function that is called nowhere after that is removed (the report says how many).
//!
//! A body node's subgraphs are renamed with it: the body's values they read by their new names,
//! the values they define apart. Refused with a message naming the function: bodies whose ops
//! (subgraphs included) bind other schema versions at the function's opset than at the model's,
//! bodies with an unseeded random op (its stream is keyed by a name inlining changes),
//! recursion.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto};

/// What inlining did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inlined {
    /// Call nodes replaced by their function's body (nested calls included).
    pub calls: usize,
    /// Functions removed from the model (none is called any more).
    pub functions: usize,
}

/// Calls deeper than this are taken for recursion.
const MAX_DEPTH: usize = 64;

pub(crate) type FnKey = (String, String, String);

pub(crate) fn key_of_node(n: &NodeProto) -> FnKey {
    (
        n.domain.clone().unwrap_or_default(),
        n.op_type.clone().unwrap_or_default(),
        n.overload.clone().unwrap_or_default(),
    )
}

pub(crate) fn key_of_fn(f: &FunctionProto) -> FnKey {
    (
        f.domain.clone().unwrap_or_default(),
        f.name.clone().unwrap_or_default(),
        f.overload.clone().unwrap_or_default(),
    )
}

fn normalize(domain: &str) -> &str {
    onnx_schema::normalize_domain(domain)
}

pub(crate) fn version_in(imports: &[OperatorSetIdProto], domain: &str) -> Option<i64> {
    imports
        .iter()
        .find(|o| normalize(o.domain.as_deref().unwrap_or("")) == normalize(domain))
        .and_then(|o| o.version)
}

/// Inlines every call of a model-local function; returns the model and what was done.
pub fn inline_local_functions(model: &ModelProto) -> Result<(ModelProto, Inlined), String> {
    let mut out = model.clone();
    if out.functions.is_empty() {
        return Ok((out, Inlined::default()));
    }
    let funcs: BTreeMap<FnKey, FunctionProto> = out
        .functions
        .iter()
        .map(|f| (key_of_fn(f), f.clone()))
        .collect();
    for f in funcs.values() {
        check_function(f, &out.opset_import)?;
    }
    let mut names = BTreeSet::new();
    if let Some(g) = &out.graph {
        collect_names(g, &mut names);
    }
    let mut inl = Inliner {
        funcs: &funcs,
        names,
        counter: 0,
        calls: 0,
    };
    if let Some(g) = out.graph.as_mut() {
        inl.graph(g, 0)?;
    }
    let calls = inl.calls;
    // Domains the bodies import that the model does not.
    for f in funcs.values() {
        for o in &f.opset_import {
            let d = o.domain.as_deref().unwrap_or("");
            if version_in(&out.opset_import, d).is_none() && !funcs.keys().any(|k| k.0 == d) {
                out.opset_import.push(o.clone());
            }
        }
    }
    let mut still_called = BTreeSet::new();
    if let Some(g) = &out.graph {
        called(g, &funcs, &mut still_called);
    }
    let before = out.functions.len();
    out.functions
        .retain(|f| still_called.contains(&key_of_fn(f)));
    let functions = before - out.functions.len();
    // The import of a domain that only named the removed functions goes with them.
    let kept: BTreeSet<String> = out
        .functions
        .iter()
        .map(|f| f.domain.clone().unwrap_or_default())
        .collect();
    let mut used = BTreeSet::new();
    if let Some(g) = &out.graph {
        node_domains(g, &mut used);
    }
    out.opset_import.retain(|o| {
        let d = o.domain.clone().unwrap_or_default();
        !funcs.keys().any(|k| k.0 == d) || kept.contains(&d) || used.contains(&d)
    });
    Ok((out, Inlined { calls, functions }))
}

/// A body can be inlined into the model: no subgraph attribute, and each default-domain op
/// binds the same schema version at the function's opset as at the model's.
fn check_function(f: &FunctionProto, model_imports: &[OperatorSetIdProto]) -> Result<(), String> {
    let name = f.name.as_deref().unwrap_or("");
    let mut nodes = Vec::new();
    all_nodes(&f.node, &mut nodes);
    for n in nodes {
        let op = n.op_type.as_deref().unwrap_or("");
        let domain = n.domain.as_deref().unwrap_or("");
        if !normalize(domain).is_empty() {
            continue;
        }
        // An unseeded random op draws a stream keyed by its output's name in the function;
        // inlined, the name (so the stream) changes and the check could not compare. Dropout
        // draws nothing at inference.
        let random = version_in(&f.opset_import, "")
            .and_then(|v| onnx_schema::registry().lookup("", op, v))
            .is_some_and(|s| {
                // Control flow is nondeterministic only through its bodies, checked on their own.
                s.node_determinism == onnx_schema::NodeDeterminism::NonDeterministic
                    && !s
                        .attributes
                        .iter()
                        .any(|a| a.ty == onnx_proto::attribute_proto::AttributeType::Graph)
            });
        let seeded = n
            .attribute
            .iter()
            .any(|a| a.name.as_deref() == Some("seed"));
        if random && !seeded && op != "Dropout" {
            return Err(format!(
                "local function '{name}': node '{}' ({op}) is random without a seed; such bodies are not inlined, so the model cannot change opset",
                n.name.as_deref().unwrap_or("")
            ));
        }
        let (Some(fv), Some(mv)) = (
            version_in(&f.opset_import, ""),
            version_in(model_imports, ""),
        ) else {
            continue;
        };
        let reg = onnx_schema::registry();
        let at = |v: i64| reg.lookup("", op, v).map(|s| s.since_version);
        if at(fv) != at(mv) {
            return Err(format!(
                "local function '{name}' imports opset {fv} of the default domain and the model {mv}: its node '{}' ({op}) binds another version there",
                n.name.as_deref().unwrap_or("")
            ));
        }
    }
    Ok(())
}

/// The nodes of a body, those of its subgraphs included.
fn all_nodes<'a>(nodes: &'a [NodeProto], out: &mut Vec<&'a NodeProto>) {
    for n in nodes {
        out.push(n);
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                all_nodes(&sub.node, out);
            }
        }
    }
}

pub(crate) fn collect_names(g: &GraphProto, out: &mut BTreeSet<String>) {
    for v in g.input.iter().chain(&g.output).chain(&g.value_info) {
        out.insert(v.name.clone().unwrap_or_default());
    }
    for t in &g.initializer {
        out.insert(t.name.clone().unwrap_or_default());
    }
    for n in &g.node {
        out.extend(n.input.iter().cloned());
        out.extend(n.output.iter().cloned());
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                collect_names(sub, out);
            }
        }
    }
}

fn node_domains(g: &GraphProto, out: &mut BTreeSet<String>) {
    for n in &g.node {
        out.insert(n.domain.clone().unwrap_or_default());
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                node_domains(sub, out);
            }
        }
    }
}

fn called(g: &GraphProto, funcs: &BTreeMap<FnKey, FunctionProto>, out: &mut BTreeSet<FnKey>) {
    for n in &g.node {
        let k = key_of_node(n);
        if funcs.contains_key(&k) {
            out.insert(k);
        }
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                called(sub, funcs, out);
            }
        }
    }
}

pub(crate) struct Inliner<'a> {
    funcs: &'a BTreeMap<FnKey, FunctionProto>,
    /// Every value name in use (new ones are added).
    names: BTreeSet<String>,
    counter: usize,
    calls: usize,
}

impl<'a> Inliner<'a> {
    /// An inliner of `funcs`, renaming apart from the names of `model`.
    pub(crate) fn new(funcs: &'a BTreeMap<FnKey, FunctionProto>, model: &ModelProto) -> Self {
        let mut names = BTreeSet::new();
        if let Some(g) = &model.graph {
            collect_names(g, &mut names);
        }
        for f in &model.functions {
            names.extend(f.input.iter().cloned());
            names.extend(f.output.iter().cloned());
            for n in &f.node {
                names.extend(n.input.iter().cloned());
                names.extend(n.output.iter().cloned());
            }
        }
        Inliner {
            funcs,
            names,
            counter: 0,
            calls: 0,
        }
    }

    /// Calls expanded so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls
    }

    fn fresh(&mut self, base: &str) -> String {
        loop {
            self.counter += 1;
            let n = format!("{base}__inl{}", self.counter);
            if self.names.insert(n.clone()) {
                return n;
            }
        }
    }

    pub(crate) fn graph(&mut self, g: &mut GraphProto, depth: usize) -> Result<(), String> {
        let nodes = std::mem::take(&mut g.node);
        let mut out = Vec::with_capacity(nodes.len());
        for mut n in nodes {
            for a in n.attribute.iter_mut() {
                for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                    self.graph(sub, depth)?;
                }
            }
            self.node(n, depth, &mut out)?;
        }
        g.node = out;
        Ok(())
    }

    /// Appends `n` to `out`, or the body of the function it calls (recursively expanded).
    pub(crate) fn node(
        &mut self,
        n: NodeProto,
        depth: usize,
        out: &mut Vec<NodeProto>,
    ) -> Result<(), String> {
        let Some(f) = self.funcs.get(&key_of_node(&n)) else {
            out.push(n);
            return Ok(());
        };
        let fname = f.name.as_deref().unwrap_or("");
        if depth >= MAX_DEPTH {
            return Err(format!(
                "local function '{fname}': calls nested deeper than {MAX_DEPTH} (recursion?)"
            ));
        }
        self.calls += 1;
        let mut map: BTreeMap<String, String> = BTreeMap::new();
        for (i, formal) in f.input.iter().enumerate() {
            map.insert(formal.clone(), n.input.get(i).cloned().unwrap_or_default());
        }
        for (i, formal) in f.output.iter().enumerate() {
            let actual = match n.output.get(i) {
                Some(a) if !a.is_empty() => a.clone(),
                _ => self.fresh(formal),
            };
            map.insert(formal.clone(), actual);
        }
        let call_name = n.name.clone().unwrap_or_else(|| fname.to_string());
        for b in &f.node {
            let mut c = b.clone();
            // Formal names map to the call's; the body's own values get fresh names.
            for x in c.input.iter_mut().chain(c.output.iter_mut()) {
                if x.is_empty() {
                    continue;
                }
                *x = match map.get(x.as_str()) {
                    Some(m) => m.clone(),
                    None => {
                        let m = self.fresh(x);
                        map.insert(x.clone(), m.clone());
                        m
                    }
                };
            }
            c.name = Some(match &b.name {
                Some(bn) if !bn.is_empty() => format!("{call_name}/{bn}"),
                _ => call_name.clone(),
            });
            let mut attrs = resolve_refs(std::mem::take(&mut c.attribute), &n, f);
            // Subgraphs read the body's values by name: renamed the same way, their own
            // values renamed apart.
            for a in attrs.iter_mut() {
                for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                    self.scope(sub, &map, &n, f, depth + 1)?;
                }
            }
            c.attribute = attrs;
            self.node(c, depth + 1, out)?;
        }
        Ok(())
    }

    /// Renames a subgraph of an inlined body node: the body's values it reads through `outer`,
    /// the values it defines apart; then expands the calls in it.
    fn scope(
        &mut self,
        g: &mut GraphProto,
        outer: &BTreeMap<String, String>,
        call: &NodeProto,
        f: &FunctionProto,
        depth: usize,
    ) -> Result<(), String> {
        let mut map = outer.clone();
        let define = |this: &mut Self, x: &mut String, map: &mut BTreeMap<String, String>| {
            if !x.is_empty() {
                let m = this.fresh(x);
                map.insert(x.clone(), m.clone());
                *x = m;
            }
        };
        for v in g.input.iter_mut() {
            if let Some(x) = v.name.as_mut() {
                define(self, x, &mut map);
            }
        }
        for t in g.initializer.iter_mut() {
            if let Some(x) = t.name.as_mut() {
                define(self, x, &mut map);
            }
        }
        for n in g.node.iter_mut() {
            for x in n.input.iter_mut() {
                if let Some(m) = map.get(x.as_str()) {
                    *x = m.clone();
                }
            }
            for x in n.output.iter_mut() {
                define(self, x, &mut map);
            }
            n.attribute = resolve_refs(std::mem::take(&mut n.attribute), call, f);
            for a in n.attribute.iter_mut() {
                for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                    self.scope(sub, &map, call, f, depth)?;
                }
            }
        }
        for v in g.output.iter_mut().chain(g.value_info.iter_mut()) {
            if let Some(m) = v.name.as_ref().and_then(|x| map.get(x)) {
                v.name = Some(m.clone());
            }
        }
        self.graph(g, depth)
    }
}

/// A body node's attributes with references (`@alpha`) replaced by the caller's attribute,
/// else the function's default; a reference to neither is dropped (the attribute is absent).
fn resolve_refs(
    attrs: Vec<onnx_proto::AttributeProto>,
    call: &NodeProto,
    f: &FunctionProto,
) -> Vec<onnx_proto::AttributeProto> {
    let mut out = Vec::with_capacity(attrs.len());
    for a in attrs {
        let Some(r) = a.ref_attr_name.clone() else {
            out.push(a);
            continue;
        };
        let given = call
            .attribute
            .iter()
            .find(|x| x.name.as_deref() == Some(r.as_str()))
            .or_else(|| {
                f.attribute_proto
                    .iter()
                    .find(|x| x.name.as_deref() == Some(r.as_str()))
            });
        if let Some(v) = given {
            let mut v = v.clone();
            v.name = a.name.clone();
            v.ref_attr_name = None;
            out.push(v);
        }
    }
    out
}
