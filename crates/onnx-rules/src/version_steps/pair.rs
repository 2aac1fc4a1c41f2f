//! One version step of a pair of versions with the same signature up to widened types, added or
//! dropped attributes at their defaults and moved logical parameters: the comparison of the two
//! schemas ([`same_inputs`], [`output_counts`], [`attr_plan`]), the type guards
//! ([`type_guards`]) and the rule text ([`step`]).

use std::collections::BTreeSet;

use onnx_proto::attribute_proto::AttributeType;
use onnx_schema::versions::{dropped_param_default, old_behaviour, renamed_input};
use onnx_schema::{AttributeSchema, FormalParameter, OpSchema, ParamOption};

use super::{Skip, INFERENCE_ONLY, MAX_VARIADIC_OUTPUTS};
use crate::params::{logical_params, LogicalParam, ParamLoc};
use onnx_schema::versions::DROPPED_ATTRIBUTE_HELD;

/// Attributes a step names (with a variable, on both sides) so that a hint can steer the
/// prover's instances: (op, attribute, variable).
const NAMED: &[(&str, &str, &str)] = &[
    ("AveragePool", "kernel_shape", "k"),
    ("MaxPool", "kernel_shape", "k"),
    ("LpPool", "kernel_shape", "k"),
    ("MaxUnpool", "kernel_shape", "k"),
];

/// Hints of ops whose random instances rarely run.
const HINTS: &[(&str, &[&str])] = &[
    ("AveragePool", &["rank(x) == 4 && k == [2, 2]"]),
    ("MaxPool", &["rank(x) == 4 && k == [2, 2]"]),
    ("LpPool", &["rank(x) == 4 && k == [2, 2]"]),
    ("MaxUnpool", &["rank(x) == 4 && k == [2, 2]"]),
    ("Range", &["all_equal(start, 0) && all_equal(limit, 8)"]),
    (
        "NonMaxSuppression",
        &[
            "rank(boxes) == 3 && dim(boxes, 2) == 4 && rank(scores) == 3",
            "dim(scores, 0) == dim(boxes, 0) && dim(scores, 2) == dim(boxes, 1)",
        ],
    ),
];

/// Guards a step needs beyond types, by (op, from, to), over the step's variables (the logical
/// parameters are named as themselves): Split-18 without `split` takes `num_outputs`
/// (`split_num_outputs_steps` writes those), Split-13 without it splits evenly; Resize-11 needs
/// roi and scales given (`resize_13_to_11_*` in moves.rules write empty ones); DFT-20 without
/// axis means -2, DFT-17 without it 1 (`dft_20_to_17_default_axis` in moves.rules writes -2).
const EXTRA_GUARDS: &[(&str, i64, i64, &[&str])] = &[
    ("Split", 13, 18, &["!is_absent(split)"]),
    ("Split", 18, 13, &["!is_absent(split)"]),
    ("Resize", 13, 11, &["!is_absent(roi)", "!is_absent(scales)"]),
    ("DFT", 20, 17, &["!is_absent(axis)"]),
];

/// Whether a step between versions `a` and `b` of `op` (either way) has guards beyond types.
pub(super) fn has_extra_guards(op: &str, a: i64, b: i64) -> bool {
    EXTRA_GUARDS
        .iter()
        .any(|x| x.0 == op && ((x.1, x.2) == (a, b) || (x.1, x.2) == (b, a)))
}

/// The pooling ops whose steps across 22 hold for `ceil_mode` 0 only.
const CEIL_22: &[&str] = &["AveragePool", "MaxPool", "LpPool"];

const KEYWORDS: &[&str] = &[
    "rule", "let", "where", "hint", "extern", "true", "false", "inf", "nan", "root",
];

const ELEM_TYPES: &[&str] = &[
    "float",
    "uint8",
    "int8",
    "uint16",
    "int16",
    "int32",
    "int64",
    "string",
    "bool",
    "float16",
    "double",
    "uint32",
    "uint64",
    "complex64",
    "complex128",
    "bfloat16",
    "float8e4m3fn",
    "float8e4m3fnuz",
    "float8e5m2",
    "float8e5m2fnuz",
    "uint4",
    "int4",
    "float4e2m1",
    "float8e8m0",
    "uint2",
    "int2",
    "float6e2m3",
    "float6e3m2",
];

