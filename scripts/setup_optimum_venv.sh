#!/usr/bin/env bash
# Create a Python venv for scripts/export_optimum_decoders.py: Hugging Face Optimum's ONNX
# exporter (optimum-onnx) with transformers 4.57, on top of the torch venv of
# scripts/setup_torch_venv.sh (its site-packages are put on the path by a .pth file, so torch's
# 4.5 GB is not installed twice; transformers and tokenizers here take precedence over that
# venv's 4.46). Also onnxruntime-genai's model builder and onnxslim, for benches/ort_decoders.py,
# and Pillow (the DINOv2 image processor scripts/export_optimum_catalogue.py saves).
# Never needed to build or test the Rust product.
#
# usage: scripts/setup_optimum_venv.sh [DIR] [TORCH_VENV]
#        (defaults: target/venv-optimum and target/venv-torch in the repo root)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="${1:-$repo_root/target/venv-optimum}"
torch_venv="${2:-$repo_root/target/venv-torch}"

if [[ ! -x "$torch_venv/bin/python" ]]; then
    bash "$repo_root/scripts/setup_torch_venv.sh" "$torch_venv"
fi
torch_site="$("$torch_venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
if [[ ! -x "$venv_dir/bin/python" ]]; then
    python3 -m venv "$venv_dir"
fi
own_site="$("$venv_dir/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
echo "$torch_site" > "$own_site/torch_venv.pth"

"$venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    --only-binary :all: --no-deps \
    transformers==4.57.1 \
    tokenizers==0.22.2 \
    optimum==2.1.0 \
    optimum-onnx==0.1.0 \
    onnxruntime-genai==0.18.0 \
    onnxslim==0.1.98 \
    colorama==0.4.6 \
    pillow==13.0.0

"$venv_dir/bin/python" - <<'PY'
import importlib.metadata as md
import optimum.exporters.onnx  # noqa: F401  (the exporter imports)
import torch  # noqa: F401
for name in ("torch", "transformers", "optimum", "optimum-onnx", "onnx", "onnxruntime",
             "onnxruntime-genai", "onnxslim"):
    print(f"  {name}=={md.version(name)}")
PY
