#!/usr/bin/env python3
"""Generate Llama-style decoder ONNX models that look like what torch's exporters write, without
torch (numpy, onnx and ml_dtypes only), with random weights in one external data file.

usage: python scripts/gen_decoder.py --preset P --style {torchscript,dynamo} --opset N
           --dtype {float32,float16,bfloat16} --out DIR/model.onnx [--layers L] [--seed S]
           [--partial-rotary F] [--max-positions M] [--no-align] [--verify]

Both styles have the inputs input_ids, attention_mask, position_ids (int64) and
past_key_values.{i}.key/.value, and the outputs logits (model dtype) and present.{i}.key/.value;
the architecture is Llama's (RMSNorm, rotary embedding, grouped-query attention with a KV cache,
SwiGLU MLP), with optional q/k/v biases (Qwen2), tied embeddings and partial rotary.

Style ``torchscript`` mimics torch.onnx.export(dynamo=False) of transformers 4.36's
LlamaForCausalLM (eager attention, legacy tuple cache), node for node as torch 2.x writes it:
every size is ``Shape -> Gather(0-d Constant)``, views build their target shape with
``Unsqueeze`` + ``Concat`` (the ``onnx::Unsqueeze_N`` constants of ``prim::ListConstruct``),
every ``expand`` carries torch's guard ``Where(Equal(shape, -1 * ones), ones, shape)``, scalars
are ``Constant`` nodes, no ``value_info``. Linear weights are pre-transposed initializers
``onnx::MatMul_N`` [in, out] (a tied lm_head gets its own transposed copy), biases are
``Add(bias, MatMul)``. RMSNorm is ``Cast(float) Pow ReduceMean Add Sqrt Div(1, .) Mul
Cast(dtype) Mul(weight, .)`` (the Casts stay even in float32, as torch leaves them). Rotary
slices the cached ``cos_cached``/``sin_cached`` [max_positions, rotary_dim] tables to the key
length and gathers ``position_ids``; rotate_half slices at ``Shape(x)[3] / 2``. The causal mask
(``Range``/``Less``/``Where``, filled with the dtype's lowest value) and the padding mask
(``Sub(1, mask)``, ``Where``) are built once before the layers. Attention is
``MatMul Div(sqrt(head_dim)) Add(mask) Softmax Cast(float) Cast(dtype) MatMul`` and repeat_kv
is ``Unsqueeze Expand Reshape`` from runtime shapes.

Style ``dynamo`` mimics torch.onnx.export(dynamo=True) (onnxscript's torchlib and its default
optimizer) of a recent transformers' LlamaForCausalLM with SDPA attention: no Constant nodes
(constants are small deduplicated initializers ``val_N``), values named after the FX nodes
(``linear_3``, ``view_4``) or ``val_N``, nodes ``node_<name>``; weights transposed and folded
into ``val_N`` initializers; ``Shape`` with start/end, ``Reshape`` with allowzero=1 and shapes
shared across layers; RMSNorm with ``Reciprocal(Sqrt)``; the mask is a boolean
``[batch, 1, seq, total]`` (``Range``, ``LessOrEqual``, ``GatherND`` of the padding mask);
cos/sin are computed once from ``inv_freq``; SDPA is decomposed the onnxscript way
(``Mul(q, sqrt(scale))``, ``Mul(k^T, sqrt(scale))``, ``MatMul``, ``Add(Where(mask, 0, min))``,
``Softmax``, a NaN guard, ``MatMul``); full ``value_info``. At opset 23 onnxscript fuses
RMSNorm into ``RMSNormalization``, SDPA into ``Attention`` and, in float32 only, the rotary into
``RotaryEmbedding``, and so does this script.

Weights are written tensor by tensor (seeded, never all in memory) to ``<model>.onnx.data``:
linear weights, embeddings and biases ~ N(0, 0.02), norm weights ~ 1 + N(0, 0.05). Tensors under
1 KiB stay inline. ``--verify`` compares onnxruntime (or, for bfloat16, onnx's
ReferenceEvaluator) with the numpy forward pass in decoder_reference.py.
"""

import argparse
import dataclasses
import math
import os
import sys
import time
from collections import defaultdict
from functools import partial
from statistics import NormalDist

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min
PRODUCER_VERSION = "2.15.0"
VERIFY_MAX_PARAMS = 100_000_000


@dataclasses.dataclass(frozen=True)
class Arch:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    rope_theta: float
    rms_eps: float
    qkv_bias: bool = False
    tied: bool = False
    max_positions: int = 4096
    rotary_fraction: float = 1.0

    @property
    def head_dim(self):
        return self.hidden // self.heads

    @property
    def rotary_dim(self):
        return int(self.head_dim * self.rotary_fraction)

    @property
    def n_rep(self):
        return self.heads // self.kv_heads

    @property
    def params(self):
        h, kv = self.hidden, self.kv_heads * self.head_dim
        attention = 2 * h * h + 2 * h * kv + (h + 2 * kv if self.qkv_bias else 0)
        layer = attention + 3 * h * self.intermediate + 2 * h
        return self.layers * layer + h + self.vocab * h * (1 if self.tied else 2)


TINY = Arch(64, 2, 4, 2, 128, 256, 10000.0, 1e-5)
PRESETS = {
    "tiny": TINY,
    "tiny-qwen2": dataclasses.replace(TINY, rms_eps=1e-6, qkv_bias=True),
    "tiny-mistral": dataclasses.replace(TINY, kv_heads=1),
    "tinyllama-1.1b": Arch(2048, 22, 32, 4, 5632, 32000, 10000.0, 1e-5),
    "llama3.2-1b": Arch(2048, 16, 32, 8, 8192, 128256, 500000.0, 1e-5, tied=True),
    "llama2-7b": Arch(4096, 32, 32, 32, 11008, 32000, 10000.0, 1e-5),
    "llama3-8b": Arch(4096, 32, 32, 8, 14336, 128256, 500000.0, 1e-5),
    "mistral-7b": Arch(4096, 32, 32, 8, 14336, 32000, 1e6, 1e-5),
    "qwen2.5-7b": Arch(3584, 28, 28, 4, 18944, 152064, 1e6, 1e-6, qkv_bias=True),
}

DTYPES = {
    "float32": (np.dtype(np.float32), TensorProto.FLOAT),
    "float16": (np.dtype(np.float16), TensorProto.FLOAT16),
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), TensorProto.BFLOAT16),
}
ONNX_TYPES = {np.dtype(d): t for d, t in DTYPES.values()}
ONNX_TYPES.update({np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL})


def finfo_min(dtype):
    return float(ml_dtypes.finfo(dtype).min)


