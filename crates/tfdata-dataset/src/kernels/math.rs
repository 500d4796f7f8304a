//! Element-wise numeric kernels: `tf.cast`, normalisation, scaling and
//! `tf.one_hot`.

use tfdata_core::{DType, Result, Tensor};

use super::{buffer, decode_f32, dims, encode_f32, from_buffer, invalid};

/// A fixed-size element type the numeric kernels read and write.
trait Elem: Copy {
    const SIZE: usize;
    fn read(bytes: &[u8]) -> Self;
    fn write(self, out: &mut [u8]);
    fn to_num(self) -> Num;
    fn from_num(n: Num) -> Self;
}

/// A value on its way between two dtypes: integers exactly, floats as
/// float64 (exact for every float dtype).
#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn to_f32(self) -> f32 {
        match self {
            // One rounding, like static_cast<float>(int64).
            Num::Int(i) => i as f32,
            Num::Float(f) => f as f32,
        }
    }

    fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// Float to int32 as x86-64's `cvttss2si` (what TensorFlow's casts compile
/// to): truncation, and `i32::MIN` for NaN and out-of-range values.
fn cvtt32(f: f64) -> i32 {
    if f.is_nan() || f >= 2_147_483_648.0 || f <= -2_147_483_649.0 {
        i32::MIN
    } else {
        f as i32
    }
}

/// Float32 to uint8 as TensorFlow's vectorised cast: through int32
/// ([`cvtt32`]: NaN and what int32 cannot hold become its minimum), then
/// saturated, so 0. Within int32's range, clamping to [0, 255] before
/// truncating gives what truncating and then saturating gives; NaN is
/// outside the range (and `as` makes it 0 anyway).
#[inline]
fn f32_to_u8(f: f32) -> u8 {
    let in_int32 = (-2_147_483_648.0..2_147_483_648.0).contains(&f);
    let clamped = f.clamp(0.0, 255.0) as u8;
    if in_int32 { clamped } else { 0 }
}

/// [`f32_to_u8`] over little-endian float32 `src` into `out` (one byte per
/// value): 16 values at a time on SSE2.
pub(super) fn f32s_to_u8(src: &[u8], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    let done = sse2::f32s_to_u8(src, out);
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    let (values, _) = src[done * 4..].as_chunks::<4>();
    for (o, v) in out[done..].iter_mut().zip(values) {
        *o = f32_to_u8(f32::from_le_bytes(*v));
    }
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use safe_arch::{
        bitand_m128, cast_to_m128_from_m128i, cmp_lt_mask_m128, load_unaligned_m128i, m128i,
        max_m128, min_m128, pack_i16_to_u8_m128i, pack_i32_to_i16_m128i, set_splat_m128,
        store_unaligned_m128i, truncate_m128_to_m128i,
    };

    /// [`super::f32_to_u8`] on whole blocks of 16 values; returns how many
    /// values it converted. `maxps(x, 0)` is 0 for NaN (it returns its
    /// second operand then), and the `< 2^31` mask zeroes what int32 cannot
    /// hold (and NaN again), as the scalar rule does.
    pub(super) fn f32s_to_u8(src: &[u8], out: &mut [u8]) -> usize {
        let (zero, top, limit) = (
            set_splat_m128(0.0),
            set_splat_m128(255.0),
            set_splat_m128(2_147_483_648.0),
        );
        let four = |bytes: &[u8; 16]| -> m128i {
            let x = cast_to_m128_from_m128i(load_unaligned_m128i(bytes));
            let clamped = min_m128(max_m128(x, zero), top);
            truncate_m128_to_m128i(bitand_m128(clamped, cmp_lt_mask_m128(x, limit)))
        };
        let (blocks, _) = src.as_chunks::<64>();
        let (outs, _) = out.as_chunks_mut::<16>();
        let mut done = 0;
        for (block, o) in blocks.iter().zip(outs) {
            let (quarters, _) = block.as_chunks::<16>();
            let low = pack_i32_to_i16_m128i(four(&quarters[0]), four(&quarters[1]));
            let high = pack_i32_to_i16_m128i(four(&quarters[2]), four(&quarters[3]));
            store_unaligned_m128i(o, pack_i16_to_u8_m128i(low, high));
            done += 16;
        }
        done
    }
}