/// The order element types are listed in.
const TYPE_ORDER: &[&str] = &[
    "tensor(float)",
    "tensor(double)",
    "tensor(float16)",
    "tensor(bfloat16)",
    "tensor(int8)",
    "tensor(int16)",
    "tensor(int32)",
    "tensor(int64)",
    "tensor(uint8)",
    "tensor(uint16)",
    "tensor(uint32)",
    "tensor(uint64)",
    "tensor(bool)",
    "tensor(string)",
    "tensor(complex64)",
    "tensor(complex128)",
];

/// A schema without its logical parameters (the positional inputs and named attributes of a
/// rule).
pub(super) struct Stripped<'a> {
    pub(super) schema: &'a OpSchema,
    pub(super) inputs: Vec<&'a FormalParameter>,
    pub(super) attributes: Vec<&'a AttributeSchema>,
}

pub(super) fn strip<'a>(schema: &'a OpSchema, params: &[LogicalParam]) -> Stripped<'a> {
    let slots: Vec<usize> = params
        .iter()
        .filter_map(|p| match p.loc {
            ParamLoc::Input(i) => Some(i),
            ParamLoc::Attr(_) => None,
        })
        .collect();
    let attrs: Vec<&str> = params
        .iter()
        .filter_map(|p| match p.loc {
            ParamLoc::Attr(a) => Some(a),
            ParamLoc::Input(_) => None,
        })
        .collect();
    Stripped {
        schema,
        inputs: (schema.inputs.iter().enumerate())
            .filter(|(i, _)| !slots.contains(i))
            .map(|(_, p)| p)
            .collect(),
        attributes: (schema.attributes.iter())
            .filter(|a| !attrs.contains(&a.name.as_str()))
            .collect(),
    }
}

/// The snake-case name of an op (`BatchNormalization` -> `batch_normalization`).
pub(super) fn snake(name: &str) -> String {
    let c: Vec<char> = name.chars().collect();
    let mut s1 = Vec::new();
    for (i, &ch) in c.iter().enumerate() {
        if ch.is_ascii_uppercase()
            && i > 0
            && (c[i - 1].is_ascii_lowercase() || c[i - 1].is_ascii_digit())
        {
            s1.push('_');
        }
        s1.push(ch);
    }
    let mut out = String::new();
    for (j, &ch) in s1.iter().enumerate() {
        if j > 0
            && s1[j - 1].is_ascii_uppercase()
            && ch.is_ascii_uppercase()
            && s1.get(j + 1).is_some_and(|n| n.is_ascii_lowercase())
        {
            out.push('_');
        }
        out.push(ch);
    }
    out.to_lowercase()
}

pub(super) fn var_name(raw: &str, taken: &mut BTreeSet<String>) -> String {
    let mut v: String = raw
        .to_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '_' => c,
            _ => '_',
        })
        .collect();
    if !v.starts_with(|c: char| c.is_ascii_alphabetic())
        || KEYWORDS.contains(&v.as_str())
        || ELEM_TYPES.contains(&v.as_str())
    {
        v = format!("v_{v}");
    }
    let (base, mut i) = (v.clone(), 2);
    while taken.contains(&v) {
        v = format!("{base}{i}");
        i += 1;
    }
    taken.insert(v.clone());
    v
}

/// The types a type string allows in a schema: its constraint's, or itself.
pub(super) fn allowed<'a>(schema: &'a OpSchema, type_str: &'a str) -> BTreeSet<&'a str> {
    match schema
        .type_constraints
        .iter()
        .find(|tc| tc.type_param == type_str)
    {
        Some(tc) => tc.allowed.iter().map(String::as_str).collect(),
        None => BTreeSet::from([type_str]),
    }
}

fn is_param(schema: &OpSchema, type_str: &str) -> bool {
    schema
        .type_constraints
        .iter()
        .any(|tc| tc.type_param == type_str)
}

/// `float` of `tensor(float)`; `None` for a type that is not a tensor.
pub(super) fn tensor_elem(t: &str) -> Option<&str> {
    let e = t.strip_prefix("tensor(")?.strip_suffix(')')?;
    e.chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then_some(e)
}

/// Sorts type strings in [`TYPE_ORDER`], the others after them by name.
pub(super) fn sorted_types<'a>(ts: &BTreeSet<&'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = ts.iter().copied().collect();
    let key = |t: &str| {
        TYPE_ORDER
            .iter()
            .position(|x| *x == t)
            .unwrap_or(TYPE_ORDER.len())
    };
    v.sort_by(|a, b| (key(a), *a).cmp(&(key(b), *b)));
    v
}

