#!/usr/bin/env python3
"""Model I/O throughput: `onnx-opt copy` against onnx's Python load + save, side by side.

For MODEL (a .onnx file, with its external data if any), run N times each, interleaved:

  onnx-opt   onnx-opt copy MODEL -o OUT
  python     python -c 'import onnx; onnx.save(onnx.load(A), B)'

and report the median wall time of the whole subprocess, MB/s (bytes of the model and its
external data over that time), peak RSS (ru_maxrss of each child, read by a small launcher),
and whether OUT is byte-identical to MODEL. The python row's time includes interpreter start
and `import onnx`; a second python row (python load+save) gives the time measured inside the
child, around load and save only.
Finally the peak RSS of `onnx-opt info MODEL` relative to the file size: with zero-copy loading
(mmap) it should stay near the binary's own baseline, well under the file size.

  target/venv-peers/bin/python benches/io_throughput.py ../shared/models/resnet18-opset13/model.onnx

Exit status: 0 when the measurements ran, 1 when a command failed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_peers import (  # noqa: E402
    DEFAULT_ONNX_OPT,
    choose_rss_probe,
    failure_text,
    last_json_line,
    model_bytes,
    rss_floor_kb,
    run_child,
)

PYTHON_COPY = r"""
import sys, time, json
t0 = time.perf_counter()
import onnx
t1 = time.perf_counter()
m = onnx.load(sys.argv[1])
t2 = time.perf_counter()
onnx.save(m, sys.argv[2])
t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3,
                  "save_ms": (t3 - t2) * 1e3}))
"""


def same_bytes(a: Path, b: Path) -> bool:
    if not b.is_file() or a.stat().st_size != b.stat().st_size:
        return False
    with a.open("rb") as fa, b.open("rb") as fb:
        while True:
            chunk_a, chunk_b = fa.read(1 << 20), fb.read(1 << 20)
            if chunk_a != chunk_b:
                return False
            if not chunk_a:
                return True


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the .onnx file to copy")
    parser.add_argument("--onnx-opt", type=Path, default=DEFAULT_ONNX_OPT,
                        help="onnx-opt binary (default: %(default)s)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with onnx (default: this one, %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per command (default 5)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per child")
    parser.add_argument("--rss-probe", choices=("auto", "gnu-time", "python"), default="auto",
                        help="launcher that measures peak RSS (default: GNU time if installed)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not args.model.is_file():
        print(f"error: {args.model} is not a file", file=sys.stderr)
        return 2
    model = args.model.resolve()
    args.rss_probe = choose_rss_probe(args.rss_probe)
    floor_mb = rss_floor_kb(args.rss_probe) / 1024.0
    size = model_bytes(model)
    have_onnx_opt = args.onnx_opt.is_file() and os.access(args.onnx_opt, os.X_OK)
    if not have_onnx_opt:
        print(f"onnx-opt: binary not found at {args.onnx_opt} (build it with `cargo build "
              "--release` or pass --onnx-opt PATH); measuring python only", file=sys.stderr)

    runs: dict[str, dict] = {}
    if have_onnx_opt:
        runs["onnx-opt copy"] = {"wall_ms": [], "rss_kb": [], "identical": set()}
    runs["python onnx"] = {"wall_ms": [], "rss_kb": [], "identical": set()}
    inner_ms: list[float] = []
    failures: dict[str, str] = {}

    work = Path(tempfile.mkdtemp(prefix="io-throughput-"))
    try:
        for _ in range(args.repeat):
            for name, record in runs.items():
                if name in failures:
                    continue
                out_dir = work / name.replace(" ", "-")
                shutil.rmtree(out_dir, ignore_errors=True)
                out_dir.mkdir()
                out = out_dir / model.name
                if name == "onnx-opt copy":
                    cmd = [str(args.onnx_opt), "copy", str(model), "-o", str(out)]
                else:
                    cmd = [args.python, "-c", PYTHON_COPY, str(model), str(out)]
                child = run_child(cmd, args.timeout, args.rss_probe)
                if child.returncode != 0 or child.timed_out:
                    failures[name] = failure_text(child, args.timeout)
                    continue
                record["wall_ms"].append(child.wall_ms)
                record["rss_kb"].append(child.peak_rss_kb)
                record["identical"].add(same_bytes(model, out))
                if name == "python onnx":
                    timing = last_json_line(child.stdout)
                    if timing:
                        inner_ms.append(timing["load_ms"] + timing["save_ms"])

        info = None
        if have_onnx_opt:
            child = run_child([str(args.onnx_opt), "info", str(model)], args.timeout,
                              args.rss_probe)
            if child.returncode != 0 or child.timed_out:
                failures["onnx-opt info"] = failure_text(child, args.timeout)
            else:
                info = {"peak_rss_mb": child.peak_rss_kb / 1024.0,
                        "rss_over_size": child.peak_rss_kb * 1024.0 / size,
                        "wall_ms": child.wall_ms}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    mb = size / 1e6
    print(f"model: {model} ({mb:.2f} MB with external data), runs: {args.repeat} each, "
          f"interleaved; peak RSS via {args.rss_probe} (floor {floor_mb:.1f} MB)")
    print()
    print("| command | median wall ms | MB/s | peak RSS MB | RSS / size | output == input |")
    print("|---|---|---|---|---|---|")
    results = {}
    for name, record in runs.items():
        if not record["wall_ms"]:
            continue
        wall = statistics.median(record["wall_ms"])
        rss_mb = max(record["rss_kb"]) / 1024.0
        identical = "yes" if record["identical"] == {True} else "no"
        print(f"| {name} | {wall:.1f} | {mb / (wall / 1e3):.1f} | {rss_mb:.1f} "
              f"| {rss_mb * 1024 * 1024 / size:.2f} | {identical} |")
        results[name] = {"median_wall_ms": wall, "mb_per_s": mb / (wall / 1e3),
                         "peak_rss_mb": rss_mb, "wall_ms_all": record["wall_ms"],
                         "output_identical": record["identical"] == {True}}
    if inner_ms:
        inner = statistics.median(inner_ms)
        print(f"| python load+save (in-process) | {inner:.1f} | {mb / (inner / 1e3):.1f} "
              "| - | - | - |")
        results["python load+save (in-process)"] = {"median_wall_ms": inner,
                                                    "mb_per_s": mb / (inner / 1e3)}
    if info:
        print()
        print(f"onnx-opt info: peak RSS {info['peak_rss_mb']:.1f} MB = "
              f"{info['rss_over_size']:.2f} x file size, {info['wall_ms']:.1f} ms")
        results["onnx-opt info"] = info
    for name, why in failures.items():
        print(f"\nFAILED {name}: {why}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"model": str(model), "bytes": size,
                                         "repeat": args.repeat, "results": results,
                                         "rss_probe": args.rss_probe,
                                         "rss_floor_mb": floor_mb,
                                         "failures": failures,
                                         "onnx_opt_found": have_onnx_opt},
                                        indent=2, sort_keys=True) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
