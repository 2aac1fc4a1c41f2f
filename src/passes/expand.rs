//! Operators the target opset does not have, written with their schema's function body: when a
//! conversion goes below the opset that introduced an op (DynamicQuantizeLinear below 11),
//! each node of it is replaced by the context-independent
//! body onnx gives (attribute references resolved from the node, else the schema's defaults;
//! nested ops the target lacks expanded the same way), and the body then converts with the
//! graph. The result is checked against the original like any conversion.
//!
//! Ops whose body onnx builds per node (Attention, RotaryEmbedding, ...): a node of the main
//! graph takes the recorded instance built for a node like it (`instance_fits`), if any.
//!
//! Left to the version rules: the ops written out by the rules generated from the schemas'
//! bodies (`rules/version/bodies.rules`, see `onnx_rules::version_steps::bodies_text`) and by
//! the hand-written `rules/version/decompose.rules` (LayerNormalization, Gelu, ...), at the
//! model's opset; LayerNormalization with its statistics outputs takes an instance, which the
//! rules do not cover. So this pass writes the bodies those rules cannot: several outputs
//! (DynamicQuantizeLinear), a body built per node, a Loop (Range below 11 is hand-written).
//! A body's variance written as `E[x^2] - E[x]^2` (LayerNormalization's instances) is
//! rewritten to the two-pass `E[(x - E[x])^2]` first (`two_pass_variance`).
//! Not used: the bodies listed in `UNSOUND_BODIES` (AffineGrid's differs from the op at a size
//! of 1), and a body whose ops bind, at the model's opset, versions of another signature than
//! at its own.

use std::collections::{BTreeMap, BTreeSet};

use onnx_ir::{Function, Graph, Model, Name, Node};
use onnx_proto::{AttributeProto, FunctionProto};
use onnx_rules::version_steps::UNSOUND_BODIES;

use crate::passes::inline::{version_in, FnKey, FunctionError, Inliner};

/// The default-domain ops of a graph, its subgraphs included.
fn ops_in(g: &Graph, out: &mut BTreeSet<String>) {
    for (_, n) in g.nodes_in_order() {
        if onnx_schema::normalize_domain(&n.domain).is_empty() {
            out.insert(n.op_type.to_string());
        }
        for sub in n.subgraphs() {
            ops_in(sub, out);
        }
    }
}

/// The default-domain ops of a body, its subgraphs included.
fn body_ops(body: &Function) -> BTreeSet<String> {
    let mut ops = BTreeSet::new();
    ops_in(&body.body, &mut ops);
    ops
}

/// The ops the built-in version rules write out at `model_opset` (their left roots): the rules
/// generated from the schemas' bodies and the hand-written decompositions.
fn decomposed_by_rules(model_opset: i64) -> BTreeSet<String> {
    let sources: Vec<(String, String)> = crate::rules::VERSION_RULE_FILES
        .iter()
        .filter(|(p, _)| {
            p.ends_with("decompose.rules") || *p == onnx_rules::version_steps::BODIES_ORIGIN
        })
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let mut out = BTreeSet::new();
    let Ok(files) = crate::rules::parse_all(&sources) else {
        return out;
    };
    for r in files.iter().flat_map(|f| &f.rules) {
        if !r.window.contains(model_opset) {
            continue;
        }
        let Some(&root) = r.lhs.first() else { continue };
        if let onnx_rules::ir::Pat::Op(p) = r.pat(root) {
            if let onnx_rules::ir::OpHead::Named(op) = &p.head {
                out.insert(op.op_type.clone());
            }
        }
    }
    out
}

/// The body of `op` (bound at `model_opset`) to expand for a target that lacks it, with the
/// schema's attribute defaults as the function's.
fn body_for(op: &str, model_opset: i64, target: i64) -> Option<Function> {
    let schema = lacking(op, model_opset, target)?;
    usable(schema.function_body(model_opset)?, schema, model_opset)
}

