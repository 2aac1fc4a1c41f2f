#!/usr/bin/env python3
"""Export tiny decoders of fourteen transformers architectures (Llama, Qwen2, Qwen3, Mistral,
Phi-3, Gemma-2, Gemma-3 text, Qwen3-MoE, GPT-OSS, Granite, OLMo-2, Cohere, Phi, GPT-2) with a KV
cache through Hugging Face Optimum's ONNX
exporter, as a user running

    optimum-cli export onnx --model DIR --task text-generation-with-past OUT

gets them: `optimum.exporters.onnx.main_export(DIR, OUT, task="text-generation-with-past")`
with every other argument at its default (optimum's default opset, post-processing on,
validation on, the attention implementation transformers picks when loading DIR).

Each model is built from a config (hidden 32, 4 heads, 2 KV heads where the architecture has
them, head_dim 8, 2 layers, intermediate 48, vocab 64, 64 positions; sliding window 4 for
Mistral, Gemma-2, Gemma-3 and GPT-OSS; Gemma-2 keeps its attention and final logit softcapping;
Qwen3-MoE and GPT-OSS 4 experts, 2 per token; Granite's multipliers 2.0, 0.5, 0.2 and logits
scaling 4.0; Phi rotary on half of each head and 4 KV heads, as Optimum 0.1.0's Phi export
fails with grouped KV heads: its dummy past has num_attention_heads heads) with
random weights under a fixed seed, every 1-D parameter (norm weights, biases) moved off 0 and
1 by adding uniform 0.05..0.25 noise (random initialization leaves them exact, which would
reward rewrites that are only right for those values), saved with `save_pretrained` to a
temporary folder (no tokenizer: main_export does not need one) and exported from there. No
hub access: nothing is downloaded.

Writes, in the layout of the ONNX backend test data, OUT_DIR/ARCH_optimum/model.onnx (one file,
no external data; the exported model with `past_key_values.*` inputs) and
test_data_set_0/input_N.pb, output_N.pb in graph input / output order: batch 2, 3 new tokens,
past 4 (attention_mask of length 7, the first sample left-padded by one position),
position_ids (where the graph takes them) `cumsum(mask) - 1` clipped at 0 on the new tokens,
past keys/values random normal; the outputs onnxruntime's (CPU, 1 thread, graph
optimizations off), after checking that onnxruntime's logits match torch's (the model loaded
from the same folder as optimum loads it, run with a DynamicCache of the same past arrays).

usage: target/venv-optimum/bin/python scripts/export_optimum_decoders.py OUT_DIR [--only NAME ...]
       (scripts/setup_optimum_venv.sh creates the venv)
       NAME: llama qwen2 qwen3 mistral phi3 gemma2 gemma3 qwen3_moe gpt_oss granite olmo2
             cohere phi gpt2
       pinned versions used: torch 2.15.0 (CPU), transformers 4.57.1, optimum 2.1.0,
       optimum-onnx 0.1.0, onnx 1.23.2, onnxruntime 1.31.1, numpy 2.4.6
       tests/models/optimum was written with OUT_DIR = tests/models/optimum
"""

import argparse
import collections
import os
import shutil
import sys
import tempfile
import traceback
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from transformers import DynamicCache  # noqa: E402

HIDDEN = 32
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 8
LAYERS = 2
INTER = 48
VOCAB = 64
POSITIONS = 64
WINDOW = 4

BATCH = 2
NEW = 3
PAST = 4


