//! Writing a snapshot's small files so that readers never see half of one:
//! TensorFlow's "atomically write" (a `<file>__<unique>.tmp` renamed into
//! place) on a local disk, a single `PUT` (which appears whole or not at
//! all) on an object store.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use tfdata_core::{Error, Result};

use super::layout::TEMP_SUFFIX;
use crate::io::fs::{FileSystem, scheme};

/// Writes `data` to `path` so that it appears whole or not at all.
pub fn write_atomically(fs: &dyn FileSystem, path: &str, data: &[u8]) -> Result<()> {
    let local = matches!(scheme(path), None | Some("file"));
    let target = if local {
        temporary_name(path)
    } else {
        path.to_string()
    };
    let mut out = fs.create(&target)?;
    let written = out
        .write_all(data)
        .and_then(|()| out.flush())
        .map_err(|e| write_error(&target, e));
    drop(out);
    if let Err(e) = written {
        if local {
            let _ = fs.delete(&target);
        }
        return Err(e);
    }
    if local {
        fs.rename(&target, path)?;
    }
    Ok(())
}

/// The error of a failed write. The object-store writer's `io::Error`
/// carries tfdata's error, which names the URL and says whether a retry
/// may help (a 5xx outlasting the client's retries: UNAVAILABLE; a missing
/// bucket or refused credentials: not): that error as it is. Anything else
/// (a local disk full) is an I/O error naming the file, which no retry
/// fixes: the snapshot fails with it rather than retrying for ever.
fn write_error(target: &str, e: std::io::Error) -> Error {
    if !e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        return Error::io(format!("writing {target}"), e);
    }
    match e.into_inner().map(|inner| inner.downcast::<Error>()) {
        Some(Ok(err)) => *err,
        // Not reached: checked above.
        _ => Error::Internal(format!("writing {target} failed")),
    }
}

/// A name next to `path` no other writer in any process uses.
pub fn temporary_name(path: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{path}__{}_{nanos}_{n}{TEMP_SUFFIX}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::local::LocalFileSystem;

    #[test]
    fn writes_whole_files_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = format!("{}/DONE", dir.path().display());
        let fs = LocalFileSystem;
        write_atomically(&fs, &path, b"").unwrap();
        write_atomically(&fs, &path, b"again").unwrap();
        assert_eq!(&fs.read_all(&path).unwrap()[..], b"again");
        let names = fs.list(&dir.path().display().to_string()).unwrap();
        assert_eq!(names, ["DONE"]);
        let err = write_atomically(&fs, "/nonexistent-dir/x/DONE", b"x").unwrap_err();
        assert!(err.to_string().contains("/nonexistent-dir/x/DONE"), "{err}");
    }
}
