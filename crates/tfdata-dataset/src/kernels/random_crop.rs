//! ImageNet-style random resized crops (Inception's `RandomResizedCrop`):
//! a window sampled as `tf.image.sample_distorted_bounding_box` samples it
//! (whole-image box), decoded with the crop-window decoder so that rows
//! below the window are never decoded.

use tfdata_core::{DType, Result, Tensor};

use super::jpeg::{self, DctMethod, Window};
use super::{SplitMix64, from_buffer, invalid};

/// How windows are sampled: `sample_distorted_bounding_box`'s arguments,
/// the bounding box being the whole image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CropSampling {
    /// Fraction of the image's area, `[min, max]` (TF default `[0.05, 1]`;
    /// Inception's preprocessing `[0.08, 1]`).
    pub area_range: [f32; 2],
    /// Width / height, `[min, max]` (Inception's: `[3/4, 4/3]`).
    pub aspect_ratio_range: [f32; 2],
    /// The window must cover at least this fraction of the image.
    pub min_object_covered: f32,
    /// Windows tried before falling back to the whole image.
    pub max_attempts: u32,
}

impl Default for CropSampling {
    /// Inception's ImageNet preprocessing (as in TensorFlow's official
    /// ResNet input pipeline).
    fn default() -> Self {
        CropSampling {
            area_range: [0.08, 1.0],
            aspect_ratio_range: [0.75, 4.0 / 3.0],
            min_object_covered: 0.1,
            max_attempts: 10,
        }
    }
}

impl CropSampling {
    /// Checks the ranges as TensorFlow does (positive, ordered; area at
    /// most 1) and bounds the attempts.
    pub fn validate(&self, kernel: &str) -> Result<()> {
        let [a0, a1] = self.area_range;
        let [r0, r1] = self.aspect_ratio_range;
        let ok = a0 > 0.0
            && a0 <= a1
            && a1 <= 1.0
            && r0 > 0.0
            && r0 <= r1
            && r1.is_finite()
            && (0.0..=1.0).contains(&self.min_object_covered)
            && (1..=1000).contains(&self.max_attempts);
        if !ok {
            return Err(invalid(
                kernel,
                format!(
                    "area_range must be within (0, 1] and ordered, aspect_ratio_range \
                     positive and ordered, min_object_covered in [0, 1], max_attempts in \
                     1..=1000; got {self:?}"
                ),
            ));
        }
        Ok(())
    }
}

/// One attempt of TensorFlow's `GenerateRandomCrop` for an image of
/// `height` x `width` and a sampled `aspect_ratio`; `None` if it fails.
fn try_window(
    rng: &mut SplitMix64,
    height: usize,
    width: usize,
    aspect_ratio: f32,
    s: &CropSampling,
) -> Option<Window> {
    let image_area = (height * width) as f32;
    let (min_area, max_area) = (s.area_range[0] * image_area, s.area_range[1] * image_area);
    let mut h = (min_area / aspect_ratio).sqrt().round() as i64;
    let mut max_h = (max_area / aspect_ratio).sqrt().round() as i64;
    if (max_h as f32 * aspect_ratio).round() as i64 > width as i64 {
        // The largest height whose rounded width still fits.
        max_h = ((width as f32 + 0.5 - 1e-7) / aspect_ratio) as i64;
        if (max_h as f32 * aspect_ratio).round() as i64 > width as i64 {
            max_h -= 1;
        }
    }
    max_h = max_h.min(height as i64);
    h = h.min(max_h);
    if h < max_h {
        h += rng.below((max_h - h + 1) as u64) as i64;
    }
    let mut w = (h as f32 * aspect_ratio).round() as i64;
    let mut area = (w * h) as f32;
    if area < min_area {
        h += 1;
        w = (h as f32 * aspect_ratio).round() as i64;
        area = (w * h) as f32;
    }
    if area > max_area {
        h -= 1;
        w = (h as f32 * aspect_ratio).round() as i64;
        area = (w * h) as f32;
    }
    if area < min_area
        || area > max_area
        || w > width as i64
        || h > height as i64
        || w <= 0
        || h <= 0
        || area < s.min_object_covered * image_area
    {
        return None;
    }
    let (h, w) = (h as usize, w as usize);
    let y = if h < height {
        rng.below((height - h) as u64) as usize
    } else {
        0
    };
    let x = if w < width {
        rng.below((width - w) as u64) as usize
    } else {
        0
    };
    Some(Window {
        y,
        x,
        height: h,
        width: w,
    })
}

