#!/usr/bin/env bash
# Build the Python package into a fresh venv and run its pytest suite (python/tests).
#
# usage: scripts/test_python.sh [VENV_DIR]     (default: target/venv-python, recreated each run)
# env:   PYTHON=python3.11 to choose the interpreter (default: python3)
# Needs the Rust toolchain, Python 3.9+ and pip (the build runs through `pip install .`, which
# fetches maturin; the suite's pins are python/requirements-test.txt).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="${1:-$repo_root/target/venv-python}"
python="${PYTHON:-python3}"

rm -rf "$venv_dir"
"$python" -m venv "$venv_dir"
pip=("$venv_dir/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --only-binary :all: -r "$repo_root/python/requirements-test.txt"
start=$(date +%s)
"${pip[@]}" install --quiet "$repo_root"
echo "pip install . took $(( $(date +%s) - start )) s"
cd "$repo_root"
"$venv_dir/bin/python" -m pytest python/tests -q
