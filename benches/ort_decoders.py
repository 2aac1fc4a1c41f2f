#!/usr/bin/env python3
"""onnxruntime latency of one decoder LLM written as ONNX by different tools, side by side.

A small random-weight decoder (Llama by default) is exported twice from the same Hugging Face
folder: by Hugging Face Optimum (`text-generation-with-past`, default options: the graph a user
gets from `optimum-cli export onnx`) and by onnxruntime-genai's model builder (fp32, CPU: the
graph with onnxruntime's fused contrib ops, GroupQueryAttention, SkipSimplifiedLayerNormalization,
RotaryEmbedding, ...). The peers (onnxslim, onnxscript's ORT fusions) are run on the Optimum
graph, and every graph is timed in onnxruntime on a decode step and on a prefill, with graph
optimizations on (ORT_ENABLE_ALL) and off (ORT_DISABLE_ALL), in interleaved rounds so that load
changes on the machine hit every graph alike. Other graphs (for example onnx-opt's output of
WORK/input/model.onnx) are added with `--variant NAME=PATH`. The same weights can also be
exported by torch's two exporters (`export-torch`: TorchScript, `dynamo=False`, and dynamo), and
`table` does all of it, onnx-opt included, for several architectures and exporters and writes
one table (fused attention layers, latency ratios to the builder, differences).

Subcommands (PY = target/venv-optimum/bin/python, made by scripts/setup_optimum_venv.sh):

  PY benches/ort_decoders.py export --arch llama --out WORK
      WORK/hf                random-weight model folder: config (hidden 512, 8 heads, 4 KV heads,
                             head_dim 64, intermediate 1408, 4 layers, vocab 8192, 2048 positions),
                             torch seed 0, every 1-D parameter (norm weights, biases) moved off 0
                             and 1 by uniform 0.05..0.25 noise (generator seed 1), as
                             scripts/export_optimum_decoders.py does; save_pretrained, float32.
                             Plus a minimal tokenizer (see below).
      WORK/input/model.onnx  optimum.exporters.onnx.main_export(WORK/hf, WORK/input,
                             task="text-generation-with-past"), everything else default.
      WORK/builder/model.onnx (+ model.onnx.data, genai_config.json, tokenizer files)
                             python -m onnxruntime_genai.models.builder -i WORK/hf -m WORK/hf
                                 -o WORK/builder -p fp32 -e cpu
                             (run with cwd WORK, so its default cache_dir is WORK/cache_dir;
                             no --extra_options, except for gemma2 and gemma3, see below;
                             --builder-extra-options K=V,K=V overrides). The builder loads the
                             weights with AutoModelForCausalLM.from_pretrained(WORK/hf), the
                             same folder.
      then checks, on an 8-token prefill, that both graphs' logits match torch's (the model loaded
      from WORK/hf), which also shows the builder read the same weights; prints node counts.
      --arch: llama (default), qwen2, mistral, phi3, qwen3, gemma2, gemma3 (text-only Gemma 3),
      all with the sizes above where the config has them (Phi-3 has no head_dim argument: 512/8
      = 64 anyway; Gemma's query_pre_attn_scalar = head_dim; sliding windows and softcappings
      are the configs' defaults).

  PY benches/ort_decoders.py export-torch --work WORK --exporter torchscript|dynamo
        [--attn eager|sdpa] [--opset N] [--no-patches]
      WORK/input_torchscript/model.onnx or WORK/input_dynamo/model.onnx (one file; external data
      only if it were over 2 GB), from AutoModelForCausalLM.from_pretrained(WORK/hf, float32,
      attn_implementation="eager" by default; --attn sdpa writes WORK/input_EXPORTER_sdpa) in
      scripts/export_hf_decoders.py's Flat wrapper (a DynamicCache filled from the past
      tensors): inputs input_ids, attention_mask, position_ids, past_key_values.{i}.key / .value,
      outputs logits, present.{i}.key / .value, as the Optimum export names them (Optimum's takes
      no position_ids for Gemma; these always do). Example input: batch 2, 3 new tokens after 5
      past, the first row's first 2 mask positions 0 (no dimension 0 or 1, a mask not all ones).
      torchscript: torch.onnx.export(dynamo=False, opset_version=--opset (default: torch's, 20),
                   dynamic_axes batch_size, sequence_length, past_sequence_length,
                   total_sequence_length, do_constant_folding=True), under optimum-onnx 0.1.0's
                   three transformers workarounds (TorchscriptPatches below; without them,
                   --no-patches, tracing transformers 4.57.1's vmap mask fails with
                   "IndexError: unordered_map::at").
      dynamo:      torch.onnx.export(dynamo=True, opset_version=--opset (default: torch's, 20),
                   dynamic_shapes Dim.DYNAMIC on the same axes), otherwise default (optimize=True),
                   then ONNXProgram.save.
      then runs the graph (ORT_DISABLE_ALL) and the wrapped torch model on an 8-token prefill
      (past 0) and a decode step (past 16); every output (logits and presents) must agree within
      1e-3 abs + 1e-3 rel, else it exits 1 (the model stays written). WORK/SUBDIR/export.json.

  PY benches/ort_decoders.py peers --work WORK [--input SUBDIR]
      WORK/onnxslim/model.onnx    onnxslim.slim(onnx.load(WORK/input/model.onnx))
      WORK/onnxscript/model.onnx  onnxscript.rewriter.ort_fusions.optimize_for_ort(
                                  onnx_ir.load(WORK/input/model.onnx)) (it runs onnxscript's
                                  optimizer first), fusion counts in fusions.json; if it fails,
                                  the traceback goes to WORK/onnxscript/ERROR.txt.
      With --input SUBDIR other than input: the same on WORK/SUBDIR/model.onnx, written to
      WORK/onnxslim_SUBDIR and WORK/onnxscript_SUBDIR.

  PY benches/ort_decoders.py bench --work WORK [--variant NAME=PATH ...] [--rounds 15]
        [--threads 1] [--past 128] [--prefill 64] [--levels all,disable] [--reps 5] [--seed 0]
      Without --variant: input, builder, onnxslim, onnxscript, those of them that exist in WORK.
      A relative PATH that does not exist as given is taken relative to WORK.
      Cases: decode (batch 1, 1 new token, past --past, attention_mask ones of past+1) and
      prefill (batch 1, --prefill tokens, past of length 0 given as empty (1, kv, 0, hd) tensors,
      attention_mask ones). Feeds come from each graph's own input names and declared element
      types (input_ids, attention_mask, position_ids = past..past+new-1 where the graph takes
      them, past_key_values.{i}.key / .value shaped (B, kv_heads, past, head_dim)); input_ids
      and past values are the same arrays (seed --seed) for every variant. Every variant's
      logits (first output) are compared with the `input` variant's at ORT_DISABLE_ALL (the
      first variant's when there is no `input`): max abs difference, and ok when within 1e-3
      abs + 1e-3 rel; outputs named alike in both graphs (present.{i}.key / .value) too.
      Timing: one InferenceSession per (variant, level): CPU provider, intra_op_num_threads
      --threads, inter_op_num_threads 1, sequential execution; 3 warm-up runs per (variant,
      level, case); then --rounds rounds, each running every (level, variant, case) once in an
      order shuffled by a seeded RNG, a measurement being the mean of --reps back-to-back runs.
      Prints one markdown table, a row per (level, case, variant): node count, median ms, its
      ratio to the `builder` variant's median for the same (level, case) (to the first
      variant's when there is no builder), min / max ms, and the differences; and writes
      WORK/bench.json (or --json PATH) with every raw sample. A variant whose session fails to
      load or run is reported with its error text, and the rest goes on.

  PY benches/ort_decoders.py table --work ROOT --onnx-opt BINARY [--archs a,b,...]
        [--exporters optimum,torchscript,dynamo] [--rounds 15] [--redo STEP,...]
        [--reps 5] [--threads 1] [--past 128] [--prefill 64] [--levels all,disable] [--seed 0]
      For every arch (default all seven) in ROOT/ARCH, each step as a subprocess of this script
      with its log, run only when its output is missing or older than its input:
        export                 (Optimum export and builder; also when builder/model.onnx is
                               missing, which regenerates WORK/hf and so everything after it)
        export-torch           per torch exporter: ARCH/input_torchscript, ARCH/input_dynamo
        peers --input SUBDIR   per export (SUBDIR input for Optimum)
        onnx-opt               per export, BINARY SUBDIR/model.onnx -o OUT/model.onnx with
                               --target-opset 23 --unsafe-rules (OUT onnxopt23[_SUBDIR]) and
                               --target onnxruntime --unsafe-rules (OUT onnxopt_ort[_SUBDIR]),
                               --report OUT/report.json, output in OUT/log.txt; also run again
                               when BINARY's sha256 differs from the one that wrote OUT
      and then, export after export, bench --json ARCH/bench_SUBDIR.json with the variants input
      (the export), onnxopt23, onnxopt_ort, onnxslim, onnxscript, builder (those that exist; run
      again unless the JSON has the same variants and settings and is newer than them).
      --redo export,export-torch,peers,onnxopt,bench runs those steps regardless. Writes
      ROOT/table.md, a markdown table with a row per (arch, exporter, level, case): the
      exporter's opset; fused layers = Attention nodes in onnxopt23's graph and
      GroupQueryAttention + MultiHeadAttention + Attention (any domain) nodes in onnxopt_ort's,
      over the number of layers; the builder's median ms; every other variant's median over the
      builder's; and after each figure, in brackets, the max abs difference of its logits and
      presents from the export's at ORT_DISABLE_ALL. A step that fails (an export refused, a
      peer or onnx-opt failing, a session that does not load) is a note "En" in its cells, and
      the notes below the table give the error lines (logs in ROOT/ARCH); the rest goes on.
      Below it, the summary (as `summary`). ROOT/table.json has the raw figures: per export every step (exit code, seconds, log, the
      onnx-opt command), the attention operators of every graph, medians, differences, errors.

  PY benches/ort_decoders.py summary --work ROOT
      Over ROOT/ARCH/bench_*.json (the table's benches): per variant and case, the median of the
      per-round ratio variant / builder for each (export, level), then the median and the range
      of those. A markdown table.

Tokenizer: the builder needs one (AutoTokenizer.from_pretrained on the model folder, for
genai_config.json and the files it copies next to the model), the HF folder has none, and there
is no hub access, so `export` writes a minimal one into WORK/hf: a `tokenizers` WordLevel model
over the 8192 ids ("<unk>", "<s>", "</s>", "t3".."t8191", whitespace pre-tokenizer) saved as a
PreTrainedTokenizerFast. The configs' bos/eos/pad ids are set to 1/2/0 to match it. The
tokenizer has no influence on the graphs.

Gemma-2 / Gemma-3: their configs mark layers "sliding_attention" (Gemma-2 every other layer,
Gemma-3 all four here), and by default the builder gives those layers a windowed KV cache
(GroupQueryAttention sliding_window_cache=1: the past is a buffer of at least the window, 4096,
indexed in cache-relative coordinates, which onnxruntime-genai's runtime manages; onnxruntime
rejects a plain past: "KV cache capacity (0) must be at least local_window_size (4096)"). So for
these two `export` passes `--extra_options windowed_kv_cache=false`, the builder's documented
switch ("give every layer a full-length KV cache for comparison or compatibility"), and the graph
takes the same past as the others. The window (4096) is longer than any sequence benchmarked, so
the sliding windows change no result.

Builder shim: onnxruntime-genai 0.18.0's builder imports `Qwen3_5ForConditionalGeneration` and
`Qwen3_5MoeForConditionalGeneration` from transformers at module load, which transformers
4.57.1 does not have (ImportError before anything runs). `export` therefore runs the builder as
`python -c SHIM <the builder arguments above>`, where SHIM (BUILDER_SHIM below)
  1. puts placeholder classes under those names into the transformers module (only the names
     that are missing; they are used only for Qwen3.5 checkpoints);
  2. wraps the builder's Model.make_config_init: the builder is written for transformers 5,
     whose configs always carry rope_parameters, and iterates `config.rope_scaling`, which
     transformers 4.57.1 leaves None for a plain RoPE (TypeError: 'NoneType' object is not
     iterable); the wrapper sets rope_scaling = {"rope_type": "default"} on the builder's own
     copy of the config when it is None, which is what transformers 5 would report (theta still
     comes from config.rope_theta). The torch model the builder loads the weights from, and the
     HF folder, are untouched;
and then runs the module `onnxruntime_genai.models.builder` as __main__ with runpy. Nothing else
in the builder changes.

Example (the run reported with this script; the onnx-opt line is optional):

  PY=target/venv-optimum/bin/python
  $PY benches/ort_decoders.py export --arch llama --out /work/bench/llama
  $PY benches/ort_decoders.py peers --work /work/bench/llama
  target/release/onnx-opt /work/bench/llama/input/model.onnx \
      -o /work/bench/llama/onnxopt/model.onnx --target-opset 23
  $PY benches/ort_decoders.py bench --work /work/bench/llama --rounds 5 \
      --variant input=input/model.onnx --variant builder=builder/model.onnx \
      --variant onnxslim=onnxslim/model.onnx --variant onnxscript=onnxscript/model.onnx \
      [--variant onnx-opt=onnxopt/model.onnx]

Pinned versions (target/venv-optimum; torch, onnx, onnxruntime, onnxscript and numpy come from
target/venv-torch through a .pth file): torch 2.15.0 (the +cu132 wheel, run on CPU), transformers 4.57.1, optimum 2.1.0,
optimum-onnx 0.1.0, onnx 1.23.2, onnxruntime 1.31.1, onnxruntime-genai 0.18.0, onnxslim 0.1.98,
onnxscript 0.7.2 (onnx-ir 1.1.0), numpy 2.4.6. No network: HF_HUB_OFFLINE=1 and
TRANSFORMERS_OFFLINE=1 are set here.
"""

