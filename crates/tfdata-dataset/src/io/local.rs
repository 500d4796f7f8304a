//! [`LocalFileSystem`]: the disk of the machine the process runs on, for
//! plain paths and `file://` URLs, with `tf.io.gfile` semantics (see
//! [`super::pattern`] for the pattern syntax).

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::fs::{FileStat, FileSystem, io_error, join_path, scheme, too_many_files};
use super::pattern::{first_wildcard, fnmatch, has_wildcard};

/// The file system of the machine the process runs on; accepts plain paths
/// and `file://` URLs.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFileSystem;

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

    fn read_range(&self, path: &str, start: u64, len: u64) -> Result<Bytes> {
        use std::io::{Seek, SeekFrom};
        let local = Self::local_path(path)?;
        let mut file = fs::File::open(local).map_err(|e| io_error("opening", path, e))?;
        let size = file
            .metadata()
            .map_err(|e| io_error("inspecting", path, e))?
            .len();
        let len = len.min(size.saturating_sub(start));
        let mut out = vec![0u8; usize::try_from(len).map_err(|_| too_large(path, len))?];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut out))
            .map_err(|e| io_error("reading", path, e))?;
        Ok(out.into())
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
        entry_names(dir, false)
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

    fn create_dir_all(&self, dir: &str) -> Result<()> {
        let local = Self::local_path(dir)?;
        fs::create_dir_all(local).map_err(|e| io_error("creating the directory", dir, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (Self::local_path(from)?, Self::local_path(to)?);
        fs::rename(src, dst).map_err(|e| io_error(&format!("renaming it to {to}:"), from, e))
    }

    fn stat(&self, path: &str) -> Result<FileStat> {
        let local = Self::local_path(path)?;
        let meta = fs::metadata(local).map_err(|e| io_error("inspecting", path, e))?;
        Ok(file_stat(&meta))
    }

    fn walk(&self, dir: &str, max_files: usize) -> Result<Vec<(String, FileStat)>> {
        let mut out = Vec::new();
        // Depth-first with an explicit stack and a depth bound: symlinked
        // directories are followed (as `open` follows links), and a link
        // cycle ends at the bound instead of looping.
        let mut stack = vec![(dir.to_string(), 0usize)];
        while let Some((current, depth)) = stack.pop() {
            if depth > MAX_WALK_DEPTH {
                return Err(Error::FailedPrecondition(format!(
                    "walking {dir}: deeper than {MAX_WALK_DEPTH} directories (a symlink cycle?)"
                )));
            }
            let entries = match fs::read_dir(Self::local_path(&current)?) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("listing", &current, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_error("listing", &current, e))?;
                let name = entry.file_name().into_string().map_err(|name| {
                    Error::InvalidArgument(format!(
                        "walking {dir}: {} is not a UTF-8 name",
                        name.to_string_lossy()
                    ))
                })?;
                let path = join_path(&current, &name);
                // A link whose target vanished is skipped, as a file
                // deleted during the walk would be.
                let Ok(meta) = fs::metadata(entry.path()) else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push((path, depth + 1));
                } else {
                    if out.len() >= max_files {
                        return Err(too_many_files(dir, max_files));
                    }
                    out.push((path, file_stat(&meta)));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        entry_names(dir, true)
    }

    fn delete_dir_all(&self, dir: &str, _max_files: usize) -> Result<()> {
        let local = Self::local_path(dir)?;
        match fs::remove_dir_all(local) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_error("deleting the directory", dir, e)),
        }
    }
}

/// How deep [`LocalFileSystem::walk`] descends: far beyond any dataset's
/// layout, and a stop for symlink cycles.
const MAX_WALK_DEPTH: usize = 64;

fn file_stat(meta: &fs::Metadata) -> FileStat {
    if meta.is_dir() {
        return FileStat {
            size: 0,
            modified_ns: 0,
            is_dir: true,
        };
    }
    // A time before the epoch or past u64 nanoseconds (year 2554) cannot
    // be had from a real file; 0 then leaves the size to tell a change.
    let modified_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or(0);
    FileStat {
        size: meta.len(),
        modified_ns,
        is_dir: false,
    }
}

/// Globs a local path (scheme already removed).
fn local_glob(pattern: &str) -> Result<Vec<String>> {
    // Split off the literal directory before the first wildcard component;
    // it is kept verbatim in the results, like TensorFlow does.
    let Some(first_wild) = first_wildcard(pattern) else {
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

fn too_large(path: &str, len: u64) -> Error {
    Error::InvalidArgument(format!(
        "{path}: a read of {len} bytes does not fit in memory"
    ))
}

/// The sorted names in `dir` of its directories (`dirs`) or of everything
/// else. `fs::metadata` follows symlinks, so a link to a file is a file (as
/// `open` would see it). A missing directory has no entries.
fn entry_names(dir: &str, dirs: bool) -> Result<Vec<String>> {
    let local = LocalFileSystem::local_path(dir)?;
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
        if fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) != dirs {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::registry::{delete, exists, glob, list, open, read_all};

    #[test]
    fn directories_and_renames() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_str().unwrap();
        let fs = LocalFileSystem;
        let nested = format!("file://{root}/a/b/c");
        fs.create_dir_all(&nested).unwrap();
        fs.create_dir_all(&nested).unwrap();
        let tmp = format!("{nested}/x.tmp");
        fs.create(&tmp).unwrap().write_all(b"data").unwrap();
        let done = format!("{root}/a/x");
        fs.rename(&tmp, &done).unwrap();
        assert_eq!(&fs.read_all(&done).unwrap()[..], b"data");
        assert!(!fs.exists(&tmp).unwrap());
        let err = fs.rename(&tmp, &done).unwrap_err();
        assert!(err.to_string().contains("x.tmp"), "{err}");
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
