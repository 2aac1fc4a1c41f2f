"""onnx_opt.optimize: results that compute what the input computes (in onnxruntime), the model
kinds it takes and returns, output files, the report, and its options."""

import json

import numpy as np
import onnx
import pytest

import onnx_opt
from helpers import (
    DEV_MODELS,
    IDENTITY_RELU,
    TEXT_MODELS,
    assert_outputs_close,
    default_opset,
    dev_model_dir,
    load_data_set,
    node_count,
    op_histogram,
    ort_run,
    parse,
    random_feeds,
    rules_text,
    text_model,
)


@pytest.mark.parametrize("name", sorted(TEXT_MODELS))
def test_text_model_optimizes_to_the_same_outputs(name):
    model = text_model(name)
    out = onnx_opt.optimize(model)
    assert isinstance(out, onnx.ModelProto)
    onnx.checker.check_model(out)
    assert node_count(out) <= node_count(model)
    assert [o.name for o in out.graph.output] == [o.name for o in model.graph.output]
    for seed in (0, 1):
        feeds = random_feeds(model, seed)
        assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_text_models_that_can_shrink_do():
    # tests/pipelines/models/README.md: mlp goes from 10 nodes to Gemm, Relu, Gemm, Softmax;
    # shape_cleanup keeps Mul, Add, Reshape.
    mlp = onnx_opt.optimize(text_model("mlp"))
    assert sorted(n.op_type for n in mlp.graph.node) == ["Gemm", "Gemm", "Relu", "Softmax"]
    shapes = onnx_opt.optimize(text_model("shape_cleanup"))
    assert sorted(n.op_type for n in shapes.graph.node) == ["Add", "Mul", "Reshape"]


@pytest.mark.parametrize("name", DEV_MODELS)
def test_dev_model_by_path_matches_its_data_set(name):
    d = dev_model_dir(name)
    path = d / "model.onnx"
    original = onnx.load(str(path))
    out, rep = onnx_opt.optimize(str(path), report=True)
    assert isinstance(out, onnx.ModelProto)
    assert node_count(out) <= node_count(original)
    assert rep["nodes_before"] == node_count(original) and rep["nodes_after"] == node_count(out)
    assert rep["check_trials"] == 3 and rep["check_skipped"] is None
    inputs, expected = load_data_set(d)
    got = ort_run(out, inputs)
    assert_outputs_close(got, expected)
    assert_outputs_close(got, ort_run(path, inputs))


def test_dev_model_with_int64_inputs_and_two_outputs(dev_bert):
    path = dev_bert / "model.onnx"
    out = onnx_opt.optimize(path)  # a pathlib.Path
    assert isinstance(out, onnx.ModelProto)
    assert node_count(out) < node_count(onnx.load(str(path)))
    inputs, expected = load_data_set(dev_bert)
    assert len(expected) == 2
    assert_outputs_close(ort_run(out, inputs), expected)


# --- model kinds in and out -------------------------------------------------------------


def _kinds(tmp_path):
    model = text_model("mlp")
    binary = tmp_path / "mlp.onnx"
    onnx.save(model, str(binary))
    data = model.SerializeToString()
    return model, {
        "ModelProto": (model, onnx.ModelProto),
        "bytes": (data, bytes),
        "bytearray": (bytearray(data), bytes),
        "memoryview": (memoryview(data), bytes),
        "text bytes": (TEXT_MODELS["mlp"].read_bytes(), bytes),
        "str path": (str(binary), onnx.ModelProto),
        "pathlib.Path": (binary, onnx.ModelProto),
        "text path": (TEXT_MODELS["mlp"], onnx.ModelProto),
    }


def test_return_type_follows_the_model_kind(tmp_path):
    model, kinds = _kinds(tmp_path)
    feeds = random_feeds(model, 3)
    expected = ort_run(model, feeds)
    for kind, (given, returned) in kinds.items():
        out = onnx_opt.optimize(given)
        assert type(out) is returned, f"{kind}: returned {type(out).__name__}"
        proto = out if isinstance(out, onnx.ModelProto) else onnx.ModelProto.FromString(out)
        assert node_count(proto) == 4, kind
        assert_outputs_close(ort_run(proto, feeds), expected)


