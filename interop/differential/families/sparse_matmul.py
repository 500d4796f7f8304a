"""SparseMatMul: MatMul of float matrices with sparsity hints (a_is_sparse, b_is_sparse),
every transpose. TensorFlow's sparse algorithm sums in its own blocked order, so float cases
are held to the classic bound of a k-term sum in any order (as linalg's MatMul cases);
integer-valued and empty cases are exact."""

import numpy as np
import tensorflow as tf

from harness import Family
from families.linalg import REASON, dot_tol

R = tf.raw_ops


def family():
    fam = Family("sparse_matmul")
    rng = np.random.default_rng(37)

    def mm(a, b, case_id, ta=False, tb=False, sa=False, sb=False, tol="exact"):
        f = lambda a, b: R.SparseMatMul(a=a, b=b, transpose_a=ta, transpose_b=tb,
                                        a_is_sparse=sa, b_is_sparse=sb)
        reason = None
        if tol == "bound":
            tol, reason = dot_tol(a, b, ta, tb), REASON
        fam.add("SparseMatMul", f, [a, b], f"SparseMatMul/{case_id}", tolerance=tol,
                reason=reason)

    for sa in (False, True):
        for sb in (False, True):
            for ta in (False, True):
                for tb in (False, True):
                    m, k, n = 5, 7, 4
                    a = rng.standard_normal([k, m] if ta else [m, k])
                    b = rng.standard_normal([n, k] if tb else [k, n])
                    # Mostly zeros, as the hints promise.
                    a[rng.random(a.shape) < 0.6] = 0.0
                    b[rng.random(b.shape) < 0.6] = 0.0
                    mm(tf.constant(a, tf.float32), tf.constant(b, tf.float32),
                       f"sparse {sa}/{sb} transpose {ta}/{tb}", ta, tb, sa, sb, "bound")
            ints = lambda s: tf.constant(rng.integers(-4, 5, s), tf.float32)
            mm(ints([6, 9]), ints([9, 3]), f"sparse {sa}/{sb} integers", sa=sa, sb=sb)
            mm(tf.zeros([0, 3]), tf.zeros([3, 2]), f"sparse {sa}/{sb} empty", sa=sa, sb=sb)
            mm(tf.zeros([2, 0]), tf.zeros([0, 2]), f"sparse {sa}/{sb} empty inner", sa=sa,
               sb=sb)
    mm(tf.constant(rng.standard_normal([40, 300]), tf.float32),
       tf.constant(rng.standard_normal([300, 30]), tf.float32), "large", tol="bound")
    mm(tf.ones([2, 3]), tf.ones([4, 2]), "error/inner dimensions")
    mm(tf.ones([2, 3, 1]), tf.ones([1, 2]), "error/rank")
    return fam
