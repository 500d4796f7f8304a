#!/usr/bin/env python3
"""Writes the image data set of tfdata-bench's `pipeline` scenario.

N `tf.train.Example`s with features `image` (bytes: a JPEG, quality 90, of a
synthetic photo-like 500x375 RGB image: smooth colour gradients and blobs
plus sensor-like noise, from a fixed seed) and `label` (int64), spread
round-robin over `--shards` TFRecord files `train-SSSSS-of-NNNNN.tfrecord`
in `--out-dir`. JPEGs are encoded by TensorFlow because tfdata has no JPEG
encoder.

Files are written under temporary names and renamed; `manifest.json` is
written last, so a directory with a manifest is complete. Run by
`tfdata-bench` when its data directory lacks the files:

    python make_images.py --out-dir DIR [--examples 2048] [--shards 8] [--seed 0]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

WIDTH, HEIGHT = 500, 375
NUM_CLASSES = 1000


def photo_like(rng: np.random.Generator) -> np.ndarray:
    """A smooth, photo-like uint8 [HEIGHT, WIDTH, 3] image."""
    y = np.linspace(0.0, 1.0, HEIGHT, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, WIDTH, dtype=np.float32)[None, :]
    channels = []
    for _ in range(3):
        # A tilted linear gradient ("sky to ground") ...
        a, b, c = rng.uniform(-120, 120, size=3)
        plane = 128 + a * (x - 0.5) + b * (y - 0.5) + c * (x - 0.5) * (y - 0.5)
        # ... low-frequency waves ("texture") ...
        for _ in range(3):
            fx, fy = rng.uniform(0.5, 6.0, size=2)
            phase = rng.uniform(0, 2 * np.pi)
            amp = rng.uniform(5, 30)
            plane = plane + amp * np.sin(2 * np.pi * (fx * x + fy * y) + phase)
        channels.append(plane)
    image = np.stack(channels, axis=-1)
    # ... a few soft blobs ("objects") shared by all channels with a tint ...
    for _ in range(rng.integers(2, 6)):
        cx, cy = rng.uniform(0, 1, size=2)
        r = rng.uniform(0.05, 0.3)
        tint = rng.uniform(-90, 90, size=3).astype(np.float32)
        mask = np.exp(-(((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r)))
        image = image + mask[..., None] * tint
    # ... a few hard-edged shapes ("edges") ...
    for _ in range(rng.integers(1, 4)):
        x0, y0 = rng.uniform(0, 0.8, size=2)
        w, h = rng.uniform(0.05, 0.4, size=2)
        inside = (x >= x0) & (x < x0 + w) & (y >= y0) & (y < y0 + h)
        tint = rng.uniform(-70, 70, size=3).astype(np.float32)
        image = image + inside[..., None] * tint
    # ... and sensor noise.
    image = image + rng.normal(0.0, 6.0, size=image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--examples", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quality", type=int, default=90)
    args = parser.parse_args()

    os.makedirs(args.out_dir, exist_ok=True)
    manifest_path = os.path.join(args.out_dir, "manifest.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)

    rng = np.random.default_rng(args.seed)
    names = [
        f"train-{i:05d}-of-{args.shards:05d}.tfrecord" for i in range(args.shards)
    ]
    tmp_paths = [os.path.join(args.out_dir, n + ".tmp") for n in names]
    writers = [tf.io.TFRecordWriter(p) for p in tmp_paths]
    total_bytes = 0
    for i in range(args.examples):
        pixels = photo_like(rng)
        jpeg = tf.io.encode_jpeg(pixels, quality=args.quality).numpy()
        total_bytes += len(jpeg)
        label = int(rng.integers(0, NUM_CLASSES))
        example = tf.train.Example(
            features=tf.train.Features(
                feature={
                    "image": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[jpeg])
                    ),
                    "label": tf.train.Feature(
                        int64_list=tf.train.Int64List(value=[label])
                    ),
                }
            )
        )
        writers[i % args.shards].write(example.SerializeToString())
        if (i + 1) % 256 == 0:
            print(f"make_images: {i + 1}/{args.examples}", file=sys.stderr)
    for w in writers:
        w.close()
    for tmp, name in zip(tmp_paths, names):
        os.replace(tmp, os.path.join(args.out_dir, name))

    manifest = {
        "examples": args.examples,
        "shards": args.shards,
        "files": names,
        "width": WIDTH,
        "height": HEIGHT,
        "quality": args.quality,
        "seed": args.seed,
        "mean_jpeg_bytes": total_bytes / max(args.examples, 1),
        "tensorflow": tf.__version__,
    }
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)
    print(json.dumps(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