/// Float to int64 as `cvttsd2si`: `i64::MIN` for NaN and out-of-range.
fn cvtt64(f: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() || !(-TWO_63..TWO_63).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// `Elem` for an integer type; `$float` converts a float the way TensorFlow's
/// cast to that type does (integers always wrap, two's complement
/// truncation, like `static_cast`).
macro_rules! int_elem {
    ($t:ty, $float:expr) => {
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn read(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
            #[inline]
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn to_num(self) -> Num {
                Num::Int(i128::from(self))
            }
            #[inline]
            fn from_num(n: Num) -> Self {
                match n {
                    Num::Int(i) => i as $t,
                    Num::Float(f) => $float(f),
                }
            }
        }
    };
}

/// Narrow integers: floats saturate through int32 as TensorFlow's vectorised
/// casts do.
macro_rules! narrow_int {
    ($t:ty) => {
        int_elem!(
            $t,
            |f: f64| cvtt32(f).clamp(i32::from(<$t>::MIN), i32::from(<$t>::MAX)) as $t
        );
    };
}
narrow_int!(u8);
narrow_int!(i8);
narrow_int!(u16);
narrow_int!(i16);

int_elem!(i32, cvtt32);
int_elem!(i64, cvtt64);
int_elem!(u32, |f: f64| {
    // TensorFlow: truncation where it fits (negatives wrap), else 2^31.
    let t = f.trunc();
    if t > -2_147_483_648.0 && t < 4_294_967_296.0 {
        (t as i64) as u32
    } else {
        1u32 << 31
    }
});
int_elem!(u64, |f: f64| {
    // TensorFlow: truncation where it fits (negatives wrap), else 2^63.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let t = f.trunc();
    if (-TWO_63..TWO_63).contains(&t) {
        (t as i64) as u64
    } else if (TWO_63..2.0 * TWO_63).contains(&t) {
        t as u64
    } else {
        1u64 << 63
    }
});

impl Elem for f32 {
    const SIZE: usize = 4;
    #[inline]
    fn read(bytes: &[u8]) -> Self {
        f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
    #[inline]
    fn write(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn to_num(self) -> Num {
        Num::Float(f64::from(self))
    }
    #[inline]
    fn from_num(n: Num) -> Self {
        n.to_f32()
    }
}

impl Elem for f64 {
    const SIZE: usize = 8;
    #[inline]
    fn read(bytes: &[u8]) -> Self {
        let mut b = [0u8; 8];
        b.copy_from_slice(bytes);
        f64::from_le_bytes(b)
    }
    #[inline]
    fn write(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn to_num(self) -> Num {
        Num::Float(self)
    }
    #[inline]
    fn from_num(n: Num) -> Self {
        n.to_f64()
    }
}

impl Elem for bool {
    const SIZE: usize = 1;
    #[inline]
    fn read(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    #[inline]
    fn write(self, out: &mut [u8]) {
        out[0] = u8::from(self);
    }
    #[inline]
    fn to_num(self) -> Num {
        Num::Int(i128::from(self))
    }
    /// Non-zero is true (NaN included).
    #[inline]
    fn from_num(n: Num) -> Self {
        match n {
            Num::Int(i) => i != 0,
            Num::Float(f) => f != 0.0,
        }
    }
}

/// IEEE half precision, stored as its bits.
#[derive(Clone, Copy)]
struct F16(u16);

/// bfloat16, stored as its bits.
#[derive(Clone, Copy)]
struct BF16(u16);

/// Eigen's `float_to_half_rtne`: round to nearest even, overflow to
/// infinity, NaN to a quiet NaN.
fn f32_to_f16(x: f32) -> u16 {
    const F16_MAX: u32 = (127 + 16) << 23;
    const DENORM_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7FFF_FFFF;
    let half = if abs >= F16_MAX {
        if abs > 0x7F80_0000 { 0x7E00 } else { 0x7C00 }
    } else if abs < 113 << 23 {
        // Subnormal or zero: align the mantissa with a float addition,
        // which rounds to nearest even.
        let v = f32::from_bits(abs) + f32::from_bits(DENORM_MAGIC);
        (v.to_bits() - DENORM_MAGIC) as u16
    } else {
        let mant_odd = (abs >> 13) & 1;
        let v = abs
            .wrapping_add(((15u32).wrapping_sub(127) << 23).wrapping_add(0xFFF))
            .wrapping_add(mant_odd);
        (v >> 13) as u16
    };
    half | sign
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1F);
    let mant = u32::from(h & 0x3FF);
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: m * 2^-24.
            let v = m as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1F, 0) => sign | 0x7F80_0000,
        (0x1F, m) => sign | 0x7FC0_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Eigen's `float_to_bfloat16_rtne`.
fn f32_to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        return if x.is_sign_negative() { 0xFFC0 } else { 0x7FC0 };
    }
    let bits = x.to_bits();
    let rounding = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}

fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

macro_rules! half_elem {
    ($t:ident, $to:ident, $from:ident) => {
        impl Elem for $t {
            const SIZE: usize = 2;
            #[inline]
            fn read(bytes: &[u8]) -> Self {
                $t(u16::from_le_bytes([bytes[0], bytes[1]]))
            }
            #[inline]
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.0.to_le_bytes());
            }
            #[inline]
            fn to_num(self) -> Num {
                Num::Float(f64::from($to(self.0)))
            }
            /// Through float32, as Eigen converts ints and doubles.
            #[inline]
            fn from_num(n: Num) -> Self {
                $t($from(n.to_f32()))
            }
        }
    };
}
half_elem!(F16, f16_to_f32, f32_to_f16);
half_elem!(BF16, bf16_to_f32, f32_to_bf16);

