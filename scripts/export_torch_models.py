#!/usr/bin/env python3
"""Export three small PyTorch models with the dynamo (torch.export based) ONNX exporter at opset 18.

Writes, for NAME in cnn, bert, llama:
  tests/models/torch/NAME_opset18.onnx   single file, no external data
  tests/models/torch/NAME_io.npz         one input set and torch's outputs (keys: the ONNX input
                                         and output names), only when it is under 50 KB
and, with the TorchScript exporter's `export_modules_as_functions` (model-local functions):
  tests/models/torch/blocks_functions_opset18.onnx   two calls of one function (Linear,
                                         LayerNorm, GELU, residual) and a softmax head
  tests/models/torch/attn_functions_opset18.onnx     two calls of one self-attention function
                                         (view shapes from x.size(); batch and sequence dynamic)
  tests/models/torch/eps_functions_opset17.onnx      three calls of one function whose LayerNorm
                                         epsilon is an attribute reference (two values)

The weights are PyTorch's default initialisation under fixed seeds (plus random BatchNorm
statistics), so two runs with the same versions give the same weights. The ONNX bytes may still
differ between torch/onnxscript versions.

usage: target/venv-torch/bin/python scripts/export_torch_models.py [OUT_DIR]
       (scripts/setup_torch_venv.sh creates that venv)
"""

import collections
import io
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 18


# ---------------------------------------------------------------------------- cnn
class ConvBN(nn.Module):
    def __init__(self, cin, cout, relu=True):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = relu

    def forward(self, x):
        x = self.bn(self.conv(x))
        return F.relu(x) if self.relu else x


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = ConvBN(3, 8)
        self.pool = nn.MaxPool2d(2)
        self.block1 = ConvBN(8, 8)
        self.block2 = ConvBN(8, 8, relu=False)
        self.down = ConvBN(8, 16)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.pool(self.stem(x))
        x = F.relu(x + self.block2(self.block1(x)))  # residual add
        x = self.down(x)
        return self.fc(self.flatten(self.gap(x)))


# ---------------------------------------------------------------------------- bert
class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, mask_bias):
        b, s, h = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores + mask_bias, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.o(ctx)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.attn = BertSelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.fc1 = nn.Linear(hidden, inter)
        self.fc2 = nn.Linear(inter, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        x = self.ln1(x + self.attn(x, mask_bias))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class TinyBert(nn.Module):
    def __init__(self, vocab=100, hidden=32, heads=4, layers=2, inter=64, max_pos=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, inter) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        pos_ids = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        x = self.ln(self.tok(input_ids) + self.pos(pos_ids))
        # (B, S) of 1/0 -> additive bias (B, 1, 1, S)
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x


# ---------------------------------------------------------------------------- llama
class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, cos, sin, causal):
        b, s, h = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + causal
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.o(ctx)


class LlamaMLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, inter):
        super().__init__()
        self.norm1 = RMSNorm(hidden)
        self.attn = LlamaAttention(hidden, heads)
        self.norm2 = RMSNorm(hidden)
        self.mlp = LlamaMLP(hidden, inter)

    def forward(self, x, cos, sin, causal):
        x = x + self.attn(self.norm1(x), cos, sin, causal)
        return x + self.mlp(self.norm2(x))


class TinyLlama(nn.Module):
    def __init__(self, vocab=100, hidden=32, heads=4, layers=2, inter=64, theta=10000.0):
        super().__init__()
        head_dim = hidden // heads
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, inter) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids):
        seq = input_ids.shape[1]
        x = self.embed(input_ids)
        pos = torch.arange(seq, device=x.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)  # (S, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (S, D)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        causal = torch.triu(torch.full((seq, seq), float("-inf"), device=x.device), diagonal=1)
        for layer in self.layers:
            x = layer(x, cos, sin, causal)
        return self.lm_head(self.norm(x))


# ---------------------------------------------------------------------------- export
def build(name):
    torch.manual_seed({"cnn": 0, "bert": 1, "llama": 2}[name])
    B, S = torch.export.Dim("batch", min=1, max=16), torch.export.Dim("seq", min=2, max=64)
    if name == "cnn":
        model = SmallCNN()
        for m in model.modules():  # non-trivial BatchNorm statistics
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)
        args = (torch.randn(1, 3, 32, 32),)
        return model, args, ["input"], ["logits"], None
    if name == "bert":
        model = TinyBert()
        ids = torch.randint(0, 100, (2, 8), dtype=torch.int64)
        mask = torch.ones(2, 8, dtype=torch.int64)
        mask[1, 5:] = 0  # padding in the second sequence
        dyn = {"input_ids": {0: B, 1: S}, "attention_mask": {0: B, 1: S}}
        return model, (ids, mask), ["input_ids", "attention_mask"], ["last_hidden_state"], dyn
    if name == "llama":
        model = TinyLlama()
        ids = torch.randint(0, 100, (2, 8), dtype=torch.int64)
        return model, (ids,), ["input_ids"], ["logits"], {"input_ids": {0: B, 1: S}}
    raise ValueError(name)


