//! `DecodeGif` (`tf.io.decode_gif`): every frame of a GIF as
//! `[num_frames, height, width, 3]` `uint8`.
//!
//! TensorFlow 2.21 reads the file with giflib (`DGifSlurp`) and composes the
//! frames itself (`gif_io.cc`); this module parses with the `gif` crate
//! (LZW and block structure, de-interlacing) and composes as TensorFlow
//! does:
//! - the output's height and width are the largest frame's, not the
//!   logical screen's;
//! - each frame starts as a copy of the previous output frame (the first
//!   as black where it is not covered), and a frame is drawn at its offset,
//!   clipped to the output; disposal methods are ignored;
//! - a pixel with the frame's transparent index keeps the previous frame's
//!   colour (black in the first frame); any other index must lie inside the
//!   frame's colour map (the local one, else the global one).
//!
//! Errors carry TensorFlow's text (giflib's error strings). Where giflib
//! stops reading after some complete frames (a missing trailer, an unknown
//! block between frames), TensorFlow keeps those frames, and so does this
//! module. A frame cut off inside its pixel data is an error here, where
//! TensorFlow logs giflib's error and returns that frame with the
//! uninitialised memory giflib left in its unread pixels. JPEG, PNG, WebP
//! and JPEG XL contents are decoded as TensorFlow's generic decoder
//! decodes them with 3 channels.

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::kernels as engine;

use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

const OP: &str = "DecodeGif";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| Ok(vec![("image", 1)]),
    build,
}];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

fn build(_: &NodeAttrs) -> Result<Compute> {
    Ok(Box::new(|inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let contents = &inputs[0];
        if !contents.shape().is_empty() {
            return Err(invalid(format!(
                "`contents` must be scalar but got shape{}",
                super::strings::shape_string(contents.shape())
            )));
        }
        let data = super::strings::strings(OP, contents, "contents")?[0].clone();
        if data.is_empty() {
            return Err(invalid("Input is empty."));
        }
        if let Some(image) = other_format(contents, &data)? {
            return Ok(vec![image]);
        }
        if !data.starts_with(b"GIF8") {
            return Err(invalid(
                "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.",
            ));
        }
        Ok(vec![decode_gif(&data, true)?])
    }))
}

/// A GIF's frames `[num_frames, height, width, 3]`, or with `expand` false
/// only the first, `[height, width, 3]` (`DecodeImage` with
/// `expand_animations=False`; its size is still the largest frame's).
pub(super) fn decode_gif(data: &[u8], expand: bool) -> Result<Tensor> {
    let mut frames = read_frames(data)
        .map_err(|m| invalid(format!("Invalid GIF data (size {}), {m}", data.len())))?;
    let (width, height) = (
        frames.iter().map(|f| f.width).max().unwrap_or(0),
        frames.iter().map(|f| f.height).max().unwrap_or(0),
    );
    if !expand {
        frames.truncate(1);
    }
    let out = compose(&frames, width, height, data.len())?;
    let (dtype, shape, buffer) = out.into_parts();
    Tensor::new(
        dtype,
        if expand { shape } else { shape[1..].to_vec() },
        buffer,
    )
}

/// What TensorFlow's generic decoder (which `DecodeGif` is, asking for 3
/// channels) does with another format: a JPEG or PNG is decoded as one
/// frame `[1, height, width, 3]`, a WebP as `[frames, height, width, 3]`, a
/// JPEG XL as `[height, width, 3]`, a BMP refused with a pointer to its op.
fn other_format(contents: &Tensor, data: &[u8]) -> Result<Option<Tensor>> {
    let jpeg = data.starts_with(b"\xff\xd8\xff");
    if jpeg || data.starts_with(b"\x89PNG\r\n\x1a\n") {
        let decoded = if jpeg {
            engine::decode_jpeg(contents, 3)
        } else {
            engine::decode_png(contents, 3)
        }
        .map_err(|e| match e {
            Error::InvalidArgument(m) => Error::InvalidArgument(match m.split_once(": ") {
                Some((_, rest)) => format!("{OP}: {rest}"),
                None => format!("{OP}: {m}"),
            }),
            other => other,
        })?;
        let mut shape = vec![1];
        shape.extend_from_slice(decoded.shape());
        let (dtype, _, data) = decoded.into_parts();
        return Ok(Some(Tensor::new(dtype, shape, data)?));
    }
    if data.starts_with(b"BM") {
        return Err(invalid(
            "Trying to decode BMP format using a wrong op. Use `decode_bmp` or \
             `decode_image` instead. Op used: DecodeGif",
        ));
    }
    // WebP and JPEG XL contents are decoded as `DecodeWebP` and `DecodeJxl`
    // decode them with 3 channels (a WebP with alpha, an animation or a grey
    // JPEG XL is then a channel mismatch).
    let other = if data.len() > 12 && data.starts_with(b"RIFF") && &data[8..12] == b"WEBP" {
        super::image_webp::decode_webp(data, 3)
    } else if super::image_jxl::is_jxl(data) {
        super::image_jxl::decode_jxl(data, 3)
    } else {
        return Ok(None);
    };
    other.map(Some).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(match m.split_once(": ") {
            Some((_, rest)) => format!("{OP}: {rest}"),
            None => format!("{OP}: {m}"),
        }),
        other => other,
    })
}

