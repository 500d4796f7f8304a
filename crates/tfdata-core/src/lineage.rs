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
//! Instead each element names its *pieces*: where in the split it sits
//! ([`crate::positions`]). A reader vouches for the positions it received,
//! and the worker producing the split again drops them (the lease's
//! `skip`); ops that make several elements from one ([`Lineage::child`],
//! [`Lineage::row`]) number them and drop the ones skipped. An element whose
//! place in a split is unknown (a batch of several splits' pieces cut up
//! again) names no piece of it: that split may be produced twice, never lost.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::positions::{Position, PositionSet};

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

/// A reader's receipt still to come for a batch of elements sent to it
/// over the element stream: open once the reader said the batch reached
/// it (`StreamRequest.received_batches`). A split whose last element went
/// out in such a batch is reported delivered only once its gate is open,
/// so a batch still in the worker's socket when the worker dies is never
/// counted as delivered (its splits are produced again) however long it
/// waited there.
pub type DeliveryGate = Arc<AtomicBool>;

thread_local! {
    static RELEASING_UNDER: std::cell::RefCell<Option<DeliveryGate>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` (which drops elements just sent) so that the leases it
/// releases see `gate` ([`current_delivery_gate`]).
pub fn releasing_under<R>(gate: &DeliveryGate, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<DeliveryGate>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            RELEASING_UNDER.with(|g| *g.borrow_mut() = previous);
        }
    }
    let previous = RELEASING_UNDER.with(|g| g.borrow_mut().replace(Arc::clone(gate)));
    let _reset = Reset(previous);
    f()
}

/// The gate of the batch whose elements are being dropped on this thread,
/// if a stream is dropping them ([`releasing_under`]): what a release
/// callback waits for before it reports its split delivered.
pub fn current_delivery_gate() -> Option<DeliveryGate> {
    RELEASING_UNDER.with(|g| g.borrow().clone())
}

/// A split held by a worker until every element made from it is gone.
pub struct SplitLease {
    release: Option<Box<dyn FnOnce() + Send + Sync>>,
    name: Option<SplitName>,
    /// Positions of the split that readers already received (it was handed
    /// out again after a worker loss): never produced again.
    skip: Option<Arc<PositionSet>>,
    /// An element made from the split was sent (or dropped unsent by a
    /// send path that cannot name splits).
    sent: AtomicBool,
    /// Positioned pieces of the split sent so far.
    pieces_sent: AtomicU64,
    /// A piece was sent without its position (unplaced, or on a path that
    /// names nothing): the split's total cannot be told.
    uncounted: AtomicBool,
}

impl SplitLease {
    /// A lease that calls `release` when its last reference is dropped.
    pub fn new(release: impl FnOnce() + Send + Sync + 'static) -> Arc<SplitLease> {
        Arc::new(SplitLease {
            release: Some(Box::new(release)),
            name: None,
            skip: None,
            sent: AtomicBool::new(false),
            pieces_sent: AtomicU64::new(0),
            uncounted: AtomicBool::new(false),
        })
    }

    /// A lease of the split `name`, which elements sent whole name.
    pub fn named(
        name: SplitName,
        release: impl FnOnce() + Send + Sync + 'static,
    ) -> Arc<SplitLease> {
        Self::named_skipping(name, PositionSet::default(), release)
    }

    /// A lease of the split `name` whose positions `skip` are not produced.
    pub fn named_skipping(
        name: SplitName,
        skip: PositionSet,
        release: impl FnOnce() + Send + Sync + 'static,
    ) -> Arc<SplitLease> {
        Arc::new(SplitLease {
            release: Some(Box::new(release)),
            name: Some(name),
            skip: (!skip.is_empty()).then(|| Arc::new(skip)),
            sent: AtomicBool::new(false),
            pieces_sent: AtomicU64::new(0),
            uncounted: AtomicBool::new(false),
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

/// What an element sent to a reader holds of splits
/// ([`Lineage::whole_splits`]). One is used per message: elements named
/// into it earlier are sent with the later ones, so their references to a
/// split do not keep a later element from holding all that is left of it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SplitsNamed {
    /// Splits it holds whole: nothing else of them was sent or is left.
    pub whole: Vec<SplitName>,
    /// Its pieces of other splits, by position.
    pub pieces: Vec<(SplitName, Position)>,
    /// Splits it ends (it holds the last of them, which were sent in
    /// pieces), with their total number of pieces: those sent, and those
    /// skipped because readers had them already.
    pub ends: Vec<(SplitName, u64)>,
    /// References to each lease (by address) held by the elements named so
    /// far: they are alive until the whole message is sent.
    earlier: std::collections::HashMap<usize, usize>,
}

impl SplitsNamed {
    /// Clears what the last element named (not what earlier elements hold).
    pub fn clear(&mut self) {
        self.whole.clear();
        self.pieces.clear();
        self.ends.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.whole.is_empty() && self.pieces.is_empty() && self.ends.is_empty()
    }
}

/// An element's hold on one split.
#[derive(Clone)]
struct Piece {
    lease: Arc<SplitLease>,
    /// Where the element sits in the split (`[]`: it is all the split
    /// makes); `None`: somewhere unknown.
    position: Option<Position>,
    /// Positions under `position` that readers already received.
    skip: Option<Arc<PositionSet>>,
}

/// The splits an element depends on (usually none or one; a batch, the union
/// of its inputs'), with the element's position in each.
#[derive(Clone, Default)]
pub struct Lineage {
    pieces: Vec<Piece>,
    /// A batch whose rows held one piece each, in order (so `unbatch` can
    /// give each row its own back).
    rows: bool,
}

impl Lineage {
    pub fn of(lease: Arc<SplitLease>) -> Lineage {
        let skip = lease.skip.clone();
        Lineage {
            pieces: vec![Piece {
                lease,
                position: Some(Position::new()),
                skip,
            }],
            rows: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// How many pieces of splits the element holds.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Adds `other`'s pieces.
    pub fn extend(&mut self, other: Lineage) {
        if self.pieces.is_empty() {
            *self = other;
            return;
        }
        self.pieces.extend(other.pieces);
        self.rows = false;
    }

    /// Adds a copy of `other`'s pieces.
    pub fn extend_from(&mut self, other: &Lineage) {
        if !other.pieces.is_empty() {
            self.extend(other.clone());
        }
    }

    /// The lineage of a batch of `rows`.
    pub fn of_rows<'a>(rows: impl IntoIterator<Item = &'a Lineage>) -> Lineage {
        let mut batch = Lineage {
            pieces: Vec::new(),
            rows: true,
        };
        let mut count = 0;
        for row in rows {
            count += 1;
            batch.rows &= row.pieces.len() == 1;
            batch.pieces.extend(row.pieces.iter().cloned());
        }
        if batch.pieces.is_empty() || count == 0 {
            return Lineage::default();
        }
        batch
    }

    /// The lineage of the `index`-th element an op makes from this one
    /// (`flat_map`, `interleave`, a file's records): at this element's
    /// position + `[index]`. `None` when readers already received that
    /// position: the op drops the element. An element holding several pieces
    /// gives its parts unknown positions.
    pub fn child(&self, index: i64) -> Option<Lineage> {
        match self.pieces.as_slice() {
            [] => Some(Lineage::default()),
            [
                Piece {
                    lease,
                    position: Some(position),
                    skip,
                },
            ] => {
                let skip = skip.as_deref();
                if skip.is_some_and(|s| s.contains(&[index])) {
                    return None;
                }
                let mut child = position.clone();
                child.push(index);
                Some(Lineage {
                    pieces: vec![Piece {
                        lease: Arc::clone(lease),
                        position: Some(child),
                        skip: skip.and_then(|s| s.under(index)).cloned().map(Arc::new),
                    }],
                    rows: false,
                })
            }
            _ => Some(self.unplaced()),
        }
    }

    /// The lineage of row `index` of this batch of `rows` (`unbatch`): the
    /// row's own piece when the batch was made of rows of one piece each,
    /// else as [`Self::child`].
    pub fn row(&self, index: usize, rows: usize) -> Option<Lineage> {
        if self.rows && self.pieces.len() == rows {
            return Some(Lineage {
                pieces: vec![self.pieces[index].clone()],
                rows: false,
            });
        }
        self.child(index as i64)
    }

    /// The same splits at unknown positions.
    fn unplaced(&self) -> Lineage {
        Lineage {
            pieces: self
                .pieces
                .iter()
                .map(|p| Piece {
                    lease: Arc::clone(&p.lease),
                    position: None,
                    skip: None,
                })
                .collect(),
            rows: false,
        }
    }

    /// Called as the element goes to a reader that records split names:
    /// what it holds of splits, appended to `out` (see [`SplitsNamed`] and
    /// the module docs). Every split is marked sent, so a later element of a
    /// split is never taken for all of it. Returns whether the element is
    /// *accounted*: made from splits only, each named whole or by position,
    /// so consuming it consumes exactly what it names.
    pub fn whole_splits(&self, out: &mut SplitsNamed) -> bool {
        match self.pieces.len() {
            0 => false,
            // The common case (an element of one split: a range's, a
            // record's), without the grouping's allocations.
            1 => self.name_group(&[0], out),
            _ => {
                // Pieces of one split side by side (a batch of a file's
                // records), the splits in the order the element holds them.
                let mut order: Vec<usize> = (0..self.pieces.len()).collect();
                order.sort_by_key(|&i| (Arc::as_ptr(&self.pieces[i].lease) as usize, i));
                let mut groups = Vec::new();
                let mut at = 0;
                while at < order.len() {
                    let lease = &self.pieces[order[at]].lease;
                    let mut end = at + 1;
                    while end < order.len() && Arc::ptr_eq(&self.pieces[order[end]].lease, lease) {
                        end += 1;
                    }
                    groups.push(at..end);
                    at = end;
                }
                groups.sort_by_key(|g| order[g.start]);
                let mut accounted = true;
                for group in groups {
                    accounted &= self.name_group(&order[group], out);
                }
                accounted
            }
        }
    }

    /// Names what the pieces `members` (indices into `self.pieces`, all of
    /// one split) hold of their split; whether they are accounted.
    fn name_group(&self, members: &[usize], out: &mut SplitsNamed) -> bool {
        let lease = &self.pieces[members[0]].lease;
        let first = !lease.sent.swap(true, Ordering::SeqCst);
        // Our references (with those of elements sent in the same message)
        // are the last: nothing else holds the split, and nothing can clone
        // a reference nobody else has.
        let key = Arc::as_ptr(lease) as usize;
        let earlier = out.earlier.get(&key).copied().unwrap_or(0);
        let last = Arc::strong_count(lease) == members.len() + earlier;
        *out.earlier.entry(key).or_default() += members.len();
        let Some(name) = lease.name else {
            return false;
        };
        if first && last {
            out.whole.push(name);
            return true;
        }
        let mut accounted = true;
        for &i in members {
            match &self.pieces[i].position {
                Some(p) if !p.is_empty() => {
                    out.pieces.push((name, p.clone()));
                    lease.pieces_sent.fetch_add(1, Ordering::SeqCst);
                }
                _ => {
                    accounted = false;
                    lease.uncounted.store(true, Ordering::SeqCst);
                }
            }
        }
        if last && !lease.uncounted.load(Ordering::SeqCst) {
            let skipped = lease.skip.as_deref().map_or(0, PositionSet::count);
            let total = skipped + lease.pieces_sent.load(Ordering::SeqCst);
            out.ends.push((name, total));
        }
        accounted
    }

    /// Called as the element goes to a reader that does not record split
    /// names (`GetElement`): its splits are never named whole afterwards.
    pub fn mark_sent(&self) {
        for piece in &self.pieces {
            piece.lease.sent.store(true, Ordering::SeqCst);
            piece.lease.uncounted.store(true, Ordering::SeqCst);
        }
    }
}

impl fmt::Debug for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Lineage({} pieces)", self.pieces.len())
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
        a.extend(b.clone()); // the same split twice: two pieces of it
        assert_eq!(a.len(), 2);
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
            let mut out = SplitsNamed::default();
            let complete = l.whole_splits(&mut out);
            if out.pieces.is_empty() {
                assert_eq!(complete, !l.is_empty() && out.whole.len() == l.len());
            }
            out.whole
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

    /// What an element names: its whole splits and its pieces of others.
    fn named(l: &Lineage) -> (Vec<SplitName>, Vec<(SplitName, Position)>) {
        let mut out = SplitsNamed::default();
        l.whole_splits(&mut out);
        (out.whole, out.pieces)
    }

    #[test]
    fn a_release_under_a_gate_sees_it_and_no_other_does() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let lease = |seen: &Arc<std::sync::Mutex<Vec<bool>>>| {
            let seen = Arc::clone(seen);
            SplitLease::new(move || {
                let gate = current_delivery_gate();
                seen.lock()
                    .unwrap()
                    .push(gate.is_some_and(|g| !g.load(Ordering::SeqCst)));
            })
        };
        let gate: DeliveryGate = Arc::new(AtomicBool::new(false));
        let under = Lineage::of(lease(&seen));
        releasing_under(&gate, || drop(under));
        drop(Lineage::of(lease(&seen)));
        assert_eq!(*seen.lock().unwrap(), vec![true, false]);
        assert!(current_delivery_gate().is_none(), "reset after");
    }

    #[test]
    fn the_element_holding_the_last_of_a_split_tells_its_total() {
        // A file split of 4 records whose record 1 readers already hold.
        let mut skip = PositionSet::default();
        skip.insert(&[1]);
        let file = Lineage::of(SplitLease::named_skipping(name(3), skip, || {}));
        let records: Vec<Lineage> = (0..4).filter_map(|i| file.child(i)).collect();
        assert_eq!(records.len(), 3);
        let mut out = SplitsNamed::default();
        assert!(
            records[0].whole_splits(&mut out),
            "a piece by position is accounted"
        );
        assert_eq!(out.ends, vec![], "the source and two records hold the rest");
        drop(file);
        let mut records = records.into_iter().skip(1);
        let (second, third) = (records.next().unwrap(), records.next().unwrap());
        out = SplitsNamed::default(); // another message
        second.whole_splits(&mut out);
        assert_eq!(out.ends, vec![]);
        drop(second);
        out = SplitsNamed::default(); // another message
        third.whole_splits(&mut out);
        assert_eq!(out.pieces, vec![(name(3), vec![3])]);
        assert_eq!(out.ends, vec![(name(3), 4)], "3 sent and 1 skipped");
        // A piece sent where names are not recorded: no total.
        let file = Lineage::of(SplitLease::named(name(4), || {}));
        let (a, b) = (file.child(0).unwrap(), file.child(1).unwrap());
        drop(file);
        a.mark_sent();
        drop(a);
        out = SplitsNamed::default(); // another message
        b.whole_splits(&mut out);
        assert_eq!((out.pieces.len(), out.ends.len()), (1, 0));
    }

    #[test]
    fn the_parts_of_a_split_are_numbered_and_skipped_positions_are_dropped() {
        // A file split whose records 1 and 3 readers already received, and
        // of whose record 4 they received what flat_map made first.
        let mut skip = PositionSet::default();
        skip.insert(&[1]);
        skip.insert(&[3]);
        skip.insert(&[4, 0]);
        let file = Lineage::of(SplitLease::named_skipping(name(9), skip, || {}));
        let records: Vec<(i64, Lineage)> = (0..6)
            .filter_map(|i| file.child(i).map(|l| (i, l)))
            .collect();
        assert_eq!(
            records.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![0, 2, 4, 5]
        );
        // flat_map over record 4 drops its first part, numbers the rest.
        let record4 = &records[2].1;
        assert!(record4.child(0).is_none());
        let part = record4.child(1).unwrap();
        drop(records);
        // The file source still holds the split: pieces, not whole.
        assert_eq!(named(&part), (vec![], vec![(name(9), vec![4, 1])]));
        // A batch of two records of one split, then unbatched: each row
        // gets its own position back; the batch names both.
        let (a, b) = (file.child(0).unwrap(), file.child(2).unwrap());
        let batch = Lineage::of_rows([&a, &b]);
        assert_eq!(batch.len(), 2);
        let rows: Vec<Lineage> = (0..2).map(|i| batch.row(i, 2).unwrap()).collect();
        assert_eq!(named(&rows[1]).1, vec![(name(9), vec![2])]);
        assert_eq!(
            named(&batch).1,
            vec![(name(9), vec![0]), (name(9), vec![2])]
        );
        // A batch of two splits' pieces cut up again: places unknown, named
        // neither whole nor in part (and not complete).
        let other = Lineage::of(SplitLease::named(name(10), || {}))
            .child(0)
            .unwrap();
        let mixed = Lineage::of_rows([&a, &other]);
        let cut = mixed.row(0, 3).unwrap();
        let mut out = SplitsNamed::default();
        assert!(!cut.whole_splits(&mut out));
        assert!(out.is_empty());
        // A piece sent before names a piece even once it is all that is left.
        drop((file, a, b, batch, rows, part, cut, mixed));
        assert_eq!(named(&other), (vec![], vec![(name(10), vec![0])]));
        // The only element made of a split, once the source let go: whole.
        let only = Lineage::of(SplitLease::named(name(11), || {}))
            .child(0)
            .unwrap();
        assert_eq!(named(&only), (vec![name(11)], vec![]));
    }
}
