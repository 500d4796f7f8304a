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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::SchemaRef;
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::reader::{ChunkReader, Length};
use tfdata_core::{Element, Error, Lineage, Result, Tensor};

use super::convert::{BatchPlan, Declared};
use super::predicate::{ColumnStats, Predicate, column_literals};
use super::transform::BatchTransform;
use super::{check_batch_size, expand_files, in_file};
use crate::attrs::Attrs;
use crate::dataset::{DatasetOp, IterContext};
use crate::io::FileSystem;
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::SplitProvider;

/// The op's name.
const OP: &str = "parquet_dataset";
/// Rows decoded at a time when elements are single rows.
pub const ROWS_PER_READ: usize = 8192;
/// Footers kept open by one iterator (files of a split-reading worker).
const OPEN_FILES: usize = 16;
/// The footer read first: enough for most files' metadata in one request.
const FOOTER_PREFETCH: u64 = 64 << 10;

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
        Ok(Box::new(ParquetIter {
            splits: ctx.split_provider_for(self),
            filter: self.filter.clone(),
            batch_rows: self.batch_size.map(|b| b as usize),
            local: LocalOrder::new(&prepared),
            prepared,
            open: HashMap::new(),
            group: None,
            fetched_bytes: 0,
            transform: self.transform.clone(),
        }))
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

/// One Parquet file's footer, and where its bytes are read from.
struct ParquetFile {
    path: String,
    fs: Arc<dyn FileSystem>,
    size: u64,
    meta: ArrowReaderMetadata,
    /// Row groups' bytes read outside the planned ranges ([`FsChunks`]).
    unplanned: Arc<std::sync::atomic::AtomicU64>,
}

impl ParquetFile {
    /// The file's footer (and with `page_index`, its column and offset
    /// indexes when it has them: what filters prune pages with).
    fn open(path: &str, page_index: bool) -> Result<ParquetFile> {
        let fs = crate::io::file_system(path)?;
        let size = fs.file_size(path)?;
        let tail = size.saturating_sub(FOOTER_PREFETCH);
        let chunks = FsChunks {
            path: path.to_string(),
            fs: Arc::clone(&fs),
            size,
            held: vec![(tail, fs.read_range(path, tail, size - tail)?)],
            unplanned: Arc::default(),
        };
        let policy = if page_index {
            PageIndexPolicy::Optional
        } else {
            PageIndexPolicy::Skip
        };
        let options = ArrowReaderOptions::new().with_page_index_policy(policy);
        let meta = ArrowReaderMetadata::load(&chunks, options)
            .map_err(|e| parquet_error(path, "reading the footer", e))?;
        Ok(ParquetFile {
            path: path.to_string(),
            fs,
            size,
            meta,
            unplanned: Arc::default(),
        })
    }

    /// The row groups of which some row may match `filter`.
    fn matching_row_groups(
        &self,
        prepared: &Prepared,
        filter: Option<&Predicate>,
    ) -> Result<Vec<usize>> {
        self.check_schema(prepared)?;
        let groups = self.meta.metadata().row_groups();
        let Some(filter) = filter else {
            return Ok((0..groups.len()).collect());
        };
        let mut columns = Vec::new();
        filter.columns(&mut columns);
        let mut stats: HashMap<String, Vec<ColumnStats>> = HashMap::new();
        for c in &columns {
            if let Some(s) = self.column_stats(c) {
                stats.insert(c.clone(), s);
            }
        }
        Ok((0..groups.len())
            .filter(|&g| filter.may_match(&|c: &str| stats.get(c).and_then(|s| s.get(g)).cloned()))
            .collect())
    }

    /// Per row group, what its statistics say of `column` (`None` when
    /// the file records none usable).
    fn column_stats(&self, column: &str) -> Option<Vec<ColumnStats>> {
        let meta = self.meta.metadata();
        let conv = StatisticsConverter::try_new(
            column,
            self.meta.schema(),
            meta.file_metadata().schema_descr(),
        )
        .ok()?;
        let groups = meta.row_groups();
        let mins = column_literals(&conv.row_group_mins(groups.iter()).ok()?).ok()?;
        let maxes = column_literals(&conv.row_group_maxes(groups.iter()).ok()?).ok()?;
        let nulls = conv.row_group_null_counts(groups.iter()).ok()?;
        Some(
            (0..groups.len())
                .map(|g| ColumnStats {
                    min: mins.get(g).cloned().flatten(),
                    max: maxes.get(g).cloned().flatten(),
                    null_count: (!arrow_array::Array::is_null(&nulls, g)).then(|| nulls.value(g)),
                    rows: groups[g].num_rows().max(0) as u64,
                })
                .collect(),
        )
    }

