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

use std::fmt;
use std::sync::Arc;

/// A split held by a worker until every element made from it is gone.
pub struct SplitLease {
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl SplitLease {
    /// A lease that calls `release` when its last reference is dropped.
    pub fn new(release: impl FnOnce() + Send + Sync + 'static) -> Arc<SplitLease> {
        Arc::new(SplitLease {
            release: Some(Box::new(release)),
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
}
