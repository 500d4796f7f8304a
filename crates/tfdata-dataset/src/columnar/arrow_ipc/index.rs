//! Where an Arrow IPC file's or stream's record batches and dictionaries
//! lie, found with ranged reads, and one record batch decoded from one
//! ranged read.
//!
//! * The **file format** (`ARROW1` at both ends) has a footer listing every
//!   block; each record batch's message header is read once more for its
//!   row count (neighbouring headers come in one read, [`SCAN_WINDOW`]).
//! * The **stream format** (`0xFFFFFFFF` first, how `datasets` writes its
//!   `.arrow` shards) has no footer: the message headers are scanned once,
//!   each body skipped, and the end-of-stream marker must be there (a
//!   stream cut at a message boundary would otherwise look whole).
//!
//! Every message is checked against the limits ([`MAX_METADATA_BYTES`],
//! [`super::MAX_MESSAGE_BYTES`], [`MAX_MESSAGES`]) and the file's size
//! before it is read, and against [`super::check`] before arrow-ipc decodes
//! it. Streams and files written before Arrow 0.15 (2019), whose messages
//! lack the `0xFFFFFFFF` marker, are refused.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc as ipc;
use arrow_schema::{DataType, Schema, SchemaRef};
use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::{MAX_MESSAGE_BYTES, check};
use crate::io::FileSystem;

/// A message's metadata (its flatbuffer header) at most; also the file
/// format's footer. Schemas with long metadata (a `datasets` features
/// description, pandas' index) stay far below it.
pub const MAX_METADATA_BYTES: u64 = 16 << 20;
/// Messages (record batches and dictionaries) in one file at most: the
/// index holds a few dozen bytes for each.
pub const MAX_MESSAGES: usize = 1 << 20;
/// What one read fetches when scanning message headers: the headers of
/// small neighbouring batches come together.
const SCAN_WINDOW: u64 = 256 << 10;
/// What one read fetches for a header after a body larger than
/// [`SCAN_WINDOW`]: nothing else would be in a window, and a record
/// batch's header is a few hundred bytes per column.
const HEADER_READ: u64 = 16 << 10;
/// The file format's magic, at its start (padded to 8) and end.
const FILE_MAGIC: &[u8; 6] = b"ARROW1";
/// Each message's start since Arrow 0.15.
const CONTINUATION: [u8; 4] = [0xff; 4];

/// Which IPC format a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    File,
    Stream,
}

/// A file's bytes: read through the io layer, or held in memory (tests,
/// fuzzing).
pub struct IpcBytes {
    name: String,
    size: u64,
    source: Source,
}

enum Source {
    Fs(Arc<dyn FileSystem>),
    Memory(Bytes),
}

impl IpcBytes {
    pub fn open(path: &str) -> Result<IpcBytes> {
        let fs = crate::io::file_system(path)?;
        let size = fs.file_size(path)?;
        Ok(IpcBytes {
            name: path.to_string(),
            size,
            source: Source::Fs(fs),
        })
    }

