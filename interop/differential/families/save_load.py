"""tf.data.Dataset.save / load: LoadDataset reading what TensorFlow's
`Dataset.save` wrote (compression none, GZIP, SNAPPY; shard functions;
reader functions), and its errors (a missing directory, a corrupt file, an
element_spec the files do not hold).

The saved directories are written by this module under
crates/tfdata-graph/tests/data/save_load (committed), paths relative to the
crate, where the Rust test runs. TensorFlow names a save's run directory by a
random number and stamps the metadata with the time; both are fixed
afterwards (the run directory renamed, the metadata rewritten, the spec
file re-serialized deterministically) so that
regenerating gives the same bytes. Shard functions are always given: the
default shards by the machine's CPU count."""

import os
import shutil

import tensorflow as tf
from tensorflow.core.protobuf import snapshot_pb2, struct_pb2

from harness import Family, in_crate

DATA = "tests/data/save_load"
RUN_ID = "1234567890"


def path(name):
    return os.path.join(DATA, name)


def save(name, ds, compression=None, shard_func=None):
    """`ds.save(path(name))`, then the run id and timestamp fixed."""
    p = path(name)
    shutil.rmtree(p, ignore_errors=True)
    ds.save(p, compression=compression, shard_func=shard_func)
    meta = snapshot_pb2.SnapshotMetadataRecord()
    with open(os.path.join(p, "snapshot.metadata"), "rb") as f:
        meta.ParseFromString(f.read())
    os.rename(os.path.join(p, meta.run_id), os.path.join(p, RUN_ID))
    meta.run_id = RUN_ID
    meta.creation_timestamp = 0
    with open(os.path.join(p, "snapshot.metadata"), "wb") as f:
        f.write(meta.SerializeToString(deterministic=True))
    # The element spec (a dict's map entries in any order), re-serialized
    # deterministically.
    spec = struct_pb2.StructuredValue()
    with open(os.path.join(p, "dataset_spec.pb"), "rb") as f:
        spec.ParseFromString(f.read())
    with open(os.path.join(p, "dataset_spec.pb"), "wb") as f:
        f.write(spec.SerializeToString(deterministic=True))
    return p


def interleave_reader(cycle, block=1):
    return lambda datasets: datasets.interleave(
        lambda x: x, cycle_length=cycle, block_length=block,
        num_parallel_calls=tf.data.AUTOTUNE)


def flat_map_reader(datasets):
    return datasets.flat_map(lambda x: x)


def triples(n):
    """(int64, string, float32 [2]) elements, strings empty to unicode."""
    words = tf.constant(["", "a", "h\u00e9llo", "\u65e5\u672c", "x" * 300])
    return tf.data.Dataset.range(n).map(lambda i: (
        i - 3,
        tf.gather(words, i % 5),
        tf.stack([tf.cast(i, tf.float32) / 3.0, tf.constant(float("nan"))])))


def mod_shards(k):
    return lambda *e: tf.math.floormod(e[0], k)


def nested_spec():
    return tuple(tf.nest.flatten({
        "a": tf.TensorSpec([2], tf.int32),
        "b": (tf.TensorSpec([], tf.bool), tf.TensorSpec([], tf.string))}))


def family():
    with in_crate():
        return build()


