"""More cells of the interop matrix (docs/compatibility.md): TensorFlow
clients reading our workers in distributed_epoch, shared jobs and coordinated
reads; our Rust client reading TensorFlow workers in distributed_epoch through
our dispatcher."""

import collections
import json
import subprocess
import threading
import time

import tensorflow as tf

from conftest import TfdataProcess, tfdata_bin

service = tf.data.experimental.service


def register(target, pipeline, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(pipeline))
    out = subprocess.run([tfdata_bin(), "register", "--service", target, "--pipeline", str(path)],
                         check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def our_workers(port, n):
    workers = [TfdataProcess("worker", "--dispatcher-address", f"localhost:{port}") for _ in range(n)]
    time.sleep(0.5)
    return workers


def test_tf_clients_on_our_workers_in_every_mode(tfdata_dispatcher, tmp_path):
    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    workers = our_workers(d.port, 2)

    # distributed_epoch: each element once across our two workers.
    finite = register(target, {"op": "range", "stop": 50}, tmp_path, "finite")
    ds = service.from_dataset_id("distributed_epoch", target, finite)
    assert sorted(int(x) for x in ds.as_numpy_iterator()) == list(range(50))

    # A shared job: two TensorFlow readers split one pass (parallel_epochs:
    # each of the two workers produces the range once).
    readers = [iter(service.from_dataset_id("parallel_epochs", target, finite, job_name="shared"))
               for _ in range(2)]
    values, done = [], set()
    while len(done) < 2:
        for i, it in enumerate(readers):
            if i in done:
                continue
            try:
                values.append(int(next(it)))
            except StopIteration:
                done.add(i)
    assert collections.Counter(values) == collections.Counter(list(range(50)) * 2)

    # Coordinated reads of an infinite pipeline: consumers in step.
    infinite = register(target, {"op": "repeat", "input": {"op": "range", "stop": 1000000}}, tmp_path, "inf")
    results = {}

    def consume(index):
        ds = service.from_dataset_id("parallel_epochs", target, infinite, job_name="coordinated",
                                     consumer_index=index, num_consumers=2)
        it = iter(ds)
        results[index] = [int(next(it)) for _ in range(30)]

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(b == a + 1 for a, b in zip(results[0], results[1])), results
    for w in workers:
        assert w.stop() == 0


def test_rust_client_reads_tf_workers_in_distributed_epoch_through_our_dispatcher(tfdata_dispatcher):
    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{d.port}"))
               for _ in range(2)]
    dataset_id = service.register_dataset(target, tf.data.Dataset.range(40)).numpy().decode()
    out = subprocess.run([tfdata_bin(), "read", "--service", target, "--dataset-id", dataset_id,
                          "--processing-mode", "distributed_epoch"],
                         check=True, capture_output=True, text=True, timeout=120)
    assert sorted(int(x) for x in out.stdout.split()) == list(range(40))
    for w in workers:
        w.stop()
