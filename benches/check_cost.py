#!/usr/bin/env python3
"""What the default check costs: optimize every development model with `--check 0` and with
`--check 3`, side by side, and print the median wall time of each, the check's own time (from
`--report`), and the ratio. Standard library only.

    python3 benches/check_cost.py [--models ../shared/models] [--repeat 3] [--binary target/release/onnx-opt]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(binary, model, out, check, report):
    t0 = time.perf_counter()
    p = subprocess.run(
        [binary, "optimize", model, "-o", out, "--check", str(check), "--report", report,
         "--dim", "batch=1", "--dim", "sequence=16"],
        capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{model}: onnx-opt failed:\n{p.stderr}")
    with open(report) as f:
        r = json.load(f)
    return wall * 1e3, r["check_ms"], r["optimize_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "../../shared/models"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--binary", default="target/release/onnx-opt")
    a = ap.parse_args()
    names = sorted(d for d in os.listdir(a.models) if os.path.isfile(os.path.join(a.models, d, "model.onnx")))
    print(f"{'model':<28} {'wall --check 0':>15} {'wall --check 3':>15} {'check ms':>10} {'optimize ms':>12} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        out, report = os.path.join(tmp, "out.onnx"), os.path.join(tmp, "r.json")
        for name in names:
            model = os.path.join(a.models, name, "model.onnx")
            off, on, check, opt = [], [], [], []
            for _ in range(a.repeat):
                w, _, o = run(a.binary, model, out, 0, report)
                off.append(w)
                opt.append(o)
                w, c, _ = run(a.binary, model, out, 3, report)
                on.append(w)
                check.append(c)
            m_off, m_on = statistics.median(off), statistics.median(on)
            print(f"{name:<28} {m_off:>13.0f}ms {m_on:>13.0f}ms {statistics.median(check):>10.0f} "
                  f"{statistics.median(opt):>12.0f} {m_on / m_off:>6.2f}")


if __name__ == "__main__":
    main()
