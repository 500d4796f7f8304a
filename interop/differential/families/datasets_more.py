"""Dataset ops TensorFlow's Python writes rarely or no more: wrappers that
keep the elements (thread pools, statistics, sleep, choose-fastest), the
older names and versions of supported ops (sliding windows, padded batch
V1, parallel interleave V1, parallel filter, rebatch V1), `from_list`,
`MatchingFilesDataset`, CSV files, parsed Examples, SparseTensor slices and
dense-to-sparse batches, and Bernoulli sampling. Ops Python cannot write are
built with raw ops (`tf.data.experimental.from_variant`) or by editing a
graph that TensorFlow then runs itself."""

import inspect
import os

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2  # noqa: F401
from tensorflow.python.data.experimental.ops import testing
from tensorflow.python.framework import op_def_registry

from harness import Family, in_crate, rename_op, set_input

D = tf.data.Dataset
DATA = "tests/data/datasets_more"


def raw(op, spec, **kwargs):
    """A dataset of one raw dataset op (its `output_types`/`output_shapes`
    from `spec`)."""
    flat = tf.nest.flatten(spec)
    params = inspect.signature(op).parameters
    if "output_types" in params:
        kwargs.setdefault("output_types", [s.dtype for s in flat])
    if "output_shapes" in params:
        kwargs.setdefault("output_shapes", [s.shape for s in flat])
    return tf.data.experimental.from_variant(op(**kwargs), spec)


def unoptimized(ds):
    """`ds` run as its graph says: TensorFlow's default rewrites re-serialize
    the pipeline, which some old kernels (ParallelFilterDataset,
    PaddedBatchDataset) cannot do."""
    o = tf.data.Options()
    o.experimental_optimization.apply_default_optimizations = False
    o.autotune.enabled = False
    return ds.with_options(o)


def retarget(old, new, inserts=(), drop_last=False):
    """An `edit` making the one `old` node a `new` node: attributes `new`
    does not declare dropped, `inserts` ((input index, name, tensor))
    added as Const inputs, with `drop_last` its last input removed."""
    def edit(graph):
        hits = [n for n in graph.node if n.op == old]
        assert len(hits) == 1, [n.op for n in graph.node]
        node = hits[0]
        node.op = new
        declared = {a.name for a in op_def_registry.get(new).attr}
        for k in list(node.attr):
            if k not in declared:
                del node.attr[k]
        for index, name, value in inserts:
            const = graph.node.add()
            const.name = f"{node.name}/{name}"
            const.op = "Const"
            t = tf.make_tensor_proto(value)
            const.attr["dtype"].type = t.dtype
            const.attr["value"].tensor.CopyFrom(t)
            node.input.insert(index, const.name)
        if drop_last:
            del node.input[-1]
    return edit


