"""DispatchServer and WorkerServer lifecycles: start, target, join, stop,
context managers and garbage collection, on real gRPC servers."""

from __future__ import annotations

import gc
import socket
import threading
import time

import pytest

import tfdata
from tfdata import errors
from tfdata.experimental import service

from conftest import run_python, wait_for


def _port(target_or_address: str) -> int:
    return int(target_or_address.rsplit(":", 1)[1])


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True


def _joins_within(server, timeout: float) -> bool:
    done = threading.Event()
    thread = threading.Thread(target=lambda: (server.join(), done.set()), daemon=True)
    thread.start()
    return done.wait(timeout)


def test_defaults_start_and_target():
    d = service.DispatchServer()
    try:
        assert d.target.startswith("grpc://localhost:") and _port(d.target) > 0
        assert d._address == d.target.split("://")[1]
        assert not _bindable(_port(d.target))
        ds = tfdata.Dataset.range(3)
        assert service.register_dataset(d.target, ds)  # it serves
    finally:
        d.stop()


def test_config_none_is_the_default_config():
    with service.DispatchServer(None) as d, service.DispatchServer(service.DispatcherConfig()) as e:
        assert d.target.startswith("grpc://localhost:") and e.target.startswith("grpc://localhost:")


def test_start_false_then_start():
    d = service.DispatchServer(start=False)
    try:
        d.start()
        w = service.WorkerServer(service.WorkerConfig(d._address), start=False)
        try:
            w.start()
            wait_for(lambda: d._num_workers() == 1, what="worker registration")
            ds = tfdata.Dataset.range(4).apply(service.distribute("parallel_epochs", d.target))
            assert [int(x) for x in ds] == [0, 1, 2, 3]
        finally:
            w.stop()
    finally:
        d.stop()


def test_a_worker_not_started_does_not_register():
    with service.DispatchServer() as d:
        w = service.WorkerServer(service.WorkerConfig(d._address), start=False)
        try:
            started = service.WorkerServer(service.WorkerConfig(d._address))
            try:
                # The started one registers; the unstarted one does not.
                wait_for(lambda: d._num_workers() == 1, what="the started worker registering")
                w.start()
                wait_for(lambda: d._num_workers() == 2, what="the second worker registering after start()")
            finally:
                started.stop()
        finally:
            w.stop()


def test_start_false_binds_at_construction():
    # A deliberate difference (docs/python.md): TensorFlow binds in start()
    # (target says port 0 until then, a port in use raises from start());
    # tfdata binds when the server is made, so the target is usable at once
    # and a port in use is an error from the constructor.
    sock = socket.socket()
    sock.bind(("", 0))
    sock.listen()
    with sock:
        port = sock.getsockname()[1]
        with pytest.raises(RuntimeError, match="Could not start gRPC server"):
            service.DispatchServer(service.DispatcherConfig(port=port), start=False)
    d = service.DispatchServer(start=False)
    assert not d.target.endswith(":0")
    d.start()
    d.stop()


def test_join_returns_after_stop_from_another_thread():
    d = service.DispatchServer()
    w = service.WorkerServer(service.WorkerConfig(d._address))
    for server in (w, d):
        threading.Timer(0.2, server.stop).start()
        start = time.monotonic()
        assert _joins_within(server, 10), f"{type(server).__name__}.join() did not return after stop()"
        assert time.monotonic() - start >= 0.1  # join() really waited for the stop
        assert _joins_within(server, 2)  # and returns at once once stopped


def test_stop_twice_is_fine():
    d = service.DispatchServer()
    w = service.WorkerServer(service.WorkerConfig(d._address))
    w.stop()
    w.stop()
    d.stop()
    d.stop()
    wait_for(lambda: _bindable(_port(d.target)), what="the stopped dispatcher's port to be free")


def test_context_managers():
    with service.DispatchServer() as d:
        assert isinstance(d, service.DispatchServer)
        with service.WorkerServer(service.WorkerConfig(d._address)) as w:
            assert isinstance(w, service.WorkerServer)
            wait_for(lambda: d._num_workers() == 1, what="worker registration")
            wport = _port(w._address)
        wait_for(lambda: _bindable(wport), what="the worker's port to be free after its with block")
        assert _joins_within(w, 5)
    assert _joins_within(d, 5)
    wait_for(lambda: _bindable(_port(d.target)), what="the dispatcher's port to be free after its with block")


def test_context_manager_stops_on_exception():
    with pytest.raises(KeyError):
        with service.DispatchServer() as d:
            raise KeyError("inside")
    assert _joins_within(d, 5)


def test_num_workers_counts_registered_workers():
    with service.DispatchServer() as d:
        assert d._num_workers() == 0
        workers = [service.WorkerServer(service.WorkerConfig(d._address)) for _ in range(2)]
        try:
            wait_for(lambda: d._num_workers() == 2, what="two workers registering")
        finally:
            for w in workers:
                w.stop()


def _unreachable(target: str) -> bool:
    try:
        ds = tfdata.Dataset.range(1).apply(
            service.distribute("parallel_epochs", target, dispatcher_timeout_ms=300)
        )
        list(ds)
    except errors.UnavailableError:
        return True
    return False


def test_garbage_collection_stops_a_dispatcher():
    d = service.DispatchServer()
    target = d.target
    port = _port(target)
    assert not _bindable(port)
    del d
    gc.collect()
    wait_for(lambda: _bindable(port), timeout=5, what="the collected dispatcher's port to be free")
    assert _unreachable(target)


def test_garbage_collection_stops_a_worker():
    with service.DispatchServer() as d:
        w = service.WorkerServer(service.WorkerConfig(d._address))
        wait_for(lambda: d._num_workers() == 1, what="worker registration")
        port = _port(w._address)
        del w
        gc.collect()
        wait_for(lambda: _bindable(port), timeout=5, what="the collected worker's port to be free")
        with socket.socket() as probe:
            probe.settimeout(1)
            assert probe.connect_ex(("localhost", port)) != 0


def test_garbage_collection_in_a_cycle():
    d = service.DispatchServer()
    port = _port(d.target)
    d.self_reference = d  # only the cycle collector frees it
    del d
    gc.collect()
    wait_for(lambda: _bindable(port), timeout=5, what="the dispatcher in a cycle to stop")


def test_garbage_collection_of_a_dispatcher_with_a_running_worker():
    d = service.DispatchServer()
    w = service.WorkerServer(service.WorkerConfig(d._address, heartbeat_interval_ms=20))
    wait_for(lambda: d._num_workers() == 1, what="worker registration")
    port = _port(d.target)
    start = time.monotonic()
    del d
    gc.collect()
    assert time.monotonic() - start < 2  # the finalizer does not wait on the worker
    wait_for(lambda: _bindable(port), timeout=5, what="the collected dispatcher's port to be free")
    # The worker carries on (heartbeats fail and are retried) and stops cleanly.
    w.stop()
    assert _joins_within(w, 5)


def test_garbage_collection_at_interpreter_exit():
    """Servers left running when the interpreter exits do not hang or crash it."""
    result = run_python(
        """
        from tfdata.experimental import service
        d = service.DispatchServer()
        w = service.WorkerServer(service.WorkerConfig(d._address))
        import tfdata
        print(sorted(int(x) for x in tfdata.Dataset.range(3).apply(service.distribute("parallel_epochs", d.target))))
        """,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[0, 1, 2]"
