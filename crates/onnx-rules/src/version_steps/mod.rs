//! The version steps of the ONNX default domain that follow from the operator schemas and the
//! version tables of onnx-schema ([`onnx_schema::versions`]), written as rule-language text: the
//! built-in rule set loads [`steps_text`] as `rules/version/steps.rules` (there is no such file;
//! the name is the origin its rules' locations carry).
//!
//! For every pair of consecutive schema versions (A, B) of an op whose two versions compute the
//! same function, two version steps (unless the rebinding carries the op alone, below):
//!
//! ```text
//! rule reduce_sum_11_to_13 [version, step, exact]:
//!   ReduceSum@11<axes: axes, ..rest>(data) => ReduceSum@13<axes: axes, ..rest>(data)
//!
//! rule reduce_sum_13_to_11 [version, step, exact]:
//!   ReduceSum@13<axes: axes, ..rest>(data) => ReduceSum@11<axes: axes, ..rest>(data)
//!   where member(dtype(data), [float, double, float16, int32, int64, uint32, uint64])
//! ```
//!
//! with a guard wherever the element types the other version allows differ (and where it ties
//! two values to one type that the first does not). A pair is generated when the two versions
//! have the same inputs (names, options, homogeneity; renamed inputs of
//! [`onnx_schema::versions::RENAMED_INPUTS`] count as the same) and outputs, and their
//! attributes differ at most by attributes one side has and the other does not, where the one
//! without holds the default of the one with (the steps name the shared attributes and leave
//! the others unnamed, which the matcher reads as "holds its default"). Attributes whose default
//! is not the old behaviour
//! ([`onnx_schema::versions::ADDED_ATTRIBUTE_NOT_OLD_BEHAVIOUR`]) are written with the old
//! behaviour. Logical parameters ([`crate::params`]) are named on both sides, so the step moves
//! them between an attribute and an input. Multi-output ops get one step per output count.
//!
//! The changes of meaning ([`onnx_schema::versions::MEANING_CHANGES`]) are crossed by families
//! of guarded steps (the `families` module): Softmax/LogSoftmax/Hardmax at 13, Sum/Max/Min/Mean at 8,
//! the `broadcast` attribute's ops at 7, Cast 1 <-> 6, the pooling ops across 22 with
//! `ceil_mode` 0, Split 13 <-> 18 by `num_outputs`, Attention 24 <-> 25. The rows marked
//! [`StepsAcross::ByHand`] are left to `rules/version/moves.rules`.
//!
//! Not generated, and listed in the text's header with the reason: nondeterministic ops, ops
//! with subgraphs, pairs that change inputs, outputs or attribute types, and pairs whose
//! differing types are not tensors. Those are converted by hand-written rules or by the
//! rebinding in onnx-egraph's `convert` module.
//!
//! # One mechanism per crossing
//!
//! A conversion has two mechanisms that carry a node from one version of its op to another:
//! these steps (run in the version phase's saturation) and the rebinding of onnx-egraph's
//! `convert` module (run after it, from the node's version straight to the target's). Each op is
//! left to exactly one of them:
//!
//! - The rebinding alone carries the ops whose every pair of consecutive versions is *plain*:
//!   one signature up to element types, no change of meaning, no logical parameter, no attribute
//!   written with its old behaviour or held at another value, no guard beyond types. For those
//!   the generator writes no step (the header lists them): a step would only restate what the
//!   rebinding derives from the two schemas. Except for a few ops (`KEEP_STEPS`) whose steps
//!   carry nodes of unknown element types, which the rebinding refuses: those keep their steps
//!   and are carried by the steps alone.
//! - The steps alone carry the ops whose every pair has steps and at least one pair is not
//!   plain (a moved parameter, a family above): `convert::ops_with_steps` finds them in the
//!   loaded rules and the rebinding leaves them alone.
//! - The ops with a pair that gets no step (listed in the header with the reason) are rebound
//!   where the steps leave them; their other pairs keep their steps, which the hand-written
//!   rules of `rules/version/moves.rules` chain with. The ops of
//!   [`onnx_schema::versions::PARTLY_STEPPED`] likewise: their steps cover some nodes (the
//!   guards), the rebinding the others.
//!
//! Every generated rule is proven by `onnx-opt rules check` like any rule. The text is
//! deterministic (ops in name order, versions ascending) and built once per process.

