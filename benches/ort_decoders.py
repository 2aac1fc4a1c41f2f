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
WORK/input/model.onnx) are added with `--variant NAME=PATH`.

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

  PY benches/ort_decoders.py peers --work WORK
      WORK/onnxslim/model.onnx    onnxslim.slim(onnx.load(WORK/input/model.onnx))
      WORK/onnxscript/model.onnx  onnxscript.rewriter.ort_fusions.optimize_for_ort(
                                  onnx_ir.load(WORK/input/model.onnx)) (it runs onnxscript's
                                  optimizer first), fusion counts in fusions.json; if it fails,
                                  the traceback goes to WORK/onnxscript/ERROR.txt.

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
      WORK/bench.json with every raw sample. A variant whose session fails to load or run is
      reported with its error text, and the rest goes on.

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
import json
import os
import random
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
# peers


def cmd_peers(a):
    work = os.path.abspath(a.work)
    src = os.path.join(work, "input", "model.onnx")
    if not os.path.exists(src):
        raise SystemExit(f"{src} missing: run export first")
    failed = []

    out_dir = os.path.join(work, "onnxslim")
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

    out_dir = os.path.join(work, "onnxscript")
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
    with open(os.path.join(work, "bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {os.path.join(work, 'bench.json')}")


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="random-weight HF model; Optimum and genai-builder exports")
    e.add_argument("--arch", default="llama", choices=ARCHS)
    e.add_argument("--out", required=True, help="work directory")
    e.add_argument("--builder-extra-options", metavar="K=V,K=V",
                   help="the builder's --extra_options (default: none; windowed_kv_cache=false "
                        "for " + " and ".join(SLIDING_ARCHS) + "); '' for none")
    p = sub.add_parser("peers", help="onnxslim and onnxscript optimize_for_ort on WORK/input")
    p.add_argument("--work", required=True)
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
    a = ap.parse_args()
    {"export": cmd_export, "peers": cmd_peers, "bench": cmd_bench}[a.cmd](a)


if __name__ == "__main__":
    main()