def scrub_paths(model):
    """Make the stack traces in the nodes' metadata_props independent of where the repository
    and the venv are: the exporter records absolute file paths there."""
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    prefixes = [(repo_root, "")]
    for mod in (torch, nn):
        site = os.path.dirname(os.path.dirname(os.path.abspath(mod.__file__))) + os.sep
        prefixes.append((site, "site-packages" + os.sep))
    for node in model.graph.node:
        for prop in node.metadata_props:
            for old, new in prefixes:
                prop.value = prop.value.replace(old, new)


def histogram(model):
    return collections.Counter(n.op_type for n in model.graph.node)


def export(name, out_dir):
    model, args, in_names, out_names, dyn = build(name)
    model.eval()
    with torch.no_grad():
        expected = model(*args)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model,
            args,
            dynamo=True,
            opset_version=OPSET,
            input_names=in_names,
            output_names=out_names,
            dynamic_shapes=dyn,
            external_data=False,
        )
    proto = program.model_proto
    scrub_paths(proto)
    path = os.path.join(out_dir, f"{name}_opset18.onnx")
    # Save through onnx so that no tensor is externalized (the model is small).
    onnx.save_model(proto, path, save_as_external_data=False)
    loaded = onnx.load(path)
    onnx.checker.check_model(loaded, full_check=True)
    opsets = {o.domain or "ai.onnx": o.version for o in loaded.opset_import}

    io_path = os.path.join(out_dir, f"{name}_io.npz")
    arrays = {n: a.numpy() for n, a in zip(in_names, args)}
    arrays.update({n: t.numpy() for n, t in zip(out_names, expected)})
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    if buf.tell() < 50 * 1024:
        with open(io_path, "wb") as f:
            f.write(buf.getvalue())
        io_note = f"{io_path} ({buf.tell()} bytes)"
    else:
        io_note = f"io skipped ({buf.tell()} bytes)"
        if os.path.exists(io_path):
            os.remove(io_path)

    # The ONNX model must reproduce torch's outputs.
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = sess.run(None, {n: a.numpy() for n, a in zip(in_names, args)})
        for n, g, e in zip(out_names, got, expected):
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5, err_msg=n)
        ort_note = "onnxruntime == torch"
    except ImportError:
        ort_note = "onnxruntime not installed"

    hist = histogram(loaded)
    print(f"{name}: {path} ({os.path.getsize(path)} bytes), opsets {opsets}, "
          f"ir_version {loaded.ir_version}, {len(loaded.graph.node)} nodes, "
          f"{len(loaded.graph.initializer)} initializers, {len(loaded.functions)} functions; "
          f"{ort_note}; {io_note}")
    print("  inputs:", [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
                        for i in loaded.graph.input])
    print("  outputs:", [(o.name, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim])
                         for o in loaded.graph.output])
    print("  ops:", ", ".join(f"{op} {c}" for op, c in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))))


class Block(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.lin = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x):
        return F.gelu(self.norm(self.lin(x))) + x


class Blocks(nn.Module):
    def __init__(self, hidden=16, classes=4):
        super().__init__()
        self.b1, self.b2 = Block(hidden), Block(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return torch.softmax(self.head(self.b2(self.b1(x))), -1)


BATCH_SEQ = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}


def export_with_functions(model, x, path, modules, opset, dynamic_axes=None):
    """torch's TorchScript exporter on `model(x)` with `modules` as model-local functions, the
    input named x and the output y; onnx.checker's full check; prints what it wrote."""
    extra = {"dynamic_axes": dynamic_axes} if dynamic_axes else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, opset_version=opset, dynamo=False,
                          export_modules_as_functions=modules,
                          input_names=["x"], output_names=["y"], **extra)
    loaded = onnx.load(path)
    onnx.checker.check_model(loaded, full_check=True)
    bodies = ", ".join(f"{f.name}: {len(f.node)} nodes"
                       + (f", attributes {list(f.attribute)}" if f.attribute else "")
                       for f in loaded.functions)
    print(f"{os.path.basename(path)} ({os.path.getsize(path)} bytes), "
          f"{len(loaded.graph.node)} nodes, {len(loaded.functions)} functions ({bodies})")


