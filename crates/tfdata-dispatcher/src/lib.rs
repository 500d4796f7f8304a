//! The tf.data service dispatcher.
//!
//! * [`config`]: `DispatcherConfig`, TensorFlow's fields and defaults, validated;
//! * [`state`]: the dispatcher's state as a deterministic state machine that
//!   changes only through [`state::DispatcherState::apply`] of one journal
//!   `Update` at a time;
//! * [`invariants`]: what every state `apply` produces satisfies, checked
//!   before a compaction snapshot is restored;
//! * [`work_dir`]: the `work_dir` as a local directory or an object-store
//!   prefix;
//! * [`journal`]: the fault-tolerant mode's journal in `work_dir` (appended
//!   files locally, immutable segments on object stores);
//! * [`leader_lease`]: the leader lease over the work_dir (conditional
//!   writes on object stores, a file lock locally) and the generation
//!   fence a deposed leader's writes fail on (issue 17);
//! * [`high_availability`]: several dispatchers on one `work_dir`, the
//!   lease's holder leading and the others answering `UNAVAILABLE`
//!   behind gates until they take over;
//! * [`store`]: where registered dataset definitions live (memory, or
//!   `<work_dir>/datasets/<id>` TFRecord files or objects);
//! * [`distributed_snapshot`]: `distributed_save` snapshots being written,
//!   their streams and splits, recovered from their files;
//! * [`dispatcher`]: the RPCs' logic, one module per concern, as transactions
//!   over the state journaled with group commit;
//! * [`grpc`]: the tonic adapter of TensorFlow's `DispatcherService`, each
//!   call in a span with the ids its request names (`request_span`);
//! * [`grpc_heartbeat`]: `ClientHeartbeat` answered in front of it, from the
//!   iterations' task lists kept encoded;
//! * [`metrics`]: every metric the dispatcher exports, in one registry per
//!   dispatcher;
//! * [`http`]: the admin HTTP endpoint's routes (`/metrics`, `/healthz`,
//!   `/readyz`);
//! * [`status_page`]: the status page (`/`) and its JSON (`/api/status`)
//!   merged into them, with the bottleneck verdict;
//! * [`server`]: [`serve`] (the library function the CLI and tests call) and the
//!   in-process [`DispatchServer`], with what both modes serve alike in
//!   `serving` (health, admin endpoint, maintenance).

pub mod config;
pub mod dispatcher;
pub mod distributed_snapshot;
pub mod grpc;
pub mod grpc_heartbeat;
pub mod high_availability;
pub mod http;
pub mod invariants;
pub mod journal;
pub mod leader_lease;
pub mod metrics;
mod request_span;
pub mod server;
mod serving;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod status_page;
pub mod store;
pub mod tf_graph;
pub mod work_dir;

pub use config::DispatcherConfig;
pub use dispatcher::{Clock, Dispatcher, SystemClock};
pub use grpc::DispatcherGrpc;
pub use server::{DispatchServer, serve};
