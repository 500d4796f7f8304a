"""Quantized ops beyond requantization ranges: Requantize, RequantizePerChannel,
RequantizationRangePerChannel (more ops are added below as they are supported).

Every quantized output is exact. TF 2.21's kernels read qint32 elements through
float (2^31 - 1 becomes 2^31), which these cases probe with values near the int32
extremes. Denormal ranges are left out: TF's thread pool flushes denormals to zero."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def q32(values, shape=None):
    t = tf.bitcast(tf.constant(np.array(values, np.int64).astype(np.int32)), tf.qint32)
    return t if shape is None else tf.reshape(t, shape)


def f(v):
    return tf.constant(v, tf.float32)


EDGE = [0, 1, -1, 7, -5000, 123456, -99999999, 55555555, I32_MAX, I32_MIN,
        I32_MAX - 63, I32_MAX - 64, I32_MAX - 65, I32_MIN + 1, 2**30, -(2**30) - 1]


def requantize_cases(fam, rng):
    wide = list(rng.integers(I32_MIN, I32_MAX, 37, dtype=np.int64))
    narrow = list(rng.integers(-70000, 900000, 30))
    inputs = {"edge": q32(EDGE), "wide": q32(wide), "narrow": q32(narrow, [3, 2, 5]),
              "empty": q32([], [0, 3]), "one": q32([42])}
    in_ranges = [(-10.0, 10.0), (-3.0, 70.0), (0.0, 0.0), (5.0, 5.5), (-1e30, 1e30),
                 (-0.001, 0.002), (nan, 1.0), (-1.0, inf), (-2.5e-9, 7.1e-9), (1.0, 1.0)]
    out_ranges = [(0.0, 255.0), (-1.0, 1.0), (-5.0, 5.0), (-3e-9, 1e-9), (-1e-3, 0.0),
                  (0.0, 1e30), (-1e30, 1e30), (-1.0, inf), (-inf, 0.0), (-2.0, 2.0)]
    for out in (tf.quint8, tf.qint8):
        rq = lambda input, a, b, c, d, out=out: R.Requantize(
            input=input, input_min=a, input_max=b, requested_output_min=c,
            requested_output_max=d, out_type=out)
        for name, x in inputs.items():
            pairs = [(i, o) for i in in_ranges for o in out_ranges]
            if name in ("empty", "one"):
                pairs = pairs[::7]
            for (a, b), (c, d) in pairs:
                fam.add("Requantize", rq, [x, f(a), f(b), f(c), f(d)],
                        f"Requantize/{out.name}/{name} [{a},{b}]->[{c},{d}]")
        x = inputs["edge"]
        fam.add("Requantize", rq, [x, f([-1.0]), f(1.0), f(-1.0), f(1.0)],
                f"Requantize/{out.name}/error/input_min rank")
        fam.add("Requantize", rq, [x, f(-1.0), f(1.0), f(-1.0), f([[1.0]])],
                f"Requantize/{out.name}/error/requested_output_max rank")
        for c, d in [(1.0, 2.0), (nan, 1.0), (-1.0, -2.0), (-1.0, nan), (-2.5, -3.25e-7)]:
            fam.add("Requantize", rq, [x, f(-1.0), f(1.0), f(c), f(d)],
                    f"Requantize/{out.name}/error/requested [{c},{d}]")


def per_channel_cases(fam, rng):
    shapes = [[1, 2, 2, 2], [2, 3, 1, 4], [1, 1, 5, 1], [1, 2, 3, 3]]
    for out in (tf.qint8, tf.quint8):
        rpc = lambda input, mn, mx, c, d, out=out: R.RequantizePerChannel(
            input=input, input_min=mn, input_max=mx, requested_output_min=c,
            requested_output_max=d, out_type=out)
        for si, shape in enumerate(shapes):
            n, ch = int(np.prod(shape)), shape[-1]
            for kind in ("wide", "narrow", "edge"):
                if kind == "wide":
                    v = rng.integers(I32_MIN, I32_MAX, n, dtype=np.int64)
                elif kind == "narrow":
                    v = rng.integers(-10**6, 10**6, n)
                else:
                    v = np.resize(np.array(EDGE, np.int64), n)
                mins = -rng.uniform(0, 10, ch) * 10.0 ** rng.integers(-3, 3)
                maxs = rng.uniform(0, 10, ch) * 10.0 ** rng.integers(-3, 3)
                for c, d in [(-1.0, 1.0), (-6.0, 6.0), (-0.01, 3.0), (-1e-30, 0.0)]:
                    fam.add("RequantizePerChannel", rpc,
                            [q32(v, shape), f(mins), f(maxs), f(c), f(d)],
                            f"RequantizePerChannel/{out.name}/{si}/{kind} [{c},{d}]")
        x = q32(EDGE[:8], [1, 2, 2, 2])
        special = {
            "nan channel min": ([nan, -2.0], [1.0, 2.0], -1.0, 1.0),
            "inf channel min": ([-inf, -2.0], [1.0, 2.0], -1.0, 1.0),
            "nan channel max": ([-1.0, -2.0], [nan, 2.0], -1.0, 1.0),
            "infinite request": ([-1.0, -2.0], [1.0, 2.0], -inf, 1.0),
            "more ranges than channels": ([-1.0, -2.0, -3.0], [1.0, 2.0, 3.0], -1.0, 1.0),
            "vector request of one": ([-1.0, -2.0], [1.0, 2.0], [-1.0], [1.0]),
        }
        for name, (mn, mx, c, d) in special.items():
            fam.add("RequantizePerChannel", rpc, [x, f(mn), f(mx), f(c), f(d)],
                    f"RequantizePerChannel/{out.name}/{name}")
        errors = {
            "rank 3": (q32([1, 2, 3, 4], [1, 2, 2]), [-1.0, -2.0], [1.0, 2.0], -1.0, 1.0),
            "rank 5": (q32([1, 2, 3, 4], [1, 1, 1, 2, 2]), [-1.0, -2.0], [1.0, 2.0], -1.0, 1.0),
            "max size": (x, [-1.0], [1.0, 2.0], -1.0, 1.0),
            "request vector": (x, [-1.0, -2.0], [1.0, 2.0], [-1.0, -2.0], 1.0),
            "request empty": (x, [-1.0, -2.0], [1.0, 2.0], np.zeros([0], np.float32), 1.0),
        }
        for name, (xx, mn, mx, c, d) in errors.items():
            fam.add("RequantizePerChannel", rpc, [xx, f(mn), f(mx), f(c), f(d)],
                    f"RequantizePerChannel/{out.name}/error/{name}")
    rpc8 = lambda input, mn, mx, c, d: R.RequantizePerChannel(
        input=input, input_min=mn, input_max=mx, requested_output_min=c,
        requested_output_max=d, out_type=tf.qint8)
    x = q32(EDGE[:8], [1, 2, 2, 2])
    for c in (0.0, 2.0, nan):
        fam.add("RequantizePerChannel", rpc8, [x, f([-1.0, -2.0]), f([1.0, 2.0]), f(c), f(1.0)],
                f"RequantizePerChannel/qint8/error/request min {c}")
    rpcu = lambda input, mn, mx, c, d: R.RequantizePerChannel(
        input=input, input_min=mn, input_max=mx, requested_output_min=c,
        requested_output_max=d, out_type=tf.quint8)
    for c, d in [(0.0, 1.0), (3.0, 1.0), (0.0, 0.0)]:
        fam.add("RequantizePerChannel", rpcu,
                [x, f([-1.0, -2.0]), f([1.0, 2.0]), f(c), f(d)],
                f"RequantizePerChannel/quint8/request [{c},{d}]")


def range_per_channel_cases(fam, rng):
    for ci, clip in enumerate([6.0, 1e-10, 100.0, inf, nan]):
        rr = lambda input, mn, mx, clip=clip: R.RequantizationRangePerChannel(
            input=input, input_min=mn, input_max=mx, clip_value_max=clip)
        for t in range(8):
            ch = int(rng.integers(1, 5))
            shape = [int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 4)), ch]
            n = int(np.prod(shape))
            k = t % 4
            if k == 0:
                v = rng.integers(I32_MIN, I32_MAX, n, dtype=np.int64)
            elif k == 1:
                v = rng.integers(-10**6, 10**6, n)
            elif k == 2:
                v = rng.integers(0, 10**5, n)
            else:
                v = rng.integers(-10**6, 10**6, n)
                v[int(rng.integers(0, n))] = rng.choice(
                    [I32_MAX, I32_MIN, I32_MAX - 63, I32_MAX - 64, I32_MIN + 1])
            mins = -rng.uniform(0, 10, ch) * 10.0 ** rng.integers(-3, 3)
            maxs = rng.uniform(0, 10, ch) * 10.0 ** rng.integers(-3, 3)
            fam.add("RequantizationRangePerChannel", rr, [q32(v, shape), f(mins), f(maxs)],
                    f"RequantizationRangePerChannel/clip{ci}/{t}")
    rr = lambda input, mn, mx: R.RequantizationRangePerChannel(
        input=input, input_min=mn, input_max=mx, clip_value_max=5.0)
    x = q32([0, 1, -1, 5, 100, -100, I32_MAX, I32_MIN], [1, 2, 2, 2])
    cases = {
        "extremes": (x, [-1.0, -2.0], [1.0, 2.0]),
        "nan min": (x, [nan, -2.0], [1.0, 2.0]),
        "all zero": (q32([0, 0, 0, 0], [1, 1, 2, 2]), [-1.0, -1.0], [1.0, 1.0]),
        "non-negative": (q32([0, 1, 2, 3], [1, 1, 2, 2]), [-1.0, -2.0], [1.0, 2.0]),
        "error/rank 3": (q32([1, 2, 3, 4], [1, 2, 2]), [-1.0, -2.0], [1.0, 2.0]),
        "error/channels": (x, [-1.0, -2.0, -3.0], [1.0, 2.0, 3.0]),
        "error/min size": (x, [-1.0], [1.0, 2.0]),
        "error/min rank 2": (x, [[-1.0, -2.0]], [[1.0, 2.0]]),
        "error/empty": (q32([], [0, 2, 2, 2]), [-1.0, -2.0], [1.0, 2.0]),
    }
    for name, (xx, mn, mx) in cases.items():
        fam.add("RequantizationRangePerChannel", rr, [xx, f(mn), f(mx)],
                f"RequantizationRangePerChannel/{name}")


def family():
    fam = Family("quantized_more")
    rng = np.random.default_rng(2021)
    requantize_cases(fam, rng)
    per_channel_cases(fam, rng)
    range_per_channel_cases(fam, rng)
    return fam
