"""tfdata's Python package with real TensorFlow 2.21 in one process.

Each test runs a script under ``TFDATA_TF_PYTHON`` (TensorFlow 2.21, with
this checkout's ``python/`` on ``PYTHONPATH`` so ``import tfdata`` is this
package) and skips with a reason when it is unset. The script prints one
``RESULT <json>`` line; the assertions are here.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_python, tensorflow_python

PRELUDE = """
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import tfdata
from tfdata.experimental import service as ours
tf_service = tf.data.experimental.service

assert tf.__version__ == "2.21.0", tf.__version__
assert tfdata.__file__.startswith({python_dir!r}), tfdata.__file__


def wait_for(condition, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {{timeout}}s waiting for {{what}}")


def result(value):
    print("RESULT " + json.dumps(value), flush=True)
"""


def run_tf(body: str, timeout=90) -> dict:
    """Runs PRELUDE + body under TensorFlow's interpreter; returns its RESULT."""
    from conftest import REPO

    python = tensorflow_python()
    code = PRELUDE.format(python_dir=str(REPO / "python")) + "\n" + body
    proc = run_python(code, python=python, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and len(lines) == 1, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    )
    return json.loads(lines[0][len("RESULT "):])


def test_tensorflow_workers_and_reader_through_our_dispatcher():
    """(a) Our DispatchServer; TensorFlow's WorkerServer and distribute."""
    got = run_tf(
        """
d = ours.DispatchServer()
w = tf_service.WorkerServer(tf_service.WorkerConfig(
    dispatcher_address=d._address, heartbeat_interval_ms=200))
wait_for(lambda: d._num_workers() == 1, what="TensorFlow's worker registered with our dispatcher")
ds = tf.data.Dataset.range(10).apply(tf_service.distribute("parallel_epochs", d.target))
values = [int(x) for x in ds.as_numpy_iterator()]
again = [int(x) for x in ds.as_numpy_iterator()]
result({"values": values, "again": again, "workers": d._num_workers(), "target": d.target})
w._stop()
d.stop()
"""
    )
    assert got["workers"] == 1
    assert got["target"].startswith("grpc://localhost:")
    assert got["values"] == list(range(10))
    assert got["again"] == list(range(10))


def test_tensorflow_distributed_epoch_over_two_tf_workers_through_our_dispatcher():
    """(a) distributed_epoch: our dispatcher splits range(10) between two TensorFlow workers."""
    got = run_tf(
        """
d = ours.DispatchServer()
workers = [tf_service.WorkerServer(tf_service.WorkerConfig(
    dispatcher_address=d._address, heartbeat_interval_ms=200)) for _ in range(2)]
wait_for(lambda: d._num_workers() == 2, what="two TensorFlow workers registered")
ds = tf.data.Dataset.range(10).apply(tf_service.distribute("distributed_epoch", d.target))
result({"values": [int(x) for x in ds.as_numpy_iterator()]})
for w in workers:
    w._stop()
d.stop()
"""
    )
    # Each element exactly once, split among the workers.
    assert sorted(got["values"]) == list(range(10))


def test_tensorflow_trainer_reads_tfdata_pipeline_through_our_client():
    """(b) A tfdata.Dataset (with a Python map) on our workers, read by tfdata in
    the TensorFlow process and fed into TensorFlow."""
    got = run_tf(
        """
d = ours.DispatchServer()
w = ours.WorkerServer(ours.WorkerConfig(dispatcher_address=d._address))
wait_for(lambda: d._num_workers() == 1, what="our worker registered")
pipeline = (tfdata.Dataset.range(12)
            .map(lambda x: (x * 2, np.float32(x) / 4))
            .batch(4))
distributed = pipeline.apply(ours.distribute("parallel_epochs", d.target))
spec = (tf.TensorSpec(shape=(None,), dtype=tf.int64), tf.TensorSpec(shape=(None,), dtype=tf.float32))
fed = tf.data.Dataset.from_generator(lambda: iter(distributed), output_signature=spec)
fed = fed.map(lambda a, b: (a + 1, tf.reduce_sum(b)))
batches = [(a.numpy().tolist(), float(b.numpy())) for a, b in fed]
# Or tensor by tensor: tf.constant over each numpy batch.
total = tf.constant(0, tf.int64)
for a, _ in distributed:
    total += tf.reduce_sum(tf.constant(a))
result({"batches": batches, "total": int(total.numpy()),
        "spec": [str(s) for s in distributed.element_spec]})
w.stop()
d.stop()
"""
    )
    assert got["batches"] == [
        [[1, 3, 5, 7], (0 + 1 + 2 + 3) / 4],
        [[9, 11, 13, 15], (4 + 5 + 6 + 7) / 4],
        [[17, 19, 21, 23], (8 + 9 + 10 + 11) / 4],
    ]
    assert got["total"] == sum(2 * i for i in range(12))
    assert len(got["spec"]) == 2 and "int64" in got["spec"][0] and "float32" in got["spec"][1]


def test_tensorflow_from_dataset_id_reads_a_dataset_tfdata_registered():
    """(c) tfdata registers (built-ins only, our workers); TensorFlow's
    from_dataset_id reads it, the element_spec from our dispatcher."""
    got = run_tf(
        """
d = ours.DispatchServer()
w = ours.WorkerServer(ours.WorkerConfig(dispatcher_address=d._address))
wait_for(lambda: d._num_workers() == 1, what="our worker registered")
pipeline = (tfdata.Dataset.from_tensor_slices({"x": np.arange(6, dtype=np.int64),
                                               "y": np.arange(6, dtype=np.float32) * 2})
            .map(tfdata.functions.cast("float64", component="x"))
            .batch(3))
dataset_id = ours.register_dataset(d.target, pipeline)
# No element_spec given: TensorFlow asks the dispatcher for it.
read = tf_service.from_dataset_id("parallel_epochs", d.target, dataset_id)
spec = read.element_spec
values = [{k: v.tolist() for k, v in sorted(e.items())} for e in read.as_numpy_iterator()]
dtypes = sorted((k, s.dtype.name, s.shape.as_list()) for k, s in spec.items())
result({"dataset_id": dataset_id, "dtypes": dtypes, "values": values})
w.stop()
d.stop()
"""
    )
    assert isinstance(got["dataset_id"], str) and got["dataset_id"]
    assert got["dtypes"] == [["x", "float64", [None]], ["y", "float32", [None]]]
    assert got["values"] == [
        {"x": [0.0, 1.0, 2.0], "y": [0.0, 2.0, 4.0]},
        {"x": [3.0, 4.0, 5.0], "y": [6.0, 8.0, 10.0]},
    ]


@pytest.mark.parametrize("dispatcher_kind", ["tensorflow", "tfdata"])
def test_tfdata_from_dataset_id_reads_tensorflow_workers(dispatcher_kind):
    """(d) TensorFlow registers and its workers serve; tfdata's from_dataset_id
    reads them (GetElement), the element_spec from the metadata."""
    got = run_tf(
        f"""
kind = {dispatcher_kind!r}
if kind == "tensorflow":
    d = tf_service.DispatchServer()
    address = d.target.split("://")[1]
    count_workers = None
else:
    d = ours.DispatchServer()
    address = d._address
    count_workers = d._num_workers
w = tf_service.WorkerServer(tf_service.WorkerConfig(
    dispatcher_address=address, heartbeat_interval_ms=200))
if count_workers is not None:
    wait_for(lambda: count_workers() == 1, what="TensorFlow's worker registered")
dataset = tf.data.Dataset.range(5).map(lambda x: (x * 3, tf.strings.as_string(x)))
dataset_id = tf_service.register_dataset(d.target, dataset)
dataset_id = dataset_id.numpy().decode() if hasattr(dataset_id, "numpy") else str(dataset_id)
read = ours.from_dataset_id("parallel_epochs", d.target, dataset_id)
spec = [(s.dtype, list(s.shape)) for s in read.element_spec]
values = [(int(a), b.decode() if isinstance(b, bytes) else str(b)) for a, b in read]
types = sorted({{type(a).__name__ + "/" + type(b).__name__ for a, b in read}})
result({{"spec": spec, "values": values, "types": types}})
w._stop()
if kind == "tfdata":
    d.stop()
else:
    d._stop()
"""
    )
    assert got["spec"] == [["int64", []], ["string", []]]
    assert got["values"] == [[3 * i, str(i)] for i in range(5)]
    # numpy scalars and bytes, as tfdata yields them from its own workers.
    assert got["types"] == ["int64/bytes"]


def test_seed_example_with_our_servers_and_tensorflows_dataset():
    """TensorFlow's DispatchServer example, its servers ours: our worker runs
    the graph TensorFlow's `distribute` registers (issue 13)."""
    got = run_tf(
        """
import contextlib, io
dispatcher = ours.DispatchServer()
dispatcher_address = dispatcher.target.split("://")[1]
worker = ours.WorkerServer(
    ours.WorkerConfig(dispatcher_address=dispatcher_address))
dataset = tf.data.Dataset.range(10)
dataset = dataset.apply(tf.data.experimental.service.distribute(
    processing_mode="parallel_epochs", service=dispatcher.target))
out = io.StringIO()
with contextlib.redirect_stdout(out):
    print([a.item() for a in dataset.as_numpy_iterator()])
result({"printed": out.getvalue()})
worker.stop()
dispatcher.stop()
"""
    )
    assert got["printed"] == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
