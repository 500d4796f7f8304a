//! `DecodeJxl` (`tf.image.decode_jxl`): a JPEG XL file's first frame as
//! `[height, width, channels]` `uint8`.
//!
//! TensorFlow 2.21 decodes with libjxl (`jxl_io.cc`): the basic info gives
//! the size and the channels (colour channels, plus one with alpha), the
//! first full frame is rendered as 8-bit samples. This module decodes with
//! `jxl-oxide` (a pure-Rust decoder, conformant to the JPEG XL spec) and
//! converts its samples to 8 bits the way libjxl does (`v * 255 + 0.5`,
//! clamped). Lossless (modular) images are bit-identical; lossy (VarDCT)
//! images are rendered by two floating-point pipelines (libjxl uses fast
//! approximations of the colour transfer functions) and differ by a level
//! in about a fifth of their samples (the differential cases compare them
//! within 1, as float32). The op itself
//! (attributes, other formats) is [`super::image_formats`].

use std::io::Cursor;

use jxl_oxide::{InitializeResult, JxlImage};
use tfdata_core::{DType, Error, Result, Tensor};

use super::check_size;

const OP: &str = "DecodeJxl";

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// libjxl's `JxlSignatureCheck`: a bare codestream or the ISO BMFF
/// container.
pub(super) fn is_jxl(data: &[u8]) -> bool {
    data.starts_with(&[0xff, 0x0a]) || data.starts_with(b"\x00\x00\x00\x0cJXL \x0d\x0a\x87\x0a")
}

/// A JPEG XL file as TensorFlow's `DecodeJxl` decodes it: `[height, width,
/// channels]`.
pub(super) fn decode_jxl(data: &[u8], channels: usize) -> Result<Tensor> {
    // A decoder bug must not take a worker down: a panic is corrupt data.
    std::panic::catch_unwind(|| decode(data, channels))
        .unwrap_or_else(|_| Err(invalid("Failed to decode JXL image")))
}

/// Whether the image header (libjxl's basic info) can be read.
fn header_readable(data: &[u8]) -> bool {
    let mut uninit = JxlImage::builder().build_uninit();
    uninit.feed_bytes(data).is_ok()
        && matches!(uninit.try_init(), Ok(InitializeResult::Initialized(_)))
}

fn decode(data: &[u8], channels: usize) -> Result<Tensor> {
    let image = JxlImage::builder().read(Cursor::new(data)).map_err(|_| {
        // libjxl's two stages: the basic info (its header error), then
        // the frames (its image error).
        if header_readable(data) {
            invalid("Failed to decode JXL image")
        } else {
            invalid("Failed to decode JXL header")
        }
    })?;
    let header = image.image_header();
    let color = if header.metadata.grayscale() { 1 } else { 3 };
    let has_alpha = header.metadata.alpha().is_some();
    let file_channels = color + usize::from(has_alpha);
    if channels != 0 && channels != file_channels {
        return Err(invalid("Number of channels requested does not match input"));
    }
    let (width, height) = (image.width() as usize, image.height() as usize);
    check_size(OP, DType::UInt8, (width * height * file_channels) as u64)?;
    let render = image
        .render_frame(0)
        .map_err(|_| invalid("Failed to decode JXL image"))?;
    let mut stream = render.stream();
    let (w, h, c) = (
        stream.width() as usize,
        stream.height() as usize,
        stream.channels() as usize,
    );
    if (w, h, c) != (width, height, file_channels) {
        return Err(invalid("Failed to decode JXL image"));
    }
    let mut pixels = vec![0u8; w * h * c];
    stream.write_to_buffer(&mut pixels);
    Tensor::from_slice(&pixels, vec![h as i64, w as i64, c as i64])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(data: Vec<u8>) -> Result<Tensor> {
        decode_jxl(&data, 0)
    }

    /// A lossless file cut at every byte and with bytes flipped: errors,
    /// never a panic.
    #[test]
    fn hostile_bytes_are_errors_not_panics() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../interop/differential/families/jxl/lossless_rgba.jxl"
        );
        let file = std::fs::read(path).unwrap();
        assert_eq!(run(file.clone()).unwrap().shape(), &[21, 27, 4]);
        for cut in 0..file.len() {
            assert!(run(file[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        for at in 2..file.len() {
            let mut bad = file.clone();
            bad[at] ^= 0x5a;
            let _ = run(bad);
        }
    }
}
