"""Numpy forward pass of a Llama-style decoder, written from the architecture definition.

Used by ``gen_decoder.py --verify`` to check a generated ONNX model: it reads the weights back
from the model's external data file (or its inline ``raw_data``) by role, and computes logits
and the new key/value cache without looking at the graph. Everything is computed in float64
from the stored (already rounded) weights and inputs.

Roles (keys of the ``weights`` dict given to :func:`forward`):
  ``embed`` [vocab, hidden], ``norm`` [hidden], ``lm_head`` [hidden, vocab] (pre-transposed),
  and per layer ``layers.{i}.{input_norm,post_norm}`` [hidden],
  ``layers.{i}.{q,k,v,o,gate,up,down}`` [in, out] (pre-transposed), and with a bias
  ``layers.{i}.{q,k,v}_bias`` [out].
"""

import os

import ml_dtypes
import numpy as np
from onnx import TensorProto

NP_TYPES = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    TensorProto.INT64: np.dtype(np.int64),
}


def read_tensor(tensor, model_dir):
    """The values of an initializer, from its external data file or its raw_data."""
    dtype = NP_TYPES[tensor.data_type]
    shape = tuple(tensor.dims)
    if tensor.data_location != TensorProto.EXTERNAL:
        return np.frombuffer(tensor.raw_data, dtype).reshape(shape)
    info = {e.key: e.value for e in tensor.external_data}
    count = int(info["length"]) // dtype.itemsize
    path = os.path.join(model_dir, info["location"])
    return np.fromfile(path, dtype, count, offset=int(info.get("offset", "0"))).reshape(shape)


def _rounded(values, dtype):
    """``values`` rounded to ``dtype`` (as torch's ``.to(dtype)``), back in float64."""
    return np.asarray(values).astype(dtype).astype(np.float64)


def rotary_tables(position_ids, rotary_dim, theta, dtype, style):
    """cos and sin [batch, seq, rotary_dim] for each position.

    ``torchscript``: transformers 4.36 precomputes cos/sin in float32 for every position and
    the model's ``.to(dtype)`` rounds the cached tables. ``dynamo``: newer transformers keeps
    ``inv_freq`` as a buffer (rounded by ``.to(dtype)``), computes the angles in float32 at run
    time and rounds cos/sin to the model dtype."""
    inv_freq = 1.0 / (theta ** (np.arange(0, rotary_dim, 2, dtype=np.int64).astype(np.float32) / rotary_dim))
    inv_freq = inv_freq.astype(np.float32)
    if style == "dynamo":
        inv_freq = inv_freq.astype(dtype).astype(np.float32)
    freqs = position_ids.astype(np.float32)[..., None] * inv_freq
    emb = np.concatenate([freqs, freqs], axis=-1)
    return _rounded(np.cos(emb), dtype), _rounded(np.sin(emb), dtype)


def rms_norm(x, weight, eps, dtype):
    """transformers' LlamaRMSNorm: normalise in float32, round to the model dtype, scale."""
    variance = np.mean(x * x, axis=-1, keepdims=True)
    return weight * _rounded(x / np.sqrt(variance + eps), dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rotary(x, cos, sin):
    """x [batch, heads, seq, head_dim]; rotates the first cos.shape[-1] dims (all of them
    unless the rotary is partial), the rest passes through."""
    rot = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]
    x_rot = x[..., :rot] * cos + rotate_half(x[..., :rot]) * sin
    return np.concatenate([x_rot, x[..., rot:]], axis=-1)


def softmax(x):
    x = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return e / np.sum(e, axis=-1, keepdims=True)


def silu(x):
    return x / (1.0 + np.exp(-x))


def attention_mask_4d(attention_mask, seq):
    """[batch, 1, seq, total] booleans: a query sees the keys before it (causal, past
    included) that the padding mask keeps."""
    total = attention_mask.shape[1]
    past = total - seq
    causal = np.arange(total)[None, :] <= (past + np.arange(seq))[:, None]
    return (causal[None] & (attention_mask[:, None, :] != 0))[:, None]


def forward(weights, arch, dtype, style, input_ids, attention_mask, position_ids, past):
    """Logits [batch, seq, vocab] and the list of (key, value) presents, all float64.

    ``arch`` needs hidden, layers, heads, kv_heads, head_dim, rotary_dim, rope_theta, rms_eps,
    qkv_bias; ``past`` is a list of (key, value) [batch, kv_heads, past, head_dim]."""
    w = {name: np.asarray(value).astype(np.float64) for name, value in weights.items()}
    batch, seq = input_ids.shape
    heads, kv_heads, head_dim = arch.heads, arch.kv_heads, arch.head_dim
    cos, sin = rotary_tables(position_ids, arch.rotary_dim, arch.rope_theta, dtype, style)
    allowed = attention_mask_4d(attention_mask, seq)
    x = w["embed"][input_ids]
    presents = []
    for i in range(arch.layers):
        p = f"layers.{i}."
        h = rms_norm(x, w[p + "input_norm"], arch.rms_eps, dtype)
        q, k, v = (h @ w[p + name] for name in "qkv")
        if arch.qkv_bias:
            q, k, v = q + w[p + "q_bias"], k + w[p + "k_bias"], v + w[p + "v_bias"]
        q = q.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)
        k = k.reshape(batch, seq, kv_heads, head_dim).transpose(0, 2, 1, 3)
        v = v.reshape(batch, seq, kv_heads, head_dim).transpose(0, 2, 1, 3)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        k = np.concatenate([np.asarray(past[i][0], np.float64), k], axis=2)
        v = np.concatenate([np.asarray(past[i][1], np.float64), v], axis=2)
        presents.append((k, v))
        k, v = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
        probs = softmax(np.where(allowed, scores, -np.inf))
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_dim)
        x = x + ctx @ w[p + "o"]
        h = rms_norm(x, w[p + "post_norm"], arch.rms_eps, dtype)
        x = x + (silu(h @ w[p + "gate"]) * (h @ w[p + "up"])) @ w[p + "down"]
    return rms_norm(x, w["norm"], arch.rms_eps, dtype) @ w["lm_head"], presents
