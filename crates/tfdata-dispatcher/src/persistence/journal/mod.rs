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
//! file, `journal_<largest n + 1>` (snapshots counted). The numbers are
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
//! newest snapshot and replays only the journal files from its number on.
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
//! redundant (runs and snapshots numbered below `m`) on a background thread,
//! so the RPC that triggered it waits for one upload only. A start loads the
//! newest snapshot and replays the segments of runs `>= m`, ignoring older
//! leftovers (a deletion interrupted by a crash is finished by the next
//! compaction).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use bytes::Bytes;
use prost::Message;
use tfdata_core::tfrecord::{self, Tail};
use tfdata_core::{Error, Result};
use tfdata_dataset::io::FileSystem;
use tfdata_proto::data::Update;
use tfdata_proto::tfdata::snapshot::DispatcherSnapshot;

use crate::persistence::leader_lease::Fence;
use crate::persistence::work_dir::{ObjectDir, WorkDir, put_object};

/// The directory name TensorFlow uses (marked load-bearing in its sources).
pub const JOURNAL_DIR: &str = "tf_data_dispatcher_journal";

/// Segments read concurrently at recovery: each is a small object, so a
/// replay is dominated by request latency, which concurrency hides.
const RECOVERY_READERS: usize = 8;

/// Writes updates to the current journal file or run.
#[derive(Clone)]
pub struct JournalWriter {
    current: Arc<Mutex<Backend>>,
    /// With several dispatchers on one `work_dir`: the leader lease's
    /// fence, checked right before every write (see [`open_fenced`]).
    fence: Option<Fence>,
}

enum Backend {
    Local(LocalJournal),
    Objects(ObjectJournal),
}

/// The open local file.
struct LocalJournal {
    dir: PathBuf,
    number: u64,
    path: PathBuf,
    file: File,
    /// Records written to this file (compaction trigger).
    records: u64,
}

/// The current run of an object-store journal.
struct ObjectJournal {
    dir: ObjectDir,
    run: u64,
    /// The next segment's number.
    seq: u64,
    /// Updates written in this run (the compaction trigger); a segment
    /// holds one group of them.
    records: u64,
    /// Deleting what the last compaction made redundant.
    cleanup: Option<JoinHandle<()>>,
    /// Under a leader lease: segments are created only if absent, so a
    /// deposed leader's late write to a name its successor fenced fails.
    exclusive: bool,
    /// The segment that closed the previous leader's run at takeover
    /// ([`fence_previous_run`]). Cleanups keep it: deleted, its name would
    /// be free again, and that leader, resuming from a pause, could write
    /// it (never acknowledged, and ignored by starts, but written).
    fence_marker: Option<String>,
}

/// What a start finds in the journal directory.
pub struct Recovered {
    /// The newest compaction snapshot, if any, with the file or object it
    /// was read from.
    pub snapshot: Option<(String, DispatcherSnapshot)>,
    /// The updates after it, in order.
    pub updates: Vec<Update>,
    pub writer: JournalWriter,
}

/// Reads the journal under `work_dir` (the newest snapshot and the updates
/// after it) and opens the next run for writing. Blocking: call it off the
/// async threads.
pub fn open(work_dir: &WorkDir) -> Result<Recovered> {
    open_fenced(work_dir, None)
}

/// [`open`] for a dispatcher that leads under a leader lease: the writer
/// calls [`Fence::check`] immediately before every group write and
/// compaction (with the writer's lock held) and refuses the write with
/// [`Error::Unavailable`] once the lease is lost, so a deposed leader adds
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
        check_fence(fence)?;
    }
    let mut recovered = match work_dir {
        WorkDir::Local(dir) => open_local(dir),
        WorkDir::ObjectStore(dir) => {
            open_objects(dir.subdir(JOURNAL_DIR), prefetched, fence.is_some())
        }
    }?;
    recovered.writer.fence = fence;
    Ok(recovered)
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
fn check_fence(fence: &Fence) -> Result<()> {
    fence
        .check()
        .map_err(|e| Error::Unavailable(format!("journal write refused: {e}")))
}

