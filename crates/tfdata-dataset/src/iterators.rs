//! The iterator every op produces.

use tfdata_core::{Element, Result};

/// A running pipeline. `next_element` returns `Ok(None)` at the end; an
/// `Err` ends the iteration (TensorFlow iterators do not resume after an
/// error).
pub trait ElementIterator: Send {
    fn next_element(&mut self) -> Result<Option<Element>>;
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
