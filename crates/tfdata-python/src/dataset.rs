//! The dataset engine from Python: [`PyDataset`] wraps an immutable Rust
//! `Dataset`; `tfdata.Dataset` (Python) gives it TensorFlow's method names,
//! defaults and argument checks, and calls these builders with plain values.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tfdata_core::{Error, Tensor};
use tfdata_dataset::columnar::export::StringColumns;
use tfdata_dataset::{Dataset, ElementIterator, FunctionRef, Structure};

use crate::convert;
use crate::errors::{self, IntoPyResult};

/// A function as pipelines name it: `{"function": name, "args": {...}}`.
fn function(json: &str) -> PyResult<FunctionRef> {
    tfdata_dataset::json::function_from_json(json).py_err()
}

/// A Python value's tensors, for `from_tensors` / `from_tensor_slices`: a
/// tensor, a tuple of tensors or a dict of tensors (the engine's sources
/// take one level of structure).
fn source_components(value: &Bound<'_, PyAny>) -> PyResult<(Vec<Tensor>, Option<Vec<String>>)> {
    let (element, structure) = convert::py_to_element(value)?;
    let flat = |items: &[&Structure]| items.iter().all(|s| matches!(s, Structure::Tensor(_)));
    match &structure {
        Structure::Tensor(_) => Ok((element.components, None)),
        Structure::Tuple(items) if flat(&items.iter().collect::<Vec<_>>()) => {
            Ok((element.components, None))
        }
        Structure::Dict(items) if flat(&items.values().collect::<Vec<_>>()) => {
            Ok((element.components, Some(items.keys().cloned().collect())))
        }
        _ => Err(PyValueError::new_err(
            "tfdata sources take a tensor, a tuple of tensors or a dict of tensors \
             (nested tuples and dicts are not supported yet)",
        )),
    }
}

fn named(components: Vec<Tensor>, names: Vec<String>) -> Vec<(String, Tensor)> {
    names.into_iter().zip(components).collect()
}

#[pyclass(frozen, module = "tfdata._native", name = "Dataset")]
#[derive(Clone)]
pub struct PyDataset {
    pub ds: Dataset,
}

fn wrap(ds: Dataset) -> PyDataset {
    PyDataset { ds }
}

#[pymethods]
impl PyDataset {
    #[staticmethod]
    fn range(start: i64, stop: i64, step: i64) -> Self {
        wrap(Dataset::range_with_step(start, stop, step))
    }

    #[staticmethod]
    fn from_tensors(value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (components, names) = source_components(value)?;
        Ok(wrap(match names {
            None => Dataset::from_tensors(components),
            Some(names) => Dataset::from_named_tensors(named(components, names)),
        }))
    }

    #[staticmethod]
    fn from_tensor_slices(value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (components, names) = source_components(value)?;
        Ok(wrap(match names {
            None => Dataset::from_tensor_slices(components),
            Some(names) => Dataset::from_named_tensor_slices(named(components, names)),
        }))
    }

    #[staticmethod]
    fn list_files(patterns: Vec<String>, shuffle: bool, seed: Option<u64>) -> Self {
        let patterns: Vec<&str> = patterns.iter().map(String::as_str).collect();
        wrap(Dataset::list_files(&patterns, shuffle, seed))
    }

    #[staticmethod]
    fn tfrecord(filenames: Vec<String>, compression_type: &str) -> Self {
        let names: Vec<&str> = filenames.iter().map(String::as_str).collect();
        wrap(Dataset::tfrecord(&names, compression_type))
    }

    #[staticmethod]
    fn text_lines(filenames: Vec<String>, compression_type: &str) -> Self {
        let names: Vec<&str> = filenames.iter().map(String::as_str).collect();
        wrap(Dataset::text_lines(&names, compression_type))
    }

