# Type stubs of the native module (crates/onnx-opt-python/src/lib.rs). The public API is
# onnx_opt/__init__.py and onnx_opt/rules.py, which call these.

from typing import List, Optional, Sequence, Tuple

__version__: str

class NativeError(Exception):
    """args: (kind, message, fields): kind is 'mismatch', 'rule', 'model', 'option' or 'error'."""

def optimize(
    path: Optional[str] = None,
    data: Optional[bytes] = None,
    base_dir: Optional[str] = None,
    output: Optional[str] = None,
    *,
    pipeline: str = "default",
    check: int = 3,
    require_check: bool = False,
    rules: Sequence[str] = ...,
    rules_text: Sequence[Tuple[str, str]] = ...,
    builtin_rules: bool = True,
    target_opset: Optional[int] = None,
    target: Optional[str] = None,
    input_shapes: Sequence[Tuple[str, Sequence[int]]] = ...,
    same_dims: Sequence[Tuple[str, str]] = ...,
    assume: Sequence[Tuple[str, str]] = ...,
    skip: Sequence[str] = ...,
    outputs: Sequence[str] = ...,
    cost: Optional[str] = None,
    fold: bool = True,
    unsafe_rules: bool = False,
    dims: Sequence[Tuple[str, int]] = ...,
    external_threshold: Optional[int] = None,
    reuse_external_data: bool = False,
) -> Tuple[Optional[bytes], str]: ...
def convert(
    opset: int,
    path: Optional[str] = None,
    data: Optional[bytes] = None,
    base_dir: Optional[str] = None,
    output: Optional[str] = None,
    *,
    check: int = 3,
    require_check: bool = False,
    skip: Sequence[str] = ...,
    dims: Sequence[Tuple[str, int]] = ...,
    external_threshold: Optional[int] = None,
    reuse_external_data: bool = False,
) -> Tuple[Optional[bytes], str]: ...
def check(
    path: Optional[str] = None, data: Optional[bytes] = None, base_dir: Optional[str] = None
) -> Tuple[List[str], List[str]]: ...
def run(
    inputs: Sequence[Tuple[str, bytes]],
    path: Optional[str] = None,
    data: Optional[bytes] = None,
    base_dir: Optional[str] = None,
) -> List[Tuple[str, str, bytes]]: ...
def rules_check(text: str, origin: str = "<rules>", seed: int = 0) -> List[Tuple[str, bool, int, str]]: ...
def rules_explain(
    rule: str,
    path: Optional[str] = None,
    data: Optional[bytes] = None,
    base_dir: Optional[str] = None,
    rules: Sequence[str] = ...,
    rules_text: Sequence[Tuple[str, str]] = ...,
) -> List[Tuple[str, str]]: ...
def cli(argv: List[str]) -> int: ...
def pipelines() -> List[str]: ...
