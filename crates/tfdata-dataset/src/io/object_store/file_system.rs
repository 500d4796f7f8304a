//! [`ObjectStoreFileSystem`]: its options, one client per bucket, and the
//! [`FileSystem`] methods.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, PoisonError};

use ::object_store::{GetOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::clouds::{ClientConfig, StoreOption};
use super::error::{Failure, RequestError};
use super::glob::glob_keys;
use super::location::Location;
use super::reader::ObjectReader;
use super::runtime::block_on;
use super::writer::ObjectWriter;
use crate::io::fs::{FileStat, FileSystem, too_many_files};
use crate::io::pattern::{first_wildcard, has_wildcard};

/// Bytes fetched per ranged `GET` when streaming an object. Two chunks are
/// in memory per open reader (the one being read and the one prefetched);
/// 4 MiB keeps per-request latency small against transfer time on cloud
/// networks while an `interleave` over 16 files stays near 128 MiB.
pub const DEFAULT_READ_CHUNK_SIZE: usize = 4 << 20;

/// Size of each part of a multipart upload, and the threshold above which
/// [`FileSystem::create`] switches from one `PUT` to a multipart upload.
/// S3 needs parts of at least 5 MiB and allows 10,000 of them, so objects up
/// to ~78 GiB can be written at this size; raise it with
/// [`ObjectStoreFileSystem::with_part_size`] for larger ones.
pub const DEFAULT_PART_SIZE: usize = 8 << 20;

/// A [`FileSystem`] over cloud object stores: see the [module
/// docs](super).
///
/// One client is built per bucket (per `scheme://authority`) on first use
/// and cached, so credentials and connections are reused across files.
pub struct ObjectStoreFileSystem {
    config: ClientConfig,
    read_chunk_size: usize,
    part_size: usize,
    /// Clients by `scheme://authority`, built lazily or given by
    /// [`ObjectStoreFileSystem::with_store`].
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl std::fmt::Debug for ObjectStoreFileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Options may hold secrets: show their count only.
        f.debug_struct("ObjectStoreFileSystem")
            .field("from_env", &self.config.from_env)
            .field("options", &self.config.options.len())
            .field("read_chunk_size", &self.read_chunk_size)
            .field("part_size", &self.part_size)
            .finish_non_exhaustive()
    }
}

impl Default for ObjectStoreFileSystem {
    /// [`ObjectStoreFileSystem::from_env`].
    fn default() -> Self {
        Self::from_env()
    }
}

/// A URL taken apart, with the client of its bucket.
struct Target<'a> {
    location: Location<'a>,
    store: Arc<dyn ObjectStore>,
}

impl ObjectStoreFileSystem {
    /// Clients configured from the environment, as the cloud SDKs are (see
    /// the module docs); what [`global()`](super::global) uses unless
    /// replaced.
    pub fn from_env() -> Self {
        Self {
            config: ClientConfig {
                from_env: true,
                options: Vec::new(),
                retry: None,
            },
            read_chunk_size: DEFAULT_READ_CHUNK_SIZE,
            part_size: DEFAULT_PART_SIZE,
            stores: Mutex::new(HashMap::new()),
        }
    }

    /// Clients configured only by [`ObjectStoreFileSystem::with_option`]s,
    /// ignoring the environment: for tests and for programs that hold their
    /// own credentials.
    pub fn without_env() -> Self {
        let mut fs = Self::from_env();
        fs.config.from_env = false;
        fs
    }

    /// Adds one client option, applied after the environment. `key` is an
    /// `object_store` configuration key with its cloud's prefix, which says
    /// which cloud it configures: `aws_endpoint`, `aws_access_key_id`,
    /// `aws_allow_http`, `google_service_account_key`,
    /// `azure_storage_account_name`, ... (the lowercase form of the
    /// environment variable names). An unknown key is
    /// [`Error::InvalidConfig`].
    pub fn with_option(mut self, key: &str, value: impl Into<String>) -> Result<Self> {
        let option = StoreOption::parse(key, value.into())?;
        self.config.options.push(option);
        Ok(self)
    }

    /// [`ObjectStoreFileSystem::with_option`] for each pair.
    pub fn with_options<K: AsRef<str>, V: Into<String>>(
        self,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        options
            .into_iter()
            .try_fold(self, |fs, (k, v)| fs.with_option(k.as_ref(), v))
    }

