#!/usr/bin/env python3
"""Export tiny models of Hugging Face Optimum's non-decoder catalogue (vision, speech,
encoder-decoders) and the legacy merged decoder through Optimum's ONNX exporter, as a user
running

    optimum-cli export onnx --model DIR --task TASK OUT

gets them: `optimum.exporters.onnx.main_export(DIR, OUT, task=TASK)` with every other argument at
its default (optimum's default opset, post-processing on, validation on, the attention
implementation transformers picks when loading DIR), except:
  - whisper: `nb_max_frames=32` (a dummy-input shape, `--nb_max_frames` of optimum-cli), as the
    tiny config has 16 source positions (32 mel frames) and the default dummy has 3000 frames;
  - llama_legacy: optimum-onnx 0.1.0 has no option that writes the legacy decoder pair for
    decoder-only models (its `text-generation-with-past` writes one model.onnx; `legacy` and
    `use_merged` are gone from the exporter, and `fn_get_submodels` is ignored for supported
    architectures). The script makes the pair Optimum 1.x wrote with `legacy=True` by two
    main_export calls (task text-generation-with-past): one with
    custom_onnx_configs={"model": LlamaOnnxConfig(use_past=True, use_past_in_inputs=False)}
    (decoder_model.onnx), one with the defaults (decoder_with_past_model.onnx), then
    `optimum.onnx.merge_decoders(decoder_model.onnx, decoder_with_past_model.onnx)` into
    decoder_model_merged.onnx (an `If` on the input `use_cache_branch` holding both graphs).

Models (NAME: transformers class, task; every ONNX file Optimum writes is a test of its own):
  vit      ViTForImageClassification            image-classification          -> vit_optimum
  clip     CLIPModel (text and vision)          zero-shot-image-classification -> clip_optimum
  siglip   SiglipModel (text and vision)        zero-shot-image-classification -> siglip_optimum
  dinov2   Dinov2Model                          feature-extraction            -> dinov2_optimum
  convnext ConvNextForImageClassification       image-classification          -> convnext_optimum
  whisper  WhisperForConditionalGeneration      automatic-speech-recognition-with-past
  t5       T5ForConditionalGeneration           text2text-generation-with-past
  marian   MarianMTModel                        text2text-generation-with-past
           -> NAME_encoder_optimum, NAME_decoder_optimum, NAME_decoder_with_past_optimum,
              NAME_decoder_merged_optimum (encoder_model.onnx, decoder_model.onnx,
              decoder_with_past_model.onnx, decoder_model_merged.onnx)
  llama_legacy LlamaForCausalLM, the pair above  -> llama_legacy_decoder_merged_optimum (only
              the merged file is kept: the decoders alone are tests/models/optimum's kind)

Each model is built from a tiny config (hidden 32, 4 heads, 2 layers, intermediate 48, vocab
64; images 32x32 with patch 8 (ConvNeXt: stages of 8 and 16 channels, patch 4); Whisper 16 mel
bins, 16 source positions) with random weights under a fixed seed, every 1-D parameter (norm
weights, biases, layer scales) moved off 0 and 1 by adding uniform 0.05..0.25 noise, saved with
`save_pretrained` to a temporary folder (no tokenizer; for DINOv2 only, a BitImageProcessor
with 32x32 crop built offline, as Optimum's DINOv2 dummy-input generator reads the
preprocessor's crop size and fails with an IndexError without one) and exported from there. No hub access: nothing is downloaded.

Writes, in the layout of the ONNX backend test data, OUT_DIR/TEST/model.onnx (one file, no
external data) and test_data_set_0/input_N.pb, output_N.pb in graph input / output order:
batch 2; text 7 tokens, the second sample right-padded by two positions (attention_mask 0
there); images normal noise; decoders 3 new tokens without past, 1 new token after a past of 4
with past (encoder past of the encoder length), past arrays normal noise; merged decoders
use_cache_branch True there, and test_data_set_1 with use_cache_branch False and empty pasts;
the llama merged decoder 3 new tokens, past 4, the first sample left-padded by one position,
position_ids `cumsum(mask) - 1`. The outputs are onnxruntime's (CPU, 1 thread, graph
optimizations off), after checking them (every output torch also gives) against the model
loaded from the saved folder and run by torch, within 1e-4. The script re-executes itself with
PYTHONHASHSEED=0 (merge_decoders names shared initializers in set order); with it, every run
writes the same bytes.

usage: target/venv-optimum/bin/python scripts/export_optimum_catalogue.py OUT_DIR [--only NAME ...]
       (scripts/setup_optimum_venv.sh creates the venv)
       NAME: vit clip siglip dinov2 convnext whisper t5 marian llama_legacy
       dinov2 needs Pillow (its BitImageProcessor): pillow 13.0.0, in that venv
       pinned versions used: torch 2.15.0 (CPU), transformers 4.57.1, optimum 2.1.0,
       optimum-onnx 0.1.0, onnx 1.23.2, onnxruntime 1.31.1, numpy 2.4.6
"""

