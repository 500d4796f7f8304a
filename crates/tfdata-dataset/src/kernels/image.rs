//! Geometric image kernels: `tf.image.resize`, crops and flips.
//!
//! Images are `[height, width, channels]` or `[batch, height, width,
//! channels]` tensors, as in `tf.image`; height, width and channels must be
//! positive (TensorFlow's `_CheckAtLeast3DImage`), the batch may be empty.

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Result, Tensor};

use super::bilinear::{Horizontal, Normalization, Rows, Sample, resize_rows};
use super::math::{self, Values};
use super::{SplitMix64, dims, from_buffer, invalid};

/// The shape of an image or a batch of images.
#[derive(Debug, Clone, Copy)]
struct ImageShape {
    batched: bool,
    batch: usize,
    height: usize,
    width: usize,
    channels: usize,
}

impl ImageShape {
    fn of(kernel: &str, image: &Tensor) -> Result<ImageShape> {
        let d = dims(image);
        let (batched, batch, rest) = match d.as_slice() {
            [h, w, c] => (false, 1, [*h, *w, *c]),
            [n, h, w, c] => (true, *n, [*h, *w, *c]),
            _ => {
                return Err(invalid(
                    kernel,
                    format!(
                        "`image` must be 3-D [height, width, channels] or 4-D [batch, height, \
                         width, channels], got shape {:?}",
                        image.shape()
                    ),
                ));
            }
        };
        if rest.contains(&0) {
            return Err(invalid(
                kernel,
                format!(
                    "inner 3 dims of `image` must be > 0, got shape {:?}",
                    image.shape()
                ),
            ));
        }
        Ok(ImageShape {
            batched,
            batch,
            height: rest[0],
            width: rest[1],
            channels: rest[2],
        })
    }

    /// The shape of an output of `height` x `width` x `channels` images.
    fn with(&self, height: usize, width: usize) -> Vec<i64> {
        let inner = [height as i64, width as i64, self.channels as i64];
        if self.batched {
            let mut s = vec![self.batch as i64];
            s.extend(inner);
            s
        } else {
            inner.to_vec()
        }
    }
}

/// A size argument: positive and representable.
fn positive(kernel: &str, name: &str, value: i64) -> Result<usize> {
    if value <= 0 || value > i64::from(i32::MAX) {
        return Err(invalid(
            kernel,
            format!("{name} must be > 0 (and fit int32), got {value}"),
        ));
    }
    Ok(value as usize)
}

/// A new tensor of `shape` made of runs `(first element, element count)` of
/// `source`, in order. Works for every dtype, strings included.
fn gather(
    source: &Tensor,
    shape: Vec<i64>,
    elements: usize,
    runs: impl Iterator<Item = (usize, usize)>,
) -> Result<Tensor> {
    match source.data() {
        TensorData::Buffer(b) => {
            let size = source.dtype().size().unwrap_or(1);
            let mut out = Vec::with_capacity(elements * size);
            for (start, len) in runs {
                out.extend_from_slice(&b[start * size..(start + len) * size]);
            }
            from_buffer(source.dtype(), shape, out)
        }
        TensorData::Strings(s) => {
            let mut out: Vec<Bytes> = Vec::with_capacity(elements);
            for (start, len) in runs {
                out.extend_from_slice(&s[start..start + len]);
            }
            Tensor::strings(out, shape)
        }
    }
}

/// The interpolation method of [`resize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMethod {
    /// `tf.image.ResizeMethod.BILINEAR`: output `float32`.
    Bilinear,
    /// `tf.image.ResizeMethod.NEAREST_NEIGHBOR`: output keeps the input dtype.
    Nearest,
}

