#!/usr/bin/env python3
"""Generate crates/onnx-schema/data/schemas.json from the pinned onnx wheel.

Every operator schema of every version that onnx registers (all domains), with inputs, outputs,
attributes (defaults as base64 of the serialized AttributeProto), type constraints, function
bodies (base64 of the serialized FunctionProto, one per function opset version) and, for
context-dependent functions, bodies instantiated for a few recorded contexts. Also the
per-domain opset range table and onnx's release -> (IR version, opset) table.

Type strings are written in onnx's canonical form (`DataTypeUtils::ToString`): the schema
strings "map(int64, float)" become "map(int64,tensor(float))", as onnx's checker compares them.

The output is deterministic: schemas sorted by (domain, name, since_version), one schema per
line, keys in a fixed order.

Usage:
    python scripts/gen_schema.py            # rewrite the committed file
    python scripts/gen_schema.py --check    # exit 1 if the committed file is out of date
"""

from __future__ import annotations

import argparse
import base64
import difflib
import json
import sys
from pathlib import Path

import onnx
from onnx import defs, helper

REQUIRED_ONNX = "1.23.2"
FORMAT_VERSION = 1
REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "crates" / "onnx-schema" / "data" / "schemas.json"

# Extra contexts for context-dependent functions, beyond the two generic ones ("all_inputs" and
# "required_inputs"): (domain, op) -> [(label, attributes set on the node)]. Kept small: only
# variants whose bodies the optimizer's fusions need (Gelu's tanh approximation).
EXTRA_CONTEXTS: dict[tuple[str, str], list[tuple[str, dict]]] = {
    ("", "Gelu"): [("approximate=tanh", {"approximate": "tanh"})],
}

# What some builders need before they produce a body: values for required attributes (baked into
# the body as constants) and input shapes (symbolic names or concrete sizes), by formal input
# name. Applied to every context of the op; the recorded node and input types show them.
CONTEXT_OVERRIDES: dict[tuple[str, str], dict] = {
    ("", "GroupNormalization"): {"attributes": {"num_groups": 2}},
    ("", "DepthToSpace"): {"attributes": {"blocksize": 2}},
    ("", "SpaceToDepth"): {"attributes": {"blocksize": 2}},
    ("", "RotaryEmbedding"): {
        "shapes": {
            "X": ["batch", "num_heads", "seq", "head_dim"],
            "cos_cache": ["max_pos", "half_dim"],
            "sin_cache": ["max_pos", "half_dim"],
            "position_ids": ["batch", "seq"],
        }
    },
    ("", "LinearAttention"): {
        "attributes": {"q_num_heads": 2, "kv_num_heads": 2},
        "shapes": {
            "query": ["batch", 2, "seq", "head_dim"],
            "key": ["batch", 2, "seq", "head_dim"],
            "value": ["batch", 2, "seq", "head_dim"],
        },
    },
    ("", "CausalConvWithState"): {
        "shapes": {
            "input": ["batch", 4, "length"],
            "weight": [4, 1, 3],
            "bias": [4],
            "past_state": ["batch", 4, 2],
        }
    },
}

# Preferred element type when instantiating a context-dependent function.
PREFERRED_TYPE = "tensor(float)"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --- type strings (a port of onnx/defs/data_type_utils.cc FromString / ToString) -----------------

def _strip_parens(s: str) -> str:
    s = s.strip()
    if s.startswith("("):
        s = s[1:]
    s = s.strip()
    if s.endswith(")"):
        s = s[:-1]
    return s.strip()


_ELEM_NAMES = {
    name.lower(): value
    for name, value in onnx.TensorProto.DataType.items()
    if name != "UNDEFINED"
}


def _elem_type(name: str) -> int:
    name = name.strip()
    if name not in _ELEM_NAMES:
        raise ValueError(f"unknown element type string {name!r}")
    return _ELEM_NAMES[name]


