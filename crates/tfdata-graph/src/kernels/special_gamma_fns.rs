//! The incomplete gamma and beta functions, the Hurwitz zeta function and
//! the polygamma functions, run in the tensor's own precision (float or
//! double) as TensorFlow's CPU kernels run them (Eigen's special
//! functions, which follow Cephes: Moshier, "Methods and Programs for
//! Mathematical Functions"), reimplemented from the published algorithms:
//!
//! - `igamma`/`igammac`: the power series of the lower integral for
//!   x ≤ max(1, a), otherwise the continued fraction of the upper one
//!   (Cephes `igam`/`igamc`), both carrying their derivative in `a` by
//!   forward differentiation (Moore, AS 187), which also gives the
//!   implicit-reparameterization derivative of a gamma sample in α
//!   (Figurnov, Mohamed, Mnih, 2018);
//! - `zeta`: the Euler–Maclaurin sum of Σ (k+q)^-x (Cephes `zeta`);
//! - `polygamma`: digamma for n = 0, else (-1)^(n+1) n! ζ(n+1, x).
//!
//! The incomplete beta function, on the same [`Real`] arithmetic, is
//! [`super::special_betainc`]'s.
//!
//! The elementary functions (`ln`, `exp`, `ln_1p`, `powf`, `tan`) are the
//! platform libm's, as TensorFlow's; log-gamma is glibc's algorithm
//! ([`super::lgamma_fdlibm`]).
//!
//! Every loop is bounded: the iteration limits are Eigen's, and the two
//! power series Eigen leaves open-ended stop after [`SERIES_LIMIT`] terms
//! (they converge geometrically long before). Zeta's double-precision sum
//! steps q up to 9 one at a time, so a q far below zero would take that
//! many steps: [`zeta`] refuses q < -[`ZETA_STEPS`] (TensorFlow takes
//! them all, |q| calls of `pow` per element).

use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// Terms after which an open-ended power series is cut off.
pub(super) const SERIES_LIMIT: usize = 100_000;
/// The largest number of unit steps zeta's double sum may take.
pub(super) const ZETA_STEPS: f64 = 65_536.0;

