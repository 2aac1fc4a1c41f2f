//! Op -> body rules generated from the schemas' context-independent function bodies, the other
//! direction of `rules/bodies.rules` (body -> op): for a default-domain op that some opset does
//! not have, each schema version whose function onnx gives (or, for a version without one, the
//! body of the next version when the two compute the same function on the same signature)
//! becomes a version rule
//!
//! ```text
//! rule mish_body [version, opset 18..]:
//!   Mish(x) => Mul(x, Tanh(Softplus(x)))
//! ```
//!
//! so a conversion below the opset that introduced the op writes it with older ops, and the
//! prover covers the decomposition like any rule. The built-in rule set loads [`bodies_text`]
//! as `rules/version/bodies.rules` (there is no such file).
//!
//! How a body becomes a right side: a `Constant` of one element (or a `CastLike` of one to an
//! input's type) is a literal, which takes the type of the slot it feeds; a `Constant` of an
//! attribute reference is the attribute's variable, bound on the left side; an attribute
//! reference on a body node binds the node's attribute; `CastLike(v, x)` of a computed `v` is
//! `Cast<to: dtype(x)>(v)`; a value a body uses twice is a `let`. Bodies with several outputs,
//! subgraphs, constants of several elements outside integer slots, or nodes of other domains
//! are not generated (the header lists them); the expand pass of the root crate writes those
//! per node. Ops every opset has need no body to convert and get none.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use onnx_proto::{attribute_proto::AttributeType, AttributeProto, FunctionProto};
use onnx_schema::versions::meaning_change;
use onnx_schema::OpSchema;

use super::pair::{number, snake, var_name};
use crate::params::{logical_params, ParamLoc};

/// The origin name the generated op -> body rules are loaded under.
pub const BODIES_ORIGIN: &str = "rules/version/bodies.rules";

/// Ops whose schema body does not compute the op everywhere: (op, why). Neither these rules
/// nor the expand pass use them.
pub const UNSOUND_BODIES: &[(&str, &str)] = &[(
    "AffineGrid",
    "with align_corners its body divides by H - 1 and W - 1, NaN for a size of 1 where the op \
     gives -1 (found by the fuzzer, seed 0x1fc8dd38b7691812)",
)];

/// Ops whose body a hand-written rule of `rules/version/decompose.rules` writes instead: (op,
/// why).
pub const HAND_WRITTEN: &[(&str, &str)] = &[(
    "MeanVarianceNormalization",
    "its body computes the variance as E[x^2] - E[x]^2, which cancels (NaN for float16 where the \
     variance is 0, the prover's counterexample); decompose.rules writes the op's definition, \
     E[(x - E[x])^2]",
)];

/// Guards a generated rule takes beyond the body's: (op, guard over the rule's variables, why).
const GUARDS: &[(&str, &str, &str)] =
    &[("Celu", "value(alpha_a) != 0", "the body divides by alpha")];

/// The generated rules, built on first use: the text of `rules/version/bodies.rules`.
pub fn bodies_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(generate_bodies)
}

/// Why a body is not written as a rule.
struct Untranslatable(String);

fn no(why: impl Into<String>) -> Untranslatable {
    Untranslatable(why.into())
}

/// A value of a body as the right side writes it.
#[derive(Clone)]
enum Term {
    /// A rule variable, a `let` name, or an op term written out.
    Text(String),
    /// A constant of one element: a literal in the slot's type.
    Lit(String),
    /// A `Constant` of an attribute reference: the attribute's variable (a scalar of the
    /// attribute's type where no other operand gives the slot a type).
    Attr(String),
    /// A constant of several integers: a list literal (integer slots and logical parameters).
    List(String),
}

impl Term {
    fn text(&self) -> &str {
        match self {
            Term::Text(t) | Term::Lit(t) | Term::Attr(t) | Term::List(t) => t,
        }
    }
}

