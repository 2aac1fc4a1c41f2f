#!/usr/bin/env python3
"""Generate rules/bodies.rules: fusions read off the operator schemas' function bodies.

An op whose schema gives a context-independent function body computes what its body computes,
so the body, found in a model, can become the op: `Div(x, Add(1, Abs(x)))` is `Softsign(x)`.
For every default-domain op with such a body (the earliest schema version that has one), this
writes the body as the left side of a rule and the op as its right side, and a case model for
the rule under tests/rule_cases/ (the body written out with the attributes' defaults):

    rule softsign_from_body [fusion, opset 1..]:
      Div(x, Add(1, Abs(x))) => Softsign(x)
      where member(dtype(x), [float16, float, double]) && same_shape(x, root())

How a body becomes a pattern:
- a `Constant` of a scalar, cast to the input's type by `CastLike`, is a literal (a constant whose
  every element equals it in the input's type);
- a `Constant` of an attribute reference (`value_float: @alpha`) is a variable bound to a
  one-element constant, and the op takes `alpha: value(v)` (not for double inputs: the attribute
  is a float32);
- an attribute reference on a body node (`keepdims: @keepdims`) binds the node's attribute, and
  the op takes it; a logical parameter input (`ReduceSum`'s `axes`) is named as such;
- `Cast` to float and `CastLike` back (bodies that compute in float) are dropped, and the rule is
  then for float inputs only.
Elementwise ops are guarded by `same_shape(x, root())`, so a constant of the body does not
broadcast the result (and every input of an op in NO_BROADCAST); every rule is guarded by the
element types the op allows.

Not generated (listed in the file's header): ops with a hand-written fusion, ops whose body has
several outputs, a subgraph or no input, and the ops in SKIP with the reason.
Every generated rule must pass `onnx-opt rules check` (the test suite proves every built-in rule);
a rule the prover refutes is listed in REFUTED with what it found, and not written.

Reads the committed schema table (crates/onnx-schema/data/schemas.json) with the standard
library alone (a small reader decodes the serialized bodies). Run from the repository root:

    python3 scripts/gen_body_fusions.py           # write the rules and the cases
    python3 scripts/gen_body_fusions.py --check   # fail if the committed files differ
"""

import base64
import json
import re
import sys
from pathlib import Path

import struct

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "crates/onnx-schema/data/schemas.json"
OUT = ROOT / "rules/bodies.rules"
CASES = ROOT / "tests/rule_cases"

# Ops whose fusion is written by hand (rules/activation.rules), or that are not worth a rule.
HAND = {
    "HardSwish": "activation.rules (hard_swish_hard_sigmoid, hard_swish_clip)",
    "Mish": "activation.rules (mish)",
    "Swish": "activation.rules (swish)",
    "Relu": "activation.rules (max_zero_to_relu)",
}
SKIP = {
    "AffineGrid": "its body gives NaN where the op gives -1 (onnx_rules::version_steps::UNSOUND_BODIES)",
    "BlackmanWindow": "its body is built from the size input (Range, Cos): no exporter writes it",
    "HammingWindow": "its body is built from the size input (Range, Cos): no exporter writes it",
    "HannWindow": "its body is built from the size input (Range, Cos): no exporter writes it",
    "Range": "its body is a Loop",
    "DynamicQuantizeLinear": "several outputs",
    "MeanVarianceNormalization": "its body's Constant axes and exponent match no exporter's form",
    "ReduceLogSumExp": "its body subtracts the maximum first; exporters write Log(ReduceSum(Exp(x)))",
}
# Rules the prover refutes, with what it found; not written.
REFUTED = {}

# Ops whose inputs must have one shape where the body's elementwise ops would broadcast.
NO_BROADCAST = {"SwiGLU"}

FLOAT = 1
LOGICAL = {  # op -> {input index: logical parameter name}
    "ReduceSum": {1: "axes"},
    "ReduceMean": {1: "axes"},
    "ReduceMax": {1: "axes"},
    "ReduceMin": {1: "axes"},
    "Clip": {1: "min", 2: "max"},
}
RESERVED = {"input", "output", "rule", "where", "hint", "let", "None", "extern", "root"}


def snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def type_name(t):
    return t.replace("tensor(", "").replace(")", "")


class Untranslatable(Exception):
    pass


# --- A minimal protobuf reader for the schema table's serialized FunctionProto and
# AttributeProto (field numbers of onnx.proto), so the script needs only the standard library.