/// One frame as giflib saves it: where it goes, its colours and its
/// colour indices (de-interlaced, row-major, `width * height`).
struct Frame {
    left: usize,
    top: usize,
    width: usize,
    height: usize,
    palette: Vec<u8>,
    transparent: Option<u8>,
    indices: Vec<u8>,
}

// giflib's error strings (`GifErrorString`).
const NO_SCREEN_DESCRIPTOR: &str = "No screen descriptor detected";
const READ_FAILED: &str = "Failed to read from given file";
const WRONG_RECORD: &str = "Wrong record type detected";
const EOF_TOO_SOON: &str = "Image EOF detected before image complete";
/// `DGifSlurp` meeting the trailer before any image.
const NO_IMAGE: &str = "failed to slurp gif file: No Image Descriptor detected";

/// The giflib error a `gif` crate error stands for.
fn giflib_error(e: &gif::DecodingError) -> &'static str {
    match e {
        gif::DecodingError::Io(_) => READ_FAILED,
        gif::DecodingError::Format(_) => {
            let text = e.to_string();
            if text.contains("unknown block") {
                WRONG_RECORD
            } else if text.contains("truncated") {
                EOF_TOO_SOON
            } else {
                "Image is defective, decoding aborted"
            }
        }
    }
}

/// `DGifOpen` and `DGifSlurp`, as far as TensorFlow looks at them: the
/// frames, or TensorFlow's message after "Invalid GIF data (size N), ".
fn read_frames(data: &[u8]) -> std::result::Result<Vec<Frame>, String> {
    // giflib checks only "GIF"; the `gif` crate wants a known version, which
    // changes nothing else it reads.
    let mut patched = data.to_vec();
    if patched.len() >= 6 {
        patched[3..6].copy_from_slice(b"89a");
    }
    let mut options = gif::DecodeOptions::new();
    options.set_color_output(gif::ColorOutput::Indexed);
    // Frames larger than the screen are TensorFlow's business (below).
    options.check_frame_consistency(false);
    // TensorFlow has no limit of its own but the output's; every frame's
    // indices are counted against it below.
    options.set_memory_limit(gif::MemoryLimit::Unlimited);
    // `DGifOpen` reads the signature, the screen descriptor and the global
    // colour table; a file cut short there is its error. (The `gif` crate
    // reads on to the first record, which is `DGifSlurp`'s business.)
    let global_table = match data.get(10) {
        Some(&flags) if flags & 0x80 != 0 => 3 << ((flags & 7) + 1),
        _ => 0,
    };
    if data.len() < 13 + global_table {
        return Err(format!("failed to open gif file: {NO_SCREEN_DESCRIPTOR}"));
    }
    let mut decoder = options.read_info(&patched[..]).map_err(|e| {
        // The `gif` crate reads a trailer right after the header as an
        // early end of file.
        if e.to_string().contains("does not contain any image")
            || data.get(13 + global_table) == Some(&0x3b)
        {
            NO_IMAGE.to_string()
        } else {
            format!("failed to slurp gif file: {}", giflib_error(&e))
        }
    })?;
    let global = decoder.global_palette().map(<[u8]>::to_vec);
    let mut frames: Vec<Frame> = Vec::new();
    let mut decoded_bytes = 0u64;
    // Each pass consumes at least a block of the input (bounded by it).
    loop {
        let info = match decoder.next_frame_info() {
            Ok(Some(info)) => info,
            Ok(None) => break,
            Err(e) => {
                if e.to_string().contains("no color table") {
                    return Err(format!("missing color map for frame {}", frames.len()));
                }
                // Between frames: giflib's error; TensorFlow only logs it
                // when it already has complete frames.
                if frames.is_empty() {
                    return Err(format!("failed to slurp gif file: {}", giflib_error(&e)));
                }
                break;
            }
        };
        let (width, height) = (usize::from(info.width), usize::from(info.height));
        if width == 0 || height == 0 {
            // DGifSlurp refuses the frame without setting an error code.
            return Err("failed to slurp gif file: Unknown error".into());
        }
        let palette = info
            .palette
            .clone()
            .or_else(|| global.clone())
            .unwrap_or_default();
        let (left, top, transparent) = (
            usize::from(info.left),
            usize::from(info.top),
            info.transparent,
        );
        decoded_bytes += (width * height) as u64;
        check_size(OP, DType::UInt8, decoded_bytes * 3).map_err(|e| e.to_string())?;
        let mut indices = vec![0u8; width * height];
        decoder
            .read_into_buffer(&mut indices)
            .map_err(|e| format!("failed to slurp gif file: {}", giflib_error(&e)))?;
        frames.push(Frame {
            left,
            top,
            width,
            height,
            palette,
            transparent,
            indices,
        });
    }
    if frames.is_empty() {
        return Err(NO_IMAGE.into());
    }
    Ok(frames)
}