/// The values of a tensor of float, double, int32 or int64 elements.
fn tensor_values(t: &onnx_proto::TensorProto) -> Result<(Vec<f64>, bool), Untranslatable> {
    let dt = t.data_type.unwrap_or(0);
    let raw = t.raw_data.as_deref().unwrap_or_default();
    let vals: Vec<f64> = match dt {
        1 if !raw.is_empty() => raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        1 => t.float_data.iter().map(|&v| v as f64).collect(),
        11 if !raw.is_empty() => raw
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect(),
        11 => t.double_data.clone(),
        6 if !raw.is_empty() => raw
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64)
            .collect(),
        6 => t.int32_data.iter().map(|&v| v as f64).collect(),
        7 if !raw.is_empty() => raw
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()) as f64)
            .collect(),
        7 => t.int64_data.iter().map(|&v| v as f64).collect(),
        other => return Err(no(format!("a Constant of element type {other}"))),
    };
    Ok((vals, matches!(dt, 6 | 7)))
}

/// An attribute's value as the rule language writes it.
fn attr_value(a: &AttributeProto) -> Result<String, Untranslatable> {
    let ty = AttributeType::try_from(a.r#type.unwrap_or(0)).unwrap_or(AttributeType::Undefined);
    Ok(match ty {
        AttributeType::Float => number(a.f.unwrap_or(0.0) as f64),
        AttributeType::Int => number(a.i.unwrap_or(0) as f64),
        AttributeType::String => {
            let s = String::from_utf8_lossy(a.s.as_deref().unwrap_or_default()).to_string();
            format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
        }
        AttributeType::Ints => {
            let v: Vec<String> = a.ints.iter().map(|&i| number(i as f64)).collect();
            format!("[{}]", v.join(", "))
        }
        AttributeType::Floats => {
            let v: Vec<String> = a.floats.iter().map(|&f| number(f as f64)).collect();
            format!("[{}]", v.join(", "))
        }
        other => return Err(no(format!("an attribute of type {other:?}"))),
    })
}

/// The rule (left side, right side with its `let`s) that writes `schema`'s op as `body`, whose
/// ops are those of default-domain opset `body_opset`.
fn translate(
    schema: &OpSchema,
    body: &FunctionProto,
    body_opset: i64,
) -> Result<(String, String), Untranslatable> {
    let op = schema.name.as_str();
    if body.output.len() != 1 || schema.outputs.len() != 1 {
        return Err(no("several outputs"));
    }
    if body.input.is_empty() {
        return Err(no("no input"));
    }
    let registry = onnx_schema::registry();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut terms: BTreeMap<String, Term> = BTreeMap::new();
    for name in &body.input {
        let v = var_name(name, &mut taken);
        terms.insert(name.clone(), Term::Text(v));
    }
    // Attribute references: schema attribute name -> variable.
    let mut attr_vars: BTreeMap<String, String> = BTreeMap::new();
    // How often each value is read, to write a value read twice once (a `let`).
    let mut reads: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &body.node {
        for i in &n.input {
            *reads.entry(i.as_str()).or_default() += 1;
        }
    }
    let mut lets: Vec<String> = Vec::new();
    // Whether a body node has a float attribute that is a float32's rounding of its value.
    let mut float_attr = false;
    for n in &body.node {
        let nop = n.op_type.as_deref().unwrap_or_default();
        let domain = n.domain.as_deref().unwrap_or_default();
        if !matches!(domain, "" | "ai.onnx") {
            return Err(no(format!("a node of domain {domain}")));
        }
        if n.output.len() != 1 {
            return Err(no(format!("{nop} with {} outputs", n.output.len())));
        }
        let out = n.output[0].clone();
        let arg = |name: &str| -> Result<Term, Untranslatable> {
            terms.get(name).cloned().ok_or_else(|| {
                no(format!(
                    "{nop} reads {name}, which the body does not define"
                ))
            })
        };
        let term = match nop {
            "Constant" => {
                let [a] = n.attribute.as_slice() else {
                    return Err(no("a Constant without one attribute"));
                };
                if let Some(r) = a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) {
                    Term::Attr(attr_var(&mut attr_vars, r, &mut taken))
                } else {
                    match a.name.as_deref().unwrap_or_default() {
                        "value" => {
                            let t =
                                a.t.as_ref()
                                    .ok_or_else(|| no("a Constant without a tensor"))?;
                            let (vals, int) = tensor_values(t)?;
                            match (vals.as_slice(), t.dims.is_empty()) {
                                ([v], _) => Term::Lit(number(*v)),
                                (_, false) if int && t.dims.len() == 1 => {
                                    let v: Vec<String> = vals.iter().map(|&v| number(v)).collect();
                                    Term::List(format!("[{}]", v.join(", ")))
                                }
                                _ => return Err(no("a Constant of several elements")),
                            }
                        }
                        "value_float" | "value_int" => Term::Lit(attr_value(a)?),
                        "value_ints" => Term::List(attr_value(a)?),
                        other => return Err(no(format!("a Constant with {other}"))),
                    }
                }
            }
            "CastLike" => {
                let src = arg(&n.input[0])?;
                let like = arg(n.input.get(1).map(String::as_str).unwrap_or_default())?;
                match src {
                    // A constant cast to a value's type is a literal in the slot's type, which
                    // the slot takes from that value.
                    Term::Lit(_) | Term::List(_) => src,
                    Term::Text(_) | Term::Attr(_)
                        if body.input.iter().any(|i| terms[i].text() == like.text()) =>
                    {
                        Term::Text(format!("Cast<to: dtype({})>({})", like.text(), src.text()))
                    }
                    _ => return Err(no("a CastLike to a computed value's type")),
                }
            }
            _ => {
                let bound = registry
                    .lookup("", nop, body_opset)
                    .ok_or_else(|| no(format!("{nop} does not exist at {body_opset}")))?;
                let params = logical_params(nop, bound.since_version);
                let mut attrs: Vec<String> = Vec::new();
                for a in &n.attribute {
                    let aname = a.name.as_deref().unwrap_or_default();
                    let ty = AttributeType::try_from(a.r#type.unwrap_or(0))
                        .unwrap_or(AttributeType::Undefined);
                    if matches!(ty, AttributeType::Graph | AttributeType::Graphs) {
                        return Err(no("a subgraph"));
                    }
                    let logical = params
                        .iter()
                        .find(|p| p.loc == ParamLoc::Attr(p.name) && p.name == aname)
                        .map_or(aname, |p| p.name);
                    match a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) {
                        Some(r) => attrs.push(format!(
                            "{logical}: {}",
                            attr_var(&mut attr_vars, r, &mut taken)
                        )),
                        None => {
                            float_attr |= inexact_float(a);
                            attrs.push(format!("{logical}: {}", attr_value(a)?))
                        }
                    }
                }
                let mut args: Vec<String> = Vec::new();
                for (k, i) in n.input.iter().enumerate() {
                    if let Some(p) = params.iter().find(|p| p.loc == ParamLoc::Input(k)) {
                        if i.is_empty() {
                            continue;
                        }
                        match arg(i)? {
                            Term::Lit(t) | Term::Attr(t) | Term::List(t) => {
                                attrs.push(format!("{}: {t}", p.name))
                            }
                            Term::Text(_) => {
                                return Err(no(format!("{nop}'s {} from a computed value", p.name)))
                            }
                        }
                        continue;
                    }
                    args.push(match i.is_empty() {
                        true => "None".to_string(),
                        false => arg(i)?.text().to_string(),
                    });
                }
                while args.last().is_some_and(|a| a == "None") {
                    args.pop();
                }
                let a = match attrs.is_empty() {
                    true => String::new(),
                    false => format!("<{}>", attrs.join(", ")),
                };
                let t = format!("{nop}{a}({})", args.join(", "));
                // A value read twice is written once.
                if reads.get(out.as_str()).copied().unwrap_or(0) > 1 {
                    let v = var_name(&format!("t{}", lets.len()), &mut taken);
                    lets.push(format!("  let {v} = {t}"));
                    Term::Text(v)
                } else {
                    Term::Text(t)
                }
            }
        };
        terms.insert(out, term);
    }
    let rhs = match terms.get(&body.output[0]) {
        Some(Term::Text(t)) => t.clone(),
        _ => return Err(no("the body's output is not computed")),
    };
    // The left side: the op with its inputs, and the attributes the body refers to.
    let params = logical_params(op, schema.since_version);
    let mut lhs_attrs: Vec<String> = attr_vars
        .iter()
        .map(|(name, v)| format!("{name}: {v}"))
        .collect();
    let mut lhs_inputs: Vec<String> = Vec::new();
    for (k, name) in body.input.iter().enumerate() {
        let v = terms[name].text().to_string();
        match params.iter().find(|p| p.loc == ParamLoc::Input(k)) {
            Some(p) => lhs_attrs.push(format!("{}: {v}", p.name)),
            None => lhs_inputs.push(v),
        }
    }
    for a in attr_vars.keys() {
        if schema.attribute(a).is_none() {
            return Err(no(format!(
                "its body refers to {a}, which the op does not have"
            )));
        }
    }
    let a = match lhs_attrs.is_empty() {
        true => String::new(),
        false => format!("<{}>", lhs_attrs.join(", ")),
    };
    let lhs = format!("{op}{a}({})", lhs_inputs.join(", "));
    let mut right = format!("=> {rhs}");
    for l in lets {
        right.push('\n');
        right.push_str(&l);
    }
    // A float attribute the body writes is a float32: in double the body computes with its
    // rounding where the op need not (HardSwish's 1/6), so the rule is not for double.
    // (Values such as 0.5 or 1 are exact.)
    let first = &schema.inputs[0];
    let doubles = schema
        .allowed_types(&first.type_str)
        .is_some_and(|t| t.iter().any(|t| t == "tensor(double)"));
    let mut guards: Vec<String> = GUARDS
        .iter()
        .filter(|g| g.0 == op)
        .map(|g| g.1.to_string())
        .collect();
    if float_attr && doubles {
        if let Some(x) = lhs_inputs.first() {
            guards.push(format!("dtype({x}) != double"));
        }
    }
    if !guards.is_empty() {
        right.push_str(&format!("\n  where {}", guards.join(" && ")));
    }
    Ok((lhs, right))
}

