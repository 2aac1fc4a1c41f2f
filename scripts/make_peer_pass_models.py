#!/usr/bin/env python3
"""Writes tests/models/peers: small models shaped like the peer optimizers' own pass tests, so that
onnx-opt can be tested on them and compared with the peers (onnxoptimizer, onnxsim, onnxslim,
onnxscript's rewriter) on the same graphs.

Every model is OUT/<name>/model.onnx (one file, no external data) plus
OUT/<name>/test_data_set_0/{input_N,output_N}.pb: serialized onnx TensorProtos whose `.name` is
the graph input / output name, N in graph order (the ONNX backend test data layout, as
`write_case` in scripts/export_hf_decoders.py writes it). The stored outputs are onnxruntime's
on the stored inputs: CPU provider, graph optimizations off (ORT_DISABLE_ALL), 1 thread.

Each model is built with onnx.helper, IR version 8, one default-domain opset (13, 17 or 18, given
per model below), and passes `onnx.checker.check_model(model, full_check=True)` before it is
written. Every model has real (non-constant) graph inputs that the pattern depends on; weights and
constants are random or chosen non-trivial (never all 0 or all 1). Inputs have concrete shapes,
except where a symbolic dim is the point (cast_constant_of_shape, scatter_nd_redundant: the dim
named "N"; the test data then uses a concrete size).

The models and the peer tests they mirror (peer repositories: onnx/optimizer
onnxoptimizer/test/optimizer_test.py; microsoft/onnxscript onnxscript/rewriter/rules/**/_*_test.py;
inisis/OnnxSlim tests/*.py):

  pad_conv_padded              onnxoptimizer test_fuse_pad_into_conv_existing_conv_pad and
                               test_fuse_pad_into_conv_with_optional_value; onnxslim
                               test_padconv_pattern (opset 13)
  pad_conv_1d                  onnxoptimizer test_fuse_pad_into_conv_1d (opset 13)
  pad_conv_no_value            onnxoptimizer test_fuse_pad_into_conv_no_optional_value (opset 13)
  pad_average_pool             onnxoptimizer test_fuse_pad_into_avgpool_existing_avgpool_pad
                               (opset 13)
  pad_max_pool_1d              onnxoptimizer test_fuse_pad_into_maxpool_1d (opset 13)
  pad_conv_integer             onnxscript FuseConvIntegerPadTest.test_fuse_pad_into_conv_integer
                               (opset 13)
  pad_conv_integer_zero_point  the same rule with x_zero_point given (opset 13)
  concat_concat                onnxoptimizer test_fuse_concats (opset 13)
  transpose_output             onnxoptimizer test_nop_transpose_graph_output,
                               test_fuse_transpose_default_graph_output; onnxscript
                               BasicRulesTest.test_basic_optimization_rules_transpose_transpose
                               (opset 13)
  split_concat                 onnxslim test_split_concat (tests/test_coverage.py) (opset 18)
  min_max_chain                onnxscript TestFuseSuccessiveMinOrMax, TestMinMaxToClip,
                               TestMaxMinToClip (_min_max_to_clip_test.py) (opset 13)
  clip_chain                   onnxscript FuseSuccessiveClipTest, FuseSuccessiveReluClipTest
                               (_fuse_relus_clips_test.py) (opset 13)
  cast_constant_of_shape       onnxscript CastConstantOfShapeTest (opset 17)
  layer_norm_axis_negative     onnxscript LayerNormFusionTest.test_layer_norm_fusion_with_bias
  layer_norm_axis_positive       (rules/fusion/_layer_norm_test.py), in four spellings of the
  layer_norm_add_neg             decomposed LayerNorm (opset 18)
  layer_norm_mul_square
  scatter_nd_redundant         onnxscript RedundantScatterNdTest.test_redundant_scatter_nd_dynamic_
                               indices and ..._static_indices (opset 18)
  expand_binary                onnxscript RemoveExpandBeforeBinaryOpTest
                               (_remove_expand_before_binary_op_test.py); onnxoptimizer
                               test_eliminate_nop_expand (opset 18)
  partial_rotary               onnxscript _rotary_embedding_models.partial_rotary_test_case (used by
                               the rotary embedding fusion tests), smaller (opset 18)

Run (from the repository root; the peers venv: onnx 1.23.2, onnxruntime 1.31.1, numpy 2.4.6):

    target/venv-peers/bin/python scripts/make_peer_pass_models.py [--out DIR] [--only NAME ...]
    target/venv-peers/bin/python scripts/make_peer_pass_models.py --peers   # no writing: check
        the written models (onnxruntime reproduces the stored outputs), run onnxsim, onnxslim and
        onnxoptimizer on each, print a Markdown table of node counts

Everything is seeded (one numpy Generator per model, seeded from the model's name), so a re-run
with the same versions writes the same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "models" / "peers"
IR_VERSION = 8
INT64_MAX = 9223372036854775807

F = TensorProto.FLOAT
F16 = TensorProto.FLOAT16
I32 = TensorProto.INT32
I64 = TensorProto.INT64
U8 = TensorProto.UINT8


# ----------------------------------------------------------------------------------------------
# helpers


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def vi(name, elem_type, shape):
    return helper.make_tensor_value_info(name, elem_type, shape)


def node(op, inputs, outputs, name=None, **attrs):
    return helper.make_node(op, inputs, outputs, name=name or f"{op}_{outputs[0]}", **attrs)


def model(name, nodes, inputs, outputs, inits, opset):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        ir_version=IR_VERSION,
        producer_name="onnx-opt scripts/make_peer_pass_models.py",
    )
    onnx.checker.check_model(m, full_check=True)
    return m


def session(m: onnx.ModelProto):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def write_case(out: Path, name: str, m: onnx.ModelProto, feeds: list[np.ndarray]):
    """Writes OUT/NAME/model.onnx and test_data_set_0 (onnxruntime's outputs on FEEDS)."""
    d = out / name
    ds = d / "test_data_set_0"
    ds.mkdir(parents=True, exist_ok=True)
    for old in ds.glob("*.pb"):
        old.unlink()
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, str(d / "model.onnx"))
    names = [i.name for i in m.graph.input]
    assert len(names) == len(feeds), name
    feed = dict(zip(names, feeds))
    outs = session(m).run(None, feed)
    for i, k in enumerate(names):
        (ds / f"input_{i}.pb").write_bytes(numpy_helper.from_array(feed[k], k).SerializeToString())
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        (ds / f"output_{i}.pb").write_bytes(numpy_helper.from_array(v, o.name).SerializeToString())
    print(f"{name}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, "
          f"{(d / 'model.onnx').stat().st_size} bytes")


