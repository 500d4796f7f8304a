#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's service scenarios.

`--scenario small`: an in-process TensorFlow 2.21 dispatcher and one worker;
`range(--elements)` of int64 scalars read through `distribute` in
parallel_epochs mode. The first element is taken before the clock starts
(job creation is not throughput). Prints one JSON object on stdout:

    {"elements_per_sec": ..., "elements": ..., "seconds": ..., "tensorflow": "2.21.0"}
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

service = tf.data.experimental.service


def small(elements):
    dispatcher = service.DispatchServer()
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1]))
    ds = tf.data.Dataset.range(elements).apply(service.distribute("parallel_epochs", dispatcher.target))
    it = iter(ds)
    next(it)
    start = time.perf_counter()
    n = 0
    for _ in it:
        n += 1
    seconds = time.perf_counter() - start
    worker.stop()
    dispatcher.stop()
    return {"elements_per_sec": n / seconds, "elements": n, "seconds": seconds}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=["small"], required=True)
    parser.add_argument("--elements", type=int, required=True)
    args = parser.parse_args()
    result = small(args.elements)
    result["tensorflow"] = tf.__version__
    print(json.dumps(result))


if __name__ == "__main__":
    main()
