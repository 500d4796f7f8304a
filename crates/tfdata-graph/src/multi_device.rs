//! A multi-device iterator inside a function (`AnonymousMultiDeviceIterator`,
//! `MultiDeviceIteratorInit`, `MultiDeviceIteratorGetNextFromShard`): one
//! iterator over a dataset whose elements are dealt to `devices` shards in
//! turn (element k to shard k mod n), each shard read on its own. Our
//! workers have one CPU, where TensorFlow places every shard too when the
//! devices name no other it has; the shards only decide who gets which
//! element.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tfdata_core::{DType, Element, Error, Result};
use tfdata_dataset::spec::Shape;
use tfdata_dataset::{Dataset, ElementIterator};

/// What `MultiDeviceIteratorInit` started: the iterator, the elements read
/// for shards that have not asked for them yet, and whose turn is next.
struct Running {
    incarnation: i64,
    iterator: Box<dyn ElementIterator>,
    buffers: Vec<VecDeque<Element>>,
    next_shard: usize,
    ended: bool,
    /// The most elements one shard's buffer holds. TensorFlow's background
    /// reader waits when a shard's buffer is full, so a read that needs more
    /// (one shard read far ahead of another) never returns there; ours
    /// fails instead of waiting forever.
    max_buffer: usize,
}

pub struct MultiDeviceIterator {
    num_shards: usize,
    types: Vec<DType>,
    shapes: Vec<Shape>,
    state: Mutex<Option<Running>>,
    /// How many times the iterator was initialised: `Init` answers the new
    /// count, and reads name the incarnation they expect.
    incarnations: Mutex<i64>,
    /// The container and name a string handle gives it: fixed for a named
    /// `MultiDeviceIterator`, made (and registered) the first time one is
    /// asked for an anonymous one.
    container: &'static str,
    name: OnceLock<String>,
    /// For a handle made from a string: the iterator it names, which it
    /// does not keep alive (as in TensorFlow, where an anonymous iterator
    /// goes with the last use of the handle that made it).
    alias_of: Option<Weak<MultiDeviceIterator>>,
}

/// The multi-device iterator resource's C++ type as string handles name it,
/// and its type hash as TensorFlow 2.21 on Linux writes it (read off the
/// handles TensorFlow makes).
pub const TYPE_NAME: &str = "N10tensorflow4data12_GLOBAL__N_119MultiDeviceIteratorE";
pub const TYPE_HASH: u64 = 16_662_786_403_704_826_828;

/// The iterators a string handle may name, by container and name (weak: an
/// entry leaves with its iterator).
type Names = HashMap<(String, String), Weak<MultiDeviceIterator>>;

fn names() -> &'static Mutex<Names> {
    static NAMES: OnceLock<Mutex<Names>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock_names() -> Result<std::sync::MutexGuard<'static, Names>> {
    names()
        .lock()
        .map_err(|_| Error::Internal("the multi-device iterator names' lock was poisoned".into()))
}

/// TensorFlow's error for a string handle naming no live iterator.
pub fn not_found(container: &str, name: &str) -> Error {
    Error::Remote {
        code: tonic::Code::NotFound,
        message: format!("Resource {container}/{name}/{TYPE_NAME} does not exist."),
    }
}

impl std::fmt::Debug for MultiDeviceIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MultiDeviceIterator")
    }
}

impl MultiDeviceIterator {
    /// An anonymous iterator (`AnonymousMultiDeviceIterator{,V3}`).
    pub fn new(num_shards: usize, types: Vec<DType>, shapes: Vec<Shape>) -> Self {
        MultiDeviceIterator {
            num_shards,
            types,
            shapes,
            state: Mutex::new(None),
            incarnations: Mutex::new(0),
            container: "Anonymous",
            name: OnceLock::new(),
            alias_of: None,
        }
    }

