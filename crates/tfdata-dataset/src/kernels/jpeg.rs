//! JPEG decoding with libjpeg-turbo's decoder (the `mozjpeg` crate builds
//! it), set up as TensorFlow 2.21's `jpeg_mem.cc` sets up libjpeg-turbo, so
//! pixels are bit-identical to `tf.io.decode_jpeg` for both `dct_method`s.
//!
//! What TensorFlow does around libjpeg is reproduced here: the output
//! colour space chosen from `channels`, CMYK/YCCK decoded as CMYK and
//! converted to RGB with TensorFlow's formula, the size limit, and refusing
//! truncated streams (`try_recover_truncated=False`). Rows come out one at
//! a time ([`JpegRows`]), so a consumer (the fused decode-resize kernel)
//! needs no full-size image. The crop window of `decode_and_crop_jpeg`
//! stops decoding after its last row; rows above it are decoded and dropped
//! (the safe `mozjpeg` API has no `jpeg_skip_scanlines`/`jpeg_crop_scanline`),
//! so a crop costs what decoding down to its bottom row costs.

use std::panic::{AssertUnwindSafe, catch_unwind};

use mozjpeg::decompress::DecompressStarted;
use mozjpeg::{ColorSpace, ColorSpaceExt, Decompress};
use tfdata_core::Result;

use super::invalid;

/// Which code the JPEG decoder runs on this machine, in one phrase for
/// logs and benchmark figures: whether libjpeg-turbo was built with its
/// SIMD code (the build script read its `jconfig.h`; x86 needs `nasm` for
/// it) and, on x86-64, the widest instruction set libjpeg-turbo picks at
/// run time (AVX2, else SSE2).
pub fn jpeg_code_path() -> &'static str {
    match option_env!("TFDATA_JPEG_SIMD") {
        Some("1") => simd_flavour(),
        Some("0") => {
            "libjpeg-turbo without SIMD (built without nasm: JPEG decoding about 2x slower; \
             install nasm and rebuild)"
        }
        _ => "libjpeg-turbo (whether its SIMD code was built is unknown)",
    }
}

#[cfg(target_arch = "x86_64")]
fn simd_flavour() -> &'static str {
    if std::is_x86_feature_detected!("avx2") {
        "libjpeg-turbo with SIMD (AVX2)"
    } else {
        "libjpeg-turbo with SIMD (SSE2)"
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_flavour() -> &'static str {
    "libjpeg-turbo with SIMD"
}

/// `decode_jpeg`'s `dct_method`: libjpeg's inverse DCT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DctMethod {
    /// `"INTEGER_FAST"`, and TensorFlow's default (`""`): `JDCT_IFAST`.
    #[default]
    IntegerFast,
    /// `"INTEGER_ACCURATE"`: `JDCT_ISLOW`.
    IntegerAccurate,
}

impl DctMethod {
    /// The attribute's values as TensorFlow reads them: `""` (the default)
    /// and `"INTEGER_FAST"` are the fast IDCT, `"INTEGER_ACCURATE"` the
    /// accurate one; anything else is TensorFlow's `InvalidArgument`.
    pub fn from_tf(name: &str) -> Result<DctMethod> {
        match name {
            "" | "INTEGER_FAST" => Ok(DctMethod::IntegerFast),
            "INTEGER_ACCURATE" => Ok(DctMethod::IntegerAccurate),
            other => Err(tfdata_core::Error::InvalidArgument(format!(
                "dct_method must be one of {{'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}}, got {other:?}"
            ))),
        }
    }

    /// The attribute's value for this method.
    pub fn tf_name(self) -> &'static str {
        match self {
            DctMethod::IntegerFast => "INTEGER_FAST",
            DctMethod::IntegerAccurate => "INTEGER_ACCURATE",
        }
    }
}

/// A crop window `[y, x, height, width]` already checked to be positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    pub y: usize,
    pub x: usize,
    pub height: usize,
    pub width: usize,
}

