//! `tf.io.gfile.glob` pattern matching, shared by every file system so that
//! local paths and object keys match alike. Verified against TensorFlow 2.21
//! (POSIX `fnmatch` with `FNM_PATHNAME`):
//!
//! * `*` matches any run of characters within one path component, including
//!   a leading `.` (hidden files match); `**` is just `*`, not recursive;
//! * `?` matches one character; `[abc]`, `[a-z]`, `[!a]` and `[^a]` are
//!   classes (a `]` first in a class is literal); `\` escapes the next
//!   character;
//! * directories match like files;
//! * a pattern with no `/` before its first wildcard is searched in `.` and
//!   its matches are returned as `./name`, as TensorFlow does; otherwise the
//!   pattern's text before the wildcard component is kept verbatim (including
//!   a `file://` scheme);
//! * a directory that does not exist yields no matches, not an error.
//!
//! Unlike `tf.io.gfile.glob`, results are sorted bytewise, which is the order
//! `tf.io.matching_files` and `Dataset.list_files(shuffle=False)` give. The
//! `glob` crate is not used because its `**` is recursive and it has neither
//! `\` escapes nor `[^...]`.
//!
//! Walking directories is each file system's job ([`super::local`],
//! [`super::object_store`]); this module only matches names.

/// The characters that make a pattern component a wildcard.
const WILDCARDS: [char; 4] = ['*', '?', '[', '\\'];

/// Whether a pattern component needs matching rather than a lookup.
pub(crate) fn has_wildcard(component: &str) -> bool {
    component.contains(WILDCARDS)
}

/// The byte offset of the first wildcard character in `pattern`, if any.
pub(crate) fn first_wildcard(pattern: &str) -> Option<usize> {
    pattern.find(WILDCARDS)
}

/// POSIX `fnmatch` of one path component (no `/` on either side), without
/// `FNM_PERIOD`: `*`, `?`, `[...]` with `!`/`^` negation and ranges, and `\`
/// escapes. Object-store globbing uses it too, so both match alike.
pub(crate) fn fnmatch(pattern: &[char], name: &[char]) -> bool {
    // Iterative matching with single-star backtracking: on a mismatch, retry
    // from the most recent `*` consuming one more character. Linear in
    // practice, and no recursion depth to worry about.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some('?') => Some(1),
            Some('[') => match bracket_class(pattern, p + 1, name[n]) {
                Some((matched, end)) => matched.then_some(end - p),
                // No closing bracket: `[` is literal.
                None => (name[n] == '[').then_some(1),
            },
            Some('\\') => match pattern.get(p + 1) {
                Some(&c) => (name[n] == c).then_some(2),
                None => (name[n] == '\\').then_some(1),
            },
            Some(&c) => (name[n] == c).then_some(1),
            None => None,
        };
        match step {
            Some(len) => {
                p += len;
                n += 1;
            }
            None => match star {
                Some((star_p, star_n)) => {
                    star = Some((star_p, star_n + 1));
                    p = star_p + 1;
                    n = star_n + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// Matches `c` against the bracket class whose body starts at `start` (just
/// after `[`). Returns whether it matched and the index after the closing
/// `]`, or `None` if the class is not closed.
fn bracket_class(pattern: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start;
    let negated = matches!(pattern.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let mut lo = *pattern.get(i)?;
        if lo == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if lo == '\\' {
            i += 1;
            lo = *pattern.get(i)?;
        }
        i += 1;
        // A range `lo-hi`, unless the `-` is last before `]`.
        if pattern.get(i) == Some(&'-') && pattern.get(i + 1).is_some_and(|&h| h != ']') {
            let mut hi = pattern[i + 1];
            i += 2;
            if hi == '\\' {
                hi = *pattern.get(i)?;
                i += 1;
            }
            matched |= lo <= c && c <= hi;
        } else {
            matched |= lo == c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, name: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let n: Vec<char> = name.chars().collect();
        fnmatch(&p, &n)
    }

    #[test]
    fn fnmatch_follows_posix() {
        assert!(m("*", ""));
        assert!(m("*", ".hidden"));
        assert!(m("*.txt", "a.txt"));
        assert!(!m("*.txt", "a.txt.gz"));
        assert!(m("a*b*c", "aXXbYYc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("**.txt", "x.txt"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("[ab]1", "b1"));
        assert!(!m("[ab]1", "c1"));
        assert!(m("[!a]x", "bx"));
        assert!(!m("[!a]x", "ax"));
        assert!(m("[^a]x", "bx"));
        assert!(m("[a-c]", "b"));
        assert!(!m("[a-c]", "d"));
        assert!(m("[a-]", "-"));
        assert!(m("[]a]", "]"));
        assert!(m("[!]]", "a"));
        assert!(!m("[!]]", "]"));
        assert!(m("x\\*y", "x*y"));
        assert!(!m("x\\*y", "xay"));
        assert!(m("a[[]1]", "a[1]"));
        assert!(m("a[", "a["));
        assert!(!m("a[", "ab"));
        assert!(m("é?", "éü"));
    }
}