    /// Serves the bucket `base` (`s3://bucket`) with `store` instead of a
    /// client built from the configuration: any `object_store`
    /// implementation, e.g. an in-memory store in tests or a client with
    /// custom credentials.
    pub fn with_store(self, base: &str, store: Arc<dyn ObjectStore>) -> Result<Self> {
        let location = Location::parse(base)?;
        if !location.key.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{base}: a store serves a whole bucket; give {} without a key",
                location.bucket_url()
            )));
        }
        self.stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(location.bucket_url(), store);
        Ok(self)
    }

    /// Bytes per ranged read when streaming (default
    /// [`DEFAULT_READ_CHUNK_SIZE`]); at least 1.
    pub fn with_read_chunk_size(mut self, bytes: usize) -> Self {
        self.read_chunk_size = bytes.max(1);
        self
    }

    /// Bytes per multipart upload part (default [`DEFAULT_PART_SIZE`]). S3
    /// and GCS refuse parts under 5 MiB (except the last).
    pub fn with_part_size(mut self, bytes: usize) -> Self {
        self.part_size = bytes.max(1);
        self
    }

    /// How clients retry failed requests. `object_store`'s default retries
    /// 10 times with exponential backoff for up to 3 minutes, which rides
    /// out cloud hiccups but makes an unreachable endpoint take minutes to
    /// report; lower it where failing fast matters more.
    pub fn with_retry(mut self, retry: RetryConfig) -> Self {
        self.config.retry = Some(retry);
        self
    }

    /// The client for `location`'s bucket, built on first use.
    fn store(&self, url: &str, location: &Location<'_>) -> Result<Arc<dyn ObjectStore>> {
        let bucket_url = location.bucket_url();
        let mut stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = stores.get(&bucket_url) {
            return Ok(store.clone());
        }
        let store = self
            .config
            .build(&bucket_url, location.cloud)
            .map_err(|e| {
                Error::FailedPrecondition(format!(
                    "cannot set up the {cloud:?} client for {url}: {e}; it is configured by {}",
                    location.cloud.env_hint(),
                    cloud = location.cloud,
                ))
            })?;
        stores.insert(bucket_url, store.clone());
        Ok(store)
    }

    /// The `object_store` client serving `url`'s bucket, and the object's
    /// key in it: for requests the [`FileSystem`] trait does not offer,
    /// such as the conditional writes of the dispatcher's leader lease.
    pub fn object_store(
        &self,
        url: &str,
    ) -> Result<(Arc<dyn ObjectStore>, ::object_store::path::Path)> {
        let Target { location, store } = self.resolve(url)?;
        let key = location.object_path(url)?;
        Ok((store, key))
    }

    /// Parses `url` and finds its bucket's client.
    fn resolve<'a>(&self, url: &'a str) -> Result<Target<'a>> {
        let location = Location::parse(url)?;
        let store = self.store(url, &location)?;
        Ok(Target { location, store })
    }
}

