"""Contrib conformance cases: the norm family.

SkipLayerNormalization, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization and
LayerNormalization (both in the default domain, as onnxruntime registers them), the Gelus, FusedMatMul,
EmbedLayerNormalization, FusedConv and BiasAdd.
"""
import numpy as np
from onnx import TensorProto as TP
from onnx import helper

from . import Case, rng

MS = "com.microsoft"
F32, F16, I32 = TP.FLOAT, TP.FLOAT16, TP.INT32


def ms_node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain=MS, **attrs)


def randn(g, shape, dtype=np.float32):
    return g.standard_normal(shape).astype(dtype)


def out_types(names, dtype):
    """Graph outputs for the non-empty names; `dtype` is one type or a list (per name)."""
    types = dtype if isinstance(dtype, list) else [dtype] * len(names)
    return [(n, t) for n, t in zip(names, types) if n]


# --- SkipLayerNormalization / SkipSimplifiedLayerNormalization ------------------------------

def skip_ln_case(name, op, seed, x_shape, skip_shape, hidden, *, beta=True, bias=True,
                 outputs=("y", "mean", "inv_std", "sum"), dtype=np.float32, **attrs):
    g = rng(seed)
    simplified = op == "SkipSimplifiedLayerNormalization"
    inputs = {"x": randn(g, x_shape, dtype), "skip": randn(g, skip_shape, dtype),
              "gamma": randn(g, (hidden,), dtype)}
    names = ["x", "skip", "gamma"]
    if not simplified:
        if beta:
            inputs["beta"] = randn(g, (hidden,), dtype)
            names.append("beta")
        else:
            names.append("")
    if bias:
        inputs["bias"] = randn(g, (hidden,), dtype)
        names.append("bias")
    while names and names[-1] == "":
        names.pop()
    t = F16 if dtype == np.float16 else F32
    outs = list(outputs)
    return Case(name, [ms_node(op, names, outs, **attrs)], inputs,
                out_types(outs, [t, F32, F32, t]))


