//! Positions within a split, so a split spread over several elements (a
//! file's records, what `flat_map` or `unbatch` makes of one element) can be
//! accounted element by element (issue 17).
//!
//! A split's elements are numbered along their way from the split: the
//! source's `i`-th element of the split is at `[i]`, and the `j`-th element
//! an op makes from one at `p` is at `p + [j]`. Pipelines that are
//! deterministic given their splits make the same elements at the same
//! positions every time the split is produced, so a reader can say which
//! positions it received, and a worker producing the split again after a
//! loss (or for a restored reader) drops exactly those.
//!
//! A [`PositionSet`] holds positions as a tree of index ranges: a file's
//! records read in order are one range however many there are.

use std::collections::BTreeMap;

use tfdata_proto::data::TfdataPositionRange;

use crate::ranges::IndexRanges;
use crate::{Error, Result};

/// Deepest position a set taken from the wire may hold (nested
/// `flat_map`s / `unbatch`es past this are not accounted anyway).
pub const MAX_POSITION_DEPTH: usize = 16;
/// Most ranges a set taken from the wire may have.
pub const MAX_POSITION_RANGES: usize = 1 << 20;

/// Where an element sits within its split (see the module docs).
pub type Position = Vec<i64>;

/// A set of positions within one split: each held position stands for
/// itself and every position under it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PositionSet {
    /// Indices `i` whose `[i]` (and everything under it) is held.
    whole: IndexRanges,
    /// Indices `i` of which only positions under `[i]` are held.
    parts: BTreeMap<i64, PositionSet>,
}

impl PositionSet {
    pub fn is_empty(&self) -> bool {
        self.whole.is_empty() && self.parts.is_empty()
    }

    /// How many positions were inserted (a position under another counts
    /// as nothing: the one above holds it).
    pub fn count(&self) -> u64 {
        self.whole.count() + self.parts.values().map(PositionSet::count).sum::<u64>()
    }

    /// Adds `position` (and so everything under it). The empty position is
    /// the whole split, which a split's name says; it is not a part.
    pub fn insert(&mut self, position: &[i64]) {
        let Some((&first, rest)) = position.split_first() else {
            return;
        };
        if self.whole.covering(first).is_some() {
            return;
        }
        if rest.is_empty() {
            self.parts.remove(&first);
            self.whole.insert(first);
        } else {
            self.parts.entry(first).or_default().insert(rest);
        }
    }

    /// Whether `position` is held: it or a position above it was inserted.
    pub fn contains(&self, position: &[i64]) -> bool {
        let Some((&first, rest)) = position.split_first() else {
            return false;
        };
        self.whole.covering(first).is_some()
            || self.parts.get(&first).is_some_and(|p| p.contains(rest))
    }

    /// The positions held under `[index]`, relative to it: `None` when
    /// nothing under it is held, or when all of it is (see [`Self::contains`]).
    pub fn under(&self, index: i64) -> Option<&PositionSet> {
        self.parts.get(&index)
    }

    /// Adds every position of `other`.
    pub fn union_with(&mut self, other: &PositionSet) {
        for range in other.ranges() {
            self.insert_range(&range.prefix, range.start, range.end);
        }
    }

    fn insert_range(&mut self, prefix: &[i64], start: i64, end: i64) {
        match prefix.split_first() {
            None => {
                self.whole.insert_range(start, end);
                let inside: Vec<i64> = self.parts.range(start..end).map(|(k, _)| *k).collect();
                for k in inside {
                    self.parts.remove(&k);
                }
            }
            Some((&first, rest)) => {
                if self.whole.covering(first).is_none() {
                    self.parts
                        .entry(first)
                        .or_default()
                        .insert_range(rest, start, end);
                }
            }
        }
    }

    /// The set as ranges (`TfdataPositionRange`), shallow ones first.
    pub fn ranges(&self) -> Vec<TfdataPositionRange> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<i64>, out: &mut Vec<TfdataPositionRange>) {
        for pair in self.whole.bounds().chunks_exact(2) {
            out.push(TfdataPositionRange {
                prefix: prefix.clone(),
                start: pair[0],
                end: pair[1],
            });
        }
        for (&index, part) in &self.parts {
            prefix.push(index);
            part.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The set `ranges` describe; refused unless every range is non-empty,
    /// of non-negative indices, and within the limits.
    pub fn from_ranges(ranges: &[TfdataPositionRange]) -> Result<PositionSet> {
        let bad = |why: String| Err(Error::InvalidArgument(format!("split positions: {why}")));
        if ranges.len() > MAX_POSITION_RANGES {
            return bad(format!("more than {MAX_POSITION_RANGES} ranges"));
        }
        let mut set = PositionSet::default();
        for r in ranges {
            if r.prefix.len() >= MAX_POSITION_DEPTH {
                return bad(format!("a position deeper than {MAX_POSITION_DEPTH}"));
            }
            if r.start < 0 || r.start >= r.end || r.prefix.iter().any(|&i| i < 0) {
                return bad(format!(
                    "{:?} + [{}, {}) is empty or negative",
                    r.prefix, r.start, r.end
                ));
            }
            set.insert_range(&r.prefix, r.start, r.end);
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_nest_merge_and_round_trip() {
        let mut s = PositionSet::default();
        assert!(s.is_empty());
        for i in [0, 1, 2, 5] {
            s.insert(&[i]);
        }
        s.insert(&[7, 0]);
        s.insert(&[7, 1]);
        s.insert(&[7, 3, 2]);
        s.insert(&[1, 4]); // under a held position: nothing new
        s.insert(&[]); // the whole split is not a part
        assert!(s.contains(&[1]) && s.contains(&[1, 9]) && s.contains(&[7, 1]));
        assert!(s.contains(&[7, 3, 2, 8]));
        assert!(!s.contains(&[3]) && !s.contains(&[7]) && !s.contains(&[7, 2]));
        assert!(!s.contains(&[]));
        assert!(s.under(7).is_some_and(|u| u.contains(&[0])));
        assert!(s.under(1).is_none() && s.under(3).is_none());
        let ranges = s.ranges();
        assert_eq!(ranges.len(), 4, "{ranges:?}");
        assert_eq!(PositionSet::from_ranges(&ranges).unwrap(), s);
        // [7] whole swallows its parts; a union merges ranges.
        let mut t = PositionSet::default();
        t.insert(&[7]);
        t.insert(&[3]);
        t.insert(&[4]);
        s.union_with(&t);
        assert!(s.under(7).is_none() && s.contains(&[7, 2]));
        assert_eq!(s.ranges().len(), 2, "[0, 6) and [7, 8)");
    }

    #[test]
    fn bad_ranges_are_refused() {
        let range = |prefix: Vec<i64>, start, end| TfdataPositionRange { prefix, start, end };
        for bad in [
            range(vec![], 3, 3),
            range(vec![], -1, 2),
            range(vec![-4], 0, 2),
            range(vec![0; MAX_POSITION_DEPTH], 0, 1),
        ] {
            assert!(
                PositionSet::from_ranges(std::slice::from_ref(&bad)).is_err(),
                "{bad:?}"
            );
        }
    }
}
