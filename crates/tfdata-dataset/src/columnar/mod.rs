//! Columnar sources: the data PyTorch and JAX teams keep in Parquet, Arrow
//! IPC files and Hugging Face dataset folders, read with arrow-rs into the
//! engine's tensors.
//!
//! * [`convert`]: Arrow types as tensor dtypes and shapes, record batches
//!   as elements (a dictionary per row, or one per batch of rows);
//! * [`export`]: elements back to Arrow record batches (`as_arrow_iterator`);
//! * [`predicate`]: row filters, checked against row-group statistics
//!   (pruning) and evaluated on the rows read;
//! * [`parquet`][mod@parquet]: `parquet_dataset`;
//! * [`arrow_ipc`]: `arrow_dataset`, Arrow IPC files and streams;
//! * [`huggingface`]: `huggingface_dataset`, `datasets`' folders and Hub
//!   snapshots, read through `arrow_dataset` or `parquet_dataset` with the
//!   features applied to each batch ([`transform`]).
//!
//! Module dependencies point one way: `huggingface → {arrow_ipc, parquet}`,
//! `parquet → {convert, predicate, transform}`,
//! `arrow_ipc → {convert, transform}`.

pub mod arrow_ipc;
pub mod convert;
pub mod export;
pub mod huggingface;
pub mod parquet;
pub mod predicate;
pub mod transform;

use std::collections::BTreeMap;

use tfdata_core::{Error, Result, Tensor};

use crate::Dataset;
use crate::attrs::{Attr, Attrs};

/// The op names this module builds.
pub const OP_NAMES: &[&str] = &["parquet_dataset", "arrow_dataset", "huggingface_dataset"];

/// Rebuilds a columnar source from its attributes; `None` for other ops.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<Option<Dataset>> {
    Ok(Some(match op {
        "parquet_dataset" => Dataset::from_op(parquet::from_attrs(op, attrs)?),
        "arrow_dataset" => Dataset::from_op(arrow_ipc::from_attrs(op, attrs)?),
        "huggingface_dataset" => Dataset::from_op(huggingface::from_attrs(op, attrs)?),
        _ => return Ok(None),
    }))
}

/// Most rows one element may batch (`batch_size`).
pub const MAX_BATCH_ROWS: i64 = 1 << 24;

/// `batch_size` checked: none, or 1 to [`MAX_BATCH_ROWS`] rows.
pub(crate) fn check_batch_size(op: &str, batch_size: Option<i64>) -> Result<()> {
    match batch_size {
        Some(b) if !(1..=MAX_BATCH_ROWS).contains(&b) => Err(Error::InvalidArgument(format!(
            "{op}: batch_size must be between 1 and {MAX_BATCH_ROWS}, got {b}"
        ))),
        _ => Ok(()),
    }
}

/// `e`, said to be about `op`'s file `path`.
pub(crate) fn in_file(op: &str, path: &str, e: Error) -> Error {
    Error::Context {
        context: Some(format!("{op}: {path}")),
        source: std::sync::Arc::new(e),
    }
}

/// The files `names` stand for: each name, or the files a pattern matches
/// (sorted); no names, an empty one, or a pattern matching nothing is an
/// error.
pub(crate) fn expand_files(op: &str, names: &[String]) -> Result<Vec<String>> {
    if names.is_empty() {
        return Err(Error::InvalidArgument(format!("{op}: no filenames given")));
    }
    let mut files = Vec::new();
    for name in names {
        if name.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{op}: a file name is empty"
            )));
        }
        if crate::io::pattern::has_wildcard(name) {
            let matched = crate::io::glob(name)?;
            if matched.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "{op}: no files match {name}"
                )));
            }
            files.extend(matched);
        } else {
            files.push(name.clone());
        }
    }
    Ok(files)
}

/// `a` with the declared null and padding values (`null_values`,
/// `padding_values`), as [`declared_values`] reads them back.
pub(crate) fn declared_attrs(mut a: Attrs, declared: &convert::Declared) -> Attrs {
    let values = |m: &BTreeMap<String, Tensor>| {
        Attr::Map(
            m.iter()
                .map(|(k, v)| (k.clone(), Attr::Tensor(v.clone())))
                .collect(),
        )
    };
    if !declared.null_values.is_empty() {
        a = a.with("null_values", values(&declared.null_values));
    }
    if !declared.padding_values.is_empty() {
        a = a.with("padding_values", values(&declared.padding_values));
    }
    a
}

/// The optional `columns` attribute.
pub(crate) fn optional_columns(op: &str, attrs: &Attrs) -> Result<Option<Vec<String>>> {
    match attrs.get("columns") {
        None => Ok(None),
        Some(_) => Ok(Some(attrs.strings(op, "columns")?)),
    }
}

/// The declared null and padding values (`null_values`, `padding_values`:
/// maps of column to a scalar: a tensor, a number, a string or a boolean).
pub(crate) fn declared_values(op: &str, attrs: &Attrs) -> Result<convert::Declared> {
    let values = |key: &str| -> Result<BTreeMap<String, Tensor>> {
        let Some(_) = attrs.get(key) else {
            return Ok(BTreeMap::new());
        };
        attrs
            .map(op, key)?
            .iter()
            .map(|(column, v)| {
                let t = match v {
                    Attr::Tensor(t) => t.clone(),
                    Attr::Int(i) => Tensor::scalar(*i),
                    Attr::Float(f) => Tensor::scalar(*f),
                    Attr::Bool(b) => Tensor::scalar(*b),
                    Attr::Str(s) => Tensor::scalar_string(s.clone().into_bytes()),
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "{op}: {key}.{column} must be a scalar value"
                        )));
                    }
                };
                Ok((column.clone(), t))
            })
            .collect()
    };
    Ok(convert::Declared {
        null_values: values("null_values")?,
        padding_values: values("padding_values")?,
    })
}

impl Dataset {
    /// `ParquetDataset(filenames, columns, batch_size, filter)`: see
    /// [`parquet`].
    pub fn parquet(
        filenames: &[&str],
        columns: Option<&[&str]>,
        batch_size: Option<i64>,
        filter: Option<predicate::Predicate>,
    ) -> Dataset {
        Dataset::from_op(parquet::ParquetSource::new(
            filenames.iter().map(|f| f.to_string()).collect(),
            columns.map(|c| c.iter().map(|c| c.to_string()).collect()),
            batch_size,
            filter,
            convert::Declared::default(),
        ))
    }
}
