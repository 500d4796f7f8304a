//! The part of the Riegeli/records container that ArrayRecord files are
//! made of, decoded from bytes already read (Google's
//! `doc/riegeli_records_file_format.md` is the specification):
//!
//! * **blocks**: a 24-byte block header interrupts the file at every
//!   multiple of 64 KiB, wherever it falls (inside a chunk's header or
//!   data); [`read_chunk`] leaves them out. Their hashes are not checked:
//!   they only help a reader resynchronise after damage, and the chunk
//!   hashes cover everything a record is made of;
//! * **chunks**: a 40-byte header (its own HighwayHash, the data's size
//!   and hash, the chunk type, record count and decoded size), then the
//!   data. Both hashes are checked before anything is decoded;
//! * **simple chunks** (type `r`), the only kind ArrayRecord writes unless
//!   told `transpose:true`: the records' sizes (varints) and their
//!   concatenated bytes, each buffer compressed with the chunk's codec:
//!   none, zstd, Snappy or Brotli, the four Riegeli defines. Transposed
//!   chunks (type `t`, Riegeli's column-wise encoding of protocol buffers)
//!   are refused as unsupported.
//!
//! Nothing here does I/O or knows file names: problems come back as
//! [`Problem`]s, which the caller places in a file.

use std::borrow::Cow;
use std::io::Read;

use bytes::Bytes;
use highway::{HighwayHash, HighwayHasher, Key};

/// Riegeli's block size: a block header starts at every multiple of it.
pub const BLOCK_SIZE: u64 = 1 << 16;
/// A block header: its hash, and the distances to the chunk it interrupts.
pub const BLOCK_HEADER_SIZE: u64 = 24;
/// A chunk header: hash, data size, data hash, type, records, decoded size.
pub const CHUNK_HEADER_SIZE: usize = 40;

/// The key of Riegeli's HighwayHash: `"Riegeli/"`, `"records\n"`, twice
/// (as little-endian words).
const HASH_KEY: [u64; 4] = [
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
];

/// Chunk types (the header's type byte).
const SIGNATURE_CHUNK: u8 = b's';
const METADATA_CHUNK: u8 = b'm';
const PADDING_CHUNK: u8 = b'p';
const SIMPLE_CHUNK: u8 = b'r';
const TRANSPOSED_CHUNK: u8 = b't';

/// Compression types (a simple chunk's first byte).
const UNCOMPRESSED: u8 = 0;
const BROTLI: u8 = b'b';
const ZSTD: u8 = b'z';
const SNAPPY: u8 = b's';

/// The longest varint64.
const MAX_VARINT_LEN: usize = 10;

/// What the Brotli decoder reads its input through (its own buffer).
const BROTLI_BUFFER: usize = 64 << 10;

/// The most bytes reserved before a Brotli stream has produced them: the
/// size a chunk declares is checked against the caller's limit, but
/// reserving all of it up front would let a small crafted chunk claim
/// memory it never fills.
const MAX_INITIAL_RESERVE: u64 = 1 << 20;

/// Why a chunk cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The bytes are not what the format says: damaged or not Riegeli.
    Corrupt(String),
    /// Valid Riegeli that this reader does not decode.
    Unsupported(String),
    /// Valid, but past one of the caller's limits.
    TooLarge(String),
}

fn corrupt(reason: impl Into<String>) -> Problem {
    Problem::Corrupt(reason.into())
}

/// Riegeli's 64-bit hash of `data`.
pub fn hash(data: &[u8]) -> u64 {
    HighwayHasher::new(Key(HASH_KEY)).hash64(data)
}

/// A decoded chunk header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    pub data_size: u64,
    pub data_hash: u64,
    pub chunk_type: u8,
    pub num_records: u64,
    pub decoded_data_size: u64,
}

impl ChunkHeader {
    fn parse(bytes: &[u8]) -> Result<ChunkHeader, Problem> {
        let word = |i: usize| -> u64 {
            let mut w = [0u8; 8];
            if let Some(b) = bytes.get(i..i + 8) {
                w.copy_from_slice(b);
            }
            u64::from_le_bytes(w)
        };
        if bytes.len() != CHUNK_HEADER_SIZE {
            return Err(corrupt("short chunk header"));
        }
        if hash(&bytes[8..]) != word(0) {
            return Err(corrupt(
                "chunk header hash mismatch (damaged, or no chunk begins here)",
            ));
        }
        let type_and_records = word(24);
        Ok(ChunkHeader {
            data_size: word(8),
            data_hash: word(16),
            chunk_type: (type_and_records & 0xff) as u8,
            num_records: type_and_records >> 8,
            decoded_data_size: word(32),
        })
    }
}

