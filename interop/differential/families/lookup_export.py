"""LookupTableExportV2 and the V1 LookupTableExport on mutable hash
tables, tables of tensors and initialised static tables, made and filled
inside one function call.

TensorFlow exports in its hash map's iteration order, which depends on a
seed its hash map takes per process: no order is TensorFlow's from one run
to the next. The cases compare the exported (key, value) rows as a set
("unordered-rows"), the values exact."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops
UNORDERED = ("unordered-rows:TensorFlow exports a hash table in its hash map's iteration "
             "order, which a per-process seed decides; the rows are compared as a set")


def rows(t):
    """A stored tensor's rows (along its first dimension) and a rebuild."""
    dtype, shape, data = t.split("|")
    n = int(shape.split(",")[0])
    if dtype == "7":  # strings: comma-separated hex, row-major
        items = data.split(",") if data else []
    else:
        items = [data[i:i + 2] for i in range(0, len(data), 2)]
    w = len(items) // n if n else 0
    out = [items[i * w:(i + 1) * w] for i in range(n)]
    return out, lambda rs: "|".join([dtype, shape, ("," if dtype == "7" else "").join(
        x for r in rs for x in r)])


def canonical(case):
    """TensorFlow's exported rows in one fixed order (keys' bytes), so that
    regenerating gives the same file; the replay compares them as a set."""
    keys, values = case["outputs"][:2]
    (krows, kbuild), (vrows, vbuild) = rows(keys), rows(values)
    order = sorted(range(len(krows)), key=lambda i: (krows[i], vrows[i]))
    case["outputs"][:2] = [kbuild([krows[i] for i in order]), vbuild([vrows[i] for i in order])]


def family():
    fam = Family("lookup_export")

    def mutable(kd, vd, inserts, removes=None, anonymous=False, name=""):
        def fn(probe):
            if anonymous:
                t = R.AnonymousMutableHashTable(key_dtype=kd, value_dtype=vd)
            else:
                # A name of its own: TensorFlow shares a table among calls
                # by its resource name, which would carry entries over.
                t = R.MutableHashTableV2(key_dtype=kd, value_dtype=vd, shared_name=name)
            ops = []
            for ks, vs in inserts:
                with tf.control_dependencies(ops):
                    ops = [R.LookupTableInsertV2(table_handle=t, keys=tf.constant(ks, kd),
                                                 values=tf.constant(vs, vd))]
            if removes is not None:
                with tf.control_dependencies(ops):
                    ops = [R.LookupTableRemoveV2(table_handle=t, keys=tf.constant(removes, kd))]
            with tf.control_dependencies(ops):
                k, v = R.LookupTableExportV2(table_handle=t, Tkeys=kd, Tvalues=vd)
                return k, v, probe
        return fn

    cases = [
        ("string to int64", tf.string, tf.int64,
         [(["b", "a", "\u00e9", ""], [2, 1, -3, 0]), (["a"], [9])], ["b"]),
        ("int64 to float", tf.int64, tf.float32,
         [([3, -9223372036854775808, 9223372036854775807, 0], [0.5, float("nan"), -0.0,
                                                              float("inf")])], None),
        ("int32 to double", tf.int32, tf.float64, [([7, -1], [1e300, -2.5])], None),
        ("int64 to string", tf.int64, tf.string, [([5, 6], ["five", "\x00six"])], [6, 7]),
        ("string to bool", tf.string, tf.bool, [(["t", "f"], [True, False])], None),
        ("int32 to int32", tf.int32, tf.int32, [(list(range(40)), list(range(40, 0, -1)))],
         list(range(0, 40, 3))),
        ("empty", tf.string, tf.int64, [], None),
        ("all removed", tf.int64, tf.int64, [([1, 2], [3, 4])], [1, 2]),
    ]
    for name, kd, vd, inserts, removes in cases:
        fam.add_function(f"LookupTableExportV2/mutable/{name}", mutable(kd, vd, inserts, removes,
                                                                            name="export " + name),
                         [tf.constant(0)], tolerance=UNORDERED)
    fam.add_function("LookupTableExportV2/anonymous", mutable(
        tf.string, tf.float32, [(["x", "y"], [1.0, 2.0])], anonymous=True),
        [tf.constant(0)], tolerance=UNORDERED)

    def of_tensors(probe):
        t = R.MutableHashTableOfTensorsV2(key_dtype=tf.string, value_dtype=tf.float32,
                                          value_shape=[3], shared_name="export tensors")
        ins = R.LookupTableInsertV2(table_handle=t, keys=tf.constant(["p", "q"]),
                                    values=tf.constant([[1., 2., 3.], [-4., 5., 6.]]))
        with tf.control_dependencies([ins]):
            return tuple(R.LookupTableExportV2(table_handle=t, Tkeys=tf.string,
                                               Tvalues=tf.float32)) + (probe,)
    fam.add_function("LookupTableExportV2/table of tensors", of_tensors, [tf.constant(0)],
                     tolerance=UNORDERED)

    def static(probe):
        t = R.HashTableV2(key_dtype=tf.int64, value_dtype=tf.string, shared_name="export static")
        init = R.LookupTableImportV2(table_handle=t, keys=tf.constant([10, 20, 30], tf.int64),
                                     values=tf.constant(["a", "b", "c"]))
        with tf.control_dependencies([init]):
            return tuple(R.LookupTableExportV2(table_handle=t, Tkeys=tf.int64,
                                               Tvalues=tf.string)) + (probe,)
    fam.add_function("LookupTableExportV2/static table", static, [tf.constant(0)],
                     tolerance=UNORDERED)

    def v1(probe):
        t = R.MutableHashTable(key_dtype=tf.int64, value_dtype=tf.float32, shared_name="export v1")
        ins = R.LookupTableInsert(table_handle=t, keys=tf.constant([3, 1, 3], tf.int64),
                                  values=tf.constant([0.5, -2., 7.]))
        with tf.control_dependencies([ins]):
            return tuple(R.LookupTableExport(table_handle=t, Tkeys=tf.int64,
                                             Tvalues=tf.float32)) + (probe,)
    fam.add_function("LookupTableExport/V1 ops", v1, [tf.constant(0)], tolerance=UNORDERED,
                     traced=True)
    for case in fam.cases:
        canonical(case)
    dense(fam)
    return fam


