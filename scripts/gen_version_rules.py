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
    ("GridSample", 20): "renames its modes at 20 (moves.rules)",
    # The pooling ops' output size with ceil_mode: from 22 a last window starting in the end
    # padding is dropped.
    ("AveragePool", 22): "ceil_mode drops a window starting in the padding from 22",
    ("MaxPool", 22): "ceil_mode drops a window starting in the padding from 22",
    ("LpPool", 22): "ceil_mode drops a window starting in the padding from 22",
    # Attention 25 refuses q_num_heads/kv_num_heads on 4-D inputs.
    ("Attention", 25): "refuses head counts on 4-D inputs from 25",
    # PRelu 7 broadcasts the slope unidirectionally (numpy-style); 6 shared a size-1 slope
    # across channels.
    ("PRelu", 7): "broadcasts its slope numpy-style from 7 (moves.rules)",
}

# The pairs of MEANING written out by variadic_broadcast_steps (one step down per arity, to
# this many inputs; a node with more is left to the rebinding).
VARIADIC_BROADCAST = {("Sum", 8), ("Max", 8), ("Min", 8), ("Mean", 8)}
MAX_VARIADIC_INPUTS = 4

# The pooling pairs of MEANING across 22: generated for `ceil_mode` 0, where both versions
# give the same windows (a node with `ceil_mode` 1 is left to the rebinding, which checks its
# windows).
CEIL_22 = {("AveragePool", 22), ("MaxPool", 22), ("LpPool", 22)}

# The pairs of MEANING written out by axis_family_steps.
AXIS_FAMILY = {("Softmax", 13), ("LogSoftmax", 13), ("Hardmax", 13)}

# Ops the reference interpreter has no kernel for: their steps could not be proven.
NO_KERNEL = {"MaxRoiPool"}

