"""Distributed snapshots across implementations: (a) a snapshot that
TensorFlow's `distributed_save` wrote (TensorFlow's dispatcher and worker,
in-process) read by our engine — the `load` op run by `tfdata` workers and
read back by TensorFlow clients, in parallel_epochs and, split by chunk, in
distributed_epoch; (b) snapshots written by our chunk writer (the
`write_snapshot` example) read by TensorFlow's `tf.data.Dataset.load`, in
every compression."""

import collections
import json
import os
import subprocess
import time

import pytest
import tensorflow as tf

from conftest import TfdataProcess, tfdata_bin

service = tf.data.experimental.service
N = 60


def write_snapshot_bin():
    path = os.environ.get(
        "TFDATA_WRITE_SNAPSHOT_BIN",
        os.path.join(os.path.dirname(tfdata_bin()), "examples", "write_snapshot"),
    )
    if not os.path.exists(path):
        pytest.skip(f"{path} not found: build it with `cargo build -p tfdata-dataset --example write_snapshot`")
    return path


def tf_snapshot(tmp_path, compression):
    """A finished snapshot of range(N).map(...) written by TensorFlow."""
    dispatcher = service.DispatchServer(service.DispatcherConfig(
        port=0, work_dir=str(tmp_path / "tf_work_dir"), fault_tolerant_mode=True))
    address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=address))
    path = str(tmp_path / f"tf_snapshot_{compression}")
    ds = tf.data.Dataset.range(N).map(lambda x: (x, tf.strings.as_string(x)))
    tf.data.experimental.distributed_save(ds, path, address, compression=compression)
    # TensorFlow's writer commits on its heartbeat cadence: about a minute.
    deadline = time.monotonic() + 300
    while not os.path.exists(os.path.join(path, "DONE")):
        assert not os.path.exists(os.path.join(path, "ERROR")), open(os.path.join(path, "ERROR")).read()
        assert time.monotonic() < deadline, "TensorFlow's distributed_save did not finish"
        time.sleep(0.5)
    worker.stop()
    dispatcher.stop()
    return path


def register(target, pipeline, tmp_path, name):
    file = tmp_path / f"{name}.json"
    file.write_text(json.dumps(pipeline))
    out = subprocess.run([tfdata_bin(), "register", "--service", target, "--pipeline", str(file)],
                         check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def values(ds):
    return [(int(x), s.decode()) for x, s in ds.as_numpy_iterator()]


def test_our_workers_load_a_tensorflow_snapshot(tfdata_dispatcher, tmp_path):
    path = tf_snapshot(tmp_path, "AUTO")  # SNAPPY
    expected = collections.Counter(values(tf.data.Dataset.load(path)))
    assert expected == collections.Counter((x, str(x)) for x in range(N))

    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    workers = [TfdataProcess("worker", "--dispatcher-address", f"localhost:{d.port}") for _ in range(2)]
    dataset_id = register(target, {"op": "load", "path": path}, tmp_path, "load")

    # distributed_epoch: one split per chunk, so each element exactly once
    # across the two workers.
    ds = service.from_dataset_id("distributed_epoch", target, dataset_id)
    assert collections.Counter(values(ds)) == expected
    # parallel_epochs: each worker reads the whole snapshot.
    ds = service.from_dataset_id("parallel_epochs", target, dataset_id)
    assert collections.Counter(values(ds)) == collections.Counter({k: 2 for k in expected})
    for w in workers:
        assert w.stop() == 0


@pytest.mark.parametrize("compression", ["NONE", "GZIP", "ZLIB", "SNAPPY"])
def test_tensorflow_loads_our_snapshots(tmp_path, compression):
    path = str(tmp_path / "ours")
    subprocess.run([write_snapshot_bin(), path, compression, "30"], check=True, timeout=60)
    ds = tf.data.Dataset.load(path)
    assert ds.element_spec == (
        tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.string),
        tf.TensorSpec([2], tf.float32), tf.TensorSpec([None], tf.uint8))
    got = sorted(ds.as_numpy_iterator(), key=lambda e: int(e[0]))
    assert [int(e[0]) for e in got] == list(range(30))
    for x, s, f, b in got:
        x = int(x)
        n = 600_000 if x == 3 else x % 7 * 100  # x == 3 spans several Snappy blocks
        assert s == str(x).encode()
        assert f.tolist() == [x / 2] * 2
        assert b.tobytes() == bytes((i * x) % 251 for i in range(n))
    # TensorFlow reads chunks as splits too: distributed_epoch over its own
    # service hands our chunks out one by one.
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1]))
    distributed = ds.map(lambda x, s, f, b: x).apply(
        service.distribute("distributed_epoch", dispatcher.target))
    assert sorted(int(x) for x in distributed.as_numpy_iterator()) == list(range(30))
    worker.stop()
    dispatcher.stop()