/// `tf.image.resize(image, [height, width], method, antialias=False)`
/// (TensorFlow 2 semantics: `half_pixel_centers=True`,
/// `align_corners=False`, no aspect-ratio preservation).
///
/// `image` is 3-D or 4-D of any real dtype (integers, `float16`,
/// `bfloat16`, `float32`, `float64`). Bilinear output is `float32`
/// (`ResizeBilinear`); nearest output keeps the input dtype
/// (`ResizeNearestNeighbor`), as TensorFlow does.
///
/// Bilinear replays TensorFlow's float32 arithmetic operation for
/// operation (source coordinate `(x + 0.5) * (in / out) - 0.5`, clamped
/// neighbours, `top + (bottom - top) * y_lerp` on the two horizontally
/// interpolated rows), so results are bit-identical; a resize to the same
/// size is a plain cast, as in TensorFlow. Nearest picks
/// `min(floor((x + 0.5) * (in / out)), in - 1)` like TensorFlow.
pub fn resize(image: &Tensor, height: i64, width: i64, method: ResizeMethod) -> Result<Tensor> {
    const KERNEL: &str = "resize";
    let shape = ImageShape::of(KERNEL, image)?;
    let out_h = positive(KERNEL, "height", height)?;
    let out_w = positive(KERNEL, "width", width)?;
    if !math::is_real(image.dtype()) {
        return Err(invalid(
            KERNEL,
            format!("`image` must have a real dtype, got {}", image.dtype()),
        ));
    }
    match method {
        ResizeMethod::Nearest => resize_nearest(image, shape, out_h, out_w),
        ResizeMethod::Bilinear => {
            let out_shape = shape.with(out_h, out_w);
            if out_h == shape.height && out_w == shape.width {
                return math::cast(image, DType::Float);
            }
            let values = match math::values(KERNEL, image)? {
                Values::U8(v) => resize_bilinear(v, shape, out_h, out_w, None),
                Values::F32(v) => resize_bilinear(&v, shape, out_h, out_w, None),
            };
            from_buffer(DType::Float, out_shape, values)
        }
    }
}

/// `normalize(resize(image, [height, width]), mean, std)` in one pass:
/// bilinear [`resize`] then [`super::normalize`] without the resized image
/// in between. Each output value is computed with the same float32
/// operations in the same order (`(v - mean[c]) / std[c]` on the resized
/// `v`), so the result is bit-identical to the two kernels, and so to
/// TensorFlow's `(tf.image.resize(...) - mean) / std`. `mean` and `std`
/// hold one value per channel or one for all; `std` non-zero and finite.
pub fn resize_normalize(
    image: &Tensor,
    height: i64,
    width: i64,
    mean: &[f32],
    std: &[f32],
) -> Result<Tensor> {
    const KERNEL: &str = "resize_normalize";
    let shape = ImageShape::of(KERNEL, image)?;
    let out_h = positive(KERNEL, "height", height)?;
    let out_w = positive(KERNEL, "width", width)?;
    let post = Normalization::new(KERNEL, mean, std, shape.channels, out_w)?;
    if (out_h == shape.height && out_w == shape.width) || !math::is_real(image.dtype()) {
        // A same-size resize is a cast: the two kernels are the fast path.
        let resized = resize(image, height, width, ResizeMethod::Bilinear)?;
        return math::normalize(&resized, mean, std);
    }
    let values = match math::values(KERNEL, image)? {
        Values::U8(v) => resize_bilinear(v, shape, out_h, out_w, Some(&post)),
        Values::F32(v) => resize_bilinear(&v, shape, out_h, out_w, Some(&post)),
    };
    from_buffer(DType::Float, shape.with(out_h, out_w), values)
}

/// TensorFlow's `CalculateResizeScale` without `align_corners`.
fn resize_scale(in_size: usize, out_size: usize) -> f32 {
    in_size as f32 / out_size as f32
}

/// Bilinear resize in TensorFlow's float32 arithmetic ([`resize_rows`] per
/// image), `normalize`'s arithmetic applied on the way if asked.
fn resize_bilinear<T: Sample>(
    input: &[T],
    shape: ImageShape,
    out_h: usize,
    out_w: usize,
    normalize: Option<&Normalization>,
) -> Vec<u8> {
    let c = shape.channels;
    let horizontal = Horizontal::new(shape.width, out_w, c);
    let in_row = shape.width * c;
    let in_image = shape.height * in_row;
    let mut out = Vec::with_capacity(shape.batch * out_h * out_w * c);
    for image in input.chunks_exact(in_image).take(shape.batch) {
        let row = |y: usize| &image[y * in_row..(y + 1) * in_row];
        let interpolate = |y: usize, first: &mut [f32], second: Option<&mut [f32]>| {
            match second {
                None => horizontal.row(row(y), first),
                Some(second) => horizontal.rows2(row(y), row(y + 1), first, second),
            }
            Ok(())
        };
        // Rows come from memory: nothing can fail.
        let _ = resize_rows(
            shape.height,
            out_h,
            out_w * c,
            horizontal.buffer_len(),
            interpolate,
            normalize,
            Rows::Float(&mut out),
        );
    }
    out.into_flattened()
}

