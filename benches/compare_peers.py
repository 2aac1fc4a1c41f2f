#!/usr/bin/env python3
"""Compare onnx-opt with the peer optimizers (onnxsim, onnxslim, onnxoptimizer, ort-basic).

ort-basic is onnxruntime's offline graph optimization: an InferenceSession at ORT_ENABLE_BASIC
(CPU provider) that saves its optimized graph as a standard .onnx file.

For every model directory (MODELS/<name>/model.onnx with test_data_set_0/) and every tool, run
the tool N times in a fresh subprocess each (interleaved: run 1 of every tool, then run 2, ...)
and record:

  nodes before/after   top-level graph nodes, counted here with onnx for every tool alike
  input-dependent      of those, the nodes that transitively depend on a graph input
                       (initializers are never inputs): folded constants do not count
  size before/after    bytes on disk of the output directory (model + any external data)
  wall time            median over the runs, of the whole subprocess (start, load, optimize, save)
  tool time            median of the time the tool reports for itself (onnx-opt: report time_ms;
                       peers: the optimize call alone, load and save excluded; ort-basic: the
                       InferenceSession construction, which loads, optimizes and saves)
  peak RSS             max over the runs of the child's ru_maxrss, read by a small launcher
                       (GNU time if installed, else a minimal Python; see run_child)
  deterministic        whether every run wrote the same bytes
  matches              whether the optimized model, run by onnxruntime (graph optimizations off)
                       on test_data_set_0, gives the original model's onnxruntime outputs within
                       rtol/atol (default 1e-3 / 1e-4); checked in a subprocess
  valid ONNX           onnx.checker.check_model accepts the output file (same subprocess)

plus, for onnx-opt, the e-graph figures of its --report (e-nodes, e-classes, saturation time and
its share of optimize_ms, rule firings) in a table of their own.

A tool that fails on a model gives a row with its error; the script goes on. Run it with the
venv of scripts/setup_venv.sh (it has onnx, onnxruntime and the pinned peers):

  scripts/setup_venv.sh
  target/venv-peers/bin/python benches/compare_peers.py --json target/peers.json

Exit status: 0 when every requested measurement ran (failures of a tool are results, not errors),
2 on bad arguments or a missing models directory.
"""

from __future__ import annotations

import argparse
import functools
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
PEERS = ("onnxsim", "onnxslim", "onnxoptimizer", "ort-basic")
ALL_TOOLS = ("onnx-opt",) + PEERS

