#!/usr/bin/env bash
# Run onnx-opt's `convert` (to several opsets) and `optimize` on the PyTorch dynamo-exported
# models in tests/models/torch, next to onnx.version_converter, onnxsim and onnxslim, and check
# every output: onnx.checker.check_model(full_check=True), and onnxruntime outputs equal to the
# original model's (rtol 1e-4, atol 1e-5) on three random inputs (for dynamic batch/sequence:
# shapes 2x8, 3x5 and 1x12).
#
# usage: benches/torch_models.sh [--onnx-opt PATH] [--python PATH] [--out DIR] [--opsets "17 14 13 11"]
#   --onnx-opt  the binary (default target/release/onnx-opt)
#   --python    an interpreter with onnx, onnxruntime, onnxsim, onnxslim
#               (default target/venv-peers/bin/python, made by scripts/setup_venv.sh)
#   --out       where converted/optimized models, results.json and results.md go
#               (default target/torch-models)
# The models are made by scripts/export_torch_models.py (see tests/models/torch/README.md).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
onnx_opt="$repo_root/target/release/onnx-opt"
python="$repo_root/target/venv-peers/bin/python"
out="$repo_root/target/torch-models"
opsets="17 14 13 11"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --onnx-opt) onnx_opt="$2"; shift 2 ;;
        --python) python="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --opsets) opsets="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -x "$onnx_opt" ]] || { echo "error: no onnx-opt binary at $onnx_opt (--onnx-opt PATH)" >&2; exit 1; }
[[ -x "$python" ]] || { echo "error: no interpreter at $python (--python PATH)" >&2; exit 1; }
mkdir -p "$out"

ONNX_OPT="$onnx_opt" MODELS="$repo_root/tests/models/torch" OUT="$out" OPSETS="$opsets" \
    exec "$python" - <<'PY'
import collections, json, os, subprocess, time, traceback
import numpy as np
import onnx
import onnxruntime as ort
from onnx import version_converter

ONNX_OPT, MODELS, OUT = os.environ["ONNX_OPT"], os.environ["MODELS"], os.environ["OUT"]
OPSETS = [int(x) for x in os.environ["OPSETS"].split()]
NAMES = ["cnn", "bert", "llama"]
SHAPES = [{"batch": 2, "seq": 8}, {"batch": 3, "seq": 5}, {"batch": 1, "seq": 12}]
RTOL, ATOL = 1e-4, 1e-5

NP = {1: np.float32, 7: np.int64, 6: np.int32, 9: np.bool_, 10: np.float16, 11: np.float64}


def random_inputs(model, trial):
    rng = np.random.default_rng(1234 + trial)
    feeds = {}
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else SHAPES[trial][d.dim_param]
                 for d in tt.shape.dim]
        dt = NP[tt.elem_type]
        if vi.name == "attention_mask":
            a = (rng.random(shape) < 0.8).astype(dt)
            a[..., 0] = 1
        elif np.issubdtype(dt, np.integer):
            a = rng.integers(0, 100, size=shape).astype(dt)
        else:
            a = rng.standard_normal(shape).astype(dt)
        feeds[vi.name] = a
    return feeds


def run(path_or_model, feeds):
    data = path_or_model if isinstance(path_or_model, bytes) else open(path_or_model, "rb").read()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def compare(orig_model, cand_bytes):
    """'equal' or a description of the first difference / failure."""
    worst = 0.0
    for trial in range(len(SHAPES)):
        feeds = random_inputs(orig_model, trial)
        try:
            ref = run(orig_model.SerializeToString(), feeds)
        except Exception as e:
            return f"original fails in ORT: {e}"
        try:
            got = run(cand_bytes, feeds)
        except Exception as e:
            return "ORT error: " + str(e).splitlines()[0][:300]
        for i, (r, g) in enumerate(zip(ref, got)):
            if r.shape != g.shape:
                return f"output {i} shape {g.shape} != {r.shape}"
            if not np.allclose(g, r, rtol=RTOL, atol=ATOL, equal_nan=True):
                d = np.nanmax(np.abs(g.astype(np.float64) - r))
                return f"output {i} differs (max abs diff {d:.3g}, trial {trial})"
            if r.size and np.issubdtype(r.dtype, np.floating):
                worst = max(worst, float(np.nanmax(np.abs(g.astype(np.float64) - r))))
    return f"equal (max abs diff {worst:.2g})"


def checker(model):
    try:
        onnx.checker.check_model(model, full_check=True)
        return "ok"
    except Exception as e:
        return "FAIL: " + str(e).strip().splitlines()[0][:300]


def hist(model):
    return dict(sorted(collections.Counter(n.op_type for n in model.graph.node).items()))


