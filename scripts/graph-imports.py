#!/usr/bin/env python3
"""Prints the import edges between the modules of src/graph and any circle.

An edge `a -> b` means a file of module `a` names something of module `b`
(a `use`, or a path such as `super::turn::begin_poll`); a name that a
module's `mod.rs` re-exports counts as an import of that `mod.rs`. Exits 1
when some modules import one another (a circle), 0 otherwise.

    python3 scripts/graph-imports.py [src/graph]
"""

import re
import sys
from pathlib import Path


def module_of(root: Path, f: Path) -> tuple:
    rel = f.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "mod":
        parts.pop()
    return tuple(parts)


def strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    # Visibility, not an import.
    return re.sub(r"pub\s*\(\s*in\s+[\w:]+\s*\)", "pub", text)


def expand(tree: str) -> list:
    """`a::{b, c::{d, e}}` as ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [re.sub(r"\bas\w+$", "", tree)]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    return [p for it in items if it for p in expand(prefix + it)]


def paths(text: str) -> list:
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", text):
        out += expand(m.group(1))
    body = re.sub(r"\buse\s+[^;]+;", "", text)
    out += re.findall(r"\b[a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+", body)
    return out


def resolve(path: str, me: tuple, modules: set):
    segs = path.split("::")
    if segs[0] == "crate":
        cur, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        cur = me
        while segs and segs[0] in ("super", "self"):
            cur = cur[:-1] if segs[0] == "super" else cur
            segs = segs[1:]
    elif me + (segs[0],) in modules:
        cur = me
    else:
        return None
    for s in segs:
        if cur + (s,) in modules:
            cur = cur + (s,)
        else:
            break
    return cur if cur in modules else None


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "src/graph")
    files = sorted(root.rglob("*.rs"))
    modules = {module_of(root, f) for f in files}
    edges = {}
    for f in files:
        me = module_of(root, f)
        for p in paths(strip(f.read_text())):
            to = resolve(p, me, modules)
            if to is not None and to != me:
                edges.setdefault(me, set()).add(to)
    name = "::".join
    print("edges:")
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f"  {name(a)} -> {name(b)}")
    # Strongly connected components (Tarjan).
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            sccs.append(comp)

    for v in sorted(modules):
        if v not in index:
            visit(v)
    circles = [c for c in sccs if len(c) > 1]
    print("circles:" if circles else "circles: none")
    for c in circles:
        print("  " + ", ".join(sorted(name(m) for m in c)))
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
