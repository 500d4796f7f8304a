"""The op census: every op TensorFlow 2.21 registers in the families issue 33
names, read from TensorFlow itself, for docs/compatibility.md.

Run under the TensorFlow 2.21 venv:

    ~/.cache/tfdata-tf-2.21/bin/python interop/differential/census.py

It writes crates/tfdata-graph/tests/differential/census.json. The table in
docs/compatibility.md is rendered from that file and from the ops tfdata
workers run, by crates/tfdata-graph/tests/census.rs, which fails when the
doc is stale (`TFDATA_BLESS=1` rewrites it).

An op's family is the generated Python module TensorFlow registers it from
(`tensorflow/python/ops/gen_<library>.py`: each holds
`tf_export("raw_ops.<Op>")` for the ops of one C++ op library), so nothing
here is a hand-written list but the families' names and the handful of ops
the issue names from libraries outside them (`Einsum`, `TopKV2`,
`Unique`...). Ops with no CPU kernel in TensorFlow (GPU- or TPU-only) are
listed apart: a tf.data worker runs on CPU, TensorFlow's own included. So are
ops TensorFlow 2.21 removed from graphs (an `OpDef.deprecation` at a GraphDef
version at or below its own): TensorFlow refuses a graph of its own version
that uses one ("Op AdjustContrast is not available in GraphDef version
2474"), so no TensorFlow 2.21 client sends them and its workers cannot run
them either. So, last, are the few ops whose TensorFlow 2.21 kernel refuses
every input (`REFUSED_BY_TF`, each checked here by running it): a worker that
matches TensorFlow answers with the same error, which is not support.
"""

import importlib
import json
import os
import re

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.python.framework import kernels  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "crates", "tfdata-graph", "tests", "differential", "census.json")

# Family -> the op libraries it is made of (the tf.* namespaces and the
# families of issue 33).
LIBRARIES = {
    "tf.data": ["dataset_ops", "experimental_dataset_ops"],
    "tf.io (parsing and I/O)": ["parsing_ops", "io_ops"],
    "tf.strings": ["string_ops"],
    "tf.image": ["image_ops"],
    "tf.math": ["math_ops"],
    "tf.sparse": ["sparse_ops"],
    "tf.ragged": ["ragged_array_ops", "ragged_conversion_ops", "ragged_math_ops"],
    "tf.signal": ["spectral_ops"],
    "tf.lookup": ["lookup_ops"],
    "TensorList": ["list_ops"],
    "random": ["random_ops", "stateless_random_ops", "stateless_random_ops_v2",
               "stateful_random_ops", "random_index_shuffle_ops"],
}
# Ops the issue names from libraries outside those families (linear algebra
# and reductions: MatMul and the segment ops are in tf.math already).
NAMED = {
    "linear algebra": ["Einsum", "TopKV2", "Unique", "UniqueV2", "UniqueWithCounts",
                       "UniqueWithCountsV2"],
}


def library_ops(lib):
    mod = importlib.import_module(f"tensorflow.python.ops.gen_{lib}")
    with open(mod.__file__) as f:
        return re.findall(r'tf_export\("raw_ops\.(\w+)"\)', f.read())


def has_cpu_kernel(op):
    return any(k.device_type == "CPU" for k in kernels.get_registered_kernels_for_op(op).kernel)


def removed(op):
    """Whether TensorFlow refuses `op` in graphs of its own GraphDef version."""
    d = op_def_registry.get(op)
    return d.HasField("deprecation") and d.deprecation.version <= tf.version.GRAPH_DEF_VERSION


def _lmdb_reader():
    with tf.compat.v1.Graph().as_default():
        reader = tf.raw_ops.LMDBReader()
        with tf.compat.v1.Session() as session:
            session.run(reader)


def _mutable_dense_hash_table_v1():
    with tf.compat.v1.Graph().as_default():
        table = tf.raw_ops.MutableDenseHashTable(
            empty_key=tf.constant(-1, tf.int64), value_dtype=tf.int64)
        with tf.compat.v1.Session() as session:
            session.run(table)


def _lmdb_dataset(op):
    def run():
        op(filenames=["missing.mdb"], output_types=[tf.string, tf.string],
           output_shapes=[[], []])
    return run


# Registered with a CPU kernel, but the kernel fails every run: op -> (probe,
# the text TensorFlow's error must contain).
REFUSED_BY_TF = {
    "LMDBDataset": (_lmdb_dataset(tf.raw_ops.LMDBDataset), "LMDB support is removed"),
    "ExperimentalLMDBDataset": (_lmdb_dataset(tf.raw_ops.ExperimentalLMDBDataset),
                                "LMDB support is removed"),
    "LMDBReader": (_lmdb_reader, "LMDB support is removed"),
    "MutableDenseHashTable": (_mutable_dense_hash_table_v1, "Unknown input name: deleted_key"),
    "AnonymousRandomSeedGenerator": (
        lambda: tf.raw_ops.AnonymousRandomSeedGenerator(seed=1, seed2=2),
        "Unknown input name: reshuffle"),
}


def refused_by_tf(op):
    """Whether `op`'s kernel refuses every input (checked by running it)."""
    if op not in REFUSED_BY_TF:
        return False
    probe, text = REFUSED_BY_TF[op]
    try:
        probe()
    except Exception as e:  # noqa: BLE001 (any error TensorFlow raises)
        assert text in str(e), (op, str(e))
        return True
    raise AssertionError(f"{op} ran: it is no longer refused, take it out of REFUSED_BY_TF")


def counted(op):
    return has_cpu_kernel(op) and not removed(op) and not refused_by_tf(op)


def main():
    families = {}
    seen = set()
    for family, libs in LIBRARIES.items():
        ops = sorted({op for lib in libs for op in library_ops(lib)} - seen)
        seen.update(ops)
        families[family] = ops
    for family, ops in NAMED.items():
        for op in ops:
            assert tf.raw_ops.__dict__.get(op) is not None, op
        families[family] = sorted(set(ops) - seen)
        seen.update(ops)
    census = {
        "tf": tf.__version__,
        "families": {
            family: {
                "ops": [op for op in ops if counted(op)],
                "no_cpu_kernel": [op for op in ops if not has_cpu_kernel(op)],
                "removed_from_graphs": [op for op in ops if has_cpu_kernel(op) and removed(op)],
                "refused_by_tf": [op for op in ops if has_cpu_kernel(op) and not removed(op)
                                  and refused_by_tf(op)],
            }
            for family, ops in families.items()
        },
    }
    with open(OUT, "w") as f:
        json.dump(census, f, indent=1)
        f.write("\n")
    total = sum(len(v["ops"]) for v in census["families"].values())
    print(f"{OUT}: {total} ops with CPU kernels in {len(families)} families")


if __name__ == "__main__":
    main()