/// A window `[y, x, height, width]` of an image of `height` x `width`,
/// sampled as `sample_distorted_bounding_box` with the whole image as the
/// box (`use_image_if_no_bounding_boxes`): up to `max_attempts` windows,
/// then the whole image. Deterministic given `seed`; the draws are
/// tfdata's generator's, not TensorFlow's random stream.
pub fn sample_crop_window(height: usize, width: usize, s: &CropSampling, seed: u64) -> [usize; 4] {
    let mut rng = SplitMix64::new(seed, 0x7272_6372_6f70);
    for _ in 0..s.max_attempts {
        let unit = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        let ratio =
            unit * (s.aspect_ratio_range[1] - s.aspect_ratio_range[0]) + s.aspect_ratio_range[0];
        if let Some(w) = try_window(&mut rng, height, width, ratio, s) {
            return [w.y, w.x, w.height, w.width];
        }
    }
    [0, 0, height, width]
}

/// A random window of a JPEG ([`sample_crop_window`], after reading only
/// its headers), decoded as `decode_and_crop_jpeg` decodes it: `uint8
/// [h, w, channels]`. The TensorFlow equivalent is
/// `sample_distorted_bounding_box(extract_jpeg_shape(contents), ...)` then
/// `decode_and_crop_jpeg`. Only JPEG input.
pub fn decode_random_crop_jpeg(
    contents: &Tensor,
    channels: u8,
    dct_method: DctMethod,
    sampling: &CropSampling,
    seed: u64,
) -> Result<Tensor> {
    const KERNEL: &str = "decode_random_crop_jpeg";
    sampling.validate(KERNEL)?;
    let values = match contents.string_values() {
        Ok(v) if contents.shape().is_empty() => v,
        _ => {
            return Err(invalid(
                KERNEL,
                format!(
                    "`contents` must be a scalar string, got shape {:?}",
                    contents.shape()
                ),
            ));
        }
    };
    let data: &[u8] = &values[0];
    if !data.starts_with(b"\xff\xd8\xff") {
        return Err(invalid(KERNEL, "`contents` is not a JPEG"));
    }
    if !matches!(channels, 0 | 1 | 3) {
        return Err(invalid(
            KERNEL,
            format!("`channels` must be 0, 1 or 3 but got {channels}"),
        ));
    }
    let mut pixels = Vec::new();
    let d = jpeg::decode(
        KERNEL,
        data,
        channels,
        dct_method,
        |size| {
            let [y, x, height, width] = sample_crop_window(size.height, size.width, sampling, seed);
            Some(Window {
                y,
                x,
                height,
                width,
            })
        },
        &mut pixels,
    )?;
    from_buffer(
        DType::UInt8,
        vec![d.height as i64, d.width as i64, d.channels as i64],
        pixels,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_the_sampling_ranges() {
        let s = CropSampling::default();
        let (h, w) = (375, 500);
        let mut whole = 0;
        let mut areas = Vec::new();
        for seed in 0..2000 {
            let [y, x, ch, cw] = sample_crop_window(h, w, &s, seed);
            assert!(y + ch <= h && x + cw <= w && ch > 0 && cw > 0);
            if [y, x, ch, cw] == [0, 0, h, w] {
                whole += 1;
                continue;
            }
            let area = (ch * cw) as f32 / (h * w) as f32;
            let ratio = cw as f32 / ch as f32;
            assert!((0.08 - 1e-3..=1.0).contains(&area), "area {area}");
            // Rounding to whole pixels moves the ratio a little.
            assert!((0.74..=1.35).contains(&ratio), "ratio {ratio}");
            areas.push(area);
        }
        // Most samples succeed, and they spread over the area range.
        assert!(whole < 200, "{whole} whole-image fallbacks");
        let mean = areas.iter().sum::<f32>() / areas.len() as f32;
        assert!((0.35..0.65).contains(&mean), "mean area {mean}");
        assert_eq!(
            sample_crop_window(h, w, &s, 7),
            sample_crop_window(h, w, &s, 7)
        );
        assert!(
            CropSampling {
                area_range: [0.5, 0.2],
                ..s
            }
            .validate("k")
            .is_err()
        );
    }
}
