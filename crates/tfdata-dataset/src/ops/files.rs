//! File sources: `list_files`, `TFRecordDataset`, `TextLineDataset`,
//! `FixedLengthRecordDataset`, and `TFRecordDataset` and `TextLineDataset` as the built-in dataset functions `tfrecord_dataset` and
//! `text_line_dataset` (for `interleave` over `list_files`). Paths go
//! through [`crate::io`], so they work on every file system it knows.
//! Files are opened when an iterator reaches them, and read streaming.

use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use crate::attrs::{Attrs, FunctionRef};
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::functions::ResolvedDatasetFn;
use crate::io::{
    CompressionType, FixedLengthReader, FixedLengthSizes, TextLineReader, TfRecordReader,
};
use crate::iterators::{ElementIterator, VecIter};
use crate::spec::{Shape, Structure, TensorSpec};
use crate::splits::{IndexSplitProvider, SplitProvider};

/// The file sources, as `tf.data.Dataset`'s constructors.
impl Dataset {
    /// `list_files(file_pattern, shuffle, seed)`: the matching file names
    /// (sorted, then shuffled unless `shuffle` is false, as TensorFlow).
    pub fn list_files(patterns: &[&str], shuffle: bool, seed: Option<u64>) -> Dataset {
        Dataset::from_op(ListFiles {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            shuffle,
            seed,
        })
    }

    /// `TFRecordDataset(filenames, compression_type)` with `""`, `"GZIP"` or `"ZLIB"`.
    pub fn tfrecord(filenames: &[&str], compression_type: &str) -> Dataset {
        FileRecords::dataset(
            RecordFormat::TfRecord,
            filenames,
            compression_type,
            Vec::new(),
        )
    }

    /// `TFRecordDatasetV2(filenames, compression_type, byte_offsets)`: file
    /// `i` read from byte `byte_offsets[i]` of its (uncompressed) stream, as
    /// if the bytes before were not there; empty offsets read from the start.
    /// TensorFlow reads past the end of a shorter list (undefined); here
    /// fewer offsets than files are refused.
    pub fn tfrecord_from_offsets(
        filenames: &[&str],
        compression_type: &str,
        byte_offsets: Vec<i64>,
    ) -> Dataset {
        FileRecords::dataset(
            RecordFormat::TfRecord,
            filenames,
            compression_type,
            byte_offsets,
        )
    }

    /// `TextLineDataset(filenames, compression_type)`.
    pub fn text_lines(filenames: &[&str], compression_type: &str) -> Dataset {
        FileRecords::dataset(
            RecordFormat::TextLine,
            filenames,
            compression_type,
            Vec::new(),
        )
    }

    /// `FixedLengthRecordDataset(filenames, record_bytes, header_bytes,
    /// footer_bytes, compression_type)`: each file's records of exactly
    /// `record_bytes` between a skipped header and footer (see
    /// [`crate::io::fixed_length`]). The sizes are checked when the dataset's
    /// element spec is asked for or it is iterated.
    pub fn fixed_length_records(
        filenames: &[&str],
        header_bytes: i64,
        record_bytes: i64,
        footer_bytes: i64,
        compression_type: &str,
    ) -> Dataset {
        let sizes = FixedLengthSizes {
            header_bytes,
            record_bytes,
            footer_bytes,
        };
        let format = RecordFormat::FixedLength(sizes);
        FileRecords::dataset(format, filenames, compression_type, Vec::new())
    }
}

fn string_scalar() -> Option<Structure> {
    Some(Structure::Tensor(TensorSpec::new(
        DType::String,
        Shape::scalar(),
    )))
}

/// The files matching `patterns`, sorted, without duplicates; an error if
/// none match (as TensorFlow's `list_files`).
pub fn matching_files(patterns: &[String]) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for p in patterns {
        files.extend(crate::io::glob(p)?);
    }
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "list_files: no files matched pattern: {}",
            patterns.join(", ")
        )));
    }
    Ok(files)
}

/// `tf.data.Dataset.list_files(file_pattern, shuffle, seed)`: matching file
/// names as scalar strings, shuffled unless `shuffle` is false. Globbing
/// happens when an iterator (or split provider) is made, on the process that
/// reads the files.
#[derive(Debug)]
pub struct ListFiles {
    pub patterns: Vec<String>,
    pub shuffle: bool,
    pub seed: Option<u64>,
}

