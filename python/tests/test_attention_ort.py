"""Decoder exports fused into opset-23 Attention run in the pinned onnxruntime.

The exports are the committed ones: tests/models/hf (torch's TorchScript and dynamo exporters,
transformers 4.46, eager attention) and tests/models/optimum (optimum-onnx 0.1.0, transformers
4.57, sdpa attention, whose -inf mask and `Where(IsNaN(p), 0, p)` fuse only with
`unsafe_rules`). Each is optimized at `target_opset=23` with the default check, must have one
Attention per layer, and must give onnxruntime's outputs of the original, on the stored test
data and on a batch whose left padding masks every key of a query row (a row Softmax makes NaN
and the export zeroes). Expected values come from onnxruntime running the original export.
"""

import numpy as np
import onnx
import pytest

import onnx_opt
from helpers import REPO, assert_outputs_close, load_data_set, op_histogram, ort_run

HF = REPO / "tests/models/hf"
OPTIMUM = REPO / "tests/models/optimum"

#: (folder, layers, needs unsafe rules)
def _is_decoder(folder) -> bool:
    """A decoder with a KV cache (tests/models/optimum also holds encoders)."""
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    return any(i.name.startswith("past_key_values.") for i in graph.input)


#: Optimum decoders held to expectations of their own (test_other_optimum_decoders below): the
#: attentions per model that fuse at opset 23 with `unsafe_rules`, and the GroupQueryAttention
#: and Attention counts with `target="onnxruntime"`. GPT-OSS's attention sinks (a learned logit
#: per head joined to the scores before the Softmax) have no counterpart in the opset-23
#: Attention, so nothing fuses at opset 23; for onnxruntime each layer becomes one
#: GroupQueryAttention with the sinks as its `head_sink` (its mask is finite, so GQA's
#: treatment of a row masked whole cannot differ). The others keep the standard Attention there
#: (their sdpa masks may hold -inf).
OTHER_OPTIMUM = {
    "qwen3_moe_optimum": (2, (0, 2)),
    "gpt_oss_optimum": (0, (2, 0)),
    "granite_optimum": (2, (0, 2)),
    "olmo2_optimum": (2, (0, 2)),
    "cohere_optimum": (2, (0, 2)),
    "phi_optimum": (2, (0, 2)),
}

EXPORTS = [(d, 2, False) for d in sorted(HF.glob("*_opset1[78]")) if "vit" not in d.name and "convnext" not in d.name] + [
    (d, 2, True) for d in sorted(OPTIMUM.glob("*_optimum")) if _is_decoder(d) and d.name not in OTHER_OPTIMUM
]


def _padded_feeds(model: onnx.ModelProto) -> dict:
    """Batch 2, 3 new tokens, past 4; sample 0 padded on the left over its past and first new
    token, so that token's query row sees no key."""
    return _feeds(model, 2, 3, 4, 5, seed=7, positions_from_mask=False)


@pytest.mark.parametrize("folder,layers,unsafe", EXPORTS, ids=[d.name for d, _, _ in EXPORTS])
def test_fused_decoder_runs_in_onnxruntime(folder, layers, unsafe):
    original = onnx.load(str(folder / "model.onnx"))
    fused = onnx_opt.optimize(original, target_opset=23, unsafe_rules=unsafe)
    ops = op_histogram(fused)
    assert ops["Attention"] == layers, ops
    for node in fused.graph.node:
        if node.op_type == "Attention" and len(node.input) > 4 and node.input[4]:
            assert len(node.output) == 3 and all(node.output), node.output
    for padded, feeds in ((False, load_data_set(folder)[0]), (True, _padded_feeds(original))):
        expected = ort_run(original, feeds)
        actual = ort_run(fused, feeds)
        for v in actual.values():
            assert not np.isnan(v).any()
        if padded and not unsafe:
            # The row that sees no key, under a mask of the lowest float (eager attention):
            # the export averages every value there, and so does the fused model in onnx-opt's
            # interpreter (the spec's Attention), but onnxruntime 1.31.1's Attention kernel
            # gives that row another value. The row is padding; what depends on it is left
            # out: its logits, and the second layer's present at its position.
            for out in (expected, actual):
                out["logits"][0, 0] = 0
                for name, v in out.items():
                    if name.startswith("present.") and not name.startswith("present.0."):
                        v[0, :, 4] = 0
        assert_outputs_close(actual, expected)


