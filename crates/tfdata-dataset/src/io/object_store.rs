//! Object stores (`s3://`, `gs://`, `az://`, ...) behind the [`FileSystem`]
//! trait, so every reader (`list_files`, `TFRecordDataset`,
//! `TextLineDataset`, vocabulary files) accepts the URLs TensorFlow users
//! write, on top of the `object_store` crate.
//!
//! # Schemes
//!
//! | scheme | store | URL |
//! | --- | --- | --- |
//! | `s3`, `s3a` | Amazon S3 and S3-compatible (MinIO, Ceph, R2, moto) | `s3://bucket/key` |
//! | `gs` | Google Cloud Storage | `gs://bucket/key` |
//! | `az`, `azure`, `adl`, `abfs`, `abfss` | Azure Blob Storage / ADLS Gen2 | `az://container/key`, `abfss://container@account.dfs.core.windows.net/key` |
//!
//! # Configuration
//!
//! [`global()`] (what [`super::file_system`] hands out) is configured from
//! the environment the way the clouds' SDKs are, when the first object-store
//! URL is used, so a worker process needs no code to read `gs://` paths:
//!
//! * S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//!   `AWS_REGION`, `AWS_ENDPOINT_URL` / `AWS_ENDPOINT` (S3-compatible
//!   servers), `AWS_ALLOW_HTTP=true` (plain-HTTP endpoints), web identity and
//!   instance metadata credentials; every `AWS_*` key `object_store` knows.
//!   TensorFlow's own `S3_ENDPOINT` (`host:port`) and `S3_USE_HTTPS=0` are
//!   honoured too when no `AWS_ENDPOINT*` is set, so existing TensorFlow
//!   setups keep working. The shared `~/.aws/credentials` file is not read
//!   (an `object_store` limitation): export the keys instead.
//! * GCS: `GOOGLE_APPLICATION_CREDENTIALS` / `GOOGLE_SERVICE_ACCOUNT` (a key
//!   file), `GOOGLE_SERVICE_ACCOUNT_KEY` (its JSON), else the gcloud
//!   application-default credentials or the instance metadata server.
//! * Azure: `AZURE_STORAGE_ACCOUNT_NAME` plus `AZURE_STORAGE_ACCOUNT_KEY`,
//!   a SAS token, a service principal (`AZURE_CLIENT_ID`, ...) or managed
//!   identity; `AZURE_USE_EMULATOR=true` for Azurite.
//!
//! The environment is read when a bucket is first used and that bucket's
//! client is then reused (it caches credentials and connections). Code that
//! wants something else builds an [`ObjectStoreFileSystem`] with explicit
//! options or stores and either uses it directly or installs it with
//! [`set_global`]; tests use that to point at a local server without
//! touching the process environment, which other threads read.
//!
//! # Blocking on async
//!
//! `object_store` is async, while readers are synchronous and run on
//! pipeline threads, in user code with no runtime, or even on some other
//! Tokio runtime's threads. Requests therefore run on a small runtime owned
//! by this module (two worker threads, created on first use) and the calling
//! thread waits on a channel for the result. Unlike `Runtime::block_on`,
//! that never panics when the caller is itself inside a Tokio runtime (it
//! only blocks that thread, as any synchronous file read would).
//!
//! # Reading and writing
//!
//! [`FileSystem::open`] streams: it fetches the object in ranged chunks
//! ([`DEFAULT_READ_CHUNK_SIZE`]), one ahead of the reader so the network
//! overlaps with decoding, pinned to the object's ETag so an object
//! replaced mid-read is an error rather than a silent mix of two versions.
//! [`FileSystem::create`] buffers and uploads with one `PUT` when flushed,
//! switching to a multipart upload of [`DEFAULT_PART_SIZE`] parts once the
//! data outgrows one part. Objects are immutable: the upload happens on
//! `flush()` (which [`TfRecordWriter::finish`](super::TfRecordWriter::finish)
//! calls), writing after it is an error, and a writer dropped without a
//! flush uploads nothing, so a crash never leaves a truncated object that
//! looks complete.
//!
//! # Globbing
//!
//! Patterns follow `tf.io.gfile.glob` as for local paths (see [`super::fs`]),
//! with `/`-separated "directories" (common prefixes). The listing starts at
//! the literal prefix before the first wildcard and descends one level per
//! pattern component with delimiter listings, so `s3://b/data/*.tfrecord`
//! lists only `data/`, however large the bucket is; sibling directories of a
//! level are listed concurrently. Results are full URLs (`scheme://bucket/`
//! and the object key), sorted.
//!
//! Keys are used as written, but `object_store` cannot express keys with
//! empty segments (`a//b`), `.` or `..` segments or control characters;
//! those are [`Error::InvalidArgument`].

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, mpsc};

use ::object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use ::object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use ::object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use ::object_store::path::{Path, PathPart};
use ::object_store::{
    GetOptions, ListResult, MultipartUpload, ObjectStore, ObjectStoreExt, PutMultipartOptions,
    PutOptions, PutPayload, RetryConfig,
};
use bytes::{Bytes, BytesMut};
use tfdata_core::{Error, Result};

