"""Parsing: tf.train.Example protos through ParseExampleV2 and
ParseSingleExample (dense with defaults, variable-length, ragged, missing
keys, wrong types, corrupt bytes) and CSV lines through DecodeCSV."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops


def example(**features):
    f = {}
    for k, v in features.items():
        if isinstance(v, bytes) or (isinstance(v, list) and v and isinstance(v[0], bytes)):
            f[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v if isinstance(v, list)
                                                                  else [v]))
        elif isinstance(v, list) and v and isinstance(v[0], float):
            f[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        elif isinstance(v, list):
            f[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
        else:
            f[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def family():
    fam = Family("parsing")
    records = [
        example(id=1, label=[0.5], tokens=[3, 1, 4], text=b"first", vec=[1.0, 2.0, 3.0],
                scores=[0.25, 0.5]),
        example(id=2, label=[1.5], tokens=[], text=b"", vec=[4.0, 5.0, 6.0], scores=[1.0]),
        example(id=3, tokens=[9, 2, 6, 5, 3, 5], text=[b"a", b"b"], vec=[7.0, 8.0, 9.0]),
        example(id=-(2**63), label=[np.float32(np.nan).item()], tokens=[2**63 - 1],
                vec=[0.0, -0.0, 1e-45]),
    ]
    batch = tf.constant(records)

    # tf.io.parse_example with dense, var-len (sparse) and ragged features.
    def parse(serialized, dense_defaults_label):
        return tf.io.parse_example(serialized, {
            "id": tf.io.FixedLenFeature([], tf.int64),
            "label": tf.io.FixedLenFeature([1], tf.float32, default_value=[-1.0]),
            "vec": tf.io.FixedLenFeature([3], tf.float32),
            "tokens": tf.io.VarLenFeature(tf.int64),
            "text": tf.io.VarLenFeature(tf.string),
            "scores": tf.io.RaggedFeature(tf.float32),
        })

    def flat(d):
        out = []
        for k in sorted(d):
            v = d[k]
            if isinstance(v, tf.SparseTensor):
                out += [v.indices, v.values, v.dense_shape]
            elif isinstance(v, tf.RaggedTensor):
                out += [v.flat_values, v.row_splits]
            else:
                out.append(v)
        return out

    fam.add_function("parse_example/dense, var-len and ragged",
                     lambda s: flat(parse(s, None)), [batch])
    fam.add_function("parse_example/one record",
                     lambda s: flat(parse(s, None)), [batch[:1]])
    fam.add_function("parse_single_example/dense and var-len", lambda s: flat(
        tf.io.parse_single_example(s, {
            "id": tf.io.FixedLenFeature([], tf.int64),
            "vec": tf.io.FixedLenFeature([3], tf.float32),
            "tokens": tf.io.VarLenFeature(tf.int64),
            "text": tf.io.FixedLenFeature([], tf.string, default_value=b"none")})),
        [tf.constant(records[1])])
    # Dense features missing without a default, wrong types, wrong sizes.
    for name, spec, rec in (
            ("missing without default", {"label": tf.io.FixedLenFeature([1], tf.float32)},
             records[2]),
            ("wrong type", {"text": tf.io.FixedLenFeature([], tf.int64)}, records[0]),
            ("wrong size", {"tokens": tf.io.FixedLenFeature([2], tf.int64)}, records[0]),
            ("corrupt bytes", {"id": tf.io.FixedLenFeature([], tf.int64)}, b"\x0a\x05garbage"),
    ):
        try:
            fam.add_function(f"parse_example/error/{name}",
                             lambda s, spec=spec: flat(tf.io.parse_example(s, spec)),
                             [tf.constant([rec])])
        except tf.errors.InvalidArgumentError:
            # TensorFlow refused it: a raw op case records the error.
            pass
    # The raw op with the dense features only: error texts are compared.
    for name, rec in (("wrong type", records[0]), ("corrupt", b"\x0a\x05garbage"),
                      ("missing", records[2])):
        key = "text" if name == "wrong type" else "label"
        fam.add("ParseExampleV2",
                lambda s, names, sk, dk, rk, d, key=key: R.ParseExampleV2(
                    serialized=s, names=names, sparse_keys=sk, dense_keys=dk, ragged_keys=rk,
                    dense_defaults=[d], num_sparse=0, sparse_types=[], ragged_value_types=[],
                    ragged_split_types=[], dense_shapes=[[1]]),
                [tf.constant([rec]), tf.constant([], tf.string), tf.constant([], tf.string),
                 tf.constant([key]), tf.constant([], tf.string),
                 tf.constant([], tf.float32)], f"ParseExampleV2/error/{name}")
    # CSV.
    lines = tf.constant([b"1,2.5,hello,", b'7,-0.0,"quoted, comma",x', b",,,",
                         b"  3 ,1e10,\"a\"\"b\",z"])
    defaults = [tf.constant([0], tf.int32), tf.constant([1.5], tf.float32),
                tf.constant([b"d"]), tf.constant([b"e"])]
    fam.add("DecodeCSV", lambda r, a, b, c, d: R.DecodeCSV(records=r, record_defaults=[a, b, c, d]),
            [lines[:3]] + defaults, "DecodeCSV/defaults and quotes")
    fam.add("DecodeCSV", lambda r, a, b, c, d: R.DecodeCSV(records=r, record_defaults=[a, b, c, d]),
            [lines[3:]] + defaults, "DecodeCSV/error/spaces")
    fam.add("DecodeCSV", lambda r, a, b: R.DecodeCSV(records=r, record_defaults=[a, b],
                                                    field_delim="|", na_value="NA"),
            [tf.constant([b"1|NA", b"NA|2"]), tf.constant([5], tf.int64),
             tf.constant([6], tf.int64)], "DecodeCSV/delimiter and na_value")
    fam.add("DecodeCSV", lambda r, a, b: R.DecodeCSV(records=r, record_defaults=[a, b],
                                                    select_cols=[0, 2]),
            [tf.constant([b"1,x,2"]), tf.constant([5], tf.int64), tf.constant([6], tf.int64)],
            "DecodeCSV/select_cols")
    fam.add("DecodeCSV", lambda r, a, b: R.DecodeCSV(records=r, record_defaults=[a, b]),
            [tf.constant([b"1,2,3"]), tf.constant([5], tf.int64), tf.constant([6], tf.int64)],
            "DecodeCSV/error/too many fields")
    fam.add("DecodeCSV", lambda r, a, b: R.DecodeCSV(records=r, record_defaults=[a, b]),
            [tf.constant([b"1,"]), tf.constant([5], tf.int64), tf.constant([], tf.int64)],
            "DecodeCSV/error/missing required")
    fam.add("DecodeCSV", lambda r, a: R.DecodeCSV(records=r, record_defaults=[a]),
            [tf.constant([b"99999999999"]), tf.constant([5], tf.int32)],
            "DecodeCSV/error/int32 overflow")
    fam.add("DecodeCSV", lambda r, a: R.DecodeCSV(records=r, record_defaults=[a]),
            [tf.constant([b'"unterminated']), tf.constant([b""])], "DecodeCSV/error/quote")
    return fam
