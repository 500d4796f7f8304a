//! Where the dispatcher keeps its files (`work_dir`): a local directory or
//! an object-store prefix.
//!
//! * A plain path or a `file://` URL is [`WorkDir::Local`]: the journal
//!   appends to files and fsyncs them, and datasets are written to a
//!   temporary file and renamed, exactly TensorFlow's layout.
//! * `s3://`, `gs://`, `az://` (and the other schemes of
//!   [`tfdata_dataset::io::object_store::SCHEMES`]) are
//!   [`WorkDir::ObjectStore`]: files are immutable objects written with one
//!   `PUT` each, through the io layer's [`FileSystem`]. Object stores cannot
//!   append, so the journal is written as one object per update (see
//!   [`crate::persistence::journal`]).
//!
//! The object store's client comes from the io layer
//! ([`tfdata_dataset::io::file_system`], configured from the environment or
//! by [`tfdata_dataset::io::object_store::set_global`]), the same one workers
//! use to read `TaskDef.path`; [`WorkDir::object_store`] takes an explicit
//! one instead (tests, embedders).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tfdata_core::{Error, Result};
use tfdata_dataset::io::FileSystem;
use tfdata_dataset::io::fs::scheme;
use tfdata_dataset::io::object_store::{SCHEMES, is_object_store_scheme};

/// A dispatcher's `work_dir`.
#[derive(Clone)]
pub enum WorkDir {
    /// A directory on this machine.
    Local(PathBuf),
    /// A prefix in an object store.
    ObjectStore(ObjectDir),
}

/// A "directory" in an object store: a URL prefix (no trailing `/`) and the
/// file system serving it.
#[derive(Clone)]
pub struct ObjectDir {
    url: String,
    fs: Arc<dyn FileSystem>,
}

impl std::fmt::Debug for WorkDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorkDir({})", self.display())
    }
}

