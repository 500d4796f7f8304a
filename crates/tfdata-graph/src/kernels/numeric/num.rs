//! [`Num`]: the arithmetic every numeric element type has, in TensorFlow's
//! semantics (wrapping integers, NaN-propagating max and min, the wide
//! type a Mean sums in), implemented once per type by two macros. Apart
//! from the buffer access and loops of [`super`] because it is about
//! values, not tensors; the math and reduction kernels both use it.

use super::Elem;

/// Arithmetic shared by the math and reduction kernels, with TensorFlow's
/// integer semantics: wrapping on overflow (what TF's C++ does on every
/// platform it ships for), NaN-propagating max and min.
pub(in crate::kernels) trait Num: Elem {
    const ONE: Self;
    /// Identity of Max: -inf for floats, the minimum for integers.
    const MAX_IDENTITY: Self;
    const MIN_IDENTITY: Self;
    /// Eigen's `lowest()` / `highest()`, where ArgMax and ArgMin start.
    const LOWEST: Self;
    const HIGHEST: Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn maximum(self, o: Self) -> Self;
    fn minimum(self, o: Self) -> Self;
    fn to_f64(self) -> f64;
    /// `f64 -> Self` as C++'s `static_cast` for in-range values.
    fn from_f64(v: f64) -> Self;
    /// Division by the element count of a reduction (`n > 0`).
    fn div_count(self, n: u64) -> Self;
    /// What Mean sums in: TF sums 8- to 32-bit integers in 64 bits so their
    /// means do not overflow (64-bit integers wrap).
    type Wide: Num;
    fn widen(self) -> Self::Wide;
    fn narrow(w: Self::Wide) -> Self;
}

macro_rules! num_int {
    ($t:ty, $w:ty) => {
        impl Num for $t {
            type Wide = $w;
            fn widen(self) -> $w {
                self as $w
            }
            fn narrow(w: $w) -> Self {
                w as $t
            }
            const ONE: Self = 1;
            const MAX_IDENTITY: Self = <$t>::MIN;
            const MIN_IDENTITY: Self = <$t>::MAX;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn maximum(self, o: Self) -> Self {
                if self < o { o } else { self }
            }
            #[inline(always)]
            fn minimum(self, o: Self) -> Self {
                if o < self { o } else { self }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            // An empty integer Mean is 0 in TF (its NaN identity cast).
            fn div_count(self, n: u64) -> Self {
                (self as i128).checked_div(n as i128).unwrap_or(0) as $t
            }
        }
    };
}
num_int!(i8, i64);
num_int!(i16, i64);
num_int!(i32, i64);
num_int!(i64, i64);
num_int!(u8, u64);
num_int!(u16, u64);
num_int!(u32, u64);
num_int!(u64, u64);

macro_rules! num_float {
    ($t:ty) => {
        impl Num for $t {
            type Wide = $t;
            fn widen(self) -> $t {
                self
            }
            fn narrow(w: $t) -> Self {
                w
            }
            const ONE: Self = 1.0;
            const MAX_IDENTITY: Self = <$t>::NEG_INFINITY;
            const MIN_IDENTITY: Self = <$t>::INFINITY;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            // TF 2.21's Maximum and Max propagate NaN; between equal values
            // (0.0 and -0.0) the first operand wins.
            #[inline(always)]
            fn maximum(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if self < o {
                    o
                } else {
                    self
                }
            }
            #[inline(always)]
            fn minimum(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() {
                    <$t>::NAN
                } else if o < self {
                    o
                } else {
                    self
                }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn div_count(self, n: u64) -> Self {
                // The mean of nothing: TensorFlow's NaN is the positive
                // quiet one (x86's 0.0 / 0.0 gives the negative).
                if n == 0 { <$t>::NAN } else { self / n as $t }
            }
        }
    };
}
num_float!(f32);
num_float!(f64);
