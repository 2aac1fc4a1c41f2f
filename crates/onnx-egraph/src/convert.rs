//! Version conversion by rebinding: an operator bound to one schema version gets, in its class,
//! the same operator bound to the version a target opset uses, when the two versions compute the
//! same function for that node (see [`rebind_to_opset`]). Most version steps of the ONNX
//! history only widen type sets, so this carries most nodes across in one step; the steps that
//! change meaning without changing the signature are listed in [`SAME_SIGNATURE_OTHER_MEANING`]
//! and never rebound. Extraction under `AtOpset` then picks the legal node.

use egg::Id;
use onnx_schema::{OpSchema, ParamOption};

use crate::analysis::OnnxEGraph;
use crate::build::{AttrArg, OpBuilder};
use crate::lang::{NodeKind, ONode};
use crate::tables::OpInfo;

/// (op, the first since_version of the later meaning): a node on one side of the version and a
/// node on the other side are never rebound, whatever their signatures.
pub const SAME_SIGNATURE_OTHER_MEANING: &[(&str, i64)] = &[
    // Softmax, LogSoftmax, Hardmax: opset 13 normalizes over one axis instead of coercing the
    // input to 2-D at `axis` (and the default axis moved from 1 to -1).
    ("Softmax", 13),
    ("LogSoftmax", 13),
    ("Hardmax", 13),
    // Sum, Max, Min, Mean broadcast their inputs from opset 8; before, shapes had to be equal.
    ("Sum", 8),
    ("Max", 8),
    ("Min", 8),
    ("Mean", 8),
];

/// Added attributes whose default is not the behaviour of the versions before them: an older
/// node rebound upward would change meaning. (Resize and Upsample change their inputs too.)
pub const ADDED_ATTRIBUTE_NOT_OLD_BEHAVIOUR: &[(&str, &str)] = &[
    ("RoiAlign", "coordinate_transformation_mode"),
    ("Resize", "coordinate_transformation_mode"),
    ("Resize", "nearest_mode"),
];

/// Adds, to every class holding a default-domain operator not legal at `target`, the same
/// operator bound to the target's version where that computes the same function; returns how
/// many nodes it added. The caller rebuilds the e-graph.
///
/// The two schemas must have the same inputs by name and slot (an input the target adds is
/// optional and absent here; one it drops is absent in the node), the same outputs, and the same
/// attributes, except that an attribute the target adds has a default that keeps the old
/// behaviour, and one it drops holds its default in the node. The element types in use must be
/// allowed by the target's type constraints.
pub fn rebind_to_opset(eg: &mut OnnxEGraph, target: i64) -> usize {
    let mut additions: Vec<(Id, OpBuilder)> = Vec::new();
    let mut classes: Vec<Id> = eg.classes().map(|c| c.id).collect();
    classes.sort();
    for c in classes {
        for node in &eg[c].nodes {
            if crate::extract::legal_at(eg, node, target) {
                continue;
            }
            let NodeKind::Op(op) = node.kind else {
                continue;
            };
            let info = eg.analysis.ops.get(op);
            if !info.implicit_inputs.is_empty() || info.nondeterministic {
                continue;
            }
            let (Some(source), Some(to)) = (
                eg.analysis.ops.schema(op),
                onnx_schema::registry().lookup("", &info.op_type, target),
            ) else {
                continue;
            };
            let crosses = SAME_SIGNATURE_OTHER_MEANING.iter().any(|(o, v)| {
                *o == info.op_type && (source.since_version < *v) != (to.since_version < *v)
            });
            if to.deprecated || crosses {
                continue;
            }
            let roles = crate::build::Roles::new(info, &node.children);
            if let Some(b) = rebuild(eg, c, node, info, &roles, source, to) {
                additions.push((c, b));
            }
        }
    }
    let mut n = 0;
    for (class, b) in additions {
        if let Ok((id, _)) = b.add_to(eg) {
            eg.union(class, id);
            n += 1;
        }
    }
    n
}

