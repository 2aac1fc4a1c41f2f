//! Inlining of model-local functions, for conversion to another opset: a function body is
//! written at its own opset imports, so before the default-domain opset changes every call is
//! replaced by the body (values renamed apart, attribute references replaced by the caller's
//! attributes or the function's defaults), and the body then converts with the graph around it.
//! A function that is called nowhere after that is removed (the report says how many).
//!
//! This is a pass, not a rule: the e-graph lifts a call as one opaque node of the function's
//! domain; the body's nodes become the graph's own only once inlined, renamed apart.
//!
//! A body node's subgraphs are renamed with it: the body's values they read by their new names,
//! the values they define apart. Refused with a [`FunctionError`] naming the function: bodies
//! whose ops (subgraphs included) bind other schema versions at the function's opset than at
//! the model's, bodies with an unseeded random op (its stream is keyed by a name inlining
//! changes), recursion.
//!
//! Works on the IR: a call's node is replaced in the graph's order by copies of the body's nodes
//! whose handles point into the graph, and each graph that changed is renumbered
//! ([`renumber`]) into the arena layout `Graph::from_proto` gives, so what the passes after see
//! does not depend on how the graph was edited.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use onnx_ir::{
    Attribute, AttributeValue, Function, Graph, IrError, Model, Name, Node, NodeId, OpsetImport,
    Value, ValueId,
};

use super::renumber::renumber;
use onnx_proto::AttributeProto;

/// What inlining did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inlined {
    /// Call nodes replaced by their function's body (nested calls included).
    pub calls: usize,
    /// Functions removed from the model (none is called any more).
    pub functions: usize,
}

/// Why a model-local function (or an op's schema body) is not inlined or converted in place.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FunctionError {
    /// An unseeded random op in the body: its stream is keyed by a name inlining changes.
    #[error("local function '{function}': node '{node}' ({op}) is random without a seed; such bodies are not inlined, so the model cannot change opset")]
    UnseededRandom {
        function: String,
        node: String,
        op: String,
    },
    /// A body op that binds another schema version at the model's opset than at the function's.
    #[error("local function '{function}' imports opset {function_opset} of the default domain and the model {model_opset}: its node '{node}' ({op}) binds another version there")]
    OtherVersion {
        function: String,
        function_opset: i64,
        model_opset: i64,
        node: String,
        op: String,
    },
    /// Calls nested deeper than [`MAX_DEPTH`].
    #[error("local function '{function}': calls nested deeper than {limit} (recursion?)")]
    TooDeep { function: String, limit: usize },
    /// A default attribute value (a subgraph) the IR cannot represent.
    #[error("local function '{function}': the default of attribute '{attribute}'")]
    Default {
        function: String,
        attribute: String,
        #[source]
        source: IrError,
    },
    /// A body (as a model of its own, or converted) the IR cannot represent.
    #[error("local function '{function}'")]
    Body {
        function: String,
        #[source]
        source: IrError,
    },
    /// Converting a body in place failed.
    #[error("local function '{function}'")]
    Convert {
        function: String,
        #[source]
        source: Box<crate::Error>,
    },
    /// A body converted in place with other inputs or outputs.
    #[error("local function '{function}': its converted body does not keep the signature")]
    SignatureChanged { function: String },
}

impl FunctionError {
    /// The library error a pass returns: a refusal of the optimization, its message the chain
    /// of this error and its sources (what the CLI prints).
    pub(crate) fn into_error(self, origin: &str) -> crate::Error {
        let mut message = self.to_string();
        let mut source = std::error::Error::source(&self);
        while let Some(s) = source {
            message.push_str(&format!(": {s}"));
            source = s.source();
        }
        crate::Error::Optimize {
            path: origin.into(),
            source: onnx_egraph::EGraphError::Unsupported(message),
        }
    }
}

/// Calls deeper than this are taken for recursion.
const MAX_DEPTH: usize = 64;