def to_tensor(array, name=""):
    """A TensorProto with raw_data (works for bfloat16 with every onnx version)."""
    array = np.asarray(array)
    return helper.make_tensor(name, ONNX_TYPES[array.dtype], array.shape, array.tobytes(), raw=True)


def ir_version(opset):
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])


def inv_freq(arch):
    exponents = np.arange(0, arch.rotary_dim, 2, dtype=np.int64).astype(np.float32) / arch.rotary_dim
    return (1.0 / (arch.rope_theta**exponents)).astype(np.float32)


# ----------------------------------------------------------------------------------- weights
class WeightFile:
    """Writes initializers one at a time: tensors of at least 1 KiB go to one external data file
    (each at a 4096-aligned offset when ``align``), smaller ones stay inline. Random tensors are
    drawn by a Generator seeded with (seed, tensor index), in chunks, from a 65536-level table of
    normal quantiles in the target dtype (fast, and a normal distribution to the eye)."""

    CHUNK = 1 << 24
    INLINE_LIMIT = 1024
    ALIGNMENT = 4096

    def __init__(self, path, dtype, seed, align):
        self.path, self.dtype, self.seed, self.align = path, dtype, seed, align
        self.location = os.path.basename(path)
        self.file = open(path, "wb")
        self.offset = 0
        self.random_count = 0
        self.params = 0
        self.quantiles = np.array([NormalDist().inv_cdf((i + 0.5) / 65536) for i in range(65536)])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def random(self, name, shape, mean, std):
        """A new parameter ~ N(mean, std) of the model dtype."""
        rng = np.random.default_rng([self.seed, self.random_count])
        self.random_count += 1
        table = (mean + std * self.quantiles).astype(self.dtype)
        size = math.prod(shape)
        self.params += size
        if size * self.dtype.itemsize < self.INLINE_LIMIT:
            return to_tensor(table[rng.integers(0, 65536, size, dtype=np.uint16)].reshape(shape), name)
        start = self._start()
        for done in range(0, size, self.CHUNK):
            table[rng.integers(0, 65536, min(self.CHUNK, size - done), dtype=np.uint16)].tofile(self.file)
        return self._external(name, shape, self.dtype, start)

    def array(self, name, array):
        """A tensor with the given values (a buffer or a constant)."""
        if array.nbytes < self.INLINE_LIMIT:
            return to_tensor(array, name)
        start = self._start()
        array.tofile(self.file)
        return self._external(name, array.shape, array.dtype, start)

    def transposed(self, name, source):
        """A copy of the 2-D external tensor ``source``, transposed (a tied lm_head)."""
        self.file.flush()
        info = {e.key: e.value for e in source.external_data}
        rows, cols = source.dims
        values = np.fromfile(self.path, self.dtype, rows * cols, offset=int(info["offset"]))
        return self.array(name, np.ascontiguousarray(values.reshape(rows, cols).T))

    def _start(self):
        if self.align and self.offset % self.ALIGNMENT:
            pad = self.ALIGNMENT - self.offset % self.ALIGNMENT
            self.file.write(bytes(pad))
            self.offset += pad
        return self.offset

    def _external(self, name, shape, dtype, start):
        self.offset = self.file.tell()
        tensor = TensorProto(name=name, data_type=ONNX_TYPES[np.dtype(dtype)], dims=shape)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", start), ("length", self.offset - start)):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
        return tensor


