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
        # Complex arithmetic: random values, and finite edge pairs broadcast
        # against each other.
        za = random_complex(rng, [300], ct, spread=3)
        zb = random_complex(rng, [300], ct, spread=3)
        fin = [v for v in EDGE if np.isfinite(v) and abs(v) < 1e9]
        re_f, im_f = np.meshgrid(np.array(fin), np.array(fin))
        ze = tf.cast(tf.complex(re_f.reshape(-1), im_f.reshape(-1)), ct)
        for op in ("AddV2", "Sub", "Mul"):
            f = lambda x, y, op=op: getattr(R, op)(x=x, y=y)
            fam.add(op, f, [za, zb], f"{op} {n} random")
            fam.add(op, f, [tf.reshape(ze, [-1, 1]), ze[:9]], f"{op} {n} finite edges broadcast")
            fam.add(op, f, [z, z[::-1]], f"{op} {n} with inf and nan")
        other = tf.complex128 if ct == tf.complex64 else tf.complex64
        fam.add("Cast", lambda x, o=other: R.Cast(x=x, DstT=o), [z], f"Cast {n} to {other.name} edge")
        fam.add("Cast", lambda x, o=other: R.Cast(x=x, DstT=o), [zr], f"Cast {n} to {other.name} random")


# TensorFlow's CPU FFT (ducc0) computes in the tensor's precision; ours in
# float64, rounded once. The distance is TensorFlow's rounding error, which
# grows with the row's norm, not with each bin: measured at most 4.4e-7 of
# the input row's L2 norm in float32 (lengths 8 to 4096), so each case
# declares an absolute bound of 1e-6 of the largest row norm (forward), or
# of that norm over sqrt(N) (inverses, which scale by 1/N).
FFT_WHY = "ducc0's float32 rounding against an exact transform rounded once"
REL = {tf.float32: 1e-6, tf.complex64: 1e-6, tf.float64: 1e-14, tf.complex128: 1e-14}


def fft_tolerance(x, rank, inverse, size):
    a = np.asarray(x)
    rows = a.reshape((-1,) + a.shape[a.ndim - rank:]) if a.size else a.reshape(-1, 1)
    norm = max(float(np.sqrt(np.sum(np.abs(r.astype(np.complex128)) ** 2))) for r in rows) if a.size else 0.0
    if inverse:
        norm /= np.sqrt(max(size, 1))
    bound = REL[tf.as_dtype(x.dtype)] * max(norm, 1e-30)
    return f"abs:{bound:.3e}:{FFT_WHY}", bound