import argparse
import collections
import os
import shutil
import sys
import tempfile
import traceback
import warnings

# optimum.onnx.merge_decoders names the shared initializers in set-iteration order: without a
# fixed string hash seed the merged decoders' bytes change from run to run
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from transformers import DynamicCache, EncoderDecoderCache  # noqa: E402

HIDDEN = 32
HEADS = 4
HEAD_DIM = 8
LAYERS = 2
INTER = 48
VOCAB = 64
POSITIONS = 64
IMAGE = 32
PATCH = 8
MELS = 16
SOURCE_POSITIONS = 16  # Whisper: 2 * 16 = 32 mel frames

BATCH = 2
SEQ = 7
PAD = 2
NEW = 3  # decoder tokens without past
NEW_PAST = 1  # decoder tokens with past
PAST = 4

SEQ2SEQ_FILES = [
    ("encoder_model.onnx", "encoder"),
    ("decoder_model.onnx", "decoder"),
    ("decoder_with_past_model.onnx", "decoder_with_past"),
    ("decoder_model_merged.onnx", "decoder_merged"),
]


def specs():
    """name -> dict(config, model class, task, extra main_export kwargs, kind)."""
    text = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
    )
    vision = dict(
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        image_size=IMAGE,
        patch_size=PATCH,
    )
    return {
        "vit": dict(
            config=lambda: transformers.ViTConfig(**vision, num_labels=3),
            model=transformers.ViTForImageClassification,
            task="image-classification",
            kind="single",
        ),
        "clip": dict(
            config=lambda: transformers.CLIPConfig(
                text_config=dict(text, max_position_embeddings=16, bos_token_id=1, eos_token_id=2,
                                 pad_token_id=0),
                vision_config=dict(vision),
                projection_dim=16,
            ),
            model=transformers.CLIPModel,
            task="zero-shot-image-classification",
            kind="single",
        ),
        "siglip": dict(
            config=lambda: transformers.SiglipConfig(
                text_config=dict(text, max_position_embeddings=16),
                vision_config=dict(vision),
            ),
            model=transformers.SiglipModel,
            task="zero-shot-image-classification",
            kind="single",
        ),
        "dinov2": dict(
            config=lambda: transformers.Dinov2Config(**vision),
            model=transformers.Dinov2Model,
            task="feature-extraction",
            kind="single",
            # Optimum's DINOv2 dummy-input generator reads the preprocessor (crop size) and
            # fails with an IndexError without one
            preprocessor=lambda: transformers.BitImageProcessor(
                size={"shortest_edge": IMAGE}, crop_size={"height": IMAGE, "width": IMAGE}),
        ),
        "convnext": dict(
            config=lambda: transformers.ConvNextConfig(
                num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1],
                image_size=IMAGE, num_labels=3,
            ),
            model=transformers.ConvNextForImageClassification,
            task="image-classification",
            kind="single",
        ),
        "whisper": dict(
            config=lambda: transformers.WhisperConfig(
                vocab_size=VOCAB, num_mel_bins=MELS, d_model=HIDDEN,
                encoder_layers=LAYERS, decoder_layers=LAYERS,
                encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
                encoder_ffn_dim=INTER, decoder_ffn_dim=INTER,
                max_source_positions=SOURCE_POSITIONS, max_target_positions=POSITIONS,
                pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=3,
                suppress_tokens=[], begin_suppress_tokens=[],
            ),
            model=transformers.WhisperForConditionalGeneration,
            task="automatic-speech-recognition-with-past",
            extra=dict(nb_max_frames=2 * SOURCE_POSITIONS),
            kind="seq2seq",
        ),
        "t5": dict(
            config=lambda: transformers.T5Config(
                vocab_size=VOCAB, d_model=HIDDEN, d_kv=HEAD_DIM, d_ff=INTER, num_layers=LAYERS,
                num_heads=HEADS, relative_attention_num_buckets=8,
                relative_attention_max_distance=16, pad_token_id=0, eos_token_id=1,
                decoder_start_token_id=0,
            ),
            model=transformers.T5ForConditionalGeneration,
            task="text2text-generation-with-past",
            kind="seq2seq",
        ),
        "marian": dict(
            config=lambda: transformers.MarianConfig(
                vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=LAYERS,
                encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
                encoder_ffn_dim=INTER, decoder_ffn_dim=INTER, max_position_embeddings=POSITIONS,
                pad_token_id=VOCAB - 1, eos_token_id=1, decoder_start_token_id=VOCAB - 1,
                forced_eos_token_id=1,
            ),
            model=transformers.MarianMTModel,
            task="text2text-generation-with-past",
            kind="seq2seq",
        ),
        "llama_legacy": dict(
            config=lambda: transformers.LlamaConfig(
                **text, num_key_value_heads=2, head_dim=HEAD_DIM,
                max_position_embeddings=POSITIONS,
            ),
            model=transformers.LlamaForCausalLM,
            task="text-generation-with-past",
            kind="legacy",
        ),
    }


