"""The sparse segment reductions' gradients: SparseSegmentSumGrad, SparseSegmentMeanGrad,
SparseSegmentSqrtNGrad and their V2 forms (only the rows named, sorted, with the indices),
float and double, int32 and int64 indices and segment ids; out-of-range errors."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
OPS = ["SparseSegmentSumGrad", "SparseSegmentMeanGrad", "SparseSegmentSqrtNGrad"]


def family():
    fam = Family("segment_grad")
    rng = np.random.default_rng(43)

    for op in OPS:
        f = lambda g, i, s, d, op=op: getattr(R, op)(grad=g, indices=i, segment_ids=s,
                                                     output_dim0=d)
        f2 = lambda g, i, s, d, op=op: getattr(R, op + "V2")(grad=g, indices=i, segment_ids=s,
                                                             dense_output_dim0=d)
        for dt in (tf.float32, tf.float64):
            for it in (tf.int32, tf.int64):
                g = tf.constant(rng.standard_normal([4, 3]), dt)
                idx = tf.constant([0, 5, 2, 5, 5, 1, 0], it)
                seg = tf.constant([0, 0, 1, 1, 1, 3, 3], it)
                args = [g, idx, seg, tf.constant(7)]
                fam.add(op, f, args, f"{op}/{dt.name} {it.name}")
                fam.add(op + "V2", f2, args, f"{op}V2/{dt.name} {it.name}")
            g = tf.constant(rng.standard_normal([3]), dt)
            args = [g, tf.constant([2, 2, 0]), tf.constant([0, 1, 2]), tf.constant(3)]
            fam.add(op, f, args, f"{op}/{dt.name} vector")
            fam.add(op + "V2", f2, args, f"{op}V2/{dt.name} vector")
            g = tf.constant(rng.standard_normal([2, 2, 2]), dt)
            args = [g, tf.constant([1, 0, 1]), tf.constant([0, 0, 1]), tf.constant(4)]
            fam.add(op, f, args, f"{op}/{dt.name} rank 3")
            fam.add(op + "V2", f2, args, f"{op}V2/{dt.name} rank 3")
        empty = [tf.zeros([2, 3]), tf.zeros([0], tf.int32), tf.zeros([0], tf.int32),
                 tf.constant(3)]
        # (Not the V1 ops: with no indices TensorFlow returns its output uninitialized.)
        fam.add(op + "V2", f2, empty, f"{op}V2/empty")
        for name, args in [
            ("index out of range", [tf.ones([2, 2]), tf.constant([0, 3]), tf.constant([0, 1]),
                                    tf.constant(3)]),
            ("negative index", [tf.ones([2, 2]), tf.constant([-1, 0]), tf.constant([0, 1]),
                                tf.constant(3)]),
            ("segment out of range", [tf.ones([2, 2]), tf.constant([0, 1]),
                                      tf.constant([0, 2]), tf.constant(3)]),
            ("sizes differ", [tf.ones([2, 2]), tf.constant([0, 1, 2]), tf.constant([0, 1]),
                              tf.constant(3)]),
        ]:
            fam.add(op, f, args, f"{op}/error/{name}")
            fam.add(op + "V2", f2, args, f"{op}V2/error/{name}")
    return fam
