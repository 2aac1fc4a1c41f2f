#!/usr/bin/env python3
"""Writes the conformance cases of onnxruntime's contrib operators for onnx-ref.

Each case is one node (or a few) over concrete inputs; onnxruntime (pinned in
scripts/requirements-peers.txt, graph optimizations off, one thread) computes the outputs. A case is
written in the ONNX backend suite's layout under crates/onnx-ref/tests/data/contrib/<family>/<case>/:
model.onnx (graph outputs typed with the shapes onnxruntime produced) and
test_data_set_0/{input_i,output_i}.pb.

The cases live by family in scripts/contrib_cases/<family>.py, each a function `cases()` that
yields `Case`s (see scripts/contrib_cases/__init__.py).

usage: target/venv-peers/bin/python scripts/gen_contrib_tests.py [FAMILY...]
       (scripts/setup_venv.sh makes the venv; no FAMILY: all of them)
"""
import importlib
import pathlib
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "crates/onnx-ref/tests/data/contrib"
FAMILIES = ["norm", "attention", "quant"]

sys.path.insert(0, str(ROOT / "scripts"))
from contrib_cases import Case  # noqa: E402


def build_model(case: Case, output_types=None) -> onnx.ModelProto:
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
        for n, a in case.inputs.items()
    ]
    if output_types is None:
        outputs = [helper.make_tensor_value_info(n, t, None) for n, t in case.outputs]
    else:
        outputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
            for (n, _), a in zip(case.outputs, output_types)
        ]
    inits = [numpy_helper.from_array(a, n) for n, a in case.initializers.items()]
    graph = helper.make_graph(case.nodes, case.name, inputs, outputs, inits)
    opsets = [helper.make_opsetid("", case.opset), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="gen_contrib_tests")
    model.ir_version = case.ir_version
    return model


def run_ort(model: onnx.ModelProto, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def write_case(family: str, case: Case) -> str:
    feeds = dict(case.inputs)
    try:
        outs = run_ort(build_model(case), feeds)
    except Exception as e:  # onnxruntime refuses the case: report it, write nothing
        return f"SKIP {family}/{case.name}: onnxruntime: {str(e).splitlines()[0][:200]}"
    model = build_model(case, outs)
    d = OUT / family / case.name
    if d.exists():
        shutil.rmtree(d)
    (d / "test_data_set_0").mkdir(parents=True)
    onnx.save(model, d / "model.onnx")
    for i, (n, a) in enumerate(case.inputs.items()):
        (d / "test_data_set_0" / f"input_{i}.pb").write_bytes(
            numpy_helper.from_array(a, n).SerializeToString())
    for i, ((n, _), a) in enumerate(zip(case.outputs, outs)):
        (d / "test_data_set_0" / f"output_{i}.pb").write_bytes(
            numpy_helper.from_array(np.asarray(a), n).SerializeToString())
    return f"ok   {family}/{case.name}"


def main(argv):
    families = argv or FAMILIES
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
    for family in families:
        module = importlib.import_module(f"contrib_cases.{family}")
        fam_dir = OUT / family
        names = set()
        for case in module.cases():
            if case.name in names:
                raise SystemExit(f"duplicate case name {family}/{case.name}")
            names.add(case.name)
            print(write_case(family, case))
        # Cases no longer generated are removed.
        if fam_dir.exists():
            for d in fam_dir.iterdir():
                if d.is_dir() and d.name not in names:
                    shutil.rmtree(d)


if __name__ == "__main__":
    main(sys.argv[1:])