def perturb(model, gen):
    """Adds uniform 0.05..0.25 noise to every 1-D parameter (norm weights, biases)."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.rand(p.shape, generator=gen) * 0.2 + 0.05)


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


class Inputs:
    """Every array a graph of the model may take, made once per model (fixed seed)."""

    def __init__(self, config, gen):
        self.config = config
        self.gen = gen
        ids = torch.randint(3, VOCAB - 1, (BATCH, SEQ), generator=gen)
        mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
        mask[1, SEQ - PAD:] = 0  # right padding of the second sample
        eos = getattr(getattr(config, "text_config", config), "eos_token_id", None)
        if isinstance(eos, int) and eos < VOCAB:  # CLIP pools at the first eos
            ids[0, SEQ - 1] = eos
            ids[1, SEQ - PAD - 1] = eos
        pad = getattr(getattr(config, "text_config", config), "pad_token_id", None)
        ids[1, SEQ - PAD:] = pad if isinstance(pad, int) and pad < VOCAB else 0
        self.ids = ids
        self.mask = mask
        self.pixels = torch.randn(BATCH, 3, IMAGE, IMAGE, generator=gen)
        self.features = torch.randn(BATCH, MELS, 2 * SOURCE_POSITIONS, generator=gen)
        self.dec_ids = torch.randint(3, VOCAB - 1, (BATCH, NEW), generator=gen)
        self.dec_ids_past = torch.randint(3, VOCAB - 1, (BATCH, NEW_PAST), generator=gen)
        self.enc_len = SOURCE_POSITIONS if config.model_type == "whisper" else SEQ
        d_model = getattr(config, "d_model", None) or getattr(config, "hidden_size", HIDDEN)
        self.ehs = torch.randn(BATCH, self.enc_len, d_model, generator=gen)
        heads = getattr(config, "num_key_value_heads", None) or getattr(
            config, "decoder_attention_heads", None) or getattr(config, "num_heads", None) or \
            getattr(config, "num_attention_heads", HEADS)
        self.heads = heads
        self.head_dim = getattr(config, "d_kv", None) or getattr(config, "head_dim", None) or \
            d_model // heads
        self.past = {}

    def past_array(self, name, length):
        key = (name, length)
        if key not in self.past:
            self.past[key] = torch.randn(BATCH, self.heads, length, self.head_dim, generator=self.gen)
        return self.past[key]

    def feeds(self, graph_inputs, file_kind, use_cache=True):
        """file_kind: single, encoder, decoder, decoder_with_past, decoder_merged, legacy."""
        with_past = file_kind == "decoder_with_past" or (
            file_kind in ("decoder_merged", "legacy") and use_cache)
        feeds = {}
        for inp in graph_inputs:
            name = inp.name
            dtype = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
            if file_kind == "legacy":
                t = self.legacy_input(name, use_cache)
            elif name == "input_ids" and file_kind in ("single", "encoder"):
                t = self.ids
            elif name == "input_ids":
                t = self.dec_ids_past if with_past else self.dec_ids
            elif name in ("attention_mask", "encoder_attention_mask"):
                t = self.mask
            elif name == "pixel_values":
                t = self.pixels
            elif name == "input_features":
                t = self.features
            elif name == "encoder_hidden_states":
                t = self.ehs
            elif name == "use_cache_branch":
                t = torch.tensor([use_cache])
            elif name == "cache_position":  # Whisper
                t = torch.arange(PAST, PAST + NEW_PAST) if with_past else torch.arange(NEW)
            elif name.startswith("past_key_values.") and ".decoder." in name:
                t = self.past_array(name, PAST if with_past else 0)
            elif name.startswith("past_key_values.") and ".encoder." in name:
                t = self.past_array(name, self.enc_len if with_past else 0)
            else:
                raise RuntimeError(f"unexpected graph input {name}")
            feeds[name] = t.numpy().astype(dtype)
        return feeds

    def legacy_input(self, name, use_cache):
        past = PAST if use_cache else 0
        if not hasattr(self, "l_ids"):
            self.l_ids = torch.randint(0, VOCAB, (BATCH, NEW), generator=self.gen)
        if name == "input_ids":
            return self.l_ids
        mask = torch.ones(BATCH, past + NEW, dtype=torch.int64)
        mask[0, 0] = 0  # left padding of the first sample
        if name == "attention_mask":
            return mask
        if name == "position_ids":
            return (mask.cumsum(-1) - 1).clamp(min=0)[:, -NEW:]
        if name == "use_cache_branch":
            return torch.tensor([use_cache])
        if name.startswith("past_key_values."):
            return self.past_array(name, past)
        raise RuntimeError(f"unexpected graph input {name}")


def torch_reference(model, file_kind, feeds, use_cache):
    """name -> array for the outputs torch gives on the same inputs."""
    T = {k: torch.from_numpy(v) for k, v in feeds.items()}
    out = {}
    with torch.no_grad():
        if file_kind == "single":
            kw = {k: v for k, v in T.items()}
            r = model(**kw)
            for k in ("logits", "last_hidden_state", "pooler_output", "logits_per_image",
                      "logits_per_text", "text_embeds", "image_embeds"):
                if getattr(r, k, None) is not None:
                    out[k] = r[k].numpy()
            return out
        if file_kind == "encoder":
            kw = {k: v for k, v in T.items()}
            r = model.get_encoder()(**kw)
            return {"last_hidden_state": r.last_hidden_state.numpy()}
        if file_kind == "legacy":
            layers = model.config.num_hidden_layers
            cache = DynamicCache()
            if use_cache:
                for i in range(layers):
                    cache.update(T[f"past_key_values.{i}.key"], T[f"past_key_values.{i}.value"], i)
            r = model(input_ids=T["input_ids"], attention_mask=T["attention_mask"],
                      position_ids=T["position_ids"], past_key_values=cache, use_cache=True)
            out["logits"] = r.logits.numpy()
            for i in range(layers):
                out[f"present.{i}.key"] = r.past_key_values.layers[i].keys.numpy()
                out[f"present.{i}.value"] = r.past_key_values.layers[i].values.numpy()
            return out
        # seq2seq decoders
        with_past = file_kind == "decoder_with_past" or (file_kind == "decoder_merged" and use_cache)
        layers = model.config.decoder_layers if hasattr(model.config, "decoder_layers") else \
            model.config.num_decoder_layers
        ehs = T.get("encoder_hidden_states")
        if ehs is None:  # the graph with past takes none: the cross-attention cache replaces them
            ehs = torch.zeros(BATCH, feeds[f"past_key_values.0.encoder.key"].shape[2],
                              model.config.d_model)
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        if with_past:
            self_c, cross_c = DynamicCache(), DynamicCache()
            for i in range(layers):
                self_c.update(T[f"past_key_values.{i}.decoder.key"], T[f"past_key_values.{i}.decoder.value"], i)
                cross_c.update(T[f"past_key_values.{i}.encoder.key"], T[f"past_key_values.{i}.encoder.value"], i)
            cache = EncoderDecoderCache(self_c, cross_c)
        kw = dict(encoder_outputs=(ehs,), decoder_input_ids=T["input_ids"], past_key_values=cache,
                  use_cache=True)
        if "encoder_attention_mask" in T:
            kw["attention_mask"] = T["encoder_attention_mask"]
        if "cache_position" in T:
            kw["cache_position"] = T["cache_position"]
        r = model(**kw)
        out["logits"] = r.logits.numpy()
        kv = r.past_key_values
        for i in range(layers):
            out[f"present.{i}.decoder.key"] = kv.self_attention_cache.layers[i].keys.numpy()
            out[f"present.{i}.decoder.value"] = kv.self_attention_cache.layers[i].values.numpy()
            if not with_past:
                out[f"present.{i}.encoder.key"] = kv.cross_attention_cache.layers[i].keys.numpy()
                out[f"present.{i}.encoder.value"] = kv.cross_attention_cache.layers[i].values.numpy()
        return out


def write_test(name, m, src_path, file_kind, inputs, ref_model, out_dir):
    d = os.path.join(out_dir, f"{name}_optimum")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)  # one file
    sets = [True] if file_kind not in ("decoder_merged", "legacy") else [True, False]
    report = []
    for n, use_cache in enumerate(sets):
        feeds = inputs.feeds(m.graph.input, file_kind, use_cache)
        try:
            outs = ort_run(path, feeds)
        except Exception as e:
            if n == 0:
                raise
            report.append(f"test_data_set_{n} (use_cache_branch False) not written: onnxruntime: {e}")
            continue
        ref = torch_reference(ref_model, file_kind, feeds, use_cache)
        diffs = {}
        for o, v in zip(m.graph.output, outs):
            r = ref.get(o.name)
            if r is None:
                continue
            if r.shape != v.shape:
                # merged decoders with the cache branch give placeholder encoder presents
                if file_kind == "decoder_merged" and use_cache and ".encoder." in o.name:
                    continue
                raise RuntimeError(f"{name}: {o.name} has shape {v.shape}, torch's {r.shape}")
            diffs[o.name] = float(np.abs(v - r).max()) if v.size else 0.0
        if not diffs:
            raise RuntimeError(f"{name}: no output to compare with torch")
        worst = max(diffs.values())
        report.append(
            f"test_data_set_{n}{' (use_cache_branch ' + str(use_cache) + ')' if len(sets) > 1 else ''}: "
            f"max |ort - torch| = {worst:.3g} over {len(diffs)} of {len(outs)} outputs"
        )
        if worst > 1e-4:
            shutil.rmtree(d)
            raise RuntimeError(f"{name}: onnxruntime differs from torch by {worst} ({diffs})")
        t = os.path.join(d, f"test_data_set_{n}")
        os.makedirs(t)
        for i, inp in enumerate(m.graph.input):
            with open(os.path.join(t, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
        for i, (o, v) in enumerate(zip(m.graph.output, outs)):
            with open(os.path.join(t, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(v, o.name).SerializeToString())

    ops = collections.Counter(n.op_type for n in m.graph.node)
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in m.opset_import)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
    print(f"### {name}_optimum (from {src_path})")
    print(f"- model.onnx: {os.path.getsize(path)} bytes ({size} with test data), "
          f"{len(m.graph.node)} nodes, opset {opsets}")
    print(f"- inputs: {'; '.join(describe_value(v) for v in m.graph.input)}")
    print(f"- outputs: {'; '.join(describe_value(v) for v in m.graph.output)}")
    for line in report:
        print(f"- {line}")
    print(f"- ops: {', '.join(f'{k} {v}' for k, v in sorted(ops.items()))}")
    sys.stdout.flush()


def legacy_export(src, exported, config):
    """The legacy decoder pair of Optimum 1.x (`legacy=True`), merged.

    main_export ignores `fn_get_submodels` for a supported architecture (and a
    `custom_onnx_configs` key other than "model" is a KeyError), so the pair is made with two
    main_export calls: one with custom_onnx_configs={"model": LlamaOnnxConfig(use_past=True,
    use_past_in_inputs=False)} (decoder_model: no past inputs, present outputs), one with the
    defaults (decoder_with_past_model), then `optimum.onnx.merge_decoders`.
    """
    from optimum.exporters.onnx import main_export
    from optimum.exporters.onnx.model_configs import LlamaOnnxConfig
    from optimum.onnx import merge_decoders

    no_past = os.path.join(exported, "no_past")
    with_past = os.path.join(exported, "with_past")
    main_export(model_name_or_path=src, output=no_past, task="text-generation-with-past",
                custom_onnx_configs={"model": LlamaOnnxConfig(
                    config, task="text-generation", use_past=True, use_past_in_inputs=False)})
    main_export(model_name_or_path=src, output=with_past, task="text-generation-with-past")
    shutil.copy(os.path.join(no_past, "model.onnx"), os.path.join(exported, "decoder_model.onnx"))
    shutil.copy(os.path.join(with_past, "model.onnx"),
                os.path.join(exported, "decoder_with_past_model.onnx"))
    merge_decoders(
        decoder=os.path.join(exported, "decoder_model.onnx"),
        decoder_with_past=os.path.join(exported, "decoder_with_past_model.onnx"),
        save_path=os.path.join(exported, "decoder_model_merged.onnx"),
    )


def export_one(name, spec, out_dir, work):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    config = spec["config"]()
    model = spec["model"](config).eval()
    perturb(model, gen)
    src = os.path.join(work, name + "_src")
    exported = os.path.join(work, name + "_onnx")
    model.save_pretrained(src)
    if "preprocessor" in spec:
        spec["preprocessor"]().save_pretrained(src)
    del model

    from optimum.exporters.onnx import main_export

    if spec["kind"] == "legacy":
        legacy_export(src, exported, config)
    else:
        main_export(model_name_or_path=src, output=exported, task=spec["task"],
                    **spec.get("extra", {}))
    produced = sorted(os.listdir(exported))
    print(f"{name}: optimum wrote {', '.join(produced)}")
    ref_model = spec["model"].from_pretrained(src).eval()
    print(f"{name}: {spec['model'].__name__}, attn_implementation={ref_model.config._attn_implementation}")
    inputs = Inputs(ref_model.config, gen)
    if spec["kind"] == "single":
        files = [("model.onnx", "single", name)]
    elif spec["kind"] == "legacy":
        files = [("decoder_model_merged.onnx", "legacy", name + "_decoder_merged")]
    else:
        files = [(f, k, f"{name}_{k}") for f, k in SEQ2SEQ_FILES]
    missing = [f for f, _, _ in files if f not in produced]
    if missing:
        raise RuntimeError(f"{name}: {missing} not among {produced}")
    for f, kind, test in files:
        m = onnx.load(os.path.join(exported, f))  # pulls in external data, if any
        onnx.checker.check_model(m, full_check=True)
        write_test(test, m, f, kind, inputs, ref_model, out_dir)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    failed = []
    for name, spec in specs().items():
        if a.only and name not in a.only:
            continue
        with tempfile.TemporaryDirectory() as work:
            try:
                export_one(name, spec, a.out, work)
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
