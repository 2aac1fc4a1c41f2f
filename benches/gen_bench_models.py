#!/usr/bin/env python3
"""Generate the two large models of benches/python_api.py: BERT-base and ResNet-50, with seeded
random float32 weights, written with onnx.helper and numpy (no torch, no download).

  bert-base.onnx   a BERT-base encoder (12 layers, hidden 768, 12 heads, intermediate 3072,
                   vocabulary 30522, 512 positions) in the graph that HF transformers' BertModel
                   gets from torch.onnx.export (TorchScript exporter, opset 17, eager attention,
                   dynamic axes): inputs input_ids, attention_mask, token_type_ids, all
                   int64[batch, seq]; outputs last_hidden_state float[batch, seq, 768] and
                   pooler_output float[batch, 768]. About 440 MB of weights.
  resnet50.onnx    torchvision's resnet50 (v1.5 layout: the stride on the 3x3 conv of a
                   bottleneck) exported at opset 17 with the BatchNormalization nodes kept (not
                   folded into the convolutions): input float[N, 3, 224, 224], output
                   float[N, 1000]. About 100 MB of weights.

What the exporter writes and these graphs copy: node and value names (`/encoder/layer.0/
attention/self/query/MatMul`, `..._output_0`), scalars and shape pieces as Constant nodes, Linear
on a 3-D input as MatMul (weight stored transposed, `onnx::MatMul_N`) + Add (bias first), on a
2-D input as Gemm transB=1 (the pooler, the classifier), the sizes of `view` computed with
Shape -> Gather -> Unsqueeze -> Concat, key's two transposes fused into one (perm 0,2,3,1),
the extended attention mask `(1.0 - mask[:, None, None, :].float()) * finfo(float32).min`, Gelu
as `x * 0.5 * (1 + erf(x / sqrt(2)))` (Div, Erf, Add, Mul, Mul: opset 17 has no Gelu), LayerNorm
as LayerNormalization (epsilon 1e-12), BatchNormalization with epsilon 1e-5 and momentum 0.9.

Weights are normal(0, 0.02) for BERT (its initializer range), He-normal for the convolutions,
with LayerNorm / BatchNorm parameters near their trained values, so that activations stay in
a realistic range (the script prints output statistics). Same seed, same bytes.

Each model is checked with onnx.checker.check_model(path, full_check=True) and run once in
onnxruntime (BERT on batch 1, seq 16; ResNet-50 on batch 1).

  $PY benches/gen_bench_models.py                 # target/bench-models
  $PY benches/gen_bench_models.py --out DIR --only bert-base

Needs onnx and numpy; onnxruntime for the run (skipped with a note when it is missing).
About a minute for both. Exit status: 0 when both models were written and checked, 1 when a
check failed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "target" / "bench-models"
OPSET = 17
IR_VERSION = 8  # what torch.onnx writes for opset 17
PRODUCER = ("pytorch", "2.1.0")


class Builder:
    """Nodes, initializers and names in the style of torch.onnx's TorchScript exporter: a node
    of op Op in module scope /a/b is `/a/b/Op` (`/a/b/Op_1`, ... for the next ones), its outputs
    `/a/b/Op_output_0`, ...; scalars and small shape pieces are Constant nodes."""

    def __init__(self, seed: int):
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self._names: collections.Counter[str] = collections.Counter()
        self._anonymous = 1000  # onnx::MatMul_1000, ...

    def node(self, scope: str, op: str, inputs: list[str], outputs: int | list[str] = 1,
             **attrs) -> str | list[str]:
        base = f"{scope}/{op}"
        k = self._names[base]
        self._names[base] += 1
        name = base if k == 0 else f"{base}_{k}"
        if isinstance(outputs, int):
            outs = [f"{name}_output_{i}" for i in range(outputs)]
        else:
            outs = list(outputs)
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def const(self, scope: str, value, dtype=np.float32) -> str:
        array = np.array(value, dtype=dtype)
        return self.node(scope, "Constant", [], value=numpy_helper.from_array(array))

    def init(self, name: str | None, array: np.ndarray, prefix: str = "onnx::MatMul") -> str:
        if name is None:
            name = f"{prefix}_{self._anonymous}"
            self._anonymous += 1
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def normal(self, shape, std: float) -> np.ndarray:
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    def model(self, name: str, inputs, outputs, doc: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name=PRODUCER[0], producer_version=PRODUCER[1],
                                  ir_version=IR_VERSION, doc_string=doc)
        return model


# --- BERT-base ------------------------------------------------------------------------------

BERT = dict(vocab=30522, positions=512, type_vocab=2, hidden=768, layers=12, heads=12,
            intermediate=3072, eps=1e-12, init_std=0.02)


def bert_base(seed: int) -> onnx.ModelProto:
    c = BERT
    hidden, heads = c["hidden"], c["heads"]
    head_size = hidden // heads
    b = Builder(seed)
    std = c["init_std"]

    def layer_norm(scope: str, x: str, prefix: str, out: str | None = None) -> str:
        gamma = b.init(f"{prefix}.weight", 1.0 + b.normal([hidden], 0.05))
        beta = b.init(f"{prefix}.bias", b.normal([hidden], 0.02))
        return b.node(scope, "LayerNormalization", [x, gamma, beta],
                      [out] if out else 1, axis=-1, epsilon=c["eps"])

    def linear(scope: str, x: str, prefix: str, n_in: int, n_out: int) -> str:
        # Linear on a 3-D input: MatMul with the transposed weight, then Add(bias, ...).
        weight = b.init(None, b.normal([n_in, n_out], std))
        bias = b.init(f"{prefix}.bias", b.normal([n_out], std))
        y = b.node(scope, "MatMul", [x, weight])
        return b.node(scope, "Add", [bias, y])

    def dims_01(scope: str, x: str) -> list[str]:
        # x.size(0), x.size(1) as 1-D tensors: Shape -> Gather(scalar index) -> Unsqueeze.
        out = []
        for axis in (0, 1):
            shape = b.node(scope, "Shape", [x])
            dim = b.node(scope, "Gather", [shape, b.const(scope, axis, np.int64)], axis=0)
            out.append(b.node(scope, "Unsqueeze", [dim, b.const(scope, [0], np.int64)]))
        return out

    def split_heads(scope: str, x: str, perm: list[int]) -> str:
        # transpose_for_scores: x.view(x.size()[:-1] + (heads, head_size)).permute(...)
        d0, d1 = dims_01(scope, x)
        shape = b.node(scope, "Concat", [d0, d1, b.const(scope, [heads], np.int64),
                                         b.const(scope, [head_size], np.int64)], axis=0)
        y = b.node(scope, "Reshape", [x, shape], allowzero=0)
        return b.node(scope, "Transpose", [y], perm=perm)

    # Embeddings.
    s = "/embeddings"
    word = b.init("embeddings.word_embeddings.weight", b.normal([c["vocab"], hidden], std))
    pos = b.init("embeddings.position_embeddings.weight", b.normal([c["positions"], hidden], std))
    typ = b.init("embeddings.token_type_embeddings.weight",
                 b.normal([c["type_vocab"], hidden], std))
    position_ids = b.init("embeddings.position_ids",
                          np.arange(c["positions"], dtype=np.int64).reshape(1, -1))
    shape = b.node(s, "Shape", ["input_ids"])
    seq = b.node(s, "Gather", [shape, b.const(s, 1, np.int64)], axis=0)
    seq_1d = b.node(s, "Unsqueeze", [seq, b.const(s, [0], np.int64)])
    ids = b.node(s, "Slice", [position_ids, b.const(s, [0], np.int64), seq_1d,
                              b.const(s, [1], np.int64), b.const(s, [1], np.int64)])
    x = b.node(f"{s}/word_embeddings", "Gather", [word, "input_ids"])
    t = b.node(f"{s}/token_type_embeddings", "Gather", [typ, "token_type_ids"])
    x = b.node(s, "Add", [x, t])
    p = b.node(f"{s}/position_embeddings", "Gather", [pos, ids])
    x = b.node(s, "Add", [x, p])
    x = layer_norm(f"{s}/LayerNorm", x, "embeddings.LayerNorm")

    # Extended attention mask: (1.0 - mask[:, None, None, :].to(float)) * finfo(float).min
    m = b.node("", "Unsqueeze", ["attention_mask", b.const("", [1], np.int64)])
    m = b.node("", "Unsqueeze", [m, b.const("", [2], np.int64)])
    m = b.node("", "Cast", [m], to=TensorProto.FLOAT)
    m = b.node("", "Sub", [b.const("", 1.0), m])
    mask = b.node("", "Mul", [m, b.const("", np.finfo(np.float32).min)])

    for i in range(c["layers"]):
        L = f"/encoder/layer.{i}"
        P = f"encoder.layer.{i}"
        sa = f"{L}/attention/self"
        q = linear(f"{sa}/query", x, f"{P}.attention.self.query", hidden, hidden)
        k = linear(f"{sa}/key", x, f"{P}.attention.self.key", hidden, hidden)
        k = split_heads(sa, k, [0, 2, 3, 1])  # permute(0,2,1,3) then transpose(-1,-2), fused
        v = linear(f"{sa}/value", x, f"{P}.attention.self.value", hidden, hidden)
        v = split_heads(sa, v, [0, 2, 1, 3])
        q = split_heads(sa, q, [0, 2, 1, 3])
        scores = b.node(sa, "MatMul", [q, k])
        scores = b.node(sa, "Div", [scores, b.const(sa, float(np.sqrt(head_size)))])
        scores = b.node(sa, "Add", [scores, mask])
        probs = b.node(sa, "Softmax", [scores], axis=-1)
        ctx = b.node(sa, "MatMul", [probs, v])
        ctx = b.node(sa, "Transpose", [ctx], perm=[0, 2, 1, 3])
        d0, d1 = dims_01(sa, ctx)
        shape = b.node(sa, "Concat", [d0, d1, b.const(sa, [hidden], np.int64)], axis=0)
        ctx = b.node(sa, "Reshape", [ctx, shape], allowzero=0)

        ao = f"{L}/attention/output"
        y = linear(f"{ao}/dense", ctx, f"{P}.attention.output.dense", hidden, hidden)
        y = b.node(ao, "Add", [y, x])
        x = layer_norm(f"{ao}/LayerNorm", y, f"{P}.attention.output.LayerNorm")

        it = f"{L}/intermediate"
        h = linear(f"{it}/dense", x, f"{P}.intermediate.dense", hidden, c["intermediate"])
        g = f"{it}/intermediate_act_fn"
        e = b.node(g, "Div", [h, b.const(g, float(np.float32(np.sqrt(2.0))))])
        e = b.node(g, "Erf", [e])
        e = b.node(g, "Add", [e, b.const(g, 1.0)])
        e = b.node(g, "Mul", [h, e])
        h = b.node(g, "Mul", [e, b.const(g, 0.5)])

        o = f"{L}/output"
        y = linear(f"{o}/dense", h, f"{P}.output.dense", c["intermediate"], hidden)
        y = b.node(o, "Add", [y, x])
        last = i == c["layers"] - 1
        x = layer_norm(f"{o}/LayerNorm", y, f"{P}.output.LayerNorm",
                       out="last_hidden_state" if last else None)

    # Pooler: dense(hidden_states[:, 0]).tanh(); a 2-D Linear is Gemm(transB=1).
    s = "/pooler"
    first = b.node(s, "Gather", [x, b.const(s, 0, np.int64)], axis=1)
    w = b.init("pooler.dense.weight", b.normal([hidden, hidden], std))
    bias = b.init("pooler.dense.bias", b.normal([hidden], std))
    y = b.node(f"{s}/dense", "Gemm", [first, w, bias], alpha=1.0, beta=1.0, transB=1)
    b.node(f"{s}/activation", "Tanh", [y], ["pooler_output"])

    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "seq", hidden]),
               helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT,
                                             ["batch", hidden])]
    return b.model("main_graph", inputs, outputs,
                   f"BERT-base encoder, random weights (seed {seed}), benches/gen_bench_models.py")


def bert_feeds(seed: int, batch: int = 1, seq: int = 16) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[:, seq - seq // 4:] = 0  # a padded tail
    return {"input_ids": rng.integers(0, BERT["vocab"], (batch, seq), dtype=np.int64),
            "attention_mask": mask,
            "token_type_ids": (np.arange(seq) >= seq // 2).astype(np.int64)[None].repeat(batch, 0)}


# --- ResNet-50 ------------------------------------------------------------------------------

def resnet50(seed: int) -> onnx.ModelProto:
    b = Builder(seed)
    rng = b.rng

    def conv_bn(scope: str, prefix: str, conv: str, bn: str, x: str, c_in: int, c_out: int,
                k: int, stride: int, gamma_scale: float = 1.0) -> str:
        fan_in = c_in * k * k
        w = b.init(f"{prefix}{conv}.weight", b.normal([c_out, c_in, k, k], np.sqrt(2.0 / fan_in)))
        pad = k // 2
        y = b.node(f"{scope}/{conv}", "Conv", [x, w],
                   dilations=[1, 1], group=1, kernel_shape=[k, k], pads=[pad] * 4,
                   strides=[stride, stride])
        # Running statistics as a trained network has them, roughly: a per-channel mean and
        # variance of the conv output for inputs of unit scale.
        gamma = gamma_scale * rng.uniform(0.5, 1.0, c_out).astype(np.float32)
        beta = rng.normal(0.0, 0.1, c_out).astype(np.float32)
        mean = rng.normal(0.0, 0.2, c_out).astype(np.float32)
        var = rng.uniform(1.0, 2.0, c_out).astype(np.float32)
        names = [b.init(f"{prefix}{bn}.{n}", a) for n, a in
                 (("weight", gamma), ("bias", beta), ("running_mean", mean),
                  ("running_var", var))]
        return b.node(f"{scope}/{bn}", "BatchNormalization", [y, *names], epsilon=1e-5,
                      momentum=0.9)

    x = conv_bn("", "", "conv1", "bn1", "input", 3, 64, 7, 2)
    x = b.node("/relu", "Relu", [x])
    x = b.node("/maxpool", "MaxPool", [x], ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[2, 2])
    c_in = 64
    for stage, (blocks, planes, stride) in enumerate(
            [(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)], start=1):
        for j in range(blocks):
            scope = f"/layer{stage}/layer{stage}.{j}"
            prefix = f"layer{stage}.{j}."
            s = stride if j == 0 else 1
            y = conv_bn(scope, prefix, "conv1", "bn1", x, c_in, planes, 1, 1)
            y = b.node(f"{scope}/relu", "Relu", [y])
            y = conv_bn(scope, prefix, "conv2", "bn2", y, planes, planes, 3, s)
            y = b.node(f"{scope}/relu_1", "Relu", [y])
            # A small last gamma keeps the residual sum from growing block after block, as in
            # a trained network (and torchvision's zero_init_residual).
            y = conv_bn(scope, prefix, "conv3", "bn3", y, planes, planes * 4, 1, 1,
                        gamma_scale=0.3)
            if j == 0:
                skip = conv_bn(f"{scope}/downsample", prefix, "downsample.0", "downsample.1",
                               x, c_in, planes * 4, 1, s)
            else:
                skip = x
            y = b.node(scope, "Add", [y, skip])
            x = b.node(f"{scope}/relu_2", "Relu", [y])
            c_in = planes * 4
    x = b.node("/avgpool", "GlobalAveragePool", [x])
    x = b.node("", "Flatten", [x], axis=1)
    w = b.init("fc.weight", b.normal([1000, 2048], 1.0 / np.sqrt(2048)))
    bias = b.init("fc.bias", b.normal([1000], 0.01))
    b.node("/fc", "Gemm", [x, w, bias], ["output"], alpha=1.0, beta=1.0, transB=1)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 1000])]
    return b.model("main_graph", inputs, outputs,
                   f"ResNet-50, random weights (seed {seed}), benches/gen_bench_models.py")


def resnet_feeds(seed: int, batch: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((batch, 3, 224, 224), dtype=np.float32)}


# --- driver ---------------------------------------------------------------------------------

MODELS = {
    "bert-base": (bert_base, bert_feeds),
    "resnet50": (resnet50, resnet_feeds),
}


def run_ort(path: Path, feeds: dict[str, np.ndarray]) -> str:
    """Run the model once in onnxruntime; a line of output statistics."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed: not run"
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    t0 = time.perf_counter()
    outs = sess.run(None, feeds)
    ms = (time.perf_counter() - t0) * 1e3
    parts = []
    for meta, arr in zip(sess.get_outputs(), outs):
        if not np.all(np.isfinite(arr)):
            raise RuntimeError(f"output {meta.name} has non-finite values")
        parts.append(f"{meta.name} {list(arr.shape)} mean {arr.mean():.4f} std {arr.std():.4f} "
                     f"max|x| {np.abs(arr).max():.4f}")
    return f"onnxruntime ran it in {ms:.0f} ms: " + "; ".join(parts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output directory (default: %(default)s)")
    parser.add_argument("--only", nargs="+", choices=sorted(MODELS), default=sorted(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in args.only:
        build, feeds = MODELS[name]
        t0 = time.perf_counter()
        model = build(args.seed)
        path = args.out / f"{name}.onnx"
        onnx.save(model, str(path))
        weights = sum(t.ByteSize() for t in model.graph.initializer)
        nodes = collections.Counter(n.op_type for n in model.graph.node)
        del model
        print(f"{path}: {path.stat().st_size / 1e6:.1f} MB ({weights / 1e6:.1f} MB of "
              f"initializers), {sum(nodes.values())} nodes: "
              + ", ".join(f"{op} {k}" for op, k in nodes.most_common())
              + f"; built and saved in {time.perf_counter() - t0:.1f} s")
        try:
            onnx.checker.check_model(str(path), full_check=True)
            print("  onnx.checker.check_model(path, full_check=True): ok")
            print("  " + run_ort(path, feeds(args.seed)))
        except Exception as exc:  # noqa: BLE001 - reported, the other model goes on
            print(f"  CHECK FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
