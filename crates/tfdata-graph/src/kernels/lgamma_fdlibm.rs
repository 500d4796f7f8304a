//! Log-gamma of a positive argument as glibc's `lgamma_r`/`lgammaf_r`
//! compute it, which TensorFlow's kernels call: fdlibm's algorithm (Sun's
//! rational approximations on [0, 2] and [2, 8], Stirling's series above)
//! with the platform's `log`, which is glibc's own. (The `libm` crate ports
//! the same algorithm but with fdlibm's `log`, which differs from glibc's
//! in the last bit now and then, and that bit, scaled by an exponential,
//! is tens of ulps in the incomplete gamma and beta functions.)
//!
//! Only x > 0 is computed here; other arguments (zero, negatives, NaN,
//! infinities, where glibc has its own treatment of negatives) go to the
//! `libm` crate. The coefficients are fdlibm's (Sun Microsystems, 1993:
//! "Permission to use, copy, modify, and distribute this software is
//! freely granted, provided that this notice is preserved"), written as
//! their bit patterns, which the `libm` crate's port lists.

macro_rules! lgamma_positive {
    ($name:ident, $t:ty, $bits:ty, $fallback:path, $cut:ident, {$($consts:item)*}) => {
        /// ln Γ(x) for x > 0, as glibc computes it.
        pub(super) fn $name(x: $t) -> $t {
            const fn b(v: $bits) -> $t {
                <$t>::from_bits(v)
            }
            $($consts)*
            let [tc, tf, tt] = TC_TF_TT;
            if !(x > 0.0 && x.is_finite()) {
                return $fallback(x).0;
            }
            if x < $cut(Cut::Tiny) {
                return -x.ln();
            }
            if x == 1.0 || x == 2.0 {
                return 0.0;
            }
            if x < 2.0 {
                // lgamma(x) = lgamma(x+1) - log(x) below 0.9.
                let (mut r, y, branch) = if x < $cut(Cut::Low) {
                    let r = -x.ln();
                    if x >= $cut(Cut::LowA) {
                        (r, 1.0 - x, 0)
                    } else if x >= $cut(Cut::LowT) {
                        (r, x - (tc - 1.0), 1)
                    } else {
                        (r, x, 2)
                    }
                } else if x >= $cut(Cut::HighA) {
                    (0.0, 2.0 - x, 0)
                } else if x >= $cut(Cut::HighT) {
                    (0.0, x - tc, 1)
                } else {
                    (0.0, x - 1.0, 2)
                };
                match branch {
                    0 => {
                        let z = y * y;
                        let p1 = horner(z, &[A[0], A[2], A[4], A[6], A[8], A[10]]);
                        let p2 = z * horner(z, &[A[1], A[3], A[5], A[7], A[9], A[11]]);
                        let p = y * p1 + p2;
                        r += p - 0.5 * y;
                    }
                    1 => {
                        // Around the minimum at tc, in three interleaved parts.
                        let z = y * y;
                        let w = z * y;
                        let p1 = horner(w, &[T[0], T[3], T[6], T[9], T[12]]);
                        let p2 = horner(w, &[T[1], T[4], T[7], T[10], T[13]]);
                        let p3 = horner(w, &[T[2], T[5], T[8], T[11], T[14]]);
                        let p = z * p1 - (tt - w * (p2 + y * p3));
                        r += tf + p;
                    }
                    _ => {
                        let p1 = y * horner(y, &U);
                        let p2 = horner(y, &V);
                        r += -0.5 * y + p1 / p2;
                    }
                }
                return r;
            }
            if x < 8.0 {
                // lgamma(2 + y) by a rational function, then the
                // recurrence's product of (y + k) in one log.
                let i = x as i32;
                let y = x - i as $t;
                let p = y * horner(y, &S);
                let q = horner(y, &R);
                let mut r = 0.5 * y + p / q;
                let mut z: $t = 1.0;
                for k in (2..i).rev() {
                    z *= y + k as $t;
                }
                if i >= 3 {
                    r += z.ln();
                }
                return r;
            }
            if x < $cut(Cut::Huge) {
                // Stirling: (x - 1/2)(ln x - 1) + W(1/x).
                let t = x.ln();
                let z = 1.0 / x;
                let y = z * z;
                let w = W[0] + z * horner(y, &W[1..]);
                return (x - 0.5) * (t - 1.0) + w;
            }
            x * (x.ln() - 1.0)
        }
    };
}

