#!/usr/bin/env python3
"""The Python API side by side: `onnx_opt.optimize(model)` against `onnxsim.simplify(model)` and
`onnxslim.slim(model)` on large models, each call in a fresh Python process.

For every model (default: bert-base.onnx and resnet50.onnx from benches/gen_bench_models.py)
and every tool

  onnx-opt          onnx_opt.optimize(model)           its check on (the default, 3 trials)
  onnx-opt-check0   onnx_opt.optimize(model, check=0)  its check off
  onnxsim           onnxsim.simplify(model)            returns (model, ok)
  onnxslim          onnxslim.slim(model)

it runs --repeat rounds (default 5). A round runs every tool once, each in a fresh child Python
(DRIVER below: imports the tool, `onnx.load`s the model, times the call alone with
time.perf_counter, saves nothing, prints one JSON line), round-robin (the order rotates by one
each round) so that a change of load on the machine hits every tool alike. Per model and tool:

  seconds        median over the rounds of the optimize call (the model already loaded; for
                 onnx-opt this includes its serialization of the ModelProto in and out)
  peak RSS       median of the child's peak RSS (ru_maxrss), read by a small launcher, GNU time
                 or a minimal Python, as in compare_peers.py (run_child): a child's ru_maxrss
                 starts from the high-water mark of the process it was forked from
  nodes          top-level nodes before -> after, counted by the driver with onnx
  / check0       the tool's median seconds over onnx-opt-check0's
  check ms       onnx-opt only: median of its report's check_ms (the check's own time)
  outputs        after round 1, one more child per tool runs the tool again and saves the result
                 (not timed: saving would change the peak RSS), and onnxruntime (graph
                 optimizations off, 1 thread) runs the original and the result on one seeded
                 random input (batch 1, seq 16 for BERT): `equal` within --rtol/--atol (default
                 1e-3 / 1e-4, integers exact), else `NOT EQUAL` with the first difference

Also per model and tool, in the same rounds, a floor driver that imports the tool and loads the
model and does nothing else: its median time and peak RSS show what the optimize call adds
(the `+RSS over floor` column). Failures (an exception, a crash, --timeout) are results: the
row says why, the script goes on.

  $PY benches/gen_bench_models.py            # target/bench-models, ~1 min
  $PY benches/python_api.py                  # target/python-api-bench
  $PY benches/python_api.py --repeat 3 --tools onnx-opt-check0 onnxsim \\
      --models DIR --python /other/venv/bin/python --out DIR

Writes OUT/results.md (the tables) and OUT/results.json (every run, versions, settings). Exit
status: 0 when the runs were done (a tool's failure is a result), 2 on bad arguments or missing
models, or when --python lacks onnx.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_peers import (  # noqa: E402
    choose_rss_probe,
    failure_text,
    last_json_line,
    rss_floor_kb,
    run_child,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = REPO_ROOT / "target" / "bench-models"
DEFAULT_OUT = REPO_ROOT / "target" / "python-api-bench"
MODEL_FILES = ("bert-base.onnx", "resnet50.onnx")
TOOLS = ("onnx-opt", "onnx-opt-check0", "onnxsim", "onnxslim")
LABELS = {"onnx-opt": "onnx-opt (check on)", "onnx-opt-check0": "onnx-opt (check=0)",
          "onnxsim": "onnxsim", "onnxslim": "onnxslim"}
IMPORTS = {"onnx-opt": "onnx_opt", "onnx-opt-check0": "onnx_opt", "onnxsim": "onnxsim",
           "onnxslim": "onnxslim"}
BASELINE = "onnx-opt-check0"  # the ratio column divides by its median
SEQ = 16  # symbolic dims named like a sequence get this in the outputs check; the others 1

# The child: tool, model, mode (`optimize`, `floor`: import and load only, `save`: optimize and
# save to argv[4], for the outputs check). Prints one JSON line; an exception is a non-zero exit.
DRIVER = r"""
import json, sys, time
tool, path, mode = sys.argv[1:4]
t0 = time.perf_counter()
import onnx
if tool in ("onnx-opt", "onnx-opt-check0"):
    import onnx_opt
    kwargs = {"check": 0} if tool == "onnx-opt-check0" else {}
    def run(m):
        # report=True only returns the report the call makes anyway.
        out, rep = onnx_opt.optimize(m, report=True, **kwargs)
        keys = ("check_ms", "optimize_ms", "time_ms", "check_trials", "check_data_sets",
                "check_skipped", "check_random_skipped", "check_dims", "nodes_before",
                "nodes_after")
        return out, {"report": {k: rep.get(k) for k in keys}}
