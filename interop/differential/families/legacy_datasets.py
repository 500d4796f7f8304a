"""Dataset ops TensorFlow 2.21's Python no longer writes (older versions and
names), and the resource ops a serialized pipeline only names: BatchDataset,
ShuffleDataset, ShuffleDatasetV2, ShuffleAndRepeatDatasetV2, CacheDataset,
ExperimentalRandomDataset, ParallelMapDataset, ParallelInterleaveDatasetV2/V3,
FixedLengthRecordDataset, TFRecordDatasetV2; the wrappers ModelDataset,
FinalizeDataset, (Experimental)MaxIntraOpParallelismDataset,
(Experimental)PrivateThreadPoolDataset, AssertNextDataset, AssertPrevDataset;
the handles AnonymousSeedGenerator, AnonymousMemoryCache, DummyMemoryCache,
(Experimental)ThreadPoolHandle and the StatsAggregatorHandles; MatchingFiles
in a pipeline, and ParseSingleExample.

Each pipeline is built with raw ops (TensorFlow serializes the op under its
own name) or written by TensorFlow's Python and edited to the older op (its
registered inputs and attributes); TensorFlow runs the edited graph itself.
A handle TensorFlow serializes as a resource `Const` is replaced by the op
making it, so that the graph holds the op.

The files read are the readers family's, under crates/tfdata-graph/tests/data/readers
(paths relative to the crate, where the Rust test runs)."""

import numpy as np
import tensorflow as tf
from tensorflow.python.data.experimental.ops import testing
from tensorflow.python.framework import op_def_registry

from families.datasets_more import raw, retarget, unoptimized
from harness import Family, in_crate, rename_op, set_input

D = tf.data.Dataset
R = tf.raw_ops
I64 = tf.int64
READERS = "tests/data/readers"


def family():
    with in_crate():
        fam = Family("legacy_datasets")
        batches(fam)
        shuffles(fam)
        seed_generators(fam)
        caches(fam)
        randoms(fam)
        parallel_maps(fam)
        interleaves(fam)
        wrappers(fam)
        handles(fam)
        files(fam)
        parse_single(fam)
        # Last: a parallel map's function runs a racy number of times, and
        # each run may move TensorFlow's global dataset-name counter.
        tf1_maps(fam)
        return fam


# --- graph edits -------------------------------------------------------------

def set_attr(node, key, value):
    a = node.attr[key]
    if isinstance(value, bool):
        a.b = value
    elif isinstance(value, int):
        a.i = value
    elif isinstance(value, str):
        a.s = value.encode()
    elif isinstance(value, bytes):
        a.s = value
    else:
        raise TypeError(value)


def add_node(graph, name, op, inputs=(), **attrs):
    n = graph.node.add()
    n.name = name
    n.op = op
    n.input.extend(inputs)
    for k, v in attrs.items():
        set_attr(n, k, v)
    return n


def add_const(graph, name, value, dtype=None):
    t = tf.make_tensor_proto(value, dtype)
    n = add_node(graph, name, "Const")
    n.attr["dtype"].type = t.dtype
    n.attr["value"].tensor.CopyFrom(t)
    return n.name


def only(graph, op):
    hits = [n for n in graph.node if n.op == op]
    assert len(hits) == 1, (op, [n.op for n in graph.node])
    return hits[0]


def resource_const(graph, node, index):
    """The resource `Const` feeding input `index` of `node`."""
    name = node.input[index].split(":")[0]
    const = next(n for n in graph.node if n.name == name)
    assert const.op == "Const" and const.attr["dtype"].type == tf.resource.as_datatype_enum, const
    return const


def feed_handle(op, index, maker, inputs=(), **attrs):
    """An edit: input `index` of the one `op` node (a resource handle
    TensorFlow serialized as a `Const`) made by a `maker` node instead, fed
    `inputs` (values, each a new `Const`)."""
    def edit(graph):
        node = only(graph, op)
        const = resource_const(graph, node, index)
        names = [add_const(graph, f"{maker}/in{k}", v) for k, v in enumerate(inputs)]
        made = add_node(graph, f"{maker}/made", maker, names, **attrs)
        node.input[index] = made.name
        graph.node.remove(const)
    return edit


def feed_handle_all(op, index, maker, **attrs):
    """`feed_handle` for every `op` node, each fed its own `maker` node."""
    def edit(graph):
        nodes = [n for n in graph.node if n.op == op]
        assert nodes, op
        for k, node in enumerate(nodes):
            const = resource_const(graph, node, index)
            made = add_node(graph, f"{maker}/made{k}", maker, **attrs)
            node.input[index] = made.name
            if not any(const.name == i.split(":")[0] for n in graph.node for i in n.input):
                graph.node.remove(const)
    return edit


def wrap(op, *inputs, **attrs):
    """An edit: the pipeline's result passed through a new `op` node
    (inputs after the dataset: values, each a new `Const`), with its
    input's output types and shapes."""
    declared = {a.name for a in op_def_registry.get(op).attr}

    def edit(graph):
        ret = only(graph, "_Retval")
        top = next(n for n in graph.node if n.name == ret.input[0].split(":")[0])
        names = [add_const(graph, f"{op}/in{k}", v) for k, v in enumerate(inputs)]
        n = add_node(graph, f"{op}/wrapped", op, [ret.input[0]] + names, **attrs)
        for k in ("output_types", "output_shapes"):
            if k in declared:
                n.attr[k].CopyFrom(top.attr[k])
        ret.input[0] = n.name
    return edit


