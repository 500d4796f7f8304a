//! A file-system layer shaped like TensorFlow's `tensorflow::FileSystem` /
//! `tf.io.gfile`: every source op opens files through a [`FileSystem`] picked
//! by the URL's scheme, so object stores plug in without touching the
//! readers.
//!
//! Paths are strings, not [`std::path::Path`]s, because they are URLs
//! (`gs://bucket/x`) as often as local paths, they travel inside serialised
//! pipelines, and TensorFlow treats them as strings too. A plain path or a
//! `file://` URL is local; object-store schemes (`s3://`, `gs://`, `az://`,
//! ...) go to [`super::object_store`]; [`file_system`] dispatches.
//!
//! [`FileSystem::glob`] follows `tf.io.gfile.glob` (POSIX `fnmatch` with
//! `FNM_PATHNAME`), verified against TensorFlow 2.21:
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

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{Error, Result};

/// A place files can be read from: the local disk or an object store.
///
/// Every method takes the full path or URL as the user wrote it (scheme
/// included), so implementations can put it in error messages unchanged.
/// Errors name the path; a missing file is [`Error::NotFound`] with
/// `what: "file"`.
pub trait FileSystem: Send + Sync {
    /// Opens a file for sequential reading. Readers buffer on top of it, so
    /// implementations need not.
    fn open(&self, path: &str) -> Result<Box<dyn Read + Send>>;

    /// Reads a whole file. For small files only (metadata, images); record
    /// readers stream through [`FileSystem::open`] instead.
    fn read_all(&self, path: &str) -> Result<Bytes> {
        let mut out = Vec::new();
        self.open(path)?
            .read_to_end(&mut out)
            .map_err(|e| io_error("reading", path, e))?;
        Ok(out.into())
    }

    /// The paths matching `pattern`, sorted bytewise (see the module docs for
    /// the pattern syntax). No match is an empty list, not an error.
    fn glob(&self, pattern: &str) -> Result<Vec<String>>;

    /// Whether a file or directory exists at `path`.
    fn exists(&self, path: &str) -> Result<bool>;

    /// The size of a file in bytes, for sharding by size and progress
    /// reporting without reading the file.
    fn file_size(&self, path: &str) -> Result<u64>;

    /// Creates (or truncates) a file for writing. Needed to write TFRecord
    /// files (snapshots, tests, benchmarks) through the same layer.
    ///
    /// Call `flush()` when done and check its result: object stores upload
    /// the whole object then (and nothing if the writer is dropped
    /// unflushed), so the file may not exist before.
    fn create(&self, path: &str) -> Result<Box<dyn Write + Send>>;

    /// The names (not paths) of the files directly in the directory `dir`,
    /// sorted bytewise; subdirectories are left out. `dir` may end in `/`.
    /// A directory that does not exist lists as empty, since an object store
    /// cannot tell an empty prefix from a missing one (a missing bucket is
    /// still [`Error::NotFound`] with `what: "bucket"`).
    fn list(&self, dir: &str) -> Result<Vec<String>>;

    /// Deletes the file at `path`. Deleting a file that does not exist
    /// succeeds, as object stores' `DELETE` does (they cannot cheaply tell),
    /// so callers can retry deletions. A directory is not deleted (an
    /// error).
    fn delete(&self, path: &str) -> Result<()>;
}

/// The file system of the machine the process runs on; accepts plain paths
/// and `file://` URLs.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFileSystem;

/// The scheme of a URL (`gs` for `gs://bucket/x`), parsed like TensorFlow's
/// `io::ParseURI`: `[A-Za-z][A-Za-z0-9+.-]*` followed by `://`. A Windows
/// drive (`C:/x`) or a plain path has none.
pub fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'));
    valid.then_some(scheme)
}

/// The file system serving `url`.
///
/// Plain paths and `file://` URLs are local; `s3`, `s3a`, `gs`, `az`,
/// `azure`, `adl`, `abfs` and `abfss` URLs go to the process's
/// [`ObjectStoreFileSystem`](super::object_store::ObjectStoreFileSystem)
/// ([`super::object_store::global`], configured from the environment).
/// Other schemes are refused with [`Error::Unimplemented`] naming the
/// scheme, with TensorFlow's wording.
pub fn file_system(url: &str) -> Result<Arc<dyn FileSystem>> {
    match scheme(url) {
        None | Some("file") => Ok(Arc::new(LocalFileSystem)),
        Some(s) if super::object_store::is_object_store_scheme(s) => {
            Ok(super::object_store::global())
        }
        // Extension point: other file systems (hdfs, http, ...) get an arm
        // here returning their `FileSystem` implementation.
        Some(other) => Err(Error::Unimplemented(format!(
            "File system scheme '{other}' not implemented (file: '{url}'); \
             tfdata reads local paths, file:// URLs and the object stores {}",
            super::object_store::SCHEMES.join(", ")
        ))),
    }
}