elif tool == "onnxsim":
    import onnxsim
    def run(m):
        out, ok = onnxsim.simplify(m)
        return out, {"onnxsim_ok": bool(ok)}
elif tool == "onnxslim":
    import onnxslim
    def run(m):
        return onnxslim.slim(m), {}
else:
    sys.exit(f"unknown tool {tool}")
t1 = time.perf_counter()
model = onnx.load(path)
t2 = time.perf_counter()
result = {"import_s": t1 - t0, "load_s": t2 - t1, "nodes_before": len(model.graph.node)}
if mode != "floor":
    out, extra = run(model)
    t3 = time.perf_counter()
    if out is None:
        sys.exit(f"{tool} returned no model")
    result.update(extra, optimize_s=t3 - t2, nodes_after=len(out.graph.node))
    if mode == "save":
        onnx.save(out, sys.argv[4])
print(json.dumps(result))
"""

# The outputs check: the original and the optimized model in onnxruntime (graph optimizations
# off, one thread) on one seeded random input. Integer inputs that index a Gather's initializer
# (token ids) are drawn below its first dim, other integer inputs are a padding mask (ones, the
# last quarter zeros), floats standard normal. Prints one JSON line.
COMPARE = r"""
import json, sys
import numpy as np
import onnx, onnxruntime as ort
original, optimized, seed, seq, rtol, atol = sys.argv[1:7]
seed, seq, rtol, atol = int(seed), int(seq), float(rtol), float(atol)
model = onnx.load(original)
inits = {t.name: t for t in model.graph.initializer}
rows = {}  # input name -> rows of the initializer it indexes
for n in model.graph.node:
    if n.op_type == "Gather" and len(n.input) > 1 and n.input[0] in inits:
        rows[n.input[1]] = inits[n.input[0]].dims[0]
