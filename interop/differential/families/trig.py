"""Inverse trigonometric and hyperbolic functions and Atan2, float and double.

Sinh and Cosh (and double Asin, Acos) are held exact: TensorFlow calls glibc's libm as ours
does. The others declare a tolerance in ulps: TensorFlow evaluates them with Eigen's own
polynomials (float Asin/Acos, Atan, Atan2) or glibc (Asinh, Acosh, Atanh) where ours calls
libm or Rust's formulas. Special values (NaN, +-inf, +-0, domain edges, denormals) are in
every case."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
# (op, domain of the random inputs, tolerance for float32, for float64)
UNARY = [
    ("Sinh", (-20, 20), "exact", "exact"),
    ("Cosh", (-20, 20), "exact", "exact"),
    ("Asin", (-1, 1), "ulp:4", "exact"),
    ("Acos", (-1, 1), "ulp:4", "exact"),
    ("Atan", (-10, 10), "ulp:4", "ulp:4"),
    ("Asinh", (-100, 100), "ulp:4", "ulp:4"),
    ("Acosh", (1, 100), "ulp:4", "ulp:4"),
    ("Atanh", (-1, 1), "ulp:4", "ulp:4"),
]
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-40, -1e-40, 1e-30, 2.0, 100.0,
           1e30, -1e30, 89.0, -89.0, 710.0, 1.0000001, 0.9999999]
REASON = {
    "Asin": "TensorFlow's float32 Asin is Eigen's polynomial (pasin_float); ours is libm's asinf",
    "Acos": "TensorFlow's float32 Acos is Eigen's polynomial (pacos_float); ours is libm's acosf",
    "Atan": "TensorFlow's Atan is Eigen's polynomial (patan); ours is libm's atan",
    "Asinh": "TensorFlow calls glibc's asinh; ours is the textbook log1p form",
    "Acosh": "TensorFlow calls glibc's acosh; ours is the textbook log1p form",
    "Atanh": "TensorFlow's Atanh is Eigen's (patanh); ours is the textbook log1p form",
    "Atan2": "TensorFlow's Atan2 is Eigen's generic_atan2 over its patan; ours is libm's atan2",
}


def family():
    fam = Family("trig")
    rng = np.random.default_rng(17)

    def add(op, fn, inputs, case_id, tol):
        fam.add(op, fn, inputs, f"{op}/{case_id}", tolerance=tol,
                reason=None if tol == "exact" else REASON[op])

    for op, (lo, hi), tol32, tol64 in UNARY:
        for dt, tol in ((tf.float32, tol32), (tf.float64, tol64)):
            f = lambda x, op=op: getattr(R, op)(x=x)
            add(op, f, [tf.constant(rng.uniform(lo, hi, 64), dt)], f"{dt.name} random", tol)
            add(op, f, [tf.constant(SPECIAL, dt)], f"{dt.name} special", tol)
            add(op, f, [tf.zeros([3, 0, 2], dt)], f"{dt.name} empty", "exact")
        add(op, lambda x, op=op: getattr(R, op)(x=x), [tf.constant([[0.25, -0.75]])],
            "float32 [1,2]", tol32)
    f = lambda y, x: R.Atan2(y=y, x=x)
    for dt in (tf.float32, tf.float64):
        add("Atan2", f, [tf.constant(rng.uniform(-10, 10, 64), dt),
                         tf.constant(rng.uniform(-10, 10, 64), dt)], f"{dt.name} random",
            "ulp:4")
        # (Without denormals: Eigen's atan2 of a zero and a denormal, under DAZ, is pi/4.)
        s = tf.constant([v for v in SPECIAL if abs(v) != 1e-40], dt)
        add("Atan2", f, [tf.reshape(s, [-1, 1]), tf.reshape(s, [1, -1])],
            f"{dt.name} special, broadcast", "ulp:4")
        add("Atan2", f, [tf.zeros([0, 2], dt), tf.ones([2], dt)], f"{dt.name} empty", "exact")
    add("Atan2", f, [tf.ones([2, 3]), tf.ones([4])], "error/shapes", "exact")
    return fam
