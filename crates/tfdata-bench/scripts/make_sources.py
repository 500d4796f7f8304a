#!/usr/bin/env python3
"""Writes the files of tfdata-bench's source scenarios with the libraries
users write them with, so every engine reads the same bytes.

  parquet     DIR/table.parquet: `id` int64, `score` float64, `text` string
              (short words), pyarrow's defaults (Snappy, row groups of
              1,048,576 rows, page index) -- what pandas/Ray/Spark leave.
  hf          DIR/hf: a `datasets` save_to_disk folder of `image` (Image
              feature: JPEG bytes, 320x240 random-ish photos) and `label`
              (ClassLabel of 10 names).
  webdataset  DIR/wds/shard-{000000..}.tar: the same JPEGs and labels as
              `jpg` and `cls` members, written by webdataset.TarWriter,
              256 samples per shard.

Prints one JSON line describing what it wrote; does nothing (but print it)
when DIR already holds it.
"""

import argparse
import io
import json
import os
import sys


def write_parquet(out, rows):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(out, "table.parquet")
    if not os.path.exists(path):
        os.makedirs(out, exist_ok=True)
        rng = np.random.default_rng(32)
        words = np.array([f"word-{i:05d}-{'x' * (i % 13)}" for i in range(10_000)], dtype=object)
        chunk = 1 << 20
        writer = None
        for start in range(0, rows, chunk):
            n = min(chunk, rows - start)
            table = pa.table({
                "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
                "score": pa.array(rng.random(n)),
                "text": pa.array(words[rng.integers(0, len(words), n)], pa.string()),
            })
            if writer is None:
                writer = pq.ParquetWriter(path + ".tmp", table.schema)
            writer.write_table(table)
        writer.close()
        os.replace(path + ".tmp", path)
    meta = pq.ParquetFile(path).metadata
    return {"path": path, "rows": meta.num_rows, "row_groups": meta.num_row_groups,
            "bytes": os.path.getsize(path)}


def jpegs(n, size=(320, 240)):
    """`n` JPEGs of smooth random images (as photos compress), and labels."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(7)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    for i in range(n):
        a, b, c = rng.random(3) * 0.05
        base = np.stack([np.sin(xx * a + i), np.cos(yy * b), np.sin((xx + yy) * c)], -1)
        noise = rng.normal(0, 0.08, (h, w, 3))
        pixels = ((base * 0.5 + 0.5 + noise).clip(0, 1) * 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        yield buf.getvalue(), int(i % 10)


def write_hf(out, n):
    import datasets

    folder = os.path.join(out, "hf")
    if not os.path.exists(os.path.join(folder, "state.json")):
        features = datasets.Features({
            "image": datasets.Image(),
            "label": datasets.ClassLabel(names=[f"class-{i}" for i in range(10)]),
        })
        rows = {"image": [], "label": []}
        for data, label in jpegs(n):
            rows["image"].append({"bytes": data, "path": None})
            rows["label"].append(label)
        ds = datasets.Dataset.from_dict(rows, features=features)
        ds.save_to_disk(folder + ".tmp")
        os.replace(folder + ".tmp", folder)
    return {"path": folder, "rows": n}


def write_webdataset(out, n, per_shard=256):
    import webdataset as wds

    folder = os.path.join(out, "wds")
    shards = (n + per_shard - 1) // per_shard
    last = os.path.join(folder, f"shard-{shards - 1:06d}.tar")
    if not os.path.exists(last):
        os.makedirs(folder, exist_ok=True)
        writer = None
        for i, (data, label) in enumerate(jpegs(n)):
            if i % per_shard == 0:
                if writer is not None:
                    writer.close()
                writer = wds.TarWriter(os.path.join(folder, f"shard-{i // per_shard:06d}.tar"))
            writer.write({"__key__": f"sample{i:08d}", "jpg": data, "cls": label})
        writer.close()
    pattern = os.path.join(folder, f"shard-{{000000..{shards - 1:06d}}}.tar")
    return {"pattern": pattern, "rows": n, "shards": shards}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["parquet", "hf", "webdataset"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, required=True)
    args = parser.parse_args()
    write = {"parquet": write_parquet, "hf": write_hf, "webdataset": write_webdataset}[args.kind]
    print(json.dumps(write(args.out, args.rows)))


if __name__ == "__main__":
    sys.exit(main())
