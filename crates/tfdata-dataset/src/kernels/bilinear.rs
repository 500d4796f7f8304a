//! The arithmetic of a bilinear resize, TensorFlow's `ResizeBilinear` with
//! half-pixel centers: the interpolation weights, the horizontal pass over
//! input rows ([`Horizontal`]), and the vertical pass with an optional
//! normalisation ([`resize_rows`]). `image::resize` runs them over images in
//! memory, `fused::decode_jpeg_resize` over rows as a JPEG decoder hands them
//! out.
//!
//! Every output value is TensorFlow's float32 expression, operation for
//! operation: `left + (right - left) * x_lerp` per input row, then
//! `top + (bottom - top) * y_lerp`. On x86-64 the horizontal pass over
//! `uint8` rows of 3 or 4 channels runs on SSE2 (part of every x86-64 CPU, so
//! no runtime detection), one pixel's channels per 4-lane operation; lane by
//! lane the operations are the scalar ones (IEEE float32, no fused
//! multiply-add), so the bits are the same.

use tfdata_core::Result;

/// TensorFlow's `CachedInterpolation`: the two input indices an output
/// index reads, and the weight of the upper one.
pub struct Interpolation {
    pub lower: usize,
    pub upper: usize,
    pub lerp: f32,
}

/// TensorFlow's `compute_interpolation_weights` with half-pixel centers
/// (scale `in / out` in float32, as `CalculateResizeScale` without
/// `align_corners`).
pub(super) fn interpolation_weights(in_size: usize, out_size: usize) -> Vec<Interpolation> {
    interpolation_weights_with(in_size, out_size, in_size as f32 / out_size as f32, true)
}

/// TensorFlow's `compute_interpolation_weights` for any `scale`, with its
/// `HalfPixelScaler` (`half_pixel`) or its legacy scaler (graph kernels'
/// `ResizeBilinear` with `half_pixel_centers=False`).
pub fn interpolation_weights_with(
    in_size: usize,
    out_size: usize,
    scale: f32,
    half_pixel: bool,
) -> Vec<Interpolation> {
    (0..out_size)
        .map(|i| {
            let x = if half_pixel {
                (i as f32 + 0.5) * scale - 0.5
            } else {
                i as f32 * scale
            };
            let floor = x.floor();
            Interpolation {
                lower: (floor as i64).max(0) as usize,
                upper: (x.ceil() as i64).min(in_size as i64 - 1) as usize,
                lerp: x - floor,
            }
        })
        .collect()
}

/// A pixel sample that converts to `float32` as TensorFlow's
/// `static_cast<float>` does.
pub(super) trait Sample: Copy {
    fn f(self) -> f32;

    /// The row as bytes, if samples are `uint8`: the vector path's input.
    fn bytes(row: &[Self]) -> Option<&[u8]>;
}

impl Sample for u8 {
    #[inline]
    fn f(self) -> f32 {
        f32::from(self)
    }

    fn bytes(row: &[u8]) -> Option<&[u8]> {
        Some(row)
    }
}

impl Sample for f32 {
    #[inline]
    fn f(self) -> f32 {
        self
    }

    fn bytes(_: &[f32]) -> Option<&[u8]> {
        None
    }
}

/// The horizontal pass of one image size: each input row interpolated to
/// the output width (TensorFlow's `top` and `bottom` for every output
/// column). The weights are the same for every row, so they are computed
/// once per image.
pub(super) struct Horizontal {
    channels: usize,
    xs: Vec<Interpolation>,
    /// The vector path's taps, one per output pixel (empty when the path
    /// does not apply): the offset of its `lower` pixel's first sample and
    /// the weight of the pixel after it. Where TensorFlow clamps `upper` to
    /// `lower` (the edges of an enlargement) the weight is 0: TensorFlow
    /// computes `l + (l - l) * lerp`, the tap `l + (r - l) * 0` with `r`
    /// the next pixel, both exactly `l` for the finite samples of a `uint8`
    /// row.
    taps: Vec<Tap>,
}

#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Tap {
    offset: usize,
    lerp: f32,
}

/// Bytes each tap of the vector path reads from `offset`: two pixels of up
/// to 4 channels.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const WINDOW: usize = 8;

impl Horizontal {
    pub(super) fn new(in_width: usize, out_width: usize, channels: usize) -> Horizontal {
        let xs = interpolation_weights(in_width, out_width);
        // Each output pixel reads pixel `lower` and the one after it (or
        // `lower` alone); anything else is left to the scalar path.
        let adjacent = xs
            .iter()
            .all(|x| x.lower < in_width && (x.upper == x.lower || x.upper == x.lower + 1));
        let taps = if cfg!(target_arch = "x86_64") && matches!(channels, 3 | 4) && adjacent {
            xs.iter()
                .map(|x| Tap {
                    offset: x.lower * channels,
                    lerp: if x.upper == x.lower { 0.0 } else { x.lerp },
                })
                .collect()
        } else {
            Vec::new()
        };
        Horizontal { channels, xs, taps }
    }