def elements_or_error(fam, case_id, ds, edit):
    """A pipeline case, or its error case where TensorFlow fails it."""
    try:
        fam.add_dataset(case_id, ds, edit=edit)
    except tf.errors.OpError:
        fam.ids.discard(case_id)
        fam.add_dataset_error(case_id, ds, edit)


def chain(*edits):
    def edit(graph):
        for e in edits:
            e(graph)
    return edit


def sorted_all(ds):
    """All elements as one sorted vector: a shuffle with fresh seeds is
    checked to be a permutation of its input."""
    return ds.batch(1000).map(lambda b: tf.sort(b))


# --- cases -------------------------------------------------------------------

def batch_v1(graph):
    """Every BatchDatasetV2 (drop_remainder false) as BatchDataset: without
    `drop_remainder` and `parallel_copy` (TensorFlow cannot serialize V1)."""
    hits = [n for n in graph.node if n.op == "BatchDatasetV2"]
    assert hits
    for node in hits:
        node.op = "BatchDataset"
        del node.attr["parallel_copy"]
        drop = node.input.pop()
        const = next(n for n in graph.node if n.name == drop.split(":")[0])
        assert not const.attr["value"].tensor.bool_val[0]
        graph.node.remove(const)


def batches(fam):
    pairs = D.range(7).map(lambda x: (tf.cast(x, tf.float32) / 3, tf.strings.as_string(x)))
    for name, ds, size in [
            ("range 10 by 3 (a short last batch)", D.range(10), 3),
            ("range 6 by 2", D.range(6), 2),
            ("by 1", D.range(3), 1),
            ("larger than the input", D.range(5), 20),
            ("of an empty input", D.range(0), 4),
            ("of pairs", pairs, 4),
            ("of matrices", D.range(5).map(lambda x: tf.fill([2, 3], x)), 2),
            ("of strings", D.from_tensor_slices(["", "\u00e9", "x" * 300]), 2),
            ("of int64 extremes", D.from_tensor_slices(
                tf.constant([-2**63, 2**63 - 1, 0], I64)), 2)]:
        fam.add_dataset(f"BatchDataset {name}", unoptimized(ds.batch(size)), edit=batch_v1)
    fam.add_dataset("BatchDataset of batches", unoptimized(D.range(12).batch(2).batch(4)),
                    edit=batch_v1)
    fam.add_dataset("BatchDataset of a repeat", unoptimized(D.range(3).repeat(3).batch(4)),
                    edit=batch_v1)
    for bad in [0, -1, -5]:
        fam.add_dataset_error(f"BatchDataset size {bad}", unoptimized(D.range(5).batch(2)),
                              lambda g, b=bad: (batch_v1(g), set_input(g, "BatchDataset", 1, b)))
    fam.add_dataset_error("BatchDataset of rows of different lengths", unoptimized(
        D.range(4).map(lambda x: tf.range(x)).batch(2)), batch_v1)


def shuffle_v1(ds, size, seed, seed2, reshuffle=True):
    return raw(R.ShuffleDataset, ds.element_spec, input_dataset=ds._variant_tensor,
               buffer_size=size, seed=seed, seed2=seed2, reshuffle_each_iteration=reshuffle)


def shuffles(fam):
    for size, seed, seed2 in [(4, 1, 2), (1, 3, 4), (3, 0, 5), (7, 9, 0), (100, 5, 6),
                              (2, -3, 2**40), (10, 2**62, -1)]:
        fam.add_dataset(f"ShuffleDataset buffer {size} seeds {seed},{seed2} no reshuffle",
                        shuffle_v1(D.range(20), size, seed, seed2, False))
    fam.add_dataset("ShuffleDataset reshuffled each epoch", shuffle_v1(
        D.range(8), 5, 11, 12, True).repeat(3), iterators=1)
    fam.add_dataset("ShuffleDataset fixed over epochs", shuffle_v1(
        D.range(8), 5, 11, 12, False).repeat(3))
    fam.add_dataset("ShuffleDataset repeated input", shuffle_v1(
        D.range(5).repeat(3), 4, 1, 1, False))
    fam.add_dataset("ShuffleDataset of pairs", shuffle_v1(D.range(9).map(
        lambda x: (x, tf.strings.as_string(x * x))), 3, 8, 9, False))
    fam.add_dataset("ShuffleDataset of an empty input", shuffle_v1(D.range(0), 3, 1, 2, False))
    fam.add_dataset("ShuffleDataset fresh seeds is a permutation", sorted_all(
        shuffle_v1(D.range(30), 10, 0, 0)))
    # A buffer of -2 (UNKNOWN_CARDINALITY) holds the whole input.
    for n, seed, seed2 in [(20, 1, 2), (1, 3, 4), (0, 5, 6), (50, 2**40, -7)]:
        fam.add_dataset(f"ShuffleDataset buffer -2 of range({n}) seeds {seed},{seed2}",
                        shuffle_v1(D.range(n), -2, seed, seed2, False))
    fam.add_dataset("ShuffleDataset buffer -2 of a filtered input", shuffle_v1(
        D.range(30).filter(lambda x: x % 3 > 0), -2, 8, 9, False))
    fam.add_dataset("ShuffleDataset buffer -2 reshuffled each epoch", shuffle_v1(
        D.range(8), -2, 11, 12, True).repeat(3), iterators=1)
    fam.add_dataset("ShuffleDataset buffer -2 fixed over epochs", shuffle_v1(
        D.range(8), -2, 11, 12, False).repeat(2))
    for bad in [0, -3]:
        fam.add_dataset_error(f"ShuffleDataset buffer {bad}", shuffle_v1(D.range(5), 2, 1, 2),
                              lambda g, b=bad: set_input(g, "ShuffleDataset", 1, b))


