"""Feature crosses: SparseCross (string and hashed outputs, both internal
types), SparseCrossV2 (a separator) and SparseCrossHashed (farmhash
Fingerprint64 / SipHash with a salt, FingerprintCat64 chains), bit for bit:
the buckets are a model's contract."""

import tensorflow as tf

from harness import Family

R = tf.raw_ops


def i64(v, shape=None):
    return tf.constant(v, tf.int64, shape=shape)


def flat(args, n_sparse):
    return list(args[:n_sparse]), list(args[n_sparse:2 * n_sparse]), list(args[2 * n_sparse:3 * n_sparse]), \
        list(args[3 * n_sparse:])


# Two sparse columns (strings, ints) and two dense (strings, ints), batch 3;
# row 1 of the int column is empty.
SP_S = (i64([[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]]),
        tf.constant(["a", "bb", "", "\u00e9t\u00e9", "x" * 40, "k"]), i64([3, 3]))
SP_I = (i64([[0, 0], [2, 0], [2, 1]]), i64([7, -1, 2**62]), i64([3, 2]))
DN_S = tf.constant([["p", "q"], ["r", "s"], ["t", "u"]])
DN_I = i64([[1], [-9], [0]])


def inputs(sparse, dense):
    return [s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse] + list(dense)


def family():
    fam = Family("sparse_cross")

    def v1(name, sparse, dense, out_type, internal, hashed, num_buckets=0, hash_key=0):
        n = len(sparse)

        def fn(*a):
            ind, val, sh, dn = flat(a, n)
            return R.SparseCross(indices=ind, values=val, shapes=sh, dense_inputs=dn, hashed_output=hashed,
                                 num_buckets=num_buckets, hash_key=hash_key, out_type=out_type,
                                 internal_type=internal)
        fam.add("SparseCross", fn, inputs(sparse, dense), f"SparseCross/{name}")

    v1("strings", [SP_S], [DN_S], tf.string, tf.string, False)
    v1("strings and ints", [SP_S, SP_I], [DN_S, DN_I], tf.string, tf.int64, False)
    v1("hashed", [SP_S, SP_I], [DN_S, DN_I], tf.int64, tf.int64, True, 0, 0)
    v1("hashed, buckets and key", [SP_S, SP_I], [DN_S, DN_I], tf.int64, tf.int64, True, 1000, 956888297470)
    v1("hashed, string internal", [SP_S], [DN_S], tf.int64, tf.string, True, 17, 5)
    v1("dense only", [], [DN_S, DN_I], tf.string, tf.int64, False)
    v1("one sparse column, hashed", [SP_I], [], tf.int64, tf.int64, True, 0, 1)
    v1("empty batch", [(tf.zeros([0, 2], tf.int64), tf.constant([], tf.string), i64([0, 5]))], [],
       tf.string, tf.string, False)
    v1("error/batch sizes", [SP_S], [DN_S[:2]], tf.string, tf.string, False)
    v1("error/int for string internal", [SP_I], [], tf.string, tf.string, False)
    v1("error/indices width", [(i64([[0, 0, 0]]), tf.constant(["a"]), i64([1, 1]))], [], tf.string, tf.string, False)
    v1("error/values length", [(i64([[0, 0]]), tf.constant(["a", "b"]), i64([1, 1]))], [], tf.string, tf.string,
       False)
    v1("error/shape length", [(i64([[0, 0]]), tf.constant(["a"]), i64([1, 1, 1]))], [], tf.string, tf.string, False)
    v1("error/dense vector", [SP_S], [tf.constant(["a", "b", "c"])], tf.string, tf.string, False)

    def v2(name, sparse, dense, sep):
        n = len(sparse)

        def fn(*a):
            ind, val, sh, dn = flat(a[:-1], n)
            return R.SparseCrossV2(indices=ind, values=val, shapes=sh, dense_inputs=dn, sep=a[-1])
        fam.add("SparseCrossV2", fn, inputs(sparse, dense) + [tf.constant(sep)], f"SparseCrossV2/{name}")

    v2("strings and ints", [SP_S, SP_I], [DN_S, DN_I], "_X_")
    v2("empty separator", [SP_S], [DN_I], "")
    v2("unicode separator", [SP_I], [DN_S], "\u00b7\u00b7")
    v2("error/separator vector", [SP_S], [DN_S], ["a"])

    def hashed(name, sparse, dense, num_buckets, strong, salt):
        n = len(sparse)

        def fn(*a):
            ind, val, sh, dn = flat(a[:-3], n)
            return R.SparseCrossHashed(indices=ind, values=val, shapes=sh, dense_inputs=dn, num_buckets=a[-3],
                                       strong_hash=a[-2], salt=a[-1])
        fam.add("SparseCrossHashed", fn, inputs(sparse, dense) + [i64(num_buckets), tf.constant(strong), i64(salt)],
                f"SparseCrossHashed/{name}")

    hashed("fast", [SP_S, SP_I], [DN_S, DN_I], 0, False, [0, 0])
    hashed("fast, buckets", [SP_S, SP_I], [DN_S, DN_I], 100, False, [1, 2])
    # (A dense int64 column under strong_hash crashes TensorFlow 2.21; ours
    # refuses it.)
    hashed("strong", [SP_S, SP_I], [DN_S], 100, True, [137, 13])
    hashed("strong, no buckets", [SP_I], [DN_S], 0, True, [-1, 2**62])
    hashed("dense ints only", [], [DN_I, DN_I], 0, False, [0, 0])
    hashed("error/salt length", [SP_S], [DN_S], 10, False, [1, 2, 3])
    return fam
