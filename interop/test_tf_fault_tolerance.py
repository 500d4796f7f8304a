"""TensorFlow 2.21 clients and workers, and ours, reading through a fault-tolerant
dispatcher (ours, and TensorFlow's under our client) while it is killed (SIGKILL)
and restarted from its journal."""

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import tensorflow as tf

from conftest import TfdataProcess, tensorflow_only, tfdata_bin

service = tf.data.experimental.service


def start_dispatcher(port, work_dir):
    return TfdataProcess("dispatcher", "--port", str(port), "--work-dir", work_dir, "--fault-tolerant-mode")


def _kill_and_restart(current, port, start, while_running, times=3):
    """SIGKILLs and restarts the dispatcher `times` times in the background.
    Returns (stop event, thread, landed): `landed` gains an entry for each kill
    made while `while_running()` was true, so a test can prove the kills hit
    its read and not the idle time after it."""
    stop = threading.Event()
    landed = []

    def chaos():
        for _ in range(times):
            if stop.wait(0.4):
                return
            if while_running():
                landed.append(1)
            current[0].proc.send_signal(signal.SIGKILL)
            current[0].proc.wait()
            time.sleep(0.2)
            current[0] = start(port)

    killer = threading.Thread(target=chaos)
    killer.start()
    return stop, killer, landed


def _rust_read_through_restarts(target, dataset_id, n, current, port, start):
    """Reads `range(n)` with `tfdata read` while the dispatcher in `current`
    is SIGKILLed and restarted with `start`; checks every element, in order."""

    reader = subprocess.Popen([tfdata_bin(), "read", "--service", target, "--dataset-id", dataset_id],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop, killer, landed = _kill_and_restart(current, port, start, lambda: reader.poll() is None)
    out, err = reader.communicate(timeout=180)
    stop.set()
    killer.join()
    assert reader.returncode == 0, err[-2000:]
    assert landed, "the read finished before any dispatcher kill; the test proved nothing"
    assert [int(x) for x in out.split()] == list(range(n))


def test_tf_client_survives_dispatcher_restarts(tmp_path):
    work_dir = str(tmp_path / "work_dir")
    first = start_dispatcher(0, work_dir)
    port = first.port
    worker = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=f"localhost:{port}", heartbeat_interval_ms=200))
    n = 3000
    ds = tf.data.Dataset.range(n).apply(
        service.distribute(processing_mode="parallel_epochs", service=f"grpc://localhost:{port}"))

    current = [first]
    reading = threading.Event()
    reading.set()
    stop, killer, landed = _kill_and_restart(current, port, lambda p: start_dispatcher(p, work_dir),
                                             reading.is_set)
    got = []
    for x in ds.as_numpy_iterator():
        got.append(int(x))
        if len(got) % 100 == 0:
            time.sleep(0.05)  # keep the read going across the restarts
    reading.clear()
    stop.set()
    killer.join()
    assert landed, "the read finished before any dispatcher kill; the test proved nothing"
    assert got == list(range(n)), f"{len(got)} elements, first mismatch at {next((i for i, (a, b) in enumerate(zip(got, range(n))) if a != b), None)}"
    worker.stop()
    assert current[0].stop() == 0


def test_tf_client_on_our_workers_survives_dispatcher_restarts(tmp_path):
    work_dir = str(tmp_path / "work_dir")
    first = start_dispatcher(0, work_dir)
    port = first.port
    worker = TfdataProcess("worker", "--dispatcher-address", f"localhost:{port}", "--heartbeat-interval-ms", "200")
    target = f"grpc://localhost:{port}"
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"op": "range", "stop": 3000}))
    dataset_id = subprocess.run([tfdata_bin(), "register", "--service", target, "--pipeline", str(path)],
                                check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    ds = service.from_dataset_id("parallel_epochs", target, dataset_id)

    current = [first]
    reading = threading.Event()
    reading.set()
    stop, killer, landed = _kill_and_restart(current, port, lambda p: start_dispatcher(p, work_dir),
                                             reading.is_set)
    got = []
    for x in ds.as_numpy_iterator():
        got.append(int(x))
        if len(got) % 100 == 0:
            time.sleep(0.05)
    reading.clear()
    stop.set()
    killer.join()
    assert landed, "the read finished before any dispatcher kill; the test proved nothing"
    assert got == list(range(3000))
    assert worker.stop() == 0
    assert current[0].stop() == 0


def test_rust_client_on_tf_workers_survives_our_dispatcher_restarts(tmp_path):

    work_dir = str(tmp_path / "work_dir")
    first = start_dispatcher(0, work_dir)
    port = first.port
    worker = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=f"localhost:{port}", heartbeat_interval_ms=200))
    target = f"grpc://localhost:{port}"
    dataset_id = service.register_dataset(target, tf.data.Dataset.range(20000)).numpy().decode()
    current = [first]
    _rust_read_through_restarts(target, dataset_id, 20000, current, port, lambda p: start_dispatcher(p, work_dir))
    worker.stop()
    assert current[0].stop() == 0


