"""tf.random.Generator on tfdata workers: a Generator made outside a
pipeline and used inside it is serialized as a VarHandleOp assigned its
state (int64 [3] for Philox: counter low, counter high, key); the map
function reads and advances that state with RngReadAndSkip (then draws
with the stateless V2 ops), RngSkip, StatefulRandomBinomial, or the raw
Stateful* ops. A tf.Variable a map function reads (ReadVariableOp) rides
the same path.

TensorFlow's elements come from the serialized graph run by TensorFlow
itself (DatasetFromGraph), once, then iterated twice: the variable lives
as long as the dataset, so the second iterator continues the first's
stream, as a tfdata worker task (one translation) continues it."""

import re

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from harness import Family, blob, run_error, spec_of, tensor

R = tf.raw_ops
I64_MIN = -(2**63)


_cases = [0]


def normalize(graph):
    """Variables' shared names are fresh UUIDs: numbered by case instead,
    so that regenerating gives the same bytes. (TensorFlow's kernels share
    one variable among graphs naming it alike; each case's graph assigns
    its own first.)"""
    _cases[0] += 1
    for i, n in enumerate(n for n in graph.node if n.op == "VarHandleOp"):
        n.attr["shared_name"].s = f"generator_state_{_cases[0]}_{i}".encode()


def add_pipeline(fam, case_id, ds, iterators=2):
    """A pipeline holding a variable: TensorFlow's elements from one
    dataset made from the serialized graph, iterated `iterators` times, or
    the error it stops with."""
    assert case_id not in fam.ids, case_id
    fam.ids.add(case_id)
    graph = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
    normalize(graph)
    graph = graph.SerializeToString(deterministic=True)

    def run():
        with tf.device("/CPU:0"):
            variant = tf.raw_ops.DatasetFromGraph(graph_def=graph)
            rebuilt = tf.data.experimental.from_variant(variant, ds.element_spec)
            return [[[tensor(c) for c in tf.nest.flatten(el)] for el in rebuilt]
                    for _ in range(iterators)]

    runs, err = run_error(run)
    case = {"id": case_id, "op": "dataset", "graph": blob(graph), "tolerance": "exact"}
    if err:
        # Without tf.data's "Error in user-defined function passed to
        # MapDataset:N ...: " prefix (N counts datasets made in the process).
        err["message"] = re.sub(r"^Error in user-defined function passed to \S+ "
                                r"transformation with iterator: \S+: ", "", err["message"])
        case["error"] = err
    else:
        case["iterations"] = runs
        case["cardinality"] = int(ds.cardinality())
        case["spec"] = spec_of(ds)
    fam.cases.append(case)


