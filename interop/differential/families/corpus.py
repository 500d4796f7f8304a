"""Whole pipelines of the kinds TensorFlow users write for text,
recommendation, time series and mixing sources, each compared element by
element with TensorFlow's own iteration: several op families at once, the
way they meet in real input pipelines.

Files (a vocabulary) are written under crates/tfdata-graph/tests/data/corpus
and named relative to the crate, where `cargo test` replays the cases."""

import os

import numpy as np
import tensorflow as tf

from harness import Family, in_crate

DATA = "tests/data/corpus"
D = tf.data.Dataset

SENTENCES = [
    "The quick brown fox jumps over the lazy dog",
    "tf.data service moves input preprocessing off the trainers",
    "", "  leading and trailing spaces  ", "ÉLAN vital, naïve café!",
    "emoji 😀 and numbers 12345", "repeated repeated repeated words words",
    "a", "Punctuation; should: be? removed!", "UPPER lower MiXeD",
]


def write_files():
    os.makedirs(DATA, exist_ok=True)
    with open(f"{DATA}/vocab.txt", "w") as f:
        f.write("\n".join(["the", "quick", "fox", "dog", "data", "input", "words", "café"]) + "\n")


def family():
    fam = Family("corpus")
    with in_crate():
        write_files()
        build(fam)
    return fam


def build(fam):
    text = D.from_tensor_slices(SENTENCES)

    # Text: normalise, split, hash to buckets, pad to a fixed length.
    def hashed(s):
        s = tf.strings.lower(s, encoding="utf-8")
        s = tf.strings.regex_replace(s, r"[^\w\s]", "")
        tokens = tf.strings.split(s)
        ids = tf.strings.to_hash_bucket_fast(tokens, 1000)
        ids = ids[:8]
        return tf.pad(ids, [[0, 8 - tf.shape(ids)[0]]], constant_values=-1)
    fam.add_dataset("text: lower, clean, split, hash, pad", text.map(hashed).batch(4))

    # Text: vocabulary file with OOV buckets, then padded batches by length.
    def vocab_ids(table):
        def f(s):
            tokens = tf.strings.split(tf.strings.lower(s, encoding="utf-8"))
            return table.lookup(tokens)
        return f
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.TextFileInitializer(f"{DATA}/vocab.txt", tf.string,
                                      tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                      tf.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=5)
    fam.add_dataset("text: vocabulary with OOV buckets, padded_batch",
                    text.map(vocab_ids(table)).padded_batch(3, padding_values=tf.constant(-1, tf.int64)))

    # Recommendation features: variable-length ids from tf.train.Example,
    # hashed categorical features, a dense float, parsed in batches.
    rng = np.random.default_rng(17)
    records = []
    for i in range(12):
        items = rng.integers(0, 10_000, rng.integers(0, 6)).tolist()
        records.append(tf.train.Example(features=tf.train.Features(feature={
            "user": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"user{i % 5}".encode()])),
            "items": tf.train.Feature(int64_list=tf.train.Int64List(value=items)),
            "age": tf.train.Feature(float_list=tf.train.FloatList(value=[float(20 + i)])),
        })).SerializeToString(deterministic=True))
    spec = {"user": tf.io.FixedLenFeature([], tf.string),
            "items": tf.io.VarLenFeature(tf.int64),
            "age": tf.io.FixedLenFeature([], tf.float32, default_value=0.0)}

    def recsys(batch):
        f = tf.io.parse_example(batch, spec)
        items = tf.sparse.to_dense(f["items"], default_value=-1)
        user = tf.strings.to_hash_bucket_fast(f["user"], 64)
        age = (f["age"] - 25.0) / 10.0
        counts = tf.math.bincount(tf.cast(tf.maximum(items, 0) % 7, tf.int32), minlength=7,
                                  axis=-1)
        return {"user": user, "items": items, "age": age, "item_buckets": counts}
    fam.add_dataset("recsys: var-len ids, hashed users, batched parse",
                    D.from_tensor_slices(records).batch(4).map(recsys))

    # Time series: sliding windows of a signal with its next value as the label.
    series = np.sin(np.arange(60, dtype=np.float32) / 5.0)
    windows = D.from_tensor_slices(series).window(10, shift=3, drop_remainder=True).flat_map(
        lambda w: w.batch(10)).map(lambda w: (w[:-1], w[-1]))
    fam.add_dataset("time series: sliding windows, next-value labels", windows.batch(4))
    fam.add_dataset("time series: window, scan mean", D.from_tensor_slices(series).scan(
        (tf.constant(0.0), tf.constant(0.0)),
        lambda st, x: ((st[0] + x, st[1] + 1.0), (st[0] + x) / (st[1] + 1.0))).take(20))

    # Bucketing sentences by length.
    tokens = text.map(lambda s: tf.strings.split(s))
    fam.add_dataset("bucket_by_sequence_length", tokens.bucket_by_sequence_length(
        lambda t: tf.shape(t)[0], bucket_boundaries=[2, 5], bucket_batch_sizes=[3, 2, 2],
        padding_values=""))

    # Weighted mixing of sources with a seed.
    a = D.range(0, 20).map(lambda x: tf.strings.as_string(x))
    b = D.range(100, 110).map(lambda x: tf.strings.as_string(x))
    c = text
    fam.add_dataset("weighted mixing, seeded", D.sample_from_datasets(
        [a, b, c], weights=[0.5, 0.3, 0.2], seed=42, stop_on_empty_dataset=True))
    fam.add_dataset("choose_from_datasets round robin", D.choose_from_datasets(
        [a, b], D.range(2).repeat(8)))

    # Shuffled, repeated, batched training input with a seed.
    fam.add_dataset("train input: shuffle, repeat, map, batch, prefetch",
                    D.from_tensor_slices((np.arange(20, dtype=np.int64),
                                          np.arange(20, dtype=np.float32) / 2)).shuffle(
                        8, seed=5).repeat(2).map(lambda x, y: (x * 2, y + 1.0),
                                                 num_parallel_calls=2).batch(6).prefetch(1),
                    iterators=1)