use super::fs::{FileSystem, fnmatch, has_wildcard, scheme};

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

/// Parts uploaded concurrently by one writer: enough to keep the network
/// busy while the next part fills, bounded so memory stays at a few parts.
const MAX_PARTS_IN_FLIGHT: usize = 2;

/// Directory listings run concurrently while globbing one pattern level.
const MAX_LISTINGS_IN_FLIGHT: usize = 16;

/// The URL schemes served by object stores.
pub const SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "azure", "adl", "abfs", "abfss"];

/// Which cloud's client serves a scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cloud {
    S3,
    Gcs,
    Azure,
}

impl Cloud {
    fn of(scheme: &str) -> Option<Self> {
        match scheme {
            "s3" | "s3a" => Some(Self::S3),
            "gs" => Some(Self::Gcs),
            "az" | "azure" | "adl" | "abfs" | "abfss" => Some(Self::Azure),
            _ => None,
        }
    }

    /// The environment variables that configure this cloud, for error hints.
    fn env_hint(self) -> &'static str {
        match self {
            Self::S3 => {
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, \
                 AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for http:// endpoints)"
            }
            Self::Gcs => "GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT_KEY",
            Self::Azure => {
                "AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY \
                 (or a SAS token, service principal or managed identity)"
            }
        }
    }
}

/// Whether `scheme` names an object store this module serves.
pub fn is_object_store_scheme(scheme: &str) -> bool {
    Cloud::of(scheme).is_some()
}

/// One configuration option, parsed (so typos fail at construction).
#[derive(Debug, Clone)]
enum StoreOption {
    S3(AmazonS3ConfigKey, String),
    Gcs(GoogleConfigKey, String),
    Azure(AzureConfigKey, String),
}

/// A [`FileSystem`] over cloud object stores: see the module docs.
///
/// One client is built per bucket (per `scheme://authority`) on first use
/// and cached, so credentials and connections are reused across files.
pub struct ObjectStoreFileSystem {
    from_env: bool,
    options: Vec<StoreOption>,
    read_chunk_size: usize,
    part_size: usize,
    retry: Option<RetryConfig>,
    /// Clients by `scheme://authority`, built lazily or given by
    /// [`ObjectStoreFileSystem::with_store`].
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl std::fmt::Debug for ObjectStoreFileSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Options may hold secrets: show their count only.
        f.debug_struct("ObjectStoreFileSystem")
            .field("from_env", &self.from_env)
            .field("options", &self.options.len())
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

/// The parts of an object URL.
#[derive(Debug, Clone, Copy)]
struct Location<'a> {
    scheme: &'a str,
    cloud: Cloud,
    /// The bucket or container, as written (`container@account.host` for
    /// `abfss`).
    authority: &'a str,
    /// The key, without the leading `/`; may be empty (the bucket itself).
    key: &'a str,
}

