"""Dataset ops beyond the basics, written as users write pipelines: windows
over time series, running state with scan, bucketing text by length,
sampling from several datasets, and the small filters (unique, take_while,
ignore_errors), with their edge cases and bad arguments."""

import numpy as np  # noqa: F401
import tensorflow as tf

from harness import Family, rename_op, set_input

D = tf.data.Dataset


def windows(fam):
    series = D.range(10)
    # Time series: sliding windows batched back to tensors.
    for size, shift, stride, drop in [(3, 1, 1, True), (3, 1, 1, False), (4, 2, 1, True),
                                      (4, 2, 1, False), (3, 2, 2, True), (3, 2, 2, False),
                                      (2, 5, 1, False), (2, 5, 3, True), (1, 1, 1, False),
                                      (20, 1, 1, True), (20, 1, 1, False), (10, 10, 1, True)]:
        fam.add_dataset(f"window {size},{shift},{stride},drop={drop} of range(10)",
                        series.window(size, shift, stride, drop).flat_map(
                            lambda w, size=size: w.batch(size)))
    fam.add_dataset("window of an empty dataset", D.range(0).window(3).flat_map(
        lambda w: w.batch(3)))
    fam.add_dataset("window default shift", D.range(7).window(3).flat_map(lambda w: w.batch(3)))
    # Features and labels: windows of a zipped series, tuples and dicts.
    feats = D.from_tensor_slices(np.arange(24, dtype=np.float32).reshape(12, 2))
    labels = D.range(12).map(lambda i: i % 3)
    fam.add_dataset("window of (features, label) tuples", D.zip((feats, labels)).window(
        4, 2, 1, True).flat_map(lambda x, y: D.zip((x.batch(4), y.batch(4)))))
    fam.add_dataset("window of dicts", D.zip((feats, labels)).map(
        lambda x, y: {"x": x, "y": y}).window(5, 3, 1, False).flat_map(
        lambda d: D.zip({"x": d["x"].batch(5), "y": d["y"].batch(5)})))
    # Forecasting: inputs are the window's head, the target its last step.
    fam.add_dataset("window split into inputs and target", D.range(20).map(
        lambda i: tf.cast(i, tf.float32) * 0.5).window(6, 1, 1, True).flat_map(
        lambda w: w.batch(6)).map(lambda w: (w[:-1], w[-1])).batch(4))
    fam.add_dataset("window of strings", D.from_tensor_slices(
        ["a", "bb", "ccc", "", "eeeee"]).window(2, 1, 1, False).flat_map(lambda w: w.batch(2)))
    fam.add_dataset("window of variable-length rows, padded", D.range(1, 7).map(
        lambda i: tf.range(i)).window(3, 2, 1, False).flat_map(
        lambda w: w.padded_batch(3, padded_shapes=[None])))
    fam.add_dataset("window interleaved", D.range(12).window(4, 4).interleave(
        lambda w: w.map(lambda x: x * 10), cycle_length=2, block_length=1))
    fam.add_dataset("window reduced inside flat_map", D.range(9).window(3).flat_map(
        lambda w: w.take(2).skip(1)))
    fam.add_dataset("windows taken before flat_map", D.range(9).window(2).take(3).flat_map(
        lambda w: w.batch(2)))
    for op_index, what in [(1, "size"), (2, "shift"), (3, "stride")]:
        for bad in [0, -2]:
            fam.add_dataset_error(f"window {what} {bad}", D.range(5).window(2).flat_map(
                lambda w: w.batch(2)), lambda g, i=op_index, v=bad: set_input(
                    g, "WindowDataset", i, v))