/// The schema `op` binds at the model's opset, when the target has no (usable) version of it.
fn lacking(op: &str, model_opset: i64, target: i64) -> Option<&'static onnx_schema::OpSchema> {
    let reg = onnx_schema::registry();
    let schema = reg.lookup("", op, model_opset)?;
    if reg.lookup("", op, target).is_some_and(|s| !s.deprecated) {
        return None;
    }
    Some(schema)
}

/// A body that can be lifted at the model's opset (each op binds a version of the same
/// signature there as at the body's own opset), with the schema's attribute defaults as the
/// function's; in the IR (a body the IR cannot represent is not used).
fn usable(
    mut body: FunctionProto,
    schema: &onnx_schema::OpSchema,
    model_opset: i64,
) -> Option<Function> {
    two_pass_variance(&mut body);
    let mut body = Function::from_proto(body).ok()?;
    let reg = onnx_schema::registry();
    let fv = version_in(&body.opset_imports, "")?;
    let same = body_ops(&body).iter().all(|op| {
        match (reg.lookup("", op, fv), reg.lookup("", op, model_opset)) {
            (Some(a), Some(b)) => a.since_version == b.since_version || same_signature(a, b),
            (None, None) => true,
            _ => false,
        }
    });
    if !same {
        return None;
    }
    for a in &schema.attributes {
        if let Some(d) = &a.default {
            if !body.attribute_protos.iter().any(|x| x.name == d.name) {
                let mut d: AttributeProto = d.clone();
                d.name = Some(a.name.clone());
                body.attribute_protos.push(d);
            }
        }
    }
    Some(body)
}

