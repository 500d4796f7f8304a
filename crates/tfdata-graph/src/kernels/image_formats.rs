//! `DecodeWebP` and `DecodeJxl`: TensorFlow 2.21's generic image decoder
//! (`DecodeImageV2Op`) as these two ops run it. The format is sniffed from the
//! magic bytes whatever the op, so either op decodes JPEG, PNG, WebP and
//! JPEG XL contents (each as its own decoder shapes it: JPEG, PNG and
//! JPEG XL `[height, width, channels]`, WebP `[frames, height, width,
//! channels]`) and refuses GIF and BMP contents with TensorFlow's messages.

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::kernels as engine;

use super::{Compute, KernelDef, expect_inputs, image_gif, image_jxl, image_webp};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "DecodeWebP",
        outputs: image_output,
        build: |a| build(a, "DecodeWebP"),
    },
    KernelDef {
        op: "DecodeJxl",
        outputs: image_output,
        build: |a| build(a, "DecodeJxl"),
    },
];

fn image_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("image", 1)])
}

fn build(attrs: &NodeAttrs, op: &'static str) -> Result<Compute> {
    let invalid = move |m: String| Error::InvalidArgument(format!("{op}: {m}"));
    let channels = attrs.int_or("channels", 0)?;
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(invalid(format!(
            "`channels` must be 0, 1, 3 or 4 but got {channels}"
        )));
    }
    if attrs.has("dtype") && attrs.dtype("dtype")? != DType::UInt8 {
        return Err(Error::Unimplemented(format!(
            "{op}: dtype {} is not supported (uint8 only)",
            attrs.dtype("dtype")?
        )));
    }
    let channels = channels as usize;
    Ok(Box::new(move |inputs| {
        expect_inputs(op, &inputs, 1)?;
        let contents = &inputs[0];
        if !contents.shape().is_empty() {
            return Err(invalid(format!(
                "`contents` must be scalar but got shape{}",
                super::strings::shape_string(contents.shape())
            )));
        }
        let data = super::strings::strings(op, contents, "contents")?[0].clone();
        if data.is_empty() {
            return Err(invalid("Input is empty.".into()));
        }
        Ok(vec![decode(op, contents, &data, channels)?])
    }))
}

/// The formats TensorFlow's `ClassifyFileFormat` tells apart.
enum Format {
    Jpeg,
    Png,
    Gif,
    Bmp,
    Webp,
    Jxl,
    Unknown,
}

fn classify(data: &[u8]) -> Format {
    if data.starts_with(b"\xff\xd8\xff") {
        Format::Jpeg
    } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Format::Png
    } else if data.starts_with(b"GIF8") {
        Format::Gif
    } else if data.starts_with(b"BM") {
        Format::Bmp
    } else if data.len() > 12 && data.starts_with(b"RIFF") && &data[8..12] == b"WEBP" {
        Format::Webp
    } else if image_jxl::is_jxl(data) {
        Format::Jxl
    } else {
        Format::Unknown
    }
}

/// Puts `op` in front of an error's message in place of the decoder's
/// own prefix (`decode_png: ...`, `DecodeWebP: ...`).
fn renamed(op: &str, e: Error) -> Error {
    let rename = |m: String| match m.split_once(": ") {
        Some((_, rest)) => format!("{op}: {rest}"),
        None => format!("{op}: {m}"),
    };
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(rename(m)),
        Error::Unimplemented(m) => Error::Unimplemented(rename(m)),
        other => other,
    }
}

/// Decodes the scalar string `contents` (its bytes `data`, not empty) as
/// `op` does with `channels` (0, 1, 3 or 4).
fn decode(op: &str, contents: &Tensor, data: &[u8], channels: usize) -> Result<Tensor> {
    let invalid = |m: String| Error::InvalidArgument(format!("{op}: {m}"));
    match classify(data) {
        Format::Jpeg => engine::decode_jpeg(contents, channels as u8),
        Format::Png => engine::decode_png(contents, channels as u8),
        Format::Webp => image_webp::decode_webp(data, channels),
        Format::Jxl => image_jxl::decode_jxl(data, channels),
        Format::Gif if matches!(channels, 0 | 3) => Err(invalid(format!("Bad op type {op}"))),
        Format::Gif => Err(invalid(format!(
            "channels must be 0 or 3 for GIF, got {channels}"
        ))),
        Format::Bmp if channels == 1 => Err(invalid(
            "`channels` must be 0, 3 or 4 for BMP, but got 1".into(),
        )),
        Format::Bmp => Err(invalid(format!(
            "Trying to decode BMP format using a wrong op. Use `decode_bmp` or `decode_image` \
             instead. Op used: {op}"
        ))),
        Format::Unknown => Err(invalid(
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.".into(),
        )),
    }
    .map_err(|e| renamed(op, e))
}

/// `DecodeImage` on GIF, WebP and JPEG XL contents (its JPEG, PNG and BMP
/// are the engine's): `None` for other contents. `expand` is
/// `expand_animations`; `float` asks for float32 output (x / 255), which
/// TensorFlow refuses for WebP and JPEG XL.
pub(super) fn decode_image_animated(
    data: &[u8],
    channels: usize,
    expand: bool,
    float: bool,
) -> Result<Option<Tensor>> {
    const OP: &str = "DecodeImage";
    let invalid = |m: String| Error::InvalidArgument(format!("{OP}: {m}"));
    let decoded = match classify(data) {
        Format::Gif if !matches!(channels, 0 | 3) => {
            return Err(invalid(format!(
                "channels must be 0 or 3 for GIF, got {channels}"
            )));
        }
        Format::Gif => image_gif::decode_gif(data, expand),
        // WebP checks its channels before the dtype.
        Format::Webp if channels == 1 => image_webp::decode_webp_frames(data, channels, expand),
        Format::Webp | Format::Jxl if float => {
            let name = if matches!(classify(data), Format::Webp) {
                "WebP"
            } else {
                "JXL"
            };
            return Err(invalid(format!("{name} only supports uint8 for dtype")));
        }
        Format::Webp => image_webp::decode_webp_frames(data, channels, expand),
        Format::Jxl => image_jxl::decode_jxl(data, channels),
        _ => return Ok(None),
    }
    .map_err(|e| renamed(OP, e))?;
    if !float {
        return Ok(Some(decoded));
    }
    // `convert_image_dtype`: x * (1 / 255) in float32.
    let v: Vec<f32> = decoded
        .to_vec::<u8>()?
        .iter()
        .map(|&x| f32::from(x) * (1.0 / 255.0))
        .collect();
    Ok(Some(Tensor::from_slice(&v, decoded.shape().to_vec())?))
}