/// TensorFlow's composition of the saved frames (`gif::Decode`).
fn compose(frames: &[Frame], width: usize, height: usize, size: usize) -> Result<Tensor> {
    let frame_bytes = width * height * 3;
    check_size(OP, DType::UInt8, (frame_bytes * frames.len()) as u64)?;
    let mut out = vec![0u8; frame_bytes * frames.len()];
    for (k, frame) in frames.iter().enumerate() {
        if k > 0 {
            let (done, rest) = out.split_at_mut(k * frame_bytes);
            rest[..frame_bytes].copy_from_slice(&done[(k - 1) * frame_bytes..]);
        }
        // The first frame's uncovered pixels stay black (the zeroed buffer).
        let canvas = &mut out[k * frame_bytes..(k + 1) * frame_bytes];
        let colours = frame.palette.len() / 3;
        let right = (frame.left + frame.width).min(width);
        let bottom = (frame.top + frame.height).min(height);
        for y in frame.top..bottom {
            let row = &frame.indices[(y - frame.top) * frame.width..];
            for x in frame.left..right {
                let index = row[x - frame.left];
                let at = (y * width + x) * 3;
                if Some(index) == frame.transparent {
                    // The previous frame's colour; black in the first.
                    if k == 0 {
                        canvas[at..at + 3].fill(0);
                    }
                    continue;
                }
                if usize::from(index) >= colours {
                    return Err(invalid(format!(
                        "Invalid GIF data (size {size}), found color index {index} outside of \
                         color map range {colours}"
                    )));
                }
                let c = usize::from(index) * 3;
                canvas[at..at + 3].copy_from_slice(&frame.palette[c..c + 3]);
            }
        }
    }
    Tensor::from_slice(
        &out,
        vec![frames.len() as i64, height as i64, width as i64, 3],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(data: Vec<u8>) -> Result<Vec<Tensor>> {
        let node = tfdata_proto::tensorflow::NodeDef::default();
        let kernel = build(&NodeAttrs::of(&node)).unwrap();
        kernel(vec![Tensor::scalar_string(data)])
    }

    /// A two-frame GIF (global palette, 2x2 frames, LZW code size 2): the
    /// pixels, then the file cut at every byte and with every byte
    /// flipped: errors or frames, never a panic.
    #[test]
    fn decodes_and_survives_hostile_bytes() {
        let mut file = b"GIF89a\x02\x00\x02\x00\x80\x00\x00".to_vec();
        file.extend_from_slice(&[255, 0, 0, 0, 0, 255]);
        for _ in 0..2 {
            // Image descriptor, then LZW with 3-bit codes: clear 0 1 clear
            // 1 0 end (clearing before the code size would grow).
            file.extend_from_slice(b"\x2c\x00\x00\x00\x00\x02\x00\x02\x00\x00");
            file.extend_from_slice(&[2, 3, 0x44, 0x18, 0x14, 0]);
        }
        file.push(0x3b);
        let out = run(file.clone()).unwrap();
        assert_eq!(out[0].shape(), &[2, 2, 2, 3]);
        for cut in 0..file.len() {
            let _ = run(file[..cut].to_vec());
        }
        for at in 0..file.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = file.clone();
                bad[at] ^= flip;
                let _ = run(bad);
            }
        }
    }
}
