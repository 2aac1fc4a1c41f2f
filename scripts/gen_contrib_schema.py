#!/usr/bin/env python3
"""Generate crates/onnx-schema/data/contrib_schemas.json from the pinned onnxruntime wheel.

onnxruntime's own operator schemas, read from its registry
(`onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()`), in the format of
schemas.json (the serialization is gen_schema.py's):

- every schema of the `com.microsoft` domain (the contrib ops: Attention, SkipLayerNormalization,
  MatMulNBits, ...);
- the schemas onnxruntime registers in onnx's domains that onnx itself does not, found by
  diffing against onnx's registry: LayerNormalization-1 and SimplifiedLayerNormalization-1
  (onnxruntime's own, below LayerNormalization-17), onnx's removed experimental ops (Affine,
  Crop, Scale, ... at 1 and 10), ThresholdedRelu-1, MeanVarianceNormalization-1 and the
  TensorRT plugin ops (EfficientNMS_TRT, ...).

Left out, because no model a user writes holds them: the layout-internal domains
`com.microsoft.nchwc` and `com.ms.internal.nhwc` (onnxruntime's graph transformers create
them inside a session), and MemcpyFromHost / MemcpyToHost (inserted by the session between
devices). This CPU build of onnxruntime registers no `com.microsoft.dml` schemas.

onnxruntime's Python binding does not expose everything onnx's does: function bodies, data
propagation and node determinism are missing. The records say "no function body", "no data
propagation" and "Unknown" determinism; formal parameters' min_arity is derived from min_input
(onnx's rule: a variadic parameter's min_arity is min_input minus the parameters before it).

The top-level `onnxruntime_version` key marks the table as onnxruntime's: the Rust registry
gives its schemas `SchemaOrigin::OnnxRuntime`. `opset_versions` lists `com.microsoft` (1 to the
highest since_version); `version_table` is empty.

Usage:
    python scripts/gen_contrib_schema.py            # rewrite the committed file
    python scripts/gen_contrib_schema.py --check    # exit 1 if the committed file is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx
from onnx import defs

import gen_schema
from gen_schema import (
    attribute_record,
    ordered_record,
    param_record,
    render_table,
    type_constraint_records,
    write_or_check,
)

REQUIRED_ONNXRUNTIME = "1.31.1"
OUTPUT = gen_schema.REPO / "crates" / "onnx-schema" / "data" / "contrib_schemas.json"

# The domain whose every schema is taken.
CONTRIB_DOMAIN = "com.microsoft"
# onnx's domains: schemas here are taken when onnx does not register the same version.
ONNX_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training", "ai.onnx.training")
# Runtime-internal ops of onnx's domain, inserted by an onnxruntime session, never in a model.
RUNTIME_INTERNAL_OPS = {("", "MemcpyFromHost"), ("", "MemcpyToHost")}


def param_records(params, min_count: int, type_params: set[str]) -> list[dict]:
    """Formal parameters; a variadic one gets onnx's min_arity (min count minus the parameters
    before it; only the last parameter can be variadic)."""
    records = []
    for index, p in enumerate(params):
        option = p.option.name
        min_arity = max(min_count - index, 0) if option == "Variadic" else 1
        records.append(
            param_record(p.name, p.typeStr, option, p.isHomogeneous, min_arity, type_params)
        )
    return records


def default_bytes(attr) -> bytes:
    """The attribute's default as onnx's deterministic serialization (empty: no default)."""
    raw = attr._default_value  # onnxruntime exposes the serialized AttributeProto only
    if not raw:
        return b""
    return onnx.AttributeProto.FromString(raw).SerializeToString(deterministic=True)


def schema_record(schema) -> dict:
    type_params = {tc.type_param_str for tc in schema.type_constraints}
    return ordered_record(
        {
            "domain": schema.domain,
            "name": schema.name,
            "since_version": int(schema.since_version),
            "deprecated": bool(schema.deprecated),
            "support_level": schema.support_level.name,
            "node_determinism": "Unknown",
            "min_input": int(schema.min_input),
            "max_input": int(schema.max_input),
            "min_output": int(schema.min_output),
            "max_output": int(schema.max_output),
            "inputs": param_records(schema.inputs, schema.min_input, type_params),
            "outputs": param_records(schema.outputs, schema.min_output, type_params),
            "attributes": [
                attribute_record(a.name, a.type.name, a.required, default_bytes(a))
                for a in (schema.attributes[k] for k in sorted(schema.attributes))
            ],
            "type_constraints": type_constraint_records(
                (tc.type_param_str, tc.allowed_type_strs) for tc in schema.type_constraints
            ),
            "has_function": False,
            "has_context_dependent_function": False,
            "has_type_and_shape_inference_function": bool(
                schema.has_type_and_shape_inference_function
            ),
            "has_data_propagation_function": False,
            "function_bodies": [],
            "context_dependent_functions": [],
        }
    )


def selected_schemas() -> list:
    """onnxruntime's schemas that go into the table, sorted by (domain, name, since_version)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    onnx_keys = {(s.domain, s.name, s.since_version) for s in defs.get_all_schemas_with_history()}
    chosen = []
    for schema in ort_state.get_all_operator_schema():
        key = (schema.domain, schema.name, schema.since_version)
        if schema.domain == CONTRIB_DOMAIN:
            chosen.append(schema)
        elif (
            schema.domain in ONNX_DOMAINS
            and key not in onnx_keys
            and key[:2] not in RUNTIME_INTERNAL_OPS
        ):
            chosen.append(schema)
    chosen.sort(key=lambda s: (s.domain, s.name, s.since_version))
    keys = [(s.domain, s.name, s.since_version) for s in chosen]
    if len(set(keys)) != len(keys):
        raise RuntimeError("onnxruntime lists a schema version twice")
    return chosen


def render() -> tuple[str, int]:
    import onnxruntime

    schemas = selected_schemas()
    records = [schema_record(s) for s in schemas]
    contrib = [s.since_version for s in schemas if s.domain == CONTRIB_DOMAIN]
    header = {
        "onnx_version": onnx.__version__,
        "onnxruntime_version": onnxruntime.__version__,
        "opset_versions": {CONTRIB_DOMAIN: {"min": 1, "max": int(max(contrib))}},
    }
    return render_table(header, [], records), len(records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    import onnxruntime

    if onnxruntime.__version__ != REQUIRED_ONNXRUNTIME or onnx.__version__ != gen_schema.REQUIRED_ONNX:
        print(
            f"gen_contrib_schema.py needs onnxruntime=={REQUIRED_ONNXRUNTIME} and "
            f"onnx=={gen_schema.REQUIRED_ONNX}, found {onnxruntime.__version__} and {onnx.__version__}",
            file=sys.stderr,
        )
        return 2
    text, count = render()
    return write_or_check(text, args.output, args.check, "gen_contrib_schema.py", count)


if __name__ == "__main__":
    sys.exit(main())
