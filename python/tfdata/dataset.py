"""``tfdata.Dataset``: TensorFlow's ``tf.data.Dataset`` over tfdata's Rust engine.

Methods, arguments and defaults are TensorFlow 2.21's. A dataset is an
immutable pipeline: every transformation returns a new one, and its
arguments are checked when it is made (``InvalidArgumentError``, as in
TensorFlow). Iterating runs the pipeline in this process and yields numpy
values; ``distribute`` runs it on tf.data service workers instead.

Functions given to ``map``, ``filter``, ``flat_map`` and ``interleave`` are
built-ins (:mod:`tfdata.functions`, which need no Python on the workers),
names registered with :func:`register_function` (in Python or Rust), or
Python callables on numpy values.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from typing import Any, Callable, Iterator, Optional

import numpy as np

from tfdata import _native
from tfdata.functions import Function

AUTOTUNE = -1
INFINITE = -1
UNKNOWN = -2

# Python functions registered in this process: by name, and the names of
# callables by identity (so `ds.map(f)` names `f` the way it was registered).
_registry_lock = threading.Lock()
_functions: dict[str, Callable] = {}
_names_by_id: dict[int, str] = {}
# Names registered with `deterministic=True`: pipelines that name them carry
# the declaration (`FunctionRef.deterministic`), which autocache needs
# before it caches after a user function (issue 36).
_deterministic_names: set[str] = set()
_anonymous = itertools.count(1)


def _filter_batched(predicate: Callable) -> Callable:
    """A batched filter as a map over batches: rows where the mask holds."""

    def apply(*columns):
        mask = np.asarray(predicate(*columns), dtype=bool)
        if mask.ndim != 1:
            raise ValueError(f"a batched predicate must return a 1-D mask, got shape {mask.shape}")
        return columns[0][mask] if len(columns) == 1 else tuple(c[mask] for c in columns)

    return apply


def register_function(name: str, fn: Optional[Callable] = None, *, deterministic: bool = False):
    """Registers ``fn`` as the pipeline function ``name`` in this process.

    A pipeline that names it (``ds.map(fn)`` after this, or ``ds.map(name)``)
    runs it wherever a worker's process registered the same name: an
    in-process :class:`~tfdata.experimental.service.WorkerServer`, or a
    standalone one (``python -m tfdata worker --import mymodule``). A worker
    that lacks it fails the task, naming it. Usable as a decorator:
    ``@tfdata.register_function("parse")``.

    ``deterministic=True`` (tfdata's own, keyword-only) declares that ``fn``
    returns the same output for the same input and keeps no hidden state:
    pipelines that use it say so (``FunctionRef.deterministic``), and the
    service's autocache (``distribute(..., cache="auto")``) may then cache
    elements computed by it. Undeclared, a Python function ends the part of
    a pipeline autocache considers, since nothing else can tell. The
    declaration is the caller's promise; tfdata does not check it.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a function name must be a non-empty string, got {name!r}")
    if ":" in name:
        raise ValueError(f"function names may not contain ':', got {name!r}")
    if not isinstance(deterministic, (bool, np.bool_)):
        raise TypeError(
            f"`deterministic` must be a bool, got {deterministic!r} of type {type(deterministic).__name__}")
    deterministic = bool(deterministic)
    if fn is None:
        return lambda f: register_function(name, f, deterministic=deterministic)
    if not callable(fn):
        raise TypeError(f"`fn` must be callable, got {type(fn)}")
    _native.register_function(name, fn)
    _native.register_function(f"{name}:filter_batched", _filter_batched(fn))
    with _registry_lock:
        _functions[name] = fn
        _names_by_id[id(fn)] = name
        # Registering a name again replaces it, declaration included.
        if deterministic:
            _deterministic_names.add(name)
        else:
            _deterministic_names.discard(name)
    return fn


def _name_of(fn: Callable) -> str:
    """The registered name of a callable, registering it anonymously if new."""
    with _registry_lock:
        name = _names_by_id.get(id(fn))
        if name is not None and _functions.get(name) is fn:
            return name
    qualname = getattr(fn, "__qualname__", type(fn).__name__)
    module = getattr(fn, "__module__", None) or "python"
    name = f"{module}.{qualname}#{next(_anonymous)}".replace(":", ".")
    register_function(name, fn)
    return name


def _function_json(fn, use: str, what: str) -> str:
    """A pipeline function in the engine's form for ``use`` ('map',
    'filter', 'flat_map' or 'filter_batched', a map over batches that tfdata
    registers beside each Python function)."""
    if isinstance(fn, Function):
        if use in ("filter", "filter_batched"):
            raise TypeError(f"`{what}`: built-in {fn.name} is not a predicate")
        return fn._to_json()
    if isinstance(fn, str):
        name = fn
    elif callable(fn):
        name = _name_of(fn)
    else:
        raise TypeError(
            f"`{what}` must be callable, a registered function name or a tfdata.functions built-in, "
            f"got {type(fn)}"
        )
    with _registry_lock:
        declared = name in _deterministic_names
    if use == "filter_batched":
        name = f"{name}:filter_batched"
    if declared:
        return json.dumps({"function": name, "deterministic": True})
    return json.dumps({"function": name})


def _check_int(name: str, value, *, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer, got {value!r} of type {type(value).__name__}")
    return int(value)


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be a bool, got {value!r} of type {type(value).__name__}")
    return bool(value)


def _seed(seed) -> Optional[int]:
    if seed is None:
        return None
    seed = _check_int("seed", seed)
    return seed & 0xFFFF_FFFF_FFFF_FFFF


def _filenames(filenames, what: str) -> list[str]:
    if isinstance(filenames, (str, bytes, np.str_)):
        filenames = [filenames]
    elif isinstance(filenames, np.ndarray):
        filenames = filenames.ravel().tolist()
    elif isinstance(filenames, Dataset):
        raise TypeError(f"`{what}`: a dataset of file names is read with `interleave`, not here")
    out = []
    for f in filenames:
        if isinstance(f, bytes):
            f = f.decode()
        if not isinstance(f, str):
            raise TypeError(f"`{what}` must be strings, got {type(f).__name__}")
        out.append(f)
    return out


def _compression_type(value) -> str:
    if value is None:
        return ""
    if value not in ("", "GZIP", "ZLIB"):
        raise ValueError(f"compression_type must be '', 'GZIP' or 'ZLIB', got {value!r}")
    return value


class Dataset:
    """A dataset pipeline (TensorFlow's ``tf.data.Dataset``).

    >>> list(tfdata.Dataset.range(5).map(lambda x: x * 2).as_numpy_iterator())
    [0, 2, 4, 6, 8]
    """

    __slots__ = ("_native",)

    def __init__(self, native):
        self._native = native

    @classmethod
    def _wrap(cls, native, *, validate: bool = True) -> "Dataset":
        if validate:
            native.validate()
        ds = Dataset.__new__(Dataset)
        ds._native = native
        return ds

    # ---- Sources ----

    @staticmethod
    def range(*args, **kwargs) -> "Dataset":
        """``range(stop)``, ``range(start, stop[, step])``: int64 scalars, or
        ``output_type``'s (as TensorFlow 2.21, which takes it and ``name``
        from the keyword arguments)."""
        if not 1 <= len(args) <= 3:
            raise ValueError(f"Invalid arguments to range: {args}")
        values = [_check_int("range argument", a) for a in args]
        start, stop, step = (0, values[0], 1) if len(values) == 1 else (values + [1])[:3]
        ds = Dataset._wrap(_native.Dataset.range(start, stop, step))
        output_type = kwargs.get("output_type")
        if output_type is not None and np.dtype(output_type).name != "int64":
            from tfdata import functions

            ds = ds.map(functions.cast(output_type))
        return ds

    @staticmethod
    def from_tensors(tensors, name=None) -> "Dataset":
        """One element: ``tensors`` (an array, a tuple or a dict of them)."""
        return Dataset._wrap(_native.Dataset.from_tensors(tensors))

    @staticmethod
    def from_tensor_slices(tensors, name=None) -> "Dataset":
        """One element per slice along the first dimension of ``tensors``."""
        return Dataset._wrap(_native.Dataset.from_tensor_slices(tensors))

    @staticmethod
    def list_files(file_pattern, shuffle=None, seed=None, name=None) -> "Dataset":
        """The files matching ``file_pattern`` (a glob or a list of them),
        shuffled unless ``shuffle=False``."""
        patterns = _filenames(file_pattern, "file_pattern")
        shuffle = True if shuffle is None else _check_bool("shuffle", shuffle)
        return Dataset._wrap(_native.Dataset.list_files(patterns, shuffle, _seed(seed)))

    @staticmethod
    def zip(*args, datasets=None, name=None) -> "Dataset":
        """Tuples of corresponding elements: ``zip(a, b)`` or ``zip((a, b))``."""
        if datasets is not None:
            if args:
                raise TypeError("Both `*args` and `datasets` cannot be set.")
            args = (datasets,)
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            args = tuple(args[0])
        if not args:
            raise TypeError("Must pass at least one dataset to `zip`.")
        for d in args:
            if not isinstance(d, Dataset):
                raise TypeError(
                    f"Invalid input to `zip`. Inputs are expected to be (nested) structures of "
                    f"`tf.data.Dataset` objects. Python `list` is not supported and you should use "
                    f"`tuple` instead. Got {type(d).__name__}."
                )
        return Dataset._wrap(_native.Dataset.zip([d._native for d in args]))

    @staticmethod
    def load(path, element_spec=None, compression=None, reader_func=None, wait=False) -> "Dataset":
        """The elements of a snapshot that ``distributed_save`` wrote at
        ``path`` (TensorFlow's ``tf.data.Dataset.load``), chunk after chunk.

        The element spec and compression come from the snapshot's metadata;
        given ones must agree with it (``ValueError`` otherwise, as in
        TensorFlow), as must the snapshot not have failed. A missing
        snapshot raises ``NotFoundError``, or with ``wait=True`` is waited
        for. A snapshot still being written is read as it grows until it is
        done, with or without ``wait`` (as TensorFlow 2.21 does).
        ``reader_func`` (a custom interleaving of the chunks) is not
        supported."""
        if reader_func is not None:
            raise NotImplementedError(
                "tfdata.Dataset.load reads the chunks one after another; reader_func is not supported"
            )
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str) or not path:
            raise ValueError(f"`path` must be a non-empty string, got {path!r}")
        if compression is not None and not isinstance(compression, str):
            raise TypeError(f"`compression` must be a string or None, got {type(compression).__name__}")
        return Dataset._wrap(
            _native.Dataset.load(path, _check_bool("wait", wait), element_spec, compression),
            validate=False,
        )

    @staticmethod
    def from_json(text: str) -> "Dataset":
        """A pipeline from its JSON text form (docs/pipelines.md)."""
        native, _compress = _native.Dataset.from_json(text)
        return Dataset._wrap(native)

    def to_json(self, compress: bool = True) -> str:
        """The pipeline's JSON text form (built-in functions and registered names)."""
        return self._native.to_json(compress)

    # ---- Transformations ----

    def map(
        self,
        map_func,
        num_parallel_calls=None,
        deterministic=None,
        synchronous=None,
        use_unbounded_threadpool=False,
        name=None,
        *,
        batched=False,
        batch_size=None,
    ) -> "Dataset":
        """Applies ``map_func`` to each element.

        ``num_parallel_calls`` runs it on that many threads (``AUTOTUNE``: all
        cores) in order unless ``deterministic=False``. tfdata's own
        ``batched=True`` calls a Python function once per batch of
        ``batch_size`` (default 1024) elements, stacked along a new first
        dimension, and splits what it returns back into elements: one GIL
        acquisition per batch. It needs elements of one shape, as ``batch``.
        """
        npc = _check_int("num_parallel_calls", num_parallel_calls, allow_none=True)
        det = True if deterministic is None else _check_bool("deterministic", deterministic)
        if _check_bool("batched", batched):
            size = 1024 if batch_size is None else _check_int("batch_size", batch_size)
            if size <= 0:
                raise ValueError(f"`batch_size` must be positive, got {size}")
            fn = _function_json(map_func, "map", "map_func")
            return Dataset._wrap(self._native.batch(size, False).map(fn, npc, det).unbatch())
        if batch_size is not None:
            raise ValueError("`batch_size` is for `batched=True` only")
        fn = _function_json(map_func, "map", "map_func")
        return Dataset._wrap(self._native.map(fn, npc, det))

    def filter(self, predicate, name=None, *, batched=False, batch_size=None) -> "Dataset":
        """Keeps the elements for which ``predicate`` is true. With tfdata's
        ``batched=True``, ``predicate`` gets a batch and returns a boolean mask."""
        if _check_bool("batched", batched):
            size = 1024 if batch_size is None else _check_int("batch_size", batch_size)
            if size <= 0:
                raise ValueError(f"`batch_size` must be positive, got {size}")
            fn = _function_json(predicate, "filter_batched", "predicate")
            return Dataset._wrap(self._native.batch(size, False).map(fn, None, True).unbatch())
        return Dataset._wrap(self._native.filter(_function_json(predicate, "filter", "predicate")))

    def flat_map(self, map_func, name=None) -> "Dataset":
        """Maps each element to a dataset and concatenates them."""
        return Dataset._wrap(self._native.flat_map(_function_json(map_func, "flat_map", "map_func")))

    def interleave(
        self,
        map_func,
        cycle_length=None,
        block_length=None,
        num_parallel_calls=None,
        deterministic=None,
        name=None,
    ) -> "Dataset":
        """Maps each element to a dataset and interleaves ``cycle_length`` of
        them, ``block_length`` elements at a time, in TensorFlow's order."""
        cycle = AUTOTUNE if cycle_length is None else _check_int("cycle_length", cycle_length)
        block = 1 if block_length is None else _check_int("block_length", block_length)
        npc = _check_int("num_parallel_calls", num_parallel_calls, allow_none=True)
        if deterministic is not None:
            _check_bool("deterministic", deterministic)
        fn = _function_json(map_func, "flat_map", "map_func")
        return Dataset._wrap(self._native.interleave(fn, cycle, block, npc))

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None, deterministic=None, name=None) -> "Dataset":
        """Stacks ``batch_size`` consecutive elements along a new first dimension."""
        return Dataset._wrap(
            self._native.batch(_check_int("batch_size", batch_size), _check_bool("drop_remainder", drop_remainder))
        )

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None, drop_remainder=False, name=None) -> "Dataset":
        """Batches elements of different shapes, padding each component to
        ``padded_shapes`` (-1 or None: the longest in the batch)."""
        shapes = None
        if padded_shapes is not None:
            flat = padded_shapes if isinstance(padded_shapes, (tuple, dict)) else (padded_shapes,)
            if isinstance(flat, dict):
                flat = tuple(flat[k] for k in sorted(flat))
            if flat and not isinstance(flat[0], (tuple, list)) and not hasattr(flat[0], "__len__"):
                flat = (flat,)
            shapes = [[-1 if d is None else int(d) for d in s] for s in flat]
        values = None
        if padding_values is not None:
            flat = padding_values if isinstance(padding_values, (tuple, dict)) else (padding_values,)
            if isinstance(flat, dict):
                flat = tuple(flat[k] for k in sorted(flat))
            values = list(flat)
        return Dataset._wrap(
            self._native.padded_batch(
                _check_int("batch_size", batch_size), shapes, values, _check_bool("drop_remainder", drop_remainder)
            )
        )

    def unbatch(self, name=None) -> "Dataset":
        """Splits each element along its first dimension."""
        return Dataset._wrap(self._native.unbatch())

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None) -> "Dataset":
        """Shuffles with a buffer of ``buffer_size`` elements."""
        reshuffle = True if reshuffle_each_iteration is None else _check_bool(
            "reshuffle_each_iteration", reshuffle_each_iteration
        )
        return Dataset._wrap(self._native.shuffle(_check_int("buffer_size", buffer_size), _seed(seed), reshuffle))

    def repeat(self, count=None, name=None) -> "Dataset":
        """Repeats ``count`` times (``None`` or -1: forever)."""
        return Dataset._wrap(self._native.repeat(_check_int("count", count, allow_none=True)))

    def take(self, count, name=None) -> "Dataset":
        """The first ``count`` elements (-1: all)."""
        return Dataset._wrap(self._native.take(_check_int("count", count)))

    def skip(self, count, name=None) -> "Dataset":
        """All but the first ``count`` elements (-1: none)."""
        return Dataset._wrap(self._native.skip(_check_int("count", count)))

    def shard(self, num_shards, index, name=None) -> "Dataset":
        """Every ``num_shards``-th element, starting at ``index``."""
        return Dataset._wrap(self._native.shard(_check_int("num_shards", num_shards), _check_int("index", index)))

    def prefetch(self, buffer_size, name=None) -> "Dataset":
        """Produces up to ``buffer_size`` elements ahead on a thread of its own."""
        return Dataset._wrap(self._native.prefetch(_check_int("buffer_size", buffer_size)))

    def cache(self, filename="", name=None) -> "Dataset":
        """Keeps the first pass (in memory, or in ``filename``) for later passes."""
        if not isinstance(filename, str):
            raise TypeError(f"`filename` must be a string, got {type(filename).__name__}")
        return Dataset._wrap(self._native.cache(filename))

    def concatenate(self, dataset, name=None) -> "Dataset":
        """This dataset's elements, then ``dataset``'s."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"`dataset` must be a tfdata.Dataset, got {type(dataset).__name__}")
        return Dataset._wrap(self._native.concatenate(dataset._native))

    def enumerate(self, start=0, name=None) -> "Dataset":
        """``(index, element)`` pairs, counting from ``start``."""
        return Dataset._wrap(self._native.enumerate(_check_int("start", start)))

    def apply(self, transformation_func) -> Any:
        """``transformation_func(self)``; for example ``apply(service.distribute(...))``."""
        return transformation_func(self)

    # ---- Queries and iteration ----

    @property
    def element_spec(self):
        """The structure of an element: ``TensorSpec``\\ s in tuples and dicts,
        or ``None`` while a function's output is unknown."""
        return self._native.element_spec()

    def cardinality(self) -> int:
        """The number of elements: ``INFINITE`` (-1), ``UNKNOWN`` (-2) or a count."""
        return self._native.cardinality()

    def __len__(self) -> int:
        n = self.cardinality()
        if n == INFINITE:
            raise TypeError("The dataset is infinite.")
        if n == UNKNOWN:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Iterator:
        return self._native.iter()

    def as_numpy_iterator(self) -> Iterator:
        """An iterator of numpy values (numpy scalars, arrays, ``bytes``)."""
        return self._native.iter()

    def as_arrow_iterator(self, strings: str = "binary") -> Iterator:
        """An iterator of ``pyarrow.RecordBatch`` es, one per element, for
        pandas, polars and Ray. See :func:`_arrow_batches`."""
        return _arrow_batches(self._native, strings)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} element_spec={self.element_spec!r}>"


def TFRecordDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None) -> Dataset:
    """The records of TFRecord files (TensorFlow's ``tf.data.TFRecordDataset``),
    as scalar strings; ``compression_type`` is ``""``, ``"GZIP"`` or ``"ZLIB"``."""
    names = _filenames(filenames, "filenames")
    ds = Dataset._wrap(_native.Dataset.tfrecord(names, _compression_type(compression_type)))
    return ds


def TextLineDataset(filenames, compression_type=None, buffer_size=None, num_parallel_reads=None, name=None) -> Dataset:
    """The lines of text files (TensorFlow's ``tf.data.TextLineDataset``)."""
    names = _filenames(filenames, "filenames")
    return Dataset._wrap(_native.Dataset.text_lines(names, _compression_type(compression_type)))


def _arrow_batches(native, strings: str) -> Iterator:
    """Elements as ``pyarrow.RecordBatch`` es, through the Arrow C data
    interface (no copy of fixed-width columns). An element is a batch of
    rows along its first dimension: a dict's keys are the columns (a nested
    dict a struct column, a tuple's components columns ``"0"``, ``"1"``...),
    ``[rows, d...]`` tensors become fixed-size lists. Elements that are
    single rows are refused: give the source a ``batch_size`` or
    ``.batch(n)``. ``strings``: ``"binary"`` (TensorFlow strings are bytes)
    or ``"utf8"`` (checked: a value that is not UTF-8 raises)."""
    try:
        import pyarrow as pa
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("as_arrow_iterator() needs pyarrow 14 or later: pip install pyarrow") from e
    if strings not in ("binary", "utf8"):
        raise ValueError(f'`strings` must be "binary" or "utf8", got {strings!r}')
    it = native.iter(strings)

    def batches():
        for b in it:
            yield pa.record_batch(b)

    return batches()


