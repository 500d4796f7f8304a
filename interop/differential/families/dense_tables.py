"""Dense hash tables (tf.lookup.experimental.DenseHashTable):
MutableDenseHashTableV2 and AnonymousMutableDenseHashTable made, filled,
pruned and read inside one function call; scalar and vector values, the
empty and deleted keys refused wherever they appear, the bucket count and
load factor checks, the key shape check and the first-row default."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops


def family():
    fam = Family("dense_tables")

    def case(name, kd, vd, empty, deleted, ins, rm, default, query, shape=(), anonymous=False, unknown=False,
             **kw):
        def fn(q, d):
            make = R.AnonymousMutableDenseHashTable if anonymous else R.MutableDenseHashTableV2
            t = make(empty_key=tf.constant(empty, kd), deleted_key=tf.constant(deleted, kd), value_dtype=vd,
                     value_shape=list(shape), **kw)
            ops = []
            for keys, values in ins:
                with tf.control_dependencies(ops):
                    ops = [R.LookupTableInsertV2(table_handle=t, keys=tf.constant(keys, kd),
                                                 values=tf.constant(values, vd))]
            if rm is not None:
                with tf.control_dependencies(ops):
                    ops = [R.LookupTableRemoveV2(table_handle=t, keys=tf.constant(rm, kd))]
            with tf.control_dependencies(ops):
                return R.LookupTableFindV2(table_handle=t, keys=q, default_value=d), \
                    R.LookupTableSizeV2(table_handle=t)
        fam.add_function(f"dense_tables/{name}", fn, [tf.constant(query, kd), tf.constant(default, vd)],
                         unknown_shapes=unknown, traced=True)

    case("int64 to int64, overwrite and remove", tf.int64, tf.int64, -1, -2,
         [([1, 2, 1], [10, 20, 30]), ([3, 2**63 - 1], [4, 5])], [2, 9], -7, [1, 2, 3, 2**63 - 1, 0])
    case("string to float", tf.string, tf.float32, "", "\u00e9", [(["a", "b"], [1.5, float("nan")])], None, -0.,
         ["a", "b", "x" * 50])
    case("scalar key", tf.int64, tf.int64, -1, -2, [(5, 7)], None, 0, 5)
    case("vector values", tf.int64, tf.float64, 0, 1, [([2, 3], [[1., 2.], [3., 4.]])], [3], [5., 6.], [2, 3, 4],
         shape=[2])
    case("per-key default uses the first row", tf.int64, tf.int64, 0, 1, [([2], [[1, 2]])], None,
         [[5, 6], [7, 8]], [2, 3], shape=[2])
    case("scalar values, default per key uses the first", tf.int32, tf.int32, 0, 1, [([2], [9])], None, [5, 6],
         [2, 3])
    case("string to bool", tf.string, tf.bool, "e", "d", [(["t", "f"], [True, False])], ["f"], False, ["t", "f"])
    case("grows past its buckets", tf.int64, tf.int64, -1, -2, [(list(range(100)), list(range(100, 200)))],
         list(range(0, 100, 3)), -1, [0, 1, 2, 99, 98, 100], initial_num_buckets=4, max_load_factor=0.5)
    case("anonymous", tf.string, tf.int64, "", "del", [(["k"], [1])], None, 0, ["k", "j"], anonymous=True)
    case("empty table", tf.int64, tf.int64, -1, -2, [], None, 3, [1])
    case("error/insert empty key", tf.int64, tf.int64, -1, -2, [([1, -1], [1, 2])], None, 0, [1])
    case("error/insert deleted key", tf.int64, tf.int64, -1, -2, [([1, -2], [1, 2])], None, 0, [1])
    case("error/find empty key", tf.string, tf.int64, "", "d", [], None, 0, ["a", ""])
    case("error/find deleted key", tf.string, tf.int64, "", "d", [], None, 0, ["d"])
    case("error/remove empty key", tf.int64, tf.int64, -1, -2, [], [-1], 0, [1])
    case("error/remove deleted key", tf.int64, tf.int64, -1, -2, [], [5, -2], 0, [1])
    case("error/equal keys", tf.int64, tf.int64, 1, 1, [], None, 0, [1])
    case("error/buckets not a power of two", tf.int64, tf.int64, -1, -2, [], None, 0, [1], initial_num_buckets=12)
    case("error/load factor 1", tf.int64, tf.int64, -1, -2, [], None, 0, [1], max_load_factor=1.0)
    case("error/load factor 0", tf.int64, tf.int64, -1, -2, [], None, 0, [1], max_load_factor=0.0)
    case("error/matrix value shape", tf.int64, tf.int64, -1, -2, [], None, 0, [1], shape=[2, 2])
    case("error/matrix keys to find", tf.int64, tf.int64, -1, -2, [], None, 0, [[1, 2]], unknown=True)
    case("error/matrix keys to insert", tf.int64, tf.int64, -1, -2, [([[1, 2]], [[1, 2]])], None, 0, [1],
         unknown=True)
    case("error/matrix keys to remove", tf.int64, tf.int64, -1, -2, [], [[1, 2]], 0, [1], unknown=True)
    case("error/default shape", tf.int64, tf.int64, -1, -2, [], None, [[1]], [1], unknown=True)
    case("error/insert value shape", tf.int64, tf.int64, -1, -2, [([1, 2], [[1], [2]])], None, 0, [1],
         unknown=True)
    return fam
