#!/usr/bin/env python3
"""Compare onnx-opt's reference interpreter with onnxruntime and onnx.reference on inference.

For every model (default: resnet18-opset13, mobilenet_v2-opset13, bert-tiny-opset13 under
../shared/models) and its test_data_set_0 inputs, measure the median inference time over N runs
(--repeat, default 10) of three engines, side by side in one run of this script:

  onnx-opt     `onnx-opt run MODEL --input NAME=input_i.pb ... --repeat N -o DIR`: the binary
               times Session::run alone and prints `inference median: X ms` (load and planning
               are outside the timing); its outputs are written to DIR and checked here
  onnxruntime  an InferenceSession with one thread (intra_op_num_threads=1,
               inter_op_num_threads=1, sequential execution) and graph optimizations disabled
               (ORT_DISABLE_ALL); session creation is outside the timing
  reference    onnx.reference.ReferenceEvaluator, created once; --reference-repeat runs
               (default: --repeat), since one run of a CNN takes seconds

None of the three gets a warm-up run: every timed run counts and the median absorbs a slow first
run. Each engine's outputs are compared with the stored output_i.pb (--rtol/--atol, default
1e-3/1e-4), so a fast wrong answer shows. The table gives the medians in ms, the ratio
onnx-opt / onnxruntime (issue 3's target: at most 3) and reference / onnx-opt (target: at
least 10). `--json FILE` writes every run's time as well.

  scripts/setup_venv.sh && cargo build --release
  target/venv-peers/bin/python benches/compare_interpreter.py --json target/interpreter.json

The onnx-opt interpreter runs on one thread; so does onnxruntime here. Timings on a shared
machine are noisy: compare medians, and say how loaded the machine was (the script records the
load average before and after).

Exit status: 0 when every measurement ran (an engine that fails on a model is a row with its
error), 2 on bad arguments or missing models.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = REPO_ROOT.parent / "shared" / "models"
DEFAULT_ONNX_OPT = REPO_ROOT / "target" / "release" / "onnx-opt"
DEFAULT_NAMES = ("resnet18-opset13", "mobilenet_v2-opset13", "bert-tiny-opset13")
ENGINES = ("onnx-opt", "onnxruntime", "reference")
MEDIAN_RE = re.compile(r"^inference median: ([0-9.]+) ms$", re.MULTILINE)


@dataclass
class Measurement:
    engine: str
    median_ms: float | None = None
    runs_ms: list[float] = field(default_factory=list)
    outputs_match: bool | None = None
    error: str | None = None


@dataclass
class ModelRow:
    model: str
    measurements: dict[str, Measurement] = field(default_factory=dict)
    ratio_onnx_opt_to_ort: float | None = None
    ratio_reference_to_onnx_opt: float | None = None


def numbered(directory: Path, prefix: str) -> list[Path]:
    files = []
    while (directory / f"{prefix}_{len(files)}.pb").is_file():
        files.append(directory / f"{prefix}_{len(files)}.pb")
    return files


def read_tensor(path: Path):
    import onnx
    import onnx.numpy_helper

    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t.name, onnx.numpy_helper.to_array(t)


def graph_inputs(model_path: Path) -> list[str]:
    """Names of the graph inputs without an initializer, in order."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    init = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in init]


def load_case(model_dir: Path):
    """(model path, [(input name, file, array)], [expected arrays]) of test_data_set_0."""
    model = model_dir / "model.onnx"
    data = model_dir / "test_data_set_0"
    names = graph_inputs(model)
    inputs = []
    for i, f in enumerate(numbered(data, "input")):
        name, array = read_tensor(f)
        if name not in names:
            if i >= len(names):
                raise ValueError(f"{f}: more input files than graph inputs {names}")
            name = names[i]
        inputs.append((name, f, array))
    expected = [read_tensor(f)[1] for f in numbered(data, "output")]
    return model, inputs, expected


def outputs_match(got: list, want: list, rtol: float, atol: float) -> tuple[bool, str | None]:
    import numpy as np

    if len(got) != len(want):
        return False, f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return False, f"output {i}: shape {g.shape}, expected {w.shape}"
        if w.dtype.kind in "fc":
            if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
                worst = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
                return False, f"output {i}: max abs difference {worst:.3g}"
        elif not np.array_equal(g, w):
            return False, f"output {i}: values differ"
    return True, None


def measure_onnx_opt(binary: Path, model: Path, inputs, expected, repeat: int,
                     args: argparse.Namespace) -> Measurement:
    m = Measurement("onnx-opt")
    if not binary.is_file():
        m.error = f"{binary} not found: run `cargo build --release` or pass --onnx-opt"
        return m
    with tempfile.TemporaryDirectory(prefix="onnx-opt-run-") as out_dir:
        cmd = [str(binary), "run", str(model)]
        for name, f, _ in inputs:
            cmd += ["--input", f"{name}={f}"]
        cmd += ["--repeat", str(max(repeat, 2)), "-o", out_dir]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            m.error = f"timed out after {args.timeout:.0f} s"
            return m
        if proc.returncode != 0:
            m.error = (proc.stderr.strip() or proc.stdout.strip())[-500:]
            return m
        found = MEDIAN_RE.search(proc.stdout)
        if not found:
            m.error = f"no 'inference median' line in: {proc.stdout.strip()[-300:]}"
            return m
        m.median_ms = float(found.group(1))
        got = [read_tensor(f)[1] for f in numbered(Path(out_dir), "output")]
    m.outputs_match, m.error = outputs_match(got, expected, args.rtol, args.atol)
    return m