def test_mixed_cluster_survives_dispatcher_restarts(tmp_path):
    """A TensorFlow worker and one of ours under our fault-tolerant dispatcher;
    a TensorFlow client reads a TensorFlow graph while our Rust client reads a
    tfdata pipeline, and the dispatcher is SIGKILLed and restarted meanwhile."""
    work_dir = str(tmp_path / "work_dir")
    first = start_dispatcher(0, work_dir)
    port = first.port
    target = f"grpc://localhost:{port}"
    tf_worker = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=f"localhost:{port}", heartbeat_interval_ms=200))
    our_worker = TfdataProcess("worker", "--dispatcher-address", f"localhost:{port}", "--heartbeat-interval-ms", "200")
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"op": "range", "stop": 20000}))
    pipeline = subprocess.run([tfdata_bin(), "register", "--service", target, "--pipeline", str(path)],
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    ds = tensorflow_only(tf.data.Dataset.range(3000)).apply(
        service.distribute(processing_mode="parallel_epochs", service=target))
    it = iter(ds)
    first_element = int(next(it))  # the TensorFlow job exists before the kills start
    reader = subprocess.Popen([tfdata_bin(), "read", "--service", target, "--dataset-id", pipeline],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    current = [first]
    reading = threading.Event()
    reading.set()
    stop, killer, landed = _kill_and_restart(current, port, lambda p: start_dispatcher(p, work_dir),
                                             reading.is_set)
    got = [first_element]
    for x in it:
        got.append(int(x))
        if len(got) % 100 == 0:
            time.sleep(0.05)
    out, err = reader.communicate(timeout=180)
    reading.clear()
    stop.set()
    killer.join()
    assert landed, "the reads finished before any dispatcher kill; the test proved nothing"
    assert got == list(range(3000))
    assert reader.returncode == 0, err[-2000:]
    assert [int(x) for x in out.split()] == list(range(20000))
    tf_worker.stop()
    assert our_worker.stop() == 0
    assert current[0].stop() == 0


class TfDispatcherProcess:
    """TensorFlow's own fault-tolerant dispatcher in a child process, so the
    test can SIGKILL it."""

    SCRIPT = (
        "import sys, tensorflow as tf\n"
        "s = tf.data.experimental.service.DispatchServer(tf.data.experimental.service.DispatcherConfig("
        "port=int(sys.argv[1]), work_dir=sys.argv[2], fault_tolerant_mode=True))\n"
        "print('ready', flush=True)\n"
        "s.join()\n"
    )

    def __init__(self, port, work_dir):
        self.proc = subprocess.Popen([sys.executable, "-c", self.SCRIPT, str(port), work_dir],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        return 0


def test_rust_client_survives_tf_dispatcher_restarts(tmp_path):
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    work_dir = str(tmp_path / "tf_work_dir")
    first = TfDispatcherProcess(port, work_dir)
    target = f"grpc://localhost:{port}"
    worker = service.WorkerServer(service.WorkerConfig(
        dispatcher_address=f"localhost:{port}", heartbeat_interval_ms=200))
    dataset_id = service.register_dataset(target, tf.data.Dataset.range(20000)).numpy().decode()
    current = [first]
    _rust_read_through_restarts(target, dataset_id, 20000, current, port, lambda p: TfDispatcherProcess(p, work_dir))
    worker.stop()
    current[0].stop()
