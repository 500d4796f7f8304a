//! Elements to Python values and back.
//!
//! A numeric tensor becomes a numpy array over the tensor's own buffer: the
//! array's base object is a [`TensorBuffer`] that holds it, so the memory
//! lives exactly as long as the array and nothing is copied. Arrays are
//! writable (`torch.from_numpy` wants that), which is sound only when no
//! one else can read the same bytes, so a buffer is viewed in place only as
//! an [`ExclusiveBytes`], the type whose invariant that is; what a tensor's
//! bytes may be is in the type they reach the converter as ([`Data`]):
//! * [`Data::Exclusive`]: a received element's buffers
//!   ([`ReceivedElement`], made only where the reader decodes a message it
//!   consumed). Such a view is made even at an unaligned address (a tensor
//!   that filled an HTTP/2 frame starts 9 bytes after the frame header,
//!   wherever the frame fell in the read buffer): numpy and torch compute
//!   on unaligned arrays correctly (`flags.aligned` is then False), while
//!   copying 1 MiB tensors to align them cost the Python reader a quarter
//!   of its throughput (measured, docs/python.md);
//! * [`Data::MaybeShared`] (local pipelines, where a cache or a repeated
//!   `from_tensors` hands out the same buffer again): viewed only if
//!   aligned and [`ExclusiveBytes::from_unique`] finds it the only handle
//!   to its allocation.
//!
//! Otherwise numpy allocates the array and the bytes are copied once.
//! 0-d tensors become numpy scalars (`np.int64(3)`), string scalars `bytes`,
//! string arrays object arrays of `bytes`, as TensorFlow's
//! `as_numpy_iterator` gives them.
//!
//! The other way, Python values (numpy arrays and scalars, Python numbers,
//! `bytes`/`str`, lists) become tensors by TensorFlow's rules: Python ints
//! are int32 (int64 when they do not fit), floats float32; tuples and dicts
//! are structure, lists are tensors.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::os::raw::c_int;

use bytes::Bytes;
use numpy::npyffi::{self, NPY_ARRAY_WRITEABLE, PY_ARRAY_API, npy_intp};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use tfdata_client::received::{ExclusiveBytes, ReceivedData, ReceivedElement};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Tensor};
use tfdata_dataset::{Shape, Structure, TensorSpec};

/// A tensor's data as it reaches the converter: whether its bytes may back
/// a writable view is in its type (see the module docs).
#[derive(Debug)]
pub enum Data {
    /// Nothing else can read or write these bytes (received from a worker).
    Exclusive(ExclusiveBytes),
    /// Something may (a local pipeline's cache, a repeated source).
    MaybeShared(Bytes),
    /// A string tensor's strings (always copied into Python objects).
    Strings(Vec<Bytes>),
}

/// One tensor of an element on its way to Python.
#[derive(Debug)]
pub struct Component {
    dtype: DType,
    shape: Vec<i64>,
    data: Data,
}

/// The tensors of an element whose buffers anything may share (a local
/// pipeline's, a function's input).
pub fn maybe_shared(element: Element) -> Vec<Component> {
    element
        .components
        .into_iter()
        .map(|tensor| {
            let (dtype, shape, data) = tensor.into_parts();
            let data = match data {
                TensorData::Buffer(bytes) => Data::MaybeShared(bytes),
                TensorData::Strings(strings) => Data::Strings(strings),
            };
            Component { dtype, shape, data }
        })
        .collect()
}

/// The tensors of a received element, each buffer its own.
pub fn received(element: ReceivedElement) -> Vec<Component> {
    element
        .into_tensors()
        .map(|tensor| Component {
            dtype: tensor.dtype,
            shape: tensor.shape,
            data: match tensor.data {
                ReceivedData::Buffer(bytes) => Data::Exclusive(bytes),
                ReceivedData::Strings(strings) => Data::Strings(strings),
            },
        })
        .collect()
}

/// The owner of a numpy array's memory: a tensor buffer from Rust, which
/// no other handle can read or write, and which this object never reads
/// (numpy writes it).
#[pyclass(frozen, module = "tfdata._native")]
pub struct TensorBuffer {
    data: ExclusiveBytes,
}

#[pymethods]
impl TensorBuffer {
    /// Address of the first byte (tests compare it with the array's).
    #[getter]
    fn address(&self) -> usize {
        self.data.as_ptr() as usize
    }