# Child program for the peers: load, optimize with the tool's defaults, save; print timings as
# one JSON line. `import-only` measures the interpreter + import baseline. ort-basic is
# onnxruntime's offline graph optimization: an InferenceSession at ORT_ENABLE_BASIC on the CPU
# provider that writes its optimized graph to `optimized_model_filepath`; it reads and writes the
# files itself, so its tool_ms is the session construction (load + optimize + save + session
# set-up, prepacking off) and it has no separate load/save time.
PEER_RUNNER = r"""
import json, os, sys, time
tool, src, dst = sys.argv[1:4]
external = sys.argv[4:5] == ["external"]  # ort-basic: the input stores tensors externally
t0 = time.perf_counter()
if tool == "ort-basic":
    import onnxruntime as ort
    def run_files(src, dst):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = dst
        # ONNX protobuf, never the ORT flatbuffer format (chosen by a .ort suffix otherwise).
        so.add_session_config_entry("session.save_model_format", "ONNX")
        so.add_session_config_entry("session.disable_prepacking", "1")
        if external:  # the input keeps its weights outside the 2 GB protobuf: so does the output
            so.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name",
                os.path.basename(dst) + ".data")
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
else:
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
elif tool != "ort-basic":
    sys.exit(f"unknown tool {tool}")
t1 = time.perf_counter()
if src == "import-only":
    print(json.dumps({"import_ms": (t1 - t0) * 1e3}))
    sys.exit(0)
if tool == "ort-basic":
    run_files(src, dst)
    t2 = time.perf_counter()
    if not os.path.isfile(dst):
        sys.exit(f"onnxruntime wrote no {dst}")
    print(json.dumps({"import_ms": (t1 - t0) * 1e3, "load_ms": None,
                      "tool_ms": (t2 - t1) * 1e3, "save_ms": None}))
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

def checker(path):
    # None when onnx.checker accepts the file (the path form handles external data, > 2 GB).
    try:
        onnx.checker.check_model(path)
        return None
    except Exception as exc:  # noqa: BLE001 - any refusal is the answer
        text = str(exc).strip()
        return (text.splitlines()[0] if text else type(exc).__name__)[:300]

inputs = read_tensors("input_*.pb")
expected = read_tensors("output_*.pb")
ref, ref_names = run(original, inputs)
result = {"ok": True, "max_abs_err": 0.0, "detail": None,
          "checker": checker(original if optimized == "-" else optimized)}
# Sanity: the original under onnxruntime against the stored outputs.
base_ok = True
for pos, (name, arr) in enumerate(expected):
    key = name if name in ref else (ref_names[pos] if pos < len(ref_names) else None)
    if key is None or not compare(arr, ref[key])[0]:
        base_ok = False
result["original_matches_stored"] = base_ok
if optimized != "-":
    try:
        got, got_names = run(optimized, inputs)
    except Exception as exc:  # noqa: BLE001 - reported with the checker's verdict
        text = str(exc).strip()
        result.update(ok=False, run_error=f"{type(exc).__name__}: {text[:300]}")
        print(json.dumps(result))
        sys.exit(0)
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


def subgraph_names(graph) -> set[str]:
    """Every value name a subgraph (and its own subgraphs) reads or outputs: a superset of the
    outer-scope values it captures (ONNX names are unique across scopes, so names defined inside
    never collide with the outer graph's)."""
    names = {o.name for o in graph.output}
    for node in graph.node:
        names.update(node.input)
        for attr in node.attribute:
            if attr.HasField("g"):
                names |= subgraph_names(attr.g)
            for sub in attr.graphs:
                names |= subgraph_names(sub)
    names.discard("")
    return names


def input_dependent_nodes(graph) -> int:
    """Nodes of this graph (not of its subgraphs) that transitively depend on a graph input.

    An initializer is never an input, even when it is listed in graph.input too (required for
    IR < 4, an overridable default from IR 4 on). A node with a subgraph (If, Loop, Scan) depends
    on what its subgraph reads from the outer scope as well as on its own inputs. A constant that
    a tool has folded (however large) thus does not count, a node left on the input's path does.
    """
    constant = {t.name for t in graph.initializer}
    constant.update(t.values.name for t in graph.sparse_initializer)
    consumers: dict[str, list[int]] = {}
    for index, node in enumerate(graph.node):
        reads = set(node.input)
        for attr in node.attribute:
            if attr.HasField("g"):
                reads |= subgraph_names(attr.g)
            for sub in attr.graphs:
                reads |= subgraph_names(sub)
        reads.discard("")
        for name in reads:
            consumers.setdefault(name, []).append(index)
    reached = {i.name for i in graph.input if i.name and i.name not in constant}
    pending = list(reached)
    dependent = [False] * len(graph.node)
    while pending:
        for index in consumers.get(pending.pop(), ()):
            if dependent[index]:
                continue
            dependent[index] = True
            for out in graph.node[index].output:
                if out and out not in reached:
                    reached.add(out)
                    pending.append(out)
    return sum(dependent)


STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


@dataclass
class GraphStats:
    """What the script reads itself, with onnx, from any tool's output file."""

    nodes: int
    input_dependent: int
    # Nodes per domain outside the ONNX standard ones (e.g. com.microsoft): what a runtime
    # other than the tool's own may not run.
    other_domains: dict[str, int]


def graph_stats(model_path: Path) -> GraphStats | None:
    """Top-level figures of a model file; None if it does not parse as an ONNX model."""
    import onnx

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # noqa: BLE001 - a tool's broken output is a result, not a crash
        return None
    others: dict[str, int] = {}
    for node in model.graph.node:
        if node.domain not in STANDARD_DOMAINS:
            others[node.domain] = others.get(node.domain, 0) + 1
    return GraphStats(nodes=len(model.graph.node),
                      input_dependent=input_dependent_nodes(model.graph),
                      other_domains=dict(sorted(others.items())))


@dataclass
class Row:
    """One (model, tool) result."""

    model: str
    tool: str
    nodes_before: int | None = None
    nodes_after: int | None = None
    # Nodes of the main graph reachable from a graph input (initializers excluded); constant
    # subgraphs, folded or not, do not count.
    input_dep_before: int | None = None
    input_dep_after: int | None = None
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
    checker_ok: bool | None = None  # onnx.checker.check_model accepts the output
    checker_detail: str | None = None
    other_domains: dict[str, int] = field(default_factory=dict)
    wall_ms_all: list[float] = field(default_factory=list)
    tool_report: dict | None = None
    # onnx-opt only: e-graph figures from the --report of each run and their medians.
    egraph: dict | None = None
    egraph_runs: list[dict] = field(default_factory=list)


def tool_command(tool: str, args: argparse.Namespace, src: Path, out_dir: Path) -> list[str]:
    dst = out_dir / "model.onnx"
    if tool == "onnx-opt":
        return [str(args.onnx_opt), "optimize", str(src), "-o", str(dst),
                "--report", str(out_dir.parent / f"{out_dir.name}-report.json"),
                *args.onnx_opt_arg]
    cmd = [args.python, "-c", PEER_RUNNER, tool, str(src), str(dst)]
    if tool == "ort-basic" and has_external_data(src):
        cmd.append("external")
    return cmd


@functools.lru_cache(maxsize=None)
def has_external_data(model: Path) -> bool:
    """Whether the model stores any tensor outside the .onnx file."""
    import onnx

    try:
        proto = onnx.load(str(model), load_external_data=False)
    except Exception:  # noqa: BLE001 - the tools will report the real error
        return False
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in all_tensors(proto.graph))