    /// The columns read must be the first file's.
    fn check_schema(&self, prepared: &Prepared) -> Result<()> {
        let schema = self.meta.schema();
        for c in &prepared.fetched {
            let want = prepared.schema.field_with_name(c).map(|f| f.data_type());
            let have = schema.field_with_name(c).map(|f| f.data_type());
            match (want, have) {
                (Ok(w), Ok(h)) if w == h => {}
                (Ok(w), Ok(h)) => {
                    return Err(Error::InvalidArgument(format!(
                        "parquet_dataset: {}: column {c} is {h}, but {w} in {} (the first \
                         file): every file must have the same schema",
                        self.path, prepared.files[0]
                    )));
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "parquet_dataset: {}: column {c} is missing (it is in {}, the first \
                         file)",
                        self.path, prepared.files[0]
                    )));
                }
            }
        }
        Ok(())
    }

    /// Row group `g`'s rows whose pages' statistics say they may match
    /// `filter` (the page index: per page min, max and null count), as a
    /// selection; `None` when every page may match or the file has no
    /// usable page index for the filter's columns (then every row is read
    /// and filtered). Pages of different columns end at different rows:
    /// the row group is cut at every page boundary of the filter's columns,
    /// and each piece is judged by the pages holding it.
    fn page_selection(&self, filter: &Predicate, g: usize) -> Option<RowSelection> {
        /// One column's pages: the first row of each, and its statistics.
        struct Pages {
            starts: Vec<usize>,
            stats: Vec<ColumnStats>,
        }
        let meta = self.meta.metadata();
        let (Some(column_index), Some(offset_index)) = (meta.column_index(), meta.offset_index())
        else {
            return None;
        };
        let num_rows = usize::try_from(meta.row_groups().get(g)?.num_rows()).ok()?;
        let mut columns = Vec::new();
        filter.columns(&mut columns);
        let mut pages: HashMap<String, Pages> = HashMap::new();
        for c in &columns {
            let conv = StatisticsConverter::try_new(
                c,
                self.meta.schema(),
                meta.file_metadata().schema_descr(),
            )
            .ok()?;
            let column = conv.parquet_column_index()?;
            let locations = offset_index.get(g)?.get(column)?.page_locations();
            column_index.get(g)?.get(column)?;
            let starts: Vec<usize> = locations
                .iter()
                .map(|l| usize::try_from(l.first_row_index).ok())
                .collect::<Option<_>>()?;
            // What a writer must produce; anything else is not trusted.
            let ordered = starts.first() == Some(&0)
                && starts.windows(2).all(|w| w[0] < w[1])
                && starts.last().is_some_and(|&l| l < num_rows);
            if !ordered {
                return None;
            }
            let groups = [g];
            let mins = conv
                .data_page_mins(column_index, offset_index, &groups)
                .ok()?;
            let maxes = conv
                .data_page_maxes(column_index, offset_index, &groups)
                .ok()?;
            let nulls = conv
                .data_page_null_counts(column_index, offset_index, &groups)
                .ok()?;
            let (mins, maxes) = (column_literals(&mins).ok()?, column_literals(&maxes).ok()?);
            if mins.len() != starts.len()
                || maxes.len() != starts.len()
                || nulls.len() != starts.len()
            {
                return None;
            }
            let stats = (0..starts.len())
                .map(|p| ColumnStats {
                    min: mins[p].clone(),
                    max: maxes[p].clone(),
                    null_count: (!arrow_array::Array::is_null(&nulls, p)).then(|| nulls.value(p)),
                    rows: (starts.get(p + 1).copied().unwrap_or(num_rows) - starts[p]) as u64,
                })
                .collect();
            pages.insert(c.clone(), Pages { starts, stats });
        }
        let mut bounds: Vec<usize> = pages.values().flat_map(|p| p.starts.clone()).collect();
        bounds.push(num_rows);
        bounds.sort_unstable();
        bounds.dedup();
        let mut selectors: Vec<RowSelector> = Vec::new();
        for w in bounds.windows(2) {
            let (from, n) = (w[0], w[1] - w[0]);
            let keep = filter.may_match(&|c: &str| {
                let p = pages.get(c)?;
                let i = p.starts.partition_point(|&s| s <= from).checked_sub(1)?;
                p.stats.get(i).cloned()
            });
            match selectors.last_mut() {
                Some(last) if last.skip != keep => last.row_count += n,
                _ if keep => selectors.push(RowSelector::select(n)),
                _ => selectors.push(RowSelector::skip(n)),
            }
        }
        selectors
            .iter()
            .any(|s| s.skip)
            .then(|| RowSelection::from(selectors))
    }

    /// A reader of row group `g`'s fetched columns, `rows` at a time, of
    /// the rows `selection` keeps (all without one): the column chunks, or
    /// with a selection and an offset index only their pages holding kept
    /// rows (and the dictionary page), are fetched first, one ranged read
    /// per run of adjacent pages; returns the reader and the bytes fetched.
    fn read_row_group(
        &self,
        prepared: &Prepared,
        g: usize,
        rows: usize,
        selection: Option<RowSelection>,
    ) -> Result<(ParquetRecordBatchReader, u64)> {
        let meta = self.meta.metadata();
        let group = meta.row_groups().get(g).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "parquet_dataset: {} has no row group {g} (it has {})",
                self.path,
                meta.num_row_groups()
            ))
        })?;
        let schema = self.meta.schema();
        let roots: Vec<usize> = prepared
            .fetched
            .iter()
            .filter_map(|c| schema.index_of(c).ok())
            .collect();
        let descr = meta.file_metadata().schema_descr();
        let kept = selection.as_ref().map(kept_row_ranges);
        let mut held = Vec::new();
        let mut fetched = 0u64;
        for (i, column) in group.columns().iter().enumerate() {
            if !roots.contains(&descr.get_column_root_idx(i)) {
                continue;
            }
            let (start, len) = column.byte_range();
            if start.saturating_add(len) > self.size {
                return Err(Error::DataLoss {
                    location: self.path.clone(),
                    reason: format!(
                        "row group {g}'s column {} lies past the end of the file ({} bytes)",
                        column.column_path(),
                        self.size
                    ),
                });
            }
            let pages = meta
                .offset_index()
                .and_then(|o| o.get(g)?.get(i))
                .map(|o| o.page_locations().as_slice());
            let ranges = match (&kept, pages) {
                (Some(kept), Some(pages)) => {
                    let num_rows = u64::try_from(group.num_rows()).unwrap_or(0);
                    page_ranges(start, len, pages, kept, num_rows)
                }
                _ => vec![(start, len)],
            };
            for (at, n) in ranges {
                fetched += n;
                held.push((at, self.fs.read_range(&self.path, at, n)?));
            }
        }
        let chunks = FsChunks {
            path: self.path.clone(),
            fs: Arc::clone(&self.fs),
            size: self.size,
            held,
            unplanned: Arc::clone(&self.unplanned),
        };
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, self.meta.clone())
                .with_projection(ProjectionMask::roots(descr, roots))
                .with_row_groups(vec![g])
                .with_batch_size(rows);
        if let Some(selection) = selection {
            builder = builder.with_row_selection(selection);
        }
        let reader = builder
            .build()
            .map_err(|e| parquet_error(&self.path, &format!("reading row group {g}"), e))?;
        Ok((reader, fetched))
    }
}

