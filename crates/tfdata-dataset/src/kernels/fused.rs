//! Kernels that run several ops as one, for map fusion: a JPEG decoded
//! straight into a bilinear resize (and normalisation), without the
//! full-size decoded image in between.
//!
//! Results are bit-identical to the ops one after the other: the decoder
//! hands out the same rows, and the resize does the same float32
//! operations on them in the same order.

use tfdata_core::{DType, Result, Tensor};

use super::bilinear::{Horizontal, Normalization, Rows, resize_rows};
use super::jpeg::{self, DctMethod, JpegRows};
use super::{ResizeMethod, decode_jpeg_with, from_buffer, invalid, math, resize};

/// `resize(decode_jpeg(contents, channels, dct_method), [height, width])`
/// (bilinear), then `(x - mean) / std` per channel if `normalize` is given:
/// float32 `[height, width, channels]`.
///
/// A JPEG is resized as its rows come out of the decoder, so only a few
/// rows are held, never the decoded image. Anything else `decode_jpeg`
/// accepts (a PNG), and a resize to the image's own size, go through the
/// separate kernels. Errors are those of the separate kernels (named
/// `decode_jpeg`, `resize`, `normalize`).
pub fn decode_jpeg_resize(
    contents: &Tensor,
    channels: u8,
    dct_method: DctMethod,
    height: i64,
    width: i64,
    normalize: Option<(&[f32], &[f32])>,
) -> Result<Tensor> {
    decode_jpeg_resize_as(
        contents,
        channels,
        dct_method,
        height,
        width,
        normalize,
        DType::Float,
    )
}

/// [`decode_jpeg_resize`], then `cast(…, dtype)` for `dtype` float32 (no
/// cast) or uint8 (the image back to bytes, as pipelines that resize for a
/// uint8 model input do): a JPEG's rows are cast as they are resized, so
/// the float32 image is never stored. The same bits as the separate ops.
pub fn decode_jpeg_resize_as(
    contents: &Tensor,
    channels: u8,
    dct_method: DctMethod,
    height: i64,
    width: i64,
    normalize: Option<(&[f32], &[f32])>,
    dtype: DType,
) -> Result<Tensor> {
    if !matches!(dtype, DType::Float | DType::UInt8) {
        return Err(invalid(
            "decode_jpeg_resize",
            format!("`dtype` must be float32 or uint8, not {dtype}"),
        ));
    }
    let separate = || {
        let image = decode_jpeg_with(contents, channels, dct_method)?;
        let resized = resize(&image, height, width, ResizeMethod::Bilinear)?;
        let resized = match normalize {
            Some((mean, std)) => math::normalize(&resized, mean, std)?,
            None => resized,
        };
        math::cast(&resized, dtype)
    };
    let jpeg = contents.dtype() == DType::String
        && contents.shape().is_empty()
        && contents
            .string_values()
            .is_ok_and(|s| s[0].starts_with(b"\xff\xd8\xff"));
    if !jpeg || !matches!(channels, 0 | 1 | 3) || height <= 0 || width <= 0 {
        return separate();
    }
    let values = contents.string_values()?;
    let data: &[u8] = &values[0];
    let (out_h, out_w) = (height as usize, width as usize);
    let decoded = jpeg::guarded("decode_jpeg", || {
        let mut rows = JpegRows::open("decode_jpeg", data, channels, dct_method)?;
        let size = rows.decoded();
        if (size.height, size.width) == (out_h, out_w) {
            return Ok(None);
        }
        let c = size.channels;
        let post = match normalize {
            Some((mean, std)) => Some(Normalization::new("normalize", mean, std, c, out_w)?),
            None => None,
        };
        let horizontal = Horizontal::new(size.width, out_w, c);
        let (mut floats, mut bytes) = (Vec::new(), Vec::new());
        let out = match dtype {
            DType::UInt8 => {
                bytes.reserve_exact(out_h * out_w * c);
                Rows::UInt8(&mut bytes)
            }
            _ => {
                floats.reserve_exact(out_h * out_w * c);
                Rows::Float(&mut floats)
            }
        };
        // The index of the row `rows` holds; `resize_rows` asks for rows in
        // increasing order, so decoding only moves forward.
        let mut current: Option<usize> = None;
        // The first of two rows interpolated together, kept while the
        // decoder writes the second.
        let mut held: Vec<u8> = Vec::with_capacity(size.width * c);
        let interpolate = |y: usize, first: &mut [f32], second: Option<&mut [f32]>| {
            advance(&mut rows, &mut current, y)?;
            match second {
                None => horizontal.row(rows.row(), first),
                Some(second) => {
                    held.clear();
                    held.extend_from_slice(rows.row());
                    advance(&mut rows, &mut current, y + 1)?;
                    horizontal.rows2(&held, rows.row(), first, second);
                }
            }
            Ok(())
        };
        resize_rows(
            size.height,
            out_h,
            out_w * c,
            horizontal.buffer_len(),
            interpolate,
            post.as_ref(),
            out,
        )?;
        // Rows below the last one the resize needed are not decoded.
        let values = match dtype {
            DType::UInt8 => bytes,
            _ => floats.into_flattened(),
        };
        Ok(Some((c, values)))
    })?;
    match decoded {
        None => separate(),
        Some((c, values)) => from_buffer(dtype, vec![height, width, c as i64], values),
    }
}

/// Decodes rows until `rows` holds row `y` (`current` is the row it holds).
fn advance(rows: &mut JpegRows<'_>, current: &mut Option<usize>, y: usize) -> Result<()> {
    while current.is_none_or(|r| r < y) {
        rows.next_row()?;
        *current = Some(current.map_or(0, |r| r + 1));
    }
    if *current != Some(y) {
        return Err(invalid("resize", "rows asked for out of order"));
    }
    Ok(())
}
