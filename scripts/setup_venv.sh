#!/usr/bin/env bash
# Create a Python venv with the pinned peer optimizers (onnxsim, onnxslim, onnxoptimizer),
# onnxruntime and onnx, for benches/compare_peers.py, benches/io_throughput.py and
# scripts/gen_backend_tests.sh. Never needed to build or test the Rust product.
#
# usage: scripts/setup_venv.sh [DIR]      (default: target/venv-peers in the repo root)
# env:   PYTHON=python3.11 to choose the interpreter (default: python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="${1:-$repo_root/target/venv-peers}"
python="${PYTHON:-python3}"
requirements="$repo_root/scripts/requirements-peers.txt"

if ! command -v "$python" >/dev/null 2>&1; then
    echo "error: interpreter '$python' not found (set PYTHON=...)" >&2
    exit 1
fi
py_version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
case "$py_version" in
    3.10|3.11|3.12|3.13) ;;
    *) echo "warning: pins were checked on Python 3.11; $python is $py_version" >&2 ;;
esac

if [[ ! -x "$venv_dir/bin/python" ]]; then
    echo "creating venv $venv_dir with $python ($py_version)"
    mkdir -p "$(dirname "$venv_dir")"
    "$python" -m venv "$venv_dir"
fi

# Wheels only: a package that would need a C++ build (onnxsim, onnxoptimizer) fails loudly
# here instead of spending many minutes compiling.
"$venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    --only-binary :all: -r "$requirements"

"$venv_dir/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("onnx", "numpy", "onnxruntime", "onnxsim", "onnxslim", "onnxoptimizer", "pillow"):
    print(f"  {name}=={md.version(name)}")
PY
echo "ready: $venv_dir (python: $venv_dir/bin/python)"
