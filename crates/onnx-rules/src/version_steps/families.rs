//! The families of steps across a change of meaning ([`onnx_schema::versions::MEANING_CHANGES`]
//! rows the generator writes) and the Cast pair whose attribute changes type: each writes the
//! steps for the nodes on which both versions agree, guarded.

use onnx_schema::OpSchema;

use super::pair::{allowed, count_parts, snake, sorted_types, tensor_elem, type_guards};
use super::{Skip, MAX_VARIADIC_OUTPUTS};

/// Sum, Max, Min and Mean down from 8 are written for up to this many inputs (a node with more
/// is left to the rebinding).
const MAX_VARIADIC_INPUTS: usize = 4;

/// TensorProto.DataType codes of the types Cast-1 names by string.
const CAST1_TYPES: &[(&str, i32)] = &[
    ("FLOAT", 1),
    ("UINT8", 2),
    ("INT8", 3),
    ("UINT16", 4),
    ("INT16", 5),
    ("INT32", 6),
    ("INT64", 7),
    ("BOOL", 9),
    ("FLOAT16", 10),
    ("DOUBLE", 11),
    ("UINT32", 12),
    ("UINT64", 13),
];

fn rule(ident: &str, name: &str, body: &[String]) -> String {
    let mut lines = vec![
        ident.to_string(),
        format!("rule {name} [version, step, exact]:"),
    ];
    lines.extend(body.iter().cloned());
    lines.join("\n")
}