    /// The length of the buffers [`Horizontal::row`] writes to: an output
    /// row and one value more (the vector path writes 4 lanes per pixel).
    pub(super) fn buffer_len(&self) -> usize {
        self.xs.len() * self.channels + 1
    }

    /// One input row interpolated into `out` (of [`Horizontal::buffer_len`]).
    pub(super) fn row<T: Sample>(&self, row: &[T], out: &mut [f32]) {
        let done = match T::bytes(row) {
            Some(bytes) if !self.taps.is_empty() => self.vector_rows([bytes], [&mut *out]),
            _ => 0,
        };
        self.scalar_row(row, out, done);
    }

    /// Two input rows of the same width interpolated at once, sharing the
    /// weights' loads and the loop.
    pub(super) fn rows2<T: Sample>(&self, a: &[T], b: &[T], out_a: &mut [f32], out_b: &mut [f32]) {
        let done = match (T::bytes(a), T::bytes(b)) {
            (Some(a), Some(b)) if !self.taps.is_empty() && a.len() == b.len() => {
                self.vector_rows([a, b], [&mut *out_a, &mut *out_b])
            }
            _ => 0,
        };
        self.scalar_row(a, out_a, done);
        self.scalar_row(b, out_b, done);
    }

    /// The output pixels from `from` on, in TensorFlow's scalar form.
    fn scalar_row<T: Sample>(&self, row: &[T], out: &mut [f32], from: usize) {
        let c = self.channels;
        for (o, x) in out.chunks_exact_mut(c).zip(&self.xs).skip(from) {
            let l = &row[x.lower * c..][..c];
            let r = &row[x.upper * c..][..c];
            for ((o, l), r) in o.iter_mut().zip(l).zip(r) {
                *o = l.f() + (r.f() - l.f()) * x.lerp;
            }
        }
    }

