//! Object URLs (`scheme://bucket/key`) taken apart.

use ::object_store::path::Path;
use tfdata_core::{Error, Result};

use super::clouds::{Cloud, SCHEMES};
use crate::io::fs::scheme;

/// The parts of an object URL.
#[derive(Debug, Clone, Copy)]
pub(super) struct Location<'a> {
    pub(super) scheme: &'a str,
    pub(super) cloud: Cloud,
    /// The bucket or container, as written (`container@account.host` for
    /// `abfss`).
    pub(super) authority: &'a str,
    /// The key, without the leading `/`; may be empty (the bucket itself).
    pub(super) key: &'a str,
}

impl<'a> Location<'a> {
    pub(super) fn parse(url: &'a str) -> Result<Self> {
        let scheme = scheme(url).ok_or_else(|| {
            Error::InvalidArgument(format!("{url} is not an object-store URL (no scheme)"))
        })?;
        let cloud = Cloud::of(scheme).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{url}: scheme '{scheme}' is not an object store (expected one of {})",
                SCHEMES.join(", ")
            ))
        })?;
        let rest = &url[scheme.len() + "://".len()..];
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{url} names no bucket: expected {scheme}://bucket/key"
            )));
        }
        Ok(Self {
            scheme,
            cloud,
            authority,
            key,
        })
    }

    /// `scheme://authority`: the bucket's URL, and the cache key of its
    /// client.
    pub(super) fn bucket_url(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// The full URL of `path` in this bucket.
    pub(super) fn url_of(&self, path: &Path) -> String {
        format!("{}://{}/{}", self.scheme, self.authority, path)
    }

    /// The key as an `object_store` path (empty for the bucket root).
    pub(super) fn path(&self, url: &str) -> Result<Path> {
        key_path(url, self.key)
    }

    /// The key as an object path, refusing the bucket root.
    pub(super) fn object_path(&self, url: &str) -> Result<Path> {
        let path = self.path(url)?;
        if path.is_root() {
            return Err(Error::InvalidArgument(format!(
                "{url} names a bucket, not an object"
            )));
        }
        Ok(path)
    }
}

/// Parses a key. `Path::parse` keeps the key as written (where `Path::from`
/// would percent-encode some characters and so address another object).
pub(super) fn key_path(url: &str, key: &str) -> Result<Path> {
    Path::parse(key).map_err(|e| {
        Error::InvalidArgument(format!(
            "{url}: the object key {key:?} cannot be used with object stores: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let l = Location::parse("s3://bucket/a/b.txt").unwrap();
        assert_eq!((l.scheme, l.authority, l.key), ("s3", "bucket", "a/b.txt"));
        assert_eq!(l.cloud, Cloud::S3);
        let l = Location::parse("abfss://c@acct.dfs.core.windows.net/x").unwrap();
        assert_eq!(
            (l.cloud, l.authority, l.key),
            (Cloud::Azure, "c@acct.dfs.core.windows.net", "x")
        );
        assert_eq!(Location::parse("gs://b").unwrap().key, "");
        for bad in ["s3:///key", "hdfs://n/p", "/local"] {
            assert!(
                matches!(Location::parse(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
        let err = key_path("s3://b/a//c", "a//c").unwrap_err();
        assert!(err.to_string().contains("s3://b/a//c"), "{err}");
    }
}
