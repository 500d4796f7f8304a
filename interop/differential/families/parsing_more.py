"""More of tf.io's parsing: ParseExample (V1), DecodeCompressed (zlib and
gzip containers, cut streams, bad headers and checksums), DecodePaddedRaw,
the SequenceExample parsers and DecodeJSONExample."""

import gzip
import random
import zlib

import numpy as np  # noqa: F401
import tensorflow as tf

from harness import Family
from families.parsing import example as example_proto_bytes

R = tf.raw_ops


def example(**features):
    """An Example's bytes with its features in key order, so that
    regenerating gives the same bytes (map order is otherwise arbitrary)."""
    e = tf.train.Example.FromString(example_proto_bytes(**features))
    return e.SerializeToString(deterministic=True)


def s(*v):
    return tf.constant(list(v), tf.string)


def parse_example_v1(fam):
    records = [
        example(id=1, label=[0.5], tokens=[3, 1, 4], text=b"first", vec=[1.0, 2.0, 3.0]),
        example(id=2, tokens=[], text=b"", vec=[4.0, 5.0, 6.0]),
        example(id=-(2**63), label=[float("nan")], tokens=[2**63 - 1], text=[b"a", b"\xff"],
                vec=[0.0, -0.0, 1e-45]),
    ]

    def v1(serialized, names, sk, dk, defaults, sparse_types, dense_shapes):
        return tf.nest.flatten(R.ParseExample(
            serialized=serialized, names=names, sparse_keys=sk, dense_keys=dk,
            dense_defaults=defaults, sparse_types=sparse_types, dense_shapes=dense_shapes))

    fam.add("ParseExample",
            lambda ser, names, k1, k2, d1, d2, d3, a, b, c: v1(
                ser, names, [k1, k2], [d1, d2, d3], [a, b, c],
                [tf.int64, tf.string], [[], [1], [3]]),
            [s(*records), s(), tf.constant("tokens"), tf.constant("text"), tf.constant("id"),
             tf.constant("label"), tf.constant("vec"), tf.constant(7, tf.int64),
             tf.constant([-1.0]), tf.constant([], tf.float32)],
            "ParseExample/sparse and dense with defaults")
    fam.add("ParseExample",
            lambda ser, names, k1: v1(ser, names, [k1], [], [], [tf.int64], []),
            [s(), s(), tf.constant("tokens")], "ParseExample/empty batch")
    fam.add("ParseExample",
            lambda ser, names, k1: v1(ser, names, [k1], [], [], [tf.int64], []),
            [s(records[0], records[1]), s(b"a", b"b"), tf.constant("tokens")],
            "ParseExample/with names")
    for name, ser, names, key, dtype in (
            ("scalar serialized", tf.constant(records[0]), s(), "id", tf.int64),
            ("names shape", s(records[0]), s(b"a", b"b"), "id", tf.int64),
            ("missing", s(records[1]), s(), "label", tf.float32),
            ("wrong type", s(records[0]), s(), "text", tf.float32),
            ("corrupt", s(b"\x0a\x05garbage"), s(), "id", tf.int64)):
        shape = [1] if dtype == tf.float32 else []
        fam.add("ParseExample",
                lambda ser, names, k, d, dtype=dtype, shape=shape: v1(
                    ser, names, [], [k], [d], [], [shape]),
                [ser, names, tf.constant(key), tf.constant([], dtype)],
                f"ParseExample/error/{name}")