def generator(seed, seed2, reshuffle):
    return [tf.constant(seed, I64), tf.constant(seed2, I64), tf.constant(reshuffle)]


def seed_generators(fam):
    """Shuffles and random datasets seeded by an AnonymousSeedGenerator: its
    seeds are the ones used (a shuffle's own `seed`, `seed2` are not)."""
    dummy = R.DummySeedGenerator()
    for seed, seed2, reshuffle, size in [(1, 2, False, 4), (7, 0, False, 3), (-5, 2**40, False, 9),
                                         (3, 4, True, 5)]:
        ds = D.range(12)
        v2 = raw(R.ShuffleDatasetV2, ds.element_spec, input_dataset=ds._variant_tensor,
                 buffer_size=size, seed_generator=dummy)
        fam.add_dataset(f"ShuffleDatasetV2 from AnonymousSeedGenerator {seed},{seed2} "
                        f"reshuffle={reshuffle}, buffer {size}", v2.repeat(2),
                        edit=feed_handle("ShuffleDatasetV2", 2, "AnonymousSeedGenerator",
                                         generator(seed, seed2, reshuffle)),
                        iterators=1 if reshuffle else 2)
        v3 = raw(R.ShuffleDatasetV3, ds.element_spec, input_dataset=ds._variant_tensor,
                 buffer_size=size, seed=100, seed2=200, seed_generator=dummy,
                 reshuffle_each_iteration=reshuffle)
        fam.add_dataset(f"ShuffleDatasetV3 from AnonymousSeedGenerator {seed},{seed2} "
                        f"reshuffle={reshuffle}, buffer {size}", v3.repeat(2),
                        edit=feed_handle("ShuffleDatasetV3", 4, "AnonymousSeedGenerator",
                                         generator(seed, seed2, reshuffle)),
                        iterators=1 if reshuffle else 2)
    ds = D.range(12)
    fam.add_dataset("ShuffleDatasetV2 from AnonymousSeedGenerator 0,0 is a permutation",
                    sorted_all(raw(R.ShuffleDatasetV2, ds.element_spec,
                                   input_dataset=ds._variant_tensor, buffer_size=5,
                                   seed_generator=dummy)),
                    edit=feed_handle("ShuffleDatasetV2", 2, "AnonymousSeedGenerator",
                                     generator(0, 0, True)))
    for seed, seed2, count, reshuffle in [(1, 2, 3, False), (5, 6, 2, True), (9, 9, 1, True),
                                          (4, 0, 5, False)]:
        ds = D.range(6)
        sr = raw(R.ShuffleAndRepeatDatasetV2, ds.element_spec, input_dataset=ds._variant_tensor,
                 buffer_size=4, seed=seed, seed2=seed2, count=count, seed_generator=dummy,
                 reshuffle_each_iteration=reshuffle)
        fam.add_dataset(f"ShuffleAndRepeatDatasetV2 {seed},{seed2} count {count} "
                        f"reshuffle={reshuffle}", sr, iterators=1 if reshuffle else 2)
    ds = D.range(5)
    fam.add_dataset("ShuffleAndRepeatDatasetV2 forever, taken", raw(
        R.ShuffleAndRepeatDatasetV2, ds.element_spec, input_dataset=ds._variant_tensor,
        buffer_size=3, seed=1, seed2=7, count=-1, seed_generator=dummy,
        reshuffle_each_iteration=True).take(17), iterators=1)
    sr = raw(R.ShuffleAndRepeatDatasetV2, ds.element_spec, input_dataset=ds._variant_tensor,
             buffer_size=3, seed=1, seed2=7, count=2, seed_generator=dummy)
    for index, what, bad in [(4, "count", 0), (4, "count", -2), (1, "buffer_size", 0)]:
        fam.add_dataset_error(
            f"ShuffleAndRepeatDatasetV2 {what} {bad}", sr,
            lambda g, i=index, b=bad: set_input(g, "ShuffleAndRepeatDatasetV2", i, b))
    fam.add_dataset("ShuffleAndRepeatDatasetV2 from AnonymousSeedGenerator", raw(
        R.ShuffleAndRepeatDatasetV2, ds.element_spec, input_dataset=ds._variant_tensor,
        buffer_size=3, seed=1, seed2=7, count=2, seed_generator=dummy,
        reshuffle_each_iteration=False), edit=feed_handle(
            "ShuffleAndRepeatDatasetV2", 5, "AnonymousSeedGenerator", generator(21, 22, False)))


