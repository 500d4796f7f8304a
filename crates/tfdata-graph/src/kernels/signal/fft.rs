//! The discrete Fourier transform in double precision: iterative radix-2
//! for powers of two, Bluestein's chirp-z (through a power-of-two
//! transform) for every other length.
//!
//! Everything is computed in f64 whatever the tensor's dtype, so a float32
//! result is the exact transform rounded once (error about 1e-15 of the
//! row's norm): the distance to TensorFlow's float32 `ducc0` result is
//! TensorFlow's own rounding error, not ours.

/// A complex number in f64: (real, imaginary).
pub(super) type C = (f64, f64);

fn mul(a: C, b: C) -> C {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// `exp(-2πi k / n)`, with `k` reduced modulo `n` first.
fn root(k: u64, n: u64) -> C {
    let angle = -2.0 * std::f64::consts::PI * ((k % n) as f64) / n as f64;
    let (s, c) = angle.sin_cos();
    (c, s)
}

/// A planned transform of one length.
pub(super) struct Fft {
    n: usize,
    kind: Kind,
}

enum Kind {
    /// Lengths 0 and 1: the identity.
    Trivial,
    /// `twiddles[k] = exp(-2πi k / n)` for `k < n / 2`.
    Radix2 { twiddles: Vec<C> },
    Bluestein {
        /// `exp(-πi k² / n)` for `k < n`.
        chirp: Vec<C>,
        /// The forward transform of the conjugate chirp, zero-padded to
        /// the inner length and wrapped.
        kernel: Vec<C>,
        inner: Box<Fft>,
    },
}

impl Fft {
    pub(super) fn new(n: usize) -> Fft {
        let kind = if n <= 1 {
            Kind::Trivial
        } else if n.is_power_of_two() {
            Kind::Radix2 {
                twiddles: (0..n / 2).map(|k| root(k as u64, n as u64)).collect(),
            }
        } else {
            let m = (2 * n - 1).next_power_of_two();
            let two_n = 2 * n as u64;
            // exp(-πi k²/n) = exp(-2πi (k² mod 2n) / 2n), exact reduction.
            let chirp: Vec<C> = (0..n as u64)
                .map(|k| root((k * k) % two_n, two_n))
                .collect();
            let mut kernel = vec![(0.0, 0.0); m];
            for (k, w) in chirp.iter().enumerate() {
                let c = (w.0, -w.1);
                kernel[k] = c;
                if k > 0 {
                    kernel[m - k] = c;
                }
            }
            let inner = Fft::new(m);
            inner.forward(&mut kernel);
            Kind::Bluestein {
                chirp,
                kernel,
                inner: Box::new(inner),
            }
        };
        Fft { n, kind }
    }

    /// The unscaled forward transform of `data` (of length `n`) in place.
    pub(super) fn forward(&self, data: &mut [C]) {
        debug_assert_eq!(data.len(), self.n);
        match &self.kind {
            Kind::Trivial => {}
            Kind::Radix2 { twiddles } => radix2(data, twiddles),
            Kind::Bluestein {
                chirp,
                kernel,
                inner,
            } => {
                let m = kernel.len();
                let mut a = vec![(0.0, 0.0); m];
                for ((slot, &x), &w) in a.iter_mut().zip(data.iter()).zip(chirp) {
                    *slot = mul(x, w);
                }
                inner.forward(&mut a);
                for (x, &k) in a.iter_mut().zip(kernel) {
                    // Conjugated, so the forward transform below inverts.
                    let p = mul(*x, k);
                    *x = (p.0, -p.1);
                }
                inner.forward(&mut a);
                let scale = 1.0 / m as f64;
                for ((out, &x), &w) in data.iter_mut().zip(&a).zip(chirp) {
                    *out = mul((x.0 * scale, -x.1 * scale), w);
                }
            }
        }
    }

    /// The unscaled inverse transform (`exp(+2πi ...)`) in place.
    pub(super) fn inverse(&self, data: &mut [C]) {
        for x in data.iter_mut() {
            x.1 = -x.1;
        }
        self.forward(data);
        for x in data.iter_mut() {
            x.1 = -x.1;
        }
    }
}

fn radix2(data: &mut [C], twiddles: &[C]) {
    let n = data.len();
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            data.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let half = len / 2;
        let step = n / len;
        for start in (0..n).step_by(len) {
            for k in 0..half {
                let w = twiddles[k * step];
                let a = data[start + k];
                let b = mul(data[start + k + half], w);
                data[start + k] = (a.0 + b.0, a.1 + b.1);
                data[start + k + half] = (a.0 - b.0, a.1 - b.1);
            }
        }
        len *= 2;
    }
}

/// Transforms every line along `axis` of a row-major array of `shape`.
pub(super) fn along(data: &mut [C], shape: &[usize], axis: usize, inverse: bool) {
    let n = shape[axis];
    if n <= 1 || data.is_empty() {
        return;
    }
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let plan = Fft::new(n);
    let mut line = vec![(0.0, 0.0); n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (k, slot) in line.iter_mut().enumerate() {
                *slot = data[base + k * inner];
            }
            if inverse {
                plan.inverse(&mut line);
            } else {
                plan.forward(&mut line);
            }
            for (k, v) in line.iter().enumerate() {
                data[base + k * inner] = *v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[C]) -> Vec<C> {
        let n = x.len() as u64;
        (0..n)
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |acc, (t, &v)| {
                    let p = mul(v, root(k * t as u64, n));
                    (acc.0 + p.0, acc.1 + p.1)
                })
            })
            .collect()
    }

    #[test]
    fn matches_the_definition() {
        for n in [1usize, 2, 3, 5, 8, 12, 17, 64, 97, 100] {
            let x: Vec<C> = (0..n)
                .map(|i| ((i as f64 * 0.37).sin(), (i as f64 * 1.3).cos() - 0.5))
                .collect();
            let mut y = x.clone();
            Fft::new(n).forward(&mut y);
            for (a, b) in y.iter().zip(naive(&x)) {
                assert!(
                    (a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12,
                    "n={n}"
                );
            }
            Fft::new(n).inverse(&mut y);
            for (a, b) in y.iter().zip(&x) {
                assert!((a.0 / n as f64 - b.0).abs() < 1e-13, "n={n}");
            }
        }
    }
}
