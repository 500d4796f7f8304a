//! One ArrayRecord file: its index, read from the end of the file, and its
//! chunks of records, each read with one ranged read when wanted.
//!
//! The layout (Google's `array_record` `cpp/layout.proto` and
//! `array_record_writer.cc`), on the Riegeli container ([`super::riegeli`]):
//!
//! * data chunks, each of `group_size` records (the last may hold fewer),
//!   in record order;
//! * a footer chunk: a `RiegeliFooterMetadata` record (format version,
//!   chunk and record counts, the writer's options), then one
//!   `ArrayRecordFooter` per data chunk (its offset, decoded size and
//!   record count);
//! * a postscript chunk alone in the file's last 64 KiB block: three
//!   copies of a `RiegeliPostscript` (the footer's offset and ArrayRecord's
//!   magic number).
//!
//! Opening a file reads its tail (the postscript, and usually the footer
//! with it) and keeps the chunks' offsets: 8 bytes a chunk, as Google's
//! reader does. Record `i` is in chunk `i / group_size`, so reaching it
//! costs one ranged read and the decoding of its chunk, whatever the file's
//! size. The footer is checked whole: offsets inside the file and in order,
//! every chunk but the last of `group_size` records, counts adding up.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::riegeli::{self, BLOCK_SIZE, Problem, SimpleRecords};
use crate::io::FileSystem;

/// ArrayRecord's magic number, in its postscript (the first 16 hex digits
/// of the MD5 of `"ArrayRecord\n"`).
pub const MAGIC: u64 = 0x7193_0e70_4fda_e05e;
/// The one ArrayRecord format version there is.
const VERSION: u32 = 1;
/// Bytes read from the end of a file when opening it: the postscript's
/// block and, for files of up to some ten thousand chunks, the footer, so
/// opening usually costs one request to an object store.
const TAIL_PREFETCH: u64 = 256 << 10;
/// The most bytes a chunk's records may decode to: a chunk is decoded
/// whole in memory (group_size 1, ArrayRecord's default, makes it one
/// record, so this is also the largest record).
pub const MAX_CHUNK_DECODED_BYTES: u64 = 1 << 30;
/// The most bytes read for one chunk: its encoded data (codecs expand
/// incompressible records slightly, and the sizes and block headers add
/// a little), and any padding up to the next chunk.
const MAX_CHUNK_READ_BYTES: u64 = MAX_CHUNK_DECODED_BYTES + (64 << 20);
/// The most bytes of consecutive chunks read with one request (the chunk
/// wanted is read whole whatever its size): a chunk per record is
/// ArrayRecord's default, and a request per record would make object
/// stores crawl. Google's reader reads ahead 16 MiB by default; this is
/// what one iterator holds besides the chunk it decodes.
pub const READ_AHEAD_BYTES: u64 = 4 << 20;
/// The most records in one chunk: the decoded chunk keeps a handle per
/// record (32 bytes) while it is read. ArrayRecord's own default is 1,
/// Grain's guidance a few hundred at most.
pub const MAX_RECORDS_PER_CHUNK: u64 = 1 << 20;
/// The most bytes a footer may decode to (a record of some 6 to 15 bytes
/// per chunk).
const MAX_FOOTER_BYTES: u64 = 256 << 20;
/// The most bytes read for a footer: its encoded records (compressed, a
/// footer is smaller than decoded; stored, a one-byte size per entry of
/// at least six bytes and the block headers add under a quarter).
const MAX_FOOTER_READ_BYTES: u64 = MAX_FOOTER_BYTES + MAX_FOOTER_BYTES / 4;
/// The most chunks a file may have (footer records): 16 million, an index
/// of 128 MiB (16 million records at ArrayRecord's default group_size 1;
/// datasets are sharded into files far smaller).
const MAX_CHUNKS: u64 = 1 << 24;
/// The most records in the postscript chunk (ArrayRecord writes three).
const MAX_POSTSCRIPT_RECORDS: u64 = 16;

/// `RiegeliPostscript`.
#[derive(Clone, PartialEq, prost::Message)]
struct Postscript {
    #[prost(uint64, optional, tag = "1")]
    footer_offset: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    magic: Option<u64>,
}

/// `RiegeliFooterMetadata` (its `oneof` of one message is, on the wire, an
/// optional message field).
#[derive(Clone, PartialEq, prost::Message)]
struct FooterMetadata {
    #[prost(message, optional, tag = "1")]
    array_record_metadata: Option<ArrayRecordMetadata>,
}

/// `RiegeliFooterMetadata.ArrayRecordMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
struct ArrayRecordMetadata {
    #[prost(uint32, optional, tag = "1")]
    version: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    num_chunks: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    num_records: Option<u64>,
    // `writer_options` (4), a string for debugging, is skipped.
}