def timed_runs(run, repeat: int) -> tuple[list[float], list]:
    times, outputs = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        outputs = run()
        times.append((time.perf_counter() - start) * 1e3)
    return times, outputs


def measure_ort(model: Path, inputs, expected, repeat: int,
                args: argparse.Namespace) -> Measurement:
    m = Measurement("onnxruntime")
    try:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        feeds = {name: array for name, _, array in inputs}
        m.runs_ms, got = timed_runs(lambda: sess.run(None, feeds), repeat)
    except Exception as e:  # an engine failure is a row, not a crash of the script
        m.error = f"{type(e).__name__}: {e}"[:500]
        return m
    m.median_ms = statistics.median(m.runs_ms)
    m.outputs_match, m.error = outputs_match(got, expected, args.rtol, args.atol)
    return m


def measure_reference(model: Path, inputs, expected, repeat: int,
                      args: argparse.Namespace) -> Measurement:
    m = Measurement("reference")
    try:
        import onnx
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(onnx.load(str(model)))
        feeds = {name: array for name, _, array in inputs}
        m.runs_ms, got = timed_runs(lambda: evaluator.run(None, feeds), repeat)
    except Exception as e:
        m.error = f"{type(e).__name__}: {e}"[:500]
        return m
    m.median_ms = statistics.median(m.runs_ms)
    m.outputs_match, m.error = outputs_match(got, expected, args.rtol, args.atol)
    return m


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def measure_model(model_dir: Path, args: argparse.Namespace) -> ModelRow:
    row = ModelRow(model_dir.name)
    model, inputs, expected = load_case(model_dir)
    for engine in args.engines:
        print(f"  {model_dir.name}: {engine} ...", file=sys.stderr, flush=True)
        if engine == "onnx-opt":
            m = measure_onnx_opt(args.onnx_opt, model, inputs, expected, args.repeat, args)
        elif engine == "onnxruntime":
            m = measure_ort(model, inputs, expected, args.repeat, args)
        else:
            m = measure_reference(model, inputs, expected, args.reference_repeat, args)
        row.measurements[engine] = m
    med = {e: m.median_ms for e, m in row.measurements.items()}
    row.ratio_onnx_opt_to_ort = ratio(med.get("onnx-opt"), med.get("onnxruntime"))
    row.ratio_reference_to_onnx_opt = ratio(med.get("reference"), med.get("onnx-opt"))
    return row


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(rows: list[ModelRow], engines: list[str]) -> str:
    head = ["model"] + [f"{e} ms" for e in engines]
    head += ["onnx-opt/ORT (<= 3)", "reference/onnx-opt (>= 10)", "outputs match"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for r in rows:
        cells = [r.model] + [fmt(r.measurements[e].median_ms, ".1f") for e in engines]
        cells.append(fmt(r.ratio_onnx_opt_to_ort, ".2f"))
        cells.append(fmt(r.ratio_reference_to_onnx_opt, ".1f"))
        match = []
        for e in engines:
            m = r.measurements[e]
            match.append(f"{e}: {'-' if m.outputs_match is None else 'yes' if m.outputs_match else 'NO'}")
            if m.error:
                notes.append(f"- {r.model}, {e}: {m.error}")
        cells.append(", ".join(match))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + ([""] + notes if notes else []))


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("onnx", "onnxruntime", "numpy"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:
            out[name] = f"unavailable ({type(e).__name__})"
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS,
                        help="directory of <name>/model.onnx (default ../shared/models)")
    parser.add_argument("--only", nargs="+", metavar="NAME", default=list(DEFAULT_NAMES),
                        help="model directory names (default: the three of issue 3)")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--onnx-opt", type=Path, default=DEFAULT_ONNX_OPT,
                        help="the onnx-opt binary (default target/release/onnx-opt)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per engine (>= 2)")
    parser.add_argument("--reference-repeat", type=int, default=None,
                        help="timed runs of onnx.reference (default: --repeat)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds for one onnx-opt child")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    args = parser.parse_args(argv)
    if args.repeat < 2:
        parser.error("--repeat must be at least 2 (onnx-opt prints a median only then)")
    if args.reference_repeat is None:
        args.reference_repeat = args.repeat
    if args.reference_repeat < 1:
        parser.error("--reference-repeat must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    dirs = [args.models / name for name in args.only]
    missing = [str(d) for d in dirs if not (d / "model.onnx").is_file()]
    if missing:
        print(f"error: no model.onnx in {', '.join(missing)}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    started = time.time()
    rows = [measure_model(d, args) for d in dirs]
    report = {
        "repeat": args.repeat,
        "reference_repeat": args.reference_repeat,
        "versions": versions(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
        },
        "wall_s": time.time() - started,
        "rows": [asdict(r) for r in rows],
    }
    print(markdown(rows, args.engines))
    print(f"\nmedians of {args.repeat} runs ({args.reference_repeat} for reference); "
          f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, "
          f"{os.cpu_count()} CPUs")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