    pub fn in_memory(name: &str, data: Bytes) -> IpcBytes {
        IpcBytes {
            name: name.to_string(),
            size: data.len() as u64,
            source: Source::Memory(data),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Exactly `len` bytes from `start`.
    fn read(&self, start: u64, len: u64) -> Result<Bytes> {
        let end = start.saturating_add(len);
        if end > self.size {
            return Err(self.damaged(
                start,
                format!(
                    "{len} bytes are needed here, but the file ends at byte {} (truncated?)",
                    self.size
                ),
            ));
        }
        let bytes = match &self.source {
            Source::Fs(fs) => fs.read_range(&self.name, start, len)?,
            Source::Memory(b) => b.slice(start as usize..end as usize),
        };
        if bytes.len() as u64 != len {
            return Err(self.damaged(
                start,
                format!(
                    "read {} bytes of {len}: the file is shorter than it was (changed while read?)",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    pub(super) fn damaged(&self, at: u64, reason: impl Into<String>) -> Error {
        Error::DataLoss {
            location: format!("{} at byte {at}", self.name),
            reason: reason.into(),
        }
    }
}

/// Ranged reads for the headers: of [`SCAN_WINDOW`] bytes while messages
/// are small (their headers come together), of [`HEADER_READ`] after a
/// large one (so a scan reads little more than the headers).
struct Window<'a> {
    src: &'a IpcBytes,
    start: u64,
    bytes: Bytes,
    read_size: u64,
}

impl<'a> Window<'a> {
    fn new(src: &'a IpcBytes) -> Self {
        Window {
            src,
            start: 0,
            bytes: Bytes::new(),
            read_size: SCAN_WINDOW,
        }
    }

    fn get(&mut self, start: u64, len: u64) -> Result<Bytes> {
        let held_end = self.start + self.bytes.len() as u64;
        if start < self.start || start.saturating_add(len) > held_end {
            let want = len
                .max(self.read_size)
                .min(self.src.size.saturating_sub(start))
                .max(len);
            self.bytes = self.src.read(start, want)?;
            self.start = start;
        }
        let from = (start - self.start) as usize;
        Ok(self.bytes.slice(from..from + len as usize))
    }
}

/// Where one message lies: its start, its metadata's length (the 8-byte
/// prefix included) and its body's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    offset: u64,
    meta_len: u64,
    body_len: u64,
}

impl Block {
    fn end(&self) -> u64 {
        self.offset + self.meta_len + self.body_len
    }
}

/// One record batch: where, how many rows, and how many of the file's
/// dictionary messages come before it (and so apply to it).
#[derive(Debug, Clone, Copy)]
struct BatchEntry {
    block: Block,
    rows: u64,
    dicts_before: usize,
}

/// What a message header says.
enum Header {
    Schema(SchemaInfo),
    Dictionary { id: i64 },
    RecordBatch { rows: u64 },
}

/// A schema and what its dictionaries are.
struct SchemaInfo {
    schema: Schema,
    /// Per top-level column, the dictionary ids it uses (nested ones too).
    column_dicts: Vec<Vec<i64>>,
    /// Each dictionary's value type.
    dict_types: HashMap<i64, DataType>,
}

/// A file's layout.
pub struct IpcIndex {
    pub format: Format,
    pub schema: SchemaRef,
    column_dicts: Vec<Vec<i64>>,
    dict_types: HashMap<i64, DataType>,
    /// Dictionary messages in file order, with their ids.
    dictionaries: Vec<(Block, i64)>,
    batches: Vec<BatchEntry>,
}

/// The dictionaries a reader of one file has decoded, by id, and how many
/// of the file's dictionary messages that takes in.
#[derive(Default)]
pub struct Dictionaries {
    applied: usize,
    by_id: HashMap<i64, ArrayRef>,
}

impl IpcIndex {
    /// Reads the layout of `src`.
    pub fn read(src: &IpcBytes) -> Result<IpcIndex> {
        if src.size < 8 {
            return Err(src.damaged(
                0,
                format!(
                    "{} bytes are too few for an Arrow IPC file or stream",
                    src.size
                ),
            ));
        }
        let head = src.read(0, 8)?;
        if &head[..6] == FILE_MAGIC {
            Self::read_file(src)
        } else if head[..4] == CONTINUATION {
            Self::read_stream(src)
        } else {
            Err(src.damaged(
                0,
                format!(
                    "not an Arrow IPC file or stream: it starts with {:02x?}, not \"ARROW1\" (file \
                     format) or ff ff ff ff (stream format; streams written before Arrow 0.15 \
                     lack it and are not read)",
                    &head[..]
                ),
            ))
        }
    }

    fn read_stream(src: &IpcBytes) -> Result<IpcIndex> {
        let mut window = Window::new(src);
        let mut at = 0;
        let (first, info) = match message_at(&mut window, at, src.size)? {
            Some((block, Header::Schema(info))) => (block, info),
            Some(_) => {
                return Err(src.damaged(0, "the stream's first message is not its schema"));
            }
            None => return Err(src.damaged(0, "the stream ends before its schema")),
        };
        at = first.end();
        let mut dictionaries = Vec::new();
        let mut batches = Vec::new();
        loop {
            if dictionaries.len() + batches.len() > MAX_MESSAGES {
                return Err(src.damaged(
                    at,
                    format!("more than {MAX_MESSAGES} messages in one stream (the limit)"),
                ));
            }
            if at == src.size {
                return Err(src.damaged(
                    at,
                    "the stream ends without its end-of-stream marker: truncated, or still \
                     being written?",
                ));
            }
            let Some((block, header)) = message_at(&mut window, at, src.size)? else {
                break;
            };
            match header {
                Header::Schema(_) => {
                    return Err(src.damaged(at, "a second schema message in the stream"));
                }
                Header::Dictionary { id } => dictionaries.push((block, id)),
                Header::RecordBatch { rows } => batches.push(BatchEntry {
                    block,
                    rows,
                    dicts_before: dictionaries.len(),
                }),
            }
            at = block.end();
        }
        Ok(IpcIndex {
            format: Format::Stream,
            schema: Arc::new(info.schema),
            column_dicts: info.column_dicts,
            dict_types: info.dict_types,
            dictionaries,
            batches,
        })
    }

    fn read_file(src: &IpcBytes) -> Result<IpcIndex> {
        // "ARROW1", 2 bytes of padding, the messages, the footer, its
        // length (4 bytes) and "ARROW1".
        let trailer_at = src
            .size
            .checked_sub(10)
            .filter(|&t| t >= 8)
            .ok_or_else(|| {
                src.damaged(0, "the file is too short for an Arrow IPC file's footer")
            })?;
        let trailer = src.read(trailer_at, 10)?;
        if &trailer[4..] != FILE_MAGIC {
            return Err(src.damaged(
                trailer_at + 4,
                "the file starts as an Arrow IPC file (\"ARROW1\") but does not end as one: \
                 truncated, or still being written?",
            ));
        }
        let footer_len = i32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
        let footer_at = u64::try_from(footer_len)
            .ok()
            .filter(|&n| n > 0 && n <= MAX_METADATA_BYTES)
            .and_then(|n| trailer_at.checked_sub(n))
            .filter(|&at| at >= 8)
            .ok_or_else(|| {
                src.damaged(
                    trailer_at,
                    format!("a footer length of {footer_len} bytes does not fit the file"),
                )
            })?;
        let footer_bytes = src.read(footer_at, trailer_at - footer_at)?;
        let footer = ipc::root_as_footer(&footer_bytes)
            .map_err(|e| src.damaged(footer_at, format!("the footer is damaged: {e}")))?;
        let fb_schema = footer
            .schema()
            .ok_or_else(|| src.damaged(footer_at, "the footer has no schema"))?;
        let info = schema_info(fb_schema).map_err(|e| src.damaged(footer_at, e))?;
        let blocks = |list: Vec<ipc::Block>| -> Result<Vec<Block>> {
            if list.len() > MAX_MESSAGES {
                return Err(src.damaged(
                    footer_at,
                    format!("the footer lists more than {MAX_MESSAGES} blocks (the limit)"),
                ));
            }
            list.iter()
                .map(|b| {
                    let fits = |n: i64, max: u64| u64::try_from(n).ok().filter(|&n| n <= max);
                    let block = match (
                        fits(b.offset(), footer_at),
                        fits(i64::from(b.metaDataLength()), MAX_METADATA_BYTES + 8),
                        fits(b.bodyLength(), MAX_MESSAGE_BYTES),
                    ) {
                        (Some(offset), Some(meta_len), Some(body_len)) if meta_len >= 8 => Block {
                            offset,
                            meta_len,
                            body_len,
                        },
                        _ => {
                            return Err(src.damaged(
                                footer_at,
                                format!(
                                    "the footer lists a block of {} + {} bytes at {}",
                                    b.metaDataLength(),
                                    b.bodyLength(),
                                    b.offset()
                                ),
                            ));
                        }
                    };
                    if block.end() > footer_at {
                        return Err(src.damaged(
                            block.offset,
                            "a block the footer lists runs into the footer",
                        ));
                    }
                    Ok(block)
                })
                .collect()
        };
        // At most one over the limit is copied out, to tell it is over.
        let dict_blocks = blocks(
            footer
                .dictionaries()
                .map(|v| v.iter().take(MAX_MESSAGES + 1).copied().collect())
                .unwrap_or_default(),
        )?;
        let batch_blocks = blocks(
            footer
                .recordBatches()
                .map(|v| v.iter().take(MAX_MESSAGES + 1).copied().collect())
                .unwrap_or_default(),
        )?;
        // The headers, for the dictionaries' ids and the batches' rows.
        let mut window = Window::new(src);
        let mut dictionaries = Vec::with_capacity(dict_blocks.len());
        for listed in dict_blocks {
            match message_at(&mut window, listed.offset, footer_at)? {
                Some((block, Header::Dictionary { id })) if block == listed => {
                    dictionaries.push((block, id))
                }
                _ => {
                    return Err(src.damaged(
                        listed.offset,
                        "the footer lists a dictionary here, but the message is not that",
                    ));
                }
            }
        }
        let mut batches = Vec::with_capacity(batch_blocks.len());
        for listed in batch_blocks {
            match message_at(&mut window, listed.offset, footer_at)? {
                Some((block, Header::RecordBatch { rows })) if block == listed => {
                    batches.push(BatchEntry {
                        block,
                        rows,
                        // The file format's dictionaries apply to every batch.
                        dicts_before: dictionaries.len(),
                    })
                }
                _ => {
                    return Err(src.damaged(
                        listed.offset,
                        "the footer lists a record batch here, but the message is not that",
                    ));
                }
            }
        }
        Ok(IpcIndex {
            format: Format::File,
            schema: Arc::new(info.schema),
            column_dicts: info.column_dicts,
            dict_types: info.dict_types,
            dictionaries,
            batches,
        })
    }

    /// Number of record batches.
    pub fn num_batches(&self) -> usize {
        self.batches.len()
    }

    /// Rows of record batch `i`, as its header says.
    pub fn rows(&self, i: usize) -> u64 {
        self.batches.get(i).map_or(0, |b| b.rows)
    }

    /// Consecutive record batches `[first, end)` of at least `rows` rows
    /// each (the last one may have fewer), in order: the file's splits.
    pub fn groups(&self, rows: u64) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let (mut first, mut have) = (0, 0u64);
        for (i, b) in self.batches.iter().enumerate() {
            have = have.saturating_add(b.rows);
            if have >= rows {
                out.push((first, i + 1));
                (first, have) = (i + 1, 0);
            }
        }
        if first < self.batches.len() {
            out.push((first, self.batches.len()));
        }
        out
    }

    /// The dictionary ids the top-level columns `columns` (schema indices)
    /// use.
    pub fn dictionaries_of(&self, columns: &[usize]) -> HashSet<i64> {
        columns
            .iter()
            .filter_map(|&c| self.column_dicts.get(c))
            .flatten()
            .copied()
            .collect()
    }

    /// Record batch `i`, its columns `projection` (schema indices, in
    /// order), decoded with the dictionaries `needed` (those of the
    /// projected columns; the others are not read).
    pub fn decode(
        &self,
        src: &IpcBytes,
        i: usize,
        projection: &[usize],
        needed: &HashSet<i64>,
        dicts: &mut Dictionaries,
    ) -> Result<RecordBatch> {
        let entry = *self.batches.get(i).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: there is no record batch {i} (the file has {})",
                src.name,
                self.batches.len()
            ))
        })?;
        if dicts.applied > entry.dicts_before {
            // A stream replaced a dictionary after this batch: start over.
            *dicts = Dictionaries::default();
        }
        while dicts.applied < entry.dicts_before {
            let (block, id) = self.dictionaries[dicts.applied];
            if needed.contains(&id) {
                self.read_dictionary(src, block, dicts)?;
            }
            dicts.applied += 1;
        }
        let block = entry.block;
        let (bytes, body) = read_message(src, block)?;
        let message = parse(&bytes).map_err(|e| src.damaged(block.offset, e))?;
        let batch = message
            .header_as_record_batch()
            .ok_or_else(|| src.damaged(block.offset, "this message is no longer a record batch"))?;
        let v5 = message.version() >= ipc::MetadataVersion::V5;
        let types: Vec<&DataType> = self.schema.fields().iter().map(|f| f.data_type()).collect();
        check::body(batch, body.as_slice(), &types, v5)
            .map_err(|e| src.damaged(block.offset, format!("record batch {i}: {e}")))?;
        ipc::reader::RecordBatchDecoder::try_new(
            &body,
            batch,
            Arc::clone(&self.schema),
            &dicts.by_id,
            &message.version(),
        )
        .and_then(|d| d.with_projection(Some(projection)).read_record_batch())
        .map_err(|e| src.damaged(block.offset, format!("record batch {i}: {e}")))
    }

