//! Writing an extracted selection back as an IR graph: nodes in topological order (post-order
//! from the outputs), surviving values keep one of their original names (deterministically),
//! surviving nodes keep their names and metadata, graph inputs and outputs keep their names,
//! order and types (an output whose class is an input, a constant or another output is written
//! through an Identity), and constants become initializers.

use std::collections::{BTreeMap, BTreeSet};

use egg::Id;
use onnx_ir::{Attribute, AttributeValue, Graph, Node, Value, ValueId};
use onnx_proto::AttributeProto;

use crate::analysis::OnnxEGraph;
use crate::extract::Selection;
use crate::lang::{NodeKind, ONode};
use crate::lift::Lifted;
use crate::EGraphError;

/// Options of [`emit_graph`].
#[derive(Debug, Clone, Default)]
pub struct EmitOptions {
    /// Below IR version 4 every initializer must also be a graph input.
    pub initializers_are_inputs: bool,
    /// New constants are written as `Constant` nodes, not initializers: a subgraph below IR
    /// version 4 cannot hold initializers (they would have to be inputs it does not have).
    pub constants_as_nodes: bool,
    /// Names a fresh name must not take: the enclosing scopes' names and the names inside the
    /// graph's own (already optimized) subgraphs. A name may not repeat across nested scopes.
    pub reserved: BTreeSet<String>,
}

struct Emitter<'a> {
    egraph: &'a OnnxEGraph,
    sel: &'a Selection,
    lifted: &'a Lifted,
    original: &'a Graph,
    out: Graph,
    used_names: BTreeSet<String>,
    /// Names of the original graph (never reused for a different value by a fresh name).
    reserved: BTreeSet<String>,
    value_of: BTreeMap<Id, ValueId>,
    /// Tuple class -> emitted node's outputs.
    tuple_outputs: BTreeMap<Id, Vec<Option<ValueId>>>,
    /// Classes named after a graph output.
    output_name: BTreeMap<Id, String>,
    origin_of: BTreeMap<ONode, onnx_ir::NodeId>,
    fresh: usize,
    new_initializers: Vec<ValueId>,
    constants_as_nodes: bool,
}

