//! Rules written in Rust go through the prover like text rules: instances of their left side,
//! saturated with the rule alone (its Rust guard and applier included), both sides compared in
//! the reference interpreter. A correct applier passes, a wrong one fails.

use std::sync::Arc;

use onnx_egraph::{RuleSet, RustGuard, RustMatch, RustRhs};
use onnx_prove::{prove_rule, prove_rule_set, render_verdicts, ProveOptions};

fn opts() -> ProveOptions {
    ProveOptions {
        instances: 8,
        ..Default::default()
    }
}

/// `Sub(x, Neg(y))` rewritten to `op(x, y)` in Rust, with a Rust guard on the element type.
fn sub_neg_rule(name: &str, op: &'static str) -> RuleSet {
    let rule = onnx_rules::parse_extern_rule(
        name,
        "# Sub(x, Neg(y)) == Add(x, y)\nSub(x, Neg(y))\n  hint rank(x) == 2",
        "",
        &Default::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let known_type: RustGuard = Arc::new(|m: &RustMatch<'_>| {
        let x = m.var("x")?;
        Some(m.dtype(x)? == m.dtype(m.var("y")?)?)
    });
    let mut set = RuleSet::new();
    set.add_rust_rule(
        rule,
        Some(known_type),
        Arc::new(move |rhs: &mut RustRhs<'_>| {
            let (Some(x), Some(y)) = (rhs.var("x"), rhs.var("y")) else {
                return Err("x and y are bound".into());
            };
            rhs.op(op).inputs(&[x, y]).build().map(Some)
        }),
    )
    .unwrap();
    set
}

#[test]
fn a_correct_rust_rule_is_proven() {
    let opts = opts();
    let mut set = sub_neg_rule("sub_neg_to_add", "Add");
    // A text rule in the same set is proven too.
    let text = "# t\n\n# Neg(Neg(x)) == x\nrule neg_neg [exact]:\n  Neg(Neg(x)) => x\n";
    set.add_file(onnx_rules::parse_rules("t.rules", text, &Default::default()).unwrap());
    let verdicts = prove_rule_set(&set, &opts);
    let names: Vec<&str> = verdicts.iter().map(|v| v.rule.as_str()).collect();
    assert_eq!(names, ["sub_neg_to_add", "neg_neg"]);
    assert!(
        verdicts.iter().all(|v| v.passed(&opts)),
        "{}",
        render_verdicts(&verdicts, &opts)
    );
    // It fired on instances at every epoch of its window.
    assert!(verdicts[0].checks.iter().map(|c| c.fired).sum::<usize>() >= opts.min_fired);
}

#[test]
fn a_wrong_rust_applier_fails_its_proof() {
    let opts = opts();
    let verdicts = prove_rule_set(&sub_neg_rule("sub_neg_to_sub", "Sub"), &opts);
    assert_eq!(verdicts.len(), 1);
    let v = &verdicts[0];
    assert!(!v.passed(&opts));
    let failure = v.failure.as_ref().expect("a failing instance");
    assert!(
        failure.detail.starts_with("the two sides differ"),
        "{}",
        failure.detail
    );
    assert!(failure.instance.contains("Sub") && failure.instance.contains("Neg"));
    let rendered = render_verdicts(&verdicts, &opts);
    assert!(
        rendered.contains("sub_neg_to_sub  FAIL") && rendered.contains("right side:"),
        "{rendered}"
    );
}

#[test]
fn prove_rule_points_a_rust_rule_to_prove_rule_set() {
    let set = sub_neg_rule("sub_neg_alone", "Add");
    let rule = set.rules().next().unwrap();
    let v = prove_rule(rule, &Default::default(), &opts());
    let failure = v.failure.expect("refused");
    assert!(
        failure.detail.contains("prove_rule_set"),
        "{}",
        failure.detail
    );
}
