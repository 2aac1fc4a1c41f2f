#!/usr/bin/env python3
"""Compare onnx-opt with the peer optimizers (onnxsim, onnxslim, onnxoptimizer) side by side.

For every model directory (MODELS/<name>/model.onnx with test_data_set_0/) and every tool, run
the tool N times in a fresh subprocess each (interleaved: run 1 of every tool, then run 2, ...)
and record:

  nodes before/after   top-level graph nodes, counted here with onnx for every tool alike
  size before/after    bytes on disk of the output directory (model + any external data)
  wall time            median over the runs, of the whole subprocess (start, load, optimize, save)
  tool time            median of the time the tool reports for itself (onnx-opt: report time_ms;
                       peers: the optimize call alone, load and save excluded)
  peak RSS             max over the runs of the child's ru_maxrss, read by a small launcher
                       (GNU time if installed, else a minimal Python; see run_child)
  deterministic        whether every run wrote the same bytes
  matches              whether the optimized model, run by onnxruntime (graph optimizations off)
                       on test_data_set_0, gives the original model's onnxruntime outputs within
                       rtol/atol (default 1e-3 / 1e-4); checked in a subprocess

A tool that fails on a model gives a row with its error; the script goes on. Run it with the
venv of scripts/setup_venv.sh (it has onnx, onnxruntime and the pinned peers):

  scripts/setup_venv.sh
  target/venv-peers/bin/python benches/compare_peers.py --json target/peers.json

Exit status: 0 when every requested measurement ran (failures of a tool are results, not errors),
2 on bad arguments or a missing models directory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
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
PEERS = ("onnxsim", "onnxslim", "onnxoptimizer")
ALL_TOOLS = ("onnx-opt",) + PEERS

# Child program for the peers: load, optimize with the tool's defaults, save; print timings as
# one JSON line. `import-only` measures the interpreter + import baseline.
PEER_RUNNER = r"""
import json, sys, time
tool, src, dst = sys.argv[1:4]
t0 = time.perf_counter()
import onnx
if tool == "onnxsim":
    import onnxsim
    def run(m):
        out, ok = onnxsim.simplify(m)
        if not ok:
            raise RuntimeError("onnxsim.simplify reported check failure")
        return out
elif tool == "onnxslim":
    import onnxslim
    def run(m):
        return onnxslim.slim(m)
elif tool == "onnxoptimizer":
    import onnxoptimizer
    def run(m):
        return onnxoptimizer.optimize(m)
else:
    sys.exit(f"unknown tool {tool}")
t1 = time.perf_counter()
if src == "import-only":
    print(json.dumps({"import_ms": (t1 - t0) * 1e3}))
    sys.exit(0)
model = onnx.load(src)
t2 = time.perf_counter()
out = run(model)
t3 = time.perf_counter()
if out is None:
    sys.exit(f"{tool} returned no model")
onnx.save(out, dst)
t4 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": (t2 - t1) * 1e3,
                  "tool_ms": (t3 - t2) * 1e3, "save_ms": (t4 - t3) * 1e3}))
"""

# Child program for the check: run the original and the optimized model with onnxruntime on
# test_data_set_0 and compare. Prints one JSON line.
VERIFY_RUNNER = r"""
import glob, json, os, sys
import numpy as np
import onnx, onnxruntime as ort
from onnx import numpy_helper
original, optimized, data_dir, rtol, atol = sys.argv[1:6]
rtol, atol = float(rtol), float(atol)

def read_tensors(pattern):
    paths = sorted(glob.glob(os.path.join(data_dir, pattern)),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    out = []
    for p in paths:
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        out.append((t.name, numpy_helper.to_array(t)))
    return out

def session(path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

def feeds(sess, inputs):
    names = [i.name for i in sess.get_inputs()]
    fed = {}
    for pos, (name, arr) in enumerate(inputs):
        key = name if name in names else (names[pos] if pos < len(names) else None)
        if key is None:
            raise RuntimeError(f"input_{pos}.pb ({name!r}) matches no model input {names}")
        fed[key] = arr
    return fed

def run(path, inputs):
    s = session(path)
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds(s, inputs)))), names