/// A function's id: (domain, name, overload), absent fields as "".
pub(crate) type FnKey = (String, String, String);

/// The id of the function a node calls (if it calls one).
pub(crate) fn key_of_node(n: &Node) -> FnKey {
    (
        n.domain.to_string(),
        n.op_type.to_string(),
        n.overload.as_deref().unwrap_or("").to_string(),
    )
}

/// The id of a function.
pub(crate) fn key_of_fn(f: &Function) -> FnKey {
    let (domain, name, overload) = f.id();
    (domain.into(), name.into(), overload.into())
}

fn normalize(domain: &str) -> &str {
    onnx_schema::normalize_domain(domain)
}

/// The version a list of imports gives `domain` (the first import of it; `None` when that
/// import has no version).
pub(crate) fn version_in(imports: &[OpsetImport], domain: &str) -> Option<i64> {
    imports
        .iter()
        .find(|o| normalize(&o.domain) == normalize(domain))
        .and_then(|o| (o.field_presence.version || o.version != 0).then_some(o.version))
}

/// Inlines every call of a model-local function; returns what was done. On an error the model
/// may be partly inlined (the caller drops it).
pub(crate) fn inline_local_functions(model: &mut Model) -> Result<Inlined, FunctionError> {
    inline_functions(model, None)
}

/// Inlines every call of the functions in `only` (of every model-local function when `None`);
/// the others stay, called as they were. A function of `only` must not be called from another
/// function's body (it is removed once no graph calls it). On an error the model may be partly
/// inlined (the caller drops it).
pub(crate) fn inline_functions(
    model: &mut Model,
    only: Option<&BTreeSet<FnKey>>,
) -> Result<Inlined, FunctionError> {
    if model.functions.is_empty() {
        return Ok(Inlined::default());
    }
    let funcs: BTreeMap<FnKey, Function> = model
        .functions
        .iter()
        .map(|f| (key_of_fn(f), f.clone()))
        .filter(|(k, _)| only.is_none_or(|o| o.contains(k)))
        .collect();
    if funcs.is_empty() {
        return Ok(Inlined::default());
    }
    for f in funcs.values() {
        check_function(f, &model.opset_imports)?;
    }
    let mut names = BTreeSet::new();
    graph_names(&model.graph, &mut names);
    let mut inl = Inliner {
        funcs: &funcs,
        names,
        counter: 0,
        calls: 0,
    };
    inl.graph(&mut model.graph, 0)?;
    let calls = inl.calls;
    // Domains the bodies import that the model does not.
    for f in funcs.values() {
        for o in &f.opset_imports {
            if version_in(&model.opset_imports, &o.domain).is_none()
                && !funcs.keys().any(|k| k.0 == *o.domain)
            {
                model.opset_imports.push(o.clone());
            }
        }
    }
    let mut still_called = BTreeSet::new();
    called(&model.graph, &funcs, &mut still_called);
    let before = model.functions.len();
    model.functions.retain(|f| {
        let k = key_of_fn(f);
        !funcs.contains_key(&k) || still_called.contains(&k)
    });
    let functions = before - model.functions.len();
    // The import of a domain that only named the removed functions goes with them.
    let kept: BTreeSet<String> = model
        .functions
        .iter()
        .map(|f| f.domain.as_deref().unwrap_or("").to_string())
        .collect();
    let mut used = BTreeSet::new();
    node_domains(&model.graph, &mut used);
    model.opset_imports.retain(|o| {
        let d = o.domain.as_str();
        !funcs.keys().any(|k| k.0 == d) || kept.contains(d) || used.contains(d)
    });
    Ok(Inlined { calls, functions })
}

