#!/usr/bin/env python3
"""Optimize time of one or two onnx-opt binaries on the development models, side by side.

Runs `BIN optimize MODEL -o OUT --check 0 --report R.json` on every `model.onnx` under --models,
`--repeat` times per binary, alternating the binaries so that both see the same machine noise,
and prints per model the median of the report's `optimize_ms` (the optimizer alone: no load, no
save, no check), the ratio of the two medians, and whether the two binaries wrote the same bytes
(a restructuring must not change any output). Pure standard library: no venv needed.

    python3 benches/optimize_time.py --bin target/release/onnx-opt
    python3 benches/optimize_time.py --bin /tmp/onnx-opt-before --bin target/release/onnx-opt
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, model, out, report, extra):
    cmd = [binary, "optimize", model, "-o", out, "--check", "0", "--report", report] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr.strip().splitlines()[-1:] or ["failed"]
    with open(report) as f:
        ms = json.load(f)["optimize_ms"]
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return ms, digest, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", action="append", required=True, help="binary (give one or two)")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--models", default=os.path.join(here, "..", "..", "shared", "models"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="model directory names to run")
    ap.add_argument("extra", nargs="*", help="more arguments for `optimize` (after --)")
    args = ap.parse_args()
    names = sorted(
        d for d in os.listdir(args.models)
        if os.path.isfile(os.path.join(args.models, d, "model.onnx"))
        and (not args.only or d in args.only)
    )
    tmp = tempfile.mkdtemp(prefix="optimize-time-")
    head = f"{'model':28}" + "".join(f"{'bin' + str(i) + ' ms':>12}" for i in range(len(args.bin)))
    if len(args.bin) == 2:
        head += f"{'ratio':>8}  same bytes"
    print(head)
    ratios, differ = [], 0
    for name in names:
        model = os.path.join(args.models, name, "model.onnx")
        times = [[] for _ in args.bin]
        digests = [set() for _ in args.bin]
        errors = [None for _ in args.bin]
        for _ in range(args.repeat):
            for i, b in enumerate(args.bin):
                out = os.path.join(tmp, f"{name}.{i}.onnx")
                ms, digest, err = run(b, model, out, os.path.join(tmp, f"r{i}.json"), args.extra)
                if err:
                    errors[i] = err[0]
                    continue
                times[i].append(ms)
                digests[i].add(digest)
        line = f"{name:28}"
        for i in range(len(args.bin)):
            line += f"{statistics.median(times[i]):12.1f}" if times[i] else f"{'error':>12}"
        if len(args.bin) == 2 and all(times):
            r = statistics.median(times[1]) / statistics.median(times[0])
            ratios.append(r)
            same = digests[0] == digests[1] and len(digests[0]) == 1
            differ += not same
            line += f"{r:8.3f}  {'yes' if same else 'NO'}"
        print(line, flush=True)
        for i, e in enumerate(errors):
            if e:
                print(f"    bin{i}: {e}")
    if ratios:
        print(f"median ratio bin1/bin0: {statistics.median(ratios):.3f}; models whose output differs: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
