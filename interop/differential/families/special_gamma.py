"""Incomplete gamma and beta functions, zeta and polygamma, float and double: Igamma,
Igammac, IgammaGradA, RandomGammaGrad, Zeta, Polygamma (binary, numpy broadcasting) and
Betainc (ternary: equal shapes or scalars, no other broadcasting).

TensorFlow evaluates them with Eigen's Cephes-derived series and continued fractions in the
tensor's precision under FTZ/DAZ; ours runs the same algorithms in the same precision, with
denormals flushed as there, the same libm calls (log, exp, log1p, pow, tan) and glibc's
log-gamma algorithm, so results are bit for bit. The one tolerance is the sign of double
Betainc's NaN results from NaN inputs (NAN_SIGN). Special values (NaN, +-inf, +-0, negative
and non-integer orders, poles, the domain edges x = 0 and x = 1, subnormals, large
parameters that reach the iteration limits) are in every op's cases."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 1e-20, 1e-40, 3.0,
           10.0, 30.0, 100.0, 1e10, 0.999999, 1.5, 7.25, -3.0, 4.0]
# op: (argument names, random domains per argument)
BINARY = {
    "Igamma": (("a", "x"), ((0.01, 20), (0, 30))),
    "Igammac": (("a", "x"), ((0.01, 20), (0, 30))),
    "IgammaGradA": (("a", "x"), ((0.01, 20), (0, 30))),
    "RandomGammaGrad": (("alpha", "sample"), ((0.01, 20), (0.001, 30))),
    "Zeta": (("x", "q"), ((1, 20), (-5, 20))),
    "Polygamma": (("a", "x"), ((0, 6), (-5, 20))),
}
DENORMAL = {"float32": [1e-40, -1e-40, 1e-45, 1e-39], "float64": [5e-324, -1e-310, 1e-310]}
NAN_SIGN = ("the sign of a NaN result (values are exact): with two NaN operands x86 keeps the "
            "first, and which comes first in each commutative operation of the double "
            "algorithm's continued fraction is the C++ compiler's choice, not the source's")


def family():
    fam = Family("special_gamma")
    rng = np.random.default_rng(33)

    def add(op, fn, inputs, case_id):
        fam.add(op, fn, inputs, f"{op}/{case_id}")

    for op, ((an, bn), ((alo, ahi), (blo, bhi))) in BINARY.items():
        f = lambda a, b, op=op, an=an, bn=bn: getattr(R, op)(**{an: a, bn: b})
        for dt in (tf.float32, tf.float64):
            a = rng.uniform(alo, ahi, 60)
            if op == "Polygamma":
                a = np.floor(a)
            elif op == "Zeta":
                # Integer orders reach the negative-q branch.
                a[::3] = np.floor(a[::3])
            add(op, f, [tf.constant(a, dt), tf.constant(rng.uniform(blo, bhi, 60), dt)],
                f"{dt.name} random")
            s = tf.constant(SPECIAL, dt)
            add(op, f, [tf.reshape(s, [-1, 1]), tf.reshape(s, [1, -1])],
                f"{dt.name} special, broadcast")
            add(op, f, [tf.zeros([0, 2], dt), tf.ones([2], dt)], f"{dt.name} empty")
            # Subnormals, which TensorFlow's FTZ/DAZ mode reads as zero, except where
            # a libm call (Igammac's log of x) takes one as its argument.
            tiny = DENORMAL[dt.name] + [1e-20, 1e-3, 0.5, 1.0, 3.0, 0.0]
            add(op, f, [tf.reshape(tf.constant(tiny, dt), [-1, 1]),
                        tf.reshape(tf.constant(tiny, dt), [1, -1])], f"{dt.name} denormal")
        add(op, f, [tf.ones([2, 3]), tf.ones([4])], "error/shapes")

    # Wide ranges: parameters from 1e-6 to 1e5 with x near them (where both the series
    # and the continued fraction run long), zeta and polygamma of negative arguments.
    for dt in (tf.float32, tf.float64):
        a = 10 ** rng.uniform(-6, 5, 120)
        x = a * rng.uniform(0.5, 1.5, 120)
        for op in ("Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad"):
            an, bn = BINARY[op][0]
            add(op, lambda p, q, op=op, an=an, bn=bn: getattr(R, op)(**{an: p, bn: q}),
                [tf.constant(a, dt), tf.constant(x, dt)], f"{dt.name} wide")
        order = np.floor(rng.uniform(1, 12, 120))
        q = rng.uniform(-200, 5, 120)
        add("Zeta", lambda p, r: R.Zeta(x=p, q=r), [tf.constant(order, dt), tf.constant(q, dt)],
            f"{dt.name} wide")
        add("Polygamma", lambda p, r: R.Polygamma(a=p, x=r),
            [tf.constant(order - 1, dt), tf.constant(10 ** rng.uniform(-5, 4, 120), dt)],
            f"{dt.name} wide")
        add("Betainc", lambda p, r, t: R.Betainc(a=p, b=r, x=t),
            [tf.constant(10 ** rng.uniform(-4, 4, 120), dt),
             tf.constant(10 ** rng.uniform(-4, 4, 120), dt),
             tf.constant(rng.uniform(0, 1, 120), dt)], f"{dt.name} wide")

    # Large parameters: the continued fraction and the series' iteration limits.
    big_a = [0.5, 5.0, 50.0, 500.0, 5000.0, 1e5]
    for op in ("Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad"):
        an, bn = BINARY[op][0]
        f = lambda a, b, op=op, an=an, bn=bn: getattr(R, op)(**{an: a, bn: b})
        for dt in (tf.float32, tf.float64):
            a = tf.reshape(tf.constant(big_a, dt), [-1, 1])
            x = tf.constant([[0.9, 1.0, 1.1]], dt) * a
            add(op, f, [a, x], f"{dt.name} large")
    # Zeta with negative non-integer q and integer x; Polygamma at the poles and at
    # negative non-integer x.
    for dt in (tf.float32, tf.float64):
        add("Zeta", lambda x, q: R.Zeta(x=x, q=q),
            [tf.constant([[2.0], [3.0], [4.0], [7.0]], dt),
             tf.constant([[-0.5, -1.5, -7.25, -30.1, 0.25, 1e-3, 1e6]], dt)],
            f"{dt.name} negative q")
        add("Polygamma", lambda a, x: R.Polygamma(a=a, x=x),
            [tf.constant([[0.0], [1.0], [2.0], [3.0], [10.0], [0.5], [-1.0]], dt),
             tf.constant([[-2.0, -0.5, -1.25, 0.0, 1e-3, 0.75, 50.0]], dt)],
            f"{dt.name} orders")

    def betainc(a, b, x):
        return R.Betainc(a=a, b=b, x=x)

    for dt in (tf.float32, tf.float64):
        n = 80
        a = rng.uniform(0.05, 30, n)
        b = rng.uniform(0.05, 30, n)
        a[::4] = rng.uniform(0.01, 1, n // 4)
        b[1::4] = rng.uniform(10, 200, n // 4)
        x = rng.uniform(0, 1, n)
        add("Betainc", betainc, [tf.constant(a, dt), tf.constant(b, dt), tf.constant(x, dt)],
            f"{dt.name} random")
        edge = [inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-20, 1e-40, 15.0, 300.0]
        xs = [-0.5, 0.0, -0.0, 1e-40, 1e-7, 0.2, 0.5, 0.9, 0.999, 1.0, 1.5, inf, -inf]
        g = np.array(np.meshgrid(edge, edge, xs, indexing="ij")).reshape(3, -1)
        add("Betainc", betainc, [tf.constant(g[0], dt), tf.constant(g[1], dt),
                                 tf.constant(g[2], dt)], f"{dt.name} special")
        # A NaN in each place in turn.
        few = [1.0, 0.5, 15.0, inf]
        rows = []
        for k in range(3):
            others = np.array(np.meshgrid(few, few + [0.2, 0.9], indexing="ij")).reshape(2, -1)
            rows.append(np.insert(others, k, nan, axis=0))
        g = np.concatenate(rows + [np.full((3, 1), nan)], axis=1)
        t = "exact" if dt == tf.float32 else "ulp:0"
        fam.add("Betainc", betainc, [tf.constant(g[0], dt), tf.constant(g[1], dt),
                                     tf.constant(g[2], dt)], f"Betainc/{dt.name} NaN",
                tolerance=t, reason=None if t == "exact" else NAN_SIGN)
        add("Betainc", betainc, [tf.constant(2.5, dt), tf.constant(0.5, dt),
                                 tf.constant([[0.1, 0.5], [0.7, 0.99]], dt)],
            f"{dt.name} scalar a and b")
        add("Betainc", betainc, [tf.constant([[1.5, 20.0]], dt), tf.constant(3.0, dt),
                                 tf.constant(0.4, dt)], f"{dt.name} scalar b and x")
        add("Betainc", betainc, [tf.constant(2.0, dt), tf.constant(3.0, dt),
                                 tf.constant(0.25, dt)], f"{dt.name} scalars")
        add("Betainc", betainc, [tf.zeros([0, 3], dt), tf.constant(1.0, dt),
                                 tf.zeros([0, 3], dt)], f"{dt.name} empty")
    one = tf.ones([2, 3])
    for case_id, args in [
        ("a vs b", (one, tf.ones([3]), one)),
        ("a vs b broadcastable", (tf.ones([2, 1]), one, one)),
        ("a vs x", (one, one, tf.ones([3, 2]))),
        ("b vs x", (tf.constant(1.0), one, tf.ones([2, 2]))),
        ("length one", (tf.ones([1]), tf.ones([3]), tf.constant(0.5))),
    ]:
        add("Betainc", betainc, list(args), f"error/{case_id}")
    return fam
