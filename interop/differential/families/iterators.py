"""Datasets consumed inside functions: `reduce` of a window or of a dataset
built per element (ReduceDataset), `get_single_element`
(DatasetToSingleElement), `cardinality()` (DatasetCardinality), a
`for x in ds:` loop in a tf.function (autograph's ScanDataset and
ReduceDataset), `iter(ds)` with `next(it)` and `for x in iter(ds):`
(AnonymousIterator*, MakeIterator, IteratorGetNext*, optionals), tables
filled from a dataset (InitializeTableFromDataset), OptimizeDataset
wrappers, CompressElement round trips and WindowOp, with their edge cases
and errors."""

import numpy as np
import tensorflow as tf

from harness import Family, rename_op, set_input

D = tf.data.Dataset
I64 = tf.int64


def family():
    fam = Family("iterators")
    reduces(fam)
    single_elements(fam)
    cardinalities(fam)
    loops_and_iterators(fam)
    raw_iterators(fam)
    tables(fam)
    optimized(fam)
    compressed(fam)
    window_ops(fam)
    return fam


def reduces(fam):
    zero = tf.constant(0, I64)
    fam.add_dataset("window.reduce sum in a map", D.range(10).window(3).map(
        lambda w: w.reduce(zero, lambda s, x: s + x)))
    fam.add_dataset("window.reduce with drop_remainder, (count, sum, max) state",
                    D.range(1, 12).map(lambda i: tf.cast(i, tf.float32) * -0.5).window(
                        4, 3, 1, True).map(lambda w: w.reduce(
                            (tf.constant(0), tf.constant(0.0), tf.constant(-np.inf)),
                            lambda s, x: (s[0] + 1, s[1] + x, tf.maximum(s[2], x)))))
    fam.add_dataset("window.reduce of strings", D.from_tensor_slices(
        ["a", "", "ccc", "\u00e9\u00e8", "x" * 300]).window(2, 1, 1, False).map(
        lambda w: w.reduce(tf.constant(""), lambda s, x: tf.strings.join([s, x], "|"))))
    fam.add_dataset("window.reduce growing state (relaxed shape)", D.range(7).window(3).map(
        lambda w: w.reduce(tf.zeros([0], I64), lambda s, x: tf.concat([s, [x * x]], 0))))
    fam.add_dataset("window of tuples reduced", D.zip((D.range(6), D.range(6).map(
        lambda i: tf.cast(i, tf.float64) / 3))).window(4).map(
        lambda a, b: (a.reduce(zero, lambda s, x: s + x),
                      b.reduce(tf.constant(0.0, tf.float64), lambda s, x: s + x))))
    fam.add_dataset("reduce of a range built per element (empty ones give the state)",
                    D.range(5).map(lambda n: D.range(n).reduce(
                        tf.constant(100, I64), lambda s, x: s - x)))
    fam.add_dataset("reduce with a captured tensor", D.range(4).map(
        lambda n, k=tf.constant(7, I64): D.range(n, n + 3).reduce(
            zero, lambda s, x: s * k + x)))
    fam.add_dataset("reduce of a batched dataset (matrix state)", D.range(3).map(
        lambda n: D.range(12).map(lambda x: tf.cast(x + n, tf.float32)).batch(4).reduce(
            tf.zeros([4]), lambda s, x: s + tf.cast(tf.shape(x)[0], tf.float32) * x)))
    fam.add_dataset("reduce of a seeded shuffle built per element", D.range(6).map(
        lambda n: D.range(n).shuffle(3, seed=2).reduce(zero, lambda s, x: s * 7 + x)))
    fam.add_dataset("reduce overflowing int32", D.range(2).map(
        lambda n: D.from_tensor_slices(tf.constant([2**31 - 1, 1, 5], tf.int32)).reduce(
            tf.constant(0, tf.int32), lambda s, x: s + x)))
    fam.add_dataset("reduce with NaN and infinities", D.range(1).map(
        lambda n: D.from_tensor_slices(tf.constant([1.0, np.inf, -0.0, np.nan])).reduce(
            (tf.constant(0.0), tf.constant(np.inf)),
            lambda s, x: (s[0] + x, tf.minimum(s[1], x)))))
    fam.add_dataset("reduce over windows (dataset elements)", D.range(3).map(
        lambda n: D.range(n, n + 8).window(3).reduce(zero, lambda s, w: s * 100 + w.reduce(
            zero, lambda a, x: a + x))))
    fam.add_function("reduce in a tf.function", lambda n: D.range(n).reduce(
        tf.constant(0, I64), lambda s, x: s + x * x), [tf.constant(10, I64)])
    fam.add_function("reduce of an empty dataset in a tf.function", lambda n: D.range(n).reduce(
        (tf.constant(0, I64), tf.constant("")), lambda s, x: (s[0] + 1, tf.strings.join(
            [s[1], tf.strings.as_string(x)]))), [tf.constant(0, I64)])