def scans(fam):
    fam.add_dataset("scan running sum", D.range(10).scan(
        tf.constant(0, tf.int64), lambda s, x: (s + x, s + x)))
    fam.add_dataset("scan running mean with a (sum, count) state", D.range(1, 8).map(
        lambda x: tf.cast(x, tf.float32) * 1.5).scan(
        (tf.constant(0.0), tf.constant(0)),
        lambda st, x: ((st[0] + x, st[1] + 1), (st[0] + x) / tf.cast(st[1] + 1, tf.float32))))
    fam.add_dataset("scan exponential moving average", D.from_tensor_slices(
        np.linspace(-2, 3, 12).astype(np.float32)).scan(
        tf.constant(0.0), lambda ema, x: (0.9 * ema + 0.1 * x, (x, 0.9 * ema + 0.1 * x))))
    fam.add_dataset("scan growing history (relaxed state shape)", D.range(5).scan(
        tf.zeros([0], tf.int64), lambda h, x: (tf.concat([h, [x]], 0), h)))
    fam.add_dataset("scan string accumulation", D.from_tensor_slices(["a", "b", "c"]).scan(
        tf.constant(""), lambda acc, x: (tf.strings.join([acc, x]), tf.strings.length(acc))))
    fam.add_dataset("scan over dict elements", D.range(6).map(
        lambda i: {"id": i, "v": tf.cast(i, tf.float64) / 4}).scan(
        tf.constant(0.0, tf.float64),
        lambda s, d: (s + d["v"], {"id": d["id"], "total": s + d["v"]})))
    fam.add_dataset("scan with a captured step", D.range(6).scan(
        tf.constant(1, tf.int64), lambda s, x, k=tf.constant(3, tf.int64): (s * k % 101, s)))
    fam.add_dataset("scan of an empty dataset", D.range(0).scan(
        tf.constant(0, tf.int64), lambda s, x: (s + x, s)))
    fam.add_dataset("scan of an infinite dataset, taken", D.range(3).repeat().scan(
        tf.constant(0, tf.int64), lambda s, x: (s + x, s)).take(8))
    fam.add_dataset("scan then batch", D.range(7).scan(
        tf.constant(0, tf.int64), lambda s, x: (s + 1, (s, x * x))).batch(3))
    fam.add_dataset("scan counter resets per element (per-row flat_map)", D.range(3).flat_map(
        lambda n: D.range(n + 2).scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s))))