/// A decoded image's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Decoded {
    pub height: usize,
    pub width: usize,
    pub channels: usize,
}

/// Decodes `data` (a stream starting with a JPEG SOI marker) into `out`
/// (cleared first; its capacity is reused), `[height, width, channels]`
/// `uint8`, cropped to the window `window(size)` chooses once the headers
/// are read, if any (out of the image: the `InvalidArgument` TensorFlow
/// gives). `channels` is 0, 1 or 3.
pub(super) fn decode(
    kernel: &str,
    data: &[u8],
    channels: u8,
    dct: DctMethod,
    window: impl FnOnce(&Decoded) -> Option<Window>,
    out: &mut Vec<u8>,
) -> Result<Decoded> {
    guarded(kernel, || {
        let mut rows = JpegRows::open(kernel, data, channels, dct)?;
        let full = rows.decoded();
        let window = window(&full).unwrap_or(Window {
            y: 0,
            x: 0,
            height: full.height,
            width: full.width,
        });
        if window.y + window.height > full.height || window.x + window.width > full.width {
            return Err(invalid(
                kernel,
                "jpeg::Uncompress failed. Invalid JPEG data or crop window.",
            ));
        }
        let c = full.channels;
        out.clear();
        out.reserve(window.height * window.width * c);
        let columns = window.x * c..(window.x + window.width) * c;
        for y in 0..window.y + window.height {
            let row = rows.next_row()?;
            if y >= window.y {
                out.extend_from_slice(&row[columns.clone()]);
            }
        }
        // A whole decode is finished (libjpeg reads to the EOI marker); a
        // cropped one abandoned after its last row, as TensorFlow abandons
        // it: dropping the decompressor releases it.
        if window.y + window.height == full.height {
            rows.finish()?;
        }
        Ok(Decoded {
            height: window.height,
            width: window.width,
            channels: c,
        })
    })
}

/// Runs `f`, which calls libjpeg: libjpeg reports a fatal error by
/// unwinding out of its error handler (the `mozjpeg` crate's design) with
/// the message as the payload, made here an `InvalidArgument`.
pub(super) fn guarded<T>(kernel: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("the decoder failed");
            Err(invalid(
                kernel,
                format!("jpeg::Uncompress failed. Invalid JPEG data or crop window. ({message})"),
            ))
        }
    }
}

/// A JPEG being decoded, one output row at a time, top to bottom. Calls
/// into libjpeg: use inside [`guarded`].
pub(super) struct JpegRows<'a> {
    kernel: &'a str,
    started: DecompressStarted<&'a [u8]>,
    size: Decoded,
    /// The last scanline as libjpeg wrote it (CMYK for four-component
    /// images), at `scanline[row]` (see [`unaligned_row`]).
    scanline: Vec<u8>,
    row: std::ops::Range<usize>,
    /// The last row with TensorFlow's channels (CMYK converted to RGB).
    converted: Vec<u8>,
    /// CMYK decode of an image with an Adobe marker (inverted CMYK).
    cmyk: Option<bool>,
}