    fn __len__(&self) -> usize {
        self.data.len()
    }
}

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NUMPY
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// numpy's dtype for each tfdata dtype it has one for (bfloat16 and the
/// float8 types through `ml_dtypes`, which TensorFlow installs, if present).
fn descr<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    static DESCRS: PyOnceLock<HashMap<i32, Py<PyArrayDescr>>> = PyOnceLock::new();
    let table = DESCRS.get_or_try_init(py, || -> PyResult<_> {
        let np = numpy(py)?;
        let ml_dtypes = py.import("ml_dtypes").ok();
        let mut table = HashMap::new();
        for code in 1..=28 {
            let Ok(d) = DType::from_code(code) else {
                continue;
            };
            let plain = match d {
                DType::String => continue,
                DType::QInt8 => "int8",
                DType::QUInt8 => "uint8",
                DType::QInt16 => "int16",
                DType::QUInt16 => "uint16",
                DType::QInt32 => "int32",
                other => other.name(),
            };
            let object = match np.getattr("dtype")?.call1((plain,)) {
                Ok(o) => o,
                Err(_) => match &ml_dtypes {
                    Some(m) => match m.getattr(plain) {
                        Ok(t) => np.getattr("dtype")?.call1((t,))?,
                        Err(_) => continue,
                    },
                    None => continue,
                },
            };
            table.insert(code, object.cast_into::<PyArrayDescr>()?.unbind());
        }
        Ok(table)
    })?;
    table
        .get(&dtype.code())
        .map(|d| d.bind(py).clone())
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "tensors of {dtype} have no numpy dtype here (install ml_dtypes for bfloat16 and float8)"
            ))
        })
}

/// The alignment numpy wants for `dtype`'s elements.
fn alignment(dtype: DType) -> usize {
    match dtype {
        DType::Complex64 => 4,
        DType::Complex128 => 8,
        other => other.size().unwrap_or(1).min(8),
    }
}

fn dims(shape: &[i64]) -> Vec<npy_intp> {
    shape.iter().map(|&d| d as npy_intp).collect()
}

/// A new numpy array of `shape`: a writable view of an exclusive buffer
/// (owned by a `TensorBuffer`), or allocated by numpy and filled from a copy.
#[allow(unsafe_code)]
fn new_array<'py>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[i64],
    source: ArraySource,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims = dims(shape);
    let (data, owner, copy) = match source {
        ArraySource::View(bytes) => {
            let data = bytes.as_ptr() as *mut c_void;
            (
                data,
                Some(Bound::new(py, TensorBuffer { data: bytes })?),
                None,
            )
        }
        ArraySource::Copy(bytes) => (std::ptr::null_mut(), None, Some(bytes)),
    };
    let ndim = c_int::try_from(dims.len())
        .map_err(|_| PyValueError::new_err("tensor rank too large for numpy"))?;
    // SAFETY: `descr` is a valid dtype (a new reference, which
    // PyArray_NewFromDescr steals); `dims` has `ndim` entries; null strides
    // mean C order. For a view, `data` points at the `ExclusiveBytes`'
    // bytes, which the tensor's size checks made exactly the array's size,
    // and they stay alive while the base object `owner`, which holds them,
    // does. Writing through the array is sound by `ExclusiveBytes`'
    // invariant: no other handle can read or write those bytes, and they are
    // heap memory the allocator gave as writable; `TensorBuffer` never makes
    // a reference to them.
    unsafe {
        let array = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            descr.clone().into_dtype_ptr(),
            ndim,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data,
            if data.is_null() {
                0
            } else {
                NPY_ARRAY_WRITEABLE
            },
            std::ptr::null_mut(),
        );
        if array.is_null() {
            return Err(PyErr::fetch(py));
        }
        let array = Bound::from_owned_ptr(py, array);
        match (owner, copy) {
            (Some(owner), _) => {
                // Steals the reference to `owner`.
                if PY_ARRAY_API.PyArray_SetBaseObject(
                    py,
                    array.as_ptr() as *mut npyffi::PyArrayObject,
                    owner.into_ptr(),
                ) < 0
                {
                    return Err(PyErr::fetch(py));
                }
            }
            (None, Some(bytes)) => {
                let target = (*(array.as_ptr() as *mut npyffi::PyArrayObject))
                    .fields
                    .data;
                // numpy allocated exactly the tensor's size, which `bytes` is.
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), target as *mut u8, bytes.len());
            }
            (None, None) => unreachable!("an array is a view or a copy"),
        }
        Ok(array)
    }
}

