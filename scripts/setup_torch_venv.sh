#!/usr/bin/env bash
# Create a Python venv with PyTorch (CPU use only) and its dynamo/torch.export ONNX exporter
# (onnxscript), onnx and onnxruntime, for scripts/export_torch_models.py and
# benches/torch_models.sh. Never needed to build or test the Rust product.
#
# usage: scripts/setup_torch_venv.sh [DIR]      (default: target/venv-torch in the repo root)
# env:   PYTHON=python3.11 to choose the interpreter (default: python3)
#
# The Linux x86_64 torch wheel on PyPI is a CUDA build: libtorch.so itself is linked against
# libcudart, libcublas, libcudnn, ... so `import torch` fails without the nvidia-* wheels, even on
# a machine without a GPU. We install torch with --no-deps and list its dependencies ourselves:
# the pure-Python ones, and only the nvidia-* runtime libraries that libtorch links against
# (about 3 GB). Left out: triton (1 GB, only for torch.compile's GPU kernels), cuda-bindings,
# cuda-toolkit (a meta package) and nvidia-cuda-cccl (C++ headers). The whole venv is ~4.5 GB.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="${1:-$repo_root/target/venv-torch}"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null 2>&1; then
    echo "error: interpreter '$python' not found (set PYTHON=...)" >&2
    exit 1
fi
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
case "$py_version" in
    3.11) ;;
    *) echo "warning: pins were checked on Python 3.11; $python is $py_version" >&2 ;;
esac

if [[ ! -x "$venv_dir/bin/python" ]]; then
    echo "creating venv $venv_dir with $python ($py_version)"
    mkdir -p "$(dirname "$venv_dir")"
    "$python" -m venv "$venv_dir"
fi

pip=("$venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir
     --only-binary :all: --no-deps)

"${pip[@]}" \
    torch==2.15.0 \
    onnxscript==0.7.2 \
    onnx-ir==1.1.0 \
    onnx==1.23.2 \
    onnxruntime==1.31.1 \
    numpy==2.4.6 \
    `# torch's pure-Python dependencies` \
    filelock==4.2.12 \
    typing_extensions==4.16.0 \
    setuptools==84.2.1 \
    sympy==1.14.0 \
    mpmath==1.3.0 \
    networkx==3.6.1 \
    Jinja2==3.1.6 \
    MarkupSafe==3.0.4 \
    fsspec==2026.9.0 \
    `# onnx / onnxruntime / onnxscript dependencies` \
    protobuf==7.36.2 \
    ml_dtypes==0.6.0 \
    packaging==26.3 \
    flatbuffers==25.12.19 \
    `# the CUDA runtime libraries libtorch.so is linked against (needed by import torch)` \
    nvidia-cublas==13.4.1.3 \
    nvidia-cuda-cupti==13.2.86 \
    nvidia-cuda-nvrtc==13.2.86 \
    nvidia-cuda-runtime==13.2.86 \
    nvidia-cudnn-cu13==9.26.0.51 \
    nvidia-cufft==12.2.0.57 \
    nvidia-cufile==1.17.1.22 \
    nvidia-cusolver==12.2.0.11 \
    nvidia-cusparse==12.7.10.12 \
    nvidia-cusparselt-cu13==0.8.1 \
    nvidia-nccl-cu13==2.30.7 \
    nvidia-nvjitlink==13.5.37 \
    nvidia-nvshmem-cu13==3.7.2 \
    nvidia-nvtx==13.2.86 \
    `# transformers, for scripts/export_hf_decoders.py (4.46: its masks are plain torch ops,` \
    `# which the TorchScript exporter traces; later versions build them with vmap)` \
    transformers==4.46.3 \
    huggingface_hub==0.36.2 \
    tokenizers==0.20.3 \
    safetensors==0.8.0 \
    regex==2026.11.19 \
    PyYAML==6.0.4 \
    requests==2.34.2 \
    tqdm==4.70.1 \
    urllib3==2.8.0 \
    idna==3.20 \
    certifi==2026.10.19.post1 \
    charset-normalizer==3.5.3 \
    hf-xet==1.8.0

"$venv_dir/bin/python" - <<'PY'
import importlib.metadata as md
import torch
x = torch.randn(4, 4)
assert torch.allclose(x @ torch.eye(4), x)
for name in ("torch", "onnxscript", "onnx-ir", "onnx", "onnxruntime", "numpy", "transformers"):
    print(f"  {name}=={md.version(name)}")
PY
du -sh "$venv_dir" | sed 's/^/  size: /'
