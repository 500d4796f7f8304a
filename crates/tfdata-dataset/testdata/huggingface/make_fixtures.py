"""Writes the Hugging Face fixtures `huggingface_dataset` is tested against,
with the real `datasets` library (run with ~/.cache/tfdata-py/bin/python):

* `saved/`: one split saved with `Dataset.save_to_disk`, in two shards of
  several record batches each (IPC streams, as datasets writes them);
* `dict/`: a `DatasetDict` (train, test) saved with `save_to_disk`;
* `hub/`: the Parquet layout `push_to_hub` uploads
  (`data/{split}-00000-of-00001.parquet`), written with `Dataset.to_parquet`;
* `expected.json`: every split's rows, in order, as plain JSON (image bytes
  in hex).

The features: an `Image` (tiny PNGs, made by hand: Pillow is not needed),
a `ClassLabel`, a `Value("string")`, a `Sequence(Value("float32"))` (a list
of varying length) and an `Array2D` of fixed shape. Rerunning gives the
same rows; the files' bytes may differ (fingerprints).
"""

import json
import os
import shutil
import struct
import zlib

import datasets
import pyarrow as pa
from datasets import (
    Array2D,
    ClassLabel,
    Dataset,
    DatasetDict,
    Features,
    Image,
    Sequence,
    Value,
)

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ["cat", "dog", "bird"]
FEATURES = Features(
    {
        "image": Image(),
        "label": ClassLabel(names=NAMES),
        "text": Value("string"),
        "scores": Sequence(Value("float32")),
        "grid": Array2D(shape=(2, 3), dtype="int32"),
    }
)


def png(width, height, seed):
    """A grey-level PNG whose pixels depend on `seed`."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + bytes((seed * 37 + x * 11 + y * 5) % 256 for x in range(width))
        for y in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def rows(start, count):
    out = []
    for i in range(start, start + count):
        out.append(
            {
                "image": png(1 + i % 3, 2, i),
                "label": i % len(NAMES),
                "text": f"row {i}",
                "scores": [float(i) + k / 4 for k in range(i % 4)],
                "grid": [[i * 10 + r * 3 + c for c in range(3)] for r in range(2)],
            }
        )
    return out


def dataset(rows_):
    # Built from an Arrow table in the features' storage types, so that no
    # image encoding (Pillow) is needed: Image storage is
    # struct<bytes: binary, path: string>.
    table = pa.table(
        {
            "image": pa.array(
                [{"bytes": r["image"], "path": None} for r in rows_],
                type=pa.struct({"bytes": pa.binary(), "path": pa.string()}),
            ),
            "label": pa.array([r["label"] for r in rows_], pa.int64()),
            "text": pa.array([r["text"] for r in rows_], pa.string()),
            "scores": pa.array([r["scores"] for r in rows_], pa.list_(pa.float32())),
            "grid": pa.array([r["grid"] for r in rows_], pa.list_(pa.list_(pa.int32()))),
        }
    )
    return Dataset(table).cast(FEATURES)


def expected(rows_):
    return [
        {
            "image": r["image"].hex(),
            "label": r["label"],
            "text": r["text"],
            "scores": r["scores"],
            "grid": r["grid"],
        }
        for r in rows_
    ]


def main():
    # Small record batches (datasets writes up to 1000 rows, 100 with
    # images), so a shard holds several and the fixtures stay small.
    datasets.config.DEFAULT_MAX_BATCH_SIZE = 4
    for name in ["saved", "dict", "hub"]:
        shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)

    train_rows, test_rows = rows(0, 10), rows(100, 3)
    train, test = dataset(train_rows), dataset(test_rows)

    train.save_to_disk(os.path.join(HERE, "saved"), num_shards=2)
    DatasetDict({"train": train, "test": test}).save_to_disk(os.path.join(HERE, "dict"))
    os.makedirs(os.path.join(HERE, "hub", "data"))
    for split, ds in [("train", train), ("test", test)]:
        ds.to_parquet(os.path.join(HERE, "hub", "data", f"{split}-00000-of-00001.parquet"))

    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(
            {
                "datasets_version": datasets.__version__,
                "pyarrow_version": pa.__version__,
                "label_names": NAMES,
                "train": expected(train_rows),
                "test": expected(test_rows),
            },
            f,
            indent=1,
        )
        f.write("\n")


if __name__ == "__main__":
    main()