# ----------------------------------------------------------------------------------------------
# the models: each returns (model, [input arrays in graph-input order])


def pad_conv_padded(name):
    # onnxoptimizer optimizer_test.py: test_fuse_pad_into_conv_existing_conv_pad (Conv already
    # has pads [1, 1, 0, 0]) and test_fuse_pad_into_conv_with_optional_value (a zero
    # constant_value input); onnxslim tests/test_fusion_patterns.py: test_padconv_pattern.
    r = rng_for(name)
    nodes = [
        node("Pad", ["x", "pads", "pad_value"], ["padded"], mode="constant"),
        node("Conv", ["padded", "W", "B"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 0, 0]),
    ]
    inits = [
        init("pads", np.array([0, 0, 1, 2, 0, 0, 1, 0], np.int64)),
        init("pad_value", np.array(0.0, np.float32)),
        init("W", normal(r, (4, 3, 3, 3), 0.3)),
        init("B", normal(r, (4,), 0.1)),
    ]
    m = model(name, nodes, [vi("x", F, [1, 3, 8, 8])], [vi("y", F, [1, 4, 9, 9])], inits, 13)
    return m, [normal(r, (1, 3, 8, 8))]


def pad_conv_1d(name):
    # onnxoptimizer optimizer_test.py: test_fuse_pad_into_conv_1d (NCW, Pad pads [0, 0, 1, 0, 0,
    # 1]), here with a zero constant_value input and a Conv that has pads of its own.
    r = rng_for(name)
    nodes = [
        node("Pad", ["x", "pads", "pad_value"], ["padded"], mode="constant"),
        node("Conv", ["padded", "W", "B"], ["y"], kernel_shape=[3], pads=[1, 2]),
    ]
    inits = [
        init("pads", np.array([0, 0, 1, 0, 0, 1], np.int64)),
        init("pad_value", np.array(0.0, np.float32)),
        init("W", normal(r, (8, 5, 3), 0.3)),
        init("B", normal(r, (8,), 0.1)),
    ]
    m = model(name, nodes, [vi("x", F, [1, 5, 30])], [vi("y", F, [1, 8, 33])], inits, 13)
    return m, [normal(r, (1, 5, 30))]


