"""Reductions, scans, arg-extremes and one-hot over every axis choice, empty
inputs, NaN and the integer limits."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, I64_MIN, Family

R = tf.raw_ops

# Eigen sums floats in vector lanes and a tree above 1,024 packets; ours in
# input order: the last bits of a long float sum can differ.
SUM_ORDER = "ulp:32:Eigen sums floats in SIMD lanes and a tree, ours in input order"
ZERO_SIGN = "zero-sign:TensorFlow's Max/Min between 0.0 and -0.0 depend on Eigen's path"
AXES = [[], [0], [1], [2], [-1], [0, 2], [0, 1, 2]]


def family():
    fam = Family("reductions")
    rng = np.random.default_rng(5)
    small = {
        tf.float32: tf.constant(rng.integers(-8, 8, (2, 3, 4)).astype(np.float32) / 4),
        tf.float64: tf.constant(rng.integers(-8, 8, (2, 3, 4)).astype(np.float64) / 4),
        tf.int32: tf.constant(rng.integers(-50, 50, (2, 3, 4)).astype(np.int32)),
        tf.int64: tf.constant(rng.integers(-50, 50, (2, 3, 4)).astype(np.int64)),
        tf.uint8: tf.constant(rng.integers(0, 255, (2, 3, 4)).astype(np.uint8)),
        tf.int8: tf.constant(rng.integers(-128, 127, (2, 3, 4)).astype(np.int8)),
    }
    for op in ("Sum", "Mean", "Prod", "Max", "Min"):
        for dt, x in small.items():
            for axes in AXES:
                for keep in (False, True):
                    fam.add(op, lambda x, a, op=op, keep=keep: getattr(R, op)(
                        input=x, axis=a, keep_dims=keep),
                        [x, tf.constant(axes, tf.int32)], f"{op}/{dt.name}/{axes}/keep {keep}")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [small[tf.float32], tf.constant([3], tf.int32)], f"{op}/error/axis")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [tf.zeros([0, 3], tf.float32), tf.constant([0], tf.int32)], f"{op}/empty axis")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [tf.constant([[1.0, np.nan, -np.inf], [np.inf, -0.0, 0.0]], tf.float32),
                 tf.constant([1], tf.int64)], f"{op}/specials",
                tolerance=ZERO_SIGN if op in ("Max", "Min") else "exact")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [tf.constant([I32_MAX, I32_MAX, I32_MIN, 1], tf.int32), tf.constant([0])],
                f"{op}/int32 limits")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [tf.constant([I64_MAX, 2, I64_MIN], tf.int64), tf.constant([0])],
                f"{op}/int64 limits")
    # Long float sums: the order matters.
    long = tf.constant(rng.standard_normal(5000).astype(np.float32))
    for op in ("Sum", "Mean"):
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [long, tf.constant([0])], f"{op}/float32/5000", tolerance=SUM_ORDER)
    for op in ("All", "Any"):
        b = tf.constant(rng.integers(0, 2, (3, 4)).astype(bool))
        for axes in ([], [0], [1], [0, 1]):
            fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                    [b, tf.constant(axes, tf.int32)], f"{op}/{axes}")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, axis=a),
                [tf.zeros([0], tf.bool), tf.constant([0])], f"{op}/empty")
    fam.add("EuclideanNorm", lambda x, a: R.EuclideanNorm(input=x, axis=a),
            [small[tf.float32], tf.constant([2])], "EuclideanNorm/float32")
    fam.add("EuclideanNorm", lambda x, a: R.EuclideanNorm(input=x, axis=a),
            [small[tf.int32], tf.constant([1])], "EuclideanNorm/int32")
    # Arg extremes: ties keep the first; NaN.
    for op in ("ArgMax", "ArgMin"):
        for dt, x in small.items():
            for axis in (0, 1, 2, -1):
                for out in (tf.int32, tf.int64):
                    fam.add(op, lambda x, a, op=op, out=out: getattr(R, op)(
                        input=x, dimension=a, output_type=out),
                        [x, tf.constant(axis)], f"{op}/{dt.name}/{axis}/{out.name}")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, dimension=a),
                [tf.constant([1.0, np.nan, 3.0, np.nan], tf.float32), tf.constant(0)], f"{op}/nan")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, dimension=a),
                [tf.constant([2, 5, 5, 2], tf.int32), tf.constant(0)], f"{op}/ties")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(input=x, dimension=a),
                [tf.zeros([0], tf.float32), tf.constant(0)], f"{op}/error/empty")
    # Scans.
    for op in ("Cumsum", "Cumprod"):
        for dt in (tf.float32, tf.float64, tf.int32, tf.int64):
            x = small[dt] if dt in small else small[tf.int32]
            for axis in (0, 1, -1):
                for exclusive in (False, True):
                    for reverse in (False, True):
                        fam.add(op, lambda x, a, op=op, e=exclusive, r=reverse: getattr(R, op)(
                            x=x, axis=a, exclusive=e, reverse=r),
                            [x, tf.constant(axis)],
                            f"{op}/{dt.name}/{axis}/exclusive {exclusive}/reverse {reverse}")
        fam.add(op, lambda x, a, op=op: getattr(R, op)(x=x, axis=a),
                [small[tf.float32], tf.constant(3)], f"{op}/error/axis")
    # One-hot.
    for dt in (tf.float32, tf.int32, tf.int64, tf.bool):
        on = tf.constant(True if dt == tf.bool else 5, dt)
        off = tf.constant(False if dt == tf.bool else -1, dt)
        for axis in (-1, 0, 1):
            fam.add("OneHot", lambda i, d, on, off, axis=axis: R.OneHot(
                indices=i, depth=d, on_value=on, off_value=off, axis=axis),
                [tf.constant([[0, 3, -1], [5, 2, 1]], tf.int64), tf.constant(4), on, off],
                f"OneHot/{dt.name}/axis {axis}")
    fam.add("OneHot", lambda i, d, on, off: R.OneHot(indices=i, depth=d, on_value=on,
                                                    off_value=off),
            [tf.constant([1, 2], tf.int32), tf.constant(-1), tf.constant(1.0), tf.constant(0.0)],
            "OneHot/error/depth")
    return fam
