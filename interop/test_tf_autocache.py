"""Autocache of TensorFlow graphs (issue 36), end to end with TensorFlow's
own client: our dispatcher with `--autocache` (TensorFlow's client cannot
ask per job), our worker, and `tf.data.experimental.service.distribute(
processing_mode="distributed_epoch")` over `TFRecordDataset(files).map(
decode_jpeg + resize)`.

Epoch 1 is profiled and its deepest deterministic prefix written to a cache
(a distributed snapshot); epoch 2 reads the cache: the same multiset of
elements, the source files not opened (an inotify watch on their
directory, through libc), and the status row `cached` with a job served. A
second Python process registering the same pipeline (other function and
node names) reads the same cache; a changed source file drops the cache. A
graph with `tf.random.uniform` in its map is `not cached`, the reason
naming the op.
"""

import ctypes
import ctypes.util
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from conftest import TfdataProcess

service = tf.data.experimental.service

TIMEOUT = 120.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_images(directory, files=2, per_file=40):
    """TFRecord files of JPEGs large enough that decoding them costs far
    more than reading back the small resized image (what autocache weighs)."""
    rng = np.random.default_rng(7)
    paths = []
    for f in range(files):
        path = os.path.join(directory, f"images-{f}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for _ in range(per_file):
                image = rng.integers(0, 255, (384, 384, 3), dtype=np.uint8)
                w.write(tf.io.encode_jpeg(image, quality=95).numpy())
        paths.append(path)
    return paths


def decode_resize(record):
    image = tf.io.decode_jpeg(record, channels=3)
    return tf.cast(tf.image.resize(image, [16, 16]), tf.uint8)


# The other process of the cross-process test: it prints each element's
# bytes in hex, one a line.
OTHER_PROCESS = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
for i in range(3):  # moves TensorFlow's per-process counters on
    list(tf.data.Dataset.range(3).map(lambda x: x + i))
def decode_resize(record):
    image = tf.io.decode_jpeg(record, channels=3)
    return tf.cast(tf.image.resize(image, [16, 16]), tf.uint8)
port, files = sys.argv[1], sys.argv[2:]
ds = tf.data.TFRecordDataset(files).map(decode_resize).apply(
    tf.data.experimental.service.distribute(
        processing_mode="distributed_epoch", service=f"grpc://localhost:{port}"))
for e in ds:
    print(e.numpy().tobytes().hex())
"""


def epoch(ds):
    """One epoch's elements, as a sorted list of their bytes."""
    return sorted(bytes(e.numpy().tobytes()) for e in ds)


def autocache_rows(http_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/api/status", timeout=10) as r:
        return json.load(r)["autocache"]


def wait_for_row(http_port, states, what):
    deadline = time.monotonic() + TIMEOUT
    rows = []
    while time.monotonic() < deadline:
        rows = autocache_rows(http_port)
        # The dataset TensorFlow registered (a cached read registers one more
        # under `<id>_autocache_<hash>`, which has no row of its own).
        for row in rows:
            if row["state"] in states:
                return row
        time.sleep(0.2)
    pytest.fail(f"{what}: no autocache row in {states} after {TIMEOUT:.0f} s: {rows}")


class OpenWatch:
    """Counts opens of files in a directory (inotify IN_OPEN through libc;
    Linux only, as the service's own tests)."""

    IN_OPEN = 0x20
    IN_NONBLOCK = 0o4000

    def __init__(self, directory):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK)
        assert self.fd >= 0, f"inotify_init1: errno {ctypes.get_errno()}"
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(directory), self.IN_OPEN)
        assert wd >= 0, f"inotify_add_watch: errno {ctypes.get_errno()}"

    def opened(self):
        """The names opened since the last call."""
        names = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return names
            offset = 0
            while offset < len(data):
                _wd, _mask, _cookie, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16: offset + 16 + length].rstrip(b"\0").decode()
                names.append(name)
                offset += 16 + length

    def close(self):
        os.close(self.fd)


@pytest.fixture
def cluster(tmp_path):
    http_port = free_port()
    dispatcher = TfdataProcess(
        "dispatcher", "--port", "0", "--autocache", "--work-dir", str(tmp_path / "work"),
        "--http-port", str(http_port))
    worker = TfdataProcess("worker", "--dispatcher-address", f"localhost:{dispatcher.port}",
                           "--port", "0", "--heartbeat-interval-ms", "200")
    yield dispatcher, http_port
    assert worker.stop() == 0, "tfdata worker did not exit cleanly"
    assert dispatcher.stop() == 0, "tfdata dispatcher did not exit cleanly"