def compare(want, got):
    if want.shape != got.shape or want.dtype != got.dtype:
        return False, f"{got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}", None
    if want.dtype.kind in "fc":
        ok = bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0))
        return ok, None, err
    return bool(np.array_equal(got, want)), None, None

inputs = read_tensors("input_*.pb")
expected = read_tensors("output_*.pb")
ref, ref_names = run(original, inputs)
result = {"ok": True, "max_abs_err": 0.0, "detail": None}
# Sanity: the original under onnxruntime against the stored outputs.
base_ok = True
for pos, (name, arr) in enumerate(expected):
    key = name if name in ref else (ref_names[pos] if pos < len(ref_names) else None)
    if key is None or not compare(arr, ref[key])[0]:
        base_ok = False
result["original_matches_stored"] = base_ok
if optimized != "-":
    got, got_names = run(optimized, inputs)
    for pos, name in enumerate(ref_names):
        key = name if name in got else (got_names[pos] if pos < len(got_names) else None)
        if key is None:
            result.update(ok=False, detail=f"output {name!r} missing")
            break
        ok, why, err = compare(ref[name], got[key])
        if err is not None:
            result["max_abs_err"] = max(result["max_abs_err"], err)
        if not ok:
            result["ok"] = False
            result["detail"] = result["detail"] or f"output {name!r}: " + (why or "values differ")
print(json.dumps(result))
"""


@dataclass
class ChildRun:
    """One subprocess: exit code, wall time, peak RSS, captured output."""

    returncode: int
    wall_ms: float
    peak_rss_kb: int
    stdout: str
    stderr: str
    timed_out: bool


# The peak RSS of a child must be measured from a small process: Linux's ru_maxrss of a child
# that execs starts from the RSS of the process it was forked from (exec_mmap records the old
# mm's high-water mark), so wait4 in this Python (hundreds of MB once it has read big models)
# would report at least that much for every child. The launcher is either GNU time (floor about
# 1 MB) or this small Python program (floor about 5 MB); `rss_floor_kb` measures the floor.
PY_LAUNCHER = r"""
import json, os, sys, time
report, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()  # not posix_spawn: a vfork child would start from this process's high-water mark
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        os.write(2, f"cannot run {cmd[0]}: {exc}\n".encode())
    os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall_ms = (time.perf_counter() - start) * 1e3
with open(report, "w") as f:
    json.dump({"exit": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss,
               "wall_ms": wall_ms}, f)
"""
GNU_TIME = "/usr/bin/time"


def choose_rss_probe(requested: str) -> str:
    """'gnu-time' or 'python': the launcher that measures a child's peak RSS."""
    if requested in ("auto", "gnu-time"):
        try:
            done = subprocess.run([GNU_TIME, "--version"], capture_output=True, text=True,
                                  check=False)
            if "GNU" in done.stdout + done.stderr:
                return "gnu-time"
        except OSError:
            pass
        if requested == "gnu-time":
            raise SystemExit(f"error: --rss-probe gnu-time: no GNU time at {GNU_TIME}")
    return "python"