/// Rewrites each variance a body computes as `E[x^2] - E[x]^2` (`Sub(ReduceMean(Sq(x)),
/// Sq(ReduceMean(x)))`, both means with the same axes and attributes, keeping dims; `Sq(v)` is
/// `Mul(v, v)` or `Pow(v, 2)`) into the two-pass `E[(x - E[x])^2]`: the mean of the squared
/// deviations, as the ops' documentation writes it and the reference interpreter computes it
/// (the check's oracle; onnxruntime's CPU LayerNormalization sums x and x^2 in one pass in X's
/// type). The one-pass form cancels catastrophically when the spread of `x` is small against
/// its mean: in float, a row of two values near 1.4 that differ by 1.9e-3 (variance 8.9e-7)
/// loses a fifth of its variance to the rounding of `E[x^2]` (its ulp is 1.2e-7), and
/// LayerNormalization's output 0.8% (fuzz seed 0xe3779b97f4a7ebf9); the variance may even come
/// out negative (NaN from MeanVarianceNormalization's Sqrt). The schema bodies of
/// LayerNormalization (the instances with its statistics outputs) and MeanVarianceNormalization
/// are written this way. Returns how many variances were rewritten; the squares and means only
/// they read are dropped.
fn two_pass_variance(body: &mut FunctionProto) -> usize {
    use onnx_proto::NodeProto;
    fn op_is(n: &NodeProto, op: &str) -> bool {
        n.op_type.as_deref() == Some(op)
            && onnx_schema::normalize_domain(n.domain.as_deref().unwrap_or("")).is_empty()
    }
    let producer = |nodes: &[NodeProto], name: &str| -> Option<usize> {
        let made = |n: &NodeProto| n.output.iter().any(|o| o == name);
        nodes.iter().position(made).filter(|_| !name.is_empty())
    };
    // Whether a Constant node holds the single value 2.
    let is_two = |n: &NodeProto| {
        op_is(n, "Constant")
            && n.attribute.iter().any(|a| match a.name.as_deref() {
                Some("value") => a.t.as_ref().is_some_and(|t| {
                    onnx_ref::Tensor::from_proto(t)
                        .ok()
                        .and_then(|t| t.to_f64_vec().ok())
                        .is_some_and(|v| v == [2.0])
                }),
                Some("value_float") => a.f == Some(2.0),
                _ => false,
            })
    };
    // `v` when node `i` squares `v`, with the nodes it reads besides (Pow's exponent).
    let square_of = |nodes: &[NodeProto], i: usize| -> Option<(String, Vec<usize>)> {
        let n = &nodes[i];
        if op_is(n, "Mul") && n.input.len() == 2 && n.input[0] == n.input[1] {
            return Some((n.input[0].clone(), vec![]));
        }
        if op_is(n, "Pow") && n.input.len() == 2 {
            let e = producer(nodes, &n.input[1])?;
            return is_two(&nodes[e]).then(|| (n.input[0].clone(), vec![e]));
        }
        None
    };
    let keeps_dims = |n: &NodeProto| {
        n.attribute
            .iter()
            .filter(|a| a.name.as_deref() == Some("keepdims"))
            .all(|a| a.ref_attr_name.as_deref().unwrap_or("").is_empty() && a.i == Some(1))
    };
    // A mean the variance may take: ReduceMean keeping dims, one output.
    let mean = |nodes: &[NodeProto], name: &str| -> Option<usize> {
        let i = producer(nodes, name)?;
        let n = &nodes[i];
        (op_is(n, "ReduceMean") && keeps_dims(n) && n.output.len() == 1 && !n.input.is_empty())
            .then_some(i)
    };
    let mut names = BTreeSet::new();
    fn all_names(nodes: &[NodeProto], out: &mut BTreeSet<String>) {
        for n in nodes {
            out.extend(n.input.iter().chain(&n.output).cloned());
            for a in &n.attribute {
                for g in a.g.iter().chain(&a.graphs) {
                    all_names(&g.node, out);
                }
            }
        }
    }
    all_names(&body.node, &mut names);
    names.extend(body.input.iter().chain(&body.output).cloned());
    let mut fresh = |base: &str| {
        let mut name = base.to_string();
        let mut k = 1;
        while !names.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    };
    let mut rewritten = 0;
    let mut candidates: BTreeSet<String> = BTreeSet::new();
    let mut i = 0;
    while i < body.node.len() {
        let nodes = &body.node;
        let n = &nodes[i];
        let found = (|| {
            if !op_is(n, "Sub") || n.input.len() != 2 || n.output.len() != 1 {
                return None;
            }
            let mean_sq = mean(nodes, &n.input[0])?;
            let sq = producer(nodes, &nodes[mean_sq].input[0])?;
            let (x, sq_reads) = square_of(nodes, sq)?;
            let sq_mean = producer(nodes, &n.input[1])?;
            let (m, sq_mean_reads) = square_of(nodes, sq_mean)?;
            let m_node = mean(nodes, &m)?;
            let (a, b) = (&nodes[mean_sq], &nodes[m_node]);
            let same_mean =
                b.input[0] == x && a.input[1..] == b.input[1..] && a.attribute == b.attribute;
            same_mean.then(|| {
                let reads = [mean_sq, sq, sq_mean].into_iter().chain(sq_reads);
                let reads: Vec<usize> = reads.chain(sq_mean_reads).collect();
                (x, m, mean_sq, reads)
            })
        })();
        let Some((x, m, mean_sq, reads)) = found else {
            i += 1;
            continue;
        };
        candidates.extend(reads.iter().flat_map(|&r| body.node[r].output.clone()));
        let var = body.node[i].output[0].clone();
        let centered = fresh(&format!("{var}_Centered"));
        let squared = fresh(&format!("{var}_CenteredSquared"));
        let node = |op: &str, input: Vec<String>, output: String| NodeProto {
            op_type: Some(op.to_string()),
            domain: body.node[i].domain.clone(),
            input,
            output: vec![output],
            ..Default::default()
        };
        let sub = node("Sub", vec![x, m], centered.clone());
        let mul = node("Mul", vec![centered.clone(), centered], squared.clone());
        let mut reduce = body.node[mean_sq].clone();
        reduce.name = None;
        reduce.input[0] = squared;
        reduce.output = vec![var];
        body.node.splice(i..=i, [sub, mul, reduce]);
        rewritten += 1;
        i += 3;
    }
    // The squares and means only the rewritten variances read.
    loop {
        let mut used = BTreeSet::new();
        fn inputs(nodes: &[NodeProto], out: &mut BTreeSet<String>) {
            for n in nodes {
                out.extend(n.input.iter().cloned());
                for a in &n.attribute {
                    for g in a.g.iter().chain(&a.graphs) {
                        inputs(&g.node, out);
                        out.extend(g.output.iter().filter_map(|o| o.name.clone()));
                    }
                }
            }
        }
        inputs(&body.node, &mut used);
        used.extend(body.output.iter().cloned());
        let unread = |o: &String| candidates.contains(o) && !used.contains(o);
        let dead =
            (body.node.iter()).position(|n| !n.output.is_empty() && n.output.iter().all(unread));
        match dead {
            Some(d) => {
                body.node.remove(d);
            }
            None => break,
        }
    }
    rewritten
}

