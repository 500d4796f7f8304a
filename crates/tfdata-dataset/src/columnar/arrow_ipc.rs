//! `arrow_dataset`: the rows of Arrow IPC files and streams (`.arrow`,
//! `.feather` v2, `.ipc`; the shards `datasets`' `save_to_disk` writes), as
//! dictionaries of tensors keyed by column (one element per row), or
//! `batch_size` rows per element.
//!
//! * **Files** are local paths or object-store URLs (patterns with
//!   wildcards are globbed, sorted). The format is told by its first bytes
//!   (`ARROW1`: the file format; `0xFFFFFFFF`: a stream). Where each record
//!   batch lies is found with ranged reads ([`index`]: the file format's
//!   footer, or one scan of a stream's message headers), then each record
//!   batch is fetched with one ranged read and decoded zero-copy from it
//!   (its buffers point into that read when aligned). So a worker holds one
//!   record batch of a file at a time, whatever the file's size.
//!   Memory-mapping would save that read's copy, but needs `unsafe`, which
//!   the workspace forbids.
//! * **Projection**: only the named columns (and their dictionaries) are
//!   decoded; the others' buffers are skipped in the read message.
//! * **Splits** (distributed_epoch): consecutive record batches of at least
//!   [`SPLIT_ROWS`] rows (one split per batch for `datasets`' 1000-row
//!   batches), the triple `[file index, first batch, end batch)`. Element `k`
//!   of a split is at position `[k]` in it. Reading without splits goes
//!   through the same groups, so the elements are the same either way.
//! * **Batches** (`batch_size`): `batch_size` rows from consecutive record
//!   batches of a split; a batch never spans splits (or files), so the last
//!   one of a split may be shorter.
//! * **Types** ([`super::convert`]); the first file's schema is the
//!   dataset's, and a file whose read columns differ is an error naming it.
//! * **Compression**: LZ4 frames (pyarrow's `write_feather` default) and
//!   zstd bodies are read.
//! * **Limits**: a message's body at most [`MAX_MESSAGE_BYTES`], its
//!   header (and a footer) at most [`index::MAX_METADATA_BYTES`], at most
//!   [`index::MAX_MESSAGES`] messages per file; each is an error naming the
//!   file and byte offset, as is any damage found ([`check`]).

mod check;
pub mod index;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use tfdata_core::{Element, Error, Lineage, Result, Tensor};

use self::index::{Dictionaries, IpcBytes, IpcIndex};
use super::convert::{BatchPlan, Declared};
use super::transform::BatchTransform;
use crate::attrs::Attrs;
use crate::dataset::{DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::Structure;
use crate::splits::SplitProvider;

/// One message's body at most: a record batch is read whole, so this bounds
/// what a worker holds of a file (besides its dictionaries).
pub const MAX_MESSAGE_BYTES: u64 = 1 << 30;
/// Rows a split holds at least (but for a file's last): consecutive record
/// batches are grouped up to it, so files of tiny batches do not make
/// millions of splits.
pub const SPLIT_ROWS: u64 = 1000;
/// Rows converted at a time when elements are single rows.
pub const ROWS_PER_READ: usize = 8192;
/// Indexes of files kept by one iterator (files of a split-reading worker).
const OPEN_FILES: usize = 16;

const OP: &str = "arrow_dataset";

/// The op.
#[derive(Debug)]
pub struct ArrowSource {
    /// File names or patterns, as given.
    pub filenames: Vec<String>,
    pub columns: Option<Vec<String>>,
    pub batch_size: Option<i64>,
    pub declared: Declared,
    /// Rewrites batches before they become elements (not an attribute: set
    /// by the source that builds this one, e.g. `huggingface_dataset`).
    transform: Option<Arc<dyn BatchTransform>>,
    prepared: Mutex<Option<Arc<Prepared>>>,
}

/// What reading needs, found once from the file names and the first file.
#[derive(Debug)]
struct Prepared {
    files: Vec<String>,
    /// The first file's schema (before any transform).
    schema: SchemaRef,
    plan: Arc<BatchPlan>,
    /// The columns read.
    columns: Vec<String>,
    transform: Option<Arc<dyn BatchTransform>>,
}

impl ArrowSource {
    pub fn new(
        filenames: Vec<String>,
        columns: Option<Vec<String>>,
        batch_size: Option<i64>,
        declared: Declared,
    ) -> Self {
        ArrowSource {
            filenames,
            columns,
            batch_size,
            declared,
            transform: None,
            prepared: Mutex::new(None),
        }
    }

    /// The same source with its batches rewritten by `transform`.
    pub fn with_transform(mut self, transform: Arc<dyn BatchTransform>) -> Self {
        self.transform = Some(transform);
        self
    }

    fn prepare(&self) -> Result<Arc<Prepared>> {
        let mut slot = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = slot.as_ref() {
            return Ok(Arc::clone(p));
        }
        super::check_batch_size(OP, self.batch_size)?;
        let files = super::expand_files(OP, &self.filenames)?;
        let first = IpcBytes::open(&files[0])?;
        let schema = IpcIndex::read(&first)?.schema;
        let planned = match &self.transform {
            Some(t) => t
                .schema(&schema)
                .map_err(|e| super::in_file(OP, &files[0], e))?,
            None => Arc::clone(&schema),
        };
        let plan = BatchPlan::new(
            &planned,
            self.columns.as_deref(),
            &self.declared,
            self.batch_size.is_some(),
        )
        .map_err(|e| super::in_file(OP, &files[0], e))?;
        let prepared = Arc::new(Prepared {
            files,
            schema,
            columns: plan.columns.keys().cloned().collect(),
            plan: Arc::new(plan),
            transform: self.transform.clone(),
        });
        *slot = Some(Arc::clone(&prepared));
        Ok(prepared)
    }

    /// The splits: per file, its groups of record batches, in file order.
    fn group_splits(&self) -> Result<Vec<Tensor>> {
        let prepared = self.prepare()?;
        let mut splits = Vec::new();
        for f in 0..prepared.files.len() {
            let file = OpenFile::open(&prepared, f)?;
            for (first, end) in file.index.groups(SPLIT_ROWS) {
                splits.push(Tensor::vector(&[f as i64, first as i64, end as i64]));
            }
        }
        Ok(splits)
    }
}

impl DatasetOp for ArrowSource {
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
        Ok(Box::new(ArrowIter {
            splits: ctx.split_provider_for(self),
            batch_rows: self.batch_size.map(|b| b as usize),
            prepared,
            local: LocalOrder::default(),
            open: HashMap::new(),
            group: None,
        }))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(
            self.group_splits().map(|s| {
                Box::new(crate::splits::ListSplitProvider::new(s)) as Box<dyn SplitProvider>
            }),
        )
    }
}

