#!/usr/bin/env python3
"""Writes the small hand-made models of tests/data (deterministic; needs onnx 1.23.2, numpy).

    python make_models.py            # writes float16_initializer.onnx, local_function.onnx

The expected printed text of each is an insta snapshot, tests/text/snapshots/text__expected__NAME.snap,
checked by the `expected` integration test (`INSTA_UPDATE=always` rewrites it). To check the
text against onnx, print the models with onnx-text's printer
(`cargo run -p onnx-text --example print_models -- DIR model.onnx`) and run
`tests/check_with_python.py DIR tests/data` on them.
"""

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent


def float16_initializer():
    """Initializers of many element types, raw and typed, plus doc strings and metadata.

    onnx's printer writes `...` for the int4 and complex64 tensors; onnx-text prints them.
    """
    w = numpy_helper.from_array(np.array([[1.5, -2.25, 0.0], [65504.0, 1e-4, -0.0]], dtype=np.float16), "W")
    w.doc_string = "float16 weights, stored as raw_data"
    b = helper.make_tensor("B", TensorProto.BFLOAT16, [3], [1.0, 2.0, -3.0])
    q = helper.make_tensor("Q", TensorProto.FLOAT8E4M3FN, [2], [1.0, -2.0])
    i4 = helper.make_tensor("I4", TensorProto.INT4, [3], [1, -2, 7])
    u16 = numpy_helper.from_array(np.array([0, 65535], dtype=np.uint16), "U16")
    flags = helper.make_tensor("Flags", TensorProto.BOOL, [2], [True, False])
    c = helper.make_tensor("C", TensorProto.COMPLEX64, [1], [complex(1.0, -0.5)])
    d = numpy_helper.from_array(np.array([0.1, float("inf"), float("nan")], dtype=np.float64), "D")
    s = helper.make_tensor("S", TensorProto.STRING, [2], [b"a \"quoted\" word", b"back\\slash"])
    big = helper.make_tensor("Big", TensorProto.UINT64, [1], [2**64 - 1])
    nodes = [
        helper.make_node("Add", ["X", "W"], ["Sum"], name="add", doc_string="adds the float16 weights"),
        helper.make_node("Cast", ["Sum"], ["Y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "float16_initializer",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT16, ["batch", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 3])],
        [w, b, q, i4, u16, flags, c, d, s, big],
        doc_string="a graph with a doc string",
        value_info=[helper.make_tensor_value_info("Sum", TensorProto.FLOAT16, ["batch", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="onnx-text tests")
    model.ir_version = 10
    helper.set_model_props(model, {"purpose": "printer test", "author": "onnx-opt"})
    return model


def local_function():
    """A model-local function with a defaulted attribute, a reference attribute and value infos."""
    fn = helper.make_function(
        "local",
        "ScaledRelu",
        ["X"],
        ["Y"],
        [
            helper.make_node("Constant", [], ["Alpha"], value_float=0.0),
            helper.make_node("Relu", ["X"], ["R"]),
            helper.make_node("Mul", ["R", "Alpha"], ["Y"]),
        ],
        [helper.make_opsetid("", 21)],
        attributes=[],
        doc_string="relu, then scale by alpha",
    )
    # The Constant takes its value from the function's `alpha` attribute.
    ref = onnx.AttributeProto()
    ref.name = "value_float"
    ref.type = onnx.AttributeProto.FLOAT
    ref.ref_attr_name = "alpha"
    del fn.node[0].attribute[:]
    fn.node[0].attribute.append(ref)
    fn.attribute_proto.append(helper.make_attribute("alpha", 1.0))
    fn.value_info.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, None))
    graph = helper.make_graph(
        [
            helper.make_node("ScaledRelu", ["X"], ["Y"], domain="local", alpha=2.0),
            helper.make_node("ScaledRelu", ["Y"], ["Z"], domain="local"),
        ],
        "local_function",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("local", 1)],
        functions=[fn],
        producer_name="onnx-text tests",
    )
    model.ir_version = 10
    return model


def main():
    for name, make in [("float16_initializer", float16_initializer), ("local_function", local_function)]:
        model = make()
        onnx.checker.check_model(model)
        (HERE / f"{name}.onnx").write_bytes(model.SerializeToString())
        print(f"wrote {name}.onnx")


if __name__ == "__main__":
    main()
