#!/usr/bin/env python3
"""One engine's read of a tfdata-bench source scenario, timed in its own
process (tfdata-bench runs each in turn on the same files and cores).

  --engine tfdata      tfdata's Python client reading a dataset registered
                       by tfdata-bench (`--service`, `--dataset-id`; the
                       worker is another process): `--format arrow` takes
                       pyarrow record batches (as_arrow_iterator), `numpy`
                       dicts of numpy arrays
  --engine pyarrow     pyarrow.parquet.ParquetFile(path).iter_batches(1024)
  --engine ray         ray.data.read_parquet(path).iter_batches(1024, "pyarrow"),
                       on a local Ray with 2 CPUs
  --engine datasets    datasets.load_from_disk(path).with_format("numpy") through
                       a torch DataLoader (2 workers, batches of 64), each image
                       resized to 224x224 (bilinear, PIL) in the workers
  --engine webdataset  webdataset.WebDataset(pattern).decode("rgb8") through a torch
                       DataLoader (2 workers, batches of 64), resized the same way

Every engine touches each batch as little as it can (counts its rows).
The first batch is not timed (start-up). Prints one JSON line:
  {"rows": N, "seconds": s, "rows_per_second": r, "peak_rss_bytes": b, ...}
"""

import argparse
import json
import os
import resource
import sys
import time

# No engine here does linear algebra; numpy's OpenBLAS threads would only
# spin next to the readers on this machine's cores.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

IMAGE_SIZE = 224
BATCH_IMAGES = 64


def timed(batches, rows_of, started):
    """Rows per second over `batches`, after the first; and the seconds
    from `started` (before the engine was set up) to the first."""
    it = iter(batches)
    first = next(it)
    first_batch_seconds = time.perf_counter() - started
    rows = rows_of(first)
    start = time.perf_counter()
    cpu = time.process_time()
    timed_rows = 0
    for b in it:
        timed_rows += rows_of(b)
    seconds = time.perf_counter() - start
    return {
        "rows": rows + timed_rows,
        "timed_rows": timed_rows,
        "seconds": seconds,
        "rows_per_second": timed_rows / seconds if seconds > 0 else 0.0,
        "reader_cpu_seconds": time.process_time() - cpu,
        "first_batch_seconds": first_batch_seconds,
        "total_seconds": first_batch_seconds + seconds,
    }


def resize(image):
    from PIL import Image

    return Image.fromarray(image).resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)


def collate_images(samples):
    import numpy as np

    images = np.stack([np.asarray(resize(s["image"])) for s in samples])
    labels = np.array([s["label"] for s in samples], dtype=np.int64)
    return images, labels


def collate_tuples(samples):
    import numpy as np

    images = np.stack([np.asarray(resize(image)) for image, _ in samples])
    labels = np.array([label for _, label in samples], dtype=np.int64)
    return images, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", required=True,
                        choices=["tfdata", "pyarrow", "ray", "datasets", "webdataset"])
    parser.add_argument("--path", help="the file, folder or shard pattern (peers)")
    parser.add_argument("--service", help="tfdata: the dispatcher's target")
    parser.add_argument("--dataset-id", help="tfdata: the registered dataset")
    parser.add_argument("--format", default="numpy", choices=["numpy", "arrow"])
    parser.add_argument("--rows-key", default=None,
                        help="tfdata: the column whose first dimension counts the rows")
    args = parser.parse_args()
    started = time.perf_counter()

    if args.engine == "tfdata":
        from tfdata.experimental import service

        ds = service.from_dataset_id("parallel_epochs", args.service, args.dataset_id)
        if args.format == "arrow":
            result = timed(ds.as_arrow_iterator(), lambda b: b.num_rows, started)
        else:
            key = args.rows_key
            result = timed(ds, lambda e: len(e[key]), started)
        from python_client import native_build
        from tfdata import _native

        module = getattr(_native, "__file__", "")
        result["native_module"] = module
        result["native_build"] = native_build(module) if module else "unknown"
    elif args.engine == "pyarrow":
        import pyarrow.parquet as pq

        result = timed(pq.ParquetFile(args.path).iter_batches(batch_size=1024), lambda b: b.num_rows, started)
    elif args.engine == "ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.read_parquet(args.path)
        result = timed(ds.iter_batches(batch_size=1024, batch_format="pyarrow"), lambda b: b.num_rows, started)
        ray.shutdown()
    elif args.engine == "datasets":
        import datasets
        import torch

        ds = datasets.load_from_disk(args.path).with_format("numpy")
        loader = torch.utils.data.DataLoader(ds, batch_size=BATCH_IMAGES, num_workers=2,
                                             collate_fn=collate_images)
        result = timed(loader, lambda b: len(b[0]), started)
    else:
        import torch
        import webdataset as wds

        ds = wds.WebDataset(args.path, shardshuffle=False).decode("rgb8").to_tuple("jpg", "cls")
        loader = torch.utils.data.DataLoader(ds, batch_size=BATCH_IMAGES, num_workers=2,
                                             collate_fn=collate_tuples)
        result = timed(loader, lambda b: len(b[0]), started)

    result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["children_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result["engine"] = args.engine
    result["pid"] = os.getpid()
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
