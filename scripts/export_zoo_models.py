#!/usr/bin/env python3
"""Build tests/models/zoo: small models unlike the development models, for benchmarking onnx-opt
against its peers (benches/compare_peers.py --models tests/models/zoo).

Every model is tests/models/zoo/<name>/model.onnx (a single file, no external data) plus
tests/models/zoo/<name>/test_data_set_0/{input_N,output_N}.pb: serialized onnx TensorProtos whose
`.name` is the graph input/output name, in graph order (the ONNX backend test data layout). The
stored outputs are onnxruntime's (CPU provider, 1 thread, graph optimizations off) on the stored
inputs; for the torch models the script also checks them against torch's outputs.

Three steps, two venvs (the peers venv has no torch; the quantization step is meant for the
peers venv, where benches/compare_peers.py runs, but the torch venv's onnxruntime 1.31.1 writes
the same bytes):

  target/venv-torch/bin/python scripts/export_zoo_models.py --step export
      torch dynamo exporter (torch.onnx.export(..., dynamo=True)): vit_opset18, vit_opset23,
      convnext_opset18, gpt2_opset18, t5_opset18, cnn_opset17 (float, the source of the QDQ
      model), transformer_float16_opset18
  target/venv-peers/bin/python scripts/export_zoo_models.py --step quantize
      onnxruntime.quantization: cnn_qdq_int8 (quantize_static, QDQ, per channel) from
      cnn_opset17, vit_dynamic_int8 (quantize_dynamic, QOperator) from vit_opset18
  target/venv-peers/bin/python scripts/export_zoo_models.py --step check
      (either venv) re-checks every model: checker (full_check), onnxruntime reproduces the
      stored outputs, sizes, node counts and operator histograms (a Markdown table)

`--step all` runs the steps its interpreter can run. Weights are random under fixed seeds (see
SEEDS); inputs are drawn from numpy/torch generators under fixed seeds, so a re-run with the same
versions writes the same bytes.

usage: PYTHON scripts/export_zoo_models.py [--step export|quantize|check|all] [--out DIR]
                                          [--only NAME ...]
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.version_converter
from onnx import numpy_helper

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO_ROOT, "tests", "models", "zoo")

# One seed per model: torch.manual_seed(seed) before building the module (weights) and the
# example/test inputs; numpy seeds for the quantization calibration and the quantized models'
# inputs.
SEEDS = {
    "vit": 10,
    "convnext": 11,
    "gpt2": 12,
    "t5": 13,
    "cnn": 14,
    "transformer_float16": 15,
    "cnn_qdq_int8_calibration": 16,
    "vit_dynamic_int8": 17,
}

TORCH_MODELS = ("vit_opset18", "vit_opset23", "convnext_opset18", "gpt2_opset18", "t5_opset18",
                "cnn_opset17", "transformer_float16_opset18")
QUANT_MODELS = ("cnn_qdq_int8", "vit_dynamic_int8")


# =============================================================================== helpers (numpy)
def histogram(model):
    return collections.Counter(n.op_type for n in model.graph.node)


def hist_text(model):
    hist = histogram(model)
    return ", ".join(f"{op} {c}" for op, c in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


def dims(value_info):
    t = value_info.type.tensor_type
    elem = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
    return f"{elem}[{','.join(d.dim_param or str(d.dim_value) for d in t.shape.dim)}]"


def ort_session(path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def write_test_data(model_dir, model, inputs):
    """Run onnxruntime on `inputs` (arrays in graph input order) and write test_data_set_0.
    Returns onnxruntime's outputs in graph output order."""
    path = os.path.join(model_dir, "model.onnx")
    sess = ort_session(path)
    in_names = [i.name for i in model.graph.input]
    out_names = [o.name for o in model.graph.output]
    assert [i.name for i in sess.get_inputs()] == in_names, (sess.get_inputs(), in_names)
    outputs = sess.run(out_names, dict(zip(in_names, inputs)))
    data_dir = os.path.join(model_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    for old in os.listdir(data_dir):
        if old.endswith(".pb"):
            os.remove(os.path.join(data_dir, old))
    for kind, names, arrays in (("input", in_names, inputs), ("output", out_names, outputs)):
        for i, (name, arr) in enumerate(zip(names, arrays)):
            with open(os.path.join(data_dir, f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.ascontiguousarray(arr), name).SerializeToString())
    return outputs


def read_test_data(model_dir, kind):
    data_dir = os.path.join(model_dir, "test_data_set_0")
    paths = sorted((p for p in os.listdir(data_dir) if p.startswith(kind + "_")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    out = []
    for p in paths:
        t = onnx.TensorProto()
        with open(os.path.join(data_dir, p), "rb") as f:
            t.ParseFromString(f.read())
        out.append((t.name, numpy_helper.to_array(t)))
    return out


def save_checked(proto, model_dir):
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, "model.onnx")
    # Through onnx, so that no tensor is externalized (the models are small).
    onnx.save_model(proto, path, save_as_external_data=False)
    loaded = onnx.load(path)
    onnx.checker.check_model(loaded, full_check=True)
    return path, loaded


def describe(name, path, model):
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    print(f"{name}: {os.path.relpath(path, REPO_ROOT)} ({os.path.getsize(path)} bytes), "
          f"opsets {opsets}, ir_version {model.ir_version}, {len(model.graph.node)} nodes, "
          f"{len(model.graph.initializer)} initializers, {len(model.functions)} functions")
    print("  inputs: ", ", ".join(f"{i.name} {dims(i)}" for i in model.graph.input))
    print("  outputs:", ", ".join(f"{o.name} {dims(o)}" for o in model.graph.output))
    print("  ops:", hist_text(model))


# =============================================================================== torch models
def torch_models():
    """The torch modules; defined inside a function so that --step quantize/check need no torch."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    # ------------------------------------------------------------------ ViT
    class ViTAttention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads, self.head_dim = heads, dim // heads
            self.scale = self.head_dim ** -0.5
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            b, n, c = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = torch.matmul(q * self.scale, k.transpose(-2, -1))
            attn = attn.softmax(dim=-1)
            return self.proj(torch.matmul(attn, v).transpose(1, 2).reshape(b, n, c))

    class ViTBlock(nn.Module):
        def __init__(self, dim, heads, mlp):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = ViTAttention(dim, heads)
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.fc1 = nn.Linear(dim, mlp)
            self.fc2 = nn.Linear(mlp, dim)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))  # erf GELU

    class TinyViT(nn.Module):
        def __init__(self, image=32, patch=8, dim=32, heads=4, mlp=64, layers=2, classes=10):
            super().__init__()
            n = (image // patch) ** 2
            self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
            self.cls_token = nn.Parameter(0.1 * torch.randn(1, 1, dim))
            self.pos_embed = nn.Parameter(0.1 * torch.randn(1, n + 1, dim))
            self.blocks = nn.ModuleList(ViTBlock(dim, heads, mlp) for _ in range(layers))
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, classes)

        def forward(self, pixel_values):
            x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)  # (B, N, D)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls, x), dim=1) + self.pos_embed
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x)[:, 0])

    # ------------------------------------------------------------------ ConvNeXt
    class ChannelsFirstLayerNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
            self.bias = nn.Parameter(0.1 * torch.randn(dim))
            self.eps = eps

        def forward(self, x):
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            return self.weight[:, None, None] * x + self.bias[:, None, None]

    class ConvNeXtBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.pwconv1 = nn.Linear(dim, 4 * dim)
            self.pwconv2 = nn.Linear(4 * dim, dim)
            # layer scale: real ConvNeXt initializes it to 1e-6; random here so it matters
            self.gamma = nn.Parameter(0.5 + 0.1 * torch.randn(dim))

        def forward(self, x):
            y = self.dwconv(x).permute(0, 2, 3, 1)  # NCHW -> NHWC
            y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
            y = (self.gamma * y).permute(0, 3, 1, 2)  # NHWC -> NCHW
            return x + y

    class TinyConvNeXt(nn.Module):
        def __init__(self, dims=(16, 32), depths=(2, 2), classes=10):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4),
                                      ChannelsFirstLayerNorm(dims[0]))
            self.stage1 = nn.Sequential(*[ConvNeXtBlock(dims[0]) for _ in range(depths[0])])
            self.down = nn.Sequential(ChannelsFirstLayerNorm(dims[0]),
                                      nn.Conv2d(dims[0], dims[1], 2, stride=2))
            self.stage2 = nn.Sequential(*[ConvNeXtBlock(dims[1]) for _ in range(depths[1])])
            self.norm = nn.LayerNorm(dims[1], eps=1e-6)
            self.head = nn.Linear(dims[1], classes)

        def forward(self, pixel_values):
            x = self.stage2(self.down(self.stage1(self.stem(pixel_values))))
            return self.head(self.norm(x.mean([-2, -1])))  # global average pool

    # ------------------------------------------------------------------ GPT-2
    class Conv1D(nn.Module):
        """GPT-2's Conv1D: a Linear with the weight stored (in, out), computed with addmm."""

        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(0.2 * torch.randn(nx, nf))
            self.bias = nn.Parameter(0.1 * torch.randn(nf))

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    def new_gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class GPT2Attention(nn.Module):
        def __init__(self, dim, heads, max_pos):
            super().__init__()
            self.heads, self.head_dim, self.dim = heads, dim // heads, dim
            self.c_attn = Conv1D(3 * dim, dim)
            self.c_proj = Conv1D(dim, dim)
            self.register_buffer(
                "bias", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool)).view(1, 1, max_pos, max_pos),
                persistent=False)

        def split_heads(self, x):
            return x.view(x.size()[:-1] + (self.heads, self.head_dim)).permute(0, 2, 1, 3)

        def forward(self, x):
            q, k, v = self.c_attn(x).split(self.dim, dim=2)
            q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            s = q.size(-2)
            causal = self.bias[:, :, :s, :s]
            w = w.masked_fill(~causal, torch.finfo(w.dtype).min)
            a = torch.matmul(w.softmax(dim=-1), v).permute(0, 2, 1, 3).contiguous()
            return self.c_proj(a.view(a.size()[:-2] + (self.dim,)))

    class GPT2Block(nn.Module):
        def __init__(self, dim, heads, max_pos):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
            self.attn = GPT2Attention(dim, heads, max_pos)
            self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
            self.c_fc = Conv1D(4 * dim, dim)
            self.c_proj = Conv1D(dim, 4 * dim)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(new_gelu(self.c_fc(self.ln_2(x))))

    class TinyGPT2(nn.Module):
        def __init__(self, vocab=128, dim=32, heads=4, layers=2, max_pos=64):
            super().__init__()
            self.wte = nn.Embedding(vocab, dim)
            self.wpe = nn.Embedding(max_pos, dim)
            self.h = nn.ModuleList(GPT2Block(dim, heads, max_pos) for _ in range(layers))
            self.ln_f = nn.LayerNorm(dim, eps=1e-5)

        def forward(self, input_ids):
            pos = torch.arange(input_ids.shape[1], dtype=torch.long).unsqueeze(0)
            x = self.wte(input_ids) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # lm head tied to wte

    # ------------------------------------------------------------------ T5
    class T5LayerNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
            self.eps = eps

        def forward(self, x):
            var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(var + self.eps))

    def relative_position_bucket(rel, bidirectional, num_buckets, max_distance):
        buckets = 0
        if bidirectional:
            num_buckets //= 2
            buckets = buckets + (rel > 0).to(torch.long) * num_buckets
            rel = torch.abs(rel)
        else:
            rel = -torch.min(rel, torch.zeros_like(rel))
        max_exact = num_buckets // 2
        is_small = rel < max_exact
        large = max_exact + (torch.log(rel.float() / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return buckets + torch.where(is_small, rel, large)

    class T5Attention(nn.Module):
        def __init__(self, dim, heads, d_kv, bidirectional, has_bias, num_buckets=32, max_distance=128):
            super().__init__()
            self.heads, self.d_kv = heads, d_kv
            self.bidirectional, self.num_buckets, self.max_distance = bidirectional, num_buckets, max_distance
            inner = heads * d_kv
            self.q = nn.Linear(dim, inner, bias=False)
            self.k = nn.Linear(dim, inner, bias=False)
            self.v = nn.Linear(dim, inner, bias=False)
            self.o = nn.Linear(inner, dim, bias=False)
            self.relative_attention_bias = nn.Embedding(num_buckets, heads) if has_bias else None

        def compute_bias(self, q_len, k_len):
            ctx = torch.arange(q_len, dtype=torch.long)[:, None]
            mem = torch.arange(k_len, dtype=torch.long)[None, :]
            buckets = relative_position_bucket(mem - ctx, self.bidirectional, self.num_buckets,
                                               self.max_distance)
            values = self.relative_attention_bias(buckets)  # (q, k, H)
            return values.permute([2, 0, 1]).unsqueeze(0)  # (1, H, q, k)

        def shape(self, x, b):
            return x.view(b, -1, self.heads, self.d_kv).transpose(1, 2)

        def forward(self, x, kv, bias):
            b = x.shape[0]
            q, k, v = self.shape(self.q(x), b), self.shape(self.k(kv), b), self.shape(self.v(kv), b)
            scores = torch.matmul(q, k.transpose(3, 2))  # T5: no 1/sqrt(d) scaling
            if bias is not None:
                scores = scores + bias
            attn = F.softmax(scores.float(), dim=-1).type_as(scores)
            out = torch.matmul(attn, v).transpose(1, 2).contiguous().view(b, -1, self.heads * self.d_kv)
            return self.o(out)

    class T5FF(nn.Module):
        def __init__(self, dim, d_ff):
            super().__init__()
            self.norm = T5LayerNorm(dim)
            self.wi = nn.Linear(dim, d_ff, bias=False)
            self.wo = nn.Linear(d_ff, dim, bias=False)

        def forward(self, x):
            return x + self.wo(F.relu(self.wi(self.norm(x))))

    class T5EncoderLayer(nn.Module):
        def __init__(self, dim, heads, d_kv, d_ff, has_bias):
            super().__init__()
            self.norm = T5LayerNorm(dim)
            self.attn = T5Attention(dim, heads, d_kv, True, has_bias)
            self.ff = T5FF(dim, d_ff)

        def forward(self, x, bias):
            h = self.norm(x)
            return self.ff(x + self.attn(h, h, bias))

    class T5DecoderLayer(nn.Module):
        def __init__(self, dim, heads, d_kv, d_ff, has_bias):
            super().__init__()
            self.norm1 = T5LayerNorm(dim)
            self.self_attn = T5Attention(dim, heads, d_kv, False, has_bias)
            self.norm2 = T5LayerNorm(dim)
            self.cross_attn = T5Attention(dim, heads, d_kv, True, False)
            self.ff = T5FF(dim, d_ff)

        def forward(self, x, enc, self_bias):
            h = self.norm1(x)
            x = x + self.self_attn(h, h, self_bias)
            x = x + self.cross_attn(self.norm2(x), enc, None)
            return self.ff(x)

    class TinyT5(nn.Module):
        def __init__(self, vocab=128, dim=32, heads=4, d_kv=8, d_ff=64, layers=2):
            super().__init__()
            self.dim = dim
            self.shared = nn.Embedding(vocab, dim)
            self.encoder = nn.ModuleList(T5EncoderLayer(dim, heads, d_kv, d_ff, i == 0) for i in range(layers))
            self.enc_norm = T5LayerNorm(dim)
            self.decoder = nn.ModuleList(T5DecoderLayer(dim, heads, d_kv, d_ff, i == 0) for i in range(layers))
            self.dec_norm = T5LayerNorm(dim)

        def forward(self, input_ids, decoder_input_ids):
            x = self.shared(input_ids)
            s = input_ids.shape[1]
            bias = self.encoder[0].attn.compute_bias(s, s)  # shared by all encoder layers
            for layer in self.encoder:
                x = layer(x, bias)
            enc = self.enc_norm(x)

            y = self.shared(decoder_input_ids)
            t = decoder_input_ids.shape[1]
            causal = torch.tril(torch.ones(t, t, dtype=torch.float32))
            mask = (1.0 - causal)[None, None] * torch.finfo(torch.float32).min
            self_bias = self.decoder[0].self_attn.compute_bias(t, t) + mask
            for layer in self.decoder:
                y = layer(y, enc, self_bias)
            y = self.dec_norm(y) * (self.dim ** -0.5)  # tied embeddings: rescale
            return F.linear(y, self.shared.weight)

    # ------------------------------------------------------------------ CNN (QDQ source)
    class ConvBN(nn.Module):
        def __init__(self, cin, cout, k=3, stride=1, relu=True):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.relu = relu

        def forward(self, x):
            x = self.bn(self.conv(x))
            return F.relu(x) if self.relu else x

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.a = ConvBN(cin, cout, 3, stride)
            self.b = ConvBN(cout, cout, 3, 1, relu=False)
            self.short = ConvBN(cin, cout, 1, stride, relu=False) if (stride != 1 or cin != cout) else None

        def forward(self, x):
            s = x if self.short is None else self.short(x)
            return F.relu(self.b(self.a(x)) + s)

    class SmallResNet(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            self.stem = ConvBN(3, 16)
            self.pool = nn.MaxPool2d(2)
            self.block1 = BasicBlock(16, 16, 1)
            self.block2 = BasicBlock(16, 32, 2)
            self.avg = nn.AvgPool2d(2)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(32, classes)

        def forward(self, x):
            x = self.block2(self.block1(self.pool(self.stem(x))))
            return self.fc(torch.flatten(self.gap(self.avg(x)), 1))

    # ------------------------------------------------------------------ float16 block
    class Float16Block(nn.Module):
        """A pre-norm transformer encoder block (run in float16 after .half())."""

        def __init__(self, dim=64, heads=4, mlp=256):
            super().__init__()
            self.heads, self.head_dim = heads, dim // heads
            self.ln1 = nn.LayerNorm(dim)
            self.q = nn.Linear(dim, dim)
            self.k = nn.Linear(dim, dim)
            self.v = nn.Linear(dim, dim)
            self.o = nn.Linear(dim, dim)
            self.ln2 = nn.LayerNorm(dim)
            self.fc1 = nn.Linear(dim, mlp)
            self.fc2 = nn.Linear(mlp, dim)

        def forward(self, hidden_states):
            b, s, d = hidden_states.shape
            h = self.ln1(hidden_states)

            def split(t):
                return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

            q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
            x = hidden_states + self.o(ctx)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    return dict(TinyViT=TinyViT, TinyConvNeXt=TinyConvNeXt, TinyGPT2=TinyGPT2, TinyT5=TinyT5,
                SmallResNet=SmallResNet, Float16Block=Float16Block)


def build_torch(name):
    """(module, example args, input names, output names, dynamic_shapes, opset, seed key)."""
    import torch
    import torch.nn as nn

    classes = torch_models()
    Dim = torch.export.Dim
    batch = Dim("batch", min=1, max=16)
    seq = Dim("seq", min=2, max=64)
    if name in ("vit_opset18", "vit_opset23"):
        torch.manual_seed(SEEDS["vit"])
        model = classes["TinyViT"]()
        args = (torch.randn(2, 3, 32, 32),)
        return (model, args, ["pixel_values"], ["logits"], {"pixel_values": {0: batch}},
                int(name[-2:]))
    if name == "convnext_opset18":
        torch.manual_seed(SEEDS["convnext"])
        model = classes["TinyConvNeXt"]()
        args = (torch.randn(2, 3, 32, 32),)
        return model, args, ["pixel_values"], ["logits"], {"pixel_values": {0: batch}}, 18
    if name == "gpt2_opset18":
        torch.manual_seed(SEEDS["gpt2"])
        model = classes["TinyGPT2"]()
        args = (torch.randint(0, 128, (2, 8), dtype=torch.int64),)
        return model, args, ["input_ids"], ["logits"], {"input_ids": {0: batch, 1: seq}}, 18
    if name == "t5_opset18":
        torch.manual_seed(SEEDS["t5"])
        model = classes["TinyT5"]()
        args = (torch.randint(0, 128, (2, 8), dtype=torch.int64),
                torch.randint(0, 128, (2, 6), dtype=torch.int64))
        enc_seq = Dim("encoder_sequence", min=2, max=64)
        dec_seq = Dim("decoder_sequence", min=2, max=64)
        dyn = {"input_ids": {0: batch, 1: enc_seq}, "decoder_input_ids": {0: batch, 1: dec_seq}}
        return model, args, ["input_ids", "decoder_input_ids"], ["logits"], dyn, 18
    if name == "cnn_opset17":
        torch.manual_seed(SEEDS["cnn"])
        model = classes["SmallResNet"]()
        for m in model.modules():  # non-trivial BatchNorm statistics
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)
        args = (torch.randn(2, 3, 32, 32),)
        # opset 17 via onnx's version converter after the export at 18: see export_torch
        return model, args, ["input"], ["logits"], {"input": {0: batch}}, 17
    if name == "transformer_float16_opset18":
        torch.manual_seed(SEEDS["transformer_float16"])
        model = classes["Float16Block"]().half()
        args = (torch.randn(2, 8, 64).half(),)
        return (model, args, ["hidden_states"], ["output"],
                {"hidden_states": {0: batch, 1: seq}}, 18)
    raise ValueError(name)


def scrub_paths(model):
    """The exporter writes absolute file paths into the stack traces of the nodes'
    metadata_props: make them repository-relative (and `site-packages/`) so the bytes do not
    depend on where the checkout and the venv are."""
    import torch

    prefixes = [(REPO_ROOT + os.sep, "")]
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))) + os.sep
    prefixes.append((site, "site-packages" + os.sep))
    for node in model.graph.node:
        for prop in node.metadata_props:
            for old, new in prefixes:
                prop.value = prop.value.replace(old, new)


