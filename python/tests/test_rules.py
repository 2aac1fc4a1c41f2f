"""onnx_opt.rules: proving rule text, and explaining where a rule applies."""

import pytest

import onnx_opt
from onnx_opt import rules
from helpers import BAD_NEG, IDENTITY_RELU, NEG_NEG, TEXT_MODELS, parse, rules_text, text_model


def test_check_correct_rules():
    text = rules_text(NEG_NEG, ("relu(relu(x)) == relu(x)", "relu_relu: Relu(Relu(x)) => Relu(x)"))
    results = rules.check(text)
    assert [r.rule for r in results] == ["neg_neg_again", "relu_relu"]
    for r in results:
        assert isinstance(r, rules.RuleResult)
        assert r.passed is True
        assert r.instances > 0
        assert r.detail == ""


def test_check_a_wrong_rule():
    results = rules.check(rules_text(NEG_NEG, BAD_NEG), origin="mine.rules")
    by_name = {r.rule: r for r in results}
    assert set(by_name) == {"neg_neg_again", "bad"}
    assert by_name["neg_neg_again"].passed is True
    bad = by_name["bad"]
    assert bad.passed is False
    assert isinstance(bad.detail, str) and bad.detail.strip()
    assert "differ" in bad.detail, bad.detail


def test_check_seed_is_accepted_and_verdicts_stable():
    text = rules_text(("relu(x) == x (wrong)", "bad_relu: Relu(x) => x"))
    for seed in (0, 1, 12345):
        (r,) = rules.check(text, seed=seed)
        assert r.passed is False


def test_check_text_that_does_not_parse():
    with pytest.raises(onnx_opt.RuleError) as info:
        rules.check(rules_text(NEG_NEG, ("b", "b: Neg(x =>")), origin="broken.rules")
    e = info.value
    assert e.file == "broken.rules" and e.line == 7 and e.column >= 1 and e.reason


def test_check_text_without_the_header():
    with pytest.raises(onnx_opt.RuleError) as info:
        rules.check("rule neg_neg_again: Neg(Neg(x)) => x\n")
    assert "header" in info.value.reason


def test_explain_an_identity():
    sites = rules.explain("identity_elim", parse(IDENTITY_RELU))
    assert sites, "no site for identity_elim"
    assert all(isinstance(s, rules.Site) for s in sites)
    assert any(s.verdict == "fired" for s in sites), sites
    assert all(isinstance(s.site, str) and s.site for s in sites)


def test_explain_a_user_rule_that_fires_and_one_that_does_not():
    model = parse(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2, 3] x) => (float[2, 3] y) '
        "{ a = Neg(x)  b = Neg(a)  y = Abs(b) }"
    )
    text = {
        "mine.rules": rules_text(
            ("-(-x) == x", "my_neg_neg: Neg(Neg(x)) => x"),
            ("|relu(x)| == relu(x)", "my_abs_relu: Abs(Relu(x)) => Relu(x)"),
        )
    }
    fired = rules.explain("my_neg_neg", model, rules_text=text)
    # b = Neg(Neg(x)); a = Neg(x) = Neg(Neg(b)) too, once b and x are one class
    assert {s.site: s.verdict for s in fired} == {"a": "fired", "b": "fired"}, fired
    # the root op Abs occurs once, on a Neg, not a Relu: the pattern fails there
    missed = rules.explain("my_abs_relu", model, rules_text=text)
    assert len(missed) == 1 and missed[0].site == "y", missed
    assert missed[0].verdict.startswith("pattern failed"), missed
    assert "Relu" in missed[0].verdict


def test_explain_by_path_and_with_a_rule_file(tmp_path):
    f = tmp_path / "mine.rules"
    f.write_text(rules_text(("Identity(x) == x", "my_identity: Identity(x) => x")))
    sites = rules.explain("my_identity", TEXT_MODELS["mlp"], rules=f)
    assert len(sites) == 1, sites  # mlp has one Identity
    assert sites[0].verdict == "fired"


def test_explain_an_unknown_rule_is_an_option_error():
    # OptionError: "an argument onnx-opt cannot use: an unknown rule, pass or pipeline name"
    with pytest.raises(onnx_opt.Error) as info:
        rules.explain("no_such_rule_at_all", text_model("mlp"))
    assert "no_such_rule_at_all" in str(info.value)
    assert isinstance(info.value, onnx_opt.OptionError), f"{type(info.value).__name__}: {info.value}"
