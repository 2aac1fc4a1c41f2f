//! Operators the target opset does not have, written with their schema's function body: when a
//! conversion goes below the opset that introduced an op (MeanVarianceNormalization below 9,
//! the window functions below 17, ...), each node of it is replaced by the context-independent
//! body onnx gives (attribute references resolved from the node, else the schema's defaults;
//! nested ops the target lacks expanded the same way), and the body then converts with the
//! graph. The result is checked against the original like any conversion.
//!
//! Left to the version rules (`rules/version/decompose.rules`): ops those rules write out by
//! hand, and ops whose body onnx builds per node (LayerNormalization, Gelu, ...). Not used: the
//! bodies listed in `UNSOUND_BODIES` (AffineGrid's differs from the op at a size of 1), and a
//! body whose ops bind, at the model's opset, versions of another signature than at its own.

use std::collections::{BTreeMap, BTreeSet};

use onnx_proto::{AttributeProto, FunctionProto, GraphProto, ModelProto};

use crate::inline::{FnKey, Inliner};

fn default_opset(imports: &[onnx_proto::OperatorSetIdProto]) -> Option<i64> {
    imports
        .iter()
        .find(|o| onnx_schema::normalize_domain(o.domain.as_deref().unwrap_or("")).is_empty())
        .and_then(|o| o.version)
}

fn ops_in(g: &GraphProto, out: &mut BTreeSet<String>) {
    for n in &g.node {
        if onnx_schema::normalize_domain(n.domain.as_deref().unwrap_or("")).is_empty() {
            out.insert(n.op_type.clone().unwrap_or_default());
        }
        for a in &n.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                ops_in(sub, out);
            }
        }
    }
}

/// Ops whose schema body does not compute the op everywhere, so it is not used: (op, why).
const UNSOUND_BODIES: &[(&str, &str)] = &[(
    "AffineGrid",
    "with align_corners its body divides by H - 1 and W - 1, NaN for a size of 1 where the op \
     gives -1 (found by the fuzzer, seed 0x1fc8dd38b7691812)",
)];

/// The ops the built-in version rules write out by hand (their left roots).
fn decomposed_by_rules() -> BTreeSet<String> {
    let sources: Vec<(String, String)> = crate::rules::VERSION
        .iter()
        .filter(|(p, _)| p.ends_with("decompose.rules"))
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let mut out = BTreeSet::new();
    let Ok(files) = crate::rules::parse_all(&sources) else {
        return out;
    };
    for r in files.iter().flat_map(|f| &f.rules) {
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
fn body_for(op: &str, model_opset: i64, target: i64) -> Option<FunctionProto> {
    let reg = onnx_schema::registry();
    let schema = reg.lookup("", op, model_opset)?;
    if reg.lookup("", op, target).is_some_and(|s| !s.deprecated) {
        return None;
    }
    let mut body = schema.function_body(model_opset)?;
    // Each body op must bind the same schema at the body's opset as at the model's (the body
    // is lifted at the model's).
    let fv = default_opset(&body.opset_import)?;
    let mut ops = BTreeSet::new();
    ops_in(
        &GraphProto {
            node: body.node.clone(),
            ..Default::default()
        },
        &mut ops,
    );
    let same =
        ops.iter().all(
            |op| match (reg.lookup("", op, fv), reg.lookup("", op, model_opset)) {
                (Some(a), Some(b)) => a.since_version == b.since_version || same_signature(a, b),
                (None, None) => true,
                _ => false,
            },
        );
    if !same {
        return None;
    }
    for a in &schema.attributes {
        if let Some(d) = &a.default {
            if !body.attribute_proto.iter().any(|x| x.name == d.name) {
                let mut d: AttributeProto = d.clone();
                d.name = Some(a.name.clone());
                body.attribute_proto.push(d);
            }
        }
    }
    Some(body)
}

/// Two versions of an op with the same inputs, outputs and attributes (names, options, types,
/// defaults), and no change of meaning between them that the signature hides
/// (`convert::SAME_SIGNATURE_OTHER_MEANING`): the later only widens type sets, so a body
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
    let crosses = onnx_egraph::convert::SAME_SIGNATURE_OTHER_MEANING
        .iter()
        .any(|(o, v)| *o == a.name && lo < *v && *v <= hi);
    !crosses && params(a) == params(b) && attrs(a) == attrs(b)
}

/// Expands every node (main graph, subgraphs, local function bodies) whose op the target lacks
/// and whose schema has a context-independent body; returns the model and how many nodes.
pub fn expand_for_target(model: &ModelProto, target: i64) -> Result<(ModelProto, usize), String> {
    let Some(model_opset) = default_opset(&model.opset_import) else {
        return Ok((model.clone(), 0));
    };
    let mut ops = BTreeSet::new();
    if let Some(g) = &model.graph {
        ops_in(g, &mut ops);
    }
    let by_rules = decomposed_by_rules();
    let mut funcs: BTreeMap<FnKey, FunctionProto> = BTreeMap::new();
    // To a fixed point: a body's own ops may need their bodies.
    let mut todo: Vec<String> = ops.into_iter().collect();
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
        let mut inner = BTreeSet::new();
        ops_in(
            &GraphProto {
                node: body.node.clone(),
                ..Default::default()
            },
            &mut inner,
        );
        todo.extend(inner);
        for domain in ["", "ai.onnx"] {
            funcs.insert(
                (domain.to_string(), op.clone(), String::new()),
                body.clone(),
            );
        }
    }
    if funcs.is_empty() {
        return Ok((model.clone(), 0));
    }
    let mut out = model.clone();
    let mut inl = Inliner::new(&funcs, model);
    if let Some(g) = out.graph.as_mut() {
        inl.graph(g, 0)?;
    }
    Ok((out, inl.calls()))
}
