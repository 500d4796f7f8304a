//! Image decoding: `tf.io.decode_jpeg`, `tf.io.decode_png` and
//! `tf.io.decode_image` (all with `dtype=uint8`).
//!
//! As in TensorFlow 2.21 (`DecodeImageV2Op`), the format is sniffed from the
//! magic bytes whatever the op: `decode_jpeg` decodes PNGs and `decode_png`
//! decodes JPEGs; only `decode_image` decodes BMPs. GIF and WebP are
//! recognised but not decoded (`Unimplemented`).
//!
//! JPEG goes through libjpeg-turbo's decoder ([`super::jpeg`]), PNG through
//! `png`, BMP through a port of TensorFlow's own BMP reader. What TensorFlow
//! does around its codecs (libjpeg-turbo and libpng) is reproduced: channel
//! selection and conversion, CMYK handling, libpng's RGB-to-gray weights
//! and gamma handling, alpha filling, 16-to-8-bit reduction and the size
//! limits.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tfdata_core::{DType, Error, Result, Tensor};

use super::jpeg::{self, DctMethod, Window};
use super::{from_buffer, invalid};

/// Which TensorFlow op is decoding: they differ only in what they accept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Jpeg,
    JpegCrop,
    Png,
    Image,
}

/// What the JPEG decoder is asked for.
#[derive(Debug, Clone, Copy)]
struct JpegOptions {
    channels: u8,
    dct_method: DctMethod,
    crop: Option<Window>,
}

impl Op {
    fn kernel(self) -> &'static str {
        match self {
            Op::Jpeg => "decode_jpeg",
            Op::JpegCrop => "decode_and_crop_jpeg",
            Op::Png => "decode_png",
            Op::Image => "decode_image",
        }
    }

    fn tf_name(self) -> &'static str {
        match self {
            Op::Jpeg => "DecodeJpeg",
            Op::JpegCrop => "DecodeAndCropJpeg",
            Op::Png => "DecodePng",
            Op::Image => "DecodeImage",
        }
    }
}

/// `tf.io.decode_jpeg(contents, channels)`: a scalar string of image bytes
/// to a `uint8` tensor `[height, width, channels]`.
///
/// `channels` is 0 (as encoded: 1 for grayscale, 3 for colour and CMYK),
/// 1 or 3; 4 is accepted like TensorFlow does, and then only for PNG input
/// ("JPEG does not support 4 channels"). PNG input is decoded as by
/// [`decode_png`], as TensorFlow does; BMP, GIF and WebP are errors.
///
/// JPEG output is bit-identical to TensorFlow's: both decode with
/// libjpeg-turbo, TensorFlow's default fast integer IDCT (`dct_method=""`,
/// see [`decode_jpeg_with`] for the other) and fancy upsampling. Channel
/// handling, CMYK/YCCK conversion (TensorFlow's formula, Adobe-inverted or
/// not) and errors match. Truncated data is an error, as in TensorFlow
/// (`try_recover_truncated=False`): the stream must reach an EOI marker
/// after its last scan. Corrupt entropy-coded data inside an otherwise
/// complete stream is decoded leniently, as libjpeg does with a warning.
/// Arithmetic-coded and 12-bit JPEGs are errors.
pub fn decode_jpeg(contents: &Tensor, channels: u8) -> Result<Tensor> {
    decode_jpeg_with(contents, channels, DctMethod::default())
}

/// `tf.io.decode_jpeg(contents, channels, dct_method=...)`: [`decode_jpeg`]
/// with libjpeg's IDCT chosen as TensorFlow chooses it
/// ([`DctMethod::from_tf`]); either way the pixels are TensorFlow's.
pub fn decode_jpeg_with(contents: &Tensor, channels: u8, dct_method: DctMethod) -> Result<Tensor> {
    decode(
        Op::Jpeg,
        contents,
        JpegOptions {
            channels,
            dct_method,
            crop: None,
        },
    )
}

