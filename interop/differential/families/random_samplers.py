"""Rejection samplers: gamma, Poisson, binomial, multinomial and parameterized truncated
normal, stateless and seeded stateful.

(The old RandomPoisson is not here: TensorFlow 2.21 refuses it in graphs, GraphDef
version 25 removed it for RandomPoissonV2.)"""

import numpy as np
import tensorflow as tf

from harness import Family, dname, seed_tensor

NAN, INF = float("nan"), float("inf")


def family():
    fam = Family("random_samplers")
    R = tf.raw_ops
    floats = (tf.float16, tf.float32, tf.float64)
    numbers = floats + (tf.int32, tf.int64)

    # --- seeded stateful ops: successive runs of one kernel -------------
    alphas = [0.5, 1.0, 3.0, 0.01, 100.0, 1e-30, 2.5e6]
    for dt in floats:
        for seed, seed2 in ((1, 2), (0, 5), (87654321, 0)):
            for shape in ([3], [2, 2]):
                fam.add("RandomGamma",
                        lambda shape, alpha, seed=seed, seed2=seed2: R.RandomGamma(
                            shape=shape, alpha=alpha, seed=seed, seed2=seed2),
                        [tf.constant(shape, tf.int32), tf.constant(alphas, dt)],
                        f"RandomGamma/{dname(dt)}/{shape}/seed {seed},{seed2}", calls=3)
    for alpha in ([[0.7, 2.0], [1.0, 9.0]], 4.0, [0.0, -1.0, NAN, INF]):
        fam.add("RandomGamma",
                lambda shape, alpha: R.RandomGamma(shape=shape, alpha=alpha, seed=3, seed2=4),
                [tf.constant([2], tf.int64), tf.constant(alpha, tf.float32)],
                f"RandomGamma/float32/alpha {alpha}", calls=2)
    for shape, alpha in (([0], [1.0]), ([3], []), ([2], np.zeros([0, 2]))):
        fam.add("RandomGamma",
                lambda shape, alpha: R.RandomGamma(shape=shape, alpha=alpha, seed=3, seed2=4),
                [tf.constant(shape, tf.int32), tf.constant(alpha, tf.float32)],
                f"RandomGamma/empty/{shape}/{np.shape(alpha)}", calls=2)

    for rt in numbers:
        for dt in numbers:
            r = [0.5, 3.0, 9.5, 10.0, 31.0, 700.0] if rt in floats else [0, 1, 3, 9, 10, 31, 700]
            fam.add("RandomPoissonV2",
                    lambda shape, rate, dt=dt: R.RandomPoissonV2(
                        shape=shape, rate=rate, seed=7, seed2=8, dtype=dt),
                    [tf.constant([2], tf.int32), tf.constant(r, rt)],
                    f"RandomPoissonV2/{dname(rt)}->{dname(dt)}", calls=2)

    # --- stateless: a seed pair, or a key and counter --------------------
    for dt in floats:
        for s in ((1, 2), (-3, 2**40), (0, 0)):
            fam.add("StatelessRandomGammaV2",
                    lambda shape, seed, alpha: R.StatelessRandomGammaV2(
                        shape=shape, seed=seed, alpha=alpha),
                    [tf.constant([4, 5], tf.int32), seed_tensor(s, tf.int64),
                     tf.constant([0.3, 1.0, 2.0, 7.5, 50.0], dt)],
                    f"StatelessRandomGammaV2/{dname(dt)}/{s[0]},{s[1]}")
    fam.add("StatelessRandomGammaV2",
            lambda shape, seed, alpha: R.StatelessRandomGammaV2(shape=shape, seed=seed, alpha=alpha),
            [tf.constant([3, 2, 2], tf.int64), seed_tensor((5, 6), tf.int32),
             tf.constant([[0.5, 1.5], [4.0, 1.0]], tf.float32)],
            "StatelessRandomGammaV2/float32/alpha [2,2]")
    fam.add("StatelessRandomGammaV2",
            lambda shape, seed, alpha: R.StatelessRandomGammaV2(shape=shape, seed=seed, alpha=alpha),
            [tf.constant([7], tf.int32), seed_tensor((5, 6), tf.int32), tf.constant(2.0, tf.float32)],
            "StatelessRandomGammaV2/float32/scalar alpha")
    fam.add("StatelessRandomGammaV2",
            lambda shape, seed, alpha: R.StatelessRandomGammaV2(shape=shape, seed=seed, alpha=alpha),
            [tf.constant([0, 3], tf.int32), seed_tensor((5, 6), tf.int32),
             tf.constant([1.0, 2.0, 3.0], tf.float32)],
            "StatelessRandomGammaV2/float32/empty")
    for shape, seed in (([3, 4], (1, 2)), ([3], (1, 2, 3))):
        fam.add("StatelessRandomGammaV2",
                lambda shape, seed, alpha: R.StatelessRandomGammaV2(
                    shape=shape, seed=seed, alpha=alpha),
                [tf.constant(shape, tf.int32), tf.constant(seed, tf.int32),
                 tf.constant([1.0, 2.0, 3.0], tf.float32)],
                f"StatelessRandomGammaV2/error/{shape}/{len(seed)} seeds")

    key, counter = R.StatelessRandomGetKeyCounter(seed=tf.constant([9, 10], tf.int32))
    for dt in floats:
        fam.add("StatelessRandomGammaV3",
                lambda shape, key, counter, alg, alpha: R.StatelessRandomGammaV3(
                    shape=shape, key=key, counter=counter, alg=alg, alpha=alpha),
                [tf.constant([6, 3], tf.int32), key, counter, tf.constant(1, tf.int32),
                 tf.constant([0.2, 1.0, 12.0], dt)],
                f"StatelessRandomGammaV3/{dname(dt)}")
    fam.add("StatelessRandomGammaV3",
            lambda shape, key, counter, alg, alpha: R.StatelessRandomGammaV3(
                shape=shape, key=key, counter=counter, alg=alg, alpha=alpha),
            [tf.constant([2], tf.int32), key, counter, tf.constant(2, tf.int32),
             tf.constant([0.2, 1.0], tf.float32)],
            "StatelessRandomGammaV3/error/alg 2")

    for rt in numbers:
        for dt in numbers:
            r = [0.5, 3.0, 9.5, 10.0, 31.0, 700.0] if rt in floats else [0, 1, 3, 9, 10, 31, 700]
            fam.add("StatelessRandomPoisson",
                    lambda shape, seed, lam, dt=dt: R.StatelessRandomPoisson(
                        shape=shape, seed=seed, lam=lam, dtype=dt),
                    [tf.constant([3, len(r)], tf.int32), seed_tensor((11, 12), tf.int64),
                     tf.constant(r, rt)],
                    f"StatelessRandomPoisson/{dname(rt)}->{dname(dt)}")
    fam.add("StatelessRandomPoisson",
            lambda shape, seed, lam: R.StatelessRandomPoisson(
                shape=shape, seed=seed, lam=lam, dtype=tf.float32),
            [tf.constant([4], tf.int32), seed_tensor((11, 12), tf.int64),
             tf.constant([1.0, 2.0], tf.float32)],
            "StatelessRandomPoisson/error/shape")

    counts = [0.0, 5.0, 10.0, 30.0, 100.0, 1000.0, 10.5, -3.0, 1e6]
    probs = [0.0, 0.05, 0.3, 0.5, 0.51, 0.7, 0.95, 1.0, NAN]
    for t in floats:
        for dt in numbers:
            # A NaN probability leaves an integer output uninitialized in
            # TensorFlow: only float outputs get one.
            pr = probs if dt in floats else probs[:-1]
            c = np.array(counts, np.float64)[:, None] * np.ones([1, len(pr)])
            p = np.ones([len(counts), 1]) * np.array(pr, np.float64)[None, :]
            if t == tf.float16:
                c = np.minimum(c, 60000.0)
            fam.add("StatelessRandomBinomial",
                    lambda shape, seed, counts, probs, dt=dt: R.StatelessRandomBinomial(
                        shape=shape, seed=seed, counts=counts, probs=probs, dtype=dt),
                    [tf.constant([2, len(counts), len(pr)], tf.int32),
                     seed_tensor((13, 14), tf.int64), tf.constant(c, t), tf.constant(p, t)],
                    f"StatelessRandomBinomial/{dname(t)}->{dname(dt)}")
    # Broadcast parameters: counts [3, 1] against probs [2].
    fam.add("StatelessRandomBinomial",
            lambda shape, seed, counts, probs: R.StatelessRandomBinomial(
                shape=shape, seed=seed, counts=counts, probs=probs, dtype=tf.int32),
            [tf.constant([4, 3, 2], tf.int32), seed_tensor((-1, 7), tf.int32),
             tf.constant([[20.0], [50.0], [7.0]], tf.float32), tf.constant([0.25, 0.8], tf.float32)],
            "StatelessRandomBinomial/broadcast")
    for shape, c, p in (([5], [3.0, 4.0], [0.5]), ([2, 3], [3.0, 4.0], [0.5, 0.1, 0.2])):
        fam.add("StatelessRandomBinomial",
                lambda shape, seed, counts, probs: R.StatelessRandomBinomial(
                    shape=shape, seed=seed, counts=counts, probs=probs, dtype=tf.float32),
                [tf.constant(shape, tf.int32), seed_tensor((1, 2), tf.int32),
                 tf.constant(c, tf.float32), tf.constant(p, tf.float32)],
                f"StatelessRandomBinomial/error/{shape}/{len(c)},{len(p)}")
    # --- Multinomial (tf.random.categorical): a seeded node's runs ----------
    # Few rows and samples: TensorFlow shards rows over threads only past
    # ~10000 cycles of estimated work, and a second shard would skip ahead.
    logits = {
        "[1,3]": [[0.0, 1.0, 2.0]],
        "[2,4]": [[-1.0, 0.5, 3.0, 0.0], [10.0, -INF, 9.0, NAN]],
        "[3,2]": [[0.0, 0.0], [-50.0, 50.0], [INF, 1.0]],
    }
    for name, lg in logits.items():
        for dt in (tf.float32, tf.float64):
            for ns, out in ((1, tf.int64), (5, tf.int32), (9, tf.int64)):
                fam.add("Multinomial",
                        lambda logits, num_samples, out=out: R.Multinomial(
                            logits=logits, num_samples=num_samples, seed=21, seed2=22,
                            output_dtype=out),
                        [tf.constant(lg, dt), tf.constant(ns, tf.int32)],
                        f"Multinomial/{dname(dt)}/{name}/{ns} samples/{dname(out)}", calls=3)
    for seed, seed2 in ((0, 1), (123, 0), (-7, 2**33)):
        fam.add("Multinomial",
                lambda logits, num_samples, seed=seed, seed2=seed2: R.Multinomial(
                    logits=logits, num_samples=num_samples, seed=seed, seed2=seed2),
                [tf.constant([[1.0, 2.0, 3.0, 4.0, 5.0]], tf.float32), tf.constant(6, tf.int32)],
                f"Multinomial/seed {seed},{seed2}", calls=3)
    for lg, ns in (([[1.0, 2.0]], 0), (np.zeros([0, 3]), 4)):
        fam.add("Multinomial",
                lambda logits, num_samples: R.Multinomial(
                    logits=logits, num_samples=num_samples, seed=21, seed2=22),
                [tf.constant(lg, tf.float32), tf.constant(ns, tf.int32)],
                f"Multinomial/empty/{np.shape(lg)}/{ns}", calls=2)
    _truncated(fam)
    return fam


