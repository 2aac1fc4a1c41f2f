"""Contrib conformance cases: the attention family (RotaryEmbedding, GroupQueryAttention,
MultiHeadAttention, Attention of com.microsoft)."""
import numpy as np
from onnx import TensorProto, helper

from . import Case, rng

F32 = TensorProto.FLOAT
F16 = TensorProto.FLOAT16


def node_case(name, op, inputs, outputs, out_type, **attrs):
    """One com.microsoft node. `inputs` is a list of (name, array or None); None leaves the
    optional input out. `outputs` lists output names ("" skips an optional output)."""
    feeds = {n: a for n, a in inputs if a is not None}
    node = helper.make_node(
        op,
        [n if a is not None else "" for n, a in inputs],
        outputs,
        domain="com.microsoft",
        **attrs,
    )
    while node.input and node.input[-1] == "":
        node.input.pop()
    types = [(o, out_type) for o in outputs if o]
    return Case(name=name, nodes=[node], inputs=feeds, outputs=types)


def rand(r, shape, dtype=np.float32, scale=1.0):
    return (r.standard_normal(shape) * scale).astype(dtype)


def rope_cache(max_pos, half, dtype=np.float32, base=10000.0):
    inv = 1.0 / (base ** (np.arange(half, dtype=np.float64) / half))
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


# ---------------------------------------------------------------------------------------------
# RotaryEmbedding: input (B, S, N*H) or (B, N, S, H), position_ids (1) or (B, S), caches
# (max_position, rotary_dim / 2).


def rotary_cases():
    specs = [
        # name, dtype, shape (3-D: B, S, N, H), 4d, pos form, interleaved, rotary_dim, extra attrs
        ("rotary_3d_pos1", np.float32, (2, 3, 2, 8), False, "offset", 0, 0, {}),
        ("rotary_3d_pos2d", np.float32, (2, 3, 2, 8), False, "full", 0, 0, {}),
        ("rotary_3d_interleaved", np.float32, (2, 3, 2, 8), False, "full", 1, 0, {}),
        ("rotary_4d", np.float32, (2, 3, 2, 8), True, "full", 0, 0, {}),
        ("rotary_4d_interleaved_pos1", np.float32, (1, 4, 3, 8), True, "offset", 1, 0, {}),
        ("rotary_batch1_seq1", np.float32, (1, 1, 4, 4), False, "offset", 0, 0, {}),
        ("rotary_pos_scalar", np.float32, (2, 2, 2, 8), False, "scalar", 1, 0, {}),
        ("rotary_partial", np.float32, (2, 3, 2, 8), False, "full", 0, 4, {"num_heads": 2}),
        ("rotary_partial_interleaved", np.float32, (2, 2, 3, 8), False, "full", 1, 4,
         {"num_heads": 3}),
        ("rotary_partial_4d", np.float32, (1, 3, 2, 8), True, "offset", 0, 4, {"num_heads": 2}),
        ("rotary_num_heads", np.float32, (2, 3, 2, 8), False, "full", 0, 0, {"num_heads": 2}),
        ("rotary_scale", np.float32, (1, 3, 2, 8), False, "full", 0, 0, {"scale": 0.5}),
        ("rotary_packed_batching", np.float32, (1, 3, 2, 8), False, "full", 0, 0,
         {"is_packed_batching": 1}),
        ("rotary_f16", np.float16, (2, 3, 2, 8), False, "full", 0, 0, {}),
        ("rotary_f16_interleaved_4d", np.float16, (2, 3, 2, 8), True, "offset", 1, 0, {}),
        ("rotary_f16_partial", np.float16, (2, 3, 2, 8), False, "full", 1, 4, {"num_heads": 2}),
    ]
    for i, (name, dt, (b, s, n, h), four_d, pos, inter, rdim, extra) in enumerate(specs):
        r = rng(100 + i)
        x = rand(r, (b, n, s, h) if four_d else (b, s, n * h), dt)
        half = (rdim or h) // 2
        cos, sin = rope_cache(16, half, dt)
        if pos == "offset":
            pids = np.array([2], dtype=np.int64)
        elif pos == "scalar":
            pids = np.array(5, dtype=np.int64)
        else:
            pids = r.integers(0, 16, size=(b, s)).astype(np.int64)
        attrs = dict(interleaved=inter, **extra)
        if rdim:
            attrs["rotary_embedding_dim"] = rdim
        yield node_case(name, "RotaryEmbedding",
                        [("input", x), ("position_ids", pids), ("cos_cache", cos),
                         ("sin_cache", sin)],
                        ["output"], F16 if dt == np.float16 else F32, **attrs)


