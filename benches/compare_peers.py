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
  ORT ms off / on      median onnxruntime latency (CPU, 1 thread) of the original and of every
                       output that is ok, graph optimizations off (ORT_DISABLE_ALL) and on
                       (ORT_ENABLE_ALL): one child per model and mode builds all the sessions,
                       warms them up and times them round-robin (see LATENCY_RUNNER)

plus, for onnx-opt, its cost model's estimate before/after (--report estimate_before,
estimate_after) and the e-graph figures of its --report (e-nodes, e-classes, saturation time and
its share of optimize_ms, rule firings) in a table of their own, and per tool a targets table:
node counts against the best other tool, latency against the original and the best other tool,
tool time against onnxsim, peak RSS over the model size.

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
import math
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
ORT_IO = r"""
def read_tensors(pattern):
    # test_data_set_0/<pattern> in numeric order (input_10 after input_9), as (name, array).
    paths = sorted(glob.glob(os.path.join(data_dir, pattern)),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    out = []
    for p in paths:
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        out.append((t.name, numpy_helper.to_array(t)))
    return out

def feeds(sess, inputs):
    # By name, else by position (tools may rename inputs).
    names = [i.name for i in sess.get_inputs()]
    fed = {}
    for pos, (name, arr) in enumerate(inputs):
        key = name if name in names else (names[pos] if pos < len(names) else None)
        if key is None:
            raise RuntimeError(f"input_{pos}.pb ({name!r}) matches no model input {names}")
        fed[key] = arr
    return fed
"""

VERIFY_RUNNER = r"""
import glob, json, os, sys
import numpy as np
import onnx, onnxruntime as ort
from onnx import numpy_helper
original, optimized, data_dir, rtol, atol = sys.argv[1:6]
rtol, atol = float(rtol), float(atol)
""" + ORT_IO + r"""
def session(path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

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

# Child program for the latency: onnxruntime (CPU provider, one intra-op and one inter-op thread,
# sequential) at graph optimization level `mode` (off: ORT_DISABLE_ALL, on: ORT_ENABLE_ALL) on
# test_data_set_0. It builds every session first, warms each up, then times one `run` per session
# per round, round-robin, so that a change of machine load hits every session alike. It stops
# after `runs` rounds, or earlier once the rounds took `budget_s` seconds (but never before
# `min_rounds`). A session that cannot be built or run is an error of its own; the others go on.
# Prints one JSON line.
LATENCY_RUNNER = r"""
import glob, json, os, statistics, sys, time
import onnx, onnxruntime as ort
from onnx import numpy_helper
data_dir, mode, runs, budget_s, warmup, min_rounds = sys.argv[1:7]
runs, budget_s, warmup, min_rounds = int(runs), float(budget_s), int(warmup), int(min_rounds)
labels, paths = sys.argv[7::2], sys.argv[8::2]
""" + ORT_IO + r"""
def why(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}".rstrip(": ")

