//! Version conversion by rebinding: an operator bound to one schema version gets, in its class,
//! the same operator bound to the version a target opset uses, when the two versions compute the
//! same function for that node (see [`rebind_to_opset`]). Most version steps of the ONNX
//! history only widen type sets, so this carries most nodes across in one step; the steps that
//! change meaning without changing the signature are listed in [`SAME_SIGNATURE_OTHER_MEANING`]
//! and never rebound. Extraction under `AtOpset` then picks the legal node.

use std::collections::BTreeSet;

use egg::Id;
use onnx_schema::{OpSchema, ParamOption};

use crate::analysis::OnnxEGraph;
use crate::build::{literal_input, AttrArg, OpBuilder};
use crate::lang::{NodeKind, ONode};
use crate::tables::OpInfo;
use crate::value::{same_value, Val};
use onnx_rules::params::{logical_params, ParamLoc};

use onnx_schema::versions::{absent_means, dropped_param_default, old_behaviour, renamed_input};
use onnx_schema::versions::{
    LOGICAL_MOVES_NOT_CONVERTED, PARTLY_STEPPED, SAME_SIGNATURE_OTHER_MEANING,
};

/// Softmax, LogSoftmax and Hardmax before 13 coerce the input to 2-D at `axis`; from 13 they
/// normalize over `axis` alone (and the default axis moved from 1 to -1). The two agree when
/// every dim after the axis is 1 (over the last axis, say). Returns that axis, counted from the
/// front, when they agree for this node.
fn softmax_same_axis(
    eg: &OnnxEGraph,
    info: &OpInfo,
    roles: &crate::build::Roles<'_>,
    source: &OpSchema,
) -> Option<i64> {
    if !matches!(info.op_type.as_str(), "Softmax" | "LogSoftmax" | "Hardmax") {
        return None;
    }
    let shape = eg[roles.input(0)?]
        .data
        .ty
        .as_ref()
        .and_then(onnx_schema::infer::shape_of)?;
    let rank = shape.len() as i64;
    let axis = match roles.attr("axis").and_then(|a| attr_value(eg, a)) {
        Some(p) => p.i?,
        None if source.since_version < 13 => 1,
        None => -1,
    };
    let axis = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&axis) {
        return None;
    }
    let ones_after = shape[axis as usize + 1..]
        .iter()
        .all(|d| matches!(d, onnx_schema::infer::SymDim::Known(1)));
    ones_after.then_some(axis)
}