def build():
    fam = Family("save_load")
    os.makedirs(DATA, exist_ok=True)

    for comp, tag in [(None, "none"), ("GZIP", "gzip"), ("SNAPPY", "snappy")]:
        p = save("triples_" + tag, triples(11), comp, mod_shards(3))
        for cycle, block in [(2, 1), (3, 2), (1, 1)]:
            fam.add_dataset(
                "load_%s_cycle%d_block%d" % (tag, cycle, block),
                tf.data.Dataset.load(p, compression=comp,
                                     reader_func=interleave_reader(cycle, block)))
        fam.add_dataset("load_%s_flat_map" % tag,
                        tf.data.Dataset.load(p, compression=comp, reader_func=flat_map_reader))

    # One shard; a nested element spec (dict of tuple); ragged-free shapes.
    nested = tf.data.Dataset.from_tensor_slices({
        "a": tf.constant([[1, 2], [3, 4], [5, 6]], tf.int32),
        "b": (tf.constant([True, False, True]), tf.constant([b"\x00\xff", b"", b"z"])),
    })
    p = save("nested", nested, None, lambda e: tf.constant(0, tf.int64))
    fam.add_dataset("load_nested_one_shard",
                    tf.data.Dataset.load(p, reader_func=interleave_reader(2)))

    # Shard numbers far apart and negative (the sorted names decide).
    p = save("wide_shards", tf.data.Dataset.range(9),
             None, lambda x: (x - 4) * 1000)
    fam.add_dataset("load_wide_shards",
                    tf.data.Dataset.load(p, reader_func=interleave_reader(4)))

    # Saved empty: metadata, no shard directories.
    p = save("empty", tf.data.Dataset.range(0), None, mod_shards(2))
    fam.add_dataset("load_empty", tf.data.Dataset.load(p, reader_func=interleave_reader(2)))

    # Then transformed after loading.
    p = path("triples_none")
    fam.add_dataset("load_then_map_batch",
                    tf.data.Dataset.load(p, reader_func=interleave_reader(2))
                    .map(lambda a, b, c: a * 2).batch(4))

    # Errors.
    spec = triples(1).element_spec
    p = path("triples_none")

    def repath(to):
        def edit(graph):
            for n in graph.node:
                if n.op == "Const" and n.attr["value"].tensor.string_val == [p.encode()]:
                    n.attr["value"].tensor.string_val[0] = to.encode()
        return edit

    fam.add_dataset_error("load_missing_directory",
                          tf.data.Dataset.load(p, reader_func=interleave_reader(2)),
                          repath(path("no_such_directory")))
    wrong_dtype = (tf.TensorSpec([], tf.int32),) + spec[1:]
    fam.add_dataset_error("load_wrong_dtype",
                          tf.data.Dataset.load(p, element_spec=wrong_dtype,
                                               reader_func=interleave_reader(2)),
                          lambda g: None)
    wrong_shape = spec[:2] + (tf.TensorSpec([3], tf.float32),)
    fam.add_dataset_error("load_wrong_shape",
                          tf.data.Dataset.load(p, element_spec=wrong_shape,
                                               reader_func=interleave_reader(2)),
                          lambda g: None)
    fam.add_dataset_error("load_fewer_components",
                          tf.data.Dataset.load(p, element_spec=spec[:1],
                                               reader_func=interleave_reader(2)),
                          lambda g: None)

    # A corrupt file: one shard's file cut short. TensorFlow and we both
    # report DataLoss; the messages word the damage differently, so the
    # case keeps the part both say.
    corrupt = path("corrupt")
    shutil.rmtree(corrupt, ignore_errors=True)
    shutil.copytree(path("triples_none"), corrupt)
    victim = os.path.join(corrupt, RUN_ID, "00000001.shard", "00000000.snapshot")
    with open(victim, "rb") as f:
        data = f.read()
    with open(victim, "wb") as f:
        f.write(data[:-5])
    fam.add_dataset_error("load_truncated_file",
                          tf.data.Dataset.load(corrupt, reader_func=interleave_reader(2)),
                          lambda g: None)
    keep_substring(fam, "truncated record at")
    # Read with the wrong compression.
    fam.add_dataset_error("load_gzip_read_as_none",
                          tf.data.Dataset.load(path("triples_gzip"), element_spec=spec,
                                               reader_func=interleave_reader(2)),
                          lambda g: None)
    keep_substring(fam, "")
    fam.add_dataset_error("load_none_read_as_snappy",
                          tf.data.Dataset.load(p, element_spec=spec, compression="SNAPPY",
                                               reader_func=interleave_reader(2)),
                          lambda g: None)
    keep_substring(fam, "")

    save_cases(fam)
    shard_reader_cases(fam)
    chunk_file_cases(fam)
    return fam


def chunk_file_cases(fam):
    """SnapshotChunkDataset on saved files (the same record format as a
    distributed snapshot's chunks), in a traced function: TensorFlow cannot
    serialize the op into a pipeline graph."""
    from tensorflow.python.data.ops import dataset_ops
    spec = triples(1).element_spec

    def read(comp, spec=spec):
        def fn(file):
            v = tf.raw_ops.SnapshotChunkDataset(
                chunk_file=file, output_types=[s.dtype for s in spec],
                output_shapes=[s.shape for s in spec], compression=comp)
            return dataset_ops._VariantDataset(v, spec).batch(100).get_single_element()
        return fn

    def file(name, shard):
        return tf.constant(os.path.join(path(name), RUN_ID, shard, "00000000.snapshot"))

    for tag, comp in [("none", ""), ("gzip", "GZIP"), ("snappy", "SNAPPY")]:
        for shard in ["00000000.shard", "00000002.shard"]:
            fam.add_function("chunk_file/%s %s" % (tag, shard), read(comp),
                             [file("triples_" + tag, shard)], traced=True)
    fam.add_function("chunk_file/nested one shard", read("", nested_spec()),
                     [file("nested", "00000000.shard")], traced=True)
    fam.add_function("chunk_file/missing file", read(""),
                     [file("triples_none", "00000009.shard")], traced=True)
    fam.add_function("chunk_file/truncated file", read(""),
                     [file("corrupt", "00000001.shard")], traced=True)
    # TensorFlow: "Failed to read tf.data snapshot file: <file>"; both name
    # the file.
    keep_substring(fam, os.path.join(path("corrupt"), RUN_ID, "00000001.shard",
                                     "00000000.snapshot"))


