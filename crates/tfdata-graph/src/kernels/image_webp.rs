//! `DecodeWebP` (`tf.image.decode_webp`): a WebP file as `[num_frames,
//! height, width, channels]` `uint8`.
//!
//! TensorFlow 2.21 decodes with libwebp (`webp_io.cc`): a still image with
//! `WebPDecodeRGB(A)Into` (3 channels, 4 when the file has alpha), an
//! animation with `WebPAnimDecoder` (always RGBA, frames composed on a
//! transparent canvas). Frames are decoded here by the `image-webp` crate
//! (lossless VP8L, lossy VP8 with libwebp's "fancy" chroma upsampling,
//! the ALPH alpha plane). Animations are composed by this module as
//! libwebp's animation decoder composes them — key frames, disposal to
//! transparent, and its integer alpha blending — rather than by
//! `image-webp`'s own compositor, whose blending rounds differently.
//!
//! The op itself (attributes, other formats) is [`super::image_formats`].

use std::io::Cursor;

use image_webp::WebPDecoder;
use tfdata_core::{DType, Error, Result, Tensor};

use super::check_size;

const OP: &str = "DecodeWebP";

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// A RIFF/WEBP file as TensorFlow's `DecodeWebP` decodes it: `[frames,
/// height, width, channels]`.
pub(super) fn decode_webp(data: &[u8], channels: usize) -> Result<Tensor> {
    decode_webp_frames(data, channels, true)
}

/// [`decode_webp`], or with `expand` false only the first frame,
/// `[height, width, channels]` (`DecodeImage` with
/// `expand_animations=False`).
pub(super) fn decode_webp_frames(data: &[u8], channels: usize, expand: bool) -> Result<Tensor> {
    {
        if channels == 1 {
            return Err(invalid("WebP only supports 3 or 4 channels"));
        }
        let features =
            Features::read(data).ok_or_else(|| invalid("Failed to decode WebP header."))?;
        let file_channels = if features.has_alpha { 4 } else { 3 };
        if channels != 0 && channels != file_channels {
            return Err(invalid("Number of channels requested does not match input"));
        }
        if features.animated {
            // libwebp composes animations in RGBA only. (With channels=0
            // TensorFlow 2.21 skips this check and overflows its 3-channel
            // output, aborting the process.)
            if file_channels != 4 {
                return Err(invalid("WebP Animation must be 4 channel RGBA"));
            }
            return decode_animation(data, &features, expand);
        }
        // libwebp decodes a whole file only when the RIFF container and
        // every chunk in it are complete (a cut file is refused, where
        // `image-webp` would decode what is there).
        let complete = u32le(&data[4..8])
            .checked_add(8)
            .map(|end| end as usize)
            .filter(|&end| end <= data.len())
            .and_then(|end| chunks(&data[12..end]))
            .is_some();
        if !complete {
            return Err(invalid("Failed to decode WebP image."));
        }
        let (w, h) = (features.width, features.height);
        check_size(OP, DType::UInt8, (w * h * file_channels) as u64)?;
        let pixels = decode_still(data, file_channels)
            .ok_or_else(|| invalid("Failed to decode WebP image."))?;
        if pixels.len() != w * h * file_channels {
            return Err(invalid("Failed to decode WebP image."));
        }
        let mut shape = vec![1, h as i64, w as i64, file_channels as i64];
        if !expand {
            shape.remove(0);
        }
        Tensor::from_slice(&pixels, shape)
    }
}

/// What `WebPGetFeatures` reads from the first chunk.
struct Features {
    width: usize,
    height: usize,
    has_alpha: bool,
    animated: bool,
}

fn u24(b: &[u8]) -> usize {
    usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16
}

