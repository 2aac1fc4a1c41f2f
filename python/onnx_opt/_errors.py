"""The exceptions of onnx_opt, and the translation from the native layer's errors."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple


class Error(Exception):
    """An error of onnx-opt. ``str(e)`` is the whole message, as the command line prints it."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for name, value in fields.items():
            setattr(self, name, value)


class CheckMismatch(Error):
    """The optimized model's outputs differ from the original's, so nothing was returned or
    written.

    Attributes:
        output: the first output that differs.
        max_difference: the largest absolute difference between its elements (``None`` when
            they differ in type or shape, or are not floats).
        culprit: the rule whose addition makes the outputs differ (found by bisecting the
            rules), or ``None`` when they differ with every rule off.
        trial: the random input (or given data set) it happened on.
        on_data_set: whether ``trial`` is a given data set.
        detail: how it differs.
    """

    output: str
    max_difference: Optional[float]
    culprit: Optional[str]
    trial: int
    on_data_set: bool
    detail: str


class RuleError(Error):
    """A rule file or rule text that does not parse or check against the operator schemas.

    Attributes:
        file: the file (or the origin given with the text).
        line, column: where the first error is (1-based), or ``None``.
        reason: the first error's message.
        errors: every error, as ``(file, line, column, reason)``.
    """

    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    reason: Optional[str]
    errors: List[Tuple[str, int, int, str]]


class ModelError(Error):
    """A model that cannot be read, or that fails the checker.

    Attributes:
        file: the file it was read from, when there is one.
        node: the name of the node the first problem is in (``None`` when the node has no
            name or the problem is not in a node).
        node_index: that node's index in its graph.
        op: that node's op type.
        reason: the first problem.
        problems: every problem found, one line each.
    """

    file: Optional[str]
    node: Optional[str]
    node_index: Optional[int]
    op: Optional[str]
    reason: Optional[str]
    problems: List[str]


class OptionError(Error, ValueError):
    """An argument onnx-opt cannot use: an unknown rule, pass or pipeline name, an input
    shape that contradicts the model, an output the model does not have."""


_KINDS = {
    "mismatch": CheckMismatch,
    "rule": RuleError,
    "model": ModelError,
    "option": OptionError,
}


def translate(err: BaseException) -> Error:
    """The exception for a ``NativeError(kind, message, fields)``."""
    kind, message, fields = (list(err.args) + [None, None, None])[:3]
    cls = _KINDS.get(kind, Error)
    return cls(str(message), **(fields if isinstance(fields, dict) else {}))