# ----------------------------------------------------------------------------------- graphs
class Builder:
    """What both styles share: the weights (with their roles, for the reference), the nodes and
    initializers, the inputs and outputs, and a dtype workaround for old opsets."""

    def __init__(self, arch, dtype, opset, weights):
        self.arch, self.opset, self.weights = arch, opset, weights
        self.dtype, self.onnx_dtype = DTYPES[dtype]
        self.nodes, self.initializers = [], []
        self.roles = {}

    def init(self, tensor, role=None):
        self.initializers.append(tensor)
        if role:
            self.roles[role] = tensor
        return tensor.name

    def param(self, role, name, shape, mean=0.0, std=0.02):
        return self.init(self.weights.random(name, shape, mean, std), role)

    def linear_weight(self, role, name, shape):
        """A linear weight [in, out] ~ N(0, 0.02); a tied lm_head is the transposed embedding,
        which both exporters fold into a second initializer."""
        if role == "lm_head" and self.arch.tied:
            return self.init(self.weights.transposed(name, self.roles["embed"]), role)
        return self.param(role, name, shape)

    def where(self, emit, cond, a, b):
        """Where(cond, a, b) on model-dtype values with ``emit(op_type, *inputs, **attrs)``:
        bfloat16 needs Where-16, below it the select runs in float32."""
        if self.onnx_dtype != TensorProto.BFLOAT16 or self.opset >= 16:
            return emit("Where", cond, a, b)
        a, b = (emit("Cast", x, to=TensorProto.FLOAT) for x in (a, b))
        return emit("Cast", emit("Where", cond, a, b), to=self.onnx_dtype)

    def io(self, mask_dim, present_dim):
        a = self.arch
        past = ["batch_size", a.kv_heads, "past_sequence_length", a.head_dim]
        present = ["batch_size", a.kv_heads, present_dim, a.head_dim]
        tokens = ["batch_size", "sequence_length"]
        inputs = [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, tokens),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", mask_dim]),
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, tokens),
        ]
        outputs = [helper.make_tensor_value_info("logits", self.onnx_dtype, tokens + [a.vocab])]
        for i in range(a.layers):
            for kv in ("key", "value"):
                inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", self.onnx_dtype, past))
                outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", self.onnx_dtype, present))
        return inputs, outputs

    def model(self):
        inputs, outputs = self.io(*self.dims)
        graph = helper.make_graph(self.nodes, "main_graph", inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = ir_version(self.opset)
        model.producer_name, model.producer_version = "pytorch", PRODUCER_VERSION
        return model


class TorchScriptBuilder(Builder):
    """torch.onnx.export(dynamo=False) of transformers 4.36's LlamaForCausalLM, in the order
    torch traces it."""

    dims = ("total_sequence_length", "total_sequence_length")

    def __init__(self, *args):
        super().__init__(*args)
        self.counts = defaultdict(int)
        self.uid = 0
        self.matmul_weights = []
        self.rotary = {}

    def op(self, scope, op_type, *inputs, out=None, **attrs):
        """A node named like the exporter names it: <scope>/<Op>_<k>, output <name>_output_0."""
        k = self.counts[scope, op_type]
        self.counts[scope, op_type] += 1
        name = f"{scope}/{op_type}" + (f"_{k}" if k else "")
        output = out or f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=name, **attrs))
        self.uid += 1
        return output

    def const(self, scope, value, dtype=np.int64):
        return self.op(scope, "Constant", value=to_tensor(np.array(value, dtype)))

    def cast(self, scope, x, to):
        return self.op(scope, "Cast", x, to=to)

    def size(self, scope, x, dim):
        """x.size(dim): Shape, Gather with a 0-d index."""
        return self.op(scope, "Gather", self.op(scope, "Shape", x), self.const(scope, dim), axis=0)

    def last_size(self, scope, x):
        """mask.size(-1) as traced on a tensor built in the graph: Slice of the shape, Squeeze."""
        shape = self.op(scope, "Shape", x)
        axes, starts, ends = self.const(scope, [0]), self.const(scope, [-1]), self.const(scope, [INT64_MAX])
        last = self.op(scope, "Slice", shape, starts, ends, axes)
        return self.op(scope, "Squeeze", last, self.const(scope, [0]))

    def unsqueeze(self, scope, x, axis):
        return self.op(scope, "Unsqueeze", x, self.const(scope, [axis]))

    def list_construct(self, scope, items):
        """The 1-D int64 tensor of a size list given to view/reshape/zeros: a traced scalar is
        Unsqueezed with an anonymous ``onnx::Unsqueeze_N`` constant, an int is a Constant."""
        parts = []
        for item in items:
            if isinstance(item, str):
                self.uid += 1
                axes = f"onnx::Unsqueeze_{self.uid}"
                zero = to_tensor(np.array([0]))
                self.nodes.append(helper.make_node("Constant", [], [axes], name=f"Constant_{self.uid}", value=zero))
                parts.append(self.op(scope, "Unsqueeze", item, axes))
            else:
                parts.append(self.const(scope, [item]))
        return self.op(scope, "Concat", *parts, axis=0)

    def expand(self, scope, x, items):
        """x.expand(*items) with torch's guard against -1 sizes."""
        parts = [self.unsqueeze(scope, i, 0) if isinstance(i, str) else self.const(scope, [i]) for i in items]
        shape = self.op(scope, "Reshape", self.op(scope, "Concat", *parts, axis=0), self.const(scope, [-1]))
        ones = self.op(scope, "ConstantOfShape", self.op(scope, "Shape", shape), value=to_tensor(np.array([1])))
        minus_ones = self.op(scope, "Mul", ones, self.const(scope, -1))
        guarded = self.op(scope, "Where", self.op(scope, "Equal", shape, minus_ones), ones, shape)
        return self.op(scope, "Expand", x, guarded)

    def zeros(self, scope, shape):
        """torch.zeros(shape, dtype=model dtype): ConstantOfShape, whose bfloat16 value needs
        opset 20 (below it: float32 and a Cast)."""
        if self.onnx_dtype == TensorProto.BFLOAT16 and self.opset < 20:
            zeros = self.op(scope, "ConstantOfShape", shape, value=to_tensor(np.zeros(1, np.float32)))
            return self.cast(scope, zeros, self.onnx_dtype)
        return self.op(scope, "ConstantOfShape", shape, value=to_tensor(np.zeros(1, self.dtype)))

    def lowest(self, scope):
        return self.const(scope, finfo_min(self.dtype), self.dtype)

    def matmul_weight(self, role, shape):
        """A linear weight named onnx::MatMul_N (numbered at the end)."""
        name = self.linear_weight(role, f"onnx::MatMul_{len(self.matmul_weights)}", shape)
        self.matmul_weights.append(self.roles[role])
        return name

    def linear(self, scope, x, role, shape, bias_name=None):
        """nn.Linear: MatMul with the pre-transposed weight, then Add(bias, .)."""
        y = self.op(scope, "MatMul", x, self.matmul_weight(role, shape))
        if bias_name:
            y = self.op(scope, "Add", self.param(role + "_bias", bias_name, [shape[1]]), y)
        return y

    # -------------------------------------------------------------------- model blocks
    def build(self):
        a = self.arch
        x, sizes = self.prologue()
        for i in range(a.layers):
            x = self.decoder_layer(i, x, sizes)
        x = self.rms_norm("/model/norm", x, "norm", "model.norm.weight")
        self.op("/lm_head", "MatMul", x, self.matmul_weight("lm_head", [a.hidden, a.vocab]), out="logits")
        self.number_matmul_weights()

    def number_matmul_weights(self):
        """torch numbers the folded weights after every other value: rename them so."""
        renames = {}
        for k, weight in enumerate(self.matmul_weights):
            renames[weight.name] = f"onnx::MatMul_{self.uid + k + 1}"
            weight.name = renames[weight.name]
        for node in self.nodes:
            node.input[:] = [renames.get(name, name) for name in node.input]

    def prologue(self):
        """Embedding and the 4-D attention mask: transformers' _prepare_4d_causal_attention_mask
        as traced with a non-empty past and a sequence longer than 1."""
        s, a = "/model", self.arch
        seq = self.size(s, "input_ids", 1)
        past = self.size(s, "past_key_values.0.key", 2)
        embed = self.param("embed", "model.embed_tokens.weight", [a.vocab, a.hidden])
        embeds = self.op("/model/embed_tokens", "Gather", embed, "input_ids")
        key_len = self.op(s, "Add", seq, past)
        bsz = self.size(s, "attention_mask", 0)
        past_len = self.op(s, "Sub", key_len, seq)
        causal = self.causal_mask(s, seq, past_len)
        causal = self.expand(s, causal, [bsz, 1, seq, self.op(s, "Add", seq, past_len)])
        padding = self.padding_mask(s, bsz, seq)
        flags = self.cast(s, self.cast(s, self.cast(s, padding, self.onnx_dtype), TensorProto.BOOL), TensorProto.BOOL)
        mask = self.where(partial(self.op, s), flags, self.lowest(s), causal)
        return embeds, {"past": past, "mask": mask}

    def causal_mask(self, s, seq, past_len):
        """[1, 1, seq, past + seq]: zeros for the past, then the lowest value above the diagonal."""
        shape = self.list_construct(s, [seq, seq])
        full = self.op(s, "ConstantOfShape", shape, value=to_tensor(np.array([finfo_min(self.dtype)], np.float32)))
        n = self.cast(s, self.last_size(s, full), TensorProto.INT64)
        cond = self.op(s, "Range", self.const(s, 0), n, self.const(s, 1))
        column = self.op(s, "Add", cond, self.const(s, 1))
        column = self.op(s, "Reshape", column, self.list_construct(s, [self.last_size(s, full), 1]))
        lower = self.cast(s, self.op(s, "Less", cond, column), TensorProto.BOOL)
        mask = self.cast(s, self.op(s, "Where", lower, self.const(s, 0.0, np.float32), full), self.onnx_dtype)
        mask = self.op(s, "Concat", self.zeros(s, self.list_construct(s, [seq, past_len])), mask, axis=-1)
        return self.unsqueeze(s, self.unsqueeze(s, mask, 0), 1)

    def padding_mask(self, s, bsz, seq):
        """_expand_mask: 1 - mask[:, None, None, :] expanded to [bsz, 1, seq, total], the masked
        positions set to the dtype's lowest value."""
        src_len = self.size(s, "attention_mask", 1)
        mask = self.unsqueeze(s, self.unsqueeze(s, "attention_mask", 1), 2)
        mask = self.cast(s, self.expand(s, mask, [bsz, 1, seq, src_len]), self.onnx_dtype)
        inverted = self.op(s, "Sub", self.const(s, 1.0, self.dtype), mask)
        flags = self.cast(s, self.cast(s, inverted, TensorProto.BOOL), TensorProto.BOOL)
        return self.where(partial(self.op, s), flags, self.lowest(s), inverted)

    def rms_norm(self, s, x, role, name):
        weight = self.param(role, name, [self.arch.hidden], mean=1.0, std=0.05)
        xf = self.cast(s, x, TensorProto.FLOAT)
        squares = self.op(s, "Pow", xf, self.const(s, 2.0, np.float32))
        if self.opset >= 18:
            variance = self.op(s, "ReduceMean", squares, self.const(s, [-1]), keepdims=1)
        else:
            variance = self.op(s, "ReduceMean", squares, axes=[-1], keepdims=1)
        std = self.op(s, "Sqrt", self.op(s, "Add", variance, self.const(s, self.arch.rms_eps, np.float32)))
        rsqrt = self.op(s, "Div", self.const(s, 1.0, np.float32), std)
        return self.op(s, "Mul", weight, self.cast(s, self.op(s, "Mul", xf, rsqrt), self.onnx_dtype))

    def decoder_layer(self, i, x, sizes):
        a = self.arch
        s, m = f"/model/layers.{i}", f"/model/layers.{i}/mlp"
        h = self.rms_norm(
            f"{s}/input_layernorm", x, f"layers.{i}.input_norm", f"model.layers.{i}.input_layernorm.weight"
        )
        x = self.op(s, "Add", x, self.attention(i, h, sizes))
        h = self.rms_norm(
            f"{s}/post_attention_layernorm",
            x,
            f"layers.{i}.post_norm",
            f"model.layers.{i}.post_attention_layernorm.weight",
        )
        gate = self.linear(f"{m}/gate_proj", h, f"layers.{i}.gate", [a.hidden, a.intermediate])
        silu = self.op(f"{m}/act_fn", "Mul", gate, self.op(f"{m}/act_fn", "Sigmoid", gate))
        up = self.linear(f"{m}/up_proj", h, f"layers.{i}.up", [a.hidden, a.intermediate])
        down = self.linear(
            f"{m}/down_proj", self.op(m, "Mul", silu, up), f"layers.{i}.down", [a.intermediate, a.hidden]
        )
        return self.op(s, "Add", x, down)

    def attention(self, i, h, sizes):
        a = self.arch
        s = f"/model/layers.{i}/self_attn"
        bsz, q_len = self.size(s, h, 0), self.size(s, h, 1)
        heads = {"q": a.heads, "k": a.kv_heads, "v": a.kv_heads}
        proj = {}
        for n in "qkv":
            bias = f"model.layers.{i}.self_attn.{n}_proj.bias" if a.qkv_bias else None
            proj[n] = self.linear(f"{s}/{n}_proj", h, f"layers.{i}.{n}", [a.hidden, heads[n] * a.head_dim], bias)

        def view(n, shape):
            return self.op(s, "Transpose", self.op(s, "Reshape", proj[n], shape), perm=[0, 2, 1, 3])

        q = view("q", self.list_construct(s, [bsz, q_len, a.heads, a.head_dim]))
        k_shape, v_shape = (self.list_construct(s, [bsz, q_len, heads[n], a.head_dim]) for n in "kv")
        k, v = view("k", k_shape), view("v", v_shape)
        # past_key_value[0].shape[-2], traced once per layer (the first reuses the model's)
        kv_seq_len = self.size(s, k, 2)
        past = sizes["past"] if i == 0 else self.size(s, f"past_key_values.{i}.key", 2)
        kv_seq_len = self.op(s, "Add", kv_seq_len, past)
        cos, sin = (self.rotary_table(s, n, kv_seq_len) for n in ("cos", "sin"))
        q, k = self.apply_rotary(s, q, k, cos, sin)
        key = self.op(s, "Concat", f"past_key_values.{i}.key", k, axis=-2, out=f"present.{i}.key")
        value = self.op(s, "Concat", f"past_key_values.{i}.value", v, axis=-2, out=f"present.{i}.value")
        key, value = self.repeat_kv(s, key), self.repeat_kv(s, value)
        scores = self.op(s, "MatMul", q, self.op(s, "Transpose", key, perm=[0, 1, 3, 2]))
        scores = self.op(s, "Div", scores, self.const(s, math.sqrt(a.head_dim), self.dtype))
        probs = self.op(s, "Softmax", self.op(s, "Add", scores, sizes["mask"]), axis=-1)
        probs = self.cast(s, self.cast(s, probs, TensorProto.FLOAT), self.onnx_dtype)
        ctx = self.op(s, "Transpose", self.op(s, "MatMul", probs, value), perm=[0, 2, 1, 3])
        ctx = self.op(s, "Reshape", ctx, self.list_construct(s, [bsz, q_len, a.hidden]))
        return self.linear(f"{s}/o_proj", ctx, f"layers.{i}.o", [a.hidden, a.hidden])

    def rotary_table(self, s, name, kv_seq_len):
        """self.{cos,sin}_cached[:seq_len].to(dtype): one shared initializer (torch deduplicates
        the identical buffers of every layer), sliced in each layer."""
        if name not in self.rotary:
            positions = np.arange(self.arch.max_positions, dtype=np.int64).astype(np.float32)
            freqs = np.outer(positions, inv_freq(self.arch))
            table = getattr(np, name)(np.concatenate([freqs, freqs], axis=-1)).astype(self.dtype)
            tensor_name = f"model.layers.0.self_attn.rotary_emb.{name}_cached"
            self.rotary[name] = self.init(self.weights.array(tensor_name, table))
        r = f"{s}/rotary_emb"
        axes, starts = self.const(r, [0]), self.const(r, [0])
        end = self.unsqueeze(r, kv_seq_len, 0)
        sliced = self.op(r, "Slice", self.rotary[name], starts, end, axes, self.const(r, [1]))
        return self.cast(r, sliced, self.onnx_dtype)

    def apply_rotary(self, s, q, k, cos, sin):
        """apply_rotary_pos_emb; with a partial rotary, on the first rotary_dim dims only (the
        Phi way: slice, rotate, concatenate the pass-through part back)."""
        a = self.arch
        cos, sin = (self.unsqueeze(s, self.op(s, "Gather", t, "position_ids", axis=0), 1) for t in (cos, sin))
        partial_rotary = a.rotary_dim < a.head_dim
        if partial_rotary:
            (q, q_pass), (k, k_pass) = (self.split_last(s, x, a.rotary_dim) for x in (q, k))
        q, k = (self.rotate(s, x, cos, sin) for x in (q, k))
        if partial_rotary:
            q, k = self.op(s, "Concat", q, q_pass, axis=-1), self.op(s, "Concat", k, k_pass, axis=-1)
        return q, k

    def split_last(self, s, x, at):
        """x[..., :at], x[..., at:] with constant bounds."""
        first = self.op(s, "Slice", x, self.const(s, [0]), self.const(s, [at]), self.const(s, [3]), self.const(s, [1]))
        rest = self.op(
            s, "Slice", x, self.const(s, [at]), self.const(s, [INT64_MAX]), self.const(s, [3]), self.const(s, [1])
        )
        return first, rest

    def rotate(self, s, x, cos, sin):
        """x * cos + rotate_half(x) * sin, rotate_half slicing at x.shape[-1] // 2 taken at run
        time."""
        x_cos = self.op(s, "Mul", x, cos)
        half = self.op(s, "Div", self.size(s, x, 3), self.const(s, 2))
        half = self.cast(s, self.cast(s, half, TensorProto.INT64), TensorProto.INT64)
        axes, starts = self.const(s, [3]), self.const(s, [0])
        x1 = self.op(s, "Slice", x, starts, self.unsqueeze(s, half, 0), axes, self.const(s, [1]))
        axes, start = self.const(s, [3]), self.unsqueeze(s, half, 0)
        x2 = self.op(s, "Slice", x, start, self.const(s, [INT64_MAX]), axes, self.const(s, [1]))
        rotated = self.op(s, "Concat", self.op(s, "Neg", x2), x1, axis=-1)
        return self.op(s, "Add", x_cos, self.op(s, "Mul", rotated, sin))

    def repeat_kv(self, s, x):
        """x[:, :, None].expand(b, kvh, n_rep, t, d).reshape(b, kvh * n_rep, t, d)."""
        n_rep = self.arch.n_rep
        if n_rep == 1:
            return x
        b, kvh, t, d = (self.size(s, x, dim) for dim in range(4))
        expanded = self.expand(s, self.unsqueeze(s, x, 2), [b, kvh, n_rep, t, d])
        heads = self.op(s, "Mul", kvh, self.const(s, n_rep))
        return self.op(s, "Reshape", expanded, self.list_construct(s, [b, heads, t, d]))