/// The attributes' op.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<ArrowSource> {
    attrs.check_known(
        op,
        &[
            "filenames",
            "columns",
            "batch_size",
            "null_values",
            "padding_values",
        ],
    )?;
    let columns = super::optional_columns(op, attrs)?;
    Ok(ArrowSource::new(
        attrs.strings(op, "filenames")?,
        columns,
        attrs.opt_int(op, "batch_size")?,
        super::declared_values(op, attrs)?,
    ))
}

/// One file's index, and what reading its columns needs.
struct OpenFile {
    bytes: IpcBytes,
    index: IpcIndex,
    /// The columns read, as schema indices (in schema order).
    projection: Vec<usize>,
    /// The dictionaries they use.
    needed: HashSet<i64>,
    dicts: Dictionaries,
}

impl OpenFile {
    /// File `f`, its schema checked against the first file's.
    fn open(prepared: &Prepared, f: usize) -> Result<OpenFile> {
        let path = prepared.files.get(f).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{OP}: a split names file {f} of {}",
                prepared.files.len()
            ))
        })?;
        let bytes = IpcBytes::open(path)?;
        let index = IpcIndex::read(&bytes)?;
        let mut projection = Vec::with_capacity(prepared.columns.len());
        for c in &prepared.columns {
            let want = prepared.schema.field_with_name(c).map(|f| f.data_type());
            let have = index.schema.index_of(c).ok();
            match (want, have) {
                (Ok(w), Some(i)) if index.schema.field(i).data_type() == w => projection.push(i),
                (Ok(w), Some(i)) => {
                    return Err(Error::InvalidArgument(format!(
                        "{OP}: {path}: column {c} is {}, but {w} in {} (the first file): every \
                         file must have the same schema",
                        index.schema.field(i).data_type(),
                        prepared.files[0]
                    )));
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{OP}: {path}: column {c} is missing (it is in {}, the first file)",
                        prepared.files[0]
                    )));
                }
            }
        }
        projection.sort_unstable();
        let needed = index.dictionaries_of(&projection);
        Ok(OpenFile {
            bytes,
            index,
            projection,
            needed,
            dicts: Dictionaries::default(),
        })
    }

    /// Record batch `i`: the columns read, rewritten by the transform.
    fn batch(&mut self, i: usize, transform: Option<&dyn BatchTransform>) -> Result<RecordBatch> {
        let batch = self.index.decode(
            &self.bytes,
            i,
            &self.projection,
            &self.needed,
            &mut self.dicts,
        )?;
        match transform {
            Some(t) => t.batch(batch, &self.what(i)),
            None => Ok(batch),
        }
    }

    fn what(&self, i: usize) -> String {
        format!("{OP}: {} record batch {i}", self.bytes.name())
    }
}

