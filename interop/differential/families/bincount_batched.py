"""SparseBincount and RaggedBincount: every Tidx and weights dtype, weighted, unweighted and
binary, rank-1 and batched sparse inputs, values past the last bin, empty inputs and TF's
errors. Exact (TF sums weights in input order, as ours does).

Not here, because tfdata refuses them where TF 2.21 misbehaves: RaggedBincount with
decreasing splits (TF files values under the wrong rows) or weights of another size than the
values (TF reads past short weights), and SparseBincount with a rank-0 dense_shape (TF's
process crashes)."""

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
nan, inf = float("nan"), float("inf")


def family():
    fam = Family("bincount_batched")
    rng = np.random.default_rng(53)
    i64 = lambda v: tf.constant(v, tf.int64)

    for binary in (False, True):
        sb = lambda indices, values, dense_shape, size, weights, binary=binary: R.SparseBincount(
            indices=indices, values=values, dense_shape=dense_shape, size=size, weights=weights,
            binary_output=binary)
        rb = lambda splits, values, size, weights, binary=binary: R.RaggedBincount(
            splits=splits, values=values, size=size, weights=weights, binary_output=binary)
        for tidx in (tf.int32, tf.int64):
            for wt in (None, tf.int32, tf.int64, tf.float32, tf.float64):
                tag = f"{tidx.name} {wt.name if wt else 'unweighted'} binary={binary}"
                # A batched [4, 9] sparse tensor with 20 entries, in row-major order.
                flat = np.sort(rng.choice(36, 20, replace=False))
                idx = np.stack([flat // 9, flat % 9], 1)
                vals = tf.constant(rng.integers(0, 8, 20), tidx)
                if wt is None:
                    w = tf.zeros([0], tf.float32)
                elif wt.is_floating:
                    w = tf.constant(rng.uniform(-3, 3, 20), wt)
                else:
                    w = tf.constant(rng.integers(-4, 9, 20), wt)
                size = tf.constant(6, tidx)
                fam.add("SparseBincount", sb, [i64(idx), vals, i64([4, 9]), size, w],
                        f"SparseBincount/{tag} batched")
                fam.add("SparseBincount", sb, [i64(flat.reshape(-1, 1)), vals, i64([36]), size, w],
                        f"SparseBincount/{tag} vector")
                splits = i64([0, 3, 3, 11, 20])
                fam.add("RaggedBincount", rb, [splits, vals, size, w],
                        f"RaggedBincount/{tag}")
        info = np.iinfo(np.int32)
        fam.add("SparseBincount", sb, [i64([[0, 1], [0, 2], [1, 0], [1, 1]]),
                                       tf.constant([0, info.max, 3, 3]), i64([2, 3]),
                                       tf.constant(4), tf.constant([1e38, 3e38, inf, nan])],
                f"SparseBincount/extremes binary={binary}")
        fam.add("SparseBincount", sb, [tf.zeros([0, 2], tf.int64), tf.zeros([0], tf.int32),
                                       i64([3, 5]), tf.constant(4), tf.zeros([0])],
                f"SparseBincount/empty binary={binary}")
        fam.add("SparseBincount", sb, [i64([[0, 1]]), tf.constant([1]), i64([2, 3]),
                                       tf.constant(0), tf.zeros([0])],
                f"SparseBincount/size 0 binary={binary}")
        fam.add("SparseBincount", sb, [i64([[2, 0], [0, 2], [0, 2]]), tf.constant([1, 3, 3]),
                                       i64([3, 7]), tf.constant(4), tf.constant([1, 2, 5])],
                f"SparseBincount/unordered and repeated binary={binary}")
        fam.add("SparseBincount", sb, [i64([[0, 0, 1], [1, 2, 0]]), tf.constant([1, 2]),
                                       i64([2, 3, 2]), tf.constant(3), tf.zeros([0])],
                f"SparseBincount/rank 3 binary={binary}")
        fam.add("RaggedBincount", rb, [i64([0, 2, 2, 5]),
                                       tf.constant([0, info.max, 3, 3, 1]), tf.constant(4),
                                       tf.constant([1e38, 3e38, inf, nan, -0.0])],
                f"RaggedBincount/extremes binary={binary}")
        fam.add("RaggedBincount", rb, [i64([0]), tf.zeros([0], tf.int32), tf.constant(4),
                                       tf.zeros([0])], f"RaggedBincount/no rows binary={binary}")
        fam.add("RaggedBincount", rb, [i64([0, 0, 0]), tf.zeros([0], tf.int32), tf.constant(4),
                                       tf.zeros([0])], f"RaggedBincount/empty rows binary={binary}")
        fam.add("RaggedBincount", rb, [i64([[0, 2]]), tf.constant([[1, 3]]), tf.constant(4),
                                       tf.ones([1, 2])], f"RaggedBincount/matrices binary={binary}")

    sb = lambda indices, values, dense_shape, size, weights: R.SparseBincount(
        indices=indices, values=values, dense_shape=dense_shape, size=size, weights=weights)
    z = tf.zeros([0])
    for name, args in [
        ("negative value", [i64([[0], [2]]), tf.constant([1, -3]), i64([7]), tf.constant(4), z]),
        ("negative size", [i64([[0], [2]]), tf.constant([1, 2]), i64([7]), tf.constant(-1), z]),
        ("size vector", [i64([[0]]), tf.constant([1]), i64([3]), tf.constant([4]), z]),
        ("weights size", [i64([[0], [2]]), tf.constant([1, 2]), i64([7]), tf.constant(4),
                          tf.ones([3])]),
        ("row out of bounds", [i64([[0, 0], [5, 0]]), tf.constant([1, 1]), i64([3, 7]),
                               tf.constant(4), z]),
        ("negative row", [i64([[0, 0], [-1, 0]]), tf.constant([1, 1]), i64([3, 7]),
                          tf.constant(4), z]),
        ("column out of bounds", [i64([[0, 9]]), tf.constant([1]), i64([3, 7]),
                                  tf.constant(4), z]),
        ("count mismatch", [i64([[0, 0]]), tf.constant([1, 1]), i64([3, 7]), tf.constant(4), z]),
        ("index rank", [i64([[0, 1, 1]]), tf.constant([1]), i64([3, 7]), tf.constant(4), z]),
        ("indices vector", [i64([0]), tf.constant([1]), i64([3]), tf.constant(4), z]),
        ("values matrix", [i64([[0]]), tf.constant([[1]]), i64([3]), tf.constant(4), z]),
        ("shape matrix", [i64([[0]]), tf.constant([1]), i64([[3]]), tf.constant(4), z]),
    ]:
        fam.add("SparseBincount", sb, args, f"SparseBincount/error/{name}")

    rb = lambda splits, values, size, weights: R.RaggedBincount(
        splits=splits, values=values, size=size, weights=weights)
    for name, args in [
        ("negative value", [i64([0, 2]), tf.constant([1, -3]), tf.constant(4), z]),
        ("negative size", [i64([0, 2]), tf.constant([1, 3]), tf.constant(-4), z]),
        ("size vector", [i64([0, 2]), tf.constant([1, 3]), tf.constant([4]), z]),
        ("splits start", [i64([1, 2]), tf.constant([1, 3]), tf.constant(4), z]),
        ("splits end", [i64([0, 1]), tf.constant([1, 3]), tf.constant(4), z]),
        ("no splits", [tf.zeros([0], tf.int64), tf.zeros([0], tf.int32), tf.constant(4), z]),
    ]:
        fam.add("RaggedBincount", rb, args, f"RaggedBincount/error/{name}")
    return fam
