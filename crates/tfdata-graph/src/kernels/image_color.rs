//! Colour kernels: `AdjustHue`, `AdjustSaturation`, `RGBToHSV` and
//! `HSVToRGB`, what `tf.image.{random,stateless_random}_{hue,saturation}`,
//! `adjust_hue`/`adjust_saturation` and `rgb_to_hsv`/`hsv_to_rgb` run.
//!
//! They are bit-identical to TensorFlow's CPU kernels because they replay
//! TensorFlow's float arithmetic step by step: the hue kernels work on a
//! hue in [0, 6) and wrap it by repeated addition or subtraction of 6 (not
//! `fmod`, which rounds differently); the saturation kernel's HSV
//! conversion adds its `2/6` and `4/6` offsets in double precision, as the
//! C++ literals do; `RGBToHSV`/`HSVToRGB` are TensorFlow's Eigen
//! expressions (reciprocal of the range times a rounded 1/6, clamps that
//! keep NaN).
//!
//! NaN inputs follow x86: a C++ float-to-int conversion of NaN gives
//! `i32::MIN`, which decides the hue sector TensorFlow falls into (Rust's
//! `as` would give 0). A hue delta so large that TensorFlow's wrapping
//! loop would run (nearly) forever is refused instead.

use std::cmp::Ordering;

use tfdata_core::{DType, Error, Result, Tensor};

use super::strings::shape_string;
use super::{Compute, KernelDef, expect_inputs};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "AdjustHue",
        outputs: super::one_output,
        build: |a| adjust(a, "AdjustHue"),
    },
    KernelDef {
        op: "AdjustSaturation",
        outputs: super::one_output,
        build: |a| adjust(a, "AdjustSaturation"),
    },
    KernelDef {
        op: "RGBToHSV",
        outputs: super::one_output,
        build: |a| colorspace(a, true),
    },
    KernelDef {
        op: "HSVToRGB",
        outputs: super::one_output,
        build: |a| colorspace(a, false),
    },
];

fn invalid(op: &str, message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {message}"))
}

/// C++'s `static_cast<int>(x)` on x86: truncation, and `i32::MIN` for NaN
/// and out-of-range values (where Rust's `as` saturates).
fn cpp_int(x: f32) -> i32 {
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// `std::max(a, b)`: `a < b ? b : a`.
fn std_max(a: f32, b: f32) -> f32 {
    if a < b { b } else { a }
}

/// `std::min(a, b)`: `b < a ? b : a`.
fn std_min(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}

fn adjust(attrs: &NodeAttrs, op: &'static str) -> Result<Compute> {
    let t = attrs.dtype("T")?;
    if t != DType::Float {
        return Err(Error::NotFound {
            what: "kernel",
            id: format!("{op} for T={t} on CPU (TensorFlow registers float only)"),
        });
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(op, &inputs, 2)?;
        let (images, param) = (&inputs[0], &inputs[1]);
        let shape = images.shape().to_vec();
        if shape.len() < 3 {
            return Err(invalid(
                op,
                format!(
                    "input must be at least 3-D, got shape{}",
                    shape_string(&shape)
                ),
            ));
        }
        if !param.shape().is_empty() {
            let what = if op == "AdjustHue" { "delta" } else { "scale" };
            return Err(invalid(
                op,
                format!("{what} must be scalar: {}", shape_string(param.shape())),
            ));
        }
        let channels = shape[shape.len() - 1];
        if channels != 3 {
            return Err(invalid(
                op,
                format!("input must have 3 channels but instead has {channels} channels."),
            ));
        }
        let p: f32 = param.to_scalar()?;
        let mut v: Vec<f32> = images.to_vec()?;
        if op == "AdjustHue" {
            // TensorFlow wraps h + 6 delta into [0, 6) one 6 at a time;
            // beyond this its loop would take millions of steps or never end.
            if p.abs() > 1024.0 {
                return Err(invalid(
                    op,
                    format!("delta {p} is too large: TensorFlow's kernel would not return"),
                ));
            }
            for px in v.chunks_exact_mut(3) {
                let out = hue_shift([px[0], px[1], px[2]], p.z());
                px.copy_from_slice(&out);
            }
        } else {
            for px in v.chunks_exact_mut(3) {
                let (h, s, val) = saturation_hsv(px[0], px[1], px[2]);
                let s = std_min(1.0, std_max(0.0, s.mul(p)));
                px.copy_from_slice(&saturation_rgb(h, s, val));
            }
        }
        Ok(vec![Tensor::from_slice(&v, shape)?])
    }))
}