def export_torch(name, out_dir):
    import torch

    model, args, in_names, out_names, dyn, opset = build_torch(name)
    model.eval()
    with torch.no_grad():
        expected = model(*args)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    # torch 2.15 asked for opset 17 builds at 18 and converts down *before* its optimizer runs;
    # that conversion fails (onnx's ReduceMean adapter: "No initializer or constant input to node
    # found", the axes are not folded yet) and the exporter silently keeps opset 18. So below 18
    # export at 18 and convert the optimized model with onnx.version_converter.
    export_opset = max(opset, 18)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = torch.onnx.export(
            model,
            args,
            dynamo=True,
            opset_version=export_opset,
            input_names=in_names,
            output_names=out_names,
            # positional (the forward's argument names need not be the ONNX input names)
            dynamic_shapes=tuple(dyn[n] for n in in_names),
            external_data=False,
        )
    for w in caught:
        text = str(w.message).splitlines()[0][:200]
        if "opset" in text.lower() or "version" in text.lower():
            print(f"  [exporter warning] {text}")
    proto = program.model_proto
    scrub_paths(proto)
    if opset < export_opset:
        proto = onnx.version_converter.convert_version(proto, opset)
        print(f"  converted opset {export_opset} -> {opset} with onnx.version_converter")
        # onnx 1.23.2's ReduceMean 18 -> 13 adapter moves `axes` to an attribute but keeps
        # `noop_with_empty_axes`, which ReduceMean-13 does not have (the checker rejects it).
        # The exporter writes it as 0, the default, so dropping it changes nothing.
        for node in proto.graph.node:
            if node.op_type.startswith("Reduce") and opset < 18:
                for a in list(node.attribute):
                    if a.name == "noop_with_empty_axes":
                        assert a.i == 0, node
                        node.attribute.remove(a)
                        print(f"  dropped noop_with_empty_axes=0 from {node.op_type} {node.name}")
    model_dir = os.path.join(out_dir, name)
    path, loaded = save_checked(proto, model_dir)
    got_opset = {o.domain or "ai.onnx": o.version for o in loaded.opset_import}.get("ai.onnx")
    assert got_opset == opset, f"{name}: asked for opset {opset}, got {got_opset}"

    inputs = [a.numpy() for a in args]
    outputs = write_test_data(model_dir, loaded, inputs)
    describe(name, path, loaded)
    for n, g, e in zip(out_names, outputs, expected):
        e = e.numpy()
        assert g.shape == e.shape and g.dtype == e.dtype, (n, g.shape, g.dtype, e.shape, e.dtype)
        diff = float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64))))
        scale = float(np.max(np.abs(e.astype(np.float64))))
        tol = (2e-2, 2e-2) if e.dtype == np.float16 else (1e-4, 1e-5)
        ok = np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=tol[0], atol=tol[1])
        print(f"  onnxruntime vs torch, output {n} {list(g.shape)}: max abs diff {diff:.3g} "
              f"(max |torch| {scale:.3g}) -> {'ok' if ok else 'MISMATCH'} "
              f"(rtol {tol[0]}, atol {tol[1]})")
        if not ok:
            raise SystemExit(f"{name}: onnxruntime does not reproduce torch's output {n}")
    if name.startswith("transformer_float16"):
        report_fp16_casts(path)


