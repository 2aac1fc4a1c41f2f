"""A PyTorch export optimized in the same process as the exporter.

The committed export (tests/models/torch/cnn_opset18.onnx, made by scripts/export_torch_models.py
with torch's torch.export-based exporter, with torch's own outputs in cnn_io.npz) always runs.
Exporting in this process needs torch: without it that part is skipped, and says so.
"""

import importlib.util
import inspect

import numpy as np
import onnx
import pytest

import onnx_opt
from helpers import REPO, assert_outputs_close, node_count, op_histogram, ort_run

TORCH_DIR = REPO / "tests/models/torch"


def test_committed_torch_export_optimizes_to_torchs_outputs():
    path = TORCH_DIR / "cnn_opset18.onnx"
    io_ = np.load(TORCH_DIR / "cnn_io.npz")
    torch_outputs = {"logits": io_["logits"]}
    feeds = {"input": io_["input"]}
    original = onnx.load(str(path))
    assert_outputs_close(ort_run(original, feeds), torch_outputs)  # the file is what torch computed

    for given in (path, original, path.read_bytes()):
        out, rep = onnx_opt.optimize(given, report=True)
        proto = out if isinstance(out, onnx.ModelProto) else onnx.ModelProto.FromString(out)
        assert node_count(proto) <= node_count(original)
        assert rep["nodes_before"] == node_count(original) == 13
        assert_outputs_close(ort_run(proto, feeds), torch_outputs)
        assert_outputs_close(onnx_opt.run(proto, feeds), torch_outputs)

    down = onnx_opt.convert(path, 13)
    assert [o.version for o in down.opset_import if o.domain in ("", "ai.onnx")] == [13]
    assert_outputs_close(ort_run(down, feeds), torch_outputs)


def test_torch_export_in_this_process(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(
            "torch is not installed: the in-process export is not tested (the committed export "
            "tests/models/torch/cnn_opset18.onnx is, in test_committed_torch_export_optimizes_to_torchs_outputs)"
        )
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            y = y.mean(dim=(2, 3))
            return torch.softmax(self.fc(y), dim=-1)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        expected = {"y": net(x).numpy()}

    # the TorchScript exporter where torch still has it (it writes one file, no onnxscript)
    kwargs = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, (x,), str(path), input_names=["x"], output_names=["y"], opset_version=17, **kwargs)
    feeds = {"x": x.numpy()}

    from_path = onnx_opt.optimize(path)
    from_bytes = onnx.ModelProto.FromString(onnx_opt.optimize(path.read_bytes()))
    for out in (from_path, from_bytes):
        assert node_count(out) <= node_count(onnx.load(str(path)))
        assert op_histogram(out)["BatchNormalization"] == 0
        assert_outputs_close(ort_run(out, feeds), expected)