/// One pixel of `AdjustHue`: to a hue in [0, 6) and the value range, shift,
/// and back. Channels are compared flushed; the largest and smallest are
/// written back as they came in (bits and all), the middle one computed.
fn hue_shift(raw: [f32; 3], delta: f32) -> [f32; 3] {
    let [r, g, b] = raw.map(Real::z);
    // The sector (0..6) and which channel (0, 1, 2) is largest, middle,
    // smallest; ties may go either way (TensorFlow's comparisons, replayed).
    let (hi, mid, lo, sector) = if r < g {
        if b < r {
            (1, 0, 2, 1)
        } else if b > g {
            (2, 1, 0, 3)
        } else {
            (1, 2, 0, 2)
        }
    } else if b < g {
        (0, 1, 2, 0)
    } else if b > r {
        (2, 0, 1, 4)
    } else {
        (0, 2, 1, 5)
    };
    let v = [r, g, b];
    let (v_max, v_mid, v_min) = (v[hi], v[mid], v[lo]);
    let mut h = if v_max == v_min {
        0.0
    } else {
        let ratio = v_mid.sub(v_min).div(v_max.sub(v_min));
        let ratio = if sector & 1 == 0 {
            ratio
        } else {
            1.0.sub(ratio)
        };
        (sector as f32).add(ratio)
    };
    h = h.add(delta.mul(6.0));
    while h < 0.0 {
        h = h.add(6.0);
    }
    while h >= 6.0 {
        h = h.sub(6.0);
    }
    let sector = cpp_int(h);
    let mut ratio = h.sub(sector as f32);
    if sector & 1 != 0 {
        ratio = 1.0.sub(ratio);
    }
    let v_mid = v_min.add(ratio.mul(v_max.sub(v_min)));
    let (v_max, v_min) = (raw[hi], raw[lo]);
    match sector {
        0 => [v_max, v_mid, v_min],
        1 => [v_mid, v_max, v_min],
        2 => [v_min, v_max, v_mid],
        3 => [v_min, v_mid, v_max],
        4 => [v_mid, v_min, v_max],
        _ => [v_max, v_min, v_mid],
    }
}

/// `AdjustSaturation`'s RGB to HSV (hue in [0, 1)).
fn saturation_hsv(r: f32, g: f32, b: f32) -> (f32, f32, f32) {
    let (r, g, b) = (r.z(), g.z(), b.z());
    let v = std_max(r, std_max(g, b));
    let range = v.sub(std_min(r, std_min(g, b)));
    let s = if v > 0.0 { range.div(v) } else { 0.0 };
    let norm = 1.0.div(6.0.mul(range));
    // The 2/6 and 4/6 are double literals in TensorFlow: the sum is
    // rounded once, from double.
    let mut h = if r == v {
        norm.mul(g.sub(b))
    } else if g == v {
        ((f64::from(norm.mul(b.sub(r))) + 2.0 / 6.0) as f32).z()
    } else {
        ((f64::from(norm.mul(r.sub(g))) + 4.0 / 6.0) as f32).z()
    };
    if range <= 0.0 {
        h = 0.0;
    }
    if h < 0.0 {
        h = h.add(1.0);
    }
    (h, s, v)
}

/// `AdjustSaturation`'s HSV to RGB.
fn saturation_rgb(h: f32, s: f32, v: f32) -> [f32; 3] {
    let c = s.mul(v);
    let m = v.sub(c);
    let dh = h.mul(6.0);
    let sector = cpp_int(dh);
    let mut f = dh;
    // Bounded: h is in [0, 1] here (or NaN, where both loops stop at once).
    while f <= 0.0 {
        f = f.add(2.0);
    }
    while f >= 2.0 {
        f = f.sub(2.0);
    }
    let x = c.mul(1.0.sub(f.sub(1.0).abs()));
    let (r, g, b) = match sector {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        5 => (c, 0.0, x),
        _ => (0.0, 0.0, 0.0),
    };
    [r.add(m), g.add(m), b.add(m)]
}

