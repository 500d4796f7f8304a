"""The differential harness: how a case is traced, run by TensorFlow and
stored (gen.py's docstring has the file format). Family modules under
families/ build their cases with `Family`."""


import base64
import contextlib
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
CRATE = os.path.join(ROOT, "crates", "tfdata-graph")


@contextlib.contextmanager
def in_crate():
    """Runs the block in crates/tfdata-graph, where `cargo test` replays the
    cases: file sources and vocabularies are written and named there by
    paths relative to the crate, which hold on any checkout."""
    cwd = os.getcwd()
    os.chdir(CRATE)
    try:
        yield
    finally:
        os.chdir(cwd)
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
    raw = t.numpy()
    a = np.asarray(raw)
    shape = ",".join(str(d) for d in a.shape)
    if t.dtype == tf.string:
        # Each string's bytes in hex, comma-separated, in row-major order. A
        # scalar is taken as the bytes it is: numpy's fixed-width bytes type
        # would drop its trailing NULs.
        values = [raw] if isinstance(raw, bytes) else np.asarray(raw, dtype=object).reshape(-1)
        items = ",".join(bytes(x).hex() for x in values)
        return f"{t.dtype.as_datatype_enum}|{shape}|{items}"
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
        msg = e.message
        if msg.startswith("Graph execution error:"):
            # A traced function's error: the kernel's message is the line
            # before the "[[{{node ...}}]]" one, after the traceback.
            lines = msg.split("\n")
            at = next((i for i, l in enumerate(lines) if l.strip().startswith("[[")), len(lines))
            msg = lines[at - 1] if at > 0 else msg
        msg = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", msg)
        msg = msg.split(" [Op:")[0].split("\n")[0].strip()
        # Protobuf redacts the debug strings it prints behind a marker that
        # varies from run to run ("goo.gle/debugstr", "goo.gle/debugonly").
        msg = msg.split("goo.gle/debug")[0]
        if isinstance(e, tf.errors.NotFoundError):
            msg = msg.split(":")[0]  # "Could not find device for node"
        return None, {"code": e.error_code, "class": type(e).__name__, "message": msg}
    return out, None


def as_list(out):
    if isinstance(out, (list, tuple)):
        return [tensor(o) for o in out]
    return [tensor(out)]


def check_tolerance(tolerance, reason):
    """The tolerance and its reason, which may also be written inside it
    ("ulp:N:why", "abs:X:why", "zero-sign:why", "unordered-rows:why")."""
    kind, _, rest = tolerance.partition(":")
    if kind == "unordered-rows":
        # The first output's rows (and the same rows of every output with
        # as many) in any order, values exact; the reason is required.
        assert rest or reason, tolerance
        return "unordered-rows:" + (rest or reason), None
    if kind == "zero-sign" and rest:
        tolerance, reason = "zero-sign", reason or rest
    elif kind in ("ulp", "abs") and rest.count(":"):
        value, _, why = rest.partition(":")
        tolerance, reason = f"{kind}:{value}", reason or why
    assert re.fullmatch(r"exact|zero-sign|ulp:\d+|abs:[0-9.e+-]+", tolerance), tolerance
    assert (tolerance == "exact") == (reason is None), (tolerance, reason)
    return tolerance, reason


