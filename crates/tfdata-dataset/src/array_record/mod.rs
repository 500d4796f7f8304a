//! `array_record_dataset`: the records of ArrayRecord files (the format of
//! Google's `array_record` and Grain), each a scalar string, in file order:
//! what `tfrecord_dataset` gives for TFRecord files, so `parse_example` and
//! the other functions apply alike.
//!
//! * [`riegeli`]: the subset of the Riegeli container ArrayRecord writes
//!   (blocks, chunk headers and hashes, simple chunks with any of
//!   Riegeli's codecs); transposed chunks (`transpose:true`) are refused;
//! * [`file`]: one file's index (from its footer) and its chunks.
//!
//! **Reading**: files are local paths or object-store URLs (anything the
//! io layer reads; patterns with wildcards are globbed, sorted). A file's
//! index is read from its end when the iterator reaches it; then runs of
//! consecutive chunks, up to [`file::READ_AHEAD_BYTES`] (or one bigger
//! chunk), are each one ranged read, and chunks are decoded one at a time,
//! so memory holds a run, one chunk's records and the index (8 bytes a
//! chunk), whatever the file's size.
//!
//! **Splits** (distributed_epoch): `[file, first record, end record]`,
//! runs of whole chunks of about [`SPLIT_BYTES`] of records (by the
//! footer's decoded sizes), so work spreads over workers within big files.
//! Record `first + k` is at position `[k]` in its split. A split handed out
//! again after a worker loss skips the records readers already have; a
//! chunk all of whose records they have is not read at all (ArrayRecord's
//! random access: a chunk's records are found from its index, not by
//! reading what precedes it).
//!
//! Module dependencies point one way: `mod → file → riegeli`.

pub mod file;
pub mod riegeli;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tfdata_core::{DType, Element, Error, Lineage, Result, Tensor};

use crate::Dataset;
use crate::attrs::Attrs;
use crate::dataset::{DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};
use crate::splits::{ListSplitProvider, SplitProvider};
use file::{ArrayRecordFile, ChunkRun};

/// The op names this module builds.
pub const OP_NAMES: &[&str] = &["array_record_dataset"];

/// About how many bytes of records one split holds: splits end after the
/// chunk that reaches it (a file smaller than this is one split), enough
/// to keep a worker busy for a while, small enough to spread big files.
pub const SPLIT_BYTES: u64 = 64 << 20;

/// Indexes of files kept open by one iterator: splits of a file come in
/// order, so a few spare re-reading a footer per split; each holds 8 bytes
/// per chunk of its file.
const OPEN_FILES: usize = 4;

/// Rebuilds `array_record_dataset` from its attributes; `None` for other
/// ops.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<Option<Dataset>> {
    if op != "array_record_dataset" {
        return Ok(None);
    }
    attrs.check_known(op, &["filenames"])?;
    Ok(Some(Dataset::from_op(ArrayRecordSource::new(
        attrs.strings(op, "filenames")?,
    ))))
}

impl Dataset {
    /// `ArrayRecordDataset(filenames)`: each record of the files, in
    /// order, as a scalar string (see [`crate::array_record`]).
    pub fn array_record(filenames: &[&str]) -> Dataset {
        Dataset::from_op(ArrayRecordSource::new(
            filenames.iter().map(|f| f.to_string()).collect(),
        ))
    }
}

/// The op.
#[derive(Debug)]
pub struct ArrayRecordSource {
    /// File names or patterns, as given.
    pub filenames: Vec<String>,
    /// The files they stand for, once globbed.
    files: Mutex<Option<Arc<Vec<String>>>>,
}

impl ArrayRecordSource {
    pub fn new(filenames: Vec<String>) -> Self {
        ArrayRecordSource {
            filenames,
            files: Mutex::new(None),
        }
    }

    fn check_names(&self) -> Result<()> {
        if self.filenames.is_empty() {
            return Err(Error::InvalidArgument(
                "array_record_dataset: no filenames given".into(),
            ));
        }
        if self.filenames.iter().any(String::is_empty) {
            return Err(Error::InvalidArgument(
                "array_record_dataset: a file name is empty".into(),
            ));
        }
        Ok(())
    }

