//! Mutable hash tables (`tf.lookup.experimental.MutableHashTable` as raw
//! ops inside a function): `MutableHashTableV2` (and V1), made once per
//! node and kept across the function's calls as TensorFlow keeps a
//! kernel's table, `AnonymousMutableHashTable` (a new table each run),
//! `LookupTableInsertV2`, `LookupTableRemoveV2`, and `LookupTableFindV2` /
//! `LookupTableSizeV2` on them. The tables of tensors
//! (`MutableHashTableOfTensorsV2`, V1, anonymous) hold a vector per key;
//! dense tables (`dense`) are tables of tensors too. `LookupTableExportV2`
//! is in `export`.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};

use super::{check_signature, node, shape_string, table_of, take};
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::table::{LookupTable, keys_of, scalars_of, tensor_of};
use crate::value::Value;

/// The key and value dtypes, checked against what tables hold.
fn dtypes(attrs: &NodeAttrs) -> Result<(DType, DType)> {
    let (kd, vd) = (attrs.dtype("key_dtype")?, attrs.dtype("value_dtype")?);
    if !matches!(kd, DType::Int32 | DType::Int64 | DType::String)
        || !matches!(
            vd,
            DType::Int32
                | DType::Int64
                | DType::Float
                | DType::Double
                | DType::Bool
                | DType::String
        )
    {
        return Err(attrs.error(format!(
            "mutable tables of key_dtype {kd}, value_dtype {vd} are not supported"
        )));
    }
    Ok((kd, vd))
}

pub(super) fn table(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (kd, vd) = dtypes(attrs)?;
    let table = Arc::new(LookupTable::new_mutable(kd, vd));
    node(move |_| Ok(vec![Value::Table(table.clone())]))
}

pub(super) fn anonymous_table(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (kd, vd) = dtypes(attrs)?;
    node(move |_| {
        Ok(vec![Value::Table(Arc::new(LookupTable::new_mutable(
            kd, vd,
        )))])
    })
}

/// The value shape of a table of tensors: TensorFlow's tables hold
/// vectors.
fn value_shape(attrs: &NodeAttrs) -> Result<Vec<i64>> {
    if !attrs.has("value_shape") {
        // The attribute's default, a scalar.
        return Err(Error::InvalidArgument(
            "Default value must be a vector, got shape []".into(),
        ));
    }
    let proto = attrs.shape("value_shape")?;
    if proto.unknown_rank || proto.dim.iter().any(|d| d.size < 0) {
        return Err(attrs.error("value_shape must be fully defined"));
    }
    let shape: Vec<i64> = proto.dim.iter().map(|d| d.size).collect();
    if shape.len() != 1 {
        return Err(Error::InvalidArgument(format!(
            "Default value must be a vector, got shape {}",
            shape_string(&shape)
        )));
    }
    Ok(shape)
}

/// The (key, value) dtype pairs TensorFlow 2.21 registers
/// `MutableHashTableOfTensorsV2`'s CPU kernel for.
const TENSORS_DTYPE_PAIRS: &[(DType, DType)] = &[
    (DType::Int32, DType::Int32),
    (DType::Int32, DType::Float),
    (DType::Int32, DType::Double),
    (DType::Int64, DType::Int32),
    (DType::Int64, DType::Int64),
    (DType::Int64, DType::Float),
    (DType::Int64, DType::Double),
    (DType::Int64, DType::String),
    (DType::String, DType::Int32),
    (DType::String, DType::Int64),
    (DType::String, DType::Float),
    (DType::String, DType::Double),
    (DType::String, DType::Bool),
];

fn tensors_dtypes(attrs: &NodeAttrs) -> Result<(DType, DType)> {
    let (kd, vd) = (attrs.dtype("key_dtype")?, attrs.dtype("value_dtype")?);
    if !TENSORS_DTYPE_PAIRS.contains(&(kd, vd)) {
        return Err(attrs.error(format!(
            "MutableHashTableOfTensorsV2 has no CPU kernel for key_dtype {kd}, value_dtype {vd}"
        )));
    }
    Ok((kd, vd))
}

pub(super) fn table_of_tensors(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (kd, vd) = tensors_dtypes(attrs)?;
    let shape = value_shape(attrs)?;
    let table = Arc::new(LookupTable::new_of_tensors(kd, vd, shape));
    node(move |_| Ok(vec![Value::Table(table.clone())]))
}