impl<'a> Location<'a> {
    fn parse(url: &'a str) -> Result<Self> {
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

    /// `scheme://authority`, the cache key of the bucket's client.
    fn base(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }

    /// The full URL of `path` in this bucket.
    fn url_of(&self, path: &Path) -> String {
        format!("{}://{}/{}", self.scheme, self.authority, path)
    }

    /// The key as an `object_store` path (empty for the bucket root).
    fn path(&self, url: &str) -> Result<Path> {
        key_path(url, self.key)
    }

    /// The key as an object path, refusing the bucket root.
    fn object_path(&self, url: &str) -> Result<Path> {
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
fn key_path(url: &str, key: &str) -> Result<Path> {
    Path::parse(key).map_err(|e| {
        Error::InvalidArgument(format!(
            "{url}: the object key {key:?} cannot be used with object stores: {e}"
        ))
    })
}

impl ObjectStoreFileSystem {
    /// Clients configured from the environment, as the cloud SDKs are (see
    /// the module docs); what [`global()`] uses unless replaced.
    pub fn from_env() -> Self {
        Self {
            from_env: true,
            options: Vec::new(),
            read_chunk_size: DEFAULT_READ_CHUNK_SIZE,
            part_size: DEFAULT_PART_SIZE,
            retry: None,
            stores: Mutex::new(HashMap::new()),
        }
    }

    /// Clients configured only by [`ObjectStoreFileSystem::with_option`]s,
    /// ignoring the environment: for tests and for programs that hold their
    /// own credentials.
    pub fn without_env() -> Self {
        Self {
            from_env: false,
            ..Self::from_env()
        }
    }

    /// Adds one client option, applied after the environment. `key` is an
    /// `object_store` configuration key with its cloud's prefix, which says
    /// which cloud it configures: `aws_endpoint`, `aws_access_key_id`,
    /// `aws_allow_http`, `google_service_account_key`,
    /// `azure_storage_account_name`, ... (the lowercase form of the
    /// environment variable names). An unknown key is
    /// [`Error::InvalidConfig`].
    pub fn with_option(mut self, key: &str, value: impl Into<String>) -> Result<Self> {
        let value = value.into();
        let lower = key.to_ascii_lowercase();
        let unknown = |e: ::object_store::Error| Error::InvalidConfig {
            field: "object store option",
            reason: format!("{key}: {e}"),
        };
        let option = if lower.starts_with("aws_") {
            StoreOption::S3(lower.parse().map_err(unknown)?, value)
        } else if lower.starts_with("google_") {
            StoreOption::Gcs(lower.parse().map_err(unknown)?, value)
        } else if lower.starts_with("azure_") {
            StoreOption::Azure(lower.parse().map_err(unknown)?, value)
        } else {
            return Err(Error::InvalidConfig {
                field: "object store option",
                reason: format!(
                    "{key}: an option key starts with the cloud it configures: \
                     aws_, google_ or azure_"
                ),
            });
        };
        self.options.push(option);
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
                location.base()
            )));
        }
        self.stores
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(location.base(), store);
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
        self.retry = Some(retry);
        self
    }

    /// The client for `location`'s bucket, built on first use.
    fn store(&self, url: &str, location: &Location<'_>) -> Result<Arc<dyn ObjectStore>> {
        let base = location.base();
        let mut stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(store) = stores.get(&base) {
            return Ok(store.clone());
        }
        let store = self.build(&base, location.cloud).map_err(|e| {
            Error::FailedPrecondition(format!(
                "cannot set up the {cloud:?} client for {url}: {e}; it is configured by {}",
                location.cloud.env_hint(),
                cloud = location.cloud,
            ))
        })?;
        stores.insert(base, store.clone());
        Ok(store)
    }

    fn build(&self, base: &str, cloud: Cloud) -> ::object_store::Result<Arc<dyn ObjectStore>> {
        Ok(match cloud {
            Cloud::S3 => {
                let mut b = if self.from_env {
                    s3_builder_from_env()
                } else {
                    AmazonS3Builder::new()
                };
                b = b.with_url(base);
                for option in &self.options {
                    if let StoreOption::S3(k, v) = option {
                        b = b.with_config(*k, v);
                    }
                }
                if let Some(retry) = &self.retry {
                    b = b.with_retry(retry.clone());
                }
                Arc::new(b.build()?)
            }
            Cloud::Gcs => {
                let mut b = if self.from_env {
                    GoogleCloudStorageBuilder::from_env()
                } else {
                    GoogleCloudStorageBuilder::new()
                };
                b = b.with_url(base);
                for option in &self.options {
                    if let StoreOption::Gcs(k, v) = option {
                        b = b.with_config(*k, v);
                    }
                }
                if let Some(retry) = &self.retry {
                    b = b.with_retry(retry.clone());
                }
                Arc::new(b.build()?)
            }
            Cloud::Azure => {
                let mut b = if self.from_env {
                    MicrosoftAzureBuilder::from_env()
                } else {
                    MicrosoftAzureBuilder::new()
                };
                b = b.with_url(base);
                for option in &self.options {
                    if let StoreOption::Azure(k, v) = option {
                        b = b.with_config(*k, v);
                    }
                }
                if let Some(retry) = &self.retry {
                    b = b.with_retry(retry.clone());
                }
                Arc::new(b.build()?)
            }
        })
    }

    /// Parses `url` and finds its bucket's client.
    fn resolve<'a>(&self, url: &'a str) -> Result<(Location<'a>, Arc<dyn ObjectStore>)> {
        let location = Location::parse(url)?;
        let store = self.store(url, &location)?;
        Ok((location, store))
    }
}

/// `AmazonS3Builder::from_env`, plus TensorFlow's `S3_ENDPOINT` /
/// `S3_USE_HTTPS` when no `AWS_ENDPOINT*` variable is set, so a TensorFlow
/// setup pointing at MinIO keeps working unchanged.
fn s3_builder_from_env() -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env();
    let aws_endpoint = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !aws_endpoint && let Ok(endpoint) = std::env::var("S3_ENDPOINT") {
        let https = std::env::var("S3_USE_HTTPS").map_or(true, |v| v != "0");
        let endpoint = if endpoint.contains("://") {
            endpoint
        } else if https {
            format!("https://{endpoint}")
        } else {
            format!("http://{endpoint}")
        };
        if endpoint.starts_with("http://") {
            builder = builder.with_allow_http(true);
        }
        builder = builder.with_endpoint(endpoint);
    }
    builder
}

// ---------------------------------------------------------------------------
// The process-wide instance.

/// The process-wide instance and the process it belongs to: its clients'
/// connection pools live on the I/O runtime of that process, so a child of
/// `fork()` builds its own from the environment.
type GlobalSlot = RwLock<Option<(u32, Arc<ObjectStoreFileSystem>)>>;

fn global_slot() -> &'static GlobalSlot {
    static GLOBAL: OnceLock<GlobalSlot> = OnceLock::new();
    GLOBAL.get_or_init(|| RwLock::new(None))
}