/// `ArrayRecordFooter`: one data chunk.
#[derive(Clone, PartialEq, prost::Message)]
struct ChunkEntry {
    #[prost(uint64, optional, tag = "1")]
    chunk_offset: Option<u64>,
    #[prost(uint64, optional, tag = "2")]
    decoded_data_size: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    num_records: Option<u64>,
}

/// Consecutive chunks' bytes, read with one request.
pub struct ChunkRun {
    chunks: Range<usize>,
    /// The file offset of `bytes[0]`: where the first chunk begins.
    begin: u64,
    bytes: Bytes,
}

impl ChunkRun {
    pub fn contains(&self, chunk: usize) -> bool {
        self.chunks.contains(&chunk)
    }
}

/// An open ArrayRecord file: where its chunks are.
pub struct ArrayRecordFile {
    path: String,
    fs: Arc<dyn FileSystem>,
    /// Each data chunk's offset, then the footer's: chunk `c` lies in
    /// `offsets[c]..offsets[c + 1]`.
    offsets: Vec<u64>,
    /// Records per chunk (all but the last chunk hold exactly this many).
    group_size: u64,
    num_records: u64,
}

impl std::fmt::Debug for ArrayRecordFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayRecordFile")
            .field("path", &self.path)
            .field("chunks", &self.num_chunks())
            .field("group_size", &self.group_size)
            .field("num_records", &self.num_records)
            .finish()
    }
}

impl ArrayRecordFile {
    /// Reads the file's index.
    pub fn open(path: &str) -> Result<ArrayRecordFile> {
        Self::open_inner(path, None)
    }

