//! Lookup tables: `HashTableV2` and the ops that fill and read it, as
//! `tf.lookup.StaticHashTable` and `StaticVocabularyTable` put them in
//! dataset graphs.
//!
//! TensorFlow serialises a pipeline's table into the outer graph: a
//! `HashTableV2` node, its initializer (`LookupTableImportV2` with the
//! entries as constants, or `InitializeTableFromTextFileV2` with the file
//! name), and an `Identity` of the handle with a control edge on the
//! initializer, which the map node captures. The outer graph runs once, so
//! the table is created and filled once; map functions then read it with
//! `LookupTableFindV2` and `LookupTableSizeV2` (the vocabulary table's
//! out-of-vocabulary buckets are `StringToHashBucketFast` plus the size,
//! ops of the function). The handle is a [`Value::Table`].
//!
//! These kernels take and make values, not tensors
//! ([`super::ResourceKernelDef`]). Errors are TensorFlow's: its messages
//! and codes, in the order its kernels check them.

mod dense;
mod export;
mod mutable;
mod text;

use std::sync::Arc;

use tfdata_core::{DType, Error, Result, Tensor};

use super::ResourceKernelDef;
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
pub use crate::table::{Key, LookupTable, Scalar};
use crate::value::Value;
use text::TextFileSpec;

/// Entries one table may hold (a text file's lines; tensors are bounded
/// by their own size).
pub const MAX_TABLE_ENTRIES: usize = 1 << 24;

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    ResourceKernelDef {
        op: "HashTableV2",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: hash_table,
    },
    ResourceKernelDef {
        op: "LookupTableImportV2",
        outputs: |_| Ok(Vec::new()),
        build: import,
    },
    ResourceKernelDef {
        op: "InitializeTableV2",
        outputs: |_| Ok(Vec::new()),
        build: initialize,
    },
    ResourceKernelDef {
        op: "InitializeTableFromTextFileV2",
        outputs: |_| Ok(Vec::new()),
        build: from_text_file,
    },
    ResourceKernelDef {
        op: "LookupTableFindV2",
        outputs: |_| Ok(vec![("values", 1)]),
        build: find,
    },
    ResourceKernelDef {
        op: "LookupTableSizeV2",
        outputs: |_| Ok(vec![("size", 1)]),
        build: size,
    },
    ResourceKernelDef {
        op: "MutableHashTableV2",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: mutable::table,
    },
    ResourceKernelDef {
        op: "MutableHashTable",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: mutable::table,
    },
    ResourceKernelDef {
        op: "AnonymousMutableHashTable",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: mutable::anonymous_table,
    },
    ResourceKernelDef {
        op: "MutableHashTableOfTensorsV2",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: mutable::table_of_tensors,
    },
    ResourceKernelDef {
        op: "MutableHashTableOfTensors",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: mutable::table_of_tensors,
    },
    ResourceKernelDef {
        op: "AnonymousMutableHashTableOfTensors",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: mutable::anonymous_table_of_tensors,
    },
    ResourceKernelDef {
        op: "MutableDenseHashTableV2",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: dense::table,
    },
    ResourceKernelDef {
        op: "AnonymousMutableDenseHashTable",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: dense::anonymous_table,
    },
    ResourceKernelDef {
        op: "LookupTableInsertV2",
        outputs: |_| Ok(Vec::new()),
        build: mutable::insert,
    },
    ResourceKernelDef {
        op: "LookupTableInsert",
        outputs: |_| Ok(Vec::new()),
        build: mutable::insert,
    },
    ResourceKernelDef {
        op: "LookupTableExportV2",
        outputs: |_| Ok(vec![("keys", 1), ("values", 1)]),
        build: export::export,
    },
    ResourceKernelDef {
        op: "LookupTableExport",
        outputs: |_| Ok(vec![("keys", 1), ("values", 1)]),
        build: export::export,
    },
    ResourceKernelDef {
        op: "LookupTableRemoveV2",
        outputs: |_| Ok(Vec::new()),
        build: mutable::remove,
    },
    // A new table each run, as TensorFlow's anonymous table is.
    ResourceKernelDef {
        op: "AnonymousHashTable",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: hash_table,
    },
    // The V1 ops (a `Ref(string)` handle where V2 has a resource): the
    // same tables, which TensorFlow still runs in graph functions.
    ResourceKernelDef {
        op: "HashTable",
        outputs: |_| Ok(vec![("table_handle", 1)]),
        build: hash_table,
    },
    ResourceKernelDef {
        op: "LookupTableImport",
        outputs: |_| Ok(Vec::new()),
        build: import,
    },
    ResourceKernelDef {
        op: "InitializeTable",
        outputs: |_| Ok(Vec::new()),
        build: initialize,
    },
    ResourceKernelDef {
        op: "InitializeTableFromTextFile",
        outputs: |_| Ok(Vec::new()),
        build: from_text_file,
    },
    ResourceKernelDef {
        op: "LookupTableFind",
        outputs: |_| Ok(vec![("values", 1)]),
        build: find,
    },
    ResourceKernelDef {
        op: "LookupTableSize",
        outputs: |_| Ok(vec![("size", 1)]),
        build: size,
    },
];