/// The attribute names a body refers to (`@name`), subgraphs included.
fn referenced(nodes: &[onnx_proto::NodeProto], out: &mut BTreeSet<String>) {
    for n in nodes {
        for a in &n.attribute {
            if let Some(r) = a.ref_attr_name.as_ref().filter(|r| !r.is_empty()) {
                out.insert(r.clone());
            }
            for g in a.g.iter().chain(&a.graphs) {
                referenced(&g.node, out);
            }
        }
    }
}

/// Whether a recorded instance of a context-dependent function was built for a node like
/// `node`: the same inputs present, the same element types (and dims, where the instance's
/// types have them), and every attribute the body does not refer to holding the instance's
/// value (else the schema's default).
fn instance_fits(
    g: &Graph,
    node: &Node,
    inst: &onnx_schema::FunctionInstance,
    schema: &onnx_schema::OpSchema,
    types: &BTreeMap<String, onnx_proto::TypeProto>,
) -> bool {
    let ours_present = |i: usize| node.inputs.get(i).is_some_and(Option::is_some);
    let theirs_present = |i: usize| inst.node.input.get(i).is_some_and(|x| !x.is_empty());
    let n = node.inputs.len().max(inst.node.input.len());
    for i in 0..n {
        if ours_present(i) != theirs_present(i) {
            return false;
        }
        let Some(Some(input)) = node.inputs.get(i) else {
            continue;
        };
        let input = g.value(*input).name.as_str();
        let elem = |t: Option<&onnx_proto::TypeProto>| {
            t.and_then(onnx_schema::infer::elem_type_of)
                .filter(|&e| e != 0)
        };
        let theirs_ty = inst.input_types.get(i).and_then(Option::as_ref);
        let theirs = elem(theirs_ty);
        let ours = elem(types.get(input));
        if ours.is_none() || ours != theirs {
            return false;
        }
        // An instance built for a shape (a body sized by its channels, say) fits that shape.
        if let Some(want) = theirs_ty.and_then(onnx_schema::infer::shape_of) {
            let have = types.get(input).and_then(onnx_schema::infer::shape_of);
            let fits = have.is_some_and(|h| {
                h.len() == want.len()
                    && h.iter()
                        .zip(&want)
                        .all(|(a, b)| b.known().is_none() || a == b)
            });
            if !fits {
                return false;
            }
        }
    }
    if node.outputs.iter().flatten().count() > inst.node.output.len()
        || node.outputs.len() > inst.body.output.len()
    {
        return false;
    }
    let mut refs = BTreeSet::new();
    referenced(&inst.body.node, &mut refs);
    let default = |name: &str| {
        schema
            .attributes
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.default.clone())
    };
    let same = |a: &AttributeProto, b: &AttributeProto| {
        let mut a = a.clone();
        let mut b = b.clone();
        a.name = None;
        b.name = None;
        a.doc_string = None;
        b.doc_string = None;
        a == b
    };
    let held = |name: &str, v: &AttributeProto| match inst
        .node
        .attribute
        .iter()
        .find(|x| x.name.as_deref() == Some(name))
    {
        Some(x) => same(v, x),
        None => default(name).is_some_and(|d| same(v, &d)),
    };
    for a in &node.attributes {
        if !refs.contains(a.name.as_str()) && !held(&a.name, &a.to_proto()) {
            return false;
        }
    }
    // An attribute the instance was built with and the node leaves at its default.
    inst.node.attribute.iter().all(|x| {
        let name = x.name.as_deref().unwrap_or("");
        refs.contains(name)
            || node.attribute(name).is_some()
            || default(name).is_some_and(|d| same(x, &d))
    })
}