/// TensorFlow's `compute_indices` with `HalfPixelScalerForNN`.
fn nearest_indices(in_size: usize, out_size: usize) -> Vec<usize> {
    let scale = resize_scale(in_size, out_size);
    (0..out_size)
        .map(|i| (((i as f32 + 0.5) * scale).floor() as i64).clamp(0, in_size as i64 - 1) as usize)
        .collect()
}

fn resize_nearest(image: &Tensor, shape: ImageShape, out_h: usize, out_w: usize) -> Result<Tensor> {
    if shape.height >= 1 << 24 || shape.width >= 1 << 24 {
        return Err(invalid(
            "resize",
            "nearest neighbor requires max height & width of 2^24",
        ));
    }
    let ys = nearest_indices(shape.height, out_h);
    let xs = nearest_indices(shape.width, out_w);
    let c = shape.channels;
    let (in_row, in_image) = (shape.width * c, shape.height * shape.width * c);
    let runs = (0..shape.batch).flat_map(|b| {
        ys.iter().flat_map({
            let xs = &xs;
            move |&y| {
                xs.iter()
                    .map(move |&x| (b * in_image + y * in_row + x * c, c))
            }
        })
    });
    gather(
        image,
        shape.with(out_h, out_w),
        shape.batch * out_h * out_w * c,
        runs,
    )
}

/// The window `[top, top + height) x [left, left + width)` of every image.
fn crop(
    image: &Tensor,
    shape: ImageShape,
    top: usize,
    left: usize,
    height: usize,
    width: usize,
) -> Result<Tensor> {
    let c = shape.channels;
    let (in_row, in_image) = (shape.width * c, shape.height * shape.width * c);
    let runs = (0..shape.batch).flat_map(move |b| {
        (top..top + height).map(move |y| (b * in_image + y * in_row + left * c, width * c))
    });
    gather(
        image,
        shape.with(height, width),
        shape.batch * height * width * c,
        runs,
    )
}

/// `tf.image.central_crop(image, central_fraction)`: the central
/// `fraction` of each side.
///
/// As in TensorFlow the crop starts at
/// `int((size - size * fraction) / 2)` (computed in float64) and keeps
/// `size - 2 * start`; `fraction` must be in `(0, 1]` and 1 returns the
/// image unchanged. Any dtype.
pub fn central_crop(image: &Tensor, fraction: f64) -> Result<Tensor> {
    const KERNEL: &str = "central_crop";
    // Negated so that NaN is refused too.
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(invalid(
            KERNEL,
            format!("central_fraction must be within (0, 1], got {fraction}"),
        ));
    }
    let shape = ImageShape::of(KERNEL, image)?;
    if fraction == 1.0 {
        return Ok(image.clone());
    }
    let start = |size: usize| {
        let s = size as f64;
        ((s - s * fraction) / 2.0) as usize
    };
    let (top, left) = (start(shape.height), start(shape.width));
    crop(
        image,
        shape,
        top,
        left,
        shape.height - 2 * top,
        shape.width - 2 * left,
    )
}

/// `tf.image.crop_to_bounding_box(image, offset_height, offset_width,
/// target_height, target_width)`, with TensorFlow's checks: offsets
/// `>= 0`, targets `> 0`, and the box inside the image. Any dtype.
pub fn crop_to_bounding_box(
    image: &Tensor,
    offset_height: i64,
    offset_width: i64,
    target_height: i64,
    target_width: i64,
) -> Result<Tensor> {
    const KERNEL: &str = "crop_to_bounding_box";
    let shape = ImageShape::of(KERNEL, image)?;
    if offset_width < 0 {
        return Err(invalid(KERNEL, "offset_width must be >= 0."));
    }
    if offset_height < 0 {
        return Err(invalid(KERNEL, "offset_height must be >= 0."));
    }
    if target_width <= 0 {
        return Err(invalid(KERNEL, "target_width must be > 0."));
    }
    if target_height <= 0 {
        return Err(invalid(KERNEL, "target_height must be > 0."));
    }
    if shape.width as i64 - offset_width < target_width {
        return Err(invalid(
            KERNEL,
            format!(
                "width must be >= target + offset: width {}, target_width {target_width}, \
                 offset_width {offset_width}",
                shape.width
            ),
        ));
    }
    if shape.height as i64 - offset_height < target_height {
        return Err(invalid(
            KERNEL,
            format!(
                "height must be >= target + offset: height {}, target_height \
                 {target_height}, offset_height {offset_height}",
                shape.height
            ),
        ));
    }
    crop(
        image,
        shape,
        offset_height as usize,
        offset_width as usize,
        target_height as usize,
        target_width as usize,
    )
}

