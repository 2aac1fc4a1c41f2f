"""onnx-opt: optimize ONNX models with equality saturation, each result checked against a
reference interpreter.

The functions take a model as an ``onnx.ModelProto``, as the bytes of one (binary, or the ONNX
text syntax), or as a path (its external data is read in place, never loaded into Python), and
return what they were given: a ``ModelProto`` for a ``ModelProto`` or a path, bytes for bytes.
They release the GIL while they work.

>>> import onnx, onnx_opt
>>> model = onnx.parser.parse_model('''
...     <ir_version: 8, opset_import: ["" : 17]>
...     g (float[2, 3] x) => (float[2, 3] y) {
...         a = Identity(x)
...         b = Neg(a)
...         y = Neg(b)
...     }''')
>>> out = onnx_opt.optimize(model)          # checked on 3 random inputs
>>> [n.op_type for n in out.graph.node]
['Identity']

Models over 2 GiB: protobuf cannot hold them in one message, so onnx keeps their tensors in
external data files. Pass such a model by its path, and an ``output`` path to save the result
(its tensors go to external data beside it); a ``ModelProto`` whose external data is loaded in
memory can be saved with ``onnx.save(model, path, save_as_external_data=True)`` first.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import CheckMismatch, Error, ModelError, OptionError, RuleError, translate
from . import rules

__all__ = [
    "optimize",
    "convert",
    "check",
    "run",
    "rules",
    "pipelines",
    "Error",
    "CheckMismatch",
    "RuleError",
    "ModelError",
    "OptionError",
    "__version__",
]

__version__: str = _native.__version__

#: What the functions take as a model.
ModelLike = Union["onnx.ModelProto", bytes, bytearray, memoryview, str, "os.PathLike[str]"]


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except _native.NativeError as e:
        raise translate(e) from None


def _has_external_data(model: Any) -> bool:
    import onnx

    def tensors(graph: Any) -> Iterable[Any]:
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    yield from tensors(attr.g)
                for g in attr.graphs:
                    yield from tensors(g)

    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in tensors(model.graph))


def _source(model: Any) -> Tuple[Dict[str, Any], str]:
    """The native layer's model arguments, and the kind of model to return."""
    if isinstance(model, (str, os.PathLike)):
        return {"path": os.fspath(model)}, "proto"
    if isinstance(model, bytes):
        return {"data": model}, "bytes"
    if isinstance(model, (bytearray, memoryview)):
        return {"data": bytes(model)}, "bytes"
    if type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString"):
        if _has_external_data(model):
            raise ModelError(
                "the ModelProto refers to external data files, which onnx_opt cannot find from "
                "a ModelProto: pass the model's path instead",
                file=None, node=None, node_index=None, op=None,
                reason="external data in a ModelProto", problems=[],
            )
        # Serialized once: with protobuf's upb backend, ByteSize() costs a serialization too.
        try:
            data = model.SerializeToString()
        except ValueError as e:  # protobuf refuses a message over 2 GiB
            raise ModelError(
                f"the ModelProto cannot be serialized ({e}): a model over protobuf's 2 GiB "
                "limit must be saved with onnx.save(model, path, save_as_external_data=True) "
                "and passed as the path",
                file=None, node=None, node_index=None, op=None,
                reason="over 2 GiB", problems=[],
            ) from None
        return {"data": data}, "proto"
    raise TypeError(
        f"a model is an onnx.ModelProto, bytes or a path, not {type(model).__name__}"
    )


def _result(data: Optional[bytes], kind: str) -> Any:
    if data is None or kind == "bytes":
        return data
    import onnx

    return onnx.ModelProto.FromString(data)


def _finish(data: Optional[bytes], report_json: str, kind: str, saved: bool, report: bool) -> Any:
    """What `optimize` and `convert` return: the report when the model was saved, else the
    model (with the report when asked)."""
    rep = json.loads(report_json)
    if saved:
        return rep
    result = _result(data, kind)
    return (result, rep) if report else result


def _names(value: Union[None, str, Iterable[str]]) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _paths(value: Union[None, str, "os.PathLike[str]", Iterable[Any]]) -> List[str]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value]