/// A chunk's header and data (block headers left out).
#[derive(Debug)]
pub struct Chunk<'a> {
    pub header: ChunkHeader,
    pub data: Cow<'a, [u8]>,
}

/// The chunk that begins at file offset `begin`, from `bytes`: the file's
/// bytes from `begin` on (up to where the next chunk begins, or fewer). Its
/// data may be at most `max_data` bytes. Both hashes are checked.
pub fn read_chunk(bytes: &[u8], begin: u64, max_data: u64) -> Result<Chunk<'_>, Problem> {
    let in_block = begin % BLOCK_SIZE;
    if in_block != 0 && in_block <= BLOCK_HEADER_SIZE {
        return Err(corrupt(format!(
            "a chunk cannot begin inside or right after a block header ({in_block} bytes into \
             a block)"
        )));
    }
    let mut blocks = Blocks {
        bytes,
        begin,
        at: 0,
    };
    let header = blocks
        .take(CHUNK_HEADER_SIZE)
        .ok_or_else(|| corrupt("the chunk header is cut short"))?;
    let header = ChunkHeader::parse(&header)?;
    if header.data_size > max_data {
        return Err(Problem::TooLarge(format!(
            "the chunk's data is {} bytes, more than the {max_data} this reader takes",
            header.data_size
        )));
    }
    let data = usize::try_from(header.data_size)
        .ok()
        .and_then(|n| blocks.take(n))
        .ok_or_else(|| {
            corrupt(format!(
                "the chunk's {} bytes of data run past the next chunk or the end of the file \
                 (truncated?)",
                header.data_size
            ))
        })?;
    if hash(&data) != header.data_hash {
        return Err(corrupt("chunk data hash mismatch"));
    }
    Ok(Chunk { header, data })
}

/// Reads the chunk contents out of a run of the file's bytes, leaving out
/// the block headers at each multiple of [`BLOCK_SIZE`].
struct Blocks<'a> {
    bytes: &'a [u8],
    /// The file offset of `bytes[0]`.
    begin: u64,
    /// How far into `bytes` reading has got.
    at: usize,
}

impl<'a> Blocks<'a> {
    /// The next `n` content bytes; `None` if `bytes` ends first. Borrowed
    /// when no block header interrupts them.
    fn take(&mut self, n: usize) -> Option<Cow<'a, [u8]>> {
        let mut joined: Option<Vec<u8>> = None;
        let mut left = n;
        // Each pass reaches the next block boundary or the end of `n`: at
        // most one pass per 64 KiB block of `bytes`, plus one.
        while left > 0 {
            let mut offset = self.begin.checked_add(self.at as u64)?;
            if offset.is_multiple_of(BLOCK_SIZE) {
                self.at = self.at.checked_add(BLOCK_HEADER_SIZE as usize)?;
                offset += BLOCK_HEADER_SIZE;
            }
            let to_boundary = BLOCK_SIZE - offset % BLOCK_SIZE;
            let k = left.min(usize::try_from(to_boundary).unwrap_or(usize::MAX));
            let piece = self.bytes.get(self.at..self.at.checked_add(k)?)?;
            self.at += k;
            left -= k;
            match joined.as_mut() {
                None if left == 0 => return Some(Cow::Borrowed(piece)),
                None => {
                    let mut v = Vec::with_capacity(n);
                    v.extend_from_slice(piece);
                    joined = Some(v);
                }
                Some(v) => v.extend_from_slice(piece),
            }
        }
        Some(joined.map_or(Cow::Borrowed(&[][..]), Cow::Owned))
    }
}

/// The records of a simple chunk: each record's size and their bytes,
/// decompressed and checked against each other and the chunk header.
#[derive(Debug, Clone)]
pub struct SimpleRecords {
    /// `count` varints.
    sizes: Bytes,
    values: Bytes,
    count: u64,
}

impl SimpleRecords {
    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The records in order (slices of one buffer, not copies).
    pub fn iter(&self) -> impl Iterator<Item = Bytes> + '_ {
        let (mut at_size, mut at_value) = (0usize, 0usize);
        // `decode_simple` checked that the sizes are `count` varints that
        // add up to the values' length, so this ends after `count` records.
        std::iter::from_fn(move || {
            let (size, used) = varint(self.sizes.get(at_size..)?)?;
            let end = at_value.checked_add(usize::try_from(size).ok()?)?;
            if end > self.values.len() {
                return None;
            }
            let record = self.values.slice(at_value..end);
            at_size += used;
            at_value = end;
            Some(record)
        })
    }
}

