"""Differential cases: ops run by TensorFlow 2.21 eagerly on CPU, for
crates/tfdata-graph/tests/differential.rs to replay through our kernels.

Run under the TensorFlow 2.21 venv (no other dependency):

    TF_ENABLE_ONEDNN_OPTS=0 ~/.cache/tfdata-tf-2.21/bin/python interop/differential/gen.py

The longer by-hand budget: `gen.py --long [--out DIR]` writes larger cases
(thousands of values per case, random seeds, keys near counter carries,
random integer ranges) to DIR (default /tmp/tfdata-differential-long), not
committed; replay them with

    DIFFERENTIAL_CASES=DIR cargo test -p tfdata-graph --test differential

For each case it traces the op in a tf.function (so the NodeDef carries the
attributes TensorFlow infers and the defaults it fills in), runs the op
eagerly on /CPU:0 with the same inputs, and writes one JSON file per family to
crates/tfdata-graph/tests/differential/<family>.json:

    {"tf": version, "nodes": [hex NodeDef], "cases": [{"id", "op",
      "node": index into nodes (a NodeDef with only op and attributes),
      "inputs": [tensor], "outputs": [tensor] | "calls": [[tensor], ...]
      | "error": {"code", "class", "message"}, "tolerance": "exact"}]}

A tensor is a string "dtype|d0,d1,...|hex": TensorFlow's dtype enum, the
shape, the little-endian bytes as numpy holds them; raw bytes, so the replay compares bits (NaN payloads, -0.0). "calls" is for
seeded stateful ops: the outputs of successive runs of one kernel, as a
pipeline's map function runs it once per element. A composite case carries a
FunctionDef library ("library": FunctionDefLibrary, "function": name)
instead of a NodeDef; a pipeline case ("op": "dataset") the GraphDef tf.data
serializes ("graph") and the elements of two fresh iterators ("iterations");
both protos zlib-compressed and base64. "message" is the substring our error must contain:
TensorFlow's message without its "[Op:...]" suffix.

Everything is seeded and deterministic: regenerating gives the same files
(drift shows as a diff).
"""

import base64
import json
import os
import re
import sys
import zlib

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import function_pb2, graph_pb2  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "crates", "tfdata-graph", "tests", "differential")

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
U64_MAX = 2**64 - 1
FLOATS = [tf.float16, tf.bfloat16, tf.float32, tf.float64]

# Seeds: zero, small, negative, the int32 extremes, and (int64 only) wide ones.
SEEDS32 = [(0, 0), (1, 2), (-1, -7), (I32_MIN, I32_MAX), (I32_MAX, I32_MIN)]
SEEDS64 = [(0, 0), (1, 2), (-3, 5), (2**40 + 3, -(2**50)), (I64_MIN, I64_MAX)]
# Shapes: scalar, empty, empty inside, partial and several Philox groups.
SHAPES = [[], [0], [3, 0, 2], [1], [5], [2, 3], [9], [4, 5]]


def blob(b):
    """A serialized proto as stored: zlib-compressed, base64 (graphs are most
    of a case's bytes and compress five-fold)."""
    return base64.b64encode(zlib.compress(b, 9)).decode()


def tensor(t):
    t = tf.convert_to_tensor(t)
    a = t.numpy()
    shape = ",".join(str(d) for d in a.shape)
    return f"{t.dtype.as_datatype_enum}|{shape}|{np.ascontiguousarray(a).tobytes().hex()}"


def node_def(fn, inputs):
    """The one op node of `fn` traced over `inputs` (as placeholders)."""
    # Unknown shapes: error cases must trace (shape inference would refuse
    # them before the kernel runs), and the NodeDef does not depend on them.
    specs = [tf.TensorSpec(None, tf.convert_to_tensor(x).dtype) for x in inputs]
    g = tf.function(fn).get_concrete_function(*specs).graph.as_graph_def()
    ops = [n for n in g.node if n.op not in ("Placeholder", "Identity", "NoOp", "Const")]
    assert len(ops) == 1, [n.op for n in ops]
    n = ops[0]
    # Only the op and its attributes matter to a kernel.
    n.name = "op"
    del n.input[:]
    strip(n)
    return n


