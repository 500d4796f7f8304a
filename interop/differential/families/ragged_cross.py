"""RaggedCross (tf.ragged.cross and tf.ragged.cross_hashed): ragged, sparse
and dense columns in input_order, string joins and FingerprintCat64 hashes
bit for bit (the buckets are a model's contract), int32 and int64 row
splits, TensorFlow's validation errors."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


# Batch 3 columns. Ragged strings (row 1 empty in RG_I), sparse, dense.
RG_S = (tf.constant(["a", "bb", "", "\u00e9t\u00e9", "x" * 40, "k"]), i64([0, 2, 3, 6]))
RG_I = (i64([7, -1, 2**63 - 1, -2**63]), i64([0, 1, 1, 4]))
SP_S = (i64([[0, 0], [0, 1], [2, 0]]), tf.constant(["s0", "s1", "s2"]), i64([3, 4]))
SP_I = (i64([[1, 0], [1, 3], [2, 1]]), i64([5, 0, -5]), i64([3, 9]))
DN_S = tf.constant([["p", "q"], ["r", "s"], ["t", "u"]])
DN_I = i64([[1], [-9], [0]])


def family():
    fam = Family("ragged_cross")

    def case(name, order, ragged, sparse, dense, out_type=tf.string, num_buckets=0, hash_key=0,
             splits_type=tf.int64, cast_splits=True):
        nr, ns = len(ragged), len(sparse)
        args = ([r[0] for r in ragged]
                + [tf.cast(r[1], splits_type) if cast_splits else r[1] for r in ragged]
                + [s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse] + list(dense))

        def fn(*a):
            a = list(a)
            rv, a = a[:nr], a[nr:]
            rs, a = a[:nr], a[nr:]
            si, a = a[:ns], a[ns:]
            sv, a = a[:ns], a[ns:]
            ss, dn = a[:ns], a[ns:]
            return R.RaggedCross(ragged_values=rv, ragged_row_splits=rs, sparse_indices=si, sparse_values=sv,
                                 sparse_shape=ss, dense_inputs=dn, input_order=order,
                                 hashed_output=out_type == tf.int64, num_buckets=num_buckets, hash_key=hash_key,
                                 out_values_type=out_type, out_row_splits_type=splits_type)
        fam.add("RaggedCross", fn, args, f"RaggedCross/{name}")

    case("ragged strings x dense", "RD", [RG_S], [], [DN_S])
    case("all kinds, strings", "RSDR", [RG_S, RG_I], [SP_S], [DN_I])
    case("dense first", "DRS", [RG_I], [SP_I], [DN_S])
    case("int32 splits", "RD", [RG_S], [], [DN_I], splits_type=tf.int32)
    case("hashed", "RSDR", [RG_S, RG_I], [SP_S], [DN_I], tf.int64)
    case("hashed, buckets and key", "RSD", [RG_S], [SP_I], [DN_S], tf.int64, 1000, 956888297470)
    case("hashed, negative key", "DR", [RG_I], [], [DN_I], tf.int64, 7, -3)
    case("hashed, int32 splits", "RR", [RG_S, RG_S], [], [], tf.int64, 13, 1, tf.int32)
    case("one ragged column", "R", [RG_I], [], [])
    case("sparse only", "SS", [], [SP_S, SP_I], [])
    case("dense only, hashed", "DD", [], [], [DN_S, DN_I], tf.int64)
    case("no inputs", "", [], [], [])
    case("empty batch", "RD", [(tf.constant([], tf.string), i64([0]))], [], [tf.zeros([0, 2], tf.int64)])
    case("dense with no columns", "RD", [RG_S], [], [tf.zeros([3, 0], tf.string)])
    case("sparse rows beyond batch", "S", [], [(i64([[0, 0], [5, 0]]), tf.constant(["a", "b"]), i64([2, 1]))], [])
    case("error/batch sizes", "RD", [RG_S], [], [DN_S[:2]])
    case("error/sparse batch", "RS", [RG_S], [(i64([[0, 0]]), tf.constant(["a"]), i64([2, 1]))], [])
    case("error/splits first", "R", [(tf.constant(["a"]), i64([1, 1]))], [], [])
    case("error/splits decreasing", "R", [(tf.constant(["a", "b"]), i64([0, 2, 1, 2]))], [], [])
    case("error/splits last", "R", [(tf.constant(["a", "b"]), i64([0, 1]))], [], [])
    case("error/splits empty", "R", [(tf.constant([], tf.string), i64([]))], [], [])
    case("error/ragged rank", "R", [(tf.constant([["a"]]), i64([0, 1]))], [], [])
    case("error/dense vector", "RD", [RG_S], [], [tf.constant(["a", "b", "c"])])
    case("error/sparse shape rank 3", "S", [], [(i64([[0, 0, 0]]), tf.constant(["a"]), i64([1, 1, 1]))], [])
    case("error/sparse values matrix", "S", [], [(i64([[0, 0]]), tf.constant([["a"]]), i64([1, 1]))], [])
    case("error/order bad char", "X", [], [], [DN_S])
    case("error/order too many dense", "DD", [RG_S], [], [DN_S])
    case("error/order too many sparse", "SR", [RG_S], [], [DN_S])
    return fam