impl<'a> JpegRows<'a> {
    /// Reads the headers and starts decoding with TensorFlow's settings;
    /// `channels` is 0, 1 or 3.
    pub(super) fn open(
        kernel: &'a str,
        data: &'a [u8],
        channels: u8,
        dct: DctMethod,
    ) -> Result<JpegRows<'a>> {
        if channels == 4 {
            return Err(invalid(kernel, "JPEG does not support 4 channels"));
        }
        let corrupt = |e: std::io::Error| {
            invalid(
                kernel,
                format!("jpeg::Uncompress failed. Invalid JPEG data or crop window. ({e})"),
            )
        };
        let mut decoder = Decompress::builder().from_mem(data).map_err(corrupt)?;
        let (width, height) = decoder.size();
        let components = decoder.components().len();
        if height == 0 || width == 0 {
            return Err(invalid(
                kernel,
                format!("Invalid JPEG image size {width} x {height}"),
            ));
        }
        // TensorFlow refuses outputs of 2^29 samples or more, before decoding.
        if (height * width * components) as u64 >= 1 << 29 {
            return Err(invalid(
                kernel,
                format!("JPEG image too large: {width} x {height} x {components}"),
            ));
        }
        if !jpeg_complete(data) {
            return Err(invalid(
                kernel,
                "jpeg::Uncompress failed. Invalid JPEG data or crop window. (premature end of JPEG data)",
            ));
        }
        // TensorFlow: channels 0 means min(components, 3); 1 is libjpeg's
        // grayscale (luma alone, or its RGB-to-gray); CMYK and YCCK decode
        // to CMYK, which TensorFlow converts itself.
        let want = if channels == 0 {
            components.min(3)
        } else {
            usize::from(channels)
        };
        let four = matches!(
            decoder.color_space(),
            ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK
        );
        let out_space = match want {
            1 => ColorSpace::JCS_GRAYSCALE,
            _ if four => ColorSpace::JCS_CMYK,
            _ => ColorSpace::JCS_RGB,
        };
        decoder.dct_method(match dct {
            DctMethod::IntegerFast => mozjpeg::DctMethod::IntegerFast,
            DctMethod::IntegerAccurate => mozjpeg::DctMethod::IntegerSlow,
        });
        decoder.do_fancy_upsampling(true);
        let started = decoder.to_colorspace(out_space).map_err(corrupt)?;
        let decoded_channels = started.color_space().num_components();
        let cmyk = (decoded_channels != want).then(|| saw_adobe_marker(data));
        let scanline = vec![0; width * decoded_channels + ROW_SLACK];
        Ok(JpegRows {
            kernel,
            started,
            size: Decoded {
                height,
                width,
                channels: want,
            },
            row: unaligned_row(&scanline, width * decoded_channels),
            scanline,
            converted: Vec::with_capacity(width * want),
            cmyk,
        })
    }

    /// The output's size: the whole image, TensorFlow's channels.
    pub(super) fn decoded(&self) -> Decoded {
        self.size
    }

    /// The row last returned by [`JpegRows::next_row`].
    pub(super) fn row(&self) -> &[u8] {
        match self.cmyk {
            None => &self.scanline[self.row.clone()],
            Some(_) => &self.converted,
        }
    }

    /// The next row, `width * channels` samples.
    pub(super) fn next_row(&mut self) -> Result<&[u8]> {
        let kernel = self.kernel;
        self.started
            .read_scanlines_into(&mut self.scanline[self.row.clone()])
            .map_err(|e| {
                invalid(
                    kernel,
                    format!("jpeg::Uncompress failed. Invalid JPEG data or crop window. ({e})"),
                )
            })?;
        match self.cmyk {
            None => Ok(&self.scanline[self.row.clone()]),
            Some(adobe) => {
                self.converted.clear();
                cmyk_to_rgb(&self.scanline[self.row.clone()], adobe, &mut self.converted);
                Ok(&self.converted)
            }
        }
    }

    /// Ends a decode whose rows have all been read.
    pub(super) fn finish(self) -> Result<()> {
        let kernel = self.kernel;
        self.started.finish().map_err(|e| {
            invalid(
                kernel,
                format!("jpeg::Uncompress failed. Invalid JPEG data or crop window. ({e})"),
            )
        })
    }
}

/// Bytes a row buffer has beyond its row, so the row can be placed.
const ROW_SLACK: usize = 16;