def configs():
    """name -> (config class, model class, config kwargs)."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=POSITIONS,
    )
    gemma = dict(common, sliding_window=WINDOW, query_pre_attn_scalar=HEAD_DIM)
    return {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(common)),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(common)),
        # q_norm / k_norm (RMSNorm over head_dim) are part of every Qwen3 attention
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM, dict(common)),
        "mistral": (
            transformers.MistralConfig,
            transformers.MistralForCausalLM,
            dict(common, sliding_window=WINDOW),
        ),
        "phi3": (
            transformers.Phi3Config,
            transformers.Phi3ForCausalLM,
            {k: v for k, v in dict(common, pad_token_id=0).items() if k != "head_dim"},
        ),
        # layer 0 sliding (window 4), layer 1 global; both softcappings on (the defaults)
        "gemma2": (
            transformers.Gemma2Config,
            transformers.Gemma2ForCausalLM,
            dict(
                gemma,
                layer_types=["sliding_attention", "full_attention"],
                attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0,
            ),
        ),
        # text-only Gemma 3 (model_type gemma3_text): q/k norms, layer 0 sliding, layer 1 global
        "gemma3": (
            transformers.Gemma3TextConfig,
            transformers.Gemma3ForCausalLM,
            dict(gemma, layer_types=["sliding_attention", "full_attention"]),
        ),
        # a mixture of experts on every layer (4 experts, 2 per token)
        "qwen3_moe": (
            transformers.Qwen3MoeConfig,
            transformers.Qwen3MoeForCausalLM,
            dict(common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                 decoder_sparse_step=1, mlp_only_layers=[]),
        ),
        # experts, attention sinks, layer 0 sliding (window 4), layer 1 global; Optimum loads
        # it with eager attention
        "gpt_oss": (
            transformers.GptOssConfig,
            transformers.GptOssForCausalLM,
            dict(common, num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW,
                 layer_types=["sliding_attention", "full_attention"]),
        ),
        # its four multipliers away from 1
        "granite": (
            transformers.GraniteConfig,
            transformers.GraniteForCausalLM,
            dict(common, embedding_multiplier=2.0, residual_multiplier=0.5,
                 attention_multiplier=0.2, logits_scaling=4.0),
        ),
        # norms after the attention and the MLP, q/k norms over the whole projection
        "olmo2": (
            transformers.Olmo2Config,
            transformers.Olmo2ForCausalLM,
            {k: v for k, v in common.items() if k != "head_dim"},
        ),
        # LayerNorm without bias, interleaved rotary, attention and MLP in parallel
        "cohere": (
            transformers.CohereConfig,
            transformers.CohereForCausalLM,
            {k: v for k, v in common.items() if k != "head_dim"},
        ),
        # partial rotary (half of each head), LayerNorm, attention and MLP in parallel; no
        # grouped KV heads
        "phi": (
            transformers.PhiConfig,
            transformers.PhiForCausalLM,
            dict({k: v for k, v in common.items() if k != "head_dim"},
                 partial_rotary_factor=0.5, num_key_value_heads=HEADS),
        ),
        "gpt2": (
            transformers.GPT2Config,
            transformers.GPT2LMHeadModel,
            dict(
                vocab_size=VOCAB,
                n_embd=HIDDEN,
                n_inner=INTER,
                n_layer=LAYERS,
                n_head=HEADS,
                n_positions=POSITIONS,
            ),
        ),
    }


def perturb(model, gen):
    """Adds uniform 0.05..0.25 noise to every 1-D parameter (norm weights, biases)."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.rand(p.shape, generator=gen) * 0.2 + 0.05)


def cache_shape(config):
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return heads, head_dim


def example(config, graph_inputs, gen):
    """The stored inputs, by graph input name (numpy, the graph's dtypes)."""
    heads, head_dim = cache_shape(config)
    ids = torch.randint(0, VOCAB, (BATCH, NEW), generator=gen)
    mask = torch.ones(BATCH, PAST + NEW, dtype=torch.int64)
    mask[0, 0] = 0  # left padding of the first sample
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, -NEW:]
    feeds = {}
    for inp in graph_inputs:
        name = inp.name
        dtype = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        if name == "input_ids":
            t = ids
        elif name == "attention_mask":
            t = mask
        elif name == "position_ids":
            t = pos
        elif name.startswith("past_key_values."):
            t = torch.randn(BATCH, heads, PAST, head_dim, generator=gen)
        else:
            raise RuntimeError(f"unexpected graph input {name}")
        feeds[name] = t.numpy().astype(dtype)
    return feeds


def torch_logits(model, feeds):
    """Logits (and present key/values) of the transformers model on the same inputs."""
    cache = DynamicCache()
    for i in range(model.config.num_hidden_layers):
        k = torch.from_numpy(feeds[f"past_key_values.{i}.key"])
        v = torch.from_numpy(feeds[f"past_key_values.{i}.value"])
        cache.update(k, v, i)
    kw = dict(
        input_ids=torch.from_numpy(feeds["input_ids"]),
        attention_mask=torch.from_numpy(feeds["attention_mask"]),
        past_key_values=cache,
        use_cache=True,
    )
    if "position_ids" in feeds:
        kw["position_ids"] = torch.from_numpy(feeds["position_ids"])
    with torch.no_grad():
        out = model(**kw)
    kv = out.past_key_values
    present = {}
    for i in range(model.config.num_hidden_layers):
        layer = kv.layers[i]
        present[f"present.{i}.key"] = layer.keys.numpy()
        present[f"present.{i}.value"] = layer.values.numpy()
    return out.logits.numpy(), present