impl FileSystem for ObjectStoreFileSystem {
    fn open(&self, path: &str) -> Result<Box<dyn Read + Send>> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        let reader = ObjectReader::open(path, store, key, self.read_chunk_size as u64)?;
        Ok(Box::new(reader))
    }

    fn read_all(&self, path: &str) -> Result<Bytes> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        let read = block_on(
            async move { store.get_opts(&key, GetOptions::new()).await?.bytes().await },
            || format!("reading {path}"),
        )?;
        Ok(read.map_err(|e| RequestError::new("reading", path, e))?)
    }

    fn read_range(&self, path: &str, start: u64, len: u64) -> Result<Bytes> {
        if len == 0 {
            return Ok(Bytes::new());
        }
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        let end = start.saturating_add(len);
        // A range reaching past the end is cut short by the store (as a
        // local read); one starting past it is the store's error.
        let read = block_on(
            async move {
                let options = GetOptions {
                    range: Some(object_store::GetRange::Bounded(start..end)),
                    ..GetOptions::new()
                };
                store.get_opts(&key, options).await?.bytes().await
            },
            || format!("reading {path}"),
        )?;
        Ok(read.map_err(|e| RequestError::new("reading", path, e))?)
    }

    fn glob(&self, pattern: &str) -> Result<Vec<String>> {
        let location = Location::parse(pattern)?;
        if has_wildcard(location.authority) {
            // Buckets cannot be listed with the objects (and TensorFlow
            // does not match them either).
            return Err(Error::InvalidArgument(format!(
                "globbing {pattern}: wildcards are supported in object keys only, \
                 not in the bucket name"
            )));
        }
        let store = self.store(pattern, &location)?;
        let Some(first_wild) = first_wildcard(location.key) else {
            // No wildcard: the path itself, if it exists.
            return Ok(if self.exists(pattern)? {
                vec![pattern.to_string()]
            } else {
                Vec::new()
            });
        };
        glob_keys(pattern, &location, first_wild, &store)
    }

    fn exists(&self, path: &str) -> Result<bool> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.path(path)?;
        if !key.is_root() {
            let (s, k) = (store.clone(), key.clone());
            let head = block_on(
                async move { s.get_opts(&k, GetOptions::new().with_head(true)).await },
                || format!("checking {path}"),
            )?;
            match head {
                Ok(_) => return Ok(true),
                Err(::object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(RequestError::new("checking", path, e).into()),
            }
        }
        // Not an object: a "directory" exists if something is under it (the
        // bucket itself if it can be listed).
        let root = key.is_root();
        match block_on(
            async move { store.list_with_delimiter(Some(&key)).await },
            || format!("checking {path}"),
        )? {
            Ok(listing) => {
                Ok(root || !listing.objects.is_empty() || !listing.common_prefixes.is_empty())
            }
            Err(e) => {
                let err = RequestError::of_listing("checking", path, e);
                match err.failure() {
                    // No bucket, so nothing in it.
                    Failure::NoSuchBucket { .. } | Failure::NotFound => Ok(false),
                    _ => Err(err.into()),
                }
            }
        }
    }

    fn file_size(&self, path: &str) -> Result<u64> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        let head = block_on(
            async move {
                store
                    .get_opts(&key, GetOptions::new().with_head(true))
                    .await
            },
            || format!("inspecting {path}"),
        )?;
        Ok(head
            .map(|r| r.meta.size)
            .map_err(|e| RequestError::new("inspecting", path, e))?)
    }

    fn create(&self, path: &str) -> Result<Box<dyn Write + Send>> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        Ok(Box::new(ObjectWriter::new(
            path,
            store,
            key,
            self.part_size,
        )))
    }

    fn create_new(&self, path: &str, data: Bytes) -> Result<()> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        let options = ::object_store::PutOptions {
            mode: ::object_store::PutMode::Create,
            ..Default::default()
        };
        match block_on(
            async move { store.put_opts(&key, data.into(), options).await },
            || format!("creating {path}"),
        )? {
            Ok(_) => Ok(()),
            Err(::object_store::Error::AlreadyExists { .. })
            | Err(::object_store::Error::Precondition { .. }) => {
                Err(Error::AlreadyExists(format!("{path} exists already")))
            }
            Err(e) => Err(RequestError::new("creating", path, e).into()),
        }
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let Target { location, store } = self.resolve(dir)?;
        let prefix = location.path(dir)?;
        let listed = prefix.clone();
        // `list_with_delimiter` follows continuation tokens itself, so large
        // prefixes come back whole.
        let listing = block_on(
            async move {
                let prefix = (!listed.is_root()).then_some(listed);
                store.list_with_delimiter(prefix.as_ref()).await
            },
            || format!("listing {dir}"),
        )?
        .map_err(|e| RequestError::of_listing("listing", dir, e))?;
        let mut names: Vec<String> = listing
            .objects
            .iter()
            // A "directory marker" object named like the prefix is not a
            // file in it.
            .filter(|o| o.location != prefix)
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    fn delete(&self, path: &str) -> Result<()> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.object_path(path)?;
        match block_on(async move { store.delete(&key).await }, || {
            format!("deleting {path}")
        })? {
            // S3 answers 204 either way; other stores report a missing object.
            Ok(()) | Err(::object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(RequestError::new("deleting", path, e).into()),
        }
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let Target { location, store } = self.resolve(from)?;
        let src = location.object_path(from)?;
        let target = self.resolve(to)?;
        if !Arc::ptr_eq(&store, &target.store) {
            return Err(Error::InvalidArgument(format!(
                "cannot rename {from} to {to}: they are in different buckets"
            )));
        }
        let dst = target.location.object_path(to)?;
        let (copy_store, copy_src, copy_dst) = (Arc::clone(&store), src.clone(), dst);
        block_on(
            async move { copy_store.copy(&copy_src, &copy_dst).await },
            || format!("copying {from} to {to}"),
        )?
        .map_err(|e| RequestError::new(&format!("copying it to {to}:"), from, e))?;
        self.delete(from)
    }

    fn stat(&self, path: &str) -> Result<FileStat> {
        let Target { location, store } = self.resolve(path)?;
        let key = location.path(path)?;
        if !key.is_root() {
            let (s, k) = (store.clone(), key.clone());
            match block_on(
                async move { s.get_opts(&k, GetOptions::new().with_head(true)).await },
                || format!("inspecting {path}"),
            )? {
                Ok(head) => return Ok(object_stat(&head.meta)),
                Err(::object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(RequestError::new("inspecting", path, e).into()),
            }
        }
        if self.exists(path)? {
            Ok(FileStat {
                size: 0,
                modified_ns: 0,
                is_dir: true,
            })
        } else {
            Err(Error::NotFound {
                what: "file",
                id: path.to_string(),
            })
        }
    }

    fn walk(&self, dir: &str, max_files: usize) -> Result<Vec<(String, FileStat)>> {
        let Target { location, store } = self.resolve(dir)?;
        let root = location.path(dir)?;
        let mut out = Vec::new();
        // One delimiter listing per "directory", breadth first, so the
        // limit stops the walk before a huge prefix is listed whole.
        let mut pending = vec![root];
        while let Some(prefix) = pending.pop() {
            let (s, listed) = (store.clone(), prefix.clone());
            let listing = block_on(
                async move {
                    let listed = (!listed.is_root()).then_some(listed);
                    s.list_with_delimiter(listed.as_ref()).await
                },
                || format!("walking {dir}"),
            )?
            .map_err(|e| RequestError::of_listing("walking", dir, e))?;
            for object in &listing.objects {
                // A "directory marker" named like the prefix is no file.
                if object.location == prefix {
                    continue;
                }
                if out.len() >= max_files {
                    return Err(too_many_files(dir, max_files));
                }
                out.push((location.url_of(&object.location), object_stat(object)));
            }
            pending.extend(listing.common_prefixes);
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    fn list_dirs(&self, dir: &str) -> Result<Vec<String>> {
        let Target { location, store } = self.resolve(dir)?;
        let prefix = location.path(dir)?;
        let listing = block_on(
            async move {
                let prefix = (!prefix.is_root()).then_some(prefix);
                store.list_with_delimiter(prefix.as_ref()).await
            },
            || format!("listing {dir}"),
        )?
        .map_err(|e| RequestError::of_listing("listing", dir, e))?;
        let mut names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }
}

/// An object's size and last-modified time (what a store reports; a
/// rewritten object gets a new one).
fn object_stat(meta: &::object_store::ObjectMeta) -> FileStat {
    FileStat {
        size: meta.size,
        modified_ns: meta
            .last_modified
            .timestamp_nanos_opt()
            .and_then(|ns| u64::try_from(ns).ok())
            .unwrap_or(0),
        is_dir: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::object_store::test_support::{memory_fs, write};

    #[test]
    fn options_are_checked() {
        let fs = ObjectStoreFileSystem::without_env()
            .with_options([
                ("aws_endpoint", "http://localhost:1"),
                ("AWS_ALLOW_HTTP", "true"),
                ("google_service_account_key", "{}"),
                ("azure_storage_account_name", "acct"),
            ])
            .unwrap();
        assert_eq!(fs.config.options.len(), 4);
        for bad in ["aws_no_such_key", "endpoint"] {
            let err = ObjectStoreFileSystem::without_env()
                .with_option(bad, "x")
                .unwrap_err();
            assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn missing_objects_are_not_found_naming_the_url() {
        let (fs, _) = memory_fs();
        let url = "s3://bucket/no/such.tfrecord";
        assert!(!fs.exists(url).unwrap());
        for err in [
            fs.open(url).err().unwrap(),
            fs.read_all(url).unwrap_err(),
            fs.file_size(url).unwrap_err(),
        ] {
            assert!(matches!(err, Error::NotFound { what: "file", .. }), "{err}");
            assert!(err.to_string().contains(url), "{err}");
        }
        assert!(matches!(
            fs.open("s3://bucket/").err().unwrap(),
            Error::InvalidArgument(_)
        ));
    }

    #[test]
    fn list_and_delete() {
        let (fs, _) = memory_fs();
        for key in ["d/b", "d/a", "d/sub/x", "d", "other"] {
            write(&fs, &format!("s3://bucket/{key}"), b"x");
        }
        // Objects directly under the prefix only, sorted, by name; the
        // marker object `d` itself is not in `d/`.
        assert_eq!(fs.list("s3://bucket/d").unwrap(), ["a", "b"]);
        assert_eq!(fs.list("s3://bucket/d/").unwrap(), ["a", "b"]);
        assert_eq!(fs.list("s3://bucket/d/sub").unwrap(), ["x"]);
        assert_eq!(fs.list("s3://bucket").unwrap(), ["d", "other"]);
        assert!(fs.list("s3://bucket/nothing/here").unwrap().is_empty());

        fs.delete("s3://bucket/d/a").unwrap();
        fs.delete("s3://bucket/d/a").unwrap();
        assert_eq!(fs.list("s3://bucket/d").unwrap(), ["b"]);
        assert!(!fs.exists("s3://bucket/d/a").unwrap());
        assert!(matches!(
            fs.delete("s3://bucket/"),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn rename_copies_then_deletes() {
        let (fs, _) = memory_fs();
        write(&fs, "s3://bucket/tmp/a", b"chunk bytes");
        write(&fs, "s3://bucket/final/a", b"old");
        fs.rename("s3://bucket/tmp/a", "s3://bucket/final/a")
            .unwrap();
        assert_eq!(
            &fs.read_all("s3://bucket/final/a").unwrap()[..],
            b"chunk bytes"
        );
        assert!(!fs.exists("s3://bucket/tmp/a").unwrap());
        let err = fs
            .rename("s3://bucket/tmp/missing", "s3://bucket/final/b")
            .unwrap_err();
        assert!(err.to_string().contains("s3://bucket/tmp/missing"), "{err}");
        assert!(!fs.exists("s3://bucket/final/b").unwrap());
    }

    #[test]
    fn stat_walk_and_directories() {
        let (fs, _) = memory_fs();
        for key in ["d/b", "d/a", "d/sub/x", "d/sub/deeper/y", "other"] {
            write(&fs, &format!("s3://bucket/{key}"), b"xyz");
        }
        let a = fs.stat("s3://bucket/d/a").unwrap();
        assert_eq!((a.size, a.is_dir), (3, false));
        assert!(a.modified_ns > 0);
        assert!(fs.stat("s3://bucket/d/sub").unwrap().is_dir);
        let err = fs.stat("s3://bucket/nothing").unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");

        let walked: Vec<String> = fs
            .walk("s3://bucket/d", 10)
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(
            walked,
            [
                "s3://bucket/d/a",
                "s3://bucket/d/b",
                "s3://bucket/d/sub/deeper/y",
                "s3://bucket/d/sub/x"
            ]
        );
        let err = fs.walk("s3://bucket/d", 3).unwrap_err();
        assert!(err.to_string().contains("more than 3 files"), "{err}");
        assert!(fs.walk("s3://bucket/none", 3).unwrap().is_empty());
        assert_eq!(fs.list_dirs("s3://bucket/d").unwrap(), ["sub"]);
        assert_eq!(fs.list_dirs("s3://bucket").unwrap(), ["d"]);

        // A rewrite of the same size gets a new time.
        std::thread::sleep(std::time::Duration::from_millis(2));
        write(&fs, "s3://bucket/d/a", b"XYZ");
        let again = fs.stat("s3://bucket/d/a").unwrap();
        assert_eq!(again.size, 3);
        assert_ne!(again.modified_ns, a.modified_ns);

        fs.delete_dir_all("s3://bucket/d/sub", 10).unwrap();
        assert!(!fs.exists("s3://bucket/d/sub").unwrap());
        assert!(fs.exists("s3://bucket/d/a").unwrap());
        fs.delete_dir_all("s3://bucket/d/sub", 10).unwrap();
    }

    #[test]
    fn works_from_inside_a_tokio_runtime() {
        let (fs, _) = memory_fs();
        write(&fs, "s3://bucket/x", b"inside");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = rt.block_on(async { fs.read_all("s3://bucket/x") }).unwrap();
        assert_eq!(&got[..], b"inside");
    }
}