def single_elements(fam):
    fam.add_dataset("get_single_element of from_tensors in a map", D.range(4).map(
        lambda i: D.from_tensors((i * 2, tf.strings.as_string(i))).get_single_element()))
    fam.add_dataset("get_single_element of window(1)", D.range(5).window(1).map(
        lambda w: w.get_single_element()))
    fam.add_dataset("get_single_element of a filtered range", D.range(6).map(
        lambda i: D.range(10).filter(lambda x: x == i + 2).get_single_element()))
    fam.add_function("get_single_element of a batch", lambda x: D.from_tensor_slices(x).batch(
        10).get_single_element(), [tf.constant([[1.5, -2.0], [np.nan, 0.0]])])
    fam.add_function("get_single_element of an empty dataset", lambda n: D.range(n).take(
        0).get_single_element(), [tf.constant(3, I64)], traced=True)
    fam.add_function("get_single_element of two elements", lambda n: D.range(n)
                     .get_single_element(), [tf.constant(2, I64)], traced=True)


def cardinalities(fam):
    fam.add_dataset("cardinality of datasets built per element", D.range(4).map(
        lambda n: (D.range(n).cardinality(), D.range(n).batch(3).cardinality(),
                   D.range(n).filter(lambda x: x > 0).cardinality(),
                   D.range(n).repeat().cardinality(), D.range(n).repeat(3).take(5)
                   .cardinality(), D.range(n).repeat().filter(lambda x: x >= 0)
                   .cardinality())))
    fam.add_dataset("filter of an infinite dataset, taken", D.range(3).repeat().filter(
        lambda x: x > 0).take(5))
    fam.add_dataset("ExperimentalDatasetCardinality (the op's older name)", D.range(4).map(
        lambda n: D.range(n).batch(3).cardinality()), edit=rename_op(
            "DatasetCardinality", "ExperimentalDatasetCardinality"))
    fam.add_dataset("window cardinality", D.range(7).window(3).map(lambda w: w.cardinality()))
    fam.add_function("cardinality in a tf.function", lambda n: (
        D.range(n).cardinality(), D.range(n).shard(3, 1).cardinality(),
        D.range(n).skip(4).cardinality()), [tf.constant(10, I64)])


def loops_and_iterators(fam):
    def loop_sum(n):
        s = tf.constant(0, I64)
        for x in D.range(n):
            s += x
        return s

    fam.add_function("for loop over a dataset (scan and reduce)", loop_sum,
                     [tf.constant(7, I64)])

    def loop_strings(x):
        out = tf.constant("")
        for s in D.from_tensor_slices(x):
            out = tf.strings.join([out, s], "-")
        return out

    def loop_windows(n):
        s = tf.constant(0, I64)
        for w in D.range(n).window(2):
            s = s * 10 + w.reduce(tf.constant(0, I64), lambda a, x: a + x)
        return s

    fam.add_function("for loop over windows", loop_windows, [tf.constant(7, I64)])
    fam.add_function("for loop over strings", loop_strings,
                     [tf.constant(["un", "", "tr\u00f6is"])])

    def two_next(n):
        it = iter(D.range(n).map(lambda x: x * 3))
        a = next(it)
        b = next(it)
        return a, b, a + b

    fam.add_function("iter and next", two_next, [tf.constant(5, I64)], traced=True)
    fam.add_function("next past the end", two_next, [tf.constant(1, I64)], traced=True)

    def next_tuple(x):
        it = iter(D.from_tensor_slices((x, tf.strings.as_string(x))).batch(2))
        first = next(it)
        second = next(it)
        return first[0], first[1], second[0], second[1]

    fam.add_function("next of batched tuples", next_tuple,
                     [tf.constant([1.5, -0.0, np.nan, 4.0, 9.0])], traced=True)

    def loop_iter(n):
        s = tf.constant(0, I64)
        c = tf.constant(0)
        for x in iter(D.range(n).filter(lambda x: x % 2 == 1)):
            s = s * 10 + x
            c += 1
        return s, c

    fam.add_function("for loop over iter(ds) (optionals)", loop_iter, [tf.constant(9, I64)],
                     traced=True)
    fam.add_function("for loop over iter(ds) of nothing", loop_iter, [tf.constant(0, I64)],
                     traced=True)

    def as_optional(n):
        it = iter(D.range(n).map(lambda x: (x, tf.strings.as_string(x))))
        a = it.get_next_as_optional()
        b = it.get_next_as_optional()
        return a.has_value(), b.has_value(), a.get_value()[1], b.get_value()[0]

    fam.add_function("get_next_as_optional", as_optional, [tf.constant(3, I64)], traced=True)
    fam.add_function("get_next_as_optional past the end", as_optional, [tf.constant(1, I64)],
                     traced=True)

    def optionals(x):
        o = tf.experimental.Optional.from_value((x, x * 2))
        e = tf.experimental.Optional.empty(tf.TensorSpec([], I64))
        return o.has_value(), o.get_value()[1], e.has_value()

    fam.add_function("Optional.from_value and empty", optionals, [tf.constant(-3, I64)],
                     traced=True)
    fam.add_function("Optional.empty get_value", lambda x: tf.experimental.Optional.empty(
        tf.TensorSpec([], I64)).get_value() + x, [tf.constant(1, I64)], traced=True)