/// Where in `buffer` (`ROW_SLACK` bytes longer than `len`) libjpeg is to
/// write a row of `len` bytes: at an address 8 past a multiple of 16.
///
/// libjpeg-turbo's SIMD colour conversion (`jdcolext-sse2/avx2.asm`, also
/// the merged upsampler) writes an output row whose address is a multiple
/// of its vector size with non-temporal stores, which bypass the cache, so
/// the reader of the row (the resize, or the copy into the decoded image)
/// then loads every line of it from memory. Measured on the benchmark's
/// images, that was over half of `decode_jpeg_resize`'s time. At an address
/// that is a multiple of neither 16 nor 32 it uses ordinary stores.
fn unaligned_row(buffer: &[u8], len: usize) -> std::ops::Range<usize> {
    // Only the address is looked at, never dereferenced.
    let address = buffer.as_ptr() as usize;
    let start = (8 + 16 - address % 16) % 16;
    start..start + len
}

/// Whether the stream ends its last scan with an EOI marker, as libjpeg
/// requires when TensorFlow does not ask it to recover truncated files:
/// the last of the SOS (`FFDA`) and EOI (`FFD9`) markers must be an EOI.
/// Entropy-coded data never contains either byte pair (0xFF is stuffed).
/// (libjpeg itself would pad a truncated stream with gray and warn.)
fn jpeg_complete(data: &[u8]) -> bool {
    let Some(eoi) = data.windows(2).rposition(|w| w == [0xFF, 0xD9]) else {
        return false;
    };
    !data[eoi..].windows(2).any(|w| w == [0xFF, 0xDA])
}

/// Whether the markers before the first scan include an Adobe APP14
/// segment (libjpeg's `saw_Adobe_marker`), which says CMYK is inverted.
fn saw_adobe_marker(data: &[u8]) -> bool {
    let mut pos = 2;
    while pos + 1 < data.len() {
        if data[pos] != 0xFF {
            pos += 1;
            continue;
        }
        let marker = data[pos + 1];
        match marker {
            0xFF => pos += 1,
            0x00 | 0x01 | 0xD0..=0xD7 => pos += 2,
            0xDA | 0xD9 => return false,
            _ => {
                let Some(len) = data.get(pos + 2..pos + 4) else {
                    return false;
                };
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                if marker == 0xEE && len >= 2 + 12 && data[pos + 4..].starts_with(b"Adobe") {
                    return true;
                }
                pos += 2 + len;
            }
        }
    }
    false
}

/// CMYK (libjpeg converts YCCK to CMYK itself) to RGB with TensorFlow's
/// formula from `jpeg_mem.cc`, appended to `out`.
fn cmyk_to_rgb(pixels: &[u8], adobe: bool, out: &mut Vec<u8>) {
    for p in pixels.chunks_exact(4) {
        let [c, m, y, k] = [p[0], p[1], p[2], p[3]].map(i32::from);
        let rgb = if adobe {
            [k * c / 255, k * m / 255, k * y / 255]
        } else {
            [
                (255 - k) * (255 - c) / 255,
                (255 - k) * (255 - m) / 255,
                (255 - k) * (255 - y) / 255,
            ]
        };
        out.extend(rgb.map(|v| v as u8));
    }
}

/// libjpeg's fixed-point constants (`jdcolor.c`), 16 fractional bits.
#[cfg(test)]
const SCALEBITS: i32 = 16;
#[cfg(test)]
const ONE_HALF: i32 = 1 << (SCALEBITS - 1);

#[cfg(test)]
const fn fix(x: f64) -> i32 {
    (x * (1 << SCALEBITS) as f64 + 0.5) as i32
}

