#!/usr/bin/env python3
"""Writes tests/models/contrib: small models holding onnxruntime's contrib ops (com.microsoft),
made the way onnxruntime's own tools make them, each with one test data set of onnxruntime's
outputs (CPU provider, graph optimizations off, 1 thread), plus a model around a custom-domain op.

Run (from the repository root):

    target/venv-peers/bin/python -m pip install --only-binary=:all: --no-deps \
        --target target/contrib-models-py -r scripts/requirements-contrib-models.txt
    PYTHONPATH=target/contrib-models-py target/venv-peers/bin/python \
        scripts/make_contrib_models.py

Versions: onnxruntime 1.31.1, onnx 1.23.2, numpy 2.4.6 (the peers venv), onnx-ir 1.1.0 (needed by
onnxruntime's MatMulNBitsQuantizer). Everything is seeded; a re-run writes the same bytes.

The BERT model starts from ../shared/models/bert-tiny-opset13/model.onnx (a TorchScript export of
HF bert-tiny by torch 2.8.0): its graph is kept node for node, resized to hidden 64, 4 heads,
vocab 100, 128 positions, with new seeded weights (see `bert_export`).
"""

from __future__ import annotations

import collections
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "models" / "contrib"
SHARED = Path(os.environ.get("ONNX_OPT_SHARED", ROOT.parent / "shared"))
if not (SHARED / "models").is_dir():
    SHARED = Path("/work/shared")
BERT_TINY = SHARED / "models" / "bert-tiny-opset13" / "model.onnx"

MS = "com.microsoft"


# ----------------------------------------------------------------------------------------------
# helpers


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def histogram(model: onnx.ModelProto) -> list[tuple[str, int]]:
    c = collections.Counter(
        (f"{n.domain}." if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in model.graph.node
    )
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))


def write_case(name: str, model: onnx.ModelProto, feed_sets: list[dict[str, np.ndarray]]) -> str:
    """Writes the model and its test data sets; returns what onnx's checker said."""
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    try:
        onnx.checker.check_model(model, full_check=True)
        checked = "passes"
    except onnx.checker.ValidationError as e:
        checked = "fails: " + str(e).splitlines()[0]
    onnx.save(model, d / "model.onnx")
    for n, feeds in enumerate(feed_sets):
        outs = run_ort(model, feeds)
        t = d / f"test_data_set_{n}"
        t.mkdir()
        for i, inp in enumerate(model.graph.input):
            tensor = numpy_helper.from_array(feeds[inp.name], inp.name)
            (t / f"input_{i}.pb").write_bytes(tensor.SerializeToString())
        for i, (o, v) in enumerate(zip(model.graph.output, outs)):
            (t / f"output_{i}.pb").write_bytes(numpy_helper.from_array(np.asarray(v), o.name).SerializeToString())
    return checked


def max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)))) for x, y in zip(a, b))


def set_dims(vi: onnx.ValueInfoProto, dims: list) -> None:
    shape = vi.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        dd = shape.dim.add()
        if isinstance(d, str):
            dd.dim_param = d
        else:
            dd.dim_value = d


def randn(rng: np.random.Generator, shape, scale: float) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# 1. BERT: TorchScript export (bert-tiny's graph, resized) and onnxruntime's transformers optimizer

BERT_HIDDEN, BERT_HEADS, BERT_LAYERS, BERT_VOCAB, BERT_POS, BERT_FF = 64, 4, 2, 100, 64, 256


