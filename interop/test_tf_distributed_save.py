"""TensorFlow 2.21's `distributed_save` through our dispatcher, written by
TensorFlow's workers, read back with TensorFlow's `tf.data.Dataset.load`:
every element exactly once, also while our dispatcher is SIGKILLed and
restarted from its journal and the snapshot's files."""

import collections
import os
import signal
import socket
import threading
import time

import pytest
import tensorflow as tf

from conftest import TfdataProcess

service = tf.data.experimental.service


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dispatcher(port, work_dir):
    return TfdataProcess("dispatcher", "--port", str(port), "--work-dir", work_dir, "--fault-tolerant-mode")


def _tf_workers(port, n):
    return [
        service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{port}", heartbeat_interval_ms=100))
        for _ in range(n)
    ]


def _wait_done(path, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(os.path.join(path, "DONE")):
            return
        if os.path.exists(os.path.join(path, "ERROR")):
            raise AssertionError(open(os.path.join(path, "ERROR")).read())
        time.sleep(0.1)
    raise AssertionError(f"{path} not DONE after {timeout} s")


def _loaded(path):
    return collections.Counter(int(x) for x in tf.data.Dataset.load(path).as_numpy_iterator())


@pytest.mark.parametrize("compression", ["AUTO", "GZIP", None])
def test_tensorflow_workers_save_through_our_dispatcher(tmp_path, compression):
    port = _free_port()
    d = _dispatcher(port, str(tmp_path / "work"))
    workers = _tf_workers(port, 2)
    path = str(tmp_path / "snapshot")
    ds = tf.data.Dataset.range(500).map(lambda x: x * 3)
    tf.data.experimental.distributed_save(ds, path, f"localhost:{port}", compression=compression)
    _wait_done(path)
    assert _loaded(path) == collections.Counter(x * 3 for x in range(500))
    # A second save to the same path is refused, as by TensorFlow's dispatcher.
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.data.experimental.distributed_save(ds, path, f"localhost:{port}")
    streams = {n for n in os.listdir(os.path.join(path, "streams"))}
    assert streams <= {"stream_0", "stream_1"} and streams, streams
    del workers
    assert d.stop() == 0


def test_a_save_survives_dispatcher_kills(tmp_path):
    port = _free_port()
    work = str(tmp_path / "work")
    current = [_dispatcher(port, work)]
    workers = _tf_workers(port, 2)
    path = str(tmp_path / "snapshot")
    n = 3000

    def slow(x):
        # About 1 ms an element, so the save lasts a few seconds.
        return tf.py_function(lambda v: (time.sleep(0.001), v)[1], [x], tf.int64)

    ds = tf.data.Dataset.range(n).map(slow)
    tf.data.experimental.distributed_save(ds, path, f"localhost:{port}")
    landed = []
    stop = threading.Event()

    def chaos():
        for _ in range(4):
            if stop.wait(0.7):
                return
            if not os.path.exists(os.path.join(path, "DONE")):
                landed.append(1)
            current[0].proc.send_signal(signal.SIGKILL)
            current[0].proc.wait()
            time.sleep(0.3)
            current[0] = _dispatcher(port, work)

    killer = threading.Thread(target=chaos)
    killer.start()
    try:
        _wait_done(path, timeout=240)
    finally:
        stop.set()
        killer.join()
    print(f"dispatcher kills that landed mid-save: {len(landed)}")
    assert landed, "the save finished before any kill; the test proved nothing"
    got = _loaded(path)
    assert sum(got.values()) == n and got == collections.Counter(range(n)), (
        f"{sum(got.values())} elements, {len(got)} distinct"
    )
    del workers
    assert current[0].stop() == 0


def test_our_workers_save_tensorflows_graph_through_our_dispatcher(tmp_path):
    """A TensorFlow graph (map, filter, batch, unbatch) sent by TensorFlow's
    `distributed_save` to our dispatcher, written by our worker only."""
    port = _free_port()
    d = _dispatcher(port, str(tmp_path / "work"))
    w = TfdataProcess("worker", "--dispatcher-address", f"localhost:{port}", "--port", "0",
                      "--heartbeat-interval-ms", "100")
    path = str(tmp_path / "snapshot")
    ds = (tf.data.Dataset.range(400).map(lambda x: x * x).filter(lambda x: x % 3 != 0)
          .batch(7).unbatch())
    tf.data.experimental.distributed_save(ds, path, f"localhost:{port}")
    _wait_done(path)
    expected = collections.Counter(int(x) for x in ds.as_numpy_iterator())
    assert _loaded(path) == expected
    owners = {open(os.path.join(path, "streams", s, "owner_worker")).read()
              for s in os.listdir(os.path.join(path, "streams"))}
    assert owners == {f"localhost:{w.port}"}, owners
    assert w.stop() == 0 and d.stop() == 0