impl DatasetOp for ListFiles {
    fn name(&self) -> &'static str {
        "list_files"
    }
    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new()
            .with("file_pattern", self.patterns.clone())
            .with("shuffle", self.shuffle);
        if let Some(seed) = self.seed {
            a = a.with("seed", seed as i64);
        }
        a
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.patterns.is_empty() || self.patterns.iter().any(String::is_empty) {
            return Err(Error::InvalidArgument(
                "list_files: file_pattern must not be empty".into(),
            ));
        }
        Ok(string_scalar())
    }
    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let files = matching_files(&self.patterns)?;
        let names = files
            .into_iter()
            .map(|f| Element::single(Tensor::scalar_string(f)))
            .collect::<Vec<_>>();
        if let Some(splits) = ctx.split_provider_for(self) {
            // Dynamic sharding: splits are indices into the sorted file list.
            return Ok(Box::new(IndexedIter {
                items: names,
                splits,
            }));
        }
        let ds = Dataset::from_op(Listed { names });
        let ds = if self.shuffle {
            let len = ds.cardinality().max(1);
            ds.shuffle(len, self.seed, true)
        } else {
            ds
        };
        ds.op.make_iterator(ctx)
    }
    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(
            matching_files(&self.patterns).map(|f| {
                Box::new(IndexSplitProvider::new(f.len() as u64)) as Box<dyn SplitProvider>
            }),
        )
    }
}

/// A fixed list of file-name elements (what `list_files` globbed).
#[derive(Debug)]
struct Listed {
    names: Vec<Element>,
}

impl DatasetOp for Listed {
    fn name(&self) -> &'static str {
        "listed_files"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(string_scalar())
    }
    fn cardinality(&self) -> i64 {
        self.names.len() as i64
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(VecIter {
            items: self.names.clone().into_iter(),
        }))
    }
}

/// Elements picked by the split indices a provider hands out.
struct IndexedIter {
    items: Vec<Element>,
    splits: Arc<dyn SplitProvider>,
}

impl ElementIterator for IndexedIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let Some((split, lineage)) = self.splits.get_next_leased()? else {
            return Ok(None);
        };
        let i = split.to_scalar::<i64>()?;
        usize::try_from(i)
            .ok()
            .and_then(|i| self.items.get(i).cloned())
            .map(|e| Some(e.with_lineage(lineage)))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "split index {i} out of range for {} files",
                    self.items.len()
                ))
            })
    }
}

/// Which record format a [`FileRecords`] source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    TfRecord,
    TextLine,
    /// Records of a fixed size between a header and a footer.
    FixedLength(FixedLengthSizes),
}

impl RecordFormat {
    fn op_name(self) -> &'static str {
        match self {
            RecordFormat::TfRecord => "tfrecord_dataset",
            RecordFormat::TextLine => "text_line_dataset",
            RecordFormat::FixedLength(_) => "fixed_length_record_dataset",
        }
    }
}

/// `tf.data.TFRecordDataset(filenames, compression_type)`,
/// `tf.data.TextLineDataset(filenames, compression_type)` and
/// `tf.data.FixedLengthRecordDataset(...)`: the records (or lines) of each
/// file in turn, as scalar strings.
#[derive(Debug)]
pub struct FileRecords {
    pub format: RecordFormat,
    pub filenames: Vec<String>,
    pub compression: String,
    /// Where each file's reading starts (TFRecord only); empty: at 0.
    pub byte_offsets: Vec<i64>,
}

impl FileRecords {
    /// The one constructor of the three file sources: everything but the
    /// format is theirs alike, and checked alike (in `element_spec`).
    fn dataset(
        format: RecordFormat,
        filenames: &[impl ToString],
        compression_type: &str,
        byte_offsets: Vec<i64>,
    ) -> Dataset {
        Dataset::from_op(FileRecords {
            format,
            filenames: filenames.iter().map(ToString::to_string).collect(),
            compression: compression_type.to_string(),
            byte_offsets,
        })
    }

    fn compression(&self) -> Result<CompressionType> {
        CompressionType::parse(&self.compression)
    }
}

