//! The regularized incomplete beta function `betainc`, as TensorFlow's CPU
//! kernel computes it: Cephes' `incbetf` for float and `incbet` for
//! double, which differ (power series or one of two continued fractions,
//! chosen by different rules). Apart from [`super::special_gamma_fns`]
//! because it shares nothing with the gamma family but the [`Real`]
//! arithmetic and the series limit.

use super::special_gamma_fns::{Real, SERIES_LIMIT};

/// The continued fractions of the incomplete beta integral: `small` is
/// Cephes' expansion #1 (`incbcf`), otherwise #2 (`incbd`, in x/(1-x)).
fn incbeta_fraction<T: Real>(a: T, b: T, x: T, small: bool) -> T {
    let (zero, one, two) = (T::lit(0.0), T::lit(1.0), T::lit(2.0));
    let (big, biginv) = (T::big(), T::biginv());
    let (iterations, thresh) = if T::DOUBLE {
        (300, T::lit(3.0) * T::machep())
    } else {
        (100, T::machep())
    };
    let (mut k1, mut k2, mut k3, mut k4, mut k5, mut k6, mut k7, mut k8);
    let step;
    let mut x = x;
    k1 = a;
    k3 = a;
    k4 = a + one;
    k5 = one;
    k7 = a + one;
    k8 = a + two;
    if small {
        k2 = a + b;
        k6 = b - one;
        step = one;
    } else {
        k2 = b - one;
        k6 = a + b;
        step = -one;
        x = x / (one - x);
    }
    let (mut pkm2, mut qkm2, mut pkm1, mut qkm1) = (zero, one, one, one);
    let mut ans = one;
    for _ in 0..iterations {
        let xk = -(x * k1 * k2) / (k3 * k4);
        let pk = pkm1 + pkm2 * xk;
        let qk = qkm1 + qkm2 * xk;
        (pkm2, pkm1, qkm2, qkm1) = (pkm1, pk, qkm1, qk);
        let xk = (x * k5 * k6) / (k7 * k8);
        let pk = pkm1 + pkm2 * xk;
        let qk = qkm1 + qkm2 * xk;
        (pkm2, pkm1, qkm2, qkm1) = (pkm1, pk, qkm1, qk);
        if qk != zero {
            let r = pk / qk;
            if (ans - r).abs() < r.abs() * thresh {
                return r;
            }
            ans = r;
        }
        k1 += one;
        k2 += step;
        k3 += two;
        k4 += two;
        k5 += one;
        k6 -= step;
        k7 += two;
        k8 += two;
        if qk.abs() + pk.abs() > big {
            pkm2 *= biginv;
            pkm1 *= biginv;
            qkm2 *= biginv;
            qkm1 *= biginv;
        }
        if qk.abs() < biginv || pk.abs() < biginv {
            pkm2 *= big;
            pkm1 *= big;
            qkm2 *= big;
            qkm1 *= big;
        }
    }
    ans
}

/// I_x(a, b), the regularized incomplete beta integral, for a, b > 0 and
/// 0 ≤ x ≤ 1 (NaN elsewhere), by Cephes' float algorithm (`incbetf`) for
/// float and its double one (`incbet`) for double, as Eigen has them.
pub(super) fn betainc<T: Real>(a: T, b: T, x: T) -> T {
    if T::DOUBLE {
        betainc_double(a, b, x)
    } else {
        betainc_single(a, b, x)
    }
}

/// x = 0 gives 0, x = 1 gives 1; NaN outside [0, 1] (`None` inside).
fn betainc_edge<T: Real>(x: T) -> Option<T> {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    if x <= zero || x >= one {
        return Some(if x == zero {
            zero
        } else if x == one {
            one
        } else {
            T::lit(f64::NAN)
        });
    }
    None
}

/// `incbetf`: a ≤ 1 is first raised to a + 1.
fn betainc_single<T: Real>(a: T, b: T, x: T) -> T {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    if a <= zero || b <= zero {
        return T::lit(f64::NAN);
    }
    if let Some(edge) = betainc_edge(x) {
        return edge;
    }
    if a <= one {
        let ans = incbsa_single(a + one, b, x);
        let t = a * x.ln() + b * (-x).ln_1p() + (a + b).lgamma() - (a + one).lgamma() - b.lgamma();
        return ans + t.exp();
    }
    incbsa_single(a, b, x)
}