def dense(fam):
    """Dense tables export their bucket array: exact, TensorFlow's layout
    (hash, triangular probing, growth, deleted markers)."""
    def case(name, kd, vd, empty, deleted, steps, buckets=8, load=0.8, value_shape=(),
             anonymous=False):
        def fn(probe):
            kw = dict(empty_key=tf.constant(empty, kd), deleted_key=tf.constant(deleted, kd),
                      value_dtype=vd, initial_num_buckets=buckets, max_load_factor=load,
                      value_shape=list(value_shape))
            if anonymous:
                t = R.AnonymousMutableDenseHashTable(**kw)
            else:
                t = R.MutableDenseHashTableV2(shared_name="dense export " + name, **kw)
            ops = []
            for op, ks, vs in steps:
                with tf.control_dependencies(ops):
                    if op == "insert":
                        ops = [R.LookupTableInsertV2(table_handle=t, keys=tf.constant(ks, kd),
                                                     values=tf.constant(vs, vd))]
                    else:
                        ops = [R.LookupTableRemoveV2(table_handle=t, keys=tf.constant(ks, kd))]
            with tf.control_dependencies(ops):
                k, v = R.LookupTableExportV2(table_handle=t, Tkeys=kd, Tvalues=vd)
                return k, v, R.LookupTableSizeV2(table_handle=t), probe
        fam.add_function(f"LookupTableExportV2/dense/{name}", fn, [tf.constant(0)])

    case("int64 collisions and a removal", tf.int64, tf.float32, -1, -2,
         [("insert", [1, 2, 9, 17], [1., 2., 9., 17.]), ("remove", [2, 5], None),
          ("insert", [25, 9], [25., -9.])])
    case("strings grow", tf.string, tf.int64, "", "d",
         [("insert", ["a", "bb", "ccc", "e"], [1, 2, 3, 4]),
          ("insert", ["\u00e9", "long key " * 5, "x", "y"], [5, 6, 7, 8]),
          ("remove", ["bb"], None)], buckets=4)
    case("negative int32 keys", tf.int32, tf.int32, 0, -2147483648,
         [("insert", [-1, 7, -9, 2147483647], [1, 2, 3, 4])])
    case("vector values", tf.int64, tf.float64, -1, -2,
         [("insert", [3, 11], [[1., 2.], [3., 4.]]), ("insert", [3], [[5., 6.]])],
         value_shape=[2])
    case("bool values, low load", tf.int64, tf.bool, 0, 1,
         [("insert", [2, 3, 4, 5, 6], [True, False, True, True, False])], buckets=4, load=0.5)
    case("many grows", tf.int64, tf.int64, -1, -2,
         [("insert", list(range(0, 300, 7)), list(range(43)))], buckets=4)
    case("empty", tf.string, tf.float32, "", "d", [])
    case("anonymous", tf.string, tf.double, "", "d",
         [("insert", ["q", "r"], [0.5, -0.0]), ("remove", ["q"], None),
          ("insert", ["q"], [2.5])], anonymous=True)
