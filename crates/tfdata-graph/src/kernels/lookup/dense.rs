//! Dense hash tables (`tf.lookup.experimental.DenseHashTable`):
//! `MutableDenseHashTableV2` and `AnonymousMutableDenseHashTable`. The
//! table keeps TensorFlow's bucket array (`crate::table`: its hash,
//! probing, growth by the load factor, deleted markers), so find, insert,
//! remove, size and `LookupTableExportV2` are TensorFlow's; it refuses its
//! empty and deleted keys as TensorFlow's does. Keys that are vectors (a
//! non-scalar `empty_key`) are not supported.

use std::sync::{Arc, OnceLock};

use tfdata_core::{DType, Error, Result, Tensor};

use super::{node, shape_string, take};
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::table::{Key, LookupTable, keys_of};
use crate::value::Value;

/// The (key, value) dtype pairs TensorFlow 2.21 registers
/// `MutableDenseHashTableV2`'s CPU kernel for (a variant value is left out).
const DTYPE_PAIRS: &[(DType, DType)] = &[
    (DType::Int32, DType::Int32),
    (DType::Int32, DType::Float),
    (DType::Int32, DType::Double),
    (DType::Int64, DType::Int32),
    (DType::Int64, DType::Int64),
    (DType::Int64, DType::Float),
    (DType::Int64, DType::Double),
    (DType::Int64, DType::Bool),
    (DType::String, DType::Int32),
    (DType::String, DType::Int64),
    (DType::String, DType::Float),
    (DType::String, DType::Double),
    (DType::String, DType::Bool),
];

/// What a node's attributes fix: dtypes and value shape, checked.
struct Spec {
    key_dtype: DType,
    value_dtype: DType,
    value_shape: Vec<i64>,
    buckets: u64,
    max_load_factor: f32,
}

fn spec(attrs: &NodeAttrs) -> Result<Spec> {
    let (kd, vd) = (attrs.dtype("key_dtype")?, attrs.dtype("value_dtype")?);
    if !DTYPE_PAIRS.contains(&(kd, vd)) {
        return Err(attrs.error(format!(
            "MutableDenseHashTableV2 has no CPU kernel for key_dtype {kd}, value_dtype {vd}"
        )));
    }
    let value_shape: Vec<i64> = if attrs.has("value_shape") {
        let proto = attrs.shape("value_shape")?;
        if proto.unknown_rank || proto.dim.iter().any(|d| d.size < 0) {
            return Err(attrs.error("value_shape must be fully defined"));
        }
        proto.dim.iter().map(|d| d.size).collect()
    } else {
        Vec::new()
    };
    if value_shape.len() > 1 {
        return Err(Error::InvalidArgument(format!(
            "Empty value must be a scalar or a vector, got shape {}",
            shape_string(&value_shape)
        )));
    }
    let buckets = attrs.int_or("initial_num_buckets", 131072)?;
    if buckets < 4 || buckets & (buckets - 1) != 0 {
        return Err(Error::InvalidArgument(format!(
            "Number of buckets must be at least 4 and a power of 2, got: {buckets}"
        )));
    }
    let load = attrs.float_or("max_load_factor", 0.8)?;
    if !(load > 0.0 && load < 1.0) {
        return Err(Error::InvalidArgument(format!(
            "max_load_factor must be between 0 and 1, got: {}",
            crate::table::Scalar::F32(load)
        )));
    }
    Ok(Spec {
        key_dtype: kd,
        value_dtype: vd,
        value_shape,
        buckets: buckets as u64,
        max_load_factor: load,
    })
}

/// A new table from the `empty_key` and `deleted_key` inputs.
fn make(spec: &Spec, inputs: Vec<Value>) -> Result<Arc<LookupTable>> {
    const OP: &str = "MutableDenseHashTableV2";
    let [empty, deleted] = take(OP, inputs)?;
    let empty = empty.into_tensor("MutableDenseHashTableV2 empty_key")?;
    let deleted = deleted.into_tensor("MutableDenseHashTableV2 deleted_key")?;
    let key = |t: &Tensor, what: &str| -> Result<Key> {
        if t.dtype() != spec.key_dtype {
            return Err(Error::InvalidArgument(format!(
                "{OP}: {what} must be {}, got {}",
                spec.key_dtype,
                t.dtype()
            )));
        }
        if !t.shape().is_empty() {
            return Err(Error::Unimplemented(format!(
                "{OP}: keys that are vectors ({what} of shape {}) are not supported",
                shape_string(t.shape())
            )));
        }
        Ok(keys_of(t)?.remove(0))
    };
    let (empty, deleted) = (key(&empty, "empty_key")?, key(&deleted, "deleted_key")?);
    if empty == deleted {
        return Err(Error::InvalidArgument(
            "Empty and deleted keys cannot be equal".into(),
        ));
    }
    Ok(Arc::new(LookupTable::new_dense(
        (spec.key_dtype, spec.value_dtype, spec.value_shape.clone()),
        empty,
        deleted,
        spec.buckets,
        spec.max_load_factor,
    )?))
}

/// `MutableDenseHashTableV2`: made on the node's first run and kept
/// across the function's calls, as TensorFlow's kernel keeps its table.
pub(super) fn table(attrs: &NodeAttrs) -> Result<NodeFn> {
    let spec = spec(attrs)?;
    let made: OnceLock<Arc<LookupTable>> = OnceLock::new();
    node(move |inputs| {
        let table = match made.get() {
            Some(t) => t.clone(),
            None => {
                let t = make(&spec, inputs)?;
                made.get_or_init(|| t).clone()
            }
        };
        Ok(vec![Value::Table(table)])
    })
}

/// `AnonymousMutableDenseHashTable`: a new table each run.
pub(super) fn anonymous_table(attrs: &NodeAttrs) -> Result<NodeFn> {
    let spec = spec(attrs)?;
    node(move |inputs| Ok(vec![Value::Table(make(&spec, inputs)?)]))
}

/// A dense table's keys are a scalar or a vector (its keys are scalars):
/// TensorFlow's check, in its words.
pub(super) fn check_key_shape(table: &LookupTable, keys: &Tensor) -> Result<()> {
    if !table.is_dense() || keys.shape().len() <= 1 {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "Expected key shape {} got {}",
        shape_string(&keys.shape()[..1]),
        shape_string(keys.shape())
    )))
}
