//! Mutable hash tables (`tf.lookup.experimental.MutableHashTable` as raw
//! ops inside a function): `MutableHashTableV2` (and V1), made once per
//! node and kept across the function's calls as TensorFlow keeps a
//! kernel's table, `AnonymousMutableHashTable` (a new table each run),
//! `LookupTableInsertV2`, `LookupTableRemoveV2`, and `LookupTableFindV2` /
//! `LookupTableSizeV2` on them. Scalar values only; `LookupTableExportV2`
//! is left out: TensorFlow exports in its hash map's order, which tfdata
//! cannot reproduce.

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};

use super::{check_signature, node, shape_string, table_of, take};
use crate::attrs::NodeAttrs;
use crate::function::NodeFn;
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
        if keys.shape() != values.shape() {
            return Err(Error::InvalidArgument(format!(
                "Expected shape {} for value, got {}",
                shape_string(keys.shape()),
                shape_string(values.shape())
            )));
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
