"""Helpers of the onnx_opt test suite (imported by the tests as ``helpers``).

Every expected value is computed independently of onnx-opt: model outputs by onnxruntime (graph
optimizations off) or taken from a model's stored test data set, node counts and op histograms
from the ``onnx.ModelProto`` itself.

Environment:
    ONNX_OPT_SHARED: the ``shared/`` directory with the development models (default: the
        repository's ``../shared``).
    ONNX_OPT_REQUIRE_SHARED=1: a missing development model fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import pathlib
from collections import Counter
from typing import Any, Dict, Iterable, Mapping, Optional, Union

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

REPO = pathlib.Path(__file__).resolve().parents[2]

#: Tolerances of every output comparison.
RTOL = 1e-4
ATOL = 1e-5

#: Small, valid text models shipped in the repository (all parse with onnx.parser, pass the
#: full checker and run in onnxruntime; tests/pipelines/models/README.md).
TEXT_MODELS = {
    "mlp": REPO / "examples/models/mlp.onnxtxt",
    "negations": REPO / "examples/models/negations.onnxtxt",
    "conv_bn_block": REPO / "tests/pipelines/models/conv_bn_block.onnxtxt",
    "shape_cleanup": REPO / "tests/pipelines/models/shape_cleanup.onnxtxt",
    "dynamic_transformer": REPO / "tests/pipelines/models/dynamic_transformer.onnxtxt",
    "transformer_block": REPO / "tests/pipelines/models/transformer_block.onnxtxt",
    "control_flow": REPO / "tests/pipelines/models/control_flow.onnxtxt",
    "if_constant_condition": REPO / "tests/pipelines/models/if_constant_condition.onnxtxt",
    "local_function": REPO / "tests/pipelines/models/local_function.onnxtxt",
    "qdq_block": REPO / "tests/pipelines/models/qdq_block.onnxtxt",
    "shared_conv_bn": REPO / "tests/pipelines/models/shared_conv_bn.onnxtxt",
}

#: Values of symbolic dims in random inputs.
DIMS = {"batch": 2, "seq": 3}

#: A small development model (dynamic batch) and the one with int64 inputs and two outputs.
DEV_CNN = "squeezenet1_0-opset13"
DEV_BERT = "bert-tiny-opset17"

#: The development models optimized in the tests (each about a second at most on 2 cores).
DEV_MODELS = [
    "squeezenet1_0-opset13",
    "mobilenet_v2-opset13",
    "mobilenet_v3_small-opset17",
    "light_squeezenet",
    "bert-tiny-opset13",
    "bert-tiny-opset17",
]


def shared_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("ONNX_OPT_SHARED", str(REPO.parent / "shared")))


def dev_model_dir(name: str) -> pathlib.Path:
    """The directory of development model ``name`` (model.onnx, test_data_set_0/); fails
    (ONNX_OPT_REQUIRE_SHARED=1) or skips when it is absent."""
    d = shared_dir() / "models" / name
    if not (d / "model.onnx").is_file() or not (d / "test_data_set_0").is_dir():
        msg = (
            f"development model {name} not found at {d} (model.onnx and test_data_set_0/): "
            f"set ONNX_OPT_SHARED to the shared/ directory (default {REPO.parent / 'shared'}); "
            "ONNX_OPT_REQUIRE_SHARED=1 makes a missing model a failure"
        )
        if os.environ.get("ONNX_OPT_REQUIRE_SHARED") == "1":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return d


def text_model(name: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(TEXT_MODELS[name].read_text())


def parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def _read_tensor(path: pathlib.Path) -> onnx.TensorProto:
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t


def graph_input_names(model: onnx.ModelProto) -> list:
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def load_data_set(model_dir: pathlib.Path):
    """``(inputs, outputs)`` of ``test_data_set_0``: dicts of name to array."""
    model = onnx.load(str(model_dir / "model.onnx"), load_external_data=False)
    in_names = graph_input_names(model)
    out_names = [o.name for o in model.graph.output]
    ds = model_dir / "test_data_set_0"

    def read(prefix: str, names: list) -> Dict[str, np.ndarray]:
        files = sorted(ds.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        out = {}
        for k, f in enumerate(files):
            t = _read_tensor(f)
            out[t.name or names[k]] = numpy_helper.to_array(t)
        return out

    return read("input", in_names), read("output", out_names)


def _session(model: Union[onnx.ModelProto, bytes, str, os.PathLike]) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    elif isinstance(model, os.PathLike):
        model = os.fspath(model)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_run(model: Union[onnx.ModelProto, bytes, str, os.PathLike], feeds: Mapping[str, Any]) -> Dict[str, Any]:
    """onnxruntime's outputs (graph optimizations off) as a dict of output name to value."""
    s = _session(model)
    names = [o.name for o in s.get_outputs()]
    wanted = {i.name for i in s.get_inputs()}
    return dict(zip(names, s.run(names, {k: v for k, v in feeds.items() if k in wanted})))


