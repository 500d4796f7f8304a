//! The legacy reader resources (`TextLineReaderV2`, `TFRecordReaderV2`,
//! `FixedLengthRecordReaderV2`, `WholeFileReaderV2`, `IdentityReaderV2`;
//! their ops are `kernels::readers`, the handle a `Value::Reader`).
//!
//! A reader turns work items (file names, taken from a [`FifoQueue`] when
//! the current one is used up) into (key, value) records, counting work
//! started, work finished and records produced as TensorFlow's
//! `ReaderBase` does; keys are TensorFlow's ("file:line" for text lines
//! counted from 1, "file:offset" for TFRecords, "file:index" for
//! fixed-length records, the name itself for whole files). Files are read
//! through the engine's own readers (`tfdata_dataset::io`).

use std::sync::Mutex;

use bytes::Bytes;
use prost::Message;
use tfdata_core::{Error, Result, Tensor};
use tfdata_dataset::io::{CompressionType, TextLineReader, TfRecordReader};

use crate::queue::{FifoQueue, out_of_range};

/// What kind of reader, with its attributes.
#[derive(Clone, Debug)]
pub enum ReaderKind {
    TextLine {
        skip_header_lines: i64,
    },
    TfRecord {
        compression: CompressionType,
    },
    FixedLength {
        header: u64,
        record: u64,
        footer: u64,
        /// Bytes from one record's start to the next's (0: `record`).
        hop: u64,
        compression: CompressionType,
    },
    WholeFile,
    Identity,
}

/// TensorFlow's `ReaderBaseState` proto: what `ReaderSerializeState`
/// returns for the readers that have no state beyond it.
#[derive(Clone, PartialEq, Message)]
pub struct ReaderBaseState {
    #[prost(int64, tag = "1")]
    pub work_started: i64,
    #[prost(int64, tag = "2")]
    pub work_finished: i64,
    #[prost(int64, tag = "3")]
    pub num_records_produced: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub current_work: Vec<u8>,
}

pub struct Reader {
    kind: ReaderKind,
    /// What errors call it: "TextLineReader '<node>'".
    name: String,
    state: Mutex<ReaderState>,
}

#[derive(Default)]
struct ReaderState {
    work_started: i64,
    work_finished: i64,
    records: i64,
    work: Bytes,
    source: Option<Source>,
}

/// The open work item.
enum Source {
    Lines {
        reader: TextLineReader,
        line: i64,
    },
    Records(TfRecordReader),
    /// The bytes between header and footer (uncompressed), and the offset
    /// and number of the next record.
    Fixed {
        body: Bytes,
        next: u64,
        index: i64,
    },
}

/// TensorFlow's `NotFound` for a file that is not there; other errors as
/// the engine's file systems give them.
fn file_error(path: &str, e: Error) -> Error {
    match e {
        Error::NotFound { .. } => Error::Remote {
            code: tonic::Code::NotFound,
            message: format!("{path}; No such file or directory"),
        },
        e => e,
    }
}

/// TensorFlow's wording for a record cut short by the end of the file
/// (the engine's reader says where and in which part).
fn tfrecord_error(e: Error) -> Error {
    if let Error::DataLoss { location, reason } = &e
        && let Some(rest) = reason.strip_prefix("truncated record at offset ")
    {
        let offset = rest.split(':').next().unwrap_or_default();
        return Error::DataLoss {
            location: location.clone(),
            reason: format!(
                "truncated record at {offset}' failed with Read less bytes than requested"
            ),
        };
    }
    e
}

/// A file's bytes, decompressed for `GZIP` and `ZLIB`, refused past
/// [`crate::MAX_TENSOR_BYTES`].
fn uncompressed(path: &str, raw: Bytes, compression: CompressionType) -> Result<Bytes> {
    use std::io::Read;
    if compression == CompressionType::None {
        return Ok(raw);
    }
    let reader = tfdata_dataset::io::compression::decompressing_reader(
        Box::new(std::io::Cursor::new(raw)),
        compression,
        tfdata_dataset::io::DEFAULT_BUFFER_SIZE,
    );
    let limit = crate::MAX_TENSOR_BYTES as u64;
    let mut out = Vec::new();
    reader
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::DataLoss {
            location: path.to_string(),
            reason: format!("the {compression} stream is corrupt or truncated: {e}"),
        })?;
    if out.len() as u64 > limit {
        return Err(Error::InvalidArgument(format!(
            "{path}: more than {limit} bytes uncompressed"
        )));
    }
    Ok(out.into())
}

/// A whole file, refused past [`crate::MAX_TENSOR_BYTES`].
fn read_whole(path: &str) -> Result<Bytes> {
    let fs = tfdata_dataset::io::file_system(path).map_err(|e| file_error(path, e))?;
    let size = fs.file_size(path).map_err(|e| file_error(path, e))?;
    if size > crate::MAX_TENSOR_BYTES as u64 {
        return Err(Error::InvalidArgument(format!(
            "{path}: a file of {size} bytes exceeds the limit of {} bytes",
            crate::MAX_TENSOR_BYTES
        )));
    }
    fs.read_all(path).map_err(|e| file_error(path, e))
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("name", &self.name).finish()
    }
}