def skip_layer_norm_cases():
    op = "SkipLayerNormalization"
    yield skip_ln_case("skiplayernorm_all", op, 1, (2, 3, 8), (2, 3, 8), 8, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_default_eps", op, 2, (2, 3, 8), (2, 3, 8), 8)
    yield skip_ln_case("skiplayernorm_no_beta_no_bias", op, 3, (2, 3, 8), (2, 3, 8), 8,
                       beta=False, bias=False, outputs=("y",), epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_bias_no_beta", op, 4, (2, 3, 8), (2, 3, 8), 8,
                       beta=False, outputs=("y", "", "", "sum"), epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_beta_no_bias", op, 5, (2, 3, 8), (2, 3, 8), 8,
                       bias=False, outputs=("y", "mean", "inv_std"), epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_rank2", op, 6, (3, 8), (3, 8), 8, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_skip_batch1", op, 7, (2, 3, 8), (1, 3, 8), 8, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_skip_2d", op, 8, (2, 3, 8), (3, 8), 8, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_size1", op, 9, (1, 1, 8), (1, 1, 8), 8, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_hidden1", op, 10, (2, 3, 1), (2, 3, 1), 1, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_f16", op, 11, (2, 3, 8), (2, 3, 8), 8,
                       dtype=np.float16, epsilon=1e-5)
    yield skip_ln_case("skiplayernorm_f16_no_bias", op, 12, (2, 4, 16), (1, 4, 16), 16,
                       bias=False, beta=False, outputs=("y", "", "", "sum"),
                       dtype=np.float16, epsilon=1e-5)


def skip_simplified_cases():
    op = "SkipSimplifiedLayerNormalization"
    yield skip_ln_case("skipsimplifiedlayernorm_bias", op, 21, (2, 3, 8), (2, 3, 8), 8,
                       outputs=("y", "", "inv_std", "sum"), epsilon=1e-5)
    yield skip_ln_case("skipsimplifiedlayernorm_mean_zero", op, 22, (2, 3, 8), (2, 3, 8), 8,
                       outputs=("y", "mean", "inv_std", "sum"), epsilon=1e-5)
    yield skip_ln_case("skipsimplifiedlayernorm_no_bias", op, 23, (2, 3, 8), (2, 3, 8), 8,
                       bias=False, outputs=("y",), epsilon=1e-5)
    yield skip_ln_case("skipsimplifiedlayernorm_default_eps", op, 24, (2, 3, 8), (2, 3, 8), 8,
                       outputs=("y",))
    yield skip_ln_case("skipsimplifiedlayernorm_rank2", op, 25, (4, 8), (4, 8), 8,
                       outputs=("y", "", "inv_std", "sum"), epsilon=1e-5)
    yield skip_ln_case("skipsimplifiedlayernorm_skip_2d", op, 26, (2, 3, 8), (3, 8), 8,
                       outputs=("y", "", "", "sum"), epsilon=1e-5)
    yield skip_ln_case("skipsimplifiedlayernorm_size1", op, 27, (1, 1, 4), (1, 1, 4), 4,
                       outputs=("y", "", "inv_std"), epsilon=1e-5)
    yield skip_ln_case("skipsimplifiedlayernorm_f16", op, 28, (2, 3, 8), (2, 3, 8), 8,
                       outputs=("y", "", "inv_std", "sum"), dtype=np.float16, epsilon=1e-5)


# --- SimplifiedLayerNormalization, LayerNormalization (default domain) ----------------------

def ln_case(name, op, seed, x_shape, axis, *, bias=True, outputs=None, dtype=np.float32,
            scale_dtype=None, opset=17, **attrs):
    """Y has the scale's type (onnxruntime's V), which is X's unless `scale_dtype` says."""
    g = rng(seed)
    scale_dtype = scale_dtype or dtype
    a = axis if axis >= 0 else axis + len(x_shape)
    norm_shape = x_shape[a:]
    inputs = {"x": randn(g, x_shape, dtype), "scale": randn(g, norm_shape, scale_dtype)}
    names = ["x", "scale"]
    if op == "LayerNormalization" and bias:
        inputs["b"] = randn(g, norm_shape, scale_dtype)
        names.append("b")
    if outputs is None:
        outputs = ("y", "inv_std") if op == "SimplifiedLayerNormalization" else \
            ("y", "mean", "inv_std")
    t = F16 if scale_dtype == np.float16 else F32
    outs = list(outputs)
    types = [t] + [F32] * (len(outs) - 1)
    if axis != -1:
        attrs["axis"] = axis
    node = helper.make_node(op, names, outs, **attrs)
    return Case(name, [node], inputs, out_types(outs, types), opset=opset)


def simplified_cases():
    op = "SimplifiedLayerNormalization"
    yield ln_case("simplifiedlayernorm_basic", op, 31, (2, 3, 8), -1, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_default_eps", op, 32, (2, 3, 8), -1)
    yield ln_case("simplifiedlayernorm_axis1", op, 33, (2, 3, 4), 1, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_axis_neg2", op, 34, (2, 3, 4), -2, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_rank2", op, 35, (5, 6), -1, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_y_only", op, 36, (2, 3, 8), -1, outputs=("y",),
                  epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_size1", op, 37, (1, 1, 8), -1, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_opset13", op, 38, (2, 3, 8), -1, opset=13, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_opset23", op, 39, (2, 3, 8), -1, opset=23, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_stash1", op, 40, (2, 3, 8), -1, epsilon=1e-5,
                  stash_type=1)
    yield ln_case("simplifiedlayernorm_f16", op, 41, (2, 3, 8), -1, dtype=np.float16,
                  epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_x16_scale32", op, 42, (2, 3, 8), -1, dtype=np.float16,
                  scale_dtype=np.float32, epsilon=1e-5)
    yield ln_case("simplifiedlayernorm_x32_scale16_f16", op, 43, (2, 3, 8), -1,
                  scale_dtype=np.float16, epsilon=1e-5)


def layer_norm_cases():
    op = "LayerNormalization"
    yield ln_case("layernorm13_basic", op, 51, (2, 3, 8), -1, opset=13, epsilon=1e-5)
    yield ln_case("layernorm13_default_eps", op, 52, (2, 3, 8), -1, opset=13)
    yield ln_case("layernorm13_no_bias", op, 53, (2, 3, 8), -1, bias=False, opset=13)
    yield ln_case("layernorm13_axis1", op, 54, (2, 3, 4), 1, opset=13, epsilon=1e-5)
    yield ln_case("layernorm13_axis_neg2", op, 55, (2, 3, 4), -2, opset=13)
    yield ln_case("layernorm13_rank2", op, 56, (5, 6), -1, opset=13)
    yield ln_case("layernorm13_y_only", op, 57, (2, 3, 8), -1, outputs=("y",), opset=13)
    yield ln_case("layernorm13_size1", op, 58, (1, 1, 8), -1, opset=13)
    yield ln_case("layernorm13_f16", op, 59, (2, 3, 8), -1, dtype=np.float16, opset=13)
    yield ln_case("layernorm_opset9", op, 60, (2, 3, 8), -1, opset=9)
    yield ln_case("layernorm13_x16_scale32", op, 61, (2, 3, 8), -1, dtype=np.float16,
                  scale_dtype=np.float32, opset=13)
    yield ln_case("layernorm13_x32_scale16_f16", op, 62, (2, 3, 8), -1,
                  scale_dtype=np.float16, opset=13)


# --- Gelus -----------------------------------------------------------------------------------

def unary_case(name, op, seed, shape, dtype=np.float32, **attrs):
    g = rng(seed)
    x = (randn(g, shape) * 3).astype(dtype)
    t = F16 if dtype == np.float16 else F32
    return Case(name, [ms_node(op, ["x"], ["y"], **attrs)], {"x": x}, [("y", t)])


def bias_case(name, op, seed, shape, bias_shape, dtype=np.float32, **attrs):
    g = rng(seed)
    x = (randn(g, shape) * 3).astype(dtype)
    b = randn(g, bias_shape, dtype)
    t = F16 if dtype == np.float16 else F32
    return Case(name, [ms_node(op, ["x", "b"], ["y"], **attrs)], {"x": x, "b": b}, [("y", t)])


def gelu_cases():
    yield unary_case("gelu_basic", "Gelu", 61, (2, 3, 8))
    yield unary_case("gelu_rank1", "Gelu", 62, (7,))
    yield unary_case("gelu_f16", "Gelu", 63, (2, 3, 8), np.float16)
    yield bias_case("biasgelu_basic", "BiasGelu", 64, (2, 3, 8), (8,))
    yield bias_case("biasgelu_rank2", "BiasGelu", 65, (4, 5), (5,))
    yield bias_case("biasgelu_f16", "BiasGelu", 66, (2, 3, 8), (8,), np.float16)
    yield unary_case("fastgelu_no_bias", "FastGelu", 67, (2, 3, 8))
    yield bias_case("fastgelu_bias", "FastGelu", 68, (2, 3, 8), (8,))
    yield bias_case("fastgelu_bias_rank2", "FastGelu", 69, (4, 6), (6,))
    yield bias_case("fastgelu_f16", "FastGelu", 70, (2, 3, 8), (8,), np.float16)
    yield unary_case("fastgelu_f16_no_bias", "FastGelu", 71, (3, 5), np.float16)
    yield unary_case("quickgelu_default", "QuickGelu", 72, (2, 3, 8))
    yield unary_case("quickgelu_alpha1", "QuickGelu", 73, (2, 3, 8), alpha=1.0)
    yield unary_case("quickgelu_alpha_neg", "QuickGelu", 74, (4, 5), alpha=-0.5)
    yield unary_case("quickgelu_f16", "QuickGelu", 75, (2, 3, 8), np.float16)


# --- FusedMatMul -----------------------------------------------------------------------------

def fmm_case(name, seed, a_shape, b_shape, dtype=np.float32, **attrs):
    g = rng(seed)
    a = randn(g, a_shape, dtype)
    b = randn(g, b_shape, dtype)
    t = F16 if dtype == np.float16 else F32
    return Case(name, [ms_node("FusedMatMul", ["a", "b"], ["y"], **attrs)],
                {"a": a, "b": b}, [("y", t)])


def fused_matmul_cases():
    yield fmm_case("fusedmatmul_2d", 81, (3, 4), (4, 5))
    yield fmm_case("fusedmatmul_alpha", 82, (3, 4), (4, 5), alpha=0.5)
    yield fmm_case("fusedmatmul_transA", 83, (4, 3), (4, 5), transA=1)
    yield fmm_case("fusedmatmul_transB", 84, (3, 4), (5, 4), transB=1)
    yield fmm_case("fusedmatmul_transAB_alpha", 85, (4, 3), (5, 4), transA=1, transB=1,
                   alpha=-1.5)
    yield fmm_case("fusedmatmul_batched", 86, (2, 3, 4), (2, 4, 5))
    yield fmm_case("fusedmatmul_batched_transB", 87, (2, 3, 4), (2, 5, 4), transB=1)
    yield fmm_case("fusedmatmul_broadcast", 88, (2, 1, 3, 4), (3, 4, 5), alpha=2.0)
    yield fmm_case("fusedmatmul_broadcast_b2d", 89, (2, 3, 4), (4, 5), transA=0)
    yield fmm_case("fusedmatmul_broadcast_transA", 90, (2, 3, 4, 3), (3, 4, 5), transA=1)
    yield fmm_case("fusedmatmul_transBatchA", 91, (3, 2, 4), (2, 4, 5), transBatchA=1)
    yield fmm_case("fusedmatmul_transBatchB", 92, (2, 3, 4), (4, 2, 5), transBatchB=1)
    yield fmm_case("fusedmatmul_transBatchA_transA", 93, (4, 2, 3), (2, 4, 5), transBatchA=1,
                   transA=1)
    yield fmm_case("fusedmatmul_transBatchB_transB", 94, (2, 3, 4), (5, 2, 4), transBatchB=1,
                   transB=1)
    yield fmm_case("fusedmatmul_transBatch_rank4", 95, (3, 2, 2, 4), (2, 2, 4, 5),
                   transBatchA=1, alpha=0.25)
    yield fmm_case("fusedmatmul_vec_mat", 96, (4,), (4, 5))
    yield fmm_case("fusedmatmul_mat_vec", 97, (3, 4), (4,))
    yield fmm_case("fusedmatmul_vec_transA_ignored", 101, (4,), (5, 4), transA=1, transB=1)
    yield fmm_case("fusedmatmul_size1", 98, (1, 1, 4), (1, 4, 1))
    yield fmm_case("fusedmatmul_f16", 99, (2, 3, 4), (2, 4, 5), np.float16, alpha=0.5)
    yield fmm_case("fusedmatmul_f16_transB", 100, (3, 8), (5, 8), np.float16, transB=1)


# --- EmbedLayerNormalization -----------------------------------------------------------------

def embed_case(name, seed, b, s, h, *, vocab=11, positions=7, segments=2, segment=True,
               mask=True, position_ids=None, outputs=("y", "mask_index"), dtype=np.float32,
               **attrs):
    g = rng(seed)
    inputs = {"input_ids": g.integers(0, vocab, (b, s)).astype(np.int32)}
    names = ["input_ids"]
    if segment:
        inputs["segment_ids"] = g.integers(0, segments, (b, s)).astype(np.int32)
        names.append("segment_ids")
    else:
        names.append("")
    inputs["word_embedding"] = randn(g, (vocab, h), dtype)
    inputs["position_embedding"] = randn(g, (positions, h), dtype)
    names += ["word_embedding", "position_embedding"]
    if segment:
        inputs["segment_embedding"] = randn(g, (segments, h), dtype)
        names.append("segment_embedding")
    else:
        names.append("")
    inputs["gamma"] = randn(g, (h,), dtype)
    inputs["beta"] = randn(g, (h,), dtype)
    names += ["gamma", "beta"]
    if mask:
        # Padding masks (1s then 0s) and one with a hole, counted as onnxruntime counts: the 1s.
        m = (np.arange(s)[None, :] < g.integers(0, s + 1, (b, 1))).astype(np.int32)
        if b > 1 and s > 2:
            m[-1] = 1
            m[-1, 1] = 0
        inputs["mask"] = m
        names.append("mask")
    else:
        names.append("")
    if position_ids is not None:
        inputs["position_ids"] = g.integers(0, positions, position_ids).astype(np.int32)
        names.append("position_ids")
    while names[-1] == "":
        names.pop()
    t = F16 if dtype == np.float16 else F32
    outs = list(outputs)
    return Case(name, [ms_node("EmbedLayerNormalization", names, outs, **attrs)], inputs,
                out_types(outs, [t, I32, t]))


def embed_cases():
    yield embed_case("embedlayernorm_basic", 111, 2, 5, 8, epsilon=1e-5)
    yield embed_case("embedlayernorm_default_eps", 112, 2, 4, 8)
    yield embed_case("embedlayernorm_sum", 113, 2, 4, 8, outputs=("y", "mask_index", "sum"),
                     epsilon=1e-5)
    yield embed_case("embedlayernorm_no_segment", 114, 2, 4, 8, segment=False, epsilon=1e-5)
    yield embed_case("embedlayernorm_no_mask", 115, 2, 4, 8, mask=False, epsilon=1e-5)
    yield embed_case("embedlayernorm_position_ids", 116, 2, 4, 8, position_ids=(2, 4),
                     outputs=("y", "mask_index", "sum"), epsilon=1e-5)
    yield embed_case("embedlayernorm_position_ids_shared", 117, 3, 4, 8, position_ids=(1, 4),
                     epsilon=1e-5)
    yield embed_case("embedlayernorm_mask_index_type0", 118, 2, 4, 8, mask_index_type=0,
                     epsilon=1e-5)
    yield embed_case("embedlayernorm_batch1_seq1", 120, 1, 1, 8, epsilon=1e-5)
    yield embed_case("embedlayernorm_f16", 121, 2, 4, 8, dtype=np.float16,
                     outputs=("y", "mask_index", "sum"), epsilon=1e-5)


# --- FusedConv -------------------------------------------------------------------------------

def fconv_case(name, seed, x_shape, w_shape, *, bias=True, z=False, dtype=np.float32, **attrs):
    g = rng(seed)
    inputs = {"x": randn(g, x_shape, dtype), "w": randn(g, w_shape, dtype)}
    names = ["x", "w"]
    if bias:
        inputs["b"] = randn(g, (w_shape[0],), dtype)
        names.append("b")
    elif z:
        names.append("")
    if z:
        # Z has Y's shape: computed here for the default strides/pads/dilations and `pads`.
        pads = attrs.get("pads", [0] * (2 * (len(x_shape) - 2)))
        strides = attrs.get("strides", [1] * (len(x_shape) - 2))
        k = len(x_shape) - 2
        spatial = [(x_shape[2 + i] + pads[i] + pads[k + i] - w_shape[2 + i]) // strides[i] + 1
                   for i in range(k)]
        inputs["z"] = randn(g, (x_shape[0], w_shape[0], *spatial), dtype)
        names.append("z")
    t = F16 if dtype == np.float16 else F32
    return Case(name, [ms_node("FusedConv", names, ["y"], **attrs)], inputs, [("y", t)])


def fused_conv_cases():
    yield fconv_case("fusedconv_relu", 131, (1, 2, 5, 5), (3, 2, 3, 3), activation="Relu")
    yield fconv_case("fusedconv_tanh", 132, (1, 2, 5, 5), (3, 2, 3, 3), activation="Tanh",
                     pads=[1, 1, 1, 1])
    yield fconv_case("fusedconv_sigmoid", 133, (2, 2, 4, 4), (2, 2, 2, 2), activation="Sigmoid",
                     strides=[2, 2])
    yield fconv_case("fusedconv_leakyrelu", 134, (1, 3, 5, 5), (4, 3, 3, 3),
                     activation="LeakyRelu", activation_params=[0.1])
    yield fconv_case("fusedconv_clip", 135, (1, 2, 5, 5), (3, 2, 3, 3), activation="Clip",
                     activation_params=[-0.5, 1.0])
    yield fconv_case("fusedconv_hardsigmoid", 136, (1, 2, 5, 5), (3, 2, 3, 3),
                     activation="HardSigmoid", activation_params=[0.2, 0.5])
    yield fconv_case("fusedconv_no_activation", 137, (1, 2, 5, 5), (3, 2, 3, 3))
    yield fconv_case("fusedconv_no_bias", 138, (1, 2, 5, 5), (3, 2, 3, 3), bias=False,
                     activation="Relu")
    yield fconv_case("fusedconv_z_relu", 139, (1, 2, 5, 5), (3, 2, 3, 3), z=True,
                     activation="Relu")
    yield fconv_case("fusedconv_z_no_bias", 140, (1, 2, 5, 5), (3, 2, 3, 3), bias=False, z=True,
                     activation="Relu", pads=[1, 1, 1, 1])
    yield fconv_case("fusedconv_1d_group", 141, (2, 4, 7), (4, 2, 3), group=2,
                     activation="LeakyRelu", activation_params=[0.3])
    yield fconv_case("fusedconv_f16", 142, (1, 2, 5, 5), (3, 2, 3, 3), dtype=np.float16,
                     activation="Relu")
    yield fconv_case("fusedconv_f16_z", 143, (1, 2, 5, 5), (3, 2, 3, 3), dtype=np.float16,
                     z=True, activation="Clip", activation_params=[0.0, 6.0])


# --- BiasAdd (onnxruntime's CPU provider has none: the generator prints SKIP) ----------------

def bias_add_cases():
    g = rng(151)
    x, skip, bias = randn(g, (2, 3, 8)), randn(g, (2, 3, 8)), randn(g, (8,))
    yield Case("biasadd_basic", [ms_node("BiasAdd", ["x", "bias", "skip"], ["y"])],
               {"x": x, "bias": bias, "skip": skip}, [("y", F32)])


def cases():
    yield from skip_layer_norm_cases()
    yield from skip_simplified_cases()
    yield from simplified_cases()
    yield from layer_norm_cases()
    yield from gelu_cases()
    yield from fused_matmul_cases()
    yield from embed_cases()
    yield from fused_conv_cases()
    yield from bias_add_cases()
