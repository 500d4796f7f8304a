"""Seeded permutations (StatelessShuffle, RandomIndexShuffle) and NonDeterministicInts."""

import numpy as np
import tensorflow as tf

from harness import Family, dname


def family():
    fam = Family("random_shuffles")
    R = tf.raw_ops

    # --- StatelessShuffle: rows in a Philox Fisher-Yates order -------------
    values = {
        "int32 [10]": tf.range(10),
        "float32 [6,2]": tf.reshape(tf.range(12, dtype=tf.float32), [6, 2]),
        "string [5]": tf.constant(["a", "", "ünï", "d" * 40, "e"]),
        "int64 [4,0]": tf.zeros([4, 0], tf.int64),
        "float64 [1,3]": tf.constant([[1.0, 2.0, 3.0]], tf.float64),
        "int32 []": tf.constant(7),
        "bool [3,2,2]": tf.reshape(tf.range(12) % 3 == 0, [3, 2, 2]),
        "int32 [300]": tf.range(300),
    }
    for seed in ((1, 2), (-5, 2**40)):
        k, c = R.StatelessRandomGetKeyCounter(seed=tf.constant(seed, tf.int64))
        for name, v in values.items():
            for alg in (1, 3):
                fam.add("StatelessShuffle",
                        lambda value, key, counter, alg: R.StatelessShuffle(
                            value=value, key=key, counter=counter, alg=alg),
                        [v, k, c, tf.constant(alg, tf.int32)],
                        f"StatelessShuffle/{name}/seed {seed[0]},{seed[1]}/alg {alg}")
    k, c = R.StatelessRandomGetKeyCounter(seed=tf.constant([1, 2], tf.int64))
    fam.add("StatelessShuffle",
            lambda value, key, counter, alg: R.StatelessShuffle(
                value=value, key=key, counter=counter, alg=alg),
            [tf.range(5), k, c, tf.constant(2, tf.int32)], "StatelessShuffle/error/alg 2")

    # --- RandomIndexShuffle: a Simon cycle-walking cipher --------------------
    for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
        for sdt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
            fam.add("RandomIndexShuffle",
                    lambda index, seed, max_index: R.RandomIndexShuffle(
                        index=index, seed=seed, max_index=max_index),
                    [tf.constant(np.arange(12), dt), tf.constant([7, 8, 9], sdt),
                     tf.constant(11, dt)],
                    f"RandomIndexShuffle/{dname(dt)}/seed {dname(sdt)}")
    maxes = {tf.int32: [0, 1, 2, 100, 65535, 65536, 2**20 + 3, 2**31 - 1],
             tf.int64: [5, 2**31, 2**40 + 1, 2**62, 2**63 - 1],
             tf.uint64: [2**63, 2**64 - 1]}
    for dt, ms in maxes.items():
        for m in ms:
            for rounds in (4, 6, 10):
                fam.add("RandomIndexShuffle",
                        lambda index, seed, max_index, rounds=rounds: R.RandomIndexShuffle(
                            index=index, seed=seed, max_index=max_index, rounds=rounds),
                        [tf.constant([0, min(m, 1), min(m, 77), m], dt),
                         tf.constant([-1, 2**31 - 1, 12345], tf.int64), tf.constant(m, dt)],
                        f"RandomIndexShuffle/{dname(dt)}/max {m}/rounds {rounds}")
    # Scalars, per-output seeds and maxima; negative or out-of-range inputs.
    fam.add("RandomIndexShuffle",
            lambda index, seed, max_index: R.RandomIndexShuffle(
                index=index, seed=seed, max_index=max_index),
            [tf.constant(3, tf.int64), tf.constant([1, 2, 3], tf.int64), tf.constant(9, tf.int64)],
            "RandomIndexShuffle/scalar")
    fam.add("RandomIndexShuffle",
            lambda index, seed, max_index: R.RandomIndexShuffle(
                index=index, seed=seed, max_index=max_index),
            [tf.constant(3, tf.int64), tf.constant([[1, 2, 3], [4, 5, 6]], tf.int64),
             tf.constant([9, 1000], tf.int64)],
            "RandomIndexShuffle/seed rows")
    fam.add("RandomIndexShuffle",
            lambda index, seed, max_index: R.RandomIndexShuffle(
                index=index, seed=seed, max_index=max_index),
            [tf.constant([-1, -100], tf.int32), tf.constant([1, 2, 3], tf.int32),
             tf.constant(-2, tf.int32)],
            "RandomIndexShuffle/error/negative index")
    for idx, m in (([0, 1], -2), ([0, 5, -1], 3)):
        fam.add("RandomIndexShuffle",
                lambda index, seed, max_index: R.RandomIndexShuffle(
                    index=index, seed=seed, max_index=max_index),
                [tf.constant(idx, tf.int64), tf.constant([1, 2, 3], tf.int64),
                 tf.constant(m, tf.int64)],
                f"RandomIndexShuffle/error/{idx} max {m}")
    fam.add("RandomIndexShuffle",
            lambda index, seed, max_index: R.RandomIndexShuffle(
                index=index, seed=seed, max_index=max_index),
            [tf.constant([1, 2, 3], tf.int64), tf.constant([1, 2], tf.int64),
             tf.constant(9, tf.int64)],
            "RandomIndexShuffle/error/seed [2]")
    fam.add("RandomIndexShuffle",
            lambda index, seed, max_index: R.RandomIndexShuffle(
                index=index, seed=seed, max_index=max_index),
            [tf.constant([1, 2, 3], tf.int64), tf.constant([1, 2, 3], tf.int64),
             tf.constant([9, 9], tf.int64)],
            "RandomIndexShuffle/error/max [2]")

    # --- NonDeterministicInts: only what is deterministic about it ----------
    for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
        for shape in ([0], [3, 0]):
            fam.add("NonDeterministicInts",
                    lambda shape, dt=dt: R.NonDeterministicInts(shape=shape, dtype=dt),
                    [tf.constant(shape, tf.int64)], f"NonDeterministicInts/{dname(dt)}/{shape}")
    fam.add("NonDeterministicInts",
            lambda shape: R.NonDeterministicInts(shape=shape),
            [tf.constant([2, -1], tf.int32)], "NonDeterministicInts/error/negative")
    return fam
