"""The read options of ``distribute`` and ``from_dataset_id`` (and the
types they take: ``ShardingPolicy``, ``CrossTrainerCache``): TensorFlow's
argument checks, with its messages, and the dictionary the native reader
takes. ``tfdata.experimental.service`` exports the public names."""

from __future__ import annotations

import enum

from tfdata.experimental import _deterministic

COMPRESSION_AUTO = "AUTO"
COMPRESSION_NONE = None
COMPRESSION_SNAPPY = "SNAPPY"
_PARALLEL_EPOCHS = "parallel_epochs"
_DISTRIBUTED_EPOCH = "distributed_epoch"
DEFAULT_PROTOCOL = "grpc"


def check_int(name: str, value, *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) and not hasattr(value, "__index__"):
        raise TypeError(f"`{name}` must be an integer, but `{name}` was of type {type(value)}. {name}={value!r}")


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


POLICY_NAMES = {
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


def get_validated_sharding_policy(processing_mode) -> ShardingPolicy:
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


def validate_job_name(job_name) -> None:
    if job_name is None:
        return
    if not isinstance(job_name, str):
        raise ValueError(
            "`job_name` must be a string, but `job_name` was of type "
            f"{type(job_name)}. job_name={job_name}"
        )
    if not job_name:
        raise ValueError("`job_name` must not be empty")


def validate_compression(compression) -> None:
    valid = [COMPRESSION_AUTO, COMPRESSION_NONE, COMPRESSION_SNAPPY]
    if compression not in valid:
        raise ValueError(f"Invalid `compression` argument: {compression}. Must be one of {valid}.")


CACHE_AUTO = "auto"


def validate_cache(cache, deterministic) -> bool:
    """``distribute``'s ``cache`` (tfdata's own): ``None`` or ``"auto"``;
    whether the job asks for autocache."""
    if cache is None:
        return False
    if not isinstance(cache, str) or cache != CACHE_AUTO:
        raise ValueError(f'Invalid `cache` argument: {cache!r}. Must be None or "auto".')
    if deterministic:
        raise ValueError(
            '`cache="auto"` cannot be combined with `deterministic=True`: a deterministic '
            "read's order is its contract, and a cache written by the workers in the order "
            "they finished has none")
    return True


def compression_name(compression) -> str:
    return "NONE" if compression is None else compression


def parse_service(service) -> tuple[str, str]:
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
        return DEFAULT_PROTOCOL, parts[0]
    raise ValueError(f"Malformed `service` string has multiple '://': {service}.")


def read_options(
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
) -> dict:
    """The read options the native reader takes; ``deterministic`` holds the
    deterministic-read keywords of ``distribute`` (``_deterministic_keywords``)."""
    policy = get_validated_sharding_policy(processing_mode)
    protocol, address = parse_service(service)
    validate_job_name(job_name)
    if (consumer_index is None) != (num_consumers is None):
        # TensorFlow 2.21 means to raise this too, but its check is a chained
        # comparison that is never true; a reader with one of the two is an error.
        raise ValueError(
            "Must either set both `consumer_index` and `num_consumers`, or neither. "
            f"consumer_index={consumer_index}, num_consumers={num_consumers}"
        )
    deterministic = _deterministic.deterministic_options(
        POLICY_NAMES[policy], **deterministic_keywords,
        consumer_index=consumer_index, num_consumers=num_consumers,
        cross_trainer_cache=cross_trainer_cache)
    if deterministic is not None:
        # Consumer c of n of a deterministic read reads its share of the
        # lanes (the global positions c, c + n, ...), not coordinated rounds.
        consumer_index = num_consumers = None
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
        check_int(name, value)
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
        "processing_mode": POLICY_NAMES[policy],
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
        "deterministic": deterministic,
        "autocache": False,
    }


def deterministic_keywords(deterministic, num_lanes, split_shuffle_seed, reorder_window_elements,
                            reorder_window_bytes) -> dict:
    return {
        "deterministic": deterministic,
        "num_lanes": num_lanes,
        "split_shuffle_seed": split_shuffle_seed,
        "reorder_window_elements": reorder_window_elements,
        "reorder_window_bytes": reorder_window_bytes,
    }


def check_deterministic(processing_mode, consumer_index, num_consumers, cross_trainer_cache,
                        deterministic_keywords) -> None:
    """The checks of the deterministic settings alone (``distribute`` makes
    them before the transformation is applied)."""
    if (consumer_index is None) != (num_consumers is None):
        return  # read_options says what is wrong
    _deterministic.deterministic_options(
        POLICY_NAMES[get_validated_sharding_policy(processing_mode)], **deterministic_keywords,
        consumer_index=consumer_index, num_consumers=num_consumers,
        cross_trainer_cache=cross_trainer_cache)