/// The thresholds between fdlibm's approximations.
#[derive(Clone, Copy)]
enum Cut {
    /// Below: -ln x.
    Tiny,
    /// Below: through lgamma(x + 1).
    Low,
    LowA,
    LowT,
    HighA,
    HighT,
    /// 2^58: above, x (ln x - 1).
    Huge,
}

/// fdlibm tests a float's bits; as values: `ix < c` is `x < c`, `ix <= c`
/// is `x < c + 1`.
fn cut_f32(c: Cut) -> f32 {
    f32::from_bits(match c {
        Cut::Tiny => 0x3500_0000,
        Cut::Low => 0x3f66_6667,
        Cut::LowA => 0x3f3b_4a20,
        Cut::LowT => 0x3e6d_3308,
        Cut::HighA => 0x3fdd_a618,
        Cut::HighT => 0x3f9d_a620,
        Cut::Huge => 0x5c80_0000,
    })
}

/// For double, fdlibm tests the high word only.
fn cut_f64(c: Cut) -> f64 {
    let hi: u64 = match c {
        Cut::Tiny => 0x3b90_0000,
        Cut::Low => 0x3fec_cccd,
        Cut::LowA => 0x3fe7_6944,
        Cut::LowT => 0x3fcd_a661,
        Cut::HighA => 0x3ffb_b4c3,
        Cut::HighT => 0x3ff3_b4c4,
        Cut::Huge => 0x4390_0000,
    };
    f64::from_bits(hi << 32)
}

/// c₀ + x(c₁ + x(c₂ + …)), innermost first (a multiply, then an add).
fn horner<T>(x: T, coef: &[T]) -> T
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    let mut it = coef.iter().rev();
    let Some(&last) = it.next() else {
        return x;
    };
    it.fold(last, |acc, &c| c + x * acc)
}

lgamma_positive!(lgamma_f32, f32, u32, libm::lgammaf_r, cut_f32, {
    const A: [f32; 12] = [
        b(0x3d9e_233f),
        b(0x3ea5_1a66),
        b(0x3d89_f001),
        b(0x3ca8_9915),
        b(0x3bf2_027e),
        b(0x3b3d_6ec6),
        b(0x3a9c_54a1),
        b(0x3a05_b634),
        b(0x3967_9767),
        b(0x38e2_8445),
        b(0x37d3_83a2),
        b(0x383c_2c75),
    ];
    const T: [f32; 15] = [
        b(0x3ef7_b95e),
        b(0xbe17_213c),
        b(0x3d84_5a15),
        b(0xbd06_4d47),
        b(0x3c93_373d),
        b(0xbc28_fcfe),
        b(0x3bc7_e707),
        b(0xbb71_77fe),
        b(0x3b14_1699),
        b(0xbab7_f476),
        b(0x3a66_f867),
        b(0xba0d_3085),
        b(0x39a5_7b6b),
        b(0xb9a3_f927),
        b(0x39af_e9f7),
    ];
    const U: [f32; 6] = [
        b(0xbd9e_233f),
        b(0x3f22_00f4),
        b(0x3fba_3ae7),
        b(0x3f7a_4bb2),
        b(0x3e6a_7578),
        b(0x3c5b_3c5e),
    ];
    const S: [f32; 7] = [
        b(0xbd9e_233f),
        b(0x3e5c_245a),
        b(0x3ea6_cc7a),
        b(0x3e15_dce6),
        b(0x3cda_40e4),
        b(0x3af1_35b4),
        b(0x3805_ff67),
    ];
    const W: [f32; 7] = [
        b(0x3ed6_7f1d),
        b(0x3daa_aaab),
        b(0xbb36_0b61),
        b(0x3a50_0cfd),
        b(0xba1c_065c),
        b(0x3a5b_3dd2),
        b(0xbad5_c4e8),
    ];
    const V: [f32; 6] = [
        1.0,
        b(0x401d_2ebe),
        b(0x4008_392d),
        b(0x3f44_efdf),
        b(0x3dd5_72af),
        b(0x3b52_d5db),
    ];
    const R: [f32; 7] = [
        1.0,
        b(0x3fb2_2d3b),
        b(0x3f38_d0c5),
        b(0x3e30_0f6e),
        b(0x3c98_bf54),
        b(0x3a4b_eed6),
        b(0x36f5_d7bd),
    ];
    const TC_TF_TT: [f32; 3] = [b(0x3fbb_16c3), b(0xbdf8_cdcd), b(0x31e6_1c52)];
});

