//! The file-system registry: which [`FileSystem`] serves a URL, by its
//! scheme (TensorFlow's `FileSystemRegistry`), and the `tf.io.gfile`-style
//! functions that open, read, glob, list and delete through it.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::fs::{FileSystem, scheme};
use super::local::LocalFileSystem;
use super::object_store::{SCHEMES, global, is_object_store_scheme};

/// The file system serving `url`.
///
/// Plain paths and `file://` URLs are local; `s3`, `s3a`, `gs`, `az`,
/// `azure`, `adl`, `abfs` and `abfss` URLs go to the process's
/// [`ObjectStoreFileSystem`](super::ObjectStoreFileSystem)
/// ([`global`], configured from the environment).
/// Other schemes are refused with [`Error::Unimplemented`] naming the
/// scheme, with TensorFlow's wording.
pub fn file_system(url: &str) -> Result<Arc<dyn FileSystem>> {
    match scheme(url) {
        None | Some("file") => Ok(Arc::new(LocalFileSystem)),
        Some(s) if is_object_store_scheme(s) => Ok(global()),
        // Extension point: other file systems (hdfs, http, ...) get an arm
        // here returning their `FileSystem` implementation.
        Some(other) => Err(Error::Unimplemented(format!(
            "File system scheme '{other}' not implemented (file: '{url}'); \
             tfdata reads local paths, file:// URLs and the object stores {}",
            SCHEMES.join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
