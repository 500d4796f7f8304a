//! `DecodeBmp` (`tf.io.decode_bmp`). In TensorFlow 2.21 it is the generic
//! image decoder restricted to BMP: the format is sniffed from the magic
//! bytes, a JPEG, PNG or GIF is refused with a pointer to its own op, and a
//! BMP is read by the same reader as `DecodeImage` (the engine's port of
//! TensorFlow's BMP reader, already held to TensorFlow by `DecodeImage`'s
//! cases), so the two ops give the same pixels and channel handling.

use tfdata_core::{Error, Result};
use tfdata_dataset::kernels as engine;

use super::{Compute, KernelDef, expect_inputs};
use crate::attrs::NodeAttrs;

const OP: &str = "DecodeBmp";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| Ok(vec![("image", 1)]),
    build,
}];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// The op another format belongs to, by TensorFlow's magic bytes.
fn other_format(data: &[u8]) -> Option<(&'static str, &'static str)> {
    if data.starts_with(b"\xff\xd8\xff") {
        Some(("JPEG", "decode_jpeg"))
    } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(("PNG", "decode_png"))
    } else if data.starts_with(b"GIF8") {
        Some(("GIF", "decode_gif"))
    } else {
        None
    }
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let channels = attrs.int_or("channels", 0)?;
    if !matches!(channels, 0 | 1 | 3 | 4) {
        return Err(invalid(format!(
            "`channels` must be 0, 1, 3 or 4 but got {channels}"
        )));
    }
    let channels = channels as u8;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let contents = &inputs[0];
        if !contents.shape().is_empty() {
            return Err(invalid(format!(
                "`contents` must be scalar but got shape{}",
                super::strings::shape_string(contents.shape())
            )));
        }
        if let Some(data) = contents.string_values().ok().and_then(|v| v.first()) {
            if let Some((format, op)) = other_format(data) {
                return Err(invalid(format!(
                    "Trying to decode {format} format using DecodeBmp op. Use `{op}` or \
                     `decode_image` instead."
                )));
            }
            if data.len() >= 12 && data.starts_with(b"RIFF") && &data[8..12] == b"WEBP" {
                return Err(Error::Unimplemented(format!(
                    "{OP}: WebP content is not decoded by tfdata"
                )));
            }
        }
        let decoded = engine::decode_image(contents, channels).map_err(|e| match e {
            Error::InvalidArgument(m) => Error::InvalidArgument(match m.split_once(": ") {
                Some((_, rest)) => format!("{OP}: {rest}"),
                None => format!("{OP}: {m}"),
            }),
            other => other,
        })?;
        Ok(vec![decoded])
    }))
}