/// `tf.io.decode_and_crop_jpeg(contents, crop_window, channels,
/// dct_method)`: the window `crop_window = [y, x, height, width]` of the
/// JPEG, the same pixels as decoding it whole and cropping (TensorFlow's
/// own tests assert as much for its decoder, and tfdata's are TensorFlow's).
///
/// Decoding stops after the window's last row, so a window near the top
/// costs a fraction of a full decode. A window that is not four
/// non-negative numbers with positive size inside the image is the
/// `InvalidArgument` TensorFlow gives ("Invalid JPEG data or crop
/// window."); only JPEG input is accepted, as in TensorFlow.
pub fn decode_and_crop_jpeg(
    contents: &Tensor,
    crop_window: &[i64],
    channels: u8,
    dct_method: DctMethod,
) -> Result<Tensor> {
    const KERNEL: &str = "decode_and_crop_jpeg";
    let [y, x, height, width] = crop_window else {
        return Err(invalid(
            KERNEL,
            format!("crop_window must be 4 values [y, x, height, width], got {crop_window:?}"),
        ));
    };
    let positive = |v: i64| usize::try_from(v).ok().filter(|v| *v > 0);
    let offset = |v: i64| usize::try_from(v).ok();
    let (Some(y), Some(x), Some(height), Some(width)) =
        (offset(*y), offset(*x), positive(*height), positive(*width))
    else {
        return Err(invalid(
            KERNEL,
            "jpeg::Uncompress failed. Invalid JPEG data or crop window.",
        ));
    };
    decode(
        Op::JpegCrop,
        contents,
        JpegOptions {
            channels,
            dct_method,
            crop: Some(Window {
                y,
                x,
                height,
                width,
            }),
        },
    )
}

/// `tf.io.decode_png(contents, channels)` with `dtype=uint8`: a scalar
/// string of image bytes to a `uint8` tensor `[height, width, channels]`.
///
/// `channels` is 0 (as encoded: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA;
/// palette images give 3, or 4 with a `tRNS` chunk), 1, 3 or 4. JPEG input
/// is decoded as by [`decode_jpeg`], as TensorFlow does.
///
/// Output is bit-identical to TensorFlow's (libpng with TensorFlow's
/// transformations), including its quirks:
/// * 16-bit samples keep their high byte (`png_set_strip_16`: `0x12FF`
///   becomes `0x12`), they are not rounded;
/// * colour to gray uses libpng's `png_set_rgb_to_gray(0.299, 0.587)`:
///   integer weights 9797/19234/3737 over 32768, truncated at 8 bits,
///   rounded at 16 bits, gray pixels passed through, and in linear light
///   through libpng's gamma tables when the file has a significant `gAMA`
///   or `sRGB` chunk (8-bit images; for 16-bit images with such a chunk
///   tfdata converts without gamma, which may differ by a level or two);
/// * an added alpha channel is `2^bit_depth - 1`, so a 1-bit gray image
///   decoded with 4 channels has alpha 1 and a 4-bit palette image alpha 15;
/// * `tRNS` becomes alpha only when an alpha channel is wanted.
pub fn decode_png(contents: &Tensor, channels: u8) -> Result<Tensor> {
    decode(Op::Png, contents, plain(channels))
}

/// `tf.io.decode_image(contents, channels, expand_animations=...)` with
/// `dtype=uint8`: sniffs JPEG, PNG or BMP and decodes it as
/// [`decode_jpeg`], [`decode_png`] or TensorFlow's BMP reader would
/// (uncompressed 8/24/32-bit BMPs; `channels` 1 is refused for BMP, as in
/// TensorFlow). GIF and WebP are recognised and refused as `Unimplemented`.
pub fn decode_image(contents: &Tensor, channels: u8) -> Result<Tensor> {
    decode(Op::Image, contents, plain(channels))
}

/// The options of a decode op without JPEG arguments.
fn plain(channels: u8) -> JpegOptions {
    JpegOptions {
        channels,
        dct_method: DctMethod::default(),
        crop: None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Jpeg,
    Png,
    Gif,
    Bmp,
    Webp,
    Unknown,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "JPEG",
            Format::Png => "PNG",
            Format::Gif => "GIF",
            Format::Bmp => "BMP",
            Format::Webp => "WebP",
            Format::Unknown => "unknown",
        }
    }
}

/// TensorFlow's `ClassifyFileFormat`.
fn classify(data: &[u8]) -> Format {
    if data.starts_with(b"\xff\xd8\xff") {
        Format::Jpeg
    } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Format::Png
    } else if data.starts_with(b"GIF8") {
        Format::Gif
    } else if data.starts_with(b"BM") {
        Format::Bmp
    } else if data.starts_with(b"RIFF") && data.len() > 12 && &data[8..12] == b"WEBP" {
        Format::Webp
    } else {
        Format::Unknown
    }
}

