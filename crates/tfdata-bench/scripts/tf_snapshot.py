#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's `snapshot` scenario.

Subcommands (each prints one JSON object on stdout, or a first line for the
servers):

* `serve-dispatcher --work-dir DIR`: TensorFlow's DispatchServer in
  fault-tolerant mode; prints `{"address": "host:port"}`, serves until stdin
  closes.
* `serve-worker --dispatcher ADDRESS --heartbeat-ms MS`: TensorFlow's
  WorkerServer; prints `{"serving": true}`, serves until stdin closes.
* `save --dispatcher ADDRESS --path P --elements N --values K --compression C
  --dataset map|repeat`: `tf.data.experimental.distributed_save` of the
  benchmark's dataset (`dataset`) to whatever dispatcher is at ADDRESS (ours or TensorFlow's:
  the client is the same program both times), timed from the call (the
  `Snapshot` RPC) until `P/DONE` exists (polled every 2 ms):
  `{"seconds": ...}`.
* `load --path P`: iterates `tf.data.Dataset.load(P)` to the end, timed from
  the `load` call: `{"seconds", "elements", "bytes", "peak_rss_bytes",
  "rss_before_bytes"}` (`bytes`: the tensors' bytes, `.nbytes`).
"""

import argparse
import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

service = tf.data.experimental.service

M32 = 0xFFFFFFFF


def dataset(kind: str, elements: int, values: int) -> tf.data.Dataset:
    """`elements` float32 vectors of `values` random-looking numbers 0..255:
    a 32-bit integer hash of each value's index (shifts, xors and products
    below 2^63: exact integer ops, so TensorFlow's worker and ours compute
    the same bits), its low 8 bits as float32. Each float is one of 256
    patterns: Snappy halves it, GZIP shrinks it more, neither trivially.

    `kind` "map" computes each element in the map (the worker's pipeline
    costs about as much as writing it); "repeat" is the first element,
    computed here, as a constant the map returns `elements` times (the pipeline
    costs next to nothing: the save measures the writer; Snappy's and
    GZIP's windows are far shorter than an element, so the repetition does
    not help them)."""

    def element(x):
        h = tf.range(values, dtype=tf.int64) + x * values
        for _ in range(2):
            h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))
            h = tf.bitwise.bitwise_and(h * 0x45D9F3B, M32)
        h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))
        return tf.cast(tf.bitwise.bitwise_and(h, 0xFF), tf.float32)

    if kind == "repeat":
        first = element(tf.constant(0, tf.int64))
        # range + map rather than from_tensors(...).repeat(): our dispatcher
        # splits RangeDataset, not TensorDataset.
        return tf.data.Dataset.range(elements).map(lambda _: first)
    return tf.data.Dataset.range(elements).map(element)


def wait_for_stdin_close():
    sys.stdin.read()


def rss_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("serve-dispatcher")
    d.add_argument("--work-dir", required=True)
    w = sub.add_parser("serve-worker")
    w.add_argument("--dispatcher", required=True)
    w.add_argument("--heartbeat-ms", type=int, required=True)
    s = sub.add_parser("save")
    s.add_argument("--dispatcher", required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--elements", type=int, required=True)
    s.add_argument("--values", type=int, required=True)
    s.add_argument("--dataset", choices=["map", "repeat"], default="map")
    s.add_argument("--compression", choices=["AUTO", "NONE", "GZIP"], default="AUTO")
    s.add_argument("--timeout-s", type=float, default=600.0)
    ld = sub.add_parser("load")
    ld.add_argument("--path", required=True)
    args = parser.parse_args()

    if args.command == "serve-dispatcher":
        dispatcher = service.DispatchServer(
            service.DispatcherConfig(port=0, work_dir=args.work_dir, fault_tolerant_mode=True)
        )
        print(json.dumps({"address": dispatcher.target.split("://")[1]}), flush=True)
        wait_for_stdin_close()
        dispatcher._stop()
        return 0

    if args.command == "serve-worker":
        worker = service.WorkerServer(
            service.WorkerConfig(dispatcher_address=args.dispatcher, heartbeat_interval_ms=args.heartbeat_ms)
        )
        print(json.dumps({"serving": True}), flush=True)
        wait_for_stdin_close()
        worker.stop()
        return 0

    if args.command == "save":
        ds = dataset(args.dataset, args.elements, args.values)
        compression = {"AUTO": "AUTO", "NONE": None, "GZIP": "GZIP"}[args.compression]
        done = os.path.join(args.path, "DONE")
        error = os.path.join(args.path, "ERROR")
        start = time.perf_counter()
        tf.data.experimental.distributed_save(ds, args.path, args.dispatcher, compression=compression)
        while not os.path.exists(done):
            if os.path.exists(error):
                with open(error) as f:
                    print(f"the snapshot failed: {f.read()}", file=sys.stderr)
                return 1
            if time.perf_counter() - start > args.timeout_s:
                print(f"{done} did not appear within {args.timeout_s} s", file=sys.stderr)
                return 1
            time.sleep(0.002)
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "tensorflow": tf.__version__}), flush=True)
        return 0

    # load
    rss_before = rss_bytes("VmRSS:")
    start = time.perf_counter()
    elements = 0
    nbytes = 0
    for element in tf.data.Dataset.load(args.path):
        elements += 1
        nbytes += sum(t.numpy().nbytes for t in tf.nest.flatten(element))
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "seconds": seconds,
                "elements": elements,
                "bytes": nbytes,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "rss_before_bytes": rss_before,
                "tensorflow": tf.__version__,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