level = {"off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
         "on": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[mode]
inputs = read_tensors("input_*.pb")
out = {label: {"error": None, "create_ms": None, "warmup_ms": [], "times_ms": []}
       for label in labels}
live = []  # (label, session, feeds)
for label, path in zip(labels, paths):
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        t0 = time.perf_counter()
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        out[label]["create_ms"] = (time.perf_counter() - t0) * 1e3
        live.append((label, sess, feeds(sess, inputs)))
    except Exception as exc:  # noqa: BLE001 - this session's result
        out[label]["error"] = "session: " + why(exc)
for label, sess, fed in list(live):
    try:
        for _ in range(warmup):
            t0 = time.perf_counter()
            sess.run(None, fed)
            out[label]["warmup_ms"].append((time.perf_counter() - t0) * 1e3)
    except Exception as exc:  # noqa: BLE001
        out[label]["error"] = "run: " + why(exc)
        live.remove((label, sess, fed))
start = time.perf_counter()
rounds, stopped_early = 0, False
for r in range(runs):
    if r >= min_rounds and time.perf_counter() - start > budget_s:
        stopped_early = True
        break
    for entry in list(live):
        label, sess, fed = entry
        try:
            t0 = time.perf_counter()
            sess.run(None, fed)
            out[label]["times_ms"].append((time.perf_counter() - t0) * 1e3)
        except Exception as exc:  # noqa: BLE001
            out[label]["error"] = "run: " + why(exc)
            live.remove(entry)
    rounds += 1
for entry in out.values():
    if entry["error"] is None and entry["times_ms"]:
        entry["median_ms"] = statistics.median(entry["times_ms"])
    else:
        entry["median_ms"] = None
print(json.dumps({"sessions": out, "rounds": rounds, "stopped_early": stopped_early,
                  "round_robin_s": time.perf_counter() - start}))
"""
LATENCY_WARMUP = 3  # untimed runs per session before the round-robin
LATENCY_MIN_ROUNDS = 5  # the budget never cuts the round-robin shorter than this
LATENCY_TOLERANCE = 0.03  # "slower" in the targets table: more than 3 % above
LATENCY_MODES = ("off", "on")  # ORT_DISABLE_ALL, ORT_ENABLE_ALL


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


def tool_floors_mb(tools: list[str], args: argparse.Namespace, work: Path) -> dict[str, float]:
    """Each tool's fixed floor: the peak RSS of its whole command (the same as on the models)
    on a one-node model (Relu of a float[1,4]), the memory it needs whatever the model."""
    import onnx
    from onnx import TensorProto, helper

    model_dir = work / "floor-model"
    model_dir.mkdir(parents=True, exist_ok=True)
    src = model_dir / "model.onnx"
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "floor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    floors = {}
    for tool in tools:
        out_dir = work / f"floor-{tool}"
        out_dir.mkdir(parents=True, exist_ok=True)
        child = run_child(tool_command(tool, args, src, out_dir), args.timeout, args.rss_probe)
        if child.returncode == 0 and child.peak_rss_kb:
            floors[tool] = child.peak_rss_kb / 1024.0
    return floors


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
    # onnx-opt only: the cost model's latency estimate of the main graph (--report
    # estimate_before / estimate_after, microseconds); None when the report lacks it.
    estimate_before: float | None = None
    estimate_after: float | None = None
    # onnxruntime latency of the output (of the original for "(input)"), median ms over the
    # timed runs, graph optimizations off (ORT_DISABLE_ALL) and on (ORT_ENABLE_ALL); None when not
    # measured or when it failed. `latency[mode]` keeps every run and the error.
    ort_ms_off: float | None = None
    ort_ms_on: float | None = None
    latency: dict = field(default_factory=dict)


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
        if row.tool_report is not None:
            row.estimate_before = number(row.tool_report.get("estimate_before"))
            row.estimate_after = number(row.tool_report.get("estimate_after"))
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


def is_ok(row: Row) -> bool:
    """A tool's output that is valid to compare: it ran, loads, and matches the original."""
    return row.error is None and bool(row.matches)


def latency_child(data_dir: Path, mode: str, sessions: list[tuple[str, Path]],
                  budget_s: float, args: argparse.Namespace) -> tuple[dict | None, str | None]:
    """One LATENCY_RUNNER child for these (label, model) sessions: its JSON, or why it died."""
    cmd = [args.python, "-c", LATENCY_RUNNER, str(data_dir), mode, str(args.latency_runs),
           str(budget_s), str(LATENCY_WARMUP), str(LATENCY_MIN_ROUNDS)]
    for label, path in sessions:
        cmd += [label, str(path)]
    child = run_child(cmd, args.timeout, args.rss_probe)
    result = last_json_line(child.stdout) if child.returncode == 0 else None
    if result is None or not isinstance(result.get("sessions"), dict):
        return None, failure_text(child, args.timeout)
    return result, None


def measure_latency(model_dir: Path, rows: list[Row], work: Path,
                    args: argparse.Namespace) -> None:
    """onnxruntime latency of the original and of every ok output, per graph optimization mode.

    One child per mode holds every session and times them round-robin (LATENCY_RUNNER); when
    that child dies (a crash of onnxruntime, a timeout) each session is timed again in a child
    of its own, so that a crash costs one entry. Each mode gets half of --latency-budget.
    """
    data_dir = model_dir / "test_data_set_0"
    sessions: list[tuple[Row, Path]] = []
    for row in rows:
        if row.tool == "(input)":
            sessions.append((row, model_dir / "model.onnx"))
        elif is_ok(row):
            sessions.append((row, work / model_dir.name / row.tool / "model.onnx"))
    if not sessions or not data_dir.is_dir():
        return
    budget_s = args.latency_budget / len(LATENCY_MODES)
    for mode in LATENCY_MODES:
        load_before = os.getloadavg()[0]
        pairs = [(row.tool, path) for row, path in sessions]
        result, died = latency_child(data_dir, mode, pairs, budget_s, args)
        per_session: dict[str, tuple[dict | None, str | None]] = {}
        if result is not None:
            per_session = {label: (result, None) for label, _ in pairs}
        else:  # again, one child per session
            for label, path in pairs:
                per_session[label] = latency_child(data_dir, mode, [(label, path)], budget_s, args)
        load_after = os.getloadavg()[0]
        for row, _ in sessions:
            res, err = per_session[row.tool]
            entry = {"median_ms": None, "times_ms": [], "warmup_ms": [], "create_ms": None,
                     "error": None, "rounds": None, "stopped_early": None,
                     "separate_child": result is None, "loadavg_1min": [load_before, load_after]}
            if result is None:
                entry["shared_child_error"] = died
            if res is None:
                entry["error"] = f"latency child: {err}"
            else:
                mine = res["sessions"].get(row.tool) or {"error": "no result for this session"}
                entry.update(rounds=res.get("rounds"), stopped_early=res.get("stopped_early"),
                             median_ms=mine.get("median_ms"), error=mine.get("error"),
                             create_ms=mine.get("create_ms"),
                             times_ms=[round(t, 4) for t in mine.get("times_ms", [])],
                             warmup_ms=[round(t, 4) for t in mine.get("warmup_ms", [])])
            row.latency[mode] = entry
        for row, _ in sessions:
            median = row.latency[mode]["median_ms"]
            if mode == "off":
                row.ort_ms_off = median
            else:
                row.ort_ms_on = median


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
    for mode in LATENCY_MODES:
        err = (row.latency.get(mode) or {}).get("error")
        if err:
            parts.append(f"ORT latency {mode}: {err}")
    return "; ".join(parts).replace("|", "\\|")


def yes_no(value: bool | None) -> str:
    return {None: "-", True: "yes", False: "NO"}[value]


def sig3(value: float | None) -> str:
    """A latency in ms or a ratio with about three significant digits."""
    if value is None:
        return "-"
    for limit, spec in ((1, ".3f"), (10, ".2f"), (100, ".1f")):
        if value < limit:
            return format(value, spec)
    return format(value, ".0f")


def estimate(row: Row) -> str:
    if row.tool != "onnx-opt" or row.estimate_before is None or row.estimate_after is None:
        return "-"
    return f"{row.estimate_before:.0f} -> {row.estimate_after:.0f}"


def markdown(rows: list[Row]) -> str:
    head = ("| model | tool | nodes | input-dependent nodes | size | wall ms | tool ms "
            "| peak RSS MB | same bytes | valid ONNX | matches ORT | ORT ms off | ORT ms on "
            "| estimate | error |")
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        nodes = before_after(r, r.nodes_before, r.nodes_after)
        dependent = before_after(r, r.input_dep_before, r.input_dep_after)
        size = before_after(r, r.size_before, r.size_after, human_size)
        lines.append(f"| {r.model} | {r.tool} | {nodes} | {dependent} | {size} "
                     f"| {fmt(r.wall_ms, '.0f')} | {fmt(r.tool_ms, '.0f')} "
                     f"| {fmt(r.peak_rss_mb, '.0f')} | {yes_no(r.deterministic)} "
                     f"| {yes_no(r.checker_ok)} | {yes_no(r.matches)} "
                     f"| {sig3(r.ort_ms_off)} | {sig3(r.ort_ms_on)} | {estimate(r)} | {notes(r)} |")
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


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def targets(rows: list[Row], tools: list[str], floor_mb: float,
            tool_floors: dict[str, float] | None = None) -> list[dict]:
    """Per tool, over the models where it is ok: the figures the project's targets are judged on.

    Best peer: on each model, the smallest value among the OTHER tools that are ok there. Node
    ratios take a count of 0 as 1. `slower`: more than LATENCY_TOLERANCE above. Counts are
    [how many, out of how many models compared].
    """
    by_model: dict[str, dict[str, Row]] = {}
    for r in rows:
        by_model.setdefault(r.model, {})[r.tool] = r
    out = []
    for tool in tools:
        mine = [r for r in rows if r.tool == tool and is_ok(r)]
        t: dict = {"tool": tool, "models_ok": len(mine),
                   "models": len([r for r in rows if r.tool == tool])}
        ratios: dict[str, list[float]] = {}
        counts: dict[str, list[int]] = {}

        def add(key: str, ratio: float | None = None, worse: bool | None = None) -> None:
            if ratio is not None:
                ratios.setdefault(key, []).append(ratio)
            if worse is not None:
                c = counts.setdefault(key, [0, 0])
                c[0] += int(worse)
                c[1] += 1

        rss, rss_net, rss_tool = [], [], []  # (ratio, model)
        tool_floor = (tool_floors or {}).get(tool)
        for r in mine:
            models = by_model[r.model]
            others = [o for name, o in models.items()
                      if name not in ("(input)", tool) and is_ok(o)]
            for key, attr in (("nodes", "nodes_after"), ("input_dep", "input_dep_after")):
                theirs = [getattr(o, attr) for o in others if getattr(o, attr) is not None]
                if theirs and getattr(r, attr) is not None:
                    best = min(theirs)
                    add(key, max(getattr(r, attr), 1) / max(best, 1), getattr(r, attr) > best)
            source = models.get("(input)")
            for mode in LATENCY_MODES:
                attr = f"ort_ms_{mode}"
                value = getattr(r, attr)
                if value is None:
                    continue
                base = getattr(source, attr) if source else None
                if base:
                    add(f"latency_{mode}_vs_input", value / base,
                        value > base * (1 + LATENCY_TOLERANCE))
                theirs = [getattr(o, attr) for o in others if getattr(o, attr) is not None]
                if theirs:
                    add(f"latency_{mode}_vs_best_peer", value / min(theirs),
                        value > min(theirs) * (1 + LATENCY_TOLERANCE))
            sim = models.get("onnxsim")
            if sim is not None and is_ok(sim) and sim.tool_ms:
                if r.tool_ms:
                    add("onnxsim_tool_ms_over_tool_ms", sim.tool_ms / r.tool_ms)
                optimize_ms = (r.egraph or {}).get("optimize_ms")
                if tool == "onnx-opt" and optimize_ms:
                    add("onnxsim_tool_ms_over_optimize_ms", sim.tool_ms / optimize_ms)
            if r.peak_rss_mb is not None and r.size_before:
                size_mb = r.size_before / 2**20  # peak_rss_mb is in MiB too
                rss.append((r.peak_rss_mb / size_mb, r.model))
                rss_net.append(((r.peak_rss_mb - floor_mb) / size_mb, r.model))
                if tool_floor is not None:
                    rss_tool.append(((r.peak_rss_mb - tool_floor) / size_mb, r.model))
        for key, values in sorted(ratios.items()):
            t[f"{key}_geomean"] = geomean(values)
        for key, (worse, of) in sorted(counts.items()):
            t[f"{key}_worse"] = [worse, of]
        if rss:
            t["rss_over_size_max"], t["rss_over_size_worst_model"] = max(rss)
            t["rss_net_over_size_max"], t["rss_net_over_size_worst_model"] = max(rss_net)
        if rss_tool:
            t["tool_floor_mb"] = tool_floor
            t["rss_tool_net_over_size_max"], t["rss_tool_net_over_size_worst_model"] = \
                max(rss_tool)
        out.append(t)
    return out


def targets_table(data: list[dict]) -> str:
    def g(t: dict, key: str) -> str:
        return fmt(t.get(f"{key}_geomean"), ".3f")

    def c(t: dict, key: str) -> str:
        worse = t.get(f"{key}_worse")
        return "-" if worse is None else f"{worse[0]}/{worse[1]}"

    lines = ["| tool | models ok | nodes / best peer | input-dep / best peer "
             "| more nodes than best peer | more input-dep than best peer "
             "| ORT off / input | ORT on / input | slower than input off | slower than input on "
             "| slower than best peer off | slower than best peer on "
             "| onnxsim tool ms / tool ms | onnxsim tool ms / optimize_ms "
             "| max RSS / size | max (RSS - floor) / size | worst model "
             "| tool floor MB | max (RSS - tool floor) / size | its worst model |",
             "|" + "---|" * 20]
    for t in data:
        worst = t.get("rss_over_size_worst_model") or "-"
        net_worst = t.get("rss_net_over_size_worst_model")
        if net_worst and net_worst != worst:
            worst = f"{worst} / {net_worst}"
        lines.append(
            f"| {t['tool']} | {t['models_ok']}/{t['models']} | {g(t, 'nodes')} "
            f"| {g(t, 'input_dep')} | {c(t, 'nodes')} | {c(t, 'input_dep')} "
            f"| {g(t, 'latency_off_vs_input')} | {g(t, 'latency_on_vs_input')} "
            f"| {c(t, 'latency_off_vs_input')} | {c(t, 'latency_on_vs_input')} "
            f"| {c(t, 'latency_off_vs_best_peer')} | {c(t, 'latency_on_vs_best_peer')} "
            f"| {g(t, 'onnxsim_tool_ms_over_tool_ms')} "
            f"| {g(t, 'onnxsim_tool_ms_over_optimize_ms')} "
            f"| {sig3(t.get('rss_over_size_max'))} "
            f"| {sig3(t.get('rss_net_over_size_max'))} | {worst} "
            f"| {fmt(t.get('tool_floor_mb'), '.1f')} "
            f"| {sig3(t.get('rss_tool_net_over_size_max'))} "
            f"| {t.get('rss_tool_net_over_size_worst_model') or '-'} |")
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
    parser.add_argument("--latency-runs", type=int, default=20, metavar="N",
                        help="timed onnxruntime runs per session and mode (default: %(default)s)")
    parser.add_argument("--latency-budget", type=float, default=30.0, metavar="S",
                        help="seconds of timed runs per model, both modes together; the "
                             f"round-robin stops early past it, after at least "
                             f"{LATENCY_MIN_ROUNDS} rounds (default: %(default)s)")
    parser.add_argument("--no-latency", action="store_true",
                        help="do not measure the onnxruntime latency")
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the optimized models in this directory")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.latency_runs < 1:
        parser.error("--latency-runs must be at least 1")
    if args.latency_budget <= 0:
        parser.error("--latency-budget must be positive")
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
          f"each; peak RSS via {args.rss_probe} (floor {floor_mb:.1f} MB); latency: "
          + ("off" if args.no_latency else
             f"{args.latency_runs} runs, budget {args.latency_budget:g} s per model")
          + f"; versions: {json.dumps(env)}", file=sys.stderr)

    rows: list[Row] = []
    work_ctx = (tempfile.TemporaryDirectory(prefix="compare-peers-") if args.keep is None
                else None)
    work = Path(work_ctx.name) if work_ctx else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        tool_floors = tool_floors_mb(tools, args, work)
        for model_dir in model_dirs:
            started = time.perf_counter()
            model_rows = [input_row(model_dir, args)]
            model_rows += measure_model(model_dir, tools, args, work)
            if not args.no_latency:
                measure_latency(model_dir, model_rows, work, args)
            rows.extend(model_rows)
            print(f"  {model_dir.name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    finally:
        if work_ctx:
            work_ctx.cleanup()

    print(markdown(rows))
    print()
    print(summary(rows, tools))
    target_figures = targets(rows, tools, floor_mb, tool_floors)
    if tools:
        print()
        print("targets, per tool over the models where it is ok (ran, onnx loads the output, "
              "onnxruntime matches the original). x / best peer: geometric mean over those "
              "models of the tool's count over the smallest count among the other tools ok on "
              "the model (a count of 0 taken as 1); more ... than best peer: on how many of the "
              "models compared it has more. ORT off/on / input: geometric mean of the median "
              "onnxruntime latency of the output over the original's (graph optimizations off: "
              "ORT_DISABLE_ALL, on: ORT_ENABLE_ALL; 1 thread); slower than input / best peer: "
              f"models where it is more than {LATENCY_TOLERANCE:.0%} above the original's / "
              "the fastest other tool's output. onnxsim tool ms / tool ms: geometric mean over "
              "the models where onnxsim is ok too; onnxsim tool ms / optimize_ms: the same over "
              "onnx-opt's --report optimize_ms (optimization alone: no load, check or save). "
              "Max RSS / size: max over the models of peak RSS over the model's bytes (file "
              f"plus external data); RSS - floor subtracts the launcher's {floor_mb:.1f} MB; "
              "worst model: of the first (/ of the second when it differs). Tool floor: the "
              "tool's own peak RSS, its same command on a one-node model; RSS - tool floor "
              "subtracts it. k/n: k of n models.")
        print()
        print(targets_table(target_figures))
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
                         "rss_probe": args.rss_probe, "rss_floor_mb": floor_mb,
                         "tool_floors_mb": tool_floors,
                         "latency": None if args.no_latency else {
                             "runs": args.latency_runs, "budget_s": args.latency_budget,
                             "budget_s_per_mode": args.latency_budget / len(LATENCY_MODES),
                             "warmup": LATENCY_WARMUP, "min_rounds": LATENCY_MIN_ROUNDS,
                             "threads": 1, "modes": {"off": "ORT_DISABLE_ALL",
                                                     "on": "ORT_ENABLE_ALL"},
                             "slower_tolerance": LATENCY_TOLERANCE}},
            "environment": {"versions": env, "machine": platform.machine(),
                            "cpus": os.cpu_count(), "platform": platform.platform()},
            "skipped": skipped,
            "baselines": baselines,
            "results": [asdict(r) for r in rows],
            "targets": target_figures,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
