"""Matrix products: MatMul, BatchMatMul, BatchMatMulV2, BatchMatMulV3.

Integer products, and float products whose every partial sum is exact
(small integers, special values), must agree bit for bit. Float products of
random values declare a tolerance: Eigen's GEMM sums in our order (one FMA
chain per element) only for some shapes; matrix-vector products, inner
dimensions split into cache blocks and some batched shapes sum in other
orders."""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, I64_MIN, Family

R = tf.raw_ops
REASON = ("Eigen's GEMM associates float sums by its blocking (matrix-vector products, "
          "inner dimensions split into cache blocks, some batched shapes); ours is one "
          "in-order FMA chain per element. The bound is the classic one for a sum of k "
          "products in any order, doubled: 2 k eps max(|x| @ |y|)")


def dot_tol(x, y, adj_x=False, adj_y=False):
    """The tolerance of a float product in any summation order: two sums of
    k terms each within k eps sum|x||y| of the exact one."""
    eps = np.finfo(x.dtype.as_numpy_dtype).eps
    x, y = np.abs(x.numpy()).astype(np.float64), np.abs(y.numpy()).astype(np.float64)
    if adj_x:
        x = np.swapaxes(x, -1, -2)
    if adj_y:
        y = np.swapaxes(y, -1, -2)
    k = x.shape[-1]
    bound = 2 * k * eps * float(np.max(x @ y, initial=0.0))
    return f"abs:{bound:.3g}"


def rand(rng, shape, dt):
    return tf.constant(rng.standard_normal(shape), dt)


def ints(rng, shape, dt, lo=-9, hi=10):
    return tf.constant(rng.integers(lo, hi, size=shape), dt)


