//! The tf.data service worker.
//!
//! * [`config`]: `WorkerConfig`, TensorFlow's fields and defaults, validated;
//! * [`producer`]: a task's pipeline on its own thread, feeding a bounded
//!   [`producer::buffer`] (elements and bytes), and the encoding of what is
//!   served, off the RPC runtime when large;
//! * [`strategy`]: how a task serves its producer's elements: first come,
//!   first served, round robin (coordinated reads), or the cross-trainer
//!   cache; each borrows the producer and none knows of the others;
//! * [`task`]: a task runner: the producer and the strategies of one task;
//! * [`worker`]: the `Worker`: registration and heartbeats with the
//!   dispatcher, task bookkeeping, completion reports, and what the
//!   `WorkerService` RPCs ask of it, with no tonic types;
//! * [`grpc`]: the tonic adapter, `WorkerService` over the `Worker`: wire
//!   messages in and out, errors as status codes;
//! * `get_element`: `GetElement`'s logic: the request validated, the task's
//!   strategy for it, the completion its first end reports;
//! * `task_pipeline`: a task's pipeline loaded (its definition checked, its
//!   `DatasetDef` found, split providers, compression);
//! * `task_table`: the tasks the worker runs and the ones the dispatcher
//!   deleted, under one lock;
//! * [`heartbeats`]: the heartbeat loop and its schedule: a long poll
//!   against our dispatcher (news reaches the worker at once), every
//!   `heartbeat_interval` against TensorFlow's;
//! * [`stream`]: tfdata's own element stream for tfdata readers (batches
//!   under credit-based flow control), next to `GetElement`;
//! * [`splits`]: remote split providers (distributed_epoch);
//! * [`lane_task`]: a deterministic read's task (no pipeline of its own;
//!   its loaded definition) and the worker's bound on lane streams, which
//!   `stream::lane` serves, one pipeline instance per stream;
//! * [`releases`]: the splits the dispatcher acknowledged as delivered,
//!   told to each of a task's element streams for its reader to forget;
//! * [`snapshot`]: distributed-snapshot stream writers, one thread per
//!   stream the dispatcher assigns;
//! * `pipeline`: a task's or stream's dataset from its `DatasetDef`;
//! * [`drain`]: draining before a stop (SIGTERM): no new tasks or splits,
//!   the splits in hand finished and reported, bounded by a timeout;
//! * [`metrics`]: every metric the worker exports, one registry per worker;
//! * [`observe`]: the pace figures of heartbeats and the metrics' gauges,
//!   computed from the tasks when asked;
//! * `autocache`: a task's autocache profile (issue 36), measured before
//!   its pipeline starts when the dispatcher asks, and kept for the
//!   heartbeats while the task lives;
//! * [`server`]: [`serve`] (and [`serve_draining`]), with the admin HTTP
//!   endpoint and gRPC health, and the in-process [`WorkerServer`].
//!
//! Module dependencies point one way: `server → {drain, grpc → get_element,
//! stream, heartbeats} → worker → {task_pipeline → {pipeline, autocache}, autocache, task_table, snapshot →
//! pipeline, observe → metrics}`, `{worker, task_pipeline, task_table,
//! observe, stream} → task → {lane_task → pipeline, strategy → producer → pipeline, splits →
//! releases}` (and `{get_element, stream} → task_table`, `{drain,
//! task_pipeline, worker} → splits`, `stream → releases`).
//!
//! The worker reaches the dispatcher through `tfdata-client`'s
//! `DispatcherClient`; it never depends on the dispatcher crate.

mod autocache;
pub mod config;
pub mod drain;
mod get_element;
pub mod grpc;
pub mod heartbeats;
pub mod lane_task;
pub mod metrics;
pub mod observe;
mod pipeline;
pub mod producer;
pub mod releases;
pub mod server;
pub mod snapshot;
pub mod splits;
pub mod strategy;
pub mod stream;
pub mod task;
mod task_pipeline;
mod task_table;
pub mod worker;

pub use config::WorkerConfig;
pub use server::{Drain, WorkerServer, serve, serve_draining};
