"""Pipelines the way users write them, over the core tf.data ops: sources
(tensors, files in each format, listed files), maps and filters, batching
and padding, interleaves, shuffles with seeds, zips, repeats, shards,
caches and the wrapper ops, each the GraphDef tf.data serializes, compared
element by element with TensorFlow's own iteration.

File sources read files written here under crates/tfdata-graph/tests/data/
pipelines (committed) by paths relative to the crate, which is where
`cargo test` runs the replay."""

import gzip
import os

import numpy as np
import tensorflow as tf

from harness import Family, in_crate

DATA = "tests/data/pipelines"


def example(i):
    return tf.train.Example(features=tf.train.Features(feature={
        "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"row {i}".encode()])),
        "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i % 4)))),
    })).SerializeToString(deterministic=True)


def write_files():
    os.makedirs(DATA, exist_ok=True)
    for shard in range(2):
        path = f"{DATA}/records-{shard}.tfrecord"
        with tf.io.TFRecordWriter(path) as w:
            for i in range(shard * 5, shard * 5 + 5):
                w.write(example(i))
        with tf.io.TFRecordWriter(path + ".gz", options="GZIP") as w:
            for i in range(shard * 5, shard * 5 + 5):
                w.write(example(i))
    with open(f"{DATA}/lines.csv", "w") as f:
        f.write("id,name,score\n1,alpha,0.5\n2,beta,1.5\n3,\"gamma, the third\",2.5\n4,,\n")
    # mtime 0: the same bytes every time the cases are regenerated.
    with open(f"{DATA}/lines.txt.gz", "wb") as raw, \
            gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write("un\ndeux\n\ntrois é\n".encode())
    with open(f"{DATA}/fixed.bin", "wb") as f:
        f.write(b"HEAD" + bytes(range(24)) + b"FOOT!")


def family():
    fam = Family("pipelines_core")
    with in_crate():
        write_files()
        build(fam)
    return fam


def build(fam):
    D = tf.data.Dataset
    rng = np.random.default_rng(3)
    feats = {"a": rng.integers(0, 100, 12).astype(np.int64),
             "b": rng.random((12, 2)).astype(np.float32),
             "s": np.array([f"item {i}".encode() for i in range(12)])}

    fam.add_dataset("map filter batch", D.range(20).map(lambda x: x * 3).filter(
        lambda x: x % 2 == 0).batch(4))
    fam.add_dataset("slices of a dict, batch drop_remainder",
                    D.from_tensor_slices(feats).batch(5, drop_remainder=True))
    fam.add_dataset("from_tensors and unbatch", D.from_tensors(feats).unbatch().take(7))
    fam.add_dataset("seeded shuffle", D.range(30).shuffle(10, seed=7).batch(6), iterators=1)
    fam.add_dataset("seeded shuffle of a dict", D.from_tensor_slices(feats).shuffle(
        12, seed=11, reshuffle_each_iteration=False).map(lambda d: (d["a"], d["s"])))
    fam.add_dataset("shuffle and repeat, seeded", D.range(6).shuffle(6, seed=2).repeat(3),
                    iterators=1)
    fam.add_dataset("padded_batch of strings and ids", D.from_tensor_slices(
        tf.constant(["a b c", "d", "", "e f", "g h i j"])).map(
        lambda s: (tf.strings.split(s), tf.strings.length(s))).padded_batch(
        2, padded_shapes=([4], []), padding_values=("<pad>", tf.constant(-1, tf.int32))))
    fam.add_dataset("padded_batch to the longest", D.range(1, 7).map(
        lambda n: tf.range(n)).padded_batch(4))
    fam.add_dataset("interleave", D.range(1, 4).interleave(
        lambda x: D.from_tensors(x).repeat(x), cycle_length=2, block_length=2))
    fam.add_dataset("parallel interleave, deterministic", D.range(1, 5).interleave(
        lambda x: D.range(x * 10, x * 10 + 3), cycle_length=3, num_parallel_calls=2,
        deterministic=True))
    fam.add_dataset("flat_map of splits", D.from_tensor_slices(
        tf.constant(["x y", "z"])).flat_map(lambda s: D.from_tensor_slices(tf.strings.split(s))))
    fam.add_dataset("zip, concatenate, skip, take", D.zip(
        (D.range(5), D.range(10, 15))).concatenate(D.zip((D.range(3), D.range(3)))).skip(
        2).take(5))
    fam.add_dataset("repeat and shard", D.range(7).repeat(2).shard(3, 1))
    fam.add_dataset("enumerate", D.from_tensor_slices(feats["s"]).enumerate(start=5))
    fam.add_dataset("parallel map, deterministic", D.range(15).map(
        lambda x: tf.cast(x, tf.float32) / 4, num_parallel_calls=3, deterministic=True))
    fam.add_dataset("parallel batch", D.range(11).batch(3, num_parallel_calls=2,
                                                        deterministic=True))
    fam.add_dataset("map_and_batch", D.range(9).apply(tf.data.experimental.map_and_batch(
        lambda x: x + 1, 4)))
    fam.add_dataset("cache and prefetch", D.range(8).map(lambda x: x * x).cache().prefetch(2))
    fam.add_dataset("options and assert_cardinality", D.range(6).apply(
        tf.data.experimental.assert_cardinality(6)).with_options(tf.data.Options()))
    fam.add_dataset("legacy parallel_interleave", D.range(3).apply(
        tf.data.experimental.parallel_interleave(lambda x: D.range(x), cycle_length=2)))
    fam.add_dataset("shuffle_and_repeat", D.range(5).apply(
        tf.data.experimental.shuffle_and_repeat(5, count=2, seed=9)), iterators=1)
    # Files.
    records = [f"{DATA}/records-0.tfrecord", f"{DATA}/records-1.tfrecord"]
    spec = {"id": tf.io.FixedLenFeature([], tf.int64),
            "text": tf.io.FixedLenFeature([], tf.string),
            "tokens": tf.io.VarLenFeature(tf.int64)}
    fam.add_dataset("TFRecord, parse_example", tf.data.TFRecordDataset(records).batch(3).map(
        lambda b: (lambda d: (d["id"], d["text"], tf.sparse.to_dense(d["tokens"])))(
            tf.io.parse_example(b, spec))))
    fam.add_dataset("TFRecord gzip, interleaved", D.from_tensor_slices(
        [r + ".gz" for r in records]).interleave(
        lambda f: tf.data.TFRecordDataset(f, compression_type="GZIP"), cycle_length=2))
    fam.add_dataset("TFRecord, parse_single_example", tf.data.TFRecordDataset(records[1]).map(
        lambda r: tf.io.parse_single_example(r, {"id": spec["id"]})["id"]))
    fam.add_dataset("list_files, unshuffled", D.list_files(f"{DATA}/records-*.tfrecord",
                                                           shuffle=False))
    fam.add_dataset("TextLine csv, skip header, decode_csv", tf.data.TextLineDataset(
        f"{DATA}/lines.csv").skip(1).map(lambda line: tf.io.decode_csv(
            line, record_defaults=[0, "", 0.0])))
    fam.add_dataset("TextLine gzip", tf.data.TextLineDataset(f"{DATA}/lines.txt.gz",
                                                             compression_type="GZIP"))
    fam.add_dataset("FixedLengthRecord header footer", tf.data.FixedLengthRecordDataset(
        f"{DATA}/fixed.bin", record_bytes=6, header_bytes=4, footer_bytes=5).map(
        lambda r: tf.io.decode_raw(r, tf.uint8)))
