"""The by-hand budget (`gen.py --long`): many seeds, thousands of values a case; not committed."""

import numpy as np  # noqa: F401
import tensorflow as tf  # noqa: F401

from harness import (  # noqa: F401
    FLOATS, I32_MAX, I32_MIN, I64_MAX, I64_MIN, SEEDS32, SEEDS64, SHAPES, U64_MAX,
    Family, dname, seed_tensor)


def family():
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
