"""More SparseTensor kernels: SparseDenseCwise{Add,Mul,Div} (the dense side
broadcast to the sparse shape), SparseSparse{Maximum,Minimum}, SparseSoftmax,
SparseSplit, and the gradients SparseAddGrad, SparseFillEmptyRowsGrad and
SparseSliceGrad."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


def cwise_cases(fam):
    ind, sh = i64([[0, 1], [1, 0], [1, 2]]), i64([2, 3])
    for op in ("SparseDenseCwiseAdd", "SparseDenseCwiseMul", "SparseDenseCwiseDiv"):
        f = getattr(R, op)
        fn = lambda i, v, s, d, f=f: f(sp_indices=i, sp_values=v, sp_shape=s, dense=d)  # noqa: E731
        add = lambda name, inputs, op=op, fn=fn: fam.add(op, fn, inputs, f"{op}/{name}")  # noqa: E731
        add("float, same shape", [ind, tf.constant([1.5, -2., 3.]), sh,
                                  tf.constant([[10., 20., 30.], [0.25, -7., 1e-3]])])
        add("float, row broadcast", [ind, tf.constant([1.5, -2., 3.]), sh, tf.constant([10., -20., 30.])])
        add("float, column broadcast", [ind, tf.constant([1.5, -2., 3.]), sh, tf.constant([[3.], [-0.5]])])
        add("float, scalar dense", [ind, tf.constant([1.5, -2., 3.]), sh, tf.constant(4.)])
        add("float, specials", [i64([[0], [1], [2], [3], [4], [5]]),
                                tf.constant([nan, inf, -inf, -0., 1e-45, 3e38]), i64([6]),
                                tf.constant([2., -inf, 3., 5., 0.5, 10.])])
        add("double, rank 3", [i64([[0, 1, 2], [1, 0, 0], [1, 1, 1]]), tf.constant([0.1, -0.2, 0.3], tf.float64),
                               i64([2, 2, 3]), tf.constant([[0.7, 1.1, -3.]], tf.float64)])
        add("int32", [ind, tf.constant([7, -7, 2**31 - 1]), sh, tf.constant([2, 3, 5])])
        add("int64", [ind, i64([2**62, -9, 8]), sh, i64([[3], [-4]])])
        add("uint8", [ind, tf.constant([250, 7, 9], tf.uint8), sh, tf.constant([10, 3, 2], tf.uint8)])
        add("int8", [ind, tf.constant([-128, 7, 9], tf.int8), sh, tf.constant([1, 3, 2], tf.int8)])
        add("empty", [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float32), i64([0, 3]), tf.ones([3])])
        add("rank 5", [i64([[0, 1, 0, 1, 0]]), tf.constant([2.]), i64([1, 2, 1, 2, 1]),
                       tf.constant([[3.], [5.]])])
        add("error/dense bigger", [ind, tf.constant([1., 2., 3.]), sh, tf.ones([3, 3])])
        add("error/dense more dims", [ind, tf.constant([1., 2., 3.]), sh, tf.ones([1, 2, 3])])
        add("error/dense dim not 1", [ind, tf.constant([1., 2., 3.]), sh, tf.ones([2])])
        add("error/index out of range", [i64([[0, 5]]), tf.constant([1.]), sh, tf.ones([3])])
        add("error/negative index", [i64([[0, -1]]), tf.constant([1.]), sh, tf.ones([3])])
        add("error/values and indices", [ind, tf.constant([1., 2.]), sh, tf.ones([3])])
        add("error/shape rank", [ind, tf.constant([1., 2., 3.]), i64([2, 3, 4]), tf.ones([3])])
        add("error/negative shape", [ind, tf.constant([1., 2., 3.]), i64([2, -3]), tf.ones([3])])
        add("error/rank 6", [i64([[0] * 6]), tf.constant([1.]), i64([1] * 6), tf.ones([1])])
    div = lambda i, v, s, d: R.SparseDenseCwiseDiv(sp_indices=i, sp_values=v, sp_shape=s, dense=d)  # noqa: E731
    fam.add("SparseDenseCwiseDiv", div, [ind, tf.constant([1., 2., 3.]), sh, tf.constant([1., -0., 2.])],
            "SparseDenseCwiseDiv/error/negative zero divisor")
    fam.add("SparseDenseCwiseDiv", div, [ind, tf.constant([1, 2, 3]), sh, tf.constant([1, 0, 2])],
            "SparseDenseCwiseDiv/error/int zero divisor")
    fam.add("SparseDenseCwiseDiv", div, [i64([[0, 0]]), tf.constant([1.]), sh, tf.constant([1., 0., 2.])],
            "SparseDenseCwiseDiv/error/zero divisor unused")


def max_min_cases(fam):
    sh = i64([2, 3])
    a_i = i64([[0, 1], [1, 0], [1, 2]])
    b_i = i64([[0, 0], [1, 0], [1, 1]])
    for op in ("SparseSparseMaximum", "SparseSparseMinimum"):
        f = getattr(R, op)
        fn = lambda ai, av, ash, bi, bv, bsh, f=f: f(  # noqa: E731
            a_indices=ai, a_values=av, a_shape=ash, b_indices=bi, b_values=bv, b_shape=bsh)
        add = lambda name, inputs, op=op, fn=fn: fam.add(op, fn, inputs, f"{op}/{name}")  # noqa: E731
        add("float", [a_i, tf.constant([1., -2., 3.]), sh, b_i, tf.constant([-1., 5., -2.]), sh])
        add("float, nan and zeros", [a_i, tf.constant([5., 0., -0.]), sh, a_i, tf.constant([nan, -0., 0.]), sh])
        add("float, nan first", [a_i, tf.constant([nan, -0., 0.]), sh, a_i, tf.constant([5., 0., -0.]), sh])
        add("float, nan alone", [a_i, tf.constant([nan, -inf, inf]), sh, b_i, tf.constant([nan, 1., -1.]), sh])
        add("double", [a_i, tf.constant([1e300, -2., 3.], tf.float64), sh, b_i,
                       tf.constant([-1., 5., -2.], tf.float64), sh])
        add("int32", [a_i, tf.constant([7, -7, 3]), sh, b_i, tf.constant([-2**31, 2**31 - 1, 0]), sh])
        add("uint16", [a_i, tf.constant([1, 2, 3], tf.uint16), sh, i64([[0, 1]]), tf.constant([4], tf.uint16), sh])
        add("int64, rank 3", [i64([[0, 0, 1], [1, 1, 1]]), i64([-5, 6]), i64([2, 2, 2]),
                              i64([[0, 0, 1], [0, 1, 0], [1, 1, 1]]), i64([-9, -1, 7]), i64([2, 2, 2])])
        add("unsorted a", [i64([[1, 0], [0, 1]]), tf.constant([1., 2.]), sh, b_i, tf.constant([-1., 5., -2.]), sh])
        add("repeated index", [i64([[1, 0], [1, 0]]), tf.constant([1., 2.]), sh, i64([[1, 0]]), tf.constant([3.]), sh])
        add("empty", [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float32), sh, tf.zeros([0, 2], tf.int64),
                      tf.constant([], tf.float32), sh])
        add("one empty", [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float32), sh, b_i,
                          tf.constant([-1., 5., -2.]), sh])
        add("error/shapes differ", [a_i, tf.constant([1., 2., 3.]), sh, b_i, tf.constant([1., 2., 3.]), i64([3, 3])])
        add("error/ranks differ", [a_i, tf.constant([1., 2., 3.]), sh, i64([[0, 1, 1]]), tf.constant([1.]),
                                   i64([2, 3, 3])])
        add("error/index rank", [a_i, tf.constant([1., 2., 3.]), sh, i64([[0, 1, 1]]), tf.constant([1.]), sh])
        add("error/values count", [a_i, tf.constant([1., 2., 3.]), sh, i64([[0, 1]]), tf.constant([1., 2.]), sh])
        add("error/out of bounds", [a_i, tf.constant([1., 2., 3.]), sh, i64([[1, 9]]), tf.constant([1.]), sh])
        add("error/negative index", [a_i, tf.constant([1., 2., 3.]), sh, i64([[0, -1]]), tf.constant([1.]), sh])


def softmax_cases(fam):
    fn = lambda i, v, s: R.SparseSoftmax(sp_indices=i, sp_values=v, sp_shape=s)  # noqa: E731
    reason = ("exp and the group sum: Eigen's vectorized exp and its packet summation order "
              "differ from libm's exp and a sequential sum by an ulp or two")

    def add(name, inputs, exact=False):
        fam.add("SparseSoftmax", fn, inputs, f"SparseSoftmax/{name}",
                tolerance="exact" if exact else "ulp:4", reason=None if exact else reason)
    sh = i64([2, 3])
    add("float", [i64([[0, 1], [1, 0], [1, 2]]), tf.constant([1., 2., 3.]), sh])
    add("unsorted", [i64([[1, 2], [0, 1], [1, 0]]), tf.constant([1., 2., 3.]), sh])
    add("repeated index", [i64([[1, 0], [1, 0]]), tf.constant([1., 2.]), i64([3, 3])])
    add("index out of range", [i64([[1, 0], [9, 0]]), tf.constant([1., 2.]), i64([3, 3])])
    add("negative index", [i64([[1, 0], [1, -1]]), tf.constant([1., 2.]), i64([3, 3])])
    add("infinities", [i64([[1, 0], [1, 1]]), tf.constant([inf, -inf]), i64([3, 3])])
    add("nan", [i64([[1, 0], [1, 1]]), tf.constant([nan, 1.]), i64([3, 3])])
    add("large values", [i64([[0, 0], [0, 1], [0, 2]]), tf.constant([1e30, 1e30, -1e30]), sh])
    rng = np.random.default_rng(5)
    ind = np.array([[b, r, c] for b in range(2) for r in range(3) for c in range(5) if (b + r * c) % 3 != 1])
    add("double, rank 3", [i64(ind), tf.constant(rng.standard_normal(len(ind)), tf.float64), i64([2, 3, 5])])
    add("float, rank 3", [i64(ind), tf.constant(rng.standard_normal(len(ind)) * 10, tf.float32), i64([2, 3, 5])])
    add("empty", [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float32), sh], exact=True)
    add("error/rank 1", [i64([[1], [0]]), tf.constant([1., 2.]), i64([3])], exact=True)
    add("error/values count", [i64([[1, 0], [1, 1]]), tf.constant([1., 2., 3.]), i64([3, 3])], exact=True)
    add("error/shape rank", [i64([[1, 0], [1, 1]]), tf.constant([1., 2.]), i64([3, 3, 3])], exact=True)


def split_cases(fam):
    def fn(d, i, v, s, n):
        out = R.SparseSplit(split_dim=d, indices=i, values=v, shape=s, num_split=n)
        return [*out.output_indices, *out.output_values, *out.output_shape]
    ind = i64([[0, 0], [0, 4], [1, 1], [1, 6], [2, 3]])
    val = tf.constant([1, 2, 3, 4, 5])

    def add(name, axis, inputs, n):
        fam.add("SparseSplit", lambda d, i, v, s: fn(d, i, v, s, n), [i64(axis)] + inputs,
                f"SparseSplit/{name}")
    add("dim 1 in 3", 1, [ind, val, i64([3, 7])], 3)
    add("dim 0 in 2", 0, [ind, val, i64([3, 7])], 2)
    add("dim -1 in 2", -1, [ind, val, i64([3, 7])], 2)
    add("one piece", 0, [ind, val, i64([3, 7])], 1)
    add("as many as rows", 0, [ind, val, i64([3, 7])], 3)
    add("unsorted", 0, [i64([[2, 0], [0, 4], [1, 1]]), val[:3], i64([3, 7])], 2)
    add("strings, rank 3", 2, [i64([[0, 0, 5], [1, 2, 0], [0, 1, 3], [1, 0, 2]]),
                               tf.constant(["a", "", "ccc", "\u00e9"]), i64([2, 3, 6])], 4)
    add("float, empty", 1, [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float32), i64([4, 5])], 2)
    add("rank 1", 0, [i64([[0], [3], [4]]), tf.constant([1., 2., 3.]), i64([5])], 2)
    add("empty other dim", 0, [tf.zeros([0, 2], tf.int64), val[:0], i64([3, 0])], 2)
    add("error/axis out of range", 2, [ind, val, i64([3, 7])], 2)
    add("error/too many pieces", 0, [ind, val, i64([3, 7])], 5)
    add("error/zero size", 0, [tf.zeros([0, 2], tf.int64), val[:0], i64([0, 7])], 1)
    add("error/values count", 0, [ind, val[:4], i64([3, 7])], 1)
    add("error/shape rank", 0, [ind, val, i64([3, 7, 1])], 1)
    add("error/out of bounds", 1, [i64([[0, 9]]), val[:1], i64([3, 7])], 2)
    add("error/negative index", 1, [i64([[0, -1]]), val[:1], i64([3, 7])], 2)
    add("error/negative shape", 0, [i64([[0, 0]]), val[:1], i64([3, -7])], 2)


def grad_cases(fam):
    g = lambda bg, a, b, s: R.SparseAddGrad(backprop_val_grad=bg, a_indices=a, b_indices=b, sum_indices=s)  # noqa
    a_i, b_i = i64([[0, 1], [1, 0]]), i64([[0, 1], [0, 2], [1, 1]])
    s_i = i64([[0, 1], [0, 2], [1, 0], [1, 1]])

    def add_grad(name, inputs):
        fam.add("SparseAddGrad", g, inputs, f"SparseAddGrad/{name}")
    add_grad("float", [tf.constant([1., 2., 3., 4.]), a_i, b_i, s_i])
    add_grad("sum thresholded", [tf.constant([1., 2., 3.]), a_i, b_i, i64([[0, 1], [0, 2], [1, 0]])])
    add_grad("sum entry missing from b", [tf.constant([1., 2., 3., 4.]), a_i, b_i,
                                          i64([[0, 1], [0, 3], [1, 0], [1, 1]])])
    add_grad("int32", [tf.constant([1, -2, 3, 2**31 - 1]), a_i, b_i, s_i])
    add_grad("double, empty a", [tf.constant([1., 2., 3.], tf.float64), tf.zeros([0, 2], tf.int64), b_i, b_i])
    add_grad("error/grad count", [tf.constant([1., 2., 3., 4.]), a_i, b_i, i64([[0, 1], [0, 2], [1, 0], [1, 1],
                                                                               [2, 2]])])
    add_grad("error/ranks", [tf.constant([1., 2., 3., 4.]), a_i, i64([[0, 1, 1], [0, 2, 2], [1, 1, 1]]), s_i])
    add_grad("error/grad not a vector", [tf.constant([[1., 2., 3., 4.]]), a_i, b_i, s_i])

    f = lambda r, gv: R.SparseFillEmptyRowsGrad(reverse_index_map=r, grad_values=gv)  # noqa: E731

    def add_fill(name, inputs):
        fam.add("SparseFillEmptyRowsGrad", f, inputs, f"SparseFillEmptyRowsGrad/{name}")
    add_fill("float", [i64([0, 3, 1]), tf.constant([1., 2., 3., 4., 5.])])
    add_fill("repeated", [i64([0, 0, 1]), tf.constant([1., 2., 3., 4., 5.])])
    add_fill("no values, summation order", [i64([], [0]), tf.constant([1e8, 1., -1e8, 1., 0.1])])
    add_fill("double", [i64([4, 2]), tf.constant([0.1, 0.2, 0.3, 1e-300, nan], tf.float64)])
    add_fill("int8 wraps", [i64([1]), tf.constant([100, 5, 100], tf.int8)])
    add_fill("int64", [i64([0, 2]), i64([2**62, 7, -3, 2**62])])
    add_fill("empty", [i64([], [0]), tf.constant([], tf.float32)])
    add_fill("error/index out of range", [i64([0, 7, 1]), tf.constant([1., 2., 3., 4., 5.])])
    add_fill("error/negative index", [i64([0, -1, 1]), tf.constant([1., 2., 3., 4., 5.])])
    add_fill("error/map not a vector", [i64([[0, 0, 1]]), tf.constant([1., 2., 3., 4., 5.])])
    add_fill("error/grad not a vector", [i64([0, 0, 1]), tf.constant([[1., 2., 3., 4., 5.]])])

    s = lambda bg, ii, st, oi: R.SparseSliceGrad(  # noqa: E731
        backprop_val_grad=bg, input_indices=ii, input_start=st, output_indices=oi)
    inp = i64([[0, 0], [1, 1], [1, 3], [2, 2]])

    def add_slice(name, inputs):
        fam.add("SparseSliceGrad", s, inputs, f"SparseSliceGrad/{name}")
    add_slice("float", [tf.constant([1., 2.]), inp, i64([1, 1]), i64([[0, 0], [1, 1]])])
    add_slice("float, other entries", [tf.constant([1., 2.]), inp, i64([1, 1]), i64([[0, 0], [0, 2]])])
    add_slice("int64, whole", [i64([5, 6, 7, 8]), inp, i64([0, 0]), inp])
    add_slice("unsorted, same order", [tf.constant([1., 2.]), i64([[2, 2], [1, 1]]), i64([1, 1]),
                                       i64([[1, 1], [0, 0]])])
    add_slice("empty slice", [tf.constant([], tf.float64), inp, i64([5, 5]), tf.zeros([0, 2], tf.int64)])
    add_slice("error/not all propagated", [tf.constant([1., 2.]), inp, i64([1, 1]), i64([[0, 0], [5, 5]])])
    add_slice("error/order differs", [tf.constant([1., 2.]), i64([[0, 0], [1, 1]]), i64([0, 0]),
                                      i64([[1, 1], [0, 0]])])
    add_slice("error/grad count", [tf.constant([1., 2.]), inp, i64([1, 1]), i64([[0, 0]])])
    add_slice("error/start length", [tf.constant([1., 2.]), inp, i64([1, 1, 1]), i64([[0, 0], [0, 2]])])
    add_slice("error/ranks", [tf.constant([1., 2.]), inp, i64([1, 1]), i64([[0, 0, 0], [0, 2, 0]])])
    add_slice("error/grad not a vector", [tf.constant([[1., 2.]]), inp, i64([0, 0]), i64([[0, 0], [1, 1]])])


def family():
    fam = Family("sparse_more")
    cwise_cases(fam)
    max_min_cases(fam)
    softmax_cases(fam)
    split_cases(fam)
    grad_cases(fam)
    return fam