fn decode_snapshot(location: &str, records: &[Bytes]) -> Result<DispatcherSnapshot> {
    let [record] = records else {
        return Err(Error::DataLoss {
            location: location.to_string(),
            reason: format!("expected one record, found {}", records.len()),
        });
    };
    DispatcherSnapshot::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: location.to_string(),
        reason: format!("not a dispatcher snapshot: {e}"),
    })
}

fn decode_updates(name: &str, records: Vec<Bytes>, out: &mut Vec<Update>) -> Result<()> {
    for (i, record) in records.into_iter().enumerate() {
        let update = Update::decode(record).map_err(|e| Error::DataLoss {
            location: format!("{name}, record {i}"),
            reason: format!("not a journal Update: {e}"),
        })?;
        out.push(update);
    }
    Ok(())
}

fn encode_record(data: &[u8], what: &str) -> Result<Vec<u8>> {
    let mut record = Vec::new();
    tfrecord::write_record(&mut record, data)
        .map_err(|e| Error::io(format!("encoding {what}"), e))?;
    Ok(record)
}

// ---------------------------------------------------------------------------
// Local directories.

fn list(dir: &Path) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut journals = Vec::new();
    let mut snapshots = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?
    {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((kind, number)) = name
            .rsplit_once('_')
            .and_then(|(k, n)| Some((k, n.parse::<u64>().ok()?)))
        else {
            return Err(Error::DataLoss {
                location: dir.join(&name).display().to_string(),
                reason: "unexpected file in the journal directory (names must be <name>_<number>)"
                    .into(),
            });
        };
        match kind {
            "journal" => journals.push(number),
            "snapshot" => snapshots.push(number),
            _ => {} // e.g. an interrupted compaction's temporary file
        }
    }
    journals.sort_unstable();
    snapshots.sort_unstable();
    Ok((journals, snapshots))
}