def wrappers(fam):
    ds = D.range(6).map(lambda x: x * x)
    spec = ds.element_spec
    v = ds._variant_tensor
    pool = tf.raw_ops.ThreadPoolHandle(num_threads=2, display_name="pool")
    fam.add_dataset("ThreadPoolDataset", raw(tf.raw_ops.ThreadPoolDataset, spec,
                                             input_dataset=v, thread_pool=pool))
    fam.add_dataset("ExperimentalThreadPoolDataset", raw(
        tf.raw_ops.ExperimentalThreadPoolDataset, spec, input_dataset=v,
        thread_pool=tf.raw_ops.ExperimentalThreadPoolHandle(num_threads=1, display_name="p")))
    for us in [0, 50]:
        fam.add_dataset(f"SleepDataset {us}us", raw(tf.raw_ops.SleepDataset, spec,
                                                    input_dataset=v, sleep_microseconds=us))
    fam.add_dataset("ExperimentalSleepDataset", raw(
        tf.raw_ops.ExperimentalSleepDataset, spec, input_dataset=v, sleep_microseconds=10))
    fam.add_dataset_error("SleepDataset negative", raw(
        tf.raw_ops.SleepDataset, spec, input_dataset=v, sleep_microseconds=1),
        lambda g: set_input(g, "SleepDataset", 1, -1))
    strings = D.from_tensor_slices(["a", "", "ccc"]).batch(2)
    for op in ["LatencyStatsDataset", "ExperimentalLatencyStatsDataset",
               "BytesProducedStatsDataset", "ExperimentalBytesProducedStatsDataset"]:
        fam.add_dataset(op, raw(getattr(tf.raw_ops, op), strings.element_spec,
                                input_dataset=strings._variant_tensor, tag="stats"))
    for op, handle in [("SetStatsAggregatorDataset", "StatsAggregatorHandleV2"),
                       ("SetStatsAggregatorDataset", "StatsAggregatorHandle"),
                       ("ExperimentalSetStatsAggregatorDataset",
                        "ExperimentalStatsAggregatorHandle")]:
        fam.add_dataset(f"{op} with {handle}", raw(
            getattr(tf.raw_ops, op), spec, input_dataset=v,
            stats_aggregator=getattr(tf.raw_ops, handle)(), tag="t", counter_prefix="c"))
    for op in ["ChooseFastestDataset", "ExperimentalChooseFastestDataset"]:
        same = [D.range(9).map(lambda x: x + 1), D.range(1, 10)]
        fam.add_dataset(op, raw(getattr(tf.raw_ops, op), same[0].element_spec,
                                input_datasets=[d._variant_tensor for d in same],
                                num_experiments=2))
    fam.add_dataset("ChooseFastestDataset of three, one experiment", raw(
        tf.raw_ops.ChooseFastestDataset, tf.TensorSpec([None], tf.int64),
        input_datasets=[D.range(7).batch(3)._variant_tensor] * 3, num_experiments=1))
    for new in ["NonSerializableDataset", "ExperimentalNonSerializableDataset"]:
        fam.add_dataset(new, D.range(5).batch(2).ignore_errors(),
                        edit=retarget("IgnoreErrorsDataset", new))
    # It asserts which transformations follow it (a map, which
    # TensorFlow's default optimizations make parallel).
    fam.add_dataset("ExperimentalAssertNextDataset", D.range(4).apply(
        testing.assert_next(["ParallelMapV2"])).map(lambda x: x + 1))


def older_names(fam):
    fam.add_dataset("ExperimentalMapAndBatchDataset", D.range(10).apply(
        tf.data.experimental.map_and_batch(lambda x: x * 2, 4)),
        edit=rename_op("MapAndBatchDataset", "ExperimentalMapAndBatchDataset"))
    fam.add_dataset("ExperimentalUnbatchDataset", D.range(7).batch(3).unbatch(),
                    edit=rename_op("UnbatchDataset", "ExperimentalUnbatchDataset"))
    for new in ["ParallelInterleaveDataset", "ExperimentalParallelInterleaveDataset"]:
        for sloppy in [False]:
            ds = D.range(1, 5).apply(tf.data.experimental.parallel_interleave(
                lambda x: D.range(x).map(lambda y: y + 10 * x), cycle_length=2,
                block_length=2))
            # V1 takes `sloppy` after `block_length` (input 3; no captures).
            fam.add_dataset(f"{new} sloppy={sloppy}", ds, edit=retarget(
                "LegacyParallelInterleaveDatasetV2", new, [(3, "sloppy", sloppy)]))
    fam.add_dataset("ParallelFilterDataset", unoptimized(D.range(20).filter(
        lambda x: x % 3 == 1)),
                    edit=retarget("FilterDataset", "ParallelFilterDataset",
                                  [(1, "num_parallel_calls", np.int64(2))]))
    fam.add_dataset("ParallelFilterDataset with a capture", unoptimized(D.range(12).filter(
        lambda x, k=tf.constant(4, tf.int64): x % k == 0)),
        edit=retarget("FilterDataset", "ParallelFilterDataset",
                      [(2, "num_parallel_calls", np.int64(-1))]))


