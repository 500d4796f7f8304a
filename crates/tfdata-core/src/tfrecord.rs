//! TFRecord framing: `u64 length` · `u32 masked_crc32c(length)` · data ·
//! `u32 masked_crc32c(data)`, little-endian (spec §6.3). Used for stored
//! datasets and the dispatcher journal; the reader tells a torn tail (a crash
//! mid-write) apart from corruption and names the offset of either.

use std::io::{self, Read, Write};

use crate::{Error, Result};

const MASK_DELTA: u32 = 0xa282_ead8;

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
pub fn read_records(name: &str, bytes: &[u8]) -> Result<(Vec<bytes::Bytes>, Tail)> {
    let buf = bytes::Bytes::copy_from_slice(bytes);
    let mut records = Vec::new();
    let mut pos = 0usize;
    let corrupt = |offset: usize, reason: &str| Error::DataLoss {
        location: format!("{name} at offset {offset}"),
        reason: reason.to_string(),
    };
    while pos < buf.len() {
        let start = pos;
        if buf.len() - pos < 12 {
            return Ok((
                records,
                Tail::Torn {
                    offset: start as u64,
                },
            ));
        }
        let len_bytes = &buf[pos..pos + 8];
        let len_crc = u32::from_le_bytes(buf[pos + 8..pos + 12].try_into().expect("4 bytes"));
        if masked_crc32c(len_bytes) != len_crc {
            return Err(corrupt(start, "record length fails its CRC"));
        }
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        pos += 12;
        let remaining = (buf.len() - pos) as u64;
        if len.saturating_add(4) > remaining {
            return Ok((
                records,
                Tail::Torn {
                    offset: start as u64,
                },
            ));
        }
        let len = len as usize;
        let data = buf.slice(pos..pos + len);
        let data_crc =
            u32::from_le_bytes(buf[pos + len..pos + len + 4].try_into().expect("4 bytes"));
        if masked_crc32c(&data) != data_crc {
            return Err(corrupt(start, "record data fails its CRC"));
        }
        records.push(data);
        pos += len + 4;
    }
    Ok((records, Tail::Clean))
}

/// Reads a whole TFRecord file; a torn tail is corruption here (only the
/// journal tolerates one, and it handles [`Tail`] itself).
pub fn read_file(path: &std::path::Path) -> Result<Vec<bytes::Bytes>> {
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
}
