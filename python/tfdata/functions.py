"""Built-in pipeline functions: run by the Rust engine, on any worker, with
no Python there. Each call returns a :class:`Function` to give ``map``
(or ``interleave`` / ``flat_map`` for the dataset functions)::

    ds = tfdata.TFRecordDataset(files).map(
        tfdata.functions.parse_example({"image": {"dtype": "string"}, "label": {"dtype": "int64"}}))
    ds = ds.map(tfdata.functions.decode_jpeg(channels=3, component="image"),
                num_parallel_calls=tfdata.AUTOTUNE)

Element-wise functions take ``component``: the dictionary key or tuple
position of the component they change (default: the only one). The
arguments are those of docs/pipelines.md; the engine checks them when the
pipeline is built.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import numpy as np


def _json_value(value: Any) -> Any:
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        array = np.asarray(value)
        if array.dtype.kind in "OSU":
            values = [v.decode() if isinstance(v, bytes) else str(v) for v in array.ravel().tolist()]
            return {"dtype": "string", "shape": list(array.shape), "values": values}
        return {"dtype": array.dtype.name, "shape": list(array.shape), "values": array.ravel().tolist()}
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, bytes):
        return value.decode()
    return value


class Function:
    """A built-in function and its arguments."""

    __slots__ = ("name", "args")

    def __init__(self, name: str, **args: Any):
        self.name = name
        self.args = {k: v for k, v in args.items() if v is not None}

    def _to_json(self) -> str:
        return json.dumps({"function": self.name, "args": _json_value(self.args)})

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"tfdata.functions.{self.name}({args})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Function) and (self.name, self.args) == (other.name, other.args)

    def __hash__(self) -> int:
        return hash((self.name, self._to_json()))


def parse_example(features: dict, component: Optional[str] = None) -> Function:
    """``tf.io.parse_single_example``: ``features`` maps names to
    ``{"dtype": "int64"|"float32"|"string", "shape": [...], "default": value, "var_len": bool}``."""
    return Function("parse_example", features=features, component=component)


def decode_jpeg(channels: int = 0, component: Optional[str] = None) -> Function:
    """JPEG bytes to ``uint8 [h, w, c]`` (``channels=0``: as encoded)."""
    return Function("decode_jpeg", channels=channels, component=component)


def decode_png(channels: int = 0, component: Optional[str] = None) -> Function:
    """PNG bytes to ``uint8 [h, w, c]``."""
    return Function("decode_png", channels=channels, component=component)


def decode_image(channels: int = 0, component: Optional[str] = None) -> Function:
    """JPEG or PNG bytes to ``uint8 [h, w, c]``."""
    return Function("decode_image", channels=channels, component=component)


def resize(size, method: str = "bilinear", component: Optional[str] = None) -> Function:
    """``tf.image.resize`` to ``size = [h, w]`` (``"bilinear"`` or ``"nearest"``)."""
    return Function("resize", size=list(size), method=method, component=component)


def central_crop(fraction: float, component: Optional[str] = None) -> Function:
    return Function("central_crop", fraction=float(fraction), component=component)


def crop_to_bounding_box(offset_height, offset_width, target_height, target_width, component=None) -> Function:
    return Function(
        "crop_to_bounding_box",
        offset_height=offset_height,
        offset_width=offset_width,
        target_height=target_height,
        target_width=target_width,
        component=component,
    )


def random_crop(size, seed: Optional[int] = None, component: Optional[str] = None) -> Function:
    return Function("random_crop", size=list(size), seed=seed, component=component)


def flip_left_right(component: Optional[str] = None) -> Function:
    return Function("flip_left_right", component=component)


def flip_up_down(component: Optional[str] = None) -> Function:
    return Function("flip_up_down", component=component)


def random_flip_left_right(seed: Optional[int] = None, component: Optional[str] = None) -> Function:
    return Function("random_flip_left_right", seed=seed, component=component)


def random_flip_up_down(seed: Optional[int] = None, component: Optional[str] = None) -> Function:
    return Function("random_flip_up_down", seed=seed, component=component)


def cast(dtype, component: Optional[str] = None) -> Function:
    """``tf.cast`` to ``dtype`` (a name or a numpy dtype)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return Function("cast", dtype=name, component=component)


def normalize(mean, std, component: Optional[str] = None) -> Function:
    """``(x - mean) / std`` per channel, to float32."""
    return Function("normalize", mean=[float(m) for m in mean], std=[float(s) for s in std], component=component)


def per_image_standardization(component: Optional[str] = None) -> Function:
    return Function("per_image_standardization", component=component)


def scale(factor: float, offset: float = 0.0, component: Optional[str] = None) -> Function:
    """``x * factor + offset``, to float32."""
    return Function("scale", factor=float(factor), offset=float(offset), component=component)


def one_hot(depth: int, on_value=1, off_value=0, component: Optional[str] = None) -> Function:
    return Function("one_hot", depth=depth, on_value=on_value, off_value=off_value, component=component)


def string_split(sep: Optional[str] = None, component: Optional[str] = None) -> Function:
    """A scalar string to a vector of pieces (whitespace when ``sep`` is None)."""
    return Function("string_split", sep=sep, component=component)


def lower(component: Optional[str] = None) -> Function:
    return Function("lower", component=component)


def lookup(vocabulary_file: str, default_value: int = -1, component: Optional[str] = None) -> Function:
    """A token to its line number in ``vocabulary_file``."""
    return Function("lookup", vocabulary_file=vocabulary_file, default_value=default_value, component=component)


def select(components) -> Function:
    """Keeps ``components`` (keys or positions), as a tuple (or the one tensor)."""
    return Function("select", components=[str(c) for c in components])


def tfrecord_dataset(compression_type: Optional[str] = None) -> Function:
    """For ``interleave``/``flat_map`` over file names: each file's TFRecords."""
    return Function("tfrecord_dataset", compression_type=compression_type)


def text_line_dataset(compression_type: Optional[str] = None) -> Function:
    """For ``interleave``/``flat_map`` over file names: each file's lines."""
    return Function("text_line_dataset", compression_type=compression_type)