enum ArraySource {
    /// A writable view: the one way an array is made over Rust memory.
    View(ExclusiveBytes),
    Copy(Bytes),
}

/// A numpy scalar of `dtype` from its little-endian bytes.
#[allow(unsafe_code)]
fn new_scalar<'py>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    bytes: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    // An aligned copy: the bytes may sit at any offset of a frame.
    let mut aligned = [0u64; 2];
    let n = bytes.len().min(16);
    for (i, b) in bytes[..n].iter().enumerate() {
        aligned[i / 8] |= u64::from(*b) << (8 * (i % 8));
    }
    // SAFETY: `aligned` holds the scalar's `n` (≤ 16, its dtype's size)
    // bytes in native (little-endian) order, 8-aligned; PyArray_Scalar
    // copies them and borrows `descr`.
    unsafe {
        let scalar = PY_ARRAY_API.PyArray_Scalar(
            py,
            aligned.as_mut_ptr() as *mut c_void,
            descr.as_dtype_ptr(),
            std::ptr::null_mut(),
        );
        if scalar.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, scalar))
    }
}

/// A tensor as a Python value (see the module docs).
pub fn tensor_to_py<'py>(py: Python<'py>, tensor: Component) -> PyResult<Bound<'py, PyAny>> {
    let Component { dtype, shape, data } = tensor;
    let bytes = match data {
        Data::Strings(strings) => {
            if shape.is_empty() {
                let s = strings.first().map(|b| &b[..]).unwrap_or_default();
                return Ok(PyBytes::new(py, s).into_any());
            }
            let list = PyList::new(py, strings.iter().map(|s| PyBytes::new(py, s)))?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("dtype", py.get_type::<pyo3::types::PyAny>())?;
            let np = numpy(py)?;
            let flat = np.call_method("array", (list,), Some(&kwargs))?;
            return flat.call_method1("reshape", (PyTuple::new(py, &shape)?,));
        }
        Data::Exclusive(bytes) => Ok(bytes),
        Data::MaybeShared(bytes) => {
            if (bytes.as_ptr() as usize).is_multiple_of(alignment(dtype)) {
                ExclusiveBytes::from_unique(bytes)
            } else {
                Err(bytes)
            }
        }
    };
    let descr = descr(py, dtype)?;
    let source = match bytes {
        Ok(exclusive) if shape.is_empty() => {
            return new_scalar(py, &descr, &exclusive.into_bytes());
        }
        Err(shared) if shape.is_empty() => return new_scalar(py, &descr, &shared),
        // An empty array has no memory to view.
        Ok(exclusive) if exclusive.is_empty() => ArraySource::Copy(exclusive.into_bytes()),
        Ok(exclusive) => ArraySource::View(exclusive),
        Err(shared) => ArraySource::Copy(shared),
    };
    new_array(py, &descr, &shape, source)
}

/// An element as the Python value of its structure: a tensor's value, a
/// tuple, or a dict. Without a structure (a function's output undeclared),
/// one component is itself and several are a tuple.
pub fn element_to_py<'py>(
    py: Python<'py>,
    components: Vec<Component>,
    structure: Option<&Structure>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = components.len();
    let mut components = components.into_iter();
    match structure {
        Some(s) if s.num_components() == n => build(py, s, &mut components),
        _ if n == 1 => match components.next() {
            Some(t) => tensor_to_py(py, t),
            None => Ok(PyTuple::empty(py).into_any()),
        },
        _ => {
            let items = components
                .map(|t| tensor_to_py(py, t))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyTuple::new(py, items)?.into_any())
        }
    }
}