def caches(fam):
    # A reshuffling shuffle repeated gives each epoch its own order; cached,
    # every epoch replays the first.
    # (ShuffleDataset: its seeds are its own, where ShuffleDatasetV3 shares
    # a seed generator resource with the Python dataset it was built from.)
    shuffled = shuffle_v1(D.range(8), 8, 4, 5, True)
    spec = shuffled.element_spec
    fam.add_dataset("CacheDataset in memory replays the first epoch", raw(
        R.CacheDataset, spec, input_dataset=shuffled._variant_tensor, filename="").repeat(3),
        iterators=1)
    strings = D.from_tensor_slices(["a", "", "\u00e9\u00e8", "x" * 100])
    fam.add_dataset("CacheDataset of strings, twice", raw(
        R.CacheDataset, strings.element_spec, input_dataset=strings._variant_tensor,
        filename="").repeat(2))
    part = raw(R.CacheDataset, spec, input_dataset=shuffled._variant_tensor, filename="")
    fam.add_dataset("CacheDataset partly read, then whole", part.take(3).concatenate(part),
                    iterators=1)
    fam.add_dataset("CacheDataset of an empty input", raw(
        R.CacheDataset, spec, input_dataset=D.range(0)._variant_tensor, filename="").repeat(2))
    # CacheDatasetV2 with the memory cache its node makes (AnonymousMemoryCache)
    # or a dummy handle (DummyMemoryCache: the dataset keeps its own cache).
    for maker in ["AnonymousMemoryCache", "DummyMemoryCache"]:
        for what, ds in [
                ("a reshuffling input, three epochs", shuffled.cache().repeat(3)),
                ("strings, twice", strings.cache().repeat(2)),
                ("partly read, then whole", shuffled.cache().take(3).concatenate(
                    shuffled.cache())),
                ("an empty input", D.range(0).cache().repeat(2))]:
            fam.add_dataset(f"CacheDatasetV2 with {maker}, {what}", ds, iterators=1,
                            edit=feed_handle_all("CacheDatasetV2", 2, maker))


def random_v2(seed, seed2):
    return raw(R.RandomDatasetV2, tf.TensorSpec([], I64), seed=seed, seed2=seed2,
               seed_generator=R.DummySeedGenerator())


def randoms(fam):
    # Written as RandomDatasetV2 without its seed generator (TensorFlow
    # cannot serialize the older op).
    older = retarget("RandomDatasetV2", "ExperimentalRandomDataset", drop_last=True)
    for seed, seed2 in [(1, 2), (0, 5), (7, 0), (-1, 2**40), (2**62, -2**63)]:
        fam.add_dataset(f"ExperimentalRandomDataset {seed},{seed2}",
                        unoptimized(random_v2(seed, seed2).take(6)), edit=older)
    fam.add_dataset("ExperimentalRandomDataset repeated restarts",
                    unoptimized(random_v2(3, 4).take(3).repeat(2)),
                    edit=older)
    fam.add_dataset("RandomDatasetV2 from AnonymousSeedGenerator", random_v2(3, 4).take(5),
                    edit=feed_handle("RandomDatasetV2", 2, "AnonymousSeedGenerator",
                                     generator(8, 9, False)))


def parallel_map_v1(calls, sloppy=False, captures=0):
    """ParallelMapDatasetV2 as ParallelMapDataset: `num_parallel_calls` an
    int32, `sloppy` for `deterministic`."""
    def edit(graph):
        retarget("ParallelMapDatasetV2", "ParallelMapDataset",
                 [(1 + captures, "num_parallel_calls", np.int32(calls))], drop_last=True)(graph)
        set_attr(only(graph, "ParallelMapDataset"), "sloppy", sloppy)
    return edit


def parallel_maps(fam):
    ds = D.range(9)
    for calls in [1, 3, -1]:
        fam.add_dataset(f"ParallelMapDataset {calls} calls", unoptimized(
            ds.map(lambda x: x * x - 3, num_parallel_calls=2)), edit=parallel_map_v1(calls))
    fam.add_dataset("ParallelMapDataset with a capture", unoptimized(ds.map(
        lambda x, k=tf.constant(5, I64): (x * k, tf.strings.as_string(x)),
        num_parallel_calls=2)), edit=parallel_map_v1(2, captures=1))
    fam.add_dataset("ParallelMapDataset sloppy, sorted", sorted_all(unoptimized(ds.map(
        lambda x: x + 1, num_parallel_calls=4))), edit=parallel_map_v1(4, sloppy=True))
    for bad in [0, -2]:
        fam.add_dataset_error(f"ParallelMapDataset {bad} calls", unoptimized(
            ds.map(lambda x: x + 1, num_parallel_calls=2)), parallel_map_v1(bad))


def interleave_old(new, deterministic=None, sloppy=None):
    """ParallelInterleaveDatasetV4 as V3 or V2: without
    `buffer_output_elements` and `prefetch_input_elements`."""
    def edit(graph):
        retarget("ParallelInterleaveDatasetV4", new)(graph)
        node = only(graph, new)
        del node.input[-3:-1]
        if deterministic is not None:
            set_attr(node, "deterministic", deterministic)
        if sloppy is not None:
            set_attr(node, "sloppy", sloppy)
    return edit


def interleaves(fam):
    def inner(x):
        return D.range(x).map(lambda y: y + 10 * x)
    for cycle, block in [(2, 1), (3, 2), (1, 3), (5, 1)]:
        ds = unoptimized(D.range(1, 6).interleave(
            inner, cycle_length=cycle, block_length=block, num_parallel_calls=min(cycle, 2),
            deterministic=True))
        fam.add_dataset(f"ParallelInterleaveDatasetV3 cycle {cycle} block {block}", ds,
                        edit=interleave_old("ParallelInterleaveDatasetV3", "true"))
        fam.add_dataset(f"ParallelInterleaveDatasetV2 cycle {cycle} block {block}", ds,
                        edit=interleave_old("ParallelInterleaveDatasetV2", sloppy=False))
    ds = unoptimized(D.range(1, 4).interleave(
        lambda x, k=tf.constant(3, I64): D.from_tensors(x * k).repeat(x), cycle_length=2,
        num_parallel_calls=2))
    fam.add_dataset("ParallelInterleaveDatasetV3 with a capture, default determinism", ds,
                    edit=interleave_old("ParallelInterleaveDatasetV3", "default"))
    ds = unoptimized(D.range(1, 6).interleave(inner, cycle_length=3, num_parallel_calls=3))
    fam.add_dataset("ParallelInterleaveDatasetV2 sloppy, sorted", sorted_all(ds),
                    edit=interleave_old("ParallelInterleaveDatasetV2", sloppy=True))
    fam.add_dataset("ParallelInterleaveDatasetV3 not deterministic, sorted", sorted_all(ds),
                    edit=interleave_old("ParallelInterleaveDatasetV3", "false"))
    fam.add_dataset_error("ParallelInterleaveDatasetV3 cycle 0", unoptimized(D.range(3).interleave(
        inner, cycle_length=2, num_parallel_calls=2)), chain(
            interleave_old("ParallelInterleaveDatasetV3"),
            lambda g: set_input(g, "ParallelInterleaveDatasetV3", 1, 0)))


