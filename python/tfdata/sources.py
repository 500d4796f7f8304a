"""Sources of the data PyTorch and JAX teams already have: Parquet files,
Arrow IPC files, Hugging Face ``datasets`` folders, WebDataset shards and
ArrayRecord files, read by tfdata's Rust engine (locally, or on the service's
workers after ``distribute``).

Each returns a :class:`tfdata.Dataset`. Columnar sources give one element
per row, a dict of tensors keyed by column, or with ``batch_size=N`` one
element of ``N`` rows per column, made from Arrow's column buffers without
per-row work: the fast path. Strings and binary columns are TensorFlow
strings (``bytes``). See docs/pipelines.md for types, filters and limits.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Sequence, Union

from tfdata import _native
from tfdata.dataset import Dataset, _check_int

__all__ = [
    "ArrayRecordDataset",
    "ArrowDataset",
    "HuggingFaceDataset",
    "ParquetDataset",
    "WebDataset",
]

PathLike = Union[str, bytes, "os.PathLike[str]"]


def _paths(value, what: str) -> list[str]:
    """One path or URL, or a sequence of them, as strings."""
    if isinstance(value, (str, bytes, os.PathLike)):
        value = [value]
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"`{what}` must be a path or a list of paths, got {type(value).__name__}") from None
    out = []
    for v in items:
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        if isinstance(v, bytes):
            v = v.decode()
        if not isinstance(v, str):
            raise TypeError(f"`{what}` must be paths (str or os.PathLike), got {type(v).__name__}")
        if not v:
            raise ValueError(f"`{what}` holds an empty path")
        out.append(v)
    if not out:
        raise ValueError(f"`{what}` is empty: give at least one file")
    return out


def _columns(columns, what: str = "columns") -> Optional[list[str]]:
    if columns is None:
        return None
    if isinstance(columns, str):
        columns = [columns]
    out = list(columns)
    for c in out:
        if not isinstance(c, str):
            raise TypeError(f"`{what}` must be column names (str), got {type(c).__name__}")
    if not out:
        raise ValueError(f"`{what}` is empty: give None for every column")
    return out


def _batch_size(batch_size) -> Optional[int]:
    if batch_size is None:
        return None
    n = _check_int("batch_size", batch_size)
    if n < 1:
        raise ValueError(f"`batch_size` must be a positive number of rows or None, got {n}")
    return n


def _scalar(value, what: str):
    """A declared null or padding value, as the JSON form takes it."""
    item = getattr(value, "item", None)
    if item is not None and getattr(value, "shape", None) == ():
        value = item()  # a numpy scalar
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"`{what}` values must be numbers, booleans or strings, got {type(value).__name__}")


def _values(values: Optional[Mapping[str, Any]], what: str) -> Optional[dict]:
    if values is None:
        return None
    if not isinstance(values, Mapping):
        raise TypeError(f"`{what}` must be a dict of column name to value, got {type(values).__name__}")
    return {str(k): _scalar(v, what) for k, v in values.items()}


def _filter(f):
    """pyarrow's ``filters=`` form as lists: a predicate ``(column, op,
    value)``, a list of them (and), or a list of such lists (or); or
    ``{"and": [...]}``, ``{"or": [...]}``, ``{"not": p}``. The engine checks
    the columns, operators and values."""
    if f is None:
        return None
    if isinstance(f, Mapping):
        return {k: _filter(v) if k == "not" else [_filter(x) for x in v] for k, v in f.items()}
    if isinstance(f, (list, tuple)):
        if len(f) == 3 and isinstance(f[0], str) and isinstance(f[1], str):
            column, op, value = f
            if isinstance(value, (list, tuple, set, frozenset)):
                value = [_scalar(v, "filter") for v in value]
            else:
                value = _scalar(value, "filter")
            return [column, op, value]
        return [_filter(x) for x in f]
    raise TypeError(
        "`filter` must be a predicate (column, op, value), a list of predicates (all must hold), "
        f"a list of such lists (any must hold), or an and/or/not dict; got {type(f).__name__}"
    )


def _source(op: str, **attrs) -> Dataset:
    spec = {"op": op}
    spec.update({k: v for k, v in attrs.items() if v is not None})
    native, _compress = _native.Dataset.from_json(json.dumps(spec))
    return Dataset._wrap(native)


def ParquetDataset(
    filenames: Union[PathLike, Sequence[PathLike]],
    columns: Optional[Sequence[str]] = None,
    batch_size: Optional[int] = None,
    filter=None,
    *,
    null_values: Optional[Mapping[str, Any]] = None,
    padding_values: Optional[Mapping[str, Any]] = None,
) -> Dataset:
    """The rows of Parquet files, local or on object stores (``s3://``,
    ``gs://``, ``az://``; wildcards allowed).

    * ``columns``: read and decode only these (default: all).
    * ``batch_size``: ``None`` gives one element per row; ``N`` gives ``N``
      rows per element straight from Arrow's buffers (the fast path; a
      batch never spans row groups, so a row group's last may be shorter).
    * ``filter``: pyarrow's ``filters=`` form, e.g. ``("label", ">=", 3)``,
      ``[("a", "==", 1), ("b", "<", 2)]`` (and), ``[[...], [...]]`` (or);
      row groups whose statistics rule every row out are never read, and the
      rows read are filtered exactly.
    * ``null_values`` / ``padding_values``: per column, the value that
      replaces a null, and that pads a batch's shorter lists; without them a
      null, or lists of different lengths in one batch, is an error naming
      the column.

    In ``distributed_epoch`` each row group is one split.
    """
    return _source(
        "parquet_dataset",
        filenames=_paths(filenames, "filenames"),
        columns=_columns(columns),
        batch_size=_batch_size(batch_size),
        filter=_filter(filter),
        null_values=_values(null_values, "null_values"),
        padding_values=_values(padding_values, "padding_values"),
    )


def ArrowDataset(
    filenames: Union[PathLike, Sequence[PathLike]],
    columns: Optional[Sequence[str]] = None,
    batch_size: Optional[int] = None,
    *,
    null_values: Optional[Mapping[str, Any]] = None,
    padding_values: Optional[Mapping[str, Any]] = None,
) -> Dataset:
    """The rows of Arrow IPC files or streams (``.arrow``, ``.feather``),
    as :func:`ParquetDataset` gives them."""
    return _source(
        "arrow_dataset",
        filenames=_paths(filenames, "filenames"),
        columns=_columns(columns),
        batch_size=_batch_size(batch_size),
        null_values=_values(null_values, "null_values"),
        padding_values=_values(padding_values, "padding_values"),
    )


def HuggingFaceDataset(
    path: PathLike,
    split: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    batch_size: Optional[int] = None,
) -> Dataset:
    """A Hugging Face dataset on local disk: a folder written by
    ``datasets``' ``save_to_disk`` (a ``DatasetDict``'s too, with
    ``split``), or a local Hub snapshot of Parquet files. ``Image`` and
    ``Audio`` features arrive as their encoded bytes (``decode_jpeg`` /
    ``decode_png`` apply), ``ClassLabel`` as int64. Nothing is downloaded."""
    (folder,) = _paths(path, "path")
    if split is not None and not isinstance(split, str):
        raise TypeError(f"`split` must be a string or None, got {type(split).__name__}")
    return _source(
        "huggingface_dataset",
        path=folder,
        split=split,
        columns=_columns(columns),
        batch_size=_batch_size(batch_size),
    )


def WebDataset(
    urls: Union[str, Sequence[str]],
    fields: Optional[Sequence[str]] = None,
    on_error: str = "raise",
) -> Dataset:
    """The samples of WebDataset ``.tar`` shards: brace patterns
    (``shard-{000000..000099}.tar``) as webdataset expands them; each
    sample a dict keyed by field extension (bytes; ``cls`` as int64), with
    ``__key__`` and ``__url__``. ``on_error="skip"`` skips damaged samples
    (counted) instead of raising."""
    if on_error not in ("raise", "skip"):
        raise ValueError(f'`on_error` must be "raise" or "skip", got {on_error!r}')
    return _source(
        "webdataset",
        urls=_paths(urls, "urls"),
        fields=_columns(fields, "fields"),
        on_error=on_error,
    )


def ArrayRecordDataset(filenames: Union[PathLike, Sequence[PathLike]]) -> Dataset:
    """The records of ArrayRecord files (Grain's format), as scalar strings."""
    return _source("array_record_dataset", filenames=_paths(filenames, "filenames"))