def ort_run(path, feeds):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def describe_value(v):
    t = v.type.tensor_type
    dims = [d.dim_param if d.dim_param else str(d.dim_value) for d in t.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
    return f"{v.name} {dtype}[{', '.join(dims)}]"


def export_one(name, cfg_cls, model_cls, kw, out_dir, work):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    config = cfg_cls(**kw)
    model = model_cls(config).eval()
    perturb(model, gen)
    src = os.path.join(work, name + "_src")
    exported = os.path.join(work, name + "_onnx")
    model.save_pretrained(src)
    del model

    from optimum.exporters.onnx import main_export

    main_export(
        model_name_or_path=src,
        output=exported,
        task="text-generation-with-past",
    )
    produced = sorted(os.listdir(exported))
    onnx_files = [f for f in produced if f.endswith(".onnx")]
    with_past = []
    for f in onnx_files:
        g = onnx.load(os.path.join(exported, f), load_external_data=False).graph
        if any(i.name.startswith("past_key_values.") for i in g.input):
            with_past.append(f)
    if "model.onnx" in with_past:
        chosen = "model.onnx"
    elif len(with_past) == 1:
        chosen = with_past[0]
    else:
        raise RuntimeError(f"{name}: no single ONNX model with past inputs among {produced}")

    d = os.path.join(out_dir, f"{name}_optimum")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    m = onnx.load(os.path.join(exported, chosen))  # pulls in external data, if any
    onnx.checker.check_model(m, full_check=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)  # one file

    feeds = example(config, m.graph.input, gen)
    outs = ort_run(path, feeds)
    out_names = [o.name for o in m.graph.output]

    # torch reference: the model loaded from the saved folder the way optimum loads it
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(src).eval()
    attn = ref_model.config._attn_implementation
    ref_logits, ref_present = torch_logits(ref_model, feeds)
    diff = float(np.abs(outs[0] - ref_logits).max())
    present_diff = 0.0
    for o, v in zip(out_names[1:], outs[1:]):
        r = ref_present.get(o)
        if r is None or r.shape != v.shape:
            raise RuntimeError(f"{name}: {o} has shape {v.shape}, torch's {None if r is None else r.shape}")
        present_diff = max(present_diff, float(np.abs(v - r).max()))
    # the same weights with transformers' eager attention (the reference implementation)
    eager_model = transformers.AutoModelForCausalLM.from_pretrained(src, attn_implementation="eager").eval()
    eager_logits, _ = torch_logits(eager_model, feeds)
    eager_diff = float(np.abs(outs[0] - eager_logits).max())
    print(
        f"{name}: max |logits ort - torch({attn})| = {diff:.3g}, presents {present_diff:.3g}; "
        f"vs torch(eager) {eager_diff:.3g}"
    )
    if diff > 1e-4 or present_diff > 1e-4:
        shutil.rmtree(d)
        raise RuntimeError(f"{name}: onnxruntime differs from torch by {diff} (presents {present_diff})")

    for i, inp in enumerate(m.graph.input):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())

    ops = collections.Counter(n.op_type for n in m.graph.node)
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in m.opset_import)
    print(f"### {name}_optimum ({model_cls.__name__}, attn_implementation={attn})")
    print(f"- optimum wrote: {', '.join(produced)}; kept {chosen}")
    print(f"- model.onnx: {os.path.getsize(path)} bytes, {len(m.graph.node)} nodes, opset {opsets}")
    print(f"- inputs: {'; '.join(describe_value(v) for v in m.graph.input)}")
    print(f"- outputs: {'; '.join(describe_value(v) for v in m.graph.output)}")
    print(f"- max |logits| difference onnxruntime vs torch ({attn}): {diff:.3g}; presents: {present_diff:.3g}")
    print(f"- max |logits| difference onnxruntime vs torch eager attention: {eager_diff:.3g}")
    print(f"- ops: {', '.join(f'{k} {v}' for k, v in sorted(ops.items()))}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    failed = []
    for name, (cfg_cls, model_cls, kw) in configs().items():
        if a.only and name not in a.only:
            continue
        with tempfile.TemporaryDirectory() as work:
            try:
                export_one(name, cfg_cls, model_cls, kw, a.out, work)
            except Exception as e:  # report and go on with the next
                if os.environ.get("TRACE"):
                    traceback.print_exc()
                msg = f"{type(e).__name__}: {e}"
                failed.append((name, msg))
                print(f"{name}: FAILED {msg}", file=sys.stderr)
    if failed:
        print("failed: " + ", ".join(n for n, _ in failed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
