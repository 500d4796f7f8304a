"""DispatcherConfig and WorkerConfig: TensorFlow 2.21's namedtuples (fields,
order, defaults, None rules, compared with real TensorFlow), and what each
field does to a real server."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

import tfdata
from tfdata import errors
from tfdata.experimental import service

from conftest import run_python, tensorflow_python, wait_for

DISPATCHER_FIELDS = (
    "port",
    "protocol",
    "work_dir",
    "fault_tolerant_mode",
    "worker_addresses",
    "job_gc_check_interval_ms",
    "job_gc_timeout_ms",
    "worker_timeout_ms",
    "worker_max_concurrent_snapshots",
    "http_port",  # tfdata's, after TensorFlow's
)
WORKER_FIELDS = (
    "dispatcher_address",
    "worker_address",
    "port",
    "protocol",
    "heartbeat_interval_ms",
    "dispatcher_timeout_ms",
    "data_transfer_protocol",
    "data_transfer_address",
    "http_port",  # tfdata's, after TensorFlow's
)

# The same constructor calls under TensorFlow and tfdata; each prints the
# config's fields and values.
CONFIG_CASES = {
    "dispatcher_default": "S.DispatcherConfig()",
    "dispatcher_zeros": "S.DispatcherConfig(job_gc_check_interval_ms=0, job_gc_timeout_ms=0, worker_timeout_ms=0)",
    "dispatcher_values": (
        "S.DispatcherConfig(5050, 'grpc', '/tmp/wd', True, ['a:1', 'b:2'], 100, 200, 300, 4)"
    ),
    "dispatcher_gc_never": "S.DispatcherConfig(job_gc_timeout_ms=-1)",
    "worker_default": "S.WorkerConfig('x')",
    "worker_zeros": "S.WorkerConfig('x', heartbeat_interval_ms=0, dispatcher_timeout_ms=0)",
    "worker_values": "S.WorkerConfig('d:1', 'w:%port%', 6060, 'grpc', 10, 20, 'grpc', 'dts:1')",
    "worker_none_address": "S.WorkerConfig('x', worker_address=None, data_transfer_address=None)",
}

CONFIG_SCRIPT = """
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
if os.environ.get("USE_TF"):
    import tensorflow as tf
    S = tf.data.experimental.service
else:
    from tfdata.experimental import service as S
out = {}
for key, expr in json.loads(os.environ["CASES"]).items():
    c = eval(expr)
    out[key] = {"fields": list(c._fields), "values": list(c), "type": type(c).__name__,
                "is_tuple": isinstance(c, tuple)}