/// `incbetf`'s core, for a > 1.
fn incbsa_single<T: Real>(aa: T, bb: T, xx: T) -> T {
    let (one, two) = (T::lit(1.0), T::lit(2.0));
    let onemx = one - xx;
    // Past the mean, the symmetric integral converges better.
    let reversed = xx > aa / (aa + bb);
    let (a, b, mut t, x) = if reversed {
        (bb, aa, xx, onemx)
    } else {
        (aa, bb, onemx, xx)
    };
    if b > T::lit(10.0) && (b * x / a).abs() < T::lit(0.3) {
        let t = incbps_single(a, b, x);
        return if reversed { one - t } else { t };
    }
    let mut ans = x * (a + b - two) / (a - one);
    if ans < one {
        ans = incbeta_fraction(a, b, x, true);
        t = b * t.ln();
    } else {
        ans = incbeta_fraction(a, b, x, false);
        t = (b - one) * t.ln();
    }
    t += a * x.ln() + (a + b).lgamma() - a.lgamma() - b.lgamma();
    t += (ans / a).ln();
    t = t.exp();
    if reversed { one - t } else { t }
}

/// `incbetf`'s power series, for b > 10 and b·x/a small.
fn incbps_single<T: Real>(a: T, b: T, x: T) -> T {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    let (mut a, mut b) = (a, b);
    let mut y = a * x.ln() + (b - one) * (-x).ln_1p() - a.ln();
    y -= a.lgamma() + b.lgamma();
    y += (a + b).lgamma();
    let t = x / (one - x);
    let (mut s, mut u) = (zero, one);
    for _ in 0..SERIES_LIMIT {
        b -= one;
        if b == zero {
            break;
        }
        a += one;
        u *= t * b / a;
        s += u;
        if u.abs() <= T::machep() {
            break;
        }
    }
    y.exp() * (one + s)
}

/// `incbet`: the power series where it converges, else a continued
/// fraction, on the side of the mean that converges better.
fn betainc_double<T: Real>(aa: T, bb: T, xx: T) -> T {
    let (zero, one, two) = (T::lit(0.0), T::lit(1.0), T::lit(2.0));
    let machep = T::machep();
    if aa <= zero || bb <= zero {
        return T::lit(f64::NAN);
    }
    if let Some(edge) = betainc_edge(xx) {
        return edge;
    }
    let near = |b: T, x: T| b * x <= one && x <= T::lit(0.95);
    if near(bb, xx) {
        return incbps_double(aa, bb, xx);
    }
    let mut w = one - xx;
    let reversed = xx > aa / (aa + bb);
    let (a, b, xc, x) = if reversed {
        (bb, aa, xx, w)
    } else {
        (aa, bb, w, xx)
    };
    // 1 - t, kept below one.
    let complement = |t: T| if t <= machep { one - machep } else { one - t };
    if reversed && near(b, x) {
        return complement(incbps_double(a, b, x));
    }
    let y = x * (a + b - two) - (a - one);
    w = if y < zero {
        incbeta_fraction(a, b, x, true)
    } else {
        incbeta_fraction(a, b, x, false) / xc
    };
    // w · xᵃ (1-x)ᵇ Γ(a+b) / (a Γ(a) Γ(b)), through logarithms.
    let mut y = a * x.ln();
    let t = b * xc.ln();
    y += t + (a + b).lgamma() - a.lgamma() - b.lgamma();
    y += (w / a).ln();
    let t = y.exp();
    if reversed { complement(t) } else { t }
}

/// `incbet`'s power series, for b·x ≤ 1 and x ≤ 0.95.
fn incbps_double<T: Real>(a: T, b: T, x: T) -> T {
    let (zero, one) = (T::lit(0.0), T::lit(1.0));
    let ai = one / a;
    let mut u = (one - b) * x;
    let mut v = u / (a + one);
    let t1 = v;
    let mut t = u;
    let mut n = T::lit(2.0);
    let mut s = zero;
    let z = T::machep() * ai;
    let mut terms = 0;
    while v.abs() > z && terms < SERIES_LIMIT {
        u = (n - b) * x / n;
        t *= u;
        v = t / (a + n);
        s += v;
        n += one;
        terms += 1;
    }
    s += t1;
    s += ai;
    let u = a * x.ln();
    let t = (a + b).lgamma() - a.lgamma() - b.lgamma() + u + s.ln();
    t.exp()
}

#[cfg(test)]
mod tests {
    use super::super::special_gamma_fns::Flushed;
    use super::*;

    #[test]
    fn known_values() {
        let (d, f) = (Flushed::<f64>, Flushed::<f32>);
        // I_x(1, 1) = x; I_x(a, b) = 1 - I_(1-x)(b, a).
        assert!((betainc(d(1.0), d(1.0), d(0.3)).0 - 0.3).abs() < 1e-15);
        assert!((betainc(f(1.0), f(1.0), f(0.3)).0 - 0.3).abs() < 1e-6);
        let (l, r) = (
            betainc(d(2.5), d(7.0), d(0.2)).0,
            betainc(d(7.0), d(2.5), d(0.8)).0,
        );
        assert!((l + r - 1.0).abs() < 1e-14);
    }
}
