"""InvertPermutation, Bucketize, ApproximateEqual, Xdivy, LinSpace, Cross. All exact
(TensorFlow rounds every product and sum of LinSpace and Cross: no fused multiply-adds)."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 1e-40, -1e-40, 3e38, 0.5]


def family():
    fam = Family("mathx")
    rng = np.random.default_rng(23)

    def add(op, fn, inputs, case_id):
        fam.add(op, fn, inputs, f"{op}/{case_id}")

    inv = lambda x: R.InvertPermutation(x=x)
    for dt in (tf.int32, tf.int64):
        add("InvertPermutation", inv, [tf.constant(rng.permutation(9), dt)], f"{dt.name} 9")
        add("InvertPermutation", inv, [tf.zeros([0], dt)], f"{dt.name} empty")
    add("InvertPermutation", inv, [tf.constant([0])], "one")
    add("InvertPermutation", inv, [tf.constant([2, 0, 0])], "error/duplicate")
    add("InvertPermutation", inv, [tf.constant([3, 0, 1])], "error/past the end")
    add("InvertPermutation", inv, [tf.constant([-1, 0, 1])], "error/negative")
    add("InvertPermutation", inv, [tf.constant([[0]])], "error/matrix")

    for bounds in ([0.0, 1.0, 5.0], [], [1.0, 1.0, 2.0], [-inf, 0.0, inf], [16777216.0, 1e12]):
        b = lambda x, bounds=bounds: R.Bucketize(input=x, boundaries=bounds)
        add("Bucketize", b, [tf.constant([SPECIAL], tf.float32)], f"float32 {bounds}")
        add("Bucketize", b, [tf.constant(SPECIAL + [1e300], tf.float64)], f"float64 {bounds}")
        add("Bucketize", b, [tf.constant([I32_MIN, -1, 0, 1, 5, 16777217, I32_MAX], tf.int32)],
            f"int32 {bounds}")
        add("Bucketize", b, [tf.constant([-5, 0, 1, 2**40, I64_MAX], tf.int64)],
            f"int64 {bounds}")
    add("Bucketize", lambda x: R.Bucketize(input=x, boundaries=[0.5]),
        [tf.zeros([2, 0, 3])], "empty")

    ae = lambda x, y: R.ApproximateEqual(x=x, y=y, tolerance=0.5)
    for dt in (tf.float32, tf.float64):
        x = tf.constant(SPECIAL, dt)
        y = tf.constant(SPECIAL[::-1], dt)
        add("ApproximateEqual", ae, [x, y], f"{dt.name} special")
        add("ApproximateEqual", ae, [tf.constant([1.0, 1.5, 2.0], dt),
                                     tf.constant([1.5, 1.0, 2.5000001], dt)], f"{dt.name} edge")
    add("ApproximateEqual", lambda x, y: R.ApproximateEqual(x=x, y=y),
        [tf.constant([1.0, 1.00001]), tf.constant([1.000009, 1.0])], "default tolerance")
    add("ApproximateEqual", ae, [tf.ones([2]), tf.ones([1])], "error/shapes")
    add("ApproximateEqual", ae, [tf.ones([2], tf.int32), tf.ones([2], tf.int32)],
        "error/int32 (no kernel)")

    xd = lambda x, y: R.Xdivy(x=x, y=y)
    for dt in (tf.float32, tf.float64):
        s = tf.constant(SPECIAL, dt)
        add("Xdivy", xd, [tf.reshape(s, [-1, 1]), tf.reshape(s, [1, -1])],
            f"{dt.name} special, broadcast")
    add("Xdivy", xd, [tf.ones([2, 3]), tf.ones([4])], "error/shapes")

    ls = lambda a, b, n: R.LinSpace(start=a, stop=b, num=n)
    for dt in (tf.float32, tf.float64):
        for a, b, n in [(0.0, 1.0, 5), (-3.7, 11.2, 17), (1.0, -1.0, 2), (5.0, 2.0, 1),
                        (0.1, 0.7, 50), (-0.0, 0.0, 3), (1e30, -1e30, 7), (0.0, inf, 3),
                        (nan, 1.0, 3)]:
            add("LinSpace", ls, [tf.constant(a, dt), tf.constant(b, dt), tf.constant(n)],
                f"{dt.name} {a},{b},{n}")
        for a, b in rng.standard_normal([4, 2]):
            add("LinSpace", ls, [tf.constant(a, dt), tf.constant(b, dt),
                                 tf.constant(13, tf.int64)], f"{dt.name} random {a:.3f},{b:.3f}")
    add("LinSpace", ls, [tf.constant(0.0), tf.constant(1.0), tf.constant(0)], "error/num 0")
    add("LinSpace", ls, [tf.constant(0.0), tf.constant(1.0), tf.constant(-2)], "error/num -2")
    add("LinSpace", ls, [tf.constant([0.0]), tf.constant(1.0), tf.constant(3)], "error/start")
    add("LinSpace", ls, [tf.constant(0.0), tf.constant([1.0]), tf.constant(3)], "error/stop")
    add("LinSpace", ls, [tf.constant(0.0), tf.constant(1.0), tf.constant([3])], "error/num")

    cr = lambda a, b: R.Cross(a=a, b=b)
    for dt in (tf.float32, tf.float64):
        add("Cross", cr, [tf.constant(rng.standard_normal([4, 3]), dt),
                          tf.constant(rng.standard_normal([4, 3]), dt)], f"{dt.name} random")
        add("Cross", cr, [tf.constant([[nan, 1.0, -0.0], [inf, 1e-40, 3e38]], dt),
                          tf.constant([[1.0, 0.0, 2.0], [0.0, 1e-40, 3e38]], dt)],
            f"{dt.name} special")
    for dt in (tf.int8, tf.uint8, tf.int16, tf.uint16, tf.int32, tf.int64, tf.uint32,
               tf.uint64):
        info = np.iinfo(dt.as_numpy_dtype)
        add("Cross", cr, [tf.constant(rng.integers(info.min, info.max, size=[2, 3],
                                                   dtype=dt.as_numpy_dtype, endpoint=True)),
                          tf.constant(rng.integers(info.min, info.max, size=[2, 3],
                                                   dtype=dt.as_numpy_dtype, endpoint=True))],
            f"{dt.name} wraps")
    add("Cross", cr, [tf.zeros([0, 3]), tf.zeros([0, 3])], "empty")
    add("Cross", cr, [tf.ones([2]), tf.ones([2])], "error/not 3")
    add("Cross", cr, [tf.ones([1, 3]), tf.ones([3])], "error/shapes")
    return fam