/// Builds the optimized graph from a selection.
pub fn emit_graph(
    lifted: &Lifted,
    original: &Graph,
    sel: &Selection,
    options: EmitOptions,
) -> Result<Graph, EGraphError> {
    let egraph = &lifted.egraph;
    let mut origin_of = BTreeMap::new();
    for o in &lifted.origins {
        let canon = ONode::new(
            o.enode.kind,
            o.enode.children.iter().map(|&c| egraph.find(c)).collect(),
        );
        origin_of.entry(canon).or_insert(o.node);
    }
    let mut reserved = options.reserved.clone();
    for v in &original.values {
        reserved.insert(v.name.to_string());
    }
    let mut out = Graph::new(original.name.clone().unwrap_or_default());
    out.name = original.name.clone();
    out.doc_string = original.doc_string.clone();
    out.metadata_props = original.metadata_props.clone();
    let mut e = Emitter {
        egraph,
        sel,
        lifted,
        original,
        out,
        used_names: BTreeSet::new(),
        reserved,
        value_of: BTreeMap::new(),
        tuple_outputs: BTreeMap::new(),
        output_name: BTreeMap::new(),
        origin_of,
        fresh: 0,
        new_initializers: Vec::new(),
        constants_as_nodes: options.constants_as_nodes,
    };
    // Graph inputs first, with their original values (name, type, doc string).
    let mut input_ids = BTreeMap::new();
    for (k, &v) in lifted.inputs.iter().enumerate() {
        let nv = e.out.add_value(original.value(v).clone_detached());
        e.used_names.insert(original.value(v).name.to_string());
        input_ids.insert(k, nv);
    }
    for &v in &original.outputs {
        e.used_names.insert(original.value(v).name.to_string());
    }
    let root = egraph.find(lifted.root);
    let root_node = sel
        .choice
        .get(&root)
        .ok_or(EGraphError::NoExtraction)?
        .clone();
    // Outputs produced by a node take the output's name (the first output of a class wins).
    for (i, &c) in root_node.children.iter().enumerate() {
        let c = egraph.find(c);
        let produced = matches!(sel.choice[&c].kind, NodeKind::Op(_) | NodeKind::Out(_));
        let name = original.value(original.outputs[i]).name.to_string();
        // An unseeded random op writes its own name (then an Identity the output's).
        let renames_random = e.unseeded_random_name(c).is_some_and(|n| n != name);
        if produced && !renames_random && !e.output_name.contains_key(&c) {
            e.output_name.insert(c, name);
        }
    }
    for (k, nv) in input_ids {
        let c = e.input_class(k);
        if let Some(c) = c {
            e.value_of.insert(c, nv);
        }
    }
    // Emit in post-order.
    for c in post_order(egraph, sel, &root_node.children) {
        e.emit_class(c)?;
    }
    // Graph outputs.
    let mut outputs = Vec::new();
    let mut claimed = BTreeSet::new();
    for (i, &c) in root_node.children.iter().enumerate() {
        let c = egraph.find(c);
        let orig = original.value(original.outputs[i]);
        let v = e.value(c)?;
        let direct = e.output_name.get(&c) == Some(&orig.name.to_string()) && claimed.insert(c);
        // An output that is an input (or outer value) of the same name in the original (a Loop
        // body passing `cond` through) stays that value: an Identity would define it twice.
        let same_value = e.out.value(v).name.as_str() == orig.name.as_str()
            && matches!(sel.choice[&c].kind, NodeKind::Input(_));
        let out_v = if direct || same_value {
            v
        } else {
            let nv = e.out.add_value(Value::new(orig.name.as_str()));
            // A sequence or optional output is computed again rather than copied: Identity
            // takes them only from opsets 14 and 16.
            let tensor = orig.ty.as_ref().is_none_or(|t| {
                matches!(t.value, Some(onnx_proto::type_proto::Value::TensorType(_)))
            });
            let producer = e.out.value(v).producer;
            match producer {
                Some((nid, 0)) if !tensor && e.out.node(nid).outputs.len() == 1 => {
                    let mut copy = e.out.node(nid).clone();
                    copy.name = None;
                    copy.outputs = vec![Some(nv)];
                    let cid = e.out.add_node(copy);
                    e.out.value_mut(nv).producer = Some((cid, 0));
                }
                _ => {
                    e.out
                        .add_node(Node::new("Identity", vec![Some(v)], vec![Some(nv)]));
                    e.out.value_mut(nv).producer = None;
                }
            }
            nv
        };
        let ov = e.out.value_mut(out_v);
        ov.ty = orig.ty.clone();
        ov.doc_string = orig.doc_string.clone();
        ov.metadata_props = orig.metadata_props.clone();
        outputs.push(out_v);
    }
    e.out.outputs = outputs;
    // Inputs: the original real inputs, in order; initializers that were inputs stay inputs
    // while they survive; below IR 4 new initializers are appended as inputs too.
    let mut inputs = Vec::new();
    let by_name: BTreeMap<String, ValueId> = e
        .out
        .values_with_ids()
        .map(|(id, v)| (v.name.to_string(), id))
        .collect();
    for &v in &original.inputs {
        let name = original.value(v).name.to_string();
        if let Some(&nv) = by_name.get(&name) {
            if !original.is_initializer(v) || e.out.is_initializer(nv) {
                inputs.push(nv);
            }
        }
    }
    if options.initializers_are_inputs {
        for &v in &e.new_initializers {
            if !inputs.contains(&v) {
                inputs.push(v);
            }
        }
    }
    e.out.inputs = inputs;
    // value_info: names that had it in the input and survive, with the analysis' type.
    let had_info: BTreeSet<String> = original
        .value_info
        .iter()
        .map(|&v| original.value(v).name.to_string())
        .collect();
    let mut info = Vec::new();
    for (c, &v) in &e.value_of {
        let name = e.out.value(v).name.to_string();
        if had_info.contains(&name) && !e.out.outputs.contains(&v) && !e.out.inputs.contains(&v) {
            if let Some(ty) = egraph[*c].data.ty.clone() {
                e.out.value_mut(v).ty = Some(ty);
                info.push(v);
            }
        }
    }
    info.sort_by(|a, b| e.out.value(*a).name.cmp(&e.out.value(*b).name));
    e.out.value_info = info;
    let surviving: BTreeSet<String> = e.out.values.iter().map(|v| v.name.to_string()).collect();
    e.out.quantization_annotation = original
        .quantization_annotation
        .iter()
        .filter(|q| {
            q.tensor_name
                .as_ref()
                .is_some_and(|n| surviving.contains(n))
        })
        .cloned()
        .collect();
    Ok(e.out)
}