    /// `tf.data.Dataset.load(path, element_spec, compression, wait=wait)`
    /// of a distributed snapshot, resolved now as TensorFlow's is: the
    /// metadata is read (waited for, with `wait`, interruptibly), a failed
    /// save or a disagreeing `element_spec` / `compression` is a
    /// `ValueError`, and the dataset carries the spec and compression, so
    /// whoever runs or validates the pipeline need not read them again.
    #[staticmethod]
    #[pyo3(signature = (path, wait, element_spec=None, compression=None))]
    fn load(
        py: Python<'_>,
        path: String,
        wait: bool,
        element_spec: Option<&Bound<'_, PyAny>>,
        compression: Option<&str>,
    ) -> PyResult<Self> {
        use tfdata_dataset::snapshot::{layout, layout::SnapshotCompression, load};
        let given_spec = element_spec
            .map(|s| convert::structure_from_py(s, 0))
            .transpose()?;
        let given_compression = compression
            .map(|c| SnapshotCompression::from_user(Some(c)))
            .transpose()
            .py_err()?;
        let fs = tfdata_dataset::io::file_system(&path).py_err()?;
        let mut poll = std::time::Duration::from_millis(10);
        // One metadata read per round, a wait of at most one slice between
        // rounds (signals are checked then): bounded by the snapshot
        // appearing, an error, or Ctrl-C.
        let info = crate::wait::poll_until(py, || match load::read_info(&*fs, &path) {
            Ok(Some(info)) => Some(Ok(info)),
            Ok(None) if wait => {
                std::thread::sleep(poll.min(crate::wait::SLICE));
                poll = (poll * 2).min(crate::wait::SLICE);
                None
            }
            Ok(None) => Some(Err(Error::NotFound {
                what: "tf.data snapshot",
                id: format!("{path} (no {})", layout::metadata_file(&path)),
            })),
            Err(e) => Some(Err(e)),
        })?
        .py_err()?;
        let error_file = layout::error_file(&path);
        match py.detach(|| fs.read_all(&error_file)) {
            Ok(status) => {
                return Err(PyValueError::new_err(format!(
                    "Failed to load tf.data snapshot at {path}. The save job failed to write it. \
                     Status: {}",
                    String::from_utf8_lossy(&status)
                )));
            }
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(errors::to_py(e)),
        }
        if let Some(spec) = &given_spec
            && *spec != info.element_spec
        {
            return Err(PyValueError::new_err(format!(
                "Failed to load tf.data snapshot at {path}. User specified element_spec {}, but \
                 the actual element_spec is {}.",
                convert::structure_to_py(py, spec)?.repr()?,
                convert::structure_to_py(py, &info.element_spec)?.repr()?
            )));
        }
        if let Some(c) = given_compression
            && c != info.compression
        {
            return Err(PyValueError::new_err(format!(
                "Failed to load tf.data snapshot at {path}. User specified compression {:?}, but \
                 the actual compression is {:?}.",
                compression.unwrap_or_default(),
                info.compression.as_str()
            )));
        }
        Ok(wrap(Dataset::load_with(
            &path,
            wait,
            Some(info.element_spec),
            Some(info.compression),
        )))
    }

    #[staticmethod]
    fn zip(datasets: Vec<PyRef<'_, PyDataset>>) -> Self {
        wrap(Dataset::zip(
            datasets.iter().map(|d| d.ds.clone()).collect(),
        ))
    }

    /// A pipeline from its JSON text form (docs/pipelines.md) and whether it
    /// asks for compression.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<(Self, bool)> {
        let p = tfdata_dataset::json::from_json(text).py_err()?;
        Ok((wrap(p.dataset), p.compress))
    }

    fn to_json(&self, compress: bool) -> PyResult<String> {
        tfdata_dataset::json::to_json(&self.ds, compress).py_err()
    }

    /// The pipeline as the dispatcher receives it: `tfdata.pipeline.PipelineDef`
    /// bytes (what a registration sends; tests read declarations from it).
    fn pipeline_def<'py>(&self, py: Python<'py>, compress: bool) -> PyResult<Bound<'py, PyBytes>> {
        let def = tfdata_dataset::pipeline::to_pipeline_def(&self.ds, compress).py_err()?;
        Ok(PyBytes::new(py, &prost::Message::encode_to_vec(&def)))
    }

    #[pyo3(signature = (function, num_parallel_calls, deterministic))]
    fn map(
        &self,
        function: &str,
        num_parallel_calls: Option<i64>,
        deterministic: bool,
    ) -> PyResult<Self> {
        let f = self::function(function)?;
        Ok(wrap(self.ds.clone().map_with(
            f,
            num_parallel_calls,
            deterministic,
        )))
    }

    fn filter(&self, predicate: &str) -> PyResult<Self> {
        Ok(wrap(self.ds.clone().filter_with(function(predicate)?)))
    }

    fn flat_map(&self, function: &str) -> PyResult<Self> {
        Ok(wrap(self.ds.clone().flat_map(self::function(function)?)))
    }

    fn interleave(
        &self,
        function: &str,
        cycle_length: i64,
        block_length: i64,
        num_parallel_calls: Option<i64>,
    ) -> PyResult<Self> {
        let f = self::function(function)?;
        Ok(wrap(self.ds.clone().interleave(
            f,
            cycle_length,
            block_length,
            num_parallel_calls,
        )))
    }

    fn batch(&self, batch_size: i64, drop_remainder: bool) -> Self {
        wrap(self.ds.clone().batch(batch_size, drop_remainder))
    }

    /// `padded_shapes`: one shape per component (−1 = longest in the batch),
    /// or `None`; `padding_values`: one scalar per component, or `None`.
    fn padded_batch(
        &self,
        batch_size: i64,
        padded_shapes: Option<Vec<Vec<i64>>>,
        padding_values: Option<Vec<Bound<'_, PyAny>>>,
        drop_remainder: bool,
    ) -> PyResult<Self> {
        let values = padding_values
            .map(|vs| {
                vs.iter()
                    .map(convert::py_to_tensor)
                    .collect::<PyResult<Vec<_>>>()
            })
            .transpose()?;
        Ok(wrap(self.ds.clone().padded_batch(
            batch_size,
            padded_shapes,
            values,
            drop_remainder,
        )))
    }

    fn unbatch(&self) -> Self {
        wrap(self.ds.clone().unbatch())
    }

    fn shuffle(&self, buffer_size: i64, seed: Option<u64>, reshuffle_each_iteration: bool) -> Self {
        wrap(
            self.ds
                .clone()
                .shuffle(buffer_size, seed, reshuffle_each_iteration),
        )
    }

    fn repeat(&self, count: Option<i64>) -> Self {
        wrap(self.ds.clone().repeat(count))
    }

    fn take(&self, count: i64) -> Self {
        wrap(self.ds.clone().take(count))
    }

    fn skip(&self, count: i64) -> Self {
        wrap(self.ds.clone().skip(count))
    }

    fn shard(&self, num_shards: i64, index: i64) -> Self {
        wrap(self.ds.clone().shard(num_shards, index))
    }

    fn prefetch(&self, buffer_size: i64) -> Self {
        wrap(self.ds.clone().prefetch(buffer_size))
    }

    fn concatenate(&self, other: &PyDataset) -> Self {
        wrap(self.ds.clone().concatenate(other.ds.clone()))
    }

    fn enumerate(&self, start: i64) -> Self {
        wrap(self.ds.clone().enumerate(start))
    }

    fn cache(&self, filename: &str) -> Self {
        wrap(self.ds.clone().cache(filename))
    }

    /// The element structure as `TensorSpec`s in tuples and dicts; `None`
    /// when a function's output is not known before the data flows.
    fn element_spec<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let ds = self.ds.clone();
        let spec = py.detach(move || ds.element_spec()).py_err()?;
        spec.map(|s| convert::structure_to_py(py, &s)).transpose()
    }

    /// −1 infinite, −2 unknown, as TensorFlow reports it.
    fn cardinality(&self, py: Python<'_>) -> i64 {
        let ds = self.ds.clone();
        py.detach(move || ds.cardinality())
    }

    /// Checks every op's arguments, with TensorFlow's messages.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        let ds = self.ds.clone();
        py.detach(move || ds.validate()).py_err()
    }

    /// Iterates the pipeline in this process: numpy values, or with
    /// `arrow_strings` (`"binary"` / `"utf8"`) Arrow record batches
    /// ([`crate::arrow`]).
    #[pyo3(signature = (arrow_strings=None))]
    fn iter(&self, py: Python<'_>, arrow_strings: Option<&str>) -> PyResult<LocalIterator> {
        let arrow = arrow_strings
            .map(crate::arrow::string_columns)
            .transpose()?;
        let ds = self.ds.clone();
        let (iterator, structure) = py
            .detach(move || -> tfdata_core::Result<_> {
                let structure = ds.element_spec()?;
                Ok((ds.iter()?, structure))
            })
            .py_err()?;
        Ok(LocalIterator {
            state: Mutex::new(Some(iterator)),
            structure,
            arrow,
            pid: std::process::id(),
        })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.ds)
    }
}

