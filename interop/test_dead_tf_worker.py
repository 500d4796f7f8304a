"""A TensorFlow worker process that dies, under our dispatcher with
TensorFlow's default timeouts (worker_timeout 10 minutes): our reader finds
its port refusing and tells the dispatcher, whose own probes are refused too,
so the worker is declared lost in seconds and the read completes with the
other worker's data (issue 31). Under TensorFlow's dispatcher the same read
waits for the dead worker forever."""

import subprocess
import sys
import threading
import time

from conftest import tfdata_bin

WORKER = """
import sys, time
import tensorflow as tf
w = tf.data.experimental.service.WorkerServer(
    tf.data.experimental.service.WorkerConfig(dispatcher_address=sys.argv[1]))
print("started", flush=True)
time.sleep(3600)
"""


def start_tf_worker(dispatcher):
    proc = subprocess.Popen([sys.executable, "-c", WORKER, dispatcher], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    return proc


def test_a_killed_tensorflow_worker_is_declared_lost_in_seconds(tfdata_dispatcher, tmp_path):
    import tensorflow as tf

    d = tfdata_dispatcher()  # TensorFlow's defaults: worker_timeout 10 minutes
    address = f"localhost:{d.port}"
    workers = [start_tf_worker(address) for _ in range(2)]
    try:
        n = 3000
        target = f"grpc://{address}"
        dataset_id = tf.data.experimental.service.register_dataset(
            target, tf.data.Dataset.range(n)).numpy().decode()
        time.sleep(1.0)  # both workers registered (they heartbeat at start)
        reader = subprocess.Popen(
            [tfdata_bin(), "read", "--service", target, "--dataset-id", dataset_id],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        pump = threading.Thread(target=lambda: lines.extend(reader.stdout))
        pump.start()
        deadline = time.time() + 60
        while len(lines) < 200:
            assert time.time() < deadline and reader.poll() is None, f"read {len(lines)} elements"
            time.sleep(0.01)
        workers[0].kill()
        killed = time.time()
        try:
            reader.wait(timeout=120)
        except subprocess.TimeoutExpired:
            reader.kill()
            raise AssertionError(f"the read stalled on the dead worker after {len(lines)} elements")
        pump.join()
        took = time.time() - killed
        assert reader.returncode == 0, reader.stderr.read()
        values = [int(x) for x in lines]
        # The live worker's whole copy, and the dead one's part of its own.
        assert set(values) == set(range(n)), sorted(set(range(n)) - set(values))[:10]
        assert n <= len(values) < 2 * n
        print(f"TensorFlow worker SIGKILLed: the read finished {took:.1f} s later with {len(values)} elements")
    finally:
        for w in workers:
            w.kill()
