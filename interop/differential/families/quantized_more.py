"""Quantized ops beyond requantization ranges: Requantize, RequantizePerChannel,
RequantizationRangePerChannel, QuantizedAdd, QuantizedMul, QuantizedMatMul,
QuantizedResizeBilinear, and SobolSample (Joe and Kuo's direction numbers, as TF).

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
              "empty": q32([], [0, 3]), "one": q32([42]),
              "long": q32(rng.integers(I32_MIN, I32_MAX, 600, dtype=np.int64), [20, 30])}
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
            elif name == "long":
                pairs = pairs[::13]
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
    shapes = [[1, 2, 2, 2], [2, 3, 1, 4], [1, 1, 5, 1], [1, 2, 3, 3], [2, 4, 4, 17]]
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


def qu8(values, shape=None):
    t = tf.bitcast(tf.constant(np.array(values, np.uint8)), tf.quint8)
    return t if shape is None else tf.reshape(t, shape)


def arith_cases(fam, rng):
    def rand(shape):
        return qu8(rng.integers(0, 256, int(np.prod(shape))), shape)

    pairs = {
        "same": ([2, 3], [2, 3]), "scalar x": ([], [4, 3]), "scalar y": ([5], [1]),
        "one x": ([1, 1], [7]), "row": ([2, 3], [3]), "row x": ([3], [4, 3]),
        "column": ([3, 1], [3, 4]), "tie": ([2, 2], [2, 2]), "empty": ([0, 3], [3]),
        "empty same": ([0], [0]), "big": ([40, 9], [9]),
    }
    ranges = [(-1.0, 1.0), (0.0, 6.0), (-3.0, 70.0), (-0.5, 0.25), (-1e10, 2e10),
              (10.0, 10.5), (-1e-3, 1e-3), (-20.0, -5.0)]
    add = lambda x, y, a, b, c, d: R.QuantizedAdd(x=x, y=y, min_x=a, max_x=b, min_y=c, max_y=d)
    mul = lambda x, y, a, b, c, d: R.QuantizedMul(x=x, y=y, min_x=a, max_x=b, min_y=c, max_y=d)
    for op, fn in (("QuantizedAdd", add), ("QuantizedMul", mul)):
        for name, (sx, sy) in pairs.items():
            x, y = rand(sx), rand(sy)
            for i in range(4):
                (a, b), (c, d) = ranges[(2 * i + len(name)) % 8], ranges[(3 * i + 1) % 8]
                fam.add(op, fn, [x, y, f(a), f(b), f(c), f(d)],
                        f"{op}/{name}/{i} [{a},{b}] [{c},{d}]")
        x = qu8([0, 1, 127, 128, 254, 255])
        for (a, b) in ranges:
            fam.add(op, fn, [x, x, f(a), f(b), f(a), f(b)], f"{op}/codes [{a},{b}]")
        for (a, b), (c, d) in [((-inf, 1.0), (-1.0, 1.0)), ((-1.0, 1.0), (0.0, inf)),
                               ((-3e38, 3e38), (-1.0, 1.0)), ((-1.0, 1.0), (-1e-30, 1e-30))]:
            fam.add(op, fn, [x, x[::-1], f(a), f(b), f(c), f(d)],
                    f"{op}/extreme [{a},{b}] [{c},{d}]")
            fam.add(op, fn, [x[:1], x, f(a), f(b), f(c), f(d)],
                    f"{op}/extreme scalar [{a},{b}] [{c},{d}]")
        errors = {
            "incompatible": (rand([2, 3]), rand([4]), -1.0, 1.0, -1.0, 1.0),
            "rank 3 broadcast": (rand([2, 1, 3]), rand([2, 4, 3]), -1.0, 1.0, -1.0, 1.0),
            "x range": (rand([3]), rand([3]), 1.0, 1.0, -1.0, 1.0),
            "y range": (rand([3]), rand([3]), -1.0, 1.0, 2.0, -1.0),
            "nan range": (rand([3]), rand([3]), nan, 1.0, -1.0, 1.0),
            "min rank": (rand([3]), rand([3]), [-1.0], 1.0, -1.0, 1.0),
            "max_y rank": (rand([3]), rand([3]), -1.0, 1.0, -1.0, [[1.0]]),
            "empty vector": (rand([2, 0]), rand([3, 2, 1]), -1.0, 1.0, -1.0, 1.0),
        }
        for name, (x, y, a, b, c, d) in errors.items():
            fam.add(op, fn, [x, y, f(a), f(b), f(c), f(d)], f"{op}/error/{name}")

    for ta in (False, True):
        for tb in (False, True):
            mm = lambda a, b, w, x, y, z, ta=ta, tb=tb: R.QuantizedMatMul(
                a=a, b=b, min_a=w, max_a=x, min_b=y, max_b=z, transpose_a=ta, transpose_b=tb)
            for (m, k, n) in [(2, 3, 4), (1, 1, 1), (5, 17, 3), (0, 3, 2), (7, 64, 9)]:
                sa = [k, m] if ta else [m, k]
                sb = [n, k] if tb else [k, n]
                a, b = rand(sa), rand(sb)
                for i in range(3):
                    (w, x), (y, z) = ranges[(i + m) % 8], ranges[(2 * i + n + k) % 8]
                    fam.add("QuantizedMatMul", mm, [a, b, f(w), f(x), f(y), f(z)],
                            f"QuantizedMatMul/{int(ta)}{int(tb)}/{m}x{k}x{n}/{i}")
    mm = lambda a, b, w, x, y, z: R.QuantizedMatMul(a=a, b=b, min_a=w, max_a=x, min_b=y, max_b=z)
    for (w, x), (y, z) in [((-inf, 1.0), (-1.0, 1.0)), ((-3e38, 3e38), (0.0, 1.0)),
                           ((-1e-30, 1e-30), (-1.0, inf))]:
        fam.add("QuantizedMatMul", mm, [rand([3, 4]), rand([4, 2]), f(w), f(x), f(y), f(z)],
                f"QuantizedMatMul/extreme [{w},{x}] [{y},{z}]")
    big = qu8(np.full(300 * 2, 255), [2, 300])
    fam.add("QuantizedMatMul", mm, [big, qu8(np.full(600, 0), [300, 2]), f(-1e10), f(1.0),
                                    f(0.0), f(1e10)], "QuantizedMatMul/wrapping")
    errors = {
        "min_a rank": (rand([2, 2]), rand([2, 2]), [-1.0], 1.0, -1.0, 1.0),
        "max_a size": (rand([2, 2]), rand([2, 2]), -1.0, [1.0, 2.0], -1.0, 1.0),
        "max_b vector of one": (rand([2, 2]), rand([2, 2]), -1.0, 1.0, -1.0, [1.0]),
        "a range": (rand([2, 2]), rand([2, 2]), 1.0, 0.0, -1.0, 1.0),
        "b range": (rand([2, 2]), rand([2, 2]), -1.0, 1.0, 1.0, 1.0),
        "a rank": (rand([2]), rand([2, 2]), -1.0, 1.0, -1.0, 1.0),
        "b rank": (rand([2, 2]), rand([2, 2, 1]), -1.0, 1.0, -1.0, 1.0),
        "inner": (rand([2, 3]), rand([2, 3]), -1.0, 1.0, -1.0, 1.0),
    }
    for name, (a, b, w, x, y, z) in errors.items():
        fam.add("QuantizedMatMul", mm, [a, b, f(w), f(x), f(y), f(z)],
                f"QuantizedMatMul/error/{name}")


def resize_cases(fam, rng):
    images = {
        "quint8": lambda shape: qu8(rng.integers(0, 256, int(np.prod(shape))), shape),
        "qint32": lambda shape: q32(np.concatenate([
            [I32_MAX, I32_MIN, 16777217, -5],
            rng.integers(I32_MIN, I32_MAX, int(np.prod(shape)), dtype=np.int64)])[
                :int(np.prod(shape))], shape),
        "qint32 narrow": lambda shape: q32(rng.integers(-10**6, 10**6, int(np.prod(shape))), shape),
        "float": lambda shape: f(rng.standard_normal(int(np.prod(shape))).reshape(shape) * 100),
    }
    geometry = [([1, 2, 2, 1], [3, 3]), ([1, 2, 2, 4], [3, 3]), ([2, 3, 5, 3], [7, 11]),
                ([1, 4, 9, 1], [2, 3]), ([1, 3, 3, 2], [3, 3]), ([1, 1, 1, 3], [4, 2]),
                ([1, 5, 4, 1], [5, 20]), ([1, 6, 6, 3], [1, 1])]
    for kind, make in images.items():
        for gi, (shape, size) in enumerate(geometry):
            img = make(shape)
            for align, half in ((False, False), (True, False), (False, True), (True, True)):
                rb = lambda images, size, mn, mx, align=align, half=half: R.QuantizedResizeBilinear(
                    images=images, size=size, min=mn, max=mx, align_corners=align,
                    half_pixel_centers=half)
                fam.add("QuantizedResizeBilinear", rb,
                        [img, tf.constant(size, tf.int32), f(-1.0), f(2.5)],
                        f"QuantizedResizeBilinear/{kind}/{gi}/{int(align)}{int(half)}")
    rb = lambda images, size, mn, mx: R.QuantizedResizeBilinear(
        images=images, size=size, min=mn, max=mx)
    img = images["quint8"]([1, 2, 2, 1])
    errors = {
        "min rank": (img, [3, 3], [-1.0], 1.0),
        "max rank": (img, [3, 3], -1.0, [[1.0]]),
        "image rank": (qu8([1, 2, 3, 4], [2, 2]), [3, 3], -1.0, 1.0),
        "size rank": (img, [[3, 3]], -1.0, 1.0),
        "size length": (img, [3, 3, 3], -1.0, 1.0),
        "size zero": (img, [0, 3], -1.0, 1.0),
        "size negative": (img, [3, -1], -1.0, 1.0),
        "empty image": (qu8([], [1, 0, 2, 1]), [3, 3], -1.0, 1.0),
    }
    for name, (im, size, mn, mx) in errors.items():
        fam.add("QuantizedResizeBilinear", rb, [im, tf.constant(size, tf.int32), f(mn), f(mx)],
                f"QuantizedResizeBilinear/error/{name}")


def sobol_cases(fam):
    for dtype in (tf.float32, tf.float64):
        ss = lambda dim, num_results, skip, dtype=dtype: R.SobolSample(
            dim=dim, num_results=num_results, skip=skip, dtype=dtype)
        grid = [(1, 1, 0), (3, 5, 0), (2, 40, 0), (7, 33, 1), (40, 17, 100), (5, 64, 1023),
                (3, 9, 4096), (1111, 2, 5), (8, 600, 3),
                (2, 700, 9000), (3, 10, 2**24 - 12), (2, 20, 2**24 + 5), (4, 30, 2**29 + 3),
                (2, 8, 2**30 - 4), (2, 6, 2**31 - 10), (13, 520, 2**20)]
        if dtype == tf.float32:
            # Every dimension TF accepts, down to the table's last row.
            grid.append((21200, 1, 77))
        for dim, n, skip in grid:
            fam.add("SobolSample", ss, [tf.constant(dim), tf.constant(n), tf.constant(skip)],
                    f"SobolSample/{dtype.name}/{dim}x{n}+{skip}")
        errors = {"dim zero": (0, 3, 0), "dim too big": (21201, 3, 0), "no results": (2, 0, 0),
                  "negative skip": (2, 3, -1), "overflow": (2, 10, 2**31 - 10)}
        for name, (dim, n, skip) in errors.items():
            fam.add("SobolSample", ss, [tf.constant(dim), tf.constant(n), tf.constant(skip)],
                    f"SobolSample/{dtype.name}/error/{name}")


def family():
    fam = Family("quantized_more")
    rng = np.random.default_rng(2021)
    requantize_cases(fam, rng)
    per_channel_cases(fam, rng)
    range_per_channel_cases(fam, rng)
    arith_cases(fam, rng)
    resize_cases(fam, rng)
    sobol_cases(fam)
    return fam
