"""The elementwise gradient kernels autodiff puts in graphs: TanhGrad, SigmoidGrad, InvGrad,
ReciprocalGrad, SqrtGrad, RsqrtGrad, float and double. All exact: TensorFlow evaluates them
with one formula in Eigen's 8-float (4-double) packets and another in the tail, and ours
follows the same split, so sizes that leave tails of every length are in the cases."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
OPS = ["TanhGrad", "SigmoidGrad", "InvGrad", "ReciprocalGrad", "SqrtGrad", "RsqrtGrad"]
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, 1e-20, 1e20, 3e38, -2.5, 1e-40]


def family():
    fam = Family("grads")
    rng = np.random.default_rng(41)

    for op in OPS:
        f = lambda y, dy, op=op: getattr(R, op)(y=y, dy=dy)
        for dt in (tf.float32, tf.float64):
            for n in (1, 3, 8, 13, 36, 67):
                y = rng.uniform(-3, 3, n) if op != "SqrtGrad" else rng.uniform(0.01, 5, n)
                fam.add(op, f, [tf.constant(y, dt), tf.constant(rng.uniform(-4, 4, n), dt)],
                        f"{op}/{dt.name} random {n}")
            # Every special value against every other, so each pair lands in a packet
            # and in the tail.
            s = np.array(SPECIAL)
            y, dy = np.meshgrid(s, s)
            fam.add(op, f, [tf.constant(y.ravel(), dt), tf.constant(dy.ravel(), dt)],
                    f"{op}/{dt.name} special")
            fam.add(op, f, [tf.constant(y.ravel()[::-1].copy(), dt),
                            tf.constant(dy.ravel()[::-1].copy(), dt)],
                    f"{op}/{dt.name} special reversed")
            fam.add(op, f, [tf.zeros([0, 3], dt), tf.zeros([0, 3], dt)], f"{op}/{dt.name} empty")
        fam.add(op, f, [tf.constant(rng.uniform(0.1, 2, [2, 3]), tf.float32),
                        tf.constant(rng.uniform(0.1, 2, [6]), tf.float32)],
                f"{op}/shapes differ, counts agree")
        fam.add(op, f, [tf.ones([2]), tf.ones([3])], f"{op}/error/counts")
        fam.add(op, f, [tf.ones([2]), tf.ones([1])], f"{op}/error/no broadcast")
    return fam
