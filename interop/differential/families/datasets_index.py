"""Dataset ops that read their input by index: the global shuffle
(`GlobalShuffleDataset`, a permutation of all the input's indices keyed by
the seeds) over the inputs TensorFlow can read by index (sources, map,
batch with drop_remainder, take, skip, shard, concatenate, zip, finite
repeat, prefetch, cache, another global shuffle), and the pipelines it
refuses."""

import numpy as np
import tensorflow as tf
from tensorflow.python.data.experimental.ops import global_shuffle_op

from harness import Family, set_input

D = tf.data.Dataset


def gs(ds, seed=42, reshuffle=False):
    return global_shuffle_op._global_shuffle(ds, seed=seed, reshuffle_each_iteration=reshuffle)


def global_shuffles(fam):
    r = D.range(20)
    fam.add_dataset("GlobalShuffleDataset/range", gs(r))
    fam.add_dataset("GlobalShuffleDataset/range seed 5", gs(r, seed=5))
    fam.add_dataset("GlobalShuffleDataset/negative seed", gs(r, seed=-(2**62)))
    fam.add_dataset("GlobalShuffleDataset/one element", gs(D.range(1)))
    fam.add_dataset("GlobalShuffleDataset/two elements", gs(D.range(2), seed=3))
    fam.add_dataset("GlobalShuffleDataset/range step", gs(D.range(-30, 30, 7)))
    fam.add_dataset("GlobalShuffleDataset/int32 range", gs(D.range(9, output_type=tf.int32)))
    # Past 2^16 elements the permutation works on wider blocks.
    fam.add_dataset("GlobalShuffleDataset/70000 elements, first 40",
                    gs(D.range(70000), seed=11).take(40))
    fam.add_dataset("GlobalShuffleDataset/huge range, first 10",
                    gs(D.range(0, 10**15, 7), seed=13).take(10))
    fam.add_dataset("GlobalShuffleDataset/reshuffles", gs(r, reshuffle=True), iterators=1)
    fam.add_dataset("GlobalShuffleDataset/reshuffles each epoch",
                    gs(D.range(6), seed=7, reshuffle=True).repeat(4), iterators=1)
    fam.add_dataset("GlobalShuffleDataset/fixed each epoch",
                    gs(D.range(6), seed=7).repeat(3))
    fam.add_dataset("GlobalShuffleDataset/map", gs(r.map(lambda x: x * x - 3)))
    fam.add_dataset("GlobalShuffleDataset/parallel map",
                    gs(r.map(lambda x: (x, tf.strings.as_string(x)), num_parallel_calls=2)))
    fam.add_dataset("GlobalShuffleDataset/batch drop remainder",
                    gs(r.batch(3, drop_remainder=True), seed=9))
    fam.add_dataset("GlobalShuffleDataset/take", gs(r.take(13)))
    fam.add_dataset("GlobalShuffleDataset/skip", gs(r.skip(4)))
    fam.add_dataset("GlobalShuffleDataset/shard", gs(r.shard(3, 1)))
    fam.add_dataset("GlobalShuffleDataset/concatenate",
                    gs(r.concatenate(D.range(100, 105))))
    fam.add_dataset("GlobalShuffleDataset/zip", gs(D.zip(r, r.map(lambda x: -x))))
    fam.add_dataset("GlobalShuffleDataset/repeat", gs(D.range(5).repeat(3), seed=1))
    fam.add_dataset("GlobalShuffleDataset/prefetch cache", gs(r.cache().prefetch(2)))
    fam.add_dataset("GlobalShuffleDataset/floats",
                    gs(D.from_tensor_slices(np.array(
                        [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 3.5, -2.25],
                        np.float32))))
    fam.add_dataset("GlobalShuffleDataset/strings",
                    gs(D.from_tensor_slices(["", "a", "héllo", "🙂" * 20, "x" * 300, "\0b"])))
    fam.add_dataset("GlobalShuffleDataset/tensor", gs(D.from_tensors([1, 2, 3])))
    fam.add_dataset("GlobalShuffleDataset/of a global shuffle", gs(gs(r), seed=6))
    fam.add_dataset("GlobalShuffleDataset/then batch", gs(r).batch(6))
    fam.add_dataset("GlobalShuffleDataset/then map",
                    gs(r).map(lambda x: tf.cast(x, tf.float32) / 3))