def strip(n):
    """Drops the attributes TensorFlow adds for itself (`_output_shapes`...)."""
    for k in list(n.attr):
        if k.startswith("_"):
            del n.attr[k]


def run_error(call):
    try:
        out = call()
    except tf.errors.OpError as e:
        # Without the "{{function_node ...}}" prefix, the "[Op:X]" suffix
        # and the list of registered kernels a NotFoundError appends.
        msg = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", e.message)
        msg = msg.split(" [Op:")[0].split("\n")[0].strip()
        if isinstance(e, tf.errors.NotFoundError):
            msg = msg.split(":")[0]  # "Could not find device for node"
        return None, {"code": e.error_code, "class": type(e).__name__, "message": msg}
    return out, None


def as_list(out):
    if isinstance(out, (list, tuple)):
        return [tensor(o) for o in out]
    return [tensor(out)]


class Family:
    def __init__(self, name):
        self.name = name
        self.cases = []
        self.ids = set()
        # NodeDefs, each once: cases name them by index.
        self.nodes = []

    def add(self, op, fn, inputs, case_id, tolerance="exact", calls=1):
        """One op case: fn(*tensors) calls tf.raw_ops.<op> with keyword args."""
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        inputs = [tf.convert_to_tensor(x) for x in inputs]
        node = node_def(fn, inputs)
        assert node.op == op, (node.op, op)
        h = node.SerializeToString(deterministic=True).hex()
        if h not in self.nodes:
            self.nodes.append(h)
        case = {"id": case_id, "op": op, "node": self.nodes.index(h),
                "inputs": [tensor(x) for x in inputs], "tolerance": tolerance}
        with tf.device("/CPU:0"):
            if calls == 1:
                out, err = run_error(lambda: fn(*inputs))
                if err:
                    case["error"] = err
                else:
                    case["outputs"] = as_list(out)
            else:
                # A stateful op: one kernel run `calls` times, as a map
                # function runs it once per element.
                f = tf.function(fn)
                case["calls"] = [as_list(f(*inputs)) for _ in range(calls)]
        self.cases.append(case)

    def add_function(self, case_id, fn, inputs, tolerance="exact"):
        """A composite: a traced tf.function and its library, run by our executor."""
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        inputs = [tf.convert_to_tensor(x) for x in inputs]
        specs = [tf.TensorSpec(x.shape, x.dtype) for x in inputs]
        cf = tf.function(fn).get_concrete_function(*specs)
        lib = function_pb2.FunctionDefLibrary()
        lib.function.append(cf.function_def)
        lib.function.extend(cf.graph.as_graph_def().library.function)
        for fd in lib.function:
            fd.ClearField("arg_attr")
            fd.ClearField("resource_arg_unique_id")
            for k in list(fd.attr):
                if k.startswith("_"):
                    del fd.attr[k]
            for n in fd.node_def:
                strip(n)
        with tf.device("/CPU:0"):
            out = fn(*inputs)
        self.cases.append({
            "id": case_id, "op": "function", "function": cf.function_def.signature.name,
            "library": blob(lib.SerializeToString(deterministic=True)), "inputs": [tensor(x) for x in inputs],
            "outputs": as_list(out), "tolerance": tolerance})

    def add_dataset(self, case_id, ds, tolerance="exact", stateful=False):
        """A pipeline: the GraphDef tf.data serializes (what `distribute`
        registers, without the compression map) and TensorFlow's elements from
        two fresh iterators (each must equal ours from a fresh iterator). Where
        the two differ (TensorFlow restarts a stateful op's stream with each
        iterator) the case is split: the first iterator, and both."""
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        # Re-serialized deterministically (tf.data orders attribute maps as
        # it likes, so the bytes would change from run to run).
        graph = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
        graph = graph.SerializeToString(deterministic=True)
        with tf.device("/CPU:0"):
            runs = [[[tensor(c) for c in tf.nest.flatten(el)] for el in ds] for _ in range(2)]
        # TensorFlow gives both iterators the same elements (a stateful op's
        # stream restarts with each iterator).
        assert runs[0] == runs[1], case_id
        if not stateful:
            self.cases.append({"id": case_id, "op": "dataset", "graph": blob(graph),
                               "iterations": runs, "tolerance": tolerance})
            return
        # A stateful op: the first iterator alone, and the two.
        self.cases.append({"id": case_id, "op": "dataset", "graph": blob(graph),
                           "iterations": runs[:1], "tolerance": tolerance})
        self.cases.append({"id": case_id + "/two iterators", "op": "dataset",
                           "graph": blob(graph), "iterations": runs, "tolerance": tolerance})

    def write(self):
        os.makedirs(OUT, exist_ok=True)
        path = os.path.join(OUT, self.name + ".json")
        with open(path, "w") as f:
            # One case a line: small, and diffs show which cases drifted.
            f.write('{"tf": %s,\n"nodes": %s,\n"cases": [\n' % (
                json.dumps(tf.__version__), json.dumps(self.nodes)))
            f.write(",\n".join(json.dumps(c, sort_keys=True, separators=(",", ":"))
                                for c in self.cases))
            f.write("\n]}\n")
        print(f"{path}: {len(self.cases)} cases, {os.path.getsize(path)} bytes")


