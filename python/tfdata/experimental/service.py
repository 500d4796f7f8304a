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
import enum
import os
from typing import Any, Callable, Optional

from tfdata import _native, errors
from tfdata.dataset import Dataset, DistributedDataset

COMPRESSION_AUTO = "AUTO"
COMPRESSION_NONE = None
COMPRESSION_SNAPPY = "SNAPPY"
_PARALLEL_EPOCHS = "parallel_epochs"
_DISTRIBUTED_EPOCH = "distributed_epoch"
_DEFAULT_PROTOCOL = "grpc"


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


def _check_int(name: str, value, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise TypeError(f"`{name}` must be an integer, but `{name}` was of type {type(value)}. {name}={value!r}")

_SECURITY_DOC = """
    Transport security (tfdata's own, keyword-only; docs/security.md). The
    default, plaintext without a token, is what TensorFlow peers speak:
      tls_cert, tls_key: The server's certificate chain and private key
        (PEM files); with ``tls_ca``, the server serves TLS only.
      tls_ca: The CA bundle (PEM) that peers' certificates must chain to:
        the servers this one calls, and its clients with
        ``tls_require_client_cert``.
      tls_require_client_cert: Mutual TLS: refuse clients without a
        certificate signed by ``tls_ca``.
      tls_client_cert, tls_client_key: The certificate presented to servers
        that require one; default ``tls_cert``/``tls_key``.
      auth_token_file: A file holding the shared bearer token every call
        must carry (and this server sends on its own calls).
      auth_token: The token itself (never shown by ``repr``).
"""


def _security_settings(tls_cert, tls_key, tls_ca, tls_require_client_cert, tls_client_cert,
                       tls_client_key, auth_token_file, auth_token) -> Optional[dict]:
    """The security keywords as the native servers take them; ``None`` when
    none is set (plaintext)."""
    settings = {
        "tls_cert": tls_cert,
        "tls_key": tls_key,
        "tls_ca": tls_ca,
        "tls_client_cert": tls_client_cert,
        "tls_client_key": tls_client_key,
        "auth_token_file": auth_token_file,
    }
    for name, value in settings.items():
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"`{name}` must be a path (str or os.PathLike), but was {type(value)}")
    settings = {k: os.fspath(v) for k, v in settings.items() if v is not None}
    if tls_require_client_cert:
        settings["tls_require_client_cert"] = True
    if auth_token is not None:
        if not isinstance(auth_token, str):
            raise TypeError(f"`auth_token` must be a str, but was {type(auth_token)}")
        settings["auth_token"] = auth_token
    return settings or None


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
    ):
        if protocol is None:
            protocol = _DEFAULT_PROTOCOL
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
        self._security = _security_settings(
            tls_cert, tls_key, tls_ca, tls_require_client_cert, tls_client_cert, tls_client_key,
            auth_token_file, auth_token)
        return self

    @property
    def client_timeout_ms(self) -> Optional[int]:
        return self._client_timeout_ms

    @property
    def gc_dynamic_sharding_jobs(self) -> bool:
        return self._gc_dynamic_sharding_jobs


DispatcherConfig.__doc__ += _SECURITY_DOC


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
            _check_int(name, getattr(config, name))
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
        self._security = _security_settings(
            tls_cert, tls_key, tls_ca, tls_require_client_cert, tls_client_cert, tls_client_key,
            auth_token_file, auth_token)
        return self

    @property
    def worker_tags(self) -> list:
        return self._worker_tags

    @property
    def element_stream(self) -> bool:
        return self._element_stream


WorkerConfig.__doc__ += _SECURITY_DOC


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
            _check_int(name, getattr(config, name))
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


class ShardingPolicy(enum.IntEnum):
    """How a dataset is sharded among workers (TensorFlow's ``ShardingPolicy``).

    OFF: every worker produces the whole dataset ("parallel_epochs").
    DYNAMIC: workers share one pass, split at runtime ("distributed_epoch").
    FILE, DATA, FILE_OR_DATA, HINT: static sharding by files, by elements,
    by files else elements, or at ``shard(SHARD_HINT, ...)`` placeholders
    (these need the dispatcher's ``worker_addresses``).
    """

    OFF = 0
    DYNAMIC = 1
    FILE = 2
    DATA = 3
    FILE_OR_DATA = 4
    HINT = 5


_POLICY_NAMES = {
    ShardingPolicy.OFF: "parallel_epochs",
    ShardingPolicy.DYNAMIC: "distributed_epoch",
    ShardingPolicy.FILE: "FILE",
    ShardingPolicy.DATA: "DATA",
    ShardingPolicy.FILE_OR_DATA: "FILE_OR_DATA",
    ShardingPolicy.HINT: "HINT",
}


class CrossTrainerCache:
    """Lets trainers sharing a job read one cache of its elements
    (TensorFlow's ``CrossTrainerCache``); requires a ``job_name``."""

    def __init__(self, trainer_id):
        if not trainer_id:
            raise ValueError("tf.data service cross-trainer cache requires a non-empty trainer ID.")
        self.trainer_id = trainer_id


