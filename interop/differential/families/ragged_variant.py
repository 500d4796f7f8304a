"""RaggedTensors as variants: RaggedTensorToVariant, RaggedTensorFromVariant
and RaggedTensorToVariantGradient, in functions (round trips, stacking,
gradients, TensorFlow's errors) and in pipelines (a map returning a ragged
tensor, batch, unbatch, ragged_batch, filter, flat_map, from_tensor_slices),
where each element is read back to its splits and values in a last map."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops
D = tf.data.Dataset


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


def i32(v, shape=None):
    return tf.constant(v, tf.int32, shape=shape)


def to_var(splits, values, batched):
    return R.RaggedTensorToVariant(rt_nested_splits=splits, rt_dense_values=values, batched_input=batched)


def from_var(v, out_rank, dtype, splits_dtype=tf.int64, in_rank=-1):
    r = R.RaggedTensorFromVariant(encoded_ragged=v, input_ragged_rank=in_rank, output_ragged_rank=out_rank,
                                  Tvalues=dtype, Tsplits=splits_dtype)
    return [*r.output_nested_splits, r.output_dense_values]


def hide_rank(v, s):
    """`v` (a vector) as a tensor of unknown rank, so that shape inference
    lets a bad rank reach the kernel; `s` is a 3-vector of unknown shape."""
    return tf.reshape(v, tf.shape(v)[:tf.size(s) - 2])


def round_trips(fam):
    def add(name, splits, values, batched, out_rank, in_rank=-1, unknown=False, dtype=None):
        n = len(splits)
        sdt = splits[0].dtype if splits else tf.int64
        vdt = dtype or values.dtype
        fam.add_function(f"round trip/{name}", lambda *a: from_var(
            to_var(list(a[:n]), a[n], batched), out_rank, vdt, sdt, in_rank),
            [*splits, values], unknown_shapes=unknown)
    s1 = i64([0, 2, 2, 5])
    v5 = tf.constant([1.5, -0.0, float("nan"), float("inf"), -2.0])
    add("unbatched, ragged rank 1", [s1], v5, False, 1)
    add("unbatched, explicit input rank", [s1], v5, False, 1, in_rank=1)
    add("batched, ragged rank 1", [s1], v5, True, 1)
    add("batched, ragged rank 1, explicit input rank", [s1], v5, True, 1, in_rank=0)
    add("batched, ragged rank 2, int32 splits, strings", [i32([0, 1, 3]), i32([0, 2, 2, 4])],
        tf.constant(["a", "", "d\u00e9j\u00e0", "x" * 40]), True, 2)
    add("unbatched, ragged rank 2", [i32([0, 1, 3]), i32([0, 2, 2, 4])], tf.constant([1, 2, 3, 4]), False, 2)
    add("batched, ragged rank 3", [i64([0, 2, 3]), i64([0, 1, 1, 3]), i64([0, 2, 2, 5])],
        tf.constant([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]], tf.int64), True, 3)
    add("batched, 2-D values", [s1], tf.reshape(tf.range(15, dtype=tf.float64), [5, 3]), True, 1)
    add("batched, ragged rank 0 matrix", [], tf.constant([[1, 2], [3, 4], [5, 6]]), True, 1)
    add("unbatched, ragged rank 0 scalar", [], tf.constant(7, tf.int8), False, 0, unknown=True)
    add("unbatched, ragged rank 0 vector", [], tf.constant([True, False]), False, 0)
    add("batched, no rows", [i64([0])], tf.constant([], tf.float32), True, 1)
    add("batched, empty rows", [i64([0, 0, 0])], tf.constant([], tf.int32), True, 1)
    add("batched, int64 extremes", [i64([0, 1, 2])], i64([-2**63, 2**63 - 1]), True, 1)
    add("batched, uint16 values", [i32([0, 3])], tf.constant([1, 65535, 0], tf.uint16), True, 1)

    # Stacked variants: a batch of batches, uneven entries.
    def stacked(name, fn, inputs, unknown=False):
        fam.add_function(f"stacked/{name}", fn, inputs, unknown_shapes=unknown)
    stacked("two entries", lambda s, v: from_var(tf.stack([to_var([s], v, False), to_var([s[:2]], v[:2], False)]),
                                                  2, tf.float32), [i64([0, 2, 3]), tf.constant([1., 2., 3.])])
    stacked("matrix of entries", lambda s, v: from_var(tf.reshape(tf.stack([to_var([s], v, False)] * 6), [2, 3]),
                                                        3, tf.int32, tf.int32), [i32([0, 1, 3]), tf.constant([[1, 2], [3, 4], [5, 6]])])
    stacked("rank 3 of entries", lambda s, v: from_var(tf.reshape(tf.stack([to_var([s], v, False)] * 8), [2, 2, 2]),
                                                        4, tf.int32, tf.int32), [i32([0, 1, 3]), tf.constant([1, 2, 3])])
    stacked("ragged rank 0 entries", lambda v: from_var(tf.stack([to_var([], v, False), to_var([], v[1:], False)]),
                                                         1, tf.float32), [tf.constant([1., 2., 3.])])
    stacked("dense entries, output ragged rank 0", lambda s, v: from_var(to_var([s], v, True), 0, tf.int32),
            [i64([0, 1, 2]), tf.constant([1, 2])], unknown=True)
    stacked("no entries", lambda s, v: from_var(to_var([s], v, True)[:0], 2, tf.int64),
            [i64([0, 1]), tf.constant([[4]], tf.int64)])

    # The errors TensorFlow's kernels give.
    def err(name, fn, inputs, unknown=True):
        fam.add_function(f"error/{name}", fn, inputs, unknown_shapes=unknown)
    v2 = tf.constant([1, 2])
    err("splits not starting at 0", lambda s, v: from_var(to_var([s], v, True), 1, tf.int32), [i64([1, 2]), v2])
    err("decreasing splits", lambda s, v: from_var(to_var([s], v, False), 1, tf.int32), [i64([0, 2, 1]), v2])
    err("last split past the values", lambda s, v: from_var(to_var([s], v, True), 1, tf.int32), [i64([0, 5]), v2])
    err("inner splits past the values", lambda s, t, v: from_var(to_var([s, t], v, True), 2, tf.int32),
        [i64([0, 1, 2]), i64([0, 1, 3]), v2])
    err("outer splits past the inner", lambda s, t, v: from_var(to_var([s, t], v, False), 2, tf.int32),
        [i64([0, 1, 3]), i64([0, 1, 2]), v2])
    err("empty splits", lambda s, v: from_var(to_var([s], v, True), 1, tf.int32), [i64([]), v2])
    err("matrix splits", lambda s, v: from_var(to_var([s], v, True), 1, tf.int32), [i64([[0, 2]]), v2])
    err("scalar values", lambda s, v: from_var(to_var([s], v, False), 1, tf.int32), [i64([0, 1]), tf.constant(3)])
    err("unbatching a scalar", lambda v: from_var(to_var([], v, True), 1, tf.int32), [tf.constant(3)])
    err("scalar values stacked", lambda v: from_var(to_var([], v, True), 1, tf.int32), [tf.constant([3, 4])])
    err("wrong ragged rank", lambda s, v: from_var(to_var([s], v, True), 3, tf.int32), [i64([0, 1, 2]), v2])
    err("input rank beside output rank", lambda s, v: from_var(hide_rank(to_var([s], v, True), s), 2, tf.int32, in_rank=2),
        [i64([0, 1, 2]), v2])
    err("wrong values dtype", lambda s, v: from_var(to_var([s], v, False), 1, tf.int64), [i64([0, 1, 2]), v2])
    err("wrong splits dtype", lambda s, v: from_var(to_var([s], v, False), 1, tf.int32, tf.int32),
        [i64([0, 1, 2]), v2])
    err("wrong splits dtype, stacked", lambda s, v: from_var(to_var([s, s], v, True), 2, tf.int32, tf.int32),
        [i64([0, 1, 2]), v2])
    err("inner dimensions differ", lambda s, v, w: from_var(tf.stack([to_var([s], v, False), to_var([s[:2]], w, False)]),
                                                            2, tf.float32, tf.int32),
        [i32([0, 1, 3]), tf.constant([[1., 2], [3, 4], [5, 6]]), tf.constant([[1., 2., 3.]])])
    err("dense entries of other shapes", lambda v, w: from_var(tf.stack([to_var([], v, False), to_var([], w, False)]),
                                                              0, tf.float32), [tf.constant([1.]), tf.constant([1., 2.])])
    err("values ranks differ", lambda s, v, w: from_var(tf.stack([to_var([s], v, False), to_var([s[:2]], w, False)]),
                                                        2, tf.float32, tf.int32),
        [i32([0, 1, 3]), tf.constant([[1., 2], [3, 4], [5, 6]]), tf.constant([1.])])
    err("a sparse variant", lambda i, v, s: from_var(R.SerializeSparse(
        sparse_indices=i, sparse_values=v, sparse_shape=s, out_type=tf.variant), 2, tf.int32),
        [tf.zeros([0, 1], tf.int64), tf.constant([], tf.int32), i64([3])])


def gradients(fam):
    # The flat values' gradient through a variant round trip, given an
    # upstream gradient (RaggedTensorFromVariant's gradient is
    # RaggedTensorToVariant, whose gradient is RaggedTensorToVariantGradient).
    def grad_of(ragged_rank, batched):
        def fn(x, *splits):
            with tf.GradientTape() as tape:
                tape.watch(x)
                rt = tf.RaggedTensor.from_nested_row_splits(x, splits, validate=False)
                v = rt._to_variant(batched_input=batched)
                back = tf.RaggedTensor._from_variant(v, x.dtype, output_ragged_rank=ragged_rank,
                                                     row_splits_dtype=splits[0].dtype)
            upstream = tf.cast(tf.range(tf.size(x)) * 3 - 2, x.dtype)
            return tape.gradient(back.flat_values, x, output_gradients=upstream)
        return fn
    x = tf.constant([1., 2., 3., 4., 5.])
    fam.add_function("gradient/batched, ragged rank 1", grad_of(1, True), [x, i64([0, 2, 2, 5])])
    fam.add_function("gradient/unbatched, ragged rank 1", grad_of(1, False), [x, i64([0, 2, 2, 5])])
    fam.add_function("gradient/batched, ragged rank 2, int32 splits", grad_of(2, True),
                     [tf.constant([1., 2., 3., 4.], tf.float64), i32([0, 1, 3]), i32([0, 2, 2, 4])])
    fam.add_function("gradient/batched, no rows", grad_of(1, True), [tf.constant([], tf.float32), i64([0])])
    fam.add_function("gradient/batched, one row", grad_of(1, True), [x, i64([0, 5])])


def pipelines(fam):
    def parts(r):
        assert isinstance(r, tf.RaggedTensor), r
        return (r.flat_values, *r.nested_row_splits)

    base = D.range(5).map(lambda x: tf.RaggedTensor.from_row_lengths(tf.range(x * 2), [x, x]))
    fam.add_dataset("pipeline/map returning a ragged tensor", base.map(parts))
    fam.add_dataset("pipeline/batch", base.batch(2).map(parts))
    fam.add_dataset("pipeline/batch, drop remainder", base.batch(2, drop_remainder=True).map(parts))
    fam.add_dataset("pipeline/batch of batches", base.batch(2).batch(2).map(parts))
    fam.add_dataset("pipeline/unbatch", base.unbatch().map(lambda t: t))
    fam.add_dataset("pipeline/batch then unbatch", base.batch(2).unbatch().map(parts))
    fam.add_dataset("pipeline/ragged_batch", D.range(6).map(lambda x: tf.range(x)).ragged_batch(4).map(parts))
    fam.add_dataset("pipeline/ragged_batch of ragged", base.ragged_batch(3).map(parts))
    fam.add_dataset("pipeline/ragged_batch of matrices", D.range(4).map(
        lambda x: tf.reshape(tf.range(x * 2, dtype=tf.float32), [x, 2])).ragged_batch(3).map(parts))
    fam.add_dataset("pipeline/filter", base.filter(lambda r: tf.size(r.flat_values) > 2).map(parts))
    fam.add_dataset("pipeline/flat_map", base.flat_map(
        lambda r: D.from_tensors(r).repeat(2)).map(parts))
    fam.add_dataset("pipeline/from_tensor_slices", D.from_tensor_slices(
        tf.ragged.constant([[1, 2], [3], [], [4, 5, 6]])).map(lambda t: t))
    fam.add_dataset("pipeline/from_tensor_slices, ragged rank 2", D.from_tensor_slices(
        tf.ragged.constant([[["a"], ["b", "c"]], [], [["d\u00e9"]]])).map(parts))
    words = D.from_tensor_slices(["a bc d", "", "efg h", "i j k l"])
    fam.add_dataset("pipeline/string split, batch", words.map(lambda s: tf.strings.split([s])).batch(3).map(parts))
    fam.add_dataset("pipeline/string split, int32 splits", words.map(
        lambda s: tf.strings.split([s]).with_row_splits_dtype(tf.int32)).batch(2).map(parts))
    fam.add_dataset("pipeline/ragged ops in the consumer", base.batch(2).map(
        lambda r: (tf.reduce_sum(r, axis=-1).flat_values, r.to_tensor(default_value=-1))))


def family():
    fam = Family("ragged_variant")
    round_trips(fam)
    gradients(fam)
    pipelines(fam)
    return fam