impl ObjectDir {
    /// The prefix's URL, without a trailing `/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of `name` in this directory.
    pub fn join(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    /// The subdirectory `name`.
    pub fn subdir(&self, name: &str) -> ObjectDir {
        ObjectDir {
            url: self.join(name),
            fs: Arc::clone(&self.fs),
        }
    }

    pub fn fs(&self) -> &dyn FileSystem {
        self.fs.as_ref()
    }
}

/// What kind of location a `work_dir` string names.
enum Kind<'a> {
    Local(&'a str),
    ObjectStore,
}

/// Classifies `work_dir`, refusing what cannot work: empty, an unknown
/// scheme, or an object-store URL without a bucket.
fn classify(work_dir: &str) -> Result<Kind<'_>> {
    let invalid = |reason: String| Error::InvalidConfig {
        field: "work_dir",
        reason,
    };
    if work_dir.is_empty() {
        return Err(invalid(
            "is empty; leave it unset for no work_dir".to_string(),
        ));
    }
    match scheme(work_dir) {
        None => Ok(Kind::Local(work_dir)),
        Some("file") => {
            let path = &work_dir["file://".len()..];
            if path.is_empty() {
                return Err(invalid(format!("{work_dir:?} names no directory")));
            }
            Ok(Kind::Local(path))
        }
        Some(s) if is_object_store_scheme(s) => {
            let rest = &work_dir[s.len() + "://".len()..];
            let bucket = rest.split('/').next().unwrap_or_default();
            if bucket.is_empty() {
                return Err(invalid(format!(
                    "{work_dir:?} names no bucket: expected {s}://bucket/prefix"
                )));
            }
            Ok(Kind::ObjectStore)
        }
        Some(other) => Err(invalid(format!(
            "{work_dir:?}: unknown scheme '{other}'; a work_dir is a local path, \
             a file:// URL or an object-store URL ({})",
            SCHEMES
                .iter()
                .map(|s| format!("{s}://"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Checks a `work_dir` string without touching storage (config validation).
pub fn validate(work_dir: &str) -> Result<()> {
    classify(work_dir).map(|_| ())
}

/// The local directory a `work_dir` names, or `None` for an object store (or
/// an invalid value).
pub fn local_path(work_dir: &str) -> Option<PathBuf> {
    match classify(work_dir) {
        Ok(Kind::Local(path)) => Some(PathBuf::from(path)),
        _ => None,
    }
}

impl WorkDir {
    /// The work_dir a config names. Object stores use the io layer's
    /// process-wide client for the URL's scheme; nothing is contacted yet.
    pub fn parse(work_dir: &str) -> Result<Self> {
        match classify(work_dir)? {
            Kind::Local(path) => Ok(WorkDir::Local(PathBuf::from(path))),
            Kind::ObjectStore => {
                let fs = tfdata_dataset::io::file_system(work_dir)?;
                Self::object_store(work_dir, fs)
            }
        }
    }

    /// An object-store work_dir served by `fs` rather than the process-wide
    /// client.
    pub fn object_store(url: &str, fs: Arc<dyn FileSystem>) -> Result<Self> {
        match classify(url)? {
            Kind::ObjectStore => Ok(WorkDir::ObjectStore(ObjectDir {
                // Keys cannot have empty segments, so `s3://b/p/` and
                // `s3://b/p` are the same prefix.
                url: url.trim_end_matches('/').to_string(),
                fs,
            })),
            Kind::Local(_) => Err(Error::InvalidConfig {
                field: "work_dir",
                reason: format!("{url:?} is a local path, not an object-store URL"),
            }),
        }
    }

    /// The path or URL, for messages.
    pub fn display(&self) -> String {
        match self {
            WorkDir::Local(path) => path.display().to_string(),
            WorkDir::ObjectStore(dir) => dir.url.clone(),
        }
    }
}

/// Uploads `data` as the object `url` with one `PUT`, returning once the
/// store has acknowledged it.
pub(crate) fn put_object(fs: &dyn FileSystem, url: &str, data: &[u8]) -> Result<()> {
    let mut writer = fs.create(url)?;
    writer
        .write_all(data)
        .and_then(|()| writer.flush())
        .map_err(|e| from_io(&format!("writing {url}"), e))
}

/// An `io::Error` from the io layer back as the tfdata error it carries (so
/// "unavailable" stays retryable), else wrapped with `context`.
fn from_io(context: &str, err: std::io::Error) -> Error {
    if err.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        match err.into_inner().map(|inner| inner.downcast::<Error>()) {
            Some(Ok(inner)) => return *inner,
            // Unreachable after the check above; keep the text regardless.
            Some(Err(other)) => return Error::Internal(format!("{context}: {other}")),
            None => return Error::Internal(context.to_string()),
        }
    }
    Error::io(context, err)
}

impl From<&Path> for WorkDir {
    fn from(path: &Path) -> Self {
        WorkDir::Local(path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_dirs_classify() {
        assert!(matches!(
            WorkDir::parse("/tmp/x").unwrap(),
            WorkDir::Local(p) if p == Path::new("/tmp/x")
        ));
        assert!(matches!(
            WorkDir::parse("file:///tmp/x").unwrap(),
            WorkDir::Local(p) if p == Path::new("/tmp/x")
        ));
        assert!(matches!(
            WorkDir::parse("relative/dir").unwrap(),
            WorkDir::Local(_)
        ));
        for url in ["s3://b/p/", "gs://b/p", "az://c/p", "s3://b"] {
            let WorkDir::ObjectStore(dir) = WorkDir::parse(url).unwrap() else {
                panic!("{url} is an object store");
            };
            assert_eq!(dir.url(), url.trim_end_matches('/'));
            assert_eq!(dir.join("x"), format!("{}/x", url.trim_end_matches('/')));
        }
        assert_eq!(local_path("file:///a/b"), Some(PathBuf::from("/a/b")));
        assert_eq!(local_path("gs://b/p"), None);
        for (bad, needle) in [
            ("", "empty"),
            ("hdfs://namenode/x", "unknown scheme 'hdfs'"),
            ("s3:///prefix", "names no bucket"),
            ("file://", "names no directory"),
        ] {
            let err = WorkDir::parse(bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidConfig {
                        field: "work_dir",
                        ..
                    }
                ),
                "{err}"
            );
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }
}