def _get_validated_sharding_policy(processing_mode) -> ShardingPolicy:
    if isinstance(processing_mode, ShardingPolicy):
        return processing_mode
    if processing_mode == _PARALLEL_EPOCHS:
        return ShardingPolicy.OFF
    if processing_mode == _DISTRIBUTED_EPOCH:
        return ShardingPolicy.DYNAMIC
    raise ValueError(
        "tf.data service processing mode should be a "
        "`tf.data.experimental.service.ShardingPolicy`, "
        '`"parallel_epochs"`, or `"distributed_epoch"`. Got '
        f"{processing_mode!r}."
    )


def _validate_job_name(job_name) -> None:
    if job_name is None:
        return
    if not isinstance(job_name, str):
        raise ValueError(
            "`job_name` must be a string, but `job_name` was of type "
            f"{type(job_name)}. job_name={job_name}"
        )
    if not job_name:
        raise ValueError("`job_name` must not be empty")


def _validate_compression(compression) -> None:
    valid = [COMPRESSION_AUTO, COMPRESSION_NONE, COMPRESSION_SNAPPY]
    if compression not in valid:
        raise ValueError(f"Invalid `compression` argument: {compression}. Must be one of {valid}.")


def _compression_name(compression) -> str:
    return "NONE" if compression is None else compression


def _parse_service(service) -> tuple[str, str]:
    if isinstance(service, tuple):
        protocol, address = service
        return protocol, address
    if not isinstance(service, str):
        raise ValueError(
            "`service` must be a string, but `service` was of type "
            f"{type(service)}. service={service}"
        )
    if not service:
        raise ValueError("`service` must not be empty")
    parts = service.split("://")
    if len(parts) == 2:
        return parts[0], parts[1]
    if len(parts) == 1:
        return _DEFAULT_PROTOCOL, parts[0]
    raise ValueError(f"Malformed `service` string has multiple '://': {service}.")


def _read_options(
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
) -> dict:
    policy = _get_validated_sharding_policy(processing_mode)
    protocol, address = _parse_service(service)
    _validate_job_name(job_name)
    if (consumer_index is None) != (num_consumers is None):
        # TensorFlow 2.21 means to raise this too, but its check is a chained
        # comparison that is never true; a reader with one of the two is an error.
        raise ValueError(
            "Must either set both `consumer_index` and `num_consumers`, or neither. "
            f"consumer_index={consumer_index}, num_consumers={num_consumers}"
        )
    if num_consumers is not None and job_name is None:
        raise ValueError(
            "`job_name` must be set when setting `num_consumers`. "
            f"num_consumers was set to {num_consumers}."
        )
    for name, value in (
        ("consumer_index", consumer_index),
        ("num_consumers", num_consumers),
        ("max_outstanding_requests", max_outstanding_requests),
        ("dispatcher_timeout_ms", dispatcher_timeout_ms),
        ("task_refresh_interval_hint_ms", task_refresh_interval_hint_ms),
    ):
        _check_int(name, value)
    if cross_trainer_cache is not None and not isinstance(cross_trainer_cache, CrossTrainerCache):
        raise TypeError(
            "`cross_trainer_cache` must be a `tfdata.experimental.service.CrossTrainerCache`, "
            f"got {type(cross_trainer_cache)}"
        )
    if not isinstance(target_workers, str):
        raise TypeError(f"`target_workers` must be a string, got {type(target_workers)}")
    if target_workers.upper() not in ("AUTO", "ANY", "LOCAL", ""):
        raise ValueError(
            f"Invalid `target_workers` argument: {target_workers}. Must be one of AUTO, ANY, LOCAL."
        )
    if max_outstanding_requests is not None and max_outstanding_requests == -1:
        max_outstanding_requests = None  # AUTOTUNE
    return {
        "processing_mode": _POLICY_NAMES[policy],
        "service": f"{protocol}://{address}",
        "job_name": job_name,
        "consumer_index": consumer_index,
        "num_consumers": num_consumers,
        "max_outstanding_requests": max_outstanding_requests,
        "data_transfer_protocol": data_transfer_protocol,
        "trainer_id": None if cross_trainer_cache is None else str(cross_trainer_cache.trainer_id),
        "target_workers": target_workers,
        "dispatcher_timeout_ms": dispatcher_timeout_ms,
        "task_refresh_interval_ms": task_refresh_interval_hint_ms,
    }


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
    """
    # What TensorFlow checks here; the rest (`service` included) is checked
    # when the transformation is applied, as in TensorFlow.
    _get_validated_sharding_policy(processing_mode)
    _validate_compression(compression)
    _validate_job_name(job_name)

    def _apply_fn(dataset: Dataset) -> DistributedDataset:
        native_dataset = _native_of(dataset)
        options = _read_options(
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
        )
        native = _native.distribute(native_dataset, _compression_name(compression), options)
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
    _validate_compression(compression)
    protocol, address = _parse_service(service)
    if dataset_id is not None:
        dataset_id = dataset_id.decode() if isinstance(dataset_id, bytes) else str(dataset_id)
    return _native.register_dataset(
        f"{protocol}://{address}", _native_of(dataset), _compression_name(compression), dataset_id
    )


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
) -> DistributedDataset:
    """Reads a dataset registered earlier (by this or any client, TensorFlow's
    included) by its id (TensorFlow's ``from_dataset_id``).

    An unknown ``dataset_id`` raises ``NotFoundError`` (without an
    ``element_spec``, one that is also the ``ValueError`` TensorFlow raises)."""
    _validate_job_name(job_name)
    options = _read_options(
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