_NP = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.BOOL: np.bool_,
}


def random_feeds(model: onnx.ModelProto, seed: int, dims: Optional[Mapping[str, int]] = None) -> Dict[str, np.ndarray]:
    """Seeded random inputs for ``model``'s graph inputs (symbolic dims from ``dims``, else
    ``DIMS``, else 2; integers in [0, 4))."""
    dims = {**DIMS, **(dims or {})}
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param, 2) for d in tt.shape.dim]
        dtype = _NP[tt.elem_type]
        if dtype is np.bool_:
            arr = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, 4, size=shape).astype(dtype)
        else:
            arr = rng.standard_normal(shape).astype(dtype)
        feeds[inp.name] = np.asarray(arr, dtype=dtype)
    return feeds


def assert_outputs_close(actual: Mapping[str, Any], expected: Mapping[str, Any], names: Optional[Iterable[str]] = None) -> None:
    names = list(expected) if names is None else list(names)
    assert names, "nothing to compare"
    for name in names:
        assert name in actual, f"output {name!r} missing: {sorted(actual)}"
        a, e = actual[name], expected[name]
        if isinstance(e, list):
            assert isinstance(a, list) and len(a) == len(e), f"{name}: {type(a)} vs a list of {len(e)}"
            for x, y in zip(a, e):
                np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=RTOL, atol=ATOL, err_msg=name)
            continue
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{name}: shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"{name}: dtype {a.dtype} != {e.dtype}"
        if a.dtype == np.float16:
            a, e = a.astype(np.float32), e.astype(np.float32)
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg=name)


def node_count(model: onnx.ModelProto) -> int:
    return len(model.graph.node)


def op_histogram(model: onnx.ModelProto) -> Counter:
    """Op types of every node, subgraphs included (not function bodies)."""
    counts: Counter = Counter()

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            counts[node.op_type] += 1
            for attr in node.attribute:
                if attr.HasField("g"):
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)

    walk(model.graph)
    return counts


def default_opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    assert len(versions) == 1, f"default-domain opset_import: {versions}"
    return versions[0]


#: A model with a symbolic batch and one Identity before a Relu (identity_elim fires once).
IDENTITY_RELU = """
<ir_version: 8, opset_import: ["" : 17]>
identity_relu (float[N, 3] x) => (float[N, 3] y) {
    t = Identity(x)
    y = Relu(t)
}
"""

#: A model whose output is one Neg: a wrong rule ``Neg(x) => x`` changes it.
ONE_NEG = """
<ir_version: 8, opset_import: ["" : 17]>
one_neg (float[2, 3] x) => (float[2, 3] y) {
    y = Neg(x)
}
"""


def rules_text(*rules: tuple) -> str:
    """The text of a rule file: the header the rule language requires, then each rule under
    its identity comment; ``rules`` are ``(identity, "name: LEFT => RIGHT")`` pairs."""
    return "# Rules of the onnx_opt Python tests.\n" + "".join(
        f"\n# {identity}\nrule {rule}\n" for identity, rule in rules
    )


#: A correct rule and a wrong one.
NEG_NEG = ("-(-x) == x", "neg_neg_again: Neg(Neg(x)) => x")
BAD_NEG = ("-x == x (wrong)", "bad: Neg(x) => x")


def deep_mlp(hidden: int = 256, layers: int = 4, seed: int = 0) -> onnx.ModelProto:
    """A model slow enough to check that threads run meanwhile: ``x: float[N, hidden]`` through
    ``layers`` of MatMul, Add, Identity, Relu (the Identities go, MatMul+Add stays: 3-D
    rules aside, a 2-D MatMul+Add becomes Gemm). The check's random inputs take ``dims={"N": ...}``."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((hidden, hidden)) / 16).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(hidden) / 16).astype(np.float32), f"b{i}"))
        out = "y" if i == layers - 1 else f"r{i}"
        nodes += [
            helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Identity", [f"a{i}"], [f"i{i}"]),
            helper.make_node("Relu", [f"i{i}"], [out]),
        ]
        prev = out
    graph = helper.make_graph(
        nodes,
        "deep_mlp",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", hidden])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", hidden])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