/// Arithmetic and libm of one float type, so each algorithm is written
/// once and runs in float for float tensors (as Eigen's), double for double.
pub(super) trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
{
    const DOUBLE: bool;
    /// A constant, rounded to this type from its double value (as C++'s
    /// `Scalar(1.2e3)`).
    fn lit(v: f64) -> Self;
    fn ln(self) -> Self;
    fn exp(self) -> Self;
    fn ln_1p(self) -> Self;
    fn tan(self) -> Self;
    fn floor(self) -> Self;
    /// Round half to even (C's `rint` in the default rounding mode).
    fn rint(self) -> Self;
    fn pow(self, e: Self) -> Self;
    fn abs(self) -> Self;
    fn lgamma(self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn to_f64(self) -> f64;
    /// Half the machine epsilon (1 - machep == 1).
    fn machep() -> Self;
    /// Cephes' rescaling threshold for the continued fractions, and its
    /// inverse.
    fn big() -> Self;
    fn biginv() -> Self;
    /// ln of the largest finite value.
    fn max_log() -> Self;
    /// What glibc's `log` returns for a positive subnormal under DAZ.
    /// `logf` normalizes the argument by multiplying by 2^23, which DAZ
    /// makes zero, and goes on from those bits as from 2^-150: ln 2^-150.
    /// For double, TensorFlow's results are those of -inf (observed
    /// against TensorFlow 2.21: `Igammac(1e-3, 1e-310)` is 1).
    fn ln_of_subnormal() -> Self;
    /// The tail Σ B₂ₖ/(2k s²ᵏ) of digamma's asymptotic series at s ≥ 10,
    /// with as many terms as the precision needs (zero past the point where
    /// it cannot matter).
    fn digamma_tail(s: Self) -> Self;
}

/// Horner's rule over coefficients from the highest power down, as Cephes'
/// `polevl` (a multiply then an add, no fused step).
fn polevl<T: Real>(x: T, coef: &[T]) -> T {
    let mut it = coef.iter();
    let mut y = it.next().copied().unwrap_or_else(|| T::lit(0.0));
    for &c in it {
        y = y * x + c;
    }
    y
}

/// A float or double that behaves as under TensorFlow's FTZ/DAZ CPU mode:
/// every result that would be subnormal is a zero of its sign (the libm
/// results too), so no value the algorithms see is subnormal.
#[derive(Clone, Copy, PartialEq, PartialOrd, Debug)]
pub(super) struct Flushed<T>(pub T);

macro_rules! flushed {
    ($t:ty, $double:expr, $lgamma:path, $tail:item) => {
        impl Flushed<$t> {
            fn new(v: $t) -> Self {
                Flushed(if v.is_subnormal() { (0.0 as $t).copysign(v) } else { v })
            }
        }
        impl Add for Flushed<$t> {
            type Output = Self;
            fn add(self, o: Self) -> Self {
                Self::new(self.0 + o.0)
            }
        }
        impl Sub for Flushed<$t> {
            type Output = Self;
            fn sub(self, o: Self) -> Self {
                Self::new(self.0 - o.0)
            }
        }
        impl Mul for Flushed<$t> {
            type Output = Self;
            fn mul(self, o: Self) -> Self {
                Self::new(self.0 * o.0)
            }
        }
        impl Div for Flushed<$t> {
            type Output = Self;
            fn div(self, o: Self) -> Self {
                Self::new(self.0 / o.0)
            }
        }
        impl Neg for Flushed<$t> {
            type Output = Self;
            fn neg(self) -> Self {
                Flushed(-self.0)
            }
        }
        impl AddAssign for Flushed<$t> {
            fn add_assign(&mut self, o: Self) {
                *self = *self + o;
            }
        }
        impl SubAssign for Flushed<$t> {
            fn sub_assign(&mut self, o: Self) {
                *self = *self - o;
            }
        }
        impl MulAssign for Flushed<$t> {
            fn mul_assign(&mut self, o: Self) {
                *self = *self * o;
            }
        }
        impl DivAssign for Flushed<$t> {
            fn div_assign(&mut self, o: Self) {
                *self = *self / o;
            }
        }
        impl Real for Flushed<$t> {
            const DOUBLE: bool = $double;
            fn lit(v: f64) -> Self {
                Self::new(v as $t)
            }
            fn ln(self) -> Self {
                Self::new(self.0.ln())
            }
            fn exp(self) -> Self {
                Self::new(self.0.exp())
            }
            fn ln_1p(self) -> Self {
                Self::new(self.0.ln_1p())
            }
            fn tan(self) -> Self {
                Self::new(self.0.tan())
            }
            fn floor(self) -> Self {
                Flushed(self.0.floor())
            }
            fn rint(self) -> Self {
                Flushed(self.0.round_ties_even())
            }
            fn pow(self, e: Self) -> Self {
                Self::new(self.0.powf(e.0))
            }
            fn abs(self) -> Self {
                Flushed(self.0.abs())
            }
            fn lgamma(self) -> Self {
                Self::new($lgamma(self.0))
            }
            fn is_nan(self) -> bool {
                self.0.is_nan()
            }
            fn is_infinite(self) -> bool {
                self.0.is_infinite()
            }
            fn to_f64(self) -> f64 {
                f64::from(self.0)
            }
            fn machep() -> Self {
                Flushed(<$t>::EPSILON / 2.0)
            }
            // Cephes' constants: float's are 2/ε and ε/2, double's 1/ε and ε.
            fn big() -> Self {
                Flushed(if $double { 1.0 / <$t>::EPSILON } else { 2.0 / <$t>::EPSILON })
            }
            fn biginv() -> Self {
                Flushed(if $double { <$t>::EPSILON } else { <$t>::EPSILON / 2.0 })
            }
            fn max_log() -> Self {
                Flushed(<$t>::MAX.ln())
            }
            fn ln_of_subnormal() -> Self {
                Self::lit(if $double {
                    f64::NEG_INFINITY
                } else {
                    -150.0 * std::f64::consts::LN_2
                })
            }
            $tail
        }
    };
}

flushed!(
    f32,
    false,
    super::lgamma_fdlibm::lgamma_f32,
    fn digamma_tail(s: Self) -> Self {
        // B₂ₖ/(2k) for k = 4 down to 1, in float.
        const A: [f32; 4] = [-0.004_166_667, 0.003_968_254, -0.008_333_334, 0.083_333_336];
        if s.0 < 1.0e8 {
            let z = Self::lit(1.0) / (s * s);
            z * polevl(z, &A.map(Flushed))
        } else {
            Self::lit(0.0)
        }
    }
);

flushed!(
    f64,
    true,
    super::lgamma_fdlibm::lgamma_f64,
    fn digamma_tail(s: Self) -> Self {
        // B₂ₖ/(2k) for k = 7 down to 1: 1/12, -691/32760, 1/132, -1/240,
        // 1/252, -1/120, 1/12.
        const A: [f64; 7] = [
            8.333_333_333_333_333e-2,
            -2.109_279_609_279_609_3e-2,
            7.575_757_575_757_576e-3,
            -4.166_666_666_666_667e-3,
            3.968_253_968_253_968e-3,
            -8.333_333_333_333_333e-3,
            8.333_333_333_333_333e-2,
        ];
        if s.0 < 1.0e17 {
            let z = Self::lit(1.0) / (s * s);
            z * polevl(z, &A.map(Flushed))
        } else {
            Self::lit(0.0)
        }
    }
);

/// ψ(x): reflection for x ≤ 0 (poles NaN), the recurrence up to 10, then
/// the asymptotic series, all in `T`.
pub(super) fn digamma<T: Real>(x: T) -> T {
    let (zero, one, half) = (T::lit(0.0), T::lit(1.0), T::lit(0.5));
    let mut x = x;
    let mut reflection = zero;
    let negative = x <= zero;
    if negative {
        let mut p = x.floor();
        if p == x {
            return T::lit(f64::NAN);
        }
        // π/tan(π·r), r the distance to the nearest integer (tan's zeros
        // removed).
        let mut r = x - p;
        if r != half {
            if r > half {
                p += one;
                r = x - p;
            }
            let pi = T::lit(std::f64::consts::PI);
            reflection = pi / (pi * r).tan();
        }
        x = one - x;
    }
    let mut s = x;
    let mut w = zero;
    // s starts above zero, so at most ten steps (NaN takes none).
    let mut steps = 0;
    while s < T::lit(10.0) && steps < 16 {
        w += one / s;
        s += one;
        steps += 1;
    }
    let y = s.ln() - half / s - T::digamma_tail(s) - w;
    if negative { y - reflection } else { y }
}

/// What the incomplete gamma computation yields.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Mode {
    /// P(a, x) itself (or Q for the continued fraction).
    Value,
    /// ∂P/∂a.
    Derivative,
    /// The derivative of a Gamma(a, 1) sample x in a: -(∂P/∂a) / pdf(x).
    SampleDerivative,
}

