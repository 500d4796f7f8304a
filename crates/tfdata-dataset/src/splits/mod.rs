//! Split providers: how a source's input is cut into splits for dynamic
//! sharding (spec §5.6). The dispatcher holds one provider per source and
//! hands splits to workers; a worker's source then reads only the splits it
//! is given. Splits are TensorFlow's: `range` splits are the values
//! themselves, `from_tensor_slices` (and so `list_files`) splits are slice
//! indices.
//!
//! [`lanes`] deals a source's splits to the lanes of a deterministic read.

pub mod lanes;

use std::sync::Mutex;

use tfdata_core::{Lineage, Result, Tensor};

/// A source's splits, in order. `reset` starts the next repetition;
/// `skip` fast-forwards past splits already handed out before a restart.
pub trait SplitProvider: Send + Sync {
    /// The next split, or `None` at the end of this repetition.
    fn get_next(&self) -> Result<Option<Tensor>>;
    /// The next split with the lineage its elements carry. Empty unless the
    /// provider tracks deliveries (a worker's remote provider does, so the
    /// dispatcher learns which splits are fully delivered; see
    /// [`tfdata_core::lineage`]).
    fn get_next_leased(&self) -> Result<Option<(Tensor, Lineage)>> {
        Ok(self.get_next()?.map(|t| (t, Lineage::default())))
    }
    fn reset(&self) -> Result<()>;
    fn skip(&self, n: u64) -> Result<()> {
        for _ in 0..n {
            if self.get_next()?.is_none() {
                break;
            }
        }
        Ok(())
    }
    /// Number of splits per repetition (−2 if unknown).
    fn cardinality(&self) -> i64;
    /// The split at `index` of a repetition (`None` past its end), for a
    /// lane of a deterministic read, which takes splits out of order
    /// ([`lanes::LaneSplitProvider`]). By default the provider restarts and
    /// walks to it (O(index)), leaving its position after it; providers
    /// whose splits are computed from their index answer in O(1).
    fn split_at(&self, index: u64) -> Result<Option<Tensor>> {
        self.reset()?;
        self.skip(index)?;
        self.get_next()
    }
}

/// Number of values of `range(start, stop, step)`.
pub fn range_len(start: i64, stop: i64, step: i64) -> u64 {
    let (start, stop, step) = (start as i128, stop as i128, step as i128);
    let n = if step > 0 {
        (stop - start + step - 1).div_euclid(step)
    } else if step < 0 {
        (start - stop - step - 1).div_euclid(-step)
    } else {
        0
    };
    n.max(0) as u64
}

/// Splits `start, start + step, ...` below `stop` (`range`'s values).
pub struct RangeSplitProvider {
    start: i64,
    step: i64,
    count: u64,
    next: Mutex<u64>,
}

impl RangeSplitProvider {
    pub fn new(start: i64, stop: i64, step: i64) -> Self {
        let count = range_len(start, stop, step);
        RangeSplitProvider {
            start,
            step,
            count,
            next: Mutex::new(0),
        }
    }
}

impl SplitProvider for RangeSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        if *next >= self.count {
            return Ok(None);
        }
        let value = self
            .start
            .wrapping_add((*next as i64).wrapping_mul(self.step));
        *next += 1;
        Ok(Some(Tensor::scalar(value)))
    }

    fn reset(&self) -> Result<()> {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = 0;
        Ok(())
    }

    fn skip(&self, n: u64) -> Result<()> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *next = next.saturating_add(n).min(self.count);
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        self.count as i64
    }

    fn split_at(&self, index: u64) -> Result<Option<Tensor>> {
        Ok((index < self.count).then(|| {
            Tensor::scalar(
                self.start
                    .wrapping_add((index as i64).wrapping_mul(self.step)),
            )
        }))
    }
}

/// A fixed list of splits, in order (a Parquet file's row groups as
/// `[file, row group]` pairs).
pub struct ListSplitProvider {
    splits: Vec<Tensor>,
    next: Mutex<usize>,
}

impl ListSplitProvider {
    pub fn new(splits: Vec<Tensor>) -> Self {
        ListSplitProvider {
            splits,
            next: Mutex::new(0),
        }
    }
}

impl SplitProvider for ListSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let split = self.splits.get(*next).cloned();
        *next += usize::from(split.is_some());
        Ok(split)
    }

    fn reset(&self) -> Result<()> {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = 0;
        Ok(())
    }

    fn skip(&self, n: u64) -> Result<()> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *next = next
            .saturating_add(usize::try_from(n).unwrap_or(usize::MAX))
            .min(self.splits.len());
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        self.splits.len() as i64
    }

    fn split_at(&self, index: u64) -> Result<Option<Tensor>> {
        Ok(usize::try_from(index)
            .ok()
            .and_then(|i| self.splits.get(i))
            .cloned())
    }
}

/// Splits `0, 1, ..., n − 1` (indices of slices or files).
pub struct IndexSplitProvider {
    count: u64,
    next: Mutex<u64>,
}

impl IndexSplitProvider {
    pub fn new(count: u64) -> Self {
        IndexSplitProvider {
            count,
            next: Mutex::new(0),
        }
    }

    /// Splits without end (`0, 1, ...` up to `i64::MAX`), for a source that
    /// ignores them: TensorFlow gives `RandomDataset` such a provider, so
    /// dispatchers and workers agree on the number of providers while every
    /// worker draws the whole random stream.
    pub fn unbounded() -> Self {
        Self::new(i64::MAX as u64)
    }
}