print(json.dumps(out))
"""


def _run(python, env):
    result = run_python(CONFIG_SCRIPT, python=python, env={"CASES": json.dumps(CONFIG_CASES), **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tf_configs():
    return _run(tensorflow_python(), {"USE_TF": "1"})


@pytest.mark.parametrize("key", sorted(CONFIG_CASES))
def test_config_matches_tensorflow(key, tf_configs):
    ours = eval(CONFIG_CASES[key], {"S": service})
    tf = tf_configs[key]
    # TensorFlow's fields in TensorFlow's order, then tfdata's http_port.
    assert list(ours._fields) == tf["fields"] + ["http_port"]
    assert json.loads(json.dumps(list(ours))) == tf["values"] + [None]
    assert type(ours).__name__ == tf["type"] and isinstance(ours, tuple)


def test_fields_order_and_defaults():
    assert service.DispatcherConfig._fields == DISPATCHER_FIELDS
    assert service.WorkerConfig._fields == WORKER_FIELDS
    assert tuple(service.DispatcherConfig()) == (0, "grpc", None, False, None, 0, 0, None, 0, None)
    assert tuple(service.WorkerConfig("x")) == (
        "x", "localhost:%port%", 0, "grpc", 0, 0, None, "localhost:%dts_port%", None
    )
    assert service.DispatcherConfig(http_port=0).http_port == 0
    assert service.WorkerConfig("x", http_port=9).http_port == 9
    # TensorFlow's time rule: None -> 0 (the default), 0 -> 1 ms, else as given.
    c = service.DispatcherConfig(job_gc_check_interval_ms=0, job_gc_timeout_ms=7)
    assert (c.job_gc_check_interval_ms, c.job_gc_timeout_ms, c.worker_timeout_ms) == (1, 7, None)
    c = service.WorkerConfig("x", heartbeat_interval_ms=0, dispatcher_timeout_ms=9)
    assert (c.heartbeat_interval_ms, c.dispatcher_timeout_ms) == (1, 9)
    # namedtuple behaviour: keywords, _replace, equality, unpacking.
    c = service.DispatcherConfig(port=5)._replace(protocol="grpc")
    assert c.port == 5 and c == service.DispatcherConfig(5)
    with pytest.raises(TypeError):
        service.WorkerConfig()  # dispatcher_address is required


def test_tfdata_keyword_only_extras():
    c = service.DispatcherConfig(client_timeout_ms=1234, gc_dynamic_sharding_jobs=True)
    assert (c.client_timeout_ms, c.gc_dynamic_sharding_jobs) == (1234, True)
    assert tuple(c) == tuple(service.DispatcherConfig())  # not fields: TensorFlow's tuple
    d = service.DispatcherConfig()
    assert (d.client_timeout_ms, d.gc_dynamic_sharding_jobs) == (None, False)
    w = service.WorkerConfig("x", worker_tags=["COLOCATED"], element_stream=False)
    assert (w.worker_tags, w.element_stream) == (["COLOCATED"], False)
    assert tuple(w) == tuple(service.WorkerConfig("x"))
    assert (service.WorkerConfig("x").worker_tags, service.WorkerConfig("x").element_stream) == ([], True)
    with pytest.raises(TypeError):
        service.DispatcherConfig(0, None, None, False, None, None, None, None, 0, None, 5)  # keyword-only
    with pytest.raises(TypeError):
        service.WorkerConfig("x", None, 0, None, None, None, None, None, None, ["t"])


def test_extras_run_a_cluster():
    """The extras reach the servers: a cluster with all of them set serves data."""
    config = service.DispatcherConfig(client_timeout_ms=2000, gc_dynamic_sharding_jobs=True)
    with service.DispatchServer(config) as d:
        with service.WorkerServer(
            service.WorkerConfig(d._address, worker_tags=["COLOCATED"], element_stream=False)
        ):
            wait_for(lambda: d._num_workers() == 1, what="worker registration")
            for mode in ("parallel_epochs", "distributed_epoch"):
                ds = tfdata.Dataset.range(6).apply(service.distribute(mode, d.target))
                assert sorted(int(x) for x in ds) == list(range(6))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def test_port_binds_the_chosen_port():
    port = _free_port()
    with service.DispatchServer(service.DispatcherConfig(port=port)) as d:
        assert d.target == f"grpc://localhost:{port}"
        wport = _free_port()
        with service.WorkerServer(service.WorkerConfig(f"localhost:{port}", port=wport)) as w:
            assert w._address == f"localhost:{wport}"
            wait_for(lambda: d._num_workers() == 1, what="worker registration")
            with socket.socket() as probe:  # the port is really taken
                with pytest.raises(OSError):
                    probe.bind(("", port))


def test_port_zero_picks_a_free_port():
    with service.DispatchServer() as a, service.DispatchServer(service.DispatcherConfig(port=0)) as b:
        pa, pb = int(a.target.rsplit(":", 1)[1]), int(b.target.rsplit(":", 1)[1])
        assert pa > 0 and pb > 0 and pa != pb


@pytest.mark.parametrize("protocol", [None, "grpc", "grpc+local"])
def test_protocol_is_in_the_target_and_serves(protocol):
    with service.DispatchServer(service.DispatcherConfig(protocol=protocol)) as d:
        expected = protocol or "grpc"
        assert d.target.startswith(f"{expected}://localhost:")
        with service.WorkerServer(service.WorkerConfig(d._address, protocol=protocol)):
            ds = tfdata.Dataset.range(4).apply(service.distribute("parallel_epochs", d.target))
            assert [int(x) for x in ds] == [0, 1, 2, 3]


@pytest.mark.parametrize("fault_tolerant", [True, False])
def test_work_dir_and_fault_tolerant_mode_survive_a_restart(tmp_path, fault_tolerant):
    config = service.DispatcherConfig(work_dir=str(tmp_path / "wd"), fault_tolerant_mode=fault_tolerant)
    d = service.DispatchServer(config)
    assert service.register_dataset(d.target, tfdata.Dataset.range(5), dataset_id="my_ds") == "my_ds"
    port = int(d.target.rsplit(":", 1)[1])
    d.stop()
    with service.DispatchServer(config._replace(port=port)) as d2:
        with service.WorkerServer(service.WorkerConfig(d2._address)):
            if fault_tolerant:
                # The journal replays the registration: the id and its element spec survive.
                ds = service.from_dataset_id("parallel_epochs", d2.target, "my_ds")
                assert ds.element_spec == tfdata.Dataset.range(5).element_spec
                assert [int(x) for x in ds] == list(range(5))
            else:
                with pytest.raises(errors.NotFoundError):
                    service.from_dataset_id("parallel_epochs", d2.target, "my_ds")
            # Registering the same dataset under the same id keeps it.
            assert service.register_dataset(d2.target, tfdata.Dataset.range(5), dataset_id="my_ds") == "my_ds"
            assert [int(x) for x in service.from_dataset_id("parallel_epochs", d2.target, b"my_ds")] == list(range(5))


def test_fault_tolerant_mode_needs_work_dir():
    with pytest.raises(ValueError, match="Cannot enable fault tolerant mode without configuring a work dir"):
        service.DispatchServer(service.DispatcherConfig(fault_tolerant_mode=True))


def _join_outcome(worker, timeout=10.0):
    outcome = {}

    def join():
        try:
            worker.join()
            outcome["returned"] = True
        except BaseException as e:  # noqa: BLE001
            outcome["error"] = e

    thread = threading.Thread(target=join, daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome


def test_worker_addresses_refuse_other_workers():
    with service.DispatchServer(service.DispatcherConfig(worker_addresses=["localhost:1"])) as d:
        w = service.WorkerServer(service.WorkerConfig(d._address))
        try:
            outcome = _join_outcome(w)
            assert isinstance(outcome.get("error"), errors.FailedPreconditionError), outcome
            assert "worker_addresses" in outcome["error"].message
            assert d._num_workers() == 0
        finally:
            w.stop()


def test_worker_addresses_accept_a_listed_worker():
    port = _free_port()
    config = service.DispatcherConfig(worker_addresses=[f"localhost:{port}"])
    with service.DispatchServer(config) as d:
        with service.WorkerServer(service.WorkerConfig(d._address, port=port)):
            wait_for(lambda: d._num_workers() == 1, what="the listed worker registering")
            ds = tfdata.Dataset.range(3).apply(service.distribute("parallel_epochs", d.target))
            assert [int(x) for x in ds] == [0, 1, 2]


def test_small_job_gc_values_are_accepted_and_serve():
    config = service.DispatcherConfig(job_gc_check_interval_ms=20, job_gc_timeout_ms=20)
    with service.DispatchServer(config) as d:
        with service.WorkerServer(service.WorkerConfig(d._address)):
            ds = tfdata.Dataset.range(50).apply(service.distribute("parallel_epochs", d.target, job_name="gc"))
            for _ in range(3):  # jobs come and go while the collector runs every 20 ms
                assert [int(x) for x in ds] == list(range(50))


def _parallel_epochs_count(d) -> int:
    ds = tfdata.Dataset.range(5).apply(service.distribute("parallel_epochs", d.target))
    return len(list(ds))


def test_worker_timeout_and_heartbeat_interval():
    """Both settings reach the dispatcher: a worker_timeout_ms shorter than
    three of a worker's heartbeats would declare it lost between any two of
    them, so the dispatcher raises that worker's timeout (to three
    intervals) and says so naming both settings; TensorFlow's dispatcher
    would declare it lost. A worker heartbeating often enough keeps
    worker_timeout_ms and has no warning."""
    import urllib.request

    config = service.DispatcherConfig(worker_timeout_ms=300, job_gc_check_interval_ms=20, http_port=0)
    with service.DispatchServer(config) as d:
        with service.WorkerServer(service.WorkerConfig(d._address, heartbeat_interval_ms=60_000)), \
                service.WorkerServer(service.WorkerConfig(d._address, heartbeat_interval_ms=20)):
            wait_for(lambda: d._num_workers() == 2, what="both workers registering")
            # Each parallel_epochs job gets a task per live worker: 2 x 5
            # elements, for many worker_timeouts.
            started = time.monotonic()
            while time.monotonic() - started < 1.5:
                assert _parallel_epochs_count(d) == 10
            with urllib.request.urlopen(f"http://127.0.0.1:{d.http_port}/api/status", timeout=10) as r:
                workers = json.load(r)["workers"]
            warnings = sorted(w["heartbeat_warning"] or "" for w in workers)
            assert warnings[0] == "", warnings
            assert "worker_timeout_ms=300" in warnings[1], warnings
            assert "heartbeat_interval_ms=60000" in warnings[1], warnings
            assert "raised to 180000 ms" in warnings[1], warnings


def test_default_worker_timeout_keeps_a_quiet_worker():
    with service.DispatchServer(service.DispatcherConfig(job_gc_check_interval_ms=20)) as d:
        with service.WorkerServer(service.WorkerConfig(d._address, heartbeat_interval_ms=60_000)), \
                service.WorkerServer(service.WorkerConfig(d._address, heartbeat_interval_ms=60_000)):
            wait_for(lambda: d._num_workers() == 2, what="both workers registering")
            for _ in range(10):
                assert _parallel_epochs_count(d) == 10


def test_worker_address_with_port_placeholder():
    with service.DispatchServer() as d:
        with service.WorkerServer(service.WorkerConfig(d._address, worker_address="127.0.0.1:%port%")) as w:
            assert w._server.address == f"127.0.0.1:{w._server.port}"
            wait_for(lambda: d._num_workers() == 1, what="worker registration")
            # Readers reach the worker at the address it advertises.
            ds = tfdata.Dataset.range(3).apply(service.distribute("parallel_epochs", d.target))
            assert [int(x) for x in ds] == [0, 1, 2]
        with service.WorkerServer(service.WorkerConfig(d._address)) as w:
            assert w._server.address == f"localhost:{w._server.port}"


def test_worker_retries_a_dispatcher_that_starts_later():
    """dispatcher_timeout_ms bounds retries of dispatcher requests; a worker
    started first registers once its dispatcher comes up."""
    port = _free_port()
    with service.WorkerServer(service.WorkerConfig(f"localhost:{port}", dispatcher_timeout_ms=30_000)):
        with service.DispatchServer(service.DispatcherConfig(port=port)) as d:
            wait_for(lambda: d._num_workers() == 1, what="the worker registering late")


@pytest.mark.parametrize(
    "make",
    [
        lambda: service.DispatchServer(service.DispatcherConfig(port="80")),
        lambda: service.DispatchServer(service.DispatcherConfig(worker_timeout_ms=1.5)),
        lambda: service.WorkerServer(service.WorkerConfig("localhost:1", port=1.0)),
        lambda: service.WorkerServer(service.WorkerConfig("localhost:1", heartbeat_interval_ms="1")),
    ],
)
def test_non_integer_fields_are_type_errors(make):
    with pytest.raises(TypeError):
        make()