/// Opens `path` on the file system its scheme names.
pub fn open(path: &str) -> Result<Box<dyn Read + Send>> {
    file_system(path)?.open(path)
}

/// Reads the whole file at `path` on the file system its scheme names.
pub fn read_all(path: &str) -> Result<Bytes> {
    file_system(path)?.read_all(path)
}

/// The paths matching `pattern`, sorted, on the file system its scheme names.
pub fn glob(pattern: &str) -> Result<Vec<String>> {
    file_system(pattern)?.glob(pattern)
}

/// Whether `path` exists on the file system its scheme names.
pub fn exists(path: &str) -> Result<bool> {
    file_system(path)?.exists(path)
}

/// The names of the files in `dir`, sorted, on the file system its scheme
/// names.
pub fn list(dir: &str) -> Result<Vec<String>> {
    file_system(dir)?.list(dir)
}

/// Deletes `path` (a missing file is not an error) on the file system its
/// scheme names.
pub fn delete(path: &str) -> Result<()> {
    file_system(path)?.delete(path)
}

/// Maps an I/O error on `path` to tfdata's error, keeping "not found" a
/// [`Error::NotFound`] so callers can tell it apart.
pub(crate) fn io_error(action: &str, path: &str, err: io::Error) -> Error {
    if err.kind() == io::ErrorKind::NotFound {
        Error::NotFound {
            what: "file",
            id: path.to_string(),
        }
    } else {
        Error::io(format!("{action} {path}"), err)
    }
}

impl LocalFileSystem {
    /// The local path of `url`: the URL without `file://`. Another scheme
    /// is a caller bug (it should have gone through [`file_system`]).
    fn local_path(url: &str) -> Result<&str> {
        match scheme(url) {
            None => Ok(url),
            Some("file") => Ok(&url["file://".len()..]),
            Some(other) => Err(Error::InvalidArgument(format!(
                "{url} is not a local path (scheme '{other}')"
            ))),
        }
    }
}

impl FileSystem for LocalFileSystem {
    fn open(&self, path: &str) -> Result<Box<dyn Read + Send>> {
        let local = Self::local_path(path)?;
        let file = fs::File::open(local).map_err(|e| io_error("opening", path, e))?;
        // Opening a directory succeeds on Unix and fails only at the first
        // read; say what is wrong up front instead.
        let meta = file
            .metadata()
            .map_err(|e| io_error("inspecting", path, e))?;
        if meta.is_dir() {
            return Err(Error::FailedPrecondition(format!(
                "{path} is a directory, not a file"
            )));
        }
        Ok(Box::new(file))
    }

    fn read_all(&self, path: &str) -> Result<Bytes> {
        let local = Self::local_path(path)?;
        if Path::new(local).is_dir() {
            return Err(Error::FailedPrecondition(format!(
                "{path} is a directory, not a file"
            )));
        }
        fs::read(local)
            .map(Bytes::from)
            .map_err(|e| io_error("reading", path, e))
    }

    fn glob(&self, pattern: &str) -> Result<Vec<String>> {
        let local = Self::local_path(pattern)?;
        let url_prefix = &pattern[..pattern.len() - local.len()];
        let mut out = local_glob(local)?
            .into_iter()
            .map(|p| format!("{url_prefix}{p}"))
            .collect::<Vec<_>>();
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn exists(&self, path: &str) -> Result<bool> {
        let local = Self::local_path(path)?;
        match fs::metadata(local) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("checking", path, e)),
        }
    }

    fn file_size(&self, path: &str) -> Result<u64> {
        let local = Self::local_path(path)?;
        let meta = fs::metadata(local).map_err(|e| io_error("inspecting", path, e))?;
        if meta.is_dir() {
            return Err(Error::FailedPrecondition(format!(
                "{path} is a directory, not a file"
            )));
        }
        Ok(meta.len())
    }

    fn create(&self, path: &str) -> Result<Box<dyn Write + Send>> {
        let local = Self::local_path(path)?;
        let file = fs::File::create(local).map_err(|e| io_error("creating", path, e))?;
        Ok(Box::new(file))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let local = Self::local_path(dir)?;
        let entries = match fs::read_dir(local) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return Err(Error::FailedPrecondition(format!(
                    "{dir} is a file, not a directory"
                )));
            }
            Err(e) => return Err(io_error("listing", dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error("listing", dir, e))?;
            // `fs::metadata` follows symlinks, so a link to a file is a file
            // (as `open` would see it).
            let is_dir = fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
            if is_dir {
                continue;
            }
            let name = entry.file_name().into_string().map_err(|name| {
                Error::InvalidArgument(format!(
                    "listing {dir}: {} is not a UTF-8 name",
                    name.to_string_lossy()
                ))
            })?;
            names.push(name);
        }
        names.sort();
        Ok(names)
    }

    fn delete(&self, path: &str) -> Result<()> {
        let local = Self::local_path(path)?;
        if Path::new(local).is_dir() {
            return Err(Error::FailedPrecondition(format!(
                "{path} is a directory, not a file"
            )));
        }
        match fs::remove_file(local) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("deleting", path, e)),
        }
    }
}

