//! Each iteration's task list kept encoded for reader heartbeats (see
//! `clients`): the encoding, and when a kept list is still current.

use bytes::{Bytes, BytesMut};
use tfdata_core::TaskId;
use tfdata_proto::data as wire;

use crate::state::{DispatcherState, Iteration, Task};

/// An iteration's task list as a heartbeat answers it: the `TaskInfo`s of
/// `tasks`, in order, encoded as `ClientHeartbeatResponse.task_info`
/// entries (field 1). Tasks never change once created, so the list is
/// current while the iteration's task ids are the same.
#[derive(Debug, Clone)]
pub(crate) struct EncodedTaskList {
    tasks: Vec<TaskId>,
    encoded: Bytes,
}

impl EncodedTaskList {
    /// Whether the list still describes `it` (same task ids, same order).
    pub(crate) fn is_current(&self, it: &Iteration) -> bool {
        self.tasks == it.tasks
    }

    /// The encoded `task_info` entries.
    pub(crate) fn encoded(&self) -> &Bytes {
        &self.encoded
    }
}

/// How a reader's heartbeat describes a task (spec §4.4 `TaskInfo`).
pub(crate) fn task_info(t: &Task) -> wire::TaskInfo {
    wire::TaskInfo {
        worker_address: t.worker_address.to_string(),
        transfer_servers: t.transfer_servers.clone(),
        worker_tags: t.worker_tags.clone(),
        task_id: t.id.0,
        iteration_id: t.iteration_id.0,
        worker_uid: t.worker_uid,
        starting_round: t.starting_round,
    }
}

/// Encodes `it`'s task list (see [`EncodedTaskList`]).
pub(crate) fn encode_task_list(state: &DispatcherState, it: &Iteration) -> EncodedTaskList {
    let mut buf = BytesMut::new();
    for t in it.tasks.iter().filter_map(|t| state.task(*t)) {
        prost::encoding::message::encode(1, &task_info(t), &mut buf);
    }
    EncodedTaskList {
        tasks: it.tasks.clone(),
        encoded: buf.freeze(),
    }
}
