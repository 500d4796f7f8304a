//! Object stores (`s3://`, `gs://`, `az://`, ...) behind the
//! [`FileSystem`](super::FileSystem) trait, so every reader (`list_files`,
//! `TFRecordDataset`, `TextLineDataset`, vocabulary files) accepts the URLs
//! TensorFlow users write, on top of the `object_store` crate.
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
//! thread waits on a channel for the result (`runtime`). Unlike
//! `Runtime::block_on`, that never panics when the caller is itself inside a
//! Tokio runtime (it only blocks that thread, as any synchronous file read
//! would).
//!
//! # Reading and writing
//!
//! [`FileSystem::open`](super::FileSystem::open) streams (`reader`): it
//! fetches the object in ranged chunks ([`DEFAULT_READ_CHUNK_SIZE`]), one
//! ahead of the reader so the network overlaps with decoding, pinned to the
//! object's ETag so an object replaced mid-read is an error rather than a
//! silent mix of two versions. [`FileSystem::create`](super::FileSystem::create)
//! buffers and uploads (`writer`) with one `PUT` when flushed, switching to
//! a multipart upload of [`DEFAULT_PART_SIZE`] parts once the data outgrows
//! one part. Objects are immutable: the upload happens on
//! `flush()` (which [`TfRecordWriter::finish`](super::TfRecordWriter::finish)
//! calls), writing after it is an error, and a writer dropped without a
//! flush uploads nothing, so a crash never leaves a truncated object that
//! looks complete.
//!
//! # Globbing (`glob`)
//!
//! Patterns follow `tf.io.gfile.glob` as for local paths (see
//! [`super::pattern`]), with `/`-separated "directories" (common prefixes). The listing starts at
//! the literal prefix before the first wildcard and descends one level per
//! pattern component with delimiter listings, so `s3://b/data/*.tfrecord`
//! lists only `data/`, however large the bucket is; sibling directories of a
//! level are listed concurrently. Results are full URLs (`scheme://bucket/`
//! and the object key), sorted.
//!
//! Keys are used as written, but `object_store` cannot express keys with
//! empty segments (`a//b`), `.` or `..` segments or control characters;
//! those are [`Error::InvalidArgument`](tfdata_core::Error::InvalidArgument).
//!
//! # Layout
//!
//! Dependencies point down this list: `global` (the process-wide
//! instance) → `file_system` ([`ObjectStoreFileSystem`]: options, one
//! client per bucket, the [`FileSystem`](super::FileSystem) methods) →
//! `glob`, `reader`, `writer` → `error` (typed request failures and
//! their conversion to tfdata's errors) → `location` (URLs) → `clouds`
//! (schemes and per-cloud client configuration); `runtime` (the I/O
//! runtime) stands apart.

mod clouds;
mod error;
mod file_system;
mod glob;
mod global;
mod location;
mod per_process;
mod reader;
mod runtime;
#[cfg(test)]
pub(crate) mod test_support;
mod writer;

pub use clouds::{SCHEMES, is_object_store_scheme};
pub use file_system::{DEFAULT_PART_SIZE, DEFAULT_READ_CHUNK_SIZE, ObjectStoreFileSystem};
pub use global::{global, set_global};