def pad_conv_no_value(name):
    # onnxoptimizer optimizer_test.py: test_fuse_pad_into_conv_no_optional_value (Pad(data,
    # pads), no constant_value input, into a Conv without pads).
    r = rng_for(name)
    nodes = [
        node("Pad", ["x", "pads"], ["padded"], mode="constant"),
        node("Conv", ["padded", "W"], ["y"], kernel_shape=[3, 3]),
    ]
    inits = [
        init("pads", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64)),
        init("W", normal(r, (8, 5, 3, 3), 0.3)),
    ]
    m = model(name, nodes, [vi("x", F, [1, 5, 6, 6])], [vi("y", F, [1, 8, 5, 5])], inits, 13)
    return m, [normal(r, (1, 5, 6, 6))]


def pad_average_pool(name):
    # onnxoptimizer optimizer_test.py: test_fuse_pad_into_avgpool_existing_avgpool_pad
    # (AveragePool count_include_pad=1, kernel 3x3, pads [1, 1, 0, 0]; Pad of zeros, no value).
    r = rng_for(name)
    nodes = [
        node("Pad", ["x", "pads"], ["padded"], mode="constant"),
        node("AveragePool", ["padded"], ["y"], count_include_pad=1, kernel_shape=[3, 3],
             pads=[1, 1, 0, 0]),
    ]
    inits = [init("pads", np.array([0, 0, 0, 0, 0, 0, 1, 1], np.int64))]
    m = model(name, nodes, [vi("x", F, [1, 5, 6, 6])], [vi("y", F, [1, 5, 6, 6])], inits, 13)
    return m, [normal(r, (1, 5, 6, 6))]


def pad_max_pool_1d(name):
    # onnxoptimizer optimizer_test.py: test_fuse_pad_into_maxpool_1d (Pad pads [0, 0, 1, 0, 0, 1]
    # into MaxPool kernel [3]). MaxPool pads with -inf, a zero Pad is the same only on
    # non-negative data: so x goes through Relu first (then fusing is valid).
    r = rng_for(name)
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("Pad", ["r", "pads", "pad_value"], ["padded"], mode="constant"),
        node("MaxPool", ["padded"], ["y"], kernel_shape=[3]),
    ]
    inits = [
        init("pads", np.array([0, 0, 1, 0, 0, 1], np.int64)),
        init("pad_value", np.array(0.0, np.float32)),
    ]
    m = model(name, nodes, [vi("x", F, [1, 5, 12])], [vi("y", F, [1, 5, 12])], inits, 13)
    return m, [normal(r, (1, 5, 12))]


def pad_conv_integer(name):
    # onnxscript rules/common/_fuse_pad_into_conv_test.py:
    # FuseConvIntegerPadTest.test_fuse_pad_into_conv_integer, first case (Pad pads
    # [0, 0, 3, 2, 0, 0, 1, 4], no constant_value, ConvInteger pads [1, 1, 1, 1], uint8 W, no
    # zero points): uint8 x, int32 y.
    r = rng_for(name)
    nodes = [
        node("Pad", ["x", "pads"], ["padded"], mode="constant"),
        node("ConvInteger", ["padded", "W"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ]
    inits = [
        init("pads", np.array([0, 0, 3, 2, 0, 0, 1, 4], np.int64)),
        init("W", r.integers(0, 256, (3, 4, 3, 3)).astype(np.uint8)),
    ]
    m = model(name, nodes, [vi("x", U8, [1, 4, 7, 7])], [vi("y", I32, [1, 3, 11, 13])], inits, 13)
    return m, [r.integers(0, 256, (1, 4, 7, 7)).astype(np.uint8)]


def pad_conv_integer_zero_point(name):
    # onnxscript FuseConvIntegerPadTest (as pad_conv_integer) with x_zero_point and w_zero_point
    # given: ConvInteger pads with x_zero_point (onnxruntime does), so Pad's constant value here
    # equals the zero point (17, its own initializer): fusing is valid. With a zero pad value it
    # would not be.
    r = rng_for(name)
    nodes = [
        node("Pad", ["x", "pads", "pad_value"], ["padded"], mode="constant"),
        node("ConvInteger", ["padded", "W", "x_zero_point", "w_zero_point"], ["y"],
             kernel_shape=[3, 3]),
    ]
    inits = [
        init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)),
        init("pad_value", np.array(17, np.uint8)),
        init("W", r.integers(0, 256, (3, 4, 3, 3)).astype(np.uint8)),
        init("x_zero_point", np.array(17, np.uint8)),
        init("w_zero_point", np.array(131, np.uint8)),
    ]
    m = model(name, nodes, [vi("x", U8, [1, 4, 7, 7])], [vi("y", I32, [1, 3, 7, 7])], inits, 13)
    return m, [r.integers(0, 256, (1, 4, 7, 7)).astype(np.uint8)]


