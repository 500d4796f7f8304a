#!/usr/bin/env python3
"""TensorFlow's client side of tfdata-bench's `graph-pipeline` scenario.

The `pipeline` scenario's image pipeline, written in tf.data
(`tf_pipeline.build`), read by TensorFlow's own client through
`distribute(parallel_epochs)` from the dispatcher at `--service`: the
workers behind it (tfdata's, or TensorFlow's, started by tfdata-bench in
their own processes) run the graph TensorFlow registers. Measured as
`tf_pipeline.py` measures; prints one JSON object:

    {"examples_per_sec": ..., "examples": ..., "seconds": ..., "batches": ...,
     "startup_seconds": ..., "cpu_seconds": ..., "peak_rss_bytes": ...,
     "tensorflow": "2.21.0"}

(`cpu_seconds` and `peak_rss_bytes` are this client's.)

`--pipeline` picks another pipeline of the kinds users write (text,
recommendation features, time-series windows: see PIPELINES) on data made
here.

With `--serve-worker ADDRESS` it instead runs TensorFlow's WorkerServer for
the dispatcher at ADDRESS until stdin closes.
"""

import argparse
import json
import os
import resource
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import tf_pipeline  # noqa: E402


# Pipelines of issue 33's kinds, on data made here (the same every run): a
# text pipeline (normalise, split, hash, pad), recommendation features
# (batches of tf.train.Examples with variable-length ids parsed and
# densified), and sliding windows over a time series. Each yields batches;
# one epoch is EPOCH examples.
EPOCH = 8192


def sentences():
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Data",
             "service", "moves", "input", "preprocessing", "off", "trainers", "café!"]
    out = []
    for i in range(EPOCH):
        n = 3 + (i * 7) % 17
        out.append(" ".join(words[(i * 31 + k * 5) % len(words)] for k in range(n)))
    return out


def text_pipeline(batch_size):
    def hashed(s):
        s = tf.strings.lower(s, encoding="utf-8")
        s = tf.strings.regex_replace(s, r"[^\w\s]", "")
        ids = tf.strings.to_hash_bucket_fast(tf.strings.split(s), 100_000)[:32]
        return tf.pad(ids, [[0, 32 - tf.shape(ids)[0]]], constant_values=-1)
    return (tf.data.Dataset.from_tensor_slices(sentences()).repeat()
            .map(hashed, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size))


def recsys_pipeline(batch_size):
    records = []
    for i in range(EPOCH):
        items = [(i * 131 + k * 17) % 50_000 for k in range(i % 12)]
        records.append(tf.train.Example(features=tf.train.Features(feature={
            "user": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"user%d" % (i % 977)])),
            "items": tf.train.Feature(int64_list=tf.train.Int64List(value=items)),
            "age": tf.train.Feature(float_list=tf.train.FloatList(value=[float(18 + i % 60)])),
        })).SerializeToString())
    spec = {"user": tf.io.FixedLenFeature([], tf.string),
            "items": tf.io.VarLenFeature(tf.int64),
            "age": tf.io.FixedLenFeature([], tf.float32)}

    def parse(batch):
        f = tf.io.parse_example(batch, spec)
        return (tf.sparse.to_dense(f["items"], default_value=-1),
                tf.strings.to_hash_bucket_fast(f["user"], 1024), (f["age"] - 40.0) / 20.0)
    return (tf.data.Dataset.from_tensor_slices(records).repeat().batch(batch_size)
            .map(parse, num_parallel_calls=tf.data.AUTOTUNE))


def windows_pipeline(batch_size):
    series = tf.data.Dataset.range(EPOCH + 63).map(
        lambda i: tf.sin(tf.cast(i, tf.float32) / 10.0))
    return (series.window(64, shift=1, drop_remainder=True)
            .flat_map(lambda w: w.batch(64)).map(lambda w: (w[:-1], w[-1]))
            .repeat().batch(batch_size))


PIPELINES = {"text": text_pipeline, "recsys": recsys_pipeline, "windows": windows_pipeline}


def serve_worker(dispatcher_address: str) -> int:
    service = tf.data.experimental.service
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher_address))
    print("serving", flush=True)
    sys.stdin.read()
    worker.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve-worker")
    parser.add_argument("--service")
    parser.add_argument("--data-dir")
    parser.add_argument("--examples", type=int)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--min-seconds", type=float, default=5.0)
    parser.add_argument("--warmup-batches", type=int, default=2)
    parser.add_argument("--compression", choices=["AUTO", "NONE"], default="NONE")
    parser.add_argument("--job-name", default="graph-pipeline")
    parser.add_argument("--pipeline", choices=["image", *PIPELINES], default="image")
    args = parser.parse_args()
    if args.serve_worker:
        return serve_worker(args.serve_worker)

    if args.pipeline == "image":
        ds = tf_pipeline.build(args.data_dir, "normalize", args.batch_size)
    else:
        ds = PIPELINES[args.pipeline](args.batch_size)
        args.examples = EPOCH
    ds = ds.apply(
        tf.data.experimental.service.distribute(
            "parallel_epochs",
            args.service,
            job_name=args.job_name,
            compression=None if args.compression == "NONE" else "AUTO",
        )
    )
    examples, seconds, batches, startup, cpu = tf_pipeline.measure(
        ds, args.examples, args.min_seconds, args.warmup_batches
    )
    print(
        json.dumps(
            {
                "examples_per_sec": examples / seconds,
                "examples": examples,
                "seconds": seconds,
                "batches": batches,
                "startup_seconds": startup,
                "cpu_seconds": cpu,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "tensorflow": tf.__version__,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