def padded_batch_v1(fam):
    # Written as V2 without drop_remainder (TensorFlow cannot serialize V1).
    v1 = retarget("PaddedBatchDatasetV2", "PaddedBatchDataset", drop_last=True)
    rows = D.range(7).map(lambda x: tf.range(x))
    for size, shape, pad in [(2, [None], -1), (3, [6], 9), (7, [None], 0), (10, [None], 0)]:
        fam.add_dataset(f"PaddedBatchDataset {size} to {shape} with {pad}", unoptimized(
            rows.padded_batch(size, shape, tf.constant(pad, tf.int64))), edit=v1)
    words = D.from_tensor_slices([["a", "b"], ["c", "dé"], ["", "f"]])
    fam.add_dataset("PaddedBatchDataset of strings", unoptimized(
        words.padded_batch(2, [3], "<pad>")), edit=v1)
    fam.add_dataset("PaddedBatchDataset of pairs", unoptimized(
        D.zip((rows, rows.map(lambda r: tf.cast(r, tf.float32) / 3))).padded_batch(3)), edit=v1)


def sliding(fam):
    for op in ["SlidingWindowDataset", "ExperimentalSlidingWindowDataset"]:
        drops = [True, False] if op == "SlidingWindowDataset" else [None]
        for size, shift, stride in [(3, 2, 1), (3, 1, 2), (5, 1, 1), (2, 3, 1), (1, 1, 1),
                                    (9, 1, 1)]:
            for drop in drops:
                extra = {} if drop is None else {"drop_remainder": drop}
                fam.add_dataset(
                    f"{op} {size},{shift},{stride}" + ("" if drop is None else f" drop={drop}"),
                    raw(getattr(tf.raw_ops, op), tf.TensorSpec([None], tf.int64),
                        input_dataset=D.range(7)._variant_tensor, window_size=size,
                        window_shift=shift, window_stride=stride, **extra))
        for index, what in [(1, "size"), (2, "shift"), (3, "stride")]:
            fam.add_dataset_error(f"{op} {what} 0", raw(
                getattr(tf.raw_ops, op), tf.TensorSpec([None], tf.int64),
                input_dataset=D.range(7)._variant_tensor, window_size=2, window_shift=1,
                window_stride=1), lambda g, op=op, i=index: set_input(g, op, i, 0))
    pairs = D.range(8).map(lambda x: (tf.cast(x, tf.float32) / 2, tf.strings.as_string(x)))
    fam.add_dataset("SlidingWindowDataset of pairs", raw(
        tf.raw_ops.SlidingWindowDataset,
        (tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.string)),
        input_dataset=pairs._variant_tensor, window_size=3, window_shift=2, window_stride=1,
        drop_remainder=False))
    fam.add_dataset("SlidingWindowDataset of an empty dataset", raw(
        tf.raw_ops.SlidingWindowDataset, tf.TensorSpec([None], tf.int64),
        input_dataset=D.range(0)._variant_tensor, window_size=2, window_shift=1,
        window_stride=1, drop_remainder=False))


def rebatch_v1(fam):
    def rb(ds, n, op="RebatchDataset", **kw):
        spec = ds.element_spec
        return raw(getattr(tf.raw_ops, op), spec, input_dataset=ds._variant_tensor,
                   num_replicas=n, **kw)
    for b, total, n in [(4, 8, 2), (5, 11, 2), (3, 7, 3), (4, 9, 3), (2, 5, 4), (6, 6, 4),
                        (1, 3, 1)]:
        fam.add_dataset(f"RebatchDataset batch {b} of {total} over {n}",
                        rb(D.range(total).batch(b), n))
    pairs = D.zip((D.range(7), D.range(7).map(lambda x: tf.strings.as_string(x)))).map(
        lambda a, b: (tf.reshape(tf.cast(a, tf.float32), [1]), b)).batch(3)
    fam.add_dataset("RebatchDataset of pairs", rb(pairs, 2))
    fam.add_dataset("RebatchDataset use_fallback=False", rb(D.range(9).batch(4), 3,
                                                           use_fallback=False))
    fam.add_dataset("ExperimentalRebatchDataset", rb(D.range(9).batch(4), 2,
                                                     op="ExperimentalRebatchDataset"))
    fam.add_dataset_error("RebatchDataset 0 replicas", rb(D.range(9).batch(4), 2),
                          lambda g: set_input(g, "RebatchDataset", 1, 0))


