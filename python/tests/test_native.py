"""The properties of the native layer that make it a Python library: elements
without copies, the GIL released while Rust waits, Ctrl-C, fork()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tfdata
from tfdata import _native
from tfdata.experimental import service

from conftest import REPO, run_python, wait_for


def distributed(dataset, cluster, **kwargs):
    return dataset.apply(service.distribute("parallel_epochs", cluster.target, **kwargs))


# ---- no copies ----


def test_stream_elements_are_views_of_the_received_buffers(cluster):
    # 1 MiB float32 tensors: each travels as its own piece of the stream.
    rows = np.random.default_rng(0).random((4, 256 * 1024), dtype=np.float32)
    ds = distributed(tfdata.Dataset.from_tensor_slices(rows), cluster, compression=None)
    seen = 0
    for i, array in enumerate(ds):
        assert isinstance(array, np.ndarray) and array.dtype == np.float32
        np.testing.assert_array_equal(array, rows[i])
        owner = array.base
        # The array's memory is the Rust buffer its base object holds: the
        # same address, not a copy of it.
        assert isinstance(owner, _native.TensorBuffer)
        assert owner.address == array.__array_interface__["data"][0]
        assert len(owner) == array.nbytes
        # Viewed where it was received, aligned or not (numpy and torch
        # compute on unaligned arrays correctly).
        assert array.flags.writeable and array.flags.c_contiguous
        array[0] = -1.0  # writable, so torch.from_numpy takes it as it is
        assert array[0] == -1.0
        seen += 1
    assert seen == 4


def test_batches_of_small_elements_are_views_too(cluster):
    ds = distributed(tfdata.Dataset.range(4096).batch(1024), cluster, compression=None)
    total = 0
    for batch in ds:
        assert batch.shape == (1024,) and batch.dtype == np.int64
        total += int(batch.sum())
        assert isinstance(batch.base, _native.TensorBuffer)
        assert batch.base.address == batch.__array_interface__["data"][0]
    assert total == sum(range(4096))


def test_local_iteration_never_hands_out_a_shared_buffer_writable():
    # `from_tensors(...).repeat()` yields the same Rust buffer again and
    # again: a writable view would let one element change the next.
    ds = tfdata.Dataset.from_tensors(np.zeros(8, dtype=np.float64)).repeat(3)
    arrays = list(ds)
    arrays[0][:] = 7.0
    assert arrays[1].sum() == 0.0 and arrays[2].sum() == 0.0
    # A freshly made batch is its own, and viewed in place.
    batch = next(iter(tfdata.Dataset.range(16).batch(16)))
    assert isinstance(batch.base, _native.TensorBuffer)


def test_scalars_strings_and_structure_like_tensorflow(cluster):
    ds = tfdata.Dataset.from_tensor_slices(
        {"id": np.arange(3, dtype=np.int64), "name": [b"a", b"bb", b"ccc"]}
    ).map(lambda e: (e["id"], {"name": e["name"], "tokens": np.array([e["name"]] * 2, dtype=object)}))
    local = list(ds)
    remote = list(distributed(ds, cluster))
    for got in (local, remote):
        assert [type(x[0]) for x in got] == [np.int64] * 3
        assert [x[1]["name"] for x in got] == [b"a", b"bb", b"ccc"]
        tokens = got[2][1]["tokens"]
        assert tokens.dtype == object and tokens.tolist() == [b"ccc", b"ccc"]


# ---- the GIL ----


def test_the_gil_is_released_while_next_waits(cluster):
    # A reader waiting for a slow pipeline must not stop other Python threads.
    slow = tfdata.Dataset.range(3).map(lambda x: (time.sleep(0.3), x)[1])
    ds = distributed(slow, cluster)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=tick)
    t.start()
    try:
        assert [int(x) for x in ds] == [0, 1, 2]
    finally:
        stop.set()
        t.join()
    gaps = np.diff(ticks)
    # The ticker kept running (the worker's pipeline also needs the GIL for
    # the lambda, in this same process).
    assert len(ticks) > 30 and gaps.max() < 0.25, gaps.max()


# ---- Ctrl-C ----


def _interrupt_child(code: str, marker: str = "READY"):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONUNBUFFERED="1")
    child = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = child.stdout.readline()
        assert marker in line, (line, child.stderr.read() if child.poll() is not None else "")
        time.sleep(0.3)  # let it block in the call under test
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=10)
        return time.monotonic() - sent, line + out, err
    finally:
        if child.poll() is None:
            child.kill()


NEXT_BLOCKS = """
import threading, time, tfdata
from tfdata.experimental import service
d = service.DispatchServer()
w = service.WorkerServer(service.WorkerConfig(dispatcher_address=d._address))
def stuck(x):
    # Like TensorFlow tracing, `map` calls the function once here, on the
    # main thread, to learn its output; only the worker's calls block.
    if threading.current_thread() is not threading.main_thread():
        time.sleep(3600)
    return x