    /// Reads the file's index, and each chunk's decoded size as the footer
    /// gives it (0 where it gives none): what splits are cut by.
    pub fn open_with_sizes(path: &str) -> Result<(ArrayRecordFile, Vec<u64>)> {
        let mut sizes = Vec::new();
        let file = Self::open_inner(path, Some(&mut sizes))?;
        Ok((file, sizes))
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn num_records(&self) -> u64 {
        self.num_records
    }

    pub fn num_chunks(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Where chunk `chunk` begins in the file.
    pub fn chunk_offset(&self, chunk: usize) -> Option<u64> {
        self.offsets
            .get(chunk)
            .copied()
            .filter(|_| chunk < self.num_chunks())
    }

    /// The chunk holding record `record` (< `num_records`).
    pub fn chunk_of(&self, record: u64) -> usize {
        usize::try_from(record / self.group_size.max(1)).unwrap_or(usize::MAX)
    }

    /// The records of chunk `chunk`.
    pub fn chunk_records(&self, chunk: usize) -> Range<u64> {
        let begin = (chunk as u64).saturating_mul(self.group_size);
        begin.min(self.num_records)..begin.saturating_add(self.group_size).min(self.num_records)
    }

    /// Reads chunk `first` and the chunks after it, up to chunk `end`
    /// (excluded), that fit in [`READ_AHEAD_BYTES`] with it: one ranged read
    /// (one request to an object store) for many small chunks.
    pub fn read_run(&self, first: usize, end: usize) -> Result<ChunkRun> {
        let end = end.min(self.num_chunks());
        if first >= end {
            return Err(Error::InvalidArgument(format!(
                "array_record_dataset: {} has no chunks {first}..{end} (it has {})",
                self.path,
                self.num_chunks()
            )));
        }
        let begin = self.offsets[first];
        let len = self.offsets[first + 1] - begin;
        if len > MAX_CHUNK_READ_BYTES {
            return Err(self.problem(
                begin,
                &format!("chunk {first}"),
                Problem::TooLarge(format!(
                    "it spans {len} bytes, more than the {MAX_CHUNK_READ_BYTES} this reader takes"
                )),
            ));
        }
        // Bounded by `end`.
        let mut last = first + 1;
        while last < end && self.offsets[last + 1] - begin <= READ_AHEAD_BYTES {
            last += 1;
        }
        let bytes = self.read(begin, self.offsets[last] - begin)?;
        Ok(ChunkRun {
            chunks: first..last,
            begin,
            bytes,
        })
    }

    /// Decodes chunk `chunk` of `run`: both hashes checked, its record count
    /// checked against the footer's.
    pub fn decode_chunk(&self, run: &ChunkRun, chunk: usize) -> Result<SimpleRecords> {
        let (Some(&begin), Some(&end)) = (self.offsets.get(chunk), self.offsets.get(chunk + 1))
        else {
            return Err(Error::InvalidArgument(format!(
                "array_record_dataset: {} has no chunk {chunk} (it has {})",
                self.path,
                self.num_chunks()
            )));
        };
        let bytes = run
            .chunks
            .contains(&chunk)
            .then(|| {
                run.bytes
                    .get((begin - run.begin) as usize..(end - run.begin) as usize)
            })
            .flatten()
            .ok_or_else(|| {
                Error::Internal(format!(
                    "array_record_dataset: {}: chunk {chunk} is not in the run read",
                    self.path
                ))
            })?;
        let what = format!("chunk {chunk}");
        let records = riegeli::read_chunk(bytes, begin, MAX_CHUNK_READ_BYTES)
            .and_then(|c| {
                riegeli::decode_simple(&c, MAX_RECORDS_PER_CHUNK, MAX_CHUNK_DECODED_BYTES)
            })
            .map_err(|p| self.problem(begin, &what, p))?;
        let expected = self.chunk_records(chunk);
        if records.len() != expected.end - expected.start {
            return Err(self.data_loss(
                begin,
                format!(
                    "{what} holds {} records, the footer says {}",
                    records.len(),
                    expected.end - expected.start
                ),
            ));
        }
        Ok(records)
    }

    /// `len` bytes from `start`, all of them (the file was measured when it
    /// was opened: fewer means it shrank or a read was cut short).
    fn read(&self, start: u64, len: u64) -> Result<Bytes> {
        let bytes = self.fs.read_range(&self.path, start, len)?;
        if bytes.len() as u64 != len {
            return Err(self.data_loss(
                start,
                format!(
                    "wanted {len} bytes, the file gave {} (it changed since it was opened?)",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    fn data_loss(&self, offset: u64, reason: String) -> Error {
        Error::DataLoss {
            location: format!("{} at offset {offset}", self.path),
            reason,
        }
    }

    /// `problem`, found in `what` at `offset`, as the error it is.
    fn problem(&self, offset: u64, what: &str, problem: Problem) -> Error {
        match problem {
            Problem::Corrupt(reason) => self.data_loss(offset, format!("{what}: {reason}")),
            Problem::Unsupported(reason) => Error::Unimplemented(format!(
                "array_record_dataset: {} at offset {offset}: {what}: {reason}",
                self.path
            )),
            Problem::TooLarge(reason) => Error::InvalidArgument(format!(
                "array_record_dataset: {} at offset {offset}: {what}: {reason}",
                self.path
            )),
        }
    }

    fn open_inner(path: &str, sizes: Option<&mut Vec<u64>>) -> Result<ArrayRecordFile> {
        let fs = crate::io::file_system(path)?;
        let size = fs.file_size(path)?;
        let mut file = ArrayRecordFile {
            path: path.to_string(),
            fs,
            offsets: Vec::new(),
            group_size: 1,
            num_records: 0,
        };
        // The postscript is padded to the end of its block, and so every
        // ArrayRecord file to a whole number of blocks.
        if !size.is_multiple_of(BLOCK_SIZE) || size < 2 * BLOCK_SIZE {
            return Err(file.data_loss(
                size,
                format!(
                    "not an ArrayRecord file, or truncated: it is {size} bytes, and ArrayRecord \
                     files are whole 64 KiB blocks, at least two"
                ),
            ));
        }
        let tail_start = size.saturating_sub(TAIL_PREFETCH);
        let tail = file.read(tail_start, size - tail_start)?;
        let postscript_at = size - BLOCK_SIZE;
        let postscript = file.postscript(
            &tail[(postscript_at - tail_start) as usize..],
            postscript_at,
        )?;
        let footer_at = postscript.footer_offset.unwrap_or(0);
        // The file signature chunk takes the first 64 bytes.
        if !(64..postscript_at).contains(&footer_at) {
            return Err(file.data_loss(
                postscript_at,
                format!("the postscript's footer offset {footer_at} is outside the file's data"),
            ));
        }
        let footer = if footer_at >= tail_start {
            tail.slice((footer_at - tail_start) as usize..(postscript_at - tail_start) as usize)
        } else {
            let len = postscript_at - footer_at;
            if len > MAX_FOOTER_READ_BYTES {
                return Err(file.problem(
                    footer_at,
                    "the footer",
                    Problem::TooLarge(format!(
                        "it spans {len} bytes, more than the {MAX_FOOTER_READ_BYTES} this reader takes"
                    )),
                ));
            }
            file.read(footer_at, len)?
        };
        file.read_footer(&footer, footer_at, sizes)?;
        Ok(file)
    }

    /// The postscript, from `block`: the file's last block, at `at`.
    fn postscript(&self, block: &[u8], at: u64) -> Result<Postscript> {
        let what = "the postscript (in the last 64 KiB)";
        let records = riegeli::read_chunk(block, at, BLOCK_SIZE)
            .and_then(|c| riegeli::decode_simple(&c, MAX_POSTSCRIPT_RECORDS, BLOCK_SIZE))
            .map_err(|p| match p {
                Problem::Corrupt(r) => self.data_loss(
                    at,
                    format!("{what}: {r} (not an ArrayRecord file, or damaged)"),
                ),
                p => self.problem(at, what, p),
            })?;
        let first = records
            .iter()
            .next()
            .ok_or_else(|| self.data_loss(at, format!("{what} holds no record")))?;
        let postscript = <Postscript as prost::Message>::decode(first)
            .map_err(|e| self.data_loss(at, format!("{what}: {e}")))?;
        if postscript.magic != Some(MAGIC) {
            return Err(self.data_loss(
                at,
                format!(
                    "{what}: no ArrayRecord magic number (a Riegeli file, but not an ArrayRecord \
                     one?)"
                ),
            ));
        }
        Ok(postscript)
    }

    /// Checks the footer chunk (`bytes`, at file offset `at`) and keeps its
    /// index; each chunk's decoded size goes to `sizes` if asked for.
    fn read_footer(
        &mut self,
        bytes: &[u8],
        at: u64,
        mut sizes: Option<&mut Vec<u64>>,
    ) -> Result<()> {
        let what = "the footer";
        let records = riegeli::read_chunk(bytes, at, MAX_FOOTER_READ_BYTES)
            .and_then(|c| riegeli::decode_simple(&c, MAX_CHUNKS + 1, MAX_FOOTER_BYTES))
            .map_err(|p| self.problem(at, what, p))?;
        let bad = |reason: String| self.data_loss(at, format!("{what}: {reason}"));
        let mut entries = records.iter();
        let metadata = entries
            .next()
            .ok_or_else(|| bad("no metadata record".into()))?;
        let metadata = <FooterMetadata as prost::Message>::decode(metadata)
            .map_err(|e| bad(format!("metadata: {e}")))?
            .array_record_metadata
            .ok_or_else(|| bad("no ArrayRecord metadata (not an ArrayRecord file?)".into()))?;
        if metadata.version != Some(VERSION) {
            return Err(Error::Unimplemented(format!(
                "array_record_dataset: {}: ArrayRecord format version {:?}; only version \
                 {VERSION} is known",
                self.path, metadata.version
            )));
        }
        let num_chunks = metadata.num_chunks.unwrap_or(0);
        let num_records = metadata.num_records.unwrap_or(0);
        if num_chunks != records.len() - 1 {
            return Err(bad(format!(
                "the metadata counts {num_chunks} chunks, the footer lists {}",
                records.len() - 1
            )));
        }
        // At most one entry per footer record, itself bounded.
        let mut offsets = Vec::with_capacity(records.len() as usize);
        let mut counted = 0u64;
        let mut group_size = 0u64;
        let mut last_records = 0u64;
        for (c, entry) in entries.enumerate() {
            let entry = <ChunkEntry as prost::Message>::decode(entry)
                .map_err(|e| bad(format!("chunk {c}'s entry: {e}")))?;
            let (Some(offset), Some(n)) = (entry.chunk_offset, entry.num_records) else {
                return Err(bad(format!(
                    "chunk {c}'s entry lacks its offset or record count"
                )));
            };
            if offsets.last().is_some_and(|&previous| offset <= previous)
                || !(64..at).contains(&offset)
            {
                return Err(bad(format!(
                    "chunk {c}'s offset {offset} is out of order or outside the data"
                )));
            }
            // Every chunk but the last holds group_size records: what
            // finding record i in chunk i / group_size relies on (Google's
            // reader relies on it too).
            if c > 0 && last_records != group_size {
                return Err(bad(format!(
                    "chunk {} holds {last_records} records, the first holds {group_size}: not \
                     ArrayRecord's layout",
                    c - 1
                )));
            }
            if c == 0 {
                group_size = n;
                if n > MAX_RECORDS_PER_CHUNK {
                    return Err(self.problem(
                        offset,
                        "chunk 0",
                        Problem::TooLarge(format!(
                            "the footer says it holds {n} records, more than the \
                             {MAX_RECORDS_PER_CHUNK} this reader takes"
                        )),
                    ));
                }
            }
            if n == 0 || n > group_size {
                return Err(bad(format!(
                    "chunk {c} holds {n} records, the first holds {group_size}"
                )));
            }
            last_records = n;
            counted = counted.saturating_add(n);
            offsets.push(offset);
            if let Some(sizes) = sizes.as_deref_mut() {
                sizes.push(entry.decoded_data_size.unwrap_or(0));
            }
        }
        if counted != num_records {
            return Err(bad(format!(
                "the chunks hold {counted} records, the metadata says {num_records}"
            )));
        }
        if i64::try_from(num_records).is_err() {
            return Err(bad(format!("{num_records} records is too many")));
        }
        offsets.push(at);
        self.offsets = offsets;
        self.group_size = group_size.max(1);
        self.num_records = num_records;
        Ok(())
    }
}