def type_proto_from_str(type_str: str) -> onnx.TypeProto:
    """Parse an onnx type string as onnx's DataTypeUtils::FromString does."""
    s = type_str.strip()
    tp = onnx.TypeProto()
    if s.startswith("seq"):
        tp.sequence_type.elem_type.CopyFrom(type_proto_from_str(_strip_parens(s[3:])))
    elif s.startswith("optional"):
        tp.optional_type.elem_type.CopyFrom(type_proto_from_str(_strip_parens(s[8:])))
    elif s.startswith("map"):
        inner = _strip_parens(s[3:])
        key, _, value = inner.partition(",")
        tp.map_type.key_type = _elem_type(key)
        tp.map_type.value_type.CopyFrom(type_proto_from_str(value))
    elif s.startswith("opaque"):
        inner = _strip_parens(s[6:])
        if "," in inner:
            domain, _, name = inner.partition(",")
            if domain:
                tp.opaque_type.domain = domain
            if name:
                tp.opaque_type.name = name
        else:
            tp.opaque_type.SetInParent()
            if inner:
                tp.opaque_type.name = inner
    elif s.startswith("sparse_tensor"):
        tp.sparse_tensor_type.elem_type = _elem_type(_strip_parens(s[13:]))
    elif s.startswith("tensor"):
        tp.tensor_type.elem_type = _elem_type(_strip_parens(s[6:]))
    else:  # a bare element type is a scalar tensor
        tp.tensor_type.elem_type = _elem_type(s)
        tp.tensor_type.shape.SetInParent()
    return tp


_ELEM_STRS = {v: k for k, v in _ELEM_NAMES.items()}