def test_output_writes_the_file_and_returns_the_report(tmp_path):
    model, kinds = _kinds(tmp_path)
    feeds = random_feeds(model, 4)
    expected = ort_run(model, feeds)
    for i, kind in enumerate(["ModelProto", "bytes", "str path", "pathlib.Path", "text path"]):
        out_path = tmp_path / f"out{i}.onnx"
        given = kinds[kind][0]
        rep = onnx_opt.optimize(given, str(out_path) if i % 2 else out_path)
        assert isinstance(rep, dict), kind
        saved = onnx.load(str(out_path))
        assert rep["nodes_before"] == node_count(model), kind
        assert rep["nodes_after"] == node_count(saved) == 4, kind
        assert rep["size_after"] == out_path.stat().st_size, kind
        assert_outputs_close(ort_run(saved, feeds), expected)


def test_output_and_report_true_still_returns_the_report(tmp_path):
    out_path = tmp_path / "o.onnx"
    rep = onnx_opt.optimize(text_model("mlp"), output=out_path, report=True)
    assert isinstance(rep, dict) and rep["nodes_after"] == 4
    assert out_path.is_file()


def test_report_true_returns_model_and_report():
    model = text_model("mlp")
    out, rep = onnx_opt.optimize(model, report=True)
    assert isinstance(out, onnx.ModelProto)
    assert isinstance(rep, dict)
    json.dumps(rep)  # plain JSON data
    assert rep["nodes_before"] == node_count(model) == 10
    assert rep["nodes_after"] == node_count(out)
    assert rep["ops_before"] == dict(op_histogram(model))
    assert rep["ops_after"] == dict(op_histogram(out))
    assert rep["check_trials"] == 3  # the default check
    assert rep["pipeline"] == "default"

    data, rep2 = onnx_opt.optimize(model.SerializeToString(), report=True)
    assert isinstance(data, bytes)
    assert rep2["nodes_after"] == node_count(onnx.ModelProto.FromString(data))


def test_check_count_and_check_off():
    model = text_model("mlp")
    _, rep = onnx_opt.optimize(model, check=5, report=True)
    assert rep["check_trials"] == 5
    _, rep = onnx_opt.optimize(model, check=0, report=True)
    assert rep["check_trials"] == 0


def test_subgraphs_are_optimized_and_counted():
    model = text_model("control_flow")
    out, rep = onnx_opt.optimize(model, report=True)
    before, after = op_histogram(model), op_histogram(out)
    assert rep["ops_before"] == dict(before)
    assert rep["ops_after"] == dict(after)
    assert before["Transpose"] == 4 and after["Transpose"] == 0


def test_type_error_for_something_that_is_not_a_model():
    with pytest.raises(TypeError):
        onnx_opt.optimize(42)


# --- options ----------------------------------------------------------------------------


def _dims(value_info):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize("shapes", [{"x": [5, 16]}, ["x:5,16"], "x:5,16"])
def test_input_shapes_fix_a_symbolic_dim(shapes):
    model = text_model("mlp")
    assert _dims(model.graph.input[0]) == ["batch", 16]
    out = onnx_opt.optimize(model, input_shapes=shapes)
    assert _dims(out.graph.input[0]) == [5, 16]
    assert _dims(out.graph.output[0]) == [5, 4]
    feeds = random_feeds(model, 5, dims={"batch": 5})
    assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_input_shapes_fold_shape_arithmetic():
    model = text_model("dynamic_transformer")
    free = onnx_opt.optimize(model)
    fixed = onnx_opt.optimize(model, input_shapes={"x": [2, 3, 8]})
    assert _dims(fixed.graph.input[0]) == [2, 3, 8]
    assert node_count(fixed) <= node_count(free)
    assert op_histogram(fixed)["Shape"] == 0
    feeds = random_feeds(model, 6)
    assert_outputs_close(ort_run(fixed, feeds), ort_run(model, feeds))