def _truncated(fam):
    """Parameterized truncated normals: each sampler (normals, uniforms,
    exponential), one-sided and flipped bounds. One shard of TensorFlow's
    work only (one batch of the stateful op, a few elements stateless):
    past that its values depend on its thread count."""
    R = tf.raw_ops
    params = {
        "standard": (0.0, 1.0, -2.0, 2.0),
        "narrow": (0.0, 1.0, 0.5, 0.7),
        "tail": (0.0, 1.0, 3.0, INF),
        "left tail": (1.0, 2.0, -INF, -6.0),
        "wide": (5.0, 0.5, -INF, INF),
        "shifted": (-3.0, 4.0, 1.0, 30.0),
        "upper": (2.0, 1.0, -INF, 1.5),
    }
    for dt in (tf.float32, tf.float64):
        for name, (m, s, lo, hi) in params.items():
            # Both bounds infinite: "Invalid parameters" (stateless case only,
            # as an error case).
            if name != "wide":
                fam.add("ParameterizedTruncatedNormal",
                        lambda shape, means, stdevs, minvals, maxvals:
                            R.ParameterizedTruncatedNormal(
                                shape=shape, means=means, stdevs=stdevs, minvals=minvals,
                                maxvals=maxvals, seed=31, seed2=32),
                        [tf.constant([3, 7], tf.int32)]
                        + [tf.constant(x, dt) for x in (m, s, lo, hi)],
                        f"ParameterizedTruncatedNormal/{dname(dt)}/{name}", calls=3)
            fam.add("StatelessParameterizedTruncatedNormal",
                    lambda shape, seed, means, stddevs, minvals, maxvals:
                        R.StatelessParameterizedTruncatedNormal(
                            shape=shape, seed=seed, means=means, stddevs=stddevs,
                            minvals=minvals, maxvals=maxvals),
                    [tf.constant([9], tf.int32), seed_tensor((41, 42), tf.int64)]
                    + [tf.constant(x, dt) for x in (m, s, lo, hi)],
                    f"StatelessParameterizedTruncatedNormal/{dname(dt)}/{name}")
        # Per-batch parameters, one batch (stateful) and broadcast (stateless).
        fam.add("ParameterizedTruncatedNormal",
                lambda shape, means, stdevs, minvals, maxvals: R.ParameterizedTruncatedNormal(
                    shape=shape, means=means, stdevs=stdevs, minvals=minvals,
                    maxvals=maxvals, seed=33, seed2=34),
                [tf.constant([1, 6], tf.int64), tf.constant([1.0], dt), tf.constant([2.0], dt),
                 tf.constant([0.0], dt), tf.constant([1.5], dt)],
                f"ParameterizedTruncatedNormal/{dname(dt)}/vector parameters", calls=2)
        fam.add("StatelessParameterizedTruncatedNormal",
                lambda shape, seed, means, stddevs, minvals, maxvals:
                    R.StatelessParameterizedTruncatedNormal(
                        shape=shape, seed=seed, means=means, stddevs=stddevs,
                        minvals=minvals, maxvals=maxvals),
                [tf.constant([3, 2, 3], tf.int32), seed_tensor((-4, 5), tf.int32),
                 tf.constant([[0.0], [10.0]], dt), tf.constant([1.0, 2.0, 0.5], dt),
                 tf.constant(-1.0, dt), tf.constant([[1.0], [30.0]], dt)],
                f"StatelessParameterizedTruncatedNormal/{dname(dt)}/broadcast")
    for m, s, lo, hi in ((0.0, -1.0, -1.0, 1.0), (0.0, 1.0, 2.0, 1.0), (0.0, 1.0, -INF, INF)):
        fam.add("StatelessParameterizedTruncatedNormal",
                lambda shape, seed, means, stddevs, minvals, maxvals:
                    R.StatelessParameterizedTruncatedNormal(
                        shape=shape, seed=seed, means=means, stddevs=stddevs,
                        minvals=minvals, maxvals=maxvals),
                [tf.constant([4], tf.int32), seed_tensor((1, 2), tf.int64)]
                + [tf.constant(x, tf.float32) for x in (m, s, lo, hi)],
                f"StatelessParameterizedTruncatedNormal/error/{m},{s},{lo},{hi}")
    fam.add("StatelessParameterizedTruncatedNormal",
            lambda shape, seed, means, stddevs, minvals, maxvals:
                R.StatelessParameterizedTruncatedNormal(
                    shape=shape, seed=seed, means=means, stddevs=stddevs,
                    minvals=minvals, maxvals=maxvals),
            [tf.constant([4], tf.int32), seed_tensor((1, 2), tf.int64),
             tf.constant([0.0, 1.0], tf.float32), tf.constant(1.0, tf.float32),
             tf.constant(-1.0, tf.float32), tf.constant(1.0, tf.float32)],
            "StatelessParameterizedTruncatedNormal/error/shape")