def refusals(fam):
    def batch_keeps_remainder(graph):
        set_input(graph, "BatchDatasetV2", 2, False)
    fam.add_dataset_error("GlobalShuffleDataset/batch keeping remainder",
                          gs(D.range(10).batch(3, drop_remainder=True)), batch_keeps_remainder)

    def repeat_forever(graph):
        set_input(graph, "RepeatDataset", 1, -1)
    fam.add_dataset_error("GlobalShuffleDataset/repeat forever",
                          gs(D.range(4).repeat(2)), repeat_forever)

    def batch_of_repeat_forever(graph):
        set_input(graph, "RepeatDataset", 1, -1)
        set_input(graph, "BatchDatasetV2", 2, False)
    # The refusal nearest the global shuffle is the one reported.
    fam.add_dataset_error("GlobalShuffleDataset/first refusal wins",
                          gs(D.range(4).repeat(2).batch(2, drop_remainder=True)),
                          batch_of_repeat_forever)


def at(fam, case, make, index):
    """`tf.data.experimental.at` of the dataset `make()` builds, in a
    function of the index."""
    fam.add_function("GetElementAtIndex/" + case,
                     lambda i: tf.data.experimental.at(make(), i),
                     [np.int64(index)])


def elements_at(fam):
    r = lambda: D.range(7)  # noqa: E731
    at(fam, "range", r, 3)
    at(fam, "range first", r, 0)
    at(fam, "range last", r, 6)
    at(fam, "range step", lambda: D.range(50, -50, -9), 8)
    at(fam, "huge range", lambda: D.range(0, 2**62, 3), 10**15)
    at(fam, "int32 range", lambda: D.range(9, output_type=tf.int32), 5)
    at(fam, "map", lambda: r().map(lambda x: x * x + 1), 4)
    at(fam, "map of strings", lambda: r().map(lambda x: tf.strings.as_string(x) + "é"), 2)
    at(fam, "batch", lambda: r().batch(2, drop_remainder=True), 1)
    at(fam, "batch remainder", lambda: r().batch(2), 3)
    at(fam, "take", lambda: r().take(4), 2)
    at(fam, "skip", lambda: r().skip(2), 1)
    at(fam, "shard", lambda: r().shard(2, 1), 2)
    at(fam, "concatenate first", lambda: r().concatenate(D.range(10, 12)), 6)
    at(fam, "concatenate second", lambda: r().concatenate(D.range(10, 12)), 8)
    at(fam, "zip", lambda: D.zip(r(), r().map(lambda x: -x)), 2)
    at(fam, "repeat", lambda: r().repeat(3), 16)
    at(fam, "prefetch cache", lambda: r().cache().prefetch(2), 5)
    at(fam, "tensor", lambda: D.from_tensors([1.5, -0.0, float("nan")]), 0)
    at(fam, "slices of strings",
       lambda: D.from_tensor_slices(["", "a", "🙂" * 9, "x" * 100]), 2)
    at(fam, "slices of floats",
       lambda: D.from_tensor_slices(np.array([[np.inf, -np.inf], [1e-45, -0.0]], np.float32)), 1)
    at(fam, "global shuffle", lambda: gs(D.range(10), seed=4), 3)
    # Errors: TensorFlow's code and message.
    at(fam, "past the end", r, 7)
    at(fam, "negative", r, -1)
    at(fam, "far past the end", r, 2**63 - 1)
    at(fam, "tensor past the end", lambda: D.from_tensors([1, 2]), 1)
    at(fam, "empty", lambda: D.range(0), 0)
    at(fam, "filter", lambda: r().filter(lambda x: x > 2), 0)
    at(fam, "flat_map", lambda: r().flat_map(lambda x: D.range(x)), 0)
    at(fam, "repeat forever", lambda: r().repeat(), 10)
    at(fam, "map of a filter", lambda: r().filter(lambda x: x > 2).map(lambda x: x + 1), 0)