def dname(d):
    return tf.as_dtype(d).name


def seed_tensor(s, dtype):
    return tf.constant(s, dtype)


def random_family():
    fam = Family("random")
    R = tf.raw_ops

    # --- seeds to key and counter, and the algorithm -------------------
    for sd in (tf.int32, tf.int64):
        for s in (SEEDS32 if sd == tf.int32 else SEEDS64):
            seed = seed_tensor(s, sd)
            fam.add("StatelessRandomGetKeyCounter",
                    lambda seed: R.StatelessRandomGetKeyCounter(seed=seed), [seed],
                    f"getkeycounter/{dname(sd)}/{s[0]},{s[1]}")
            fam.add("StatelessRandomGetKeyCounterAlg",
                    lambda seed: R.StatelessRandomGetKeyCounterAlg(seed=seed), [seed],
                    f"getkeycounteralg/{dname(sd)}/{s[0]},{s[1]}")
    fam.add("StatelessRandomGetKeyCounter",
            lambda seed: R.StatelessRandomGetKeyCounter(seed=seed),
            [tf.constant([1, 2, 3], tf.int64)], "getkeycounter/error/seed3")
    fam.add("StatelessRandomGetAlg", lambda: R.StatelessRandomGetAlg(), [], "getalg")

    # --- v1 stateless ops: a seed pair ---------------------------------
    v1 = [("StatelessRandomUniform", R.StatelessRandomUniform),
          ("StatelessRandomNormal", R.StatelessRandomNormal),
          ("StatelessTruncatedNormal", R.StatelessTruncatedNormal)]
    for op, f in v1:
        for dt in FLOATS:
            # Every shape in float32; the other dtypes on fewer.
            for shape in SHAPES if dt == tf.float32 else [[], [0], [5], [9]]:
                seeds = SEEDS32 if shape == [9] else [(1, 2)]
                for s in seeds:
                    fam.add(op, lambda shape, seed, f=f, dt=dt: f(shape=shape, seed=seed, dtype=dt),
                            [tf.constant(shape, tf.int32), seed_tensor(s, tf.int32)],
                            f"{op}/{dname(dt)}/{shape}/{s[0]},{s[1]}")
        # int64 seeds and int64 shape
        for s in SEEDS64:
            fam.add(op, lambda shape, seed, f=f: f(shape=shape, seed=seed, dtype=tf.float32),
                    [tf.constant([6], tf.int64), seed_tensor(s, tf.int64)],
                    f"{op}/float32/[6]/int64 seed {s[0]},{s[1]}")
        fam.add(op, lambda shape, seed, f=f: f(shape=shape, seed=seed, dtype=tf.float32),
                [tf.constant([2], tf.int32), tf.constant([1, 2, 3], tf.int32)],
                f"{op}/error/seed3")
        fam.add(op, lambda shape, seed, f=f: f(shape=shape, seed=seed, dtype=tf.float32),
                [tf.constant([-1], tf.int32), tf.constant([1, 2], tf.int32)],
                f"{op}/error/negative shape")

    # A long truncated normal: groups restart at fixed offsets.
    for dt in FLOATS:
        fam.add("StatelessTruncatedNormal",
                lambda shape, seed, dt=dt: R.StatelessTruncatedNormal(shape=shape, seed=seed, dtype=dt),
                [tf.constant([67], tf.int32), seed_tensor((7, 11), tf.int32)],
                f"StatelessTruncatedNormal/{dname(dt)}/[67]/7,11")

    int_ranges = {
        tf.int32: [(0, 1), (-5, 7), (0, 10), (I32_MIN, I32_MAX), (I32_MIN, I32_MIN + 1),
                   (-(2**30), 2**30 + 12345)],
        tf.int64: [(0, 1), (-5, 7), (I64_MIN, I64_MAX), (I64_MIN, I64_MIN + 1),
                   (-(2**40), 2**62 + 999)],
    }
    for dt in (tf.int32, tf.int64):
        for lo, hi in int_ranges[dt]:
            for shape in ([], [7], [2, 3]):
                fam.add("StatelessRandomUniformInt",
                        lambda shape, seed, lo, hi: R.StatelessRandomUniformInt(
                            shape=shape, seed=seed, minval=lo, maxval=hi),
                        [tf.constant(shape, tf.int32), seed_tensor((3, -4), tf.int64),
                         tf.constant(lo, dt), tf.constant(hi, dt)],
                        f"StatelessRandomUniformInt/{dname(dt)}/{shape}/{lo},{hi}")
        for lo, hi in [(3, 3), (5, -5)]:
            fam.add("StatelessRandomUniformInt",
                    lambda shape, seed, lo, hi: R.StatelessRandomUniformInt(
                        shape=shape, seed=seed, minval=lo, maxval=hi),
                    [tf.constant([2], tf.int32), seed_tensor((3, -4), tf.int64),
                     tf.constant(lo, dt), tf.constant(hi, dt)],
                    f"StatelessRandomUniformInt/{dname(dt)}/error/{lo},{hi}")
        fam.add("StatelessRandomUniformInt",
                lambda shape, seed, lo, hi: R.StatelessRandomUniformInt(
                    shape=shape, seed=seed, minval=lo, maxval=hi),
                [tf.constant([0], tf.int32), seed_tensor((3, -4), tf.int64),
                 tf.constant(5, dt), tf.constant(5, dt)],
                f"StatelessRandomUniformInt/{dname(dt)}/empty with empty range")

    # --- v2 stateless ops: key, counter, alg ----------------------------
    def kc(s):
        k, c = R.StatelessRandomGetKeyCounter(seed=tf.constant(s, tf.int64))
        return k, c
    keycounters = [("seed 1,2",) + kc((1, 2)), ("seed 0,0",) + kc((0, 0)),
                   ("zero", tf.constant([0], tf.uint64), tf.constant([0, 0], tf.uint64)),
                   ("carry", tf.constant([U64_MAX], tf.uint64),
                    tf.constant([U64_MAX - 2, U64_MAX], tf.uint64)),
                   ("counter3", tf.constant([12345], tf.uint64),
                    tf.constant([2**32 - 1, 7, 99], tf.uint64))]
    v2 = [("StatelessRandomUniformV2", R.StatelessRandomUniformV2),
          ("StatelessRandomNormalV2", R.StatelessRandomNormalV2),
          ("StatelessTruncatedNormalV2", R.StatelessTruncatedNormalV2)]
    for op, f in v2:
        for dt in FLOATS:
            for shape in ([], [0], [3, 0, 2], [5], [9], [2, 3]):
                for name, k, c in (keycounters if shape == [9] else keycounters[:1]):
                    for alg in ([1, 3] if name == "seed 1,2" and shape == [9] else [1]):
                        fam.add(op, lambda shape, key, counter, alg, f=f, dt=dt: f(
                                    shape=shape, key=key, counter=counter, alg=alg, dtype=dt),
                                [tf.constant(shape, tf.int32), k, c, tf.constant(alg, tf.int32)],
                                f"{op}/{dname(dt)}/{shape}/{name}/alg {alg}")
        k, c = kc((1, 2))
        for alg in (0, 2, 4, -1):
            fam.add(op, lambda shape, key, counter, alg, f=f: f(
                        shape=shape, key=key, counter=counter, alg=alg, dtype=tf.float32),
                    [tf.constant([3], tf.int32), k, c, tf.constant(alg, tf.int32)],
                    f"{op}/error/alg {alg}")
        # (A key of shape [2], or a counter of one element, is not checked
        # by TensorFlow, whose values then differ from run to run: not a
        # case; we refuse them.)

    k, c = kc((1, 2))
    for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
        unsigned = {tf.uint32: [(0, 1), (0, 10), (5, 2**31 + 7)],
                    tf.uint64: [(0, 1), (0, 10), (5, 2**63 + 7)]}
        for lo, hi in int_ranges.get(dt) or unsigned[dt]:
            for shape in ([], [7]):
                fam.add("StatelessRandomUniformIntV2",
                        lambda shape, key, counter, alg, lo, hi: R.StatelessRandomUniformIntV2(
                            shape=shape, key=key, counter=counter, alg=alg, minval=lo, maxval=hi),
                        [tf.constant(shape, tf.int32), k, c, tf.constant(1, tf.int32),
                         tf.constant(lo, dt), tf.constant(hi, dt)],
                        f"StatelessRandomUniformIntV2/{dname(dt)}/{shape}/{lo},{hi}")
        fam.add("StatelessRandomUniformIntV2",
                lambda shape, key, counter, alg, lo, hi: R.StatelessRandomUniformIntV2(
                    shape=shape, key=key, counter=counter, alg=alg, minval=lo, maxval=hi),
                [tf.constant([2], tf.int32), k, c, tf.constant(1, tf.int32),
                 tf.constant(4, dt), tf.constant(4, dt)],
                f"StatelessRandomUniformIntV2/{dname(dt)}/error/4,4")
        for shape in ([], [7]):
            fam.add("StatelessRandomUniformFullIntV2",
                    lambda shape, key, counter, alg, dt=dt: R.StatelessRandomUniformFullIntV2(
                        shape=shape, key=key, counter=counter, alg=alg, dtype=dt),
                    [tf.constant(shape, tf.int32), k, c, tf.constant(1, tf.int32)],
                    f"StatelessRandomUniformFullIntV2/{dname(dt)}/{shape}")
        fam.add("StatelessRandomUniformFullInt",
                lambda shape, seed, dt=dt: R.StatelessRandomUniformFullInt(
                    shape=shape, seed=seed, dtype=dt),
                [tf.constant([7], tf.int32), seed_tensor((5, 6), tf.int32)],
                f"StatelessRandomUniformFullInt/{dname(dt)}/[7]")

    # --- seeded stateful ops: successive runs of one kernel -------------
    for op, f in (("RandomUniform", R.RandomUniform),
                  ("RandomStandardNormal", R.RandomStandardNormal),
                  ("TruncatedNormal", R.TruncatedNormal)):
        for dt in FLOATS:
            pairs = ((1, 2), (0, 5), (87654321, 0), (-3, 2**40))
            for seed, seed2 in pairs if dt == tf.float32 else pairs[:1]:
                for shape in ([5], [2, 3]):
                    fam.add(op, lambda shape, f=f, dt=dt, seed=seed, seed2=seed2: f(
                                shape=shape, dtype=dt, seed=seed, seed2=seed2),
                            [tf.constant(shape, tf.int32)],
                            f"{op}/{dname(dt)}/{shape}/seed {seed},{seed2}", calls=3)
    for dt in (tf.int32, tf.int64):
        for lo, hi in ((0, 10), (-5, 7), (I32_MIN, I32_MAX)):
            fam.add("RandomUniformInt",
                    lambda shape, lo, hi: R.RandomUniformInt(
                        shape=shape, minval=lo, maxval=hi, seed=4, seed2=9),
                    [tf.constant([7], tf.int32), tf.constant(lo, dt), tf.constant(hi, dt)],
                    f"RandomUniformInt/{dname(dt)}/{lo},{hi}", calls=3)
    # Stateful errors, and the empty output an empty range may give.
    for shape, lo, hi in (([2], 3, 3), ([0], 3, 3), ([2], 5, -5)):
        fam.add("RandomUniformInt",
                lambda shape, lo, hi: R.RandomUniformInt(
                    shape=shape, minval=lo, maxval=hi, seed=41, seed2=42),
                [tf.constant(shape, tf.int32), tf.constant(lo, tf.int32), tf.constant(hi, tf.int32)],
                f"RandomUniformInt/int32/{shape}/{lo},{hi}")
    fam.add("RandomUniform", lambda shape: R.RandomUniform(shape=shape, dtype=tf.float32, seed=43),
            [tf.constant([2, -1], tf.int32)], "RandomUniform/error/negative shape")
    for dt, values in ((tf.int32, np.arange(10, dtype=np.int32)),
                       (tf.float32, np.arange(12, dtype=np.float32).reshape(6, 2))):
        fam.add("RandomShuffle", lambda value: R.RandomShuffle(value=value, seed=5, seed2=6),
                [tf.constant(values, dt)], f"RandomShuffle/{dname(dt)}/{list(values.shape)}",
                calls=3)
    return fam


