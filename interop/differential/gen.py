"""Differential cases: ops run by TensorFlow 2.21 eagerly on CPU, for
crates/tfdata-graph/tests/differential.rs to replay through our kernels.

Run under the TensorFlow 2.21 venv (no other dependency):

    TF_ENABLE_ONEDNN_OPTS=0 ~/.cache/tfdata-tf-2.21/bin/python interop/differential/gen.py

The longer by-hand budget: `gen.py --long [--out DIR]` writes larger cases
(thousands of values per case, random seeds, keys near counter carries,
random integer ranges) to DIR (default /tmp/tfdata-differential-long), not
committed; replay them with

    DIFFERENTIAL_CASES=DIR cargo test -p tfdata-graph --test differential

Each family of cases is a module under families/ with a `family()`
function returning a `Family` (harness.py); `gen.py NAME...` regenerates only
the families named, and the manifest counts what is on disk.

For each case it traces the op in a tf.function (so the NodeDef carries the
attributes TensorFlow infers and the defaults it fills in), runs the op
eagerly on /CPU:0 with the same inputs, and writes one JSON file per family to
crates/tfdata-graph/tests/differential/<family>.json:

    {"tf": version, "nodes": [hex NodeDef], "cases": [{"id", "op",
      "node": index into nodes (a NodeDef with only op and attributes),
      "inputs": [tensor], "outputs": [tensor] | "calls": [[tensor], ...]
      | "error": {"code", "class", "message"}, "tolerance": "exact" | "ulp:N" | "abs:X"
      | "zero-sign" | "unordered-rows:why" (rows of the first output, and the
      same rows of outputs with as many, in any order; a hash table's export),
      "reason": why, when the tolerance is not "exact"}]}

A tensor is a string "dtype|d0,d1,...|hex": TensorFlow's dtype enum, the
shape, the little-endian bytes as numpy holds them; raw bytes, so the
replay compares bits (NaN payloads, -0.0). A string tensor's third part is
each string's bytes in hex, comma-separated, in row-major order. "calls" is for
seeded stateful ops: the outputs of successive runs of one kernel, as a
pipeline's map function runs it once per element. A composite case carries a
FunctionDef library ("library": FunctionDefLibrary, "function": name)
instead of a NodeDef; a pipeline case ("op": "dataset") the GraphDef tf.data
serializes ("graph") and the elements of two fresh iterators ("iterations");
both protos zlib-compressed and base64. "tolerance" is "exact" (bit for bit) or, for float outputs only, "ulp:N"
or "abs:X" (harness.Family.add); "message" is the substring our error must contain:
TensorFlow's message without its "[Op:...]" suffix.

Everything is seeded and deterministic: regenerating gives the same files
(drift shows as a diff).
"""

import glob
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import OUT, np, tf  # noqa: E402

# Families written by hand-run budgets only, never committed.
BY_HAND = {"long"}


def families():
    names = sorted(os.path.basename(p)[:-3]
                   for p in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "families", "*.py")))
    return [n for n in names if n not in BY_HAND and not n.startswith("_")]


def main():
    tf.config.set_visible_devices([], "GPU")
    tf.config.threading.set_intra_op_parallelism_threads(1)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--long" in sys.argv:
        out = (sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv
               else "/tmp/tfdata-differential-long")
        importlib.import_module("families.long").family().write(out)
        return
    chosen = args or families()
    unknown = set(chosen) - set(families())
    if unknown:
        sys.exit(f"no such family: {sorted(unknown)}; families: {families()}")
    for name in chosen:
        importlib.import_module("families." + name).family().write(OUT)
    counts = {}
    for name in families():
        path = os.path.join(OUT, name + ".json")
        if os.path.exists(path):
            with open(path) as f:
                counts[name] = len(json.load(f)["cases"])
    manifest = {"tf": tf.__version__, "python": sys.version.split()[0],
                "numpy": np.__version__, "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
                "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                "intra_op_threads": 1,
                "families": counts}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
