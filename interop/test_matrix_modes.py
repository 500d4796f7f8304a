"""More cells of the interop matrix (docs/compatibility.md): TensorFlow
clients reading our workers in distributed_epoch, shared jobs and coordinated
reads; our Rust client reading TensorFlow workers in distributed_epoch through
our dispatcher; a mixed cluster in those modes."""

import collections
import json
import subprocess
import threading
import time

import tensorflow as tf

from conftest import TfdataProcess, tensorflow_only, tfdata_bin

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


def _rust_readers(target, dataset_id, extra_per_reader):
    procs = [subprocess.Popen([tfdata_bin(), "read", "--service", target, "--dataset-id", dataset_id, *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for extra in extra_per_reader]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        outs.append([int(x) for x in out.split()])
    return outs


def _check_rust_shared_and_coordinated(target):
    finite = service.register_dataset(target, tensorflow_only(tf.data.Dataset.range(60))).numpy().decode()
    a, b = _rust_readers(target, finite, [["--job-name", "shared"], ["--job-name", "shared"]])
    assert sorted(a + b) == list(range(60)), "one pass split between the two Rust readers"
    infinite = service.register_dataset(target, tensorflow_only(tf.data.Dataset.range(1000000).repeat())).numpy().decode()
    a, b = _rust_readers(target, infinite, [
        ["--job-name", "coordinated", "--consumer-index", str(i), "--num-consumers", "2", "--take", "30"]
        for i in range(2)])
    assert all(y == x + 1 for x, y in zip(a, b)), (a, b)


def test_rust_client_shared_and_coordinated_on_tf_workers_via_our_dispatcher(tfdata_dispatcher):
    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{d.port}"))]
    _check_rust_shared_and_coordinated(target)
    for w in workers:
        w.stop()


def test_rust_client_shared_and_coordinated_on_tf_workers_via_tf_dispatcher():
    dispatcher = service.DispatchServer()
    target = dispatcher.target
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=target.split("://")[1]))]
    _check_rust_shared_and_coordinated(target)
    for w in workers:
        w.stop()
    dispatcher.stop()


def test_mixed_cluster_distributed_epoch_sharing_and_coordinated(tfdata_dispatcher, tmp_path):
    """One TensorFlow worker and one tfdata worker under our dispatcher: every
    mode still runs each dataset only on the workers that can execute it."""
    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    tf_worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{d.port}"))
    ours = our_workers(d.port, 1)

    # distributed_epoch: a TensorFlow graph with an op tfdata lacks (TensorFlow
    # worker only) read by a TensorFlow client, a plain one (both workers,
    # each split once), and a tfdata pipeline (our worker only) read by ours.
    ds = tensorflow_only(tf.data.Dataset.range(40)).apply(service.distribute("distributed_epoch", target))
    assert sorted(int(x) for x in ds.as_numpy_iterator()) == list(range(40))
    ds = tf.data.Dataset.range(40).apply(service.distribute("distributed_epoch", target))
    assert sorted(int(x) for x in ds.as_numpy_iterator()) == list(range(40))
    pipeline = register(target, {"op": "range", "stop": 40}, tmp_path, "mixed")
    out = subprocess.run([tfdata_bin(), "read", "--service", target, "--dataset-id", pipeline,
                          "--processing-mode", "distributed_epoch"],
                         check=True, capture_output=True, text=True, timeout=120)
    assert sorted(int(x) for x in out.stdout.split()) == list(range(40))

    # Shared jobs and coordinated reads of a TensorFlow graph, Rust readers:
    # one copy (only the TensorFlow worker runs it), split between readers.
    _check_rust_shared_and_coordinated(target)

    # A shared job of our pipeline, TensorFlow readers: one copy (our worker only).
    readers = [iter(service.from_dataset_id("parallel_epochs", target, pipeline, job_name="mixed-shared"))
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
    assert sorted(values) == list(range(40))
    tf_worker.stop()
    for w in ours:
        assert w.stop() == 0