/// Reads the local journal directory under `work_dir` (the newest snapshot
/// and the journal files after it) and opens the next journal file.
fn open_local(work_dir: &Path) -> Result<Recovered> {
    let dir = work_dir.join(JOURNAL_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let (journals, snapshots) = list(&dir)?;
    let newest = journals.last().copied().max(snapshots.last().copied());
    let snapshot_number = snapshots.last().copied();
    let snapshot = match snapshot_number {
        None => None,
        Some(n) => {
            let path = dir.join(format!("snapshot_{n}"));
            let records = tfrecord::read_file(&path)?;
            let location = path.display().to_string();
            let snapshot = decode_snapshot(&location, &records)?;
            Some((location, snapshot))
        }
    };
    let mut updates = Vec::new();
    let newest_journal = journals.last().copied();
    for n in journals_to_replay(&dir, &journals, snapshot_number)? {
        let path = dir.join(format!("journal_{n}"));
        let bytes = std::fs::read(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let name = path.display().to_string();
        let (records, tail) = tfrecord::read_records(&name, &bytes)?;
        if let Tail::Torn { offset } = tail {
            if Some(n) == newest_journal {
                tracing::warn!(file = %name, offset, "dropping a torn final journal record (crash mid-write)");
                // Cut it off for good: the next start writes a newer file,
                // after which this one is no longer the newest and a torn
                // tail in it would refuse every later start.
                truncate(&path, offset)?;
            } else {
                return Err(Error::DataLoss {
                    location: format!("{name} at offset {offset}"),
                    reason: "journal record truncated in a file that is not the newest".into(),
                });
            }
        }
        decode_updates(&name, records, &mut updates)?;
    }
    let next = newest.map_or(0, |n| n + 1);
    let journal = LocalJournal::create(&dir, next)?;
    Ok(Recovered {
        snapshot,
        updates,
        writer: JournalWriter::new(Backend::Local(journal)),
    })
}

/// The numbers of the journal files holding the history after the newest
/// snapshot (`journals` sorted), in replay order: `journal_<m>` on from
/// `snapshot_<m>`, or from `journal_0` without a snapshot. Files before the
/// snapshot are history it replaces (leftovers of an interrupted
/// compaction).
///
/// Every number is used once, by a start (`journal_<newest + 1>`) or a
/// compaction (`snapshot_<m>` then `journal_<m>`), so the files are
/// consecutive with one exception: a crash after a compaction renamed
/// `snapshot_<m>` into place and before it created `journal_<m>` leaves no
/// `journal_<m>`, and the next start writes `journal_<m + 1>`. Replay goes on
/// past that one gap (stopping at it would drop every update written after
/// it, and the split cursors with them: splits handed out twice). Any other
/// gap is acknowledged history that is gone: the start is refused.
fn journals_to_replay(dir: &Path, journals: &[u64], snapshot: Option<u64>) -> Result<Vec<u64>> {
    let first = snapshot.unwrap_or(0);
    let live: Vec<u64> = journals.iter().copied().filter(|&n| n >= first).collect();
    let mut expected = first;
    for (i, &n) in live.iter().enumerate() {
        if i == 0 && snapshot.is_some() && n > first {
            expected = first + 1;
        }
        if n != expected {
            return Err(Error::DataLoss {
                location: dir
                    .join(format!("journal_{expected}"))
                    .display()
                    .to_string(),
                reason: format!("missing while journal_{n} exists: acknowledged updates were lost"),
            });
        }
        if n == first + 1 && i == 0 && snapshot.is_some() {
            tracing::info!(dir = %dir.display(), "journal_{first} was never created (a crash during compaction): replaying from journal_{n}");
        }
        expected = n + 1;
    }
    Ok(live)
}

/// Shortens `path` to `len` bytes, durably.
fn truncate(path: &Path, len: u64) -> Result<()> {
    let cut = || -> std::io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    };
    cut().map_err(|e| Error::io(format!("truncating the torn tail of {}", path.display()), e))
}

impl LocalJournal {
    fn create(dir: &Path, number: u64) -> Result<Self> {
        let path = dir.join(format!("journal_{number}"));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        sync_dir(dir)?;
        Ok(LocalJournal {
            dir: dir.to_path_buf(),
            number,
            path,
            file,
            records: 0,
        })
    }

    /// One `write` and one `fdatasync` for the whole group.
    fn write(&mut self, records: &[u8], count: u64) -> Result<u64> {
        self.file
            .write_all(records)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.records += count;
        Ok(self.records)
    }

    /// A crash between the rename and the creation of `journal_<m>` leaves
    /// `snapshot_<m>` without its journal file; replay allows for it
    /// (`journals_to_replay`).
    fn compact(&mut self, record: &[u8]) -> Result<()> {
        let m = self.number + 1;
        let path = self.dir.join(format!("snapshot_{m}"));
        let tmp = self.dir.join(format!("compacting_{m}"));
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(record)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        sync_dir(&self.dir)?;
        *self = Self::create(&self.dir, m)?;
        // Everything before the snapshot is now redundant.
        let (journals, snapshots) = list(&self.dir)?;
        for n in journals.into_iter().filter(|&n| n < m) {
            let _ = std::fs::remove_file(self.dir.join(format!("journal_{n}")));
        }
        for n in snapshots.into_iter().filter(|&n| n < m) {
            let _ = std::fs::remove_file(self.dir.join(format!("snapshot_{n}")));
        }
        tracing::info!(snapshot = %path.display(), "journal compacted");
        Ok(())
    }
}

/// Makes a new file's directory entry durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
}

// ---------------------------------------------------------------------------
// Object stores.

/// An object of an object-store journal, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JournalObject {
    /// `journal_<run>_<seq>`.
    Segment { run: u64, seq: u64 },
    /// `snapshot_<m>`.
    Snapshot(u64),
}

/// A decimal number as written by the journal: digits only (`str::parse`
/// would also take a leading `+`).
fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_object_name(name: &str) -> Option<JournalObject> {
    if let Some(m) = name.strip_prefix("snapshot_") {
        return Some(JournalObject::Snapshot(parse_number(m)?));
    }
    let (run, seq) = name.strip_prefix("journal_")?.split_once('_')?;
    Some(JournalObject::Segment {
        run: parse_number(run)?,
        seq: parse_number(seq)?,
    })
}

fn segment_name(run: u64, seq: u64) -> String {
    format!("journal_{run}_{seq}")
}

/// An object-store journal's contents: `(run, seq)` of every segment and the
/// number of every snapshot, each sorted numerically.
struct Listing {
    segments: Vec<(u64, u64)>,
    snapshots: Vec<u64>,
}