def ffts(fam, rng):
    ops = {1: ("FFT", "IFFT"), 2: ("FFT2D", "IFFT2D"), 3: ("FFT3D", "IFFT3D")}
    shapes = {1: [[1], [3, 1], [3, 2], [3, 8], [2, 12], [2, 97], [2, 256], [1, 1000]],
              2: [[6, 8], [2, 5, 7], [1, 16, 16]],
              3: [[3, 4, 5], [2, 2, 4, 8]]}
    for rank in (1, 2, 3):
        for ct in (tf.complex64, tf.complex128):
            for shape in shapes[rank]:
                x = random_complex(rng, shape, ct, spread=0)
                size = int(np.prod(shape[-rank:]))
                for op, inverse in zip(ops[rank], (False, True)):
                    tol, _ = fft_tolerance(x, rank, inverse, size)
                    fam.add(op, lambda x, op=op: getattr(R, op)(input=x), [x],
                            f"{op} {ct.name} {shape}", tol)
        fam.add(ops[rank][0], lambda x, op=ops[rank][0]: getattr(R, op)(input=x),
                [tf.zeros([0] + [4] * rank, tf.complex64)], f"{ops[rank][0]} empty")
        fam.add(ops[rank][0], lambda x, op=ops[rank][0]: getattr(R, op)(input=x),
                [tf.zeros([4] * (rank - 1), tf.complex64)], f"{ops[rank][0]} rank too low")
    # Real transforms: float32 and float64, cropping, odd and even lengths.
    rops = {1: ("RFFT", "IRFFT"), 2: ("RFFT2D", "IRFFT2D"), 3: ("RFFT3D", "IRFFT3D")}
    rcases = {1: [([1], [1]), ([8], [8]), ([3, 9], [9]), ([2, 100], [100]), ([2, 400], [400]),
                  ([2, 512], [512]), ([2, 20], [16]), ([2, 20], [15])],
              # fft_length 0 of a non-empty input aborts TensorFlow's process
              # (a ducc0 assertion): ours is an error, tested in Rust.
              2: [([6, 8], [6, 8]), ([2, 5, 7], [5, 7]), ([2, 9, 10], [8, 6])],
              3: [([3, 4, 6], [3, 4, 6]), ([2, 2, 3, 5], [2, 3, 5])]}
    for rank in (1, 2, 3):
        fwd, inv = rops[rank]
        for rt in (tf.float32, tf.float64):
            ct = tf.complex64 if rt == tf.float32 else tf.complex128
            for shape, length in rcases[rank]:
                x = tf.constant(rng.standard_normal(shape), rt)
                ln = tf.constant(length, tf.int32)
                tol, _ = fft_tolerance(x, rank, False, int(np.prod(length)))
                fam.add(fwd, lambda x, ln, op=fwd, ct=ct: getattr(R, op)(input=x, fft_length=ln, Tcomplex=ct),
                        [x, ln], f"{fwd} {rt.name} {shape} length {length}", tol)
                # The inverse of a random half spectrum (imaginary parts of
                # the zero and Nyquist bins non-zero: ignored).
                half = list(shape)
                half[-1] = length[-1] // 2 + 1 + (1 if length[-1] % 3 == 0 else 0)
                for i in range(1, rank):
                    half[-1 - i] = length[-1 - i]
                z = random_complex(rng, half, ct, spread=0)
                tol, _ = fft_tolerance(z, rank, True, int(np.prod(length)))
                fam.add(inv, lambda z, ln, op=inv, rt=rt: getattr(R, op)(input=z, fft_length=ln, Treal=rt),
                        [z, ln], f"{inv} {rt.name} {half} length {length}", tol)
        x = tf.constant(rng.standard_normal([4] * rank), tf.float32)
        z = random_complex(rng, [4] * rank, tf.complex64, spread=0)
        for bad, what in (([8] * rank, "too short"), ([4] * (rank + 1), "fft_length shape"),
                          ([-1] + [4] * (rank - 1), "negative length")):
            ln = tf.constant(bad, tf.int32)
            fam.add(fwd, lambda x, ln, op=fwd: getattr(R, op)(input=x, fft_length=ln), [x, ln],
                    f"{fwd} {what}")
            fam.add(inv, lambda z, ln, op=inv: getattr(R, op)(input=z, fft_length=ln), [z, ln],
                    f"{inv} {what}")
        fam.add(fwd, lambda x, ln, op=fwd: getattr(R, op)(input=x, fft_length=ln),
                [tf.zeros([3] * (rank - 1), tf.float32), tf.constant([2] * rank, tf.int32)],
                f"{fwd} rank too low")


def signals(rng, batch, n, rate=8000.0):
    """Sine-plus-noise waveforms: a few tones each, with white noise."""
    t = np.arange(n) / rate
    out = []
    for _ in range(batch):
        x = sum(rng.uniform(0.2, 1.0) * np.sin(2 * np.pi * rng.uniform(50, 3500) * t + rng.uniform(0, 6))
                for _ in range(3))
        out.append(x + 0.05 * rng.standard_normal(n))
    return tf.constant(np.array(out), tf.float32)


# An STFT's bins are FFTs of windowed frames: within 1e-6 of the largest
# frame's norm (above; `stft_tol`). The log of a magnitude turns that into a relative error, largest in the
# quietest bins: measured 9.2e-4 for bins of magnitude 2e-4 (log -8.5) in
# frames of norm 10, so 2e-3.
def stft_tol(x, frame_length):
    """1e-6 of the largest frame's norm, bounded by sqrt(frame_length) times
    the largest sample (windows are at most 1)."""
    bound = 1e-6 * np.sqrt(frame_length) * float(np.max(np.abs(np.asarray(x))))
    return f"abs:{bound:.3e}:{FFT_WHY}"
