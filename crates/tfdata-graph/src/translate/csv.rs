//! `CSVDataset`, `CSVDatasetV2` and `ExperimentalCSVDataset`
//! (`tf.data.experimental.CsvDataset`): the records of CSV files, one
//! element per record, each selected field a scalar of its column's dtype.
//!
//! TensorFlow's rules, reimplemented: a record ends at `\n`, `\r` or
//! `\r\n` outside quotes; with `use_quote_delim` a field starting with `"`
//! runs to the next lone `"` (newlines included, `""` an escaped quote);
//! an empty field or one equal to `na_value` takes its column's default
//! (an error when the default is empty); `header` skips each file's first
//! record. A bad record is an error for that element only: the next one
//! reads on from the record after it.

use std::io::BufRead;
use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_dataset::io::CompressionType;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Attrs, Dataset, DatasetOp, ElementIterator, IterContext};
use tfdata_proto::tensorflow::NodeDef;

use super::files;
use super::node::{Inputs, handle, tensors};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::kernels::{check_size, parse_f32, parse_float, parse_int};

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    let v2 = match node.op.as_str() {
        "CSVDatasetV2" => true,
        "CSVDataset" | "ExperimentalCSVDataset" => false,
        _ => return Ok(None),
    };
    let types = attrs.dtypes("output_types")?;
    let spec = spec.clone();
    Ok(Some(handle(
        move |i| {
            let csv = Csv::from_inputs(i, types.clone(), v2)?;
            Ok(Dataset::from_op(CsvDataset {
                csv: Arc::new(csv),
                spec: spec.clone(),
            }))
        },
        node,
    )))
}

/// What one `CSVDataset` node reads, checked as TensorFlow checks it.
#[derive(Debug)]
struct Csv {
    files: Vec<String>,
    compression: CompressionType,
    buffer_size: usize,
    header: bool,
    delim: u8,
    quote: bool,
    na: Vec<u8>,
    select: Vec<i64>,
    exclude: Vec<i64>,
    types: Vec<DType>,
    defaults: Vec<Tensor>,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(msg.into())
}

impl Csv {
    fn from_inputs(mut i: Inputs, types: Vec<DType>, v2: bool) -> Result<Csv> {
        let names = i.tensor("filenames")?;
        if names.shape().len() > 1 {
            return Err(invalid("`filenames` must be a scalar or a vector."));
        }
        let files = files::names(&names)?;
        let compression = i.string("compression_type")?;
        let buffer_size = i.int("buffer_size")?;
        let header = i.bool("header")?;
        let delim = i.string("field_delim")?;
        let quote = i.bool("use_quote_delim")?;
        let na = i.string("na_value")?;
        let select = i.tensor("select_cols")?;
        let defaults = tensors(i.take(Some(types.len()))?, "record_defaults")?;
        let exclude = if v2 {
            Some(i.tensor("exclude_cols")?)
        } else {
            None
        };
        // TensorFlow's order of checks and its messages.
        for (f, d) in defaults.iter().enumerate() {
            if d.shape().len() > 1 {
                return Err(invalid("Each record default should be at most rank 1"));
            }
            if d.num_elements() > 1 {
                return Err(invalid(format!(
                    "There should only be 1 default per field but field {f} has {}",
                    d.num_elements()
                )));
            }
        }
        if select.shape().len() != 1 {
            return Err(invalid("`select_cols` must be a vector."));
        }
        let select = select.to_vec::<i64>()?;
        let exclude = match exclude {
            Some(t) if t.shape().len() != 1 => {
                return Err(invalid("`exclude_cols` must be a vector"));
            }
            Some(t) => t.to_vec::<i64>()?,
            None => Vec::new(),
        };
        if buffer_size <= 0 {
            return Err(invalid("buffer_size should be positive"));
        }
        let [delim] = delim.as_bytes() else {
            return Err(invalid("field_delim should be only 1 char"));
        };
        let compression = match compression.as_str() {
            "" => CompressionType::None,
            "ZLIB" => CompressionType::Zlib,
            "GZIP" => CompressionType::Gzip,
            other => return Err(invalid(format!("Unsupported compression_type: {other}."))),
        };
        if !select.is_empty() && select.len() != types.len() {
            return Err(invalid("select_cols should match output size"));
        }
        if select.windows(2).any(|w| w[0] >= w[1]) {
            return Err(invalid("select_cols should be strictly increasing indices"));
        }
        if select.first().is_some_and(|&c| c < 0) {
            return Err(invalid("select_cols should be non-negative indices"));
        }
        if !select.is_empty() && !exclude.is_empty() {
            return Err(invalid(
                "Either select_cols or exclude_cols should be empty",
            ));
        }
        if exclude.windows(2).any(|w| w[0] >= w[1]) {
            return Err(invalid(
                "exclude_cols should be strictly increasing indices",
            ));
        }
        if exclude.first().is_some_and(|&c| c < 0) {
            return Err(invalid("exclude_cols should be non-negative indices"));
        }
        for (f, t) in types.iter().enumerate() {
            if !matches!(
                t,
                DType::Int32 | DType::Int64 | DType::Float | DType::Double | DType::String
            ) {
                return Err(invalid(format!(
                    "csv: data type {t} not supported in field {f}"
                )));
            }
        }
        Ok(Csv {
            files,
            compression,
            // TensorFlow's buffer is a read size; ours is capped so a graph
            // cannot make each open file hold gigabytes.
            buffer_size: (buffer_size as usize).min(16 << 20),
            header,
            delim: *delim,
            quote,
            na: na.into_bytes(),
            select,
            exclude,
            types,
            defaults,
        })
    }