ds = tfdata.Dataset.range(1).map(stuck, num_parallel_calls=2)
it = iter(ds.apply(service.distribute("parallel_epochs", d.target)))
print("READY", flush=True)
try:
    next(it)
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


def test_ctrl_c_interrupts_a_blocked_next():
    elapsed, out, err = _interrupt_child(NEXT_BLOCKS)
    assert "INTERRUPTED" in out, err
    assert elapsed < 2.0, elapsed


JOIN_BLOCKS = """
from tfdata.experimental import service
d = service.DispatchServer()
print("READY", flush=True)
try:
    d.join()
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


def test_ctrl_c_interrupts_join():
    elapsed, out, err = _interrupt_child(JOIN_BLOCKS)
    assert "INTERRUPTED" in out, err
    assert elapsed < 2.0, elapsed


RETRY_BLOCKS = """
import socket, tfdata
from tfdata.experimental import service
s = socket.socket(); s.bind(("localhost", 0)); port = s.getsockname()[1]; s.close()
print("READY", flush=True)
try:
    tfdata.Dataset.range(3).apply(service.distribute("parallel_epochs", f"grpc://localhost:{port}"))
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
"""


def test_ctrl_c_interrupts_a_retrying_connection():
    # The default retry deadline is a minute; Ctrl-C must not wait for it.
    elapsed, out, err = _interrupt_child(RETRY_BLOCKS)
    assert "INTERRUPTED" in out, err
    assert elapsed < 2.0, elapsed


# ---- fork ----


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_readers_work_in_forked_children(cluster):
    # What a PyTorch DataLoader worker does: the dataset was made (and read)
    # in the parent; each child iterates it on a runtime of its own.
    ds = distributed(tfdata.Dataset.range(20), cluster)
    assert sorted(int(x) for x in ds) == list(range(20))  # the parent's runtime is busy too
    parent_iterator = iter(ds)
    next(parent_iterator)
    results = []
    for _ in range(2):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            try:
                values = sorted(int(x) for x in ds)
                try:
                    next(parent_iterator)
                    crossed = "no error"
                except tfdata.errors.FailedPreconditionError as e:
                    crossed = "refused" if "fork" in str(e) else str(e)
                os.write(w, repr((values, crossed)).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            results.append(eval(f.read() or "None"))
        _, status = os.waitpid(pid, 0)
        assert status == 0
    for values, crossed in results:
        assert values == list(range(20))
        assert crossed == "refused"
    # The parent's iterator is unharmed.
    assert sorted(int(x) for x in parent_iterator) == list(range(1, 20))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_local_pipelines_work_in_forked_children():
    ds = tfdata.Dataset.range(10).map(lambda x: x + 1, num_parallel_calls=2).prefetch(2)
    assert [int(x) for x in ds] == list(range(1, 11))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, repr([int(x) for x in ds]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = eval(f.read() or "None")
    os.waitpid(pid, 0)
    assert got == list(range(1, 11))


# ---- panics and bad input across the boundary ----


def test_bad_values_are_python_errors_not_crashes():
    with pytest.raises(TypeError):
        tfdata.Dataset.from_tensors({1: np.zeros(2)})
    with pytest.raises(TypeError):
        tfdata.Dataset.from_tensors([object()])
    with pytest.raises(ValueError):
        tfdata.Dataset.from_tensors(2**70)
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        tfdata.Dataset.from_json('{"op": "range", "stop": "ten"}')
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        tfdata.Dataset.from_json("not json")


def test_an_unreachable_dispatcher_names_its_address_in_time():
    import socket

    s = socket.socket()
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
    s.close()
    start = time.monotonic()
    with pytest.raises(tfdata.errors.UnavailableError) as e:
        tfdata.Dataset.range(3).apply(
            service.distribute("parallel_epochs", f"grpc://localhost:{port}", dispatcher_timeout_ms=1000)
        )
    assert f"localhost:{port}" in str(e.value)
    assert time.monotonic() - start < 5


# ---- the build ----


def test_the_package_says_which_jpeg_decoder_code_it_runs():
    # pip hides the build's warning when nasm is missing; this says it.
    path = tfdata.jpeg_code_path()
    assert path.startswith("libjpeg-turbo"), path
    # CI installs nasm before building the package (.ci/run).
    if os.environ.get("CI") == "true" and os.uname().machine == "x86_64":
        assert "with SIMD" in path, path