/// The element types a type parameter allows, as the rule language names them.
fn elems_of(s: &OpSchema, param: &str) -> String {
    sorted_types(&allowed(s, param))
        .into_iter()
        .filter_map(tensor_elem)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sum, Max, Min and Mean across 8: before, every input has the output's shape; from 8 they
/// broadcast. Up always; down where the inputs' shapes are equal (one step per arity).
pub(super) fn variadic_broadcast_steps(op: &str, frm: &OpSchema, to: &OpSchema) -> Vec<String> {
    let s = snake(op);
    let (a, b) = (frm.since_version, to.since_version);
    let mut out = Vec::new();
    for n in 1..=MAX_VARIADIC_INPUTS {
        let names: Vec<String> = (0..n).map(|i| format!("x{i}")).collect();
        for (fv, tv, f, t) in [(a, b, frm, to), (b, a, to, frm)] {
            let mut guards: Vec<String> = names[1..]
                .iter()
                .map(|v| format!("same_shape(x0, {v})"))
                .collect();
            if allowed(t, "T") != allowed(f, "T") {
                guards.push(format!("member(dtype(x0), [{}])", elems_of(t, "T")));
            }
            let mut body = vec![format!(
                "  {op}@{fv}({0}) => {op}@{tv}({0})",
                names.join(", ")
            )];
            if !guards.is_empty() {
                body.push(format!("  where {}", guards.join(" && ")));
            }
            out.push(rule(
                &format!("# {op}-{fv} of {n} input(s) with one shape == {op}-{tv}"),
                &format!("{s}_{fv}_to_{tv}_{n}"),
                &body,
            ));
        }
    }
    out
}

/// Cast 1 <-> 6: `to` names the type by string at 1 and by code from 6 (one step per type,
/// both ways; the type sets are the same).
pub(super) fn cast_steps() -> Vec<String> {
    let mut out = Vec::new();
    for &(name, code) in CAST1_TYPES {
        let low = name.to_lowercase();
        out.push(rule(
            &format!("# Cast-1 to \"{name}\" == Cast-6 to {code}"),
            &format!("cast_1_to_6_{low}"),
            &[format!(
                "  Cast@1<to: \"{name}\">(x) => Cast@6<to: {code}>(x)"
            )],
        ));
        out.push(rule(
            &format!("# Cast-6 to {code} == Cast-1 to \"{name}\""),
            &format!("cast_6_to_1_{low}"),
            &[format!(
                "  Cast@6<to: {code}>(x) => Cast@1<to: \"{name}\">(x)"
            )],
        ));
    }
    out
}

/// Softmax, LogSoftmax and Hardmax across 13: before, the input is coerced to 2-D at `axis` and
/// normalized over each row; from 13, over `axis` alone. Over the last axis both agree. Up at
/// another axis, for targets from 14: Flatten at the axis, normalize the rows, Reshape back
/// with allowzero. (decompose.rules moves any axis last, and writes the Flatten form with a
/// Reshape of 13 where x has no 0 dim.)
pub(super) fn axis_family_steps(op: &str) -> Vec<String> {
    let s = snake(op);
    let last = "  where rank(x) >= 1 && (a == -1 || a == rank(x) - 1)".to_string();
    vec![
        rule(
            &format!("# {op}-11 over the last axis == {op}-13 over it"),
            &format!("{s}_11_to_13"),
            &[
                format!("  {op}@11<axis: a>(x) => {op}@13<axis: a>(x)"),
                last.clone(),
                "  hint a == -1".to_string(),
            ],
        ),
        rule(
            &format!(
                "# {op}-11 at axis a == {op}-13 over the rows of x flattened at a, reshaped back with\n\
                 # allowzero (a Reshape without it would copy a dim of the rows where x has a 0 dim)"
            ),
            &format!("{s}_11_to_14_flattened"),
            &[
                format!(
                    "  {op}@11<axis: a>(x) => Reshape@14<shape: s, allowzero: 1>({op}@13<axis: -1>(Flatten@13<axis: a>(x)))"
                ),
                "  let s = Shape@13(x)".to_string(),
                "  where rank(x) >= 2 && a != -1 && a != rank(x) - 1".to_string(),
                "  hint rank(x) == 3 && a == 1".to_string(),
            ],
        ),
        rule(
            &format!("# {op}-13 over the last axis == {op}-11 over it"),
            &format!("{s}_13_to_11"),
            &[
                format!("  {op}@13<axis: a>(x) => {op}@11<axis: a>(x)"),
                last,
                "  hint a == -1".to_string(),
            ],
        ),
    ]
}

/// Attention 24 <-> 25: from 25, `q_num_heads` and `kv_num_heads` are refused on 4-D inputs
/// (their heads are in the shape; 24 ignores them there), so up they are dropped on 4-D
/// inputs; down, 25's window attributes must hold their defaults (`..rest` stops the step
/// otherwise). One step per output count.
pub(super) fn attention_25_steps() -> Vec<String> {
    let ins = "q, k, v, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?";
    let outs = "q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen";
    let mut out = Vec::new();
    for n in 1..=4 {
        let (head, sfx, note) = count_parts(n);
        let paren = match note.is_empty() {
            true => String::new(),
            false => format!(" ({note})"),
        };
        let semi = match note.is_empty() {
            true => String::new(),
            false => format!("; {note}"),
        };
        out.push(rule(
            &format!("# Attention-24 on 3-D inputs, or without head counts == Attention-25{paren}"),
            &format!("attention_24_to_25{sfx}"),
            &[
                format!("  Attention@24{head}<q_num_heads: qh, kv_num_heads: kh, ..rest>({ins})"),
                format!(
                    "  => Attention@25{head}<q_num_heads: qh, kv_num_heads: kh, ..rest>({outs})"
                ),
                "  where rank(q) == 3 || (is_absent(qh) && is_absent(kh))".to_string(),
            ],
        ));
        out.push(rule(
            &format!(
                "# Attention-24 on 4-D inputs == Attention-25 without the head counts (24 ignores them there{semi})"
            ),
            &format!("attention_24_to_25_4d{sfx}"),
            &[
                format!(
                    "  Attention@24{head}<q_num_heads: _, kv_num_heads: _, ..rest>({ins}) => Attention@25{head}<..rest>({outs})"
                ),
                "  where rank(q) == 4".to_string(),
                "  hint rank(q) == 4".to_string(),
            ],
        ));
        out.push(rule(
            &format!("# Attention-25 with its window attributes at their defaults == Attention-24{paren}"),
            &format!("attention_25_to_24{sfx}"),
            &[format!(
                "  Attention@25{head}<..rest>({ins}) => Attention@24{head}<..rest>({outs})"
            )],
        ));
    }
    out
}

/// Split 13 <-> 18 without a `split` input: 13 splits evenly; 18 takes `num_outputs` (its last
/// part is smaller where the dim does not divide), so going down the dim must divide.
pub(super) fn split_num_outputs_steps() -> Vec<String> {
    let mut out = Vec::new();
    for n in 1..=MAX_VARIADIC_OUTPUTS {
        let (head, sfx, note) = count_parts(n);
        let more = match note.is_empty() {
            true => ")".to_string(),
            false => format!("; {note})"),
        };
        out.push(rule(
            &format!("# Split-13 == Split-18 with num_outputs {n} (no split input: even parts{more}"),
            &format!("split_13_to_18_even{sfx}"),
            &[
                format!(
                    "  Split@13{head}<split: s, ..rest>(input) => Split@18{head}<num_outputs: {n}, ..rest>(input)"
                ),
                "  where is_absent(s)".to_string(),
            ],
        ));
        out.push(rule(
            &format!(
                "# Split-18 with num_outputs {n} == Split-13 where the dim divides (no split input{more};\n\
                 # num_outputs must be the node's output count: a node with fewer outputs than parts\n\
                 # reads the first parts of num_outputs, where Split-13 would split by its outputs)"
            ),
            &format!("split_18_to_13_even{sfx}"),
            &[
                format!(
                    "  Split@18{head}<num_outputs: {n}, axis: a, ..rest>(input) => Split@13{head}<axis: a, ..rest>(input)"
                ),
                format!("  where dim(input, a) % {n} == 0"),
                format!("  hint a == 0 && dim(input, 0) == {}", 2 * n),
            ],
        ));
    }
    out
}

/// The steps across 7 of an op with the `broadcast` attribute: before 7 inputs broadcast only
/// with `broadcast` 1, B's shape then a suffix of A's (or a scalar); from 7 numpy-style. Up:
/// without broadcast (equal shapes), or with it and no `axis`. Down: equal shapes without it,
/// B's shape a suffix of A's with it. Gemm's C: unidirectional from 7, `broadcast` 1 before.
pub(super) fn broadcast_steps(
    op: &str,
    frm: &OpSchema,
    to: &OpSchema,
) -> Result<Vec<String>, Skip> {
    let (a, b) = (frm.since_version, to.since_version);
    let base = format!("{}_{a}_to_{b}", snake(op));
    let back = format!("{}_{b}_to_{a}", snake(op));
    let (sf, st) = (super::pair::strip(frm, &[]), super::pair::strip(to, &[]));
    let xy = [Some("x".to_string()), Some("y".to_string())];
    let up_guards = type_guards(&sf, &st, &xy, &[false, false], 1)?;
    let down_guards = type_guards(&st, &sf, &xy, &[false, false], 1)?;
    let step = |name: &str, ident: String, lhs: String, rhs: String, guards: Vec<String>| {
        let mut body = vec![format!("  {lhs} => {rhs}")];
        if !guards.is_empty() {
            body.push(format!("  where {}", guards.join(" && ")));
        }
        rule(&ident, name, &body)
    };
    let with = |g: &[String], more: &[&str]| -> Vec<String> {
        g.iter()
            .cloned()
            .chain(more.iter().map(|s| s.to_string()))
            .collect()
    };
    let suffix = "shape(y) == select(shape(x), range(rank(x) - rank(y), rank(x)))";
    if op == "Gemm" {
        return Ok(vec![
            step(
                &base,
                format!("# Gemm-{a} == Gemm-{b} (C broadcasts unidirectionally at {b}; with broadcast 0 it has the result's shape)"),
                format!("Gemm@{a}<broadcast: _, ..rest>(x, y, c)"),
                format!("Gemm@{b}<..rest>(x, y, c)"),
                up_guards,
            ),
            step(
                &back,
                format!("# Gemm-{b} == Gemm-{a} with broadcast 1 (C broadcast unidirectionally)"),
                format!("Gemm@{b}<..rest>(x, y, c)"),
                format!("Gemm@{a}<broadcast: 1, ..rest>(x, y, c)"),
                down_guards,
            ),
        ]);
    }
    Ok(vec![
        step(
            &base,
            format!("# {op}-{a}(x, y) == {op}-{b}(x, y) where the shapes are equal (no broadcast)"),
            format!("{op}@{a}(x, y)"),
            format!("{op}@{b}(x, y)"),
            with(&up_guards, &["same_shape(x, y)"]),
        ),
        step(
            &format!("{base}_broadcast"),
            format!("# {op}-{a}(x, y, broadcast: 1) == {op}-{b}(x, y) where y's shape is a suffix of x's (numpy-style broadcasting agrees)"),
            format!("{op}@{a}<broadcast: 1>(x, y)"),
            format!("{op}@{b}(x, y)"),
            with(&up_guards, &["rank(y) <= rank(x)", suffix]),
        ),
        step(
            &back,
            format!("# {op}-{b}(x, y) == {op}-{a}(x, y) where the shapes are equal"),
            format!("{op}@{b}(x, y)"),
            format!("{op}@{a}(x, y)"),
            with(&down_guards, &["same_shape(x, y)"]),
        ),
        step(
            &format!("{back}_broadcast"),
            format!("# {op}-{b}(x, y) == {op}-{a}(x, y, broadcast: 1) where y's shape is a suffix of x's"),
            format!("{op}@{b}(x, y)"),
            format!("{op}@{a}<broadcast: 1>(x, y)"),
            with(&down_guards, &["rank(y) <= rank(x)", "!same_shape(x, y)", suffix]),
        ),
    ])
}
