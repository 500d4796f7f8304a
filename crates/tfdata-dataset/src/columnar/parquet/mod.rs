//! `parquet_dataset`: the rows of Parquet files, as dictionaries of
//! tensors keyed by column (one element per row), or `batch_size` rows per
//! element straight from Arrow's column buffers (the fast path).
//!
//! * **Files** are local paths or object-store URLs (anything the io layer
//!   reads; patterns with wildcards are globbed, sorted), read through
//!   [`FsChunks`]: the footer with two ranged reads, then each row group's
//!   projected column chunks with one ranged read each, so a row group's
//!   selected columns are in memory while it is decoded and nothing else of
//!   the file is (the worker's memory stays bounded by a row group, whatever
//!   the file's size).
//! * **Projection**: only the named columns (and those a filter reads) are
//!   fetched and decoded.
//! * **Filters** ([`super::predicate`]) skip every row group whose
//!   statistics say no row can match (never fetched), and filter the rows
//!   of the others exactly.
//! * **Splits** (distributed_epoch): one per row group that may match, the
//!   pair `[file index, row group]`. Element `k` of a row group is at
//!   position `[k]` in its split, so reader checkpoints and a lost worker's
//!   splits account for it as for a file's records; a batch never spans row
//!   groups (the last of a row group may be shorter).
//! * **Types** ([`super::convert`]); the first file's schema is the
//!   dataset's, and a file whose read columns differ is an error naming it.

mod file;
mod read;

use std::sync::{Arc, Mutex};

use arrow_schema::SchemaRef;
use tfdata_core::{Result, Tensor};

use self::file::ParquetFile;
use self::read::ParquetIter;
use super::convert::{BatchPlan, Declared};
use super::predicate::Predicate;
use super::transform::BatchTransform;
use super::{check_batch_size, expand_files, in_file};
use crate::attrs::Attrs;
use crate::dataset::{DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::SplitProvider;

/// The op's name.
const OP: &str = "parquet_dataset";
/// Rows decoded at a time when elements are single rows.
pub const ROWS_PER_READ: usize = 8192;

/// The op.
#[derive(Debug)]
pub struct ParquetSource {
    /// File names or patterns, as given.
    pub filenames: Vec<String>,
    pub columns: Option<Vec<String>>,
    pub batch_size: Option<i64>,
    pub filter: Option<Predicate>,
    pub declared: Declared,
    /// The files, the first one's schema and the plan, once known.
    prepared: Mutex<Option<Arc<Prepared>>>,
    /// Rewrites batches before they become elements (not an attribute: set
    /// by a source built on this one, e.g. `huggingface_dataset`).
    transform: Option<Arc<dyn BatchTransform>>,
}

/// What reading needs, found once from the file names and the first file.
#[derive(Debug)]
struct Prepared {
    files: Vec<String>,
    schema: SchemaRef,
    plan: Arc<BatchPlan>,
    /// Columns fetched: those read and those the filter reads.
    fetched: Vec<String>,
}

impl ParquetSource {
    pub fn new(
        filenames: Vec<String>,
        columns: Option<Vec<String>>,
        batch_size: Option<i64>,
        filter: Option<Predicate>,
        declared: Declared,
    ) -> Self {
        ParquetSource {
            filenames,
            columns,
            batch_size,
            filter,
            declared,
            prepared: Mutex::new(None),
            transform: None,
        }
    }

    /// The same source with its batches rewritten by `transform` (after
    /// the filter, which reads the file's own columns).
    pub fn with_transform(mut self, transform: Arc<dyn BatchTransform>) -> Self {
        self.transform = Some(transform);
        self
    }

    fn prepare(&self) -> Result<Arc<Prepared>> {
        let mut slot = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = slot.as_ref() {
            return Ok(Arc::clone(p));
        }
        check_batch_size(OP, self.batch_size)?;
        let files = expand_files(OP, &self.filenames)?;
        let first = ParquetFile::open(&files[0], false)?;
        let schema = first.meta.schema().clone();
        let planned = match &self.transform {
            Some(t) => t.schema(&schema).map_err(|e| in_file(OP, &files[0], e))?,
            None => Arc::clone(&schema),
        };
        let plan = BatchPlan::new(
            &planned,
            self.columns.as_deref(),
            &self.declared,
            self.batch_size.is_some(),
        )
        .map_err(|e| in_file(OP, &files[0], e))?;
        let mut fetched: Vec<String> = plan.columns.keys().cloned().collect();
        if let Some(f) = &self.filter {
            f.check(OP, &schema)
                .map_err(|e| in_file(OP, &files[0], e))?;
            f.columns(&mut fetched);
        }
        let prepared = Arc::new(Prepared {
            files,
            schema,
            plan: Arc::new(plan),
            fetched,
        });
        *slot = Some(Arc::clone(&prepared));
        Ok(prepared)
    }
}

impl DatasetOp for ParquetSource {
    fn name(&self) -> &'static str {
        OP
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new().with("filenames", self.filenames.clone());
        if let Some(c) = &self.columns {
            a = a.with("columns", c.clone());
        }
        if let Some(b) = self.batch_size {
            a = a.with("batch_size", b);
        }
        if let Some(f) = &self.filter {
            a = a.with("filter", f.to_attr());
        }
        super::declared_attrs(a, &self.declared)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(Some(self.prepare()?.plan.structure()))
    }

    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let prepared = self.prepare()?;
        Ok(Box::new(ParquetIter::new(
            prepared,
            ctx.split_provider_for(self),
            self.filter.clone(),
            self.batch_size.map(|b| b as usize),
            self.transform.clone(),
        )))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(
            self.row_group_splits().map(|s| {
                Box::new(crate::splits::ListSplitProvider::new(s)) as Box<dyn SplitProvider>
            }),
        )
    }
}

