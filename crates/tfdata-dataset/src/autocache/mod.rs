//! Autocache's engine half (issue 36): which points of a pipeline may be
//! cached, what names a cache, where it lives, how a pipeline reads it,
//! what each point costs, and which point is worth it. The service half
//! (when to profile, starting the snapshot, serving jobs from it) is the
//! dispatcher's and the worker's; everything here is a function of a
//! pipeline, files and measurements, with no gRPC and no state.
//!
//! * [`analyse`]: the candidate points of a `PipelineDef` (the outputs of
//!   deterministic prefixes made of element-wise and order-only ops), and in
//!   one sentence why the chain stops where it does;
//! * [`fingerprint()`] ([`mod@fingerprint`]): SHA-256 of a candidate's prefix
//!   (its canonical bytes) and of the files it names (path, size, mtime);
//!   [`fingerprints`] all candidates' at once, each file looked up once;
//! * [`cache_path`], [`stale_caches`], [`drop_cache`], [`is_complete`]
//!   ([`layout`]): `<cache_root>/<prefix fp>/<files fp>/`, one distributed
//!   snapshot in TensorFlow's layout, complete when its `DONE` exists;
//! * [`rewrite`]: the pipeline with the candidate's subtree replaced by a
//!   `load` of the cache;
//! * [`profile()`] (runs on a worker): per candidate, compute cost per
//!   element, read-back cost per element and bytes per element, from a
//!   bounded sample written and read with the snapshot chunk format;
//! * [`choose`]: the point whose caching saves the most, if any pays.
//!
//! **API notes for the service** (deviations from the brief's sketch, each
//! forced by I/O that can fail):
//! * file access goes through a resolver, `fs: &dyn Fn(&str) ->
//!   Result<Arc<dyn FileSystem>>` ([`Resolver`]): pass
//!   `&tfdata_dataset::io::file_system` (local paths and object stores);
//! * [`stale_caches`] returns `Result<Vec<String>>` (it lists a directory);
//! * [`rewrite`] returns `Result<PipelineDef>` (the candidate must come from
//!   the same pipeline; a mismatch is an error, not a panic). The `load` op
//!   it inserts carries the path only, so validating the rewritten pipeline
//!   reads `<cache>/snapshot.metadata` once: do it off the RPC threads;
//! * [`drop_cache`] deletes `DONE` first, so a cache half-deleted by a crash
//!   is never taken for complete;
//! * snapshots of autocaches use [`CACHE_COMPRESSION`] (TensorFlow's
//!   `"AUTO"`, Snappy), which [`profile()`] measures reading back.
//!
//! TensorFlow graphs (`DatasetDef.graph`) have their own analysis,
//! fingerprint and rewrite in `tfdata_graph::autocache` (this crate cannot
//! read graphs); the layout, [`profile_points`] and [`choose`] serve both.
//!
//! Architecture invariant: analysis and fingerprints never build or run the
//! pipeline (the dispatcher cannot: it does not link user functions);
//! only [`profile()`] runs it, through the `build` function its caller gives.

mod analyse;
mod choose;
pub mod fingerprint;
pub mod layout;
pub mod profile;
mod rewrite;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use tfdata_core::Result;

use crate::io::fs::FileSystem;
use crate::snapshot::layout::SnapshotCompression;

pub use analyse::{
    ACROSS_ELEMENTS, Analysis, Candidate, DETERMINISTIC_BUILTINS, ELEMENT_WISE, IN_MEMORY_SOURCES,
    SEEDED_RANDOM_BUILTINS, analyse,
};
pub use choose::{Choice, MAX_READ_TO_COMPUTE, MIN_SAVING_SECONDS_PER_ELEMENT, choose};
pub use fingerprint::{
    FINGERPRINT_VERSION, Fingerprint, MAX_FINGERPRINT_FILES, fingerprint, fingerprints,
};
pub use layout::{MAX_CACHE_FILES, cache_path, drop_cache, is_complete, stale_caches};
pub use profile::{PointCost, ProfileLimits, profile, profile_points};
pub use rewrite::rewrite;

/// Which file system serves a path or URL:
/// [`crate::io::registry::file_system`] in production, a fake in tests.
pub type Resolver<'a> = &'a dyn Fn(&str) -> Result<Arc<dyn FileSystem>>;

/// The compression of autocache snapshots: TensorFlow's `"AUTO"` (Snappy),
/// which `distributed_save` defaults to; cheap to decode, so reading a
/// cache back costs little CPU.
pub const CACHE_COMPRESSION: SnapshotCompression = SnapshotCompression::Snappy;
