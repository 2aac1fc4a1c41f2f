#!/usr/bin/env python3
"""Export tiny decoders of five transformers architectures (Llama, Qwen2, Mistral, Phi-3,
Gemma) with a KV cache, through torch's TorchScript exporter (`dynamo=False`) and its dynamo
exporter (`dynamo=True`), as users export them: `input_ids`, `attention_mask`, `position_ids`
and `past_key_values.N.key/value` in; `logits` and `present.N.key/value` out; dynamic batch,
sequence and past lengths.

The weights are random under a fixed seed, and every norm weight and bias is moved away from
0 and 1 (random initialization leaves them exact, which would reward rewrites that are only
right for those values).

Also a ViT and a ConvNeXt image classifier (biases and norms perturbed the same way) through
the TorchScript exporter at opsets 14 and 17.

Writes, in the layout of the ONNX backend test data, OUT_DIR/NAME_STYLE_opsetK/model.onnx (one
file, no external data) and test_data_set_0/input_N.pb, output_N.pb: one input set and
onnxruntime's outputs (CPU, 1 thread, graph optimizations off), after checking that
onnxruntime's first output matches torch's.

usage: DIR/bin/python scripts/export_hf_decoders.py OUT_DIR [--only NAME ...]
       (scripts/setup_torch_venv.sh DIR creates the venv, with transformers 4.46.3)
       tests/models/hf was written with OUT_DIR = tests/models/hf
"""

import argparse
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import transformers
from transformers import DynamicCache

HIDDEN = 32
HEADS = 4
KV_HEADS = 2
LAYERS = 2
INTER = 48
VOCAB = 64


def configs():
    common = dict(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(common)),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, dict(common)),
        "mistral": (
            transformers.MistralConfig,
            transformers.MistralForCausalLM,
            dict(common, sliding_window=None),
        ),
        "phi3": (
            transformers.Phi3Config,
            transformers.Phi3ForCausalLM,
            dict(common, pad_token_id=0, partial_rotary_factor=1.0),
        ),
        "gemma": (
            transformers.GemmaConfig,
            transformers.GemmaForCausalLM,
            dict(common, head_dim=HIDDEN // HEADS),
        ),
        # eager attention with attention logit softcapping (transformers' sdpa drops it); a cap
        # of 5 changes these small random scores visibly (the default, 50, would leave them
        # almost as they are); no sliding window within these lengths, no final logit softcapping
        "gemma2": (
            transformers.Gemma2Config,
            transformers.Gemma2ForCausalLM,
            dict(
                common,
                head_dim=HIDDEN // HEADS,
                query_pre_attn_scalar=HIDDEN // HEADS,
                attn_logit_softcapping=5.0,
                final_logit_softcapping=None,
                sliding_window=64,
                cache_implementation=None,
            ),
        ),
    }


