"""Autocache's Python API (issue 36): ``distribute(..., cache="auto")``,
``register_function(..., deterministic=True)`` and the dispatcher's
``autocache``/``autocache_dir`` settings. These tests check what the Python
layer owns: the arguments it refuses, and the declaration a pipeline carries
to the dispatcher (``tfdata.pipeline.FunctionRef.deterministic``, field 3, in
the bytes a registration sends)."""

from __future__ import annotations

import json
import time
import urllib.request

import numpy as np
import pytest

import tfdata
from tfdata.experimental import service

from conftest import wait_for


def function_ref(name: str, deterministic: bool) -> bytes:
    """A ``tfdata.pipeline.AttrValue`` holding a ``FunctionRef`` without
    arguments, as protobuf encodes it: field 8 (``function``), its length,
    then the FunctionRef: ``name`` (field 1) and ``deterministic`` (field 3,
    varint) only when true (proto3 leaves out defaults). The length prefix
    makes the match exact: ``name`` followed by other bytes that happen to
    read ``18 01`` does not match."""
    encoded = name.encode()
    ref = b"\x0a" + bytes([len(encoded)]) + encoded
    if deterministic:
        ref += b"\x18\x01"
    assert len(ref) < 128, "one-byte length prefixes"
    return b"\x42" + bytes([len(ref)]) + ref


def map_def(fn) -> bytes:
    return tfdata.Dataset.range(4).map(fn).batch(2)._native.pipeline_def(True)


# ---- distribute(cache=...) ----


@pytest.mark.parametrize("cache", ["AUTO", "always", "", 1, True, "auto "])
def test_distribute_refuses_any_cache_but_auto(cache):
    with pytest.raises(ValueError, match="Invalid `cache` argument"):
        service.distribute("distributed_epoch", "grpc://localhost:1", cache=cache)


def test_distribute_accepts_auto_and_none_without_contacting_the_service():
    # Only the argument checks run here (TensorFlow's distribute checks when
    # it is called; the dispatcher is contacted when the result is applied).
    for cache in (None, "auto"):
        assert callable(service.distribute("distributed_epoch", "grpc://localhost:1", cache=cache))
        assert callable(service.distribute("parallel_epochs", "grpc://localhost:1", cache=cache))


def test_cache_is_keyword_only():
    with pytest.raises(TypeError):
        service.distribute("parallel_epochs", "grpc://localhost:1", None, None, None, None, None,
                           "AUTO", None, "AUTO", "auto")


def test_a_deterministic_read_is_never_autocached():
    with pytest.raises(ValueError, match="deterministic=True"):
        service.distribute("distributed_epoch", "grpc://localhost:1", deterministic=True,
                           cache="auto")


def test_the_read_options_carry_the_request():
    from tfdata.experimental import _read_options as options

    assert options.validate_cache("auto", False) is True
    assert options.validate_cache(None, True) is False
    read = options.read_options("distributed_epoch", "grpc://localhost:1", None, None, None, None,
                                None, None, "AUTO", None, None,
                                options.deterministic_keywords(False, None, None, None, None))
    assert read["autocache"] is False


# ---- DispatcherConfig ----


def test_dispatcher_config_autocache_settings():
    config = service.DispatcherConfig()
    assert config.autocache is False and config.autocache_dir is None
    config = service.DispatcherConfig(work_dir="/tmp/w", autocache=True, autocache_dir="s3://bucket/c")
    assert config.autocache is True
    assert config.autocache_dir == "s3://bucket/c"
    # TensorFlow's positional fields are unchanged: the new settings are keyword-only.
    assert tuple(config)[:3] == (0, "grpc", "/tmp/w")


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_dispatcher_config_refuses_a_non_bool_autocache(value):
    with pytest.raises(TypeError, match="`autocache` must be a bool"):
        service.DispatcherConfig(autocache=value)


@pytest.mark.parametrize("value", ["", 3, b"/tmp"])
def test_dispatcher_config_refuses_a_bad_autocache_dir(value):
    with pytest.raises(ValueError, match="`autocache_dir`"):
        service.DispatcherConfig(autocache_dir=value)


# ---- register_function(..., deterministic=True) ----


def test_a_declared_function_is_marked_in_the_pipeline_bytes():
    def double(x):
        return x * 2

    tfdata.register_function("autocache_double", double, deterministic=True)
    pipeline = map_def(double)
    assert function_ref("autocache_double", True) in pipeline
    # By name too: the declaration belongs to the name.
    assert function_ref("autocache_double", True) in map_def("autocache_double")
    assert json.loads(tfdata.Dataset.range(2).map(double).to_json())["pipeline"]["function"] == {
        "function": "autocache_double", "deterministic": True}


def test_an_undeclared_function_is_not_marked():
    def triple(x):
        return x * 3

    tfdata.register_function("autocache_triple", triple)
    pipeline = map_def(triple)
    assert function_ref("autocache_triple", False) in pipeline
    assert function_ref("autocache_triple", True) not in pipeline
    # An anonymous callable (registered on use) is undeclared too.
    def increment(x):
        return x + 1

    anonymous = map_def(increment)
    name = tfdata.dataset._name_of(increment)
    assert function_ref(name, False) in anonymous
    assert function_ref(name, True) not in anonymous
    assert "deterministic" not in tfdata.Dataset.range(2).map(triple).to_json()