    fn read_dictionary(
        &self,
        src: &IpcBytes,
        block: Block,
        dicts: &mut Dictionaries,
    ) -> Result<()> {
        let (bytes, body) = read_message(src, block)?;
        let message = parse(&bytes).map_err(|e| src.damaged(block.offset, e))?;
        let batch = message.header_as_dictionary_batch().ok_or_else(|| {
            src.damaged(block.offset, "this message is no longer a dictionary batch")
        })?;
        let damaged =
            |e: String| src.damaged(block.offset, format!("dictionary {}: {e}", batch.id()));
        let data = batch.data().ok_or_else(|| damaged("no data".into()))?;
        let value_type = self
            .dict_types
            .get(&batch.id())
            .ok_or_else(|| damaged("no column of the schema uses it".into()))?;
        let v5 = message.version() >= ipc::MetadataVersion::V5;
        check::body(data, body.as_slice(), &[value_type], v5).map_err(damaged)?;
        ipc::reader::read_dictionary(
            &body,
            batch,
            &self.schema,
            &mut dicts.by_id,
            &message.version(),
        )
        .map_err(|e| damaged(e.to_string()))
    }
}

/// A whole message, one read: its bytes, and its body as an Arrow buffer
/// (zero-copy: arrays decoded from it point into it, aligned ones as they
/// are).
fn read_message(src: &IpcBytes, block: Block) -> Result<(Bytes, Buffer)> {
    let bytes = src.read(block.offset, block.meta_len + block.body_len)?;
    let body = Buffer::from(bytes.slice(block.meta_len as usize..));
    Ok((bytes, body))
}

