"""tf.io.parse_sequence_example's ops: ParseSequenceExampleV2 (context and
feature lists, sparse, dense with defaults, ragged; batched and scalar
records; the dense lists' lengths and padding; missing-assumed-empty) and
the V1 ParseSequenceExample, with TensorFlow's errors for missing required
features, wrong types, shape mismatches and records its parser refuses."""

import tensorflow as tf
from google.protobuf import text_format

from harness import Family

R = tf.raw_ops
k = tf.constant


def seq(text):
    return text_format.Parse(text, tf.train.SequenceExample()).SerializeToString(
        deterministic=True)


A = seq('''
context { feature { key: "id" value { int64_list { value: [7] } } }
          feature { key: "tags" value { bytes_list { value: ["a", "\\303\\251"] } } }
          feature { key: "score" value { float_list { value: [1.5, -0.0] } } } }
feature_lists {
  feature_list { key: "tok" value { feature { int64_list { value: [1, 2] } }
                                    feature { int64_list { value: [3, -9223372036854775808] } }
                                    feature { int64_list { value: [5, 9223372036854775807] } } } }
  feature_list { key: "w" value { feature { float_list { value: [0.5] } }
                                  feature { float_list { value: [] } }
                                  feature { float_list { value: [1, nan, -inf] } } } }
  feature_list { key: "words" value { feature { bytes_list { value: ["x"] } }
                                      feature { bytes_list { value: ["y", ""] } } } }
  feature_list { key: "empty" value { } }
}''')
B = seq('''
context { feature { key: "tags" value { bytes_list { value: ["c"] } } }
          feature { key: "score" value { float_list { value: [inf, 2] } } } }
feature_lists {
  feature_list { key: "tok" value { feature { int64_list { value: [9, 9] } } } }
  feature_list { key: "w" value { feature { } feature { float_list { value: [4] } } } }
}''')
EMPTY = b""

# Hand-made records: a context map entry with its value before its key
# (TensorFlow's parser refuses it), an unknown top-level field (skipped),
# a cut record.
VALUE_FIRST = bytes([0x0a, 0x0b, 0x0a, 0x09, 0x12, 0x03, 0x1a, 0x01, 0x00, 0x0a, 0x02]) + b"id"
UNKNOWN_FIELD = bytes([0x18, 0x05]) + B + bytes([0x25, 1, 2, 3, 4])
CUT = A[:-3]


def v2(ser, name, cs, cd, cr, fs, fd, fr, empty, defaults, cs_t=(), cr_t=(), cr_s=(),
       cd_shapes=(), fs_t=(), fd_t=(), fd_shapes=(), fr_t=(), fr_s=()):
    return tf.nest.flatten(R.ParseSequenceExampleV2(
        serialized=ser, debug_name=name, context_sparse_keys=cs, context_dense_keys=cd,
        context_ragged_keys=cr, feature_list_sparse_keys=fs, feature_list_dense_keys=fd,
        feature_list_ragged_keys=fr, feature_list_dense_missing_assumed_empty=empty,
        context_dense_defaults=defaults, Ncontext_sparse=len(cs_t),
        context_sparse_types=list(cs_t), context_ragged_value_types=list(cr_t),
        context_ragged_split_types=list(cr_s), context_dense_shapes=list(cd_shapes),
        Nfeature_list_sparse=len(fs_t), Nfeature_list_dense=len(fd_t),
        feature_list_sparse_types=list(fs_t), feature_list_dense_types=list(fd_t),
        feature_list_dense_shapes=list(fd_shapes), feature_list_ragged_value_types=list(fr_t),
        feature_list_ragged_split_types=list(fr_s)))


def add_v2(fam, case_id, ser, name=(), cs=(), cd=(), cr=(), fs=(), fd=(), fr=(), empty=(),
           defaults=(), **attrs):
    """One ParseSequenceExampleV2 case: keys, flags and defaults as inputs."""
    keys = [k(list(x), tf.string, shape=[len(x)]) for x in (cs, cd, cr, fs, fd, fr)]
    inputs = [k(ser, tf.string), k(list(name), tf.string, shape=[len(name)]) if not isinstance(name, bytes)
              else k(name)] + keys + [k(list(empty), tf.bool, shape=[len(empty)])] + list(defaults)

    def fn(ser, name, cs, cd, cr, fs, fd, fr, empty, *defaults):
        return v2(ser, name, cs, cd, cr, fs, fd, fr, empty, list(defaults), **attrs)
    fam.add("ParseSequenceExampleV2", fn, inputs, "ParseSequenceExampleV2/" + case_id)


