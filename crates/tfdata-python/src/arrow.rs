//! Elements as Arrow record batches for pyarrow, pandas, polars and Ray
//! (`as_arrow_iterator()`), through the Arrow C data interface's PyCapsule
//! protocol: an [`ArrowBatch`] has `__arrow_c_array__` (a struct array of
//! the columns) and `__arrow_c_schema__`, which `pyarrow.record_batch()`
//! (pyarrow 14 and later) imports without a copy. The columns themselves
//! come from `tfdata_dataset::columnar::export`, which shares the tensors'
//! buffers.
//!
//! Why not pyo3-arrow: it works with PyO3 0.30 (0.20), but brings chrono,
//! chrono-tz and arrow-cast to the build for the two capsules this needs;
//! arrow's own `ffi` module makes them, and PyO3's
//! `PyCapsule::new_with_value` holds them without `unsafe`.

use std::ffi::CStr;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, RecordBatch, StructArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tfdata_core::{Element, Error};
use tfdata_dataset::Structure;
use tfdata_dataset::columnar::export::{self, StringColumns};

const SCHEMA: &CStr = c"arrow_schema";
const ARRAY: &CStr = c"arrow_array";

/// `"binary"` or `"utf8"`, as `as_arrow_iterator(strings=...)` says.
pub fn string_columns(name: &str) -> PyResult<StringColumns> {
    match name {
        "binary" => Ok(StringColumns::Binary),
        "utf8" | "string" => Ok(StringColumns::Utf8),
        other => Err(PyValueError::new_err(format!(
            "`strings` must be \"binary\" or \"utf8\", got {other:?}"
        ))),
    }
}

/// One element as a record batch, exported on request.
#[pyclass(frozen, module = "tfdata._native")]
pub struct ArrowBatch {
    array: StructArray,
}

/// `element` as a record batch, or the reason it is not one.
pub fn batch(
    element: &Element,
    structure: Option<&Structure>,
    strings: StringColumns,
) -> Result<ArrowBatch, Error> {
    let structure = structure.ok_or_else(|| {
        Error::FailedPrecondition(
            "the elements' structure is unknown, so their columns have no names".into(),
        )
    })?;
    let batch: RecordBatch = export::record_batch(element, structure, strings)?;
    Ok(ArrowBatch {
        array: StructArray::from(batch),
    })
}

fn export_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("exporting a record batch to Arrow: {e}"))
}

#[pymethods]
impl ArrowBatch {
    /// The Arrow PyCapsule protocol: `(schema, array)` capsules of a
    /// struct array whose fields are the columns. A requested schema is
    /// not applied (the caller casts), as the protocol allows.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let schema = FFI_ArrowSchema::try_from(self.array.data_type()).map_err(export_error)?;
        let array = FFI_ArrowArray::new(&self.array.to_data());
        Ok((
            PyCapsule::new_with_value(py, schema, SCHEMA)?,
            PyCapsule::new_with_value(py, array, ARRAY)?,
        ))
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.array.data_type()).map_err(export_error)?;
        PyCapsule::new_with_value(py, schema, SCHEMA)
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.array.len()
    }
}
