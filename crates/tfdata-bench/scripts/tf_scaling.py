#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's `scaling` scenario.

tfdata-bench runs TensorFlow 2.21's dispatcher (`tf_dispatcher.py serve`)
and workers (`tf_graph_pipeline.py --serve-worker`), each in a process of
its own, and uses this script for the rest:

* `register TARGET WORKLOAD ELEMENTS_PER_WORKER BATCH_SIZE DATA_DIR`:
  registers the workload's dataset (the same as `src/scaling/workload.rs`:
  `range(n)`; n tensors of 1 MiB random float32; the image pipeline of
  `tf_pipeline.py`, `take(n)` batches) with TensorFlow's client and prints
  `{"dataset_id": ..., "tensorflow": ...}`.
* `read SPEC`: one reader, in the exchange `src/scaling/reader.rs` defines
  for ours: SPEC is `{"target", "dataset_id", "job_name", "workload",
  "batch_size"}`; the reader sets up `from_dataset_id(parallel_epochs,
  job_name)`, prints `{"ready": true}`, waits for `go` on stdin, reads to
  the end and prints `{"elements", "items", "sum", "payload_bytes",
  "cpu_seconds", "checkpoints"}` (checkpoints: `[unix µs, items so far]`
  every 1024 elements for `small`, every element otherwise, and at the
  last); a failure is printed as `{"error": ...}`.
"""

import json
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

service = tf.data.experimental.service
LARGE_BYTES = 1 << 20


def dataset(workload, n, batch_size, data_dir):
    if workload == "small":
        return tf.data.Dataset.range(n)
    if workload == "large":
        values = np.random.default_rng(7).random(LARGE_BYTES // 4, dtype=np.float32)
        return tf.data.Dataset.from_tensors(values).repeat(n)
    if workload == "pipeline":
        import tf_pipeline

        return tf_pipeline.build(data_dir, "normalize", batch_size).take(n)
    raise ValueError(f"no workload {workload!r}")


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def unix_micros():
    return time.time_ns() // 1000


def tally(workload, element, batch_size):
    """Items of one element and `small`'s value; what is not the workload's is an error."""
    if workload == "small":
        return 1, int(element), 8
    if workload == "large":
        if element.shape != (LARGE_BYTES // 4,) or element.dtype != tf.float32:
            raise ValueError(f"large: an element of {element.dtype} {element.shape}")
        return 1, 0, LARGE_BYTES
    image, label = element
    if tuple(image.shape) != (batch_size, 224, 224, 3) or image.dtype != tf.float32:
        raise ValueError(f"pipeline: a batch of {image.dtype} {image.shape}")
    return batch_size, 0, image.shape.num_elements() * 4 + label.shape.num_elements() * 8


def read(spec):
    workload, batch_size = spec["workload"], spec["batch_size"]
    ds = service.from_dataset_id(
        "parallel_epochs", spec["target"], spec["dataset_id"], job_name=spec["job_name"]
    )
    print(json.dumps({"ready": True}), flush=True)
    if sys.stdin.readline().strip() != "go":
        raise RuntimeError("the bench went away before go")
    cpu_start = cpu_seconds()
    every = 1024 if workload == "small" else 1
    elements = items = total = payload = 0
    checkpoints = []
    # The iteration starts here, as ours does.
    for element in ds:
        n, value, size = tally(workload, element, batch_size)
        elements += 1
        items += n
        total += value
        payload += size
        if elements % every == 0:
            checkpoints.append([unix_micros(), items])
    if not checkpoints or checkpoints[-1][1] != items:
        checkpoints.append([unix_micros(), items])
    return {
        "elements": elements,
        "items": items,
        "sum": total,
        "payload_bytes": payload,
        "cpu_seconds": cpu_seconds() - cpu_start,
        "checkpoints": checkpoints,
    }


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "register" and len(sys.argv) == 7:
        target, workload, n, batch_size, data_dir = sys.argv[2:]
        ds = dataset(workload, int(n), int(batch_size), data_dir)
        dataset_id = service.register_dataset(target, ds)
        print(json.dumps({"dataset_id": dataset_id.numpy().decode(), "tensorflow": tf.__version__}))
        return 0
    if command == "read" and len(sys.argv) == 3:
        try:
            result = read(json.loads(sys.argv[2]))
        except Exception as e:  # reported to the bench, which says what failed
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
            return 1
        print(json.dumps(result), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