S, I, F = tf.string, tf.int64, tf.float32


def cases_v2(fam):
    add_v2(fam, "batch/everything", [A, B, EMPTY], cd=["id", "score"], cd_shapes=[[], [2]],
           defaults=[k(-1, I), k([0.25, 0.5], F)], cr=["tags"], cr_t=[S], cr_s=[tf.int64],
           fs=["w"], fs_t=[F], fd=["tok", "gone"], fd_t=[I, S],
           fd_shapes=[[2], []], empty=[True, True], fr=["words", "empty"], fr_t=[S, F],
           fr_s=[tf.int32, tf.int64])
    add_v2(fam, "batch/names", [B, A], name=[b"first", b"second"], cs=["tags", "score"],
           cs_t=[S, F], fd=["tok"], fd_t=[I], fd_shapes=[[2]], empty=[False])
    add_v2(fam, "scalar/context and lists", A, cs=["tags"], cs_t=[S], cd=["id", "nope"],
           cd_shapes=[[1], [2, 1]], defaults=[k([0], I), k([[4], [5]], I)],
           fs=["w", "words", "missing"], fs_t=[F, S, I], fd=["tok", "empty", "gone"],
           fd_t=[I, S, F], fd_shapes=[[2], [], [3]], empty=[False, False, True])
    add_v2(fam, "scalar/empty record", EMPTY, fs=["w"], fs_t=[F], fd=["tok"], fd_t=[I],
           fd_shapes=[[2]], empty=[True])
    add_v2(fam, "batch/empty batch", [], cd=["id"], cd_shapes=[[]], defaults=[k(3, I)],
           fd=["tok"], fd_t=[I], fd_shapes=[[2]], empty=[True], fr=["w"], fr_t=[F],
           fr_s=[tf.int32])
    add_v2(fam, "batch/duplicate sparse key", [A, B], cs=["tags", "tags"], cs_t=[S, S])
    add_v2(fam, "batch/unknown field skipped", [UNKNOWN_FIELD], fs=["tok"], fs_t=[I])
    add_v2(fam, "batch/2-d dense list rows", [A, B], fd=["tok"], fd_t=[I], fd_shapes=[[1, 2]],
           empty=[False])
    errs = [
        ("context required (some)", [B, A], dict(cd=["id"], cd_shapes=[[]],
                                                 defaults=[k([], I)])),
        ("context required (none)", [B], dict(cd=["id"], cd_shapes=[[]], defaults=[k([], I)])),
        ("context count", [A], dict(cd=["score"], cd_shapes=[[3]], defaults=[k([], F)])),
        ("context count in one", [A, B], dict(cd=["tags"], cd_shapes=[[2]],
                                              defaults=[k(["p", "q"], S)])),
        ("context type", [B, A], dict(name=[b"n0", b"n1"], cd=["id"], cd_shapes=[[]],
                                      defaults=[k(1.0, F)])),
        ("context sparse type", [A], dict(cs=["tags"], cs_t=[I])),
        ("context ragged type", [A], dict(cr=["score"], cr_t=[S], cr_s=[tf.int64])),
        ("default shape", [A], dict(cd=["id"], cd_shapes=[[1]], defaults=[k(1, I)])),
        ("list required", [A, B], dict(name=[b"a", b"b"], fd=["score"], fd_t=[S],
                                       fd_shapes=[[]], empty=[False])),
        ("list row count", [B], dict(fd=["w"], fd_t=[F], fd_shapes=[[1]], empty=[True])),
        ("list empty row", [A], dict(fd=["w"], fd_t=[F], fd_shapes=[[1]], empty=[True])),
        ("list total", [A], dict(fd=["w"], fd_t=[F], fd_shapes=[[3]], empty=[True])),
        ("list type", [A], dict(fd=["tok"], fd_t=[F], fd_shapes=[[2]], empty=[False])),
        ("sparse list type", [B, A], dict(name=[b"x", b"y"], fs=["words"], fs_t=[I])),
        ("ragged list type", [A], dict(fr=["w"], fr_t=[S], fr_s=[tf.int32])),
        ("sparse and ragged", [A], dict(cs=["tags"], cs_t=[S], cr=["tags"], cr_t=[S],
                                        cr_s=[tf.int32])),
        ("dense and sparse lists", [A], dict(fs=["tok"], fs_t=[I], fd=["tok"], fd_t=[I],
                                             fd_shapes=[[2]], empty=[True])),
        ("value before key", [VALUE_FIRST], dict(cs=["id"], cs_t=[I])),
        ("cut record", [B, CUT], dict(cs=["id"], cs_t=[I])),
        ("garbage", [b"\x0a\x05garbage"], dict(cs=["id"], cs_t=[I])),
        ("names count", [A, B], dict(name=[b"one"], cs=["id"], cs_t=[I])),
        ("matrix", [[A]], dict(cs=["id"], cs_t=[I])),
    ]
    for name, ser, kw in errs:
        add_v2(fam, "error/" + name, ser, **kw)