def shard_reader_cases(fam):
    """SnapshotDatasetReader (one shard directory, the datasets `load`
    hands its reader function), from start indices, in a map function."""
    from tensorflow.python.data.ops import dataset_ops
    spec = triples(1).element_spec
    types = [s.dtype for s in spec]
    shapes = [s.shape for s in spec]

    def reader(name, shard, start, comp=""):
        d = os.path.join(path(name), RUN_ID, shard)

        def fn(i):
            v = tf.raw_ops.SnapshotDatasetReader(
                shard_dir=d, start_index=i + start, output_types=types,
                output_shapes=shapes, compression=comp, version=2)
            return dataset_ops._VariantDataset(v, spec).batch(100).get_single_element()
        return tf.data.Dataset.range(1).map(fn)

    for tag, comp in [("none", ""), ("gzip", "GZIP"), ("snappy", "SNAPPY")]:
        for start in [0, 2]:
            fam.add_dataset("shard_reader/%s start %d" % (tag, start),
                            reader("triples_" + tag, "00000001.shard", start, comp))
    fam.add_dataset_error("shard_reader/missing directory",
                          reader("triples_none", "00000009.shard", 0), lambda g: None)
    # The harness keeps a NotFound message up to its first colon, here the
    # map's node number; TensorFlow's message after it names the file.
    err = fam.cases[-1]["error"]
    assert err["class"] == "NotFoundError", err
    err["message"] = os.path.join(path("triples_none"), RUN_ID, "00000009.shard",
                                  "00000000.snapshot") + "; No such file or directory"


def save_cases(fam):
    """SaveDataset (`Dataset.save` in a function) and SaveDatasetV2 (the
    dataset `save` with checkpointing builds), each followed in the same
    function by a LoadDataset of what it wrote: TensorFlow reads its own
    files, we ours. That TensorFlow reads ours is checked apart (the Rust
    tests compare our files with TensorFlow's, byte for byte)."""
    from tensorflow.python.data.ops import save_op

    flat = flat_map_reader

    def save_then_load(name, make, comp, shard_func, reader=flat, ordered=True):
        p = os.path.join(TMP, name)
        shutil.rmtree(p, ignore_errors=True)

        def fn(i):
            ds = make()
            op = ds.save(p, compression=comp, shard_func=shard_func)
            with tf.control_dependencies([op]):
                back = tf.data.Dataset.load(p, element_spec=ds.element_spec,
                                            compression=comp, reader_func=reader)
                if ordered:
                    return back.batch(1000).get_single_element()
                # Shards by CPU count: the order depends on the machine.
                return back.reduce(tf.constant(0, tf.int64), lambda s, e: s + e[0] * e[0] + 1)
        fam.add_dataset("save/" + name, tf.data.Dataset.range(1).map(fn))

    for comp, tag in [(None, "none"), ("GZIP", "gzip"), ("SNAPPY", "snappy")]:
        save_then_load("triples_" + tag, lambda: triples(13), comp, mod_shards(3))
    save_then_load("one_shard_nested", lambda: tf.data.Dataset.from_tensor_slices(
        {"k": tf.constant([[1.5, -0.0], [float("inf"), 2.0]]),
         "s": tf.constant(["a", "\u00e9\u00e9"])}), None, lambda e: tf.constant(7, tf.int64))
    save_then_load("negative_shards", lambda: tf.data.Dataset.range(6),
                   None, lambda x: -x, reader=interleave_reader(2))
    save_then_load("default_sharding", lambda: triples(9), "GZIP", None, ordered=False)

    def bad_shard(i):
        ds = tf.data.Dataset.range(3)
        op = ds.save(os.path.join(TMP, "bad_shard"), shard_func=lambda x: tf.stack([x, x]))
        with tf.control_dependencies([op]):
            return i
    fam.add_dataset_error("save/shard_func not a scalar",
                          tf.data.Dataset.range(1).map(bad_shard), lambda g: None)
    keep_after(fam, "::Map: ")

    def v2(name, comp, shard_func):
        p = os.path.join(TMP, "v2_" + name)
        shutil.rmtree(p, ignore_errors=True)

        def fn(i):
            ds = save_op._SaveDataset(triples(10), p, shard_func, comp)
            passed = ds.batch(1000).get_single_element()
            with tf.control_dependencies(tf.nest.flatten(passed)):
                back = tf.data.Dataset.load(p, element_spec=ds.element_spec,
                                            compression=comp, reader_func=flat)
                return passed, back.batch(1000).get_single_element()
        fam.add_dataset("save_v2/" + name, tf.data.Dataset.range(1).map(fn))
    v2("none", None, mod_shards(4))
    v2("snappy", "SNAPPY", mod_shards(2))
    v2("no_shard_func", "GZIP", None)


TMP = "/tmp/tfdata-differential-save_load"


def keep_after(fam, marker):
    """The last case's error as the kernel's message alone (TensorFlow
    prefixes a map function's error with a node number that changes from run
    to run)."""
    err = fam.cases[-1]["error"]
    err["message"] = err["message"].rsplit(marker, 1)[1]


def keep_substring(fam, text):
    """The last case's error checked by code and `text` only (corrupt input,
    which TensorFlow and we describe in different words)."""
    err = fam.cases[-1]["error"]
    assert text in err["message"], err
    err["message"] = text
