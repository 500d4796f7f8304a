"""``tfdata.experimental.distributed_save``, TensorFlow's
``tf.data.experimental.distributed_save``: the dispatcher's workers write a
dataset to ``path`` as a distributed snapshot in TensorFlow's format, which
``tfdata.Dataset.load`` and TensorFlow's ``tf.data.Dataset.load`` read."""

from __future__ import annotations

from typing import Optional

from tfdata import _native
from tfdata.dataset import Dataset

_COMPRESSIONS = ("AUTO", "SNAPPY", "GZIP", "ZLIB", "NONE", None, "")


def distributed_save(
    dataset: Dataset,
    path: str,
    data_service_address: str,
    compression: Optional[str] = "AUTO",
) -> None:
    """Starts writing ``dataset`` to ``path`` through the tf.data service at
    ``data_service_address`` (``host:port``, no protocol) and returns at once;
    the workers write it afterwards. The dispatcher must run in
    fault-tolerant mode and ``path`` must not exist.

    Raises:
      ValueError: if ``data_service_address`` is not a non-empty string.
      tfdata.errors.AlreadyExistsError: if the snapshot was already started
        or ``path`` exists.
      tfdata.errors.InvalidArgumentError: if the dispatcher is not in
        fault-tolerant mode, or ``dataset`` is infinite.
    """
    if not isinstance(data_service_address, str):
        raise ValueError(
            "`data_service_address` must be a string, but is a "
            f"{type(data_service_address)} ({data_service_address}"
        )
    if not data_service_address:
        raise ValueError("`data_service_address` must not be empty")
    if not isinstance(dataset, Dataset):
        raise TypeError(f"expected a `tfdata.Dataset`, got {type(dataset)}")
    if compression not in _COMPRESSIONS:
        raise ValueError(
            f"Invalid `compression` argument: {compression}. Must be one of "
            "'AUTO', 'SNAPPY', 'GZIP', 'ZLIB' or None."
        )
    if compression == "":
        compression = None
    path = str(path)
    # The address is `host:port`, as TensorFlow's op takes it.
    _native.distributed_save(f"grpc://{data_service_address}", dataset._native, path, compression)
