"""``tfdata.experimental.distributed_save`` with our servers: TensorFlow's
argument checks and errors, and a snapshot our workers write that
TensorFlow's ``tf.data.Dataset.load`` reads back exactly."""

from __future__ import annotations

import os

import pytest

import tfdata
from tfdata.experimental import distributed_save, service
from conftest import wait_for
from test_tensorflow import run_tf


@pytest.fixture
def fault_tolerant(tmp_path):
    d = service.DispatchServer(
        service.DispatcherConfig(work_dir=str(tmp_path / "work"), fault_tolerant_mode=True)
    )
    w = service.WorkerServer(
        service.WorkerConfig(dispatcher_address=d._address, heartbeat_interval_ms=100)
    )
    yield d
    w.stop()
    d.stop()


def test_arguments_are_checked_as_tensorflow_does(dispatcher, tmp_path):
    ds = tfdata.Dataset.range(3)
    with pytest.raises(ValueError, match="must be a string"):
        distributed_save(ds, str(tmp_path / "s"), 5050)
    with pytest.raises(ValueError, match="must not be empty"):
        distributed_save(ds, str(tmp_path / "s"), "")
    with pytest.raises(ValueError, match="compression"):
        distributed_save(ds, str(tmp_path / "s"), dispatcher._address, compression="LZ4")
    # TensorFlow's dispatcher answers the same without fault tolerance.
    with pytest.raises(tfdata.errors.InvalidArgumentError, match="fault tolerant mode"):
        distributed_save(ds, str(tmp_path / "s"), dispatcher._address)


def test_a_snapshot_is_written_once_and_refused_twice(fault_tolerant, tmp_path):
    path = str(tmp_path / "snapshot")
    distributed_save(tfdata.Dataset.range(50), path, fault_tolerant._address)
    wait_for(lambda: os.path.exists(os.path.join(path, "DONE")), timeout=60, what="DONE")
    chunks = os.listdir(os.path.join(path, "chunks"))
    assert sum(int(name.split("_")[3]) for name in chunks) == 50, chunks
    # Our own load reads it back, locally and through the service.
    assert sorted(int(x) for x in tfdata.Dataset.load(path).as_numpy_iterator()) == list(range(50))
    distributed = tfdata.Dataset.load(path).apply(
        service.distribute("distributed_epoch", fault_tolerant.target)
    )
    assert sorted(int(x) for x in distributed.as_numpy_iterator()) == list(range(50))
    with pytest.raises(tfdata.errors.AlreadyExistsError):
        distributed_save(tfdata.Dataset.range(50), path, fault_tolerant._address)
    with pytest.raises(tfdata.errors.InvalidArgumentError, match="infinite"):
        distributed_save(tfdata.Dataset.range(5).repeat(), str(tmp_path / "inf"), fault_tolerant._address)


def test_tensorflow_loads_what_our_workers_saved():
    got = run_tf(
        """
import tempfile
tmp = tempfile.mkdtemp()
d = ours.DispatchServer(ours.DispatcherConfig(work_dir=tmp + "/work", fault_tolerant_mode=True))
w = ours.WorkerServer(ours.WorkerConfig(dispatcher_address=d._address, heartbeat_interval_ms=100))
for compression in ["AUTO", "GZIP", None]:
    path = f"{tmp}/snap_{compression}"
    ds = tfdata.Dataset.range(300).map(lambda x: x * 2)
    tfdata.experimental.distributed_save(ds, path, d._address, compression=compression)
    wait_for(lambda: os.path.exists(path + "/DONE"), timeout=60, what="DONE")
    loaded = sorted(int(x) for x in tf.data.Dataset.load(path).as_numpy_iterator())
    assert loaded == [2 * x for x in range(300)], (compression, loaded[:10], len(loaded))
result({"ok": True})
"""
    )
    assert got == {"ok": True}