def test_same_dims_tie_symbols_in_the_interface():
    # The output's dim is an expression over the inputs' symbols, as dynamo declares presents.
    model = parse(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[n, 3] x, float[m, 3] y) => (float[t, 3] z, int64[1] a, int64[1] b) {
          z = Concat <axis = 0> (x, y)
          sx = Shape(x)
          sy = Shape(y)
          zero = Constant <value = int64[1] {0}> ()
          one = Constant <value = int64[1] {1}> ()
          a = Slice(sx, zero, one)
          b = Slice(sy, zero, one)
        }"""
    )
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "n + m"
    out = onnx_opt.optimize(model, same_dims={"m": "n"})
    assert _dims(out.graph.input[1]) == ["n", 3]
    assert _dims(out.graph.output[0]) == ["n + n", 3]
    assert op_histogram(out)["Shape"] == 1
    assert op_histogram(onnx_opt.optimize(model))["Shape"] == 2
    feeds = {"x": np.ones((4, 3), np.float32), "y": np.zeros((4, 3), np.float32)}
    assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_assume_ones_folds_what_the_mask_computes_and_keeps_the_input():
    # y = x where the mask holds, else -x: under the mask of ones, y is x.
    model = parse(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[b, n] x, int64[b, n] mask) => (float[b, n] y) {
          c = Cast <to = 9> (mask)
          z = Neg(x)
          y = Where(c, x, z)
        }"""
    )
    out, rep = onnx_opt.optimize(model, assume={"mask": "ones"}, report=True)
    assert [i.name for i in out.graph.input] == ["x", "mask"]
    assert "Where" not in op_histogram(out) and "Neg" not in op_histogram(out)
    assert rep["assumed"] == ["mask=ones"]
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "mask": np.ones((2, 3), np.int64)}
    assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))
    # Without the assumption nothing folds.
    assert "Where" in op_histogram(onnx_opt.optimize(model))


def _firings(rep):
    """Firings per rule in the main graph's report, as the report's JSON has them."""
    found = {}

    def walk(value):
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("firings", "subgraph_firings") and isinstance(v, dict):
                    for rule, n in v.items():
                        found[rule] = found.get(rule, 0) + n
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(rep["egraph"])
    return found


def test_skip_rules_leaves_a_rule_out():
    model = parse(IDENTITY_RELU)
    out, rep = onnx_opt.optimize(model, report=True)
    assert [n.op_type for n in out.graph.node] == ["Relu"]
    assert _firings(rep).get("identity_elim", 0) >= 1, rep["egraph"]

    kept, rep = onnx_opt.optimize(model, skip_rules="identity_elim", report=True)
    assert [n.op_type for n in kept.graph.node] == ["Identity", "Relu"]
    assert "identity_elim" not in _firings(rep)
    feeds = random_feeds(model, 7)
    assert_outputs_close(ort_run(kept, feeds), ort_run(model, feeds))


def test_skip_rules_by_label():
    model = text_model("mlp")
    out = onnx_opt.optimize(model, skip_rules=["fusion"])
    ops = op_histogram(out)
    assert ops["Gemm"] == 0 and ops["MatMul"] == 2
    assert node_count(out) < node_count(model)


def test_outputs_keeps_only_the_named_outputs():
    model = text_model("control_flow")
    out = onnx_opt.optimize(model, outputs=["loop_out"])
    assert [o.name for o in out.graph.output] == ["loop_out"]
    ops = op_histogram(out)
    assert ops["If"] == 0 and ops["Loop"] == 1
    feeds = random_feeds(model, 8)
    got = ort_run(out, feeds)
    assert list(got) == ["loop_out"]
    assert_outputs_close(got, ort_run(model, feeds), names=["loop_out"])

    two = parse(
        '<ir_version: 8, opset_import: ["" : 13]> g (float[2, 3] x) => (float[2, 3] y, float[2, 3] z) '
        "{ y = Relu(x)  z = Neg(x) }"
    )
    only_z = onnx_opt.optimize(two, outputs="z")
    assert [n.op_type for n in only_z.graph.node] == ["Neg"]


def test_target_opset_converts_as_well():
    model = text_model("mlp")
    out = onnx_opt.optimize(model, target_opset=13)
    assert default_opset(out) == 13
    feeds = random_feeds(model, 9)
    assert_outputs_close(ort_run(out, feeds), ort_run(model, feeds))