class Flat(torch.nn.Module):
    """The model with flat tensor inputs and outputs (what both exporters take)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache()
        for i in range(LAYERS):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
        )
        present = []
        kv = out.past_key_values
        for i in range(LAYERS):
            layer = kv.layers[i] if hasattr(kv, "layers") else None
            if layer is not None:
                present += [layer.keys, layer.values]
            else:
                present += [kv.key_cache[i], kv.value_cache[i]]
        return (out.logits, *present)


def perturb(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.rand(p.shape, generator=gen) * 0.2 + 0.05)


def example(gen, batch=2, seq=3, past=4):
    head_dim = HIDDEN // HEADS
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen)
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    mask[0, :2] = 0
    pos = (torch.arange(seq) + past).unsqueeze(0).expand(batch, seq).contiguous()
    pasts = []
    for _ in range(LAYERS):
        pasts.append(torch.randn(batch, KV_HEADS, past, head_dim, generator=gen))
        pasts.append(torch.randn(batch, KV_HEADS, past, head_dim, generator=gen))
    return ids, mask, pos, pasts


def names():
    ins = ["input_ids", "attention_mask", "position_ids"]
    outs = ["logits"]
    for i in range(LAYERS):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outs += [f"present.{i}.key", f"present.{i}.value"]
    return ins, outs


def export_torchscript(flat, args, path, opset):
    ins, outs = names()
    axes = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "seq"},
        "logits": {0: "batch", 1: "seq"},
    }
    for i in range(LAYERS):
        for kind in ("key", "value"):
            axes[f"past_key_values.{i}.{kind}"] = {0: "batch", 2: "past"}
            axes[f"present.{i}.{kind}"] = {0: "batch", 2: "total"}
    torch.onnx.export(
        flat,
        args,
        path,
        dynamo=False,
        opset_version=opset,
        input_names=ins,
        output_names=outs,
        dynamic_axes=axes,
        do_constant_folding=True,
    )


def export_dynamo(flat, args, path, opset):
    ins, outs = names()
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=1, max=64)
    past = torch.export.Dim("past", min=1, max=64)
    total = torch.export.Dim("total", min=2, max=128)
    dyn = [{0: batch, 1: seq}, {0: batch, 1: total}, {0: batch, 1: seq}]
    dyn.append(tuple({0: batch, 2: past} for _ in range(2 * LAYERS)))
    program = torch.onnx.export(
        flat,
        args,
        dynamo=True,
        opset_version=opset,
        input_names=ins,
        output_names=outs,
        dynamic_shapes=dyn,
        external_data=False,
    )
    program.save(path)


def vision():
    """(name, model, example input) of the two image classifiers."""
    vit = transformers.ViTForImageClassification(
        transformers.ViTConfig(
            image_size=32,
            patch_size=8,
            num_channels=3,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            num_labels=10,
        )
    )
    convnext = transformers.ConvNextForImageClassification(
        transformers.ConvNextConfig(
            num_channels=3,
            patch_size=4,
            hidden_sizes=[16, 32],
            depths=[1, 1],
            num_stages=2,
            num_labels=10,
        )
    )
    return [("vit", vit), ("convnext", convnext)]


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits


def write_case(out, name, path_onnx, feeds, reference):
    """Moves the exported model to OUT/NAME/model.onnx with its test data (onnxruntime's
    outputs, checked against torch's first output)."""
    import onnxruntime as ort
    from onnx import numpy_helper

    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    m = onnx.load(path_onnx)
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    os.remove(path_onnx)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"), opts)
    names = [i.name for i in m.graph.input]
    feeds = {k: v for k, v in zip(names, feeds)}
    outs = sess.run(None, feeds)
    diff = float(np.abs(outs[0] - reference).max())
    if diff > 1e-4:
        raise RuntimeError(f"{name}: onnxruntime differs from torch by {diff}")
    for i, k in enumerate(names):
        t = numpy_helper.from_array(feeds[k], k)
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for i, (o, v) in enumerate(zip(m.graph.output, outs)):
        with open(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())
    print(f"{name}: {len(m.graph.node)} nodes, {os.path.getsize(os.path.join(d, 'model.onnx'))} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*")
    ap.add_argument(
        "--opset",
        type=int,
        default=17,
        help="the TorchScript exports' opset (dynamo writes opset 18 or this, whichever is higher)",
    )
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name, (cfg_cls, model_cls, kw) in configs().items():
        if a.only and name not in a.only:
            continue
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(1)
        model = model_cls(cfg_cls(**kw)).eval()
        perturb(model, gen)
        flat = Flat(model).eval()
        ids, mask, pos, pasts = example(gen)
        args = (ids, mask, pos, *pasts)
        with torch.no_grad():
            ref = flat(*args)
        feeds = [t.numpy() for t in args]
        for style, fn in (("torchscript", export_torchscript), ("dynamo", export_dynamo)):
            opset = a.opset if style == "torchscript" else max(a.opset, 18)
            case = f"{name}_{style}_opset{opset}"
            path = os.path.join(a.out, case + ".tmp.onnx")
            try:
                with torch.no_grad():
                    fn(flat, args, path, opset)
                write_case(a.out, case, path, feeds, ref[0].numpy())
            except Exception as e:  # report and go on with the next
                if os.environ.get("TRACE"):
                    raise
                print(f"{case}: FAILED {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
    for name, model in vision():
        if a.only and name not in a.only:
            continue
        torch.manual_seed(0)
        gen = torch.Generator().manual_seed(2)
        model.eval()
        perturb(model, gen)
        flat = Logits(model).eval()
        x = torch.randn(2, 3, 32, 32, generator=gen)
        with torch.no_grad():
            ref = flat(x).numpy()
        for opset in (14, 17):
            case = f"{name}_torchscript_opset{opset}"
            path = os.path.join(a.out, case + ".tmp.onnx")
            with torch.no_grad():
                torch.onnx.export(
                    flat,
                    (x,),
                    path,
                    dynamo=False,
                    opset_version=opset,
                    input_names=["pixel_values"],
                    output_names=["logits"],
                    dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}},
                )
            write_case(a.out, case, path, [x.numpy()], ref)


if __name__ == "__main__":
    main()