P = tf.data.experimental.AutoShardPolicy


def sharded(policy, n=2, i=1, replicas=0, op="AutoShardDataset"):
    """An `edit` ending the pipeline's graph in an `op` node (what
    `_AutoShardDataset` makes; tf.data serializes its rewritten input, so
    Python never writes the node itself): `policy`, worker `i` of `n`."""
    def edit(graph):
        ret = next(x for x in graph.node if x.op == "_Retval")
        source = next(x for x in graph.node if x.name == ret.input[0].split(":")[0])
        consts = []
        for name, value in (("num_workers", n), ("index", i)):
            const = graph.node.add()
            const.name = f"auto_shard/{name}"
            const.op = "Const"
            t = tf.make_tensor_proto(np.int64(value))
            const.attr["dtype"].type = t.dtype
            const.attr["value"].tensor.CopyFrom(t)
            consts.append(const.name)
        node = graph.node.add()
        node.name = "auto_shard"
        node.op = op
        node.input.extend([ret.input[0]] + consts)
        node.attr["auto_shard_policy"].i = int(policy)
        if op == "AutoShardDataset":
            node.attr["num_replicas"].i = replicas
        types = "output_types" if "output_types" in source.attr else "Toutput_types"
        node.attr["output_types"].CopyFrom(source.attr[types])
        node.attr["output_shapes"].CopyFrom(source.attr["output_shapes"])
        ret.input[0] = node.name
    return edit


def auto_shards(fam):
    r = D.range(10)
    fam.add_dataset("AutoShardDataset/DATA", r, edit=sharded(P.DATA))
    fam.add_dataset("AutoShardDataset/DATA after batch",
                    r.map(lambda x: x * 2).batch(3), edit=sharded(P.DATA))
    fam.add_dataset("AutoShardDataset/DATA before prefetch", r.prefetch(3),
                    edit=sharded(P.DATA, 3, 2))
    fam.add_dataset("AutoShardDataset/DATA replicas", r.batch(4),
                    edit=sharded(P.DATA, 2, 1, replicas=2))
    fam.add_dataset("AutoShardDataset/DATA more workers than elements", D.range(3),
                    edit=sharded(P.DATA, 5, 4))
    fam.add_dataset("AutoShardDataset/DATA one worker", r, edit=sharded(P.DATA, 1, 0))
    fam.add_dataset("AutoShardDataset/DATA strings",
                    D.from_tensor_slices(["a", "é", "", "🙂" * 5, "x"]),
                    edit=sharded(P.DATA, 2, 0))
    fam.add_dataset("AutoShardDataset/AUTO without files", r, edit=sharded(P.AUTO))
    fam.add_dataset("AutoShardDataset/AUTO zip of sources",
                    D.zip(r, D.from_tensor_slices(np.arange(10.0) / 4)),
                    edit=sharded(P.AUTO, 3, 0))
    fam.add_dataset("AutoShardDataset/OFF", r, edit=sharded(P.OFF))
    fam.add_dataset("AutoShardDataset/FILE one worker", r, edit=sharded(P.FILE, 1, 0))
    fam.add_dataset("AutoShardDataset/AUTO flat_map without readers",
                    D.range(4).flat_map(lambda x: D.range(x)), edit=sharded(P.AUTO, 2, 0))
    fam.add_dataset("AutoShardDataset/HINT without hints", r.map(lambda x: -x),
                    edit=sharded(P.HINT))
    fam.add_dataset("ExperimentalAutoShardDataset/DATA", r,
                    edit=sharded(P.DATA, 4, 3, op="ExperimentalAutoShardDataset"))
    fam.add_dataset("ExperimentalAutoShardDataset/AUTO", r,
                    edit=sharded(P.AUTO, 3, 1, op="ExperimentalAutoShardDataset"))
    fam.add_dataset_error("AutoShardDataset/index past the workers", r, sharded(P.DATA, 2, 2))
    fam.add_dataset_error("AutoShardDataset/negative index", r, sharded(P.DATA, 2, -1))
    fam.add_dataset_error("AutoShardDataset/no workers", r, sharded(P.DATA, 0, 0))
    fam.add_dataset_error("AutoShardDataset/FILE without files", r, sharded(P.FILE))
    fam.add_dataset_error("AutoShardDataset/FILE flat_map without readers",
                          D.range(3).flat_map(lambda x: D.range(x)), sharded(P.FILE))