/// Decodes a simple chunk of at most `max_records` records and
/// `max_decoded` bytes of them.
pub fn decode_simple(
    chunk: &Chunk<'_>,
    max_records: u64,
    max_decoded: u64,
) -> Result<SimpleRecords, Problem> {
    let header = &chunk.header;
    match header.chunk_type {
        SIMPLE_CHUNK => {}
        TRANSPOSED_CHUNK => {
            return Err(Problem::Unsupported(
                "transposed chunks (written with the option transpose:true) are not supported: \
                 only simple chunks are decoded; rewrite the file without transpose"
                    .into(),
            ));
        }
        t @ (SIGNATURE_CHUNK | METADATA_CHUNK | PADDING_CHUNK) => {
            return Err(corrupt(format!(
                "a chunk of type '{}' where records were expected",
                t as char
            )));
        }
        t => return Err(corrupt(format!("unknown chunk type 0x{t:02x}"))),
    }
    if header.num_records > max_records {
        return Err(Problem::TooLarge(format!(
            "the chunk holds {} records, more than the {max_records} this reader takes",
            header.num_records
        )));
    }
    if header.decoded_data_size > max_decoded {
        return Err(Problem::TooLarge(format!(
            "the chunk's records are {} bytes, more than the {max_decoded} this reader takes",
            header.decoded_data_size
        )));
    }
    let data = &chunk.data[..];
    let (&compression, rest) = data
        .split_first()
        .ok_or_else(|| corrupt("a simple chunk without data"))?;
    let (sizes_size, used) =
        varint(rest).ok_or_else(|| corrupt("bad varint: the size of the record sizes"))?;
    let rest = &rest[used..];
    let sizes_size = usize::try_from(sizes_size)
        .ok()
        .filter(|&n| n <= rest.len())
        .ok_or_else(|| corrupt("the record sizes run past the chunk's data"))?;
    let (sizes, values) = rest.split_at(sizes_size);
    // Each size is one varint of at most MAX_VARINT_LEN bytes.
    let max_sizes = header.num_records.saturating_mul(MAX_VARINT_LEN as u64);
    let sizes = decompress(compression, sizes, max_sizes, "record sizes")?;
    let mut at = 0usize;
    let mut total = 0u64;
    for i in 0..header.num_records {
        let (size, used) = sizes
            .get(at..)
            .and_then(varint)
            .ok_or_else(|| corrupt(format!("bad varint: the size of record {i}")))?;
        at += used;
        total = total
            .checked_add(size)
            .filter(|&t| t <= header.decoded_data_size)
            .ok_or_else(|| {
                corrupt(format!(
                    "the record sizes add up to more than the chunk's {} bytes",
                    header.decoded_data_size
                ))
            })?;
    }
    if at != sizes.len() {
        return Err(corrupt(format!(
            "{} bytes after the last record size",
            sizes.len() - at
        )));
    }
    if total != header.decoded_data_size {
        return Err(corrupt(format!(
            "the record sizes add up to {total} bytes, the chunk header says {}",
            header.decoded_data_size
        )));
    }
    let values = decompress(compression, values, header.decoded_data_size, "records")?;
    if values.len() as u64 != header.decoded_data_size {
        return Err(corrupt(format!(
            "the records are {} bytes, the chunk header says {}",
            values.len(),
            header.decoded_data_size
        )));
    }
    Ok(SimpleRecords {
        sizes: Bytes::from(sizes.into_owned()),
        values: Bytes::from(values.into_owned()),
        count: header.num_records,
    })
}

