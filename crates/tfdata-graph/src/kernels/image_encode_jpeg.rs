//! `EncodeJpeg` and `EncodeJpegVariableQuality` (`tf.io.encode_jpeg`,
//! `tf.image.adjust_jpeg_quality`'s encoder).
//!
//! TensorFlow 2.21 encodes with libjpeg-turbo (`jpeg_mem.cc`'s `Compress`);
//! the `mozjpeg` crate builds the same encoder (libjpeg-turbo's, with
//! mozjpeg's extras switched off by its "fastest" profile, which restores
//! libjpeg's v6 defaults). Set up as TensorFlow sets up libjpeg — defaults,
//! `optimize_coding`, the JFIF density, `jpeg_set_quality(quality,
//! force_baseline=TRUE)`, `jpeg_simple_progression`, sampling factors all 1
//! without chroma downsampling, the XMP packet as an APP1 marker — the
//! output bytes are TensorFlow's, byte for byte.
//!
//! The one setting the safe `mozjpeg` API cannot pass straight through is
//! `force_baseline=TRUE` (its `set_quality` passes FALSE, which keeps table
//! entries above 255 for qualities below 24 and writes 16-bit tables); the
//! tables are therefore given explicitly, with entries equal to
//! `jpeg_set_quality`'s (see [`quant_table`]).

use std::panic::{AssertUnwindSafe, catch_unwind};

use mozjpeg::qtable::{self, QTable};
use mozjpeg::{ColorSpace, Compress, Marker, PixelDensity, PixelDensityUnit};
use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "EncodeJpeg",
        outputs: contents_output,
        build: build_fixed,
    },
    KernelDef {
        op: "EncodeJpegVariableQuality",
        outputs: contents_output,
        build: |_| Ok(Box::new(variable_quality)),
    },
];

fn contents_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("contents", 1)])
}

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// Which channel layout the image must have (`format`).
#[derive(Clone, Copy, PartialEq)]
enum Format {
    /// `""`: taken from the image (1 channel gray, 3 RGB).
    Auto,
    Grayscale,
    Rgb,
}

/// TensorFlow's `jpeg::CompressFlags`, as the two ops fill them.
#[derive(Clone)]
struct Flags {
    format: Format,
    quality: i64,
    progressive: bool,
    optimize_size: bool,
    chroma_downsampling: bool,
    /// JFIF units: 1 dots per inch, 2 per centimetre.
    density_unit: u8,
    x_density: i64,
    y_density: i64,
    xmp_metadata: Vec<u8>,
}

impl Default for Flags {
    /// `CompressFlags`' defaults (what `EncodeJpegVariableQuality` uses).
    fn default() -> Self {
        Flags {
            format: Format::Auto,
            quality: 95,
            progressive: false,
            optimize_size: false,
            chroma_downsampling: true,
            density_unit: 1,
            x_density: 300,
            y_density: 300,
            xmp_metadata: Vec::new(),
        }
    }
}

fn quality_range(op: &str, quality: i64) -> Result<()> {
    if (0..=100).contains(&quality) {
        Ok(())
    } else {
        Err(invalid(
            op,
            format!("quality must be in [0,100], got {quality}"),
        ))
    }
}

fn build_fixed(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "EncodeJpeg";
    let format = match attrs.string_or("format", "")? {
        "" => Format::Auto,
        "grayscale" => Format::Grayscale,
        "rgb" => Format::Rgb,
        other => {
            return Err(invalid(
                OP,
                format!("format must be '', grayscale or rgb, got {other}"),
            ));
        }
    };
    let quality = attrs.int_or("quality", 95)?;
    quality_range(OP, quality)?;
    let density_unit = match attrs.string_or("density_unit", "in")? {
        "in" => 1,
        "cm" => 2,
        other => {
            return Err(invalid(
                OP,
                format!("density_unit must be 'in' or 'cm'{other}"),
            ));
        }
    };
    let flags = Flags {
        format,
        quality,
        progressive: attrs.bool_or("progressive", false)?,
        optimize_size: attrs.bool_or("optimize_size", false)?,
        chroma_downsampling: attrs.bool_or("chroma_downsampling", true)?,
        density_unit,
        x_density: attrs.int_or("x_density", 300)?,
        y_density: attrs.int_or("y_density", 300)?,
        xmp_metadata: if attrs.has("xmp_metadata") {
            attrs.bytes("xmp_metadata")?.to_vec()
        } else {
            Vec::new()
        },
    };
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        encode(OP, &inputs[0], flags.clone())
    }))
}