def concat_concat(name):
    # onnxoptimizer optimizer_test.py: test_fuse_concats (fuse_consecutive_concats), shapes
    # (2|4, 3, 4) on axis 0: Concat(a, Concat(b, c)) and Concat(Concat(a, b), c).
    r = rng_for(name)
    nodes = [
        node("Concat", ["b", "c"], ["bc"], axis=0),
        node("Concat", ["a", "bc"], ["y0"], axis=0),
        node("Concat", ["a", "b"], ["ab"], axis=0),
        node("Concat", ["ab", "c"], ["y1"], axis=0),
    ]
    inputs = [vi("a", F, [2, 3, 4]), vi("b", F, [4, 3, 4]), vi("c", F, [2, 3, 4])]
    outputs = [vi("y0", F, [8, 3, 4]), vi("y1", F, [8, 3, 4])]
    m = model(name, nodes, inputs, outputs, [], 13)
    return m, [normal(r, (2, 3, 4)), normal(r, (4, 3, 4)), normal(r, (2, 3, 4))]


def transpose_output(name):
    # onnxoptimizer optimizer_test.py: test_nop_transpose_graph_output (Add -> Transpose with an
    # identity perm -> graph output), test_fuse_transpose_default_graph_output (Add -> two
    # default-perm Transposes that cancel -> graph output); onnxscript _basic_rules_test.py:
    # test_basic_optimization_rules_transpose_transpose / _identity (perm pairs). y0 is a real
    # Transpose feeding a graph output.
    r = rng_for(name)
    nodes = [
        node("Add", ["x", "c"], ["a"]),
        node("Transpose", ["a"], ["y0"], perm=[2, 0, 1]),
        node("Transpose", ["a"], ["t1"]),
        node("Transpose", ["t1"], ["y1"]),
        node("Mul", ["x", "k"], ["m"]),
        node("Transpose", ["m"], ["t2"], perm=[1, 2, 0]),
        node("Transpose", ["t2"], ["y2"], perm=[2, 0, 1]),
        node("Sub", ["x", "c"], ["s"]),
        node("Transpose", ["s"], ["y3"], perm=[0, 1, 2]),
    ]
    inits = [init("c", normal(r, (4,), 0.5)), init("k", normal(r, (3, 1), 0.5) + 1.5)]
    outputs = [vi("y0", F, [4, 2, 3]), vi("y1", F, [2, 3, 4]), vi("y2", F, [2, 3, 4]),
               vi("y3", F, [2, 3, 4])]
    m = model(name, nodes, [vi("x", F, [2, 3, 4])], outputs, inits, 13)
    return m, [normal(r, (2, 3, 4))]


def split_concat(name):
    # onnxslim tests/test_coverage.py: test_split_concat (torch.split then torch.cat of all parts
    # in order on the same axis). Opset 18: one Split with a `split` input (2 outputs, unequal),
    # one with num_outputs=3 (equal parts).
    r = rng_for(name)
    nodes = [
        node("Split", ["x", "split"], ["s0", "s1"], axis=1),
        node("Concat", ["s0", "s1"], ["y0"], axis=1),
        node("Mul", ["x", "k"], ["m"]),
        node("Split", ["m"], ["t0", "t1", "t2"], axis=2, num_outputs=3),
        node("Concat", ["t0", "t1", "t2"], ["y1"], axis=2),
    ]
    inits = [init("split", np.array([2, 4], np.int64)), init("k", normal(r, (6,), 0.5) + 1.0)]
    outputs = [vi("y0", F, [2, 6, 6]), vi("y1", F, [2, 6, 6])]
    m = model(name, nodes, [vi("x", F, [2, 6, 6])], outputs, inits, 18)
    return m, [normal(r, (2, 6, 6))]


