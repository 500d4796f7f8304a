#!/usr/bin/env python3
"""tfdata's Python client's side of tfdata-bench's service scenarios.

tfdata-bench starts our dispatcher and worker (as for the Rust client's run:
the worker in the bench's process, or in a child process for `large`),
registers the scenario's dataset there and runs this script with the
dispatcher's target and the dataset's id. The script reads the dataset in
parallel_epochs mode through `tfdata.experimental.service.from_dataset_id`,
in a process of its own (like TensorFlow's reader), and touches each element
as little as the Rust client's reader does: it takes it from the iterator
(a numpy scalar or array over the received buffer) and drops it.

  small    range(N) int64 scalars              elements/s
  batched  N batches of 1024 int64             elements/s
  large    N tensors of 1 MiB float32          MB/s

The first element is not part of the throughput figures. Prints one JSON
object on stdout:
  {"value": ..., "unit": ..., "elements_per_second": ..., "bytes_per_second": ...,
   "native_build": "release" | "debug" | "unknown", "native_module": path, ...}
or, when this Python has no usable tfdata, {"unavailable": reason} (exit 0).
"""

import argparse
import json
import os
import resource
import struct
import sys
import time

BATCH = 1024
LARGE_BYTES = 1 << 20


def native_build(path):
    """'debug' when the shared object carries DWARF sections (cargo's dev
    profile keeps line tables; the release profile has none), else 'release'."""
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return "unknown"
            shoff, = struct.unpack_from("<Q", header, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", header, 0x3A)
            f.seek(shoff)
            sections = f.read(shentsize * shnum)
            _, _, _, _, stroff, strsize = struct.unpack_from("<IIQQQQ", sections, shstrndx * shentsize)
            f.seek(stroff)
            names = f.read(strsize)
    except (OSError, struct.error):
        return "unknown"
    return "debug" if b".debug_info\0" in names or b".debug_line\0" in names else "release"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=["small", "batched", "large"], required=True)
    parser.add_argument("--elements", type=int, required=True)
    parser.add_argument("--service", required=True, help="the dispatcher's target, grpc://host:port")
    parser.add_argument("--dataset-id", required=True)
    args = parser.parse_args()
    try:
        import tfdata  # noqa: F401
        from tfdata import _native
        from tfdata.experimental import service
    except ImportError as e:
        print(json.dumps({"unavailable": f"{sys.executable} cannot import tfdata: {e}"}))
        return

    n = args.elements
    ds = service.from_dataset_id("parallel_epochs", args.service, args.dataset_id)
    it = iter(ds)
    next(it)
    cpu_start = time.process_time()
    start = time.perf_counter()
    rest = 0
    for _ in it:
        rest += 1
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    assert rest + 1 == n, (rest + 1, n)
    element_bytes = {"small": 8, "batched": 8 * BATCH, "large": LARGE_BYTES}[args.scenario]
    elements_per_second = rest / seconds
    if args.scenario == "large":
        value, unit = rest * LARGE_BYTES / seconds / 1e6, "MB/s"
    elif args.scenario == "batched":
        value, unit = rest * BATCH / seconds, "elements/s"
    else:
        value, unit = elements_per_second, "elements/s"
    module = getattr(_native, "__file__", "")
    print(json.dumps({
        "value": value,
        "unit": unit,
        "elements_per_second": elements_per_second,
        "bytes_per_second": rest * element_bytes / seconds,
        "seconds": seconds,
        "cpu_us_per_element": cpu_seconds / rest * 1e6,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "native_module": module,
        "native_build": native_build(module) if module else "unknown",
        "python": sys.version.split()[0],
        "pid": os.getpid(),
    }))


if __name__ == "__main__":
    main()
