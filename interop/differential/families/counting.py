"""Bincount, HistogramFixedWidth and CumulativeLogsumexp. Bincount and HistogramFixedWidth
are exact; CumulativeLogsumexp declares ulp:4 (TensorFlow's scan steps through Eigen's exp and
log1p, ours libm's)."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
LSE = "ulp:4:TensorFlow's scan steps with Eigen's exp and log1p, ours with libm's"


def family():
    fam = Family("counting")
    rng = np.random.default_rng(31)

    bc = lambda arr, size, weights: R.Bincount(arr=arr, size=size, weights=weights)
    arr = tf.constant(rng.integers(0, 12, 40), tf.int32)
    for dt in (tf.int32, tf.int64, tf.float32, tf.float64):
        fam.add("Bincount", bc, [arr, tf.constant(10), tf.zeros([0], dt)], f"Bincount/{dt.name} counts")
        w = tf.constant(rng.uniform(-5, 5, 40), dt) if dt.is_floating else \
            tf.constant(rng.integers(-5, 5, 40), dt)
        fam.add("Bincount", bc, [arr, tf.constant(10), w], f"Bincount/{dt.name} weights")
    fam.add("Bincount", bc, [tf.reshape(arr, [4, 10]), tf.constant(12),
                             tf.ones([4, 10])], "Bincount/matrix")
    fam.add("Bincount", bc, [tf.zeros([0], tf.int32), tf.constant(3), tf.zeros([0])],
            "Bincount/empty")
    fam.add("Bincount", bc, [arr, tf.constant(0), tf.zeros([0])], "Bincount/size 0")
    fam.add("Bincount", bc, [tf.constant([1, 2]), tf.constant(4),
                             tf.constant([1e38, 3e38], tf.float32)], "Bincount/overflow")
    fam.add("Bincount", bc, [tf.constant([1, -1]), tf.constant(4), tf.zeros([0])],
            "Bincount/error/negative")
    fam.add("Bincount", bc, [tf.constant([1]), tf.constant(-1), tf.zeros([0])],
            "Bincount/error/negative size")
    fam.add("Bincount", bc, [tf.constant([1, 2]), tf.constant(4), tf.ones([1])],
            "Bincount/error/weights size")

    h = lambda values, value_range, nbins: R.HistogramFixedWidth(
        values=values, value_range=value_range, nbins=nbins)
    hi64 = lambda values, value_range, nbins: R.HistogramFixedWidth(
        values=values, value_range=value_range, nbins=nbins, dtype=tf.int64)
    for dt in (tf.float32, tf.float64):
        v = tf.constant(list(rng.uniform(-2, 7, 50)) + [inf, -inf, 0.0, 5.0, 1e-40, 4.999999],
                        dt)
        for nb in (1, 5, 7):
            fam.add("HistogramFixedWidth", h, [v, tf.constant([0.0, 5.0], dt), tf.constant(nb)],
                    f"HistogramFixedWidth/{dt.name} {nb}")
        fam.add("HistogramFixedWidth", hi64, [v, tf.constant([-0.3, 0.1], dt), tf.constant(3)],
                f"HistogramFixedWidth/{dt.name} int64 narrow")
        fam.add("HistogramFixedWidth", h, [tf.constant([1.0, nan], dt),
                                           tf.constant([0.0, 5.0], dt), tf.constant(3)],
                f"HistogramFixedWidth/{dt.name} error/nan")
    for dt in (tf.int32, tf.int64):
        v = tf.constant(rng.integers(-10, 30, 50), dt)
        fam.add("HistogramFixedWidth", h, [v, tf.constant([0, 20], dt), tf.constant(6)],
                f"HistogramFixedWidth/{dt.name}")
        info = np.iinfo(dt.as_numpy_dtype)
        fam.add("HistogramFixedWidth", h, [tf.constant([info.min, 0, info.max], dt),
                                           tf.constant([info.min, info.max], dt), tf.constant(4)],
                f"HistogramFixedWidth/{dt.name} extremes")
    fam.add("HistogramFixedWidth", h, [tf.zeros([2, 0]), tf.constant([0.0, 1.0]),
                                       tf.constant(2)], "HistogramFixedWidth/empty")
    fam.add("HistogramFixedWidth", h, [tf.ones([2, 3]), tf.constant([0.0, 1.0]),
                                       tf.constant(2)], "HistogramFixedWidth/matrix")
    fam.add("HistogramFixedWidth", h, [tf.ones([2]), tf.constant([5.0, 0.0]), tf.constant(2)],
            "HistogramFixedWidth/error/range")
    fam.add("HistogramFixedWidth", h, [tf.ones([2]), tf.constant([0.5, 0.5]), tf.constant(2)],
            "HistogramFixedWidth/error/empty range")
    fam.add("HistogramFixedWidth", h, [tf.ones([2]), tf.constant([0.0, 5.0]), tf.constant(0)],
            "HistogramFixedWidth/error/nbins")

    for excl in (False, True):
        for rev in (False, True):
            f = lambda x, axis, excl=excl, rev=rev: R.CumulativeLogsumexp(
                x=x, axis=axis, exclusive=excl, reverse=rev)
            for dt in (tf.float32, tf.float64):
                x = tf.constant(rng.uniform(-20, 20, [3, 5]), dt)
                for ax in (0, 1, -1):
                    fam.add("CumulativeLogsumexp", f, [x, tf.constant(ax)],
                            f"CumulativeLogsumexp/{dt.name} {excl} {rev} axis {ax}", LSE)
                s = tf.constant([[0.0, 1.0, -inf, inf, 2.0, nan, 3.0],
                                 [-inf, -inf, 5.0, -inf, 1e30, -1e30, 80.0]], dt)
                fam.add("CumulativeLogsumexp", f, [s, tf.constant(1)],
                        f"CumulativeLogsumexp/{dt.name} {excl} {rev} special", LSE)
    f = lambda x, axis: R.CumulativeLogsumexp(x=x, axis=axis)
    fam.add("CumulativeLogsumexp", f, [tf.zeros([0, 3]), tf.constant(0)],
            "CumulativeLogsumexp/empty")
    fam.add("CumulativeLogsumexp", f, [tf.ones([2]), tf.constant(1)],
            "CumulativeLogsumexp/error/axis")
    fam.add("CumulativeLogsumexp", f, [tf.ones([2]), tf.constant([0])],
            "CumulativeLogsumexp/error/axis vector")
    return fam
