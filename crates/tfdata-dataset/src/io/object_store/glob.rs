//! Globbing object keys: the listing starts at the literal prefix before the
//! first wildcard and descends one level per pattern component with
//! delimiter listings, so `s3://b/data/*.tfrecord` lists only `data/`,
//! however large the bucket is; sibling directories of a level are listed
//! concurrently. Names match as local ones do ([`crate::io::pattern`]).

use std::collections::VecDeque;
use std::sync::Arc;

use ::object_store::path::{Path, PathPart};
use ::object_store::{ListResult, ObjectStore};
use tfdata_core::{Error, Result};

use super::error::RequestError;
use super::location::{Location, key_path};
use super::runtime::Pending;
use crate::io::pattern::{fnmatch, has_wildcard};

/// Directory listings run concurrently while globbing one pattern level.
const MAX_LISTINGS_IN_FLIGHT: usize = 16;

/// The URLs in `store` matching `pattern` (parsed as `location`, whose key
/// has its first wildcard at byte `first_wild`), sorted.
pub(super) fn glob_keys(
    pattern: &str,
    location: &Location<'_>,
    first_wild: usize,
    store: &Arc<dyn ObjectStore>,
) -> Result<Vec<String>> {
    let key = location.key;
    let (dir, rest) = match key[..first_wild].rfind('/') {
        Some(slash) => (&key[..slash], &key[slash + 1..]),
        None => ("", key),
    };
    let components: Vec<&str> = rest.split('/').filter(|c| !c.is_empty()).collect();
    let mut frontier = vec![key_path(pattern, dir)?];
    let mut out = Vec::new();
    for (i, component) in components.iter().enumerate() {
        let last = i + 1 == components.len();
        if !last && !has_wildcard(component) {
            // A literal directory: descend without listing; the next
            // listing finds nothing if it does not exist.
            let part = PathPart::parse(component).map_err(|e| {
                Error::InvalidArgument(format!(
                    "globbing {pattern}: {component:?} cannot be an object-store key \
                     segment: {e}"
                ))
            })?;
            frontier = frontier.into_iter().map(|d| d.join(part.clone())).collect();
            continue;
        }
        let component: Vec<char> = component.chars().collect();
        let matches = |path: &Path| {
            path.filename()
                .is_some_and(|name| fnmatch(&component, &name.chars().collect::<Vec<_>>()))
        };
        let mut next = Vec::new();
        for DirListing { dir, listing } in list_dirs(pattern, store, frontier)? {
            if last {
                // Directories match like files. A "directory marker"
                // object named like the listed prefix is not a child.
                out.extend(
                    listing
                        .objects
                        .iter()
                        .map(|o| &o.location)
                        .filter(|p| **p != dir && matches(p))
                        .chain(listing.common_prefixes.iter().filter(|p| matches(p)))
                        .map(|p| location.url_of(p)),
                );
            } else {
                next.extend(listing.common_prefixes.into_iter().filter(|p| matches(p)));
            }
        }
        frontier = next;
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// One directory (key prefix) and what a delimiter listing found in it.
struct DirListing {
    dir: Path,
    listing: ListResult,
}

/// A listing in flight.
struct PendingListing {
    dir: Path,
    request: Pending<::object_store::Result<ListResult>>,
}

/// Lists each of `dirs` with a delimiter, a bounded number at a time,
/// returning their listings in order.
fn list_dirs(
    pattern: &str,
    store: &Arc<dyn ObjectStore>,
    dirs: Vec<Path>,
) -> Result<Vec<DirListing>> {
    let mut out = Vec::with_capacity(dirs.len());
    let mut pending: VecDeque<PendingListing> = VecDeque::new();
    let finish = |PendingListing { dir, request }: PendingListing,
                  out: &mut Vec<DirListing>|
     -> Result<()> {
        let listing = request
            .wait(|| format!("globbing {pattern}"))?
            .map_err(|e| RequestError::of_listing("globbing", pattern, e))?;
        out.push(DirListing { dir, listing });
        Ok(())
    };
    for dir in dirs {
        if pending.len() >= MAX_LISTINGS_IN_FLIGHT
            && let Some(oldest) = pending.pop_front()
        {
            finish(oldest, &mut out)?;
        }
        let (store, prefix) = (store.clone(), dir.clone());
        let request = Pending::spawn(async move {
            let prefix = (!prefix.is_root()).then_some(prefix);
            store.list_with_delimiter(prefix.as_ref()).await
        })?;
        pending.push_back(PendingListing { dir, request });
    }
    while let Some(oldest) = pending.pop_front() {
        finish(oldest, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use tfdata_core::Error;

    use crate::io::fs::FileSystem;
    use crate::io::object_store::test_support::{memory_fs, write};

    #[test]
    fn glob_matches_levels_like_local_paths() {
        let (fs, _) = memory_fs();
        for key in [
            "a/x.txt",
            "a/y.dat",
            "b/x.txt",
            "c/deep/x.txt",
            "top.txt",
            "data/part-0.tfrecord",
            "data/part-1.tfrecord",
            "data/part-1.tfrecord.tmp",
        ] {
            write(&fs, &format!("s3://bucket/{key}"), b"x");
        }
        let g = |p: &str| fs.glob(&format!("s3://bucket/{p}")).unwrap();
        let urls = |keys: &[&str]| -> Vec<String> {
            keys.iter().map(|k| format!("s3://bucket/{k}")).collect()
        };
        assert_eq!(g("*/x.txt"), urls(&["a/x.txt", "b/x.txt"]));
        assert_eq!(g("**/x.txt"), urls(&["a/x.txt", "b/x.txt"]));
        assert_eq!(g("*/*/x.txt"), urls(&["c/deep/x.txt"]));
        assert_eq!(
            g("data/part-*.tfrecord"),
            urls(&["data/part-0.tfrecord", "data/part-1.tfrecord"])
        );
        assert_eq!(
            g("data/part-[!0]*"),
            urls(&["data/part-1.tfrecord", "data/part-1.tfrecord.tmp"])
        );
        // Directories match like files, at the root too.
        assert_eq!(g("?"), urls(&["a", "b", "c"]));
        assert_eq!(g("c/*"), urls(&["c/deep"]));
        assert_eq!(g("*/deep/*"), urls(&["c/deep/x.txt"]));
        assert!(g("top.txt/*").is_empty());
        assert!(g("nope/*").is_empty());
        // No wildcard: the URL if it exists, as a file or a directory.
        assert_eq!(g("top.txt"), urls(&["top.txt"]));
        assert_eq!(g("c/deep"), urls(&["c/deep"]));
        assert!(g("nope.txt").is_empty());
        let err = fs.glob("s3://buck*/x").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(fs.exists("s3://bucket").unwrap());
        assert!(fs.exists("s3://bucket/c").unwrap());
    }
}