fn iterations<T: Real>(mode: Mode) -> usize {
    match mode {
        Mode::Value => 2000,
        _ if T::DOUBLE => 500,
        _ => 200,
    }
}

/// x^a e^-x / Γ(a), zero where its log underflows or is NaN.
fn igamma_factor<T: Real>(a: T, x: T, ln_x: T) -> T {
    let log = a * ln_x - x - a.lgamma();
    if log < -T::max_log() || log.is_nan() {
        return T::lit(0.0);
    }
    log.exp()
}

/// The upper integral Q(a, x) (or its derivatives) by the continued
/// fraction; for a > 0, x ≥ 1, x ≥ a.
fn igammac_fraction<T: Real>(a: T, x: T, mode: Mode) -> T {
    let (zero, one, two) = (T::lit(0.0), T::lit(1.0), T::lit(2.0));
    if x.is_infinite() {
        return zero;
    }
    let ax = igamma_factor(a, x, x.ln());
    // Where the factor vanishes the value does, and so its derivatives.
    if ax == zero {
        return zero;
    }
    let mut y = one - a;
    let mut z = x + y + one;
    let mut c = zero;
    let (mut pkm2, mut qkm2, mut pkm1) = (one, x, x + one);
    let mut qkm1 = z * x;
    let mut ans = pkm1 / qkm1;
    let (mut dpkm2, mut dqkm2, mut dpkm1, mut dqkm1) = (zero, zero, zero, -x);
    let mut dans = (dpkm1 - ans * dqkm1) / qkm1;
    for _ in 0..iterations::<T>(mode) {
        c += one;
        y += one;
        z += two;
        let yc = y * c;
        let pk = pkm1 * z - pkm2 * yc;
        let qk = qkm1 * z - qkm2 * yc;
        let dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c;
        let dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c;
        if qk != zero {
            let ans_prev = ans;
            ans = pk / qk;
            let dans_prev = dans;
            dans = (dpk - ans * dqk) / qk;
            let done = if mode == Mode::Value {
                (ans_prev - ans).abs() <= T::machep() * ans.abs()
            } else {
                (dans - dans_prev).abs() <= T::machep()
            };
            if done {
                break;
            }
        }
        (pkm2, pkm1, qkm2, qkm1) = (pkm1, pk, qkm1, qk);
        (dpkm2, dpkm1, dqkm2, dqkm1) = (dpkm1, dpk, dqkm1, dqk);
        if pk.abs() > T::big() {
            let s = T::biginv();
            pkm2 *= s;
            pkm1 *= s;
            qkm2 *= s;
            qkm1 *= s;
            dpkm2 *= s;
            dpkm1 *= s;
            dqkm2 *= s;
            dqkm1 *= s;
        }
    }
    // d/da ln(factor), needed by the derivatives only.
    let dlogax = || x.ln() - digamma(a);
    match mode {
        Mode::Value => ans * ax,
        Mode::Derivative => ans * (ax * dlogax()) + dans * ax,
        Mode::SampleDerivative => -(dans + ans * dlogax()) * x,
    }
}