fn variable_quality(inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    const OP: &str = "EncodeJpegVariableQuality";
    expect_inputs(OP, &inputs, 2)?;
    // TensorFlow checks the image's rank before the quality.
    image_dims(OP, &inputs[0])?;
    let quality = &inputs[1];
    if !quality.shape().is_empty() {
        return Err(invalid(
            OP,
            format!("quality must be scalar: {}", shape_string(quality.shape())),
        ));
    }
    let quality = i64::from(quality.to_scalar::<i32>()?);
    quality_range(OP, quality)?;
    let flags = Flags {
        quality,
        ..Flags::default()
    };
    encode(OP, &inputs[0], flags)
}

/// `[height, width, channels]` of a 3-D image, and TensorFlow's int32
/// bound on its size.
fn image_dims(op: &str, image: &Tensor) -> Result<[usize; 3]> {
    let &[h, w, c] = image.shape() else {
        return Err(invalid(
            op,
            format!("image must be 3-dimensional{}", shape_string(image.shape())),
        ));
    };
    if image.num_elements() >= i32::MAX as u64 {
        return Err(invalid(
            op,
            "Cannot encode images with >= max int32 elements",
        ));
    }
    Ok([h as usize, w as usize, c as usize])
}

fn encode(op: &str, image: &Tensor, mut flags: Flags) -> Result<Vec<Tensor>> {
    let [height, width, channels] = image_dims(op, image)?;
    if image.dtype() != DType::UInt8 {
        return Err(invalid(
            op,
            format!("image must be uint8, got {}", image.dtype()),
        ));
    }
    let wanted = match flags.format {
        Format::Auto => match channels {
            1 => Format::Grayscale,
            3 => Format::Rgb,
            _ => {
                return Err(invalid(
                    op,
                    format!(
                        "image must have 1 or 3 channels, got {}",
                        shape_string(image.shape())
                    ),
                ));
            }
        },
        f => {
            let need = if f == Format::Grayscale { 1 } else { 3 };
            if channels != need {
                let name = if f == Format::Grayscale {
                    "grayscale"
                } else {
                    "rgb"
                };
                return Err(invalid(
                    op,
                    format!(
                        "format {name} expects {need} channels, got {}",
                        shape_string(image.shape())
                    ),
                ));
            }
            f
        }
    };
    flags.format = wanted;
    // `Compress` refuses empty and huge images (logged, then the op's
    // Internal error); libjpeg's dimensions are below 65 536 besides.
    if height == 0 || width == 0 || (height as u64) * (width as u64) >= 1 << 29 {
        return Err(Error::Internal(format!("{op}: JPEG encoding failed")));
    }
    let pixels = match image.data() {
        tfdata_core::tensor::TensorData::Buffer(b) => b.clone(),
        tfdata_core::tensor::TensorData::Strings(_) => {
            return Err(invalid(op, "image must be uint8"));
        }
    };
    // The output is at most a few times the input (and 64 KiB of markers).
    check_size(op, DType::UInt8, pixels.len() as u64 * 2 + (1 << 17))?;
    // libjpeg reports errors by unwinding out of the C code (the `mozjpeg`
    // crate's error manager); an error is TensorFlow's failure.
    let bytes = catch_unwind(AssertUnwindSafe(|| {
        compress(&pixels, width, height, &flags)
    }))
    .ok()
    .and_then(|r| r.ok())
    .ok_or_else(|| Error::Internal(format!("{op}: JPEG encoding failed")))?;
    Ok(vec![Tensor::scalar_string(bytes)])
}

