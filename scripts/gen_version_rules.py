#!/usr/bin/env python3
"""Generate rules/version/steps.rules: the version steps of the ONNX default domain that follow
from the operator schemas alone.

Reads crates/onnx-schema/data/schemas.json (the committed schema table; no onnx install needed)
and writes, for every pair of consecutive schema versions (A, B) of an operator whose two
versions compute the same function, two version steps of the rule language:

    rule relu_13_to_14 [version, step, exact]:
      Relu@13(x) => Relu@14(x)

    rule relu_14_to_13 [version, step, exact]:
      Relu@14(x) => Relu@13(x)
      where member(dtype(x), [float16, float, double, bfloat16])

with a guard wherever the element types the other version allows differ (and where it ties two
values to one type that the first does not). A pair is generated when the two versions have the
same inputs (names, options, homogeneity) and one output, and their attributes differ at most by
attributes one side has and the other does not, where the one without holds the default of the
one with (the steps name the shared attributes and leave the others unnamed, which the matcher
reads as "holds its default"). Attributes whose default is not the old behaviour are written
with the old behaviour (`ADDED_OLD_BEHAVIOUR`).

Not generated, and listed in the file's header with the reason: nondeterministic ops, ops with
subgraphs, ops with several outputs, the pairs in `MEANING` (a change of meaning the signature
does not show), pairs that move a logical parameter (an attribute that became an input) or
change inputs, outputs or attribute types, and pairs whose differing types are not tensors.
Those are converted by hand-written rules or by the rebinding in
crates/onnx-egraph/src/convert.rs.

Every generated rule is proven by `onnx-opt rules check` like any rule.

Usage:
    python3 scripts/gen_version_rules.py            # rewrite rules/version/steps.rules
    python3 scripts/gen_version_rules.py --check    # exit 1 if the committed file is out of date
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "crates/onnx-schema/data/schemas.json"
OUT = ROOT / "rules/version/steps.rules"

# (op, since_version): the version changes the op's meaning without (only) changing its
# signature; pairs crossing it are not generated.
MEANING = {
    # Softmax, LogSoftmax, Hardmax: from 13 over one axis, before over the 2-D coercion at axis.
    ("Softmax", 13): "normalizes over one axis from 13 (before: the input coerced to 2-D at axis)",
    ("LogSoftmax", 13): "normalizes over one axis from 13 (before: the input coerced to 2-D at axis)",
    ("Hardmax", 13): "normalizes over one axis from 13 (before: the input coerced to 2-D at axis)",
    # Sum, Max, Min, Mean broadcast from 8 (before, equal shapes): the steps up are sound, but
    # down needs equal shapes; left to the rebinding, which checks the node.
    ("Sum", 8): "broadcasts from 8",
    ("Max", 8): "broadcasts from 8",
    ("Min", 8): "broadcasts from 8",
    ("Mean", 8): "broadcasts from 8",
    # GridSample 20 renamed its modes (bilinear -> linear, bicubic -> cubic) and takes N-D input.
    ("GridSample", 20): "renames its modes at 20",
    # The pooling ops' output size with ceil_mode: from 22 a last window starting in the end
    # padding is dropped.
    ("AveragePool", 22): "ceil_mode drops a window starting in the padding from 22",
    ("MaxPool", 22): "ceil_mode drops a window starting in the padding from 22",
    ("LpPool", 22): "ceil_mode drops a window starting in the padding from 22",
    # Attention 25 refuses q_num_heads/kv_num_heads on 4-D inputs.
    ("Attention", 25): "refuses head counts on 4-D inputs from 25",
    # PRelu 7 broadcasts the slope unidirectionally (numpy-style); 6 shared a size-1 slope
    # across channels.
    ("PRelu", 7): "broadcasts its slope numpy-style from 7",
    # DFT 20 moved `axis` to an input and changed its meaning for real input.
    ("DFT", 20): "moves axis to an input at 20",
}

# Ops the reference interpreter has no kernel for: their steps could not be proven.
NO_KERNEL = {"MaxRoiPool"}

# Attributes a step names (with a variable, on both sides) so that a hint can steer the
# prover's instances, and the hints: ops whose random instances rarely run.
NAMED = {
    "AveragePool": {"kernel_shape": "k"},
    "LpPool": {"kernel_shape": "k"},
    "MaxUnpool": {"kernel_shape": "k"},
}
HINTS = {
    "AveragePool": ["rank(x) == 4 && k == [2, 2]"],
    "LpPool": ["rank(x) == 4 && k == [2, 2]"],
    "MaxUnpool": ["rank(x) == 4 && k == [2, 2]"],
    "Range": ["all_equal(start, 0) && all_equal(limit, 8)"],
    "NonMaxSuppression": [
        "rank(boxes) == 3 && dim(boxes, 2) == 4 && rank(scores) == 3",
        "dim(scores, 0) == dim(boxes, 0) && dim(scores, 2) == dim(boxes, 1)",
    ],
}

# Attributes added with a default that is not the behaviour of the versions before them:
# (op, attribute) -> the value that is. None: no value is, the pair is not generated.
ADDED_OLD_BEHAVIOUR = {
    ("RoiAlign", "coordinate_transformation_mode"): "output_half_pixel",
    ("Resize", "coordinate_transformation_mode"): None,
    ("Resize", "nearest_mode"): None,
}

# Inputs renamed without a change of meaning: (op, old, new).
RENAMED = {
    ("BatchNormalization", "mean", "input_mean"),
    ("BatchNormalization", "var", "input_var"),
}

# Ops with logical parameters (rules/README.md): a pair that moves one is not generated here.
LOGICAL = {
    "Squeeze", "Unsqueeze", "Split", "Clip", "Pad", "Slice", "TopK", "Reshape", "Dropout",
    "Upsample", "Resize", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
}

KEYWORDS = {"rule", "let", "where", "hint", "extern", "true", "false", "inf", "nan", "root"}
ELEM_TYPES = {
    "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool", "float16",
    "double", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8e4m3fn",
    "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1",
    "float8e8m0", "uint2", "int2", "float6e2m3", "float6e3m2",
}


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def var_name(raw: str, taken: set[str]) -> str:
    v = re.sub(r"[^a-z0-9_]", "_", raw.lower())
    if not v or not v[0].isalpha() or v in KEYWORDS or v in ELEM_TYPES:
        v = "v_" + v
    base, i = v, 2
    while v in taken:
        v = f"{base}{i}"
        i += 1
    taken.add(v)
    return v


def allowed(schema: dict, type_str: str) -> set[str]:
    for tc in schema["type_constraints"]:
        if tc["type_param"] == type_str:
            return set(tc["allowed"])
    return {type_str}


def is_param(schema: dict, type_str: str) -> bool:
    return any(tc["type_param"] == type_str for tc in schema["type_constraints"])


def tensor_elem(t: str) -> str | None:
    m = re.fullmatch(r"tensor\((\w+)\)", t)
    return m.group(1) if m else None


def attr_literal(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Skip(Exception):
    pass


def same_inputs(op: str, a: dict, b: dict) -> None:
    if len(a["inputs"]) != len(b["inputs"]):
        raise Skip("its inputs change")
    for p, q in zip(a["inputs"], b["inputs"]):
        renamed = (op, p["name"], q["name"]) in RENAMED or (op, q["name"], p["name"]) in RENAMED
        # An input that becomes optional (Gemm's C at 11) steps where it is present.
        options = {p["option"], q["option"]}
        if (p["name"] != q["name"] and not renamed) or (
            len(options) > 1 and options != {"Single", "Optional"}
        ):
            raise Skip("its inputs change")
        if p["is_homogeneous"] != q["is_homogeneous"]:
            raise Skip("its inputs change")
    if a["max_output"] > 1 or b["max_output"] > 1 or len(a["outputs"]) != 1 or len(b["outputs"]) != 1:
        raise Skip("it has several outputs")
    if a["outputs"][0]["name"] != b["outputs"][0]["name"]:
        raise Skip("its output changes")


def attr_plan(op: str, a: dict, b: dict) -> tuple[list[str], list[tuple[str, str]], bool]:
    """The shared attributes, the added ones written with their old behaviour (name, literal),
    and whether the attributes are the same (then `..rest` carries them)."""
    aa = {x["name"]: x for x in a["attributes"]}
    ba = {x["name"]: x for x in b["attributes"]}
    shared = sorted(set(aa) & set(ba))
    for n in shared:
        x, y = aa[n], ba[n]
        if x["type"] != y["type"] or x["required"] != y["required"] or x["default"] != y["default"]:
            raise Skip(f"its attribute `{n}` changes")
    added: list[tuple[str, str]] = []
    for n in sorted(set(ba) - set(aa)):
        if ba[n]["required"]:
            raise Skip(f"it adds the required attribute `{n}`")
        if (op, n) in ADDED_OLD_BEHAVIOUR:
            old = ADDED_OLD_BEHAVIOUR[(op, n)]
            if old is None:
                raise Skip(f"its new attribute `{n}` has no value that is the old behaviour")
            added.append((n, attr_literal(old)))
    for n in sorted(set(aa) - set(ba)):
        if aa[n]["required"]:
            raise Skip(f"it drops the required attribute `{n}`")
        if aa[n]["type"] in ("GRAPH", "GRAPHS"):
            raise Skip("it has subgraphs")
    same = set(aa) == set(ba) and not added
    return shared, added, same


def type_guards(frm: dict, to: dict, names: list[str | None], optional: list[bool]) -> list[str]:
    """Guards that the values' element types are allowed by `to` where `frm` allows others, and
    that values `to` ties to one type parameter have one type."""
    guards: list[str] = []
    # Positions: the inputs, then the output (root()).
    slots = [(p["type_str"], q["type_str"]) for p, q in zip(frm["inputs"], to["inputs"])]
    slots.append((frm["outputs"][0]["type_str"], to["outputs"][0]["type_str"]))
    refs = list(names) + ["root()"]
    opts = list(optional) + [False]
    out = len(slots) - 1

    def same_param(i: int, j: int) -> bool:
        # Slots i and j hold one type parameter in both versions: a guard on one covers both.
        (fi, ti), (fj, tj) = slots[i], slots[j]
        return fi == fj and ti == tj and is_param(frm, fi) and is_param(to, ti)

    guarded: list[int] = []
    for i, (ts_from, ts_to) in enumerate(slots):
        have, want = allowed(frm, ts_from), allowed(to, ts_to)
        if have <= want:
            continue
        if any(same_param(i, j) and not opts[j] and refs[j] is not None for j in guarded):
            continue
        elems = [tensor_elem(t) for t in sorted(want, key=type_order)]
        if any(e is None for e in elems) or any(tensor_elem(t) is None for t in have):
            raise Skip("its differing types are not tensors")
        ref = refs[i]
        if ref is None:
            # A variadic input: the output's guard covers it when they share the parameter.
            if same_param(i, out):
                continue
            raise Skip("a variadic input's types differ")
        guarded.append(i)
        g = f"member(dtype({ref}), [{', '.join(elems)}])"
        if opts[i]:
            g = f"(is_absent({ref}) || {g})"
        guards.append(g)
    # Ties: two slots with one type parameter in `to` but not in `frm`.
    for i in range(len(slots)):
        for j in range(i + 1, len(slots)):
            (fi, ti), (fj, tj) = slots[i], slots[j]
            if ti == tj and is_param(to, ti) and not (fi == fj and is_param(frm, fi)):
                if refs[i] is None or refs[j] is None or opts[i] or opts[j]:
                    raise Skip("it ties a variadic or optional input's type")
                guards.append(f"dtype({refs[i]}) == dtype({refs[j]})")
    return guards


TYPE_ORDER = [
    "tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)", "tensor(int8)",
    "tensor(int16)", "tensor(int32)", "tensor(int64)", "tensor(uint8)", "tensor(uint16)",
    "tensor(uint32)", "tensor(uint64)", "tensor(bool)", "tensor(string)", "tensor(complex64)",
    "tensor(complex128)",
]


def type_order(t: str) -> tuple[int, str]:
    return (TYPE_ORDER.index(t) if t in TYPE_ORDER else len(TYPE_ORDER), t)


def show_types(ts: set[str]) -> str:
    return ", ".join(tensor_elem(t) or t for t in sorted(ts, key=type_order))


def step(op: str, frm: dict, to: dict, shared, added, same) -> str:
    taken: set[str] = set()
    names: list[str | None] = []
    optional: list[bool] = []
    lhs_in: list[str] = []
    rhs_in: list[str] = []
    for p, q in zip(frm["inputs"], to["inputs"]):
        v = var_name(p["name"], taken)
        if p["option"] == "Variadic":
            lhs_in.append(f"{v}..")
            rhs_in.append(f"{v}..")
            names.append(None)
            optional.append(False)
        elif p["option"] == "Optional" and q["option"] == "Optional":
            lhs_in.append(f"{v}?")
            rhs_in.append(v)
            names.append(v)
            optional.append(True)
        else:
            lhs_in.append(v)
            rhs_in.append(v)
            names.append(v)
            optional.append(False)
    up = to["since_version"] > frm["since_version"]
    # `..rest` carries the attributes; in a version step an attribute the target version does
    # not have stops the step (it is not built), so a dropped attribute must be absent.
    lpairs: list[str] = []
    rpairs: list[str] = []
    for n, lit in added:
        # Up: written with the old behaviour; down: only where the node holds it.
        (rpairs if up else lpairs).append(f"{n}: {lit}")
    for n, v in NAMED.get(op, {}).items():
        lpairs.append(f"{n}: {v}")
        rpairs.append(f"{n}: {v}")
    if frm["attributes"] or to["attributes"]:
        lpairs.append("..rest")
        rpairs.append("..rest")
    la = f"<{', '.join(lpairs)}>" if lpairs else ""
    ra = f"<{', '.join(rpairs)}>" if rpairs else ""
    guards = type_guards(frm, to, names, optional)
    a, b = frm["since_version"], to["since_version"]
    name = f"{snake(op)}_{a}_to_{b}"
    notes = []
    widened = [
        show_types(allowed(to, q["type_str"]) - allowed(frm, p["type_str"]))
        for p, q in zip(frm["inputs"] + frm["outputs"], to["inputs"] + to["outputs"])
    ]
    if guards:
        notes.append(f"where the types are {op}-{b}'s")
    elif any(widened):
        notes.append(f"{op}-{b} allows more types")
    fa = {x["name"] for x in frm["attributes"]}
    ta = {x["name"] for x in to["attributes"]}
    if fa - ta:
        notes.append(f"{', '.join(sorted(fa - ta))} at {a}'s default")
    if ta - fa:
        held = dict(added)
        parts = [f"{n} {held[n]}" if n in held else f"{n} at its default" for n in sorted(ta - fa)]
        notes.append(", ".join(parts))
    ident = f"# {op}-{a} == {op}-{b}" + (f" ({'; '.join(notes)})" if notes else "")
    lines = [ident, f"rule {name} [version, step, exact]:"]
    lines.append(f"  {op}@{a}{la}({', '.join(lhs_in)}) => {op}@{b}{ra}({', '.join(rhs_in)})")
    if guards:
        lines.append("  where " + " && ".join(guards))
    for h in HINTS.get(op, []):
        lines.append(f"  hint {h}")
    return "\n".join(lines)


def broadcast_steps(op: str, frm: dict, to: dict) -> list[str]:
    """The steps across 7 of an op with the `broadcast` attribute: before 7 inputs broadcast
    only with `broadcast` 1, B's shape then a suffix of A's (or a scalar); from 7 numpy-style.
    Up: without broadcast (equal shapes), or with it and no `axis`. Down: equal shapes without
    it, B's shape a suffix of A's with it. Gemm's C: unidirectional from 7, `broadcast` 1 before."""
    a, b = frm["since_version"], to["since_version"]
    base = f"{snake(op)}_{a}_to_{b}"
    back = f"{snake(op)}_{b}_to_{a}"
    up_guards = type_guards(frm, to, ["x", "y"], [False, False])
    down_guards = type_guards(to, frm, ["x", "y"], [False, False])

    def rule(name, ident, lhs, rhs, guards):
        lines = [ident, f"rule {name} [version, step, exact]:", f"  {lhs} => {rhs}"]
        if guards:
            lines.append("  where " + " && ".join(guards))
        return "\n".join(lines)

    suffix = "shape(y) == select(shape(x), range(rank(x) - rank(y), rank(x)))"
    if op == "Gemm":
        return [
            rule(base, f"# Gemm-{a} == Gemm-{b} (C broadcasts unidirectionally at {b}; with broadcast 0 it has the result's shape)",
                 f"Gemm@{a}<broadcast: _, ..rest>(x, y, c)", f"Gemm@{b}<..rest>(x, y, c)", up_guards),
            rule(back, f"# Gemm-{b} == Gemm-{a} with broadcast 1 (C broadcast unidirectionally)",
                 f"Gemm@{b}<..rest>(x, y, c)", f"Gemm@{a}<broadcast: 1, ..rest>(x, y, c)", down_guards),
        ]
    return [
        rule(base, f"# {op}-{a}(x, y) == {op}-{b}(x, y) where the shapes are equal (no broadcast)",
             f"{op}@{a}(x, y)", f"{op}@{b}(x, y)", up_guards + ["same_shape(x, y)"]),
        rule(f"{base}_broadcast", f"# {op}-{a}(x, y, broadcast: 1) == {op}-{b}(x, y) where y's shape is a suffix of x's (numpy-style broadcasting agrees)",
             f"{op}@{a}<broadcast: 1>(x, y)", f"{op}@{b}(x, y)",
             up_guards + ["rank(y) <= rank(x)", suffix]),
        rule(back, f"# {op}-{b}(x, y) == {op}-{a}(x, y) where the shapes are equal",
             f"{op}@{b}(x, y)", f"{op}@{a}(x, y)", down_guards + ["same_shape(x, y)"]),
        rule(f"{back}_broadcast", f"# {op}-{b}(x, y) == {op}-{a}(x, y, broadcast: 1) where y's shape is a suffix of x's",
             f"{op}@{b}(x, y)", f"{op}@{a}<broadcast: 1>(x, y)",
             down_guards + ["rank(y) <= rank(x)", "!same_shape(x, y)", suffix]),
    ]


