//! Distributed snapshots (`distributed_save`) on disk, in TensorFlow 2.21's
//! layout, so either side can write what the other reads:
//!
//! * [`layout`]: the paths and file names of a snapshot directory, and the
//!   compression its metadata names;
//! * [`metadata`]: `snapshot.metadata`, TensorFlow's text form of
//!   `DistributedSnapshotMetadata`, and `ERROR` files (a `StatusProto`);
//! * [`files`]: small files written whole or not at all;
//! * [`chunk`]: chunk files, [`ChunkWriter`](chunk::ChunkWriter) and
//!   [`ChunkReader`](chunk::ChunkReader);
//! * [`load`]: the engine's `load` source (`Dataset::load`), reading a
//!   snapshot (also while it is written) and splitting it by chunk;
//! * [`saved`]: the (non-distributed) format `Dataset.save` writes;
//! * [`testing`]: whole snapshot directories written without a service.
//!
//! The dispatcher (stream assignment, split files), the worker (stream
//! writers) and the engine's `load` source all go through this module; it
//! knows nothing of gRPC.

pub mod chunk;
pub mod files;
pub mod layout;
pub mod load;
pub mod metadata;
pub mod saved;
pub mod testing;