def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def _fields(buf):
    """(field number, wire type, value) of a message's fields, in order."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield field, wire, value


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


class Tensor:
    """A one-element TensorProto's value (what the bodies' Constants hold)."""

    def __init__(self, buf):
        self.dims, self.data_type, self.values = [], 0, []
        raw = b""
        for f, w, v in _fields(buf):
            if f == 1:
                self.dims += [_signed(x) for x in _packed_varints(v)] if w == 2 else [_signed(v)]
            elif f == 2:
                self.data_type = v
            elif f == 4:
                self.values += list(struct.unpack(f"<{len(v) // 4}f", v)) if w == 2 else [struct.unpack("<f", v)[0]]
            elif f == 7:
                self.values += [_signed(x) for x in _packed_varints(v)] if w == 2 else [_signed(v)]
            elif f == 9:
                raw = v
        if raw:
            fmt = {1: "f", 7: "q", 11: "d", 6: "i"}.get(self.data_type)
            if fmt is None:
                raise ValueError(f"raw data of type {self.data_type}")
            self.values = list(struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw))

    def size(self):
        n = 1
        for d in self.dims:
            n *= d
        return n


def _packed_varints(buf):
    i, out = 0, []
    while i < len(buf):
        v, i = _varint(buf, i)
        out.append(v)
    return out


class Attribute:
    FLOAT, INT, STRING, TENSOR, GRAPH, FLOATS, INTS = 1, 2, 3, 4, 5, 6, 7
    GRAPHS = 10

    def __init__(self, buf):
        self.name = self.ref_attr_name = ""
        self.type = 0
        self.f, self.i, self.t, self.floats, self.ints = 0.0, 0, None, [], []
        for f, w, v in _fields(buf):
            if f == 1:
                self.name = v.decode()
            elif f == 21:
                self.ref_attr_name = v.decode()
            elif f == 20:
                self.type = v
            elif f == 2:
                self.f = struct.unpack("<f", v)[0]
            elif f == 3:
                self.i = _signed(v)
            elif f == 5:
                self.t = Tensor(v)
            elif f == 7:
                self.floats += list(struct.unpack(f"<{len(v) // 4}f", v)) if w == 2 else [struct.unpack("<f", v)[0]]
            elif f == 8:
                self.ints += [_signed(x) for x in _packed_varints(v)] if w == 2 else [_signed(v)]

    def value(self):
        return {
            self.FLOAT: self.f,
            self.INT: self.i,
            self.FLOATS: self.floats,
            self.INTS: self.ints,
            self.TENSOR: self.t,
        }.get(self.type)


class Node:
    def __init__(self, buf):
        self.input, self.output, self.attribute = [], [], []
        self.op_type = self.domain = ""
        for f, _, v in _fields(buf):
            if f == 1:
                self.input.append(v.decode())
            elif f == 2:
                self.output.append(v.decode())
            elif f == 4:
                self.op_type = v.decode()
            elif f == 7:
                self.domain = v.decode()
            elif f == 5:
                self.attribute.append(Attribute(v))


class Function:
    def __init__(self, buf):
        self.input, self.output, self.node = [], [], []
        for f, _, v in _fields(buf):
            if f == 4:
                self.input.append(v.decode())
            elif f == 5:
                self.output.append(v.decode())
            elif f == 7:
                self.node.append(Node(v))


def tensor_scalar(t):
    if t.size() != 1 or len(t.values) != 1:
        raise Untranslatable("a Constant of several elements")
    return float(t.values[0])



def translate(schema, body):
    """The rule text and the case model text for one op, or raise Untranslatable."""
    op = schema["name"]
    if len(body.output) != 1 or not body.input:
        raise Untranslatable("several outputs or no input")
    var = {}
    for i, name in enumerate(body.input):
        v = name.lower()
        if v in RESERVED or not re.fullmatch(r"[a-z][a-z0-9_]*", v):
            v = "x" if i == 0 else f"x{i}"
        var[name] = v
    x = var[body.input[0]]
    terms = {name: ("var", var[name]) for name in body.input}
    attr_vars = {}  # attribute name -> ("const", var) or ("attr", var)
    float_only = False

    def lit(value):
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return repr(float(value))

    def render(t):
        kind, payload = t
        if kind in ("var", "term"):
            return payload
        if kind == "lit":
            return lit(payload)
        if kind == "attrconst":
            return payload
        raise Untranslatable(f"value {t}")

    for node in body.node:
        if node.domain not in ("", "ai.onnx"):
            raise Untranslatable(f"a node of domain {node.domain}")
        out = node.output[0] if node.output else None
        if len(node.output) != 1:
            raise Untranslatable(f"{node.op_type} with {len(node.output)} outputs")
        if node.op_type == "Constant":
            (a,) = node.attribute
            if a.ref_attr_name:
                v = f"{a.ref_attr_name}_v"
                attr_vars[a.ref_attr_name] = ("const", v)
                terms[out] = ("attrconst", v)
            elif a.name == "value":
                terms[out] = ("lit", tensor_scalar(a.t))
            else:
                raise Untranslatable(f"a Constant with {a.name}")
            continue
        if node.op_type == "CastLike":
            src = terms[node.input[0]]
            if src[0] not in ("lit", "attrconst"):
                float_only = True
            terms[out] = src
            continue
        if node.op_type == "Cast":
            to = [a.i for a in node.attribute if a.name == "to"]
            if to != [FLOAT]:
                raise Untranslatable("a Cast to a type other than float")
            float_only = True
            terms[out] = terms[node.input[0]]
            continue
        attrs = []
        for a in node.attribute:
            if a.type in (Attribute.GRAPH, Attribute.GRAPHS):
                raise Untranslatable("a subgraph")
            if a.ref_attr_name:
                v = f"{a.ref_attr_name}_a"
                attr_vars[a.ref_attr_name] = ("attr", v)
                attrs.append(f"{a.name}: {v}")
            else:
                value = a.value()
                if isinstance(value, float):
                    attrs.append(f"{a.name}: {lit(value)}")
                elif isinstance(value, int):
                    attrs.append(f"{a.name}: {value}")
                elif isinstance(value, list) and all(isinstance(e, int) for e in value):
                    attrs.append(f"{a.name}: [{', '.join(map(str, value))}]")
                else:
                    raise Untranslatable(f"attribute {a.name}")
        args = []
        logical = LOGICAL.get(node.op_type, {})
        for k, i in enumerate(node.input):
            if k in logical:
                if i == "":
                    continue
                t = terms[i]
                if t[0] != "var":
                    raise Untranslatable("a logical parameter from a computed value")
                attrs.append(f"{logical[k]}: {t[1]}")
                continue
            args.append("None" if i == "" else render(terms[i]))
        a = f"<{', '.join(attrs)}>" if attrs else ""
        terms[out] = ("term", f"{node.op_type}{a}({', '.join(args)})")
    lhs = terms[body.output[0]]
    if lhs[0] != "term":
        raise Untranslatable("the body's output is not computed")
    lhs = lhs[1]

    # The right side: the op, its inputs and the attributes the body refers to.
    rhs_attrs, guards = [], []
    for name, (kind, v) in attr_vars.items():
        if kind == "const":
            rhs_attrs.append(f"{name}: value({v})")
            guards.append(f"is_const({v}) && numel({v}) == 1")
        else:
            rhs_attrs.append(f"{name}: {v}")
    rhs_inputs = []
    for inp, name in zip(schema["inputs"], body.input):
        if inp["name"] in ("axes",) and op.startswith("Reduce"):
            rhs_attrs.append(f"axes: {var[name]}")
            continue
        rhs_inputs.append(var[name])
    a = f"<{', '.join(rhs_attrs)}>" if rhs_attrs else ""
    rhs = f"{op}{a}({', '.join(rhs_inputs)})"

    tp = schema["inputs"][0]["type_str"]
    allowed = next(c["allowed"] for c in schema["type_constraints"] if c["type_param"] == tp)
    allowed = [type_name(t) for t in allowed]
    if float_only:
        allowed = [t for t in allowed if t == "float"]
    if any(k == "const" for k, _ in attr_vars.values()):
        allowed = [t for t in allowed if t != "double"]
    if not allowed:
        raise Untranslatable("no element type left")
    guards.insert(0, f"member(dtype({x}), [{', '.join(allowed)}])")
    elementwise = not op.startswith("Reduce") and op not in ("GreaterOrEqual", "LessOrEqual")
    if elementwise:
        guards.append(f"same_shape({x}, root())")
    if op in NO_BROADCAST:
        guards += [f"same_shape({var[n]}, root())" for n in body.input[1:]]
    return lhs, rhs, guards, var, attr_vars, allowed


def case_text(schema, body, opset, var, allowed):
    """A model that holds the body, with the attributes' defaults, and floats as inputs."""
    defaults = {}
    for a in schema["attributes"]:
        if a.get("default"):
            defaults[a["name"]] = Attribute(base64.b64decode(a["default"])).value()
    dtype = "float" if "float" in allowed else allowed[0]
    lines, inputs = [], []
    for name in body.input:
        v = var[name]
        if name == "axes":
            lines.append(f"  {v} = Constant <value = int64[1] {{1}}> ()")
        else:
            inputs.append(f"{dtype}[2,3] {v}")
    names = {name: var[name] for name in body.input}
    for k, node in enumerate(body.node):
        out = f"t{k}"
        names[node.output[0]] = out
        if node.op_type == "Constant":
            (a,) = node.attribute
            if a.ref_attr_name:
                # A default of 0 would make the body's Add and Sub by it no-ops the cleanups
                # fold first (with -0.0 against 0.0 among the constants): 0.25 instead.
                value = float(defaults.get(a.ref_attr_name, 0.5)) or 0.25
                lines.append(f"  {out} = Constant <value = {dtype} {{{value!r}}}> ()")
            else:
                value = tensor_scalar(a.t)
                lines.append(f"  {out} = Constant <value = {dtype} {{{value!r}}}> ()")
            continue
        if node.op_type in ("CastLike", "Cast"):
            lines.append(f"  {out} = Identity({names[node.input[0]]})")
            continue
        attrs = []
        for a in node.attribute:
            if a.ref_attr_name:
                value = defaults.get(a.ref_attr_name, 0)
                attrs.append(f"{a.name} = {value}")
            else:
                value = a.value()
                attrs.append(f"{a.name} = {value!r}" if not isinstance(value, list) else f"{a.name} = {value}")
        a = f" <{', '.join(attrs)}>" if attrs else ""
        args = ", ".join(names.get(i, "") for i in node.input)
        lines.append(f"  {out} = {node.op_type}{a} ({args})")
    last = names[body.output[0]]
    lines[-1] = lines[-1].replace(f"  {last} = ", "  y = ", 1)
    ins = ", ".join(inputs)
    op = schema["name"]
    if op.startswith("Reduce"):
        out = f"{dtype}[2,1] y" if defaults.get("keepdims", 1) else f"{dtype}[2] y"
    elif op in ("GreaterOrEqual", "LessOrEqual"):
        out = "bool[2,3] y"
    else:
        out = f"{dtype}[2,3] y"
    return (
        f'<ir_version: 10, opset_import: ["" : {opset}]>\n'
        f"g ({ins}) => ({out}) {{\n" + "\n".join(lines) + "\n}\n"
    )