def family():
    fam = Family("linalg")
    rng = np.random.default_rng(20260)

    def mm(a, b, case_id, ta=False, tb=False, tol="exact"):
        if tol == "bound":
            tol = dot_tol(a, b, ta, tb)
        fam.add("MatMul", lambda a, b: R.MatMul(a=a, b=b, transpose_a=ta, transpose_b=tb),
                [a, b], f"MatMul/{case_id}/ta={ta},tb={tb}", tolerance=tol,
                reason=None if tol == "exact" else REASON)

    # --- MatMul: exact sums (integers held in floats), every transpose --------
    for dt in (tf.float32, tf.float64, tf.int32, tf.int64):
        for ta in (False, True):
            for tb in (False, True):
                m, k, n = 3, 4, 2
                a = ints(rng, [k, m] if ta else [m, k], dt)
                b = ints(rng, [n, k] if tb else [k, n], dt)
                mm(a, b, f"{dt.name}/small", ta, tb)
    # Shapes: vectors, empty dimensions, one element.
    for dt in (tf.float32, tf.int32):
        for (m, k, n) in [(1, 5, 1), (1, 6, 4), (5, 6, 1), (0, 3, 2), (2, 0, 3), (2, 3, 0),
                          (0, 0, 0), (1, 1, 1), (7, 9, 5)]:
            mm(ints(rng, [m, k], dt), ints(rng, [k, n], dt), f"{dt.name}/{m}x{k}x{n}")
    # Random floats: sums in Eigen's order for some shapes only.
    # (Long inner dimensions in float32 only: they are most of the bytes.)
    shapes = {tf.float32: [(2, 3, 4), (3, 8, 5), (8, 64, 8), (12, 20, 10), (1, 17, 3), (3, 17, 1),
                           (1, 100, 1), (2, 200, 1), (2, 400, 2)],
              tf.float64: [(2, 3, 4), (3, 8, 5), (1, 17, 3), (3, 17, 1), (2, 40, 2)]}
    for dt in (tf.float32, tf.float64):
        for (m, k, n) in shapes[dt]:
            for ta, tb in ((False, False), (True, True)) if k < 50 else ((False, False),):
                a = rand(rng, [k, m] if ta else [m, k], dt)
                b = rand(rng, [n, k] if tb else [k, n], dt)
                mm(a, b, f"{dt.name}/random {m}x{k}x{n}", ta, tb, "bound")
    # Special values: NaN, infinities, -0.0, denormals (flushed), overflow.
    nan, inf = float("nan"), float("inf")
    for dt in (tf.float32, tf.float64):
        a = tf.constant([[nan, 1.0, 0.0], [inf, 0.0, -0.0], [-0.0, -0.0, 1.0], [1e-40, 1.0, 2.0],
                         [3e38, 3e38, 0.0]], dt)
        b = tf.constant([[0.0, inf, -0.0, 1.0], [1.0, -inf, -0.0, 1e-40], [2.0, 1.0, -0.0, 0.5]],
                        dt)
        mm(a, b, f"{dt.name}/special")
        mm(tf.constant([[-0.0]], dt), tf.constant([[0.0]], dt), f"{dt.name}/-0*0")
        mm(tf.constant([[-0.0, -0.0]], dt), tf.constant([[0.0], [-0.0]], dt), f"{dt.name}/-0 sums")
    # Integer wrapping.
    mm(tf.constant([[I32_MAX, I32_MIN], [I32_MAX, 1]], tf.int32),
       tf.constant([[2, I32_MIN], [-1, 3]], tf.int32), "int32/wrap")
    mm(tf.constant([[I64_MAX, I64_MIN], [I64_MAX, 1]], tf.int64),
       tf.constant([[2, I64_MIN], [-1, 3]], tf.int64), "int64/wrap")
    # Errors and refused dtypes.
    f32 = tf.float32
    mm(tf.ones([2, 3], f32), tf.ones([4, 2], f32), "error/size")
    mm(tf.ones([2, 3], f32), tf.ones([2, 4], f32), "error/size transposed", ta=True)
    mm(tf.ones([3], f32), tf.ones([3, 2], f32), "error/vector")
    mm(tf.ones([2, 3, 3], f32), tf.ones([2, 3, 3], f32), "error/rank 3")
    mm(tf.ones([], f32), tf.ones([], f32), "error/scalars")
    mm(tf.ones([2, 2], tf.uint8), tf.ones([2, 2], tf.uint8), "error/uint8 (no kernel)")
    mm(tf.ones([2, 2], tf.uint32), tf.ones([2, 2], tf.uint32), "error/uint32 (no kernel)")

    # --- BatchMatMul (V1): equal batch dimensions ------------------------------
    def bmm(op, x, y, case_id, adj_x=False, adj_y=False, tol="exact", tout=None):
        if tol == "bound":
            tol = dot_tol(x, y, adj_x, adj_y)
        if op == "BatchMatMulV3":
            tout = tout or x.dtype
            fn = lambda x, y: R.BatchMatMulV3(x=x, y=y, Tout=tout, adj_x=adj_x, adj_y=adj_y)
        else:
            fn = lambda x, y: getattr(R, op)(x=x, y=y, adj_x=adj_x, adj_y=adj_y)
        fam.add(op, fn, [x, y], f"{op}/{case_id}/adj_x={adj_x},adj_y={adj_y}", tolerance=tol,
                reason=None if tol == "exact" else REASON)

    for op in ("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        # (Every dtype for V2; V1 and V3 share its code, so float32 and int32 there.)
        for dt in ((tf.float32, tf.float64, tf.int32, tf.int64) if op == "BatchMatMulV2"
                   else (tf.float32, tf.int32)):
            for adj_x in (False, True):
                for adj_y in (False, True):
                    x = ints(rng, [2, 4, 3] if adj_x else [2, 3, 4], dt)
                    y = ints(rng, [2, 5, 4] if adj_y else [2, 4, 5], dt)
                    bmm(op, x, y, f"{dt.name}/[2,3,4]x[2,4,5]", adj_x, adj_y)
        for dt in (tf.float32, tf.float64):
            for shapes in ([([3, 4, 5], [3, 5, 2]), ([2, 12, 12], [2, 12, 12]),
                            ([2, 2, 100], [2, 100, 2]), ([1, 8, 32], [1, 32, 8]),
                            ([2, 3, 1, 7], [2, 3, 7, 4])]
                           if dt == tf.float32 and op == "BatchMatMulV2"
                           else [([3, 4, 5], [3, 5, 2])]):
                x, y = rand(rng, shapes[0], dt), rand(rng, shapes[1], dt)
                bmm(op, x, y, f"{dt.name}/random {shapes[0]}x{shapes[1]}", tol="bound")
        # Empty batches and matrices.
        for xs, ys in [([0, 2, 3], [0, 3, 4]), ([2, 0, 3], [2, 3, 4]), ([2, 2, 0], [2, 0, 4]),
                       ([3, 0, 2, 3], [3, 0, 3, 2])]:
            bmm(op, ints(rng, xs, tf.float32), ints(rng, ys, tf.float32), f"empty {xs}x{ys}")
        # Errors common to all three.
        bmm(op, tf.ones([3]), tf.ones([3]), "error/vectors")
        bmm(op, tf.ones([]), tf.ones([2, 2]), "error/scalar")
        bmm(op, tf.ones([2, 2]), tf.ones([3]), "error/vector y")
        bmm(op, tf.ones([2, 3, 3]), tf.ones([2, 4, 2]), "error/size")
        bmm(op, tf.ones([2, 3, 4]), tf.ones([2, 4, 2]), "error/size adjoint", adj_x=True)
        bmm(op, tf.ones([2, 3, 3]), tf.ones([3, 3, 2]), "error/batch")
        bmm(op, tf.ones([0, 3, 3]), tf.ones([2, 3, 2]), "error/empty batch")
        bmm(op, tf.ones([2, 1, 2, 2]), tf.ones([2, 3, 2, 2]), "broadcast [2,1]x[2,3]")
        bmm(op, tf.ones([2, 3, 3]), tf.ones([3, 2]), "rank 3 x rank 2")
        bmm(op, ints(rng, [2, 2], tf.int32), ints(rng, [2, 2], tf.int32), "rank 2")
        if op == "BatchMatMulV2":  # (the others' op defs refuse uint16 when traced)
            bmm(op, ints(rng, [2, 2], tf.uint16), ints(rng, [2, 2], tf.uint16), "error/uint16")

    # --- broadcasting (V2, V3) --------------------------------------------------
    for op in ("BatchMatMulV2", "BatchMatMulV3"):
        for xs, ys in [([2, 1, 3, 4], [5, 4, 2]), ([3, 4], [2, 2, 4, 1]), ([1, 2, 3], [4, 3, 3]),
                       ([4, 1, 2, 3], [1, 5, 3, 2]), ([0, 2, 3], [3, 4]), ([0, 2, 3], [1, 3, 4])]:
            for dt in (tf.float32, tf.int64) if op == "BatchMatMulV2" else (tf.int32,):
                bmm(op, ints(rng, xs, dt), ints(rng, ys, dt), f"{dt.name}/broadcast {xs}x{ys}")
        bmm(op, ints(rng, [2, 3, 4], tf.int16, -300, 300), ints(rng, [4, 2], tf.int16, -300, 300),
            "int16 (wraps)")
        bmm(op, tf.constant([[[I32_MAX, 2], [I32_MIN, -1]]], tf.int32),
            tf.constant([[[3, I32_MAX], [1, I32_MIN]]], tf.int32), "int32 wraps")
        bmm(op, rand(rng, [2, 1, 3, 5], tf.float32), rand(rng, [4, 5, 2], tf.float32),
            "float32/random broadcast", tol="bound")
        bmm(op, tf.ones([2, 3, 4]), tf.ones([4, 2]), "error/size adjoint rank 2", adj_x=True)

    # --- BatchMatMulV3: int8/uint8 into int32 -----------------------------------
    for xd in (tf.int8, tf.uint8):
        for yd in (tf.int8, tf.uint8):
            lo = -128 if xd == tf.int8 else 0
            x = tf.constant(rng.integers(lo, lo + 256, size=[2, 3, 7]), xd)
            lo = -128 if yd == tf.int8 else 0
            y = tf.constant(rng.integers(lo, lo + 256, size=[7, 2]), yd)
            bmm("BatchMatMulV3", x, y, f"{xd.name}x{yd.name}->int32", tout=tf.int32)
            bmm("BatchMatMulV3", tf.transpose(x, [0, 2, 1]), y, f"{xd.name}x{yd.name}->int32",
                adj_x=True, tout=tf.int32)
    bmm("BatchMatMulV3", tf.constant(np.full([1, 300], 127), tf.int8),
        tf.constant(np.full([300, 1], -128), tf.int8), "int8 long sum", tout=tf.int32)
    bmm("BatchMatMulV3", tf.ones([2, 2], tf.int8), tf.ones([2, 2], tf.int8), "error/int8->int16",
        tout=tf.int16)
    bmm("BatchMatMulV3", tf.ones([2, 2], tf.float32), tf.ones([2, 2], tf.float32),
        "error/float->double", tout=tf.float64)
    return fam
