"""Segment reductions: Segment{Sum,Mean,Max,Min,Prod}, UnsortedSegment{Sum,Max,Min,Prod},
SparseSegment{Sum,Mean,SqrtN} and their WithNumSegments forms. All exact: each family's
summation order and NaN handling are TensorFlow's."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, I64_MIN, Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
FLOATS = [tf.float32, tf.float64]
INTS = [tf.int8, tf.uint8, tf.int16, tf.uint16, tf.int32, tf.int64, tf.uint32, tf.uint64]
SORTED = ["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"]
UNSORTED = ["UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin",
            "UnsortedSegmentProd"]


def vals(rng, shape, dt):
    if dt.is_floating:
        return tf.constant(rng.standard_normal(shape) * 4, dt)
    lo = 0 if dt.is_unsigned else -9
    return tf.constant(rng.integers(lo, 10, size=shape), dt)


def family():
    fam = Family("segment")
    rng = np.random.default_rng(7)

    def seg(op, data, ids, case_id):
        fam.add(op, lambda d, i: getattr(R, op)(data=d, segment_ids=i), [data, ids],
                f"{op}/{case_id}")

    def useg(op, data, ids, num, case_id):
        fam.add(op, lambda d, i, n: getattr(R, op)(data=d, segment_ids=i, num_segments=n),
                [data, ids, num], f"{op}/{case_id}")

    def sseg(op, data, idx, ids, case_id, num=None):
        if num is None:
            fn = lambda d, x, i: getattr(R, op)(data=d, indices=x, segment_ids=i)
            inputs = [data, idx, ids]
        else:
            op += "WithNumSegments"
            fn = lambda d, x, i, n: getattr(R, op)(data=d, indices=x, segment_ids=i,
                                                   num_segments=n)
            inputs = [data, idx, ids, num]
        fam.add(op, fn, inputs, f"{op}/{case_id}")

    ids6 = tf.constant([0, 0, 1, 3, 3, 3], tf.int32)
    # --- sorted ---------------------------------------------------------------
    for op in SORTED:
        for dt in FLOATS + INTS:
            seg(op, vals(rng, [6, 2], dt), ids6, f"{dt.name}/gap")
        seg(op, vals(rng, [6], tf.float32), tf.constant([0, 1, 1, 1, 1, 4], tf.int64),
            "float32/int64 ids")
        seg(op, vals(rng, [5, 2, 2], tf.int32), tf.constant([2, 2, 2, 5, 5], tf.int32),
            "int32/rank 3, leading gap")
        # Long float segments: row order from the identity.
        seg(op, tf.constant(rng.standard_normal([30, 2]), tf.float32),
            tf.constant([0] * 13 + [1] * 17, tf.int32), "float32/long")
        # NaN, infinities and -0.0 on the columns Eigen vectorizes and the rest.
        for dt, ncol in ((tf.float32, 12), (tf.float64, 7), (tf.float32, 1)):
            a = rng.standard_normal([6, ncol])
            a[1, :] = nan
            a[3, ::2] = -inf
            a[4, 1::3] = inf
            a[5, :] = -0.0
            seg(op, tf.constant(a, dt), tf.constant([0, 0, 0, 1, 1, 2], tf.int32),
                f"{dt.name}/special [6,{ncol}]")
            b = np.zeros([4, ncol])
            b[0, :] = nan
            b[1, :] = 2.0
            b[2, :] = -0.0
            b[3, :] = 0.0
            seg(op, tf.constant(b, dt), tf.constant([0, 0, 1, 1], tf.int32),
                f"{dt.name}/NaN first, -0 then 0 [4,{ncol}]")
            seg(op, tf.constant(b[[2, 3, 1, 0]], dt), tf.constant([0, 0, 1, 1], tf.int32),
                f"{dt.name}/0 then -0, NaN last [4,{ncol}]")
        seg(op, tf.constant([1e-40, 1e-40, 1e-40, 2.0], tf.float32),
            tf.constant([0, 1, 1, 1], tf.int32), "float32/denormals")
        seg(op, tf.constant([-inf, -inf, inf, inf], tf.float32),
            tf.constant([0, 0, 1, 1], tf.int32), "float32/infinities")
        # Integers at their limits (sums and products wrap).
        seg(op, tf.constant([I32_MAX, 1, I32_MIN, -1, I32_MAX, I32_MAX], tf.int32),
            tf.constant([0, 0, 1, 1, 2, 2], tf.int32), "int32/limits")
        seg(op, tf.constant([I64_MAX, 1, I64_MIN, -1, -7, 2], tf.int64),
            tf.constant([0, 0, 1, 1, 2, 2], tf.int64), "int64/limits")
        seg(op, tf.constant([-7, 2, 255, 1], tf.int8 if op != "SegmentProd" else tf.int16),
            tf.constant([0, 0, 1, 1], tf.int32), "small ints")
        # Empty inputs.
        seg(op, tf.zeros([0], tf.float32), tf.zeros([0], tf.int32), "empty")
        seg(op, tf.zeros([0, 3], tf.int32), tf.zeros([0], tf.int64), "empty [0,3]")
        seg(op, tf.zeros([3, 0], tf.float32), tf.constant([0, 1, 1], tf.int32), "[3,0]")
        # Errors.
        seg(op, vals(rng, [5], tf.float32), tf.constant([0, 1, 0, 2, 3], tf.int32),
            "error/not increasing")
        seg(op, vals(rng, [5], tf.float32), tf.constant([-1, 0, 0, 2, 3], tf.int32),
            "error/negative first")
        seg(op, vals(rng, [2], tf.float32), tf.constant([-1, -1], tf.int32), "error/all -1")
        seg(op, vals(rng, [2], tf.float32), tf.constant([-3, -2], tf.int32), "error/all negative")
        seg(op, vals(rng, [5], tf.float32), tf.constant([0, 0, 2], tf.int32), "error/length")
        seg(op, vals(rng, [5], tf.float32), tf.constant([[0, 0, 2, 2, 3]], tf.int32),
            "error/ids matrix")
        seg(op, tf.constant(1.0), tf.constant([0], tf.int32), "error/scalar data")
    # Means: integer division truncates; the count is converted to T first.
    seg("SegmentMean", tf.constant([-7, 2, -1, -1, 3], tf.int32),
        tf.constant([0, 0, 1, 1, 1], tf.int32), "int32/truncating")
    seg("SegmentMean", tf.constant(np.full(200, 1), tf.int8), tf.zeros([200], tf.int32),
        "int8/200 rows (the count wraps to -56)")
    seg("SegmentMean", tf.constant(np.full(200, 3), tf.uint8), tf.zeros([200], tf.int32),
        "uint8/200 rows")

    # --- unsorted ---------------------------------------------------------------
    for op in UNSORTED:
        for dt in FLOATS + INTS:
            useg(op, vals(rng, [6, 2], dt), tf.constant([2, -1, 0, 2, 2, -5], tf.int32),
                 tf.constant(4, tf.int32), f"{dt.name}/negative ids dropped")
        useg(op, vals(rng, [2, 3, 2], tf.float32), tf.constant([[0, 1, 0], [1, -1, 2]], tf.int64),
             tf.constant(3, tf.int64), "float32/ids matrix")
        a = rng.standard_normal([6, 12])
        a[1, :] = nan
        a[3, ::2] = -inf
        a[4, :] = -0.0
        a[5, 1::3] = nan
        useg(op, tf.constant(a, tf.float32), tf.constant([0, 0, 0, 1, 1, 1], tf.int32),
             tf.constant(3, tf.int32), "float32/special")
        useg(op, tf.constant(a[::-1].copy(), tf.float64), tf.constant([0, 0, 0, 1, 1, 1], tf.int32),
             tf.constant(3, tf.int32), "float64/special reversed")
        useg(op, tf.constant([-0.0, -0.0, 0.0, -0.0], tf.float32),
             tf.constant([0, 0, 1, 1], tf.int32), tf.constant(2, tf.int32), "float32/zeros")
        useg(op, tf.constant(rng.standard_normal(30), tf.float32),
             tf.constant(rng.integers(0, 3, 30), tf.int32), tf.constant(3, tf.int32),
             "float32/long, interleaved")
        useg(op, tf.constant([I32_MAX, 1, I32_MIN, -1, 2, 3], tf.int32),
             tf.constant([0, 0, 1, 1, 0, 1], tf.int32), tf.constant(2, tf.int32), "int32/limits")
        useg(op, tf.constant([I64_MAX, 2, I64_MIN, -1], tf.int64),
             tf.constant([0, 0, 1, 1], tf.int32), tf.constant(2, tf.int32), "int64/limits")
        useg(op, tf.zeros([0, 2], tf.float32), tf.zeros([0], tf.int32), tf.constant(3, tf.int32),
             "empty data, 3 segments")
        useg(op, tf.zeros([2, 0], tf.float32), tf.constant([7, 9], tf.int32),
             tf.constant(3, tf.int32), "empty rows, ids out of range")
        useg(op, vals(rng, [3], tf.int32), tf.constant([-1, -1, -1], tf.int32),
             tf.constant(0, tf.int32), "zero segments, ids dropped")
        # Errors.
        useg(op, vals(rng, [5], tf.float32), tf.constant([0, -1, 4, 2, 0], tf.int32),
             tf.constant(3, tf.int32), "error/out of range")
        useg(op, vals(rng, [2, 2], tf.float32), tf.constant([[0, 1], [2, 5]], tf.int32),
             tf.constant(3, tf.int32), "error/out of range, ids matrix")
        useg(op, vals(rng, [5], tf.float32), tf.constant([0, 0, 1, 0, 0], tf.int32),
             tf.constant(-1, tf.int32), "error/negative count")
        useg(op, vals(rng, [5], tf.float32), tf.constant([0, 0, 1], tf.int32),
             tf.constant(3, tf.int32), "error/shape prefix")
        useg(op, vals(rng, [3], tf.float32), tf.constant([0, 0, 1], tf.int32),
             tf.constant([3], tf.int32), "error/num_segments vector")

    # --- sparse -----------------------------------------------------------------
    for base in ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"):
        dts = FLOATS + (INTS if base == "SparseSegmentSum" else [])
        for num in (None, tf.constant(5, tf.int32)):
            for dt in dts:
                sseg(base, vals(rng, [5, 2], dt), tf.constant([4, 0, 0, 2, 3, 1], tf.int32),
                     tf.constant([0, 0, 1, 1, 1, 3], tf.int32), f"{dt.name}/gathered", num)
            sseg(base, tf.constant([-0.0, -0.0, 1e-40], tf.float32),
                 tf.constant([0, 1, 2, 2], tf.int32), tf.constant([0, 0, 1, 2], tf.int32),
                 "float32/-0 sums, denormals", num)
            sseg(base, tf.constant([nan, 1.0, -inf, inf], tf.float32),
                 tf.constant([0, 1, 2, 3, 1], tf.int32), tf.constant([0, 0, 1, 1, 2], tf.int32),
                 "float32/special", num)
            sseg(base, tf.zeros([3, 2], tf.float32), tf.zeros([0], tf.int32),
                 tf.zeros([0], tf.int32), "empty indices", num)
            sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 9, 1], tf.int32),
                 tf.constant([0, 0, 1], tf.int32), "error/bad index", num)
            sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, -1], tf.int32),
                 tf.constant([0, 1, 1], tf.int32), "error/negative index", num)
            sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, 2], tf.int32),
                 tf.constant([1, 0, 1], tf.int32), "error/not increasing", num)
            sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, 2], tf.int32),
                 tf.constant([-1, 0, 1], tf.int32), "error/negative id", num)
            sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, 2], tf.int32),
                 tf.constant([0, 1], tf.int32), "error/lengths", num)
            sseg(base, vals(rng, [4], tf.float32), tf.constant([[0, 1]], tf.int32),
                 tf.constant([0, 1], tf.int32), "error/indices matrix", num)
        # Segment lengths across TensorFlow's blocks (2 to 9 rows, then 8s).
        lengths = list(range(1, 13)) + [16, 17, 18, 25]
        ids = np.repeat(np.arange(len(lengths)), lengths)
        data = rng.standard_normal([len(ids), 1])
        for dt in FLOATS:
            sseg(base, tf.constant(data, dt), tf.constant(np.arange(len(ids)), tf.int64),
                 tf.constant(ids, tf.int32), f"{dt.name}/lengths 1 to 25")
        sseg(base, tf.constant(rng.standard_normal(40), tf.float32),
             tf.constant(rng.integers(0, 40, 90), tf.int32), tf.zeros([90], tf.int64),
             "float32/90 rows, one segment")
        sseg(base, tf.constant(rng.standard_normal([6, 3]), tf.float32),
             tf.constant([1, 2, 3], tf.int64), tf.constant([0, 2, 2], tf.int64),
             "int64 indices and ids", tf.constant(4, tf.int64))
        sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, 2], tf.int32),
             tf.constant([0, 1, 3], tf.int32), "error/ids past num_segments",
             tf.constant(3, tf.int32))
        sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, 2], tf.int32),
             tf.constant([0, 1, 1], tf.int32), "error/num_segments vector",
             tf.constant([3], tf.int32))
        sseg(base, vals(rng, [4], tf.float32), tf.constant([0, 1, 2], tf.int32),
             tf.constant([0, 1, 1], tf.int32), "error/negative num_segments",
             tf.constant(-2, tf.int32))
    sseg("SparseSegmentSum", tf.constant(np.full(20, 100), tf.int8),
         tf.constant(np.arange(20), tf.int32), tf.zeros([20], tf.int32), "int8/wraps")
    return fam
