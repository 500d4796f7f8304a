"""Requantizing qint32 accumulators: RequantizationRange and QuantizeDownAndShrinkRange.

All outputs are exact. TF 2.21's kernels read each qint32 element through float (Eigen's
conversion): the min/max scan behind the float ranges and the fixed-point qint32 -> quint8 loop
see 2^31 - 1 as 2^31, which the "edge" input probes. Requantize is in quantized_more.py."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")


def q32(values, shape=None):
    t = tf.constant(np.array(values, np.int32))
    if shape is not None:
        t = tf.reshape(t, shape)
    return tf.bitcast(t, tf.qint32)


def f(v):
    return tf.constant(v, tf.float32)


def family():
    fam = Family("quantized")
    rng = np.random.default_rng(47)
    info = np.iinfo(np.int32)
    base = [-5000, 0, 123456, info.max, info.min, 7, -99999999, 55555555, 1, -1]
    wide = list(rng.integers(info.min, info.max, 40, dtype=np.int64))
    narrow = list(rng.integers(-70000, 900000, 30))
    edge = [info.max - 63, info.max - 64, 12345, info.min + 1, -7]
    inputs = {"base": q32(base), "wide": q32(wide, [5, 8]), "narrow": q32(narrow, [3, 2, 5]),
              "empty": q32([], [0, 3]), "one": q32([42]), "edge": q32(edge)}
    ranges = [(-10.0, 10.0), (-3.0, 70.0), (0.0, 0.0), (0.0, 1.0), (-1e30, 1e30),
              (-0.001, 0.002), (5.0, 5.5), (nan, 1.0), (-1.0, inf), (-2.5e-9, 7.1e-9)]
    
    rr = lambda input, input_min, input_max: R.RequantizationRange(
        input=input, input_min=input_min, input_max=input_max)
    for name, x in inputs.items():
        for lo, hi in ranges:
            fam.add("RequantizationRange", rr, [x, f(lo), f(hi)],
                    f"RequantizationRange/{name} [{lo},{hi}]")
    fam.add("RequantizationRange", rr, [inputs["base"], f([-4.0, 9.0]), f([[3.0]])],
            "RequantizationRange/vector ranges")
    fam.add("RequantizationRange", rr, [inputs["base"], f([]), f(1.0)],
            "RequantizationRange/error/empty min")
    fam.add("RequantizationRange", rr, [inputs["base"], f(1.0), f([])],
            "RequantizationRange/error/empty max")

    sh = lambda input, input_min, input_max: R.QuantizeDownAndShrinkRange(
        input=input, input_min=input_min, input_max=input_max, out_type=tf.quint8)
    for name, x in inputs.items():
        for lo, hi in ranges:
            fam.add("QuantizeDownAndShrinkRange", sh, [x, f(lo), f(hi)],
                    f"QuantizeDownAndShrinkRange/{name} [{lo},{hi}]")
    fam.add("QuantizeDownAndShrinkRange", sh, [inputs["base"], f(-1.0), f([2.0])],
            "QuantizeDownAndShrinkRange/error/max rank")
    return fam