fn build<'py>(
    py: Python<'py>,
    structure: &Structure,
    components: &mut std::vec::IntoIter<Component>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match structure {
        Structure::Tensor(_) => {
            let t = components.next().ok_or_else(|| {
                PyValueError::new_err("element has fewer components than its spec")
            })?;
            tensor_to_py(py, t)?
        }
        Structure::Tuple(items) => {
            let values = items
                .iter()
                .map(|s| build(py, s, components))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, values)?.into_any()
        }
        Structure::Dict(items) => {
            let dict = PyDict::new(py);
            for (key, s) in items {
                dict.set_item(key, build(py, s, components)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python value as an element: its tensors in order (dict entries by
/// sorted key, as TensorFlow flattens them) and its structure.
pub fn py_to_element(value: &Bound<'_, PyAny>) -> PyResult<(Element, Structure)> {
    let mut tensors = Vec::new();
    let structure = flatten(value, &mut tensors, 0)?;
    Ok((Element::new(tensors), structure))
}

/// How deep tuples and dicts may nest in one element.
const MAX_NESTING: usize = 32;

fn flatten(value: &Bound<'_, PyAny>, out: &mut Vec<Tensor>, depth: usize) -> PyResult<Structure> {
    if depth > MAX_NESTING {
        return Err(PyValueError::new_err(format!(
            "element structure nests deeper than {MAX_NESTING} levels"
        )));
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        let items = tuple
            .iter()
            .map(|item| flatten(&item, out, depth + 1))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Structure::Tuple(items));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut entries = BTreeMap::new();
        for (k, v) in dict.iter() {
            let key: String = k.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "dictionary keys of elements must be strings, got {}",
                    k.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?;
            entries.insert(key, v);
        }
        let mut items = BTreeMap::new();
        for (k, v) in entries {
            items.insert(k, flatten(&v, out, depth + 1)?);
        }
        return Ok(Structure::Dict(items));
    }
    let tensor = py_to_tensor(value)?;
    let spec = TensorSpec::of(&tensor);
    out.push(tensor);
    Ok(Structure::Tensor(spec))
}

/// The dtype of a numpy dtype object, by name (`object`/`bytes`/`str`
/// arrays are strings).
fn dtype_of(descr: &Bound<'_, PyAny>) -> PyResult<DType> {
    let kind: String = descr.getattr("kind")?.extract()?;
    if matches!(kind.as_str(), "O" | "S" | "U") {
        return Ok(DType::String);
    }
    let name: String = descr.getattr("name")?.extract()?;
    DType::from_name(&name)
        .ok_or_else(|| PyTypeError::new_err(format!("numpy dtype {name} has no tfdata dtype")))
}

/// A Python value as a tensor (TensorFlow's conversion rules, see the module docs).
pub fn py_to_tensor(value: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = value.py();
    if let Ok(b) = value.cast::<PyBytes>() {
        return Ok(Tensor::scalar_string(Bytes::copy_from_slice(b.as_bytes())));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Tensor::scalar_string(Bytes::copy_from_slice(
            s.to_str()?.as_bytes(),
        )));
    }
    // Exact types only: numpy's float64 is a Python float and its dtype
    // must survive; numpy scalars take the array path below.
    if value.is_exact_instance_of::<PyBool>() {
        return Ok(Tensor::scalar(value.is_truthy()?));
    }
    if value.is_exact_instance_of::<PyInt>() {
        let v: i64 = value
            .extract()
            .map_err(|_| PyValueError::new_err(format!("integer {value} does not fit in int64")))?;
        return Ok(match i32::try_from(v) {
            Ok(small) => Tensor::scalar(small),
            Err(_) => Tensor::scalar(v),
        });
    }
    if value.is_exact_instance_of::<PyFloat>() {
        return Ok(Tensor::scalar(value.extract::<f64>()? as f32));
    }
    let np = numpy(py)?;
    let is_list = value.is_instance_of::<PyList>();
    let mut array = np.call_method1("asarray", (value,))?;
    if is_list {
        // TensorFlow converts Python lists of ints to int32 and of floats
        // to float32 (numpy would say int64 and float64).
        let name: String = array.getattr("dtype")?.getattr("name")?.extract()?;
        if name == "float64" {
            array = array.call_method1("astype", ("float32",))?;
        } else if name == "int64" {
            let size: usize = array.getattr("size")?.extract()?;
            let fits = size == 0 || {
                let lo: i64 = array.call_method0("min")?.extract()?;
                let hi: i64 = array.call_method0("max")?.extract()?;
                i32::try_from(lo).is_ok() && i32::try_from(hi).is_ok()
            };
            if fits {
                array = array.call_method1("astype", ("int32",))?;
            }
        }
    }
    let dtype = dtype_of(&array.getattr("dtype")?)?;
    let shape: Vec<i64> = array.getattr("shape")?.extract()?;
    if dtype == DType::String {
        let flat = array.call_method0("ravel")?.call_method0("tolist")?;
        let mut strings = Vec::new();
        for item in flat.try_iter()? {
            let item = item?;
            let bytes = if let Ok(b) = item.cast::<PyBytes>() {
                Bytes::copy_from_slice(b.as_bytes())
            } else if let Ok(s) = item.cast::<PyString>() {
                Bytes::copy_from_slice(s.to_str()?.as_bytes())
            } else {
                return Err(PyTypeError::new_err(format!(
                    "a string tensor's items must be bytes or str, got {}",
                    item.get_type().name()?
                )));
            };
            strings.push(bytes);
        }
        return Tensor::strings(strings, shape).map_err(|e| PyValueError::new_err(e.to_string()));
    }
    let array = np.call_method1("ascontiguousarray", (array,))?;
    let array = array.cast::<PyUntypedArray>()?;
    let bytes = read_bytes(array)?;
    Tensor::new(dtype, shape, TensorData::Buffer(bytes))
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A C-contiguous array's bytes, copied.
#[allow(unsafe_code)]
fn read_bytes(array: &Bound<'_, PyUntypedArray>) -> PyResult<Bytes> {
    if !array.is_c_contiguous() {
        return Err(PyValueError::new_err("expected a C-contiguous array"));
    }
    let itemsize = array.dtype().itemsize();
    let len = array.shape().iter().product::<usize>() * itemsize;
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: a C-contiguous array's data pointer addresses `len` bytes
    // (product of its dimensions times its item size), valid while we hold
    // the GIL and the array, which we do for the copy.
    let copied = unsafe {
        let data = (*array.as_array_ptr()).fields.data as *const u8;
        std::slice::from_raw_parts(data, len).to_vec()
    };
    Ok(Bytes::from(copied))
}

/// A placeholder element of `structure`, for learning what a Python
/// function makes of such an element: zeros, and strings `"placeholder"`
/// (an empty string is not a valid file name, and functions that open
/// their input are common); unknown dimensions are 1. `None` if it would
/// be unreasonably large.
pub fn placeholder(structure: &Structure) -> Option<Element> {
    /// Placeholders are made at pipeline construction; keep them small.
    const MAX_PLACEHOLDER_BYTES: u64 = 64 << 20;
    let mut total = 0u64;
    let mut tensors = Vec::new();
    for spec in structure.flatten() {
        let shape: Vec<i64> = match &spec.shape.0 {
            None => vec![],
            Some(dims) => dims.iter().map(|d| d.unwrap_or(1).max(0)).collect(),
        };
        let n = shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))?;
        let tensor = match spec.dtype.size() {
            None => {
                let placeholder = Bytes::from_static(b"placeholder");
                total = total.checked_add(n.checked_mul(placeholder.len() as u64)?)?;
                Tensor::strings(vec![placeholder; usize::try_from(n).ok()?], shape).ok()?
            }
            Some(size) => {
                let bytes = n.checked_mul(size as u64)?;
                total = total.checked_add(bytes)?;
                if total > MAX_PLACEHOLDER_BYTES {
                    return None;
                }
                let zeros = vec![0u8; usize::try_from(bytes).ok()?];
                Tensor::new(spec.dtype, shape, TensorData::Buffer(zeros.into())).ok()?
            }
        };
        if total > MAX_PLACEHOLDER_BYTES {
            return None;
        }
        tensors.push(tensor);
    }
    Some(Element::new(tensors))
}

/// What a structure learned from one placeholder call can promise: the
/// nesting, dtypes and ranks; not the sizes, which may follow the data.
pub fn relax(structure: &Structure) -> Structure {
    structure
        .map_components(&mut |spec| {
            let shape = match &spec.shape.0 {
                Some(dims) if !dims.is_empty() => Shape(Some(vec![None; dims.len()])),
                other => Shape(other.clone()),
            };
            Ok(TensorSpec::new(spec.dtype, shape))
        })
        .unwrap_or_else(|_| structure.clone())
}

/// TensorFlow's `tf.TensorSpec`: a component's dtype and (partial) shape.
#[pyclass(frozen, eq, hash, module = "tfdata._native", name = "TensorSpec")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyTensorSpec {
    pub spec: TensorSpec,
    name: Option<String>,
}

