"""TopKV2, Unique, UniqueV2, UniqueWithCounts, UniqueWithCountsV2. All exact.

TopK with sorted=False appears only where TensorFlow's order is the sorted one (k of 0, 1 or
the whole row): otherwise TensorFlow returns its selection heap's order, which ours does not
reproduce (docs/compatibility.md); NaN inputs to TopK are left out for the same reason. (The
old TopK is not here: TensorFlow 2.21 refuses it in graphs, GraphDef version 7 removed it.)"""

import numpy as np
import tensorflow as tf

from harness import I32_MAX, I32_MIN, I64_MAX, I64_MIN, U64_MAX, Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")
REAL = [tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int8, tf.uint8, tf.int16, tf.uint16,
        tf.int32, tf.int64, tf.uint32, tf.uint64]


def family():
    fam = Family("order")
    rng = np.random.default_rng(11)

    def topk(x, k, case_id, srt=True, tk=tf.int32, index_type=tf.int32):
        fam.add("TopKV2", lambda x, k: R.TopKV2(input=x, k=k, sorted=srt, index_type=index_type),
                [x, tf.constant(k, tk)], f"TopKV2/{case_id}/k={k},sorted={srt}")

    # Ties everywhere: few distinct values.
    for dt in REAL:
        lo = 0 if dt.is_unsigned else -3
        x = tf.constant(rng.integers(lo, lo + 5, size=[3, 7]), dt)
        for k in (0, 1, 3, 7):
            topk(x, k, f"{dt.name}/[3,7] ties")
        topk(x, 7, f"{dt.name}/[3,7] ties", srt=False)
        topk(x, 1, f"{dt.name}/[3,7] ties", srt=False)
    x = tf.constant(rng.standard_normal([2, 3, 20]), tf.float32)
    for k in (2, 5, 19):
        topk(x, k, "float32/[2,3,20] random")
    topk(tf.constant([0.0, -0.0, 1.0, -0.0, 0.0, -inf, inf, -1e-40, 1e-40], tf.float32), 9,
         "float32/zeros, infinities, denormals")
    topk(tf.constant([0.0, -0.0, 1.0, -0.0, 0.0, -inf, inf], tf.float64), 4,
         "float64/zeros and infinities")
    topk(tf.constant([I32_MIN, I32_MAX, 0, -1, I32_MAX], tf.int32), 3, "int32/limits")
    topk(tf.constant([I64_MIN, I64_MAX, 0, -1, I64_MIN], tf.int64), 5, "int64/limits")
    topk(tf.constant([U64_MAX, 0, 2**63, 1], tf.uint64), 2, "uint64/limits")
    topk(tf.constant(rng.standard_normal(300), tf.float32), 10, "float32/300 values")
    topk(tf.zeros([0], tf.float32), 0, "empty")
    topk(tf.zeros([3, 0], tf.float32), 0, "[3,0]")
    topk(tf.zeros([0, 4], tf.int32), 2, "[0,4]")
    topk(tf.constant([[5, 1, 5]], tf.int32), 2, "Tk int64", tk=tf.int64)
    topk(tf.constant([[5, 1, 5]], tf.int32), 2, "Tk int16", tk=tf.int16)
    topk(tf.constant([[5, 1, 5]], tf.int32), 2, "index int64", index_type=tf.int64)
    topk(tf.constant([[5, 1, 5]], tf.int32), 2, "index int16", index_type=tf.int16)
    topk(tf.constant([1.0, 2.0]), -1, "error/negative k")
    topk(tf.constant([1.0, 2.0]), 3, "error/k past the row")
    topk(tf.constant(1.0), 0, "error/scalar")
    fam.add("TopKV2", lambda x, k: R.TopKV2(input=x, k=k), [tf.constant([1.0, 2.0]),
                                                           tf.constant([1])],
            "TopKV2/error/k vector")

    # --- Unique ---------------------------------------------------------------
    def uniq(op, x, case_id, axis=None, out_idx=tf.int32):
        if axis is None:
            fam.add(op, lambda x: getattr(R, op)(x=x, out_idx=out_idx), [x],
                    f"{op}/{case_id}/{out_idx.name}")
        else:
            fam.add(op, lambda x, a: getattr(R, op)(x=x, axis=a, out_idx=out_idx), [x, axis],
                    f"{op}/{case_id}/{out_idx.name}")

    strings = tf.constant([b"b", b"a", b"", b"b", b"\xff\x00", b"a", b""])
    for op, v2 in (("Unique", False), ("UniqueWithCounts", False), ("UniqueV2", True),
                   ("UniqueWithCountsV2", True)):
        ax = (lambda a, d=tf.int64: tf.constant(a, d)) if v2 else (lambda a, d=None: None)
        for dt in REAL:
            lo = 0 if dt.is_unsigned else -3
            x = tf.constant(rng.integers(lo, lo + 4, size=[9]), dt)
            uniq(op, x, f"{dt.name}", ax([0]) if v2 else None)
        uniq(op, tf.constant([3, 1, 3], tf.int64), "int64", ax([0]) if v2 else None, tf.int64)
        uniq(op, strings, "string", ax([0]) if v2 else None)
        uniq(op, strings, "string", ax([0]) if v2 else None, tf.int64)
        uniq(op, tf.constant([True, False, True, True]), "bool", ax([0]) if v2 else None)
        for dt in (tf.float32, tf.float64, tf.float16, tf.bfloat16):
            uniq(op, tf.constant([nan, 0.0, -0.0, nan, 1.0, 0.0, -inf, -inf], dt),
                 f"{dt.name}/NaN and zeros", ax([0]) if v2 else None)
            uniq(op, tf.constant([-0.0, 0.0, 1e-40, 0.0], dt), f"{dt.name}/-0 first",
                 ax([0]) if v2 else None)
        uniq(op, tf.zeros([0], tf.int32), "empty", ax([0]) if v2 else None)
        uniq(op, tf.zeros([0], tf.string), "empty strings", ax([0]) if v2 else None)
        uniq(op, tf.constant([[1, 2], [1, 2]]), "error/matrix", ax([], tf.int32) if v2 else None)
        uniq(op, tf.constant(1), "error/scalar", ax([], tf.int32) if v2 else None)
        if not v2:
            continue
        m = tf.constant([[1, 2, 1], [3, 4, 3], [1, 2, 1], [3, 4, 3]], tf.int32)
        for a in ([0], [1], [-1], [-2]):
            uniq(op, m, f"matrix axis {a}", ax(a))
        uniq(op, m, "matrix axis int32", ax([1], tf.int32))
        uniq(op, tf.constant([5, 3, 5], tf.int32), "vector, axis []", ax([], tf.int32))
        r3 = tf.constant(rng.integers(0, 2, size=[2, 4, 3]), tf.int64)
        for a in ([0], [1], [2]):
            uniq(op, r3, f"rank 3 axis {a}", ax(a))
        uniq(op, tf.constant([[nan, 1.0], [nan, 1.0], [0.0, 2.0], [-0.0, 2.0], [0.0, 2.0]]),
             "float32/rows with NaN and zeros", ax([0]))
        uniq(op, tf.constant([["a", "b"], ["a", "b"], ["ab", ""]]), "string rows", ax([0]))
        uniq(op, tf.zeros([3, 0]), "[3,0] axis 0 (one empty row)", ax([0]))
        uniq(op, tf.zeros([0, 3]), "[0,3] axis 1", ax([1]))
        uniq(op, tf.zeros([0, 3]), "[0,3] axis 0", ax([0]))
        uniq(op, m, "error/two axes", ax([0, 1]))
        uniq(op, m, "error/axis 2", ax([2]))
        uniq(op, m, "error/axis -3", ax([-3]))
        uniq(op, m, "error/axis matrix", ax([[0]]))
    return fam