fn decode(op: Op, contents: &Tensor, options: JpegOptions) -> Result<Tensor> {
    let kernel = op.kernel();
    let channels = options.channels;
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(invalid(
            kernel,
            format!("`channels` must be 0, 1, 3 or 4 but got {channels}"),
        ));
    }
    if contents.dtype() != DType::String || !contents.shape().is_empty() {
        return Err(invalid(
            kernel,
            format!(
                "`contents` must be a scalar string, got a {} tensor of shape {:?}",
                contents.dtype(),
                contents.shape()
            ),
        ));
    }
    let data: &[u8] = &contents.string_values()?[0];
    if data.is_empty() {
        return Err(invalid(kernel, "Input is empty."));
    }
    // The codecs are not expected to panic on corrupt input, but a decoder
    // bug must not take a worker down: report it as corrupt data instead.
    let result = catch_unwind(AssertUnwindSafe(|| match classify(data) {
        Format::Jpeg => decode_jpeg_bytes(kernel, data, &options),
        Format::Png | Format::Bmp | Format::Gif | Format::Webp if op == Op::JpegCrop => {
            Err(invalid(
                kernel,
                format!(
                    "Trying to decode {} format using a wrong op. Use `decode_png` or \
                     `decode_image` instead. Op used: {}",
                    classify(data).name(),
                    op.tf_name()
                ),
            ))
        }
        Format::Png => decode_png_bytes(kernel, data, channels),
        Format::Bmp if op == Op::Image => decode_bmp_bytes(kernel, data, channels),
        Format::Bmp => Err(invalid(
            kernel,
            format!(
                "Trying to decode BMP format using a wrong op. Use `decode_bmp` or \
                 `decode_image` instead. Op used: {}",
                op.tf_name()
            ),
        )),
        Format::Gif | Format::Webp => Err(Error::Unimplemented(format!(
            "{kernel}: {} images are not decoded by tfdata (only JPEG, PNG and BMP)",
            if classify(data) == Format::Gif {
                "GIF"
            } else {
                "WebP"
            }
        ))),
        Format::Unknown => Err(invalid(
            kernel,
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.",
        )),
    }));
    result.unwrap_or_else(|_| Err(invalid(kernel, "image decoder failed on corrupt data")))
}

/// An image as `[height, width, channels]` `uint8`.
fn image(height: usize, width: usize, channels: usize, data: Vec<u8>) -> Result<Tensor> {
    from_buffer(
        DType::UInt8,
        vec![height as i64, width as i64, channels as i64],
        data,
    )
}

// ---------------------------------------------------------------------------
// JPEG

fn decode_jpeg_bytes(kernel: &str, data: &[u8], options: &JpegOptions) -> Result<Tensor> {
    let mut pixels = Vec::new();
    let d = jpeg::decode(
        kernel,
        data,
        options.channels,
        options.dct_method,
        |_| options.crop,
        &mut pixels,
    )?;
    image(d.height, d.width, d.channels, pixels)
}

// ---------------------------------------------------------------------------
// PNG

fn decode_png_bytes(kernel: &str, data: &[u8], channels: u8) -> Result<Tensor> {
    let corrupt = |e: png::DecodingError| invalid(kernel, format!("Invalid PNG data: {e}"));
    let mut decoder = png::Decoder::new(data);
    // TensorFlow bounds the image itself (below); the png crate's own limit
    // (64 MiB by default) would refuse images TensorFlow decodes.
    decoder.set_limits(png::Limits { bytes: usize::MAX });
    decoder.set_ignore_text_chunk(true);
    decoder.set_ignore_iccp_chunk(true);
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().map_err(|e| {
        invalid(
            kernel,
            format!("Invalid PNG. Failed to initialize decoder: {e}"),
        )
    })?;
    let info = reader.info();
    let (width, height) = (info.width as usize, info.height as usize);
    if width == 0
        || height == 0
        || width >= 1 << 27
        || height >= 1 << 27
        || width as u64 * height as u64 >= 1 << 29
    {
        return Err(invalid(
            kernel,
            format!("PNG size too large for int: {width} by {height}"),
        ));
    }
    let source = PngSource {
        color_type: info.color_type,
        bit_depth: info.bit_depth as u8,
        has_trns: info.trns.is_some(),
        gamma: info.source_gamma.map(|g| g.into_scaled()),
    };
    let mut raw = vec![0u8; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut raw).map_err(corrupt)?;
    raw.truncate(frame.buffer_size());
    // Read the remaining chunks up to IEND, as libpng's png_read_end does:
    // a file cut after its image data is an error in TensorFlow too.
    reader.finish().map_err(corrupt)?;
    let (out_channels, pixels) = png_to_tensorflow(
        source,
        frame.color_type,
        frame.bit_depth == png::BitDepth::Sixteen,
        raw,
        channels,
    );
    if pixels.len() != width * height * out_channels {
        return Err(invalid(
            kernel,
            "Invalid PNG data: decoded size does not match the header",
        ));
    }
    image(height, width, out_channels, pixels)
}

