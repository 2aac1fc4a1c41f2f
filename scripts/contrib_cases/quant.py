"""Contrib conformance cases: the quant family.

MatMulNBits (weights packed here with numpy in onnxruntime's documented layout), and the other
com.microsoft quantization operators.
"""
import ml_dtypes
import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from . import Case, rng

MS = "com.microsoft"
F32, F16 = TP.FLOAT, TP.FLOAT16


def ms_node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain=MS, **attrs)


def randn(g, shape, dtype=np.float32):
    return g.standard_normal(shape).astype(dtype)


def trim(names):
    """Drops trailing absent ("") inputs."""
    names = list(names)
    while names and names[-1] == "":
        names.pop()
    return names


# --- MatMulNBits ------------------------------------------------------------------------------

def pack_bits(q, bits):
    """Packs the last axis of `q` (integers < 2^bits) into uint8, low bits first. The last axis
    must be a multiple of 8 / bits."""
    per = 8 // bits
    q = q.astype(np.uint8).reshape(*q.shape[:-1], q.shape[-1] // per, per)
    out = np.zeros(q.shape[:-1], np.uint8)
    for j in range(per):
        out |= (q[..., j] << (j * bits)).astype(np.uint8)
    return out


def pad_last(q, size):
    pad = size - q.shape[-1]
    return np.pad(q, [(0, 0)] * (q.ndim - 1) + [(0, pad)]) if pad else q


def nbits_weights(g, n, k, bits, block):
    """Quantized weights [N, K], B packed as [N, k_blocks, blob_size] (the last block padded
    with zeros), scales [N, k_blocks] and zero points [N, k_blocks] as integers."""
    k_blocks = -(-k // block)
    q = g.integers(0, 1 << bits, size=(n, k))
    b = pack_bits(pad_last(q, k_blocks * block).reshape(n, k_blocks, block), bits)
    scales = g.uniform(0.01, 0.1, size=(n, k_blocks))
    zps = g.integers(0, 1 << bits, size=(n, k_blocks))
    return b, scales, zps


def pack_zero_points(zps, bits):
    per = 8 // bits
    k_blocks = zps.shape[-1]
    return pack_bits(pad_last(zps, -(-k_blocks // per) * per), bits)


def nbits_case(name, seed, a_shape, n, *, bits=4, block=32, zp="none", bias=False, g_idx=None,
               dtype=np.float32, weights_as_inputs=False, **attrs):
    """zp: "none", "packed" (uint8) or "float" (A's type). g_idx: None, "trivial" (k // block)
    or "shuffled" (act-order: each k's block is drawn at random)."""
    g = rng(seed)
    k = a_shape[-1]
    k_blocks = -(-k // block)
    b, scales, zps = nbits_weights(g, n, k, bits, block)
    a = randn(g, a_shape, dtype)
    consts = {"B": b, "scales": scales.astype(dtype)}
    names = ["A", "B", "scales"]
    if zp == "packed":
        consts["zero_points"] = pack_zero_points(zps, bits)
        names.append("zero_points")
    elif zp == "float":
        consts["zero_points"] = (zps + g.uniform(-0.5, 0.5, zps.shape)).astype(dtype)
        names.append("zero_points")
    else:
        names.append("")
    if g_idx is not None:
        idx = np.arange(k) // block
        if g_idx == "shuffled":
            idx = g.integers(0, k_blocks, size=k)
        consts["g_idx"] = idx.astype(np.int32)
        names.append("g_idx")
    else:
        names.append("")
    if bias:
        consts["bias"] = randn(g, (n,), dtype)
        names.append("bias")
    node = ms_node("MatMulNBits", trim(names), ["Y"], K=k, N=n, bits=bits, block_size=block,
                   **attrs)
    inputs = {"A": a}
    inits = {}
    if weights_as_inputs:
        inputs.update(consts)
    else:
        inits = consts
    return Case(name, [node], inputs, [("Y", F16 if dtype == np.float16 else F32)], inits)


def matmul_nbits_cases():
    # 4 bits: every block size, K a multiple of it or not, with and without zero points.
    yield nbits_case("matmulnbits_b4_bs16", 1, (3, 48), 8, block=16)
    yield nbits_case("matmulnbits_b4_bs16_zp", 2, (3, 48), 8, block=16, zp="packed")
    yield nbits_case("matmulnbits_b4_bs32_k40_zp", 3, (3, 40), 6, block=32, zp="packed")
    yield nbits_case("matmulnbits_b4_bs32_k96_zp_odd_blocks", 4, (2, 96), 5, block=32,
                     zp="packed")
    yield nbits_case("matmulnbits_b4_bs64_k80", 5, (2, 80), 8, block=64)
    yield nbits_case("matmulnbits_b4_bs64_k80_zp", 6, (2, 80), 8, block=64, zp="packed")
    yield nbits_case("matmulnbits_b4_bs128_k150_zp", 7, (2, 150), 4, block=128, zp="packed")
    yield nbits_case("matmulnbits_b4_bs256_k300_zp", 8, (2, 300), 3, block=256, zp="packed")
    yield nbits_case("matmulnbits_b4_bs256_k64", 9, (2, 64), 3, block=256)
    yield nbits_case("matmulnbits_b4_m1_n1_k16", 10, (1, 16), 1, block=16, zp="packed")
    yield nbits_case("matmulnbits_b4_m8", 11, (8, 64), 12, block=32, zp="packed")
    yield nbits_case("matmulnbits_b4_bias", 12, (3, 64), 8, block=32, zp="packed", bias=True)
    yield nbits_case("matmulnbits_b4_rank3", 13, (2, 3, 64), 8, block=32, zp="packed")
    yield nbits_case("matmulnbits_b4_rank3_bias_nozp", 14, (2, 2, 40), 5, block=16, bias=True)
    yield nbits_case("matmulnbits_b4_rank1", 15, (48,), 4, block=16, zp="packed")
    yield nbits_case("matmulnbits_b4_float_zp", 16, (3, 64), 8, block=32, zp="float")
    yield nbits_case("matmulnbits_b4_weights_as_inputs", 17, (3, 40), 6, block=16,
                     zp="packed", bias=True, weights_as_inputs=True)
    # 8 bits.
    yield nbits_case("matmulnbits_b8_bs16", 20, (3, 48), 8, bits=8, block=16)
    yield nbits_case("matmulnbits_b8_bs32_k40_zp", 21, (3, 40), 6, bits=8, block=32, zp="packed")
    yield nbits_case("matmulnbits_b8_bs64_zp", 22, (2, 128), 4, bits=8, block=64, zp="packed")
    yield nbits_case("matmulnbits_b8_bs128_k100", 23, (2, 100), 4, bits=8, block=128)
    yield nbits_case("matmulnbits_b8_bs256_k260_zp", 24, (2, 260), 2, bits=8, block=256,
                     zp="packed")
    yield nbits_case("matmulnbits_b8_rank3_bias", 25, (2, 2, 64), 6, bits=8, block=32,
                     zp="packed", bias=True)
    yield nbits_case("matmulnbits_b8_float_zp", 26, (2, 64), 4, bits=8, block=32, zp="float")
    # 2 bits.
    yield nbits_case("matmulnbits_b2_bs16", 30, (3, 48), 8, bits=2, block=16)
    yield nbits_case("matmulnbits_b2_bs32_k72_zp", 31, (3, 72), 6, bits=2, block=32,
                     zp="packed")
    yield nbits_case("matmulnbits_b2_bs64_zp_bias", 32, (2, 128), 4, bits=2, block=64,
                     zp="packed", bias=True)
    # float16 A.
    yield nbits_case("matmulnbits_b4_f16", 40, (3, 64), 8, block=32, dtype=np.float16)
    yield nbits_case("matmulnbits_b4_f16_zp_bias", 41, (2, 3, 40), 6, block=16, zp="packed",
                     bias=True, dtype=np.float16)
    yield nbits_case("matmulnbits_b4_f16_float_zp", 42, (3, 64), 8, block=32, zp="float",
                     dtype=np.float16)
    yield nbits_case("matmulnbits_b8_f16_zp", 43, (3, 96), 8, bits=8, block=64, zp="packed",
                     dtype=np.float16)
    yield nbits_case("matmulnbits_b2_f16", 44, (3, 64), 8, bits=2, block=32, dtype=np.float16)
    # g_idx (act-order; deprecated in the schema).
    yield nbits_case("matmulnbits_b4_gidx_trivial", 50, (3, 64), 8, block=32, zp="packed",
                     g_idx="trivial")
    yield nbits_case("matmulnbits_b4_gidx_shuffled", 51, (3, 64), 8, block=32, zp="packed",
                     g_idx="shuffled")
    yield nbits_case("matmulnbits_b4_gidx_shuffled_nozp", 52, (3, 64), 8, block=16,
                     g_idx="shuffled")
    yield nbits_case("matmulnbits_b4_gidx_float_zp", 53, (3, 64), 8, block=32, zp="float",
                     g_idx="shuffled")
    # accuracy_level: 1 computes in f32 like 0; 4 lets onnxruntime quantize A to int8.
    yield nbits_case("matmulnbits_b4_acc1", 60, (3, 64), 8, block=32, zp="packed",
                     accuracy_level=1)
    yield nbits_case("matmulnbits_b4_acc4", 61, (3, 64), 8, block=32, zp="packed",
                     accuracy_level=4)


# --- GatherBlockQuantized ---------------------------------------------------------------------

def gbq_case(name, seed, shape, indices, *, data="u8", bits=4, block=16, quantize_axis=1,
             gather_axis=0, zp=False, scale_dtype=np.float32, scale_shape=None, **attrs):
    """`shape` is data's logical shape; data "u8" (packed along the last axis), "int4", "uint4"
    or "fp8" (float8e4m3fn). `indices` are fed as a graph input (int64 or int32)."""
    g = rng(seed)
    qa = quantize_axis % len(shape)
    blocks = -(-shape[qa] // block) if block else 1
    sshape = list(shape)
    sshape[qa] = blocks
    if scale_shape is not None:
        sshape = list(scale_shape)
    scales = g.uniform(0.01, 0.1, size=sshape).astype(scale_dtype)
    consts = {}
    if data == "u8":
        q = g.integers(0, 1 << bits, size=shape)
        consts["data"] = pack_bits(q, bits) if bits < 8 else q.astype(np.uint8)
        zps = g.integers(0, 1 << bits, size=sshape)
        zps_t = pack_zero_points(zps, bits) if bits < 8 else zps.astype(np.uint8)
    elif data in ("int4", "uint4"):
        lo, hi, dt = (-8, 8, ml_dtypes.int4) if data == "int4" else (0, 16, ml_dtypes.uint4)
        consts["data"] = g.integers(lo, hi, size=shape).astype(dt)
        zps_t = g.integers(lo, hi, size=sshape).astype(dt)
    else:
        consts["data"] = g.uniform(-4, 4, size=shape).astype(ml_dtypes.float8_e4m3fn)
    consts["scales"] = scales
    names = ["data", "indices", "scales"]
    if zp:
        consts["zero_points"] = zps_t
        names.append("zero_points")
    if data == "u8":
        attrs["bits"] = bits
    node = ms_node("GatherBlockQuantized", names, ["Y"], block_size=block,
                   quantize_axis=quantize_axis, gather_axis=gather_axis, **attrs)
    out = F16 if scale_dtype == np.float16 else F32
    return Case(name, [node], {"indices": np.asarray(indices)}, [("Y", out)], consts,
                opset=21, ir_version=10)


def gather_block_quantized_cases():
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    yield gbq_case("gatherblockquantized_u8_b4", 1, (6, 32), i64(2, 5, 0))
    yield gbq_case("gatherblockquantized_u8_b4_zp", 2, (6, 32), i64(1, 3), zp=True)
    yield gbq_case("gatherblockquantized_u8_b4_k40_zp", 3, (5, 40), i64(4, 0, 4), zp=True)
    yield gbq_case("gatherblockquantized_u8_b4_bs32_3d", 4, (3, 2, 64), i64(2, 0), block=32,
                   quantize_axis=2, zp=True)
    yield gbq_case("gatherblockquantized_u8_b4_indices_2d", 5, (6, 32),
                   np.array([[0, 1], [5, 2]], np.int64), zp=True)
    yield gbq_case("gatherblockquantized_u8_b4_indices_i32_negative", 6, (6, 32),
                   np.array([-1, 2, -6], np.int32), zp=True)
    yield gbq_case("gatherblockquantized_u8_b4_out_of_range", 7, (6, 32), i64(1, 6, -7))
    yield gbq_case("gatherblockquantized_u8_b8", 8, (6, 32), i64(2, 5), bits=8)
    yield gbq_case("gatherblockquantized_u8_b8_zp", 9, (6, 48), i64(2, 5, 1), bits=8, zp=True)
    yield gbq_case("gatherblockquantized_u8_b2", 10, (6, 32), i64(3, 1), bits=2)
    yield gbq_case("gatherblockquantized_u8_b2_zp_k80", 11, (4, 80), i64(3, 1), bits=2,
                   zp=True)
    yield gbq_case("gatherblockquantized_u8_b4_f16", 12, (6, 32), i64(2, 5, 0), zp=True,
                   scale_dtype=np.float16)
    yield gbq_case("gatherblockquantized_u8_b8_bs64_f16", 13, (4, 128), i64(0, 3), bits=8,
                   block=64, zp=True, scale_dtype=np.float16)
    yield gbq_case("gatherblockquantized_int4", 20, (6, 32), i64(2, 5, 0), data="int4")
    yield gbq_case("gatherblockquantized_int4_zp", 21, (6, 32), i64(2, 5, 0), data="int4",
                   zp=True)
    yield gbq_case("gatherblockquantized_uint4_zp", 22, (6, 40), i64(1, 4), data="uint4",
                   zp=True)
    yield gbq_case("gatherblockquantized_uint4_nozp", 23, (6, 32), i64(1, 4), data="uint4")
    yield gbq_case("gatherblockquantized_int4_qaxis0_gaxis1", 24, (32, 6), i64(5, 0),
                   data="int4", quantize_axis=0, gather_axis=1, zp=True)
    yield gbq_case("gatherblockquantized_int4_3d_gaxis1", 25, (2, 5, 32), i64(4, 1, 1),
                   data="int4", quantize_axis=2, gather_axis=1, zp=True)
    yield gbq_case("gatherblockquantized_uint4_3d_qaxis_neg", 26, (3, 32, 4), i64(0, 2),
                   data="uint4", quantize_axis=-2, gather_axis=0, block=16, zp=True)
    yield gbq_case("gatherblockquantized_int4_same_axis", 27, (32, 4), i64(0, 17, 31),
                   data="int4", quantize_axis=0, gather_axis=0, zp=True)
    yield gbq_case("gatherblockquantized_int4_same_axis_indices_i32_negative", 29, (40, 3),
                   np.array([-1, 20, -40], np.int32), data="int4", quantize_axis=0,
                   gather_axis=0)
    yield gbq_case("gatherblockquantized_uint4_f16", 28, (6, 32), i64(1, 4), data="uint4",
                   zp=True, scale_dtype=np.float16)
    yield gbq_case("gatherblockquantized_fp8", 30, (6, 32), i64(2, 5), data="fp8")
    yield gbq_case("gatherblockquantized_fp8_block0", 31, (6, 40), i64(2, 5), data="fp8",
                   block=0)
    yield gbq_case("gatherblockquantized_fp8_broadcast_scale", 32, (6, 32), i64(3, 0),
                   data="fp8", scale_shape=(1, 2))


# --- MatMulIntegerToFloat / DynamicQuantizeMatMul / QGemm -----------------------------------

def qrand(g, shape, dtype):
    info = np.iinfo(dtype)
    return g.integers(info.min, info.max + 1, size=shape).astype(dtype)


def weights_s8(g, shape, a_type):
    """int8 weights for a product with uint8 A: 7 bits (as onnxruntime's quantizer's
    reduce_range), since onnxruntime's x86 u8s8 kernels add pairs of products in saturating
    int16 (vpmaddubsw) and full-range weights overflow there."""
    if a_type == np.uint8:
        return g.integers(-64, 64, size=shape).astype(np.int8)
    return qrand(g, shape, np.int8)


def b_values(g, shape, a_type, b_type):
    return weights_s8(g, shape, a_type) if b_type == np.int8 else qrand(g, shape, b_type)


def scale(g, shape=()):
    return np.asarray(g.uniform(0.005, 0.05, size=shape), np.float32)


def mitf_case(name, seed, a_shape, b_shape, *, a_type=np.uint8, b_type=np.uint8, a_zp=True,
              b_zp="scalar", b_scale="scalar", bias=False, b_const=True):
    g = rng(seed)
    n = b_shape[-1]
    inputs = {"A": qrand(g, a_shape, a_type)}
    consts = {"B": b_values(g, b_shape, a_type, b_type), "a_scale": scale(g),
              "b_scale": scale(g, (n,) if b_scale == "column" else ())}
    names = ["A", "B", "a_scale", "b_scale"]
    if a_zp:
        consts["a_zero_point"] = qrand(g, (), a_type)
        names.append("a_zero_point")
    else:
        names.append("")
    if b_zp:
        consts["b_zero_point"] = qrand(g, (n,) if b_zp == "column" else (), b_type)
        names.append("b_zero_point")
    else:
        names.append("")
    if bias:
        consts["bias"] = randn(g, (n,))
        names.append("bias")
    if not b_const:
        inputs["B"] = consts.pop("B")
    node = ms_node("MatMulIntegerToFloat", trim(names), ["Y"])
    return Case(name, [node], inputs, [("Y", F32)], consts)


def dqmm_case(name, seed, a_shape, b_shape, *, b_type=np.uint8, b_zp=True, b_scale="scalar",
              bias=False):
    g = rng(seed)
    n = b_shape[-1]
    consts = {"B": b_values(g, b_shape, np.uint8, b_type),
              "b_scale": scale(g, (n,) if b_scale == "column" else ())}
    names = ["A", "B", "b_scale"]
    if b_zp:
        consts["b_zero_point"] = qrand(g, (n,) if b_scale == "column" else (), b_type)
        names.append("b_zero_point")
    else:
        names.append("")
    if bias:
        consts["bias"] = randn(g, (n,))
        names.append("bias")
    node = ms_node("DynamicQuantizeMatMul", trim(names), ["Y"])
    return Case(name, [node], {"A": randn(g, a_shape)}, [("Y", F32)], consts)


def int_matmul_cases():
    yield mitf_case("matmulintegertofloat_u8u8", 1, (3, 8), (8, 5))
    yield mitf_case("matmulintegertofloat_u8s8_bias", 2, (3, 8), (8, 5), b_type=np.int8,
                    bias=True)
    yield mitf_case("matmulintegertofloat_no_zp", 3, (3, 8), (8, 5), a_zp=False, b_zp=None)
    yield mitf_case("matmulintegertofloat_per_column", 4, (2, 3, 16), (16, 6), b_type=np.int8,
                    b_zp="column", b_scale="column", bias=True)
    yield mitf_case("matmulintegertofloat_batched_b", 5, (2, 3, 8), (2, 8, 4))
    yield mitf_case("matmulintegertofloat_b_input", 6, (4, 8), (8, 3), b_const=False,
                    bias=True)
    yield mitf_case("matmulintegertofloat_s8s8", 7, (3, 8), (8, 5), a_type=np.int8,
                    b_type=np.int8)
    yield dqmm_case("dynamicquantizematmul_u8", 10, (3, 8), (8, 5))
    yield dqmm_case("dynamicquantizematmul_s8_bias", 11, (2, 3, 16), (16, 6), b_type=np.int8,
                    bias=True)
    yield dqmm_case("dynamicquantizematmul_no_zp", 12, (4, 8), (8, 5), b_zp=False)
    yield dqmm_case("dynamicquantizematmul_per_column", 13, (3, 16), (16, 6), b_type=np.int8,
                    b_scale="column", bias=True)


def qgemm_case(name, seed, m, k, n, *, a_type=np.uint8, b_type=np.uint8, trans_a=0, trans_b=0,
               alpha=1.0, c=None, out=True, b_column=False):
    g = rng(seed)
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    col = (n,) if b_column else ()
    inputs = {"A": qrand(g, a_shape, a_type)}
    consts = {"a_scale": scale(g), "a_zero_point": qrand(g, (), a_type),
              "B": b_values(g, b_shape, a_type, b_type), "b_scale": scale(g, col),
              "b_zero_point": qrand(g, col, b_type)}
    names = ["A", "a_scale", "a_zero_point", "B", "b_scale", "b_zero_point"]
    if c is not None:
        consts["C"] = g.integers(-2000, 2000, size=c).astype(np.int32)
        names.append("C")
    else:
        names.append("")
    out_type = {np.uint8: TP.UINT8, np.int8: TP.INT8}[a_type] if out else F32
    if out:
        consts["y_scale"] = np.float32(0.5)
        consts["y_zero_point"] = qrand(g, (), a_type) // 4
        names += ["y_scale", "y_zero_point"]
    node = ms_node("QGemm", trim(names), ["Y"], transA=trans_a, transB=trans_b, alpha=alpha)
    return Case(name, [node], inputs, [("Y", out_type)], consts)


def qgemm_cases():
    yield qgemm_case("qgemm_u8u8", 1, 3, 8, 5)
    yield qgemm_case("qgemm_u8s8_float_out", 2, 3, 8, 5, b_type=np.int8, out=False)
    yield qgemm_case("qgemm_u8_trans_a", 3, 3, 8, 5, trans_a=1)
    yield qgemm_case("qgemm_u8_trans_b_alpha", 4, 3, 8, 5, trans_b=1, alpha=0.5)
    yield qgemm_case("qgemm_u8_c_row", 5, 3, 8, 5, c=(5,))
    yield qgemm_case("qgemm_u8_c_full_float_out", 6, 3, 8, 5, c=(3, 5), out=False)
    yield qgemm_case("qgemm_u8s8_per_column", 7, 4, 16, 6, b_type=np.int8, b_column=True)
    yield qgemm_case("qgemm_s8s8", 8, 3, 8, 5, a_type=np.int8, b_type=np.int8)
    yield qgemm_case("qgemm_s8s8_trans_both_c", 9, 3, 8, 5, a_type=np.int8, b_type=np.int8,
                     trans_a=1, trans_b=1, c=(1, 5))
    yield qgemm_case("qgemm_s8_float_out_per_column", 10, 3, 8, 5, a_type=np.int8,
                     b_type=np.int8, out=False, b_column=True)


# --- QuantizeLinear / DequantizeLinear (com.microsoft) -----------------------------------------

def qdq_cases():
    g = rng(1)
    x = randn(g, (2, 3, 4))
    for qt in (np.uint8, np.int8, np.uint16, np.int16):
        tn = np.dtype(qt).name
        zp = qrand(g, (), qt) // 8
        yield Case(f"quantizelinear_{tn}", [ms_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
                   {"x": x}, [("y", helper.np_dtype_to_tensor_dtype(np.dtype(qt)))],
                   {"s": np.float32(0.02), "z": zp})
        zpa = (qrand(g, (3,), qt) // 8).astype(qt)
        yield Case(f"quantizelinear_{tn}_axis1",
                   [ms_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
                   {"x": x}, [("y", helper.np_dtype_to_tensor_dtype(np.dtype(qt)))],
                   {"s": scale(g, (3,)), "z": zpa})
        q = qrand(g, (2, 3, 4), qt)
        yield Case(f"dequantizelinear_{tn}", [ms_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
                   {"x": q}, [("y", F32)], {"s": np.float32(0.02), "z": zp})
        yield Case(f"dequantizelinear_{tn}_axis_neg1",
                   [ms_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-1)],
                   {"x": q}, [("y", F32)], {"s": scale(g, (4,)), "z": qrand(g, (4,), qt) // 8})
    yield Case("quantizelinear_no_zp", [ms_node("QuantizeLinear", ["x", "s"], ["y"])],
               {"x": x}, [("y", TP.UINT8)], {"s": np.float32(0.01)})
    yield Case("quantizelinear_f16", [ms_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
               {"x": x.astype(np.float16)}, [("y", TP.INT8)],
               {"s": np.float16(0.02), "z": np.int8(3)})
    yield Case("quantizelinear_ties", [ms_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
               {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300, -300], np.float32)},
               [("y", TP.INT8)], {"s": np.float32(1.0), "z": np.int8(0)})
    yield Case("dequantizelinear_no_zp", [ms_node("DequantizeLinear", ["x", "s"], ["y"])],
               {"x": qrand(g, (3, 4), np.int8)}, [("y", F32)], {"s": np.float32(0.1)})
    yield Case("dequantizelinear_f16", [ms_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
               {"x": qrand(g, (3, 4), np.uint8)}, [("y", F16)],
               {"s": np.float16(0.05), "z": np.uint8(128)})
    for dt, name in ((ml_dtypes.int4, "int4"), (ml_dtypes.uint4, "uint4")):
        lo = -8 if name == "int4" else 0
        yield Case(f"dequantizelinear_{name}_axis0",
                   [ms_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)], {},
                   [("y", F32)], {"q": g.integers(lo, lo + 16, (3, 4)).astype(dt),
                                  "s": scale(g, (3,)),
                                  "z": g.integers(lo, lo + 16, (3,)).astype(dt)})
        # QuantizeLinear to int4/uint4 has no reference: onnxruntime's Python API cannot
        # return 4-bit tensors.
    yield Case("dequantizelinear_int32", [ms_node("DequantizeLinear", ["x", "s"], ["y"])],
               {"x": g.integers(-10000, 10000, (3, 4)).astype(np.int32)}, [("y", F32)],
               {"s": np.float32(0.001)})


# --- QLinear elementwise / concat / pooling ----------------------------------------------------

def qlinear_binary_case(name, op, seed, a_shape, b_shape, qt, zps=True):
    g = rng(seed)
    consts = {"a_s": scale(g) * 4, "b_s": scale(g) * 4, "c_s": scale(g) * 8}
    names = ["A", "a_s", "a_z", "B", "b_s", "b_z", "c_s", "c_z"]
    if zps:
        consts.update({"a_z": qrand(g, (), qt) // 4, "b_z": qrand(g, (), qt) // 4,
                       "c_z": qrand(g, (), qt) // 4})
    else:  # the inputs' zero points absent (onnxruntime's type inference needs C's)
        consts["c_z"] = qrand(g, (), qt) // 4
        names = [n if n not in ("a_z", "b_z") else "" for n in names]
    qtype = helper.np_dtype_to_tensor_dtype(np.dtype(qt))
    return Case(name, [ms_node(op, trim(names), ["C"])],
                {"A": qrand(g, a_shape, qt), "B": qrand(g, b_shape, qt)}, [("C", qtype)], consts)


def qlinear_unary_case(name, op, seed, shape, qt, zps=True, **attrs):
    g = rng(seed)
    consts = {"x_s": scale(g) * 4, "y_s": np.float32(1 / 256 if op == "QLinearSigmoid" else 0.05)}
    names = ["X", "x_s", "x_z", "y_s", "y_z"]
    if zps:
        consts.update({"x_z": qrand(g, (), qt) // 2,
                       "y_z": np.array(0 if op == "QLinearSigmoid" else 10, qt)})
    else:  # X's zero point absent (onnxruntime crashes when Y's is left off)
        consts["y_z"] = np.array(0, qt)
        names = ["X", "x_s", "", "y_s", "y_z"]
    qtype = helper.np_dtype_to_tensor_dtype(np.dtype(qt))
    return Case(name, [ms_node(op, names, ["Y"], **attrs)], {"X": qrand(g, shape, qt)},
                [("Y", qtype)], consts)


def qlinear_concat_case(name, seed, shapes, axis, qt, same=False):
    g = rng(seed)
    consts = {"y_s": np.float32(0.05), "y_z": np.array(5, qt)}
    inputs = {}
    names = ["y_s", "y_z"]
    for i, shp in enumerate(shapes):
        inputs[f"x{i}"] = qrand(g, shp, qt)
        if same and i == 0:
            consts[f"s{i}"], consts[f"z{i}"] = np.float32(0.05), np.array(5, qt)
        else:
            consts[f"s{i}"], consts[f"z{i}"] = scale(g) * 4, qrand(g, (), qt) // 4
        names += [f"x{i}", f"s{i}", f"z{i}"]
    qtype = helper.np_dtype_to_tensor_dtype(np.dtype(qt))
    return Case(name, [ms_node("QLinearConcat", names, ["Y"], axis=axis)], inputs,
                [("Y", qtype)], consts)


def qlinear_pool_case(name, op, seed, shape, qt, **attrs):
    g = rng(seed)
    consts = {"x_s": np.float32(0.1), "x_z": qrand(g, (), qt) // 4, "y_s": np.float32(0.07),
              "y_z": qrand(g, (), qt) // 4}
    qtype = helper.np_dtype_to_tensor_dtype(np.dtype(qt))
    return Case(name, [ms_node(op, ["X", "x_s", "x_z", "y_s", "y_z"], ["Y"], **attrs)],
                {"X": qrand(g, shape, qt)}, [("Y", qtype)], consts)


def qlinear_cases():
    for qt, tn in ((np.uint8, "u8"), (np.int8, "s8")):
        yield qlinear_binary_case(f"qlinearadd_{tn}", "QLinearAdd", 1, (2, 3, 4), (2, 3, 4), qt)
        yield qlinear_binary_case(f"qlinearadd_{tn}_broadcast", "QLinearAdd", 2, (2, 3, 4),
                                  (3, 1), qt)
        yield qlinear_binary_case(f"qlinearadd_{tn}_scalar_b", "QLinearAdd", 3, (4, 5), (), qt)
        yield qlinear_binary_case(f"qlinearmul_{tn}_no_input_zp", "QLinearMul", 19, (4, 5),
                                  (4, 5), qt, zps=False)
        yield qlinear_binary_case(f"qlinearmul_{tn}", "QLinearMul", 4, (2, 3, 4), (2, 3, 4), qt)
        yield qlinear_binary_case(f"qlinearmul_{tn}_broadcast", "QLinearMul", 5, (1, 4),
                                  (3, 1), qt)
        yield qlinear_unary_case(f"qlinearsigmoid_{tn}", "QLinearSigmoid", 6, (4, 16), qt)
        yield qlinear_unary_case(f"qlinearsigmoid_{tn}_no_zp", "QLinearSigmoid", 7, (3, 5), qt,
                                 zps=False)
        yield qlinear_unary_case(f"qlinearleakyrelu_{tn}", "QLinearLeakyRelu", 8, (4, 16), qt,
                                 alpha=0.1)
        yield qlinear_unary_case(f"qlinearleakyrelu_{tn}_default_alpha", "QLinearLeakyRelu", 9,
                                 (3, 5), qt)
        yield qlinear_concat_case(f"qlinearconcat_{tn}_axis1", 10, [(2, 3, 4), (2, 2, 4)], 1, qt)
        yield qlinear_concat_case(f"qlinearconcat_{tn}_three_neg_axis", 11,
                                  [(2, 3), (2, 1), (2, 4)], -1, qt, same=True)
        yield qlinear_pool_case(f"qlinearglobalaveragepool_{tn}", "QLinearGlobalAveragePool",
                                12, (2, 3, 4, 5), qt)
        yield qlinear_pool_case(f"qlinearglobalaveragepool_{tn}_channels_last",
                                "QLinearGlobalAveragePool", 13, (2, 4, 5, 3), qt,
                                channels_last=1)
        yield qlinear_pool_case(f"qlinearaveragepool_{tn}", "QLinearAveragePool", 14,
                                (1, 2, 5, 5), qt, kernel_shape=[2, 2])
        yield qlinear_pool_case(f"qlinearaveragepool_{tn}_pads_strides", "QLinearAveragePool",
                                15, (1, 2, 6, 6), qt, kernel_shape=[3, 3], strides=[2, 2],
                                pads=[1, 1, 1, 1])
        yield qlinear_pool_case(f"qlinearaveragepool_{tn}_count_include_pad",
                                "QLinearAveragePool", 16, (1, 2, 5, 5), qt, kernel_shape=[3, 3],
                                pads=[1, 1, 1, 1], count_include_pad=1)
        yield qlinear_pool_case(f"qlinearaveragepool_{tn}_channels_last", "QLinearAveragePool",
                                17, (1, 5, 5, 3), qt, kernel_shape=[2, 2], channels_last=1)
        yield qlinear_pool_case(f"qlinearaveragepool_{tn}_1d_ceil", "QLinearAveragePool", 18,
                                (2, 3, 7), qt, kernel_shape=[3], strides=[2], ceil_mode=1)


def cases():
    yield from matmul_nbits_cases()
    yield from gather_block_quantized_cases()
    yield from int_matmul_cases()
    yield from qgemm_cases()
    yield from qdq_cases()
    yield from qlinear_cases()