/// The row ranges `[from, to)` a selection keeps.
fn kept_row_ranges(selection: &RowSelection) -> Vec<(u64, u64)> {
    let mut at = 0u64;
    let mut kept = Vec::new();
    for s in selection.iter() {
        let n = s.row_count as u64;
        if !s.skip {
            kept.push((at, at + n));
        }
        at += n;
    }
    kept
}

/// The byte ranges of a column chunk (at `start`, `len` bytes) to fetch
/// for the rows `kept`: the dictionary page (what precedes the first data
/// page) and the data pages holding a kept row, adjacent ones joined.
/// Pages outside the chunk (a damaged offset index) fall back to the
/// whole chunk.
fn page_ranges(
    start: u64,
    len: u64,
    pages: &[parquet::file::page_index::offset_index::PageLocation],
    kept: &[(u64, u64)],
    num_rows: u64,
) -> Vec<(u64, u64)> {
    let whole = vec![(start, len)];
    let end = start.saturating_add(len);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut push = |at: u64, n: u64| match ranges.last_mut() {
        Some((s, l)) if *s + *l == at => *l += n,
        _ => ranges.push((at, n)),
    };
    let Some(first) = pages.first() else {
        return whole;
    };
    let Ok(first_offset) = u64::try_from(first.offset) else {
        return whole;
    };
    if first_offset < start || first_offset > end {
        return whole;
    }
    if first_offset > start {
        push(start, first_offset - start);
    }
    for (p, page) in pages.iter().enumerate() {
        let (Ok(offset), Ok(size), Ok(from)) = (
            u64::try_from(page.offset),
            u64::try_from(page.compressed_page_size),
            u64::try_from(page.first_row_index),
        ) else {
            return whole;
        };
        if offset < start || offset.saturating_add(size) > end {
            return whole;
        }
        let to = pages
            .get(p + 1)
            .and_then(|n| u64::try_from(n.first_row_index).ok())
            .unwrap_or(num_rows);
        if kept.iter().any(|&(a, b)| a < to && from < b) {
            push(offset, size);
        }
    }
    ranges
}

