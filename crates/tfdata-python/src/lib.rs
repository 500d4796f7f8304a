//! `tfdata._native`: the extension module behind the `tfdata` Python
//! package (`python/tfdata/`). It exposes the Rust servers, the dataset
//! engine and the client with plain arguments; the pure-Python layer gives
//! them TensorFlow's names, defaults and argument checks.
//!
//! * [`servers`]: `DispatchServer`, `WorkerServer`;
//! * [`dataset`]: the engine's `Dataset` and local iteration;
//! * [`distribute`]: `distribute`, `register_dataset`, `from_dataset_id`,
//!   `distributed_save`, `merge_checkpoints`
//!   and the iterator over a service's elements;
//! * [`convert`]: elements ↔ Python values (numpy arrays without copies);
//! * [`arrow`]: elements as Arrow record batches (`as_arrow_iterator`);
//! * [`functions`]: Python callables as pipeline functions;
//! * [`wait`]: blocking without the GIL, interruptible by Ctrl-C;
//! * [`errors`]: tfdata errors as `tfdata.errors` exceptions.
//!
//! Rust panics inside these functions reach Python as exceptions (PyO3's
//! `PanicException`), never as an abort across the FFI boundary.

mod arrow;
mod convert;
mod dataset;
mod distribute;
mod errors;
mod functions;
mod raised;
mod servers;
mod wait;

use pyo3::prelude::*;

/// An error for an object made in another process (before a `fork()`).
fn check_same_process(pid: u32, what: &str) -> PyResult<()> {
    let here = std::process::id();
    if pid == here {
        return Ok(());
    }
    Err(errors::op_error(
        errors::tonic_code::FAILED_PRECONDITION,
        format!(
            "this {what} was made in process {pid} and cannot be used after fork() in process \
             {here}: its reads belong to the parent; make a new one here (iter(dataset))"
        ),
    ))
}

/// This process's reader metrics as OpenMetrics text
/// (`tfdata_client::metrics::encode`).
#[pyfunction]
fn reader_metrics(py: Python<'_>) -> String {
    py.detach(tfdata::reader_metrics)
}

/// The protocol version spoken (TensorFlow 2.21's tf.data service).
#[pyfunction]
fn protocol_version() -> i64 {
    tfdata::PROTOCOL_VERSION
}

/// Which code the JPEG decoder runs: libjpeg-turbo with its SIMD code, or
/// without it when the package was built without `nasm` (pip hides the
/// build's warning; this says it).
#[pyfunction]
fn jpeg_code_path() -> &'static str {
    tfdata_dataset::kernels::jpeg_code_path()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<servers::DispatchServer>()?;
    m.add_class::<servers::WorkerServer>()?;
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<dataset::LocalIterator>()?;
    m.add_class::<distribute::DistributedDataset>()?;
    m.add_class::<distribute::DistributedIterator>()?;
    m.add_class::<convert::TensorBuffer>()?;
    m.add_class::<arrow::ArrowBatch>()?;
    m.add_class::<convert::PyTensorSpec>()?;
    m.add_function(wrap_pyfunction!(distribute::distribute, m)?)?;
    m.add_function(wrap_pyfunction!(distribute::from_dataset_id, m)?)?;
    m.add_function(wrap_pyfunction!(distribute::register_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(distribute::distributed_save, m)?)?;
    m.add_function(wrap_pyfunction!(distribute::merge_checkpoints, m)?)?;
    m.add_function(wrap_pyfunction!(distribute::deterministic_steps, m)?)?;
    m.add_function(wrap_pyfunction!(functions::register_function, m)?)?;
    m.add_function(wrap_pyfunction!(protocol_version, m)?)?;
    m.add_function(wrap_pyfunction!(jpeg_code_path, m)?)?;
    m.add_function(wrap_pyfunction!(reader_metrics, m)?)?;
    Ok(())
}
