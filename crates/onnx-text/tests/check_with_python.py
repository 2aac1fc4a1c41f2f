#!/usr/bin/env python3
"""Checks text printed by onnx-text against onnx's own parser and printer.

Usage:
    check_with_python.py TEXT_DIR MODEL_ROOT [MODEL_ROOT ...]

TEXT_DIR holds `<name>.txt` files written by onnx-text's printer (for example by
`cargo run --release -p onnx-text --example print_models -- TEXT_DIR MODEL_ROOT`); the
original of `<name>.txt` is `MODEL_ROOT/<name>/model.onnx` or `MODEL_ROOT/<name>.onnx` in the
first root that has one.

For each file it reports:
  * whether `onnx.parser.parse_model` accepts the text;
  * whether the parsed model equals `onnx.load` of the original: exactly (serialized bytes),
    semantically (ignoring absent versus empty fields and raw_data versus typed storage:
    tensors are compared as arrays, bit for bit), or once the fields that only onnx-text's
    `#@` annotations carry are left out (doc strings and metadata of graphs, nodes, values
    and tensors, sparse initializers, ...: onnx's parser skips annotation lines);
  * whether the text, without its `#@` annotation lines and with whitespace collapsed, is
    what `onnx.printer.to_text` writes for the original (onnx's printer elides some tensor
    types as `...`, which onnx-text prints in full: those count as "elided by onnx"; it also
    leaves out a function's doc string, attribute defaults and value infos, which onnx-text
    prints in the syntax onnx's parser reads: those show as "text differs").

Exits non-zero when a file fails to parse or differs semantically.
Needs onnx (1.23.2) and numpy.
"""

import math
import pathlib
import re
import struct
import sys

import numpy as np
import onnx
from google.protobuf.message import Message
from onnx import numpy_helper


# Fields that only onnx-text's `#@` annotations carry (onnx's parser skips those lines),
# by message type; the model's and functions' doc strings are in their headers.
ANNOTATION_ONLY = {
    "GraphProto": {"doc_string", "metadata_props", "sparse_initializer", "quantization_annotation"},
    "NodeProto": {"doc_string", "metadata_props", "device_configurations"},
    "AttributeProto": {"doc_string"},
    "ValueInfoProto": {"doc_string", "metadata_props"},
    "TensorProto": {"doc_string", "metadata_props", "segment"},
    "TypeProto": {"denotation"},
    "Dimension": {"denotation"},
    "ModelProto": {"training_info", "configuration"},
    "FunctionProto": {"metadata_props"},
}


def canon(msg, with_annotations=True):
    """A presence-insensitive, storage-insensitive view of a message; without the fields
    only annotations carry when `with_annotations` is false."""
    if isinstance(msg, onnx.TensorProto):
        return canon_tensor(msg, with_annotations)
    skip = set() if with_annotations else ANNOTATION_ONLY.get(msg.DESCRIPTOR.name, set())
    out = {}
    for field in msg.DESCRIPTOR.fields:
        if field.name in skip:
            continue
        value = getattr(msg, field.name)
        if field.is_repeated:
            items = [canon_value(v, with_annotations) for v in value]
            if items:
                out[field.name] = items
        elif field.message_type is not None:
            if msg.HasField(field.name):
                out[field.name] = canon(value, with_annotations)
        else:
            v = canon_value(value, with_annotations)
            if v not in ("", 0, b"", False):
                out[field.name] = v
    return out


def canon_value(v, with_annotations=True):
    if isinstance(v, Message):
        return canon(v, with_annotations)
    if isinstance(v, float):
        # Bit-exact, NaN included (floats in messages are doubles in Python).
        return ("float", struct.pack("<d", v)) if not math.isnan(v) else ("nan",)
    return v


def canon_tensor(t, with_annotations=True):
    out = {
        "name": t.name,
        "dims": list(t.dims),
        "data_type": t.data_type,
    }
    if with_annotations:
        out["doc_string"] = t.doc_string
        out["metadata_props"] = [(e.key, e.value) for e in t.metadata_props]
    if t.data_location == onnx.TensorProto.EXTERNAL:
        out["external"] = [(e.key, e.value) for e in t.external_data]
        return out
    try:
        arr = numpy_helper.to_array(t)
        if arr.dtype == object:
            out["values"] = ("object", tuple(arr.ravel().tolist()))
        else:
            out["values"] = (str(arr.dtype), arr.tobytes())
    except Exception as e:  # noqa: BLE001 - any failure to decode is reported as data
        out["values"] = ("undecodable", repr(e))
    return out


ANNOTATION_LINE = re.compile(r"^\s*#@.*$", re.MULTILINE)


def collapse(text):
    """Text without annotation lines, whitespace runs collapsed to one space."""
    return " ".join(ANNOTATION_LINE.sub("", text).split())


def first_difference(a, b, context=60):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return f"ours: ...{a[max(0, i - context):i + context]!r}\n      onnx: ...{b[max(0, i - context):i + context]!r}"


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    text_dir = pathlib.Path(argv[1])
    roots = [pathlib.Path(r) for r in argv[2:]]
    files = sorted(text_dir.glob("*.txt"))
    counts = {
        "files": 0,
        "parse_error": 0,
        "exact": 0,
        "semantic": 0,
        "annotation_only": 0,
        "differs": 0,
        "text_same_as_onnx_printer": 0,
        "text_elided_by_onnx": 0,
        "text_differs": 0,
    }
    problems = []
    for path in files:
        name = path.stem
        candidates = [c for r in roots for c in (r / name / "model.onnx", r / f"{name}.onnx")]
        original = next((c for c in candidates if c.is_file()), None)
        if original is None:
            problems.append(f"{name}: no original model found")
            continue
        counts["files"] += 1
        text = path.read_text(encoding="utf-8")
        model = onnx.load(str(original))
        try:
            parsed = onnx.parser.parse_model(text)
        except Exception as e:  # noqa: BLE001
            counts["parse_error"] += 1
            problems.append(f"{name}: onnx.parser failed: {str(e).splitlines()[0][:200]}")
            parsed = None
        if parsed is not None:
            if parsed.SerializeToString() == model.SerializeToString():
                counts["exact"] += 1
            elif canon(parsed) == canon(model):
                counts["semantic"] += 1
            elif canon(parsed, False) == canon(model, False):
                counts["annotation_only"] += 1
            else:
                counts["differs"] += 1
                problems.append(f"{name}: onnx.parser's model differs from the original")
        reference = onnx.printer.to_text(model)
        if collapse(text) == collapse(reference):
            counts["text_same_as_onnx_printer"] += 1
        elif "..." in reference:
            counts["text_elided_by_onnx"] += 1
        else:
            counts["text_differs"] += 1
            problems.append(f"{name}: text differs from onnx.printer:\n      {first_difference(collapse(text), collapse(reference))}")
    for p in problems:
        print(p)
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    failed = counts["parse_error"] + counts["differs"]
    print(f"{counts['files'] - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