/// What TensorFlow's PNG path needs to know about the file.
#[derive(Clone, Copy)]
struct PngSource {
    color_type: png::ColorType,
    bit_depth: u8,
    has_trns: bool,
    /// File gamma times 100000 (`gAMA`, or 45455 for `sRGB`).
    gamma: Option<u32>,
}

/// The expanded (palette to RGB(A), low bit depths to 8, `tRNS` to alpha)
/// rows in `raw` converted as TensorFlow's `png::CommonInitDecode`
/// configures libpng. Returns the output channel count and pixels.
fn png_to_tensorflow(
    source: PngSource,
    expanded: png::ColorType,
    sixteen: bool,
    raw: Vec<u8>,
    requested: u8,
) -> (usize, Vec<u8>) {
    use png::ColorType::*;
    let channels = match requested {
        0 => match source.color_type {
            Indexed if source.has_trns => 4,
            Indexed => 3,
            Grayscale => 1,
            GrayscaleAlpha => 2,
            Rgb => 3,
            Rgba => 4,
        },
        n => usize::from(n),
    };
    let in_channels = match expanded {
        Grayscale => 1,
        GrayscaleAlpha => 2,
        Rgb => 3,
        // `Indexed` never survives EXPAND.
        Rgba | Indexed => 4,
    };
    // Alpha in the expanded data: the file's own, or tRNS made alpha.
    let in_alpha = in_channels % 2 == 0;
    let want_alpha = channels % 2 == 0;
    let in_gray = in_channels < 3;
    let want_gray = channels < 3;
    let step = if sixteen { 2 } else { 1 };

    // Fast path: nothing to do but keep the bytes.
    if !sixteen && in_channels == channels {
        return (channels, raw);
    }
    // libpng's filler for png_set_add_alpha: (1 << bit_depth) - 1, the low
    // byte kept at 8 bits.
    let filler = ((1u32 << source.bit_depth) - 1) as u8;
    let gray = (want_gray && !in_gray).then(|| GrayConverter::new(source, sixteen));
    let pixel_bytes = in_channels * step;
    let mut out = Vec::with_capacity(raw.len() / pixel_bytes * channels);
    for px in raw.chunks_exact(pixel_bytes) {
        // The high byte of each sample (png_set_strip_16), or the sample.
        let sample = |i: usize| px[i * step];
        if want_gray {
            let g = match &gray {
                Some(conv) => conv.convert(px),
                None => sample(0),
            };
            out.push(g);
        } else if in_gray {
            let g = sample(0);
            out.extend_from_slice(&[g, g, g]);
        } else {
            out.extend_from_slice(&[sample(0), sample(1), sample(2)]);
        }
        if want_alpha {
            out.push(if in_alpha {
                sample(in_channels - 1)
            } else {
                filler
            });
        }
    }
    (channels, out)
}

/// libpng's `png_do_rgb_to_gray` with TensorFlow's coefficients
/// `png_set_rgb_to_gray(png_ptr, 1, 0.299, 0.587)`.
struct GrayConverter {
    sixteen: bool,
    /// `gamma_to_1` and `gamma_from_1` when libpng builds gamma tables.
    tables: Option<([u8; 256], [u8; 256])>,
}

/// `png_set_rgb_to_gray_fixed`: coefficients over 32768, truncated.
const RED: u32 = 29900 * 32768 / 100000;
const GREEN: u32 = 58700 * 32768 / 100000;
const BLUE: u32 = 32768 - RED - GREEN;

impl GrayConverter {
    fn new(source: PngSource, sixteen: bool) -> Self {
        let tables = match source.gamma {
            Some(file) if file > 0 && !sixteen => {
                let screen = png_reciprocal(file);
                (gamma_significant(file) || gamma_significant(screen)).then(|| {
                    (
                        gamma_table(png_reciprocal(file)),
                        gamma_table(png_reciprocal(screen)),
                    )
                })
            }
            _ => None,
        };
        GrayConverter { sixteen, tables }
    }

    /// One pixel (RGB or RGBA, 8- or 16-bit big-endian) to an 8-bit gray.
    fn convert(&self, px: &[u8]) -> u8 {
        if self.sixteen {
            let s = |i: usize| u32::from(u16::from_be_bytes([px[2 * i], px[2 * i + 1]]));
            let (r, g, b) = (s(0), s(1), s(2));
            let gray = (RED * r + GREEN * g + BLUE * b + 16384) >> 15;
            // Computed at 16 bits (libpng converts before stripping).
            return (gray >> 8) as u8;
        }
        let (r, g, b) = (px[0], px[1], px[2]);
        if r == g && r == b {
            return r;
        }
        match &self.tables {
            Some((to_1, from_1)) => {
                let lin = |v: u8| u32::from(to_1[usize::from(v)]);
                from_1[((RED * lin(r) + GREEN * lin(g) + BLUE * lin(b) + 16384) >> 15) as usize]
            }
            None => ((RED * u32::from(r) + GREEN * u32::from(g) + BLUE * u32::from(b)) >> 15) as u8,
        }
    }
}