def image_family():
    fam = Family("image_random")
    rng = np.random.default_rng(33)

    def bright_flip(delta, s1, s2):
        def f(x):
            x = tf.image.stateless_random_brightness(x, delta, seed=s1)
            return tf.image.stateless_random_flip_left_right(x, seed=s2)
        return f

    # The pipeline: brightness then left-right flip, seeded.
    for i, (delta, s1, s2) in enumerate([(0.2, (1, 2), (3, 4)), (0.5, (0, 0), (0, 1)),
                                         (0.1, (-5, 17), (42, -42))]):
        img = rng.random((4, 5, 3), dtype=np.float32)
        fam.add_function(f"brightness+flip/{i}/delta {delta}/seeds {s1} {s2}",
                         bright_flip(delta, s1, s2), [img])
    # A batch (rank 4: per-image flips by rounding), with NaN, inf and -0.0.
    img = rng.random((3, 2, 4, 1), dtype=np.float32)
    img[0, 0, 0, 0] = np.nan
    img[1, 1, 2, 0] = -np.inf
    img[2, 0, 1, 0] = -0.0
    for s2 in ((1, 1), (2, 3)):
        fam.add_function(f"flip batch/seed {s2}",
                         lambda x, s2=s2: tf.image.stateless_random_flip_left_right(x, seed=s2),
                         [img])
    fam.add_function("brightness/float64", lambda x: tf.image.stateless_random_brightness(
        x, 0.25, seed=(11, 12)), [rng.random((2, 2, 3))])
    # The Python layers over the stateless ops: seed splitting and folding
    # (full-range ints), ranges, moments, crops.
    seed = tf.constant([1, 2], tf.int64)
    fam.add_function("tf.random.split(seed, 3)", lambda s: tf.random.split(s, 3), [seed])
    fam.add_function("tf.random.fold_in(seed, 3)", lambda s: tf.random.fold_in(s, 3), [seed])
    fam.add_function("stateless_uniform int64 full range", lambda s: tf.random.stateless_uniform(
        [5], seed=s, minval=None, maxval=None, dtype=tf.int64), [seed])
    fam.add_function("stateless_uniform float [-3, 7)", lambda s: tf.random.stateless_uniform(
        [6], seed=s, minval=-3.0, maxval=7.0), [seed])
    fam.add_function("stateless_normal mean 2 stddev 3", lambda s: tf.random.stateless_normal(
        [7], seed=s, mean=2.0, stddev=3.0), [seed])
    fam.add_function("stateless_truncated_normal float64", lambda s: tf.random.stateless_truncated_normal(
        [5], seed=s, dtype=tf.float64), [seed])
    fam.add_function("stateless_random_crop", lambda x: tf.image.stateless_random_crop(
        x, [3, 2, 3], seed=(5, 9)), [rng.random((6, 5, 3), dtype=np.float32)])
    fam.add_function("flip up-down/seed 4,5", lambda x: tf.image.stateless_random_flip_up_down(
        x, seed=(4, 5)), [rng.random((3, 2, 1), dtype=np.float32)])
    return fam


