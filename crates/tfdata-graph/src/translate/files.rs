//! The parts of dataset nodes that need more than a builder call: file
//! names, `MatchingFiles`, `FixedLengthRecordDataset`, a cast after
//! `RangeDataset(output_type=...)`, and `AssertCardinalityDataset`.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_dataset::functions::ResolvedMap;
use tfdata_dataset::io::CompressionType;
use tfdata_dataset::spec::{Shape, Structure, TensorSpec};
use tfdata_dataset::{
    Attrs, Dataset, DatasetOp, ElementIterator, FunctionRef, Inline, IterContext,
};

/// File names from a scalar or vector string tensor.
pub(super) fn names(t: &Tensor) -> Result<Vec<String>> {
    if t.shape().len() > 1 {
        return Err(Error::InvalidArgument(format!(
            "file names must be a scalar or a vector, got shape {:?}",
            t.shape()
        )));
    }
    Ok(t.string_values()?
        .iter()
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

/// `MatchingFiles`: every pattern's matches, sorted together (an empty
/// result is not an error here; `list_files` asserts on it itself).
pub(super) fn matching_files(patterns: &[String]) -> Result<Tensor> {
    let mut files = Vec::new();
    for p in patterns {
        files.extend(tfdata_dataset::io::glob(p)?);
    }
    files.sort();
    let n = files.len() as i64;
    Tensor::strings(files.into_iter().map(Bytes::from).collect(), vec![n])
}

/// `ds` with its one component cast to `dtype`.
pub(super) fn cast_map(ds: Dataset, dtype: DType) -> Dataset {
    let f: tfdata_dataset::MapFn = Arc::new(move |e: Element| {
        let out = e
            .components
            .iter()
            .map(|t| tfdata_dataset::kernels::cast(t, dtype))
            .collect::<Result<Vec<_>>>()?;
        Ok(Element::new(out))
    });
    let output = Some(Structure::Tensor(TensorSpec::new(dtype, Shape::scalar())));
    let inline = Inline {
        map: Some(Arc::new(move |_| {
            Ok(ResolvedMap {
                f: f.clone(),
                output: output.clone(),
            })
        })),
        ..Default::default()
    };
    ds.map_with(FunctionRef::inline("range_output_type", inline), None, true)
}

/// `FixedLengthRecordDataset(filenames, header_bytes, record_bytes, footer_bytes)`.
pub(super) fn fixed_length_records(
    filenames: Vec<String>,
    header: i64,
    record: i64,
    footer: i64,
    compression: &str,
) -> Result<Dataset> {
    let bad = |what: &str, v: i64| {
        Error::InvalidArgument(format!(
            "FixedLengthRecordDataset: {what} = {v} is out of range"
        ))
    };
    // One record is materialised at a time; bound it like any tensor.
    if record <= 0 || record as u64 > crate::MAX_TENSOR_BYTES as u64 {
        return Err(bad("record_bytes", record));
    }
    if header < 0 {
        return Err(bad("header_bytes", header));
    }
    if footer < 0 || footer as u64 > crate::MAX_TENSOR_BYTES as u64 {
        return Err(bad("footer_bytes", footer));
    }
    Ok(Dataset::from_op(FixedLengthRecords {
        filenames,
        header: header as u64,
        record: record as usize,
        footer: footer as usize,
        compression: CompressionType::parse(compression)?,
    }))
}

#[derive(Debug)]
struct FixedLengthRecords {
    filenames: Vec<String>,
    header: u64,
    record: usize,
    footer: usize,
    compression: CompressionType,
}

impl DatasetOp for FixedLengthRecords {
    fn name(&self) -> &'static str {
        "fixed_length_records"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("filenames", self.filenames.clone())
            .with("header_bytes", self.header as i64)
            .with("record_bytes", self.record as i64)
            .with("footer_bytes", self.footer as i64)
            .with("compression_type", self.compression.as_str())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(Some(Structure::Tensor(TensorSpec::new(
            DType::String,
            Shape::scalar(),
        ))))
    }
    fn cardinality(&self) -> i64 {
        tfdata_dataset::UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(FixedLengthIter {
            files: self.filenames.clone().into_iter(),
            header: self.header,
            record: self.record,
            footer: self.footer,
            compression: self.compression,
            current: None,
        }))
    }
}

