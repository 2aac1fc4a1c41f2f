"""onnx_opt.check (the checker's problems) and onnx_opt.run (the reference interpreter),
compared with onnx's own checker and with onnxruntime."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnx_opt
from helpers import (
    TEXT_MODELS,
    assert_outputs_close,
    load_data_set,
    ort_run,
    parse,
    random_feeds,
    text_model,
)


def _undefined_input_model():
    # built with onnx.helper, never passed to onnx.checker: Add reads a value nothing defines
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "undefined_value"], ["y"], name="add_undefined"),
    ]
    graph = helper.make_graph(nodes, "undefined_input", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("name", ["mlp", "control_flow", "local_function", "qdq_block"])
def test_check_valid_text_models(name):
    model = text_model(name)
    onnx.checker.check_model(model, full_check=True)  # the independent verdict
    assert onnx_opt.check(model) == []
    assert onnx_opt.check(TEXT_MODELS[name]) == []
    assert onnx_opt.check(str(TEXT_MODELS[name])) == []
    assert onnx_opt.check(model.SerializeToString()) == []


def test_check_valid_dev_model(dev_cnn):
    path = dev_cnn / "model.onnx"
    onnx.checker.check_model(str(path))
    assert onnx_opt.check(path) == []


def test_check_names_an_undefined_value():
    model = _undefined_input_model()
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)  # onnx agrees it is invalid
    problems = onnx_opt.check(model)
    assert isinstance(problems, list) and problems
    assert all(isinstance(p, str) for p in problems)
    assert any("undefined_value" in p for p in problems), problems


def test_check_names_a_wrong_arity():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    node = helper.make_node("Relu", ["x", "x"], ["y"], name="two_input_relu")
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    )
    problems = onnx_opt.check(model)
    assert problems and any("Relu" in p or "two_input_relu" in p for p in problems), problems


def test_check_raises_model_error_on_garbage_bytes():
    with pytest.raises(onnx_opt.ModelError) as info:
        onnx_opt.check(b"\xff\x00 this is not a model \x13\x37" * 4)
    e = info.value
    assert isinstance(e.reason, str) and e.reason
    assert isinstance(e.problems, list) and e.problems
    assert str(e) == e.message and e.message


def test_check_raises_model_error_on_a_missing_path(tmp_path):
    missing = tmp_path / "no_such_model.onnx"
    with pytest.raises(onnx_opt.ModelError) as info:
        onnx_opt.check(missing)
    assert "no_such_model.onnx" in str(info.value)
    with pytest.raises(onnx_opt.ModelError):
        onnx_opt.check(str(missing))


# --- run --------------------------------------------------------------------------------


def test_run_dev_model_matches_onnxruntime(dev_cnn):
    path = dev_cnn / "model.onnx"
    inputs, expected = load_data_set(dev_cnn)
    got = onnx_opt.run(path, inputs)
    assert set(got) == set(expected)
    assert_outputs_close(got, expected)
    assert_outputs_close(got, ort_run(path, inputs))


def test_run_int64_inputs_two_outputs(dev_bert):
    path = dev_bert / "model.onnx"
    inputs, expected = load_data_set(dev_bert)
    got = onnx_opt.run(str(path), inputs)
    assert_outputs_close(got, ort_run(path, inputs))
    assert_outputs_close(got, expected)


@pytest.mark.parametrize("name", ["mlp", "control_flow", "if_constant_condition", "qdq_block"])
def test_run_text_models_match_onnxruntime(name):
    model = text_model(name)
    for seed in (0, 1):
        feeds = random_feeds(model, seed)
        assert_outputs_close(onnx_opt.run(model, feeds), ort_run(model, feeds))


def test_run_takes_lists_and_scalars():
    model = parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2] x, int64 k) => (float[2] y, int64 j) { y = Relu(x)  j = Neg(k) }')
    got = onnx_opt.run(model.SerializeToString(), {"x": np.array([-1.0, 2.0], dtype=np.float32), "k": np.int64(5)})
    assert got["y"].tolist() == [0.0, 2.0]
    assert got["j"].dtype == np.int64 and got["j"].shape == () and int(got["j"]) == -5


def test_run_sequence_output_is_a_list():
    model = parse(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2, 3] x) => (seq(float[2, 3]) s) '
        "{ r = Relu(x)  n = Neg(x)  s = SequenceConstruct(x, r, n) }"
    )
    feeds = random_feeds(model, 0)
    got = onnx_opt.run(model, feeds)
    assert isinstance(got["s"], list) and len(got["s"]) == 3
    expected = ort_run(model, feeds)
    assert isinstance(expected["s"], list)
    assert_outputs_close(got, expected)


def test_run_optional_outputs():
    model = parse(
        '<ir_version: 8, opset_import: ["" : 18]> g (float[2] x) => (optional(float[2]) o, optional(seq(float[2])) e) '
        "{ o = Optional(x)  e = Optional <type = seq(float[2])> () }"
    )
    feeds = {"x": np.array([1.5, -2.0], dtype=np.float32)}
    got = onnx_opt.run(model, feeds)
    expected = ort_run(model, feeds)
    assert got["e"] is None and expected["e"] is None
    assert_outputs_close(got, expected, names=["o"])


def test_run_error_is_a_model_error():
    # a wrong input shape: the interpreter refuses to run (the native layer's "model" kind)
    with pytest.raises(onnx_opt.ModelError) as info:
        onnx_opt.run(text_model("conv_bn_block"), {"x": np.zeros((1, 2, 3), dtype=np.float32)})
    assert info.value.problems