/// The domain of the stand-in ops that name a chosen instance (never written out).
const INSTANCE_DOMAIN: &str = "onnx_opt.instance";

/// Two versions of an op with the same inputs, outputs and attributes (names, options, types,
/// defaults), and no change of meaning between them that the signature hides
/// (`onnx_schema::versions::SAME_SIGNATURE_OTHER_MEANING`): the later only widens type sets, so a body
/// written at the earlier one computes the same bound at the later.
fn same_signature(a: &onnx_schema::OpSchema, b: &onnx_schema::OpSchema) -> bool {
    let params = |s: &onnx_schema::OpSchema| -> Vec<(String, String)> {
        s.inputs
            .iter()
            .chain(&s.outputs)
            .map(|p| (p.name.clone(), format!("{:?}", p.option)))
            .collect()
    };
    let attrs = |s: &onnx_schema::OpSchema| -> Vec<String> {
        s.attributes
            .iter()
            .map(|t| format!("{}:{:?}:{:?}:{}", t.name, t.ty, t.default, t.required))
            .collect()
    };
    let (lo, hi) = match a.since_version <= b.since_version {
        true => (a.since_version, b.since_version),
        false => (b.since_version, a.since_version),
    };
    let crosses = onnx_schema::versions::SAME_SIGNATURE_OTHER_MEANING
        .iter()
        .any(|(o, v)| *o == a.name && lo < *v && *v <= hi);
    !crosses && params(a) == params(b) && attrs(a) == attrs(b)
}

/// Expands every node (main graph and its subgraphs) whose op the target lacks and whose
/// schema has a body (context-independent, or an instance built for a node like it); returns
/// how many nodes. On an error the model may be partly expanded (the caller drops it).
pub(crate) fn expand_for_target(model: &mut Model, target: i64) -> Result<usize, FunctionError> {
    let Some(model_opset) = version_in(&model.opset_imports, "") else {
        return Ok(0);
    };
    let mut ops = BTreeSet::new();
    ops_in(&model.graph, &mut ops);
    let by_rules = decomposed_by_rules(model_opset);
    let mut funcs: BTreeMap<FnKey, Function> = BTreeMap::new();
    let mut todo: Vec<String> = ops.into_iter().collect();
    // Context-dependent bodies (Attention, RotaryEmbedding, LayerNormalization with its
    // statistics outputs, ...): per node of the main graph, the recorded instance built for a
    // node like it, if any. Types come from the graph's declarations and inference (on its
    // protobuf, which inference reads).
    let types = main_graph_types(&model.graph, model_opset);
    let g = &mut model.graph;
    for id in g.order.clone() {
        let node = g.node(id);
        if !onnx_schema::normalize_domain(&node.domain).is_empty() {
            continue;
        }
        let op = node.op_type.to_string();
        let several_outputs = node.outputs.iter().flatten().count() > 1;
        if (by_rules.contains(&op) && !several_outputs)
            || UNSOUND_BODIES.iter().any(|(o, _)| *o == op)
        {
            continue;
        }
        let Some(schema) = lacking(&op, model_opset, target) else {
            continue;
        };
        if schema.function_body(model_opset).is_some() {
            continue;
        }
        let instances = schema.context_dependent_function_instances(model_opset);
        let Some((k, inst)) = instances
            .iter()
            .enumerate()
            .find(|(_, i)| instance_fits(g, node, i, schema, &types))
        else {
            continue;
        };
        let Some(body) = usable(inst.body.clone(), schema, model_opset) else {
            continue;
        };
        todo.extend(body_ops(&body));
        let name = format!("{op}#{k}");
        funcs.insert(
            (INSTANCE_DOMAIN.to_string(), name.clone(), String::new()),
            body,
        );
        let node = g.node_mut(id);
        node.domain = Name::from(INSTANCE_DOMAIN);
        node.op_type = Name::from(name);
    }
    // To a fixed point: a body's own ops may need their bodies.
    let mut seen = BTreeSet::new();
    while let Some(op) = todo.pop() {
        if !seen.insert(op.clone())
            || by_rules.contains(&op)
            || UNSOUND_BODIES.iter().any(|(o, _)| *o == op)
        {
            continue;
        }
        let Some(body) = body_for(&op, model_opset, target) else {
            continue;
        };
        todo.extend(body_ops(&body));
        for domain in ["", "ai.onnx"] {
            funcs.insert(
                (domain.to_string(), op.clone(), String::new()),
                body.clone(),
            );
        }
    }
    if funcs.is_empty() {
        return Ok(0);
    }
    let mut inl = Inliner::new(&funcs, model);
    inl.graph(&mut model.graph, 0)?;
    Ok(inl.calls())
}