/// The builder of the node at the target's version, when the two versions are the same
/// function for this node.
fn rebuild(
    eg: &OnnxEGraph,
    class: Id,
    node: &ONode,
    info: &OpInfo,
    roles: &crate::build::Roles<'_>,
    source: &OpSchema,
    to: &OpSchema,
) -> Option<OpBuilder> {
    let absent = |id: Option<Id>| {
        id.is_none_or(|i| eg[i].nodes.iter().any(|n| matches!(n.kind, NodeKind::None)))
    };
    // Inputs: the same names in the same slots.
    let variadic = |s: &OpSchema| {
        s.inputs
            .last()
            .is_some_and(|p| p.option == ParamOption::Variadic)
    };
    if variadic(source) != variadic(to) {
        return None;
    }
    let n = source.inputs.len().max(to.inputs.len());
    for i in 0..n {
        match (source.inputs.get(i), to.inputs.get(i)) {
            (Some(p), Some(q)) => {
                if p.name != q.name || p.is_homogeneous != q.is_homogeneous {
                    return None;
                }
                if q.option == ParamOption::Single && absent(roles.input(i)) {
                    return None;
                }
            }
            (Some(_), None) if !absent(roles.input(i)) => return None,
            (None, Some(q)) if q.option == ParamOption::Single => return None,
            _ => {}
        }
    }
    if source.outputs.len() != to.outputs.len()
        || source
            .outputs
            .iter()
            .zip(&to.outputs)
            .any(|(p, q)| p.name != q.name || p.option != q.option)
        || source.min_output != to.min_output
        || source.max_output != to.max_output
    {
        return None;
    }
    // Attributes.
    let mut b = OpBuilder::at_opset("", &info.op_type, to.since_version);
    for a in &source.attributes {
        let value = roles.attr(&a.name).filter(|&v| !absent(Some(v)));
        match to.attributes.iter().find(|t| t.name == a.name) {
            Some(t) if t.ty == a.ty => {
                if let Some(v) = value {
                    b = b.attr(&a.name, AttrArg::Class(v));
                } else if t.required {
                    return None;
                }
            }
            Some(_) => return None,
            None => {
                // Dropped by the target: fine only where the node holds the default.
                let holds_default = match (value, &a.default) {
                    (None, _) => true,
                    (Some(v), Some(d)) => attr_value(eg, v).is_some_and(|p| same_value(p, d)),
                    (Some(_), None) => false,
                };
                if !holds_default {
                    return None;
                }
            }
        }
    }
    for t in &to.attributes {
        if source.attributes.iter().all(|a| a.name != t.name)
            && (t.required
                || ADDED_ATTRIBUTE_NOT_OLD_BEHAVIOUR
                    .iter()
                    .any(|(o, n)| *o == info.op_type && *n == t.name))
        {
            return None;
        }
    }
    if !types_allowed(eg, class, node, info.attr_names.len(), to) {
        return None;
    }
    for i in 0..info.n_inputs {
        let v = roles.input(i).filter(|&v| !absent(Some(v)));
        b = b.input(i, v);
    }
    if info.is_tuple || info.n_outputs != 1 {
        b = b.outputs(info.n_outputs);
    }
    Some(b)
}

fn attr_value(eg: &OnnxEGraph, class: Id) -> Option<&onnx_proto::AttributeProto> {
    eg[class].nodes.iter().find_map(|n| match n.kind {
        NodeKind::Attr(a) => Some(eg.analysis.attrs.get(a)),
        _ => None,
    })
}

/// Two attribute values are the same value (names and doc strings aside).
fn same_value(a: &onnx_proto::AttributeProto, b: &onnx_proto::AttributeProto) -> bool {
    let strip = |p: &onnx_proto::AttributeProto| {
        let mut p = p.clone();
        p.name = None;
        p.doc_string = None;
        p
    };
    strip(a) == strip(b)
}

/// Whether the element types of the node's present inputs, and of its value, are allowed by
/// the target schema's type constraints.
fn types_allowed(eg: &OnnxEGraph, class: Id, node: &ONode, n_attrs: usize, to: &OpSchema) -> bool {
    let allowed = |type_str: &str, ty: Option<String>| -> bool {
        match to
            .type_constraints
            .iter()
            .find(|t| t.type_param == type_str)
        {
            // A fixed type (`tensor(int64)`) is part of the signature, already equal.
            None => true,
            Some(tc) => ty.is_some_and(|t| tc.allowed.contains(&t)),
        }
    };
    let type_of = |id: Id| eg[id].data.ty.as_ref().and_then(onnx_schema::type_str_of);
    let inputs = &node.children[n_attrs.min(node.children.len())..];
    for (slot, &child) in inputs.iter().enumerate() {
        if matches!(
            eg[child].nodes.first().map(|n| &n.kind),
            Some(NodeKind::None)
        ) {
            continue;
        }
        let Some(param) = to.inputs.get(slot).or_else(|| {
            to.inputs
                .last()
                .filter(|p| p.option == ParamOption::Variadic)
        }) else {
            // An outer-scope value of a subgraph attribute: not an input.
            break;
        };
        if !allowed(&param.type_str, type_of(child)) {
            return false;
        }
    }
    match to.outputs.first() {
        Some(out) if to.outputs.len() == 1 => allowed(&out.type_str, type_of(class)),
        // Tuples: their projections are checked as inputs where they are read.
        _ => true,
    }
}
