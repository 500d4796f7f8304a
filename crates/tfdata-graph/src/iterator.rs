//! An iterator over a dataset inside one function call: what TensorFlow's
//! `iter(ds)` and `next(it)` become in a traced function
//! (`AnonymousIteratorV3`, `MakeIterator`, `IteratorGetNext`). The handle
//! is made empty, bound to a dataset, then read; it lives as long as the
//! call that made it (each element's call makes its own).
//!
//! A handle may also be named by a string (`IteratorToStringHandle`), found
//! again by that name while it lives ([`IteratorHandle::by_name`]), and its
//! position saved and restored (`SerializeIterator`, `DeserializeIterator`:
//! [`IteratorState`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tfdata_core::{DType, Element, Error, Result};
use tfdata_dataset::spec::Shape;
use tfdata_dataset::{Dataset, ElementIterator};

/// The iterator a handle reads: its dataset and how many elements it has
/// produced since it was bound (its position, which a saved state keeps).
struct Bound {
    dataset: Dataset,
    iterator: Box<dyn ElementIterator>,
    produced: u64,
}

/// One iterator resource: unbound until `MakeIterator` gives it a dataset.
pub struct IteratorHandle {
    state: Mutex<Option<Bound>>,
    /// The `output_types` and `output_shapes` the handle was made with.
    types: Vec<DType>,
    shapes: Vec<Shape>,
    /// The container and name a string handle gives it: fixed for a named
    /// iterator (`IteratorV2`), made (and registered) the first time one is
    /// asked for an anonymous one.
    container: &'static str,
    name: OnceLock<String>,
    /// For a handle made from a string (`IteratorFromStringHandle`): the
    /// iterator it names, which it does not keep alive. TensorFlow frees an
    /// anonymous iterator with the last use of the handle that made it,
    /// and a handle from a string then finds nothing.
    alias_of: Option<Weak<IteratorHandle>>,
}

/// A saved position (`SerializeIterator`'s output): the dataset the
/// iterator read and how many elements it had produced.
///
/// Restoring makes a fresh iterator over the restored iterator's dataset
/// and moves it past that many elements, the way a restored tf.data service
/// reader skips what it consumed. That gives TensorFlow's elements only for
/// a pipeline whose fresh iterators all produce the same elements, and only
/// into the pipeline the state came from, so [`IteratorHandle::restore`]
/// refuses the others rather than continue somewhere else.
#[derive(Debug)]
pub struct IteratorState {
    dataset: Dataset,
    produced: u64,
}

impl std::fmt::Debug for IteratorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IteratorHandle")
    }
}

impl Default for IteratorHandle {
    fn default() -> Self {
        Self::new(Vec::new(), Vec::new())
    }
}

/// The handles that have been given a name, by container and name: what a
/// string handle finds. Weak, so a handle is freed with its last reference
/// as before, and its entry leaves with it (`Drop`), as TensorFlow's
/// anonymous resources leave the resource manager.
type Names = HashMap<(&'static str, String), Weak<IteratorHandle>>;

fn names() -> &'static Mutex<Names> {
    static NAMES: OnceLock<Mutex<Names>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock_names() -> Result<std::sync::MutexGuard<'static, Names>> {
    names()
        .lock()
        .map_err(|_| Error::Internal("the iterator names' lock was poisoned".into()))
}

impl IteratorHandle {
    pub fn new(types: Vec<DType>, shapes: Vec<Shape>) -> Self {
        IteratorHandle {
            state: Mutex::new(None),
            types,
            shapes,
            container: "Anonymous",
            name: OnceLock::new(),
            alias_of: None,
        }
    }