def export_functions(out_dir):
    """The TorchScript exporter with each Block as a model-local function (domain __main__)."""
    torch.manual_seed(3)
    model = Blocks().eval()
    x = torch.randn(2, 8, 16)
    export_with_functions(model, x, os.path.join(out_dir, "blocks_functions_opset18.onnx"),
                          {Block}, OPSET)


class SelfAttention(nn.Module):
    """Multi-head self-attention written as modules often are: heads split and merged with
    view shapes read from x.size(), the scale from the head size."""

    def __init__(self, hidden=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, h = x.size()
        d = h // self.heads
        q, k, v = self.qkv(x).split(h, dim=-1)
        q = q.view(b, s, self.heads, d).transpose(1, 2)
        k = k.view(b, s, self.heads, d).transpose(1, 2)
        v = v.view(b, s, self.heads, d).transpose(1, 2)
        p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
        o = (p @ v).transpose(1, 2).contiguous().view(b, s, h)
        return x + self.out(o)


class Attns(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.a1, self.a2 = SelfAttention(hidden), SelfAttention(hidden)
        self.head = nn.Linear(hidden, 4)

    def forward(self, x):
        return self.head(self.a2(self.a1(x)))


def export_attention_functions(out_dir):
    """The TorchScript exporter with each SelfAttention as a model-local function, the batch
    and sequence dynamic (the body reads them with Shape)."""
    torch.manual_seed(4)
    model = Attns().eval()
    x = torch.randn(2, 8, 16)
    export_with_functions(model, x, os.path.join(out_dir, "attn_functions_opset18.onnx"),
                          {SelfAttention}, OPSET, BATCH_SEQ)


class EpsBlock(nn.Module):
    """Linear, LayerNorm with its own epsilon, GELU scaled by 1.0, residual: instances with
    different epsilons make the exporter pass the epsilon as an attribute of the function."""

    def __init__(self, eps, hidden=16):
        super().__init__()
        self.lin = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        return x + F.gelu(self.lin(self.norm(x))) * 1.0


class EpsBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([EpsBlock(1e-5), EpsBlock(1e-5), EpsBlock(1e-6)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def export_eps_functions(out_dir):
    """The TorchScript exporter with each EpsBlock as a model-local function whose body reads
    the LayerNorm epsilon from an attribute reference (two calls with one value, one with
    another)."""
    torch.manual_seed(5)
    model = EpsBlocks().eval()
    x = torch.randn(2, 4, 16)
    export_with_functions(model, x, os.path.join(out_dir, "eps_functions_opset17.onnx"),
                          {EpsBlock}, 17, BATCH_SEQ)


class CastNorm(nn.Module):
    """RMSNorm as transformers' LlamaRMSNorm writes it: computed in float32, cast back to the
    input's type (both casts no-ops on a float32 input)."""

    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * x.to(dtype)


class GeluMLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(hidden, 2 * hidden)
        self.down = nn.Linear(2 * hidden, hidden)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class NestedBlock(nn.Module):
    """Norm, MLP, residual, norm: a module whose function calls other modules' functions."""

    def __init__(self, hidden):
        super().__init__()
        self.norm1 = CastNorm(hidden)
        self.mlp = GeluMLP(hidden)
        self.norm2 = CastNorm(hidden)

    def forward(self, x):
        return self.norm2(x + self.mlp(self.norm1(x)))


class NestedBlocks(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.blocks = nn.ModuleList([NestedBlock(hidden), NestedBlock(hidden)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def export_nested_functions(out_dir):
    """The TorchScript exporter with NestedBlock, CastNorm and GeluMLP as model-local functions:
    the blocks' function calls the norms' and the MLP's."""
    torch.manual_seed(7)
    model = NestedBlocks().eval()
    x = torch.randn(2, 3, 16)
    export_with_functions(model, x, os.path.join(out_dir, "nested_functions_opset17.onnx"),
                          {NestedBlock, CastNorm, GeluMLP}, 17, BATCH_SEQ)


def main():
    repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo_root, "tests", "models", "torch")
    os.makedirs(out_dir, exist_ok=True)
    print(f"torch {torch.__version__}, onnxscript {__import__('onnxscript').__version__}, "
          f"onnx {onnx.__version__}")
    for name in ("cnn", "bert", "llama"):
        export(name, out_dir)
    export_functions(out_dir)
    export_attention_functions(out_dir)
    export_eps_functions(out_dir)
    export_nested_functions(out_dir)


if __name__ == "__main__":
    main()