fn show_types(ts: &BTreeSet<&str>) -> String {
    sorted_types(ts)
        .into_iter()
        .map(|t| tensor_elem(t).unwrap_or(t))
        .collect::<Vec<_>>()
        .join(", ")
}

fn attr_literal(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A number as the rule language writes it (`1`, not `1.0`; `nan`, `inf`, `-inf`).
pub(super) fn number(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    match x.fract() == 0.0 && x.abs() < 1e15 {
        true => format!("{}", x as i64),
        false => format!("{x}"),
    }
}

/// Checks that the two versions have the same inputs: a later version may add optional inputs
/// at the end (Attention's `nonpad_kv_seqlen` at 24); an input may become optional (Gemm's C
/// at 11).
pub(super) fn same_inputs(op: &str, a: &Stripped<'_>, b: &Stripped<'_>) -> Result<(), Skip> {
    let change = || Skip::new("its inputs change");
    let (short, long) = match b.inputs.len() < a.inputs.len() {
        true => (&b.inputs, &a.inputs),
        false => (&a.inputs, &b.inputs),
    };
    if short.len() != long.len()
        && (long[short.len()..]
            .iter()
            .any(|p| p.option != ParamOption::Optional)
            || short.iter().any(|p| p.option == ParamOption::Variadic))
    {
        return Err(change());
    }
    for (p, q) in a.inputs.iter().zip(&b.inputs) {
        let renamed = renamed_input(op, &p.name, &q.name);
        let options: BTreeSet<ParamOption> = [p.option, q.option].into();
        let one_optional = options == BTreeSet::from([ParamOption::Single, ParamOption::Optional]);
        if (p.name != q.name && !renamed) || (options.len() > 1 && !one_optional) {
            return Err(change());
        }
        if p.is_homogeneous != q.is_homogeneous {
            return Err(change());
        }
    }
    Ok(())
}

/// The formal outputs of a node of schema `s` with `n` outputs (`None`: not allowed).
fn first_outputs(s: &OpSchema, n: usize) -> Option<Vec<&FormalParameter>> {
    if n < s.min_output.max(1) || n > s.max_output {
        return None;
    }
    let outs = &s.outputs;
    let mut res = Vec::new();
    for i in 0..n {
        let last = outs.get(i.min(outs.len().saturating_sub(1)));
        match outs.get(i) {
            Some(p) if p.option != ParamOption::Variadic => res.push(p),
            _ => match last {
                Some(p) if p.option == ParamOption::Variadic => res.push(p),
                _ => return None,
            },
        }
    }
    Some(res)
}

/// The output counts a node can have at both versions with the same outputs (names and
/// options): one step per count (a multi-output node is matched with its count).
pub(super) fn output_counts(a: &OpSchema, b: &OpSchema) -> Vec<usize> {
    let top = a.max_output.min(b.max_output).min(MAX_VARIADIC_OUTPUTS);
    (1..=top)
        .filter(|&n| match (first_outputs(a, n), first_outputs(b, n)) {
            (Some(fa), Some(fb)) => fa
                .iter()
                .zip(&fb)
                .all(|(p, q)| p.name == q.name && p.option == q.option),
            _ => false,
        })
        .collect()
}

/// The attributes `b` adds that are written with their old behaviour (name, literal); the
/// pair is refused when a shared attribute changes or a required one is added or dropped.
pub(super) fn attr_plan(
    op: &str,
    a: &Stripped<'_>,
    b: &Stripped<'_>,
) -> Result<Vec<(String, String)>, Skip> {
    fn find<'a>(s: &Stripped<'a>, n: &str) -> Option<&'a AttributeSchema> {
        s.attributes.iter().copied().find(|x| x.name == n)
    }
    let an: BTreeSet<&str> = a.attributes.iter().map(|x| x.name.as_str()).collect();
    let bn: BTreeSet<&str> = b.attributes.iter().map(|x| x.name.as_str()).collect();
    for n in an.intersection(&bn) {
        let (x, y) = (find(a, n), find(b, n));
        let (Some(x), Some(y)) = (x, y) else { continue };
        if x.ty != y.ty || x.required != y.required || x.default != y.default {
            let hand = match (op, *n) {
                ("Concat", "axis") => " (moves.rules)",
                _ => "",
            };
            return Err(Skip(format!("its attribute `{n}` changes{hand}")));
        }
    }
    let mut added = Vec::new();
    for n in bn.difference(&an) {
        if find(b, n).is_some_and(|x| x.required) {
            return Err(Skip(format!("it adds the required attribute `{n}`")));
        }
        match old_behaviour(op, n) {
            Some(None) => {
                return Err(Skip(format!(
                    "its new attribute `{n}` has no value that is the old behaviour"
                )))
            }
            Some(Some(old)) => added.push((n.to_string(), attr_literal(old))),
            None => {}
        }
    }
    for n in an.difference(&bn) {
        let x = find(a, n);
        if x.is_some_and(|x| x.required) {
            return Err(Skip(format!("it drops the required attribute `{n}`")));
        }
        if x.is_some_and(|x| matches!(x.ty, AttributeType::Graph | AttributeType::Graphs)) {
            return Err(Skip::new("it has subgraphs"));
        }
    }
    Ok(added)
}