def decode_compressed(fam):
    rng = random.Random(7)
    noise = bytes(rng.getrandbits(8) for _ in range(3000))
    text = (b"the quick brown fox jumps over the lazy dog " * 40 +
            "ünïcödé ☃ ".encode() * 20)
    z_text = zlib.compress(text, 9)
    z_noise = zlib.compress(noise)
    g_text = gzip.compress(text, mtime=0)
    g_noise = gzip.compress(noise, mtime=0)

    def dc(ct):
        return lambda b: R.DecodeCompressed(bytes=b, compression_type=ct)

    fam.add("DecodeCompressed", dc("ZLIB"),
            [s(z_text, z_noise, zlib.compress(b""), b"", z_text + b"trailing", z_text + z_noise)],
            "DecodeCompressed/zlib")
    fam.add("DecodeCompressed", dc("GZIP"),
            [tf.constant([[g_text, g_noise], [gzip.compress(b"", mtime=0), b""],
                          [g_text + g_noise, g_noise[:-4]]])],
            "DecodeCompressed/gzip, members concatenated")
    fam.add("DecodeCompressed", dc(""), [s(z_text, b"", b"\x00\xff")], "DecodeCompressed/none")
    fam.add("DecodeCompressed", dc("ZLIB"), [tf.constant(z_text)], "DecodeCompressed/scalar")
    # Cut streams: TensorFlow gives what the cut stream decodes to.
    fam.add("DecodeCompressed", dc("ZLIB"),
            [s(*[z_text[:n] for n in (1, 2, 3, 7, 20, 50, 100, 200, len(z_text) - 4,
                                      len(z_text) - 1)])],
            "DecodeCompressed/zlib cut")
    fam.add("DecodeCompressed", dc("ZLIB"),
            [s(*[z_noise[:n] for n in (10, 100, 1000, len(z_noise) - 5)])],
            "DecodeCompressed/zlib stored blocks cut")
    fam.add("DecodeCompressed", dc("GZIP"),
            [s(*[g_text[:n] for n in (1, 2, 5, 10, 11, 30, 100, len(g_text) - 8,
                                      len(g_text) - 5, len(g_text) - 1)])],
            "DecodeCompressed/gzip cut")
    # A gzip header with a file name, a comment and a header CRC.
    named = bytearray(b"\x1f\x8b\x08\x1e\x00\x00\x00\x00\x00\xff") + b"name.txt\x00comment\x00"
    hcrc = zlib.crc32(bytes(named)) & 0xffff
    named += hcrc.to_bytes(2, "little")
    body = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = body.compress(text) + body.flush()
    named += raw + (zlib.crc32(text)).to_bytes(4, "little") + len(text).to_bytes(4, "little")
    fam.add("DecodeCompressed", dc("GZIP"), [s(bytes(named))],
            "DecodeCompressed/gzip header fields")
    bad_adler = bytearray(z_text)
    bad_adler[-1] ^= 1
    bad_crc = bytearray(g_text)
    bad_crc[-5] ^= 1
    bad_len = bytearray(g_text)
    bad_len[-1] ^= 1
    for name, ct, data in (
            ("zlib header", "ZLIB", b"garbage"),
            ("raw deflate", "ZLIB", raw),
            ("zlib as gzip", "GZIP", z_text),
            ("gzip as zlib", "ZLIB", g_text),
            ("gzip trailing", "GZIP", g_text + b"junk"),
            ("gzip then zlib", "GZIP", g_text + z_text),
            ("adler", "ZLIB", bytes(bad_adler)),
            ("crc", "GZIP", bytes(bad_crc)),
            ("length", "GZIP", bytes(bad_len)),
            ("method", "ZLIB", b"\x79\x9c" + z_text[2:]),
            ("gzip method", "GZIP", b"\x1f\x8b\x07" + g_text[3:]),
            ("gzip flags", "GZIP", b"\x1f\x8b\x08\x80" + g_text[4:])):
        fam.add("DecodeCompressed", dc(ct), [s(data)], f"DecodeCompressed/error/{name}")
    fam.add("DecodeCompressed", dc("gzip"), [s(g_text)], "DecodeCompressed/error/lower case")


