//! Persistence: what the dispatcher keeps in its `work_dir`, and who may
//! write it.
//!
//! * [`work_dir`]: the `work_dir` as a local directory or an object-store
//!   prefix;
//! * [`journal`]: the fault-tolerant mode's journal in `work_dir` (appended
//!   files locally, immutable segments on object stores);
//! * [`compaction`]: the state written whole, so a restart replays only the
//!   journal after it;
//! * [`leader_lease`]: the leader lease over the work_dir (conditional
//!   writes on object stores, a file lock locally) and the generation
//!   fence a deposed leader's writes fail on (issue 17);
//! * [`store`]: where registered dataset definitions live (memory, or
//!   `<work_dir>/datasets/<id>` TFRecord files or objects).

pub mod compaction;
pub mod journal;
pub mod leader_lease;
pub mod store;
pub mod work_dir;
