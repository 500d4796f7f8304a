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
    args = parser.parse_args()
    if args.serve_worker:
        return serve_worker(args.serve_worker)

    ds = tf_pipeline.build(args.data_dir, "normalize", args.batch_size)
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
