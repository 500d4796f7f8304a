#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's `kernels` scenario.

Times the pipeline's per-example ops one at a time on one thread
(`intra_op` and `inter_op` parallelism 1) over the first `--images`
examples of a TFRecord file, and prints one JSON object on stdout:

    {"us_per_example": {"parse_example": ..., "decode_jpeg": ..., "resize": ...,
                        "normalize": ..., "batch": ...},
     "cpu_us_per_example": {...the same keys...}, "tensorflow": "2.21.0"}

`us_per_example` is elapsed time, `cpu_us_per_example` the process's CPU
time (`time.process_time`, every thread: the op runs on TensorFlow's own
threads), which on a machine shared with other work leaves out the time
the scheduler gave to others.

Each op runs in a `tf.function` loop over all the inputs (stacked into one
tensor; a slice along the first axis shares its buffer), as tf.data runs
it, so Python and eager dispatch are not counted; the loop itself costs a
few microseconds per iteration. Passes run (the first untimed) until
`--seconds` have passed. `normalize` is `(x - 127.5) / 127.5` (two ops, as
written in the pipeline); `batch` is `tf.stack` of `--batch-size`
normalised images, per example.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def first_value(y):
    """A float32 scalar that depends on `y`, so the op is not pruned."""
    return tf.cast(tf.reshape(y, [-1])[0], tf.float32)


def timed(run, inputs, calls_per_pass, seconds):
    """(elapsed, CPU) microseconds per call: `run(inputs)` in passes until
    `seconds` have passed."""
    start, cpu_start = time.perf_counter(), time.process_time()
    passes = 0
    while True:
        run(inputs).numpy()
        passes += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            calls = passes * calls_per_pass
            cpu = time.process_time() - cpu_start
            return elapsed * 1e6 / calls, cpu * 1e6 / calls


def loop_time(inputs, f, seconds):
    """(elapsed, CPU) microseconds per call of `f` on each row of `inputs`."""
    n = int(inputs.shape[0])

    @tf.function
    def run(x):
        acc = tf.constant(0.0)
        for i in tf.range(n):
            acc += first_value(f(x[i]))
        return acc

    run(inputs)  # trace and warm up
    return timed(run, inputs, n, seconds)


def batch_time(images, batch_size, seconds):
    """(elapsed, CPU) microseconds per example of `tf.stack` of
    `batch_size` images."""
    batches = int(images.shape[0]) // batch_size

    @tf.function
    def run(x):
        acc = tf.constant(0.0)
        for b in tf.range(batches):
            rows = [x[b * batch_size + j] for j in range(batch_size)]
            acc += first_value(tf.stack(rows))
        return acc

    run(images)
    return timed(run, images, batches * batch_size, seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", required=True)
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    records = tf.stack(list(tf.data.TFRecordDataset([args.file]).take(args.images)))
    jpegs = tf.stack([tf.io.parse_single_example(r, FEATURES)["image"] for r in records])
    decoded = tf.stack([tf.io.decode_jpeg(j, channels=3) for j in jpegs])
    resized = tf.image.resize(decoded, [224, 224])
    normalized = (resized - 127.5) / 127.5

    s = args.seconds
    times = {
        "parse_example": loop_time(
            records, lambda r: tf.io.parse_single_example(r, FEATURES)["label"], s
        ),
        "decode_jpeg": loop_time(jpegs, lambda j: tf.io.decode_jpeg(j, channels=3), s),
        "resize": loop_time(decoded, lambda x: tf.image.resize(x, [224, 224]), s),
        "normalize": loop_time(resized, lambda x: (x - 127.5) / 127.5, s),
        "batch": batch_time(normalized, args.batch_size, s),
    }
    report = {
        "us_per_example": {k: t[0] for k, t in times.items()},
        "cpu_us_per_example": {k: t[1] for k, t in times.items()},
        "tensorflow": tf.__version__,
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
