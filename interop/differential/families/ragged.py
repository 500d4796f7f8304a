"""Ragged kernels inside functions: RaggedRange, RaggedGather,
RaggedTensorToSparse, RaggedFillEmptyRows and RaggedFillEmptyRowsGrad (the
ragged tensor as its row splits and flat values)."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


def range_cases(fam):
    def add(name, s, l, d, splits=tf.int64):
        fam.add("RaggedRange", lambda a, b, c: R.RaggedRange(starts=a, limits=b, deltas=c, Tsplits=splits),
                [s, l, d], f"RaggedRange/{name}")
    c = tf.constant
    add("int32", c([0, 5, 8]), c([3, 0, 9]), c([1, -2, 3]))
    add("int32, int32 splits", c([0, 5, 8]), c([3, 0, 9]), c([1, -2, 3]), tf.int32)
    add("float, broadcast", c(0.1), c([1., 0.5, -1.]), c(0.3), tf.int32)
    add("double accumulates", c(0.1, tf.float64), c([2.5, 1.0], tf.float64), c(0.1, tf.float64))
    add("int64, large", i64([-2**62, 2**62]), i64(2**62 + 3), i64([2**61, 1]))
    add("int32, whole range in 4", c(-2**31), c(2**31 - 1), c(2**30))
    add("all scalars", c(3), c(10), c(2))
    add("empty rows", c([], tf.int32), c([], tf.int32), c(1))
    add("float, negative delta", c([1.5, 0.]), c([-1.5, 0.]), c(-0.7))
    add("error/zero delta", c(0), c([1, 2]), c(0))
    add("error/shapes", c([0, 1]), c([1, 2, 3]), c(1))
    add("error/matrix", c([[0, 1]]), c([1, 2]), c(1))
    add("error/float too long", c(0.), c(1e20), c(1e-20))
    add("error/nan limit", c(0.), c(nan), c(1.))
    add("error/inf limit", c(0., tf.float64), c(inf, tf.float64), c(1., tf.float64))


def gather_cases(fam):
    def add(name, splits, values, indices, out_rank):
        n = len(splits)
        fam.add("RaggedGather", lambda *a: (lambda r: [*r.output_nested_splits, r.output_dense_values])(
            R.RaggedGather(params_nested_splits=list(a[:n]), params_dense_values=a[n], indices=a[n + 1],
                           OUTPUT_RAGGED_RANK=out_rank)),
            [*splits, values, indices], f"RaggedGather/{name}")
    s1 = i64([0, 2, 2, 5, 6])
    v1 = tf.constant([1., 2., 3., 4., 5., 6.])
    add("vector", [s1], v1, tf.constant([3, 0, 1, 0]), 1)
    add("int64 indices, int32 splits", [tf.constant([0, 2, 2, 5, 6])], tf.constant(["a", "b", "", "d\u00e9", "e", "f"]),
        i64([2, 2]), 1)
    add("matrix indices", [s1], v1, tf.constant([[3, 0], [1, 2], [0, 0]]), 2)
    add("scalar index", [s1], v1, tf.constant(2), 0)
    add("rank 3 indices", [s1], v1, tf.zeros([2, 1, 2], tf.int32) + 3, 3)
    add("ragged rank 2", [i64([0, 2, 3]), i64([0, 1, 1, 4])], tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]]),
        tf.constant([1, 0, 1]), 2)
    add("ragged rank 2, scalar index", [i64([0, 2, 3]), i64([0, 1, 1, 4])], tf.constant([1., 2., 3., 4.]),
        tf.constant(0), 1)
    add("empty indices", [s1], v1, tf.constant([], tf.int32), 1)
    add("error/index out of range", [s1], v1, tf.constant([0, 4]), 1)
    add("error/negative index", [s1], v1, tf.constant([[0, 1], [-1, 0]]), 2)
    add("error/splits past values", [i64([0, 2, 9])], v1, tf.constant([0]), 1)
    add("error/splits unsorted", [i64([0, 3, 2, 6])], v1, tf.constant([0]), 1)
    add("error/splits negative", [i64([-1, 3, 6])], v1, tf.constant([0]), 1)
    add("error/scalar values", [i64([0, 0])], tf.constant(1.), tf.constant([0]), 1)


def to_sparse_cases(fam):
    def add(name, splits, values):
        n = len(splits)
        fam.add("RaggedTensorToSparse", lambda *a: R.RaggedTensorToSparse(
            rt_nested_splits=list(a[:n]), rt_dense_values=a[n]), [*splits, values],
            f"RaggedTensorToSparse/{name}")
    add("rank 1", [i64([0, 2, 2, 5])], tf.constant([1, 2, 3, 4, 5]))
    add("ragged rank 2, inner dims", [i64([0, 2, 3]), i64([0, 1, 1, 4])], tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]]))
    add("int32 splits, strings", [tf.constant([0, 1, 3])], tf.constant(["a", "b", "c"]))
    add("inner 2x3", [i64([0, 1, 1, 2])], tf.reshape(tf.range(12.), [2, 2, 3]))
    add("empty", [i64([0])], tf.constant([], tf.float32))
    add("empty rows", [i64([0, 0, 0])], tf.constant([], tf.float64))
    add("error/last split", [i64([0, 2, 3]), i64([0, 1, 1, 3])], tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]]))
    add("error/first split", [i64([1, 2, 3])], tf.constant([1, 2, 3]))
    add("error/decreasing", [i64([0, 3, 2])], tf.constant([1, 2, 3]))
    add("error/empty splits", [i64([], [0])], tf.constant([1, 2, 3]))
    add("error/inner splits length", [i64([0, 2, 4]), i64([0, 1, 1, 4])], tf.constant([1, 2, 3, 4]))


def fill_cases(fam):
    def add(name, r, v, n, d):
        fam.add("RaggedFillEmptyRows", lambda a, b, c, e: R.RaggedFillEmptyRows(
            value_rowids=a, values=b, nrows=c, default_value=e), [r, v, n, d], f"RaggedFillEmptyRows/{name}")
    add("float", i64([1, 1, 3]), tf.constant([1., 2., 3.]), i64(5), tf.constant(-1.))
    add("unsorted", i64([3, 1, 1]), tf.constant([1., 2., 3.]), i64(5), tf.constant(-1.))
    add("no values", i64([], [0]), tf.constant([], tf.float32), i64(2), tf.constant(-1.))
    add("no rows", i64([], [0]), tf.constant([], tf.float32), i64(0), tf.constant(-1.))
    add("strings", i64([0, 1]), tf.constant(["a", "b"]), i64(3), tf.constant("z"))
    add("int64, none empty", i64([0, 1, 2]), i64([7, 8, 9]), i64(3), i64(0))
    add("error/row out of range", i64([1, 1, 7]), tf.constant([1., 2., 3.]), i64(5), tf.constant(-1.))
    add("error/negative row", i64([1, 1, -1]), tf.constant([1., 2., 3.]), i64(5), tf.constant(-1.))
    add("error/lengths", i64([0, 1]), tf.constant([1.]), i64(3), tf.constant(0.))
    add("error/values matrix", i64([0, 1]), tf.constant([[1., 2.], [3, 4]]), i64(3), tf.constant(0.))
    add("error/default vector", i64([0, 1]), tf.constant([1., 2.]), i64(3), tf.constant([0.]))
    add("error/nrows vector", i64([0, 1]), tf.constant([1., 2.]), i64([3]), tf.constant(0.))
    add("error/negative nrows", i64([0, 1]), tf.constant([1., 2.]), i64(-3), tf.constant(0.))
    add("error/rowids matrix", i64([[0, 1]]), tf.constant([1., 2.]), i64(3), tf.constant(0.))
    g = lambda r, gv: R.RaggedFillEmptyRowsGrad(reverse_index_map=r, grad_values=gv)  # noqa: E731
    fam.add("RaggedFillEmptyRowsGrad", g, [i64([0, 3, 1]), tf.constant([1., 2., 3., 4., 5.])],
            "RaggedFillEmptyRowsGrad/float")
    fam.add("RaggedFillEmptyRowsGrad", g, [i64([0, 3, 1]), tf.constant([1., 2., 3., 4., 5.], tf.float64)],
            "RaggedFillEmptyRowsGrad/double")
    fam.add("RaggedFillEmptyRowsGrad", g, [i64([0, 9]), tf.constant([1., 2.])],
            "RaggedFillEmptyRowsGrad/error/index out of range")


def function_cases(fam):
    fam.add_function("ragged range to tensor", lambda s, l: tf.ragged.range(s, l).to_tensor(-1),
                     [tf.constant([0, 3, 5]), tf.constant([4, 3, 9])])
    fam.add_function("ragged gather to sparse", lambda v, s, i: tf.sparse.to_dense(tf.gather(
        tf.RaggedTensor.from_row_splits(v, s), i).to_sparse()),
        [tf.constant([1., 2., 3., 4., 5.]), i64([0, 2, 2, 5]), tf.constant([[2, 0], [1, 2]])])


def family():
    fam = Family("ragged")
    range_cases(fam)
    gather_cases(fam)
    to_sparse_cases(fam)
    fill_cases(fam)
    function_cases(fam)
    return fam