def pipeline_family():
    """Seeds flowing through pipelines: the ops above inside map functions."""
    fam = Family("pipelines_random")
    rng = np.random.default_rng(7)
    imgs = rng.random((3, 4, 5, 3), dtype=np.float32)
    D = tf.data.Dataset

    def bright_flip(x):
        x = tf.image.stateless_random_brightness(x, 0.2, seed=(1, 2))
        return tf.image.stateless_random_flip_left_right(x, seed=(3, 4))
    fam.add_dataset("stateless brightness+flip map", D.from_tensor_slices(imgs).map(bright_flip))
    fam.add_dataset("stateless uniform, per-element seed", D.range(5).map(
        lambda i: tf.random.stateless_uniform([3], seed=tf.stack([i, 7]))))
    fam.add_dataset("stateless uniform int32 range, per-element seed", D.range(6).map(
        lambda i: tf.random.stateless_uniform([2], seed=[i, i], minval=0, maxval=10,
                                              dtype=tf.int32)))
    fam.add_dataset("stateless flip of batches", D.from_tensor_slices(imgs).batch(2).map(
        lambda x: tf.image.stateless_random_flip_left_right(x, seed=(1, 2))))
    fam.add_dataset("seeded uniform in map", D.range(4).map(lambda i: tf.random.uniform([2], seed=5)),
                    stateful=True)
    fam.add_dataset("seeded uniform in map, repeated", D.range(3).map(
        lambda i: tf.random.uniform([2], seed=5)).repeat(2), stateful=True)
    fam.add_dataset("seeded truncated normal in map", D.range(3).map(
        lambda i: tf.random.truncated_normal([5], seed=3)), stateful=True)
    fam.add_dataset("seeded random_flip_left_right", D.from_tensor_slices(
        np.concatenate([imgs] * 4)).map(lambda x: tf.image.random_flip_left_right(x, seed=9)),
        stateful=True)
    return fam