/// A body can be inlined into the model: no unseeded random op, and each default-domain op
/// (subgraphs included) binds the same schema version at the function's opset as at the
/// model's.
fn check_function(f: &Function, model_imports: &[OpsetImport]) -> Result<(), FunctionError> {
    let function = f.name.as_deref().unwrap_or("");
    let mut nodes = Vec::new();
    all_nodes(&f.body, &mut nodes);
    for n in nodes {
        let op = n.op_type.as_str();
        if !normalize(&n.domain).is_empty() {
            continue;
        }
        // An unseeded random op draws a stream keyed by its output's name in the function;
        // inlined, the name (so the stream) changes and the check could not compare. Dropout
        // draws nothing at inference.
        let random = version_in(&f.opset_imports, "")
            .and_then(|v| onnx_schema::registry().lookup("", op, v))
            .is_some_and(|s| {
                // Control flow is nondeterministic only through its bodies, checked on their own.
                s.node_determinism == onnx_schema::NodeDeterminism::NonDeterministic
                    && !s
                        .attributes
                        .iter()
                        .any(|a| a.ty == onnx_proto::attribute_proto::AttributeType::Graph)
            });
        if random && n.attribute("seed").is_none() && op != "Dropout" {
            return Err(FunctionError::UnseededRandom {
                function: function.to_string(),
                node: n.name_or_empty().to_string(),
                op: op.to_string(),
            });
        }
        let (Some(fv), Some(mv)) = (
            version_in(&f.opset_imports, ""),
            version_in(model_imports, ""),
        ) else {
            continue;
        };
        let reg = onnx_schema::registry();
        let at = |v: i64| reg.lookup("", op, v).map(|s| s.since_version);
        if at(fv) != at(mv) {
            return Err(FunctionError::OtherVersion {
                function: function.to_string(),
                function_opset: fv,
                model_opset: mv,
                node: n.name_or_empty().to_string(),
                op: op.to_string(),
            });
        }
    }
    Ok(())
}

/// The nodes of a graph in order, each followed by those of its subgraphs.
fn all_nodes<'a>(g: &'a Graph, out: &mut Vec<&'a Node>) {
    for (_, n) in g.nodes_in_order() {
        out.push(n);
        for sub in n.subgraphs() {
            all_nodes(sub, out);
        }
    }
}

/// The name of a node's input or output slot ("" when absent).
fn slot_name(g: &Graph, slot: Option<ValueId>) -> String {
    slot.map_or(String::new(), |v| g.value(v).name.to_string())
}

/// Every value name a graph declares, initializes or a node reads or writes (subgraphs
/// included): the names fresh ones must avoid.
pub(crate) fn graph_names(g: &Graph, out: &mut BTreeSet<String>) {
    for &v in g
        .inputs
        .iter()
        .chain(&g.outputs)
        .chain(&g.value_info)
        .chain(&g.initializers)
    {
        out.insert(g.value(v).name.to_string());
    }
    for (_, n) in g.nodes_in_order() {
        for &slot in n.inputs.iter().chain(&n.outputs) {
            out.insert(slot_name(g, slot));
        }
        for sub in n.subgraphs() {
            graph_names(sub, out);
        }
    }
}

fn node_domains(g: &Graph, out: &mut BTreeSet<String>) {
    for (_, n) in g.nodes_in_order() {
        out.insert(n.domain.to_string());
        for sub in n.subgraphs() {
            node_domains(sub, out);
        }
    }
}

fn called(g: &Graph, funcs: &BTreeMap<FnKey, Function>, out: &mut BTreeSet<FnKey>) {
    for (_, n) in g.nodes_in_order() {
        let k = key_of_node(n);
        if funcs.contains_key(&k) {
            out.insert(k);
        }
        for sub in n.subgraphs() {
            called(sub, funcs, out);
        }
    }
}

/// Expands calls of `funcs` in graphs, renaming the bodies' values apart.
pub(crate) struct Inliner<'a> {
    funcs: &'a BTreeMap<FnKey, Function>,
    /// Every value name in use (new ones are added).
    names: BTreeSet<String>,
    counter: usize,
    calls: usize,
}