pub(super) fn anonymous_table_of_tensors(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (kd, vd) = tensors_dtypes(attrs)?;
    let shape = value_shape(attrs)?;
    node(move |_| {
        Ok(vec![Value::Table(Arc::new(LookupTable::new_of_tensors(
            kd,
            vd,
            shape.clone(),
        )))])
    })
}

pub(super) fn insert(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        const OP: &str = "LookupTableInsertV2";
        let [handle, keys, values] = take(OP, inputs)?;
        let table = table_of(OP, &handle)?;
        let keys = keys.into_tensor("LookupTableInsertV2 keys")?;
        let values = values.into_tensor("LookupTableInsertV2 values")?;
        check_signature(
            (&[keys.dtype(), values.dtype()], &[]),
            (&[table.key_dtype(), table.value_dtype()], &[]),
        )?;
        // A table of tensors' values are the keys' shape then its own.
        let mut expected = keys.shape().to_vec();
        expected.extend_from_slice(table.value_shape().unwrap_or(&[]));
        if values.shape() != expected {
            return Err(Error::InvalidArgument(format!(
                "Expected shape {} for value, got {}",
                shape_string(&expected),
                shape_string(values.shape())
            )));
        }
        super::dense::check_key_shape(&table, &keys)?;
        if table.value_shape().is_some() {
            table.insert_rows(keys_of(&keys)?, scalars_of(&values)?)?;
            return Ok(Vec::new());
        }
        table.insert(keys_of(&keys)?, scalars_of(&values)?)?;
        Ok(Vec::new())
    })
}

pub(super) fn remove(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        const OP: &str = "LookupTableRemoveV2";
        let [handle, keys] = take(OP, inputs)?;
        let table = table_of(OP, &handle)?;
        let keys = keys.into_tensor("LookupTableRemoveV2 keys")?;
        if keys.dtype() != table.key_dtype() {
            return Err(Error::InvalidArgument(format!(
                "Key must be type {} but got {}",
                super::tf_name(table.key_dtype()),
                super::tf_name(keys.dtype())
            )));
        }
        super::dense::check_key_shape(&table, &keys)?;
        table.remove(&keys_of(&keys)?)?;
        Ok(Vec::new())
    })
}

/// `LookupTableFindV2` on a mutable table: the default is one value for
/// every key, or one per key (which TensorFlow's mutable tables use).
pub(super) fn find(table: &LookupTable, keys: &Tensor, default: &Tensor) -> Result<Vec<Value>> {
    let per_key = !default.shape().is_empty();
    if per_key && default.shape() != keys.shape() {
        return Err(Error::InvalidArgument(format!(
            "Expected shape [] or {} for default value, got {}",
            shape_string(keys.shape()),
            shape_string(default.shape())
        )));
    }
    let defaults = scalars_of(default)?;
    let key_list = keys_of(keys)?;
    let values = table.find(&key_list, |i| defaults[if per_key { i } else { 0 }].clone())?;
    let out = tensor_of(table.value_dtype(), keys.shape().to_vec(), values)?;
    Ok(vec![Value::Tensor(out)])
}

/// `LookupTableFindV2` on a table of tensors: the default is one value of
/// the table's value shape, or one per key (keys' shape then value shape).
pub(super) fn find_rows(
    table: &LookupTable,
    value_shape: &[i64],
    keys: &Tensor,
    default: &Tensor,
) -> Result<Vec<Value>> {
    let mut full = keys.shape().to_vec();
    full.extend_from_slice(value_shape);
    if default.shape() != value_shape && default.shape() != full.as_slice() {
        return Err(Error::InvalidArgument(format!(
            "Expected shape {} or {} for default value, got {}",
            shape_string(value_shape),
            shape_string(&full),
            shape_string(default.shape())
        )));
    }
    super::dense::check_key_shape(table, keys)?;
    let width = value_shape.iter().product::<i64>() as usize;
    // The output is a row per key: bounded like any output.
    crate::kernels::check_size(
        "LookupTableFindV2",
        table.value_dtype(),
        keys.num_elements().saturating_mul(width as u64),
    )?;
    let defaults = scalars_of(default)?;
    // TensorFlow's test: a default with as many values as the output is
    // one per key. A dense table always uses the first.
    let per_key = !table.is_dense() && defaults.len() as u64 == keys.num_elements() * width as u64;
    let key_list = keys_of(keys)?;
    let values = table.find_rows(&key_list, |i| {
        let at = if per_key { i * width } else { 0 };
        defaults[at..at + width].to_vec()
    })?;
    let out = tensor_of(table.value_dtype(), full, values)?;
    Ok(vec![Value::Tensor(out)])
}