class DynamoBuilder(Builder):
    """torch.onnx.export(dynamo=True) of a recent transformers' LlamaForCausalLM with SDPA,
    after onnxscript's optimizer (constant folding, CSE, and the opset-23 fusions)."""

    dims = ("total_sequence_length", "past_sequence_length + sequence_length")

    def __init__(self, *args):
        super().__init__(*args)
        self.n = 0
        self.fx_counts = defaultdict(int)
        self.consts = {}
        self.cache = {}
        self.fp32 = self.onnx_dtype == TensorProto.FLOAT

    def fx_name(self, base):
        """The next name of an FX node: linear, linear_1, ..."""
        k = self.fx_counts[base]
        self.fx_counts[base] += 1
        return f"{base}_{k}" if k else base

    def op(self, op_type, *inputs, fx=None, out=None, fused=False, **attrs):
        """A node whose output is the FX value ``fx`` (node node_<value>, or node_<Op>_N for a
        node the optimizer fused), or an anonymous val_N (node node_<Op>_N)."""
        self.n += 1
        value = self.fx_name(fx) if fx else f"val_{self.n}"
        name = f"node_{op_type}_{self.n}" if fused or not fx else f"node_{value}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out or value], name=name, **attrs))
        return out or value

    def const(self, value, dtype=np.int64):
        """A small initializer val_N, one per distinct value."""
        array = np.array(value, dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self.consts:
            self.n += 1
            self.consts[key] = self.init(to_tensor(array, f"val_{self.n}"))
        return self.consts[key]

    def once(self, key, make):
        """A value made by ``make()`` the first time it is needed and reused by every layer
        (the optimizer's common subexpression elimination)."""
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def shared(self, key, op_type, *inputs, **attrs):
        """A node made once and reused by every layer."""
        return self.once(key, lambda: self.op(op_type, *inputs, **attrs))

    def folded_weight(self, role, shape):
        """The transposed weight, folded by the optimizer into an initializer val_N [in, out]."""
        self.n += 1
        return self.linear_weight(role, f"val_{self.n}", shape)

    def shape(self, x, start=0, end=None):
        """Shape(x)[start:end]: Shape-15's start/end attributes, a Slice below opset 15."""
        if self.opset >= 15:
            return self.op("Shape", x, start=start, **({} if end is None else {"end": end}))
        if start == 0 and end is None:
            return self.op("Shape", x)
        ends = self.const([INT64_MAX if end is None else end])
        return self.op("Slice", self.op("Shape", x), self.const([start]), ends)

    def size(self, x, dim):
        """(Shape(x)[dim:dim+1], the scalar sym_size_int)."""
        dims = self.shape(x, dim, dim + 1)
        return dims, self.op("Squeeze", dims, fx="sym_size_int")

    # -------------------------------------------------------------------- model blocks
    def build(self):
        a = self.arch
        x = self.prologue()
        for i in range(a.layers):
            x = self.decoder_layer(i, x)
        x = self.rms_norm(x, "norm", "model.norm.weight")
        self.op("MatMul", x, self.folded_weight("lm_head", [a.hidden, a.vocab]), fx="linear", out="logits")

    def prologue(self):
        """Sizes, the embedding, the boolean mask and the rotary angles."""
        a = self.arch
        self.seq_dims, self.seq = self.size("input_ids", 1)
        self.batch_dims, batch = self.size("attention_mask", 0)
        self.past = [self.size("past_key_values.0.key", 2)[1]]
        if a.n_rep > 1:
            self.past += [self.size(f"past_key_values.{i}.key", 2)[1] for i in range(1, a.layers)]
        total = self.op("Add", self.past[0], self.seq, fx="add")
        embed = self.param("embed", "lm_head.weight" if a.tied else "model.embed_tokens.weight", [a.vocab, a.hidden])
        embeds = self.op("Gather", embed, "input_ids", axis=0, fx="embedding")
        self.mask = self.boolean_mask(batch, total)
        self.rotary_angles()
        return embeds

    def boolean_mask(self, batch, total):
        """transformers' sdpa mask: causal (kv_idx <= q_idx) and padding (GatherND of the
        attention mask at [batch_idx, kv_idx]), expanded to [batch, 1, seq, total]."""
        flags = self.op("Cast", "attention_mask", to=TensorProto.BOOL, fx="_to_copy")
        zero, one = self.const(0), self.const(1)
        batch_idx = self.op("Range", zero, batch, one, fx="arange")
        q_idx = self.op("Add", self.op("Range", zero, self.seq, one, fx="arange"), self.past[0], fx="add")
        kv_idx = self.op("Range", zero, total, one, fx="arange")

        def unsqueeze(x, first, second):  # the first one merged from two by the optimizer
            x = self.op("Unsqueeze", x, self.const(first), fx="unsqueeze", fused=True)
            return self.op("Unsqueeze", x, self.const(second), fx="unsqueeze")

        batch_idx, q_idx, kv_idx = (
            unsqueeze(batch_idx, [1, 2], [3]),
            unsqueeze(q_idx, [0, 1], [3]),
            unsqueeze(kv_idx, [0, 1], [2]),
        )
        causal = self.op("LessOrEqual", kv_idx, q_idx, fx="le")
        causal = self.op("And", self.init(to_tensor(np.array(True), "new_ones")), causal, fx="bitwise_and")
        both = self.shape(self.op("Max", batch_idx, kv_idx))
        index = [self.op("Unsqueeze", self.op("Expand", i, both), self.const([-1])) for i in (batch_idx, kv_idx)]
        padding = self.op("GatherND", flags, self.op("Concat", *index, axis=-1), batch_dims=0)
        allowed = self.op("And", causal, padding, fx="bitwise_and")
        self.total_dims = self.op("Reshape", total, self.const([-1]), allowzero=0)
        shape = self.op("Concat", self.batch_dims, self.const([1]), self.seq_dims, self.total_dims, axis=0)
        return self.op("Expand", allowed, shape, fx="expand")

    @property
    def fused_rotary(self):
        """onnxscript fuses the rotary at opset 23 only when no Cast sits in the pattern."""
        return self.opset >= 23 and self.fp32

    def rotary_angles(self):
        """position_ids * inv_freq [batch, seq, rotary_dim / 2] in float32, then (unless the
        rotary gets fused) cos and sin of the doubled angles in the model dtype."""
        positions = self.op("Unsqueeze", "position_ids", self.const([2]), fx="unsqueeze")
        positions = self.op("Cast", positions, to=TensorProto.FLOAT, fx="_to_copy")
        freqs = inv_freq(self.arch)
        if self.fp32:
            table = self.init(to_tensor(freqs, "model.rotary_emb.inv_freq"))
        else:  # the buffer rounded by model.to(dtype), its .float() folded by the optimizer
            table = self.init(to_tensor(freqs.astype(self.dtype).astype(np.float32), self.fx_name("_to_copy")))
        self.angles = self.op("Mul", positions, table, fx="mul")
        if self.fused_rotary:
            return
        emb = self.op("Concat", self.angles, self.angles, axis=-1, fx="cat")
        cos, sin = self.op("Cos", emb, fx="cos"), self.op("Sin", emb, fx="sin")
        if not self.fp32:
            cos, sin = (self.op("Cast", t, to=self.onnx_dtype, fx="_to_copy") for t in (cos, sin))
        self.cos_sin = (cos, sin)

    def rms_norm(self, x, role, name):
        weight = self.param(role, name, [self.arch.hidden], mean=1.0, std=0.05)
        if self.opset >= 23:
            return self.op(
                "RMSNormalization", x, weight, axis=-1, epsilon=self.arch.rms_eps, stash_type=1, fx="mul", fused=True
            )
        xf = x if self.fp32 else self.op("Cast", x, to=TensorProto.FLOAT, fx="_to_copy")
        squares = self.op("Pow", xf, self.const(2.0, np.float32), fx="pow")
        if self.opset >= 18:
            variance = self.op("ReduceMean", squares, self.const([-1]), keepdims=1, noop_with_empty_axes=0, fx="mean")
        else:
            variance = self.op("ReduceMean", squares, axes=[-1], keepdims=1, fx="mean")
        variance = self.op("Add", variance, self.const(self.arch.rms_eps, np.float32), fx="add")
        normed = self.op("Mul", xf, self.op("Reciprocal", self.op("Sqrt", variance), fx="rsqrt"), fx="mul")
        if not self.fp32:
            normed = self.op("Cast", normed, to=self.onnx_dtype, fx="_to_copy")
        return self.op("Mul", weight, normed, fx="mul")

    def linear(self, x, role, shape, bias_name=None):
        weight = self.folded_weight(role, shape)
        if not bias_name:
            return self.op("MatMul", x, weight, fx="linear")
        bias = self.param(role + "_bias", bias_name, [shape[1]])
        return self.op("Add", self.op("MatMul", x, weight), bias, fx="linear")

    def decoder_layer(self, i, x):
        a = self.arch
        h = self.rms_norm(x, f"layers.{i}.input_norm", f"model.layers.{i}.input_layernorm.weight")
        x = self.op("Add", x, self.attention(i, h), fx="add")
        h = self.rms_norm(x, f"layers.{i}.post_norm", f"model.layers.{i}.post_attention_layernorm.weight")
        gate = self.linear(h, f"layers.{i}.gate", [a.hidden, a.intermediate])
        silu = self.op("Mul", gate, self.op("Sigmoid", gate), fx="silu")
        up = self.linear(h, f"layers.{i}.up", [a.hidden, a.intermediate])
        down = self.linear(self.op("Mul", silu, up, fx="mul"), f"layers.{i}.down", [a.intermediate, a.hidden])
        return self.op("Add", x, down, fx="add")

    def attention(self, i, h):
        a = self.arch
        states = {}
        for n, heads in (("q", a.heads), ("k", a.kv_heads), ("v", a.kv_heads)):
            bias = f"model.layers.{i}.self_attn.{n}_proj.bias" if a.qkv_bias else None
            y = self.linear(h, f"layers.{i}.{n}", [a.hidden, heads * a.head_dim], bias)
            minus_one, head_dim = self.const([-1]), self.const([a.head_dim])
            shape = self.shared("heads", "Concat", self.batch_dims, self.seq_dims, minus_one, head_dim, axis=0)
            y = self.op("Reshape", y, shape, allowzero=1, fx="view")
            states[n] = self.op("Transpose", y, perm=[0, 2, 1, 3], fx="transpose")
        q, k = self.apply_rotary(states["q"], states["k"])
        key = self.op("Concat", f"past_key_values.{i}.key", k, axis=-2, fx="cat", out=f"present.{i}.key")
        value = self.op(
            "Concat", f"past_key_values.{i}.value", states["v"], axis=-2, fx="cat", out=f"present.{i}.value"
        )
        ctx = self.sdpa(q, self.repeat_kv(key, i), self.repeat_kv(value, 0))
        ctx = self.op("Transpose", ctx, perm=[0, 2, 1, 3], fx="transpose")
        shape = self.shared("hidden", "Concat", self.batch_dims, self.seq_dims, self.const([-1]), axis=0)
        ctx = self.op("Reshape", ctx, shape, allowzero=1, fx="view")
        return self.linear(ctx, f"layers.{i}.o", [a.hidden, a.hidden])

    def apply_rotary(self, q, k):
        """Rotate q and k; with a partial rotary slice both first, rotate the first part and
        concatenate the pass-through part back."""
        a = self.arch
        partial_rotary = a.rotary_dim < a.head_dim
        parts = [self.split_last(x, a.rotary_dim) if partial_rotary else (x, None) for x in (q, k)]
        results = []
        for (x, passed), heads in zip(parts, (a.heads, a.kv_heads)):
            x = self.fused_rotate(x, heads) if self.fused_rotary else self.rotate(x)
            results.append(self.op("Concat", x, passed, axis=-1, fx="cat") if partial_rotary else x)
        return results

    def split_last(self, x, at):
        axes, steps = self.const([3]), self.const([1])
        first = self.op("Slice", x, self.const([0]), self.const([at]), axes, steps, fx="slice")
        rest = self.op("Slice", x, self.const([at]), self.const([INT64_MAX]), axes, steps, fx="slice")
        return first, rest

    def rotate(self, x):
        cos, sin = (
            self.shared(("unsqueezed", t), "Unsqueeze", t, self.const([1]), fx="unsqueeze") for t in self.cos_sin
        )
        x_cos = self.op("Mul", x, cos, fx="mul")
        x1, x2 = self.split_last(x, self.arch.rotary_dim // 2)
        rotated = self.op("Concat", self.op("Neg", x2, fx="neg"), x1, axis=-1, fx="cat")
        return self.op("Add", x_cos, self.op("Mul", rotated, sin, fx="mul"), fx="add")

    def fused_rotate(self, x, heads):
        cos, sin = self.op("Cos", self.angles), self.op("Sin", self.angles)
        return self.op("RotaryEmbedding", x, cos, sin, interleaved=0, num_heads=heads, fx="add", fused=True)

    def repeat_kv(self, x, layer):
        """Unsqueeze, Expand, Reshape to shapes made of the symbolic sizes; as torch.export's
        symbols come out, the key of each layer gets its own total length and the values share
        the first layer's."""
        a = self.arch
        if a.n_rep == 1:
            return x

        def total():
            total = self.op("Add", self.past[layer], self.seq, fx="add")
            return self.op("Reshape", total, self.const([-1]), allowzero=0)

        x = self.op("Unsqueeze", x, self.const([2]), fx="unsqueeze")
        total = self.once(("total", layer), total) if layer else self.total_dims
        kv_heads, n_rep, heads, head_dim = (self.const([n]) for n in (a.kv_heads, a.n_rep, a.heads, a.head_dim))
        shape = self.shared(("expand", layer), "Concat", self.batch_dims, kv_heads, n_rep, total, head_dim, axis=0)
        x = self.op("Expand", x, shape, fx="expand")
        shape = self.shared(("reshape", layer), "Concat", self.batch_dims, heads, total, head_dim, axis=0)
        return self.op("Reshape", x, shape, allowzero=1, fx="_unsafe_view")

    def sdpa(self, q, k, v):
        """onnxscript's aten_scaled_dot_product_attention with a boolean mask: k transposed
        through a 3-D reshape, both sides scaled by sqrt(scale), a NaN guard after Softmax; the
        Attention op from opset 23."""
        a = self.arch
        if self.opset >= 23:
            return self.op(
                "Attention",
                q,
                k,
                v,
                self.mask,
                is_causal=0,
                qk_matmul_output_mode=0,
                scale=1.0 / math.sqrt(a.head_dim),
                softcap=0.0,
                fx="scaled_dot_product_attention",
            )
        shape = self.shape(k)
        last = self.op("Slice", shape, self.const([-1]), self.const([INT64_MAX]))
        second_last = self.op("Slice", shape, self.const([-2]), self.const([-1]))
        first = self.op("Slice", shape, self.const([INT64_MIN]), self.const([-2]))
        k_t = self.op("Reshape", k, self.op("Concat", self.const([-1]), second_last, last, axis=0), allowzero=0)
        k_t = self.op("Transpose", k_t, perm=[0, 2, 1])
        k_t = self.op("Reshape", k_t, self.op("Concat", first, last, second_last, axis=0), allowzero=0)
        scale = self.const(math.sqrt(1.0 / math.sqrt(a.head_dim)), self.dtype)
        q, k_t = self.op("Mul", q, scale), self.op("Mul", k_t, scale)
        zero, lowest = self.const(0.0, self.dtype), self.const(finfo_min(self.dtype), self.dtype)
        bias = self.once("mask_bias", lambda: self.where(self.op, self.mask, zero, lowest))
        probs = self.op("Softmax", self.op("Add", self.op("MatMul", q, k_t), bias), axis=-1)
        probs = self.where(self.op, self.op("IsNaN", probs), zero, probs)
        return self.op("MatMul", probs, v, fx="scaled_dot_product_attention")

    def model(self):
        """With the value_info torch writes for every value (here from onnx's shape inference)."""
        model = super().model()
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        outputs = {o.name for o in model.graph.output}
        model.graph.value_info.extend(v for v in inferred.graph.value_info if v.name not in outputs)
        return model


BUILDERS = {"torchscript": TorchScriptBuilder, "dynamo": DynamoBuilder}


# ----------------------------------------------------------------------------------- verify
TOLERANCES = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 5e-2}


def verify_steps(arch, dtype, seed):
    """Feeds of a prefill step (batch 2, past 3, sequence 4, the first two positions of the
    second row padded) as dicts, and a function making the decode step (sequence 1) from the
    prefill's presents."""
    rng = np.random.default_rng([seed, 1])
    batch, past_len, seq = 2, 3, 4
    mask = np.ones((batch, past_len + seq), np.int64)
    mask[1, :2] = 0
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    feeds = {
        "input_ids": rng.integers(0, arch.vocab, (batch, seq)),
        "attention_mask": mask,
        "position_ids": np.ascontiguousarray(positions[:, past_len:]),
    }
    for i in range(arch.layers):
        for kv in ("key", "value"):
            shape = (batch, arch.kv_heads, past_len, arch.head_dim)
            feeds[f"past_key_values.{i}.{kv}"] = rng.standard_normal(shape).astype(dtype)

    def decode(presents):
        step = {
            "input_ids": rng.integers(0, arch.vocab, (batch, 1)),
            "attention_mask": np.concatenate([mask, np.ones((batch, 1), np.int64)], axis=1),
            "position_ids": np.ascontiguousarray(positions[:, -1:] + 1),
        }
        for i, (key, value) in enumerate(presents):
            step[f"past_key_values.{i}.key"] = key.astype(dtype)
            step[f"past_key_values.{i}.value"] = value.astype(dtype)
        return step

    return feeds, decode


def runners(path, dtype):
    """(description, run(feeds) -> outputs): onnxruntime on one thread with no and with all
    graph optimizations, or, for bfloat16 (which onnxruntime's CPU kernels mostly lack), onnx's
    ReferenceEvaluator."""
    if dtype == "bfloat16":
        from onnx.reference import ReferenceEvaluator
        from onnx.reference.op_run import OpRun

        class MatMul(OpRun):
            """np.matmul promotes bfloat16 to float32, which onnx 1.19's MatMul returns as is."""

            def _run(self, a, b):
                return (np.matmul(a, b).astype(a.dtype),)

        class Sigmoid(OpRun):
            """onnx 1.19's Sigmoid cannot np.vectorize over bfloat16."""

            def _run(self, x):
                return ((1.0 / (1.0 + np.exp(-x.astype(np.float32)))).astype(x.dtype),)

        evaluator = ReferenceEvaluator(path, new_ops=[MatMul, Sigmoid])
        description = f"onnx {onnx.__version__} ReferenceEvaluator (bfloat16: not run in onnxruntime)"
        return [(description, partial(evaluator.run, None))]
    import onnxruntime as ort

    result = []
    for level in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        result.append((f"onnxruntime {ort.__version__} {level}", partial(session.run, None)))
    return result


def verify(path, builder, style, dtype):
    """Run the model on a prefill and a decode step and compare logits and every present with
    decoder_reference.forward on the weights read back from the files."""
    import decoder_reference

    arch, np_dtype, tolerance = builder.arch, builder.dtype, TOLERANCES[dtype]
    model_dir = os.path.dirname(os.path.abspath(path))
    stored = {t.name: t for t in onnx.load(path, load_external_data=False).graph.initializer}
    weights = {role: decoder_reference.read_tensor(stored[t.name], model_dir) for role, t in builder.roles.items()}
    feeds, decode = verify_steps(arch, np_dtype, builder.weights.seed)
    names = ["logits"] + [f"present.{i}.{kv}" for i in range(arch.layers) for kv in ("key", "value")]
    checks = runners(path, dtype)
    worst = 0.0
    for step in ("prefill", "decode"):
        logits, presents = decoder_reference.forward(
            weights,
            arch,
            np_dtype,
            style,
            feeds["input_ids"],
            feeds["attention_mask"],
            feeds["position_ids"],
            [(feeds[f"past_key_values.{i}.key"], feeds[f"past_key_values.{i}.value"]) for i in range(arch.layers)],
        )
        expected = [logits] + [x for pair in presents for x in pair]
        for description, run in checks:
            for name, actual, want in zip(names, run(feeds), expected):
                actual = np.asarray(actual).astype(np.float64)
                np.testing.assert_allclose(
                    actual, want, rtol=tolerance, atol=tolerance, err_msg=f"{step} {name} ({description})"
                )
                worst = max(worst, float(np.max(np.abs(actual - want))))
        feeds = decode(presents)
    print(
        f"verified against the numpy reference (prefill batch 2 past 3 seq 4 with padding, then decode): "
        f"{'; '.join(d for d, _ in checks)}; max abs diff {worst:.2e} (tolerance {tolerance})"
    )


# ----------------------------------------------------------------------------------- main
def arch_of(args):
    preset = PRESETS[args.preset]
    arch = dataclasses.replace(
        preset,
        layers=preset.layers if args.layers is None else args.layers,
        max_positions=args.max_positions,
        rotary_fraction=args.partial_rotary,
    )
    if arch.layers < 1:
        raise SystemExit("--layers must be at least 1")
    if arch.rotary_dim <= 0 or arch.rotary_dim % 2:
        raise SystemExit(f"--partial-rotary {args.partial_rotary} gives an odd or empty rotary dim {arch.rotary_dim}")
    if args.verify and arch.params > VERIFY_MAX_PARAMS:
        raise SystemExit(f"--verify needs at most {VERIFY_MAX_PARAMS:,} parameters, this model has {arch.params:,}")
    return arch


def generate(args, arch):
    """Build, write and check the model; returns its builder."""
    start = time.perf_counter()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with WeightFile(args.out + ".data", DTYPES[args.dtype][0], args.seed, args.align) as weights:
        builder = BUILDERS[args.style](arch, args.dtype, args.opset, weights)
        builder.build()
    model = builder.model()
    with open(args.out, "wb") as f:
        f.write(model.SerializeToString())
    onnx.checker.check_model(args.out, full_check=True)
    seconds = time.perf_counter() - start
    print(
        f"{args.out}: {args.preset} {args.style} opset {args.opset} {args.dtype}, {arch.layers} layers, "
        f"{len(model.graph.node)} nodes, {weights.params:,} params, {weights.offset:,} bytes of external data, "
        f"{seconds:.1f} s"
    )
    return builder


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", required=True, choices=sorted(PRESETS))
    p.add_argument("--style", required=True, choices=sorted(BUILDERS))
    p.add_argument("--opset", required=True, type=int, choices=range(14, 24), metavar="{14..23}")
    p.add_argument("--dtype", required=True, choices=sorted(DTYPES))
    p.add_argument("--out", required=True, help="DIR/model.onnx (the weights go to DIR/model.onnx.data)")
    p.add_argument("--layers", type=int, help="override the preset's layer count")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partial-rotary", type=float, default=1.0, help="rotate only this fraction of each head")
    p.add_argument("--max-positions", type=int, default=4096, help="rows of the TorchScript cos/sin tables")
    p.add_argument(
        "--align",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start each external tensor at a 4096-aligned offset (default: on)",
    )
    p.add_argument("--verify", action="store_true", help="compare the model with the numpy reference")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    builder = generate(args, arch_of(args))
    if args.verify:
        verify(args.out, builder, args.style, args.dtype)


if __name__ == "__main__":
    sys.exit(main())