def choose_fastest_branch(inp, fs, per_branch, numerator, denominator):
    """A raw `ChooseFastestBranchDataset` over `inp` with the branches `fs`
    (dataset to dataset), their captured tensors passed as TensorFlow's
    kernel takes them."""
    spec = inp.element_spec
    branches = []
    for f in fs:
        @tf.function(input_signature=[tf.TensorSpec([], tf.variant)])
        def b(v, f=f):
            return f(tf.data.experimental.from_variant(v, spec))._variant_tensor
        branches.append(b.get_concrete_function())
    out = fs[0](inp).element_spec
    v = tf.raw_ops.ChooseFastestBranchDataset(
        input_dataset=inp._variant_tensor, ratio_numerator=numerator,
        ratio_denominator=denominator,
        other_arguments=[t for b in branches for t in b.captured_inputs],
        num_elements_per_branch=per_branch, branches=branches,
        other_arguments_lengths=[len(b.captured_inputs) for b in branches],
        output_types=[out.dtype], output_shapes=[out.shape])
    return tf.data.experimental.from_variant(v, out)


def choose_fastest_branches(fam):
    doubled = [lambda d: d.map(lambda x: x * 2), lambda d: d.map(lambda x: x + x)]
    fam.add_dataset("ChooseFastestBranchDataset/maps",
                    choose_fastest_branch(D.range(7), doubled, 2, 1, 1))
    fam.add_dataset("ChooseFastestBranchDataset/one element per branch",
                    choose_fastest_branch(D.range(20), doubled, 1, 1, 1))
    pairs = [lambda d: d.batch(2), lambda d: d.batch(2).map(lambda x: x * 1)]
    fam.add_dataset("ChooseFastestBranchDataset/batches, two inputs an element",
                    choose_fastest_branch(D.range(21), pairs, 2, 2, 1))
    # A ratio that does not match the branches: TensorFlow's experiment
    # reads too few input elements and the dataset ends early.
    fam.add_dataset("ChooseFastestBranchDataset/ratio too small",
                    choose_fastest_branch(D.range(7), pairs, 2, 1, 2))
    fam.add_dataset("ChooseFastestBranchDataset/input shorter than the experiments",
                    choose_fastest_branch(D.range(3), doubled + doubled[:1], 2, 1, 1))
    c = tf.constant(100, tf.int64)
    captured = [lambda d: d.map(lambda x: x + c), lambda d: d.map(lambda x: c + x)]
    fam.add_dataset("ChooseFastestBranchDataset/captured tensors",
                    choose_fastest_branch(D.range(9), captured, 3, 1, 1))
    fam.add_dataset("ChooseFastestBranchDataset/strings",
                    choose_fastest_branch(
                        D.from_tensor_slices(["a", "é", "", "🙂"]),
                        [lambda d: d.map(lambda x: x + "!"),
                         lambda d: d.map(lambda x: tf.strings.join([x, "!"]))], 1, 1, 1))

    def numerator(value):
        def edit(graph):
            set_input(graph, "ChooseFastestBranchDataset", 1, value)
        return edit

    def denominator(value):
        def edit(graph):
            set_input(graph, "ChooseFastestBranchDataset", 2, value)
        return edit
    base = choose_fastest_branch(D.range(7), doubled, 2, 1, 1)
    fam.add_dataset_error("ChooseFastestBranchDataset/zero numerator", base, numerator(0))
    fam.add_dataset_error("ChooseFastestBranchDataset/negative denominator", base,
                          denominator(-1))
    fam.add_dataset_error("ChooseFastestBranchDataset/per branch not divisible", base,
                          denominator(3))


