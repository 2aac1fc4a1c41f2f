#!/usr/bin/env python3
"""Writes `<name>.pb` for each `<name>.txt` here: what onnx.parser (onnx 1.23.2) makes of it.

The `onnx_parser` integration test parses the same texts with onnx-text and requires the
same protos, byte for byte.
"""

import pathlib

import onnx

HERE = pathlib.Path(__file__).resolve().parent

for txt in sorted(HERE.glob("*.txt")):
    model = onnx.parser.parse_model(txt.read_text(encoding="utf-8"))
    txt.with_suffix(".pb").write_bytes(model.SerializeToString())
    print(f"wrote {txt.with_suffix('.pb').name}")