    /// Whether field `n` of a record is kept, given how many selected and
    /// explicitly excluded fields came before it.
    fn include(&self, n: usize, selected: usize, excluded: usize) -> (bool, bool) {
        let n = n as i64;
        let explicit_exclude = self.exclude.get(excluded) == Some(&n);
        let include = (self.select.is_empty() && self.exclude.is_empty())
            || self.select.get(selected) == Some(&n)
            || (!self.exclude.is_empty() && !explicit_exclude);
        (include, explicit_exclude)
    }

    /// A field's value as output component `idx`.
    fn field(&self, idx: usize, field: &[u8]) -> Result<Tensor> {
        let Some(&dtype) = self.types.get(idx) else {
            return Err(invalid(format!(
                "Expect {} fields but have more in record",
                self.types.len()
            )));
        };
        let default = &self.defaults[idx];
        if field.is_empty() || field == self.na.as_slice() {
            if default.num_elements() != 1 {
                return Err(invalid(format!(
                    "Field {idx} is required but missing in record!"
                )));
            }
            return Tensor::new(dtype, vec![], default.data().clone());
        }
        let bad = |what: &str| {
            invalid(format!(
                "Field {idx} in record is not a valid {what}: {}",
                String::from_utf8_lossy(field)
            ))
        };
        match dtype {
            DType::Int32 => {
                let v = parse_int(field)
                    .and_then(|v| i32::try_from(v).ok())
                    .ok_or_else(|| bad("int32"))?;
                Tensor::from_slice(&[v], vec![])
            }
            DType::Int64 => {
                Tensor::from_slice(&[parse_int(field).ok_or_else(|| bad("int64"))?], vec![])
            }
            DType::Float => {
                Tensor::from_slice(&[parse_f32(field).ok_or_else(|| bad("float"))?], vec![])
            }
            DType::Double => {
                Tensor::from_slice(&[parse_float(field).ok_or_else(|| bad("double"))?], vec![])
            }
            _ => Tensor::strings(vec![Bytes::copy_from_slice(field)], vec![]),
        }
    }
}

/// The dataset of a `CSVDataset` node.
#[derive(Debug)]
struct CsvDataset {
    csv: Arc<Csv>,
    spec: Option<Structure>,
}

impl DatasetOp for CsvDataset {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("filenames", self.csv.files.join(","))
            .with("header", self.csv.header)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(self.spec.clone())
    }
    fn cardinality(&self) -> i64 {
        tfdata_dataset::UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(CsvIter {
            csv: self.csv.clone(),
            next_file: 0,
            reader: None,
        }))
    }
}

struct CsvIter {
    csv: Arc<Csv>,
    next_file: usize,
    reader: Option<Box<dyn BufRead + Send>>,
}

/// How a record ended, or did not start.
enum Record {
    /// The file had no more bytes where a record would start.
    End,
    /// A record, its kept fields converted (the first error wins, as
    /// TensorFlow keeps it, after the whole record is read).
    Fields(Result<Vec<Tensor>>),
}

impl ElementIterator for CsvIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            if let Some(reader) = self.reader.as_mut() {
                match read_record(&self.csv, reader.as_mut(), true)? {
                    Record::Fields(fields) => {
                        let fields = fields?;
                        if fields.len() != self.csv.types.len() {
                            return Err(invalid(format!(
                                "Expect {} fields but have {} in record",
                                self.csv.types.len(),
                                fields.len()
                            )));
                        }
                        return Ok(Some(Element::new(fields)));
                    }
                    Record::End => self.reader = None,
                }
            }
            let Some(name) = self.csv.files.get(self.next_file) else {
                return Ok(None);
            };
            self.next_file += 1;
            let raw = tfdata_dataset::io::open(name)?;
            let mut reader = tfdata_dataset::io::compression::decompressing_reader(
                raw,
                self.csv.compression,
                self.csv.buffer_size,
            );
            if self.csv.header {
                match read_record(&self.csv, reader.as_mut(), false) {
                    Ok(Record::Fields(Ok(_))) => {}
                    _ => return Err(invalid("Can't read header of file")),
                }
            }
            self.reader = Some(reader);
        }
    }
}

