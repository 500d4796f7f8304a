"""tfdata: TensorFlow's tf.data service rebuilt in Rust, for Python trainers.

* :class:`tfdata.Dataset` is ``tf.data.Dataset`` over tfdata's Rust engine;
* :mod:`tfdata.experimental.service` is ``tf.data.experimental.service``:
  ``DispatchServer``, ``WorkerServer``, ``distribute``, ``register_dataset``,
  ``from_dataset_id``;
* :mod:`tfdata.errors` is ``tf.errors``;
* :mod:`tfdata.functions` holds the engine's built-in functions;
* ``ParquetDataset``, ``ArrowDataset``, ``HuggingFaceDataset``, ``WebDataset``
  and ``ArrayRecordDataset`` read the formats PyTorch and JAX teams keep
  (:mod:`tfdata.sources`); ``as_arrow_iterator()`` gives pyarrow batches;
* :mod:`tfdata.torch` and :mod:`tfdata.jax` adapt readers to PyTorch and JAX.

Elements arrive as numpy arrays over the buffers they were received into.
"""

from tfdata import errors, functions
from tfdata._native import TensorSpec, jpeg_code_path, protocol_version
from tfdata.dataset import (
    AUTOTUNE,
    INFINITE,
    UNKNOWN,
    Dataset,
    DistributedDataset,
    TextLineDataset,
    TFRecordDataset,
    register_function,
)
from tfdata.sources import (
    ArrayRecordDataset,
    ArrowDataset,
    HuggingFaceDataset,
    ParquetDataset,
    WebDataset,
)
from tfdata import experimental  # noqa: E402  (needs Dataset)

__version__ = "0.1.0"

__all__ = [
    "AUTOTUNE",
    "ArrayRecordDataset",
    "ArrowDataset",
    "INFINITE",
    "UNKNOWN",
    "Dataset",
    "DistributedDataset",
    "HuggingFaceDataset",
    "ParquetDataset",
    "TFRecordDataset",
    "TensorSpec",
    "TextLineDataset",
    "WebDataset",
    "errors",
    "experimental",
    "functions",
    "jpeg_code_path",
    "protocol_version",
    "register_function",
]
