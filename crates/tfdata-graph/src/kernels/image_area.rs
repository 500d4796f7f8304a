//! `ResizeArea` (what `tf.image.resize(method="area")` runs without
//! antialias) and `ExtractJpegShape`.
//!
//! `ResizeArea` replays TensorFlow's float steps: each output pixel is the
//! sum over the input cells it covers, row by row (a row's cells weighted
//! by their covered fraction of the first and last, whole in between, then
//! the row by its covered height), times `1 / (height_scale *
//! width_scale)` computed in double as the C++ does. So it is bit-identical.
//!
//! `ExtractJpegShape` reads the frame header as libjpeg's `jpeg_read_header`
//! does, through the markers up to the first scan: height, width and the
//! number of components, without decoding.

use tfdata_core::{DType, Error, Result, Tensor};

use super::image::{batch_dims, floats, resize_scale};
use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "ResizeArea",
        outputs: |_| Ok(vec![("resized_images", 1)]),
        build: resize_area,
    },
    KernelDef {
        op: "ExtractJpegShape",
        outputs: |_| Ok(vec![("image_shape", 1)]),
        build: extract_jpeg_shape,
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// The input cells `[start, end)` an output cell covers on one axis, with
/// the covered fraction of each cell (TensorFlow's expressions, in float).
fn cells(out_index: usize, scale: f32) -> Vec<(i64, f32)> {
    let lo = out_index as f32 * scale;
    let hi = (out_index + 1) as f32 * scale;
    let (start, end) = (lo.floor() as i64, hi.ceil() as i64);
    (start..end)
        .map(|i| {
            let f = if (i as f32) < lo {
                if (i + 1) as f32 > hi {
                    scale
                } else {
                    (i + 1) as f32 - lo
                }
            } else if (i + 1) as f32 > hi {
                hi - i as f32
            } else {
                1.0
            };
            (i, f)
        })
        .collect()
}

fn resize_area(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ResizeArea";
    let align = attrs.bool_or("align_corners", false)?;
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 2)?;
        let (image, size) = (&inputs[0], &inputs[1]);
        let [b, h, w, c] = batch_dims(OP, image)?;
        if size.shape().len() != 1 {
            return Err(invalid(
                OP,
                format!(
                    "shape_t must be 1-dimensional{}",
                    shape_string(size.shape())
                ),
            ));
        }
        let size = super::strings::int_values(OP, size, "size")?;
        let [oh, ow] = size[..] else {
            return Err(invalid(
                OP,
                format!(
                    "shape_t must have two elements{}",
                    shape_string(inputs[1].shape())
                ),
            ));
        };
        if oh <= 0 || ow <= 0 || oh > i64::from(i32::MAX) || ow > i64::from(i32::MAX) {
            return Err(invalid(OP, "output dimensions must be positive"));
        }
        if h == 0 || w == 0 {
            return Err(invalid(OP, "input image must be of non-zero size"));
        }
        let (oh, ow) = (oh as usize, ow as usize);
        check_size(OP, DType::Float, (b * c) as u64 * oh as u64 * ow as u64)?;
        let v = floats(OP, image)?;
        let (sy, sx) = (resize_scale(h, oh, align), resize_scale(w, ow, align));
        let scale = (1.0 / f64::from(sy * sx)) as f32;
        let xs: Vec<Vec<(usize, f32)>> = (0..ow)
            .map(|x| {
                cells(x, sx)
                    .into_iter()
                    .map(|(i, f)| (i.clamp(0, w as i64 - 1) as usize, f))
                    .collect()
            })
            .collect();
        let mut out = Vec::with_capacity(b * oh * ow * c);
        for n in 0..b {
            let img = &v[n * h * w * c..(n + 1) * h * w * c];
            for y in 0..oh {
                let ys = cells(y, sy);
                for xcells in &xs {
                    for k in 0..c {
                        let mut sum = 0.0f32;
                        for &(row, fy) in &ys {
                            let row = &img[row.clamp(0, h as i64 - 1) as usize * w * c..];
                            let last = xcells.len() - 1;
                            let mut sum_y = row[xcells[0].0 * c + k] * xcells[0].1;
                            if last > 0 {
                                for &(x, _) in &xcells[1..last] {
                                    sum_y += row[x * c + k];
                                }
                                sum_y += row[xcells[last].0 * c + k] * xcells[last].1;
                            }
                            sum += sum_y * fy;
                        }
                        out.push(sum * scale);
                    }
                }
            }
        }
        Ok(vec![Tensor::from_slice(
            &out,
            vec![b as i64, oh as i64, ow as i64, c as i64],
        )?])
    }))
}