mod bodies;
mod families;
mod pair;

pub use bodies::{bodies_text, generate_bodies, BODIES_ORIGIN, UNSOUND_BODIES};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use onnx_proto::attribute_proto::AttributeType;
use onnx_schema::versions::{meaning_change, StepsAcross, DROPPED_ATTRIBUTE_HELD};
use onnx_schema::{NodeDeterminism, OpSchema};

use crate::params::logical_params;

/// The origin name the generated steps are loaded under (rule locations and the rules list
/// name it).
pub const STEPS_ORIGIN: &str = "rules/version/steps.rules";

/// Ops the reference interpreter has no kernel for: their steps could not be proven.
const NO_KERNEL: &[&str] = &["MaxRoiPool"];

/// Nondeterministic ops whose steps hold in inference: Dropout with training off is an identity
/// (and an all-true mask).
const INFERENCE_ONLY: &[&str] = &["Dropout"];

/// Ops with outputs of variadic arity: steps are generated for 1 to this many outputs (a node
/// with more is left to the rebinding).
const MAX_VARIADIC_OUTPUTS: usize = 16;

/// Output counts a step is generated for, where not every count the schema allows is a use:
/// BatchNormalization has 5 outputs (before 14) or 3 (from 14) only when training, which the
/// steps do not convert.
const OUTPUT_COUNTS: &[(&str, &[usize])] = &[("BatchNormalization", &[1])];

/// The steps of one pair of versions, and whether the rebinding carries the pair as well (the
/// two versions have one signature up to element types and attributes at their defaults).
struct Pair {
    steps: Vec<String>,
    plain: bool,
}

impl Pair {
    /// Steps across a change the rebinding does not carry as the steps do.
    fn special(steps: Vec<String>) -> Self {
        Pair {
            steps,
            plain: false,
        }
    }
}

/// Plain ops whose steps are kept: removing them changed converted models. The rebinding needs
/// the element type of every input and output of a node; a step up without a type guard does
/// not, so it carries nodes whose types are not known. The backend tests
/// `test_affine_grid_*_expanded` (opset 20) are refused at opset 21 without the steps of
/// CastLike and ConstantOfShape (in the If branches of the expanded AffineGrid function) and
/// of Transpose (after the If, whose outputs have no known type); the other plain ops those
/// models use on such values keep theirs too (Expand, GatherElements, MatMul, Range, Shape,
/// Size). Widening the rebinding to nodes of unknown types would let these go as well.
const KEEP_STEPS: &[&str] = &[
    "CastLike",
    "ConstantOfShape",
    "Expand",
    "GatherElements",
    "MatMul",
    "Range",
    "Shape",
    "Size",
    "Transpose",
];

/// Why a pair of versions gets no step (the header lists it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Skip(pub(crate) String);

impl Skip {
    pub(crate) fn new(why: impl Into<String>) -> Self {
        Skip(why.into())
    }
}

/// The generated steps, built on first use: the text of `rules/version/steps.rules`.
pub fn steps_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(generate)
}