/// Adds, to every class holding a default-domain operator not legal at `target`, the same
/// operator bound to the target's version where that computes the same function; returns how
/// many nodes it added. The caller rebuilds the e-graph.
///
/// The two schemas must have the same inputs by name and slot (an input the target adds is
/// optional and absent here; one it drops is absent in the node), the same outputs, and the same
/// attributes, except that an attribute the target adds has a default that keeps the old
/// behaviour, and one it drops holds its default in the node. The element types in use must be
/// allowed by the target's type constraints.
pub fn rebind_to_opset(eg: &mut OnnxEGraph, target: i64, stepped: &BTreeSet<String>) -> usize {
    let mut additions: Vec<(Id, Plan)> = Vec::new();
    let mut scans: Vec<(Id, ScanPlan)> = Vec::new();
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
            // Ops whose version steps are rules were converted by saturation.
            if info.domain.is_empty() && stepped.contains(&info.op_type) {
                continue;
            }
            // A nondeterministic node (Dropout, the random ops) may be rebound: the new node
            // gets its own discriminator, so it only ever stands for this one node. A node with
            // subgraphs keeps them (already converted) and the outer values they read.
            let (Some(source), Some(to)) = (
                eg.analysis.ops.schema(op),
                onnx_schema::registry().lookup("", &info.op_type, target),
            ) else {
                continue;
            };
            let crosses = SAME_SIGNATURE_OTHER_MEANING.iter().any(|(o, v)| {
                *o == info.op_type && (source.since_version < *v) != (to.since_version < *v)
            });
            let roles = crate::build::Roles::new(info, &node.children);
            if to.deprecated {
                continue;
            }
            if info.op_type == "Scan" && (source.since_version < 9) != (to.since_version < 9) {
                if let Some(plan) = scan_across_9(eg, info, &roles, source, to) {
                    scans.push((c, plan));
                }
                continue;
            }
            // Crossing a change of meaning: only where both meanings agree, with the axis
            // written out (the default differs on the two sides).
            let axis = match crosses {
                false => None,
                true => match softmax_same_axis(eg, info, &roles, source) {
                    Some(a) => Some(a),
                    None => continue,
                },
            };
            if (source.since_version < 22) != (to.since_version < 22)
                && !ceil_windows_agree(eg, info, &roles)
            {
                continue;
            }
            if !attention_heads_allowed(eg, info, &roles, to) {
                continue;
            }
            let overrides = ceil_mode_as_padding(eg, info, &roles, to).unwrap_or_default();
            if let Some(mut plan) = rebuild(eg, c, node, info, &roles, source, to, &overrides) {
                if let Some(a) = axis {
                    let ty = to
                        .attributes
                        .iter()
                        .find(|t| t.name == "axis")
                        .map(|t| t.ty);
                    let Some(proto) =
                        ty.and_then(|ty| crate::value::to_attribute("axis", ty, &Val::Int(a)))
                    else {
                        continue;
                    };
                    plan.builder = plan.builder.attr("axis", AttrArg::Proto(Box::new(proto)));
                }
                additions.push((c, plan));
            }
        }
    }
    let mut n = 0;
    for (class, plan) in scans {
        if add_scan(eg, class, plan, target).is_some() {
            n += 1;
        }
    }
    for (class, plan) in additions {
        let Plan {
            mut builder,
            to,
            given,
            literals,
        } = plan;
        let mut ok = true;
        for (slot, v) in literals {
            match literal_input(eg, to, slot, &v, &given) {
                Ok(id) => builder = builder.input(slot, Some(id)),
                Err(_) => ok = false,
            }
        }
        if !ok {
            continue;
        }
        if let Ok((id, _)) = builder.add_to(eg) {
            eg.union(class, id);
            n += 1;
        }
    }
    n
}

/// Scan-8 runs over a batch axis (each input's first dim) and takes `sequence_lens` first;
/// Scan-9 dropped both and added the scan axes and the output directions. The body is the same:
/// it sees one batch item. A Scan-8 over a batch of 1 without `sequence_lens` is Scan-9 with
/// that axis squeezed from its inputs and unsqueezed back on its outputs; a Scan-9 that scans
/// axis 0 of its inputs and outputs, and writes its outputs forward, is Scan-8 over a batch of
/// 1 the other way round.
struct ScanPlan {
    up: bool,
    builder: OpBuilder,
    inputs: Vec<Id>,
    n_outputs: usize,
}