def run_child(cmd: list[str], timeout_s: float, probe: str) -> ChildRun:
    """Run cmd under the RSS probe in its own session; kill the session after timeout_s."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory(prefix="rss-") as scratch:
        report = os.path.join(scratch, "report")
        if probe == "gnu-time":
            wrapped = [GNU_TIME, "-f", "%M", "-o", report, *cmd]
        else:
            wrapped = [sys.executable, "-I", "-S", "-c", PY_LAUNCHER, report, *cmd]
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        wall_ms = (time.perf_counter() - start) * 1e3
        returncode, peak_kb = proc.returncode, 0
        try:
            text = Path(report).read_text()
        except OSError:
            text = ""
        if probe == "gnu-time":
            # GNU time writes "Command exited with non-zero status N" first when N != 0,
            # and exits with the command's own status.
            lines = text.strip().splitlines()
            if lines and lines[-1].strip().isdigit():
                peak_kb = int(lines[-1])
        elif text:
            measured = json.loads(text)
            returncode, peak_kb = measured["exit"], measured["maxrss_kb"]
            wall_ms = measured["wall_ms"]  # without the launcher's own start-up
        out.seek(0)
        err.seek(0)
        return ChildRun(
            returncode=returncode,
            wall_ms=wall_ms,
            peak_rss_kb=peak_kb,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            timed_out=timed_out,
        )


def rss_floor_kb(probe: str) -> int:
    """Peak RSS the probe reports for a trivial command: the smallest value it can show."""
    return run_child(["true"], 60.0, probe).peak_rss_kb


def failure_text(child: ChildRun, timeout_s: float) -> str:
    """A short description of why a child failed."""
    if child.timed_out:
        return f"timeout after {timeout_s:g} s"
    lines = [ln for ln in (child.stderr + "\n" + child.stdout).splitlines() if ln.strip()]
    tail = lines[-1].strip() if lines else ""
    what = f"exit {child.returncode}" if child.returncode >= 0 else f"signal {-child.returncode}"
    return f"{what}: {tail[:300]}" if tail else what


def last_json_line(text: str) -> dict | None:
    """The last line of text that parses as a JSON object."""
    for raw in reversed(text.splitlines()):
        line = raw.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def dir_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        digest.update(p.relative_to(path).as_posix().encode())
        digest.update(p.read_bytes())
    return digest.hexdigest()


def all_tensors(graph):
    """Initializers and tensor attributes of graph and its subgraphs."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from all_tensors(attr.g)
            for sub in attr.graphs:
                yield from all_tensors(sub)


def model_bytes(model: Path) -> int:
    """Size of the model file plus the external data files its tensors name."""
    total = model.stat().st_size
    try:
        import onnx
    except ImportError:
        return total
    try:
        proto = onnx.load(str(model), load_external_data=False)
    except Exception:  # noqa: BLE001 - the commands run on it will report the real error
        return total
    locations = set()
    for tensor in all_tensors(proto.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    locations.add(entry.value)
    for location in sorted(locations):
        path = model.parent / location
        if path.is_file():
            total += path.stat().st_size
    return total


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1_000_000:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.2f} MB"


def count_nodes(model_path: Path) -> int | None:
    """Top-level graph nodes; None if the file does not parse."""
    import onnx

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # noqa: BLE001 - a tool's broken output is a result, not a crash
        return None
    return len(model.graph.node)


@dataclass
class Row:
    """One (model, tool) result."""

    model: str
    tool: str
    nodes_before: int | None = None
    nodes_after: int | None = None
    size_before: int | None = None
    size_after: int | None = None
    wall_ms: float | None = None
    tool_ms: float | None = None
    peak_rss_mb: float | None = None
    runs: int = 0
    deterministic: bool | None = None
    matches: bool | None = None
    max_abs_err: float | None = None
    error: str | None = None
    wall_ms_all: list[float] = field(default_factory=list)
    tool_report: dict | None = None


def tool_command(tool: str, args: argparse.Namespace, src: Path, out_dir: Path) -> list[str]:
    dst = out_dir / "model.onnx"
    if tool == "onnx-opt":
        return [str(args.onnx_opt), "optimize", str(src), "-o", str(dst),
                "--report", str(out_dir.parent / f"{out_dir.name}-report.json"),
                *args.onnx_opt_arg]
    return [args.python, "-c", PEER_RUNNER, tool, str(src), str(dst)]


