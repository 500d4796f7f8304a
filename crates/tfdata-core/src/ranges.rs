//! Sets of split indices as disjoint `[start, end)` ranges: what a reader
//! checkpoint lists as consumed and what a restored iteration skips. Splits
//! are handed out roughly in index order, so a set of millions of indices is
//! a handful of ranges (holes only where splits were in flight).

use std::collections::BTreeMap;

use crate::{Error, Result};

/// Most ranges a set taken from the wire may have (a bound on what a peer
/// or a corrupt checkpoint can make us allocate).
pub const MAX_RANGES: usize = 1 << 20;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexRanges(BTreeMap<i64, i64>);

impl IndexRanges {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many indices the set holds.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|(s, e)| e.abs_diff(*s)).sum()
    }

    pub fn insert(&mut self, index: i64) {
        // The common case: the next index after the highest.
        if let Some(mut last) = self.0.last_entry()
            && *last.get() == index
        {
            *last.get_mut() = index.saturating_add(1);
            return;
        }
        self.insert_range(index, index.saturating_add(1));
    }

    pub fn insert_range(&mut self, start: i64, end: i64) {
        if start >= end {
            return;
        }
        let (mut s, mut e) = (start, end);
        if let Some((&ps, &pe)) = self.0.range(..=s).next_back()
            && pe >= s
        {
            s = ps;
            e = e.max(pe);
        }
        let touching: Vec<i64> = self.0.range(s..=e).map(|(&k, _)| k).collect();
        for k in touching {
            if let Some(ke) = self.0.remove(&k) {
                e = e.max(ke);
            }
        }
        self.0.insert(s, e);
    }

    /// Removes every index in `[start, end)`.
    pub fn remove_range(&mut self, start: i64, end: i64) {
        if start >= end {
            return;
        }
        // A range reaching into `start` from below keeps its part before it.
        if let Some((&ps, &pe)) = self.0.range(..start).next_back()
            && pe > start
        {
            self.0.insert(ps, start);
            if pe > end {
                self.0.insert(end, pe);
                return;
            }
        }
        while let Some((&s, &e)) = self.0.range(start..end).next() {
            self.0.remove(&s);
            if e > end {
                self.0.insert(end, e);
                break;
            }
        }
    }

    /// How many ranges the set holds (what its size on the wire and in
    /// memory is proportional to).
    pub fn range_count(&self) -> usize {
        self.0.len()
    }

    /// Removes and returns the lowest range.
    pub fn pop_first(&mut self) -> Option<(i64, i64)> {
        self.0.pop_first()
    }

    /// The ranges, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.0.iter().map(|(s, e)| (*s, *e))
    }

    /// The end of the range holding `index`, if one does.
    pub fn covering(&self, index: i64) -> Option<i64> {
        self.0
            .range(..=index)
            .next_back()
            .filter(|(_, e)| **e > index)
            .map(|(_, e)| *e)
    }

    /// The first index after `index` that the set holds, if any.
    pub fn next_after(&self, index: i64) -> Option<i64> {
        if self.covering(index.saturating_add(1)).is_some() {
            return Some(index.saturating_add(1));
        }
        self.0
            .range(index.saturating_add(1)..)
            .next()
            .map(|(s, _)| *s)
    }

    /// Adds every index of `other`.
    pub fn union_with(&mut self, other: &IndexRanges) {
        for (&start, &end) in &other.0 {
            self.insert_range(start, end);
        }
    }

    /// start0, end0, start1, end1, … ascending.
    pub fn bounds(&self) -> Vec<i64> {
        self.0.iter().flat_map(|(s, e)| [*s, *e]).collect()
    }

    /// The set `bounds` describes; refused unless they are ascending,
    /// disjoint, non-empty ranges of non-negative indices.
    pub fn from_bounds(bounds: &[i64]) -> Result<Self> {
        let bad = |why: &str| Err(Error::InvalidArgument(format!("split ranges: {why}")));
        if !bounds.len().is_multiple_of(2) {
            return bad("an odd number of bounds");
        }
        if bounds.len() / 2 > MAX_RANGES {
            return bad(&format!("more than {MAX_RANGES} ranges"));
        }
        let mut set = BTreeMap::new();
        let mut previous_end = 0;
        for pair in bounds.chunks_exact(2) {
            let (s, e) = (pair[0], pair[1]);
            if s < previous_end || s >= e {
                return bad(&format!("[{s}, {e}) is empty, negative or out of order"));
            }
            set.insert(s, e);
            previous_end = e;
        }
        Ok(IndexRanges(set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_ranges_cuts_and_splits_what_they_cover() {
        let mut r = IndexRanges::default();
        r.insert_range(0, 10);
        r.insert_range(20, 30);
        r.insert_range(40, 50);
        r.remove_range(5, 7);
        assert_eq!(r.bounds(), vec![0, 5, 7, 10, 20, 30, 40, 50]);
        r.remove_range(8, 45);
        assert_eq!(r.bounds(), vec![0, 5, 7, 8, 45, 50]);
        r.remove_range(-3, 6);
        assert_eq!(r.bounds(), vec![7, 8, 45, 50]);
        r.remove_range(7, 8);
        r.remove_range(60, 70);
        r.remove_range(9, 9);
        assert_eq!(r.bounds(), vec![45, 50]);
        assert_eq!(r.range_count(), 1);
        r.remove_range(0, i64::MAX);
        assert!(r.is_empty());
        // Against a plain set, on random operations.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % m) as i64
        };
        let mut set = std::collections::BTreeSet::new();
        let mut ranges = IndexRanges::default();
        for _ in 0..2000 {
            let (a, len) = (next(200), next(12));
            if next(3) == 0 {
                ranges.remove_range(a, a + len);
                set.retain(|i| *i < a || *i >= a + len);
            } else {
                ranges.insert_range(a, a + len);
                set.extend(a..a + len);
            }
            assert_eq!(ranges.count(), set.len() as u64);
        }
        for i in -1..215 {
            assert_eq!(ranges.covering(i).is_some(), set.contains(&i), "index {i}");
        }
    }

    #[test]
    fn indices_merge_into_ranges_in_any_order() {
        let mut r = IndexRanges::default();
        for i in [5, 0, 1, 2, 9, 7, 6, 3, 8, 12] {
            r.insert(i);
        }
        assert_eq!(r.bounds(), vec![0, 4, 5, 10, 12, 13]);
        assert_eq!(r.count(), 10);
        let mut other = IndexRanges::default();
        other.insert_range(3, 6);
        other.insert_range(30, 31);
        let mut union = r.clone();
        union.union_with(&other);
        assert_eq!(union.bounds(), vec![0, 10, 12, 13, 30, 31]);
        r.insert(4);
        r.insert_range(11, 20);
        assert_eq!(r.bounds(), vec![0, 10, 11, 20]);
        assert_eq!(r.covering(0), Some(10));
        assert_eq!(r.covering(10), None);
        assert_eq!(r.covering(19), Some(20));
        assert_eq!(r.next_after(9), Some(11));
        assert_eq!(r.next_after(10), Some(11));
        assert_eq!(r.next_after(-5), Some(0));
        assert_eq!(r.next_after(19), None);
        assert_eq!(IndexRanges::from_bounds(&r.bounds()).unwrap(), r);
    }

    #[test]
    fn bad_bounds_are_refused() {
        for bounds in [&[1][..], &[3, 3], &[5, 4], &[0, 4, 3, 6], &[-2, 1]] {
            assert!(IndexRanges::from_bounds(bounds).is_err(), "{bounds:?}");
        }
    }
}