def groups(fam):
    fam.add_dataset("group_by_window parity, window 3", D.range(11).group_by_window(
        key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(3), window_size=3))
    fam.add_dataset("group_by_window keys flushed in key order at the end", D.from_tensor_slices(
        np.array([5, 3, 9, 3, 1, 5, 7, 9, 2], np.int64)).group_by_window(
        key_func=lambda x: 10 - x, reduce_func=lambda k, w: w.batch(10), window_size=2))
    fam.add_dataset("group_by_window negative keys", D.range(-6, 6).group_by_window(
        key_func=lambda x: x // 3, reduce_func=lambda k, w: w.batch(5), window_size=5))
    fam.add_dataset("group_by_window reduce uses the key", D.range(12).group_by_window(
        key_func=lambda x: x % 3,
        reduce_func=lambda k, w: w.batch(2).map(lambda b: (tf.fill([2], k), b)),
        window_size=2))
    fam.add_dataset("group_by_window window_size_func", D.range(20).group_by_window(
        key_func=lambda x: x % 4, reduce_func=lambda k, w: w.batch(8),
        window_size_func=lambda k: k + 1))
    fam.add_dataset("group_by_window of tuples", D.zip((D.range(8), D.range(8).map(
        lambda x: tf.strings.as_string(x)))).group_by_window(
        key_func=lambda a, b: a % 2, reduce_func=lambda k, w: w.batch(3), window_size=3))
    fam.add_dataset("group_by_window of an empty dataset", D.range(0).group_by_window(
        key_func=lambda x: x, reduce_func=lambda k, w: w.batch(2), window_size=2))
    fam.add_dataset("group_by_window of an infinite dataset, taken", D.range(5).repeat()
                    .group_by_window(key_func=lambda x: x % 2,
                                     reduce_func=lambda k, w: w.batch(4), window_size=4).take(5))
    # Text bucketing: sequences of different lengths, padded per bucket.
    lengths = [3, 7, 1, 12, 5, 5, 2, 9, 14, 4, 8, 6, 1, 11, 3, 10]
    seqs = D.from_tensor_slices(tf.constant(lengths, tf.int32)).map(
        lambda n: tf.range(1, n + 1))
    fam.add_dataset("group_by_window by length, padded", seqs.group_by_window(
        key_func=lambda s: tf.cast(tf.size(s) // 5, tf.int64),
        reduce_func=lambda k, w: w.padded_batch(3, padded_shapes=[None]), window_size=3))
    fam.add_dataset("bucket_by_sequence_length", seqs.bucket_by_sequence_length(
        element_length_func=lambda s: tf.size(s), bucket_boundaries=[4, 8, 12],
        bucket_batch_sizes=[3, 2, 2, 1]))
    fam.add_dataset("bucket_by_sequence_length padded to bucket, no remainder", seqs.filter(
        lambda s: tf.size(s) < 10).bucket_by_sequence_length(
        element_length_func=lambda s: tf.size(s), bucket_boundaries=[5, 10],
        bucket_batch_sizes=[2, 2, 2], pad_to_bucket_boundary=True, drop_remainder=True))
    fam.add_dataset("bucket_by_sequence_length of (tokens, label) with padding value",
                    D.zip((seqs, D.range(16))).bucket_by_sequence_length(
                        element_length_func=lambda s, y: tf.size(s),
                        bucket_boundaries=[6], bucket_batch_sizes=[4, 3],
                        padding_values=(tf.constant(-1, tf.int32), tf.constant(0, tf.int64))))
    R = tf.data.experimental.Reducer
    fam.add_dataset("group_by_reducer sums per key", D.range(20).apply(
        tf.data.experimental.group_by_reducer(
            key_func=lambda x: x % 3, reducer=R(
                init_func=lambda k: tf.constant(0, tf.int64),
                reduce_func=lambda s, x: s + x, finalize_func=lambda s: s))))
    fam.add_dataset("group_by_reducer (count, sum) to mean, keys out of order",
                    D.from_tensor_slices(tf.constant([5, 1, 9, 3, 7, 2, 8], tf.int64)).apply(
                        tf.data.experimental.group_by_reducer(
                            key_func=lambda x: 10 - x % 4, reducer=R(
                                init_func=lambda k: (tf.constant(0, tf.int64), k),
                                reduce_func=lambda s, x: (s[0] + 1, s[1] + x),
                                finalize_func=lambda n, t: (n, t, tf.cast(t, tf.float64) /
                                                            tf.cast(n, tf.float64))))))
    fam.add_dataset("group_by_reducer of an empty dataset", D.range(0).apply(
        tf.data.experimental.group_by_reducer(
            key_func=lambda x: x, reducer=R(
                init_func=lambda k: tf.constant(0, tf.int64),
                reduce_func=lambda s, x: s + x, finalize_func=lambda s: s))))
    # Python writes ExperimentalGroupByReducerDataset; the newer name runs the same kernel.
    fam.add_dataset("GroupByReducerDataset", D.range(7).apply(
        tf.data.experimental.group_by_reducer(
            key_func=lambda x: x // 3, reducer=R(
                init_func=lambda k: tf.constant(1, tf.int64),
                reduce_func=lambda s, x: s * (x + 1), finalize_func=lambda s: s))),
        edit=rename_op("ExperimentalGroupByReducerDataset", "GroupByReducerDataset"))
    # Bad sizes come from the window size function, at run time.
    fam.add_dataset_error("group_by_window window size 0", D.range(5).group_by_window(
        key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(2),
        window_size_func=lambda k: k - k), lambda g: None)
    fam.add_dataset_error("group_by_window window size -1", D.range(5).group_by_window(
        key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(2),
        window_size_func=lambda k: k - 2), lambda g: None)

def sampling(fam):
    fam.add_dataset("random seed 4", D.random(seed=4).take(10))
    fam.add_dataset("random seed 4 rerandomized per epoch", D.random(
        seed=4, rerandomize_each_iteration=True).take(3).repeat(3), iterators=1)
    fam.add_dataset("random seed 7 as dice", D.random(seed=7).map(lambda x: x % 6 + 1).take(12))
    fam.add_dataset("random zipped with data", D.zip((D.range(5), D.random(seed=11))))
    a, b, c = D.range(0, 20), D.range(100, 110), D.range(1000, 1005)
    fam.add_dataset("sample_from_datasets 0.3/0.7 seed 42", D.sample_from_datasets(
        [D.range(5), D.range(10, 15)], weights=[0.3, 0.7], seed=42))
    fam.add_dataset("sample_from_datasets three inputs seed 5", D.sample_from_datasets(
        [a, b, c], weights=[0.5, 0.3, 0.2], seed=5))
    fam.add_dataset("sample_from_datasets uniform seed 9", D.sample_from_datasets(
        [a, b, c], seed=9))
    fam.add_dataset("sample_from_datasets zero weight", D.sample_from_datasets(
        [a, b], weights=[0.0, 1.0], seed=3))
    fam.add_dataset("sample_from_datasets stop on empty", D.sample_from_datasets(
        [a, c], weights=[0.5, 0.5], seed=2, stop_on_empty_dataset=True))
    fam.add_dataset("sample_from_datasets of infinite inputs, taken", D.sample_from_datasets(
        [D.range(3).repeat(), D.range(10, 13).repeat()], weights=[0.2, 0.8], seed=8).take(30))
    fam.add_dataset("sample_from_datasets of (x, y) pairs", D.sample_from_datasets(
        [D.zip((a, a.map(lambda x: x * 2))), D.zip((b, b.map(lambda x: -x)))],
        weights=[0.6, 0.4], seed=13))
    fam.add_dataset("sample_from_datasets weights from a dataset", D.sample_from_datasets(
        [a, b], weights=D.from_tensor_slices([[0.9, 0.1], [0.1, 0.9]] * 10), seed=21))
    fam.add_dataset("choose_from_datasets", D.choose_from_datasets(
        [D.from_tensor_slices(["a", "b", "c"]), D.from_tensor_slices(["x", "y"])],
        D.from_tensor_slices(tf.constant([0, 1, 0, 1, 1, 0, 0], tf.int64))))
    fam.add_dataset("choose_from_datasets round robin, stop on empty", D.choose_from_datasets(
        [a, c], D.range(2).repeat(), stop_on_empty_dataset=True))
    fam.add_dataset("choose_from_datasets skips exhausted inputs", D.choose_from_datasets(
        [c, b], D.range(2).repeat(8), stop_on_empty_dataset=False))
    fam.add_dataset_error("choose_from_datasets index out of range", D.choose_from_datasets(
        [a, b], D.from_tensor_slices(tf.constant([0, 1, 2], tf.int64))), lambda g: None)
    fam.add_dataset_error("choose_from_datasets negative index", D.choose_from_datasets(
        [a, b], D.from_tensor_slices(tf.constant([1, -1], tf.int64))), lambda g: None)
    # The kernel itself.
    for case_id, logits, n, seed, dtype in [
            ("multinomial one row", [[0.1, 2.0, -1.0]], 6, [1, 2], tf.int64),
            ("multinomial rows, int32", [[1.0, 1.0], [-3.0, 4.0], [0.0, 0.0]], 5, [7, -3],
             tf.int32),
            ("multinomial -inf logit", [[-np.inf, 0.0, 0.5, -np.inf]], 8, [4, 4], tf.int64),
            ("multinomial zero samples", [[0.0, 1.0]], 0, [1, 1], tf.int64),
            ("multinomial wide", [np.linspace(-3, 3, 40)], 12, [123, 456], tf.int64)]:
        for ldtype in (tf.float32, tf.float64):
            fam.add("StatelessMultinomial", lambda lg, ns, sd, dtype=dtype:
                    tf.raw_ops.StatelessMultinomial(logits=lg, num_samples=ns, seed=sd,
                                                    output_dtype=dtype),
                    [tf.constant(logits, ldtype), tf.constant(n, tf.int32),
                     tf.constant(seed, tf.int64)], f"{case_id} {ldtype.name}")
    fam.add("StatelessMultinomial", lambda lg, ns, sd: tf.raw_ops.StatelessMultinomial(
        logits=lg, num_samples=ns, seed=sd), [tf.constant([1.0, 2.0]), tf.constant(2),
                                              tf.constant([1, 2], tf.int64)],
            "multinomial logits not a matrix")
    fam.add("StatelessMultinomial", lambda lg, ns, sd: tf.raw_ops.StatelessMultinomial(
        logits=lg, num_samples=ns, seed=sd), [tf.constant([[1.0, 2.0]]), tf.constant(-1),
                                              tf.constant([1, 2], tf.int64)],
            "multinomial negative samples")


def selection(fam):
    fam.add_dataset("unique ints", D.from_tensor_slices(
        tf.constant([3, 1, 3, 2, 1, 5, 2, 3], tf.int64)).unique())
    fam.add_dataset("unique int32 vectors", D.from_tensor_slices(
        tf.constant([[1, 2], [1, 2], [2, 1], [1, 2], [2, 2]], tf.int32)).unique())
    fam.add_dataset("unique strings", D.from_tensor_slices(
        ["the", "cat", "the", "hat", "", "cat", ""]).unique())
    fam.add_dataset("unique of an empty dataset", D.range(0).unique())
    fam.add_dataset("unique of a repeat", D.range(4).repeat(3).unique())
    fam.add_dataset("take_while", D.range(10).take_while(lambda x: x < 4))
    fam.add_dataset("take_while never true", D.range(10).take_while(lambda x: x > 100))
    fam.add_dataset("take_while stops at the first false", D.from_tensor_slices(
        tf.constant([1, 2, 9, 3, 1], tf.int64)).take_while(lambda x: x < 5))
    fam.add_dataset("take_while of an infinite dataset", D.range(5).repeat().take_while(
        lambda x, k=tf.constant(4, tf.int64): x < k).take(20))
    fam.add_dataset("take_while of tuples", D.zip((D.range(8), D.range(8).map(
        lambda x: x * x))).take_while(lambda a, b: b < 20))
    fam.add_dataset("ignore_errors after a failing map", D.from_tensor_slices(
        [1.0, 2.0, 0.0, 4.0, 0.0, 8.0]).map(
        lambda x: tf.debugging.check_numerics(1.0 / x, "division")).ignore_errors())
    fam.add_dataset("ignore_errors after a parallel map and prefetch", D.from_tensor_slices(
        [1.0, 0.0, 2.0, 0.0, 0.0, 4.0, 5.0, 0.0]).map(
        lambda x: tf.debugging.check_numerics(1.0 / x, "division"), num_parallel_calls=3,
        deterministic=True).prefetch(2).ignore_errors())
    fam.add_dataset("ignore_errors of strings to numbers", D.from_tensor_slices(
        ["1", "x", "3", "", "5"]).map(
        lambda s: tf.strings.to_number(s, tf.int32)).ignore_errors())
    fam.add_dataset("ignore_errors with nothing to ignore", D.range(4).ignore_errors())
    fam.add_dataset("ignore_errors every element fails", D.from_tensor_slices(
        [0.0, 0.0]).map(lambda x: tf.debugging.check_numerics(x / x, "nan")).ignore_errors())
    for sizes, drop in [(3, False), (3, True), ([2, 3], False), ([2, 3], True),
                        ([0, 2], False), (5, False), (1, False)]:
        fam.add_dataset(f"rebatch {sizes} drop={drop} of batch(4)", D.range(10).batch(4).rebatch(
            sizes, drop_remainder=drop))
    fam.add_dataset("rebatch of (x, y) batches", D.zip((D.range(7), D.range(7).map(
        lambda x: tf.strings.as_string(x)))).batch(3).rebatch(2))
    fam.add_dataset("rebatch of matrices", D.from_tensor_slices(
        np.arange(30, dtype=np.float32).reshape(10, 3)).batch(4).rebatch([3, 1]))


def aliases(fam):
    """The older names TensorFlow 2.21 still registers for the same kernels
    (not ExperimentalRandomDataset: TensorFlow 2.21 fails to iterate it, its
    kernel serialising it with RandomDatasetV2's inputs)."""
    for old, new, ds in [
            ("ScanDataset", "ExperimentalScanDataset", D.range(6).scan(
                tf.constant(0, tf.int64), lambda s, x: (s + x, s))),
            ("GroupByWindowDataset", "ExperimentalGroupByWindowDataset", D.range(9).group_by_window(
                key_func=lambda x: x % 2, reduce_func=lambda k, w: w.batch(3), window_size=3)),
            ("DirectedInterleaveDataset", "ExperimentalDirectedInterleaveDataset",
             D.choose_from_datasets([D.range(3), D.range(5, 8)], D.range(2).repeat(3))),
            ("UniqueDataset", "ExperimentalUniqueDataset", D.from_tensor_slices(
                tf.constant([2, 2, 1], tf.int64)).unique()),
            ("TakeWhileDataset", "ExperimentalTakeWhileDataset", D.range(9).take_while(
                lambda x: x < 5)),
            ("IgnoreErrorsDataset", "ExperimentalIgnoreErrorsDataset", D.from_tensor_slices(
                [1.0, 0.0, 2.0]).map(lambda x: tf.debugging.check_numerics(1 / x, "x"))
             .ignore_errors())]:
        fam.add_dataset(f"{new}", ds, edit=rename_op(old, new))


def family():
    fam = Family("datasets")
    windows(fam)
    scans(fam)
    groups(fam)
    sampling(fam)
    selection(fam)
    aliases(fam)
    return fam
