//! The `parquet_dataset` iterator: which row group comes next (in file
//! order, or as the splits name them), its rows decoded, filtered and
//! rewritten into elements (single rows, or batches that never span row
//! groups), each at its position in its split.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;
use tfdata_core::{Element, Error, Lineage, Result};

use super::file::ParquetFile;
use super::{Prepared, ROWS_PER_READ};
use crate::columnar::predicate::Predicate;
use crate::columnar::transform::BatchTransform;
use crate::iterators::ElementIterator;
use crate::splits::SplitProvider;

/// Footers kept open by one iterator (files of a split-reading worker).
const OPEN_FILES: usize = 16;

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

pub(super) struct ParquetIter {
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
    pub(super) fn new(
        prepared: Arc<Prepared>,
        splits: Option<Arc<dyn SplitProvider>>,
        filter: Option<Predicate>,
        batch_rows: Option<usize>,
        transform: Option<Arc<dyn BatchTransform>>,
    ) -> Self {
        ParquetIter {
            splits,
            filter,
            batch_rows,
            local: LocalOrder::new(&prepared),
            prepared,
            open: HashMap::new(),
            group: None,
            fetched_bytes: 0,
            transform,
        }
    }

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