/// The journal's objects by kind.
fn list_objects(dir: &ObjectDir) -> Result<Listing> {
    let mut segments = Vec::new();
    let mut snapshots = Vec::new();
    for name in dir.fs().list(dir.url())? {
        match parse_object_name(&name) {
            Some(JournalObject::Segment { run, seq }) => segments.push((run, seq)),
            Some(JournalObject::Snapshot(m)) => snapshots.push(m),
            None => {
                let reason = if parse_number(name.strip_prefix("journal_").unwrap_or("")).is_some()
                {
                    "a local-layout journal file; object-store journals are made of \
                     journal_<run>_<seq> segments"
                } else {
                    "unexpected object in the journal prefix \
                     (names must be journal_<run>_<seq> or snapshot_<number>)"
                };
                return Err(Error::DataLoss {
                    location: dir.join(&name),
                    reason: reason.into(),
                });
            }
        }
    }
    segments.sort_unstable();
    snapshots.sort_unstable();
    Ok(Listing {
        segments,
        snapshots,
    })
}

/// Parses one whole object of TFRecords. A `PUT` is atomic, so a truncated
/// record is damage, not a crash mid-write: an error like any other.
fn object_records(url: &str, bytes: &[u8]) -> Result<Vec<Bytes>> {
    match tfrecord::read_records(url, bytes)? {
        (records, Tail::Clean) => Ok(records),
        (_, Tail::Torn { offset }) => Err(Error::DataLoss {
            location: format!("{url} at offset {offset}"),
            reason: "record truncated (object-store uploads are atomic, so the object \
                     was damaged after it was written)"
                .into(),
        }),
    }
}

/// Reads `urls` concurrently, returning their contents in order; the first
/// failure (in order) is the error.
fn read_objects(fs: &dyn FileSystem, urls: &[String]) -> Result<Vec<Bytes>> {
    let chunk = urls.len().div_ceil(RECOVERY_READERS).max(1);
    std::thread::scope(|s| {
        let readers: Vec<_> = urls
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|url| fs.read_all(url))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(urls.len());
        for reader in readers {
            let part = reader
                .join()
                .map_err(|_| Error::Internal("a journal reader thread panicked".into()))??;
            out.extend(part);
        }
        Ok(out)
    })
}

/// Most bytes a [`Prefetched`] keeps; past it, the rest is read at
/// takeover.
pub const PREFETCH_MAX_BYTES: usize = 256 << 20;

/// The journal objects a standby has read ahead (object stores), so that
/// its takeover reads only what was written since: the newest snapshot and
/// the segments after it, as the next start would read them. Objects are
/// immutable once written (a segment name is never written twice), so a
/// copy read earlier is the object. Clones share it.
#[derive(Clone, Default)]
pub struct Prefetched {
    inner: Arc<Mutex<PrefetchState>>,
}

#[derive(Default)]
struct PrefetchState {
    objects: std::collections::HashMap<String, Bytes>,
    bytes: usize,
    /// Objects a recovery took from here, and objects read ahead.
    hits: u64,
    fetched: u64,
}

impl Prefetched {
    fn lock(&self) -> std::sync::MutexGuard<'_, PrefetchState> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the objects of `work_dir`'s journal a start would read that
    /// are not held yet (at most [`PREFETCH_MAX_BYTES`] in all) and drops
    /// those a newer snapshot made redundant. Returns how many it read. A
    /// local work_dir reads nothing. Blocking.
    pub fn refresh(&self, work_dir: &WorkDir) -> Result<usize> {
        let WorkDir::ObjectStore(dir) = work_dir else {
            return Ok(0);
        };
        let dir = dir.subdir(JOURNAL_DIR);
        let Listing {
            segments,
            snapshots,
        } = list_objects(&dir)?;
        let snapshot = snapshots.last().copied();
        let first_run = snapshot.unwrap_or(0);
        let wanted: Vec<String> = snapshot
            .map(|m| dir.join(&format!("snapshot_{m}")))
            .into_iter()
            .chain(
                segments
                    .iter()
                    .filter(|&&(run, _)| run >= first_run)
                    .map(|&(run, seq)| dir.join(&segment_name(run, seq))),
            )
            .collect();
        let missing: Vec<String> = {
            let mut state = self.lock();
            let keep: std::collections::HashSet<&String> = wanted.iter().collect();
            state.objects.retain(|url, _| keep.contains(url));
            state.bytes = state.objects.values().map(Bytes::len).sum();
            wanted
                .iter()
                .filter(|url| !state.objects.contains_key(*url))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            return Ok(0);
        }
        let read = read_objects(dir.fs(), &missing)?;
        let mut state = self.lock();
        let mut added = 0;
        for (url, bytes) in missing.into_iter().zip(read) {
            if state.bytes + bytes.len() > PREFETCH_MAX_BYTES {
                break;
            }
            state.bytes += bytes.len();
            state.objects.insert(url, bytes);
            added += 1;
        }
        state.fetched += added as u64;
        Ok(added)
    }

