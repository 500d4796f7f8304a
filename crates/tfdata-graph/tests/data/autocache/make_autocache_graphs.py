"""Writes the TensorFlow 2.21 dataset graphs `tfdata_graph::autocache`'s unit
tests read (`src/autocache/tests.rs`): the GraphDefs real `tf.data` pipelines
serialise to, as TensorFlow's data service client sends them.

    ~/.cache/tfdata-tf-2.21/bin/python make_autocache_graphs.py

Each case runs in a fresh Python process (`python make_autocache_graphs.py
CASE OUT`), so `decode_a` and `decode_b` are one pipeline registered from two
processes; `decode_b`'s process builds other datasets and functions first, so
TensorFlow's per-process counters (function names like
`__inference_Dataset_map_lambda_123`, node names and `metadata`) differ.
The file names are never opened here; the tests point them at files of
their own.
"""

import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

FILES = ["/nonexistent/autocache-corpus/images-0.tfrecord",
         "/nonexistent/autocache-corpus/images-1.tfrecord"]

CASES = ["decode_a", "decode_b", "decode_other_size", "distribute", "random", "stateless",
         "shuffle_seeded", "shuffle_reshuffled", "shuffle_unseeded", "py_function", "matching_files",
         "zip", "range_map"]


def build(case):
    import tensorflow as tf

    def decode_resize(size):
        def f(record):
            image = tf.io.decode_jpeg(record, channels=3)
            return tf.cast(tf.image.resize(image, [size, size]), tf.uint8)
        return f

    if case == "decode_b":
        # Other work first: every counter TensorFlow keeps moves on.
        for i in range(3):
            list(tf.data.Dataset.range(3).map(lambda x: x * 2).filter(lambda x: x > 0))
            tf.function(lambda x: x + i)(tf.constant(1))
    records = tf.data.TFRecordDataset(FILES)
    if case in ("decode_a", "decode_b"):
        return records.map(decode_resize(16)).batch(4)
    if case == "decode_other_size":
        return records.map(decode_resize(8)).batch(4)
    if case == "distribute":
        from tensorflow.python.data.experimental.ops import compression_ops
        ds = records.map(decode_resize(16)).prefetch(2)
        # What `distribute(compression="AUTO")` appends before registering.
        return ds.map(lambda *x: compression_ops.compress(x), num_parallel_calls=tf.data.AUTOTUNE)
    if case == "random":
        return records.map(decode_resize(16)).map(
            lambda x: tf.cast(x, tf.float32) + tf.random.uniform([]))
    if case == "stateless":
        return records.map(decode_resize(16)).map(
            lambda x: tf.cast(x, tf.float32) + tf.random.stateless_uniform([], seed=[1, 2]))
    if case == "shuffle_seeded":
        return records.shuffle(8, seed=42, reshuffle_each_iteration=False).map(decode_resize(16))
    if case == "shuffle_reshuffled":
        return records.shuffle(8, seed=42).map(decode_resize(16))
    if case == "shuffle_unseeded":
        return records.shuffle(8, reshuffle_each_iteration=False).map(decode_resize(16))
    if case == "py_function":
        return records.map(lambda r: tf.py_function(lambda x: x, [r], tf.string))
    if case == "matching_files":
        # File names listed when the pipeline runs (in the function, so
        # not when the graph is built, as eager `list_files` would).
        patterns = tf.data.Dataset.from_tensor_slices(["/nonexistent/autocache-corpus/*.tfrecord"])
        return patterns.flat_map(
            lambda p: tf.data.TFRecordDataset(tf.io.matching_files(p))).map(decode_resize(16))
    if case == "range_map":
        return tf.data.Dataset.range(10).map(lambda x: x * 3).batch(4)
    if case == "zip":
        return tf.data.Dataset.zip((records, records)).map(lambda a, b: a)
    raise ValueError(case)


def write(case, out):
    import tensorflow as tf

    ds = build(case)
    graph = ds._as_serialized_graph(
        external_state_policy=tf.data.experimental.ExternalStatePolicy.WARN,
        strip_device_assignment=True)
    with open(out, "wb") as f:
        f.write(graph.numpy())


if __name__ == "__main__":
    if len(sys.argv) == 3:
        write(sys.argv[1], sys.argv[2])
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        for case in CASES:
            subprocess.run([sys.executable, __file__, case, os.path.join(here, f"{case}.pb")],
                           check=True)
            print("wrote", case)