def long_family():
    """The by-hand budget: many seeds, thousands of values a case."""
    fam = Family("long")
    R = tf.raw_ops
    rng = np.random.default_rng(2021)

    def seeds(n):
        return [tuple(int(x) for x in rng.integers(I64_MIN, I64_MAX, 2, dtype=np.int64))
                for _ in range(n)]
    for op, f in (("StatelessRandomUniform", R.StatelessRandomUniform),
                  ("StatelessRandomNormal", R.StatelessRandomNormal),
                  ("StatelessTruncatedNormal", R.StatelessTruncatedNormal)):
        for dt in FLOATS:
            for s in seeds(10):
                fam.add(op, lambda shape, seed, f=f, dt=dt: f(shape=shape, seed=seed, dtype=dt),
                        [tf.constant([4099], tf.int32), seed_tensor(s, tf.int64)],
                        f"{op}/{dname(dt)}/[4099]/{s[0]},{s[1]}")
    for op, f in (("StatelessRandomNormalV2", R.StatelessRandomNormalV2),
                  ("StatelessTruncatedNormalV2", R.StatelessTruncatedNormalV2)):
        for i in range(10):
            key = tf.constant([rng.integers(0, 2**64, dtype=np.uint64)], tf.uint64)
            # Counters a few blocks (or groups) short of a 64-bit carry.
            c0 = 2**64 - int(rng.integers(1, 300_000))
            counter = tf.constant([c0, int(rng.integers(0, 2**64, dtype=np.uint64))], tf.uint64)
            fam.add(op, lambda shape, key, counter, alg, f=f: f(
                        shape=shape, key=key, counter=counter, alg=alg, dtype=tf.float32),
                    [tf.constant([3001], tf.int32), key, counter, tf.constant(1, tf.int32)],
                    f"{op}/float32/[3001]/near carry {i}")
    for dt, lo_hi in ((tf.int32, (I32_MIN, I32_MAX)), (tf.int64, (I64_MIN, I64_MAX))):
        for i in range(20):
            lo, hi = sorted(int(x) for x in rng.integers(*lo_hi, 2, dtype=dt.as_numpy_dtype))
            hi += 1
            fam.add("StatelessRandomUniformInt",
                    lambda shape, seed, lo, hi: R.StatelessRandomUniformInt(
                        shape=shape, seed=seed, minval=lo, maxval=hi),
                    [tf.constant([1001], tf.int32), seed_tensor(seeds(1)[0], tf.int64),
                     tf.constant(lo, dt), tf.constant(hi, dt)],
                    f"StatelessRandomUniformInt/{dname(dt)}/{lo},{hi}/{i}")
    for op, f in (("RandomUniform", R.RandomUniform), ("RandomStandardNormal", R.RandomStandardNormal),
                  ("TruncatedNormal", R.TruncatedNormal)):
        for dt in FLOATS:
            s1, s2 = seeds(1)[0]
            fam.add(op, lambda shape, f=f, dt=dt, s1=s1, s2=s2: f(
                        shape=shape, dtype=dt, seed=s1, seed2=s2),
                    [tf.constant([1000], tf.int32)], f"{op}/{dname(dt)}/[1000]/seed {s1},{s2}",
                    calls=5)
    fam.add("RandomShuffle", lambda value: R.RandomShuffle(value=value, seed=77, seed2=-5),
            [tf.constant(np.arange(1000, dtype=np.int64))], "RandomShuffle/int64/[1000]", calls=5)
    for i, (s1, s2) in enumerate(zip(seeds(20), seeds(20))):
        s1 = tuple(x % 2**31 for x in s1)
        s2 = tuple(x % 2**31 for x in s2)

        def f(x, s1=s1, s2=s2):
            x = tf.image.stateless_random_brightness(x, 0.3, seed=s1)
            return tf.image.stateless_random_flip_left_right(x, seed=s2)
        fam.add_function(f"brightness+flip/{i}", f,
                         [rng.random((16, 16, 3), dtype=np.float32)])
    return fam


def main():
    global OUT
    tf.config.set_visible_devices([], "GPU")
    tf.config.threading.set_intra_op_parallelism_threads(1)
    if "--long" in sys.argv:
        OUT = (sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv
               else "/tmp/tfdata-differential-long")
        long_family().write()
        return
    fams = [random_family(), image_family(), pipeline_family()]
    for f in fams:
        f.write()
    manifest = {"tf": tf.__version__, "python": sys.version.split()[0],
                "numpy": np.__version__, "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
                "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                "intra_op_threads": 1,
                "families": {f.name: len(f.cases) for f in fams}}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