lgamma_positive!(lgamma_f64, f64, u64, libm::lgamma_r, cut_f64, {
    const A: [f64; 12] = [
        b(0x3fb3_c467_e37d_b0c8),
        b(0x3fd4_a34c_c4a6_0fad),
        b(0x3fb1_3e00_1a55_62a7),
        b(0x3f95_1322_ac92_547b),
        b(0x3f7e_404f_b68f_efe8),
        b(0x3f67_add8_ccb7_926b),
        b(0x3f53_8a94_116f_3f5d),
        b(0x3f40_b6c6_89b9_9c00),
        b(0x3f2c_f2ec_ed10_e54d),
        b(0x3f1c_5088_987d_fb07),
        b(0x3efa_7074_428c_fa52),
        b(0x3f07_858e_90a4_5837),
    ];
    const T: [f64; 15] = [
        b(0x3fde_f72b_c8ee_38a2),
        b(0xbfc2_e427_8dc6_c509),
        b(0x3fb0_8b42_94d5_419b),
        b(0xbfa0_c9a8_df35_b713),
        b(0x3f92_66e7_970a_f9ec),
        b(0xbf85_1f9f_ba91_ec6a),
        b(0x3f78_fce0_e370_e344),
        b(0xbf6e_2eff_b3e9_14d7),
        b(0x3f62_82d3_2e15_c915),
        b(0xbf56_fe8e_bf2d_1af1),
        b(0x3f4c_df0c_ef61_a8e9),
        b(0xbf41_a610_9c73_e0ec),
        b(0x3f34_af6d_6c0e_bbf7),
        b(0xbf34_7f24_ecc3_8c38),
        b(0x3f35_fd3e_e8c2_d3f4),
    ];
    const U: [f64; 6] = [
        b(0xbfb3_c467_e37d_b0c8),
        b(0x3fe4_401e_8b00_5dff),
        b(0x3ff7_475c_d119_bd6f),
        b(0x3fef_4976_44ea_8450),
        b(0x3fcd_4eae_f601_0924),
        b(0x3f8b_678b_bf2b_ab09),
    ];
    const S: [f64; 7] = [
        b(0xbfb3_c467_e37d_b0c8),
        b(0x3fcb_848b_36e2_0878),
        b(0x3fd4_d98f_4f13_9f59),
        b(0x3fc2_bb9c_bee5_f2f7),
        b(0x3f9b_481c_7e93_9961),
        b(0x3f5e_26b6_7368_f239),
        b(0x3f00_bfec_dd17_e945),
    ];
    const W: [f64; 7] = [
        b(0x3fda_cfe3_90c9_7d69),
        b(0x3fb5_5555_5555_553b),
        b(0xbf66_c16c_16b0_2e5c),
        b(0x3f4a_019f_98cf_38b6),
        b(0xbf43_80cb_8c0f_e741),
        b(0x3f4b_67ba_4cda_d5d1),
        b(0xbf5a_b89d_0b9e_43e4),
    ];
    const V: [f64; 6] = [
        1.0,
        b(0x4003_a5d7_c2bd_619c),
        b(0x4001_0725_a42b_18f5),
        b(0x3fe8_9dfb_e450_50af),
        b(0x3fba_ae55_d653_7c88),
        b(0x3f6a_5abb_57d0_cf61),
    ];
    const R: [f64; 7] = [
        1.0,
        b(0x3ff6_45a7_62c4_ab74),
        b(0x3fe7_1a18_93d3_dcdc),
        b(0x3fc6_01ed_ccfb_df27),
        b(0x3f93_17ea_742e_d475),
        b(0x3f49_7dda_ca41_a95b),
        b(0x3ede_baf7_a5b3_8140),
    ];
    const TC_TF_TT: [f64; 3] = [
        b(0x3ff7_62d8_6356_be3f),
        b(0xbfbf_19b9_bcc3_8a42),
        b(0xbc50_c7ca_a48a_971f),
    ];
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(lgamma_f64(1.0), 0.0);
        assert_eq!(lgamma_f32(2.0), 0.0);
        assert!((lgamma_f64(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-15);
        assert!((lgamma_f64(10.0) - 362_880f64.ln()).abs() < 1e-13);
        assert!((lgamma_f32(4.0) - 6f32.ln()).abs() < 1e-6);
        assert!(lgamma_f64(f64::NAN).is_nan());
        assert_eq!(lgamma_f32(0.0), f32::INFINITY);
    }
}