    /// Drops everything held (a leader needs none of it).
    pub fn clear(&self) {
        let mut state = self.lock();
        state.objects.clear();
        state.bytes = 0;
    }

    /// How many objects recoveries took from here, and how many were read
    /// ahead.
    pub fn stats(&self) -> (u64, u64) {
        let state = self.lock();
        (state.hits, state.fetched)
    }

    fn get(&self, url: &str) -> Option<Bytes> {
        let mut state = self.lock();
        let bytes = state.objects.get(url).cloned();
        if bytes.is_some() {
            state.hits += 1;
        }
        bytes
    }
}

/// `urls`' contents, from `prefetched` where it holds them, the rest read
/// from the store concurrently; in order.
fn read_objects_prefetched(
    fs: &dyn FileSystem,
    urls: &[String],
    prefetched: Option<&Prefetched>,
) -> Result<Vec<Bytes>> {
    let held: Vec<Option<Bytes>> = urls
        .iter()
        .map(|url| prefetched.and_then(|p| p.get(url)))
        .collect();
    let missing: Vec<String> = urls
        .iter()
        .zip(&held)
        .filter(|(_, h)| h.is_none())
        .map(|(url, _)| url.clone())
        .collect();
    let mut read = read_objects(fs, &missing)?.into_iter();
    held.into_iter()
        .map(|h| match h {
            Some(bytes) => Ok(bytes),
            None => read
                .next()
                .ok_or_else(|| Error::Internal("journal read: fewer objects than asked".into())),
        })
        .collect()
}

/// Most names [`fence_previous_run`] tries.
const FENCE_ATTEMPTS: u64 = 64;