/// Runs `$body` with `$t` the element type of `$dtype`, or evaluates to
/// `$otherwise` for dtypes the numeric kernels do not handle.
macro_rules! with_elem {
    ($dtype:expr, $t:ident => $body:expr, $otherwise:expr) => {
        match $dtype {
            DType::UInt8 => {
                type $t = u8;
                $body
            }
            DType::Int8 => {
                type $t = i8;
                $body
            }
            DType::UInt16 => {
                type $t = u16;
                $body
            }
            DType::Int16 => {
                type $t = i16;
                $body
            }
            DType::UInt32 => {
                type $t = u32;
                $body
            }
            DType::Int32 => {
                type $t = i32;
                $body
            }
            DType::UInt64 => {
                type $t = u64;
                $body
            }
            DType::Int64 => {
                type $t = i64;
                $body
            }
            DType::Half => {
                type $t = F16;
                $body
            }
            DType::BFloat16 => {
                type $t = BF16;
                $body
            }
            DType::Float => {
                type $t = f32;
                $body
            }
            DType::Double => {
                type $t = f64;
                $body
            }
            DType::Bool => {
                type $t = bool;
                $body
            }
            _ => $otherwise,
        }
    };
}

/// Whether `dtype` is a real number type (TensorFlow's
/// `TF_CALL_REAL_NUMBER_TYPES`: integers and floats, not bool).
pub(super) fn is_real(dtype: DType) -> bool {
    dtype != DType::Bool && with_elem!(dtype, _T => true, false)
}

fn convert<S: Elem, D: Elem>(src: &[u8]) -> Vec<u8> {
    let n = src.len() / S::SIZE;
    let mut out = vec![0u8; n * D::SIZE];
    for (s, d) in src.chunks_exact(S::SIZE).zip(out.chunks_exact_mut(D::SIZE)) {
        D::from_num(S::read(s).to_num()).write(d);
    }
    out
}

fn convert_to_f32<S: Elem>(src: &[u8]) -> Vec<f32> {
    src.chunks_exact(S::SIZE)
        .map(|s| S::read(s).to_num().to_f32())
        .collect()
}

/// A numeric tensor's values as kernels consume them: `uint8` borrowed
/// (their fast paths), anything else cast to `float32`.
pub(super) enum Values<'a> {
    U8(&'a [u8]),
    F32(Vec<f32>),
}