class Family:
    def __init__(self, name):
        self.name = name
        self.cases = []
        self.ids = set()
        # NodeDefs, each once: cases name them by index.
        self.nodes = []
        # A family's fix-up of pipeline graphs (names TensorFlow makes
        # differently from run to run), so regenerating gives the same bytes.
        self.normalize_graph = None

    def add(self, op, fn, inputs, case_id, tolerance="exact", calls=1, reason=None):
        """One op case: fn(*tensors) calls tf.raw_ops.<op> with keyword args.

        tolerance: "exact" (bit for bit), "unordered-rows:why" (rows in any
        order: see check_tolerance), or for float outputs "ulp:N" (within
        N units in the last place) or "abs:X" (within X); a tolerance other
        than "exact" needs a `reason` (why the op cannot be bit-exact), which
        the case carries. Integer and string outputs are always exact."""
        tolerance, reason = check_tolerance(tolerance, reason)
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
        if reason:
            case["reason"] = reason
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

    def add_function(self, case_id, fn, inputs, tolerance="exact", unknown_shapes=False,
                     traced=False):
        """A composite: a traced tf.function and its library, run by our
        executor. With unknown_shapes, traced for inputs of any shape (error
        cases that shape inference would refuse before a kernel runs). With
        traced, TensorFlow's outputs are the traced function's, not an eager
        call's (a TensorArray is a Python list eagerly, a TensorList traced)."""
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        inputs = [tf.convert_to_tensor(x) for x in inputs]
        specs = [tf.TensorSpec(None if unknown_shapes else x.shape, x.dtype) for x in inputs]
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
            out, err = run_error(lambda: (cf if traced else fn)(*inputs))
        case = {
            "id": case_id, "op": "function", "function": cf.function_def.signature.name,
            "library": blob(lib.SerializeToString(deterministic=True)), "inputs": [tensor(x) for x in inputs],
            "tolerance": tolerance}
        if err:
            case["error"] = err
        else:
            case["outputs"] = as_list(out)
        self.cases.append(case)

    def add_dataset(self, case_id, ds, tolerance="exact", stateful=False, iterators=2,
                    edit=None):
        """A pipeline: the GraphDef tf.data serializes (what `distribute`
        registers, without the compression map) and TensorFlow's elements from
        two fresh iterators (each must equal ours from a fresh iterator). Where
        the two differ (TensorFlow restarts a stateful op's stream with each
        iterator) the case is split: the first iterator, and both. `iterators=1`
        records one fresh iterator only: a seeded shuffle that reshuffles each
        iteration gives each iterator of one dataset another order."""
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        # Re-serialized deterministically (tf.data orders attribute maps as
        # it likes, so the bytes would change from run to run).
        graph = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
        if self.normalize_graph:
            self.normalize_graph(graph)
        if edit is not None:
            # A graph TensorFlow's Python does not write (an op's older
            # name): TensorFlow runs the edited graph itself.
            edit(graph)
            element_spec = ds.element_spec
            variant = tf.raw_ops.DatasetFromGraph(
                graph_def=graph.SerializeToString(deterministic=True))
            ds = tf.data.experimental.from_variant(variant, element_spec)
        graph = graph.SerializeToString(deterministic=True)
        with tf.device("/CPU:0"):
            runs = [[[tensor(c) for c in tf.nest.flatten(el)] for el in ds]
                    for _ in range(iterators)]
        # TensorFlow gives both iterators the same elements (a stateful op's
        # stream restarts with each iterator), unless the pipeline asks for
        # new randomness per iterator (`iterators=1`: its first only).
        assert runs[0] == runs[-1], case_id
        # What TensorFlow knows without running: the cardinality, and each
        # component's dtype and shape (None: unknown rank or dimension).
        known = {"cardinality": int(ds.cardinality()), "spec": spec_of(ds)}
        if not stateful:
            self.cases.append({"id": case_id, "op": "dataset", "graph": blob(graph),
                               "iterations": runs, "tolerance": tolerance, **known})
            return
        # A stateful op: the first iterator alone, and the two.
        self.cases.append({"id": case_id, "op": "dataset", "graph": blob(graph),
                           "iterations": runs[:1], "tolerance": tolerance, **known})
        self.cases.append({"id": case_id + "/two iterators", "op": "dataset",
                           "graph": blob(graph), "iterations": runs, "tolerance": tolerance,
                           **known})

    def add_graph_dataset(self, case_id, build, iterators=1, error=False):
        """A pipeline built by `build()` in a tf.compat.v1 graph (its
        functions may hold ops a tf.function cannot trace: the V1 queue and
        reader ops with reference-typed handles), serialized there by a
        Session; TensorFlow then runs that GraphDef itself (as a worker
        would) and the case is the rebuilt pipeline's (`add_dataset`, or
        `add_dataset_error` with `error`)."""
        g = tf.Graph()
        with g.as_default():
            ds = build()
            spec = ds.element_spec
            serialized = ds._as_serialized_graph()
            with tf.compat.v1.Session(graph=g) as session:
                graph = session.run(serialized)
        rebuilt = tf.data.experimental.from_variant(
            tf.raw_ops.DatasetFromGraph(graph_def=graph), spec)
        if not error:
            self.add_dataset(case_id, rebuilt, iterators=iterators)
            return
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        try:
            with tf.device("/CPU:0"):
                for _ in rebuilt:
                    pass
        except tf.errors.OpError as e:
            # The kernel's message, without the map's wrapper ("Error in
            # user-defined function passed to MapDataset:<a counter>
            # transformation with iterator: Iterator::...: ").
            msg = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", e.message)
            msg = re.sub(r"^Error in user-defined function passed to \S+ transformation with "
                         r"iterator: \S+: ", "", msg)
            msg = msg.split("\n")[0].split(" [Op:")[0].strip().split("goo.gle/debug")[0]
            err = {"code": e.error_code, "class": type(e).__name__, "message": msg}
        else:
            raise AssertionError(f"{case_id}: TensorFlow gave no error")
        graph = graph_pb2.GraphDef.FromString(rebuilt._as_serialized_graph().numpy())
        self.cases.append({"id": case_id, "op": "dataset",
                           "graph": blob(graph.SerializeToString(deterministic=True)),
                           "error": err, "tolerance": "exact"})

    def add_dataset_error(self, case_id, ds, edit):
        """A pipeline TensorFlow refuses: `ds`'s graph changed by
        `edit(GraphDef)` (a valid pipeline made invalid, since eager
        tf.data refuses bad arguments before a graph exists), and the error
        TensorFlow gives building or iterating it."""
        assert case_id not in self.ids, case_id
        self.ids.add(case_id)
        graph = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
        edit(graph)
        graph = graph.SerializeToString(deterministic=True)

        def run():
            with tf.device("/CPU:0"):
                variant = tf.raw_ops.DatasetFromGraph(graph_def=graph)
                rebuilt = tf.data.experimental.from_variant(variant, ds.element_spec)
                return [el for el in rebuilt]
        out, err = run_error(run)
        assert err is not None, case_id
        self.cases.append({"id": case_id, "op": "dataset", "graph": blob(graph),
                           "error": err, "tolerance": "exact"})

    def write(self, out=OUT):
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, self.name + ".json")
        with open(path, "w") as f:
            # One case a line: small, and diffs show which cases drifted.
            f.write('{"tf": %s,\n"nodes": %s,\n"cases": [\n' % (
                json.dumps(tf.__version__), json.dumps(self.nodes)))
            f.write(",\n".join(json.dumps(c, sort_keys=True, separators=(",", ":"))
                                for c in self.cases))
            f.write("\n]}\n")
        print(f"{path}: {len(self.cases)} cases, {os.path.getsize(path)} bytes")