rng = np.random.default_rng(seed)
feeds = {}
init_names = set(inits)
for value in model.graph.input:
    if value.name in init_names:
        continue
    t = value.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value")
             else (seq if "seq" in d.dim_param.lower() else 1) for d in t.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
    if np.issubdtype(dtype, np.integer):
        if value.name in rows:
            feeds[value.name] = rng.integers(0, rows[value.name], shape).astype(dtype)
        else:
            mask = np.ones(shape, dtype=dtype)
            if shape:
                mask[..., shape[-1] - shape[-1] // 4:] = 0
            feeds[value.name] = mask
    else:
        feeds[value.name] = rng.standard_normal(shape).astype(dtype)
del model

def run(path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    outs = s.run(None, {k: v for k, v in feeds.items() if k in names})
    return [o.name for o in s.get_outputs()], outs

want_names, want = run(original)
result = {"equal": True, "detail": None, "max_abs_err": 0.0,
          "inputs": {k: list(v.shape) for k, v in feeds.items()}}
try:
    got_names, got = run(optimized)
except Exception as exc:
    text = str(exc).strip().splitlines()
    result.update(equal=False, detail=f"onnxruntime: {type(exc).__name__}: "
                  + (text[0][:300] if text else ""))
    print(json.dumps(result))
    sys.exit(0)
by_name = dict(zip(got_names, got))
for pos, (name, a) in enumerate(zip(want_names, want)):
    b = by_name.get(name, got[pos] if pos < len(got) else None)
    why = None
    if b is None:
        why = "missing"
    elif a.shape != b.shape or a.dtype != b.dtype:
        why = f"{b.dtype}{list(b.shape)} != {a.dtype}{list(a.shape)}"
    elif a.dtype.kind in "fc":
        err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
        result["max_abs_err"] = max(result["max_abs_err"], err)
        if not np.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True):
            why = f"values differ (max abs err {err:.3g})"
    elif not np.array_equal(a, b):
        why = "values differ"
    if why and result["equal"]:
        result.update(equal=False, detail=f"output {name!r}: {why}")
print(json.dumps(result))
"""


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def run_driver(args: argparse.Namespace, tool: str, model: Path, mode: str,
               extra: list[str] = ()) -> dict:
    """One child: the driver under the RSS launcher. A dict with the driver's JSON, the wall
    time, the peak RSS and, when it failed, `error`."""
    cmd = [args.python, "-c", DRIVER, tool, str(model), mode, *extra]
    child = run_child(cmd, args.timeout, args.rss_probe)
    out = {"wall_s": child.wall_ms / 1e3, "peak_rss_mb": child.peak_rss_kb / 1024.0 or None}
    parsed = last_json_line(child.stdout)
    if child.returncode != 0 or child.timed_out or parsed is None:
        out["error"] = failure_text(child, args.timeout)
    else:
        out.update(parsed)
    return out


def check_outputs(args: argparse.Namespace, tool: str, model: Path, work: Path) -> dict:
    """Run the tool once more, saving its result, and compare outputs with onnxruntime."""
    dst = work / f"{model.stem}.{tool}.onnx"
    saved = run_driver(args, tool, model, "save", [str(dst)])
    if "error" in saved:
        return {"equal": None, "detail": f"the saving run failed: {saved['error']}",
                "run": saved}
    try:
        done = subprocess.run([args.python, "-c", COMPARE, str(model), str(dst),
                               str(args.seed), str(SEQ), str(args.rtol), str(args.atol)],
                              capture_output=True, text=True, timeout=args.timeout, check=False)
        stdout, stderr = done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        stdout, stderr = "", f"timeout after {args.timeout:g} s"
    finally:
        dst.unlink(missing_ok=True)
    parsed = last_json_line(stdout)
    if parsed is None:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return {"equal": None, "detail": f"the comparison failed: {tail[:300]}", "run": saved}
    parsed["run"] = saved
    return parsed


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def measure_model(args: argparse.Namespace, model: Path, tools: list[str],
                  work: Path) -> dict:
    """Every round for one model: {entry: [runs]} where an entry is a tool or `floor:<import>`,
    and the outputs check per tool."""
    floors = sorted({IMPORTS[t] for t in tools}, key=list(IMPORTS.values()).index)
    floor_tool = {imp: next(t for t in tools if IMPORTS[t] == imp) for imp in floors}
    entries = []
    for imp in floors:  # the floor of an import right before the tools that use it
        entries.append(f"floor:{imp}")
        entries += [t for t in tools if IMPORTS[t] == imp]
    runs: dict[str, list[dict]] = {e: [] for e in entries}
    checks: dict[str, dict] = {}
    with model.open("rb") as f:  # the file in the page cache before the first timed read
        while f.read(1 << 24):
            pass
    for r in range(args.repeat):
        shift = r % len(entries)
        for entry in entries[shift:] + entries[:shift]:
            if entry.startswith("floor:"):
                res = run_driver(args, floor_tool[entry[6:]], model, "floor")
            else:
                res = run_driver(args, entry, model, "optimize")
            res["round"] = r + 1
            runs[entry].append(res)
            status = res.get("error") or (f"{res['optimize_s']:.2f} s" if "optimize_s" in res
                                          else f"load {res['load_s']:.2f} s")
            print(f"  {model.stem} round {r + 1} {entry}: {status}, "
                  f"{fmt(res['peak_rss_mb'], '.0f')} MB", file=sys.stderr)
        if r == 0:
            for tool in tools:
                checks[tool] = check_outputs(args, tool, model, work)
                c = checks[tool]
                print(f"  {model.stem} outputs {tool}: "
                      f"{'equal' if c['equal'] else 'NOT EQUAL' if c['equal'] is False else '?'}"
                      f" {c.get('detail') or ''}", file=sys.stderr)
    return {"runs": runs, "outputs": checks, "floor_of": {t: f"floor:{IMPORTS[t]}" for t in tools}}


def summarize(model: str, data: dict, tools: list[str]) -> list[dict]:
    rows = []
    for tool in tools:
        ok = [r for r in data["runs"][tool] if "error" not in r]
        errors = sorted({r["error"] for r in data["runs"][tool] if "error" in r})
        floor = [r for r in data["runs"][data["floor_of"][tool]] if "error" not in r]
        reports = [r.get("report") or {} for r in ok]
        check = data["outputs"].get(tool, {})
        rows.append({
            "model": model, "tool": tool, "runs_ok": len(ok),
            "runs": len(data["runs"][tool]),
            "median_s": median([r["optimize_s"] for r in ok]),
            "median_peak_rss_mb": median([r["peak_rss_mb"] for r in ok]),
            "floor_peak_rss_mb": median([r["peak_rss_mb"] for r in floor]),
            "median_wall_s": median([r["wall_s"] for r in ok]),
            "nodes_before": ok[0]["nodes_before"] if ok else None,
            "nodes_after": sorted({r["nodes_after"] for r in ok}) if ok else None,
            "check_ms": median([rep.get("check_ms") for rep in reports]),
            "optimize_ms": median([rep.get("optimize_ms") for rep in reports]),
            "time_ms": median([rep.get("time_ms") for rep in reports]),
            "check_trials": sorted({rep.get("check_trials") for rep in reports} - {None}),
            "check_skipped": sorted({rep.get("check_skipped") for rep in reports} - {None}),
            "check_random_skipped": sorted({rep.get("check_random_skipped")
                                            for rep in reports} - {None}),
            "onnxsim_ok": sorted({r["onnxsim_ok"] for r in ok if "onnxsim_ok" in r}),
            "outputs_equal": check.get("equal"),
            "outputs_detail": check.get("detail"),
            "max_abs_err": check.get("max_abs_err"),
            "errors": errors,
        })
    base = {r["model"]: r["median_s"] for r in rows if r["tool"] == BASELINE}
    for r in rows:
        b = base.get(r["model"])
        r["ratio_to_baseline"] = r["median_s"] / b if r["median_s"] and b else None
    return rows


def floor_rows(model: str, data: dict) -> list[dict]:
    out = []
    for entry, runs in data["runs"].items():
        if not entry.startswith("floor:"):
            continue
        ok = [r for r in runs if "error" not in r]
        out.append({"model": model, "import": entry[6:], "runs_ok": len(ok), "runs": len(runs),
                    "median_import_s": median([r["import_s"] for r in ok]),
                    "median_load_s": median([r["load_s"] for r in ok]),
                    "median_wall_s": median([r["wall_s"] for r in ok]),
                    "median_peak_rss_mb": median([r["peak_rss_mb"] for r in ok]),
                    "errors": sorted({r["error"] for r in runs if "error" in r})})
    return out


def markdown(rows: list[dict], floors: list[dict], repeat: int) -> str:
    lines = [f"Optimize call, medians of {repeat} fresh processes per tool:", "",
             "| model | tool | median s | / check0 | median peak RSS MB | +RSS over floor MB "
             "| nodes before -> after | Rust ms | check ms | outputs | notes |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for r in rows:
        after = r["nodes_after"]
        nodes = ("-" if r["nodes_before"] is None else
                 f"{r['nodes_before']} -> {'/'.join(map(str, after))}")
        rss, floor = r["median_peak_rss_mb"], r["floor_peak_rss_mb"]
        added = rss - floor if rss is not None and floor is not None else None
        outputs = {True: "equal", False: "NOT EQUAL", None: "?"}[r["outputs_equal"]]
        if r["outputs_equal"] is not None and r["max_abs_err"] is not None:
            outputs += f" ({r['max_abs_err']:.1e})"
        notes = []
        if r["runs_ok"] < r["runs"]:
            notes.append(f"{r['runs'] - r['runs_ok']}/{r['runs']} runs failed: "
                         + "; ".join(r["errors"]))
        if r["outputs_detail"]:
            notes.append(r["outputs_detail"])
        if r["check_skipped"]:
            notes.append("check skipped: " + "; ".join(r["check_skipped"]))
        if r["check_random_skipped"]:
            notes.append("random trials stopped: " + "; ".join(r["check_random_skipped"]))
        if False in r["onnxsim_ok"]:
            notes.append("onnxsim returned ok=False")
        ours = r["tool"].startswith("onnx-opt")
        check = fmt(r["check_ms"], ".0f") if ours else "-"
        rust = fmt(r["time_ms"], ".0f") if ours else "-"
        lines.append(
            f"| {r['model']} | {LABELS[r['tool']]} | {fmt(r['median_s'])} "
            f"| {fmt(r['ratio_to_baseline'])} | {fmt(rss, '.0f')} | {fmt(added, '.0f')} "
            f"| {nodes} | {rust} | {check} | {outputs} | {' '.join(notes).replace('|', '/')} |")
    lines += ["", "Floor: a child that imports the tool and loads the model, nothing else:", "",
              "| model | import | median import s | median load s | median wall s "
              "| median peak RSS MB |", "|---|---|---:|---:|---:|---:|"]
    for f in floors:
        err = f" ({'; '.join(f['errors'])})" if f["errors"] else ""
        lines.append(f"| {f['model']} | {f['import']}{err} | {fmt(f['median_import_s'])} "
                     f"| {fmt(f['median_load_s'])} | {fmt(f['median_wall_s'])} "
                     f"| {fmt(f['median_peak_rss_mb'], '.0f')} |")
    return "\n".join(lines)


def versions(python: str) -> dict:
    code = ("import importlib.metadata as m, json, sys\n"
            "v = {}\n"
            "for n in ('onnx', 'onnxruntime', 'numpy', 'onnx-opt', 'onnxsim', 'onnxslim'):\n"
            "    try: v[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: v[n] = None\n"
            "v['python'] = sys.version.split()[0]\n"
            "print(json.dumps(v))\n")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return last_json_line(done.stdout) or {"error": done.stderr.strip()[-300:]}


def importable(python: str, module: str) -> str | None:
    """None when `python` can import module, else the last line of the error."""
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True,
                          check=False)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS,
                        help="directory with " + " and ".join(MODEL_FILES)
                             + " (default: %(default)s)")
    parser.add_argument("--only", nargs="+", choices=[Path(m).stem for m in MODEL_FILES],
                        default=None, help="only these models")
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default: %(default)s)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with onnx, onnxruntime, onnx_opt, onnxsim and "
                             "onnxslim (default: this one, %(default)s)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="results.json and results.md go here (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    parser.add_argument("--seed", type=int, default=0, help="of the outputs check's input")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--rss-probe", choices=("auto", "gnu-time", "python"), default="auto",
                        help="launcher that measures peak RSS (default: GNU time if installed)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    names = [m for m in MODEL_FILES if args.only is None or Path(m).stem in args.only]
    models = [args.models / m for m in names]
    missing = [str(m) for m in models if not m.is_file()]
    if missing:
        print(f"error: missing {', '.join(missing)}: run benches/gen_bench_models.py "
              f"(--out {args.models})", file=sys.stderr)
        return 2
    why = importable(args.python, "onnx")
    if why:
        print(f"error: {args.python} cannot import onnx: {why}", file=sys.stderr)
        return 2
    tools, skipped = [], {}
    for tool in args.tools:
        why = importable(args.python, IMPORTS[tool])
        if why:
            skipped[tool] = f"{args.python} cannot import {IMPORTS[tool]}: {why}"
            print(f"skipping {tool}: {skipped[tool]}", file=sys.stderr)
        else:
            tools.append(tool)
    args.rss_probe = choose_rss_probe(args.rss_probe)
    launcher_floor_mb = rss_floor_kb(args.rss_probe) / 1024.0
    env = versions(args.python)
    print(f"tools: {', '.join(tools) or 'none'}; {args.repeat} rounds; peak RSS via "
          f"{args.rss_probe} (floor {launcher_floor_mb:.1f} MB); versions: {json.dumps(env)}",
          file=sys.stderr)

    load_before = load_average()
    started = time.perf_counter()
    per_model, rows, floors = {}, [], []
    with tempfile.TemporaryDirectory(prefix="python-api-bench-") as tmp:
        for model in models:
            data = measure_model(args, model, tools, Path(tmp))
            per_model[model.stem] = data
            rows += summarize(model.stem, data, tools)
            floors += floor_rows(model.stem, data)
    load_after = load_average()

    table = markdown(rows, floors, args.repeat)
    notes = (f"\nseconds: the optimize call alone (model loaded); / check0: over onnx-opt "
             f"(check=0)'s median; peak RSS: the child's ru_maxrss via {args.rss_probe} "
             f"(cannot show less than {launcher_floor_mb:.1f} MB); +RSS over floor: over the "
             f"floor child of the same import; Rust ms: onnx-opt's report time_ms, the "
             f"native call's own time from the bytes in to the optimized model (parse, "
             f"optimize, check), the rest of `median s` being the Python side (ModelProto to "
             f"bytes and back); check ms: its report's check_ms; outputs: "
             f"onnxruntime on one seeded random input (batch 1, seq {SEQ}), rtol {args.rtol:g} "
             f"atol {args.atol:g}, max abs error in parentheses. Load average (1 min) "
             f"{fmt(load_before)} before, {fmt(load_after)} after; "
             f"{time.perf_counter() - started:.0f} s in all. Versions: "
             + ", ".join(f"{k} {v}" for k, v in env.items()) + ".")
    for tool, why in skipped.items():
        notes += f"\nskipped {tool}: {why}"
    print(table)
    print(notes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(table + "\n" + notes + "\n")
    doc = {
        "settings": {"models": [str(m) for m in models], "tools": tools, "repeat": args.repeat,
                     "python": args.python, "timeout_s": args.timeout, "seed": args.seed,
                     "seq": SEQ, "rtol": args.rtol, "atol": args.atol,
                     "rss_probe": args.rss_probe, "rss_launcher_floor_mb": launcher_floor_mb},
        "environment": {"versions": env, "machine": platform.machine(), "cpus": os.cpu_count(),
                        "platform": platform.platform(), "load_average_before": load_before,
                        "load_average_after": load_after},
        "skipped": skipped,
        "results": rows,
        "floors": floors,
        "runs": per_model,
    }
    (args.out / "results.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"\nwrote {args.out / 'results.md'} and {args.out / 'results.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