fn parquet_error(path: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::DataLoss {
        location: path.to_string(),
        reason: format!("{what}: {e} (is it a Parquet file, whole and undamaged?)"),
    }
}

/// A file's bytes for the Parquet reader: the ranges fetched ahead, and
/// ranged reads through the io layer for anything else.
struct FsChunks {
    path: String,
    fs: Arc<dyn FileSystem>,
    size: u64,
    /// Ranges already read (the footer's, or a row group's column chunks).
    held: Vec<(u64, Bytes)>,
    /// Bytes read because the reader asked for a range not held: each a
    /// request of its own, so a plan that fetches ahead keeps this at 0.
    unplanned: Arc<std::sync::atomic::AtomicU64>,
}

impl FsChunks {
    fn held(&self, start: u64, len: u64) -> Option<Bytes> {
        self.held.iter().find_map(|(at, b)| {
            let end = at + b.len() as u64;
            (start >= *at && start.saturating_add(len) <= end)
                .then(|| b.slice((start - at) as usize..(start - at + len) as usize))
        })
    }
}

impl Length for FsChunks {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for FsChunks {
    type T = std::io::Cursor<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        // Page headers: the rest of the held range they start in.
        if let Some((at, b)) = self
            .held
            .iter()
            .find(|(at, b)| start >= *at && start < at + b.len() as u64)
        {
            return Ok(std::io::Cursor::new(b.slice((start - at) as usize..)));
        }
        let len = (self.size.saturating_sub(start)).min(FOOTER_PREFETCH);
        self.unplanned
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        self.fs
            .read_range(&self.path, start, len)
            .map(std::io::Cursor::new)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        if let Some(b) = self.held(start, length as u64) {
            return Ok(b);
        }
        self.unplanned
            .fetch_add(length as u64, std::sync::atomic::Ordering::Relaxed);
        let read = self
            .fs
            .read_range(&self.path, start, length as u64)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        if read.len() != length {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "{}: wanted {length} bytes at {start}, the file has {}",
                self.path, self.size
            )));
        }
        Ok(read)
    }
}

/// Which row group comes next when the iterator reads without splits.
struct LocalOrder {
    file: usize,
    /// The current file's matching row groups still to read.
    groups: std::collections::VecDeque<usize>,
    started: bool,
}

impl LocalOrder {
    fn new(_prepared: &Prepared) -> Self {
        LocalOrder {
            file: 0,
            groups: Default::default(),
            started: false,
        }
    }
}

/// The row group being read.
struct Group {
    file: usize,
    group: usize,
    reader: ParquetRecordBatchReader,
    /// Its elements decoded and not yet returned, in order.
    ready: std::collections::VecDeque<Element>,
    /// Filtered rows waiting to fill a batch (batch mode with a filter).
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    done: bool,
    /// The split's lineage (distributed_epoch), let go of before its last
    /// element leaves (as a file source does), and the next position.
    lineage: Lineage,
    next_position: i64,
}

struct ParquetIter {
    prepared: Arc<Prepared>,
    splits: Option<Arc<dyn SplitProvider>>,
    filter: Option<Predicate>,
    batch_rows: Option<usize>,
    local: LocalOrder,
    /// Footers of files opened, by index (at most [`OPEN_FILES`]).
    open: HashMap<usize, Arc<ParquetFile>>,
    group: Option<Group>,
    /// Bytes of column chunks fetched so far (pages pruned are not).
    fetched_bytes: u64,
    transform: Option<Arc<dyn BatchTransform>>,
}