/// Whether a float attribute holds a value a float32 may have rounded: not a multiple of 2^-20
/// (0.5 and 1 are exact; HardSigmoid's 1/6 in HardSwish's body is not).
fn inexact_float(a: &AttributeProto) -> bool {
    let inexact = |f: f32| (f as f64 * f64::from(1u32 << 20)).fract() != 0.0;
    match AttributeType::try_from(a.r#type.unwrap_or(0)) {
        Ok(AttributeType::Float) => inexact(a.f.unwrap_or(0.0)),
        Ok(AttributeType::Floats) => a.floats.iter().any(|&f| inexact(f)),
        _ => false,
    }
}

/// The variable of an attribute a body refers to (made on first use).
fn attr_var(
    vars: &mut BTreeMap<String, String>,
    name: &str,
    taken: &mut BTreeSet<String>,
) -> String {
    vars.entry(name.to_string())
        .or_insert_with(|| var_name(&format!("{name}_a"), taken))
        .clone()
}

/// Whether two versions of an op have one signature (inputs, outputs and attributes by name and
/// type), so that, with no change of meaning between them, one's body is the other's.
fn same_signature(a: &OpSchema, b: &OpSchema) -> bool {
    let params = |s: &OpSchema| -> Vec<(String, String)> {
        s.inputs
            .iter()
            .chain(&s.outputs)
            .map(|p| (p.name.clone(), format!("{:?}", p.option)))
            .collect()
    };
    let attrs = |s: &OpSchema| -> Vec<(String, AttributeType, Option<AttributeProto>)> {
        s.attributes
            .iter()
            .map(|x| (x.name.clone(), x.ty, x.default.clone()))
            .collect()
    };
    params(a) == params(b) && attrs(a) == attrs(b)
}

