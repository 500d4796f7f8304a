//! `EncodePng` (`tf.io.encode_png`): images `[..., height, width,
//! channels]` of `uint8` or `uint16` to PNG files, one per image.
//!
//! TensorFlow 2.21 writes through libpng (`png_io.cc`'s
//! `WriteImageToBuffer`): an 8- or 16-bit gray, gray+alpha, RGB or RGBA
//! image, no interlacing, no ancillary chunks, libpng's default row filter
//! choice (every filter tried, the one with the smallest sum of absolute
//! signed bytes kept) and zlib at the op's `compression` level (-1 is
//! zlib's default, 6). This module writes the same chunks with the same
//! filters; the deflate stream is `flate2`'s (miniz_oxide) at the same
//! level, which is not zlib's bit for bit (zlib's match finder, its
//! `memLevel=9` hash and libpng's window-size trimming are not
//! reproduced). So the files differ from TensorFlow's in their IDAT bytes
//! and decode to the same pixels: the differential cases compare the
//! decoded images (`docs/compatibility.md` says so).

use std::io::Write;

use flate2::Compression;
use flate2::write::ZlibEncoder;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

const OP: &str = "EncodePng";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| Ok(vec![("contents", 1)]),
    build,
}];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// libpng's default limit on either dimension (`PNG_USER_WIDTH_MAX`,
/// `PNG_USER_HEIGHT_MAX`): larger images fail to encode.
const LIBPNG_MAX_DIMENSION: usize = 1_000_000;

/// libpng's IDAT chunk size (`PNG_ZBUF_SIZE`).
const IDAT_SIZE: usize = 8192;

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let compression = attrs.int_or("compression", -1)?;
    if !(-1..=9).contains(&compression) {
        return Err(invalid(format!(
            "compression should be in [-1,9], got {compression}"
        )));
    }
    // zlib's Z_DEFAULT_COMPRESSION is level 6.
    let level = if compression < 0 {
        6
    } else {
        compression as u32
    };
    if attrs.has("T") {
        let dtype = attrs.dtype("T")?;
        if !matches!(dtype, DType::UInt8 | DType::UInt16) {
            return Err(invalid(format!(
                "image must have type uint8 or uint16, got {dtype}"
            )));
        }
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        encode(&inputs[0], level)
    }))
}

fn encode(image: &Tensor, level: u32) -> Result<Vec<Tensor>> {
    let depth = match image.dtype() {
        DType::UInt8 => 1,
        DType::UInt16 => 2,
        other => {
            return Err(invalid(format!(
                "image must have type uint8 or uint16, got {other}"
            )));
        }
    };
    let shape = image.shape();
    if shape.len() < 3 {
        return Err(invalid(format!(
            "images must be at least rank 3{}",
            shape_string(shape)
        )));
    }
    if image.num_elements() >= i32::MAX as u64 {
        return Err(invalid("image cannot have >= int32 max elements"));
    }
    let batch_dims = shape.len() - 3;
    let [height, width, channels] = [
        shape[batch_dims] as usize,
        shape[batch_dims + 1] as usize,
        shape[batch_dims + 2] as usize,
    ];
    if width * channels >= (i32::MAX / 2) as usize {
        return Err(invalid("image too wide to encode"));
    }
    if !(1..=4).contains(&channels) {
        return Err(invalid(format!(
            "image must have 1, 2, 3, or 4 channels, got {channels}"
        )));
    }
    let batches: usize = shape[..batch_dims].iter().map(|&d| d as usize).product();
    let TensorData::Buffer(data) = image.data() else {
        return Err(invalid("image must have type uint8 or uint16"));
    };
    // A compressed image is at most a little larger than its pixels.
    check_size(OP, DType::UInt8, data.len() as u64 + 1024 * batches as u64)?;
    let image_bytes = height * width * channels * depth;
    let mut failed = Vec::new();
    let mut files = Vec::with_capacity(batches);
    for b in 0..batches {
        let pixels = &data[b * image_bytes..(b + 1) * image_bytes];
        match write_png(pixels, width, height, channels, depth, level) {
            Some(file) => files.push(bytes::Bytes::from(file)),
            None => {
                failed.push(b.to_string());
                files.push(bytes::Bytes::new());
            }
        }
    }
    if !failed.is_empty() {
        return Err(Error::Internal(format!(
            "{OP}: PNG encoding failed at the following flattened batch indices: {}",
            failed.join(", ")
        )));
    }
    Ok(vec![Tensor::strings(files, shape[..batch_dims].to_vec())?])
}

