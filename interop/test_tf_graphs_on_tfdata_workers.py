"""TensorFlow 2.21 clients registering real `tf.data` graphs (`distribute`,
`register_dataset`) on our dispatcher, served by **tfdata workers only**
(issue 13: tfdata workers run TensorFlow dataset graphs).

Every case of `tf_graph_corpus.py` is one test id: TensorFlow's own client
reads it through the service (parallel_epochs, one worker, so elements come
in the dataset's order) and the elements are compared with TensorFlow's local
iteration of the same pipeline under the case's rule (exact, float, jpeg or
multiset; see the corpus module). Then the processing modes on TensorFlow
graphs: distributed_epoch, static sharding (DATA, FILE), a shared job,
coordinated reads, `from_dataset_id`, a fault-tolerant dispatcher restart
mid-read (their pipelines are dataset ops only, so they test the modes, not
the map kernels the corpus covers); and a graph with an op tfdata cannot run (`EagerPyFunc`) failing
job creation at once, naming the op.

`TFDATA_CORPUS_WORKERS=tensorflow` runs the same tests with TensorFlow's
in-process `WorkerServer`s instead (our dispatcher either way): that validates
the corpus, its data and the comparisons independently of our workers.
`TFDATA_CORPUS_TIMEOUT` (seconds, default 30) bounds every read, so a worker
that never takes a task fails the test instead of hanging it.
"""

import collections
import os
import signal
import socket
import subprocess
import threading

import numpy as np
import pytest
import tensorflow as tf

import tf_graph_corpus as corpus
from conftest import TfdataProcess, tfdata_bin

service = tf.data.experimental.service

