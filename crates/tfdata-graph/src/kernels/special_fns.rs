//! Special functions in double precision, the algorithms TensorFlow's
//! (Eigen's) kernels use, reimplemented from their published descriptions
//! (Cephes: Moshier, "Methods and Programs for Mathematical Functions"):
//! the digamma function and the normal quantile
//! (`ndtri`, through which Eigen also computes `erfinv`). (The error
//! function and log-gamma come from the `libm` crate: fdlibm's, as glibc's.)
//!
//! Every loop is bounded: the recurrences and Newton steps stop at
//! machine precision or after a fixed number of steps.

/// The digamma function ψ(x) = Γ'(x)/Γ(x): reflection for x ≤ 0
/// (ψ(1-x) - π/tan(πx)), the recurrence ψ(x) = ψ(x+1) - 1/x up to x ≥ 10,
/// then the asymptotic series ln x - 1/(2x) - Σ B₂ₖ/(2k x²ᵏ). Poles (zero
/// and the negative integers) are NaN, as in TensorFlow.
pub(super) fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return x;
    }
    let mut s = x;
    let mut reflection = 0.0;
    let negative = x <= 0.0;
    if negative {
        let p = s.floor();
        if p == s {
            return f64::NAN;
        }
        // π/tan(π·r) with r the distance to the nearest integer below
        // (or above, past the half), which keeps tan's argument small.
        let mut r = s - p;
        if r != 0.5 {
            if r > 0.5 {
                r = s - (p + 1.0);
            }
            reflection = std::f64::consts::PI / (std::f64::consts::PI * r).tan();
        }
        s = 1.0 - s;
    }
    let mut w = 0.0;
    let mut steps = 0;
    while s < 10.0 && steps < 16 {
        w += 1.0 / s;
        s += 1.0;
        steps += 1;
    }
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
    let y = if s < 1.0e17 {
        let z = 1.0 / (s * s);
        z * polevl(z, &A)
    } else {
        0.0
    };
    let result = s.ln() - 0.5 / s - y - w;
    if negative {
        result - reflection
    } else {
        result
    }
}

/// A polynomial, coefficients from the highest degree (Cephes' `polevl`).
fn polevl(x: f64, coefficients: &[f64]) -> f64 {
    coefficients.iter().fold(0.0, |acc, &c| acc * x + c)
}

/// The standard normal CDF Φ(x) = erfc(-x/√2)/2, accurate in the lower
/// tail (where erfc's argument is large and positive).
fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2)
}

/// The standard normal density.
fn normal_pdf(x: f64) -> f64 {
    const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
    INV_SQRT_2PI * (-0.5 * x * x).exp()
}

/// The normal quantile Φ⁻¹(p): NaN outside [0, 1], ∓∞ at 0 and 1. A start
/// from Abramowitz and Stegun 26.2.23 (error below 4.5e-4), then Newton
/// steps on an accurate Φ: near the middle on erf (where Φ(x) - p would
/// cancel), in the tails on erfc. p > 1/2 by symmetry (1 - p is exact).
pub(super) fn ndtri(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p > 0.5 {
        return -ndtri(1.0 - p);
    }
    // p in (0, 1/2]: the answer is ≤ 0.
    let t = (-2.0 * p.ln()).sqrt();
    let numerator = 2.515_517 + t * (0.802_853 + t * 0.010_328);
    let denominator = 1.0 + t * (1.432_788 + t * (0.189_269 + t * 0.001_308));
    let mut x = -(t - numerator / denominator);
    if p >= 0.25 {
        // 2p - 1 is exact here; solve erf(x/√2) = 2p - 1.
        let target = 2.0 * p - 1.0;
        let sqrt2 = std::f64::consts::SQRT_2;
        for _ in 0..8 {
            let z = x / sqrt2;
            let error = libm::erf(z) - target;
            let slope = std::f64::consts::FRAC_2_SQRT_PI * (-z * z).exp() / sqrt2;
            let step = error / slope;
            x -= step;
            if step.abs() <= 1e-17 * x.abs() {
                break;
            }
        }
        return x;
    }
    // The tail: Newton on ln Φ, which stays well scaled however small p.
    let log_p = p.ln();
    for _ in 0..16 {
        let cdf = normal_cdf(x);
        let step = (cdf.ln() - log_p) * cdf / normal_pdf(x);
        if !step.is_finite() {
            break;
        }
        x -= step;
        if step.abs() <= 1e-17 * x.abs() {
            break;
        }
    }
    x
}

/// The inverse error function at x, as Eigen computes it: Φ⁻¹(p)/√2 with
/// `p = (x + 1)/2` as the caller rounded it (in the tensor's precision, so
/// the result is 0 for |x| below half an ulp of 1, as in TensorFlow).
pub(super) fn erfinv_of_half_sum(p: f64) -> f64 {
    ndtri(p) / std::f64::consts::SQRT_2
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-14 * b.abs().max(1e-300)
    }

    #[test]
    fn known_values() {
        assert!(close(digamma(1.0), -0.577_215_664_901_532_9));
        assert!(close(digamma(-2.5), 1.103_156_640_645_243_3));
        assert!(close(ndtri(0.975), 1.959_963_984_540_054));
        assert!(close(ndtri(1e-20), -9.262_340_089_798_409));
        assert!(close(erfinv_of_half_sum(0.75), 0.476_936_276_204_469_9));
        assert!(digamma(0.0).is_nan() && digamma(-3.0).is_nan());
    }
}
