//! Reading through tf.data service from Python: `distribute`,
//! `register_dataset`, `from_dataset_id`, and the iterator whose elements
//! arrive as numpy arrays over the buffers the element stream received.
//!
//! Fork safety: a [`DistributedDataset`] remembers how it was made, and an
//! iterator asked for in a child of `fork()` (a PyTorch DataLoader worker)
//! connects again from that child, on the child's own runtime, instead of
//! using the parent's connections. An iterator itself cannot cross a fork
//! (its reads live in the parent): using one in a child is an error.

use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tfdata_client::{Compression, Deterministic, Distribute, FromDatasetId, TargetWorkers};
use tfdata_core::Error;
use tfdata_dataset::{Dataset, Structure};

use crate::convert;
use crate::dataset::PyDataset;
use crate::errors::{self, IntoPyResult};
use crate::wait;

fn compression(name: &str) -> PyResult<Compression> {
    match name {
        "AUTO" => Ok(Compression::Auto),
        "SNAPPY" => Ok(Compression::Snappy),
        "NONE" => Ok(Compression::Off),
        other => Err(errors::to_py(Error::InvalidArgument(format!(
            "invalid compression {other:?}: expected AUTO, SNAPPY or NONE"
        )))),
    }
}

/// The read options `distribute` and `from_dataset_id` share, already
/// checked by the Python layer.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ReadOptions {
    processing_mode: String,
    service: String,
    job_name: Option<String>,
    consumer_index: Option<i64>,
    num_consumers: Option<i64>,
    max_outstanding_requests: Option<usize>,
    data_transfer_protocol: Option<String>,
    trainer_id: Option<String>,
    target_workers: String,
    dispatcher_timeout_ms: Option<u64>,
    task_refresh_interval_ms: Option<u64>,
    /// A deterministic read (`deterministic=True`); `consumer_index` and
    /// `num_consumers` are then `None` and this holds the consumer.
    deterministic: Option<DeterministicOptions>,
    /// `distribute(..., cache="auto")`: the job asks for autocache (issue 36).
    autocache: bool,
}

/// `distribute(..., deterministic=True)`'s settings, checked by the Python
/// layer (`tfdata/experimental/_deterministic.py`); the reorder window's
/// bounds are the client's defaults when not given.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct DeterministicOptions {
    lanes: u32,
    split_shuffle_seed: Option<u64>,
    consumer_index: u32,
    num_consumers: u32,
    reorder_window_elements: Option<usize>,
    reorder_window_bytes: Option<u64>,
}

impl DeterministicOptions {
    fn to_client(&self) -> Deterministic {
        let defaults = Deterministic::default();
        Deterministic {
            lanes: self.lanes,
            split_shuffle_seed: self.split_shuffle_seed,
            consumer_index: self.consumer_index,
            num_consumers: self.num_consumers,
            reorder_window_elements: self
                .reorder_window_elements
                .unwrap_or(defaults.reorder_window_elements),
            reorder_window_bytes: self
                .reorder_window_bytes
                .unwrap_or(defaults.reorder_window_bytes),
        }
    }
}