/// TensorFlow's `DataTypeString`.
pub(super) fn tf_name(d: DType) -> &'static str {
    match d {
        DType::Float => "float",
        DType::Double => "double",
        DType::Half => "half",
        other => other.name(),
    }
}

fn invalid(op: &str, msg: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {msg}"))
}

/// The inputs as an array, or an error if there are not exactly `N`.
fn take<const N: usize>(op: &str, inputs: Vec<Value>) -> Result<[Value; N]> {
    let n = inputs.len();
    inputs
        .try_into()
        .map_err(|_| invalid(op, format!("expected {N} inputs, got {n}")))
}

fn table_of(op: &str, v: &Value) -> Result<Arc<LookupTable>> {
    match v {
        Value::Table(t) => Ok(t.clone()),
        _ => Err(invalid(
            op,
            "input `table_handle` must be a table a HashTableV2 node made",
        )),
    }
}

/// TensorFlow's `MatchSignature` error: inputs after the handle, outputs.
fn check_signature(have: (&[DType], &[DType]), want: (&[DType], &[DType])) -> Result<()> {
    if have == want {
        return Ok(());
    }
    let show = |(ins, outs): (&[DType], &[DType])| {
        let ins: Vec<&str> = std::iter::once("resource")
            .chain(ins.iter().map(|d| tf_name(*d)))
            .collect();
        let outs: Vec<&str> = outs.iter().map(|d| tf_name(*d)).collect();
        format!("{}->{}", ins.join(", "), outs.join(", "))
    };
    Err(Error::InvalidArgument(format!(
        "Signature mismatch, have: {} expected: {}",
        show(have),
        show(want)
    )))
}

fn shape_string(shape: &[i64]) -> String {
    let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
    format!("[{}]", dims.join(","))
}

fn node(f: impl Fn(Vec<Value>) -> Result<Vec<Value>> + Send + Sync + 'static) -> Result<NodeFn> {
    Ok(Arc::new(f))
}

fn hash_table(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (kd, vd) = (attrs.dtype("key_dtype")?, attrs.dtype("value_dtype")?);
    if !crate::table::DTYPE_PAIRS.contains(&(kd, vd)) {
        return Err(attrs.error(format!(
            "HashTableV2 has no CPU kernel for key_dtype {kd}, value_dtype {vd}"
        )));
    }
    // A new table each time the node runs: the outer graph runs once.
    node(move |_| Ok(vec![Value::Table(Arc::new(LookupTable::new(kd, vd)))]))
}

/// Fills `table` from `keys` and `values` of one shape (an initialised
/// table accepts as many entries as it holds, as TensorFlow's does).
fn import_values(table: &LookupTable, keys: &Tensor, values: &Tensor) -> Result<()> {
    if table.value_shape().is_some() {
        // TensorFlow replaces a mutable table's contents; not done here.
        return Err(Error::Unimplemented(
            "importing into a table of tensors or a dense table is not supported".into(),
        ));
    }
    let keys = crate::table::keys_of(keys)?;
    let values = crate::table::scalars_of(values)?;
    if keys.is_empty() {
        return Err(Error::InvalidArgument(
            "keys and values cannot be empty tensors.".into(),
        ));
    }
    let mut init = table.init();
    if init.initialized_size().is_some() {
        return init.again(keys.len() as u64);
    }
    for (k, v) in keys.into_iter().zip(values) {
        init.insert(k, v)?;
    }
    init.finish();
    Ok(())
}

fn dtypes_attr(attrs: &NodeAttrs, k: &str, v: &str) -> Result<(DType, DType)> {
    Ok((attrs.dtype(k)?, attrs.dtype(v)?))
}

fn import(attrs: &NodeAttrs) -> Result<NodeFn> {
    dtypes_attr(attrs, "Tin", "Tout")?;
    node(|inputs| {
        let [handle, keys, values] = take("LookupTableImportV2", inputs)?;
        let table = table_of("LookupTableImportV2", &handle)?;
        let (keys, values) = (
            keys.into_tensor("LookupTableImportV2 keys")?,
            values.into_tensor("LookupTableImportV2 values")?,
        );
        check_signature(
            (&[keys.dtype(), values.dtype()], &[]),
            (&[table.key_dtype(), table.value_dtype()], &[]),
        )?;
        if values.shape() != keys.shape() {
            return Err(Error::InvalidArgument(format!(
                "Expected shape {} for value, got {}",
                shape_string(keys.shape()),
                shape_string(values.shape())
            )));
        }
        import_values(&table, &keys, &values)?;
        Ok(Vec::new())
    })
}