/// Builds the text of the version steps from the embedded schema registry and the version
/// tables (what [`steps_text`] caches).
pub fn generate() -> String {
    let registry = onnx_schema::registry();
    let ops: BTreeSet<&str> = registry.op_types("").collect();
    let mut rules: Vec<String> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    let mut rebound: Vec<&str> = Vec::new();
    for op in ops {
        let mut versions: Vec<&OpSchema> = registry.versions("", op).iter().collect();
        versions.sort_by_key(|s| s.since_version);
        let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut steps = Vec::new();
        let mut all_plain = versions.len() > 1;
        for w in versions.windows(2) {
            let (frm, to) = (w[0], w[1]);
            let (a, b) = (frm.since_version, to.since_version);
            match pair_steps(op, frm, to, &mut reasons) {
                Ok(pair) => {
                    all_plain &= pair.plain;
                    steps.extend(pair.steps);
                }
                Err(Skip(why)) => {
                    all_plain = false;
                    reasons.entry(why).or_default().push(format!("{a}->{b}"));
                }
            }
        }
        match all_plain && !KEEP_STEPS.contains(&op) {
            true => rebound.push(op),
            false => rules.extend(steps),
        }
        for (why, pairs) in reasons {
            if why != "deprecated" {
                skipped.push(format!("#   {op} {}: {why}", pairs.join(", ")));
            }
        }
    }
    let mut header: Vec<String> = [
        "# version/steps.rules: version steps generated from the operator schemas and the version",
        "# tables of crates/onnx-schema/src/versions.rs by crates/onnx-rules/src/version_steps",
        "# (there is no such file: the built-in rule set loads this text under the name). Each pair",
        "# of consecutive versions of an op that compute the same function gives a step up and a",
        "# step down, guarded by the element types the target version allows. A conversion runs",
        "# the steps toward its target opset, chained in one saturation; extraction then keeps the",
        "# node legal at the target.",
    ]
    .map(String::from)
    .to_vec();
    header.push(format!(
        "# Generated from onnx {}'s schemas: {} steps.",
        registry.onnx_version(),
        rules.len()
    ));
    header.extend(
        [
            "# Assumes: the two versions of each pair compute the same function on the values both",
            "# allow (what `rules check` proves on random instances).",
            "#",
            "# Not generated (hand-written rules or the rebinding in crates/onnx-egraph/src/convert.rs",
            "# convert these):",
        ]
        .map(String::from),
    );
    header.extend(skipped);
    header.push("#".to_string());
    header.push(
        "# Carried by the rebinding alone (every pair of versions the same function on the same"
            .to_string(),
    );
    header.push("# signature, up to element types and attributes at their defaults):".to_string());
    let mut line = "#  ".to_string();
    for op in rebound {
        if line.len() + op.len() + 2 > 96 {
            header.push(line.trim_end().to_string());
            line = "#  ".to_string();
        }
        line.push_str(&format!(" {op},"));
    }
    header.push(line.trim_end_matches(',').to_string());
    format!("{}\n\n{}\n", header.join("\n"), rules.join("\n\n"))
}

fn has_attr_type(s: &OpSchema, tys: &[AttributeType]) -> bool {
    s.attributes.iter().any(|x| tys.contains(&x.ty))
}

fn has_attr(s: &OpSchema, name: &str) -> bool {
    s.attributes.iter().any(|x| x.name == name)
}