impl DatasetOp for FileRecords {
    fn name(&self) -> &'static str {
        self.format.op_name()
    }
    fn attrs(&self) -> Attrs {
        let attrs = Attrs::new()
            .with("filenames", self.filenames.clone())
            .with("compression_type", self.compression.as_str());
        let attrs = if self.byte_offsets.is_empty() {
            attrs
        } else {
            attrs.with("byte_offsets", self.byte_offsets.clone())
        };
        match self.format {
            RecordFormat::FixedLength(sizes) => attrs
                .with("header_bytes", sizes.header_bytes)
                .with("record_bytes", sizes.record_bytes)
                .with("footer_bytes", sizes.footer_bytes),
            RecordFormat::TfRecord | RecordFormat::TextLine => attrs,
        }
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.compression()?;
        if let RecordFormat::FixedLength(sizes) = self.format {
            sizes.check()?;
        }
        if self.filenames.iter().any(String::is_empty) {
            return Err(Error::InvalidArgument(format!(
                "{}: a file name is empty",
                self.name()
            )));
        }
        if !self.byte_offsets.is_empty() && self.byte_offsets.len() < self.filenames.len() {
            return Err(Error::InvalidArgument(format!(
                "{}: {} byte_offsets for {} files (one per file, or none)",
                self.name(),
                self.byte_offsets.len(),
                self.filenames.len()
            )));
        }
        Ok(string_scalar())
    }
    /// Unknown, even without files: TensorFlow 2.21 says so too.
    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        if let RecordFormat::FixedLength(sizes) = self.format {
            // Before any file is opened, so a bad size fails even with no files.
            sizes.check()?;
        }
        Ok(Box::new(FileRecordsIter {
            format: self.format,
            compression: self.compression()?,
            files: self.filenames.clone(),
            byte_offsets: self.byte_offsets.clone(),
            splits: ctx.split_provider_for(self),
            next_file: 0,
            current: None,
            current_lineage: Default::default(),
            current_record: 0,
            ahead: None,
        }))
    }
    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(Ok(Box::new(IndexSplitProvider::new(
            self.filenames.len() as u64
        ))))
    }
}

enum Reader {
    TfRecord(TfRecordReader),
    Text(TextLineReader),
    FixedLength(FixedLengthReader),
}

struct FileRecordsIter {
    format: RecordFormat,
    compression: CompressionType,
    files: Vec<String>,
    byte_offsets: Vec<i64>,
    /// Dynamic sharding: file indices come from here.
    splits: Option<Arc<dyn SplitProvider>>,
    next_file: usize,
    current: Option<Reader>,
    /// The current file's split while it is read (dynamic sharding): every
    /// record carries it, and the split is delivered once the reader has moved
    /// on and the last record is gone.
    current_lineage: tfdata_core::Lineage,
    /// The index of the current file's next record.
    current_record: i64,
    /// Dynamic sharding: the current file's next record, read ahead (an
    /// error waits its turn, after the record before it).
    ahead: Option<Result<Option<Bytes>>>,
}

impl FileRecordsIter {
    /// The next file's index.
    fn next_file(&mut self) -> Result<Option<usize>> {
        let index = match &self.splits {
            Some(splits) => match splits.get_next_leased()? {
                Some((t, lineage)) => {
                    self.current_lineage = lineage;
                    let i = t.to_scalar::<i64>()?;
                    usize::try_from(i)
                        .ok()
                        .filter(|&i| i < self.files.len())
                        .ok_or_else(|| {
                            Error::InvalidArgument(format!(
                                "split index {i} out of range for {} files",
                                self.files.len()
                            ))
                        })?
                }
                None => return Ok(None),
            },
            None => {
                if self.next_file >= self.files.len() {
                    return Ok(None);
                }
                self.next_file += 1;
                self.next_file - 1
            }
        };
        Ok(Some(index))
    }
}

impl FileRecordsIter {
    fn read_record(&mut self) -> Result<Option<Bytes>> {
        match &mut self.current {
            Some(Reader::TfRecord(r)) => r.read_record(),
            Some(Reader::Text(r)) => r.read_line(),
            Some(Reader::FixedLength(r)) => r.read_record(),
            None => Ok(None),
        }
    }
}

