//! The tf.data service dispatcher.
//!
//! * [`config`]: `DispatcherConfig`, TensorFlow's fields and defaults, validated;
//! * [`state`]: the dispatcher's state as a deterministic state machine that
//!   changes only through [`state::DispatcherState::apply`] of one journal
//!   `Update` at a time;
//! * [`invariants`]: what every state `apply` produces satisfies, checked
//!   before a compacted state is restored;
//! * [`persistence`]: the `work_dir` (local or an object store), the
//!   fault-tolerant mode's journal and its compaction, the leader lease and
//!   its fence, and the registered dataset definitions;
//! * [`distributed_snapshot`]: `distributed_save` snapshots being written,
//!   their streams and splits, recovered from their files;
//! * [`dispatcher`]: the RPCs' logic, one module per concern, as transactions
//!   over the state journaled with group commit;
//! * [`overview`]: the one query the status service and the status page
//!   read, as plain rows (`Dispatcher::overview` fills it);
//! * [`metrics`]: every metric the dispatcher exports, in one registry per
//!   dispatcher;
//! * [`scaling`]: the scaling controller, a pure state machine stepped
//!   every `scaling_period` (`dispatcher::scaling` feeds it and serves its
//!   advice);
//! * [`serving`]: the dispatcher on the network: the gRPC adapters, the
//!   admin HTTP endpoint and status page, [`serve`] (the library function
//!   the CLI and tests call), the in-process [`DispatchServer`] and the
//!   high-availability group.

pub mod config;
pub mod dispatcher;
pub mod distributed_snapshot;
pub mod invariants;
pub mod metrics;
pub mod overview;
pub mod persistence;
pub mod scaling;
pub mod serving;
pub mod state;
pub mod tf_graph;

pub use config::DispatcherConfig;
pub use dispatcher::{Clock, Dispatcher, SystemClock};
pub use scaling::{Bounds, Decision, Direction, Observation, Outcome, Phase, ScalingController};
pub use serving::grpc::DispatcherGrpc;
pub use serving::server::{DispatchServer, serve};
