#!/usr/bin/env python3
"""Compare `onnx-opt convert` with onnx.version_converter.convert_version, side by side.

For every model (MODELS/<name>/model.onnx with test_data_set_0/) and every target opset that
differs from the model's default-domain opset, each tool converts the model in a fresh
subprocess (a crash or a hang is a result, not the end of the script), with a timeout:

  onnx-opt           `onnx-opt convert MODEL --opset N -o OUT --check 1 [--check-data DIR]`
                     (its own differential check on one random input, and on the model's
                     test_data_set_* where it has them, is part of its time; --no-check-data
                     leaves the data out); exit code 0 = converted, otherwise the first line of
                     its stderr is the error
  version_converter  a child Python: onnx.load, onnx.version_converter.convert_version(m, N),
                     onnx.save; an exception is the error (its first line)

and records per (model, target, tool):

  converted          an output was written without error (else the error's first line)
  wall ms            median over --runs of the subprocess wall time; tool ms: onnx-opt's own
                     `time:` line (load + convert + check + save), version_converter's
                     convert_version call alone
  checker            onnx.checker.check_model(OUT, full_check=True) accepts the output
  ORT runs           onnxruntime (CPU, ORT_DISABLE_ALL, one thread) loads and runs it
  outputs            equal / DIFFERENT to the original model's onnxruntime outputs on the same
                     inputs (rtol/atol, default 1e-3 / 1e-4, NaN == NaN, integers, bools and
                     strings exact), compared by output name in order (by position when a name
                     is missing)

Inputs are test_data_set_0's input_*.pb where present, else seeded random values made from the
graph input types (symbolic dimensions = 1). When onnxruntime cannot run the original, the
stored output_*.pb (if any) are the reference instead, and the rows say so; when two runs of the
original differ (random operators), outputs are not compared ("no ref").

With --node-tests DIR the same comparison runs on every DIR/<test>/model.onnx (the ONNX backend
node tests) for --node-targets (default 13 17); there only the counts and the notable pairs are
printed. Everything goes to --json FILE. Run it with the venv of scripts/setup_venv.sh:

  scripts/setup_venv.sh
  target/venv-peers/bin/python benches/compare_converters.py --json target/converters.json
  target/venv-peers/bin/python benches/compare_converters.py --skip-models \\
      --node-tests ../shared/onnx-backend/node --limit 300

Exit status: 0 when the run completed (failures of a tool are results, not errors), 2 on bad
arguments (a missing directory or binary, a target below 1).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = REPO_ROOT.parent / "shared" / "models"
DEFAULT_ONNX_OPT = REPO_ROOT / "target" / "release" / "onnx-opt"
TOOLS = ("onnx-opt", "version_converter")
SHORT = {"onnx-opt": "onnx-opt", "version_converter": "vc"}

# Child program for version_converter: load, convert, save; one JSON line of timings, or the
# exception's first line on stderr and exit 1.
VC_RUNNER = r"""
import json, sys, time
src, dst, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
import onnx
from onnx import version_converter
t0 = time.perf_counter()
model = onnx.load(src)
t1 = time.perf_counter()
try:
    out = version_converter.convert_version(model, target)
except Exception as exc:  # noqa: BLE001 - the refusal is the result
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    sys.stderr.write(f"{type(exc).__name__}: {first}\n")
    sys.exit(1)
t2 = time.perf_counter()
onnx.save(out, dst)
t3 = time.perf_counter()
print(json.dumps({"load_ms": (t1 - t0) * 1e3, "tool_ms": (t2 - t1) * 1e3,
                  "save_ms": (t3 - t2) * 1e3}))
"""

# Code shared by the two onnxruntime children: sessions, reading .pb values, comparing.
ORT_COMMON = r"""
import glob, json, os, pickle, sys
import numpy as np
import onnx, onnxruntime as ort
from onnx import numpy_helper

def first_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:400]