impl Reader {
    pub fn new(kind: ReaderKind, node: &str) -> Reader {
        let prefix = match kind {
            ReaderKind::TextLine { .. } => "TextLineReader",
            ReaderKind::TfRecord { .. } => "TFRecordReader",
            ReaderKind::FixedLength { .. } => "FixedLengthRecordReader",
            ReaderKind::WholeFile => "WholeFileReader",
            ReaderKind::Identity => "IdentityReader",
        };
        Reader {
            kind,
            name: format!("{prefix} '{node}'"),
            state: Mutex::new(ReaderState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReaderState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn num_records_produced(&self) -> i64 {
        self.lock().records
    }

    pub fn num_work_units_completed(&self) -> i64 {
        self.lock().work_finished
    }

    pub fn reset(&self) {
        *self.lock() = ReaderState::default();
    }

    /// The next record, taking work items from `queue` as needed.
    pub fn read(&self, queue: &FifoQueue) -> Result<(Bytes, Bytes)> {
        let mut s = self.lock();
        // Each turn either produces, finishes a work item (taken from the
        // bounded queue) or fails: the loop ends.
        loop {
            self.start_work_if_idle(&mut s, queue)?;
            let (record, at_end) = self.read_one(&mut s)?;
            if at_end {
                s.source = None;
                s.work_finished = s.work_started;
            }
            if let Some(r) = record {
                s.records += 1;
                return Ok(r);
            }
        }
    }

    /// Up to `n` records: stops early after a work item ends if it has any
    /// (TensorFlow's `ReadUpTo`).
    pub fn read_up_to(&self, queue: &FifoQueue, n: i64) -> Result<(Vec<Bytes>, Vec<Bytes>)> {
        let mut s = self.lock();
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        while (keys.len() as i64) < n {
            self.start_work_if_idle(&mut s, queue)?;
            let (record, at_end) = self.read_one(&mut s)?;
            if let Some((k, v)) = record {
                s.records += 1;
                keys.push(k);
                values.push(v);
            }
            if at_end {
                s.source = None;
                s.work_finished = s.work_started;
                if !keys.is_empty() {
                    break;
                }
            }
        }
        Ok((keys, values))
    }

    fn start_work_if_idle(&self, s: &mut ReaderState, queue: &FifoQueue) -> Result<()> {
        if s.work_finished < s.work_started {
            return Ok(());
        }
        let tuple = queue.dequeue()?;
        let work = match tuple.as_slice() {
            [t] if t.dtype() != tfdata_core::DType::String => {
                return Err(Error::InvalidArgument(
                    "Expected queue with single string component".into(),
                ));
            }
            [t] => match t.string_values()? {
                [w] => w.clone(),
                _ => {
                    return Err(Error::InvalidArgument(
                        "Expected to dequeue a one-element string tensor".into(),
                    ));
                }
            },
            _ => {
                return Err(Error::InvalidArgument(
                    "Expected single component queue".into(),
                ));
            }
        };
        s.work = work;
        s.source = None;
        let path = String::from_utf8_lossy(&s.work).into_owned();
        match &self.kind {
            ReaderKind::TextLine { skip_header_lines } => {
                let mut reader = TextLineReader::open(&path, CompressionType::None)
                    .map_err(|e| file_error(&path, e))?;
                let mut line = 0;
                // Bounded by the attribute and by the file: a file with
                // fewer lines than the header is left with none to read.
                while line < *skip_header_lines {
                    if reader.read_line()?.is_none() {
                        break;
                    }
                    line += 1;
                }
                s.source = Some(Source::Lines { reader, line });
            }
            ReaderKind::TfRecord { compression } => {
                let reader =
                    TfRecordReader::open(&path, *compression).map_err(|e| file_error(&path, e))?;
                s.source = Some(Source::Records(reader));
            }
            ReaderKind::FixedLength {
                header,
                footer,
                compression,
                ..
            } => {
                let data = uncompressed(&path, read_whole(&path)?, *compression)?;
                let len = data.len() as u64;
                if len < *header {
                    return Err(out_of_range(
                        if *compression == CompressionType::None {
                            "reached end of file"
                        } else {
                            "EOF reached"
                        }
                        .into(),
                    ));
                }
                let end = len.saturating_sub(*footer).max(*header);
                s.source = Some(Source::Fixed {
                    body: data.slice(*header as usize..end as usize),
                    next: 0,
                    index: 0,
                });
            }
            ReaderKind::WholeFile | ReaderKind::Identity => {}
        }
        s.work_started += 1;
        Ok(())
    }

    /// One step of the current work item: a record, and whether the item
    /// is done.
    fn read_one(&self, s: &mut ReaderState) -> Result<(Option<(Bytes, Bytes)>, bool)> {
        let work = s.work.clone();
        let key = |suffix: String| {
            let mut k = work.to_vec();
            k.push(b':');
            k.extend_from_slice(suffix.as_bytes());
            Bytes::from(k)
        };
        match (&self.kind, s.source.as_mut()) {
            (ReaderKind::Identity, _) => Ok((Some((work.clone(), work.clone())), true)),
            (ReaderKind::WholeFile, _) => {
                let path = String::from_utf8_lossy(&work).into_owned();
                let contents = read_whole(&path)?;
                Ok((Some((work.clone(), contents)), true))
            }
            (_, Some(Source::Lines { reader, line })) => {
                let next = reader.read_line()?;
                *line += 1;
                Ok(match next {
                    Some(v) => (Some((key(line.to_string()), v)), false),
                    None => (None, true),
                })
            }
            (_, Some(Source::Records(reader))) => {
                let offset = reader.offset();
                Ok(match reader.read_record().map_err(tfrecord_error)? {
                    Some(v) => (Some((key(offset.to_string()), v)), false),
                    None => (None, true),
                })
            }
            (
                ReaderKind::FixedLength { record, hop, .. },
                Some(Source::Fixed { body, next, index }),
            ) => {
                // Records start every `hop` bytes and must fit before the
                // footer; a partial last one is dropped, as in TensorFlow.
                // (With `record_bytes` and `hop_bytes` 0 there is no end:
                // empty records, one per read, as in TensorFlow.)
                let end = next.saturating_add(*record);
                if end > body.len() as u64 {
                    return Ok((None, true));
                }
                let v = body.slice(*next as usize..end as usize);
                *next += if *hop == 0 { *record } else { *hop };
                let k = key(index.to_string());
                *index += 1;
                Ok((Some((k, v)), false))
            }
            _ => Err(Error::Internal(format!(
                "{}: reading with no open work item",
                self.name
            ))),
        }
    }

    /// `ReaderSerializeState`: a `ReaderBaseState` for the readers whose
    /// state is only that (whole files, identity); TensorFlow's other
    /// readers cannot save their state.
    pub fn serialize_state(&self) -> Result<Tensor> {
        if !self.base_state_only() {
            return Err(Error::Unimplemented("Reader SerializeState".into()));
        }
        let s = self.lock();
        let state = ReaderBaseState {
            work_started: s.work_started,
            work_finished: s.work_finished,
            num_records_produced: s.records,
            current_work: s.work.to_vec(),
        };
        Ok(Tensor::scalar_string(state.encode_to_vec()))
    }

    /// `ReaderRestoreState`; a failure leaves the reader reset, as in
    /// TensorFlow.
    pub fn restore_state(&self, bytes: &[u8]) -> Result<()> {
        let mut s = self.lock();
        let result = self.restore_locked(&mut s, bytes);
        if result.is_err() {
            *s = ReaderState::default();
        }
        result
    }

    fn restore_locked(&self, s: &mut ReaderState, bytes: &[u8]) -> Result<()> {
        if !self.base_state_only() {
            return Err(Error::Unimplemented("Reader RestoreState".into()));
        }
        let state = ReaderBaseState::decode(bytes).map_err(|_| {
            Error::InvalidArgument(format!(
                "Could not parse state for {}: {}",
                self.name,
                c_escape(bytes)
            ))
        })?;
        s.work_started = state.work_started;
        s.work_finished = state.work_finished;
        s.records = state.num_records_produced;
        s.work = Bytes::from(state.current_work.clone());
        s.source = None;
        if s.work_started < 0 || s.work_finished < 0 || s.records < 0 {
            return Err(Error::InvalidArgument(format!(
                "Unexpected negative value when restoring in {}: {}",
                self.name,
                debug_string(&state)
            )));
        }
        if s.work_started > s.work_finished {
            return Err(Error::InvalidArgument(format!(
                "Inconsistent work started vs. finished when restoring in {}: {}",
                self.name,
                debug_string(&state)
            )));
        }
        Ok(())
    }

    fn base_state_only(&self) -> bool {
        matches!(self.kind, ReaderKind::WholeFile | ReaderKind::Identity)
    }
}

/// Protobuf's text format of the state (`DebugString`): set fields only.
fn debug_string(s: &ReaderBaseState) -> String {
    let mut out = String::new();
    for (name, v) in [
        ("work_started", s.work_started),
        ("work_finished", s.work_finished),
        ("num_records_produced", s.num_records_produced),
    ] {
        if v != 0 {
            out.push_str(&format!("{name}: {v}\n"));
        }
    }
    if !s.current_work.is_empty() {
        out.push_str(&format!(
            "current_work: \"{}\"\n",
            c_escape(&s.current_work)
        ));
    }
    out
}

/// `absl::CEscape`: C escapes, octal for other unprintable bytes.
fn c_escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}