/// Whether a pattern component needs matching rather than a lookup.
pub(super) fn has_wildcard(component: &str) -> bool {
    component.contains(['*', '?', '[', '\\'])
}

/// Globs a local path (scheme already removed).
fn local_glob(pattern: &str) -> Result<Vec<String>> {
    // Split off the literal directory before the first wildcard component;
    // it is kept verbatim in the results, like TensorFlow does.
    let Some(first_wild) = pattern.find(['*', '?', '[', '\\']) else {
        // No wildcard: the path itself, if it exists (following symlinks,
        // like TensorFlow's `FileExists`).
        return match fs::metadata(pattern) {
            Ok(_) => Ok(vec![pattern.to_string()]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(Vec::new())
            }
            Err(e) => Err(io_error("globbing", pattern, e)),
        };
    };
    let (prefix, rest) = match pattern[..first_wild].rfind('/') {
        Some(slash) => (&pattern[..=slash], &pattern[slash + 1..]),
        // TensorFlow searches "." and returns "./name".
        None => ("./", pattern),
    };
    // Repeated and trailing slashes in the wildcard part match nothing extra
    // (TensorFlow returns `d/*/`'s matches without the slash).
    let components: Vec<&str> = rest.split('/').filter(|c| !c.is_empty()).collect();
    let mut matches = Vec::new();
    glob_components(prefix, &components, pattern, &mut matches)?;
    Ok(matches)
}

/// Extends `dir` (ending in `/`) by each of `components` in turn, pushing the
/// full paths that exist onto `out`.
fn glob_components(
    dir: &str,
    components: &[&str],
    pattern: &str,
    out: &mut Vec<String>,
) -> Result<()> {
    let Some((component, more)) = components.split_first() else {
        return Ok(());
    };
    let push = |path: String, out: &mut Vec<String>| -> Result<()> {
        if more.is_empty() {
            out.push(path);
            Ok(())
        } else {
            glob_components(&format!("{path}/"), more, pattern, out)
        }
    };
    if !has_wildcard(component) {
        let path = format!("{dir}{component}");
        return match fs::metadata(&path) {
            Ok(_) => push(path, out),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(io_error("globbing", &path, e)),
        };
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        // A missing directory, or a file where the pattern needs a directory,
        // simply matches nothing.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(());
        }
        Err(e) => return Err(io_error(&format!("globbing {pattern}: listing"), dir, e)),
    };
    let pattern_chars: Vec<char> = component.chars().collect();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(&format!("globbing {pattern}: listing"), dir, e))?;
        let name = entry.file_name();
        let lossy = name.to_string_lossy();
        let name_chars: Vec<char> = lossy.chars().collect();
        if !fnmatch(&pattern_chars, &name_chars) {
            continue;
        }
        let Some(name) = name.to_str() else {
            return Err(Error::InvalidArgument(format!(
                "globbing {pattern}: {dir}{lossy} matches but its name is not UTF-8"
            )));
        };
        push(format!("{dir}{name}"), out)?;
    }
    Ok(())
}