def wrappers(fam):
    ds = D.range(6).map(lambda x: (x * x, tf.strings.as_string(x)))
    cases = [
        ("ModelDataset", wrap("ModelDataset")),
        ("ModelDataset with budgets", wrap("ModelDataset", algorithm=1, cpu_budget=2,
                                           ram_budget=1 << 20)),
        ("FinalizeDataset", wrap("FinalizeDataset")),
        ("FinalizeDataset has_captured_ref", wrap("FinalizeDataset", has_captured_ref=True)),
        ("MaxIntraOpParallelismDataset 1", wrap("MaxIntraOpParallelismDataset", np.int64(1))),
        ("MaxIntraOpParallelismDataset 0", wrap("MaxIntraOpParallelismDataset", np.int64(0))),
        ("ExperimentalMaxIntraOpParallelismDataset 4",
         wrap("ExperimentalMaxIntraOpParallelismDataset", np.int64(4))),
        ("PrivateThreadPoolDataset 2", wrap("PrivateThreadPoolDataset", np.int64(2))),
        ("PrivateThreadPoolDataset 0", wrap("PrivateThreadPoolDataset", np.int64(0))),
        ("ExperimentalPrivateThreadPoolDataset 1",
         wrap("ExperimentalPrivateThreadPoolDataset", np.int64(1))),
    ]
    for name, edit in cases:
        fam.add_dataset(name, ds, edit=edit)
    fam.add_dataset("FinalizeDataset of batched strings", D.from_tensor_slices(
        ["a", "", "\u00e9"]).batch(2), edit=wrap("FinalizeDataset"))
    fam.add_dataset("ModelDataset over PrivateThreadPoolDataset", D.range(4).batch(3),
                    edit=chain(wrap("PrivateThreadPoolDataset", np.int64(3)),
                               wrap("ModelDataset")))
    for op, bad in [("MaxIntraOpParallelismDataset", -1),
                    ("ExperimentalMaxIntraOpParallelismDataset", -3),
                    ("PrivateThreadPoolDataset", -1),
                    ("ExperimentalPrivateThreadPoolDataset", -2)]:
        fam.add_dataset_error(f"{op} {bad}", ds, wrap(op, np.int64(bad)))
    # The assertions: which transformations come before (Next: after) the
    # op in the pipeline TensorFlow runs.
    mapped = D.range(5).map(lambda x: x + 1)
    # Python writes the older name: renamed to AssertNextDataset (the same
    # signature).
    to_next = rename_op("ExperimentalAssertNextDataset", "AssertNextDataset")
    for names in [["ParallelMapV2"], ["ParallelMap"]]:
        fam.add_dataset(f"AssertNextDataset {names}", mapped.apply(
            testing.assert_next(names)).map(lambda x: x * 2), edit=to_next)
    for names in [[("MapDataset", {})], [("MapDataset", {"preserve_cardinality": True})],
                  [("MapDataset", {}), ("RangeDataset", {})],
                  [("MapDataset", {"use_inter_op_parallelism": True}), ("RangeDataset", {})]]:
        fam.add_dataset(f"AssertPrevDataset {names}", unoptimized(mapped.apply(
            testing.assert_prev(names))))
    for names in [[("BatchDataset", {})], [("MapDataset", {}), ("BatchDataset", {})],
                  [("MapDataset", {"preserve_cardinality": False})],
                  [("MapDataset", {"deterministic": "true"})],
                  [("MapDataset", {"no_such_attr": 1})],
                  [("MapDataset", {}), ("RangeDataset", {}), ("RangeDataset", {})]]:
        fam.add_dataset_error(f"AssertPrevDataset {names} fails", unoptimized(mapped.apply(
            testing.assert_prev(names))), lambda g: None)
    for names in [["Batch"], ["ParallelMapV2", "Map"]]:
        fam.add_dataset_error(f"AssertNextDataset {names} fails", mapped.apply(
            testing.assert_next(names)).map(lambda x: x * 2), to_next)
    # TensorFlow checks the iterators its default rewrites make: a stateless
    # map becomes ParallelMapV2, a prefetch is injected unless the pipeline
    # ends asynchronously, the root is Root.
    stateful = lambda x: x + tf.cast(tf.random.uniform([], 0, 1), I64)  # noqa: E731
    after = {
        "stateless map": lambda d: d.map(lambda x: x * 2),
        "stateful map": lambda d: d.map(stateful),
        "nothing": lambda d: d,
        "batch": lambda d: d.batch(2),
        "filter": lambda d: d.filter(lambda x: x > 2),
        "prefetch": lambda d: d.prefetch(1),
        "parallel map": lambda d: d.map(lambda x: x - 1, num_parallel_calls=2),
        "two maps": lambda d: d.map(lambda x: x * 2).map(lambda x: x + 1),
        "filter, map": lambda d: d.filter(lambda x: x > 2).map(lambda x: x * 2),
        "map with a capture": lambda d: d.map(lambda x: x + tf.constant(0, I64)),
        "map forwarding one of two": lambda d: d.map(lambda x: (x, x * 2)),
    }
    for what, names, fails in [
            ("stateful map", ["Map", "Prefetch", "Root"], False),
            ("stateful map", ["Map", "Root"], True),
            ("stateful map", ["ParallelMapV2"], True),
            ("nothing", ["Prefetch", "Root"], False),
            ("nothing", ["Prefetch", "Root", "Range"], True),
            ("nothing", ["Range"], True),
            ("batch", ["Batch", "Prefetch"], False),
            ("batch", ["BatchV2", "Root"], True),
            ("filter", ["Filter", "Prefetch", "Root"], False),
            ("prefetch", ["Prefetch", "Root"], False),
            ("prefetch", ["Prefetch", "Prefetch"], True),
            ("parallel map", ["ParallelMap", "Root"], False),
            ("two maps", ["ParallelMapV2", "ParallelMapV2", "Root"], False),
            ("two maps", ["ParallelMapV2", "Map"], True),
            ("filter, map", ["Filter", "ParallelMapV2", "Root"], False),
            ("map with a capture", ["ParallelMapV2", "Root"], False),
            ("map forwarding one of two", ["ParallelMapV2", "Root"], False),
            ("map forwarding one of two", ["Map"], True),
            ("stateless map", [], False),
            ("stateless map", ["ParallelMapV2", "Root", "Iterator"], True),
            ("stateless map", ["ParallelMapV"], True),
            ("stateless map", ["ParallelMapV2V2"], True)]:
        ds = after[what](D.range(5).apply(testing.assert_next(names)))
        cid = f"AssertNextDataset {names} before {what}"
        if fails:
            fam.add_dataset_error(cid + " fails", ds, to_next)
        else:
            fam.add_dataset(cid, ds, edit=to_next)
    fam.add_dataset("ExperimentalAssertNextDataset ['ParallelMapV2', 'Root']", D.range(3).apply(
        testing.assert_next(["ParallelMapV2", "Root"])).map(lambda x: x * 3))


