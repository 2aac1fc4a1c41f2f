"""Conformance cases of onnxruntime's contrib operators, by family (see gen_contrib_tests.py).

A family module defines `cases()`, yielding `Case`s. Name a case `<op>_<variant>`; put `_f16` or
`_bf16` in the name of a case whose outputs are 16-bit floats (compared at their precision).
Inputs are seeded numpy arrays (use `rng(seed)`); keep them small (a case is committed).
"""
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    name: str
    nodes: list  # onnx NodeProto (com.microsoft nodes: helper.make_node(..., domain="com.microsoft"))
    inputs: dict  # graph input name -> numpy array (fed to onnxruntime, stored as input_i.pb)
    outputs: list  # [(graph output name, onnx.TensorProto element type)]
    initializers: dict = field(default_factory=dict)  # name -> numpy array (constant inputs)
    opset: int = 17  # the default domain's opset (com.microsoft is imported at 1)
    ir_version: int = 8


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)
