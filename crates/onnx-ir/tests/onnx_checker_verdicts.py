#!/usr/bin/env python3
"""Record onnx.checker's verdict on every shared model, for the Rust checker's acceptance test.

Writes crates/onnx-ir/tests/onnx_checker_verdicts.txt: one line per model,
`<path relative to the shared dir> <basic> <full>`, where <basic> is the verdict of
`onnx.checker.check_model(path)` and <full> that of `check_model(path, full_check=True)` (which
adds strict shape and type inference, where onnx checks the type constraints of every node).
A verdict is `ok` or `rejected`; a rejected model gets a comment line with onnx's first message
line above it. The Rust test (tests/schema_check.rs) asserts that `onnx_ir::check_model` accepts
exactly the models whose <full> verdict is `ok`.

Usage (from the repo root):
    /work/venv/bin/python crates/onnx-ir/tests/onnx_checker_verdicts.py [--shared ../shared]
"""

import argparse
import pathlib
import sys

import onnx
import onnx.checker

SUITES = [
    "onnx-backend/node",
    "onnx-backend/simple",
    "onnx-backend/pytorch-converted",
    "onnx-backend/pytorch-operator",
    "models",
]


def verdict(path: pathlib.Path, full_check: bool):
    try:
        onnx.checker.check_model(str(path), full_check=full_check)
        return "ok", None
    except Exception as err:  # onnx raises ValidationError, InferenceError, ...
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return "rejected", first


def main() -> int:
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=pathlib.Path, default=here.parents[3] / "shared")
    parser.add_argument("--out", type=pathlib.Path, default=here / "onnx_checker_verdicts.txt")
    args = parser.parse_args()
    shared = args.shared.resolve()
    lines = [
        f"# onnx.checker verdicts (onnx {onnx.__version__}), written by onnx_checker_verdicts.py.",
        "# <model> <check_model> <check_model full_check=True>",
    ]
    counts = {}
    for suite in SUITES:
        models = sorted(p / "model.onnx" for p in (shared / suite).iterdir())
        for model in models:
            if not model.is_file():
                continue
            basic, basic_msg = verdict(model, False)
            full, full_msg = verdict(model, True)
            msg = basic_msg or full_msg
            if msg:
                lines.append(f"# {msg}")
            lines.append(f"{model.relative_to(shared)} {basic} {full}")
            counts[(basic, full)] = counts.get((basic, full), 0) + 1
    args.out.write_text("\n".join(lines) + "\n")
    for key, count in sorted(counts.items()):
        print(f"{key[0]:>8} {key[1]:>8} {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