def dig(doc, *keys):
    """doc[k0][k1]...; None when a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def egraph_figures(report: dict) -> dict:
    """The e-graph figures of one onnx-opt --report; None for any field the report lacks."""
    main = dig(report, "egraph", "main")
    saturate_s = number(dig(main, "saturate_seconds"))
    optimize_ms = number(dig(report, "optimize_ms"))
    share = (saturate_s * 1e3 / optimize_ms
             if saturate_s is not None and optimize_ms else None)
    firings = None  # sum over the phases of the unions made by every rule
    phases = dig(main, "phases")
    if isinstance(phases, list):
        per_phase = [ph["firings"] for ph in phases if isinstance(dig(ph, "firings"), dict)]
        if per_phase or not phases:
            firings = int(sum(n for counts in per_phase for n in map(number, counts.values())
                              if n is not None))
    enodes, eclasses = number(dig(main, "enodes")), number(dig(main, "eclasses"))
    return {"enodes": None if enodes is None else int(enodes),
            "eclasses": None if eclasses is None else int(eclasses),
            "saturate_s": saturate_s, "optimize_ms": optimize_ms, "saturate_share": share,
            "firings": firings}


def median_figures(runs: list[dict]) -> dict:
    """Per field, the median over the runs that have it (None if none has)."""
    keys = ("enodes", "eclasses", "saturate_s", "optimize_ms", "saturate_share", "firings")
    out = {}
    for key in keys:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


def measure_model(model_dir: Path, tools: list[str], args: argparse.Namespace,
                  work: Path) -> list[Row]:
    """All runs of all tools on one model, interleaved, then the onnxruntime checks."""
    src = model_dir / "model.onnx"
    name = model_dir.name
    before = graph_stats(src)
    size_before = model_bytes(src)
    rows = {t: Row(model=name, tool=t, size_before=size_before,
                   nodes_before=before.nodes if before else None,
                   input_dep_before=before.input_dependent if before else None)
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
                except (OSError, ValueError) as exc:
                    row.error = f"unreadable --report: {exc}"
                    continue
                if not isinstance(row.tool_report, dict):
                    row.error = "unreadable --report: not a JSON object"
                    continue
                if number(row.tool_report.get("time_ms")) is not None:
                    tool_ms[tool].append(float(row.tool_report["time_ms"]))
                row.egraph_runs.append(egraph_figures(row.tool_report))
            else:
                timing = last_json_line(child.stdout)
                if timing and "tool_ms" in timing:
                    tool_ms[tool].append(timing["tool_ms"])
    for tool in tools:
        row = rows[tool]
        if row.runs == 0:
            continue
        out_dir = work / name / tool
        if row.egraph_runs:
            row.egraph = median_figures(row.egraph_runs)
        if row.error is None:  # else out_dir holds the failed run's leftovers
            after = graph_stats(out_dir / "model.onnx")
            row.size_after = dir_size(out_dir)
            if after is None:
                row.error = "output is not an ONNX model (onnx.load fails)"
            else:
                row.nodes_after, row.input_dep_after = after.nodes, after.input_dependent
                row.other_domains = after.other_domains
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
    row.checker_ok = result.get("checker") is None
    row.checker_detail = result.get("checker")
    if result.get("run_error"):
        row.error = f"onnxruntime cannot run it: {result['run_error']}"
    elif not row.matches:
        row.error = f"mismatch: {result['detail']}"


def input_row(model_dir: Path, args: argparse.Namespace) -> Row:
    """The original model: does onnxruntime reproduce its stored outputs?"""
    src = model_dir / "model.onnx"
    stats = graph_stats(src)
    row = Row(model=model_dir.name, tool="(input)", size_before=model_bytes(src))
    if stats is not None:
        row.nodes_before, row.input_dep_before = stats.nodes, stats.input_dependent
        row.other_domains = stats.other_domains
    row.nodes_after, row.input_dep_after = row.nodes_before, row.input_dep_before
    row.size_after = row.size_before
    data_dir = model_dir / "test_data_set_0"
    cmd = [args.python, "-c", VERIFY_RUNNER, str(src), "-", str(data_dir),
           str(args.rtol), str(args.atol)]
    child = run_child(cmd, args.timeout, args.rss_probe)
    result = last_json_line(child.stdout) if child.returncode == 0 else None
    if result is None:
        row.error = "onnxruntime: " + failure_text(child, args.timeout)
    else:
        row.checker_ok = result.get("checker") is None
        row.checker_detail = result.get("checker")
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


def before_after(row: Row, before, after, show=fmt) -> str:
    if row.tool == "(input)":
        return show(before)
    return f"{show(before)} -> {show(after)}"


def notes(row: Row) -> str:
    """The error column: why a tool failed, plus what the checker or the domains say."""
    parts = [row.error] if row.error else []
    if row.checker_detail:
        parts.append(f"onnx.checker: {row.checker_detail}")
    if row.other_domains:
        parts.append("non-standard ops: " + ", ".join(
            f"{n} {d}" for d, n in row.other_domains.items()))
    return "; ".join(parts).replace("|", "\\|")


def yes_no(value: bool | None) -> str:
    return {None: "-", True: "yes", False: "NO"}[value]


def markdown(rows: list[Row]) -> str:
    head = ("| model | tool | nodes | input-dependent nodes | size | wall ms | tool ms "
            "| peak RSS MB | same bytes | valid ONNX | matches ORT | error |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        nodes = before_after(r, r.nodes_before, r.nodes_after)
        dependent = before_after(r, r.input_dep_before, r.input_dep_after)
        size = before_after(r, r.size_before, r.size_after, human_size)
        lines.append(f"| {r.model} | {r.tool} | {nodes} | {dependent} | {size} "
                     f"| {fmt(r.wall_ms, '.0f')} | {fmt(r.tool_ms, '.0f')} "
                     f"| {fmt(r.peak_rss_mb, '.0f')} | {yes_no(r.deterministic)} "
                     f"| {yes_no(r.checker_ok)} | {yes_no(r.matches)} | {notes(r)} |")
    return "\n".join(lines)


def egraph_table(rows: list[Row]) -> str:
    """onnx-opt's own figures per model, from its --report (medians over the runs)."""
    lines = ["| model | e-nodes | e-classes | saturate s | saturate / optimize "
             "| rule firings |", "|" + "---|" * 6]
    for r in rows:
        if r.tool != "onnx-opt":
            continue
        e = r.egraph or {}
        share = e.get("saturate_share")
        lines.append(f"| {r.model} | {fmt(e.get('enodes'), '.0f')} "
                     f"| {fmt(e.get('eclasses'), '.0f')} | {fmt(e.get('saturate_s'), '.3f')} "
                     f"| {'-' if share is None else f'{share * 100:.0f}%'} "
                     f"| {fmt(e.get('firings'), '.0f')} |")
    return "\n".join(lines)