/// The values of a numeric tensor (real or bool) for a float32 kernel,
/// converted as `tf.cast(t, tf.float32)` would.
pub(super) fn values<'a>(kernel: &str, t: &'a Tensor) -> Result<Values<'a>> {
    let bytes = buffer(kernel, t)?;
    match t.dtype() {
        DType::UInt8 => return Ok(Values::U8(bytes)),
        DType::Float => return Ok(Values::F32(decode_f32(bytes))),
        _ => {}
    }
    with_elem!(
        t.dtype(),
        S => Ok(Values::F32(convert_to_f32::<S>(bytes))),
        Err(invalid(kernel, format!("expected a numeric tensor, got {}", t.dtype())))
    )
}

/// `tf.cast(t, dtype)` between the real dtypes and bool (`uint8` ...
/// `uint64`, `int8` ... `int64`, `float16`, `bfloat16`, `float32`,
/// `float64`, `bool`).
///
/// TensorFlow's rules, matched exactly:
/// * integer to integer wraps (two's complement truncation);
/// * float to integer truncates toward zero;
/// * integer to float rounds to nearest even (one rounding, so int64 to
///   float32 is correctly rounded); float64 to float32 too, overflowing to
///   infinity; `float16`/`bfloat16` are produced from float32 (Eigen's
///   round-to-nearest-even, so a float64 or an integer is rounded twice,
///   as in TensorFlow);
/// * to bool: non-zero is true (NaN too); from bool: 0 and 1.
///
/// Float to integer for NaN, infinities and out-of-range values has no
/// single TensorFlow answer: its results differ between its vectorised and
/// scalar code paths (on x86-64, float32 300.5 to uint8 is 255 in a long
/// tensor and 44 in a short one). tfdata follows TensorFlow's vectorised
/// float32 path, which is what images take: to int32 and int64 the
/// integer's minimum; to int8/uint8/int16/uint16 through int32 (NaN and
/// out-of-int32 to `i32::MIN`) then saturated; to uint32 the wrapped
/// truncation within `(-2^31, 2^32)`, else `2^31`; to uint64 within
/// `(-2^63, 2^64)`, else `2^63`.
///
/// Strings, complex and quantized dtypes are refused.
pub fn cast(t: &Tensor, dtype: DType) -> Result<Tensor> {
    const KERNEL: &str = "cast";
    if t.dtype() == dtype {
        return Ok(t.clone());
    }
    let unsupported = || {
        invalid(
            KERNEL,
            format!("Cast {} to {} is not supported", t.dtype(), dtype),
        )
    };
    if t.dtype() == DType::String {
        return Err(unsupported());
    }
    let src = buffer(KERNEL, t)?;
    if (t.dtype(), dtype) == (DType::Float, DType::UInt8) {
        // Images back to bytes after a resize: the generic path's rule
        // (through int32, then saturated) without its per-value dispatch,
        // which cost as much as the bilinear resize itself.
        let (values, _) = src.as_chunks::<4>();
        let mut out = vec![0u8; values.len()];
        f32s_to_u8(src, &mut out);
        return from_buffer(dtype, t.shape().to_vec(), out);
    }
    let out = with_elem!(
        t.dtype(),
        S => with_elem!(dtype, D => convert::<S, D>(src), return Err(unsupported())),
        return Err(unsupported())
    );
    from_buffer(dtype, t.shape().to_vec(), out)
}