    /// The files the names stand for: each name, or the files a pattern
    /// matches (sorted); found once.
    fn files(&self) -> Result<Arc<Vec<String>>> {
        if let Some(files) = self
            .files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Ok(Arc::clone(files));
        }
        // Expanded outside the lock: a pattern lists a directory or a bucket.
        let files = Arc::new(crate::columnar::expand_files(
            "array_record_dataset",
            &self.filenames,
        )?);
        let mut slot = self.files.lock().unwrap_or_else(|p| p.into_inner());
        Ok(Arc::clone(slot.get_or_insert(files)))
    }

    /// The splits, in file order: runs of whole chunks of about
    /// `split_bytes` ([`SPLIT_BYTES`]) each, as `[file, first record, end
    /// record]`; none for a file without records.
    fn record_splits(&self, split_bytes: u64) -> Result<Vec<Tensor>> {
        let files = self.files()?;
        let mut splits = Vec::new();
        for (f, path) in files.iter().enumerate() {
            let (file, sizes) = ArrayRecordFile::open_with_sizes(path)?;
            let mut first_chunk = 0usize;
            let mut bytes = 0u64;
            for (c, size) in sizes.iter().enumerate() {
                bytes = bytes.saturating_add(*size);
                if bytes >= split_bytes || c + 1 == sizes.len() {
                    let (first, end) = (
                        file.chunk_records(first_chunk).start,
                        file.chunk_records(c).end,
                    );
                    // Record counts were checked to fit in an i64.
                    splits.push(Tensor::vector(&[f as i64, first as i64, end as i64]));
                    first_chunk = c + 1;
                    bytes = 0;
                }
            }
        }
        Ok(splits)
    }
}

impl DatasetOp for ArrayRecordSource {
    fn name(&self) -> &'static str {
        "array_record_dataset"
    }

    fn attrs(&self) -> Attrs {
        Attrs::new().with("filenames", self.filenames.clone())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        self.check_names()?;
        Ok(Some(Structure::Tensor(TensorSpec::new(
            DType::String,
            Shape::scalar(),
        ))))
    }

    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(ArrayRecordIter {
            files: self.files()?,
            splits: ctx.split_provider_for(self),
            next_file: 0,
            open: VecDeque::new(),
            span: None,
        }))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(
            self.record_splits(SPLIT_BYTES)
                .map(|s| Box::new(ListSplitProvider::new(s)) as Box<dyn SplitProvider>),
        )
    }
}

/// The records being read: a whole file, or one split of one.
struct Span {
    file: Arc<ArrayRecordFile>,
    /// The span's records are `first..end` of the file.
    first: u64,
    end: u64,
    /// The next record to look at.
    next: u64,
    /// The last record readers do not have yet: the span ends with it.
    last_wanted: u64,
    /// The split's lineage (distributed_epoch; empty otherwise): record
    /// `first + k` is at `[k]`. Let go of when the last wanted record
    /// leaves, so that element holds all that is left of the split.
    lineage: Lineage,
    /// Decoded records of the current chunk still to go, from `next` on.
    ready: VecDeque<Bytes>,
    /// The chunks last read ahead (not yet decoded).
    run: Option<ChunkRun>,
}

impl Span {
    /// The lineage of record `record`; `None` if readers have it already.
    fn child(&self, record: u64) -> Option<Lineage> {
        // Records are below `end`, which fits in an i64 (the footer was
        // checked), so positions are exact.
        self.lineage.child((record - self.first) as i64)
    }

    /// Chunk `chunk`'s records, from the chunks read ahead, or from a new
    /// run read from it on (to the span's last chunk at most).
    fn decode(&mut self, chunk: usize) -> Result<riegeli::SimpleRecords> {
        if !self.run.as_ref().is_some_and(|run| run.contains(chunk)) {
            self.run = None;
            let end_chunk = self.file.chunk_of(self.last_wanted) + 1;
            self.run = Some(self.file.read_run(chunk, end_chunk)?);
        }
        match &self.run {
            Some(run) => self.file.decode_chunk(run, chunk),
            None => Err(Error::Internal("array_record_dataset: no run read".into())),
        }
    }

    /// Whether any of `records` is still wanted.
    fn wants_any(&self, records: std::ops::Range<u64>) -> bool {
        // An empty lineage wants everything; else one check per record,
        // without reading it.
        records.into_iter().any(|r| self.child(r).is_some())
    }
}

struct ArrayRecordIter {
    files: Arc<Vec<String>>,
    /// Dynamic sharding: `[file, first, end]` splits come from here.
    splits: Option<Arc<dyn SplitProvider>>,
    /// Without splits: the next file to read whole.
    next_file: usize,
    /// Indexes of recently opened files (at most [`OPEN_FILES`]).
    open: VecDeque<(usize, Arc<ArrayRecordFile>)>,
    span: Option<Span>,
}

