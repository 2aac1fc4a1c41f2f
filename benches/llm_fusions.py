#!/usr/bin/env python3
"""onnxruntime latency of a decoder optimized with and without `--target-opset 23`, side by side.

usage: PYTHON benches/llm_fusions.py [--onnx-opt BIN] [--preset P] [--layers N] [--runs R]
                                     [--styles dynamo,torchscript] [--dtypes float32,float16]
                                     [--work DIR]

PYTHON is a venv with the pinned packages below (the generator's venv has them: numpy, onnx,
ml_dtypes for scripts/gen_decoder.py, and onnxruntime):

    numpy==2.*  onnx==1.23.2  ml_dtypes  onnxruntime==1.31.1

For each style and dtype it generates the decoder (scripts/gen_decoder.py; TorchScript at opset
17, dynamo at 18), optimizes it twice with onnx-opt (the default pipeline and check; `fused`
adds `--target-opset 23`, which lets the RMSNormalization, RotaryEmbedding and Attention rules
fire; `unfused` lands at the model's own opset), then times both in onnxruntime on the CPU with
one thread, graph optimizations off (ORT_DISABLE_ALL) and on (ORT_ENABLE_ALL, the default), for
a decode step (batch 1, sequence 1, past 16) and a prefill (batch 1, sequence 32, past 0).
Each case runs R rounds alternating the two sessions, so load changes hit both alike, and prints
the medians side by side with the ratio fused / unfused (below 1: the fused model is faster).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return res.stdout + res.stderr


def feeds(path, seq, past, rng):
    m = onnx.load(path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    out = {}
    for i in m.graph.input:
        if i.name in init:
            continue
        t = i.type.tensor_type
        dt = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if i.name == "input_ids":
            out[i.name] = rng.integers(0, 100, (1, seq)).astype(dt)
        elif i.name == "attention_mask":
            out[i.name] = np.ones((1, past + seq), dt)
        elif i.name == "position_ids":
            out[i.name] = np.arange(past, past + seq, dtype=dt)[None, :]
        elif i.name.startswith("past_key_values"):
            dims = [d.dim_value for d in t.shape.dim]
            out[i.name] = rng.standard_normal((1, dims[1], past, dims[3])).astype(dt)
        else:
            sys.exit(f"unexpected input {i.name}")
    return out


def session(path, level):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.inter_op_num_threads = 1
    o.graph_optimization_level = level
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def ops(path):
    m = onnx.load(path, load_external_data=False)
    fused = {"RMSNormalization", "RotaryEmbedding", "Attention"}
    counts = {}
    for n in m.graph.node:
        if n.op_type in fused:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return len(m.graph.node), counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx-opt", default=os.path.join(ROOT, "target/release/onnx-opt"))
    ap.add_argument("--preset", default="tinyllama-1.1b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--styles", default="dynamo,torchscript")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--work", default="/tmp/llm_fusions")
    a = ap.parse_args()
    print(f"onnxruntime {ort.__version__}, {a.preset} with {a.layers} layers, medians of {a.runs} runs")
    levels = [("off", ort.GraphOptimizationLevel.ORT_DISABLE_ALL), ("on", ort.GraphOptimizationLevel.ORT_ENABLE_ALL)]
    phases = [("decode s=1 p=16", 1, 16), ("prefill s=32 p=0", 32, 0)]
    for style in a.styles.split(","):
        opset = "17" if style == "torchscript" else "18"
        for dtype in a.dtypes.split(","):
            d = os.path.join(a.work, f"{style}-{dtype}")
            src = os.path.join(d, "model.onnx")
            if not os.path.exists(src):
                run([sys.executable, os.path.join(ROOT, "scripts/gen_decoder.py"), "--preset", a.preset,
                     "--layers", str(a.layers), "--style", style, "--opset", opset, "--dtype", dtype, "--out", src])
            models = {}
            for name, extra in [("unfused", []), ("fused", ["--target-opset", "23"])]:
                out = os.path.join(d, name, "model.onnx")
                os.makedirs(os.path.dirname(out), exist_ok=True)
                if not os.path.exists(out):
                    run([a.onnx_opt, "optimize", src, "-o", out, "-q"] + extra)
                models[name] = out
            (nu, _), (nf, fo) = ops(models["unfused"]), ops(models["fused"])
            print(f"\n{style} {dtype}: nodes unfused {nu}, fused {nf} {fo}")
            for lname, level in levels:
                sess = {k: session(p, level) for k, p in models.items()}
                for pname, seq, past in phases:
                    fd = feeds(models["unfused"], seq, past, np.random.default_rng(0))
                    times = {k: [] for k in sess}
                    for s in sess.values():
                        s.run(None, fd)
                    for _ in range(a.runs):
                        for k, s in sess.items():
                            t0 = time.perf_counter()
                            s.run(None, fd)
                            times[k].append(time.perf_counter() - t0)
                    mu, mf = (statistics.median(times[k]) * 1e3 for k in ("unfused", "fused"))
                    print(f"  ORT opt {lname:3s} {pname:17s} unfused {mu:9.2f} ms  fused {mf:9.2f} ms  ratio {mf / mu:.3f}")


if __name__ == "__main__":
    main()