def type_proto_to_str(tp: onnx.TypeProto) -> str:
    """Render a TypeProto as onnx's DataTypeUtils::ToString does."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return f"tensor({_ELEM_STRS[tp.tensor_type.elem_type]})"
    if which == "sequence_type":
        return f"seq({type_proto_to_str(tp.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_proto_to_str(tp.optional_type.elem_type)})"
    if which == "map_type":
        key = _ELEM_STRS[tp.map_type.key_type]
        return f"map({key},{type_proto_to_str(tp.map_type.value_type)})"
    if which == "sparse_tensor_type":
        return f"sparse_tensor({_ELEM_STRS[tp.sparse_tensor_type.elem_type]})"
    if which == "opaque_type":
        parts = ""
        if tp.opaque_type.domain:
            parts += tp.opaque_type.domain + ","
        parts += tp.opaque_type.name
        return f"opaque({parts})"
    raise ValueError(f"TypeProto without a value: {tp}")


def canonical_type_str(type_str: str) -> str:
    return type_proto_to_str(type_proto_from_str(type_str))


# --- schemas ---------------------------------------------------------------------------------------

def param_record(
    name: str, type_str: str, option: str, is_homogeneous: bool, min_arity: int, type_params: set[str]
) -> dict:
    """One formal input or output; literal type strings in canonical form."""
    if type_str not in type_params:
        type_str = canonical_type_str(type_str)
    return {
        "name": name,
        "type_str": type_str,
        "option": option,
        "is_homogeneous": bool(is_homogeneous),
        "min_arity": int(min_arity),
    }


def formal_parameter(param, type_params: set[str]) -> dict:
    return param_record(
        param.name, param.type_str, param.option.name, param.is_homogeneous, param.min_arity, type_params
    )


def attribute_record(name: str, type_name: str, required: bool, default: bytes) -> dict:
    """One attribute; `default` is the serialized AttributeProto (empty: no default)."""
    return {
        "name": name,
        "type": type_name,
        "required": bool(required),
        "default": b64(default) if default else None,
    }


def attribute(attr) -> dict:
    default = attr.default_value.SerializeToString(deterministic=True)
    return attribute_record(attr.name, attr.type.name, attr.required, default)


def type_constraint_records(constraints) -> list[dict]:
    """(type parameter, allowed type strings) pairs, allowed types in canonical form."""
    return [
        {"type_param": param, "allowed": [canonical_type_str(t) for t in allowed]}
        for param, allowed in constraints
    ]


# The keys of a schema record, in the order they are written.
RECORD_KEYS = (
    "domain",
    "name",
    "since_version",
    "deprecated",
    "support_level",
    "node_determinism",
    "min_input",
    "max_input",
    "min_output",
    "max_output",
    "inputs",
    "outputs",
    "attributes",
    "type_constraints",
    "has_function",
    "has_context_dependent_function",
    "has_type_and_shape_inference_function",
    "has_data_propagation_function",
    "function_bodies",
    "context_dependent_functions",
)


def ordered_record(fields: dict) -> dict:
    """A schema record with exactly RECORD_KEYS, in that order."""
    if set(fields) != set(RECORD_KEYS):
        raise ValueError(f"schema record keys differ: {sorted(set(fields) ^ set(RECORD_KEYS))}")
    return {k: fields[k] for k in RECORD_KEYS}


def context_inputs(schema, include_optional: bool) -> tuple[list[str], list[onnx.TypeProto | None]]:
    """Input names ("" = absent) and types (None = absent) for an instantiation context."""
    allowed = {tc.type_param_str: list(tc.allowed_type_strs) for tc in schema.type_constraints}
    shapes = CONTEXT_OVERRIDES.get((schema.domain, schema.name), {}).get("shapes", {})
    names: list[str] = []
    types: list[onnx.TypeProto | None] = []
    for param in schema.inputs:
        option = param.option.name
        if option == "Optional" and not include_optional:
            names.append("")
            types.append(None)
            continue
        choices = allowed.get(param.type_str, [param.type_str])
        chosen = PREFERRED_TYPE if PREFERRED_TYPE in choices else choices[0]
        count = max(1, int(param.min_arity)) if option == "Variadic" else 1
        for i in range(count):
            names.append(param.name if count == 1 else f"{param.name}_{i}")
            tp = type_proto_from_str(chosen)
            if param.name in shapes and tp.HasField("tensor_type"):
                tp.tensor_type.CopyFrom(
                    helper.make_tensor_type_proto(tp.tensor_type.elem_type, shapes[param.name]).tensor_type
                )
            types.append(tp)
    while names and names[-1] == "":
        names.pop()
        types.pop()
    return names, types


def instantiate(schema, opset: int, label: str, attrs: dict, include_optional: bool):
    names, types = context_inputs(schema, include_optional)
    outputs = [p.name for p in schema.outputs]
    attrs = {**CONTEXT_OVERRIDES.get((schema.domain, schema.name), {}).get("attributes", {}), **attrs}
    node = helper.make_node(schema.name, names, outputs, domain=schema.domain, **attrs)
    node_bytes = node.SerializeToString(deterministic=True)
    type_bytes = [t.SerializeToString(deterministic=True) if t is not None else b"" for t in types]
    where = f"{schema.domain or 'ai.onnx'}:{schema.name}-{schema.since_version} opset {opset} {label}"
    try:
        body = schema.get_context_dependent_function_with_opset_version(
            opset, node_bytes, type_bytes
        )
    except Exception as exc:  # the builder rejects this context (e.g. a required graph attribute)
        return None, f"{where}: {exc}"
    if not body:
        return None, f"{where}: the builder produced no body for this context"
    return {
        "label": label,
        "node": b64(node_bytes),
        "input_types": [b64(t) if t is not None else None for t in types_or_none(type_bytes, types)],
        "body": b64(body),
    }, None


def types_or_none(type_bytes: list[bytes], types: list[onnx.TypeProto | None]) -> list[bytes | None]:
    """The serialized input types with absent inputs as None (onnx's builder takes b"")."""
    return [b if t is not None else None for b, t in zip(type_bytes, types)]


def context_dependent_functions(schema, skipped: list[str]) -> list[dict]:
    result = []
    has_optional = any(p.option.name == "Optional" for p in schema.inputs)
    contexts = [("all_inputs", {}, True)]
    if has_optional:
        contexts.append(("required_inputs", {}, False))
    for label, attrs in EXTRA_CONTEXTS.get((schema.domain, schema.name), []):
        contexts.append((label, attrs, True))
    for opset in sorted(schema.context_dependent_function_opset_versions):
        instances = []
        for label, attrs, include_optional in contexts:
            instance, why = instantiate(schema, opset, label, attrs, include_optional)
            if instance is None:
                skipped.append(why)
            else:
                instances.append(instance)
        result.append({"opset_version": int(opset), "instances": instances})
    return result


def schema_record(schema, skipped: list[str]) -> dict:
    type_params = {tc.type_param_str for tc in schema.type_constraints}
    bodies = []
    for opset in sorted(schema.function_opset_versions):
        body = schema.get_function_with_opset_version(opset)
        if not body:
            raise RuntimeError(f"{schema.name}-{schema.since_version}: no body at opset {opset}")
        bodies.append({"opset_version": int(opset), "body": b64(body)})
    return ordered_record(
        {
            "domain": schema.domain,
            "name": schema.name,
            "since_version": int(schema.since_version),
            "deprecated": bool(schema.deprecated),
            "support_level": schema.support_level.name,
            "node_determinism": schema.node_determinism.name,
            "min_input": int(schema.min_input),
            "max_input": int(schema.max_input),
            "min_output": int(schema.min_output),
            "max_output": int(schema.max_output),
            "inputs": [formal_parameter(p, type_params) for p in schema.inputs],
            "outputs": [formal_parameter(p, type_params) for p in schema.outputs],
            "attributes": [attribute(schema.attributes[k]) for k in sorted(schema.attributes)],
            "type_constraints": type_constraint_records(
                (tc.type_param_str, tc.allowed_type_strs) for tc in schema.type_constraints
            ),
            "has_function": bool(schema.has_function),
            "has_context_dependent_function": bool(schema.has_context_dependent_function),
            "has_type_and_shape_inference_function": bool(
                schema.has_type_and_shape_inference_function
            ),
            "has_data_propagation_function": bool(schema.has_data_propagation_function),
            "function_bodies": bodies,
            "context_dependent_functions": context_dependent_functions(schema, skipped),
        }
    )


def opset_versions() -> dict:
    ranges = defs.C.schema_version_map()  # domain -> (min, max)
    if ranges[""][1] != defs.onnx_opset_version():
        raise RuntimeError("schema_version_map and onnx_opset_version() disagree")
    return {d: {"min": int(lo), "max": int(hi)} for d, (lo, hi) in sorted(ranges.items())}


def version_table() -> list[dict]:
    rows = []
    for release, ir, opset, ml, *training in helper.VERSION_TABLE:
        rows.append(
            {
                "release": release,
                "ir_version": int(ir),
                "ai.onnx": int(opset),
                "ai.onnx.ml": int(ml),
                "ai.onnx.training": int(training[0]) if training else None,
            }
        )
    return rows


def render_table(header: dict, version_rows: list[dict], records: list[dict]) -> str:
    """The table text: `header` keys (format_version first) one per line, then the release table
    and the schemas one per line. Shared with gen_contrib_schema.py."""
    dump = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=True)  # noqa: E731
    lines = ["{", f'"format_version":{FORMAT_VERSION},']
    lines += [f"{dump(key)}:{dump(value)}," for key, value in header.items()]
    lines.append('"version_table":[')
    if version_rows:
        lines.append(",\n".join(dump(v) for v in version_rows))
    lines += [
        "],",
        '"schemas":[',
        ",\n".join(dump(r) for r in records),
        "]",
        "}",
    ]
    return "\n".join(lines) + "\n"