def cases_v1(fam):
    def v1(ser, name, *defaults, **attrs):
        return tf.nest.flatten(R.ParseSequenceExample(
            serialized=ser, debug_name=name, context_dense_defaults=list(defaults), **attrs))

    def add(case_id, ser, defaults=(), name=(), **attrs):
        attrs.setdefault("Ncontext_sparse", len(attrs.get("context_sparse_keys", [])))
        attrs.setdefault("Ncontext_dense", len(attrs.get("context_dense_keys", [])))
        attrs.setdefault("Nfeature_list_sparse", len(attrs.get("feature_list_sparse_keys", [])))
        attrs.setdefault("Nfeature_list_dense", len(attrs.get("feature_list_dense_keys", [])))
        for key in ("feature_list_dense_missing_assumed_empty", "context_sparse_keys",
                    "context_dense_keys", "feature_list_sparse_keys",
                    "feature_list_dense_keys"):
            attrs.setdefault(key, [])
        fam.add("ParseSequenceExample", lambda s, n, *d: v1(s, n, *d, **attrs),
                [k(ser, tf.string), k(list(name), tf.string, shape=[len(name)])] + list(defaults),
                "ParseSequenceExample/" + case_id)

    add("batch", [A, B], defaults=[k([9, 9], I)], context_sparse_keys=["tags"],
        context_sparse_types=[S], context_dense_keys=["nope"], context_dense_shapes=[[2]],
        feature_list_sparse_keys=["words"], feature_list_sparse_types=[S],
        feature_list_dense_keys=["tok", "w2"], feature_list_dense_types=[I, F],
        feature_list_dense_shapes=[[2], []],
        feature_list_dense_missing_assumed_empty=["w2"])
    add("scalar", A, context_dense_keys=["id"], context_dense_shapes=[[]],
        defaults=[k([], I)], feature_list_dense_keys=["tok"], feature_list_dense_types=[I],
        feature_list_dense_shapes=[[2]], feature_list_dense_missing_assumed_empty=["tok"])
    add("error/list required", [A, B], feature_list_dense_keys=["score"],
        feature_list_dense_types=[S], feature_list_dense_shapes=[[]])


def pipelines(fam):
    """tf.io.parse_sequence_example and parse_single_sequence_example in a
    dataset map, as pipelines call them (dense outputs)."""
    context = {"id": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
               "score": tf.io.FixedLenFeature([2], tf.float32, default_value=[0.0, 0.0])}
    sequence = {"tok": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True)}

    def batched(s):
        c, f, lengths = tf.io.parse_sequence_example(s, context_features=context,
                                                     sequence_features=sequence)
        return c["id"], c["score"], f["tok"], lengths["tok"]

    def single(s):
        c, f = tf.io.parse_single_sequence_example(s, context_features=context,
                                                   sequence_features=sequence)
        return c["id"], c["score"], f["tok"]
    records = tf.data.Dataset.from_tensor_slices(tf.constant([A, B, EMPTY, B]))
    fam.add_dataset("ParseSequenceExampleV2/pipeline/batched", records.batch(3).map(batched))
    fam.add_dataset("ParseSequenceExampleV2/pipeline/single", records.map(single))


def family():
    fam = Family("parsing_seq")
    cases_v2(fam)
    cases_v1(fam)
    pipelines(fam)
    return fam