fn u32le(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Features {
    /// The features of a RIFF/WEBP file, or `None` where libwebp cannot
    /// read its header.
    fn read(data: &[u8]) -> Option<Features> {
        let chunk = data.get(12..16)?;
        Features::of_bitstream(chunk, data.get(20..)?, data.get(20..30))
    }

    /// The features of one bitstream chunk (`fourcc`, its payload).
    fn of_bitstream(fourcc: &[u8], payload: &[u8], vp8x: Option<&[u8]>) -> Option<Features> {
        match fourcc {
            b"VP8X" => {
                let h = vp8x?;
                Some(Features {
                    width: 1 + u24(&h[4..7]),
                    height: 1 + u24(&h[7..10]),
                    has_alpha: h[0] & 0x10 != 0,
                    animated: h[0] & 0x02 != 0,
                })
            }
            b"VP8 " => {
                let h = payload.get(..10)?;
                if h[3..6] != [0x9d, 0x01, 0x2a] {
                    return None;
                }
                Some(Features {
                    width: usize::from(u16::from_le_bytes([h[6], h[7]]) & 0x3fff),
                    height: usize::from(u16::from_le_bytes([h[8], h[9]]) & 0x3fff),
                    has_alpha: false,
                    animated: false,
                })
            }
            b"VP8L" => {
                let h = payload.get(..5)?;
                let bits = u32le(&h[1..5]);
                if h[0] != 0x2f || bits >> 29 != 0 {
                    return None;
                }
                Some(Features {
                    width: 1 + (bits & 0x3fff) as usize,
                    height: 1 + ((bits >> 14) & 0x3fff) as usize,
                    has_alpha: (bits >> 28) & 1 != 0,
                    animated: false,
                })
            }
            _ => None,
        }
    }
}

/// A still image (or one frame wrapped as one) as `channels`-channel
/// pixels, libwebp's `WebPDecodeRGB(A)`; `None` when it cannot be decoded.
fn decode_still(data: &[u8], channels: usize) -> Option<Vec<u8>> {
    // `image-webp` is not expected to panic on corrupt input, but a decoder
    // bug must not take a worker down.
    std::panic::catch_unwind(|| {
        let mut decoder = WebPDecoder::new(Cursor::new(data)).ok()?;
        let size = decoder.output_buffer_size()?;
        check_size(OP, DType::UInt8, size as u64).ok()?;
        let mut buf = vec![0u8; size];
        decoder.read_image(&mut buf).ok()?;
        let has = if decoder.has_alpha() { 4 } else { 3 };
        Some(match (has, channels) {
            (4, 3) => buf
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2]])
                .collect(),
            (3, 4) => buf
                .chunks_exact(3)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect(),
            _ => buf,
        })
    })
    .ok()
    .flatten()
}

/// One `ANMF` chunk: where the frame goes, how it is disposed and blended,
/// and its bitstream as a still WebP file of its own.
struct AnimFrame {
    x: usize,
    y: usize,
    width: usize,
    height: usize,
    dispose_to_background: bool,
    blend: bool,
    has_alpha: bool,
    file: Vec<u8>,
}

/// The RIFF chunks after the header: `(fourcc, payload)`.
fn chunks(mut rest: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::new();
    // Each pass consumes at least 8 bytes of the input.
    while rest.len() >= 8 {
        let size = u32le(&rest[4..8]) as usize;
        let payload = rest.get(8..8 + size)?;
        out.push((&rest[..4], payload));
        rest = rest.get(8 + size + (size & 1)..).unwrap_or(&[]);
    }
    Some(out)
}

fn riff(chunks: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut body = b"WEBP".to_vec();
    for (fourcc, payload) in chunks {
        body.extend_from_slice(fourcc);
        body.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        body.extend_from_slice(payload);
        if payload.len() % 2 == 1 {
            body.push(0);
        }
    }
    let mut file = b"RIFF".to_vec();
    file.extend_from_slice(&(body.len() as u32).to_le_bytes());
    file.extend_from_slice(&body);
    file
}

