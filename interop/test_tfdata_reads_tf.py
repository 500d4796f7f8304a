"""Our Rust client (`tfdata read`) reading datasets registered by TensorFlow
2.21 and served by TensorFlow workers, with TensorFlow's dispatcher and with
ours."""

import subprocess
import time

import tensorflow as tf

from conftest import tfdata_bin

service = tf.data.experimental.service


def tfdata_read(target, dataset_id, *extra):
    out = subprocess.run(
        [tfdata_bin(), "read", "--service", target, "--dataset-id", dataset_id, *extra],
        check=True, capture_output=True, text=True, timeout=120,
    )
    return out.stdout.split("\n")[:-1]


def check_reads(target):
    # Compressed (AUTO) int64 scalars, and uncompressed tuples with strings.
    ints = service.register_dataset(target, tf.data.Dataset.range(10))
    assert tfdata_read(target, ints.numpy().decode()) == [str(i) for i in range(10)]
    pairs = service.register_dataset(
        target, tf.data.Dataset.range(3).map(lambda x: (x * 10, tf.strings.as_string(x))), compression=None)
    assert tfdata_read(target, pairs.numpy().decode()) == ['(0, "0")', '(10, "1")', '(20, "2")']
    # distributed_epoch over a TensorFlow graph needs its splits from the
    # dispatcher; with TensorFlow's dispatcher that works for our reader too.
    return ints.numpy().decode()


def test_rust_client_with_tensorflow_dispatcher_and_workers():
    dispatcher = service.DispatchServer()
    target = dispatcher.target
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=target.split("://")[1]))
               for _ in range(2)]
    dataset_id = check_reads_two_workers(target)
    got = sorted(int(x) for x in tfdata_read(target, dataset_id, "--processing-mode", "distributed_epoch"))
    assert got == list(range(10)), got
    for w in workers:
        w.stop()
    dispatcher.stop()


def check_reads_two_workers(target):
    ints = service.register_dataset(target, tf.data.Dataset.range(10))
    got = sorted(int(x) for x in tfdata_read(target, ints.numpy().decode()))
    assert got == sorted(list(range(10)) * 2), got
    return ints.numpy().decode()


def test_rust_client_with_our_dispatcher_and_tensorflow_workers(tfdata_dispatcher):
    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{d.port}"))]
    check_reads(target)
    for w in workers:
        w.stop()


def test_mixed_cluster_routes_tasks_by_what_workers_can_run(tfdata_dispatcher, tmp_path):
    import json

    from conftest import TfdataProcess, tensorflow_only

    d = tfdata_dispatcher()
    target = f"grpc://localhost:{d.port}"
    tf_worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=f"localhost:{d.port}"))
    our_worker = TfdataProcess("worker", "--dispatcher-address", f"localhost:{d.port}")
    time.sleep(0.5)
    # A TensorFlow graph with an op tfdata lacks: only the TensorFlow worker
    # gets a task (one copy).
    ds = tensorflow_only(tf.data.Dataset.range(10)).apply(service.distribute("parallel_epochs", target))
    assert [int(x) for x in ds.as_numpy_iterator()] == list(range(10))
    # A plain one: both workers run it (a copy each).
    ds = tf.data.Dataset.range(10).apply(service.distribute("parallel_epochs", target))
    assert sorted(int(x) for x in ds.as_numpy_iterator()) == sorted(list(range(10)) * 2)
    # A tfdata pipeline: only the tfdata worker gets a task (one copy).
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"op": "range", "stop": 7}))
    out = subprocess.run([tfdata_bin(), "register", "--service", target, "--pipeline", str(path)],
                         check=True, capture_output=True, text=True, timeout=60)
    assert tfdata_read(target, out.stdout.strip()) == [str(i) for i in range(7)]
    tf_worker.stop()
    assert our_worker.stop() == 0