WORKERS = os.environ.get("TFDATA_CORPUS_WORKERS", "tfdata")
assert WORKERS in ("tfdata", "tensorflow"), f"TFDATA_CORPUS_WORKERS={WORKERS!r}: tfdata or tensorflow"
TIMEOUT = float(os.environ.get("TFDATA_CORPUS_TIMEOUT", "30"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(port):
    """`tfdata status` of the dispatcher, for failure messages."""
    try:
        out = subprocess.run([tfdata_bin(), "status", "--dispatcher", f"localhost:{port}"],
                             capture_output=True, text=True, timeout=10)
        return (out.stdout + out.stderr)[-1500:]
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return f"(tfdata status failed: {e})"


def within(seconds, what, fn, port=None):
    """Runs `fn` on a daemon thread; its result, its exception, or a test
    failure after `seconds` (the thread is abandoned: TensorFlow's iterators
    cannot be cancelled from outside)."""
    result = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        extra = f"\ndispatcher status:\n{status(port)}" if port else ""
        pytest.fail(f"{what}: no result after {seconds:.0f} s with {WORKERS} workers "
                    f"(did a worker take the task?){extra}", pytrace=False)
    if "error" in result:
        raise result["error"]
    return result["value"]


@pytest.fixture
def workers():
    """`start(dispatcher_port, n=1, ports=None)`: n workers of the selected kind."""
    started = []

    def start(dispatcher_port, n=1, ports=None):
        ports = ports or [0] * n
        new = []
        for p in ports:
            if WORKERS == "tensorflow":
                w = service.WorkerServer(service.WorkerConfig(
                    dispatcher_address=f"localhost:{dispatcher_port}", port=p, heartbeat_interval_ms=200))
            else:
                w = TfdataProcess("worker", "--dispatcher-address", f"localhost:{dispatcher_port}",
                                  "--port", str(p), "--heartbeat-interval-ms", "200")
            new.append(w)
        started.extend(new)
        return new

    yield start
    for w in started:
        if WORKERS == "tensorflow":
            w.stop()
        else:
            assert w.stop() == 0, "tfdata worker did not exit cleanly"


class TensorFlowDispatcher:
    """TensorFlow's own DispatchServer, in this process, shaped like TfdataProcess."""

    def __init__(self, port=0, worker_addresses=None, work_dir=None):
        config = service.DispatcherConfig(
            port=port, worker_addresses=worker_addresses, work_dir=work_dir,
            fault_tolerant_mode=work_dir is not None)
        self.server = service.DispatchServer(config)
        self.port = int(self.server.target.rsplit(":", 1)[1])

    def stop(self):
        self.server._stop()
        return 0


@pytest.fixture(params=["tfdata", "tensorflow"])
def dispatcher(request, tfdata_dispatcher):
    """`start(worker_addresses=None)`: our dispatcher, or TensorFlow's (whose
    tasks our workers take as they come: it knows nothing of capabilities)."""
    started = []

    def start(worker_addresses=None):
        if request.param == "tfdata":
            extra = ("--worker-addresses", ",".join(worker_addresses)) if worker_addresses else ()
            return tfdata_dispatcher(*extra)
        d = TensorFlowDispatcher(worker_addresses=worker_addresses)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


@pytest.fixture(scope="session")
def corpus_data(tmp_path_factory):
    return corpus.write_data(tmp_path_factory.mktemp("corpus-data"))


def _params():
    out = []
    for c in corpus.CASES:
        for compression in c.compressions:
            suffix = "" if compression == "AUTO" else "-uncompressed"
            out.append(pytest.param(c, compression, id=c.name + suffix))
    return out


@pytest.mark.parametrize("case,compression", _params())
def test_corpus_case(case, compression, tfdata_dispatcher, workers, corpus_data, tmp_path):
    data = corpus_data if case.files else None
    want = corpus.elements(case.make(corpus.Ctx(data, tmp_path / "local")), case.take)
    assert want, "TensorFlow's own iteration is empty: the case proves nothing"

    d = tfdata_dispatcher()
    workers(d.port, 1)
    ds = case.make(corpus.Ctx(data, tmp_path / "service")).apply(service.distribute(
        processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}",
        job_name=case.name, compression=compression))
    got = within(TIMEOUT, f"reading {case.name}", lambda: corpus.elements(ds, case.take), d.port)
    corpus.compare(case, want, got)


# ---------------------------------------------------------------------------
# Processing modes over TensorFlow graphs
# ---------------------------------------------------------------------------

def _values(ds):
    return [x.tolist() if hasattr(x, "tolist") else x for x in ds.as_numpy_iterator()]


def test_distributed_epoch_over_range(dispatcher, workers):
    d = dispatcher()
    workers(d.port, 2)
    ds = tf.data.Dataset.range(5, 85, 2).apply(
        service.distribute(processing_mode="distributed_epoch", service=f"grpc://localhost:{d.port}"))
    got = within(TIMEOUT, "distributed_epoch over range", lambda: _values(ds), d.port)
    # Each element exactly once across the two workers, in some order.
    assert sorted(got) == list(range(5, 85, 2))


def test_distributed_epoch_over_tensor_slices(dispatcher, workers):
    d = dispatcher()
    workers(d.port, 2)
    names = [f"n{i}".encode() for i in range(30)]
    ds = tf.data.Dataset.from_tensor_slices((list(range(30)), names)).apply(
        service.distribute(processing_mode="distributed_epoch", service=f"grpc://localhost:{d.port}"))
    got = within(TIMEOUT, "distributed_epoch over from_tensor_slices", lambda: _values(ds), d.port)
    assert sorted(got) == sorted(zip(range(30), names))


def _check_random_read_whole(got):
    # The range split: each value exactly once.
    assert sorted(r for r, _ in got) == list(range(40))
    # The random values: two prefixes of TensorFlow's stream (one per worker
    # that took splits), so stream[k] comes at most twice, never more often
    # than stream[k - 1], and nothing else comes.
    stream = list(tf.data.Dataset.random(seed=4).take(40).as_numpy_iterator())
    assert len(set(stream)) == 40
    drawn = collections.Counter(v for _, v in got)
    assert set(drawn) <= set(stream)
    counts = [drawn[v] for v in stream]
    assert all(c <= 2 for c in counts) and counts == sorted(counts, reverse=True), counts


def test_distributed_epoch_reads_random_whole_on_each_worker(dispatcher, workers):
    """TensorFlow gives `RandomDataset` a provider of endless splits its
    iterator never reads: in distributed_epoch the range is split across the
    two workers and each worker draws the whole seeded random stream (the same
    test with TensorFlow's own workers: TFDATA_CORPUS_WORKERS=tensorflow)."""
    d = dispatcher()
    workers(d.port, 2)
    ds = tf.data.Dataset.zip(tf.data.Dataset.range(40), tf.data.Dataset.random(seed=4))
    got = within(TIMEOUT, "distributed_epoch over zip(range, random)", lambda: _values(
        ds.apply(service.distribute(processing_mode="distributed_epoch",
                                    service=f"grpc://localhost:{d.port}"))), d.port)
    _check_random_read_whole(got)


@pytest.mark.skipif(WORKERS == "tensorflow", reason="the point is tfdata workers under TensorFlow's dispatcher")
def test_tensorflows_dispatcher_splits_random_for_tfdata_workers(workers):
    """The same under TensorFlow's own dispatcher: its RandomDataset split
    provider and our workers' count of sources agree."""
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    port = int(dispatcher.target.rsplit(":", 1)[1])
    workers(port, 2)
    ds = tf.data.Dataset.zip(tf.data.Dataset.range(40), tf.data.Dataset.random(seed=4))
    got = within(TIMEOUT, "zip(range, random) under TensorFlow's dispatcher", lambda: _values(
        ds.apply(service.distribute(processing_mode="distributed_epoch", service=dispatcher.target))))
    _check_random_read_whole(got)
    dispatcher._stop()


def test_static_sharding_data(dispatcher, workers):
    ports = [free_port(), free_port()]
    d = dispatcher([f"localhost:{p}" for p in ports])
    workers(d.port, ports=ports)
    ds = tf.data.Dataset.range(1000, 1040).apply(service.distribute(
        processing_mode=service.ShardingPolicy.DATA, service=f"grpc://localhost:{d.port}"))
    got = within(TIMEOUT, "DATA sharding", lambda: _values(ds), d.port)
    # Worker i of 2 keeps elements i, i+2, ...: every element once.
    assert sorted(got) == [x + 1000 for x in range(40)]


def test_static_sharding_file(dispatcher, workers, tmp_path):
    files = []
    for i in range(4):
        path = str(tmp_path / f"shard-{i}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for j in range(5):
                w.write(f"{i}:{j}".encode())
        files.append(path)
    ports = [free_port(), free_port()]
    d = dispatcher([f"localhost:{p}" for p in ports])
    workers(d.port, ports=ports)
    ds = tf.data.TFRecordDataset(files).apply(service.distribute(
        processing_mode=service.ShardingPolicy.FILE, service=f"grpc://localhost:{d.port}"))
    got = within(TIMEOUT, "FILE sharding", lambda: _values(ds), d.port)
    # Each worker reads its own files (2 each): every record once.
    assert sorted(got) == sorted(f"{i}:{j}".encode() for i in range(4) for j in range(5))


def test_shared_job_between_two_tf_clients(dispatcher, workers):
    d = dispatcher()
    workers(d.port, 1)

    def make():
        return tf.data.Dataset.range(0, 60, 2).apply(service.distribute(
            processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}", job_name="shared"))

    def read_both():
        a, b = iter(make()), iter(make())
        values, done = [], set()
        while len(done) < 2:
            for name, it in (("a", a), ("b", b)):
                if name in done:
                    continue
                try:
                    values.append(int(next(it)))
                except StopIteration:
                    done.add(name)
        return values

    values = within(TIMEOUT, "a shared job", read_both, d.port)
    # One job, one worker: the two clients split one pass between them.
    assert collections.Counter(values) == collections.Counter(x * 2 for x in range(30))


def test_coordinated_reads_of_an_infinite_graph(dispatcher, workers):
    d = dispatcher()
    workers(d.port, 2)
    results, errors = {}, {}

    def consume(index):
        try:
            ds = tf.data.Dataset.range(1000000).repeat().apply(service.distribute(
                processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}",
                job_name="coordinated", consumer_index=index, num_consumers=2))
            it = iter(ds)
            results[index] = [int(next(it)) for _ in range(30)]
        except Exception as e:  # noqa: BLE001 - reported below
            errors[index] = e

    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    if any(t.is_alive() for t in threads):
        pytest.fail(f"coordinated reads: no result after {TIMEOUT:.0f} s with {WORKERS} workers\n{status(d.port)}",
                    pytrace=False)
    if errors:
        raise next(iter(errors.values()))
    assert len(results[0]) == 30 and len(results[1]) == 30
    # Round k of both consumers is served by the same worker, from consecutive elements.
    assert all(b == a + 1 for a, b in zip(results[0], results[1])), results


def test_register_dataset_and_from_dataset_id(dispatcher, workers):
    d = dispatcher()
    workers(d.port, 1)
    target = f"grpc://localhost:{d.port}"
    ds = tf.data.Dataset.from_tensor_slices(["ab", "Cd", "eF"])
    dataset_id = service.register_dataset(target, ds)
    read = service.from_dataset_id(processing_mode="parallel_epochs", service=target,
                                   dataset_id=dataset_id, element_spec=ds.element_spec)
    assert within(TIMEOUT, "from_dataset_id", lambda: _values(read), d.port) == [b"ab", b"Cd", b"eF"]


@pytest.mark.parametrize("kind", ["tfdata", "tensorflow"])
def test_fault_tolerant_dispatcher_restart_mid_read(kind, tmp_path, workers):
    work_dir = str(tmp_path / "work_dir")

    def start(port):
        if kind == "tensorflow":
            return TensorFlowDispatcher(port=port, work_dir=work_dir)
        return TfdataProcess("dispatcher", "--port", str(port), "--work-dir", work_dir, "--fault-tolerant-mode")

    dispatcher = start(0)
    port = dispatcher.port
    started = []
    try:
        started = workers(port, 1)
        n = 3000
        ds = tf.data.Dataset.range(n).apply(service.distribute(
            processing_mode="parallel_epochs", service=f"grpc://localhost:{port}", job_name="ft"))
        it = iter(ds)
        got = within(TIMEOUT, "the first 1000 elements", lambda: [int(next(it)) for _ in range(1000)], port)
        # SIGKILL mid-read (TensorFlow's, in this process: stopped), restart
        # from the journal on the same port.
        if kind == "tensorflow":
            dispatcher.stop()
        else:
            dispatcher.proc.send_signal(signal.SIGKILL)
            dispatcher.proc.wait()
        dispatcher = start(port)

        def rest():
            return [int(x) for x in it]
        got += within(2 * TIMEOUT, "the rest after the restart", rest, port)
        assert got == list(range(n))
    finally:
        for w in started:  # before the dispatcher they heartbeat to
            w.stop()
        dispatcher.stop()


@pytest.mark.skipif(WORKERS == "tensorflow", reason="TensorFlow workers run EagerPyFunc in this process")
def test_a_graph_with_an_unsupported_op_fails_job_creation_naming_it(tfdata_dispatcher, workers):
    d = tfdata_dispatcher()
    workers(d.port, 1)
    ds = tf.data.Dataset.range(3).map(lambda x: tf.py_function(lambda v: v * 2, [x], tf.int64)).apply(
        service.distribute(processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}"))
    # At once (well within the timeout), not a hang: no tfdata worker can run it.
    with pytest.raises(tf.errors.OpError, match="EagerPyFunc"):
        within(TIMEOUT, "a graph with EagerPyFunc", lambda: _values(ds), d.port)


@pytest.mark.skipif(WORKERS == "tensorflow", reason="the point is tfdata workers under TensorFlow's dispatcher")
@pytest.mark.parametrize("mode", ["parallel_epochs", "distributed_epoch"])
def test_tensorflows_dispatcher_gives_tfdata_workers_its_graphs(mode, workers):
    """TensorFlow's own DispatchServer with two tfdata workers, read by
    TensorFlow's client: the last row of docs/compatibility.md's matrix.
    TensorFlow's dispatcher knows nothing of capabilities; our workers run
    the graphs it hands them."""
    dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    port = int(dispatcher.target.rsplit(":", 1)[1])
    workers(port, 2)
    ds = tf.data.Dataset.range(40).map(lambda x: x * 3 + 1).filter(lambda x: x % 2 == 0).batch(4)
    distributed = ds.apply(service.distribute(processing_mode=mode, service=dispatcher.target))
    got = within(TIMEOUT, f"{mode} under TensorFlow's dispatcher", lambda: _values(distributed))
    local = [3 * x + 1 for x in range(40) if (3 * x + 1) % 2 == 0]
    values = sorted(int(v) for batch in got for v in np.asarray(batch).ravel())
    if mode == "parallel_epochs":
        assert values == sorted(local * 2)  # each worker serves the whole dataset
    else:
        assert values == sorted(local)  # each range split exactly once
    dispatcher._stop()