/// Builds the text of the op -> body rules from the embedded schema registry (what
/// [`bodies_text`] caches).
pub fn generate_bodies() -> String {
    let registry = onnx_schema::registry();
    let ops: BTreeSet<&str> = registry.op_types("").collect();
    let mut rules: Vec<String> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    for op in ops {
        let mut versions: Vec<&OpSchema> = registry.versions("", op).iter().collect();
        versions.sort_by_key(|s| s.since_version);
        if versions.first().is_some_and(|s| s.since_version == 1) {
            continue;
        }
        if !versions
            .iter()
            .any(|s| s.function_opset_versions().next().is_some())
        {
            continue;
        }
        if let Some((_, why)) = UNSOUND_BODIES
            .iter()
            .chain(HAND_WRITTEN)
            .find(|(o, _)| *o == op)
        {
            left_out.push(format!("#   {op}: {why}"));
            continue;
        }
        // Each version's body (its own, else the next version's across no change of meaning
        // and no change of signature), latest first.
        let mut own: Vec<Option<(FunctionProto, i64, i64)>> = vec![None; versions.len()];
        for k in (0..versions.len()).rev() {
            let s = versions[k];
            own[k] = match s.function_opset_versions().last() {
                Some(fv) => s.function_body(fv).map(|b| (b, fv, s.since_version)),
                None => match (versions.get(k + 1), own.get(k + 1).cloned().flatten()) {
                    (Some(next), Some(body))
                        if meaning_change(op, next.since_version).is_none()
                            && same_signature(s, next) =>
                    {
                        Some(body)
                    }
                    _ => None,
                },
            };
        }
        // One rule per run of versions with the same text.
        let mut runs: Vec<(i64, Option<i64>, String, i64, i64)> = Vec::new();
        let mut reasons: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for (k, s) in versions.iter().enumerate() {
            let until = versions.get(k + 1).map(|n| n.since_version - 1);
            let Some((body, fv, from)) = &own[k] else {
                continue;
            };
            if s.deprecated {
                continue;
            }
            match translate(s, body, *fv) {
                Ok((lhs, rhs)) => {
                    let text = format!("{lhs}\n  {rhs}");
                    match runs.last_mut() {
                        Some(r) if r.2 == text && r.1 == Some(s.since_version - 1) => r.1 = until,
                        _ => runs.push((s.since_version, until, text, *fv, *from)),
                    }
                }
                Err(Untranslatable(why)) => reasons.entry(why).or_default().push(s.since_version),
            }
        }
        for (why, vs) in reasons {
            let vs: Vec<String> = vs.iter().map(|v| format!("{op}-{v}")).collect();
            left_out.push(format!("#   {}: {why}", vs.join(", ")));
        }
        let several = runs.len() > 1;
        for (from, until, text, fv, body_of) in runs {
            let name = match several {
                true => format!("{}_{from}_body", snake(op)),
                false => format!("{}_body", snake(op)),
            };
            let window = match until {
                Some(u) => format!("{from}..{u}"),
                None => format!("{from}.."),
            };
            let why: String = GUARDS
                .iter()
                .filter(|g| g.0 == op)
                .map(|g| format!(" ({}: {})", g.1, g.2))
                .collect();
            rules.push(format!(
                "# {op}'s function body (schema {op}-{body_of}, body at opset {fv}) == {op}{why}\n\
                 rule {name} [version, opset {window}]:\n  {text}"
            ));
        }
    }
    let mut header: Vec<String> = [
        "# version/bodies.rules: operators written as their schemas' function bodies, generated",
        "# from the operator schemas by crates/onnx-rules/src/version_steps/bodies.rs (there is no",
        "# such file: the built-in rule set loads this text under the name), so that a model converts",
        "# below the opset that introduced an op. These rules run only when a target opset is set;",
        "# the target's extraction keeps the op where the target has it (one node) and takes the",
        "# body where it does not. rules/bodies.rules is the other direction (body -> op).",
    ]
    .map(String::from)
    .to_vec();
    header.push(format!(
        "# Generated from onnx {}'s schemas: {} rules.",
        registry.onnx_version(),
        rules.len()
    ));
    header.extend(
        [
            "# Assumes: an op computes what its schema's body computes (what `rules check` proves on",
            "# random instances); the op rounds once where the body rounds at each step.",
            "#",
            "# Not generated (rules/version/decompose.rules or the expand pass write these out):",
        ]
        .map(String::from),
    );
    header.extend(left_out);
    format!("{}\n\n{}\n", header.join("\n"), rules.join("\n\n"))
}