/// libpng's `png_reciprocal`: 1/gamma in its fixed point (x 100000).
fn png_reciprocal(gamma: u32) -> u32 {
    (1e10 / f64::from(gamma) + 0.5).floor() as u32
}

/// libpng's `png_gamma_significant` (threshold 0.05).
fn gamma_significant(gamma: u32) -> bool {
    !(95_000..=105_000).contains(&gamma)
}

/// libpng's `png_build_8bit_table` (floating-point build).
fn gamma_table(gamma: u32) -> [u8; 256] {
    let mut table = [0u8; 256];
    for (i, t) in table.iter_mut().enumerate() {
        *t = if !gamma_significant(gamma) || i == 0 || i == 255 {
            i as u8
        } else {
            (255.0 * (i as f64 / 255.0).powf(f64::from(gamma) * 0.00001) + 0.5).floor() as u8
        };
    }
    table
}

// ---------------------------------------------------------------------------
// BMP

/// TensorFlow's `DecodeBmpV2`: uncompressed BMPs with 8, 24 or 32 bits per
/// pixel, rows padded to 4 bytes, bottom-up unless the height is negative.
fn decode_bmp_bytes(kernel: &str, data: &[u8], channels: u8) -> Result<Tensor> {
    if channels == 1 {
        return Err(invalid(
            kernel,
            "`channels` must be 0, 3 or 4 for BMP, but got 1",
        ));
    }
    if data.len() < 32 {
        return Err(invalid(
            kernel,
            format!(
                "Incomplete bmp content, requires at least 32 bytes to find the header \
                 size, width, height, and bpp, got {} bytes",
                data.len()
            ),
        ));
    }
    let i32_at =
        |at: usize| i32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
    let header_size = i64::from(i32_at(10));
    let width = i64::from(i32_at(18));
    let height = i64::from(i32_at(22));
    let bpp = i16::from_le_bytes([data[28], data[29]]);
    let img_channels = i64::from(bpp / 8);
    if !matches!(img_channels, 1 | 3 | 4) {
        return Err(invalid(
            kernel,
            format!(
                "Number of channels inherent in the image must be 1, 3 or 4, was {img_channels}"
            ),
        ));
    }
    let channels = if channels == 0 {
        img_channels
    } else {
        i64::from(channels)
    };
    if width <= 0 {
        return Err(invalid(kernel, "Width must be positive"));
    }
    if height == 0 {
        return Err(invalid(kernel, "Height must be nonzero"));
    }
    if header_size < 0 {
        return Err(invalid(kernel, "header size must be nonnegative"));
    }
    let abs_height = height.abs();
    if width * abs_height >= i64::from(i32::MAX / 8) {
        return Err(invalid(
            kernel,
            "Total possible pixel bytes must be less than 2^30",
        ));
    }
    let row_size = (img_channels * width + 3) / 4 * 4;
    let size_diff = data.len() as i64 - header_size - row_size * abs_height;
    if size_diff != 0 {
        return Err(invalid(
            kernel,
            format!(
                "Input size should match (header_size + row_size * abs_height) but they \
                 differ by {size_diff}"
            ),
        ));
    }
    let (width, height, row_size) = (width as usize, abs_height as usize, row_size as usize);
    let (in_c, out_c) = (img_channels as usize, channels as usize);
    let pixels = &data[header_size as usize..];
    let top_down = i32_at(22) < 0;
    let mut out = Vec::with_capacity(width * height * out_c);
    for y in 0..height {
        let src_row = if top_down { y } else { height - 1 - y };
        let row = &pixels[src_row * row_size..][..width * in_c];
        for p in row.chunks_exact(in_c) {
            match in_c {
                1 => {
                    out.push(p[0]);
                    if out_c >= 3 {
                        out.extend_from_slice(&[p[0], p[0]]);
                    }
                }
                // BGR(A) to RGB(A).
                _ => out.extend_from_slice(&[p[2], p[1], p[0]]),
            }
            if out_c == 4 {
                out.push(if in_c == 4 { p[3] } else { u8::MAX });
            }
        }
    }
    image(height, width, out_c, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpng_gray_coefficients() {
        assert_eq!((RED, GREEN, BLUE), (9797, 19234, 3737));
    }
}