impl ArrayRecordIter {
    fn file(&mut self, f: usize) -> Result<Arc<ArrayRecordFile>> {
        if let Some((_, file)) = self.open.iter().find(|(i, _)| *i == f) {
            return Ok(Arc::clone(file));
        }
        let path = self.files.get(f).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "array_record_dataset: a split names file {f} of {}",
                self.files.len()
            ))
        })?;
        let file = Arc::new(ArrayRecordFile::open(path)?);
        if self.open.len() >= OPEN_FILES {
            self.open.pop_front();
        }
        self.open.push_back((f, Arc::clone(&file)));
        Ok(file)
    }

    /// The next span to read, or `None` at the end.
    fn next_span(&mut self) -> Result<Option<Span>> {
        let (file, first, end, lineage) = if let Some(splits) = &self.splits {
            let Some((split, lineage)) = splits.get_next_leased()? else {
                return Ok(None);
            };
            let v = split.to_vec::<i64>()?;
            let bad = || {
                Error::InvalidArgument(format!(
                    "array_record_dataset: a split must be [file, first record, end record], \
                     got {v:?}"
                ))
            };
            let [f, first, end] = v[..] else {
                return Err(bad());
            };
            let f = usize::try_from(f).map_err(|_| bad())?;
            let (first, end) = (
                u64::try_from(first).map_err(|_| bad())?,
                u64::try_from(end).map_err(|_| bad())?,
            );
            let file = self.file(f)?;
            if first >= end || end > file.num_records() {
                return Err(Error::InvalidArgument(format!(
                    "array_record_dataset: split {v:?} is not a range of {}'s {} records",
                    file.path(),
                    file.num_records()
                )));
            }
            (file, first, end, lineage)
        } else {
            let f = self.next_file;
            if f >= self.files.len() {
                return Ok(None);
            }
            // Past a file that fails to open: the next call reads the next.
            self.next_file += 1;
            let file = self.file(f)?;
            let end = file.num_records();
            (file, 0, end, Lineage::default())
        };
        let mut span = Span {
            file,
            first,
            end,
            next: first,
            last_wanted: first,
            lineage,
            ready: VecDeque::new(),
            run: None,
        };
        // Bounded by the span's records; one check each, no reading.
        match (first..end).rev().find(|&r| span.child(r).is_some()) {
            Some(last) => span.last_wanted = last,
            // Nothing left to produce: the split is let go of at once.
            None => span.next = end,
        }
        Ok(Some(span))
    }
}

impl ElementIterator for ArrayRecordIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        // Each pass returns a record, moves past a chunk, or moves to the
        // next span: bounded by the records, chunks and splits there are.
        loop {
            let Some(span) = self.span.as_mut() else {
                match self.next_span()? {
                    Some(span) => self.span = Some(span),
                    None => return Ok(None),
                }
                continue;
            };
            if let Some(record) = span.ready.pop_front() {
                let index = span.next;
                span.next += 1;
                let lineage = span.child(index);
                if index == span.last_wanted {
                    // What is left of the split goes with this element.
                    self.span = None;
                }
                let Some(lineage) = lineage else {
                    continue;
                };
                return Ok(Some(
                    Element::single(Tensor::scalar_string(record)).with_lineage(lineage),
                ));
            }
            if span.next > span.last_wanted || span.next >= span.end {
                self.span = None;
                continue;
            }
            let chunk = span.file.chunk_of(span.next);
            let records = span.file.chunk_records(chunk);
            let wanted = span.next..records.end.min(span.end);
            if !span.wants_any(wanted.clone()) {
                // Readers have all of them: the chunk is not read.
                span.next = wanted.end;
                continue;
            }
            let decoded = match span.decode(chunk) {
                Ok(decoded) => decoded,
                Err(e) => {
                    // The span ends with its error.
                    self.span = None;
                    return Err(e);
                }
            };
            let skip = (span.next - records.start) as usize;
            let take = (wanted.end - span.next) as usize;
            let records = decoded.iter().skip(skip).take(take);
            if decoded.len() == 1 {
                span.ready.extend(records);
            } else {
                // Copied out of the chunk: a slice would keep the whole
                // chunk alive for as long as any one record of it is held
                // (in a shuffle buffer, after a filter), and its records
                // are not all wanted together.
                span.ready
                    .extend(records.map(|r| Bytes::copy_from_slice(&r)));
            }
            if span.ready.len() != take {
                let e = Error::Internal(format!(
                    "array_record_dataset: {} chunk {chunk} decoded fewer records than it holds",
                    span.file.path()
                ));
                self.span = None;
                return Err(e);
            }
        }
    }
}