/// Guards that the values' element types are allowed by `to` where `frm` allows others, and
/// that values `to` ties to one type parameter have one type. `names` are the inputs'
/// variables (`None` for a variadic one); the outputs are the first `n_out`, and only a single
/// output can be named in a guard (`root()`).
pub(super) fn type_guards(
    frm: &Stripped<'_>,
    to: &Stripped<'_>,
    names: &[Option<String>],
    optional: &[bool],
    n_out: usize,
) -> Result<Vec<String>, Skip> {
    let (fs, ts) = (frm.schema, to.schema);
    let mut guards = Vec::new();
    let outs_from = first_outputs(fs, n_out).unwrap_or_default();
    let outs_to = first_outputs(ts, n_out).unwrap_or_default();
    let mut slots: Vec<(&str, &str)> = (frm.inputs.iter().zip(&to.inputs))
        .map(|(p, q)| (p.type_str.as_str(), q.type_str.as_str()))
        .collect();
    slots.extend(
        (outs_from.iter().zip(&outs_to)).map(|(p, q)| (p.type_str.as_str(), q.type_str.as_str())),
    );
    let mut refs: Vec<Option<String>> = names.to_vec();
    match n_out {
        1 => refs.push(Some("root()".to_string())),
        _ => refs.extend(std::iter::repeat_n(None, n_out)),
    }
    let mut opts: Vec<bool> = optional.to_vec();
    opts.extend(std::iter::repeat_n(false, n_out));
    let r = |j: usize| refs.get(j).cloned().flatten();
    let opt = |j: usize| opts.get(j).copied().unwrap_or(false);
    let same_param = |i: usize, j: usize| {
        let ((fi, ti), (fj, tj)) = (slots[i], slots[j]);
        fi == fj && ti == tj && is_param(fs, fi) && is_param(ts, ti)
    };
    let mut guarded: Vec<usize> = Vec::new();
    for (i, &(ts_from, ts_to)) in slots.iter().enumerate() {
        let (have, want) = (allowed(fs, ts_from), allowed(ts, ts_to));
        if have.is_subset(&want) {
            continue;
        }
        if guarded
            .iter()
            .any(|&j| same_param(i, j) && !opt(j) && r(j).is_some())
        {
            continue;
        }
        let elems: Vec<Option<&str>> = sorted_types(&want).into_iter().map(tensor_elem).collect();
        if elems.iter().any(Option::is_none) || have.iter().any(|t| tensor_elem(t).is_none()) {
            return Err(Skip::new("its differing types are not tensors"));
        }
        let Some(reference) = r(i) else {
            // A variadic input or an output: a guard on a named value of the same type
            // parameter covers it.
            if (0..slots.len()).any(|j| j != i && same_param(i, j) && r(j).is_some() && !opt(j)) {
                continue;
            }
            return Err(Skip::new("a variadic input's or an output's types differ"));
        };
        guarded.push(i);
        let elems: Vec<&str> = elems.into_iter().flatten().collect();
        let mut g = format!("member(dtype({reference}), [{}])", elems.join(", "));
        if opt(i) {
            g = format!("(is_absent({reference}) || {g})");
        }
        guards.push(g);
    }
    // A value whose element type is slot j's: itself, or a named input of the same type
    // parameter in `frm` (an output's type follows its inputs').
    let proxy = |j: usize| -> Option<String> {
        if r(j).is_some() && !opt(j) {
            return r(j);
        }
        (0..names.len())
            .find(|&k| {
                r(k).is_some() && !opt(k) && slots[k].0 == slots[j].0 && is_param(fs, slots[j].0)
            })
            .and_then(r)
    };
    // Ties: two slots with one type parameter in `to` but not in `frm`.
    for i in 0..slots.len() {
        for j in i + 1..slots.len() {
            let ((fi, ti), (fj, tj)) = (slots[i], slots[j]);
            if ti == tj && is_param(ts, ti) && !(fi == fj && is_param(fs, fi)) {
                let (Some(a), Some(b)) = (proxy(i), proxy(j)) else {
                    return Err(Skip::new("it ties a variadic or optional input's type"));
                };
                if a != b {
                    guards.push(format!("dtype({a}) == dtype({b})"));
                }
            }
        }
    }
    Ok(guards)
}