/// POSIX `fnmatch` of one path component (no `/` on either side), without
/// `FNM_PERIOD`: `*`, `?`, `[...]` with `!`/`^` negation and ranges, and `\`
/// escapes. Object-store globbing uses it too, so both match alike.
pub(super) fn fnmatch(pattern: &[char], name: &[char]) -> bool {
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
            Some('[') => match class(pattern, p + 1, name[n]) {
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
fn class(pattern: &[char], start: usize, c: char) -> Option<(bool, usize)> {
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

    #[test]
    fn scheme_parsing() {
        assert_eq!(scheme("gs://bucket/x"), Some("gs"));
        assert_eq!(scheme("file:///tmp/x"), Some("file"));
        assert_eq!(scheme("s3a+x.y-z://b"), Some("s3a+x.y-z"));
        assert_eq!(scheme("/tmp/x"), None);
        assert_eq!(scheme("C:/x"), None);
        assert_eq!(scheme("dir/a://b"), None);
        assert_eq!(scheme("://b"), None);
    }

    #[test]
    fn unknown_schemes_are_unimplemented() {
        for url in ["hdfs://n/p", "http://host/x", "ram://x"] {
            let err = file_system(url).err().expect("unimplemented");
            assert!(matches!(err, Error::Unimplemented(_)), "{err}");
            let scheme = scheme(url).unwrap();
            assert!(err.to_string().contains(&format!("'{scheme}'")), "{err}");
            assert!(err.to_string().contains(url), "{err}");
        }
        // Object stores dispatch (building a client waits for first use).
        for url in ["gs://bucket/x", "s3://b/k", "az://c/b"] {
            assert!(file_system(url).is_ok(), "{url}");
        }
        assert!(matches!(
            LocalFileSystem.open("gs://bucket/x"),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn local_operations_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let file = format!("{root}/f.bin");
        let url = format!("file://{file}");
        let fs = LocalFileSystem;

        let mut w = fs.create(&url).unwrap();
        w.write_all(b"hello").unwrap();
        drop(w);
        assert!(fs.exists(&file).unwrap());
        assert!(exists(&url).unwrap());
        assert_eq!(&read_all(&url).unwrap()[..], b"hello");
        assert_eq!(fs.file_size(&file).unwrap(), 5);
        let mut s = String::new();
        open(&file).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello");

        let missing = format!("{root}/missing");
        assert!(!fs.exists(&missing).unwrap());
        for err in [
            fs.open(&missing).err().unwrap(),
            fs.read_all(&missing).unwrap_err(),
            fs.file_size(&missing).unwrap_err(),
        ] {
            assert!(matches!(err, Error::NotFound { what: "file", .. }), "{err}");
            assert!(err.to_string().contains(&missing), "{err}");
        }
        let err = fs.open(root).err().unwrap();
        assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
        assert!(err.to_string().contains(root), "{err}");
        let err = fs.read_all(root).unwrap_err();
        assert!(err.to_string().contains(root), "{err}");
    }

    #[test]
    fn local_list_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        for f in ["b", "a", "c.txt", "sub/x"] {
            let path = dir.path().join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, b"x").unwrap();
        }
        let fs = LocalFileSystem;
        // Files only, sorted; a trailing slash and file:// are fine.
        assert_eq!(fs.list(root).unwrap(), ["a", "b", "c.txt"]);
        assert_eq!(
            list(&format!("file://{root}/")).unwrap(),
            ["a", "b", "c.txt"]
        );
        assert_eq!(fs.list(&format!("{root}/sub")).unwrap(), ["x"]);
        assert!(fs.list(&format!("{root}/missing")).unwrap().is_empty());
        let err = fs.list(&format!("{root}/a")).unwrap_err();
        assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");

        fs.delete(&format!("{root}/a")).unwrap();
        delete(&format!("file://{root}/b")).unwrap();
        // Deleting again (or something never there) succeeds.
        fs.delete(&format!("{root}/a")).unwrap();
        assert_eq!(fs.list(root).unwrap(), ["c.txt"]);
        let err = fs.delete(&format!("{root}/sub")).unwrap_err();
        assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
        assert!(err.to_string().contains("sub"), "{err}");
        assert!(matches!(
            fs.delete("s3://bucket/x"),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn glob_walks_wildcard_directories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        for f in ["a/x.txt", "a/y.dat", "b/x.txt", "c/deep/x.txt", "top.txt"] {
            let path = dir.path().join(f);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, b"x").unwrap();
        }
        let fs = LocalFileSystem;
        assert_eq!(
            fs.glob(&format!("{root}/*/x.txt")).unwrap(),
            [format!("{root}/a/x.txt"), format!("{root}/b/x.txt")]
        );
        // `**` is not recursive, as in TensorFlow.
        assert_eq!(
            fs.glob(&format!("{root}/**/x.txt")).unwrap(),
            [format!("{root}/a/x.txt"), format!("{root}/b/x.txt")]
        );
        assert_eq!(
            fs.glob(&format!("{root}/*/*/x.txt")).unwrap(),
            [format!("{root}/c/deep/x.txt")]
        );
        // A file where a directory is needed, and a missing directory.
        assert!(fs.glob(&format!("{root}/top.txt/*")).unwrap().is_empty());
        assert!(fs.glob(&format!("{root}/nope/*")).unwrap().is_empty());
        // No wildcard: the path if it exists, verbatim.
        assert_eq!(
            fs.glob(&format!("{root}//top.txt")).unwrap(),
            [format!("{root}//top.txt")]
        );
        assert!(fs.glob(&format!("{root}/nope.txt")).unwrap().is_empty());
        // Trailing slash after a wildcard component is dropped.
        assert_eq!(
            fs.glob(&format!("{root}/a/*/")).unwrap(),
            [format!("{root}/a/x.txt"), format!("{root}/a/y.dat")]
        );
        // `file://` is kept in the results.
        assert_eq!(
            glob(&format!("file://{root}/t*")).unwrap(),
            [format!("file://{root}/top.txt")]
        );
    }
}