/// One compressed buffer of a chunk (`what`), at most `max` bytes once
/// decompressed. Compressed buffers begin with their decompressed size
/// (a varint), which must be exact.
fn decompress<'a>(
    compression: u8,
    input: &'a [u8],
    max: u64,
    what: &str,
) -> Result<Cow<'a, [u8]>, Problem> {
    if compression == UNCOMPRESSED {
        if input.len() as u64 > max {
            return Err(corrupt(format!(
                "the {what} are {} bytes, more than the chunk header allows ({max})",
                input.len()
            )));
        }
        return Ok(Cow::Borrowed(input));
    }
    let codec = match compression {
        ZSTD => "zstd",
        SNAPPY => "Snappy",
        BROTLI => "Brotli",
        c => {
            return Err(Problem::Unsupported(format!(
                "compression type 0x{c:02x} (Riegeli defines none, zstd, Snappy and Brotli)"
            )));
        }
    };
    let (declared, used) = varint(input)
        .ok_or_else(|| corrupt(format!("bad varint: the decompressed size of the {what}")))?;
    if declared > max {
        return Err(corrupt(format!(
            "the {what} claim {declared} bytes decompressed, more than the chunk header allows \
             ({max})"
        )));
    }
    // `declared` <= `max`, which callers bound by their limits.
    let declared_len = usize::try_from(declared)
        .map_err(|_| Problem::TooLarge(format!("{declared} bytes do not fit in memory")))?;
    let input = &input[used..];
    let bad = |e: String| corrupt(format!("{codec}-compressed {what}: {e}"));
    let out = match compression {
        ZSTD => zstd::bulk::decompress(input, declared_len).map_err(|e| bad(e.to_string()))?,
        SNAPPY => {
            let len = snap::raw::decompress_len(input).map_err(|e| bad(e.to_string()))?;
            if len != declared_len {
                return Err(bad(format!(
                    "{len} bytes decompressed, the chunk says {declared}"
                )));
            }
            snap::raw::Decoder::new()
                .decompress_vec(input)
                .map_err(|e| bad(e.to_string()))?
        }
        _ => {
            let mut out = Vec::with_capacity(declared.min(MAX_INITIAL_RESERVE) as usize);
            brotli_decompressor::Decompressor::new(input, BROTLI_BUFFER)
                .take(declared.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|e| bad(e.to_string()))?;
            out
        }
    };
    if out.len() != declared_len {
        return Err(bad(format!(
            "{} bytes decompressed, the chunk says {declared}",
            out.len()
        )));
    }
    Ok(Cow::Owned(out))
}

