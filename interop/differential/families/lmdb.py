"""The LMDB ops TensorFlow 2.21 removed: LMDBDataset, ExperimentalLMDBDataset
and LMDBReader, refused (Unimplemented) for every input, valid databases too.

TensorFlow 2.21 removed LMDB support: each op's CPU kernel is still
registered, but it refuses every input, before reading its arguments, with
Unimplemented "LMDB support is removed from TensorFlow. ...". A worker
therefore does what TensorFlow's does: it refuses these ops with
TensorFlow's error, whatever the files. The cases hold that refusal for a
valid database, an empty one, a missing file, a directory, a file that is no
database, and filenames of every rank (the kernel refuses them before it
checks the rank).

The databases are written by this module with the PyPI `lmdb` package
under crates/tfdata-graph/tests/data/lmdb (relative to the crate) only when
missing: they are committed, so regenerating needs neither the package nor
new bytes."""

import os

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from harness import Family, in_crate

D = tf.data.Dataset
R = tf.raw_ops
DATA = "tests/data/lmdb"

ENTRIES = [(b"a", b"1"), (b"b", b""), (b"\x00\xff", "h\u00e9llo \u65e5\u672c".encode()),
           ("\u00e9".encode(), b"\xff" * 40)]


def path(name):
    return f"{DATA}/{name}"


def write_files():
    """Small databases (single files, as TensorFlow's MDB_NOSUBDIR opens
    them), and a file that is not one."""
    os.makedirs(DATA, exist_ok=True)
    wanted = {"data.mdb": ENTRIES, "empty.mdb": []}
    if all(os.path.exists(path(n)) for n in list(wanted) + ["damaged.mdb"]):
        return
    import lmdb  # only to write missing files
    for name, entries in wanted.items():
        env = lmdb.open(path(name), subdir=False, map_size=1 << 20, lock=False)
        with env.begin(write=True) as txn:
            for k, v in entries:
                txn.put(k, v)
        env.close()
    with open(path("data.mdb"), "rb") as f:
        good = f.read()
    with open(path("damaged.mdb"), "wb") as f:
        f.write(good[:100])


def family():
    with in_crate():
        write_files()
        fam = Family("lmdb")
        datasets(fam)
        readers(fam)
        return fam


def lmdb_edit(op, filenames):
    """An `edit` making the two-string TensorSliceDataset an `op` node of
    `filenames` (a Const of any rank)."""
    def edit(graph):
        hits = [n for n in graph.node if n.op == "TensorSliceDataset"]
        assert len(hits) == 1, [n.op for n in graph.node]
        node = hits[0]
        node.op = op
        types = list(node.attr["Toutput_types"].list.type)
        declared = {a.name for a in op_def_registry.get(op).attr}
        for k in list(node.attr):
            if k not in declared:
                del node.attr[k]
        node.attr["output_types"].list.type.extend(types)
        const = graph.node.add()
        const.name = f"{node.name}/filenames"
        const.op = "Const"
        t = tf.make_tensor_proto(filenames, tf.string)
        const.attr["dtype"].type = t.dtype
        const.attr["value"].tensor.CopyFrom(t)
        del node.input[:]
        node.input.append(const.name)
    return edit


def datasets(fam):
    base = D.from_tensor_slices((["k"], ["v"]))
    inputs = [
        ("a database", [path("data.mdb")]),
        ("two databases", [path("data.mdb"), path("empty.mdb")]),
        ("an empty database", [path("empty.mdb")]),
        ("no files", []),
        ("a scalar name", path("data.mdb")),
        ("a matrix of names", [[path("data.mdb")]]),
        ("a missing file", [path("no_such.mdb")]),
        ("a directory", [DATA]),
        ("a damaged file", [path("damaged.mdb")]),
    ]
    for op in ["LMDBDataset", "ExperimentalLMDBDataset"]:
        for what, names in inputs:
            fam.add_dataset_error(f"{op} of {what}", base, lmdb_edit(op, names))
        fam.add_dataset_error(f"{op} of a database, mapped", base.map(lambda k, v: (v, k)),
                              lmdb_edit(op, [path("data.mdb")]))


def names(*files):
    return tf.compat.v1.data.Dataset.from_tensor_slices(list(files))


def read_each(name):
    """Each element: its file enqueued, one read by an LMDBReader."""
    q = R.FIFOQueue(component_types=[tf.string], shapes=[[]], capacity=100)
    r = R.LMDBReader()
    enq = R.QueueEnqueue(handle=q, components=[name])
    with tf.control_dependencies([enq]):
        k, v = R.ReaderRead(reader_handle=r, queue_handle=q)
    return k, v


def readers(fam):
    for what, files in [("a database", [path("data.mdb")]),
                        ("an empty database", [path("empty.mdb")]),
                        ("a missing file", [path("no_such.mdb")])]:
        fam.add_graph_dataset(f"LMDBReader read of {what}",
                              lambda files=files: names(*files).map(read_each), error=True)

    def no_names():
        return names("x").take(0).map(read_each)

    try:
        fam.add_graph_dataset("LMDBReader in a map of no elements", no_names, error=True)
    except AssertionError:
        fam.ids.discard("LMDBReader in a map of no elements")
        fam.add_graph_dataset("LMDBReader in a map of no elements", no_names)