fn anim_frames(data: &[u8], canvas_w: usize, canvas_h: usize) -> Option<Vec<AnimFrame>> {
    let riff_size = u32le(data.get(4..8)?) as usize;
    let body = data.get(12..(8 + riff_size).min(data.len()))?;
    if 8 + riff_size > data.len() {
        return None;
    }
    let mut frames = Vec::new();
    for (fourcc, payload) in chunks(body)? {
        if fourcc != b"ANMF" {
            continue;
        }
        let head = payload.get(..16)?;
        let (x, y) = (2 * u24(&head[0..3]), 2 * u24(&head[3..6]));
        let (width, height) = (1 + u24(&head[6..9]), 1 + u24(&head[9..12]));
        if x + width > canvas_w || y + height > canvas_h {
            return None;
        }
        let flags = head[15];
        let sub = chunks(&payload[16..])?;
        let alph = sub.iter().find(|(f, _)| *f == b"ALPH");
        let (bit_fourcc, bit_payload) =
            *sub.iter().find(|(f, _)| *f == b"VP8 " || *f == b"VP8L")?;
        let bitstream = Features::of_bitstream(bit_fourcc, bit_payload, None)?;
        if bitstream.width != width || bitstream.height != height {
            return None;
        }
        let (file, has_alpha) = match alph {
            Some(&alpha) if bit_fourcc == b"VP8 " => {
                let mut vp8x = [0u8; 10];
                vp8x[0] = 0x10;
                vp8x[4..7].copy_from_slice(&((width - 1) as u32).to_le_bytes()[..3]);
                vp8x[7..10].copy_from_slice(&((height - 1) as u32).to_le_bytes()[..3]);
                (
                    riff(&[(b"VP8X", &vp8x), alpha, (bit_fourcc, bit_payload)]),
                    true,
                )
            }
            _ => (riff(&[(bit_fourcc, bit_payload)]), bitstream.has_alpha),
        };
        frames.push(AnimFrame {
            x,
            y,
            width,
            height,
            dispose_to_background: flags & 1 != 0,
            blend: flags & 2 == 0,
            has_alpha,
            file,
        });
    }
    if frames.is_empty() {
        None
    } else {
        Some(frames)
    }
}

/// libwebp's `BlendPixelNonPremult`: `src` over `dst`, RGBA not
/// premultiplied, in its integer arithmetic.
fn blend(src: [u8; 4], dst: [u8; 4]) -> [u8; 4] {
    let src_a = u32::from(src[3]);
    if src_a == 0 {
        return dst;
    }
    let dst_factor_a = (u32::from(dst[3]) * (256 - src_a)) >> 8;
    let blend_a = src_a + dst_factor_a;
    let scale = (1u32 << 24) / blend_a;
    let channel = |i: usize| {
        let unscaled = u32::from(src[i]) * src_a + u32::from(dst[i]) * dst_factor_a;
        ((unscaled * scale) >> 24) as u8
    };
    [channel(0), channel(1), channel(2), blend_a as u8]
}

/// Blends the pixels of `row` (a canvas row's span) that are not opaque
/// over the same pixels of the previous, disposed canvas.
fn blend_span(canvas: &mut [u8], previous: &[u8], start: usize, count: usize) {
    for p in start..start + count {
        let at = p * 4;
        if canvas[at + 3] != 0xff {
            let src = [canvas[at], canvas[at + 1], canvas[at + 2], canvas[at + 3]];
            let dst = [
                previous[at],
                previous[at + 1],
                previous[at + 2],
                previous[at + 3],
            ];
            canvas[at..at + 4].copy_from_slice(&blend(src, dst));
        }
    }
}