LOG_TOL = (f"abs:2e-3:{FFT_WHY}, through a log: the quietest bins (magnitude 2e-4) "
           "measured 9.2e-4 apart")


def log_spectrogram(x):
    s = tf.signal.stft(x, frame_length=256, frame_step=128, fft_length=256)
    return tf.math.log(tf.abs(s) + 1e-6)


def stfts(fam, rng):
    x = signals(rng, 1, 4000)[0]
    fam.add_function("frame 256/128", lambda x: tf.signal.frame(x, 256, 128), [x])
    fam.add_function("frame pad_end", lambda x: tf.signal.frame(x, 300, 100, pad_end=True, pad_value=0.5),
                     [x])
    fam.add_function("frame axis 0 of a matrix",
                     lambda x: tf.signal.frame(tf.reshape(x, [400, 10]), 16, 8, axis=0), [x])
    # 0.5 - 0.5 cos(x): Cos is 1 ulp from Eigen's, which near 1 is 6e-8.
    hann = "abs:1.2e-7:Cos, the platform's libm against Eigen's (1 ulp near 1.0, 6e-8)"
    for n in (tf.constant(256), tf.constant(255), tf.constant(1)):
        fam.add_function(f"hann_window {int(n)}", lambda n: tf.signal.hann_window(n), [n], hann)
        fam.add_function(f"hann_window periodic=False {int(n)}",
                         lambda n: tf.signal.hann_window(n, periodic=False), [n], hann)
    fam.add_function("stft 256/128", lambda x: tf.signal.stft(x, 256, 128, 256), [x],
                     stft_tol(x, 256))
    fam.add_function("stft 400/160 fft 512 pad_end",
                     lambda x: tf.signal.stft(x, 400, 160, 512, pad_end=True), [x], stft_tol(x, 400))
    fam.add_function("abs of stft, hamming window",
                     lambda x: tf.abs(tf.signal.stft(x, 200, 80, window_fn=tf.signal.hamming_window)),
                     [x], stft_tol(x, 200))
    fam.add_function("log-magnitude spectrogram", log_spectrogram, [x], LOG_TOL)
    xs = signals(rng, 3, 2000)
    fam.add_function("log-magnitude spectrogram of a batch", log_spectrogram, [xs], LOG_TOL)
    fam.add_function("stft of a batch, unknown length", lambda x: tf.abs(tf.signal.stft(x, 128, 64)),
                     [xs], stft_tol(xs, 128), unknown_shapes=True)
    fam.add_function("irfft of rfft", lambda x: tf.signal.irfft(tf.signal.rfft(x)), [xs],
                     stft_tol(xs, 2000))
    fam.add_function("stft of a too-short signal", lambda x: tf.signal.stft(x[:100], 256, 128),
                     [x], stft_tol(x, 256))
    # Pipelines: waveforms to log-magnitude spectrograms, as users write them.
    waves = signals(rng, 6, 3000)
    ds = tf.data.Dataset.from_tensor_slices(waves).map(log_spectrogram)
    fam.add_dataset("pipeline: waveform -> log-magnitude spectrogram", ds, LOG_TOL)
    ds = (tf.data.Dataset.from_tensor_slices(waves).batch(4)
          .map(lambda w: tf.abs(tf.signal.stft(w, 256, 128, pad_end=True))))
    fam.add_dataset("pipeline: batched waveforms -> magnitude spectrograms", ds, stft_tol(waves, 256))
    ds = (tf.data.Dataset.from_tensor_slices(waves)
          .map(lambda w: (tf.reduce_mean(log_spectrogram(w), axis=0), tf.signal.frame(w, 512, 512))))
    fam.add_dataset("pipeline: mean log spectrum and frames", ds, LOG_TOL)


def family():
    fam = Family("signal")
    rng = np.random.default_rng(20260)
    complex_basics(fam, rng)
    ffts(fam, rng)
    stfts(fam, rng)
    return fam
