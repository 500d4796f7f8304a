"""Python functions in pipelines, run by workers in real processes.

A standalone worker is ``python -m tfdata worker --import <module>``: the
module registers functions by name, and pipelines that name them (the
trainer registers the same name, or says it as a string) run there. Also
``python -m tfdata`` itself: its port line, SIGTERM and Ctrl-C.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tfdata
from tfdata import errors
from tfdata.experimental import service

from conftest import REPO, TfdataPythonProcess, _env, wait_for

# The functions the standalone workers' module registers (the trainer
# registers some of the same names in this process, by the same code).
FUNCTIONS_SOURCE = """
import numpy as np
import tfdata


class BadRecordError(Exception):
    pass


@tfdata.register_function("pyfn_triple")
def triple(x):
    return x * 3


@tfdata.register_function("pyfn_is_even")
def is_even(x):
    return x % 2 == 0


@tfdata.register_function("pyfn_batch_square")
def batch_square(x):
    # Called once per batch: a 1-D array, not a scalar.
    if np.ndim(x) != 1:
        raise TypeError(f"expected a batch, got shape {np.shape(x)}")
    return x * x


@tfdata.register_function("pyfn_pair")
def pair(x):
    return x, np.float32(x) / 2


@tfdata.register_function("pyfn_ranges")
def ranges(x):
    return tfdata.Dataset.range(x)


@tfdata.register_function("pyfn_fails_on_3")
def fails_on_3(x):
    if int(x) == 3:
        raise BadRecordError(f"record {int(x)} is bad")
    return x
"""

# Registered by the workers' module only, never in the trainer's process.
WORKER_ONLY_SOURCE = """

@tfdata.register_function("pyfn_worker_only_add_7")
def add_7(x):
    return x + 7


@tfdata.register_function("pyfn_worker_only_is_odd")
def is_odd(x):
    return x % 2 == 1


@tfdata.register_function("pyfn_worker_only_ranges")
def worker_only_ranges(x):
    return tfdata.Dataset.range(x)


@tfdata.register_function("pyfn_worker_only_batch_negate")
def batch_negate(x):
    if np.ndim(x) != 1:
        raise TypeError(f"expected a batch, got shape {np.shape(x)}")
    return -x