macro_rules! apply_options {
    ($builder:expr, $o:expr) => {{
        let o = $o;
        let mut b = $builder;
        if let Some(name) = &o.job_name {
            b = b.job_name(name);
        }
        if let (Some(c), Some(n)) = (o.consumer_index, o.num_consumers) {
            b = b.consumers(c, n);
        }
        if let Some(n) = o.max_outstanding_requests {
            b = b.max_outstanding_requests(n);
        }
        if let Some(p) = &o.data_transfer_protocol {
            b = b.data_transfer_protocol(p);
        }
        if let Some(t) = &o.trainer_id {
            b = b.cross_trainer_cache(t);
        }
        b = b.target_workers(o.target_workers.parse::<TargetWorkers>().py_err()?);
        if let Some(ms) = o.dispatcher_timeout_ms {
            b = b.dispatcher_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = o.task_refresh_interval_ms {
            b = b.task_refresh_interval(Duration::from_millis(ms));
        }
        if let Some(d) = &o.deterministic {
            b = b.deterministic(d.to_client());
        }
        if o.autocache {
            b = b.autocache(true);
        }
        b
    }};
}

/// How a distributed dataset was made, so a forked child can make it again.
#[derive(Clone)]
enum Recipe {
    Distribute(Distribute, Dataset),
    FromDatasetId(FromDatasetId),
}

impl Recipe {
    fn connect(&self, py: Python<'_>) -> PyResult<tfdata::DistributedDataset> {
        let recipe = self.clone();
        wait::run(py, async move {
            match recipe {
                Recipe::Distribute(d, ds) => d.apply_async(&ds).await,
                Recipe::FromDatasetId(f) => f.build_async().await,
            }
        })
    }
}

/// A dataset read through tf.data service; each iterator is a new epoch
/// (repetition) of its job, as in TensorFlow.
#[pyclass(frozen, module = "tfdata._native")]
pub struct DistributedDataset {
    recipe: Recipe,
    /// The connected dataset and the process it belongs to.
    state: Mutex<Option<(u32, tfdata::DistributedDataset)>>,
    /// The element structure: given to `from_dataset_id`, else registered.
    structure: Option<Structure>,
    dataset_id: String,
}

impl DistributedDataset {
    fn new(py: Python<'_>, recipe: Recipe, structure: Option<Structure>) -> PyResult<Self> {
        let ds = recipe.connect(py)?;
        let structure = match structure {
            Some(s) => Some(s),
            None => ds.element_spec().py_err()?,
        };
        Ok(DistributedDataset {
            recipe,
            dataset_id: ds.dataset_id().to_string(),
            state: Mutex::new(Some((std::process::id(), ds))),
            structure,
        })
    }

    /// The connected dataset of this process (connecting again after a fork).
    fn connected(&self, py: Python<'_>) -> PyResult<tfdata::DistributedDataset> {
        let pid = std::process::id();
        let current = py.detach(|| {
            let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match state.as_ref() {
                Some((owner, ds)) if *owner == pid => Some(ds.clone()),
                _ => None,
            }
        });
        if let Some(ds) = current {
            return Ok(ds);
        }
        let ds = self.recipe.connect(py)?;
        let fresh = ds.clone();
        py.detach(|| {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            // The parent's connections are not ours to close.
            std::mem::forget(state.replace((pid, fresh)));
        });
        Ok(ds)
    }
}

#[pymethods]
impl DistributedDataset {
    #[getter]
    fn dataset_id(&self) -> &str {
        &self.dataset_id
    }

    fn element_spec<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.structure
            .as_ref()
            .map(|s| convert::structure_to_py(py, s))
            .transpose()
    }

    /// The cardinality registered with the dataset (−1 infinite, −2 unknown).
    fn cardinality(&self, py: Python<'_>) -> PyResult<i64> {
        Ok(self.connected(py)?.registered_cardinality())
    }

    /// A new iterator: the next repetition of the job; elements as numpy
    /// values, or with `arrow_strings` as Arrow record batches.
    #[pyo3(signature = (arrow_strings=None))]
    fn iter(&self, py: Python<'_>, arrow_strings: Option<&str>) -> PyResult<DistributedIterator> {
        let arrow = arrow_strings
            .map(crate::arrow::string_columns)
            .transpose()?;
        let ds = self.connected(py)?;
        let iterator = wait::run(py, async move { ds.iter_async().await })?;
        Ok(DistributedIterator {
            iterator: Mutex::new(Some(iterator)),
            structure: self.structure.clone(),
            arrow,
            pid: std::process::id(),
        })
    }
}

impl Drop for DistributedDataset {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some((owner, _)) = state
            && *owner != std::process::id()
        {
            std::mem::forget(state.take());
        }
    }
}

/// The reader's end of one iteration. Elements come as numpy arrays over
/// the received buffers (a [`tfdata_client::received::ReceivedElement`]'s:
/// the client's decoders give each tensor bytes of its own).
#[pyclass(frozen, module = "tfdata._native")]
pub struct DistributedIterator {
    iterator: Mutex<Option<tfdata::ElementIterator>>,
    structure: Option<Structure>,
    /// Elements as Arrow record batches, strings as this says.
    arrow: Option<tfdata_dataset::columnar::export::StringColumns>,
    pid: u32,
}