impl<'a> Inliner<'a> {
    /// An inliner of `funcs`, renaming apart from the names of `model` (its main graph and its
    /// functions' signatures and nodes).
    pub(crate) fn new(funcs: &'a BTreeMap<FnKey, Function>, model: &Model) -> Self {
        let mut names = BTreeSet::new();
        graph_names(&model.graph, &mut names);
        for f in &model.functions {
            let body = &f.body;
            for &v in body.inputs.iter().chain(&body.outputs) {
                names.insert(body.value(v).name.to_string());
            }
            for (_, n) in body.nodes_in_order() {
                for &slot in n.inputs.iter().chain(&n.outputs) {
                    names.insert(slot_name(body, slot));
                }
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

    /// Expands every call in a graph (its subgraphs first, node by node); a graph that changed
    /// is renumbered.
    pub(crate) fn graph(&mut self, g: &mut Graph, depth: usize) -> Result<(), FunctionError> {
        let order = std::mem::take(&mut g.order);
        let mut out = Vec::with_capacity(order.len());
        let mut changed = false;
        for id in order {
            for a in g.nodes[id.index()].attributes.iter_mut() {
                for sub in a.value.subgraphs_mut() {
                    self.graph(sub, depth)?;
                }
            }
            if self.funcs.contains_key(&key_of_node(g.node(id))) {
                let call = g.node(id).clone();
                self.expand(g, call, depth, &mut out)?;
                changed = true;
            } else {
                out.push(id);
            }
        }
        g.order = out;
        if changed {
            renumber(g);
        }
        Ok(())
    }

    /// Appends `n` (its handles into `g`) to `g`'s arena and to `out`, or the body of the
    /// function it calls (recursively expanded).
    fn node(
        &mut self,
        g: &mut Graph,
        n: Node,
        depth: usize,
        out: &mut Vec<NodeId>,
    ) -> Result<(), FunctionError> {
        if !self.funcs.contains_key(&key_of_node(&n)) {
            out.push(NodeId(g.nodes.len() as u32));
            g.nodes.push(n);
            return Ok(());
        }
        self.expand(g, n, depth, out)
    }

    /// Appends the body of the function `call` calls, its values renamed apart, its calls
    /// expanded.
    fn expand(
        &mut self,
        g: &mut Graph,
        call: Node,
        depth: usize,
        out: &mut Vec<NodeId>,
    ) -> Result<(), FunctionError> {
        let funcs = self.funcs;
        let f = &funcs[&key_of_node(&call)];
        let fname = f.name.as_deref().unwrap_or("");
        if depth >= MAX_DEPTH {
            return Err(FunctionError::TooDeep {
                function: fname.to_string(),
                limit: MAX_DEPTH,
            });
        }
        self.calls += 1;
        let body = &f.body;
        // The body's values in `g`, and their names (what the body's subgraphs read).
        let mut values: HashMap<ValueId, Option<ValueId>> = HashMap::new();
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        for (i, &formal) in body.inputs.iter().enumerate() {
            let actual = call.inputs.get(i).copied().flatten();
            values.insert(formal, actual);
            names.insert(body.value(formal).name.to_string(), slot_name(g, actual));
        }
        for (i, &formal) in body.outputs.iter().enumerate() {
            let formal_name = body.value(formal).name.to_string();
            let actual = match call.outputs.get(i).copied().flatten() {
                Some(a) if !g.value(a).name.is_empty() => a,
                _ => {
                    let m = self.fresh(&formal_name);
                    g.add_value(Value::new(m))
                }
            };
            values.insert(formal, Some(actual));
            names.insert(formal_name, g.value(actual).name.to_string());
        }
        let call_name = match &call.name {
            Some(n) => n.to_string(),
            None => fname.to_string(),
        };
        for (_, b) in body.nodes_in_order() {
            let mut c = b.clone();
            // Formal values map to the call's; the body's own values get fresh names.
            for slot in c.inputs.iter_mut().chain(c.outputs.iter_mut()) {
                let Some(v) = *slot else { continue };
                *slot = match values.get(&v) {
                    Some(&m) => m,
                    None => {
                        let name = body.value(v).name.to_string();
                        let m = self.fresh(&name);
                        let id = g.add_value(Value::new(m.clone()));
                        values.insert(v, Some(id));
                        names.insert(name, m);
                        Some(id)
                    }
                };
            }
            c.name = Some(Name::from(match b.name.as_deref() {
                Some(bn) if !bn.is_empty() => format!("{call_name}/{bn}"),
                _ => call_name.clone(),
            }));
            c.attributes = resolve_refs(std::mem::take(&mut c.attributes), &call, f)?;
            // Subgraphs read the body's values by name: renamed the same way, their own
            // values renamed apart.
            for a in c.attributes.iter_mut() {
                for sub in a.value.subgraphs_mut() {
                    self.scope(sub, &names, &call, f, depth + 1)?;
                }
            }
            self.node(g, c, depth + 1, out)?;
        }
        Ok(())
    }

    /// Renames a subgraph of an inlined body node: the body's values it reads through `outer`,
    /// the values it defines apart; then expands the calls in it.
    fn scope(
        &mut self,
        g: &mut Graph,
        outer: &BTreeMap<String, String>,
        call: &Node,
        f: &Function,
        depth: usize,
    ) -> Result<(), FunctionError> {
        let mut map = outer.clone();
        // The names it reads from the body (never ones it defines, or they would not be
        // outer reads).
        for v in g.values.iter_mut().filter(|v| v.is_outer) {
            if let Some(m) = outer.get(v.name.as_str()) {
                v.name = Name::from(m.as_str());
            }
        }
        let mut defined = vec![false; g.values.len()];
        let inputs = g.inputs.clone();
        let initializers = g.initializers.clone();
        for v in inputs.into_iter().chain(initializers) {
            self.define(g, v, &mut defined, &mut map);
        }
        for id in g.order.clone() {
            let outputs = g.node(id).outputs.clone();
            for v in outputs.into_iter().flatten() {
                self.define(g, v, &mut defined, &mut map);
            }
            let node = g.node_mut(id);
            node.attributes = resolve_refs(std::mem::take(&mut node.attributes), call, f)?;
            for a in node.attributes.iter_mut() {
                for sub in a.value.subgraphs_mut() {
                    self.scope(sub, &map, call, f, depth)?;
                }
            }
        }
        self.graph(g, depth)?;
        // Outer reads renamed to one name are one value.
        renumber(g);
        Ok(())
    }

    /// Gives a value a fresh name (once), recorded in `map`.
    fn define(
        &mut self,
        g: &mut Graph,
        v: ValueId,
        defined: &mut [bool],
        map: &mut BTreeMap<String, String>,
    ) {
        let name = g.value(v).name.to_string();
        if name.is_empty() || std::mem::replace(&mut defined[v.index()], true) {
            return;
        }
        let m = self.fresh(&name);
        g.value_mut(v).name = Name::from(m.as_str());
        map.insert(name, m);
    }
}

/// A function's body with every attribute reference (`@alpha`, subgraphs too) bound as `call`
/// binds it: the caller's attribute, else the function's default, else absent.
pub(crate) fn body_bound_by(call: &Node, f: &Function) -> Result<Graph, FunctionError> {
    fn bind(g: &mut Graph, call: &Node, f: &Function) -> Result<(), FunctionError> {
        let ids: Vec<_> = g.nodes_in_order().map(|(id, _)| id).collect();
        for id in ids {
            let node = g.node_mut(id);
            node.attributes = resolve_refs(std::mem::take(&mut node.attributes), call, f)?;
            for a in node.attributes.iter_mut() {
                for sub in a.value.subgraphs_mut() {
                    bind(sub, call, f)?;
                }
            }
        }
        Ok(())
    }
    let mut body = f.body.clone();
    bind(&mut body, call, f)?;
    Ok(body)
}

/// A body node's attributes with references (`@alpha`) replaced by the caller's attribute,
/// else the function's default; a reference to neither is dropped (the attribute is absent).
fn resolve_refs(
    attrs: Vec<Attribute>,
    call: &Node,
    f: &Function,
) -> Result<Vec<Attribute>, FunctionError> {
    let mut out = Vec::with_capacity(attrs.len());
    for a in attrs {
        let Some(r) = a.ref_attr_name().map(str::to_string) else {
            out.push(a);
            continue;
        };
        let given = match call.attribute(&r) {
            Some(x) => Some(x.clone()),
            None => match f
                .attribute_protos
                .iter()
                .find(|x| x.name.as_deref() == Some(r.as_str()))
            {
                Some(p) => {
                    Some(
                        attribute_of(p.clone()).map_err(|source| FunctionError::Default {
                            function: f.name.as_deref().unwrap_or("").to_string(),
                            attribute: r.clone(),
                            source,
                        })?,
                    )
                }
                None => None,
            },
        };
        if let Some(mut v) = given {
            let proto_name = a.fields().and_then(|p| p.name.clone());
            v.name = a.name.clone();
            let fields = match &mut v.value {
                AttributeValue::Proto(p) => Some(&mut **p),
                _ => v.rest.as_deref_mut(),
            };
            if let Some(p) = fields {
                p.name = proto_name;
                p.ref_attr_name = None;
            }
            out.push(v);
        }
    }
    Ok(out)
}

/// An attribute of its protobuf (a function's default), subgraphs converted.
fn attribute_of(mut p: AttributeProto) -> Result<Attribute, IrError> {
    let name = Name::from(p.name.as_deref().unwrap_or(""));
    let value = match (p.g.take(), std::mem::take(&mut p.graphs)) {
        (None, graphs) if graphs.is_empty() => {
            return Ok(Attribute {
                name,
                value: AttributeValue::Proto(Box::new(p)),
                rest: None,
            })
        }
        (Some(g), _) => AttributeValue::Graph(Box::new(Graph::from_proto_subgraph(g)?)),
        (None, graphs) => AttributeValue::Graphs(
            graphs
                .into_iter()
                .map(Graph::from_proto_subgraph)
                .collect::<Result<_, _>>()?,
        ),
    };
    Ok(Attribute {
        name,
        value,
        rest: Some(Box::new(p)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Model {
        crate::parse_text(text).expect("test model parses")
    }

    /// Inlines a model and checks the result is laid out as its own protobuf imports (what the
    /// passes after see does not depend on how the inliner edited the graph).
    fn inline(text: &str) -> (Model, Inlined) {
        let mut m = parse(text);
        let done = inline_local_functions(&mut m).expect("inlines");
        let again = Model::from_proto(m.to_proto()).expect("imports");
        assert_eq!(
            again, m,
            "the inlined IR is not what its protobuf imports to"
        );
        (m, done)
    }

    fn ops(g: &Graph) -> Vec<String> {
        g.nodes_in_order()
            .map(|(_, n)| n.op_type.to_string())
            .collect()
    }

    const NESTED: &str = r#"<ir_version: 9, opset_import: ["" : 20, "local" : 1]>
g (float[2,3] x) => (float[2,1] y, float[2,3] z) {
  y = local.ScaledSum <alpha: float = 0.5> (x)
  z = local.Scaled (x)
}
<domain: "local", opset_import: ["" : 20, "local" : 1]>
Scaled <alpha: float = 2.0> (a) => (b) {
  c = Constant <value_float: float = @alpha> ()
  b = Mul (a, c)
}
<domain: "local", opset_import: ["" : 20, "local" : 1]>
ScaledSum <alpha> (a) => (s) {
  b = local.Scaled <alpha: float = @alpha> (a)
  axes = Constant <value_ints: ints = [1]> ()
  s = ReduceSum <keepdims: int = 1> (b, axes)
}"#;

    #[test]
    fn nested_calls_are_inlined_with_fresh_names_and_resolved_references() {
        let (m, done) = inline(NESTED);
        assert_eq!(
            done,
            Inlined {
                calls: 3,
                functions: 2
            }
        );
        assert!(m.functions.is_empty());
        assert_eq!(
            ops(&m.graph),
            [
                "Constant",
                "Mul",
                "Constant",
                "ReduceSum",
                "Constant",
                "Mul"
            ]
        );
        let names: Vec<String> = m
            .graph
            .nodes_in_order()
            .map(|(_, n)| n.name_or_empty().to_string())
            .collect();
        // Unnamed nodes take their call's name (a nested call's is its caller's).
        assert_eq!(
            names,
            [
                "ScaledSum",
                "ScaledSum",
                "ScaledSum",
                "ScaledSum",
                "Scaled",
                "Scaled"
            ]
        );
        // The caller's alpha in the nested call, the function's default in the other.
        let alpha = |i: usize| {
            let (_, n) = m.graph.nodes_in_order().nth(i).unwrap();
            n.attribute("value_float").and_then(Attribute::as_float)
        };
        assert_eq!((alpha(0), alpha(4)), (Some(0.5), Some(2.0)));
        // The import of the functions' domain goes with them.
        assert!(m.opset_imports.iter().all(|o| o.domain.as_str() != "local"));
    }

    #[test]
    fn a_body_subgraph_reads_the_body_values_by_their_new_names() {
        let text = r#"<ir_version: 9, opset_import: ["" : 18, "local" : 1]>
g (float[2,3] x, bool c) => (float[2,3] y, float[2,3] w) {
  y = local.F (x, c)
  w = local.F (x, c)
}
<domain: "local", opset_import: ["" : 18]>
F (a, c) => (b) {
  k = Neg (a)
  b = If (c) <then_branch = g1 () => (float[2,3] t) { t = Mul (a, k) }, else_branch = g2 () => (float[2,3] e) { e = Sub (k, a) }>
}"#;
        let (m, done) = inline(text);
        assert_eq!(done.calls, 2);
        let g = &m.graph;
        let (_, neg) = g.nodes_in_order().nth(2).unwrap();
        let (_, iff) = g.nodes_in_order().nth(3).unwrap();
        let k = g.value(neg.outputs[0].unwrap()).name.to_string();
        // The first call's k, t, e took counters 1 to 3.
        assert_eq!(k, "k__inl4");
        let then = iff.subgraphs().next().unwrap();
        assert_eq!(then.outer_reads(), [Name::from("k__inl4"), Name::from("x")]);
        let t = then.value(then.outputs[0]).name.to_string();
        assert_eq!(t, "t__inl5");
    }

    #[test]
    fn recursion_and_unseeded_random_bodies_are_refused_by_name() {
        let rec = r#"<ir_version: 9, opset_import: ["" : 18, "local" : 1]>
g (float[2] x) => (float[2] y) {
  y = local.F (x)
}
<domain: "local", opset_import: ["" : 18, "local" : 1]>
F (a) => (b) {
  b = local.F (a)
}"#;
        let err = inline_local_functions(&mut parse(rec)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "local function 'F': calls nested deeper than 64 (recursion?)"
        );
        let random = r#"<ir_version: 9, opset_import: ["" : 18, "local" : 1]>
g (float[2] x) => (float[2] y) {
  y = local.F (x)
}
<domain: "local", opset_import: ["" : 18]>
F (a) => (b) {
  r = RandomUniformLike (a)
  b = Add (a, r)
}"#;
        let err = inline_local_functions(&mut parse(random)).unwrap_err();
        assert!(
            matches!(&err, FunctionError::UnseededRandom { function, op, .. } if function == "F" && op == "RandomUniformLike"),
            "{err}"
        );
    }
}