/// Height, width and components from a JPEG's frame header, reading the
/// markers up to the first scan as `jpeg_read_header` does.
fn jpeg_shape(data: &[u8]) -> Option<[i64; 3]> {
    if data.len() < 2 || data[0] != 0xFF || data[1] != 0xD8 {
        return None;
    }
    let mut i = 2;
    let mut frame = None;
    loop {
        // Skip to a marker: 0xFF, any fill bytes, then the code.
        while *data.get(i)? != 0xFF {
            i += 1;
        }
        while *data.get(i)? == 0xFF {
            i += 1;
        }
        let code = *data.get(i)?;
        i += 1;
        match code {
            0x01 | 0xD0..=0xD7 => continue,
            // A scan: the header is complete if a frame came first.
            0xDA => return frame,
            // End of image, or a second start, before any scan.
            0xD8 | 0xD9 => return None,
            _ => {}
        }
        let len = usize::from(u16::from_be_bytes([*data.get(i)?, *data.get(i + 1)?]));
        if len < 2 || i + len > data.len() {
            return None;
        }
        let is_frame = matches!(code, 0xC0..=0xCF) && !matches!(code, 0xC4 | 0xC8 | 0xCC);
        if is_frame {
            if frame.is_some() || len < 8 {
                return None;
            }
            let h = u16::from_be_bytes([data[i + 3], data[i + 4]]);
            let w = u16::from_be_bytes([data[i + 5], data[i + 6]]);
            let n = data[i + 7];
            if h == 0 || w == 0 || n == 0 || len != 8 + 3 * usize::from(n) {
                return None;
            }
            frame = Some([i64::from(h), i64::from(w), i64::from(n)]);
        }
        i += len;
    }
}

fn extract_jpeg_shape(attrs: &NodeAttrs) -> Result<Compute> {
    const OP: &str = "ExtractJpegShape";
    let out = if attrs.has("output_type") {
        attrs.dtype("output_type")?
    } else {
        DType::Int32
    };
    if !matches!(out, DType::Int32 | DType::Int64) {
        return Err(attrs.error(format!("output_type must be int32 or int64, got {out}")));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 1)?;
        let t = &inputs[0];
        let data = match (t.shape(), t.string_values()) {
            ([], Ok([s])) => s,
            _ => {
                return Err(invalid(
                    OP,
                    format!(
                        "contents must be scalar, got shape {}",
                        shape_string(t.shape())
                    ),
                ));
            }
        };
        let shape = jpeg_shape(data)
            .ok_or_else(|| invalid(OP, format!("Invalid JPEG data, size {}", data.len())))?;
        Ok(vec![if out == DType::Int64 {
            Tensor::vector(&shape)
        } else {
            Tensor::vector(&shape.map(|x| x as i32))
        }])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cover_the_input_once() {
        // 4 to 3: out[1] takes 2/3 of in[1] and 2/3 of in[2].
        let c = cells(1, 4.0 / 3.0);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].0, c[1].0), (1, 2));
        assert!((c[0].1 - 2.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn jpeg_headers() {
        assert_eq!(jpeg_shape(b""), None);
        assert_eq!(jpeg_shape(b"\xff\xd8\xff\xd9"), None);
        let mut j = b"\xff\xd8\xff\xc0\x00\x11\x08\x00\x05\x00\x07\x03".to_vec();
        j.extend([1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0]);
        assert_eq!(jpeg_shape(&j), None, "no scan yet");
        j.extend(b"\xff\xda\x00\x02");
        assert_eq!(jpeg_shape(&j), Some([5, 7, 3]));
    }
}
