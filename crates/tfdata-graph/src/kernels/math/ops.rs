//! The per-element arithmetic of the math kernels, by dtype: TF's integer
//! rules (wrapping, flooring and truncating division) and float rules.

use super::super::numeric::Num;

/// Integer and float arithmetic beyond [`Num`], in TF's semantics.
pub(super) trait Arith: Num {
    const INTEGER: bool;
    /// Division; integers truncate and the caller has ruled out zero.
    fn div(self, o: Self) -> Self;
    fn floor_div(self, o: Self) -> Self;
    fn floor_mod(self, o: Self) -> Self;
    fn trunc_div(self, o: Self) -> Self;
    fn trunc_mod(self, o: Self) -> Self;
    /// Power; for integers the caller has ruled out negative exponents.
    fn pow(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    fn round(self) -> Self;
    fn is_negative(self) -> bool;
}

macro_rules! arith_int {
    ($t:ty, $signed:expr) => {
        impl Arith for $t {
            const INTEGER: bool = true;
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self.wrapping_div(o)
            }
            #[inline(always)]
            fn floor_div(self, o: Self) -> Self {
                let q = self.wrapping_div(o);
                #[allow(unused_comparisons)]
                let negative = (self < 0) != (o < 0);
                if negative && self.wrapping_rem(o) != 0 {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
            #[inline(always)]
            fn floor_mod(self, o: Self) -> Self {
                let r = self.wrapping_rem(o);
                #[allow(unused_comparisons)]
                let differ = (r < 0) != (o < 0);
                if r != 0 && differ {
                    r.wrapping_add(o)
                } else {
                    r
                }
            }
            #[inline(always)]
            fn trunc_div(self, o: Self) -> Self {
                self.wrapping_div(o)
            }
            #[inline(always)]
            fn trunc_mod(self, o: Self) -> Self {
                self.wrapping_rem(o)
            }
            fn pow(self, o: Self) -> Self {
                // Square-and-multiply, wrapping like TF's integer pow.
                let (mut base, mut exp, mut acc) = (self, o, 1 as $t);
                while exp != 0 {
                    if exp & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    exp >>= 1;
                    base = base.wrapping_mul(base);
                }
                acc
            }
            #[inline(always)]
            fn neg(self) -> Self {
                (0 as $t).wrapping_sub(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 { self.neg() } else { self }
            }
            #[inline(always)]
            fn sign(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 {
                    (0 as $t).wrapping_sub(1)
                } else {
                    (self > 0) as $t
                }
            }
            // TF 2.21's Round kernel returns 0 for every integer input.
            fn round(self) -> Self {
                0
            }
            #[inline(always)]
            fn is_negative(self) -> bool {
                #[allow(unused_comparisons)]
                let n = self < 0;
                n && $signed
            }
        }
    };
}
arith_int!(i8, true);
arith_int!(i16, true);
arith_int!(i32, true);
arith_int!(i64, true);
arith_int!(u8, false);
arith_int!(u16, false);
arith_int!(u32, false);
arith_int!(u64, false);

/// Float-only functions.
pub(super) trait Float: Arith {
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_finite(self) -> bool;
}

macro_rules! arith_float {
    ($t:ty) => {
        impl Arith for $t {
            const INTEGER: bool = false;
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn floor_div(self, o: Self) -> Self {
                (self / o).floor()
            }
            // fmod, moved into the divisor's sign (TF's FloorMod for floats).
            #[inline(always)]
            fn floor_mod(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((o < 0.0) != (r < 0.0)) {
                    r + o
                } else {
                    r
                }
            }
            #[inline(always)]
            fn trunc_div(self, o: Self) -> Self {
                (self / o).trunc()
            }
            #[inline(always)]
            fn trunc_mod(self, o: Self) -> Self {
                self % o
            }
            fn pow(self, o: Self) -> Self {
                self.powf(o)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            // NaN stays NaN and both zeros give +0, as TF's Sign.
            #[inline(always)]
            fn sign(self) -> Self {
                if self > 0.0 {
                    1.0
                } else if self < 0.0 {
                    -1.0
                } else if self.is_nan() {
                    self
                } else {
                    0.0
                }
            }
            // Half to even, as TF's Round and Rint.
            #[inline(always)]
            fn round(self) -> Self {
                self.round_ties_even()
            }
            #[inline(always)]
            fn is_negative(self) -> bool {
                self < 0.0
            }
        }
        impl Float for $t {
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
arith_float!(f32);
arith_float!(f64);

/// Bitwise ops of the integer dtypes.
pub(super) trait Bits: Arith {
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    /// Shift count as TF clamps it: into `0..BITS`.
    fn shift_count(self) -> u32;
    fn shl(self, n: u32) -> Self;
    fn shr(self, n: u32) -> Self;
}

macro_rules! bits {
    ($t:ty) => {
        impl Bits for $t {
            fn and(self, o: Self) -> Self {
                self & o
            }
            fn or(self, o: Self) -> Self {
                self | o
            }
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            #[inline(always)]
            fn shift_count(self) -> u32 {
                #[allow(unused_comparisons)]
                if self < 0 {
                    0
                } else if (self as u64) >= u64::from(<$t>::BITS) {
                    <$t>::BITS - 1
                } else {
                    self as u32
                }
            }
            fn shl(self, n: u32) -> Self {
                self.wrapping_shl(n)
            }
            fn shr(self, n: u32) -> Self {
                self.wrapping_shr(n)
            }
        }
    };
}
bits!(i8);
bits!(i16);
bits!(i32);
bits!(i64);
bits!(u8);
bits!(u16);
bits!(u32);
bits!(u64);
