//! `LookupTableExportV2` (and the V1 `LookupTableExport`): a table's keys
//! and values. TensorFlow gives them in its hash map's iteration order,
//! which depends on a per-process seed, so no fixed order is TensorFlow's;
//! tfdata gives key order, and the differential cases compare the
//! (key, value) rows as a set (declared there, with the reason). A dense
//! table (`MutableDenseHashTableV2`) exports its whole bucket array, which
//! tfdata keeps in TensorFlow's layout (`crate::table`): bit for bit.

use tfdata_core::{DType, Result};

use super::{check_signature, node, table_of, take};
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::table::{Key, Scalar, tensor_of};
use crate::value::Value;

pub(super) fn export(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (tkeys, tvalues) = (attrs.dtype("Tkeys")?, attrs.dtype("Tvalues")?);
    node(move |inputs| {
        const OP: &str = "LookupTableExportV2";
        let [handle] = take(OP, inputs)?;
        let table = table_of(OP, &handle)?;
        check_signature(
            (&[], &[tkeys, tvalues]),
            (&[], &[table.key_dtype(), table.value_dtype()]),
        )?;
        let export =
            table.export(|rows| crate::kernels::check_size(OP, table.value_dtype(), rows))?;
        let (keys, values) = (export.keys, export.values);
        let n = keys.len() as i64;
        let key_values: Vec<Scalar> = keys
            .into_iter()
            .map(|k| match (k, tkeys) {
                (Key::Int(v), DType::Int32) => Scalar::I32(v as i32),
                (Key::Int(v), _) => Scalar::I64(v),
                (Key::Str(s), _) => Scalar::Str(s),
            })
            .collect();
        let mut value_shape = vec![n];
        value_shape.extend_from_slice(table.value_shape().unwrap_or(&[]));
        let mut key_shape = vec![n];
        if export.buckets {
            // A dense table's buckets are matrices: a key and a value row
            // per bucket, scalars as rows of one.
            key_shape.push(1);
            let width: i64 = value_shape[1..].iter().product();
            value_shape = vec![n, width];
        }
        Ok(vec![
            Value::Tensor(tensor_of(tkeys, key_shape, key_values)?),
            Value::Tensor(tensor_of(tvalues, value_shape, values)?),
        ])
    })
}