def ends_at_three(x):
    """x itself for x < 3; from 3 on an OutOfRange error ("End of sequence",
    the next element of an empty range's iterator), the error a TensorFlow 1
    map function raises to end its dataset."""
    rest = D.range(x, 3)
    handle = R.AnonymousIteratorV3(output_types=[I64], output_shapes=[[]])
    made = R.MakeIterator(dataset=rest._variant_tensor, iterator=handle)
    with tf.control_dependencies([made]):
        return R.IteratorGetNext(iterator=handle, output_types=[I64], output_shapes=[[]])[0]


def without_preserve_cardinality(graph):
    """The MapDataset node without its `preserve_cardinality` attribute: the
    op's registered default (false) applies."""
    for n in graph.node:
        if n.op in ("MapDataset", "ParallelMapDatasetV2"):
            del n.attr["preserve_cardinality"]


def scan_with_preserve_cardinality(value):
    """The ScanDataset node with `preserve_cardinality` set to `value`
    (TensorFlow 2's `scan` always sets it true)."""
    def edit(graph):
        for n in graph.node:
            if n.op == "ScanDataset":
                n.attr["preserve_cardinality"].b = value
    return edit


def scan_ends_at_three(state, x):
    """A running sum whose output ends the dataset at x = 3 (see `ends_at_three`)."""
    return state + x, state + ends_at_three(x)


