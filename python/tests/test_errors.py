"""The exception classes and their fields, each provoked through the public API."""

import pytest
from onnx import TensorProto, helper

import onnx_opt
from helpers import BAD_NEG, IDENTITY_RELU, NEG_NEG, ONE_NEG, parse, rules_text, text_model


def test_the_hierarchy():
    for cls in (onnx_opt.CheckMismatch, onnx_opt.RuleError, onnx_opt.ModelError, onnx_opt.OptionError):
        assert issubclass(cls, onnx_opt.Error)
    assert issubclass(onnx_opt.Error, Exception)
    assert issubclass(onnx_opt.OptionError, ValueError)
    assert not issubclass(onnx_opt.ModelError, ValueError)


# --- CheckMismatch ----------------------------------------------------------------------


def test_check_mismatch_from_a_wrong_user_rule(tmp_path):
    out_path = tmp_path / "never_written.onnx"
    with pytest.raises(onnx_opt.CheckMismatch) as info:
        onnx_opt.optimize(parse(ONE_NEG), out_path, rules_text=rules_text(BAD_NEG))
    e = info.value
    assert isinstance(e, onnx_opt.Error)
    assert e.output == "y"
    assert e.culprit == "bad"
    assert isinstance(e.max_difference, float) and e.max_difference > 0
    assert isinstance(e.trial, int)
    assert e.on_data_set is False
    assert isinstance(e.detail, str) and e.detail
    assert "y" in str(e) and str(e) == e.message
    assert not out_path.exists(), "a result that failed the check was written"


def test_check_mismatch_with_an_origin_mapping():
    with pytest.raises(onnx_opt.CheckMismatch) as info:
        onnx_opt.optimize(
            parse(ONE_NEG).SerializeToString(), rules_text={"wrong.rules": rules_text(("-x == x", "bad_neg: Neg(x) => x"))}
        )
    assert info.value.culprit == "bad_neg"


def test_a_wrong_rule_passes_without_the_check():
    out = onnx_opt.optimize(parse(ONE_NEG), rules_text=rules_text(BAD_NEG), check=0)
    assert [n.op_type for n in out.graph.node] != ["Neg"]


# --- RuleError --------------------------------------------------------------------------


def test_rule_error_from_bad_rule_text():
    text = rules_text(NEG_NEG, ("broken", "broken: Neg(x => x"))
    assert text.splitlines()[6] == "rule broken: Neg(x => x"
    with pytest.raises(onnx_opt.RuleError) as info:
        onnx_opt.optimize(parse(ONE_NEG), rules_text={"my.rules": text})
    e = info.value
    assert isinstance(e, onnx_opt.Error)
    assert e.file == "my.rules"
    assert e.line == 7
    assert isinstance(e.column, int) and e.column >= 1
    assert isinstance(e.reason, str) and e.reason
    assert e.errors and e.errors[0] == (e.file, e.line, e.column, e.reason)


def test_rule_error_default_origin():
    with pytest.raises(onnx_opt.RuleError) as info:
        onnx_opt.optimize(parse(ONE_NEG), rules_text=rules_text(("x", "broken Neg(x) => x")))
    assert info.value.file == "<rules_text>"
    assert info.value.line == 4


def test_rule_error_for_text_without_the_header():
    # the rule language requires a header comment and an identity comment per rule
    with pytest.raises(onnx_opt.RuleError) as info:
        onnx_opt.optimize(parse(ONE_NEG), rules_text="rule neg_neg_again: Neg(Neg(x)) => x\n")
    e = info.value
    assert (e.file, e.line, e.column) == ("<rules_text>", 1, 1)
    assert "header" in e.reason
    assert len(e.errors) == 2 and "identity comment" in e.errors[1][3]


def test_rule_error_for_an_unknown_operator():
    with pytest.raises(onnx_opt.RuleError) as info:
        onnx_opt.optimize(parse(ONE_NEG), rules_text=rules_text(("x", "nope: NoSuchOperator(x) => x")))
    assert "NoSuchOperator" in info.value.reason