/// Which group of record batches comes next when reading without splits.
#[derive(Default)]
struct LocalOrder {
    file: usize,
    groups: VecDeque<(usize, usize)>,
    started: bool,
}

/// The group of record batches being read (a split).
struct Group {
    file: usize,
    /// The next record batch to decode, and the group's end.
    next: usize,
    end: usize,
    /// The record batch being converted, and its next row.
    current: Option<(RecordBatch, usize)>,
    /// Rows waiting to fill a batch (batch mode), fewer than a batch.
    carry: Vec<RecordBatch>,
    carry_rows: usize,
    /// Its elements converted and not yet returned, in order, each with
    /// its place in the split (those readers already have are left out).
    ready: VecDeque<Element>,
    done: bool,
    /// The split's lineage (distributed_epoch), let go of before its last
    /// element leaves (as a file source does), and the next position.
    lineage: Lineage,
    next_position: i64,
}

impl Group {
    /// Queues `elements`, the next of the split, at their positions; those
    /// readers already received (the split handed out again) are dropped
    /// here, so the last element queued is the last one left to send.
    fn place(&mut self, elements: Vec<Element>) {
        for e in elements {
            let position = self.next_position;
            self.next_position += 1;
            if let Some(lineage) = self.lineage.child(position) {
                self.ready.push_back(e.with_lineage(lineage));
            }
        }
    }
}

struct ArrowIter {
    prepared: Arc<Prepared>,
    splits: Option<Arc<dyn SplitProvider>>,
    batch_rows: Option<usize>,
    local: LocalOrder,
    /// Files opened, by index (at most [`OPEN_FILES`]).
    open: HashMap<usize, OpenFile>,
    group: Option<Group>,
}

impl ArrowIter {
    fn file(&mut self, f: usize) -> Result<&mut OpenFile> {
        if !self.open.contains_key(&f) {
            let file = OpenFile::open(&self.prepared, f)?;
            if self.open.len() >= OPEN_FILES {
                self.open.clear();
            }
            self.open.insert(f, file);
        }
        self.open
            .get_mut(&f)
            .ok_or_else(|| Error::Internal(format!("{OP}: file {f} is not open")))
    }

    /// The next group to read and its lineage, or `None` at the end.
    fn next_group(&mut self) -> Result<Option<(usize, usize, usize, Lineage)>> {
        if let Some(splits) = &self.splits {
            let Some((split, lineage)) = splits.get_next_leased()? else {
                return Ok(None);
            };
            let v = split.to_vec::<i64>()?;
            let bad = || {
                Error::InvalidArgument(format!(
                    "{OP}: a split must be [file, first record batch, end record batch], got \
                     {v:?}"
                ))
            };
            let [f, first, end] = v[..] else {
                return Err(bad());
            };
            let (f, first, end) = (
                usize::try_from(f).map_err(|_| bad())?,
                usize::try_from(first).map_err(|_| bad())?,
                usize::try_from(end).map_err(|_| bad())?,
            );
            let batches = self.file(f)?.index.num_batches();
            if first > end || end > batches {
                return Err(Error::InvalidArgument(format!(
                    "{OP}: the split {v:?} names record batches the file ({}) does not have \
                     (it has {batches})",
                    self.prepared.files[f]
                )));
            }
            return Ok(Some((f, first, end, lineage)));
        }
        loop {
            if let Some((first, end)) = self.local.groups.pop_front() {
                return Ok(Some((self.local.file, first, end, Lineage::default())));
            }
            if self.local.started {
                self.local.file += 1;
            }
            self.local.started = true;
            if self.local.file >= self.prepared.files.len() {
                return Ok(None);
            }
            let f = self.local.file;
            self.local.groups = self.file(f)?.index.groups(SPLIT_ROWS).into();
        }
    }

