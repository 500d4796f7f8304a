"""The SparseTensorsMap ops of tf.compat.v1 (SparseTensors passed as int64
handles): AddSparseToTensorsMap, AddManySparseToTensorsMap and
TakeManySparseFromTensorsMap, added and taken in one function (each case its
own shared_name, so that both sides start from a fresh map and handle 0), the
handles TensorFlow numbers, its errors, and a map function doing the same per
element."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops
D = tf.data.Dataset


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


def add_many(i, v, s, name):
    return R.AddManySparseToTensorsMap(sparse_indices=i, sparse_values=v, sparse_shape=s, shared_name=name)


def add_one(i, v, s, name):
    return R.AddSparseToTensorsMap(sparse_indices=i, sparse_values=v, sparse_shape=s, shared_name=name)


def take(h, dtype, name):
    r = R.TakeManySparseFromTensorsMap(sparse_handles=h, dtype=dtype, shared_name=name)
    return [r.sparse_indices, r.sparse_values, r.sparse_shape]


def cases(fam):
    def many(name, i, v, s, order=None, unknown=False):
        key = "stm_" + name.replace(" ", "_").replace(",", "")

        def fn(i, v, s):
            h = add_many(i, v, s, key)
            picked = h if order is None else tf.gather(h, order)
            return [h, *take(picked, v.dtype, key)]
        fam.add_function(f"many/{name}", fn, [i, v, s], unknown_shapes=unknown)
    many("rows with gaps, reversed", i64([[0, 1], [2, 0], [2, 3]]), tf.constant([1., 2., 3.]), i64([4, 5]),
         order=[3, 2, 1, 0])
    many("in order", i64([[0, 0], [1, 2], [1, 4]]), tf.constant([-1, 0, 7]), i64([2, 6]))
    many("rank 3 strings", i64([[0, 0, 1], [0, 1, 0], [2, 2, 2]]), tf.constant(["a", "", "d\u00e9"]),
         i64([3, 3, 4]), order=[2, 0, 1])
    many("no entries", tf.zeros([0, 2], tf.int64), tf.constant([], tf.float64), i64([3, 2]))
    many("one row of a batch", i64([[1, 0], [1, 1]]), tf.constant([True, False]), i64([3, 2]), order=[1])
    many("int64 extremes", i64([[0, 0], [1, 0]]), i64([-2**63, 2**63 - 1]), i64([2, 1]))

    def one(name, parts, order, dtype=None, unknown=True):
        key = "stm_one_" + name.replace(" ", "_").replace(",", "")

        def fn(*a):
            hs = [add_one(a[3 * k], a[3 * k + 1], a[3 * k + 2], key) for k in range(len(parts))]
            return [*hs, *take(tf.gather(tf.stack(hs), order), dtype or a[1].dtype, key)]
        fam.add_function(f"one/{name}", fn, [t for p in parts for t in p], unknown_shapes=unknown)
    p1 = (i64([[0], [3]]), tf.constant([1, 2]), i64([4]))
    p2 = (i64([[1]]), tf.constant([5]), i64([6]))
    one("two, shapes joined", [p1, p2], [1, 0])
    one("the same shape", [p1, p1], [0, 1])
    one("matrix and unsorted", [(i64([[1, 1], [0, 2]]), tf.constant([1., 2.]), i64([2, 3]))], [0])
    one("error/a handle taken twice", [p1, p2], [0, 0])
    one("error/wrong dtype", [p1], [0], dtype=tf.float32)
    one("error/ranks differ", [p1, (i64([[0, 0]]), tf.constant([1]), i64([1, 1]))], [0, 1])
    one("error/matrix values", [(i64([[0]]), tf.constant([[1]]), i64([4]))], [0])
    one("error/vector indices", [(i64([0]), tf.constant([1]), i64([4]))], [0])
    one("error/matrix shape", [(i64([[0]]), tf.constant([1]), i64([[4]]))], [0])

    def err(name, fn, inputs):
        fam.add_function(f"error/{name}", fn, inputs, unknown_shapes=True)
    err("rank 1 batch", lambda i, v, s: add_many(i, v, s, "stm_e1"), [i64([[0]]), tf.constant([1.]), i64([3])])
    err("values count", lambda i, v, s: add_many(i, v, s, "stm_e2"),
        [i64([[0, 0], [1, 1], [2, 0]]), tf.constant([1., 2.]), i64([3, 2])])
    err("dimensions count", lambda i, v, s: add_many(i, v, s, "stm_e3"),
        [i64([[0, 0]]), tf.constant([1.]), i64([3, 2, 1])])
    err("unsorted", lambda i, v, s: add_many(i, v, s, "stm_e4"),
        [i64([[1, 0], [0, 0]]), tf.constant([1., 2.]), i64([3, 2])])
    err("repeated", lambda i, v, s: add_many(i, v, s, "stm_e5"),
        [i64([[1, 0], [1, 0]]), tf.constant([1., 2.]), i64([3, 2])])
    err("out of bounds", lambda i, v, s: add_many(i, v, s, "stm_e6"),
        [i64([[0, 0], [3, 0]]), tf.constant([1., 2.]), i64([3, 2])])
    err("no handles", lambda h: take(h, tf.float32, "stm_e7"), [tf.constant([], tf.int64)])
    err("unknown handle", lambda h: take(h, tf.float32, "stm_e8"), [i64([7])])
    err("matrix of handles", lambda h: take(h, tf.float32, "stm_e9"), [i64([[0]])])


def pipelines(fam):
    # A map function adding a batch's rows and taking them back reversed:
    # handles grow from call to call, the taken tensor does not.
    def fn(x):
        h = add_many(i64([[0, 1], [2, 0], [2, 1]]), tf.range(3, dtype=tf.int64) * x + 1, i64([4, 2]),
                     "stm_pipeline")
        back = take(tf.reverse(h, [0]), tf.int64, "stm_pipeline")
        return tf.sparse.to_dense(tf.sparse.SparseTensor(*back))
    fam.add_dataset("pipeline/map adding and taking", D.range(5).map(fn))


def family():
    fam = Family("sparse_tensors_map")
    cases(fam)
    pipelines(fam)
    return fam