impl ParquetIter {
    fn file(&mut self, f: usize) -> Result<Arc<ParquetFile>> {
        if let Some(file) = self.open.get(&f) {
            return Ok(Arc::clone(file));
        }
        let path = self.prepared.files.get(f).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "parquet_dataset: split names file {f} of {}",
                self.prepared.files.len()
            ))
        })?;
        let file = Arc::new(ParquetFile::open(path, self.filter.is_some())?);
        file.check_schema(&self.prepared)?;
        if self.open.len() >= OPEN_FILES {
            self.open.clear();
        }
        self.open.insert(f, Arc::clone(&file));
        Ok(file)
    }

    /// The next row group to read and its lineage, or `None` at the end.
    fn next_group(&mut self) -> Result<Option<(usize, usize, Lineage)>> {
        if let Some(splits) = &self.splits {
            let Some((split, lineage)) = splits.get_next_leased()? else {
                return Ok(None);
            };
            let v = split.to_vec::<i64>()?;
            let (Some(&f), Some(&g), 2) = (v.first(), v.get(1), v.len()) else {
                return Err(Error::InvalidArgument(format!(
                    "parquet_dataset: a split must be [file, row group], got {v:?}"
                )));
            };
            let (f, g) = (
                usize::try_from(f).map_err(|_| bad_split(&v))?,
                usize::try_from(g).map_err(|_| bad_split(&v))?,
            );
            return Ok(Some((f, g, lineage)));
        }
        loop {
            if let Some(g) = self.local.groups.pop_front() {
                return Ok(Some((self.local.file, g, Lineage::default())));
            }
            if self.local.started {
                self.local.file += 1;
            }
            self.local.started = true;
            if self.local.file >= self.prepared.files.len() {
                return Ok(None);
            }
            let file = self.file(self.local.file)?;
            self.local.groups = file
                .matching_row_groups(&self.prepared, self.filter.as_ref())?
                .into();
        }
    }

    /// Decodes the current group's next read (or ends it): more elements in
    /// `ready`, or `done`.
    fn decode(&mut self) -> Result<()> {
        let plan = Arc::clone(&self.prepared.plan);
        let batch_rows = self.batch_rows;
        let Some(group) = self.group.as_mut() else {
            return Ok(());
        };
        let what = format!(
            "parquet_dataset: {} row group {}",
            self.prepared.files[group.file], group.group
        );
        let next = group
            .reader
            .next()
            .transpose()
            .map_err(|e| Error::DataLoss {
                location: what.clone(),
                reason: format!("decoding: {e}"),
            })?;
        let Some(mut batch) = next else {
            // The end of the row group: what waits for a batch goes out.
            group.done = true;
            if group.pending_rows > 0 {
                let rest = take_pending(group, &what)?;
                group.ready.extend(plan.elements(&rest, &what)?);
            }
            return Ok(());
        };
        if let Some(filter) = &self.filter {
            let mask = BooleanArray::from(filter.mask(&batch)?);
            batch = arrow_select::filter::filter_record_batch(&batch, &mask)
                .map_err(|e| Error::Internal(format!("{what}: filtering rows: {e}")))?;
        }
        if let Some(t) = &self.transform {
            batch = t.batch(batch, &what)?;
        }
        match batch_rows {
            // Rows: every read's rows.
            None => group.ready.extend(plan.elements(&batch, &what)?),
            // Batches of exactly `n` rows (filtered reads are shorter).
            Some(n) => {
                if batch.num_rows() == n && group.pending_rows == 0 {
                    group.ready.extend(plan.elements(&batch, &what)?);
                    return Ok(());
                }
                group.pending_rows += batch.num_rows();
                group.pending.push(batch);
                while group.pending_rows >= n {
                    let all = take_pending(group, &what)?;
                    let head = all.slice(0, n);
                    let tail = all.slice(n, all.num_rows() - n);
                    group.ready.extend(plan.elements(&head, &what)?);
                    if tail.num_rows() > 0 {
                        group.pending_rows = tail.num_rows();
                        group.pending.push(tail);
                    }
                }
            }
        }
        Ok(())
    }
}

fn bad_split(v: &[i64]) -> Error {
    Error::InvalidArgument(format!(
        "parquet_dataset: a split must be [file, row group], got {v:?}"
    ))
}