/// libjpeg's `ycck_cmyk_convert` for one pixel, for tests of the CMYK path
/// that start from YCCK values.
#[cfg(test)]
fn ycck_to_cmyk(p: [u8; 4]) -> [u8; 4] {
    let (luma, cb, cr) = (
        i32::from(p[0]),
        i32::from(p[1]) - 128,
        i32::from(p[2]) - 128,
    );
    let r = luma + ((fix(1.40200) * cr + ONE_HALF) >> SCALEBITS);
    let g = luma + ((-fix(0.34414) * cb + ONE_HALF - fix(0.71414) * cr) >> SCALEBITS);
    let b = luma + ((fix(1.77200) * cb + ONE_HALF) >> SCALEBITS);
    [
        (255 - r).clamp(0, 255) as u8,
        (255 - g).clamp(0, 255) as u8,
        (255 - b).clamp(0, 255) as u8,
        p[3],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_says_which_decoder_code_runs() {
        let path = super::jpeg_code_path();
        assert!(path.starts_with("libjpeg-turbo"), "{path}");
        // CI installs nasm (.ci/run), so there the SIMD code must be in and
        // the build script must have found libjpeg-turbo's jconfig.h.
        if std::env::var("CI").as_deref() == Ok("true") && cfg!(target_arch = "x86_64") {
            assert!(path.contains("with SIMD"), "{path}");
        }
    }

    #[test]
    fn rows_are_not_vector_aligned() {
        for extra in 0..32 {
            let buffer = vec![0u8; 100 + extra + ROW_SLACK];
            let row = unaligned_row(&buffer, 100 + extra);
            let address = buffer[row.clone()].as_ptr() as usize;
            assert_eq!(address % 16, 8);
            assert_eq!(row.len(), 100 + extra);
            assert!(row.end <= buffer.len());
        }
    }

    #[test]
    fn libjpeg_constants() {
        assert_eq!(
            (fix(1.402), fix(1.772), fix(0.71414), fix(0.34414)),
            (91881, 116130, 46802, 22554)
        );
    }

    #[test]
    fn cmyk_conversion_follows_tensorflow() {
        let rgb = |p: &[u8], adobe| {
            let mut out = Vec::new();
            cmyk_to_rgb(p, adobe, &mut out);
            out
        };
        // Adobe-inverted: r = k * c / 255.
        assert_eq!(rgb(&[255, 128, 0, 200], true), [200, 100, 0]);
        // Plain CMYK: r = (255 - k) * (255 - c) / 255.
        assert_eq!(rgb(&[0, 127, 255, 55], false), [200, 100, 0]);
        // YCCK gray (Cb = Cr = 128) is inverted luma, then Adobe CMYK.
        assert_eq!(
            rgb(&ycck_to_cmyk([55, 128, 128, 255]), true),
            [200, 200, 200]
        );
    }

    #[test]
    fn dct_method_reads_like_tensorflow() {
        assert_eq!(DctMethod::from_tf("").ok(), Some(DctMethod::IntegerFast));
        assert_eq!(
            DctMethod::from_tf("INTEGER_FAST").ok(),
            Some(DctMethod::IntegerFast)
        );
        assert_eq!(
            DctMethod::from_tf("INTEGER_ACCURATE").ok(),
            Some(DctMethod::IntegerAccurate)
        );
        // TensorFlow refuses libjpeg's float IDCT and anything else.
        assert!(DctMethod::from_tf("FLOAT").is_err());
    }

    #[test]
    fn completeness_needs_eoi_after_last_scan() {
        assert!(jpeg_complete(b"\xff\xd8\xff\xda..\xff\xd9"));
        assert!(jpeg_complete(b"\xff\xd8\xff\xda..\xff\xd9trailing"));
        assert!(!jpeg_complete(b"\xff\xd8\xff\xda.."));
        assert!(!jpeg_complete(b"\xff\xd8\xff\xd9\xff\xda.."));
    }

    #[test]
    fn adobe_marker_is_found_before_the_scan() {
        let mut jpeg = b"\xff\xd8\xff\xe0\x00\x04ab".to_vec();
        jpeg.extend_from_slice(b"\xff\xee\x00\x0eAdobe\x00\x64\x00\x00\x00\x00\x02");
        jpeg.extend_from_slice(b"\xff\xda\x00\x02");
        assert!(saw_adobe_marker(&jpeg));
        assert!(!saw_adobe_marker(
            b"\xff\xd8\xff\xda\x00\x02\xff\xee\x00\x0eAdobe"
        ));
    }
}