def test_rule_error_from_a_rule_file(tmp_path):
    bad = tmp_path / "bad.rules"
    bad.write_text(rules_text(("a", "a: Neg(Neg(x)) => x"), ("b", "b: Relu(")))
    with pytest.raises(onnx_opt.RuleError) as info:
        onnx_opt.optimize(parse(ONE_NEG), rules=bad)
    e = info.value
    assert e.file is not None and e.file.endswith("bad.rules")
    assert e.line == 7 and e.reason

    missing = tmp_path / "missing.rules"
    with pytest.raises(onnx_opt.RuleError) as info:
        onnx_opt.optimize(parse(ONE_NEG), rules=[missing])
    assert info.value.file.endswith("missing.rules") and info.value.reason


# --- ModelError -------------------------------------------------------------------------


def _two_input_relu():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Neg", ["x"], ["n"], name="first_neg"),
        helper.make_node("Relu", ["n", "x"], ["y"], name="bad_relu"),
    ]
    return helper.make_model(
        helper.make_graph(nodes, "two_input_relu", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )


@pytest.mark.parametrize("how", ["optimize", "convert"])
def test_model_error_names_the_node(how):
    model = _two_input_relu()
    with pytest.raises(onnx_opt.ModelError) as info:
        if how == "optimize":
            onnx_opt.optimize(model)
        else:
            onnx_opt.convert(model, 13)
    e = info.value
    assert isinstance(e, onnx_opt.Error)
    assert e.node == "bad_relu"
    assert e.op == "Relu"
    assert e.node_index == 1
    assert e.reason and e.problems and isinstance(e.problems, list)
    assert "bad_relu" in str(e) or "Relu" in str(e)


def test_model_error_on_garbage_bytes():
    with pytest.raises(onnx_opt.ModelError) as info:
        onnx_opt.optimize(b"garbage, not a model\x00\xff\xfe")
    e = info.value
    assert e.reason and e.problems
    assert e.node is None and e.op is None and e.node_index is None


def test_model_error_on_a_missing_path(tmp_path):
    missing = tmp_path / "nothing_here.onnx"
    for fn in (onnx_opt.optimize, onnx_opt.check, lambda m: onnx_opt.convert(m, 13)):
        with pytest.raises(onnx_opt.ModelError) as info:
            fn(missing)
        assert "nothing_here.onnx" in str(info.value)
        assert info.value.reason


def test_model_error_on_bad_text():
    with pytest.raises(onnx_opt.ModelError) as info:
        onnx_opt.optimize(b'<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) { y = Relu(x ')
    assert info.value.reason


# --- OptionError ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, mentions",
    [
        ({"skip_rules": ["no_such_rule_anywhere"]}, "no_such_rule_anywhere"),
        ({"skip_rules": "identity_elimm"}, "identity_elimm"),
        ({"input_shapes": {"x": [2, 3, 4]}}, "x"),  # rank 2 input
        ({"input_shapes": {"x": [5, 4]}}, "x"),  # the fixed dim is 3
        ({"input_shapes": {"nope": [2, 3]}}, "nope"),
        ({"input_shapes": ["x=2,3"]}, "x=2,3"),
        ({"input_shapes": ["x:2,three"]}, "three"),
        ({"same_dims": {"M": "N"}}, "same_dims: M"),  # no input declares M
        ({"same_dims": {"N": "a + b"}}, "a + b"),
        ({"assume": {"nope": "ones"}}, "assume: nope: not an input of the model"),
        ({"assume": {"x": "zeros"}}, "unknown assumption 'zeros'"),
        ({"outputs": ["not_an_output"]}, "not_an_output"),
        ({"outputs": ["y", "y"]}, "y"),
        ({"pipeline": "no_such_pipeline"}, "no_such_pipeline"),
        ({"cost": "cheapest"}, "cheapest"),
    ],
)
def test_option_errors(kwargs, mentions):
    model = parse(IDENTITY_RELU)  # x: float[N, 3]
    with pytest.raises(onnx_opt.OptionError) as info:
        onnx_opt.optimize(model, **kwargs)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, onnx_opt.Error)
    assert mentions in str(e), str(e)
    assert str(e) == e.message


def test_option_error_in_convert():
    with pytest.raises(onnx_opt.OptionError):
        onnx_opt.convert(text_model("mlp"), 13, skip_rules=["no_such_rule_anywhere"])