#[pymethods]
impl PyTensorSpec {
    /// `dtype` is a name (`"int64"`, `"string"`) or anything `numpy.dtype`
    /// takes (`np.float32`, `np.dtype("int64")`; `object`/`bytes` = string).
    #[new]
    #[pyo3(signature = (shape, dtype = None, name = None))]
    fn new(
        shape: Option<Vec<Option<i64>>>,
        dtype: Option<&Bound<'_, PyAny>>,
        name: Option<String>,
    ) -> PyResult<Self> {
        let dtype = match dtype {
            None => DType::Float,
            Some(d) => match d.extract::<String>() {
                Ok(n) => match DType::from_name(&n) {
                    Some(d) => d,
                    None => dtype_of(&numpy(d.py())?.getattr("dtype")?.call1((n,))?)?,
                },
                Err(_) => dtype_of(&numpy(d.py())?.getattr("dtype")?.call1((d,))?)?,
            },
        };
        if let Some(bad) = shape.iter().flatten().flatten().find(|d| **d < 0) {
            return Err(PyValueError::new_err(format!(
                "dimensions must be non-negative or None, got {bad}"
            )));
        }
        Ok(PyTensorSpec {
            spec: TensorSpec::new(dtype, Shape(shape)),
            name,
        })
    }

    /// The shape as a tuple (`None` for unknown dimensions), or `None` for
    /// an unknown rank.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.spec
            .shape
            .0
            .as_ref()
            .map(|dims| PyTuple::new(py, dims))
            .transpose()
    }

    /// TensorFlow's name of the dtype (`"int64"`, `"string"`, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.spec.dtype.name()
    }

    #[getter]
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn __repr__(&self) -> String {
        let shape = match &self.spec.shape.0 {
            None => "<unknown>".to_string(),
            Some(dims) => {
                let items: Vec<String> = dims
                    .iter()
                    .map(|d| d.map_or("None".to_string(), |v| v.to_string()))
                    .collect();
                if items.len() == 1 {
                    format!("({},)", items[0])
                } else {
                    format!("({})", items.join(", "))
                }
            }
        };
        let name = self
            .name
            .as_ref()
            .map_or("None".to_string(), |n| format!("{n:?}"));
        format!(
            "TensorSpec(shape={shape}, dtype={}, name={name})",
            self.spec.dtype.name()
        )
    }
}