def generate() -> str:
    data = json.loads(SCHEMAS.read_text())
    by_op: dict[str, list[dict]] = defaultdict(list)
    for s in data["schemas"]:
        if s["domain"] == "":
            by_op[s["name"]].append(s)
    rules: list[str] = []
    skipped: list[str] = []
    count = 0
    for op in sorted(by_op):
        versions = sorted(by_op[op], key=lambda s: s["since_version"])
        reasons: dict[str, list[str]] = defaultdict(list)
        for frm, to in zip(versions, versions[1:]):
            a, b = frm["since_version"], to["since_version"]
            try:
                if frm["deprecated"] or to["deprecated"]:
                    raise Skip("deprecated")
                if any(x["type"] in ("GRAPH", "GRAPHS") for x in frm["attributes"] + to["attributes"]):
                    raise Skip("it has subgraphs")
                if "NonDeterministic" in (frm["node_determinism"], to["node_determinism"]):
                    raise Skip("nondeterministic")
                if op in NO_KERNEL:
                    raise Skip("the reference interpreter has no kernel for it")
                if op == "Constant":
                    raise Skip("constants are values of the e-graph, written at any opset")
                kinds = {x["type"] for x in frm["attributes"] + to["attributes"]}
                if kinds & {"SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"}:
                    raise Skip("it has sparse-tensor or type attributes")
                if (op, b) in MEANING:
                    raise Skip(MEANING[(op, b)])
                same_inputs(op, frm, to)
                shared, added, same = attr_plan(op, frm, to)
                if op in LOGICAL:
                    raise Skip("it has logical parameters (attributes that became inputs)")
                if any(x["name"] == "broadcast" for x in frm["attributes"] + to["attributes"]):
                    if b != 7 or any(x["name"] == "broadcast" for x in to["attributes"]):
                        raise Skip("it broadcasts by its `broadcast` attribute (before 7)")
                    rules.extend(broadcast_steps(op, frm, to))
                    count += 4 if op != "Gemm" else 2
                    continue
                up = step(op, frm, to, shared, added, same)
                down = step(op, to, frm, shared, added, same)
            except Skip as e:
                reasons[str(e)].append(f"{a}->{b}")
                continue
            rules.append(up)
            rules.append(down)
            count += 2
        for why, pairs in sorted(reasons.items()):
            if why != "deprecated":
                skipped.append(f"#   {op} {', '.join(pairs)}: {why}")
    header = [
        "# version/steps.rules: version steps generated from the operator schemas by",
        "# scripts/gen_version_rules.py; do not edit (run the script; a test checks the file is",
        "# current). Each pair of consecutive versions of an op that compute the same function",
        "# gives a step up and a step down, guarded by the element types the target version",
        "# allows. A conversion runs the steps toward its target opset, chained in one",
        "# saturation; extraction then keeps the node legal at the target.",
        f"# Generated from onnx {data['onnx_version']}'s schemas: {count} steps.",
        "# Assumes: the two versions of each pair compute the same function on the values both",
        "# allow (what `rules check` proves on random instances).",
        "#",
        "# Not generated (hand-written rules or the rebinding in crates/onnx-egraph/src/convert.rs",
        "# convert these):",
    ] + skipped
    return "\n".join(header) + "\n\n" + "\n\n".join(rules) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    args = ap.parse_args()
    text = generate()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            diff = difflib.unified_diff(
                current.splitlines(), text.splitlines(), "committed", "generated", lineterm="", n=1
            )
            sys.stderr.write("\n".join(list(diff)[:40]) + "\n")
            sys.stderr.write(f"{OUT.relative_to(ROOT)} is out of date: run python3 scripts/gen_version_rules.py\n")
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