def session(path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

def run(path, inputs):
    s = session(path)
    names = [i.name for i in s.get_inputs()]
    fed = {}
    for pos, (name, value) in enumerate(inputs):
        key = name if name in names else (names[pos] if pos < len(names) else None)
        if key is not None and key not in fed:
            fed[key] = value
    out_names = [o.name for o in s.get_outputs()]
    return list(zip(out_names, s.run(None, fed)))

def checker(path):
    try:
        onnx.checker.check_model(path, full_check=True)
        return None
    except Exception as exc:  # noqa: BLE001 - any refusal is the answer
        return first_line(exc)

def default_opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return None

def same(want, got, rtol, atol):
    # (equal, why not, max abs error of the float values)
    if want is None or got is None:
        return (want is None) == (got is None), "optional presence differs", None
    if isinstance(want, (list, tuple)) or isinstance(got, (list, tuple)):
        if not isinstance(want, (list, tuple)) or not isinstance(got, (list, tuple)) \
                or len(want) != len(got):
            return False, "sequence lengths differ", None
        worst = None
        for pos, (w, g) in enumerate(zip(want, got)):
            ok, why, err = same(w, g, rtol, atol)
            if err is not None:
                worst = max(worst or 0.0, err)
            if not ok:
                return False, f"[{pos}] {why}", worst
        return True, None, worst
    if isinstance(want, dict) or isinstance(got, dict):
        if not isinstance(want, dict) or not isinstance(got, dict) or want.keys() != got.keys():
            return False, "map keys differ", None
        for key in want:
            ok, why, err = same(want[key], got[key], rtol, atol)
            if not ok:
                return False, f"[{key!r}] {why}", err
        return True, None, None
    want, got = np.asarray(want), np.asarray(got)
    if want.dtype != got.dtype or want.shape != got.shape:
        return False, f"{got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}", None
    if want.dtype.kind not in "biufcOUS":  # bfloat16, float8 ... (ml_dtypes)
        want, got = want.astype(np.float32), got.astype(np.float32)
    if want.dtype.kind in "fc":
        ok = bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
        both = np.isfinite(want) & np.isfinite(got)
        diff = np.abs(got.astype(np.complex128 if want.dtype.kind == "c" else np.float64)[both]
                      - want.astype(np.complex128 if want.dtype.kind == "c" else np.float64)[both])
        err = float(np.max(diff, initial=0.0))
        return ok, None if ok else f"values differ (max abs err {err:.3g})", err
    ok = bool(np.array_equal(got, want))
    return ok, None if ok else "values differ", None

def compare(ref, got, rtol, atol):
    # ref, got: [(name, value)] in output order. (equal, detail, max abs err)
    by_name = dict(got)
    worst = None
    for pos, (name, want) in enumerate(ref):
        if name in by_name:
            value = by_name[name]
        elif pos < len(got):
            value = got[pos][1]
        else:
            return False, f"output {name!r} missing", worst
        ok, why, err = same(want, value, rtol, atol)
        if err is not None:
            worst = max(worst or 0.0, err)
        if not ok:
            return False, f"output {name!r}: {why}", worst
    return True, None, worst
"""

# Reference child: inputs (test_data_set_0 or random), the original's checker verdict, its
# onnxruntime outputs (run twice: a difference means random operators), or the stored outputs
# when onnxruntime cannot run it (not compared either when the model has random operators). Writes a pickle for CHECK_RUNNER, prints one JSON line.
REF_RUNNER = ORT_COMMON + r"""
model_path, data_dir, seed, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
model = onnx.load(model_path, load_external_data=False)
inits = {t.name for t in model.graph.initializer}
graph_inputs = [i for i in model.graph.input if i.name not in inits]

def read_value(path, type_proto):
    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        p = onnx.SequenceProto(); p.ParseFromString(data)
        return p.name, numpy_helper.to_list(p)
    if kind == "optional_type":
        p = onnx.OptionalProto(); p.ParseFromString(data)
        return p.name, numpy_helper.to_optional(p)
    if kind == "map_type":
        p = onnx.MapProto(); p.ParseFromString(data)
        return p.name, numpy_helper.to_dict(p)
    p = onnx.TensorProto(); p.ParseFromString(data)
    return p.name, numpy_helper.to_array(p)

def read_set(prefix, infos):
    paths = sorted(glob.glob(os.path.join(data_dir, prefix + "_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    values = []
    for pos, p in enumerate(paths):
        info = infos[pos] if pos < len(infos) else None
        name, value = read_value(p, info.type if info is not None else None)
        values.append((name or (info.name if info is not None else f"#{pos}"), value))
    return values

def random_inputs():
    rng = np.random.default_rng(seed)
    values = []
    for info in graph_inputs:
        t = info.type
        if t.WhichOneof("value") != "tensor_type":
            raise RuntimeError(f"input {info.name!r}: no random value for a non-tensor type")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type)
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1
                 for d in t.tensor_type.shape.dim]
        if dtype == np.bool_:
            arr = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            arr = rng.integers(0, 4, size=shape).astype(dtype)
        elif dtype.kind in "OUS":
            arr = np.array(rng.choice(["a", "b", "c"], size=shape), dtype=object)
        else:
            arr = rng.standard_normal(size=shape).astype(dtype)
        values.append((info.name, arr))
    return values

RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
              "RandomUniformLike"}

def op_types(graph):
    for node in graph.node:
        yield node.op_type
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from op_types(attr.g)
            for sub in attr.graphs:
                yield from op_types(sub)

result = {"checker": checker(model_path), "opset": default_opset(model), "inputs_from": None,
          "reference": None, "error": None, "nondeterministic": False}
random_ops = sorted(RANDOM_OPS.intersection(op_types(model.graph)))
inputs, outputs = None, None
try:
    if data_dir != "-" and glob.glob(os.path.join(data_dir, "input_*.pb")):
        inputs, result["inputs_from"] = read_set("input", graph_inputs), "test_data_set_0"
    else:
        inputs, result["inputs_from"] = random_inputs(), f"random (seed {seed})"
except Exception as exc:  # noqa: BLE001 - no inputs: nothing can be compared
    result["error"] = "inputs: " + first_line(exc)
if inputs is not None:
    try:
        outputs = run(model_path, inputs)
        again = run(model_path, inputs)
        result["reference"] = "ort"
        if not compare(outputs, again, 0.0, 0.0)[0]:
            result["nondeterministic"] = True
    except Exception as exc:  # noqa: BLE001 - fall back to the stored outputs
        result["error"] = "onnxruntime on the original: " + first_line(exc)
        outputs = None
        if data_dir != "-" and glob.glob(os.path.join(data_dir, "output_*.pb")):
            try:
                outputs = read_set("output", list(model.graph.output))
                result["reference"] = "stored"
                # Random operators: the stored values came from another generator.
                result["nondeterministic"] = bool(random_ops)
            except Exception as exc2:  # noqa: BLE001
                result["error"] += "; stored outputs: " + first_line(exc2)
with open(out_path, "wb") as f:
    pickle.dump({"inputs": inputs, "outputs": outputs,
                 "usable": outputs is not None and not result["nondeterministic"]}, f)
print(json.dumps(result))
"""

# Check child: for each converted model, the checker, the opset it declares, onnxruntime, and
# the comparison with the reference. One JSON line per model, flushed as it is done.
CHECK_RUNNER = ORT_COMMON + r"""
ref_path, rtol, atol = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
with open(ref_path, "rb") as f:
    ref = pickle.load(f)
items = sys.argv[4:]
for key, path in zip(items[0::2], items[1::2]):
    r = {"key": key, "checker": checker(path), "opset": None, "ort_error": None,
         "outputs": None, "detail": None, "max_abs_err": None}
    try:
        r["opset"] = default_opset(onnx.load(path, load_external_data=False))
    except Exception as exc:  # noqa: BLE001
        r["detail"] = "onnx.load: " + first_line(exc)
    if ref["inputs"] is None:
        r["outputs"] = "no ref"
    else:
        try:
            got = run(path, ref["inputs"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime refuses or fails: a result
            r["ort_error"] = first_line(exc)
        else:
            if not ref["usable"]:
                r["outputs"] = "no ref"
            else:
                ok, why, err = compare(ref["outputs"], got, rtol, atol)
                r.update(outputs="equal" if ok else "DIFFERENT", detail=why, max_abs_err=err)
    print(json.dumps(r), flush=True)
"""


@dataclass
class Child:
    returncode: int
    wall_ms: float
    stdout: str
    stderr: str
    timed_out: bool


def run_child(cmd: list[str], timeout_s: float) -> Child:
    """Run cmd in its own session; kill the whole session after timeout_s.

    The wait is a blocking waitpid with a timer thread for the timeout: Popen.wait(timeout=...)
    polls with sleeps of up to 50 ms, which would round every wall time up to that grain."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        fired = threading.Event()

        def kill() -> None:
            fired.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
        wall_ms = (time.perf_counter() - start) * 1e3
        timed_out = fired.is_set()
        out.seek(0)
        err.seek(0)
        return Child(proc.returncode, wall_ms, out.read().decode("utf-8", "replace"),
                     err.read().decode("utf-8", "replace"), timed_out)


def first_error_line(child: Child, timeout_s: float) -> str:
    """Why a child failed: timeout, signal or exit code, and the first non-empty stderr line
    (with the next one when it ends with a colon)."""
    if child.timed_out:
        return f"timeout after {timeout_s:g} s"
    lines = [ln.strip() for ln in child.stderr.splitlines() if ln.strip()]
    if not lines:
        lines = [ln.strip() for ln in child.stdout.splitlines() if ln.strip()][-1:]
    what = (f"exit {child.returncode}" if child.returncode >= 0
            else f"signal {-child.returncode}")
    if not lines:
        return what
    text = lines[0]
    if text.endswith(":") and len(lines) > 1:  # onnx-opt lists the nodes it cannot express
        text += " " + lines[1]
    return f"{what}: {text[:400]}"


def json_lines(text: str) -> list[dict]:
    rows = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


@dataclass
class ModelInfo:
    """One original model: its opset, inputs, reference outputs, checker verdict."""

    suite: str
    model: str
    opset: int | None
    checker: str | None = None        # None: the original passes check_model(full_check=True)
    inputs_from: str | None = None
    reference: str | None = None      # "ort", "stored" or None (nothing to compare with)
    reference_error: str | None = None
    nondeterministic: bool = False
    seconds: float | None = None


@dataclass
class Row:
    """One tool on one (model, target) pair."""

    suite: str
    model: str
    opset: int | None
    target: int
    tool: str
    converted: bool = False
    error: str | None = None           # first line of the failure when not converted
    wall_ms: float | None = None       # median over the runs
    tool_ms: float | None = None
    wall_ms_all: list[float] = field(default_factory=list)
    tool_ms_all: list[float] = field(default_factory=list)
    checker_ok: bool | None = None
    checker_error: str | None = None
    out_opset: int | None = None
    ort_ok: bool | None = None
    ort_error: str | None = None
    outputs: str | None = None         # "equal", "DIFFERENT", "no ref"
    detail: str | None = None
    max_abs_err: float | None = None
    reference: str | None = None


TIME_LINE = re.compile(r"^time: ([0-9.]+) ms", re.MULTILINE)


def convert_cmd(tool: str, args: argparse.Namespace, src: Path, dst: Path,
                target: int) -> list[str]:
    if tool == "onnx-opt":
        cmd = [str(args.onnx_opt), "convert", str(src), "--opset", str(target), "-o", str(dst),
               "--check", "1"]
        if not args.no_check_data and any(src.parent.glob("test_data_set_*")):
            cmd += ["--check-data", str(src.parent)]
        return cmd
    return [sys.executable, "-c", VC_RUNNER, str(src), str(dst), str(target)]


def convert(row: Row, src: Path, dst: Path, args: argparse.Namespace) -> None:
    """--runs conversions of one pair by one tool; stops at the first failure."""
    for _ in range(args.runs):
        if dst.exists():
            dst.unlink()
        child = run_child(convert_cmd(row.tool, args, src, dst, row.target), args.timeout)
        if child.returncode != 0 or child.timed_out:
            row.converted, row.error = False, first_error_line(child, args.timeout)
            return
        if not dst.is_file():
            row.converted, row.error = False, "exit 0 but no output written"
            return
        row.converted = True
        row.wall_ms_all.append(round(child.wall_ms, 1))
        if row.tool == "onnx-opt":
            found = TIME_LINE.search(child.stdout + "\n" + child.stderr)
            if found:
                row.tool_ms_all.append(float(found.group(1)))
        else:
            timing = (json_lines(child.stdout) or [{}])[-1]
            if "tool_ms" in timing:
                row.tool_ms_all.append(round(timing["tool_ms"], 1))
    row.wall_ms = statistics.median(row.wall_ms_all)
    row.tool_ms = statistics.median(row.tool_ms_all) if row.tool_ms_all else None


def apply_check(row: Row, result: dict) -> None:
    row.checker_ok = result.get("checker") is None
    row.checker_error = result.get("checker")
    row.out_opset = result.get("opset")
    row.ort_error = result.get("ort_error")
    row.ort_ok = row.ort_error is None
    row.outputs = result.get("outputs")
    row.detail = result.get("detail")
    row.max_abs_err = result.get("max_abs_err")


def check_outputs(rows: list[tuple[Row, Path]], ref_path: Path,
                  args: argparse.Namespace) -> None:
    """Checker + onnxruntime + comparison of the converted models: one child for all of them;
    those it did not report (a crash, a timeout) again one child each, so one crash is one row."""
    if not rows:
        return

    def cmd(batch):
        items = []
        for pos, (_, path) in batch:
            items += [str(pos), str(path)]
        return [sys.executable, "-c", CHECK_RUNNER, str(ref_path), str(args.rtol),
                str(args.atol), *items]

    indexed = list(enumerate(rows))
    child = run_child(cmd(indexed), args.timeout * len(rows))
    done = {int(r["key"]): r for r in json_lines(child.stdout) if "key" in r}
    for pos, (row, _) in indexed:
        if pos in done:
            apply_check(row, done[pos])
    for pos, (row, path) in indexed:
        if pos in done:
            continue
        alone = run_child(cmd([(pos, (row, path))]), args.timeout)
        got = [r for r in json_lines(alone.stdout) if "key" in r]
        if got:
            apply_check(row, got[0])
        else:  # the child died on this model: onnxruntime or the checker crashed or hung
            row.ort_ok = False
            row.ort_error = "check child: " + first_error_line(alone, args.timeout)


def default_opset(path: Path) -> int | None:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return None


def measure_model(suite: str, model_dir: Path, targets: list[int], args: argparse.Namespace,
                  work: Path) -> tuple[ModelInfo, list[Row]]:
    started = time.perf_counter()
    src = model_dir / "model.onnx"
    try:
        opset = default_opset(src)
    except Exception as exc:  # noqa: BLE001 - an unreadable model is a result too
        info = ModelInfo(suite, model_dir.name, None, checker=f"onnx.load: {exc}"[:400])
        return info, []
    info = ModelInfo(suite, model_dir.name, opset)
    pairs = [t for t in targets if t != opset]
    if opset is None or not pairs:
        info.reference_error = ("no default-domain opset" if opset is None
                                else "every target is the model's opset")
        return info, []
    scratch = work / model_dir.name
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        data_dir = model_dir / "test_data_set_0"
        ref_path = scratch / "reference.pkl"
        ref = run_child([sys.executable, "-c", REF_RUNNER, str(src),
                         str(data_dir) if data_dir.is_dir() else "-", str(args.seed),
                         str(ref_path)], args.timeout * 2)
        meta = (json_lines(ref.stdout) or [None])[-1]
        if meta is None or not ref_path.is_file():
            info.reference_error = "reference child: " + first_error_line(ref, args.timeout * 2)
        else:
            info.checker = meta["checker"]
            info.inputs_from = meta["inputs_from"]
            info.reference = meta["reference"]
            info.reference_error = meta["error"]
            info.nondeterministic = meta["nondeterministic"]
        rows, to_check = [], []
        for target in pairs:
            for tool in TOOLS:
                row = Row(suite, model_dir.name, opset, target, tool)
                dst = scratch / f"{SHORT[tool]}-{target}.onnx"
                convert(row, src, dst, args)
                rows.append(row)
                if row.converted:
                    row.reference = None if info.nondeterministic else info.reference
                    if ref_path.is_file():
                        to_check.append((row, dst))
                    else:
                        row.outputs = "no ref"
        check_outputs(to_check, ref_path, args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    info.seconds = round(time.perf_counter() - started, 2)
    return info, rows


# ---------------------------------------------------------------------------------- printing

def cell(text: str | None, width: int = 90) -> str:
    text = (text or "").replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def short_error(row: Row) -> str:
    """The failure without the model path onnx-opt puts in front of it."""
    text = re.sub(r"^exit 1: ", "", row.error or "")
    text = re.sub(r"(error: )?/\S+/model\.onnx: ", "", text)
    return re.sub(r"/\S+?\.h:\d+: \S+: Assertion `[^`]*` failed: ", "", text)


def status(row: Row) -> str:
    if not row.converted:
        return "FAILED: " + short_error(row)
    if row.ort_ok is False:
        text = "ORT fails: " + re.sub(r"Load model from \S+ failed: ?", "", row.ort_error or "")
    elif row.outputs == "DIFFERENT":
        text = "DIFFERENT: " + (row.detail or "")
    elif row.outputs == "equal":
        text = "equal" + (" (vs stored outputs)" if row.reference == "stored" else "")
    else:
        text = "runs, no ref"
    extra = []
    if row.checker_ok is False:
        extra.append("checker NO")
    if row.out_opset is not None and row.out_opset != row.target:
        extra.append(f"declares opset {row.out_opset}")
    return "; ".join(extra + [text])  # the flags first: the text may be cut


def ms(row: Row) -> str:
    if row.wall_ms is None:
        return "-"
    tool = f" ({row.tool_ms:.0f})" if row.tool_ms is not None else ""
    return f"{row.wall_ms:.0f}{tool}"


def median_or_dash(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "-"


def summary(rows: list[Row]) -> str:
    lines = ["| tool | pairs | converted | checker ok | ORT runs | equal | DIFFERENT | ORT fails "
             "| no ref | median wall ms | median tool ms | median wall ms, both converted |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    both = {(r.model, r.target) for r in rows if r.converted}
    both = {k for k in both if all(r.converted for r in rows if (r.model, r.target) == k)}
    for tool in TOOLS:
        mine = [r for r in rows if r.tool == tool]
        conv = [r for r in mine if r.converted]
        lines.append(
            f"| {tool} | {len(mine)} | {len(conv)} "
            f"| {sum(r.checker_ok is True for r in conv)} "
            f"| {sum(r.ort_ok is True for r in conv)} "
            f"| {sum(r.ort_ok is True and r.outputs == 'equal' for r in conv)} "
            f"| {sum(r.ort_ok is True and r.outputs == 'DIFFERENT' for r in conv)} "
            f"| {sum(r.ort_ok is False for r in conv)} "
            f"| {sum(r.ort_ok is True and r.outputs not in ('equal', 'DIFFERENT') for r in conv)} "
            f"| {median_or_dash([r.wall_ms for r in conv])} "
            f"| {median_or_dash([r.tool_ms for r in conv if r.tool_ms is not None])} "
            f"| {median_or_dash([r.wall_ms for r in conv if (r.model, r.target) in both])} |")
    return "\n".join(lines)


def pair_label(row: Row) -> str:
    return f"{row.model} {row.opset}->{row.target}"


def different_list(rows: list[Row], cap: int | None = None) -> list[str]:
    found = [r for r in rows if r.converted and r.ort_ok and r.outputs == "DIFFERENT"]
    lines = [f"- {pair_label(r)} {r.tool}: {cell(r.detail, 160)}"
             + (" (vs stored outputs)" if r.reference == "stored" else "")
             + ("; checker NO" if r.checker_ok is False else "") for r in found]
    if cap is not None and len(lines) > cap:
        lines = lines[:cap] + [f"- ... and {len(found) - cap} more (see --json)"]
    return lines or ["- none"]


def pair_table(rows: list[Row]) -> str:
    lines = ["| model | from | to | onnx-opt | ms | version_converter | ms |",
             "|---|---|---|---|---|---|---|"]
    by_pair: dict[tuple[str, int], dict[str, Row]] = {}
    for r in rows:
        by_pair.setdefault((r.model, r.target), {})[r.tool] = r
    for (model, target), tools in by_pair.items():
        a, b = tools["onnx-opt"], tools["version_converter"]
        lines.append(f"| {model} | {a.opset} | {target} | {cell(status(a), 120)} | {ms(a)} "
                     f"| {cell(status(b), 120)} | {ms(b)} |")
    return "\n".join(lines)


def one_tool_equal(rows: list[Row], cap: int) -> list[str]:
    by_pair: dict[tuple[str, int], dict[str, Row]] = {}
    for r in rows:
        by_pair.setdefault((r.model, r.target), {})[r.tool] = r
    lines = []
    for tools in by_pair.values():
        good = [t for t, r in tools.items()
                if r.converted and r.ort_ok and r.outputs == "equal"]
        if len(good) == 1:
            winner = tools[good[0]]
            loser = tools["version_converter" if good[0] == "onnx-opt" else "onnx-opt"]
            lines.append(f"- {pair_label(winner)}: only {good[0]} "
                         f"(the other: {cell(status(loser), 140)})")
    if len(lines) > cap:
        lines = lines[:cap] + [f"- ... and {len(lines) - cap} more (see --json)"]
    return lines or ["- none"]


def only_counts(rows: list[Row]) -> str:
    by_pair: dict[tuple[str, int], dict[str, Row]] = {}
    for r in rows:
        by_pair.setdefault((r.model, r.target), {})[r.tool] = r
    counts = {t: 0 for t in TOOLS}
    both = 0
    for tools in by_pair.values():
        good = [t for t, r in tools.items() if r.converted and r.ort_ok and r.outputs == "equal"]
        if len(good) == 2:
            both += 1
        elif len(good) == 1:
            counts[good[0]] += 1
    return (f"pairs: {len(by_pair)}; equal outputs from both tools: {both}; only onnx-opt: "
            f"{counts['onnx-opt']}; only version_converter: {counts['version_converter']}")


def versions() -> dict:
    import importlib.metadata as md
    found = {}
    for name in ("onnx", "onnxruntime", "numpy"):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = None
    found["python"] = sys.version.split()[0]
    return found


def onnx_opt_version(path: Path) -> str | None:
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


# ---------------------------------------------------------------------------------- main

def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=DEFAULT_MODELS,
                        help="directory of <name>/model.onnx (default: %(default)s)")
    parser.add_argument("--only", nargs="+", metavar="NAME", default=None,
                        help="only these model directory names")
    parser.add_argument("--skip-models", action="store_true",
                        help="run no --models (node tests only)")
    parser.add_argument("--targets", nargs="+", type=int, default=[9, 11, 13, 17, 21],
                        metavar="N", help="target opsets for --models (default: %(default)s)")
    parser.add_argument("--node-tests", type=Path, default=None, metavar="DIR",
                        help="also every DIR/<test>/model.onnx (e.g. ../shared/onnx-backend/node)")
    parser.add_argument("--node-targets", nargs="+", type=int, default=[13, 17], metavar="N",
                        help="target opsets for --node-tests (default: %(default)s)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N node tests (by name)")
    parser.add_argument("--onnx-opt", type=Path, default=DEFAULT_ONNX_OPT,
                        help="onnx-opt binary (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=1, help="conversions per tool and pair "
                        "(the time is their median; default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds per conversion (and per onnxruntime check; default: "
                             "%(default)s)")
    parser.add_argument("--rtol", type=float, default=1e-3)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--no-check-data", action="store_true",
                        help="do not give onnx-opt the model's test_data_set_* for its check")
    parser.add_argument("--json", type=Path, default=None, help="write all results here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    if args.limit is not None and args.limit < 0:
        parser.error("--limit must not be negative")
    if min(args.targets + args.node_targets) < 1:
        parser.error("target opsets must be at least 1")
    if args.limit is not None and args.node_tests is None:
        parser.error("--limit applies to --node-tests, which is not given")
    return args


def model_dirs_of(root: Path) -> list[Path]:
    return sorted(d for d in root.iterdir() if (d / "model.onnx").is_file())


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        print(f"error: {sys.executable} lacks {exc.name}: run scripts/setup_venv.sh and use "
              "target/venv-peers/bin/python", file=sys.stderr)
        return 2
    if not (args.onnx_opt.is_file() and os.access(args.onnx_opt, os.X_OK)):
        print(f"error: onnx-opt binary not found at {args.onnx_opt} (build it with "
              "`cargo build --release` or pass --onnx-opt PATH)", file=sys.stderr)
        return 2
    suites: list[tuple[str, list[Path], list[int]]] = []
    if not args.skip_models:
        if not args.models.is_dir():
            print(f"error: models directory {args.models} not found (--models DIR)",
                  file=sys.stderr)
            return 2
        dirs = model_dirs_of(args.models)
        if args.only:
            missing = sorted(set(args.only) - {d.name for d in dirs})
            if missing:
                print(f"error: no such model(s) in {args.models}: {', '.join(missing)}",
                      file=sys.stderr)
                return 2
            dirs = [d for d in dirs if d.name in args.only]
        if not dirs:
            print(f"error: no <name>/model.onnx under {args.models}", file=sys.stderr)
            return 2
        suites.append(("models", dirs, sorted(set(args.targets))))
    if args.node_tests is not None:
        if not args.node_tests.is_dir():
            print(f"error: node tests directory {args.node_tests} not found (--node-tests DIR)",
                  file=sys.stderr)
            return 2
        dirs = model_dirs_of(args.node_tests)
        if args.limit is not None:
            dirs = dirs[: args.limit]
        suites.append(("node", dirs, sorted(set(args.node_targets))))
    if not suites:
        print("error: nothing to run (--skip-models without --node-tests)", file=sys.stderr)
        return 2

    env = versions()
    env["onnx-opt"] = onnx_opt_version(args.onnx_opt)
    print(f"onnx-opt {args.onnx_opt}; versions: {json.dumps(env)}; "
          + "; ".join(f"{s}: {len(d)} models, targets {t}" for s, d, t in suites),
          file=sys.stderr)

    infos: list[ModelInfo] = []
    rows: list[Row] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compare-converters-") as work:
        for suite, dirs, targets in suites:
            for count, model_dir in enumerate(dirs, 1):
                info, got = measure_model(suite, model_dir, targets, args, Path(work))
                infos.append(info)
                rows.extend(got)
                if suite == "models":
                    print(f"  {model_dir.name}: {info.seconds or 0:.1f} s", file=sys.stderr)
                elif count % 50 == 0 or count == len(dirs):
                    print(f"  node tests: {count}/{len(dirs)} "
                          f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    model_rows = [r for r in rows if r.suite == "models"]
    node_rows = [r for r in rows if r.suite == "node"]
    if any(s == "models" for s, _, _ in suites):
        print(f"## Models ({args.models}), targets {sorted(set(args.targets))}\n")
        print(summary(model_rows))
        print()
        print(only_counts(model_rows))
        print("\nDifferent outputs (converted, onnxruntime runs it, outputs differ):\n")
        print("\n".join(different_list(model_rows)))
        print("\nPer pair (ms: median wall time of the subprocess, in parentheses the tool's own "
              "time: onnx-opt's `time:` line, version_converter's convert_version call):\n")
        print(pair_table(model_rows))
        notes = [i for i in infos if i.suite == "models"
                 and (i.checker or i.reference != "ort" or i.nondeterministic)]
        if notes:
            print("\nOriginals with notes:\n")
            for i in notes:
                bits = []
                if i.checker:
                    bits.append(f"original fails the checker: {cell(i.checker, 140)}")
                if i.reference != "ort":
                    bits.append(f"reference: {i.reference or 'none'} ({i.reference_error})")
                if i.nondeterministic:
                    bits.append("nondeterministic outputs: not compared")
                print(f"- {i.model}: " + "; ".join(bits))
    if any(s == "node" for s, _, _ in suites):
        node_infos = [i for i in infos if i.suite == "node"]
        print(f"\n## Node tests ({args.node_tests}, {len(node_infos)} tests), targets "
              f"{sorted(set(args.node_targets))}\n")
        print(summary(node_rows))
        print()
        print(only_counts(node_rows))
        skipped = sum(1 for i in node_infos if i.opset is not None
                      and all(t == i.opset for t in args.node_targets))
        no_opset = sum(i.opset is None for i in node_infos)
        print(f"\noriginals: {no_opset} without a default-domain opset (not run), "
              f"{sum(i.checker is not None for i in node_infos)} fail the checker, "
              f"{sum(i.reference == 'stored' for i in node_infos)} compared with stored outputs "
              f"(onnxruntime cannot run the original), "
              f"{sum(i.reference is None and i.opset is not None for i in node_infos) - skipped} "
              f"without any reference, {sum(i.nondeterministic for i in node_infos)} "
              f"random or nondeterministic (not compared); {skipped} tests already at every target")
        print("\nExactly one tool converted with equal outputs:\n")
        print("\n".join(one_tool_equal(node_rows, 40)))
        print("\nDifferent outputs (converted, onnxruntime runs it, outputs differ):\n")
        print("\n".join(different_list(node_rows)))
    print(f"\ntotal {time.perf_counter() - started:.0f} s", file=sys.stderr)

    if args.json:
        doc = {
            "settings": {"models": None if args.skip_models else str(args.models),
                         "targets": args.targets, "node_tests": str(args.node_tests)
                         if args.node_tests else None, "node_targets": args.node_targets,
                         "limit": args.limit, "runs": args.runs, "timeout_s": args.timeout,
                         "rtol": args.rtol, "atol": args.atol, "seed": args.seed,
                         "onnx_opt": str(args.onnx_opt), "python": sys.executable},
            "environment": {"versions": env, "machine": platform.machine(),
                            "cpus": os.cpu_count(), "platform": platform.platform()},
            "models": [asdict(i) for i in infos],
            "results": [asdict(r) for r in rows],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