/// The float arithmetic the kernels need, for f32 and f64, as TensorFlow's
/// CPU threads do it: with subnormals flushed to zero, both operands
/// (x86's DAZ) and results (FTZ).
trait Real: Copy + PartialOrd + PartialEq + tfdata_core::tensor::NativeType {
    const ZERO: Self;
    const ONE: Self;
    /// The max reducer's start (`lowest()`), and the min reducer's.
    const LOWEST: Self;
    const HIGHEST: Self;
    fn lit(x: f64) -> Self;
    /// A subnormal flushed to a zero of its sign.
    fn z(self) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn abs(self) -> Self;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            fn lit(x: f64) -> Self {
                x as $t
            }
            fn z(self) -> Self {
                if self.is_subnormal() {
                    <$t>::copysign(0.0, self)
                } else {
                    self
                }
            }
            fn add(self, o: Self) -> Self {
                (self.z() + o.z()).z()
            }
            fn sub(self, o: Self) -> Self {
                (self.z() - o.z()).z()
            }
            fn mul(self, o: Self) -> Self {
                (self.z() * o.z()).z()
            }
            fn div(self, o: Self) -> Self {
                (self.z() / o.z()).z()
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
        }
    };
}
real!(f32);
real!(f64);

/// Eigen's `max` (`a < b ? b : a`), as its reducers and `cwiseMax` apply
/// it.
fn emax<T: Real>(a: T, b: T) -> T {
    if a < b { b } else { a }
}

fn emin<T: Real>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

/// TensorFlow's `RGBToHSV` expression for one pixel.
fn rgb_to_hsv<T: Real>(px: &mut [T]) {
    let (r, g, b) = (px[0], px[1], px[2]);
    // Eigen's max/min reducers: accumulate from the lowest (highest)
    // value, channel by channel; V is written as it came in.
    let mut v_raw = T::LOWEST;
    for x in [r, g, b] {
        // max(x, acc): `x < acc ? acc : x`, compared flushed.
        if x.z().partial_cmp(&v_raw.z()) != Some(Ordering::Less) {
            v_raw = x;
        }
    }
    let v = v_raw.z();
    let lo = emin(b.z(), emin(g.z(), emin(r.z(), T::HIGHEST)));
    let (r, g, b) = (r.z(), g.z(), b.z());
    let range = v.sub(lo);
    let s = if v > T::ZERO { range.div(v) } else { T::ZERO };
    let norm = T::ONE.div(range).mul(T::ONE.div(T::lit(6.0)));
    let mut h = if r == v {
        norm.mul(g.sub(b))
    } else if g == v {
        norm.mul(b.sub(r)).add(T::lit(2.0).div(T::lit(6.0)))
    } else {
        norm.mul(r.sub(g)).add(T::lit(4.0).div(T::lit(6.0)))
    };
    if range.partial_cmp(&T::ZERO) != Some(Ordering::Greater) {
        h = T::ZERO;
    }
    if h < T::ZERO {
        h = h.add(T::ONE);
    }
    px.copy_from_slice(&[h, s, v_raw]);
}

/// TensorFlow's `HSVToRGB` expression for one pixel.
fn hsv_to_rgb<T: Real>(px: &mut [T]) {
    let (h, s, v) = (px[0], px[1], px[2]);
    let clamp = |x: T| emin(emax(x, T::ZERO), T::ONE);
    let two = T::lit(2.0);
    let dh = h.mul(T::lit(6.0));
    let dr = clamp(dh.sub(T::lit(3.0)).abs().sub(T::ONE));
    let dg = clamp(T::ZERO.sub(dh.sub(two).abs()).add(two));
    let db = clamp(T::ZERO.sub(dh.sub(T::lit(4.0)).abs()).add(two));
    let one_s = T::ZERO.sub(s).add(T::ONE);
    for (out, d) in px.iter_mut().zip([dr, dg, db]) {
        *out = one_s.add(s.mul(d)).mul(v);
    }
}