fn scan_across_9(
    eg: &OnnxEGraph,
    info: &OpInfo,
    roles: &crate::build::Roles<'_>,
    source: &OpSchema,
    to: &OpSchema,
) -> Option<ScanPlan> {
    let is_none = |id: Id| {
        eg[id]
            .nodes
            .iter()
            .any(|n| matches!(n.kind, NodeKind::None))
    };
    let ints = |name: &str| -> Option<Vec<i64>> {
        match roles.attr(name).filter(|&v| !is_none(v)) {
            None => Some(Vec::new()),
            Some(v) => attr_value(eg, v).map(|p| p.ints.clone()),
        }
    };
    let up = source.since_version < 9;
    let all = roles.inputs();
    let inputs: Vec<Id> = match up {
        // sequence_lens must be absent: every batch item runs the whole sequence.
        true => match all.split_first() {
            Some((&lens, rest)) if is_none(lens) => rest.to_vec(),
            _ => return None,
        },
        false => all.to_vec(),
    };
    if inputs.iter().any(|&v| is_none(v)) {
        return None;
    }
    // Every element type in use must be allowed at the target.
    let allowed = |id: Id| {
        let ty = eg[id].data.ty.as_ref().and_then(onnx_schema::type_str_of);
        let param = to.inputs.last().map(|p| p.type_str.as_str());
        match (
            ty,
            to.type_constraints
                .iter()
                .find(|t| Some(t.type_param.as_str()) == param),
        ) {
            (Some(ty), Some(tc)) => tc.allowed.contains(&ty),
            _ => false,
        }
    };
    if !inputs.iter().all(|&v| allowed(v)) {
        return None;
    }
    let mut b = OpBuilder::at_opset("", "Scan", to.since_version);
    let num_scan = roles.attr("num_scan_inputs")?;
    b = b
        .attr("body", AttrArg::Class(roles.attr("body")?))
        .attr("num_scan_inputs", AttrArg::Class(num_scan));
    let list = |v: Vec<i64>| Val::List(v.into_iter().map(Val::Int).collect());
    let ints_attr = |name: &str, v: Vec<i64>| {
        crate::value::to_attribute(
            name,
            onnx_proto::attribute_proto::AttributeType::Ints,
            &list(v),
        )
        .map(|p| AttrArg::Proto(Box::new(p)))
    };
    if up {
        // The batch: dim 0 of every input is 1.
        let batch_of_one = |id: Id| {
            eg[id]
                .data
                .ty
                .as_ref()
                .and_then(onnx_schema::infer::shape_of)
                .is_some_and(|s| s.first().and_then(|d| d.known()) == Some(1))
        };
        if !inputs.iter().all(|&v| batch_of_one(v)) {
            return None;
        }
        let dirs = ints("directions")?;
        if !dirs.is_empty() {
            b = b.attr(
                "scan_input_directions",
                ints_attr("scan_input_directions", dirs)?,
            );
        }
    } else {
        let zeros = |name: &str| ints(name).is_some_and(|v| v.iter().all(|&x| x == 0));
        if !zeros("scan_input_axes") || !zeros("scan_output_axes") {
            return None;
        }
        if !zeros("scan_output_directions") {
            return None;
        }
        let dirs = ints("scan_input_directions")?;
        if !dirs.is_empty() {
            b = b.attr("directions", ints_attr("directions", dirs)?);
        }
        b = b.input(0, None);
    }
    for (name, id) in roles.outer() {
        b = b.outer(name, id);
    }
    Some(ScanPlan {
        up,
        builder: b,
        inputs,
        n_outputs: info.n_outputs,
    })
}

/// `op` (Squeeze or Unsqueeze) of axis 0 at the target opset: `axes` an attribute before 13,
/// an input from 13.
fn on_axis_0(eg: &mut OnnxEGraph, op: &str, target: i64, x: Id) -> Option<Id> {
    let b = OpBuilder::at_opset("", op, target);
    let zero = Val::List(vec![Val::Int(0)]);
    let b = if b.schema()?.inputs.len() > 1 {
        let t = crate::value::to_tensor(&zero, onnx_proto::tensor_proto::DataType::Int64 as i32)?;
        let k = eg.analysis.consts.intern(t);
        let axes = eg.add(ONode::leaf(NodeKind::Const(k)));
        b.input(0, Some(x)).input(1, Some(axes))
    } else {
        let p = crate::value::to_attribute(
            "axes",
            onnx_proto::attribute_proto::AttributeType::Ints,
            &zero,
        )?;
        b.attr("axes", AttrArg::Proto(Box::new(p)))
            .input(0, Some(x))
    };
    b.add_to(eg).ok().map(|(id, _)| id)
}

/// Adds the Scan of the other side with its Squeeze and Unsqueeze nodes, and unions each of
/// its outputs with the node's.
fn add_scan(eg: &mut OnnxEGraph, class: Id, plan: ScanPlan, target: i64) -> Option<()> {
    let ScanPlan {
        up,
        mut builder,
        inputs,
        n_outputs,
    } = plan;
    let (into, back) = match up {
        true => ("Squeeze", "Unsqueeze"),
        false => ("Unsqueeze", "Squeeze"),
    };
    for v in inputs {
        let x = on_axis_0(eg, into, target, v)?;
        builder = builder.push_input(Some(x));
    }
    let (scan, _) = builder.outputs(n_outputs).add_to(eg).ok()?;
    let mut pairs = Vec::new();
    for i in 0..n_outputs {
        let old = eg.add(ONode::new(NodeKind::Out(i as u32), vec![class]));
        let new = eg.add(ONode::new(NodeKind::Out(i as u32), vec![scan]));
        pairs.push((old, on_axis_0(eg, back, target, new)?));
    }
    for (old, new) in pairs {
        eg.union(old, new);
    }
    Some(())
}

