#!/usr/bin/env python3
"""Import cycles between the modules of each crate of the workspace.

A module is a source file (`a/b.rs` or `a/b/mod.rs` is `a::b`). Module M depends on module N
when M's file names a path `crate::...` or `super::...` that resolves to N or to an item in N
(the longest module prefix of the path). A parent declaring `mod child;` is not a dependency;
`pub use child::X` is. Test modules (`#[cfg(test)] mod tests { ... }` inside a file, a file
declared `#[cfg(test)] mod tests;`, and files under `tests/`) are left out. Prints, per crate,
the modules, the dependencies, and the strongly connected components with more than one module
(each one a cycle).

    python3 scripts/module_cycles.py            # every crate and the root package
    python3 scripts/module_cycles.py --verbose  # and the members of each cycle
    python3 scripts/module_cycles.py --top      # top-level modules (a directory is one module)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules(src):
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.relpath(os.path.join(dirpath, f), src)
            parts = p[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            out[tuple(parts)] = os.path.join(dirpath, f)
    return out


def strip_tests(text):
    # Drop `#[cfg(test)] mod name { ... }` blocks (brace matched) and comments.
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand_use(tree):
    """Paths of a use tree such as `crate::a::{b, c::{d, e}}`."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    k = tree.index("{")
    if "}" not in tree:
        return [tree[:k]]
    prefix, inner = tree[:k], tree[k + 1:tree.rindex("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [q for p in parts if p for q in expand_use(prefix + p)]


def deps(mod, text, mods):
    out = set()
    paths = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        paths.extend(expand_use(m.group(1)))
    for m in re.finditer(r"\b((?:crate|super)(?:::\w+)+)", text):
        paths.append(m.group(1))
    is_dir = False
    for p in paths:
        segs = [s for s in re.split(r"::", p.split(" as ")[0]) if s]
        if not segs or segs[0] not in ("crate", "super"):
            continue
        base = list(mod)
        if segs[0] == "crate":
            base, segs = [], segs[1:]
        else:
            while segs and segs[0] == "super":
                base = base[:-1]
                segs = segs[1:]
        full = base + segs
        best = None
        for k in range(len(full), -1, -1):
            if tuple(full[:k]) in mods:
                best = tuple(full[:k])
                break
        if best is not None and best != mod:
            out.add(best)
    return out


def scc(nodes, edges):
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def test_modules(mods):
    """Modules declared `#[cfg(test)] mod name;` (a test module in its own file), with their
    descendants."""
    out = set()
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"//[^\n]*", "", f.read())
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text):
            out.add(mod + (m.group(1),))
    return {m for m in mods if any(m[:len(t)] == t for t in out)}


def crate_report(name, src, verbose, top):
    mods = modules(src)
    for m in test_modules(mods):
        del mods[m]
    edges = {}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            edges[mod] = deps(mod, strip_tests(f.read()), mods)
    if top:
        # Top-level modules: a directory module and everything under it are one.
        t = {}
        for mod, es in edges.items():
            t.setdefault(mod[:1], set()).update(e[:1] for e in es if e[:1] != mod[:1])
        mods, edges = {m: None for m in t}, t
    cycles = [c for c in scc(mods, edges) if len(c) > 1]
    in_cycles = sum(len(c) for c in cycles)
    largest = max((len(c) for c in cycles), default=0)
    print(f"{name:14} modules {len(mods):4}  deps {sum(len(e) for e in edges.values()):5}  "
          f"cycles {len(cycles):3}  modules in cycles {in_cycles:4}  largest {largest}")
    if verbose:
        for c in sorted(cycles, key=len, reverse=True):
            print("   ", ", ".join(sorted("::".join(m) or "<root>" for m in c)))
    return len(cycles)


def main():
    verbose = "--verbose" in sys.argv
    top = "--top" in sys.argv
    crates = [("onnx-opt", os.path.join(ROOT, "src"))]
    cdir = os.path.join(ROOT, "crates")
    for c in sorted(os.listdir(cdir)):
        src = os.path.join(cdir, c, "src")
        if os.path.isdir(src):
            crates.append((c, src))
    total = sum(crate_report(n, s, verbose, top) for n, s in crates)
    print(f"total cycles: {total}")


if __name__ == "__main__":
    main()
