//! The client side of tf.data service.
//!
//! * [`DispatcherClient`]: every `DispatcherService` call, with the protocol
//!   version checked once per client (used by readers and by workers);
//! * [`distribute`], [`register_dataset`], [`from_dataset_id`]: TensorFlow's
//!   Python API, as a [`DistributedDataset`] whose iterators read elements
//!   from the workers, blocking ([`DistributedDataset::iter`]) or as an async
//!   [`futures::Stream`] ([`DistributedDataset::stream`]);
//! * [`received`]: elements as a reader receives them, each buffer provably
//!   its own, which is what lets the Python layer hand them out as writable
//!   numpy arrays without a copy;
//! * [`runtime`]: the runtime behind the blocking facade;
//! * [`metrics`]: the reader's metrics (process-wide, [`metrics::encode`])
//!   and each iterator's starvation figures, which its heartbeats carry.

pub mod checkpoint;
mod deterministic;
pub mod dispatcher;
pub mod distribute;
mod fetch;
mod iteration;
pub mod metrics;
pub mod options;
mod read_options;
mod rounds;
pub mod runtime;
pub mod save;

pub use deterministic::{
    DEFAULT_REORDER_WINDOW_BYTES, DEFAULT_REORDER_WINDOW_ELEMENTS, Deterministic, MAX_LANES,
    merge_checkpoints,
};
pub use dispatcher::DispatcherClient;
pub use distribute::{
    Distribute, DistributedDataset, ElementIterator, ElementStream, FromDatasetId, distribute,
    from_dataset_id, register_dataset, register_dataset_async,
};
pub use fetch::received;
pub use options::{Compression, ProcessingMode, TargetWorkers};
pub use save::{
    SnapshotProgress, distributed_save, distributed_save_async, snapshot_progress,
    wait_for_snapshot,
};