/// One PNG file, or `None` where libpng refuses the header (a zero or too
/// large dimension).
fn write_png(
    pixels: &[u8],
    width: usize,
    height: usize,
    channels: usize,
    depth: usize,
    level: u32,
) -> Option<Vec<u8>> {
    if width == 0 || height == 0 || width > LIBPNG_MAX_DIMENSION || height > LIBPNG_MAX_DIMENSION {
        return None;
    }
    let color_type: u8 = match channels {
        1 => 0, // gray
        2 => 4, // gray + alpha
        3 => 2, // RGB
        _ => 6, // RGBA
    };
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&(width as u32).to_be_bytes());
    header.extend_from_slice(&(height as u32).to_be_bytes());
    header.extend_from_slice(&[(depth * 8) as u8, color_type, 0, 0, 0]);

    let row_bytes = width * channels * depth;
    let bpp = channels * depth;
    let mut zlib = ZlibEncoder::new(Vec::new(), Compression::new(level));
    let mut previous = vec![0u8; row_bytes];
    let mut row = vec![0u8; row_bytes];
    let mut filtered = Filtered::new(row_bytes);
    for y in 0..height {
        let source = &pixels[y * row_bytes..(y + 1) * row_bytes];
        if depth == 2 {
            // Samples are native (little-endian) uint16; PNG's are
            // big-endian (TensorFlow has libpng swap them).
            for (out, pair) in row.chunks_exact_mut(2).zip(source.chunks_exact(2)) {
                out[0] = pair[1];
                out[1] = pair[0];
            }
        } else {
            row.copy_from_slice(source);
        }
        let chosen = filtered.best(&row, &previous, bpp);
        zlib.write_all(chosen).ok()?;
        std::mem::swap(&mut row, &mut previous);
    }
    let stream = zlib.finish().ok()?;

    let mut file = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut file, b"IHDR", &header);
    for part in stream.chunks(IDAT_SIZE) {
        chunk(&mut file, b"IDAT", part);
    }
    chunk(&mut file, b"IEND", &[]);
    Some(file)
}

fn chunk(file: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    file.extend_from_slice(&(data.len() as u32).to_be_bytes());
    file.extend_from_slice(kind);
    file.extend_from_slice(data);
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    file.extend_from_slice(&crc.sum().to_be_bytes());
}

/// The five filtered versions of a row, each with its filter-type byte
/// first, and libpng's choice among them.
struct Filtered {
    rows: [Vec<u8>; 5],
}

impl Filtered {
    fn new(row_bytes: usize) -> Self {
        Filtered {
            rows: std::array::from_fn(|f| {
                let mut r = vec![0u8; row_bytes + 1];
                r[0] = f as u8;
                r
            }),
        }
    }

    /// libpng's heuristic (`png_write_find_filter`): the filter whose bytes,
    /// read as signed, have the smallest sum of magnitudes; on a tie the
    /// earlier filter (None, Sub, Up, Average, Paeth).
    fn best(&mut self, row: &[u8], previous: &[u8], bpp: usize) -> &[u8] {
        for (i, &x) in row.iter().enumerate() {
            let a = if i >= bpp { row[i - bpp] } else { 0 };
            let b = previous[i];
            let c = if i >= bpp { previous[i - bpp] } else { 0 };
            self.rows[0][i + 1] = x;
            self.rows[1][i + 1] = x.wrapping_sub(a);
            self.rows[2][i + 1] = x.wrapping_sub(b);
            self.rows[3][i + 1] = x.wrapping_sub(((u16::from(a) + u16::from(b)) / 2) as u8);
            self.rows[4][i + 1] = x.wrapping_sub(paeth(a, b, c));
        }
        let cost = |r: &Vec<u8>| -> u64 {
            r[1..]
                .iter()
                .map(|&v| u64::from(if v < 128 { v } else { 0u8.wrapping_sub(v) }))
                .sum()
        };
        let mut best = 0;
        let mut best_cost = cost(&self.rows[0]);
        for f in 1..5 {
            let c = cost(&self.rows[f]);
            if c < best_cost {
                best = f;
                best_cost = c;
            }
        }
        &self.rows[best]
    }
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(file: &[u8]) -> (png::OutputInfo, Vec<u8>) {
        let mut reader = png::Decoder::new(file).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        (info, buf)
    }

    #[test]
    fn round_trips_every_layout_and_depth() {
        for channels in 1..=4usize {
            let pixels: Vec<u8> = (0..5 * 7 * channels)
                .map(|i| (i * 37 % 251) as u8)
                .collect();
            let file = write_png(&pixels, 7, 5, channels, 1, 6).unwrap();
            let (info, buf) = decode(&file);
            assert_eq!((info.width, info.height), (7, 5));
            assert_eq!(buf, pixels);
            let wide: Vec<u16> = (0..5 * 7 * channels)
                .map(|i| (i * 4099 % 65521) as u16)
                .collect();
            let le: Vec<u8> = wide.iter().flat_map(|v| v.to_le_bytes()).collect();
            let file = write_png(&le, 7, 5, channels, 2, 9).unwrap();
            let (_, buf) = decode(&file);
            let be: Vec<u8> = wide.iter().flat_map(|v| v.to_be_bytes()).collect();
            assert_eq!(buf, be);
        }
        assert!(write_png(&[], 0, 3, 1, 1, 6).is_none());
    }
}