/// The default-domain ops whose every pair of consecutive (not deprecated) versions has a
/// version step in `rules`, up and down: rebinding leaves them to the rules. (The generated
/// steps leave out the ops the rebinding carries alone, see `onnx_rules::version_steps`.)
pub fn ops_with_steps(rules: &[&crate::RuleSet]) -> BTreeSet<String> {
    let mut pairs: BTreeSet<(String, i64, i64)> = BTreeSet::new();
    for set in rules {
        for r in set.rules() {
            let Some((a, b)) = r.step_ops() else { continue };
            if a.op_type == b.op_type && a.domain.is_empty() && b.domain.is_empty() {
                if let (Some(x), Some(y)) = (a.pin, b.pin) {
                    pairs.insert((a.op_type.clone(), x, y));
                }
            }
        }
    }
    let ops: BTreeSet<&String> = pairs.iter().map(|p| &p.0).collect();
    ops.into_iter()
        .filter(|op| !PARTLY_STEPPED.contains(&op.as_str()))
        .filter(|op| {
            let versions: Vec<i64> = onnx_schema::registry()
                .versions("", op)
                .iter()
                .filter(|s| !s.deprecated)
                .map(|s| s.since_version)
                .collect();
            versions.windows(2).all(|w| {
                pairs.contains(&((*op).clone(), w[0], w[1]))
                    && pairs.contains(&((*op).clone(), w[1], w[0]))
            })
        })
        .cloned()
        .collect()
}

/// What rebinding one node takes: the builder at the target version, and the logical
/// parameters that become constant inputs there (built once the e-graph can be changed).
struct Plan {
    builder: OpBuilder,
    to: &'static OpSchema,
    /// The regular inputs, by slot (literals take their element type from them).
    given: std::collections::BTreeMap<usize, Option<Id>>,
    literals: Vec<(usize, Val)>,
}