def report_fp16_casts(path):
    """onnxruntime's CPU provider lacks float16 kernels for some ops and then inserts Casts to
    float around them (InsertCastTransformer, even with graph optimizations off; a Softmax
    without a float16 kernel is first expanded into its ONNX function body). Save the graph the
    session really runs and count the ops it computes in float32 and in float16."""
    import tempfile

    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.optimized_model_filepath = os.path.join(tmp, "ran.onnx")
        so.log_severity_level = 3
        ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ran = onnx.load(so.optimized_model_filepath)
    orig = histogram(onnx.load(path))
    extra_casts = histogram(ran).get("Cast", 0) - orig.get("Cast", 0)
    # Follow the float32 values: Cast to float makes one, a node with a float32 input computes
    # in float32 (Shape gives int64), Cast to float16 ends one.
    f32 = {t.name for t in ran.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    in_f32, in_f16 = collections.Counter(), collections.Counter()
    for n in ran.graph.node:
        if n.op_type == "Cast":
            to = next(a.i for a in n.attribute if a.name == "to")
            if to == onnx.TensorProto.FLOAT:
                f32.update(n.output)
            continue
        if n.op_type == "Shape":
            continue
        if any(i in f32 for i in n.input):
            in_f32[n.op_type] += 1
            f32.update(n.output)
        else:
            in_f16[n.op_type] += 1
    fmt = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"
    print(f"  onnxruntime CPU session (optimizations off) inserts {extra_casts} Cast nodes; "
          f"computed in float32: {fmt(in_f32)}; in float16: {fmt(in_f16)}")


# =============================================================================== quantization
class RandomReader:
    """CalibrationDataReader: `count` random batches for one float input."""

    def __init__(self, name, shape, count, seed):
        rng = np.random.default_rng(seed)
        self.batches = [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]
        self.it = iter(self.batches)

    def get_next(self):
        return next(self.it, None)

    def rewind(self):
        self.it = iter(self.batches)


def quantize(name, out_dir):
    import tempfile

    from onnxruntime.quantization import (CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)

    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = os.path.join(tmp, "model.onnx")
        if name == "cnn_qdq_int8":
            src_dir = os.path.join(out_dir, "cnn_opset17")
            src = os.path.join(src_dir, "model.onnx")
            reader = RandomReader("input", (1, 3, 32, 32), 16, SEEDS["cnn_qdq_int8_calibration"])
            quantize_static(src, tmp_path, reader, quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax)
        elif name == "vit_dynamic_int8":
            src_dir = os.path.join(out_dir, "vit_opset18")
            src = os.path.join(src_dir, "model.onnx")
            # The exporter writes a value_info for every initializer; quantize_dynamic's
            # replace_gemm_with_matmul transposes the head's Gemm weight in place without
            # updating it, and its next shape inference fails ("Inferred shape and existing
            # shape differ in dimension 0: (32) vs (10)"). So quantize a copy without those
            # value_infos (the zoo's vit_opset18 keeps them).
            m = onnx.load(src)
            inits = {t.name for t in m.graph.initializer}
            keep = [vi for vi in m.graph.value_info if vi.name not in inits]
            del m.graph.value_info[:]
            m.graph.value_info.extend(keep)
            src_copy = os.path.join(tmp, "float.onnx")
            onnx.save_model(m, src_copy)
            quantize_dynamic(src_copy, tmp_path, weight_type=QuantType.QInt8, per_channel=False)
        else:
            raise ValueError(name)
        proto = onnx.load(tmp_path)
    path, loaded = save_checked(proto, model_dir)
    # The float model's stored inputs (the quantized model keeps its input names).
    inputs = [a for _, a in read_test_data(src_dir, "input")]
    outputs = write_test_data(model_dir, loaded, inputs)
    describe(name, path, loaded)
    float_out = [a for _, a in read_test_data(src_dir, "output")]
    for o, f, g in zip(loaded.graph.output, float_out, outputs):
        print(f"  quantized vs float model ({os.path.basename(src_dir)}), output {o.name}: "
              f"max abs diff {float(np.max(np.abs(g - f))):.3g} (max |float| {float(np.max(np.abs(f))):.3g})")


# =============================================================================== check
def check_all(out_dir, only):
    import onnxruntime as ort

    names = sorted(d for d in os.listdir(out_dir)
                   if os.path.isfile(os.path.join(out_dir, d, "model.onnx")) and (not only or d in only))
    rows, total = [], 0
    failed = False
    for name in names:
        model_dir = os.path.join(out_dir, name)
        path = os.path.join(model_dir, "model.onnx")
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)
        inputs = read_test_data(model_dir, "input")
        outputs = read_test_data(model_dir, "output")
        assert [n for n, _ in inputs] == [i.name for i in model.graph.input], name
        assert [n for n, _ in outputs] == [o.name for o in model.graph.output], name
        sess = ort_session(path)
        got = sess.run([n for n, _ in outputs], dict(inputs))
        same = all(g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w)
                   for g, (_, w) in zip(got, outputs))
        failed |= not same
        size = os.path.getsize(path)
        dir_size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(model_dir) for f in fs)
        total += dir_size
        opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
        ins = ", ".join(f"`{i.name}` {dims(i)}" for i in model.graph.input)
        outs = ", ".join(f"`{o.name}` {dims(o)}" for o in model.graph.output)
        print(f"{name}: checker ok, onnxruntime {ort.__version__} reproduces the stored outputs "
              f"bit-exactly: {same}; model {size} bytes, dir {dir_size} bytes")
        rows.append(f"| {name} | {opsets} | {len(model.graph.node)} | {len(model.graph.initializer)} "
                    f"| {size:,} | {ins} | {outs} | {hist_text(model)} |")
    print(f"\ntotal {total:,} bytes in {len(names)} model directories\n")
    print("| model | opsets | nodes | initializers | bytes | inputs | outputs | operators |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    if failed:
        raise SystemExit("some stored outputs are not reproduced")


# =============================================================================== main
def have(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--step", choices=("export", "quantize", "check", "all"), default="all")
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--only", nargs="+", default=None, metavar="NAME")
    args = p.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    import onnxruntime

    versions = f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, numpy {np.__version__}"
    steps = [args.step] if args.step != "all" else (
        (["export"] if have("torch") else []) + (["quantize"] if have("onnxruntime.quantization") else [])
        + ["check"])
    for step in steps:
        if step == "export":
            import torch

            print(f"== export: torch {torch.__version__}, onnxscript "
                  f"{__import__('onnxscript').__version__}, {versions}")
            for name in TORCH_MODELS:
                if not args.only or name in args.only:
                    export_torch(name, args.out)
        elif step == "quantize":
            print(f"== quantize: {versions}")
            for name in QUANT_MODELS:
                if not args.only or name in args.only:
                    quantize(name, args.out)
        else:
            print(f"== check: {versions}")
            check_all(args.out, args.only)


if __name__ == "__main__":
    main(sys.argv[1:])