fn initialize(attrs: &NodeAttrs) -> Result<NodeFn> {
    dtypes_attr(attrs, "Tkey", "Tval")?;
    node(|inputs| {
        let [handle, keys, values] = take("InitializeTableV2", inputs)?;
        let table = table_of("InitializeTableV2", &handle)?;
        let (keys, values) = (
            keys.into_tensor("InitializeTableV2 keys")?,
            values.into_tensor("InitializeTableV2 values")?,
        );
        check_signature(
            (&[keys.dtype(), values.dtype()], &[]),
            (&[table.key_dtype(), table.value_dtype()], &[]),
        )?;
        for (what, t) in [("Keys", &keys), ("Values", &values)] {
            if t.shape().len() != 1 {
                return Err(Error::InvalidArgument(format!(
                    "{what} must be a vector, but received shape{}",
                    shape_string(t.shape())
                )));
            }
        }
        if keys.num_elements() != values.num_elements() {
            return Err(Error::InvalidArgument(format!(
                "Keys and values must have the same size {} vs {}",
                keys.num_elements(),
                values.num_elements()
            )));
        }
        import_values(&table, &keys, &values)?;
        Ok(Vec::new())
    })
}

fn from_text_file(attrs: &NodeAttrs) -> Result<NodeFn> {
    let at_least = |key: &str, min: i64, default: Option<i64>| -> Result<i64> {
        let v = match default {
            Some(d) => attrs.int_or(key, d)?,
            None => attrs.int(key)?,
        };
        if v < min {
            return Err(Error::InvalidArgument(format!(
                "Value for attr '{key}' of {v} must be at least minimum {min}"
            )));
        }
        Ok(v)
    };
    let delimiter = attrs.bytes("delimiter").unwrap_or(b"\t");
    let [delimiter] = delimiter else {
        return Err(Error::InvalidArgument(
            "delimiter should be only 1 char".into(),
        ));
    };
    let spec = TextFileSpec {
        vocab_size: at_least("vocab_size", -1, Some(-1))?,
        key_index: at_least("key_index", -2, None)?,
        value_index: at_least("value_index", -2, None)?,
        delimiter: *delimiter,
        offset: attrs.int_or("offset", 0)?,
    };
    node(move |inputs| {
        const OP: &str = "InitializeTableFromTextFileV2";
        let [handle, filename] = take(OP, inputs)?;
        let table = table_of(OP, &handle)?;
        let filename = filename.into_tensor("InitializeTableFromTextFileV2 filename")?;
        check_signature((&[filename.dtype()], &[]), (&[DType::String], &[]))?;
        if !filename.shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "filename should be a single string, but got {}",
                shape_string(filename.shape())
            )));
        }
        let name = filename.string_values()?[0].clone();
        if name.is_empty() {
            return Err(Error::InvalidArgument("filename cannot be empty.".into()));
        }
        text::initialize(&table, &String::from_utf8_lossy(&name), &spec)?;
        Ok(Vec::new())
    })
}

fn find(attrs: &NodeAttrs) -> Result<NodeFn> {
    let (_, tout) = dtypes_attr(attrs, "Tin", "Tout")?;
    node(move |inputs| {
        let [handle, keys, default] = take("LookupTableFindV2", inputs)?;
        let table = table_of("LookupTableFindV2", &handle)?;
        let (keys, default) = (
            keys.into_tensor("LookupTableFindV2 keys")?,
            default.into_tensor("LookupTableFindV2 default_value")?,
        );
        check_signature(
            (&[keys.dtype(), default.dtype()], &[tout]),
            (
                &[table.key_dtype(), table.value_dtype()],
                &[table.value_dtype()],
            ),
        )?;
        let scalar_default = default.shape().is_empty();
        if let Some(value_shape) = table.value_shape() {
            return mutable::find_rows(&table, value_shape, &keys, &default);
        }
        if table.is_mutable() {
            return mutable::find(&table, &keys, &default);
        }
        if !scalar_default && default.shape() != keys.shape() {
            return Err(Error::InvalidArgument(format!(
                "Expected shape [] or {} for default value, got {}",
                shape_string(keys.shape()),
                shape_string(default.shape())
            )));
        }
        if !table.is_initialized() {
            return Err(Error::FailedPrecondition("Table not initialized.".into()));
        }
        // TensorFlow accepts a default per key but uses the first for all.
        let default = crate::table::scalars_of(&default)?.into_iter().next();
        let key_list = crate::table::keys_of(&keys)?;
        let values = table.find(&key_list, |_| {
            default.clone().unwrap_or(crate::table::Scalar::I64(0))
        })?;
        let out = crate::table::tensor_of(table.value_dtype(), keys.shape().to_vec(), values)?;
        Ok(vec![Value::Tensor(out)])
    })
}

fn size(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let [handle] = take("LookupTableSizeV2", inputs)?;
        let table = table_of("LookupTableSizeV2", &handle)?;
        Ok(vec![Value::Tensor(Tensor::scalar(table.size() as i64))])
    })
}

#[cfg(test)]
mod tests;
