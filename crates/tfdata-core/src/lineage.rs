//! Which dynamic-sharding splits an element was made from, so a worker can
//! tell the dispatcher when a split is fully delivered.
//!
//! In distributed_epoch mode a worker holds splits it has not finished: some
//! of their elements are still in the pipeline (a shuffle buffer, a partial
//! batch, an interleave cycle) or in the task's output buffer. If the worker
//! dies, exactly those splits must go back to the pool, or their elements are
//! lost. Pipelines reorder and combine elements arbitrarily, so the only
//! exact answer is reference counting: a source wraps each split in a
//! [`SplitLease`] and tags every element it reads from the split with it;
//! transformations carry the tags of their inputs to their outputs (a batch
//! carries the union); the source keeps its own reference while it is still
//! reading the split. When the last reference is dropped — the last element
//! made from the split was handed to a reader, filtered out, or the source
//! moved on and nothing of the split is left — the lease's release callback
//! runs, once.
//!
//! An op that forgets to carry a lineage would release a split early (and a
//! worker loss would then lose its elements), so every op that builds a new
//! element from inputs moves the inputs' lineage over; ops that hold elements
//! (cache) only delay releases, which is safe (a lost worker's split is then
//! produced twice, never lost). Outside distributed_epoch mode lineages are
//! empty and cost nothing: an empty `Vec` does not allocate.
//!
//! A worker that dies before it reported a split delivered would have the
//! split produced again, though its elements may have reached readers. So
//! an element sent to a reader names the splits it holds *whole*
//! ([`Lineage::whole_splits`]): those of which no element was sent before
//! and nothing is left behind (the element holds the lease's last
//! reference, so no other element of the split exists or can be made). A
//! reader that received the element can vouch for those splits when the
//! worker is lost, and they are not produced again. A split spread over
//! several elements is never named: no single reader can vouch for it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A split of a distributed_epoch iteration: its split provider (the
/// source's index), the provider's repetition (pass) it was produced in, and
/// its index in that pass. Split providers are deterministic, so the name
/// means the same split in every iteration of the pipeline (what reader
/// checkpoints rely on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SplitName {
    pub provider: i64,
    pub repetition: i64,
    pub index: i64,
}

/// A split held by a worker until every element made from it is gone.
pub struct SplitLease {
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
    name: Option<SplitName>,
    /// An element made from the split was sent (or dropped unsent by a
    /// send path that cannot name splits).
    sent: AtomicBool,
}

impl SplitLease {
    /// A lease that calls `release` when its last reference is dropped.
    pub fn new(release: impl FnOnce() + Send + Sync + 'static) -> Arc<SplitLease> {
        Arc::new(SplitLease {
            release: Some(Box::new(release)),
            name: None,
            sent: AtomicBool::new(false),
        })
    }

    /// A lease of the split `name`, which elements sent whole name.
    pub fn named(
        name: SplitName,
        release: impl FnOnce() + Send + Sync + 'static,
    ) -> Arc<SplitLease> {
        Arc::new(SplitLease {
            release: Some(Box::new(release)),
            name: Some(name),
            sent: AtomicBool::new(false),
        })
    }
}

impl Drop for SplitLease {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

impl fmt::Debug for SplitLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SplitLease")
    }
}

/// The splits an element depends on (usually none or one; a batch, the union
/// of its inputs').
#[derive(Clone, Default)]
pub struct Lineage(Vec<Arc<SplitLease>>);

impl Lineage {
    pub fn of(lease: Arc<SplitLease>) -> Lineage {
        Lineage(vec![lease])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Adds `other`'s splits (each split once).
    pub fn extend(&mut self, other: Lineage) {
        if self.0.is_empty() {
            self.0 = other.0;
            return;
        }
        for lease in other.0 {
            if !self.0.iter().any(|l| Arc::ptr_eq(l, &lease)) {
                self.0.push(lease);
            }
        }
    }

    /// Adds a copy of `other`'s splits (each split once).
    pub fn extend_from(&mut self, other: &Lineage) {
        if !other.0.is_empty() {
            self.extend(other.clone());
        }
    }

    /// Called as the element goes to a reader that records split names:
    /// the named splits this element holds whole (see the module docs),
    /// appended to `out`. Every split is marked sent, so a later element of
    /// a split is never taken for all of it. Returns whether the element is
    /// *complete*: made from splits only, each named and held whole, so
    /// consuming it consumes exactly those splits.
    pub fn whole_splits(&self, out: &mut Vec<SplitName>) -> bool {
        let mut complete = !self.0.is_empty();
        for lease in &self.0 {
            let first = !lease.sent.swap(true, Ordering::SeqCst);
            // Our reference is the last: nothing else holds the split, and
            // nothing can clone a reference nobody else has.
            match lease.name {
                Some(name) if first && Arc::strong_count(lease) == 1 => out.push(name),
                _ => complete = false,
            }
        }
        complete
    }

    /// Called as the element goes to a reader that does not record split
    /// names (`GetElement`): its splits are never named whole afterwards.
    pub fn mark_sent(&self) {
        for lease in &self.0 {
            lease.sent.store(true, Ordering::SeqCst);
        }
    }
}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lineage({} splits)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lease_is_released_once_when_its_last_reference_goes() {
        let released = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&released);
        let lease = SplitLease::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        });
        let mut a = Lineage::of(Arc::clone(&lease));
        let b = a.clone();
        a.extend(b.clone()); // the same split twice counts once
        assert_eq!(a.len(), 1);
        drop(lease);
        drop(a);
        assert_eq!(released.load(Ordering::SeqCst), 0, "b still holds it");
        drop(b);
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }

    fn name(index: i64) -> SplitName {
        SplitName {
            provider: 0,
            repetition: 0,
            index,
        }
    }

    #[test]
    fn only_an_element_holding_all_that_is_left_of_a_split_names_it() {
        let whole = |l: &Lineage| {
            let mut out = Vec::new();
            let complete = l.whole_splits(&mut out);
            assert_eq!(complete, !l.0.is_empty() && out.len() == l.len());
            out
        };
        // One element, the source done with the split: named.
        let a = Lineage::of(SplitLease::named(name(1), || {}));
        assert_eq!(whole(&a), vec![name(1)]);
        // Two elements of one split: neither names it, whichever goes first.
        let lease = SplitLease::named(name(2), || {});
        let first = Lineage::of(Arc::clone(&lease));
        let second = Lineage::of(lease);
        assert_eq!(whole(&first), vec![]);
        drop(first);
        assert_eq!(whole(&second), vec![], "an element of it was sent before");
        // The source still reading the split holds a reference: not named.
        let lease = SplitLease::named(name(3), || {});
        let element = Lineage::of(Arc::clone(&lease));
        assert_eq!(whole(&element), vec![]);
        drop(lease);
        // A batch of whole splits names each; an unnamed lease never.
        let mut batch = Lineage::of(SplitLease::named(name(4), || {}));
        batch.extend(Lineage::of(SplitLease::named(name(5), || {})));
        batch.extend(Lineage::of(SplitLease::new(|| {})));
        assert_eq!(whole(&batch), vec![name(4), name(5)]);
        // An element sent where names are not recorded spoils its splits.
        let lease = SplitLease::named(name(6), || {});
        let sent = Lineage::of(Arc::clone(&lease));
        sent.mark_sent();
        drop(sent);
        assert_eq!(whole(&Lineage::of(lease)), vec![]);
    }
}