#[pymethods]
impl DistributedIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        use std::task::Poll;
        crate::check_same_process(self.pid, "iterator")?;
        // Uncontended and with an element at hand (the common case), no
        // GIL release at all; otherwise wait for the lock and the element
        // without the GIL, in slices, so Ctrl-C gets through.
        let ready = match self.iterator.try_lock() {
            Ok(mut guard) => match guard.as_mut() {
                Some(it) => it.try_next_received(),
                None => Poll::Ready(None),
            },
            Err(_) => Poll::Pending,
        };
        let next = match ready {
            Poll::Ready(next) => next,
            Poll::Pending => wait::poll_until(py, || {
                let mut guard = self.iterator.lock().unwrap_or_else(|p| p.into_inner());
                match guard.as_mut() {
                    Some(it) => match it.next_timeout_received(wait::SLICE) {
                        Poll::Ready(next) => Some(next),
                        Poll::Pending => None,
                    },
                    None => Some(None),
                }
            })?,
        };
        match next {
            None => Ok(None),
            Some(Ok(element)) => match self.arrow {
                Some(strings) => {
                    crate::arrow::batch(&element.into_element(), self.structure.as_ref(), strings)
                        .map_err(errors::to_py)
                        .and_then(|b| Ok(Some(Bound::new(py, b)?.into_any())))
                }
                None => {
                    convert::element_to_py(py, convert::received(element), self.structure.as_ref())
                        .map(Some)
                }
            },
            Some(Err(e)) => Err(errors::to_py(e)),
        }
    }

    /// Where this reader is, as bytes to store with the trainer's
    /// checkpoint (`tfdata_client::checkpoint`). Raises
    /// `FailedPreconditionError`, saying why, for reads a checkpoint does
    /// not cover.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        crate::check_same_process(self.pid, "iterator")?;
        let state = py.detach(|| {
            let guard = self.iterator.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref() {
                Some(it) => it.checkpoint(),
                None => Err(Error::FailedPrecondition("the iterator is closed".into())),
            }
        });
        let state = state.map_err(errors::to_py)?;
        Ok(PyBytes::new(py, &state))
    }

    /// Continues the epoch from `state` (from `checkpoint()`, in any
    /// process), before the first `next()`.
    fn restore(&self, py: Python<'_>, state: &[u8]) -> PyResult<()> {
        crate::check_same_process(self.pid, "iterator")?;
        let state = state.to_vec();
        py.detach(|| {
            let mut guard = self.iterator.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_mut() {
                Some(it) => it.restore(&state),
                None => Err(Error::FailedPrecondition("the iterator is closed".into())),
            }
        })
        .map_err(errors::to_py)
    }

    /// A deterministic read, before its first `next()`: read epoch `epoch`
    /// instead of the one this dataset's iteration count gave.
    /// `tfdata.torch` numbers its passes itself (`set_epoch`), and each pass
    /// is a reader of its own whose count starts at 0; so that epoch `e` of
    /// the trainer reads the order of epoch `e` (a reshuffled `shuffle`, the
    /// split permutation), the pass restores its fresh position moved there.
    fn start_epoch(&self, py: Python<'_>, epoch: u64) -> PyResult<()> {
        crate::check_same_process(self.pid, "iterator")?;
        py.detach(|| {
            let mut guard = self.iterator.lock().unwrap_or_else(|p| p.into_inner());
            let Some(it) = guard.as_mut() else {
                return Err(Error::FailedPrecondition("the iterator is closed".into()));
            };
            let moved = checkpoint_at_epoch(&it.checkpoint()?, epoch)?;
            it.restore(&moved)
        })
        .map_err(errors::to_py)
    }

    /// Ends the iteration now (releases it at the dispatcher), as dropping
    /// the iterator does.
    fn close(&self, py: Python<'_>) {
        if self.pid == std::process::id() {
            let it = py.detach(|| {
                self.iterator
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
            });
            py.detach(move || drop(it));
        }
    }
}

/// A deterministic read's checkpoint taken before its first element, moved
/// to `epoch` (`DeterministicPosition.epoch`: a restore reads that epoch).
fn checkpoint_at_epoch(fresh: &[u8], epoch: u64) -> tfdata_core::Result<Vec<u8>> {
    use prost::Message;
    use tfdata_proto::tfdata::checkpoint::ReaderCheckpoint;
    let mut checkpoint = ReaderCheckpoint::decode(fresh)
        .map_err(|e| Error::Internal(format!("the reader's own checkpoint: {e}")))?;
    let Some(position) = checkpoint.deterministic.as_mut() else {
        return Err(Error::FailedPrecondition(
            "start_epoch is for deterministic reads (deterministic=True)".into(),
        ));
    };
    if position.steps != 0 || position.positions.iter().any(|p| p.next_index != 0) {
        return Err(Error::FailedPrecondition(
            "start_epoch must come before the first element of the read".into(),
        ));
    }
    position.epoch = epoch;
    // Nothing was consumed: a lane that had already ended (empty in the
    // iteration count's epoch) starts afresh in this one.
    for lane in &mut position.positions {
        lane.ended = false;
    }
    Ok(checkpoint.encode_to_vec())
}

