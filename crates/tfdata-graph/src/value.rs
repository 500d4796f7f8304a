//! What flows along a graph's edges: tensors, datasets (TensorFlow's
//! `DT_VARIANT` dataset handles, which dataset nodes produce and consume),
//! and resources.

use std::sync::Arc;

use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::Dataset;

use crate::iterator::{IteratorHandle, IteratorState};
use crate::list::TensorList;
use crate::multi_device::MultiDeviceIterator;
use crate::queue::FifoQueue;
use crate::reader::Reader;
use crate::table::LookupTable;
use crate::variable::Variable as ResourceVariable;

#[derive(Clone, Debug)]
pub enum Value {
    Tensor(Tensor),
    Dataset(Dataset),
    /// A resource handle (a seed generator, a memory cache, a constant
    /// handle TensorFlow serialised): the engine's ops keep such state
    /// themselves, so the handle is only passed along, never read.
    Resource,
    /// A seed generator (`AnonymousSeedGenerator`'s handle): the seeds a
    /// shuffle or random dataset reading it uses instead of its own.
    SeedGenerator(SeedGenerator),
    /// A lookup table (`HashTableV2`'s handle): made and filled when the
    /// graph runs, then shared read-only by the functions capturing it.
    Table(Arc<LookupTable>),
    /// A TensorList (TensorFlow's `DT_VARIANT` list of tensors, what a
    /// `tf.TensorArray` becomes): made, written and read inside one
    /// function call, carried through `While` loops.
    List(Arc<TensorList>),
    /// A `FIFOQueueV2` (work items for the legacy readers) and a legacy
    /// reader: made and used inside one function's calls.
    Queue(Arc<FifoQueue>),
    Reader(Arc<Reader>),
    /// An iterator over a dataset (`AnonymousIteratorV3`'s handle), made,
    /// bound and read inside one function call.
    Iterator(Arc<IteratorHandle>),
    /// An iterator's saved position (`SerializeIterator`'s output), until
    /// `DeserializeIterator` restores it.
    IteratorState(Arc<IteratorState>),
    /// A multi-device iterator (`AnonymousMultiDeviceIteratorV3`'s handle).
    MultiDeviceIterator(Arc<MultiDeviceIterator>),
    /// A `tf.experimental.Optional` (`IteratorGetNextAsOptional`'s
    /// output): an element's components, or none at the end.
    Optional(Option<Arc<[Tensor]>>),
    /// An element compressed as TensorFlow's `CompressElement` does
    /// (snappy), until `UncompressElement` reads it back.
    Compressed(Arc<tfdata_proto::data::CompressedElement>),
    /// A resource variable (`VarHandleOp`'s handle): made and assigned when
    /// the graph runs, then read and advanced by the functions capturing
    /// it (a `tf.random.Generator`'s state).
    Variable(Arc<ResourceVariable>),
    /// A dataset wrapped by `WrapDatasetVariant` (for passing across
    /// devices): no dataset op takes it until `UnwrapDatasetVariant`.
    WrappedDataset(Dataset),
}

/// `AnonymousSeedGenerator(seed, seed2, reshuffle)`: the seeds (both zero:
/// fresh ones), and whether each iteration draws new ones from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedGenerator {
    pub seed: i64,
    pub seed2: i64,
    pub reshuffle: bool,
}

impl Value {
    /// The tensor, or an error naming `what` wanted it.
    pub fn into_tensor(self, what: &str) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(other.not_a("tensor", what)),
        }
    }

    fn not_a(&self, want: &str, what: &str) -> Error {
        Error::InvalidArgument(format!(
            "{what}: expected a {want}, got {}",
            self.describe()
        ))
    }

    /// What the value is, for errors ("a float tensor", "a TensorList").
    pub fn describe(&self) -> String {
        match self {
            Value::Tensor(t) => format!("a {} tensor", t.dtype()),
            Value::Dataset(_) => "a dataset".into(),
            Value::Resource => "a resource handle".into(),
            Value::SeedGenerator(_) => "a seed generator".into(),
            Value::Table(_) => "a lookup table".into(),
            Value::List(_) => "a TensorList".into(),
            Value::Queue(_) => "a queue".into(),
            Value::Reader(_) => "a reader".into(),
            Value::Iterator(_) => "an iterator".into(),
            Value::IteratorState(_) => "an iterator state".into(),
            Value::MultiDeviceIterator(_) => "a multi-device iterator".into(),
            Value::Optional(_) => "an optional".into(),
            Value::Compressed(_) => "a compressed element".into(),
            Value::Variable(_) => "a resource variable".into(),
            Value::WrappedDataset(_) => "a wrapped dataset".into(),
        }
    }

    pub fn tensor(&self, what: &str) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(other.not_a("tensor", what)),
        }
    }

    pub fn into_dataset(self, what: &str) -> Result<Dataset> {
        match self {
            Value::Dataset(d) => Ok(d),
            // TensorFlow's message for a wrapped dataset where a dataset
            // is wanted.
            Value::WrappedDataset(_) => Err(Error::InvalidArgument(format!(
                "{what}: Tensor must be a Dataset object."
            ))),
            other => Err(other.not_a("dataset", what)),
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Self {
        Value::Tensor(t)
    }
}
