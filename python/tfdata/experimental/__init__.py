"""``tfdata.experimental``, like ``tf.data.experimental``: the service API."""

from tfdata.experimental import service

__all__ = ["service"]
