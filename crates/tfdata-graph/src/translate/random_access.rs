//! Random access to a dataset's elements, for the ops that read their input
//! by index (`GlobalShuffleDataset`, `GetElementAtIndex`).
//!
//! TensorFlow decides per op whether it can be read by index
//! (`RandomIndexingCompatible`): a source or an op that maps indices to its
//! input's (`map`, `batch(drop_remainder=True)`, `take`, `skip`, `shard`,
//! `concatenate`, `zip`, finite `repeat`, `prefetch`, `cache`) passes its
//! inputs' answer on, the first refusal among them; any other op refuses
//! with its own message. [`compatible`] gives the same answer on the
//! engine's ops, so the same pipelines are refused with TensorFlow's text.
//!
//! The engine's iterators are sequential, so element `k` of such a pipeline
//! is read as the `k`-th element of one pass over it ([`Prefix`]): the
//! same value TensorFlow computes by index, since every op above maps the
//! index to its input's without looking at other elements. Elements read
//! are kept (bounded by [`MAX_HELD_BYTES`]) so each is computed once.

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::{Dataset, ElementIterator, INFINITE_CARDINALITY, IterContext};

/// The most bytes of input elements a random-access reader keeps.
pub(crate) const MAX_HELD_BYTES: usize = crate::MAX_TENSOR_BYTES;

/// `Ok` when every op of `ds` can be read by index, else TensorFlow's
/// status for the op that refuses, as `"CODE: message"`.
pub(crate) fn compatible(ds: &Dataset) -> std::result::Result<(), String> {
    compatible_at(ds, 0)
}

fn compatible_at(ds: &Dataset, depth: usize) -> std::result::Result<(), String> {
    // Pipelines were already checked to nest at most this deep.
    if depth > crate::MAX_PIPELINE_DEPTH {
        return Err("FAILED_PRECONDITION: the pipeline nests too deep".into());
    }
    let op = ds.op();
    let refused = |tf_name: &str| {
        Err(format!(
            "FAILED_PRECONDITION: {tf_name} does not support random access."
        ))
    };
    match op.name() {
        "range" | "from_tensors" | "from_tensor_slices" | "listed_files" | "map" | "prefetch"
        | "cache" | "take" | "skip" | "shard" | "concatenate" | "zip" | "global_shuffle" => {}
        "batch" => {
            if op.attrs().get("drop_remainder") != Some(&tfdata_dataset::Attr::Bool(true)) {
                return Err(
                    "FAILED_PRECONDITION: BatchDatasetV2 does not support global \
                            shuffling with `drop_remainder=False`."
                        .into(),
                );
            }
        }
        "repeat" => {
            if ds.cardinality() == INFINITE_CARDINALITY {
                return Err(
                    "FAILED_PRECONDITION: `repeat(-1)` does not support random access \
                            of tf.data datasets."
                        .into(),
                );
            }
        }
        "flat_map" => {
            return Err(
                "UNIMPLEMENTED: Please consider applying maps on each dataset, \
                        concatenating them into one dataset and apply global shuffle dataset op \
                        onto the dataset to achieve the same result as flat map with global \
                        shuffling."
                    .into(),
            );
        }
        "filter" => return refused("FilterDataset"),
        "shuffle" => return refused("ShuffleDatasetV3"),
        "interleave" => return refused("InterleaveDataset"),
        "unbatch" => return refused("UnbatchDataset"),
        "padded_batch" => return refused("PaddedBatchDatasetV2"),
        "window" => return refused("WindowDataset"),
        "ignore_errors" => return refused("IgnoreErrorsDataset"),
        "take_while" => return refused("TakeWhileDataset"),
        "scan" => return refused("ScanDataset"),
        "unique" => return refused("UniqueDataset"),
        "rebatch" => return refused("RebatchDatasetV2"),
        "group_by_window" => return refused("GroupByWindowDataset"),
        "group_by_reducer" => return refused("GroupByReducerDataset"),
        "directed_interleave" => return refused("DirectedInterleaveDataset"),
        "sampling" => return refused("SamplingDataset"),
        // Ops TensorFlow may read by index that the engine does not (a
        // `RandomDataset` computes its k-th value from the index): refused
        // rather than read in another order.
        other => return refused(other),
    }
    for input in op.inputs() {
        compatible_at(&input, depth + 1)?;
    }
    Ok(())
}

/// The elements of one pass over a dataset, read as far as asked and kept.
pub(crate) struct Prefix {
    input: Box<dyn ElementIterator>,
    held: Vec<Element>,
    held_bytes: usize,
    ended: bool,
    what: &'static str,
}

impl Prefix {
    pub(crate) fn new(ds: &Dataset, ctx: &IterContext, what: &'static str) -> Result<Self> {
        Ok(Prefix {
            input: ds.iter_with(ctx)?,
            held: Vec::new(),
            held_bytes: 0,
            ended: false,
            what,
        })
    }

    /// Element `index`, or `None` past the end.
    pub(crate) fn get(&mut self, index: usize) -> Result<Option<&Element>> {
        // Bounded: each turn holds one more element, and the held bytes
        // are capped (an element of no bytes still costs its slot).
        while self.held.len() <= index && !self.ended {
            match self.input.next_element()? {
                Some(e) => {
                    self.held_bytes = self
                        .held_bytes
                        .saturating_add(e.byte_size().max(std::mem::size_of::<Element>()));
                    if self.held_bytes > MAX_HELD_BYTES {
                        return Err(Error::InvalidArgument(format!(
                            "{}: reading the input by index holds its elements, and they \
                             exceed the limit of {MAX_HELD_BYTES} bytes",
                            self.what
                        )));
                    }
                    self.held.push(e);
                }
                None => self.ended = true,
            }
        }
        Ok(self.held.get(index))
    }
}
