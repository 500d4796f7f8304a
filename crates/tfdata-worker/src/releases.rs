//! Telling a task's readers which splits they may forget. A reader keeps
//! receipts of the splits it received from a task, for the dispatcher, in
//! case the task's worker is lost before it reported them delivered
//! (`tfdata_client`'s `Receipts`). Once a `GetSplit` answer says the
//! dispatcher recorded the task's delivery reports, those receipts can
//! never matter: each of the task's element streams is told, and its next
//! batch carries the splits as ranges (`ElementBatch.released_splits`). So
//! a reader's receipts stay the few splits delivered and not yet
//! acknowledged, however fast and long the task runs.

use std::sync::{Arc, Mutex};

use tfdata_core::SplitName;
use tfdata_core::ranges::IndexRanges;

/// Most split ranges one stream keeps to tell its reader as released before
/// its next batch (a stream whose reader stops granting credit takes none
/// for a while). Past it the lowest are dropped: the reader then keeps
/// receipts that can no longer matter, which costs it memory, never
/// exactness.
pub const MAX_RELEASED_RANGES_PER_STREAM: usize = 1 << 16;

/// Splits of a task the dispatcher acknowledged as delivered (it holds them
/// no more), not yet told to one element stream's reader
/// (`ElementBatch.released_splits`).
#[derive(Default)]
pub struct ReleasedSplits {
    ranges: std::collections::BTreeMap<(i64, i64), IndexRanges>,
    count: usize,
}

impl ReleasedSplits {
    fn add(&mut self, names: &[SplitName]) {
        for n in names {
            let r = self.ranges.entry((n.provider, n.repetition)).or_default();
            let before = r.range_count();
            r.insert(n.index);
            self.count = self.count + r.range_count() - before;
        }
        while self.count > MAX_RELEASED_RANGES_PER_STREAM {
            let Some(mut lowest) = self.ranges.first_entry() else {
                break;
            };
            lowest.get_mut().pop_first();
            self.count -= 1;
            if lowest.get().is_empty() {
                lowest.remove();
            }
        }
    }

    /// What to tell the reader with the next batch, and nothing after it.
    pub fn take(&mut self) -> Vec<tfdata_proto::data::TfdataSplitRanges> {
        self.count = 0;
        std::mem::take(&mut self.ranges)
            .into_iter()
            .map(
                |((provider, repetition), r)| tfdata_proto::data::TfdataSplitRanges {
                    provider,
                    repetition,
                    bounds: r.bounds(),
                },
            )
            .collect()
    }
}

/// One task's open element streams, each told of every split the
/// dispatcher acknowledges (a task's readers each hold receipts of what
/// they received from it).
#[derive(Default)]
pub struct ReleaseBoard {
    streams: Mutex<Vec<std::sync::Weak<Mutex<ReleasedSplits>>>>,
}

impl ReleaseBoard {
    /// A new stream's releases (dropped with the stream).
    pub fn subscribe(&self) -> Arc<Mutex<ReleasedSplits>> {
        let released = Arc::new(Mutex::new(ReleasedSplits::default()));
        let mut streams = lock(&self.streams);
        streams.retain(|s| s.strong_count() > 0);
        streams.push(Arc::downgrade(&released));
        released
    }

    /// The dispatcher recorded `names` as delivered by the task.
    pub(crate) fn acknowledged(&self, names: &[SplitName]) {
        if names.is_empty() {
            return;
        }
        let streams = lock(&self.streams);
        for s in streams.iter().filter_map(std::sync::Weak::upgrade) {
            lock(&s).add(names);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(indices: impl IntoIterator<Item = i64>) -> Vec<SplitName> {
        indices
            .into_iter()
            .map(|index| SplitName {
                provider: 0,
                repetition: 1,
                index,
            })
            .collect()
    }

    /// Every open stream of a task hears of each acknowledgement once, as
    /// ranges; a closed stream is forgotten; past the bound the lowest go.
    #[test]
    fn each_stream_is_told_every_release_once_as_ranges() {
        let board = ReleaseBoard::default();
        let (a, b) = (board.subscribe(), board.subscribe());
        board.acknowledged(&names([4, 2, 3, 9]));
        let taken = lock(&a).take();
        assert_eq!(taken.len(), 1);
        assert_eq!(
            (taken[0].repetition, &taken[0].bounds[..]),
            (1, &[2, 5, 9, 10][..])
        );
        assert!(lock(&a).take().is_empty(), "told once");
        drop(b);
        board.acknowledged(&names([5]));
        assert_eq!(lock(&a).take()[0].bounds, vec![5, 6]);
        assert_eq!(
            lock(&board.streams)
                .iter()
                .filter(|s| s.strong_count() > 0)
                .count(),
            1
        );

        let n = MAX_RELEASED_RANGES_PER_STREAM as i64 + 3;
        board.acknowledged(&names((0..n).map(|i| 2 * i)));
        let bounds = &lock(&a).take()[0].bounds;
        assert_eq!(bounds.len(), 2 * MAX_RELEASED_RANGES_PER_STREAM);
        assert_eq!(bounds[0], 6, "the three lowest dropped");
    }
}