/// The object-store file system [`super::file_system`] returns for
/// object-store URLs: [`ObjectStoreFileSystem::from_env`] unless
/// [`set_global`] installed another.
pub fn global() -> Arc<ObjectStoreFileSystem> {
    let pid = std::process::id();
    if let Some((owner, fs)) = global_slot()
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        && *owner == pid
    {
        return fs.clone();
    }
    let mut slot = global_slot()
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    match slot.as_ref() {
        Some((owner, fs)) if *owner == pid => fs.clone(),
        _ => {
            let fs = Arc::new(ObjectStoreFileSystem::from_env());
            *slot = Some((pid, fs.clone()));
            fs
        }
    }
}

/// Makes `fs` serve object-store URLs for the whole process, from the next
/// [`super::file_system`] call on (files already open keep their client).
/// For programs that configure storage in code rather than the environment,
/// and for tests pointing at a local server.
pub fn set_global(fs: ObjectStoreFileSystem) {
    *global_slot()
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Some((std::process::id(), Arc::new(fs)));
}

// ---------------------------------------------------------------------------
// Running futures from synchronous code.

/// The runtime object-store requests run on, created on first use. Two
/// worker threads are plenty: they only drive network I/O, and readers
/// prefetch so requests overlap with the callers' work.
///
/// Keyed by process id: a child of `fork()` has the parent's runtime object
/// but none of its threads, so it builds its own (the parent's is leaked in
/// the child, never dropped: that would join threads that are not there).
fn runtime() -> Result<tokio::runtime::Handle> {
    static RUNTIME: Mutex<Option<(u32, tokio::runtime::Handle)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, handle)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(handle.clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tfdata-object-store")
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(format!("cannot start the object-store I/O runtime: {e}")))?;
    let handle = runtime.handle().clone();
    std::mem::forget(runtime);
    *slot = Some((pid, handle.clone()));
    Ok(handle)
}

/// A future running on [`runtime`]; [`Pending::wait`] blocks the calling
/// thread (never a runtime thread) until it is done. Dropping it cancels
/// the future.
struct Pending<T> {
    result: mpsc::Receiver<T>,
    task: tokio::task::JoinHandle<()>,
}

impl<T: Send + 'static> Pending<T> {
    fn spawn(future: impl Future<Output = T> + Send + 'static) -> Result<Self> {
        let (tx, rx) = mpsc::sync_channel(1);
        let task = runtime()?.spawn(async move {
            // The receiver is gone only if the caller gave up waiting.
            let _ = tx.send(future.await);
        });
        Ok(Self { result: rx, task })
    }

    /// The future's output; an error if it panicked (naming `what`).
    fn wait(self, what: impl FnOnce() -> String) -> Result<T> {
        self.result
            .recv()
            .map_err(|_| Error::Internal(format!("{}: the object-store request panicked", what())))
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        // A no-op once the task has finished.
        self.task.abort();
    }
}

/// Runs `future` to completion from synchronous code.
fn block_on<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
    what: impl FnOnce() -> String,
) -> Result<T> {
    Pending::spawn(future)?.wait(what)
}

// ---------------------------------------------------------------------------
// Errors.

/// The error and its causes, `: `-joined, skipping causes already in the
/// text (`object_store` errors often repeat their source).
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// Maps an `object_store` error while `action`-ing `url` to tfdata's error,
/// naming the URL: missing objects are [`Error::NotFound`], refused or
/// missing credentials [`Error::FailedPrecondition`] with a configuration
/// hint, and network or server failures (after `object_store`'s own
/// retries) [`Error::Unavailable`], which callers may retry.
fn store_error(action: &str, url: &str, err: ::object_store::Error) -> Error {
    use ::object_store::Error as E;
    let cloud = scheme(url).and_then(Cloud::of);
    let hint = || cloud.map_or(String::new(), |c| format!("; check {}", c.env_hint()));
    if matches!(err, E::Generic { .. }) && is_credential_failure(&chain(&err)) {
        // With no credentials configured, the SDK chain ends at the cloud's
        // metadata server, which off-cloud is unreachable or refuses: that
        // is a configuration problem, not a transient one.
        return Error::FailedPrecondition(format!(
            "{action} {url}: no credentials: {}{}",
            chain(&err),
            hint()
        ));
    }
    // Listings report every HTTP failure as generic: recover refusals.
    let refused =
        matches!(err, E::Generic { .. }) && (is_status(&err, 401) || is_status(&err, 403));
    match &err {
        _ if refused => Error::FailedPrecondition(format!(
            "{action} {url}: access denied: {}{}",
            chain(&err),
            hint()
        )),
        E::NotFound { .. } => Error::NotFound {
            what: "file",
            id: url.to_string(),
        },
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Error::FailedPrecondition(
            format!("{action} {url}: access denied: {}{}", chain(&err), hint()),
        ),
        E::Precondition { .. } => Error::FailedPrecondition(format!(
            "{action} {url}: the object changed while it was being read \
             (its ETag no longer matches): {}",
            chain(&err)
        )),
        E::AlreadyExists { .. } => {
            Error::FailedPrecondition(format!("{action} {url}: {}", chain(&err)))
        }
        E::NotSupported { .. } | E::NotImplemented { .. } => {
            Error::Unimplemented(format!("{action} {url}: {}", chain(&err)))
        }
        E::InvalidPath { .. } | E::UnknownConfigurationKey { .. } => {
            Error::InvalidArgument(format!("{action} {url}: {}", chain(&err)))
        }
        _ => Error::Unavailable(format!("{action} {url}: {}", chain(&err))),
    }
}

