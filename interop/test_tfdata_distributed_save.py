"""`tfdata save` with our dispatcher and our workers, all real processes,
read back by TensorFlow's `tf.data.Dataset.load`: every element exactly once
while the dispatcher is SIGKILLed and restarted, a worker is SIGKILLed and
restarted at its address, and another is SIGKILLed and replaced by a new
worker elsewhere."""

import collections
import json
import os
import signal
import socket
import subprocess
import threading
import time

import tensorflow as tf

from conftest import TfdataProcess, tfdata_bin


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dispatcher(port, work_dir):
    # A short worker_timeout, so a killed worker's stream is reassigned soon.
    return TfdataProcess("dispatcher", "--port", str(port), "--work-dir", work_dir,
                         "--fault-tolerant-mode", "--worker-timeout-ms", "1500")


def _worker(dispatcher_port, port=0):
    return TfdataProcess("worker", "--dispatcher-address", f"localhost:{dispatcher_port}",
                         "--port", str(port), "--heartbeat-interval-ms", "200",
                         "--snapshot-commit-interval-ms", "200")


def _loaded(path):
    return collections.Counter(int(x) for x in tf.data.Dataset.load(path).as_numpy_iterator())


def _save(tmp_path, port, n, *extra):
    pipeline = tmp_path / "pipeline.json"
    pipeline.write_text(json.dumps({"op": "range", "stop": n}))
    path = str(tmp_path / "snapshot")
    save = subprocess.Popen([tfdata_bin(), "save", "--service", f"grpc://localhost:{port}",
                             "--pipeline", str(pipeline), "--path", path, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return path, save


def test_save_with_our_workers_and_a_plain_progress_log(tmp_path):
    port = _free_port()
    d = _dispatcher(port, str(tmp_path / "work"))
    w = _worker(port)
    path, save = _save(tmp_path, port, 5000, "--compression", "GZIP")
    out, err = save.communicate(timeout=120)
    assert save.returncode == 0, err
    assert out.strip() == path
    # Not a terminal: plain lines, the last one complete.
    assert "5000/5000 elements" in err.splitlines()[-1], err
    assert _loaded(path) == collections.Counter(range(5000))
    status = subprocess.run([tfdata_bin(), "status", "--dispatcher", f"localhost:{port}"],
                            capture_output=True, text=True, timeout=30)
    assert path in status.stdout and "done" in status.stdout, status.stdout
    assert w.stop() == 0 and d.stop() == 0


def test_save_survives_dispatcher_and_worker_kills(tmp_path):
    port = _free_port()
    work = str(tmp_path / "work")
    dispatcher = [_dispatcher(port, work)]
    restarted_port = _free_port()
    workers = [_worker(port, restarted_port), _worker(port)]
    # Every element of `range` is a split (one GetSnapshotSplit and one split
    # file each, as with TensorFlow), about 1,000 a second here: 20,000 last
    # long enough for every kill.
    n = 20_000
    path, save = _save(tmp_path, port, n)
    kills = collections.Counter()
    stop = threading.Event()

    def done():
        return os.path.exists(os.path.join(path, "DONE"))

    def chaos():
        plan = ["dispatcher", "worker-restart", "dispatcher", "worker-replace", "dispatcher"]
        for what in plan:
            if stop.wait(1.5) or done():
                return
            if what == "dispatcher":
                dispatcher[0].proc.send_signal(signal.SIGKILL)
                dispatcher[0].proc.wait()
                time.sleep(0.3)
                dispatcher[0] = _dispatcher(port, work)
            elif what == "worker-restart":
                # Same address: the dispatcher gives it its stream back.
                workers[0].proc.send_signal(signal.SIGKILL)
                workers[0].proc.wait()
                workers[0] = _worker(port, restarted_port)
            else:
                # Gone for good: its stream goes to the new worker after
                # worker_timeout.
                workers[1].proc.send_signal(signal.SIGKILL)
                workers[1].proc.wait()
                workers.append(_worker(port))
            if not done():
                kills[what] += 1

    killer = threading.Thread(target=chaos)
    killer.start()
    try:
        out, err = save.communicate(timeout=600)
    finally:
        stop.set()
        killer.join()
    print(f"kills that landed mid-save: {dict(kills)}")
    assert save.returncode == 0, err[-3000:]
    assert kills["dispatcher"] >= 1 and kills["worker-restart"] + kills["worker-replace"] >= 1, kills
    got = _loaded(path)
    missing = n - len(got)
    repeated = sum(c - 1 for c in got.values() if c > 1)
    assert sum(got.values()) == n and got == collections.Counter(range(n)), (
        f"{sum(got.values())} elements, {missing} missing, {repeated} repeated")
    for w in workers:
        w.proc.kill()
    assert dispatcher[0].stop() == 0
