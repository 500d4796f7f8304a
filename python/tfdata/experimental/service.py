"""``tfdata.experimental.service``: TensorFlow's ``tf.data.experimental.service``.

Every name, argument and default is TensorFlow 2.21's, so moving a program
over means replacing ``tf.data`` with ``tfdata``::

    from tfdata.experimental import service

    dispatcher = service.DispatchServer()
    dispatcher_address = dispatcher.target.split("://")[1]
    worker = service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher_address))
    dataset = tfdata.Dataset.range(10)
    dataset = dataset.apply(service.distribute(
        processing_mode="parallel_epochs", service=dispatcher.target))
    print([a.item() for a in dataset.as_numpy_iterator()])  # [0, 1, ..., 9]

Settings only tfdata has follow TensorFlow's as keyword-only arguments.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Optional

from tfdata import _native, errors
from tfdata.experimental import _security
from tfdata.experimental import _read_options as _options
from tfdata.experimental._read_options import (  # noqa: F401 -- the public names, and TensorFlow's constants
    COMPRESSION_AUTO,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    CrossTrainerCache,
    ShardingPolicy,
)
from tfdata.dataset import Dataset, DistributedDataset

_DEFAULT_PROTOCOL = _options.DEFAULT_PROTOCOL
# Defined with the read options; public (and pickled) under this module.
ShardingPolicy.__module__ = CrossTrainerCache.__module__ = __name__


class _ServerStartError(errors.UnavailableError, RuntimeError):
    """A server could not bind its port: ``UnavailableError`` for tfdata
    callers, and the ``RuntimeError`` ("Could not start gRPC server") that
    TensorFlow raises, for code written against TensorFlow."""


class _DatasetIdNotFoundError(errors.NotFoundError, ValueError):
    """``from_dataset_id`` without an ``element_spec`` for an unknown id:
    ``NotFoundError`` for tfdata callers, and the ``ValueError`` ("Failed to
    fetch element spec ...") that TensorFlow raises."""


def _raise_start_error(error: errors.UnavailableError):
    """Raises a port that cannot be bound as TensorFlow reports it, and any
    other error as it is."""
    if "listen" not in error.message:
        raise error
    raise _ServerStartError(None, None, f"Could not start gRPC server: {error.message}") from error


def _get_time_or_placeholder(value):
    # TensorFlow's rule: None means "the runtime's default" (0 on the wire),
    # 0 is taken as 1 ms (0 would mean the default), anything else as given.
    if value == 0:
        return 1
    if value is None:
        return 0
    return value


def _http_port(config) -> Optional[int]:
    """The config's ``http_port`` (a TensorFlow config has none)."""
    port = getattr(config, "http_port", None)
    return None if port is None else int(port)


def reader_metrics() -> str:
    """This process's reader metrics (``tfdata_reader_*``: time the trainer
    waited in ``next()`` against the iterators' lifetime, elements and bytes
    received, ``next()`` latency) as Prometheus/OpenMetrics text, for the
    trainer's own metrics endpoint. docs/operations.md lists them."""
    return _native.reader_metrics()


class DispatcherConfig(
    collections.namedtuple(
        "DispatcherConfig",
        [
            "port",
            "protocol",
            "work_dir",
            "fault_tolerant_mode",
            "worker_addresses",
            "job_gc_check_interval_ms",
            "job_gc_timeout_ms",
            "worker_timeout_ms",
            "worker_max_concurrent_snapshots",
            "http_port",
        ],
    )
):
    """Configuration of a dispatcher (TensorFlow's ``DispatcherConfig``).

    Fields:
      port: The port to bind to; 0 picks a free one.
      protocol: The protocol clients and workers speak, ``"grpc"`` (default)
        or ``"grpc+local"``.
      work_dir: Where the dispatcher keeps registered datasets and, in
        fault-tolerant mode, its journal: a local directory or an object-store
        URL (``s3://``, ``gs://``, ``az://``).
      fault_tolerant_mode: Journal every state change (synced before the
        reply) and replay it after a restart. Requires ``work_dir``.
      worker_addresses: The fixed list of workers that static sharding needs.
      job_gc_check_interval_ms: How often unused jobs are looked for; ``None``
        for the default (10 minutes).
      job_gc_timeout_ms: How long a job may go unused before it is collected;
        -1 never collects; ``None`` for the default (5 minutes).
      worker_timeout_ms: How long a silent worker is waited for before it is
        considered lost; ``None`` for the default (10 minutes).
      worker_max_concurrent_snapshots: Snapshot streams one worker writes at
        once; 0 for the default.
      http_port: tfdata's own, last so TensorFlow's positional order holds:
        serve ``/metrics``, ``/healthz`` and ``/readyz`` over HTTP on this
        port (0 picks a free one; ``DispatchServer.http_port`` tells which);
        ``None`` (the default) serves none.

    tfdata's own settings are keyword-only:
      client_timeout_ms: How long a silent reader is waited for before its
        iteration is released; ``None`` for the default (5 minutes).
      gc_dynamic_sharding_jobs: Also collect unused distributed_epoch jobs.
      autocache: Autocache every job, as if each reader had asked with
        ``distribute(..., cache="auto")`` (deterministic reads excepted).
      autocache_dir: Where autocache writes its caches: a local directory or
        an object-store URL; ``None`` for ``<work_dir>/autocache``. With
        neither, autocache jobs run uncached and the status page says why.
      scaling_period_ms: How often the scaling controller decides how many
        workers the readers need (``GetScalingAdvice``, ``tfdata workers``);
        ``None`` for the default (5 seconds).
    """

    def __new__(
        cls,
        port=0,
        protocol=None,
        work_dir=None,
        fault_tolerant_mode=False,
        worker_addresses=None,
        job_gc_check_interval_ms=None,
        job_gc_timeout_ms=None,
        worker_timeout_ms=None,
        worker_max_concurrent_snapshots=0,
        http_port=None,
        *,
        client_timeout_ms=None,
        gc_dynamic_sharding_jobs=False,
        tls_cert=None,
        tls_key=None,
        tls_ca=None,
        tls_require_client_cert=False,
        tls_client_cert=None,
        tls_client_key=None,
        auth_token_file=None,
        auth_token=None,
        autocache=False,
        autocache_dir=None,
        scaling_period_ms=None,
    ):
        if protocol is None:
            protocol = _DEFAULT_PROTOCOL
        if not isinstance(autocache, bool):
            raise TypeError(f"`autocache` must be a bool, got {autocache!r} of type {type(autocache).__name__}")
        if autocache_dir is not None and (not isinstance(autocache_dir, str) or not autocache_dir):
            raise ValueError(f"`autocache_dir` must be a non-empty string or None, got {autocache_dir!r}")
        if scaling_period_ms is not None and (
                isinstance(scaling_period_ms, bool) or not isinstance(scaling_period_ms, int)
                or scaling_period_ms <= 0):
            raise ValueError(
                f"`scaling_period_ms` must be a positive int or None, got {scaling_period_ms!r}")
        job_gc_check_interval_ms = _get_time_or_placeholder(job_gc_check_interval_ms)
        job_gc_timeout_ms = _get_time_or_placeholder(job_gc_timeout_ms)
        self = super().__new__(
            cls,
            port,
            protocol,
            work_dir,
            fault_tolerant_mode,
            worker_addresses,
            job_gc_check_interval_ms,
            job_gc_timeout_ms,
            worker_timeout_ms,
            worker_max_concurrent_snapshots,
            http_port,
        )
        self._client_timeout_ms = client_timeout_ms
        self._gc_dynamic_sharding_jobs = gc_dynamic_sharding_jobs
        self._autocache = autocache
        self._autocache_dir = autocache_dir
        self._scaling_period_ms = scaling_period_ms
        self._security = _security.security_settings(
            tls_cert, tls_key, tls_ca, tls_require_client_cert, tls_client_cert, tls_client_key,
            auth_token_file, auth_token)
        return self

    @property
    def client_timeout_ms(self) -> Optional[int]:
        return self._client_timeout_ms

    @property
    def gc_dynamic_sharding_jobs(self) -> bool:
        return self._gc_dynamic_sharding_jobs

    @property
    def autocache(self) -> bool:
        return self._autocache

    @property
    def autocache_dir(self) -> Optional[str]:
        return self._autocache_dir

    @property
    def scaling_period_ms(self) -> Optional[int]:
        return self._scaling_period_ms


DispatcherConfig.__doc__ += _security.SECURITY_DOC


class _Server:
    """What DispatchServer and WorkerServer share: TensorFlow's lifecycle
    (``start``, ``join``, ``stop``, stopped when garbage-collected) plus a
    context manager."""

    _server = None

    def start(self) -> None:
        """Starts the server (when it was created with ``start=False``)."""
        self._server.start()

    def join(self) -> None:
        """Blocks until the server has shut down; Ctrl-C raises ``KeyboardInterrupt``."""
        self._server.join()

    def stop(self) -> None:
        """Stops the server."""
        self._stop()

    def _stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def __del__(self) -> None:
        # Garbage collection only starts the stop (on a thread of its own), so
        # a finalizer never waits for threads that want the GIL.
        self._server = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    @property
    def _address(self) -> str:
        return f"localhost:{self._server.port}"

    @property
    def http_port(self) -> Optional[int]:
        """The port of the admin HTTP endpoint (``/metrics``, ``/healthz``,
        ``/readyz``), or ``None`` when the config's ``http_port`` is unset."""
        return self._server.http_port


class DispatchServer(_Server):
    """An in-process tf.data service dispatcher (TensorFlow's ``DispatchServer``).

    It coordinates a cluster of :class:`WorkerServer`\\ s, which register with
    it when they start. ``join()`` blocks until the server stops (Ctrl-C
    interrupts it); ``stop()`` stops it; so does garbage collection of the
    last reference, and leaving a ``with`` block.

    Raises ``tfdata.errors.UnavailableError`` at construction when the port is
    in use (one that is also the ``RuntimeError`` TensorFlow raises),
    ``InvalidArgumentError`` for an invalid config, and (in fault-tolerant mode) ``DataLossError`` for a damaged journal.
    """

    def __init__(self, config: Optional[DispatcherConfig] = None, start: bool = True):
        config = config or DispatcherConfig()
        if config.fault_tolerant_mode and not config.work_dir:
            raise ValueError(
                "Cannot enable fault tolerant mode without configuring a work dir. "
                "Make sure to set `work_dir` in the `config` object passed to "
                "`DispatcherServer`."
            )
        for name in ("port", "job_gc_check_interval_ms", "job_gc_timeout_ms", "worker_timeout_ms",
                     "worker_max_concurrent_snapshots", "http_port"):
            _options.check_int(name, getattr(config, name))
        self._config = config
        self._server = None
        try:
            self._server = _native.DispatchServer(
                start=bool(start),
                port=int(config.port or 0),
                protocol=config.protocol or _DEFAULT_PROTOCOL,
                work_dir=config.work_dir or "",
                fault_tolerant_mode=bool(config.fault_tolerant_mode),
                worker_addresses=list(config.worker_addresses or []),
                job_gc_check_interval_ms=int(config.job_gc_check_interval_ms or 0),
                job_gc_timeout_ms=int(config.job_gc_timeout_ms or 0),
                worker_timeout_ms=int(config.worker_timeout_ms or 0),
                worker_max_concurrent_snapshots=int(config.worker_max_concurrent_snapshots or 0),
                client_timeout_ms=int(getattr(config, "client_timeout_ms", None) or 0),
                gc_dynamic_sharding_jobs=bool(getattr(config, "gc_dynamic_sharding_jobs", False)),
                http_port=_http_port(config),
                security=getattr(config, "_security", None),
                autocache=bool(getattr(config, "autocache", False)),
                autocache_dir=getattr(config, "autocache_dir", None),
                scaling_period_ms=getattr(config, "scaling_period_ms", None),
            )
        except errors.UnavailableError as e:
            _raise_start_error(e)

    @property
    def target(self) -> str:
        """The ``service`` to give ``distribute``: ``"grpc://localhost:<port>"``."""
        return f"{self._config.protocol}://localhost:{self._server.port}"

    def _num_workers(self) -> int:
        return self._server.num_workers()


class WorkerConfig(
    collections.namedtuple(
        "WorkerConfig",
        [
            "dispatcher_address",
            "worker_address",
            "port",
            "protocol",
            "heartbeat_interval_ms",
            "dispatcher_timeout_ms",
            "data_transfer_protocol",
            "data_transfer_address",
            "http_port",
        ],
    )
):
    """Configuration of a worker (TensorFlow's ``WorkerConfig``).

    Fields:
      dispatcher_address: The dispatcher's ``host:port`` (no protocol).
      worker_address: The address the worker advertises; the first
        ``%port%`` becomes its port. Defaults to ``"localhost:%port%"``.
      port: The port to bind to; 0 picks a free one.
      protocol: ``"grpc"`` (default) or ``"grpc+local"``.
      heartbeat_interval_ms: How often the worker heartbeats; ``None`` for the
        default (30 s).
      dispatcher_timeout_ms: How long requests to the dispatcher are retried;
        ``None`` for the default (1 hour).
      data_transfer_protocol: Only gRPC (``None``) is served.
      data_transfer_address: Unused with gRPC.
      http_port: tfdata's own, last so TensorFlow's positional order holds:
        serve ``/metrics``, ``/healthz`` and ``/readyz`` over HTTP on this
        port (0 picks a free one; ``WorkerServer.http_port`` tells which);
        ``None`` (the default) serves none.

    tfdata's own settings are keyword-only:
      worker_tags: Tags for the dispatcher (``"COLOCATED"`` matters to readers).
      element_stream: Serve tfdata's own element stream to tfdata readers
        (default True; TensorFlow readers use ``GetElement`` either way).
    """

    def __new__(
        cls,
        dispatcher_address,
        worker_address=None,
        port=0,
        protocol=None,
        heartbeat_interval_ms=None,
        dispatcher_timeout_ms=None,
        data_transfer_protocol=None,
        data_transfer_address=None,
        http_port=None,
        *,
        worker_tags=None,
        element_stream=True,
        tls_cert=None,
        tls_key=None,
        tls_ca=None,
        tls_require_client_cert=False,
        tls_client_cert=None,
        tls_client_key=None,
        auth_token_file=None,
        auth_token=None,
    ):
        if worker_address is None:
            worker_address = "localhost:%port%"
        if protocol is None:
            protocol = _DEFAULT_PROTOCOL
        if data_transfer_address is None:
            data_transfer_address = "localhost:%dts_port%"
        heartbeat_interval_ms = _get_time_or_placeholder(heartbeat_interval_ms)
        dispatcher_timeout_ms = _get_time_or_placeholder(dispatcher_timeout_ms)
        self = super().__new__(
            cls,
            dispatcher_address,
            worker_address,
            port,
            protocol,
            heartbeat_interval_ms,
            dispatcher_timeout_ms,
            data_transfer_protocol,
            data_transfer_address,
            http_port,
        )
        self._worker_tags = list(worker_tags or [])
        self._element_stream = bool(element_stream)
        self._security = _security.security_settings(
            tls_cert, tls_key, tls_ca, tls_require_client_cert, tls_client_cert, tls_client_key,
            auth_token_file, auth_token)
        return self

    @property
    def worker_tags(self) -> list:
        return self._worker_tags

    @property
    def element_stream(self) -> bool:
        return self._element_stream


WorkerConfig.__doc__ += _security.SECURITY_DOC


class WorkerServer(_Server):
    """An in-process tf.data service worker (TensorFlow's ``WorkerServer``).

    It registers with its dispatcher, runs the tasks it is given and serves
    their elements. Python functions registered in this process
    (:func:`tfdata.register_function`) run in its pipelines.
    """

    def __init__(self, config: WorkerConfig, start: bool = True):
        if config.dispatcher_address is None:
            raise ValueError(
                "Must specify a `dispatcher_address` in the `config` passed "
                "to `WorkerServer`."
            )
        if not isinstance(config.dispatcher_address, str):
            raise TypeError(
                "`dispatcher_address` must be a string, but was of type "
                f"{type(config.dispatcher_address)}"
            )
        for name in ("port", "heartbeat_interval_ms", "dispatcher_timeout_ms", "http_port"):
            _options.check_int(name, getattr(config, name))
        self._config = config
        self._server = None
        try:
            self._server = _native.WorkerServer(
                start=bool(start),
                dispatcher_address=config.dispatcher_address,
                worker_address=config.worker_address or "localhost:%port%",
                port=int(config.port or 0),
                protocol=config.protocol or _DEFAULT_PROTOCOL,
                heartbeat_interval_ms=int(config.heartbeat_interval_ms or 0),
                dispatcher_timeout_ms=int(config.dispatcher_timeout_ms or 0),
                data_transfer_protocol=config.data_transfer_protocol or "",
                data_transfer_address=config.data_transfer_address or "",
                worker_tags=list(getattr(config, "worker_tags", None) or []),
                element_stream=bool(getattr(config, "element_stream", True)),
                http_port=_http_port(config),
                security=getattr(config, "_security", None),
            )
        except errors.UnavailableError as e:
            _raise_start_error(e)


def distribute(
    processing_mode,
    service,
    job_name=None,
    consumer_index=None,
    num_consumers=None,
    max_outstanding_requests=None,
    data_transfer_protocol=None,
    compression="AUTO",
    cross_trainer_cache=None,
    target_workers="AUTO",
    *,
    dispatcher_timeout_ms=None,
    task_refresh_interval_hint_ms=None,
    deterministic=False,
    num_lanes=None,
    split_shuffle_seed=None,
    reorder_window_elements=None,
    reorder_window_bytes=None,
    cache=None,
) -> Callable[[Dataset], DistributedDataset]:
    """A transformation that moves a dataset's processing to tf.data service
    (TensorFlow's ``distribute``): ``dataset.apply(distribute(...))``.

    The dataset is registered with the dispatcher at ``service``; iterating the
    result reads its elements from the workers, as numpy arrays. Each new
    iterator is a new epoch of the job.

    tfdata's own settings (keyword-only): ``dispatcher_timeout_ms``, how long
    setup calls retry an unreachable dispatcher before raising
    ``UnavailableError`` (default 60 s); ``task_refresh_interval_hint_ms``, how
    often the reader asks the dispatcher for new tasks (default 1 s).

    Deterministic reads (tfdata's own, keyword-only; docs/python.md,
    "Deterministic reads and elastic restore"):
      deterministic: Read each epoch in one global order that depends on the
        pipeline, its seeds, the epoch and ``num_lanes`` only: not on the
        number of workers, their speed or failures, or the number of
        consumers. Requires ``processing_mode="distributed_epoch"``. Then
        ``consumer_index``/``num_consumers`` (``num_consumers`` dividing
        ``num_lanes``; no ``job_name`` needed) make this reader consumer
        ``c`` of ``n``, which reads the global positions ``c, c + n, ...``
        (not TensorFlow's coordinated rounds), and the checkpoints of all
        consumers at one step merge (:func:`tfdata.experimental.merge_checkpoints`)
        into one that restores on any number of consumers dividing
        ``num_lanes``.
      num_lanes: The lanes each epoch's splits are dealt to (split ``i`` of
        the order to lane ``i % num_lanes``); 1 to 4096, default 24. Part of
        the order: a read restores only with the same value.
      split_shuffle_seed: Deal the splits in a seeded permutation of their
        order, new in each epoch (needs a known number of splits); default
        the split providers' order.
      reorder_window_elements, reorder_window_bytes: The bound on elements
        (and their bytes) the reader holds while it waits for the next one in
        order; default the client's.
    Without ``deterministic=True`` these settings are a ``ValueError``.

    Autocache (tfdata's own, keyword-only; docs/python.md, "Autocache"):
      cache: ``"auto"`` lets the service cache this job's elements where it
        pays: the first epoch measures the pipeline's cost per element at
        each point it may cache (the deterministic prefix: no unseeded
        random op, no reshuffling ``shuffle``, no Python function not
        registered with ``deterministic=True``), the dispatcher writes the
        cheapest point's elements while the epoch runs, and later jobs over
        the same prefix read them instead. ``None`` (the default) asks for
        nothing (a dispatcher started with ``autocache`` caches every job).
        Anything else is a ``ValueError``, and so is ``"auto"`` with
        ``deterministic=True`` (its order is the contract; a cache has none).
    """
    # What TensorFlow checks here; the rest (`service` included) is checked
    # when the transformation is applied, as in TensorFlow.
    _options.get_validated_sharding_policy(processing_mode)
    _options.validate_compression(compression)
    _options.validate_job_name(job_name)
    deterministic_keywords = _options.deterministic_keywords(
        deterministic, num_lanes, split_shuffle_seed, reorder_window_elements, reorder_window_bytes)
    # The deterministic settings are checked now too: most of their errors
    # are about the processing mode, which TensorFlow checks here.
    _options.check_deterministic(processing_mode, consumer_index, num_consumers,
                                 cross_trainer_cache, deterministic_keywords)
    autocache = _options.validate_cache(cache, deterministic)

    def _apply_fn(dataset: Dataset) -> DistributedDataset:
        native_dataset = _native_of(dataset)
        options = _options.read_options(
            processing_mode,
            service,
            job_name,
            consumer_index,
            num_consumers,
            max_outstanding_requests,
            data_transfer_protocol,
            cross_trainer_cache,
            target_workers,
            dispatcher_timeout_ms,
            task_refresh_interval_hint_ms,
            deterministic_keywords,
        )
        options["autocache"] = autocache
        native = _native.distribute(native_dataset, _options.compression_name(compression), options)
        return DistributedDataset._from_native(native)

    return _apply_fn


def _native_of(dataset) -> Any:
    if not isinstance(dataset, Dataset):
        raise TypeError(f"expected a `tfdata.Dataset`, got {type(dataset)}")
    return dataset._native


def register_dataset(service, dataset, compression="AUTO", dataset_id=None) -> str:
    """Registers ``dataset`` with the dispatcher at ``service`` and returns its id
    (a string). With a ``dataset_id`` that is already registered, the existing
    dataset is kept (the same dataset: a different one under that id is
    ``InvalidArgumentError``)."""
    _options.validate_compression(compression)
    protocol, address = _options.parse_service(service)
    if dataset_id is not None:
        dataset_id = dataset_id.decode() if isinstance(dataset_id, bytes) else str(dataset_id)
    return _native.register_dataset(
        f"{protocol}://{address}", _native_of(dataset), _options.compression_name(compression),
        dataset_id)


def from_dataset_id(
    processing_mode,
    service,
    dataset_id,
    element_spec=None,
    job_name=None,
    consumer_index=None,
    num_consumers=None,
    max_outstanding_requests=None,
    data_transfer_protocol=None,
    cross_trainer_cache=None,
    target_workers="AUTO",
    *,
    dispatcher_timeout_ms=None,
    task_refresh_interval_hint_ms=None,
    deterministic=False,
    num_lanes=None,
    split_shuffle_seed=None,
    reorder_window_elements=None,
    reorder_window_bytes=None,
) -> DistributedDataset:
    """Reads a dataset registered earlier (by this or any client, TensorFlow's
    included) by its id (TensorFlow's ``from_dataset_id``).

    An unknown ``dataset_id`` raises ``NotFoundError`` (without an
    ``element_spec``, one that is also the ``ValueError`` TensorFlow raises).

    The keyword-only settings are those of :func:`distribute`.
    """
    _options.validate_job_name(job_name)
    options = _options.read_options(
        processing_mode,
        service,
        job_name,
        consumer_index,
        num_consumers,
        max_outstanding_requests,
        data_transfer_protocol,
        cross_trainer_cache,
        target_workers,
        dispatcher_timeout_ms,
        task_refresh_interval_hint_ms,
        _options.deterministic_keywords(
            deterministic, num_lanes, split_shuffle_seed, reorder_window_elements,
            reorder_window_bytes),
    )
    dataset_id = dataset_id.decode() if isinstance(dataset_id, bytes) else str(dataset_id)
    try:
        native = _native.from_dataset_id(dataset_id, element_spec or None, options)
    except errors.NotFoundError as e:
        if element_spec:
            raise
        raise _DatasetIdNotFoundError(
            None,
            None,
            f"Failed to fetch element spec for dataset id {dataset_id} from "
            "tf.data service. If the dataset was registered in graph mode or "
            "inside a tf.function, the `element_spec` must be specified as an "
            f"argument to `from_dataset_id`. ({e.message})",
        ) from e
    if native.element_spec() is None:
        raise ValueError(
            f"Failed to fetch element spec for dataset id {dataset_id} from "
            "tf.data service. If the dataset was registered in graph mode or "
            "inside a tf.function, the `element_spec` must be specified as an "
            "argument to `from_dataset_id`."
        )
    return DistributedDataset._from_native(native)


__all__ = [
    "reader_metrics",
    "CrossTrainerCache",
    "DispatchServer",
    "DispatcherConfig",
    "ShardingPolicy",
    "WorkerConfig",
    "WorkerServer",
    "distribute",
    "from_dataset_id",
    "register_dataset",
]