/// Whether an error's text says fetching credentials failed (`object_store`
/// reports it as a generic error): a token request, or the instance
/// metadata endpoint the credential chains fall back to.
fn is_credential_failure(text: &str) -> bool {
    ["token request", "169.254.169.254", "credential"]
        .iter()
        .any(|needle| text.contains(needle))
}

/// [`store_error`] for a listing, where `object_store` reports a missing
/// bucket as a generic error: that becomes [`Error::NotFound`] naming the
/// bucket, since a typo in a bucket name is far likelier than a transient
/// failure and must not be retried (or look like an empty directory).
fn list_error(action: &str, url: &str, err: ::object_store::Error) -> Error {
    let missing_bucket = matches!(err, ::object_store::Error::NotFound { .. })
        || (matches!(err, ::object_store::Error::Generic { .. }) && is_status(&err, 404));
    match Location::parse(url) {
        Ok(location) if missing_bucket => Error::NotFound {
            what: "bucket",
            id: location.base(),
        },
        _ => store_error(action, url, err),
    }
}

/// Whether `err` is an HTTP error with `status`. `object_store` keeps its
/// HTTP error type private, so this reads the message it formats
/// ("... status code: 404 Not Found ...").
fn is_status(err: &::object_store::Error, status: u16) -> bool {
    chain(err).contains(&format!("status code: {status} "))
}

/// A tfdata error as the `io::Error` a `Read`/`Write` impl must return,
/// keeping the message (which names the URL) and a matching kind. Kinds the
/// decompressors use for corrupt input (`InvalidData`, `UnexpectedEof`)
/// are avoided so a network failure is not mistaken for corruption.
fn to_io(err: Error) -> io::Error {
    let kind = match &err {
        Error::NotFound { .. } => io::ErrorKind::NotFound,
        Error::FailedPrecondition(m)
            if m.contains("access denied") || m.contains("no credentials") =>
        {
            io::ErrorKind::PermissionDenied
        }
        Error::Unavailable(_) => io::ErrorKind::ConnectionAborted,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, err)
}

// ---------------------------------------------------------------------------
// FileSystem.

impl FileSystem for ObjectStoreFileSystem {
    fn open(&self, path: &str) -> Result<Box<dyn Read + Send>> {
        let (location, store) = self.resolve(path)?;
        let key = location.object_path(path)?;
        // `head` gives the size (so ranged reads know where to stop), the
        // ETag to pin reads to, and a NotFound at open like a local file.
        let meta = {
            let (store, key) = (store.clone(), key.clone());
            block_on(
                async move {
                    store
                        .get_opts(&key, GetOptions::new().with_head(true))
                        .await
                        .map(|r| r.meta)
                },
                || format!("opening {path}"),
            )?
            .map_err(|e| store_error("opening", path, e))?
        };
        Ok(Box::new(ObjectReader {
            url: path.to_string(),
            store,
            key,
            e_tag: meta.e_tag,
            size: meta.size,
            next: 0,
            chunk: Bytes::new(),
            prefetch: None,
            chunk_size: self.read_chunk_size as u64,
        }))
    }

