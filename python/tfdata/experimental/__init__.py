"""``tfdata.experimental``, like ``tf.data.experimental``: the service API,
``distributed_save``, and ``merge_checkpoints`` (deterministic reads'
elastic restore)."""

from tfdata.experimental import service
from tfdata.experimental._deterministic import merge_checkpoints
from tfdata.experimental._distributed_save import distributed_save

__all__ = ["distributed_save", "merge_checkpoints", "service"]
