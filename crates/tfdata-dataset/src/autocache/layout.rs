//! Where caches live: `<cache_root>/<prefix fp>/<files fp>/` is one cache,
//! a distributed snapshot in TensorFlow's layout
//! ([`crate::snapshot::layout`]), complete when its `DONE` marker exists.
//!
//! Keeping the files fingerprint a level below the prefix's makes the
//! stale caches of a prefix (written before its files changed) the other
//! directories beside the current one: found by one listing, without a
//! record of what was written (so a restarted dispatcher finds them too).

use tfdata_core::{Error, Result};

use super::{Fingerprint, Resolver};
use crate::snapshot::layout::{done_file, join};

/// The most files [`drop_cache`] deletes from an object store (one request
/// each; a local directory goes in one `remove_dir_all`). A snapshot holds
/// a few files per chunk and per stream, so this is millions of elements'
/// worth; past it the cache is left (and reported) rather than deleting for
/// hours.
pub const MAX_CACHE_FILES: usize = 1_000_000;

/// The directory of the cache `fp` names under `root` (a local path or an
/// object-store URL).
pub fn cache_path(root: &str, fp: &Fingerprint) -> String {
    join(&join(root, &fp.prefix), &fp.files)
}

/// Whether the cache at `path` is complete: its `DONE` marker exists (the
/// snapshot writer writes it last, after every chunk).
pub fn is_complete(path: &str, fs: Resolver<'_>) -> Result<bool> {
    let done = done_file(path);
    fs(&done)?.exists(&done)
}

/// The other caches of `fp`'s prefix under `root`: written when the files
/// had other sizes or times, so they hold other data. Sorted paths.
pub fn stale_caches(root: &str, fp: &Fingerprint, fs: Resolver<'_>) -> Result<Vec<String>> {
    let dir = join(root, &fp.prefix);
    Ok(fs(&dir)?
        .list_dirs(&dir)?
        .into_iter()
        .filter(|name| *name != fp.files)
        .map(|name| join(&dir, &name))
        .collect())
}

/// Deletes the cache at `path`: its `DONE` first, so a deletion cut short
/// (a crash, an object store failing half-way) leaves an incomplete cache,
/// never one that looks complete with chunks missing. A missing cache is
/// no error.
pub fn drop_cache(path: &str, fs: Resolver<'_>) -> Result<()> {
    if path.trim_matches('/').is_empty() {
        // A bug upstream, not a request to delete a root.
        return Err(Error::InvalidArgument(format!(
            "refusing to drop the cache at {path:?}: not a cache directory"
        )));
    }
    let file_system = fs(path)?;
    file_system.delete(&done_file(path))?;
    file_system.delete_dir_all(path, MAX_CACHE_FILES)
}
