//! The journal on an object store: immutable segments
//! `journal_<run>_<seq>`, one `PUT` per group, `snapshot_<m>` compactions
//! uploaded whole, the objects they make redundant deleted in the
//! background, and the takeover's fence closing the previous leader's run.
//! See the parent module for the layout and its rules.

use std::thread::JoinHandle;

use bytes::Bytes;
use tfdata_core::tfrecord::{self, Tail};
use tfdata_core::{Error, Result};
use tfdata_dataset::io::FileSystem;

use super::History;
use super::format::{COMPACTION_PREFIX, compaction_name, decode_compacted_state, decode_updates};
use crate::persistence::work_dir::{ObjectDir, put_object};

/// Segments read concurrently at recovery: each is a small object, so a
/// replay is dominated by request latency, which concurrency hides.
const RECOVERY_READERS: usize = 8;

/// The current run of an object-store journal.
pub(super) struct ObjectJournal {
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

/// An object of an object-store journal, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JournalObject {
    /// `journal_<run>_<seq>`.
    Segment { run: u64, seq: u64 },
    /// `snapshot_<m>`.
    Compaction(u64),
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
    if let Some(m) = name
        .strip_prefix(COMPACTION_PREFIX)
        .and_then(|rest| rest.strip_prefix('_'))
    {
        return Some(JournalObject::Compaction(parse_number(m)?));
    }
    let (run, seq) = name.strip_prefix("journal_")?.split_once('_')?;
    Some(JournalObject::Segment {
        run: parse_number(run)?,
        seq: parse_number(seq)?,
    })
}

pub(super) fn segment_name(run: u64, seq: u64) -> String {
    format!("journal_{run}_{seq}")
}

/// An object-store journal's contents: `(run, seq)` of every segment and the
/// number of every compaction, each sorted numerically.
pub(super) struct Listing {
    pub(super) segments: Vec<(u64, u64)>,
    pub(super) compactions: Vec<u64>,
}

/// The journal's objects by kind.
pub(super) fn list_objects(dir: &ObjectDir) -> Result<Listing> {
    let mut segments = Vec::new();
    let mut compactions = Vec::new();
    for name in dir.fs().list(dir.url())? {
        match parse_object_name(&name) {
            Some(JournalObject::Segment { run, seq }) => segments.push((run, seq)),
            Some(JournalObject::Compaction(m)) => compactions.push(m),
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
    compactions.sort_unstable();
    Ok(Listing {
        segments,
        compactions,
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
pub(super) fn read_objects(fs: &dyn FileSystem, urls: &[String]) -> Result<Vec<Bytes>> {
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

/// Objects read before a start (a standby's read-ahead, `read_ahead`),
/// which the start takes rather than reading them again. Objects are
/// immutable once written, so a copy read earlier is the object.
pub(super) trait HeldObjects {
    /// The object at `url`, if held.
    fn get(&self, url: &str) -> Option<Bytes>;
}

/// `urls`' contents, from `held` where it holds them, the rest read from
/// the store concurrently; in order.
fn read_objects_held(
    fs: &dyn FileSystem,
    urls: &[String],
    held: Option<&dyn HeldObjects>,
) -> Result<Vec<Bytes>> {
    let held: Vec<Option<Bytes>> = urls
        .iter()
        .map(|url| held.and_then(|h| h.get(url)))
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
pub(super) fn open(
    dir: ObjectDir,
    held: Option<&dyn HeldObjects>,
    taking_over: bool,
) -> Result<(History, ObjectJournal)> {
    let Listing {
        segments,
        compactions,
    } = list_objects(&dir)?;
    let newest = segments
        .last()
        .map(|&(run, _)| run)
        .max(compactions.last().copied());
    let compaction_number = compactions.last().copied();
    let compaction = match compaction_number {
        None => None,
        Some(m) => {
            let url = dir.join(&compaction_name(m));
            let bytes = match held.and_then(|h| h.get(&url)) {
                Some(bytes) => bytes,
                None => dir.fs().read_all(&url)?,
            };
            let state = decode_compacted_state(&url, &object_records(&url, &bytes)?)?;
            Some((url, state))
        }
    };
    // Runs before the compaction are history it replaces (leftovers of an
    // interrupted cleanup).
    let first_run = compaction_number.unwrap_or(0);
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
    for (url, bytes) in urls.iter().zip(read_objects_held(dir.fs(), &urls, held)?) {
        decode_updates(url, object_records(url, &bytes)?, &mut updates)?;
    }
    let fence_marker = match newest {
        Some(newest) if taking_over => Some(fence_previous_run(&dir, newest, &live)?),
        _ => None,
    };
    let run = newest.map_or(0, |n| n + 1);
    let journal = ObjectJournal {
        dir,
        run,
        seq: 0,
        records: 0,
        cleanup: None,
        exclusive: taking_over,
        fence_marker,
    };
    Ok((
        History {
            compaction,
            updates,
        },
        journal,
    ))
}

impl ObjectJournal {
    /// One object, one `PUT`, for the whole group.
    pub(super) fn write(&mut self, records: &[u8], count: u64) -> Result<u64> {
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

    pub(super) fn compact(&mut self, record: &[u8]) -> Result<()> {
        let m = self.run + 1;
        let url = self.dir.join(&compaction_name(m));
        // One PUT: the compaction is whole or absent, so no temporary object.
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
        tracing::info!(compaction = %url, "journal compacted");
        Ok(())
    }

    /// Updates written in this run (the compaction trigger).
    pub(super) fn records(&self) -> u64 {
        self.records
    }

    /// The URL the next group will be written to.
    pub(super) fn next_segment(&self) -> String {
        self.dir.join(&segment_name(self.run, self.seq))
    }

    /// The deletion the last compaction started, if not waited for yet.
    pub(super) fn take_cleanup(&mut self) -> Option<JoinHandle<()>> {
        self.cleanup.take()
    }
}

/// Deletes the segments of runs before `m` and the compactions before `m`,
/// but not `keep` (the takeover's fence marker). Best effort: what is left
/// is ignored by starts and retried by the next compaction.
fn delete_before(dir: &ObjectDir, m: u64, keep: Option<&str>) {
    let Listing {
        segments,
        compactions,
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
            compactions
                .into_iter()
                .filter(|&n| n < m)
                .map(compaction_name),
        );
    for name in old {
        let url = dir.join(&name);
        if let Err(e) = dir.fs().delete(&url) {
            tracing::warn!(object = %url, error = %e, "journal cleanup could not delete an object");
        }
    }
}