/// `f(x, channel)` over every element of a numeric tensor whose last axis
/// (of size `channels`, 1 for "no channels") is the channel, as float32
/// little-endian bytes, in one pass: `x` is the element cast to float32 as
/// `tf.cast` would; `uint8` goes through a per-channel table of `f`.
fn map_to_f32(
    kernel: &str,
    t: &Tensor,
    channels: usize,
    f: impl Fn(f32, usize) -> f32,
) -> Result<Vec<u8>> {
    let src = buffer(kernel, t)?;
    let n = t.num_elements() as usize;
    let mut out = vec![0u8; n * 4];
    let (dst, _) = out.as_chunks_mut::<4>();
    match t.dtype() {
        DType::UInt8 => {
            let tables: Vec<[[u8; 4]; 256]> = (0..channels)
                .map(|c| std::array::from_fn(|x| f(x as f32, c).to_le_bytes()))
                .collect();
            for (o, x) in dst
                .chunks_exact_mut(channels)
                .zip(src.chunks_exact(channels))
            {
                for ((o, &x), table) in o.iter_mut().zip(x).zip(&tables) {
                    *o = table[usize::from(x)];
                }
            }
        }
        DType::Float if channels == 1 => {
            let (src, _) = src.as_chunks::<4>();
            for (o, x) in dst.iter_mut().zip(src) {
                *o = f(f32::from_le_bytes(*x), 0).to_le_bytes();
            }
        }
        DType::Float => {
            let (src, _) = src.as_chunks::<4>();
            for (o, x) in dst
                .chunks_exact_mut(channels)
                .zip(src.chunks_exact(channels))
            {
                for (c, (o, x)) in o.iter_mut().zip(x).enumerate() {
                    *o = f(f32::from_le_bytes(*x), c).to_le_bytes();
                }
            }
        }
        dtype => with_elem!(
            dtype,
            S => {
                let pixels = src.chunks_exact(S::SIZE * channels);
                for (o, x) in dst.chunks_exact_mut(channels).zip(pixels) {
                    for (c, (o, x)) in o.iter_mut().zip(x.chunks_exact(S::SIZE)).enumerate() {
                        *o = f(S::read(x).to_num().to_f32(), c).to_le_bytes();
                    }
                }
            },
            return Err(invalid(kernel, format!("expected a numeric tensor, got {dtype}")))
        ),
    }
    Ok(out)
}

/// A parameter list given per channel, or once for all channels.
fn per_channel(kernel: &str, name: &str, values: &[f32], channels: usize) -> Result<Vec<f32>> {
    match values.len() {
        1 => Ok(vec![values[0]; channels]),
        n if n == channels => Ok(values.to_vec()),
        n => Err(invalid(
            kernel,
            format!("`{name}` has {n} values but the image has {channels} channels"),
        )),
    }
}

/// Per-channel normalisation `(x - mean[c]) / std[c]`, as
/// `(tf.cast(image, tf.float32) - mean) / std`: output `float32`, the
/// subtraction and the division in float32, so results are bit-identical
/// to TensorFlow's.
///
/// The channel is the last axis (any rank >= 1, last dimension > 0);
/// `mean` and `std` hold one value per channel, or one for all. `std` must
/// be finite and non-zero, `mean` finite. The input may be any real dtype
/// or bool; `uint8` input goes through a per-channel lookup table.
pub fn normalize(image: &Tensor, mean: &[f32], std: &[f32]) -> Result<Tensor> {
    const KERNEL: &str = "normalize";
    let channels = match image.shape().last() {
        Some(&c) if c > 0 => c as usize,
        _ => {
            return Err(invalid(
                KERNEL,
                format!(
                    "`image` needs a non-empty channel (last) axis, got shape {:?}",
                    image.shape()
                ),
            ));
        }
    };
    if mean.iter().any(|m| !m.is_finite()) {
        return Err(invalid(
            KERNEL,
            format!("`mean` must be finite, got {mean:?}"),
        ));
    }
    if std.iter().any(|s| !s.is_finite() || *s == 0.0) {
        return Err(invalid(
            KERNEL,
            format!("`std` must be finite and non-zero, got {std:?}"),
        ));
    }
    let mean = per_channel(KERNEL, "mean", mean, channels)?;
    let std = per_channel(KERNEL, "std", std, channels)?;
    // The same constants for every channel (the common case): one flat loop
    // the compiler vectorises; the arithmetic, and so the result, is the same.
    if mean.iter().all(|&m| m == mean[0]) && std.iter().all(|&d| d == std[0]) {
        let (m, d) = (mean[0], std[0]);
        let out = map_to_f32(KERNEL, image, 1, move |x, _| (x - m) / d)?;
        return from_buffer(DType::Float, image.shape().to_vec(), out);
    }
    let out = map_to_f32(KERNEL, image, channels, |x, c| (x - mean[c]) / std[c])?;
    from_buffer(DType::Float, image.shape().to_vec(), out)
}

