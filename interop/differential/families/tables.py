"""The V1 lookup-table ops (a Ref(string) handle where the V2 ops have a
resource): HashTable, InitializeTable, LookupTableImport,
InitializeTableFromTextFile, LookupTableFind and LookupTableSize, in traced
functions (TensorFlow runs them in graphs only). The vocabulary file is the
lookup family's, under crates/tfdata-graph/tests/data/lookup."""

import tensorflow as tf

from harness import Family, in_crate

R = tf.raw_ops
VOCAB = "tests/data/lookup/vocab.txt"


def family():
    with in_crate():
        return build()


def build():
    fam = Family("tables")
    add = lambda *a, **k: fam.add_function(*a, traced=True, **k)  # noqa: E731

    def filled(init, kd, vd, keys, values):
        def fn(query, default):
            t = R.HashTable(key_dtype=kd, value_dtype=vd)
            # Built inside the function: an eager constant would be captured
            # as an extra argument.
            op = init(table_handle=t, keys=tf.constant(keys[0], keys[1]), values=tf.constant(values[0], values[1]))
            with tf.control_dependencies([op]):
                return R.LookupTableFind(table_handle=t, keys=query, default_value=default), \
                    R.LookupTableSize(table_handle=t)
        return fn

    s = lambda *v: tf.constant(list(v), tf.string)  # noqa: E731
    add("V1/InitializeTable string to int64",
                     filled(R.InitializeTable, tf.string, tf.int64, (["a", "b", "\u00e9"], tf.string), ([1, 2, 3], tf.int64)),
                     [s("a", "c", "\u00e9", ""), tf.constant(-1, tf.int64)])
    add("V1/LookupTableImport int64 to float",
                     filled(R.LookupTableImport, tf.int64, tf.float32, ([5, -7, 2**40], tf.int64), ([0.5, -0., 3.], tf.float32)),
                     [tf.constant([[5, 6], [2**40, -7]], tf.int64), tf.constant(9.)])
    add("V1/InitializeTable int32 to string",
                     filled(R.InitializeTable, tf.int32, tf.string, ([1, 2], tf.int32), (["one", "two"], tf.string)),
                     [tf.constant([2, 3, 1]), tf.constant("?")])
    add("V1/error/duplicate key",
                     filled(R.InitializeTable, tf.string, tf.int64, (["a", "a"], tf.string), ([1, 2], tf.int64)),
                     [s("a"), tf.constant(-1, tf.int64)])
    add("V1/error/default shape",
                     filled(R.InitializeTable, tf.string, tf.int64, (["a"], tf.string), ([1], tf.int64)),
                     [s("a"), tf.constant([-1, -2], tf.int64)], unknown_shapes=True)

    def from_file(query, default):
        t = R.HashTable(key_dtype=tf.string, value_dtype=tf.int64)
        op = R.InitializeTableFromTextFile(table_handle=t, filename=VOCAB, key_index=-2, value_index=-1)
        with tf.control_dependencies([op]):
            return R.LookupTableFind(table_handle=t, keys=query, default_value=default), \
                R.LookupTableSize(table_handle=t)
    add("V1/InitializeTableFromTextFile", from_file,
                     [s("fox", "the", "cat", "dog"), tf.constant(-1, tf.int64)])
    def anonymous(query, default):
        t = R.AnonymousHashTable(key_dtype=tf.string, value_dtype=tf.int32)
        op = R.LookupTableImportV2(table_handle=t, keys=tf.constant(["x", "y"]), values=tf.constant([4, 5]))
        with tf.control_dependencies([op]):
            return R.LookupTableFindV2(table_handle=t, keys=query, default_value=default), \
                R.LookupTableSizeV2(table_handle=t)
    add("AnonymousHashTable", anonymous, [s("y", "z", "x"), tf.constant(-1)])
    mutable_cases(add)
    return fam


def mutable_cases(add):
    """MutableHashTableV2 made, filled and read inside one function call."""
    def case(name, kd, vd, ins, rm, default, query, anonymous=False, unknown=False):
        def fn(q, d):
            if anonymous:
                t = R.AnonymousMutableHashTable(key_dtype=kd, value_dtype=vd)
            else:
                t = R.MutableHashTableV2(key_dtype=kd, value_dtype=vd)
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
        add(f"mutable/{name}", fn, [tf.constant(query, kd), tf.constant(default, vd)], unknown_shapes=unknown)
    case("string to int64, overwrite and remove", tf.string, tf.int64,
         [(["a", "b", "a"], [1, 2, 3]), (["c", "b"], [4, 5])], ["c", "zz"], -1, ["a", "b", "c", "d"])
    case("per-key default", tf.string, tf.int64, [(["a", "b"], [1, 2])], None, [-1, -2, -3], ["a", "b", "c"])
    case("int32 to float", tf.int32, tf.float32, [([1, 2], [1.5, -0.])], None, 0., [[2, 9], [1, 1]])
    case("int64 to string, remove", tf.int64, tf.string, [([1, 2], ["x", "\u00e9"])], [2, 7], "?", [2, 9, 1])
    case("int64 to double, matrix keys", tf.int64, tf.float64, [([[1, 2], [3, 1]], [[0.1, 0.2], [0.3, 0.4]])],
         [[3]], 9., [1, 2, 3])
    case("anonymous", tf.string, tf.bool, [(["t"], [True])], None, False, ["t", "f"], anonymous=True)
    case("empty", tf.string, tf.int64, [], None, -1, ["a"])

    def v1(q, d):
        t = R.MutableHashTable(key_dtype=tf.int64, value_dtype=tf.float32)
        ins = R.LookupTableInsert(table_handle=t, keys=tf.constant([3, 1, 3], tf.int64),
                                  values=tf.constant([0.5, -2., 7.]))
        with tf.control_dependencies([ins]):
            return R.LookupTableFind(table_handle=t, keys=q, default_value=d), R.LookupTableSize(table_handle=t)
    add("mutable/V1 ops", v1, [tf.constant([1, 2, 3], tf.int64), tf.constant(0.25)])
    case("error/insert shapes", tf.string, tf.int64, [(["a", "b"], [[1, 2]])], None, -1, ["a"], unknown=True)
    case("error/default shape", tf.string, tf.int64, [(["a"], [1])], None, [-1], ["a", "b", "c"], unknown=True)