/// The message header of a whole message's bytes (prefix first).
fn parse(bytes: &[u8]) -> std::result::Result<ipc::Message<'_>, String> {
    let len = bytes
        .get(4..8)
        .map(|l| i32::from_le_bytes([l[0], l[1], l[2], l[3]]))
        .ok_or("a message shorter than its prefix")?;
    let meta = usize::try_from(len)
        .ok()
        .and_then(|n| bytes.get(8..8 + n))
        .ok_or("a message shorter than its header")?;
    ipc::root_as_message(meta).map_err(|e| format!("a damaged message header: {e}"))
}

/// The message at `at` (which must end by `end`): where it lies and what
/// its header says; `None` at an end-of-stream marker.
fn message_at(window: &mut Window<'_>, at: u64, end: u64) -> Result<Option<(Block, Header)>> {
    let src = window.src;
    if end.saturating_sub(at) < 8 {
        return Err(src.damaged(
            at,
            format!("a message starts here, but the file ends at byte {end} (truncated?)"),
        ));
    }
    let prefix = window.get(at, 8)?;
    if prefix[..4] != CONTINUATION {
        return Err(src.damaged(
            at,
            format!(
                "expected a message (ff ff ff ff, then its length), found {:02x?}",
                &prefix[..]
            ),
        ));
    }
    let len = i32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]);
    if len == 0 {
        return Ok(None);
    }
    let meta_len = u64::try_from(len)
        .ok()
        .filter(|&n| n <= MAX_METADATA_BYTES)
        .ok_or_else(|| {
            src.damaged(
                at,
                format!("a message header of {len} bytes (the limit is {MAX_METADATA_BYTES})"),
            )
        })?;
    if at + 8 + meta_len > end {
        return Err(src.damaged(
            at,
            format!(
                "a message header of {meta_len} bytes starts here, but the file ends at byte \
                 {end} (truncated?)"
            ),
        ));
    }
    let meta = window.get(at + 8, meta_len)?;
    let message = ipc::root_as_message(&meta)
        .map_err(|e| src.damaged(at, format!("a damaged message header: {e}")))?;
    let body_len = u64::try_from(message.bodyLength())
        .ok()
        .filter(|&n| n <= MAX_MESSAGE_BYTES)
        .ok_or_else(|| {
            src.damaged(
                at,
                format!(
                    "a message body of {} bytes (the limit is {MAX_MESSAGE_BYTES})",
                    message.bodyLength()
                ),
            )
        })?;
    let block = Block {
        offset: at,
        meta_len: 8 + meta_len,
        body_len,
    };
    window.read_size = if body_len > SCAN_WINDOW {
        HEADER_READ
    } else {
        SCAN_WINDOW
    };
    if block.end() > end {
        return Err(src.damaged(
            at,
            format!(
                "a message of {} bytes starts here, but the file ends at byte {end} (truncated?)",
                block.meta_len + body_len
            ),
        ));
    }
    let header = match message.header_type() {
        ipc::MessageHeader::Schema => {
            let fb = message
                .header_as_schema()
                .ok_or_else(|| src.damaged(at, "a schema message without its schema"))?;
            Header::Schema(schema_info(fb).map_err(|e| src.damaged(at, e))?)
        }
        ipc::MessageHeader::DictionaryBatch => {
            let d = message
                .header_as_dictionary_batch()
                .ok_or_else(|| src.damaged(at, "a dictionary message without its header"))?;
            Header::Dictionary { id: d.id() }
        }
        ipc::MessageHeader::RecordBatch => {
            let b = message
                .header_as_record_batch()
                .ok_or_else(|| src.damaged(at, "a record batch message without its header"))?;
            let rows = u64::try_from(b.length())
                .map_err(|_| src.damaged(at, format!("a record batch of {} rows", b.length())))?;
            Header::RecordBatch { rows }
        }
        t => {
            return Err(src.damaged(
                at,
                format!("a message of type {t:?}, which Arrow IPC files of tables do not hold"),
            ));
        }
    };
    Ok(Some((block, header)))
}

