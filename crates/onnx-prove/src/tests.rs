//! The prover on small rules: correct ones pass, wrong ones fail with a printed instance, and a
//! rule that cannot fire fails for firing too rarely.

use onnx_egraph::GuardRegistry;
use onnx_rules::CheckOptions;

use super::*;

fn opts() -> ProveOptions {
    ProveOptions {
        instances: 4,
        max_attempts: 60,
        seed: 7,
        min_fired: 4,
    }
}

/// Parses one rule (the file header is added) and proves it.
fn prove(text: &str) -> RuleVerdict {
    let source = format!("# prover tests\n\n{text}");
    let file = onnx_rules::parse_rules("test.rules", &source, &CheckOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let rule = file.rules.into_iter().next().expect("one rule");
    prove_rule(&rule, &GuardRegistry::default(), &opts())
}

fn assert_passes(v: &RuleVerdict) {
    assert!(
        v.passed(&opts()),
        "{}",
        render_verdicts(std::slice::from_ref(v), &opts())
    );
}

fn assert_fails_with_instance(v: &RuleVerdict) -> &ProveFailure {
    let f = v.failure.as_ref().unwrap_or_else(|| {
        panic!(
            "expected a failure:\n{}",
            render_verdicts(std::slice::from_ref(v), &opts())
        )
    });
    assert!(f.instance.contains("y = "), "{}", f.instance);
    assert!(!v.passed(&opts()));
    f
}

#[test]
fn identity_elimination_passes() {
    let v = prove("# Identity(x) == x\nrule identity_elim [exact]:\n  Identity(x) => x\n");
    assert_passes(&v);
    assert!(v.checks.iter().all(|c| c.fired > 0), "{:?}", v.checks);
}

#[test]
fn relu_is_not_abs() {
    let v = prove("# wrong on purpose\nrule relu_abs:\n  Relu(x) => Abs(x)\n");
    let f = assert_fails_with_instance(&v);
    assert!(f.instance.contains("Relu"), "{}", f.instance);
    assert!(f.detail.contains("differ"), "{}", f.detail);
}

#[test]
fn subtracting_zero_is_exact() {
    let v = prove("# x - 0 == x\nrule sub_zero [exact]:\n  Sub(x, 0) => x\n");
    assert_passes(&v);
}

#[test]
fn adding_zero_is_not_exact_on_negative_zero() {
    let v = prove("# x + 0 == x, except -0\nrule add_zero [exact]:\n  Add(x, 0) => x\n");
    let f = assert_fails_with_instance(&v);
    assert!(f.detail.contains("-0"), "{}", f.detail);
}

#[test]
fn a_rule_that_cannot_fire_fails_for_firing_too_rarely() {
    let v = prove("# never\nrule never [exact]:\n  Relu(x) => x\n  where rank(x) == 99\n");
    assert!(v.failure.is_none(), "{:?}", v.failure);
    assert!(v.checks.iter().all(|c| c.fired == 0));
    assert!(!v.passed(&opts()));
    let text = render_verdicts(&[v], &opts());
    assert!(text.contains("fires too rarely"), "{text}");
}

#[test]
fn verdicts_are_deterministic() {
    let text = "# Transpose(Transpose(x, q), p) == Transpose(x, compose(q, p))\nrule tt [exact]:\n  Transpose<perm: p>(Transpose<perm: q>(x)) => Transpose<perm: compose(q, p)>(x)\n";
    let a = prove(text);
    let b = prove(text);
    let counts = |v: &RuleVerdict| {
        v.checks
            .iter()
            .map(|c| (c.opset, c.dtype.clone(), c.attempts, c.fired))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&a), counts(&b));
    assert_passes(&a);
}

