"""Random ops: seeds to keys and counters, every stateless and seeded stateful kernel."""

import numpy as np  # noqa: F401
import tensorflow as tf  # noqa: F401

from harness import (  # noqa: F401
    FLOATS, I32_MAX, I32_MIN, I64_MAX, I64_MIN, SEEDS32, SEEDS64, SHAPES, U64_MAX,
    Family, dname, seed_tensor)


def family():
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