/// `x * factor + offset` as `float32` (`tf.cast(t, tf.float32) * factor +
/// offset`, two float32 roundings, no fused multiply-add), for example
/// `factor = 1/255` to bring `uint8` pixels to `[0, 1]`. Any shape; any
/// real dtype or bool.
pub fn scale(t: &Tensor, factor: f32, offset: f32) -> Result<Tensor> {
    const KERNEL: &str = "scale";
    let out = map_to_f32(KERNEL, t, 1, |x, _| x * factor + offset)?;
    from_buffer(DType::Float, t.shape().to_vec(), out)
}

/// `tf.image.per_image_standardization(image)`: each image (the last three
/// axes; any leading axes are a batch) becomes
/// `(x - mean) / max(stddev, 1 / sqrt(N))` with `N` its number of
/// elements, output `float32`.
///
/// TensorFlow reduces in float32 with Eigen's summation order; tfdata sums
/// in float64 and rounds the mean and variance to float32, then applies
/// TensorFlow's float32 formula. Results agree to a few float32 ulps (the
/// golden tests use 1e-5).
pub fn per_image_standardization(image: &Tensor) -> Result<Tensor> {
    const KERNEL: &str = "per_image_standardization";
    let d = dims(image);
    if d.len() < 3 || d[d.len() - 3..].contains(&0) {
        return Err(invalid(
            KERNEL,
            format!(
                "`image` must be at least 3-D with non-empty inner 3 dims, got shape {:?}",
                image.shape()
            ),
        ));
    }
    let per_image: usize = d[d.len() - 3..].iter().product();
    let mut v = match values(KERNEL, image)? {
        Values::U8(v) => v.iter().map(|&x| f32::from(x)).collect(),
        Values::F32(v) => v,
    };
    let min_stddev = 1.0 / (per_image as f32).sqrt();
    for img in v.chunks_exact_mut(per_image) {
        let n = per_image as f64;
        let mean = (img.iter().map(|&x| f64::from(x)).sum::<f64>() / n) as f32;
        let variance = (img
            .iter()
            .map(|&x| {
                let d = x - mean;
                f64::from(d * d)
            })
            .sum::<f64>()
            / n) as f32;
        let adjusted = variance.sqrt().max(min_stddev);
        for x in img.iter_mut() {
            *x = (*x - mean) / adjusted;
        }
    }
    from_buffer(DType::Float, image.shape().to_vec(), encode_f32(&v))
}

/// `tf.one_hot(indices, depth, on_value, off_value)` with `axis=-1` and
/// `float32` values: shape `indices.shape + [depth]`, `on_value` at each
/// index and `off_value` elsewhere. An index outside `[0, depth)` gives an
/// all-`off_value` row, as in TensorFlow. Indices may be `uint8`, `int8`,
/// `int32` or `int64` (TensorFlow's `TI`); `depth` must be `>= 0`.
/// Largest `one_hot` output, in values (4 GiB of float32).
pub const MAX_ONE_HOT_ELEMENTS: usize = 1 << 30;