fn colorspace(attrs: &NodeAttrs, to_hsv: bool) -> Result<Compute> {
    let op = if to_hsv { "RGBToHSV" } else { "HSVToRGB" };
    let t = attrs.dtype("T")?;
    if !matches!(t, DType::Float | DType::Double) {
        return Err(Error::Unimplemented(format!(
            "{op}: T={t} is not supported by tfdata (float32 and float64)"
        )));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(op, &inputs, 1)?;
        let x = &inputs[0];
        let shape = x.shape().to_vec();
        if shape.is_empty() {
            return Err(invalid(op, "input must be at least 1D[]"));
        }
        let channels = shape[shape.len() - 1];
        if channels != 3 {
            return Err(Error::FailedPrecondition(format!(
                "{op}: input must have 3 channels but input only has {channels} channels."
            )));
        }
        fn run<T: Real>(x: &Tensor, shape: Vec<i64>, to_hsv: bool) -> Result<Tensor> {
            let mut v: Vec<T> = x.to_vec()?;
            for px in v.chunks_exact_mut(3) {
                if to_hsv {
                    rgb_to_hsv(px)
                } else {
                    hsv_to_rgb(px)
                }
            }
            Tensor::from_slice(&v, shape)
        }
        let out = match x.dtype() {
            DType::Double => run::<f64>(x, shape, to_hsv)?,
            _ => run::<f32>(x, shape, to_hsv)?,
        };
        Ok(vec![out])
    }))
}

#[cfg(test)]
mod tests {
    use tfdata_core::{DType, Tensor};

    use super::super::testing::{run, ty};

    fn one(op: &str, x: &[f32], shape: &[i64], extra: Option<f32>) -> Vec<f32> {
        let mut inputs = vec![Tensor::from_slice(x, shape.to_vec()).unwrap()];
        if let Some(p) = extra {
            inputs.push(Tensor::scalar(p));
        }
        run(op, &[("T", ty(DType::Float))], inputs).unwrap()[0]
            .to_vec()
            .unwrap()
    }

    #[test]
    fn hue_round_trips_and_wraps() {
        let px = [0.0f32, 0.5, 1.0];
        assert_eq!(one("AdjustHue", &px, &[1, 1, 3], Some(0.0)), px);
        assert_eq!(one("AdjustHue", &px, &[1, 1, 3], Some(1.0)), px);
        // A third of the circle moves red to green.
        let out = one("AdjustHue", &[1.0, 0.0, 0.0], &[1, 1, 3], Some(1.0 / 3.0));
        assert_eq!(out, [0.0, 1.0, 0.0]);
        assert!(
            run(
                "AdjustHue",
                &[("T", ty(DType::Float))],
                vec![
                    Tensor::from_slice(&px, vec![1, 1, 3]).unwrap(),
                    Tensor::scalar(1e30f32)
                ]
            )
            .is_err()
        );
    }

    #[test]
    fn saturation_zero_is_grey_and_hsv_round_trips() {
        let out = one("AdjustSaturation", &[0.2, 0.5, 0.9], &[1, 1, 3], Some(0.0));
        assert_eq!(out, [0.9, 0.9, 0.9]);
        let hsv = one("RGBToHSV", &[1.0, 0.0, 0.0], &[3], None);
        assert_eq!(hsv, [0.0, 1.0, 1.0]);
        assert_eq!(one("HSVToRGB", &hsv, &[3], None), [1.0, 0.0, 0.0]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let x = Tensor::from_slice(&[0.0f32; 4], vec![1, 1, 4]).unwrap();
        for op in ["AdjustHue", "AdjustSaturation"] {
            let r = run(
                op,
                &[("T", ty(DType::Float))],
                vec![x.clone(), Tensor::scalar(0.1f32)],
            );
            assert!(r.is_err(), "{op}");
        }
        assert!(run("RGBToHSV", &[("T", ty(DType::Float))], vec![x]).is_err());
    }
}
