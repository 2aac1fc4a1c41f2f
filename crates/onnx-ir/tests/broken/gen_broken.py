#!/usr/bin/env python3
"""Build the broken-model corpus: tests/broken/NAME.txt -> tests/broken/NAME.onnx.

Each NAME.txt is a model in the ONNX text syntax (onnx.parser), preceded by `#` comment lines.
A few defects cannot be written in that syntax; a comment line `# patch: ...` applies one after
parsing:

    # patch: raw_data TENSOR N     initializer TENSOR stores N zero bytes in raw_data
    # patch: dims TENSOR D0 D1 ... initializer TENSOR gets these dims

The Rust test tests/broken.rs checks each NAME.onnx and compares the messages with the insta
snapshot tests/snapshots/broken__NAME.snap (INSTA_UPDATE=always rewrites them). This script also writes
onnx_checker.verdicts: onnx.checker's own verdict (full_check=True) on every case, to compare.

Usage (from the repo root):
    /work/venv/bin/python crates/onnx-ir/tests/broken/gen_broken.py          # write
    /work/venv/bin/python crates/onnx-ir/tests/broken/gen_broken.py --check  # verify, exit 1 if stale
"""

import argparse
import pathlib
import sys

import onnx
import onnx.checker
import onnx.parser

HERE = pathlib.Path(__file__).resolve().parent


def initializer(model: onnx.ModelProto, name: str) -> onnx.TensorProto:
    for tensor in model.graph.initializer:
        if tensor.name == name:
            return tensor
    raise SystemExit(f"no initializer named {name!r}")


def apply_patch(model: onnx.ModelProto, words: list[str], case: str) -> None:
    kind, args = words[0], words[1:]
    if kind == "raw_data" and len(args) == 2:
        tensor = initializer(model, args[0])
        for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            tensor.ClearField(field)
        tensor.raw_data = bytes(int(args[1]))
    elif kind == "dims" and len(args) >= 1:
        tensor = initializer(model, args[0])
        del tensor.dims[:]
        tensor.dims.extend(int(d) for d in args[1:])
    else:
        raise SystemExit(f"{case}: unknown patch {' '.join(words)!r}")


def build(path: pathlib.Path) -> bytes:
    lines = path.read_text().splitlines()
    patches = [l.split(":", 1)[1].split() for l in lines if l.startswith("# patch:")]
    text = "\n".join(l for l in lines if not l.startswith("#"))
    model = onnx.parser.parse_model(text)
    for words in patches:
        apply_patch(model, words, path.stem)
    return model.SerializeToString(deterministic=True)


def onnx_verdict(data: bytes) -> str:
    model = onnx.ModelProto()
    model.ParseFromString(data)
    try:
        onnx.checker.check_model(model, full_check=True)
        return "accepts"
    except Exception as err:  # ValidationError, InferenceError, ...
        text = str(err).strip()
        return "rejects: " + (text.splitlines()[0] if text else type(err).__name__)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify the files, write nothing")
    args = parser.parse_args()
    stale = []
    verdicts = [f"# onnx.checker (onnx {onnx.__version__}, full_check=True) on each case; written by gen_broken.py"]
    for txt in sorted(HERE.glob("*.txt")):
        data = build(txt)
        target = txt.with_suffix(".onnx")
        verdicts.append(f"{txt.stem}: {onnx_verdict(data)}")
        if args.check:
            if not target.is_file() or target.read_bytes() != data:
                stale.append(target.name)
        else:
            target.write_bytes(data)
    summary = "\n".join(verdicts) + "\n"
    summary_path = HERE / "onnx_checker.verdicts"
    if args.check:
        if not summary_path.is_file() or summary_path.read_text() != summary:
            stale.append(summary_path.name)
        if stale:
            print("stale, rerun gen_broken.py:", ", ".join(stale))
            return 1
        print("up to date")
    else:
        summary_path.write_text(summary)
        print(summary, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