def decode_padded_raw(fam):
    def dp(out_type, little_endian=True):
        return lambda b, n: R.DecodePaddedRaw(input_bytes=b, fixed_length=n, out_type=out_type,
                                              little_endian=little_endian)

    i32 = lambda v: tf.constant(v, tf.int32)  # noqa: E731
    fam.add("DecodePaddedRaw", dp(tf.int16), [s(b"\x01\x02\x03", b"\x04", b""), i32(4)],
            "DecodePaddedRaw/int16 padded")
    fam.add("DecodePaddedRaw", dp(tf.int16, False), [s(b"\x01\x02\x03", b"\xff\xfe"), i32(4)],
            "DecodePaddedRaw/int16 big endian")
    fam.add("DecodePaddedRaw", dp(tf.uint8), [tf.constant([[b"ab"], [b"cdefg"]]), i32(3)],
            "DecodePaddedRaw/uint8 cut and padded")
    fam.add("DecodePaddedRaw", dp(tf.float32),
            [s(b"\x00\x00\x80\x3f\x00\x00\xc0\x7f", b"\x00\x00\x80\xff", b"\x00\x00\x00\x80"),
             i32(8)], "DecodePaddedRaw/float32 specials")
    fam.add("DecodePaddedRaw", dp(tf.float64, False), [s(b"\x3f\xf0", b"\x80"), i32(16)],
            "DecodePaddedRaw/float64 big endian")
    for t in (tf.int8, tf.int32, tf.int64, tf.uint16, tf.float16, tf.bfloat16):
        fam.add("DecodePaddedRaw", dp(t), [s(b"\xff" * 9, "é☃".encode()), i32(8)],
                f"DecodePaddedRaw/{t.name}")
    fam.add("DecodePaddedRaw", dp(tf.int32), [tf.constant(b"\x01\x02"), i32(4)],
            "DecodePaddedRaw/scalar")
    fam.add("DecodePaddedRaw", dp(tf.int32), [s(), i32(4)], "DecodePaddedRaw/empty")
    for name, n in (("not a multiple", 3), ("zero", 0), ("negative", -4)):
        fam.add("DecodePaddedRaw", dp(tf.int16), [s(b"\x01"), i32(n)],
                f"DecodePaddedRaw/error/{name}")
    fam.add("DecodePaddedRaw", dp(tf.int16), [s(b"\x01"), i32([2])],
            "DecodePaddedRaw/error/length not scalar")


def sequence_example(text):
    from google.protobuf import text_format
    return text_format.Parse(text, tf.train.SequenceExample()).SerializeToString(
        deterministic=True)


SEQ = sequence_example('''
context { feature { key: "id" value { int64_list { value: [7] } } }
          feature { key: "tags" value { bytes_list { value: ["a", "\\303\\251"] } } }
          feature { key: "len" value { float_list { value: [1.5, -0.0] } } } }
feature_lists {
  feature_list { key: "tok" value { feature { int64_list { value: [1, 2] } }
                                    feature { int64_list { value: [3, -9223372036854775808] } }
                                    feature { int64_list { value: [5, 6] } } } }
  feature_list { key: "w" value { feature { float_list { value: [0.5] } }
                                  feature { float_list { value: [] } }
                                  feature { float_list { value: [1, nan, -inf] } } } }
  feature_list { key: "words" value { feature { bytes_list { value: ["x"] } }
                                      feature { bytes_list { value: ["y", "z"] } } } }
  feature_list { key: "empty" value { } }
}''')