#[test]
fn a_rule_that_fires_rarely_passes_once_it_gets_a_hint() {
    let rule = "# Identity(x) == x, only for 24 elements\nrule id24 [exact]:\n  Identity(x) => x\n  where numel(x) == 24\n";
    let v = prove(rule);
    assert!(
        !v.passed(&opts()),
        "a guard the generator cannot read fires rarely"
    );
    let hinted = format!(
        "{rule}  hint rank(x) == 3 && dim(x, 0) == 2 && dim(x, 1) == 3\n  hint dim(x, 2) == 4\n"
    );
    assert_passes(&prove(&hinted));
}

#[test]
fn a_version_step_is_proven_at_both_versions() {
    let v = prove(
        "# Relu-13 == Relu-14\nrule relu_up [version, step, exact]:\n  Relu@13(x) => Relu@14(x)\n",
    );
    assert_passes(&v);
    assert!(v.checks.iter().all(|c| c.opset == 13), "{:?}", v.checks);
}

#[test]
fn a_step_across_a_change_of_meaning_fails() {
    // Softmax before 13 coerces the input to 2-D at `axis`; from 13 it normalizes one axis.
    let v = prove(
        "# wrong on purpose\nrule softmax_up [version, step]:\n  Softmax@11<..rest>(x) => Softmax@13<..rest>(x)\n",
    );
    let f = assert_fails_with_instance(&v);
    assert!(f.detail.contains("differ"), "{}", f.detail);
    // The right side is written at opset 13.
    assert!(f.detail.contains("\"\" : 13"), "{}", f.detail);
}

#[test]
fn a_step_without_the_old_behaviour_fails() {
    // RoiAlign-16's default coordinate mode (half_pixel) is not RoiAlign-10's behaviour.
    let v = prove(
        "# wrong on purpose\nrule roi_up [version, step]:\n  RoiAlign@10<..rest>(x, r, i) => RoiAlign@16<..rest>(x, r, i)\n",
    );
    assert_fails_with_instance(&v);
}

#[test]
fn a_round_trip_with_a_step_back_too_strict_fails() {
    let source = "# round trips\n\n# Relu-13 == Relu-14\nrule up [version, step, exact]:\n  Relu@13(x) => Relu@14(x)\n\n# Relu-14 == Relu-13, for double only (too strict on purpose)\nrule down [version, step, exact]:\n  Relu@14(x) => Relu@13(x)\n  where dtype(x) == double\n\n# Relu-14 == Relu-13 for its types\nrule down_ok [version, step, exact]:\n  Relu@14(x) => Relu@13(x)\n  where member(dtype(x), [float, double, float16, bfloat16])\n";
    let file = onnx_rules::parse_rules("rt.rules", source, &CheckOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let rules: Vec<&Rule> = file.rules.iter().collect();
    let guards = GuardRegistry::default();
    let strict = round_trip(rules[0], &[rules[1]], &guards, &opts());
    assert!(!strict.passed(&opts()), "{strict:?}");
    let why = strict.failure.as_deref().unwrap_or_default();
    assert!(why.contains("step back"), "{why}");
    let ok = round_trip(rules[0], &[rules[2]], &guards, &opts());
    assert!(ok.passed(&opts()), "{ok:?}");
    // The inverses found by their ops and versions.
    let names: Vec<&str> = step_inverses(rules[0], &rules)
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["down", "down_ok"]);
    // Through either: the one that applies brings every instance back.
    let either = round_trip(rules[0], &[rules[1], rules[2]], &guards, &opts());
    assert!(either.passed(&opts()), "{either:?}");
}

#[test]
fn resize_10_to_11_with_the_new_defaults_fails() {
    // onnx.version_converter's adapter keeps 11's defaults (half_pixel, round_prefer_floor);
    // 10 computes asymmetric coordinates with floor rounding.
    let v = prove(
        "# wrong on purpose\nrule resize_defaults [version, step, exact]:\n  Resize@10<mode: m, scales: s>(x)\n  => Resize@11<mode: m, roi: r, scales: s>(x)\n  let r = Slice@11<starts: [0], ends: [0], axes: [0]>(s)\n  hint rank(x) == 4\n",
    );
    let f = assert_fails_with_instance(&v);
    assert!(f.detail.contains("differ"), "{}", f.detail);
}
