"""``tfdata.torch.merge_state_dicts``: the elastic restore of deterministic
reads, kept apart from ``tfdata/torch.py`` (which exports it) and free of
torch, so that a trainer's rank 0 merges states with tfdata alone. The
states are ``DistributedIterableDataset.state_dict()``'s, as found in
torchdata's ``StatefulDataLoader`` states."""

from __future__ import annotations

from tfdata import _native, errors
from tfdata.experimental import _deterministic

# The version of DistributedIterableDataset.state_dict()'s dictionary.
STATE_FORMAT = 1


# torchdata's StatefulDataLoader state keys (torchdata 0.11, stateful_dataloader.py).
_LOADER_SNAPSHOT = "_snapshot"
_LOADER_WORKER_SNAPSHOTS = "_worker_snapshots"
_LOADER_STEPS_SINCE_SNAPSHOT = "_steps_since_snapshot"
_LOADER_NUM_YIELDED = "_num_yielded"
_LOADER_DATASET_STATE = "dataset_state"


def _get(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None


def _dataset_states(state, where: str) -> list:
    """The DistributedIterableDataset states in one rank's state: a
    StatefulDataLoader's (one per DataLoader worker, or the one of a loader
    without workers) or a dataset's own."""
    if not isinstance(state, dict):
        raise TypeError(f"tfdata.torch: {where} must be a dict (a state_dict()), got {type(state)}")
    if _LOADER_SNAPSHOT in state:
        if state.get(_LOADER_STEPS_SINCE_SNAPSHOT, 0):
            raise ValueError(
                f"tfdata.torch: {where} is a StatefulDataLoader state taken "
                f"{state[_LOADER_STEPS_SINCE_SNAPSHOT]} steps after its workers' snapshot: their "
                "readers' positions are older than the loader's. Use snapshot_every_n_steps=1 (the "
                "default) for deterministic reads")
        workers = state[_LOADER_SNAPSHOT].get(_LOADER_WORKER_SNAPSHOTS) or {}
        return [_get(w, _LOADER_DATASET_STATE) for _, w in sorted(workers.items())]
    if _LOADER_NUM_YIELDED in state:
        return [state.get(_LOADER_DATASET_STATE)]
    return [state]


def merge_state_dicts(state_dicts) -> dict:
    """Joins the states that every rank of a deterministic read took at one
    training step into one, which :meth:`DistributedIterableDataset.load_state_dict`
    restores on any world size (and number of DataLoader workers) whose
    readers divide ``num_lanes``: each reader continues its share of the rest
    of the epoch, in the global order, and no element is read twice or lost.

    Args:
      state_dicts: A list or tuple with one state per rank, in any order:
        each a ``StatefulDataLoader.state_dict()`` (with or without
        DataLoader workers) or a ``DistributedIterableDataset.state_dict()``.
        Gather them with ``torch.distributed.gather_object`` (or
        ``all_gather_object``) and merge on one rank.

    Returns:
      A dataset state (a dict of plain values and ``bytes``) to save with the
      model and give to ``DistributedIterableDataset.load_state_dict``.

    Raises:
      TypeError: not a list or tuple of state dicts.
      ValueError: a state is not a deterministic read's, or the states are of
        different passes.
      tfdata.errors.InvalidArgumentError: the readers' checkpoints are of
        different reads or do not cover every lane once (a rank is missing or
        given twice).
      tfdata.errors.FailedPreconditionError: the readers had consumed
        different numbers of elements: the states are not of one step.
    """
    if not isinstance(state_dicts, (list, tuple)):
        raise TypeError(f"tfdata.torch: `state_dicts` must be a list or tuple of states, got {type(state_dicts)}")
    if not state_dicts:
        raise ValueError("tfdata.torch: `state_dicts` must not be empty: give every rank's state")
    groups = [_dataset_states(s, f"state_dicts[{i}]") for i, s in enumerate(state_dicts)]
    states = [d for group in groups for d in group]
    for state in states:
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"tfdata.torch: not a DistributedIterableDataset state: {state!r:.200}")
    readers = [s for s in states if s.get("reader") is not None]
    if not readers:
        # Before the first pass: nothing was read; the epoch is all there is.
        first = states[0]
        if any((s["epoch"], s.get("passes")) != (first["epoch"], first.get("passes")) for s in states):
            raise ValueError("tfdata.torch: the states are of different epochs: "
                             f"{sorted({(s['epoch'], s.get('passes')) for s in states})}")
        return {k: v for k, v in first.items() if k != "deterministic"}
    if len(readers) != len(states):
        raise ValueError(
            f"tfdata.torch: {len(states) - len(readers)} of the {len(states)} readers' states were "
            "taken before their first pass and the others during one: they are not of one step")
    for s in readers:
        if not isinstance(s.get("deterministic"), dict):
            raise ValueError(
                "tfdata.torch: only the states of a deterministic read (deterministic=True) merge; "
                "an ordinary read's states restore only on the same world size")
    passes = {(s["epoch"], s["passes"], s.get("job_name")) for s in readers}
    if len(passes) != 1:
        raise ValueError(f"tfdata.torch: the states are of different passes (epoch, passes, job): {sorted(passes, key=str)}")
    lanes = {s["deterministic"].get("num_lanes") for s in readers}
    if len(lanes) != 1:
        raise ValueError(f"tfdata.torch: the states have different num_lanes: {sorted(lanes, key=str)}")
    first = readers[0]
    merged = _deterministic.merge_checkpoints(_one_step(groups))
    taken = first["deterministic"]
    return {
        "format": STATE_FORMAT,
        "epoch": first["epoch"],
        "epoch_set": first.get("epoch_set", False),
        "passes": first["passes"],
        "job_name": first.get("job_name"),
        "reader": merged,
        "deterministic": {
            "merged": True,
            "num_lanes": taken.get("num_lanes"),
            # What it was taken at, for messages and the trainer's records.
            "num_consumers": len(readers),
            "world_size": taken.get("world_size"),
        },
    }


def _one_step(groups: list) -> list:
    """The readers' checkpoints, per rank (group) its DataLoader workers'.
    A loader takes one element a step from its workers in turn, so at most
    steps a rank's workers are one element apart: ``merge_checkpoints``,
    which wants every reader at the same count, would refuse them. Ranks of
    several workers are checked here instead, by what each rank consumed
    (the sum over its workers: one per step, the same on every rank), and
    their checkpoints then carry that common count."""
    checkpoints = [[s["reader"] for s in group] for group in groups]
    if all(len(group) == 1 for group in checkpoints):
        return [c for (c,) in checkpoints]  # one reader a rank: merge_checkpoints checks
    per_rank = [sum(_native.deterministic_steps(c)[0] for c in group) for group in checkpoints]
    if len(set(per_rank)) != 1:
        raise errors.FailedPreconditionError(
            None, None,
            "tfdata.torch: the ranks' states were taken at different steps (elements consumed "
            f"per rank, over its DataLoader workers: {per_rank}); merge the states every rank "
            "took at the same step")
    return [_native.deterministic_steps(c, per_rank[0])[1] for group in checkpoints for c in group]