def test_pipelines():
    names = onnx_opt.pipelines()
    assert {"default", "fast", "aggressive", "convert"} <= set(names)
    model = text_model("conv_bn_block")
    feeds = random_feeds(model, 10)
    expected = ort_run(model, feeds)
    for name in ("fast", "aggressive"):
        out, rep = onnx_opt.optimize(model, pipeline=name, report=True)
        assert rep["pipeline"] == name
        assert node_count(out) <= node_count(model)
        assert_outputs_close(ort_run(out, feeds), expected)


def test_fold_false_keeps_constant_work():
    model = parse(
        '<ir_version: 8, opset_import: ["" : 13]> g (float[3] x) => (float[3] y) '
        "<float[3] a = {1.0, 2.0, 3.0}, float[3] b = {0.5, 0.25, 0.125}> "
        "{ c = Mul(a, b)  y = Add(x, c) }"
    )
    folded = onnx_opt.optimize(model)
    assert [n.op_type for n in folded.graph.node] == ["Add"]
    unfolded = onnx_opt.optimize(model, fold=False)
    assert op_histogram(unfolded)["Mul"] == 1
    feeds = {"x": np.array([1.0, -1.0, 0.5], dtype=np.float32)}
    assert_outputs_close(ort_run(unfolded, feeds), ort_run(model, feeds))
    assert_outputs_close(ort_run(folded, feeds), ort_run(model, feeds))


def test_builtin_rules_off_with_a_user_rule():
    model = parse(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2, 3] x) => (float[2, 3] y) '
        "{ t = Identity(x)  a = Neg(t)  y = Neg(a) }"
    )
    out = onnx_opt.optimize(
        model,
        builtin_rules=False,
        rules_text={"mine.rules": rules_text(("-(-x) == x", "my_neg_neg: Neg(Neg(x)) => x"))},
    )
    # identity_elim is built in: the Identity stays; the user rule removes both Negs.
    assert [n.op_type for n in out.graph.node] == ["Identity"]


def test_rules_file(tmp_path):
    rules = tmp_path / "mine.rules"
    rules.write_text(rules_text(("-(-x) == x", "my_neg_neg: Neg(Neg(x)) => x")))
    model = parse(
        '<ir_version: 8, opset_import: ["" : 17]> g (float[2, 3] x) => (float[2, 3] y) '
        "{ a = Neg(x)  y = Neg(a) }"
    )
    out, rep = onnx_opt.optimize(model, rules=rules, builtin_rules=False, report=True)
    assert [n.op_type for n in out.graph.node] == ["Identity"]
    assert _firings(rep).get("my_neg_neg", 0) >= 1


def test_unsorted_nodes_are_handled_alike_with_and_without_output(tmp_path):
    # Nodes out of topological order: `onnx-opt MODEL -o OUT` (and optimize(path, output))
    # sorts them with a warning; the other forms of the same call must do the same, not fail
    # the checker.
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Relu", ["t"], ["y"], name="second"),
        helper.make_node("Neg", ["x"], ["t"], name="first"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "unsorted", [x], [y]), opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    )
    path = tmp_path / "unsorted.onnx"
    onnx.save(model, str(path))
    sorted_model = onnx.ModelProto.FromString(model.SerializeToString())
    sorted_model.graph.node[0].CopyFrom(model.graph.node[1])
    sorted_model.graph.node[1].CopyFrom(model.graph.node[0])
    onnx.checker.check_model(sorted_model)
    feeds = random_feeds(sorted_model, 0)
    expected = ort_run(sorted_model, feeds)

    rep = onnx_opt.optimize(path, tmp_path / "out.onnx")  # sorts
    assert rep["nodes_after"] == 2
    assert_outputs_close(ort_run(tmp_path / "out.onnx", feeds), expected)

    failures = {}
    for kind, given in {"path": path, "ModelProto": model, "bytes": model.SerializeToString()}.items():
        try:
            out = onnx_opt.optimize(given)
        except onnx_opt.ModelError as e:
            failures[kind] = e.reason
            continue
        out = out if isinstance(out, onnx.ModelProto) else onnx.ModelProto.FromString(out)
        assert_outputs_close(ort_run(out, feeds), expected)
    assert not failures, f"optimize(path, output) sorts the nodes, but without output= it fails: {failures}"
