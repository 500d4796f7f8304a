//! A standby's read-ahead of an object-store journal, so that its takeover
//! reads only the journal's tail.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tfdata_core::Result;

use super::JOURNAL_DIR;
use super::format::compaction_name;
use super::object_store::{HeldObjects, Listing, list_objects, read_objects, segment_name};
use crate::persistence::work_dir::WorkDir;

/// Most bytes a [`Prefetched`] keeps; past it, the rest is read at
/// takeover.
pub const PREFETCH_MAX_BYTES: usize = 256 << 20;

/// The journal objects a standby has read ahead (object stores), so that
/// its takeover reads only what was written since: the newest compaction and
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
    /// those a newer compaction made redundant. Returns how many it read. A
    /// local work_dir reads nothing. Blocking.
    pub fn refresh(&self, work_dir: &WorkDir) -> Result<usize> {
        let WorkDir::ObjectStore(dir) = work_dir else {
            return Ok(0);
        };
        let dir = dir.subdir(JOURNAL_DIR);
        let Listing {
            segments,
            compactions,
        } = list_objects(&dir)?;
        let compaction = compactions.last().copied();
        let first_run = compaction.unwrap_or(0);
        let wanted: Vec<String> = compaction
            .map(|m| dir.join(&compaction_name(m)))
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
}

impl HeldObjects for Prefetched {
    fn get(&self, url: &str) -> Option<Bytes> {
        let mut state = self.lock();
        let bytes = state.objects.get(url).cloned();
        if bytes.is_some() {
            state.hits += 1;
        }
        bytes
    }
}
