//! TFRecord framing: `u64 length` · `u32 masked_crc32c(length)` · data ·
//! `u32 masked_crc32c(data)`, little-endian (spec §6.3): the one writer
//! ([`write_record`]) and the one reader of it. Used for stored datasets, the
//! dispatcher journal, `TFRecordDataset` files and distributed-snapshot
//! chunks.
//!
//! The reader works on any byte stream, one step at a time
//! ([`read_header`], [`read_data`], [`check_data`], or [`read_record`] for
//! all three) so that callers keep only their own concerns: decompression,
//! buffering, a copy-free path for large records, where an offset is and
//! how their errors are worded. Every way a record can be damaged is a
//! [`FrameError`], never a panic: a stream that ends inside a record, a
//! length or data that fails its CRC, a length over the caller's bound.
//! Nothing is allocated for a length before its bytes arrive.
//!
//! [`read_records`] reads a whole buffer with the same reader and tells a
//! torn tail (a crash mid-write) apart from corruption, naming the offset of
//! either.

use std::io::{self, Read, Write};

use bytes::Bytes;

use crate::{Error, Result};

const MASK_DELTA: u32 = 0xa282_ead8;

/// Bytes of a record header: the length and its CRC.
pub const HEADER_LEN: usize = 12;

/// Bytes of a record's trailer: the data's CRC.
pub const DATA_CRC_LEN: usize = 4;

/// The largest buffer reserved up front for a record's data. A length that
/// passes its CRC is almost surely real, but reserving a huge one before any
/// data arrives would turn a crafted file into an allocation failure; the
/// buffer grows as data actually arrives instead.
const MAX_INITIAL_RESERVE: u64 = 1 << 20;

pub fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Writes one record.
pub fn write_record(out: &mut impl Write, data: &[u8]) -> io::Result<()> {
    let len = (data.len() as u64).to_le_bytes();
    out.write_all(&len)?;
    out.write_all(&masked_crc32c(&len).to_le_bytes())?;
    out.write_all(data)?;
    out.write_all(&masked_crc32c(data).to_le_bytes())
}

/// The bytes a record with `data_len` bytes of data takes in the stream.
pub fn framed_len(data_len: u64) -> u64 {
    HEADER_LEN as u64 + data_len + DATA_CRC_LEN as u64
}

/// Reads into `buf` until it is full or the input ends; returns how many
/// bytes were read. Unlike `read_exact`, a short read is not an error, so
/// callers can tell a clean end (0) from a truncation, and a decompressor's
/// own `UnexpectedEof` stays distinguishable.
pub fn read_full<R: Read + ?Sized>(input: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The part of a record the input ended inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Data,
    DataCrc,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Part::Header => "the header",
            Part::Data => "its data",
            Part::DataCrc => "the data CRC",
        })
    }
}

/// Why one record could not be read. Callers turn it into their error with
/// the record's location ([`FrameError::reason`] words the damage).
#[derive(Debug)]
pub enum FrameError {
    /// Reading the input failed (an I/O error, or a decompressor's
    /// complaint, which the caller may call corruption).
    Read(io::Error),
    /// The input ended inside the record.
    Truncated(Part),
    /// The length does not match its CRC.
    LengthCrc,
    /// The length passed its CRC but is over the caller's bound.
    TooLong { len: u64, max: u64 },
    /// The `len` data bytes do not match their CRC.
    DataCrc { len: u64 },
}

impl FrameError {
    /// What is wrong with the record starting at `offset`. TensorFlow's word
    /// for a cut record, `truncated record at offset N`, is kept: readers
    /// of TensorFlow's messages look for it.
    pub fn reason(&self, offset: u64) -> String {
        match self {
            FrameError::Read(e) => format!("reading the record at offset {offset} failed: {e}"),
            FrameError::Truncated(part) => {
                format!("truncated record at offset {offset}: the file ends inside {part}")
            }
            FrameError::LengthCrc => "the record's length fails its CRC".into(),
            FrameError::TooLong { len, max } => {
                format!("the record claims {len} bytes, more than the most accepted ({max})")
            }
            FrameError::DataCrc { len } => format!("the record's {len} data bytes fail their CRC"),
        }
    }
}

