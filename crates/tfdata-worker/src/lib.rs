//! The tf.data service worker.
//!
//! * [`config`]: `WorkerConfig`, TensorFlow's fields and defaults, validated;
//! * [`task`]: a task runner: the task's pipeline on its own thread, feeding a
//!   bounded buffer that `GetElement` pops (first come, first served);
//! * [`service`]: registration and heartbeats with the dispatcher, task
//!   bookkeeping, completion reports, and the `WorkerService` RPCs;
//! * [`buffer`]: a task's element buffer, bounded in elements and bytes;
//! * [`stream`]: tfdata's own element stream for tfdata readers (batches
//!   under credit-based flow control), next to `GetElement`;
//! * [`server`]: [`serve`] and the in-process [`WorkerServer`].
//!
//! The worker reaches the dispatcher through `tfdata-client`'s
//! `DispatcherClient`; it never depends on the dispatcher crate.

pub mod buffer;
pub mod config;
pub mod cross_trainer;
pub mod round_robin;
pub mod server;
pub mod service;
pub mod splits;
pub mod stream;
pub mod task;

pub use config::WorkerConfig;
pub use server::{WorkerServer, serve};
