#!/usr/bin/env python3
"""Export tiny encoders of three transformers architectures (BERT, ModernBERT, DeBERTa-v2)
through Hugging Face Optimum's ONNX exporter, as a user running

    optimum-cli export onnx --model DIR --task feature-extraction OUT

gets them: `optimum.exporters.onnx.main_export(DIR, OUT, task="feature-extraction")` with every
other argument at its default (optimum's default opset, post-processing on, validation on, the
attention implementation transformers picks when loading DIR).

Each model is built from a config (hidden 32, 4 heads, head size 8, 2 layers, intermediate 48,
vocab 64, 64 positions) with random weights under a fixed seed, every 1-D parameter (norm
weights, biases) moved off 0 and 1 by adding uniform 0.05..0.25 noise (random initialization
leaves them exact, which would reward rewrites that are only right for those values), saved
with `save_pretrained` to a temporary folder (no tokenizer: main_export does not need one) and
exported from there. No hub access: nothing is downloaded.

Writes, in the layout of the ONNX backend test data, OUT_DIR/ARCH_optimum/model.onnx (one file,
no external data) and test_data_set_0/input_N.pb, output_N.pb in graph input / output order:
batch 2, 7 tokens, the second sample right-padded by two positions (attention_mask 0 there),
token_type_ids (where the graph takes them) 0 then 1; the outputs onnxruntime's (CPU, 1 thread,
graph optimizations off), after checking that onnxruntime's last hidden state matches torch's
on the unpadded positions.

usage: target/venv-optimum/bin/python scripts/export_optimum_encoders.py OUT_DIR [--only NAME ...]
       (scripts/setup_optimum_venv.sh creates the venv)
       NAME: bert modernbert deberta_v2
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

HIDDEN = 32
HEADS = 4
LAYERS = 2
INTER = 48
VOCAB = 64
POSITIONS = 64

BATCH = 2
SEQ = 7
PAD = 2


def configs():
    """name -> (config class, model class, config kwargs)."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        max_position_embeddings=POSITIONS,
    )
    return {
        "bert": (transformers.BertConfig, transformers.BertModel, dict(common)),
        # global attention on every layer (ModernBERT alternates local and global by default)
        "modernbert": (
            transformers.ModernBertConfig,
            transformers.ModernBertModel,
            dict(common, global_attn_every_n_layers=1, pad_token_id=0),
        ),
        "deberta_v2": (
            transformers.DebertaV2Config,
            transformers.DebertaV2Model,
            dict(common, type_vocab_size=2, relative_attention=True, position_buckets=8),
        ),
    }


def perturb(model, gen):
    """Adds uniform 0.05..0.25 noise to every 1-D parameter (norm weights, biases)."""
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.rand(p.shape, generator=gen) * 0.2 + 0.05)


def example(graph_inputs, gen):
    """The stored inputs, by graph input name (numpy, the graph's dtypes)."""
    ids = torch.randint(1, VOCAB, (BATCH, SEQ), generator=gen)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, SEQ - PAD :] = 0  # right padding of the second sample
    types = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    types[:, SEQ // 2 :] = 1
    feeds = {}
    for inp in graph_inputs:
        name = inp.name
        dtype = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        if name == "input_ids":
            t = ids
        elif name == "attention_mask":
            t = mask
        elif name == "token_type_ids":
            t = types
        else:
            raise RuntimeError(f"unexpected graph input {name}")
        feeds[name] = t.numpy().astype(dtype)
    return feeds


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

    main_export(model_name_or_path=src, output=exported, task="feature-extraction")
    produced = sorted(os.listdir(exported))
    if "model.onnx" not in produced:
        raise RuntimeError(f"{name}: no model.onnx among {produced}")

    d = os.path.join(out_dir, f"{name}_optimum")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    m = onnx.load(os.path.join(exported, "model.onnx"))  # pulls in external data, if any
    onnx.checker.check_model(m, full_check=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)  # one file

    feeds = example(m.graph.input, gen)
    outs = ort_run(path, feeds)

    # torch reference: the model loaded from the saved folder the way optimum loads it
    ref_model = transformers.AutoModel.from_pretrained(src).eval()
    attn = ref_model.config._attn_implementation
    kw = {k: torch.from_numpy(v) for k, v in feeds.items()}
    with torch.no_grad():
        ref = ref_model(**kw).last_hidden_state.numpy()
    keep = feeds["attention_mask"].astype(bool)
    diff = float(np.abs(outs[0][keep] - ref[keep]).max())
    print(f"{name}: max |last_hidden_state ort - torch({attn})| = {diff:.3g} (unpadded positions)")
    if diff > 1e-4:
        shutil.rmtree(d)
        raise RuntimeError(f"{name}: onnxruntime differs from torch by {diff}")

    for i, inp in enumerate(m.graph.input):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())

    ops = collections.Counter(n.op_type for n in m.graph.node)
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in m.opset_import)
    print(f"### {name}_optimum ({model_cls.__name__}, attn_implementation={attn})")
    print(f"- optimum wrote: {', '.join(produced)}")
    print(f"- model.onnx: {os.path.getsize(path)} bytes, {len(m.graph.node)} nodes, opset {opsets}")
    print(f"- inputs: {'; '.join(describe_value(v) for v in m.graph.input)}")
    print(f"- outputs: {'; '.join(describe_value(v) for v in m.graph.output)}")
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