fn read_error(e: io::Error) -> FrameError {
    FrameError::Read(e)
}

/// Reads a record's header and checks the length against its CRC and
/// against `max_len`: the data's length, or `None` at a clean end of input
/// (no byte of a next record).
pub fn read_header<R: Read + ?Sized>(
    input: &mut R,
    max_len: u64,
) -> Result<Option<u64>, FrameError> {
    let mut header = [0u8; HEADER_LEN];
    let got = read_full(input, &mut header).map_err(read_error)?;
    if got == 0 {
        return Ok(None);
    }
    if got < HEADER_LEN {
        return Err(FrameError::Truncated(Part::Header));
    }
    let [l0, l1, l2, l3, l4, l5, l6, l7, c0, c1, c2, c3] = header;
    let len_bytes = [l0, l1, l2, l3, l4, l5, l6, l7];
    if masked_crc32c(&len_bytes) != u32::from_le_bytes([c0, c1, c2, c3]) {
        return Err(FrameError::LengthCrc);
    }
    let len = u64::from_le_bytes(len_bytes);
    if len > max_len {
        return Err(FrameError::TooLong { len, max: max_len });
    }
    Ok(Some(len))
}

/// Reads a record's `len` data bytes (its CRC is checked by
/// [`check_data`]). At most [`MAX_INITIAL_RESERVE`] is reserved up front;
/// the buffer grows with the bytes that actually arrive.
pub fn read_data<R: Read + ?Sized>(input: &mut R, len: u64) -> Result<Bytes, FrameError> {
    let mut data = Vec::with_capacity(len.min(MAX_INITIAL_RESERVE) as usize);
    let got = input.take(len).read_to_end(&mut data).map_err(read_error)? as u64;
    if got < len {
        return Err(FrameError::Truncated(Part::Data));
    }
    Ok(Bytes::from(data))
}

/// Reads the CRC that follows a record's data and checks `data` against it.
pub fn check_data<R: Read + ?Sized>(input: &mut R, data: &[u8]) -> Result<(), FrameError> {
    let mut crc = [0u8; DATA_CRC_LEN];
    let got = read_full(input, &mut crc).map_err(read_error)?;
    if got < crc.len() {
        return Err(FrameError::Truncated(Part::DataCrc));
    }
    if masked_crc32c(data) != u32::from_le_bytes(crc) {
        return Err(FrameError::DataCrc {
            len: data.len() as u64,
        });
    }
    Ok(())
}

/// Reads one whole record, both CRCs checked and its length at most
/// `max_len`; `None` at a clean end of input.
pub fn read_record<R: Read + ?Sized>(
    input: &mut R,
    max_len: u64,
) -> Result<Option<Bytes>, FrameError> {
    let Some(len) = read_header(input, max_len)? else {
        return Ok(None);
    };
    let data = read_data(input, len)?;
    check_data(input, &data)?;
    Ok(Some(data))
}

/// What a read found after the last good record.
#[derive(Debug, PartialEq, Eq)]
pub enum Tail {
    /// The input ended exactly after a record.
    Clean,
    /// The input ended inside a record starting at this offset.
    Torn { offset: u64 },
}

/// Reads all records of a byte buffer. Corruption inside the data is an
/// error naming `name` and the record's offset; a record cut short by the end
/// of input is reported as a [`Tail::Torn`].
pub fn read_records(name: &str, bytes: &[u8]) -> Result<(Vec<Bytes>, Tail)> {
    let mut input = bytes;
    let mut records = Vec::new();
    loop {
        let offset = (bytes.len() - input.len()) as u64;
        // No bound beyond the buffer: a longer length is a torn tail.
        match read_record(&mut input, u64::MAX) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => return Ok((records, Tail::Clean)),
            Err(FrameError::Truncated(_)) => return Ok((records, Tail::Torn { offset })),
            Err(e) => {
                return Err(Error::DataLoss {
                    location: format!("{name} at offset {offset}"),
                    reason: e.reason(offset),
                });
            }
        }
    }
}