def main():
    table = json.loads(SCHEMAS.read_text())
    by_op = {}
    for s in table["schemas"]:
        if s["domain"] != "" or not s.get("function_bodies"):
            continue
        if s["name"] not in by_op or s["since_version"] < by_op[s["name"]]["since_version"]:
            by_op[s["name"]] = s
    rules, cases, left_out = [], {}, []
    for op in sorted(by_op):
        s = by_op[op]
        if op in HAND:
            left_out.append(f"{op}: a hand-written fusion in {HAND[op]}")
            continue
        if op in SKIP:
            left_out.append(f"{op}: {SKIP[op]}")
            continue
        name = f"{snake(op)}_from_body"
        if name in REFUTED:
            left_out.append(f"{op}: refuted by the prover: {REFUTED[name]}")
            continue
        fb = s["function_bodies"][-1]
        body = Function(base64.b64decode(fb["body"]))
        try:
            lhs, rhs, guards, var, attr_vars, allowed = translate(s, body)
        except Untranslatable as e:
            left_out.append(f"{op}: {e}")
            continue
        opset = s["since_version"]
        hint = ""
        consts = [v for k, v in attr_vars.values() if k == "const"]
        if consts:
            hint = "\n  hint " + " && ".join(f"rank({v}) == 0" for v in consts)
        where = "\n    && ".join(guards)
        rules.append(
            f"# {op}'s function body (schema {op}-{opset}, body at opset {fb['opset_version']}) == {op}\n"
            f"rule {name} [fusion, opset {opset}..]:\n"
            f"  {lhs}\n  => {rhs}\n  where {where}{hint}\n"
        )
        cases[name] = case_text(s, body, max(opset, 13), var, allowed)
    header = [
        "# bodies.rules: fusions read off the operator schemas' function bodies, generated by",
        "# scripts/gen_body_fusions.py from the committed schema table; do not edit (run the",
        "# script). Each rule's left side is an op's context-independent function body, its right",
        "# side the op; constants of the body are literals, attribute references bind attributes.",
        f"# Generated from onnx {table['onnx_version']}'s schemas: {len(rules)} rules.",
        "# Assumes: an op computes what its schema's body computes (what `rules check` proves on",
        "# random instances); the op rounds once where the body rounds at each step.",
        "#",
        "# Not generated:",
    ] + [f"#   {line}" for line in left_out]
    files = {OUT: "\n".join(header) + "\n\n" + "\n".join(rules)}
    for name, text in cases.items():
        files[CASES / f"{name}.onnxtxt"] = text
    if "--check" in sys.argv[1:]:
        stale = [p for p, t in files.items() if not p.exists() or p.read_text() != t]
        for p in stale:
            print(f"{p.relative_to(ROOT)} is not what scripts/gen_body_fusions.py writes; run it")
        return 1 if stale else 0
    for p, t in files.items():
        p.write_text(t)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(rules)} rules, {len(cases)} cases; left out {len(left_out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
