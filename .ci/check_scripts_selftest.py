#!/usr/bin/env python3
"""Checks the checks: module_cycles.py and file_sizes.py's reading
(rust_source.py) on a small made-up crate, so a change that makes them
blind (as the old "stop at the first #[cfg(test)]" was) fails CI."""
import os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from rust_source import crate_modules  # noqa: E402


def crate(files):
    root = tempfile.mkdtemp()
    for path, text in files.items():
        full = os.path.join(root, 'c', 'src', path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, 'w') as f:
            f.write(text)
    return root


def cycles(root):
    run = subprocess.run([sys.executable, os.path.join(HERE, 'module_cycles.py'), root],
                         capture_output=True, text=True)
    return run.returncode, run.stdout


A_TEST_FIRST = '''#[cfg(test)]
mod tests {
    use crate::b::X; // test code: not an edge
    fn f() { let s = "{"; }
}
'''
B = '''#[cfg(test)]
#[path = "b_tests.rs"]
mod tests;
const S: &str = r#"} { crate::a::Q"#;
pub fn g() -> char { '{' }
pub use super::a::Z;
'''
base = {'lib.rs': 'mod a;\nmod b;\n', 'b/mod.rs': B, 'b/b_tests.rs': 'use crate::a::W;\n' + 'x\n' * 900}

# A grouped `use` after a test module is read: a <-> b.
code, out = cycles(crate({**base, 'a/mod.rs': A_TEST_FIRST + 'use crate::{b::Y, c};\n'}))
assert code == 1 and 'a <-> b' in out, out
# Test code, strings and chars are not edges: no cycle.
code, out = cycles(crate({**base, 'a/mod.rs': A_TEST_FIRST}))
assert code == 0, out
# The test file behind #[path] is test code; the lines of test items do not count.
mods = crate_modules(os.path.join(crate({**base, 'a/mod.rs': A_TEST_FIRST}), 'c', 'src'))
assert ('b', 'b_tests') not in mods and ('b',) in mods, sorted(mods)
assert mods[('a',)][1].count('\n') <= 2, mods[('a',)]
print('check scripts: self-test passed')