/// `WebPAnimDecoder`: every frame composed on the canvas, RGBA.
fn decode_animation(data: &[u8], features: &Features, expand: bool) -> Result<Tensor> {
    let failed = || invalid("Failed to decode WebP Animation: failed to decode WebP Animation");
    let (cw, ch) = (features.width, features.height);
    let mut frames = anim_frames(data, cw, ch).ok_or_else(failed)?;
    if !expand {
        // The whole file is still parsed (as libwebp's demuxer does).
        frames.truncate(1);
    }
    let frame_bytes = cw * ch * 4;
    check_size(OP, DType::UInt8, (frame_bytes * frames.len()) as u64)?;
    let mut out = Vec::with_capacity(frame_bytes * frames.len());
    let mut disposed = vec![0u8; frame_bytes];
    let mut canvas = vec![0u8; frame_bytes];
    let full = |w: usize, h: usize| w == cw && h == ch;
    let mut previous: Option<(&AnimFrame, bool)> = None;
    for (k, frame) in frames.iter().enumerate() {
        let key = match previous {
            None => true,
            Some(_) if (!frame.has_alpha || !frame.blend) && full(frame.width, frame.height) => {
                true
            }
            Some((prev, prev_key)) => {
                prev.dispose_to_background && (full(prev.width, prev.height) || prev_key)
            }
        };
        if key {
            canvas.fill(0);
        } else {
            canvas.copy_from_slice(&disposed);
        }
        let pixels = decode_still(&frame.file, 4)
            .filter(|p| p.len() == frame.width * frame.height * 4)
            .ok_or_else(|| {
                invalid(format!(
                    "Failed to decode WebP Animation: failed to decode frame: {k}"
                ))
            })?;
        for y in 0..frame.height {
            let row = ((frame.y + y) * cw + frame.x) * 4;
            canvas[row..row + frame.width * 4]
                .copy_from_slice(&pixels[y * frame.width * 4..(y + 1) * frame.width * 4]);
        }
        if k > 0 && frame.blend && !key {
            let prev = previous
                .map(|(p, _)| p)
                .expect("a previous frame after the first");
            for y in frame.y..frame.y + frame.height {
                let row = y * cw;
                if !prev.dispose_to_background {
                    blend_span(&mut canvas, &disposed, row + frame.x, frame.width);
                    continue;
                }
                // The previous frame's rectangle was disposed to
                // transparent: only the pixels outside it are blended.
                let (fx_end, px_end) = (frame.x + frame.width, prev.x + prev.width);
                if y < prev.y || y >= prev.y + prev.height || frame.x >= px_end || fx_end <= prev.x
                {
                    blend_span(&mut canvas, &disposed, row + frame.x, frame.width);
                    continue;
                }
                if frame.x < prev.x {
                    blend_span(&mut canvas, &disposed, row + frame.x, prev.x - frame.x);
                }
                if fx_end > px_end {
                    blend_span(&mut canvas, &disposed, row + px_end, fx_end - px_end);
                }
            }
        }
        out.extend_from_slice(&canvas);
        disposed.copy_from_slice(&canvas);
        if frame.dispose_to_background {
            for y in frame.y..frame.y + frame.height {
                let row = (y * cw + frame.x) * 4;
                disposed[row..row + frame.width * 4].fill(0);
            }
        }
        previous = Some((frame, key));
    }
    let mut shape = vec![frames.len() as i64, ch as i64, cw as i64, 4];
    if !expand {
        shape.remove(0);
    }
    Tensor::from_slice(&out, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(data: Vec<u8>) -> Result<Tensor> {
        decode_webp(&data, 0)
    }

    /// A lossless 2x1 RGBA file and an animation of it, cut at every byte
    /// and with every byte flipped: errors, never a panic.
    #[test]
    fn hostile_bytes_are_errors_not_panics() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../interop/differential/families/webp"
        );
        for name in ["lossless_rgba.webp", "anim_moving.webp", "lossy_alpha.webp"] {
            let file = std::fs::read(format!("{dir}/{name}")).unwrap();
            assert!(run(file.clone()).is_ok(), "{name}");
            for cut in 0..file.len() {
                let _ = run(file[..cut].to_vec());
            }
            for at in 12..file.len() {
                let mut bad = file.clone();
                bad[at] ^= 0xa5;
                let _ = run(bad);
            }
        }
    }
}