impl ElementIterator for FileRecordsIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            let record = match self.ahead.take() {
                Some(ahead) => ahead?,
                None => self.read_record()?,
            };
            if let Some(record) = record {
                // Record i of the file is at [i] in its split; records readers
                // already received (the split is produced again) are dropped.
                let index = self.current_record;
                self.current_record = self.current_record.saturating_add(1);
                let lineage = self.current_lineage.child(index);
                if !self.current_lineage.is_empty() {
                    // Dynamic sharding reads one record ahead: at the file's
                    // end the split is let go of before its last record
                    // leaves, so that element holds all that is left of the
                    // split and tells readers so (`Lineage::whole_splits`).
                    let ahead = self.read_record();
                    if matches!(ahead, Ok(None)) {
                        self.current_lineage = tfdata_core::Lineage::default();
                    }
                    self.ahead = Some(ahead);
                }
                let Some(lineage) = lineage else {
                    continue;
                };
                return Ok(Some(
                    Element::single(Tensor::scalar_string(record)).with_lineage(lineage),
                ));
            }
            // This file is done: its split no longer needs the reader.
            self.current_lineage = tfdata_core::Lineage::default();
            self.current_record = 0;
            let (format, compression) = (self.format, self.compression);
            let Some(index) = self.next_file()? else {
                self.current = None;
                return Ok(None);
            };
            let path = &self.files[index];
            self.current = Some(match format {
                RecordFormat::TfRecord => {
                    let mut reader = TfRecordReader::open(path, compression)?;
                    if let Some(&offset) = self.byte_offsets.get(index) {
                        let offset = u64::try_from(offset).map_err(|_| {
                            Error::InvalidArgument(format!(
                                "{path}: byte offset {offset}: Can't skip a negative number of bytes"
                            ))
                        })?;
                        reader.skip_bytes(offset)?;
                    }
                    Reader::TfRecord(reader)
                }
                RecordFormat::TextLine => Reader::Text(TextLineReader::open(path, compression)?),
                RecordFormat::FixedLength(sizes) => {
                    Reader::FixedLength(FixedLengthReader::open(path, compression, sizes)?)
                }
            });
        }
    }
}

/// The built-in dataset functions: `tfrecord_dataset` and
/// `text_line_dataset` open the file an element names (for `interleave`
/// over `list_files`), with an optional `compression_type`.
pub(crate) fn builtin_dataset_fn(
    f: &FunctionRef,
    _input: Option<&Structure>,
) -> Option<Result<ResolvedDatasetFn>> {
    let name = f.name.clone();
    if name != "tfrecord_dataset" && name != "text_line_dataset" {
        return None;
    }
    Some((|| {
        f.args.check_known(&name, &["compression_type"])?;
        let compression = f.args.str_or(&name, "compression_type", "")?.to_string();
        CompressionType::parse(&compression)?;
        let tfrecord = name == "tfrecord_dataset";
        let func = move |e: Element| -> Result<Dataset> {
            let [file] = e.components.as_slice() else {
                return Err(Error::InvalidArgument(format!(
                    "{name}: expects elements that are one file name, got {} components",
                    e.components.len()
                )));
            };
            let path = file
                .string_values()?
                .first()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .ok_or_else(|| Error::InvalidArgument(format!("{name}: empty file name tensor")))?;
            Ok(if tfrecord {
                Dataset::tfrecord(&[&path], &compression)
            } else {
                Dataset::text_lines(&[&path], &compression)
            })
        };
        Ok(ResolvedDatasetFn {
            f: Arc::new(func),
            output: string_scalar(),
        })
    })())
}

/// Rebuilds file sources from wire attributes.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<Option<Dataset>> {
    Ok(Some(match op {
        "list_files" => {
            attrs.check_known(op, &["file_pattern", "shuffle", "seed"])?;
            Dataset::from_op(ListFiles {
                patterns: attrs.strings(op, "file_pattern")?,
                shuffle: attrs.bool_or(op, "shuffle", true)?,
                seed: attrs.opt_int(op, "seed")?.map(|s| s as u64),
            })
        }
        "tfrecord_dataset" | "text_line_dataset" | "fixed_length_record_dataset" => {
            let own: &[&str] = match op {
                "fixed_length_record_dataset" => &["header_bytes", "record_bytes", "footer_bytes"],
                _ => &["byte_offsets"],
            };
            let known: Vec<&str> = ["filenames", "compression_type"]
                .iter()
                .chain(own)
                .copied()
                .collect();
            attrs.check_known(op, &known)?;
            let format = match op {
                "tfrecord_dataset" => RecordFormat::TfRecord,
                "text_line_dataset" => RecordFormat::TextLine,
                _ => RecordFormat::FixedLength(FixedLengthSizes {
                    header_bytes: attrs.int_or(op, "header_bytes", 0)?,
                    record_bytes: attrs.int(op, "record_bytes")?,
                    footer_bytes: attrs.int_or(op, "footer_bytes", 0)?,
                }),
            };
            let byte_offsets = match attrs.get("byte_offsets") {
                Some(_) => attrs.ints(op, "byte_offsets")?,
                None => Vec::new(),
            };
            FileRecords::dataset(
                format,
                attrs.strings(op, "filenames")?.as_slice(),
                attrs.str_or(op, "compression_type", "")?,
                byte_offsets,
            )
        }
        _ => return Ok(None),
    }))
}
