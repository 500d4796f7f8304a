"""``tfdata.jax``: put tfdata's numpy batches on JAX devices.

* :func:`device_put` moves one batch (an array, or tuples, lists and dicts of
  them) to a device with ``jax.device_put``, or, given a ``sharding``, makes
  global arrays from this process's part of the batch with
  ``jax.make_array_from_process_local_data(sharding, array)`` (several
  hosts, each reading its own part, for example with coordinated reads);
* :func:`device_put_iterator` wraps a dataset (a :class:`tfdata.Dataset`, a
  :class:`tfdata.DistributedDataset` or any iterable of batches) and keeps
  ``prefetch`` batches on their way to the device ahead of the consumer, so
  that host-to-device copies overlap the training step::

    import tfdata, tfdata.jax
    from tfdata.experimental import service

    ds = tfdata.Dataset.range(1024).batch(32).apply(
        service.distribute("distributed_epoch", SERVICE, job_name="train"))
    for batch in tfdata.jax.device_put_iterator(ds, prefetch=2):
        state = train_step(state, batch)

Batch in the tfdata pipeline (``batch(...)``), not here: leaves are put as
they come. Leaves JAX cannot hold (``bytes``, arrays of strings, other
Python objects) are passed through unchanged; the structure (tuples, named
tuples, lists, dicts) is kept.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any, Iterable, Iterator

import jax
import numpy as np

__all__ = ["device_put", "device_put_iterator"]

# numpy kinds JAX can hold: bool, signed, unsigned, float, complex.
_NUMERIC_KINDS = frozenset("biufc")


def _is_numeric(leaf) -> bool:
    return isinstance(leaf, (np.ndarray, np.generic)) and leaf.dtype.kind in _NUMERIC_KINDS


def _is_sharding_leaf(x) -> bool:
    return x is None or isinstance(x, jax.sharding.Sharding)


def _put_leaves(batch: Any, sharding, device) -> Any:
    def put(leaf):
        if not _is_numeric(leaf):
            return leaf
        if sharding is not None:
            return jax.make_array_from_process_local_data(sharding, np.asarray(leaf))
        return jax.device_put(leaf, device)

    return jax.tree_util.tree_map(put, batch)


def device_put(batch: Any, sharding: Any = None, *, device=None) -> Any:
    """``batch`` with its numeric numpy leaves as ``jax.Array``\\ s.

    Without ``sharding``: ``jax.device_put(leaf, device)`` (``device=None``:
    JAX's default device). With ``sharding``:
    ``jax.make_array_from_process_local_data(sharding, leaf)``, where ``leaf``
    is this process's part of the global array. ``sharding`` is one
    ``jax.sharding.Sharding`` for every leaf, or a tree of them shaped like
    (a prefix of) the batch, for example ``{"image": s1, "label": s2}``;
    ``None`` in it puts that part with ``jax.device_put``. Other leaves
    (``bytes``, string arrays) are returned as they are.
    """
    if sharding is not None and device is not None:
        raise ValueError("give either `sharding` or `device`, not both")
    if _is_sharding_leaf(sharding):
        return _put_leaves(batch, sharding, device)
    for leaf in jax.tree_util.tree_leaves(sharding, is_leaf=_is_sharding_leaf):
        if not _is_sharding_leaf(leaf):
            raise TypeError(f"`sharding` must hold jax.sharding.Sharding objects, got {type(leaf)}")
    return jax.tree_util.tree_map(
        lambda s, part: _put_leaves(part, s, device), sharding, batch, is_leaf=_is_sharding_leaf)


def _iterator_of(data) -> Iterator:
    as_numpy = getattr(data, "as_numpy_iterator", None)
    return iter(as_numpy() if callable(as_numpy) else data)


def device_put_iterator(
    data: Iterable,
    sharding: Any = None,
    prefetch: int = 2,
    *,
    device=None,
) -> Iterator:
    """Yields the batches of ``data`` put on the device (:func:`device_put`),
    ``prefetch`` batches ahead: JAX's transfers are asynchronous, so while the
    consumer works on one batch the next ones are already being copied.

    ``data`` is a :class:`tfdata.Dataset`, a :class:`tfdata.DistributedDataset`
    (each call starts a new iteration, hence a new epoch) or any iterable of
    numpy batches. ``prefetch=0`` puts each batch only when it is asked for.
    Closing the returned generator (or dropping it) closes the iterator of
    ``data`` too.
    """
    if isinstance(prefetch, bool) or not isinstance(prefetch, (int, np.integer)):
        raise TypeError(f"`prefetch` must be an integer, got {prefetch!r}")
    if prefetch < 0:
        raise ValueError(f"`prefetch` must not be negative, got {prefetch}")
    if sharding is not None and device is not None:
        raise ValueError("give either `sharding` or `device`, not both")
    return _prefetched(_iterator_of(data), sharding, int(prefetch), device)


def _prefetched(source: Iterator, sharding, prefetch: int, device) -> Iterator:
    queue: collections.deque = collections.deque()

    def enqueue(n: int) -> None:
        for batch in itertools.islice(source, n):
            queue.append(device_put(batch, sharding, device=device))

    try:
        enqueue(prefetch)
        while True:
            enqueue(1)  # the batch to yield now, or one more behind it
            if not queue:
                return
            yield queue.popleft()  # `prefetch` batches stay on their way
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
