#!/usr/bin/env python3
"""Fails if a non-test Rust source file passes LIMIT lines of code, or if
ARCHITECTURE.md's size line does not name the largest files with their
sizes (ARCHITECTURE.md, "Architecture invariants").

Lines: a file's lines, comments and blank lines included, minus each
`#[cfg(test)]` item (cut out as module_cycles.py cuts them, through
rust_source.py). Test files are left out: `tests/`, `benches/` and
`examples/` folders, and modules declared under `#[cfg(test)]`.

`--list N` prints the N largest files instead of checking."""
import os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rust_source import crate_modules  # noqa: E402

LIMIT = 800
LARGEST_NAMED = 3
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')


def sizes(crates_dir):
    """{path relative to crates_dir: lines} for every non-test file."""
    out = {}
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, 'src')
        if not os.path.isdir(src):
            continue
        for path, code in crate_modules(src).values():
            # Stripping keeps line breaks, so this is the file's lines
            # minus its test items.
            out[os.path.relpath(path, crates_dir)] = code.rstrip('\n').count('\n') + 1
    return out


def size_line_problems(largest, architecture):
    """What is wrong with ARCHITECTURE.md's size line, given the largest
    files as [(path, lines)]."""
    text = open(architecture).read()
    m = re.search(r'No non-test source file passes.*?(?:\n\s*\n|\n- )', text, re.S)
    if not m:
        return ['ARCHITECTURE.md has no "No non-test source file passes ..." line']
    named = {p: int(n.replace(',', '')) for p, n in
             re.findall(r'`([\w./-]+\.rs)`\s*\((\d[\d,]*)', m.group(0))}
    want = dict(largest)
    if named == want:
        return []
    return ['ARCHITECTURE.md\'s size line names ' +
            (', '.join(f'`{p}` ({n})' for p, n in named.items()) or 'no files') +
            '; the largest are ' + ', '.join(f'`{p}` ({n})' for p, n in largest)]


def main():
    crates_dir = os.path.join(ROOT, 'crates')
    by_size = sorted(sizes(crates_dir).items(), key=lambda kv: (-kv[1], kv[0]))
    if len(sys.argv) > 2 and sys.argv[1] == '--list':
        for path, lines in by_size[:int(sys.argv[2])]:
            print(f'{lines:6} {path}')
        return 0
    problems = [f'{path}: {lines} lines (the limit is {LIMIT}; split it by job)'
                for path, lines in by_size if lines > LIMIT]
    problems += size_line_problems(by_size[:LARGEST_NAMED], os.path.join(ROOT, 'ARCHITECTURE.md'))
    for p in problems:
        print(p)
    if not problems:
        print(f'{len(by_size)} source files, none over {LIMIT} lines; the largest: ' +
              ', '.join(f'{p} ({n})' for p, n in by_size[:LARGEST_NAMED]))
    return 1 if problems else 0


sys.exit(main())