    /// A node's own iterator (`Iterator`, `IteratorV2` without a shared
    /// name): TensorFlow names it `_<n>_<node>` in container `localhost`.
    pub fn named(types: Vec<DType>, shapes: Vec<Shape>, node: &str) -> Result<Arc<Self>> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut handle = Self::new(types, shapes);
        handle.container = "localhost";
        let name = format!("_{id}_{node}");
        handle.name = OnceLock::from(name.clone());
        let handle = Arc::new(handle);
        lock_names()?.insert(("localhost", name), Arc::downgrade(&handle));
        Ok(handle)
    }

    /// A handle to `target`, as a string handle named it (`name`).
    pub fn alias(target: &Arc<IteratorHandle>, name: String) -> Self {
        IteratorHandle {
            state: Mutex::new(None),
            types: target.types.clone(),
            shapes: target.shapes.clone(),
            container: target.container,
            name: OnceLock::from(name),
            alias_of: Some(Arc::downgrade(target)),
        }
    }

    /// The iterator this handle reads: itself, or the one a handle from a
    /// string names while that one lives.
    fn target(self: &Arc<Self>) -> Result<Arc<IteratorHandle>> {
        match &self.alias_of {
            None => Ok(self.clone()),
            Some(weak) => weak.upgrade().ok_or_else(|| {
                not_found(self.container, self.name.get().map_or("", String::as_str))
            }),
        }
    }

    /// The declared component types and shapes.
    pub fn declared(&self) -> (&[DType], &[Shape]) {
        (&self.types, &self.shapes)
    }

    /// Starts iterating `dataset` from its first element (TensorFlow's
    /// `MakeIterator` replaces whatever the handle iterated before).
    pub fn bind(self: &Arc<Self>, dataset: &Dataset) -> Result<()> {
        let this = self.target()?;
        let iterator = dataset.iter()?;
        *this.lock()? = Some(Bound {
            dataset: dataset.clone(),
            iterator,
            produced: 0,
        });
        Ok(())
    }

    /// The next element, `None` at the end of the dataset.
    pub fn next(self: &Arc<Self>) -> Result<Option<Element>> {
        let this = self.target()?;
        let mut state = this.lock()?;
        match state.as_mut() {
            Some(bound) => {
                let element = bound.iterator.next_element()?;
                if element.is_some() {
                    bound.produced += 1;
                }
                Ok(element)
            }
            None => Err(Error::FailedPrecondition(
                "GetNext() failed because the iterator has not been initialized. Ensure that \
                 you have run the initializer operation for this iterator before getting the \
                 next element."
                    .into(),
            )),
        }
    }

    /// Drops the iterator (`DeleteIterator`): later reads fail as unbound.
    pub fn release(self: &Arc<Self>) -> Result<()> {
        *self.target()?.lock()? = None;
        Ok(())
    }

    /// The handle's position (`SerializeIterator`).
    pub fn save(self: &Arc<Self>) -> Result<IteratorState> {
        match self.target()?.lock()?.as_ref() {
            Some(bound) => Ok(IteratorState {
                dataset: bound.dataset.clone(),
                produced: bound.produced,
            }),
            None => Err(Error::FailedPrecondition(
                "Save() failed because the iterator has not been initialized. Ensure that you \
                 have run the initializer operation for this iterator before saving it."
                    .into(),
            )),
        }
    }

    /// Moves the handle to a saved position (`DeserializeIterator`): a
    /// fresh iterator over the dataset this handle is bound to, past the
    /// elements the saved one had produced.
    pub fn restore(self: &Arc<Self>, saved: &IteratorState) -> Result<()> {
        let this = self.target()?;
        let dataset = match this.lock()?.as_ref() {
            Some(bound) => bound.dataset.clone(),
            None => {
                return Err(Error::FailedPrecondition(format!(
                    "Failed to restore dataset iterator from checkpoint: Restore() failed \
                     because the iterator has not been initialized. Ensure that you have run \
                     the initializer operation for this iterator before restoring it.. \
                     {CHANGED}"
                )));
            }
        };
        if !same_pipeline(&dataset, &saved.dataset) {
            return Err(Error::Unimplemented(format!(
                "Failed to restore dataset iterator from checkpoint: the state was saved from \
                 another pipeline, which tfdata workers do not restore. {CHANGED}"
            )));
        }
        if let Some(op) = random_op(&dataset) {
            return Err(Error::Unimplemented(format!(
                "Failed to restore dataset iterator from checkpoint: the pipeline's `{op}` \
                 draws random numbers, whose state tfdata workers do not save"
            )));
        }
        let mut iterator = dataset.iter()?;
        let produced = iterator.skip_elements(saved.produced)?;
        *this.lock()? = Some(Bound {
            dataset,
            iterator,
            produced,
        });
        Ok(())
    }

    /// The name a string handle carries, registered so that
    /// [`IteratorHandle::by_name`] finds this handle while it lives.
    /// `pointer` is the handle's address, which TensorFlow's names hold.
    pub fn name(self: &Arc<Self>) -> Result<(&'static str, String)> {
        if self.alias_of.is_some() {
            // A handle from a string names what the string named.
            return self.target()?.name();
        }
        if let Some(name) = self.name.get() {
            return Ok((self.container, name.clone()));
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("Resource-{id}-at-{:p}", Arc::as_ptr(self));
        let name = self.name.get_or_init(|| name).clone();
        lock_names()?.insert((self.container, name.clone()), Arc::downgrade(self));
        Ok((self.container, name))
    }

    /// The live handle a string handle names, if any.
    pub fn by_name(container: &str, name: &str) -> Result<Option<Arc<IteratorHandle>>> {
        let names = lock_names()?;
        // Keyed by a static container: the few containers there are make
        // looking the name up under each cheap.
        Ok(["Anonymous", "localhost"]
            .into_iter()
            .filter(|c| *c == container)
            .find_map(|c| names.get(&(c, name.to_string())))
            .and_then(Weak::upgrade))
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<Bound>>> {
        self.state
            .lock()
            .map_err(|_| Error::Internal("an iterator's lock was poisoned".into()))
    }
}

impl Drop for IteratorHandle {
    fn drop(&mut self) {
        if self.alias_of.is_some() {
            return;
        }
        if let Some(name) = self.name.get()
            && let Ok(mut names) = names().lock()
        {
            names.remove(&(self.container, name.clone()));
        }
    }
}

/// TensorFlow's error for a string handle naming no live iterator.
pub fn not_found(container: &str, name: &str) -> Error {
    Error::Remote {
        code: tonic::Code::NotFound,
        message: format!("Resource {container}/{name}/{TYPE_NAME} does not exist."),
    }
}

/// The iterator resource's C++ type, as string handles name it
/// (`typeid(IteratorResource).name()`).
pub const TYPE_NAME: &str = "N10tensorflow4data16IteratorResourceE";

/// The end of TensorFlow's restore errors.
const CHANGED: &str = "Make sure the dataset definition has not changed between the process \
                       that saved the checkpoint and the process that is restoring it.";

/// Whether two datasets are one pipeline: the same ops with the same
/// attributes over the same inputs (a range built twice with the same
/// bounds is; a function is the same only as the same compiled body).
fn same_pipeline(a: &Dataset, b: &Dataset) -> bool {
    let mut todo = vec![(a.clone(), b.clone())];
    // Each op is compared once per pair: bounded by the pipelines' sizes,
    // which translation already bounds.
    let mut budget = crate::MAX_PIPELINE_OPS;
    while let Some((a, b)) = todo.pop() {
        if a.op_key() == b.op_key() {
            continue;
        }
        if budget == 0 {
            return false;
        }
        budget -= 1;
        let (x, y) = (a.op(), b.op());
        if x.name() != y.name() || x.attrs() != y.attrs() {
            return false;
        }
        let (xs, ys) = (x.inputs(), y.inputs());
        if xs.len() != ys.len() {
            return false;
        }
        todo.extend(xs.into_iter().zip(ys));
    }
    true
}

/// The engine's ops whose elements depend on random numbers drawn as they
/// iterate (shuffles, random sampling, random sources, shuffled file
/// lists): a fresh iterator over them draws anew, so replaying one to a
/// saved position would not reach the saved elements.
const RANDOM_OPS: &[&str] = &[
    "shuffle",
    "random",
    "directed_interleave",
    "sampling",
    "list_files",
];

/// The first op of `dataset` that draws random numbers, if any.
fn random_op(dataset: &Dataset) -> Option<&'static str> {
    let mut todo = vec![dataset.clone()];
    let mut budget = crate::MAX_PIPELINE_OPS;
    while let Some(d) = todo.pop() {
        if budget == 0 {
            return Some("pipeline too large to check");
        }
        budget -= 1;
        let name = d.op().name();
        if RANDOM_OPS.contains(&name) {
            return Some(name);
        }
        todo.extend(d.op().inputs());
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use super::*;

    fn first(handle: &Arc<IteratorHandle>) -> i64 {
        let element = handle.next().unwrap().unwrap();
        element.components[0].to_vec::<i64>().unwrap()[0]
    }

    #[test]
    fn a_restored_position_continues_at_the_saved_element() {
        let handle = Arc::new(IteratorHandle::default());
        handle.bind(&Dataset::range(10)).unwrap();
        assert_eq!(first(&handle), 0);
        let saved = handle.save().unwrap();
        assert_eq!((first(&handle), first(&handle)), (1, 2));
        handle.restore(&saved).unwrap();
        assert_eq!(first(&handle), 1);
    }

    #[test]
    fn restoring_a_shuffled_or_another_pipeline_is_refused() {
        let shuffled = Dataset::range(10).shuffle(4, None, true);
        let handle = Arc::new(IteratorHandle::default());
        handle.bind(&shuffled).unwrap();
        handle.next().unwrap();
        let saved = handle.save().unwrap();
        let err = handle.restore(&saved).unwrap_err();
        assert!(err.to_string().contains("`shuffle`"), "{err}");

        let other = Arc::new(IteratorHandle::default());
        other.bind(&Dataset::range(11)).unwrap();
        let err = other.restore(&saved).unwrap_err();
        assert!(err.to_string().contains("another pipeline"), "{err}");
    }

    #[test]
    fn a_string_name_finds_the_handle_only_while_it_lives() {
        let handle = Arc::new(IteratorHandle::default());
        let (container, name) = handle.name().unwrap();
        assert_eq!(container, "Anonymous");
        assert!(name.starts_with("Resource-"), "{name}");
        let found = IteratorHandle::by_name(container, &name).unwrap().unwrap();
        assert!(Arc::ptr_eq(&found, &handle));
        let alias = Arc::new(IteratorHandle::alias(&found, name.clone()));
        assert_eq!(alias.name().unwrap().1, name);
        drop((found, handle));
        assert!(IteratorHandle::by_name(container, &name).unwrap().is_none());
        assert!(alias.next().is_err());
    }
}