def summary(rows: list[Row], tools: list[str]) -> str:
    lines = ["| tool | models ok | mismatches | failures | invalid ONNX | total nodes after "
             "| total input-dependent after | total MB after | total wall s |",
             "|" + "---|" * 9]
    for tool in tools:
        mine = [r for r in rows if r.tool == tool]
        ok = [r for r in mine if r.error is None and r.matches]
        mismatch = [r for r in mine if r.matches is False and r.runs > 0]
        failed = [r for r in mine if r.runs == 0]
        invalid = [r for r in mine if r.checker_ok is False]
        nodes = sum(r.nodes_after or 0 for r in ok)
        dependent = sum(r.input_dep_after or 0 for r in ok)
        size = sum(r.size_after or 0 for r in ok) / 1e6
        wall = sum(r.wall_ms or 0 for r in mine) / 1e3
        lines.append(f"| {tool} | {len(ok)}/{len(mine)} | {len(mismatch)} | {len(failed)} "
                     f"| {len(invalid)} | {nodes} | {dependent} | {size:.1f} | {wall:.1f} |")
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
    if "onnx-opt" in tools:
        print()
        print("onnx-opt e-graph, main graph, from --report (median over the runs; "
              "'-': the report lacks the field):")
        print()
        print(egraph_table(rows))
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