def sampling_v1(fam):
    for rate, seed, seed2, n in [(0.5, 1, 2, 40), (0.1, 7, 0, 60), (0.9, 0, 3, 30),
                                 (0.0, 5, 5, 10), (1.0, 5, 5, 10), (0.5, -3, 2**40, 40)]:
        ds = D.range(n)
        fam.add_dataset(f"SamplingDataset rate {rate} seeds {seed},{seed2}", raw(
            tf.raw_ops.SamplingDataset, ds.element_spec, input_dataset=ds._variant_tensor,
            rate=rate, seed=seed, seed2=seed2))
    ds = D.range(25).map(lambda x: (x, tf.strings.as_string(x)))
    fam.add_dataset("SamplingDataset of pairs, repeated", raw(
        tf.raw_ops.SamplingDataset, ds.element_spec, input_dataset=ds._variant_tensor,
        rate=0.3, seed=11, seed2=12).repeat(2))


def lists(fam):
    fam.add_dataset("from_list ints", tf.data.experimental.from_list([1, 2, 3]))
    fam.add_dataset("from_list tuples of varying shapes", tf.data.experimental.from_list(
        [([1, 2], "a"), ([3], "bb"), ([4, 5, 6], "")]))
    fam.add_dataset("from_list dicts", tf.data.experimental.from_list(
        [{"x": 1.5, "y": np.int64(-1)}, {"x": float("nan"), "y": np.int64(2**62)}]))
    fam.add_dataset("from_list matrices", tf.data.experimental.from_list(
        [np.eye(2, dtype=np.float64), np.ones((2, 2)) * -0.0]).batch(2))
    fam.add_dataset("ListDataset, a short last run dropped", raw(
        tf.raw_ops.ListDataset, (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64)),
        tensors=[tf.constant(i, tf.int64) for i in range(5)]))


def matching_files(fam):
    os.makedirs(f"{DATA}/sub", exist_ok=True)
    for name in ["b.txt", "a.txt", "c.csv", "sub/d.txt"]:
        with open(f"{DATA}/{name}", "w") as f:
            f.write(name)
    for op in ["MatchingFilesDataset", "ExperimentalMatchingFilesDataset"]:
        fam.add_dataset(f"{op} *.txt", raw(getattr(tf.raw_ops, op), tf.TensorSpec([], tf.string),
                                           patterns=f"{DATA}/*.txt"))
    fam.add_dataset("MatchingFilesDataset two patterns", raw(
        tf.raw_ops.MatchingFilesDataset, tf.TensorSpec([], tf.string),
        patterns=[f"{DATA}/*.csv", f"{DATA}/*/*.txt"]))
    fam.add_dataset("MatchingFilesDataset overlapping patterns", raw(
        tf.raw_ops.MatchingFilesDataset, tf.TensorSpec([], tf.string),
        patterns=[f"{DATA}/*.txt", f"{DATA}/a*"]))
    fam.add_dataset_error("MatchingFilesDataset no match", raw(
        tf.raw_ops.MatchingFilesDataset, tf.TensorSpec([], tf.string),
        patterns=[f"{DATA}/*.none"]), lambda g: None)