def _rules_text(value: Union[None, str, Mapping[str, str], Iterable[Tuple[str, str]]]) -> List[Tuple[str, str]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [("<rules_text>", value)]
    if isinstance(value, Mapping):
        return [(str(k), str(v)) for k, v in value.items()]
    return [(str(k), str(v)) for k, v in value]


def _input_shapes(
    value: Union[None, Mapping[str, Sequence[int]], Iterable[str]],
) -> List[Tuple[str, List[int]]]:
    """``{"x": [1, 3, 224, 224]}`` or ``["x:1,3,224,224"]`` as ``[("x", [1, 3, 224, 224])]``."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [(str(k), [int(d) for d in v]) for k, v in value.items()]
    out = []
    for spec in [value] if isinstance(value, str) else value:
        name, sep, dims = str(spec).rpartition(":")
        if not sep or not name:
            raise OptionError(f"input shape '{spec}': expected NAME:D1,D2,...")
        try:
            out.append((name, [int(d) for d in dims.split(",") if d.strip()]))
        except ValueError:
            raise OptionError(f"input shape '{spec}': the dims must be integers") from None
    return out


def _dims(value: Optional[Mapping[str, int]]) -> List[Tuple[str, int]]:
    return [(str(k), int(v)) for k, v in (value or {}).items()]


def optimize(
    model: ModelLike,
    output: Union[None, str, "os.PathLike[str]"] = None,
    *,
    pipeline: str = "default",
    check: int = 3,
    rules: Union[None, str, "os.PathLike[str]", Iterable[Any]] = None,
    rules_text: Union[None, str, Mapping[str, str], Iterable[Tuple[str, str]]] = None,
    target_opset: Optional[int] = None,
    target: Optional[str] = None,
    input_shapes: Union[None, Mapping[str, Sequence[int]], Iterable[str]] = None,
    same_dims: Optional[Mapping[str, str]] = None,
    assume: Optional[Mapping[str, str]] = None,
    skip_rules: Union[None, str, Iterable[str]] = None,
    outputs: Union[None, str, Iterable[str]] = None,
    cost: Optional[str] = None,
    fold: bool = True,
    unsafe_rules: bool = False,
    report: bool = False,
    require_check: bool = False,
    builtin_rules: bool = True,
    dims: Optional[Mapping[str, int]] = None,
    external_threshold: Optional[int] = None,
    reuse_external_data: bool = False,
) -> Any:
    """Optimizes a model and checks the result against the original on random inputs.

    Args:
        model: an ``onnx.ModelProto``, the bytes of a model, or a path.
        output: save the result here instead of returning it (tensors stored as raw bytes, of
            at least ``external_threshold`` bytes, go to external data beside it; by default
            1024, when the input had external data or the result is over 2 GiB).
        pipeline: a built-in pipeline (``pipelines()``) or the path of a pipeline file.
        check: random inputs the result is compared on (0: no check).
        rules: rule files added to the built-in rules.
        rules_text: rules as text: a string, or ``{origin: text}``; each text is a rule file
            (a ``#`` header, then each rule after a ``#`` comment stating its identity).
        target_opset: convert to this opset as well.
        target: optimize for a runtime with its own operators: ``"onnxruntime"`` (its
            ``com.microsoft`` contrib ops, GroupQueryAttention and
            SkipSimplifiedLayerNormalization; the ``onnxruntime`` pipeline, so not with
            ``pipeline``; a model below opset 23 is converted to 23 unless ``target_opset``
            says otherwise).
        input_shapes: fix inputs' shapes, ``{"x": [1, 3, 224, 224]}`` or
            ``["x:1,3,224,224"]``; the symbolic dims become those values.
        same_dims: make inputs' symbolic dims the same size as others, ``{"s15": "s69"}``:
            each name is replaced in every declaration, the output's included (an assumption
            about the inputs the model will get, which the check keeps; for example one
            KV-cache length for every layer where torch's dynamo exporter names one per layer).
        assume: assumptions about inputs' values, ``{"attention_mask": "ones"}``: every
            element is 1 (true), as when no sequence is padded. What is computed from them
            folds; the input stays in the interface, and the check draws its inputs under the
            assumption, so the result equals the model only on inputs that satisfy it.
        skip_rules: leave out rules, rule files, labels or passes by name.
        outputs: keep only these graph outputs.
        cost: the extraction cost model, ``"latency"`` or ``"nodes"``.
        fold: fold constants.
        unsafe_rules: run rules that change floating-point rounding too.
        report: also return the report (a dict, as ``onnx-opt --report``).
        require_check: fail when the check cannot run (a model the interpreter cannot run
            anywhere) instead of returning the result unchecked.
        builtin_rules: use the built-in rules.
        dims: values for symbolic dims in the check's random inputs, ``{"batch": 2}``.
        external_threshold: see ``output``.
        reuse_external_data: with ``output`` and a model given by its path: tensors unchanged
            in the input's external data files stay there, and the output refers to those
            files (which must be inside its directory; the output must not replace the input
            model); only new or changed tensors go to the output's data file.

    Returns:
        The optimized model (a ``ModelProto``, or bytes when given bytes), with the report as
        ``(model, report)`` when ``report`` is true; with ``output``, the report.

    Raises:
        CheckMismatch: the result's outputs differ from the original's.
        ModelError: the model cannot be read or fails the checker.
        RuleError: a rule file or rule text is wrong.
        OptionError: an unknown rule, pipeline or output, a contradicting input shape, a
            ``same_dims`` name no input declares, an ``assume`` that names no input or cannot
            hold for it, or
            ``reuse_external_data`` where the output cannot refer to the input's data files.

    >>> import onnx_opt
    >>> text = b'<ir_version: 8, opset_import: ["" : 17]> g (float[N, 4] x) => (float[N, 4] y) { t = Transpose <perm = [1, 0]> (x)  y = Transpose <perm = [1, 0]> (t) }'
    >>> out, rep = onnx_opt.optimize(text, report=True)
    >>> rep["nodes_before"], rep["nodes_after"]
    (2, 1)
    """
    source, kind = _source(model)
    data, report_json = _call(
        _native.optimize,
        output=None if output is None else os.fspath(output),
        pipeline=pipeline,
        check=int(check),
        require_check=require_check,
        rules=_paths(rules),
        rules_text=_rules_text(rules_text),
        builtin_rules=builtin_rules,
        target_opset=target_opset,
        target=target,
        input_shapes=_input_shapes(input_shapes),
        same_dims=[(str(k), str(v)) for k, v in (same_dims or {}).items()],
        assume=[(str(k), str(v)) for k, v in (assume or {}).items()],
        skip=_names(skip_rules),
        outputs=_names(outputs),
        cost=cost,
        fold=fold,
        unsafe_rules=unsafe_rules,
        dims=_dims(dims),
        external_threshold=external_threshold,
        reuse_external_data=reuse_external_data,
        **source,
    )
    return _finish(data, report_json, kind, output is not None, report)


def convert(
    model: ModelLike,
    opset: int,
    output: Union[None, str, "os.PathLike[str]"] = None,
    *,
    check: int = 3,
    skip_rules: Union[None, str, Iterable[str]] = None,
    report: bool = False,
    require_check: bool = False,
    dims: Optional[Mapping[str, int]] = None,
    external_threshold: Optional[int] = None,
    reuse_external_data: bool = False,
) -> Any:
    """Converts a model to another opset of the default domain (up or down), checking the
    result like ``optimize``. Takes and returns models as ``optimize`` does (``output``,
    ``external_threshold`` and ``reuse_external_data`` included).

    >>> import onnx_opt
    >>> text = b'<ir_version: 7, opset_import: ["" : 11]> g (float[2, 3] x) => (float[1, 3] y) { y = ReduceSum <axes = [0]> (x) }'
    >>> out = onnx_opt.convert(text, 13)
    >>> b'ReduceSum' in out
    True
    """
    source, kind = _source(model)
    data, report_json = _call(
        _native.convert,
        int(opset),
        output=None if output is None else os.fspath(output),
        check=int(check),
        require_check=require_check,
        skip=_names(skip_rules),
        dims=_dims(dims),
        external_threshold=external_threshold,
        reuse_external_data=reuse_external_data,
        **source,
    )
    return _finish(data, report_json, kind, output is not None, report)


def check(model: ModelLike) -> List[str]:
    """The checker's problems with a model, one line each; empty when it is valid.

    Raises ``ModelError`` when the model cannot be read at all.

    >>> import onnx_opt
    >>> onnx_opt.check(b'<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) { y = Relu(x) }')
    []
    """
    source, _ = _source(model)
    problems, _warnings = _call(_native.check, **source)
    return list(problems)


def run(model: ModelLike, inputs: Mapping[str, Any]) -> Dict[str, Any]:
    """Runs a model in onnx-opt's reference interpreter (the oracle of every check).

    ``inputs`` maps input names to numpy arrays (any ONNX tensor type numpy and
    ``onnx.numpy_helper`` represent); returns a dict of output name to array (a list of
    arrays for a sequence, ``None`` or an array for an optional).

    >>> import numpy as np, onnx_opt
    >>> out = onnx_opt.run(b'<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) { y = Relu(x) }',
    ...                    {"x": np.array([-1.0, 2.0], dtype=np.float32)})
    >>> out["y"].tolist()
    [0.0, 2.0]
    """
    from onnx import numpy_helper

    source, _ = _source(model)
    feed = [
        (str(name), numpy_helper.from_array(_as_array(value), str(name)).SerializeToString())
        for name, value in inputs.items()
    ]
    results = _call(_native.run, feed, **source)
    return {name: _decode_value(kind, data) for name, kind, data in results}


def _as_array(value: Any) -> Any:
    import numpy as np

    return value if isinstance(value, np.ndarray) else np.asarray(value)


def _decode_value(kind: str, data: bytes) -> Any:
    import onnx
    from onnx import numpy_helper

    if kind == "tensor":
        return numpy_helper.to_array(onnx.TensorProto.FromString(data))
    if kind == "sequence":
        return numpy_helper.to_list(onnx.SequenceProto.FromString(data))
    if kind == "optional":
        return numpy_helper.to_optional(onnx.OptionalProto.FromString(data))
    raise Error(f"an output of kind {kind} cannot be decoded")


def pipelines() -> List[str]:
    """The names of the built-in pipelines (``optimize(pipeline=...)``)."""
    return list(_native.pipelines())
