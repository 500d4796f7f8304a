"""Files a tfdata worker writes while it runs a TensorFlow 2.21 pipeline,
read back by TensorFlow: V2 checkpoints (`SaveV2`, `MergeV2Checkpoints`), V1
checkpoints (`Save`),
TFRecord files (`DatasetToTFRecord`, uncompressed and GZIP) and `WriteFile`.

Each pipeline is distributed by TensorFlow's client to our dispatcher and
served by one `tfdata worker`; its map function writes files named after
the element. TensorFlow then reads them with its own readers
(`tf.train.load_checkpoint`, `TFRecordDataset`, `read_file`), and the same
pipeline run by TensorFlow locally writes files of the same bytes
(checkpoints and uncompressed TFRecords are deterministic)."""

import os

import numpy as np
import tensorflow as tf

from conftest import TfdataProcess

service = tf.data.experimental.service
R = tf.raw_ops

TENSORS = {
    "weights": tf.constant([[1.5, -0.0], [np.inf, 2.25]], tf.float32),
    "step": tf.constant(42, tf.int64),
    "names": tf.constant(["", "héllo", "x" * 300]),
    "mask": tf.constant([True, False]),
    "half": tf.constant([0.5, -2.0], tf.float16),
}
RECORDS = ["", "a", "héllo", "x" * 70000]


def writer_pipeline(root):
    """Element i writes, under `root`: checkpoint `ckpt-i` (then merged with a
    second bundle into `merged-i`), `records-i.tfrecord` (i + 1 records),
    `records-i.gz` (GZIP), the V1 checkpoint `v1-i` and `file-i.txt`; it yields i once all are written."""
    names = sorted(TENSORS)

    def write(i):
        base = tf.strings.join([root, "/", tf.strings.as_string(i)])
        ckpt = tf.strings.join([base, "-ckpt"])
        other = tf.strings.join([base, "-other"])
        merged = tf.strings.join([base, "-merged"])
        s1 = R.SaveV2(prefix=ckpt, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[TENSORS[n] for n in names])
        s2 = R.SaveV2(prefix=other, tensor_names=["extra"], shape_and_slices=[""],
                      tensors=[tf.cast(i, tf.int32)])
        with tf.control_dependencies([s1, s2]):
            m = R.MergeV2Checkpoints(checkpoint_prefixes=tf.stack([ckpt, other]),
                                     destination_prefix=merged)
        with tf.control_dependencies([m]):
            # The merge moved the first bundle away: written again.
            s3 = R.SaveV2(prefix=ckpt, tensor_names=names,
                          shape_and_slices=[""] * len(names),
                          tensors=[TENSORS[n] for n in names])
        records = tf.data.Dataset.from_tensor_slices(RECORDS).take(i + 1)
        t1 = R.DatasetToTFRecord(input_dataset=records._variant_tensor,
                                 filename=tf.strings.join([base, "-records.tfrecord"]),
                                 compression_type="")
        t2 = R.DatasetToTFRecord(input_dataset=records._variant_tensor,
                                 filename=tf.strings.join([base, "-records.gz"]),
                                 compression_type="GZIP")
        v1 = R.Save(filename=tf.strings.join([base, "-v1"]), tensor_names=names,
                    data=[TENSORS[n] for n in names])
        w = tf.io.write_file(tf.strings.join([base, "-file.txt"]),
                             tf.strings.join(["element ", tf.strings.as_string(i)]))
        with tf.control_dependencies([s3, t1, t2, v1, w]):
            return tf.identity(i)

    return tf.data.Dataset.range(3).map(write)


def run_on_tfdata_worker(tfdata_dispatcher, ds):
    d = tfdata_dispatcher()
    worker = TfdataProcess("worker", "--dispatcher-address", f"localhost:{d.port}")
    try:
        got = list(ds.apply(service.distribute(
            processing_mode="parallel_epochs", service=f"grpc://localhost:{d.port}"))
            .as_numpy_iterator())
    finally:
        assert worker.stop() == 0
    return got


def check_files(root):
    for i in range(3):
        base = os.path.join(root, str(i))
        reader = tf.train.load_checkpoint(base + "-ckpt")
        for name, want in TENSORS.items():
            np.testing.assert_array_equal(reader.get_tensor(name), want.numpy())
        merged = tf.train.load_checkpoint(base + "-merged")
        assert merged.get_tensor("extra") == i
        np.testing.assert_array_equal(merged.get_tensor("names"), TENSORS["names"].numpy())
        want = [r.encode() for r in RECORDS[:i + 1]]
        got = [r.numpy() for r in tf.data.TFRecordDataset(base + "-records.tfrecord")]
        assert got == want
        got = [r.numpy() for r in tf.data.TFRecordDataset(base + "-records.gz", "GZIP")]
        assert got == want
        assert tf.io.read_file(base + "-file.txt").numpy() == f"element {i}".encode()
        for name, want in TENSORS.items():
            got = R.Restore(file_pattern=base + "-v1", tensor_name=name, dt=want.dtype)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_tensorflow_reads_what_a_tfdata_worker_wrote(tfdata_dispatcher, tmp_path):
    ours = str(tmp_path / "tfdata")
    theirs = str(tmp_path / "tensorflow")
    os.makedirs(ours)
    os.makedirs(theirs)
    got = run_on_tfdata_worker(tfdata_dispatcher, writer_pipeline(ours))
    assert sorted(got) == [0, 1, 2]
    check_files(ours)

    # TensorFlow's own run writes the same bytes (GZIP streams may differ:
    # zlib implementations are free to compress differently).
    assert sorted(writer_pipeline(theirs).as_numpy_iterator()) == [0, 1, 2]
    check_files(theirs)
    for name in sorted(os.listdir(theirs)):
        if name.endswith(".gz"):
            continue
        with open(os.path.join(theirs, name), "rb") as a, open(os.path.join(ours, name), "rb") as b:
            assert a.read() == b.read(), name
    assert sorted(os.listdir(theirs)) == sorted(os.listdir(ours))