# ---------------------------------------------------------------------------------------------
# GroupQueryAttention: query (B, S, N*H) or packed (B, S, (N + 2*Nkv)*H), past (B, Nkv, P, H),
# seqlens_k (B) = total length - 1, total_sequence_length (scalar).


def gqa_case(name, seed, b, s, past, n, nkv, h, dtype=np.float32, packed=False,
             rotary=None, seqlens=None, present_len=None, bias=False, sink=False, pos=False,
             outputs=("output", "present_key", "present_value"), **attrs):
    """`past`: the past buffer length (0: no past inputs); `seqlens`: the per-batch total
    lengths (default past + s each); `rotary`: None, or (rotary_dim, interleaved)."""
    r = rng(seed)
    totals = seqlens if seqlens is not None else [past + s] * b
    total = max(totals) if present_len is None else present_len
    if packed:
        q = rand(r, (b, s, (n + 2 * nkv) * h), dtype)
        k = v = None
    else:
        q = rand(r, (b, s, n * h), dtype)
        k = rand(r, (b, s, nkv * h), dtype)
        v = rand(r, (b, s, nkv * h), dtype)
    pk = rand(r, (b, nkv, past, h), dtype) if past else None
    pv = rand(r, (b, nkv, past, h), dtype) if past else None
    seqlens_k = np.array([t - 1 for t in totals], dtype=np.int32)
    tsl = np.array(total, dtype=np.int32)
    cos = sin = None
    if rotary is not None:
        rdim, inter = rotary
        cos, sin = rope_cache(32, rdim // 2, dtype)
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = inter
    ab = rand(r, (1 if bias == "broadcast" else b, 1 if bias == "broadcast" else n, s, total),
              dtype) if bias else None
    pids = r.integers(0, 32, size=(b, s)).astype(np.int64) if pos else None
    hs = rand(r, (n,), dtype) if sink else None
    inputs = [("query", q), ("key", k), ("value", v), ("past_key", pk), ("past_value", pv),
              ("seqlens_k", seqlens_k), ("total_sequence_length", tsl), ("cos_cache", cos),
              ("sin_cache", sin), ("position_ids", pids), ("attention_bias", ab),
              ("head_sink", hs)]
    return node_case(name, "GroupQueryAttention", inputs, list(outputs),
                     F16 if dtype == np.float16 else F32, num_heads=n, kv_num_heads=nkv,
                     **attrs)


def gqa_cases():
    yield gqa_case("gqa_prompt", 1, 1, 4, 0, 4, 2, 8)
    yield gqa_case("gqa_prompt_batch2", 2, 2, 3, 0, 4, 1, 8)
    yield gqa_case("gqa_prompt_mha", 3, 2, 3, 0, 2, 2, 8)
    yield gqa_case("gqa_prompt_packed", 4, 2, 3, 0, 4, 2, 8, packed=True)
    yield gqa_case("gqa_decode", 5, 2, 1, 4, 4, 2, 8)
    yield gqa_case("gqa_decode_packed", 6, 1, 1, 3, 4, 2, 8, packed=True)
    yield gqa_case("gqa_chunk_past", 7, 1, 3, 2, 4, 2, 8)
    yield gqa_case("gqa_decode_ragged", 8, 2, 1, 4, 4, 2, 8, seqlens=[5, 5])
    yield gqa_case("gqa_prompt_padded", 9, 2, 4, 0, 2, 1, 8, seqlens=[4, 2])
    yield gqa_case("gqa_decode_shorter", 10, 2, 1, 4, 2, 1, 8, seqlens=[5, 3])
    yield gqa_case("gqa_scale", 11, 1, 3, 2, 2, 1, 8, scale=0.3)
    yield gqa_case("gqa_softcap", 12, 2, 3, 0, 2, 1, 8, softcap=2.0)
    yield gqa_case("gqa_local_window", 13, 1, 6, 0, 2, 1, 8, local_window_size=2)
    yield gqa_case("gqa_local_window_past", 14, 1, 2, 5, 2, 2, 8, local_window_size=3)
    yield gqa_case("gqa_smooth_softmax", 15, 2, 3, 0, 4, 2, 8, smooth_softmax=1)
    yield gqa_case("gqa_head_sink", 16, 1, 3, 1, 4, 2, 8, sink=True)
    yield gqa_case("gqa_attention_bias", 17, 1, 3, 2, 4, 2, 8, bias=True)
    yield gqa_case("gqa_rotary", 18, 2, 3, 0, 4, 2, 16, rotary=(16, 0))
    yield gqa_case("gqa_rotary_interleaved_past", 19, 1, 2, 3, 4, 2, 16, rotary=(16, 1))
    yield gqa_case("gqa_rotary_partial", 20, 1, 3, 2, 2, 1, 32, rotary=(16, 0))
    yield gqa_case("gqa_rotary_packed", 21, 2, 1, 3, 4, 2, 16, packed=True, rotary=(16, 0))
    yield gqa_case("gqa_rotary_packed_prompt", 22, 1, 3, 0, 2, 1, 16, packed=True, rotary=(16, 1))
    yield gqa_case("gqa_not_causal", 23, 1, 3, 2, 2, 1, 8, causal=0)
    yield gqa_case("gqa_qk_output_raw", 24, 1, 3, 1, 2, 1, 8, qk_output=1,
                   outputs=("output", "present_key", "present_value", "output_qk"))
    yield gqa_case("gqa_qk_output_softmax", 25, 1, 3, 1, 2, 1, 8, qk_output=2,
                   outputs=("output", "present_key", "present_value", "output_qk"))
    yield gqa_case("gqa_output_only", 26, 1, 2, 0, 2, 1, 8, outputs=("output",))
    yield gqa_case("gqa_f16", 27, 2, 3, 0, 4, 2, 8, dtype=np.float16)
    yield gqa_case("gqa_f16_decode_rotary", 28, 2, 1, 3, 4, 2, 16, dtype=np.float16,
                   rotary=(16, 0))
    yield gqa_case("gqa_f16_packed_softcap", 29, 1, 3, 2, 4, 1, 8, dtype=np.float16,
                   packed=True, softcap=1.5)
    yield gqa_case("gqa_position_ids", 90, 2, 1, 3, 4, 2, 16, rotary=(16, 0), pos=True)
    yield gqa_case("gqa_position_ids_prompt", 91, 1, 3, 0, 2, 1, 16, rotary=(16, 1), pos=True)
    yield gqa_case("gqa_position_ids_prompt_batch2", 96, 2, 3, 0, 2, 1, 16, rotary=(16, 0),
                   pos=True)
    yield gqa_case("gqa_attention_bias_broadcast", 92, 2, 1, 3, 4, 2, 8, bias="broadcast")
    yield gqa_case("gqa_rotary_decode_shorter", 93, 2, 1, 4, 2, 1, 16, rotary=(16, 0),
                   seqlens=[5, 3])
    yield gqa_case("gqa_f16_local_window_softcap", 94, 1, 5, 0, 2, 1, 8, dtype=np.float16,
                   local_window_size=2, softcap=3.0)
    yield gqa_case("gqa_local_window_smooth_softmax", 95, 1, 1, 5, 2, 1, 8,
                   local_window_size=3, smooth_softmax=1)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention: query (B, S, D) or packed QKV (B, S, N, 3, H); key/value (B, L, D),
# packed KV (B, L, N, 2, H) or BNSH (B, N, L, H); bias (2D + Dv); key_padding_mask (B),
# (B, T) or (B, S, T); attention_bias (B or 1, N or 1, S, T); past (B, N, P, H).


def mha_case(name, seed, b, s, l, n, h, dtype=np.float32, hv=None, form="separate", past=0,
             bias=False, mask=None, attn_bias=None, outputs=("output",), **attrs):
    r = rng(seed)
    hv = hv or h
    q = rand(r, (b, s, n * h), dtype)
    k = rand(r, (b, l, n * h), dtype)
    v = rand(r, (b, l, n * hv), dtype)
    if form == "packed_kv":
        k = np.stack([k.reshape(b, l, n, h), v.reshape(b, l, n, h)], axis=3)
        v = None
    elif form == "packed_qkv":
        q = rand(r, (b, s, n, 3, h), dtype)
        k = v = None
    elif form == "bnsh_kv":
        k = k.reshape(b, l, n, h).transpose(0, 2, 1, 3).copy()
        v = v.reshape(b, l, n, hv).transpose(0, 2, 1, 3).copy()
    t = past + l
    bi = rand(r, (2 * n * h + n * hv,), dtype) if bias else None
    m = None
    if mask == "1d":
        m = np.array([t - i for i in range(b)], dtype=np.int32)
    elif mask == "2d":
        m = (r.random((b, t)) > 0.3).astype(np.int32)
        m[:, 0] = 1
    elif mask == "3d":
        m = (r.random((b, s, t)) > 0.3).astype(np.int32)
        m[:, :, 0] = 1
    elif mask == "2d_kv":
        m = (r.random((b, l)) > 0.3).astype(np.int32)
        m[:, 0] = 1
    elif mask == "2d_all_masked":
        m = np.ones((b, t), dtype=np.int32)
        m[0] = 0
    ab = None
    if attn_bias is not None:
        ab = rand(r, (attn_bias[0] or b, attn_bias[1] or n, s, t), dtype)
    pk = rand(r, (b, n, past, h), dtype) if past else None
    pv = rand(r, (b, n, past, hv), dtype) if past else None
    inputs = [("query", q), ("key", k), ("value", v), ("bias", bi), ("key_padding_mask", m),
              ("attention_bias", ab), ("past_key", pk), ("past_value", pv)]
    return node_case(name, "MultiHeadAttention", inputs, list(outputs),
                     F16 if dtype == np.float16 else F32, num_heads=n, **attrs)


def mha_cases():
    pkv = ("output", "present_key", "present_value")
    yield mha_case("mha_self", 30, 2, 3, 3, 2, 4)
    yield mha_case("mha_cross", 31, 2, 2, 5, 2, 4)
    yield mha_case("mha_batch1_seq1", 32, 1, 1, 4, 3, 4)
    yield mha_case("mha_v_head_size", 33, 1, 3, 4, 2, 4, hv=6)
    yield mha_case("mha_bias", 34, 2, 3, 4, 2, 4, bias=True)
    yield mha_case("mha_bias_v_head_size", 35, 1, 2, 3, 2, 4, hv=2, bias=True)
    yield mha_case("mha_mask_1d", 36, 2, 3, 4, 2, 4, mask="1d")
    yield mha_case("mha_mask_2d", 37, 2, 3, 4, 2, 4, mask="2d")
    yield mha_case("mha_mask_3d", 38, 2, 3, 4, 2, 4, mask="3d")
    yield mha_case("mha_mask_2d_all_masked", 39, 2, 3, 4, 2, 4, mask="2d_all_masked")
    yield mha_case("mha_mask_filter_value", 40, 2, 3, 4, 2, 4, mask="2d",
                   mask_filter_value=-5.0)
    yield mha_case("mha_attention_bias", 41, 2, 3, 4, 2, 4, attn_bias=(0, 0))
    yield mha_case("mha_attention_bias_broadcast", 42, 2, 3, 4, 2, 4, attn_bias=(1, 1))
    yield mha_case("mha_attention_bias_b1", 43, 2, 3, 4, 2, 4, attn_bias=(1, 0))
    yield mha_case("mha_attention_bias_mask", 44, 2, 3, 4, 2, 4, attn_bias=(0, 1),
                   mask="2d")
    yield mha_case("mha_unidirectional", 45, 2, 4, 4, 2, 4, unidirectional=1)
    yield mha_case("mha_scale", 46, 1, 3, 4, 2, 4, scale=0.7)
    yield mha_case("mha_past", 47, 2, 1, 1, 2, 4, past=3, outputs=pkv)
    yield mha_case("mha_past_prompt", 48, 2, 3, 3, 2, 4, past=2, outputs=pkv,
                   unidirectional=1)
    yield mha_case("mha_past_bias_mask", 49, 2, 2, 2, 2, 4, past=2, bias=True, mask="2d",
                   outputs=pkv)
    yield mha_case("mha_present_no_past", 50, 2, 3, 3, 2, 4, outputs=pkv)
    yield mha_case("mha_past_attention_bias", 51, 1, 1, 1, 2, 4, past=4, attn_bias=(0, 0),
                   outputs=pkv)
    # Packed KV (B, L, N, 2, H) and packed QKV (B, S, N, 3, H): onnxruntime's CPU kernel
    # refuses both ("not implemented for CPU"), so they have no case.
    yield mha_case("mha_bnsh_kv", 54, 2, 2, 5, 2, 4, form="bnsh_kv")
    yield mha_case("mha_bnsh_kv_mask", 55, 2, 2, 5, 2, 4, form="bnsh_kv", mask="1d")
    yield mha_case("mha_past_mask_1d", 100, 2, 1, 1, 2, 4, past=3, mask="1d", outputs=pkv)
    yield mha_case("mha_past_mask_3d_unidirectional", 101, 1, 2, 2, 2, 4, past=2, mask="3d",
                   unidirectional=1, outputs=pkv)
    yield mha_case("mha_bnsh_kv_attention_bias", 102, 1, 2, 4, 2, 4, form="bnsh_kv",
                   attn_bias=(0, 1))
    yield mha_case("mha_qk_output", 56, 1, 2, 3, 2, 4,
                   outputs=("output", "", "", "qk"))
    yield mha_case("mha_f16", 57, 2, 3, 4, 2, 4, dtype=np.float16)
    yield mha_case("mha_f16_past_mask", 58, 2, 1, 1, 2, 4, dtype=np.float16, past=3,
                   mask="2d", bias=True, outputs=pkv)
    yield mha_case("mha_f16_unidirectional_bias", 59, 1, 3, 3, 2, 4, dtype=np.float16,
                   unidirectional=1, attn_bias=(0, 0))


# ---------------------------------------------------------------------------------------------
# Attention: input (B, S, Din), weights (Din, D + D + Dv), bias (D + D + Dv); mask_index (B),
# (2B), (B, T), (B, S, T); past (2, B, N, P, H); attention_bias (B or 1, N or 1, S, T).


def bert_case(name, seed, b, s, n, h, din=None, dtype=np.float32, sizes=None, past=0,
              bias=True, mask=None, attn_bias=None, present=False, **attrs):
    r = rng(seed)
    dq, dk, dv = sizes or (n * h, n * h, n * h)
    din = din or n * h
    x = rand(r, (b, s, din), dtype)
    w = rand(r, (din, dq + dk + dv), dtype, scale=0.3)
    bi = rand(r, (dq + dk + dv,), dtype) if bias else None
    t = past + s
    m = None
    if mask == "1d":
        m = np.array([t - i for i in range(b)], dtype=np.int32)
    elif mask == "1d_start":
        m = np.array([t - i for i in range(b)] + [i for i in range(b)], dtype=np.int32)
    elif mask == "2d":
        m = (r.random((b, t)) > 0.3).astype(np.int32)
        m[:, 0] = 1
    elif mask == "3d":
        m = (r.random((b, s, t)) > 0.3).astype(np.int32)
        m[:, :, 0] = 1
    elif mask == "4d":
        m = np.tril(np.ones((t, t), dtype=np.int32))[None, None].repeat(b, 0)
    pst = rand(r, (2, b, n, past, dk // n), dtype) if past else None
    ab = None
    if attn_bias is not None:
        ab = rand(r, (attn_bias[0] or b, attn_bias[1] or n, s, t), dtype)
    if sizes is not None:
        attrs["qkv_hidden_sizes"] = list(sizes)
    inputs = [("input", x), ("weights", w), ("bias", bi), ("mask_index", m), ("past", pst),
              ("attention_bias", ab)]
    outputs = ["output", "present"] if (past or present) else ["output"]
    return node_case(name, "Attention", inputs, outputs,
                     F16 if dtype == np.float16 else F32, num_heads=n, **attrs)


def bert_cases():
    yield bert_case("attention_basic", 60, 2, 3, 2, 4)
    yield bert_case("attention_batch1_seq1", 61, 1, 1, 2, 4)
    yield bert_case("attention_input_hidden", 62, 2, 3, 2, 4, din=5)
    # No bias: onnxruntime 1.31.1's CPU kernel crashes (segmentation fault), so no case.
    yield bert_case("attention_mask_1d", 64, 2, 3, 2, 4, mask="1d")
    yield bert_case("attention_mask_1d_start", 65, 2, 3, 2, 4, mask="1d_start")
    yield bert_case("attention_mask_2d", 66, 2, 3, 2, 4, mask="2d")
    yield bert_case("attention_mask_3d", 67, 2, 3, 2, 4, mask="3d")
    # A 4-D mask (B, 1, M, M): onnxruntime's CPU kernel refuses it ("not supported").
    yield bert_case("attention_mask_filter_value", 69, 2, 3, 2, 4, mask="2d",
                    mask_filter_value=-3.0)
    yield bert_case("attention_unidirectional", 70, 2, 4, 2, 4, unidirectional=1)
    yield bert_case("attention_unidirectional_mask", 71, 2, 4, 2, 4, unidirectional=1,
                    mask="1d")
    yield bert_case("attention_scale", 72, 1, 3, 2, 4, scale=0.25)
    yield bert_case("attention_qkv_hidden_sizes", 73, 2, 3, 2, 4, sizes=(8, 8, 12))
    yield bert_case("attention_qkv_hidden_sizes_qk", 74, 1, 3, 2, 4, din=6, sizes=(6, 6, 4))
    yield bert_case("attention_past", 75, 2, 1, 2, 4, past=3, unidirectional=1)
    yield bert_case("attention_past_prompt", 76, 2, 3, 2, 4, past=2, unidirectional=1,
                    mask="2d")
    yield bert_case("attention_past_no_unidirectional", 77, 1, 2, 2, 4, past=2)
    yield bert_case("attention_present_no_past", 78, 2, 3, 2, 4, present=True,
                    unidirectional=1)
    yield bert_case("attention_attention_bias", 79, 2, 3, 2, 4, attn_bias=(0, 0))
    yield bert_case("attention_attention_bias_broadcast", 80, 2, 3, 2, 4, attn_bias=(1, 1),
                    mask="1d")
    # past with attention_bias: onnxruntime refuses the pair.
    yield bert_case("attention_past_mask_1d", 103, 2, 1, 2, 4, past=3, mask="1d",
                    unidirectional=1)
    yield bert_case("attention_mask_3d_unidirectional", 104, 2, 3, 2, 4, mask="3d",
                    unidirectional=1)
    yield bert_case("attention_f16", 82, 2, 3, 2, 4, dtype=np.float16)
    yield bert_case("attention_f16_past_mask", 83, 2, 1, 2, 4, dtype=np.float16, past=2,
                    mask="2d", unidirectional=1)


def cases():
    yield from rotary_cases()
    yield from gqa_cases()
    yield from mha_cases()
    yield from bert_cases()