def min_max_chain(name):
    # onnxscript rules/common/_min_max_to_clip_test.py: TestFuseSuccessiveMinOrMax
    # (Min(Min(x, c1), c2), Max(Max(x, c1), c2) with constants; c1 of Min a vector, so only the
    # constants fold, no Clip), TestMinMaxToClip (Max(Min(x, hi), lo) -> Clip),
    # TestMaxMinToClip (Min(Max(x, lo), hi) -> Clip), scalar constants.
    r = rng_for(name)
    nodes = [
        node("Min", ["x", "min_c1"], ["a0"]),
        node("Min", ["a0", "min_c2"], ["y0"]),
        node("Max", ["x", "max_c1"], ["a1"]),
        node("Max", ["a1", "max_c2"], ["y1"]),
        node("Min", ["x", "hi0"], ["a2"]),
        node("Max", ["a2", "lo0"], ["y2"]),
        node("Max", ["x", "lo1"], ["a3"]),
        node("Min", ["a3", "hi1"], ["y3"]),
    ]
    inits = [
        init("min_c1", normal(r, (8,), 0.5) + 0.5),
        init("min_c2", np.array(0.75, np.float32)),
        init("max_c1", np.array([-0.25], np.float32)),
        init("max_c2", np.array([-0.6], np.float32)),
        init("hi0", np.array(1.0, np.float32)),
        init("lo0", np.array(-0.5, np.float32)),
        init("lo1", np.array(-1.0, np.float32)),
        init("hi1", np.array(0.5, np.float32)),
    ]
    outputs = [vi(f"y{i}", F, [2, 3, 8]) for i in range(4)]
    m = model(name, nodes, [vi("x", F, [2, 3, 8])], outputs, inits, 13)
    return m, [normal(r, (2, 3, 8))]


def clip_chain(name):
    # onnxscript rules/common/_fuse_relus_clips_test.py: FuseSuccessiveClipTest
    # (test_successful_fuse_successive_clips: Clip(Clip(x, a, b), c, d), ranges overlapping;
    # test_successful_fuse_successive_clips_no_min: Clip(Clip(x,, m1),, m2)),
    # FuseSuccessiveReluClipTest (Relu(Clip(x, lo, hi)) with lo < 0; Clip(Relu(x), lo, hi)).
    r = rng_for(name)
    nodes = [
        node("Clip", ["x", "min1", "max1"], ["c0"]),
        node("Clip", ["c0", "min2", "max2"], ["y0"]),
        node("Clip", ["x", "min3", "max3"], ["c1"]),
        node("Relu", ["c1"], ["y1"]),
        node("Relu", ["x"], ["c2"]),
        node("Clip", ["c2", "min4", "max4"], ["y2"]),
        node("Clip", ["x", "", "max5"], ["c3"]),
        node("Clip", ["c3", "", "max6"], ["y3"]),
    ]
    inits = [
        init("min1", np.array(-2.0, np.float32)),
        init("max1", np.array(1.0, np.float32)),
        init("min2", np.array(-1.0, np.float32)),
        init("max2", np.array(1.5, np.float32)),
        init("min3", np.array(-0.5, np.float32)),
        init("max3", np.array(1.25, np.float32)),
        init("min4", np.array(0.25, np.float32)),
        init("max4", np.array(0.8, np.float32)),
        init("max5", np.array(1.0, np.float32)),
        init("max6", np.array(0.7, np.float32)),
    ]
    outputs = [vi(f"y{i}", F, [2, 3, 8]) for i in range(4)]
    m = model(name, nodes, [vi("x", F, [2, 3, 8])], outputs, inits, 13)
    return m, [normal(r, (2, 3, 8))]


def cast_constant_of_shape(name):
    # onnxscript rules/common/_cast_constant_of_shape_test.py: CastConstantOfShapeTest
    # (test_cast_after_constant_of_shape_is_fused: ConstantOfShape<value=float 1.> -> Cast
    # float16; test_cast_after_constant_of_shape_without_value_is_fused: no value). The shape
    # comes from x, whose first dim is symbolic ("N"), so the constants cannot be folded away.
    r = rng_for(name)
    nodes = [
        node("Shape", ["x"], ["shape"]),
        node("ConstantOfShape", ["shape"], ["c0"],
             value=helper.make_tensor("value", F, [1], [1.5])),
        node("Cast", ["c0"], ["c0_f16"], to=F16),
        node("Cast", ["c0_f16"], ["c0_f32"], to=F),
        node("Add", ["x", "c0_f32"], ["y0"]),
        node("ConstantOfShape", ["shape"], ["c1"],
             value=helper.make_tensor("value", F, [1], [3.0])),
        node("Cast", ["c1"], ["y1"], to=I32),
        node("ConstantOfShape", ["shape"], ["c2"]),
        node("Cast", ["c2"], ["y2"], to=F16),
    ]
    outputs = [vi("y0", F, ["N", 3, 4]), vi("y1", I32, ["N", 3, 4]), vi("y2", F16, ["N", 3, 4])]
    m = model(name, nodes, [vi("x", F, ["N", 3, 4])], outputs, [], 17)
    return m, [normal(r, (2, 3, 4))]


