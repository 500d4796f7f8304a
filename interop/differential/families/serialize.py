"""SerializeTensor and ParseTensor: TensorFlow's bytes for every dtype and shape, and every
TensorProto form ParseTensor reads (raw content, typed value lists cut, padded or absent,
string lists, unknown rank), with its errors for malformed bytes, bad protos and dtypes
other than out_type. All exact."""

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2

from harness import I64_MAX, I64_MIN, Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
DTYPES = [tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int8, tf.uint8, tf.int16,
          tf.uint16, tf.int32, tf.uint32, tf.int64, tf.uint64, tf.bool, tf.complex64,
          tf.complex128, tf.string]


def proto(dtype, dims=None, unknown_rank=False, **kw):
    shape = None
    if dims is not None or unknown_rank:
        shape = tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in (dims or [])],
            unknown_rank=unknown_rank)
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, **kw).SerializeToString()


def sample(rng, dt, shape):
    n = int(np.prod(shape))
    if dt == tf.string:
        return tf.reshape(tf.constant([bytes([i % 256]) * (i % 3) for i in range(n)],
                                      tf.string), shape)
    if dt == tf.bool:
        return tf.constant(rng.integers(0, 2, size=shape).astype(bool))
    if dt.is_complex:
        return tf.constant(rng.standard_normal(shape) + 1j * rng.standard_normal(shape), dt)
    if dt.is_floating:
        return tf.cast(tf.constant(rng.standard_normal(shape)), dt)
    info = np.iinfo(dt.as_numpy_dtype)
    return tf.constant(rng.integers(info.min, info.max, size=shape, endpoint=True,
                                    dtype=dt.as_numpy_dtype), dt)


def family():
    fam = Family("serialize")
    rng = np.random.default_rng(3)

    def ser(x, case_id):
        fam.add("SerializeTensor", lambda x: R.SerializeTensor(tensor=x), [x],
                f"SerializeTensor/{case_id}")

    def par(b, out_type, case_id):
        fam.add("ParseTensor", lambda s: R.ParseTensor(serialized=s, out_type=out_type),
                [tf.constant(b)], f"ParseTensor/{case_id}/{out_type.name}")

    for dt in DTYPES:
        for shape in ([], [0], [3, 0, 2], [2, 3]):
            x = sample(rng, dt, shape)
            ser(x, f"{dt.name} {shape}")
            par(R.SerializeTensor(tensor=x).numpy(), dt, f"round trip {shape}")
    ser(tf.constant([nan, -0.0, inf, -inf, 1e-40], tf.float32), "float32 special")
    ser(tf.constant([I64_MIN, I64_MAX], tf.int64), "int64 limits")
    ser(tf.constant([b"", b"\x00\xff" * 70, b"a"]), "strings, one of 140 bytes")
    # Typed value lists.
    par(proto(1, [2], float_val=[1.0, 2.0]), tf.float32, "float_val")
    par(proto(1, [4], float_val=[1.0, 2.0]), tf.float32, "float_val padded")
    par(proto(1, [3]), tf.float32, "no values")
    par(proto(1, [1], float_val=[1.0, 2.0]), tf.float32, "float_val cut")
    par(proto(1, [0], float_val=[1.0]), tf.float32, "float_val, empty shape")
    par(proto(2, [2, 2], double_val=[-0.0, nan]), tf.float64, "double_val")
    par(proto(6, [3], int_val=[300, -1]), tf.int8, "int8 from int_val (truncated)")
    par(proto(4, [2], int_val=[-1, 256]), tf.uint8, "uint8 from int_val")
    par(proto(5, [2], int_val=[70000]), tf.int16, "int16 from int_val")
    par(proto(3, [2, 1], int_val=[7]), tf.int32, "int32 one value")
    par(proto(9, [3], int64_val=[I64_MIN, 5]), tf.int64, "int64_val")
    par(proto(22, [2], uint32_val=[2**32 - 1]), tf.uint32, "uint32_val")
    par(proto(23, [2], uint64_val=[2**64 - 1, 3]), tf.uint64, "uint64_val")
    par(proto(10, [3], bool_val=[True]), tf.bool, "bool_val")
    par(proto(19, [2], half_val=[0x3C00]), tf.float16, "half_val")
    par(proto(14, [2], half_val=[0x3F80, 0xFF80]), tf.bfloat16, "bfloat16 half_val")
    par(proto(8, [2], scomplex_val=[1.0, 2.0]), tf.complex64, "scomplex_val")
    par(proto(18, [1], dcomplex_val=[1.0, -2.0, 3.0, 4.0]), tf.complex128, "dcomplex_val cut")
    par(proto(1, [2], int_val=[1, 2]), tf.float32, "float from the wrong list (zeros)")
    par(proto(7, [3], string_val=[b"a", b"b"]), tf.string, "strings padded")
    par(proto(7, [1], string_val=[b"a", b"b"]), tf.string, "strings cut")
    par(proto(7, [2]), tf.string, "no strings")
    par(proto(7, [0], string_val=[b"a"]), tf.string, "strings, empty shape")
    par(proto(7, [2], tensor_content=b"\x01\x01ab"), tf.string, "strings as content")
    par(proto(1, unknown_rank=True), tf.float32, "unknown rank")
    par(proto(1, None, float_val=[3.0]), tf.float32, "no shape")
    par(proto(1, [1], float_val=[1.0], version_number=5), tf.float32, "version number")
    par(proto(1, [2], tensor_content=np.array([1.5, -2], np.float32).tobytes()), tf.float32,
        "content")
    # Errors.
    par(b"\xff\xff\x01abc", tf.float32, "error/garbage")
    par(b"\x08", tf.float32, "error/truncated")
    par(b"", tf.float32, "error/empty bytes (dtype invalid)")
    par(proto(1, [3], tensor_content=b"\0" * 8), tf.float32, "error/content short")
    par(proto(1, [0], tensor_content=b"\0" * 4), tf.float32, "error/content for no elements")
    par(proto(1, [-1]), tf.float32, "error/negative dimension")
    par(proto(1, [2**40, 2**40], float_val=[1.0]), tf.float32, "error/dimensions overflow")
    par(proto(0, [2]), tf.float32, "error/dtype invalid")
    par(proto(1, [2], float_val=[1.0]), tf.int32, "error/mismatch")
    par(proto(9, [2], int64_val=[1]), tf.float64, "error/mismatch int64")
    par(proto(7, [1], string_val=[b"x"]), tf.uint8, "error/mismatch string")
    par(proto(20, []), tf.float32, "error/resource")
    fam.add("ParseTensor", lambda s: R.ParseTensor(serialized=s, out_type=tf.float32),
            [tf.constant([proto(1, [1], float_val=[1.0])])], "ParseTensor/error/vector input")
    return fam
