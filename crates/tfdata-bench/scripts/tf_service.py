#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's service scenarios (the same datasets as
`src/service.rs`): an in-process TensorFlow 2.21 dispatcher and one worker,
read through `distribute` in parallel_epochs mode.

  small          range(N) int64 scalars                 elements/s
  batched        N batches of 1024 int64                elements/s
  large          N tensors of 1 MiB random float32      MB/s
  first-element  ms from distribute to the first element on a warm cluster
  dynamic        range(N) in distributed_epoch over two workers  elements/s
  dynamic-2-readers  dynamic read by two readers (threads) sharing the job:
                 elements/s of both, from when both have their first element

The first element is not part of the throughput figures. Prints one JSON
object on stdout: {"value": ..., "unit": ..., "tensorflow": "2.21.0"}
"""

import argparse
import itertools
import json
import os
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

service = tf.data.experimental.service
BATCH = 1024
LARGE_BYTES = 1 << 20


def dataset(scenario, n):
    if scenario in ("small", "first-element", "dynamic", "dynamic-2-readers"):
        return tf.data.Dataset.range(n)
    if scenario == "batched":
        return tf.data.Dataset.range(n * BATCH).batch(BATCH)
    values = np.random.default_rng(7).random(LARGE_BYTES // 4, dtype=np.float32)
    return tf.data.Dataset.from_tensors(values).repeat(n)


def read(ds, target, n, mode="parallel_epochs"):
    start = time.perf_counter()
    it = iter(ds.apply(service.distribute(mode, target)))
    next(it)
    first = time.perf_counter() - start
    start = time.perf_counter()
    rest = sum(1 for _ in it)
    assert rest + 1 == n, (rest + 1, n)
    return rest, first, time.perf_counter() - start


def read_shared(ds, target, n, readers):
    """`readers` threads sharing one distributed_epoch job: elements/s."""
    barrier = threading.Barrier(readers + 1)
    results = [None] * readers

    def reader(i):
        it = iter(ds.apply(service.distribute("distributed_epoch", target, job_name="dynamic-shared")))
        values = [int(v) for v in itertools.islice(it, 1)]  # none if the epoch is gone
        barrier.wait()
        values.extend(int(v) for v in it)
        results[i] = values

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    seen = sorted(v for r in results for v in r)
    assert seen == list(range(n)), (len(seen), n)
    return (n - readers) / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=["small", "batched", "large", "first-element", "dynamic",
                                               "dynamic-2-readers"], required=True)
    parser.add_argument("--elements", type=int, required=True)
    args = parser.parse_args()
    dispatcher = service.DispatchServer()
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1]))
               for _ in range(2 if args.scenario.startswith("dynamic") else 1)]
    n = args.elements
    if args.scenario == "first-element":
        read(dataset("small", n), dispatcher.target, n)  # warm the cluster
        _, first, _ = read(dataset("small", n), dispatcher.target, n)
        value, unit = first * 1e3, "ms"
    elif args.scenario == "dynamic-2-readers":
        value, unit = read_shared(dataset(args.scenario, n), dispatcher.target, n, 2), "elements/s"
    else:
        mode = "distributed_epoch" if args.scenario == "dynamic" else "parallel_epochs"
        rest, _, seconds = read(dataset(args.scenario, n), dispatcher.target, n, mode)
        if args.scenario == "large":
            value, unit = rest * LARGE_BYTES / seconds / 1e6, "MB/s"
        elif args.scenario == "batched":
            value, unit = rest * BATCH / seconds, "elements/s"
        else:
            value, unit = rest / seconds, "elements/s"
    for worker in workers:
        worker.stop()
    dispatcher.stop()
    print(json.dumps({"value": value, "unit": unit, "tensorflow": tf.__version__}))


if __name__ == "__main__":
    main()