/// The lower integral P(a, x) (or its derivatives) by the power series;
/// for x > 0, a > 0 and not (x > 1 and x > a).
fn igamma_series<T: Real>(a: T, x: T, ln_x: T, mode: Mode) -> T {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    let mut ax = igamma_factor(a, x, ln_x);
    if ax == zero {
        return zero;
    }
    ax /= a;
    let (mut r, mut c, mut ans) = (a, one, one);
    let (mut dc, mut dans) = (zero, zero);
    for _ in 0..iterations::<T>(mode) {
        r += one;
        let term = x / r;
        let dterm = -x / (r * r);
        dc = term * dc + dterm * c;
        dans += dc;
        c *= term;
        ans += c;
        let done = if mode == Mode::Value {
            c <= T::machep() * ans
        } else {
            dc.abs() <= T::machep() * dans.abs()
        };
        if done {
            break;
        }
    }
    // d/da ln(factor), needed by the derivatives only.
    let dlogax = || x.ln() - digamma(a + one);
    match mode {
        Mode::Value => ans * ax,
        Mode::Derivative => ans * (ax * dlogax()) + dans * ax,
        Mode::SampleDerivative => -(dans + ans * dlogax()) * x / a,
    }
}

/// P(a, x), ∂P/∂a, or a gamma sample's derivative in a (by `mode`). Zero
/// at x = 0 whatever a; NaN for x < 0, a ≤ 0 or either NaN.
pub(super) fn igamma<T: Real>(a: T, x: T, mode: Mode) -> T {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    if x == zero {
        return zero;
    }
    if x < zero || a <= zero || a.is_nan() || x.is_nan() {
        return T::lit(f64::NAN);
    }
    if x > one && x > a {
        let q = igammac_fraction(a, x, mode);
        return if mode == Mode::Value { one - q } else { -q };
    }
    igamma_series(a, x, x.ln(), mode)
}

/// Q(a, x) = 1 - P(a, x): NaN for x < 0, a ≤ 0 or either NaN.
/// `subnormal`: x was a positive subnormal, flushed to +0, whose logarithm
/// TensorFlow's libm call still takes: see [`Real::ln_of_subnormal`].
pub(super) fn igammac<T: Real>(a: T, x: T, subnormal: bool) -> T {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    if x < zero || a <= zero || a.is_nan() || x.is_nan() {
        return T::lit(f64::NAN);
    }
    if x < one || x < a {
        let ln_x = if subnormal {
            T::ln_of_subnormal()
        } else {
            x.ln()
        };
        return one - igamma_series(a, x, ln_x, Mode::Value);
    }
    igammac_fraction(a, x, Mode::Value)
}

/// (2j)! / B₂ⱼ for j = 1..12, the Euler–Maclaurin coefficients.
const ZETA_A: [f64; 12] = [
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1_892_437_580.318_379_2,
    74_724_249_600.0,
    -2_950_130_727_918.164,
    116_467_828_143_500.67,
    -4_597_978_722_407_473.0,
    1.815_210_540_194_354_6e17,
    -7.166_165_256_175_667e18,
];