/// A varint64 at the start of `bytes` and its length; `None` if it is cut
/// short or overflows 64 bits.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().take(MAX_VARINT_LEN).enumerate() {
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return None;
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed first 64 bytes of every Riegeli file (the specification's
    /// file signature chunk, a block header then a chunk header).
    const SIGNATURE: [u8; 64] = [
        0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87,
        0xe1, 0xa9, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe1, 0x9f, 0x13, 0xc0, 0xe9,
        0xb1, 0xc3, 0x72, 0x73, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn the_specifications_file_signature_reads_with_its_hashes() {
        // HighwayHash with Riegeli's key, as the specification's bytes say.
        let header = &SIGNATURE[24..];
        assert_eq!(hash(&header[8..]).to_le_bytes(), header[..8]);
        assert_eq!(hash(&[]).to_le_bytes(), header[16..24], "empty data");
        let chunk = read_chunk(&SIGNATURE, 0, 0).unwrap();
        assert_eq!(chunk.header.chunk_type, b's');
        assert_eq!((chunk.header.data_size, chunk.header.num_records), (0, 0));
        let err = decode_simple(&chunk, 1, 1).unwrap_err();
        assert!(
            matches!(err, Problem::Corrupt(ref r) if r.contains("type 's'")),
            "{err:?}"
        );
        let mut flipped = SIGNATURE;
        flipped[40] ^= 1;
        assert!(matches!(
            read_chunk(&flipped, 0, 0),
            Err(Problem::Corrupt(r)) if r.contains("header hash")
        ));
        assert!(matches!(
            read_chunk(&SIGNATURE, 12, 0),
            Err(Problem::Corrupt(r)) if r.contains("inside")
        ));
    }

    /// A chunk header for `data` (hashes filled in).
    fn header(data: &[u8], chunk_type: u8, records: u64, decoded: u64) -> Vec<u8> {
        let mut h = vec![0u8; 8];
        h.extend((data.len() as u64).to_le_bytes());
        h.extend(hash(data).to_le_bytes());
        h.extend((u64::from(chunk_type) | (records << 8)).to_le_bytes());
        h.extend(decoded.to_le_bytes());
        let sum = hash(&h[8..]);
        h[..8].copy_from_slice(&sum.to_le_bytes());
        h
    }

    /// `content` laid out from file offset `begin`, with a block header
    /// (filler bytes) at each multiple of 64 KiB.
    fn with_block_headers(begin: u64, content: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = content;
        let mut offset = begin;
        while !rest.is_empty() {
            if offset.is_multiple_of(BLOCK_SIZE) {
                out.extend([0xbbu8; BLOCK_HEADER_SIZE as usize]);
                offset += BLOCK_HEADER_SIZE;
            }
            let k = rest.len().min((BLOCK_SIZE - offset % BLOCK_SIZE) as usize);
            out.extend(&rest[..k]);
            rest = &rest[k..];
            offset += k as u64;
        }
        out
    }

    fn simple_chunk_data(records: &[&[u8]]) -> Vec<u8> {
        let mut data = vec![UNCOMPRESSED];
        let sizes: Vec<u8> = records.iter().map(|r| r.len() as u8).collect();
        data.push(sizes.len() as u8);
        data.extend(&sizes);
        for r in records {
            data.extend(*r);
        }
        data
    }

    #[test]
    fn block_headers_are_left_out_wherever_they_fall() {
        let big = vec![7u8; 100];
        let records: [&[u8]; 3] = [b"alpha", &big, b""];
        let data = simple_chunk_data(&records);
        let content = [header(&data, b'r', 3, 105), data.clone()].concat();
        // The chunk header interrupted after 10 bytes, after 40 (between
        // header and data), in the data, and at a block's start.
        for begin in [
            BLOCK_SIZE - 10,
            BLOCK_SIZE - 40,
            BLOCK_SIZE - 60,
            BLOCK_SIZE,
            3 * BLOCK_SIZE + 100,
        ] {
            let bytes = with_block_headers(begin, &content);
            let chunk = read_chunk(&bytes, begin, 1 << 20).unwrap();
            assert_eq!(chunk.data, data, "at {begin}");
            let got: Vec<Bytes> = decode_simple(&chunk, 10, 1000).unwrap().iter().collect();
            assert_eq!(got, records.map(Bytes::copy_from_slice), "at {begin}");
            // Cut short anywhere: an error, never a panic.
            for cut in [0, 5, 39, 41, bytes.len() - 1] {
                assert!(
                    matches!(
                        read_chunk(&bytes[..cut], begin, 1 << 20),
                        Err(Problem::Corrupt(_))
                    ),
                    "cut at {cut} of a chunk at {begin}"
                );
            }
        }
    }

    #[test]
    fn sizes_and_records_must_agree_with_the_header() {
        let data = simple_chunk_data(&[b"ab", b"cde"]);
        let decode = |records: u64, decoded: u64| {
            let content = [header(&data, b'r', records, decoded), data.clone()].concat();
            let chunk = read_chunk(&content, 64, 1 << 20).unwrap();
            decode_simple(&chunk, 100, 100).map(|r| r.len())
        };
        assert_eq!(decode(2, 5), Ok(2));
        assert!(matches!(decode(3, 5), Err(Problem::Corrupt(r)) if r.contains("record 2")));
        assert!(matches!(decode(1, 5), Err(Problem::Corrupt(r)) if r.contains("after the last")));
        assert!(matches!(decode(2, 4), Err(Problem::Corrupt(r)) if r.contains("more than")));
        assert!(matches!(decode(2, 6), Err(Problem::Corrupt(r)) if r.contains("add up to 5")));
        assert!(matches!(decode(2, 500), Err(Problem::TooLarge(_))));
        assert!(matches!(decode(200, 5), Err(Problem::TooLarge(_))));
        let transposed = [header(&data, b't', 2, 5), data.clone()].concat();
        let chunk = read_chunk(&transposed, 64, 1 << 20).unwrap();
        assert!(matches!(
            decode_simple(&chunk, 100, 100),
            Err(Problem::Unsupported(r)) if r.contains("transpose")
        ));
        let mut unknown_codec = data.clone();
        unknown_codec[0] = b'q';
        let content = [header(&unknown_codec, b'r', 2, 5), unknown_codec].concat();
        let chunk = read_chunk(&content, 64, 1 << 20).unwrap();
        assert!(matches!(
            decode_simple(&chunk, 100, 100),
            Err(Problem::Unsupported(r)) if r.contains("0x71")
        ));
    }

    #[test]
    fn varints_are_bounded() {
        assert_eq!(varint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(varint(&[0x80]), None, "cut short");
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(varint(&max), Some((u64::MAX, 10)));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(varint(&over), None, "past 64 bits");
        assert_eq!(varint(&[0x80; 12]), None, "longer than 10 bytes");
    }
}
