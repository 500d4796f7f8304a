"""tfdata.jax: batches on JAX's CPU device, with and without a sharding."""

from __future__ import annotations

import collections

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="tfdata.jax tests need JAX (`pip install jax`, CPU wheel)")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

import tfdata  # noqa: E402
import tfdata.jax as tj  # noqa: E402
from tfdata.experimental import service  # noqa: E402



@pytest.fixture(scope="module")
def cpu():
    # Looked up in the tests, not at import: JAX's backend (and its threads)
    # starts only when a JAX test runs.
    return jax.devices("cpu")[0]


def int64_on_device():
    # JAX keeps int64 only with jax_enable_x64; otherwise int32.
    return jnp.asarray(np.int64(0)).dtype


def one_device_sharding(spec=PartitionSpec("batch")):
    mesh = jax.sharding.Mesh(np.array([jax.devices("cpu")[0]]), ("batch",))
    return NamedSharding(mesh, spec)


def test_device_put_keeps_structure_values_and_passes_bytes_through(cpu):
    Pair = collections.namedtuple("Pair", "left right")
    batch = {
        "x": np.arange(6, dtype=np.float32).reshape(2, 3),
        "t": (np.array([1, 2], dtype=np.int32), [np.array([True, False])]),
        "p": Pair(np.float32(1.5), b"raw"),
        "names": np.array([b"a", b"bb"], dtype=object),
    }
    out = tj.device_put(batch)
    assert set(out) == {"x", "t", "p", "names"}
    assert isinstance(out["t"], tuple) and isinstance(out["t"][1], list) and isinstance(out["p"], Pair)
    for leaf in (out["x"], out["t"][0], out["t"][1][0], out["p"].left):
        assert isinstance(leaf, jax.Array) and leaf.devices() == {cpu}
    np.testing.assert_array_equal(np.asarray(out["x"]), batch["x"])
    assert out["x"].dtype == jnp.float32 and out["t"][0].dtype == jnp.int32
    assert np.asarray(out["t"][1][0]).tolist() == [True, False]
    assert float(out["p"].left) == 1.5 and out["p"].left.shape == ()
    assert out["p"].right == b"raw"
    assert isinstance(out["names"], np.ndarray) and out["names"].tolist() == [b"a", b"bb"]


def test_device_put_iterator_over_a_local_dataset(cpu):
    ds = tfdata.Dataset.from_tensor_slices(
        (np.arange(10, dtype=np.float32), np.arange(10) * 10)
    ).batch(4)
    batches = list(tj.device_put_iterator(ds))
    assert [b[0].shape for b in batches] == [(4,), (4,), (2,)]
    for b in batches:
        assert isinstance(b, tuple) and all(isinstance(a, jax.Array) for a in b)
        assert b[0].devices() == {cpu} and b[1].dtype == int64_on_device()
    np.testing.assert_array_equal(np.concatenate([np.asarray(b[0]) for b in batches]), np.arange(10))
    np.testing.assert_array_equal(np.concatenate([np.asarray(b[1]) for b in batches]), np.arange(10) * 10)


def test_device_put_iterator_over_tf_data_service(cluster, cpu):
    ds = tfdata.Dataset.from_tensor_slices(
        {"image": np.arange(24, dtype=np.float32).reshape(6, 2, 2), "label": np.arange(6, dtype=np.int32)}
    ).batch(3).apply(service.distribute("parallel_epochs", cluster.target))
    batches = list(tj.device_put_iterator(ds, prefetch=1))
    assert len(batches) == 2
    labels = np.concatenate([np.asarray(b["label"]) for b in batches])
    assert sorted(labels.tolist()) == list(range(6))
    for b in batches:
        assert b["image"].devices() == {cpu} and b["image"].shape == (3, 2, 2)
        for label, image in zip(np.asarray(b["label"]), np.asarray(b["image"])):
            np.testing.assert_array_equal(image.ravel(), np.arange(4 * label, 4 * label + 4))


def test_one_device_sharding():
    sharding = one_device_sharding()
    ds = tfdata.Dataset.from_tensor_slices(np.arange(12, dtype=np.float32).reshape(6, 2)).batch(2)
    batches = list(tj.device_put_iterator(ds, sharding=sharding))
    assert len(batches) == 3
    for i, b in enumerate(batches):
        assert isinstance(b, jax.Array) and b.sharding == sharding and b.shape == (2, 2)
        np.testing.assert_array_equal(np.asarray(b), np.arange(4 * i, 4 * i + 4, dtype=np.float32).reshape(2, 2))


def test_a_tree_of_shardings(cpu):
    batched, replicated = one_device_sharding(), one_device_sharding(PartitionSpec())
    batch = {"x": np.arange(4, dtype=np.float32), "step": np.int32(3), "extra": (np.ones(2), b"id")}
    out = tj.device_put(batch, {"x": batched, "step": replicated, "extra": None})
    assert out["x"].sharding == batched and out["step"].sharding == replicated
    assert int(out["step"]) == 3 and out["extra"][1] == b"id"
    assert out["extra"][0].devices() == {cpu}
    with pytest.raises(TypeError, match="Sharding"):
        tj.device_put(batch, {"x": 3, "step": None, "extra": None})


def test_prefetch_keeps_batches_ahead():
    pulled = []

    def source():
        for i in range(6):
            pulled.append(i)
            yield np.full(2, i, dtype=np.float32)

    for prefetch in (0, 1, 3):
        pulled.clear()
        it = tj.device_put_iterator(source(), prefetch=prefetch)
        assert pulled == []  # nothing before the first request
        first = next(it)
        assert len(pulled) == 1 + prefetch
        rest = list(it)
        assert [int(np.asarray(b)[0]) for b in [first, *rest]] == list(range(6))


def test_closing_the_iterator_closes_the_source():
    closed = []

    def source():
        try:
            for i in range(100):
                yield np.array([i])
        finally:
            closed.append(True)

    it = tj.device_put_iterator(source(), prefetch=2)
    assert int(np.asarray(next(it))[0]) == 0
    it.close()
    assert closed == [True]


def test_argument_errors(cpu):
    with pytest.raises(ValueError):
        tj.device_put_iterator([], prefetch=-1)
    with pytest.raises(TypeError):
        tj.device_put_iterator([], prefetch=1.5)
    with pytest.raises(ValueError, match="not both"):
        tj.device_put(np.zeros(2), one_device_sharding(), device=cpu)
