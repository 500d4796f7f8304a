"""`distributed_save` with TensorFlow 2.21's dispatcher and our workers: our
stream writers write what `tf.data.Dataset.load` reads, every element
exactly once, also when a worker is SIGKILLed mid-save and restarted at the
same address (it gets its stream back and resumes from its committed
chunks)."""

import collections
import os
import signal
import socket
import time

import pytest
import tensorflow as tf

from conftest import TfdataProcess

service = tf.data.experimental.service

HEARTBEAT_MS = "200"
COMMIT_MS = "300"


def tf_dispatcher(work_dir):
    d = service.DispatchServer(service.DispatcherConfig(port=0, work_dir=work_dir, fault_tolerant_mode=True))
    return d, d.target.split("://")[1]


def our_worker(address, *extra):
    return TfdataProcess("worker", "--dispatcher-address", address, "--heartbeat-interval-ms", HEARTBEAT_MS,
                         "--snapshot-commit-interval-ms", COMMIT_MS, *extra)


def wait_for_snapshot(path, timeout_s=120, while_waiting=None):
    """Waits for `<path>/DONE` (fails on `<path>/ERROR`)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if os.path.exists(os.path.join(path, "ERROR")):
            with open(os.path.join(path, "ERROR")) as f:
                pytest.fail(f"snapshot failed: {f.read()}")
        if os.path.exists(os.path.join(path, "DONE")):
            return
        if while_waiting:
            while_waiting()
        time.sleep(0.05)
    pytest.fail(f"{path}/DONE did not appear within {timeout_s} s")


def loaded(path):
    return collections.Counter(
        (int(a), b.decode()) for a, b in tf.data.Dataset.load(path).as_numpy_iterator())


def pairs(ds):
    return ds.map(lambda x: (x, tf.strings.as_string(x * 3)))


def expected(n):
    return collections.Counter((i, str(i * 3)) for i in range(n))


DATASETS = {
    "range_map": lambda n: pairs(tf.data.Dataset.range(n)),
    "shuffle_graph": lambda n: pairs(tf.data.Dataset.range(n).shuffle(64)).prefetch(4),
}


@pytest.mark.parametrize("compression", ["SNAPPY", "GZIP", None])
@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_snapshot_written_by_our_worker_loads_in_tensorflow(tmp_path, compression, dataset):
    n = 1000
    dispatcher, address = tf_dispatcher(str(tmp_path / "work_dir"))
    worker = our_worker(address)
    path = str(tmp_path / "snapshot")
    tf.data.experimental.distributed_save(DATASETS[dataset](n), path, address, compression=compression)
    wait_for_snapshot(path)
    got = loaded(path)
    assert got == expected(n)
    assert max(got.values()) == 1
    with open(os.path.join(path, "snapshot.metadata")) as f:
        assert ("compression" in f.read()) == (compression is not None)
    chunks = os.listdir(os.path.join(path, "chunks"))
    assert sum(int(c.rsplit("_", 1)[1]) for c in chunks) == n
    assert os.path.exists(os.path.join(path, "streams", "stream_0", "DONE"))
    assert worker.stop() == 0
    dispatcher._stop()


def test_failing_stream_fails_the_snapshot(tmp_path):
    """An element whose map fails: our writer writes the stream's ERROR and
    reports the status; TensorFlow's dispatcher fails the snapshot."""
    dispatcher, address = tf_dispatcher(str(tmp_path / "work_dir"))
    worker = our_worker(address)
    path = str(tmp_path / "snapshot")
    ds = tf.data.Dataset.range(100).map(
        lambda x: tf.debugging.check_numerics(1.0 / tf.cast(50 - x, tf.float32), "boom at 50"))
    tf.data.experimental.distributed_save(ds, path, address)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(path, "ERROR")) and time.time() < deadline:
        time.sleep(0.05)
    with open(os.path.join(path, "streams", "stream_0", "ERROR")) as f:
        stream_error = f.read()
    assert "boom at 50" in stream_error, stream_error
    with open(os.path.join(path, "ERROR")) as f:
        snapshot_error = f.read()
    assert "boom at 50" in snapshot_error, snapshot_error
    assert not os.path.exists(os.path.join(path, "DONE"))
    assert worker.stop() == 0
    dispatcher._stop()


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def test_worker_killed_mid_save_resumes_exactly_once(tmp_path):
    """Our worker is SIGKILLed mid-save three times and restarted at the same
    port (so TensorFlow's dispatcher hands it its stream back); the unseeded
    shuffle repeats under the stream's seed, and the finished snapshot holds
    every element exactly once."""
    n = 20000
    dispatcher, address = tf_dispatcher(str(tmp_path / "work_dir"))
    port = free_port()
    start = lambda: our_worker(address, "--port", str(port))  # noqa: E731
    current = [start()]
    path = str(tmp_path / "snapshot")
    tf.data.experimental.distributed_save(DATASETS["shuffle_graph"](n), path, address)

    chunks_dir = os.path.join(path, "chunks")
    landed = []

    def committed():
        try:
            return sorted(os.listdir(chunks_dir))
        except FileNotFoundError:
            return []

    last_kill = [time.time()]

    def maybe_kill():
        # Kill once some chunks are committed since the last restart, while
        # the stream is still being written.
        if len(landed) >= 3 or time.time() - last_kill[0] < 1.0:
            return
        before = committed()
        if not before or os.path.exists(os.path.join(path, "streams", "stream_0", "DONE")):
            return
        current[0].proc.send_signal(signal.SIGKILL)
        current[0].proc.wait()
        if not os.path.exists(os.path.join(path, "streams", "stream_0", "DONE")):
            landed.append(len(before))
        current[0] = start()
        last_kill[0] = time.time()

    wait_for_snapshot(path, timeout_s=300, while_waiting=maybe_kill)
    assert len(landed) >= 1, "the save finished before any kill landed; the test proved nothing"
    got = loaded(path)
    assert sum(got.values()) == n, f"{sum(got.values())} elements for {n}"
    assert got == expected(n)
    print(f"kills that landed mid-save: {len(landed)} (chunks committed before each: {landed})")
    assert current[0].stop() == 0
    dispatcher._stop()
