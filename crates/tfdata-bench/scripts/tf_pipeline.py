#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's `pipeline` scenario.

Builds the same input pipeline as tfdata-bench does with tfdata, in tf.data,
truncated after `--stage`, and measures it the same way; prints one JSON
object on stdout:

    {"examples_per_sec": ..., "examples": ..., "seconds": ..., "batches": ...,
     "startup_seconds": ..., "cpu_seconds": ..., "peak_rss_bytes": ...,
     "tensorflow": "2.21.0"}

Pipeline (stage names in brackets; each truncation is followed by
`batch(64, drop_remainder=True).prefetch(AUTOTUNE)`):

    list_files(DIR/train-*.tfrecord, shuffle=False).repeat()
    .interleave(TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE)   [read]
    .map(parse_single_example {image: string, label: int64}, AUTOTUNE)        [parse]
    .map(decode_jpeg(channels=3), AUTOTUNE)                                    [decode]
    .map(resize to 224x224 (bilinear), AUTOTUNE)                               [resize]
    .map((x - 127.5) / 127.5, AUTOTUNE)                                        [normalize]
    .map(-> (image, label))

With `--random-crop` (the `pipeline-crop` scenario), [decode] decodes an
ImageNet-style random window instead (Inception's preprocessing, as in
TensorFlow's official ResNet input pipeline):
`sample_distorted_bounding_box(extract_jpeg_shape(image), whole-image box,
min_object_covered=0.1, aspect_ratio_range=(3/4, 4/3), area_range=(0.08, 1),
max_attempts=10)` then `decode_and_crop_jpeg(image, window, channels=3)`.

Measurement: two warm-up batches are taken and not counted; then the clock
runs until at least `--min-seconds` have passed and the examples taken
(warm-up included) reach the next multiple of the data set's size.
"""

import argparse
import json
import math
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

STAGES = ["read", "parse", "decode", "resize", "normalize"]


def random_crop_decode(contents):
    """An ImageNet-style random window of a JPEG, decoded."""
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.io.extract_jpeg_shape(contents),
        bounding_boxes=tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4]),
        min_object_covered=0.1,
        aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.08, 1.0),
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )
    y, x, _ = tf.unstack(begin)
    h, w, _ = tf.unstack(size)
    return tf.io.decode_and_crop_jpeg(contents, tf.stack([y, x, h, w]), channels=3)


def build(data_dir: str, stage: str, batch_size: int, random_crop: bool = False) -> tf.data.Dataset:
    autotune = tf.data.AUTOTUNE
    depth = STAGES.index(stage)
    files = tf.data.Dataset.list_files(
        os.path.join(data_dir, "train-*.tfrecord"), shuffle=False
    ).repeat()
    ds = files.interleave(
        tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=autotune
    )
    if depth >= 1:
        features = {
            "image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64),
        }
        ds = ds.map(
            lambda r: tf.io.parse_single_example(r, features),
            num_parallel_calls=autotune,
        )
    if depth >= 2 and random_crop:
        ds = ds.map(
            lambda e: {**e, "image": random_crop_decode(e["image"])},
            num_parallel_calls=autotune,
        )
    elif depth >= 2:
        ds = ds.map(
            lambda e: {**e, "image": tf.io.decode_jpeg(e["image"], channels=3)},
            num_parallel_calls=autotune,
        )
    if depth >= 3:
        ds = ds.map(
            lambda e: {**e, "image": tf.image.resize(e["image"], [224, 224])},
            num_parallel_calls=autotune,
        )
    if depth >= 4:
        ds = ds.map(
            lambda e: {**e, "image": (e["image"] - 127.5) / 127.5},
            num_parallel_calls=autotune,
        )
    if depth >= 1:
        ds = ds.map(lambda e: (e["image"], e["label"]))
    return ds.batch(batch_size, drop_remainder=True).prefetch(autotune)


def batch_examples(batch) -> int:
    first = batch[0] if isinstance(batch, tuple) else batch
    return int(first.shape[0])


def cpu_seconds() -> float:
    """User + system CPU time of this process, all threads."""
    t = os.times()
    return t.user + t.system


def measure(ds, epoch_examples: int, min_seconds: float, warmup_batches: int):
    start = time.perf_counter()
    it = iter(ds)
    taken = 0
    for _ in range(warmup_batches):
        taken += batch_examples(next(it))
    startup = time.perf_counter() - start
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    measured = 0
    batches = 0
    target = None
    while True:
        n = batch_examples(next(it))
        taken += n
        measured += n
        batches += 1
        elapsed = time.perf_counter() - t0
        if target is None and elapsed >= min_seconds:
            target = max(1, math.ceil(taken / epoch_examples)) * epoch_examples
        if target is not None and taken >= target:
            return measured, elapsed, batches, startup, cpu_seconds() - cpu0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--stage", choices=STAGES, default="normalize")
    parser.add_argument("--examples", type=int, required=True,
                        help="examples in the data set (one epoch)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--min-seconds", type=float, default=5.0)
    parser.add_argument("--warmup-batches", type=int, default=2)
    parser.add_argument("--random-crop", action="store_true",
                        help="decode a random window of each image (pipeline-crop)")
    args = parser.parse_args()

    ds = build(args.data_dir, args.stage, args.batch_size, args.random_crop)
    examples, seconds, batches, startup, cpu = measure(
        ds, args.examples, args.min_seconds, args.warmup_batches
    )
    result = {
        "examples_per_sec": examples / seconds,
        "examples": examples,
        "seconds": seconds,
        "batches": batches,
        "startup_seconds": startup,
        "cpu_seconds": cpu,
        # ru_maxrss is in KiB on Linux.
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "tensorflow": tf.__version__,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