/// An iterator over a pipeline run in this process, on the calling thread
/// (without the GIL while the pipeline works).
#[pyclass(frozen, module = "tfdata._native")]
pub struct LocalIterator {
    state: Mutex<Option<Box<dyn ElementIterator>>>,
    structure: Option<Structure>,
    /// Elements as Arrow record batches, strings as this says.
    arrow: Option<StringColumns>,
    /// The process that made it: a pipeline's threads do not survive `fork()`.
    pid: u32,
}

#[pymethods]
impl LocalIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        crate::check_same_process(self.pid, "iterator")?;
        let next = py.detach(|| {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.as_mut().map(|it| it.next()).unwrap_or(None)
        });
        // A Ctrl-C that arrived while the pipeline worked.
        py.check_signals()?;
        match next {
            None => Ok(None),
            Some(Ok(element)) => match self.arrow {
                Some(strings) => crate::arrow::batch(&element, self.structure.as_ref(), strings)
                    .map_err(|e| pipeline_error(py, e))
                    .and_then(|b| Ok(Some(Bound::new(py, b)?.into_any()))),
                None => convert::element_to_py(
                    py,
                    convert::maybe_shared(element),
                    self.structure.as_ref(),
                )
                .map(Some),
            },
            Some(Err(e)) => Err(pipeline_error(py, e)),
        }
    }
}

impl Drop for LocalIterator {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // Its threads are the parent's; leave its state alone.
            let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
            std::mem::forget(state.take());
        }
    }
}

/// A pipeline error as a Python exception; a Python function's exception
/// raised on this thread becomes its cause, and a `KeyboardInterrupt` in a
/// function is raised as itself.
pub fn pipeline_error(py: Python<'_>, e: Error) -> PyErr {
    let original = match &e {
        Error::UserFunction { function, .. } => crate::raised::take(function),
        _ => None,
    };
    if let Some(original) = &original
        && (original.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py)
            || original.is_instance_of::<pyo3::exceptions::PySystemExit>(py))
    {
        return original.clone_ref(py);
    }
    let err = errors::to_py(e);
    if let Some(original) = original {
        err.set_cause(py, Some(original));
    }
    err
}