/// Classes reachable from `roots` through the selection, children before parents.
fn post_order(egraph: &OnnxEGraph, sel: &Selection, roots: &[Id]) -> Vec<Id> {
    let mut done = BTreeSet::new();
    let mut order = Vec::new();
    let mut stack: Vec<(Id, bool)> = roots
        .iter()
        .rev()
        .map(|&c| (egraph.find(c), false))
        .collect();
    while let Some((c, expanded)) = stack.pop() {
        if expanded {
            order.push(c);
            continue;
        }
        if !done.insert(c) {
            continue;
        }
        stack.push((c, true));
        if let Some(n) = sel.choice.get(&c) {
            for &k in n.children.iter().rev() {
                let k = egraph.find(k);
                if !done.contains(&k) {
                    stack.push((k, false));
                }
            }
        }
    }
    order
}

trait CloneDetached {
    fn clone_detached(&self) -> Value;
}

impl CloneDetached for Value {
    fn clone_detached(&self) -> Value {
        let mut v = self.clone();
        v.producer = None;
        v
    }
}

impl Emitter<'_> {
    fn input_class(&self, k: usize) -> Option<Id> {
        let leaf = ONode::leaf(NodeKind::Input(k as u32));
        self.egraph.lookup(leaf).map(|c| self.egraph.find(c))
    }

    fn value(&self, c: Id) -> Result<ValueId, EGraphError> {
        self.value_of
            .get(&c)
            .copied()
            .ok_or_else(|| EGraphError::Internal(format!("class {c} has no emitted value")))
    }

    /// The name an unseeded random op in class `c` had (a lifted one, or one rebound from it in
    /// the same class): the interpreter keys its stream by that name, so it is kept.
    fn unseeded_random_name(&self, c: Id) -> Option<String> {
        let node = self.sel.choice.get(&c)?;
        let NodeKind::Op(op) = node.kind else {
            return None;
        };
        let info = self.egraph.analysis.ops.get(op);
        if !crate::build::RANDOM_OPS.contains(&info.op_type.as_str()) {
            return None;
        }
        let roles = crate::build::Roles::new(info, &node.children);
        let seeded = roles.attr("seed").is_some_and(|a| {
            !self.egraph[a]
                .nodes
                .iter()
                .any(|n| matches!(n.kind, NodeKind::None))
        });
        if seeded {
            return None;
        }
        self.egraph[c].nodes.iter().find_map(|n| {
            let u = self.egraph[*n.children.last()?].nodes.first()?.kind;
            match u {
                NodeKind::Unique(k) => self.egraph.analysis.unique_names.get(&k).cloned(),
                _ => None,
            }
        })
    }

    /// A name for a class's value: a graph output's name, else one of its original names not
    /// taken, else a fresh one. An unseeded random op keeps its own name.
    fn name_for(&mut self, c: Id, prefix: &str) -> String {
        if let Some(n) = self.output_name.get(&c) {
            return n.clone();
        }
        if let Some(n) = self.unseeded_random_name(c) {
            if !self.used_names.contains(&n) && !self.is_output_name(&n) {
                self.used_names.insert(n.clone());
                return n;
            }
        }
        let names = &self.egraph[c].data.names;
        for n in names {
            if !self.used_names.contains(n) && !self.is_output_name(n) {
                self.used_names.insert(n.clone());
                return n.clone();
            }
        }
        loop {
            self.fresh += 1;
            let n = format!("{prefix}_{}", self.fresh);
            if !self.used_names.contains(&n) && !self.reserved.contains(&n) {
                self.used_names.insert(n.clone());
                return n;
            }
        }
    }

    fn is_output_name(&self, n: &str) -> bool {
        self.original
            .outputs
            .iter()
            .any(|&o| &*self.original.value(o).name == n)
    }

    fn emit_class(&mut self, c: Id) -> Result<(), EGraphError> {
        if self.value_of.contains_key(&c) || self.tuple_outputs.contains_key(&c) {
            return Ok(());
        }
        let node = self.sel.choice[&c].clone();
        match node.kind {
            NodeKind::Input(k) => {
                let k = k as usize;
                let n = self.lifted.inputs.len();
                if k >= n {
                    let name = self.lifted.outer[k - n].clone();
                    let mut v = Value::new(name.as_str());
                    v.is_outer = true;
                    let id = self.out.add_value(v);
                    self.value_of.insert(c, id);
                }
            }
            NodeKind::Const(k) => {
                let prefer: Option<String> = self.egraph[c]
                    .data
                    .names
                    .iter()
                    .find(|n| {
                        self.lifted.initializer_names.contains_key(*n)
                            && !self.used_names.contains(*n)
                    })
                    .cloned();
                let name = match prefer {
                    Some(n) => {
                        self.used_names.insert(n.clone());
                        n
                    }
                    None => self.name_for(c, "onnx_opt_const"),
                };
                let entry = self.egraph.analysis.consts.get(k);
                let mut t = (*entry.tensor).clone();
                t.name = Some(name.clone());
                let mut v = Value::new(name.as_str());
                if let Some(&ov) = self.lifted.initializer_names.get(&name) {
                    let o = self.original.value(ov);
                    v.doc_string = o.doc_string.clone();
                    v.metadata_props = o.metadata_props.clone();
                    v.ty = o.ty.clone();
                }
                if v.ty.is_none() {
                    v.ty = Some(crate::types::tensor_type_of(&t));
                }
                if self.constants_as_nodes {
                    let id = self.out.add_value(v);
                    t.name = None;
                    let mut node = Node::new("Constant", Vec::new(), vec![Some(id)]);
                    node.attributes.push(Attribute {
                        name: "value".into(),
                        value: AttributeValue::Proto(Box::new(AttributeProto {
                            name: Some("value".into()),
                            r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
                            t: Some(t),
                            ..Default::default()
                        })),
                        rest: None,
                    });
                    let nid = self.out.add_node(node);
                    self.out.value_mut(id).producer = Some((nid, 0));
                    self.value_of.insert(c, id);
                    return Ok(());
                }
                v.initializer = Some(t);
                let id = self.out.add_value(v);
                self.out.initializers.push(id);
                self.new_initializers.push(id);
                self.value_of.insert(c, id);
            }
            NodeKind::Op(_) => self.emit_op(c, &node)?,
            NodeKind::Out(i) => {
                let t = self.egraph.find(node.children[0]);
                self.emit_class(t)?;
                let v = self
                    .tuple_outputs
                    .get(&t)
                    .and_then(|outs| outs.get(i as usize).copied().flatten())
                    .ok_or_else(|| {
                        EGraphError::Internal(format!("output {i} of class {t} missing"))
                    })?;
                self.value_of.insert(c, v);
            }
            NodeKind::Attr(_) | NodeKind::None | NodeKind::Unique(_) | NodeKind::Root => {}
        }
        Ok(())
    }

    fn emit_op(&mut self, c: Id, node: &ONode) -> Result<(), EGraphError> {
        let NodeKind::Op(op) = node.kind else {
            return Ok(());
        };
        let info = self.egraph.analysis.ops.get(op).clone();
        let n_attrs = info.attr_names.len();
        let schema =
            onnx_schema::registry().lookup(&info.domain, &info.op_type, info.since_version);
        let canon = ONode::new(
            node.kind,
            node.children.iter().map(|&k| self.egraph.find(k)).collect(),
        );
        let origin = self.origin_of.get(&canon).map(|&n| self.original.node(n));
        // Attributes: skip absent ones and those equal to the schema default the original node
        // did not spell out.
        let implicit_ids: Vec<Id> = node.children
            [n_attrs + info.n_inputs..n_attrs + info.n_inputs + info.implicit_inputs.len()]
            .iter()
            .map(|&k| self.egraph.find(k))
            .collect();
        let mut renames = BTreeMap::new();
        for (name, &k) in info.implicit_inputs.iter().zip(&implicit_ids) {
            let v = self.value(k)?;
            let new = self.out.value(v).name.to_string();
            if &new != name {
                renames.insert(name.clone(), new);
            }
        }
        let mut attributes = Vec::new();
        for (name, &k) in info.attr_names.iter().zip(&node.children[..n_attrs]) {
            let k = self.egraph.find(k);
            let Some(a) = self.egraph[k].data.attr else {
                continue;
            };
            let proto = self.egraph.analysis.attrs.get(a);
            let spelled = origin.is_some_and(|o| o.attribute(name).is_some());
            // An op whose types onnx infers by expanding its function body (no inference of
            // its own) keeps its attributes spelled out: the body may read one without the
            // schema's default (MeanVarianceNormalization's `axes` from opset 18), and
            // onnx.checker rejects the node then.
            let has_body =
                schema.is_some_and(|s| s.has_function() && !s.has_type_and_shape_inference);
            if !spelled && !has_body {
                if let Some(def) = schema
                    .and_then(|s| s.attribute(name))
                    .and_then(|s| s.default.as_ref())
                {
                    if crate::tables::AttrValue::new(def.clone())
                        == crate::tables::AttrValue::new(proto.clone())
                    {
                        continue;
                    }
                }
            }
            attributes.push(self.attribute(name, proto, &renames)?);
        }
        let mut inputs = Vec::with_capacity(info.n_inputs);
        for &k in &node.children[n_attrs..n_attrs + info.n_inputs] {
            let k = self.egraph.find(k);
            if self.sel.choice[&k].kind == NodeKind::None {
                inputs.push(None);
            } else {
                inputs.push(Some(self.value(k)?));
            }
        }
        // Trailing absent inputs are dropped, as ONNX writers do.
        while inputs.last() == Some(&None) {
            inputs.pop();
        }
        let runtime_outputs = schema.map_or(0, |s| {
            crate::build::outputs_runtimes_need(s, |i| inputs.get(i).is_some_and(Option::is_some))
        });
        let mut ir_node = Node::new(info.op_type.as_str(), inputs, Vec::new());
        ir_node.domain = info.domain.as_str().into();
        ir_node.attributes = attributes;
        if let Some(o) = origin {
            ir_node.name = o.name.clone();
            ir_node.doc_string = o.doc_string.clone();
            ir_node.metadata_props = o.metadata_props.clone();
            ir_node.overload = o.overload.clone();
            ir_node.device_configurations = o.device_configurations.clone();
            ir_node.field_presence = o.field_presence;
        }
        if info.is_tuple {
            // Which outputs are used: the Out(i) classes present in the selection.
            let mut used: BTreeMap<usize, Id> = BTreeMap::new();
            for (&cls, n) in &self.sel.choice {
                if let NodeKind::Out(i) = n.kind {
                    if self.egraph.find(n.children[0]) == c {
                        used.entry(i as usize).or_insert(cls);
                    }
                }
            }
            let last_used = used.keys().next_back().map_or(0, |&i| i + 1);
            // Where the count is meaning, every output is written (see
            // `output_count_is_meaning`).
            let variadic = onnx_schema::registry()
                .lookup(&info.domain, &info.op_type, info.since_version)
                .is_some_and(crate::build::output_count_is_meaning);
            // Past the minimum, every output is written: some ops allow no count in between
            // (BatchNormalization-7 takes 1 or 5 outputs).
            let n_out = if variadic || last_used > info.min_outputs {
                info.n_outputs.max(last_used)
            } else {
                last_used
                    .max(info.min_outputs)
                    .min(info.n_outputs.max(last_used))
            };
            let n_out = n_out.max(runtime_outputs.min(info.n_outputs));
            let mut outs = Vec::with_capacity(n_out);
            for i in 0..n_out {
                let name = match used.get(&i) {
                    Some(&cls) => self.name_for(cls, &info.op_type),
                    None => self.name_for_fresh(&info.op_type),
                };
                outs.push(Some(self.out.add_value(Value::new(name.as_str()))));
            }
            ir_node.outputs = outs.clone();
            let nid = self.out.add_node(ir_node);
            for (i, o) in outs.iter().enumerate() {
                if let Some(o) = o {
                    self.out.value_mut(*o).producer = Some((nid, i));
                }
            }
            self.tuple_outputs.insert(c, outs);
        } else {
            let name = self.name_for(c, &info.op_type);
            let v = self.out.add_value(Value::new(name.as_str()));
            ir_node.outputs = vec![Some(v)];
            let nid = self.out.add_node(ir_node);
            self.out.value_mut(v).producer = Some((nid, 0));
            self.value_of.insert(c, v);
        }
        Ok(())
    }

    fn name_for_fresh(&mut self, prefix: &str) -> String {
        loop {
            self.fresh += 1;
            let n = format!("{prefix}_unused_{}", self.fresh);
            if !self.used_names.contains(&n) && !self.reserved.contains(&n) {
                self.used_names.insert(n.clone());
                return n;
            }
        }
    }

    fn attribute(
        &self,
        name: &str,
        proto: &AttributeProto,
        renames: &BTreeMap<String, String>,
    ) -> Result<Attribute, EGraphError> {
        let mut p = proto.clone();
        p.name = Some(name.to_string());
        if p.g.is_none() && p.graphs.is_empty() {
            return Ok(Attribute {
                name: name.into(),
                value: AttributeValue::Proto(Box::new(p)),
                rest: None,
            });
        }
        let convert = |g: onnx_proto::GraphProto| -> Result<Graph, EGraphError> {
            let mut g =
                Graph::from_proto_subgraph(g).map_err(|e| EGraphError::Ir(e.to_string()))?;
            rename_outer(&mut g, renames);
            Ok(g)
        };
        let value = if let Some(g) = p.g.take() {
            AttributeValue::Graph(Box::new(convert(g)?))
        } else {
            AttributeValue::Graphs(
                std::mem::take(&mut p.graphs)
                    .into_iter()
                    .map(convert)
                    .collect::<Result<_, _>>()?,
            )
        };
        Ok(Attribute {
            name: name.into(),
            value,
            rest: Some(Box::new(p)),
        })
    }
}

/// Renames outer-scope reads of a subgraph (and its nested subgraphs).
fn rename_outer(g: &mut Graph, renames: &BTreeMap<String, String>) {
    if renames.is_empty() {
        return;
    }
    for v in g.values.iter_mut().filter(|v| v.is_outer) {
        if let Some(n) = renames.get(v.name.as_str()) {
            v.name = n.as_str().into();
        }
    }
    for node in g.nodes.iter_mut() {
        for a in node.attributes.iter_mut() {
            for sub in a.value.subgraphs_mut() {
                rename_outer(sub, renames);
            }
        }
    }
}
