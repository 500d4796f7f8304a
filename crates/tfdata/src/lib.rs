//! tf.data service in Rust, wire-compatible with TensorFlow 2.21 (protocol
//! version 9). The API mirrors `tf.data.experimental.service`:
//!
//! ```no_run
//! use tfdata::{DispatchServer, DispatcherConfig, WorkerServer, WorkerConfig, Dataset,
//!              ProcessingMode, distribute};
//! let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
//! let worker = WorkerServer::new(WorkerConfig::new(dispatcher.address()))?;
//! let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
//!     .apply(&Dataset::range(10))?;
//! let values: Vec<i64> = ds.iter()?
//!     .map(|e| e?.components[0].to_scalar::<i64>())
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(values, (0..10).collect::<Vec<_>>());
//! # Ok::<(), tfdata::Error>(())
//! ```

pub use tfdata_client::{
    Compression, Deterministic, DispatcherClient, Distribute, DistributedDataset, ElementIterator,
    ElementStream, FromDatasetId, ProcessingMode, SnapshotProgress, TargetWorkers, distribute,
    distributed_save, distributed_save_async, from_dataset_id, merge_checkpoints, register_dataset,
    register_dataset_async, snapshot_progress, wait_for_snapshot,
};
pub use tfdata_core::{DType, Element, Error, Result, Tensor};
pub use tfdata_dataset::{
    Dataset, FunctionRef, Shape, Structure, TensorSpec, register_dataset_function,
    register_function, register_function_with_spec, register_predicate,
};
pub use tfdata_dispatcher::{DispatchServer, DispatcherConfig};
pub use tfdata_worker::{WorkerConfig, WorkerServer};

/// Opt-in TLS, mutual TLS and a shared bearer token (docs/security.md).
/// `DispatcherConfig::security` and `WorkerConfig::security` take a
/// [`TransportSecurity`](security::TransportSecurity); readers take one
/// with `.security(...)` or default to the `TFDATA_TLS_*` /
/// `TFDATA_AUTH_TOKEN*` environment variables.
pub mod security {
    pub use tfdata_rpc::security::{
        CertKey, ENV_AUTH_TOKEN, ENV_AUTH_TOKEN_FILE, ENV_TLS_CA, ENV_TLS_CERT,
        ENV_TLS_CLIENT_CERT, ENV_TLS_CLIENT_KEY, ENV_TLS_KEY, ENV_TLS_REQUIRE_CLIENT_CERT, Secret,
        SecuritySettings, TlsConfig, TransportSecurity,
    };
}

/// The dispatcher's scaling controller (docs/operations.md, "Scaling"):
/// the pure state machine `GetScalingAdvice` answers from, for simulations
/// and tools that drive it themselves.
pub mod scaling {
    pub use tfdata_dispatcher::scaling::{
        Bounds, DEFAULT_SCALING_PERIOD, Decision, Direction, FED_THRESHOLD, MAX_WAIT_PERIODS,
        MIN_IMPROVEMENT, Observation, Outcome, Phase, RECHECK_FACTOR, STARVE_THRESHOLD,
        ScalingController, estimate,
    };
}

/// This process's reader metrics (`tfdata_reader_*`) as OpenMetrics text,
/// for a trainer's own metrics endpoint (docs/operations.md).
pub fn reader_metrics() -> String {
    tfdata_client::metrics::encode()
}

/// The tf.data service protocol version spoken (TensorFlow 2.21's).
pub const PROTOCOL_VERSION: i64 = tfdata_proto::DATA_SERVICE_VERSION;