struct FixedLengthIter {
    files: std::vec::IntoIter<String>,
    header: u64,
    record: usize,
    footer: usize,
    compression: CompressionType,
    current: Option<OpenFile>,
}

struct OpenFile {
    name: String,
    reader: Box<dyn std::io::BufRead + Send>,
    /// Bytes read past the last record: the footer, if the file ends here.
    pending: Vec<u8>,
    eof: bool,
}

impl FixedLengthIter {
    fn open(&self, name: String) -> Result<OpenFile> {
        let raw = tfdata_dataset::io::open(&name)?;
        let mut reader = tfdata_dataset::io::compression::decompressing_reader(
            raw,
            self.compression,
            tfdata_dataset::io::DEFAULT_BUFFER_SIZE,
        );
        let skipped = std::io::copy(&mut (&mut reader).take(self.header), &mut std::io::sink())
            .map_err(|e| Error::io(format!("reading the header of {name}"), e))?;
        let eof = skipped < self.header;
        Ok(OpenFile {
            name,
            reader,
            pending: Vec::new(),
            eof,
        })
    }
}

impl ElementIterator for FixedLengthIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            let (record, footer) = (self.record, self.footer);
            if let Some(file) = &mut self.current {
                // A record is only a record if a whole footer follows it.
                while !file.eof && file.pending.len() < record + footer {
                    let want = (record + footer - file.pending.len()) as u64;
                    let got = (&mut file.reader)
                        .take(want)
                        .read_to_end(&mut file.pending)
                        .map_err(|e| Error::io(format!("reading {}", file.name), e))?;
                    if got == 0 {
                        file.eof = true;
                    }
                }
                if file.pending.len() >= record + footer {
                    let rest = file.pending.split_off(record);
                    let out = std::mem::replace(&mut file.pending, rest);
                    return Ok(Some(Element::single(Tensor::scalar_string(out))));
                }
                // What is left is the footer and a partial record, which
                // TensorFlow drops too.
                self.current = None;
            }
            match self.files.next() {
                None => return Ok(None),
                Some(name) => self.current = Some(self.open(name)?),
            }
        }
    }
}

/// `AssertCardinalityDataset`: the input, failing as TensorFlow does when it
/// has more or fewer elements than `expected`.
pub(super) fn assert_cardinality(input: Dataset, expected: i64) -> Result<Dataset> {
    Ok(Dataset::from_op(AssertCardinality { input, expected }))
}

#[derive(Debug)]
struct AssertCardinality {
    input: Dataset,
    expected: i64,
}

impl DatasetOp for AssertCardinality {
    fn name(&self) -> &'static str {
        "assert_cardinality"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("expected_cardinality", self.expected)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }
    fn cardinality(&self) -> i64 {
        self.expected
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(AssertCardinalityIter {
            inner: self.input.op().make_iterator(ctx)?,
            expected: self.expected,
            seen: 0,
        }))
    }
}

struct AssertCardinalityIter {
    inner: Box<dyn ElementIterator>,
    expected: i64,
    seen: i64,
}

fn elements(n: i64) -> &'static str {
    if n == 1 { "element" } else { "elements" }
}

impl ElementIterator for AssertCardinalityIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.inner.next_element()? {
            Some(e) => {
                self.seen += 1;
                if self.expected >= 0 && self.seen > self.expected {
                    return Err(Error::FailedPrecondition(format!(
                        "Input dataset was expected to contain {} {} but contained at least {} {}.",
                        self.expected,
                        elements(self.expected),
                        self.seen,
                        elements(self.seen)
                    )));
                }
                Ok(Some(e))
            }
            None => {
                if self.expected != tfdata_dataset::INFINITE_CARDINALITY
                    && self.seen < self.expected
                {
                    return Err(Error::FailedPrecondition(format!(
                        "Input dataset was expected to contain {} {} but contained only {} {}.",
                        self.expected,
                        elements(self.expected),
                        self.seen,
                        elements(self.seen)
                    )));
                }
                Ok(None)
            }
        }
    }
}