/// For a step of a node with `n` outputs: the head's `#n`, the rule name's suffix and the
/// identity comment's note (all empty for one output).
pub(super) fn count_parts(n: usize) -> (String, String, String) {
    match n {
        1 => Default::default(),
        _ => (
            format!("#{n}"),
            format!("_{n}_outputs"),
            format!("{n} outputs"),
        ),
    }
}

/// One step from `frm` to `to` for a node with `n_out` outputs (several: the rule's root is the
/// node itself, `Op@a#n`, and its projections follow). `added` are the attributes the later
/// version adds with their old behaviour.
pub(super) fn step(
    op: &str,
    frm: &OpSchema,
    to: &OpSchema,
    added: &[(String, String)],
    n_out: usize,
) -> Result<String, Skip> {
    let (a, b) = (frm.since_version, to.since_version);
    let (lpf, lpt) = (logical_params(op, a), logical_params(op, b));
    let (sfrm, sto) = (strip(frm, &lpf), strip(to, &lpt));
    let mut taken = BTreeSet::new();
    let (mut names, mut optional) = (Vec::new(), Vec::new());
    let (mut lhs_in, mut rhs_in) = (Vec::new(), Vec::new());
    for (p, q) in sfrm.inputs.iter().zip(&sto.inputs) {
        let v = var_name(&p.name, &mut taken);
        if p.option == ParamOption::Variadic {
            lhs_in.push(format!("{v}.."));
            rhs_in.push(format!("{v}.."));
            names.push(None);
            optional.push(false);
        } else if p.option == ParamOption::Optional && q.option == ParamOption::Optional {
            lhs_in.push(format!("{v}?"));
            rhs_in.push(v.clone());
            names.push(Some(v));
            optional.push(true);
        } else {
            lhs_in.push(v.clone());
            rhs_in.push(v.clone());
            names.push(Some(v));
            optional.push(false);
        }
    }
    // Optional inputs only the source has (a step down from a version that added them) must
    // be absent.
    for _ in sto.inputs.len()..sfrm.inputs.len() {
        lhs_in.push("None".to_string());
    }
    let up = b > a;
    // `..rest` carries the attributes; in a version step an attribute the target version does
    // not have stops the step (it is not built), so a dropped attribute must be absent.
    let (mut lpairs, mut rpairs, mut param_guards) = (Vec::new(), Vec::new(), Vec::new());
    for (n, lit) in added {
        // Up: written with the old behaviour; down: only where the node holds it.
        let side = if up { &mut rpairs } else { &mut lpairs };
        side.push(format!("{n}: {lit}"));
    }
    let fa: BTreeSet<&str> = sfrm.attributes.iter().map(|x| x.name.as_str()).collect();
    let ta: BTreeSet<&str> = sto.attributes.iter().map(|x| x.name.as_str()).collect();
    for &(_, n, lit) in DROPPED_ATTRIBUTE_HELD.iter().filter(|x| x.0 == op) {
        if fa.contains(n) {
            lpairs.push(format!("{n}: {lit}"));
        }
        if ta.contains(n) {
            rpairs.push(format!("{n}: {lit}"));
        }
    }
    // Logical parameters: named on both sides (the language moves them); one only the source
    // has must mean the target's behaviour.
    let pnames: BTreeSet<&str> = lpf.iter().map(|p| p.name).collect();
    for pname in pnames {
        let v = var_name(pname, &mut taken);
        lpairs.push(format!("{pname}: {v}"));
        let default = dropped_param_default(op, pname);
        if lpt.iter().any(|q| q.name == pname) {
            rpairs.push(format!("{pname}: {v}"));
            if let (true, Some(Some(d))) = (INFERENCE_ONLY.contains(&op), default) {
                param_guards.push(format!("(is_absent({v}) || all_equal({v}, {}))", number(d)));
            }
            continue;
        }
        match default {
            None => {
                return Err(Skip(format!(
                "its logical parameter `{pname}` has no value that is the other version's behaviour"
            )))
            }
            Some(None) => param_guards.push(format!("is_absent({v})")),
            Some(Some(d)) => {
                param_guards.push(format!("(is_absent({v}) || all_equal({v}, {}))", number(d)))
            }
        }
    }
    for &(_, n, v) in NAMED.iter().filter(|x| x.0 == op) {
        lpairs.push(format!("{n}: {v}"));
        rpairs.push(format!("{n}: {v}"));
    }
    let ceil = CEIL_22.contains(&op) && a.max(b) == 22;
    if ceil {
        lpairs.push("ceil_mode: 0".to_string());
        rpairs.push("ceil_mode: 0".to_string());
    }
    if !sfrm.attributes.is_empty() || !sto.attributes.is_empty() {
        lpairs.push("..rest".to_string());
        rpairs.push("..rest".to_string());
    }
    let brackets = |p: &[String]| match p.is_empty() {
        true => String::new(),
        false => format!("<{}>", p.join(", ")),
    };
    let (la, ra) = (brackets(&lpairs), brackets(&rpairs));
    let mut guards = type_guards(&sfrm, &sto, &names, &optional, n_out)?;
    guards.extend(param_guards);
    for (_, _, _, g) in EXTRA_GUARDS
        .iter()
        .filter(|x| (x.0, x.1, x.2) == (op, a, b))
    {
        guards.extend(g.iter().map(|s| s.to_string()));
    }
    let (head, sfx, count_note) = count_parts(n_out);
    let name = format!("{}_{a}_to_{b}{sfx}", snake(op));
    let mut notes = Vec::new();
    let (fp, tp) = (
        frm.inputs.iter().chain(&frm.outputs),
        to.inputs.iter().chain(&to.outputs),
    );
    let widened = fp.zip(tp).any(|(p, q)| {
        let (want, have) = (allowed(to, &q.type_str), allowed(frm, &p.type_str));
        !show_types(&want.difference(&have).copied().collect()).is_empty()
    });
    if !guards.is_empty() {
        notes.push(format!("where the types are {op}-{b}'s"));
    } else if widened {
        notes.push(format!("{op}-{b} allows more types"));
    }
    let dropped: Vec<&str> = fa.difference(&ta).copied().collect();
    if !dropped.is_empty() {
        notes.push(format!("{} at {a}'s default", dropped.join(", ")));
    }
    let gained: Vec<String> = ta
        .difference(&fa)
        .map(|n| match added.iter().find(|x| x.0 == *n) {
            Some((_, lit)) => format!("{n} {lit}"),
            None => format!("{n} at its default"),
        })
        .collect();
    if !gained.is_empty() {
        notes.push(gained.join(", "));
    }
    if ceil {
        notes.push("ceil_mode 0: the same windows".to_string());
    }
    let moved: Vec<&str> = (lpf.iter())
        .filter(|p| {
            lpt.iter().any(|q| {
                q.name == p.name
                    && matches!(p.loc, ParamLoc::Attr(_)) != matches!(q.loc, ParamLoc::Attr(_))
            })
        })
        .map(|p| p.name)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !moved.is_empty() {
        notes.push(format!(
            "{} moved between an attribute and an input",
            moved.join(", ")
        ));
    }
    if !count_note.is_empty() {
        notes.push(count_note);
    }
    let mut ident = format!("# {op}-{a} == {op}-{b}");
    if !notes.is_empty() {
        ident.push_str(&format!(" ({})", notes.join("; ")));
    }
    let mut lines = vec![
        ident,
        format!("rule {name} [version, step, exact]:"),
        format!(
            "  {op}@{a}{head}{la}({}) => {op}@{b}{head}{ra}({})",
            lhs_in.join(", "),
            rhs_in.join(", ")
        ),
    ];
    if !guards.is_empty() {
        lines.push(format!("  where {}", guards.join(" && ")));
    }
    for (_, hints) in HINTS.iter().filter(|x| x.0 == op) {
        lines.extend(hints.iter().map(|h| format!("  hint {h}")));
    }
    Ok(lines.join("\n"))
}