    /// The leading output pixels whose window lies inside the rows (all
    /// but the last one or two), on the vector path; how many were done.
    #[cfg(target_arch = "x86_64")]
    fn vector_rows<const N: usize>(&self, rows: [&[u8]; N], outs: [&mut [f32]; N]) -> usize {
        let len = rows[0].len();
        // Taps are in increasing offset order.
        let body = self.taps.partition_point(|t| t.offset + WINDOW <= len);
        let taps = &self.taps[..body];
        match self.channels {
            3 => sse2::lerp_rows::<3, 6, N>(rows, taps, outs),
            _ => sse2::lerp_rows::<4, 8, N>(rows, taps, outs),
        }
        body
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn vector_rows<const N: usize>(&self, _: [&[u8]; N], _: [&mut [f32]; N]) -> usize {
        0
    }
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use safe_arch::{
        add_m128, byte_shr_imm_u128_m128i, convert_to_m128_from_i32_m128i, m128, mul_m128,
        set_i64_m128i_s, set_splat_m128, sub_m128, unpack_low_i8_m128i, unpack_low_i16_m128i,
        zeroed_m128i,
    };

    use super::{Tap, WINDOW};

    /// `l + (r - l) * w` for the `C` channels of one pixel: `window` holds
    /// pixel `lower` then the next one; `SHIFT` is `2 * C`, the bytes
    /// between them once widened to 16 bits. Lanes past `C` are junk.
    #[inline(always)]
    fn lerp_pixel<const SHIFT: i32>(window: [u8; WINDOW], w: m128) -> m128 {
        let zero = zeroed_m128i();
        let wide = unpack_low_i8_m128i(set_i64_m128i_s(i64::from_le_bytes(window)), zero);
        let l = convert_to_m128_from_i32_m128i(unpack_low_i16_m128i(wide, zero));
        let shifted = byte_shr_imm_u128_m128i::<SHIFT>(wide);
        let r = convert_to_m128_from_i32_m128i(unpack_low_i16_m128i(shifted, zero));
        add_m128(l, mul_m128(sub_m128(r, l), w))
    }

    /// The pixels of `taps` in each of the `N` rows (same length): pixel
    /// `j`'s 4 lanes go to `out[j * C..][..4]`, the junk lanes of a
    /// 3-channel pixel overwritten by the next pixel (or landing in the
    /// buffer's spare value).
    pub(super) fn lerp_rows<const C: usize, const SHIFT: i32, const N: usize>(
        rows: [&[u8]; N],
        taps: &[Tap],
        mut outs: [&mut [f32]; N],
    ) {
        let len = rows[0].len();
        // Same lengths, so one bounds check covers every row.
        let rows = rows.map(|r| &r[..len]);
        for (j, tap) in taps.iter().enumerate() {
            let w = set_splat_m128(tap.lerp);
            for (row, out) in rows.iter().zip(outs.iter_mut()) {
                let mut window = [0u8; WINDOW];
                window.copy_from_slice(&row[tap.offset..tap.offset + WINDOW]);
                let pixel = lerp_pixel::<SHIFT>(window, w).to_array();
                out[j * C..j * C + 4].copy_from_slice(&pixel);
            }
        }
    }
}

/// A normalisation applied to each output row of [`resize_rows`]:
/// `(v - mean[i]) / std[i]` for the row's `i`-th value.
pub(super) struct Normalization {
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl Normalization {
    /// `mean` and `std` (one value per channel, or one for all) repeated
    /// over an output row of `width` pixels, checked as `normalize` checks
    /// them.
    pub(super) fn new(
        kernel: &str,
        mean: &[f32],
        std: &[f32],
        channels: usize,
        width: usize,
    ) -> Result<Normalization> {
        let per_channel = |name: &str, v: &[f32]| match v.len() {
            1 => Ok(vec![v[0]; channels]),
            n if n == channels => Ok(v.to_vec()),
            n => Err(super::invalid(
                kernel,
                format!("`{name}` has {n} values but the image has {channels} channels"),
            )),
        };
        let (mean, std) = (per_channel("mean", mean)?, per_channel("std", std)?);
        if mean.iter().any(|m| !m.is_finite()) || std.iter().any(|s| !s.is_finite() || *s == 0.0) {
            return Err(super::invalid(
                kernel,
                "`mean` must be finite and `std` finite and non-zero",
            ));
        }
        let row = |v: &[f32]| v.iter().copied().cycle().take(width * channels).collect();
        Ok(Normalization {
            mean: row(&mean),
            std: row(&std),
        })
    }
}

/// One image's bilinear resize, row by row. `interpolate(y, first,
/// second)` fills `first` with input row `y` interpolated horizontally and,
/// when `second` is given, `second` with row `y + 1` (one pass for two
/// rows); rows are asked for in increasing `y`, each once, so they may be
/// decoded as they are needed. Buffers are [`Horizontal::buffer_len`] long
/// for an output row of `out_row` values. Each output row, normalised if
/// asked, is appended to `out` ([`Rows`]: float32 little-endian, or cast to
/// `uint8`), never zero-filled first.
///
/// TensorFlow computes `top` and `bottom` from the two input rows for each
/// output pixel; they depend only on the input row and the output column,
/// so each input row is interpolated horizontally once (two rows cached)
/// and every output row is `top + (bottom - top) * y_lerp` over whole rows:
/// the same operations on the same values, hence the same bits, with less
/// work.
pub(super) fn resize_rows(
    in_h: usize,
    out_h: usize,
    out_row: usize,
    buffer_len: usize,
    mut interpolate: impl FnMut(usize, &mut [f32], Option<&mut [f32]>) -> Result<()>,
    normalize: Option<&Normalization>,
    mut out: Rows<'_>,
) -> Result<()> {
    let ys = interpolation_weights(in_h, out_h);
    // For `uint8` output: one float32 row, in L1, cast as it is finished.
    let mut scratch: Vec<[u8; 4]> = match out {
        Rows::Float(_) => Vec::new(),
        Rows::UInt8(_) => Vec::with_capacity(out_row),
    };
    // (input row index, that row interpolated): rows[0] holds the `lower`
    // row of the current output row, rows[1] the `upper` one.
    let mut rows = [
        (usize::MAX, vec![0f32; buffer_len]),
        (usize::MAX, vec![0f32; buffer_len]),
    ];
    for y in &ys {
        if rows[0].0 != y.lower {
            if rows[1].0 == y.lower {
                rows.swap(0, 1);
            } else if y.upper == y.lower + 1 {
                // Both rows are new: one pass for the two.
                let [(top_y, top), (bottom_y, bottom)] = &mut rows;
                interpolate(y.lower, top, Some(bottom))?;
                (*top_y, *bottom_y) = (y.lower, y.upper);
            } else {
                interpolate(y.lower, &mut rows[0].1, None)?;
                rows[0].0 = y.lower;
            }
        }
        if rows[1].0 != y.upper {
            if y.upper == y.lower {
                // The edge of an enlargement: the same row twice.
                let [(_, top), (bottom_y, bottom)] = &mut rows;
                bottom.copy_from_slice(top);
                *bottom_y = y.upper;
            } else {
                interpolate(y.upper, &mut rows[1].1, None)?;
                rows[1].0 = y.upper;
            }
        }
        let (top, bottom, lerp) = (&rows[0].1[..out_row], &rows[1].1[..out_row], y.lerp);
        let row_out: &mut Vec<[u8; 4]> = match &mut out {
            Rows::Float(v) => v,
            Rows::UInt8(_) => {
                scratch.clear();
                &mut scratch
            }
        };
        // Exact-size iterators: `extend` writes without per-value capacity
        // checks, and the loops vectorise.
        match normalize {
            None => row_out.extend(
                top.iter()
                    .zip(bottom)
                    .map(|(&t, &b)| (t + (b - t) * lerp).to_le_bytes()),
            ),
            Some(n) => row_out.extend(
                top.iter()
                    .zip(bottom)
                    .zip(&n.mean)
                    .zip(&n.std)
                    .map(|(((&t, &b), &m), &d)| (((t + (b - t) * lerp) - m) / d).to_le_bytes()),
            ),
        }
        if let Rows::UInt8(bytes) = &mut out {
            let start = bytes.len();
            bytes.resize(start + out_row, 0);
            super::math::f32s_to_u8(scratch.as_flattened(), &mut bytes[start..]);
        }
    }
    Ok(())
}

/// Where [`resize_rows`] appends its output rows: float32 little-endian
/// values, or those values cast to `uint8` as `cast` does (map fusion of a
/// resize and the cast back to bytes: the float32 image is never stored).
pub(super) enum Rows<'a> {
    Float(&'a mut Vec<[u8; 4]>),
    UInt8(&'a mut Vec<u8>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::SplitMix64;

    #[test]
    fn weights_follow_half_pixel_centers() {
        let w = interpolation_weights(4, 2);
        assert_eq!((w[0].lower, w[0].upper, w[0].lerp), (0, 1, 0.5));
        assert_eq!((w[1].lower, w[1].upper, w[1].lerp), (2, 3, 0.5));
        // Enlarging clamps at the edges.
        let w = interpolation_weights(2, 4);
        assert_eq!((w[0].lower, w[0].upper), (0, 0));
        assert_eq!((w[3].lower, w[3].upper), (1, 1));
    }

    /// TensorFlow's expression for every output value of one row.
    fn reference(row: &[u8], in_w: usize, out_w: usize, c: usize) -> Vec<f32> {
        let xs = interpolation_weights(in_w, out_w);
        let mut out = Vec::new();
        for x in &xs {
            for k in 0..c {
                let l = f32::from(row[x.lower * c + k]);
                let r = f32::from(row[x.upper * c + k]);
                out.push(l + (r - l) * x.lerp);
            }
        }
        out
    }

    #[test]
    fn horizontal_pass_is_tensorflows_expression_bit_for_bit() {
        // Shrinking and enlarging, by ratios with and without clamped
        // edges, every channel count, rows of one pixel; one row and two
        // at a time (the vector path for 3 and 4 channels on x86-64).
        let mut rng = SplitMix64::new(1, 2);
        for c in 1..=4 {
            for (in_w, out_w) in [
                (500, 224),
                (224, 500),
                (37, 53),
                (53, 37),
                (1, 5),
                (5, 1),
                (2, 2),
                (3, 2),
                (1000, 7),
                (9, 17),
            ] {
                let a: Vec<u8> = (0..in_w * c).map(|_| rng.below(256) as u8).collect();
                let b: Vec<u8> = (0..in_w * c).map(|_| rng.below(256) as u8).collect();
                let pass = Horizontal::new(in_w, out_w, c);
                let n = out_w * c;
                let mut one = vec![f32::NAN; pass.buffer_len()];
                pass.row(&a, &mut one);
                let (mut two_a, mut two_b) = (one.clone(), one.clone());
                pass.rows2(&a, &b, &mut two_a, &mut two_b);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                let what = format!("{in_w} -> {out_w}, {c} channels");
                assert_eq!(
                    bits(&one[..n]),
                    bits(&reference(&a, in_w, out_w, c)),
                    "{what}"
                );
                assert_eq!(bits(&two_a[..n]), bits(&one[..n]), "{what}");
                assert_eq!(
                    bits(&two_b[..n]),
                    bits(&reference(&b, in_w, out_w, c)),
                    "{what}"
                );
                // The same pass over float32 samples (the scalar path).
                let floats: Vec<f32> = a.iter().map(|&v| f32::from(v)).collect();
                let mut scalar = vec![0f32; pass.buffer_len()];
                pass.row(&floats, &mut scalar);
                assert_eq!(bits(&scalar[..n]), bits(&one[..n]), "{what}");
            }
        }
    }

    #[test]
    fn the_vector_path_is_taken_for_uint8_rgb() {
        let pass = Horizontal::new(500, 224, 3);
        assert_eq!(
            pass.taps.is_empty(),
            !cfg!(target_arch = "x86_64"),
            "3-channel rows use the vector path on x86-64"
        );
        assert!(Horizontal::new(500, 224, 1).taps.is_empty());
    }
}
