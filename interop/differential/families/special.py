"""Special functions and guarded products, float and double: Erf, Erfc, Erfinv, Ndtri,
Lgamma, Digamma, Xlogy, Xlog1py, MulNoNan, NextAfter.

MulNoNan and NextAfter are exact. The others declare ulp tolerances: TensorFlow evaluates
them with Eigen's polynomials (Erf, Erfc, the packet log of Xlogy and Xlog1py) or with
Cephes-style algorithms run in float for float tensors, where ours calls fdlibm and runs the
algorithms in double. Special values (NaN, +-inf, +-0, poles, domain edges, denormals) are
in every case."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 1e-20, -1e-20, 1e-40,
           10.0, 30.0, -30.5, 1e10, 0.999999, -0.999999, 1.5]
EIGEN = "TensorFlow evaluates it with Eigen's polynomial approximation; ours is fdlibm's"
CEPHES = ("TensorFlow runs Eigen's Cephes-style algorithm in the tensor's precision; ours runs "
          "the published algorithm in double (float results rounded once)")
LOG = "Eigen's packet log against libm's in ours"
# (op, args, domain of random arguments per arg, float32 tolerance, float64 tolerance, reason)
UNARY = [
    ("Erf", (-4, 4), "ulp:4", "ulp:4", EIGEN),
    ("Erfc", (-4, 9), "ulp:64", "ulp:4", EIGEN + " (float: 38 ulp below 1e-30)"),
    ("Erfinv", (-1, 1), "ulp:16", "ulp:8", CEPHES),
    ("Ndtri", (0, 1), "ulp:4", "ulp:4", CEPHES),
    ("Lgamma", (-10, 30), "ulp:16", "ulp:16", "glibc's lgamma against fdlibm's (the libm crate): "
     "8 ulp near the roots of negative arguments"),
    ("Digamma", (-10, 30), "ulp:16", "ulp:4", CEPHES),
]
BINARY = [
    ("Xlogy", ("x", "y"), ((-5, 5), (0, 10)), "ulp:4", "ulp:4", LOG),
    ("Xlog1py", ("x", "y"), ((-5, 5), (-1, 10)), "ulp:4", "ulp:4", LOG),
    ("MulNoNan", ("x", "y"), ((-5, 5), (-5, 5)), "exact", "exact", None),
    ("NextAfter", ("x1", "x2"), ((-5, 5), (-5, 5)), "exact", "exact", None),
]


def family():
    fam = Family("special")
    rng = np.random.default_rng(29)

    def add(op, fn, inputs, case_id, tol, why):
        fam.add(op, fn, inputs, f"{op}/{case_id}", tolerance=tol,
                reason=None if tol == "exact" else why)

    for op, (lo, hi), tol32, tol64, why in UNARY:
        f = lambda x, op=op: getattr(R, op)(x=x)
        for dt, tol in ((tf.float32, tol32), (tf.float64, tol64)):
            add(op, f, [tf.constant(rng.uniform(lo, hi, 64), dt)], f"{dt.name} random", tol, why)
            add(op, f, [tf.constant([v for v in SPECIAL if abs(v) != 1e-40], dt)],
                f"{dt.name} special", tol, why)
            add(op, f, [tf.constant([1e-40, -1e-40], dt)], f"{dt.name} denormal", tol, why)
            add(op, f, [tf.zeros([2, 0], dt)], f"{dt.name} empty", "exact", None)
    for x in (1e-5, 1e-3, 0.01, 0.1, 0.3, 0.45, 0.5):
        for op in ("Ndtri", "Erfinv"):
            vals = [x, 1 - x, -x] if op == "Erfinv" else [x, 1 - x]
            for dt in (tf.float32, tf.float64):
                add(op, lambda v, op=op: getattr(R, op)(x=v), [tf.constant(vals, dt)],
                    f"{dt.name} {x}", "ulp:16", CEPHES)
    add("Ndtri", lambda v: R.Ndtri(x=v), [tf.constant([1e-300, 1e-100, 1e-30, 1e-10],
                                                      tf.float64)], "float64 tail", "ulp:4",
        CEPHES)

    for op, (an, bn), ((alo, ahi), (blo, bhi)), tol32, tol64, why in BINARY:
        f = lambda a, b, op=op, an=an, bn=bn: getattr(R, op)(**{an: a, bn: b})
        for dt, tol in ((tf.float32, tol32), (tf.float64, tol64)):
            a = rng.uniform(alo, ahi, 67)
            add(op, f, [tf.constant(a, dt), tf.constant(rng.uniform(blo, bhi, 67), dt)],
                f"{dt.name} random", tol, why)
            s = tf.constant(SPECIAL, dt)
            add(op, f, [tf.reshape(s, [-1, 1]), tf.reshape(s, [1, -1])],
                f"{dt.name} special, broadcast", tol, why)
            add(op, f, [tf.zeros([0, 2], dt), tf.ones([2], dt)], f"{dt.name} empty", "exact",
                None)
        add(op, f, [tf.ones([2, 3]), tf.ones([4])], "error/shapes", "exact", None)
    return fam