    /// Converts more of the current group: more elements in `ready`, or
    /// `done`.
    fn fill(&mut self) -> Result<()> {
        let plan = Arc::clone(&self.prepared.plan);
        let transform = self.prepared.transform.clone();
        let batch_rows = self.batch_rows;
        let Some(mut group) = self.group.take() else {
            return Ok(());
        };
        let result = (|| -> Result<()> {
            loop {
                if let Some((batch, row)) = group.current.as_mut()
                    && *row < batch.num_rows()
                {
                    let left = batch.num_rows() - *row;
                    let what = format!(
                        "{OP}: {} record batch {}",
                        self.prepared.files[group.file],
                        group.next - 1
                    );
                    match batch_rows {
                        None => {
                            let take = left.min(ROWS_PER_READ);
                            let elements = plan.elements(&batch.slice(*row, take), &what)?;
                            *row += take;
                            group.place(elements);
                            return Ok(());
                        }
                        // A whole batch within this record batch: a slice.
                        Some(n) if group.carry_rows == 0 && left >= n => {
                            let elements = plan.elements(&batch.slice(*row, n), &what)?;
                            *row += n;
                            group.place(elements);
                            return Ok(());
                        }
                        // The rest of it waits for the next record batch's.
                        Some(n) => {
                            let take = left.min(n - group.carry_rows);
                            group.carry.push(batch.slice(*row, take));
                            group.carry_rows += take;
                            *row += take;
                            if group.carry_rows == n {
                                let joined = take_carry(&mut group, &what)?;
                                group.place(plan.elements(&joined, &what)?);
                                return Ok(());
                            }
                        }
                    }
                    continue;
                }
                group.current = None;
                if group.next < group.end {
                    let i = group.next;
                    group.next += 1;
                    let batch = self.file(group.file)?.batch(i, transform.as_deref())?;
                    group.current = Some((batch, 0));
                    continue;
                }
                group.done = true;
                if group.carry_rows > 0 {
                    let what = format!("{OP}: {}", self.prepared.files[group.file]);
                    let joined = take_carry(&mut group, &what)?;
                    group.place(plan.elements(&joined, &what)?);
                }
                return Ok(());
            }
        })();
        self.group = Some(group);
        result
    }
}

/// The rows waiting in `group.carry` as one batch, taken out.
fn take_carry(group: &mut Group, what: &str) -> Result<RecordBatch> {
    let carry = std::mem::take(&mut group.carry);
    group.carry_rows = 0;
    let schema = carry
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| Error::Internal(format!("{what}: no rows waiting")))?;
    arrow_select::concat::concat_batches(&schema, &carry)
        .map_err(|e| Error::Internal(format!("{what}: joining rows: {e}")))
}

impl ElementIterator for ArrowIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            let Some(group) = self.group.as_mut() else {
                let Some((file, first, end, lineage)) = self.next_group()? else {
                    return Ok(None);
                };
                self.group = Some(Group {
                    file,
                    next: first,
                    end,
                    current: None,
                    carry: Vec::new(),
                    carry_rows: 0,
                    ready: VecDeque::new(),
                    done: false,
                    lineage,
                    next_position: 0,
                });
                continue;
            };
            // One element ahead: at the group's last element the split is
            // let go of first, so that element holds all that is left of it.
            if group.ready.len() < 2 && !group.done {
                self.fill()?;
                continue;
            }
            let Some(element) = group.ready.pop_front() else {
                self.group = None;
                continue;
            };
            if group.ready.is_empty() && group.done {
                group.lineage = Lineage::default();
            }
            return Ok(Some(element));
        }
    }
}

/// Every element one IPC file or stream in memory makes as
/// `arrow_dataset` reads it (its columns `columns`, all when `None`; rows,
/// or batches of `batch_rows` cut at record batches), up to `max_elements`,
/// and their structure: the index, the decoder and the conversion without
/// a file system, for fuzzing.
pub fn read_in_memory(
    data: Bytes,
    columns: Option<&[String]>,
    batch_rows: Option<usize>,
    max_elements: usize,
) -> Result<(Structure, Vec<Element>)> {
    let bytes = IpcBytes::in_memory("memory", data);
    let index = IpcIndex::read(&bytes)?;
    let plan = BatchPlan::new(
        &index.schema,
        columns,
        &Declared::default(),
        batch_rows.is_some(),
    )?;
    let mut projection: Vec<usize> = plan
        .columns
        .keys()
        .filter_map(|c| index.schema.index_of(c).ok())
        .collect();
    projection.sort_unstable();
    let needed = index.dictionaries_of(&projection);
    let mut dicts = Dictionaries::default();
    let mut out = Vec::new();
    for (first, end) in index.groups(SPLIT_ROWS) {
        for i in first..end {
            let batch = index.decode(&bytes, i, &projection, &needed, &mut dicts)?;
            let mut row = 0;
            while row < batch.num_rows() && out.len() < max_elements {
                let take = (batch.num_rows() - row).min(batch_rows.unwrap_or(ROWS_PER_READ));
                let elements = plan.elements(&batch.slice(row, take), "memory")?;
                out.extend(elements.into_iter().take(max_elements - out.len()));
                row += take;
            }
            if out.len() >= max_elements {
                return Ok((plan.structure(), out));
            }
        }
    }
    Ok((plan.structure(), out))
}

impl crate::Dataset {
    /// `ArrowDataset(filenames, columns, batch_size)`: see [`self`](mod@self).
    pub fn arrow(
        filenames: &[&str],
        columns: Option<&[&str]>,
        batch_size: Option<i64>,
    ) -> crate::Dataset {
        crate::Dataset::from_op(ArrowSource::new(
            filenames.iter().map(|f| f.to_string()).collect(),
            columns.map(|c| c.iter().map(|c| c.to_string()).collect()),
            batch_size,
            Declared::default(),
        ))
    }
}

#[cfg(test)]
mod tests;