/// `jpeg_mem.cc`'s `Compress`, step by step.
fn compress(pixels: &[u8], width: usize, height: usize, flags: &Flags) -> std::io::Result<Vec<u8>> {
    let gray = flags.format == Format::Grayscale;
    let mut c = Compress::new(if gray {
        ColorSpace::JCS_GRAYSCALE
    } else {
        ColorSpace::JCS_RGB
    });
    // libjpeg-turbo's `jpeg_set_defaults` (no trellis quantisation, no
    // scan optimisation, Annex K tables).
    c.set_fastest_defaults();
    c.set_size(width, height);
    if flags.optimize_size {
        c.set_optimize_coding(true);
    }
    c.set_pixel_density(PixelDensity {
        unit: if flags.density_unit == 2 {
            PixelDensityUnit::Centimeters
        } else {
            PixelDensityUnit::Inches
        },
        // libjpeg's densities are UINT16: TensorFlow's int assignment
        // keeps the low 16 bits.
        x: flags.x_density as u16,
        y: flags.y_density as u16,
    });
    let scale = quality_scaling(flags.quality);
    c.set_luma_qtable(&quant_table(&qtable::AnnexK_Luma, scale));
    c.set_chroma_qtable(&quant_table(&qtable::AnnexK_Chroma, scale));
    if flags.progressive {
        c.set_progressive_mode();
    }
    if !flags.chroma_downsampling {
        for comp in c.components_mut() {
            comp.h_samp_factor = 1;
            comp.v_samp_factor = 1;
        }
    }
    let mut started = c.start_compress(Vec::new())?;
    if !flags.xmp_metadata.is_empty() {
        let mut packet = b"http://ns.adobe.com/xap/1.0/\0".to_vec();
        packet.extend_from_slice(&flags.xmp_metadata);
        started.write_marker(Marker::APP(1), &packet);
    }
    started.write_scanlines(pixels)?;
    started.finish()
}

/// libjpeg's `jpeg_quality_scaling`: quality 0..=100 to a percentage.
fn quality_scaling(quality: i64) -> i64 {
    let q = quality.clamp(1, 100);
    if q < 50 { 5000 / q } else { 200 - q * 2 }
}

/// The table `jpeg_add_quant_table(basic, scale, force_baseline=TRUE)`
/// makes: `(basic * scale + 50) / 100`, at least 1, at most 255.
///
/// The crate builds tables only through `QTable::scaled`, which computes
/// `round(basic * s)` in float32 and clamps to 1..=255; with `s` a hair
/// above `scale / 100` (4e-5, far below the 0.01 steps the exact products
/// take) its rounding of exact halves goes up as the integer formula's
/// does, and every entry is libjpeg's. The unit tests check all 101
/// qualities against the integer formula.
fn quant_table(basic: &QTable, scale: i64) -> QTable {
    let s = (scale as f64 + 0.004) / 100.0;
    // `scaled` takes a quality: 50/q below 50, (100-q)/50 from 50 up.
    let quality = if s > 1.0 { 50.0 / s } else { 100.0 - 50.0 * s };
    basic.scaled(quality as f32, quality as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libjpeg's Annex K tables, in natural order.
    const LUMA: [u32; 64] = [
        16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69,
        56, 14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81,
        104, 113, 92, 49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
    ];

    const CHROMA: [u32; 64] = [
        17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99, 24, 26, 56, 99, 99, 99, 99,
        99, 47, 66, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
        99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    ];

    #[test]
    fn tables_equal_libjpeg_for_every_quality() {
        for quality in 0..=100 {
            let scale = quality_scaling(quality);
            let table = quant_table(&qtable::AnnexK_Luma, scale);
            let want: Vec<u32> = LUMA
                .iter()
                .map(|&b| ((i64::from(b) * scale + 50) / 100).clamp(1, 255) as u32)
                .collect();
            let got = format!("{table:?}");
            assert_eq!(
                got,
                format!("QTable{{coeffs:{want:?}}}"),
                "quality {quality}"
            );
            let table = quant_table(&qtable::AnnexK_Chroma, scale);
            let want: Vec<u32> = CHROMA
                .iter()
                .map(|&b| ((i64::from(b) * scale + 50) / 100).clamp(1, 255) as u32)
                .collect();
            let got = format!("{table:?}");
            assert_eq!(
                got,
                format!("QTable{{coeffs:{want:?}}}"),
                "chroma quality {quality}"
            );
        }
    }

    #[test]
    fn encodes_and_refuses_like_tensorflow() {
        let image = Tensor::from_slice(&[10u8, 20, 30, 200, 100, 50], vec![1, 2, 3]).unwrap();
        let out = encode("EncodeJpeg", &image, Flags::default()).unwrap();
        let bytes = out[0].string_values().unwrap()[0].clone();
        assert!(bytes.starts_with(b"\xff\xd8\xff\xe0"));
        let empty = Tensor::from_slice::<u8>(&[], vec![0, 2, 3]).unwrap();
        assert!(matches!(
            encode("EncodeJpeg", &empty, Flags::default()),
            Err(Error::Internal(_))
        ));
        let two = Tensor::from_slice(&[1u8, 2, 3, 4], vec![1, 2, 2]).unwrap();
        assert!(encode("EncodeJpeg", &two, Flags::default()).is_err());
    }
}
