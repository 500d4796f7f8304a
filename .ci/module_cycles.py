#!/usr/bin/env python3
"""Fails if modules inside a crate depend on each other in a circle
(ARCHITECTURE.md: dependencies point one way).

Edges are the `crate::a::b`, `super::x` and grouped `use crate::{a, b::c}`
paths in a module's code to modules that are neither its ancestors nor its
descendants; a cycle is a strongly connected set of two or more modules.

What is left out, and only that: comments, string literals, and each item
under `#[cfg(test)]` (the item alone: the attribute's `mod`, `fn`, `impl` or
`use`, matched to its closing brace or semicolon, so code after a test
module is still read). A module declared under `#[cfg(test)]` (`mod tests;`)
is test code as a whole, its file included.

`module_cycles.py crates --edges CRATE [MODULE]` prints the edges instead
(of MODULE's children when given, e.g. `tfdata-dispatcher dispatcher`), to
keep ARCHITECTURE.md's arrows true."""
import os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rust_source import crate_modules, paths_in  # noqa: E402

root = sys.argv[1] if len(sys.argv) > 1 else 'crates'
show_edges = sys.argv[3:5] if len(sys.argv) > 3 and sys.argv[2] == '--edges' else None
found = 0
for crate in sorted(os.listdir(root)):
    if show_edges and crate != show_edges[0]:
        continue
    src = os.path.join(root, crate, 'src')
    if not os.path.isdir(src):
        continue
    mods = {m: code for m, (_, code) in crate_modules(src).items()}
    names = set(mods)

    def resolve(path):
        # longest prefix that is a module
        for n in range(len(path), 0, -1):
            if tuple(path[:n]) in names:
                return tuple(path[:n])
        return None

    edges = {m: set() for m in mods}
    for m, text in mods.items():
        for path in paths_in(text):
            parts = path.split('::')
            head, parts = parts[0], parts[1:]
            if head not in ('crate', 'super'):
                continue
            base = []
            if head == 'super':
                base = list(m[:-1])
                while parts and parts[0] == 'super':
                    base = base[:-1]
                    parts = parts[1:]
            target = resolve(base + parts)
            if target is None or target == m:
                continue
            if target == m[:len(target)] or m == target[:len(m)]:
                continue  # ancestor/descendant
            edges[m].add(target)
    if show_edges:
        parent = tuple(show_edges[1].split('::')) if len(show_edges) > 1 else ()
        for m in sorted(edges):
            if m[:len(parent)] == parent and len(m) == len(parent) + 1:
                print('::'.join(m), '->', ', '.join(sorted('::'.join(t) for t in edges[m])) or '-')
        continue
    # find cycles (simple: SCCs)
    index = {}; low = {}; stack = []; on = set(); sccs = []; i = [0]

    def strong(v):
        index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)
    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            strong(v)
    for comp in sccs:
        found += 1
        print(crate, 'import cycle:', ' <-> '.join('::'.join(c) or 'lib' for c in sorted(comp)))
sys.exit(1 if found else 0)