def raw_iterators(fam):
    """The iterator ops as tf.raw_ops spell them (older versions, the
    synchronous read, an explicit delete)."""
    def read(version, sync):
        def fn(n):
            ds = D.range(n).map(lambda x: (x, tf.cast(x, tf.float32) / 4))
            types, shapes = [I64, tf.float32], [[], []]
            deleter = None
            if version == 1:
                h = tf.raw_ops.AnonymousIterator(output_types=types, output_shapes=shapes)
            elif version == 2:
                h, deleter = tf.raw_ops.AnonymousIteratorV2(output_types=types,
                                                           output_shapes=shapes)
            else:
                h = tf.raw_ops.AnonymousIteratorV3(output_types=types, output_shapes=shapes)
            tf.raw_ops.MakeIterator(dataset=ds._variant_tensor, iterator=h)
            get = tf.raw_ops.IteratorGetNextSync if sync else tf.raw_ops.IteratorGetNext
            a = get(iterator=h, output_types=types, output_shapes=shapes)
            b = get(iterator=h, output_types=types, output_shapes=shapes)
            if deleter is not None:
                tf.raw_ops.DeleteIterator(handle=h, deleter=deleter)
            return a[0], a[1], b[0], b[1]
        return fn

    for version in [1, 2, 3]:
        for sync in [False, True]:
            what = f"AnonymousIterator{'' if version == 1 else f'V{version}'}" + (
                " with IteratorGetNextSync" if sync else "")
            fam.add_function(what, read(version, sync), [tf.constant(4, I64)], traced=True)
            fam.add_function(what + " past the end", read(version, sync),
                             [tf.constant(1, I64)], traced=True)


def tables(fam):
    """Lookup tables filled from a dataset (InitializeTableFromDataset), as a
    pipeline's outer graph carries them (add_dataset_error's edits name the
    tables stably themselves)."""
    from families.lookup import stable_table_names
    fam.normalize_graph = stable_table_names
    DI = tf.data.experimental.DatasetInitializer

    words = D.zip((D.from_tensor_slices(["a", "b", "", "\u00e9t\u00e9"]), D.range(4).take(4)))
    table = tf.lookup.StaticHashTable(DI(words), -1)
    fam.add_dataset("table from a dataset of (string, int64)", D.from_tensor_slices(
        ["a", "zz", "", "\u00e9t\u00e9", "b"]).map(lambda w: (w, table.lookup(w))))
    halves = D.range(5).map(lambda i: (i * 3, tf.cast(i, tf.float32) / 2))
    table2 = tf.lookup.StaticHashTable(DI(halves), np.float32(np.nan))
    fam.add_dataset("table from a mapped dataset (int64 to float), size", D.range(16).map(
        lambda i: (table2.lookup(i), table2.size())))
    same = D.zip((D.from_tensor_slices([4, 4, 7]), D.from_tensor_slices([1.0, 1.0, -0.0])))
    table3 = tf.lookup.StaticHashTable(DI(same), -5.0)
    fam.add_dataset("table from a dataset repeating a pair", D.from_tensor_slices(
        tf.constant([4, 7, 5], tf.int32)).map(lambda k: table3.lookup(k)))

    def init_keys(value):
        def edit(graph):
            stable_table_names(graph)
            init = next(n for n in graph.node if n.op == "InitializeTableFromDataset")
            zip_node = next(n for n in graph.node if n.name == init.input[1])
            slices = next(n for n in graph.node if n.name == zip_node.input[0])
            const = next(n for n in graph.node if n.name == slices.input[0])
            const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value, tf.string))
        return edit

    pipeline = D.from_tensor_slices(["a", "b"]).map(lambda w: table.lookup(w))
    fam.add_dataset_error("table from a dataset with a key given two values", pipeline,
                          init_keys(["a", "b", "a", "c"]))
    fam.add_dataset_error("table from an empty dataset", pipeline, lambda g: (
        stable_table_names(g), set_input(g, "TakeDataset", 1, 0)))