/// The Arrow schema of `fb`, checked first, and its dictionaries.
fn schema_info(fb: ipc::Schema<'_>) -> std::result::Result<SchemaInfo, String> {
    check::schema(fb)?;
    let schema = ipc::convert::fb_to_schema(fb);
    let mut column_dicts = Vec::with_capacity(schema.fields().len());
    let mut dict_types = HashMap::new();
    if let Some(fields) = fb.fields() {
        for (fb_field, field) in fields.iter().zip(schema.fields().iter()) {
            let mut ids = Vec::new();
            dictionaries(fb_field, field.data_type(), &mut ids, &mut dict_types, 0);
            column_dicts.push(ids);
        }
    }
    Ok(SchemaInfo {
        schema,
        column_dicts,
        dict_types,
    })
}

/// The dictionaries of `fb` (whose Arrow type is `t`) and its children:
/// their ids appended to `ids`, their value types recorded.
fn dictionaries(
    fb: ipc::Field<'_>,
    t: &DataType,
    ids: &mut Vec<i64>,
    types: &mut HashMap<i64, DataType>,
    depth: usize,
) {
    // `check::schema` bounded the depth already; this is its mirror.
    if depth > 64 {
        return;
    }
    let mut t = t;
    if let Some(d) = fb.dictionary()
        && let DataType::Dictionary(_, value) = t
    {
        ids.push(d.id());
        types.insert(d.id(), value.as_ref().clone());
        t = value;
    }
    let Some(children) = fb.children() else {
        return;
    };
    let child_types: Vec<&DataType> = match t {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.data_type()],
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type()).collect(),
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| f.data_type()).collect(),
        DataType::RunEndEncoded(a, b) => vec![a.data_type(), b.data_type()],
        _ => Vec::new(),
    };
    for (c, ct) in children.iter().zip(child_types) {
        dictionaries(c, ct, ids, types, depth + 1);
    }
}