/// The bytes of one file, read one at a time from its buffer.
struct Bytes1<'a> {
    input: &'a mut (dyn BufRead + Send),
}

impl Bytes1<'_> {
    fn peek(&mut self) -> Result<Option<u8>> {
        let buf = self
            .input
            .fill_buf()
            .map_err(|e| Error::io("reading a CSV file", e))?;
        Ok(buf.first().copied())
    }
    fn next(&mut self) -> Result<Option<u8>> {
        let b = self.peek()?;
        if b.is_some() {
            self.input.consume(1);
        }
        Ok(b)
    }
}

/// The longest field read (TensorFlow has no limit; a worker needs one).
const MAX_FIELD: usize = 1 << 30;

/// Reads one record; `keep` false reads a header (no field kept).
fn read_record(csv: &Csv, input: &mut (dyn BufRead + Send), keep: bool) -> Result<Record> {
    let mut bytes = Bytes1 { input };
    if bytes.peek()?.is_none() {
        return Ok(Record::End);
    }
    let mut out = Vec::new();
    let mut first_err: Option<Error> = None;
    let (mut parsed, mut selected, mut excluded) = (0usize, 0usize, 0usize);
    let mut end = false;
    let mut field = Vec::new();
    while !end {
        let (include, explicit_exclude) = csv.include(parsed, selected, excluded);
        let include = include && keep;
        field.clear();
        let status = read_field(csv, &mut bytes, &mut field, &mut end)?;
        if let Err(e) = status {
            first_err.get_or_insert(e);
        } else if include {
            match csv.field(out.len(), &field) {
                Ok(t) => out.push(t),
                Err(e) => {
                    // TensorFlow counts the component before failing it.
                    first_err.get_or_insert(e);
                    out.push(Tensor::from_slice(&[0u8], vec![])?);
                }
            }
        }
        parsed += 1;
        if include {
            selected += 1;
        }
        if explicit_exclude {
            excluded += 1;
        }
        check_size("CSVDataset", DType::String, parsed as u64)?;
    }
    Ok(Record::Fields(match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }))
}

/// Reads one field into `field`, setting `end` at the record's end. The
/// outer error is an I/O failure; the inner one a malformed field (the
/// field is read to its end all the same, so the next record reads on).
fn read_field(
    csv: &Csv,
    bytes: &mut Bytes1<'_>,
    field: &mut Vec<u8>,
    end: &mut bool,
) -> Result<Result<()>> {
    let push = |field: &mut Vec<u8>, b: u8| -> Result<()> {
        if field.len() >= MAX_FIELD {
            return Err(invalid(format!(
                "a CSV field is longer than {MAX_FIELD} bytes"
            )));
        }
        field.push(b);
        Ok(())
    };
    let mut status = Ok(());
    if csv.quote && bytes.peek()? == Some(b'"') {
        bytes.next()?;
        let mut keep = true;
        loop {
            match bytes.next()? {
                None => {
                    *end = true;
                    return Ok(Err(invalid(
                        "Reached end of file without closing quoted field in record",
                    )));
                }
                Some(b'"') => match bytes.next()? {
                    None => {
                        *end = true;
                        return Ok(status);
                    }
                    Some(b'"') => {
                        if keep {
                            push(field, b'"')?;
                        }
                    }
                    Some(c) if c == csv.delim => return Ok(status),
                    Some(c @ (b'\n' | b'\r')) => {
                        *end = true;
                        if c == b'\r' && bytes.peek()? == Some(b'\n') {
                            bytes.next()?;
                        }
                        return Ok(status);
                    }
                    Some(_) => {
                        keep = false;
                        if status.is_ok() {
                            status = Err(invalid(
                                "Quote inside a string has to be escaped by another quote",
                            ));
                        }
                    }
                },
                Some(c) => {
                    if keep {
                        push(field, c)?;
                    }
                }
            }
        }
    }
    loop {
        match bytes.next()? {
            None => {
                *end = true;
                return Ok(status);
            }
            Some(c) if c == csv.delim => return Ok(status),
            Some(c @ (b'\n' | b'\r')) => {
                *end = true;
                if c == b'\r' && bytes.peek()? == Some(b'\n') {
                    bytes.next()?;
                }
                return Ok(status);
            }
            Some(c) => {
                if csv.quote && c == b'"' && status.is_ok() {
                    status = Err(invalid("Unquoted fields cannot have quotes inside"));
                }
                push(field, c)?;
            }
        }
    }
}
