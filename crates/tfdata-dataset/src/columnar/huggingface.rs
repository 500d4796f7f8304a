//! `huggingface_dataset`: a Hugging Face dataset kept on disk (or in an
//! object store), read from its own files and metadata, never from the
//! Hub.
//!
//! * **Layouts** ([`layout`], [`resolve`]): a folder `datasets`' `save_to_disk` wrote
//!   (`state.json` lists its `.arrow` shards, IPC streams), a `DatasetDict`
//!   folder of those (`dataset_dict.json` lists the splits, one folder
//!   each), or a local copy of a Hub dataset's Parquet files: a snapshot
//!   (`huggingface_hub.snapshot_download`), or the cache folder
//!   `datasets--org--name` holding snapshots (`refs/main` names the one
//!   read). In a snapshot the splits are `data/{split}-00000-of-00003.parquet`
//!   or `data/{split}.parquet` (what `push_to_hub` writes), the same at the
//!   top, or `{split}/*.parquet` (the `refs/convert/parquet` branch, one
//!   folder per config: a snapshot with one config is read from it, one
//!   with several needs `path` to name it). Anything else, or a path that
//!   does not exist, is an error that says how to make a local copy.
//! * **Splits**: `split` picks one; without it the folder must hold one.
//! * **Features** (from `dataset_info.json`, else the `huggingface` schema
//!   metadata the files carry; [`features`], [`Fix`]): `Image`, `Audio` (and `Video`,
//!   `Pdf`: the same storage) become their encoded file's bytes, a scalar
//!   string, so `decode_jpeg`/`decode_png` apply; `ClassLabel` is its
//!   `int64`; `Value`s, `Translation` and `Json` are their Arrow types
//!   ([`super::convert`]); `List`/`Sequence`/`LargeList` are lists of their
//!   feature; `Array2D`...`Array5D` become tensors of their shape (a
//!   dynamic first dimension varies per row). Other features are refused
//!   naming the column (leave it out with `columns`). An image stored as a
//!   path only (its bytes not embedded) is an error naming the column and
//!   row: tfdata does not follow paths out of the dataset.
//! * **Reading** is `arrow_dataset`'s for `.arrow` shards and
//!   `parquet_dataset`'s for Parquet files, with the features applied to
//!   each batch ([`super::transform`]): the same elements, batches, splits
//!   and positions. The op's attributes stay its own (`path`, `split`,
//!   `columns`, `batch_size`, `null_values`, `padding_values`); the inner
//!   source is rebuilt from them.

mod features;
mod layout;

use std::sync::{Arc, Mutex};

use tfdata_core::{Error, Result};

use self::features::FeatureTransform;
pub use self::features::Fix;
pub use self::layout::{Kind, Layout, resolve};
use super::arrow_ipc::ArrowSource;
use super::convert::Declared;
use super::parquet::ParquetSource;
use crate::Dataset;
use crate::attrs::Attrs;
use crate::dataset::{DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::SplitProvider;

const OP: &str = "huggingface_dataset";

/// The op.
#[derive(Debug)]
pub struct HuggingFaceSource {
    pub path: String,
    pub split: Option<String>,
    pub columns: Option<Vec<String>>,
    pub batch_size: Option<i64>,
    pub declared: Declared,
    /// The source reading the files, once the layout is known.
    inner: Mutex<Option<Dataset>>,
}

impl HuggingFaceSource {
    pub fn new(
        path: String,
        split: Option<String>,
        columns: Option<Vec<String>>,
        batch_size: Option<i64>,
        declared: Declared,
    ) -> Self {
        HuggingFaceSource {
            path,
            split,
            columns,
            batch_size,
            declared,
            inner: Mutex::new(None),
        }
    }

    fn inner(&self) -> Result<Dataset> {
        let mut slot = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let layout = resolve(&self.path, self.split.as_deref())?;
        let transform = Arc::new(FeatureTransform::new(layout.features, self.columns.clone()));
        let files = layout.files.iter().map(|f| layout::escape(f)).collect();
        let inner = match layout.kind {
            Kind::Arrow => Dataset::from_op(
                ArrowSource::new(
                    files,
                    self.columns.clone(),
                    self.batch_size,
                    self.declared.clone(),
                )
                .with_transform(transform),
            ),
            Kind::Parquet => Dataset::from_op(
                ParquetSource::new(
                    files,
                    self.columns.clone(),
                    self.batch_size,
                    None,
                    self.declared.clone(),
                )
                .with_transform(transform),
            ),
        };
        *slot = Some(inner.clone());
        Ok(inner)
    }

    fn context(&self, e: Error) -> Error {
        Error::Context {
            context: Some(format!("{OP}: {}", self.path)),
            source: Arc::new(e),
        }
    }
}

impl DatasetOp for HuggingFaceSource {
    fn name(&self) -> &'static str {
        OP
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new().with("path", self.path.clone());
        if let Some(s) = &self.split {
            a = a.with("split", s.clone());
        }
        if let Some(c) = &self.columns {
            a = a.with("columns", c.clone());
        }
        if let Some(b) = self.batch_size {
            a = a.with("batch_size", b);
        }
        super::declared_attrs(a, &self.declared)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let inner = self.inner()?;
        inner.op().element_spec().map_err(|e| self.context(e))
    }

    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let inner = self.inner()?;
        // The splits handed to this op are the inner source's.
        let mut ctx = ctx.clone();
        if let Some(splits) = ctx.split_provider_for(self) {
            ctx.split_providers.insert(inner.op_key(), splits);
        }
        inner.op().make_iterator(&ctx).map_err(|e| self.context(e))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        match self.inner() {
            Ok(inner) => inner.op().split_provider(),
            Err(e) => Some(Err(e)),
        }
    }
}

/// The attributes' op.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<HuggingFaceSource> {
    attrs.check_known(
        op,
        &[
            "path",
            "split",
            "columns",
            "batch_size",
            "null_values",
            "padding_values",
        ],
    )?;
    let columns = super::optional_columns(op, attrs)?;
    let split = match attrs.get("split") {
        None => None,
        Some(_) => Some(attrs.str(op, "split")?.to_string()),
    };
    Ok(HuggingFaceSource::new(
        attrs.str(op, "path")?.to_string(),
        split,
        columns,
        attrs.opt_int(op, "batch_size")?,
        super::declared_values(op, attrs)?,
    ))
}

impl Dataset {
    /// `HuggingFaceDataset(path, split, columns, batch_size)`: see
    /// [`self`](mod@self).
    pub fn hugging_face(
        path: &str,
        split: Option<&str>,
        columns: Option<&[&str]>,
        batch_size: Option<i64>,
    ) -> Dataset {
        Dataset::from_op(HuggingFaceSource::new(
            path.to_string(),
            split.map(str::to_string),
            columns.map(|c| c.iter().map(|c| c.to_string()).collect()),
            batch_size,
            Declared::default(),
        ))
    }
}

#[cfg(test)]
mod tests;
