"""onnx_opt.convert: up and down the default domain's opsets, outputs unchanged in
onnxruntime."""

import onnx
import pytest

import onnx_opt
from helpers import (
    TEXT_MODELS,
    assert_outputs_close,
    default_opset,
    load_data_set,
    op_histogram,
    ort_run,
    parse,
    random_feeds,
    text_model,
)


@pytest.mark.parametrize("target", [13, 21])
def test_convert_text_model_down_and_up(target):
    model = text_model("mlp")  # opset 17
    assert default_opset(model) == 17
    out = onnx_opt.convert(model, target)
    assert isinstance(out, onnx.ModelProto)
    assert default_opset(out) == target
    onnx.checker.check_model(out)
    for seed in (0, 1):
        feeds = random_feeds(model, seed)
        assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_convert_changes_what_the_versions_need():
    # ReduceSum's axes went from an attribute (opset 11) to an input (opset 13).
    model = parse(
        '<ir_version: 7, opset_import: ["" : 11]> g (float[2, 3] x) => (float[1, 3] y) '
        "{ y = ReduceSum <axes = [0]> (x) }"
    )
    up = onnx_opt.convert(model, 13)
    assert default_opset(up) == 13
    (node,) = [n for n in up.graph.node if n.op_type == "ReduceSum"]
    assert len(node.input) == 2 and not [a for a in node.attribute if a.name == "axes"]
    feeds = random_feeds(model, 2)
    assert_outputs_close(ort_run(up, feeds), ort_run(model, feeds))
    down = onnx_opt.convert(up, 11)
    assert default_opset(down) == 11
    assert_outputs_close(ort_run(down, feeds), ort_run(model, feeds))


def test_convert_writes_layer_norm_out_below_17():
    model = text_model("transformer_block")  # opset 17, LayerNorm written out
    fused = onnx_opt.optimize(model)
    assert op_histogram(fused)["LayerNormalization"] == 2
    down = onnx_opt.convert(fused, 16)
    assert default_opset(down) == 16
    assert op_histogram(down)["LayerNormalization"] == 0
    feeds = random_feeds(model, 3)
    assert_outputs_close(ort_run(down, feeds), ort_run(model, feeds))


def test_convert_dev_model_up(dev_cnn):
    path = dev_cnn / "model.onnx"
    out = onnx_opt.convert(str(path), 17)
    assert isinstance(out, onnx.ModelProto)
    assert default_opset(out) == 17
    inputs, expected = load_data_set(dev_cnn)
    assert_outputs_close(ort_run(out, inputs), expected)


def test_convert_kinds_and_output(tmp_path):
    model = text_model("mlp")
    feeds = random_feeds(model, 4)
    expected = ort_run(model, feeds)

    data = onnx_opt.convert(model.SerializeToString(), 13)
    assert isinstance(data, bytes)
    assert default_opset(onnx.ModelProto.FromString(data)) == 13

    from_path = onnx_opt.convert(TEXT_MODELS["mlp"], 13)
    assert isinstance(from_path, onnx.ModelProto)

    out_path = tmp_path / "mlp13.onnx"
    rep = onnx_opt.convert(model, 13, out_path)
    assert isinstance(rep, dict) and "nodes_after" in rep
    saved = onnx.load(str(out_path))
    assert default_opset(saved) == 13
    assert rep["nodes_after"] == len(saved.graph.node)
    assert_outputs_close(ort_run(saved, feeds), expected)

    converted, rep = onnx_opt.convert(model, 13, report=True)
    assert isinstance(converted, onnx.ModelProto) and isinstance(rep, dict)
    assert rep["pipeline"] == "convert"
    assert rep["nodes_before"] == len(model.graph.node)


def test_convert_refuses_what_the_target_cannot_express():
    # Softmax-11 off the last axis over a symbolic dim cannot be written at 13 (the Flatten form
    # needs a static shape): tests/convert/cases/softmax11_symbolic_refused_at_13.onnxtxt.
    text = (
        b'<ir_version: 7, opset_import: ["" : 11]> g (float[N,3,4] x) => (float[N,3,4] y) '
        b"{ y = Softmax(x) }"
    )
    with pytest.raises(onnx_opt.Error) as info:
        onnx_opt.convert(text, 13)
    assert "Softmax" in str(info.value), str(info.value)
    assert not isinstance(info.value, onnx_opt.CheckMismatch)
    # the same model converts down
    assert default_opset(onnx.ModelProto.FromString(onnx_opt.convert(text, 9))) == 9