def index_flat_map(inp, map_fn, index_fn, cardinality=-2):
    """A raw `IndexFlatMapDataset`: `map_fn` of an input element's
    components, `index_fn` of an output position (an int64 scalar) giving
    (element index, offset), their captured tensors passed as TensorFlow's
    kernel takes them."""
    specs = tf.nest.flatten(inp.element_spec)
    m = tf.function(lambda *xs: map_fn(*xs)).get_concrete_function(*specs)
    ix = tf.function(index_fn).get_concrete_function(tf.TensorSpec([], tf.int64))
    outs = tf.nest.flatten(m.structured_outputs)
    out_specs = [tf.TensorSpec(o.shape[1:] if o.shape.rank else o.shape, o.dtype) for o in outs]
    v = tf.raw_ops.IndexFlatMapDataset(
        input_dataset=inp._variant_tensor, map_func_other_args=m.captured_inputs,
        index_map_func_other_args=ix.captured_inputs, output_cardinality=cardinality,
        map_func=m, index_map_func=ix,
        output_types=[o.dtype for o in out_specs], output_shapes=[o.shape for o in out_specs])
    spec = out_specs[0] if len(out_specs) == 1 else tuple(out_specs)
    return tf.data.experimental.from_variant(v, spec)


def index_flat_maps(fam):
    rows = D.from_tensor_slices(np.arange(12, dtype=np.int64).reshape(4, 3))
    by_three = lambda p: (p // 3, p % 3)  # noqa: E731
    fam.add_dataset("IndexFlatMapDataset/rows of three",
                    index_flat_map(rows, lambda x: x * 10, by_three, 12))
    # The declared cardinality is reported as given, the elements unchanged.
    fam.add_dataset("IndexFlatMapDataset/cardinality as declared",
                    index_flat_map(rows, lambda x: x * 10, by_three, 5))
    fam.add_dataset("IndexFlatMapDataset/int32 indices",
                    index_flat_map(rows, lambda x: x + 1,
                                   lambda p: (tf.cast(p // 3, tf.int32), tf.cast(p % 3, tf.int32))))
    fam.add_dataset("IndexFlatMapDataset/reversed rows",
                    index_flat_map(rows, lambda x: x, lambda p: (p // 3, 2 - p % 3)))
    # One element a row: the index jumps by one each time.
    fam.add_dataset("IndexFlatMapDataset/first row only",
                    index_flat_map(rows, lambda x: x, lambda p: (p, tf.constant(0, tf.int64))))
    # The same input index again: the current element keeps being read.
    fam.add_dataset("IndexFlatMapDataset/jumps move one element",
                    index_flat_map(D.range(4).map(lambda x: tf.fill([3], x)), lambda x: x,
                                   lambda p: (p * 5 // 3, p % 2)))
    fam.add_dataset("IndexFlatMapDataset/strings",
                    index_flat_map(D.range(3),
                                   lambda x: tf.strings.as_string(tf.range(x, x + 2)) + "é",
                                   lambda p: (p // 2, p % 2)))
    fam.add_dataset("IndexFlatMapDataset/scalar kept whole",
                    index_flat_map(D.range(3), lambda x: x * 3,
                                   lambda p: (p, tf.constant(5, tf.int64))))
    c = tf.constant(7, tf.int64)
    fam.add_dataset("IndexFlatMapDataset/captured tensors",
                    index_flat_map(rows, lambda x: x * c, lambda p: (p // 3, (p + c) % 3)))
    fam.add_dataset("IndexFlatMapDataset/floats",
                    index_flat_map(D.from_tensors(np.array([np.nan, -0.0, np.inf, 1e-45],
                                                           np.float32)),
                                   lambda x: x, lambda p: (tf.constant(0, tf.int64), p)).take(4))
    fam.add_dataset("IndexFlatMapDataset/empty input",
                    index_flat_map(rows.take(0), lambda x: x, by_three))


def weighted_flat_map(inputs, weights):
    """A raw `WeightedFlatMapDataset` of `inputs` with float64 `weights`."""
    spec = inputs[0].element_spec
    flat = tf.nest.flatten(spec)
    v = tf.raw_ops.WeightedFlatMapDataset(
        input_datasets=[d._variant_tensor for d in inputs],
        weights=[tf.constant(w, tf.float64) for w in weights],
        output_types=[s.dtype for s in flat], output_shapes=[s.shape for s in flat])
    return tf.data.experimental.from_variant(v, spec)


def weighted_flat_maps(fam):
    a, b, c = D.range(100), D.range(100, 200), D.range(1000, 1010)
    # TensorFlow's example: {100, 100, 10} weighted {0.2, 0.3, 0.5} read {4, 6, 10}.
    fam.add_dataset("WeightedFlatMapDataset/three inputs",
                    weighted_flat_map([a, b, c], [0.2, 0.3, 0.5]))
    fam.add_dataset("WeightedFlatMapDataset/equal weights",
                    weighted_flat_map([D.range(5), D.range(10, 13)], [1.0, 1.0]))
    fam.add_dataset("WeightedFlatMapDataset/uneven weights",
                    weighted_flat_map([D.range(7), D.range(10, 30)], [1.0, 3.5]))
    fam.add_dataset("WeightedFlatMapDataset/tiny weight",
                    weighted_flat_map([D.range(50), D.range(100, 150)], [1e-3, 1.0]))
    fam.add_dataset("WeightedFlatMapDataset/empty input",
                    weighted_flat_map([D.range(0), D.range(5)], [0.5, 0.5]))
    fam.add_dataset("WeightedFlatMapDataset/strings",
                    weighted_flat_map([D.from_tensor_slices(["a", "é", "🙂"]),
                                       D.from_tensor_slices(["x" * 40, ""])], [2.0, 1.0]))

    def weight(index, value):
        def edit(graph):
            set_input(graph, "WeightedFlatMapDataset", 2 + index, value)
        return edit
    base = weighted_flat_map([D.range(5), D.range(10, 15)], [1.0, 1.0])
    fam.add_dataset_error("WeightedFlatMapDataset/zero weight", base, weight(1, 0.0))
    fam.add_dataset_error("WeightedFlatMapDataset/negative weight", base, weight(0, -2.0))
    fam.add_dataset_error("WeightedFlatMapDataset/infinite input",
                          weighted_flat_map([D.range(5), D.range(3).repeat(2)], [1.0, 1.0]),
                          lambda g: set_input(g, "RepeatDataset", 1, -1))


def map_defuns(fam):
    from tensorflow.python.data.experimental.ops import map_defun

    def case(case_id, fn, signature, out_dtypes, out_shapes, inputs, unknown_shapes=False):
        f = tf.function(fn, input_signature=signature)
        fam.add_function("MapDefun/" + case_id,
                         lambda *xs: map_defun.map_defun(f, list(xs), out_dtypes, out_shapes),
                         inputs, unknown_shapes=unknown_shapes)

    i64 = tf.TensorSpec([], tf.int64)
    case("doubles", lambda x: x * 2, [i64], [tf.int64], [[]],
         [np.array([1, -5, 2**62, -(2**63)], np.int64)])
    case("two arguments, two outputs",
         lambda a, b: (a * b, tf.reduce_sum(a)),
         [tf.TensorSpec([2], tf.float32), tf.TensorSpec([], tf.float32)],
         [tf.float32, tf.float32], [[2], []],
         [np.array([[1, 2], [np.nan, -0.0], [np.inf, 3]], np.float32),
          np.array([2, -1, 0.5], np.float32)])

    def captured(x):
        # A tensor of the calling function, captured by the mapped one.
        c = tf.constant(100, tf.int64) * 3
        f = tf.function(lambda y: y + c, input_signature=[i64])
        return map_defun.map_defun(f, [x], [tf.int64], [[]])
    fam.add_function("MapDefun/captured", captured, [np.arange(5, dtype=np.int64)])
    case("strings", lambda s: s + "é!", [tf.TensorSpec([], tf.string)], [tf.string], [[]],
         [np.array([b"", b"a", "🙂".encode()], object)])
    case("unknown dimension fixed by the first row", lambda x: tf.fill([x], x), [i64],
         [tf.int64], [[None]], [np.array([2, 2, 2], np.int64)])
    # (Rows of different lengths under an unknown dimension fail with the
    # shape of whichever row TensorFlow's parallel calls finish first: not
    # a deterministic case.)
    case("result of another shape than declared", lambda x: tf.fill([x], x), [i64],
         [tf.int64], [[3]], [np.array([2, 2], np.int64)])
    case("no rows", lambda x: x * 2, [i64], [tf.int64], [[]], [np.zeros([0], np.int64)])
    case("matrix rows", lambda x: tf.reverse(x, [0]), [tf.TensorSpec([3], tf.int32)],
         [tf.int32], [[3]], [np.arange(12, dtype=np.int32).reshape(4, 3)])
    case("scalar argument", lambda x: x * 2, [i64], [tf.int64], [[]],
         [np.int64(3)], unknown_shapes=True)
    case("leading dimensions differ", lambda a, b: a + b, [i64, i64], [tf.int64], [[]],
         [np.arange(3, dtype=np.int64), np.arange(2, dtype=np.int64)], unknown_shapes=True)


def rewritten(name):
    """An `edit` ending the pipeline's graph in a `RewriteDataset` node
    (tf.data serializes the rewritten input, so Python never writes it)."""
    def edit(graph):
        ret = next(x for x in graph.node if x.op == "_Retval")
        source = next(x for x in graph.node if x.name == ret.input[0].split(":")[0])
        const = graph.node.add()
        const.name = "rewrite/name"
        const.op = "Const"
        t = tf.make_tensor_proto(name)
        const.attr["dtype"].type = t.dtype
        const.attr["value"].tensor.CopyFrom(t)
        node = graph.node.add()
        node.name = "rewrite"
        node.op = "RewriteDataset"
        node.input.extend([ret.input[0], const.name])
        types = "output_types" if "output_types" in source.attr else "Toutput_types"
        node.attr["output_types"].CopyFrom(source.attr[types])
        node.attr["output_shapes"].CopyFrom(source.attr["output_shapes"])
        ret.input[0] = node.name
    return edit


def rewrites(fam):
    ds = D.range(8).map(lambda x: x * 2).filter(lambda x: x > 2).prefetch(1)
    for name in ["noop_elimination", "map_fusion", "map_parallelization", "filter_fusion",
                 "make_sloppy", "inject_prefetch", "map_and_batch_fusion", "no such rewrite", ""]:
        fam.add_dataset(f"RewriteDataset/{name or 'empty name'}", ds, edit=rewritten(name))
    fam.add_dataset("RewriteDataset/strings",
                    D.from_tensor_slices(["a", "é", ""]).map(lambda s: s + "!"),
                    edit=rewritten("map_parallelization"))
    fam.add_dataset_error("RewriteDataset/auto_shard without configuration", ds,
                          rewritten("tf_auto_shard"))
    fam.add_dataset_error("RewriteDataset/slack without configuration", ds, rewritten("slack"))


def wrapped_variants(fam):
    spec = tf.TensorSpec([], tf.int64)

    def round_trip(n):
        ds = D.range(n).map(lambda x: x * 3)
        w = tf.raw_ops.WrapDatasetVariant(input_handle=ds._variant_tensor)
        u = tf.raw_ops.UnwrapDatasetVariant(input_handle=w)
        return tf.data.experimental.from_variant(u, spec).reduce(tf.constant(0, tf.int64),
                                                                 lambda a, x: a * 10 + x)
    fam.add_function("WrapDatasetVariant/and unwrapped", round_trip, [np.int64(5)])

    def unwrap_plain(n):
        u = tf.raw_ops.UnwrapDatasetVariant(input_handle=D.range(n)._variant_tensor)
        return tf.data.experimental.from_variant(u, spec).reduce(
            tf.constant(0, tf.int64), lambda a, x: a + x)
    fam.add_function("UnwrapDatasetVariant/of a dataset", unwrap_plain, [np.int64(3)])

    def wrap_twice(n):
        w = tf.raw_ops.WrapDatasetVariant(input_handle=D.range(n)._variant_tensor)
        w2 = tf.raw_ops.WrapDatasetVariant(input_handle=w)
        u = tf.raw_ops.UnwrapDatasetVariant(input_handle=w2)
        return tf.data.experimental.from_variant(u, spec).reduce(
            tf.constant(0, tf.int64), lambda a, x: a + x)
    fam.add_function("WrapDatasetVariant/of a wrapped dataset", wrap_twice, [np.int64(3)])

    def read_wrapped(n):
        w = tf.raw_ops.WrapDatasetVariant(input_handle=D.range(n)._variant_tensor)
        return tf.data.experimental.from_variant(w, spec).reduce(
            tf.constant(0, tf.int64), lambda a, x: a + x)
    fam.add_function("WrapDatasetVariant/read without unwrapping", read_wrapped, [np.int64(3)])


def datasets_from_graphs(fam):
    from tensorflow.core.framework import graph_pb2

    def graph_of(ds):
        g = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
        return np.array(g.SerializeToString(deterministic=True), object)

    def summed(g):
        ds = tf.data.experimental.from_variant(tf.raw_ops.DatasetFromGraph(graph_def=g),
                                               tf.TensorSpec([None], tf.int64))
        return ds.reduce(tf.constant(0, tf.int64), lambda a, x: a * 7 + tf.reduce_sum(x))
    fam.add_function("DatasetFromGraph/batches", summed,
                     [graph_of(D.range(10).batch(3).skip(1))])
    fam.add_function("DatasetFromGraph/mapped", summed,
                     [graph_of(D.range(6).map(lambda x: x * x - 1).batch(2))])

    def joined(g):
        ds = tf.data.experimental.from_variant(tf.raw_ops.DatasetFromGraph(graph_def=g),
                                               tf.TensorSpec([], tf.string))
        return ds.reduce(tf.constant(""), lambda a, x: a + "|" + x)
    fam.add_function("DatasetFromGraph/strings", joined,
                     [graph_of(D.from_tensor_slices(["a", "é", "", "🙂"]))])
    fam.add_function("DatasetFromGraph/bytes that do not parse", summed,
                     [np.array(b"garbage\xff\x00", object)])
    fam.add_function("DatasetFromGraph/empty graph", summed, [np.array(b"", object)])


def family():
    fam = Family("datasets_index")
    global_shuffles(fam)
    refusals(fam)
    elements_at(fam)
    auto_shards(fam)
    choose_fastest_branches(fam)
    index_flat_maps(fam)
    weighted_flat_maps(fam)
    map_defuns(fam)
    rewrites(fam)
    wrapped_variants(fam)
    datasets_from_graphs(fam)
    return fam
