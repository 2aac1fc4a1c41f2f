"""``python -m onnx_opt`` and the ``onnx-opt`` console script: the Rust command line, run in
the Python process."""

import json
import pathlib
import subprocess
import sys

import onnx
import pytest

from helpers import TEXT_MODELS, assert_outputs_close, ort_run, random_feeds, text_model

MLP = TEXT_MODELS["mlp"]


def _run(args, script=None, **kwargs):
    cmd = [script] if script else [sys.executable, "-m", "onnx_opt"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=120, **kwargs)


def _console_script():
    """The ``onnx-opt`` script installed beside this Python, or None."""
    bindir = pathlib.Path(sys.executable).parent
    for name in ("onnx-opt", "onnx-opt.exe"):
        if (bindir / name).is_file():
            return str(bindir / name)
    return None


def test_help():
    r = _run(["--help"])
    assert r.returncode == 0, r.stderr
    assert "usage" in r.stdout.lower()
    assert "onnx-opt" in r.stdout
    assert "convert" in r.stdout


def test_optimize_quiet_writes_the_output(tmp_path):
    out = tmp_path / "mlp_opt.onnx"
    r = _run([MLP, "-o", out, "--quiet"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    saved = onnx.load(str(out))
    assert [n.op_type for n in saved.graph.node] == ["Gemm", "Relu", "Gemm", "Softmax"]
    model = text_model("mlp")
    feeds = random_feeds(model, 0)
    assert_outputs_close(ort_run(saved, feeds), ort_run(model, feeds))


def test_report_on_stdout_is_json(tmp_path):
    out = tmp_path / "mlp_opt.onnx"
    r = _run(["optimize", MLP, "-o", out, "--report", "-"])
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["nodes_before"] == 10
    assert report["nodes_after"] == len(onnx.load(str(out)).graph.node) == 4
    assert pathlib.Path(report["output"]).name == out.name


def test_report_on_stdout_with_quiet(tmp_path):
    out = tmp_path / "mlp_opt.onnx"
    r = _run([MLP, "-o", out, "--report", "-", "--quiet"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["nodes_after"] == 4


def test_convert_command(tmp_path):
    out = tmp_path / "mlp13.onnx"
    r = _run(["convert", MLP, "--opset", "13", "-o", out, "--quiet"])
    assert r.returncode == 0, r.stderr
    saved = onnx.load(str(out))
    assert [o.version for o in saved.opset_import if o.domain == ""] == [13]


def test_errors_exit_with_1_and_usage_with_2(tmp_path):
    r = _run([tmp_path / "missing.onnx", "-o", tmp_path / "o.onnx"])
    assert r.returncode == 1
    assert "missing.onnx" in r.stderr
    assert not (tmp_path / "o.onnx").exists()
    r = _run(["--no-such-flag"])
    assert r.returncode == 2
    assert r.stderr


def test_print_writes_the_whole_model_on_stdout():
    # `print` writes the text syntax, whose last line "}" has no newline after it: all of it
    # must come out of the Python process, as it does from the Rust binary
    r = _run(["print", MLP])
    assert r.returncode == 0, r.stderr
    assert "Softmax" in r.stdout
    assert r.stdout.rstrip().endswith("}"), f"stdout ends with {r.stdout[-60:]!r}"
    printed = onnx.parser.parse_model(r.stdout)
    assert len(printed.graph.node) == 10


def test_console_script(tmp_path):
    script = _console_script()
    if script is None:
        pytest.skip(f"the onnx-opt console script is not installed beside {sys.executable}")
    r = _run(["--help"], script=script)
    assert r.returncode == 0 and "usage" in r.stdout.lower()
    out = tmp_path / "o.onnx"
    r = _run([MLP, "-o", out, "--quiet"], script=script)
    assert r.returncode == 0, r.stderr
    assert len(onnx.load(str(out)).graph.node) == 4


def test_target_onnxruntime(tmp_path):
    """`--target onnxruntime` writes onnxruntime's contrib ops (a residual RMS norm as
    SkipSimplifiedLayerNormalization, opset 23 kept), onnxruntime runs it with the original's
    outputs; an unknown target is an error naming it, and --pipeline beside it a usage error,
    neither writing anything."""
    src = tmp_path / "block.onnx"
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 23]>
        g (float[1, 3, 8] a, float[1, 3, 8] b) => (float[1, 3, 8] y, float[1, 3, 8] t) {
          s = Constant <value = float[8] {0.5, 1.5, 2.0, 0.25, 1.25, 0.75, 3.0, 1.1}> ()
          t = Add(a, b)
          y = RMSNormalization <axis = -1> (t, s)
        }"""
    )
    onnx.save(model, str(src))
    out = tmp_path / "out.onnx"
    r = _run([src, "-o", out, "--target", "onnxruntime", "--quiet"])
    assert r.returncode == 0, r.stderr
    saved = onnx.load(str(out))
    assert [(n.domain, n.op_type) for n in saved.graph.node] == [
        ("com.microsoft", "SkipSimplifiedLayerNormalization")
    ]
    feeds = random_feeds(model, 0)
    assert_outputs_close(ort_run(saved, feeds), ort_run(model, feeds))
    bad = tmp_path / "bad.onnx"
    r = _run([src, "-o", bad, "--target", "tensorrt"])
    assert r.returncode == 1 and "tensorrt" in r.stderr, r.stderr
    r = _run([src, "-o", bad, "--target", "onnxruntime", "--pipeline", "fast"])
    assert r.returncode == 2 and "--pipeline" in r.stderr, r.stderr
    assert not bad.exists()
