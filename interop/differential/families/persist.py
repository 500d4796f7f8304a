"""Persistence ops: checkpoint file names (ShardedFilename,
ShardedFilespec), WriteFile, and V2 checkpoints (SaveV2, RestoreV2,
MergeV2Checkpoints).

TensorFlow writes a checkpoint of every dtype and edge value under
crates/tfdata-graph/tests/data/persist/ckpt (committed); RestoreV2 cases read
it by a path relative to the crate, where the Rust test runs, and the crate's
unit test rewrites it byte for byte. Ops that write files (WriteFile, SaveV2,
MergeV2Checkpoints) are traced functions that write under
/tmp/tfdata-differential-persist* and read back what they wrote."""

import glob
import os
import shutil

import numpy as np
import tensorflow as tf

from harness import Family, in_crate, rename_op

R = tf.raw_ops
DATA = "tests/data/persist"
TMP = "/tmp/tfdata-differential-persist"

# The committed checkpoint: name -> tensor.
CKPT = {
    "f32": tf.constant([[1.5, -0.0], [np.nan, np.inf]], tf.float32),
    "f64": tf.constant([-np.inf, 1e-300, 2.5], tf.float64),
    "f16": tf.constant([0.5, -65504.0], tf.float16),
    "bf16": tf.constant([1.0, -3.0, 7.5], tf.bfloat16),
    "i8": tf.constant([-128, 127], tf.int8),
    "i16": tf.constant([-32768, 5], tf.int16),
    "i32": tf.constant([[1, 2], [3, -2**31]], tf.int32),
    "i64": tf.constant(-2**63, tf.int64),
    "u8": tf.constant([0, 255], tf.uint8),
    "u16": tf.constant([65535], tf.uint16),
    "u32": tf.constant([2**32 - 1], tf.uint32),
    "u64": tf.constant([2**64 - 1], tf.uint64),
    "bool": tf.constant([True, False, True]),
    "c64": tf.constant([1 + 2j, -0.5j], tf.complex64),
    "c128": tf.constant([3 - 4j], tf.complex128),
    "str": tf.constant(["", "héllo", "x" * 300, "\x00\xff"]),
    "str_scalar": tf.constant("one"),
    "empty": tf.zeros([0, 3], tf.float32),
    "empty_str": tf.constant([], tf.string),
    "layer/kernel/.ATTRIBUTES/VARIABLE_VALUE": tf.constant([[0.25]], tf.float32),
}


def s(*v):
    return tf.constant(list(v), tf.string)


def no_result(fn):
    """`fn` (an op with no outputs) as a function returning `True` once the
    op ran. The result waits for the op: TensorFlow leaves some such ops
    (SaveV2) out of a function's control outputs and runs them because its
    function runtime keeps every stateful node, where our executor runs
    the nodes the results need."""
    def run(*args):
        op = fn(*args)
        if op is None:  # eager: it ran
            return tf.constant(True)
        with tf.control_dependencies([op]):
            return tf.constant(True)
    return run


def family():
    with in_crate():
        return build()


def write_checkpoint():
    d = os.path.join(DATA, "ckpt")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    names = sorted(CKPT)
    R.SaveV2(prefix=os.path.join(d, "all"), tensor_names=names,
             shape_and_slices=[""] * len(names), tensors=[CKPT[n] for n in names])


