"""Models with external data: a ModelProto that refers to external files is refused with a
message telling to pass the path; a path is read with its external data, and ``output=`` writes
external data beside the output."""

import os

import onnx
import pytest

import onnx_opt
from helpers import assert_outputs_close, node_count, ort_run, random_feeds, text_model


def _external_tensors(model):
    return [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]


def _location(tensor):
    return {e.key: e.value for e in tensor.external_data}["location"]


def _raw(model):
    """``model`` with its initializers in ``raw_data`` (as exporters write them; onnx.parser
    writes ``float_data``, which onnx.save never moves to external data)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for t in model.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t), t.name))
    return model


@pytest.fixture
def external_mlp(tmp_path):
    """mlp saved with every initializer in external data: (original ModelProto, path)."""
    model = _raw(text_model("mlp"))
    d = tmp_path / "in"
    d.mkdir()
    path = d / "mlp.onnx"
    copy = onnx.ModelProto.FromString(model.SerializeToString())  # onnx.save changes what it saves
    onnx.save(copy, str(path), save_as_external_data=True, size_threshold=0, location="mlp.weights")
    assert (d / "mlp.weights").is_file()
    assert len(_external_tensors(onnx.load(str(path), load_external_data=False))) == len(model.graph.initializer)
    return model, path


@pytest.mark.parametrize("fn", ["optimize", "optimize bytes", "convert", "check", "run", "explain"])
def test_a_model_proto_with_external_data_is_refused(external_mlp, fn):
    _, path = external_mlp
    proto = onnx.load(str(path), load_external_data=False)
    assert _external_tensors(proto)
    call = {
        "optimize": lambda: onnx_opt.optimize(proto),
        "optimize bytes": lambda: onnx_opt.optimize(proto.SerializeToString()),
        "convert": lambda: onnx_opt.convert(proto, 13),
        "check": lambda: onnx_opt.check(proto),
        "run": lambda: onnx_opt.run(proto, random_feeds(proto, 0)),
        "explain": lambda: onnx_opt.rules.explain("identity_elim", proto),
    }[fn]
    with pytest.raises(onnx_opt.ModelError) as info:
        call()
    assert "path" in str(info.value), str(info.value)
    assert info.value.reason


def test_external_data_in_a_subgraph_tensor_is_refused():
    model = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 13]> g (bool c) => (float[2] y) {'
        " y = If (c) < then_branch = t () => (float[2] a) { a = Constant <value = float[2] {1.0, 2.0}> () },"
        " else_branch = e () => (float[2] b) { b = Constant <value = float[2] {3.0, 4.0}> () } > }"
    )
    branches = {a.name: a.g for a in model.graph.node[0].attribute}
    t = branches["then_branch"].node[0].attribute[0].t
    t.ClearField("float_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    entry = t.external_data.add()
    entry.key, entry.value = "location", "somewhere.bin"
    with pytest.raises(onnx_opt.ModelError) as info:
        onnx_opt.optimize(model)
    assert "path" in str(info.value)


def test_a_path_with_external_data_works(external_mlp):
    model, path = external_mlp
    feeds = random_feeds(model, 0)
    expected = ort_run(model, feeds)
    for given in (path, str(path)):
        out = onnx_opt.optimize(given)
        assert isinstance(out, onnx.ModelProto)
        assert node_count(out) == 4
        assert not _external_tensors(out), "the returned ModelProto should hold its tensors"
        assert_outputs_close(ort_run(out, feeds), expected)
    assert onnx_opt.check(path) == []
    assert_outputs_close(onnx_opt.run(path, feeds), expected)


def test_output_writes_external_data_beside_it(external_mlp, tmp_path):
    model, path = external_mlp
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out_path = out_dir / "mlp_opt.onnx"
    rep = onnx_opt.optimize(path, out_path)
    assert isinstance(rep, dict) and rep["nodes_after"] == 4

    header = onnx.load(str(out_path), load_external_data=False)
    external = _external_tensors(header)
    assert external, "the output has no external data though its input had"
    for t in external:
        assert (out_dir / _location(t)).is_file(), f"{_location(t)} not beside {out_path.name}"
    assert sorted(os.listdir(out_dir)) != [out_path.name]

    full = onnx.load(str(out_path))  # loads the external data
    assert node_count(full) == 4
    feeds = random_feeds(model, 1)
    assert_outputs_close(ort_run(out_path, feeds), ort_run(model, feeds))


@pytest.mark.parametrize("tensors", ["raw_data", "float_data"])
def test_external_threshold_from_an_in_memory_model(tmp_path, tensors):
    # "tensors stored as raw bytes, of at least external_threshold bytes, go to external data
    # beside it": as onnx.save(save_as_external_data=True) does, a tensor whose values are in a
    # typed field (float_data) stays inline, since its encoding is kept as it was
    model = text_model("mlp")
    if tensors == "raw_data":
        model = _raw(model)
    assert all(t.HasField("raw_data") == (tensors == "raw_data") for t in model.graph.initializer)
    out_path = tmp_path / "mlp_ext.onnx"
    onnx_opt.optimize(model, out_path, external_threshold=1024)
    header = onnx.load(str(out_path), load_external_data=False)
    sizes = {t.name: onnx.numpy_helper.to_array(t).nbytes for t in onnx.load(str(out_path)).graph.initializer}
    assert sizes["fc1_weight"] == 2048 and sizes["fc2_weight"] == 512
    external = {t.name for t in _external_tensors(header)}
    raw = {t.name for t in onnx.load(str(out_path)).graph.initializer if t.HasField("raw_data")}
    expected = {name for name, n in sizes.items() if n >= 1024 and name in raw}
    assert external == expected, f"external: {external}, sizes: {sizes}"
    if tensors == "raw_data":
        assert external == {"fc1_weight"}
    feeds = random_feeds(model, 2)
    assert_outputs_close(ort_run(out_path, feeds), ort_run(model, feeds))


def test_convert_a_path_with_external_data(external_mlp, tmp_path):
    model, path = external_mlp
    out_path = tmp_path / "mlp13.onnx"
    onnx_opt.convert(path, 13, out_path)
    assert _external_tensors(onnx.load(str(out_path), load_external_data=False))
    feeds = random_feeds(model, 3)
    assert_outputs_close(ort_run(out_path, feeds), ort_run(model, feeds))


def _external_input(directory):
    """A model whose three initializers are all in ``in.onnx.data``: a weight the optimizer
    keeps, and two constants it folds into a new one."""
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    w = numpy_helper.from_array(np.arange(128 * 128, dtype=np.float32).reshape(128, 128) / 1e3, "w")
    a = numpy_helper.from_array(np.ones((2, 128), np.float32), "a")
    b = numpy_helper.from_array(np.full((2, 128), 2, np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["a", "b"], ["c"]),
            helper.make_node("Add", ["m", "c"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 128])],
        [w, a, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(directory, "in.onnx")
    onnx.save(model, path, save_as_external_data=True, location="in.onnx.data", size_threshold=0)
    return path


def _locations(path):
    model = onnx.load(path, load_external_data=False)
    return {t.name: _location(t) for t in _external_tensors(model)}


def test_reuse_external_data_keeps_unchanged_tensors_in_the_input_file(tmp_path):
    path = _external_input(str(tmp_path))
    out = tmp_path / "out.onnx"
    onnx_opt.optimize(path, output=str(out), reuse_external_data=True)
    assert _locations(str(out))["w"] == "in.onnx.data"
    assert sorted(os.listdir(tmp_path)) == ["in.onnx", "in.onnx.data", "out.onnx", "out.onnx.data"]
    onnx.checker.check_model(str(out))
    converted = tmp_path / "conv.onnx"
    onnx_opt.convert(path, 18, output=str(converted), reuse_external_data=True)
    assert _locations(str(converted))["w"] == "in.onnx.data"


def test_reuse_external_data_refusals_write_nothing(tmp_path):
    path = _external_input(str(tmp_path))
    with pytest.raises(onnx_opt.OptionError, match="replace the input model"):
        onnx_opt.optimize(path, output=path, reuse_external_data=True)
    other = tmp_path / "sub"
    other.mkdir()
    with pytest.raises(onnx_opt.OptionError, match="not inside"):
        onnx_opt.optimize(path, output=str(other / "o.onnx"), reuse_external_data=True)
    assert os.listdir(other) == []
    with pytest.raises(onnx_opt.OptionError):
        onnx_opt.optimize(path, reuse_external_data=True)
