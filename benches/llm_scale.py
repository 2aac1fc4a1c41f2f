#!/usr/bin/env python3
"""Optimizes one large model with onnx-opt and the peers, side by side in one run, and reports
each tool's wall time, peak resident and anonymous memory (sampled from /proc by measure.py),
the output's node count, or how the tool failed.

usage: benches/llm_scale.py MODEL.onnx [--onnx-opt PATH] [--peers-python PATH] [--out DIR]
                            [--tools onnx-opt,onnx-opt-check0,onnxsim,onnxslim,ort-basic]

MODEL is typically made by scripts/gen_decoder.py (weights in external data). The peers run
from the venv of scripts/setup_venv.sh (pinned in scripts/requirements-peers.txt): onnxsim and
onnxslim through their command lines, onnxruntime's basic level by writing
`optimized_model_filepath`. Every output goes to its own directory under --out (default: a
directory beside MODEL), deleted after its nodes are counted. Prints one table row per tool.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure  # noqa: E402


def run_measured(command, log):
    """Runs `command`, sampling its memory; returns the report dict and the stderr tail."""
    start = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        peak = {"VmHWM": 0, "RssAnon": 0}
        while proc.poll() is None:
            s = measure.status_kib(proc.pid)
            for k in peak:
                peak[k] = max(peak[k], s.get(k, 0))
            time.sleep(0.05)
    with open(log) as f:
        tail = [line.strip() for line in f if line.strip()][-1:] or [""]
    return {
        "wall_s": round(time.monotonic() - start, 1),
        "exit": proc.returncode,
        "peak_rss_mib": round(peak["VmHWM"] / 1024),
        "peak_anon_mib": round(peak["RssAnon"] / 1024),
    }, tail[0]


def count_nodes(python, path):
    """Nodes of a saved model's main graph (external data not loaded), counted by onnx."""
    code = (
        "import onnx,sys;m=onnx.load(sys.argv[1],load_external_data=False);"
        "print(len(m.graph.node))"
    )
    out = subprocess.run([python, "-c", code, path], capture_output=True, text=True)
    return int(out.stdout.strip()) if out.returncode == 0 else None


ORT_BASIC = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
so.optimized_model_filepath = sys.argv[2]
so.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                            "model.onnx.data")
so.add_session_config_entry(
    "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--onnx-opt", default="target/release/onnx-opt")
    parser.add_argument("--peers-python", default="target/venv-peers/bin/python")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--tools", default="onnx-opt,onnx-opt-check0,onnxsim,onnxslim,ort-basic"
    )
    args = parser.parse_args()
    out_root = args.out or os.path.join(os.path.dirname(os.path.abspath(args.model)), "bench-out")
    peers_bin = os.path.dirname(args.peers_python)
    tools = {
        "onnx-opt": lambda o: [args.onnx_opt, args.model, "-o", o, "-q"],
        "onnx-opt-check0": lambda o: [args.onnx_opt, args.model, "-o", o, "-q", "--check", "0"],
        "onnxsim": lambda o: [
            os.path.join(peers_bin, "onnxsim"), args.model, o, "--save-as-external-data"
        ],
        "onnxslim": lambda o: [os.path.join(peers_bin, "onnxslim"), args.model, o],
        "ort-basic": lambda o: [args.peers_python, "-c", ORT_BASIC, args.model, o],
    }
    before = count_nodes(args.peers_python, args.model)
    print(f"{args.model}: {before} nodes")
    print(f"{'tool':<16} {'wall s':>8} {'peak RSS MiB':>13} {'peak anon MiB':>14} {'nodes':>7}  note")
    for name in args.tools.split(","):
        out_dir = os.path.join(out_root, name)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        out = os.path.join(out_dir, "model.onnx")
        report, tail = run_measured(tools[name](out), os.path.join(out_root, name + ".log"))
        nodes = count_nodes(args.peers_python, out) if report["exit"] == 0 and os.path.exists(out) else None
        note = "" if report["exit"] == 0 else f"exit {report['exit']}: {tail[:120]}"
        print(
            f"{name:<16} {report['wall_s']:>8} {report['peak_rss_mib']:>13} "
            f"{report['peak_anon_mib']:>14} {str(nodes):>7}  {note}",
            flush=True,
        )
        print(json.dumps({"tool": name, "nodes": nodes, **report}), file=sys.stderr)
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