/// The pending batches as one, taken out of `group`.
fn take_pending(group: &mut Group, what: &str) -> Result<RecordBatch> {
    let pending = std::mem::take(&mut group.pending);
    group.pending_rows = 0;
    let schema = pending
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| Error::Internal(format!("{what}: no pending rows")))?;
    arrow_select::concat::concat_batches(&schema, &pending)
        .map_err(|e| Error::Internal(format!("{what}: joining rows: {e}")))
}

impl ElementIterator for ParquetIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            let Some(group) = self.group.as_mut() else {
                let Some((f, g, lineage)) = self.next_group()? else {
                    return Ok(None);
                };
                let file = self.file(f)?;
                let rows = self.batch_rows.unwrap_or(ROWS_PER_READ);
                let selection = self.filter.as_ref().and_then(|p| file.page_selection(p, g));
                let (reader, fetched) = file.read_row_group(&self.prepared, g, rows, selection)?;
                self.fetched_bytes += fetched;
                self.group = Some(Group {
                    file: f,
                    group: g,
                    reader,
                    ready: Default::default(),
                    pending: Vec::new(),
                    pending_rows: 0,
                    done: false,
                    lineage,
                    next_position: 0,
                });
                continue;
            };
            // One element ahead: at the group's last element the split is
            // let go of first, so that element holds all that is left of it.
            if group.ready.len() < 2 && !group.done {
                self.decode()?;
                continue;
            }
            let Some(element) = group.ready.pop_front() else {
                self.group = None;
                continue;
            };
            let position = group.next_position;
            group.next_position += 1;
            let lineage = group.lineage.child(position);
            if group.ready.is_empty() && group.done {
                group.lineage = Lineage::default();
            }
            // Positions readers already have (the split handed out again).
            let Some(lineage) = lineage else {
                continue;
            };
            return Ok(Some(element.with_lineage(lineage)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::Attr;
    use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
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

    fn ids(ds: &crate::Dataset) -> Vec<i64> {
        let mut out = Vec::new();
        let mut it = ds.iter().unwrap();
        while let Some(e) = it.next_element().unwrap() {
            // id is the first component (sorted: id, name, score).
            out.extend(e.components[0].to_vec::<i64>().unwrap());
        }
        out
    }

    fn source(files: Vec<String>, batch: Option<i64>, filter: Option<Attr>) -> crate::Dataset {
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
    fn filters_prune_pages_by_the_page_index_and_fetch_only_theirs() {
        use parquet::file::properties::EnabledStatistics;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.parquet");
        // One row group of 2,000 rows, pages of 100 rows with statistics.
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(2000))
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(100)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_enabled(false)
            .build();
        let n = 2000i64;
        let batch = RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "score",
                Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64))),
            ),
        ])
        .unwrap();
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            batch.schema(),
            Some(props),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let name = path.to_str().unwrap().to_string();
        let filter = Predicate::parse(
            "t",
            &Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(1950),
            ]),
        )
        .unwrap();
        let op = ParquetSource::new(
            vec![name.clone()],
            None,
            None,
            Some(filter.clone()),
            Declared::default(),
        );
        let prepared = op.prepare().unwrap();
        let file = ParquetFile::open(&name, true).unwrap();
        let selection = file.page_selection(&filter, 0).expect("pages pruned");
        assert_eq!(kept_row_ranges(&selection), vec![(1900, 2000)]);
        let (_, all) = file.read_row_group(&prepared, 0, 1024, None).unwrap();
        let (reader, some) = file
            .read_row_group(&prepared, 0, 1024, Some(selection))
            .unwrap();
        assert!(some * 10 < all, "fetched {some} of {all} bytes");
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 100, "the kept page's rows");
        let unplanned = file.unplanned.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(unplanned, 0, "the reader asked for pages not fetched");
        // Exactly the matching rows come out.
        let ds = source(
            vec![name.clone()],
            Some(7),
            Some(Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(1950),
            ])),
        );
        assert_eq!(ids(&ds), (1950..2000).collect::<Vec<_>>());
        // Without a page index, or with a filter no page rules out, no
        // selection: every row read and filtered.
        let plain = ParquetFile::open(&name, false).unwrap();
        assert!(plain.page_selection(&filter, 0).is_none());
        let everything = Predicate::parse(
            "t",
            &Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(0),
            ]),
        )
        .unwrap();
        assert!(file.page_selection(&everything, 0).is_none());
    }

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