class DistributedDataset:
    """A dataset read through tf.data service (what ``distribute`` and
    ``from_dataset_id`` return). Each iterator is a new epoch of its job."""

    __slots__ = ("_native",)

    @classmethod
    def _from_native(cls, native) -> "DistributedDataset":
        ds = cls.__new__(cls)
        ds._native = native
        return ds

    @property
    def dataset_id(self) -> str:
        return self._native.dataset_id

    @property
    def element_spec(self):
        return self._native.element_spec()

    def cardinality(self) -> int:
        return self._native.cardinality()

    def __iter__(self) -> Iterator:
        return self._native.iter()

    def as_numpy_iterator(self) -> Iterator:
        return self._native.iter()

    def as_arrow_iterator(self, strings: str = "binary") -> Iterator:
        """An iterator of ``pyarrow.RecordBatch`` es, one per element (a new
        epoch of the job, as ``iter``). See :func:`_arrow_batches`."""
        return _arrow_batches(self._native, strings)

    def take(self, count: int) -> "_Take":
        """The first ``count`` elements of each iteration."""
        return _Take(self, _check_int("count", count))

    def __repr__(self) -> str:
        return f"<DistributedDataset dataset_id={self.dataset_id!r} element_spec={self.element_spec!r}>"


class _Take:
    __slots__ = ("_source", "_count")

    def __init__(self, source, count):
        self._source, self._count = source, count

    def __iter__(self):
        it = iter(self._source)
        if self._count < 0:
            return it
        return _take(it, self._count)

    as_numpy_iterator = __iter__


def _take(it, count):
    try:
        for _ in range(count):
            try:
                yield next(it)
            except StopIteration:
                return
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