/// `tf.image.random_crop(image, [height, width, channels])` (or
/// `[batch, height, width, channels]` for a batch: one window for all the
/// images): a `height` x `width` window at a uniformly random offset.
///
/// Deterministic given `seed`; the offsets are drawn from tfdata's own
/// generator, not TensorFlow's random stream. `height` and `width` must be
/// positive and at most the image's ("Need value.shape >= size").
pub fn random_crop(image: &Tensor, height: i64, width: i64, seed: u64) -> Result<Tensor> {
    const KERNEL: &str = "random_crop";
    let shape = ImageShape::of(KERNEL, image)?;
    let h = positive(KERNEL, "height", height)?;
    let w = positive(KERNEL, "width", width)?;
    if h > shape.height || w > shape.width {
        return Err(invalid(
            KERNEL,
            format!(
                "Need value.shape >= size, got image {}x{} and size {h}x{w}",
                shape.height, shape.width
            ),
        ));
    }
    let mut rng = SplitMix64::new(seed, 0x7261_6e64_6372_6f70);
    let top = rng.below((shape.height - h + 1) as u64) as usize;
    let left = rng.below((shape.width - w + 1) as u64) as usize;
    crop(image, shape, top, left, h, w)
}

/// Every image, flipped horizontally when `flip(b)` says so.
fn flip_horizontal(image: &Tensor, shape: ImageShape, flip: &[bool]) -> Result<Tensor> {
    let c = shape.channels;
    let (w, in_row, in_image) = (shape.width, shape.width * c, shape.height * shape.width * c);
    let runs = (0..shape.batch).flat_map(move |b| {
        let flipped = flip[b];
        (0..shape.height).flat_map(move |y| {
            let row = b * in_image + y * in_row;
            // An unflipped row is one run; a flipped row one run per pixel.
            let pixels = if flipped { w } else { 1 };
            (0..pixels).map(move |x| {
                if flipped {
                    (row + (w - 1 - x) * c, c)
                } else {
                    (row, in_row)
                }
            })
        })
    });
    gather(image, image.shape().to_vec(), shape.batch * in_image, runs)
}

/// Every image, flipped vertically when `flip(b)` says so.
fn flip_vertical(image: &Tensor, shape: ImageShape, flip: &[bool]) -> Result<Tensor> {
    let (h, in_row) = (shape.height, shape.width * shape.channels);
    let in_image = h * in_row;
    let runs = (0..shape.batch).flat_map(move |b| {
        let flipped = flip[b];
        (0..h).map(move |y| {
            let src = if flipped { h - 1 - y } else { y };
            (b * in_image + src * in_row, in_row)
        })
    });
    gather(image, image.shape().to_vec(), shape.batch * in_image, runs)
}

/// `tf.image.flip_left_right(image)`: reverses the width axis. Any dtype.
pub fn flip_left_right(image: &Tensor) -> Result<Tensor> {
    let shape = ImageShape::of("flip_left_right", image)?;
    flip_horizontal(image, shape, &vec![true; shape.batch])
}

/// `tf.image.flip_up_down(image)`: reverses the height axis. Any dtype.
pub fn flip_up_down(image: &Tensor) -> Result<Tensor> {
    let shape = ImageShape::of("flip_up_down", image)?;
    flip_vertical(image, shape, &vec![true; shape.batch])
}

/// One fair coin per image, as TensorFlow draws one uniform per image
/// (`uniform < 0.5` flips).
fn coins(seed: u64, salt: u64, n: usize) -> Vec<bool> {
    let mut rng = SplitMix64::new(seed, salt);
    (0..n).map(|_| rng.coin()).collect()
}

/// `tf.image.random_flip_left_right(image, seed)`: each image (each image
/// of a batch independently) flipped horizontally with probability 1/2.
///
/// Deterministic given `seed`; the coins come from tfdata's own generator,
/// not TensorFlow's random stream. Any dtype.
pub fn random_flip_left_right(image: &Tensor, seed: u64) -> Result<Tensor> {
    let shape = ImageShape::of("random_flip_left_right", image)?;
    let flips = coins(seed, 0x666c_6970_6c72, shape.batch);
    flip_horizontal(image, shape, &flips)
}