/// The builder of the node at the target's version, when the two versions are the same
/// function for this node.
#[allow(clippy::too_many_arguments)]
fn rebuild(
    eg: &OnnxEGraph,
    class: Id,
    node: &ONode,
    info: &OpInfo,
    roles: &crate::build::Roles<'_>,
    source: &'static OpSchema,
    to: &'static OpSchema,
    overrides: &Overrides,
) -> Option<Plan> {
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
    // Logical parameters (attributes that became inputs, or back): moved, not compared.
    let (src_params, to_params) = (
        logical_params(&info.op_type, source.since_version),
        logical_params(&info.op_type, to.since_version),
    );
    if LOGICAL_MOVES_NOT_CONVERTED.contains(&info.op_type.as_str()) && src_params != to_params {
        return None;
    }
    // Only the parameters that move between an attribute and an input are set aside; the
    // others are compared like any input or attribute.
    type Params = [onnx_rules::params::LogicalParam];
    let moved = |p: &onnx_rules::params::LogicalParam, other: &Params| {
        other.iter().any(|q| {
            q.name == p.name
                && matches!(
                    (p.loc, q.loc),
                    (ParamLoc::Attr(_), ParamLoc::Input(_))
                        | (ParamLoc::Input(_), ParamLoc::Attr(_))
                )
        })
    };
    let slot_of = |ps: &Params, other: &Params, i: usize| {
        ps.iter()
            .any(|p| p.loc == ParamLoc::Input(i) && moved(p, other))
    };
    let attr_of = |ps: &Params, other: &Params, a: &str| {
        ps.iter()
            .any(|p| matches!(p.loc, ParamLoc::Attr(x) if x == a) && moved(p, other))
    };
    let mut literals: Vec<(usize, Val)> = Vec::new();
    let mut moved_attrs: Vec<(String, onnx_proto::AttributeProto)> = Vec::new();
    // Inputs of logical parameters the target does not have, holding their default.
    let mut dropped_slots: Vec<usize> = Vec::new();
    for p in &src_params {
        let Some(q) = to_params.iter().find(|q| q.name == p.name) else {
            if let ParamLoc::Input(slot) = p.loc {
                let v = roles.input(slot).filter(|&v| !absent(Some(v)));
                if let Some(v) = v {
                    let default = dropped_param_default(&info.op_type, p.name)??;
                    let k = eg[v].nodes.iter().find_map(|n| match n.kind {
                        NodeKind::Const(k) => Some(k),
                        _ => None,
                    })?;
                    if !holds_everywhere(&crate::value::const_val(eg, k)?, default) {
                        return None;
                    }
                }
                dropped_slots.push(slot);
            }
            continue;
        };
        match (p.loc, q.loc) {
            (ParamLoc::Attr(a), ParamLoc::Input(slot)) => {
                let v = roles.attr(a).filter(|&v| !absent(Some(v)));
                if let Some(v) = v {
                    literals.push((slot, crate::value::attr_value(attr_value(eg, v)?)?));
                }
            }
            (ParamLoc::Input(slot), ParamLoc::Attr(a)) => {
                let v = roles.input(slot).filter(|&v| !absent(Some(v)));
                if v.is_none() {
                    if let Some(meaning) = absent_means(&info.op_type, p.name) {
                        let ty = to.attributes.iter().find(|t| t.name == a)?.ty;
                        let proto = crate::value::to_attribute(a, ty, &Val::Float(meaning))?;
                        moved_attrs.push((a.to_string(), proto));
                    }
                }
                if let Some(v) = v {
                    let k = eg[v].nodes.iter().find_map(|n| match n.kind {
                        NodeKind::Const(k) => Some(k),
                        _ => None,
                    })?;
                    let val = crate::value::const_val(eg, k)?;
                    let ty = to.attributes.iter().find(|t| t.name == a)?.ty;
                    moved_attrs.push((a.to_string(), crate::value::to_attribute(a, ty, &val)?));
                }
            }
            _ => {}
        }
    }
    let n = source.inputs.len().max(to.inputs.len());
    for i in 0..n {
        if slot_of(&src_params, &to_params, i)
            || slot_of(&to_params, &src_params, i)
            || dropped_slots.contains(&i)
        {
            continue;
        }
        match (source.inputs.get(i), to.inputs.get(i)) {
            (Some(p), Some(q)) => {
                let renamed = renamed_input(&info.op_type, &p.name, &q.name);
                if (p.name != q.name && !renamed) || p.is_homogeneous != q.is_homogeneous {
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
    // Outputs: the ones the node has must be the same; optional ones past them may differ
    // (BatchNormalization's training outputs).
    let used = info.n_outputs;
    if used > to.max_output
        || source.min_output != to.min_output
        || (source.max_output > 1) != (to.max_output > 1)
        || (0..used).any(|i| match (source.outputs.get(i), to.outputs.get(i)) {
            (Some(p), Some(q)) => p.name != q.name || p.option != q.option,
            (Some(p), None) | (None, Some(p)) => p.option != ParamOption::Variadic,
            (None, None) => false,
        })
    {
        return None;
    }
    // Attributes.
    let mut b = OpBuilder::at_opset("", &info.op_type, to.since_version);
    for (name, proto) in moved_attrs {
        b = b.attr(&name, AttrArg::Proto(Box::new(proto)));
    }
    for a in &source.attributes {
        if attr_of(&src_params, &to_params, &a.name) {
            continue;
        }
        let over = overrides.get(a.name.as_str());
        let value = match over {
            Some(_) => None,
            None => roles.attr(&a.name).filter(|&v| !absent(Some(v))),
        };
        let over_proto = over.and_then(|o| o.as_ref());
        match to.attributes.iter().find(|t| t.name == a.name) {
            Some(t) if t.ty == a.ty => {
                if let Some(p) = over_proto {
                    b = b.attr(&a.name, AttrArg::Proto(Box::new(p.clone())));
                } else if let Some(v) = value {
                    b = b.attr(&a.name, AttrArg::Class(v));
                } else if t.required {
                    return None;
                }
            }
            Some(_) => return None,
            None if over_proto.is_some() => return None,
            None => {
                // Dropped by the target: fine only where the node holds the default (or, for
                // an attribute added with another default, the behaviour before it).
                let holds_default = match old_behaviour(&info.op_type, &a.name) {
                    Some(old) => {
                        let held = value
                            .and_then(|v| attr_value(eg, v))
                            .and_then(|p| p.s.clone())
                            .or_else(|| a.default.as_ref().and_then(|d| d.s.clone()));
                        old.is_some() && held.as_deref() == old.map(str::as_bytes)
                    }
                    None => match (value, &a.default) {
                        (None, _) => true,
                        (Some(v), Some(d)) => attr_value(eg, v).is_some_and(|p| same_value(p, d)),
                        (Some(v), None) => attr_value(eg, v).is_some_and(|p| {
                            implicit_default(&a.name).is_some_and(|d| {
                                !p.ints.is_empty() && p.ints.iter().all(|&x| x == d)
                            })
                        }),
                    },
                };
                if !holds_default {
                    return None;
                }
            }
        }
    }
    for t in &to.attributes {
        if attr_of(&to_params, &src_params, &t.name) {
            continue;
        }
        if source.attributes.iter().all(|a| a.name != t.name) {
            if t.required {
                return None;
            }
            match old_behaviour(&info.op_type, &t.name) {
                None => {}
                Some(None) => return None,
                Some(Some(old)) => {
                    let proto = crate::value::to_attribute(&t.name, t.ty, &Val::Str(old.into()))?;
                    b = b.attr(&t.name, AttrArg::Proto(Box::new(proto)));
                }
            }
        }
    }
    if !types_allowed(eg, class, node, info, to) {
        return None;
    }
    let mut given = std::collections::BTreeMap::new();
    for i in 0..info.n_inputs {
        if slot_of(&src_params, &to_params, i) || dropped_slots.contains(&i) {
            continue;
        }
        let v = roles.input(i).filter(|&v| !absent(Some(v)));
        given.insert(i, v);
        b = b.input(i, v);
    }
    for (name, id) in roles.outer() {
        b = b.outer(name, id);
    }
    if info.is_tuple || info.n_outputs != 1 {
        b = b.outputs(info.n_outputs);
    }
    Some(Plan {
        builder: b,
        to,
        given,
        literals,
    })
}

/// Attributes a conversion writes differently from the node: a new value, or `None` for the
/// default.
type Overrides = std::collections::BTreeMap<&'static str, Option<onnx_proto::AttributeProto>>;

/// A pooling node's spatial dims (static) and its window attributes, with their defaults.
struct Pool {
    dims: Vec<i64>,
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    pads: Vec<i64>,
}

/// The extent of a dilated window: `d * (k - 1) + 1`.
fn effective_kernel(k: i64, d: i64) -> Option<i64> {
    d.checked_mul(k.checked_sub(1)?)?.checked_add(1)
}

fn pool_geometry(eg: &OnnxEGraph, roles: &crate::build::Roles<'_>) -> Option<Pool> {
    let attr = |name: &str| roles.attr(name).and_then(|a| attr_value(eg, a));
    let shape = eg[roles.input(0)?]
        .data
        .ty
        .as_ref()
        .and_then(onnx_schema::infer::shape_of)?;
    let dims: Vec<i64> = shape
        .iter()
        .skip(2)
        .map(|d| match d {
            onnx_schema::infer::SymDim::Known(v) => Some(*v),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let n = dims.len();
    let kernel = attr("kernel_shape")?.ints.clone();
    let ints_or = |name: &str, len: usize, d: i64| match attr(name) {
        Some(p) if p.ints.len() == len => Some(p.ints.clone()),
        Some(_) => None,
        None => Some(vec![d; len]),
    };
    (kernel.len() == n).then_some(())?;
    Some(Pool {
        strides: ints_or("strides", n, 1)?,
        dilations: ints_or("dilations", n, 1)?,
        pads: ints_or("pads", 2 * n, 0)?,
        dims,
        kernel,
    })
}

/// MaxPool with `ceil_mode` 1 going to a version without it (before 10): the same windows with
/// `ceil_mode` 0 and the end padding grown so the last window is kept. The padding is never a
/// maximum (it stands for -inf), and no window starts in the end padding (the output size rule
/// of `ceil_mode`). Needs the input's spatial dims and explicit padding.
fn ceil_mode_as_padding(
    eg: &OnnxEGraph,
    info: &OpInfo,
    roles: &crate::build::Roles<'_>,
    to: &OpSchema,
) -> Option<Overrides> {
    if info.op_type != "MaxPool" || to.attributes.iter().any(|a| a.name == "ceil_mode") {
        return None;
    }
    let attr = |name: &str| roles.attr(name).and_then(|a| attr_value(eg, a));
    if attr("ceil_mode")?.i? != 1 {
        return None;
    }
    if attr("auto_pad")
        .and_then(|p| p.s.clone())
        .is_some_and(|s| &s[..] != b"NOTSET")
    {
        return None;
    }
    let Pool {
        dims,
        kernel,
        strides,
        dilations,
        mut pads,
    } = pool_geometry(eg, roles)?;
    let n = dims.len();
    for i in 0..n {
        let eff_k = effective_kernel(kernel[i], dilations[i])?;
        let (pb, pe, s) = (pads[i], pads[i + n], strides[i]);
        let out = onnx_schema::infer::explicit_window_count(dims[i], pb, pe, eff_k, s, true)?;
        let covered = out.checked_sub(1)?.checked_mul(s)?.checked_add(eff_k)?;
        let extra = covered.checked_sub(dims[i].checked_add(pb)?.checked_add(pe)?)?;
        if extra > 0 {
            pads[i + n] = pe + extra;
        }
    }
    let pads_ty = to.attributes.iter().find(|a| a.name == "pads")?.ty;
    let list = Val::List(pads.into_iter().map(Val::Int).collect());
    let proto = crate::value::to_attribute("pads", pads_ty, &list)?;
    let mut o = Overrides::new();
    o.insert("ceil_mode", None);
    o.insert("pads", Some(proto));
    Some(o)
}

/// The pooling ops with `ceil_mode`, whose output size onnx computes differently from 22: there
/// a last window that would start in the end padding is dropped; before, onnx's shape inference
/// keeps it. A node crosses 22 only where both rules give the same sizes (always without
/// `ceil_mode`); the kernels here apply the rule of 22 at every version, as onnxruntime does.
fn ceil_windows_agree(eg: &OnnxEGraph, info: &OpInfo, roles: &crate::build::Roles<'_>) -> bool {
    if !matches!(info.op_type.as_str(), "AveragePool" | "MaxPool" | "LpPool") {
        return true;
    }
    let attr = |name: &str| roles.attr(name).and_then(|a| attr_value(eg, a));
    if attr("ceil_mode").and_then(|p| p.i).unwrap_or(0) == 0 {
        return true;
    }
    (|| -> Option<bool> {
        if attr("auto_pad")
            .and_then(|p| p.s.clone())
            .is_some_and(|s| &s[..] != b"NOTSET")
        {
            return Some(true);
        }
        let Pool {
            dims,
            kernel,
            strides,
            dilations,
            pads,
        } = pool_geometry(eg, roles)?;
        let n = dims.len();
        for i in 0..n {
            let eff_k = effective_kernel(kernel[i], dilations[i])?;
            let (pb, pe, s) = (pads[i], pads[i + n], strides[i]);
            let new = onnx_schema::infer::explicit_window_count(dims[i], pb, pe, eff_k, s, true)?;
            let total = dims[i]
                .checked_add(pb)?
                .checked_add(pe)?
                .checked_sub(eff_k)?;
            if s <= 0 || total < 0 {
                return None;
            }
            let old = (total + s - 1) / s + 1;
            if new != old {
                return Some(false);
            }
        }
        Some(true)
    })()
    .unwrap_or(false)
}

/// Attention from 25 refuses `q_num_heads`/`kv_num_heads` on 4-D inputs (their heads are in
/// the shape); before 25 the attributes are ignored there. Such a node is not rebound to 25+.
fn attention_heads_allowed(
    eg: &OnnxEGraph,
    info: &OpInfo,
    roles: &crate::build::Roles<'_>,
    to: &OpSchema,
) -> bool {
    if info.op_type != "Attention" || to.since_version < 25 {
        return true;
    }
    let given = |name: &str| roles.attr(name).and_then(|a| attr_value(eg, a)).is_some();
    if !given("q_num_heads") && !given("kv_num_heads") {
        return true;
    }
    // Rank 4, or unknown: not rebound.
    let rank = roles
        .input(0)
        .and_then(|q| eg[q].data.ty.as_ref())
        .and_then(onnx_schema::infer::shape_of)
        .map(|s| s.len());
    rank == Some(3)
}

/// Whether a constant's every element is `x`.
fn holds_everywhere(v: &Val, x: f64) -> bool {
    match v {
        Val::Bool(b) => f64::from(u8::from(*b)) == x,
        Val::Int(i) => *i as f64 == x,
        Val::Float(f) => *f == x,
        Val::List(l) => l.iter().all(|e| holds_everywhere(e, x)),
        _ => false,
    }
}

/// Attributes whose schema gives no default but whose documented one is the same value along
/// every spatial axis (`dilations` of the pooling ops: 1).
fn implicit_default(attr: &str) -> Option<i64> {
    match attr {
        "dilations" => Some(1),
        _ => None,
    }
}

fn attr_value(eg: &OnnxEGraph, class: Id) -> Option<&onnx_proto::AttributeProto> {
    eg[class].nodes.iter().find_map(|n| match n.kind {
        NodeKind::Attr(a) => Some(eg.analysis.attrs.get(a)),
        _ => None,
    })
}

/// Whether the element types of the node's present inputs, and of its value, are allowed by
/// the target schema's type constraints.
fn types_allowed(eg: &OnnxEGraph, class: Id, node: &ONode, info: &OpInfo, to: &OpSchema) -> bool {
    // A type parameter binds one type across the inputs and outputs it names (QuantizeLinear-19
    // ties `y_scale` to `x`, where 13 fixed it to float).
    let mut bound: std::collections::BTreeMap<String, String> = Default::default();
    let mut allowed = |type_str: &str, ty: Option<String>, homogeneous: bool| -> bool {
        let Some(ty) = ty else {
            return false;
        };
        match to
            .type_constraints
            .iter()
            .find(|t| t.type_param == type_str)
        {
            // A fixed type (`tensor(float)`): the value must have it.
            None => ty == type_str,
            Some(tc) => {
                if !tc.allowed.contains(&ty) {
                    return false;
                }
                !homogeneous || bound.entry(type_str.to_string()).or_insert(ty.clone()) == &ty
            }
        }
    };
    let type_of = |id: Id| eg[id].data.ty.as_ref().and_then(onnx_schema::type_str_of);
    // The regular inputs only: outer-scope values and a nondeterministic op's discriminator
    // follow them.
    let start = info.attr_names.len().min(node.children.len());
    let end = (start + info.n_inputs).min(node.children.len());
    let inputs = &node.children[start..end];
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
            // A logical parameter the target keeps as an attribute (checked by `rebuild`).
            continue;
        };
        if !allowed(&param.type_str, type_of(child), param.is_homogeneous) {
            return false;
        }
    }
    // The outputs of an op with subgraphs (If, Loop, Scan) are typed by its bodies, which are
    // converted on their own; an unknown type there is not held against the node.
    let has_body = to
        .attributes
        .iter()
        .any(|a| a.ty == onnx_proto::attribute_proto::AttributeType::Graph);
    match to.outputs.first() {
        Some(out) if to.outputs.len() == 1 && !info.is_tuple => match type_of(class) {
            None if has_body => true,
            ty => allowed(&out.type_str, ty, out.is_homogeneous),
        },
        // Tuples: each output in use, by its projection's type (Dropout's mask is T before 10
        // and bool after).
        _ => (0..info.n_outputs).all(|i| {
            let Some(out) = to.outputs.get(i).or_else(|| {
                to.outputs
                    .last()
                    .filter(|p| p.option == ParamOption::Variadic)
            }) else {
                return false;
            };
            // An output whose type is not known (a Loop's outputs, say) is not held against
            // the node; the values its consumers read are checked where they are rebound.
            match eg
                .lookup(ONode::new(NodeKind::Out(i as u32), vec![class]))
                .and_then(|p| type_of(eg.find(p)))
            {
                Some(ty) => allowed(&out.type_str, Some(ty), out.is_homogeneous),
                None => true,
            }
        }),
    }
}