def spec_of(ds):
    """Each component's [dtype enum, dims] (dims None for an unknown rank,
    a dimension None when unknown); None when a component is not a tensor
    (a window's datasets)."""
    out = []
    for s in tf.nest.flatten(ds.element_spec):
        if not isinstance(s, tf.TensorSpec):
            return None
        dims = None if s.shape.rank is None else [d for d in s.shape.as_list()]
        out.append([s.dtype.as_datatype_enum, dims])
    return out


def rename_op(old, new):
    """An `edit` renaming every `old` node (graph and functions) to `new`."""
    def edit(graph):
        nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
        hits = [n for n in nodes if n.op == old]
        assert hits, old
        for n in hits:
            n.op = new
    return edit


def set_input(graph, op, index, value):
    """Sets the Const feeding input `index` of the one `op` node of `graph`
    to `value` (keeping its dtype)."""
    hits = [n for n in graph.node if n.op == op]
    assert len(hits) == 1, [n.op for n in graph.node]
    name = hits[0].input[index].split(":")[0]
    const = next(n for n in graph.node if n.name == name)
    assert const.op == "Const", const
    dtype = tf.as_dtype(const.attr["value"].tensor.dtype)
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value, dtype))


def dname(d):
    return tf.as_dtype(d).name


def seed_tensor(s, dtype):
    return tf.constant(s, dtype)