/// The steps of one pair of consecutive versions, or why there are none. A count of outputs
/// (past one) that gets no step is noted in `reasons`.
fn pair_steps(
    op: &str,
    frm: &'static OpSchema,
    to: &'static OpSchema,
    reasons: &mut BTreeMap<String, Vec<String>>,
) -> Result<Pair, Skip> {
    let (a, b) = (frm.since_version, to.since_version);
    if frm.deprecated || to.deprecated {
        return Err(Skip::new("deprecated"));
    }
    let graphs = [AttributeType::Graph, AttributeType::Graphs];
    if has_attr_type(frm, &graphs) || has_attr_type(to, &graphs) {
        return Err(Skip::new("it has subgraphs"));
    }
    let change = meaning_change(op, b);
    if let Some(c) = change.filter(|c| c.steps == StepsAcross::ByHand) {
        return Err(Skip::new(c.note));
    }
    let random = |s: &OpSchema| s.node_determinism == NodeDeterminism::NonDeterministic;
    if (random(frm) || random(to)) && !INFERENCE_ONLY.contains(&op) {
        return Err(Skip::new("nondeterministic"));
    }
    if NO_KERNEL.contains(&op) {
        return Err(Skip::new("the reference interpreter has no kernel for it"));
    }
    if op == "Constant" {
        return Err(Skip::new(
            "constants are values of the e-graph, written at any opset",
        ));
    }
    let odd = [
        AttributeType::SparseTensor,
        AttributeType::SparseTensors,
        AttributeType::TypeProto,
        AttributeType::TypeProtos,
    ];
    if has_attr_type(frm, &odd) || has_attr_type(to, &odd) {
        return Err(Skip::new("it has sparse-tensor or type attributes"));
    }
    match (op, a, b) {
        ("Attention", _, 25) => return Ok(Pair::special(families::attention_25_steps())),
        ("Cast", 1, 6) => return Ok(Pair::special(families::cast_steps())),
        ("Sum" | "Max" | "Min" | "Mean", _, 8) => {
            return Ok(Pair::special(families::variadic_broadcast_steps(
                op, frm, to,
            )))
        }
        ("Softmax" | "LogSoftmax" | "Hardmax", _, 13) => {
            return Ok(Pair::special(families::axis_family_steps(op)))
        }
        _ => {}
    }
    let (lpf, lpt) = (logical_params(op, a), logical_params(op, b));
    let (sfrm, sto) = (pair::strip(frm, &lpf), pair::strip(to, &lpt));
    pair::same_inputs(op, &sfrm, &sto)?;
    let only = OUTPUT_COUNTS.iter().find(|(o, _)| *o == op).map(|x| x.1);
    let counts: Vec<usize> = pair::output_counts(frm, to)
        .into_iter()
        .filter(|n| only.is_none_or(|c| c.contains(n)))
        .collect();
    if counts.is_empty() {
        return Err(Skip::new("its outputs change"));
    }
    let added = pair::attr_plan(op, &sfrm, &sto)?;
    if has_attr(frm, "broadcast") || has_attr(to, "broadcast") {
        let both = has_attr(frm, "broadcast") && has_attr(to, "broadcast");
        if b != 7 && !both {
            return Err(Skip::new(
                "it broadcasts by its `broadcast` attribute (before 7)",
            ));
        }
    }
    if has_attr(frm, "broadcast") && !has_attr(to, "broadcast") {
        return families::broadcast_steps(op, frm, to).map(Pair::special);
    }
    let mut steps = Vec::new();
    for n in counts {
        let both = pair::step(op, frm, to, &added, n).and_then(|up| {
            let down = pair::step(op, to, frm, &added, n)?;
            Ok([up, down])
        });
        match both {
            Ok(both) => steps.extend(both),
            Err(e) if n == 1 => return Err(e),
            Err(Skip(why)) => reasons
                .entry(format!("with {n} outputs, {why}"))
                .or_default()
                .push(format!("{a}->{b}")),
        }
    }
    if (op, a, b) == ("Split", 13, 18) {
        steps.extend(families::split_num_outputs_steps());
    }
    // A pair across a change of meaning that the families above do not write is a row the
    // generator does not know.
    debug_assert!(change.is_none_or(|c| c.steps == StepsAcross::Generated));
    // What the rebinding carries as well: no change of meaning, no logical parameter, no
    // attribute written with its old behaviour or held at another value, no guard beyond types.
    let plain = change.is_none()
        && lpf.is_empty()
        && lpt.is_empty()
        && added.is_empty()
        && DROPPED_ATTRIBUTE_HELD.iter().all(|x| x.0 != op)
        && !pair::has_extra_guards(op, a, b)
        && !has_attr(frm, "broadcast")
        && !has_attr(to, "broadcast");
    Ok(Pair { steps, plain })
}

#[cfg(test)]
mod tests {
    #[test]
    fn generation_is_deterministic() {
        assert_eq!(super::generate(), super::generate());
    }
}
