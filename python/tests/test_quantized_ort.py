"""Block-wise int4 weights in the QDQ form become onnxruntime's MatMulNBits under
`target="onnxruntime"`.

The models are the committed Optimum decoder exports (tests/models/optimum) quantized here by
onnxruntime's own `MatMulNBitsQuantizer` (the pinned onnxruntime) in its QDQ form: int4 weights
without zero points (`is_symmetric`), uint4 weights with uint4 zero points otherwise, each
`DequantizeLinear` (block-wise along K) feeding a MatMul. The quantizer's other form writes
MatMulNBits itself; the lowered model must hold the same packed weights and give onnxruntime's
outputs of the QDQ model (graph optimizations off: at ORT_ENABLE_ALL onnxruntime fuses the QDQ
form into a MatMulNBits with int8 compute, which rounds differently). A model at IR 14 (what the
pinned onnx's `helper.make_model` writes), which the pinned onnxruntime does not load, is
lowered to IR 13.
"""

import numpy as np
import onnx
import pytest
from onnxruntime.quantization import QuantFormat
from onnxruntime.quantization.matmul_nbits_quantizer import (
    DefaultWeightOnlyQuantConfig,
    MatMulNBitsQuantizer,
)

import onnx_opt
from helpers import REPO, assert_outputs_close, op_histogram, ort_run
from test_attention_ort import ORT_CASES, _feeds

OPTIMUM = REPO / "tests/models/optimum"
EXPORTS = [OPTIMUM / name for name in ("llama_optimum", "qwen3_optimum")]


def _quantize(model: onnx.ModelProto, symmetric: bool, fmt: QuantFormat) -> onnx.ModelProto:
    config = DefaultWeightOnlyQuantConfig(block_size=16, is_symmetric=symmetric, quant_format=fmt)
    quantizer = MatMulNBitsQuantizer(onnx.ModelProto.FromString(model.SerializeToString()), algo_config=config)
    quantizer.process()
    return quantizer.model.model


def _at_newest_ir(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model at the IR version `onnx.helper.make_model` writes (the pinned onnx's
    `IR_VERSION`, 14), which the pinned onnxruntime refuses to load."""
    out = onnx.ModelProto.FromString(model.SerializeToString())
    out.ir_version = onnx.IR_VERSION
    return out


@pytest.mark.parametrize("symmetric", [True, False], ids=["int4", "uint4_zero_points"])
@pytest.mark.parametrize("folder", EXPORTS, ids=[d.name for d in EXPORTS])
def test_qdq_int4_becomes_matmul_nbits(folder, symmetric):
    original = onnx.load(str(folder / "model.onnx"))
    qdq = _quantize(original, symmetric, QuantFormat.QDQ)
    quantized = op_histogram(qdq)["DequantizeLinear"]
    assert quantized > 0
    # Each DequantizeLinear + MatMul as a MatMulNBits (the stacking pass left out), its weights
    # packed as the quantizer's own MatMulNBits form packs them.
    separate = onnx_opt.optimize(qdq, target="onnxruntime", unsafe_rules=True,
                                skip_rules=["merge-sibling-matmul-nbits"])
    ops = op_histogram(separate)
    assert (ops["MatMulNBits"], ops["DequantizeLinear"]) == (quantized, 0), ops
    reference = _quantize(original, symmetric, QuantFormat.QOperator)
    packed = {t.name: onnx.numpy_helper.to_array(t) for t in reference.graph.initializer}
    ours = [onnx.numpy_helper.to_array(t) for t in separate.graph.initializer]
    for node in reference.graph.node:
        if node.op_type != "MatMulNBits":
            continue
        for name in node.input[1:]:
            want = packed[name].reshape(-1)
            assert any(o.size == want.size and np.array_equal(o.reshape(-1), want) for o in ours), name
    # The whole pipeline: each layer's query, key and value projections stacked into one
    # MatMulNBits and a Split, as the builder packs them.
    # From a model at IR 14, written at an IR version onnxruntime loads.
    lowered = onnx_opt.optimize(_at_newest_ir(qdq), target="onnxruntime", unsafe_rules=True)
    onnx.checker.check_model(lowered)
    assert onnx.IR_VERSION > 13 and lowered.ir_version == 13, (onnx.IR_VERSION, lowered.ir_version)
    ops = op_histogram(lowered)
    layers = 2
    assert (ops["MatMulNBits"], ops["DequantizeLinear"]) == (quantized - 2 * layers, 0), ops
    # Optimum's sdpa mask may hold -inf: the standard Attention (3-D) stays, as onnxruntime's
    # kernel computes it.
    assert (ops["Attention"], ops["GroupQueryAttention"]) == (layers, 0), ops
    for b, s, p, pad in ORT_CASES:
        feeds = _feeds(original, b, s, p, pad)
        assert_outputs_close(ort_run(lowered, feeds), ort_run(qdq, feeds))