def test_epoch_two_of_a_tensorflow_graph_reads_the_cache(cluster, tmp_path):
    dispatcher, http_port = cluster
    data = tmp_path / "data"
    data.mkdir()
    files = write_images(str(data))
    ds = tf.data.TFRecordDataset(files).map(decode_resize).apply(
        service.distribute(processing_mode="distributed_epoch",
                           service=f"grpc://localhost:{dispatcher.port}"))
    expected = epoch(tf.data.TFRecordDataset(files).map(decode_resize))

    watch = OpenWatch(str(data))
    try:
        first = epoch(ds)
        # The watch sees reads: epoch 1 opens every file.
        assert set(watch.opened()) >= {os.path.basename(f) for f in files}
    finally:
        watch.close()
    assert first == expected
    row = wait_for_row(http_port, ("cached", "not cached"), "the first epoch's decision")
    assert row["state"] == "cached", row
    assert "MapDataset" in row["point"], row

    watch = OpenWatch(str(data))
    try:
        second = epoch(ds)
        opened = watch.opened()
    finally:
        watch.close()
    assert second == first
    assert opened == [], f"epoch 2 opened the source files: {opened}"
    row = wait_for_row(http_port, ("cached",), "the cached read")
    assert row["jobs_served"] >= 1, row

    # The same pipeline from another Python process, whose function and
    # node names differ (it builds other datasets first): another
    # registration, the same structural fingerprint, the same cache.
    watch = OpenWatch(str(data))
    try:
        out = subprocess.run(
            [sys.executable, "-c", OTHER_PROCESS, str(dispatcher.port), *files],
            capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout
        opened = watch.opened()
    finally:
        watch.close()
    third = sorted(bytes.fromhex(line) for line in out.split())
    assert third == first
    assert opened == [], f"the other process's read opened the source files: {opened}"
    rows = autocache_rows(http_port)
    assert len(rows) == 2, rows
    other = next(r for r in rows if r["dataset_id"] != row["dataset_id"])
    assert (other["state"], other["jobs_served"], other["path"]) == ("cached", 1, row["path"]), rows

    # A source file changes: its size and time are in the fingerprint, so
    # the cache is dropped and the next epoch reads the files as they are.
    with tf.io.TFRecordWriter(files[0]) as w:
        w.write(tf.io.encode_jpeg(np.zeros((64, 64, 3), np.uint8)).numpy())
    changed = epoch(ds)
    assert changed == epoch(tf.data.TFRecordDataset(files).map(decode_resize))
    assert len(changed) == 41
    assert not os.path.exists(row["path"]), "the stale cache is still there"


def test_a_graph_with_a_stateful_random_op_is_not_cached(cluster):
    dispatcher, http_port = cluster
    # JPEGs in memory: the only candidate below the random map is the
    # in-memory source, which is never cached, so the decision cannot
    # depend on a noisy profile.
    rng = np.random.default_rng(3)
    jpegs = [tf.io.encode_jpeg(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).numpy()
             for _ in range(8)]
    noisy = lambda r: tf.cast(decode_resize(r), tf.float32) + tf.random.uniform([])  # noqa: E731
    ds = tf.data.Dataset.from_tensor_slices(jpegs).map(noisy).apply(
        service.distribute(processing_mode="distributed_epoch",
                           service=f"grpc://localhost:{dispatcher.port}"))
    assert len(list(ds)) == 8
    row = wait_for_row(http_port, ("cached", "not cached"), "the decision")
    assert row["state"] == "not cached", row
    assert "unseeded random op `RandomUniform`" in row["reason"], row
    assert "1: MapDataset" in row["reason"], row


def test_a_graph_is_not_cached_while_tensorflow_workers_could_get_its_tasks(cluster, tmp_path):
    dispatcher, http_port = cluster
    # A TensorFlow worker beside ours: it could not run the private op a
    # graph reading a cache has, so nothing is cached, and the row says why.
    tf_worker = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=f"localhost:{dispatcher.port}", heartbeat_interval_ms=200))
    try:
        # The job is made once the dispatcher knows both workers.
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/api/status",
                                        timeout=10) as r:
                kinds = sorted(w["kind"] for w in json.load(r)["workers"])
            if len(kinds) == 2:
                break
            time.sleep(0.1)
        assert len(kinds) == 2, kinds
        data = tmp_path / "data"
        data.mkdir()
        files = write_images(str(data), files=1, per_file=8)
        ds = tf.data.TFRecordDataset(files).map(decode_resize).apply(
            service.distribute(processing_mode="distributed_epoch",
                               service=f"grpc://localhost:{dispatcher.port}"))
        assert len(list(ds)) == 8
        row = wait_for_row(http_port, ("cached", "not cached"), "the decision")
        assert row["state"] == "not cached", row
        assert "TensorFlow workers are registered" in row["reason"], row
    finally:
        tf_worker._stop()
