//! The iterator every op produces.

use tfdata_core::{Element, Result};

/// A running pipeline. `next_element` returns `Ok(None)` at the end. An
/// `Err` is the failure of one element: callers stop there (workers end the
/// task), except `ignore_errors`, which calls again; ops whose errors are
/// per element (`map`, parallel `map`, `prefetch`) then go on with the next
/// element as TensorFlow's do, and an input's own error ends the others.
pub trait ElementIterator: Send {
    fn next_element(&mut self) -> Result<Option<Element>>;

    /// Up to `max` next elements already stacked into one batch, for
    /// `batch`, from iterators that make their rows in bulk (`range`
    /// writes its values straight into the batch's buffer; unsplit
    /// `from_tensor_slices` hands out a slice of its tensors). Stacking
    /// element by element costs a tensor and an element per row, which is
    /// most of the time of `range(N).batch(1024)`. Everything else answers
    /// [`StackedRows::NotStackable`] and is read with `next_element`.
    fn next_stacked(&mut self, _max: usize) -> Result<StackedRows> {
        Ok(StackedRows::NotStackable)
    }

    /// Moves past up to `n` elements as if `next_element` had returned
    /// them, and says how many there were (fewer than `n` only at the end).
    /// A reader restored from a checkpoint starts a task here. By default
    /// the elements are made and dropped: functions run (they may keep
    /// state, and a filter decides what counts), but nothing is sent.
    /// Sources seek instead (`range`, `from_tensor_slices`), and `batch`
    /// skips its input's rows, so `range(N).batch(B)` skips in O(1).
    fn skip_elements(&mut self, n: u64) -> Result<u64> {
        let mut skipped = 0;
        while skipped < n {
            if self.next_element()?.is_none() {
                break;
            }
            skipped += 1;
        }
        Ok(skipped)
    }
}

/// [`ElementIterator::next_stacked`]'s answer.
pub enum StackedRows {
    /// This iterator makes elements one at a time.
    NotStackable,
    /// `rows` consecutive elements (1 ≤ rows ≤ max) stacked along a new
    /// first dimension, with their lineage; fewer than `max` only when the
    /// input ends after them.
    Rows { batch: Element, rows: usize },
    /// The input has ended.
    End,
}

impl Iterator for dyn ElementIterator {
    type Item = Result<Element>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_element().transpose()
    }
}

/// An iterator over a fixed list of elements.
pub(crate) struct VecIter {
    pub items: std::vec::IntoIter<Element>,
}

impl ElementIterator for VecIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        Ok(self.items.next())
    }
}