impl Drop for DistributedIterator {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            let it = self.iterator.get_mut().unwrap_or_else(|p| p.into_inner());
            std::mem::forget(it.take());
        }
    }
}

#[pyfunction]
#[pyo3(signature = (dataset, compression_name, options))]
pub fn distribute(
    py: Python<'_>,
    dataset: &PyDataset,
    compression_name: &str,
    options: ReadOptions,
) -> PyResult<DistributedDataset> {
    let builder = tfdata_client::distribute(options.processing_mode.as_str(), &options.service)
        .compression(compression(compression_name)?);
    let builder = apply_options!(builder, &options);
    DistributedDataset::new(py, Recipe::Distribute(builder, dataset.ds.clone()), None)
}

#[pyfunction]
#[pyo3(signature = (dataset_id, element_spec, options))]
pub fn from_dataset_id(
    py: Python<'_>,
    dataset_id: &str,
    element_spec: Option<Bound<'_, PyAny>>,
    options: ReadOptions,
) -> PyResult<DistributedDataset> {
    let structure = element_spec
        .map(|s| convert::structure_from_py(&s, 0))
        .transpose()?;
    let builder = tfdata_client::from_dataset_id(
        options.processing_mode.as_str(),
        &options.service,
        dataset_id,
    );
    let builder = apply_options!(builder, &options);
    DistributedDataset::new(py, Recipe::FromDatasetId(builder), structure)
}

/// `tfdata.experimental.merge_checkpoints`: the checkpoints of all the
/// consumers of one deterministic read at one step, as one that restores on
/// any number of consumers dividing its lanes.
#[pyfunction]
pub fn merge_checkpoints<'py>(
    py: Python<'py>,
    checkpoints: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let merged = py.detach(|| {
        let parts: Vec<&[u8]> = checkpoints.iter().map(Vec::as_slice).collect();
        tfdata_client::merge_checkpoints(&parts)
    });
    Ok(PyBytes::new(py, &merged.py_err()?))
}

/// The `steps` of a deterministic read's checkpoint (elements its reader had
/// consumed), and the checkpoint with `steps` replaced: `tfdata.torch`
/// checks one step of a trainer by the sum over a rank's DataLoader
/// workers, whose readers are one element apart in the loader's round
/// robin, and then gives `merge_checkpoints` their common step.
#[pyfunction]
#[pyo3(signature = (checkpoint, steps=None))]
pub fn deterministic_steps<'py>(
    py: Python<'py>,
    checkpoint: &[u8],
    steps: Option<u64>,
) -> PyResult<(u64, Bound<'py, PyBytes>)> {
    use prost::Message;
    use tfdata_proto::tfdata::checkpoint::ReaderCheckpoint;
    let mut decoded = ReaderCheckpoint::decode(checkpoint).map_err(|e| {
        errors::to_py(Error::InvalidArgument(format!(
            "not a tfdata reader checkpoint: {e}"
        )))
    })?;
    let Some(position) = decoded.deterministic.as_mut() else {
        return Err(errors::to_py(Error::InvalidArgument(
            "not the checkpoint of a deterministic read (deterministic=True)".into(),
        )));
    };
    let taken = position.steps;
    if let Some(steps) = steps {
        position.steps = steps;
    }
    Ok((taken, PyBytes::new(py, &decoded.encode_to_vec())))
}

#[pyfunction]
#[pyo3(signature = (service, dataset, compression_name, dataset_id))]
pub fn register_dataset(
    py: Python<'_>,
    service: String,
    dataset: &PyDataset,
    compression_name: &str,
    dataset_id: Option<String>,
) -> PyResult<String> {
    let compression = compression(compression_name)?;
    let ds = dataset.ds.clone();
    wait::run(py, async move {
        tfdata_client::register_dataset_async(&service, &ds, compression, dataset_id.as_deref())
            .await
    })
}

/// `distributed_save`: asks the dispatcher at `service` to write `dataset`
/// to `path` as a distributed snapshot; returns once it accepted.
#[pyfunction]
#[pyo3(signature = (service, dataset, path, compression))]
pub fn distributed_save(
    py: Python<'_>,
    service: String,
    dataset: &PyDataset,
    path: String,
    compression: Option<String>,
) -> PyResult<()> {
    let ds = dataset.ds.clone();
    wait::run(py, async move {
        tfdata_client::distributed_save_async(&ds, &path, &service, compression.as_deref()).await
    })
}
