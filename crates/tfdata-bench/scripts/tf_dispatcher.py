#!/usr/bin/env python3
"""TensorFlow's side of tfdata-bench's `dispatcher-capacity` scenario.

Subcommands:

* `serve [--work-dir DIR]`: TensorFlow 2.21's DispatchServer with its default
  configuration, fault tolerant (journal in DIR) when a work dir is given;
  prints `{"address": "host:port", "pid": ...}` as its first line and serves
  until stdin closes. The dispatcher is C++ threads: Python only waits.
* `graph`: prints `{"graph_hex": ..., "element_spec_hex": ...,
  "tensorflow": ...}`: the serialized `GraphDef` TensorFlow's client registers
  for `tf.data.Dataset.range(2**62)` without compression, and its encoded
  element spec, so the load generator registers the dataset a TensorFlow
  client would, with either dispatcher.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.python.saved_model import nested_structure_coder  # noqa: E402

service = tf.data.experimental.service


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--work-dir")
    sub.add_parser("graph")
    args = parser.parse_args()

    if args.command == "serve":
        if args.work_dir:
            config = service.DispatcherConfig(port=0, work_dir=args.work_dir, fault_tolerant_mode=True)
        else:
            config = service.DispatcherConfig(port=0)
        dispatcher = service.DispatchServer(config)
        address = dispatcher.target.split("://")[1]
        print(json.dumps({"address": address, "pid": os.getpid()}), flush=True)
        sys.stdin.read()
        dispatcher._stop()
        return 0

    ds = tf.data.Dataset.range(2**62)
    # What `distribute` registers (data_service_ops._register_dataset with
    # compression=None): the serialized graph, devices stripped.
    graph = ds._as_serialized_graph(
        external_state_policy=tf.data.experimental.ExternalStatePolicy.FAIL,
        strip_device_assignment=True,
    ).numpy()
    # The element spec, encoded as the client sends it in the metadata.
    spec = nested_structure_coder.encode_structure(ds.element_spec)
    print(
        json.dumps(
            {
                "graph_hex": graph.hex(),
                "element_spec_hex": spec.SerializeToString().hex(),
                "tensorflow": tf.__version__,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