def bert_export() -> onnx.ModelProto:
    """bert-tiny's TorchScript graph with hidden 64, 4 heads, intermediate 256, vocab 100.

    The exporter wrote `Identity` nodes for parameters equal to another one (bert-tiny's untrained
    biases are all 0 and its norm weights all 1); with distinct random values it would have
    written each as its own initializer, so the Identity nodes become initializers here."""
    src = onnx.load(BERT_TINY)
    rng = np.random.default_rng(1)
    g = src.graph
    h, ff = BERT_HIDDEN, BERT_FF

    def new_value(name: str, dims: list[int]) -> np.ndarray:
        if name.endswith("word_embeddings.weight"):
            return randn(rng, (BERT_VOCAB, h), 0.5)
        if name.endswith("position_embeddings.weight"):
            return randn(rng, (BERT_POS, h), 0.5)
        if name.endswith("token_type_embeddings.weight"):
            return randn(rng, (2, h), 0.5)
        if name.endswith("LayerNorm.weight"):
            return (1.0 + randn(rng, (h,), 0.1)).astype(np.float32)
        if name.endswith("LayerNorm.bias"):
            return randn(rng, (h,), 0.05)
        if name.endswith("intermediate.dense.bias"):
            return randn(rng, (ff,), 0.05)
        if name.endswith(".bias"):
            return randn(rng, (h,), 0.05)
        if name == "m.pooler.dense.weight":
            return randn(rng, (h, h), 1.0 / np.sqrt(h))
        if name.startswith("onnx::MatMul_"):
            k, n = [{128: h, 512: ff}[d] for d in dims]
            return randn(rng, (k, n), 1.0 / np.sqrt(k))
        raise ValueError(f"unexpected initializer {name}")

    inits = []
    for init in g.initializer:
        inits.append(numpy_helper.from_array(new_value(init.name, list(init.dims)), init.name))
    nodes = []
    for n in g.node:
        if n.op_type == "Identity":
            inits.append(numpy_helper.from_array(new_value(n.output[0], []), n.output[0]))
            continue
        if n.op_type == "Constant":
            v = numpy_helper.to_array(n.attribute[0].t)
            new = None
            if n.output[0] == "onnx::Slice_46":  # position ids buffer arange(512)[None]
                new = np.arange(BERT_POS, dtype=np.int64)[None]
            elif "/attention/self/" in n.name and v.ndim == 1 and v.tolist() == [2]:
                new = np.array([BERT_HEADS], np.int64)
            elif "/attention/self/" in n.name and v.ndim == 1 and v.tolist() == [64]:
                new = np.array([h // BERT_HEADS], np.int64)
            elif "/attention/self/" in n.name and v.ndim == 1 and v.tolist() == [128]:
                new = np.array([h], np.int64)
            elif "/attention/self/" in n.name and v.dtype == np.float32 and float(v) == 8.0:
                new = np.array(np.sqrt(h // BERT_HEADS), np.float32)
            if new is not None:
                n = onnx.NodeProto.FromString(n.SerializeToString())
                n.attribute[0].t.CopyFrom(numpy_helper.from_array(new, ""))
        nodes.append(n)
    for vi in list(g.input) + list(g.output):
        dims = [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]
        dims = [{"batch": "batch_size", "sequence": "sequence_length", 128: h}.get(d, d) for d in dims]
        set_dims(vi, dims)
    graph = helper.make_graph(nodes, g.name, list(g.input), list(g.output), inits)
    m = helper.make_model(graph, opset_imports=list(src.opset_import), producer_name=src.producer_name,
                          producer_version=src.producer_version)
    m.ir_version = src.ir_version
    return m


def bert_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(101)
    b, s = 2, 8
    mask = np.ones((b, s), np.int64)
    mask[1, 5:] = 0
    return {
        "input_ids": rng.integers(0, BERT_VOCAB, (b, s), dtype=np.int64),
        "attention_mask": mask,
        "token_type_ids": (np.arange(s)[None, :] >= np.array([[4], [3]])).astype(np.int64),
    }


def ort_optimize(model: onnx.ModelProto, model_type: str, num_heads: int, hidden: int) -> onnx.ModelProto:
    from onnxruntime.transformers.optimizer import optimize_model

    model = onnx.ModelProto.FromString(model.SerializeToString())  # optimize_model edits its argument
    from onnxruntime.transformers.fusion_options import FusionOptions

    options = FusionOptions(model_type)
    # gpt2: without this the first LayerNorm (after the token + position embedding Add) becomes
    # EmbedLayerNormalization and no default-domain LayerNormalization is left
    options.enable_embed_layer_norm = model_type != "gpt2"
    opt = optimize_model(model, model_type=model_type, num_heads=num_heads, hidden_size=hidden, opt_level=0,
                         optimization_options=options, use_gpu=False)
    # save_model_to_file is how the tool writes its result: it sorts the graph and adds the
    # com.microsoft opset import that the in-memory model lacks.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        opt.save_model_to_file(str(path))
        return onnx.load(path)


# ----------------------------------------------------------------------------------------------
# 2. GPT-2: the TorchScript exporter's graph of HF GPT2 (no past) at opset 13, built with
# onnx.helper, then onnxruntime's transformers optimizer (model_type="gpt2")

GPT_HIDDEN, GPT_HEADS, GPT_LAYERS, GPT_VOCAB, GPT_POS = 64, 4, 2, 100, 64


class G:
    """A tiny graph builder that names nodes like the TorchScript exporter (/scope/Op_k)."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.counts: dict[tuple[str, str], int] = collections.defaultdict(int)

    def op(self, scope: str, op: str, inputs: list[str], n_out: int = 1, domain: str = "", **attrs) -> list[str]:
        k = self.counts[(scope, op)]
        self.counts[(scope, op)] += 1
        name = f"{scope}/{op}" + (f"_{k}" if k else "")
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain or None, **attrs))
        return outs

    def op1(self, scope, op, inputs, **attrs) -> str:
        return self.op(scope, op, inputs, **attrs)[0]

    def const(self, scope: str, value) -> str:
        v = np.asarray(value)
        return self.op1(scope, "Constant", [], value=numpy_helper.from_array(v, ""))

    def init(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name


def gpt2_export_opset13() -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    h, nh, d = GPT_HIDDEN, GPT_HEADS, GPT_HIDDEN // GPT_HEADS
    g = G()
    wte = g.init("transformer.wte.weight", randn(rng, (GPT_VOCAB, h), 0.5))
    wpe = g.init("transformer.wpe.weight", randn(rng, (GPT_POS, h), 0.2))
    bias = g.init("transformer.h.0.attn.bias", np.tril(np.ones((GPT_POS, GPT_POS), np.uint8))[None, None])

    sc = "/transformer"
    shp = g.op1(sc, "Shape", ["input_ids"])
    seq = g.op1(sc, "Gather", [shp, g.const(sc, np.array(-1, np.int64))], axis=0)
    pos = g.op1(sc, "Range", [g.const(sc, np.array(0, np.int64)), seq, g.const(sc, np.array(1, np.int64))])
    pos = g.op1(sc, "Unsqueeze", [pos, g.const(sc, np.array([0], np.int64))])
    emb = g.op1(sc + "/wte", "Gather", [wte, "input_ids"])
    pemb = g.op1(sc + "/wpe", "Gather", [wpe, pos])
    x = g.op1(sc, "Add", [emb, pemb])

    def layer_norm(scope: str, x: str, prefix: str) -> str:
        w = g.init(prefix + ".weight", (1.0 + randn(rng, (h,), 0.1)).astype(np.float32))
        b = g.init(prefix + ".bias", randn(rng, (h,), 0.05))
        mean = g.op1(scope, "ReduceMean", [x], axes=[-1])
        sub = g.op1(scope, "Sub", [x, mean])
        pw = g.op1(scope, "Pow", [sub, g.const(scope, np.array(2.0, np.float32))])
        var = g.op1(scope, "ReduceMean", [pw], axes=[-1])
        add = g.op1(scope, "Add", [var, g.const(scope, np.array(1e-5, np.float32))])
        sq = g.op1(scope, "Sqrt", [add])
        div = g.op1(scope, "Div", [sub, sq])
        mul = g.op1(scope, "Mul", [div, w])
        return g.op1(scope, "Add", [mul, b])

    def conv1d(scope: str, x: str, prefix: str, k: int, n: int, scale: float) -> str:
        """HF Conv1D: size_out = x.size()[:-1] + (nf,); x = addmm(b, x.view(-1, nx), w); x.view(size_out)."""
        w = g.init(prefix + ".weight", randn(rng, (k, n), scale))
        b = g.init(prefix + ".bias", randn(rng, (n,), 0.05))
        s = g.op1(scope, "Shape", [x])
        s0 = g.op1(scope, "Gather", [s, g.const(scope, np.array(0, np.int64))], axis=0)
        s1 = g.op1(scope, "Gather", [s, g.const(scope, np.array(1, np.int64))], axis=0)
        u0 = g.op1(scope, "Unsqueeze", [s0, g.const(scope, np.array([0], np.int64))])
        u1 = g.op1(scope, "Unsqueeze", [s1, g.const(scope, np.array([0], np.int64))])
        out_shape = g.op1(scope, "Concat", [u0, u1, g.const(scope, np.array([n], np.int64))], axis=0)
        x2 = g.op1(scope, "Reshape", [x, g.const(scope, np.array([-1, k], np.int64))])
        y = g.op1(scope, "Gemm", [x2, w, b], alpha=1.0, beta=1.0)
        return g.op1(scope, "Reshape", [y, out_shape])

    def split_heads(scope: str, t: str, perm: list[int]) -> str:
        s = g.op1(scope, "Shape", [t])
        s0 = g.op1(scope, "Gather", [s, g.const(scope, np.array(0, np.int64))], axis=0)
        s1 = g.op1(scope, "Gather", [s, g.const(scope, np.array(1, np.int64))], axis=0)
        u0 = g.op1(scope, "Unsqueeze", [s0, g.const(scope, np.array([0], np.int64))])
        u1 = g.op1(scope, "Unsqueeze", [s1, g.const(scope, np.array([0], np.int64))])
        shape = g.op1(scope, "Concat", [u0, u1, g.const(scope, np.array([nh], np.int64)),
                                        g.const(scope, np.array([d], np.int64))], axis=0)
        r = g.op1(scope, "Reshape", [t, shape])
        return g.op1(scope, "Transpose", [r], perm=perm)

    for i in range(GPT_LAYERS):
        L = f"{sc}/h.{i}"
        P = f"transformer.h.{i}"
        ln1 = layer_norm(f"{L}/ln_1", x, f"{P}.ln_1")
        A = f"{L}/attn"
        qkv = conv1d(f"{A}/c_attn", ln1, f"{P}.attn.c_attn", h, 3 * h, 1.0 / np.sqrt(h))
        q, k, v = g.op(A, "Split", [qkv, g.const(A, np.array([h, h, h], np.int64))], n_out=3, axis=2)
        qh = split_heads(A, q, [0, 2, 1, 3])
        kh = split_heads(A, k, [0, 2, 3, 1])
        vh = split_heads(A, v, [0, 2, 1, 3])
        w = g.op1(A, "MatMul", [qh, kh])
        w = g.op1(A, "Div", [w, g.const(A, np.array(np.sqrt(d), np.float32))])
        # nd, ns = w.size(-2), w.size(-1); mask = self.bias[:, :, ns - nd : ns, :ns]
        sw = g.op1(A, "Shape", [w])
        nd = g.op1(A, "Squeeze", [g.op1(A, "Slice", [sw, g.const(A, np.array([-2], np.int64)),
                                                          g.const(A, np.array([-1], np.int64)),
                                                          g.const(A, np.array([0], np.int64))])])
        sw2 = g.op1(A, "Shape", [w])
        ns = g.op1(A, "Squeeze", [g.op1(A, "Slice", [sw2, g.const(A, np.array([-1], np.int64)),
                                                          g.const(A, np.array([9223372036854775807], np.int64)),
                                                          g.const(A, np.array([0], np.int64))])])
        start = g.op1(A, "Unsqueeze", [g.op1(A, "Sub", [ns, nd]), g.const(A, np.array([0], np.int64))])
        end = g.op1(A, "Unsqueeze", [ns, g.const(A, np.array([0], np.int64))])
        m1 = g.op1(A, "Slice", [bias, start, end, g.const(A, np.array([2], np.int64)),
                                g.const(A, np.array([1], np.int64))])
        end2 = g.op1(A, "Unsqueeze", [ns, g.const(A, np.array([0], np.int64))])
        m2 = g.op1(A, "Slice", [m1, g.const(A, np.array([0], np.int64)), end2, g.const(A, np.array([3], np.int64)),
                                g.const(A, np.array([1], np.int64))])
        cond = g.op1(A, "Cast", [m2], to=TensorProto.BOOL)
        w = g.op1(A, "Where", [cond, w, g.const(A, np.array(-10000.0, np.float32))])
        w = g.op1(A, "Softmax", [w], axis=3)
        a = g.op1(A, "MatMul", [w, vh])
        a = g.op1(A, "Transpose", [a], perm=[0, 2, 1, 3])
        sa = g.op1(A, "Shape", [a])
        a0 = g.op1(A, "Unsqueeze", [g.op1(A, "Gather", [sa, g.const(A, np.array(0, np.int64))], axis=0),
                                    g.const(A, np.array([0], np.int64))])
        a1 = g.op1(A, "Unsqueeze", [g.op1(A, "Gather", [sa, g.const(A, np.array(1, np.int64))], axis=0),
                                    g.const(A, np.array([0], np.int64))])
        a = g.op1(A, "Reshape", [a, g.op1(A, "Concat", [a0, a1, g.const(A, np.array([h], np.int64))], axis=0)])
        a = conv1d(f"{A}/c_proj", a, f"{P}.attn.c_proj", h, h, 1.0 / np.sqrt(h))
        x = g.op1(L, "Add", [a, x])
        ln2 = layer_norm(f"{L}/ln_2", x, f"{P}.ln_2")
        M = f"{L}/mlp"
        f = conv1d(f"{M}/c_fc", ln2, f"{P}.mlp.c_fc", h, 4 * h, 1.0 / np.sqrt(h))
        # gelu_new: 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0))))
        act = f"{M}/act"
        half = g.op1(act, "Mul", [f, g.const(act, np.array(0.5, np.float32))])
        p3 = g.op1(act, "Pow", [f, g.const(act, np.array(3.0, np.float32))])
        c = g.op1(act, "Mul", [p3, g.const(act, np.array(0.044715, np.float32))])
        c = g.op1(act, "Add", [f, c])
        c = g.op1(act, "Mul", [c, g.const(act, np.array(np.sqrt(2.0 / np.pi), np.float32))])
        c = g.op1(act, "Tanh", [c])
        c = g.op1(act, "Add", [c, g.const(act, np.array(1.0, np.float32))])
        f = g.op1(act, "Mul", [half, c])
        f = conv1d(f"{M}/c_proj", f, f"{P}.mlp.c_proj", 4 * h, h, 1.0 / np.sqrt(4 * h))
        x = g.op1(L, "Add", [x, f])
    x = layer_norm(f"{sc}/ln_f", x, "transformer.ln_f")
    # tied lm_head: the exporter writes the transposed weight as its own initializer
    wt = g.init("onnx::MatMul_lm_head", np.ascontiguousarray(numpy_helper.to_array(g.inits[0]).T))
    g.nodes.append(helper.make_node("MatMul", [x, wt], ["logits"], name="/lm_head/MatMul"))

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch_size", "sequence_length", GPT_VOCAB])]
    graph = helper.make_graph(g.nodes, "main_graph", inputs, outputs, g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pytorch",
                          producer_version="2.8.0")
    m.ir_version = 7
    return m


def gpt2_feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(102)
    return {"input_ids": rng.integers(0, GPT_VOCAB, (2, 8), dtype=np.int64)}


# ----------------------------------------------------------------------------------------------
# 3. MatMulNBits: onnxruntime's MatMulNBitsQuantizer on the BERT export


def nbits_quantize(model: onnx.ModelProto, symmetric: bool, accuracy_level: int | None = None) -> onnx.ModelProto:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(onnx.ModelProto.FromString(model.SerializeToString()), bits=4, block_size=32,
                             is_symmetric=symmetric, accuracy_level=accuracy_level)
    q.process()
    return q.model.model


# ----------------------------------------------------------------------------------------------
# 4. onnxruntime-genai model builder style decoder (Llama-shaped, int4)

D_HIDDEN, D_HEADS, D_KV, D_LAYERS, D_VOCAB, D_FF, D_POS = 64, 4, 2, 2, 100, 128, 128


def genai_decoder() -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    h, nh, kv, hd = D_HIDDEN, D_HEADS, D_KV, D_HIDDEN // D_HEADS
    g = G()
    nodes = g.nodes

    def node(op, inputs, outputs, name, domain="", **attrs):
        nodes.append(helper.make_node(op, inputs, outputs, name=name, domain=domain or None, **attrs))
        return outputs[0]

    def matmul(name: str, x: str, k: int, n: int) -> str:
        w = g.init(f"{name[1:].replace('/', '.')}.weight", randn(rng, (k, n), 1.0 / np.sqrt(k)))
        return node("MatMul", [x, w], [f"{name}/output_0"], name)

    def norm_weight(name: str) -> str:
        return g.init(name, (1.0 + randn(rng, (h,), 0.1)).astype(np.float32))

    emb = g.init("model.embed_tokens.weight", randn(rng, (D_VOCAB, h), 0.5))
    x = node("Gather", [emb, "input_ids"], ["/model/embed_tokens/Gather/output_0"], "/model/embed_tokens/Gather")

    # attention mask reformatting for GroupQueryAttention
    S = "/model/attn_mask_reformat/attn_mask_subgraph"
    one = g.init(f"{S}/Sub/Constant", np.array(1, np.int64))  # builder stores constants as initializers
    axes = g.init(f"{S}/ReduceSum/Constant", np.array([1], np.int64))
    rs = node("ReduceSum", ["attention_mask", axes], [f"{S}/ReduceSum/output_0"], f"{S}/ReduceSum", keepdims=0)
    sub = node("Sub", [rs, one], [f"{S}/Sub/output_0"], f"{S}/Sub")
    seqlens_k = node("Cast", [sub], [f"{S}/Sub/Cast/output_0"], f"{S}/Sub/Cast", to=TensorProto.INT32)
    shp = node("Shape", ["attention_mask"], [f"{S}/Shape/output_0"], f"{S}/Shape")
    idx = g.init(f"{S}/Gather/Constant", np.array(1, np.int64))
    tot = node("Gather", [shp, idx], [f"{S}/Gather/output_0"], f"{S}/Gather", axis=0)
    total_len = node("Cast", [tot], [f"{S}/Gather/Cast/output_0"], f"{S}/Gather/Cast", to=TensorProto.INT32)

    inv = 1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    freqs = np.outer(np.arange(D_POS, dtype=np.float64), inv)
    cos = g.init("cos_cache", np.cos(freqs).astype(np.float32))
    sin = g.init("sin_cache", np.sin(freqs).astype(np.float32))

    eps = 1e-6
    residual = None
    normed = None
    for i in range(D_LAYERS):
        L = f"/model/layers.{i}"
        w_in = norm_weight(f"model.layers.{i}.input_layernorm.weight")
        if i == 0:
            normed = node("SimplifiedLayerNormalization", [x, w_in], [f"{L}/input_layernorm/output_0"],
                          f"{L}/input_layernorm/LayerNorm", axis=-1, epsilon=eps, stash_type=1)
            residual = x
        else:
            n0 = f"{L}/input_layernorm/SkipLayerNorm"
            normed = node("SkipSimplifiedLayerNormalization", [x, residual, w_in],
                          [f"{n0}/output_0", "", "", f"{n0}/output_3"], n0, MS, epsilon=eps)
            residual = f"{n0}/output_3"
        A = f"{L}/attn"
        q = matmul(f"{A}/q_proj/MatMul", normed, h, nh * hd)
        k = matmul(f"{A}/k_proj/MatMul", normed, h, kv * hd)
        v = matmul(f"{A}/v_proj/MatMul", normed, h, kv * hd)
        q = node("RotaryEmbedding", [q, "position_ids", cos, sin], [f"{A}/q_rotary/output_0"],
                 f"{A}/q_rotary/RotaryEmbedding", MS, interleaved=0)
        k = node("RotaryEmbedding", [k, "position_ids", cos, sin], [f"{A}/k_rotary/output_0"],
                 f"{A}/k_rotary/RotaryEmbedding", MS, interleaved=0)
        att = node("GroupQueryAttention",
                   [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k, total_len],
                   [f"{A}/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                   f"{A}/GroupQueryAttention", MS, num_heads=nh, kv_num_heads=kv, scale=float(1.0 / np.sqrt(hd)),
                   local_window_size=-1, do_rotary=0, rotary_interleaved=0, softcap=0.0)
        o = matmul(f"{A}/o_proj/MatMul", att, nh * hd, h)
        w_post = norm_weight(f"model.layers.{i}.post_attention_layernorm.weight")
        n1 = f"{L}/post_attention_layernorm/SkipLayerNorm"
        normed = node("SkipSimplifiedLayerNormalization", [o, residual, w_post],
                      [f"{n1}/output_0", "", "", f"{n1}/output_3"], n1, MS, epsilon=eps)
        residual = f"{n1}/output_3"
        M = f"{L}/mlp"
        gate = matmul(f"{M}/gate_proj/MatMul", normed, h, D_FF)
        up = matmul(f"{M}/up_proj/MatMul", normed, h, D_FF)
        sig = node("Sigmoid", [gate], [f"{M}/act_fn/Sigmoid/output_0"], f"{M}/act_fn/Sigmoid")
        silu = node("Mul", [gate, sig], [f"{M}/act_fn/Mul/output_0"], f"{M}/act_fn/Mul")
        prod = node("Mul", [silu, up], [f"{M}/Mul/output_0"], f"{M}/Mul")
        x = matmul(f"{M}/down_proj/MatMul", prod, D_FF, h)
    w_f = norm_weight("model.layers.%d.final_norm_layernorm.weight" % D_LAYERS)
    nf = f"/model/layers.{D_LAYERS}/final_norm_layernorm/SkipLayerNorm"
    normed = node("SkipSimplifiedLayerNormalization", [x, residual, w_f], [f"{nf}/output_0", "", "", f"{nf}/output_3"],
                  nf, MS, epsilon=eps)
    wl = g.init("lm_head.MatMul.weight", randn(rng, (h, D_VOCAB), 1.0 / np.sqrt(h)))
    node("MatMul", [normed, wl], ["logits"], "/lm_head/MatMul")

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", i64, ["batch_size", "sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", D_VOCAB])]
    for i in range(D_LAYERS):
        for kind in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", f32,
                                                        ["batch_size", kv, "past_sequence_length", hd]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kind}", f32,
                                                         ["batch_size", kv, "total_sequence_length", hd]))
    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
                          producer_name="onnxruntime-genai", producer_version="0.8.0")
    m.ir_version = 10
    # the builder quantizes its MatMuls to MatMulNBits with onnxruntime's quantizer (int4, accuracy 4)
    return nbits_quantize(m, symmetric=True, accuracy_level=4)


def genai_feeds(b: int, past: int, s: int, seed: int) -> dict[str, np.ndarray]:
    """GroupQueryAttention on CPU takes a past with sequence_length > 1 only at batch 1."""
    rng = np.random.default_rng(seed)
    hd = D_HIDDEN // D_HEADS
    feeds = {
        "input_ids": rng.integers(0, D_VOCAB, (b, s), dtype=np.int64),
        "attention_mask": np.ones((b, past + s), np.int64),
        "position_ids": np.tile(np.arange(past, past + s, dtype=np.int64), (b, 1)),
    }
    for i in range(D_LAYERS):
        for kind in ("key", "value"):
            feeds[f"past_key_values.{i}.{kind}"] = randn(rng, (b, D_KV, past, hd), 1.0)
    return feeds


# ----------------------------------------------------------------------------------------------
# 5. a standard-op model around one custom-domain node


def custom_domain_op() -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    g = G()
    w = g.init("conv.weight", randn(rng, (8, 3, 3, 3), 0.3))
    b = g.init("conv.bias", randn(rng, (8,), 0.05))
    n = g.nodes
    n.append(helper.make_node("Conv", ["input", w, b], ["conv_out"], name="/conv/Conv", pads=[1, 1, 1, 1]))
    n.append(helper.make_node("Identity", ["conv_out"], ["conv_id"], name="/Identity"))
    n.append(helper.make_node("Relu", ["conv_id"], ["relu_out"], name="/relu/Relu"))
    n.append(helper.make_node("Transpose", ["relu_out"], ["nhwc"], name="/Transpose", perm=[0, 2, 3, 1]))
    n.append(helper.make_node("Transpose", ["nhwc"], ["nchw"], name="/Transpose_1", perm=[0, 3, 1, 2]))
    one = g.init("one", np.array(1.0, np.float32))
    n.append(helper.make_node("Mul", ["nchw", one], ["scaled"], name="/Mul"))
    n.append(helper.make_node("MyGelu", ["scaled"], ["gelu_out"], name="/act/MyGelu", domain="com.company",
                              approximate="tanh"))
    n.append(helper.make_node("GlobalAveragePool", ["gelu_out"], ["pooled"], name="/pool/GlobalAveragePool"))
    n.append(helper.make_node("Flatten", ["pooled"], ["flat"], name="/Flatten", axis=1))
    # a constant subgraph: the head's weight is base * scale, computed at run time
    base = g.init("head.weight_base", randn(rng, (8, 10), 0.3))
    n.append(helper.make_node("Constant", [], ["head_scale"], name="/head/Constant",
                              value=numpy_helper.from_array(np.array(0.5, np.float32), "")))
    n.append(helper.make_node("Mul", [base, "head_scale"], ["head_w"], name="/head/Mul"))
    n.append(helper.make_node("MatMul", ["flat", "head_w"], ["mm"], name="/head/MatMul"))
    hb = g.init("head.bias", randn(rng, (10,), 0.05))
    n.append(helper.make_node("Add", ["mm", hb], ["logits"], name="/head/Add"))
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        n, "main_graph",
        [helper.make_tensor_value_info("input", f32, ["batch_size", 3, 16, 16])],
        [helper.make_tensor_value_info("logits", f32, ["batch_size", 10])],
        g.inits,
        value_info=[helper.make_tensor_value_info("gelu_out", f32, ["batch_size", 8, 16, 16])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.company", 1)],
                          producer_name="make_contrib_models")
    m.ir_version = 8
    return m


# ----------------------------------------------------------------------------------------------


def main() -> None:
    logging.getLogger("onnxruntime").setLevel(logging.WARNING)
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, onnx.ModelProto, bool, str]] = []

    bert = bert_export()
    bf = bert_feeds()
    made.append(("bert_export", bert, True, ""))
    fused = ort_optimize(bert, "bert", BERT_HEADS, BERT_HIDDEN)
    made.append(("bert_ort_fused", fused, True, f"max |fused - export| = {max_diff(run_ort(fused, bf), run_ort(bert, bf)):.2e}"))
    q = nbits_quantize(bert, symmetric=True)
    made.append(("bert_matmulnbits_int4", q, True, f"max |int4 - export| = {max_diff(run_ort(q, bf), run_ort(bert, bf)):.2e}"))
    qa = nbits_quantize(bert, symmetric=False)
    made.append(("bert_matmulnbits_int4_asym", qa, True, f"max |int4 - export| = {max_diff(run_ort(qa, bf), run_ort(bert, bf)):.2e}"))

    gpt = gpt2_export_opset13()
    gf = gpt2_feeds()
    made.append(("gpt2_export_opset13", gpt, True, ""))
    gfused = ort_optimize(gpt, "gpt2", GPT_HEADS, GPT_HIDDEN)
    made.append(("gpt2_ort_fused_opset13", gfused, True, f"max |fused - export| = {max_diff(run_ort(gfused, gf), run_ort(gpt, gf)):.2e}"))

    made.append(("genai_decoder", genai_decoder(), True, ""))
    made.append(("custom_domain_op", custom_domain_op(), False, ""))

    feeds = {"bert": [bf], "gpt2": [gf], "genai": [genai_feeds(2, 5, 1, 104), genai_feeds(1, 3, 4, 105)]}
    report = []
    for name, model, has_data, note in made:
        f = feeds[name.split("_")[0]] if has_data else []
        checked = write_case(name, model, f)
        size = (OUT / name / "model.onnx").stat().st_size
        total = sum(p.stat().st_size for p in (OUT / name).rglob("*") if p.is_file())
        hist = histogram(model)
        report.append((name, model, size, total, hist, note, checked))
        print(f"{name}: {size:,} bytes (with data {total:,}); checker {checked}; {note}")
        print("   ", ", ".join(f"{k} {v}" for k, v in hist))
    print(f"total {sum(r[3] for r in report):,} bytes")
    write_readme(report)


def io_sig(model: onnx.ModelProto) -> str:
    def one(vi):
        t = vi.type.tensor_type
        dims = ",".join(d.dim_param or str(d.dim_value) for d in t.shape.dim)
        return f"`{vi.name}` {helper.tensor_dtype_to_np_dtype(t.elem_type).name}[{dims}]"

    return "; ".join(one(v) for v in model.graph.input) + " &rarr; " + "; ".join(one(v) for v in model.graph.output)


def write_readme(report) -> None:
    rows, ops, sigs = [], [], []
    for name, model, size, total, hist, note, checked in report:
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        sets = len(list((OUT / name).glob("test_data_set_*")))
        rows.append(f"| `{name}` | {opsets} | {len(model.graph.node)} | {len(model.graph.initializer)} | {size:,} | "
                    f"{total:,} | {sets} | {checked} |")
        ops.append(f"| `{name}` | " + ", ".join(f"{k} {v}" for k, v in hist) + " |")
        sigs.append(f"- `{name}`: {io_sig(model)}" + (f" ({note})" if note else ""))
    total = sum(r[3] for r in report)
    text = (README.replace("@TABLE@", "\n".join(rows)).replace("@OPS@", "\n".join(ops))
            .replace("@IO@", "\n".join(sigs)).replace("@TOTAL@", f"{total:,}"))
    (OUT / "README.md").write_text(text)


README = r"""# Models with onnxruntime's contrib ops (com.microsoft) and a custom-domain op

Small models shaped like what onnxruntime's own tools write, for checking and optimizing models
that hold `com.microsoft` operators, each beside its standard-op original where one exists (so the
check's cost on a contrib model can be compared with the model it came from). Written by
`scripts/make_contrib_models.py` (seeded; a re-run with the same versions writes the same bytes).

Layout (as in the ONNX backend test data):

```
<name>/model.onnx                        one file, no external data
<name>/test_data_set_N/input_i.pb        onnx TensorProto, .name = graph input i's name
<name>/test_data_set_N/output_i.pb       onnx TensorProto, .name = graph output i's name
```

The stored outputs are onnxruntime 1.31.1's on the stored inputs: CPU provider, graph
optimizations off (`ORT_DISABLE_ALL`), 1 thread. The inputs are valid: token ids in the vocabulary,
masks 0/1 (bert's second sequence is padded from position 5), segment ids 0/1, position ids
within the cache, past key/value random normal. `custom_domain_op` has **no test data set**:
onnxruntime cannot run a node of domain `com.company`.

## How they were made

```sh
target/venv-peers/bin/python -m pip install --only-binary=:all: --no-deps \
    --target target/contrib-models-py -r scripts/requirements-contrib-models.txt   # onnx-ir 1.1.0
PYTHONPATH=target/contrib-models-py target/venv-peers/bin/python scripts/make_contrib_models.py
```

Versions: onnxruntime 1.31.1, onnx 1.23.2, numpy 2.4.6, onnx-ir 1.1.0 (onnxruntime's
`MatMulNBitsQuantizer` imports it), Python 3.11. torch is not installed; see each model for how its
"export" was obtained. Weights are random under fixed seeds (matrices scaled by 1/sqrt(fan-in),
biases ~N(0, 0.05), norm weights 1 + N(0, 0.1): none is exactly 0 or 1).

- **`bert_export`** (standard ops, opset 13, IR 7): the TorchScript exporter's graph of HF
  bert-tiny (`../shared/models/bert-tiny-opset13`, torch 2.8.0, `dynamo=False`), kept node for
  node (names, `Constant` nodes, the Shape/Gather/Unsqueeze/Concat reshape arithmetic, the
  decomposed LayerNorm `ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add`, erf GELU, the
  `(1 - mask) * finfo.min` additive mask, the pooler `Gather, Gemm, Tanh`), resized to hidden 64,
  4 heads (head size 16), 2 layers, intermediate 256, vocab 100, 64 positions: the script patches
  the head count, head size, hidden and `sqrt(head_size)` constants, the position-id buffer, and
  writes new initializers. The exporter wrote `Identity` nodes for parameters equal to another
  (bert-tiny's untrained biases are all 0); with distinct values it would write each as its own
  initializer, so they are initializers here. Inputs and outputs: see below.
- **`bert_ort_fused`**: `bert_export` through
  `onnxruntime.transformers.optimizer.optimize_model(model_type="bert", num_heads=4, hidden_size=64,
  opt_level=0)`, saved with its `save_model_to_file` (which adds the `com.microsoft` opset import).
  It holds `EmbedLayerNormalization` (with `mask_index` from `attention_mask`), `Attention` (packed
  QKV weight and bias, `mask_filter_value = -3.4e38` taken from the export's mask),
  `SkipLayerNormalization` (with bias), `BiasGelu`; the `int64` inputs are `Cast` to `int32` for
  them. The other BERT inputs tried: `tests/models/torch/bert_opset18.onnx` (dynamo exporter,
  opset 18) only fuses EmbedLayerNormalization, SkipLayerNormalization and BiasGelu, not
  Attention, so the TorchScript graph is the one used.
- **`bert_matmulnbits_int4`** / **`bert_matmulnbits_int4_asym`**: `bert_export` (before fusion)
  through `onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer(bits=4,
  block_size=32, is_symmetric=True / False)`: the 12 weight MatMuls become `MatMulNBits` (uint8
  packed int4 `B` [N, K/32, 16], float `scales`; the asymmetric one also has packed uint8
  `zero_points`); the 4 activation MatMuls (QK^T, PV) and the pooler Gemm stay.
- **`gpt2_export_opset13`** (standard ops, opset 13, IR 7): HF GPT-2 (no past) as the TorchScript
  exporter writes it, built with `onnx.helper` (names like `/transformer/h.0/attn/Split`,
  `Constant` nodes): token + position embedding (`Range` over the sequence length), decomposed
  LayerNorm, Conv1D as `Reshape(-1, K), Gemm, Reshape(Concat(Shape...))`, QKV `Split` (sizes as an
  input, opset 13), heads by Reshape/Transpose, `Div` by sqrt(head size), the causal mask
  `Slice(Slice(bias[1,1,64,64] uint8))` on `Shape` arithmetic then `Cast` to bool and `Where(mask,
  w, -10000)`, `Softmax`, gelu_new in tanh form (`Mul 0.5, Pow 3, Mul, Add, Mul, Tanh, Add, Mul`),
  final LayerNorm, tied lm_head `MatMul`. Hidden 64, 4 heads, 2 layers, vocab 100, 64 positions.
- **`gpt2_ort_fused_opset13`**: `gpt2_export_opset13` through `optimize_model(model_type="gpt2",
  num_heads=4, hidden_size=64, opt_level=0)` with `FusionOptions("gpt2")` and
  `enable_embed_layer_norm = False` (the optimizer's `--disable_embed_layer_norm`): with it on, the
  first LayerNorm becomes `EmbedLayerNormalization` and no default-domain `LayerNormalization` is
  left. It holds **`LayerNormalization` in the default domain at opset 13** (onnxruntime registers
  its own kernel there below opset 17 and runs it; ONNX defines it from 17 on, so `onnx.checker` rejects this file, see the
  table), `Attention` with `unidirectional=1` and no mask, `SkipLayerNormalization` (with bias, 4
  outputs), `FastGelu` (with bias).
- **`genai_decoder`** (opset 21 + com.microsoft 1, IR 10): a 2-layer Llama-shaped decoder written
  the way onnxruntime-genai's model builder writes one, built with `onnx.helper` and its MatMuls
  then quantized by `MatMulNBitsQuantizer(bits=4, block_size=32, is_symmetric=True,
  accuracy_level=4)` (as the builder does for int4 CPU): embedding `Gather`;
  `/model/attn_mask_reformat/attn_mask_subgraph` computing `seqlens_k = Cast<int32>(ReduceSum(
  attention_mask, axes=[1], keepdims=0) - 1)` and `total_sequence_length =
  Cast<int32>(Gather(Shape(attention_mask), 1))`; `SimplifiedLayerNormalization` (default domain,
  onnxruntime's registration; `onnx.checker` rejects it) for layer 0's input norm and
  `SkipSimplifiedLayerNormalization` (outputs 0 and 3 used) for the others; q/k/v/o, gate/up/down
  and lm_head as `MatMulNBits`; `RotaryEmbedding` on q and k (3-D input, `position_ids` input,
  cos/sin caches [128, 8]) then `GroupQueryAttention` (num_heads 4, kv_num_heads 2,
  head size 16, scale 0.25, `do_rotary=0`) with `past_key_values.N.key/value` [batch_size, 2,
  past_sequence_length, 16] and `present.N.key/value` [batch_size, 2, total_sequence_length, 16];
  SwiGLU MLP (`Sigmoid, Mul, Mul`, intermediate 128); vocab 100. Two test data sets:
  `test_data_set_0` is a decoding step (batch 2, past 5, 1 new token) and `test_data_set_1` a
  prompt continued on a past (batch 1, past 3, 4 new tokens): onnxruntime's CPU
  GroupQueryAttention refuses a past with sequence_length > 1 at batch > 1 ("batch_size must be 1
  when sequence_length > 1 and past context is given"). Masks are all ones (no padding).
- **`custom_domain_op`** (opset 17 + `com.company` 1, IR 8): `Conv(3->8, 3x3, pad 1)`, `Identity`,
  `Relu`, `Transpose` to NHWC and back, `Mul` by 1, then one **`com.company.MyGelu`** node
  (attribute `approximate="tanh"`) whose output `gelu_out` float[batch_size, 8, 16, 16] is
  declared in `value_info`, then `GlobalAveragePool`, `Flatten`, and a head whose weight is a
  constant subgraph (`Mul(initializer, Constant 0.5)`) before `MatMul`, `Add`. The redundancy
  (Identity, Transpose pair, Mul by 1, the constant Mul) is there for an optimizer to remove.
  No test data set (onnxruntime has no kernel for `com.company.MyGelu`).

## Files

Sizes in bytes; "with data" adds the test data sets. `onnx.checker.check_model(full_check=True)`
as run by the script:

| model | opsets | nodes | initializers | model.onnx | with data | data sets | onnx.checker |
|---|---|---|---|---|---|---|---|
@TABLE@

Total: @TOTAL@ bytes.

## Inputs and outputs

@IO@

## Operators

| model | operators |
|---|---|
@OPS@
"""

if __name__ == "__main__":
    main()