def tf1_maps(fam):
    """Maps that do not preserve cardinality (TensorFlow 1's, or a node
    without the attribute): the cardinality is unknown, and the function's
    OutOfRange ends the dataset quietly; a TensorFlow 2 map fails instead."""
    # The eager cases first: iterating the graph-mode ones moves TensorFlow's
    # global dataset-name counter by a racy amount (see `family`).
    fam.add_dataset("MapDataset without preserve_cardinality", D.range(5).map(
        lambda x: x * 2), edit=without_preserve_cardinality)
    fam.add_dataset("MapDataset without preserve_cardinality, ended by OutOfRange",
                    D.range(6).map(ends_at_three), edit=without_preserve_cardinality)
    scan = D.range(6).scan(tf.constant(0, I64), scan_ends_at_three)
    fam.add_dataset("ScanDataset without preserve_cardinality, ended by OutOfRange", scan,
                    edit=scan_with_preserve_cardinality(False))
    fam.add_dataset_error("ScanDataset's function raising OutOfRange fails", scan,
                          scan_with_preserve_cardinality(True))
    fam.add_dataset("ScanDataset without preserve_cardinality, ended then repeated",
                    scan.repeat(2), edit=scan_with_preserve_cardinality(False))
    fam.add_dataset("ParallelMapDatasetV2 without preserve_cardinality", D.range(7).map(
        lambda x: x + 1, num_parallel_calls=2), edit=without_preserve_cardinality)
    V1 = tf.compat.v1.data.Dataset
    fam.add_graph_dataset("TF1 map ended by its function's OutOfRange",
                          lambda: V1.range(6).map(ends_at_three))
    fam.add_graph_dataset("TF1 map ended at once", lambda: V1.range(3, 9).map(ends_at_three))
    fam.add_graph_dataset("TF1 map ended, then repeated",
                          lambda: V1.range(5).map(ends_at_three).repeat(2))
    fam.add_graph_dataset("TF1 map of a map ended", lambda: V1.range(6).map(
        lambda x: x * 2).map(lambda x: ends_at_three(x // 2) + 100))
    fam.add_graph_dataset("TF2 map's function raising OutOfRange fails",
                          lambda: D.range(6).map(ends_at_three), error=True)
    # Last (see `family`).
    fam.add_graph_dataset("TF1 parallel map ended by its function's OutOfRange",
                          lambda: V1.range(6).map(ends_at_three, num_parallel_calls=2))


def handles(fam):
    ds = D.range(7).map(lambda x: x * 3)
    spec = ds.element_spec
    v = ds._variant_tensor
    for maker, threads, name in [("ThreadPoolHandle", 2, "pool"),
                                 ("ThreadPoolHandle", 1, ""),
                                 ("ExperimentalThreadPoolHandle", 3, "old")]:
        op = "ThreadPoolDataset" if maker == "ThreadPoolHandle" else "ExperimentalThreadPoolDataset"
        pooled = unoptimized(raw(getattr(R, op), spec, input_dataset=v,
                                 thread_pool=getattr(R, maker)(num_threads=1, display_name="p")))
        fam.add_dataset(f"{op} with {maker} of {threads}", pooled, edit=feed_handle(
            op, 1, maker, num_threads=threads, display_name=name, max_intra_op_parallelism=1))
    pooled = unoptimized(raw(R.ThreadPoolDataset, spec, input_dataset=v,
                             thread_pool=R.ThreadPoolHandle(num_threads=1, display_name="p")))
    for threads, intra in [(0, 1), (4, -1), (2, 0)]:
        fam.add_dataset(f"ThreadPoolHandle of {threads}, intra-op {intra}", pooled,
                        edit=feed_handle("ThreadPoolDataset", 1, "ThreadPoolHandle",
                                         num_threads=threads, display_name="p",
                                         max_intra_op_parallelism=intra))
    for maker in ["ThreadPoolHandle", "ExperimentalThreadPoolHandle"]:
        fam.add_dataset_error(f"{maker} of -1", pooled, feed_handle(
            "ThreadPoolDataset", 1, maker, num_threads=-1, display_name="p"))
    for op, maker in [("SetStatsAggregatorDataset", "StatsAggregatorHandle"),
                      ("SetStatsAggregatorDataset", "StatsAggregatorHandleV2"),
                      ("ExperimentalSetStatsAggregatorDataset",
                       "ExperimentalStatsAggregatorHandle")]:
        agg = unoptimized(raw(getattr(R, op), spec, input_dataset=v,
                              stats_aggregator=getattr(R, maker)(), tag="t", counter_prefix="c"))
        fam.add_dataset(f"{op} with {maker} in the graph", agg,
                        edit=feed_handle(op, 1, maker))
        fam.add_dataset(f"{op} with a shared {maker}", agg, edit=feed_handle(
            op, 1, maker, container="c", shared_name=f"shared_{maker}"))


def fixed_v1(names, header, record, footer, buffer=0):
    """Written as FixedLengthRecordDatasetV2 (TensorFlow cannot serialize
    V1), without `compression_type` (the edit FIXED_V1)."""
    return unoptimized(raw(
        R.FixedLengthRecordDatasetV2, tf.TensorSpec([], tf.string),
        filenames=tf.constant([f"{READERS}/{n}" for n in names], tf.string), header_bytes=header,
        record_bytes=record, footer_bytes=footer, buffer_size=buffer, compression_type=""))


FIXED_V1 = retarget("FixedLengthRecordDatasetV2", "FixedLengthRecordDataset", drop_last=True)


def tfrecord_v2(names, comp=""):
    return unoptimized(raw(R.TFRecordDataset, tf.TensorSpec([], tf.string),
                           filenames=tf.constant([f"{READERS}/{n}" for n in names], tf.string),
                           compression_type=comp, buffer_size=0))


def with_offsets(offsets):
    """TFRecordDataset as TFRecordDatasetV2 (TensorFlow serializes V2
    without its `byte_offsets`): `offsets` its new last input."""
    return retarget("TFRecordDataset", "TFRecordDatasetV2",
                    [(3, "byte_offsets", np.array(offsets, np.int64))])


def matching(patterns):
    """An edit: the one Const of `list_files`' names made by MatchingFiles
    (the op TensorFlow ran eagerly) over `patterns`."""
    def edit(graph):
        src = only(graph, "TensorSliceDataset")
        const = next(n for n in graph.node if n.name == src.input[0].split(":")[0])
        assert const.op == "Const", const
        pattern = add_const(graph, "MatchingFiles/pattern", patterns)
        made = add_node(graph, "MatchingFiles/made", "MatchingFiles", [pattern])
        src.input[0] = made.name
        graph.node.remove(const)
    return edit


def files(fam):
    for names, header, record, footer, buffer in [
            (["fixed.bin"], 2, 3, 1, 0), (["fixed_partial.bin"], 2, 3, 1, 0),
            (["fixed_short.bin"], 2, 3, 1, 0), (["fixed_short.bin"], 1, 1, 1, 0),
            (["fixed_short.bin"], 0, 1, 5, 0), (["fixed_short.bin"], 1, 2, 2, 0),
            (["hops.bin"], 0, 4, 0, 2),
            (["hops.bin"], 2, 2, 1, 1 << 20), (["fixed.bin", "hops.bin", "fixed.bin"], 2, 3, 1, 0),
            (["hops.bin"], 0, 11, 0, 0), (["hops.bin"], 0, 12, 0, 0), ([], 0, 1, 0, 0)]:
        elements_or_error(fam, f"FixedLengthRecordDataset {names} {header},{record},{footer} "
                          f"buffer {buffer}", fixed_v1(names, header, record, footer, buffer),
                          FIXED_V1)
    for index, what, bad in [(2, "record_bytes", 0), (1, "header_bytes", -1),
                             (3, "footer_bytes", -2), (4, "buffer_size", -1)]:
        fam.add_dataset_error(f"FixedLengthRecordDataset {what} {bad}", fixed_v1(
            ["fixed.bin"], 2, 3, 1), lambda g, i=index, b=bad: (FIXED_V1(g), set_input(
                g, "FixedLengthRecordDataset", i, b)))
    fam.add_dataset_error("FixedLengthRecordDataset missing file", fixed_v1(
        ["no_such.bin"], 0, 1, 0), FIXED_V1)
    # Records: "first" (21 bytes framed), "" (16), 80 bytes (96), "last record".
    for names, offsets, comp in [
            (["records.tfrecord"], [], ""), (["records.tfrecord"], [0], ""),
            (["records.tfrecord"], [21], ""), (["records.tfrecord"], [37], ""),
            (["records.tfrecord"], [133], ""), (["records.tfrecord"], [160], ""),
            (["records.tfrecord", "records.tfrecord"], [21, 133], ""),
            (["records.zlib"], [21], "ZLIB"), (["records.gz"], [37], "GZIP")]:
        elements_or_error(fam, f"TFRecordDatasetV2 {names} offsets {offsets} {comp}",
                          tfrecord_v2(names, comp), with_offsets(offsets))
    for names, offsets, what in [
            (["records.tfrecord"], [5], "offset inside a record"),
            (["records.tfrecord"], [1000], "offset past the end"),
            (["records.tfrecord"], [-1], "negative offset"),
            (["records.tfrecord"], [21, 37], "more offsets than files")]:
        elements_or_error(fam, f"TFRecordDatasetV2 {what}", tfrecord_v2(names),
                          with_offsets(offsets))
    patterns = [
        (f"{READERS}/*.txt", "*.txt"), (f"{READERS}/records.*", "records.*"),
        ([f"{READERS}/fixed*.bin", f"{READERS}/a.txt"], "two patterns"),
        (f"{READERS}/?.txt", "?.txt"), (f"{READERS}/[ab].txt", "[ab].txt"),
        (f"{READERS}/nothing*", "no match"), (f"{READERS}/a.txt", "one file")]
    for pattern, what in patterns:
        fam.add_dataset(f"MatchingFiles {what}", D.from_tensor_slices(
            tf.constant(["placeholder"])), edit=matching(pattern))


def example(**features):
    """A tf.train.Example of `features` (ints, floats or bytes), serialized
    deterministically (map order fixed, so regenerating gives the same
    bytes)."""
    f = {}
    for k, v in features.items():
        v = v if isinstance(v, list) else [v]
        if v and isinstance(v[0], bytes):
            f[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
        elif v and isinstance(v[0], float):
            f[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        else:
            f[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString(
        deterministic=True)


def parse_single(fam):
    """ParseSingleExample: every input a case input (the dense defaults
    too), as the op's NodeDef takes them."""
    records = [
        ("record 0", example(id=1, label=[0.5], tokens=[3, 1, 4], text=b"first")),
        ("extreme id, empty tokens", example(id=-(2**63), tokens=[], text=[b"a", b"\xff"])),
        ("no features, id missing", example()),
        ("empty bytes, id missing", b""),
        ("sparse of the wrong type", example(id=1, tokens=[1.5])),
        ("label of the wrong length", example(id=1, label=[1.0, 2.0])),
        ("corrupt", b"\x0a\x05garbage"),
        ("truncated", example(id=3)[:-1]),
    ]

    def parse(serialized, id_default, label_default):
        out = R.ParseSingleExample(
            serialized=serialized, dense_defaults=[id_default, label_default],
            num_sparse=2, sparse_keys=["text", "tokens"], dense_keys=["id", "label"],
            sparse_types=[tf.string, I64], dense_shapes=[[], [1]])
        return [*out.sparse_indices, *out.sparse_values, *out.sparse_shapes, *out.dense_values]

    for what, r in records:
        fam.add("ParseSingleExample", parse, [tf.constant(r), tf.constant([], I64),
                                              tf.constant([-1.0])],
                f"ParseSingleExample {what}")

    def parse_defaults(serialized, id_default, vec_default):
        out = R.ParseSingleExample(
            serialized=serialized, dense_defaults=[id_default, vec_default],
            num_sparse=0, sparse_keys=[], dense_keys=["id", "vec"], sparse_types=[],
            dense_shapes=[[], [2]])
        return list(out.dense_values)

    for what, r in [("defaults", example()), ("given", example(id=4, vec=[1.0, np.inf])),
                    ("empty bytes", b""),
                    ("wrong length", example(vec=[1.0, 2.0, 3.0])),
                    ("wrong type", example(id=[0.5]))]:
        fam.add("ParseSingleExample", parse_defaults, [
            tf.constant(r), tf.constant(7, I64), tf.constant([2.5, -0.0])],
            f"ParseSingleExample dense {what}")
    fam.add("ParseSingleExample", parse_defaults, [
        tf.constant(example()), tf.constant(7, I64), tf.constant([2.5, -0.0, 1.0])],
        "ParseSingleExample default of the wrong size")
    fam.add("ParseSingleExample", parse_defaults, [
        tf.constant([example()]), tf.constant(7, I64), tf.constant([2.5, -0.0])],
        "ParseSingleExample serialized not a scalar")