/// The Hurwitz zeta function ζ(x, q) = Σₖ (k+q)^-x: +inf at x = 1, NaN for
/// x < 1; for q ≤ 0 only integer x is defined (q a non-positive integer:
/// +inf for even x, NaN for odd). `None` where the double sum would need
/// more than [`ZETA_STEPS`] steps.
pub(super) fn zeta<T: Real>(x: T, q: T) -> Option<T> {
    let (zero, half, one) = (T::lit(0.0), T::lit(0.5), T::lit(1.0));
    let machep = T::machep();
    if x == one {
        return Some(T::lit(f64::INFINITY));
    }
    if x < one {
        return Some(T::lit(f64::NAN));
    }
    if q <= zero {
        if q == q.floor() {
            let even = (half * x).rint() == half * x;
            return Some(T::lit(if even { f64::INFINITY } else { f64::NAN }));
        }
        if x != x.floor() {
            return Some(T::lit(f64::NAN));
        }
    }
    let mut s = q.pow(-x);
    let mut a = q;
    let mut b = zero;
    // The direct sum: nine terms (float), or nine and on until k+q > 9
    // (double).
    if T::DOUBLE && q.to_f64() < -ZETA_STEPS {
        return None;
    }
    let mut i = 0;
    while i < 9 || (T::DOUBLE && a <= T::lit(9.0)) {
        i += 1;
        a += one;
        b = a.pow(-x);
        s += b;
        if (b / s).abs() < machep {
            return Some(s);
        }
    }
    // A vanished term leaves nothing for the tail (whose `a` could
    // overflow).
    if b == zero {
        return Some(s);
    }
    let w = a;
    s += b * w / (x - one);
    s -= half * b;
    let mut a = one;
    let mut k = zero;
    for coef in ZETA_A {
        a *= x + k;
        b /= w;
        let t = a * b / T::lit(coef);
        s += t;
        if (t / s).abs() < machep {
            break;
        }
        k += one;
        a *= x + k;
        b /= w;
        k += one;
    }
    Some(s)
}

/// ψ⁽ⁿ⁾(x): NaN unless n is a non-negative integer; digamma for n = 0,
/// else (-1)^(n+1) n! ζ(n+1, x) with n! = exp(lgamma(n+1)).
pub(super) fn polygamma<T: Real>(n: T, x: T) -> Option<T> {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    if n.floor() != n || n < zero {
        return Some(T::lit(f64::NAN));
    }
    if n == zero {
        return Some(digamma(x));
    }
    let np1 = n + one;
    let factorial = np1.lgamma().exp();
    Some((-one).pow(np1) * factorial * zeta(np1, x)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(v: f64) -> Flushed<f64> {
        Flushed(v)
    }

    fn f(v: f32) -> Flushed<f32> {
        Flushed(v)
    }

    #[test]
    fn known_values() {
        // P(1, x) = 1 - e^-x.
        let p = igamma(d(1.0), d(2.0), Mode::Value).0;
        assert!((p - (1.0 - (-2.0f64).exp())).abs() < 1e-15);
        assert!((igammac(d(1.0), d(2.0), false).0 - (-2.0f64).exp()).abs() < 1e-15);
        assert!(igamma(f(-1.0), f(1.0), Mode::Value).0.is_nan());
        assert_eq!(igamma(f(-1.0), f(0.0), Mode::Value).0, 0.0);
        // ζ(2, 1) = π²/6.
        let z = zeta(d(2.0), d(1.0)).map_or(0.0, |z| z.0);
        assert!((z - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-15);
        assert_eq!(zeta(d(2.0), d(-3.0)), Some(d(f64::INFINITY)));
        assert!(zeta(d(3.0), d(-3.0)).is_some_and(|z| z.0.is_nan()));
        assert_eq!(zeta(d(2.0), d(-1e9 + 0.5)), None);
        // ψ'(1) = π²/6.
        let p1 = polygamma(f(1.0), f(1.0)).map_or(0.0, |p| p.0);
        assert!((p1 - 1.644_934).abs() < 1e-6);
        assert!(polygamma(d(0.5), d(1.0)).is_some_and(|p| p.0.is_nan()));
    }
}