    fn read_all(&self, path: &str) -> Result<Bytes> {
        let (location, store) = self.resolve(path)?;
        let key = location.object_path(path)?;
        block_on(
            async move { store.get_opts(&key, GetOptions::new()).await?.bytes().await },
            || format!("reading {path}"),
        )?
        .map_err(|e| store_error("reading", path, e))
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
        let key = location.key;
        let Some(first_wild) = key.find(['*', '?', '[', '\\']) else {
            // No wildcard: the path itself, if it exists.
            return Ok(if self.exists(pattern)? {
                vec![pattern.to_string()]
            } else {
                Vec::new()
            });
        };
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
            for (dir, listing) in list_dirs(pattern, &store, frontier)? {
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

    fn exists(&self, path: &str) -> Result<bool> {
        let (location, store) = self.resolve(path)?;
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
                Err(e) => return Err(store_error("checking", path, e)),
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
            Err(e) => match list_error("checking", path, e) {
                // No bucket, so nothing in it.
                Error::NotFound { .. } => Ok(false),
                e => Err(e),
            },
        }
    }

    fn file_size(&self, path: &str) -> Result<u64> {
        let (location, store) = self.resolve(path)?;
        let key = location.object_path(path)?;
        block_on(
            async move {
                store
                    .get_opts(&key, GetOptions::new().with_head(true))
                    .await
            },
            || format!("inspecting {path}"),
        )?
        .map(|r| r.meta.size)
        .map_err(|e| store_error("inspecting", path, e))
    }

    fn create(&self, path: &str) -> Result<Box<dyn Write + Send>> {
        let (location, store) = self.resolve(path)?;
        let key = location.object_path(path)?;
        Ok(Box::new(ObjectWriter {
            url: path.to_string(),
            store,
            key,
            part_size: self.part_size,
            buffer: BytesMut::new(),
            upload: None,
            state: WriterState::Open,
        }))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let (location, store) = self.resolve(dir)?;
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
        .map_err(|e| list_error("listing", dir, e))?;
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
        let (location, store) = self.resolve(path)?;
        let key = location.object_path(path)?;
        match block_on(async move { store.delete(&key).await }, || {
            format!("deleting {path}")
        })? {
            // S3 answers 204 either way; other stores report a missing object.
            Ok(()) | Err(::object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_error("deleting", path, e)),
        }
    }
}

/// Lists each of `dirs` with a delimiter, a bounded number at a time,
/// returning them with their listings in order.
fn list_dirs(
    pattern: &str,
    store: &Arc<dyn ObjectStore>,
    dirs: Vec<Path>,
) -> Result<Vec<(Path, ListResult)>> {
    let mut out = Vec::with_capacity(dirs.len());
    let mut pending: VecDeque<(Path, Pending<::object_store::Result<ListResult>>)> =
        VecDeque::new();
    let finish = |dir: Path, p: Pending<_>, out: &mut Vec<_>| -> Result<()> {
        let listing = match p.wait(|| format!("globbing {pattern}"))? {
            Ok(listing) => listing,
            Err(e) => return Err(list_error("globbing", pattern, e)),
        };
        out.push((dir, listing));
        Ok(())
    };
    for dir in dirs {
        if pending.len() >= MAX_LISTINGS_IN_FLIGHT
            && let Some((d, p)) = pending.pop_front()
        {
            finish(d, p, &mut out)?;
        }
        let (store, prefix) = (store.clone(), dir.clone());
        let listing = Pending::spawn(async move {
            let prefix = (!prefix.is_root()).then_some(prefix);
            store.list_with_delimiter(prefix.as_ref()).await
        })?;
        pending.push_back((dir, listing));
    }
    while let Some((d, p)) = pending.pop_front() {
        finish(d, p, &mut out)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Reading.

/// Streams an object in ranged chunks, one chunk fetched ahead.
struct ObjectReader {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: Path,
    /// The version being read: every ranged read must match it.
    e_tag: Option<String>,
    size: u64,
    /// Offset of the next chunk to fetch.
    next: u64,
    /// The unread rest of the current chunk.
    chunk: Bytes,
    /// The next chunk's fetch: its length and the request.
    prefetch: Option<(u64, Pending<::object_store::Result<Bytes>>)>,
    chunk_size: u64,
}

impl ObjectReader {
    /// Starts fetching the chunk at `self.next`, if any is left.
    fn start_fetch(&mut self) -> Result<Option<(u64, Pending<::object_store::Result<Bytes>>)>> {
        if self.next >= self.size {
            return Ok(None);
        }
        let start = self.next;
        let end = (start + self.chunk_size).min(self.size);
        self.next = end;
        let (store, key) = (self.store.clone(), self.key.clone());
        let options = GetOptions::new()
            .with_range(Some(start..end))
            .with_if_match(self.e_tag.clone());
        let pending =
            Pending::spawn(async move { store.get_opts(&key, options).await?.bytes().await })?;
        Ok(Some((end - start, pending)))
    }

    /// Makes the next chunk current; false at the end of the object.
    fn advance(&mut self) -> Result<bool> {
        let fetch = match self.prefetch.take() {
            Some(fetch) => Some(fetch),
            None => self.start_fetch()?,
        };
        let Some((len, pending)) = fetch else {
            return Ok(false);
        };
        let offset = self.next - len;
        let bytes = pending
            .wait(|| format!("reading {}", self.url))?
            .map_err(|e| store_error(&format!("reading (at offset {offset})"), &self.url, e))?;
        if bytes.len() as u64 != len {
            return Err(Error::FailedPrecondition(format!(
                "reading {} at offset {offset}: asked for {len} bytes, got {}; \
                 the object changed while it was being read",
                self.url,
                bytes.len()
            )));
        }
        // Fetch the following chunk while this one is consumed.
        self.prefetch = self.start_fetch()?;
        self.chunk = bytes;
        Ok(true)
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.chunk.is_empty() {
            if !self.advance().map_err(to_io)? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

// ---------------------------------------------------------------------------
// Writing.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterState {
    Open,
    /// Uploaded by a flush; the object is immutable now.
    Uploaded,
    /// An upload failed; the object was not written.
    Failed,
}

/// A multipart upload in progress.
struct Upload {
    upload: Box<dyn MultipartUpload>,
    in_flight: VecDeque<Pending<::object_store::Result<()>>>,
}

/// Buffers an object and uploads it on `flush()`: one `PUT` if it fits in a
/// part, else a multipart upload whose parts go out as they fill.
struct ObjectWriter {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: Path,
    part_size: usize,
    buffer: BytesMut,
    upload: Option<Upload>,
    state: WriterState,
}

impl ObjectWriter {
    fn check_open(&self) -> Result<()> {
        match self.state {
            WriterState::Open => Ok(()),
            WriterState::Uploaded => Err(Error::FailedPrecondition(format!(
                "writing {}: the object was already uploaded by flush(); \
                 objects are immutable, so write everything before flushing",
                self.url
            ))),
            WriterState::Failed => Err(Error::FailedPrecondition(format!(
                "writing {}: an earlier upload error left nothing written",
                self.url
            ))),
        }
    }

    /// Sends `part` as the next part, starting the multipart upload if
    /// needed and waiting for the oldest part when too many are in flight.
    fn send_part(&mut self, part: Bytes) -> Result<()> {
        if self.upload.is_none() {
            let (store, key) = (self.store.clone(), self.key.clone());
            let upload = block_on(
                async move {
                    store
                        .put_multipart_opts(&key, PutMultipartOptions::default())
                        .await
                },
                || format!("writing {}", self.url),
            )?
            .map_err(|e| store_error("starting the upload of", &self.url, e))?;
            self.upload = Some(Upload {
                upload,
                in_flight: VecDeque::new(),
            });
        }
        let url = self.url.clone();
        let upload = self.upload.as_mut().expect("started above");
        while upload.in_flight.len() >= MAX_PARTS_IN_FLIGHT {
            if let Some(oldest) = upload.in_flight.pop_front() {
                oldest
                    .wait(|| format!("writing {url}"))?
                    .map_err(|e| store_error("uploading a part of", &url, e))?;
            }
        }
        let part = upload.upload.put_part(PutPayload::from(part));
        upload.in_flight.push_back(Pending::spawn(part)?);
        Ok(())
    }

    fn write_buffered(&mut self, data: &[u8]) -> Result<()> {
        self.check_open()?;
        self.buffer.extend_from_slice(data);
        while self.buffer.len() >= self.part_size {
            let part = self.buffer.split_to(self.part_size).freeze();
            if let Err(e) = self.send_part(part) {
                self.abort();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Uploads everything written: one `PUT`, or the last part and the
    /// multipart completion.
    fn upload(&mut self) -> Result<()> {
        let data = std::mem::take(&mut self.buffer).freeze();
        if self.upload.is_none() {
            let (store, key) = (self.store.clone(), self.key.clone());
            return block_on(
                async move {
                    store
                        .put_opts(&key, PutPayload::from(data), PutOptions::default())
                        .await
                },
                || format!("writing {}", self.url),
            )?
            .map(|_| ())
            .map_err(|e| store_error("uploading", &self.url, e));
        }
        if !data.is_empty() {
            self.send_part(data)?;
        }
        // Wait for the parts while the upload stays in `self`, so an error
        // leaves it there for `abort`.
        if let Some(upload) = self.upload.as_mut() {
            while let Some(part) = upload.in_flight.pop_front() {
                part.wait(|| format!("writing {}", self.url))?
                    .map_err(|e| store_error("uploading a part of", &self.url, e))?;
            }
        }
        let Some(Upload { mut upload, .. }) = self.upload.take() else {
            return Ok(());
        };
        let (upload, result) = block_on(
            async move {
                let result = upload.complete().await;
                (upload, result)
            },
            || format!("writing {}", self.url),
        )?;
        if let Err(e) = result {
            self.upload = Some(Upload {
                upload,
                in_flight: VecDeque::new(),
            });
            return Err(store_error("completing the upload of", &self.url, e));
        }
        Ok(())
    }

    /// Abandons the object: aborts a multipart upload (so its parts are not
    /// billed forever) and drops the buffer. Best effort.
    fn abort(&mut self) {
        self.state = WriterState::Failed;
        self.buffer = BytesMut::new();
        if let Some(Upload {
            mut upload,
            in_flight,
        }) = self.upload.take()
        {
            drop(in_flight);
            let _ = block_on(async move { upload.abort().await }, String::new);
        }
    }
}

impl Write for ObjectWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_buffered(data).map_err(to_io)?;
        Ok(data.len())
    }

    /// Uploads the object (the first call; later ones do nothing). The
    /// object appears only now, complete.
    fn flush(&mut self) -> io::Result<()> {
        if self.state == WriterState::Uploaded {
            return Ok(());
        }
        self.check_open().map_err(to_io)?;
        match self.upload() {
            Ok(()) => {
                self.state = WriterState::Uploaded;
                Ok(())
            }
            Err(e) => {
                self.abort();
                Err(to_io(e))
            }
        }
    }
}

impl Drop for ObjectWriter {
    /// Without a flush nothing is uploaded: an unfinished object (a writer
    /// dropped by an error or a panic) must not look like a complete one.
    fn drop(&mut self) {
        if self.state == WriterState::Open {
            self.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use ::object_store::memory::InMemory;

    use super::*;

    fn memory_fs() -> (ObjectStoreFileSystem, Arc<InMemory>) {
        let store = Arc::new(InMemory::new());
        let fs = ObjectStoreFileSystem::without_env()
            .with_store("s3://bucket", store.clone())
            .unwrap()
            .with_read_chunk_size(7)
            .with_part_size(10);
        (fs, store)
    }

    fn write(fs: &ObjectStoreFileSystem, url: &str, data: &[u8]) {
        let mut w = fs.create(url).unwrap();
        w.write_all(data).unwrap();
        w.flush().unwrap();
    }

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
        assert_eq!(fs.options.len(), 4);
        for bad in ["aws_no_such_key", "endpoint"] {
            let err = ObjectStoreFileSystem::without_env()
                .with_option(bad, "x")
                .unwrap_err();
            assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    #[test]
    fn reads_stream_in_chunks() {
        let (fs, _) = memory_fs();
        let data: Vec<u8> = (0..100u8).collect();
        write(&fs, "s3://bucket/d/x.bin", &data);
        assert_eq!(fs.file_size("s3://bucket/d/x.bin").unwrap(), 100);
        assert_eq!(&fs.read_all("s3://bucket/d/x.bin").unwrap()[..], &data[..]);
        let mut got = Vec::new();
        let mut r = fs.open("s3://bucket/d/x.bin").unwrap();
        // Odd-sized reads straddle the 7-byte chunks.
        let mut buf = [0u8; 3];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, data);
        // Empty objects read as empty.
        write(&fs, "s3://bucket/empty", b"");
        let mut s = String::new();
        fs.open("s3://bucket/empty")
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn replaced_object_is_an_error_not_a_mix() {
        let (fs, _) = memory_fs();
        write(&fs, "s3://bucket/x", &[1u8; 30]);
        let mut r = fs.open("s3://bucket/x").unwrap();
        let mut buf = [0u8; 7];
        r.read_exact(&mut buf).unwrap();
        write(&fs, "s3://bucket/x", &[2u8; 30]);
        // The prefetched chunk may still be the old version; then it fails.
        let err = r.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("s3://bucket/x"), "{err}");
        assert!(err.to_string().contains("changed"), "{err}");
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
    fn writes_upload_on_flush_only() {
        let (fs, store) = memory_fs();
        // Dropped without flush: nothing appears, even past one part.
        let mut w = fs.create("s3://bucket/dropped").unwrap();
        w.write_all(&[0u8; 25]).unwrap();
        drop(w);
        assert!(!fs.exists("s3://bucket/dropped").unwrap());

        // 25 bytes with 10-byte parts: a multipart upload of 3 parts.
        let data: Vec<u8> = (0..25u8).collect();
        let mut w = fs.create("s3://bucket/multi").unwrap();
        for piece in data.chunks(4) {
            w.write_all(piece).unwrap();
        }
        assert!(!fs.exists("s3://bucket/multi").unwrap());
        w.flush().unwrap();
        w.flush().unwrap();
        assert_eq!(&fs.read_all("s3://bucket/multi").unwrap()[..], &data[..]);
        let err = w.write_all(b"more").unwrap_err();
        assert!(err.to_string().contains("immutable"), "{err}");
        drop(w);

        // Exactly one part: still multipart, nothing left for the end.
        write(&fs, "s3://bucket/ten", &data[..10]);
        assert_eq!(&fs.read_all("s3://bucket/ten").unwrap()[..], &data[..10]);
        // Under one part: a single PUT.
        write(&fs, "s3://bucket/small", b"hi");
        let got = block_on(
            async move {
                store
                    .get_opts(&Path::from("small"), GetOptions::new())
                    .await?
                    .bytes()
                    .await
            },
            String::new,
        )
        .unwrap()
        .unwrap();
        assert_eq!(&got[..], b"hi");
    }

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
    fn object_store_urls_dispatch_here() {
        for url in [
            "s3://b/k",
            "s3a://b/k",
            "gs://b/k",
            "az://c/k",
            "abfss://c@a.dfs.core.windows.net/k",
        ] {
            assert!(is_object_store_scheme(scheme(url).unwrap()), "{url}");
        }
        assert!(!is_object_store_scheme("hdfs"));
        assert!(!is_object_store_scheme("file"));
    }

    #[test]
    fn credential_failures_are_configuration_errors() {
        let token = ::object_store::Error::Generic {
            store: "GCS",
            source: "Error performing token request: 403 Forbidden".into(),
        };
        let err = store_error("reading", "gs://b/x", token);
        assert!(matches!(err, Error::FailedPrecondition(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("gs://b/x") && msg.contains("no credentials"),
            "{msg}"
        );
        assert!(msg.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{msg}");
        assert_eq!(to_io(err).kind(), io::ErrorKind::PermissionDenied);

        let network = ::object_store::Error::Generic {
            store: "S3",
            source: "Error performing GET http://h/b/x: connection reset".into(),
        };
        let err = store_error("reading", "s3://b/x", network);
        assert!(matches!(err, Error::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("s3://b/x"), "{err}");
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