def build():
    f = Family("persist")
    i32 = lambda v: tf.constant(v, tf.int32)  # noqa: E731

    for i, (base, shard, n) in enumerate([
            ("model.ckpt", 0, 1), ("a/b", 3, 10), ("", 0, 0), ("x", -3, 100000000),
            ("ünï/ç", 99999, 100000), ("s", 2**31 - 1, -2**31)]):
        f.add("ShardedFilename",
              lambda b, sh, nn: R.ShardedFilename(basename=b, shard=sh, num_shards=nn),
              [tf.constant(base), i32(shard), i32(n)], f"sharded_filename/{i}")
        f.add("ShardedFilespec", lambda b, nn: R.ShardedFilespec(basename=b, num_shards=nn),
              [tf.constant(base), i32(n)], f"sharded_filespec/{i}")
    f.add("ShardedFilename", lambda b, sh, nn: R.ShardedFilename(basename=b, shard=sh, num_shards=nn),
          [s("a", "b"), i32(0), i32(1)], "sharded_filename/basename not scalar")
    f.add("ShardedFilename", lambda b, sh, nn: R.ShardedFilename(basename=b, shard=sh, num_shards=nn),
          [tf.constant("a"), i32([0]), i32(1)], "sharded_filename/shard not scalar")
    f.add("ShardedFilename", lambda b, sh, nn: R.ShardedFilename(basename=b, shard=sh, num_shards=nn),
          [tf.constant("a"), i32(0), i32([[1]])], "sharded_filename/num_shards not scalar")
    f.add("ShardedFilespec", lambda b, nn: R.ShardedFilespec(basename=b, num_shards=nn),
          [s("a"), i32(1)], "sharded_filespec/basename not scalar")
    f.add("ShardedFilespec", lambda b, nn: R.ShardedFilespec(basename=b, num_shards=nn),
          [tf.constant("a"), i32([1, 2])], "sharded_filespec/num_shards not scalar")

    # WriteFile: written, then read back (the read waits for the write).
    def write_then_read(path, contents):
        w = tf.io.write_file(path, contents)
        with tf.control_dependencies([w]):
            return tf.io.read_file(path)
    clean()
    for i, contents in enumerate([b"", b"hello", bytes(range(256)) * 40, "ünï".encode()]):
        f.add_function(f"write_file/{i}", write_then_read,
                       [tf.constant(f"{TMP}/write/{i}/new/dir/f.bin"), tf.constant(contents)])
    f.add_function("write_file/filename not scalar", no_result(lambda p, c: R.WriteFile(filename=p, contents=c)),
                   [s(f"{TMP}/w"), tf.constant("x")], unknown_shapes=True)
    f.add_function("write_file/contents not scalar", no_result(lambda p, c: R.WriteFile(filename=p, contents=c)),
                   [tf.constant(f"{TMP}/w"), s("x", "y")], unknown_shapes=True)

    # RestoreV2 of the checkpoint TensorFlow wrote.
    write_checkpoint()
    prefix = os.path.join(DATA, "ckpt", "all")
    names = sorted(CKPT)

    def restore(keys, dtypes, slices=None):
        slices = [""] * len(keys) if slices is None else slices
        return lambda p, k, sl: R.RestoreV2(prefix=p, tensor_names=k, shape_and_slices=sl,
                                            dtypes=dtypes)
    for n in names:
        f.add("RestoreV2", restore([n], [CKPT[n].dtype]),
              [tf.constant(prefix), s(n), s("")], f"restore/{n}")
    several = ["str", "f32", "i64", "bool"]
    f.add("RestoreV2", restore(several, [CKPT[n].dtype for n in several]),
          [tf.constant(prefix), s(*several), s(*[""] * 4)], "restore/several")
    f.add("RestoreV2", restore(["f32"], [tf.int32]),
          [tf.constant(prefix), s("f32"), s("")], "restore/wrong dtype")
    f.add("RestoreV2", restore(["str"], [tf.float64]),
          [tf.constant(prefix), s("str"), s("")], "restore/wrong dtype string")
    f.add("RestoreV2", restore(["nope"], [tf.int32]),
          [tf.constant(prefix), s("nope"), s("")], "restore/missing key")
    f.add("RestoreV2", restore(["f32", "i32"], [tf.float32]),
          [tf.constant(prefix), s("f32", "i32"), s("", "")], "restore/more names than dtypes")
    f.add("RestoreV2", restore(["f32"], [tf.float32]),
          [tf.constant(DATA + "/ckpt/missing"), s("f32"), s("")], "restore/missing checkpoint")

    # SaveV2 then RestoreV2 (and a merge) inside one function.
    def save_restore(p, t1, t2, t3):
        w = R.SaveV2(prefix=p, tensor_names=["b", "a", "c"], shape_and_slices=["", "", ""],
                     tensors=[t1, t2, t3])
        with tf.control_dependencies([w]):
            return R.RestoreV2(prefix=p, tensor_names=["a", "b", "c"],
                               shape_and_slices=["", "", ""],
                               dtypes=[t2.dtype, t1.dtype, t3.dtype])
    f.add_function("save_restore/mixed", save_restore,
                   [tf.constant(f"{TMP}-save-mixed/ckpt"), CKPT["str"], CKPT["f64"], CKPT["c64"]])
    f.add_function("save_restore/empty", save_restore,
                   [tf.constant(f"{TMP}-save-empty/ckpt"), CKPT["empty"], CKPT["empty_str"],
                    CKPT["i64"]])

    def save_dup(p, t):
        return R.SaveV2(prefix=p, tensor_names=["a", "a"], shape_and_slices=["", ""],
                        tensors=[t, t])
    f.add_function("save/missing parent directory", save_restore,
                   [tf.constant(f"{TMP}-no/such/dir/ckpt"), CKPT["str"], CKPT["f64"], CKPT["c64"]])
    f.add_function("save/duplicate key", no_result(save_dup),
                   [tf.constant(f"{TMP}-save-dup/ckpt"), tf.constant(1.0)])

    def save_counts(p, names, slices, t):
        return R.SaveV2(prefix=p, tensor_names=names, shape_and_slices=slices, tensors=[t])
    f.add_function("save/names and slices differ", no_result(save_counts),
                   [tf.constant(f"{TMP}/save/counts/ckpt"), s("a"), s("", ""), tf.constant(1.0)],
                   unknown_shapes=True)

    def save_tensors(p, names, slices, t):
        return R.SaveV2(prefix=p, tensor_names=names, shape_and_slices=slices, tensors=[t, t])
    f.add_function("save/names and tensors differ", no_result(save_tensors),
                   [tf.constant(f"{TMP}/save/tensors/ckpt"), s("a"), s(""), tf.constant(1.0)],
                   unknown_shapes=True)

    def save_merge_restore(d, t1, t2):
        a, b, m = d + "/a", d + "/b", d + "/merged"
        w1 = R.SaveV2(prefix=a, tensor_names=["x", "z"], shape_and_slices=["", ""],
                      tensors=[t1, t2])
        w2 = R.SaveV2(prefix=b, tensor_names=["y"], shape_and_slices=[""], tensors=[t2])
        with tf.control_dependencies([w1, w2]):
            mg = R.MergeV2Checkpoints(checkpoint_prefixes=[a, b], destination_prefix=m)
        with tf.control_dependencies([mg]):
            return R.RestoreV2(prefix=m, tensor_names=["z", "y", "x"],
                               shape_and_slices=["", "", ""],
                               dtypes=[t2.dtype, t2.dtype, t1.dtype])
    f.add_function("merge/two bundles", save_merge_restore,
                   [tf.constant(f"{TMP}-merge-two"), CKPT["str"], CKPT["i32"]])

    def merge_missing(d):
        return R.MergeV2Checkpoints(checkpoint_prefixes=[d + "/none"], destination_prefix=d + "/m")
    f.add_function("merge/missing", no_result(merge_missing), [tf.constant(f"{TMP}-merge-missing")])

    def merge_none_allowed(d):
        return R.MergeV2Checkpoints(checkpoint_prefixes=[d + "/none"], destination_prefix=d + "/m",
                                    allow_missing_files=True)
    f.add_function("merge/none exist", no_result(merge_none_allowed), [tf.constant(f"{TMP}-merge-none")])

    def merge_duplicate(d, t):
        a, b = d + "/a", d + "/b"
        w1 = R.SaveV2(prefix=a, tensor_names=["x"], shape_and_slices=[""], tensors=[t])
        w2 = R.SaveV2(prefix=b, tensor_names=["x"], shape_and_slices=[""], tensors=[t])
        with tf.control_dependencies([w1, w2]):
            return R.MergeV2Checkpoints(checkpoint_prefixes=[a, b], destination_prefix=d + "/m")
    f.add_function("merge/duplicate key", no_result(merge_duplicate),
                   [tf.constant(f"{TMP}-merge-dup"), tf.constant(1.0)])
    v1_cases(f)
    tfrecord_cases(f)
    clean()
    return f


