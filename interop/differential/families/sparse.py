"""SparseTensor kernels and sparse tensors through pipelines: serialization
(how a SparseTensor crosses a dataset boundary), reorder, reshape, slice,
concat, fill_empty_rows, sparse-dense matmul, VarLenFeature and
SparseFeature parsing, maps returning SparseTensors and batches of them."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


def example(i):
    f = {
        "tok": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i)))),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5 * k for k in range(i % 3)])),
        "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x%d" % k for k in range(i % 2 + 1)])),
        "idx": tf.train.Feature(int64_list=tf.train.Int64List(value=[(7 * i + 3 * k) % 10 for k in range(i % 4)])),
        "val": tf.train.Feature(float_list=tf.train.FloatList(value=[float(i + k) for k in range(i % 4)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString(deterministic=True)


def family():
    fam = Family("sparse")
    add = fam.add_function
    ind = i64([[1, 0], [0, 2], [1, 1], [0, 0]])
    val = tf.constant([1.0, 2.0, 3.0, 4.0])
    sh = i64([2, 3])

    # --- serialization -------------------------------------------------
    for dt, vals in [(tf.float32, val), (tf.int64, i64([5, -6, 7, 8])),
                     (tf.string, tf.constant(["a", "", "ccc", "dd"])), (tf.bool, tf.constant([True, False, True, True])),
                     (tf.float64, tf.constant([0.1, -0.0, 1e300, 2.5], tf.float64)),
                     (tf.int32, tf.constant([1, 2, 3, 4], tf.int32))]:
        add(f"SerializeSparse/string/{dt.name}", lambda i, v, s: R.SerializeSparse(
            sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.string), [ind, vals, sh])
        add(f"SerializeSparse/variant round trip/{dt.name}", lambda i, v, s, dt=dt: R.DeserializeSparse(
            serialized_sparse=R.SerializeSparse(sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.variant),
            dtype=dt), [ind, vals, sh])
    add("SerializeSparse/string/empty", lambda i, v, s: R.SerializeSparse(
        sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.string),
        [tf.zeros([0, 3], tf.int64), tf.constant([], tf.float32), i64([4, 0, 2])])
    add("SerializeSparse/string/scalar sparse", lambda i, v, s: R.SerializeSparse(
        sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.string),
        [tf.zeros([1, 0], tf.int64), tf.constant([3.5]), i64([], [0])])
    sorted_ind = i64([[0, 0], [0, 2], [2, 1], [2, 2], [3, 0]])
    for out in (tf.string, tf.variant):
        add(f"SerializeManySparse/{out.name}", lambda i, v, s, out=out: R.DeserializeSparse(
            serialized_sparse=R.SerializeManySparse(sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=out),
            dtype=tf.float32), [sorted_ind, tf.constant([1., 2., 3., 4., 5.]), i64([5, 3])])
    add("DeserializeManySparse", lambda i, v, s: R.DeserializeManySparse(
        serialized_sparse=R.SerializeManySparse(sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.string),
        dtype=tf.float32), [sorted_ind, tf.constant([1., 2., 3., 4., 5.]), i64([5, 3])])
    add("SerializeManySparse/strings", lambda i, v, s: R.SerializeManySparse(
        sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.string),
        [sorted_ind, tf.constant([1., 2., 3., 4., 5.]), i64([5, 3])])
    add("SerializeManySparse/error/out of order", lambda i, v, s: R.SerializeManySparse(
        sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.string),
        [ind, val, sh])

    def two(i1, v1, s1, i2, v2, s2):
        a = R.SerializeSparse(sparse_indices=i1, sparse_values=v1, sparse_shape=s1, out_type=tf.string)
        b = R.SerializeSparse(sparse_indices=i2, sparse_values=v2, sparse_shape=s2, out_type=tf.string)
        return R.DeserializeSparse(serialized_sparse=tf.stack([a, b]), dtype=tf.float32)
    add("DeserializeSparse/batch of two, shapes differ", two,
        [i64([[0, 1]]), tf.constant([1.]), i64([2, 2]), i64([[2, 0], [0, 0]]), tf.constant([2., 3.]), i64([3, 1])])

    def grid(i1, v1, s1):
        a = R.SerializeSparse(sparse_indices=i1, sparse_values=v1, sparse_shape=s1, out_type=tf.variant)
        return R.DeserializeSparse(serialized_sparse=tf.reshape(tf.stack([a, a, a, a, a, a]), [2, 3, 3]),
                                   dtype=tf.float32)
    add("DeserializeSparse/2x3 batch", grid, [ind, val, sh])

    def wrong_dtype(i1, v1, s1):
        a = R.SerializeSparse(sparse_indices=i1, sparse_values=v1, sparse_shape=s1, out_type=tf.string)
        return R.DeserializeSparse(serialized_sparse=a, dtype=tf.int64)
    add("DeserializeSparse/error/wrong dtype", wrong_dtype, [ind, val, sh])

    # --- transformations --------------------------------------------------
    add("SparseReorder/float", lambda i, v, s: R.SparseReorder(input_indices=i, input_values=v, input_shape=s),
        [ind, val, sh])
    add("SparseReorder/strings, rank 3", lambda i, v, s: R.SparseReorder(input_indices=i, input_values=v, input_shape=s),
        [i64([[1, 0, 2], [0, 5, 1], [1, 0, 0], [0, 0, 9]]), tf.constant(["a", "b", "c", "d"]), i64([2, 6, 10])])
    add("SparseReorder/empty", lambda i, v, s: R.SparseReorder(input_indices=i, input_values=v, input_shape=s),
        [tf.zeros([0, 2], tf.int64), tf.constant([], tf.int32), i64([3, 3])])
    for new in ([3, -1], [6], [1, 2, 3], [-1], [3, 2, 1]):
        add(f"SparseReshape/{new}", lambda i, s, n: R.SparseReshape(input_indices=i, input_shape=s, new_shape=n),
            [ind, sh, i64(new)])
    add("SparseReshape/empty", lambda i, s, n: R.SparseReshape(input_indices=i, input_shape=s, new_shape=n),
        [tf.zeros([0, 2], tf.int64), i64([0, 3]), i64([-1, 2])])
    for name, new in [("not a multiple", [4, -1]), ("size differs", [4, 2]), ("two unknown", [-1, -1]),
                      ("negative", [-2, 3])]:
        add(f"SparseReshape/error/{name}", lambda i, s, n: R.SparseReshape(input_indices=i, input_shape=s, new_shape=n),
            [ind, sh, i64(new)])
    for name, start, size in [("inside", [0, 1], [5, 5]), ("negative start", [0, -1], [5, 5]),
                              ("beyond", [3, 0], [5, 5]), ("exact", [1, 0], [1, 2]), ("empty size", [0, 0], [0, 3])]:
        add(f"SparseSlice/{name}", lambda i, v, s, a, b: R.SparseSlice(indices=i, values=v, shape=s, start=a, size=b),
            [ind, val, sh, i64(start), i64(size)])
    add("SparseSlice/strings", lambda i, v, s, a, b: R.SparseSlice(indices=i, values=v, shape=s, start=a, size=b),
        [ind, tf.constant(["p", "q", "r", "s"]), sh, i64([1, 0]), i64([1, 3])])

    def concat(dim):
        return lambda i1, v1, s1, i2, v2, s2: R.SparseConcat(
            indices=[i1, i2], values=[v1, v2], shapes=[s1, s2], concat_dim=dim)
    add("SparseConcat/dim 0", concat(0), [ind, val, sh, i64([[0, 1]]), tf.constant([9.]), i64([1, 3])])
    add("SparseConcat/dim 1", concat(1), [ind, val, sh, i64([[0, 1], [1, 0]]), tf.constant([9., 8.]), i64([2, 2])])
    add("SparseConcat/dim -1", concat(-1), [ind, val, sh, i64([[0, 1]]), tf.constant([9.]), i64([2, 2])])
    add("SparseConcat/error/shapes differ", concat(1), [ind, val, sh, i64([[0, 1]]), tf.constant([9.]), i64([3, 2])])
    add("SparseConcat/three, strings", lambda a, b, c: R.SparseConcat(
        indices=[i64([[0, 0]]), i64([[1, 1], [0, 0]]), i64([[0, 2]])], values=[a, b, c],
        shapes=[i64([2, 1]), i64([2, 2]), i64([2, 3])], concat_dim=1),
        [tf.constant(["a"]), tf.constant(["b", "c"]), tf.constant(["d"])])

    fill = lambda i, v, s, d: R.SparseFillEmptyRows(indices=i, values=v, dense_shape=s, default_value=d)  # noqa: E731
    add("SparseFillEmptyRows/unsorted", fill, [i64([[3, 1], [1, 0], [3, 0]]), tf.constant([1., 2., 3.]), i64([5, 2]),
                                               tf.constant(-1.)])
    add("SparseFillEmptyRows/empty input", fill, [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float32), i64([3, 2]),
                                                  tf.constant(-1.)])
    add("SparseFillEmptyRows/strings, rank 3", fill, [i64([[1, 2, 3]]), tf.constant(["x"]), i64([3, 4, 5]),
                                                      tf.constant("?")])
    add("SparseFillEmptyRows/no rows", fill, [tf.zeros([0, 2], tf.int64), tf.constant([], tf.int64), i64([0, 2]),
                                              tf.constant(7, tf.int64)])
    add("SparseFillEmptyRows/error/row out of range", fill, [i64([[7, 1]]), tf.constant([1.]), i64([5, 2]),
                                                             tf.constant(-1.)])

    rng = np.random.default_rng(3)
    b = tf.constant(rng.standard_normal((3, 40)).astype(np.float32))
    mm = lambda aa, ab: (lambda i, v, s, b: R.SparseTensorDenseMatMul(  # noqa: E731
        a_indices=i, a_values=v, a_shape=s, b=b, adjoint_a=aa, adjoint_b=ab))
    add("SparseTensorDenseMatMul/float", mm(False, False), [ind, val, sh, b])
    add("SparseTensorDenseMatMul/float, repeated index",
        mm(False, False), [i64([[0, 1], [0, 1], [1, 2]]), tf.constant([0.1, 0.7, -3.0]), sh, b])
    add("SparseTensorDenseMatMul/adjoint a", mm(True, False),
        [i64([[0, 1], [2, 0]]), tf.constant([1.5, -2.0]), i64([3, 2]), b[:3, :5]])
    add("SparseTensorDenseMatMul/adjoint b", mm(False, True), [ind, val, sh, tf.transpose(b)])
    add("SparseTensorDenseMatMul/float64", mm(False, False),
        [ind, tf.constant([0.1, 0.2, 0.3, 0.4], tf.float64), sh, tf.cast(b, tf.float64)])
    add("SparseTensorDenseMatMul/int32", mm(False, False),
        [ind, tf.constant([1, 2, 3, 4], tf.int32), sh, tf.constant([[1, 2], [3, 4], [5, 6]], tf.int32)])
    add("SparseTensorDenseMatMul/error/index out of range", mm(False, False),
        [i64([[0, 5]]), tf.constant([1.]), sh, b])
    add("SparseTensorDenseMatMul/error/inner dimensions", mm(False, False), [ind, val, sh, b[:2]])

    sadd = lambda ai, av, ash, bi, bv, bsh, t: R.SparseAdd(  # noqa: E731
        a_indices=ai, a_values=av, a_shape=ash, b_indices=bi, b_values=bv, b_shape=bsh, thresh=t)
    a_i, b_i = i64([[0, 1], [1, 0]]), i64([[0, 1], [0, 2], [1, 0], [1, 2]])
    add("SparseAdd/float, thresh", sadd, [a_i, tf.constant([1., 2.]), sh, b_i, tf.constant([-1., 5., 0.5, 7.]), sh,
                                         tf.constant(0.6)])
    add("SparseAdd/float, no thresh", sadd, [a_i, tf.constant([1., 2.]), sh, b_i, tf.constant([-1., 5., 0.5, 7.]), sh,
                                            tf.constant(0.)])
    add("SparseAdd/int64", sadd, [a_i, i64([1, 2]), sh, b_i, i64([-1, 5, 3, 4]), sh, i64(0)])
    add("SparseAdd/double, empty a", sadd, [tf.zeros([0, 2], tf.int64), tf.constant([], tf.float64), sh, b_i,
                                           tf.constant([1., 2., 3., 4.], tf.float64), sh, tf.constant(0., tf.float64)])
    add("SparseAdd/error/shapes differ", sadd, [a_i, tf.constant([1., 2.]), sh, b_i,
                                               tf.constant([1., 2., 3., 4.]), i64([2, 4]), tf.constant(0.)])
    dadd = lambda ai, av, ash, b: R.SparseTensorDenseAdd(a_indices=ai, a_values=av, a_shape=ash, b=b)  # noqa: E731
    add("SparseTensorDenseAdd/float, repeated index", dadd, [i64([[0, 1], [0, 1], [1, 2]]), tf.constant([1., 2., 0.1]),
                                                             sh, tf.constant([[0.3, 1., 1.], [1., 1., 1.]])])
    add("SparseTensorDenseAdd/int32", dadd, [a_i, tf.constant([1, 2], tf.int32), sh, tf.ones([2, 3], tf.int32)])
    add("SparseTensorDenseAdd/error/shapes differ", dadd, [a_i, tf.constant([1., 2.]), sh, tf.ones([3, 3])])
    add("SparseTensorDenseAdd/error/index out of range", dadd, [i64([[5, 1]]), tf.constant([1.]), sh, tf.ones([2, 3])])

    i3 = i64([[1, 0, 2], [0, 1, 1], [1, 2, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]])
    v3 = tf.constant([0.1, 0.7, -3.0, 1e-3, 2.5, -0.0])
    s3 = i64([2, 3, 3])
    for op in ("SparseReduceSum", "SparseReduceMax", "SparseReduceSumSparse", "SparseReduceMaxSparse"):
        f = getattr(R, op)
        for axes, keep in [([1], False), ([0, 2], False), ([-1], True), ([0, 1, 2], False), ([], False)]:
            add(f"{op}/axes {axes}{', keep_dims' if keep else ''}",
                lambda i, v, s, a, f=f, keep=keep: f(input_indices=i, input_values=v, input_shape=s,
                                                     reduction_axes=a, keep_dims=keep),
                [i3, v3, s3, tf.constant(axes, tf.int32)])
        add(f"{op}/int64", lambda i, v, s, a, f=f: f(input_indices=i, input_values=v, input_shape=s,
                                                     reduction_axes=a, keep_dims=False),
            [i3, i64([1, -2, 3, 4, 5, -6]), s3, tf.constant([2], tf.int32)])
        add(f"{op}/error/axis out of range", lambda i, v, s, a, f=f: f(
            input_indices=i, input_values=v, input_shape=s, reduction_axes=a, keep_dims=False),
            [i3, v3, s3, tf.constant([3], tf.int32)])

    pipeline_cases(fam)
    return fam


def pipeline_cases(fam):
    D = tf.data.Dataset
    examples = [example(i) for i in range(7)]
    varlen = {"tok": tf.io.VarLenFeature(tf.int64), "w": tf.io.VarLenFeature(tf.float32),
              "s": tf.io.VarLenFeature(tf.string)}

    def dense(d):
        return {k: tf.sparse.to_dense(v) for k, v in d.items()}
    fam.add_dataset("pipeline/VarLenFeature densified in the map", D.from_tensor_slices(examples).map(
        lambda s: dense(tf.io.parse_single_example(s, varlen))))
    fam.add_dataset("pipeline/VarLenFeature triples", D.from_tensor_slices(examples).map(
        lambda s: (lambda sp: (sp.indices, sp.values, sp.dense_shape))(tf.io.parse_single_example(s, varlen)["tok"])))
    fam.add_dataset("pipeline/parse_example of batches", D.from_tensor_slices(examples).batch(3).map(
        lambda s: dense(tf.io.parse_example(s, varlen))))
    sparse_feature = {"sf": tf.io.SparseFeature("idx", "val", tf.float32, 10)}
    fam.add_dataset("pipeline/SparseFeature", D.from_tensor_slices(examples).map(
        lambda s: dense(tf.io.parse_single_example(s, sparse_feature))))
    fam.add_dataset("pipeline/SparseFeature of batches", D.from_tensor_slices(examples).batch(4).map(
        lambda s: dense(tf.io.parse_example(s, sparse_feature))))

    # A map returning a SparseTensor: the element is a serialized sparse
    # tensor, read back by the next map.
    parsed = D.from_tensor_slices(examples).map(lambda s: tf.io.parse_single_example(s, varlen)["tok"])
    fam.add_dataset("pipeline/sparse element then to_dense", parsed.map(tf.sparse.to_dense))
    fam.add_dataset("pipeline/batched sparse elements", parsed.batch(3).map(
        lambda sp: (sp.indices, sp.values, sp.dense_shape)))
    fam.add_dataset("pipeline/batched sparse elements, drop remainder", parsed.batch(2, drop_remainder=True).map(
        tf.sparse.to_dense))
    fam.add_dataset("pipeline/sparse ops in a map", parsed.map(lambda sp: tf.sparse.to_dense(tf.sparse.concat(
        0, [tf.sparse.reshape(sp, [-1, 1]), tf.sparse.slice(tf.sparse.reshape(sp, [-1, 1]), [1, 0], [2, 1])]))))
    fam.add_dataset("pipeline/fill empty rows", D.from_tensor_slices(examples).batch(4).map(
        lambda s: tf.sparse.fill_empty_rows(tf.io.parse_example(s, varlen)["w"], -1.0)).map(
        lambda sp, empty: (tf.sparse.to_dense(sp), empty)))
    fam.add_dataset("pipeline/sparse from_tensor_slices", D.from_tensor_slices(tf.sparse.SparseTensor(
        [[0, 1], [2, 0], [2, 3]], [1.0, 2.0, 3.0], [3, 4])).map(tf.sparse.to_dense))
    fam.add_dataset("pipeline/sparse add of parsed features", D.from_tensor_slices(examples).batch(3).map(
        lambda s: (lambda p: tf.sparse.to_dense(tf.sparse.add(
            tf.sparse.reset_shape(p["tok"], [3, 8]), tf.sparse.reset_shape(tf.cast(p["tok"], tf.int64), [3, 8]))))(
            tf.io.parse_example(s, varlen))))
    fam.add_dataset("pipeline/sparse reduce_sum of parsed weights", D.from_tensor_slices(examples).batch(3).map(
        lambda s: (lambda w: (tf.sparse.reduce_sum(w, axis=1), tf.sparse.reduce_max(w, axis=0)))(
            tf.io.parse_example(s, varlen)["w"])))
    fam.add_dataset("pipeline/sparse dense matmul", D.from_tensor_slices(examples).batch(3).map(
        lambda s: tf.sparse.sparse_dense_matmul(
            tf.sparse.reset_shape(tf.io.parse_example(s, varlen)["w"], [3, 4]), tf.ones([4, 2]))))