# Attributes a step names (with a variable, on both sides) so that a hint can steer the
# prover's instances, and the hints: ops whose random instances rarely run.
NAMED = {
    "AveragePool": {"kernel_shape": "k"},
    "MaxPool": {"kernel_shape": "k"},
    "LpPool": {"kernel_shape": "k"},
    "MaxUnpool": {"kernel_shape": "k"},
}
HINTS = {
    "AveragePool": ["rank(x) == 4 && k == [2, 2]"],
    "MaxPool": ["rank(x) == 4 && k == [2, 2]"],
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

# Logical parameters (rules/README.md; crates/onnx-rules/src/params.rs is the table the rule
# compiler reads, this mirrors it): per op and version, name -> ("attr", attribute) or
# ("input", slot). A step names them on both sides, so the rule language moves a value between
# an attribute and an input; they are left out when the two versions' inputs and attributes are
# compared.
REDUCTIONS = [
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
]


def logical_params(op: str, v: int) -> dict[str, tuple[str, object]]:
    def at(moved_at: int, name: str, slot: int) -> dict[str, tuple[str, object]]:
        return {name: ("attr", name) if v < moved_at else ("input", slot)}

    if op in ("Squeeze", "Unsqueeze", "ReduceSum"):
        return at(13, "axes", 1)
    if op in REDUCTIONS:
        return at(18, "axes", 1)
    if op == "Split":
        return at(13, "split", 1) if v >= 2 else {}
    if op == "Clip":
        if v < 11:
            return {"min": ("attr", "min"), "max": ("attr", "max")}
        return {"min": ("input", 1), "max": ("input", 2)}
    if op == "Pad":
        if v < 2:
            return {"pads": ("attr", "paddings"), "value": ("attr", "value")}
        if v < 11:
            return {"pads": ("attr", "pads"), "value": ("attr", "value")}
        out = {"pads": ("input", 1), "value": ("input", 2)}
        if v >= 18:
            out["axes"] = ("input", 3)
        return out
    if op == "Slice":
        if v < 10:
            return {"starts": ("attr", "starts"), "ends": ("attr", "ends"), "axes": ("attr", "axes")}
        return {"starts": ("input", 1), "ends": ("input", 2), "axes": ("input", 3), "steps": ("input", 4)}
    if op == "TopK":
        return at(10, "k", 1)
    if op == "Reshape":
        return at(5, "shape", 1)
    if op == "Dropout":
        if v < 12:
            return {"ratio": ("attr", "ratio")}
        return {"ratio": ("input", 1), "training_mode": ("input", 2)}
    if op == "Upsample":
        return {} if v < 7 else at(9, "scales", 1)
    if op == "DFT":
        return at(20, "axis", 2)
    if op == "Resize":
        if v < 11:
            return {"scales": ("input", 1)}
        return {"roi": ("input", 1), "scales": ("input", 2), "sizes": ("input", 3)}
    return {}


# Logical parameters one version has and the other does not: the value every element of a
# given one must hold to mean the other version's behaviour (None: it must be absent).
PARAM_ONLY_DEFAULT = {
    ("Slice", "steps"): "1",
    ("Dropout", "training_mode"): "0",
    ("Pad", "axes"): None,
}

# Pairs left to hand-written rules (rules/version/moves.rules) although the generator could
# read them: the absence of a logical parameter means something else on the two sides.
BY_HAND = {
    ("Clip", 11): "an absent min or max clips at the float limits before 11, not at all from 11 (moves.rules)",
    ("Upsample", 9): "an empty scales input reads as absent from 9 (moves.rules)",
}

# Guards a generated step needs beyond types, by (op, from, to), over the step's variables (the
# logical parameters are named as themselves): Split-18 without `split` takes `num_outputs`
# (split_num_outputs_steps writes those), Split-13 without it splits evenly; Resize-11 needs
# roi and scales given (resize_13_to_11_* in moves.rules write empty ones).
EXTRA_GUARDS = {
    ("Split", 13, 18): ["!is_absent(split)"],
    ("Split", 18, 13): ["!is_absent(split)"],
    ("Resize", 13, 11): ["!is_absent(roi)", "!is_absent(scales)"],
    # DFT-20 without axis means -2, DFT-17 without it 1 (dft_20_to_17_default_axis in
    # moves.rules writes -2).
    ("DFT", 20, 17): ["!is_absent(axis)"],
}

# Output counts a step is generated for, where not every count the schema allows is a use:
# BatchNormalization has 5 outputs (before 14) or 3 (from 14) only when training, which the
# steps do not convert.
OUTPUT_COUNTS = {"BatchNormalization": [1]}

# Nondeterministic ops whose steps hold in inference: Dropout with training off is an identity
# (and an all-true mask).
INFERENCE_ONLY = {"Dropout"}

# Attributes a later version dropped whose old value other than the default is the later
# behaviour: (op, attribute) -> the literal the earlier version must hold. Dropout before 7
# trains unless is_test is 1.
DROPPED_HELD = {("Dropout", "is_test"): "1"}

# Ops with outputs of variadic arity: steps are generated for 1 to this many outputs (a node
# with more is left to the rebinding in crates/onnx-egraph/src/convert.rs).
MAX_VARIADIC_OUTPUTS = 16


def strip(schema: dict, params: dict[str, tuple[str, object]]) -> dict:
    """The schema without its logical parameters (the positional inputs of a rule)."""
    slots = {loc for kind, loc in params.values() if kind == "input"}
    attrs = {loc for kind, loc in params.values() if kind == "attr"}
    out = dict(schema)
    out["inputs"] = [p for i, p in enumerate(schema["inputs"]) if i not in slots]
    out["attributes"] = [a for a in schema["attributes"] if a["name"] not in attrs]
    return out


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
    # A later version may add optional inputs at the end (Attention's nonpad_kv_seqlen at 24):
    # a step up leaves them absent, a step down needs them absent.
    short, long = sorted((a["inputs"], b["inputs"]), key=len)
    if len(short) != len(long) and (
        any(p["option"] != "Optional" for p in long[len(short):])
        or any(p["option"] == "Variadic" for p in short)
    ):
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


def first_outputs(s: dict, n: int) -> list[dict] | None:
    """The formal outputs of a node of schema `s` with `n` outputs (None: not allowed)."""
    if n < max(1, s["min_output"]) or n > s["max_output"]:
        return None
    outs = s["outputs"]
    res = []
    for i in range(n):
        if i < len(outs) and outs[i]["option"] != "Variadic":
            res.append(outs[i])
        elif outs and outs[min(i, len(outs) - 1)]["option"] == "Variadic":
            res.append(outs[min(i, len(outs) - 1)])
        else:
            return None
    return res


def output_counts(a: dict, b: dict) -> list[int]:
    """The output counts a node can have at both versions with the same outputs (names and
    options): one step per count (a multi-output node is matched with its count)."""
    top = min(a["max_output"], b["max_output"], MAX_VARIADIC_OUTPUTS)
    counts = []
    for n in range(1, top + 1):
        fa, fb = first_outputs(a, n), first_outputs(b, n)
        if fa is None or fb is None:
            continue
        if all(p["name"] == q["name"] and p["option"] == q["option"] for p, q in zip(fa, fb)):
            counts.append(n)
    return counts


def attr_plan(op: str, a: dict, b: dict) -> tuple[list[str], list[tuple[str, str]], bool]:
    """The shared attributes, the added ones written with their old behaviour (name, literal),
    and whether the attributes are the same (then `..rest` carries them)."""
    aa = {x["name"]: x for x in a["attributes"]}
    ba = {x["name"]: x for x in b["attributes"]}
    shared = sorted(set(aa) & set(ba))
    for n in shared:
        x, y = aa[n], ba[n]
        if x["type"] != y["type"] or x["required"] != y["required"] or x["default"] != y["default"]:
            raise Skip(f"its attribute `{n}` changes" + (" (moves.rules)" if (op, n) == ("Concat", "axis") else ""))
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


def type_guards(frm: dict, to: dict, names: list[str | None], optional: list[bool], n_out: int = 1) -> list[str]:
    """Guards that the values' element types are allowed by `to` where `frm` allows others, and
    that values `to` ties to one type parameter have one type. The outputs are the first
    `n_out`; only a single output can be named in a guard (`root()`)."""
    guards: list[str] = []
    outs_from, outs_to = first_outputs(frm, n_out), first_outputs(to, n_out)
    # Positions: the inputs, then the outputs.
    slots = [(p["type_str"], q["type_str"]) for p, q in zip(frm["inputs"], to["inputs"])]
    slots += [(p["type_str"], q["type_str"]) for p, q in zip(outs_from, outs_to)]
    refs = list(names) + (["root()"] if n_out == 1 else [None] * n_out)
    opts = list(optional) + [False] * n_out

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
            # A variadic input or an output: a guard on a named value of the same type
            # parameter covers it.
            if any(same_param(i, j) and refs[j] is not None and not opts[j] for j in range(len(slots)) if j != i):
                continue
            raise Skip("a variadic input's or an output's types differ")
        guarded.append(i)
        g = f"member(dtype({ref}), [{', '.join(elems)}])"
        if opts[i]:
            g = f"(is_absent({ref}) || {g})"
        guards.append(g)
    def proxy(j: int) -> str | None:
        # A value whose element type is slot j's: itself, or a named input of the same type
        # parameter in `frm` (an output's type follows its inputs').
        if refs[j] is not None and not opts[j]:
            return refs[j]
        for k in range(len(names)):
            if refs[k] is not None and not opts[k] and slots[k][0] == slots[j][0] and is_param(frm, slots[j][0]):
                return refs[k]
        return None

    # Ties: two slots with one type parameter in `to` but not in `frm`.
    for i in range(len(slots)):
        for j in range(i + 1, len(slots)):
            (fi, ti), (fj, tj) = slots[i], slots[j]
            if ti == tj and is_param(to, ti) and not (fi == fj and is_param(frm, fi)):
                a, b = proxy(i), proxy(j)
                if a is None or b is None:
                    raise Skip("it ties a variadic or optional input's type")
                if a != b:
                    guards.append(f"dtype({a}) == dtype({b})")
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


def step(op: str, frm: dict, to: dict, shared, added, same, n_out: int = 1) -> str:
    """One step from `frm` to `to` for a node with `n_out` outputs (several: the rule's root is
    the node itself, `Op@a#n`, and its projections follow)."""
    lpf = logical_params(op, frm["since_version"])
    lpt = logical_params(op, to["since_version"])
    sfrm, sto = strip(frm, lpf), strip(to, lpt)
    taken: set[str] = set()
    names: list[str | None] = []
    optional: list[bool] = []
    lhs_in: list[str] = []
    rhs_in: list[str] = []
    for p, q in zip(sfrm["inputs"], sto["inputs"]):
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
    # Optional inputs only the source has (a step down from a version that added them) must
    # be absent.
    for _ in sfrm["inputs"][len(sto["inputs"]):]:
        lhs_in.append("None")
    up = to["since_version"] > frm["since_version"]
    # `..rest` carries the attributes; in a version step an attribute the target version does
    # not have stops the step (it is not built), so a dropped attribute must be absent.
    lpairs: list[str] = []
    rpairs: list[str] = []
    param_guards: list[str] = []
    for n, lit in added:
        # Up: written with the old behaviour; down: only where the node holds it.
        (rpairs if up else lpairs).append(f"{n}: {lit}")
    fa = {x["name"] for x in sfrm["attributes"]}
    ta = {x["name"] for x in sto["attributes"]}
    for (o, n), lit in DROPPED_HELD.items():
        if o != op:
            continue
        if n in fa and n in ta:
            lpairs.append(f"{n}: {lit}")
            rpairs.append(f"{n}: {lit}")
        elif n in fa:
            lpairs.append(f"{n}: {lit}")
        elif n in ta:
            rpairs.append(f"{n}: {lit}")
    # Logical parameters: named on both sides (the language moves them); one only the source
    # has must mean the target's behaviour.
    for pname in sorted(set(lpf) | set(lpt)):
        if pname not in lpf:
            continue
        v = var_name(pname, taken)
        lpairs.append(f"{pname}: {v}")
        if pname in lpt:
            rpairs.append(f"{pname}: {v}")
            if op in INFERENCE_ONLY and (op, pname) in PARAM_ONLY_DEFAULT:
                default = PARAM_ONLY_DEFAULT[(op, pname)]
                param_guards.append(f"(is_absent({v}) || all_equal({v}, {default}))")
            continue
        if (op, pname) not in PARAM_ONLY_DEFAULT:
            raise Skip(f"its logical parameter `{pname}` has no value that is the other version's behaviour")
        default = PARAM_ONLY_DEFAULT[(op, pname)]
        if default is None:
            param_guards.append(f"is_absent({v})")
        else:
            param_guards.append(f"(is_absent({v}) || all_equal({v}, {default}))")
    for n, v in NAMED.get(op, {}).items():
        lpairs.append(f"{n}: {v}")
        rpairs.append(f"{n}: {v}")
    if (op, max(frm["since_version"], to["since_version"])) in CEIL_22:
        lpairs.append("ceil_mode: 0")
        rpairs.append("ceil_mode: 0")
    if sfrm["attributes"] or sto["attributes"]:
        lpairs.append("..rest")
        rpairs.append("..rest")
    la = f"<{', '.join(lpairs)}>" if lpairs else ""
    ra = f"<{', '.join(rpairs)}>" if rpairs else ""
    guards = type_guards(sfrm, sto, names, optional, n_out) + param_guards
    guards += EXTRA_GUARDS.get((op, frm["since_version"], to["since_version"]), [])
    a, b = frm["since_version"], to["since_version"]
    head, sfx, count_note = count_parts(n_out)
    name = f"{snake(op)}_{a}_to_{b}{sfx}"
    notes = []
    widened = [
        show_types(allowed(to, q["type_str"]) - allowed(frm, p["type_str"]))
        for p, q in zip(frm["inputs"] + frm["outputs"], to["inputs"] + to["outputs"])
    ]
    if guards:
        notes.append(f"where the types are {op}-{b}'s")
    elif any(widened):
        notes.append(f"{op}-{b} allows more types")
    if fa - ta:
        notes.append(f"{', '.join(sorted(fa - ta))} at {a}'s default")
    if ta - fa:
        held = dict(added)
        parts = [f"{n} {held[n]}" if n in held else f"{n} at its default" for n in sorted(ta - fa)]
        notes.append(", ".join(parts))
    if (op, max(a, b)) in CEIL_22:
        notes.append("ceil_mode 0: the same windows")
    moved = [p for p in sorted(set(lpf) & set(lpt)) if lpf[p][0] != lpt[p][0]]
    if moved:
        notes.append(f"{', '.join(moved)} moved between an attribute and an input")
    if count_note:
        notes.append(count_note)
    ident = f"# {op}-{a} == {op}-{b}" + (f" ({'; '.join(notes)})" if notes else "")
    lines = [ident, f"rule {name} [version, step, exact]:"]
    lines.append(f"  {op}@{a}{head}{la}({', '.join(lhs_in)}) => {op}@{b}{head}{ra}({', '.join(rhs_in)})")
    if guards:
        lines.append("  where " + " && ".join(guards))
    for h in HINTS.get(op, []):
        lines.append(f"  hint {h}")
    return "\n".join(lines)


def variadic_broadcast_steps(op: str, frm: dict, to: dict) -> list[str]:
    """Sum, Max, Min and Mean across 8: before, every input has the output's shape; from 8
    they broadcast. Up always; down where the inputs' shapes are equal (one step per arity)."""
    s = snake(op)
    a, b = frm["since_version"], to["since_version"]
    out = []
    for n in range(1, MAX_VARIADIC_INPUTS + 1):
        names = [f"x{i}" for i in range(n)]
        for frm_v, to_v, f, t in ((a, b, frm, to), (b, a, to, frm)):
            guards = [f"same_shape(x0, {v})" for v in names[1:]]
            if allowed(t, "T") != allowed(f, "T"):
                guards.append(f"member(dtype(x0), [{', '.join(tensor_elem(x) for x in sorted(allowed(t, 'T'), key=type_order))}])")
            out.append("\n".join(
                [f"# {op}-{frm_v} of {n} input(s) with one shape == {op}-{to_v}",
                 f"rule {s}_{frm_v}_to_{to_v}_{n} [version, step, exact]:",
                 f"  {op}@{frm_v}({', '.join(names)}) => {op}@{to_v}({', '.join(names)})"]
                + (["  where " + " && ".join(guards)] if guards else [])
            ))
    return out


# TensorProto.DataType codes of the types Cast-1 names by string.
CAST1_TYPES = {
    "FLOAT": 1, "UINT8": 2, "INT8": 3, "UINT16": 4, "INT16": 5, "INT32": 6, "INT64": 7,
    "BOOL": 9, "FLOAT16": 10, "DOUBLE": 11, "UINT32": 12, "UINT64": 13,
}


def cast_steps() -> list[str]:
    """Cast 1 <-> 6: `to` names the type by string at 1 and by code from 6 (one step per type,
    both ways; the type sets are the same)."""
    out = []
    for name, code in CAST1_TYPES.items():
        low = name.lower()
        out.append("\n".join([
            f'# Cast-1 to "{name}" == Cast-6 to {code}',
            f"rule cast_1_to_6_{low} [version, step, exact]:",
            f'  Cast@1<to: "{name}">(x) => Cast@6<to: {code}>(x)',
        ]))
        out.append("\n".join([
            f'# Cast-6 to {code} == Cast-1 to "{name}"',
            f"rule cast_6_to_1_{low} [version, step, exact]:",
            f'  Cast@6<to: {code}>(x) => Cast@1<to: "{name}">(x)',
        ]))
    return out


def axis_family_steps(op: str) -> list[str]:
    """Softmax, LogSoftmax and Hardmax across 13: before, the input is coerced to 2-D at
    `axis` and normalized over each row; from 13, over `axis` alone. Over the last axis both
    agree. Up at another axis, for targets from 14: Flatten at the axis, normalize the rows,
    Reshape back with allowzero. (decompose.rules moves any axis last, and writes the Flatten
    form with a Reshape of 13 where x has no 0 dim.)"""
    s = snake(op)
    return [
        "\n".join([
            f"# {op}-11 over the last axis == {op}-13 over it",
            f"rule {s}_11_to_13 [version, step, exact]:",
            f"  {op}@11<axis: a>(x) => {op}@13<axis: a>(x)",
            "  where rank(x) >= 1 && (a == -1 || a == rank(x) - 1)",
            "  hint a == -1",
        ]),
        "\n".join([
            f"# {op}-11 at axis a == {op}-13 over the rows of x flattened at a, reshaped back with",
            "# allowzero (a Reshape without it would copy a dim of the rows where x has a 0 dim)",
            f"rule {s}_11_to_14_flattened [version, step, exact]:",
            f"  {op}@11<axis: a>(x) => Reshape@14<shape: s, allowzero: 1>({op}@13<axis: -1>(Flatten@13<axis: a>(x)))",
            "  let s = Shape@13(x)",
            "  where rank(x) >= 2 && a != -1 && a != rank(x) - 1",
            "  hint rank(x) == 3 && a == 1",
        ]),
        "\n".join([
            f"# {op}-13 over the last axis == {op}-11 over it",
            f"rule {s}_13_to_11 [version, step, exact]:",
            f"  {op}@13<axis: a>(x) => {op}@11<axis: a>(x)",
            "  where rank(x) >= 1 && (a == -1 || a == rank(x) - 1)",
            "  hint a == -1",
        ]),
    ]


def attention_25_steps() -> list[str]:
    """Attention 24 <-> 25: from 25, q_num_heads and kv_num_heads are refused on 4-D inputs
    (their heads are in the shape; 24 ignores them there), so up they are dropped on 4-D
    inputs; down, 25's window attributes must hold their defaults (`..rest` stops the step
    otherwise). One step per output count."""
    ins = "q, k, v, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?"
    outs = "q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen"
    out = []
    for n in range(1, 5):
        head, sfx, note = count_parts(n)
        paren = f" ({note})" if note else ""
        out.append("\n".join([
            f"# Attention-24 on 3-D inputs, or without head counts == Attention-25{paren}",
            f"rule attention_24_to_25{sfx} [version, step, exact]:",
            f"  Attention@24{head}<q_num_heads: qh, kv_num_heads: kh, ..rest>({ins})",
            f"  => Attention@25{head}<q_num_heads: qh, kv_num_heads: kh, ..rest>({outs})",
            "  where rank(q) == 3 || (is_absent(qh) && is_absent(kh))",
        ]))
        out.append("\n".join([
            f"# Attention-24 on 4-D inputs == Attention-25 without the head counts (24 ignores them there{'; ' + note if note else ''})",
            f"rule attention_24_to_25_4d{sfx} [version, step, exact]:",
            f"  Attention@24{head}<q_num_heads: _, kv_num_heads: _, ..rest>({ins}) => Attention@25{head}<..rest>({outs})",
            "  where rank(q) == 4",
            "  hint rank(q) == 4",
        ]))
        out.append("\n".join([
            f"# Attention-25 with its window attributes at their defaults == Attention-24{paren}",
            f"rule attention_25_to_24{sfx} [version, step, exact]:",
            f"  Attention@25{head}<..rest>({ins}) => Attention@24{head}<..rest>({outs})",
        ]))
    return out


def count_parts(n: int) -> tuple[str, str, str]:
    """For a step of a node with n outputs: the head's `#n`, the rule name's suffix and the
    identity comment's note (all empty for one output)."""
    if n == 1:
        return "", "", ""
    return f"#{n}", f"_{n}_outputs", f"{n} outputs"


def split_num_outputs_steps() -> list[str]:
    """Split 13 <-> 18 without a `split` input: 13 splits evenly; 18 takes `num_outputs` (its
    last part is smaller where the dim does not divide), so going down the dim must divide."""
    out = []
    for n in range(1, MAX_VARIADIC_OUTPUTS + 1):
        head, sfx, note = count_parts(n)
        more = f"; {note})" if note else ")"
        out.append("\n".join([
            f"# Split-13 == Split-18 with num_outputs {n} (no split input: even parts{more}",
            f"rule split_13_to_18_even{sfx} [version, step, exact]:",
            f"  Split@13{head}<split: s, ..rest>(input) => Split@18{head}<num_outputs: {n}, ..rest>(input)",
            "  where is_absent(s)",
        ]))
        out.append("\n".join([
            f"# Split-18 with num_outputs {n} == Split-13 where the dim divides (no split input{more};",
            "# num_outputs must be the node's output count: a node with fewer outputs than parts",
            "# reads the first parts of num_outputs, where Split-13 would split by its outputs)",
            f"rule split_18_to_13_even{sfx} [version, step, exact]:",
            f"  Split@18{head}<num_outputs: {n}, axis: a, ..rest>(input) => Split@13{head}<axis: a, ..rest>(input)",
            f"  where dim(input, a) % {n} == 0",
            f"  hint a == 0 && dim(input, 0) == {2 * n}",
        ]))
    return out


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
                if (op, b) in BY_HAND:
                    raise Skip(BY_HAND[(op, b)])
                if "NonDeterministic" in (frm["node_determinism"], to["node_determinism"]) and op not in INFERENCE_ONLY:
                    raise Skip("nondeterministic")
                if op in NO_KERNEL:
                    raise Skip("the reference interpreter has no kernel for it")
                if op == "Constant":
                    raise Skip("constants are values of the e-graph, written at any opset")
                kinds = {x["type"] for x in frm["attributes"] + to["attributes"]}
                if kinds & {"SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"}:
                    raise Skip("it has sparse-tensor or type attributes")
                if (op, b) == ("Attention", 25):
                    extra = attention_25_steps()
                    rules.extend(extra)
                    count += len(extra)
                    continue
                if (op, a, b) == ("Cast", 1, 6):
                    extra = cast_steps()
                    rules.extend(extra)
                    count += len(extra)
                    continue
                if (op, b) in VARIADIC_BROADCAST:
                    extra = variadic_broadcast_steps(op, frm, to)
                    rules.extend(extra)
                    count += len(extra)
                    continue
                if (op, b) in AXIS_FAMILY:
                    extra = axis_family_steps(op)
                    rules.extend(extra)
                    count += len(extra)
                    continue
                if (op, b) in MEANING and (op, b) not in CEIL_22:
                    raise Skip(MEANING[(op, b)])
                lpf, lpt = logical_params(op, a), logical_params(op, b)
                same_inputs(op, strip(frm, lpf), strip(to, lpt))
                counts = [n for n in output_counts(frm, to) if n in OUTPUT_COUNTS.get(op, [n])]
                if not counts:
                    raise Skip("its outputs change")
                shared, added, same = attr_plan(op, strip(frm, lpf), strip(to, lpt))
                if any(x["name"] == "broadcast" for x in frm["attributes"] + to["attributes"]):
                    both = all(any(x["name"] == "broadcast" for x in v["attributes"]) for v in (frm, to))
                    if b != 7 and not both:
                        raise Skip("it broadcasts by its `broadcast` attribute (before 7)")
                if any(x["name"] == "broadcast" for x in frm["attributes"]) and not any(
                    x["name"] == "broadcast" for x in to["attributes"]
                ):
                    rules.extend(broadcast_steps(op, frm, to))
                    count += 4 if op != "Gemm" else 2
                    continue
                pair = []
                for n in counts:
                    try:
                        both = [step(op, frm, to, shared, added, same, n), step(op, to, frm, shared, added, same, n)]
                    except Skip as e:
                        if n == 1:
                            raise
                        reasons[f"with {n} outputs, {e}"].append(f"{a}->{b}")
                        continue
                    pair.extend(both)
            except Skip as e:
                reasons[str(e)].append(f"{a}->{b}")
                continue
            rules.extend(pair)
            count += len(pair)
            if op == "Split" and (a, b) == (13, 18):
                extra = split_num_outputs_steps()
                rules.extend(extra)
                count += len(extra)
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