def v1_cases(f):
    """Restore and RestoreSlice of a V1 checkpoint TensorFlow's Save wrote
    (committed under tests/data/persist/v1)."""
    d = os.path.join(DATA, "v1")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    # TensorFlow's V1 writer has no bfloat16, uint32 or uint64.
    names = sorted(n for n in CKPT if CKPT[n].dtype not in (tf.bfloat16, tf.uint32, tf.uint64))
    prefix = os.path.join(d, "all")
    R.Save(filename=prefix, tensor_names=names, data=[CKPT[n] for n in names])

    def restore(dt):
        return lambda p, n: R.Restore(file_pattern=p, tensor_name=n, dt=dt)
    for n in names:
        f.add("Restore", restore(CKPT[n].dtype), [tf.constant(prefix), tf.constant(n)],
              f"restore_v1/{n}")
    f.add("Restore", restore(tf.float32), [tf.constant(prefix[:-1] + "*"), tf.constant("f32")],
          "restore_v1/glob pattern")
    f.add("RestoreSlice",
          lambda p, n, sl: R.RestoreSlice(file_pattern=p, tensor_name=n, shape_and_slice=sl,
                                          dt=tf.string),
          [tf.constant(prefix), tf.constant("str"), tf.constant("")], "restore_slice_v1/whole")
    f.add("Restore", restore(tf.int32), [tf.constant(prefix), tf.constant("f32")],
          "restore_v1/wrong dtype")
    f.add("Restore", restore(tf.int32), [tf.constant(prefix), tf.constant("nope")],
          "restore_v1/missing tensor")
    f.add("Restore", restore(tf.int32), [tf.constant(d + "/none*"), tf.constant("f32")],
          "restore_v1/no files")

    # Save and SaveSlices (whole tensors), then Restore.
    def save_restore_v1(p, t1, t2):
        w = R.Save(filename=p, tensor_names=["z", "a"], data=[t1, t2])
        with tf.control_dependencies([w]):
            return (R.Restore(file_pattern=p, tensor_name="a", dt=t2.dtype),
                    R.Restore(file_pattern=p, tensor_name="z", dt=t1.dtype))
    f.add_function("save_v1/mixed", save_restore_v1,
                   [tf.constant(f"{TMP}-v1-mixed"), CKPT["str"], CKPT["c128"]])
    f.add_function("save_v1/empty", save_restore_v1,
                   [tf.constant(f"{TMP}-v1-empty"), CKPT["empty"], CKPT["empty_str"]])

    def save_slices_restore(p, t1, t2):
        w = R.SaveSlices(filename=p, tensor_names=["x", "y"], shapes_and_slices=["", ""],
                         data=[t1, t2])
        with tf.control_dependencies([w]):
            return (R.RestoreSlice(file_pattern=p, tensor_name="y", shape_and_slice="",
                                   dt=t2.dtype),
                    R.Restore(file_pattern=p, tensor_name="x", dt=t1.dtype))
    f.add_function("save_slices/whole tensors", save_slices_restore,
                   [tf.constant(f"{TMP}-v1-slices"), CKPT["f16"], CKPT["i64"]])