/// The types of the main graph's values: declared (the last declaration of a name wins), then
/// inferred at the model's opset.
fn main_graph_types(g: &Graph, model_opset: i64) -> BTreeMap<String, onnx_proto::TypeProto> {
    let proto = g.to_proto();
    let mut types = BTreeMap::new();
    for v in proto
        .input
        .iter()
        .chain(&proto.output)
        .chain(&proto.value_info)
    {
        if let (Some(n), Some(t)) = (&v.name, &v.r#type) {
            types.insert(n.clone(), t.clone());
        }
    }
    let opsets: BTreeMap<String, i64> = [(String::new(), model_opset)].into();
    if let Ok(inferred) = onnx_schema::infer::infer_graph(&proto, &opsets) {
        for (n, t) in inferred {
            types.entry(n).or_insert(t);
        }
    }
    types
}

/// `expand-bodies`: a conversion's ops the target lacks written as their schema's body, then
/// folded at the source opset with each If of a constant condition spliced (a body such as
/// AffineGrid's picks its rank by an If), so the conversion after sees typed values. Bodies
/// that do not pass type inference where the model does are not used (the conversion then
/// refuses those nodes by name).
pub(crate) struct ExpandBodies;

impl super::Pass for ExpandBodies {
    fn name(&self) -> &'static str {
        "expand-bodies"
    }

    fn about(&self) -> &'static str {
        "conversion only: ops the target opset lacks written as their schema's function body"
    }

    fn is_enabled(&self, cx: &super::PassContext<'_>) -> bool {
        cx.conversion().is_some()
    }

    fn run(
        &self,
        model: &mut Model,
        cx: &mut super::PassContext<'_>,
    ) -> Result<super::Changes, crate::Error> {
        let Some((_, target)) = cx.conversion() else {
            return Ok(super::Changes::new());
        };
        let mut expanded = model.clone();
        let n = expand_for_target(&mut expanded, target).map_err(|e| e.into_error(cx.origin))?;
        if n == 0 {
            return Ok(super::Changes::new());
        }
        let infers = |m: &Model| {
            let p = m.to_proto();
            let opsets = onnx_schema::infer::opset_imports(&p.opset_import);
            p.graph
                .as_ref()
                .is_some_and(|g| onnx_schema::infer::infer_graph(g, &opsets).is_ok())
        };
        // The bodies are used when they pass type inference, or when the model did not either.
        if !infers(&expanded) && infers(model) {
            return Ok(super::Changes::new());
        }
        *model = fold_constant_ifs(expanded, cx)?;
        Ok(super::Changes::from([("expanded_bodies", n)]))
    }
}

