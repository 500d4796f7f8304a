//! An iterator over a dataset inside one function call: what TensorFlow's
//! `iter(ds)` and `next(it)` become in a traced function
//! (`AnonymousIteratorV3`, `MakeIterator`, `IteratorGetNext`). The handle
//! is made empty, bound to a dataset, then read; it lives as long as the
//! call that made it (each element's call makes its own).

use std::sync::Mutex;

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::Dataset;
use tfdata_dataset::ElementIterator;

/// One iterator resource: unbound until `MakeIterator` gives it a dataset.
pub struct IteratorHandle {
    state: Mutex<Option<Box<dyn ElementIterator>>>,
}

impl std::fmt::Debug for IteratorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IteratorHandle")
    }
}

impl Default for IteratorHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl IteratorHandle {
    pub fn new() -> Self {
        IteratorHandle {
            state: Mutex::new(None),
        }
    }

    /// Starts iterating `dataset` from its first element (TensorFlow's
    /// `MakeIterator` replaces whatever the handle iterated before).
    pub fn bind(&self, dataset: &Dataset) -> Result<()> {
        let it = dataset.iter()?;
        *self.lock()? = Some(it);
        Ok(())
    }

    /// The next element, `None` at the end of the dataset.
    pub fn next(&self) -> Result<Option<Element>> {
        let mut state = self.lock()?;
        match state.as_mut() {
            Some(it) => it.next_element(),
            None => Err(Error::FailedPrecondition(
                "GetNext() failed because the iterator has not been initialized. Ensure that \
                 you have run the initializer operation for this iterator before getting the \
                 next element."
                    .into(),
            )),
        }
    }

    /// Drops the iterator (`DeleteIterator`): later reads fail as unbound.
    pub fn release(&self) -> Result<()> {
        *self.lock()? = None;
        Ok(())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<Box<dyn ElementIterator>>>> {
        self.state
            .lock()
            .map_err(|_| Error::Internal("an iterator's lock was poisoned".into()))
    }
}