    /// A named iterator (`MultiDeviceIterator`): TensorFlow's names a
    /// node's private one `_<n>_<node>` in container `localhost`.
    pub fn named(
        num_shards: usize,
        types: Vec<DType>,
        shapes: Vec<Shape>,
        node: &str,
    ) -> Result<Arc<Self>> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut it = Self::new(num_shards, types, shapes);
        it.container = "localhost";
        it.name = OnceLock::from(format!("_{id}_{node}"));
        let it = Arc::new(it);
        it.register()?;
        Ok(it)
    }

    /// A handle to `target`, as a string handle named it.
    fn alias(target: &Arc<Self>, name: String) -> Self {
        let mut it = Self::new(
            target.num_shards,
            target.types.clone(),
            target.shapes.clone(),
        );
        it.container = target.container;
        it.name = OnceLock::from(name);
        it.alias_of = Some(Arc::downgrade(target));
        it
    }

    fn target(self: &Arc<Self>) -> Result<Arc<Self>> {
        match &self.alias_of {
            None => Ok(self.clone()),
            Some(weak) => weak.upgrade().ok_or_else(|| {
                not_found(self.container, self.name.get().map_or("", String::as_str))
            }),
        }
    }

    fn register(self: &Arc<Self>) -> Result<()> {
        if let Some(name) = self.name.get() {
            lock_names()?.insert(
                (self.container.to_string(), name.clone()),
                Arc::downgrade(self),
            );
        }
        Ok(())
    }

    /// The container and name a string handle carries, registered so that
    /// [`MultiDeviceIterator::by_name`] finds this iterator while it lives.
    pub fn name(self: &Arc<Self>) -> Result<(&'static str, String)> {
        let this = self.target()?;
        if let Some(name) = this.name.get() {
            return Ok((this.container, name.clone()));
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("Resource-{id}-at-{:p}", Arc::as_ptr(&this));
        let name = this.name.get_or_init(|| name).clone();
        this.register()?;
        Ok((this.container, name))
    }

    /// A handle to the live iterator a string handle names.
    pub fn by_name(container: &str, name: &str) -> Result<Arc<Self>> {
        let found = lock_names()?
            .get(&(container.to_string(), name.to_string()))
            .and_then(Weak::upgrade);
        match found {
            Some(target) => Ok(Arc::new(Self::alias(&target, name.to_string()))),
            None => Err(not_found(container, name)),
        }
    }

    /// The declared component types and shapes.
    pub fn declared(&self) -> (&[DType], &[Shape]) {
        (&self.types, &self.shapes)
    }

    /// Starts dealing `dataset`'s elements from the first, to shard 0
    /// first; the new incarnation's id (1 for the first).
    pub fn init(self: &Arc<Self>, dataset: &Dataset, max_buffer_size: i64) -> Result<i64> {
        let this = self.target()?;
        let iterator = dataset.iter()?;
        let incarnation = {
            let mut n = this.incarnations.lock().map_err(|_| {
                Error::Internal("a multi-device iterator's lock was poisoned".into())
            })?;
            *n += 1;
            *n
        };
        *this.lock()? = Some(Running {
            incarnation,
            iterator,
            buffers: (0..this.num_shards).map(|_| VecDeque::new()).collect(),
            next_shard: 0,
            ended: false,
            max_buffer: usize::try_from(max_buffer_size).unwrap_or(0).max(1),
        });
        Ok(incarnation)
    }

    /// Shard `shard`'s next element, `None` once the dataset has ended and
    /// the shard's buffered elements are read.
    pub fn next_from_shard(
        self: &Arc<Self>,
        shard: i64,
        incarnation: i64,
    ) -> Result<Option<Element>> {
        let this = self.target()?;
        let mut state = this.lock()?;
        let Some(run) = state.as_mut() else {
            // TensorFlow 2.21 crashes here (it reads an iterator never made).
            return Err(Error::FailedPrecondition(
                "GetNextFromShard() failed because the multi-device iterator has not been \
                 initialized: run MultiDeviceIteratorInit first"
                    .into(),
            ));
        };
        if incarnation != run.incarnation {
            return Err(Error::InvalidArgument(format!(
                "Invalid incarnation id. Provided: {incarnation}; Expected: {}",
                run.incarnation
            )));
        }
        let shard = match usize::try_from(shard) {
            Ok(s) if s < self.num_shards => s,
            // TensorFlow 2.21 crashes here too (an index past its buffers).
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "shard_num {shard} is out of range: the iterator has {} shards",
                    self.num_shards
                )));
            }
        };
        // Each pass reads one element, for the shard whose turn it is; the
        // buffers' bound ends the loop before the dataset does.
        loop {
            if let Some(element) = run.buffers[shard].pop_front() {
                return Ok(Some(element));
            }
            if run.ended {
                return Ok(None);
            }
            let turn = run.next_shard;
            if turn != shard && run.buffers[turn].len() >= run.max_buffer {
                return Err(Error::FailedPrecondition(format!(
                    "shard {shard} is read too far ahead of shard {turn}: its next element \
                     needs shard {turn}'s buffer of {} elements full, where TensorFlow waits \
                     for shard {turn} to be read",
                    run.max_buffer
                )));
            }
            match run.iterator.next_element()? {
                Some(element) => {
                    run.buffers[turn].push_back(element);
                    run.next_shard = (turn + 1) % self.num_shards;
                }
                None => run.ended = true,
            }
        }
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Option<Running>>> {
        self.state
            .lock()
            .map_err(|_| Error::Internal("a multi-device iterator's lock was poisoned".into()))
    }
}

impl Drop for MultiDeviceIterator {
    fn drop(&mut self) {
        if self.alias_of.is_some() {
            return;
        }
        if let Some(name) = self.name.get()
            && let Ok(mut names) = names().lock()
        {
            names.remove(&(self.container.to_string(), name.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

    use super::*;

    fn value(e: Option<Element>) -> i64 {
        e.unwrap().components[0].to_vec::<i64>().unwrap()[0]
    }

    #[test]
    fn shards_get_elements_in_turn_and_a_read_too_far_ahead_fails() {
        let it = Arc::new(MultiDeviceIterator::new(2, Vec::new(), Vec::new()));
        let inc = it.init(&Dataset::range(10), 1).unwrap();
        assert_eq!(inc, 1);
        assert_eq!(value(it.next_from_shard(0, inc).unwrap()), 0);
        assert_eq!(value(it.next_from_shard(0, inc).unwrap()), 2);
        // Shard 1's buffer holds element 1: a third read of shard 0 would
        // need room for element 3 too, where TensorFlow waits forever.
        assert!(it.next_from_shard(0, inc).is_err());
        assert_eq!(value(it.next_from_shard(1, inc).unwrap()), 1);
        assert!(it.next_from_shard(2, inc).is_err());
        assert!(it.next_from_shard(1, inc + 1).is_err());
    }

    #[test]
    fn a_read_before_init_is_an_error() {
        let it = Arc::new(MultiDeviceIterator::new(1, Vec::new(), Vec::new()));
        assert!(it.next_from_shard(0, 1).is_err());
    }
}