def _layer_norm(name, axes, sub_as_add_neg=False, square_as_mul=False):
    # onnxscript rules/fusion/_layer_norm_test.py: LayerNormFusionTest
    # (test_layer_norm_fusion_with_bias: ReduceMean, Sub, square, ReduceMean, Add eps, Sqrt, ...,
    # Mul scale, Add bias), written as the exporters write it (Div by the Sqrt) on [2, 5, 8].
    r = rng_for(name)
    nodes = [node("ReduceMean", ["x", "axes"], ["mean"], keepdims=1)]
    if sub_as_add_neg:
        nodes += [node("Neg", ["mean"], ["neg_mean"]), node("Add", ["x", "neg_mean"], ["d"])]
    else:
        nodes += [node("Sub", ["x", "mean"], ["d"])]
    if square_as_mul:
        nodes += [node("Mul", ["d", "d"], ["dd"])]
    else:
        nodes += [node("Pow", ["d", "two"], ["dd"])]
    nodes += [
        node("ReduceMean", ["dd", "axes"], ["var"], keepdims=1),
        node("Add", ["var", "eps"], ["var_eps"]),
        node("Sqrt", ["var_eps"], ["std"]),
        node("Div", ["d", "std"], ["normed"]),
        node("Mul", ["normed", "gamma"], ["scaled"]),
        node("Add", ["scaled", "beta"], ["y"]),
    ]
    inits = [init("axes", np.array(axes, np.int64))]
    if not square_as_mul:
        inits.append(init("two", np.array(2.0, np.float32)))
    inits += [
        init("eps", np.array(1e-5, np.float32)),
        init("gamma", normal(r, (8,), 0.1) + 1.0),
        init("beta", normal(r, (8,), 0.1)),
    ]
    m = model(name, nodes, [vi("x", F, [2, 5, 8])], [vi("y", F, [2, 5, 8])], inits, 18)
    return m, [normal(r, (2, 5, 8), 2.0) + 0.5]


def layer_norm_axis_negative(name):
    # onnxscript LayerNormFusionTest, as written there: ReduceMean axes [-1], Sub, Pow(d, 2).
    return _layer_norm(name, [-1])


def layer_norm_axis_positive(name):
    # onnxscript LayerNormFusionTest with the axes in positive form: ReduceMean axes [2].
    return _layer_norm(name, [2])


def layer_norm_add_neg(name):
    # onnxscript LayerNormFusionTest with Sub(x, mean) written as Add(x, Neg(mean)).
    return _layer_norm(name, [-1], sub_as_add_neg=True)


def layer_norm_mul_square(name):
    # onnxscript LayerNormFusionTest with the square as Mul(d, d) (the test's own spelling).
    return _layer_norm(name, [-1], square_as_mul=True)


def scatter_nd_redundant(name):
    # onnxscript rules/common/_redundant_scatter_nd_test.py:
    # test_redundant_scatter_nd_dynamic_indices (data, updates [8, N, 16]; indices =
    # Unsqueeze(Range(0, Gather(Shape(data), 1), 1), -1) cover axis 1 of data, scattered on the
    # data transposed to bring that axis first, transposed back: the result is updates), and
    # test_redundant_scatter_nd_static_indices (constant indices arange(4)[:, None] on [4, 6]).
    r = rng_for(name)
    nodes = [
        node("Shape", ["data"], ["shape"]),
        node("Gather", ["shape", "one"], ["dim"], axis=0),
        node("Range", ["zero", "dim", "one"], ["full_range"]),
        node("Unsqueeze", ["full_range", "minus_one"], ["indices"]),
        node("Transpose", ["data"], ["data_t"], perm=[1, 0, 2]),
        node("Transpose", ["updates"], ["updates_t"], perm=[1, 0, 2]),
        node("ScatterND", ["data_t", "indices", "updates_t"], ["scattered"], reduction="none"),
        node("Transpose", ["scattered"], ["y0"], perm=[1, 0, 2]),
        node("ScatterND", ["data2", "static_indices", "updates2"], ["y1"]),
    ]
    inits = [
        init("zero", np.array(0, np.int64)),
        init("one", np.array(1, np.int64)),
        init("minus_one", np.array([-1], np.int64)),
        init("static_indices", np.arange(4, dtype=np.int64).reshape(4, 1)),
    ]
    inputs = [vi("data", F, [8, "N", 16]), vi("updates", F, [8, "N", 16]),
              vi("data2", F, [4, 6]), vi("updates2", F, [4, 6])]
    outputs = [vi("y0", F, [8, "N", 16]), vi("y1", F, [4, 6])]
    m = model(name, nodes, inputs, outputs, inits, 18)
    return m, [normal(r, (8, 4, 16)), normal(r, (8, 4, 16)), normal(r, (4, 6)),
               normal(r, (4, 6))]