/// `tf.image.random_flip_up_down(image, seed)`: each image flipped
/// vertically with probability 1/2; deterministic given `seed` (tfdata's
/// generator, not TensorFlow's). Any dtype.
pub fn random_flip_up_down(image: &Tensor, seed: u64) -> Result<Tensor> {
    let shape = ImageShape::of("random_flip_up_down", image)?;
    let flips = coins(seed, 0x666c_6970_7564, shape.batch);
    flip_vertical(image, shape, &flips)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(h: i64, w: i64, c: i64) -> Tensor {
        let values: Vec<u8> = (0..(h * w * c) as u8).collect();
        Tensor::from_slice(&values, vec![h, w, c]).unwrap()
    }

    #[test]
    fn nearest_follows_half_pixel_centers() {
        assert_eq!(nearest_indices(4, 2), [1, 3]);
        assert_eq!(nearest_indices(2, 4), [0, 0, 1, 1]);
    }

    #[test]
    fn resize_normalize_is_resize_then_normalize_bit_for_bit() {
        // A noisy uint8 image and a float32 batch, shrunk and enlarged.
        let mut rng = SplitMix64::new(5, 6);
        let bytes: Vec<u8> = (0..37 * 53 * 3).map(|_| rng.below(256) as u8).collect();
        let u8_image = Tensor::from_slice(&bytes, vec![37, 53, 3]).unwrap();
        let floats: Vec<f32> = (0..2 * 9 * 11 * 2)
            .map(|i| (i as f32 * 0.37).sin() * 300.0)
            .collect();
        let f32_batch = Tensor::from_slice(&floats, vec![2, 9, 11, 2]).unwrap();
        for (image, mean, std) in [
            (&u8_image, vec![127.5f32], vec![127.5f32]),
            (
                &u8_image,
                vec![123.68, 116.78, 103.94],
                vec![58.4, 57.1, 57.4],
            ),
            (&f32_batch, vec![0.5, -3.0], vec![0.25, 7.0]),
        ] {
            for (h, w) in [(24, 24), (5, 70), (40, 7), (1, 1)] {
                let fused = resize_normalize(image, h, w, &mean, &std).unwrap();
                let resized = resize(image, h, w, ResizeMethod::Bilinear).unwrap();
                let separate = math::normalize(&resized, &mean, &std).unwrap();
                assert_eq!(fused, separate, "{:?} -> {h}x{w}", image.shape());
            }
        }
        // Same size: the cast path.
        let same = resize_normalize(&u8_image, 37, 53, &[1.0], &[2.0]).unwrap();
        let cast = math::cast(&u8_image, DType::Float).unwrap();
        assert_eq!(same, math::normalize(&cast, &[1.0], &[2.0]).unwrap());
        assert!(resize_normalize(&u8_image, 4, 4, &[1.0, 2.0], &[1.0, 1.0]).is_err());
        assert!(resize_normalize(&u8_image, 4, 4, &[1.0], &[0.0]).is_err());
    }

    #[test]
    fn flips_and_crops_move_pixels() {
        let img = image(2, 3, 1);
        let lr = flip_left_right(&img).unwrap().to_vec::<u8>().unwrap();
        assert_eq!(lr, [2, 1, 0, 5, 4, 3]);
        let ud = flip_up_down(&img).unwrap().to_vec::<u8>().unwrap();
        assert_eq!(ud, [3, 4, 5, 0, 1, 2]);
        let c = crop_to_bounding_box(&img, 1, 1, 1, 2).unwrap();
        assert_eq!(c.shape(), [1, 2, 1]);
        assert_eq!(c.to_vec::<u8>().unwrap(), [4, 5]);
    }

    #[test]
    fn random_kernels_are_deterministic() {
        let img = image(6, 8, 3);
        let a = random_crop(&img, 3, 4, 7).unwrap();
        assert_eq!(a, random_crop(&img, 3, 4, 7).unwrap());
        assert_eq!(a.shape(), [3, 4, 3]);
        let batch = Tensor::from_slice(&vec![0u8; 64 * 2 * 2], vec![64, 2, 2, 1]).unwrap();
        let flips = coins(1, 2, 64);
        assert!(flips.iter().any(|&f| f) && flips.iter().any(|&f| !f));
        assert_eq!(
            random_flip_left_right(&batch, 3).unwrap(),
            random_flip_left_right(&batch, 3).unwrap()
        );
    }

    #[test]
    fn strings_can_be_flipped() {
        let s = Tensor::strings(vec![Bytes::from("a"), Bytes::from("b")], vec![1, 2, 1]).unwrap();
        let f = flip_left_right(&s).unwrap();
        assert_eq!(
            f.string_values().unwrap(),
            [Bytes::from("b"), Bytes::from("a")]
        );
    }
}
