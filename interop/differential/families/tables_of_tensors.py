"""Mutable hash tables of tensors (tf.lookup.experimental.MutableHashTable
with vector values): MutableHashTableOfTensorsV2, its V1 op and
AnonymousMutableHashTableOfTensors, made, filled, pruned and read inside
one function call. One default for all keys or one per key, the value
shape checks of insert and find, a scalar value_shape refused."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops


def family():
    fam = Family("tables_of_tensors")

    def case(name, kd, vd, shape, ins, rm, default, query, maker="V2", unknown=False):
        def fn(q, d):
            if maker == "V2":
                t = R.MutableHashTableOfTensorsV2(key_dtype=kd, value_dtype=vd, value_shape=shape)
            elif maker == "anonymous":
                t = R.AnonymousMutableHashTableOfTensors(key_dtype=kd, value_dtype=vd, value_shape=shape)
            else:
                t = R.MutableHashTableOfTensors(key_dtype=kd, value_dtype=vd, value_shape=shape)
            insert = R.LookupTableInsert if maker == "V1" else R.LookupTableInsertV2
            find = R.LookupTableFind if maker == "V1" else R.LookupTableFindV2
            size = R.LookupTableSize if maker == "V1" else R.LookupTableSizeV2
            ops = []
            for keys, values in ins:
                with tf.control_dependencies(ops):
                    ops = [insert(table_handle=t, keys=tf.constant(keys, kd), values=tf.constant(values, vd))]
            if rm is not None:
                with tf.control_dependencies(ops):
                    ops = [R.LookupTableRemoveV2(table_handle=t, keys=tf.constant(rm, kd))]
            with tf.control_dependencies(ops):
                return find(table_handle=t, keys=q, default_value=d), size(table_handle=t)
        fam.add_function(f"tables_of_tensors/{name}", fn, [tf.constant(query, kd), tf.constant(default, vd)],
                         unknown_shapes=unknown, traced=True)

    case("string to int64 pairs, overwrite", tf.string, tf.int64, [2],
         [(["a", "b", "a"], [[1, 2], [3, 4], [5, 6]]), (["c"], [[7, 8]])], None, [-1, -2], [["a", "c"], ["b", "zz"]])
    case("remove", tf.string, tf.int64, [2], [(["a", "b"], [[1, 2], [3, 4]])], ["b", "nope"], [0, 0], ["a", "b"])
    case("per-key default", tf.string, tf.int64, [2], [(["a", "b"], [[1, 2], [3, 4]])], None,
         [[7, 8], [9, 10], [11, 12]], ["a", "c", "d"])
    case("int64 to float triples", tf.int64, tf.float32, [3], [([1, -2**63], [[1.5, -0., float("nan")],
                                                                             [float("inf"), 1e-45, 3.]])],
         None, [0., 0., 0.], [1, 2, -2**63])
    case("int64 to string", tf.int64, tf.string, [1], [([5], [["\u00e9t\u00e9"]])], None, ["?"], [5, 6])
    case("int32 to double", tf.int32, tf.float64, [2], [([5, -1], [[0.5, -1e300], [2., 3.]])], None, [1., 1.], [5, 6])
    case("int64 to double, matrix keys", tf.int64, tf.float64, [2], [([[1, 2]], [[[0.1, 0.2], [0.3, 0.4]]])],
         [[2]], [9., 9.], [[1, 2], [3, 1]])
    case("string to bool", tf.string, tf.bool, [2], [(["t"], [[True, False]])], None, [False, True], ["t", "f"])
    case("empty value shape", tf.string, tf.int64, [0], [(["a", "b"], [[], []])], None, [], ["a", "c"])
    case("anonymous", tf.int64, tf.float32, [3], [([1], [[1., 2., 3.]])], None, [0., 0., 0.], [1, 2],
         maker="anonymous")
    case("V1 ops", tf.int64, tf.string, [1], [([1], [["x"]])], None, ["d"], [1, 2], maker="V1")
    case("empty table", tf.string, tf.int64, [2], [], None, [-1, -1], ["a"])
    case("error/insert shape", tf.string, tf.int64, [2], [(["a", "b"], [1, 2])], None, [0, 0], ["a"], unknown=True)
    case("error/default shape", tf.string, tf.int64, [2], [(["a"], [[1, 2]])], None, [1, 2, 3], ["a"],
         unknown=True)
    case("error/scalar default", tf.string, tf.int64, [2], [], None, -1, ["a", "b"], unknown=True)
    case("error/scalar value shape", tf.string, tf.int64, [], [], None, -1, ["a"], unknown=True)
    case("error/matrix value shape", tf.string, tf.int64, [2, 2], [], None, [[0, 0], [0, 0]], "a", unknown=True)
    return fam