def write_csv_files():
    os.makedirs(f"{DATA}/csv", exist_ok=True)
    files = {
        "basic.csv": "id,name,score,weight\n1,alpha,0.5,2\n2,,1.5,\n3,\"gamma, the third\",,4\n"
                     "-4,\"say \"\"hi\"\"\",2.25,8\n",
        "crlf.csv": "1,a\r\n2,\"b\r\nc\"\r\n3,c\r4,d",
        "multiline.csv": "1,\"line one\nline two\"\n2,\"\"\n3,\"é ü 字\"\n",
        "na.csv": "1,NA,x\nNA,2.5,NA\n3,,z\n",
        "wide.csv": "0,1,2,3,4,5\n10,11,12,13,14,15\n20,21,22,23,24,25\n",
        "pipes.txt": "a|1\nb b|2\n\"c|d\"|3\n",
        "quotes_literal.csv": "\"a\",1\nb\"c,2\n",
        "numbers.csv": " 12 ,1e3,-0,inf\n2147483647,-1.5E-3,nan,-inf\n+7,  2.5,1e400,1e-400\n",
        "bad.csv": "1,a\n2\nx,c\n4,d,e\n5,e\n6,f\"g\n7,\"h\"i\n8,\"ok\"\n9,\"open\n",
        "blank.csv": "1\n\n2\n\n",
        "trailing_delim.csv": "1,\n2,\n",
        "empty.csv": "",
        "header_only.csv": "a,b\n",
        "overflow.csv": "2147483648\n",
        "unclosed.csv": "1,\"open\n",
        "quote_inside.csv": "7,\"h\"i\n",
        "unquoted_quote.csv": "6,f\"g\n",
        "too_many.csv": "4,d,e\n",
    }
    for name, text in files.items():
        with open(f"{DATA}/csv/{name}", "w", newline="") as f:
            f.write(text)
    body = "1,one\n2,two\n3,\"th,ree\"\n".encode()
    import gzip
    import zlib
    with open(f"{DATA}/csv/small.csv.gz", "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(body)
    with open(f"{DATA}/csv/small.csv.zz", "wb") as f:
        f.write(zlib.compress(body))


def csv(fam):
    C = tf.data.experimental.CsvDataset
    d = f"{DATA}/csv"
    i32, i64, f32, f64, s = tf.int32, tf.int64, tf.float32, tf.float64, tf.string
    fam.add_dataset("CsvDataset header, defaults, quotes", C(
        f"{d}/basic.csv", [tf.constant(0, i64), tf.constant("?"), tf.constant(-1.0), i32],
        header=True).ignore_errors())
    fam.add_dataset("CsvDataset required field missing, errors ignored", C(
        f"{d}/basic.csv", [i64, s, f32, tf.constant(0, i32)], header=True).ignore_errors())
    fam.add_dataset("CsvDataset all defaults given", C(
        f"{d}/basic.csv", [tf.constant(0, i64), tf.constant("?"), tf.constant(-1.0, f64),
                           tf.constant(7, i32)], header=True))
    fam.add_dataset("CsvDataset CRLF and CR line ends", C(f"{d}/crlf.csv", [i32, s]))
    fam.add_dataset("CsvDataset quoted newlines and unicode", C(
        f"{d}/multiline.csv", [i64, tf.constant("<empty>")]))
    fam.add_dataset("CsvDataset na_value", C(
        f"{d}/na.csv", [tf.constant(-1, i64), tf.constant(0.0, f64), tf.constant("-")],
        na_value="NA"))
    fam.add_dataset("CsvDataset select_cols", C(f"{d}/wide.csv", [i64, i32, f32],
                                                select_cols=[0, 3, 5]))
    fam.add_dataset("CsvDataset exclude_cols", C(f"{d}/wide.csv", [i64, i64, i64, i64],
                                                 exclude_cols=[1, 4]))
    fam.add_dataset("CsvDataset select_cols past the record, errors ignored", C(
        f"{d}/wide.csv", [i64, i64], select_cols=[1, 6]).ignore_errors())
    fam.add_dataset("CsvDataset field_delim |", C(f"{d}/pipes.txt", [s, i64], field_delim="|"))
    fam.add_dataset("CsvDataset use_quote_delim=False", C(
        f"{d}/quotes_literal.csv", [s, i64], use_quote_delim=False))
    fam.add_dataset("CsvDataset numbers", C(f"{d}/numbers.csv", [i32, f32, f64, f64]))
    fam.add_dataset("CsvDataset numbers as float32", C(f"{d}/numbers.csv", [i64, f64, f32, f32])
                    .ignore_errors())
    fam.add_dataset("CsvDataset bad records skipped by ignore_errors", C(
        f"{d}/bad.csv", [i64, s]).ignore_errors())
    fam.add_dataset("CsvDataset blank lines with a default", C(
        f"{d}/blank.csv", [tf.constant(-9, i64)]))
    fam.add_dataset("CsvDataset trailing delimiter", C(
        f"{d}/trailing_delim.csv", [i64, tf.constant("", s)]))
    fam.add_dataset("CsvDataset several files, empty ones", C(
        [f"{d}/empty.csv", f"{d}/pipes.txt", f"{d}/empty.csv", f"{d}/blank.csv"],
        [tf.constant("", s)], field_delim="\t").ignore_errors())
    fam.add_dataset("CsvDataset header only", C(f"{d}/header_only.csv", [s, s], header=True))
    for comp, ext in [("GZIP", "gz"), ("ZLIB", "zz")]:
        fam.add_dataset(f"CsvDataset {comp}", C(f"{d}/small.csv.{ext}", [i64, s],
                                                compression_type=comp, buffer_size=4))
    fam.add_dataset("CsvDataset in a pipeline", C(
        f"{d}/wide.csv", [i64] * 6).map(lambda *r: tf.stack(r)).batch(2))
    for bad_file, defaults, what in [
            ("bad.csv", [i64, s], "too few fields"),
            ("overflow.csv", [i32], "int32 overflow"),
            ("empty.csv", [s], "empty file with a header"),
            ("too_many.csv", [i64, s], "too many fields"),
            ("unclosed.csv", [i64, s], "unclosed quote"),
            ("quote_inside.csv", [i64, s], "quote inside a string"),
            ("unquoted_quote.csv", [i64, s], "unquoted quote"),
            ("pipes.txt", [i64], "not an int64")]:
        fam.add_dataset_error(f"CsvDataset error: {what}", C(
            f"{d}/{bad_file}", defaults, header=what.endswith("header")), lambda g: None)
    ok = C(f"{d}/wide.csv", [i64, i64], select_cols=[0, 1])
    for index, value, what in [(2, 0, "buffer_size 0"), (4, "ab", "two-char delimiter"),
                               (1, "BZIP", "unknown compression"),
                               (7, [1, 0], "select_cols decreasing"),
                               (7, [-1, 0], "select_cols negative"),
                               (7, [0, 1, 2], "select_cols longer than the outputs")]:
        fam.add_dataset_error(f"CsvDataset error: {what}", ok,
                              lambda g, i=index, v=value: set_input(g, "CSVDatasetV2", i, v))
    for new in ["CSVDataset", "ExperimentalCSVDataset"]:
        fam.add_dataset(new, C(f"{d}/basic.csv", [i64, s, f32, tf.constant(0, i32)],
                               header=True, select_cols=[0, 1, 2, 3]).ignore_errors(),
                        edit=retarget("CSVDatasetV2", new, drop_last=True))


def example(i):
    f = tf.train.Feature
    feats = {"id": f(int64_list=tf.train.Int64List(value=[i * 7 - 10])),
             "score": f(float_list=tf.train.FloatList(value=[i / 4, -i])),
             "tags": f(bytes_list=tf.train.BytesList(value=[f"t{j}é".encode() for j in range(i % 3)]))}
    if i % 2:
        feats["opt"] = f(float_list=tf.train.FloatList(value=[1.5 * i]))
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString(
        deterministic=True)


def parse_examples(fam):
    P = tf.data.experimental.parse_example_dataset
    io = tf.io
    records = D.from_tensor_slices([example(i) for i in range(7)])
    dense = {"id": io.FixedLenFeature([], tf.int64),
             "score": io.FixedLenFeature([2], tf.float32),
             "opt": io.FixedLenFeature([1], tf.float32, default_value=[-1.0])}
    fam.add_dataset("parse_example_dataset dense, batches of 3", records.batch(3).apply(P(dense)))
    fam.add_dataset("parse_example_dataset dense, parallel", records.batch(2).apply(
        P(dense, num_parallel_calls=3)))
    fam.add_dataset("parse_example_dataset of one-record batches", records.batch(1).apply(P(
        {"id": io.FixedLenFeature([], tf.int64)})))
    sparse = {"tags": io.VarLenFeature(tf.string), "id": io.FixedLenFeature([], tf.int64),
              "score": io.VarLenFeature(tf.float32)}
    fam.add_dataset("parse_example_dataset sparse features densified", records.batch(3).apply(
        P(sparse)).map(lambda d: (tf.sparse.to_dense(d["tags"]), d["id"],
                                  tf.sparse.to_dense(d["score"]), d["tags"].indices)))
    fam.add_dataset_error("parse_example_dataset a required feature missing", records.batch(
        4).apply(P({"opt": io.FixedLenFeature([1], tf.float32)})), lambda g: None)
    fam.add_dataset_error("parse_example_dataset bad bytes", D.from_tensor_slices(
        [b"\x0a\x05garbage"]).batch(1).apply(P(dense)), lambda g: None)
    for new in ["ParseExampleDataset", "ExperimentalParseExampleDataset"]:
        fam.add_dataset(new, records.batch(3).apply(P(dense)),
                        edit=retarget("ParseExampleDatasetV2", new))


def sparse_elements(fam):
    """SparseTensor elements, read back by a map (a pipeline serves tensors)."""
    st = tf.sparse.SparseTensor([[0, 1], [2, 0], [2, 2], [3, 1]], [1.5, -2.0, 3.0, float("nan")],
                                [5, 3])
    parts = lambda s: (s.indices, s.values, s.dense_shape)  # noqa: E731

    def slices(indices, values, shape):
        """SparseTensorSliceDataset (TensorFlow 2.21's from_tensor_slices of a
        SparseTensor writes a TensorSliceDataset of serialized rows instead)."""
        indices, values, shape = (tf.constant(indices, tf.int64), tf.constant(values),
                                  tf.constant(shape, tf.int64))
        r = len(shape.numpy()) - 1
        spec = (tf.TensorSpec([None, r], tf.int64), tf.TensorSpec([None], values.dtype),
                tf.TensorSpec([r], tf.int64))
        return raw(tf.raw_ops.SparseTensorSliceDataset, spec, indices=indices, values=values,
                   dense_shape=shape)
    fam.add_dataset("SparseTensorSliceDataset", slices(
        [[0, 1], [2, 0], [2, 2], [3, 1]], [1.5, -2.0, 3.0, float("nan")], [5, 3]))
    fam.add_dataset("SparseTensorSliceDataset rank 3 strings", slices(
        [[0, 0, 1], [0, 1, 0], [1, 1, 1]], ["a", "é", ""], [2, 2, 2]))
    fam.add_dataset("SparseTensorSliceDataset empty", slices(
        np.zeros([0, 2], np.int64), np.zeros([0], np.int32), [3, 4]))
    fam.add_dataset("SparseTensorSliceDataset rank 1", slices([[1], [3]], np.array([7, 8]), [4]))
    fam.add_dataset("SparseTensorSliceDataset no rows", slices(
        np.zeros([0, 2], np.int64), np.zeros([0], np.float64), [0, 4]))
    fam.add_dataset("from_tensor_slices of a SparseTensor, densified", D.from_tensor_slices(
        st).map(tf.sparse.to_dense))
    ok = slices([[0, 1], [2, 0]], [1, 2], [3, 3])
    for index, value, what in [
            (0, np.array([[2, 0], [0, 1]], np.int64), "out of order"),
            (1, np.array([1, 2, 3], np.int32), "more values than indices"),
            (0, np.array([0, 2], np.int64), "indices a vector"),
            (2, np.array([3, 3, 3], np.int64), "shape of another rank")]:
        fam.add_dataset_error(f"SparseTensorSliceDataset {what}", ok,
                              lambda g, i=index, v=value: set_input(
                                  g, "SparseTensorSliceDataset", i, v))
    rows = D.range(1, 7).map(lambda x: tf.range(x, dtype=tf.int32) * 2)
    B = tf.data.experimental.dense_to_sparse_batch
    fam.add_dataset("dense_to_sparse_batch 2 to [6]", rows.apply(B(2, [6])).map(parts))
    fam.add_dataset("dense_to_sparse_batch 4 to [8], short last batch", rows.apply(
        B(4, [8])).map(parts))
    grids = D.range(1, 4).map(lambda x: tf.fill([x, 3 - x + 1], tf.strings.as_string(x)))
    fam.add_dataset("dense_to_sparse_batch of string matrices", grids.apply(B(2, [3, 3])).map(
        parts))
    fam.add_dataset("dense_to_sparse_batch densified", rows.apply(B(3, [6])).map(
        tf.sparse.to_dense))
    fam.add_dataset_error("dense_to_sparse_batch row larger than the shape", rows.apply(
        B(2, [3])).map(parts), lambda g: None)
    fam.add_dataset_error("dense_to_sparse_batch rank mismatch", rows.apply(
        B(2, [3])).map(parts), lambda g: set_input(g, "DenseToSparseBatchDataset", 2,
                                                   np.array([3, 3], np.int64)))
    fam.add_dataset("ExperimentalDenseToSparseBatchDataset", rows.apply(B(2, [6])).map(parts),
                    edit=rename_op("DenseToSparseBatchDataset",
                                   "ExperimentalDenseToSparseBatchDataset"))


def sql(fam):
    import sqlite3
    path = f"{DATA}/people.db"
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.execute("create table people (id integer, name text, score real, flag integer)")
    db.executemany("insert into people values (?, ?, ?, ?)", [
        (1, "ada", 1.5, 1), (2, None, None, 0), (None, "é 字", 2.0, None),
        (2**40, "", -3.25, 7), (-5, "x" * 300, 1e300, -1)])
    db.commit()
    db.close()
    S = tf.data.experimental.SqlDataset
    i64, i32, s, f64, f32 = tf.int64, tf.int32, tf.string, tf.float64, tf.float32
    fam.add_dataset("SqlDataset rows", S("sqlite", path, "select id, name, score from people",
                                         (i64, s, f64)))
    fam.add_dataset("SqlDataset narrow and unsigned types", S(
        "sqlite", path, "select id, id, id, id, flag, flag from people",
        (tf.int8, tf.int16, i32, tf.uint8, tf.uint16, tf.bool)))
    fam.add_dataset("SqlDataset integers as doubles", S(
        "sqlite", path, "select id, score from people", (f64, f64)))
    fam.add_dataset_error("SqlDataset float32 refused", S(
        "sqlite", path, "select score from people", (f64,)),
        lambda g: [n.attr["output_types"].list.type.__setitem__(0, 1)
                   for n in g.node if n.op == "SqlDataset"])
    fam.add_dataset("SqlDataset integers as text", S(
        "sqlite", path, "select id, flag from people where id is not null or flag is null",
        (s, s)))
    fam.add_dataset("SqlDataset where, order by, in a pipeline", S(
        "sqlite", path, "select name, id from people where id > 0 order by id desc",
        (s, i64)).batch(2))
    fam.add_dataset("SqlDataset no rows", S("sqlite", path, "select id from people where 0",
                                            (i64,)))
    fam.add_dataset_error("SqlDataset column count", S("sqlite", path,
                                                       "select id, name from people",
                                                       (i64, s, f64)), lambda g: None)
    fam.add_dataset_error("SqlDataset bad query", S("sqlite", path, "selec id from people",
                                                    (i64,)), lambda g: None)
    fam.add_dataset_error("SqlDataset no such table", S("sqlite", path, "select a from nope",
                                                        (i64,)), lambda g: None)
    fam.add_dataset_error("SqlDataset driver", S("sqlite", path, "select id from people", (i64,)),
                          lambda g: set_input(g, "SqlDataset", 0, "mysql"))
    fam.add_dataset("ExperimentalSqlDataset", S("sqlite", path, "select id from people", (i64,)),
                    edit=rename_op("SqlDataset", "ExperimentalSqlDataset"))


def family():
    fam = Family("datasets_more")
    wrappers(fam)
    older_names(fam)
    padded_batch_v1(fam)
    sliding(fam)
    lists(fam)
    rebatch_v1(fam)
    sampling_v1(fam)
    parse_examples(fam)
    sparse_elements(fam)
    with in_crate():
        matching_files(fam)
        write_csv_files()
        csv(fam)
        sql(fam)
    return fam
