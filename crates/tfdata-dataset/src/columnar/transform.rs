//! A hook between a columnar source's decoder and [`super::convert`]: a
//! rewrite of each record batch (and so of the schema the element
//! structure is planned from), for sources that read another library's
//! encoding of its data, such as `huggingface_dataset`, whose `Image` and
//! `Audio` columns are structs of which only the encoded bytes become a
//! tensor.
//!
//! Column names stay: a source projects the columns it reads by name
//! before the rewrite, and plans the elements after it.

use std::fmt;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use tfdata_core::Result;

/// Rewrites a source's record batches before they become elements.
pub trait BatchTransform: fmt::Debug + Send + Sync {
    /// The schema batches have once rewritten, from a file's own. Called
    /// with the first file's schema before any batch is rewritten.
    fn schema(&self, file_schema: &Schema) -> Result<SchemaRef>;

    /// `batch` (the file's columns that are read, by name) rewritten.
    /// `what` names where it came from, for errors.
    fn batch(&self, batch: RecordBatch, what: &str) -> Result<RecordBatch>;
}
