//! The journal's writer: one group of updates per durable write, on
//! either backend, each write checked against the leader lease's fence
//! before and after it.

use std::sync::{Arc, Mutex};

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_proto::data::Update;
use tfdata_proto::tfdata::compaction::CompactedState;

use super::format::encode_record;
use super::local::LocalJournal;
use super::object_store::ObjectJournal;
use crate::persistence::leader_lease::Fence;

/// Writes updates to the current journal file or run.
#[derive(Clone)]
pub struct JournalWriter {
    current: Arc<Mutex<Backend>>,
    /// With several dispatchers on one `work_dir`: the leader lease's
    /// fence, checked right before every write (see
    /// [`open_fenced`](super::open_fenced)).
    fence: Option<Fence>,
}

/// The layout the journal is written in, one per kind of `WorkDir`.
pub(super) enum Backend {
    Local(LocalJournal),
    Objects(ObjectJournal),
}

/// After a write: if the fence no longer holds, the write may have landed
/// after a successor took over (the process was paused inside it), and
/// the successor's replay may not have seen it, so it must not be
/// acknowledged. (A write acknowledged because the fence held after it
/// landed before any takeover, so every successor replays it. One that is
/// refused here lies in a run the successor's takeover compaction
/// superseded, which no replay reads.)
fn check_written(fence: &Fence) -> Result<()> {
    fence.check().map_err(|e| {
        Error::Unavailable(format!(
            "journal write not acknowledged: the lease may have been lost while it was \
             written: {e}"
        ))
    })
}

/// The fence's verdict, as the retryable error a deposed leader answers.
pub(super) fn check_fence(fence: &Fence) -> Result<()> {
    fence
        .check()
        .map_err(|e| Error::Unavailable(format!("journal write refused: {e}")))
}

impl JournalWriter {
    pub(super) fn new(backend: Backend, fence: Option<Fence>) -> Self {
        JournalWriter {
            current: Arc::new(Mutex::new(backend)),
            fence,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Backend> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one update and waits until it is durable; see
    /// [`write_group`](Self::write_group).
    pub fn write(&self, update: &Update) -> Result<u64> {
        self.write_group(std::slice::from_ref(update))
    }

    /// Writes a group of updates as one durable write (one `write` and one
    /// `fdatasync` of the journal file, or one object with one `PUT`) and
    /// waits until it is durable. Blocking: call it off the async threads.
    /// Returns the number of records in the current file or run. An empty
    /// group writes nothing.
    pub fn write_group(&self, updates: &[Update]) -> Result<u64> {
        self.write_group_counted(updates)
            .map(|(records, _)| records)
    }

    /// [`write_group`](Self::write_group), returning the bytes written.
    pub fn write_group_bytes(&self, updates: &[Update]) -> Result<u64> {
        self.write_group_counted(updates).map(|(_, bytes)| bytes)
    }

    fn write_group_counted(&self, updates: &[Update]) -> Result<(u64, u64)> {
        let mut records = Vec::new();
        for update in updates {
            records.extend(encode_record(&update.encode_to_vec(), "a journal record")?);
        }
        let count = updates.len() as u64;
        let bytes = if count > 0 { records.len() as u64 } else { 0 };
        let mut backend = self.lock();
        if count > 0
            && let Some(fence) = &self.fence
        {
            check_fence(fence)?;
        }
        let total = match &mut *backend {
            Backend::Local(journal) if count > 0 => journal.write(&records, count),
            Backend::Objects(journal) if count > 0 => journal.write(&records, count),
            Backend::Local(journal) => Ok(journal.records()),
            Backend::Objects(journal) => Ok(journal.records()),
        }?;
        if count > 0
            && let Some(fence) = &self.fence
        {
            check_written(fence)?;
        }
        Ok((total, bytes))
    }

    /// Replaces everything written so far by `state` (the state after it,
    /// compacted): writes `snapshot_<m>` atomically, continues in
    /// `journal_<m>` (run `m` on object stores), deletes older files.
    /// Blocking; the caller must not write meanwhile. Returns the bytes of
    /// the compaction written.
    pub fn compact(&self, state: &CompactedState) -> Result<u64> {
        let record = encode_record(&state.encode_to_vec(), "a compacted state")?;
        let mut backend = self.lock();
        if let Some(fence) = &self.fence {
            check_fence(fence)?;
        }
        match &mut *backend {
            Backend::Local(journal) => journal.compact(&record),
            Backend::Objects(journal) => journal.compact(&record),
        }?;
        if let Some(fence) = &self.fence {
            check_written(fence)?;
        }
        Ok(record.len() as u64)
    }

    /// Waits until the objects the last compaction made redundant are
    /// deleted (object stores delete them in the background; a no-op
    /// locally, where compaction deletes before returning). For tests and
    /// tools that inspect the journal.
    pub fn wait_for_cleanup(&self) {
        let cleanup = match &mut *self.lock() {
            Backend::Local(_) => None,
            Backend::Objects(journal) => journal.take_cleanup(),
        };
        if let Some(cleanup) = cleanup {
            let _ = cleanup.join();
        }
    }

    /// The current file (local), or the URL the next update will be
    /// written to (object stores).
    pub fn path(&self) -> String {
        match &*self.lock() {
            Backend::Local(journal) => journal.path(),
            Backend::Objects(journal) => journal.next_segment(),
        }
    }

    /// Whether this writer writes under a leader lease's fence.
    pub fn fenced(&self) -> bool {
        self.fence.is_some()
    }

    /// Whether this writer is fenced by a leader lease that is no longer
    /// held (its writes are refused from now on).
    pub fn fenced_out(&self) -> bool {
        self.fence.as_ref().is_some_and(|f| f.check().is_err())
    }

    /// Records in the current file or run (the compaction trigger).
    pub fn records(&self) -> u64 {
        match &*self.lock() {
            Backend::Local(journal) => journal.records(),
            Backend::Objects(journal) => journal.records(),
        }
    }
}