/// Reads a whole TFRecord file; a torn tail is corruption here (only the
/// journal tolerates one, and it handles [`Tail`] itself).
pub fn read_file(path: &std::path::Path) -> Result<Vec<Bytes>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let name = path.display().to_string();
    match read_records(&name, &bytes)? {
        (records, Tail::Clean) => Ok(records),
        (_, Tail::Torn { offset }) => Err(Error::DataLoss {
            location: format!("{name} at offset {offset}"),
            reason: "record truncated".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_crc_values() {
        // CRC-32C of "123456789" is 0xe3069283 (the standard check value).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let crc: u32 = 0xe306_9283;
        assert_eq!(
            masked_crc32c(b"123456789"),
            crc.rotate_right(15).wrapping_add(MASK_DELTA)
        );
    }

    #[test]
    fn round_trip_torn_tail_and_corruption() {
        let mut buf = Vec::new();
        for r in [&b"first"[..], b"", b"third record"] {
            write_record(&mut buf, r).unwrap();
        }
        let (records, tail) = read_records("f", &buf).unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!(&records[2][..], b"third record");
        assert_eq!(tail, Tail::Clean);

        let (records, tail) = read_records("f", &buf[..buf.len() - 3]).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(
            tail,
            Tail::Torn {
                offset: 12 + 5 + 4 + 12 + 4
            }
        );

        let mut flipped = buf.clone();
        flipped[14] ^= 1; // inside the first record's data
        let err = read_records("f", &flipped).unwrap_err().to_string();
        assert!(err.contains("f at offset 0"), "{err}");
    }

    /// Every damage the stream reader meets is its own error, located by
    /// part, and nothing is allocated for a length before its bytes arrive.
    #[test]
    fn stream_reader_names_each_damage() {
        let mut one = Vec::new();
        write_record(&mut one, b"hello").unwrap();
        let read = |bytes: &[u8], max: u64| read_record(&mut &bytes[..], max);
        assert_eq!(&read(&one, 5).unwrap().unwrap()[..], b"hello");
        assert!(read(&[], 5).unwrap().is_none());
        for (cut, part) in [
            (1, Part::Header),
            (11, Part::Header),
            (12, Part::Data),
            (16, Part::Data),
            (17, Part::DataCrc),
            (20, Part::DataCrc),
        ] {
            match read(&one[..cut], u64::MAX) {
                Err(FrameError::Truncated(p)) => assert_eq!(p, part, "cut at {cut}"),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        assert!(matches!(
            read(&one, 4),
            Err(FrameError::TooLong { len: 5, max: 4 })
        ));
        let mut bad = one.clone();
        bad[9] ^= 1;
        assert!(matches!(read(&bad, u64::MAX), Err(FrameError::LengthCrc)));
        let mut bad = one.clone();
        bad[13] ^= 1;
        let err = read(&bad, u64::MAX).unwrap_err();
        assert!(matches!(err, FrameError::DataCrc { len: 5 }), "{err:?}");
        assert_eq!(err.reason(7), "the record's 5 data bytes fail their CRC");
        assert_eq!(
            FrameError::Truncated(Part::Data).reason(7),
            "truncated record at offset 7: the file ends inside its data"
        );

        // A valid header claiming 2^62 bytes over 5 real ones: truncated,
        // with no 2^62-byte allocation tried.
        let len = (1u64 << 62).to_le_bytes();
        let mut huge = len.to_vec();
        huge.extend(masked_crc32c(&len).to_le_bytes());
        huge.extend(b"short");
        assert!(matches!(
            read(&huge, u64::MAX),
            Err(FrameError::Truncated(Part::Data))
        ));
        assert_eq!(framed_len(5), one.len() as u64);
    }
}