def _feeds(model: onnx.ModelProto, b: int, s: int, p: int, pad: int, seed: int = 11,
           positions_from_mask: bool = True) -> dict:
    """Batch b, s new tokens after a past of p; sample 0 padded on the left over `pad`
    positions (position ids counted from its first token, as transformers does, or
    p..p+s-1 in every sample without `positions_from_mask`)."""
    rng = np.random.default_rng(seed)
    mask = np.ones((b, p + s), np.int64)
    mask[0, :pad] = 0
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)[:, p:]
    if not positions_from_mask:
        positions = np.tile(np.arange(p, p + s), (b, 1))
    feeds = {}
    for i in model.graph.input:
        dims = i.type.tensor_type.shape.dim
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 64, (b, s)).astype(np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = mask
        elif i.name == "position_ids":
            feeds[i.name] = positions.astype(np.int64)
        else:
            shape = [b, dims[1].dim_value, p, dims[3].dim_value]
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


#: (batch, new tokens, past, left padding of sample 0): a padded decode step, a first prompt
#: of a batch, a first prompt with padding, and a later prompt of one sequence (onnxruntime's
#: GroupQueryAttention refuses a later prompt in a batch above 1, as in the builder's graph).
ORT_CASES = [(2, 1, 6, 2), (2, 4, 0, 0), (2, 4, 0, 1), (1, 3, 4, 0)]


@pytest.mark.parametrize("folder,layers,unsafe", EXPORTS, ids=[d.name for d, _, _ in EXPORTS])
def test_onnxruntime_target_runs_in_onnxruntime(folder, layers, unsafe):
    """`target="onnxruntime"`: a model onnx.checker accepts, the residual RMS norms as
    SkipSimplifiedLayerNormalization, each layer's attention in onnxruntime's contrib ops where
    that is equal, and onnxruntime's outputs of the original on decode and prompt feeds.

    TorchScript's exports (a KV cache fused into Attention's past, a mask of the lowest float)
    get one GroupQueryAttention per layer with its present outputs (onnxruntime's Attention
    kernel zeroes a row such a mask masks whole, where the export averages). Optimum's sdpa
    exports (a -inf mask, `unsafe_rules`, which they need anyway) keep the standard Attention in
    its 3-D form, which onnxruntime runs faster and computes as the standard does. Dynamo's
    (keys concatenated to the cache and repeated, their Reshape's sequence dim written -1)
    get one GroupQueryAttention per layer as TorchScript's do, with no unsafe rule. The padded
    prompt case has such a row."""
    original = onnx.load(str(folder / "model.onnx"))
    lowered = onnx_opt.optimize(original, target="onnxruntime", unsafe_rules=unsafe)
    onnx.checker.check_model(lowered)
    ops = op_histogram(lowered)
    if unsafe:
        # A mask that may hold -inf: onnxruntime's Attention kernel computes the standard's
        # output (a row masked whole is 0), so the standard op stays, with no sequence lengths
        # and no NaN guard; in its 3-D form where the views around it cancel (not where q/k
        # norms run on the heads, as in Gemma-3's and Qwen3's, or Phi-3's Slices split QKV).
        assert (ops["Attention"], ops["GroupQueryAttention"], ops["IsNaN"]) == (layers, 0, 0), ops
        three_d = 0
        for node in lowered.graph.node:
            if node.op_type == "Attention":
                assert len(node.output) == 3 and all(node.output), node.output
                three_d += {a.name for a in node.attribute} >= {"q_num_heads", "kv_num_heads"}
        if folder.name.startswith(("llama", "qwen2", "mistral", "gpt2")):
            assert three_d == layers, ops
    else:
        assert (ops["GroupQueryAttention"], ops["Attention"]) == (layers, 0), ops
    for node in lowered.graph.node:
        if node.op_type in ("GroupQueryAttention", "MultiHeadAttention", "SkipSimplifiedLayerNormalization"):
            assert node.domain == "com.microsoft"
        if node.op_type == "GroupQueryAttention":
            assert len(node.output) == 3 and all(node.output), node.output
    if folder.name.startswith(("gemma2_torchscript", "gemma2_dynamo")):
        for node in lowered.graph.node:
            if node.op_type == "GroupQueryAttention":
                assert [a.f for a in node.attribute if a.name == "softcap"] == [5.0], node
    if ops["GroupQueryAttention"] + ops["MultiHeadAttention"] > 0:
        assert ("com.microsoft", 1) in [(o.domain, o.version) for o in lowered.opset_import]
    if "gpt2" in folder.name:
        # No rotary between c_attn's Split and the attention: GroupQueryAttention's packed-QKV
        # form, no Split; the 3-D Attention reads the Split's parts, with no Reshape or Transpose.
        for node in lowered.graph.node:
            if node.op_type == "GroupQueryAttention":
                assert node.input[1:3] == ["", ""], list(node.input)
        assert ops["Split"] == (0 if ops["GroupQueryAttention"] else layers), ops
        assert ops["Transpose"] == 0, ops
        assert ops["SkipLayerNormalization"] >= 2 * layers - 1, ops
        assert (ops["FastGelu"], ops["Gelu"]) == (layers, 0), ops
    else:
        # Every layer's two RMS norms read the residual sum, bar the first (the embedding).
        assert ops["SkipSimplifiedLayerNormalization"] >= 2 * layers - 1, ops
    batch = original.graph.input[0].type.tensor_type.shape.dim[0]
    for b, s, p, pad in ORT_CASES:
        if batch.HasField("dim_value") and batch.dim_value != b:
            continue  # dynamo's exports fix the batch at 2
        feeds = _feeds(original, b, s, p, pad)
        actual, expected = ort_run(lowered, feeds), ort_run(original, feeds)
        assert_outputs_close(actual, expected)


#: Optimum's sdpa decoders, with the layers whose mask has a sliding window
#: (`ort_group_query_attention_sliding_window`; the others are causal alone,
#: `attention_causal_mask`): Mistral's every layer, Gemma-2's and Gemma-3's first of two. Their
#: tiny windows (4) are shorter than the decode case's 7 keys, so the window bites.
UNPADDED = {"llama_optimum": 0, "qwen2_optimum": 0, "qwen3_optimum": 0, "phi3_optimum": 0, "granite_optimum": 0,
            "olmo2_optimum": 0, "gpt2_optimum": 0, "phi_optimum": 0, "cohere_optimum": 0, "qwen3_moe_optimum": 0,
            "mistral_optimum": 2, "gemma2_optimum": 1, "gemma3_optimum": 1}


@pytest.mark.parametrize("name", sorted(UNPADDED))
def test_assume_unpadded_mask_gives_causal_attention(name):
    """`assume={"attention_mask": "ones"}`: the padding half of the mask folds away, what is
    left is the causal mask alone, which becomes the standard Attention's `is_causal` (no mask
    input, none computed in the graph), at opset 23 and for onnxruntime, where the causal layers
    keep that form on the 3-D views (onnxruntime ran a decode step faster in that form than as
    GroupQueryAttention with its sequence lengths: benches/README.md) and a sliding window's become GroupQueryAttention
    with local_window_size and no attention_bias. onnxruntime's outputs equal the export's on
    unpadded decode and prompt feeds."""
    original = onnx.load(str(OPTIMUM / name / "model.onnx"))
    windowed = UNPADDED[name]
    for options in ({"target_opset": 23}, {"target": "onnxruntime"}):
        lowered = onnx_opt.optimize(original, unsafe_rules=True, assume={"attention_mask": "ones"},
                                    **options)
        onnx.checker.check_model(lowered)
        ops = op_histogram(lowered)
        if "target" in options:
            assert (ops["GroupQueryAttention"], ops["Attention"]) == (windowed, 2 - windowed), ops
        else:
            # Opset 23 has no window: a sliding window's mask stays Attention's input.
            assert ops["Attention"] == 2, ops
        causal = 0
        for node in lowered.graph.node:
            if node.op_type == "GroupQueryAttention":
                assert len(node.input) == 7, list(node.input)  # no attention_bias
                assert any(a.name == "local_window_size" and a.i > 0 for a in node.attribute), node
            if node.op_type == "Attention" and any(a.name == "is_causal" and a.i == 1 for a in node.attribute):
                assert node.input[3] == "" and len(node.output) == 3 and all(node.output), node
                causal += 1
        assert causal == 2 - windowed, (options, ops)
        if "target" in options or not windowed:
            assert ops["Where"] == 0 and ops["LessOrEqual"] == 0 and ops["Greater"] == 0, (options, ops)
        assert [i.name for i in lowered.graph.input] == [i.name for i in original.graph.input]
        for b, s, p, _ in ORT_CASES:
            feeds = _feeds(original, b, s, p, 0)
            assert_outputs_close(ort_run(lowered, feeds), ort_run(original, feeds))


#: ViT as the TorchScript exporter writes it, and Optimum's BERT and ModernBERT (sdpa attention,
#: a mask of the lowest float from `attention_mask`; ModernBERT's rotary stays unfused).
ENCODERS = sorted(HF.glob("vit_torchscript_opset1[47]")) + [OPTIMUM / "bert_optimum", OPTIMUM / "modernbert_optimum"]


@pytest.mark.parametrize("folder", ENCODERS, ids=[d.name for d in ENCODERS])
def test_encoder_attention_fuses_and_lowers_to_multi_head_attention(folder):
    """ViT as the TorchScript exporter writes it (torch's SDPA decomposition: the query and the
    key, moved to [batch, heads, head, seq] by one Transpose, each scaled by sqrt(scale)), and
    Optimum's BERT and ModernBERT (their stored inputs right-pad one sample): one opset-23
    Attention per layer, and with `target="onnxruntime"` (and `unsafe_rules`, for
    MultiHeadAttention's NaN behaviour) one MultiHeadAttention per layer; onnxruntime's outputs
    of the original either way."""
    original = onnx.load(str(folder / "model.onnx"))
    feeds = load_data_set(folder)[0]
    expected = ort_run(original, feeds)
    fused = onnx_opt.optimize(original, target_opset=23)
    assert op_histogram(fused)["Attention"] == 2, op_histogram(fused)
    assert_outputs_close(ort_run(fused, feeds), expected)
    lowered = onnx_opt.optimize(original, target="onnxruntime", unsafe_rules=True)
    onnx.checker.check_model(lowered)
    ops = op_histogram(lowered)
    assert (ops["MultiHeadAttention"], ops["Attention"], ops["Softmax"]) == (2, 0, 0), ops
    assert_outputs_close(ort_run(lowered, feeds), expected)


@pytest.mark.parametrize("name", sorted(OTHER_OPTIMUM))
def test_other_optimum_decoders(name):
    """Optimum's Qwen3-MoE (experts on every layer), GPT-OSS (experts, attention sinks, a
    sliding window), Granite (multipliers), OLMo-2 (norms after the blocks), Cohere (parallel
    blocks, interleaved rotary) and Phi (partial rotary): each optimized at opset 23 and for
    onnxruntime with the default check, its attention fused per `OTHER_OPTIMUM`, and
    onnxruntime's outputs of the original on the stored data and on decode and prompt feeds."""
    folder = OPTIMUM / name
    layers, lowered_counts = OTHER_OPTIMUM[name]
    original = onnx.load(str(folder / "model.onnx"))
    fused = onnx_opt.optimize(original, target_opset=23, unsafe_rules=True)
    assert op_histogram(fused)["Attention"] == layers, op_histogram(fused)
    feeds = load_data_set(folder)[0]
    assert_outputs_close(ort_run(fused, feeds), ort_run(original, feeds))
    lowered = onnx_opt.optimize(original, target="onnxruntime", unsafe_rules=True)
    onnx.checker.check_model(lowered)
    ops = op_histogram(lowered)
    assert (ops["GroupQueryAttention"], ops["Attention"]) == lowered_counts, ops
    for b, s, p, pad in ORT_CASES:
        feeds = _feeds(original, b, s, p, pad)
        assert_outputs_close(ort_run(lowered, feeds), ort_run(original, feeds))


#: Float16 models as users make them from a float32 export: onnxruntime's converter
#: (`onnxruntime.transformers.float16.convert_float_to_float16`, every float tensor and input
#: in float16). Torch's SDPA decomposition then scales Q and K^T each by a float16 sqrt(scale),
#: which is Attention's own scaling (`attention_sqrt_scaled*` in rules/fusion.rules).
FLOAT16 = [OPTIMUM / "llama_optimum", OPTIMUM / "qwen3_optimum", OPTIMUM / "gemma2_optimum",
           HF / "llama_torchscript_opset17", HF / "llama_dynamo_opset18"]


@pytest.mark.parametrize("folder", FLOAT16, ids=[d.name for d in FLOAT16])
def test_float16_decoders_fuse_and_stay_as_close_to_float32(folder):
    """Each float16 decoder fuses one Attention per layer, at opset 23 and for onnxruntime
    (`unsafe_rules`: Optimum's and dynamo's -inf masks), and in onnxruntime its outputs on the
    stored inputs are at least as close to the float32 export's as the unfused float16 model's
    are (within 1e-3: the fused kernels accumulate in float, the export rounds every step to
    float16, so the fused model is usually the closer one)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    original = onnx.load(str(folder / "model.onnx"))
    half = convert_float_to_float16(onnx.load(str(folder / "model.onnx")), keep_io_types=False,
                                    disable_shape_infer=True)
    feeds = load_data_set(folder)[0]
    half_feeds = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feeds.items()}
    reference = ort_run(original, feeds)
    unfused = ort_run(half, half_feeds)
    for options in ({"target_opset": 23}, {"target": "onnxruntime"}):
        fused = onnx_opt.optimize(half, unsafe_rules=True, **options)
        onnx.checker.check_model(fused)
        ops = op_histogram(fused)
        assert ops["Attention"] + ops["GroupQueryAttention"] + ops["MultiHeadAttention"] == 2, (options, ops)
        assert ops["Softmax"] == 0, (options, ops)
        actual = ort_run(fused, half_feeds)
        for name, want in reference.items():
            got = actual[name].astype(np.float64)
            assert not np.isnan(got).any(), name
            fused_err = np.abs(got - want).max()
            unfused_err = np.abs(unfused[name].astype(np.float64) - want).max()
            assert fused_err <= unfused_err + 1e-3, (options, name, fused_err, unfused_err)