def render() -> tuple[str, list[str], int]:
    skipped: list[str] = []
    schemas = sorted(
        defs.get_all_schemas_with_history(),
        key=lambda s: (s.domain, s.name, s.since_version),
    )
    records = [schema_record(s, skipped) for s in schemas]
    header = {"onnx_version": onnx.__version__, "opset_versions": opset_versions()}
    return render_table(header, version_table(), records), skipped, len(records)


def write_or_check(text: str, output: Path, check: bool, script: str, count: int) -> int:
    """Writes `text` to `output`, or with `check` compares it with the committed file (exit 1
    and a short diff when they differ)."""
    if check:
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(), text.splitlines(), "committed", "regenerated", lineterm="", n=0
            )
            for line in list(diff)[:20]:
                print(line[:200], file=sys.stderr)
            print(f"{output} is out of date: run scripts/{script}", file=sys.stderr)
            return 1
        print(f"{output}: up to date ({count} schemas)")
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    print(f"wrote {output}: {count} schemas, {len(text)} bytes")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if onnx.__version__ != REQUIRED_ONNX:
        print(f"gen_schema.py needs onnx=={REQUIRED_ONNX}, found {onnx.__version__}", file=sys.stderr)
        return 2
    text, skipped, count = render()
    if not args.check:
        for why in skipped:
            print(f"note: context not instantiated: {why}", file=sys.stderr)
    return write_or_check(text, args.output, args.check, "gen_schema.py", count)


if __name__ == "__main__":
    sys.exit(main())
