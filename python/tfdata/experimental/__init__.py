"""``tfdata.experimental``, like ``tf.data.experimental``: the service API and
``distributed_save``."""

from tfdata.experimental import service
from tfdata.experimental._distributed_save import distributed_save

__all__ = ["distributed_save", "service"]