def expand_binary(name):
    # onnxscript rules/common/_remove_expand_before_binary_op_test.py:
    # test_expand_first_input_broadcast_covered_by_other_input (Add(Expand(x, [4, 6]), y), y
    # [4, 6]), test_expand_second_input_is_removed (Sub(y, Expand(x, [1, 6]))),
    # test_full_optimization (Expand(x, Concat(Shape(x, 0, 1), Shape(x, 1, 2))), a no-op
    # Expand, then Mul with a [1, 6] constant); onnxoptimizer test_eliminate_nop_expand.
    r = rng_for(name)
    nodes = [
        node("Expand", ["x", "shape_4_6"], ["e0"]),
        node("Add", ["e0", "y"], ["z0"]),
        node("Shape", ["x"], ["n"], start=0, end=1),
        node("Shape", ["x"], ["b"], start=1, end=2),
        node("Concat", ["n", "b"], ["x_shape"], axis=0),
        node("Expand", ["x", "x_shape"], ["e1"]),
        node("Mul", ["e1", "w"], ["z1"]),
        node("Expand", ["x", "shape_1_6"], ["e2"]),
        node("Sub", ["y", "e2"], ["z2"]),
    ]
    inits = [
        init("shape_4_6", np.array([4, 6], np.int64)),
        init("shape_1_6", np.array([1, 6], np.int64)),
        init("w", normal(r, (1, 6), 0.5) + 1.0),
    ]
    inputs = [vi("x", F, [4, 1]), vi("y", F, [4, 6])]
    outputs = [vi("z0", F, [4, 6]), vi("z1", F, [4, 6]), vi("z2", F, [4, 6])]
    m = model(name, nodes, inputs, outputs, inits, 18)
    return m, [normal(r, (4, 1)), normal(r, (4, 6))]


def partial_rotary(name):
    # onnxscript rewriter/models/_rotary_embedding_models.py: _partial_rotary_script
    # (partial_rotary_test_case, phi-2 style): cos/sin from position ids (inv_freq MatMul,
    # Transpose, Concat, Cos, Sin, Unsqueeze to [B, 1, S, rd]); query [B, H, S, D] (the test's
    # layout) sliced on the last dim into the rotated part (first rd) and the pass-through part;
    # rotate_half = Concat(Neg(second half), first half); Concat(rotated, pass). Sizes reduced
    # from the test's H 32, D 80, rd 32 to H 2, D 16, rd 8.
    r = rng_for(name)
    rd, half, d = 8, 4, 16
    nodes = [
        node("Unsqueeze", ["position_ids", "axes_1"], ["pos_3d"]),
        node("Cast", ["pos_3d"], ["pos_3d_f"], to=F),
        node("MatMul", ["inv_freqs", "pos_3d_f"], ["freqs"]),
        node("Transpose", ["freqs"], ["freqs_t"], perm=[0, 2, 1]),
        node("Concat", ["freqs_t", "freqs_t"], ["emb"], axis=-1),
        node("Cos", ["emb"], ["cos_3d"]),
        node("Sin", ["emb"], ["sin_3d"]),
        node("Slice", ["query", "zero", "rd", "axis_3", "step_1"], ["to_embed"]),
        node("Slice", ["query", "rd", "int64_max", "axis_3", "step_1"], ["unembedded"]),
        node("Unsqueeze", ["cos_3d", "axes_1"], ["cos_4d"]),
        node("Unsqueeze", ["sin_3d", "axes_1"], ["sin_4d"]),
        node("Mul", ["to_embed", "cos_4d"], ["to_embed_times_cos"]),
        node("Slice", ["to_embed", "zero", "half", "axis_3", "step_1"], ["to_embed_x"]),
        node("Slice", ["to_embed", "half", "int64_max", "axis_3", "step_1"], ["to_embed_y"]),
        node("Neg", ["to_embed_y"], ["minus_to_embed_y"]),
        node("Concat", ["minus_to_embed_y", "to_embed_x"], ["rotated"], axis=-1),
        node("Mul", ["rotated", "sin_4d"], ["rotated_times_sin"]),
        node("Add", ["to_embed_times_cos", "rotated_times_sin"], ["embedded"]),
        node("Concat", ["embedded", "unembedded"], ["y"], axis=-1),
    ]
    inits = [
        init("axes_1", np.array([1], np.int64)),
        init("inv_freqs", r.random((1, half, 1)).astype(np.float32)),
        init("zero", np.array([0], np.int64)),
        init("rd", np.array([rd], np.int64)),
        init("half", np.array([half], np.int64)),
        init("int64_max", np.array([INT64_MAX], np.int64)),
        init("axis_3", np.array([3], np.int64)),
        init("step_1", np.array([1], np.int64)),
    ]
    inputs = [vi("position_ids", I64, [1, 8]), vi("query", F, [1, 2, 8, d])]
    m = model(name, nodes, inputs, [vi("y", F, [1, 2, 8, d])], inits, 18)
    return m, [np.arange(8, dtype=np.int64).reshape(1, 8), normal(r, (1, 2, 8, d))]