import argparse
import collections
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import traceback
import warnings

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import onnx  # noqa: E402

HIDDEN = 512
HEADS = 8
KV_HEADS = 4
HEAD_DIM = 64
INTER = 1408
LAYERS = 4
VOCAB = 8192
POSITIONS = 2048

ARCHS = ("llama", "qwen2", "mistral", "phi3", "qwen3", "gemma2", "gemma3")
# configs with layer_types "sliding_attention": the builder's default windowed KV cache for those
# layers cannot be fed a plain past (see the docstring)
SLIDING_ARCHS = ("gemma2", "gemma3")

LEVELS = {
    "all": "ORT_ENABLE_ALL",
    "extended": "ORT_ENABLE_EXTENDED",
    "basic": "ORT_ENABLE_BASIC",
    "disable": "ORT_DISABLE_ALL",
}

ATOL = 1e-3
RTOL = 1e-3

BUILDER_SHIM = r"""
import runpy, sys, transformers
# 1. names the builder imports at load time that transformers 4.57.1 lacks
for _n in ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"):
    try:
        getattr(transformers, _n)
    except (AttributeError, ImportError):
        setattr(transformers, _n, type(_n, (), {}))
# 2. transformers 4.x writes a plain RoPE as rope_scaling None, which the builder iterates
import onnxruntime_genai.models  # puts the builder's folder on sys.path, as the builder does
from builders.base import Model as _Model
_orig_init = _Model.make_config_init
def _make_config_init(self, config):
    for c in (config, getattr(config, "text_config", None)):
        if c is not None and getattr(c, "rope_scaling", False) is None:
            c.rope_scaling = {"rope_type": "default"}
    return _orig_init(self, config)
_Model.make_config_init = _make_config_init
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__", alter_sys=True)
"""


# ----------------------------------------------------------------------------------------------
# export


def arch_config(arch):
    """(config class name, model class name, config kwargs) of one architecture."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=POSITIONS,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    if arch == "llama":
        return "LlamaConfig", "LlamaForCausalLM", common
    if arch == "qwen2":
        return "Qwen2Config", "Qwen2ForCausalLM", common
    if arch == "qwen3":
        return "Qwen3Config", "Qwen3ForCausalLM", common
    if arch == "mistral":
        return "MistralConfig", "MistralForCausalLM", common
    if arch == "phi3":
        kw = {k: v for k, v in common.items() if k != "head_dim"}
        # the builder picks its LongRoPE variant when these two differ (the default original is 4096)
        kw["original_max_position_embeddings"] = POSITIONS
        return "Phi3Config", "Phi3ForCausalLM", kw
    if arch == "gemma2":
        return "Gemma2Config", "Gemma2ForCausalLM", dict(common, query_pre_attn_scalar=HEAD_DIM)
    if arch == "gemma3":
        return "Gemma3TextConfig", "Gemma3ForCausalLM", dict(common, query_pre_attn_scalar=HEAD_DIM)
    raise SystemExit(f"unknown --arch {arch}; one of {', '.join(ARCHS)}")


def perturb(model, gen):
    """scripts/export_optimum_decoders.py's: uniform 0.05..0.25 noise on every 1-D parameter."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from export_optimum_decoders import perturb as shared

    shared(model, gen)


