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
