"""``tfdata.torch``: read tf.data service into a PyTorch ``DataLoader``.

:class:`DistributedIterableDataset` is a ``torch.utils.data.IterableDataset``
whose elements come from tf.data service, as torch tensors::

    import tfdata, torch
    from tfdata.experimental import service
    from tfdata.torch import DistributedIterableDataset

    pipeline = tfdata.Dataset.range(1000).map(preprocess).batch(32)
    dataset_id = service.register_dataset(SERVICE, pipeline)   # in the main process
    ds = DistributedIterableDataset(
        dataset_id, SERVICE, processing_mode="distributed_epoch", job_name="train")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for batch in loader:
            ...

Batch and prefetch in the tfdata pipeline (on the tf.data service workers):
give the ``DataLoader`` ``batch_size=None`` so that it passes the batches
through as they come. ``num_workers=0`` is usually enough (the reader
prefetches on its own threads, without the GIL); ``num_workers=N`` runs N readers
in DataLoader worker processes (more readers, more requests in flight), and
``pin_memory=True`` works as usual.

What the dataset holds
    Only picklable configuration (DataLoader workers get a copy of it): the
    service address, the dataset (see below), the processing mode, the job
    name and the other options of
    :func:`tfdata.experimental.service.from_dataset_id`. The reader is made
    in ``__iter__``, that is inside each DataLoader worker, after the fork.

The dataset to read, ``dataset``, is one of
    * the id (a string) that :func:`tfdata.experimental.service.register_dataset`
      returned: the recommended way, registering once, in the main process,
      before the DataLoader starts its workers;
    * a :class:`tfdata.Dataset`, registered at construction (in the calling
      process) under a ``dataset_id`` derived from ``job_name`` (or the one
      given), so that every rank registering "its" copy registers the same one;
    * a zero-argument function that builds the :class:`tfdata.Dataset` (for
      example when the pipeline should be built in each process); it is called
      in each reading process and registered under that same ``dataset_id``.
      With the ``spawn`` start method it must be picklable (a module-level
      function). A ``dataset_id`` that is already registered keeps the dataset
      it was registered with: give a new ``job_name`` or ``dataset_id`` for a
      changed pipeline on a long-lived dispatcher.

How readers share the data
    DataLoader workers (``torch.utils.data.get_worker_info()``) and
    distributed ranks (``rank``/``world_size``, by default those of
    ``torch.distributed`` when it is initialized) are mapped onto tf.data
    service's own mechanisms; nothing is sharded or deduplicated here:

    * ``processing_mode="distributed_epoch"`` (the default) with a shared
      ``job_name`` (required): every reader joins one job, which splits one
      pass over the dataset among the service's workers and hands each
      element to one reader: across all workers and ranks, each element is
      read once per epoch.
    * ``coordinated_reads=True`` (``processing_mode="parallel_epochs"``, with a
      ``job_name``): reader ``consumer_index = rank * num_workers + worker_id``
      of ``num_consumers = world_size * num_workers`` (see
      :func:`consumer_assignment`) reads every ``num_consumers``-th round of
      the job, all readers getting same-sized batches in lockstep. tf.data
      service requires an infinite (``repeat()``-ed) dataset for this, so each
      pass is infinite: stop it yourself (``itertools.islice``, a step count).
      A DataLoader left mid-pass has workers waiting for rounds nobody else
      will read; torch terminates them after its shutdown timeout (5 s each).
    * ``processing_mode="parallel_epochs"`` with a ``job_name``: readers share
      the job (each tf.data service worker makes a full pass, each element of
      which goes to one reader). Without a ``job_name`` only one reader is
      allowed (it reads everything): several would each read the whole job.

    The ``job_name`` must be the same in every worker and rank (a fixed
    string, not a random one), or each reader gets a job of its own and the
    data is read several times.

Epochs
    tf.data service's named jobs are single-use per pass, so each pass (each
    ``iter(DataLoader)``) reads the job ``"<job_name>/epoch-<n>"``. ``n`` is
    the epoch given to :meth:`~DistributedIterableDataset.set_epoch` plus the
    passes this process made since. Call ``set_epoch(epoch)`` before each
    epoch, as with ``DistributedSampler``: it is required with several ranks
    when the DataLoader's workers are not persistent (each pass then starts
    from a fresh copy of the dataset). Without ``set_epoch`` and with a single
    rank, each DataLoader pass gets a job of its own anyway (named after the
    DataLoader's per-pass seed). With a ``cross_trainer_cache`` the job name
    is used as given (trainers share one infinite job).

Checkpoints
    :meth:`~DistributedIterableDataset.state_dict` and
    :meth:`~DistributedIterableDataset.load_state_dict` are torchdata's
    ``StatefulDataLoader`` protocol: the loader calls them in each DataLoader
    worker (or in the trainer's process with ``num_workers=0``) and keeps the
    state of the last element it handed the trainer from each. A state holds
    the pass's job name and the reader's checkpoint (``it.checkpoint()``,
    docs/fault-tolerance.md "Reader checkpoints"); a loader restored from it
    reads the same job from there, each of its readers restoring its own
    share, so that what the trainer consumed before the state and after the
    restore is the epoch, once. Restore every worker of every rank (as a
    synchronous job restarts from one checkpoint); reads a reader checkpoint
    does not cover raise ``FailedPreconditionError`` at ``state_dict()``.

Deterministic reads and a changing world size
    ``deterministic=True`` (with ``num_lanes``, default 24, and
    ``split_shuffle_seed``; ``processing_mode="distributed_epoch"``) reads
    one global order per epoch that depends on neither the service's workers
    nor the number of readers. Reader ``rank * num_workers + worker_id`` of
    ``world_size * num_workers`` (their product must divide ``num_lanes``)
    reads its share of it. A reader's state records the reader, rank and
    world size it was taken at. Gather every rank's state at one step,
    merge them on one rank with :func:`merge_state_dicts`, save the merged
    state with the model, and restore with ``ds.load_state_dict(merged)``
    before the loader is made, on any world size whose readers divide
    ``num_lanes``: the rest of the epoch is read once, in the global order.
    An unmerged state loaded on another world size raises ``ValueError``
    saying to merge. docs/python.md has the recipe.

Elements
    Numeric numpy arrays become torch tensors with ``torch.from_numpy``
    (zero-copy: they share the buffers the elements were received into);
    numpy scalars become 0-d tensors; ``bytes`` stay ``bytes`` and string
    arrays stay numpy arrays of ``bytes``; tuples (named ones too), lists and
    dicts keep their structure (:func:`to_torch`). ``to_tensors=False`` yields
    the numpy values instead.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np
import torch
import torch.utils.data

from tfdata._torch_elastic import STATE_FORMAT as _STATE_FORMAT
from tfdata._torch_elastic import merge_state_dicts
from tfdata.dataset import Dataset
from tfdata.experimental import _deterministic
from tfdata.experimental import service as _service

__all__ = ["DistributedIterableDataset", "consumer_assignment", "merge_state_dicts", "to_torch"]

_PARALLEL_EPOCHS = "parallel_epochs"
_DISTRIBUTED_EPOCH = "distributed_epoch"
# numpy kinds torch can hold: bool, signed, unsigned, float, complex.
_NUMERIC_KINDS = frozenset("biufc")


def consumer_assignment(rank: int, world_size: int, worker_id: int, num_workers: int) -> tuple[int, int]:
    """``(consumer_index, num_consumers)`` of DataLoader worker ``worker_id``
    (of ``num_workers``) on rank ``rank`` (of ``world_size``), for coordinated
    reads: ``(rank * num_workers + worker_id, world_size * num_workers)``."""
    for name, value in (("rank", rank), ("world_size", world_size),
                        ("worker_id", worker_id), ("num_workers", num_workers)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"`{name}` must be an integer, got {value!r}")
    if world_size < 1 or num_workers < 1:
        raise ValueError(f"world_size and num_workers must be positive, got {world_size} and {num_workers}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
    if not 0 <= worker_id < num_workers:
        raise ValueError(f"worker_id must be in [0, {num_workers}), got {worker_id}")
    return int(rank * num_workers + worker_id), int(world_size * num_workers)


def _array_to_tensor(array: np.ndarray):
    if array.dtype.kind not in _NUMERIC_KINDS:
        return array  # strings (bytes objects) and the like: torch has no such dtype
    if not array.flags.writeable:
        array = array.copy()  # torch warns about (and may write to) read-only buffers
    try:
        return torch.from_numpy(array)
    except ValueError:
        # Negative strides or a non-native byte order: one copy that torch takes.
        return torch.from_numpy(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")))
    except TypeError:
        return array  # a numpy dtype torch does not support


def to_torch(element: Any) -> Any:
    """``element`` with its numeric numpy arrays and scalars as torch tensors
    (zero-copy for arrays), its structure (tuples, named tuples, lists, dicts)
    kept, and everything else (``bytes``, string arrays) unchanged."""
    if isinstance(element, np.ndarray):
        return _array_to_tensor(element)
    if isinstance(element, np.generic):
        if element.dtype.kind in _NUMERIC_KINDS:
            return torch.from_numpy(np.asarray(element))
        return element
    if isinstance(element, dict):
        converted = {k: to_torch(v) for k, v in element.items()}
        return converted if type(element) is dict else type(element)(converted)
    if isinstance(element, tuple):
        values = [to_torch(v) for v in element]
        if hasattr(element, "_fields"):  # a named tuple
            return type(element)(*values)
        return tuple(values) if type(element) is tuple else type(element)(values)
    if isinstance(element, list):
        return [to_torch(v) for v in element]
    return element


def _mode_name(processing_mode) -> Any:
    """``"parallel_epochs"``, ``"distributed_epoch"``, or a static-sharding
    ``ShardingPolicy`` (passed on as it is)."""
    policy = _service.ShardingPolicy
    if processing_mode in (_PARALLEL_EPOCHS, policy.OFF):
        return _PARALLEL_EPOCHS
    if processing_mode in (_DISTRIBUTED_EPOCH, policy.DYNAMIC):
        return _DISTRIBUTED_EPOCH
    if isinstance(processing_mode, policy):
        return processing_mode
    raise ValueError(
        "tf.data service processing mode should be a `ShardingPolicy`, "
        f'"parallel_epochs", or "distributed_epoch". Got {processing_mode!r}.'
    )


def _distributed_rank_and_world_size() -> Optional[tuple[int, int]]:
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def _check_index(name: str, value) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer, got {value!r}")
    return int(value)


def _check_lanes_divide(num_lanes: int, world_size: int, num_workers: int) -> None:
    readers = world_size * num_workers
    if num_lanes % readers:
        raise ValueError(
            f"tfdata.torch: a deterministic read with num_lanes={num_lanes} cannot be shared by "
            f"{readers} readers ({world_size} rank(s) x {num_workers} DataLoader worker(s)): the "
            f"readers must divide the lanes. Choose a world size and num_workers whose product "
            f"divides {num_lanes}, or another num_lanes (the same for the whole run: it is part "
            "of the order)")


def _get(mapping, key):
    return mapping.get(key) if isinstance(mapping, dict) else None


def _unmerged_message(taken_by: dict, here: str) -> str:
    return (
        f"tfdata.torch: this state is one reader's of a deterministic read (reader "
        f"{taken_by.get('consumer_index')} of {taken_by.get('num_consumers')}: rank "
        f"{taken_by.get('rank')} of world size {taken_by.get('world_size')} with "
        f"{taken_by.get('num_workers')} DataLoader worker(s)), and {here}. One reader's state "
        "restores only into the same reader. Gather the states of all ranks at one step, merge them with "
        "tfdata.torch.merge_state_dicts (on one rank) and load the merged state instead: it "
        "restores on any world size whose readers divide num_lanes")


def _check_restorable(taken_by: Optional[dict], reader: dict) -> None:
    """Refuses to continue one reader's deterministic state in another reader
    (a merged state continues in any)."""
    if taken_by is None or taken_by.get("merged"):
        return
    same = all(taken_by.get(k) == reader[k] for k in ("consumer_index", "num_consumers"))
    if not same:
        raise ValueError(_unmerged_message(
            taken_by, f"this is reader {reader['consumer_index']} of {reader['num_consumers']} "
            f"(rank {reader['rank']} of world size {reader['world_size']} with "
            f"{reader['num_workers']} DataLoader worker(s))"))


class DistributedIterableDataset(torch.utils.data.IterableDataset):
    """A ``torch.utils.data.IterableDataset`` reading a dataset from tf.data
    service (see the module documentation for the sharing modes and epochs).

    Args:
      dataset: The registered dataset's id (a string, from
        ``register_dataset``), a :class:`tfdata.Dataset` (registered now), or
        a zero-argument function building one (registered by each reader).
      service: The dispatcher, ``"grpc://host:port"`` (as for ``distribute``).
      processing_mode: ``"distributed_epoch"`` (default) or ``"parallel_epochs"``
        (or a ``ShardingPolicy``).
      job_name: The shared job's name, the same in every worker and rank.
        Required for ``"distributed_epoch"`` and for coordinated reads.
      coordinated_reads: Read as consumer ``rank * num_workers + worker_id``
        of ``world_size * num_workers`` (``parallel_epochs``, infinite dataset).
      rank, world_size: This trainer's rank and the number of ranks; by
        default ``torch.distributed``'s when it is initialized, else 0 and 1.
      dataset_id: The id to register a :class:`tfdata.Dataset` or a factory's
        dataset under; default ``"tfdata.torch:<job_name>"`` (with no job
        name, an id of the dispatcher's choosing).
      compression: For registering (``"AUTO"``, ``None``, ``"SNAPPY"``).
      to_tensors: Yield torch tensors (default) or the numpy values.
      deterministic, num_lanes, split_shuffle_seed, reorder_window_elements,
      reorder_window_bytes: A deterministic read (module documentation),
        as for ``from_dataset_id``; the consumer index and count come from
        the rank and the DataLoader worker.
      element_spec, max_outstanding_requests, data_transfer_protocol,
      cross_trainer_cache, target_workers, dispatcher_timeout_ms,
      task_refresh_interval_hint_ms: As for
        :func:`tfdata.experimental.service.from_dataset_id`.
    """

    def __init__(
        self,
        dataset: Union[str, bytes, Dataset, Callable[[], Dataset]],
        service: str,
        processing_mode: Any = _DISTRIBUTED_EPOCH,
        job_name: Optional[str] = None,
        *,
        coordinated_reads: bool = False,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        dataset_id: Optional[str] = None,
        compression: Optional[str] = "AUTO",
        to_tensors: bool = True,
        element_spec=None,
        max_outstanding_requests: Optional[int] = None,
        data_transfer_protocol: Optional[str] = None,
        cross_trainer_cache=None,
        target_workers: str = "AUTO",
        dispatcher_timeout_ms: Optional[int] = None,
        task_refresh_interval_hint_ms: Optional[int] = None,
        deterministic: bool = False,
        num_lanes: Optional[int] = None,
        split_shuffle_seed: Optional[int] = None,
        reorder_window_elements: Optional[int] = None,
        reorder_window_bytes: Optional[int] = None,
    ):
        super().__init__()
        mode = _mode_name(processing_mode)
        deterministic_keywords = dict(
            deterministic=deterministic, num_lanes=num_lanes, split_shuffle_seed=split_shuffle_seed,
            reorder_window_elements=reorder_window_elements, reorder_window_bytes=reorder_window_bytes)
        if deterministic is True and coordinated_reads:
            raise ValueError(
                "tfdata.torch: `deterministic=True` and `coordinated_reads=True` exclude each other: "
                "a deterministic read gives each reader its share of one global order")
        # TensorFlow-style checks (processing mode, lanes, seed) now, in the
        # main process; the consumer count is known in __iter__.
        deterministic_settings = _deterministic.deterministic_options(
            mode if isinstance(mode, str) else str(mode), **deterministic_keywords,
            consumer_index=None, num_consumers=None, cross_trainer_cache=cross_trainer_cache)
        if isinstance(job_name, bytes):
            job_name = job_name.decode()
        if job_name is not None and (not isinstance(job_name, str) or not job_name):
            raise ValueError(f"`job_name` must be a non-empty string, got {job_name!r}")
        if mode == _DISTRIBUTED_EPOCH and job_name is None:
            raise ValueError(
                "tfdata.torch: processing_mode='distributed_epoch' needs a `job_name`, the same "
                "string in every DataLoader worker and rank, so that they all share one job "
                "(otherwise each reader gets a job of its own and reads the whole dataset)"
            )
        if coordinated_reads:
            if mode != _PARALLEL_EPOCHS:
                raise ValueError(
                    "tfdata.torch: coordinated reads (`coordinated_reads=True`) need "
                    f"processing_mode='parallel_epochs', got {mode!r}"
                )
            if job_name is None:
                raise ValueError("tfdata.torch: coordinated reads need a `job_name` shared by all readers")
        rank = _check_index("rank", rank)
        world_size = _check_index("world_size", world_size)
        if world_size is not None and world_size < 1:
            raise ValueError(f"`world_size` must be positive, got {world_size}")
        if rank is not None and world_size is not None and not 0 <= rank < world_size:
            raise ValueError(f"`rank` must be in [0, {world_size}), got {rank}")
        if rank is not None and rank < 0:
            raise ValueError(f"`rank` must not be negative, got {rank}")
        if not isinstance(service, (str, tuple)):
            raise ValueError(f"`service` must be a string, got {type(service)}")
        if dataset_id is not None:
            dataset_id = dataset_id.decode() if isinstance(dataset_id, bytes) else str(dataset_id)
        if dataset_id is None and job_name is not None:
            dataset_id = f"tfdata.torch:{job_name}"

        if deterministic_settings is not None and world_size is not None:
            _check_lanes_divide(deterministic_settings["lanes"], world_size, 1)
        self._service = service
        self._mode = mode
        # The deterministic keywords as given (from_dataset_id takes them),
        # or None for an ordinary read.
        self._deterministic = deterministic_keywords if deterministic_settings is not None else None
        self._num_lanes = None if deterministic_settings is None else deterministic_settings["lanes"]
        self._job_name = job_name
        self._coordinated = bool(coordinated_reads)
        self._rank = rank
        self._world_size = world_size
        self._compression = compression
        self._to_tensors = bool(to_tensors)
        self._read_kwargs = dict(
            element_spec=element_spec,
            max_outstanding_requests=max_outstanding_requests,
            data_transfer_protocol=data_transfer_protocol,
            cross_trainer_cache=cross_trainer_cache,
            target_workers=target_workers,
            dispatcher_timeout_ms=dispatcher_timeout_ms,
            task_refresh_interval_hint_ms=task_refresh_interval_hint_ms,
        )
        self._factory: Optional[Callable[[], Dataset]] = None
        self._register_id = dataset_id
        self._registered: Optional[tuple[int, str]] = None  # (pid, id) of a factory's registration
        if isinstance(dataset, (str, bytes)):
            self._dataset_id: Optional[str] = dataset.decode() if isinstance(dataset, bytes) else dataset
        elif isinstance(dataset, Dataset):
            # Registered here, in the calling (main) process; only the id is kept.
            self._dataset_id = _service.register_dataset(service, dataset, compression, dataset_id)
        elif callable(dataset):
            self._dataset_id = None
            self._factory = dataset
        else:
            raise TypeError(
                "`dataset` must be a registered dataset id (str), a tfdata.Dataset or a "
                f"zero-argument function returning one, got {type(dataset)}"
            )
        self._epoch = 0
        self._epoch_set = False
        self._passes = 0  # passes this process made since construction or set_epoch
        # The pass being read: (its job name, the tfdata iterator), for state_dict.
        self._live: Optional[tuple[Optional[str], Any]] = None
        # A loaded state the next pass starts from: its job name and reader checkpoint.
        self._pending: Optional[dict] = None
        # A deterministic pass's reader: its consumer index and count, rank,
        # world size, DataLoader workers and lanes (state_dict records them).
        self._pass_consumer: Optional[dict] = None
        # The last pass, once it ended: its job name and its reader's final
        # checkpoint (or why there is none), until the next pass starts. The
        # other readers of a shared job may still be reading that epoch.
        self._ended: Optional[tuple[Optional[str], Any]] = None

    # ---- Configuration ----

    @property
    def job_name(self) -> Optional[str]:
        return self._job_name

    @property
    def processing_mode(self) -> str:
        return self._mode

    def set_epoch(self, epoch: int) -> None:
        """Reads epoch ``epoch`` (job ``"<job_name>/epoch-<epoch>"``) on the next
        pass, and the ones after it on later passes of this process. Call it
        in the main process before each epoch, with the same value on every rank."""
        epoch = _check_index("epoch", epoch)
        if epoch is None or epoch < 0:
            raise ValueError(f"`epoch` must be a non-negative integer, got {epoch!r}")
        self._epoch = epoch
        self._epoch_set = True
        self._passes = 0

    def rank_and_world_size(self) -> tuple[int, int]:
        """This trainer's ``(rank, world_size)``: as given, else
        ``torch.distributed``'s if initialized, else ``(0, 1)``."""
        detected = _distributed_rank_and_world_size()
        rank, world_size = self._rank, self._world_size
        if rank is None:
            rank = detected[0] if detected else 0
        if world_size is None:
            world_size = detected[1] if detected else 1
        if not 0 <= rank < world_size:
            raise ValueError(f"tfdata.torch: rank {rank} is not in [0, {world_size})")
        return rank, world_size

    def __getstate__(self) -> dict:
        # Pickled in the main process (spawn/forkserver DataLoader workers):
        # fix rank and world size there, where torch.distributed is set up.
        state = self.__dict__.copy()
        state["_live"] = None  # a reader is not copied; each process makes its own
        state["_ended"] = None
        state["_pass_consumer"] = None
        detected = _distributed_rank_and_world_size()
        if detected is not None:
            if state["_rank"] is None:
                state["_rank"] = detected[0]
            if state["_world_size"] is None:
                state["_world_size"] = detected[1]
        return state

    # ---- Reading ----

    def _reader_dataset_id(self) -> str:
        if self._factory is None:
            return self._dataset_id
        pid = os.getpid()
        if self._registered is None or self._registered[0] != pid:
            dataset = self._factory()
            if not isinstance(dataset, Dataset):
                raise TypeError(
                    f"tfdata.torch: the dataset factory must return a tfdata.Dataset, got {type(dataset)}"
                )
            registered = _service.register_dataset(self._service, dataset, self._compression, self._register_id)
            self._registered = (pid, registered)
        return self._registered[1]

    def _pass_job_name(self, worker_info, world_size: int) -> Optional[str]:
        """The job name of this pass (and counts the pass)."""
        epoch = self._epoch + self._passes
        self._passes += 1
        if self._job_name is None or self._read_kwargs["cross_trainer_cache"] is not None:
            return self._job_name
        name = f"{self._job_name}/epoch-{epoch}"
        if not self._epoch_set and world_size == 1 and worker_info is not None:
            # One trainer, no set_epoch: the DataLoader's seed of this pass is
            # the same in all its workers and new in each (non-persistent) pass.
            name = f"{self._job_name}/loader-{worker_info.seed - worker_info.id}/epoch-{epoch}"
        return name

    def reader_options(self) -> dict:
        """The reading options of this process's next pass: ``job_name``,
        ``consumer_index``, ``num_consumers`` (as for ``from_dataset_id``) and
        ``num_readers`` (ranks x DataLoader workers). Counts a pass."""
        info = torch.utils.data.get_worker_info()
        worker_id, num_workers = (info.id, info.num_workers) if info is not None else (0, 1)
        rank, world_size = self.rank_and_world_size()
        options = {"job_name": self._pass_job_name(info, world_size),
                   "consumer_index": None, "num_consumers": None,
                   "num_readers": world_size * num_workers}
        if self._coordinated or self._deterministic is not None:
            options["consumer_index"], options["num_consumers"] = consumer_assignment(
                rank, world_size, worker_id, num_workers)
        if self._deterministic is not None:
            _check_lanes_divide(self._num_lanes, world_size, num_workers)
            options["reader_position"] = {"rank": rank, "world_size": world_size,
                                          "num_workers": num_workers}
            # The deterministic read's epoch: this pass's (not the fresh
            # reader's iteration count, which is 0 in every pass).
            options["epoch"] = self._epoch + self._passes - 1
        elif not self._coordinated and options["job_name"] is None and world_size * num_workers > 1:
            raise ValueError(
                f"tfdata.torch: {world_size * num_workers} readers ({world_size} rank(s) x "
                f"{num_workers} DataLoader worker(s)) without a `job_name` would each read the "
                "whole dataset; give a `job_name` shared by all of them"
            )
        return options

    def __iter__(self) -> Iterator:
        options = self.reader_options()
        single_reader = options.pop("num_readers") == 1
        position = options.pop("reader_position", None)
        epoch = options.pop("epoch", None)
        pending, self._pending = self._pending, None
        self._ended = None
        self._pass_consumer = None
        if self._deterministic is not None:
            # Who reads this pass, for state_dict (and for merge_state_dicts).
            self._pass_consumer = {"merged": False, "num_lanes": self._num_lanes,
                                   "consumer_index": options["consumer_index"],
                                   "num_consumers": options["num_consumers"], **position}
        if pending is not None:
            options["job_name"] = pending["job_name"]  # the job the state was taken in
            if self._deterministic is not None:
                _check_restorable(pending.get("deterministic"), self._pass_consumer)
        reader = _service.from_dataset_id(
            self._mode, self._service, self._reader_dataset_id(), **options, **self._read_kwargs,
            **(self._deterministic or {}))
        iterator = iter(reader)
        if pending is not None:
            iterator.restore(pending["reader"])  # its epoch is the checkpoint's
        elif epoch:
            iterator.start_epoch(epoch)
        self._live = (options["job_name"], iterator)
        return self._generate(iterator, options["job_name"], single_reader=single_reader,
                              restored=pending is not None)

    def _generate(self, iterator, job_name, *, single_reader, restored) -> Iterator:
        convert = to_torch if self._to_tensors else (lambda x: x)
        count = 0
        try:
            for element in iterator:
                count += 1
                yield convert(element)
            try:
                final = iterator.checkpoint()
            except Exception as e:  # noqa: BLE001 -- raised again by state_dict()
                final = e
            self._ended = (job_name, final)
        finally:
            if self._live is not None and self._live[1] is iterator:
                self._live = None
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
        if count == 0 and single_reader and job_name is not None and not restored:
            warnings.warn(
                f"tfdata.torch: job {job_name!r} gave this reader no elements. If an earlier pass "
                "used the same job name (it is finished), call `set_epoch(epoch)` before each "
                "epoch, with the same value on every rank.",
                RuntimeWarning,
                stacklevel=2,
            )

    # ---- Checkpoints (torchdata's StatefulDataLoader protocol) ----

    def state_dict(self) -> dict:
        """Where this process's reader is: during a pass, and after it until
        the next one starts, the pass's job name and the reader's checkpoint,
        so that :meth:`load_state_dict` continues after the last element
        yielded (a reader of a shared job that has seen the end still
        restores with the others, and reads whatever of the epoch they had
        not consumed); before the first pass, the epoch it reads. Raises
        ``FailedPreconditionError`` for a read a reader checkpoint does not
        cover."""
        state = {"format": _STATE_FORMAT, "epoch": self._epoch, "epoch_set": self._epoch_set}
        if self._live is not None or self._ended is not None:
            if self._live is not None:
                job_name, iterator = self._live
                reader = iterator.checkpoint()
            else:
                job_name, reader = self._ended
                if isinstance(reader, Exception):
                    raise reader
            # The pass is counted again when it is restored.
            state.update(passes=self._passes - 1, job_name=job_name, reader=reader)
            if self._pass_consumer is not None:
                state["deterministic"] = dict(self._pass_consumer)
        elif self._pending is not None:
            state.update(passes=self._passes, **self._pending)
        else:
            state["passes"] = self._passes
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continues from ``state`` (from :meth:`state_dict`): the next pass
        reads the job the state was taken in, restored from its reader
        checkpoint before its first element."""
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise ValueError(f"tfdata.torch: not a DistributedIterableDataset state (format {_STATE_FORMAT}): {state!r:.200}")
        epoch, passes = _check_index("epoch", state.get("epoch")), _check_index("passes", state.get("passes"))
        if epoch is None or passes is None or epoch < 0 or passes < 0:
            raise ValueError(f"tfdata.torch: a state with epoch {state.get('epoch')!r} and passes {state.get('passes')!r}")
        reader = state.get("reader")
        if reader is not None and not isinstance(reader, bytes):
            raise ValueError(f"tfdata.torch: the state's reader checkpoint must be bytes, got {type(reader)}")
        taken_by = state.get("deterministic")
        if reader is not None:
            self._check_loadable(taken_by)
        self._epoch, self._passes, self._epoch_set = epoch, passes, bool(state.get("epoch_set"))
        self._pending = None if reader is None else {"job_name": state.get("job_name"), "reader": reader}
        if taken_by is not None and reader is not None:
            self._pending["deterministic"] = dict(taken_by)

    def _check_loadable(self, taken_by: Optional[dict]) -> None:
        """Refuses, before any reading, a state this dataset cannot continue:
        an ordinary read's state for a deterministic read or the other way
        round, other lanes, or one reader's state of another world size."""
        if (taken_by is None) != (self._deterministic is None):
            kind = "an ordinary" if taken_by is None else "a deterministic"
            raise ValueError(
                f"tfdata.torch: this is the state of {kind} read; this dataset was made with "
                f"deterministic={self._deterministic is not None}: give it the same setting")
        if taken_by is None:
            return
        if not isinstance(taken_by, dict) or taken_by.get("num_lanes") != self._num_lanes:
            raise ValueError(
                f"tfdata.torch: the state was taken with num_lanes={_get(taken_by, 'num_lanes')!r}; "
                f"this dataset has num_lanes={self._num_lanes}: a deterministic read's order depends "
                "on its lanes, so it restores only with the same number")
        if not taken_by.get("merged"):
            _, world_size = self.rank_and_world_size()
            if taken_by.get("world_size") != world_size:
                raise ValueError(_unmerged_message(taken_by, f"this trainer has world size {world_size}"))

    @property
    def deterministic(self) -> bool:
        return self._deterministic is not None

    def __repr__(self) -> str:
        source = self._dataset_id if self._factory is None else getattr(self._factory, "__name__", "factory")
        return (f"<DistributedIterableDataset dataset={source!r} processing_mode={self._mode!r} "
                f"job_name={self._job_name!r} coordinated_reads={self._coordinated} "
                f"deterministic={self._deterministic is not None}>")