/// A leader taking over closes the previous leader's run (`run`, the
/// newest number in the journal): it creates that run's next segment name
/// as an empty segment, only if absent. The previous leader, if it still
/// runs (paused, say, inside a write it had checked its fence for), writes
/// its segments in order and only if absent, so its next write fails
/// (`AlreadyExists`) instead of landing after the takeover. A name taken
/// meanwhile is a write of its that landed after this replay's listing:
/// never acknowledged (its fence was checked after it landed and failed),
/// and superseded like the rest of the run by the takeover's compaction;
/// the next name is tried.
fn fence_previous_run(dir: &ObjectDir, run: u64, live: &[(u64, u64)]) -> Result<String> {
    let first = live
        .iter()
        .filter(|&&(r, _)| r == run)
        .map(|&(_, seq)| seq + 1)
        .max()
        .unwrap_or(0);
    for seq in first..first + FENCE_ATTEMPTS {
        let name = segment_name(run, seq);
        let url = dir.join(&name);
        match dir.fs().create_new(&url, Bytes::new()) {
            Ok(()) => {
                tracing::info!(marker = %url, "closed the previous leader's journal run");
                return Ok(name);
            }
            Err(Error::AlreadyExists(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Unavailable(format!(
        "could not close the previous leader's journal run {run}: {FENCE_ATTEMPTS} segment \
         names after {} were taken while trying",
        dir.join(&segment_name(run, first))
    )))
}

/// Reads an object-store journal and opens its next run.
fn open_objects(
    dir: ObjectDir,
    prefetched: Option<&Prefetched>,
    taking_over: bool,
) -> Result<Recovered> {
    let Listing {
        segments,
        snapshots,
    } = list_objects(&dir)?;
    let newest = segments
        .last()
        .map(|&(run, _)| run)
        .max(snapshots.last().copied());
    let snapshot_number = snapshots.last().copied();
    let snapshot = match snapshot_number {
        None => None,
        Some(m) => {
            let url = dir.join(&format!("snapshot_{m}"));
            let bytes = match prefetched.and_then(|p| p.get(&url)) {
                Some(bytes) => bytes,
                None => dir.fs().read_all(&url)?,
            };
            let snapshot = decode_snapshot(&url, &object_records(&url, &bytes)?)?;
            Some((url, snapshot))
        }
    };
    // Runs before the snapshot are history it replaces (leftovers of an
    // interrupted cleanup).
    let first_run = snapshot_number.unwrap_or(0);
    let live: Vec<(u64, u64)> = segments
        .into_iter()
        .filter(|&(run, _)| run >= first_run)
        .collect();
    let mut previous: Option<(u64, u64)> = None;
    for &(run, seq) in &live {
        let expected = match previous {
            Some((r, s)) if r == run => s + 1,
            _ => 0,
        };
        if seq != expected {
            // Sorted, so a smaller number is a second spelling of the same
            // segment (`journal_1_01` and `journal_1_1`).
            let (missing, reason) = if seq < expected {
                (
                    segment_name(run, seq),
                    "two objects name this segment".to_string(),
                )
            } else {
                (
                    segment_name(run, expected),
                    format!(
                        "missing while {} exists: acknowledged updates were lost",
                        segment_name(run, seq)
                    ),
                )
            };
            return Err(Error::DataLoss {
                location: dir.join(&missing),
                reason,
            });
        }
        previous = Some((run, seq));
    }
    let urls: Vec<String> = live
        .iter()
        .map(|&(run, seq)| dir.join(&segment_name(run, seq)))
        .collect();
    let mut updates = Vec::with_capacity(urls.len());
    for (url, bytes) in urls
        .iter()
        .zip(read_objects_prefetched(dir.fs(), &urls, prefetched)?)
    {
        decode_updates(url, object_records(url, &bytes)?, &mut updates)?;
    }
    let fence_marker = match newest {
        Some(newest) if taking_over => Some(fence_previous_run(&dir, newest, &live)?),
        _ => None,
    };
    let run = newest.map_or(0, |n| n + 1);
    Ok(Recovered {
        snapshot,
        updates,
        writer: JournalWriter::new(Backend::Objects(ObjectJournal {
            dir,
            run,
            seq: 0,
            records: 0,
            cleanup: None,
            exclusive: taking_over,
            fence_marker,
        })),
    })
}

impl ObjectJournal {
    /// One object, one `PUT`, for the whole group.
    fn write(&mut self, records: &[u8], count: u64) -> Result<u64> {
        let url = self.dir.join(&segment_name(self.run, self.seq));
        if self.exclusive {
            self.dir
                .fs()
                .create_new(&url, Bytes::copy_from_slice(records))
                .map_err(|e| match e {
                    Error::AlreadyExists(_) => Error::Unavailable(format!(
                        "journal write refused: {url} exists, so another dispatcher took \
                         over the journal (this one lost its leader lease)"
                    )),
                    other => other,
                })?;
        } else {
            put_object(self.dir.fs(), &url, records)?;
        }
        self.seq += 1;
        self.records += count;
        Ok(self.records)
    }

    fn compact(&mut self, record: &[u8]) -> Result<()> {
        let m = self.run + 1;
        let url = self.dir.join(&format!("snapshot_{m}"));
        // One PUT: the snapshot is whole or absent, so no temporary object.
        put_object(self.dir.fs(), &url, record)?;
        self.run = m;
        self.seq = 0;
        self.records = 0;
        // Deleting the older objects is not needed for correctness (starts
        // ignore them), so it runs off the RPC path, after the previous
        // cleanup (never two at once).
        let dir = self.dir.clone();
        let keep = self.fence_marker.clone();
        let previous = self.cleanup.take();
        let cleanup = std::thread::Builder::new()
            .name("tfdata-journal-cleanup".into())
            .spawn(move || {
                if let Some(previous) = previous {
                    let _ = previous.join();
                }
                delete_before(&dir, m, keep.as_deref());
            });
        self.cleanup = match cleanup {
            Ok(handle) => Some(handle),
            Err(e) => {
                // Harmless: the next compaction deletes everything before it.
                tracing::warn!(error = %e, "no thread for the journal cleanup; skipping it");
                None
            }
        };
        tracing::info!(snapshot = %url, "journal compacted");
        Ok(())
    }
}

/// Deletes the segments of runs before `m` and the snapshots before `m`,
/// but not `keep` (the takeover's fence marker). Best effort: what is left
/// is ignored by starts and retried by the next compaction.
fn delete_before(dir: &ObjectDir, m: u64, keep: Option<&str>) {
    let Listing {
        segments,
        snapshots,
    } = match list_objects(dir) {
        Ok(listing) => listing,
        Err(e) => {
            tracing::warn!(error = %e, "journal cleanup could not list the journal");
            return;
        }
    };
    let old = segments
        .into_iter()
        .filter(|&(run, _)| run < m)
        .map(|(run, seq)| segment_name(run, seq))
        .filter(|name| Some(name.as_str()) != keep)
        .chain(
            snapshots
                .into_iter()
                .filter(|&n| n < m)
                .map(|n| format!("snapshot_{n}")),
        );
    for name in old {
        let url = dir.join(&name);
        if let Err(e) = dir.fs().delete(&url) {
            tracing::warn!(object = %url, error = %e, "journal cleanup could not delete an object");
        }
    }
}

// ---------------------------------------------------------------------------
// The writer.

impl JournalWriter {
    fn new(backend: Backend) -> Self {
        JournalWriter {
            current: Arc::new(Mutex::new(backend)),
            fence: None,
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
            Backend::Local(journal) => Ok(journal.records),
            Backend::Objects(journal) => Ok(journal.records),
        }?;
        if count > 0
            && let Some(fence) = &self.fence
        {
            check_written(fence)?;
        }
        Ok((total, bytes))
    }

    /// Replaces everything written so far by `snapshot` (the state after it):
    /// writes `snapshot_<m>` atomically, continues in `journal_<m>` (run `m`
    /// on object stores), deletes older files. Blocking; the caller must not
    /// write meanwhile. Returns the bytes of the snapshot written.
    pub fn compact(&self, snapshot: &DispatcherSnapshot) -> Result<u64> {
        let record = encode_record(&snapshot.encode_to_vec(), "a snapshot")?;
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
            Backend::Objects(journal) => journal.cleanup.take(),
        };
        if let Some(cleanup) = cleanup {
            let _ = cleanup.join();
        }
    }

    /// The current file (local), or the URL the next update will be
    /// written to (object stores).
    pub fn path(&self) -> String {
        match &*self.lock() {
            Backend::Local(journal) => journal.path.display().to_string(),
            Backend::Objects(journal) => journal.dir.join(&segment_name(journal.run, journal.seq)),
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
            Backend::Local(journal) => journal.records,
            Backend::Objects(journal) => journal.records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::{RegisterDatasetUpdate, update::UpdateType};

    fn dataset(id: &str) -> Update {
        Update {
            update_type: Some(UpdateType::RegisterDataset(RegisterDatasetUpdate {
                dataset_id: id.into(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn each_start_replays_everything_and_opens_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(&dir.path().into()).unwrap();
        assert!(r.updates.is_empty() && r.snapshot.is_none());
        r.writer.write(&dataset("a")).unwrap();
        r.writer.write(&dataset("b")).unwrap();
        drop(r);
        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.updates, vec![dataset("a"), dataset("b")]);
        assert!(r.writer.path().ends_with("journal_1"));
        r.writer.write(&dataset("c")).unwrap();
        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.updates.len(), 3);
        assert!(r.writer.path().ends_with("journal_2"));

        // Compaction: a snapshot replaces the history; later writes follow it.
        let snapshot = tfdata_proto::tfdata::snapshot::DispatcherSnapshot {
            format_version: 1,
            next_dataset_id: 1234,
            ..Default::default()
        };
        r.writer.compact(&snapshot).unwrap();
        r.writer.write(&dataset("d")).unwrap();
        drop(r);
        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.snapshot.unwrap().1.next_dataset_id, 1234);
        assert_eq!(r.updates, vec![dataset("d")]);
        let files = std::fs::read_dir(dir.path().join(JOURNAL_DIR))
            .unwrap()
            .count();
        assert_eq!(files, 3, "snapshot_3, journal_3 and the new journal_4");
    }

    fn snapshot(next_dataset_id: i64) -> DispatcherSnapshot {
        DispatcherSnapshot {
            format_version: 1,
            next_dataset_id,
            ..Default::default()
        }
    }

    /// A crash after a compaction renamed `snapshot_<m>` into place and
    /// before it created `journal_<m>`: the next start writes
    /// `journal_<m + 1>`, and later starts replay it (they stopped at the
    /// missing `journal_<m>` and lost what it held). A gap anywhere else is
    /// lost history and refuses the start.
    #[test]
    fn a_crash_between_a_snapshot_and_its_journal_file_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let journal_dir = dir.path().join(JOURNAL_DIR);
        let r = open(&dir.path().into()).unwrap();
        r.writer.write(&dataset("a")).unwrap();
        drop(r);
        let r = open(&dir.path().into()).unwrap();
        assert!(r.writer.path().ends_with("journal_1"));
        // Something in journal_2's place fails its creation right after
        // the snapshot's rename: where a crash would stop.
        std::fs::create_dir(journal_dir.join("journal_2")).unwrap();
        assert!(r.writer.compact(&snapshot(7)).is_err());
        drop(r);
        std::fs::remove_dir(journal_dir.join("journal_2")).unwrap();
        assert!(journal_dir.join("snapshot_2").exists());

        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.snapshot.as_ref().unwrap().1.next_dataset_id, 7);
        assert!(r.updates.is_empty());
        assert!(r.writer.path().ends_with("journal_3"));
        r.writer.write(&dataset("b")).unwrap();
        drop(r);
        for _ in 0..2 {
            let r = open(&dir.path().into()).unwrap();
            assert_eq!(r.snapshot.as_ref().unwrap().1.next_dataset_id, 7);
            assert_eq!(r.updates, vec![dataset("b")]);
        }

        // journal_3 gone while journal_4 and journal_5 exist: refused.
        std::fs::remove_file(journal_dir.join("journal_3")).unwrap();
        let err = open(&dir.path().into()).err().unwrap().to_string();
        assert!(
            err.contains("journal_3") && err.contains("acknowledged updates were lost"),
            "{err}"
        );
    }

    #[test]
    fn a_torn_tail_in_the_newest_file_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let w = open(&dir.path().into()).unwrap().writer;
        w.write(&dataset("a")).unwrap();
        w.write(&dataset("b")).unwrap();
        let path = w.path();
        drop(w);
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        assert_eq!(
            open(&dir.path().into()).unwrap().updates,
            vec![dataset("a")]
        );
        // The torn bytes are gone for good: once a newer file exists the
        // torn one is no longer the newest, and later starts still replay
        // (found by the dispatcher_journal fuzz target: `000000010026`).
        assert_eq!(
            open(&dir.path().into()).unwrap().updates,
            vec![dataset("a")]
        );
    }

    #[test]
    fn a_journal_of_one_torn_byte_starts_again_and_again() {
        let dir = tempfile::tempdir().unwrap();
        let journal_dir = dir.path().join(JOURNAL_DIR);
        std::fs::create_dir_all(&journal_dir).unwrap();
        std::fs::write(journal_dir.join("journal_0"), [0x26]).unwrap();
        for _ in 0..3 {
            assert!(open(&dir.path().into()).unwrap().updates.is_empty());
        }
    }

    #[test]
    fn corruption_refuses_to_start_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let w = open(&dir.path().into()).unwrap().writer;
        w.write(&dataset("first")).unwrap();
        w.write(&dataset("second")).unwrap();
        let path = w.path();
        drop(w);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.len() - 10; // inside the second record's data
        bytes[second] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = open(&dir.path().into()).err().unwrap().to_string();
        assert!(err.contains("journal_0") && err.contains("offset"), "{err}");

        std::fs::write(dir.path().join(JOURNAL_DIR).join("notes.txt"), b"x").unwrap();
        assert!(open(&dir.path().into()).is_err());
    }
}
