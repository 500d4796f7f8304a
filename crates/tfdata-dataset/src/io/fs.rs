//! The [`FileSystem`] trait every reader opens files through, shaped like
//! TensorFlow's `tensorflow::FileSystem` / `tf.io.gfile`, so object stores
//! plug in without touching the readers; and [`scheme`], which picks one
//! (see [`super::registry`]).
//!
//! Paths are strings, not [`std::path::Path`]s, because they are URLs
//! (`gs://bucket/x`) as often as local paths, they travel inside serialised
//! pipelines, and TensorFlow treats them as strings too. A plain path or a
//! `file://` URL is local ([`super::local`]); object-store schemes (`s3://`,
//! `gs://`, `az://`, ...) go to [`super::object_store`].

use std::io::{self, Read, Write};

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

    /// `len` bytes of the file from byte `start` (fewer only at the end of
    /// the file): what columnar formats read (a Parquet footer, one column
    /// chunk) instead of streaming the whole file. The default streams up to
    /// `start` and reads on; file systems that can seek override it.
    fn read_range(&self, path: &str, start: u64, len: u64) -> Result<Bytes> {
        let mut reader = self.open(path)?;
        io::copy(&mut (&mut reader).take(start), &mut io::sink())
            .map_err(|e| io_error("reading", path, e))?;
        let mut out = Vec::new();
        reader
            .take(len)
            .read_to_end(&mut out)
            .map_err(|e| io_error("reading", path, e))?;
        Ok(out.into())
    }

    /// The paths matching `pattern`, sorted bytewise (see [`super::pattern`]
    /// for the pattern syntax). No match is an empty list, not an error.
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

    /// Writes `data` as the file `path` only if no file `path` exists, in
    /// one atomic step ([`Error::AlreadyExists`] otherwise): an object
    /// store's conditional `PUT` (`If-None-Match: *`). For writers that
    /// several processes may race on, such as the journal segments of
    /// dispatchers sharing a work_dir. File systems that cannot do it
    /// return [`Error::Unimplemented`] (the default).
    fn create_new(&self, path: &str, data: Bytes) -> Result<()> {
        let _ = data;
        Err(Error::Unimplemented(format!(
            "creating {path} only if it does not exist is not supported by this file system"
        )))
    }

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

    /// Makes `dir` and its parents exist, so [`FileSystem::create`] can
    /// write under it. Object stores have no directories: nothing to do.
    fn create_dir_all(&self, dir: &str) -> Result<()> {
        let _ = dir;
        Ok(())
    }

    /// Moves the file `from` to `to`, replacing `to`: what commits a file
    /// written under a temporary name. Atomic on a local disk. Object stores
    /// have no rename: the object is copied on the server, which makes `to`
    /// appear whole at once, and `from` is deleted afterwards, so a crash in
    /// between leaves both (callers that commit this way reconcile on restart).
    fn rename(&self, from: &str, to: &str) -> Result<()>;

    /// What `path` is: a file's size and modification time, or a
    /// directory (an object store's prefix with something under it).
    /// Missing: [`Error::NotFound`]. For fingerprints of a dataset's files
    /// (autocache), which must change when a file does. File systems that
    /// cannot tell return [`Error::Unimplemented`] (the default).
    fn stat(&self, path: &str) -> Result<FileStat> {
        Err(Error::Unimplemented(format!(
            "inspecting {path}: this file system cannot report modification times"
        )))
    }

    /// Every file under the directory `dir`, at any depth, with its
    /// [`FileStat`], sorted by path; paths are `dir` joined with the
    /// names below it. More than `max_files` files is an error
    /// ([`Error::FailedPrecondition`] naming the limit), checked as the walk
    /// goes, so a huge tree is not listed whole. A missing directory walks
    /// as empty (object stores cannot tell).
    fn walk(&self, dir: &str, max_files: usize) -> Result<Vec<(String, FileStat)>> {
        let _ = max_files;
        Err(Error::Unimplemented(format!(
            "walking {dir}: this file system cannot list directories recursively"
        )))
    }

    /// The names (not paths) of the directories directly in `dir`, sorted
    /// bytewise: what [`FileSystem::list`] leaves out. Missing: empty.
    fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        Err(Error::Unimplemented(format!(
            "listing the directories of {dir}: not supported by this file system"
        )))
    }

    /// Deletes the directory `dir` and everything under it; a missing one
    /// is no error (as [`FileSystem::delete`]). The default deletes what
    /// [`FileSystem::walk`] finds, file by file (an object store's
    /// "directory" is nothing more), at most `max_files` of them.
    fn delete_dir_all(&self, dir: &str, max_files: usize) -> Result<()> {
        for (path, _) in self.walk(dir, max_files)? {
            self.delete(&path)?;
        }
        Ok(())
    }
}

/// A file's size and modification time, or a directory, as
/// [`FileSystem::stat`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStat {
    /// Bytes; 0 for a directory.
    pub size: u64,
    /// Nanoseconds since the Unix epoch (0 for a directory, and where the
    /// file system has no time: then size alone tells a change).
    pub modified_ns: u64,
    pub is_dir: bool,
}

/// The error for a walk that found more than `max_files` files.
pub(crate) fn too_many_files(dir: &str, max_files: usize) -> Error {
    Error::FailedPrecondition(format!(
        "{dir} holds more than {max_files} files (the limit of this walk)"
    ))
}

/// `base` and `name` joined with one `/` (URLs and local paths alike).
pub(crate) fn join_path(base: &str, name: &str) -> String {
    if base.is_empty() || base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