def measure_model(model_dir: Path, tools: list[str], args: argparse.Namespace,
                  work: Path) -> list[Row]:
    """All runs of all tools on one model, interleaved, then the onnxruntime checks."""
    src = model_dir / "model.onnx"
    name = model_dir.name
    nodes_before = count_nodes(src)
    size_before = model_bytes(src)
    rows = {t: Row(model=name, tool=t, nodes_before=nodes_before, size_before=size_before)
            for t in tools}
    digests: dict[str, set[str]] = {t: set() for t in tools}
    tool_ms: dict[str, list[float]] = {t: [] for t in tools}
    rss: dict[str, list[int]] = {t: [] for t in tools}
    for _ in range(args.repeat):
        for tool in tools:
            row = rows[tool]
            if row.error:
                continue  # a tool that failed once is not run again on this model
            out_dir = work / name / tool
            shutil.rmtree(out_dir, ignore_errors=True)
            out_dir.mkdir(parents=True)
            child = run_child(tool_command(tool, args, src, out_dir), args.timeout, args.rss_probe)
            dst = out_dir / "model.onnx"
            if child.returncode != 0 or child.timed_out:
                row.error = failure_text(child, args.timeout)
                continue
            if not dst.is_file():
                row.error = "exited 0 but wrote no model"
                continue
            row.runs += 1
            row.wall_ms_all.append(round(child.wall_ms, 1))
            rss[tool].append(child.peak_rss_kb)
            digests[tool].add(dir_digest(out_dir))
            if tool == "onnx-opt":
                report_path = out_dir.parent / f"{out_dir.name}-report.json"
                try:
                    row.tool_report = json.loads(report_path.read_text())
                    tool_ms[tool].append(float(row.tool_report["time_ms"]))
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    row.error = f"unreadable --report: {exc}"
            else:
                timing = last_json_line(child.stdout)
                if timing and "tool_ms" in timing:
                    tool_ms[tool].append(timing["tool_ms"])
    for tool in tools:
        row = rows[tool]
        if row.runs == 0:
            continue
        out_dir = work / name / tool
        if row.error is None:  # else out_dir holds the failed run's leftovers
            row.nodes_after = count_nodes(out_dir / "model.onnx")
            row.size_after = dir_size(out_dir)
        row.wall_ms = statistics.median(row.wall_ms_all)
        row.tool_ms = statistics.median(tool_ms[tool]) if tool_ms[tool] else None
        row.peak_rss_mb = max(rss[tool]) / 1024.0
        row.deterministic = len(digests[tool]) == 1
        if row.error is None:
            verify(row, src, out_dir / "model.onnx", model_dir, args)
    return [rows[t] for t in tools]


def verify(row: Row, original: Path, optimized: Path, model_dir: Path,
           args: argparse.Namespace) -> None:
    data_dir = model_dir / "test_data_set_0"
    if not data_dir.is_dir():
        row.error = f"no {data_dir}"
        return
    cmd = [args.python, "-c", VERIFY_RUNNER, str(original), str(optimized), str(data_dir),
           str(args.rtol), str(args.atol)]
    child = run_child(cmd, args.timeout, args.rss_probe)
    result = last_json_line(child.stdout) if child.returncode == 0 else None
    if result is None:
        row.matches = False
        row.error = "onnxruntime: " + failure_text(child, args.timeout)
        return
    row.matches = bool(result["ok"])
    row.max_abs_err = result["max_abs_err"]
    if not row.matches:
        row.error = f"mismatch: {result['detail']}"


def input_row(model_dir: Path, args: argparse.Namespace) -> Row:
    """The original model: does onnxruntime reproduce its stored outputs?"""
    src = model_dir / "model.onnx"
    row = Row(model=model_dir.name, tool="(input)", nodes_before=count_nodes(src),
              size_before=model_bytes(src))
    row.nodes_after, row.size_after = row.nodes_before, row.size_before
    data_dir = model_dir / "test_data_set_0"
    cmd = [args.python, "-c", VERIFY_RUNNER, str(src), "-", str(data_dir),
           str(args.rtol), str(args.atol)]
    child = run_child(cmd, args.timeout, args.rss_probe)
    result = last_json_line(child.stdout) if child.returncode == 0 else None
    if result is None:
        row.error = "onnxruntime: " + failure_text(child, args.timeout)
    else:
        row.matches = bool(result["original_matches_stored"])
        if not row.matches:
            row.error = "onnxruntime does not reproduce test_data_set_0 outputs"
    return row


