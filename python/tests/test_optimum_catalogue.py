"""Optimum's other tasks (tests/models/optimum_catalogue: ViT, CLIP, SigLIP, DINOv2, ConvNeXt,
Whisper, T5 and Marian with their decoders with past and merged, the legacy merged Llama
decoder; optimum-onnx 0.1.0, scripts/export_optimum_catalogue.py) optimized with the default
settings (the check on, and running its three random trials on each) run in the pinned onnxruntime and give the original's outputs on every
stored test data set (the merged decoders' second set takes the other branch of their If);
none grows, If branches counted.
"""

import onnx
import pytest
from onnx import numpy_helper

import onnx_opt
from helpers import REPO, assert_outputs_close, ort_run

CATALOGUE = REPO / "tests/models/optimum_catalogue"
MODELS = sorted(d for d in CATALOGUE.iterdir() if (d / "model.onnx").is_file())


def _nodes(graph: onnx.GraphProto) -> int:
    n = 0
    for node in graph.node:
        n += 1
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                n += _nodes(a.g)
    return n


def _data_sets(folder, model: onnx.ModelProto):
    inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    outputs = [o.name for o in model.graph.output]
    for ds in sorted(folder.glob("test_data_set_*")):
        def read(prefix, names):
            files = sorted(ds.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
            out = {}
            for k, f in enumerate(files):
                t = onnx.TensorProto()
                t.ParseFromString(f.read_bytes())
                out[t.name or names[k]] = numpy_helper.to_array(t)
            return out

        yield ds.name, read("input", inputs), read("output", outputs)


def test_the_catalogue_is_there():
    assert len(MODELS) >= 18, MODELS


@pytest.mark.parametrize("folder", MODELS, ids=[d.name for d in MODELS])
def test_catalogue_export_optimized_runs_in_onnxruntime(folder):
    original = onnx.load(str(folder / "model.onnx"))
    optimized, rep = onnx_opt.optimize(original, report=True)
    # The check ran its three random trials (every dim searched; the original runs on them).
    assert rep["check_skipped"] is None, rep["check_skipped"]
    assert rep["check_random_skipped"] is None, rep["check_random_skipped"]
    assert rep["check_trials"] == 3, rep
    onnx.checker.check_model(optimized)
    assert _nodes(optimized.graph) <= _nodes(original.graph)
    sets = list(_data_sets(folder, original))
    assert sets
    for name, feeds, expected in sets:
        actual = ort_run(optimized, feeds)
        assert set(actual) == set(expected), name
        assert_outputs_close(actual, expected)