def insert_optimize(v2, names):
    """An edit putting an OptimizeDataset (or V2) node asking for the static
    rewrites `names` before the graph's result (tf.data applies the rewrites
    itself when iterating, so its serialized graphs never hold one)."""
    def edit(graph):
        ret = next(n for n in graph.node if n.op == "_Retval")
        src = ret.input[0]
        src_node = next(n for n in graph.node if n.name == src.split(":")[0])
        consts = []
        for k, values in enumerate([names, [], []] if v2 else [names]):
            c = graph.node.add()
            c.name, c.op = f"optimizations_{k}", "Const"
            c.attr["dtype"].type = tf.string.as_datatype_enum
            c.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(values, tf.string,
                                                                 shape=[len(values)]))
            consts.append(c.name)
        o = graph.node.add()
        o.name, o.op = "optimize", "OptimizeDatasetV2" if v2 else "OptimizeDataset"
        o.input.extend([src] + consts)
        for k in ("output_types", "output_shapes"):
            o.attr[k].CopyFrom(src_node.attr[k])
        o.attr["optimization_configs"].list.SetInParent()
        ret.input[0] = o.name
    return edit


def optimized(fam):
    ds = D.range(10).map(lambda x: x * 2).map(lambda y: y + 1).filter(
        lambda z: z % 3 == 0).batch(2)
    rewrites = ["map_fusion", "filter_fusion", "noop_elimination", "map_and_batch_fusion"]
    for v2 in [False, True]:
        op = "OptimizeDatasetV2" if v2 else "OptimizeDataset"
        fam.add_dataset(f"{op} with fusions", ds, edit=insert_optimize(v2, rewrites))
        fam.add_dataset(f"{op} naming an unknown rewrite", D.from_tensor_slices(
            ["a", "b"]).map(lambda s: tf.strings.join([s, s])),
            edit=insert_optimize(v2, ["no_such_rewrite"]))


def compressed(fam):
    """CompressElement and UncompressElement round trips in a function (the
    compressed variant itself never leaves TensorFlow's kernels)."""
    def round_trip(*xs):
        c = tf.raw_ops.CompressElement(components=list(xs))
        return tuple(tf.raw_ops.UncompressElement(
            compressed=c, output_types=[x.dtype for x in xs],
            output_shapes=[x.shape for x in xs]))

    fam.add_function("CompressElement round trip of numbers", round_trip, [
        tf.constant([[1.5, -0.0], [np.nan, np.inf]]), tf.constant(7, I64),
        tf.constant([True, False, True]), tf.constant(np.arange(300, dtype=np.int32) % 7)],
        traced=True)
    fam.add_function("CompressElement round trip of strings", round_trip, [
        tf.constant(["", "a" * 1000, "\u00e9t\u00e9", "\x00\xff"]), tf.constant("solo")],
        traced=True)
    fam.add_function("CompressElement round trip of empty tensors", round_trip, [
        tf.zeros([0, 3], tf.float64), tf.constant([], tf.string), tf.zeros([2, 0], tf.uint8)],
        traced=True)


def window_ops(fam):
    """WindowOp: a dataset of the elements given as tensors, read back by
    reduce and batch."""
    def pairs(a, b):
        v = tf.raw_ops.WindowOp(inputs=[a, b, a * 2, b, a * 3], output_types=[a.dtype, b.dtype],
                                output_shapes=[a.shape, b.shape])
        ds = tf.data.experimental.from_variant(v, (tf.TensorSpec(a.shape, a.dtype),
                                                   tf.TensorSpec(b.shape, b.dtype)))
        return ds.reduce((tf.zeros_like(a), tf.constant("")), lambda s, x: (
            s[0] + x[0], tf.strings.join([s[1], x[1]])))

    fam.add_function("WindowOp of (float, string) pairs, a partial one dropped", pairs,
                     [tf.constant([1.5, -2.0]), tf.constant("ab")])

    def rows(x):
        v = tf.raw_ops.WindowOp(inputs=[x, x + 1, x * x], output_types=[x.dtype],
                                output_shapes=[x.shape])
        ds = tf.data.experimental.from_variant(v, tf.TensorSpec(x.shape, x.dtype))
        return ds.batch(3).get_single_element(), ds.cardinality()

    fam.add_function("WindowOp of rows batched", rows, [tf.constant([[1, 2], [3, 4]])])