def baseline(tool: str, args: argparse.Namespace) -> dict:
    """Start-up cost of a peer's child: interpreter + imports, no model."""
    timeout_s = max(args.timeout, 120.0)
    child = run_child([args.python, "-c", PEER_RUNNER, tool, "import-only", "-"], timeout_s,
                      args.rss_probe)
    if child.returncode != 0 or child.timed_out:
        return {"tool": tool, "error": failure_text(child, timeout_s)}
    return {"tool": tool, "wall_ms": round(child.wall_ms, 1),
            "peak_rss_mb": round(child.peak_rss_kb / 1024.0, 1)}


def fmt(value, spec: str = "", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def markdown(rows: list[Row]) -> str:
    head = ("| model | tool | nodes | size | wall ms | tool ms | peak RSS MB | same bytes "
            "| matches ORT | error |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        if r.tool == "(input)":
            nodes, size = fmt(r.nodes_before), human_size(r.size_before)
        else:
            nodes = f"{fmt(r.nodes_before)} -> {fmt(r.nodes_after)}"
            size = f"{human_size(r.size_before)} -> {human_size(r.size_after)}"
        same = {None: "-", True: "yes", False: "NO"}[r.deterministic]
        matches = "-" if r.matches is None else ("yes" if r.matches else "NO")
        err = (r.error or "").replace("|", "\\|")
        lines.append(f"| {r.model} | {r.tool} | {nodes} | {size} | {fmt(r.wall_ms, '.0f')} "
                     f"| {fmt(r.tool_ms, '.0f')} | {fmt(r.peak_rss_mb, '.0f')} | {same} "
                     f"| {matches} | {err} |")
    return "\n".join(lines)


def summary(rows: list[Row], tools: list[str]) -> str:
    lines = ["| tool | models ok | mismatches | failures | total nodes after | total MB after "
             "| total wall s |", "|" + "---|" * 7]
    for tool in tools:
        mine = [r for r in rows if r.tool == tool]
        ok = [r for r in mine if r.error is None and r.matches]
        mismatch = [r for r in mine if r.matches is False and r.runs > 0]
        failed = [r for r in mine if r.runs == 0]
        nodes = sum(r.nodes_after or 0 for r in ok)
        size = sum(r.size_after or 0 for r in ok) / 1e6
        wall = sum(r.wall_ms or 0 for r in mine) / 1e3
        lines.append(f"| {tool} | {len(ok)}/{len(mine)} | {len(mismatch)} | {len(failed)} "
                     f"| {nodes} | {size:.1f} | {wall:.1f} |")
    return "\n".join(lines)


def versions(python: str) -> dict:
    code = ("import importlib.metadata as m, json, sys\n"
            "v = {}\n"
            "for n in ('onnx', 'onnxruntime', 'numpy', 'onnxsim', 'onnxslim', 'onnxoptimizer'):\n"
            "    try: v[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: v[n] = None\n"
            "v['python'] = sys.version.split()[0]\n"
            "print(json.dumps(v))\n")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return last_json_line(done.stdout) or {"error": done.stderr.strip()[-300:]}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS,
                        help="directory of <name>/model.onnx (default: %(default)s)")
    parser.add_argument("--only", nargs="+", metavar="NAME", default=None,
                        help="only these model directory names")
    parser.add_argument("--tools", nargs="+", choices=ALL_TOOLS, default=list(ALL_TOOLS))
    parser.add_argument("--onnx-opt", type=Path, default=DEFAULT_ONNX_OPT,
                        help="onnx-opt binary (default: %(default)s)")
    parser.add_argument("--onnx-opt-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for `onnx-opt optimize` (repeatable)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter with onnx, onnxruntime and the peers "
                             "(default: this one, %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool and model")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per child")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--rss-probe", choices=("auto", "gnu-time", "python"), default="auto",
                        help="launcher that measures peak RSS (default: GNU time if installed)")
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the optimized models in this directory")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        import onnx  # noqa: F401 - node counts are read here, in the parent
    except ImportError:
        print(f"error: {sys.executable} has no onnx: run scripts/setup_venv.sh and use "
              "target/venv-peers/bin/python", file=sys.stderr)
        return 2
    if not args.models.is_dir():
        print(f"error: models directory {args.models} not found (--models DIR)", file=sys.stderr)
        return 2
    model_dirs = sorted(d for d in args.models.iterdir() if (d / "model.onnx").is_file())
    if args.only:
        missing = sorted(set(args.only) - {d.name for d in model_dirs})
        if missing:
            print(f"error: no such model(s) in {args.models}: {', '.join(missing)}",
                  file=sys.stderr)
            return 2
        model_dirs = [d for d in model_dirs if d.name in args.only]
    if not model_dirs:
        print(f"error: no <name>/model.onnx under {args.models}", file=sys.stderr)
        return 2

    args.rss_probe = choose_rss_probe(args.rss_probe)
    floor_mb = rss_floor_kb(args.rss_probe) / 1024.0
    tools = list(args.tools)
    skipped: dict[str, str] = {}
    if "onnx-opt" in tools and not (args.onnx_opt.is_file() and os.access(args.onnx_opt, os.X_OK)):
        skipped["onnx-opt"] = (f"binary not found at {args.onnx_opt} (build it with "
                               "`cargo build --release` or pass --onnx-opt PATH)")
    baselines = []
    for tool in [t for t in tools if t in PEERS]:
        base = baseline(tool, args)
        baselines.append(base)
        if "error" in base:
            skipped[tool] = (f"cannot import it with {args.python}: {base['error']} "
                             "(run scripts/setup_venv.sh and use target/venv-peers/bin/python)")
    for tool, why in skipped.items():
        print(f"skipping {tool}: {why}", file=sys.stderr)
    tools = [t for t in tools if t not in skipped]
    env = versions(args.python)
    print(f"tools: {', '.join(tools) or 'none'}; {len(model_dirs)} models; {args.repeat} runs "
          f"each; peak RSS via {args.rss_probe} (floor {floor_mb:.1f} MB); "
          f"versions: {json.dumps(env)}", file=sys.stderr)

    rows: list[Row] = []
    work_ctx = (tempfile.TemporaryDirectory(prefix="compare-peers-") if args.keep is None
                else None)
    work = Path(work_ctx.name) if work_ctx else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        for model_dir in model_dirs:
            started = time.perf_counter()
            rows.append(input_row(model_dir, args))
            rows.extend(measure_model(model_dir, tools, args, work))
            print(f"  {model_dir.name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    finally:
        if work_ctx:
            work_ctx.cleanup()

    print(markdown(rows))
    print()
    print(summary(rows, tools))
    if baselines:
        print()
        print("start-up baseline per peer child (interpreter + imports, no model): " + ", ".join(
            f"{b['tool']} {b['wall_ms']:.0f} ms / {b['peak_rss_mb']:.0f} MB" for b in baselines
            if "error" not in b))
    print(f"\npeak RSS measured with {args.rss_probe}; it cannot show less than {floor_mb:.1f} MB")
    for tool, why in skipped.items():
        print(f"\nskipped {tool}: {why}")
    if args.json:
        doc = {
            "settings": {"models": str(args.models), "repeat": args.repeat, "rtol": args.rtol,
                         "atol": args.atol, "timeout_s": args.timeout,
                         "onnx_opt": str(args.onnx_opt), "python": args.python,
                         "rss_probe": args.rss_probe, "rss_floor_mb": floor_mb},
            "environment": {"versions": env, "machine": platform.machine(),
                            "cpus": os.cpu_count(), "platform": platform.platform()},
            "skipped": skipped,
            "baselines": baselines,
            "results": [asdict(r) for r in rows],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