impl ParquetSource {
    /// One split per row group that may match the filter, in file order.
    fn row_group_splits(&self) -> Result<Vec<Tensor>> {
        let prepared = self.prepare()?;
        let mut splits = Vec::new();
        for (f, path) in prepared.files.iter().enumerate() {
            let file = ParquetFile::open(path, false)?;
            for g in file.matching_row_groups(&prepared, self.filter.as_ref())? {
                splits.push(Tensor::vector(&[f as i64, g as i64]));
            }
        }
        Ok(splits)
    }
}

/// The attributes' op.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<ParquetSource> {
    attrs.check_known(
        op,
        &[
            "filenames",
            "columns",
            "batch_size",
            "filter",
            "null_values",
            "padding_values",
        ],
    )?;
    let columns = super::optional_columns(op, attrs)?;
    let filter = attrs
        .get("filter")
        .map(|f| Predicate::parse(op, f))
        .transpose()?;
    Ok(ParquetSource::new(
        attrs.strings(op, "filenames")?,
        columns,
        attrs.opt_int(op, "batch_size")?,
        filter,
        super::declared_values(op, attrs)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::Attr;
    use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A file of `groups` row groups of `rows` rows each: id (0..), score
    /// (id / 2), name ("n{id}").
    fn write(path: &std::path::Path, groups: usize, rows: usize) {
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows))
            .build();
        let n = (groups * rows) as i64;
        let batch = RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "score",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| i as f64 / 2.0),
                )),
            ),
            (
                "name",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("n{i}")),
                )),
            ),
        ])
        .unwrap();
        let file = std::fs::File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    pub(super) fn ids(ds: &crate::Dataset) -> Vec<i64> {
        let mut out = Vec::new();
        let mut it = ds.iter().unwrap();
        while let Some(e) = it.next_element().unwrap() {
            // id is the first component (sorted: id, name, score).
            out.extend(e.components[0].to_vec::<i64>().unwrap());
        }
        out
    }

    pub(super) fn source(
        files: Vec<String>,
        batch: Option<i64>,
        filter: Option<Attr>,
    ) -> crate::Dataset {
        crate::Dataset::from_op(ParquetSource::new(
            files,
            None,
            batch,
            filter.map(|f| Predicate::parse("t", &f).unwrap()),
            Declared::default(),
        ))
    }

    #[test]
    fn rows_batches_and_filters_over_row_groups_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
        write(&a, 3, 10);
        write(&b, 2, 10);
        let files = vec![
            a.to_str().unwrap().to_string(),
            b.to_str().unwrap().to_string(),
        ];
        let rows = source(files.clone(), None, None);
        let expected: Vec<i64> = (0..30).chain(0..20).collect();
        assert_eq!(ids(&rows), expected);
        let batched = source(files.clone(), Some(4), None);
        let mut it = batched.iter().unwrap();
        let first = it.next_element().unwrap().unwrap();
        assert_eq!(first.components[0].shape(), &[4]);
        assert_eq!(
            ids(&batched),
            expected,
            "batches cut at row groups, nothing lost"
        );
        // id >= 25 or id < 2: row group 0 (0..10) and 2 (20..30) of a, both
        // of b's; the rest pruned; rows filtered exactly.
        let filter = Attr::List(vec![
            Attr::List(vec![Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(25),
            ])]),
            Attr::List(vec![Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str("<".into()),
                Attr::Int(2),
            ])]),
        ]);
        let filtered = source(files.clone(), Some(3), Some(filter.clone()));
        let want: Vec<i64> = [0, 1, 25, 26, 27, 28, 29, 0, 1].to_vec();
        assert_eq!(ids(&filtered), want);
        let op = ParquetSource::new(
            files.clone(),
            None,
            None,
            Some(Predicate::parse("t", &filter).unwrap()),
            Declared::default(),
        );
        let splits: Vec<Vec<i64>> = op
            .row_group_splits()
            .unwrap()
            .iter()
            .map(|t| t.to_vec::<i64>().unwrap())
            .collect();
        assert_eq!(
            splits,
            vec![vec![0, 0], vec![0, 2], vec![1, 0]],
            "row group 1 of a pruned"
        );
        // The attribute form reads back as the same op.
        let ds = crate::Dataset::from_op(op);
        let def = crate::pipeline::to_pipeline_def(&ds, false).unwrap();
        let back = crate::pipeline::from_pipeline_def(&def).unwrap();
        assert_eq!(back, ds);
    }

    /// distributed_epoch: a row group handed out again (its worker was
    /// lost) with the positions readers already received skips exactly
    /// those rows, in row and in batch mode, and each split is let go of
    /// once its last element is.
    #[test]
    fn a_row_group_handed_out_again_skips_the_rows_readers_have() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.parquet");
        write(&a, 2, 6);
        let files = vec![a.to_str().unwrap().to_string()];
        for batch in [None, Some(2)] {
            let ds = source(files.clone(), batch, None);
            let splits = vec![Tensor::vector(&[0i64, 1]), Tensor::vector(&[0i64, 0])];
            // Group 1: rows 0 and 3 (ids 6, 9) received; in batch mode the
            // positions are batches: batch 1 (ids 8, 9) received.
            let skip = match batch {
                None => vec![vec![0], vec![3]],
                Some(_) => vec![vec![1]],
            };
            let provider = Arc::new(crate::splits::testing::SkippingSplits::new(
                splits,
                [(0, skip)].into(),
            ));
            let released = Arc::clone(&provider.released);
            let mut ctx = crate::IterContext::new();
            ctx.split_providers.insert(ds.op_key(), provider);
            let mut it = ds.iter_with(&ctx).unwrap();
            let mut ids = Vec::new();
            let mut held = Vec::new();
            while let Some(e) = it.next_element().unwrap() {
                ids.extend(e.components[0].to_vec::<i64>().unwrap());
                held.push(e);
            }
            let want: Vec<i64> = match batch {
                None => vec![7, 8, 10, 11, 0, 1, 2, 3, 4, 5],
                Some(_) => vec![6, 7, 10, 11, 0, 1, 2, 3, 4, 5],
            };
            assert_eq!(ids, want, "batch {batch:?}");
            drop(it);
            assert!(released.lock().unwrap().is_empty(), "elements still held");
            drop(held);
            let mut done = released.lock().unwrap().clone();
            done.sort_unstable();
            assert_eq!(done, vec![0, 1]);
        }
    }

    /// A filter prunes pages with the page index: only the pages of the
    /// matching rows (and of no other) are fetched, and the rows read are
    /// still filtered exactly.
    #[test]
    fn damaged_files_and_bad_arguments_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.parquet");
        write(&good, 1, 5);
        let bytes = std::fs::read(&good).unwrap();
        let truncated = dir.path().join("truncated.parquet");
        std::fs::write(&truncated, &bytes[..bytes.len() - 9]).unwrap();
        let garbage = dir.path().join("garbage.parquet");
        std::fs::write(&garbage, b"not a parquet file at all, no magic here").unwrap();
        for bad in [&truncated, &garbage] {
            let name = bad.to_str().unwrap().to_string();
            let err = source(vec![name.clone()], None, None)
                .iter()
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(&name), "{err}");
        }
        let name = good.to_str().unwrap().to_string();
        let err = crate::Dataset::from_op(ParquetSource::new(
            vec![name.clone()],
            Some(vec!["nope".into()]),
            None,
            None,
            Declared::default(),
        ))
        .iter()
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("column nope") && err.contains("id"), "{err}");
        let err = source(vec![name], Some(0), None)
            .iter()
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("batch_size"), "{err}");
    }
}