/// A structure as Python: `TensorSpec`s in tuples and dicts.
pub fn structure_to_py<'py>(py: Python<'py>, s: &Structure) -> PyResult<Bound<'py, PyAny>> {
    Ok(match s {
        Structure::Tensor(spec) => Bound::new(
            py,
            PyTensorSpec {
                spec: spec.clone(),
                name: None,
            },
        )?
        .into_any(),
        Structure::Tuple(items) => PyTuple::new(
            py,
            items
                .iter()
                .map(|i| structure_to_py(py, i))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Structure::Dict(items) => {
            let dict = PyDict::new(py);
            for (k, v) in items {
                dict.set_item(k, structure_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python structure of `TensorSpec`s (in tuples and dicts) as a structure.
pub fn structure_from_py(value: &Bound<'_, PyAny>, depth: usize) -> PyResult<Structure> {
    if depth > MAX_NESTING {
        return Err(PyValueError::new_err("element_spec nests too deeply"));
    }
    if let Ok(spec) = value.cast::<PyTensorSpec>() {
        return Ok(Structure::Tensor(spec.get().spec.clone()));
    }
    if let Ok(tuple) = value.cast::<PyTuple>() {
        return Ok(Structure::Tuple(
            tuple
                .iter()
                .map(|i| structure_from_py(&i, depth + 1))
                .collect::<PyResult<_>>()?,
        ));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut items = BTreeMap::new();
        for (k, v) in dict.iter() {
            items.insert(k.extract::<String>()?, structure_from_py(&v, depth + 1)?);
        }
        return Ok(Structure::Dict(items));
    }
    Err(PyTypeError::new_err(format!(
        "element_spec must be TensorSpecs in tuples and dicts, got {}",
        value.get_type().name()?
    )))
}