impl SplitProvider for IndexSplitProvider {
    fn get_next(&self) -> Result<Option<Tensor>> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        if *next >= self.count {
            return Ok(None);
        }
        let value = *next as i64;
        *next += 1;
        Ok(Some(Tensor::scalar(value)))
    }

    fn reset(&self) -> Result<()> {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) = 0;
        Ok(())
    }

    fn skip(&self, n: u64) -> Result<()> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        *next = next.saturating_add(n).min(self.count);
        Ok(())
    }

    fn cardinality(&self) -> i64 {
        if self.count == i64::MAX as u64 {
            // TensorFlow's kint64max provider counts as infinite.
            crate::INFINITE_CARDINALITY
        } else {
            self.count as i64
        }
    }

    fn split_at(&self, index: u64) -> Result<Option<Tensor>> {
        Ok((index < self.count).then(|| Tensor::scalar(index as i64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(p: &dyn SplitProvider) -> Vec<i64> {
        let mut out = Vec::new();
        while let Some(t) = p.get_next().unwrap() {
            out.push(t.to_scalar::<i64>().unwrap());
        }
        out
    }

    #[test]
    fn range_splits_are_values_and_reset_restarts() {
        let p = RangeSplitProvider::new(3, 12, 4);
        assert_eq!(drain(&p), vec![3, 7, 11]);
        assert_eq!(drain(&p), Vec::<i64>::new());
        p.reset().unwrap();
        p.skip(1).unwrap();
        assert_eq!(drain(&p), vec![7, 11]);
        assert_eq!(p.cardinality(), 3);
    }

    #[test]
    fn index_splits_skip_after_restart() {
        let p = IndexSplitProvider::new(5);
        p.skip(3).unwrap();
        assert_eq!(drain(&p), vec![3, 4]);
        p.skip(10).unwrap();
        assert_eq!(drain(&p), Vec::<i64>::new());
    }

    /// The O(1) overrides answer what walking to the index (the trait's
    /// default) answers, including past the end.
    #[test]
    fn split_at_matches_walking() {
        struct Walking(RangeSplitProvider);
        impl SplitProvider for Walking {
            fn get_next(&self) -> Result<Option<Tensor>> {
                self.0.get_next()
            }
            fn reset(&self) -> Result<()> {
                self.0.reset()
            }
            fn cardinality(&self) -> i64 {
                self.0.cardinality()
            }
        }
        let scalar = |t: Option<Tensor>| t.map(|t| t.to_scalar::<i64>().unwrap());
        let walking = Walking(RangeSplitProvider::new(3, 40, 4));
        let range = RangeSplitProvider::new(3, 40, 4);
        let list = ListSplitProvider::new((0..7i64).map(|i| Tensor::scalar(i * 10)).collect());
        let index = IndexSplitProvider::new(7);
        for i in [0u64, 1, 5, 9, 10, 11, u64::MAX] {
            assert_eq!(
                scalar(range.split_at(i).unwrap()),
                scalar(walking.split_at(i).unwrap()),
                "range at {i}"
            );
            let expected = (i < 7).then_some(i as i64);
            assert_eq!(scalar(index.split_at(i).unwrap()), expected);
            assert_eq!(scalar(list.split_at(i).unwrap()), expected.map(|v| v * 10));
        }
    }
}

/// Split providers for sources' tests: splits handed out again with the
/// positions readers already have, as a worker's remote provider hands out
/// a lost worker's splits.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use tfdata_core::lineage::{SplitLease, SplitName};
    use tfdata_core::positions::PositionSet;
    use tfdata_core::{Lineage, Result, Tensor};

    use super::SplitProvider;

    /// `splits` in order, the i-th leased with `skip[i]`'s positions (each
    /// a position inside the split, e.g. `[k]` for a source's k-th
    /// element) left out; records which splits were released.
    pub struct SkippingSplits {
        splits: Vec<Tensor>,
        skip: BTreeMap<usize, Vec<Vec<i64>>>,
        next: Mutex<usize>,
        pub released: Arc<Mutex<Vec<usize>>>,
    }

    impl SkippingSplits {
        pub fn new(splits: Vec<Tensor>, skip: BTreeMap<usize, Vec<Vec<i64>>>) -> Self {
            SkippingSplits {
                splits,
                skip,
                next: Mutex::new(0),
                released: Arc::default(),
            }
        }
    }

    impl SplitProvider for SkippingSplits {
        fn get_next(&self) -> Result<Option<Tensor>> {
            Ok(self.get_next_leased()?.map(|(t, _)| t))
        }

        fn get_next_leased(&self) -> Result<Option<(Tensor, Lineage)>> {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let i = *next;
            let Some(split) = self.splits.get(i).cloned() else {
                return Ok(None);
            };
            *next += 1;
            let mut skip = PositionSet::default();
            for p in self.skip.get(&i).into_iter().flatten() {
                skip.insert(p);
            }
            let released = Arc::clone(&self.released);
            let name = SplitName {
                provider: 0,
                repetition: 0,
                index: i as i64,
            };
            let lease = SplitLease::named_skipping(name, skip, move || {
                released.lock().unwrap_or_else(|p| p.into_inner()).push(i);
            });
            Ok(Some((split, Lineage::of(lease))))
        }

        fn reset(&self) -> Result<()> {
            *self.next.lock().unwrap_or_else(|p| p.into_inner()) = 0;
            Ok(())
        }

        fn cardinality(&self) -> i64 {
            self.splits.len() as i64
        }
    }
}
