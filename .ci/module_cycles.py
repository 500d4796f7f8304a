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
is test code as a whole, its file included."""
import os, re, sys

CFG_TEST = re.compile(r'#\[cfg\((?:test|all\(test\b[^\]]*\))\)\]')


def strip_comments_and_strings(text):
    """The code with comments blanked and string/char literals emptied, so
    braces and paths inside them are not read as code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif text.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(' ')
        elif (m := re.match(r'b?r(#*)"', text[i:i + 300])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            i = n if j < 0 else j + len(close)
            out.append('""')
        elif c == '"' or (c == 'b' and text.startswith('b"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_'))):
            i += 2 if c == 'b' else 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == '\\' else 1
            i += 1
            out.append('""')
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}', '{') or a lifetime ('a).
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def item_end(code, start):
    """The end of the item beginning at `start` (after its attributes): its
    first `;` at depth 0, or its brace block's closing brace."""
    depth, i, n = 0, start, len(code)
    while i < n:
        c = code[i]
        if c in '([':
            depth += 1
        elif c in ')]':
            depth -= 1
        elif c == ';' and depth == 0:
            return i + 1
        elif c == '{':
            braces = 1
            i += 1
            while i < n and braces:
                if code[i] == '{':
                    braces += 1
                elif code[i] == '}':
                    braces -= 1
                i += 1
            return i
        i += 1
    return n


def without_test_items(code):
    """The code minus each `#[cfg(test)]` item, and the names of the child
    modules those items declare (`#[cfg(test)] mod tests;`)."""
    test_children = set()
    while (m := CFG_TEST.search(code)):
        start = m.end()
        # Further attributes of the same item.
        while (a := re.match(r'\s*#\[', code[start:])):
            start = _attribute_end(code, start + a.end() - 2)
        end = item_end(code, start)
        item = code[start:end]
        if (d := re.match(r'\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', item)):
            test_children.add(d.group(1))
        code = code[:m.start()] + ' ' + code[end:]
    return code, test_children


def _attribute_end(code, hash_at):
    """The index after an attribute `#[...]` starting at `hash_at`."""
    i = code.index('[', hash_at)
    depth = 0
    while i < len(code):
        if code[i] == '[':
            depth += 1
        elif code[i] == ']':
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(code)


def expand_use(body):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    body = body.strip()
    brace = body.find('{')
    if brace < 0:
        return [re.split(r'\s+as\s+', body)[0].strip()]
    prefix = body[:brace]
    inner = body[brace + 1:body.rindex('}')]
    parts, depth, cur = [], 0, ''
    for c in inner:
        if c == ',' and depth == 0:
            parts.append(cur)
            cur = ''
            continue
        depth += (c == '{') - (c == '}')
        cur += c
    parts.append(cur)
    out = []
    for p in parts:
        if p.strip():
            for q in expand_use(p):
                out.append(prefix + q if q != 'self' else prefix.rstrip(':'))
    return out


def paths_in(code):
    """Every `crate::...`/`super::...` path the code names, `use` groups
    expanded."""
    found = []
    for u in re.finditer(r'\buse\s+([^;]*);', code):
        found.extend(expand_use(u.group(1)))
    code = re.sub(r'\buse\s+[^;]*;', ' ', code)
    found.extend(m.group(0) for m in re.finditer(r'\b(?:crate|super)(?:\s*::\s*\w+)+', code))
    return [re.sub(r'\s+', '', p) for p in found]


root = sys.argv[1] if len(sys.argv) > 1 else 'crates'
found = 0
for crate in sorted(os.listdir(root)):
    src = os.path.join(root, crate, 'src')
    if not os.path.isdir(src):
        continue
    mods, test_modules = {}, set()
    for dp, _, fs in os.walk(src):
        for f in fs:
            if not f.endswith('.rs'):
                continue
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, src)[:-3].split(os.sep)
            if rel[-1] in ('mod', 'lib', 'main'):
                rel = rel[:-1]
            code, test_children = without_test_items(strip_comments_and_strings(open(p).read()))
            test_modules.update(tuple(rel) + (c,) for c in test_children)
            mods[tuple(rel)] = code
    # Test-only modules and everything below them are left out.
    mods = {m: c for m, c in mods.items()
            if not any(m[:len(t)] == t for t in test_modules)}
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