MODELS = [
    pad_conv_padded,
    pad_conv_1d,
    pad_conv_no_value,
    pad_average_pool,
    pad_max_pool_1d,
    pad_conv_integer,
    pad_conv_integer_zero_point,
    concat_concat,
    transpose_output,
    split_concat,
    min_max_chain,
    clip_chain,
    cast_constant_of_shape,
    layer_norm_axis_negative,
    layer_norm_axis_positive,
    layer_norm_add_neg,
    layer_norm_mul_square,
    scatter_nd_redundant,
    expand_binary,
    partial_rotary,
]


# ----------------------------------------------------------------------------------------------
# --peers: re-check the written models and run the peers on them


def load_case(d: Path):
    m = onnx.load(str(d / "model.onnx"))
    ds = d / "test_data_set_0"
    ins = [numpy_helper.to_array(onnx.load_tensor(str(ds / f"input_{i}.pb")))
           for i in range(len(m.graph.input))]
    outs = [numpy_helper.to_array(onnx.load_tensor(str(ds / f"output_{i}.pb")))
            for i in range(len(m.graph.output))]
    return m, ins, outs


def same(got, want):
    return all(g.dtype == w.dtype and g.shape == w.shape and np.allclose(g, w, rtol=1e-4, atol=1e-4)
               for g, w in zip(got, want)) and len(got) == len(want)


def check_peers(out: Path, names: list[str]):
    import onnxoptimizer
    import onnxruntime
    import onnxsim
    import onnxslim

    def run_sim(m):
        r, ok = onnxsim.simplify(m)
        if not ok:
            raise RuntimeError("onnxsim's own check failed")
        return r

    peers = [("onnxsim", run_sim), ("onnxslim", onnxslim.slim),
             ("onnxoptimizer", onnxoptimizer.optimize)]
    print(f"onnxruntime {onnxruntime.__version__}, onnxsim {onnxsim.__version__}, "
          f"onnxslim {onnxslim.__version__}, onnxoptimizer {onnxoptimizer.__version__}, "
          f"onnx {onnx.__version__}\n")
    print("| model | opset | input nodes | onnxsim | onnxslim | onnxoptimizer |")
    print("|---|---|---|---|---|---|")
    failed = False
    for name in names:
        d = out / name
        m, ins, want = load_case(d)
        onnx.checker.check_model(m, full_check=True)
        feed = {i.name: a for i, a in zip(m.graph.input, ins)}
        got = session(m).run(None, feed)
        if not same(got, want):
            print(f"{name}: onnxruntime does not reproduce the stored outputs", file=sys.stderr)
            failed = True
        cells = []
        for _, fn in peers:
            mc = onnx.ModelProto()
            mc.CopyFrom(m)
            try:
                r = fn(mc)
                n = len(r.graph.node)
                try:
                    ok = same(session(r).run(None, feed), want)
                    cells.append(f"{n}" if ok else f"{n} (outputs differ)")
                except Exception as e:  # noqa: BLE001
                    cells.append(f"{n} (does not run: {type(e).__name__})")
            except Exception as e:  # noqa: BLE001
                msg = str(e).strip().splitlines()[0][:80] if str(e).strip() else ""
                cells.append(f"error: {type(e).__name__}{': ' + msg if msg else ''}")
        print(f"| {name} | {m.opset_import[0].version} | {len(m.graph.node)} | "
              + " | ".join(cells) + " |")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="output directory (default %(default)s)")
    ap.add_argument("--only", nargs="*", help="model names to write (default: all)")
    ap.add_argument("--peers", action="store_true",
                    help="do not write: check the written models and run the peers on them")
    args = ap.parse_args()
    out = Path(args.out)
    known = [f.__name__ for f in MODELS]
    names = args.only or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        ap.error(f"unknown models {unknown}; known: {known}")
    if args.peers:
        return check_peers(out, names)
    for f in MODELS:
        if f.__name__ in names:
            m, feeds = f(f.__name__)
            write_case(out, f.__name__, m, feeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