def test_the_decorator_form_declares_too():
    @tfdata.register_function("autocache_decorated", deterministic=True)
    def negate(x):
        return -x

    assert function_ref("autocache_decorated", True) in map_def(negate)
    # The declared function still runs, and returns what it did before.
    assert [int(v) for v in tfdata.Dataset.range(3).map(negate)] == [0, -1, -2]


def test_registering_a_name_again_replaces_its_declaration():
    tfdata.register_function("autocache_again", lambda x: x, deterministic=True)
    assert function_ref("autocache_again", True) in map_def("autocache_again")
    tfdata.register_function("autocache_again", lambda x: x)
    pipeline = map_def("autocache_again")
    assert function_ref("autocache_again", True) not in pipeline
    assert function_ref("autocache_again", False) in pipeline


def test_filters_and_batched_maps_carry_the_declaration():
    def even(x):
        return x % 2 == 0

    tfdata.register_function("autocache_even", even, deterministic=True)
    filtered = tfdata.Dataset.range(6).filter(even)._native.pipeline_def(True)
    assert function_ref("autocache_even", True) in filtered
    batched = tfdata.Dataset.range(6).filter(even, batched=True)._native.pipeline_def(True)
    assert function_ref("autocache_even:filter_batched", True) in batched
    assert [int(v) for v in tfdata.Dataset.range(6).filter(even, batched=True)] == [0, 2, 4]


@pytest.mark.parametrize("value", ["yes", 1, None, np.int64(1)])
def test_register_function_refuses_a_non_bool_declaration(value):
    with pytest.raises(TypeError, match="`deterministic` must be a bool"):
        tfdata.register_function("autocache_bad", lambda x: x, deterministic=value)


def test_the_declaration_is_keyword_only():
    with pytest.raises(TypeError):
        tfdata.register_function("autocache_positional", lambda x: x, True)


# ---- Through the service (an in-process dispatcher and worker, real gRPC) ----


def _autocache_rows(dispatcher) -> list:
    with urllib.request.urlopen(f"http://127.0.0.1:{dispatcher.http_port}/api/status", timeout=10) as r:
        return json.load(r)["autocache"]


def _state(dispatcher, settled=("cached", "not cached")):
    """The one dataset's autocache row, once its state is one of `settled`."""
    found = {}

    def done():
        rows = _autocache_rows(dispatcher)
        if rows and rows[0]["state"] in settled:
            found["row"] = rows[0]
            return True
        return False

    wait_for(done, timeout=60, what=f"autocache to reach one of {settled}")
    return found["row"]


def _cluster(tmp_path):
    config = service.DispatcherConfig(autocache_dir=str(tmp_path / "cache"), http_port=0)
    d = service.DispatchServer(config)
    w = service.WorkerServer(service.WorkerConfig(d._address, heartbeat_interval_ms=100))
    return d, w


def test_a_declared_pipeline_is_cached_and_later_epochs_read_the_cache(tmp_path):
    @tfdata.register_function("autocache_slow_square", deterministic=True)
    def slow_square(x):
        time.sleep(0.002)  # the cost a cache saves: far above reading an int64 back
        return x * x

    d, w = _cluster(tmp_path)
    with d, w:
        ds = tfdata.Dataset.range(200).map(slow_square)
        read = lambda: sorted(int(v) for v in ds.apply(
            service.distribute("distributed_epoch", d.target, cache="auto")))
        expected = [x * x for x in range(200)]
        assert read() == expected
        row = _state(d)
        assert row["state"] == "cached", row
        assert "autocache_slow_square" in row["point"], row
        assert list((tmp_path / "cache").rglob("DONE")), "a complete cache under autocache_dir"
        # A job served from the cache runs on the rewritten dataset, which
        # has a row of its own: count over all rows.
        served = sum(r["jobs_served"] for r in _autocache_rows(d))
        assert read() == expected
        assert sum(r["jobs_served"] for r in _autocache_rows(d)) == served + 1


def _undeclared_read(tmp_path, name):
    def slow_cube(x):
        time.sleep(0.002)
        return x * x * x

    tfdata.register_function(name, slow_cube)
    d, w = _cluster(tmp_path)
    with d, w:
        ds = tfdata.Dataset.range(50).map(slow_cube)
        got = sorted(int(v) for v in ds.apply(
            service.distribute("distributed_epoch", d.target, cache="auto")))
        assert got == [x ** 3 for x in range(50)]
        return _state(d)


def test_an_undeclared_python_function_is_never_cached_after(tmp_path):
    # The map is what costs (2 ms an element); caching after it would pay,
    # so only the missing declaration keeps autocache from it.
    row = _undeclared_read(tmp_path, "autocache_slow_cube")
    assert row["state"] == "not cached", row
    assert "autocache_slow_cube" not in row["point"], row
    assert not list((tmp_path / "cache").rglob("DONE"))


def test_the_status_names_the_undeclared_function(tmp_path):
    # Issue 36: autocache says on the status page why it did not cache.
    row = _undeclared_read(tmp_path, "autocache_slow_cube_named")
    assert "autocache_slow_cube_named" in row["reason"] and "deterministic" in row["reason"], row


def test_without_cache_auto_nothing_is_profiled(tmp_path):
    d, w = _cluster(tmp_path)
    with d, w:
        ds = tfdata.Dataset.range(20)
        assert sorted(int(v) for v in ds.apply(
            service.distribute("distributed_epoch", d.target))) == list(range(20))
        assert _autocache_rows(d) == []
