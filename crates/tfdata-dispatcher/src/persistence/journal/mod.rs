//! The dispatcher journal (spec §6.3): in fault-tolerant mode every state
//! change is one `Update`, written to `<work_dir>/tf_data_dispatcher_journal/`
//! as a TFRecord and made durable before the RPC that caused it is answered.
//! [`open`] recovers the state a start needs and returns the writer for the
//! new run. Two layouts, one per kind of [`WorkDir`]:
//!
//! # Local directories (TensorFlow's layout)
//!
//! Updates are appended to `journal_<n>`; each group (the updates of the
//! RPCs committed together, see `dispatcher::txn`) is one `write` and one
//! `fdatasync`. Each start replays all files in order and then writes a new
//! file, `journal_<largest n + 1>` (compactions counted). The numbers are
//! consecutive but for the one gap a crash during a compaction can leave
//! (see `journals_to_replay`).
//!
//! Replay is strict: a record that fails its CRC or does not parse refuses
//! the start with an error naming the file and offset. The one exception is a
//! torn final record in the newest file (a crash mid-write), which was never
//! acknowledged to anyone: it is dropped with a warning.
//!
//! Compaction keeps replay short: [`JournalWriter::compact`] writes the whole
//! state as `snapshot_<m>` (atomically: a temporary file, synced, renamed),
//! continues in `journal_<m>`, and deletes older files. A start loads the
//! newest compaction and replays only the journal files from its number on.
//! (A compaction's file keeps the name `snapshot_<m>` it has always had, so
//! existing work_dirs restore; "snapshot" otherwise means `distributed_save`.)
//!
//! # Object stores (immutable segments)
//!
//! Objects cannot be appended to, so every group of updates is its own
//! object, `journal_<run>_<seq>`, uploaded with one `PUT` (one TFRecord per
//! `Update`). `<run>` plays the role of the local file number (one per start
//! or compaction) and `<seq>` counts the run's segments from 0. Numbers are
//! written in decimal without padding and parsed when listing, so replay
//! order is (run, seq) numerically, not the store's listing order.
//!
//! A `PUT` is atomic — the object appears whole or not at all — so there are
//! no torn tails: any record that fails its CRC, is truncated or does not
//! parse refuses the start naming the object. A missing segment inside a run
//! (`journal_4_7` present but `journal_4_6` not) is a gap in acknowledged
//! history and refuses the start too; a run with no segments is simply a
//! start that changed nothing. Nothing is written at start: the first update
//! of a run creates its first segment.
//!
//! Compaction uploads `snapshot_<m>` with one `PUT` (atomic, so no temporary
//! object), continues in run `m`, and then deletes the objects it made
//! redundant (runs and compactions numbered below `m`) on a background thread,
//! so the RPC that triggered it waits for one upload only. A start loads the
//! newest compaction and replays the segments of runs `>= m`, ignoring older
//! leftovers (a deletion interrupted by a crash is finished by the next
//! compaction).
//!
//! The modules: `format` (the TFRecord-framed records and the compaction's
//! file name), `local` and `object_store` (one per layout), `writer` (the
//! [`JournalWriter`] over either, with the leader lease's fence checks) and
//! `read_ahead` (a standby's copy of an object-store journal).

mod format;
mod local;
mod object_store;
mod read_ahead;
mod writer;

use tfdata_core::Result;
use tfdata_proto::data::Update;
use tfdata_proto::tfdata::compaction::CompactedState;

use crate::persistence::leader_lease::Fence;
use crate::persistence::work_dir::WorkDir;
use writer::Backend;

pub use read_ahead::{PREFETCH_MAX_BYTES, Prefetched};
pub use writer::JournalWriter;

/// The directory name TensorFlow uses (marked load-bearing in its sources).
pub const JOURNAL_DIR: &str = "tf_data_dispatcher_journal";

/// What a start finds in the journal directory.
pub struct Recovered {
    /// The state the newest compaction wrote, if any, with the file or
    /// object it was read from.
    pub compaction: Option<(String, CompactedState)>,
    /// The updates after it, in order.
    pub updates: Vec<Update>,
    pub writer: JournalWriter,
}

/// What a backend reads at a start: the newest compaction, with the file
/// or object it was read from, and the updates after it.
struct History {
    compaction: Option<(String, CompactedState)>,
    updates: Vec<Update>,
}

/// Reads the journal under `work_dir` (the newest compaction and the updates
/// after it) and opens the next run for writing. Blocking: call it off the
/// async threads.
pub fn open(work_dir: &WorkDir) -> Result<Recovered> {
    open_fenced(work_dir, None)
}

/// [`open`] for a dispatcher that leads under a leader lease: the writer
/// calls [`Fence::check`] immediately before every group write and
/// compaction (with the writer's lock held) and refuses the write with
/// [`Error::Unavailable`](tfdata_core::Error::Unavailable) once the lease is lost, so a deposed leader adds
/// nothing to the journal. (The check costs no I/O. It cannot stop a write
/// already past its check when the process is paused: see
/// docs/fault-tolerance.md.) Call it only after the lease is won: opening
/// a local journal creates the run's file.
pub fn open_fenced(work_dir: &WorkDir, fence: Option<Fence>) -> Result<Recovered> {
    open_prefetched(work_dir, fence, None)
}

/// [`open_fenced`], reading the objects `prefetched` holds from it rather
/// than from the store: a standby's takeover then only reads the journal's
/// tail (object stores; a local journal is read from disk).
pub fn open_prefetched(
    work_dir: &WorkDir,
    fence: Option<Fence>,
    prefetched: Option<&Prefetched>,
) -> Result<Recovered> {
    if let Some(fence) = &fence {
        writer::check_fence(fence)?;
    }
    let (history, backend) = match work_dir {
        WorkDir::Local(dir) => {
            let (history, journal) = local::open(dir)?;
            (history, Backend::Local(journal))
        }
        WorkDir::ObjectStore(dir) => {
            let held = prefetched.map(|p| p as &dyn object_store::HeldObjects);
            let (history, journal) =
                object_store::open(dir.subdir(JOURNAL_DIR), held, fence.is_some())?;
            (history, Backend::Objects(journal))
        }
    };
    Ok(Recovered {
        compaction: history.compaction,
        updates: history.updates,
        writer: JournalWriter::new(backend, fence),
    })
}
