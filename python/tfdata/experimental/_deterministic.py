"""Deterministic reads (``distribute(..., deterministic=True)``) and
:func:`merge_checkpoints`: the argument checks of the Python API, before
anything reaches the dispatcher, and the checkpoint merge of an elastic
restore (docs/python.md, "Deterministic reads and elastic restore").

A deterministic read of a ``distributed_epoch`` job splits each epoch's
splits among ``num_lanes`` lanes; the epoch's global sequence depends on the
pipeline, its seeds, the epoch and ``num_lanes`` only. Consumer ``c`` of
``n`` (``n`` divides ``num_lanes``) reads the global positions ``c, c + n,
c + 2n, ...``; the checkpoints of all ``n`` consumers at one step merge into
one that restores on any number of consumers dividing ``num_lanes``.
"""

from __future__ import annotations

from typing import Optional

from tfdata import _native

# The lanes a deterministic read has unless told otherwise: divisible by 1,
# 2, 3, 4, 6, 8, 12 and 24 consumers, so the usual world sizes (times a
# DataLoader worker or two) can restore each other's checkpoints.
DEFAULT_NUM_LANES = 24
# The dispatcher's limit (TfdataDeterministic.lanes in common.proto).
MAX_NUM_LANES = 4096
_MAX_SEED = (1 << 64) - 1


def _is_int(value) -> bool:
    return not isinstance(value, bool) and (isinstance(value, int) or hasattr(value, "__index__"))


def _int_argument(name: str, value) -> int:
    if not _is_int(value):
        raise TypeError(f"`{name}` must be an integer, but `{name}` was of type {type(value)}. {name}={value!r}")
    return int(value.__index__())


def deterministic_options(
    sharding_policy_name: str,
    deterministic,
    num_lanes,
    split_shuffle_seed,
    consumer_index,
    num_consumers,
    cross_trainer_cache,
    reorder_window_elements,
    reorder_window_bytes,
) -> Optional[dict]:
    """The ``deterministic`` read option the native reader takes (``None``
    for an ordinary read), after TensorFlow-style checks: ``TypeError`` for
    a wrong type, ``ValueError`` for a value out of range or a combination
    that has no meaning."""
    if not isinstance(deterministic, bool):
        raise TypeError(
            f"`deterministic` must be a bool, but `deterministic` was of type {type(deterministic)}. "
            f"deterministic={deterministic!r}"
        )
    if not deterministic:
        for name, value in (
            ("num_lanes", num_lanes),
            ("split_shuffle_seed", split_shuffle_seed),
            ("reorder_window_elements", reorder_window_elements),
            ("reorder_window_bytes", reorder_window_bytes),
        ):
            if value is not None:
                raise ValueError(
                    f"`{name}` is a setting of deterministic reads: it requires `deterministic=True`. "
                    f"{name}={value!r}"
                )
        return None
    if sharding_policy_name != "distributed_epoch":
        raise ValueError(
            "tf.data service deterministic reads require `processing_mode=\"distributed_epoch\"` "
            f"(`ShardingPolicy.DYNAMIC`): their global order is an order of the splits of one "
            f"distributed epoch. Got processing_mode={sharding_policy_name!r}."
        )
    if cross_trainer_cache is not None:
        raise ValueError(
            "tf.data service deterministic reads cannot use a `cross_trainer_cache`: trainers "
            "sharing a cache read elements in the order they are produced."
        )
    lanes = DEFAULT_NUM_LANES if num_lanes is None else _int_argument("num_lanes", num_lanes)
    if not 1 <= lanes <= MAX_NUM_LANES:
        raise ValueError(f"`num_lanes` must be between 1 and {MAX_NUM_LANES}. num_lanes={lanes}")
    seed = None
    if split_shuffle_seed is not None:
        seed = _int_argument("split_shuffle_seed", split_shuffle_seed)
        if not 0 <= seed <= _MAX_SEED:
            raise ValueError(
                f"`split_shuffle_seed` must be between 0 and 2**64 - 1. split_shuffle_seed={seed}"
            )
    if num_consumers is None:
        consumer, consumers = 0, 1
    else:
        consumer = _int_argument("consumer_index", consumer_index)
        consumers = _int_argument("num_consumers", num_consumers)
        if consumers < 1:
            raise ValueError(f"`num_consumers` must be positive. num_consumers={consumers}")
        if not 0 <= consumer < consumers:
            raise ValueError(
                f"`consumer_index` must be in [0, num_consumers). consumer_index={consumer}, "
                f"num_consumers={consumers}"
            )
    if lanes % consumers:
        divisors = [d for d in range(1, lanes + 1) if lanes % d == 0]
        raise ValueError(
            f"`num_lanes` must be a multiple of `num_consumers`: each consumer of a deterministic "
            f"read reads num_lanes / num_consumers lanes. num_lanes={lanes}, num_consumers="
            f"{consumers} (with {lanes} lanes, num_consumers may be one of {divisors})"
        )
    window = {}
    for name, value in (
        ("reorder_window_elements", reorder_window_elements),
        ("reorder_window_bytes", reorder_window_bytes),
    ):
        if value is not None:
            window[name] = _int_argument(name, value)
            if window[name] < 1:
                raise ValueError(f"`{name}` must be positive. {name}={window[name]}")
    return {
        "lanes": lanes,
        "split_shuffle_seed": seed,
        "consumer_index": consumer,
        "num_consumers": consumers,
        "reorder_window_elements": window.get("reorder_window_elements"),
        "reorder_window_bytes": window.get("reorder_window_bytes"),
    }


def merge_checkpoints(checkpoints) -> bytes:
    """Joins the checkpoints (``it.checkpoint()``) that all the consumers of
    one deterministic read took at the same step into one, which restores on
    any number of consumers that divides the read's ``num_lanes``
    (``it.restore(merged)`` on consumer ``c`` of ``m`` continues its share).

    Args:
      checkpoints: A list or tuple of ``bytes``, one per consumer (in any
        order); a merged checkpoint may be given again.

    Raises:
      TypeError: ``checkpoints`` is not a list or tuple of ``bytes``.
      tfdata.errors.InvalidArgumentError: a checkpoint is not a deterministic
        read's, they come from different reads (dataset, ``num_lanes``,
        ``split_shuffle_seed`` or epoch), or they do not cover every lane
        exactly once (a consumer is missing or given twice).
      tfdata.errors.FailedPreconditionError: they were taken at different
        steps (the message names each consumer's step count).
    """
    if not isinstance(checkpoints, (list, tuple)):
        raise TypeError(
            "`checkpoints` must be a list or tuple of bytes (one `checkpoint()` per consumer), "
            f"but was of type {type(checkpoints)}"
        )
    for i, checkpoint in enumerate(checkpoints):
        if not isinstance(checkpoint, bytes):
            raise TypeError(
                f"`checkpoints[{i}]` must be bytes (what `checkpoint()` returns), but was of type "
                f"{type(checkpoint)}"
            )
    if not checkpoints:
        raise ValueError("`checkpoints` must not be empty: give every consumer's checkpoint")
    return _native.merge_checkpoints(list(checkpoints))