def parse_single_sequence(fam):
    def pss(ser, empty, ck_s, ck_d, fk_s, fk_d, defaults, name, c_sparse_types=(),
            c_dense_shapes=(), f_sparse_types=(), f_dense_types=(), f_dense_shapes=()):
        return tf.nest.flatten(R.ParseSingleSequenceExample(
            serialized=ser, feature_list_dense_missing_assumed_empty=empty,
            context_sparse_keys=ck_s, context_dense_keys=ck_d, feature_list_sparse_keys=fk_s,
            feature_list_dense_keys=fk_d, context_dense_defaults=defaults, debug_name=name,
            context_sparse_types=list(c_sparse_types), context_dense_shapes=list(c_dense_shapes),
            feature_list_sparse_types=list(f_sparse_types),
            feature_list_dense_types=list(f_dense_types),
            feature_list_dense_shapes=list(f_dense_shapes)))

    k = tf.constant
    fam.add("ParseSingleSequenceExample",
            lambda ser, empty, c1, c2, d1, d2, f1, f2, f3, g1, g2, g3, dd1, dd2, name: pss(
                ser, empty, [c1, c2], [d1, d2], [f1, f2, f3], [g1, g2, g3], [dd1, dd2], name,
                c_sparse_types=[tf.string, tf.float32], c_dense_shapes=[[], [2, 1]],
                f_sparse_types=[tf.float32, tf.string, tf.int64],
                f_dense_types=[tf.int64, tf.string, tf.float32],
                f_dense_shapes=[[2], [], [3]]),
            [k(SEQ), s(b"gone"), k("tags"), k("len"), k("id"), k("absent"), k("w"), k("words"),
             k("missing"), k("tok"), k("empty"), k("gone"), k([], tf.int64),
             k([[4], [5]], tf.int64), k("dbg")],
            "ParseSingleSequenceExample/context and feature lists")
    fam.add("ParseSingleSequenceExample",
            lambda ser, empty, name: pss(ser, empty, [], [], [], [], [], name),
            [k(b""), s(), k("")], "ParseSingleSequenceExample/empty record, no features")
    fam.add("ParseSingleSequenceExample",
            lambda ser, empty, f1, name: pss(ser, empty, [], [], [f1], [], [], name,
                                             f_sparse_types=[tf.int64]),
            [k(b""), s(), k("tok"), k("")], "ParseSingleSequenceExample/empty record, sparse list")
    errs = [
        ("missing list", dict(fk_d=["gone"], f_dense_types=[tf.int64], f_dense_shapes=[[2]])),
        ("list count", dict(fk_d=["w"], f_dense_types=[tf.float32], f_dense_shapes=[[1]])),
        ("list type", dict(fk_d=["tok"], f_dense_types=[tf.float32], f_dense_shapes=[[2]])),
        ("sparse list type", dict(fk_s=["tok"], f_sparse_types=[tf.string])),
        ("context missing", dict(ck_d=["nope"], defaults=[tf.constant([], tf.int64)],
                                 c_dense_shapes=[[]])),
        ("context type", dict(ck_d=["id"], defaults=[tf.constant([], tf.float32)],
                              c_dense_shapes=[[]])),
        ("context count", dict(ck_d=["id"], defaults=[tf.constant([], tf.int64)],
                               c_dense_shapes=[[2]])),
        ("context sparse type", dict(ck_s=["id"], c_sparse_types=[tf.float32])),
        ("corrupt", dict(ser=b"\x0a\x05garbage", ck_s=["id"], c_sparse_types=[tf.int64])),
        ("not scalar", dict(ser=[SEQ], ck_s=["id"], c_sparse_types=[tf.int64])),
    ]
    for name, kw in errs:
        ser = kw.pop("ser", SEQ)
        ck_s = kw.pop("ck_s", [])
        ck_d = kw.pop("ck_d", [])
        fk_s = kw.pop("fk_s", [])
        fk_d = kw.pop("fk_d", [])
        defaults = kw.pop("defaults", [])
        keys = [k(x) for x in ck_s + ck_d + fk_s + fk_d]
        counts = (len(ck_s), len(ck_d), len(fk_s), len(fk_d))

        def fn(ser, empty, *rest, kw=kw, counts=counts):
            a, b, c, d = counts
            keys, defaults, name = rest[:a + b + c + d], rest[a + b + c + d:-1], rest[-1]
            return pss(ser, empty, list(keys[:a]), list(keys[a:a + b]),
                       list(keys[a + b:a + b + c]), list(keys[a + b + c:]), list(defaults),
                       name, **kw)
        fam.add("ParseSingleSequenceExample", fn, [k(ser), s()] + keys + defaults + [k("")],
                f"ParseSingleSequenceExample/error/{name}")


def family():
    fam = Family("parsing_more")
    parse_example_v1(fam)
    decode_compressed(fam)
    decode_padded_raw(fam)
    parse_single_sequence(fam)
    return fam