pub fn one_hot(indices: &Tensor, depth: i64, on_value: f32, off_value: f32) -> Result<Tensor> {
    const KERNEL: &str = "one_hot";
    if depth < 0 {
        return Err(invalid(
            KERNEL,
            format!("depth must be non-negative, got: {depth}"),
        ));
    }
    let bytes = buffer(KERNEL, indices)?;
    let idx: Vec<i64> = match indices.dtype() {
        DType::UInt8 => bytes.iter().map(|&b| i64::from(b)).collect(),
        DType::Int8 => bytes.iter().map(|&b| i64::from(b as i8)).collect(),
        DType::Int32 => bytes
            .chunks_exact(4)
            .map(|c| i64::from(<i32 as Elem>::read(c)))
            .collect(),
        DType::Int64 => bytes.chunks_exact(8).map(<i64 as Elem>::read).collect(),
        other => {
            return Err(invalid(
                KERNEL,
                format!("`indices` must be uint8, int8, int32 or int64, got {other}"),
            ));
        }
    };
    let depth_u = depth as usize;
    let total = idx
        .len()
        .checked_mul(depth_u)
        // A depth from a pipeline must not make a worker allocate without bound.
        .filter(|&n| n <= MAX_ONE_HOT_ELEMENTS)
        .ok_or_else(|| {
            invalid(
                KERNEL,
                format!("output of {} x {depth} values is too large", idx.len()),
            )
        })?;
    let mut out = vec![off_value; total];
    for (row, &i) in out.chunks_exact_mut(depth_u.max(1)).zip(&idx) {
        if (0..depth).contains(&i) {
            row[i as usize] = on_value;
        }
    }
    let mut shape = indices.shape().to_vec();
    shape.push(depth);
    from_buffer(DType::Float, shape, encode_f32(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions_round_to_nearest_even() {
        assert_eq!(f32_to_f16(1.0), 0x3C00);
        assert_eq!(f32_to_f16(65504.0), 0x7BFF);
        assert_eq!(f32_to_f16(65519.0), 0x7BFF);
        assert_eq!(f32_to_f16(65520.0), 0x7C00);
        assert_eq!(f32_to_f16(f32::NAN) & 0x7E00, 0x7E00);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001);
        assert_eq!(f32_to_f16(2.98e-8), 0x0000);
        for h in [0x0001u16, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xC000] {
            assert_eq!(f32_to_f16(f16_to_f32(h)), h);
        }
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        assert_eq!(f32_to_bf16(1.2), 0x3F9A);
        assert_eq!(bf16_to_f32(0x4049), 3.140625);
    }

    #[test]
    fn float_to_int_follows_tensorflow_x86() {
        assert_eq!(cvtt32(f64::NAN), i32::MIN);
        assert_eq!(cvtt32(-2.9), -2);
        assert_eq!(<u8 as Elem>::from_num(Num::Float(300.5)), 255);
        assert_eq!(<u8 as Elem>::from_num(Num::Float(-1.5)), 0);
        assert_eq!(<i8 as Elem>::from_num(Num::Float(f64::NAN)), -128);
        assert_eq!(<u8 as Elem>::from_num(Num::Int(300)), 44);
        assert_eq!(<u32 as Elem>::from_num(Num::Float(-1.5)), u32::MAX);
        assert_eq!(
            <u64 as Elem>::from_num(Num::Float(1e19)),
            10_000_000_000_000_000_000
        );
        assert_eq!(<u64 as Elem>::from_num(Num::Float(2e19)), 1 << 63);
    }

    #[test]
    fn one_hot_marks_in_range_indices() {
        let idx = Tensor::from_slice(&[0i32, 2, -1, 3], vec![2, 2]).unwrap();
        let t = one_hot(&idx, 3, 1.0, 0.0).unwrap();
        assert_eq!(t.shape(), [2, 2, 3]);
        assert_eq!(
            t.to_vec::<f32>().unwrap(),
            [1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 0., 0.]
        );
        assert_eq!(one_hot(&idx, 0, 1.0, 0.0).unwrap().shape(), [2, 2, 0]);
        assert!(one_hot(&idx, -1, 1.0, 0.0).is_err());
    }

    /// The float32 → uint8 fast path gives the generic path's values, for
    /// every kind of float: in range, fractions, negatives, past 255, past
    /// int32, infinities and NaN.
    #[test]
    fn float_to_uint8_takes_the_generic_rule() {
        let mut values: Vec<f32> = vec![
            0.0,
            -0.0,
            0.4,
            0.99,
            1.0,
            127.5,
            254.999,
            255.0,
            255.5,
            256.0,
            300.5,
            -0.5,
            -1.0,
            -300.0,
            2_147_483_648.0,
            -2_147_483_904.0,
            3.0e10,
            -3.0e10,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
        ];
        values.extend((0..2000).map(|i| i as f32 * 0.173 - 50.0));
        let t = Tensor::from_slice(&values, vec![values.len() as i64]).unwrap();
        let fast = cast(&t, DType::UInt8).unwrap();
        let generic = convert::<f32, u8>(buffer("cast", &t).unwrap());
        let tfdata_core::tensor::TensorData::Buffer(fast) = fast.data() else {
            unreachable!()
        };
        assert_eq!(&fast[..], &generic[..]);
    }
}