"""


@pytest.fixture
def functions_module(tmp_path):
    """A module in tmp_path registering the functions above; yields its directory."""
    (tmp_path / "tfdata_test_functions.py").write_text(FUNCTIONS_SOURCE + WORKER_ONLY_SOURCE)
    return tmp_path


@pytest.fixture
def python_worker(dispatcher, functions_module):
    """Starts standalone workers for `dispatcher`; each stops with SIGTERM and must exit 0."""
    started = []

    def start(*imports, expect_workers=None):
        args = ["worker", "--dispatcher-address", dispatcher._address, "--heartbeat-interval-ms", "200"]
        for module in imports:
            args += ["--import", module]
        w = TfdataPythonProcess(*args, extra_path=[functions_module])
        started.append(w)
        expected = expect_workers if expect_workers is not None else len(started)
        wait_for(lambda: dispatcher._num_workers() >= expected, what=f"{expected} worker(s) registered")
        return w

    yield start
    for w in started:
        assert w.stop() == 0, f"worker exited uncleanly; stderr:\n{''.join(w.stderr_lines)}"


@pytest.fixture
def trainer_functions(functions_module):
    """The module's functions registered in this (the trainer's) process too."""
    namespace = {"__name__": "tfdata_test_functions_trainer"}
    exec(compile(FUNCTIONS_SOURCE, "tfdata_test_functions.py", "exec"), namespace)
    return namespace


def _read(ds, dispatcher, **kwargs):
    return list(ds.apply(service.distribute("parallel_epochs", dispatcher.target, **kwargs)))


def _ints(values):
    return [int(v) for v in values]


# ---- python -m tfdata ----


def test_module_worker_port_line_and_sigterm(dispatcher):
    w = TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address)
    assert w.port > 0
    wait_for(lambda: dispatcher._num_workers() == 1, what="worker registered")
    assert _ints(_read(tfdata.Dataset.range(5), dispatcher)) == [0, 1, 2, 3, 4]
    t0 = time.monotonic()
    assert w.stop(signal.SIGTERM) == 0
    assert time.monotonic() - t0 < 10


def test_module_worker_ctrl_c_exits_zero(dispatcher):
    w = TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address, "--port", "0")
    wait_for(lambda: dispatcher._num_workers() == 1, what="worker registered")
    assert w.stop(signal.SIGINT) == 0
    assert "Traceback" not in "".join(w.stderr_lines)


def test_module_dispatcher_serves_a_module_worker(tmp_path):
    d = TfdataPythonProcess("dispatcher", "--port", "0", "--work-dir", str(tmp_path / "work"), "--fault-tolerant-mode")
    try:
        w = TfdataPythonProcess("worker", "--dispatcher-address", d.address, "--worker-address", "localhost:%port%")
        try:
            ds = tfdata.Dataset.range(4).apply(service.distribute("parallel_epochs", f"grpc://{d.address}"))
            assert _ints(ds) == [0, 1, 2, 3]
        finally:
            assert w.stop() == 0
    finally:
        assert d.stop() == 0
    assert (tmp_path / "work").is_dir()


def test_module_worker_import_error_exits_nonzero(tmp_path):
    (tmp_path / "broken_module.py").write_text("raise RuntimeError('cannot register')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tfdata", "worker", "--dispatcher-address", "localhost:1",
         "--import", str(tmp_path / "broken_module.py")],
        capture_output=True, text=True, timeout=30, env=_env(),
    )
    assert proc.returncode != 0
    assert "cannot register" in proc.stderr
    assert "listening" not in proc.stdout


def test_module_worker_requires_dispatcher_address():
    proc = subprocess.run(
        [sys.executable, "-m", "tfdata", "worker"], capture_output=True, text=True, timeout=30, env=_env()
    )
    assert proc.returncode == 2
    assert "--dispatcher-address" in proc.stderr


# ---- Standalone workers running registered functions ----


def test_map_by_name_registered_in_both(dispatcher, python_worker, trainer_functions):
    python_worker("tfdata_test_functions")
    ds = tfdata.Dataset.range(8).map(trainer_functions["triple"])
    # The trainer's registration tells the pipeline its output structure.
    assert ds.element_spec == tfdata.TensorSpec(shape=(), dtype="int64")
    assert _ints(_read(ds, dispatcher)) == [3 * i for i in range(8)]


def test_map_and_filter_by_name_string_from_py_file(dispatcher, python_worker, functions_module, trainer_functions):
    # --import as a path to a .py file; the trainer names the functions.
    python_worker(str(functions_module / "tfdata_test_functions.py"))
    ds = tfdata.Dataset.range(10).filter("pyfn_is_even").map("pyfn_triple")
    assert _ints(_read(ds, dispatcher)) == [0, 6, 12, 18, 24]


def test_map_by_name_string_only_the_worker_registered(dispatcher, python_worker):
    python_worker("tfdata_test_functions")
    ds = tfdata.Dataset.range(6).map("pyfn_worker_only_add_7")
    # Unknown here: no output structure until the worker runs it.
    assert ds.element_spec is None
    assert _ints(_read(ds, dispatcher)) == [7, 8, 9, 10, 11, 12]
    batched = tfdata.Dataset.range(5).map("pyfn_worker_only_batch_negate", batched=True, batch_size=2)
    assert _ints(_read(batched, dispatcher)) == [0, -1, -2, -3, -4]


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda: tfdata.Dataset.range(10).filter("pyfn_worker_only_is_odd"), [1, 3, 5, 7, 9]),
        (
            lambda: tfdata.Dataset.range(10).filter("pyfn_worker_only_is_odd", batched=True, batch_size=4),
            [1, 3, 5, 7, 9],
        ),
        (lambda: tfdata.Dataset.range(4).flat_map("pyfn_worker_only_ranges"), [0, 0, 1, 0, 1, 2]),
    ],
    ids=["filter", "filter_batched", "flat_map"],
)
def test_non_map_uses_by_name_string_only_the_worker_registered(dispatcher, python_worker, make, expected):
    python_worker("tfdata_test_functions")
    assert _ints(_read(make(), dispatcher)) == expected


def test_flat_map_and_interleave_on_standalone_worker(dispatcher, python_worker, trainer_functions):
    python_worker("tfdata_test_functions")
    flat = tfdata.Dataset.range(4).flat_map(trainer_functions["ranges"])
    assert _ints(_read(flat, dispatcher)) == [0, 0, 1, 0, 1, 2]
    # TensorFlow's order for this interleave (checked against tf.data).
    mixed = tfdata.Dataset.range(6).interleave("pyfn_ranges", cycle_length=3, block_length=2)
    assert _ints(_read(mixed, dispatcher)) == [0, 0, 1, 0, 1, 0, 1, 2, 2, 3, 0, 1, 2, 3, 4]


def test_batched_map_on_standalone_worker(dispatcher, python_worker, trainer_functions):
    python_worker("tfdata_test_functions")
    ds = tfdata.Dataset.range(10).map("pyfn_batch_square", batched=True, batch_size=4)
    assert _ints(_read(ds, dispatcher)) == [i * i for i in range(10)]
    # Per element, the same function refuses scalars: so batching really happened above.
    with pytest.raises(errors.OpError, match="expected a batch"):
        _read(tfdata.Dataset.range(3).map("pyfn_batch_square"), dispatcher)


def test_map_to_tuple_on_standalone_worker(dispatcher, python_worker, trainer_functions):
    python_worker("tfdata_test_functions")
    ds = tfdata.Dataset.range(4).map("pyfn_pair")
    got = _read(ds, dispatcher)
    assert [(int(a), float(b)) for a, b in got] == [(i, i / 2) for i in range(4)]
    assert got[0][1].dtype == np.float32


def test_exception_fails_the_read_and_worker_keeps_serving(dispatcher, python_worker, trainer_functions):
    w = python_worker("tfdata_test_functions")
    with pytest.raises(errors.OpError) as info:
        _read(tfdata.Dataset.range(10).map("pyfn_fails_on_3"), dispatcher)
    text = str(info.value)
    assert "BadRecordError" in text and "record 3 is bad" in text, text
    assert "pyfn_fails_on_3" in text, text
    assert w.alive()
    # The same worker (the only one) serves the next job.
    assert dispatcher._num_workers() == 1
    assert _ints(_read(tfdata.Dataset.range(5).map("pyfn_triple"), dispatcher)) == [0, 3, 6, 9, 12]
    assert w.alive()


def test_worker_lacking_the_function_names_it_and_survives(dispatcher, python_worker):
    # This worker imports nothing: it has no Python functions at all.
    w = python_worker()

    def only_in_trainer(x):
        return x + 1

    tfdata.register_function("pyfn_only_in_the_trainer", only_in_trainer)
    ds = tfdata.Dataset.range(5).map(only_in_trainer)
    with pytest.raises(errors.OpError) as info:
        _read(ds, dispatcher)
    assert "pyfn_only_in_the_trainer" in str(info.value)
    assert isinstance(info.value, errors.NotFoundError), repr(info.value)
    assert w.alive()
    assert _ints(_read(tfdata.Dataset.range(3), dispatcher)) == [0, 1, 2]


def test_two_workers_both_run_the_function(dispatcher, python_worker, trainer_functions):
    python_worker("tfdata_test_functions")
    python_worker("tfdata_test_functions")
    ds = tfdata.Dataset.range(6).map("pyfn_triple")
    # parallel_epochs: each worker produces the whole dataset.
    assert sorted(_ints(_read(ds, dispatcher))) == sorted([3 * i for i in range(6)] * 2)


def test_parallel_map_on_standalone_worker_keeps_order(dispatcher, python_worker, trainer_functions):
    python_worker("tfdata_test_functions")
    ds = tfdata.Dataset.range(200).map("pyfn_triple", num_parallel_calls=4)
    assert _ints(_read(ds, dispatcher)) == [3 * i for i in range(200)]


# ---- In-process workers ----


def test_in_process_worker_runs_a_lambda(cluster):
    ds = tfdata.Dataset.range(10).map(lambda x: x * x + 1)
    assert _ints(_read(ds, cluster)) == [i * i + 1 for i in range(10)]


def test_in_process_worker_exception_keeps_worker(cluster):
    def boom(x):
        if int(x) == 2:
            raise ZeroDivisionError("no twos")
        return x

    with pytest.raises(errors.OpError, match=r"ZeroDivisionError: no twos"):
        _read(tfdata.Dataset.range(5).map(boom), cluster)
    assert _ints(_read(tfdata.Dataset.range(3).map(lambda x: x - 1), cluster)) == [-1, 0, 1]


def test_in_process_parallel_map_runs_concurrently_in_order(cluster):
    lock = threading.Lock()
    state = {"now": 0, "max": 0, "threads": set()}

    def slow(x):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            state["threads"].add(threading.get_ident())
        time.sleep(0.01)  # releases the GIL: other calls overlap this one
        with lock:
            state["now"] -= 1
        return x * 10

    ds = tfdata.Dataset.range(60).map(slow, num_parallel_calls=4)
    assert _ints(_read(ds, cluster)) == [10 * i for i in range(60)]
    assert state["max"] > 1, state
    assert state["max"] <= 4, state
    assert len(state["threads"]) > 1, state


def test_in_process_parallel_map_nondeterministic_has_all_values(cluster):
    ds = tfdata.Dataset.range(50).map(lambda x: x + 100, num_parallel_calls=4, deterministic=False)
    assert sorted(_ints(_read(ds, cluster))) == [i + 100 for i in range(50)]


def test_in_process_batched_filter(cluster):
    ds = tfdata.Dataset.range(20).filter(lambda x: x % 3 == 0, batched=True, batch_size=7)
    assert _ints(_read(ds, cluster)) == [0, 3, 6, 9, 12, 15, 18]