def family():
    fam = Family("generator")
    G = tf.random.Generator
    seeds = [0, 1, 2**40 + 3, -1]

    # --- Generator methods: RngReadAndSkip + the stateless V2 ops -------
    for s in seeds:
        g = G.from_seed(s)
        add_pipeline(fam, f"uniform/seed {s}",
                     tf.data.Dataset.range(5).map(lambda x, g=g: g.uniform([3])))
    # float32 and float64: the methods scale half and bfloat16 draws with
    # Mul and AddV2, which tfdata's math kernels do not run in those types
    # (the raw Stateful* cases below cover the draws in every float type).
    for dt in (tf.float32, tf.float64):
        g = G.from_seed(7)
        add_pipeline(fam, f"normal/{dt.name}",
                     tf.data.Dataset.range(4).map(lambda x, g=g, dt=dt: g.normal([2, 3], dtype=dt)))
        g = G.from_seed(8)
        add_pipeline(fam, f"truncated_normal/{dt.name}",
                     tf.data.Dataset.range(4).map(
                         lambda x, g=g, dt=dt: g.truncated_normal([5], dtype=dt)))
        g = G.from_seed(9)
        add_pipeline(fam, f"uniform/{dt.name}/range",
                     tf.data.Dataset.range(3).map(
                         lambda x, g=g, dt=dt: g.uniform([4], -2.0, 3.0, dtype=dt)))
    for dt, lo, hi in [(tf.int32, 0, 10), (tf.int32, -(2**31), 2**31 - 1),
                       (tf.int64, -5, 2**62), (tf.int64, I64_MIN, 2**63 - 1)]:
        g = G.from_seed(3)
        add_pipeline(fam, f"uniform int/{dt.name}/{lo},{hi}",
                     tf.data.Dataset.range(4).map(
                         lambda x, g=g, dt=dt, lo=lo, hi=hi: g.uniform(
                             [5], tf.constant(lo, dt), tf.constant(hi, dt), dtype=dt)))
    for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
        g = G.from_seed(4)
        add_pipeline(fam, f"uniform_full_int/{dt.name}",
                     tf.data.Dataset.range(3).map(lambda x, g=g, dt=dt: g.uniform_full_int([3], dtype=dt)))
    g = G.from_seed(5)
    add_pipeline(fam, "make_seeds", tf.data.Dataset.range(3).map(lambda x, g=g: g.make_seeds(2)))
    g = G.from_seed(6)
    add_pipeline(fam, "shape from the element",
                 tf.data.Dataset.range(4).map(lambda x, g=g: g.uniform(tf.reshape(x, [1]))))
    g = G.from_seed(10)
    add_pipeline(fam, "skip then uniform",
                 tf.data.Dataset.range(4).map(
                     lambda x, g=g: (g.skip(x * 1000 + 1), g.uniform([2]))[1]))
    g = G.from_seed(11)
    add_pipeline(fam, "two draws an element",
                 tf.data.Dataset.range(3).map(lambda x, g=g: (g.uniform([2]), g.normal([3]))))
    g = G.from_seed(12)
    add_pipeline(fam, "repeat and batch",
                 tf.data.Dataset.range(3).map(lambda x, g=g: g.uniform([])).repeat(2).batch(4))
    g = G.from_seed(13)
    add_pipeline(fam, "empty draws", tf.data.Dataset.range(3).map(
        lambda x, g=g: (g.uniform([0]), g.uniform([1]))))
    # Counters about to carry: into the high word, and past 2**128.
    for name, state in [("low word carries", [-300, 0, 5]),
                        ("high word carries", [-300, -1, 5]),
                        ("key", [7, 9, -1])]:
        g = G.from_state(state, alg="philox")
        add_pipeline(fam, f"state/{name}",
                     tf.data.Dataset.range(3).map(lambda x, g=g: g.uniform([3])))
    g = G.from_seed(14)
    add_pipeline(fam, "one generator, two maps",
                 tf.data.Dataset.range(3).map(lambda x, g=g: g.uniform([1]))
                 .map(lambda u, g=g: (u, g.uniform([1]))))

    # --- The raw ops on a generator's state -----------------------------
    def raw_state(seed):
        return G.from_seed(seed).state

    v = raw_state(20)
    add_pipeline(fam, "RngReadAndSkip/deltas", tf.data.Dataset.range(4).map(
        lambda x, v=v: R.RngReadAndSkip(resource=v.handle, alg=1, delta=tf.cast(x * 3, tf.uint64))))
    v = raw_state(21)
    add_pipeline(fam, "RngReadAndSkip/auto and huge delta", tf.data.Dataset.range(3).map(
        lambda x, v=v: R.RngReadAndSkip(resource=v.handle, alg=3,
                                        delta=tf.constant(2**64 - 1, tf.uint64))))
    v = raw_state(22)
    add_pipeline(fam, "RngSkip", tf.data.Dataset.range(4).map(
        lambda x, v=v: (R.RngSkip(resource=v.handle, algorithm=tf.constant(1, tf.int64),
                                  delta=x - 2),
                        R.RngReadAndSkip(resource=v.handle, alg=1,
                                         delta=tf.constant(0, tf.uint64)))[1]))
    float_ops = [("StatefulUniform", R.StatefulUniform),
                 ("StatefulStandardNormalV2", R.StatefulStandardNormalV2),
                 ("StatefulTruncatedNormal", R.StatefulTruncatedNormal)]
    for op, f in float_ops:
        for dt in (tf.float16, tf.bfloat16, tf.float32, tf.float64):
            for alg in (1, 3):
                v = raw_state(30)
                add_pipeline(fam, f"{op}/{dt.name}/alg {alg}", tf.data.Dataset.range(3).map(
                    lambda x, v=v, f=f, dt=dt, alg=alg: f(
                        resource=v.handle, algorithm=tf.constant(alg, tf.int64),
                        shape=[2, 3], dtype=dt)))
    for dt, lo, hi in [(tf.int32, -7, 9), (tf.int32, -(2**31), 2**31 - 1),
                       (tf.int64, 0, 3), (tf.int64, I64_MIN, 2**63 - 1)]:
        v = raw_state(31)
        add_pipeline(fam, f"StatefulUniformInt/{dt.name}/{lo},{hi}", tf.data.Dataset.range(3).map(
            lambda x, v=v, dt=dt, lo=lo, hi=hi: R.StatefulUniformInt(
                resource=v.handle, algorithm=tf.constant(1, tf.int64), shape=[5],
                minval=tf.constant(lo, dt), maxval=tf.constant(hi, dt))))
    for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
        v = raw_state(32)
        add_pipeline(fam, f"StatefulUniformFullInt/{dt.name}", tf.data.Dataset.range(3).map(
            lambda x, v=v, dt=dt: R.StatefulUniformFullInt(
                resource=v.handle, algorithm=tf.constant(1, tf.int64), shape=[3], dtype=dt)))

    # --- Binomial: StatefulRandomBinomial -------------------------------
    binomials = [
        ("counts and probs", [3], [10.0, 20.0, 30.0], [0.5, 0.1, 0.9], tf.int64, tf.float32),
        ("large counts (BTRS)", [2, 2], [200.0, 1e4], [0.3, 0.7], tf.int32, tf.float64),
        ("edges", [6], [0.0, 5.0, 5.0, -1.0, 7.0, 1e6], [0.5, 0.0, 1.0, 0.5, 1.5, 1e-6],
         tf.float32, tf.float32),
        ("half", [4, 2], [5.0, 50.0], [0.25, 0.5], tf.float16, tf.float16),
        ("samples outermost", [3, 2, 1], [[4.0], [40.0]], [0.5], tf.float64, tf.float64),
        ("empty samples", [0, 3], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5], tf.int64, tf.float32),
    ]
    for name, shape, counts, probs, out, t in binomials:
        g = G.from_seed(40)
        add_pipeline(fam, f"binomial/{name}", tf.data.Dataset.range(3).map(
            lambda x, g=g, shape=shape, counts=counts, probs=probs, out=out, t=t: g.binomial(
                shape, counts=tf.constant(counts, t), probs=tf.constant(probs, t), dtype=out)))

    # --- A tf.Variable a map function reads -----------------------------
    w = tf.Variable([1.5, -2.0, 3.25])
    add_pipeline(fam, "ReadVariableOp", tf.data.Dataset.range(3).map(
        lambda x, w=w: tf.cast(x, tf.float32) * w))

    # --- Bitcast: how the Generator's methods read its state ------------
    int64s = tf.constant([0, 1, -1, I64_MIN, 2**63 - 1, 0x0123456789ABCDEF], tf.int64)
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.uint64), [int64s], "Bitcast/int64 to uint64")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.int32), [int64s], "Bitcast/int64 to int32")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.uint8),
            [tf.constant([[1.5, -0.0], [np.inf, np.nan]], tf.float32)], "Bitcast/float to uint8")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.float64),
            [tf.constant([[1, 2], [3, 4]], tf.int32)], "Bitcast/int32 pairs to double")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.bfloat16),
            [tf.constant(17000, tf.int16)], "Bitcast/int16 scalar to bfloat16")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.complex64),
            [tf.zeros([0, 2], tf.float32)], "Bitcast/empty float pairs to complex64")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.float32),
            [tf.constant([1, 2, 3], tf.uint8)], "Bitcast/error/last dimension")
    fam.add("Bitcast", lambda x: R.Bitcast(input=x, type=tf.int64),
            [tf.constant(5, tf.int32)], "Bitcast/error/scalar to wider")

    # --- Errors ---------------------------------------------------------
    g = G.from_seed(5, alg="threefry")
    add_pipeline(fam, "error/threefry", tf.data.Dataset.range(2).map(lambda x, g=g: g.uniform([2])))
    short = tf.Variable([1, 2], dtype=tf.int64)
    add_pipeline(fam, "error/short state", tf.data.Dataset.range(2).map(
        lambda x, v=short: R.RngReadAndSkip(resource=v.handle, alg=1, delta=tf.constant(1, tf.uint64))))
    add_pipeline(fam, "error/short state/StatefulUniform", tf.data.Dataset.range(2).map(
        lambda x, v=short: R.StatefulUniform(resource=v.handle, algorithm=tf.constant(1, tf.int64),
                                             shape=[2], dtype=tf.float32)))
    add_pipeline(fam, "error/short state/binomial", tf.data.Dataset.range(2).map(
        lambda x, v=short: R.StatefulRandomBinomial(
            resource=v.handle, algorithm=tf.constant(1, tf.int64), shape=[1], counts=[1.0],
            probs=[0.5])))
    i32 = tf.Variable([1, 2, 3], dtype=tf.int32)
    add_pipeline(fam, "error/int32 state", tf.data.Dataset.range(2).map(
        lambda x, v=i32: (R.RngSkip(resource=v.handle, algorithm=tf.constant(1, tf.int64),
                                    delta=tf.constant(1, tf.int64)), x)[1]))
    add_pipeline(fam, "error/int32 state/binomial", tf.data.Dataset.range(2).map(
        lambda x, v=i32: R.StatefulRandomBinomial(
            resource=v.handle, algorithm=tf.constant(2, tf.int64), shape=[1], counts=[1.0],
            probs=[0.5])))
    m = tf.Variable([[1, 2, 3]], dtype=tf.int64)
    add_pipeline(fam, "error/2-D state", tf.data.Dataset.range(2).map(
        lambda x, v=m: R.RngReadAndSkip(resource=v.handle, alg=1, delta=tf.constant(1, tf.uint64))))
    for alg in (0, 2, 4):
        v = raw_state(50)
        add_pipeline(fam, f"error/algorithm {alg}", tf.data.Dataset.range(2).map(
            lambda x, v=v, alg=alg: R.RngReadAndSkip(resource=v.handle, alg=alg,
                                                     delta=tf.constant(1, tf.uint64))))
        add_pipeline(fam, f"error/StatefulUniformFullInt algorithm {alg}", tf.data.Dataset.range(2).map(
            lambda x, v=v, alg=alg: R.StatefulUniformFullInt(
                resource=v.handle, algorithm=tf.constant(alg, tf.int64), shape=[2], dtype=tf.int64)))
    v = raw_state(51)
    add_pipeline(fam, "error/binomial algorithm 3", tf.data.Dataset.range(2).map(
        lambda x, v=v: R.StatefulRandomBinomial(
            resource=v.handle, algorithm=tf.constant(3, tf.int64), shape=[1], counts=[1.0],
            probs=[0.5])))
    add_pipeline(fam, "error/binomial shape", tf.data.Dataset.range(2).map(
        lambda x, v=v: R.StatefulRandomBinomial(
            resource=v.handle, algorithm=tf.constant(1, tf.int64), shape=[2], counts=[1.0, 2.0, 3.0],
            probs=[0.5])))
    add_pipeline(fam, "error/negative dimension", tf.data.Dataset.range(3).map(
        lambda x, v=v: R.StatefulUniform(resource=v.handle, algorithm=tf.constant(1, tf.int64),
                                         shape=tf.reshape(1 - x, [1]), dtype=tf.float32)))
    add_pipeline(fam, "error/minval >= maxval", tf.data.Dataset.range(3).map(
        lambda x, v=v: R.StatefulUniformInt(resource=v.handle, algorithm=tf.constant(1, tf.int64),
                                            shape=[0], minval=x, maxval=tf.constant(1, tf.int64))))
    return fam
