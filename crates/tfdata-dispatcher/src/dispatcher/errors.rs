//! Errors more than one concern answers with.

use tfdata_core::{Error, IterationClientId};

pub(crate) fn unknown_dataset(id: &str) -> Error {
    Error::NotFound {
        what: "dataset",
        id: format!("{id} (datasets must be registered with register_dataset before use)"),
    }
}

pub(crate) fn unknown_client(client: IterationClientId) -> Error {
    Error::NotFound {
        what: "iteration client id",
        id: format!(
            "{client}: unknown to the dispatcher. This can be caused by a dispatcher restart \
             without fault tolerance (set work_dir and fault_tolerant_mode)"
        ),
    }
}

/// Spawned blocking work that panicked or was cancelled.
pub(crate) fn task_failed(what: &str, e: tokio::task::JoinError) -> Error {
    Error::Internal(format!("{what} task failed: {e}"))
}