def tfrecord_cases(f):
    """DatasetToTFRecord in a map function: element i writes a dataset of
    i + 1 records to its own file (in /tmp, which exists: the op makes no
    directory) and reads the file's bytes back."""
    records = tf.constant(["", "a", "héllo", "x" * 1000, "\x00\xff"])

    def write_read(i, records=records, name="plain"):
        path = tf.strings.join([f"{TMP}-tfrecord-{name}-", tf.strings.as_string(i), ".tfrecord"])
        ds = tf.data.Dataset.from_tensor_slices(records).take(i + 1)
        w = R.DatasetToTFRecord(input_dataset=ds._variant_tensor, filename=path,
                                compression_type="")
        with tf.control_dependencies([w]):
            return tf.io.read_file(path)
    f.add_dataset("dataset_to_tfrecord/records", tf.data.Dataset.range(5).map(write_read))
    f.add_dataset("dataset_to_tfrecord/experimental",
                  tf.data.Dataset.range(2).map(lambda i: write_read(i, name="exp")),
                  edit=rename_op("DatasetToTFRecord", "ExperimentalDatasetToTFRecord"))
    f.add_dataset("dataset_to_tfrecord/empty dataset",
                  tf.data.Dataset.range(1).map(
                      lambda i: write_read(i - 1, name="empty")))

    def write_ints(i):
        ds = tf.data.Dataset.range(3)
        w = R.DatasetToTFRecord(input_dataset=ds._variant_tensor,
                                filename=f"{TMP}-tfrecord-ints.tfrecord", compression_type="")
        with tf.control_dependencies([w]):
            return i
    f.add_dataset_error("dataset_to_tfrecord/int64 elements",
                        tf.data.Dataset.range(1).map(write_ints), edit=lambda g: None)
    kernel_message(f)

    def write_pairs(i):
        ds = tf.data.Dataset.from_tensors((tf.constant("a"), tf.constant("b")))
        w = R.DatasetToTFRecord(input_dataset=ds._variant_tensor,
                                filename=f"{TMP}-tfrecord-pairs.tfrecord", compression_type="")
        with tf.control_dependencies([w]):
            return i
    f.add_dataset_error("dataset_to_tfrecord/two components",
                        tf.data.Dataset.range(1).map(write_pairs), edit=lambda g: None)
    kernel_message(f)


def kernel_message(f):
    """The last case's error as the kernel's message alone: TensorFlow
    prefixes a map function's error with the map's node number, which
    changes from run to run ("... passed to MapDataset:39 transformation
    with iterator: Iterator::Root::Prefetch::Map: <kernel's message>")."""
    err = f.cases[-1]["error"]
    err["message"] = err["message"].rsplit("::Map: ", 1)[1]


def clean():
    for p in glob.glob(TMP + "-tfrecord-*") + glob.glob(TMP + "-v1-*"):
        os.remove(p)
    for d in [TMP, TMP + "-save-mixed", TMP + "-save-empty", TMP + "-save-dup", TMP + "-merge-two",
              TMP + "-merge-missing", TMP + "-merge-none", TMP + "-merge-dup"]:
        shutil.rmtree(d, ignore_errors=True)