/// A model with written-out function bodies, folded at its own opset, with each If of a
/// constant condition replaced by its branch (at most four rounds), left in normal form.
fn fold_constant_ifs(mut model: Model, cx: &super::PassContext<'_>) -> Result<Model, crate::Error> {
    for _ in 0..4 {
        model = cx.host.fold_only(&model, cx.origin)?;
        if super::if_const::splice_constant_ifs(&mut model) == 0 {
            super::normal_form::normalize(&mut model);
            break;
        }
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ops of a body's top-level nodes, in order.
    fn ops(body: &FunctionProto) -> Vec<&str> {
        body.node
            .iter()
            .map(|n| n.op_type.as_deref().unwrap_or(""))
            .collect()
    }

    /// Whether a body still computes a variance as `E[x^2] - E[x]^2`: a Sub from a mean (the
    /// two-pass form subtracts a mean only from the values).
    fn one_pass(body: &FunctionProto) -> bool {
        let producer = |name: &str| {
            body.node
                .iter()
                .find(|n| n.output.iter().any(|o| o == name))
        };
        body.node.iter().any(|n| {
            n.op_type.as_deref() == Some("Sub")
                && producer(&n.input[0]).is_some_and(|m| m.op_type.as_deref() == Some("ReduceMean"))
        })
    }

    /// LayerNormalization's recorded instances (17 and 18) and MeanVarianceNormalization's
    /// body compute the variance in one pass; each is rewritten once to the two-pass form, the
    /// squares and means only that read dropped, and the result is a valid IR function.
    #[test]
    fn schema_variances_are_rewritten_to_two_passes() {
        let reg = onnx_schema::registry();
        let mut bodies = Vec::new();
        for opset in [17, 18] {
            let schema = reg.lookup("", "LayerNormalization", opset).unwrap();
            let instances = schema.context_dependent_function_instances(opset);
            assert!(
                !instances.is_empty(),
                "LayerNormalization-{opset} instances"
            );
            bodies.extend(instances.iter().map(|i| i.body.clone()));
        }
        let mvn = reg.lookup("", "MeanVarianceNormalization", 13).unwrap();
        bodies.push(mvn.function_body(13).expect("MVN has a body"));
        for mut body in bodies {
            assert!(one_pass(&body), "{:?}", ops(&body));
            let before = body.node.len();
            assert_eq!(two_pass_variance(&mut body), 1, "{:?}", ops(&body));
            assert!(!one_pass(&body), "{:?}", ops(&body));
            // Sub, Mul, ReduceMean for one Sub; the two squares and the mean of squares gone
            // (and MVN's exponent constant).
            assert!(body.node.len() < before, "{:?}", ops(&body));
            assert!(!ops(&body).contains(&"Pow"), "{:?}", ops(&body));
            assert_eq!(two_pass_variance(&mut body), 0);
            Function::from_proto(body).expect("the rewritten body is a valid function");
        }
    }

    /// A Sub of means over other axes, or of a square of another value, is not a variance.
    #[test]
    fn two_pass_variance_leaves_other_differences() {
        let text = r#"
            <domain: "d", opset_import: ["" : 13]>
            f (x, y) => (a, b) {
               sq = Mul (x, x)
               m = ReduceMean <axes: ints = [1]> (x)
               ms = ReduceMean <axes: ints = [0]> (sq)
               mm = Mul (m, m)
               a = Sub (ms, mm)
               ys = Mul (y, y)
               mys = ReduceMean <axes: ints = [1]> (ys)
               b = Sub (mys, mm)
            }
        "#;
        let mut body = onnx_text::parse_function(text).expect("parses");
        let before = body.clone();
        assert_eq!(two_pass_variance(&mut body), 0);
        assert_eq!(body, before);
    }
}
