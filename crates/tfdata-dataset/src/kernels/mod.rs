//! Built-in tensor kernels: the functions image and text input pipelines
//! map over their elements, runnable by the stock worker without user code.
//!
//! Every kernel is a pure function from tensors to a new tensor, named and
//! behaving like the TensorFlow 2.21 op or `tf.image` / `tf.strings`
//! function it stands for, so a pipeline written against TensorFlow gives
//! the same values here. Golden tests (`tests/kernels_tensorflow.rs`) compare
//! against real TensorFlow; where tfdata cannot match TensorFlow bit for bit
//! the kernel's rustdoc says so and by how much.
//!
//! * [`decode_jpeg`] (and [`decode_jpeg_with`] a [`DctMethod`]),
//!   [`decode_and_crop_jpeg`], [`decode_random_crop_jpeg`] (an
//!   ImageNet-style random window, [`sample_crop_window`]), [`decode_png`],
//!   [`decode_image`]: image bytes to a `uint8` `[height, width, channels]`
//!   tensor;
//! * [`resize`] (bilinear and nearest, `tf.image.resize` semantics),
//!   [`resize_normalize`] (bilinear resize and [`normalize`] in one pass),
//!   [`decode_jpeg_resize`] (a JPEG resized, and normalised, as it is
//!   decoded),
//!   [`central_crop`], [`crop_to_bounding_box`], [`random_crop`],
//!   [`flip_left_right`], [`flip_up_down`], [`random_flip_left_right`],
//!   [`random_flip_up_down`];
//! * [`cast`], [`normalize`], [`per_image_standardization`], [`scale`],
//!   [`one_hot`];
//! * [`string_split`], [`lower`], [`Vocabulary`] and [`lookup`].
//!
//! Inputs are validated (rank, dtype, sizes) and a bad one is an
//! [`Error::InvalidArgument`] whose message starts with the kernel's name;
//! corrupt image bytes are an error too, never a panic. Kernels work on the
//! tensors' contiguous little-endian buffers and allocate their output once.
//! Those outputs are large (a 224 x 224 x 3 float32 image is 600 KB): with
//! glibc's default malloc, which hands such buffers back to the kernel when
//! they are freed, faulting fresh pages in costs about a third of a
//! decode-resize-normalise pipeline's time, so a worker should run with an
//! allocator (or malloc thresholds) that keeps them.
//!
//! Random kernels take an explicit `seed` and are deterministic functions of
//! it; they do not reproduce TensorFlow's random streams (TensorFlow's
//! Philox-based stateful ops cannot be replayed outside its runtime). The
//! caller derives one seed per element (for example from a pipeline seed and
//! the element's index) so that elements get different crops and flips.

mod bilinear;
mod decode;
mod fused;
mod image;
mod jpeg;
mod math;
mod random_crop;
mod text;

pub use bilinear::{Interpolation, interpolation_weights_with};
pub use decode::{decode_and_crop_jpeg, decode_image, decode_jpeg, decode_jpeg_with, decode_png};
pub use fused::{decode_jpeg_resize, decode_jpeg_resize_as};
pub use image::{
    ResizeMethod, central_crop, crop_to_bounding_box, flip_left_right, flip_up_down, random_crop,
    random_flip_left_right, random_flip_up_down, resize, resize_normalize,
};
pub use jpeg::{DctMethod, jpeg_code_path};
pub use math::{cast, normalize, one_hot, per_image_standardization, scale};
pub use random_crop::{CropSampling, decode_random_crop_jpeg, sample_crop_window};
pub use text::{Vocabulary, lookup, lower, string_split};

use bytes::Bytes;
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, NativeType, Result, Tensor};

/// An `InvalidArgument` error naming the kernel.
fn invalid(kernel: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{kernel}: {message}"))
}

/// The little-endian buffer of a fixed-size tensor.
fn buffer<'a>(kernel: &str, t: &'a Tensor) -> Result<&'a [u8]> {
    match t.data() {
        TensorData::Buffer(b) => Ok(b),
        TensorData::Strings(_) => Err(invalid(
            kernel,
            format!("expected a numeric tensor, got {}", t.dtype()),
        )),
    }
}

/// A tensor from a freshly built buffer (the shape was computed by the
/// kernel, so a mismatch is a bug reported as `Internal`).
fn from_buffer(dtype: DType, shape: Vec<i64>, data: Vec<u8>) -> Result<Tensor> {
    Tensor::new(dtype, shape, TensorData::Buffer(Bytes::from(data)))
        .map_err(|e| Error::Internal(format!("kernel built an inconsistent tensor: {e}")))
}

/// Values encoded little-endian into one buffer.
fn encode<T: NativeType>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * T::SIZE);
    for v in values {
        v.write_le(&mut out);
    }
    out
}

/// `float32` values encoded little-endian (the hot path of image kernels:
/// fixed-size chunks, which the compiler turns into plain copies).
fn encode_f32(values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * 4];
    let (chunks, _) = out.as_chunks_mut::<4>();
    for (o, v) in chunks.iter_mut().zip(values) {
        *o = v.to_le_bytes();
    }
    out
}

/// A little-endian `float32` buffer decoded.
fn decode_f32(bytes: &[u8]) -> Vec<f32> {
    let (chunks, _) = bytes.as_chunks::<4>();
    chunks.iter().map(|c| f32::from_le_bytes(*c)).collect()
}

/// `usize` dimensions of a tensor (shapes are validated non-negative when
/// tensors are built).
fn dims(t: &Tensor) -> Vec<usize> {
    t.shape().iter().map(|&d| d as usize).collect()
}

/// A deterministic 64-bit generator (SplitMix64), seeded per kernel call.
///
/// Each random kernel mixes its own salt into the seed so that two kernels
/// given the same seed draw independent values.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64, salt: u64) -> Self {
        let mut rng = SplitMix64(seed ^ salt);
        rng.next_u64();
        rng
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`); the bias is below `n / 2^64`.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A fair coin.
    fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }
}
