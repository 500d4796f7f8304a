"""Complex numbers and tf.signal: Complex, Real, Imag, ComplexAbs, Angle,
Conj and casts to and from complex over edge values; the FFT ops; and
tf.signal.stft / frame / hann_window as users write audio features, as
traced functions and as pipelines."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops

EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-8, 1e10, -7.25, np.inf, -np.inf, np.nan]


def grid(dtype):
    """Every pair of edge values as complex numbers (real, imag)."""
    re, im = np.meshgrid(np.array(EDGE), np.array(EDGE))
    part = np.float32 if dtype == tf.complex64 else np.float64
    return (tf.constant(re.reshape(-1).astype(part)), tf.constant(im.reshape(-1).astype(part)))


def random_complex(rng, shape, dtype, spread=10):
    part = np.float32 if dtype == tf.complex64 else np.float64
    mag = np.exp(rng.uniform(-spread, spread, shape))
    re = (rng.standard_normal(shape) * mag).astype(part)
    im = (rng.standard_normal(shape) * mag).astype(part)
    return tf.complex(re, im)


def complex_basics(fam, rng):
    for ct in (tf.complex64, tf.complex128):
        pt = tf.float32 if ct == tf.complex64 else tf.float64
        n = ct.name
        re, im = grid(ct)
        fam.add("Complex", lambda a, b, ct=ct: R.Complex(real=a, imag=b, Tout=ct), [re, im],
                f"Complex {n} edge pairs")
        fam.add("Complex", lambda a, b, ct=ct: R.Complex(real=a, imag=b, Tout=ct),
                [tf.constant([[1.0], [2.0]], pt), tf.constant([3.0, -4.0, 5.0], pt)],
                f"Complex {n} broadcast")
        fam.add("Complex", lambda a, b, ct=ct: R.Complex(real=a, imag=b, Tout=ct),
                [tf.constant([1.0, 2.0], pt), tf.constant([3.0, -4.0, 5.0], pt)],
                f"Complex {n} incompatible shapes")
        z = tf.complex(re, im)
        zr = random_complex(rng, [500], ct)
        for op in ("Real", "Imag", "ComplexAbs", "Angle"):
            key = "x" if op == "ComplexAbs" else "input"
            f = lambda x, op=op, key=key, pt=pt: getattr(R, op)(**{key: x, "Tout": pt})
            fam.add(op, f, [z], f"{op} {n} edge pairs")
            fam.add(op, f, [zr], f"{op} {n} random over 20 decades")
            fam.add(op, f, [tf.reshape(zr[:24], [2, 3, 4])], f"{op} {n} rank 3")
            fam.add(op, f, [tf.zeros([0, 3], ct)], f"{op} {n} empty")
        fam.add("Conj", lambda x: R.Conj(input=x), [z], f"Conj {n} edge pairs")
        fam.add("Conj", lambda x: R.Conj(input=x), [tf.reshape(zr[:6], [3, 2])], f"Conj {n} matrix")
        # Casts: every real dtype TensorFlow casts from and to complex.
        for real in (tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8,
                     tf.uint16, tf.uint32, tf.uint64, tf.bool):
            if real == tf.bool:
                x = tf.constant([True, False, True])
            elif real.is_floating:
                x = tf.constant([0.0, -0.0, 1.5, -3.25, 1e30, np.inf, np.nan], real)
            else:
                lo, hi = real.min, real.max
                x = tf.constant([0, 1, lo, hi, 7], real)
            fam.add("Cast", lambda x, ct=ct: R.Cast(x=x, DstT=ct), [x], f"Cast {real.name} to {n}")
            zc = tf.constant([0j, 1.5 + 2j, -3.7 - 1j, 100.25 + 0j, 0 + 1j, -0.0 - 0j])
            zc = tf.cast(zc, ct)
            fam.add("Cast", lambda x, real=real: R.Cast(x=x, DstT=real), [zc],
                    f"Cast {n} to {real.name}")
        other = tf.complex128 if ct == tf.complex64 else tf.complex64
        fam.add("Cast", lambda x, o=other: R.Cast(x=x, DstT=o), [z], f"Cast {n} to {other.name} edge")
        fam.add("Cast", lambda x, o=other: R.Cast(x=x, DstT=o), [zr], f"Cast {n} to {other.name} random")


def family():
    fam = Family("signal")
    rng = np.random.default_rng(20260)
    complex_basics(fam, rng)
    return fam