def onnx_opt(args):
    t = time.perf_counter()
    p = subprocess.run([ONNX_OPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr, time.perf_counter() - t


def judge(orig, out_path=None, model=None):
    if model is None:
        model = onnx.load(out_path)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    return {"nodes": len(model.graph.node), "opset": opset, "ir_version": model.ir_version,
            "checker": checker(model), "outputs": compare(orig, model.SerializeToString()),
            "ops": hist(model)}


results = {}
for name in NAMES:
    path = os.path.join(MODELS, f"{name}_opset18.onnx")
    orig = onnx.load(path)
    r = results[name] = {"nodes": len(orig.graph.node), "ops": hist(orig), "convert": {},
                         "version_converter": {}, "optimize": {}}
    for n in OPSETS:
        dst = os.path.join(OUT, f"{name}_onnxopt_op{n}.onnx")
        if os.path.exists(dst):
            os.remove(dst)
        rc, so, se, dt = onnx_opt(["convert", path, "--opset", str(n), "-o", dst])
        e = {"rc": rc, "seconds": round(dt, 3)}
        if rc == 0 and os.path.exists(dst):
            e.update(judge(orig, dst))
        else:
            e["error"] = (se or so).strip()
        r["convert"][n] = e
        try:
            m2 = version_converter.convert_version(orig, n)
            e2 = judge(orig, model=m2)
            onnx.save(m2, os.path.join(OUT, f"{name}_vc_op{n}.onnx"))
        except Exception as ex:
            e2 = {"error": f"{type(ex).__name__}: " + str(ex).strip().splitlines()[0][:400]}
        r["version_converter"][n] = e2

    dst = os.path.join(OUT, f"{name}_onnxopt_opt.onnx")
    rc, so, se, dt = onnx_opt(["optimize", path, "-o", dst,
                               "--report", os.path.join(OUT, f"{name}_onnxopt_opt.json")])
    e = {"rc": rc, "seconds": round(dt, 3)}
    if rc == 0:
        e.update(judge(orig, dst))
    else:
        e["error"] = (se or so).strip()
    r["optimize"]["onnx-opt"] = e
    for peer in ("onnxsim", "onnxslim"):
        try:
            t = time.perf_counter()
            if peer == "onnxsim":
                import onnxsim
                m2, ok = onnxsim.simplify(onnx.load(path))
                note = "" if ok else " (onnxsim's own check failed)"
            else:
                import onnxslim
                m2 = onnxslim.slim(onnx.load(path))
                note = ""
            dt = time.perf_counter() - t
            onnx.save(m2, os.path.join(OUT, f"{name}_{peer}.onnx"))
            e = judge(orig, model=m2)
            e["seconds"] = round(dt, 3)
            e["note"] = note
        except Exception as ex:
            e = {"error": f"{type(ex).__name__}: " + str(ex).strip().splitlines()[0][:400]}
        r["optimize"][peer] = e

with open(os.path.join(OUT, "results.json"), "w") as f:
    json.dump(results, f, indent=1, default=str)


def cell(e):
    if "error" in e:
        return "FAIL"
    bad = []
    if e["checker"] != "ok":
        bad.append("checker")
    if e["outputs"].startswith("ORT error"):
        bad.append("ORT refuses")
    elif not e["outputs"].startswith("equal"):
        bad.append("outputs differ")
    return "ok" if not bad else "written, invalid (" + ", ".join(bad) + ")"


lines = ["## convert (onnx-opt / onnx.version_converter)", "",
         "| model | " + " | ".join(f"-> {n}" for n in OPSETS) + " |",
         "|---|" + "---|" * len(OPSETS)]
for name, r in results.items():
    lines.append(f"| {name} | " + " | ".join(
        f"{cell(r['convert'][n])} / {cell(r['version_converter'][n])}" for n in OPSETS) + " |")
lines += ["", "## optimize (nodes before -> after; checker; outputs)", "",
          "| model | before | onnx-opt | onnxsim | onnxslim |", "|---|---|---|---|---|"]
for name, r in results.items():
    cells = []
    for tool in ("onnx-opt", "onnxsim", "onnxslim"):
        e = r["optimize"][tool]
        cells.append("FAIL" if "error" in e else f"{e['nodes']} {cell(e)}")
    lines.append(f"| {name} | {r['nodes']} | " + " | ".join(cells) + " |")
lines += ["", "## errors", ""]
for name, r in results.items():
    for kind in ("convert", "version_converter", "optimize"):
        for k, e in r[kind].items():
            if "error" in e:
                lines += [f"### {name} {kind} {k}", "```", e["error"], "```"]
            elif e.get("checker", "ok") != "ok" or not e.get("outputs", "equal").startswith("equal"):
                lines += [f"### {name} {kind} {k}", "```", e["checker"], e["outputs"], "```"]
lines += ["", "## details", ""]
for name, r in results.items():
    for kind in ("convert", "version_converter", "optimize"):
        for k, e in r[kind].items():
            if "error" not in e:
                lines.append(f"- {name} {kind} {k}: {e['nodes']} nodes, opset {e['opset']}, ir {e['ir_version']}, "
                             f"checker {e['checker']}, {e['outputs']}" +
                             (f", {e['seconds']} s" if 'seconds' in e else ""))
md = "\n".join(lines) + "\n"
with open(os.path.join(OUT, "results.md"), "w") as f:
    f.write(md)
print(md)
PY
