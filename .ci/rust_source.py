"""Reading Rust source for the CI checks: comments and string literals
blanked (their line breaks kept), `#[cfg(test)]` items cut out one by one, `use` groups expanded.
Shared by module_cycles.py and file_sizes.py, so both see the same code."""
import os
import re

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
            start = i
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif text.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append('\n' * text.count('\n', start, i) or ' ')
        elif (m := re.match(r'b?r(#*)"', text[i:i + 300])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            end = n if j < 0 else j + len(close)
            out.append('""' + '\n' * text.count('\n', i, end))
            i = end
        elif c == '"' or (c == 'b' and text.startswith('b"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_'))):
            start = i
            i += 2 if c == 'b' else 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == '\\' else 1
            i += 1
            if re.search(r'#\[\s*path\s*=\s*$', ''.join(out[-40:])):
                out.append(text[start:i])  # a module's file: kept for the callers
            else:
                out.append('""' + '\n' * text.count('\n', start, i))
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
    """The code minus each `#[cfg(test)]` item, and the child modules those
    items declare: a name (`#[cfg(test)] mod tests;`), or ('path', FILE)
    for one with `#[path = FILE]`."""
    test_children = set()
    while (m := CFG_TEST.search(code)):
        start = m.end()
        # Further attributes of the same item.
        while (a := re.match(r'\s*#\[', code[start:])):
            start = _attribute_end(code, start + a.end() - 2)
        end = item_end(code, start)
        item = code[start:end]
        if (d := re.match(r'\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', item)):
            attrs = code[m.end():start]
            path = re.search(r'#\[\s*path\s*=\s*"([^"]*)"', attrs)
            test_children.add(('path', path.group(1)) if path else d.group(1))
        code = code[:m.start()] + ' ' + code[end:]  # its lines go too
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


def test_module_names(rel, file_path, src, test_children):
    """The module paths (tuples under `src`) of the test-only children a
    file declares; `rel` is the file's own module path."""
    out = set()
    for child in test_children:
        if isinstance(child, tuple):
            target = os.path.normpath(os.path.join(os.path.dirname(file_path), child[1]))
            mod = os.path.relpath(target, src)[:-3].split(os.sep)
            if mod[-1] == 'mod':
                mod = mod[:-1]
            out.add(tuple(mod))
        else:
            out.add(tuple(rel) + (child,))
    return out


def crate_modules(src):
    """{module path tuple: (file path, code)} for every non-test module of
    the crate whose `src` folder is `src`: the code as read above (comments
    and strings blanked, test items cut), test-only modules and everything
    below them left out."""
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
            test_modules.update(test_module_names(rel, p, src, test_children))
            mods[tuple(rel)] = (p, code)
    return {m: v for m, v in mods.items()
            if not any(m[:len(t)] == t for t in test_modules)}