def write_tokenizer(hf_dir):
    """A minimal WordLevel tokenizer over the VOCAB ids (the builder loads one)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(3, VOCAB):
        vocab[f"t{i}"] = i
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<unk>"
    )
    fast.save_pretrained(hf_dir)


def build_hf(arch, hf_dir):
    import torch
    import transformers

    cfg_name, model_name, kw = arch_config(arch)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    config = getattr(transformers, cfg_name)(**kw)
    model = getattr(transformers, model_name)(config).to(torch.float32).eval()
    perturb(model, gen)
    if os.path.isdir(hf_dir):
        shutil.rmtree(hf_dir)
    model.save_pretrained(hf_dir)
    write_tokenizer(hf_dir)
    return model


def single_file(path):
    """Rewrites an ONNX file with external data as one file (when under 2 GB)."""
    m = onnx.load(path, load_external_data=False)
    has_external = any(
        t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer
    )
    if not has_external:
        return
    m = onnx.load(path)
    if m.ByteSize() >= 2**31 - 2**20:
        return
    folder = os.path.dirname(path)
    locations = set()
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                locations.add(e.value)
    onnx.save(m, path)
    for loc in locations:
        p = os.path.join(folder, loc)
        if os.path.exists(p):
            os.remove(p)


def export_optimum(hf_dir, out_dir):
    from optimum.exporters.onnx import main_export

    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    main_export(model_name_or_path=hf_dir, output=out_dir, task="text-generation-with-past")
    path = os.path.join(out_dir, "model.onnx")
    if not os.path.exists(path):
        raise RuntimeError(f"optimum wrote no model.onnx: {sorted(os.listdir(out_dir))}")
    single_file(path)
    return path


def builder_extra_options(arch, given):
    """The builder's --extra_options: as given, else none, except for the architectures with
    sliding-window layers (see the docstring)."""
    if given is not None:
        return [o for o in given.split(",") if o]
    if arch in SLIDING_ARCHS:
        return ["windowed_kv_cache=false"]
    return []


def export_builder(hf_dir, out_dir, work, extra):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    args = ["-i", hf_dir, "-m", hf_dir, "-o", out_dir, "-p", "fp32", "-e", "cpu"]
    if extra:
        args += ["--extra_options"] + extra
    cmd = [sys.executable, "-c", BUILDER_SHIM] + args
    print("running: python -m onnxruntime_genai.models.builder " + " ".join(args)
          + "   (through the import shim, cwd " + work + ")", flush=True)
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    log = os.path.join(work, "builder.log")
    with open(log, "w") as f:
        f.write(r.stdout)
        f.write(r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"builder exited with {r.returncode}; see {log}:\n{r.stderr[-3000:]}")
    path = os.path.join(out_dir, "model.onnx")
    if not os.path.exists(path):
        raise RuntimeError(f"builder wrote no model.onnx: {sorted(os.listdir(out_dir))}; see {log}")
    return path


def describe(path):
    m = onnx.load(path, load_external_data=False)
    ops = collections.Counter(
        (n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in m.graph.node
    )
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in m.opset_import)

    def value(v):
        t = v.type.tensor_type
        dims = [d.dim_param if d.dim_param else str(d.dim_value) for d in t.shape.dim]
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        return f"{v.name} {dt}[{', '.join(dims)}]"

    size = os.path.getsize(path)
    folder = os.path.dirname(path)
    base = os.path.basename(path)
    for f in os.listdir(folder):
        if f != base and f.startswith(base):  # model.onnx.data, model.onnx_data
            size += os.path.getsize(os.path.join(folder, f))
    return dict(
        nodes=len(m.graph.node),
        ops=dict(sorted(ops.items())),
        opsets=opsets,
        bytes=size,
        inputs=[value(v) for v in m.graph.input],
        outputs=[value(v) for v in m.graph.output],
    )


def print_description(name, path):
    d = describe(path)
    print(f"### {name}: {path}")
    print(f"- {d['nodes']} nodes, {d['bytes']} bytes with external data, opset {d['opsets']}")
    ins = d["inputs"]
    if len(ins) > 6:
        ins = ins[:5] + [f"... ({len(d['inputs'])} inputs)"]
    outs = d["outputs"]
    if len(outs) > 4:
        outs = outs[:3] + [f"... ({len(d['outputs'])} outputs)"]
    print(f"- inputs: {'; '.join(ins)}")
    print(f"- outputs: {'; '.join(outs)}")
    print(f"- ops: {', '.join(f'{k} {v}' for k, v in d['ops'].items())}")
    sys.stdout.flush()
    return d


def torch_logits(hf_dir, ids):
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.ones_like(torch.from_numpy(ids)))
    return out.logits.float().numpy()


def cmd_export(a):
    import transformers

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    work = os.path.abspath(a.out)
    os.makedirs(work, exist_ok=True)
    hf_dir = os.path.join(work, "hf")
    build_hf(a.arch, hf_dir)
    print(f"wrote {hf_dir} ({a.arch}, float32, with a minimal tokenizer)", flush=True)
    written = {}
    failures = []
    try:
        written["input"] = export_optimum(hf_dir, os.path.join(work, "input"))
    except Exception as e:
        traceback.print_exc()
        failures.append(f"optimum: {type(e).__name__}: {e}")
    try:
        extra = builder_extra_options(a.arch, a.builder_extra_options)
        written["builder"] = export_builder(hf_dir, os.path.join(work, "builder"), work, extra)
    except Exception as e:
        traceback.print_exc()
        failures.append(f"builder: {type(e).__name__}: {e}")
    cache = os.path.join(work, "cache_dir")
    if os.path.isdir(cache) and not os.listdir(cache):
        os.rmdir(cache)

    # check: the graphs against torch on an 8-token prefill (same folder, so same weights)
    rng = np.random.default_rng(123)
    ids = rng.integers(3, VOCAB, (1, 8)).astype(np.int64)
    ref = torch_logits(hf_dir, ids)
    cfg = model_dims(work)
    info = {}
    for name, path in written.items():
        info[name] = print_description(name, path)
        try:
            sess = make_session(path, "ORT_DISABLE_ALL", 1)
            feeds = make_feeds(graph_inputs(path), ids, past_arrays(cfg, 0, 0), 0)
            out = sess.run(None, feeds)[0]
            d = float(np.abs(out - ref).max()) if out.shape == ref.shape else f"shape {out.shape} vs {ref.shape}"
            print(f"- max |logits - torch logits| on an 8-token prefill (ORT_DISABLE_ALL): {d}")
        except Exception as e:
            print(f"- could not run it: {type(e).__name__}: {e}")
    print()
    print("| file | nodes |")
    print("|---|---|")
    for name, d in info.items():
        print(f"| {os.path.relpath(written[name], work)} | {d['nodes']} |")
    with open(os.path.join(work, "export.json"), "w") as f:
        json.dump(dict(arch=a.arch, files=written, describe=info, failures=failures), f, indent=1)
    if failures:
        print("failed: " + "; ".join(failures), file=sys.stderr)
        sys.exit(1)


# ----------------------------------------------------------------------------------------------
# export-torch

TORCH_EXPORTERS = ("torchscript", "dynamo")
ATTN_IMPLS = ("eager", "sdpa")


def torch_subdir(exporter, attn="eager"):
    """WORK/input_torchscript, WORK/input_dynamo (eager attention); _sdpa appended for sdpa."""
    return f"input_{exporter}" + ("" if attn == "eager" else f"_{attn}")


def io_names(layers):
    """The Optimum export's names: input_ids, attention_mask, position_ids,
    past_key_values.{i}.key / .value in; logits, present.{i}.key / .value out."""
    ins = ["input_ids", "attention_mask", "position_ids"]
    outs = ["logits"]
    for i in range(layers):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outs += [f"present.{i}.key", f"present.{i}.value"]
    return ins, outs


def make_flat(model, layers):
    """scripts/export_hf_decoders.py's Flat: the model with flat tensor inputs and outputs (a
    DynamicCache filled from the past tensors; the presents are its layers' keys and values)."""
    import torch
    from transformers import DynamicCache

    class Flat(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
            kv = out.past_key_values
            present = []
            for i in range(layers):
                present += [kv.layers[i].keys, kv.layers[i].values]
            return (out.logits, *present)

    return Flat(model).eval()


def torch_example(cfg, batch, seq, past, seed, padded=False):
    """input_ids, attention_mask (ones; with padded, the first row's first 2 positions 0),
    position_ids past..past+seq-1, and (batch, kv_heads, past, head_dim) pasts, as numpy."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, cfg["vocab"], (batch, seq)).astype(np.int64)
    mask = np.ones((batch, past + seq), dtype=np.int64)
    if padded:
        mask[0, :2] = 0
    pos = np.broadcast_to(np.arange(past, past + seq, dtype=np.int64), (batch, seq)).copy()
    pasts = []
    for _ in range(cfg["layers"]):
        for _ in ("key", "value"):
            pasts.append(rng.standard_normal((batch, cfg["kv_heads"], past, cfg["head_dim"])).astype(np.float32))
    return [ids, mask, pos] + pasts


class TorchscriptPatches:
    """While exporting through the TorchScript exporter: the three transformers workarounds that
    optimum-onnx 0.1.0 applies around its own export (optimum.exporters.onnx.model_patcher, used
    as they are): vmap-free "sdpa" and "eager" mask functions (transformers >= 4.53 builds masks
    with torch.vmap, which tracing cannot follow), find_packed_sequence_indices returning zeros
    (torch.diff), and DynamicLayer.update without the concatenation to an empty tensor on the
    first call. The torch model the export is checked against runs without them."""

    def __enter__(self):
        import transformers.masking_utils as mu
        from optimum.exporters.onnx import model_patcher as mp
        from transformers.cache_utils import DynamicLayer

        self.saved = (mu.ALL_MASK_ATTENTION_FUNCTIONS["sdpa"], mu.ALL_MASK_ATTENTION_FUNCTIONS["eager"],
                      mu.find_packed_sequence_indices, DynamicLayer.update)
        mu.ALL_MASK_ATTENTION_FUNCTIONS.register("sdpa", mp.sdpa_mask_without_vmap)
        mu.ALL_MASK_ATTENTION_FUNCTIONS.register("eager", mp.eager_mask_without_vmap)
        mu.find_packed_sequence_indices = mp.find_packed_sequence_indices_patched
        DynamicLayer.update = mp.patched_dynamic_layer_update
        return self

    def __exit__(self, *exc):
        import transformers.masking_utils as mu
        from transformers.cache_utils import DynamicLayer

        sdpa, eager, mu.find_packed_sequence_indices, DynamicLayer.update = self.saved
        mu.ALL_MASK_ATTENTION_FUNCTIONS.register("sdpa", sdpa)
        mu.ALL_MASK_ATTENTION_FUNCTIONS.register("eager", eager)
        return False


def export_torchscript(flat, args, path, layers, opset):
    import torch

    ins, outs = io_names(layers)
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    for i in range(layers):
        for kind in ("key", "value"):
            axes[f"past_key_values.{i}.{kind}"] = {0: "batch_size", 2: "past_sequence_length"}
            axes[f"present.{i}.{kind}"] = {0: "batch_size", 2: "total_sequence_length"}
    torch.onnx.export(flat, args, path, dynamo=False, opset_version=opset, input_names=ins,
                      output_names=outs, dynamic_axes=axes, do_constant_folding=True)


def export_dynamo(flat, args, path, layers, opset):
    import torch

    ins, outs = io_names(layers)
    dyn_ = torch.export.Dim.DYNAMIC
    dyn = [{0: dyn_, 1: dyn_}, {0: dyn_, 1: dyn_}, {0: dyn_, 1: dyn_},
           tuple({0: dyn_, 2: dyn_} for _ in range(2 * layers))]
    program = torch.onnx.export(flat, args, dynamo=True, opset_version=opset, input_names=ins,
                                output_names=outs, dynamic_shapes=dyn)
    program.save(path)


def check_against_torch(flat, path, cfg):
    """Runs the graph (ORT_DISABLE_ALL, 1 thread) and the wrapped torch model on an 8-token
    prefill (past 0) and a decode step (past 16): {case: (max abs diff over every output, ok)}."""
    import torch

    sess = make_session(path, "ORT_DISABLE_ALL", 1)
    names = [i.name for i in sess.get_inputs()]
    all_names, _ = io_names(cfg["layers"])
    res = {}
    for case, seq, past, seed in (("prefill8", 8, 0, 123), ("decode_past16", 1, 16, 124)):
        arrays = torch_example(cfg, 1, seq, past, seed)
        with torch.no_grad():
            ref = [t.float().numpy() for t in flat(*[torch.from_numpy(x) for x in arrays])]
        feeds = {n: x for n, x in zip(all_names, arrays) if n in names}
        out = sess.run(None, feeds)
        worst, ok = 0.0, True
        for o, r in zip(out, ref):
            if o.shape != r.shape:
                worst, ok = f"shape {list(o.shape)} vs torch {list(r.shape)}", False
                break
            worst = max(worst, float(np.abs(o.astype(np.float64) - r).max()) if o.size else 0.0)
            ok = ok and bool(np.allclose(o, r, atol=ATOL, rtol=RTOL))
        res[case] = (worst, ok)
    return res


def cmd_export_torch(a):
    import torch
    import transformers

    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    work = os.path.abspath(a.work)
    hf_dir = os.path.join(work, "hf")
    if not os.path.exists(os.path.join(hf_dir, "config.json")):
        raise SystemExit(f"{hf_dir} missing: run export first")
    out_dir = os.path.join(work, torch_subdir(a.exporter, a.attn))
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    path = os.path.join(out_dir, "model.onnx")
    cfg = model_dims(work)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        hf_dir, torch_dtype=torch.float32, attn_implementation=a.attn).eval()
    flat = make_flat(model, cfg["layers"])
    # batch 2, 3 new tokens after 5 past, one row padded: no dimension is 0 or 1, so none is
    # specialized, and the mask is not all ones (transformers skips an all-ones mask when tracing)
    args = tuple(torch.from_numpy(x) for x in torch_example(cfg, 2, 3, 5, 7, padded=True))
    t0 = time.perf_counter()
    patched = a.exporter == "torchscript" and not a.no_patches
    with torch.no_grad(), (TorchscriptPatches() if patched else contextlib.nullcontext()):
        (export_torchscript if a.exporter == "torchscript" else export_dynamo)(
            flat, args, path, cfg["layers"], a.opset)
    dt = time.perf_counter() - t0
    single_file(path)
    print(f"{a.exporter} export ({a.attn} attention{', with optimum-onnx patches' if patched else ''}): "
          f"{dt:.1f} s", flush=True)
    info = print_description(a.exporter, path)
    check = check_against_torch(flat, path, cfg)
    failures = []
    for case, (d, ok) in check.items():
        print(f"- max |outputs - torch outputs| (logits and presents) on {case} (ORT_DISABLE_ALL): {d}"
              + ("" if ok else " MISMATCH"))
        if not ok:
            failures.append(f"{case}: outputs differ from torch's: {d}")
    with open(os.path.join(out_dir, "export.json"), "w") as f:
        json.dump(dict(exporter=a.exporter, attn=a.attn, opset=a.opset, patches=patched, seconds=dt,
                       describe=info,
                       check={k: dict(max_abs_diff=v[0], ok=v[1]) for k, v in check.items()},
                       failures=failures), f, indent=1)
    if failures:
        print("failed: " + "; ".join(failures), file=sys.stderr)
        sys.exit(1)


# ----------------------------------------------------------------------------------------------
# peers


def peer_dir(tool, subdir):
    """WORK/onnxslim, WORK/onnxscript for the Optimum export (WORK/input); TOOL_SUBDIR for others."""
    return tool if subdir == "input" else f"{tool}_{subdir}"


def cmd_peers(a):
    work = os.path.abspath(a.work)
    src = os.path.join(work, a.input, "model.onnx")
    if not os.path.exists(src):
        raise SystemExit(f"{src} missing: run export (or export-torch) first")
    failed = []

    out_dir = os.path.join(work, peer_dir("onnxslim", a.input))
    os.makedirs(out_dir, exist_ok=True)
    err = os.path.join(out_dir, "ERROR.txt")
    try:
        import onnxslim

        t0 = time.perf_counter()
        m = onnxslim.slim(onnx.load(src))
        dt = time.perf_counter() - t0
        save_model(m, os.path.join(out_dir, "model.onnx"))
        print(f"onnxslim: {dt:.1f} s")
        print_description("onnxslim", os.path.join(out_dir, "model.onnx"))
        if os.path.exists(err):
            os.remove(err)
    except Exception:
        with open(err, "w") as f:
            f.write(traceback.format_exc())
        print(f"onnxslim FAILED, see {err}", file=sys.stderr)
        failed.append("onnxslim")

    out_dir = os.path.join(work, peer_dir("onnxscript", a.input))
    os.makedirs(out_dir, exist_ok=True)
    err = os.path.join(out_dir, "ERROR.txt")
    try:
        import onnx_ir as ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort

        t0 = time.perf_counter()
        model = ir.load(src)
        model, counts = optimize_for_ort(model)
        dt = time.perf_counter() - t0
        path = os.path.join(out_dir, "model.onnx")
        ir.save(model, path)
        single_file(path)
        with open(os.path.join(out_dir, "fusions.json"), "w") as f:
            json.dump(counts, f, indent=1)
        print(f"onnxscript optimize_for_ort: {dt:.1f} s; fusions: "
              + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
        print_description("onnxscript", path)
        if os.path.exists(err):
            os.remove(err)
    except Exception:
        with open(err, "w") as f:
            f.write(traceback.format_exc())
        print(f"onnxscript FAILED, see {err}", file=sys.stderr)
        failed.append("onnxscript")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)


def save_model(m, path):
    if m.ByteSize() < 2**31 - 2**20:
        onnx.save(m, path)
    else:
        onnx.save(m, path, save_as_external_data=True, location=os.path.basename(path) + ".data")


# ----------------------------------------------------------------------------------------------
# bench


def model_dims(work):
    """Layers, KV heads, head_dim of the model in WORK/hf."""
    with open(os.path.join(work, "hf", "config.json")) as f:
        c = json.load(f)
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    hd = c.get("head_dim") or c["hidden_size"] // heads
    return dict(layers=c["num_hidden_layers"], kv_heads=kv, head_dim=hd, vocab=c["vocab_size"])


def graph_inputs(path):
    m = onnx.load(path, load_external_data=False)
    init = {t.name for t in m.graph.initializer}
    res = []
    for v in m.graph.input:
        if v.name in init:
            continue
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]
        res.append((v.name, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), dims))
    return res


def past_arrays(cfg, past, seed):
    """{(layer, 'key'|'value'): (1, kv_heads, past, head_dim) float32}, the same for every variant."""
    rng = np.random.default_rng(seed)
    res = {}
    for i in range(cfg["layers"]):
        for kind in ("key", "value"):
            res[(i, kind)] = rng.standard_normal((1, cfg["kv_heads"], past, cfg["head_dim"])).astype(np.float32)
    return res


def make_feeds(inputs, ids, pasts, past):
    """Feeds by the graph's own input names and element types."""
    new = ids.shape[1]
    feeds = {}
    for name, dt, dims in inputs:
        if name == "input_ids":
            a = ids
        elif name == "attention_mask":
            a = np.ones((1, past + new), dtype=np.int64)
        elif name == "position_ids":
            a = np.arange(past, past + new, dtype=np.int64)[None, :]
        elif name.startswith("past_key_values.") and name.rsplit(".", 1)[-1] in ("key", "value"):
            parts = name.split(".")
            try:
                layer = int(parts[1])
            except ValueError:
                raise RuntimeError(f"graph input {name}: no layer index")
            a = pasts[(layer, parts[-1])]
            if len(dims) != 4:
                raise RuntimeError(f"graph input {name} has rank {len(dims)}, expected 4")
            for want, got in zip(dims, a.shape):
                if isinstance(want, int) and want > 0 and want != got:
                    raise RuntimeError(f"graph input {name} has shape {dims}, the feed {a.shape}")
        else:
            raise RuntimeError(f"unexpected graph input {name} {dt}{dims}")
        feeds[name] = np.ascontiguousarray(a.astype(dt))
    return feeds


def make_session(path, level, threads):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    o.log_severity_level = 3
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def short(e, n=160):
    s = f"{type(e).__name__}: {e}".replace("\n", " ").replace("|", "/")
    return s if len(s) <= n else s[: n - 3] + "..."


def compare(out, ref):
    """max abs difference, and whether within ATOL / RTOL; a shorter sequence (last-token
    logits only) is compared with the reference's last positions."""
    if out.shape != ref.shape:
        if out.ndim == ref.ndim == 3 and out.shape[0] == ref.shape[0] and out.shape[2] == ref.shape[2] \
                and out.shape[1] < ref.shape[1]:
            ref = ref[:, -out.shape[1]:, :]
        else:
            return None, False, f"shape {list(out.shape)} vs {list(ref.shape)}"
    d = float(np.abs(out.astype(np.float64) - ref.astype(np.float64)).max()) if out.size else 0.0
    return d, bool(np.allclose(out, ref, atol=ATOL, rtol=RTOL)), None


def cmd_bench(a):
    import onnxruntime as ort

    work = os.path.abspath(a.work)
    variants = []
    if a.variant:
        for v in a.variant:
            if "=" not in v:
                raise SystemExit(f"--variant {v}: expected NAME=PATH")
            name, path = v.split("=", 1)
            if not os.path.isabs(path) and not os.path.exists(path):
                path = os.path.join(work, path)
            variants.append((name, os.path.abspath(path)))
    else:
        for name in ("input", "builder", "onnxslim", "onnxscript"):
            p = os.path.join(work, name, "model.onnx")
            if os.path.exists(p):
                variants.append((name, p))
    names = [n for n, _ in variants]
    if len(set(names)) != len(names):
        raise SystemExit("variant names must be distinct")
    levels = []
    for lv in a.levels.split(","):
        lv = lv.strip()
        levels.append(LEVELS.get(lv, lv))
    for lv in levels:
        if not hasattr(ort.GraphOptimizationLevel, lv):
            raise SystemExit(f"unknown level {lv}")
    cfg = model_dims(work)
    base = "builder" if "builder" in names else names[0]
    ref_name = "input" if "input" in names else names[0]
    ref_level = "ORT_DISABLE_ALL" if "ORT_DISABLE_ALL" in levels else levels[0]

    rng = np.random.default_rng(a.seed)
    cases = {
        "decode": dict(ids=rng.integers(3, cfg["vocab"], (1, 1)).astype(np.int64), past=a.past),
        "prefill": dict(ids=rng.integers(3, cfg["vocab"], (1, a.prefill)).astype(np.int64), past=0),
    }
    for c in cases.values():
        c["pasts"] = past_arrays(cfg, c["past"], a.seed + 1)

    print(f"onnxruntime {ort.__version__}, threads {a.threads}, rounds {a.rounds}, reps {a.reps}, "
          f"decode: 1 token after {a.past}, prefill: {a.prefill} tokens; model: {cfg}", flush=True)
    nodes = {}
    feeds = {}
    errors = {}  # (level, variant, case) or (level, variant) -> text
    for name, path in variants:
        try:
            nodes[name] = len(onnx.load(path, load_external_data=False).graph.node)
            ins = graph_inputs(path)
            for case, c in cases.items():
                feeds[(name, case)] = make_feeds(ins, c["ids"], c["pasts"], c["past"])
        except Exception as e:
            for lv in levels:
                errors[(lv, name)] = short(e)
            print(f"{name}: {short(e, 400)}", file=sys.stderr)

    sessions = {}
    outputs = {}  # (level, variant, case) -> {output name: array}
    for lv in levels:
        for name, path in variants:
            if (lv, name) in errors:
                continue
            try:
                t0 = time.perf_counter()
                s = make_session(path, lv, a.threads)
                load_s = time.perf_counter() - t0
                sessions[(lv, name)] = s
                print(f"session {name} {lv}: {load_s:.2f} s", flush=True)
            except Exception as e:
                errors[(lv, name)] = short(e)
                print(f"session {name} {lv} failed: {short(e, 400)}", file=sys.stderr)
                continue
            out_names = [o.name for o in s.get_outputs()]
            for case in cases:
                try:
                    f = feeds[(name, case)]
                    res = None
                    for _ in range(3):  # warm-up
                        res = s.run(None, f)
                    outputs[(lv, name, case)] = dict(zip(out_names, res))
                    outputs[(lv, name, case)]["__first__"] = res[0]
                except Exception as e:
                    errors[(lv, name, case)] = short(e)
                    print(f"run {name} {lv} {case} failed: {short(e, 400)}", file=sys.stderr)

    # accuracy against the reference variant
    accuracy = {}
    for lv in levels:
        for name, _ in variants:
            for case in cases:
                got = outputs.get((lv, name, case))
                ref = outputs.get((ref_level, ref_name, case)) or outputs.get((lv, ref_name, case))
                if got is None or ref is None:
                    continue
                d, ok, why = compare(got["__first__"], ref["__first__"])
                pd, pok, pn = 0.0, True, 0
                for k, v in got.items():
                    if k == "__first__" or k not in ref or k == next(iter(got)):
                        continue
                    dd, okk, w = compare(v, ref[k])
                    pn += 1
                    if dd is None:
                        pok = False
                        pd = w
                    elif isinstance(pd, float):
                        pd = max(pd, dd)
                        pok = pok and okk
                accuracy[(lv, name, case)] = dict(
                    logits=d, logits_ok=ok, logits_note=why,
                    logits_shape=list(got["__first__"].shape),
                    presents=pd if pn else None, presents_ok=pok, presents_compared=pn,
                )

    # timing rounds
    items = [(lv, name, case) for lv in levels for name, _ in variants for case in cases
             if (lv, name) in sessions and (lv, name, case) not in errors]
    samples = {it: [] for it in items}
    order_rng = random.Random(a.seed)
    t_start = time.perf_counter()
    for r in range(a.rounds):
        order = items[:]
        order_rng.shuffle(order)
        for it in order:
            if it in errors:
                continue
            lv, name, case = it
            s = sessions[(lv, name)]
            f = feeds[(name, case)]
            try:
                t0 = time.perf_counter()
                for _ in range(a.reps):
                    s.run(None, f)
                samples[it].append((time.perf_counter() - t0) / a.reps * 1e3)
            except Exception as e:
                errors[it] = short(e)
        print(f"round {r + 1}/{a.rounds} done ({time.perf_counter() - t_start:.0f} s)", flush=True)

    # report
    medians = {it: statistics.median(v) for it, v in samples.items() if v and it not in errors}
    lines = []
    lines.append(f"decode: batch 1, 1 new token, past {a.past}; prefill: batch 1, {a.prefill} tokens, "
                 f"past 0; {a.threads} thread(s); median of {a.rounds} rounds x mean of {a.reps} runs; "
                 f"ratio to {base}; logits / presents: max abs difference from {ref_name} at {ref_level}")
    lines.append("")
    lines.append(f"| level | case | variant | nodes | median ms | / {base} | min ms | max ms "
                 f"| max abs diff logits | presents |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for lv in levels:
        for case in cases:
            b = medians.get((lv, base, case))
            for name, _ in variants:
                it = (lv, name, case)
                err = errors.get(it) or errors.get((lv, name))
                nn = nodes.get(name, "")
                if err or it not in medians:
                    lines.append(f"| {lv} | {case} | {name} | {nn} | error: {err or 'no samples'} "
                                 f"| | | | | |")
                    continue
                m = medians[it]
                ratio = f"{m / b:.3f}" if b else ""
                acc = accuracy.get(it, {})
                if acc.get("logits") is not None:
                    lg = f"{acc['logits']:.2e}" + ("" if acc["logits_ok"] else " MISMATCH")
                else:
                    lg = acc.get("logits_note") or ""
                pr = acc.get("presents")
                if isinstance(pr, float):
                    pr = f"{pr:.2e} ({acc['presents_compared']})" + ("" if acc["presents_ok"] else " MISMATCH")
                elif pr is None:
                    pr = "none named alike"
                lines.append(f"| {lv} | {case} | {name} | {nn} | {m:.3f} | {ratio} | "
                             f"{min(samples[it]):.3f} | {max(samples[it]):.3f} | {lg} | {pr} |")
    table = "\n".join(lines)
    print()
    print(table)

    import onnxruntime as _ort

    result = dict(
        args=vars(a),
        versions=versions(),
        model=cfg,
        variants=dict(variants),
        nodes=nodes,
        base=base,
        reference=dict(variant=ref_name, level=ref_level),
        onnxruntime=_ort.__version__,
        samples_ms=[dict(level=lv, variant=n, case=c, ms=v) for (lv, n, c), v in samples.items()],
        medians_ms=[dict(level=lv, variant=n, case=c, ms=v) for (lv, n, c), v in medians.items()],
        accuracy=[dict(level=lv, variant=n, case=c, **v) for (lv, n, c), v in accuracy.items()],
        errors=[dict(key=list(k), error=v) for k, v in errors.items()],
        table=table,
    )
    out = os.path.abspath(a.json) if a.json else os.path.join(work, "bench.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {out}")


# ----------------------------------------------------------------------------------------------
# table

TABLE_EXPORTERS = ("optimum", "torchscript", "dynamo")
# the bench's variants of one export, in the table's column order
TABLE_VARIANTS = ("input", "onnxopt23", "onnxopt_ort", "onnxslim", "onnxscript", "builder")
ONNXOPT_FLAGS = {
    "onnxopt23": ["--target-opset", "23", "--unsafe-rules"],
    "onnxopt_ort": ["--target", "onnxruntime", "--unsafe-rules"],
}
ATTENTION_OPS = ("Attention", "GroupQueryAttention", "MultiHeadAttention")
SHORT_OPS = {"com.microsoft.GroupQueryAttention": "GQA", "com.microsoft.MultiHeadAttention": "MHA",
             "com.microsoft.Attention": "ms.Attention"}


def export_subdir(exporter):
    return "input" if exporter == "optimum" else torch_subdir(exporter)


def variant_paths(sub):
    """variant -> its model, relative to the arch's work directory, for the export in SUB."""
    res = {"input": f"{sub}/model.onnx"}
    for tool in ("onnxopt23", "onnxopt_ort", "onnxslim", "onnxscript"):
        res[tool] = f"{peer_dir(tool, sub)}/model.onnx"
    res["builder"] = "builder/model.onnx"
    return res


def attention_ops(path):
    """{op: count} of the attention operators in the graph (top level), op prefixed with its
    domain when that is not the default one."""
    m = onnx.load(path, load_external_data=False)
    c = collections.Counter()
    for n in m.graph.node:
        if n.op_type in ATTENTION_OPS:
            c[(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type] += 1
    return dict(sorted(c.items()))


def default_opset(path):
    m = onnx.load(path, load_external_data=False)
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)


def error_text(text, n=500):
    """The line of a log that says what went wrong: an export's 'failed: ...' summary, else the
    last exception or error line, else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith("failed: "):
            return ln[len("failed: "):][:n]
    for ln in reversed(lines):
        if re.match(r"^([\w.]*(Error|Exception|Interrupt)\b|error\b|Error\b)", ln) or "panicked at" in ln:
            return ln[:n]
    return lines[-1][:n] if lines else "no output"


def mtime(path):
    return os.path.getmtime(path) if os.path.exists(path) else None


def fresh(out, *deps):
    """OUT exists and is not older than any of DEPS (those that exist)."""
    t = mtime(out)
    if t is None:
        return False
    return all(mtime(d) is None or mtime(d) <= t for d in deps)


def sha256(path):
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_logged(cmd, log, cwd=None):
    """Runs CMD with stdout and stderr into LOG: (exit code, the log's text, seconds)."""
    line = " ".join(shlex.quote(c) for c in cmd)
    print(f"$ {line}   > {log}", flush=True)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    t0 = time.perf_counter()
    with open(log, "w") as f:
        f.write(f"$ {line}\n")
        f.flush()
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    dt = time.perf_counter() - t0
    with open(log, errors="replace") as f:
        text = f.read()
    print(f"  exit {r.returncode}, {dt:.1f} s" + (f": {error_text(text, 300)}" if r.returncode else ""),
          flush=True)
    return r.returncode, text, dt


def cmd_table(a):
    root = os.path.abspath(a.work)
    os.makedirs(root, exist_ok=True)
    archs = [x for x in a.archs.split(",") if x]
    exporters = [x for x in a.exporters.split(",") if x]
    redo = {x for x in a.redo.split(",") if x}
    for x in archs:
        if x not in ARCHS:
            raise SystemExit(f"unknown arch {x}; one of {', '.join(ARCHS)}")
    for x in exporters:
        if x not in TABLE_EXPORTERS:
            raise SystemExit(f"unknown exporter {x}; one of {', '.join(TABLE_EXPORTERS)}")
    steps_known = {"export", "export-torch", "peers", "onnxopt", "bench"}
    if redo - steps_known:
        raise SystemExit(f"--redo: unknown step(s) {', '.join(sorted(redo - steps_known))}; "
                         f"of {', '.join(sorted(steps_known))}")
    binary = os.path.abspath(a.onnx_opt)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"--onnx-opt {binary}: not an executable")
    binary_sha = sha256(binary)
    script = os.path.abspath(__file__)
    py = sys.executable
    bench_args = ["--rounds", str(a.rounds), "--reps", str(a.reps), "--threads", str(a.threads),
                  "--past", str(a.past), "--prefill", str(a.prefill), "--levels", a.levels,
                  "--seed", str(a.seed)]
    t_all = time.perf_counter()
    rows = []  # one per (arch, exporter)

    # 1. everything but the timing, for every arch
    for arch in archs:
        wd = os.path.join(root, arch)
        os.makedirs(wd, exist_ok=True)
        hf_cfg = os.path.join(wd, "hf", "config.json")
        builder = os.path.join(wd, "builder", "model.onnx")
        arch_rows = {e: dict(arch=arch, exporter=e, subdir=export_subdir(e), steps={}) for e in exporters}
        need = ("export" in redo or not os.path.exists(hf_cfg) or not os.path.exists(builder)
                or ("optimum" in exporters and not os.path.exists(os.path.join(wd, "input", "model.onnx"))))
        export_step = dict(ran=False)
        if need:
            rc, text, dt = run_logged([py, script, "export", "--arch", arch, "--out", wd],
                                      os.path.join(wd, "export.log"))
            export_step = dict(ran=True, exit=rc, seconds=dt, log=os.path.join(wd, "export.log"))
            if rc:
                export_step["error"] = error_text(text)
        # the summary line of `export` reads "optimum: ...; builder: ..."
        parts = {}
        for part in export_step.get("error", "").split("; "):
            if ":" in part:
                parts[part.split(":", 1)[0].strip()] = part.split(":", 1)[1].strip()
        builder_error = None
        if not os.path.exists(builder):
            builder_error = parts.get("builder") or export_step.get("error") or "no builder/model.onnx"
        for e, row in arch_rows.items():
            row["steps"]["export"] = dict(export_step)
            if builder_error:
                row["steps"]["builder"] = dict(error=builder_error, log=os.path.join(wd, "builder.log"))
        if not os.path.exists(hf_cfg):
            for row in arch_rows.values():
                row["error"] = ("export", export_step.get("error") or "no hf/config.json")
            rows += arch_rows.values()
            continue
        if "optimum" in arch_rows and not os.path.exists(os.path.join(wd, "input", "model.onnx")):
            arch_rows["optimum"]["error"] = (
                "export", parts.get("optimum") or export_step.get("error") or "no input/model.onnx")

        for e, row in arch_rows.items():
            sub = row["subdir"]
            src = os.path.join(wd, sub, "model.onnx")
            if e != "optimum":
                ej = os.path.join(wd, sub, "export.json")
                if "export-torch" in redo or not fresh(src, hf_cfg):
                    log = os.path.join(wd, f"export_{e}.log")
                    rc, text, dt = run_logged([py, script, "export-torch", "--work", wd, "--exporter", e], log)
                    st = dict(ran=True, exit=rc, seconds=dt, log=log)
                    if rc:
                        st["error"] = error_text(text)
                else:
                    st = dict(ran=False)
                    if os.path.exists(ej):
                        with open(ej) as f:
                            fails = json.load(f).get("failures")
                        if fails:
                            st["error"] = "; ".join(fails)
                row["steps"]["export"] = st
                if not os.path.exists(src):
                    row["error"] = ("export", st.get("error") or f"no {sub}/model.onnx")
                    continue
                if st.get("error"):  # written, but the check against torch failed: go on
                    row["export_check"] = st["error"]
            if "error" in row:
                continue
            row["opset"] = default_opset(src)
            paths = {k: os.path.join(wd, v) for k, v in variant_paths(sub).items()}

            # peers
            if "peers" in redo or not all(fresh(paths[t], src) for t in ("onnxslim", "onnxscript")):
                log = os.path.join(wd, f"peers_{sub}.log")
                rc, text, dt = run_logged([py, script, "peers", "--work", wd, "--input", sub], log)
                ran = dict(ran=True, exit=rc, seconds=dt, log=log)
            else:
                ran = dict(ran=False)
            for t in ("onnxslim", "onnxscript"):
                st = dict(ran)
                err = os.path.join(wd, peer_dir(t, sub), "ERROR.txt")
                if os.path.exists(err):
                    with open(err) as f:
                        st["error"] = error_text(f.read())
                    st["log"] = err
                elif not os.path.exists(paths[t]):
                    st["error"] = f"no {peer_dir(t, sub)}/model.onnx" + (f" (exit {ran.get('exit')})" if ran["ran"] else "")
                row["steps"][t] = st

            # onnx-opt at the two targets
            for t, flags in ONNXOPT_FLAGS.items():
                out_dir = os.path.join(wd, peer_dir(t, sub))
                out = paths[t]
                stamp_path = os.path.join(out_dir, "stamp.json")
                stamp = dict(binary=binary, sha256=binary_sha, flags=flags)
                old = None
                if os.path.exists(stamp_path):
                    with open(stamp_path) as f:
                        old = json.load(f)
                if "onnxopt" in redo or not fresh(out, src) or old != stamp:
                    if os.path.isdir(out_dir):
                        shutil.rmtree(out_dir)
                    os.makedirs(out_dir)
                    cmd = [binary, src, "-o", out] + flags + ["--report", os.path.join(out_dir, "report.json")]
                    rc, text, dt = run_logged(cmd, os.path.join(out_dir, "log.txt"))
                    st = dict(ran=True, exit=rc, seconds=dt, log=os.path.join(out_dir, "log.txt"),
                              cmd=" ".join(shlex.quote(c) for c in cmd))
                    if rc or not os.path.exists(out):
                        st["error"] = error_text(text) if rc else "exit 0 but no model written"
                        with open(os.path.join(out_dir, "ERROR.txt"), "w") as f:
                            f.write(text)
                        if os.path.exists(out):
                            os.remove(out)
                    with open(stamp_path, "w") as f:
                        json.dump(stamp, f)
                else:
                    st = dict(ran=False, log=os.path.join(out_dir, "log.txt"))
                    if os.path.exists(os.path.join(out_dir, "ERROR.txt")):
                        with open(os.path.join(out_dir, "ERROR.txt")) as f:
                            st["error"] = error_text(f.read())
                row["steps"][t] = st

            # attention operators of every graph
            row["attention_ops"] = {}
            for k, p in paths.items():
                if os.path.exists(p):
                    try:
                        row["attention_ops"][k] = attention_ops(p)
                    except Exception as ex:
                        row["attention_ops"][k] = dict(error=short(ex))
        rows += arch_rows.values()

    # 2. the timing of every export, one bench after another
    for row in rows:
        if "error" in row:
            continue
        wd = os.path.join(root, row["arch"])
        variants = [(k, v) for k, v in variant_paths(row["subdir"]).items() if os.path.exists(os.path.join(wd, v))]
        js = os.path.join(wd, f"bench_{row['subdir']}.json")
        log = os.path.join(wd, f"bench_{row['subdir']}.log")
        want = {k: os.path.join(wd, v) for k, v in variants}
        current = None
        if os.path.exists(js):
            with open(js) as f:
                current = json.load(f)
        same = current is not None and current.get("variants") == want and all(
            current["args"].get(k) == v for k, v in dict(
                rounds=a.rounds, reps=a.reps, threads=a.threads, past=a.past, prefill=a.prefill,
                levels=a.levels, seed=a.seed).items())
        if "bench" in redo or not same or not fresh(js, *want.values()):
            cmd = [py, script, "bench", "--work", wd, "--json", js] + bench_args
            for k, v in variants:
                cmd += ["--variant", f"{k}={os.path.join(wd, v)}"]
            if os.path.exists(js):
                os.remove(js)
            rc, text, dt = run_logged(cmd, log)
            row["steps"]["bench"] = dict(ran=True, exit=rc, seconds=dt, log=log)
            if rc or not os.path.exists(js):
                row["steps"]["bench"]["error"] = error_text(text)
                continue
            with open(js) as f:
                current = json.load(f)
        else:
            row["steps"]["bench"] = dict(ran=False, log=log)
        row["bench"] = dict(
            json=js,
            nodes=current["nodes"],
            medians_ms={f"{m['level']}|{m['case']}|{m['variant']}": m["ms"] for m in current["medians_ms"]},
            accuracy={f"{x['level']}|{x['case']}|{x['variant']}": x for x in current["accuracy"]},
            errors={"|".join(e["key"]): e["error"] for e in current["errors"]},
            levels=sorted({m["level"] for m in current["medians_ms"]}, key=lambda lv: list(LEVELS.values()).index(lv)
                          if lv in LEVELS.values() else 99),
        )

    elapsed = time.perf_counter() - t_all
    table, notes = render_table(rows, a)
    print()
    print(table)
    md = os.path.join(root, "table.md")
    jsons = [row["bench"]["json"] for row in rows if "bench" in row]
    if jsons:
        summary = paired_summary(jsons)
        print("\n" + summary)
        table += ("\n\nPer-round ratio to the builder, its median per (export, level), then the median "
                  "and range of those:\n\n" + summary)
    with open(md, "w") as f:
        f.write(table + "\n")
    try:
        onnx_opt_version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    except Exception:
        onnx_opt_version = None
    with open(os.path.join(root, "table.json"), "w") as f:
        json.dump(dict(args=vars(a), onnx_opt=dict(path=binary, sha256=binary_sha, version=onnx_opt_version),
                       versions=versions(), seconds=elapsed, rows=rows, notes=notes, table=table), f, indent=1)
    print(f"\nwrote {md} and {os.path.join(root, 'table.json')} ({elapsed:.0f} s)")


def render_table(rows, a):
    """One markdown table: a row per (arch, exporter, level, case), and the errors below it."""
    notes = []

    def note(text):
        notes.append(text)
        return f"E{len(notes)}"

    def fused(row, variant):
        step = row["steps"].get(variant, {})
        if step.get("error"):
            return note(f"{row['arch']} / {row['exporter']} / {variant}: {step['error']}"
                        + (f"  [{step['cmd']}]" if step.get("cmd") else ""))
        ops = row.get("attention_ops", {}).get(variant)
        if ops is None:
            return "?"
        if "error" in ops:
            return note(f"{row['arch']} / {row['exporter']} / {variant}: reading the graph: {ops['error']}")
        layers = model_dims(os.path.join(os.path.abspath(a.work), row["arch"]))["layers"]
        if variant == "onnxopt23":
            return f"{ops.get('Attention', 0)}/{layers}"
        total = sum(ops.values())
        kinds = ", ".join(f"{SHORT_OPS.get(k, k)} {v}" for k, v in ops.items())
        return f"{total}/{layers}" + (f" ({kinds})" if kinds else "")

    head = (f"| arch | exporter | fused: opset 23 | fused: onnxruntime | level | case | builder ms "
            + "".join(f"| {v} " for v in TABLE_VARIANTS if v != "builder") + "|")
    lines = [
        f"onnxruntime, {a.threads} thread(s); decode: 1 token after {a.past} past, prefill: {a.prefill} "
        f"tokens; median of {a.rounds} interleaved rounds x mean of {a.reps} runs. fused: attention "
        "nodes in onnx-opt's output (--target-opset 23 --unsafe-rules: Attention; --target "
        "onnxruntime --unsafe-rules: GroupQueryAttention + MultiHeadAttention + Attention) / layers. "
        "Variant cells: median / the builder's median (same level and case), and in brackets the max "
        "abs difference of logits and presents from the input export at ORT_DISABLE_ALL (MISMATCH: "
        f"beyond {ATOL} abs + {RTOL} rel). En: errors below.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    short_level = {v: k for k, v in LEVELS.items()}
    for row in rows:
        label = row["exporter"] + (f" (opset {row['opset']})" if row.get("opset") else "")
        if "error" in row:
            step, err = row["error"]
            e = note(f"{row['arch']} / {row['exporter']} / {step}: {err}")
            lines.append(f"| {row['arch']} | {label} | {e} | {e} | | | " + "| " * (len(TABLE_VARIANTS) - 1) + "|")
            continue
        if row.get("export_check"):
            label += " " + note(f"{row['arch']} / {row['exporter']} / export check: {row['export_check']}")
        f23, fort = fused(row, "onnxopt23"), fused(row, "onnxopt_ort")
        cell_err = {}
        for v in TABLE_VARIANTS:
            st = row["steps"].get(v, {})
            if st.get("error"):
                # onnx-opt's errors are already noted in the fused columns
                cell_err[v] = (f23 if v == "onnxopt23" else fort) if v.startswith("onnxopt") else note(
                    f"{row['arch']} / {row['exporter']} / {v}: {st['error']}")
        b = row.get("bench")
        if b is None:
            err = row["steps"].get("bench", {}).get("error", "not run")
            e = note(f"{row['arch']} / {row['exporter']} / bench: {err}")
            lines.append(f"| {row['arch']} | {label} | {f23} | {fort} | {e} | | " + "| " * (len(TABLE_VARIANTS) - 1) + "|")
            continue
        for lv in b["levels"]:
            for case in ("decode", "prefill"):
                bm = b["medians_ms"].get(f"{lv}|{case}|builder")
                cells = []
                for v in TABLE_VARIANTS:
                    if v in cell_err:
                        cells.append(cell_err[v])
                        continue
                    key = f"{lv}|{case}|{v}"
                    m = b["medians_ms"].get(key)
                    if m is None:
                        err = b["errors"].get(key) or b["errors"].get(f"{lv}|{v}")
                        cells.append(note(f"{row['arch']} / {row['exporter']} / {v} / {short_level.get(lv, lv)} "
                                          f"{case}: {err or 'no timing'}") if v in b["nodes"] or err else "")
                        continue
                    acc = b["accuracy"].get(key, {})
                    diffs = [x for x in (acc.get("logits"), acc.get("presents")) if isinstance(x, float)]
                    ok = acc.get("logits_ok", True) and acc.get("presents_ok", True) and acc.get("logits") is not None
                    d = f"{max(diffs):.0e}" if diffs else (acc.get("logits_note") or "?")
                    d += "" if ok else " MISMATCH"
                    if v == "builder":
                        cells.append(f"{m:.2f} ({d})")
                    else:
                        val = f"{m / bm:.3f}" if bm else f"{m:.2f} ms"
                        cells.append(f"{val} ({d})")
                order = [c for v, c in zip(TABLE_VARIANTS, cells) if v == "builder"] + \
                        [c for v, c in zip(TABLE_VARIANTS, cells) if v != "builder"]
                lines.append(f"| {row['arch']} | {label} | {f23} | {fort} | {short_level.get(lv, lv)} | {case} | "
                             + " | ".join(order) + " |")
    if notes:
        lines.append("")
        for i, n in enumerate(notes, 1):
            lines.append(f"- E{i}: {n}")
    return "\n".join(lines), notes


def versions():
    res = {}
    for mod in ("numpy", "onnx", "onnxruntime", "onnxslim", "onnxscript", "onnx_ir", "torch",
                "transformers", "onnxruntime_genai"):
        try:
            res[mod] = __import__(mod).__version__
        except Exception:
            res[mod] = None
    try:
        from importlib.metadata import version

        for dist in ("optimum", "optimum-onnx"):
            res[dist] = version(dist)
    except Exception:
        pass
    return res


def paired_summary(jsons):
    """Per variant and case, over the bench JSONs (one per export) and their levels: the median
    of the per-round ratio variant / builder (samples of one round are side by side), then the
    median and range of those over the (export, level) pairs. A markdown table."""
    per = collections.defaultdict(list)
    for path in jsons:
        with open(path) as f:
            d = json.load(f)
        samples = {(x["level"], x["case"], x["variant"]): x["ms"] for x in d["samples_ms"]}
        for (level, case, variant), ms in samples.items():
            base = samples.get((level, case, "builder"))
            if variant == "builder" or not base or len(base) != len(ms):
                continue
            per[(variant, case)].append(statistics.median(m / b for m, b in zip(ms, base)))
    variants = sorted({v for v, _ in per}, key=lambda v: TABLE_VARIANTS.index(v) if v in TABLE_VARIANTS else 99)
    lines = ["| variant | decode: median (range) | prefill: median (range) | pairs |", "|---|---|---|---|"]
    for v in variants:
        cells = []
        for case in ("decode", "prefill"):
            r = per.get((v, case), [])
            cells.append(f"{statistics.median(r):.3f} ({min(r):.3f}..{max(r):.3f})" if r else "-")
        lines.append(f"| {v} | {cells[0]} | {cells[1]} | {len(per.get((v, 'decode'), []))} |")
    return "\n".join(lines)


def cmd_summary(a):
    root = os.path.abspath(a.work)
    jsons = sorted(os.path.join(root, d, f) for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))
                   for f in os.listdir(os.path.join(root, d)) if f.startswith("bench_") and f.endswith(".json"))
    if not jsons:
        raise SystemExit(f"no ROOT/ARCH/bench_*.json under {root}")
    print(f"{len(jsons)} exports; per-round ratio to the builder, its median per (export, level), "
          "then the median and range of those:\n")
    print(paired_summary(jsons))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="random-weight HF model; Optimum and genai-builder exports")
    e.add_argument("--arch", default="llama", choices=ARCHS)
    e.add_argument("--out", required=True, help="work directory")
    e.add_argument("--builder-extra-options", metavar="K=V,K=V",
                   help="the builder's --extra_options (default: none; windowed_kv_cache=false "
                        "for " + " and ".join(SLIDING_ARCHS) + "); '' for none")
    t = sub.add_parser("export-torch", help="torch.onnx.export (TorchScript or dynamo) of WORK/hf")
    t.add_argument("--work", required=True)
    t.add_argument("--exporter", required=True, choices=TORCH_EXPORTERS)
    t.add_argument("--attn", default="eager", choices=ATTN_IMPLS,
                   help="attn_implementation the model is loaded with (default eager; sdpa writes "
                        "WORK/input_EXPORTER_sdpa)")
    t.add_argument("--opset", type=int, default=None, help="opset_version (default: the exporter's)")
    t.add_argument("--no-patches", action="store_true",
                   help="TorchScript: export without optimum-onnx's transformers workarounds (fails "
                        "with transformers 4.57.1, see the docstring)")
    p = sub.add_parser("peers", help="onnxslim and onnxscript optimize_for_ort on WORK/input")
    p.add_argument("--work", required=True)
    p.add_argument("--input", default="input", metavar="SUBDIR",
                   help="the graph to run them on: WORK/SUBDIR/model.onnx (default input, the Optimum "
                        "export); they write WORK/onnxslim_SUBDIR, WORK/onnxscript_SUBDIR (WORK/onnxslim, "
                        "WORK/onnxscript for input)")
    b = sub.add_parser("bench", help="interleaved onnxruntime timing")
    b.add_argument("--work", required=True)
    b.add_argument("--variant", action="append", metavar="NAME=PATH")
    b.add_argument("--rounds", type=int, default=15)
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--past", type=int, default=128)
    b.add_argument("--prefill", type=int, default=64)
    b.add_argument("--levels", default="all,disable", help="comma list of all, extended, basic, disable")
    b.add_argument("--reps", type=int, default=5, help="runs per measurement (their mean is the sample)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", metavar="PATH", help="where the raw figures go (default WORK/bench.json)")
    tb = sub.add_parser("table", help="every export of every arch: export, peers, onnx-opt, bench; one table")
    tb.add_argument("--work", required=True, help="root: one work directory per arch, ROOT/ARCH")
    tb.add_argument("--onnx-opt", required=True, metavar="BINARY", help="the onnx-opt executable")
    tb.add_argument("--archs", default=",".join(ARCHS), help="comma list (default all)")
    tb.add_argument("--exporters", default=",".join(TABLE_EXPORTERS), help="comma list of optimum, "
                    "torchscript, dynamo (default all)")
    tb.add_argument("--redo", default="", help="comma list of steps to run again even when their "
                    "outputs are there: export, export-torch, peers, onnxopt, bench")
    for k, v in (("rounds", 15), ("reps", 5), ("threads", 1), ("past", 128), ("prefill", 64), ("seed", 0)):
        tb.add_argument(f"--{k}", type=int, default=v, help=f"as bench's (default {v})")
    tb.add_argument("--levels", default="all,disable", help="as bench's")
    sm = sub.add_parser("summary", help="the paired ratios to the builder over ROOT/*/bench_*.json")
    sm.add_argument("--work", required=True, help="the table's root")
    a = ap.parse_args()
    {"export": cmd_export, "export-torch": cmd_export_torch, "peers": cmd_peers, "bench": cmd_bench,
     "table": cmd_table, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    main()
